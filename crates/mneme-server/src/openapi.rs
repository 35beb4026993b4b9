//! The OpenAPI 3.0 description of the HTTP API, served at `/openapi.json`. Written by hand
//! next to `http.rs`; the integration tests check that every route in the router is here
//! and that the document validates.

use mneme_core::Limits;
use serde_json::{Value, json};

fn body(schema: &str) -> Value {
    json!({ "required": true, "content": { "application/json": { "schema": { "$ref": format!("#/components/schemas/{schema}") } } } })
}

fn ok(schema: &str) -> Value {
    json!({
        "200": { "description": "OK", "content": { "application/json": { "schema": { "$ref": format!("#/components/schemas/{schema}") } } } },
        "400": { "$ref": "#/components/responses/Error" },
        "401": { "$ref": "#/components/responses/Error" },
        "403": { "$ref": "#/components/responses/Error" },
        "404": { "$ref": "#/components/responses/Error" },
        "408": { "$ref": "#/components/responses/Error" },
        "409": { "$ref": "#/components/responses/Error" },
        "413": { "$ref": "#/components/responses/Error" },
        "415": { "$ref": "#/components/responses/Error" },
        "429": { "$ref": "#/components/responses/Error" },
        "503": { "$ref": "#/components/responses/Error" },
        "500": { "$ref": "#/components/responses/Error" }
    })
}

fn op(id: &str, summary: &str, request: Option<&str>, response: &str, with_id: bool) -> Value {
    let mut o = json!({ "operationId": id, "summary": summary, "responses": ok(response) });
    if let Some(r) = request {
        o["requestBody"] = body(r);
    }
    if with_id {
        o["parameters"] = json!([{ "name": "id", "in": "path", "required": true, "schema": { "type": "string", "format": "uuid" } }]);
    }
    o
}

fn string() -> Value {
    json!({ "type": "string" })
}

fn strings() -> Value {
    json!({ "type": "array", "items": { "type": "string" } })
}

/// A string that must hold something other than whitespace (the service refuses blanks).
fn text() -> Value {
    json!({ "type": "string", "pattern": "\\S" })
}

/// A text of at most `max` bytes (a byte limit: ASCII text reaches it at `max` characters).
fn text_within(max: usize) -> Value {
    json!({ "type": "string", "pattern": "\\S", "maxLength": max })
}

/// Control characters (Unicode Cc, what Rust's `char::is_control` matches).
const CONTROL: &str = "\\x00-\\x1f\\x7f-\\x9f";

/// A label (an event kind, a tool's name, a thread, a channel, a user): not blank, no
/// control characters.
fn label() -> Value {
    json!({ "type": "string", "pattern": format!("^[^{CONTROL}]*[^\\s{CONTROL}][^{CONTROL}]*$") })
}

/// Tags: at most 32, each 1 to 64 characters without whitespace or control characters (docs "Limits").
fn tags() -> Value {
    let limits = Limits::default();
    json!({ "type": "array", "maxItems": limits.max_tags, "items": { "type": "string", "pattern": format!("^[^\\s{CONTROL}]+$"), "maxLength": limits.max_tag_chars } })
}

/// A rationale: at most 4 KiB.
fn rationale() -> Value {
    json!({ "type": "string", "maxLength": Limits::default().max_rationale_bytes })
}

/// A summary: not blank, at most 1 KiB.
fn summary() -> Value {
    text_within(Limits::default().max_summary_bytes)
}

/// A name (a channel, a user): a label of at most 256 bytes.
fn name() -> Value {
    let mut schema = label();
    schema["maxLength"] = json!(256);
    schema
}

/// A payload variant: `schema` with its `kind` tag.
fn tagged(kind: &str, schema: &Value) -> Value {
    let mut schema = schema.clone();
    schema["properties"]["kind"] = enumeration(&[kind]);
    schema["required"].as_array_mut().expect("a payload schema lists its required fields").push(json!("kind"));
    schema
}

/// A body is optional where its schema requires no field: an empty body reads as `{}`.
fn optional_bodies(paths: &mut serde_json::Map<String, Value>, schemas: &Value) {
    for operation in paths.values_mut().filter_map(Value::as_object_mut).flat_map(|p| p.values_mut()) {
        let Some(body) = operation.get_mut("requestBody") else { continue };
        let name = body["content"]["application/json"]["schema"]["$ref"].as_str().and_then(|r| r.rsplit('/').next()).unwrap_or_default();
        let schema = &schemas[name];
        if schema.get("required").is_none() && schema.get("oneOf").is_none() && schema.get("allOf").is_none() {
            body["required"] = json!(false);
        }
    }
}

/// An optional field: serde reads `null` as absent, and so does the schema (an enum lists
/// `null` among its values, as OpenAPI 3.0.3 asks).
fn nullable(mut schema: Value) -> Value {
    schema["nullable"] = json!(true);
    if let Some(values) = schema.get_mut("enum").and_then(Value::as_array_mut) {
        values.push(Value::Null);
    }
    schema
}

/// Who acts (an audit entry's actor): at most 256 bytes; blank or absent is the caller.
fn actor() -> Value {
    json!({ "type": "string", "maxLength": Limits::default().max_actor_bytes, "description": "Blank or absent: the caller." })
}

/// A scope key: no whitespace, at most 128 bytes; empty is global.
fn scope() -> Value {
    json!({ "type": "string", "pattern": format!("^[^\\s{CONTROL}]*$"), "maxLength": 128 })
}

fn id() -> Value {
    json!({ "type": "string", "format": "uuid" })
}

/// A finite number within [0, 1].
fn unit() -> Value {
    json!({ "type": "number", "minimum": 0, "maximum": 1 })
}

/// Reinforce / penalize amount: 0 < amount ≤ 1, default 0.1.
fn amount() -> Value {
    json!({ "type": "number", "minimum": 0, "exclusiveMinimum": true, "maximum": 1, "default": 0.1 })
}

/// A count: a non-negative integer (a u64).
fn count() -> Value {
    json!({ "type": "integer", "minimum": 0, "maximum": u64::MAX })
}

/// A signed 64-bit integer (an id, a time in milliseconds, a priority).
fn int64() -> Value {
    json!({ "type": "integer", "minimum": i64::MIN, "maximum": i64::MAX })
}

/// Counts by name (records by type or status).
fn counts() -> Value {
    json!({ "type": "object", "additionalProperties": count() })
}

fn enumeration(values: &[&str]) -> Value {
    json!({ "type": "string", "enum": values })
}

fn reference(name: &str) -> Value {
    json!({ "$ref": format!("#/components/schemas/{name}") })
}

pub fn document() -> Value {
    let sensitivity = enumeration(&["public", "low", "medium", "high", "critical"]);
    let memory_type = enumeration(&["episodic", "semantic", "competence", "working", "plan_graph"]);
    let status = enumeration(&["active", "contested", "retracted", "superseded"]);
    let revision = |id: &str, summary: &str| op(id, summary, Some("ReviseRequest"), "RecordResponse", true);
    let mut paths = serde_json::Map::new();
    let mut add = |path: &str, method: &str, value: Value| {
        let entry = paths.entry(path.to_string()).or_insert_with(|| json!({}));
        entry[method] = value;
    };
    add(
        "/healthz",
        "get",
        json!({ "operationId": "Healthz", "summary": "Liveness and readiness; no authentication. `store.engine` is sqlite or postgres, `store.ready` whether it answers a read.", "security": [], "responses": { "200": { "description": "The daemon and its store answer." }, "503": { "description": "The daemon answers but its store does not (status unavailable)." } } }),
    );
    add(
        "/metrics",
        "get",
        json!({ "operationId": "Prometheus", "summary": "Prometheus metrics (text exposition). Without configured keys (loopback) open; with keys, a key whose reads are not narrowed (else 401/403).", "responses": { "200": { "description": "Metrics", "content": { "text/plain": { "schema": { "type": "string" } } } }, "401": { "$ref": "#/components/responses/Error" }, "403": { "$ref": "#/components/responses/Error" } } }),
    );
    add(
        "/",
        "get",
        json!({ "operationId": "Console", "summary": "The web console: one self-contained HTML page (no data; it reads this API with the key the person enters).", "security": [], "responses": { "200": { "description": "HTML", "content": { "text/html": { "schema": { "type": "string" } } } } } }),
    );
    add(
        "/openapi.json",
        "get",
        json!({ "operationId": "OpenApi", "summary": "This document.", "security": [], "responses": { "200": { "description": "OpenAPI 3 document" } } }),
    );
    add(
        "/v1/status",
        "get",
        op(
            "Status",
            "Daemon status: pid, addresses, uptime, records by type, last consolidation, errors in the last hour. Store-wide counts: a principal whose reads are narrowed gets 403.",
            None,
            "DaemonStatus",
            false,
        ),
    );
    add(
        "/v1/metrics",
        "get",
        op("GetMetrics", "Store metrics. Store-wide counts: a principal whose reads are narrowed gets 403.", None, "Metrics", false),
    );
    add(
        "/v1/consolidate",
        "post",
        op(
            "Consolidate",
            "Run a consolidation cycle now over the buffered messages. Only for an unrestricted principal (403 otherwise): it writes into any scope.",
            None,
            "CycleReport",
            false,
        ),
    );
    add("/v1/ingest/event", "post", op("IngestEvent", "Store an episodic event.", Some("IngestEventRequest"), "RecordResponse", false));
    add(
        "/v1/ingest/tool_output",
        "post",
        op("IngestToolOutput", "Store a tool call and its result.", Some("IngestToolOutputRequest"), "RecordResponse", false),
    );
    add(
        "/v1/ingest/observation",
        "post",
        op("IngestObservation", "Store a subject-predicate-object fact.", Some("IngestObservationRequest"), "RecordResponse", false),
    );
    add(
        "/v1/ingest/outcome",
        "post",
        op(
            "IngestOutcome",
            "Record the outcome of using a record; reinforces or penalizes it.",
            Some("IngestOutcomeRequest"),
            "OutcomeResult",
            false,
        ),
    );
    add(
        "/v1/ingest/working_state",
        "post",
        op(
            "IngestWorkingState",
            "Store a snapshot of a thread's working state.",
            Some("IngestWorkingStateRequest"),
            "RecordResponse",
            false,
        ),
    );
    add(
        "/v1/retrieve",
        "post",
        op("Retrieve", "Ranked retrieval within the caller's policy.", Some("RetrieveRequest"), "RetrieveResponse", false),
    );
    add("/v1/records/{id}", "get", op("RetrieveById", "One record, tombstones included.", None, "RecordResponse", true));
    add("/v1/records/{id}/history", "get", op("History", "Lineage, links and audit log of a record.", None, "History", true));
    add("/v1/records/{id}/supersede", "post", revision("Supersede", "Replace a record; the old one becomes a tombstone."));
    add("/v1/records/{id}/fork", "post", revision("Fork", "Create a variant; the original stays active."));
    add(
        "/v1/records/{id}/retract",
        "post",
        op("Retract", "Withdraw a record (kept as a tombstone).", Some("WhoRequest"), "RecordResponse", true),
    );
    add("/v1/records/{id}/contest", "post", op("Contest", "Mark a record as disputed.", Some("ContestRequest"), "RecordResponse", true));
    add("/v1/records/{id}/reinforce", "post", op("Reinforce", "Raise a record's salience.", Some("AdjustRequest"), "SalienceChange", true));
    add("/v1/records/{id}/penalize", "post", op("Penalize", "Lower a record's salience.", Some("AdjustRequest"), "SalienceChange", true));
    add("/v1/merge", "post", op("Merge", "Combine records of one type into a new one.", Some("MergeRequest"), "RecordResponse", false));
    add(
        "/v1/conversations",
        "post",
        op(
            "LogConversation",
            "Append a message to the conversation log (owner principals).",
            Some("ConversationRequest"),
            "Conversation",
            false,
        ),
    );
    add("/v1/sync/status", "get", op("SyncStatus", "Unsummarized count and id range, last checkpoint.", None, "SyncState", false));
    add("/v1/sync/fetch", "post", op("SyncFetch", "Conversations with ids begin..=end.", Some("SyncFetchRequest"), "Conversations", false));
    add(
        "/v1/sync/checkpoint",
        "post",
        op(
            "SyncCheckpoint",
            "Mark conversations up to end_id summarized (idempotent).",
            Some("SyncCheckpointRequest"),
            "CheckpointResult",
            false,
        ),
    );
    add(
        "/v1/search/files",
        "post",
        op(
            "SearchFiles",
            "Search the workspace's Markdown files (file, lines, heading, snippet).",
            Some("SearchFilesRequest"),
            "FileHits",
            false,
        ),
    );
    add(
        "/v1/forget",
        "post",
        op(
            "Forget",
            "Erase records for good (owner principals): their text everywhere it is stored; tombstones keep id, type, times and a content hash. dry_run returns the plan.",
            Some("ForgetRequest"),
            "ForgetReport",
            false,
        ),
    );
    add(
        "/v1/reflect/tick",
        "post",
        op(
            "ReflectTick",
            "Run one reflection heartbeat tick (owner principals): the tick line, the step-5 output line and the model calls. 409 when a tick is already running or there is no workspace.",
            Some("ReflectTickRequest"),
            "ReflectTick",
            false,
        ),
    );
    add(
        "/v1/reflect/status",
        "get",
        op(
            "ReflectStatus",
            "What the heartbeat has been doing: last ticks, directive, effectiveness, pending spawns, stage outcomes, model calls.",
            None,
            "ReflectResult",
            false,
        ),
    );
    add(
        "/v1/reflect/feedback",
        "post",
        op(
            "ReflectFeedback",
            "Report how a heartbeat output went: a composite score in -1..=1.",
            Some("ReflectFeedbackRequest"),
            "ReflectResult",
            false,
        ),
    );
    add(
        "/v1/reflect/spawn-result",
        "post",
        op(
            "ReflectSpawnResult",
            "Report what a spawned task came to: useful, ignored or error.",
            Some("ReflectSpawnResultRequest"),
            "ReflectResult",
            false,
        ),
    );
    add(
        "/v1/inner/status",
        "get",
        op(
            "InnerStatus",
            "Inner life (owner principals): the emotions' anchors and their current values and action hints.",
            None,
            "InnerResult",
            false,
        ),
    );
    add(
        "/v1/inner/context",
        "get",
        json!({
            "operationId": "InnerContext",
            "summary": "The context of a level: 1 how I am, 2 + drive, notes and signals, 3 + habits, relationship, diary, dreams, questions, 4 + system documents and a weekly digest.",
            "parameters": [{ "name": "level", "in": "query", "required": false, "schema": { "type": "integer", "minimum": 1, "maximum": 4 } }],
            "responses": ok("InnerResult"),
        }),
    );
    add(
        "/v1/inner/event",
        "post",
        op("InnerEvent", "Record an event that moves the inner state.", Some("InnerEventRequest"), "InnerResult", false),
    );
    add(
        "/v1/reflect/playbook",
        "get",
        op(
            "ReflectPlaybook",
            "The reflection playbook: the base file and the effective one (null when absent).",
            None,
            "ReflectPlaybook",
            false,
        ),
    );
    add(
        "/v1/records/{id}/salience",
        "get",
        json!({
            "operationId": "SalienceCurve",
            "summary": "A record's salience from its last reinforcement to N days ahead (61 points), for plotting.",
            "parameters": [
                { "name": "id", "in": "path", "required": true, "schema": { "type": "string", "format": "uuid" } },
                { "name": "days", "in": "query", "required": false, "schema": { "type": "integer", "minimum": 1, "maximum": 3650 } }
            ],
            "responses": ok("SalienceCurve"),
        }),
    );
    // The relay (the relay seed's routes, unversioned as the seed has them).
    add(
        "/feed",
        "post",
        op("RelayFeed", "Add a feed item (a transcript chunk, a message for the HUD).", Some("RelayFeedRequest"), "RelayAck", false),
    );
    add(
        "/feed",
        "get",
        json!({
            "operationId": "RelayFeedPoll",
            "summary": "Feed items after an id, oldest first (HUD polling).",
            "parameters": [{ "name": "after", "in": "query", "required": false, "schema": count() }],
            "responses": ok("RelayFeed"),
        }),
    );
    add(
        "/sense",
        "post",
        op("RelaySense", "Add a screen event (OCR text, app, similarity).", Some("RelaySenseRequest"), "RelayAck", false),
    );
    add("/health", "get", op("RelayHealth", "Buffer sizes and the analysis loop's stats.", None, "RelayHealth", false));
    add("/agent/last", "get", op("RelayLast", "The latest analysis.", None, "RelayLast", false));
    add(
        "/agent/history",
        "get",
        json!({
            "operationId": "RelayHistory",
            "summary": "The last analyses, newest first (default 10, at most 50).",
            "parameters": [{ "name": "limit", "in": "query", "required": false, "schema": { "type": "integer", "minimum": 1, "maximum": 50 } }],
            "responses": ok("RelayHistory"),
        }),
    );
    add("/agent/context", "get", op("RelayContext", "The context window the next tick would analyse.", None, "RelayContext", false));
    add("/agent/config", "get", op("RelayConfig", "The analysis loop's settings.", None, "RelayConfigResult", false));
    add(
        "/agent/config",
        "post",
        op("RelayConfigure", "Change any of the loop's settings at run time.", Some("RelayConfigRequest"), "RelayConfigResult", false),
    );
    add("/agent/tick", "post", op("RelayTick", "Run one analysis tick now.", None, "RelayTickResult", false));
    add(
        "/v1/inner/run",
        "post",
        op(
            "InnerRun",
            "Run one inner-life job now: the mechanical core, then the model, the agent (dispatch) or the deterministic fallback.",
            Some("InnerRunRequest"),
            "InnerResult",
            false,
        ),
    );
    add(
        "/v1/inner/write",
        "post",
        op(
            "InnerWrite",
            "Write a workspace file for a job; refused (400) outside the job's files, and recorded.",
            Some("InnerWriteRequest"),
            "InnerResult",
            false,
        ),
    );
    let module_id =
        json!([{ "name": "id", "in": "path", "required": true, "schema": { "type": "string", "pattern": "^[a-z0-9][a-z0-9-]{0,63}$" } }]);
    add(
        "/v1/modules",
        "get",
        op("ModuleList", "Registered and unregistered knowledge modules, and the active stack.", None, "ModuleList", false),
    );
    let mut info =
        op("ModuleInfo", "A module's manifest, registry entry and pattern count (404 for an unknown id).", None, "ModuleInfo", false);
    info["parameters"] = module_id.clone();
    add("/v1/modules/{id}", "get", info);
    let mut change = op(
        "ModuleChange",
        "Activate (optionally at a priority), suspend, disable, or set a module's priority. Priorities stay within the manifest's range (400); locked modules cannot be suspended or disabled (409); an unknown id is 404; a corrupt registry is 409 and nothing changes. The effective playbook is regenerated.",
        Some("ModuleChangeRequest"),
        "ModuleChange",
        false,
    );
    change["parameters"] = module_id.clone();
    add("/v1/modules/{id}", "post", change);
    let mut extract = op(
        "ModuleExtract",
        "Extract a module from the base playbook and recent logs (the model when configured, else deterministic); registered suspended.",
        Some("ModuleExtractRequest"),
        "ModuleExtracted",
        false,
    );
    extract["parameters"] = module_id;
    add("/v1/modules/{id}/extract", "post", extract);
    add(
        "/v1/workspace/sync",
        "post",
        op(
            "WorkspaceSync",
            "Deploy the agent's files by their policies, repair a corrupt registry (setting it aside), regenerate the effective playbook; report each file.",
            None,
            "WorkspaceSyncReport",
            false,
        ),
    );
    add(
        "/v1/workspace/files",
        "get",
        op(
            "WorkspaceFiles",
            "The workspace's Markdown files (paths relative to its root): what MCP offers as resources. Owner only.",
            None,
            "WorkspaceFiles",
            false,
        ),
    );
    add(
        "/v1/workspace/file",
        "get",
        json!({
            "operationId": "WorkspaceFile",
            "summary": "One workspace Markdown file's text; only a path the listing offers. Owner only.",
            "parameters": [{ "name": "path", "in": "query", "required": true, "schema": { "type": "string", "minLength": 1 } }],
            "responses": ok("WorkspaceFile"),
        }),
    );
    add(
        "/v1/hooks/{name}",
        "post",
        json!({
            "operationId": "Hook",
            "summary": "An agent hook event. Never fails the caller: problems are reported in `error` with status 200.",
            "parameters": [{ "name": "name", "in": "path", "required": true, "schema": enumeration(&["session_start", "message_received", "message_sent", "before_tool_call", "after_tool_call", "before_compaction", "agent_end", "gateway_stop", "session_end", "tool_result_persist"]) }],
            "requestBody": body("HookRequest"),
            "responses": ok("HookOutcome"),
        }),
    );
    let options = json!({
        "type": "object",
        "additionalProperties": false,
        "properties": {
            "summary": nullable(summary()), "sensitivity": nullable(sensitivity.clone()), "scope": nullable(scope()), "tags": tags(),
            "confidence": nullable(unit()), "salience": nullable(unit()),
            "pinned": { "type": "boolean" }, "actor": nullable(actor()), "rationale": nullable(rationale())
        }
    });
    let ingest = |field: &str, schema: &str| json!({ "type": "object", "additionalProperties": false, "required": [field], "properties": { "options": reference("IngestOptions"), field: reference(schema) } });
    let who = json!({ "actor": actor(), "rationale": { "type": "string", "pattern": "\\S", "maxLength": Limits::default().max_rationale_bytes, "description": "Required: why history changes." } });
    let with_who = |mut extra: serde_json::Map<String, Value>| {
        for (k, v) in who.as_object().expect("object") {
            extra.insert(k.clone(), v.clone());
        }
        json!({ "type": "object", "additionalProperties": false, "required": ["rationale"], "properties": extra })
    };
    // A contest names the contesting record or the conflicting claim.
    let mut contest = with_who(serde_json::Map::from_iter([("by".to_string(), nullable(id())), ("claim".to_string(), nullable(string()))]));
    contest["anyOf"] =
        json!([{ "required": ["by"], "properties": { "by": id() } }, { "required": ["claim"], "properties": { "claim": text() } }]);
    let change = json!({
        "type": "object", "additionalProperties": false,
        "properties": {
            "payload": reference("Payload"), "summary": nullable(summary()), "tags": nullable(tags()),
            "sensitivity": nullable(sensitivity.clone()), "confidence": nullable(unit())
        }
    });
    let time = json!({ "type": "string", "format": "date-time" });
    let nullable_time = json!({ "type": "string", "format": "date-time", "nullable": true });
    // The typed answers, in their own `json!` (one literal would exceed the macro's
    // recursion limit); merged into the components below.
    let answers = json!({
        "CycleReport": {
            "type": "object",
            "required": ["at", "messages", "regex_facts", "llm_facts", "llm_skills", "reinforced", "superseded", "contested", "ingested", "retracted", "kept_newer", "corrections", "corrections_unmatched", "llm", "errors"],
            "properties": {
                "at": nullable_time, "messages": count(), "regex_facts": count(), "llm_facts": count(), "llm_skills": count(),
                "reinforced": count(), "superseded": count(), "contested": count(), "ingested": count(), "retracted": count(),
                "kept_newer": { "type": "integer", "minimum": 0, "description": "LLM decisions not applied because a newer statement holds the fact" },
                "corrections": { "type": "integer", "minimum": 0, "description": "the model's corrections applied to the known fact they name" },
                "corrections_unmatched": { "type": "integer", "minimum": 0, "description": "the model's corrections that named no known fact (not applied)" },
                "llm": { "type": "string", "description": "ok, disabled, backoff, idle, skipped: ..., or failed: ..." }, "errors": strings()
            }
        },
        "Metrics": {
            "type": "object",
            "required": ["path", "schema_version", "encrypted", "file_bytes", "total_records", "by_type", "live_by_type", "by_status", "pruned", "pinned", "audit_entries", "links"],
            "properties": {
                "path": string(), "schema_version": count(), "encrypted": { "type": "boolean" }, "file_bytes": count(), "total_records": count(),
                "by_type": counts(), "live_by_type": counts(), "by_status": counts(), "pruned": count(), "pinned": count(), "audit_entries": count(), "links": count()
            }
        },
        "EmbeddingStatus": {
            "type": "object", "nullable": true,
            "required": ["model", "dimension", "embedded", "pending", "indexed", "index_bytes", "search"],
            "properties": {
                "model": string(), "dimension": count(), "embedded": count(), "pending": count(), "indexed": count(), "index_bytes": count(),
                "search": enumeration(&["exact", "approximate", "pgvector"])
            }
        },
        "DaemonStatus": {
            "type": "object",
            "required": ["running", "pid", "version", "grpc_addr", "http_addr", "started_at", "uptime_seconds", "store", "encrypted", "total_records", "records_by_type", "live_records_by_type", "last_consolidation", "embedding", "consolidation_buffered", "errors_last_hour"],
            "properties": {
                "running": { "type": "boolean" }, "pid": count(), "version": string(), "grpc_addr": string(), "http_addr": string(),
                "started_at": time, "uptime_seconds": count(), "store": string(), "encrypted": { "type": "boolean" }, "total_records": count(),
                "records_by_type": counts(), "live_records_by_type": counts(),
                "last_consolidation": { "type": "object", "nullable": true, "description": "A CycleReport; null before the first cycle." },
                "embedding": reference("EmbeddingStatus"), "consolidation_buffered": count(), "errors_last_hour": count(),
                "supervisor": {
                    "type": "object", "required": ["pid", "restarts"],
                    "description": "Under `mneme up` only: the supervisor's pid and how often it restarted the daemon after a crash.",
                    "properties": { "pid": count(), "restarts": count() }
                }
            }
        },
        "OutcomeResult": {
            "type": "object", "required": ["record", "target", "salience_before", "salience_after"],
            "properties": { "record": reference("MemoryRecord"), "target": reference("MemoryRecord"), "salience_before": { "type": "number" }, "salience_after": { "type": "number" } }
        },
        "Brief": {
            "type": "object", "required": ["id", "memory_type", "status", "summary", "operation", "parent_ids", "created_at", "pruned"],
            "properties": {
                "id": string(), "memory_type": memory_type.clone(), "status": status.clone(), "summary": string(), "operation": string(),
                "parent_ids": strings(), "created_at": time, "pruned": { "type": "boolean" }
            }
        },
        "History": {
            "type": "object", "required": ["record", "current_salience", "ancestors", "descendants", "links", "audit", "hidden"],
            "properties": {
                "record": reference("MemoryRecord"), "current_salience": { "type": "number" },
                "ancestors": { "type": "array", "items": reference("Brief") }, "descendants": { "type": "array", "items": reference("Brief") },
                "links": { "type": "array", "items": {
                    "type": "object", "required": ["from", "to", "kind", "at", "note"],
                    "properties": { "from": string(), "to": string(), "kind": string(), "at": time, "note": string() }
                } },
                "audit": { "type": "array", "items": {
                    "type": "object", "required": ["seq", "record_id", "at", "actor", "action", "rationale", "details"],
                    "properties": { "seq": count(), "record_id": string(), "at": time, "actor": string(), "action": string(), "rationale": string(), "details": { "type": "object" } }
                } },
                "hidden": count()
            }
        },
        "Checkpoint": {
            "type": "object", "required": ["id", "end_id", "summary", "at"],
            "properties": { "id": count(), "end_id": count(), "summary": string(), "at": time }
        },
        "SyncState": {
            "type": "object", "required": ["unsummarized", "begin_id", "end_id", "last_checkpoint", "total"],
            "properties": {
                "unsummarized": count(), "begin_id": { "type": "integer", "nullable": true }, "end_id": { "type": "integer", "nullable": true },
                "last_checkpoint": { "type": "object", "nullable": true, "description": "A Checkpoint; null before the first." }, "total": count()
            }
        },
        "CheckpointResult": {
            "type": "object", "required": ["checkpoint", "already_existed", "covered"],
            "properties": { "checkpoint": reference("Checkpoint"), "already_existed": { "type": "boolean" }, "covered": count() }
        },
        "ForgetReport": {
            "type": "object",
            "required": ["dry_run", "records", "conversation_entries", "redacted_mentions", "workspace_chunks", "workspace_files", "files_rewritten", "wal_truncated"],
            "properties": {
                "dry_run": { "type": "boolean" },
                "records": { "type": "array", "items": { "type": "object", "required": ["id", "memory_type", "summary", "because"],
                    "properties": { "id": string(), "memory_type": string(), "summary": string(), "because": enumeration(&["chosen", "derived"]) } } },
                "conversation_entries": count(), "redacted_mentions": count(), "workspace_chunks": count(),
                "workspace_files": strings(), "files_rewritten": strings(), "wal_truncated": { "type": "boolean" }
            }
        },
        "FileHits": {
            "type": "object", "required": ["ranking", "hits"],
            "properties": { "ranking": enumeration(&["hybrid", "lexical"]), "hits": { "type": "array", "items": {
                "type": "object", "required": ["path", "start_line", "end_line", "heading", "snippet", "score", "memory_type", "freshness", "reads"],
                "properties": {
                    "path": string(), "start_line": count(), "end_line": count(), "heading": string(), "snippet": string(),
                    "score": { "type": "number", "description": "BM25 (lexical), or the fused reciprocal rank (hybrid)" },
                    "cosine": { "type": "number", "description": "hybrid: the chunk's cosine to the query" },
                    "related": { "type": "array", "items": { "type": "object", "properties": { "path": string(), "heading": string(), "cosine": { "type": "number" } } } },
                    "memory_type": enumeration(&["factual", "experiential", "procedural", "strategic"]),
                    "freshness": enumeration(&["active", "aging", "fading", "archived"]),
                    "reads": count()
                }
            } } }
        }
    });
    let mut schemas = json!({
        "Object": { "type": "object" },
        "Error": {
            "type": "object", "required": ["error"],
            "properties": { "error": { "type": "object", "required": ["code", "message"], "properties": { "code": string(), "message": string() } } }
        },
        "IngestOptions": options,
        "EventPayload": {
            "type": "object", "additionalProperties": false, "required": ["event_kind", "text"],
            "properties": { "event_kind": label(), "ref": nullable(string()), "sender": nullable(string()), "text": text(), "event_time": nullable(time.clone()) }
        },
        "ToolOutputPayload": {
            "type": "object", "additionalProperties": false, "required": ["tool"],
            "properties": { "tool": label(), "args": {}, "result": {}, "error": nullable(string()), "duration_ms": nullable(count()) }
        },
        "SemanticPayload": {
            "type": "object", "additionalProperties": false, "required": ["subject", "predicate", "object"],
            "description": "valid_from must not be after valid_to.",
            "properties": { "subject": text(), "predicate": text(), "object": text(), "valid_from": nullable(time.clone()), "valid_to": nullable(time.clone()), "evidence": strings() }
        },
        "WorkingPayload": {
            "type": "object", "additionalProperties": false, "required": ["thread_id", "state"],
            "properties": { "thread_id": label(), "state": text(), "next_actions": strings(), "open_questions": strings(), "summary": string() }
        },
        "IngestEventRequest": ingest("event", "EventPayload"),
        "IngestToolOutputRequest": ingest("output", "ToolOutputPayload"),
        "IngestObservationRequest": ingest("fact", "SemanticPayload"),
        "IngestWorkingStateRequest": ingest("state", "WorkingPayload"),
        "IngestOutcomeRequest": {
            "type": "object", "additionalProperties": false, "required": ["target_id", "outcome"],
            "properties": {
                "options": reference("IngestOptions"), "target_id": id(), "outcome": enumeration(&["success", "failure"]),
                "duration_ms": nullable(count()), "failure_mode": nullable(string()), "note": nullable(string()), "amount": nullable(amount())
            }
        },
        "RetrieveRequest": {
            "type": "object", "additionalProperties": false,
            "properties": {
                "query": string(), "types": { "type": "array", "items": memory_type }, "min_salience": nullable(unit()),
                "max_sensitivity": nullable(sensitivity.clone()), "scopes": nullable(json!({ "type": "array", "items": scope() })), "tags": tags(),
                "since": nullable(time.clone()), "until": nullable(time.clone()),
                "limit": { "type": "integer", "minimum": 1, "maximum": Limits::default().max_limit, "default": 10 }, "include_tombstones": { "type": "boolean" },
                "own_scopes": { "type": "boolean", "description": "Without scopes: only the caller's own memories (global ones for the owner, a narrowed key's own scopes), not every end user's." }
            }
        },
        "Lineage": {
            "type": "object", "required": ["parent_ids", "operation", "actor", "rationale", "timestamp"],
            "properties": {
                "parent_ids": strings(), "operation": enumeration(&["original", "supersede", "fork", "merge"]), "actor": string(),
                "rationale": string(), "timestamp": time
            }
        },
        "Salience": {
            "type": "object", "required": ["base", "reinforced_at", "pinned"],
            "properties": { "base": { "type": "number" }, "reinforced_at": time, "pinned": { "type": "boolean" } }
        },
        "MemoryRecord": {
            "type": "object",
            "required": ["id", "memory_type", "sensitivity", "scope", "tags", "summary", "payload", "confidence", "salience", "status", "lineage", "created_at", "updated_at", "event_time", "pruned_at"],
            "properties": {
                "id": string(), "memory_type": memory_type, "sensitivity": sensitivity, "scope": string(), "tags": strings(), "summary": string(),
                // Inline, not `allOf` a reference: OpenAPI 3.0's `nullable` only applies to a
                // `type` in the same schema object, so `nullable` beside `allOf` still refused null.
                "payload": { "type": "object", "nullable": true, "required": ["kind"], "description": "The payload, tagged by `kind` (see Payload); null once a prune sweep dropped it", "properties": { "kind": enumeration(&["event", "tool_output", "semantic", "competence", "working", "plan_graph"]) } },
                "confidence": { "type": "number" }, "salience": reference("Salience"),
                "status": enumeration(&["active", "contested", "retracted", "superseded"]), "lineage": reference("Lineage"),
                "created_at": time, "updated_at": time, "event_time": nullable_time, "pruned_at": nullable_time
            }
        },
        "RecordResponse": { "type": "object", "required": ["record", "current_salience"], "properties": { "record": reference("MemoryRecord"), "current_salience": { "type": "number" } } },
        "RetrieveResponse": {
            "type": "object", "required": ["hits"],
            "properties": { "hits": { "type": "array", "items": { "type": "object", "required": ["record", "current_salience", "score"], "properties": {
                "record": reference("MemoryRecord"), "current_salience": { "type": "number" }, "score": { "type": "object" },
                "outdated": {
                    "description": "Present when the record was said before a fact about the user changed and rests on the old value: it may no longer hold.",
                    "type": "object", "required": ["slot", "old", "new", "since", "fact", "by"],
                    "properties": { "slot": string(), "old": string(), "new": nullable(string()), "since": time.clone(), "fact": string(), "statement": string(), "by": enumeration(&["names_old", "topic"]) }
                }
            } } } }
        },
        "ReviseRequest": { "type": "object", "additionalProperties": false, "required": ["rationale"], "properties": { "change": change, "actor": actor(), "rationale": who["rationale"] } },
        "MergeRequest": {
            "type": "object", "additionalProperties": false, "required": ["ids", "rationale"],
            "properties": { "ids": { "type": "array", "items": id(), "minItems": 2 }, "change": change, "actor": actor(), "rationale": who["rationale"] }
        },
        "WhoRequest": with_who(serde_json::Map::new()),
        "ContestRequest": contest,
        "AdjustRequest": { "type": "object", "additionalProperties": false, "properties": { "amount": nullable(amount()), "actor": actor(), "rationale": rationale() } },
        "SalienceChange": { "type": "object", "required": ["id", "before", "after"], "properties": { "id": string(), "before": { "type": "number" }, "after": { "type": "number" } } },
        "ConversationRequest": {
            "type": "object", "additionalProperties": false, "required": ["channel", "content"],
            "properties": {
                "channel": name(), "user_id": nullable(name()), "direction": { "type": "string", "enum": ["in", "out"], "default": "in" },
                "priority": nullable(json!({ "type": "integer", "minimum": 1, "maximum": 3, "default": 3 })), "content": text(), "at": nullable(time.clone())
            }
        },
        "Conversation": {
            "type": "object", "required": ["id", "at", "channel", "user_id", "direction", "priority", "content"],
            "properties": {
                "id": { "type": "integer" }, "at": time, "channel": string(), "user_id": { "type": "string", "nullable": true },
                "direction": { "type": "string", "enum": ["in", "out"] }, "priority": { "type": "integer" }, "content": string()
            }
        },
        "Conversations": { "type": "array", "items": reference("Conversation") },
        "SyncFetchRequest": {
            "type": "object", "additionalProperties": false, "required": ["begin", "end"],
            "description": "An end before begin is an empty range.",
            "properties": { "begin": { "type": "integer", "minimum": 1, "maximum": i64::MAX }, "end": int64() }
        },
        "SyncCheckpointRequest": {
            "type": "object", "additionalProperties": false, "required": ["end_id", "summary"],
            "properties": { "end_id": { "type": "integer", "minimum": 0, "maximum": i64::MAX }, "summary": text() }
        },
        "SearchFilesRequest": {
            "type": "object", "additionalProperties": false, "required": ["query"],
            "properties": {
                "query": { "type": "string", "pattern": "[^\\W_]", "description": "at least one letter or digit" },
                "limit": { "type": "integer", "minimum": 1, "maximum": u64::MAX, "default": 10 },
                "ranking": { "type": "string", "enum": ["auto", "lexical", "semantic"], "default": "auto", "description": "auto: by words and meaning when the embedding model is attached, else by words; semantic: refused (412) without the model" }
            }
        },
        "HookRequest": {
            "description": "{\"event\": {...}, \"ctx\": {...}} or the same fields flat. Event: content|message|text, from|sender, timestamp, toolName, params, error, success, durationMs, compactingMessages, compactingCount, query, format, writeContextFile (session_start: also write the block to the workspace's memory/membrane/context.md), recall (message_received: also answer in `context` with the memories relevant to the message, found before it is stored, and the owner's queued instructions). Context: agentId, sessionKey, sessionId, channelId, userId (the end user: memory per user). Any body is accepted: a hook never fails its caller, so a body that is not a JSON object is answered 200 with the problem in `error`."
        },
    });
    if let (Some(all), Value::Object(typed)) = (schemas.as_object_mut(), answers) {
        all.extend(typed);
    }
    // Another map for the same reason.
    let forget = json!({
        "HookOutcome": { "type": "object", "properties": { "hook": string(), "context": { "description": "The block: Markdown text, or with \"format\": \"json\" an object (facts, and memories by type)", "oneOf": [{ "type": "string" }, { "type": "object" }] }, "record_ids": strings(), "error": string(), "result": { "description": "tool_result_persist: the result with <private> blocks removed" }, "files": strings() } },
        "ReflectTickRequest": {
            "type": "object", "additionalProperties": false,
            "properties": { "idle": { "type": "boolean", "nullable": true, "description": "Unset: decided from hook activity" }, "summary": nullable(string()), "dryRun": { "type": "boolean", "default": false } }
        },
        "ReflectTick": {
            "type": "object",
            "properties": {
                "status": enumeration(&["HEARTBEAT_OK", "DRY_RUN"]), "tickId": string(),
                "line": { "type": "object", "description": "The Step-4 heartbeat log line" },
                "output": { "type": "object", "description": "The Step-5 output line (insight or skip)" },
                "log": nullable(string()), "llm": { "type": "object" }, "archived": strings()
            }
        },
        "ReflectResult": { "type": "object", "description": "The status, or the log line recorded (`recorded`)" },
        "InnerResult": { "type": "object", "description": "The state and mood, or the context of a level" },
        "InnerEventRequest": {
            "description": "Tagged by `kind`; each kind takes only its own fields.",
            "oneOf": [
                { "type": "object", "additionalProperties": false, "required": ["kind"], "properties": { "kind": enumeration(&["user_message"]) } },
                { "type": "object", "additionalProperties": false, "required": ["kind", "what"],
                  "properties": { "kind": enumeration(&["mistake", "novelty", "repeat", "resolved"]), "what": string() } },
                { "type": "object", "additionalProperties": false, "required": ["kind", "topic"], "properties": { "kind": enumeration(&["spark"]), "topic": string() } },
                { "type": "object", "additionalProperties": false, "required": ["kind", "what", "since"],
                  "properties": { "kind": enumeration(&["pending"]), "what": string(), "since": { "type": "string", "format": "date-time" } } }
            ]
        },
        "ReflectPlaybook": {
            "type": "object", "required": ["base", "effective"],
            "properties": { "base": { "type": "string", "nullable": true }, "effective": { "type": "string", "nullable": true } }
        },
        "SalienceCurve": {
            "type": "object", "required": ["points", "now"],
            "properties": {
                "now": { "type": "string", "format": "date-time" },
                "points": { "type": "array", "items": { "type": "object", "required": ["at", "salience"], "properties": { "at": { "type": "string", "format": "date-time" }, "salience": { "type": "number" } } } }
            }
        },
        "RelayAck": { "type": "object", "required": ["ok"], "properties": { "ok": { "type": "boolean" }, "id": { "type": "integer" } } },
        "RelayFeedRequest": {
            "type": "object", "additionalProperties": false, "required": ["text"],
            "properties": { "text": text(), "priority": nullable(enumeration(&["low", "normal", "high", "urgent"])), "source": nullable(string()) }
        },
        "RelayFeed": {
            "type": "object", "required": ["ok", "messages"],
            "properties": { "ok": { "type": "boolean" }, "messages": { "type": "array", "items": { "type": "object", "required": ["id", "text", "priority", "ts"] } } }
        },
        "RelaySenseRequest": {
            "type": "object", "required": ["type"],
            "properties": { "type": enumeration(&["text", "context", "image"]), "ts": int64(), "ocr": nullable(string()), "meta": nullable(json!({ "type": "object", "description": "Read: app (the foreground app's name) and ssim (similarity to the last frame); other keys are kept." })) }
        },
        "RelayHealth": {
            "type": "object", "required": ["ok", "messages", "senseEvents", "agent"],
            "properties": {
                "ok": { "type": "boolean" }, "messages": { "type": "integer" }, "senseEvents": { "type": "integer" },
                "agent": { "type": "object", "required": ["enabled", "totalCalls", "totalTokens", "estimatedCost", "model"] }
            }
        },
        "RelayResult": {
            "type": "object", "required": ["id", "ts", "analysis", "context", "pushed", "model", "latencyMs"],
            "properties": { "id": { "type": "integer" }, "ts": { "type": "integer" }, "analysis": string(), "pushed": { "type": "boolean" }, "model": string() }
        },
        "RelayLast": { "type": "object", "required": ["ok", "result"], "properties": { "ok": { "type": "boolean" }, "result": { "type": "object", "nullable": true, "description": "A RelayResult; null before the first analysis." } } },
        "RelayHistory": { "type": "object", "required": ["ok", "results"], "properties": { "ok": { "type": "boolean" }, "results": { "type": "array", "items": { "$ref": "#/components/schemas/RelayResult" } } } },
        "RelayContext": {
            "type": "object", "required": ["ok", "context"],
            "properties": { "ok": { "type": "boolean" }, "context": { "type": "object", "required": ["currentApp", "audio", "screen", "audioCount", "screenCount", "windowMs"] } }
        },
        "RelayConfigRequest": {
            "type": "object", "additionalProperties": false,
            "properties": {
                "enabled": nullable(json!({ "type": "boolean" })), "intervalMs": nullable(json!({ "type": "integer", "minimum": 100, "maximum": 86_400_000 })),
                "model": nullable(text()), "maxAge": nullable(json!({ "type": "integer", "minimum": 1000, "maximum": 86_400_000 })),
                "pushToFeed": nullable(json!({ "type": "boolean" })), "temperature": nullable(json!({ "type": "number", "minimum": 0, "maximum": 2 }))
            }
        },
        "RelayConfigResult": {
            "type": "object", "required": ["ok", "config"],
            "properties": { "ok": { "type": "boolean" }, "config": { "type": "object", "required": ["enabled", "intervalMs", "model", "maxAge", "pushToFeed", "temperature"] } }
        },
        "RelayTickResult": { "type": "object", "required": ["ok", "tick"], "properties": { "ok": { "type": "boolean" }, "tick": { "type": "object", "required": ["outcome"] } } },
        "InnerRunRequest": {
            "type": "object", "additionalProperties": false, "required": ["job"],
            "properties": {
                "job": enumeration(&["brain_loop", "reflect", "memory", "dream", "chronicle", "evolve"]),
                "ifTriggered": { "type": "boolean", "default": false }, "dryRun": { "type": "boolean", "default": false }
            }
        },
        "InnerWriteRequest": {
            "type": "object", "additionalProperties": false, "required": ["job", "path", "content"],
            "properties": {
                "job": enumeration(&["brain_loop", "reflect", "memory", "dream", "chronicle", "evolve"]),
                "path": string(), "content": string(), "append": { "type": "boolean", "default": false }
            }
        },
        "ReflectFeedbackRequest": {
            "type": "object", "additionalProperties": false, "required": ["score"],
            "properties": {
                "outputId": nullable(text()), "score": { "type": "number", "minimum": -1, "maximum": 1 },
                "errorCleared": nullable(json!({ "type": "boolean" })), "reEscalated": nullable(json!({ "type": "boolean" })), "dwellMs": nullable(count())
            }
        },
        "ReflectSpawnResultRequest": {
            "type": "object", "additionalProperties": false, "required": ["spawnId", "outcome"],
            "properties": { "spawnId": text(), "outcome": enumeration(&["useful", "ignored", "error"]), "note": nullable(string()) }
        },
        "ForgetRequest": {
            "type": "object", "additionalProperties": false,
            "description": "At least one of ids, query, subject, user; several are an intersection. A query takes every record whose own text holds all its words. A real run needs a reason.",
            "properties": {
                "ids": { "type": "array", "items": id() }, "query": nullable(string()), "subject": nullable(string()),
                "user": nullable(json!({ "type": "string", "pattern": "^\\s*$|[\\w.@]", "description": "An end user's id: letters, digits, . _ @ and -" })),
                "reason": string(), "dry_run": { "type": "boolean", "default": false }, "actor": nullable(string()),
                "limit": nullable(json!({ "type": "integer", "minimum": 0, "maximum": u64::MAX, "description": "Refuse (erasing nothing) when more records match; 0 or absent: no limit." }))
            },
            "allOf": [
                { "anyOf": [
                    { "required": ["ids"], "properties": { "ids": { "minItems": 1 } } },
                    { "required": ["query"], "properties": { "query": text() } },
                    { "required": ["subject"], "properties": { "subject": text() } },
                    { "required": ["user"], "properties": { "user": { "type": "string", "pattern": "[\\w.@]" } } }
                ] },
                { "anyOf": [
                    { "required": ["dry_run"], "properties": { "dry_run": { "enum": [true] } } },
                    { "required": ["reason"], "properties": { "reason": text() } }
                ] }
            ]
        },
    });
    if let (Some(all), Value::Object(typed)) = (schemas.as_object_mut(), forget) {
        all.extend(typed);
    }
    // Knowledge modules and the sync engine.
    let modules = json!({
        "ModuleView": {
            "type": "object", "required": ["id", "locked", "patternLines", "problems"],
            "properties": {
                "id": string(), "status": { "type": "string", "enum": ["active", "suspended", "disabled"], "nullable": true },
                "priority": { "type": "integer", "nullable": true }, "locked": { "type": "boolean" }, "activatedAt": { "type": "string", "nullable": true },
                "lastTriggered": { "type": "string", "nullable": true }, "name": { "type": "string", "nullable": true }, "patternLines": { "type": "integer" },
                "problems": strings()
            }
        },
        "StackEntry": { "type": "object", "required": ["id", "priority"], "properties": { "id": string(), "priority": { "type": "integer" } } },
        "ModuleList": {
            "type": "object", "required": ["modules", "unregistered", "stack"],
            "properties": {
                "modules": { "type": "array", "items": { "$ref": "#/components/schemas/ModuleView" } },
                "unregistered": { "type": "array", "items": { "$ref": "#/components/schemas/ModuleView" } },
                "stack": { "type": "array", "items": { "$ref": "#/components/schemas/StackEntry" } }
            }
        },
        "ModuleInfo": {
            "allOf": [{ "$ref": "#/components/schemas/ModuleView" }],
            "properties": { "manifest": { "type": "object", "nullable": true }, "entry": { "type": "object", "nullable": true }, "path": string() }
        },
        "ModuleChangeRequest": {
            "description": "activate takes an optional priority, priority a required one, suspend and disable none.",
            "oneOf": [
                { "type": "object", "additionalProperties": false, "required": ["action"],
                  "properties": { "action": enumeration(&["activate"]), "priority": nullable(int64()) } },
                { "type": "object", "additionalProperties": false, "required": ["action", "priority"],
                  "properties": { "action": enumeration(&["priority"]), "priority": int64() } },
                { "type": "object", "additionalProperties": false, "required": ["action"], "properties": { "action": enumeration(&["suspend", "disable"]) } }
            ]
        },
        "ModuleChange": {
            "type": "object", "required": ["id", "action", "status", "priority", "stack", "effectiveChanged"],
            "properties": {
                "id": string(), "action": enumeration(&["activated", "suspended", "disabled", "priority", "unchanged"]),
                "status": enumeration(&["active", "suspended", "disabled"]), "priority": { "type": "integer" },
                "stack": { "type": "array", "items": { "$ref": "#/components/schemas/StackEntry" } }, "effectiveChanged": { "type": "boolean" }
            }
        },
        "ModuleExtractRequest": {
            "type": "object", "additionalProperties": false, "required": ["domain"],
            "properties": {
                "domain": text(), "name": nullable(string()), "keywords": strings(), "filePatterns": strings(),
                "priority": nullable(json!({ "type": "integer", "minimum": 50, "maximum": 100 })), "days": nullable(json!({ "type": "integer", "minimum": 1, "maximum": mneme_reflect::extract::MAX_DAYS })),
                "dryRun": { "type": "boolean", "default": false }
            }
        },
        "ModuleExtracted": {
            "type": "object", "required": ["id", "status", "manifest", "patterns", "stage", "activate"],
            "properties": {
                "id": string(), "path": { "type": "string", "nullable": true }, "status": string(), "manifest": { "type": "object" }, "patterns": string(),
                "established": { "type": "integer" }, "emerging": { "type": "integer" }, "vocabulary": { "type": "integer" },
                "stage": { "type": "object", "description": "ok (the model) or fallback with the reason" }, "read": { "type": "object" }, "activate": string()
            }
        },
        "WorkspaceFiles": {
            "type": "object", "required": ["files", "knowledge"], "additionalProperties": false,
            "properties": { "files": strings(), "knowledge": { "type": "array", "description": "Each indexed file: path, memory_type, freshness, modified, reads, last_read, chunks, related files, read entries", "items": { "type": "object" } } }
        },
        "WorkspaceFile": {
            "type": "object", "required": ["path", "text"], "additionalProperties": false,
            "properties": { "path": string(), "text": string() }
        },
        "WorkspaceSyncReport": {
            "type": "object", "required": ["files", "effective", "directories"],
            "properties": {
                "files": { "type": "array", "items": { "type": "object", "required": ["path", "policy", "action", "reason"], "properties": {
                    "path": string(), "policy": enumeration(&["always-overwrite", "deploy-once", "managed-section"]),
                    "action": enumeration(&["created", "updated", "unchanged", "skipped"]), "reason": string() } } },
                "repaired": { "type": "object", "nullable": true, "description": "A corrupt registry set aside and rebuilt" },
                "effective": { "type": "object" }, "directories": strings()
            }
        },
    });
    if let (Some(all), Value::Object(typed)) = (schemas.as_object_mut(), modules) {
        all.extend(typed);
    }
    let payloads = json!({
        "CompetencePayload": {
            "type": "object", "additionalProperties": false, "required": ["skill"],
            "properties": {
                "skill": text(), "triggers": strings(), "steps": strings(),
                "performance": {
                    "type": "object", "required": ["success_count", "failure_count", "success_rate"],
                    "properties": {
                        "success_count": count(), "failure_count": count(), "success_rate": unit(),
                        "failure_modes": counts(), "avg_duration_ms": nullable(json!({ "type": "number" })), "timed_count": count()
                    }
                }
            }
        },
        "PlanGraphPayload": {
            "type": "object", "additionalProperties": false, "required": ["intent"],
            "properties": {
                "intent": text(),
                "nodes": { "type": "array", "items": { "type": "object", "additionalProperties": false, "required": ["id", "label"],
                    "properties": { "id": string(), "label": string(), "status": nullable(string()) } } },
                "edges": { "type": "array", "items": { "type": "object", "additionalProperties": false, "required": ["from", "to"],
                    "properties": { "from": string(), "to": string(), "kind": nullable(string()) } } }
            }
        }
    });
    if let (Some(all), Value::Object(typed)) = (schemas.as_object_mut(), payloads) {
        all.extend(typed);
    }
    let variants: Vec<Value> = [
        ("event", "EventPayload"),
        ("tool_output", "ToolOutputPayload"),
        ("semantic", "SemanticPayload"),
        ("competence", "CompetencePayload"),
        ("working", "WorkingPayload"),
        ("plan_graph", "PlanGraphPayload"),
    ]
    .iter()
    .map(|(kind, name)| tagged(kind, &schemas[name]))
    .collect();
    schemas["Payload"] = json!({ "description": "A payload tagged by `kind`, with that payload's fields (no others).", "oneOf": variants });
    optional_bodies(&mut paths, &schemas);
    json!({
        "openapi": "3.0.3",
        "info": {
            "title": "mneme",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "Local-first memory for AI agents. The same operations are served over gRPC (package mneme.v1)."
        },
        "servers": [{ "url": "http://127.0.0.1:18791" }],
        // Anonymous or Bearer: a loopback daemon without [[principals]] needs no key.
        "security": [{}, { "bearer": [] }],
        "paths": Value::Object(paths),
        "components": {
            "securitySchemes": { "bearer": { "type": "http", "scheme": "bearer", "description": "Required when the daemon has [[principals]] configured." } },
            "responses": { "Error": { "description": "An error", "content": { "application/json": { "schema": { "$ref": "#/components/schemas/Error" } } } } },
            "schemas": schemas
        }
    })
}
