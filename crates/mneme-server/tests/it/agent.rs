//! The daemon's agent-side jobs: the workspace search index kept current (debounced) and
//! the scheduler's catch-up after downtime.

use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use mneme_agent::scheduler::{self, NewTask};
use mneme_service::{FileRanking, MemoryService, ServiceConfig};
use mneme_store::StoreOptions;

use crate::{TestDaemon, after_passes, skip, test_config};

fn paths(daemon: &TestDaemon, query: &str) -> Vec<String> {
    daemon
        .daemon
        .app
        .ops
        .search_files(&daemon.daemon.app.internal, query, 10, FileRanking::Lexical)
        .expect("search")
        .hits
        .into_iter()
        .map(|h| h.chunk.path)
        .collect()
}

#[tokio::test]
async fn the_daemon_reindexes_changed_and_deleted_files() {
    let ws = tempfile::tempdir().expect("workspace dir");
    std::fs::create_dir_all(ws.path().join("reference")).expect("mkdir");
    std::fs::write(ws.path().join("reference/projects.md"), "# Projects\n\n## Infra\n\nThe kubernetes migration is blocked.\n")
        .expect("write");
    std::fs::write(ws.path().join(".hidden.md"), "kubernetes in a hidden file\n").expect("write");
    let mut config = test_config();
    config.workspace.dir = Some(ws.path().to_path_buf());
    config.workspace.index = true;
    config.workspace.reindex_debounce_ms = 300;
    let daemon = TestDaemon::with(config).await;

    let app = &daemon.daemon.app;
    after_passes(app, "workspace_index", "the initial index", async || paths(&daemon, "kubernetes") == ["reference/projects.md"]).await;
    let hit = daemon
        .daemon
        .app
        .ops
        .search_files(&daemon.daemon.app.internal, "kubernetes", 1, FileRanking::Lexical)
        .expect("search")
        .hits
        .remove(0)
        .chunk;
    assert_eq!((hit.start_line, hit.end_line), (1, 5), "{hit:?}");
    assert!(hit.heading.starts_with("Projects"), "{hit:?}");
    assert!(hit.snippet.contains("[kubernetes]"), "{hit:?}");

    // An edit is picked up (after the file has been quiet for the debounce).
    std::fs::write(ws.path().join("reference/projects.md"), "# Projects\n\nPostgres upgrade done.\n").expect("edit");
    after_passes(app, "workspace_index", "the edit", async || {
        paths(&daemon, "postgres") == ["reference/projects.md"] && paths(&daemon, "kubernetes").is_empty()
    })
    .await;

    // A deleted file leaves the index.
    std::fs::remove_file(ws.path().join("reference/projects.md")).expect("delete");
    after_passes(app, "workspace_index", "the deletion", async || paths(&daemon, "postgres").is_empty()).await;
    daemon.stop().await;
}

#[tokio::test]
async fn the_daemon_runs_a_task_missed_during_downtime_once() {
    let dir = tempfile::tempdir().expect("data dir");
    let ws = tempfile::tempdir().expect("workspace dir");
    let store = StoreOptions { path: dir.path().join("mneme.db"), key: None, create: true, decay: Default::default() };
    // While "down": an hourly task added five and a half hours ago that never ran.
    let hours_ago = Timestamp::now() - SignedDuration::from_mins(330);
    {
        let service =
            MemoryService::open(store.clone(), ServiceConfig::default(), std::sync::Arc::new(mneme_core::SystemClock)).expect("store");
        let ops = mneme_service::Ops::new(std::sync::Arc::new(service), false);
        let me = mneme_service::Principal::owner("test");
        let task = NewTask {
            name: "hourly-note".into(),
            cron: None,
            every: Some("1h".into()),
            message: Some("Write the hourly note".into()),
            action: None,
            priority: 3,
            require_idle: false,
            replace: false,
        };
        scheduler::add(&ops.owner(&me).expect("owner"), task, hours_ago).expect("task added");
    }
    let mut config = test_config();
    config.workspace.dir = Some(ws.path().to_path_buf());
    config.workspace.scheduler = true;
    let daemon = mneme_server::start(mneme_server::DaemonOptions::new(config, store)).await.expect("daemon starts");
    let service = daemon.app.ops.owner(&daemon.app.internal).expect("owner");
    let runs = || service.task_runs(Some("hourly-note"), 10).expect("runs").len();
    after_passes(&daemon.app, "scheduler", "the catch-up run", async || runs() == 1).await;
    // Five missed slots, one run; and it stays one over the next pass (the next slot is an
    // hour away): Tokio's clock skips to the next tick instead of the test waiting 20 s.
    let passes = daemon.app.passes.count("scheduler");
    skip(Duration::from_secs(21)).await;
    daemon.app.passes.wait_for("scheduler", passes + 1).await;
    assert_eq!(service.task_runs(Some("hourly-note"), 10).expect("runs").len(), 1);
    let inbox = service.pending_dispatches(10).expect("inbox");
    assert_eq!(inbox.iter().filter(|d| d.task == "hourly-note").count(), 1, "{inbox:?}");
    assert_eq!(inbox.iter().find(|d| d.task == "hourly-note").map(|d| d.text.as_str()), Some("Write the hourly note"));
    daemon.stop().await;
}

#[tokio::test]
async fn hooks_keep_the_session_journals_and_the_conversation_log() {
    let ws = tempfile::tempdir().expect("workspace dir");
    let settings = mneme_workspace::WorkspaceSettings::new(ws.path(), jiff::tz::TimeZone::UTC);
    mneme_workspace::init::init(&settings, Timestamp::now()).expect("workspace init");
    let mut config = test_config();
    config.workspace.dir = Some(ws.path().to_path_buf());
    let d = TestDaemon::with(config).await;
    let ctx = serde_json::json!({ "sessionId": "s-42", "agentId": "main", "channelId": "telegram" });
    let post = |hook: &'static str, event: serde_json::Value| {
        let body = serde_json::json!({ "event": event, "ctx": ctx.clone() });
        let d = &d;
        async move {
            let (status, v) = d.post(&format!("/v1/hooks/{hook}"), body).await;
            assert_eq!(status, 200, "{hook}: {v}");
        }
    };
    post("session_start", serde_json::json!({})).await;
    post("message_received", serde_json::json!({ "content": "Deploy on Friday <private>pw 1234</private>", "from": "ada" })).await;
    post("message_sent", serde_json::json!({ "content": "Will do." })).await;
    for _ in 0..2 {
        post("before_tool_call", serde_json::json!({ "toolName": "exec" })).await;
        post("after_tool_call", serde_json::json!({ "toolName": "exec", "success": true })).await;
    }
    post("before_compaction", serde_json::json!({ "compactingMessages": [{ "role": "user", "content": "remember the Friday deploy" }] }))
        .await;
    post("agent_end", serde_json::json!({ "success": true })).await;

    let summaries = std::fs::read_to_string(ws.path().join("memory/session-summaries.jsonl")).expect("summaries");
    let line: serde_json::Value = serde_json::from_str(summaries.lines().last().expect("a line")).expect("JSON line");
    assert_eq!((line["sessionKey"].as_str(), line["agentId"].as_str()), (Some("s-42"), Some("main")), "{line}");
    assert_eq!((line["toolCallCount"].as_u64(), line["messageCount"].as_u64(), line["success"].as_bool()), (Some(2), Some(2), Some(true)));
    assert_eq!(line["toolBreakdown"]["exec"], 2);
    let commands = std::fs::read_to_string(ws.path().join("memory/commands.log")).expect("command log");
    assert!(commands.contains("\"session_start\"") && commands.contains("\"agent_end\""), "{commands}");
    let today = ws.path().join(format!("memory/{}.md", settings.today(Timestamp::now())));
    let daily = std::fs::read_to_string(today).expect("daily log");
    assert!(daily.contains("Pre-compaction flush") && daily.contains("Friday deploy"), "{daily}");

    let service = d.daemon.app.ops.owner(&d.daemon.app.internal).expect("owner");
    let log = service.sync_fetch(1, 10).expect("conversation log");
    let lines: Vec<(&str, &str)> = log.iter().map(|c| (c.direction.as_str(), c.content.as_str())).collect();
    assert_eq!(lines, [("in", "Deploy on Friday"), ("out", "Will do.")]);
    assert_eq!(log[0].channel, "telegram");
    d.stop().await;
}

#[tokio::test]
async fn the_conversation_log_and_file_search_over_http_are_for_owners_only() {
    let ws = tempfile::tempdir().expect("workspace dir");
    std::fs::write(ws.path().join("notes.md"), "# Notes\n\nThe espresso machine needs descaling.\n").expect("write");
    let mut config = test_config();
    config.workspace.dir = Some(ws.path().to_path_buf());
    config.workspace.index = true;
    config.workspace.reindex_debounce_ms = 100;
    let mut reader = crate::auth::principal("reader", "reader-key-0123456789abcdef");
    reader.read_max_sensitivity = mneme_core::Sensitivity::Low;
    config.principals = vec![crate::auth::principal("admin", "admin-key-0123456789abcdef"), reader];
    let d = TestDaemon::with(config).await;
    let admin = Some("admin-key-0123456789abcdef");
    let body = serde_json::json!({ "channel": "slack", "user_id": "ada", "content": "Ship it <private>token</private>" });
    let (status, logged) = d.post_auth("/v1/conversations", body, admin).await;
    assert_eq!(status, 200, "{logged}");
    assert_eq!((logged["id"].as_i64(), logged["content"].as_str()), (Some(1), Some("Ship it")));
    let (status, state) = d.get_auth("/v1/sync/status", admin).await;
    assert_eq!((status, state["unsummarized"].as_u64(), state["end_id"].as_i64()), (200, Some(1), Some(1)), "{state}");
    let (status, fetched) = d.post_auth("/v1/sync/fetch", serde_json::json!({ "begin": 1, "end": 1 }), admin).await;
    assert_eq!((status, fetched[0]["channel"].as_str()), (200, Some("slack")), "{fetched}");
    let (status, error) = d.post_auth("/v1/sync/checkpoint", serde_json::json!({ "end_id": 7, "summary": "s" }), admin).await;
    assert_eq!(status, 409, "{error}");
    let (status, done) = d.post_auth("/v1/sync/checkpoint", serde_json::json!({ "end_id": 1, "summary": "shipped" }), admin).await;
    assert_eq!((status, done["covered"].as_u64()), (200, Some(1)), "{done}");
    let (status, error) = d.post_auth("/v1/sync/fetch", serde_json::json!({ "begin": 1 }), admin).await;
    assert_eq!(status, 400, "{error}");

    after_passes(&d.daemon.app, "workspace_index", "the file index", async || {
        let (status, found) = d.post_auth("/v1/search/files", serde_json::json!({ "query": "descaling" }), admin).await;
        assert_eq!(status, 200, "{found}");
        found["hits"][0]["path"] == "notes.md"
    })
    .await;

    // A principal with a narrower view may not read the unlabeled log or the files.
    let reader = Some("reader-key-0123456789abcdef");
    for (path, body) in [
        ("/v1/sync/fetch", serde_json::json!({ "begin": 1, "end": 1 })),
        ("/v1/search/files", serde_json::json!({ "query": "descaling" })),
        ("/v1/conversations", serde_json::json!({ "channel": "x", "content": "y" })),
    ] {
        let (status, error) = d.post_auth(path, body, reader).await;
        assert_eq!(status, 403, "{path}: {error}");
    }
    assert_eq!(d.get_auth("/v1/sync/status", reader).await.0, 403);
    d.stop().await;
}

/// The daemon's start is the agent's: the files are deployed and BOOT.md is queued once
/// (not queued twice while undelivered); modules over HTTP with
/// each refusal's status and nothing changed; session end and the tool-result hook.
#[tokio::test]
async fn the_daemon_deploys_at_start_queues_boot_md_once_and_serves_modules() {
    let ws = tempfile::tempdir().expect("workspace dir");
    let settings = mneme_workspace::WorkspaceSettings::new(ws.path(), jiff::tz::TimeZone::UTC);
    mneme_workspace::init::init(&settings, Timestamp::now()).expect("workspace init");
    std::fs::write(ws.path().join("BOOT.md"), "Check the deploy queue first. <private>pw</private>\n").expect("boot");
    let mut config = test_config();
    config.workspace.dir = Some(ws.path().to_path_buf());
    let d = TestDaemon::with(config.clone()).await;
    assert!(ws.path().join("HEARTBEAT.md").exists() && ws.path().join("modules/module-registry.json").exists(), "deployed at start");
    let service = d.daemon.app.ops.owner(&d.daemon.app.internal).expect("owner");
    let pending = service.pending_dispatches(10).expect("dispatches");
    assert_eq!(pending.len(), 1, "{pending:?}");
    assert!(
        pending[0].text.starts_with("[BOOT.md]")
            && pending[0].text.contains("Check the deploy queue first.")
            && !pending[0].text.contains("pw")
    );
    d.stop().await;
    // A restart before delivery: still one.
    let d = TestDaemon::with(config).await;
    let service = d.daemon.app.ops.owner(&d.daemon.app.internal).expect("owner");
    assert_eq!(service.pending_dispatches(10).expect("dispatches").len(), 1);
    let commands = std::fs::read_to_string(ws.path().join("memory/commands.log")).expect("command log");
    assert_eq!(commands.matches("\"gateway_start\"").count(), 2, "{commands}");

    // Modules over HTTP.
    std::fs::create_dir_all(ws.path().join("modules/ops")).expect("dir");
    let manifest = serde_json::json!({ "id": "ops", "name": "Ops", "version": "1", "priority": { "default": 60, "range": [50, 90] }, "triggers": { "keywords": ["pager"] } });
    std::fs::write(ws.path().join("modules/ops/manifest.json"), manifest.to_string()).expect("manifest");
    std::fs::write(ws.path().join("modules/ops/patterns.md"), "- Page the on-call after 5 minutes\n").expect("patterns");
    let (status, list) = d.get("/v1/modules").await;
    assert_eq!(status, 200, "{list}");
    assert_eq!(list["unregistered"][0]["id"], "ops");
    let registry = || std::fs::read_to_string(ws.path().join("modules/module-registry.json")).expect("registry");
    let before = registry();
    for (path, body, want) in [
        ("/v1/modules/ops", serde_json::json!({ "action": "activate", "priority": 95 }), 400),
        ("/v1/modules/base-behaviors", serde_json::json!({ "action": "suspend" }), 409),
        ("/v1/modules/nope", serde_json::json!({ "action": "activate" }), 404),
        ("/v1/modules/ops", serde_json::json!({ "action": "nap" }), 400),
        ("/v1/modules/ops", serde_json::json!({ "action": "priority" }), 400),
        ("/v1/modules/Bad%20Id", serde_json::json!({ "action": "activate" }), 400),
    ] {
        let (status, answer) = d.post(path, body.clone()).await;
        assert_eq!(status, want, "{path} {body}: {answer}");
        assert!(answer["error"]["message"].as_str().is_some_and(|m| !m.is_empty()), "{answer}");
    }
    assert_eq!(registry(), before, "refusals change nothing");
    let (status, change) = d.post("/v1/modules/ops", serde_json::json!({ "action": "activate", "priority": 70 })).await;
    assert_eq!(status, 200, "{change}");
    assert_eq!(change["stack"][0], serde_json::json!({ "id": "ops", "priority": 70 }));
    let (_, info) = d.get("/v1/modules/ops").await;
    assert_eq!((info["status"].as_str(), info["patternLines"].as_u64()), (Some("active"), Some(1)));
    let (status, _) = d.get("/v1/modules/nope").await;
    assert_eq!(status, 404);

    // The next session start sees the module and is given BOOT.md, once; the tool-result
    // and session-end hooks answer.
    let (_, outcome) = d.post("/v1/hooks/session_start", serde_json::json!({ "ctx": { "sessionId": "s1" } })).await;
    let context = outcome["context"].as_str().unwrap_or_default();
    assert!(context.contains("- Page the on-call after 5 minutes"), "{context}");
    assert!(context.contains("## Instructions from mneme\n\n[BOOT.md]") && context.contains("Check the deploy queue first."), "{context}");
    let (_, again) = d.post("/v1/hooks/session_start", serde_json::json!({ "ctx": { "sessionId": "s2" } })).await;
    assert!(!again["context"].as_str().unwrap_or_default().contains("[BOOT.md]"), "delivered once");
    let (_, outcome) = d.post("/v1/hooks/tool_result_persist", serde_json::json!({ "result": "ok <private>secret</private>" })).await;
    assert_eq!(outcome["result"], "ok");
    let (_, outcome) =
        d.post("/v1/hooks/session_end", serde_json::json!({ "ctx": { "sessionId": "s1" }, "event": { "reason": "new" } })).await;
    assert_eq!(outcome["files"].as_array().map(Vec::len), Some(2), "{outcome}");
    d.stop().await;
}

/// The daemon's `session_start` gives the one block too (issue 40): the workspace's files
/// open it, with the profile of the user the session is for (`ctx.userId`, zylos §3) and
/// the primary user's when that user has none.
#[tokio::test]
async fn the_daemons_session_start_opens_with_the_files_and_the_speaking_users_profile() {
    let ws = tempfile::tempdir().expect("workspace dir");
    for (file, text) in [
        ("identity.md", "# Identity\n\nI am Pip, the team's assistant.\n"),
        ("users/owner/profile.md", "# User Profile: Owner\n\n- Prefers mornings\n"),
        ("users/dana/profile.md", "# User Profile: Dana\n\n- Likes short answers\n"),
    ] {
        let path = ws.path().join(file);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        std::fs::write(path, text).expect("write");
    }
    let mut config = test_config();
    config.workspace.dir = Some(ws.path().to_path_buf());
    let daemon = TestDaemon::with(config).await;
    let start = async |user: &str| {
        let body = serde_json::json!({ "event": {}, "ctx": { "sessionId": format!("s-{user}"), "userId": user } });
        let (status, outcome) = daemon.post("/v1/hooks/session_start", body).await;
        assert_eq!(status, 200, "{outcome}");
        outcome["context"].as_str().expect("context").to_string()
    };
    let dana = start("dana").await;
    assert!(dana.starts_with("## Identity (identity.md)\n\n### Identity\n\nI am Pip"), "{dana}");
    assert!(dana.contains("## User: dana (users/dana/profile.md)") && dana.contains("Likes short answers"), "{dana}");
    assert!(!dana.contains("Prefers mornings"), "{dana}");
    let erin = start("erin").await;
    assert!(erin.contains("## Primary user: owner (users/owner/profile.md)") && erin.contains("Prefers mornings"), "{erin}");
    daemon.stop().await;
}
