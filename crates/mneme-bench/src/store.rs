//! `mneme-bench store`: ingest throughput and recall latency on synthetic records, beside
//! raw SQLite inserts and FTS5 queries on the same data in the same process.

use std::sync::Arc;
use std::time::Instant;

use anyhow::Result;
use mneme_core::{EventPayload, Payload, SystemClock};
use mneme_service::{Access, IngestOptions, MemoryService, RetrieveRequest, ServiceConfig};
use mneme_store::{Store, StoreOptions};
use serde_json::json;

use crate::synth::{TextGen, summarize};

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

/// `mneme-bench dump`: the dump's throughput on N synthetic records in threads of 20
/// (so the import rebuilds conversation context), SQLite to SQLite and, with a URL,
/// through PostgreSQL. Each step's wall time and records per second.
pub fn dump(n: usize, postgres: Option<&str>, json_out: bool) -> Result<()> {
    let dir = tempfile::tempdir()?;
    let mut textgen = TextGen::new(7);
    let options = |name: &str, create| StoreOptions { path: dir.path().join(name), key: None, create, decay: Default::default() };
    let service = MemoryService::open(options("source.db", true), ServiceConfig::default(), Arc::new(SystemClock))?;
    eprintln!("== seeding {n} records");
    let texts: Vec<String> = (0..n).map(|_| textgen.sentence()).collect();
    for (c, chunk) in texts.chunks(1000).enumerate() {
        let batch = chunk
            .iter()
            .enumerate()
            .map(|(i, t)| {
                let event = EventPayload {
                    event_kind: "message".into(),
                    reference: Some(format!("thread-{}", (c * 1000 + i) / 20)),
                    sender: Some("dana".into()),
                    text: t.clone(),
                    event_time: None,
                };
                (Payload::Event(event), IngestOptions::default())
            })
            .collect();
        service.ingest_batch(batch)?;
    }
    let mut steps: Vec<(&str, f64, u64)> = Vec::new();
    let mut timed = |name: &'static str, f: &mut dyn FnMut() -> Result<u64>| -> Result<()> {
        let started = Instant::now();
        let bytes = f()?;
        let secs = started.elapsed().as_secs_f64();
        eprintln!("   {name}: {secs:.2} s, {:.0} records/s", n as f64 / secs);
        steps.push((name, secs, bytes));
        Ok(())
    };
    let mut dump = Vec::new();
    timed("export sqlite", &mut || Ok(service.export(&mut dump, &mut |_, _| {})?.bytes))?;
    let mut copy = Store::open(options("copy.db", true))?;
    timed("import sqlite", &mut || Ok(copy.import(&mut &dump[..], &mut |_, _| {})?.bytes))?;
    if let Some(url) = postgres {
        let pg = || mneme_store::PgOptions { create: true, ..mneme_store::PgOptions::new(url) };
        timed("import postgres", &mut || Ok(mneme_service::import_postgres(pg(), &mut &dump[..], &mut |_, _| {})?.bytes))?;
        let mut back = Vec::new();
        timed("export postgres", &mut || Ok(mneme_service::export_postgres(pg(), &mut back, &mut |_, _| {})?.bytes))?;
        // The rows (between header and trailer) must come back byte for byte.
        let rows = |d: &[u8]| {
            let lines: Vec<&[u8]> = d.split(|&b| b == b'\n').filter(|l| !l.is_empty()).collect();
            lines[1..lines.len() - 1].concat()
        };
        anyhow::ensure!(rows(&back) == rows(&dump), "PostgreSQL's export differs from SQLite's");
    }
    if json_out {
        let steps: Vec<_> = steps
            .iter()
            .map(|(name, secs, bytes)| serde_json::json!({"step": name, "seconds": secs, "records_per_second": n as f64 / secs, "bytes": bytes}))
            .collect();
        outln!("{}", serde_json::to_string_pretty(&serde_json::json!({"records": n, "steps": steps}))?);
    } else {
        outln!("dump of {n} records ({:.1} MB):", dump.len() as f64 / 1e6);
        for (name, secs, _) in &steps {
            outln!("  {name:<16} {secs:>7.2} s  {:>9.0} records/s", n as f64 / secs);
        }
    }
    Ok(())
}

/// `mneme-bench engines`: the service on SQLite and on PostgreSQL in one process, the same
/// N records (batches of 1000, through the group-commit path) and the same queries.
pub fn engines(n: usize, queries: usize, url: &str, vectors: bool, json_out: bool) -> Result<()> {
    let dir = tempfile::tempdir()?;
    let mut textgen = TextGen::new(11);
    // `doc N` / `query N` pick the synthetic vectors of the lookup-table model (hybrid part).
    let texts: Vec<String> = (0..n).map(|i| format!("{} doc {i}", textgen.sentence())).collect();
    let query_texts: Vec<String> = (0..queries).map(|j| format!("{} query {j}", textgen.query())).collect();
    let lite = MemoryService::open(
        StoreOptions { path: dir.path().join("mneme.db"), key: None, create: true, decay: Default::default() },
        ServiceConfig::default(),
        Arc::new(SystemClock),
    )?;
    let pg = MemoryService::open_postgres(
        mneme_store::PgOptions { create: true, ..mneme_store::PgOptions::new(url) },
        dir.path().join("pg.db"),
        ServiceConfig::default(),
        Arc::new(SystemClock),
    )?;
    let payload = |t: &String| {
        Payload::Event(EventPayload { event_kind: "message".into(), reference: None, sender: None, text: t.clone(), event_time: None })
    };
    let services = [("sqlite", &lite), ("postgres", &pg)];
    let mut rates = Vec::new();
    for (name, service) in services {
        let started = Instant::now();
        for chunk in texts.chunks(1000) {
            service.ingest_batch(chunk.iter().map(|t| (payload(t), IngestOptions::default())).collect())?;
        }
        let rate = n as f64 / started.elapsed().as_secs_f64();
        eprintln!("   {name}: ingest {rate:.0}/s");
        rates.push(rate);
    }
    // Recall p50/p99 on each engine, the queries interleaved.
    let recall = |label: &str| -> Result<[(f64, f64); 2]> {
        let (mut lite_ms, mut pg_ms) = (Vec::with_capacity(queries), Vec::with_capacity(queries));
        for q in &query_texts {
            for (service, out) in [(&lite, &mut lite_ms), (&pg, &mut pg_ms)] {
                let t0 = Instant::now();
                std::hint::black_box(
                    service.retrieve(&RetrieveRequest { query: q.to_string(), limit: 10, ..Default::default() }, &Access::owner())?,
                );
                out.push(t0.elapsed().as_secs_f64() * 1000.0);
            }
        }
        let out = [summarize(lite_ms), summarize(pg_ms)];
        eprintln!("   {label}: sqlite p50 {:.2} ms, postgres p50 {:.2} ms", out[0].0, out[1].0);
        Ok(out)
    };
    let mut client = postgres::Client::connect(url, postgres::NoTls)?;
    // Right after the load: no statistics yet, fresh rows (hint bits unset), the GIN
    // pending list full; then with statistics (ANALYZE), then vacuumed too (as autovacuum
    // leaves the tables within a minute or so).
    let cold = recall("lexical, right after the load")?;
    client.batch_execute("ANALYZE")?;
    let analyzed = recall("lexical, after ANALYZE")?;
    client.batch_execute("VACUUM")?;
    let warm = recall("lexical, after VACUUM too")?;
    let mut hybrid = None;
    if vectors {
        let dim = mneme_store::PG_HNSW_DIM;
        let table = Arc::new(crate::vectors::Table {
            docs: Arc::new(mneme_service::vectors::synthetic(n, dim, 7)),
            queries: Arc::new(mneme_service::vectors::synthetic(queries, dim, 99)),
        });
        let mut embed_rates = Vec::new();
        for (name, service) in services {
            service.enable_embeddings(table.clone(), mneme_service::IndexParams::default())?;
            let started = Instant::now();
            let done = service.embed_pending(1000, false, &mut |_| {})?;
            let rate = done as f64 / started.elapsed().as_secs_f64();
            eprintln!("   {name}: {done} vectors stored at {rate:.0}/s");
            embed_rates.push(rate);
        }
        client.batch_execute("VACUUM ANALYZE")?;
        hybrid = Some((recall("hybrid")?, embed_rates));
    }
    let entry = |i: usize| {
        let mut e = json!({
            "ingest_per_s": rates[i],
            "recall_cold_p50_ms": cold[i].0, "recall_cold_p99_ms": cold[i].1,
            "recall_analyzed_p50_ms": analyzed[i].0, "recall_analyzed_p99_ms": analyzed[i].1,
            "recall_p50_ms": warm[i].0, "recall_p99_ms": warm[i].1,
        });
        if let Some((h, embed)) = &hybrid {
            e["vectors_stored_per_s"] = json!(embed[i]);
            e["hybrid_p50_ms"] = json!(h[i].0);
            e["hybrid_p99_ms"] = json!(h[i].1);
        }
        e
    };
    let result = json!({
        "records": n,
        "sqlite": entry(0),
        "postgres": entry(1),
        "postgres_ingest_vs_sqlite": rates[1] / rates[0],
    });
    if json_out {
        outln!("{}", serde_json::to_string_pretty(&result)?);
    } else {
        outln!("| engine | ingest/s | lexical p50 / p99: cold | analyzed | vacuumed | vectors stored/s | hybrid p50 / p99 |");
        outln!("|---|---:|---:|---:|---:|---:|---:|");
        for (i, name) in ["SQLite", "PostgreSQL"].iter().enumerate() {
            let (vec_rate, hyb) = match &hybrid {
                Some((h, embed)) => (format!("{:.0}", embed[i]), format!("{:.2} / {:.2} ms", h[i].0, h[i].1)),
                None => ("-".into(), "-".into()),
            };
            outln!(
                "| {name} | {:.0} | {:.2} / {:.2} ms | {:.2} / {:.2} ms | {:.2} / {:.2} ms | {vec_rate} | {hyb} |",
                rates[i],
                cold[i].0,
                cold[i].1,
                analyzed[i].0,
                analyzed[i].1,
                warm[i].0,
                warm[i].1
            );
        }
        outln!("PostgreSQL ingest ÷ SQLite: {:.2}", rates[1] / rates[0]);
    }
    Ok(())
}
