//! Benchmarks that print figures (BENCHMARKS.md records them):
//! - `mneme bench retrieval`: the JSON-lines protocol of `../shared/bench/README.md`,
//!   answering with this engine on a temporary store per corpus (one document = one
//!   episodic record, the document id in the record's `ref`).
//! - `mneme bench store`: ingest throughput and recall latency on synthetic records,
//!   beside raw SQLite inserts and FTS5 queries on the same data in the same process.

use std::collections::HashMap;
use std::io::{BufRead, Write};
use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context as _, Result, anyhow};
use mneme_core::{EventPayload, Payload, Sensitivity, SystemClock};
use mneme_service::{Access, IngestOptions, MemoryService, RetrieveRequest, ServiceConfig};
use mneme_store::StoreOptions;
use serde_json::{Value, json};

use crate::commands::parse_time;

struct Corpus {
    service: MemoryService,
    /// Record id → the harness's document id.
    docs: HashMap<String, String>,
    // Keeps the temporary store alive until the corpus is dropped.
    _dir: tempfile::TempDir,
}

/// What every corpus is served with: the effective configuration (`--set`, `MNEME_*`)
/// and the embedding model it names (`MNEME_MODEL_DIR`, `embedding.provider`), or none.
struct Setup {
    config: ServiceConfig,
    index: mneme_service::IndexParams,
    model: Option<Arc<dyn mneme_embed::Embedder>>,
}

/// Serves the retrieval-benchmark protocol on stdin/stdout until `end` or EOF, with the
/// real retrieval pipeline: the same `MemoryService::retrieve` the daemon runs, hybrid
/// when a model is available.
pub fn retrieval(config: &mneme_agent::MnemeConfig, data_dir: &std::path::Path) -> Result<()> {
    let model = match mneme_embed::choose(&config.embedding, data_dir).map_err(|e| anyhow!(e))? {
        mneme_embed::Choice::Model(m) => {
            eprintln!("bench retrieval: hybrid with {} (dense share {})", m.model_id(), config.retrieval.dense_share);
            Some(m)
        }
        mneme_embed::Choice::LexicalOnly(why) => {
            eprintln!("bench retrieval: lexical-only ({why})");
            None
        }
    };
    let setup = Setup { config: config.service(), index: config.embedding.index, model };
    let stdin = std::io::stdin();
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let mut corpora: HashMap<String, Corpus> = HashMap::new();
    for line in stdin.lock().lines() {
        let line = line.context("reading a request from stdin")?;
        if line.trim().is_empty() {
            continue;
        }
        let started = Instant::now();
        let (reply, end) = match serde_json::from_str::<Value>(&line) {
            Ok(request) => answer(&request, &mut corpora, &setup),
            Err(e) => (json!({ "op": "error", "error": format!("request is not JSON: {e}") }), false),
        };
        let mut reply = reply;
        reply["elapsed_ms"] = json!(started.elapsed().as_secs_f64() * 1000.0);
        writeln!(out, "{reply}")?;
        out.flush()?;
        if end {
            break;
        }
    }
    Ok(())
}

fn answer(request: &Value, corpora: &mut HashMap<String, Corpus>, setup: &Setup) -> (Value, bool) {
    let op = request["op"].as_str().unwrap_or("");
    let result = match op {
        "hello" => Ok(json!({ "op": "hello", "ok": true, "protocol": 1, "name": format!("mneme {}", env!("CARGO_PKG_VERSION")) })),
        "corpus" => load_corpus(request, corpora, setup)
            .map(|n| json!({ "op": "corpus", "corpus_id": request["corpus_id"], "ok": true, "n_docs": n })),
        "query" => query(request, corpora).map(|ids| json!({ "op": "query", "qid": request["qid"], "ids": ids })),
        "drop" => {
            corpora.remove(request["corpus_id"].as_str().unwrap_or(""));
            Ok(json!({ "op": "drop", "corpus_id": request["corpus_id"], "ok": true }))
        }
        "end" => return (json!({ "op": "end", "ok": true }), true),
        other => Err(anyhow!("unknown op {other:?}")),
    };
    match result {
        Ok(v) => (v, false),
        Err(e) => {
            (json!({ "op": "error", "qid": request.get("qid"), "corpus_id": request.get("corpus_id"), "error": format!("{e:#}") }), false)
        }
    }
}

fn load_corpus(request: &Value, corpora: &mut HashMap<String, Corpus>, setup: &Setup) -> Result<usize> {
    let corpus_id = request["corpus_id"].as_str().ok_or_else(|| anyhow!("corpus without corpus_id"))?;
    let docs = request["docs"].as_array().ok_or_else(|| anyhow!("corpus without docs"))?;
    let dir = tempfile::tempdir().context("creating a temporary store")?;
    let options = StoreOptions { path: dir.path().join("bench.db"), key: None, create: true, decay: Default::default() };
    let mut service = MemoryService::open(options, setup.config, Arc::new(SystemClock))?;
    let mut batch = Vec::with_capacity(docs.len());
    let mut doc_ids = Vec::with_capacity(docs.len());
    for doc in docs {
        let id = doc["id"].as_str().ok_or_else(|| anyhow!("document without id"))?;
        let text = doc["text"].as_str().unwrap_or("");
        let speaker = doc["meta"]["speaker"].as_str();
        // The harness sends "Speaker: text"; keep the speaker as the sender and the rest as text.
        let body = match speaker.and_then(|s| text.strip_prefix(s)).and_then(|rest| rest.strip_prefix(": ")) {
            Some(rest) if !rest.trim().is_empty() => rest.to_string(),
            _ if text.trim().is_empty() => "(empty)".to_string(),
            _ => text.to_string(),
        };
        let event_time = doc["ts"].as_str().and_then(|t| parse_time("ts", t).ok());
        // The conversation thread: the session, as the hooks use the session key.
        let session = match &doc["meta"]["session"] {
            Value::Null => "0".to_string(),
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        doc_ids.push(id.to_string());
        let payload = Payload::Event(EventPayload {
            event_kind: "message".into(),
            reference: Some(format!("{corpus_id}/session-{session}")),
            sender: speaker.map(str::to_string),
            text: body,
            event_time,
        });
        batch.push((payload, IngestOptions { actor: Some("bench".into()), ..Default::default() }));
    }
    let n = batch.len();
    let ids = service.ingest_batch(batch)?;
    let docs: HashMap<String, String> = ids.into_iter().map(|id| id.to_string()).zip(doc_ids).collect();
    if let Some(model) = &setup.model {
        service.enable_embeddings(model.clone(), setup.index)?;
        service.embed_pending(64, false, &mut |_| {})?;
    }
    corpora.insert(corpus_id.to_string(), Corpus { service, docs, _dir: dir });
    Ok(n)
}

fn query(request: &Value, corpora: &HashMap<String, Corpus>) -> Result<Vec<String>> {
    let corpus_id = request["corpus_id"].as_str().unwrap_or("");
    let corpus = corpora.get(corpus_id).ok_or_else(|| anyhow!("unknown corpus {corpus_id:?}"))?;
    let k = request["k"].as_u64().unwrap_or(10).clamp(1, 1000) as usize;
    let retrieve = RetrieveRequest {
        query: request["query"].as_str().unwrap_or("").to_string(),
        max_sensitivity: Some(Sensitivity::Critical),
        limit: k,
        ..Default::default()
    };
    let hits = corpus.service.retrieve(&retrieve, &Access::owner())?;
    Ok(hits.into_iter().filter_map(|h| corpus.docs.get(h.record.id.as_str()).cloned()).collect())
}

// ---- bench store ------------------------------------------------------------------

/// SplitMix64: a small deterministic generator, so every run sees the same data.
pub(crate) struct Rng(pub(crate) u64);

impl Rng {
    pub(crate) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    pub(crate) fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    pub(crate) fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// Synthetic text: words from a 20,000-word vocabulary with a Zipf(1) distribution.
pub(crate) struct TextGen {
    words: Vec<String>,
    cumulative: Vec<f64>,
    rng: Rng,
}

impl TextGen {
    pub(crate) fn new(seed: u64) -> Self {
        const VOCAB: usize = 20_000;
        let syllables = ["ka", "lo", "mi", "ne", "ru", "sa", "ti", "vo", "ze", "pa", "qu", "dor", "fen", "gil", "hax", "jun"];
        let words: Vec<String> = (0..VOCAB)
            .map(|mut i| {
                let mut w = String::new();
                loop {
                    w.push_str(syllables[i % syllables.len()]);
                    i /= syllables.len();
                    if i == 0 {
                        break;
                    }
                }
                w
            })
            .collect();
        let mut total = 0.0;
        let cumulative = (1..=VOCAB)
            .map(|r| {
                total += 1.0 / r as f64;
                total
            })
            .collect::<Vec<_>>();
        let cumulative = cumulative.iter().map(|c| c / total).collect();
        TextGen { words, cumulative, rng: Rng(seed) }
    }

    fn word(&mut self) -> &str {
        let u = self.rng.unit();
        let i = self.cumulative.partition_point(|&c| c < u).min(self.words.len() - 1);
        &self.words[i]
    }

    pub(crate) fn sentence(&mut self) -> String {
        let n = 12 + self.rng.below(19);
        (0..n).map(|_| self.word().to_string()).collect::<Vec<_>>().join(" ")
    }

    /// A query of 2–3 mid-frequency words (vocabulary ranks 100..20,000).
    pub(crate) fn query(&mut self) -> String {
        let n = 2 + self.rng.below(2);
        (0..n).map(|_| self.words[100 + self.rng.below(self.words.len() - 100)].clone()).collect::<Vec<_>>().join(" ")
    }
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

pub(crate) fn summarize(mut v: Vec<f64>) -> (f64, f64) {
    v.sort_by(f64::total_cmp);
    (percentile(&v, 0.5), percentile(&v, 0.99))
}

/// Measures mneme against raw SQLite at each size and prints a table (or JSON).
pub fn store(sizes: &[usize], queries: usize, single: usize, json_out: bool) -> Result<()> {
    let mut rows = Vec::new();
    for &n in sizes {
        eprintln!("== {n} records");
        let dir = tempfile::tempdir()?;
        let mut textgen = TextGen::new(42);
        let texts: Vec<String> = (0..n).map(|_| textgen.sentence()).collect();
        let query_texts: Vec<String> = (0..queries).map(|_| textgen.query()).collect();

        // Raw SQLite: one row table + an FTS5 table, batches of 1000 per transaction.
        let raw_path = dir.path().join("raw.db");
        let raw = rusqlite::Connection::open(&raw_path)?;
        raw.execute_batch(
            "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;
             CREATE TABLE docs (id INTEGER PRIMARY KEY, body TEXT NOT NULL);
             CREATE VIRTUAL TABLE docs_fts USING fts5(body, tokenize='porter unicode61');",
        )?;
        let started = Instant::now();
        for chunk in texts.chunks(1000) {
            let tx = raw.unchecked_transaction()?;
            {
                let mut a = tx.prepare_cached("INSERT INTO docs (body) VALUES (?1)")?;
                let mut b = tx.prepare_cached("INSERT INTO docs_fts (rowid, body) VALUES (?1, ?2)")?;
                for t in chunk {
                    a.execute([t])?;
                    b.execute(rusqlite::params![tx.last_insert_rowid(), t])?;
                }
            }
            tx.commit()?;
        }
        let raw_rate = n as f64 / started.elapsed().as_secs_f64();
        eprintln!("   raw sqlite+fts5 batched: {raw_rate:.0}/s");

        // mneme: the first `single` records one transaction each, the rest batched by 1000.
        let options = StoreOptions { path: dir.path().join("mneme.db"), key: None, create: true, decay: Default::default() };
        let service = MemoryService::open(options, ServiceConfig::default(), Arc::new(SystemClock))?;
        let payload = |t: &String| {
            Payload::Event(EventPayload { event_kind: "message".into(), reference: None, sender: None, text: t.clone(), event_time: None })
        };
        let single = single.min(n);
        let started = Instant::now();
        for t in &texts[..single] {
            service.ingest(payload(t), IngestOptions::default())?;
        }
        let single_rate = single as f64 / started.elapsed().as_secs_f64();
        let started = Instant::now();
        for chunk in texts[single..].chunks(1000) {
            service.ingest_batch(chunk.iter().map(|t| (payload(t), IngestOptions::default())).collect())?;
        }
        let batched_rate = (n - single) as f64 / started.elapsed().as_secs_f64();
        eprintln!("   mneme one-by-one: {single_rate:.0}/s, batched: {batched_rate:.0}/s");

        // Queries, interleaved so machine noise hits both equally.
        let mut raw_ms = Vec::with_capacity(queries);
        let mut mneme_ms = Vec::with_capacity(queries);
        let mut stmt = raw.prepare("SELECT rowid FROM docs_fts WHERE docs_fts MATCH ?1 ORDER BY rank LIMIT 10")?;
        for q in &query_texts {
            let expr = mneme_core::query::fts5_expression(q).unwrap_or_default();
            let t0 = Instant::now();
            let ids: Vec<i64> = stmt.query_map([&expr], |r| r.get(0))?.collect::<Result<_, _>>()?;
            raw_ms.push(t0.elapsed().as_secs_f64() * 1000.0);
            std::hint::black_box(ids);
            let t0 = Instant::now();
            let hits = service.retrieve(&RetrieveRequest { query: q.to_string(), limit: 10, ..Default::default() }, &Access::owner())?;
            mneme_ms.push(t0.elapsed().as_secs_f64() * 1000.0);
            std::hint::black_box(hits);
        }
        let mut empty_ms = Vec::new();
        for _ in 0..queries.min(200) {
            let t0 = Instant::now();
            std::hint::black_box(service.retrieve(&RetrieveRequest { limit: 10, ..Default::default() }, &Access::owner())?);
            empty_ms.push(t0.elapsed().as_secs_f64() * 1000.0);
        }
        let (raw_p50, raw_p99) = summarize(raw_ms);
        let (m_p50, m_p99) = summarize(mneme_ms);
        let (e_p50, e_p99) = summarize(empty_ms);
        eprintln!(
            "   recall p50 {m_p50:.3} ms p99 {m_p99:.3} ms; raw fts5 p50 {raw_p50:.3} ms p99 {raw_p99:.3} ms; empty query p50 {e_p50:.3} ms"
        );
        rows.push(json!({
            "records": n,
            "raw_insert_per_s": raw_rate,
            "mneme_single_per_s": single_rate,
            "mneme_batched_per_s": batched_rate,
            "batched_vs_raw": batched_rate / raw_rate,
            "recall_p50_ms": m_p50, "recall_p99_ms": m_p99,
            "raw_fts5_p50_ms": raw_p50, "raw_fts5_p99_ms": raw_p99,
            "empty_query_p50_ms": e_p50, "empty_query_p99_ms": e_p99,
            "mneme_db_bytes": std::fs::metadata(dir.path().join("mneme.db")).map(|m| m.len()).unwrap_or(0),
            "raw_db_bytes": std::fs::metadata(&raw_path).map(|m| m.len()).unwrap_or(0),
        }));
    }
    if json_out {
        outln!("{}", serde_json::to_string_pretty(&rows)?);
    } else {
        outln!(
            "| records | raw insert/s | mneme 1-by-1/s | mneme batched/s | batched÷raw | recall p50 | recall p99 | raw FTS5 p50 | raw FTS5 p99 | empty-query p50 |"
        );
        outln!("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
        for r in &rows {
            outln!(
                "| {} | {:.0} | {:.0} | {:.0} | {:.2} | {:.3} ms | {:.3} ms | {:.3} ms | {:.3} ms | {:.3} ms |",
                r["records"],
                r["raw_insert_per_s"].as_f64().unwrap_or(0.0),
                r["mneme_single_per_s"].as_f64().unwrap_or(0.0),
                r["mneme_batched_per_s"].as_f64().unwrap_or(0.0),
                r["batched_vs_raw"].as_f64().unwrap_or(0.0),
                r["recall_p50_ms"].as_f64().unwrap_or(0.0),
                r["recall_p99_ms"].as_f64().unwrap_or(0.0),
                r["raw_fts5_p50_ms"].as_f64().unwrap_or(0.0),
                r["raw_fts5_p99_ms"].as_f64().unwrap_or(0.0),
                r["empty_query_p50_ms"].as_f64().unwrap_or(0.0),
            );
        }
    }
    Ok(())
}
