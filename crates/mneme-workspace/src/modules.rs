//! Knowledge modules (sinain §5): hot-swappable domain expertise under `modules/`, merged
//! by priority into the effective playbook.
//!
//! ```text
//! modules/
//! ├── module-registry.json      {"version":1,"modules":{id:{status,priority,activatedAt,lastTriggered,locked}}}
//! └── <id>/
//!     ├── manifest.json         {id,name,description,version,priority{default,range[lo,hi]},triggers{keywords,filePatterns},locked}
//!     └── patterns.md
//! ```
//!
//! Rules:
//! - Both JSON files are validated on every read; an error names the file and the field
//!   (`modules/module-registry.json: modules.rn.priority: invalid type: string "x", expected i64`).
//! - A change that cannot read the registry changes nothing and says how to recover; only
//!   [`repair_registry_locked`] (run by `mneme workspace sync`) replaces a corrupt registry, after
//!   moving the bad copy aside under a free name and reporting where.
//! - Priorities stay within the manifest's range; locked modules (the registry's flag or
//!   the manifest's) cannot be suspended or disabled; extracted modules start suspended.
//! - Every change takes the workspace lock, writes atomically and regenerates the
//!   effective playbook ([`crate::playbook::generate_effective`]).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use jiff::Timestamp;
use serde::{Deserialize, Serialize, de::DeserializeOwned};

use crate::atomic::{WorkspaceLock, ensure_dir, write_atomic};
use crate::config::WorkspaceSettings;
use crate::error::{WorkspaceError, WorkspaceResult};
use crate::paths;

/// The modules directory.
pub const MODULES_DIR: &str = "modules";
/// The registry of module states.
pub const REGISTRY: &str = "modules/module-registry.json";
/// The registry format this build reads and writes.
pub const REGISTRY_VERSION: u32 = 1;
/// A module's manifest file name.
pub const MANIFEST: &str = "manifest.json";
/// A module's patterns file name.
pub const PATTERNS: &str = "patterns.md";
/// The lowest priority a manifest's range may allow.
pub const PRIORITY_MIN: i64 = 0;
/// The highest priority a manifest's range may allow.
pub const PRIORITY_MAX: i64 = 1000;
/// `lastTriggered` is rewritten at most this often per module.
const TRIGGER_RESOLUTION_SECS: i64 = 60;

fn invalid(file: &str, field: &str, why: impl std::fmt::Display) -> WorkspaceError {
    WorkspaceError::Invalid(format!("{file}: {field}: {why}"))
}

/// A module's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// Merged into the effective playbook.
    Active,
    /// Kept, not merged; `activate` brings it back.
    Suspended,
    /// Retired: not merged and never matched against triggers.
    Disabled,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Active => "active",
            Status::Suspended => "suspended",
            Status::Disabled => "disabled",
        }
    }
}

/// One module's registry entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RegistryEntry {
    pub status: Status,
    /// Merge order: higher comes first in the effective playbook.
    pub priority: i64,
    pub activated_at: Option<Timestamp>,
    /// When a tick or a session's tool calls last matched the module's triggers.
    pub last_triggered: Option<Timestamp>,
    /// Locked modules cannot be suspended or disabled.
    #[serde(default)]
    pub locked: bool,
}

/// `modules/module-registry.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Registry {
    pub version: u32,
    pub modules: BTreeMap<String, RegistryEntry>,
}

impl Default for Registry {
    fn default() -> Self {
        Registry { version: REGISTRY_VERSION, modules: BTreeMap::new() }
    }
}

/// A manifest's priority: the default and the allowed range `[lo, hi]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PriorityRange {
    pub default: i64,
    pub range: [i64; 2],
}

impl PriorityRange {
    pub fn contains(&self, priority: i64) -> bool {
        (self.range[0]..=self.range[1]).contains(&priority)
    }
}

/// What makes a module relevant: words in a tick's summary or a session's tool calls, and
/// globs over the files those tool calls touch (`*.tsx`; a pattern with `/` matches the
/// whole path, `**` crosses directories).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Triggers {
    #[serde(default)]
    pub keywords: Vec<String>,
    #[serde(default)]
    pub file_patterns: Vec<String>,
}

/// `modules/<id>/manifest.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Manifest {
    pub id: String,
    pub name: String,
    #[serde(default)]
    pub description: String,
    pub version: String,
    pub priority: PriorityRange,
    #[serde(default)]
    pub triggers: Triggers,
    #[serde(default)]
    pub locked: bool,
}

/// Checks a module id: 1–64 characters of lowercase ASCII letters, digits and `-`,
/// starting with a letter or digit (it names a directory).
pub fn check_id(id: &str) -> WorkspaceResult<()> {
    let ok = !id.is_empty()
        && id.len() <= 64
        && id.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !id.starts_with('-');
    if ok {
        Ok(())
    } else {
        Err(WorkspaceError::Invalid(format!(
            "module id {id:?} is not valid: use 1-64 lowercase letters, digits and '-', not starting with '-'"
        )))
    }
}

fn parse_json<T: DeserializeOwned>(file: &str, text: &str) -> WorkspaceResult<T> {
    let de = &mut serde_json::Deserializer::from_str(text);
    serde_path_to_error::deserialize(de).map_err(|e| {
        let field = e.path().to_string();
        let field = if e.inner().is_syntax() || e.inner().is_eof() {
            "JSON".to_string()
        } else if field == "." || field == "?" {
            "(top level)".to_string()
        } else {
            field
        };
        invalid(file, &field, e.into_inner())
    })
}

fn read_text(settings: &WorkspaceSettings, relative: &str) -> WorkspaceResult<Option<String>> {
    let path = paths::resolve(&settings.dir, relative)?;
    match std::fs::read_to_string(&path) {
        Ok(t) => Ok(Some(t)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(WorkspaceError::io("cannot read", &path, source)),
    }
}

/// Parses and validates a registry's text.
pub fn parse_registry(text: &str) -> WorkspaceResult<Registry> {
    let registry: Registry = parse_json(REGISTRY, text)?;
    if registry.version != REGISTRY_VERSION {
        let why = if registry.version > REGISTRY_VERSION { "is newer than this mneme reads; upgrade mneme" } else { "is not supported" };
        return Err(invalid(REGISTRY, "version", format!("{} {why} (expected {REGISTRY_VERSION})", registry.version)));
    }
    for id in registry.modules.keys() {
        check_id(id).map_err(|e| invalid(REGISTRY, &format!("modules.{id}"), e))?;
    }
    Ok(registry)
}

/// The registry, `None` when there is none yet.
pub fn read_registry(settings: &WorkspaceSettings) -> WorkspaceResult<Option<Registry>> {
    read_text(settings, REGISTRY)?.map(|t| parse_registry(&t)).transpose()
}

/// Parses and validates a manifest's text; `id` is its folder's name, which the manifest's
/// `id` must equal.
pub fn parse_manifest(id: &str, text: &str) -> WorkspaceResult<Manifest> {
    let file = format!("{MODULES_DIR}/{id}/{MANIFEST}");
    let manifest: Manifest = parse_json(&file, text)?;
    if manifest.id != id {
        return Err(invalid(&file, "id", format!("{:?} does not match its folder {id:?}", manifest.id)));
    }
    if manifest.name.trim().is_empty() {
        return Err(invalid(&file, "name", "is empty"));
    }
    let [lo, hi] = manifest.priority.range;
    if lo > hi || lo < PRIORITY_MIN || hi > PRIORITY_MAX {
        return Err(invalid(
            &file,
            "priority.range",
            format!("[{lo}, {hi}] is not an ordered range within {PRIORITY_MIN}..={PRIORITY_MAX}"),
        ));
    }
    if !manifest.priority.contains(manifest.priority.default) {
        return Err(invalid(&file, "priority.default", format!("{} is outside the range [{lo}, {hi}]", manifest.priority.default)));
    }
    for (i, k) in manifest.triggers.keywords.iter().enumerate() {
        if k.trim().is_empty() {
            return Err(invalid(&file, &format!("triggers.keywords[{i}]"), "is empty"));
        }
    }
    for (i, p) in manifest.triggers.file_patterns.iter().enumerate() {
        if p.trim().is_empty() {
            return Err(invalid(&file, &format!("triggers.filePatterns[{i}]"), "is empty"));
        }
    }
    Ok(manifest)
}

/// A module's manifest; `None` when its folder or manifest does not exist.
pub fn read_manifest(settings: &WorkspaceSettings, id: &str) -> WorkspaceResult<Option<Manifest>> {
    check_id(id)?;
    read_text(settings, &format!("{MODULES_DIR}/{id}/{MANIFEST}"))?.map(|t| parse_manifest(id, &t)).transpose()
}

/// A module's `patterns.md`; `None` when it does not exist.
pub fn read_patterns(settings: &WorkspaceSettings, id: &str) -> WorkspaceResult<Option<String>> {
    check_id(id)?;
    read_text(settings, &format!("{MODULES_DIR}/{id}/{PATTERNS}"))
}

/// The folders under `modules/` that look like modules (their name is a valid id), sorted.
pub fn module_folders(settings: &WorkspaceSettings) -> WorkspaceResult<Vec<String>> {
    let dir = paths::resolve(&settings.dir, MODULES_DIR)?;
    let entries = match std::fs::read_dir(&dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => return Err(WorkspaceError::io("cannot list", &dir, source)),
    };
    let mut out: Vec<String> = entries
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|name| check_id(name).is_ok())
        .collect();
    out.sort();
    Ok(out)
}

/// One module as `list` and `info` show it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ModuleView {
    pub id: String,
    /// `None` for a folder with no registry entry (unregistered).
    pub status: Option<Status>,
    pub priority: Option<i64>,
    pub locked: bool,
    pub activated_at: Option<Timestamp>,
    pub last_triggered: Option<Timestamp>,
    pub name: Option<String>,
    pub description: Option<String>,
    pub version: Option<String>,
    /// The manifest's priority range.
    pub range: Option<[i64; 2]>,
    /// Non-blank lines in `patterns.md`.
    pub pattern_lines: usize,
    /// What is wrong with the module's files (a missing or invalid manifest, no patterns).
    pub problems: Vec<String>,
}

/// Everything under `modules/`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ModuleList {
    /// Registered modules, by id.
    pub modules: Vec<ModuleView>,
    /// Folders with a manifest but no registry entry (`activate` registers them).
    pub unregistered: Vec<ModuleView>,
    /// The active stack, highest priority first.
    pub stack: Vec<StackEntry>,
}

/// One entry of the active stack.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StackEntry {
    pub id: String,
    pub priority: i64,
}

/// The active modules, highest priority first (ties by id).
pub fn stack_of(registry: &Registry) -> Vec<StackEntry> {
    let mut stack: Vec<StackEntry> = registry
        .modules
        .iter()
        .filter(|(_, e)| e.status == Status::Active)
        .map(|(id, e)| StackEntry { id: id.clone(), priority: e.priority })
        .collect();
    stack.sort_by(|a, b| b.priority.cmp(&a.priority).then_with(|| a.id.cmp(&b.id)));
    stack
}

/// A module as listed, and its manifest when it reads valid (`info` shows both).
fn view(settings: &WorkspaceSettings, id: &str, entry: Option<&RegistryEntry>) -> (ModuleView, Option<Manifest>) {
    let mut problems = Vec::new();
    let manifest = match read_manifest(settings, id) {
        Ok(Some(m)) => Some(m),
        Ok(None) => {
            problems.push(format!("{MODULES_DIR}/{id}/{MANIFEST} is missing"));
            None
        }
        Err(e) => {
            problems.push(e.to_string());
            None
        }
    };
    let pattern_lines = match read_patterns(settings, id) {
        Ok(Some(p)) => p.lines().filter(|l| !l.trim().is_empty()).count(),
        Ok(None) => {
            problems.push(format!("{MODULES_DIR}/{id}/{PATTERNS} is missing"));
            0
        }
        Err(e) => {
            problems.push(e.to_string());
            0
        }
    };
    if let (Some(e), Some(m)) = (entry, &manifest)
        && !m.priority.contains(e.priority)
    {
        let [lo, hi] = m.priority.range;
        problems.push(format!("priority {} is outside the manifest's range [{lo}, {hi}]", e.priority));
    }
    let view = ModuleView {
        id: id.to_string(),
        status: entry.map(|e| e.status),
        priority: entry.map(|e| e.priority),
        locked: entry.is_some_and(|e| e.locked) || manifest.as_ref().is_some_and(|m| m.locked),
        activated_at: entry.and_then(|e| e.activated_at),
        last_triggered: entry.and_then(|e| e.last_triggered),
        name: manifest.as_ref().map(|m| m.name.clone()),
        description: manifest.as_ref().map(|m| m.description.clone()),
        version: manifest.as_ref().map(|m| m.version.clone()),
        range: manifest.as_ref().map(|m| m.priority.range),
        pattern_lines,
        problems,
    };
    (view, manifest)
}

/// Registered and unregistered modules and the active stack. Fails (naming the file and
/// field) when the registry is corrupt.
pub fn list(settings: &WorkspaceSettings) -> WorkspaceResult<ModuleList> {
    let registry = read_registry(settings)?.unwrap_or_default();
    let modules = registry.modules.iter().map(|(id, e)| view(settings, id, Some(e)).0).collect();
    let unregistered = module_folders(settings)?
        .into_iter()
        .filter(|id| !registry.modules.contains_key(id))
        .filter(|id| settings.dir.join(MODULES_DIR).join(id).join(MANIFEST).exists())
        .map(|id| view(settings, &id, None).0)
        .collect();
    Ok(ModuleList { modules, unregistered, stack: stack_of(&registry) })
}

/// A module's manifest, registry entry and pattern count.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ModuleInfo {
    #[serde(flatten)]
    pub view: ModuleView,
    pub manifest: Option<Manifest>,
    pub entry: Option<RegistryEntry>,
    /// The module's folder, workspace-relative.
    pub path: String,
}

/// One module's details; an unknown id (no registry entry and no folder) is an error.
pub fn info(settings: &WorkspaceSettings, id: &str) -> WorkspaceResult<ModuleInfo> {
    check_id(id)?;
    let registry = read_registry(settings)?.unwrap_or_default();
    let entry = registry.modules.get(id).cloned();
    let folder = settings.dir.join(MODULES_DIR).join(id);
    if entry.is_none() && !folder.is_dir() {
        return Err(unknown(settings, id));
    }
    let (view, manifest) = view(settings, id, entry.as_ref());
    Ok(ModuleInfo { view, manifest, entry, path: format!("{MODULES_DIR}/{id}") })
}

fn unknown(settings: &WorkspaceSettings, id: &str) -> WorkspaceError {
    let known: Vec<String> =
        list(settings).map(|l| l.modules.into_iter().chain(l.unregistered).map(|m| m.id).collect()).unwrap_or_default();
    let known = if known.is_empty() { "none".to_string() } else { known.join(", ") };
    WorkspaceError::NotFound(format!("unknown module {id:?} (known: {known})"))
}

/// What a change did.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Change {
    pub id: String,
    /// `activated`, `suspended`, `disabled`, `priority`, or `unchanged`.
    pub action: String,
    pub status: Status,
    pub priority: i64,
    /// The active stack after the change, highest first.
    pub stack: Vec<StackEntry>,
    /// Whether the effective playbook's text changed.
    pub effective_changed: bool,
}

/// The registry for a change: a corrupt one refuses the change, naming the problem and the
/// way out; a missing one is empty.
fn registry_for_change(settings: &WorkspaceSettings) -> WorkspaceResult<Registry> {
    match read_registry(settings) {
        Ok(r) => Ok(r.unwrap_or_default()),
        Err(e) => Err(WorkspaceError::Refused(format!(
            "{e}; nothing was changed. Fix the file, or run `mneme workspace sync` to set it aside and rebuild it"
        ))),
    }
}

fn write_registry(settings: &WorkspaceSettings, registry: &Registry) -> WorkspaceResult<()> {
    ensure_dir(&paths::resolve(&settings.dir, MODULES_DIR)?)?;
    let mut text = serde_json::to_string_pretty(registry).map_err(|source| WorkspaceError::Json { what: "the module registry", source })?;
    text.push('\n');
    write_atomic(&paths::resolve(&settings.dir, REGISTRY)?, text.as_bytes())
}

/// Runs `change` on the registry under the workspace lock, writes it when it changed and
/// regenerates the effective playbook.
fn change(
    settings: &WorkspaceSettings,
    id: &str,
    apply: impl FnOnce(&mut Registry, Option<&Manifest>) -> WorkspaceResult<&'static str>,
) -> WorkspaceResult<Change> {
    check_id(id)?;
    ensure_dir(&settings.dir)?;
    let _lock = WorkspaceLock::acquire(&settings.dir)?;
    let mut registry = registry_for_change(settings)?;
    let manifest = read_manifest(settings, id)?;
    if manifest.is_none() && !registry.modules.contains_key(id) {
        return Err(unknown(settings, id));
    }
    let before = registry.clone();
    let action = apply(&mut registry, manifest.as_ref())?;
    if registry != before {
        write_registry(settings, &registry)?;
    }
    let effective_changed = crate::playbook::generate_effective(settings)?.changed;
    let entry = &registry.modules[id];
    Ok(Change {
        id: id.to_string(),
        action: if registry == before { "unchanged" } else { action }.to_string(),
        status: entry.status,
        priority: entry.priority,
        stack: stack_of(&registry),
        effective_changed,
    })
}

fn check_priority(id: &str, manifest: Option<&Manifest>, priority: i64) -> WorkspaceResult<()> {
    match manifest {
        Some(m) if !m.priority.contains(priority) => {
            let [lo, hi] = m.priority.range;
            Err(WorkspaceError::Invalid(format!(
                "priority {priority} is outside module {id:?}'s range [{lo}, {hi}] (modules/{id}/manifest.json priority.range); nothing was changed"
            )))
        }
        _ => Ok(()),
    }
}

/// Activates a module (registering a folder that has a manifest), optionally at
/// `priority`; sets `activatedAt` when it was not active. The priority stays within the
/// manifest's range; without one it keeps the registry's, else the manifest's default.
pub fn activate(settings: &WorkspaceSettings, id: &str, priority: Option<i64>, now: Timestamp) -> WorkspaceResult<Change> {
    change(settings, id, |registry, manifest| {
        let Some(manifest) = manifest else {
            return Err(WorkspaceError::Refused(format!(
                "module {id:?} has no manifest (modules/{id}/manifest.json); it cannot be activated"
            )));
        };
        let priority = priority.or(registry.modules.get(id).map(|e| e.priority)).unwrap_or(manifest.priority.default);
        check_priority(id, Some(manifest), priority)?;
        let entry = registry.modules.entry(id.to_string()).or_insert(RegistryEntry {
            status: Status::Suspended,
            priority,
            activated_at: None,
            last_triggered: None,
            locked: manifest.locked,
        });
        if entry.status != Status::Active {
            entry.activated_at = Some(now);
        }
        entry.status = Status::Active;
        entry.priority = priority;
        entry.locked |= manifest.locked;
        Ok("activated")
    })
}

fn deactivate(settings: &WorkspaceSettings, id: &str, to: Status) -> WorkspaceResult<Change> {
    change(settings, id, |registry, manifest| {
        let Some(entry) = registry.modules.get_mut(id) else {
            return Err(WorkspaceError::Refused(format!("module {id:?} is not registered (activate it first)")));
        };
        if entry.locked || manifest.is_some_and(|m| m.locked) {
            return Err(WorkspaceError::Refused(format!("module {id:?} is locked: it cannot be {}; nothing was changed", to.as_str())));
        }
        entry.status = to;
        Ok(to.as_str())
    })
}

/// Suspends a module: kept, no longer merged. Refused for locked modules.
pub fn suspend(settings: &WorkspaceSettings, id: &str) -> WorkspaceResult<Change> {
    deactivate(settings, id, Status::Suspended)
}

/// Disables a module: not merged, never matched. Refused for locked modules.
pub fn disable(settings: &WorkspaceSettings, id: &str) -> WorkspaceResult<Change> {
    deactivate(settings, id, Status::Disabled)
}

/// Sets a registered module's priority, within its manifest's range.
pub fn set_priority(settings: &WorkspaceSettings, id: &str, priority: i64) -> WorkspaceResult<Change> {
    change(settings, id, |registry, manifest| {
        check_priority(id, manifest, priority)?;
        let Some(entry) = registry.modules.get_mut(id) else {
            return Err(WorkspaceError::Refused(format!("module {id:?} is not registered (activate it first)")));
        };
        entry.priority = priority;
        Ok("priority")
    })
}

/// A new module to register (extraction's result).
#[derive(Debug, Clone, PartialEq)]
pub struct NewModule {
    pub manifest: Manifest,
    pub patterns: String,
}

/// Writes a new module's folder and registers it as suspended. Refused, with nothing
/// written, when the id is taken (a folder or a registry entry) or the registry is corrupt.
/// Returns the folder, workspace-relative.
pub fn register_new(settings: &WorkspaceSettings, module: &NewModule) -> WorkspaceResult<PathBuf> {
    let id = module.manifest.id.as_str();
    check_id(id)?;
    let manifest_text =
        serde_json::to_string_pretty(&module.manifest).map_err(|source| WorkspaceError::Json { what: "a manifest", source })?;
    // What is written must read back valid.
    parse_manifest(id, &manifest_text)?;
    ensure_dir(&settings.dir)?;
    let _lock = WorkspaceLock::acquire(&settings.dir)?;
    let mut registry = registry_for_change(settings)?;
    let relative = Path::new(MODULES_DIR).join(id);
    let folder = paths::resolve(&settings.dir, &relative)?;
    if registry.modules.contains_key(id) || folder.exists() {
        return Err(WorkspaceError::Refused(format!(
            "module {id:?} already exists ({}); choose another id, or remove it first",
            relative.display()
        )));
    }
    ensure_dir(&paths::resolve(&settings.dir, MODULES_DIR)?)?;
    let written = (|| {
        ensure_dir(&folder)?;
        write_atomic(&folder.join(MANIFEST), format!("{manifest_text}\n").as_bytes())?;
        write_atomic(&folder.join(PATTERNS), module.patterns.as_bytes())?;
        registry.modules.insert(
            id.to_string(),
            RegistryEntry {
                status: Status::Suspended,
                priority: module.manifest.priority.default,
                activated_at: None,
                last_triggered: None,
                locked: false,
            },
        );
        write_registry(settings, &registry)
    })();
    if let Err(e) = written {
        // Nothing half-made stays behind: the folder is new, so removing it loses nothing.
        let _ = std::fs::remove_dir_all(&folder);
        return Err(e);
    }
    Ok(relative)
}

/// What [`repair_registry_locked`] did.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Repair {
    /// Where the corrupt copy now is, workspace-relative.
    pub set_aside: String,
    /// Why it was refused.
    pub error: String,
    /// The modules the rebuilt registry holds (locked ones active, the rest suspended).
    pub registered: Vec<String>,
}

/// Replaces a corrupt registry: the bad copy is renamed to a free name
/// (`module-registry.json.corrupt-YYYYMMDD-HHMMSS`) and a new registry lists every module
/// folder with a valid manifest, locked ones active and the rest suspended at their
/// default priority. `None` when the registry is readable (or missing). The caller holds
/// the workspace lock (the sync does).
pub fn repair_registry_locked(settings: &WorkspaceSettings, now: Timestamp) -> WorkspaceResult<Option<Repair>> {
    if !settings.dir.is_dir() {
        return Ok(None);
    }
    let Err(error) = read_registry(settings) else { return Ok(None) };
    let path = paths::resolve(&settings.dir, REGISTRY)?;
    let stamp = now.to_zoned(settings.timezone.clone()).strftime("%Y%m%d-%H%M%S").to_string();
    let dir = paths::resolve(&settings.dir, MODULES_DIR)?;
    let mut aside = dir.join(format!("module-registry.json.corrupt-{stamp}"));
    let mut n = 2;
    while aside.exists() {
        aside = dir.join(format!("module-registry.json.corrupt-{stamp}-{n}"));
        n += 1;
    }
    std::fs::rename(&path, &aside).map_err(|source| WorkspaceError::io("cannot set aside", &path, source))?;
    let mut registry = Registry::default();
    for id in module_folders(settings)? {
        if let Ok(Some(m)) = read_manifest(settings, &id) {
            let status = if m.locked { Status::Active } else { Status::Suspended };
            let activated_at = m.locked.then_some(now);
            registry
                .modules
                .insert(id, RegistryEntry { status, priority: m.priority.default, activated_at, last_triggered: None, locked: m.locked });
        }
    }
    write_registry(settings, &registry)?;
    Ok(Some(Repair {
        set_aside: format!("{MODULES_DIR}/{}", aside.file_name().and_then(|n| n.to_str()).unwrap_or_default()),
        error: error.to_string(),
        registered: registry.modules.keys().cloned().collect(),
    }))
}

/// Whether `text` mentions `keyword` as a whole word (or phrase), case-insensitively.
pub fn mentions(text: &str, keyword: &str) -> bool {
    let keyword = keyword.trim().to_lowercase();
    if keyword.is_empty() {
        return false;
    }
    let text = text.to_lowercase();
    let is_word = |c: char| c.is_alphanumeric() || c == '_';
    text.match_indices(&keyword).any(|(i, _)| {
        let before = text[..i].chars().next_back();
        let after = text[i + keyword.len()..].chars().next();
        !before.is_some_and(is_word) && !after.is_some_and(is_word)
    })
}

/// Whether `path` matches a trigger glob: `*` any run without `/`, `**` any run, `?` one
/// character. A pattern without `/` is matched against the file name only.
pub fn glob_matches(pattern: &str, path: &str) -> bool {
    let path = path.trim();
    let subject = if pattern.contains('/') { path.trim_start_matches("./") } else { path.rsplit(['/', '\\']).next().unwrap_or(path) };
    fn go(p: &[char], s: &[char]) -> bool {
        match p.first() {
            None => s.is_empty(),
            Some('*') if p.get(1) == Some(&'*') => {
                let rest = if p.get(2) == Some(&'/') { &p[3..] } else { &p[2..] };
                (0..=s.len()).any(|i| go(rest, &s[i..]))
            }
            Some('*') => (0..=s.len()).take_while(|&i| i == 0 || s[i - 1] != '/').any(|i| go(&p[1..], &s[i..])),
            Some('?') => s.first().is_some_and(|&c| c != '/') && go(&p[1..], &s[1..]),
            Some(c) => s.first() == Some(c) && go(&p[1..], &s[1..]),
        }
    }
    let p: Vec<char> = pattern.trim().chars().collect();
    let s: Vec<char> = subject.chars().collect();
    go(&p, &s)
}

/// The active modules whose triggers match: a keyword in `text`, or a file pattern over
/// one of `files`. Their `lastTriggered` becomes `now` (rewritten at most once a minute
/// per module). Returns the ids matched. A missing or corrupt registry matches nothing.
pub fn record_triggers(settings: &WorkspaceSettings, text: &str, files: &[String], now: Timestamp) -> WorkspaceResult<Vec<String>> {
    let Ok(Some(registry)) = read_registry(settings) else { return Ok(Vec::new()) };
    let matched: Vec<String> = registry
        .modules
        .iter()
        .filter(|(_, e)| e.status == Status::Active)
        .filter(|(id, _)| {
            let Ok(Some(m)) = read_manifest(settings, id) else { return false };
            m.triggers.keywords.iter().any(|k| mentions(text, k))
                || m.triggers.file_patterns.iter().any(|p| files.iter().any(|f| glob_matches(p, f)))
        })
        .map(|(id, _)| id.clone())
        .collect();
    let stale = |e: &RegistryEntry| e.last_triggered.is_none_or(|t| now.as_second() - t.as_second() >= TRIGGER_RESOLUTION_SECS);
    if matched.iter().any(|id| stale(&registry.modules[id])) {
        let _lock = WorkspaceLock::acquire(&settings.dir)?;
        // Re-read under the lock: a change made meanwhile is kept.
        if let Ok(Some(mut registry)) = read_registry(settings) {
            for id in &matched {
                if let Some(e) = registry.modules.get_mut(id)
                    && stale(e)
                {
                    e.last_triggered = Some(now);
                }
            }
            write_registry(settings, &registry)?;
        }
    }
    Ok(matched)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs() {
        assert!(glob_matches("*.tsx", "src/app/Main.tsx"));
        assert!(!glob_matches("*.tsx", "src/app/Main.ts"));
        assert!(glob_matches("src/**/*.kt", "src/a/b/C.kt"));
        assert!(glob_matches("src/**/*.kt", "src/C.kt"));
        assert!(!glob_matches("src/*.kt", "src/a/C.kt"));
        assert!(glob_matches("Podfile?lock", "ios/Podfile.lock"));
        assert!(glob_matches("metro.config.js", "./metro.config.js"));
    }

    #[test]
    fn keywords_match_whole_words() {
        assert!(mentions("Metro bundler crashed again", "metro"));
        assert!(mentions("using react-native 0.74", "react-native"));
        assert!(!mentions("metronome", "metro"));
        assert!(!mentions("anything", " "));
    }

    #[test]
    fn ids() {
        assert!(check_id("react-native-dev").is_ok());
        for bad in ["", "-x", "Upper", "a/b", "..", "a b", &"x".repeat(65)] {
            assert!(check_id(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn registry_errors_name_the_field() {
        let e = parse_registry(r#"{"version":1,"modules":{"rn":{"status":"active","priority":"high","activatedAt":null,"lastTriggered":null,"locked":false}}}"#)
            .expect_err("refused")
            .to_string();
        assert!(e.starts_with("modules/module-registry.json: modules.rn.priority: invalid type"), "{e}");
        let e =
            parse_registry(r#"{"version":1,"modules":{"rn":{"status":"paused","priority":1,"activatedAt":null,"lastTriggered":null}}}"#)
                .expect_err("refused")
                .to_string();
        assert!(e.contains("modules.rn.status: unknown variant `paused`"), "{e}");
        let e = parse_registry(r#"{"version":2,"modules":{}}"#).expect_err("refused").to_string();
        assert!(e.contains("version: 2 is newer"), "{e}");
    }
}
