//! The workspace's files as knowledge: their chunks found by words and by meaning, and
//! every read of a file or an entry counted (the zylos seed's §16.3–16.4).
//!
//! - **Vectors.** A chunk's vector is keyed by the digest of its heading and text
//!   (`mneme_store::chunk_digest`): an edited file's unchanged chunks keep theirs, and a
//!   vector whose text left the index (an edit, a deleted file, a forget) goes in the same
//!   transaction. [`MemoryService::embed_file_chunks`] embeds what has none; the file index
//!   calls it right after each sync, so a chunk is found by meaning as soon as the sync
//!   that indexed it returns.
//! - **Search.** [`MemoryService::search_files`] ranks by BM25 and, with a model, by
//!   cosine too: the two rankings are fused by reciprocal rank (`1/(60 + rank)` summed), and
//!   a chunk found by meaning alone must reach `retrieval.min_cosine`, the floor records'
//!   meaning-only matches have. The first three hits each name up to three related entries
//!   of other files (nearest by cosine, at least [`RELATED_MIN_COSINE`]). Cosines are
//!   computed on the stored int8 codes.
//! - **Reads.** Every hit a search returns counts as a read of its file and of its entry
//!   (its heading path); front ends count file reads and session-start injection through
//!   [`MemoryService::record_file_reads`]. Reads are what freshness is computed from
//!   (`mneme_workspace::knowledge`).

use std::collections::{HashMap, HashSet};

use mneme_store::{ChunkHit, ChunkVector, WorkspaceRead, quantize};
use serde::{Deserialize, Serialize};

use crate::{MemoryService, ServiceError, ServiceResult};

/// Chunks embedded per model call.
const EMBED_BATCH: usize = 32;
/// Candidates each ranking contributes to the fusion, at least.
const FUSION_DEPTH: usize = 50;
/// Reciprocal-rank fusion's constant.
const RRF_K: f64 = 60.0;
/// Related entries named per hit, and the least cosine one needs.
pub const RELATED_PER_HIT: usize = 3;
pub const RELATED_MIN_COSINE: f32 = 0.5;

/// How a file search ranks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FileRanking {
    /// By words and meaning when a model is attached, else by words.
    #[default]
    Auto,
    /// By words only.
    Lexical,
    /// By words and meaning; refused without a model.
    Semantic,
}

/// An entry of another file close in meaning to a hit.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RelatedEntry {
    pub path: String,
    pub heading: String,
    pub cosine: f32,
}

/// A chunk a file search found.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FileHit {
    #[serde(flatten)]
    pub chunk: ChunkHit,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub related: Vec<RelatedEntry>,
}

/// A file search's answer: `ranking` is `hybrid` (words and meaning) or `lexical`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FileSearch {
    pub ranking: &'static str,
    pub hits: Vec<FileHit>,
}

/// The cosine of two unit vectors from their stored int8 codes (within ~1e-3 of the f32 cosine).
fn cosine(a: &ChunkVector, b: &ChunkVector) -> f32 {
    let sum: i32 = a.codes.iter().zip(&b.codes).map(|(&x, &y)| i32::from(x) * i32::from(y)).sum();
    sum as f32 * a.scale * b.scale
}

/// Hits (the best first) that name related entries.
const RELATED_HITS: usize = 3;

fn dot(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

impl MemoryService {
    /// Embeds the indexed chunks that have no vector from the attached model (none: 0).
    /// `background`: nobody waits (the daemon's index pass), so the model runs it behind queries.
    pub fn embed_file_chunks(&self, background: bool) -> ServiceResult<u64> {
        self.embed_file_chunks_until(background, None)
    }

    /// [`Self::embed_file_chunks`] that stops after the batch in flight once `deadline` has
    /// passed (what is left is embedded by the next call).
    pub fn embed_file_chunks_until(&self, background: bool, deadline: Option<std::time::Instant>) -> ServiceResult<u64> {
        let Some(semantic) = self.semantic.get() else { return Ok(0) };
        let model = semantic.embedder.model_id().to_string();
        let mut done = 0u64;
        while deadline.is_none_or(|d| std::time::Instant::now() < d) {
            let todo = self.reader()?.read(|tx| tx.chunks_needing_vectors(&model, EMBED_BATCH))?;
            if todo.is_empty() {
                return Ok(done);
            }
            let texts: Vec<&str> = todo.iter().map(|t| t.text.as_str()).collect();
            let vectors = if background { semantic.embedder.embed_background(&texts) } else { semantic.embedder.embed(&texts) }
                .map_err(|e| ServiceError::Embedding(e.to_string()))?;
            if vectors.len() != todo.len() {
                return Err(ServiceError::Embedding(format!("the model returned {} vectors for {} texts", vectors.len(), todo.len())));
            }
            let stored: Vec<(String, f32, Vec<i8>)> = todo
                .iter()
                .zip(&vectors)
                .map(|(t, v)| {
                    let (scale, codes) = quantize(v);
                    (t.digest.clone(), scale, codes)
                })
                .collect();
            // A chunk whose file changed meanwhile leaves an orphan the next prune takes.
            self.store()?.write(|tx| tx.put_chunk_vectors(&model, &stored))?;
            done += stored.len() as u64;
        }
        Ok(done)
    }

    /// How many indexed chunks have and lack a vector from the attached model (`None` without one).
    pub fn file_chunk_coverage(&self) -> ServiceResult<Option<(u64, u64)>> {
        let Some(semantic) = self.semantic.get() else { return Ok(None) };
        Ok(Some(self.reader()?.read(|tx| tx.chunk_vector_coverage(semantic.embedder.model_id()))?))
    }

    /// Search over the workspace's chunks: best first, at most `limit`; each hit counts as a
    /// read of its file and entry. A query without a searchable word is refused.
    pub fn search_files(&self, query: &str, limit: usize, ranking: FileRanking) -> ServiceResult<FileSearch> {
        let found = self.find_files(query, limit, ranking)?;
        let reads: Vec<(String, String)> = found
            .hits
            .iter()
            .flat_map(|h| [(h.chunk.path.clone(), String::new()), (h.chunk.path.clone(), h.chunk.heading.clone())])
            .collect();
        self.record_file_reads(&reads)?;
        Ok(found)
    }

    /// [`Self::search_files`] without counting reads: for a caller that passes on only some
    /// hits and counts those (the session-start block).
    pub fn find_files(&self, query: &str, limit: usize, ranking: FileRanking) -> ServiceResult<FileSearch> {
        let expression = mneme_core::query::fts5_expression(query)
            .ok_or_else(|| ServiceError::from(mneme_core::CoreError::invalid("query", format!("{query:?} has no word to search for"))))?;
        if limit == 0 {
            return Err(mneme_core::CoreError::invalid("limit", "must be at least 1").into());
        }
        let query_vector = match ranking {
            FileRanking::Lexical => None,
            FileRanking::Auto => self.text_query_vector(query),
            FileRanking::Semantic => Some(self.text_query_vector(query).ok_or_else(|| {
                ServiceError::Precondition(
                    "semantic file search needs the embedding model: install it with `mneme model install`, or search by words".into(),
                )
            })?),
        };
        let depth = limit.max(FUSION_DEPTH);
        let lexical = self.reader()?.read(|tx| tx.search_chunks(&expression, depth))?;
        let hits = match (&query_vector, self.semantic.get()) {
            (Some(q), Some(semantic)) => {
                let model = semantic.embedder.model_id().to_string();
                let vectors = self.reader()?.read(|tx| tx.chunk_vectors(&model))?;
                self.fuse(lexical, q, &vectors, limit)?
            }
            _ => lexical.into_iter().take(limit).map(|chunk| FileHit { chunk, related: Vec::new() }).collect(),
        };
        Ok(FileSearch { ranking: if query_vector.is_some() { "hybrid" } else { "lexical" }, hits })
    }

    /// Reciprocal-rank fusion of the lexical hits and the chunks nearest `query`; the first
    /// [`RELATED_HITS`] hits name their related entries.
    fn fuse(&self, lexical: Vec<ChunkHit>, query: &[f32], vectors: &[ChunkVector], limit: usize) -> ServiceResult<Vec<FileHit>> {
        let (scale, codes) = quantize(query);
        let query = ChunkVector { id: 0, path: String::new(), scale, codes };
        let cosines: HashMap<i64, f32> = vectors.iter().map(|v| (v.id, cosine(v, &query))).collect();
        let floor = self.config.retrieval.min_cosine as f32;
        let mut by_meaning: Vec<(i64, f32)> = cosines.iter().map(|(&id, &c)| (id, c)).collect();
        by_meaning.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        by_meaning.truncate(limit.max(FUSION_DEPTH));
        let mut score: HashMap<i64, f64> = HashMap::new();
        for (rank, hit) in lexical.iter().enumerate() {
            *score.entry(hit.id).or_default() += 1.0 / (RRF_K + rank as f64 + 1.0);
        }
        let words: HashSet<i64> = lexical.iter().map(|h| h.id).collect();
        for (rank, (id, cosine)) in by_meaning.iter().enumerate() {
            // A chunk with none of the query's words must earn its place by meaning.
            if words.contains(id) || *cosine >= floor {
                *score.entry(*id).or_default() += 1.0 / (RRF_K + rank as f64 + 1.0);
            }
        }
        let mut order: Vec<(i64, f64)> = score.into_iter().collect();
        order.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        order.truncate(limit);
        // The nearest chunks of other files to each of the first hits, best first.
        let index: HashMap<i64, &ChunkVector> = vectors.iter().map(|v| (v.id, v)).collect();
        let near: Vec<Vec<(f32, i64)>> = order
            .iter()
            .take(RELATED_HITS)
            .map(|(id, _)| {
                let Some(me) = index.get(id) else { return Vec::new() };
                let mut near: Vec<(f32, i64)> = vectors
                    .iter()
                    .filter(|v| v.path != me.path)
                    .map(|v| (cosine(v, me), v.id))
                    .filter(|(c, _)| *c >= RELATED_MIN_COSINE)
                    .collect();
                near.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
                // Enough to fill the entries when a long section's chunks share a heading.
                near.truncate(RELATED_PER_HIT * 4);
                near
            })
            .collect();
        // One read for the hits found by meaning alone and every related chunk.
        let mut known: HashMap<i64, ChunkHit> = lexical.into_iter().map(|h| (h.id, h)).collect();
        let mut wanted: Vec<i64> = order.iter().map(|(id, _)| *id).chain(near.iter().flatten().map(|(_, id)| *id)).collect();
        wanted.retain(|id| !known.contains_key(id));
        wanted.sort_unstable();
        wanted.dedup();
        for hit in self.reader()?.read(|tx| tx.chunks_by_id(&wanted))? {
            known.insert(hit.id, hit);
        }
        let related = |near: &[(f32, i64)]| {
            let mut out: Vec<RelatedEntry> = Vec::new();
            for (cosine, id) in near {
                let Some(c) = known.get(id) else { continue };
                // One entry per file and heading (a long section has several chunks).
                if out.len() < RELATED_PER_HIT && !out.iter().any(|r| r.path == c.path && r.heading == c.heading) {
                    out.push(RelatedEntry { path: c.path.clone(), heading: c.heading.clone(), cosine: *cosine });
                }
            }
            out
        };
        let related: Vec<Vec<RelatedEntry>> = near.iter().map(|n| related(n)).collect();
        let mut hits = Vec::with_capacity(order.len());
        for (i, (id, fused)) in order.into_iter().enumerate() {
            let Some(mut chunk) = known.remove(&id) else { continue };
            chunk.score = fused;
            chunk.cosine = cosines.get(&id).copied();
            hits.push(FileHit { chunk, related: related.get(i).cloned().unwrap_or_default() });
        }
        Ok(hits)
    }

    /// Counts one read of each `(path, heading)` now (heading empty: the whole file).
    pub fn record_file_reads(&self, reads: &[(String, String)]) -> ServiceResult<()> {
        if reads.is_empty() {
            return Ok(());
        }
        let now = self.now();
        self.store()?.write(|tx| tx.record_reads(reads, now))?;
        Ok(())
    }

    /// Every counted read of a workspace file or entry.
    pub fn workspace_reads(&self) -> ServiceResult<Vec<WorkspaceRead>> {
        Ok(self.reader()?.read(|tx| tx.workspace_reads())?)
    }

    /// For each file with vectors, up to `per_file` other files whose mean chunk vector is
    /// nearest (cosine at least [`RELATED_MIN_COSINE`]), best first. Without a model: empty.
    pub fn related_files(&self, per_file: usize) -> ServiceResult<HashMap<String, Vec<(String, f32)>>> {
        let Some(semantic) = self.semantic.get() else { return Ok(HashMap::new()) };
        let stored = self.reader()?.read(|tx| tx.chunk_vectors(semantic.embedder.model_id()))?;
        let mut sums: HashMap<String, Vec<f32>> = HashMap::new();
        for v in stored {
            let sum = sums.entry(v.path).or_insert_with(|| vec![0.0; v.codes.len()]);
            for (s, &c) in sum.iter_mut().zip(&v.codes) {
                *s += f32::from(c) * v.scale;
            }
        }
        let centroids: Vec<(String, Vec<f32>)> = sums
            .into_iter()
            .map(|(path, mut v)| {
                let norm = dot(&v, &v).sqrt().max(1e-12);
                v.iter_mut().for_each(|x| *x /= norm);
                (path, v)
            })
            .collect();
        let mut out = HashMap::new();
        for (path, v) in &centroids {
            let mut near: Vec<(String, f32)> = centroids
                .iter()
                .filter(|(other, _)| other != path)
                .map(|(other, w)| (other.clone(), dot(v, w)))
                .filter(|(_, c)| *c >= RELATED_MIN_COSINE)
                .collect();
            near.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
            near.truncate(per_file);
            out.insert(path.clone(), near);
        }
        Ok(out)
    }
}
