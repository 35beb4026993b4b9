//! Session log rotation: `sessions/current.md` holds one day (in the workspace's zone),
//! named by its `# Session Log: YYYY-MM-DD` header. When that day is over, `rotate` moves
//! the log to `sessions/YYYY-MM-DD.md` and starts a fresh one.
//!
//! Differences from the seed's `rotate-session.js`, all so that no log is ever lost:
//! - An archive name that is taken is never overwritten: the log goes to
//!   `YYYY-MM-DD-2.md`, `-3`, … (the seed's rename would replace it). Suffixing was
//!   chosen over merging because a rename is atomic and leaves both files intact.
//! - A log without a header is not overwritten (the seed rewrites it): if it was last
//!   modified today, today's header is put on top; otherwise it is archived under the
//!   date of its last modification.
//! - Empty or whitespace-only logs are simply replaced by a fresh one.
//!
//! Steps (under the workspace lock, so the daemon's scheduler and a CLI call cannot both
//! rotate): read the header; rename `current.md` to its archive name; write the fresh log
//! atomically; sync the directory. A crash after the rename leaves no `current.md`, which
//! the next `rotate` creates.

use std::path::{Path, PathBuf};

use jiff::Timestamp;
use jiff::civil::Date;
use serde::Serialize;

use crate::atomic::{WorkspaceLock, ensure_dir, sync_dir, write_atomic};
use crate::config::WorkspaceSettings;
use crate::error::{WorkspaceError, WorkspaceResult};
use crate::{paths, templates};

/// What `rotate` did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RotateReport {
    /// Today in the workspace's zone.
    pub today: Date,
    #[serde(flatten)]
    pub outcome: RotateOutcome,
}

/// The outcomes of a rotation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum RotateOutcome {
    /// `current.md` already is today's log; nothing changed.
    SameDay,
    /// There was no `current.md`, or it was empty: a fresh one was written.
    Created,
    /// The log was moved to `archived_to` (workspace-relative) and a fresh one written.
    Rotated { log_date: Date, dated_by: DatedBy, archived_to: PathBuf },
    /// The log had no header and was last modified today: today's header was added.
    HeaderAdded,
}

/// Where the date of a rotated log came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DatedBy {
    Header,
    ModificationTime,
}

/// Rotates `sessions/current.md` if its day (in the workspace's zone) is not today's.
/// The workspace directory must exist.
pub fn rotate(settings: &WorkspaceSettings, now: Timestamp) -> WorkspaceResult<RotateReport> {
    let root = &settings.dir;
    let _lock = WorkspaceLock::acquire(root)?;
    let today = settings.today(now);
    let sessions = paths::resolve(root, paths::SESSIONS_DIR)?;
    ensure_dir(&sessions)?;
    let current = paths::resolve(root, paths::CURRENT_SESSION)?;
    let fresh = templates::session_log(today);

    let content = match std::fs::read(&current) {
        Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            write_atomic(&current, fresh.as_bytes())?;
            return Ok(RotateReport { today, outcome: RotateOutcome::Created });
        }
        Err(error) => return Err(WorkspaceError::io("cannot read", &current, error)),
    };
    if content.trim().is_empty() {
        write_atomic(&current, fresh.as_bytes())?;
        return Ok(RotateReport { today, outcome: RotateOutcome::Created });
    }

    let (log_date, dated_by) = match header_date(&content) {
        Some(date) => (date, DatedBy::Header),
        None => {
            let modified = modified(&current)?;
            let date = modified.to_zoned(settings.timezone.clone()).date();
            if date == today {
                let mut dated = fresh;
                dated.push_str(&content);
                write_atomic(&current, dated.as_bytes())?;
                return Ok(RotateReport { today, outcome: RotateOutcome::HeaderAdded });
            }
            (date, DatedBy::ModificationTime)
        }
    };
    if log_date == today {
        return Ok(RotateReport { today, outcome: RotateOutcome::SameDay });
    }

    let archive = paths::free_name(&sessions, &log_date.to_string(), "md");
    std::fs::rename(&current, &archive).map_err(|error| WorkspaceError::io("cannot archive the session log to", &archive, error))?;
    sync_dir(&sessions)?;
    write_atomic(&current, fresh.as_bytes())?;
    let archived_to = Path::new(paths::SESSIONS_DIR).join(archive.file_name().expect("free_name returns a file path"));
    Ok(RotateReport { today, outcome: RotateOutcome::Rotated { log_date, dated_by, archived_to } })
}

/// The date in the first `# Session Log: YYYY-MM-DD` line, if any line has a valid one.
pub fn header_date(content: &str) -> Option<Date> {
    content.lines().find_map(|line| {
        let rest = line.strip_prefix("# Session Log: ")?;
        let date = rest.get(..10)?;
        let well_formed = date.bytes().enumerate().all(|(index, byte)| match index {
            4 | 7 => byte == b'-',
            _ => byte.is_ascii_digit(),
        });
        if well_formed { date.parse().ok() } else { None }
    })
}

fn modified(path: &Path) -> WorkspaceResult<Timestamp> {
    let metadata = path.metadata().map_err(|error| WorkspaceError::io("cannot read the modification time of", path, error))?;
    paths::modified_at(path, &metadata)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_dates_are_parsed_strictly() {
        let date = |text: &str| header_date(text).map(|d| d.to_string());
        assert_eq!(date("# Session Log: 2024-03-09\n\n- x"), Some("2024-03-09".into()));
        assert_eq!(date("intro\n# Session Log: 2024-03-09 (Sat)"), Some("2024-03-09".into()));
        assert_eq!(date("# Session Log: 2024-13-40"), None);
        assert_eq!(date("# Session Log: 24-03-09"), None);
        assert_eq!(date("## Session Log: 2024-03-09"), None);
        assert_eq!(date("no header"), None);
    }
}
