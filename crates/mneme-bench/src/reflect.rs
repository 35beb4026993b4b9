//! `mneme-bench reflect`: the wall time of an offline heartbeat tick (no model: every
//! thinking stage runs its fallback) on a store of N records spread over the last 30
//! days, with 30 days of heartbeat logs (a tick line and an output line every 30
//! minutes). Baseline, in the same process: the same ticks on an empty store and log.

use std::sync::Arc;
use std::time::Instant;

use anyhow::Result;
use jiff::{SignedDuration, Timestamp};
use mneme_core::{FixedClock, Payload, ToolOutputPayload};
use mneme_reflect::config::ReflectionConfig;
use mneme_reflect::engine::Reflector;
use mneme_reflect::tick::{TickOptions, tick};
use mneme_service::{IngestOptions, MemoryService, ServiceConfig};
use mneme_store::StoreOptions;
use serde_json::json;

use crate::synth::{TextGen, summarize};

struct Setup {
    clock: Arc<FixedClock>,
    /// The door over the store, as the owner the daemon's jobs act as.
    service: mneme_service::Ops,
    owner: mneme_service::Principal,
    settings: mneme_workspace::WorkspaceSettings,
    _dir: tempfile::TempDir,
}

fn setup(records: usize, log_days: i64, start: Timestamp) -> Result<Setup> {
    let dir = tempfile::tempdir()?;
    let clock = Arc::new(FixedClock::new(start - SignedDuration::from_hours(24 * 30)));
    let store = StoreOptions { path: dir.path().join("mneme.db"), key: None, create: true, decay: Default::default() };
    let service = MemoryService::open(store, ServiceConfig::default(), clock.clone())?;
    let mut text = TextGen::new(11);
    let per_batch = 1000;
    let batches = records.div_ceil(per_batch);
    let step = SignedDuration::from_secs(30 * 86_400 / batches.max(1) as i64);
    for b in 0..batches {
        let n = per_batch.min(records - b * per_batch);
        let batch = (0..n)
            .map(|i| {
                let payload = if i % 25 == 0 {
                    Payload::ToolOutput(ToolOutputPayload {
                        tool: "deploy".into(),
                        args: json!({}),
                        result: None,
                        error: Some(format!("timeout after {}s at /srv/app{}", i % 7, i % 3)),
                        duration_ms: Some(1200),
                    })
                } else {
                    crate::synth::message_event(text.sentence(), i)
                };
                (payload, IngestOptions::default())
            })
            .collect();
        service.ingest_batch(batch)?;
        clock.advance(step);
    }
    clock.set(start);
    let ws = dir.path().join("workspace");
    std::fs::create_dir_all(&ws)?;
    let settings = mneme_workspace::WorkspaceConfig::default().settings(ws)?;
    let ops = mneme_service::Ops::new(Arc::new(service), false);
    let me = mneme_service::Principal::owner("bench");
    // 30 days of logs: one real offline tick's lines, repeated every 30 minutes.
    if log_days > 0 {
        let engine = Reflector::offline(ReflectionConfig::default());
        let first = start - SignedDuration::from_hours(24 * log_days);
        let sample =
            tick(&engine, &ops.owner(&me)?, &settings, first, &TickOptions { idle: Some(false), dry_run: true, ..Default::default() })?;
        for slot in 0..(log_days * 48) {
            let at = first + SignedDuration::from_mins(30 * slot);
            let mut line = sample.line.clone();
            line["ts"] = json!(at.to_string());
            line["tickId"] = json!(format!("t{slot}"));
            line["actionTaken"] = json!({ "kind": "none", "reason": "bench" });
            mneme_workspace::playbook_log::append(&settings, at, &line)?;
            let output =
                json!({ "kind": "output", "ts": at.to_string(), "tickId": format!("t{slot}"), "skip": true, "skipReason": "bench" });
            mneme_workspace::playbook_log::append(&settings, at, &output)?;
        }
    }
    Ok(Setup { clock, service: ops, owner: me, settings, _dir: dir })
}

fn run(s: &Setup, ticks: usize) -> Result<Vec<f64>> {
    let engine = Reflector::offline(ReflectionConfig::default());
    let mut ms = Vec::with_capacity(ticks);
    for _ in 0..ticks {
        let now = mneme_core::Clock::now(&*s.clock);
        let started = Instant::now();
        let report =
            tick(&engine, &s.service.owner(&s.owner)?, &s.settings, now, &TickOptions { idle: Some(false), ..Default::default() })?;
        ms.push(started.elapsed().as_secs_f64() * 1000.0);
        anyhow::ensure!(report.status == "HEARTBEAT_OK", "tick: {}", report.status);
        s.clock.advance(SignedDuration::from_mins(30));
    }
    Ok(ms)
}

/// The two reads a tick starts with, timed alone: the history (the store) and 30 days
/// of log lines (the files).
fn parts(s: &Setup, n: usize) -> Result<(f64, f64)> {
    let (mut history, mut logs) = (Vec::new(), Vec::new());
    for _ in 0..n {
        let now = mneme_core::Clock::now(&*s.clock);
        let started = Instant::now();
        mneme_reflect::setup::History::gather(&s.service.owner(&s.owner)?, now)?;
        history.push(started.elapsed().as_secs_f64() * 1000.0);
        let today = s.settings.today(now);
        let started = Instant::now();
        mneme_workspace::playbook_log::read(&s.settings, today - jiff::Span::new().days(30), today)?;
        logs.push(started.elapsed().as_secs_f64() * 1000.0);
    }
    Ok((summarize(history).0, summarize(logs).0))
}

pub fn reflect(records: usize, ticks: usize, json_out: bool) -> Result<()> {
    let start = Timestamp::from_second(1_800_000_000)?;
    eprintln!("reflect: building a store of {records} records over 30 days and 30 days of heartbeat logs");
    let full = setup(records, 30, start)?;
    let empty = setup(0, 0, start)?;
    // Interleaved, so machine noise hits both alike.
    let (mut full_ms, mut empty_ms) = (Vec::new(), Vec::new());
    for _ in 0..ticks.div_ceil(5) {
        full_ms.extend(run(&full, 5)?);
        empty_ms.extend(run(&empty, 5)?);
    }
    let (history_ms, logs_ms) = parts(&full, 10)?;
    let (f50, f99) = summarize(full_ms);
    let (e50, e99) = summarize(empty_ms);
    if json_out {
        outln!(
            "{}",
            json!({ "records": records, "ticks": ticks, "full_ms": { "p50": f50, "p99": f99 }, "empty_ms": { "p50": e50, "p99": e99 }, "ratio_p50": f50 / e50 })
        );
    } else {
        outln!("offline tick, {records} records + 30 days of logs: p50 {f50:.1} ms, p99 {f99:.1} ms");
        outln!("offline tick, empty store and log (baseline):      p50 {e50:.1} ms, p99 {e99:.1} ms");
        outln!("ratio p50: {:.2}×", f50 / e50);
        outln!("of which (p50, timed alone): history {history_ms:.1} ms, 30 days of log lines {logs_ms:.1} ms");
    }
    Ok(())
}
