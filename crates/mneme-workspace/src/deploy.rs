//! The sync engine (sinain §3.2–3.3): deploys the agent's instruction files into the
//! workspace at agent start and on `mneme workspace sync`, without ever clobbering what
//! the user owns.
//!
//! The files are compiled into the binary from `crates/mneme-workspace/agent-files/`; a
//! configured override directory (`[workspace] agent_files`) with the same layout replaces
//! or adds to them. In order:
//! 1. `HEARTBEAT.md` and `SKILL.md`: always overwritten (mneme owns the protocol);
//! 2. `koog/`: by extension, `.json .sh .txt` always overwritten, anything else deployed
//!    once (skipped when present); `.sh` files are made executable. mneme's pipeline is
//!    compiled in, so nothing ships here built in: it carries an override directory's own
//!    scripts and settings;
//! 3. `modules/`: `manifest.json` always overwritten; `module-registry.json`, `patterns.md`
//!    and anything else deployed once. A corrupt registry is set aside and rebuilt
//!    ([`crate::modules::repair_registry_locked`]), and the report says so;
//! 4. the Claude Code files, when `[workspace] agent_docs` is on or they already exist:
//!    `.claude/skills/mneme-memory/SKILL.md` always overwritten, and in `CLAUDE.md` only the
//!    section between mneme's markers (the rest of the file is the user's);
//! 5. the effective playbook is regenerated;
//! 6. `memory/`, `memory/playbook-archive/` and `memory/playbook-logs/` exist.
//!
//! "Always overwritten" files are only written when their text differs. Markdown files are
//! rendered with the template placeholders (`{{workspace}}`, `{{user}}`, `{{timezone}}`,
//! `{{date}}`). Every write goes through `paths::resolve` and `write_atomic`; the whole
//! sync holds the workspace lock.

use std::path::{Path, PathBuf};

use jiff::Timestamp;
use serde::Serialize;

use crate::atomic::{WorkspaceLock, ensure_dir, write_atomic};
use crate::config::WorkspaceSettings;
use crate::error::{WorkspaceError, WorkspaceResult};
use crate::{modules, paths, playbook, templates};

/// One built-in agent file: its path in the source layout and its text.
#[derive(Debug, Clone, Copy)]
pub struct AgentFile {
    pub path: &'static str,
    pub source: &'static str,
}

/// The built-in agent files, in the source layout.
pub const AGENT_FILES: &[AgentFile] = &[
    AgentFile { path: "HEARTBEAT.md", source: include_str!("../agent-files/HEARTBEAT.md") },
    AgentFile { path: "SKILL.md", source: include_str!("../agent-files/SKILL.md") },
    AgentFile { path: "modules/module-registry.json", source: include_str!("../agent-files/modules/module-registry.json") },
    AgentFile { path: "modules/base-behaviors/manifest.json", source: include_str!("../agent-files/modules/base-behaviors/manifest.json") },
    AgentFile { path: "modules/base-behaviors/patterns.md", source: include_str!("../agent-files/modules/base-behaviors/patterns.md") },
    AgentFile { path: MEMORY_SKILL_SOURCE, source: include_str!("../agent-files/skills/mneme-memory/SKILL.md") },
    AgentFile { path: CLAUDE_SECTION_SOURCE, source: include_str!("../agent-files/CLAUDE-memory-section.md") },
];

const MEMORY_SKILL_SOURCE: &str = "skills/mneme-memory/SKILL.md";
const CLAUDE_SECTION_SOURCE: &str = "CLAUDE-memory-section.md";
/// Where the memory skill goes: Claude Code reads project skills from `.claude/skills/`.
pub const MEMORY_SKILL: &str = ".claude/skills/mneme-memory/SKILL.md";
/// The Claude Code instruction file whose memory section mneme keeps current.
pub const CLAUDE_MD: &str = "CLAUDE.md";
/// The markers around mneme's section of `CLAUDE.md`.
pub const SECTION_BEGIN: &str = "<!-- mneme:memory-section begin (kept current by `mneme workspace sync`; edit outside the markers) -->";
pub const SECTION_END: &str = "<!-- mneme:memory-section end -->";

/// The instruction files at the workspace root: mneme's protocol for the agent, not the
/// agent's memory (the search index leaves them out).
pub const INSTRUCTION_FILES: &[&str] = &["HEARTBEAT.md", "SKILL.md", CLAUDE_MD];

/// How a file is deployed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Policy {
    /// mneme owns it: rewritten whenever its text differs.
    AlwaysOverwrite,
    /// The user or agent owns it once it exists: written only when missing.
    DeployOnce,
    /// Only mneme's marked section of the file is mneme's.
    ManagedSection,
}

/// What happened to one file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FileOutcome {
    /// Workspace-relative path.
    pub path: String,
    pub policy: Policy,
    /// `created`, `updated`, `unchanged` or `skipped`.
    pub action: String,
    /// Why, in words.
    pub reason: String,
}

/// What a sync did.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SyncReport {
    pub files: Vec<FileOutcome>,
    /// A corrupt registry that was set aside and rebuilt.
    pub repaired: Option<modules::Repair>,
    pub effective: playbook::Effective,
    /// Directories created.
    pub directories: Vec<String>,
}

impl SyncReport {
    /// Paths written (created or updated).
    pub fn written(&self) -> Vec<&str> {
        self.files.iter().filter(|f| f.action == "created" || f.action == "updated").map(|f| f.path.as_str()).collect()
    }
}

/// The source files: the built-ins, with the override directory's files replacing
/// (same relative path) or adding to them. Paths use `/`.
fn sources(settings: &WorkspaceSettings) -> WorkspaceResult<Vec<(String, Vec<u8>)>> {
    let mut files: Vec<(String, Vec<u8>)> = AGENT_FILES.iter().map(|f| (f.path.to_string(), f.source.as_bytes().to_vec())).collect();
    let Some(dir) = &settings.agent_files else { return Ok(files) };
    if !dir.is_dir() {
        return Err(WorkspaceError::Config {
            key: "workspace.agent_files",
            value: dir.display().to_string(),
            reason: "is not a directory".into(),
        });
    }
    let mut found = Vec::new();
    walk(dir, Path::new(""), &mut found)?;
    for relative in found {
        let path = dir.join(&relative);
        let bytes = std::fs::read(&path).map_err(|source| WorkspaceError::io("cannot read", &path, source))?;
        let key = relative.components().map(|c| c.as_os_str().to_string_lossy().into_owned()).collect::<Vec<_>>().join("/");
        match files.iter_mut().find(|(p, _)| *p == key) {
            Some(slot) => slot.1 = bytes,
            None => files.push((key, bytes)),
        }
    }
    Ok(files)
}

/// Regular files under `dir` (symlinks and hidden entries skipped), relative to it.
fn walk(root: &Path, relative: &Path, out: &mut Vec<PathBuf>) -> WorkspaceResult<()> {
    let dir = root.join(relative);
    let entries = std::fs::read_dir(&dir).map_err(|source| WorkspaceError::io("cannot list", &dir, source))?;
    let mut entries: Vec<_> = entries.filter_map(Result::ok).collect();
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        let name = entry.file_name();
        if name.to_string_lossy().starts_with('.') {
            continue;
        }
        let Ok(kind) = entry.file_type() else { continue };
        if kind.is_dir() {
            walk(root, &relative.join(&name), out)?;
        } else if kind.is_file() {
            out.push(relative.join(&name));
        }
    }
    Ok(())
}

/// Where a source file goes and how, or `None` for a file outside the deployed layout.
fn placement(source: &str, docs: bool) -> Option<(String, Policy)> {
    let ext = Path::new(source).extension().and_then(|e| e.to_str()).unwrap_or_default();
    let name = Path::new(source).file_name().and_then(|n| n.to_str()).unwrap_or_default();
    match source {
        "HEARTBEAT.md" | "SKILL.md" => Some((source.into(), Policy::AlwaysOverwrite)),
        MEMORY_SKILL_SOURCE => docs.then(|| (MEMORY_SKILL.into(), Policy::AlwaysOverwrite)),
        CLAUDE_SECTION_SOURCE => docs.then(|| (CLAUDE_MD.into(), Policy::ManagedSection)),
        _ if source.starts_with("koog/") => {
            let policy = if matches!(ext, "json" | "sh" | "txt") { Policy::AlwaysOverwrite } else { Policy::DeployOnce };
            Some((source.into(), policy))
        }
        _ if source.starts_with("modules/") => {
            let policy = if name == modules::MANIFEST { Policy::AlwaysOverwrite } else { Policy::DeployOnce };
            Some((source.into(), policy))
        }
        _ => None,
    }
}

/// The new text of `CLAUDE.md` with `section` between mneme's markers: the markers' content
/// replaced when present, else the section appended (or the file created). `Err` (with the
/// reason) when the markers are broken, in which case the file must be left alone.
pub fn with_section(existing: Option<&str>, section: &str) -> Result<String, String> {
    let block = format!("{SECTION_BEGIN}\n{}\n{SECTION_END}", section.trim());
    let Some(text) = existing else { return Ok(format!("{block}\n")) };
    match (text.find(SECTION_BEGIN), text.find(SECTION_END)) {
        (Some(b), Some(e)) if b < e && text.matches(SECTION_BEGIN).count() == 1 => {
            Ok(format!("{}{block}{}", &text[..b], &text[e + SECTION_END.len()..]))
        }
        (None, None) => {
            let sep = if text.is_empty() || text.ends_with("\n\n") {
                ""
            } else if text.ends_with('\n') {
                "\n"
            } else {
                "\n\n"
            };
            Ok(format!("{text}{sep}{block}\n"))
        }
        _ => Err(format!(
            "{CLAUDE_MD} has unmatched or repeated mneme markers; left as it is (fix the markers to let sync update the section)"
        )),
    }
}

/// Runs the sync: deploys the agent files, repairs a corrupt registry, regenerates the
/// effective playbook and makes sure the playbook directories exist. The workspace must
/// exist (`mneme workspace init`).
pub fn sync(settings: &WorkspaceSettings, now: Timestamp) -> WorkspaceResult<SyncReport> {
    if !settings.dir.is_dir() {
        return Err(WorkspaceError::Invalid(format!(
            "workspace {} does not exist; create it with `mneme workspace init`",
            settings.dir.display()
        )));
    }
    let _lock = WorkspaceLock::acquire(&settings.dir)?;
    let vars = templates::TemplateVars::new(settings, settings.today(now));
    // The Claude Code files are kept once they exist, even with `agent_docs` off.
    let docs = settings.agent_docs
        || settings.dir.join(MEMORY_SKILL).exists()
        || std::fs::read_to_string(settings.dir.join(CLAUDE_MD)).is_ok_and(|t| t.contains(SECTION_BEGIN));
    let mut files = Vec::new();
    for (source, bytes) in sources(settings)? {
        let Some((target, policy)) = placement(&source, docs) else { continue };
        let bytes = if source.ends_with(".md") { templates::render(&String::from_utf8_lossy(&bytes), &vars).into_bytes() } else { bytes };
        files.push(deploy_one(settings, &target, policy, &bytes)?);
    }
    let repaired = modules::repair_registry_locked(settings, now)?;
    let effective = playbook::generate_effective(settings)?;
    let mut directories = Vec::new();
    for dir in [paths::MEMORY_DIR, paths::PLAYBOOK_ARCHIVE_DIR, paths::PLAYBOOK_LOGS_DIR] {
        if ensure_dir(&paths::resolve(&settings.dir, dir)?)? {
            directories.push(dir.to_string());
        }
    }
    Ok(SyncReport { files, repaired, effective, directories })
}

fn deploy_one(settings: &WorkspaceSettings, target: &str, policy: Policy, bytes: &[u8]) -> WorkspaceResult<FileOutcome> {
    let path = paths::resolve(&settings.dir, target)?;
    let existing = match std::fs::read(&path) {
        Ok(b) => Some(b),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(source) => return Err(WorkspaceError::io("cannot read", &path, source)),
    };
    let outcome =
        |action: &str, reason: &str| FileOutcome { path: target.to_string(), policy, action: action.into(), reason: reason.into() };
    let new = match policy {
        Policy::DeployOnce if existing.is_some() => return Ok(outcome("skipped", "deploy-once: present, owned by the user or agent")),
        Policy::ManagedSection => {
            let text = existing.as_deref().map(String::from_utf8_lossy);
            match with_section(text.as_deref(), &String::from_utf8_lossy(bytes)) {
                Ok(t) => t.into_bytes(),
                Err(reason) => return Ok(outcome("skipped", &reason)),
            }
        }
        _ => bytes.to_vec(),
    };
    if existing.as_deref() == Some(new.as_slice()) {
        return Ok(outcome("unchanged", "already current"));
    }
    if let Some(parent) = path.parent() {
        ensure_dir(parent)?;
    }
    write_atomic(&path, &new)?;
    if target.ends_with(".sh") {
        make_executable(&path)?;
    }
    let (action, reason) = match (existing.is_some(), policy) {
        (false, _) => ("created", "missing"),
        (true, Policy::ManagedSection) => ("updated", "mneme's section replaced; the rest of the file kept"),
        (true, _) => ("updated", "always-overwrite: restored to the shipped version"),
    };
    Ok(outcome(action, reason))
}

#[cfg(unix)]
fn make_executable(path: &Path) -> WorkspaceResult<()> {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755))
        .map_err(|source| WorkspaceError::io("cannot chmod", path, source))
}

#[cfg(not(unix))]
fn make_executable(_: &Path) -> WorkspaceResult<()> {
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_claude_section_is_replaced_between_markers_and_appended_otherwise() {
        let fresh = with_section(None, "## Memory System\nA").expect("section");
        assert_eq!(fresh, format!("{SECTION_BEGIN}\n## Memory System\nA\n{SECTION_END}\n"));
        let mine = "# My project\n\nRules.\n";
        let appended = with_section(Some(mine), "## Memory System\nA").expect("section");
        assert!(appended.starts_with("# My project\n\nRules.\n\n<!-- mneme:memory-section begin"), "{appended}");
        let user_edit = appended.replace("Rules.", "Rules, edited.") + "\nMore of mine.\n";
        let updated = with_section(Some(&user_edit), "## Memory System\nB").expect("section");
        assert!(updated.contains("Rules, edited.") && updated.ends_with("\nMore of mine.\n"), "{updated}");
        assert!(updated.contains("## Memory System\nB\n") && !updated.contains("\nA\n"), "{updated}");
        assert!(with_section(Some(&format!("{SECTION_BEGIN}\nno end")), "x").is_err());
    }

    #[test]
    fn placements() {
        assert_eq!(placement("koog/x.json", false), Some(("koog/x.json".into(), Policy::AlwaysOverwrite)));
        assert_eq!(placement("koog/x.py", false), Some(("koog/x.py".into(), Policy::DeployOnce)));
        assert_eq!(placement("modules/a/manifest.json", false).expect("placed").1, Policy::AlwaysOverwrite);
        assert_eq!(placement("modules/module-registry.json", false).expect("placed").1, Policy::DeployOnce);
        assert_eq!(placement("modules/a/notes.txt", false).expect("placed").1, Policy::DeployOnce);
        assert_eq!(placement(MEMORY_SKILL_SOURCE, false), None);
        assert_eq!(placement(MEMORY_SKILL_SOURCE, true).expect("placed").0, MEMORY_SKILL);
        assert_eq!(placement("README.md", true), None);
    }
}
