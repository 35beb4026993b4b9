//! `mneme-bench fleet`: several `mneme serve` processes on one PostgreSQL database against
//! one, under the same client load.
//!
//! 1. Prefill the (empty) database through the service, then `VACUUM ANALYZE`.
//! 2. For each fleet size: start that many daemons (each its own data directory, one
//!    database), spread `clients` gRPC clients over them round-robin, ingest for
//!    `seconds`, then ask `queries` retrieves; stop the daemons.
//! 3. CPU per operation, split by who spent it: the daemons, the PostgreSQL server (every
//!    `postgres` process; backends that ended during a phase are not counted), and this
//!    client process; and the whole machine's CPU from `/proc/stat`. On 2 cores all of them
//!    share the CPU, so throughput is bounded by the sum.

use std::path::Path;
use std::process::{Child, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow};
use mneme_core::{EventPayload, Payload, SystemClock};
use mneme_service::{IngestOptions, MemoryService, ServiceConfig};
use serde_json::json;

use crate::daemon::cpu_seconds;
use crate::synth::{TextGen, summarize};

/// CPU seconds so far of every process whose command is `postgres`.
fn postgres_cpu() -> f64 {
    let Ok(dir) = std::fs::read_dir("/proc") else { return 0.0 };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.trim() == "postgres"))
        .map(cpu_seconds)
        .sum()
}

/// The machine's busy CPU seconds so far (all cores: user, nice, system, irq, softirq).
fn machine_cpu() -> f64 {
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let Some(line) = stat.lines().next() else { return 0.0 };
    let ticks: Vec<f64> = line.split_whitespace().skip(1).filter_map(|v| v.parse().ok()).collect();
    let busy: f64 = [0usize, 1, 2, 5, 6].iter().filter_map(|&i| ticks.get(i)).sum();
    busy / 100.0
}

/// CPU spent by each party over a phase.
#[derive(Clone, Copy)]
struct Cpu {
    daemons: f64,
    database: f64,
    client: f64,
    machine: f64,
}

fn cpu_now(daemons: &[u32]) -> Cpu {
    Cpu {
        daemons: daemons.iter().map(|&p| cpu_seconds(p)).sum(),
        database: postgres_cpu(),
        client: cpu_seconds(std::process::id()),
        machine: machine_cpu(),
    }
}

fn per_op(before: Cpu, after: Cpu, ops: usize) -> serde_json::Value {
    let us = |a: f64, b: f64| (b - a) * 1e6 / ops.max(1) as f64;
    json!({
        "daemons_us": us(before.daemons, after.daemons),
        "database_us": us(before.database, after.database),
        "client_us": us(before.client, after.client),
        "machine_us": us(before.machine, after.machine),
    })
}

fn start_daemon(exe: &Path, dir: &Path, url: &str) -> Result<(Child, mneme_server::DaemonFile)> {
    let mut child = std::process::Command::new(exe)
        .arg("--data-dir")
        .arg(dir)
        .args(["--set", "storage.backend=postgres", "serve", "--grpc-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0"])
        .args(["--log-level", "warn"])
        .env("MNEME_DATABASE_URL", url)
        .env_remove("MNEME_CONFIG")
        .stdin(Stdio::null())
        .spawn()
        .context("cannot start mneme serve")?;
    let started = Instant::now();
    loop {
        if let Some(f) = mneme_server::DaemonFile::read(&dir.join("daemon.json")) {
            return Ok((child, f));
        }
        if started.elapsed() > Duration::from_secs(30) || child.try_wait()?.is_some() {
            let _ = child.kill();
            return Err(anyhow!("the daemon in {} did not start", dir.display()));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

pub fn fleet(records: usize, clients: usize, seconds: f64, queries: usize, url: &str, sizes: &[usize], json_out: bool) -> Result<()> {
    let exe = crate::mneme_exe()?;
    let clients = clients.max(1);
    let mut textgen = TextGen::new(5);
    eprintln!("== prefilling {records} records");
    {
        let dir = tempfile::tempdir()?;
        let service = MemoryService::open_postgres(
            mneme_store::PgOptions { create: true, ..mneme_store::PgOptions::new(url) },
            dir.path().join("local.db"),
            ServiceConfig::default(),
            Arc::new(SystemClock),
        )?;
        let event = |t: String| {
            Payload::Event(EventPayload { event_kind: "message".into(), reference: None, sender: None, text: t, event_time: None })
        };
        let mut left = records;
        while left > 0 {
            let n = left.min(1000);
            service.ingest_batch((0..n).map(|_| (event(textgen.sentence()), IngestOptions::default())).collect())?;
            left -= n;
        }
    }
    postgres::Client::connect(url, postgres::NoTls)?.batch_execute("VACUUM ANALYZE")?;
    let query_texts: Arc<Vec<String>> = Arc::new((0..queries).map(|_| textgen.query()).collect());
    let texts: Arc<Vec<String>> = Arc::new((0..20_000).map(|_| textgen.sentence()).collect());
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    let mut rows = Vec::new();
    for &size in sizes {
        eprintln!("== {size} daemon(s), {clients} clients");
        let dirs: Vec<tempfile::TempDir> = (0..size).map(|_| tempfile::tempdir()).collect::<std::io::Result<_>>()?;
        let mut daemons = Vec::new();
        for d in &dirs {
            daemons.push(start_daemon(&exe, d.path(), url)?);
        }
        std::thread::sleep(Duration::from_millis(500));
        let pids: Vec<u32> = daemons.iter().map(|(c, _)| c.id()).collect();
        let addrs: Vec<String> = daemons.iter().map(|(_, f)| format!("http://{}", f.grpc_addr)).collect();
        let result = rt.block_on(load(&addrs, &pids, clients, seconds, query_texts.clone(), texts.clone()));
        for (mut child, _) in daemons {
            let _ = rustix::process::kill_process(
                rustix::process::Pid::from_raw(child.id() as i32).ok_or_else(|| anyhow!("pid"))?,
                rustix::process::Signal::TERM,
            );
            child.wait()?;
        }
        let mut row = result?;
        row["daemons"] = json!(size);
        rows.push(row);
    }
    let report = json!({ "prefilled": records, "clients": clients, "seconds": seconds, "queries": queries, "fleets": rows });
    if json_out {
        outln!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        outln!("{records} records prefilled, {clients} gRPC clients; CPU µs per operation: daemons + database + clients (machine)");
        outln!("| daemons | ingest/s | ingest p50 / p99 | CPU per ingest | retrieve/s | retrieve p50 / p99 | CPU per retrieve |");
        outln!("|---:|---:|---:|---|---:|---:|---|");
        for r in &rows {
            let f = |k: &str| r[k].as_f64().unwrap_or(0.0);
            let cpu = |k: &str| {
                let c = &r[k];
                let g = |n: &str| c[n].as_f64().unwrap_or(0.0);
                format!("{:.0} + {:.0} + {:.0} ({:.0})", g("daemons_us"), g("database_us"), g("client_us"), g("machine_us"))
            };
            outln!(
                "| {} | {:.0} | {:.1} / {:.1} ms | {} | {:.0} | {:.1} / {:.1} ms | {} |",
                r["daemons"],
                f("ingest_per_s"),
                f("ingest_p50_ms"),
                f("ingest_p99_ms"),
                cpu("ingest_cpu"),
                f("retrieve_per_s"),
                f("retrieve_p50_ms"),
                f("retrieve_p99_ms"),
                cpu("retrieve_cpu")
            );
        }
    }
    Ok(())
}

async fn load(
    addrs: &[String],
    pids: &[u32],
    clients: usize,
    seconds: f64,
    queries: Arc<Vec<String>>,
    texts: Arc<Vec<String>>,
) -> Result<serde_json::Value> {
    let mut channels = Vec::new();
    for c in 0..clients {
        channels.push(tonic::transport::Channel::from_shared(addrs[c % addrs.len()].clone())?.connect().await?);
    }
    let deadline = Instant::now() + Duration::from_secs_f64(seconds);
    let started = Instant::now();
    let before = cpu_now(pids);
    let lat = crate::daemon::ingest_until(&channels, deadline, texts).await?;
    let ingest_per_s = lat.len() as f64 / started.elapsed().as_secs_f64();
    let ingest_cpu = per_op(before, cpu_now(pids), lat.len());
    let ingests = lat.len();
    let (ingest_p50, ingest_p99) = summarize(lat);

    let started = Instant::now();
    let before = cpu_now(pids);
    let lat = crate::daemon::retrieve_each(&channels, queries).await?;
    let retrieve_per_s = lat.len() as f64 / started.elapsed().as_secs_f64();
    let retrieve_cpu = per_op(before, cpu_now(pids), lat.len());
    let (retrieve_p50, retrieve_p99) = summarize(lat);
    Ok(json!({
        "ingests": ingests,
        "ingest_per_s": ingest_per_s, "ingest_p50_ms": ingest_p50, "ingest_p99_ms": ingest_p99, "ingest_cpu": ingest_cpu,
        "retrieve_per_s": retrieve_per_s, "retrieve_p50_ms": retrieve_p50, "retrieve_p99_ms": retrieve_p99, "retrieve_cpu": retrieve_cpu,
    }))
}
