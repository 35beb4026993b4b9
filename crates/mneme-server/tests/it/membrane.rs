//! The `membrane.v1` front end over a real gRPC connection, through the generated client of
//! membrane's own proto. Each of mneme's departures from membrane's semantics (README,
//! "Coming from membrane") has its test here: trust from the key's principal (a
//! TrustContext only narrows), retrieval by the task's text, decay from an anchor
//! (path-independent), tombstones that keep lineage, client audit and salience not trusted,
//! and what cannot be mapped refused with the reason.

use std::sync::Arc;

use jiff::{SignedDuration, Timestamp};
use mneme_core::FixedClock;
use mneme_server::membrane_pb::membrane_service_client::MembraneServiceClient;
use mneme_server::membrane_pb::{self as mb, TrustContext};
use mneme_store::StoreOptions;
use serde_json::{Value, json};
use tonic::Code;
use tonic::metadata::MetadataValue;
use tonic::transport::Channel;

use crate::auth::principal;
use crate::{TestDaemon, test_config};

const ADMIN: &str = "membrane-admin-0123456789abcdef";
const SHARED: &str = "membrane-shared-0123456789abcdef";

struct Membrane {
    d: TestDaemon,
    clock: Arc<FixedClock>,
}

/// A daemon with the protocol on, an owner key, and membraned's shared key mapped to the
/// principal `membrane` (reads low and `team-a` only).
async fn membrane_daemon() -> Membrane {
    let mut config = test_config();
    config.membrane.enabled = true;
    let mut narrow = principal("membrane", "membrane-own-key-0123456789abcdef");
    narrow.read_max_sensitivity = mneme_core::Sensitivity::Low;
    narrow.read_scopes = Some(vec!["team-a".into()]);
    config.principals = vec![principal("admin", ADMIN), narrow];
    let dir = tempfile::tempdir().expect("temp dir");
    let clock = Arc::new(FixedClock::new("2026-11-23T09:00:00Z".parse::<Timestamp>().expect("timestamp")));
    let store = StoreOptions { path: dir.path().join("mneme.db"), key: None, create: true, decay: config.decay };
    let env = [("MEMBRANE_API_KEY".to_string(), SHARED.to_string())].into_iter().collect();
    let options = mneme_server::DaemonOptions { config, store, postgres: None, daemon_file: None, clock: clock.clone(), env };
    let daemon = mneme_server::start(options).await.expect("daemon starts");
    Membrane { d: TestDaemon { daemon, dir, http: reqwest::Client::new() }, clock }
}

impl Membrane {
    async fn client(&self) -> MembraneServiceClient<Channel> {
        MembraneServiceClient::new(self.d.channel().await)
    }
}

/// A request with `authorization: VALUE` (a bare key or `Bearer KEY`).
fn req<T>(message: T, authorization: Option<&str>) -> tonic::Request<T> {
    let mut r = tonic::Request::new(message);
    if let Some(a) = authorization {
        r.metadata_mut().insert("authorization", MetadataValue::try_from(a).expect("header"));
    }
    r
}

fn bearer(key: &str) -> String {
    format!("Bearer {key}")
}

fn trust(max: &str, scopes: &[&str]) -> Option<TrustContext> {
    Some(TrustContext {
        max_sensitivity: max.into(),
        authenticated: true,
        actor_id: "test".into(),
        scopes: scopes.iter().map(|s| s.to_string()).collect(),
    })
}

fn record(bytes: &[u8]) -> Value {
    serde_json::from_slice(bytes).expect("record JSON")
}

async fn event(c: &mut MembraneServiceClient<Channel>, summary: &str, sensitivity: &str, scope: &str) -> String {
    let m = mb::IngestEventRequest {
        source: "test".into(),
        event_kind: "user_message".into(),
        r#ref: format!("ref-{summary}"),
        summary: summary.into(),
        sensitivity: sensitivity.into(),
        scope: scope.into(),
        ..Default::default()
    };
    let r = c.ingest_event(req(m, Some(&bearer(ADMIN)))).await.expect("ingest").into_inner();
    record(&r.record)["id"].as_str().expect("id").to_string()
}

async fn retrieve(c: &mut MembraneServiceClient<Channel>, auth: &str, query: &str, t: Option<TrustContext>) -> Vec<Value> {
    let m = mb::RetrieveRequest { task_descriptor: query.into(), trust: t, limit: 20, ..Default::default() };
    let r = c.retrieve(req(m, Some(auth))).await.expect("retrieve").into_inner();
    r.records.iter().map(|b| record(b)).collect()
}

fn summaries(records: &[Value]) -> Vec<String> {
    records.iter().map(|r| r["payload"]["timeline"][0]["summary"].as_str().unwrap_or_default().to_string()).collect()
}

#[tokio::test]
async fn the_protocol_is_off_by_default_and_on_reports_serving() {
    let off = TestDaemon::start().await;
    let mut c = MembraneServiceClient::new(off.channel().await);
    let e = c.get_metrics(req(mb::GetMetricsRequest {}, None)).await.expect_err("not served");
    assert_eq!(e.code(), Code::Unimplemented);
    off.stop().await;

    let m = membrane_daemon().await;
    let mut health = tonic_health::pb::health_client::HealthClient::new(m.d.channel().await);
    let status = health
        .check(tonic_health::pb::HealthCheckRequest { service: "membrane.v1.MembraneService".into() })
        .await
        .expect("health")
        .into_inner()
        .status;
    assert_eq!(status, tonic_health::pb::health_check_response::ServingStatus::Serving as i32);
    m.d.stop().await;
}

/// membraned's scenarios: a health watcher hears NOT_SERVING before the daemon goes (not a
/// stream cut); an outcome on a fact is refused (an outcome reports on an episode); a
/// message over `server.max_request_bytes` (1 MiB) but under membrane's 10 MiB is read,
/// and stored when the payload limit allows it.
#[tokio::test]
async fn membranes_scenarios_shutdown_outcomes_and_large_messages() {
    use tonic_health::pb::health_check_response::ServingStatus;
    let m = membrane_daemon().await;
    let mut c = m.client().await;
    // An outcome on a fact: INVALID_ARGUMENT, naming the target's type.
    let gateway = fact(&mut c, "kubernetes").await;
    let outcome = mb::IngestOutcomeRequest {
        source: "t".into(),
        target_record_id: gateway["id"].as_str().expect("id").into(),
        outcome_status: "success".into(),
        ..Default::default()
    };
    let e = code(c.ingest_outcome(req(outcome, Some(&bearer(ADMIN)))).await);
    assert!(e.code() == Code::InvalidArgument && e.message().contains("episodic"), "{e:?}");
    // A 2 MiB tool output is read (not OUT_OF_RANGE); over the payload limit it is refused
    // naming that limit.
    let big = mb::IngestToolOutputRequest {
        source: "t".into(),
        tool_name: "grep".into(),
        result: serde_json::to_vec(&json!("x".repeat(2 * 1024 * 1024))).expect("json"),
        ..Default::default()
    };
    let e = code(c.ingest_tool_output(req(big.clone(), Some(&bearer(ADMIN)))).await);
    assert_eq!(e.code(), Code::InvalidArgument, "{e:?}");
    assert!(e.message().contains("payload"), "{e:?}");

    // Shutdown: a watcher of membrane's service hears NOT_SERVING first.
    let mut health = tonic_health::pb::health_client::HealthClient::new(m.d.channel().await);
    let mut watch = health
        .watch(tonic_health::pb::HealthCheckRequest { service: "membrane.v1.MembraneService".into() })
        .await
        .expect("watch")
        .into_inner();
    let first = watch.message().await.expect("stream").expect("a status");
    assert_eq!(first.status, ServingStatus::Serving as i32);
    m.d.daemon.shutdown();
    let next = watch.message().await.expect("the stream is not cut first").expect("a status");
    assert_eq!(next.status, ServingStatus::NotServing as i32);
    // (An open watch is a request in flight: the daemon would give it the grace period.)
    drop(watch);
    m.d.daemon.wait().await;

    // With a payload limit that allows it, the 2 MiB output is stored.
    let mut config = test_config();
    config.membrane.enabled = true;
    config.limits.max_payload_bytes = 4 * 1024 * 1024;
    config.principals = vec![principal("admin", ADMIN)];
    let d = TestDaemon::with(config).await;
    let mut c = MembraneServiceClient::new(d.channel().await);
    let stored = c.ingest_tool_output(req(big, Some(&bearer(ADMIN)))).await.expect("a 2 MiB tool output").into_inner();
    assert!(record(&stored.record)["id"].is_string());
    d.stop().await;
}

/// membrane's client docs' example, as it runs against mneme: the event is found by its
/// words the moment its ingest is answered, and a task that shares nothing with it gets
/// nothing (membraned would list it by salience).
#[tokio::test]
async fn the_client_docs_example_finds_what_was_just_written_and_nothing_unrelated() {
    let m = membrane_daemon().await;
    let mut c = m.client().await;
    let ingest = mb::IngestEventRequest {
        source: "agent-1".into(),
        event_kind: "file_edit".into(),
        r#ref: "src/main.py".into(),
        summary: "Edited main entry point".into(),
        sensitivity: "low".into(),
        ..Default::default()
    };
    c.ingest_event(req(ingest, Some(&bearer(ADMIN)))).await.expect("ingest");
    let found = retrieve(&mut c, &bearer(ADMIN), "edit the main entry point", trust("medium", &[])).await;
    assert_eq!(summaries(&found).first().map(String::as_str), Some("Edited main entry point"), "{found:?}");
    let unrelated = retrieve(&mut c, &bearer(ADMIN), "fix the login bug", trust("medium", &[])).await;
    assert_eq!(unrelated, Vec::<Value>::new());
    m.d.stop().await;
}

/// Trust comes from the key: the shared key reads as its principal (low, team-a) whatever
/// the TrustContext claims, bare or with `Bearer`; a TrustContext narrows the owner.
#[tokio::test]
async fn a_trust_context_narrows_the_keys_principal_and_never_widens_it() {
    let m = membrane_daemon().await;
    let mut c = m.client().await;
    let secret = event(&mut c, "deploy credentials rotated", "hyper", "").await;
    event(&mut c, "deploy lunch order for team a", "low", "team-a").await;
    event(&mut c, "deploy plan of team b", "low", "team-b").await;

    for auth in [SHARED.to_string(), bearer(SHARED)] {
        let seen = summaries(&retrieve(&mut c, &auth, "deploy", trust("hyper", &[])).await);
        assert_eq!(seen, ["deploy lunch order for team a"], "{auth}: the claimed hyper ceiling and no scopes cannot widen the key");
    }
    let all = summaries(&retrieve(&mut c, &bearer(ADMIN), "deploy", trust("hyper", &[])).await);
    assert_eq!(all.len(), 3, "{all:?}");
    let low = summaries(&retrieve(&mut c, &bearer(ADMIN), "deploy", trust("low", &[])).await);
    assert!(!low.contains(&"deploy credentials rotated".to_string()) && low.len() == 2, "{low:?}");
    let team_b = summaries(&retrieve(&mut c, &bearer(ADMIN), "deploy", trust("hyper", &["team-b"])).await);
    assert!(
        team_b.contains(&"deploy plan of team b".to_string()) && !team_b.contains(&"deploy lunch order for team a".to_string()),
        "{team_b:?}"
    );

    let found =
        c.retrieve_by_id(req(mb::RetrieveByIdRequest { id: secret.clone(), trust: trust("hyper", &[]) }, Some(&bearer(ADMIN)))).await;
    assert_eq!(record(&found.expect("owner, hyper").into_inner().record)["sensitivity"], "hyper");
    let hidden =
        c.retrieve_by_id(req(mb::RetrieveByIdRequest { id: secret.clone(), trust: trust("low", &[]) }, Some(&bearer(ADMIN)))).await;
    assert_eq!(hidden.expect_err("narrowed").code(), Code::NotFound);
    let shared = c.retrieve_by_id(req(mb::RetrieveByIdRequest { id: secret.clone(), trust: trust("hyper", &[]) }, Some(SHARED))).await;
    assert_eq!(shared.expect_err("outside the key").code(), Code::NotFound);

    for auth in [None, Some("wrong-key-0123456789abcdef")] {
        let e = c.get_metrics(req(mb::GetMetricsRequest {}, auth)).await.expect_err("refused");
        assert_eq!(e.code(), Code::Unauthenticated);
    }
    let e = c.retrieve(req(mb::RetrieveRequest { task_descriptor: "x".into(), ..Default::default() }, Some(&bearer(ADMIN)))).await;
    assert_eq!(e.expect_err("no trust").message(), "trust context is required");
    m.d.stop().await;
}

/// membrane ranks by salience alone; mneme by what the task is about.
#[tokio::test]
async fn retrieval_ranks_by_the_task_descriptor() {
    let m = membrane_daemon().await;
    let mut c = m.client().await;
    event(&mut c, "the deploy failed on the quota limit", "low", "").await;
    m.clock.advance(SignedDuration::from_hours(1));
    event(&mut c, "ordered sushi for the team lunch", "low", "").await;
    let first = summaries(&retrieve(&mut c, &bearer(ADMIN), "why did the deploy fail", trust("low", &[])).await);
    assert_eq!(first[0], "the deploy failed on the quota limit", "{first:?}");
    let first = summaries(&retrieve(&mut c, &bearer(ADMIN), "lunch", trust("low", &[])).await);
    assert_eq!(first[0], "ordered sushi for the team lunch", "{first:?}");
    m.d.stop().await;
}

async fn fact(c: &mut MembraneServiceClient<Channel>, object: &str) -> Value {
    let m = mb::IngestObservationRequest {
        source: "test".into(),
        subject: "the gateway".into(),
        predicate: "runs on".into(),
        object: serde_json::to_vec(&json!(object)).expect("json"),
        ..Default::default()
    };
    record(&c.ingest_observation(req(m, Some(&bearer(ADMIN)))).await.expect("observation").into_inner().record)
}

/// membrane compounds decay at every sweep; mneme computes it from the anchor, so the value
/// after 30 days is the half-life formula however many sweeps ran.
#[tokio::test]
async fn salience_decays_from_its_anchor_however_many_sweeps_run() {
    let m = membrane_daemon().await;
    let mut c = m.client().await;
    let id = fact(&mut c, "port 8080").await["id"].as_str().expect("id").to_string();
    let app = &m.d.daemon.app;
    for _ in 0..30 {
        m.clock.advance(SignedDuration::from_hours(24));
        app.ops.prune(&app.internal, None, false).expect("sweep");
    }
    let got = record(
        &c.retrieve_by_id(req(mb::RetrieveByIdRequest { id, trust: trust("hyper", &[]) }, Some(&bearer(ADMIN))))
            .await
            .expect("get")
            .into_inner()
            .record,
    );
    let half_life_days = app.config.decay.half_life_seconds(mneme_core::MemoryType::Semantic) / 86_400.0;
    let expected = 0.5f64.powf(30.0 / half_life_days);
    let salience = got["salience"].as_f64().expect("salience");
    assert!((salience - expected).abs() < 1e-9, "{salience} vs {expected}");
    assert_eq!(got["lifecycle"]["decay"]["half_life_seconds"].as_i64(), Some((half_life_days * 86_400.0).round() as i64));
    m.d.stop().await;
}

/// Revisions keep the old record as a tombstone with its history (membrane prunes retracted
/// and superseded records an hour later, lineage included); a client's audit log, salience
/// and id in the new record are not taken.
#[tokio::test]
async fn revisions_keep_lineage_and_ignore_client_audit_and_salience() {
    let m = membrane_daemon().await;
    let mut c = m.client().await;
    let old = fact(&mut c, "port 8080").await["id"].as_str().expect("id").to_string();
    let forged = json!({
        "id": "mine", "type": "semantic", "salience": 0.01, "scope": "team-b",
        "audit_log": [{ "action": "create", "actor": "mallory", "timestamp": "2020-01-01T00:00:00Z", "rationale": "forged" }],
        "payload": { "kind": "semantic", "subject": "the gateway", "predicate": "runs on", "object": "port 9090",
                     "evidence": [{ "source_type": "observation", "source_id": "ops", "timestamp": "2026-11-23T09:00:00Z" }] }
    });
    let m1 = mb::SupersedeRequest {
        old_id: old.clone(),
        new_record: serde_json::to_vec(&forged).expect("json"),
        actor: "ops".into(),
        rationale: "moved".into(),
    };
    let new = record(&c.supersede(req(m1, Some(&bearer(ADMIN)))).await.expect("supersede").into_inner().record);
    assert_ne!(new["id"], "mine");
    assert!(new["salience"].as_f64().expect("salience") > 0.99, "{new}");
    assert!(new.get("scope").is_none(), "the source's scope (global) is kept: {new}");
    assert_eq!(new["payload"]["object"], "port 9090");
    assert_eq!(
        new["relations"][0],
        json!({ "predicate": "supersedes", "target_id": old, "weight": 1.0, "created_at": new["relations"][0]["created_at"] })
    );
    let actors: Vec<&str> = new["audit_log"].as_array().expect("audit").iter().filter_map(|a| a["actor"].as_str()).collect();
    // The audit says who really wrote it: the key's principal, then the actor it named.
    assert!(!actors.iter().any(|a| a.contains("mallory")) && actors == ["admin/ops"], "{actors:?}");

    // Retract the new one, run the sweeps: both records are still there with their history.
    let new_id = new["id"].as_str().expect("id").to_string();
    c.retract(req(mb::RetractRequest { id: new_id.clone(), actor: "ops".into(), rationale: "wrong".into() }, Some(&bearer(ADMIN))))
        .await
        .expect("retract");
    let app = &m.d.daemon.app;
    for _ in 0..3 {
        m.clock.advance(SignedDuration::from_hours(2));
        app.ops.prune(&app.internal, None, false).expect("sweep");
    }
    for (id, action) in [(&old, "revise"), (&new_id, "delete")] {
        let got = record(
            &c.retrieve_by_id(req(mb::RetrieveByIdRequest { id: id.clone(), trust: trust("hyper", &[]) }, Some(&bearer(ADMIN))))
                .await
                .expect("kept")
                .into_inner()
                .record,
        );
        let actions: Vec<&str> = got["audit_log"].as_array().expect("audit").iter().filter_map(|a| a["action"].as_str()).collect();
        assert!(actions.contains(&"create") && actions.contains(&action), "{id}: {actions:?}");
        assert_eq!(got["payload"]["revision"]["status"], "retracted");
    }
    let got = record(
        &c.retrieve_by_id(req(mb::RetrieveByIdRequest { id: new_id, trust: trust("hyper", &[]) }, Some(&bearer(ADMIN))))
            .await
            .expect("kept")
            .into_inner()
            .record,
    );
    assert_eq!(got["relations"][0]["target_id"], old.as_str(), "the lineage survives");
    m.d.stop().await;
}

fn code<T>(r: Result<tonic::Response<T>, tonic::Status>) -> tonic::Status {
    r.map(|_| ()).expect_err("refused")
}

/// What cannot be mapped is INVALID_ARGUMENT with the reason; membrane's own codes hold for
/// unknown ids and episodes.
#[tokio::test]
async fn what_cannot_be_mapped_is_refused_with_the_reason() {
    let m = membrane_daemon().await;
    let mut c = m.client().await;
    let auth = bearer(ADMIN);
    let episode = event(&mut c, "a tool ran", "low", "").await;
    let f = fact(&mut c, "port 8080").await["id"].as_str().expect("id").to_string();

    let e = code(
        c.ingest_outcome(req(
            mb::IngestOutcomeRequest {
                source: "t".into(),
                target_record_id: episode.clone(),
                outcome_status: "partial".into(),
                ..Default::default()
            },
            Some(&auth),
        ))
        .await,
    );
    assert_eq!((e.code(), e.message().contains("partial")), (Code::InvalidArgument, true), "{e:?}");
    let constraints = serde_json::to_vec(&json!([{ "type": "budget", "key": "usd", "value": 5 }])).expect("json");
    let e = code(
        c.ingest_working_state(req(
            mb::IngestWorkingStateRequest {
                source: "t".into(),
                thread_id: "th".into(),
                state: "executing".into(),
                active_constraints: constraints,
                ..Default::default()
            },
            Some(&auth),
        ))
        .await,
    );
    assert!(e.code() == Code::InvalidArgument && e.message().contains("active_constraints"), "{e:?}");
    let e = code(
        c.merge(req(mb::MergeRequest { ids: vec![f.clone()], merged_record: b"{}".to_vec(), ..Default::default() }, Some(&auth))).await,
    );
    assert!(e.code() == Code::InvalidArgument && e.message().contains("merge of one record"), "{e:?}");
    let episodic = serde_json::to_vec(&json!({ "payload": { "kind": "episodic", "timeline": [] } })).expect("json");
    let e =
        code(c.supersede(req(mb::SupersedeRequest { old_id: f.clone(), new_record: episodic, ..Default::default() }, Some(&auth))).await);
    assert!(e.code() == Code::InvalidArgument && e.message().contains("episodic"), "{e:?}");
    let e = code(
        c.ingest_event(req(
            mb::IngestEventRequest {
                source: "t".into(),
                event_kind: "k".into(),
                r#ref: "r".into(),
                sensitivity: "secret".into(),
                ..Default::default()
            },
            Some(&auth),
        ))
        .await,
    );
    assert!(e.code() == Code::InvalidArgument && e.message().contains("hyper"), "{e:?}");
    let e = code(
        c.ingest_event(req(mb::IngestEventRequest { source: "t".into(), event_kind: "k".into(), ..Default::default() }, Some(&auth))).await,
    );
    assert_eq!(e.message(), "ref is required");
    let e =
        code(c.retrieve_by_id(req(mb::RetrieveByIdRequest { id: "missing-record".into(), trust: trust("low", &[]) }, Some(&auth))).await);
    assert_eq!(e.code(), Code::NotFound);
    let e = code(c.retract(req(mb::RetractRequest { id: episode.clone(), ..Default::default() }, Some(&auth))).await);
    assert_eq!(e.code(), Code::FailedPrecondition, "episodes are immutable: {e:?}");
    // An outcome is recorded and answered with the target, its outcome set.
    let r = c
        .ingest_outcome(req(
            mb::IngestOutcomeRequest {
                source: "t".into(),
                target_record_id: episode,
                outcome_status: "success".into(),
                ..Default::default()
            },
            Some(&auth),
        ))
        .await
        .expect("outcome");
    assert_eq!(record(&r.into_inner().record)["payload"]["outcome"], "success");
    let metrics: Value =
        serde_json::from_slice(&c.get_metrics(req(mb::GetMetricsRequest {}, Some(&auth))).await.expect("metrics").into_inner().snapshot)
            .expect("json");
    assert!(metrics["total_records"].as_i64().is_some_and(|n| n >= 3), "{metrics}");
    m.d.stop().await;
}
