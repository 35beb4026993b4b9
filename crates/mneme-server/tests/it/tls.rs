//! TLS on the daemon's listeners, with a throwaway authority made in the test
//! (`mneme_testkit::make_certificates`): HTTPS and gRPC-over-TLS round trips, a
//! certificate from another authority refused by the client, client certificates required
//! and mapped to principals, rotation without a restart, and the refusal of a public
//! address in plain text.

use std::path::{Path, PathBuf};
use std::time::Duration;

use mneme_server::pb;
use mneme_server::tls::{Trust, client_config};
use serde_json::{Value, json};
use tonic::transport::{Certificate, Channel, ClientTlsConfig};

use crate::auth::principal;
use crate::{TestDaemon, event_body, test_config};

const ADMIN: &str = "admin-key-0123456789abcdef";
const OPS: &str = "ops-key-0123456789abcdef";

fn certificates() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("dir");
    mneme_testkit::make_certificates(dir.path());
    let path = dir.path().to_path_buf();
    (dir, path)
}

fn tls_config(pki: &Path) -> mneme_server::MnemeConfig {
    let mut config = test_config();
    config.server.tls_cert_file = Some(pki.join("server.crt"));
    config.server.tls_key_file = Some(pki.join("server.key"));
    config
}

/// An HTTPS client trusting `ca` (a file of `pki`), presenting `cert` (`client`,
/// `stranger`) when given.
fn https(pki: &Path, ca: &str, cert: Option<&str>) -> reqwest::Client {
    let (c, k) = cert.map(|c| (pki.join(format!("{c}.crt")), pki.join(format!("{c}.key")))).unzip();
    let config = client_config(Trust::Authorities(Some(&pki.join(ca))), c.as_deref().zip(k.as_deref())).expect("client TLS");
    reqwest::Client::builder().tls_backend_preconfigured(config).build().expect("client")
}

fn url(d: &TestDaemon, path: &str) -> String {
    format!("https://localhost:{}{path}", d.daemon.http_addr().port())
}

async fn post(client: &reqwest::Client, url: String, body: Value, key: Option<&str>) -> Result<(u16, Value), reqwest::Error> {
    let mut request = client.post(url).json(&body);
    if let Some(k) = key {
        request = request.bearer_auth(k);
    }
    let response = request.send().await?;
    let status = response.status().as_u16();
    Ok((status, response.json().await.unwrap_or(Value::Null)))
}

/// The whole chain of an error, for asserting on what a refusal says.
fn chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(&format!(": {s}"));
        source = s.source();
    }
    text
}

#[tokio::test]
async fn https_and_grpc_over_tls_round_trip_and_a_certificate_from_another_authority_is_refused() {
    mneme_server::init_tls();
    let (_dir, pki) = certificates();
    let d = TestDaemon::with(tls_config(&pki)).await;
    let client = https(&pki, "ca.crt", None);
    let (status, body) =
        post(&client, url(&d, "/v1/ingest/event"), event_body("the deploy key rotates on Fridays"), None).await.expect("HTTPS");
    assert_eq!(status, 200, "{body}");
    let (status, body) = post(&client, url(&d, "/v1/retrieve"), json!({ "query": "deploy key" }), None).await.expect("HTTPS");
    assert_eq!(status, 200, "{body}");
    assert!(body["hits"][0]["record"]["payload"].to_string().contains("Fridays"), "{body}");
    // The console is served over HTTPS too, and the daemon's own origin is https://.
    let page = client
        .post(url(&d, "/v1/retrieve"))
        .header("origin", format!("https://localhost:{}", d.daemon.http_addr().port()))
        .json(&json!({ "query": "deploy" }))
        .send()
        .await
        .expect("HTTPS");
    assert_eq!(page.status().as_u16(), 200);
    // Plain HTTP on the TLS port gets nothing.
    let plain = reqwest::Client::new().get(format!("http://{}/healthz", d.daemon.http_addr())).send().await;
    assert!(plain.is_err() || !plain.expect("response").status().is_success());
    // A client that trusts another authority refuses the daemon's certificate.
    let err = https(&pki, "other-ca.crt", None).get(url(&d, "/healthz")).send().await.expect_err("refused");
    let text = chain(&err);
    assert!(text.contains("certificate") || text.contains("UnknownIssuer"), "{text}");

    // gRPC over TLS (ALPN h2), and a gRPC client trusting another authority refused.
    let channel = |ca: &str| {
        let pem = std::fs::read(pki.join(ca)).expect("ca");
        let tls = ClientTlsConfig::new().ca_certificate(Certificate::from_pem(pem)).domain_name("localhost");
        Channel::from_shared(format!("https://localhost:{}", d.grpc_addr().port())).expect("uri").tls_config(tls).expect("tls")
    };
    let mut memory = pb::memory_client::MemoryClient::new(channel("ca.crt").connect().await.expect("gRPC over TLS"));
    let hits = memory
        .retrieve(pb::RetrieveRequest { query: "deploy key".into(), ..Default::default() })
        .await
        .expect("retrieve")
        .into_inner()
        .hits;
    assert!(!hits.is_empty());
    assert!(channel("other-ca.crt").connect().await.is_err(), "a certificate from another authority is refused");
    d.stop().await;
}

#[tokio::test]
async fn client_certificates_are_required_and_bind_principals() {
    mneme_server::init_tls();
    let (_dir, pki) = certificates();
    let mut config = tls_config(&pki);
    config.server.tls_client_ca_file = Some(pki.join("ca.crt"));
    // `agent`: the certificate alone (its common name); `admin`: a key and the whole
    // subject (a second factor); `ops`: a key bound to a certificate nobody has; `root`:
    // a certificate nobody has, without a key.
    let mut agent = principal("agent", ADMIN);
    agent.key_sha256 = None;
    agent.tls_client_subject = Some("agent-a".into());
    let mut admin = principal("admin", ADMIN);
    admin.tls_client_subject = Some("O=mneme-tests,CN=agent-a".into());
    let mut ops = principal("ops", OPS);
    ops.tls_client_subject = Some("someone-else".into());
    let mut root = principal("root", ADMIN);
    root.key_sha256 = None;
    root.tls_client_subject = Some("root-cert".into());
    config.principals = vec![agent, admin, ops, root];
    let d = TestDaemon::with(config).await;

    // No client certificate, or one from another authority: no connection.
    let err = https(&pki, "ca.crt", None).get(url(&d, "/healthz")).send().await.expect_err("refused");
    assert!(!chain(&err).is_empty());
    https(&pki, "ca.crt", Some("stranger")).get(url(&d, "/healthz")).send().await.expect_err("another authority's client certificate");

    let client = https(&pki, "ca.crt", Some("client"));
    // The certificate alone is `agent`; headers claiming another certificate are replaced.
    let claim = client
        .post(url(&d, "/v1/ingest/event"))
        .header("x-mneme-tls-client-subject", "CN=root-cert")
        .header("x-mneme-tls-client-cn", "root-cert")
        .json(&event_body("written with a certificate"))
        .send()
        .await
        .expect("HTTPS");
    assert_eq!(claim.status().as_u16(), 200);
    let body: Value = claim.json().await.expect("json");
    assert_eq!(body["record"]["lineage"]["actor"], "agent", "{body}");
    // A key bound to this certificate's whole subject: both factors present.
    let (status, body) = post(&client, url(&d, "/v1/ingest/event"), event_body("as admin"), Some(ADMIN)).await.expect("HTTPS");
    assert_eq!((status, body["record"]["lineage"]["actor"].as_str()), (200, Some("admin")), "{body}");
    // A key bound to another certificate is refused, naming what is missing.
    let (status, body) = post(&client, url(&d, "/v1/ingest/event"), event_body("as ops"), Some(OPS)).await.expect("HTTPS");
    assert_eq!(status, 401, "{body}");
    assert!(body["error"]["message"].as_str().unwrap_or_default().contains("client certificate"), "{body}");

    // gRPC: the certificate alone authenticates too.
    let identity = tonic::transport::Identity::from_pem(
        std::fs::read(pki.join("client.crt")).expect("crt"),
        std::fs::read(pki.join("client.key")).expect("key"),
    );
    let tls = ClientTlsConfig::new()
        .ca_certificate(Certificate::from_pem(std::fs::read(pki.join("ca.crt")).expect("ca")))
        .identity(identity)
        .domain_name("localhost");
    let channel = Channel::from_shared(format!("https://localhost:{}", d.grpc_addr().port()))
        .expect("uri")
        .tls_config(tls)
        .expect("tls")
        .connect()
        .await
        .expect("gRPC with a client certificate");
    let mut memory = pb::memory_client::MemoryClient::new(channel);
    memory.retrieve(pb::RetrieveRequest { query: "certificate".into(), ..Default::default() }).await.expect("authenticated by certificate");

    // MCP over HTTPS: a tool call goes through the API as the certificate's principal.
    let mcp = |message: Value, session: Option<String>| {
        let mut request = client
            .post(url(&d, "/mcp"))
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2025-06-18")
            .json(&message);
        if let Some(s) = session {
            request = request.header("mcp-session-id", s);
        }
        request.send()
    };
    let init = json!({ "jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": { "name": "tls-test", "version": "1" } } });
    let response = mcp(init, None).await.expect("MCP over HTTPS");
    assert_eq!(response.status().as_u16(), 200);
    let session = response.headers().get("mcp-session-id").and_then(|v| v.to_str().ok()).map(str::to_string);
    mcp(json!({ "jsonrpc": "2.0", "method": "notifications/initialized" }), session.clone()).await.expect("initialized");
    let call = json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": { "name": "recall", "arguments": { "query": "certificate" } } });
    let text = mcp(call, session).await.expect("tools/call").text().await.expect("body");
    let answer = text
        .lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .filter_map(|l| serde_json::from_str::<Value>(l.trim()).ok())
        .find(|v| v.get("id").is_some())
        .unwrap_or(Value::Null);
    assert_eq!(answer["result"]["isError"], false, "{answer}");
    assert!(answer["result"]["content"][0]["text"].as_str().unwrap_or_default().contains("certificate"), "{answer}");
    d.stop().await;
}

#[tokio::test]
async fn a_certificate_rotates_without_a_restart_and_a_bad_one_is_not_taken() {
    mneme_server::init_tls();
    let (_dir, pki) = certificates();
    // The daemon's files: copies the test replaces.
    let served = tempfile::tempdir().expect("dir");
    let (cert, key) = (served.path().join("tls.crt"), served.path().join("tls.key"));
    std::fs::copy(pki.join("server.crt"), &cert).expect("copy");
    std::fs::copy(pki.join("server.key"), &key).expect("copy");
    let mut config = test_config();
    config.server.tls_cert_file = Some(cert.clone());
    config.server.tls_key_file = Some(key.clone());
    config.server.tls_reload_poll = mneme_core::Span::millis(100);
    let d = TestDaemon::with(config).await;
    let old = https(&pki, "ca.crt", None);
    assert_eq!(old.get(url(&d, "/healthz")).send().await.expect("first certificate").status().as_u16(), 200);

    // Replaced in place (each file renamed over, the key first).
    let replace = |from: &str, to: &Path| {
        let tmp = to.with_extension("new");
        std::fs::copy(pki.join(from), &tmp).expect("copy");
        std::fs::rename(&tmp, to).expect("rename");
    };
    replace("other-server.key", &key);
    replace("other-server.crt", &cert);
    let new = https(&pki, "other-ca.crt", None);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    loop {
        if new.get(url(&d, "/healthz")).send().await.is_ok() {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "the new certificate was not taken within 15 s");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // The connection opened before the rotation still works; a new one gets the new
    // certificate, which a client of the old authority refuses.
    assert_eq!(old.get(url(&d, "/healthz")).send().await.expect("kept-alive connection").status().as_u16(), 200);
    https(&pki, "ca.crt", None).get(url(&d, "/healthz")).send().await.expect_err("the old authority no longer matches");

    // A broken certificate file is not taken: the one in use stays.
    std::fs::write(&cert, "not a certificate").expect("write");
    tokio::time::sleep(Duration::from_millis(600)).await;
    let fresh = https(&pki, "other-ca.crt", None);
    assert_eq!(fresh.get(url(&d, "/healthz")).send().await.expect("still served").status().as_u16(), 200);
    d.stop().await;
}

#[tokio::test]
async fn a_public_address_needs_tls_or_a_proxy_that_terminates_it() {
    let (_dir, pki) = certificates();
    let public = |mut config: mneme_server::MnemeConfig| {
        config.server.http_addr = "0.0.0.0:0".parse().expect("address");
        config.principals = vec![principal("admin", ADMIN)];
        config
    };
    let err = TestDaemon::try_with(public(test_config())).await.expect_err("plain text refused");
    assert_eq!(err.kind(), mneme_core::ErrorKind::Config);
    let text = err.to_string();
    assert!(text.contains("plain text") && text.contains("tls_cert_file") && text.contains("plaintext_behind_proxy"), "{text}");
    // Behind a proxy that says it terminates TLS, or with TLS, it starts.
    let mut behind = public(test_config());
    behind.server.plaintext_behind_proxy = true;
    TestDaemon::with(behind).await.stop().await;
    TestDaemon::with(public(tls_config(&pki))).await.stop().await;
    // Files that do not load are named.
    let mut broken = tls_config(&pki);
    broken.server.tls_key_file = Some(pki.join("other-server.key"));
    let err = TestDaemon::try_with(broken).await.expect_err("a key that is not the certificate's").to_string();
    assert!(err.contains("do not make a pair"), "{err}");
    let mut missing = tls_config(&pki);
    missing.server.tls_cert_file = Some(pki.join("nowhere.crt"));
    let err = TestDaemon::try_with(missing).await.expect_err("a missing file").to_string();
    assert!(err.contains("nowhere.crt"), "{err}");
}
