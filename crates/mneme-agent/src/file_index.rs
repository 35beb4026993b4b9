//! Search over the workspace's Markdown files: each `*.md` file under the workspace is cut
//! into chunks (`mneme_workspace::chunk`, 400 tokens with 80 overlap, line ranges and the
//! heading path) and indexed in the store's `workspace_chunks` FTS5 table. [`sync`] brings
//! the index in line with the files (new and changed files re-chunked, deleted ones
//! dropped) by comparing modification time and size; the daemon calls it on a short timer
//! with a debounce, `mneme search` calls it before searching ([`search`]). With a model
//! attached, each sync also embeds the chunks that have no vector, so [`search`] finds
//! them by meaning too (`mneme_service::MemoryService::search_files`); [`knowledge()`] lists
//! each file's memory type, freshness, reads and related files.
//!
//! Only regular files are indexed: symlinks are not followed (a link cannot pull a file
//! from outside the workspace into the index), hidden files and directories (`.git`,
//! `.mneme-tmp*` leftovers) are skipped, and so are files over [`MAX_FILE_BYTES`] and the
//! instruction files the sync engine deploys at the root (`HEARTBEAT.md`, `SKILL.md`,
//! `CLAUDE.md`).

use std::collections::HashMap;
use std::path::Path;
use std::time::{Duration, SystemTime};

use jiff::Timestamp;
use mneme_service::{FileHit, FileRanking, IndexedFile, NewChunk, Owner, ServiceResult};
use mneme_workspace::chunk::{ChunkConfig, chunk_markdown};
use mneme_workspace::consolidate::FileReads;
use mneme_workspace::knowledge::{Freshness, MemoryKind, markdown_files};
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
    /// Chunks given a vector by this pass (an attached model embeds what has none).
    pub embedded: u64,
    /// Chunks still without a vector when the pass's embedding budget ran out (found by
    /// words only until a later pass, the daemon or `mneme reindex` embeds them).
    pub unembedded: u64,
    /// Why embedding failed, when it did (the index itself is up to date; the next pass retries).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub embed_error: Option<String>,
}

/// How a [`sync`] embeds the chunks without a vector (with a model attached).
#[derive(Debug, Clone, Copy)]
pub struct Embedding {
    /// Nobody waits for it (the daemon's pass): the model runs it behind queries.
    pub background: bool,
    /// At most this long per sync (a first sync of a large workspace takes minutes); `None`: all.
    pub budget: Option<Duration>,
}

impl IndexReport {
    pub fn changed(&self) -> bool {
        !self.indexed.is_empty() || !self.removed.is_empty()
    }
}

/// Brings the index in line with the files under `root`. With `debounce`, a changed file
/// is only re-indexed once its modification time is at least that old (an editor's burst
/// of writes is indexed once); deletions apply at once. Then, with a model attached, the
/// chunks without a vector are embedded, within `embedding`'s budget; an embedding failure
/// is reported, not returned.
pub fn sync(owner: &Owner<'_>, root: &Path, debounce: Option<Duration>, embedding: Embedding) -> ServiceResult<IndexReport> {
    let mut report = IndexReport::default();
    let disk = if root.is_dir() { markdown_files(root, MAX_FILE_BYTES, &mut report.skipped) } else { Vec::new() };
    let indexed = owner.indexed_files()?;
    let known: std::collections::HashMap<&str, &IndexedFile> = indexed.iter().map(|f| (f.path.as_str(), f)).collect();
    let settled_before =
        debounce.map(|d| jiff::Timestamp::try_from(SystemTime::now()).map_or(0, |t| t.as_millisecond()) - d.as_millis() as i64);
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
    // Nothing changed (the usual case): no write transaction at all.
    if !batch.is_empty() || !report.removed.is_empty() {
        owner.update_file_index(&batch, &report.removed)?;
    }
    let deadline = embedding.budget.map(|b| std::time::Instant::now() + b);
    match owner.embed_file_chunks(embedding.background, deadline) {
        Ok(n) => report.embedded = n,
        Err(e) => report.embed_error = Some(e.to_string()),
    }
    if report.embedded > 0 || deadline.is_some() {
        report.unembedded = owner.file_chunk_coverage()?.map_or(0, |(_, without)| without);
    }
    Ok(report)
}

/// A file search hit with what is known of its file.
#[derive(Debug, Clone, Serialize)]
pub struct KnownHit {
    #[serde(flatten)]
    pub hit: FileHit,
    pub memory_type: MemoryKind,
    pub freshness: Freshness,
    /// Reads of the file counted so far (this search's included).
    pub reads: u64,
}

/// A file search's answer (`ranking`: `hybrid` or `lexical`).
#[derive(Debug, Clone, Serialize)]
pub struct KnownSearch {
    pub ranking: &'static str,
    pub hits: Vec<KnownHit>,
}

/// Searches the indexed files ([`mneme_service::MemoryService::search_files`]) and gives each
/// hit its file's memory type, freshness and reads.
pub fn search(owner: &Owner<'_>, query: &str, limit: usize, ranking: FileRanking, now: Timestamp) -> ServiceResult<KnownSearch> {
    let found = owner.search_files(query, limit, ranking)?;
    let modified: HashMap<String, Timestamp> = owner.indexed_files()?.into_iter().map(|f| (f.path.clone(), f.modified())).collect();
    let reads = file_reads(owner)?;
    let hits = found
        .hits
        .into_iter()
        .map(|hit| {
            let path = hit.chunk.path.clone();
            let read = reads.get(&path);
            KnownHit {
                memory_type: MemoryKind::of(&path),
                freshness: Freshness::of_file(&path, modified.get(&path).copied().unwrap_or(now), read.map(|r| r.last), now),
                reads: read.map_or(0, |r| r.count),
                hit,
            }
        })
        .collect();
    Ok(KnownSearch { ranking: found.ranking, hits })
}

/// Reads of whole files (not entries), by path.
pub fn file_reads(owner: &Owner<'_>) -> ServiceResult<HashMap<String, FileReads>> {
    Ok(owner
        .workspace_reads()?
        .into_iter()
        .filter(|r| r.heading.is_empty())
        .map(|r| (r.path, FileReads { count: r.count, last: r.last_at }))
        .collect())
}

/// What is known of one indexed file: the seed's knowledge-base columns (§16.4).
#[derive(Debug, Clone, Serialize)]
pub struct FileKnowledge {
    pub path: String,
    pub memory_type: MemoryKind,
    pub freshness: Freshness,
    pub modified: Timestamp,
    pub reads: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_read: Option<Timestamp>,
    pub chunks: u64,
    /// Other files near it in meaning (their mean chunk vectors), best first; needs the model.
    pub related: Vec<RelatedFile>,
    /// Its entries (heading paths) that were read, most read first.
    pub entries: Vec<EntryReads>,
}

/// A file near another in meaning.
#[derive(Debug, Clone, Serialize)]
pub struct RelatedFile {
    pub path: String,
    pub cosine: f32,
}

/// The reads of one entry of a file.
#[derive(Debug, Clone, Serialize)]
pub struct EntryReads {
    pub heading: String,
    pub reads: u64,
    pub last_read: Timestamp,
}

/// Every indexed file with its memory type, freshness, reads, entries and related files.
pub fn knowledge(owner: &Owner<'_>, now: Timestamp) -> ServiceResult<Vec<FileKnowledge>> {
    // Each file's own reads (heading empty) and its entries', by path.
    let mut reads: HashMap<String, (Option<mneme_service::WorkspaceRead>, Vec<EntryReads>)> = HashMap::new();
    for r in owner.workspace_reads()? {
        let (file, entries) = reads.entry(r.path.clone()).or_default();
        if r.heading.is_empty() {
            *file = Some(r);
        } else {
            entries.push(EntryReads { heading: r.heading, reads: r.count, last_read: r.last_at });
        }
    }
    let mut related = owner.related_files(mneme_service::RELATED_PER_HIT)?;
    let mut out: Vec<FileKnowledge> = owner
        .indexed_files()?
        .into_iter()
        .map(|f| {
            let modified = f.modified();
            let (file_read, mut entries) = reads.remove(&f.path).unwrap_or_default();
            entries.sort_by(|a, b| b.reads.cmp(&a.reads).then_with(|| a.heading.cmp(&b.heading)));
            FileKnowledge {
                memory_type: MemoryKind::of(&f.path),
                freshness: Freshness::of_file(&f.path, modified, file_read.as_ref().map(|r| r.last_at), now),
                modified,
                reads: file_read.as_ref().map_or(0, |r| r.count),
                last_read: file_read.as_ref().map(|r| r.last_at),
                chunks: f.chunks,
                related: related
                    .remove(&f.path)
                    .unwrap_or_default()
                    .into_iter()
                    .map(|(path, cosine)| RelatedFile { path, cosine })
                    .collect(),
                entries,
                path: f.path,
            }
        })
        .collect();
    out.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(out)
}
