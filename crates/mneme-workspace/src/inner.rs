//! Inner life (the inner-life seed, issue 18): the agent's emotions in
//! `memory/inner-state.json`, its drive, habits and trust in `drive.json`, `habits.json`
//! and `relationship.json`, and the context levels 1–4 built from them.
//!
//! **Dynamics are computed from elapsed time**, like salience: a stored emotion is an
//! anchor (`value` at `at`), and its current value is `clamp(value + rate × hours / 6)`.
//! Reading never writes, and an event re-anchors at the current value, so reading twice,
//! sweeping hourly or reading once give the same number (the drift never changes sign, so
//! clamping early or late agrees). The seed's "half-life decay" contradicts its own table
//! of linear per-6-hour rates; the rates are the specific, testable part, so they win.
//!
//! | emotion | drift per 6 h | event | hint |
//! |---|---|---|---|
//! | connection | −0.05 | +0.2 per user message | < 0.3 → reach out |
//! | confidence | +0.02 | −0.1 per mistake | < 0.4 → double-check |
//! | curiosity | −0.03 | +0.1 per spark | > 0.7 explore, < 0.3 find a stimulus |
//! | boredom | +1 per day since the last novelty | novelty resets | > 7 → experiment |
//! | frustration | — | +1 per repeat of a problem | count ≥ 3 → systemic fix |
//! | impatience | — | an item pending since a date | > 3 days → reminder |
//!
//! Files are validated on read (the error names the file and the field), written
//! atomically under the workspace lock, and carry a `version` (1) so a later format can
//! migrate; a file from a newer mneme is refused, never overwritten.

use std::path::Path;

use jiff::Timestamp;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::atomic::{WorkspaceLock, ensure_dir, write_atomic};
use crate::config::WorkspaceSettings;
use crate::error::{WorkspaceError, WorkspaceResult};
use crate::paths;

pub const INNER_STATE: &str = "memory/inner-state.json";
pub const DRIVE: &str = "memory/drive.json";
pub const HABITS: &str = "memory/habits.json";
pub const RELATIONSHIP: &str = "memory/relationship.json";
/// The format these files are written in.
pub const VERSION: u32 = 1;

const CONNECTION_DRIFT: f64 = -0.05;
const CONFIDENCE_DRIFT: f64 = 0.02;
const CURIOSITY_DRIFT: f64 = -0.03;

/// An emotion's anchor: `value` at `at`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Anchor {
    pub value: f64,
    pub at: Timestamp,
}

impl Anchor {
    /// The value at `now` with `drift` per 6 hours, clamped to [0, 1].
    pub fn at(&self, drift: f64, now: Timestamp) -> f64 {
        let hours = now.duration_since(self.at).as_secs_f64().max(0.0) / 3600.0;
        (self.value + drift * hours / 6.0).clamp(0.0, 1.0)
    }

    fn bump(&mut self, drift: f64, delta: f64, now: Timestamp) {
        let current = self.at(drift, now);
        *self = Anchor { value: (current + delta).clamp(0.0, 1.0), at: now.max(self.at) };
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Boredom {
    pub last_novelty: Timestamp,
}

/// A problem that keeps coming back.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Frustration {
    pub what: String,
    pub count: u32,
    pub first: Timestamp,
    pub last: Timestamp,
}

/// Something waiting since a date.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Impatience {
    pub what: String,
    pub since: Timestamp,
    /// Where it came from: `queue` for an open task line in `QUEUE.md` or `state.md`
    /// (gone from there, it is resolved); unset for an event.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
}

/// `inner-state.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct InnerState {
    pub version: u32,
    pub connection: Anchor,
    pub confidence: Anchor,
    pub curiosity: Anchor,
    pub boredom: Boredom,
    #[serde(default)]
    pub frustration: Vec<Frustration>,
    #[serde(default)]
    pub impatience: Vec<Impatience>,
    /// Signal tags already acted on (`kind:value`), so notes are never edited.
    #[serde(default)]
    pub consumed_signals: Vec<String>,
    /// The store's audit sequence already looked at for corrections and new skills
    /// (mneme's bookkeeping; unset until the first sense).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub audit_seen: Option<i64>,
    /// The last mistake or repeated problem (what triggers the reflect job).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_mistake: Option<Timestamp>,
}

impl InnerState {
    /// A new agent: middling connection and curiosity, fair confidence, nothing pending.
    pub fn fresh(now: Timestamp) -> InnerState {
        InnerState {
            version: VERSION,
            connection: Anchor { value: 0.5, at: now },
            confidence: Anchor { value: 0.7, at: now },
            curiosity: Anchor { value: 0.5, at: now },
            boredom: Boredom { last_novelty: now },
            frustration: Vec::new(),
            impatience: Vec::new(),
            consumed_signals: Vec::new(),
            audit_seen: None,
            last_mistake: None,
        }
    }

    /// Applies one event at `now`.
    pub fn apply(&mut self, event: &InnerEvent, now: Timestamp) {
        match event {
            InnerEvent::UserMessage {} => self.connection.bump(CONNECTION_DRIFT, 0.2, now),
            InnerEvent::Mistake { .. } => {
                self.confidence.bump(CONFIDENCE_DRIFT, -0.1, now);
                self.last_mistake = Some(now);
            }
            InnerEvent::Spark { .. } => self.curiosity.bump(CURIOSITY_DRIFT, 0.1, now),
            InnerEvent::Novelty { .. } => self.boredom.last_novelty = now.max(self.boredom.last_novelty),
            InnerEvent::Repeat { what } => match self.frustration.iter_mut().find(|f| f.what == *what) {
                Some(f) => {
                    f.count += 1;
                    f.last = now;
                    if f.count >= 3 {
                        self.last_mistake = Some(now);
                    }
                }
                None => self.frustration.push(Frustration { what: what.clone(), count: 1, first: now, last: now }),
            },
            InnerEvent::Pending { what, since } => {
                if !self.impatience.iter().any(|i| i.what == *what) {
                    self.impatience.push(Impatience { what: what.clone(), since: *since, source: None });
                }
            }
            InnerEvent::Resolved { what } => {
                self.frustration.retain(|f| f.what != *what);
                self.impatience.retain(|i| i.what != *what);
            }
        }
    }

    /// The state at `now`: current values and the action hints their thresholds give.
    pub fn mood(&self, now: Timestamp) -> Mood {
        let connection = self.connection.at(CONNECTION_DRIFT, now);
        let confidence = self.confidence.at(CONFIDENCE_DRIFT, now);
        let curiosity = self.curiosity.at(CURIOSITY_DRIFT, now);
        let boredom_days = (now.duration_since(self.boredom.last_novelty).as_secs().max(0) / 86_400) as u32;
        let mut hints = Vec::new();
        if connection < 0.3 {
            hints.push("reach out: it has been a while since the user wrote".to_string());
        }
        if confidence < 0.4 {
            hints.push("double-check: recent mistakes; verify before acting".to_string());
        }
        if curiosity > 0.7 {
            hints.push("explore: follow an open question".to_string());
        } else if curiosity < 0.3 {
            hints.push("find a stimulus: look for something new to learn".to_string());
        }
        if boredom_days > 7 {
            hints.push(format!("experiment: {boredom_days} days of routine"));
        }
        for f in self.frustration.iter().filter(|f| f.count >= 3) {
            hints.push(format!("systemic fix: {} ({}×)", f.what, f.count));
        }
        let impatience: Vec<(String, u32)> =
            self.impatience.iter().map(|i| (i.what.clone(), (now.duration_since(i.since).as_secs().max(0) / 86_400) as u32)).collect();
        for (what, days) in impatience.iter().filter(|(_, d)| *d > 3) {
            hints.push(format!("reminder: {what} (waiting {days} days)"));
        }
        Mood { connection, confidence, curiosity, boredom_days, frustration: self.frustration.clone(), impatience, hints }
    }
}

/// Something that moves an emotion.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum InnerEvent {
    /// The user wrote (a `message_received` hook). A struct variant, so that the enum's
    /// `deny_unknown_fields` refuses stray fields here too.
    UserMessage {},
    /// The agent got something wrong (a correction of its fact, an explicit report).
    Mistake { what: String },
    /// A spark for curiosity (a `seeking-spark` tag).
    Spark { topic: String },
    /// Something new (a new topic or skill): boredom resets.
    Novelty { what: String },
    /// The same problem again (a normalised failure mode).
    Repeat { what: String },
    /// An item waiting since a date (a queue or state item).
    Pending { what: String, since: Timestamp },
    /// A problem or item is done: it leaves frustration and impatience.
    Resolved { what: String },
}

/// Current values and hints.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Mood {
    pub connection: f64,
    pub confidence: f64,
    pub curiosity: f64,
    #[serde(rename = "boredomDays")]
    pub boredom_days: u32,
    pub frustration: Vec<Frustration>,
    /// (what, days waiting)
    pub impatience: Vec<(String, u32)>,
    pub hints: Vec<String>,
}

impl Mood {
    /// The short "how I am" block (level 1, and the session-start injection).
    pub fn block(&self) -> String {
        let mut out = format!(
            "connection {:.2} · confidence {:.2} · curiosity {:.2} · boredom {} day{}",
            self.connection,
            self.confidence,
            self.curiosity,
            self.boredom_days,
            if self.boredom_days == 1 { "" } else { "s" }
        );
        for h in &self.hints {
            out.push_str(&format!("\n- {h}"));
        }
        out
    }
}

fn invalid(file: &str, field: &str, why: impl std::fmt::Display) -> WorkspaceError {
    WorkspaceError::Invalid(format!("{file}: {field}: {why}"))
}

/// Reads and validates `inner-state.json`; `None` when it does not exist yet.
pub fn read_state(settings: &WorkspaceSettings) -> WorkspaceResult<Option<InnerState>> {
    let Some(value) = read_json(settings, INNER_STATE)? else { return Ok(None) };
    check_version(INNER_STATE, &value)?;
    let state: InnerState = serde_json::from_value(value).map_err(|e| invalid(INNER_STATE, "format", e))?;
    for (field, a) in [("connection", state.connection), ("confidence", state.confidence), ("curiosity", state.curiosity)] {
        if !(a.value.is_finite() && (0.0..=1.0).contains(&a.value)) {
            return Err(invalid(INNER_STATE, &format!("{field}.value"), format!("{} is not within 0..=1", a.value)));
        }
    }
    Ok(Some(state))
}

pub(crate) fn read_json(settings: &WorkspaceSettings, relative: &str) -> WorkspaceResult<Option<Value>> {
    let path = paths::resolve(&settings.dir, relative)?;
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => return Err(WorkspaceError::io("cannot read", &path, source)),
    };
    serde_json::from_str(&text).map(Some).map_err(|e| invalid(relative, "JSON", e))
}

pub(crate) fn check_version(file: &str, value: &Value) -> WorkspaceResult<()> {
    match value.get("version").and_then(Value::as_u64) {
        Some(v) if v <= u64::from(VERSION) => Ok(()),
        Some(v) => Err(invalid(file, "version", format!("{v} is newer than this mneme reads ({VERSION}); upgrade mneme"))),
        None => Err(invalid(file, "version", "missing")),
    }
}

/// Applies `events` at `now` under the workspace lock, creating the state file on first
/// use; returns the state written. A corrupt or newer file is refused, not overwritten.
pub fn record(settings: &WorkspaceSettings, events: &[InnerEvent], now: Timestamp) -> WorkspaceResult<InnerState> {
    update(settings, now, |state| {
        for e in events {
            state.apply(e, now);
        }
    })
}

/// Changes the state with `change` under the workspace lock (read, change, atomic write),
/// creating the file on first use; returns the state written.
pub fn update(settings: &WorkspaceSettings, now: Timestamp, change: impl FnOnce(&mut InnerState)) -> WorkspaceResult<InnerState> {
    if !settings.dir.is_dir() {
        return Err(WorkspaceError::Invalid(format!("no workspace at {} (run `mneme workspace init`)", settings.dir.display())));
    }
    let _lock = WorkspaceLock::acquire(&settings.dir)?;
    let mut state = read_state(settings)?.unwrap_or_else(|| InnerState::fresh(now));
    change(&mut state);
    state.version = VERSION;
    ensure_dir(&paths::resolve(&settings.dir, paths::MEMORY_DIR)?)?;
    let path = paths::resolve(&settings.dir, INNER_STATE)?;
    let text = serde_json::to_string_pretty(&state).map_err(|e| invalid(INNER_STATE, "format", e))? + "\n";
    write_atomic(&path, text.as_bytes())?;
    Ok(state)
}

/// A signal or synapse tag in a note: `<!-- kind: value -->`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Tag {
    pub kind: String,
    pub value: String,
}

/// The tag kinds the seed defines: signals, then synapses.
pub const TAG_KINDS: [&str; 6] = ["dream-topic", "handoff", "seeking-spark", "contradicts", "caused-by", "updates"];

/// The signal and synapse tags in `text`, in order.
pub fn tags(text: &str) -> Vec<Tag> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find("<!--") {
        let after = &rest[start + 4..];
        let Some(end) = after.find("-->") else { break };
        let inner = after[..end].trim();
        if let Some((kind, value)) = inner.split_once(':') {
            let kind = kind.trim();
            if TAG_KINDS.contains(&kind) && !value.trim().is_empty() {
                out.push(Tag { kind: kind.to_string(), value: value.trim().to_string() });
            }
        }
        rest = &after[end + 3..];
    }
    out
}

/// Where signal and synapse tags are read, as (workspace-relative path, text): the last
/// two days' daily notes, the newest dream and the newest diary entry (the dream and the
/// chronicle write their signals there, the only files they may write).
pub fn tag_sources(settings: &WorkspaceSettings, now: Timestamp) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> =
        daily_notes(settings, now, 2).into_iter().map(|(name, text)| (format!("{}/{name}", paths::MEMORY_DIR), text)).collect();
    for dir in ["memory/dreams", "memory/diary"] {
        out.extend(newest_notes(&settings.dir, dir, 1).into_iter().map(|(name, text)| (format!("{dir}/{name}"), text)));
    }
    out
}

/// The key a consumed signal is recorded under: the tag and the file it is in, so the same
/// topic signalled again on another day counts again.
pub fn signal_key(kind: &str, value: &str, source: &str) -> String {
    format!("{kind}: {value} @ {source}")
}

/// Bytes each context level may take.
pub const LEVEL_BUDGETS: [usize; 4] = [600, 8_000, 24_000, 64_000];

fn capped(text: &str, budget: usize) -> String {
    if text.len() <= budget {
        return text.to_string();
    }
    let mut end = budget.saturating_sub(16);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}\n…(cut)", &text[..end])
}

/// A workspace file's text, `None` when it is missing, unreadable or blank.
pub fn read_file(settings: &WorkspaceSettings, relative: &str) -> Option<String> {
    read_text(&settings.dir, relative)
}

fn read_text(root: &Path, relative: &str) -> Option<String> {
    let path = paths::resolve(root, relative).ok()?;
    std::fs::read_to_string(path).ok().filter(|t| !t.trim().is_empty())
}

/// The newest `n` Markdown files of a `memory/` subdirectory, newest (by name) first.
fn newest_notes(root: &Path, dir: &str, n: usize) -> Vec<(String, String)> {
    let Ok(path) = paths::resolve(root, dir) else { return Vec::new() };
    let Ok(entries) = std::fs::read_dir(path) else { return Vec::new() };
    let mut names: Vec<String> =
        entries.flatten().filter_map(|e| e.file_name().to_str().map(str::to_string)).filter(|n| n.ends_with(".md")).collect();
    names.sort_unstable_by(|a, b| b.cmp(a));
    names.into_iter().take(n).filter_map(|name| read_text(root, &format!("{dir}/{name}")).map(|t| (name, t))).collect()
}

/// The daily notes (`memory/YYYY-MM-DD.md`) of the last `days` days, newest first.
fn daily_notes(settings: &WorkspaceSettings, now: Timestamp, days: i64) -> Vec<(String, String)> {
    let today = settings.today(now);
    (0..days)
        .filter_map(|back| {
            let day = today.checked_sub(jiff::Span::new().days(back)).ok()?;
            let name = format!("{day}.md");
            read_text(&settings.dir, &format!("{}/{name}", paths::MEMORY_DIR)).map(|t| (name, t))
        })
        .collect()
}

/// The context of `level` (1 minimal … 4 deep), within [`LEVEL_BUDGETS`]:
/// 1. how I am: current values and hints (what a quick check needs);
/// 2. level 1 + drive + the last two days' notes + the signal tags not yet consumed;
/// 3. level 2 + habits + relationship + the newest diary entries, dreams and `questions.md`;
/// 4. level 3 + the system documents (`BRAIN.md`, `SELF.md`, `MEMORY.md`, `QUEUE.md`) + a
///    weekly digest (the headings of the last seven days' notes).
pub fn context(settings: &WorkspaceSettings, now: Timestamp, level: u8) -> WorkspaceResult<String> {
    if !(1..=4).contains(&level) {
        return Err(WorkspaceError::Invalid(format!("level {level}: must be 1, 2, 3 or 4")));
    }
    let root = &settings.dir;
    let state = read_state(settings)?.unwrap_or_else(|| InnerState::fresh(now));
    // What this level holds, so a reader (and a model) knows what it was given.
    let mut parts = vec![format!("Context level {level} of 4: {}.", LEVEL_PARTS[..usize::from(level)].join(", "))];
    parts.push(format!("## How I am\n\n{}", state.mood(now).block()));
    // What this level would show but nobody has written yet.
    let mut missing: Vec<String> = Vec::new();
    if level >= 2 {
        // Validated: a broken file is an error naming it and the field, not silent text.
        crate::inner_data::read_drive(settings)?;
        match read_text(root, DRIVE) {
            Some(drive) => parts.push(format!("## Drive\n\n{}", capped(&drive, 2_000))),
            None => missing.push(DRIVE.to_string()),
        }
        let notes = daily_notes(settings, now, 2);
        let signals: Vec<String> = tag_sources(settings, now)
            .iter()
            .flat_map(|(source, t)| tags(t).into_iter().map(move |tag| (source, tag)))
            .filter(|(_, t)| ["dream-topic", "handoff", "seeking-spark"].contains(&t.kind.as_str()))
            .filter(|(source, t)| !state.consumed_signals.contains(&signal_key(&t.kind, &t.value, source)))
            .map(|(_, t)| format!("{}: {}", t.kind, t.value))
            .collect();
        if !signals.is_empty() {
            parts.push(format!("## Signals\n\n- {}", signals.join("\n- ")));
        }
        if notes.is_empty() {
            missing.push("daily notes of the last two days".into());
        }
        for (name, text) in notes {
            parts.push(format!("## Notes {name}\n\n{}", capped(&text, 2_500)));
        }
    }
    if level >= 3 {
        crate::inner_data::read_habits(settings)?;
        if let Some(rel) = crate::inner_data::read_relationship(settings)? {
            let rules = rel.active_rules();
            if !rules.is_empty() {
                parts.push(format!("## Trust rules in force\n\n- {}", rules.join("\n- ")));
            }
        }
        for (title, file) in [("Habits", HABITS), ("Relationship", RELATIONSHIP), ("Questions", "questions.md")] {
            match read_text(root, file) {
                Some(text) => parts.push(format!("## {title}\n\n{}", capped(&text, 3_000))),
                None => missing.push(file.to_string()),
            }
        }
        for (dir, title) in [("memory/diary", "Diary"), ("memory/dreams", "Dream")] {
            let newest = newest_notes(root, dir, 2);
            if newest.is_empty() {
                missing.push(format!("{dir}/"));
            }
            for (name, text) in newest {
                parts.push(format!("## {title} {name}\n\n{}", capped(&text, 2_500)));
            }
        }
    }
    if level >= 4 {
        for file in ["BRAIN.md", "SELF.md", "MEMORY.md", "QUEUE.md"] {
            match read_text(root, file) {
                Some(text) => parts.push(format!("## {file}\n\n{}", capped(&text, 6_000))),
                None => missing.push(file.to_string()),
            }
        }
        let digest: Vec<String> = daily_notes(settings, now, 7)
            .into_iter()
            .map(|(name, text)| {
                let heads: Vec<&str> = text.lines().filter(|l| l.starts_with("## ")).map(|l| l.trim_start_matches("## ")).collect();
                format!("- {name}: {}", if heads.is_empty() { "(no entries)".to_string() } else { heads.join(", ") })
            })
            .collect();
        if digest.is_empty() {
            missing.push("daily notes of the last seven days".into());
        } else {
            parts.push(format!("## Weekly digest\n\n{}", digest.join("\n")));
        }
    }
    if !missing.is_empty() {
        parts.push(format!("## Not written yet\n\n{}", missing.join(", ")));
    }
    Ok(capped(&parts.join("\n\n"), LEVEL_BUDGETS[usize::from(level) - 1]))
}

/// What each context level adds, in order.
const LEVEL_PARTS: [&str; 4] = [
    "how I am",
    "drive, signals and the last two days' notes",
    "habits, relationship, questions, diary and dreams",
    "BRAIN.md, SELF.md, MEMORY.md, QUEUE.md and the week's digest",
];

/// The session-start block: how I am and the hints, when the state file exists.
pub fn injectable(settings: &WorkspaceSettings, now: Timestamp) -> Option<String> {
    let state = read_state(settings).ok()??;
    Some(capped(&state.mood(now).block(), LEVEL_BUDGETS[0]))
}

/// The brain loop and its five extensions (the seed's extension table): who may write
/// what. mneme enforces it: [`job_write`] refuses a write outside the job's files and
/// records the attempt, so a job's output is never trusted to stay in its lane.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Job {
    BrainLoop,
    Reflect,
    Memory,
    Dream,
    Chronicle,
    Evolve,
}

/// The log of job writes and refusals.
pub const JOB_LOG: &str = "memory/inner-jobs.jsonl";

/// Whether `relative` is a Markdown file directly in `dir`.
fn in_dir(relative: &str, dir: &str) -> bool {
    relative.strip_prefix(dir).and_then(|r| r.strip_prefix('/')).is_some_and(|name| name.ends_with(".md") && !name.contains('/'))
}

/// Whether `relative` is a daily note, `memory/YYYY-MM-DD.md`.
fn is_daily_note(relative: &str) -> bool {
    relative.strip_prefix("memory/").and_then(|n| n.strip_suffix(".md")).is_some_and(|d| d.parse::<jiff::civil::Date>().is_ok())
}

impl std::str::FromStr for Job {
    type Err = WorkspaceError;
    fn from_str(s: &str) -> WorkspaceResult<Job> {
        let wanted = s.trim().replace('-', "_");
        Job::ALL
            .into_iter()
            .find(|j| j.name() == wanted)
            .ok_or_else(|| WorkspaceError::Invalid(format!("job {s:?}: must be brain_loop, reflect, memory, dream, chronicle or evolve")))
    }
}

impl Job {
    pub fn name(self) -> &'static str {
        match self {
            Job::BrainLoop => "brain_loop",
            Job::Reflect => "reflect",
            Job::Memory => "memory",
            Job::Dream => "dream",
            Job::Chronicle => "chronicle",
            Job::Evolve => "evolve",
        }
    }

    pub const ALL: [Job; 6] = [Job::BrainLoop, Job::Reflect, Job::Memory, Job::Dream, Job::Chronicle, Job::Evolve];

    /// The scheduled task that runs it.
    pub fn task_name(self) -> &'static str {
        match self {
            Job::BrainLoop => "inner-brain-loop",
            Job::Reflect => "inner-reflect",
            Job::Memory => "inner-memory",
            Job::Dream => "inner-dream",
            Job::Chronicle => "inner-chronicle",
            Job::Evolve => "inner-evolve",
        }
    }

    /// The context level it reads (the seed's context protocol).
    pub fn level(self) -> u8 {
        match self {
            Job::BrainLoop | Job::Memory | Job::Dream => 2,
            Job::Reflect | Job::Chronicle => 3,
            Job::Evolve => 4,
        }
    }

    /// What the job may write, as the refusal message says it.
    pub fn writes(self) -> &'static str {
        match self {
            Job::BrainLoop => "daily notes, QUEUE.md, inner-state.json and drive.json",
            Job::Reflect => "SELF.md and habits.json",
            Job::Memory => "drive.json, inner-state.json, questions.md and MEMORY.md",
            Job::Dream => "drive.json, inner-state.json and memory/dreams/",
            Job::Chronicle => "memory/diary/, inner-state.json and questions.md",
            Job::Evolve => "QUEUE.md only",
        }
    }

    /// Whether the job may write the workspace-relative path `relative`.
    pub fn may_write(self, relative: &str) -> bool {
        match self {
            Job::BrainLoop => is_daily_note(relative) || matches!(relative, "QUEUE.md" | INNER_STATE | DRIVE),
            Job::Reflect => matches!(relative, "SELF.md" | HABITS),
            Job::Memory => matches!(relative, DRIVE | INNER_STATE | "questions.md" | "MEMORY.md"),
            Job::Dream => matches!(relative, DRIVE | INNER_STATE) || in_dir(relative, "memory/dreams"),
            Job::Chronicle => matches!(relative, INNER_STATE | "questions.md") || in_dir(relative, "memory/diary"),
            Job::Evolve => relative == "QUEUE.md",
        }
    }
}

fn log_line(settings: &WorkspaceSettings, line: &Value) -> WorkspaceResult<()> {
    ensure_dir(&paths::resolve(&settings.dir, paths::MEMORY_DIR)?)?;
    crate::atomic::append_line(&paths::resolve(&settings.dir, JOB_LOG)?, &line.to_string())
}

/// Checks that `job` may write `relative` and records the attempt in [`JOB_LOG`]; a path
/// outside the job's files is refused (the error names the job, the path and what the job
/// writes).
pub fn job_check(settings: &WorkspaceSettings, job: Job, relative: &str, now: Timestamp) -> WorkspaceResult<()> {
    let relative = relative.trim_start_matches("./");
    let allowed = job.may_write(relative);
    log_line(settings, &serde_json::json!({ "ts": now.to_string(), "job": job, "path": relative, "written": allowed }))?;
    if allowed {
        Ok(())
    } else {
        Err(WorkspaceError::Invalid(format!(
            "the {} job may not write {relative} (it writes {}); refused and recorded in {JOB_LOG}",
            job.name(),
            job.writes()
        )))
    }
}

/// Records that `job` ran at `now` with `status` (`ok`, `fallback`, `dispatched`,
/// `skipped`) and why.
pub fn log_run(settings: &WorkspaceSettings, job: Job, status: &str, reason: Option<&str>, now: Timestamp) -> WorkspaceResult<()> {
    log_line(settings, &serde_json::json!({ "ts": now.to_string(), "job": job, "run": status, "reason": reason }))
}

/// The job log's lines, oldest first (unreadable lines skipped).
pub fn job_log(settings: &WorkspaceSettings) -> Vec<Value> {
    let Ok(path) = paths::resolve(&settings.dir, JOB_LOG) else { return Vec::new() };
    std::fs::read_to_string(path).unwrap_or_default().lines().filter_map(|l| serde_json::from_str(l).ok()).collect()
}

/// When `job` last ran (any status), from [`JOB_LOG`].
pub fn last_run(settings: &WorkspaceSettings, job: Job) -> Option<Timestamp> {
    job_log(settings).iter().rev().find(|l| l["job"] == job.name() && l.get("run").is_some()).and_then(|l| l["ts"].as_str()?.parse().ok())
}

/// Writes `text` to `relative` for `job` (atomically), or refuses a path outside the
/// job's files: nothing is written, and the attempt is recorded in [`JOB_LOG`] either way.
pub fn job_write(settings: &WorkspaceSettings, job: Job, relative: &str, text: &str, now: Timestamp) -> WorkspaceResult<()> {
    let relative = relative.trim_start_matches("./");
    job_check(settings, job, relative, now)?;
    let path = paths::resolve(&settings.dir, relative)?;
    if let Some(parent) = path.parent() {
        ensure_dir(parent)?;
    }
    write_atomic(&path, text.as_bytes())
}

/// [`job_write`], appending to the file when `append` (under the workspace lock, so two
/// appends never lose one); returns the normalised path written.
pub fn write_for(
    settings: &WorkspaceSettings,
    job: Job,
    relative: &str,
    text: &str,
    append: bool,
    now: Timestamp,
) -> WorkspaceResult<String> {
    let relative = relative.trim_start_matches("./").to_string();
    if !settings.dir.is_dir() {
        return Err(WorkspaceError::Invalid(format!("no workspace at {} (run `mneme workspace init`)", settings.dir.display())));
    }
    if append {
        let _lock = WorkspaceLock::acquire(&settings.dir)?;
        let mut current = read_text(&settings.dir, &relative).unwrap_or_default();
        if !current.is_empty() && !current.ends_with('\n') {
            current.push('\n');
        }
        job_write(settings, job, &relative, &(current + text), now)?;
    } else {
        job_write(settings, job, &relative, text, now)?;
    }
    Ok(relative)
}
