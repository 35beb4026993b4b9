//! `mneme-bench embed`: the local embedding model's throughput on batches of short texts
//! and its single-query latency (the model `mneme model install` placed, or `--model-dir`).

use std::path::Path;
use std::time::Instant;

use anyhow::{Context, Result};
use mneme_embed::{DEFAULT_MODEL, Embedder, MiniLm, verify_model_dir};
use serde_json::json;

/// Batched throughput on short texts and single-query latency.
pub fn embed(
    dir: Option<&Path>,
    config: &mneme_server::config::MnemeConfig,
    file: Option<&Path>,
    (texts, batch, clients): (usize, usize, usize),
    json: bool,
) -> Result<()> {
    let dir = dir.map(Path::to_path_buf).or_else(|| config.embedding.model_dir.clone()).context("no model directory")?;
    verify_model_dir(&dir)?;
    let model = MiniLm::load(&dir, DEFAULT_MODEL)?;
    let words = [
        "memory",
        "agent",
        "caroline",
        "painted",
        "sunset",
        "support",
        "group",
        "docker",
        "wrapper",
        "host",
        "berlin",
        "moved",
        "week",
        "yesterday",
    ];
    let sample: Vec<String> = match file {
        Some(path) => {
            let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
            let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
            anyhow::ensure!(!lines.is_empty(), "{} has no non-empty line", path.display());
            lines.iter().cycle().take(texts).map(|l| l.to_string()).collect()
        }
        None => (0..texts).map(|i| (0..8 + i % 9).map(|j| words[(i * 7 + j * 3) % words.len()]).collect::<Vec<_>>().join(" ")).collect(),
    };
    model.embed(&["warm up"])?;
    let cpu0 = crate::daemon::cpu_seconds(std::process::id());
    let started = Instant::now();
    for chunk in sample.chunks(batch.max(1)) {
        let refs: Vec<&str> = chunk.iter().map(String::as_str).collect();
        std::hint::black_box(model.embed(&refs)?);
    }
    let per_s = texts as f64 / started.elapsed().as_secs_f64();
    // Process CPU (user + system, every thread) per text of the batched phase: the figure to
    // set beside ONNX Runtime's on the same texts (bench/embed/onnx_baseline.py).
    let cpu_ms = (crate::daemon::cpu_seconds(std::process::id()) - cpu0) * 1000.0 / texts.max(1) as f64;
    let mut single = Vec::new();
    for t in sample.iter().take(200) {
        let t0 = Instant::now();
        std::hint::black_box(model.embed(&[t.as_str()])?);
        single.push(t0.elapsed().as_secs_f64() * 1000.0);
    }
    let (p50, p99) = crate::synth::summarize(single);
    let concurrent = (clients > 0).then(|| concurrent_queries(&model, &sample, clients)).transpose()?;
    let mut out = json!({
        "texts": texts,
        "batch": batch,
        "texts_per_s": per_s,
        "cpu_ms_per_text": cpu_ms,
        "passes_spread_over_threads": model.spreads_passes(),
        "single_query_p50_ms": p50,
        "single_query_p99_ms": p99,
    });
    if let Some(c) = &concurrent {
        out["concurrent_queries"] = c.clone();
    }
    if json {
        outln!("{out}");
    } else {
        let what = file.map(|f| format!("lines of {}", f.display())).unwrap_or_else(|| "short texts (8–16 words)".into());
        outln!(
            "{texts} {what} in batches of {batch}: {per_s:.0} texts/s, {cpu_ms:.1} ms CPU per text; one query: p50 {p50:.2} ms, p99 {p99:.2} ms"
        );
        if let Some(c) = &concurrent {
            outln!(
                "the same texts as queries from {clients} threads at once: {:.0} queries/s, {:.1} ms CPU per query, p50 {:.2} ms, p99 {:.2} ms",
                c["queries_per_s"].as_f64().unwrap_or(0.0),
                c["cpu_ms_per_query"].as_f64().unwrap_or(0.0),
                c["p50_ms"].as_f64().unwrap_or(0.0),
                c["p99_ms"].as_f64().unwrap_or(0.0)
            );
        }
    }
    Ok(())
}

/// Every text of `sample` embedded alone (a query) by `clients` threads taking turns from
/// one list, as concurrent recalls ask: queries that meet share forward passes.
fn concurrent_queries(model: &MiniLm, sample: &[String], clients: usize) -> Result<serde_json::Value> {
    let next = std::sync::atomic::AtomicUsize::new(0);
    let cpu0 = crate::daemon::cpu_seconds(std::process::id());
    let started = Instant::now();
    let latencies: Vec<f64> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..clients)
            .map(|_| {
                scope.spawn(|| -> Result<Vec<f64>> {
                    let mut mine = Vec::new();
                    while let Some(text) = sample.get(next.fetch_add(1, std::sync::atomic::Ordering::Relaxed)) {
                        let t0 = Instant::now();
                        std::hint::black_box(model.embed(&[text.as_str()])?);
                        mine.push(t0.elapsed().as_secs_f64() * 1000.0);
                    }
                    Ok(mine)
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().expect("a query thread panicked")).collect::<Result<Vec<_>>>()
    })?
    .into_iter()
    .flatten()
    .collect();
    let wall = started.elapsed().as_secs_f64();
    let cpu_ms = (crate::daemon::cpu_seconds(std::process::id()) - cpu0) * 1000.0 / sample.len().max(1) as f64;
    let (p50, p99) = crate::synth::summarize(latencies);
    Ok(json!({
        "clients": clients,
        "queries": sample.len(),
        "queries_per_s": sample.len() as f64 / wall,
        "cpu_ms_per_query": cpu_ms,
        "p50_ms": p50,
        "p99_ms": p99,
    }))
}
