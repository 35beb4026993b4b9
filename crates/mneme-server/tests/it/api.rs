//! Every store operation over gRPC and over HTTP, and the error mapping of both.

use mneme_server::pb;
use serde_json::json;
use tonic::Code;

use crate::{TestDaemon, event_body};

fn opts(summary: &str) -> Option<pb::IngestOptions> {
    Some(pb::IngestOptions { summary: Some(summary.into()), tags: vec!["t:1".into()], ..Default::default() })
}

fn fact(s: &str, p: &str, o: &str) -> pb::SemanticPayload {
    pb::SemanticPayload { subject: s.into(), predicate: p.into(), object: o.into(), ..Default::default() }
}

#[tokio::test]
async fn grpc_round_trip_of_every_operation() {
    let d = TestDaemon::start().await;
    let mut c = d.memory().await;

    let ev = c
        .ingest_event(pb::IngestEventRequest {
            options: opts("deploy note"),
            event: Some(pb::EventPayload {
                event_kind: "message".into(),
                text: "deployed the gateway to staging".into(),
                ..Default::default()
            }),
        })
        .await
        .expect("IngestEvent")
        .into_inner()
        .record
        .expect("record");
    assert_eq!(ev.memory_type, pb::MemoryType::Episodic as i32);
    assert_eq!(ev.summary, "deploy note");

    let tool = c
        .ingest_tool_output(pb::IngestToolOutputRequest {
            options: None,
            output: Some(pb::ToolOutputPayload {
                tool: "exec".into(),
                args: Some(mneme_server::pb_from_json(&json!({ "cmd": "ls", "n": 2 }))),
                duration_ms: Some(12),
                ..Default::default()
            }),
        })
        .await
        .expect("IngestToolOutput")
        .into_inner()
        .record
        .expect("record");
    match tool.payload.and_then(|p| p.kind) {
        Some(pb::payload::Kind::ToolOutput(t)) => {
            assert_eq!(mneme_server::json_from_pb("args", t.args).expect("JSON"), json!({ "cmd": "ls", "n": 2 }));
            assert_eq!(t.duration_ms, Some(12));
        }
        other => panic!("unexpected payload {other:?}"),
    }

    let obs = |s: &str, p: &str, o: &str| pb::IngestObservationRequest { options: None, fact: Some(fact(s, p, o)) };
    let a =
        c.ingest_observation(obs("Gateway", "runs on", "port 8080")).await.expect("IngestObservation").into_inner().record.expect("record");
    let b = c.ingest_observation(obs("Gateway", "uses", "TLS 1.3")).await.expect("IngestObservation").into_inner().record.expect("record");
    let w = c
        .ingest_working_state(pb::IngestWorkingStateRequest {
            options: None,
            state: Some(pb::WorkingPayload { thread_id: "t1".into(), state: "half way".into(), ..Default::default() }),
        })
        .await
        .expect("IngestWorkingState")
        .into_inner()
        .record
        .expect("record");
    assert_eq!(w.memory_type, pb::MemoryType::Working as i32);

    let outcome = c
        .ingest_outcome(pb::IngestOutcomeRequest {
            target_id: a.id.clone(),
            outcome: pb::Outcome::Failure as i32,
            amount: Some(0.2),
            ..Default::default()
        })
        .await
        .expect("IngestOutcome")
        .into_inner();
    assert!(outcome.salience_after < outcome.salience_before);

    let hits = c
        .retrieve(pb::RetrieveRequest {
            query: "gateway port".into(),
            types: vec![pb::MemoryType::Semantic as i32],
            limit: 5,
            ..Default::default()
        })
        .await
        .expect("Retrieve")
        .into_inner()
        .hits;
    assert_eq!(hits.first().and_then(|h| h.record.as_ref()).map(|r| r.id.clone()), Some(a.id.clone()));

    let got =
        c.retrieve_by_id(pb::RetrieveByIdRequest { id: b.id.clone() }).await.expect("RetrieveById").into_inner().record.expect("record");
    assert_eq!(got.id, b.id);

    let change = |o: &str| {
        Some(pb::RevisionChange {
            payload: Some(pb::Payload { kind: Some(pb::payload::Kind::Semantic(fact("Gateway", "runs on", o))) }),
            ..Default::default()
        })
    };
    let sup = c
        .supersede(pb::SupersedeRequest { id: a.id.clone(), change: change("port 9443"), actor: "test".into(), rationale: "moved".into() })
        .await
        .expect("Supersede")
        .into_inner()
        .record
        .expect("record");
    assert_eq!(sup.lineage.as_ref().map(|l| l.parent_ids.clone()), Some(vec![a.id.clone()]));
    let fork = c
        .fork(pb::ForkRequest { id: sup.id.clone(), change: change("port 9444"), actor: "test".into(), rationale: "canary".into() })
        .await
        .expect("Fork")
        .into_inner()
        .record
        .expect("record");
    let merged = c
        .merge(pb::MergeRequest {
            ids: vec![sup.id.clone(), fork.id.clone()],
            change: None,
            actor: "test".into(),
            rationale: "same thing".into(),
        })
        .await
        .expect("Merge")
        .into_inner()
        .record
        .expect("record");
    assert_eq!(merged.lineage.as_ref().map(|l| l.operation.clone()), Some("merge".into()));
    let contested = c
        .contest(pb::ContestRequest {
            id: b.id.clone(),
            claim: "it uses TLS 1.2".into(),
            actor: "test".into(),
            rationale: "log says so".into(),
            ..Default::default()
        })
        .await
        .expect("Contest")
        .into_inner()
        .record
        .expect("record");
    assert_eq!(contested.status, pb::Status::Contested as i32);
    let up = c
        .reinforce(pb::AdjustRequest { id: merged.id.clone(), amount: None, actor: "test".into(), rationale: "used".into() })
        .await
        .expect("Reinforce")
        .into_inner();
    let down = c
        .penalize(pb::AdjustRequest { id: merged.id.clone(), amount: Some(0.3), actor: "test".into(), rationale: "wrong".into() })
        .await
        .expect("Penalize")
        .into_inner();
    assert!(down.after < up.after);
    let retracted = c
        .retract(pb::RetractRequest { id: w.id.clone(), actor: "test".into(), rationale: "stale".into() })
        .await
        .expect("Retract")
        .into_inner()
        .record
        .expect("record");
    assert_eq!(retracted.status, pb::Status::Retracted as i32);

    let history = c.history(pb::HistoryRequest { id: merged.id.clone() }).await.expect("History").into_inner();
    let ancestors: Vec<String> = history.ancestors.iter().map(|b| b.id.clone()).collect();
    assert!(ancestors.contains(&a.id) && ancestors.contains(&sup.id) && ancestors.contains(&fork.id), "{ancestors:?}");
    assert!(history.audit.iter().any(|e| e.action == "penalize"));

    let m = c.get_metrics(pb::GetMetricsRequest {}).await.expect("GetMetrics").into_inner();
    // event, tool, 2 facts, working, outcome, supersede, fork, merge
    assert_eq!(m.total_records, 9);
    assert_eq!(m.by_type.get("semantic"), Some(&5));
    assert_eq!(m.pid, std::process::id());
    d.stop().await;
}

#[tokio::test]
async fn http_round_trip_of_every_operation() {
    let d = TestDaemon::start().await;
    let (s, ev) = d.post("/v1/ingest/event", json!({ "options": { "tags": ["x"], "sensitivity": "medium" }, "event": { "event_kind": "message", "text": "the build is green" } })).await;
    assert_eq!(s, 200, "{ev}");
    assert_eq!(ev["record"]["sensitivity"], "medium");
    let (s, _) =
        d.post("/v1/ingest/tool_output", json!({ "output": { "tool": "exec", "args": { "cmd": "make" }, "error": "exit 2" } })).await;
    assert_eq!(s, 200);
    let (s, a) =
        d.post("/v1/ingest/observation", json!({ "fact": { "subject": "CI", "predicate": "uses", "object": "GitHub Actions" } })).await;
    assert_eq!(s, 200);
    let a_id = a["record"]["id"].as_str().expect("id").to_string();
    let (s, b) = d.post("/v1/ingest/observation", json!({ "fact": { "subject": "CI", "predicate": "runs", "object": "nightly" } })).await;
    assert_eq!(s, 200);
    let b_id = b["record"]["id"].as_str().expect("id").to_string();
    let (s, w) = d.post("/v1/ingest/working_state", json!({ "state": { "thread_id": "t", "state": "testing" } })).await;
    assert_eq!(s, 200);
    let w_id = w["record"]["id"].as_str().expect("id").to_string();
    let (s, o) = d.post("/v1/ingest/outcome", json!({ "target_id": a_id, "outcome": "success" })).await;
    assert_eq!(s, 200, "{o}");
    assert!(o["salience_after"].as_f64() >= o["salience_before"].as_f64());

    let (s, r) = d.post("/v1/retrieve", json!({ "query": "github actions", "types": ["semantic"] })).await;
    assert_eq!(s, 200);
    assert_eq!(r["hits"][0]["record"]["id"], a_id.as_str());
    assert_eq!(d.get(&format!("/v1/records/{b_id}")).await.1["record"]["id"], b_id.as_str());

    let change = json!({ "payload": { "kind": "semantic", "subject": "CI", "predicate": "uses", "object": "Forgejo" } });
    let (s, sup) =
        d.post(&format!("/v1/records/{a_id}/supersede"), json!({ "change": change, "actor": "t", "rationale": "migrated" })).await;
    assert_eq!(s, 200, "{sup}");
    let sup_id = sup["record"]["id"].as_str().expect("id").to_string();
    let (s, fork) = d.post(&format!("/v1/records/{sup_id}/fork"), json!({ "change": { "summary": "variant" }, "rationale": "try" })).await;
    assert_eq!(s, 200, "{fork}");
    let fork_id = fork["record"]["id"].as_str().expect("id").to_string();
    let (s, merged) = d.post("/v1/merge", json!({ "ids": [sup_id, fork_id], "rationale": "dup" })).await;
    assert_eq!(s, 200, "{merged}");
    let merged_id = merged["record"]["id"].as_str().expect("id").to_string();
    let (s, c) = d.post(&format!("/v1/records/{b_id}/contest"), json!({ "claim": "weekly", "rationale": "cron" })).await;
    assert_eq!((s, c["record"]["status"].as_str()), (200, Some("contested")));
    let (s, up) = d.post(&format!("/v1/records/{merged_id}/reinforce"), json!({ "rationale": "used" })).await;
    assert_eq!(s, 200, "{up}");
    let (s, down) = d.post(&format!("/v1/records/{merged_id}/penalize"), json!({ "amount": 0.5, "rationale": "bad" })).await;
    assert_eq!(s, 200);
    assert!(down["after"].as_f64() < up["after"].as_f64());
    let (s, r) = d.post(&format!("/v1/records/{w_id}/retract"), json!({ "rationale": "done" })).await;
    assert_eq!((s, r["record"]["status"].as_str()), (200, Some("retracted")));
    let (s, h) = d.get(&format!("/v1/records/{merged_id}/history")).await;
    assert_eq!(s, 200);
    assert_eq!(h["ancestors"].as_array().map(Vec::len), Some(3));
    assert_eq!(d.total_records().await, 9);
    d.stop().await;
}

#[tokio::test]
async fn errors_have_precise_codes_and_change_nothing() {
    let d = TestDaemon::start().await;
    let (_, a) = d.post("/v1/ingest/event", event_body("one")).await;
    let id = a["record"]["id"].as_str().expect("id").to_string();
    let before = d.total_records().await;
    let missing = "01a2009c-559e-7600-bb3e-f0c660222db4";

    // HTTP
    let cases = [
        (d.post("/v1/ingest/event", json!({ "event": { "text": "x" } })).await, 400, "invalid_argument", "event_kind"),
        (
            d.post("/v1/ingest/event", json!({ "event": { "event_kind": "m", "text": "x" }, "bogus": 1 })).await,
            400,
            "invalid_argument",
            "bogus",
        ),
        (
            d.post("/v1/ingest/event", json!({ "options": { "sensitivity": "secret" }, "event": { "event_kind": "m", "text": "x" } }))
                .await,
            400,
            "invalid_argument",
            "options.sensitivity",
        ),
        (
            d.post("/v1/ingest/event", json!({ "options": { "confidence": 7 }, "event": { "event_kind": "m", "text": "x" } })).await,
            400,
            "invalid_argument",
            "confidence",
        ),
        (d.post(&format!("/v1/records/{missing}/retract"), json!({ "rationale": "r" })).await, 404, "not_found", missing),
        (d.post("/v1/records/not-an-id/retract", json!({ "rationale": "r" })).await, 400, "invalid_argument", "id"),
        (d.post(&format!("/v1/records/{id}/supersede"), json!({ "rationale": "r" })).await, 409, "failed_precondition", "episodic"),
        (d.post(&format!("/v1/records/{id}/retract"), json!({ "rationale": "" })).await, 400, "invalid_argument", "rationale"),
        (d.post("/v1/retrieve", json!({ "limit": 100000 })).await, 400, "invalid_argument", "limit"),
        (d.post("/v1/hooks/nope", json!({})).await, 400, "invalid_argument", "unknown hook"),
        (d.get("/v1/nowhere").await, 404, "not_found", "no such endpoint"),
    ];
    for ((status, body), want_status, want_code, mention) in cases {
        assert_eq!(status, want_status, "{body}");
        assert_eq!(body["error"]["code"], want_code, "{body}");
        assert!(body["error"]["message"].as_str().unwrap_or("").contains(mention), "{body} should mention {mention}");
    }
    // Not JSON at all, though labelled so: 400; not labelled JSON: 415.
    let response =
        d.http.post(d.url("/v1/retrieve")).header("content-type", "application/json").body("{not json").send().await.expect("request");
    assert_eq!(response.status().as_u16(), 400);
    let response = d.http.post(d.url("/v1/retrieve")).body("{}").send().await.expect("request");
    assert_eq!(response.status().as_u16(), 415);

    // gRPC
    let mut c = d.memory().await;
    let e = c.retrieve_by_id(pb::RetrieveByIdRequest { id: missing.into() }).await.expect_err("not found");
    assert_eq!(e.code(), Code::NotFound);
    let e = c.retrieve_by_id(pb::RetrieveByIdRequest { id: "nope".into() }).await.expect_err("bad id");
    assert_eq!(e.code(), Code::InvalidArgument);
    let e = c.ingest_event(pb::IngestEventRequest { options: None, event: None }).await.expect_err("missing event");
    assert_eq!((e.code(), e.message().contains("event")), (Code::InvalidArgument, true));
    let e = c
        .ingest_event(pb::IngestEventRequest {
            options: Some(pb::IngestOptions { sensitivity: 42, ..Default::default() }),
            event: Some(pb::EventPayload { event_kind: "m".into(), text: "x".into(), ..Default::default() }),
        })
        .await
        .expect_err("bad enum");
    assert_eq!(e.code(), Code::InvalidArgument);
    let e = c.supersede(pb::SupersedeRequest { id: id.clone(), rationale: "r".into(), ..Default::default() }).await.expect_err("episodic");
    assert_eq!(e.code(), Code::FailedPrecondition);
    let e = c.retrieve(pb::RetrieveRequest { types: vec![99], ..Default::default() }).await.expect_err("bad type");
    assert_eq!(e.code(), Code::InvalidArgument);
    let e = c
        .ingest_outcome(pb::IngestOutcomeRequest { target_id: id.clone(), outcome: 0, ..Default::default() })
        .await
        .expect_err("outcome required");
    assert_eq!(e.code(), Code::InvalidArgument);
    assert_eq!(d.total_records().await, before, "refused requests wrote nothing");
    d.stop().await;
}

#[tokio::test]
async fn oversized_requests_are_refused_with_413() {
    let mut config = crate::test_config();
    config.server.max_request_bytes = 4096;
    let d = TestDaemon::with(config).await;
    let (s, body) = d.post("/v1/ingest/event", event_body(&"x".repeat(10_000))).await;
    assert_eq!((s, body["error"]["code"].as_str()), (413, Some("too_large")), "{body}");
    let mut c = d.memory().await;
    let e = c
        .ingest_event(pb::IngestEventRequest {
            options: None,
            event: Some(pb::EventPayload { event_kind: "m".into(), text: "x".repeat(10_000), ..Default::default() }),
        })
        .await
        .expect_err("too large");
    // tonic refuses a message over the decoding limit itself, before any handler runs.
    assert_eq!(e.code(), Code::OutOfRange, "{e:?}");
    assert_eq!(d.total_records().await, 0);
    d.stop().await;
}

#[tokio::test]
async fn prometheus_metrics_count_requests_records_and_errors() {
    let d = TestDaemon::start().await;
    d.post("/v1/ingest/event", event_body("counted")).await;
    d.post("/v1/retrieve", json!({ "query": "counted" })).await;
    d.post("/v1/records/nope/retract", json!({ "rationale": "r" })).await;
    let text = d.http.get(d.url("/metrics")).send().await.expect("metrics").text().await.expect("text");
    for want in [
        "mneme_requests_total{transport=\"http\",method=\"IngestEvent\",code=\"ok\"} 1",
        "mneme_requests_total{transport=\"http\",method=\"Retract\",code=\"invalid_argument\"} 1",
        "mneme_errors_total{transport=\"http\",method=\"Retract\",code=\"invalid_argument\"} 1",
        "mneme_request_duration_seconds_count{transport=\"http\",method=\"Retrieve\"} 1",
        "mneme_records{type=\"episodic\"} 1",
        "mneme_uptime_seconds",
    ] {
        assert!(text.contains(want), "missing {want} in\n{text}");
    }
    let (s, status) = d.get("/v1/status").await;
    assert_eq!(s, 200);
    assert_eq!(status["records_by_type"]["episodic"], 1);
    assert_eq!(status["pid"], std::process::id());
    d.stop().await;
}

#[tokio::test]
async fn shutdown_lets_in_flight_requests_finish() {
    let d = TestDaemon::start().await;
    let url = d.url("/v1/ingest/event");
    // Three acknowledged before the stop (so the check below is never vacuous), then 40
    // racing it.
    let mut acked = Vec::new();
    for i in 0..3 {
        let (s, v) = d.post("/v1/ingest/event", event_body(&format!("before {i}"))).await;
        assert_eq!(s, 200, "{v}");
        acked.push(v["record"]["id"].as_str().expect("id").to_string());
    }
    let mut tasks = Vec::new();
    for i in 0..40 {
        let (client, url) = (d.http.clone(), url.clone());
        tasks.push(tokio::spawn(async move {
            let r = client.post(url).json(&event_body(&format!("in flight {i}"))).send().await.ok()?;
            if r.status().is_success() { r.json::<serde_json::Value>().await.ok() } else { None }
        }));
    }
    tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    let path = d.dir.path().join("mneme.db");
    let TestDaemon { daemon, dir, .. } = d;
    daemon.stop().await;
    for t in tasks {
        if let Some(v) = t.await.expect("task") {
            acked.push(v["record"]["id"].as_str().expect("id").to_string());
        }
    }
    // Every acknowledged write is in the store after shutdown.
    assert!(acked.len() >= 3);
    let conn = rusqlite::Connection::open(&path).expect("open");
    for id in &acked {
        let n: i64 = conn.query_row("SELECT count(*) FROM records WHERE id = ?1", [id], |r| r.get(0)).expect("query");
        assert_eq!(n, 1, "acknowledged {id} missing");
    }
    drop(dir);
}

/// A daemon on a store in a temporary directory whose clock moves only when told (the
/// timer tests advance it past a sweep's horizon).
async fn daemon_on_a_fixed_clock(
    config: mneme_server::MnemeConfig,
) -> (mneme_server::Daemon, std::sync::Arc<mneme_core::FixedClock>, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("dir");
    let clock = std::sync::Arc::new(mneme_core::FixedClock::new(jiff::Timestamp::now()));
    let store = mneme_store::StoreOptions { path: dir.path().join("mneme.db"), key: None, create: true, decay: config.decay };
    let options =
        mneme_server::DaemonOptions { config, store, postgres: None, daemon_file: None, clock: clock.clone(), env: Default::default() };
    (mneme_server::start(options).await.expect("start"), clock, dir)
}

#[tokio::test]
async fn the_decay_sweep_prunes_faded_payloads_on_its_timer() {
    let mut config = crate::test_config();
    config.maintenance.decay_interval = mneme_core::Span::millis(100);
    let (daemon, clock, _dir) = daemon_on_a_fixed_clock(config).await;
    let url = format!("http://{}", daemon.http_addr());
    let http = reqwest::Client::new();
    let ingested: serde_json::Value = http
        .post(format!("{url}/v1/ingest/event"))
        .json(&event_body("fades away"))
        .send()
        .await
        .expect("ingest")
        .json()
        .await
        .expect("json");
    let id = ingested["record"]["id"].as_str().expect("id").to_string();
    // Thirty days on, an episode (half-life 3 days) is far below the prune threshold.
    clock.advance(jiff::SignedDuration::from_hours(24 * 30));
    let record =
        async || -> serde_json::Value { http.get(format!("{url}/v1/records/{id}")).send().await.expect("get").json().await.expect("json") };
    crate::after_passes(&daemon.app, "decay", "the sweep", async || !record().await["record"]["pruned_at"].is_null()).await;
    let r = record().await;
    assert!(r["record"]["payload"].is_null(), "{r}");
    // The summary of a short message is the whole message: pruning does not keep it.
    assert_eq!(r["record"]["summary"], "pruned episodic record", "{r}");
    let text = http.get(format!("{url}/metrics")).send().await.expect("metrics").text().await.expect("text");
    assert!(text.contains("mneme_job_runs_total{job=\"decay\",result=\"ok\"}"), "{text}");
    daemon.stop().await;
}

/// A field number the request type reads as a message, sent as a number: undecodable.
#[derive(Clone, PartialEq, prost::Message)]
struct NotAnIngestRequest {
    #[prost(uint64, tag = "1")]
    n: u64,
}

#[tokio::test]
async fn undecodable_grpc_messages_and_non_finite_numbers_are_invalid_arguments() {
    let d = TestDaemon::start().await;
    // A message that fails to decode is the client's fault (tonic-prost says INTERNAL).
    let mut raw = tonic::client::Grpc::new(d.channel().await);
    raw.ready().await.expect("ready");
    let path = tonic::codegen::http::uri::PathAndQuery::from_static("/mneme.v1.Memory/IngestEvent");
    let codec = tonic_prost::ProstCodec::<NotAnIngestRequest, pb::RecordResponse>::default();
    let err = raw.unary(tonic::Request::new(NotAnIngestRequest { n: 7 }), path, codec).await.expect_err("undecodable");
    assert_eq!(err.code(), Code::InvalidArgument, "{err:?}");
    assert!(err.message().contains("could not be decoded"), "{}", err.message());

    // NaN and infinities have no JSON form: refused, naming the field, never stored as null.
    let mut c = d.memory().await;
    for bad in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
        let args = json!({ "cmd": "ls" });
        let mut args = mneme_server::pb_from_json(&args);
        if let Some(prost_types::value::Kind::StructValue(s)) = args.kind.as_mut() {
            s.fields.insert("n".into(), prost_types::Value { kind: Some(prost_types::value::Kind::NumberValue(bad)) });
        }
        let err = c
            .ingest_tool_output(pb::IngestToolOutputRequest {
                options: None,
                output: Some(pb::ToolOutputPayload { tool: "exec".into(), args: Some(args), ..Default::default() }),
            })
            .await
            .expect_err("non-finite number refused");
        assert_eq!(err.code(), Code::InvalidArgument, "{err:?}");
        assert!(err.message().contains("output.args.n"), "{}", err.message());
    }
    let (status, metrics) = d.get("/v1/metrics").await;
    assert_eq!(status, 200);
    assert_eq!(metrics["total_records"], 0, "nothing was stored: {metrics}");
    d.stop().await;
}

/// A typo inside a payload (`sendr`) used to be dropped silently, losing the sender.
#[tokio::test]
async fn unknown_fields_inside_a_payload_are_refused_naming_the_field() {
    let d = TestDaemon::start().await;
    let (status, body) = d.post("/v1/ingest/event", json!({ "event": { "event_kind": "message", "text": "hi", "sendr": "dana" } })).await;
    assert_eq!(status, 400, "{body}");
    let message = body["error"]["message"].as_str().expect("message");
    assert!(message.contains("sendr") && message.contains("event"), "{message}");
    let (status, body) =
        d.post("/v1/ingest/observation", json!({ "fact": { "subject": "a", "predicate": "b", "object": "c", "valid_form": "x" } })).await;
    assert_eq!(status, 400, "{body}");
    assert!(body["error"]["message"].as_str().expect("message").contains("valid_form"), "{body}");
    let (_, metrics) = d.get("/v1/metrics").await;
    assert_eq!(metrics["total_records"], 0, "nothing was stored: {metrics}");
    d.stop().await;
}

/// A client that sends headers and then trickles (or stops sending) its body used to hold
/// the connection for as long as it liked, before authentication was even checked.
#[tokio::test]
async fn a_body_that_does_not_arrive_in_time_is_answered_408() {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let mut config = crate::test_config();
    config.server.body_read_timeout = mneme_core::Span::millis(300);
    let d = TestDaemon::with(config).await;
    let mut stream = tokio::net::TcpStream::connect(d.daemon.http_addr()).await.expect("connect");
    let head =
        "POST /v1/ingest/event HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{\"event\":";
    stream.write_all(head.as_bytes()).await.expect("write");
    let started = std::time::Instant::now();
    let mut answer = String::new();
    let read = tokio::time::timeout(std::time::Duration::from_secs(20), stream.read_to_string(&mut answer)).await;
    assert!(read.is_ok(), "no answer within 20 s");
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(answer.contains("body_read_timeout"), "{answer}");
    assert!(started.elapsed() >= std::time::Duration::from_millis(250), "answered before the timeout: {answer}");
    d.stop().await;
}

/// With a retention policy the sweep also erases old records of the type (prune off here,
/// so only the policy acts): the record becomes a forgotten tombstone.
#[tokio::test]
async fn the_decay_sweep_applies_the_retention_policy() {
    let mut config = crate::test_config();
    config.maintenance.decay_interval = mneme_core::Span::millis(100);
    config.maintenance.prune = false;
    config.maintenance.retention.episodic = Some(mneme_core::Span::secs(7 * 86_400));
    let (daemon, clock, _dir) = daemon_on_a_fixed_clock(config).await;
    let url = format!("http://{}", daemon.http_addr());
    let http = reqwest::Client::new();
    let ingested: serde_json::Value = http
        .post(format!("{url}/v1/ingest/event"))
        .json(&event_body("a week-old secret"))
        .send()
        .await
        .expect("ingest")
        .json()
        .await
        .expect("json");
    let id = ingested["record"]["id"].as_str().expect("id").to_string();
    clock.advance(jiff::SignedDuration::from_hours(24 * 8));
    let record =
        async || -> serde_json::Value { http.get(format!("{url}/v1/records/{id}")).send().await.expect("get").json().await.expect("json") };
    crate::after_passes(&daemon.app, "decay", "the sweep", async || !record().await["record"]["forgotten_at"].is_null()).await;
    let r = record().await;
    assert!(r["record"]["payload"].is_null() && !r.to_string().contains("week-old secret"), "{r}");
    daemon.stop().await;
}

/// The browser guard, as curl reproduces a hostile page: a body not labelled JSON, a
/// foreign `Origin`, a rebinding `Host` are refused (415, 403 naming the header) on every
/// kind of route, and nothing is stored or erased; the daemon's own origin, a configured
/// host and a configured CORS origin pass.
#[tokio::test]
async fn cross_site_and_rebinding_requests_are_refused_and_change_nothing() {
    let ws = tempfile::tempdir().expect("workspace");
    let mut config = crate::test_config();
    config.workspace.dir = Some(ws.path().to_path_buf());
    config.server.allowed_hosts = vec!["mneme.internal".into()];
    config.server.cors_origins = vec!["https://app.example".into()];
    let d = TestDaemon::with(config).await;
    let (status, _) = d.post("/v1/ingest/event", crate::event_body("the kettle needs descaling")).await;
    assert_eq!(status, 200);
    let before = d.total_records().await;
    let planted = serde_json::json!({ "event": { "event_kind": "message", "text": "planted by a page" } }).to_string();
    let forget = serde_json::json!({ "query": "kettle", "reason": "r" }).to_string();
    let send = |path: &str, body: &str, headers: &[(&str, &str)]| {
        let mut r = d.http.post(d.url(path)).body(body.to_string());
        for (k, v) in headers {
            r = r.header(*k, *v);
        }
        async move {
            let response = r.send().await.expect("request");
            let status = response.status().as_u16();
            (status, response.json::<serde_json::Value>().await.unwrap_or_default())
        }
    };
    // Not labelled JSON: 415 everywhere, hooks and relay included.
    for path in ["/v1/ingest/event", "/v1/hooks/message_received", "/feed", "/v1/forget"] {
        let (status, body) = send(path, &planted, &[("content-type", "text/plain")]).await;
        assert_eq!(status, 415, "{path}: {body}");
        assert!(body["error"]["message"].as_str().unwrap_or_default().contains("Content-Type"), "{body}");
    }
    // A foreign origin: 403 naming the header, on the API, the hooks, MCP and the console.
    let json = ("content-type", "application/json");
    for path in ["/v1/ingest/event", "/v1/hooks/message_received", "/v1/forget", "/mcp"] {
        let (status, body) = send(path, &planted, &[json, ("origin", "http://evil.example")]).await;
        assert_eq!(status, 403, "{path}: {body}");
        assert!(body["error"]["message"].as_str().unwrap_or_default().contains("Origin"), "{body}");
    }
    let page = d.http.get(d.url("/v1/status")).header("origin", "http://127.0.0.1:1").send().await.expect("request");
    assert_eq!(page.status().as_u16(), 403, "another port is another origin");
    // A rebinding Host: 403 naming the header.
    let (status, body) = send("/v1/forget", &forget, &[json, ("host", "evil.example")]).await;
    assert_eq!(status, 403, "{body}");
    assert!(body["error"]["message"].as_str().unwrap_or_default().contains("Host"), "{body}");
    let console = d.http.get(d.url("/")).header("host", "evil.example:80").send().await.expect("request");
    assert_eq!(console.status().as_u16(), 403);
    // Nothing was stored or erased.
    assert_eq!(d.total_records().await, before);
    let (_, hits) = d.post("/v1/retrieve", serde_json::json!({ "query": "kettle" })).await;
    assert_eq!(hits["hits"].as_array().map(Vec::len), Some(1), "{hits}");

    // What passes: the daemon's own origin, a configured name, a configured CORS origin
    // (with its headers, and a preflight answered).
    let own = format!("http://{}", d.daemon.http_addr());
    let (status, _) = send("/v1/ingest/event", &planted.replace("planted by a page", "from the console"), &[json, ("origin", &own)]).await;
    assert_eq!(status, 200);
    let (status, _) = send("/v1/retrieve", "{}", &[json, ("host", "mneme.internal:18791")]).await;
    assert_eq!(status, 200);
    let preflight = d
        .http
        .request(reqwest::Method::OPTIONS, d.url("/v1/retrieve"))
        .header("origin", "https://app.example")
        .header("access-control-request-method", "POST")
        .header("access-control-request-headers", "content-type")
        .send()
        .await
        .expect("preflight");
    assert_eq!(preflight.status().as_u16(), 204);
    assert_eq!(preflight.headers()["access-control-allow-origin"], "https://app.example");
    let cors =
        d.http.post(d.url("/v1/retrieve")).header("origin", "https://app.example").json(&serde_json::json!({})).send().await.expect("cors");
    assert_eq!(cors.status().as_u16(), 200);
    assert_eq!(cors.headers()["access-control-allow-origin"], "https://app.example");
    d.stop().await;
}

/// The small refusals: JSON followed by garbage, an array for an object, a control
/// character in a label, an unknown sense type are the caller's errors (400, naming what
/// is wrong) and store nothing; the relay's feed holds a bounded number of bytes.
#[tokio::test]
async fn malformed_bodies_and_labels_are_refused_and_the_feed_is_bounded_in_bytes() {
    let d = TestDaemon::start().await;
    let before = d.total_records().await;
    let raw = |path: &'static str, body: &'static str| {
        let r = d.http.post(d.url(path)).header("content-type", "application/json").body(body);
        async move {
            let response = r.send().await.expect("request");
            (response.status().as_u16(), response.json::<serde_json::Value>().await.unwrap_or_default())
        }
    };
    let cases = [
        ("/v1/ingest/event", r#"{"event":{"event_kind":"message","text":"one"}} garbage"#, "after the JSON object"),
        ("/v1/ingest/event", r#"[{"event_kind":"message","text":"one"}]"#, "expected a JSON object"),
        ("/v1/ingest/event", r#"{"event":{"event_kind":"mess\u0000age","text":"one"}}"#, "control character"),
        ("/sense", r#"{"type":"smell","ts":1}"#, "not a sense event type"),
    ];
    for (path, body, mention) in cases {
        let (status, answer) = raw(path, body).await;
        assert_eq!(status, 400, "{path} {body}: {answer}");
        assert!(answer["error"]["message"].as_str().unwrap_or_default().contains(mention), "{answer} should mention {mention}");
    }
    assert_eq!(d.total_records().await, before);
    // A hundred items of 100 KB: the feed keeps what fits in its byte bound.
    let big = "x".repeat(100 * 1024);
    for _ in 0..100 {
        let (status, _) = d.post("/feed", json!({ "text": big })).await;
        assert_eq!(status, 200);
    }
    let response = d.http.get(d.url("/feed?after=0")).send().await.expect("feed");
    let bytes = response.bytes().await.expect("body").len();
    assert!(bytes <= mneme_relay::RING_BYTES + 64 * 1024, "the feed answer is bounded: {bytes} bytes");
    d.stop().await;
}
