//! Forgetting in the files: after the store erased records, the copies of their text that
//! mneme itself wrote into the workspace go too. mneme's own files are the journals it
//! writes (`journal`): session snapshots (`# Session: …`, named after the conversation's
//! first words), daily logs (`# Daily Log: …`), `memory/session-summaries.jsonl` and
//! `memory/commands.log`. In them:
//! - a line holding a forgotten text becomes `[forgotten]` (a role prefix such as
//!   `**user**: ` stays); a JSONL line holding one is dropped (it is one whole record);
//! - a snapshot whose name was made from a forgotten message is renamed
//!   (`<date>-forgotten.md`), its title redacted, and every mention of its old path in
//!   mneme's other files points to the new one.
//!
//! The agent's own files (everything else) are the agent's and the user's: mneme does not
//! edit them. Those that hold a forgotten text are reported with why, so the caller can
//! say which files to edit. Every rewrite is atomic.

use std::path::{Path, PathBuf};

use crate::atomic::write_atomic;
use crate::config::WorkspaceSettings;
use crate::error::{WorkspaceError, WorkspaceResult};
use crate::paths;

/// What the scrub did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Scrub {
    /// mneme's own files rewritten (workspace-relative; a renamed snapshot by its new name).
    pub rewritten: Vec<String>,
    /// Files that still hold a forgotten text, each with why mneme left it.
    pub kept: Vec<(String, String)>,
}

/// The fewest characters a text must have to be looked for (a two-letter value would
/// take every line that contains it).
const MIN_TEXT: usize = 4;
/// A snapshot keeps this many characters of a message (`journal::SNAPSHOT_CHARS` is
/// 500); a line is matched by the text's beginning, up to this many characters.
const MATCH_PREFIX: usize = 200;
/// Files larger than this are not read (they are not text mneme wrote).
const MAX_FILE: u64 = 16 * 1024 * 1024;

/// Removes `texts` (the forgotten records' texts) from mneme's own files in the
/// workspace and lists the other files that hold one. A workspace that does not exist
/// has nothing to scrub.
pub fn scrub(settings: &WorkspaceSettings, texts: &[String]) -> WorkspaceResult<Scrub> {
    let root = &settings.dir;
    let mut report = Scrub::default();
    let needles: Vec<String> = texts
        .iter()
        .map(|t| crate::private::strip(t).trim().to_lowercase())
        .filter(|t| t.chars().count() >= MIN_TEXT)
        .map(|t| t.chars().take(MATCH_PREFIX).collect())
        .collect();
    if needles.is_empty() || !root.is_dir() {
        return Ok(report);
    }
    // The snapshot names the forgotten messages would have been given.
    let names: Vec<String> = texts.iter().map(|t| first_words(t)).filter(|n| n.chars().count() >= MIN_TEXT).collect();
    let slugs: Vec<String> = names.iter().map(|n| crate::journal::slug(n)).collect();
    let mut files = Vec::new();
    walk(root, &mut files);
    // First the renames: a snapshot named after a forgotten message.
    let mut renamed: Vec<(String, String)> = Vec::new();
    for path in files.iter_mut() {
        let Some(text) = read_text(path) else { continue };
        if kind(root, path, &text) != Kind::Snapshot {
            continue;
        }
        let Some((date, stem)) = snapshot_stem(path) else { continue };
        if slugs.iter().any(|s| stem == *s || stem.strip_prefix(s.as_str()).is_some_and(is_suffix)) {
            let dir = path.parent().unwrap_or(root).to_path_buf();
            let new = paths::free_name(&dir, &format!("{date}-forgotten"), "md");
            std::fs::rename(&*path, &new).map_err(|e| WorkspaceError::io("cannot rename", path, e))?;
            renamed.push((paths::display_relative(root, path), paths::display_relative(root, &new)));
            *path = new;
        }
    }
    for path in &files {
        let Some(text) = read_text(path) else { continue };
        let lower = text.to_lowercase();
        let holds = needles.iter().any(|n| lower.contains(n.as_str()));
        let mentions = renamed.iter().any(|(old, _)| text.contains(old.as_str()));
        let relative = paths::display_relative(root, path);
        let was_renamed = renamed.iter().any(|(_, new)| *new == relative);
        match kind(root, path, &text) {
            Kind::Agent => {
                if holds {
                    report.kept.push((relative, "the agent's own file: mneme does not edit it; remove the text there".into()));
                }
            }
            mine => {
                if !(holds || mentions || was_renamed) {
                    continue;
                }
                let jsonl = mine == Kind::Jsonl;
                let mut out = String::with_capacity(text.len());
                for (i, line) in text.split_inclusive('\n').enumerate() {
                    let l = line.to_lowercase();
                    let title = i == 0 && mine == Kind::Snapshot && was_renamed;
                    if title || (mine == Kind::Snapshot && i == 0 && names.iter().any(|n| l.contains(&n.to_lowercase()))) {
                        out.push_str("# Session: [forgotten]\n");
                    } else if needles.iter().any(|n| l.contains(n.as_str())) {
                        if !jsonl {
                            out.push_str(&redacted(line));
                        }
                    } else {
                        let mut kept = line.to_string();
                        for (old, new) in &renamed {
                            kept = kept.replace(old.as_str(), new);
                        }
                        out.push_str(&kept);
                    }
                }
                if out != text {
                    write_atomic(path, out.as_bytes())?;
                }
                report.rewritten.push(relative);
            }
        }
    }
    report.rewritten.sort();
    report.rewritten.dedup();
    report.kept.sort();
    Ok(report)
}

/// Whose a file is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Snapshot,
    Daily,
    Jsonl,
    Log,
    Agent,
}

fn kind(root: &Path, path: &Path, text: &str) -> Kind {
    let in_memory = path.parent() == Some(&root.join(paths::MEMORY_DIR));
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default();
    if !in_memory {
        return Kind::Agent;
    }
    match name {
        "session-summaries.jsonl" => Kind::Jsonl,
        "commands.log" => Kind::Log,
        _ if name.ends_with(".md") && text.starts_with("# Session: ") => Kind::Snapshot,
        _ if name.ends_with(".md") && text.starts_with("# Daily Log: ") => Kind::Daily,
        _ => Kind::Agent,
    }
}

/// The first six words of a message, as `journal::write_session_end` names a snapshot.
fn first_words(text: &str) -> String {
    crate::private::strip(text).split_whitespace().take(6).collect::<Vec<_>>().join(" ")
}

/// `(date, rest)` of a snapshot's file name `YYYY-MM-DD-rest.md`.
fn snapshot_stem(path: &Path) -> Option<(String, String)> {
    let stem = path.file_stem()?.to_str()?;
    let (date, rest) = (stem.get(..10)?, stem.get(11..)?);
    (date.chars().filter(|c| *c == '-').count() == 2 && stem.as_bytes().get(10) == Some(&b'-'))
        .then(|| (date.to_string(), rest.to_string()))
}

/// `free_name`'s numbered suffix (`-2`, `-3`, …).
fn is_suffix(rest: &str) -> bool {
    rest.strip_prefix('-').is_some_and(|n| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()))
}

/// The line with its text replaced, a Markdown role prefix or list marker kept.
fn redacted(line: &str) -> String {
    let end = if line.ends_with('\n') { "\n" } else { "" };
    let body = line.trim_end_matches('\n');
    let keep = ["**user**: ", "**assistant**: ", "- ", "## "].iter().find(|p| body.starts_with(**p)).copied().unwrap_or("");
    format!("{keep}[forgotten]{end}")
}

fn read_text(path: &Path) -> Option<String> {
    let meta = std::fs::symlink_metadata(path).ok()?;
    if !meta.is_file() || meta.len() > MAX_FILE {
        return None;
    }
    std::fs::read_to_string(path).ok()
}

/// Every regular file under `dir`, not following symbolic links, not in hidden
/// directories (`.git`) or mneme's temporary files.
fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    let mut entries: Vec<_> = entries.flatten().collect();
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        let path = entry.path();
        let hidden = entry.file_name().to_string_lossy().starts_with('.');
        match entry.file_type() {
            Ok(t) if t.is_dir() && !hidden => walk(&path, out),
            Ok(t) if t.is_file() && !hidden => out.push(path),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mnemes_journals_lose_the_text_and_the_agents_files_are_reported() {
        let dir = tempfile::tempdir().expect("dir");
        let settings = WorkspaceSettings::new(dir.path(), jiff::tz::TimeZone::UTC);
        let memory = dir.path().join("memory");
        std::fs::create_dir_all(&memory).expect("memory");
        let message = "my home address is Musterstrasse 5, Munich";
        std::fs::write(
            memory.join("2026-11-26-my-home-address-is-musterstrasse-5.md"),
            format!("# Session: my home address is Musterstrasse 5,\n\n- session: s1\n\n## Conversation\n\n**user**: {message}\n\n**assistant**: Noted.\n"),
        )
        .expect("snapshot");
        std::fs::write(
            memory.join("2026-11-26.md"),
            "# Daily Log: 2026-11-26\n\n## 10:00\n\nSession ended: s1. Snapshot: memory/2026-11-26-my-home-address-is-musterstrasse-5.md\n",
        )
        .expect("daily");
        std::fs::write(memory.join("session-summaries.jsonl"), format!("{{\"summary\":\"{message}\"}}\n{{\"summary\":\"other\"}}\n"))
            .expect("jsonl");
        std::fs::write(dir.path().join("notes.md"), format!("The user said: {message}\n")).expect("agent file");

        let report = scrub(&settings, &[message.to_string()]).expect("scrub");
        assert_eq!(report.kept.len(), 1, "{report:?}");
        assert_eq!(report.kept[0].0, "notes.md");
        let mut left = Vec::new();
        walk(dir.path(), &mut left);
        for path in &left {
            let text = std::fs::read_to_string(path).expect("read");
            let name = path.display().to_string().to_lowercase();
            if path.ends_with("notes.md") {
                continue;
            }
            assert!(!text.to_lowercase().contains("musterstrasse") && !name.contains("musterstrasse"), "{}: {text}", path.display());
        }
        let daily = std::fs::read_to_string(memory.join("2026-11-26.md")).expect("daily");
        assert!(daily.contains("memory/2026-11-26-forgotten.md"), "the daily log points to the renamed snapshot: {daily}");
        let snapshot = std::fs::read_to_string(memory.join("2026-11-26-forgotten.md")).expect("renamed");
        assert!(snapshot.contains("**user**: [forgotten]") && snapshot.contains("**assistant**: Noted."), "{snapshot}");
        let jsonl = std::fs::read_to_string(memory.join("session-summaries.jsonl")).expect("jsonl");
        assert_eq!(jsonl, "{\"summary\":\"other\"}\n");
        // Texts too short to look for change nothing.
        assert_eq!(scrub(&settings, &["ok".into()]).expect("scrub"), Scrub::default());
    }
}
