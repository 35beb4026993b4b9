//! `mneme-bench daemon`: a real `mneme serve` child process under load from this process.
//!
//! 1. Prefill a store (events, plus facts, skills and working states for session_start).
//! 2. Baseline, in this process on the same store: direct `MemoryService` ingest (one
//!    transaction each) and retrieve latency for the same queries.
//! 3. Start `mneme serve`; RSS idle; N gRPC clients ingest for the given seconds; N clients
//!    retrieve; session_start and message_received round trips over HTTP and gRPC; RSS after.
//!
//! Client and daemon share the machine's cores, so the figures are conservative.

use std::path::Path;
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, anyhow};
use mneme_core::{CompetencePayload, EventPayload, Payload, SemanticPayload, SystemClock, WorkingPayload};
use mneme_server::pb;
use mneme_service::{Access, IngestOptions, MemoryService, RetrieveRequest, ServiceConfig};
use mneme_store::StoreOptions;
use serde_json::json;

use crate::synth::{TextGen, summarize};

pub fn rss_kib(pid: u32, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| s.lines().find(|l| l.starts_with(field)).and_then(|l| l.split_whitespace().nth(1)).and_then(|v| v.parse().ok()))
        .unwrap_or(0)
}

/// User + system CPU seconds of a process so far.
pub fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command name (which may contain spaces) start after the last ')'.
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| fields.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    // utime and stime are fields 14 and 15 of the whole line: 11 and 12 after the ')'.
    (ticks(11) + ticks(12)) / 100.0
}

fn prefill(dir: &Path, records: usize, textgen: &mut TextGen) -> Result<()> {
    let options = StoreOptions { path: dir.join("mneme.db"), key: None, create: true, decay: Default::default() };
    let service = MemoryService::open(options, ServiceConfig::default(), Arc::new(SystemClock))?;
    let facts = records / 10;
    let mut batch = Vec::with_capacity(1000);
    for i in 0..records {
        let payload = if i < facts {
            Payload::Semantic(SemanticPayload {
                subject: textgen.query(),
                predicate: "relates to".into(),
                object: textgen.sentence(),
                valid_from: None,
                valid_to: None,
                evidence: Vec::new(),
            })
        } else if i < facts + 50 {
            Payload::Competence(CompetencePayload {
                skill: format!("skill:tool{i}"),
                triggers: vec![textgen.query()],
                steps: vec![textgen.sentence()],
                performance: Default::default(),
            })
        } else if i < facts + 100 {
            Payload::Working(WorkingPayload {
                thread_id: format!("t{i}"),
                state: textgen.sentence(),
                next_actions: Vec::new(),
                open_questions: Vec::new(),
                summary: String::new(),
            })
        } else {
            Payload::Event(EventPayload {
                event_kind: "message".into(),
                reference: None,
                sender: None,
                text: textgen.sentence(),
                event_time: None,
            })
        };
        batch.push((payload, IngestOptions::default()));
        if batch.len() == 1000 {
            service.ingest_batch(std::mem::take(&mut batch))?;
        }
    }
    if !batch.is_empty() {
        service.ingest_batch(batch)?;
    }
    Ok(())
}

/// Direct in-process calls on the same store: the baseline the daemon is compared with.
fn baseline(dir: &Path, queries: &[String], seconds: f64, textgen: &mut TextGen) -> Result<(f64, f64, f64)> {
    let options = StoreOptions { path: dir.join("mneme.db"), key: None, create: false, decay: Default::default() };
    let service = MemoryService::open(options, ServiceConfig::default(), Arc::new(SystemClock))?;
    let mut ms = Vec::new();
    for q in queries {
        let t0 = Instant::now();
        std::hint::black_box(service.retrieve(&RetrieveRequest { query: q.clone(), limit: 10, ..Default::default() }, &Access::owner())?);
        ms.push(t0.elapsed().as_secs_f64() * 1000.0);
    }
    let (p50, p99) = summarize(ms);
    let texts: Vec<String> = (0..50_000).map(|_| textgen.sentence()).collect();
    let started = Instant::now();
    let mut n = 0;
    while started.elapsed().as_secs_f64() < seconds.min(3.0) && seconds > 0.0 {
        let event = EventPayload {
            event_kind: "message".into(),
            reference: None,
            sender: None,
            text: texts[n % texts.len()].clone(),
            event_time: None,
        };
        service.ingest_event(event, IngestOptions::default())?;
        n += 1;
    }
    Ok((p50, p99, n as f64 / started.elapsed().as_secs_f64().max(1e-9)))
}

/// The same queries from `clients` threads in this process, through reader connections:
/// (p50 ms, p99 ms, process CPU µs per query). Separates concurrency costs from RPC costs.
fn concurrent_direct(dir: &Path, queries: &[String], clients: usize) -> Result<(f64, f64, f64)> {
    let options = StoreOptions { path: dir.join("mneme.db"), key: None, create: false, decay: Default::default() };
    let mut service = MemoryService::open(options, ServiceConfig::default(), Arc::new(SystemClock))?;
    service.add_readers(2)?;
    let service = &service;
    let cpu0 = cpu_seconds(std::process::id());
    let lat: Vec<f64> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..clients)
            .map(|c| {
                s.spawn(move || {
                    let mut lat = Vec::new();
                    for q in queries.iter().skip(c).step_by(clients) {
                        let t0 = Instant::now();
                        let r = service.retrieve(&RetrieveRequest { query: q.clone(), limit: 10, ..Default::default() }, &Access::owner());
                        std::hint::black_box(r.ok());
                        lat.push(t0.elapsed().as_secs_f64() * 1000.0);
                    }
                    lat
                })
            })
            .collect();
        handles.into_iter().flat_map(|h| h.join().unwrap_or_default()).collect()
    });
    let cpu_us = (cpu_seconds(std::process::id()) - cpu0) * 1e6 / lat.len().max(1) as f64;
    let (p50, p99) = summarize(lat);
    Ok((p50, p99, cpu_us))
}

pub fn daemon(records: usize, clients: usize, seconds: f64, queries: usize, json_out: bool) -> Result<()> {
    // Before any work: without a `mneme` binary this benchmark cannot finish.
    let exe = crate::mneme_exe()?;
    let clients = clients.max(1);
    let dir = tempfile::tempdir()?;
    let mut textgen = TextGen::new(7);
    eprintln!("== prefilling {records} records");
    prefill(dir.path(), records, &mut textgen)?;
    let query_texts: Vec<String> = (0..queries).map(|_| textgen.query()).collect();
    let queries_after = query_texts.clone();
    eprintln!("== baseline: direct service calls");
    let (direct_p50, direct_p99, direct_ingest) = baseline(dir.path(), &query_texts, seconds, &mut textgen)?;

    eprintln!("== starting mneme serve");
    let mut child = std::process::Command::new(exe)
        .args(["--data-dir"])
        .arg(dir.path())
        .args(["serve", "--grpc-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0", "--log-level", "warn"])
        .env_remove("MNEME_CONFIG")
        .stdin(Stdio::null())
        .spawn()
        .context("cannot start mneme serve")?;
    let pid = child.id();
    let started = Instant::now();
    let file = loop {
        if let Some(f) = mneme_server::DaemonFile::read(&dir.path().join("daemon.json")) {
            break f;
        }
        if started.elapsed() > Duration::from_secs(30) {
            let _ = child.kill();
            return Err(anyhow!("the daemon did not start"));
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    std::thread::sleep(Duration::from_millis(300));
    let rss_idle = rss_kib(pid, "VmRSS:");

    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    let result = rt.block_on(load(&file, pid, clients, seconds, query_texts, &mut textgen));
    let rss_after = rss_kib(pid, "VmRSS:");
    let rss_peak = rss_kib(pid, "VmHWM:");
    let _ = rustix::process::kill_process(
        rustix::process::Pid::from_raw(pid as i32).ok_or_else(|| anyhow!("pid"))?,
        rustix::process::Signal::TERM,
    );
    let status = child.wait()?;
    let load = result?;
    // The same queries, direct, on the store as the load left it (more records, unmerged
    // index segments): the fair baseline for the RPC figures.
    let (after_p50, after_p99, _) = baseline(dir.path(), &queries_after, 0.0, &mut textgen)?;
    let (conc_p50, conc_p99, conc_cpu) = concurrent_direct(dir.path(), &queries_after, clients)?;
    let (one_p50, one_p99, one_cpu) = concurrent_direct(dir.path(), &queries_after, 1)?;
    let report = json!({
        "records": records,
        "clients": clients,
        "ingest_rpc_per_s": load.ingest_per_s,
        "ingest_rpc_p50_ms": load.ingest_p50,
        "ingest_rpc_p99_ms": load.ingest_p99,
        "direct_ingest_per_s": direct_ingest,
        "ingest_daemon_cpu_us": load.ingest_cpu_us,
        "retrieve_daemon_cpu_us": load.retrieve_cpu_us,
        "retrieve_rpc_p50_ms": load.retrieve_p50,
        "retrieve_rpc_p99_ms": load.retrieve_p99,
        "retrieve_rpc_per_s": load.retrieve_per_s,
        "embedding_after_retrieve": load.embedding,
        "direct_retrieve_p50_ms": direct_p50,
        "direct_retrieve_p99_ms": direct_p99,
        "direct_retrieve_after_load_p50_ms": after_p50,
        "direct_retrieve_after_load_p99_ms": after_p99,
        "direct_concurrent_retrieve_p50_ms": conc_p50,
        "direct_concurrent_retrieve_p99_ms": conc_p99,
        "direct_concurrent_retrieve_cpu_us": conc_cpu,
        "direct_one_thread_retrieve_cpu_us": one_cpu,
        "direct_one_thread_retrieve_p50_ms": one_p50,
        "direct_one_thread_retrieve_p99_ms": one_p99,
        "session_start_http_p50_ms": load.ss_http.0,
        "session_start_http_p99_ms": load.ss_http.1,
        "session_start_grpc_p50_ms": load.ss_grpc.0,
        "session_start_grpc_p99_ms": load.ss_grpc.1,
        "message_received_http_p50_ms": load.msg_http.0,
        "message_received_http_p99_ms": load.msg_http.1,
        "rss_idle_mib": rss_idle as f64 / 1024.0,
        "rss_after_load_mib": rss_after as f64 / 1024.0,
        "rss_peak_mib": rss_peak as f64 / 1024.0,
        "daemon_exit": status.code(),
    });
    if json_out {
        outln!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        let f = |k: &str| report[k].as_f64().unwrap_or(0.0);
        outln!("records {records}, {clients} concurrent clients (client and daemon share the machine)");
        outln!(
            "ingest (gRPC IngestEvent): {:.0}/s, p50 {:.2} ms, p99 {:.2} ms; direct one-by-one: {:.0}/s",
            f("ingest_rpc_per_s"),
            f("ingest_rpc_p50_ms"),
            f("ingest_rpc_p99_ms"),
            f("direct_ingest_per_s")
        );
        match report["embedding_after_retrieve"].as_object() {
            Some(e) => outln!(
                "embedding model {} on: queries embedded; after the retrieve phase {} records had vectors, {} waited for the backfill",
                e.get("model").and_then(|v| v.as_str()).unwrap_or("?"),
                e.get("embedded").and_then(|v| v.as_u64()).unwrap_or(0),
                e.get("pending").and_then(|v| v.as_u64()).unwrap_or(0)
            ),
            None => outln!("no embedding model: retrieval is lexical"),
        }
        outln!("daemon CPU per request: ingest {:.0} µs, retrieve {:.0} µs", f("ingest_daemon_cpu_us"), f("retrieve_daemon_cpu_us"));
        outln!(
            "retrieve (gRPC): p50 {:.2} ms, p99 {:.2} ms, {:.0}/s; direct before load: p50 {:.2} ms, p99 {:.2} ms; after: p50 {:.2} ms, p99 {:.2} ms",
            f("retrieve_rpc_p50_ms"),
            f("retrieve_rpc_p99_ms"),
            f("retrieve_rpc_per_s"),
            f("direct_retrieve_p50_ms"),
            f("direct_retrieve_p99_ms"),
            f("direct_retrieve_after_load_p50_ms"),
            f("direct_retrieve_after_load_p99_ms")
        );
        outln!(
            "direct retrieve from {clients} threads (no RPC): p50 {:.2} ms, p99 {:.2} ms, {:.0} µs CPU per query; from 1 thread: p50 {:.2} ms, p99 {:.2} ms, {:.0} µs CPU",
            f("direct_concurrent_retrieve_p50_ms"),
            f("direct_concurrent_retrieve_p99_ms"),
            f("direct_concurrent_retrieve_cpu_us"),
            f("direct_one_thread_retrieve_p50_ms"),
            f("direct_one_thread_retrieve_p99_ms"),
            f("direct_one_thread_retrieve_cpu_us")
        );
        outln!(
            "session_start: HTTP p50 {:.2} ms p99 {:.2} ms; gRPC p50 {:.2} ms p99 {:.2} ms",
            f("session_start_http_p50_ms"),
            f("session_start_http_p99_ms"),
            f("session_start_grpc_p50_ms"),
            f("session_start_grpc_p99_ms")
        );
        outln!("message_received (HTTP): p50 {:.2} ms, p99 {:.2} ms", f("message_received_http_p50_ms"), f("message_received_http_p99_ms"));
        outln!(
            "daemon RSS: idle {:.1} MiB, after load {:.1} MiB, peak {:.1} MiB",
            f("rss_idle_mib"),
            f("rss_after_load_mib"),
            f("rss_peak_mib")
        );
    }
    Ok(())
}

struct Load {
    /// Daemon CPU (user + system) per request.
    ingest_cpu_us: f64,
    retrieve_cpu_us: f64,
    ingest_per_s: f64,
    ingest_p50: f64,
    ingest_p99: f64,
    retrieve_p50: f64,
    retrieve_p99: f64,
    retrieve_per_s: f64,
    /// The daemon's embedding status after the retrieve phase (null: lexical only).
    embedding: serde_json::Value,
    ss_http: (f64, f64),
    ss_grpc: (f64, f64),
    msg_http: (f64, f64),
}

/// Each channel's client ingests one message at a time (taking turns through `texts`)
/// until `deadline`; every call's latency in ms.
pub(crate) async fn ingest_until(channels: &[tonic::transport::Channel], deadline: Instant, texts: Arc<Vec<String>>) -> Result<Vec<f64>> {
    let clients = channels.len();
    let mut tasks = Vec::new();
    for (c, ch) in channels.iter().enumerate() {
        let mut client = pb::memory_client::MemoryClient::new(ch.clone());
        let texts = texts.clone();
        tasks.push(tokio::spawn(async move {
            let mut lat = Vec::new();
            let mut i = c;
            while Instant::now() < deadline {
                let t0 = Instant::now();
                let event = pb::EventPayload { event_kind: "message".into(), text: texts[i % texts.len()].clone(), ..Default::default() };
                client.ingest_event(pb::IngestEventRequest { options: None, event: Some(event) }).await?;
                lat.push(t0.elapsed().as_secs_f64() * 1000.0);
                i += clients;
            }
            Ok::<_, anyhow::Error>(lat)
        }));
    }
    let mut lat = Vec::new();
    for t in tasks {
        lat.extend(t.await??);
    }
    Ok(lat)
}

/// The queries spread over the channels' clients, each asked once (limit 10); every call's
/// latency in ms.
pub(crate) async fn retrieve_each(channels: &[tonic::transport::Channel], queries: Arc<Vec<String>>) -> Result<Vec<f64>> {
    let clients = channels.len();
    let mut tasks = Vec::new();
    for (c, ch) in channels.iter().enumerate() {
        let mut client = pb::memory_client::MemoryClient::new(ch.clone());
        let queries = queries.clone();
        tasks.push(tokio::spawn(async move {
            let mut lat = Vec::new();
            for q in queries.iter().skip(c).step_by(clients) {
                let t0 = Instant::now();
                client.retrieve(pb::RetrieveRequest { query: q.clone(), limit: 10, ..Default::default() }).await?;
                lat.push(t0.elapsed().as_secs_f64() * 1000.0);
            }
            Ok::<_, anyhow::Error>(lat)
        }));
    }
    let mut lat = Vec::new();
    for t in tasks {
        lat.extend(t.await??);
    }
    Ok(lat)
}

async fn load(
    file: &mneme_server::DaemonFile,
    pid: u32,
    clients: usize,
    seconds: f64,
    queries: Vec<String>,
    textgen: &mut TextGen,
) -> Result<Load> {
    // With a model, queries are embedded only once the index holds vectors: let the backfill
    // store its first 1,000 (at most 120 s) so recall is measured embedding queries while the
    // backfill goes on with the rest.
    let status_url = format!("http://{}/v1/status", file.http_addr);
    let waited = Instant::now();
    while waited.elapsed() < Duration::from_secs(120) {
        let status: serde_json::Value = reqwest::get(&status_url).await?.json().await?;
        let Some(embedded) = status["embedding"]["embedded"].as_u64() else { break };
        if embedded >= 1000 {
            eprintln!("== the backfill stored {embedded} vectors in {:.1} s", waited.elapsed().as_secs_f64());
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let grpc = format!("http://{}", file.grpc_addr);
    let mut channels = Vec::new();
    for _ in 0..clients {
        channels.push(tonic::transport::Channel::from_shared(grpc.clone())?.connect().await?);
    }
    // Ingest.
    eprintln!("== ingest: {clients} clients for {seconds} s");
    let texts: Arc<Vec<String>> = Arc::new((0..20_000).map(|_| textgen.sentence()).collect());
    let deadline = Instant::now() + Duration::from_secs_f64(seconds);
    let started = Instant::now();
    let cpu0 = cpu_seconds(pid);
    let lat = ingest_until(&channels, deadline, texts.clone()).await?;
    let ingest_per_s = lat.len() as f64 / started.elapsed().as_secs_f64();
    let ingest_cpu_us = (cpu_seconds(pid) - cpu0) * 1e6 / lat.len().max(1) as f64;
    let (ingest_p50, ingest_p99) = summarize(lat);

    // Retrieve.
    eprintln!("== retrieve: {} queries over {clients} clients", queries.len());
    let queries = Arc::new(queries);
    let started = Instant::now();
    let cpu0 = cpu_seconds(pid);
    let lat = retrieve_each(&channels, queries.clone()).await?;
    let retrieve_per_s = lat.len() as f64 / started.elapsed().as_secs_f64();
    let retrieve_cpu_us = (cpu_seconds(pid) - cpu0) * 1e6 / lat.len().max(1) as f64;
    let (retrieve_p50, retrieve_p99) = summarize(lat);
    let http = reqwest::Client::new();
    let base = format!("http://{}", file.http_addr);
    // Whether queries were embedded (a model attached) and how far its backfill got.
    let status: serde_json::Value = http.get(format!("{base}/v1/status")).send().await?.json().await?;
    let embedding = status.get("embedding").cloned().unwrap_or(serde_json::Value::Null);

    // Hook round trips, one client at a time (latency, not throughput).
    eprintln!("== hooks");
    let rounds = queries.len().clamp(50, 500);
    let mut ss_http = Vec::new();
    let mut msg_http = Vec::new();
    for i in 0..rounds {
        let t0 = Instant::now();
        let r = http.post(format!("{base}/v1/hooks/session_start")).json(&json!({ "sessionId": format!("bench-{i}") })).send().await?;
        r.bytes().await?;
        ss_http.push(t0.elapsed().as_secs_f64() * 1000.0);
        let t0 = Instant::now();
        let body = json!({ "content": format!("Bench{} uses the cache {}", i % 7, texts[i]), "sessionId": format!("bench-{i}") });
        let r = http.post(format!("{base}/v1/hooks/message_received")).json(&body).send().await?;
        r.bytes().await?;
        msg_http.push(t0.elapsed().as_secs_f64() * 1000.0);
    }
    let mut hooks = pb::hooks_client::HooksClient::new(channels[0].clone());
    let mut ss_grpc = Vec::new();
    for i in 0..rounds {
        let t0 = Instant::now();
        hooks
            .session_start(pb::SessionStartRequest {
                ctx: Some(pb::HookContext { session_id: format!("g-{i}"), ..Default::default() }),
                ..Default::default()
            })
            .await?;
        ss_grpc.push(t0.elapsed().as_secs_f64() * 1000.0);
    }
    Ok(Load {
        ingest_cpu_us,
        retrieve_cpu_us,
        ingest_per_s,
        ingest_p50,
        ingest_p99,
        retrieve_p50,
        retrieve_p99,
        retrieve_per_s,
        embedding,
        ss_http: summarize(ss_http),
        ss_grpc: summarize(ss_grpc),
        msg_http: summarize(msg_http),
    })
}
