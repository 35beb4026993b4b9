//! `mneme-bench inner`: the inner life's context assembly (levels 1–4) and an offline job
//! run (sense step + the chronicle's fallback) on a workspace with N days of daily notes,
//! diary entries and dreams (about 3 KB, 1 KB and 1 KB a day), against the same on a
//! workspace with one day, in the same process.

use std::sync::Arc;
use std::time::Instant;

use anyhow::Result;
use jiff::{SignedDuration, Timestamp};
use mneme_core::FixedClock;
use mneme_reflect::config::ReflectionConfig;
use mneme_reflect::engine::Reflector;
use mneme_reflect::inner::{InnerConfig, JobOptions};
use mneme_service::{MemoryService, ServiceConfig};
use mneme_store::StoreOptions;
use mneme_workspace::inner::{self, InnerEvent, Job};
use mneme_workspace::inner_data::{self, Drive};
use serde_json::json;

use crate::synth::{TextGen, summarize};

struct Setup {
    /// The door over the store, as the owner the daemon's jobs act as.
    service: mneme_service::Ops,
    owner: mneme_service::Principal,
    settings: mneme_workspace::WorkspaceSettings,
    _dir: tempfile::TempDir,
}

fn paragraph(text: &mut TextGen, bytes: usize) -> String {
    let mut out = String::new();
    while out.len() < bytes {
        out.push_str(&text.sentence());
        out.push(' ');
    }
    out
}

fn setup(days: i64, now: Timestamp) -> Result<Setup> {
    let dir = tempfile::tempdir()?;
    let store = StoreOptions { path: dir.path().join("mneme.db"), key: None, create: true, decay: Default::default() };
    let service = MemoryService::open(store, ServiceConfig::default(), Arc::new(FixedClock::new(now)))?;
    let ws = dir.path().join("workspace");
    std::fs::create_dir_all(ws.join("memory/diary"))?;
    std::fs::create_dir_all(ws.join("memory/dreams"))?;
    let settings = mneme_workspace::WorkspaceConfig::default().settings(ws.clone())?;
    let mut text = TextGen::new(7);
    let today = settings.today(now);
    for back in 0..days {
        let day = today.checked_sub(jiff::Span::new().days(back))?;
        let mut note = format!("# {day}\n");
        for h in ["Deploy", "Review", "Planning"] {
            note.push_str(&format!("\n## {h}\n\n{}\n", paragraph(&mut text, 1_000)));
        }
        note.push_str("\n<!-- dream-topic: autoscaling -->\n");
        std::fs::write(ws.join(format!("memory/{day}.md")), note)?;
        std::fs::write(ws.join(format!("memory/diary/{day}.md")), format!("# {day}\n\n{}\n", paragraph(&mut text, 1_000)))?;
        std::fs::write(ws.join(format!("memory/dreams/{day}.md")), format!("# Dream {day}\n\n{}\n", paragraph(&mut text, 1_000)))?;
    }
    let mut drive = Drive::default();
    for i in 0..10 {
        drive.seek(&format!("topic {i}"), 0.5, "bench", now);
    }
    std::fs::write(ws.join(inner::DRIVE), inner_data::to_file_text(inner::DRIVE, &drive)?)?;
    let habits = json!({ "version": 1, "myHabits": [], "userPatterns": [] });
    std::fs::write(ws.join(inner::HABITS), habits.to_string())?;
    std::fs::write(ws.join("questions.md"), paragraph(&mut text, 2_000))?;
    std::fs::write(ws.join("QUEUE.md"), (0..30).map(|i| format!("- [ ] item {i} (added {today})\n")).collect::<String>())?;
    inner::record(&settings, &[InnerEvent::UserMessage {}, InnerEvent::Repeat { what: "quota".into() }], now)?;
    Ok(Setup {
        service: mneme_service::Ops::new(Arc::new(service), false),
        owner: mneme_service::Principal::owner("bench"),
        settings,
        _dir: dir,
    })
}

fn time_context(s: &Setup, now: Timestamp, level: u8, n: usize) -> Result<(Vec<f64>, usize)> {
    let mut ms = Vec::with_capacity(n);
    let mut bytes = 0;
    for _ in 0..n {
        let started = Instant::now();
        bytes = inner::context(&s.settings, now, level)?.len();
        ms.push(started.elapsed().as_secs_f64() * 1000.0);
    }
    Ok((ms, bytes))
}

fn time_job(s: &Setup, now: Timestamp, n: usize) -> Result<Vec<f64>> {
    let engine = Reflector::offline(ReflectionConfig::default()).with_inner(InnerConfig::default());
    let mut ms = Vec::with_capacity(n);
    for i in 0..n {
        let at = now + SignedDuration::from_secs(i as i64);
        let started = Instant::now();
        let report = mneme_reflect::inner::run(
            &engine,
            &s.service.owner(&s.owner)?,
            &s.settings,
            Job::Chronicle,
            at,
            &JobOptions { force: true, dry_run: false },
        )?;
        ms.push(started.elapsed().as_secs_f64() * 1000.0);
        anyhow::ensure!(report.status == "fallback", "chronicle: {}", report.status);
    }
    Ok(ms)
}

pub fn inner(days: i64, runs: usize, json_out: bool) -> Result<()> {
    let now = Timestamp::from_second(1_800_000_000)?;
    eprintln!("inner: writing {days} days of notes, diary entries and dreams");
    let full = setup(days, now)?;
    let small = setup(1, now)?;
    let mut rows = Vec::new();
    for level in 1..=4u8 {
        // Interleaved, so machine noise hits both alike.
        let (mut f, mut b) = (Vec::new(), Vec::new());
        let mut bytes = 0;
        for _ in 0..runs.div_ceil(10) {
            let (ms, n) = time_context(&full, now, level, 10)?;
            f.extend(ms);
            bytes = n;
            b.extend(time_context(&small, now, level, 10)?.0);
        }
        let ((f50, f99), (b50, _)) = (summarize(f), summarize(b));
        rows.push(json!({ "level": level, "bytes": bytes, "p50_ms": f50, "p99_ms": f99, "one_day_p50_ms": b50 }));
    }
    let (mut jf, mut jb) = (Vec::new(), Vec::new());
    for _ in 0..runs.div_ceil(10).min(5) {
        jf.extend(time_job(&full, now, 4)?);
        jb.extend(time_job(&small, now, 4)?);
    }
    let ((j50, j99), (jb50, _)) = (summarize(jf), summarize(jb));
    if json_out {
        outln!("{}", json!({ "days": days, "context": rows, "chronicle_ms": { "p50": j50, "p99": j99, "one_day_p50": jb50 } }));
    } else {
        for r in &rows {
            outln!(
                "context level {}: {} bytes, p50 {:.2} ms, p99 {:.2} ms ({days} days); one day: p50 {:.2} ms",
                r["level"],
                r["bytes"],
                r["p50_ms"].as_f64().unwrap_or(0.0),
                r["p99_ms"].as_f64().unwrap_or(0.0),
                r["one_day_p50_ms"].as_f64().unwrap_or(0.0)
            );
        }
        outln!(
            "offline chronicle run (sense + fallback + writes): p50 {j50:.1} ms, p99 {j99:.1} ms ({days} days); one day: p50 {jb50:.1} ms"
        );
    }
    Ok(())
}
