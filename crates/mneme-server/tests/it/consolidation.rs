//! Consolidation against a scripted loopback OpenAI-compatible server: slow, 429, garbage
//! and valid answers, backoff, and ingest-or-revise.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use tokio::sync::Mutex;

use crate::{TestDaemon, test_config};

/// What the fake LLM answers next; the last entry repeats.
#[derive(Debug, Clone)]
enum Reply {
    Slow,
    Status(u16),
    Content(String),
}

#[derive(Debug, Default)]
struct Script {
    replies: Mutex<Vec<Reply>>,
    requests: Mutex<Vec<Value>>,
    count: AtomicUsize,
    /// Signalled on every request (a permit is kept when nobody waits yet).
    called: tokio::sync::Notify,
}

async fn chat(State(s): State<Arc<Script>>, Json(body): Json<Value>) -> Response {
    s.count.fetch_add(1, Ordering::SeqCst);
    s.requests.lock().await.push(body);
    s.called.notify_one();
    let reply = {
        let mut r = s.replies.lock().await;
        if r.len() > 1 { r.remove(0) } else { r[0].clone() }
    };
    match reply {
        Reply::Slow => {
            tokio::time::sleep(Duration::from_secs(5)).await;
            Json(json!({})).into_response()
        }
        Reply::Status(code) => (StatusCode::from_u16(code).expect("status"), "slow down").into_response(),
        Reply::Content(c) => Json(json!({ "choices": [{ "message": { "role": "assistant", "content": c } }] })).into_response(),
    }
}

async fn llm(replies: Vec<Reply>) -> (String, Arc<Script>) {
    let script = Arc::new(Script { replies: Mutex::new(replies), ..Script::default() });
    let app = axum::Router::new().route("/v1/chat/completions", axum::routing::post(chat)).with_state(script.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move { axum::serve(listener, app).await.expect("serve") });
    (format!("http://{addr}/v1"), script)
}

async fn daemon(endpoint: &str) -> TestDaemon {
    let mut c = test_config();
    c.consolidation.llm_endpoint = Some(endpoint.into());
    c.consolidation.llm_timeout = mneme_core::Span::millis(300);
    c.consolidation.llm_backoff = mneme_core::Span::millis(400);
    c.consolidation.llm_api_key = Some("sk-test".into());
    TestDaemon::with(c).await
}

async fn say(d: &TestDaemon, text: &str) {
    let (s, v) = d.post("/v1/hooks/message_received", json!({ "content": text, "sessionId": "s" })).await;
    assert_eq!(s, 200, "{v}");
}

async fn cycle(d: &TestDaemon) -> Value {
    let (s, v) = d.post("/v1/consolidate", json!({})).await;
    assert_eq!(s, 200, "{v}");
    v
}

fn facts(list: &[(&str, &str, &str, f64)]) -> Reply {
    let facts: Vec<Value> = list.iter().map(|(s, p, o, c)| json!({ "subject": s, "predicate": p, "object": o, "confidence": c })).collect();
    Reply::Content(json!({ "facts": facts, "competence": [{ "skill": "skill:git+rebase", "triggers": ["history is messy"], "steps": ["git rebase -i"], "outcome": "success" }], "corrections": [] }).to_string())
}

/// Each retrieved fact's object and status, for the retrieve request `body`.
async fn fact_objects(d: &TestDaemon, body: Value) -> Vec<(String, String)> {
    let (_, hits) = d.post("/v1/retrieve", body).await;
    let text = |v: &Value| v.as_str().unwrap_or("").to_string();
    hits["hits"].as_array().expect("hits").iter().map(|h| (text(&h["record"]["payload"]["object"]), text(&h["record"]["status"]))).collect()
}

#[tokio::test]
async fn failures_back_off_and_fall_back_to_regex() {
    let (endpoint, script) = llm(vec![
        Reply::Slow,
        Reply::Status(429),
        Reply::Content("this is not json".into()),
        Reply::Content("{\"facts\": [{\"subject\": 1}]}".into()),
    ])
    .await;
    let d = daemon(&endpoint).await;

    say(&d, "Gitea runs on port 3000.").await;
    let r = cycle(&d).await;
    assert!(r["llm"].as_str().unwrap_or("").contains("timeout"), "{r}");
    // Regex extraction still ran; the fact was stored when the message arrived, so the
    // cycle confirms (reinforces) it.
    assert_eq!((r["regex_facts"].as_u64(), r["reinforced"].as_u64()), (Some(1), Some(1)), "{r}");

    // Inside the backoff the LLM is not called at all.
    say(&d, "Caddy is the proxy.").await;
    let r = cycle(&d).await;
    assert_eq!(r["llm"], "backoff", "{r}");
    assert_eq!(script.count.load(Ordering::SeqCst), 1);

    crate::skip(Duration::from_millis(450)).await;
    say(&d, "Loki uses object storage.").await;
    let r = cycle(&d).await;
    assert!(r["llm"].as_str().unwrap_or("").contains("HTTP 429"), "{r}");
    // Second failure: the backoff doubles (800 ms), so 450 ms later it still holds.
    crate::skip(Duration::from_millis(450)).await;
    say(&d, "Tempo uses object storage.").await;
    assert_eq!(cycle(&d).await["llm"], "backoff");
    crate::skip(Duration::from_millis(400)).await;
    say(&d, "Mimir uses object storage.").await;
    let r = cycle(&d).await;
    assert!(r["llm"].as_str().unwrap_or("").contains("not JSON"), "{r}");
    assert_eq!(r["llm_facts"], 0);
    let (_, status) = d.get("/v1/status").await;
    assert_eq!(status["last_consolidation"]["llm"], r["llm"]);
    // The request carried the seed's prompt, the JSON response format and the key.
    let first = script.requests.lock().await[0].clone();
    assert!(first["messages"][0]["content"].as_str().unwrap_or("").starts_with("You are a memory consolidation engine"));
    assert_eq!(first["response_format"]["type"], "json_object");
    // Each line carries its date and speaker.
    assert!(first["messages"][1]["content"].as_str().unwrap_or("").contains("] user: Gitea runs on port 3000."), "{first}");
    d.stop().await;
}

#[tokio::test]
async fn valid_answers_ingest_reinforce_supersede_and_contest() {
    let (endpoint, _script) = llm(vec![
        facts(&[("Atlas", "deploys to", "Hetzner", 0.9), ("Atlas", "prefers", "small diffs", 0.7), ("Noise", "is", "low confidence", 0.3)]),
        facts(&[
            ("Atlas", "deploys to", "Hetzner", 0.9),
            ("Atlas", "prefers", "large diffs", 0.65),
            ("Atlas", "deploys to", "Fly.io", 0.95),
        ]),
    ])
    .await;
    let d = daemon(&endpoint).await;
    say(&d, "we talked about deployments").await;
    let r = cycle(&d).await;
    assert_eq!((r["llm"].as_str(), r["llm_facts"].as_u64(), r["ingested"].as_u64()), (Some("ok"), Some(2), Some(2)), "{r}");
    assert_eq!(r["llm_skills"], 1);

    say(&d, "more about deployments").await;
    let r = cycle(&d).await;
    // Same fact → reinforced; conflicting at 0.65 → contested; conflicting at 0.95 → superseded.
    assert_eq!((r["reinforced"].as_u64(), r["contested"].as_u64(), r["superseded"].as_u64()), (Some(1), Some(1), Some(1)), "{r}");
    let objects = fact_objects(&d, json!({ "query": "Atlas", "types": ["semantic"], "limit": 20 })).await;
    assert!(objects.contains(&("Fly.io".into(), "active".into())), "{objects:?}");
    assert!(objects.contains(&("small diffs".into(), "contested".into())), "{objects:?}");
    assert!(objects.contains(&("large diffs".into(), "active".into())), "{objects:?}");
    assert!(!objects.iter().any(|(o, _)| o == "Hetzner"), "superseded facts are tombstones: {objects:?}");
    let (_, skills) = d.post("/v1/retrieve", json!({ "types": ["competence"] })).await;
    assert_eq!(skills["hits"][0]["record"]["payload"]["skill"], "skill:git+rebase");
    d.stop().await;
}

#[tokio::test]
async fn buffer_is_capped_at_twice_the_batch_size_and_flushed_on_shutdown() {
    let mut c = test_config();
    c.consolidation.batch_size = 3;
    let d = TestDaemon::with(c).await;
    for name in ["Alpha", "Bravo", "Charlie", "Delta", "Echo", "Foxtrot", "Golf", "Hotel", "India", "Juliet"] {
        say(&d, &format!("{name} uses the shared cache.")).await;
    }
    let (_, status) = d.get("/v1/status").await;
    assert_eq!(status["consolidation_buffered"], 6);
    let path = d.dir.path().join("mneme.db");
    let TestDaemon { daemon, dir, .. } = d;
    daemon.stop().await;
    // Shutdown ran a last cycle: the buffered regex facts were consolidated (reinforced,
    // since message-time extraction had stored them already).
    let conn = rusqlite::Connection::open(&path).expect("open");
    let n: i64 = conn.query_row("SELECT count(*) FROM audit WHERE actor = 'mneme:consolidator'", [], |r| r.get(0)).expect("query");
    assert_eq!(n, 6);
    drop(dir);
}

#[tokio::test]
async fn the_backoff_doubles_up_to_ten_times_the_base() {
    let (endpoint, script) = llm(vec![Reply::Status(500)]).await;
    let mut c = test_config();
    c.consolidation.llm_endpoint = Some(endpoint);
    c.consolidation.llm_backoff = mneme_core::Span::millis(100);
    let d = TestDaemon::with(c).await;
    let mut waits = Vec::new();
    for i in 0..6 {
        say(&d, &format!("message {i}")).await;
        let r = cycle(&d).await;
        // "failed: HTTP 500 (backing off 0.4 s)"
        let llm = r["llm"].as_str().unwrap_or("");
        let secs: f64 =
            llm.rsplit("backing off ").next().and_then(|t| t.trim_end_matches(" s)").parse().ok()).unwrap_or_else(|| panic!("{r}"));
        waits.push(secs);
        // One LLM failure per cycle is a failed job run.
        assert!(r["errors"].as_array().is_some_and(|e| e.iter().any(|e| e.as_str().unwrap_or("").contains("HTTP 500"))), "{r}");
        crate::skip(Duration::from_secs_f64(secs) + Duration::from_millis(30)).await;
    }
    assert_eq!(waits, vec![0.1, 0.2, 0.4, 0.8, 1.0, 1.0], "base, 2×, 4×, 8×, then capped at 10×");
    assert_eq!(script.count.load(Ordering::SeqCst), 6);
    let (_, status) = d.get("/v1/status").await;
    assert_eq!(status["errors_last_hour"], 6, "{status}");
    d.stop().await;
}

const ADMIN: &str = "admin-key-0123456789abcdef";
const TEAM: &str = "team-a-key-0123456789abcdef";
const READER: &str = "reader-key-0123456789abcdef";

/// (object, scope, sensitivity, status) of every "Atlas deploys to" fact, tombstones too.
async fn atlas(d: &TestDaemon) -> Vec<(String, String, String, String)> {
    let query =
        json!({ "query": "Atlas deploys", "types": ["semantic"], "include_tombstones": true, "max_sensitivity": "critical", "limit": 50 });
    let (s, hits) = d.post_auth("/v1/retrieve", query, Some(ADMIN)).await;
    assert_eq!(s, 200, "{hits}");
    let mut out: Vec<(String, String, String, String)> = hits["hits"]
        .as_array()
        .expect("hits")
        .iter()
        .map(|h| {
            let r = &h["record"];
            let field = |v: &Value| v.as_str().unwrap_or("").to_string();
            (field(&r["payload"]["object"]), field(&r["scope"]), field(&r["sensitivity"]), field(&r["status"]))
        })
        .collect();
    out.sort();
    out
}

#[tokio::test]
async fn facts_stay_in_their_scope_and_revisions_keep_the_higher_sensitivity() {
    let (endpoint, _script) = llm(vec![facts(&[("Atlas", "deploys to", "Fly.io", 0.95)])]).await;
    let mut c = test_config();
    c.consolidation.llm_endpoint = Some(endpoint);
    let mut team = crate::auth::principal("team-a", TEAM);
    team.read_scopes = Some(vec!["project:a".into()]);
    team.write_scopes = Some(vec!["project:a".into()]);
    let mut reader = crate::auth::principal("reader", READER);
    reader.read_max_sensitivity = mneme_core::Sensitivity::Low;
    c.principals = vec![crate::auth::principal("admin", ADMIN), team, reader];
    let d = TestDaemon::with(c).await;
    for scope in ["project:b", ""] {
        let fact = json!({ "fact": { "subject": "Atlas", "predicate": "deploys to", "object": "Hetzner" }, "options": { "scope": scope, "sensitivity": "low" } });
        assert_eq!(d.post_auth("/v1/ingest/observation", fact, Some(ADMIN)).await.0, 200);
    }

    // A message from a principal confined to project:a: the LLM's fact lands in project:a
    // and revises nothing elsewhere (not project:b, not the global fact).
    let said = d.post_auth("/v1/hooks/message_received", json!({ "content": "we talked about Atlas", "sessionId": "s" }), Some(TEAM)).await;
    assert_eq!(said.0, 200, "{}", said.1);
    let (_, r) = d.post_auth("/v1/consolidate", json!({}), Some(ADMIN)).await;
    assert_eq!((r["llm"].as_str(), r["ingested"].as_u64(), r["superseded"].as_u64()), (Some("ok"), Some(1), Some(0)), "{r}");
    let s = |o: &str, scope: &str, sens: &str, status: &str| (o.to_string(), scope.to_string(), sens.to_string(), status.to_string());
    assert_eq!(
        atlas(&d).await,
        vec![s("Fly.io", "project:a", "low", "active"), s("Hetzner", "", "low", "active"), s("Hetzner", "project:b", "low", "active")]
    );

    // A direct message (medium) revises the global fact: the new version is medium, so a
    // low-ceiling reader cannot see what the DM said.
    let dm = json!({ "content": "about Atlas again", "sessionId": "s2", "channelId": "dm:howard" });
    assert_eq!(d.post_auth("/v1/hooks/message_received", dm, Some(ADMIN)).await.0, 200);
    let (_, r) = d.post_auth("/v1/consolidate", json!({}), Some(ADMIN)).await;
    assert_eq!(r["superseded"].as_u64(), Some(1), "{r}");
    assert_eq!(
        atlas(&d).await,
        vec![
            s("Fly.io", "", "medium", "active"),
            s("Fly.io", "project:a", "low", "active"),
            s("Hetzner", "", "low", "superseded"),
            s("Hetzner", "project:b", "low", "active"),
        ]
    );
    // Not through the superseded fact's history either (its audit rationale, its links).
    let (_, hits) = d.post_auth("/v1/retrieve", json!({ "query": "Atlas Hetzner", "include_tombstones": true }), Some(READER)).await;
    let old = hits["hits"]
        .as_array()
        .expect("hits")
        .iter()
        .find(|h| h["record"]["scope"] == "" && h["record"]["status"] == "superseded")
        .map(|h| h["record"]["id"].as_str().expect("id").to_string())
        .expect("the superseded global fact is visible to the low reader");
    let (s, history) = d.get_auth(&format!("/v1/records/{old}/history"), Some(READER)).await;
    assert_eq!(s, 200, "{history}");
    assert!(!history.to_string().contains("Fly.io"), "the DM's fact leaked: {history}");
    d.stop().await;
}

#[tokio::test]
async fn messages_above_the_llm_ceiling_are_not_sent_to_the_llm() {
    let (endpoint, script) = llm(vec![facts(&[("Atlas", "deploys to", "Fly.io", 0.95)])]).await;
    let mut c = test_config();
    c.consolidation.llm_endpoint = Some(endpoint);
    c.consolidation.llm_max_sensitivity = mneme_core::Sensitivity::Low;
    let d = TestDaemon::with(c).await;
    let dm = json!({ "content": "my door code is 4711", "sessionId": "s", "channelId": "dm:howard" });
    assert_eq!(d.post("/v1/hooks/message_received", dm).await.0, 200);
    let r = cycle(&d).await;
    assert!(r["llm"].as_str().unwrap_or("").starts_with("skipped"), "{r}");
    assert_eq!(script.count.load(Ordering::SeqCst), 0, "the LLM saw a medium message");
    // A low message in the next cycle is sent, and only it.
    say(&d, "Atlas needs a bigger disk").await;
    assert_eq!(cycle(&d).await["llm"], "ok");
    let sent = script.requests.lock().await[0]["messages"][1]["content"].as_str().unwrap_or("").to_string();
    assert!(sent.contains("bigger disk") && !sent.contains("4711"), "{sent}");
    d.stop().await;
}

#[tokio::test]
async fn a_cycle_cancelled_while_waiting_on_the_llm_puts_its_messages_back() {
    let (endpoint, script) = llm(vec![Reply::Slow]).await;
    let mut c = test_config();
    c.consolidation.llm_endpoint = Some(endpoint);
    // Long enough to cancel the call in flight even on a busy machine; the shutdown's
    // own flush then gives the LLM one grace period.
    c.consolidation.llm_timeout = mneme_core::Span::secs(4);
    c.server.shutdown_grace = mneme_core::Span::millis(300);
    let d = TestDaemon::with(c).await;
    for text in ["Atlas runs on port 8080.", "Borg runs on port 9090."] {
        say(&d, text).await;
    }
    let consolidator = d.daemon.app().consolidator.clone();
    assert_eq!(consolidator.buffered(), 2);
    let running = tokio::spawn({
        let consolidator = consolidator.clone();
        async move { consolidator.run_cycle().await }
    });
    // Wait until the LLM has the request (the buffer is drained by then), then cancel.
    tokio::time::timeout(Duration::from_secs(10), script.called.notified()).await.expect("the LLM got the request");
    assert_eq!((script.count.load(Ordering::SeqCst), consolidator.buffered()), (1, 0));
    running.abort();
    assert!(running.await.expect_err("cancelled").is_cancelled());
    assert_eq!(consolidator.buffered(), 2, "the cancelled cycle's messages are back in the buffer");
    // The shutdown's flush gives the slow LLM one grace period (300 ms), then applies the
    // regex facts: both are confirmed by the consolidator.
    let path = d.dir.path().join("mneme.db");
    let TestDaemon { daemon, dir, .. } = d;
    let started = std::time::Instant::now();
    daemon.stop().await;
    assert!(started.elapsed() < Duration::from_secs(3), "shutdown took {:?}", started.elapsed());
    let conn = rusqlite::Connection::open(&path).expect("open");
    let n: i64 = conn.query_row("SELECT count(*) FROM audit WHERE actor = 'mneme:consolidator'", [], |r| r.get(0)).expect("query");
    assert_eq!(n, 2);
    drop(dir);
}

#[test]
fn extraction_parsing_validates_the_schema() {
    use mneme_agent::consolidate::parse_extraction;
    let ok = parse_extraction("```json\n{\"facts\": [{\"subject\": \"A\", \"predicate\": \"Uses\", \"object\": \"B\", \"confidence\": 0.9}, {\"subject\": \"\", \"predicate\": \"x\", \"object\": \"y\", \"confidence\": 0.9}, {\"subject\": \"C\", \"predicate\": \"x\", \"object\": \"y\", \"confidence\": 2}]}\n```").expect("fenced JSON");
    assert_eq!(ok.facts.len(), 1);
    assert_eq!(ok.facts[0].predicate, "uses");
    assert!(parse_extraction("[]").is_err());
    assert!(parse_extraction("{\"answer\": 42}").is_err());
    assert!(parse_extraction("nope").is_err());
}

async fn say_as(d: &TestDaemon, who: &str, text: &str, at: &str) {
    let event = json!({ "content": text, "from": who, "timestamp": at, "sessionId": "s" });
    let (s, v) = d.post("/v1/hooks/message_received", event).await;
    assert_eq!(s, 200, "{v}");
}

/// The live value of `who`'s slot: the objects of the active facts with this predicate.
async fn live(d: &TestDaemon, who: &str, predicate: &str) -> Vec<String> {
    let (_, hits) = d.post("/v1/retrieve", json!({ "types": ["semantic"], "limit": 50 })).await;
    hits["hits"]
        .as_array()
        .expect("hits")
        .iter()
        .map(|h| &h["record"]["payload"])
        .filter(|p| p["subject"] == who && p["predicate"] == predicate)
        .map(|p| p["object"].as_str().unwrap_or("").to_string())
        .collect()
}

/// With an LLM the model sees speaker names, dates and the live facts about the speakers
/// (by id), and decides ADD / UPDATE / DELETE / NONE; decisions are validated, and the
/// latest statement wins over a decision about an older message.
#[tokio::test]
async fn the_model_decides_on_known_facts_and_the_latest_statement_wins() {
    let update = json!({ "memory": [
        { "event": "UPDATE", "id": "F1", "object": "Berlin", "reason": "ana moved" },
        { "event": "DELETE", "id": "F9", "reason": "no such fact" },
        { "event": "SHRUG" },
    ] });
    let stale = json!({ "memory": [{ "event": "ADD", "subject": "ana", "predicate": "lives in", "object": "Madrid" }] });
    let (endpoint, script) = llm(vec![Reply::Content(update.to_string()), Reply::Content(stale.to_string())]).await;
    let d = daemon(&endpoint).await;

    say_as(&d, "ana", "I live in Lisbon.", "2026-01-05T10:00:00Z").await;
    assert_eq!(live(&d, "ana", "lives in").await, ["Lisbon"], "the hook reconciled the user's own words");
    say_as(&d, "ana", "The movers came today, it was chaos.", "2026-02-01T10:00:00Z").await;
    let r = cycle(&d).await;
    let prompt = script.requests.lock().await[0]["messages"][1]["content"].as_str().unwrap_or("").to_string();
    assert!(prompt.contains("F1: ana lives in Lisbon (since 2026-01-05)"), "{prompt}");
    assert!(prompt.contains("[2026-02-01 10:00] ana (user): The movers came today"), "{prompt}");
    let system = script.requests.lock().await[0]["messages"][0]["content"].as_str().unwrap_or("").to_string();
    assert!(system.contains("\"lives in\"") && system.contains("UPDATE"), "{system}");
    assert_eq!(r["superseded"], 1, "{r}");
    assert!(r["errors"].to_string().contains("F9"), "an unknown id is refused by name: {r}");
    assert_eq!(live(&d, "ana", "lives in").await, ["Berlin"]);

    // A message about Madrid, then ana's own newer statement: the model's decision about
    // the older message does not undo it.
    say_as(&d, "ana", "Madrid was lovely in spring.", "2026-03-01T10:00:00Z").await;
    say_as(&d, "ana", "I live in Porto now.", "2026-03-02T10:00:00Z").await;
    assert_eq!(live(&d, "ana", "lives in").await, ["Porto"]);
    let r = cycle(&d).await;
    assert_eq!(r["kept_newer"], 1, "{r}");
    assert_eq!(live(&d, "ana", "lives in").await, ["Porto"]);
    d.stop().await;
}

/// The daemon's heartbeat asks the same configured model, from its blocking pool
/// (`POST /v1/reflect/tick`): each thinking stage records `ok`, and the calls are counted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_heartbeat_uses_the_daemons_model() {
    let answer = json!({
        "summary": "The user deployed; it failed on quota.",
        "signals": ["quota"],
        "recommendedAction": { "action": "skip", "task": "", "confidence": 0.0 },
        "body": "# Playbook\n\n## Error prevention\n\n## Patterns\n- Check the quota before a deploy",
        "skip": true,
        "skipReason": "nothing new in the playbook or the last logs",
    });
    let (url, script) = llm(vec![Reply::Content(answer.to_string())]).await;
    let ws = tempfile::tempdir().expect("workspace");
    let mut c = test_config();
    c.consolidation.llm_endpoint = Some(url);
    c.workspace.dir = Some(ws.path().to_path_buf());
    let d = TestDaemon::with(c).await;
    say(&d, "deploy failed: quota exceeded").await;
    let (status, report) = d.post("/v1/reflect/tick", json!({ "idle": false })).await;
    assert_eq!(status, 200, "{report}");
    assert_eq!(report["status"], "HEARTBEAT_OK");
    for stage in ["summary", "signals", "curate"] {
        assert_eq!(report["line"]["stages"][stage]["status"], "ok", "{stage}: {}", report["line"]["stages"]);
    }
    assert_eq!(report["output"]["stage"]["status"], "ok");
    assert_eq!(report["output"]["skipReason"], "nothing new in the playbook or the last logs");
    assert_eq!(report["llm"]["calls"], 4, "{}", report["llm"]);
    assert_eq!(script.count.load(Ordering::SeqCst), 4);
    let playbook = std::fs::read_to_string(ws.path().join("memory/sinain-playbook.md")).expect("playbook");
    assert!(playbook.contains("- Check the quota before a deploy"), "{playbook}");
    let (status, text) = d.get("/v1/reflect/status").await;
    assert_eq!(status, 200);
    assert_eq!(text["model"], true);
    assert_eq!(text["llm"]["calls"], 4);
    // A second tick while none runs is fine; bad feedback is refused naming the field.
    let (status, err) = d.post("/v1/reflect/feedback", json!({ "score": 3 })).await;
    assert_eq!(status, 400, "{err}");
    assert!(err.to_string().contains("score 3: must be within -1..=1"), "{err}");
}

/// The inner life's jobs on the daemon use its model and its `[inner]` settings: an
/// evolve run asks the model, writes its proposal to QUEUE.md and refuses the file the
/// model tried to write beside it (400 for the same attempt over `/v1/inner/write`).
#[tokio::test]
async fn inner_jobs_use_the_daemons_model_and_stay_in_their_lanes() {
    let answer = json!({
        "proposals": ["Add a quota check to the deploy script"],
        "files": [{ "path": "SELF.md", "content": "evolve was here" }],
    });
    let (url, script) = llm(vec![Reply::Content(answer.to_string())]).await;
    let ws = tempfile::tempdir().expect("workspace");
    let mut c = test_config();
    c.consolidation.llm_endpoint = Some(url);
    c.workspace.dir = Some(ws.path().to_path_buf());
    let d = TestDaemon::with(c).await;
    let (status, report) = d.post("/v1/inner/run", json!({ "job": "evolve" })).await;
    assert_eq!(status, 200, "{report}");
    assert_eq!(report["status"], "ok", "{report}");
    assert_eq!(report["llm"]["calls"], 1);
    assert_eq!(script.count.load(Ordering::SeqCst), 1);
    assert_eq!(report["refused"].as_array().map(Vec::len), Some(1), "{report}");
    let queue = std::fs::read_to_string(ws.path().join("QUEUE.md")).expect("queue");
    assert!(queue.contains("- [ ] P3 Add a quota check to the deploy script"), "{queue}");
    assert!(!ws.path().join("SELF.md").exists());
    let (status, err) = d.post("/v1/inner/write", json!({ "job": "evolve", "path": "SELF.md", "content": "x" })).await;
    assert_eq!(status, 400, "{err}");
    assert!(err.to_string().contains("the evolve job may not write SELF.md"), "{err}");
    let (status, err) = d.post("/v1/inner/run", json!({ "job": "nap" })).await;
    assert_eq!(status, 400, "{err}");
    let text = d.http.get(d.url("/metrics")).send().await.expect("metrics").text().await.expect("text");
    assert!(text.lines().any(|l| l == "mneme_inner_job_refusals_24h 2"), "{text}");
}

/// The relay seed's §14 flow on a running daemon with a (scripted) model: a screen event
/// and a transcript in, the loop ticks on its own, the analysis is served, pushed to the
/// feed, counted in /health and (opted in) kept as a high-sensitivity record; the loop
/// can be disabled at run time.
#[tokio::test]
async fn the_relay_runs_the_seeds_flow_on_the_daemon() {
    let answer = "TypeError in VS Code: 'config' may be undefined. Try optional chaining.";
    let (url, script) = llm(vec![Reply::Content(answer.into())]).await;
    let mut c = test_config();
    c.consolidation.llm_endpoint = Some(url);
    c.relay.interval = mneme_core::Span::millis(200);
    c.relay.keep_analyses = true;
    let d = TestDaemon::with(c).await;
    let (status, health) = d.get("/health").await;
    assert_eq!(status, 200);
    assert_eq!((health["agent"]["analyzer"].as_str(), health["agent"]["enabled"].as_bool()), (Some("llm"), Some(true)));
    let sense = json!({ "type": "text", "ts": 1, "ocr": "function main() { throw new Error(\"null ref\") }", "meta": { "app": "VS Code", "ssim": 0.85 } });
    assert_eq!(d.post("/sense", sense).await.0, 200);
    let transcript = "[PERIODIC] (normal)\nContext (1 entries):\n[1s ago, openrouter] So the key insight with Laplace transforms is...";
    let (status, fed) = d.post("/feed", json!({ "text": transcript, "priority": "normal" })).await;
    assert_eq!((status, fed["id"].as_u64()), (200, Some(1)));
    crate::after_passes(&d.daemon.app, "relay", "the loop's first analysis", async || !d.get("/agent/last").await.1["result"].is_null())
        .await;
    let (_, last) = d.get("/agent/last").await;
    assert_eq!(last["result"]["analysis"], answer);
    assert_eq!(last["result"]["context"], json!({ "currentApp": "VS Code", "audioCount": 1, "screenCount": 1 }));
    let (_, pushed) = d.get("/feed?after=1").await;
    assert_eq!(pushed["messages"][0]["text"], format!("[🧠] {answer}"));
    assert_eq!(pushed["messages"][0]["source"], "agent");
    let (_, context) = d.get("/agent/context").await;
    assert_eq!(context["context"]["audio"][0]["text"], "So the key insight with Laplace transforms is...");
    // Idle ticks make no call: one call however long the loop runs with nothing new.
    d.daemon.app.passes.wait_for("relay", d.daemon.app.passes.count("relay") + 3).await;
    assert_eq!(script.count.load(Ordering::SeqCst), 1);
    let (_, health) = d.get("/health").await;
    assert_eq!(health["agent"]["totalCalls"], 1);
    // Opted in: the analysis is a record, high sensitivity, tagged.
    let (_, found) =
        d.post("/v1/retrieve", json!({ "query": "optional chaining", "tags": ["source:relay"], "max_sensitivity": "high" })).await;
    let hit = &found["hits"][0]["record"];
    assert_eq!(hit["sensitivity"], "high", "{found}");
    // Disabled at run time: further ticks do nothing.
    let (status, config) = d.post("/agent/config", json!({ "enabled": false })).await;
    assert_eq!((status, config["config"]["enabled"].as_bool()), (200, Some(false)));
    let (_, tick) = d.post("/agent/tick", json!({})).await;
    assert_eq!(tick["tick"]["outcome"], "disabled");
    let (status, err) = d.post("/agent/config", json!({ "intervalMs": "fast" })).await;
    assert_eq!(status, 400, "{err}");
    let (status, err) = d.get("/agent/history?limit=x").await;
    assert_eq!(status, 400, "{err}");
}

/// The model's `corrections` (membrane §11) go through the same reconciliation as its
/// facts: a correction naming a known fact gives that fact its new value (read by the
/// conversational extractor from "Dana moved to Munich"), which supersedes the old one
/// with lineage; a correction naming no known fact changes nothing and is counted.
#[tokio::test]
async fn corrections_from_the_model_supersede_the_fact_they_name() {
    let reply = json!({
        "facts": [],
        "competence": [],
        "corrections": [
            { "old_fact": "Dana lives in Berlin", "new_fact": "Dana moved to Munich", "reason": "she said she moved" },
            { "old_fact": "Dana owns a sailing boat", "new_fact": "Dana sold the boat", "reason": "no such fact" }
        ]
    });
    let (endpoint, script) = llm(vec![Reply::Content(reply.to_string())]).await;
    let d = daemon(&endpoint).await;
    let (s, v) = d.post("/v1/hooks/message_received", json!({ "content": "I live in Berlin.", "from": "Dana", "sessionId": "s" })).await;
    assert_eq!(s, 200, "{v}");
    let (s, v) = d
        .post("/v1/hooks/message_received", json!({ "content": "Big news, we packed everything up.", "from": "Dana", "sessionId": "s" }))
        .await;
    assert_eq!(s, 200, "{v}");
    let r = cycle(&d).await;
    assert_eq!(
        (r["corrections"].as_u64(), r["corrections_unmatched"].as_u64(), r["superseded"].as_u64()),
        (Some(1), Some(1), Some(1)),
        "{r}"
    );
    // The model was shown the known fact it corrected.
    let prompt = script.requests.lock().await[0]["messages"][1]["content"].as_str().unwrap_or("").to_string();
    assert!(prompt.contains("F1: Dana lives in Berlin"), "{prompt}");
    let facts = fact_objects(&d, json!({ "query": "Dana lives", "types": ["semantic"], "limit": 20, "include_tombstones": true })).await;
    assert!(facts.contains(&("Munich".into(), "active".into())), "{facts:?}");
    assert!(facts.contains(&("Berlin".into(), "superseded".into())), "{facts:?}");
    d.stop().await;
}

/// The model's skill `outcome` (membrane §11) counts: a new skill seen failing starts with
/// one failure in its statistics, and a known skill seen failing again loses salience
/// instead of being reinforced.
#[tokio::test]
async fn a_skill_the_model_saw_fail_is_counted_as_a_failure() {
    let skill = |outcome: &str| {
        let skill = json!({ "skill": "skill:db+migrate", "triggers": ["schema change"], "steps": ["run migrate"], "outcome": outcome });
        Reply::Content(json!({ "facts": [], "competence": [skill], "corrections": [] }).to_string())
    };
    let (endpoint, _script) = llm(vec![skill("failure"), skill("failure"), skill("success")]).await;
    let d = daemon(&endpoint).await;
    let record = async || {
        let (_, found) = d.post("/v1/retrieve", json!({ "types": ["competence"] })).await;
        found["hits"][0]["record"].clone()
    };
    say(&d, "the migration broke the staging database").await;
    assert_eq!(cycle(&d).await["llm_skills"], 1);
    let first = record().await;
    let performance = &first["payload"]["performance"];
    assert_eq!((performance["failure_count"].as_u64(), performance["success_count"].as_u64()), (Some(1), Some(0)), "{first}");
    say(&d, "and it broke again on the second try").await;
    cycle(&d).await;
    let second = record().await;
    assert!(second["salience"]["base"].as_f64() < first["salience"]["base"].as_f64(), "a failure penalises: {first} then {second}");
    say(&d, "third time it worked").await;
    cycle(&d).await;
    let third = record().await;
    assert!(third["salience"]["base"].as_f64() > second["salience"]["base"].as_f64(), "a success reinforces: {second} then {third}");
    d.stop().await;
}
