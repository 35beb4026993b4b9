//! `mneme-bench retrieval`: the JSON-lines protocol of `../shared/bench/README.md` on
//! stdin/stdout, answering with this engine on a temporary store per corpus (one
//! document = one episodic record, the document id in the record's `ref`).

use std::collections::HashMap;
use std::io::{BufRead, Write};
use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context as _, Result, anyhow};
use mneme_core::{EventPayload, Payload, Sensitivity, SystemClock};
use mneme_service::{Access, IngestOptions, MemoryService, RetrieveRequest, ServiceConfig};
use mneme_store::StoreOptions;
use serde_json::{Value, json};

use crate::parse_time;

struct Corpus {
    service: MemoryService,
    /// Record id → the harness's document id.
    docs: HashMap<String, String>,
    /// On PostgreSQL: the corpus's own database, dropped with the corpus.
    database: Option<String>,
    // Keeps the temporary store alive until the corpus is dropped.
    _dir: tempfile::TempDir,
}

/// What every corpus is served with: the effective configuration (`--set`, `MNEME_*`)
/// and the embedding model it names (`MNEME_MODEL_DIR`, `embedding.provider`), or none.
struct Setup {
    config: ServiceConfig,
    index: mneme_service::IndexParams,
    model: Option<Arc<dyn mneme_embed::Embedder>>,
    /// `storage.backend = "postgres"`: the configured database's URL; each corpus gets a
    /// database of its own on that server.
    postgres: Option<String>,
}

/// A database for one corpus on the configured server: `(its URL, its name)`.
fn corpus_database(url: &str, corpus: usize) -> Result<(String, String)> {
    let name = format!("mneme_bench_{}_{corpus}", std::process::id());
    let mut admin = postgres::Client::connect(url, postgres::NoTls).context("connecting to the benchmark's PostgreSQL")?;
    admin.batch_execute(&format!("DROP DATABASE IF EXISTS {name}"))?;
    admin.batch_execute(&format!("CREATE DATABASE {name}"))?;
    let (base, query) = url.split_once('?').map_or((url, None), |(b, q)| (b, Some(q)));
    let (server, _) = base.rsplit_once('/').ok_or_else(|| anyhow!("the database URL has no database name"))?;
    let corpus_url = match query {
        Some(q) => format!("{server}/{name}?{q}"),
        None => format!("{server}/{name}"),
    };
    Ok((corpus_url, name))
}

fn drop_database(url: &str, name: &str) -> Result<()> {
    postgres::Client::connect(url, postgres::NoTls)?.batch_execute(&format!("DROP DATABASE IF EXISTS {name}"))?;
    Ok(())
}

/// Serves the retrieval-benchmark protocol on stdin/stdout until `end` or EOF, with the
/// real retrieval pipeline: the same `MemoryService::retrieve` the daemon runs, hybrid
/// when a model is available.
pub fn retrieval(config: &mneme_server::MnemeConfig, data_dir: &std::path::Path) -> Result<()> {
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
    let postgres = match config.storage.backend {
        mneme_server::config::Backend::Postgres => {
            let url = config.storage.database_url.clone().ok_or_else(|| anyhow!("backend = postgres needs MNEME_DATABASE_URL"))?;
            eprintln!("bench retrieval: on PostgreSQL, a database per corpus");
            Some(url)
        }
        mneme_server::config::Backend::Sqlite => None,
    };
    let setup = Setup { config: config.service(), index: config.embedding.index, model, postgres };
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
        "query" => query(request, corpora).map(|(ids, parts)| {
            let mut reply = json!({ "op": "query", "qid": request["qid"], "ids": ids });
            // `"explain": true` (not part of the protocol): each hit's score parts too.
            if request["explain"].as_bool() == Some(true) {
                reply["parts"] = json!(parts);
            }
            reply
        }),
        "drop" => {
            let dropped = match corpora.remove(request["corpus_id"].as_str().unwrap_or("")) {
                Some(Corpus { service, database: Some(name), .. }) => {
                    drop(service);
                    drop_database(setup.postgres.as_deref().unwrap_or(""), &name)
                }
                _ => Ok(()),
            };
            dropped.map(|()| json!({ "op": "drop", "corpus_id": request["corpus_id"], "ok": true }))
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
    let (service, database) = match &setup.postgres {
        None => {
            let options = StoreOptions { path: dir.path().join("bench.db"), key: None, create: true, decay: Default::default() };
            (MemoryService::open(options, setup.config, Arc::new(SystemClock))?, None)
        }
        Some(url) => {
            static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
            let (corpus_url, name) = corpus_database(url, NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed))?;
            let options = mneme_store::PgOptions { create: true, ..mneme_store::PgOptions::new(corpus_url) };
            (MemoryService::open_postgres(options, dir.path().join("bench.db"), setup.config, Arc::new(SystemClock))?, Some(name))
        }
    };
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
        let event_time = doc["ts"].as_str().and_then(parse_time);
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
    corpora.insert(corpus_id.to_string(), Corpus { service, docs, database, _dir: dir });
    Ok(n)
}

fn query(request: &Value, corpora: &HashMap<String, Corpus>) -> Result<(Vec<String>, Vec<mneme_core::scoring::ScoreParts>)> {
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
    Ok(hits.into_iter().filter_map(|h| corpus.docs.get(h.record.id.as_str()).map(|id| (id.clone(), h.score))).unzip())
}
