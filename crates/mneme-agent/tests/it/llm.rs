//! The shared LLM client against a loopback server scripted to act as an OpenAI-compatible
//! endpoint: routing by model name, JSON mode, robust extraction, the bearer key, and the
//! backoff schedule on paused time.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use mneme_llm::{Chat, LlmClient, LlmError, LlmSettings, Route};
use serde_json::{Value, json};

/// What the scripted endpoint saw, and what it answers next.
#[derive(Default)]
struct Script {
    replies: Vec<(u16, String)>,
    seen: Vec<(Option<String>, Value)>,
}

async fn completions(State(script): State<Arc<Mutex<Script>>>, headers: HeaderMap, Json(body): Json<Value>) -> (StatusCode, Json<Value>) {
    let auth = headers.get("authorization").and_then(|v| v.to_str().ok()).map(String::from);
    let mut s = script.lock().expect("ok");
    s.seen.push((auth, body));
    let (status, content) = if s.replies.is_empty() { (200, "{}".to_string()) } else { s.replies.remove(0) };
    let body = json!({ "choices": [{ "message": { "role": "assistant", "content": content } }] });
    (StatusCode::from_u16(status).expect("ok"), Json(body))
}

async fn endpoint(replies: Vec<(u16, &str)>) -> (String, Arc<Mutex<Script>>) {
    let script = Arc::new(Mutex::new(Script { replies: replies.into_iter().map(|(s, c)| (s, c.to_string())).collect(), seen: Vec::new() }));
    let app = axum::Router::new().route("/v1/chat/completions", post(completions)).with_state(script.clone());
    let listener = tokio::net::TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0))).await.expect("ok");
    let addr = listener.local_addr().expect("ok");
    tokio::spawn(async move { axum::serve(listener, app).await });
    (format!("http://{addr}/v1"), script)
}

fn settings(default: Option<Route>) -> LlmSettings {
    LlmSettings {
        default,
        model: "small".into(),
        routes: BTreeMap::new(),
        timeout: Duration::from_secs(10),
        backoff_base: Duration::from_secs(60),
    }
}

#[tokio::test]
async fn json_mode_and_extraction_from_what_models_return() {
    let (url, script) = endpoint(vec![
        (200, "Sure! Here are the facts:\n```json\n{\"facts\": [1, 2]}\n```"),
        (200, "{\"facts\": [{\"s\": \"a\"}, {\"s\": \"b"),
        (200, "I have nothing to report."),
    ])
    .await;
    let client = LlmClient::new(settings(Some(Route { endpoint: url, api_key: Some("sk-test-1234567890".into()) })));
    let chat = Chat::new("system text", "user text");
    assert_eq!(client.chat_json(&chat).await.expect("ok"), json!({"facts": [1, 2]}));
    assert_eq!(client.chat_json(&chat).await.expect("ok"), json!({"facts": [{"s": "a"}, {"s": "b"}]}));
    let err = client.chat_json(&chat).await.expect_err("an error");
    assert!(matches!(err, LlmError::BadResponse(_)), "{err:?}");
    assert_eq!(client.failures(), 1, "a reply without JSON counts as a failure");

    let seen = &script.lock().expect("ok").seen;
    assert_eq!(seen.len(), 3);
    let (auth, body) = &seen[0];
    assert_eq!(auth.as_deref(), Some("Bearer sk-test-1234567890"));
    assert_eq!(body["model"], "small");
    assert_eq!(body["response_format"], json!({"type": "json_object"}));
    assert_eq!(body["messages"][0], json!({"role": "system", "content": "system text"}));
    assert_eq!(body["messages"][1], json!({"role": "user", "content": "user text"}));
    assert!(!format!("{client:?}").contains("sk-test"), "Debug shows the key: {client:?}");
}

#[tokio::test]
async fn a_model_with_a_route_goes_to_its_own_endpoint() {
    let (local, local_seen) = endpoint(vec![(200, "local answer")]).await;
    let (remote, remote_seen) = endpoint(vec![(200, "remote answer")]).await;
    let mut s = settings(Some(Route { endpoint: local, api_key: None }));
    s.routes.insert("big".into(), Route { endpoint: remote, api_key: Some("remote-key-0123456789".into()) });
    let client = LlmClient::new(s);
    assert_eq!(client.chat(&Chat::new("s", "u")).await.expect("ok"), "local answer");
    let big = Chat { model: Some("big"), ..Chat::new("s", "u") };
    assert_eq!(client.chat(&big).await.expect("ok"), "remote answer");
    let local_seen = &local_seen.lock().expect("ok").seen;
    let remote_seen = &remote_seen.lock().expect("ok").seen;
    assert_eq!((local_seen.len(), remote_seen.len()), (1, 1));
    assert_eq!(local_seen[0].0, None, "no key configured for the default route");
    assert_eq!(remote_seen[0].0.as_deref(), Some("Bearer remote-key-0123456789"));
    assert_eq!(remote_seen[0].1["model"], "big");
    assert!(local_seen[0].1.get("response_format").is_none(), "plain chat is not JSON mode");
}

#[tokio::test]
async fn no_endpoint_is_disabled_and_counts_no_failure() {
    let client = LlmClient::new(settings(None));
    assert!(!client.enabled());
    assert_eq!(client.chat(&Chat::new("s", "u")).await.expect_err("an error"), LlmError::Disabled);
    assert_eq!(client.failures(), 0);
}

/// Failures back off 1, 2, 4, 8 then 10 minutes (the base doubling, capped at 10×); a
/// call inside the backoff sends nothing; a success clears it. Runs on paused time: the
/// test advances Tokio's clock instead of sleeping.
#[tokio::test]
async fn failures_back_off_exponentially_on_paused_time() {
    let (url, script) = endpoint(vec![(500, ""), (429, ""), (503, ""), (500, ""), (500, ""), (500, ""), (200, "ok")]).await;
    let client = LlmClient::new(settings(Some(Route { endpoint: url, api_key: None })));
    let chat = Chat::new("s", "u");
    let mut waits = Vec::new();
    for expected in [
        LlmError::Status(500),
        LlmError::Status(429),
        LlmError::Status(503),
        LlmError::Status(500),
        LlmError::Status(500),
        LlmError::Status(500),
    ] {
        assert_eq!(client.chat(&chat).await.expect_err("an error"), expected);
        tokio::time::pause();
        let Err(LlmError::Backoff { remaining }) = client.check_backoff() else { panic!("no backoff after a failure") };
        waits.push(remaining.as_secs_f64().round() as u64);
        // Inside the backoff nothing is sent.
        tokio::time::advance(remaining - Duration::from_secs(1)).await;
        assert!(matches!(client.chat(&chat).await, Err(LlmError::Backoff { .. })));
        tokio::time::advance(Duration::from_secs(1)).await;
        tokio::time::resume();
    }
    assert_eq!(waits, vec![60, 120, 240, 480, 600, 600]);
    assert_eq!(script.lock().expect("ok").seen.len(), 6, "calls inside a backoff reached the endpoint");
    assert_eq!(client.chat(&chat).await.expect("ok"), "ok");
    assert_eq!(client.failures(), 0);
    assert!(client.check_backoff().is_ok());
}
