//! `mneme-bench vectors`: the vector index and hybrid retrieval at scale, on synthetic
//! vectors (`mneme_service::vectors::synthetic`: topics → subtopics → points).
//!
//! 1. Index build time and memory from vectors in memory.
//! 2. Query latency and recall@10 of the approximate search against exact f32 search
//!    (brute force over the original vectors), beside the exact int8 scan.
//! 3. With `--store`: a real store with the same number of records (synthetic text) and
//!    their vectors, then `retrieve` latency hybrid vs lexical-only in the same process,
//!    and the time to rebuild the index from the store (what a daemon start costs).
//!    The "model" there is a lookup table (`doc N` → vector N), so the figures exclude
//!    query embedding (measured by `mneme-bench embed`).

use std::sync::Arc;
use std::time::Instant;

use anyhow::Result;
use mneme_core::{EventPayload, Payload, Sensitivity, SystemClock};
use mneme_embed::{EmbedResult, Embedder};
use mneme_service::vectors::{VectorIndex, synthetic};
use mneme_service::{Access, IndexParams, IngestOptions, MemoryService, RetrieveRequest, ServiceConfig};
use mneme_store::StoreOptions;
use serde_json::json;

use crate::synth::{TextGen, summarize};

fn rss_mib() -> f64 {
    crate::daemon::rss_kib(std::process::id(), "VmRSS:") as f64 / 1024.0
}

/// Vectors by position: `doc N` embeds to vector N, `query N` to query vector N.
#[derive(Debug)]
pub(crate) struct Table {
    pub docs: Arc<Vec<Vec<f32>>>,
    pub queries: Arc<Vec<Vec<f32>>>,
}

impl Embedder for Table {
    fn model_id(&self) -> &str {
        "synthetic-table"
    }
    fn dimension(&self) -> usize {
        self.docs[0].len()
    }
    fn embed(&self, texts: &[&str]) -> EmbedResult<Vec<Vec<f32>>> {
        Ok(texts
            .iter()
            .map(|t| {
                let words: Vec<&str> = t.split_whitespace().collect();
                let at = |kind: &str| words.windows(2).find(|w| w[0] == kind).and_then(|w| w[1].parse::<usize>().ok());
                match (at("query"), at("doc")) {
                    (Some(n), _) => self.queries[n % self.queries.len()].clone(),
                    (None, n) => self.docs[n.unwrap_or(0) % self.docs.len()].clone(),
                }
            })
            .collect())
    }
}

fn recall(truth: &[Vec<usize>], got: &[Vec<i64>]) -> f64 {
    let found: usize = truth.iter().zip(got).map(|(t, g)| g.iter().filter(|s| t.contains(&(**s as usize))).count()).sum();
    found as f64 / truth.iter().map(Vec::len).sum::<usize>().max(1) as f64
}

pub fn vectors(n: usize, dim: usize, queries: usize, params: IndexParams, with_store: bool, json_out: bool) -> Result<()> {
    eprintln!("generating {n} synthetic vectors of {dim} dimensions");
    let rss_before = rss_mib();
    let docs = Arc::new(synthetic(n, dim, 7));
    let qs = Arc::new(synthetic(queries, dim, 99));

    let started = Instant::now();
    let mut index = VectorIndex::new(dim, params);
    index.reserve(n);
    for (i, v) in docs.iter().enumerate() {
        let (scale, codes) = mneme_store::quantize(v);
        index.insert(i as i64, scale, &codes);
    }
    let build_s = started.elapsed().as_secs_f64();

    eprintln!("exact f32 neighbours of {queries} queries");
    let truth: Vec<Vec<usize>> = qs
        .iter()
        .map(|q| {
            let mut scored: Vec<(f32, usize)> =
                docs.iter().enumerate().map(|(i, v)| (v.iter().zip(q).map(|(a, b)| a * b).sum(), i)).collect();
            scored.select_nth_unstable_by(9, |a, b| b.0.total_cmp(&a.0));
            scored.truncate(10);
            scored.into_iter().map(|s| s.1).collect()
        })
        .collect();

    let run = |index: &VectorIndex, approximate: bool| {
        let mut times = Vec::new();
        let mut got = Vec::new();
        for q in qs.iter() {
            let t = Instant::now();
            let hits = if approximate { index.search_approximate(q, 10) } else { index.search_exact(q, 10) };
            times.push(t.elapsed().as_secs_f64() * 1000.0);
            got.push(hits.into_iter().map(|h| h.0).collect::<Vec<_>>());
        }
        let (p50, p99) = summarize(times);
        json!({ "p50_ms": p50, "p99_ms": p99, "recall_at_10": recall(&truth, &got) })
    };
    let sketch = run(&index, true);
    let exact = run(&index, false);
    eprintln!("training the inverted-file partition");
    let started = Instant::now();
    index.build_partition();
    let partition_s = started.elapsed().as_secs_f64();
    let ivf = run(&index, true);
    let mut report = json!({
        "vectors": n, "dim": dim, "queries": queries,
        "params": { "coarse": params.coarse, "rerank": params.rerank, "lists": params.lists, "nprobe": params.nprobe },
        "index_build_s": build_s, "partition_build_s": partition_s, "index_bytes": index.memory_bytes(),
        "rss_mib_index_and_data": rss_mib() - rss_before,
        "ann_ivf": ivf,
        "ivf_list_sizes_min_median_max": index.list_sizes(),
        "ann_sign_sketch": sketch,
        "exact_int8_scan": exact,
    });
    drop(index);

    if with_store {
        report["store"] = store_part(docs, qs, params)?;
    }
    if json_out {
        outln!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        outln!("{report:#}");
    }
    Ok(())
}

fn store_part(docs: Arc<Vec<Vec<f32>>>, qs: Arc<Vec<Vec<f32>>>, params: IndexParams) -> Result<serde_json::Value> {
    let n = docs.len();
    let dir = tempfile::tempdir()?;
    let options = StoreOptions { path: dir.path().join("bench.db"), key: None, create: true, decay: Default::default() };
    let service = MemoryService::open(options.clone(), ServiceConfig::default(), Arc::new(SystemClock))?;
    let mut text = TextGen::new(42);
    let started = Instant::now();
    for chunk_start in (0..n).step_by(10_000) {
        let batch: Vec<(Payload, IngestOptions)> = (chunk_start..(chunk_start + 10_000).min(n))
            .map(|i| {
                let payload = Payload::Event(EventPayload {
                    event_kind: "message".into(),
                    reference: None,
                    sender: None,
                    text: format!("doc {i} {}", text.sentence()),
                    event_time: None,
                });
                (payload, IngestOptions::default())
            })
            .collect();
        service.ingest_batch(batch)?;
        eprint!("\ringested {}/{n}", (chunk_start + 10_000).min(n));
    }
    let ingest_s = started.elapsed().as_secs_f64();
    drop(service);
    let table = Arc::new(Table { docs: docs.clone(), queries: qs.clone() });
    let service = MemoryService::open(options.clone(), ServiceConfig::default(), Arc::new(SystemClock))?;
    service.enable_embeddings(table.clone(), params)?;
    let started = Instant::now();
    service.embed_pending(2048, false, &mut |p| eprint!("\rstored vectors {}/{}", p.done, p.total))?;
    eprintln!();
    let vectors_s = started.elapsed().as_secs_f64();
    drop(service);
    drop(docs);

    let rss_before = rss_mib();
    let started = Instant::now();
    let hybrid = MemoryService::open(options.clone(), ServiceConfig::default(), Arc::new(SystemClock))?;
    hybrid.enable_embeddings(table, params)?;
    let rebuild_s = started.elapsed().as_secs_f64();
    let rss_index = rss_mib() - rss_before;
    let lexical = MemoryService::open(options, ServiceConfig::default(), Arc::new(SystemClock))?;

    let mut words = TextGen::new(7);
    let requests: Vec<RetrieveRequest> = (0..qs.len())
        .map(|i| RetrieveRequest {
            query: format!("query {i} {}", words.query()),
            limit: 10,
            max_sensitivity: Some(Sensitivity::Critical),
            ..Default::default()
        })
        .collect();
    let time = |service: &MemoryService| -> Result<(f64, f64)> {
        let mut times = Vec::new();
        for r in &requests {
            let t = Instant::now();
            service.retrieve(r, &Access::owner())?;
            times.push(t.elapsed().as_secs_f64() * 1000.0);
        }
        Ok(summarize(times))
    };
    // Interleave the two so machine noise hits both alike.
    let (h1, l1, h2, l2) = (time(&hybrid)?, time(&lexical)?, time(&hybrid)?, time(&lexical)?);
    Ok(json!({
        "records": n,
        "ingest_s": ingest_s,
        "store_vectors_s": vectors_s,
        "index_rebuild_from_store_s": rebuild_s,
        "rss_mib_index_from_store": rss_index,
        "hybrid_retrieve": { "p50_ms": (h1.0 + h2.0) / 2.0, "p99_ms": h1.1.max(h2.1) },
        "lexical_retrieve": { "p50_ms": (l1.0 + l2.0) / 2.0, "p99_ms": l1.1.max(l2.1) },
    }))
}
