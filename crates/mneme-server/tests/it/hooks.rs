//! The agent hook pipeline end to end, the regex extractor and the context formatter.

use mneme_agent::hooks::{CompactingMessage, HookInput, summarize_messages};
use mneme_core::normalize_error;
use mneme_server::pb;
use mneme_truth::patterns::{Triple, extract};
use serde_json::{Value, json};

use crate::TestDaemon;

fn t(s: &str, p: &str, o: &str) -> Triple {
    Triple { subject: s.into(), predicate: p.into(), object: o.into() }
}

#[test]
fn extraction_english_and_german_deduplicated_and_noise_filtered() {
    let got = extract("Docker requires the sg wrapper on this host. Postgres runs on port 5432, and Redis is a cache.");
    assert!(got.contains(&t("Docker", "requires", "the sg wrapper on this host")), "{got:?}");
    assert!(got.contains(&t("Postgres", "runs on", "port 5432")), "{got:?}");
    assert!(got.contains(&t("Redis", "is", "cache")), "{got:?}");
    let de = extract("Der Server läuft auf Debian. Anna verwendet Neovim. Das Projekt hat drei Module.");
    assert!(de.contains(&t("Server", "läuft auf", "Debian")), "{de:?}");
    assert!(de.contains(&t("Anna", "verwendet", "Neovim")), "{de:?}");
    assert!(de.contains(&t("Projekt", "hat", "drei Module")), "{de:?}");
    // Pronoun subjects, stop-word objects and tiny objects are noise.
    assert!(extract("It is fine. This is good. That has it. Hello there!").is_empty());
    // ... also when the clause's final punctuation made a short object long enough.
    assert!(extract("Noted, I will use it.").is_empty(), "{:?}", extract("Noted, I will use it."));
    // Duplicates (case-insensitive) come out once.
    assert_eq!(extract("Nginx uses TLS. nginx uses tls. Nginx uses TLS.").len(), 1);
    assert!(extract("").is_empty());
}

/// The subject is a thing named after the last clause break, never a fragment of two
/// clauses, no one, or one of the speaker's people (the conversational extractor's).
#[test]
fn regex_subjects_are_whole_names_of_things() {
    let got = extract("Ngl leaving Brightwell Labs was scary but Quillmark has been great so far");
    assert_eq!(got, vec![t("Quillmark", "has", "been great so far")]);
    assert_eq!(extract("Ok so Mossgrove Games has a weird expense policy"), vec![t("Mossgrove Games", "has", "a weird expense policy")]);
    assert_eq!(extract("My laptop has 32 GB of memory"), vec![t("My laptop", "has", "32 GB of memory")]);
    assert_eq!(extract("Remember that the deploy is on Friday"), vec![t("deploy", "is", "on Friday")]);
    for nothing in [
        "Someone on my team is principal engineer at some bank",
        "My flatmate has gone full dairy-free and won't shut up about it",
        "Yesterday was long and nobody has time",
    ] {
        assert!(extract(nothing).is_empty(), "{nothing:?}: {:?}", extract(nothing));
    }
}

#[test]
fn hook_input_accepts_nested_and_flat_shapes() {
    let nested = HookInput::from_json(
        json!({ "event": { "content": "hi", "toolName": "exec" }, "ctx": { "sessionId": "s1", "channelId": "dm:1" } }),
    )
    .expect("nested");
    let flat =
        HookInput::from_json(json!({ "content": "hi", "tool_name": "exec", "session_id": "s1", "channelId": "dm:1" })).expect("flat");
    assert_eq!(nested, flat);
    assert_eq!(nested.ctx.session(), "s1");
    assert!(HookInput::from_json(json!([1, 2])).is_err());
    assert!(HookInput::from_json(json!({ "event": { "success": "yes" } })).is_err());
}

#[test]
fn compaction_summary_and_failure_modes() {
    let msgs: Vec<CompactingMessage> = (0..20)
        .map(|i| CompactingMessage {
            role: if i % 2 == 0 { "user" } else { "assistant" }.into(),
            content: format!("{i} {}", "x".repeat(300)),
            timestamp: None,
        })
        .collect();
    let s = summarize_messages(&msgs, 15, 200);
    assert_eq!(s.lines().count(), 15);
    assert!(s.starts_with("[A] 5 ") && s.lines().all(|l| l.chars().count() <= 4 + 200 + 3), "{s}");
    assert_eq!(summarize_messages(&[], 15, 200), "(no messages)");
    assert_eq!(normalize_error("ENOENT: /home/a/x.txt missing"), normalize_error("ENOENT: /tmp/y missing"));
    assert_eq!(
        normalize_error("connect 127.0.0.1:8080 refused at 2026-01-01T10:00:00Z"),
        normalize_error("connect 127.0.0.1:9090 refused at 2026-02-03T11:12:13Z")
    );
    assert_ne!(normalize_error("timeout"), normalize_error("permission denied"));
}

async fn hook(d: &TestDaemon, name: &str, body: Value) -> Value {
    let (s, v) = d.post(&format!("/v1/hooks/{name}"), body).await;
    assert_eq!(s, 200, "{name}: {v}");
    assert!(v.get("error").is_none(), "{name}: {v}");
    v
}

async fn records(d: &TestDaemon, kind: &str, tags: &[&str]) -> Vec<Value> {
    let (_, r) = d.post("/v1/retrieve", json!({ "types": [kind], "tags": tags, "limit": 100, "max_sensitivity": "critical" })).await;
    r["hits"].as_array().expect("hits").iter().map(|h| h["record"].clone()).collect()
}

#[tokio::test]
async fn full_hook_pipeline() {
    let d = TestDaemon::start().await;
    let ctx = json!({ "sessionId": "sess-1", "agentId": "atlas", "channelId": "dm:howard" });
    // A first session start on an empty store injects nothing.
    let start = hook(&d, "session_start", json!({ "ctx": ctx })).await;
    assert_eq!(start["context"], "");

    hook(
        &d,
        "message_received",
        json!({ "event": { "content": "Docker requires the sg wrapper on this host.", "from": "howard" }, "ctx": ctx }),
    )
    .await;
    hook(&d, "message_sent", json!({ "event": { "content": "Noted. Postgres runs on port 5432." }, "ctx": ctx })).await;
    let messages = records(&d, "episodic", &["source:hooks"]).await;
    assert_eq!(messages.len(), 2);
    let user = messages.iter().find(|m| m["payload"]["event_kind"] == "user_message").expect("user message");
    assert_eq!((user["payload"]["sender"].as_str(), user["payload"]["ref"].as_str()), (Some("howard"), Some("sess-1")));
    assert_eq!(user["sensitivity"], "medium", "direct-message channels are medium");
    let facts = records(&d, "semantic", &["extraction:regex"]).await;
    let triples: Vec<(String, String, String)> = facts
        .iter()
        .map(|f| {
            (
                f["payload"]["subject"].as_str().unwrap_or("").into(),
                f["payload"]["predicate"].as_str().unwrap_or("").into(),
                f["payload"]["object"].as_str().unwrap_or("").into(),
            )
        })
        .collect();
    assert!(triples.contains(&("Docker".into(), "requires".into(), "the sg wrapper on this host".into())), "{triples:?}");
    // The assistant's own words are never stored as facts.
    assert!(!triples.iter().any(|t| t.0 == "Postgres"), "{triples:?}");
    // The same statement again is not stored twice.
    hook(&d, "message_received", json!({ "event": { "content": "Docker requires the sg wrapper on this host." }, "ctx": ctx })).await;
    assert_eq!(records(&d, "semantic", &["extraction:regex"]).await.len(), facts.len());

    // Five calls of one tool: three succeed, two fail (one over gRPC).
    let mut grpc = d.hooks().await;
    for (i, ok) in [true, false, true, true, false].into_iter().enumerate() {
        let session = json!({ "sessionId": "sess-1" });
        hook(&d, "before_tool_call", json!({ "event": { "toolName": "exec", "params": { "cmd": "ls", "i": i } }, "ctx": session })).await;
        if i == 4 {
            let r = grpc
                .after_tool_call(pb::ToolResultEvent {
                    ctx: Some(pb::HookContext { session_id: "sess-1".into(), ..Default::default() }),
                    tool_name: "exec".into(),
                    success: Some(false),
                    error: "ENOENT: /tmp/nope missing".into(),
                    duration_ms: None,
                })
                .await
                .expect("gRPC hook")
                .into_inner();
            assert!(r.error.is_empty(), "{}", r.error);
        } else {
            let event = if ok {
                json!({ "toolName": "exec", "success": true })
            } else {
                json!({ "toolName": "exec", "error": "ENOENT: /home/x missing" })
            };
            hook(&d, "after_tool_call", json!({ "event": event, "ctx": session })).await;
        }
    }
    let calls = records(&d, "episodic", &["tracking:competence", "tool:exec"]).await;
    assert_eq!(calls.len(), 5);
    // Each call keeps the parameters it began with, also when its result came over gRPC
    // (whose ToolResultEvent carries none).
    let mut args: Vec<i64> = calls.iter().filter_map(|c| c["payload"]["args"]["i"].as_i64()).collect();
    args.sort();
    assert_eq!(args, vec![0, 1, 2, 3, 4], "{calls:?}");
    let grpc_call = calls.iter().find(|c| c["payload"]["error"] == "ENOENT: /tmp/nope missing").expect("the gRPC call");
    assert_eq!(grpc_call["payload"]["args"], json!({ "cmd": "ls", "i": 4 }));
    let skills = records(&d, "competence", &["source:competence-tracker", "tool:exec"]).await;
    assert_eq!(skills.len(), 1, "one live competence record");
    let perf = &skills[0]["payload"]["performance"];
    assert_eq!((perf["success_count"].as_u64(), perf["failure_count"].as_u64()), (Some(3), Some(2)), "{perf}");
    assert_eq!(perf["failure_modes"].as_object().map(|m| m.len()), Some(1), "both ENOENT errors are one failure mode: {perf}");
    assert_eq!(skills[0]["payload"]["skill"], "skill:exec");
    // Created at the third call; the fourth and fifth are counted in place (no tombstone
    // per call), each with an `outcome` audit entry naming the call's outcome record.
    let (_, h) = d.get(&format!("/v1/records/{}/history", skills[0]["id"].as_str().expect("id"))).await;
    assert_eq!(h["ancestors"].as_array().map(Vec::len), Some(0), "{h}");
    let audit = |h: &Value| -> Vec<(String, String)> {
        h["audit"]
            .as_array()
            .expect("audit")
            .iter()
            .map(|e| (e["action"].as_str().unwrap_or("").into(), e["rationale"].as_str().unwrap_or("").into()))
            .collect()
    };
    let entries = audit(&h);
    assert_eq!(entries.iter().filter(|(a, _)| a == "outcome").count(), 2, "{h}");
    // The fourth call succeeded and the fifth failed: reinforced, then penalised.
    assert!(entries.iter().any(|(a, r)| a == "reinforce" && r.contains("tool call succeeded: exec")), "{h}");
    assert!(entries.iter().any(|(a, r)| a == "penalize" && r.contains("tool call failed: exec")), "{h}");
    // One outcome record per call, linked to that call (membrane §12).
    let outcomes = records(&d, "episodic", &["outcome:tool_call", "tool:exec"]).await;
    assert_eq!(outcomes.len(), 5, "{outcomes:?}");
    for call in &calls {
        let (_, ch) = d.get(&format!("/v1/records/{}/history", call["id"].as_str().expect("id"))).await;
        let links = ch["links"].as_array().expect("links");
        assert_eq!(links.iter().filter(|l| l["kind"] == "outcome_of").count(), 1, "{ch}");
    }

    // Compaction snapshot.
    let msgs: Vec<Value> =
        (0..20).map(|i| json!({ "role": if i % 2 == 0 { "user" } else { "assistant" }, "content": format!("message {i}") })).collect();
    hook(&d, "before_compaction", json!({ "event": { "compactingMessages": msgs, "compactingCount": 20 }, "ctx": ctx })).await;
    let working = records(&d, "working", &["trigger:compaction"]).await;
    assert_eq!(working.len(), 1);
    assert_eq!(working[0]["payload"]["state"].as_str().map(|s| s.lines().count()), Some(15));
    assert!(working[0]["summary"].as_str().unwrap_or("").contains("20 messages"));

    // A new session now gets the context block, grouped by type.
    let start = hook(&d, "session_start", json!({ "ctx": { "sessionId": "sess-2" } })).await;
    let context = start["context"].as_str().expect("context");
    // Facts first, as sentences when they are about things; then the other memories.
    assert!(context.starts_with("## What is true now"), "{context}");
    assert!(context.contains("### Known facts\n- Docker requires the sg wrapper on this host"), "{context}");
    assert!(context.contains("## mneme Memory Context"), "{context}");
    assert!(context.contains("### Competence / Skills") && context.contains("skill:exec — 3/5 success"), "{context}");
    assert!(context.contains("### Working State"), "{context}");
    let injected = start["record_ids"].as_array().expect("ids").len();
    // The fact, the skill and the snapshot (the assistant's "Postgres runs on…" is no fact).
    assert!(injected >= 3, "{start}");
    let json_ctx = hook(&d, "session_start", json!({ "event": { "format": "json" }, "ctx": { "sessionId": "sess-2" } })).await;
    // The JSON format is an object in the answer, not a string holding JSON.
    let parsed = json_ctx["context"].clone();
    assert!(parsed.is_object(), "{json_ctx}");
    assert!(parsed["semantic"].as_array().is_some_and(|a| !a.is_empty()));

    // A successful end reinforces what was injected; gateway_stop flushes consolidation.
    let fact_id = facts[0]["id"].as_str().expect("id").to_string();
    let before = d.get(&format!("/v1/records/{fact_id}")).await.1["current_salience"].as_f64().expect("salience");
    hook(&d, "agent_end", json!({ "event": { "success": true }, "ctx": { "sessionId": "sess-2" } })).await;
    let after = d.get(&format!("/v1/records/{fact_id}")).await.1["current_salience"].as_f64().expect("salience");
    assert!(after > before || after >= 0.999, "{before} -> {after}");
    hook(&d, "gateway_stop", json!({})).await;
    // The flush runs in the background; the hook has already answered.
    crate::after_passes(&d.daemon.app, "consolidation", "the flush", async || {
        let (_, status) = d.get("/v1/status").await;
        status["last_consolidation"]["messages"] == 3 && status["consolidation_buffered"] == 0
    })
    .await;
    d.stop().await;
}

#[tokio::test]
async fn failing_hooks_do_not_fail_the_caller() {
    let d = TestDaemon::start().await;
    // Missing tool name: reported, status 200.
    let (s, v) = d.post("/v1/hooks/after_tool_call", json!({ "event": {} })).await;
    assert_eq!(s, 200);
    assert!(v["error"].as_str().unwrap_or("").contains("toolName"), "{v}");
    // A bad timestamp is reported too, and nothing is written.
    let (s, v) = d.post("/v1/hooks/message_received", json!({ "content": "Alpha is beta.", "timestamp": "yesterday" })).await;
    assert_eq!(s, 200);
    assert!(v["error"].as_str().is_some(), "{v}");
    assert_eq!(d.total_records().await, 0);
    // Empty messages are ignored quietly.
    let (s, v) = d.post("/v1/hooks/message_received", json!({})).await;
    assert_eq!((s, v["record_ids"].as_array().map(Vec::len)), (200, Some(0)));
    // A body that is not JSON, or not an object, fails the hook, not the caller.
    for body in ["{not json", "[1, 2]"] {
        let response = d
            .http
            .post(d.url("/v1/hooks/message_received"))
            .header("content-type", "application/json")
            .body(body)
            .send()
            .await
            .expect("request");
        assert_eq!(response.status().as_u16(), 200, "{body}");
        let v: Value = response.json().await.expect("json");
        assert!(v["error"].as_str().is_some_and(|e| e.starts_with("invalid request body: ")), "{body}: {v}");
    }
    // Over gRPC too: an unknown context format is reported in `error` with status OK.
    let r = d
        .hooks()
        .await
        .session_start(pb::SessionStartRequest { format: "yaml".into(), ..Default::default() })
        .await
        .expect("status OK")
        .into_inner();
    assert!(r.error.contains("yaml") && r.context.is_empty(), "{r:?}");
    assert_eq!(d.total_records().await, 0);
    // The failures show in the daemon's status: 2 reported above, 2 bodies, 1 format.
    let (_, status) = d.get("/v1/status").await;
    assert_eq!(status["errors_last_hour"], 5, "{status}");
    d.stop().await;
}

#[tokio::test]
async fn every_hook_over_grpc() {
    let mut c = crate::test_config();
    c.consolidation.interval = mneme_core::Span::millis(150);
    let d = TestDaemon::with(c).await;
    let mut g = d.hooks().await;
    let ctx = || Some(pb::HookContext { session_id: "g-1".into(), channel_id: "dm:ada".into(), ..Default::default() });
    let message = |content: &str| pb::MessageEvent { ctx: ctx(), content: content.into(), from: "ada".into(), ..Default::default() };

    let start = g.session_start(pb::SessionStartRequest { ctx: ctx(), ..Default::default() }).await.expect("SessionStart").into_inner();
    assert!(start.error.is_empty() && start.context.is_empty(), "{start:?}");
    let ack = g.message_received(message("Redis runs on port 6379.")).await.expect("MessageReceived").into_inner();
    assert!(ack.error.is_empty() && ack.record_ids.len() == 2, "the message and its fact: {ack:?}");
    let ack = g.message_sent(message("Noted, I will use it.")).await.expect("MessageSent").into_inner();
    assert!(ack.error.is_empty() && ack.record_ids.len() == 1, "{ack:?}");
    let params = prost_types::Struct {
        fields: [("cmd".to_string(), prost_types::Value { kind: Some(prost_types::value::Kind::StringValue("redis-cli ping".into())) })]
            .into_iter()
            .collect(),
    };
    let ack = g
        .before_tool_call(pb::ToolCallEvent { ctx: ctx(), tool_name: "exec".into(), params: Some(params) })
        .await
        .expect("BeforeToolCall")
        .into_inner();
    assert!(ack.error.is_empty(), "{ack:?}");
    let ack = g
        .after_tool_call(pb::ToolResultEvent { ctx: ctx(), tool_name: "exec".into(), success: Some(true), ..Default::default() })
        .await
        .expect("AfterToolCall")
        .into_inner();
    // The call's tool record and its outcome record.
    assert!(ack.error.is_empty() && ack.record_ids.len() == 2, "{ack:?}");
    let call = records(&d, "episodic", &["tracking:competence"]).await;
    assert_eq!(call[0]["payload"]["args"], json!({ "cmd": "redis-cli ping" }));
    let messages =
        (0..3).map(|i| pb::CompactingMessage { role: "user".into(), content: format!("step {i}"), timestamp: String::new() }).collect();
    let ack = g
        .before_compaction(pb::CompactionEvent { ctx: ctx(), messages, compacting_count: Some(3) })
        .await
        .expect("BeforeCompaction")
        .into_inner();
    assert!(ack.error.is_empty() && ack.record_ids.len() == 1, "{ack:?}");
    let ack = g
        .agent_end(pb::AgentEndEvent { ctx: ctx(), success: Some(false), error: "the user cancelled".into() })
        .await
        .expect("AgentEnd")
        .into_inner();
    assert!(ack.error.is_empty(), "{ack:?}");
    let ack = g.gateway_stop(pb::AgentEndEvent { ctx: ctx(), ..Default::default() }).await.expect("GatewayStop").into_inner();
    assert!(ack.error.is_empty(), "{ack:?}");
    assert_eq!(records(&d, "working", &["trigger:compaction"]).await.len(), 1);

    // Consolidation also runs on its own timer (150 ms here): a message said now is
    // consolidated without any flush hook or explicit request.
    let ack = g.message_received(message("Kafka runs on port 9092.")).await.expect("MessageReceived").into_inner();
    let fact = ack.record_ids.get(1).expect("the regex fact").clone();
    // The cycle confirms (reinforces) the fact stored when the message arrived.
    crate::after_passes(&d.daemon.app, "consolidation", "the timer's cycle", async || {
        let (_, h) = d.get(&format!("/v1/records/{fact}/history")).await;
        h["audit"].as_array().is_some_and(|audit| audit.iter().any(|e| e["actor"] == "mneme:consolidator"))
    })
    .await;
    d.stop().await;
}

#[tokio::test]
async fn session_start_ranks_what_names_the_agent_or_channel_first() {
    let mut c = crate::test_config();
    c.hooks.session_start.max_records = 1;
    let d = TestDaemon::with(c).await;
    for (subject, object) in [("Postgres", "port 5432"), ("Redis", "port 6379"), ("Borg", "the nightly backup")] {
        let fact = json!({ "fact": { "subject": subject, "predicate": "uses", "object": object } });
        assert_eq!(d.post("/v1/ingest/observation", fact).await.0, 200);
    }
    let atlas = json!({ "fact": { "subject": "Atlas", "predicate": "prefers", "object": "small diffs" } });
    assert_eq!(d.post("/v1/ingest/observation", atlas).await.0, 200);
    for (ctx, want) in
        [(json!({ "agentId": "atlas", "sessionId": "a" }), "Atlas"), (json!({ "channelId": "borg", "sessionId": "b" }), "Borg")]
    {
        let start = hook(&d, "session_start", json!({ "event": { "format": "json" }, "ctx": ctx })).await;
        let context = start["context"].clone();
        assert_eq!(context["semantic"].as_array().map(Vec::len), Some(1), "{context}");
        assert!(context["semantic"][0].to_string().contains(want), "{ctx}: {context}");
    }
    d.stop().await;
}

/// Hosts that cannot inject context get the block in the workspace's
/// `memory/membrane/context.md` (membrane §8), by request or by configuration; only for
/// the owner's principal, and only in the configured workspace.
#[tokio::test]
async fn session_start_can_write_the_block_to_the_context_file() {
    let ws = tempfile::tempdir().expect("workspace");
    let mut c = crate::test_config();
    c.workspace.dir = Some(ws.path().to_path_buf());
    let d = TestDaemon::with(c).await;
    let file = ws.path().join("memory/membrane/context.md");
    let fact = json!({ "fact": { "subject": "Gitea", "predicate": "runs on", "object": "port 3000" } });
    assert_eq!(d.post("/v1/ingest/observation", fact).await.0, 200);

    let plain = hook(&d, "session_start", json!({ "ctx": { "sessionId": "a" } })).await;
    assert!(!file.exists(), "written without being asked");
    let asked = hook(&d, "session_start", json!({ "event": { "writeContextFile": true }, "ctx": { "sessionId": "b" } })).await;
    let written = std::fs::read_to_string(&file).expect("the context file");
    assert_eq!(asked["context"].as_str(), Some(written.as_str()));
    assert_eq!(plain["context"], asked["context"]);
    assert!(written.contains("Gitea"), "{written}");
    d.stop().await;

    // By configuration; a narrowed principal is told why, and the file is untouched.
    let mut c = crate::test_config();
    c.workspace.dir = Some(ws.path().to_path_buf());
    c.hooks.session_start.context_file = true;
    let mut reader = crate::auth::principal("reader", "reader-key-0123456789abcdef");
    reader.read_max_sensitivity = mneme_core::Sensitivity::Low;
    c.principals = vec![crate::auth::principal("admin", "admin-key-0123456789abcdef"), reader];
    let d = TestDaemon::with(c).await;
    std::fs::remove_file(&file).expect("remove");
    let (s, v) = d.post_auth("/v1/hooks/session_start", json!({ "ctx": { "sessionId": "c" } }), Some("reader-key-0123456789abcdef")).await;
    assert_eq!(s, 200, "{v}");
    assert!(v["error"].as_str().is_some_and(|e| e.contains("context file")), "{v}");
    assert!(!file.exists());
    let (s, v) = d.post_auth("/v1/hooks/session_start", json!({ "ctx": { "sessionId": "d" } }), Some("admin-key-0123456789abcdef")).await;
    assert_eq!((s, v.get("error")), (200, None), "{v}");
    assert!(file.exists(), "configured, but not written");
    d.stop().await;
}

/// A hook that fails on the disk says why without the server's paths (they go to the
/// daemon's log): here the daily log's name is taken by a directory.
#[tokio::test]
async fn a_hook_error_names_no_server_path() {
    let ws = tempfile::tempdir().expect("workspace");
    std::fs::create_dir_all(ws.path().join("memory")).expect("memory dir");
    let today = jiff::Timestamp::now().to_zoned(jiff::tz::TimeZone::UTC).date();
    std::fs::create_dir_all(ws.path().join(format!("memory/{today}.md"))).expect("a directory in the daily log's place");
    let mut config = crate::test_config();
    config.workspace.dir = Some(ws.path().to_path_buf());
    config.workspace.timezone = Some("UTC".into());
    let d = TestDaemon::with(config).await;
    let messages = json!([{ "role": "user", "content": "hello" }]);
    let (status, out) =
        d.post("/v1/hooks/session_end", json!({ "event": { "compactingMessages": messages }, "ctx": { "sessionId": "s1" } })).await;
    assert_eq!(status, 200, "a hook never fails its caller: {out}");
    let error = out["error"].as_str().unwrap_or_else(|| panic!("the hook failed: {out}"));
    assert!(error.contains(&format!("{today}.md")), "the file is named: {error}");
    assert!(!error.contains(&ws.path().display().to_string()), "no server path: {error}");
    d.stop().await;
}

/// A user message that starts the agent's turn (`event.recall`) is answered with the
/// memories relevant to it, found before it is stored (never itself), and is then stored
/// like any message; a request to forget recalls nothing; gRPC's `HookAck.context` says
/// the same.
#[tokio::test]
async fn a_message_that_starts_a_turn_is_answered_with_its_memories() {
    let d = TestDaemon::start().await;
    let ctx = json!({ "sessionId": "t-1", "channelId": "cli", "userId": "ada" });
    hook(&d, "message_received", json!({ "event": { "content": "Redis runs on port 6379." }, "ctx": ctx })).await;
    let plain = hook(&d, "message_received", json!({ "event": { "content": "Which port does Redis use?" }, "ctx": ctx })).await;
    assert!(plain.get("context").is_none(), "without recall, no memories: {plain}");

    let turn = json!({ "event": { "content": "What port is Redis on again?", "recall": true }, "ctx": ctx });
    let out = hook(&d, "message_received", turn.clone()).await;
    let context = out["context"].as_str().unwrap_or_default();
    assert!(context.starts_with("## Relevant memories") && context.contains("6379"), "{out}");
    assert!(!context.contains("again?"), "the message is not its own memory: {out}");
    let mut stored = Vec::new();
    for id in out["record_ids"].as_array().expect("ids") {
        let (_, r) = d.get(&format!("/v1/records/{}", id.as_str().expect("id"))).await;
        stored.push(r["record"]["payload"]["text"].as_str().unwrap_or_default().to_string());
    }
    assert!(stored.iter().any(|t| t == "What port is Redis on again?"), "and it is stored: {out} {stored:?}");
    let again = hook(&d, "message_received", turn).await;
    assert!(!again["context"].as_str().unwrap_or_default().contains("again?"), "not even once stored: {again} {stored:?}");

    let forget = json!({ "event": { "content": "Please forget everything you know about Redis", "recall": true }, "ctx": ctx });
    let out = hook(&d, "message_received", forget).await;
    assert!(out.get("context").is_none() && out.get("forgotten").is_some(), "{out}");

    let mut g = d.hooks().await;
    hook(&d, "message_received", json!({ "event": { "content": "Kafka runs on port 9092." }, "ctx": ctx })).await;
    let pb_ctx = Some(pb::HookContext { session_id: "t-2".into(), channel_id: "cli".into(), user_id: "ada".into(), ..Default::default() });
    let message =
        |content: &str, recall: bool| pb::MessageEvent { ctx: pb_ctx.clone(), content: content.into(), recall, ..Default::default() };
    let ack = g.message_received(message("Which port is Kafka on?", true)).await.expect("MessageReceived").into_inner();
    assert!(ack.error.is_empty() && ack.context.contains("9092") && ack.record_ids.len() == 1, "{ack:?}");
    let ack = g.message_received(message("And Kafka's host?", false)).await.expect("MessageReceived").into_inner();
    assert!(ack.context.is_empty(), "{ack:?}");
    d.stop().await;
}
