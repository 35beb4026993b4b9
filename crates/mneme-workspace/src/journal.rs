//! The agent's journals under `memory/` (the sinain seed's layer 1–2):
//! - daily logs `memory/YYYY-MM-DD.md` (the date in the workspace's zone), appended to,
//!   e.g. by the pre-compaction flush;
//! - named session snapshots `memory/YYYY-MM-DD-<slug>.md`, written once, never replaced;
//! - `SessionTracker`, the in-memory per-session state (start, tool usage, messages) that
//!   on agent end appends one line to `memory/session-summaries.jsonl`;
//! - the command audit log `memory/commands.log` (JSON lines).
//!
//! **Invariant:** everything written here passed through `private::strip` /
//! `private::strip_value` first.

use std::collections::{BTreeMap, HashMap};
use std::io::Write as _;
use std::path::{Path, PathBuf};

use jiff::Timestamp;
use serde::Serialize;
use serde_json::Value;

use crate::atomic::{append_line, ensure_dir, write_atomic};
use crate::config::WorkspaceSettings;
use crate::error::{WorkspaceError, WorkspaceResult};
use crate::{paths, private};

/// The workspace-relative path of the daily log for the day of `now`.
pub fn daily_log_path(settings: &WorkspaceSettings, now: Timestamp) -> PathBuf {
    Path::new(paths::MEMORY_DIR).join(format!("{}.md", settings.today(now)))
}

/// Appends an entry to today's daily log, creating it with a `# Daily Log: YYYY-MM-DD`
/// header. The entry is `## HH:MM` (local time) followed by the text with private blocks
/// removed; an entry that is empty after stripping is not written. Returns the log's
/// workspace-relative path.
pub fn append_daily(settings: &WorkspaceSettings, now: Timestamp, text: &str) -> WorkspaceResult<PathBuf> {
    let relative = daily_log_path(settings, now);
    let text = private::strip(text);
    let text = text.trim();
    if text.is_empty() {
        return Ok(relative);
    }
    let path = memory_file(settings, &relative)?;
    let local = now.to_zoned(settings.timezone.clone());
    let entry = format!("## {}\n\n{text}\n", local.strftime("%H:%M"));
    // The header goes in with the first entry, in the same write, by whoever creates the
    // file; everyone else appends.
    match std::fs::OpenOptions::new().write(true).create_new(true).open(&path) {
        Ok(mut file) => {
            let first = format!("# Daily Log: {}\n\n{entry}", local.date());
            file.write_all(first.as_bytes())
                .and_then(|()| file.sync_data())
                .map_err(|error| WorkspaceError::io("cannot write", &path, error))?;
        }
        Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => {
            append_line(&path, &format!("\n{entry}"))?;
        }
        Err(error) => return Err(WorkspaceError::io("cannot create", &path, error)),
    }
    Ok(relative)
}

/// Writes a named session snapshot `memory/YYYY-MM-DD-<slug>.md` (a free name: an existing
/// snapshot is never replaced, the new one gets `-2`, `-3`, …) with private blocks removed.
/// Returns its workspace-relative path.
pub fn write_snapshot(settings: &WorkspaceSettings, now: Timestamp, name: &str, content: &str) -> WorkspaceResult<PathBuf> {
    let dir = memory_file(settings, Path::new(""))?;
    let stem = format!("{}-{}", settings.today(now), slug(name));
    let path = paths::free_name(&dir, &stem, "md");
    let mut text = private::strip(content).into_owned();
    if !text.ends_with('\n') {
        text.push('\n');
    }
    write_atomic(&path, text.as_bytes())?;
    Ok(Path::new(paths::MEMORY_DIR).join(path.file_name().expect("free_name returns a file path")))
}

/// A file-name slug: lowercase ASCII letters and digits, runs of anything else as one `-`,
/// at most 48 characters, `session` if nothing is left.
pub fn slug(name: &str) -> String {
    let mut slug = String::new();
    for character in name.chars() {
        if character.is_ascii_alphanumeric() {
            slug.push(character.to_ascii_lowercase());
        } else if !slug.is_empty() && !slug.ends_with('-') {
            slug.push('-');
        }
    }
    slug.truncate(48);
    let slug = slug.trim_end_matches('-');
    if slug.is_empty() { "session".to_owned() } else { slug.to_owned() }
}

/// One line of `memory/session-summaries.jsonl` (the sinain seed's §3.7 fields).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionSummary {
    pub ts: Timestamp,
    pub session_key: String,
    pub agent_id: Option<String>,
    pub duration_ms: u64,
    pub success: bool,
    pub error: Option<String>,
    pub tool_call_count: u64,
    pub tool_breakdown: BTreeMap<String, u64>,
    pub message_count: u64,
}

/// Per-session tracking between session start and agent end. Owned by one thread (the
/// daemon wraps it in a mutex); state lives in memory only, so a restart forgets open
/// sessions, and a session seen again after a restart is tracked from that moment.
#[derive(Debug, Default)]
pub struct SessionTracker {
    sessions: HashMap<String, SessionState>,
}

#[derive(Debug, Clone)]
struct SessionState {
    started_at: Timestamp,
    tool_usage: BTreeMap<String, u64>,
    messages: u64,
}

impl SessionTracker {
    pub fn new() -> Self {
        Self::default()
    }

    /// Starts (or restarts) tracking `session_key` at `now`.
    pub fn start(&mut self, session_key: &str, now: Timestamp) {
        self.sessions.insert(session_key.to_owned(), SessionState::new(now));
    }

    /// Counts one call of `tool`; an unknown session starts being tracked at `now`.
    pub fn record_tool(&mut self, session_key: &str, tool: &str, now: Timestamp) {
        let state = self.state(session_key, now);
        *state.tool_usage.entry(tool.to_owned()).or_default() += 1;
    }

    /// Counts one message; an unknown session starts being tracked at `now`.
    pub fn record_message(&mut self, session_key: &str, now: Timestamp) {
        self.state(session_key, now).messages += 1;
    }

    /// The number of sessions being tracked.
    pub fn active(&self) -> usize {
        self.sessions.len()
    }

    /// Stops tracking a session without writing anything (session end, gateway restart).
    pub fn forget(&mut self, session_key: &str) -> bool {
        self.sessions.remove(session_key).is_some()
    }

    /// Stops tracking every session (the gateway stopped); returns how many were open.
    pub fn forget_all(&mut self) -> usize {
        std::mem::take(&mut self.sessions).len()
    }

    /// Stops tracking a session and returns what was tracked (session end).
    pub fn take(&mut self, session_key: &str) -> Option<TrackedSession> {
        self.sessions.remove(session_key).map(|s| TrackedSession {
            started_at: s.started_at,
            tool_usage: s.tool_usage,
            messages: s.messages,
        })
    }

    /// Ends `session_key`: appends its summary to `memory/session-summaries.jsonl` (private
    /// blocks stripped) and stops tracking it. `None` (nothing written) if the session was
    /// not tracked. If the write fails the session stays tracked, so the call can be
    /// repeated.
    pub fn end(
        &mut self,
        settings: &WorkspaceSettings,
        session_key: &str,
        agent_id: Option<&str>,
        success: bool,
        error: Option<&str>,
        now: Timestamp,
    ) -> WorkspaceResult<Option<SessionSummary>> {
        let Some(state) = self.sessions.get(session_key) else { return Ok(None) };
        let elapsed = now.duration_since(state.started_at).as_millis().max(0);
        let summary = SessionSummary {
            ts: now,
            session_key: session_key.to_owned(),
            agent_id: agent_id.map(str::to_owned),
            duration_ms: u64::try_from(elapsed).unwrap_or(u64::MAX),
            success,
            error: error.map(str::to_owned),
            tool_call_count: state.tool_usage.values().sum(),
            tool_breakdown: state.tool_usage.clone(),
            message_count: state.messages,
        };
        append_json_line(settings, Path::new(paths::SESSION_SUMMARIES), &summary, "a session summary")?;
        self.sessions.remove(session_key);
        Ok(Some(summary))
    }

    fn state(&mut self, session_key: &str, now: Timestamp) -> &mut SessionState {
        self.sessions.entry(session_key.to_owned()).or_insert_with(|| SessionState::new(now))
    }
}

impl SessionState {
    fn new(now: Timestamp) -> Self {
        Self { started_at: now, tool_usage: BTreeMap::new(), messages: 0 }
    }
}

/// What the tracker knew of a session when it ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrackedSession {
    pub started_at: Timestamp,
    pub tool_usage: BTreeMap<String, u64>,
    pub messages: u64,
}

/// A session that ended (`/new`, the host closing it), as the session-end path records it.
#[derive(Debug, Clone, Default)]
pub struct SessionEnd<'a> {
    pub session_key: &'a str,
    /// Why it ended (`clear`, `logout`, `prompt_input_exit`, …).
    pub reason: Option<&'a str>,
    /// What the tracker knew (none after a restart).
    pub tracked: Option<TrackedSession>,
    /// The conversation's last messages as (role, text), oldest first.
    pub messages: Vec<(String, String)>,
}

/// Most messages a session snapshot keeps, and characters per message.
const SNAPSHOT_MESSAGES: usize = 20;
const SNAPSHOT_CHARS: usize = 500;

/// The session-end path (sinain §2.2, the session-memory hook on `/new`): a daily-log entry
/// saying the session ended (length, messages, tools) and a named snapshot
/// `memory/YYYY-MM-DD-<slug>.md` with its last messages, named after its first user
/// message. Private blocks are removed from both. Returns the two workspace-relative paths.
pub fn write_session_end(settings: &WorkspaceSettings, now: Timestamp, end: &SessionEnd<'_>) -> WorkspaceResult<Vec<PathBuf>> {
    let first_user =
        end.messages.iter().find(|(role, _)| role == "user").map(|(_, t)| mneme_core::secrets::redact(&private::strip(t)).into_owned());
    let name = first_user.as_deref().map(|t| t.split_whitespace().take(6).collect::<Vec<_>>().join(" ")).filter(|n| !n.is_empty());
    let name = name.unwrap_or_else(|| end.session_key.to_string());
    let mut facts = Vec::new();
    if let Some(t) = &end.tracked {
        let minutes = now.duration_since(t.started_at).as_secs().max(0) / 60;
        let tools: u64 = t.tool_usage.values().sum();
        let breakdown: Vec<String> = t.tool_usage.iter().map(|(k, v)| format!("{k} {v}")).collect();
        facts.push(format!(
            "{minutes} min, {} messages, {tools} tool calls{}",
            t.messages,
            if breakdown.is_empty() { String::new() } else { format!(" ({})", breakdown.join(", ")) }
        ));
    }
    if !end.messages.is_empty() {
        facts.push(format!("{} messages in the snapshot", end.messages.len().min(SNAPSHOT_MESSAGES)));
    }
    let mut snapshot = format!("# Session: {name}\n\n- session: {}\n- ended: {now}\n", end.session_key);
    if let Some(r) = end.reason {
        snapshot.push_str(&format!("- reason: {r}\n"));
    }
    for f in &facts {
        snapshot.push_str(&format!("- {f}\n"));
    }
    let skip = end.messages.len().saturating_sub(SNAPSHOT_MESSAGES);
    if !end.messages.is_empty() {
        snapshot.push_str("\n## Conversation\n");
        for (role, text) in end.messages.iter().skip(skip) {
            // A snapshot is a plain file the agent reads: secrets stay out of it.
            let text = private::strip(text);
            let text = mneme_core::secrets::redact(&text);
            let mut cut: String = text.trim().chars().take(SNAPSHOT_CHARS).collect();
            if text.trim().chars().count() > SNAPSHOT_CHARS {
                cut.push('…');
            }
            snapshot.push_str(&format!("\n**{role}**: {cut}\n"));
        }
    }
    let snapshot_path = write_snapshot(settings, now, &name, &snapshot)?;
    let entry = format!(
        "Session ended: {}{}{}. Snapshot: {}",
        end.session_key,
        end.reason.map(|r| format!(" ({r})")).unwrap_or_default(),
        if facts.is_empty() { String::new() } else { format!(", {}", facts.join("; ")) },
        snapshot_path.display()
    );
    let daily = append_daily(settings, now, &entry)?;
    Ok(vec![daily, snapshot_path])
}

/// One line of the command audit log `memory/commands.log` (the fields of OpenClaw's
/// command-logger, plus optional details).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CommandLogEntry {
    pub timestamp: Timestamp,
    /// What was done: a slash command (`new`, `reset`), a mneme command (`workspace
    /// rotate`), a scheduled task's name.
    pub action: String,
    pub session_key: Option<String>,
    pub sender_id: Option<String>,
    /// Who issued it: `cli`, `hook`, `scheduler`, a channel name.
    pub source: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<Value>,
}

impl CommandLogEntry {
    /// An entry with no session or sender (a CLI command, a scheduled task, the daemon).
    pub fn new(timestamp: Timestamp, action: impl Into<String>, source: impl Into<String>, detail: Option<Value>) -> Self {
        CommandLogEntry { timestamp, action: action.into(), session_key: None, sender_id: None, source: source.into(), detail }
    }
}

/// The command log is rotated once it reaches this size.
pub const COMMAND_LOG_ROTATE_BYTES: u64 = 4 * 1024 * 1024;

/// Appends `entry` to the command audit log (private blocks stripped). A log of
/// [`COMMAND_LOG_ROTATE_BYTES`] or more is first moved aside to
/// `memory/commands-YYYY-MM-DD[-N].log` (never deleted, never overwriting an earlier one).
pub fn log_command(settings: &WorkspaceSettings, entry: &CommandLogEntry) -> WorkspaceResult<()> {
    let path = memory_file(settings, Path::new(paths::COMMAND_LOG))?;
    if path.metadata().is_ok_and(|m| m.len() >= COMMAND_LOG_ROTATE_BYTES) {
        rotate_aside(&path, &format!("commands-{}", settings.today(entry.timestamp)), "log")?;
    }
    append_json_line(settings, Path::new(paths::COMMAND_LOG), entry, "a command log entry")
}

/// Moves `path` to a free `<stem>[-N].<ext>` beside it without ever replacing a file: a
/// hard link to the new name (which fails if taken), then the old name removed. Another
/// writer that rotated it first leaves nothing to move; a line appended in between is in
/// the same file under the new name.
fn rotate_aside(path: &Path, stem: &str, ext: &str) -> WorkspaceResult<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    loop {
        let target = paths::free_name(dir, stem, ext);
        match std::fs::hard_link(path, &target) {
            Ok(()) => {
                return match std::fs::remove_file(path) {
                    Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(WorkspaceError::io("cannot rotate", path, e)),
                    _ => Ok(()),
                };
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(WorkspaceError::io("cannot rotate", path, e)),
        }
    }
}

/// Serialises `value`, strips private blocks from every string in it and appends it as one
/// line to the workspace file `relative` (creating `memory/` if needed).
fn append_json_line(settings: &WorkspaceSettings, relative: &Path, value: &impl Serialize, what: &'static str) -> WorkspaceResult<()> {
    let mut json = serde_json::to_value(value).map_err(|source| WorkspaceError::Json { what, source })?;
    private::strip_value(&mut json);
    let path = memory_file(settings, relative)?;
    append_line(&path, &json.to_string())
}

/// Resolves `relative` (under `memory/`, or `memory/` itself for `""`) after making sure
/// the workspace and `memory/` exist.
fn memory_file(settings: &WorkspaceSettings, relative: &Path) -> WorkspaceResult<PathBuf> {
    ensure_dir(&settings.dir)?;
    let memory = paths::resolve(&settings.dir, paths::MEMORY_DIR)?;
    ensure_dir(&memory)?;
    if relative.as_os_str().is_empty() { Ok(memory) } else { paths::resolve(&settings.dir, relative) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slugs() {
        assert_eq!(slug("Fix the Build!"), "fix-the-build");
        assert_eq!(slug("  --  "), "session");
        assert_eq!(slug("../../etc/passwd"), "etc-passwd");
        assert_eq!(slug("日本語 notes"), "notes");
        assert_eq!(slug(&"a".repeat(100)).len(), 48);
    }
}
