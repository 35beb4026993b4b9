//! What the agent's memory files are and how fresh they are: the knowledge-base metadata of
//! the zylos seed (§16.4–16.6) for the workspace's Markdown files and their entries.
//!
//! - **Memory type** ([`MemoryKind::of`]) follows from where a file lives in the layout:
//!   session logs and archives are *experiential*, the playbook and knowledge modules
//!   *procedural*, identity, state, decisions and projects *strategic*, everything else
//!   (references, user profiles, preferences, notes) *factual*.
//! - **Freshness** ([`Freshness::of`]) is computed when it is read, never stored: a file is
//!   *active* while it was confirmed (edited, or read through search, a file read or
//!   session-start injection) within `aging_after` days, then *aging*, and *fading* after
//!   twice that; anything under `archive/` is *archived*. The seed stores the column and
//!   has consolidation update it; a value computed from its inputs cannot drift from them
//!   (as salience is computed, `mneme_core::decay`).
//!
//! Nothing here deletes or moves a file: consolidation lists aging and fading files with a
//! suggested action ([`Freshness::suggestion`]) and the agent or the user decides.

use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

use crate::paths;

/// Days without a confirmation before a file is aging (the seed's 30); fading after twice that.
pub const AGING_AFTER_DAYS: i64 = 30;

/// The seed's `memory_type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MemoryKind {
    /// What is so: references, user profiles, preferences, notes.
    Factual,
    /// What happened: session logs, daily logs, the archive.
    Experiential,
    /// How to do things: the playbook, knowledge modules, skills.
    Procedural,
    /// Who the agent is and where it is going: identity, state, decisions, projects.
    Strategic,
}

impl MemoryKind {
    /// The type of the workspace-relative `path` (`/`-separated).
    pub fn of(path: &str) -> MemoryKind {
        let under = |dir: &str| is_under(path, dir);
        if under(paths::SESSIONS_DIR) || under(paths::ARCHIVE_DIR) {
            return MemoryKind::Experiential;
        }
        if path == paths::PLAYBOOK
            || path == paths::EFFECTIVE_PLAYBOOK
            || under(crate::modules::MODULES_DIR)
            || under("skills")
            || under("learning")
        {
            return MemoryKind::Procedural;
        }
        if under(paths::MEMORY_DIR) {
            // Daily logs, snapshots and summaries.
            return MemoryKind::Experiential;
        }
        let strategic = [paths::IDENTITY, paths::STATE, "reference/decisions.md", "reference/projects.md"];
        if strategic.contains(&path) {
            return MemoryKind::Strategic;
        }
        MemoryKind::Factual
    }

    pub fn as_str(self) -> &'static str {
        match self {
            MemoryKind::Factual => "factual",
            MemoryKind::Experiential => "experiential",
            MemoryKind::Procedural => "procedural",
            MemoryKind::Strategic => "strategic",
        }
    }
}

/// The seed's `freshness`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Freshness {
    Active,
    Aging,
    Fading,
    Archived,
}

impl Freshness {
    /// The freshness of `path`, last confirmed (edited or read) at `confirmed`, as of `now`.
    pub fn of(path: &str, confirmed: Timestamp, now: Timestamp, aging_after_days: i64) -> Freshness {
        if is_under(path, paths::ARCHIVE_DIR) {
            return Freshness::Archived;
        }
        let idle = idle_days(confirmed, now);
        if idle >= 2 * aging_after_days {
            Freshness::Fading
        } else if idle >= aging_after_days {
            Freshness::Aging
        } else {
            Freshness::Active
        }
    }

    /// The freshness of `path` last edited at `modified` and last read at `last_read` (the
    /// later confirms it), as of `now`, with the seed's 30 days ([`AGING_AFTER_DAYS`]).
    pub fn of_file(path: &str, modified: Timestamp, last_read: Option<Timestamp>, now: Timestamp) -> Freshness {
        Freshness::of(path, confirmed_at(modified, last_read), now, AGING_AFTER_DAYS)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Freshness::Active => "active",
            Freshness::Aging => "aging",
            Freshness::Fading => "fading",
            Freshness::Archived => "archived",
        }
    }

    /// What consolidation suggests for a file in this state (`None`: nothing to do).
    pub fn suggestion(self) -> Option<&'static str> {
        match self {
            Freshness::Aging => Some("review: is it still true? Reading it or editing it confirms it"),
            Freshness::Fading => Some("update it if it still holds, else move it under archive/ (nothing is deleted for you)"),
            Freshness::Active | Freshness::Archived => None,
        }
    }
}

/// Whole days from `confirmed` to `now` (0 when `confirmed` is later).
pub fn idle_days(confirmed: Timestamp, now: Timestamp) -> i64 {
    (now.as_second() - confirmed.as_second()).max(0) / 86_400
}

/// When a file was last confirmed: the later of its modification and its last read.
pub fn confirmed_at(modified: Timestamp, last_read: Option<Timestamp>) -> Timestamp {
    last_read.map_or(modified, |read| read.max(modified))
}

/// A Markdown file of the workspace, as [`markdown_files`] found it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MarkdownFile {
    /// Workspace-relative, `/`-separated.
    pub relative: String,
    /// Modification time in milliseconds since the epoch.
    pub mtime_ms: i64,
    pub size: u64,
}

impl MarkdownFile {
    pub fn modified(&self) -> Timestamp {
        Timestamp::from_millisecond(self.mtime_ms).unwrap_or(Timestamp::UNIX_EPOCH)
    }
}

fn mtime_ms(time: SystemTime) -> i64 {
    match time.duration_since(UNIX_EPOCH) {
        Ok(d) => d.as_millis() as i64,
        Err(e) => -(e.duration().as_millis() as i64),
    }
}

/// Every regular `*.md` file under `root`, sorted by path: symlinks are not followed (a link
/// cannot pull a file from outside the workspace in), hidden names (`.git`, `.mneme-tmp*`)
/// and the instruction files the sync engine deploys at the root (`HEARTBEAT.md`,
/// `SKILL.md`, `CLAUDE.md`: mneme's protocol, not the agent's memory) are skipped, and so
/// are files over `max_bytes` and unreadable directories (each pushed to `skipped` with why).
pub fn markdown_files(root: &Path, max_bytes: u64, skipped: &mut Vec<(String, String)>) -> Vec<MarkdownFile> {
    let mut out = Vec::new();
    let mut stack = vec![(root.to_path_buf(), String::new())];
    while let Some((dir, prefix)) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            if !prefix.is_empty() {
                skipped.push((prefix, "directory cannot be read".into()));
            }
            continue;
        };
        for entry in entries.flatten() {
            let name = entry.file_name();
            let Some(name) = name.to_str() else { continue };
            if name.starts_with('.') || prefix.is_empty() && crate::deploy::INSTRUCTION_FILES.contains(&name) {
                continue;
            }
            let relative = if prefix.is_empty() { name.to_string() } else { format!("{prefix}/{name}") };
            // file_type() does not follow symlinks.
            let Ok(kind) = entry.file_type() else { continue };
            if kind.is_dir() {
                stack.push((entry.path(), relative));
            } else if kind.is_file() && name.ends_with(".md") {
                let Ok(meta) = entry.metadata() else { continue };
                if meta.len() > max_bytes {
                    skipped.push((relative, format!("larger than {max_bytes} bytes")));
                    continue;
                }
                out.push(MarkdownFile { relative, mtime_ms: meta.modified().map(mtime_ms).unwrap_or(0), size: meta.len() });
            }
        }
    }
    out.sort_by(|a, b| a.relative.cmp(&b.relative));
    out
}

/// Whether consolidation's freshness review covers `path`: not the session logs, the archive
/// or mneme's own journals under `memory/` (each has its own lifecycle: rotation, the
/// 30-day archive rule, the heartbeat's curation).
pub fn reviewed(path: &str) -> bool {
    ![paths::SESSIONS_DIR, paths::ARCHIVE_DIR, paths::MEMORY_DIR].iter().any(|dir| is_under(path, dir))
}

/// Whether the workspace-relative `path` lies inside the folder `dir` (not merely starts
/// with its name: `sessionsX.md` is not under `sessions`).
pub fn is_under(path: &str, dir: &str) -> bool {
    path.strip_prefix(dir).is_some_and(|rest| rest.starts_with('/'))
}
