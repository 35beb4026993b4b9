//! `mneme-bench workspace`: search over the workspace files at scale. Builds a workspace of
//! synthetic Markdown files (headings, paragraphs of Zipf-distributed words, 1–25 KB each)
//! in a temporary data directory, then measures:
//! - the first full index (files/s, chunks);
//! - a refresh when nothing changed (one stat per file: what `mneme search` and each daemon
//!   poll pay);
//! - in-process search latency (`MemoryService::search_files`, top 10);
//! - `mneme search` and `mneme claude-hook session-start` as processes (process start, config,
//!   store open, refresh, search / context, output), against `mneme --version` as the
//!   process-start baseline in the same loop.

use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context as _, Result};
use mneme_agent::file_index;
use mneme_core::SystemClock;
use mneme_service::{ConversationInput, MemoryService, ServiceConfig};
use mneme_store::StoreOptions;
use serde_json::json;

use crate::synth::{TextGen, summarize};

const DIRS: [&str; 5] = ["reference", "sessions", "archive", "memory", "users/owner"];

pub fn workspace(files: usize, queries: usize, runs: usize, model_dir: Option<&std::path::Path>, json_out: bool) -> Result<()> {
    // Before any work: without a `mneme` binary this benchmark cannot finish.
    let exe = crate::mneme_exe()?;
    let dir = tempfile::tempdir().context("creating a temporary data directory")?;
    let data = dir.path();
    let ws = data.join("workspace");
    let mut text = TextGen::new(7);
    let mut bytes = 0usize;
    for i in 0..files {
        let sub = ws.join(DIRS[i % DIRS.len()]);
        std::fs::create_dir_all(&sub)?;
        let mut doc = format!("# Note {i}\n\n");
        let sections = 1 + i % 6;
        for s in 0..sections {
            doc.push_str(&format!("## Section {s}\n\n"));
            for _ in 0..(2 + (i * 7 + s) % 12) {
                for _ in 0..3 {
                    doc.push_str(&text.sentence());
                    doc.push_str(". ");
                }
                doc.push_str("\n\n");
            }
        }
        bytes += doc.len();
        std::fs::write(sub.join(format!("note-{i}.md")), doc)?;
    }
    let store = StoreOptions { path: data.join("mneme.db"), key: None, create: true, decay: Default::default() };
    let service = Arc::new(MemoryService::open(store, ServiceConfig::default(), Arc::new(SystemClock))?);
    let ops = mneme_service::Ops::new(service.clone(), false);
    let me = mneme_service::Principal::owner("bench");
    let owner = ops.owner(&me)?;

    let started = Instant::now();
    let report = file_index::sync(&owner, &ws, None, file_index::Embedding { background: false, budget: None })?;
    let index_secs = started.elapsed().as_secs_f64();

    let mut refresh = Vec::new();
    for _ in 0..20 {
        let t = Instant::now();
        let r = file_index::sync(&owner, &ws, None, file_index::Embedding { background: false, budget: None })?;
        refresh.push(t.elapsed().as_secs_f64() * 1e3);
        anyhow::ensure!(!r.changed(), "a refresh with no change re-indexed files");
    }
    let (refresh_p50, refresh_p99) = summarize(refresh);

    let mut latencies = Vec::with_capacity(queries);
    let mut hits = 0usize;
    let query_texts: Vec<String> = (0..queries.max(1)).map(|_| text.query()).collect();
    for q in &query_texts {
        let t = Instant::now();
        hits += ops.search_files(&me, q, 10, mneme_service::FileRanking::Lexical)?.hits.len();
        latencies.push(t.elapsed().as_secs_f64() * 1e3);
    }
    let (search_p50, search_p99) = summarize(latencies);

    // With a model: every chunk embedded, then search by words and meaning (each query
    // embedded once: the first pass pays for it, the second reads the query cache).
    let hybrid = match model_dir {
        None => serde_json::Value::Null,
        Some(dir) => {
            let model = mneme_embed::MiniLm::load(dir, mneme_embed::DEFAULT_MODEL).context("loading the model")?;
            service.enable_embeddings(Arc::new(model), Default::default())?;
            let t = Instant::now();
            let embedded = owner.embed_file_chunks(false, None)?;
            let embed_secs = t.elapsed().as_secs_f64();
            let mut first = Vec::with_capacity(query_texts.len());
            let mut again = Vec::with_capacity(query_texts.len());
            for q in &query_texts {
                let t = Instant::now();
                ops.search_files(&me, q, 10, mneme_service::FileRanking::Semantic)?;
                first.push(t.elapsed().as_secs_f64() * 1e3);
            }
            for q in &query_texts {
                let t = Instant::now();
                ops.search_files(&me, q, 10, mneme_service::FileRanking::Semantic)?;
                again.push(t.elapsed().as_secs_f64() * 1e3);
            }
            let (first_p50, first_p99) = summarize(first);
            let (again_p50, again_p99) = summarize(again);
            json!({
                "chunks_embedded": embedded,
                "embed_seconds": embed_secs,
                "chunks_per_second": embedded as f64 / embed_secs,
                "search_ms": { "p50": first_p50, "p99": first_p99 },
                "search_cached_query_ms": { "p50": again_p50, "p99": again_p99 },
            })
        }
    };

    // The hooks' store work: a conversation log with a few hundred entries.
    for i in 0..300 {
        ops.log_conversation(
            &me,
            ConversationInput {
                channel: "bench".into(),
                user_id: Some("owner".into()),
                direction: "in".into(),
                priority: None,
                content: format!("message {i}: {}", text.sentence()),
                at: None,
            },
        )?;
    }
    drop(ops);
    let process = |args: &[&str]| -> Result<(f64, f64)> {
        let mut times = Vec::with_capacity(runs);
        for _ in 0..runs.max(1) {
            let t = Instant::now();
            let status = Command::new(&exe)
                .arg("--data-dir")
                .arg(data)
                .args(args)
                .env_remove("MNEME_WORKSPACE")
                .env_remove("MNEME_CONFIG")
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()?;
            times.push(t.elapsed().as_secs_f64() * 1e3);
            anyhow::ensure!(status.success(), "mneme {args:?} failed");
        }
        Ok(summarize(times))
    };
    let version = process(&["--version"])?;
    let cli_search = process(&["search", &query_texts[0]])?;
    let hook = process(&["claude-hook", "session-start"])?;

    let out = json!({
        "files": files,
        "bytes": bytes,
        "chunks": report.chunks,
        "index_seconds": index_secs,
        "index_files_per_second": files as f64 / index_secs,
        "refresh_unchanged_ms": { "p50": refresh_p50, "p99": refresh_p99 },
        "search_ms": { "queries": query_texts.len(), "p50": search_p50, "p99": search_p99, "mean_hits": hits as f64 / query_texts.len() as f64 },
        "hybrid": hybrid,
        "process_ms": {
            "runs": runs,
            "version": { "p50": version.0, "p99": version.1 },
            "search": { "p50": cli_search.0, "p99": cli_search.1 },
            "hook_session_start": { "p50": hook.0, "p99": hook.1 },
        },
    });
    if json_out {
        outln!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(());
    }
    outln!("workspace: {files} files, {:.1} MB, {} chunks", bytes as f64 / 1e6, report.chunks);
    outln!("first index: {index_secs:.2} s ({:.0} files/s)", files as f64 / index_secs);
    outln!("refresh, nothing changed: p50 {refresh_p50:.2} ms, p99 {refresh_p99:.2} ms");
    outln!("search (in process, top 10): p50 {search_p50:.3} ms, p99 {search_p99:.3} ms over {} queries", query_texts.len());
    if !hybrid.is_null() {
        outln!(
            "with the model: {} chunks embedded in {:.1} s; search by words and meaning p50 {:.2} / p99 {:.2} ms (query cached: {:.2} / {:.2} ms)",
            hybrid["chunks_embedded"],
            hybrid["embed_seconds"].as_f64().unwrap_or(0.0),
            hybrid["search_ms"]["p50"].as_f64().unwrap_or(0.0),
            hybrid["search_ms"]["p99"].as_f64().unwrap_or(0.0),
            hybrid["search_cached_query_ms"]["p50"].as_f64().unwrap_or(0.0),
            hybrid["search_cached_query_ms"]["p99"].as_f64().unwrap_or(0.0)
        );
    }
    outln!("processes ({runs} runs each): --version p50 {:.2} / p99 {:.2} ms", version.0, version.1);
    outln!("  mneme search (refresh + search): p50 {:.2} / p99 {:.2} ms", cli_search.0, cli_search.1);
    outln!("  mneme claude-hook session-start: p50 {:.2} / p99 {:.2} ms", hook.0, hook.1);
    Ok(())
}
