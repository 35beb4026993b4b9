//! The reflection heartbeat's log, `memory/playbook-logs/YYYY-MM-DD.jsonl` (the day in
//! the workspace's zone): one JSON object per line, each with a `kind` (`tick`, `output`,
//! `feedback`, `spawn_result`) and a UTC `ts`. A tick counts as done once its line is
//! appended (the heartbeat's Step-4 gate), so appends are single whole-record writes
//! (`atomic::append_line`), and a crash can at worst truncate the last line: the reader
//! skips what does not parse, and the next append starts on a fresh line.

use std::path::PathBuf;

use jiff::Timestamp;
use jiff::civil::Date;
use serde_json::Value;

use crate::config::WorkspaceSettings;
use crate::error::{WorkspaceError, WorkspaceResult};
use crate::{atomic, paths, private};

/// The workspace-relative path of one day's log.
pub fn log_path(day: Date) -> PathBuf {
    PathBuf::from(paths::PLAYBOOK_LOGS_DIR).join(format!("{day}.jsonl"))
}

/// Appends `value` (an object with a `kind`) to today's log, after `<private>` blocks
/// are removed from its strings; `ts` is set to `now` unless present. Returns the
/// workspace-relative path written.
pub fn append(settings: &WorkspaceSettings, now: Timestamp, value: &Value) -> WorkspaceResult<PathBuf> {
    let Some(object) = value.as_object() else {
        return Err(WorkspaceError::Invalid("a playbook log line must be a JSON object".into()));
    };
    if !object.get("kind").is_some_and(Value::is_string) {
        return Err(WorkspaceError::Invalid("a playbook log line needs a string `kind`".into()));
    }
    let mut value = private::stripped_value(value);
    if let Some(o) = value.as_object_mut() {
        o.entry("ts").or_insert_with(|| Value::String(now.to_string()));
    }
    let relative = log_path(settings.today(now));
    atomic::ensure_dir(&settings.dir)?;
    atomic::ensure_dir(&paths::resolve(&settings.dir, paths::MEMORY_DIR)?)?;
    let dir = paths::resolve(&settings.dir, paths::PLAYBOOK_LOGS_DIR)?;
    atomic::ensure_dir(&dir)?;
    let path = paths::resolve(&settings.dir, &relative)?;
    // A line cut short by a crash has no line end: end it, so this record stands alone.
    if let Ok(bytes) = std::fs::read(&path)
        && bytes.last().is_some_and(|b| *b != b'\n')
    {
        atomic::append_line(&path, "")?;
    }
    atomic::append_line(&path, &value.to_string())?;
    Ok(relative)
}

/// One line of the log.
#[derive(Debug, Clone, PartialEq)]
pub struct LogLine {
    /// The day of the file it is in.
    pub day: Date,
    pub kind: String,
    pub ts: Option<Timestamp>,
    pub value: Value,
}

/// The lines of the days `from..=to`, newest first (later days first, later lines of a
/// day first). Lines that do not parse as objects with a `kind` are skipped; files named
/// other than `YYYY-MM-DD.jsonl` are not read.
pub fn read(settings: &WorkspaceSettings, from: Date, to: Date) -> WorkspaceResult<Vec<LogLine>> {
    if !settings.dir.is_dir() {
        return Ok(Vec::new());
    }
    let dir = paths::resolve(&settings.dir, paths::PLAYBOOK_LOGS_DIR)?;
    let Ok(entries) = std::fs::read_dir(&dir) else { return Ok(Vec::new()) };
    let mut days: Vec<Date> = entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.strip_suffix(".jsonl")?.parse::<Date>().ok())
        .filter(|d| *d >= from && *d <= to)
        .collect();
    days.sort_unstable_by(|a, b| b.cmp(a));
    let mut out = Vec::new();
    for day in days {
        let path = paths::resolve(&settings.dir, log_path(day))?;
        let text = std::fs::read_to_string(&path).map_err(|source| WorkspaceError::io("cannot read", &path, source))?;
        let mut lines: Vec<LogLine> = text
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter_map(|value| {
                let kind = value.get("kind")?.as_str()?.to_string();
                let ts = value.get("ts").and_then(Value::as_str).and_then(|t| t.parse().ok());
                Some(LogLine { day, kind, ts, value })
            })
            .collect();
        lines.reverse();
        out.extend(lines);
    }
    Ok(out)
}

/// Moves heartbeat logs dated before `before` from `memory/playbook-logs/` to
/// `archive/playbook-logs/`, and playbook archive copies of those days from
/// `memory/playbook-archive/` to `archive/playbook-archive/` (never overwriting: a taken
/// name gets a `-2` suffix). Nothing is deleted. Returns the workspace-relative paths moved.
pub fn archive_old(settings: &WorkspaceSettings, before: Date) -> WorkspaceResult<Vec<PathBuf>> {
    let mut moved = Vec::new();
    for (from_dir, to_dir, date_of) in [
        (
            paths::PLAYBOOK_LOGS_DIR,
            "archive/playbook-logs",
            (|n: &str| n.strip_suffix(".jsonl")?.parse::<Date>().ok()) as fn(&str) -> Option<Date>,
        ),
        (paths::PLAYBOOK_ARCHIVE_DIR, "archive/playbook-archive", |n: &str| {
            // sinain-playbook-YYYY-MM-DD-HHMM[-N].md
            n.strip_prefix("sinain-playbook-")?.get(..10)?.parse::<Date>().ok()
        }),
    ] {
        let dir = paths::resolve(&settings.dir, from_dir)?;
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        let mut old: Vec<String> = entries
            .flatten()
            .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
            .filter_map(|e| e.file_name().to_str().map(str::to_string))
            .filter(|n| date_of(n).is_some_and(|d| d < before))
            .collect();
        if old.is_empty() {
            continue;
        }
        old.sort();
        let target = paths::resolve(&settings.dir, to_dir)?;
        atomic::ensure_dir(&paths::resolve(&settings.dir, paths::ARCHIVE_DIR)?)?;
        atomic::ensure_dir(&target)?;
        for name in old {
            let (stem, extension) = name.rsplit_once('.').unwrap_or((name.as_str(), ""));
            let to = paths::free_name(&target, stem, extension);
            let from = dir.join(&name);
            std::fs::rename(&from, &to).map_err(|source| WorkspaceError::io("cannot move to the archive", &to, source))?;
            moved.push(PathBuf::from(to_dir).join(to.file_name().unwrap_or_default()));
        }
        atomic::sync_dir(&target)?;
        atomic::sync_dir(&dir)?;
    }
    Ok(moved)
}
