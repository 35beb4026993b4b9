//! Principals: keys, read ceilings and scopes, write policy, rate limits, and the rule
//! that a non-loopback listener needs keys.

use mneme_core::Sensitivity;
use mneme_server::config::PrincipalConfig;
use mneme_server::pb;
use serde_json::json;
use tonic::Code;
use tonic::metadata::MetadataValue;

use crate::{TestDaemon, test_config};

const ADMIN: &str = "admin-key-0123456789abcdef";
const READER: &str = "reader-key-0123456789abcdef";
const TEAM: &str = "team-a-key-0123456789abcdef";

pub fn principal(name: &str, key: &str) -> PrincipalConfig {
    PrincipalConfig {
        name: name.into(),
        key_sha256: Some(mneme_server::config::hash_key(key)),
        key_env: None,
        key_file: None,
        read_max_sensitivity: Sensitivity::Critical,
        read_scopes: None,
        write_max_sensitivity: Sensitivity::Critical,
        write_scopes: None,
        rate_limit_per_second: None,
        tls_client_subject: None,
    }
}

async fn keyed() -> TestDaemon {
    let mut config = test_config();
    let mut reader = principal("reader", READER);
    reader.read_max_sensitivity = Sensitivity::Low;
    reader.write_max_sensitivity = Sensitivity::Public;
    let mut team = principal("team-a", TEAM);
    team.read_scopes = Some(vec!["project:a".into()]);
    team.write_scopes = Some(vec!["project:a".into()]);
    config.principals = vec![principal("admin", ADMIN), reader, team];
    TestDaemon::with(config).await
}

fn ingest(text: &str, sensitivity: &str, scope: &str) -> serde_json::Value {
    json!({ "options": { "sensitivity": sensitivity, "scope": scope }, "event": { "event_kind": "message", "text": text } })
}

#[tokio::test]
async fn keys_are_required_and_checked_on_both_transports() {
    let d = keyed().await;
    let (s, body) = d.post("/v1/retrieve", json!({})).await;
    assert_eq!((s, body["error"]["code"].as_str()), (401, Some("unauthenticated")));
    let (s, _) = d.post_auth("/v1/retrieve", json!({}), Some("wrong-key-0123456789abcdef")).await;
    assert_eq!(s, 401);
    let response =
        d.http.post(d.url("/v1/retrieve")).header("authorization", format!("Basic {ADMIN}")).json(&json!({})).send().await.expect("req");
    assert_eq!(response.status().as_u16(), 401);
    assert_eq!(response.headers().get("www-authenticate").and_then(|v| v.to_str().ok()), Some("Bearer"));
    // An unauthenticated request is refused before its body is even read.
    let (s, _) = d.post("/v1/ingest/event", json!({ "garbage": true })).await;
    assert_eq!(s, 401);
    let (s, _) = d.post_auth("/v1/retrieve", json!({}), Some(ADMIN)).await;
    assert_eq!(s, 200);
    // Health stays open for probes.
    assert_eq!(d.get("/healthz").await.0, 200);
    // Store-wide counts are for principals whose reads are not narrowed: Prometheus
    // metrics, status and GetMetrics; consolidation (it writes into any scope) is for
    // unrestricted principals.
    let scrape = |key: Option<&'static str>| {
        let mut r = d.http.get(d.url("/metrics"));
        if let Some(k) = key {
            r = r.bearer_auth(k);
        }
        async move { r.send().await.expect("scrape").status().as_u16() }
    };
    assert_eq!((scrape(None).await, scrape(Some(READER)).await, scrape(Some(ADMIN)).await), (401, 403, 200));
    for path in ["/v1/status", "/v1/metrics"] {
        let (s, body) = d.get_auth(path, Some(TEAM)).await;
        assert_eq!((s, body["error"]["code"].as_str()), (403, Some("permission_denied")), "{path}: {body}");
        assert_eq!(d.get_auth(path, Some(ADMIN)).await.0, 200, "{path}");
    }
    let (s, body) = d.post_auth("/v1/consolidate", json!({}), Some(READER)).await;
    assert_eq!((s, body["error"]["code"].as_str()), (403, Some("permission_denied")), "{body}");
    assert_eq!(d.post_auth("/v1/consolidate", json!({}), Some(ADMIN)).await.0, 200);

    let mut c = d.memory().await;
    let e = c.get_metrics(pb::GetMetricsRequest {}).await.expect_err("no key");
    assert_eq!(e.code(), Code::Unauthenticated);
    let mut request = tonic::Request::new(pb::GetMetricsRequest {});
    request.metadata_mut().insert("authorization", MetadataValue::try_from(format!("Bearer {ADMIN}")).expect("ascii"));
    c.get_metrics(request).await.expect("admin may");
    let mut request = tonic::Request::new(pb::GetMetricsRequest {});
    request.metadata_mut().insert("authorization", MetadataValue::try_from(format!("Bearer {TEAM}")).expect("ascii"));
    assert_eq!(c.get_metrics(request).await.expect_err("narrowed reads").code(), Code::PermissionDenied);
    let mut request = tonic::Request::new(pb::GetMetricsRequest {});
    request.metadata_mut().insert("authorization", MetadataValue::try_from("Bearer nope-nope-nope-nope").expect("ascii"));
    assert_eq!(c.get_metrics(request).await.expect_err("wrong key").code(), Code::Unauthenticated);
    d.stop().await;
}

#[tokio::test]
async fn principals_read_within_their_ceiling_and_scopes_only() {
    let d = keyed().await;
    let mut ids = std::collections::HashMap::new();
    for (name, sens, scope) in
        [("low-global", "low", ""), ("medium-global", "medium", ""), ("low-a", "low", "project:a"), ("low-b", "low", "project:b")]
    {
        let (s, r) = d.post_auth("/v1/ingest/event", ingest(&format!("secret plan {name}"), sens, scope), Some(ADMIN)).await;
        assert_eq!(s, 200, "{r}");
        ids.insert(name, r["record"]["id"].as_str().expect("id").to_string());
    }
    let seen = |body: serde_json::Value| -> Vec<String> {
        body["hits"]
            .as_array()
            .expect("hits")
            .iter()
            .map(|h| h["record"]["summary"].as_str().unwrap_or("").replace("secret plan ", ""))
            .collect()
    };
    // The reader's ceiling is low: even asking for critical it sees no medium record.
    let (_, r) = d.post_auth("/v1/retrieve", json!({ "query": "secret plan", "max_sensitivity": "critical" }), Some(READER)).await;
    let mut got = seen(r);
    got.sort();
    assert_eq!(got, ["low-a", "low-b", "low-global"]);
    let (s, _) = d.get_auth(&format!("/v1/records/{}", ids["medium-global"]), Some(READER)).await;
    assert_eq!(s, 404, "above the ceiling reads as not found");
    // team-a sees global records and project:a only, even when it asks for project:b.
    let (_, r) = d.post_auth("/v1/retrieve", json!({ "query": "secret plan", "scopes": ["project:b"] }), Some(TEAM)).await;
    assert!(!seen(r).contains(&"low-b".to_string()));
    let (_, r) = d.post_auth("/v1/retrieve", json!({ "query": "secret plan" }), Some(TEAM)).await;
    let mut got = seen(r);
    got.sort();
    assert_eq!(got, ["low-a", "low-global", "medium-global"]);
    let (s, _) = d.get_auth(&format!("/v1/records/{}/history", ids["low-b"]), Some(TEAM)).await;
    assert_eq!(s, 404);
    // The same over gRPC.
    let mut c = d.memory().await;
    let mut request = tonic::Request::new(pb::RetrieveByIdRequest { id: ids["medium-global"].clone() });
    request.metadata_mut().insert("authorization", MetadataValue::try_from(format!("Bearer {READER}")).expect("ascii"));
    assert_eq!(c.retrieve_by_id(request).await.expect_err("hidden").code(), Code::NotFound);
    d.stop().await;
}

#[tokio::test]
async fn writes_outside_the_policy_are_denied_and_write_nothing() {
    let d = keyed().await;
    let before = d.get_auth("/v1/metrics", Some(ADMIN)).await.1["total_records"].as_i64().expect("metrics");
    let (s, body) = d.post_auth("/v1/ingest/event", ingest("x", "low", ""), Some(READER)).await;
    assert_eq!((s, body["error"]["code"].as_str()), (403, Some("permission_denied")), "{body}");
    let (s, _) = d.post_auth("/v1/ingest/event", ingest("x", "low", "project:b"), Some(TEAM)).await;
    assert_eq!(s, 403);
    // team-a's ingests land in its scope by default.
    let (s, r) = d.post_auth("/v1/ingest/event", json!({ "event": { "event_kind": "m", "text": "mine" } }), Some(TEAM)).await;
    assert_eq!((s, r["record"]["scope"].as_str()), (200, Some("project:a")));
    // Actors are attributed to the principal.
    assert_eq!(r["record"]["lineage"]["actor"], "team-a");
    // Revising a record outside its write scopes is denied (it may read global records).
    let (_, g) =
        d.post_auth("/v1/ingest/observation", json!({ "fact": { "subject": "A", "predicate": "is", "object": "B" } }), Some(ADMIN)).await;
    let gid = g["record"]["id"].as_str().expect("id");
    let (s, _) = d.post_auth(&format!("/v1/records/{gid}/retract"), json!({ "rationale": "mine now" }), Some(TEAM)).await;
    assert_eq!(s, 403);
    let mut c = d.memory().await;
    let mut request = tonic::Request::new(pb::RetractRequest { id: gid.into(), rationale: "r".into(), ..Default::default() });
    request.metadata_mut().insert("authorization", MetadataValue::try_from(format!("Bearer {TEAM}")).expect("ascii"));
    assert_eq!(c.retract(request).await.expect_err("denied").code(), Code::PermissionDenied);
    assert_eq!(d.get_auth(&format!("/v1/records/{gid}"), Some(ADMIN)).await.1["record"]["status"], "active");
    let (_, m) = d.get_auth("/v1/metrics", Some(ADMIN)).await;
    assert_eq!(m["total_records"].as_i64(), Some(before + 2), "only the allowed writes happened");
    d.stop().await;
}

#[tokio::test]
async fn rate_limits_are_per_principal_and_client() {
    let mut config = test_config();
    let mut slow = principal("slow", READER);
    slow.rate_limit_per_second = Some(0.5);
    config.principals = vec![slow, principal("admin", ADMIN)];
    config.server.rate_limit_burst = 2.0;
    let d = TestDaemon::with(config).await;
    for _ in 0..2 {
        assert_eq!(d.post_auth("/v1/retrieve", json!({}), Some(READER)).await.0, 200);
    }
    let response = d.http.post(d.url("/v1/retrieve")).bearer_auth(READER).json(&json!({})).send().await.expect("req");
    assert_eq!(response.status().as_u16(), 429);
    assert!(response.headers().get("retry-after").is_some());
    // Another principal is unaffected.
    assert_eq!(d.post_auth("/v1/retrieve", json!({}), Some(ADMIN)).await.0, 200);
    // The bucket is the principal's, whatever the transport: gRPC is refused too.
    let mut c = d.memory().await;
    let mut request = tonic::Request::new(pb::RetrieveRequest::default());
    request.metadata_mut().insert("authorization", MetadataValue::try_from(format!("Bearer {READER}")).expect("ascii"));
    assert_eq!(c.retrieve(request).await.expect_err("rate limited").code(), Code::ResourceExhausted);
    // A client claiming another address in a header is still this one.
    let claimed = d.http.post(d.url("/v1/retrieve")).bearer_auth(READER).header("x-mneme-peer", "127.0.0.9").json(&json!({}));
    assert_eq!(claimed.send().await.expect("req").status().as_u16(), 429);
    let forwarded = d.http.post(d.url("/v1/retrieve")).bearer_auth(READER).header("x-forwarded-for", "10.0.0.9").json(&json!({}));
    assert_eq!(forwarded.send().await.expect("req").status().as_u16(), 429, "not a trusted proxy: its X-Forwarded-For is ignored");
    // Another client of the same key (another address) has its own bucket, as membraned's.
    let other = reqwest::Client::builder().local_address(Some("127.0.0.2".parse().expect("ip"))).build().expect("client");
    let response = other.post(d.url("/v1/retrieve")).bearer_auth(READER).json(&json!({})).send().await.expect("req");
    assert_eq!(response.status().as_u16(), 200);
    d.stop().await;

    // Behind a trusted proxy (127.0.0.3 here), each client it forwards has its own bucket.
    let mut config = test_config();
    let mut slow = principal("slow", READER);
    slow.rate_limit_per_second = Some(0.5);
    config.principals = vec![slow];
    config.server.rate_limit_burst = 1.0;
    config.server.trusted_proxies = vec!["127.0.0.3".parse().expect("ip")];
    let d = TestDaemon::with(config).await;
    let proxy = reqwest::Client::builder().local_address(Some("127.0.0.3".parse().expect("ip"))).build().expect("client");
    let via = |client: &'static str| {
        proxy.post(d.url("/v1/retrieve")).bearer_auth(READER).header("x-forwarded-for", format!("203.0.113.7, {client}")).json(&json!({}))
    };
    assert_eq!(via("10.0.0.1").send().await.expect("req").status().as_u16(), 200);
    assert_eq!(via("10.0.0.1").send().await.expect("req").status().as_u16(), 429);
    assert_eq!(via("10.0.0.2").send().await.expect("req").status().as_u16(), 200);
    d.stop().await;
}

#[tokio::test]
async fn non_loopback_without_keys_refuses_to_start() {
    let mut config = test_config();
    config.server.http_addr = "0.0.0.0:0".parse().expect("address");
    let err = TestDaemon::try_with(config).await.expect_err("refused");
    assert_eq!(err.kind(), mneme_core::ErrorKind::Config, "{err}");
    let err = err.to_string();
    assert!(err.contains("non-loopback") && err.contains("principals"), "{err}");
    // With a key, in plain text, it is still refused; behind a proxy that terminates TLS
    // it starts (and with TLS: `tls.rs`).
    let mut config = test_config();
    config.server.http_addr = "0.0.0.0:0".parse().expect("address");
    config.principals = vec![principal("admin", ADMIN)];
    let err = TestDaemon::try_with(config.clone()).await.expect_err("plain text refused").to_string();
    assert!(err.contains("plain text") && err.contains("plaintext_behind_proxy"), "{err}");
    config.server.plaintext_behind_proxy = true;
    config.principals = vec![principal("admin", ADMIN)];
    TestDaemon::with(config).await.stop().await;
}

#[tokio::test]
async fn keys_can_come_from_files() {
    let dir = tempfile::tempdir().expect("dir");
    let path = dir.path().join("key");
    std::fs::write(&path, format!("{TEAM}\n")).expect("write");
    let mut config = test_config();
    let mut p = principal("filed", TEAM);
    p.key_sha256 = None;
    p.key_file = Some(path);
    config.principals = vec![p];
    let d = TestDaemon::with(config).await;
    assert_eq!(d.post_auth("/v1/retrieve", json!({}), Some(TEAM)).await.0, 200);
    d.stop().await;
    // A short key is refused at start, naming the principal.
    std::fs::write(dir.path().join("short"), "abc").expect("write");
    let mut config = test_config();
    let mut p = principal("short", TEAM);
    p.key_sha256 = None;
    p.key_file = Some(dir.path().join("short"));
    config.principals = vec![p];
    let err = TestDaemon::try_with(config).await.expect_err("refused").to_string();
    assert!(err.contains("\"short\"") && err.contains("16 characters"), "{err}");
}

/// A gRPC call is authenticated before tonic decodes its message: without a valid key, a
/// message over `server.max_request_bytes` is refused as unauthenticated (it never gets
/// parsed), and only with a valid key is it refused for its size; on `mneme.v1` and on
/// `membrane.v1` (whose clients send a bare key). Health checks stay open.
#[tokio::test]
async fn grpc_authenticates_a_call_before_it_decodes_the_message() {
    use mneme_server::membrane_pb as mb;
    let mut config = test_config();
    config.server.max_request_bytes = 4096;
    config.membrane.enabled = true;
    config.membrane.max_message_bytes = 4096;
    config.principals = vec![principal("admin", ADMIN)];
    let d = TestDaemon::with(config).await;
    let big = "x".repeat(10_000);
    let event = |authorization: Option<String>| {
        let mut r = tonic::Request::new(pb::IngestEventRequest {
            options: None,
            event: Some(pb::EventPayload { event_kind: "message".into(), text: big.clone(), ..Default::default() }),
        });
        if let Some(a) = authorization {
            r.metadata_mut().insert("authorization", MetadataValue::try_from(a).expect("header"));
        }
        r
    };
    let mut m = d.memory().await;
    for (authorization, want) in [
        (None, Code::Unauthenticated),
        (Some("Bearer wrong-key-0123456789abcdef".to_string()), Code::Unauthenticated),
        (Some(format!("Bearer {ADMIN}")), Code::OutOfRange),
    ] {
        let e = m.ingest_event(event(authorization.clone())).await.expect_err("refused");
        assert_eq!(e.code(), want, "mneme.v1 with {authorization:?}: {e:?}");
    }
    let mut c = mb::membrane_service_client::MembraneServiceClient::new(d.channel().await);
    let membrane_event = |authorization: Option<&str>| {
        let mut r = tonic::Request::new(mb::IngestEventRequest {
            source: "test".into(),
            event_kind: "message".into(),
            r#ref: "r".into(),
            summary: big.clone(),
            ..Default::default()
        });
        if let Some(a) = authorization {
            r.metadata_mut().insert("authorization", MetadataValue::try_from(a).expect("header"));
        }
        r
    };
    for (authorization, want) in
        [(None, Code::Unauthenticated), (Some("wrong-key-0123456789abcdef"), Code::Unauthenticated), (Some(ADMIN), Code::OutOfRange)]
    {
        let e = c.ingest_event(membrane_event(authorization)).await.expect_err("refused");
        assert_eq!(e.code(), want, "membrane.v1 with {authorization:?}: {e:?}");
    }
    let mut health = tonic_health::pb::health_client::HealthClient::new(d.channel().await);
    let serving = health.check(tonic_health::pb::HealthCheckRequest { service: String::new() }).await.expect("health is open");
    assert_eq!(serving.into_inner().status, tonic_health::pb::health_check_response::ServingStatus::Serving as i32);
    d.stop().await;
}
