//! The policy table: every `Operation` × {unrestricted, narrowed read, narrowed write, no
//! key}, on HTTP and on gRPC (where gRPC serves the operation), against the outcome the
//! policy promises. The request for each operation is built in one exhaustive `match`, so
//! a new operation does not compile until it is in this table, and the expected outcome
//! comes from one function per principal rather than from the handlers.
//!
//! Each case gets fresh target records, written by the daemon's own principal: a fact
//! that is `high` and in scope `team-b`, so the narrowed reader cannot see it and the
//! narrowed writer can see it but not change it.

use mneme_core::{Payload, RecordId, Scope, SemanticPayload, Sensitivity};
use mneme_server::op::Operation;
use mneme_server::pb;
use mneme_service::IngestOptions;
use serde_json::{Value, json};
use tonic::Code;
use tonic::metadata::MetadataValue;

use crate::auth::principal;
use crate::{TestDaemon, test_config};

const ADMIN: &str = "policy-admin-0123456789abcdef";
const READER: &str = "policy-reader-0123456789abcdef";
const WRITER: &str = "policy-writer-0123456789abcdef";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Who {
    /// Reads and writes everything.
    Unrestricted,
    /// Reads only `low` records in `team-a` (and global ones); writes anything.
    NarrowedRead,
    /// Reads everything; writes only `low` records into `team-a`.
    NarrowedWrite,
    /// No Authorization header.
    NoKey,
}

const EVERYONE: [Who; 4] = [Who::Unrestricted, Who::NarrowedRead, Who::NarrowedWrite, Who::NoKey];

impl Who {
    fn key(self) -> Option<&'static str> {
        match self {
            Who::Unrestricted => Some(ADMIN),
            Who::NarrowedRead => Some(READER),
            Who::NarrowedWrite => Some(WRITER),
            Who::NoKey => None,
        }
    }
}

/// What the policy promises, as an HTTP status.
fn expected(op: Operation, who: Who) -> u16 {
    use Operation::*;
    if who == Who::NoKey {
        return 401;
    }
    let on_target = matches!(
        op,
        IngestOutcome | RetrieveById | SalienceCurve | History | Supersede | Fork | Retract | Merge | Contest | Reinforce | Penalize
    );
    let store_wide = matches!(op, GetMetrics | Status | Prometheus);
    let owner_only = matches!(
        op,
        Consolidate
            | LogConversation
            | SyncStatus
            | SyncFetch
            | SyncCheckpoint
            | SearchFiles
            | Forget
            | ReflectTick
            | ReflectStatus
            | ReflectPlaybook
            | ReflectFeedback
            | ReflectSpawnResult
            | InnerStatus
            | InnerContext
            | InnerEvent
            | InnerRun
            | InnerWrite
            | ModuleList
            | ModuleInfo
            | ModuleChange
            | ModuleExtract
            | WorkspaceSync
            | WorkspaceFiles
            | WorkspaceFile
            | RelayFeed
            | RelayFeedPoll
            | RelaySense
            | RelayHealth
            | RelayLast
            | RelayHistory
            | RelayContext
            | RelayConfig
            | RelayConfigure
            | RelayTick
    );
    let changes_target = on_target && !matches!(op, RetrieveById | SalienceCurve | History);
    match who {
        Who::Unrestricted => 200,
        // A hidden record is "not found", for reads and writes alike.
        Who::NarrowedRead if on_target => 404,
        Who::NarrowedRead if store_wide || owner_only => 403,
        Who::NarrowedRead => 200,
        // Visible but outside the write policy.
        Who::NarrowedWrite if changes_target || owner_only => 403,
        Who::NarrowedWrite => 200,
        Who::NoKey => 401,
    }
}

fn grpc_code(status: u16) -> Code {
    match status {
        200 => Code::Ok,
        401 => Code::Unauthenticated,
        403 => Code::PermissionDenied,
        404 => Code::NotFound,
        other => panic!("no gRPC code for {other}"),
    }
}

/// Records a case acts on, written by the daemon's own principal.
struct Targets {
    one: RecordId,
    two: RecordId,
    /// An event of the same policy: membrane's outcomes report on episodes only.
    event: RecordId,
}

fn targets(d: &TestDaemon) -> Targets {
    let app = &d.daemon.app;
    let options = || IngestOptions {
        sensitivity: Some(Sensitivity::High),
        scope: Some(Scope::parse("team-b").expect("scope")),
        ..Default::default()
    };
    let fact = |object: &str| {
        let payload = Payload::Semantic(SemanticPayload {
            subject: "the gateway".into(),
            predicate: "runs on".into(),
            object: object.into(),
            valid_from: None,
            valid_to: None,
            evidence: Vec::new(),
        });
        app.ops.ingest(&app.internal, payload, options()).expect("target record").id
    };
    let event = Payload::Event(mneme_core::EventPayload {
        event_kind: "tool_call".into(),
        reference: None,
        sender: None,
        text: "the gateway restarted".into(),
        event_time: None,
    });
    let event = app.ops.ingest(&app.internal, event, options()).expect("target event").id;
    Targets { one: fact("port 8080"), two: fact("port 8081"), event }
}

fn who_body() -> Value {
    json!({ "actor": "policy-test", "rationale": "the policy table" })
}

/// The HTTP request for `op`: method, path, body.
fn http_request(op: Operation, t: &Targets) -> (&'static str, String, Value) {
    use Operation::*;
    let id = t.one.to_string();
    let (method, template) = op.http();
    let module = if op == ModuleExtract { "policy-extract" } else { "base-behaviors" };
    let path = if op.name().starts_with("Module") { template.replace("{id}", module) } else { template.replace("{id}", &id) };
    let path = path.replace("{name}", "message_received");
    let path = if op == WorkspaceFile { format!("{path}?path=memory/sinain-playbook.md") } else { path };
    let body = match op {
        IngestEvent => json!({ "event": { "event_kind": "message", "text": "policy table event" } }),
        IngestToolOutput => json!({ "output": { "tool": "ls", "args": { "path": "." }, "result": "ok" } }),
        IngestObservation => json!({ "fact": { "subject": "policy", "predicate": "is", "object": "checked" } }),
        IngestWorkingState => json!({ "state": { "thread_id": "t1", "state": "checking the policy" } }),
        IngestOutcome => json!({ "target_id": id, "outcome": "success" }),
        Retrieve => json!({ "query": "gateway" }),
        RetrieveById | SalienceCurve | History | GetMetrics | Status | Prometheus | SyncStatus | ReflectStatus | ReflectPlaybook => {
            Value::Null
        }
        ReflectTick => json!({ "dryRun": true }),
        ReflectFeedback => json!({ "score": 0.5 }),
        ReflectSpawnResult => json!({ "spawnId": "t1-spawn", "outcome": "useful" }),
        InnerStatus | InnerContext => Value::Null,
        InnerEvent => json!({ "kind": "user_message" }),
        InnerRun => json!({ "job": "chronicle" }),
        ModuleList | ModuleInfo | WorkspaceSync | WorkspaceFiles | WorkspaceFile => Value::Null,
        ModuleChange => json!({ "action": "activate" }),
        ModuleExtract => json!({ "domain": "the policy table", "dryRun": true }),
        RelayFeed => json!({ "text": "[PERIODIC] policy table" }),
        RelaySense => json!({ "type": "text", "ocr": "policy table", "meta": { "app": "Terminal" } }),
        RelayConfigure => json!({ "intervalMs": 10000 }),
        RelayFeedPoll | RelayHealth | RelayLast | RelayHistory | RelayContext | RelayConfig | RelayTick => Value::Null,
        InnerWrite => {
            json!({ "job": "evolve", "path": "QUEUE.md", "content": "- [ ] P3 policy table (added 2026-11-23)\n", "append": true })
        }
        Supersede | Fork => {
            json!({ "change": { "summary": "the gateway moved" }, "actor": "policy-test", "rationale": "the policy table" })
        }
        Retract | Reinforce | Penalize => who_body(),
        Contest => json!({ "claim": "it runs on port 9090", "actor": "policy-test", "rationale": "the policy table" }),
        Merge => json!({ "ids": [t.one.to_string(), t.two.to_string()], "actor": "policy-test", "rationale": "the policy table" }),
        Consolidate => json!({}),
        Hook => json!({ "content": "Checking the policy table.", "sessionId": "policy" }),
        LogConversation => json!({ "channel": "cli", "content": "policy table" }),
        SyncFetch => json!({ "begin": 1, "end": 1 }),
        SyncCheckpoint => json!({ "end_id": 1, "summary": "policy table" }),
        SearchFiles => json!({ "query": "policy" }),
        Forget => json!({ "ids": [id], "reason": "the policy table" }),
    };
    (method, path, body)
}

async fn call_http(d: &TestDaemon, op: Operation, t: &Targets, who: Who) -> (u16, String) {
    let (method, path, body) = http_request(op, t);
    let mut request = match method {
        "GET" => d.http.get(d.url(&path)),
        _ => d.http.post(d.url(&path)).json(&body),
    };
    if let Some(key) = who.key() {
        request = request.bearer_auth(key);
    }
    let response = request.send().await.expect("HTTP request");
    let status = response.status().as_u16();
    (status, response.text().await.unwrap_or_default())
}

fn authorized<T>(message: T, who: Who) -> tonic::Request<T> {
    let mut request = tonic::Request::new(message);
    if let Some(key) = who.key() {
        request.metadata_mut().insert("authorization", MetadataValue::try_from(format!("Bearer {key}")).expect("header"));
    }
    request
}

fn ok<T>(r: Result<T, tonic::Status>) -> Result<(), tonic::Status> {
    r.map(|_| ())
}

/// The gRPC call for `op`; `None` when gRPC does not serve it.
async fn call_grpc(d: &TestDaemon, op: Operation, t: &Targets, who: Who) -> Option<Result<(), tonic::Status>> {
    use Operation::*;
    let mut m = d.memory().await;
    let id = t.one.to_string();
    let change = || Some(pb::RevisionChange { summary: Some("the gateway moved".into()), ..Default::default() });
    let result = match op {
        IngestEvent => ok(m
            .ingest_event(authorized(
                pb::IngestEventRequest {
                    options: None,
                    event: Some(pb::EventPayload { event_kind: "message".into(), text: "policy table event".into(), ..Default::default() }),
                },
                who,
            ))
            .await),
        IngestToolOutput => ok(m
            .ingest_tool_output(authorized(
                pb::IngestToolOutputRequest {
                    options: None,
                    output: Some(pb::ToolOutputPayload { tool: "ls".into(), ..Default::default() }),
                },
                who,
            ))
            .await),
        IngestObservation => ok(m
            .ingest_observation(authorized(
                pb::IngestObservationRequest {
                    options: None,
                    fact: Some(pb::SemanticPayload {
                        subject: "policy".into(),
                        predicate: "is".into(),
                        object: "checked".into(),
                        ..Default::default()
                    }),
                },
                who,
            ))
            .await),
        IngestWorkingState => ok(m
            .ingest_working_state(authorized(
                pb::IngestWorkingStateRequest {
                    options: None,
                    state: Some(pb::WorkingPayload { thread_id: "t1".into(), state: "checking".into(), ..Default::default() }),
                },
                who,
            ))
            .await),
        IngestOutcome => ok(m
            .ingest_outcome(authorized(
                pb::IngestOutcomeRequest { target_id: id, outcome: pb::Outcome::Success as i32, ..Default::default() },
                who,
            ))
            .await),
        Retrieve => ok(m.retrieve(authorized(pb::RetrieveRequest { query: "gateway".into(), ..Default::default() }, who)).await),
        RetrieveById => ok(m.retrieve_by_id(authorized(pb::RetrieveByIdRequest { id }, who)).await),
        History => ok(m.history(authorized(pb::HistoryRequest { id }, who)).await),
        Supersede => ok(m
            .supersede(authorized(
                pb::SupersedeRequest { id, change: change(), actor: "policy-test".into(), rationale: "table".into() },
                who,
            ))
            .await),
        Fork => ok(m
            .fork(authorized(pb::ForkRequest { id, change: change(), actor: "policy-test".into(), rationale: "table".into() }, who))
            .await),
        Retract => ok(m.retract(authorized(pb::RetractRequest { id, actor: "policy-test".into(), rationale: "table".into() }, who)).await),
        Forget => ok(m
            .forget(authorized(pb::ForgetRequest { ids: vec![id], reason: "the policy table".into(), ..Default::default() }, who))
            .await),
        Merge => ok(m
            .merge(authorized(
                pb::MergeRequest { ids: vec![id, t.two.to_string()], change: None, actor: "policy-test".into(), rationale: "table".into() },
                who,
            ))
            .await),
        Contest => ok(m
            .contest(authorized(
                pb::ContestRequest {
                    id,
                    claim: "port 9090".into(),
                    actor: "policy-test".into(),
                    rationale: "table".into(),
                    ..Default::default()
                },
                who,
            ))
            .await),
        Reinforce => ok(m
            .reinforce(authorized(pb::AdjustRequest { id, amount: None, actor: "policy-test".into(), rationale: "table".into() }, who))
            .await),
        Penalize => ok(m
            .penalize(authorized(pb::AdjustRequest { id, amount: None, actor: "policy-test".into(), rationale: "table".into() }, who))
            .await),
        GetMetrics => ok(m.get_metrics(authorized(pb::GetMetricsRequest {}, who)).await),
        ReflectTick => ok(m.reflect_tick(authorized(pb::ReflectTickRequest { dry_run: true, ..Default::default() }, who)).await),
        ReflectStatus => ok(m.reflect_status(authorized(pb::ReflectStatusRequest {}, who)).await),
        ReflectFeedback => ok(m.reflect_feedback(authorized(pb::ReflectFeedbackRequest { score: 0.5, ..Default::default() }, who)).await),
        InnerStatus => ok(m.inner_status(authorized(pb::InnerStatusRequest {}, who)).await),
        InnerContext => ok(m.inner_context(authorized(pb::InnerContextRequest { level: 2 }, who)).await),
        InnerEvent => ok(m.inner_event(authorized(pb::InnerEventRequest { kind: "user_message".into(), ..Default::default() }, who)).await),
        InnerRun => ok(m.inner_run(authorized(pb::InnerRunRequest { job: "chronicle".into(), ..Default::default() }, who)).await),
        InnerWrite => ok(m
            .inner_write(authorized(
                pb::InnerWriteRequest { job: "evolve".into(), path: "QUEUE.md".into(), content: "- [ ] P3 policy\n".into(), append: true },
                who,
            ))
            .await),
        ModuleList => ok(m.module_list(authorized(pb::ModuleListRequest {}, who)).await),
        ModuleInfo => ok(m.module_info(authorized(pb::ModuleInfoRequest { id: "base-behaviors".into() }, who)).await),
        ModuleChange => ok(m
            .module_change(authorized(
                pb::ModuleChangeRequest { id: "base-behaviors".into(), action: "activate".into(), priority: None },
                who,
            ))
            .await),
        ModuleExtract => ok(m
            .module_extract(authorized(
                pb::ModuleExtractRequest {
                    id: "policy-extract".into(),
                    domain: "the policy table".into(),
                    dry_run: true,
                    ..Default::default()
                },
                who,
            ))
            .await),
        WorkspaceSync => ok(m.workspace_sync(authorized(pb::WorkspaceSyncRequest {}, who)).await),
        ReflectSpawnResult => ok(m
            .reflect_spawn_result(authorized(
                pb::ReflectSpawnResultRequest { spawn_id: "t1-spawn".into(), outcome: "useful".into(), note: String::new() },
                who,
            ))
            .await),
        Hook => {
            let mut h = d.hooks().await;
            let event = pb::MessageEvent { content: "Checking the policy table.".into(), ..Default::default() };
            ok(h.message_received(authorized(event, who)).await)
        }
        Status | Prometheus | Consolidate | LogConversation | SyncStatus | SyncFetch | SyncCheckpoint | SearchFiles | SalienceCurve
        | ReflectPlaybook | WorkspaceFiles | WorkspaceFile => {
            return None;
        }
        RelayFeed | RelayFeedPoll | RelaySense | RelayHealth | RelayLast | RelayHistory | RelayContext | RelayConfig | RelayConfigure
        | RelayTick => return None,
    };
    Some(result)
}

async fn policy_daemon() -> TestDaemon {
    let ws = tempfile::tempdir().expect("workspace dir");
    // A workspace with memory/: the daemon's start deploys base-behaviors, and the base
    // playbook gives module extraction something to draw on.
    std::fs::create_dir_all(ws.path().join("memory")).expect("memory dir");
    std::fs::write(ws.path().join("memory/sinain-playbook.md"), "# Playbook\n\n## Patterns\n- Check the policy table before a release\n")
        .expect("playbook");
    // One heartbeat output (a day ago), so feedback has something to score.
    let yesterday = jiff::Timestamp::now() - jiff::SignedDuration::from_hours(24);
    std::fs::create_dir_all(ws.path().join("memory/playbook-logs")).expect("log dir");
    let line = json!({ "kind": "output", "ts": yesterday.to_string(), "outputId": "t-policy", "suggestion": "Check the table" });
    std::fs::write(
        ws.path().join(format!("memory/playbook-logs/{}.jsonl", yesterday.to_zoned(jiff::tz::TimeZone::UTC).date())),
        format!("{line}\n"),
    )
    .expect("log");
    let mut config = test_config();
    config.workspace.dir = Some(ws.keep());
    config.membrane.enabled = true;
    let mut reader = principal("reader", READER);
    reader.read_max_sensitivity = Sensitivity::Low;
    reader.read_scopes = Some(vec!["team-a".into()]);
    let mut writer = principal("writer", WRITER);
    writer.write_max_sensitivity = Sensitivity::Low;
    writer.write_scopes = Some(vec!["team-a".into()]);
    config.principals = vec![principal("admin", ADMIN), reader, writer];
    let d = TestDaemon::with(config).await;
    // One conversation in the log, so the owner's sync fetch and checkpoint have a range.
    let (status, logged) = d.post_auth("/v1/conversations", json!({ "channel": "cli", "content": "before the table" }), Some(ADMIN)).await;
    assert_eq!(status, 200, "{logged}");
    d
}

/// Every operation on HTTP. The unrestricted principal goes last, so a refused call's
/// targets are untouched and the owner's checkpoint runs once.
#[tokio::test]
async fn every_operation_on_http_obeys_the_policy_table() {
    let d = policy_daemon().await;
    let mut failures = Vec::new();
    for op in Operation::ALL {
        for who in [Who::NoKey, Who::NarrowedRead, Who::NarrowedWrite, Who::Unrestricted] {
            let t = targets(&d);
            let want = expected(op, who);
            let (got, body) = call_http(&d, op, &t, who).await;
            if got != want {
                failures.push(format!("HTTP {} as {who:?}: {got}, expected {want}: {body}", op.name()));
            }
        }
    }
    assert!(failures.is_empty(), "{} of {} cases:\n{}", failures.len(), Operation::ALL.len() * EVERYONE.len(), failures.join("\n"));
    d.stop().await;
}

#[tokio::test]
async fn every_operation_on_grpc_obeys_the_policy_table() {
    let d = policy_daemon().await;
    let mut failures = Vec::new();
    let mut served = 0;
    for op in Operation::ALL {
        for who in EVERYONE {
            let t = targets(&d);
            let Some(result) = call_grpc(&d, op, &t, who).await else {
                assert!(op.grpc().is_none(), "{} is served over gRPC but not in this table", op.name());
                continue;
            };
            assert!(op.grpc().is_some(), "{} answered over gRPC but says it is not served there", op.name());
            served += 1;
            let want = grpc_code(expected(op, who));
            let got = result.err().map_or(Code::Ok, |s| s.code());
            if got != want {
                failures.push(format!("gRPC {} as {who:?}: {got:?}, expected {want:?}", op.name()));
            }
        }
    }
    assert!(failures.is_empty(), "{} of {served} cases:\n{}", failures.len(), failures.join("\n"));
    assert_eq!(served, Operation::ALL.iter().filter(|op| op.grpc().is_some()).count() * EVERYONE.len());
    d.stop().await;
}

/// The `membrane.v1` call for `op`, with trust that narrows nothing; `None` when
/// membrane's protocol has no such operation.
async fn call_membrane(d: &TestDaemon, op: Operation, t: &Targets, who: Who) -> Option<Result<(), tonic::Status>> {
    use Operation::*;
    use mneme_server::membrane_pb as mb;
    use mneme_server::membrane_pb::membrane_service_client::MembraneServiceClient;
    let mut c = MembraneServiceClient::new(d.channel().await);
    let (id, two) = (t.one.to_string(), t.two.to_string());
    let trust = || Some(mb::TrustContext { max_sensitivity: "hyper".into(), ..Default::default() });
    let fact = |object: &str| {
        serde_json::to_vec(&json!({ "type": "semantic", "payload": { "kind": "semantic", "subject": "the gateway", "predicate": "runs on", "object": object } }))
            .expect("json")
    };
    let (actor, rationale) = ("policy-test".to_string(), "the policy table".to_string());
    let result = match op {
        IngestEvent => ok(c
            .ingest_event(authorized(
                mb::IngestEventRequest {
                    source: "policy".into(),
                    event_kind: "message".into(),
                    r#ref: "policy-1".into(),
                    summary: "policy table event".into(),
                    ..Default::default()
                },
                who,
            ))
            .await),
        IngestToolOutput => ok(c
            .ingest_tool_output(authorized(
                mb::IngestToolOutputRequest { source: "policy".into(), tool_name: "ls".into(), ..Default::default() },
                who,
            ))
            .await),
        IngestObservation => ok(c
            .ingest_observation(authorized(
                mb::IngestObservationRequest {
                    source: "policy".into(),
                    subject: "policy".into(),
                    predicate: "is".into(),
                    object: b"\"tested\"".to_vec(),
                    ..Default::default()
                },
                who,
            ))
            .await),
        IngestOutcome => ok(c
            .ingest_outcome(authorized(
                mb::IngestOutcomeRequest {
                    source: "policy".into(),
                    target_record_id: t.event.to_string(),
                    outcome_status: "success".into(),
                    ..Default::default()
                },
                who,
            ))
            .await),
        IngestWorkingState => ok(c
            .ingest_working_state(authorized(
                mb::IngestWorkingStateRequest {
                    source: "policy".into(),
                    thread_id: "t".into(),
                    state: "executing".into(),
                    ..Default::default()
                },
                who,
            ))
            .await),
        Retrieve => ok(c
            .retrieve(authorized(mb::RetrieveRequest { task_descriptor: "gateway".into(), trust: trust(), ..Default::default() }, who))
            .await),
        RetrieveById => ok(c.retrieve_by_id(authorized(mb::RetrieveByIdRequest { id, trust: trust() }, who)).await),
        Supersede => {
            ok(c.supersede(authorized(mb::SupersedeRequest { old_id: id, new_record: fact("port 9090"), actor, rationale }, who)).await)
        }
        Fork => ok(c.fork(authorized(mb::ForkRequest { source_id: id, forked_record: fact("port 9091"), actor, rationale }, who)).await),
        Retract => ok(c.retract(authorized(mb::RetractRequest { id, actor, rationale }, who)).await),
        Merge => {
            ok(c.merge(authorized(mb::MergeRequest { ids: vec![id, two], merged_record: fact("port 8082"), actor, rationale }, who)).await)
        }
        Contest => ok(c.contest(authorized(mb::ContestRequest { id, contesting_ref: two, actor, rationale }, who)).await),
        Reinforce => ok(c.reinforce(authorized(mb::ReinforceRequest { id, actor, rationale }, who)).await),
        Penalize => ok(c.penalize(authorized(mb::PenalizeRequest { id, amount: 0.1, actor, rationale }, who)).await),
        GetMetrics => ok(c.get_metrics(authorized(mb::GetMetricsRequest {}, who)).await),
        Status | Prometheus | SalienceCurve | History | LogConversation | SyncStatus | SyncFetch | SyncCheckpoint | SearchFiles
        | Forget | Consolidate | Hook | ReflectTick | ReflectStatus | ReflectPlaybook | ReflectFeedback | ReflectSpawnResult
        | InnerStatus | InnerContext | InnerEvent | InnerRun | InnerWrite | ModuleList | ModuleInfo | ModuleChange | ModuleExtract
        | WorkspaceSync | WorkspaceFiles | WorkspaceFile | RelayFeed | RelayFeedPoll | RelaySense | RelayHealth | RelayLast
        | RelayHistory | RelayContext | RelayConfig | RelayConfigure | RelayTick => return None,
    };
    Some(result)
}

/// Every operation membrane's protocol has, on `membrane.v1`: the same door, the same
/// outcomes as HTTP and gRPC (a request's trust context can only narrow them).
#[tokio::test]
async fn every_operation_on_membrane_obeys_the_policy_table() {
    let d = policy_daemon().await;
    let mut failures = Vec::new();
    let mut served = 0;
    for op in Operation::ALL {
        for who in EVERYONE {
            let t = targets(&d);
            let Some(result) = call_membrane(&d, op, &t, who).await else { continue };
            served += 1;
            let want = grpc_code(expected(op, who));
            let got = result.err().map_or(Code::Ok, |s| s.code());
            if got != want {
                failures.push(format!("membrane {} as {who:?}: {got:?}, expected {want:?}", op.name()));
            }
        }
    }
    assert!(failures.is_empty(), "{} of {served} cases:\n{}", failures.len(), failures.join("\n"));
    assert_eq!(served, 15 * EVERYONE.len(), "membrane.v1 has 15 operations");
    d.stop().await;
}

/// Each operation's name is the OpenAPI document's `operationId` at its HTTP route.
#[test]
fn every_operation_is_in_the_openapi_document_at_its_route() {
    let doc = mneme_server::openapi::document();
    for op in Operation::ALL {
        let (method, path) = op.http();
        let entry = &doc["paths"][path][method.to_ascii_lowercase()];
        assert_eq!(entry["operationId"], op.name(), "{method} {path}: {entry}");
    }
}

/// The MCP tool call that reaches `op`, where a tool does: (tool, arguments).
fn mcp_call(op: Operation, t: &Targets) -> Option<(&'static str, Value)> {
    use Operation::*;
    let id = t.one.to_string();
    let why = "the policy table";
    Some(match op {
        IngestEvent => ("remember", json!({ "text": "policy table event" })),
        IngestObservation => ("remember_fact", json!({ "subject": "policy", "predicate": "is", "object": "checked" })),
        Retrieve => ("recall", json!({ "query": "gateway" })),
        RetrieveById => ("show", json!({ "id": id })),
        History => ("show", json!({ "id": id, "history": true })),
        Supersede => ("correct", json!({ "id": id, "summary": "the gateway moved", "rationale": why })),
        Retract => ("retract", json!({ "id": id, "rationale": why })),
        Contest => ("contest", json!({ "id": id, "claim": "it runs on port 9090", "rationale": why })),
        Reinforce => ("feedback", json!({ "id": id, "op": "reinforce", "rationale": why })),
        Penalize => ("feedback", json!({ "id": id, "op": "penalize", "rationale": why })),
        Hook => ("session_context", json!({ "session_id": "policy" })),
        LogConversation => ("memory_sync", json!({ "op": "log", "channel": "cli", "content": "policy table" })),
        SyncStatus => ("agent_state", json!({ "op": "sync_status" })),
        SyncFetch => ("agent_state", json!({ "op": "sync_fetch", "begin": 1, "end": 1 })),
        SyncCheckpoint => ("memory_sync", json!({ "op": "checkpoint", "end_id": 1, "summary": why })),
        SearchFiles => ("search_files", json!({ "query": "policy" })),
        Forget => ("forget", json!({ "ids": [id], "reason": why })),
        ReflectTick => ("reflection", json!({ "op": "tick", "dry_run": true })),
        ReflectStatus => ("agent_state", json!({ "op": "reflection_status" })),
        ReflectFeedback => ("reflection", json!({ "op": "feedback", "score": 0.5 })),
        ReflectSpawnResult => ("reflection", json!({ "op": "spawn_result", "spawn_id": "t1-spawn", "outcome": "useful" })),
        InnerStatus => ("agent_state", json!({ "op": "inner_status" })),
        InnerContext => ("agent_state", json!({ "op": "inner_context", "level": 2 })),
        InnerEvent => ("inner", json!({ "op": "event", "kind": "user_message" })),
        InnerRun => ("inner", json!({ "op": "run", "job": "chronicle" })),
        InnerWrite => ("inner", json!({ "op": "write", "job": "evolve", "path": "QUEUE.md", "content": "- [ ] P3 mcp\n", "append": true })),
        ModuleList => ("agent_state", json!({ "op": "modules" })),
        ModuleInfo => ("agent_state", json!({ "op": "module", "id": "base-behaviors" })),
        ModuleChange => ("modules", json!({ "op": "activate", "id": "base-behaviors" })),
        ModuleExtract => ("modules", json!({ "op": "extract", "id": "policy-extract", "domain": "the policy table", "dry_run": true })),
        WorkspaceSync => ("modules", json!({ "op": "sync" })),
        IngestToolOutput | IngestOutcome | IngestWorkingState | Fork | Merge | GetMetrics | Status | Prometheus | Consolidate
        | SalienceCurve | ReflectPlaybook | WorkspaceFiles | WorkspaceFile => {
            return None;
        }
        RelayFeed | RelayFeedPoll | RelaySense | RelayHealth | RelayLast | RelayHistory | RelayContext | RelayConfig | RelayConfigure
        | RelayTick => return None,
    })
}

/// A minimal Streamable HTTP MCP client: one session at `/mcp` for one key.
struct McpSession<'a> {
    d: &'a TestDaemon,
    key: Option<&'static str>,
    session: Option<String>,
    next_id: u64,
}

impl<'a> McpSession<'a> {
    /// Posts one JSON-RPC message; returns the HTTP status and the JSON-RPC answer, if any
    /// (the body is an SSE stream whose `data:` lines carry it).
    async fn post(&mut self, message: Value) -> (u16, Value) {
        let mut request = self
            .d
            .http
            .post(self.d.url("/mcp"))
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2025-06-18")
            .json(&message);
        if let Some(key) = self.key {
            request = request.bearer_auth(key);
        }
        if let Some(s) = &self.session {
            request = request.header("mcp-session-id", s);
        }
        let response = request.send().await.expect("MCP request");
        let status = response.status().as_u16();
        if let Some(s) = response.headers().get("mcp-session-id").and_then(|v| v.to_str().ok()) {
            self.session = Some(s.to_string());
        }
        let body = response.text().await.unwrap_or_default();
        let answer = body
            .lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
            .find(|v| v.get("id").is_some())
            .or_else(|| serde_json::from_str(&body).ok())
            .unwrap_or(Value::Null);
        (status, answer)
    }

    async fn open(d: &'a TestDaemon, key: Option<&'static str>) -> (Self, u16) {
        let mut s = McpSession { d, key, session: None, next_id: 1 };
        let init = json!({ "jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": { "name": "policy-table", "version": "1" } } });
        let (status, _) = s.post(init).await;
        if status == 200 {
            s.post(json!({ "jsonrpc": "2.0", "method": "notifications/initialized" })).await;
        }
        (s, status)
    }

    /// Calls a tool: `Ok(text)` or `Err(text)` for a tool error.
    async fn call(&mut self, tool: &str, arguments: Value) -> Result<String, String> {
        self.next_id += 1;
        let message =
            json!({ "jsonrpc": "2.0", "id": self.next_id, "method": "tools/call", "params": { "name": tool, "arguments": arguments } });
        let (status, answer) = self.post(message).await;
        assert_eq!(status, 200, "tools/call {tool}: HTTP {status}: {answer}");
        let result = &answer["result"];
        let text = result["content"][0]["text"].as_str().unwrap_or_default().to_string();
        if result["isError"] == true { Err(text) } else { Ok(text) }
    }
}

/// Every operation an MCP tool reaches, as each principal, through `/mcp`: the same
/// outcome as on HTTP (a refused call is a tool error with the API's code), and no key
/// at all is refused with 401 before MCP.
#[tokio::test]
async fn every_operation_an_mcp_tool_reaches_obeys_the_policy_table() {
    let d = policy_daemon().await;
    let (_, refused) = McpSession::open(&d, None).await;
    assert_eq!(refused, 401, "no key, no MCP session");
    let mut failures = Vec::new();
    let mut cases = 0;
    for who in [Who::NarrowedRead, Who::NarrowedWrite, Who::Unrestricted] {
        let (mut session, status) = McpSession::open(&d, who.key()).await;
        assert_eq!(status, 200, "{who:?} opens a session");
        for op in Operation::ALL {
            let t = targets(&d);
            let Some((tool, args)) = mcp_call(op, &t) else { continue };
            cases += 1;
            let want = match expected(op, who) {
                200 => "ok",
                403 => "permission_denied",
                404 => "not_found",
                other => panic!("no MCP outcome for {other}"),
            };
            let got = match session.call(tool, args).await {
                Ok(_) => "ok".to_string(),
                Err(text) => text.split(':').next().unwrap_or_default().to_string(),
            };
            if got != want {
                failures.push(format!("MCP {tool} ({}) as {who:?}: {got}, expected {want}", op.name()));
            }
        }
    }
    assert!(failures.is_empty(), "{} of {cases} cases:\n{}", failures.len(), failures.join("\n"));
    assert_eq!(cases, 3 * Operation::ALL.iter().filter(|op| mcp_call(**op, &targets(&d)).is_some()).count());
    d.stop().await;
}
