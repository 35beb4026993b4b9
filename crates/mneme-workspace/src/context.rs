//! What the agent hooks inject: the session-start context (identity, state, references,
//! the primary user's profile, the reflection playbook, and a Memory Sync instruction when
//! conversations pile up), the prompt-submit threshold check and the pre-compaction flush instruction, plus
//! `HookOutput`, the JSON a Claude Code hook prints on stdout.
//!
//! These functions only read a few small files and format text; they are the whole cost
//! of `mneme claude-hook session-start` besides process start. A missing or empty memory file is
//! skipped (a value, not an error); an error means a file could not be read or a path was
//! refused, and the caller prints an empty context and reports it on stderr.
//!
//! Output shape: the seed's scripts print `{"additionalContext": "..."}` at the top level.
//! Claude Code reads injected context only from
//! `{"hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": "..."}}`
//! (and other hosts with strict schemas, such as Codex, reject the top-level key), so
//! `HookOutput` serialises to that shape by default; `HookShape::Flat` gives the seed's.

use std::io::ErrorKind;
use std::path::Path;

use serde::ser::SerializeMap as _;
use serde::{Deserialize, Serialize};

use crate::config::WorkspaceSettings;
use crate::error::{WorkspaceError, WorkspaceResult};
use crate::paths;

/// The unsummarized conversations the conversation log reports (ids inclusive).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct UnsummarizedInfo {
    pub count: u64,
    pub begin_id: i64,
    pub end_id: i64,
}

/// The session-start context: the always-loaded files and the primary user's profile,
/// each under a `=== TITLE ===` header as in the seed, then the Memory Sync instruction if
/// more than `sync_threshold` conversations are unsummarized.
pub fn session_start(settings: &WorkspaceSettings, unsummarized: Option<&UnsummarizedInfo>) -> WorkspaceResult<String> {
    session_start_for(settings, unsummarized, None)
}

/// [`session_start`] for the user who is speaking: their profile (`USER: dana`) when they
/// have one, else the primary user's (zylos §3).
pub fn session_start_for(
    settings: &WorkspaceSettings,
    unsummarized: Option<&UnsummarizedInfo>,
    user: Option<&str>,
) -> WorkspaceResult<String> {
    let root = &settings.dir;
    let (speaking, name, profile) = profile_for(settings, user)?;
    let sections = [
        ("BOT IDENTITY".to_owned(), Path::new(paths::IDENTITY)),
        ("ACTIVE STATE".to_owned(), Path::new(paths::STATE)),
        ("REFERENCES".to_owned(), Path::new(paths::REFERENCES)),
        (if speaking { format!("USER: {name}") } else { format!("PRIMARY USER: {name}") }, profile.as_path()),
    ];
    let mut parts = Vec::new();
    for (title, relative) in sections {
        if let Some(content) = read_memory_file(root, relative)? {
            parts.push(format!("=== {title} ==="));
            parts.push(content);
        }
    }
    if parts.is_empty() {
        parts.push("=== CORE MEMORY ===".to_owned());
        parts.push("No memory files found. This may be a fresh install.".to_owned());
    }
    // The curated long-term memory (sinain §2.1), within the same per-file cap.
    if let Some((name, text)) = curated_memory(settings)
        && let Some(content) = capped(Path::new(name), &text)
    {
        parts.push(format!("=== CURATED MEMORY ({name}) ==="));
        parts.push(content);
    }
    // What reflection learned (the curated playbook), so curation changes the next session.
    if let Some(playbook) = crate::playbook::injectable(settings, settings.budgets.playbook as usize) {
        parts.push("=== PLAYBOOK ===".to_owned());
        parts.push(playbook);
    }
    if let Some(instruction) = prompt_submit(settings, unsummarized) {
        parts.push(instruction);
    }
    Ok(parts.join("\n\n"))
}

/// The profile to inject: the speaking user's (`true`, their name, its path) when `user`
/// is not the primary user and has a profile, else the primary user's.
fn profile_for(settings: &WorkspaceSettings, user: Option<&str>) -> WorkspaceResult<(bool, String, std::path::PathBuf)> {
    let speaker = user
        .filter(|u| *u != settings.primary_user)
        .and_then(|u| paths::profile(u).ok().map(|p| (u, p)))
        .filter(|(_, p)| paths::resolve(&settings.dir, p).is_ok_and(|p| p.is_file()));
    Ok(match speaker {
        Some((u, p)) => (true, u.to_string(), p),
        None => (false, settings.primary_user.clone(), paths::profile(&settings.primary_user)?),
    })
}

/// One of the files that open the session-start block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileSection {
    /// `Identity`, `Active state`, `References`, `User: dana` or `Primary user: owner`.
    pub title: String,
    /// Workspace-relative, `/`-separated.
    pub path: String,
    /// The file's text as injected (capped at [`MAX_INJECTED_BYTES`], cut at a line).
    pub text: String,
}

/// The files that open the one session-start block (zylos §8.2): identity, active state,
/// references, and the profile of the user who is speaking (`user`, when that user has a
/// `users/<user>/profile.md`; zylos §3 loads a user's profile when that user writes), else
/// the primary user's. Missing and blank files are left out.
pub fn core_files(settings: &WorkspaceSettings, user: Option<&str>) -> WorkspaceResult<Vec<FileSection>> {
    let root = &settings.dir;
    let (speaking, name, profile) = profile_for(settings, user)?;
    let profile_title = if speaking { format!("User: {name}") } else { format!("Primary user: {name}") };
    let mut out = Vec::new();
    for (title, relative) in [
        ("Identity".to_owned(), Path::new(paths::IDENTITY)),
        ("Active state".to_owned(), Path::new(paths::STATE)),
        ("References".to_owned(), Path::new(paths::REFERENCES)),
        (profile_title, profile.as_path()),
    ] {
        if let Some(text) = read_memory_file(root, relative)? {
            out.push(FileSection { title, path: relative.to_string_lossy().replace('\\', "/"), text });
        }
    }
    Ok(out)
}

/// `text` with each Markdown heading outside code fences `levels` deeper (at most `######`),
/// so a file placed under a block's own `##` heading nests under it instead of beside it.
pub fn nest_headings(text: &str, levels: usize) -> String {
    let mut fenced = false;
    let lines: Vec<String> = text
        .lines()
        .map(|line| {
            let trimmed = line.trim_start();
            if trimmed.starts_with("```") || trimmed.starts_with("~~~") {
                fenced = !fenced;
                return line.to_owned();
            }
            let hashes = line.len() - line.trim_start_matches('#').len();
            let is_heading = !fenced && (1..=6).contains(&hashes) && line[hashes..].starts_with(' ');
            if is_heading { format!("{}{}", "#".repeat((hashes + levels).min(6)), &line[hashes..]) } else { line.to_owned() }
        })
        .collect();
    let mut out = lines.join("\n");
    if text.ends_with('\n') {
        out.push('\n');
    }
    out
}

/// The mid-session threshold check: the Memory Sync instruction when more than
/// `sync_threshold` conversations are unsummarized, else nothing.
pub fn prompt_submit(settings: &WorkspaceSettings, unsummarized: Option<&UnsummarizedInfo>) -> Option<String> {
    let info = unsummarized.filter(|info| info.count > settings.sync_threshold)?;
    Some(format!(
        "[Action Required] There are {count} unsummarized conversations (conversation id \
         {begin} ~ {end}).\n\
         Please run Memory Sync to process them before any pending user message (memory \
         integrity comes first): `mneme sync fetch --begin {begin} --end {end}`, update the \
         memory files, then `mneme sync checkpoint {end} --summary \"...\"`.",
        count = info.count,
        begin = info.begin_id,
        end = info.end_id,
    ))
}

/// The pre-compaction flush instruction when `usage_percent` is at or above
/// `flush_at_percent`, else nothing (also for NaN).
pub fn context_check(settings: &WorkspaceSettings, usage_percent: f64) -> Option<String> {
    if usage_percent.is_nan() || usage_percent < f64::from(settings.flush_at_percent) {
        return None;
    }
    let dir = settings.dir.display();
    Some(format!(
        "[Pre-Compaction Flush] Context usage is {usage_percent}% (flush at {threshold}%).\n\
         Please save your current working state to memory:\n\
         1. Update {dir}/state.md with the current work focus and pending tasks\n\
         2. Append any important events to {dir}/sessions/current.md\n\
         3. If there are unsummarized conversations (`mneme sync status`), run Memory Sync\n\
         4. Save any knowledge worth keeping (a decision, a fact about a project, a lesson) \
         to its file under {dir}/reference/ (decisions.md, projects.md, preferences.md); \
         `mneme search` finds it later by words or meaning\n\
         5. Then carry on: what is saved is injected again when the session restarts or \
         compacts.",
        threshold = settings.flush_at_percent,
    ))
}

/// The hook events whose output may carry `additionalContext` in Claude Code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HookEvent {
    SessionStart,
    UserPromptSubmit,
    PostToolUse,
}

impl HookEvent {
    /// The event's name in Claude Code's protocol.
    pub fn name(self) -> &'static str {
        match self {
            Self::SessionStart => "SessionStart",
            Self::UserPromptSubmit => "UserPromptSubmit",
            Self::PostToolUse => "PostToolUse",
        }
    }
}

/// Which JSON shape a hook prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum HookShape {
    /// `{"hookSpecificOutput":{"hookEventName":"…","additionalContext":"…"}}`: what Claude
    /// Code reads.
    #[default]
    ClaudeCode,
    /// `{"additionalContext":"…"}`: the seed's scripts.
    Flat,
}

/// A hook's answer. With no context it serialises to `{}` ("nothing to add").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HookOutput {
    pub event: HookEvent,
    pub additional_context: Option<String>,
    pub shape: HookShape,
}

impl HookOutput {
    /// An answer in the Claude Code shape.
    pub fn new(event: HookEvent, additional_context: Option<String>) -> Self {
        Self { event, additional_context, shape: HookShape::ClaudeCode }
    }

    /// The same answer in another shape.
    pub fn with_shape(self, shape: HookShape) -> Self {
        Self { shape, ..self }
    }

    /// The JSON line to print on stdout.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("a map of strings always serialises")
    }
}

impl Serialize for HookOutput {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let Some(context) = &self.additional_context else {
            return serializer.serialize_map(Some(0))?.end();
        };
        let mut map = serializer.serialize_map(Some(1))?;
        match self.shape {
            HookShape::Flat => map.serialize_entry("additionalContext", context)?,
            HookShape::ClaudeCode => map.serialize_entry(
                "hookSpecificOutput",
                &HookSpecificOutput { hook_event_name: self.event.name(), additional_context: context },
            )?,
        }
        map.end()
    }
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct HookSpecificOutput<'a> {
    hook_event_name: &'static str,
    additional_context: &'a str,
}

/// Reads a memory file for injection: `None` when the workspace or the file does not
/// exist or holds only whitespace; trailing whitespace trimmed; invalid UTF-8 replaced.
fn read_memory_file(root: &Path, relative: &Path) -> WorkspaceResult<Option<String>> {
    if !root.exists() {
        return Ok(None);
    }
    let path = paths::resolve(root, relative)?;
    let bytes = match std::fs::read(&path) {
        Ok(bytes) => bytes,
        Err(error) if error.kind() == ErrorKind::NotFound => return Ok(None),
        Err(error) => return Err(WorkspaceError::io("cannot read", &path, error)),
    };
    Ok(capped(relative, &String::from_utf8_lossy(&bytes)))
}

/// `text` as injected: `None` when blank, cut at a line with a note past
/// [`MAX_INJECTED_BYTES`].
fn capped(relative: &Path, text: &str) -> Option<String> {
    let text = text.trim_end();
    if text.trim_start().is_empty() {
        return None;
    }
    if text.len() <= MAX_INJECTED_BYTES {
        return Some(text.to_owned());
    }
    // An oversized file would flood the context: inject its beginning, cut at a line.
    let mut cut = MAX_INJECTED_BYTES;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    let head = text[..cut].rfind('\n').map_or(&text[..cut], |at| &text[..at]);
    Some(format!(
        "{head}\n[... truncated: {} is {} bytes; only the first {MAX_INJECTED_BYTES} are injected. Move details to reference/ \
         or archive/ (`mneme workspace consolidate`).]",
        relative.display(),
        text.len()
    ))
}

/// The most of one memory file injected at session start, in bytes.
pub const MAX_INJECTED_BYTES: usize = 16 * 1024;

/// The context window's use in percent, from a Claude Code transcript (JSON lines): the
/// last assistant entry's `message.usage` (input, cache-creation and cache-read tokens,
/// which together are what the model was sent) against `window` tokens. `None` when the
/// file cannot be read or holds no usage.
/// The last `max` user and assistant text messages of a Claude Code transcript (JSON
/// lines with `type` and `message.content`, a string or text blocks), oldest first.
/// Tool calls and results are left out. Unreadable lines are skipped.
pub fn transcript_messages(path: &std::path::Path, max: usize) -> Vec<(String, String)> {
    let Ok(text) = std::fs::read_to_string(path) else { return Vec::new() };
    let mut out: Vec<(String, String)> = text
        .lines()
        .filter_map(|line| {
            let v: serde_json::Value = serde_json::from_str(line).ok()?;
            let role = v.get("type")?.as_str().filter(|r| *r == "user" || *r == "assistant")?;
            let content = v.get("message")?.get("content")?;
            let text = match content {
                serde_json::Value::String(s) => s.clone(),
                serde_json::Value::Array(blocks) => blocks
                    .iter()
                    .filter(|b| b.get("type").and_then(|t| t.as_str()) == Some("text"))
                    .filter_map(|b| b.get("text")?.as_str())
                    .collect::<Vec<_>>()
                    .join("\n"),
                _ => return None,
            };
            (!text.trim().is_empty()).then(|| (role.to_string(), text))
        })
        .collect();
    let skip = out.len().saturating_sub(max);
    out.drain(..skip);
    out
}

/// The curated long-term memory file (sinain §2.1): `memory.md` in the workspace root, else
/// `MEMORY.md`; `None` when neither exists or it is blank.
pub fn curated_memory(settings: &WorkspaceSettings) -> Option<(&'static str, String)> {
    ["memory.md", "MEMORY.md"].into_iter().find_map(|name| {
        let path = paths::resolve(&settings.dir, name).ok()?;
        // Exact name: on a case-insensitive file system both names reach one file.
        let listed = std::fs::read_dir(&settings.dir).ok()?.flatten().any(|e| e.file_name() == name);
        let text = if listed { std::fs::read_to_string(path).ok()? } else { return None };
        let text = crate::private::strip(&text).trim().to_string();
        (!text.is_empty()).then_some((name, text))
    })
}

pub fn usage_from_transcript(path: &std::path::Path, window: u64) -> Option<f64> {
    let text = std::fs::read_to_string(path).ok()?;
    let used = text.lines().rev().find_map(|line| {
        let v: serde_json::Value = serde_json::from_str(line).ok()?;
        let usage = v.get("message")?.get("usage")?;
        let n = |k: &str| usage.get(k).and_then(serde_json::Value::as_u64).unwrap_or(0);
        let total = n("input_tokens") + n("cache_creation_input_tokens") + n("cache_read_input_tokens");
        (total > 0).then_some(total)
    })?;
    (window > 0).then(|| (used as f64 * 100.0 / window as f64).min(100.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings() -> WorkspaceSettings {
        WorkspaceSettings::new("/srv/agent/workspace", jiff::tz::TimeZone::UTC)
    }

    #[test]
    fn headings_nest_deeper_except_in_code_and_never_past_six() {
        let text = "# Identity\n## Who I Am\nplain #hashtag\n```\n# a shell comment\n```\n###### deep\n#nospace\n";
        let nested = nest_headings(text, 2);
        assert_eq!(nested, "### Identity\n#### Who I Am\nplain #hashtag\n```\n# a shell comment\n```\n###### deep\n#nospace\n");
        assert_eq!(nest_headings("## x", 0), "## x");
    }

    #[test]
    fn an_oversized_file_is_cut_at_a_line_with_a_note() {
        let dir = tempfile::tempdir().expect("dir");
        let settings = WorkspaceSettings::new(dir.path(), jiff::tz::TimeZone::UTC);
        let line = "state line with some words ü\n";
        std::fs::write(dir.path().join("state.md"), line.repeat(5000)).expect("write");
        let context = session_start(&settings, None).expect("context");
        assert!(context.len() < MAX_INJECTED_BYTES + 1024, "{}", context.len());
        assert!(context.contains("[... truncated: state.md is"), "{}", &context[context.len() - 300..]);
        let kept = context.split("=== ACTIVE STATE ===").nth(1).expect("section");
        assert!(kept.trim_start().lines().take_while(|l| !l.starts_with("[...")).all(|l| l == line.trim_end()), "cut mid-line");
    }

    #[test]
    fn hook_output_shapes() {
        let output = HookOutput::new(HookEvent::SessionStart, Some("ctx \"q\"".into()));
        assert_eq!(output.to_json(), r#"{"hookSpecificOutput":{"hookEventName":"SessionStart","additionalContext":"ctx \"q\""}}"#);
        assert_eq!(output.clone().with_shape(HookShape::Flat).to_json(), r#"{"additionalContext":"ctx \"q\""}"#);
        assert_eq!(HookOutput::new(HookEvent::UserPromptSubmit, None).to_json(), "{}");
    }

    #[test]
    fn sync_instruction_only_above_the_threshold() {
        let settings = settings();
        let at = UnsummarizedInfo { count: 30, begin_id: 1, end_id: 30 };
        let over = UnsummarizedInfo { count: 31, begin_id: 5, end_id: 35 };
        assert_eq!(prompt_submit(&settings, None), None);
        assert_eq!(prompt_submit(&settings, Some(&at)), None);
        let text = prompt_submit(&settings, Some(&over)).expect("31 > 30");
        assert!(text.starts_with("[Action Required] There are 31 unsummarized conversations (conversation id 5 ~ 35)."), "{text}");
        assert!(text.contains("mneme sync fetch --begin 5 --end 35"), "{text}");
    }

    #[test]
    fn flush_instruction_at_or_above_the_threshold() {
        let settings = settings();
        assert_eq!(context_check(&settings, 69.9), None);
        assert_eq!(context_check(&settings, f64::NAN), None);
        let text = context_check(&settings, 70.0).expect("70 >= 70");
        assert!(text.starts_with("[Pre-Compaction Flush] Context usage is 70% (flush at 70%)."), "{text}");
        assert!(text.contains("/srv/agent/workspace/state.md"), "{text}");
        assert!(context_check(&settings, 93.5).expect("93.5").contains("93.5%"));
    }
}
