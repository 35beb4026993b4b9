//! Search over the workspace's Markdown files: each `*.md` file under the workspace is cut
//! into chunks (`mneme_workspace::chunk`, 400 tokens with 80 overlap, line ranges and the
//! heading path) and indexed in the store's `workspace_chunks` FTS5 table. [`sync`] brings
//! the index in line with the files (new and changed files re-chunked, deleted ones
//! dropped) by comparing modification time and size; the daemon calls it on a short timer
//! with a debounce, `mneme search` calls it before searching (`Owner::search_files`).
//!
//! Only regular files are indexed: symlinks are not followed (a link cannot pull a file
//! from outside the workspace into the index), hidden files and directories (`.git`,
//! `.mneme-tmp*` leftovers) are skipped, and so are files over [`MAX_FILE_BYTES`] and the
//! instruction files the sync engine deploys at the root (`HEARTBEAT.md`, `SKILL.md`,
//! `CLAUDE.md`).

use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use mneme_service::{IndexedFile, NewChunk, Owner, ServiceResult};
use mneme_workspace::chunk::{ChunkConfig, chunk_markdown};
use serde::Serialize;

/// Larger files are skipped (and reported): a memory file this big is a mistake.
pub const MAX_FILE_BYTES: u64 = 8 * 1024 * 1024;
/// Files re-indexed per transaction.
const BATCH: usize = 200;

/// What one [`sync`] did.
#[derive(Debug, Clone, Default, Serialize)]
pub struct IndexReport {
    /// Files (re-)indexed, workspace-relative.
    pub indexed: Vec<String>,
    /// Files dropped from the index (deleted from disk).
    pub removed: Vec<String>,
    pub unchanged: usize,
    /// Changed files left for the next pass because they changed within the debounce.
    pub settling: usize,
    /// Files not indexed, with the reason.
    pub skipped: Vec<(String, String)>,
    /// Chunks written by this pass.
    pub chunks: u64,
}

impl IndexReport {
    pub fn changed(&self) -> bool {
        !self.indexed.is_empty() || !self.removed.is_empty()
    }
}

/// A Markdown file on disk.
#[derive(Debug, Clone)]
struct DiskFile {
    relative: String,
    mtime_ms: i64,
    size: u64,
}

fn mtime_ms(time: SystemTime) -> i64 {
    match time.duration_since(UNIX_EPOCH) {
        Ok(d) => d.as_millis() as i64,
        Err(e) => -(e.duration().as_millis() as i64),
    }
}

/// Every regular `*.md` file under `root` (not following symlinks, skipping hidden names).
fn scan(root: &Path, skipped: &mut Vec<(String, String)>) -> Vec<DiskFile> {
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
            // Hidden names, and the instruction files the sync engine deploys (mneme's
            // protocol, not the agent's memory).
            if name.starts_with('.') || prefix.is_empty() && mneme_workspace::deploy::INSTRUCTION_FILES.contains(&name) {
                continue;
            }
            let relative = if prefix.is_empty() { name.to_string() } else { format!("{prefix}/{name}") };
            // file_type() does not follow symlinks.
            let Ok(kind) = entry.file_type() else { continue };
            if kind.is_dir() {
                stack.push((entry.path(), relative));
            } else if kind.is_file() && name.ends_with(".md") {
                let Ok(meta) = entry.metadata() else { continue };
                if meta.len() > MAX_FILE_BYTES {
                    skipped.push((relative, format!("larger than {MAX_FILE_BYTES} bytes")));
                    continue;
                }
                out.push(DiskFile { relative, mtime_ms: meta.modified().map(mtime_ms).unwrap_or(0), size: meta.len() });
            }
        }
    }
    out.sort_by(|a, b| a.relative.cmp(&b.relative));
    out
}

/// Brings the index in line with the files under `root`. With `debounce`, a changed file
/// is only re-indexed once its modification time is at least that old (an editor's burst
/// of writes is indexed once); deletions apply at once.
pub fn sync(owner: &Owner<'_>, root: &Path, debounce: Option<Duration>) -> ServiceResult<IndexReport> {
    let mut report = IndexReport::default();
    let disk = if root.is_dir() { scan(root, &mut report.skipped) } else { Vec::new() };
    let indexed = owner.indexed_files()?;
    let known: std::collections::HashMap<&str, &IndexedFile> = indexed.iter().map(|f| (f.path.as_str(), f)).collect();
    let settled_before = debounce.map(|d| mtime_ms(SystemTime::now()) - d.as_millis() as i64);
    let on_disk: std::collections::HashSet<&str> = disk.iter().map(|f| f.relative.as_str()).collect();
    report.removed = indexed.iter().filter(|f| !on_disk.contains(f.path.as_str())).map(|f| f.path.clone()).collect();

    let mut batch: Vec<(IndexedFile, Vec<NewChunk>)> = Vec::new();
    let config = ChunkConfig::default();
    for file in &disk {
        if known.get(file.relative.as_str()).is_some_and(|k| k.mtime_ms == file.mtime_ms && k.size == file.size) {
            report.unchanged += 1;
            continue;
        }
        if settled_before.is_some_and(|t| file.mtime_ms > t) {
            report.settling += 1;
            continue;
        }
        // Private blocks go before chunking (a block may span chunks), keeping line
        // breaks so line ranges still point at the file.
        let text = match std::fs::read(root.join(&file.relative)) {
            Ok(bytes) => mneme_core::private::strip_keeping_lines(&String::from_utf8_lossy(&bytes)).into_owned(),
            Err(e) => {
                report.skipped.push((file.relative.clone(), e.to_string()));
                continue;
            }
        };
        let chunks: Vec<NewChunk> = chunk_markdown(&text, &config)
            .into_iter()
            .map(|c| NewChunk {
                start_line: c.start_line as u32,
                end_line: c.end_line as u32,
                heading: c.heading.unwrap_or_default(),
                text: c.text,
            })
            .collect();
        report.chunks += chunks.len() as u64;
        report.indexed.push(file.relative.clone());
        batch.push((IndexedFile { path: file.relative.clone(), mtime_ms: file.mtime_ms, size: file.size, chunks: 0 }, chunks));
        if batch.len() == BATCH {
            owner.update_file_index(&std::mem::take(&mut batch), &[])?;
        }
    }
    owner.update_file_index(&batch, &report.removed)?;
    Ok(report)
}
