//! Pinned HTTP responses: one successful call per route of the router (`src/http.rs`), each
//! JSON body compared with `tests/fixtures/http/<operationId>.json` and checked against its
//! response schema in the OpenAPI document. Clients read exactly these shapes, so renaming,
//! dropping or adding a field anywhere in what a route answers (a field of a core type
//! included) fails here instead of breaking them. `/metrics` (text) and `/openapi.json`
//! (the document itself) are checked for status and content type only.
//!
//! The daemon runs on a `FixedClock` that moves one minute before every call, with
//! lexical-only retrieval, so timestamps, salience, scores and ranking are reproducible.
//! What still varies from run to run becomes a placeholder before comparing; every key and
//! the structure stay. By key: `pid`, `grpc_addr`, `http_addr`, `uptime_seconds`,
//! `store_id`, `file_bytes`, and `schema_version` (checked to be the store's first). By
//! pattern: the ids this test created are named after the call that created them
//! (`<id:supersede>`), any other UUID becomes `<id>`, the temporary directories `<dir>` and
//! `<workspace>`, loopback ports `<port>`. Fractional numbers are compared to ten
//! decimals. A missing fixture is written instead of compared; after an intended change
//! to a response, regenerate them all and review the diff:
//! `MNEME_BLESS=1 cargo test -p mneme-server --test it golden`.
//!
//! The schema check (`conform`) is a small checker over the JSON-Schema subset the
//! document uses; a keyword it does not know is a failure, never skipped.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Instant;

use jiff::{SignedDuration, Timestamp};
use mneme_core::FixedClock;
use mneme_server::op::Operation;
use mneme_store::StoreOptions;
use serde_json::{Value, json};

use crate::{TestDaemon, test_config};

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/http");

/// Keys whose values differ between runs, and what they become.
const VARYING_KEYS: [(&str, &str); 8] = [
    ("durationMs", "<ms>"),
    ("latencyMs", "<ms>"),
    ("pid", "<pid>"),
    ("grpc_addr", "<addr>"),
    ("http_addr", "<addr>"),
    ("uptime_seconds", "<uptime>"),
    ("store_id", "<store_id>"),
    ("file_bytes", "<bytes>"),
];

#[tokio::test]
async fn every_route_answers_its_pinned_json_and_its_openapi_schema() {
    let started = Instant::now();
    let mut g = Golden::start().await;

    // ---- unauthenticated and non-JSON routes ------------------------------------------
    g.get("Healthz", "/healthz").await;
    let (status, content_type, text) = g.send("GET", "/openapi.json", None).await;
    assert_eq!((status, content_type.as_str()), (200, "application/json"), "/openapi.json");
    let served: Value = serde_json::from_str(&text).expect("/openapi.json is JSON");
    assert_eq!(served, mneme_server::openapi::document(), "/openapi.json serves the document");
    g.covered.insert("OpenApi".into());
    let (status, content_type, page) = g.send("GET", "/", None).await;
    assert_eq!((status, content_type.as_str()), (200, "text/html; charset=utf-8"), "/");
    assert!(page.contains("<title>mneme console</title>") && !page.contains("http://") && !page.contains("https://"), "no CDN");
    g.covered.insert("Console".into());

    // ---- ingest ------------------------------------------------------------------------
    let event = json!({
        "options": {
            "tags": ["golden", "move"], "scope": "project:mneme", "sensitivity": "low", "actor": "golden-test", "rationale": "pinned"
        },
        "event": {
            "event_kind": "message", "ref": "msg-42", "sender": "howard", "text": "Howard moved to Hamburg last week",
            "event_time": "2026-11-21T18:30:00Z"
        }
    });
    let event = g.create("event", "IngestEvent", "/v1/ingest/event", event).await;
    let output = json!({
        "output": {
            "tool": "exec", "args": { "cmd": "docker ps", "timeout": 30 }, "result": { "exit": 1, "stdout": "" },
            "error": "permission denied", "duration_ms": 120
        }
    });
    let tool = g.create("tool_output", "IngestToolOutput", "/v1/ingest/tool_output", output).await;
    let fact = json!({
        "options": { "confidence": 0.9 },
        "fact": {
            "subject": "Howard", "predicate": "lives in", "object": "Hamburg", "valid_from": "2026-11-01T00:00:00Z", "evidence": ["msg-42"]
        }
    });
    let fact = g.create("observation", "IngestObservation", "/v1/ingest/observation", fact).await;
    let state = json!({
        "options": { "pinned": true },
        "state": {
            "thread_id": "t-7", "state": "half way through the migration", "next_actions": ["run the tests"],
            "open_questions": ["keep the old table?"], "summary": "migrating the store"
        }
    });
    let working = g.create("working_state", "IngestWorkingState", "/v1/ingest/working_state", state).await;
    let outcome = json!({
        "target_id": tool, "outcome": "failure", "duration_ms": 95, "failure_mode": "permission denied", "note": "needs sg docker"
    });
    g.create("outcome", "IngestOutcome", "/v1/ingest/outcome", outcome).await;

    // ---- reads -------------------------------------------------------------------------
    g.post("Retrieve", "/v1/retrieve", json!({ "query": "Hamburg", "limit": 5 })).await;
    g.get("RetrieveById", &format!("/v1/records/{event}")).await;

    // ---- revisions -----------------------------------------------------------------------
    let who = |rationale: &str| json!({ "actor": "golden-test", "rationale": rationale });
    let berlin = json!({
        "change": {
            "payload": { "kind": "semantic", "subject": "Howard", "predicate": "lives in", "object": "Berlin" },
            "summary": "Howard lives in Berlin"
        },
        "actor": "golden-test", "rationale": "he moved again"
    });
    let moved = g.create("supersede", "Supersede", &format!("/v1/records/{fact}/supersede"), berlin).await;
    let other_way = json!({
        "change": { "summary": "migrating the store, the other way", "tags": ["alternative"] },
        "actor": "golden-test", "rationale": "try both"
    });
    let variant = g.create("fork", "Fork", &format!("/v1/records/{working}/fork"), other_way).await;
    g.post("Retract", &format!("/v1/records/{variant}/retract"), who("the other way was wrong")).await;
    let claim = json!({ "claim": "the migration is finished", "actor": "golden-test", "rationale": "a later message disagrees" });
    g.post("Contest", &format!("/v1/records/{working}/contest"), claim).await;
    let adjust = |amount: f64, rationale: &str| json!({ "amount": amount, "actor": "golden-test", "rationale": rationale });
    g.post("Reinforce", &format!("/v1/records/{moved}/reinforce"), adjust(0.2, "confirmed")).await;
    g.post("Penalize", &format!("/v1/records/{tool}/penalize"), adjust(0.1, "flaky")).await;
    let mut parts = Vec::new();
    for (object, name) in [("descaling", "merge_part_1"), ("descaling every month", "merge_part_2")] {
        let body = json!({ "fact": { "subject": "the kettle", "predicate": "needs", "object": object } });
        let (status, _, answer) = g.send("POST", "/v1/ingest/observation", Some(body)).await;
        assert_eq!(status, 200, "{answer}");
        let answer: Value = serde_json::from_str(&answer).expect("JSON");
        parts.push(g.name(&answer["record"]["id"], name));
    }
    let merge = json!({
        "ids": parts, "change": { "summary": "the kettle needs descaling every month" },
        "actor": "golden-test", "rationale": "one note"
    });
    g.create("merge", "Merge", "/v1/merge", merge).await;
    g.get("History", &format!("/v1/records/{fact}/history")).await;
    g.get("SalienceCurve", &format!("/v1/records/{fact}/salience?days=30")).await;

    // ---- the agent's side: hooks, conversation log, sync, file search ------------------
    let message = json!({
        "event": { "content": "Postgres runs on port 5432. Remember that the deploy is on Friday.", "from": "ada" },
        "ctx": { "sessionId": "s-42", "agentId": "main", "channelId": "telegram" }
    });
    g.post("Hook", "/v1/hooks/message_received", message).await;
    let line = json!({ "channel": "telegram", "user_id": "ada", "direction": "in", "priority": 2, "content": "Deploy on Friday" });
    g.post("LogConversation", "/v1/conversations", line).await;
    let sync = g.get("SyncStatus", "/v1/sync/status").await;
    let end = sync["end_id"].as_i64().expect("end_id");
    g.post("SyncFetch", "/v1/sync/fetch", json!({ "begin": 1, "end": end })).await;
    g.post("SyncCheckpoint", "/v1/sync/checkpoint", json!({ "end_id": end, "summary": "Ada: deploy on Friday." })).await;
    g.post("SearchFiles", "/v1/search/files", json!({ "query": "kubernetes", "limit": 3 })).await;
    // The plan of a forget (a dry run: the other answers stay as they are).
    g.post("Forget", "/v1/forget", json!({ "ids": [event.to_string()], "dry_run": true })).await;

    // ---- the reflection heartbeat (offline: every thinking stage falls back) -----------
    g.post("ReflectTick", "/v1/reflect/tick", json!({ "idle": false })).await;
    // The heartbeat output the feedback scores.
    let logs = g.workspace.path().join("memory/playbook-logs");
    std::fs::create_dir_all(&logs).expect("mkdir");
    let output = json!({ "kind": "output", "ts": "2026-11-22T08:00:00Z", "outputId": "t-golden-tip", "suggestion": "Check the storage class first" });
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(logs.join("2026-11-22.jsonl"))
        .and_then(|mut f| std::io::Write::write_all(&mut f, format!("{output}\n").as_bytes()))
        .expect("heartbeat log");
    g.post("ReflectFeedback", "/v1/reflect/feedback", json!({ "outputId": "t-golden-tip", "score": 0.5, "errorCleared": true })).await;
    g.post("ReflectSpawnResult", "/v1/reflect/spawn-result", json!({ "spawnId": "t-golden-spawn", "outcome": "useful" })).await;
    g.get("ReflectStatus", "/v1/reflect/status").await;
    g.get("ReflectPlaybook", "/v1/reflect/playbook").await;
    g.post("InnerEvent", "/v1/inner/event", json!({ "kind": "repeat", "what": "quota exceeded" })).await;
    g.get("InnerStatus", "/v1/inner/status").await;
    g.get("InnerContext", "/v1/inner/context?level=2").await;
    let queue =
        json!({ "job": "evolve", "path": "QUEUE.md", "content": "- [ ] P1 rotate the API keys (added 2026-11-01)\n", "append": true });
    g.post("InnerWrite", "/v1/inner/write", queue).await;
    g.post("InnerRun", "/v1/inner/run", json!({ "job": "evolve" })).await;

    // ---- knowledge modules and the sync engine ------------------------------------------
    let notes = "# Daily Log: 2026-11-22\n\n- kubectl apply failed: the storage class is missing\n\
                 - kubectl apply failed: the storage class is missing\n- Helm: the package manager for Kubernetes charts\n";
    std::fs::write(g.workspace.path().join("memory/2026-11-22.md"), notes).expect("daily note");
    g.post("WorkspaceSync", "/v1/workspace/sync", json!({})).await;
    let extract = json!({ "domain": "Kubernetes clusters", "keywords": ["kubernetes", "kubectl"], "filePatterns": ["*.yaml"] });
    g.post("ModuleExtract", "/v1/modules/k8s/extract", extract).await;
    g.post("ModuleChange", "/v1/modules/k8s", json!({ "action": "activate", "priority": 70 })).await;
    g.get("ModuleInfo", "/v1/modules/k8s").await;
    g.get("ModuleList", "/v1/modules").await;
    g.get("WorkspaceFiles", "/v1/workspace/files").await;
    g.get("WorkspaceFile", "/v1/workspace/file?path=memory/2026-11-22.md").await;

    // ---- the relay (rules analyzer: no model in this daemon) ---------------------------
    // Each request here is a minute after the last: a ten-minute window holds them all.
    g.post("RelayConfigure", "/agent/config", json!({ "maxAge": 600000 })).await;
    g.post("RelaySense", "/sense", json!({ "type": "text", "ts": 1, "ocr": "TypeError: Cannot read properties of undefined (reading 'config')", "meta": { "app": "VS Code", "ssim": 0.85 } })).await;
    g.post("RelayFeed", "/feed", json!({ "text": "[PERIODIC] (normal)\n[1s ago, openrouter] Laplace transforms turn derivatives into products", "priority": "normal" })).await;
    g.get("RelayContext", "/agent/context").await;
    g.check("RelayTick", "POST", "/agent/tick", None).await;
    g.get("RelayLast", "/agent/last").await;
    g.get("RelayHistory", "/agent/history?limit=5").await;
    g.get("RelayFeedPoll", "/feed?after=1").await;
    g.get("RelayConfig", "/agent/config").await;
    g.get("RelayHealth", "/health").await;

    // ---- the daemon -------------------------------------------------------------------
    g.check("Consolidate", "POST", "/v1/consolidate", None).await;
    g.get("GetMetrics", "/v1/metrics").await;
    g.get("Status", "/v1/status").await;
    let (status, content_type, text) = g.send("GET", "/metrics", None).await;
    assert_eq!((status, content_type.as_str()), (200, "text/plain; version=0.0.4"), "/metrics");
    assert!(text.contains("# TYPE mneme_uptime_seconds"), "/metrics:\n{text}");
    // The inner life's figures: the repeat recorded above, the evolve run, no refusal.
    for line in [
        "mneme_inner_frustration_max 1",
        "mneme_inner_job_runs_24h 1",
        "mneme_inner_job_refusals_24h 0",
        "mneme_relay_feed_items 2",
        "mneme_relay_sense_events 1",
        "mneme_relay_llm_calls 0",
    ] {
        assert!(text.lines().any(|l| l == line), "{line} in /metrics:\n{text}");
    }
    g.covered.insert("Prometheus".into());

    g.finish();
    eprintln!("golden: {} routes checked in {:.1?}", g.covered.len(), started.elapsed());
}

/// The schema check can fail: a pinned record answer conforms to `RecordResponse`, and each
/// kind of break a renamed or retyped field would cause is reported with its path.
#[test]
fn the_schema_checker_reports_what_the_document_forbids() {
    let doc = mneme_server::openapi::document();
    let schema = json!({ "$ref": "#/components/schemas/RecordResponse" });
    let file = format!("{FIXTURES}/RetrieveById.json");
    let pinned: Value = serde_json::from_str(&std::fs::read_to_string(&file).expect("fixture")).expect("fixture JSON");
    let check = |value: &Value| {
        let mut errors = Vec::new();
        conform(&doc, &schema, value, "$", &mut errors);
        errors
    };
    assert_eq!(check(&pinned), Vec::<String>::new());
    let broken = |edit: &dyn Fn(&mut Value)| {
        let mut value = pinned.clone();
        edit(&mut value);
        check(&value)
    };
    let renamed = broken(&|v| {
        let t = v["record"].as_object_mut().expect("record").remove("memory_type").expect("memory_type");
        v["record"]["kind"] = t;
    });
    assert_eq!(renamed, ["$.record.memory_type: required, missing"]);
    assert_eq!(
        broken(&|v| v["record"]["status"] = json!("gone")),
        [r#"$.record.status: "gone" is not one of ["active","contested","retracted","superseded"]"#]
    );
    assert_eq!(broken(&|v| v["current_salience"] = json!("high")), [r#"$.current_salience: "high" is not of type "number""#]);
    assert_eq!(broken(&|v| v["record"]["created_at"] = json!("yesterday")), [r#"$.record.created_at: "yesterday" is not a "date-time""#]);
    assert_eq!(broken(&|v| v["record"]["event_time"] = Value::Null), Vec::<String>::new(), "nullable");
    // A pruned record (its payload dropped by the decay sweep) conforms too.
    assert_eq!(broken(&|v| v["record"]["payload"] = Value::Null), Vec::<String>::new(), "a pruned payload is null");
    assert_eq!(
        broken(&|v| v["record"]["lineage"]["timestamp"] = Value::Null),
        ["$.record.lineage.timestamp: null is not of type \"string\""]
    );
    let mut errors = Vec::new();
    conform(&doc, &json!({ "type": "object", "oneOf": [] }), &json!({}), "$", &mut errors);
    assert_eq!(errors, [r#"$: the schema keyword "oneOf" is not known to this checker"#]);
}

/// The daemon under test, the document, and what the run found.
struct Golden {
    d: TestDaemon,
    clock: Arc<FixedClock>,
    workspace: tempfile::TempDir,
    doc: Value,
    bless: bool,
    /// Record id → placeholder naming the call that created it.
    names: BTreeMap<String, String>,
    /// The operationIds called.
    covered: BTreeSet<String>,
    /// Each checked operation's route and body as received, compared with its fixture at
    /// the end, when every id has its name.
    answers: Vec<(String, String, Value)>,
    problems: Vec<String>,
}

impl Golden {
    async fn start() -> Self {
        let workspace = tempfile::tempdir().expect("workspace dir");
        std::fs::create_dir_all(workspace.path().join("reference")).expect("mkdir");
        std::fs::write(
            workspace.path().join("reference/projects.md"),
            "# Projects\n\n## Infra\n\nThe kubernetes migration is blocked on the storage class.\n",
        )
        .expect("workspace file");
        // A fixed modification time: the file's knowledge (`modified`, `freshness`) is pinned too.
        let modified = std::time::SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_795_000_000);
        std::fs::File::options()
            .write(true)
            .open(workspace.path().join("reference/projects.md"))
            .and_then(|f| f.set_modified(modified))
            .expect("mtime");
        let mut config = test_config();
        config.workspace.dir = Some(workspace.path().to_path_buf());
        config.workspace.timezone = Some("UTC".into());
        // Lexical retrieval only: a model installed on one machine must not change scores.
        config.embedding.provider = mneme_embed::EmbeddingProvider::None;
        let dir = tempfile::tempdir().expect("temp dir");
        let clock = Arc::new(FixedClock::new("2026-11-22T09:00:00Z".parse::<Timestamp>().expect("timestamp")));
        let store = StoreOptions { path: dir.path().join("mneme.db"), key: None, create: true, decay: config.decay };
        let options =
            mneme_server::DaemonOptions { config, store, postgres: None, daemon_file: None, clock: clock.clone(), env: Default::default() };
        let daemon = mneme_server::start(options).await.expect("daemon starts");
        let d = TestDaemon { daemon, dir, http: reqwest::Client::new() };
        // Indexed once, here, rather than by the daemon's polling job, which could pick up
        // the journals the hook writes mid-run and so change the file search's scores.
        let owner = d.daemon.app.ops.owner(&d.daemon.app.internal).expect("owner");
        let indexed = mneme_agent::file_index::sync(
            &owner,
            workspace.path(),
            None,
            mneme_agent::file_index::Embedding { background: false, budget: None },
        )
        .expect("workspace indexed");
        assert_eq!(indexed.indexed, ["reference/projects.md"], "{indexed:?}");
        // The test's own switch, read here; the daemon's environment is `DaemonOptions::env`.
        #[allow(clippy::disallowed_methods)]
        let bless = std::env::var("MNEME_BLESS").is_ok_and(|v| v == "1");
        Golden {
            d,
            clock,
            workspace,
            doc: mneme_server::openapi::document(),
            bless,
            names: BTreeMap::new(),
            covered: BTreeSet::new(),
            answers: Vec::new(),
            problems: Vec::new(),
        }
    }

    /// Names a record id after the call that created it; returns the id.
    fn name(&mut self, id: &Value, name: &str) -> String {
        let id = id.as_str().unwrap_or_else(|| panic!("{name}: no record id")).to_string();
        self.names.insert(id.clone(), format!("<id:{name}>"));
        id
    }

    async fn get(&mut self, operation: &str, path: &str) -> Value {
        self.check(operation, "GET", path, None).await
    }

    async fn post(&mut self, operation: &str, path: &str, body: Value) -> Value {
        self.check(operation, "POST", path, Some(body)).await
    }

    /// A POST that creates a record: checked, and its id named `<id:{name}>`.
    async fn create(&mut self, name: &str, operation: &str, path: &str, body: Value) -> String {
        let answer = self.post(operation, path, body).await;
        self.name(&answer["record"]["id"], name)
    }

    /// One request one minute after the last; returns status, content type and body.
    async fn send(&self, method: &str, path: &str, body: Option<Value>) -> (u16, String, String) {
        self.clock.advance(SignedDuration::from_mins(1));
        let url = self.d.url(path);
        let mut request = match method {
            "GET" => self.d.http.get(url),
            "POST" => self.d.http.post(url),
            other => panic!("no {other} routes"),
        };
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request.send().await.unwrap_or_else(|e| panic!("{method} {path}: {e}"));
        let status = response.status().as_u16();
        let content_type =
            response.headers().get(reqwest::header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or_default().to_string();
        (status, content_type, response.text().await.expect("body"))
    }

    /// Calls `operation` at `path` (a concrete path of its route), expects 200 with JSON,
    /// and checks the body against the operation's schema and fixture. Returns the body
    /// as received.
    async fn check(&mut self, operation: &str, method: &str, path: &str, body: Option<Value>) -> Value {
        let (template, spec) = self.operation(operation, method);
        let route = path.split_once('?').map_or(path, |(route, _)| route);
        assert!(matches_template(&template, route), "{operation}: {path} is not a path of its route {template}");
        let (status, content_type, text) = self.send(method, path, body).await;
        assert_eq!(status, 200, "{operation} ({method} {path}) failed: {text}");
        assert_eq!(content_type, "application/json", "{operation}: content type");
        let value: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{operation}: not JSON ({e}): {text}"));
        assert!(self.covered.insert(operation.to_string()), "{operation} called twice");

        let schema = &spec["responses"]["200"]["content"]["application/json"]["schema"];
        if !schema.is_null() {
            let mut errors = Vec::new();
            conform(&self.doc, schema, &value, "$", &mut errors);
            for e in errors {
                self.problems.push(format!("{operation} ({method} {template}) does not match its OpenAPI schema: {e}"));
            }
        }
        self.answers.push((operation.to_string(), format!("{method} {template}"), value.clone()));
        value
    }

    /// Compares an answer with its fixture, or writes the fixture when blessing or missing.
    fn compare(&mut self, operation: &str, route: &str, value: &Value) {
        let actual = self.normalise(value, None);
        let file = format!("{FIXTURES}/{operation}.json");
        match std::fs::read_to_string(&file) {
            Ok(stored) if !self.bless => {
                let expected: Value = serde_json::from_str(&stored).unwrap_or_else(|e| panic!("{file} is not JSON: {e}"));
                if let Some(difference) = first_difference(&expected, &actual, "$") {
                    self.problems.push(format!(
                        "{operation} ({route}) no longer answers its fixture {operation}.json: {difference}\n  \
                         (if the change is intended, regenerate with MNEME_BLESS=1 and review the diff)\n  answered: {}",
                        serde_json::to_string(&actual).expect("JSON")
                    ));
                }
            }
            _ => {
                std::fs::create_dir_all(FIXTURES).expect("fixture dir");
                let pretty = serde_json::to_string_pretty(&actual).expect("JSON") + "\n";
                std::fs::write(&file, pretty).unwrap_or_else(|e| panic!("{file}: {e}"));
                eprintln!("golden: wrote fixture {file} (not compared)");
            }
        }
    }

    /// The route template and the OpenAPI operation object of `operation`.
    fn operation(&self, operation: &str, method: &str) -> (String, Value) {
        let paths = self.doc["paths"].as_object().expect("paths");
        for (template, item) in paths {
            if let Some(spec) = item.get(method.to_ascii_lowercase())
                && spec["operationId"] == operation
            {
                return (template.clone(), spec.clone());
            }
        }
        panic!("{operation} is not a {method} operation of the OpenAPI document")
    }

    /// Replaces what varies between runs with placeholders, keeping every key.
    fn normalise(&self, value: &Value, key: Option<&str>) -> Value {
        if let Some((_, placeholder)) = VARYING_KEYS.iter().find(|(k, _)| Some(*k) == key)
            && !value.is_null()
        {
            return Value::String((*placeholder).to_string());
        }
        match value {
            Value::Object(map) => Value::Object(map.iter().map(|(k, v)| (k.clone(), self.normalise(v, Some(k)))).collect()),
            Value::Array(items) => Value::Array(items.iter().map(|v| self.normalise(v, None)).collect()),
            Value::String(s) => Value::String(self.normalise_text(s)),
            Value::Number(n) if key == Some("schema_version") => {
                assert_eq!(n.as_i64(), Some(mneme_store::SCHEMA_VERSION), "schema_version is the store's");
                Value::String("<schema_version>".into())
            }
            // Salience and scores go through exp and ln, whose last bits may differ between
            // platforms' maths libraries: ten decimals are compared.
            Value::Number(n) if n.is_f64() => {
                let x = n.as_f64().expect("f64");
                json!((x * 1e10).round() / 1e10)
            }
            other => other.clone(),
        }
    }

    fn normalise_text(&self, s: &str) -> String {
        let mut s = s.to_string();
        for (dir, placeholder) in [(self.d.dir.path(), "<dir>"), (self.workspace.path(), "<workspace>")] {
            // The daemon may report a path as given or resolved (macOS: /var → /private/var).
            let resolved = dir.canonicalize().expect("temp dir");
            for form in [resolved.as_path(), dir] {
                s = s.replace(form.to_string_lossy().as_ref(), placeholder);
            }
        }
        let uuid = regex::Regex::new(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}").expect("regex");
        let s = uuid.replace_all(&s, |c: &regex::Captures<'_>| self.names.get(&c[0]).cloned().unwrap_or_else(|| "<id>".into()));
        let address = regex::Regex::new(r"127\.0\.0\.1:\d+").expect("regex");
        address.replace_all(&s, "127.0.0.1:<port>").into_owned()
    }

    /// Every route called, no stale fixture, and no problem found.
    fn finish(&mut self) {
        for (operation, route, value) in std::mem::take(&mut self.answers) {
            self.compare(&operation, &route, &value);
        }
        let mut documented = BTreeSet::new();
        for item in self.doc["paths"].as_object().expect("paths").values() {
            for spec in item.as_object().expect("path item").values() {
                documented.insert(spec["operationId"].as_str().expect("operationId").to_string());
            }
        }
        for operation in Operation::ALL {
            assert!(documented.contains(operation.name()), "{} is not in the OpenAPI document", operation.name());
        }
        let src = include_str!("../../src/http.rs");
        let routes: Vec<&str> =
            src.lines().filter(|l| l.trim_start().starts_with(".route(\"")).map(|l| l.split('"').nth(1).expect("path")).collect();
        for route in &routes {
            assert!(self.doc["paths"].get(*route).is_some(), "{route} is served but not documented");
        }
        assert_eq!(routes.len(), self.doc["paths"].as_object().expect("paths").len(), "routes served vs documented");
        let missing: Vec<&String> = documented.difference(&self.covered).collect();
        assert!(missing.is_empty(), "no golden call for {missing:?}");
        for entry in std::fs::read_dir(FIXTURES).expect("fixture dir") {
            let name = entry.expect("entry").file_name().to_string_lossy().into_owned();
            let operation = name.strip_suffix(".json").unwrap_or(&name);
            if !self.covered.contains(operation) || matches!(operation, "OpenApi" | "Prometheus" | "Console") {
                self.problems.push(format!("{FIXTURES}/{name} belongs to no call of this test: remove it"));
            }
        }
        assert!(self.problems.is_empty(), "{} problem(s):\n{}", self.problems.len(), self.problems.join("\n"));
    }
}

/// Whether `path` is an instance of the route `template` (`{name}` matches one segment).
fn matches_template(template: &str, path: &str) -> bool {
    let (t, p): (Vec<&str>, Vec<&str>) = (template.split('/').collect(), path.split('/').collect());
    t.len() == p.len() && t.iter().zip(&p).all(|(t, p)| (t.starts_with('{') && t.ends_with('}') && !p.is_empty()) || t == p)
}

/// The first place (depth first, in key order) where `actual` differs from `expected`,
/// named by its JSON path.
fn first_difference(expected: &Value, actual: &Value, path: &str) -> Option<String> {
    match (expected, actual) {
        (Value::Object(e), Value::Object(a)) => {
            // A rename shows as one key missing and one unexpected: name both.
            let missing: Vec<&String> = e.keys().filter(|k| !a.contains_key(*k)).collect();
            let unexpected: Vec<&String> = a.keys().filter(|k| !e.contains_key(*k)).collect();
            if !missing.is_empty() || !unexpected.is_empty() {
                return Some(format!("{path}: keys missing from the answer {missing:?}, keys not in the fixture {unexpected:?}"));
            }
            e.iter().find_map(|(k, ev)| first_difference(ev, &a[k], &format!("{path}.{k}")))
        }
        (Value::Array(e), Value::Array(a)) => e
            .iter()
            .zip(a)
            .enumerate()
            .find_map(|(i, (ev, av))| first_difference(ev, av, &format!("{path}[{i}]")))
            .or_else(|| (e.len() != a.len()).then(|| format!("{path}: {} items, the fixture has {}", a.len(), e.len()))),
        (e, a) if e == a => None,
        (e, a) => Some(format!("{path}: answered {a}, the fixture has {e}")),
    }
}

/// Checks `value` against an OpenAPI 3.0 schema object, pushing one message per violation
/// (with its JSON path). Knows the keywords the document uses; any other is a violation.
fn conform(doc: &Value, schema: &Value, value: &Value, path: &str, errors: &mut Vec<String>) {
    let Some(schema) = schema.as_object() else {
        errors.push(format!("{path}: the schema is not an object: {schema}"));
        return;
    };
    if let Some(reference) = schema.get("$ref") {
        let target = reference.as_str().and_then(|r| r.strip_prefix("#/")).map(|r| r.split('/').fold(doc, |node, part| &node[part]));
        match target {
            Some(target) if !target.is_null() => conform(doc, target, value, path, errors),
            _ => errors.push(format!("{path}: unresolved $ref {reference}")),
        }
        return;
    }
    // OpenAPI 3.0.3: `nullable` admits null to the `type` (and `enum`) of its own schema
    // object only; other keywords, `allOf` included, still apply to a null.
    let null_allowed = value.is_null() && schema.get("nullable") == Some(&Value::Bool(true));
    for (keyword, rule) in schema {
        match keyword.as_str() {
            "description" | "default" | "nullable" | "example" => {}
            "type" => {
                let ok = null_allowed
                    || match rule.as_str().unwrap_or_default() {
                        "object" => value.is_object(),
                        "array" => value.is_array(),
                        "string" => value.is_string(),
                        "boolean" => value.is_boolean(),
                        "integer" => value.is_i64() || value.is_u64(),
                        "number" => value.is_number(),
                        other => {
                            errors.push(format!("{path}: unknown type {other:?}"));
                            true
                        }
                    };
                if !ok {
                    errors.push(format!("{path}: {value} is not of type {rule}"));
                }
            }
            "enum" => {
                if !null_allowed && !rule.as_array().is_some_and(|values| values.contains(value)) {
                    errors.push(format!("{path}: {value} is not one of {rule}"));
                }
            }
            "format" => {
                let ok = match (rule.as_str().unwrap_or_default(), value.as_str()) {
                    ("date-time", Some(s)) => s.parse::<Timestamp>().is_ok(),
                    ("uuid", Some(s)) => mneme_core::RecordId::parse(s).is_ok(),
                    (_, None) => true,
                    (other, _) => {
                        errors.push(format!("{path}: unknown format {other:?}"));
                        true
                    }
                };
                if !ok {
                    errors.push(format!("{path}: {value} is not a {rule}"));
                }
            }
            "pattern" => {
                let re = regex::Regex::new(rule.as_str().unwrap_or_default()).expect("the document's patterns compile");
                if let Some(s) = value.as_str()
                    && !re.is_match(s)
                {
                    errors.push(format!("{path}: {value} does not match {rule}"));
                }
            }
            "maxLength" => {
                if let (Some(s), Some(max)) = (value.as_str(), rule.as_u64())
                    && s.chars().count() as u64 > max
                {
                    errors.push(format!("{path}: longer than {max}"));
                }
            }
            "minimum" | "maximum" => {
                if let (Some(n), Some(bound)) = (value.as_f64(), rule.as_f64()) {
                    let exclusive = keyword == "minimum" && schema.get("exclusiveMinimum") == Some(&Value::Bool(true));
                    let ok = match keyword.as_str() {
                        "minimum" if exclusive => n > bound,
                        "minimum" => n >= bound,
                        _ => n <= bound,
                    };
                    if !ok {
                        errors.push(format!("{path}: {n} is out of range ({keyword} {bound})"));
                    }
                }
            }
            "exclusiveMinimum" => {}
            "minItems" | "maxItems" => {
                if let (Some(items), Some(bound)) = (value.as_array(), rule.as_u64()) {
                    let n = items.len() as u64;
                    if (keyword == "minItems" && n < bound) || (keyword == "maxItems" && n > bound) {
                        errors.push(format!("{path}: {n} items ({keyword} {bound})"));
                    }
                }
            }
            "required" => {
                if let Some(object) = value.as_object() {
                    for field in rule.as_array().into_iter().flatten().filter_map(Value::as_str) {
                        if !object.contains_key(field) {
                            errors.push(format!("{path}.{field}: required, missing"));
                        }
                    }
                }
            }
            "properties" => {
                if let (Some(object), Some(properties)) = (value.as_object(), rule.as_object()) {
                    for (field, sub) in properties {
                        if let Some(v) = object.get(field) {
                            conform(doc, sub, v, &format!("{path}.{field}"), errors);
                        }
                    }
                }
            }
            "additionalProperties" => {
                if let Some(object) = value.as_object() {
                    let declared = schema.get("properties").and_then(Value::as_object);
                    for (field, v) in object {
                        if declared.is_some_and(|d| d.contains_key(field)) {
                            continue;
                        }
                        match rule {
                            Value::Bool(false) => errors.push(format!("{path}.{field}: not allowed (additionalProperties: false)")),
                            Value::Bool(true) => {}
                            sub => conform(doc, sub, v, &format!("{path}.{field}"), errors),
                        }
                    }
                }
            }
            "items" => {
                for (i, item) in value.as_array().into_iter().flatten().enumerate() {
                    conform(doc, rule, item, &format!("{path}[{i}]"), errors);
                }
            }
            "allOf" => {
                for sub in rule.as_array().into_iter().flatten() {
                    conform(doc, sub, value, path, errors);
                }
            }
            other => errors.push(format!("{path}: the schema keyword {other:?} is not known to this checker")),
        }
    }
}
