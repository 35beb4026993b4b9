//! Weekly consolidation: `consolidate` builds the seed's JSON report (core files against
//! their budgets, session logs older than 30 days, reference files over 10 KB, user
//! profiles, recommendations) for the agent to act on; `apply` moves the report's archive
//! candidates into `archive/sessions/`.
//!
//! **Invariant:** consolidation never deletes and never overwrites a memory file. `apply`
//! renames; a name already taken in the archive gets a `-2`, `-3`, … suffix.
//!
//! Differences from the seed's `consolidate.js`: the report is read-only (the seed creates
//! `archive/` as a side effect; here `apply` does), "older than 30 days" is measured from
//! today in the workspace's zone, suffixed archives (`YYYY-MM-DD-2.md`, from rotation) are
//! candidates too, and reference entries carry an `oversize` flag next to the
//! recommendation.

use std::path::{Path, PathBuf};

use jiff::civil::Date;
use jiff::{Timestamp, ToSpan as _};
use serde::{Deserialize, Serialize};

use crate::atomic::{WorkspaceLock, ensure_dir, sync_dir};
use crate::config::WorkspaceSettings;
use crate::error::{WorkspaceError, WorkspaceResult};
use crate::knowledge::{self, Freshness, MemoryKind};
use crate::paths;

/// Session logs whose date is more than this many days before today are archive candidates.
pub const SESSION_ARCHIVE_AGE_DAYS: i64 = 30;
/// Reference files above this size (bytes) get a recommendation.
pub const REFERENCE_SIZE_LIMIT: u64 = 10 * 1024;
/// Where `apply` moves session logs, relative to the workspace.
pub const SESSION_ARCHIVE_DIR: &str = "archive/sessions";

/// The seed's consolidation report (its JSON field names).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConsolidationReport {
    pub timestamp: Timestamp,
    pub core_files: Vec<CoreFileReport>,
    pub sessions: SessionsReport,
    pub reference: Vec<ReferenceFileReport>,
    pub users: Vec<UserReport>,
    /// Files not confirmed (edited or read) for 30 days or more, stalest first, each with a
    /// suggested action (mneme's addition: the seed's §16.6 freshness).
    #[serde(default)]
    pub freshness: Vec<FreshnessReport>,
    pub recommendations: Vec<String>,
}

/// A file whose freshness is aging or fading ([`crate::knowledge`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FreshnessReport {
    pub file: String,
    pub memory_type: MemoryKind,
    pub freshness: Freshness,
    /// The later of its last edit and its last read.
    pub last_confirmed: Timestamp,
    pub idle_days: i64,
    /// Reads counted (search hits, file reads, session-start injection).
    pub reads: u64,
    pub suggested_action: String,
}

/// How often a file was read, and when last: what the store counts (`workspace_reads`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileReads {
    pub count: u64,
    pub last: Timestamp,
}

/// An always-loaded file against its budget.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CoreFileReport {
    pub file: String,
    pub size_bytes: u64,
    pub budget: u64,
    pub over_budget: bool,
    pub last_modified: Timestamp,
}

/// Session logs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionsReport {
    /// File names in `sessions/` older than 30 days, sorted.
    pub archive_candidates: Vec<String>,
}

/// A file in `reference/`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReferenceFileReport {
    pub file: String,
    pub size_bytes: u64,
    pub last_modified: Timestamp,
    pub oversize: bool,
}

/// A user profile.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UserReport {
    pub user_id: String,
    pub size_bytes: u64,
    pub last_modified: Timestamp,
}

/// What `apply` moved, workspace-relative.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ApplyReport {
    pub moved: Vec<MovedFile>,
    /// Candidates that no longer exist (moved by someone else since the report).
    pub gone: Vec<String>,
}

/// One move.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MovedFile {
    pub from: PathBuf,
    pub to: PathBuf,
}

/// Builds the consolidation report for the workspace (which must exist), with freshness from
/// the files' modification times alone. Read-only.
pub fn consolidate(settings: &WorkspaceSettings, now: Timestamp) -> WorkspaceResult<ConsolidationReport> {
    consolidate_with_reads(settings, now, &std::collections::HashMap::new())
}

/// [`consolidate`], a file's reads (by workspace-relative path) counting as confirmations.
pub fn consolidate_with_reads(
    settings: &WorkspaceSettings,
    now: Timestamp,
    reads: &std::collections::HashMap<String, FileReads>,
) -> WorkspaceResult<ConsolidationReport> {
    let root = &settings.dir;
    let mut report = ConsolidationReport {
        timestamp: now,
        core_files: Vec::new(),
        sessions: SessionsReport { archive_candidates: Vec::new() },
        reference: Vec::new(),
        users: Vec::new(),
        freshness: Vec::new(),
        recommendations: Vec::new(),
    };

    for file in [paths::IDENTITY, paths::STATE, paths::REFERENCES] {
        let budget = settings.budget_for(file).expect("core files have budgets");
        let Some((size, modified)) = file_facts(&paths::resolve(root, file)?)? else { continue };
        if size > budget {
            report.recommendations.push(format!("{file} is {size} bytes (budget: {budget}). Trim content."));
        }
        report.core_files.push(CoreFileReport {
            file: file.to_owned(),
            size_bytes: size,
            budget,
            over_budget: size > budget,
            last_modified: modified,
        });
    }

    let cutoff = settings
        .today(now)
        .checked_sub(SESSION_ARCHIVE_AGE_DAYS.days())
        .map_err(|source| WorkspaceError::Time { context: "computing the archive cutoff", source })?;
    for name in list_names(&paths::resolve(root, paths::SESSIONS_DIR)?)? {
        if session_log_date(&name).is_some_and(|date| date < cutoff) {
            report.sessions.archive_candidates.push(name);
        }
    }
    report.sessions.archive_candidates.sort();
    if !report.sessions.archive_candidates.is_empty() {
        report.recommendations.push(format!(
            "{} session log(s) older than {SESSION_ARCHIVE_AGE_DAYS} days. Consider moving to \
             archive/ (`mneme workspace consolidate --apply`).",
            report.sessions.archive_candidates.len()
        ));
    }

    let reference_dir = paths::resolve(root, paths::REFERENCE_DIR)?;
    for name in list_names(&reference_dir)? {
        let file = format!("{}/{name}", paths::REFERENCE_DIR);
        let Some((size, modified)) = file_facts(&paths::resolve(root, &file)?)? else { continue };
        if size > REFERENCE_SIZE_LIMIT {
            report.recommendations.push(format!("{file} is {size} bytes. Consider archiving old entries."));
        }
        report.reference.push(ReferenceFileReport {
            file,
            size_bytes: size,
            last_modified: modified,
            oversize: size > REFERENCE_SIZE_LIMIT,
        });
    }

    let users_dir = paths::resolve(root, paths::USERS_DIR)?;
    for user_id in list_names(&users_dir)? {
        let profile = paths::resolve(root, Path::new(paths::USERS_DIR).join(&user_id).join(paths::PROFILE))?;
        if let Some((size, modified)) = file_facts(&profile)? {
            report.users.push(UserReport { user_id, size_bytes: size, last_modified: modified });
        }
    }

    let mut skipped = Vec::new();
    for file in knowledge::markdown_files(root, u64::MAX, &mut skipped) {
        if !knowledge::reviewed(&file.relative) {
            continue;
        }
        let read = reads.get(&file.relative);
        let confirmed = knowledge::confirmed_at(file.modified(), read.map(|r| r.last));
        let freshness = Freshness::of(&file.relative, confirmed, now, knowledge::AGING_AFTER_DAYS);
        let Some(action) = freshness.suggestion() else { continue };
        report.freshness.push(FreshnessReport {
            memory_type: MemoryKind::of(&file.relative),
            freshness,
            last_confirmed: confirmed,
            idle_days: knowledge::idle_days(confirmed, now),
            reads: read.map_or(0, |r| r.count),
            suggested_action: action.to_string(),
            file: file.relative,
        });
    }
    report.freshness.sort_by(|a, b| b.idle_days.cmp(&a.idle_days).then_with(|| a.file.cmp(&b.file)));
    let count = |f: Freshness| report.freshness.iter().filter(|r| r.freshness == f).count();
    let (aging, fading) = (count(Freshness::Aging), count(Freshness::Fading));
    if aging + fading > 0 {
        report.recommendations.push(format!(
            "{aging} file(s) aging and {fading} fading (not edited or read for {} and {} days or more): \
             review them (see `freshness`); nothing is archived or deleted without you.",
            knowledge::AGING_AFTER_DAYS,
            2 * knowledge::AGING_AFTER_DAYS
        ));
    }
    Ok(report)
}

/// Moves the report's session archive candidates from `sessions/` to `archive/sessions/`,
/// never overwriting. Candidate names are checked again (only `YYYY-MM-DD[-N].md` names are
/// moved), so a hand-edited report cannot move anything else.
pub fn apply(settings: &WorkspaceSettings, report: &ConsolidationReport) -> WorkspaceResult<ApplyReport> {
    let root = &settings.dir;
    let _lock = WorkspaceLock::acquire(root)?;
    let sessions = paths::resolve(root, paths::SESSIONS_DIR)?;
    let archive = paths::resolve(root, SESSION_ARCHIVE_DIR)?;
    let mut result = ApplyReport { moved: Vec::new(), gone: Vec::new() };
    for name in &report.sessions.archive_candidates {
        if session_log_date(name).is_none() {
            return Err(WorkspaceError::refused(Path::new(name), crate::error::PathRefusal::NotAName));
        }
        let from = paths::resolve(root, Path::new(paths::SESSIONS_DIR).join(name))?;
        if from.symlink_metadata().is_err() {
            result.gone.push(name.clone());
            continue;
        }
        ensure_dir(&archive)?;
        let (stem, extension) = name.rsplit_once('.').expect("session log names end in .md");
        let to = paths::free_name(&archive, stem, extension);
        std::fs::rename(&from, &to).map_err(|error| WorkspaceError::io("cannot move to the archive", &to, error))?;
        result.moved.push(MovedFile {
            from: Path::new(paths::SESSIONS_DIR).join(name),
            to: Path::new(SESSION_ARCHIVE_DIR).join(to.file_name().expect("free_name returns a file path")),
        });
    }
    if !result.moved.is_empty() {
        sync_dir(&archive)?;
        sync_dir(&sessions)?;
    }
    Ok(result)
}

/// The date of an archived session log name, `YYYY-MM-DD.md` or `YYYY-MM-DD-N.md`.
pub fn session_log_date(name: &str) -> Option<Date> {
    let stem = name.strip_suffix(".md")?;
    let (date, suffix) = match stem.get(10..) {
        Some("") => (stem, None),
        Some(rest) => (stem.get(..10)?, Some(rest.strip_prefix('-')?)),
        None => return None,
    };
    if suffix.is_some_and(|n| n.is_empty() || !n.bytes().all(|b| b.is_ascii_digit())) {
        return None;
    }
    crate::rotate::header_date(&format!("# Session Log: {date}")).filter(|parsed| parsed.to_string() == date)
}

/// Size and modification time of a regular file; `None` if it does not exist or is not a
/// regular file.
fn file_facts(path: &Path) -> WorkspaceResult<Option<(u64, Timestamp)>> {
    let metadata = match path.metadata() {
        Ok(metadata) if metadata.is_file() => metadata,
        Ok(_) => return Ok(None),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(error) => return Err(WorkspaceError::io("cannot inspect", path, error)),
    };
    Ok(Some((metadata.len(), paths::modified_at(path, &metadata)?)))
}

/// The visible (not dot-prefixed) entry names of `dir`, sorted; empty if it does not exist.
fn list_names(dir: &Path) -> WorkspaceResult<Vec<String>> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(error) => return Err(WorkspaceError::io("cannot list", dir, error)),
    };
    let mut names = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|error| WorkspaceError::io("cannot list", dir, error))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if !name.starts_with('.') {
            names.push(name);
        }
    }
    names.sort();
    Ok(names)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_log_names() {
        let date = |name: &str| session_log_date(name).map(|d| d.to_string());
        assert_eq!(date("2024-01-31.md"), Some("2024-01-31".into()));
        assert_eq!(date("2024-01-31-2.md"), Some("2024-01-31".into()));
        assert_eq!(date("2024-01-31-.md"), None);
        assert_eq!(date("2024-01-31-x.md"), None);
        assert_eq!(date("current.md"), None);
        assert_eq!(date("2024-02-30.md"), None);
        assert_eq!(date("../2024-01-31.md"), None);
        assert_eq!(date("2024-01-31.txt"), None);
    }
}
