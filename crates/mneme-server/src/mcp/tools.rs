//! The MCP tools: what a model sees (names, descriptions, JSON schemas, annotations) and
//! how each call becomes requests to the HTTP API through a [`Backend`]. Every call goes
//! through the HTTP routes, so policy, validation, `<private>` stripping and error
//! messages are exactly those of the HTTP API: MCP is a third front end over the one
//! policy-checked door, never a side entrance.

use serde_json::{Map, Value, json};

use super::Backend;

/// One tool as listed to the model.
#[derive(Debug, Clone)]
pub struct ToolSpec {
    pub name: &'static str,
    pub title: &'static str,
    pub description: &'static str,
    /// JSON Schema of the arguments (an object schema).
    pub schema: Value,
    pub read_only: bool,
    pub destructive: bool,
    pub idempotent: bool,
}

/// A failed tool call: an MCP tool error (`isError: true`) with this text, the same
/// message the HTTP API gives.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolError(pub String);

type ToolResult = Result<Value, ToolError>;

const TYPES: [&str; 5] = ["episodic", "semantic", "competence", "working", "plan_graph"];
const SENSITIVITIES: [&str; 5] = ["public", "low", "medium", "high", "critical"];

fn string(description: &str) -> Value {
    json!({ "type": "string", "description": description })
}

fn strings(description: &str) -> Value {
    json!({ "type": "array", "items": { "type": "string" }, "description": description })
}

fn object(properties: Value, required: &[&str]) -> Value {
    json!({ "type": "object", "properties": properties, "required": required, "additionalProperties": false })
}

fn options_properties() -> Map<String, Value> {
    let mut p = Map::new();
    p.insert("scope".into(), string("Whose memory this is: `user:<id>` for one end user, `agent:<name>`, or omit for global."));
    p.insert(
        "sensitivity".into(),
        json!({ "type": "string", "enum": SENSITIVITIES, "description": "How private it is (default low). Secrets and health data: high or critical." }),
    );
    p.insert("tags".into(), strings("Labels to filter by later, e.g. `project:atlas`."));
    p
}

fn with_options(mut properties: Map<String, Value>) -> Value {
    properties.extend(options_properties());
    Value::Object(properties)
}

/// The tools, in the order they are listed.
pub fn tools() -> Vec<ToolSpec> {
    let mut remember = Map::new();
    remember.insert("text".into(), string("What happened or was said, in full. `<private>…</private>` spans are never stored."));
    remember.insert("sender".into(), string("Who said or did it (a user id or name)."));
    remember.insert("kind".into(), string("What kind of event: message (default), note, decision, ..."));
    remember.insert("event_time".into(), string("When it happened (RFC 3339); default now."));
    let mut fact = Map::new();
    fact.insert("subject".into(), string("Who or what the fact is about, e.g. `dana`."));
    fact.insert("predicate".into(), string("The relation, e.g. `lives in`, `prefers`, `works at`."));
    fact.insert("object".into(), string("The value, e.g. `Hamburg`."));
    fact.insert("valid_from".into(), string("Since when it holds (RFC 3339); default now."));
    vec![
        ToolSpec {
            name: "remember",
            title: "Remember an event",
            description: "Store something that happened or was said (a message, a decision, a note) as an episodic memory. \
                          Facts stated in it are extracted by the daemon's consolidation. Use remember_fact for a fact you \
                          already know in subject/predicate/object form. Returns the new record.",
            schema: object(with_options(remember), &["text"]),
            read_only: false,
            destructive: false,
            idempotent: false,
        },
        ToolSpec {
            name: "remember_fact",
            title: "Remember a fact",
            description: "Store a fact as subject / predicate / object (`dana` / `lives in` / `Hamburg`). To change a fact \
                          that is already stored, use correct on its id instead, so the history keeps the old value.",
            schema: object(with_options(fact), &["subject", "predicate", "object"]),
            read_only: false,
            destructive: false,
            idempotent: false,
        },
        ToolSpec {
            name: "recall",
            title: "Recall memories",
            description: "Search memory by meaning and words (`where does dana live`; empty: the most salient recent). \
                          Returns each memory's id, type, text, date and score (full=true: whole records). Name the end \
                          user with `user`: without `user` or `scopes` only global memories are searched.",
            schema: object(
                json!({
                    "query": string("What to look for, in plain words. Any text is safe."),
                    "types": { "type": "array", "items": { "type": "string", "enum": TYPES }, "description": "Memory types to search (default all)." },
                    "user": string("The end user this is for (`dana`): their memories and global ones are searched."),
                    "scopes": strings("Scopes to search, e.g. [`user:dana`]; global memories are always included."),
                    "tags": strings("Only memories with all of these tags."),
                    "since": string("Only memories from this time on (RFC 3339)."),
                    "until": string("Only memories up to this time (RFC 3339)."),
                    "limit": { "type": "integer", "minimum": 1, "maximum": 100, "description": "At most this many (default 10)." },
                    "include_tombstones": { "type": "boolean", "description": "Also superseded, retracted and pruned memories (default false)." },
                    "full": { "type": "boolean", "description": "Whole records with every score part instead of the compact hits (default false)." }
                }),
                &[],
            ),
            read_only: true,
            destructive: false,
            idempotent: true,
        },
        ToolSpec {
            name: "show",
            title: "Show a memory and its history",
            description: "One memory by id, superseded or retracted ones included; with history=true also its lineage \
                          (what it replaced, what replaced it), links and audit log.",
            schema: object(
                json!({
                    "id": string("The record id (from recall)."),
                    "history": { "type": "boolean", "description": "Also return lineage, links and the audit log (default false)." }
                }),
                &["id"],
            ),
            read_only: true,
            destructive: false,
            idempotent: true,
        },
        ToolSpec {
            name: "correct",
            title: "Correct a memory",
            description: "Replace a memory with a corrected version. The old one stays in the history as superseded, \
                          linked to the new one, with your rationale. For a fact give the changed subject, predicate or \
                          object. Events (what `remember` stores) are kept as they happened: for one give the corrected \
                          text, stored as a new event tagged `correction` that names the old one (forget the old one if \
                          it must go).",
            schema: object(
                json!({
                    "id": string("The record to correct."),
                    "rationale": string("Why it is corrected (kept in the history), e.g. `dana said she moved`."),
                    "object": string("Facts: the new value."),
                    "subject": string("Facts: the new subject."),
                    "predicate": string("Facts: the new relation."),
                    "text": string("Events: the corrected text (a new event; the old one stays)."),
                    "summary": string("A new one-line summary.")
                }),
                &["id", "rationale"],
            ),
            read_only: false,
            destructive: false,
            idempotent: false,
        },
        ToolSpec {
            name: "retract",
            title: "Retract a memory",
            description: "Withdraw a fact (or another non-event memory) that was wrong. It is kept as a tombstone with \
                          your rationale and no longer recalled. Events are kept as they happened and cannot be \
                          withdrawn: correct one with its corrected text, or have the owner forget it.",
            schema: object(json!({ "id": string("The record to retract."), "rationale": string("Why.") }), &["id", "rationale"]),
            read_only: false,
            destructive: false,
            idempotent: false,
        },
        ToolSpec {
            name: "contest",
            title: "Contest a memory",
            description: "Mark a memory as disputed when you have conflicting information but do not know which is \
                          right. It stays recallable, flagged as contested.",
            schema: object(
                json!({
                    "id": string("The disputed record."),
                    "claim": string("The conflicting claim, in words."),
                    "by": string("The id of a record that contradicts it, if there is one."),
                    "rationale": string("Why.")
                }),
                &["id", "rationale"],
            ),
            read_only: false,
            destructive: false,
            idempotent: false,
        },
        ToolSpec {
            name: "feedback",
            title: "Reinforce or penalize a memory",
            description: "Tell memory whether a recalled memory helped: reinforce raises its salience and restarts its \
                          fading; penalize lowers it.",
            schema: object(
                json!({
                    "id": string("The record."),
                    "op": { "type": "string", "enum": ["reinforce", "penalize"], "description": "reinforce when it helped, penalize when it misled." },
                    "amount": { "type": "number", "exclusiveMinimum": 0, "maximum": 1, "description": "How much (default 0.1)." },
                    "rationale": string("Why (optional).")
                }),
                &["id", "op"],
            ),
            read_only: false,
            destructive: false,
            idempotent: false,
        },
        ToolSpec {
            name: "session_context",
            title: "Memory context for a session",
            description: "The block mneme injects at the start of a session: what is true now about the user, then \
                          recent and salient memories. Call it at the start of a conversation.",
            schema: object(
                json!({
                    "session_id": string("The session's id (default `mcp`)."),
                    "user_id": string("The end user the session serves; their memories are included with the global ones.")
                }),
                &[],
            ),
            read_only: true,
            destructive: false,
            idempotent: true,
        },
        ToolSpec {
            name: "search_files",
            title: "Search the workspace's memory files",
            description: "Search the agent's Markdown memory files (profile, people, projects, session logs) by words, and by \
                          meaning when the embedding model is installed: file, line range, heading, snippet, memory type, \
                          freshness and related entries per hit. Owner only.",
            schema: object(
                json!({
                    "query": string("What to look for."),
                    "limit": { "type": "integer", "minimum": 1, "maximum": 100, "description": "At most this many (default 10)." },
                    "ranking": { "type": "string", "enum": ["auto", "lexical", "semantic"], "description": "auto (default): words and meaning when the model is installed; semantic requires the model." }
                }),
                &["query"],
            ),
            read_only: true,
            destructive: false,
            idempotent: true,
        },
        ToolSpec {
            name: "memory_sync",
            title: "Conversation log and memory sync",
            description: "The conversation log flow (owner only). op=log appends a message; after updating the memory \
                          files with what agent_state's sync_status and sync_fetch show, op=checkpoint marks the \
                          conversations summarized up to end_id.",
            schema: object(
                json!({
                    "op": { "type": "string", "enum": ["log", "checkpoint"] },
                    "end_id": { "type": "integer", "description": "checkpoint: the last conversation id summarized." },
                    "summary": string("checkpoint: what was summarized."),
                    "channel": string("log: where the message came from (telegram, web, ...)."),
                    "content": string("log: the message."),
                    "user_id": string("log: who said it."),
                    "direction": { "type": "string", "enum": ["in", "out"], "description": "log: in (to the agent, default) or out." }
                }),
                &["op"],
            ),
            read_only: false,
            destructive: false,
            idempotent: false,
        },
        ToolSpec {
            name: "forget",
            title: "Forget for good",
            description: "Erase memories everywhere they are stored (text, indexes, vectors, conversation log), leaving \
                          only a tombstone. For requests like `forget my address`. Owner only. Run with dry_run=true \
                          first to see what matches; it cannot be undone.",
            schema: object(
                json!({
                    "ids": strings("Record ids to erase."),
                    "query": string("Erase the memories whose text matches these words."),
                    "subject": string("Erase a person: facts about them and the messages they sent."),
                    "user": string("Erase an end user: everything in their `user:<id>` scope."),
                    "dry_run": { "type": "boolean", "description": "Only show what would be erased (default false)." },
                    "reason": string("Why (kept in the audit log; do not repeat what is forgotten).")
                }),
                &[],
            ),
            read_only: false,
            destructive: true,
            idempotent: true,
        },
        ToolSpec {
            name: "inner",
            title: "Inner life",
            description: "Change the agent's inner life (owner only; agent_state reads it): op=event records what moved \
                          it (kind: user_message, mistake, spark, novelty, repeat, pending, resolved; what, or since for \
                          pending); op=run runs a job now (job: brain_loop, reflect, memory, dream, chronicle, evolve); \
                          op=write writes (or, with append=false, replaces) a file of a job (job, path, content), refused \
                          outside that job's files.",
            schema: object(
                json!({
                    "op": { "type": "string", "enum": ["event", "run", "write"] },
                    "job": { "type": "string", "enum": ["brain_loop", "reflect", "memory", "dream", "chronicle", "evolve"] },
                    "path": string("write: the workspace-relative file."),
                    "content": string("write: the text."),
                    "append": { "type": "boolean", "description": "write: append instead of replacing." },
                    "kind": { "type": "string", "enum": ["user_message", "mistake", "spark", "novelty", "repeat", "pending", "resolved"] },
                    "what": string("event: what it is about (the topic, for a spark)."),
                    "since": string("event pending: since when (RFC 3339).")
                }),
                &["op"],
            ),
            read_only: false,
            destructive: true,
            idempotent: false,
        },
        ToolSpec {
            name: "modules",
            title: "Knowledge modules",
            description: "Change the knowledge modules merged by priority into the agent's playbook (owner only). \
                          activate (at priority), suspend, disable, priority: one module (locked ones stay active); \
                          extract: a new, suspended module from the playbook and recent logs (id, domain, keywords); \
                          sync: redeploy the agent's files and regenerate the playbook.",
            schema: object(
                json!({
                    "op": { "type": "string", "enum": ["activate", "suspend", "disable", "priority", "extract", "sync"] },
                    "id": string("The module's id (all ops but sync)."),
                    "priority": { "type": "integer", "description": "activate (optional), priority (required)." },
                    "domain": string("extract: what the module is about."),
                    "keywords": strings("extract: trigger keywords (default: the domain's words)."),
                    "dry_run": { "type": "boolean", "description": "extract: show the module without writing it." }
                }),
                &["op"],
            ),
            read_only: false,
            destructive: false,
            idempotent: false,
        },
        ToolSpec {
            name: "reflection",
            title: "The reflection heartbeat",
            description: "Report to, or run, the heartbeat that curates the agent's playbook (owner only; agent_state \
                          shows its status). op=feedback reports how a heartbeat output went (score -1..1, output_id from the delivered tip or insight); \
                          op=spawn_result reports what a spawned task came to (useful, ignored, error); op=tick runs a \
                          tick now (dry_run to only see it).",
            schema: object(
                json!({
                    "op": { "type": "string", "enum": ["feedback", "spawn_result", "tick"] },
                    "output_id": string("feedback: the output's id (default: the latest output)."),
                    "score": { "type": "number", "minimum": -1, "maximum": 1, "description": "feedback: -1 harmful .. 1 very useful." },
                    "spawn_id": string("spawn_result: the id in the spawn instruction."),
                    "outcome": { "type": "string", "enum": ["useful", "ignored", "error"], "description": "spawn_result: what came of it." },
                    "note": string("spawn_result: what happened."),
                    "dry_run": { "type": "boolean", "description": "tick: compute, write nothing." }
                }),
                &["op"],
            ),
            read_only: false,
            destructive: false,
            idempotent: false,
        },
        ToolSpec {
            name: "agent_state",
            title: "Read the agent's state",
            description: "Read-only views (owner only): sync_status / sync_fetch (begin..=end): conversations not yet \
                          summarized into the memory files; inner_status: how the agent is, with hints; inner_context: a \
                          level's context (1..4); modules / module (id): knowledge modules; reflection_status: the last \
                          heartbeat ticks and their directive.",
            schema: object(
                json!({
                    "op": { "type": "string", "enum": ["sync_status", "sync_fetch", "inner_status", "inner_context", "modules", "module", "reflection_status"] },
                    "begin": { "type": "integer", "description": "sync_fetch: first conversation id." },
                    "end": { "type": "integer", "description": "sync_fetch: last conversation id (inclusive)." },
                    "level": { "type": "integer", "minimum": 1, "maximum": 4, "description": "inner_context: 1..4 (default 1)." },
                    "id": string("module: the module's id.")
                }),
                &["op"],
            ),
            read_only: true,
            destructive: false,
            idempotent: true,
        },
    ]
}

/// `agent_state`'s read operations, as the tool and operation that serve them.
fn agent_state_target(op: &str) -> Result<(&'static str, &'static str), ToolError> {
    Ok(match op {
        "sync_status" => ("memory_sync", "status"),
        "sync_fetch" => ("memory_sync", "fetch"),
        "inner_status" => ("inner", "status"),
        "inner_context" => ("inner", "context"),
        "modules" => ("modules", "list"),
        "module" => ("modules", "info"),
        "reflection_status" => ("reflection", "status"),
        other => {
            return Err(ToolError(format!(
                "op {other:?}: sync_status, sync_fetch, inner_status, inner_context, modules, module or reflection_status"
            )));
        }
    })
}

/// The string argument `name`, if given.
fn text<'a>(args: &'a Map<String, Value>, name: &str) -> Result<Option<&'a str>, ToolError> {
    match args.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(other) => Err(ToolError(format!("{name}: expected a string, got {other}"))),
    }
}

fn required<'a>(args: &'a Map<String, Value>, name: &str) -> Result<&'a str, ToolError> {
    text(args, name)?.ok_or_else(|| ToolError(format!("{name} is required")))
}

/// The arguments `names`, copied as given (absent ones left out).
fn pick(args: &Map<String, Value>, names: &[&str]) -> Map<String, Value> {
    names.iter().filter_map(|n| args.get(*n).filter(|v| !v.is_null()).map(|v| ((*n).to_string(), v.clone()))).collect()
}

/// Refuses arguments the tool does not know (a model's typo should not pass silently),
/// and arguments of another JSON type than the schema's (`"dry_run": "true"` must not run
/// the real action).
fn check_known(spec: &ToolSpec, args: &Map<String, Value>) -> Result<(), ToolError> {
    let known = spec.schema["properties"].as_object();
    for (name, value) in args {
        let expected = known.and_then(|k| k.get(name)).and_then(|p| p["type"].as_str());
        let fits = match expected {
            _ if value.is_null() => true,
            Some("boolean") => value.is_boolean(),
            Some("string") => value.is_string(),
            Some("integer") => value.is_i64() || value.is_u64(),
            Some("number") => value.is_number(),
            Some("array") => value.is_array(),
            Some("object") => value.is_object(),
            _ => true,
        };
        if !fits {
            return Err(ToolError(format!("{name}: expected a {}, got {value}", expected.unwrap_or_default())));
        }
        if !known.is_some_and(|k| k.contains_key(name)) {
            let list: Vec<&String> = known.map(|k| k.keys().collect()).unwrap_or_default();
            return Err(ToolError(format!(
                "unknown argument {name:?} for {}; it takes {}",
                spec.name,
                list.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", ")
            )));
        }
    }
    Ok(())
}

/// Runs tool `name` with `args` through `backend`; the answer is the HTTP API's JSON.
pub async fn call(backend: &dyn Backend, name: &str, args: Map<String, Value>) -> ToolResult {
    let Some(spec) = tools().into_iter().find(|t| t.name == name) else {
        let names: Vec<&str> = tools().iter().map(|t| t.name).collect();
        return Err(ToolError(format!("no tool named {name:?}; the tools are {}", names.join(", "))));
    };
    check_known(&spec, &args)?;
    // The read-only views run as the operations of the tools that also change things.
    let (name, args) = if name == "agent_state" {
        let (tool, op) = agent_state_target(required(&args, "op")?)?;
        let mut args = args.clone();
        args.insert("op".into(), json!(op));
        (tool, args)
    } else {
        (name, args)
    };
    let send = |method: &'static str, path: String, body: Option<Value>| backend.send(method, path, body);
    let id_path = |suffix: &str| -> Result<String, ToolError> {
        let id = required(&args, "id")?;
        Ok(format!("/v1/records/{}{suffix}", urlencode(id)))
    };
    let who = |args: &Map<String, Value>| -> Result<Value, ToolError> {
        Ok(json!({ "actor": "mcp", "rationale": text(args, "rationale")?.unwrap_or_default() }))
    };
    match name {
        "remember" => {
            let mut event = Map::new();
            event.insert("event_kind".into(), json!(text(&args, "kind")?.unwrap_or("message")));
            event.insert("text".into(), json!(required(&args, "text")?));
            event.extend(pick(&args, &["sender", "event_time"]));
            let mut options = pick(&args, &["scope", "sensitivity", "tags"]);
            options.insert("actor".into(), json!("mcp"));
            send("POST", "/v1/ingest/event".into(), Some(json!({ "event": event, "options": options }))).await
        }
        "remember_fact" => {
            let mut fact = pick(&args, &["subject", "predicate", "object", "valid_from"]);
            for n in ["subject", "predicate", "object"] {
                required(&args, n)?;
            }
            fact.entry("evidence").or_insert(json!([]));
            let mut options = pick(&args, &["scope", "sensitivity", "tags"]);
            options.insert("actor".into(), json!("mcp"));
            send("POST", "/v1/ingest/observation".into(), Some(json!({ "fact": fact, "options": options }))).await
        }
        "recall" => {
            let mut request = pick(&args, &["query", "types", "scopes", "tags", "since", "until", "include_tombstones"]);
            request.insert("limit".into(), args.get("limit").cloned().unwrap_or(json!(10)));
            // No user and no scopes: the caller's own memories (the owner's global ones, a
            // narrowed key's own scopes), never every end user's.
            if let Some(user) = text(&args, "user")? {
                let scope = mneme_core::Scope::user(user).ok_or_else(|| ToolError(format!("user {user:?} names no user")))?;
                let mut scopes: Vec<Value> = request.get("scopes").and_then(Value::as_array).cloned().unwrap_or_default();
                scopes.push(json!(scope.as_str()));
                request.insert("scopes".into(), Value::Array(scopes));
            } else if !request.contains_key("scopes") {
                request.insert("own_scopes".into(), json!(true));
            }
            let answer = send("POST", "/v1/retrieve".into(), Some(Value::Object(request))).await?;
            if args.get("full").and_then(Value::as_bool).unwrap_or(false) {
                return Ok(answer);
            }
            let hits: Vec<Value> = answer["hits"].as_array().map(|hits| hits.iter().map(compact_hit).collect()).unwrap_or_default();
            Ok(json!({ "hits": hits }))
        }
        "show" => {
            let record = send("GET", id_path("")?, None).await?;
            if args.get("history").and_then(Value::as_bool).unwrap_or(false) {
                let history = send("GET", id_path("/history")?, None).await?;
                return Ok(json!({ "record": record, "history": history }));
            }
            Ok(record)
        }
        "correct" => {
            let current = send("GET", id_path("")?, None).await?;
            let record = current.get("record").unwrap_or(&current);
            if record["memory_type"] == "episodic" {
                return correct_event(record, &args, backend).await;
            }
            let mut payload = record.get("payload").cloned().filter(|p| p.is_object()).ok_or_else(|| {
                ToolError("this record's payload was pruned; supersede it over the HTTP API with a whole new payload".into())
            })?;
            let mut changed = false;
            let kind = payload["kind"].as_str().unwrap_or_default().to_string();
            for (arg, field, kinds) in [
                ("object", "object", "semantic"),
                ("subject", "subject", "semantic"),
                ("predicate", "predicate", "semantic"),
                ("text", "text", "event"),
            ] {
                if let Some(v) = text(&args, arg)? {
                    if kind != kinds {
                        return Err(ToolError(format!("{arg} applies to {kinds} records; this one is a {kind} record")));
                    }
                    payload[field] = json!(v);
                    changed = true;
                }
            }
            let mut change = Map::new();
            if changed {
                change.insert("payload".into(), payload);
            }
            change.extend(pick(&args, &["summary"]));
            if change.is_empty() {
                return Err(ToolError("nothing to correct: give object, subject, predicate, text or summary".into()));
            }
            let mut body = who(&args)?;
            body["change"] = Value::Object(change);
            send("POST", id_path("/supersede")?, Some(body)).await
        }
        "retract" => send("POST", id_path("/retract")?, Some(who(&args)?)).await,
        "contest" => {
            let mut body = who(&args)?;
            if let Value::Object(b) = &mut body {
                b.extend(pick(&args, &["claim", "by"]));
            }
            send("POST", id_path("/contest")?, Some(body)).await
        }
        "feedback" => {
            let op = required(&args, "op")?;
            if op != "reinforce" && op != "penalize" {
                return Err(ToolError(format!("op {op:?}: reinforce or penalize")));
            }
            let mut body = who(&args)?;
            if let Some(a) = args.get("amount") {
                body["amount"] = a.clone();
            }
            send("POST", id_path(&format!("/{op}"))?, Some(body)).await
        }
        "session_context" => {
            let mut ctx = Map::new();
            ctx.insert("sessionId".into(), json!(text(&args, "session_id")?.unwrap_or("mcp")));
            if let Some(user) = text(&args, "user_id")? {
                ctx.insert("userId".into(), json!(user));
            }
            let outcome = send("POST", "/v1/hooks/session_start".into(), Some(json!({ "event": {}, "ctx": ctx }))).await?;
            // A hook answers 200 even when it failed; its `error` says so.
            match outcome.get("error").and_then(Value::as_str) {
                Some(problem) => Err(ToolError(problem.to_string())),
                None => Ok(outcome),
            }
        }
        "search_files" => {
            let mut body = pick(&args, &["query", "limit", "ranking"]);
            body.entry("limit").or_insert(json!(10));
            send("POST", "/v1/search/files".into(), Some(Value::Object(body))).await
        }
        "memory_sync" => match required(&args, "op")? {
            "status" => send("GET", "/v1/sync/status".into(), None).await,
            "fetch" => send("POST", "/v1/sync/fetch".into(), Some(Value::Object(pick(&args, &["begin", "end"])))).await,
            "checkpoint" => send("POST", "/v1/sync/checkpoint".into(), Some(Value::Object(pick(&args, &["end_id", "summary"])))).await,
            "log" => {
                send("POST", "/v1/conversations".into(), Some(Value::Object(pick(&args, &["channel", "content", "user_id", "direction"]))))
                    .await
            }
            other => Err(ToolError(format!("op {other:?}: status, fetch, checkpoint or log"))),
        },
        "forget" => {
            let mut body = pick(&args, &["ids", "query", "subject", "user", "dry_run", "reason"]);
            body.insert("actor".into(), json!("mcp"));
            send("POST", "/v1/forget".into(), Some(Value::Object(body))).await
        }
        "inner" => match required(&args, "op")? {
            "status" => send("GET", "/v1/inner/status".into(), None).await,
            "context" => {
                let level = args.get("level").and_then(Value::as_u64).unwrap_or(1);
                send("GET", format!("/v1/inner/context?level={level}"), None).await
            }
            "event" => {
                let kind = required(&args, "kind")?;
                let mut body = json!({ "kind": kind });
                if let Some(what) = text(&args, "what")? {
                    body[if kind == "spark" { "topic" } else { "what" }] = json!(what);
                }
                if let Some(since) = text(&args, "since")? {
                    body["since"] = json!(since);
                }
                send("POST", "/v1/inner/event".into(), Some(body)).await
            }
            "run" => send("POST", "/v1/inner/run".into(), Some(json!({ "job": required(&args, "job")? }))).await,
            "write" => {
                let body = json!({
                    "job": required(&args, "job")?,
                    "path": required(&args, "path")?,
                    "content": args.get("content").and_then(Value::as_str).ok_or_else(|| ToolError("content is required".into()))?,
                    "append": args.get("append").and_then(Value::as_bool).unwrap_or(false),
                });
                send("POST", "/v1/inner/write".into(), Some(body)).await
            }
            other => Err(ToolError(format!("op {other:?}: status, context, event, run or write"))),
        },
        "modules" => {
            let op = required(&args, "op")?;
            let module = || -> Result<String, ToolError> { Ok(format!("/v1/modules/{}", urlencode(required(&args, "id")?))) };
            match op {
                "list" => send("GET", "/v1/modules".into(), None).await,
                "info" => send("GET", module()?, None).await,
                "activate" | "suspend" | "disable" | "priority" => {
                    let mut body = json!({ "action": op });
                    if let Some(p) = args.get("priority").filter(|p| !p.is_null()) {
                        body["priority"] = p.clone();
                    }
                    send("POST", module()?, Some(body)).await
                }
                "extract" => {
                    let mut body = json!({ "domain": required(&args, "domain")? });
                    if let Some(k) = args.get("keywords").filter(|k| !k.is_null()) {
                        body["keywords"] = k.clone();
                    }
                    body["dryRun"] = json!(args.get("dry_run").and_then(Value::as_bool).unwrap_or(false));
                    send("POST", format!("{}/extract", module()?), Some(body)).await
                }
                "sync" => send("POST", "/v1/workspace/sync".into(), Some(json!({}))).await,
                other => Err(ToolError(format!("op {other:?}: list, info, activate, suspend, disable, priority, extract or sync"))),
            }
        }
        "reflection" => match required(&args, "op")? {
            "status" => send("GET", "/v1/reflect/status".into(), None).await,
            "feedback" => {
                let mut body = Map::new();
                body.insert("score".into(), args.get("score").cloned().ok_or_else(|| ToolError("score is required".into()))?);
                if let Some(id) = text(&args, "output_id")? {
                    body.insert("outputId".into(), json!(id));
                }
                send("POST", "/v1/reflect/feedback".into(), Some(Value::Object(body))).await
            }
            "spawn_result" => {
                let body = json!({
                    "spawnId": required(&args, "spawn_id")?,
                    "outcome": required(&args, "outcome")?,
                    "note": text(&args, "note")?,
                });
                send("POST", "/v1/reflect/spawn-result".into(), Some(body)).await
            }
            "tick" => {
                let dry_run = args.get("dry_run").and_then(Value::as_bool).unwrap_or(false);
                send("POST", "/v1/reflect/tick".into(), Some(json!({ "dryRun": dry_run }))).await
            }
            other => Err(ToolError(format!("op {other:?}: status, feedback, spawn_result or tick"))),
        },
        _ => Err(ToolError(format!("tool {name} is listed but not implemented"))),
    }
}

/// Percent-encodes a path segment (record ids are UUIDs, but the model may send anything).
fn urlencode(segment: &str) -> String {
    segment
        .bytes()
        .map(|b| if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) { (b as char).to_string() } else { format!("%{b:02X}") })
        .collect()
}

/// The longest text a compact recall hit carries; `show` gives the whole record.
const COMPACT_TEXT_CHARS: usize = 1_000;

/// A retrieve hit as an agent reads it: id, type, text, date, score, and what else it
/// must know (not current, possibly outdated, scoped, cut short). About a tenth of the
/// whole record's bytes, so a long note cannot push an answer past a client's limit.
fn compact_hit(hit: &Value) -> Value {
    let record = &hit["record"];
    let payload = &record["payload"];
    let text = match payload["kind"].as_str() {
        Some("semantic") => {
            [&payload["subject"], &payload["predicate"], &payload["object"]].iter().filter_map(|v| v.as_str()).collect::<Vec<_>>().join(" ")
        }
        // An event's own words (its summary is cut short); else the summary.
        _ => payload["text"].as_str().or_else(|| record["summary"].as_str()).unwrap_or_default().to_string(),
    };
    let mut out = Map::new();
    out.insert("id".into(), record["id"].clone());
    out.insert("type".into(), record["memory_type"].clone());
    if let Some(sender) = payload["sender"].as_str() {
        out.insert("sender".into(), json!(sender));
    }
    let cut: String = text.chars().take(COMPACT_TEXT_CHARS).collect();
    if cut.len() < text.len() {
        out.insert("text".into(), json!(format!("{cut}…")));
        out.insert("truncated".into(), json!(true));
    } else {
        out.insert("text".into(), json!(text));
    }
    let at = if record["event_time"].is_string() { &record["event_time"] } else { &record["created_at"] };
    out.insert("at".into(), at.clone());
    let round = |v: &Value| v.as_f64().map(|x| json!((x * 1000.0).round() / 1000.0)).unwrap_or(Value::Null);
    out.insert("score".into(), round(&hit["score"]["score"]));
    if !hit["score"]["relevant"].is_null() {
        out.insert("relevant".into(), round(&hit["score"]["relevant"]));
    }
    if record["status"].as_str().is_some_and(|s| s != "active") {
        out.insert("status".into(), record["status"].clone());
    }
    if record["scope"].as_str().is_some_and(|s| !s.is_empty()) {
        out.insert("scope".into(), record["scope"].clone());
    }
    if !hit["outdated"].is_null() {
        out.insert("outdated".into(), hit["outdated"].clone());
    }
    Value::Object(out)
}

/// `correct` on an event: events are kept as they happened, so the corrected text is a
/// new event (same sender, scope, sensitivity and tags, tagged `correction`, its
/// rationale naming the old one); the answer says so and names both.
async fn correct_event(record: &Value, args: &Map<String, Value>, backend: &dyn Backend) -> ToolResult {
    let old = record["id"].as_str().unwrap_or_default().to_string();
    let Some(corrected) = text(args, "text")? else {
        return Err(ToolError(format!(
            "record {old} is an event: events are kept as they happened; give the corrected text (stored as a new event), or forget it"
        )));
    };
    for field in ["object", "subject", "predicate", "summary"] {
        if args.contains_key(field) {
            return Err(ToolError(format!("{field} applies to facts; record {old} is an event (give text)")));
        }
    }
    let payload = &record["payload"];
    let mut event = Map::new();
    event.insert("event_kind".into(), payload.get("event_kind").cloned().unwrap_or(json!("message")));
    event.insert("text".into(), json!(corrected));
    if let Some(sender) = payload.get("sender").filter(|s| s.is_string()) {
        event.insert("sender".into(), sender.clone());
    }
    let mut tags: Vec<Value> = record["tags"].as_array().cloned().unwrap_or_default();
    if !tags.contains(&json!("correction")) {
        tags.push(json!("correction"));
    }
    let rationale = text(args, "rationale")?.unwrap_or_default();
    let options = json!({
        "scope": record["scope"], "sensitivity": record["sensitivity"], "tags": tags, "actor": "mcp",
        "rationale": format!("corrects {old}: {rationale}"),
    });
    let mut answer = backend.send("POST", "/v1/ingest/event".into(), Some(json!({ "event": event, "options": options }))).await?;
    answer["corrects"] = json!(old);
    answer["note"] =
        json!("events are kept as they happened: the correction is a new event and the old one stays (forget it if it must go)");
    Ok(answer)
}

/// A session bound to an end user (`mneme mcp --user`, or `X-Mneme-User` over HTTP): their
/// scope is the default of the calls about someone's memory, unless the call names a user
/// or scope itself. `forget` is never defaulted: erasure names what it erases.
pub fn bind_user(tool: &str, args: &mut Map<String, Value>, user: Option<&str>) -> Result<(), ToolError> {
    let Some(user) = user else { return Ok(()) };
    let scope = mneme_core::Scope::user(user).ok_or_else(|| ToolError(format!("the session's user {user:?} names no user")))?;
    let absent = |args: &Map<String, Value>, key: &str| args.get(key).is_none_or(Value::is_null);
    match tool {
        "recall" if absent(args, "user") && absent(args, "scopes") => {
            args.insert("user".into(), json!(user));
        }
        "remember" | "remember_fact" if absent(args, "scope") => {
            args.insert("scope".into(), json!(scope.as_str()));
        }
        "session_context" if absent(args, "user_id") => {
            args.insert("user_id".into(), json!(user));
        }
        _ => {}
    }
    Ok(())
}
