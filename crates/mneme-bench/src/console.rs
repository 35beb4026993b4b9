//! `mneme-bench console`: what each view of the web console costs on a store of N records,
//! as the page loads it: the HTTP requests the view makes at load, timed end to end on an
//! in-process daemon over loopback (the page itself is one static file). Baseline: the
//! same views on an empty store, in the same process. Rendering in the browser is not in
//! these figures (the console's browser test shows it renders; its work is a few dozen DOM
//! nodes per view).

use std::time::Instant;

use anyhow::{Context as _, Result};
use mneme_core::{Payload, SemanticPayload};
use mneme_server::daemon::DaemonOptions;
use mneme_service::{IngestOptions, MemoryService, Revision, ServiceConfig};
use mneme_store::StoreOptions;
use serde_json::{Value, json};

use crate::synth::{TextGen, summarize};

struct Site {
    daemon: mneme_server::daemon::Daemon,
    base: String,
    record: String,
    _dir: tempfile::TempDir,
}

async fn site(records: usize) -> Result<Site> {
    let dir = tempfile::tempdir()?;
    let store = StoreOptions { path: dir.path().join("mneme.db"), key: None, create: true, decay: Default::default() };
    let record = {
        let service = MemoryService::open(store.clone(), ServiceConfig::default(), std::sync::Arc::new(mneme_core::SystemClock))?;
        let mut text = TextGen::new(3);
        for start in (0..records).step_by(1000) {
            let batch = (start..records.min(start + 1000))
                .map(|i| (crate::synth::message_event(text.sentence(), i), IngestOptions::default()))
                .collect();
            service.ingest_batch(batch)?;
        }
        let fact = |object: &str| {
            Payload::Semantic(SemanticPayload {
                subject: "Dana".into(),
                predicate: "lives in".into(),
                object: object.into(),
                valid_from: None,
                valid_to: None,
                evidence: Vec::new(),
            })
        };
        let first = service.ingest(fact("Berlin"), IngestOptions::default())?;
        let who = mneme_service::Actor { actor: "bench".into(), rationale: "moved".into() };
        let change = Revision { payload: Some(fact("Hamburg")), ..Revision::default() };
        service.supersede(&first.id, change, who, &mneme_service::Access::owner())?;
        first.id.to_string()
    };
    let mut config = mneme_server::MnemeConfig::default();
    config.server.grpc_addr = "127.0.0.1:0".parse()?;
    config.server.http_addr = "127.0.0.1:0".parse()?;
    config.workspace.scheduler = false;
    config.workspace.index = false;
    config.relay.interval = mneme_core::Span::secs(3600);
    let daemon = mneme_server::start(DaemonOptions::new(config, store)).await.map_err(anyhow::Error::msg)?;
    let base = format!("http://{}", daemon.app.http_addr);
    Ok(Site { daemon, base, record, _dir: dir })
}

/// One request: method, path, JSON body.
type Request = (&'static str, String, Option<Value>);

/// The requests a view makes at load, in order.
fn views(record: &str) -> Vec<(&'static str, Vec<Request>)> {
    vec![
        (
            "memories (page + browse)",
            vec![("GET", "/".into(), None), ("POST", "/v1/retrieve".into(), Some(json!({ "query": "", "limit": 25 })))],
        ),
        ("search", vec![("POST", "/v1/retrieve".into(), Some(json!({ "query": "deploy on friday", "limit": 25 })))]),
        (
            "record (history + salience)",
            vec![("GET", format!("/v1/records/{record}/history"), None), ("GET", format!("/v1/records/{record}/salience?days=90"), None)],
        ),
        ("status", vec![("GET", "/v1/status".into(), None)]),
        (
            "relay",
            vec![("GET", "/health".into(), None), ("GET", "/agent/history?limit=20".into(), None), ("GET", "/feed?after=0".into(), None)],
        ),
    ]
}

async fn time_views(http: &reqwest::Client, site: &Site, runs: usize) -> Result<Vec<(&'static str, f64, f64)>> {
    let mut out = Vec::new();
    for (name, requests) in views(&site.record) {
        let mut ms = Vec::with_capacity(runs);
        for _ in 0..runs {
            let started = Instant::now();
            for (method, path, body) in &requests {
                let url = format!("{}{path}", site.base);
                let request = match (*method, body) {
                    ("GET", _) => http.get(url),
                    (_, Some(b)) => http.post(url).json(b),
                    (_, None) => http.post(url),
                };
                let response = request.send().await.with_context(|| format!("{method} {path}"))?;
                anyhow::ensure!(response.status().is_success(), "{method} {path}: {}", response.status());
                response.bytes().await?;
            }
            ms.push(started.elapsed().as_secs_f64() * 1000.0);
        }
        let (p50, p99) = summarize(ms);
        out.push((name, p50, p99));
    }
    Ok(out)
}

pub fn console(records: usize, runs: usize, json_out: bool) -> Result<()> {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    rt.block_on(async {
        eprintln!("console: building a store of {records} records");
        let full = site(records).await?;
        let empty = site(0).await?;
        let http = reqwest::Client::new();
        // Warm both (first reads open the read connections).
        time_views(&http, &full, 3).await?;
        time_views(&http, &empty, 3).await?;
        let (f, e) = (time_views(&http, &full, runs).await?, time_views(&http, &empty, runs).await?);
        if json_out {
            let rows: Vec<Value> = f
                .iter()
                .zip(&e)
                .map(|((name, p50, p99), (_, e50, _))| json!({ "view": name, "p50_ms": p50, "p99_ms": p99, "empty_p50_ms": e50 }))
                .collect();
            outln!("{}", json!({ "records": records, "runs": runs, "views": rows }));
        } else {
            for ((name, p50, p99), (_, e50, _)) in f.iter().zip(&e) {
                outln!("{name:<30} p50 {p50:6.1} ms  p99 {p99:6.1} ms  ({records} records); empty store p50 {e50:5.1} ms");
            }
        }
        full.daemon.shutdown();
        empty.daemon.shutdown();
        Ok(())
    })
}
