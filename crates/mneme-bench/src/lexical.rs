//! `mneme-bench lexical`: retrieve latency for queries of frequent words, on stores with
//! a realistic vocabulary, with and without the per-word cap (`retrieval.max_term_matches`).
//!
//! Each store holds conversations (threads of 20 turns, so every record also has the
//! context column) whose text is drawn from a 50,000-word Zipf(1) vocabulary, plus eight
//! named words that appear in a fixed share of the records, as a user's name or "docker"
//! does in a real store (30–70 %); one record in ten is `high` sensitivity, so the default
//! filter hides it. Query classes: one rare word (Zipf ranks 20,000–50,000), one, three and
//! eight frequent words (the named words and the ten most common ones), two frequent
//! words and a rare one, three mid-frequency words (ranks 100–1,000), and twenty distinct
//! words drawn from the Zipf distribution (a pasted paragraph). Every query
//! goes through `MemoryService::retrieve` (lexical only, limit 10, the default filter);
//! the uncapped service (`max_term_matches = 0`) answers a subset of the same queries in
//! the same process, interleaved, for the ratio and for overlap@10 (how many of the
//! uncapped top 10 the capped retrieve also returns).

use std::sync::Arc;
use std::time::Instant;

use anyhow::Result;
use mneme_core::{EventPayload, Payload, Sensitivity, SystemClock};
use mneme_service::{Access, IngestOptions, MemoryService, RetrieveRequest, ServiceConfig};
use mneme_store::{RecordFilter, Store, StoreOptions};
use serde_json::{Value, json};

use crate::daemon::cpu_seconds;
use crate::synth::Rng;

/// Words in most records, with the share of records that contain each.
const NAMED: [(&str, f64); 8] = [
    ("howard", 0.7),
    ("docker", 0.5),
    ("deploy", 0.45),
    ("server", 0.4),
    ("config", 0.35),
    ("build", 0.35),
    ("error", 0.3),
    ("release", 0.3),
];

const VOCAB: usize = 50_000;
const THREAD_TURNS: usize = 20;

/// Synthetic conversation text over a Zipf(1) vocabulary plus the named frequent words.
struct Vocabulary {
    words: Vec<String>,
    cumulative: Vec<f64>,
}

impl Vocabulary {
    fn new() -> Self {
        let syllables = ["ka", "lo", "mi", "ne", "ru", "sa", "ti", "vo", "ze", "pa", "qu", "dor", "fen", "gil", "hax", "jun"];
        let words = (0..VOCAB)
            .map(|i| {
                // Two syllables at least, so no word is an English one or a stopword.
                let mut n = i + syllables.len();
                let mut w = String::new();
                while n > 0 {
                    w.push_str(syllables[n % syllables.len()]);
                    n /= syllables.len();
                }
                w
            })
            .collect();
        let mut total = 0.0;
        let cumulative: Vec<f64> = (1..=VOCAB)
            .map(|r| {
                total += 1.0 / r as f64;
                total
            })
            .collect();
        Vocabulary { words, cumulative: cumulative.iter().map(|c| c / total).collect() }
    }

    fn zipf(&self, rng: &mut Rng) -> &str {
        let u = rng.unit();
        &self.words[self.cumulative.partition_point(|&c| c < u).min(VOCAB - 1)]
    }

    fn ranked(&self, rng: &mut Rng, from: usize, to: usize) -> &str {
        &self.words[from + rng.below(to - from)]
    }

    fn sentence(&self, rng: &mut Rng) -> String {
        let mut words: Vec<&str> = (0..12 + rng.below(19)).map(|_| self.zipf(rng)).collect();
        for (word, share) in NAMED {
            if rng.unit() < share {
                let at = rng.below(words.len() + 1);
                words.insert(at, word);
            }
        }
        words.join(" ")
    }

    fn frequent(&self, rng: &mut Rng) -> String {
        let i = rng.below(NAMED.len() + 10);
        if i < NAMED.len() { NAMED[i].0.to_string() } else { self.words[i - NAMED.len()].clone() }
    }

    /// `n` distinct frequent words.
    fn frequent_words(&self, rng: &mut Rng, n: usize) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        while out.len() < n {
            let w = self.frequent(rng);
            if !out.contains(&w) {
                out.push(w);
            }
        }
        out
    }

    fn query(&self, class: &str, rng: &mut Rng) -> String {
        match class {
            "rare word" => self.ranked(rng, 20_000, VOCAB).to_string(),
            "1 frequent" => self.frequent(rng),
            "3 frequent" => self.frequent_words(rng, 3).join(" "),
            "8 frequent" => self.frequent_words(rng, 8).join(" "),
            "2 frequent + 1 rare" => format!("{} {}", self.frequent_words(rng, 2).join(" "), self.ranked(rng, 20_000, VOCAB)),
            "20 Zipf words" => {
                let mut words: Vec<&str> = Vec::new();
                while words.len() < 20 {
                    let w = self.zipf(rng);
                    if !words.contains(&w) {
                        words.push(w);
                    }
                }
                words.join(" ")
            }
            _ => (0..3).map(|_| self.ranked(rng, 100, 1_000)).collect::<Vec<_>>().join(" "),
        }
    }
}

const CLASSES: [&str; 7] =
    ["rare word", "1 frequent", "3 frequent", "8 frequent", "2 frequent + 1 rare", "3 mid-frequency", "20 Zipf words"];

/// Builds a store per size and prints per-class latency, capped and uncapped.
pub fn lexical(sizes: &[usize], queries: usize, baseline: usize, cap: usize, json_out: bool) -> Result<()> {
    let vocabulary = Vocabulary::new();
    let mut report = Vec::new();
    for &n in sizes {
        eprintln!("== {n} records");
        let dir = tempfile::tempdir()?;
        let options = StoreOptions { path: dir.path().join("bench.db"), key: None, create: true, decay: Default::default() };
        let started = Instant::now();
        {
            let service = MemoryService::open(options.clone(), ServiceConfig::default(), Arc::new(SystemClock))?;
            let mut rng = Rng(n as u64);
            for chunk_start in (0..n).step_by(10_000) {
                let batch: Vec<(Payload, IngestOptions)> = (chunk_start..(chunk_start + 10_000).min(n))
                    .map(|i| {
                        let payload = Payload::Event(EventPayload {
                            event_kind: "message".into(),
                            reference: Some(format!("session-{}", i / THREAD_TURNS)),
                            sender: Some(if i % 2 == 0 { "howard" } else { "assistant" }.into()),
                            text: vocabulary.sentence(&mut rng),
                            event_time: None,
                        });
                        let sensitivity = if rng.below(10) == 0 { Sensitivity::High } else { Sensitivity::Low };
                        (payload, IngestOptions { sensitivity: Some(sensitivity), ..Default::default() })
                    })
                    .collect();
                service.ingest_batch(batch)?;
                eprint!("\ringested {}/{n}", (chunk_start + 10_000).min(n));
            }
            eprintln!();
        }
        let ingest_s = started.elapsed().as_secs_f64();
        let shares = named_shares(&options.path, n)?;
        eprintln!("   ingest {ingest_s:.1} s; records matching each named word: {shares}");

        let mut capped_config = ServiceConfig::default();
        capped_config.retrieval.max_term_matches = cap;
        capped_config.validate()?;
        let mut uncapped_config = ServiceConfig::default();
        uncapped_config.retrieval.max_term_matches = 0;
        let capped = MemoryService::open(options.clone(), capped_config, Arc::new(SystemClock))?;
        let uncapped = MemoryService::open(options.clone(), uncapped_config, Arc::new(SystemClock))?;
        // The lexical stage alone, as the capped retrieve runs it (the default filter).
        let mut store = Store::open(options)?;
        let filter = RecordFilter { max_sensitivity: Sensitivity::Medium, ..Default::default() };
        let weights = capped_config.retrieval;
        let mut rng = Rng(7);
        let mut classes = Vec::new();
        for class in CLASSES {
            let texts: Vec<String> = (0..queries).map(|_| vocabulary.query(class, &mut rng)).collect();
            let mut capped_ms = Vec::new();
            let mut stage_ms = Vec::new();
            let mut cpu_s = 0.0;
            let mut uncapped_ms = Vec::new();
            let mut overlap = Vec::new();
            let mut worst = (0.0f64, String::new());
            for (i, text) in texts.iter().enumerate() {
                let request = RetrieveRequest { query: text.clone(), limit: 10, ..Default::default() };
                let cpu = cpu_seconds(std::process::id());
                let t = Instant::now();
                let got = capped.retrieve(&request, &Access::owner())?;
                let ms = t.elapsed().as_secs_f64() * 1000.0;
                cpu_s += cpu_seconds(std::process::id()) - cpu;
                let tokens = mneme_core::query::query_tokens(text);
                let t = Instant::now();
                store.read(|tx| {
                    let columns = (weights.context_weight, weights.date_weight);
                    tx.bounded_lexical_candidates(&tokens, &filter, weights.candidate_pool, columns, weights.max_term_matches)
                })?;
                stage_ms.push(t.elapsed().as_secs_f64() * 1000.0);
                if ms > worst.0 {
                    worst = (ms, text.clone());
                }
                capped_ms.push(ms);
                if i < baseline {
                    let t = Instant::now();
                    let want = uncapped.retrieve(&request, &Access::owner())?;
                    uncapped_ms.push(t.elapsed().as_secs_f64() * 1000.0);
                    let found = want.iter().filter(|w| got.iter().any(|g| g.record.id == w.record.id)).count();
                    overlap.push(if want.is_empty() { 1.0 } else { found as f64 / want.len() as f64 });
                }
            }
            let cpu_ms = cpu_s * 1000.0 / capped_ms.len().max(1) as f64;
            let c = stats(capped_ms);
            let stage = stats(stage_ms);
            let u = stats(uncapped_ms);
            let mean_overlap = overlap.iter().sum::<f64>() / overlap.len().max(1) as f64;
            eprintln!(
                "   {class:>20}: capped p50 {:.2} p99 {:.2} max {:.2} ms (CPU mean {cpu_ms:.2} ms; lexical stage p50 {:.2} p99 {:.2}) | uncapped p50 {:.2} p99 {:.2} max {:.2} ms | overlap@10 {mean_overlap:.2}",
                c["p50_ms"], c["p99_ms"], c["max_ms"], stage["p50_ms"], stage["p99_ms"], u["p50_ms"], u["p99_ms"], u["max_ms"]
            );
            classes.push(json!({
                "class": class, "capped": c, "capped_cpu_mean_ms": cpu_ms, "lexical_stage": stage, "uncapped": u, "uncapped_queries": overlap.len(),
                "overlap_at_10": mean_overlap, "worst_query": worst.1,
            }));
        }
        report
            .push(json!({ "records": n, "max_term_matches": cap, "ingest_s": ingest_s, "named_word_shares": shares, "classes": classes }));
    }
    if json_out {
        outln!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        outln!(
            "| records | query class | capped p50 | capped p99 | capped worst | CPU per query | lexical stage p50 / p99 | uncapped p50 | uncapped p99 | uncapped worst | p50 ratio | overlap@10 |"
        );
        outln!("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
        for size in &report {
            for c in size["classes"].as_array().into_iter().flatten() {
                let f = |v: &Value| v.as_f64().unwrap_or(f64::NAN);
                outln!(
                    "| {} | {} | {:.2} ms | {:.2} ms | {:.2} ms | {:.2} ms | {:.2} / {:.2} ms | {:.1} ms | {:.1} ms | {:.1} ms | {:.0}× | {:.2} |",
                    size["records"],
                    c["class"].as_str().unwrap_or(""),
                    f(&c["capped"]["p50_ms"]),
                    f(&c["capped"]["p99_ms"]),
                    f(&c["capped"]["max_ms"]),
                    f(&c["capped_cpu_mean_ms"]),
                    f(&c["lexical_stage"]["p50_ms"]),
                    f(&c["lexical_stage"]["p99_ms"]),
                    f(&c["uncapped"]["p50_ms"]),
                    f(&c["uncapped"]["p99_ms"]),
                    f(&c["uncapped"]["max_ms"]),
                    f(&c["uncapped"]["p50_ms"]) / f(&c["capped"]["p50_ms"]),
                    f(&c["overlap_at_10"]),
                );
            }
        }
    }
    Ok(())
}

fn stats(mut v: Vec<f64>) -> Value {
    if v.is_empty() {
        return json!({});
    }
    v.sort_by(f64::total_cmp);
    let at = |p: f64| v[((v.len() - 1) as f64 * p).round() as usize];
    json!({ "p50_ms": at(0.5), "p99_ms": at(0.99), "max_ms": v[v.len() - 1], "n": v.len() })
}

/// The share of records whose text (the `text` column) holds each named word.
fn named_shares(path: &std::path::Path, n: usize) -> Result<Value> {
    let conn = rusqlite::Connection::open(path)?;
    let mut out = serde_json::Map::new();
    for (word, _) in NAMED {
        let count: i64 =
            conn.query_row("SELECT count(*) FROM records_fts WHERE records_fts MATCH ?1", [format!("text : \"{word}\"")], |r| r.get(0))?;
        out.insert(word.to_string(), json!((count as f64 / n as f64 * 1000.0).round() / 1000.0));
    }
    Ok(Value::Object(out))
}
