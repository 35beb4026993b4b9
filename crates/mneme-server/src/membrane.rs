//! membrane's wire protocol (`membrane.v1.MembraneService`, membrane v0.2.0), a fourth
//! front end over the one policy-checked door: each RPC is an [`App::call`] with the
//! operation of the same name, so authentication, the principal's policy, rate limits and
//! metrics are mneme's (transport label `membrane`).
//!
//! Records travel as membrane's JSON inside `bytes` fields, mapped field by field
//! ([`record_json`] out, [`revision_from_json`] in). Where membrane's semantics are sound
//! they are kept (required fields, enum names, error codes); where they are broken mneme's
//! hold, and README lists each difference:
//! - decay is computed from an anchor (path-independent), not compounded per sweep;
//! - retraction and pruning keep the record and its lineage as a tombstone;
//! - Retrieve ranks by the task descriptor's text, not by salience alone;
//! - the caller's trust comes from its key's principal; a `TrustContext` can only narrow
//!   it (sensitivity ceiling, scopes), never widen it;
//! - a client's `audit_log`, `salience`, `lifecycle`, `provenance`, `scope` and `id` in a
//!   revision's record are not trusted: mneme writes its own lineage and audit.
//!
//! What cannot be mapped is refused with INVALID_ARGUMENT and the reason (an outcome of
//! `partial`, working-state constraints, an episodic payload in a revision, a merge of one
//! record).

use std::sync::Arc;

use mneme_core::{
    AuditAction, CompetencePayload, EventPayload, MemoryRecord, MemoryType, Payload, PlanEdge, PlanGraphPayload, PlanNode, RecordId, Scope,
    SemanticPayload, Sensitivity, Status as RecordStatus, ToolOutputPayload, WorkingPayload,
};
use mneme_service::{ContestRequest, IngestOptions, OutcomeKind, OutcomeRequest, Principal, RetrieveRequest, Revision};
use serde_json::{Value, json};
use tonic::{Request, Response, Status};

use crate::app::App;
use crate::auth::Credentials;
use crate::error::{ApiError, ApiResult};
use crate::membrane_pb as mb;
use crate::op::Operation;

/// The membrane service, over the daemon's app.
#[derive(Clone)]
pub struct MembraneApi {
    pub app: Arc<App>,
}

impl std::fmt::Debug for MembraneApi {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("MembraneApi")
    }
}

/// The service name the health service reports.
pub const SERVICE: &str = "membrane.v1.MembraneService";
/// Actor and rationale used when a membrane client leaves them empty (membrane accepts
/// empty ones; mneme's history must say who and why).
const DEFAULT_ACTOR: &str = "membrane-client";
const DEFAULT_RATIONALE: &str = "(no rationale given over membrane.v1)";

/// The `authorization` value as mneme reads it: `Bearer KEY`, or a bare `KEY` (what the
/// OpenClaw plugin sends) taken as one.
fn authorization<T>(r: &Request<T>) -> Credentials {
    let key = r.metadata().get("authorization").and_then(|v| v.to_str().ok()).and_then(bearer);
    Credentials::from_headers(r.metadata().as_ref()).with_authorization(key)
}

/// An `authorization` value as a bearer header: membrane's clients send a bare key, as
/// membraned accepts it. Empty: none.
pub(crate) fn bearer(value: &str) -> Option<String> {
    let value = value.trim();
    if value.is_empty() {
        return None;
    }
    Some(if value.starts_with("Bearer ") || value.starts_with("bearer ") { value.to_string() } else { format!("Bearer {value}") })
}

fn invalid(why: impl Into<String>) -> ApiError {
    ApiError::BadRequest(why.into())
}

fn not_found() -> ApiError {
    ApiError::Service(mneme_service::ServiceError::NoSuch("record not found".into()))
}

/// A membrane record id: any string that is not one of mneme's ids names no record
/// (NOT_FOUND, as membrane answers for an unknown id).
fn record_id(id: &str) -> ApiResult<RecordId> {
    RecordId::parse(id.trim()).map_err(|_| not_found())
}

/// membrane's sensitivity names: `hyper` is mneme's `critical` (also accepted); empty is `low`.
fn sensitivity_in(s: &str) -> ApiResult<Sensitivity> {
    match s.trim() {
        "" => Ok(Sensitivity::Low),
        "hyper" => Ok(Sensitivity::Critical),
        "public" | "low" | "medium" | "high" | "critical" => s.trim().parse().map_err(|e| invalid(format!("sensitivity: {e}"))),
        other => Err(invalid(format!("sensitivity must be one of: public, low, medium, high, hyper (got {other:?})"))),
    }
}

fn sensitivity_out(s: Sensitivity) -> &'static str {
    match s {
        Sensitivity::Critical => "hyper",
        other => other.as_str(),
    }
}

fn memory_type_in(s: &str, field: &str) -> ApiResult<MemoryType> {
    s.trim().parse().map_err(|_| invalid(format!("{field} must be one of: episodic, working, semantic, competence, plan_graph")))
}

fn scope_in(s: &str) -> ApiResult<Option<Scope>> {
    if s.trim().is_empty() { Ok(None) } else { Scope::parse(s.trim()).map(Some).map_err(|e| invalid(format!("scope: {e}"))) }
}

fn timestamp_in(s: &str) -> ApiResult<Option<jiff::Timestamp>> {
    if s.trim().is_empty() {
        return Ok(None);
    }
    s.trim().parse().map(Some).map_err(|e| invalid(format!("invalid timestamp: {e}")))
}

fn json_in(bytes: &[u8], field: &str) -> ApiResult<Option<Value>> {
    if bytes.is_empty() {
        return Ok(None);
    }
    serde_json::from_slice(bytes).map(Some).map_err(|e| invalid(format!("invalid {field} JSON: {e}")))
}

fn required(value: &str, field: &str) -> ApiResult<()> {
    if value.trim().is_empty() { Err(invalid(format!("{field} is required"))) } else { Ok(()) }
}

fn who(actor: &str, rationale: &str) -> (String, String) {
    let actor = if actor.trim().is_empty() { DEFAULT_ACTOR } else { actor.trim() };
    let rationale = if rationale.trim().is_empty() { DEFAULT_RATIONALE } else { rationale.trim() };
    (actor.to_string(), rationale.to_string())
}

fn options(source: &str, sensitivity: &str, scope: &str, tags: &[String], confidence: f64) -> ApiResult<IngestOptions> {
    Ok(IngestOptions {
        sensitivity: Some(sensitivity_in(sensitivity)?),
        scope: scope_in(scope)?,
        tags: tags.to_vec(),
        confidence: Some(confidence),
        actor: Some(source.trim().to_string()),
        ..IngestOptions::default()
    })
}

/// A JSON value as mneme's string object: a JSON string as itself, anything else as its
/// JSON text.
fn object_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// The record's payload as membrane's JSON (`kind` episodic/semantic/working/competence/
/// plan_graph); `null` once pruned or forgotten.
fn payload_json(record: &MemoryRecord) -> Value {
    let t = record.event_time.unwrap_or(record.created_at).to_string();
    let Some(payload) = &record.payload else { return Value::Null };
    match payload {
        Payload::Event(e) => json!({
            "kind": "episodic",
            "timeline": [{ "t": e.event_time.map_or(t, |x| x.to_string()), "event_kind": e.event_kind, "ref": e.reference.clone().unwrap_or_default(), "summary": e.text }],
        }),
        Payload::ToolOutput(o) => {
            let mut node = json!({ "id": record.id.to_string(), "tool": o.tool, "timestamp": t });
            if !o.args.is_null() {
                node["args"] = o.args.clone();
            }
            if let Some(r) = &o.result {
                node["result"] = r.clone();
            }
            json!({
                "kind": "episodic",
                "timeline": [{ "t": t, "event_kind": "tool_call", "ref": record.id.to_string(), "summary": format!("tool_call: {}", o.tool) }],
                "tool_graph": [node],
            })
        }
        Payload::Semantic(s) => {
            let validity = match (s.valid_from, s.valid_to) {
                (None, None) => json!({ "mode": "global" }),
                (from, to) => {
                    let mut v = json!({ "mode": "timeboxed" });
                    if let Some(f) = from {
                        v["start"] = json!(f.to_string());
                    }
                    if let Some(e) = to {
                        v["end"] = json!(e.to_string());
                    }
                    v
                }
            };
            let status = match record.status {
                RecordStatus::Active => "active",
                RecordStatus::Contested => "contested",
                RecordStatus::Retracted | RecordStatus::Superseded => "retracted",
            };
            let mut out = json!({
                "kind": "semantic", "subject": s.subject, "predicate": s.predicate, "object": s.object, "validity": validity,
                "revision": { "status": status },
            });
            if !s.evidence.is_empty() {
                out["evidence"] = s
                    .evidence
                    .iter()
                    .map(|e| match e.split_once(':') {
                        Some((kind, id)) => json!({ "source_type": kind, "source_id": id, "timestamp": t }),
                        None => json!({ "source_type": "mneme", "source_id": e, "timestamp": t }),
                    })
                    .collect();
            }
            out
        }
        Payload::Working(w) => json!({
            "kind": "working", "thread_id": w.thread_id, "state": w.state, "next_actions": w.next_actions,
            "open_questions": w.open_questions, "context_summary": w.summary,
        }),
        Payload::Competence(c) => json!({
            "kind": "competence", "skill_name": c.skill,
            "triggers": c.triggers.iter().map(|s| json!({ "signal": s })).collect::<Vec<_>>(),
            "recipe": c.steps.iter().map(|s| json!({ "step": s })).collect::<Vec<_>>(),
            "failure_modes": c.performance.failure_modes.keys().collect::<Vec<_>>(),
            "performance": {
                "success_count": c.performance.success_count, "failure_count": c.performance.failure_count,
                "success_rate": c.performance.success_rate,
            },
        }),
        Payload::PlanGraph(g) => json!({
            "kind": "plan_graph", "plan_id": record.id.to_string(), "version": "1", "intent": g.intent,
            "nodes": g.nodes.iter().map(|n| json!({ "id": n.id, "op": n.label })).collect::<Vec<_>>(),
            "edges": g.edges.iter().map(|e| json!({ "from": e.from, "to": e.to, "kind": e.kind.clone().unwrap_or_else(|| "control".into()) })).collect::<Vec<_>>(),
        }),
    }
}

/// membrane's audit action for one of mneme's.
fn audit_action(a: AuditAction) -> &'static str {
    match a {
        AuditAction::Create | AuditAction::Supersede | AuditAction::Fork | AuditAction::Merge => "create",
        AuditAction::SupersededBy | AuditAction::Contest | AuditAction::Outcome => "revise",
        AuditAction::ForkedInto => "fork",
        AuditAction::MergedInto => "merge",
        AuditAction::Retract | AuditAction::Prune | AuditAction::Forget => "delete",
        AuditAction::Reinforce => "reinforce",
        AuditAction::Penalize => "decay",
    }
}

/// A record as membrane's JSON, with its audit log (read through the caller's policy).
pub fn record_json(app: &App, p: &Principal, record: &MemoryRecord) -> Value {
    let decay = &app.config.decay;
    let t = record.memory_type;
    let mut lifecycle = json!({
        "decay": { "curve": "exponential", "half_life_seconds": decay.half_life_seconds(t).round() as i64, "min_salience": decay.floor.get(t) },
        "last_reinforced_at": record.salience.reinforced_at.to_string(),
        "deletion_policy": if record.salience.pinned { "never" } else { "auto_prune" },
    });
    if record.salience.pinned {
        lifecycle["pinned"] = json!(true);
    }
    let source_kind = match &record.payload {
        Some(Payload::ToolOutput(_)) => "tool_call",
        Some(Payload::Semantic(_)) => "observation",
        _ => "event",
    };
    let reference = match &record.payload {
        Some(Payload::Event(e)) => e.reference.clone().unwrap_or_default(),
        _ => String::new(),
    };
    let mut sources = vec![json!({
        "kind": source_kind, "ref": reference, "created_by": record.lineage.actor,
        "timestamp": record.event_time.unwrap_or(record.created_at).to_string(),
    })];
    let predicate = match record.lineage.operation {
        mneme_core::LineageOp::Supersede => "supersedes",
        _ => "derived_from",
    };
    let relations: Vec<Value> = record
        .lineage
        .parent_ids
        .iter()
        .map(|parent| {
            sources.push(json!({ "kind": "event", "ref": parent.to_string(), "created_by": record.lineage.actor, "timestamp": record.lineage.timestamp.to_string() }));
            json!({ "predicate": predicate, "target_id": parent.to_string(), "weight": 1.0, "created_at": record.lineage.timestamp.to_string() })
        })
        .collect();
    let audit: Vec<Value> = app
        .ops
        .history(p, &record.id)
        .map(|h| h.audit)
        .unwrap_or_default()
        .into_iter()
        .map(|a| json!({ "action": audit_action(a.action), "actor": a.actor, "timestamp": a.at.to_string(), "rationale": a.rationale }))
        .collect();
    let mut out = json!({
        "id": record.id.to_string(),
        "type": t.as_str(),
        "sensitivity": sensitivity_out(record.sensitivity),
        "confidence": record.confidence,
        "salience": app.ops.current_salience(record),
        "created_at": record.created_at.to_string(),
        "updated_at": record.updated_at.to_string(),
        "lifecycle": lifecycle,
        "provenance": { "sources": sources, "created_by": "mneme" },
        "payload": payload_json(record),
        "audit_log": audit,
    });
    if !record.scope.is_global() {
        out["scope"] = json!(record.scope.as_str());
    }
    if !record.tags.is_empty() {
        out["tags"] = json!(record.tags);
    }
    if !relations.is_empty() {
        out["relations"] = json!(relations);
    }
    out
}

fn bytes(v: &Value) -> Vec<u8> {
    serde_json::to_vec(v).unwrap_or_default()
}

fn string_list(v: &Value, key: &str) -> ApiResult<Vec<String>> {
    match v.get(key) {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(items)) => items
            .iter()
            .map(|i| i.as_str().map(str::to_string).ok_or_else(|| invalid(format!("payload.{key}: not a list of strings"))))
            .collect(),
        Some(_) => Err(invalid(format!("payload.{key}: not a list"))),
    }
}

fn text_field(v: &Value, key: &str) -> String {
    v.get(key).and_then(Value::as_str).unwrap_or_default().to_string()
}

/// The working states membrane defines.
const TASK_STATES: [&str; 5] = ["planning", "executing", "blocked", "waiting", "done"];

/// A revision's new content from membrane's record JSON: payload, tags, sensitivity and
/// confidence. The record's `id`, `scope`, `salience`, `lifecycle`, `provenance`,
/// `relations` and `audit_log` are not taken: mneme assigns ids, keeps the source's scope,
/// and writes its own lineage and audit.
pub fn revision_from_json(bytes_in: &[u8], field: &str) -> ApiResult<Revision> {
    let v = json_in(bytes_in, field)?.ok_or_else(|| invalid(format!("invalid {field}: empty")))?;
    let payload = v.get("payload").filter(|p| !p.is_null()).ok_or_else(|| invalid(format!("invalid {field}: payload is required")))?;
    let kind = payload.get("kind").and_then(Value::as_str).unwrap_or_default();
    let payload = match kind {
        "semantic" => {
            let validity = payload.get("validity").cloned().unwrap_or(Value::Null);
            if validity.get("mode").and_then(Value::as_str) == Some("conditional") {
                return Err(invalid("semantic validity mode \"conditional\" cannot be mapped: mneme keeps validity as a time range"));
            }
            let time = |k: &str| -> ApiResult<Option<jiff::Timestamp>> {
                timestamp_in(validity.get(k).and_then(Value::as_str).unwrap_or_default())
            };
            let evidence = payload
                .get("evidence")
                .and_then(Value::as_array)
                .map(|a| a.iter().map(|e| format!("{}:{}", text_field(e, "source_type"), text_field(e, "source_id"))).collect())
                .unwrap_or_default();
            Payload::Semantic(SemanticPayload {
                subject: text_field(payload, "subject"),
                predicate: text_field(payload, "predicate"),
                object: payload.get("object").map(object_text).unwrap_or_default(),
                valid_from: time("start")?,
                valid_to: time("end")?,
                evidence,
            })
        }
        "working" => {
            let state = text_field(payload, "state");
            if !TASK_STATES.contains(&state.as_str()) {
                return Err(invalid("state must be one of: planning, executing, blocked, waiting, done"));
            }
            if payload.get("active_constraints").and_then(Value::as_array).is_some_and(|a| !a.is_empty()) {
                return Err(invalid("active_constraints cannot be mapped: mneme's working state has no constraints"));
            }
            Payload::Working(WorkingPayload {
                thread_id: text_field(payload, "thread_id"),
                state,
                next_actions: string_list(payload, "next_actions")?,
                open_questions: string_list(payload, "open_questions")?,
                summary: text_field(payload, "context_summary"),
            })
        }
        "competence" => {
            let list = |key: &str, inner: &str| -> Vec<String> {
                payload
                    .get(key)
                    .and_then(Value::as_array)
                    .map(|a| a.iter().map(|x| text_field(x, inner)).filter(|s| !s.is_empty()).collect())
                    .unwrap_or_default()
            };
            Payload::Competence(CompetencePayload {
                skill: text_field(payload, "skill_name"),
                triggers: list("triggers", "signal"),
                steps: list("recipe", "step"),
                performance: Default::default(),
            })
        }
        "plan_graph" => Payload::PlanGraph(PlanGraphPayload {
            intent: text_field(payload, "intent"),
            nodes: payload
                .get("nodes")
                .and_then(Value::as_array)
                .map(|a| a.iter().map(|n| PlanNode { id: text_field(n, "id"), label: text_field(n, "op"), status: None }).collect())
                .unwrap_or_default(),
            edges: payload
                .get("edges")
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .map(|e| PlanEdge {
                            from: text_field(e, "from"),
                            to: text_field(e, "to"),
                            kind: e.get("kind").and_then(Value::as_str).map(str::to_string),
                        })
                        .collect()
                })
                .unwrap_or_default(),
        }),
        "episodic" => {
            return Err(invalid(
                "an episodic payload cannot be a revision: episodes are immutable in mneme (revise a semantic, working, competence or plan_graph record)",
            ));
        }
        other => return Err(invalid(format!("invalid {field}: unknown payload kind {other:?}"))),
    };
    let tags = match v.get("tags") {
        None | Some(Value::Null) => None,
        Some(_) => Some(string_list(&v, "tags")?),
    };
    let sensitivity = match v.get("sensitivity").and_then(Value::as_str) {
        Some(s) if !s.is_empty() => Some(sensitivity_in(s)?),
        _ => None,
    };
    Ok(Revision { payload: Some(payload), summary: None, tags, sensitivity, confidence: v.get("confidence").and_then(Value::as_f64) })
}

/// The caller's trust narrowed by a request's `TrustContext`: its ceiling and scopes
/// narrow the retrieval; they can never widen what the key's principal may read.
fn trust(t: Option<&mb::TrustContext>) -> ApiResult<(Sensitivity, Option<Vec<Scope>>)> {
    let t = t.ok_or_else(|| invalid("trust context is required"))?;
    if t.max_sensitivity.trim().is_empty() {
        return Err(invalid("trust.max_sensitivity is required"));
    }
    let ceiling = sensitivity_in(&t.max_sensitivity)?;
    let scopes = if t.scopes.is_empty() {
        None
    } else {
        Some(
            t.scopes
                .iter()
                .map(|s| Scope::parse(s.trim()).map_err(|e| invalid(format!("trust.scopes: {e}"))))
                .collect::<ApiResult<Vec<_>>>()?,
        )
    };
    Ok((ceiling, scopes))
}

type Reply<T> = Result<Response<T>, Status>;

impl MembraneApi {
    async fn run<Req, Resp, F>(&self, operation: Operation, request: Request<Req>, op: F) -> Reply<Resp>
    where
        Req: Send + 'static,
        Resp: Send + 'static,
        F: FnOnce(&App, &Principal, Req) -> ApiResult<Resp> + Send + 'static,
    {
        let auth = authorization(&request);
        let msg = request.into_inner();
        self.app.call("membrane", operation, &auth, move |app, p| op(app, p, msg)).await.map(Response::new).map_err(Status::from)
    }

    fn ingested(app: &App, p: &Principal, payload: Payload, options: IngestOptions) -> ApiResult<mb::IngestResponse> {
        let record = app.ops.ingest(p, payload, options)?;
        Ok(mb::IngestResponse { record: bytes(&record_json(app, p, &record)) })
    }
}

#[tonic::async_trait]
impl mb::membrane_service_server::MembraneService for MembraneApi {
    async fn ingest_event(&self, request: Request<mb::IngestEventRequest>) -> Reply<mb::IngestResponse> {
        self.run(Operation::IngestEvent, request, |app, p, m| {
            required(&m.source, "source")?;
            required(&m.event_kind, "event_kind")?;
            required(&m.r#ref, "ref")?;
            // membrane allows an empty summary; mneme's events carry text: the kind and ref.
            let text = if m.summary.trim().is_empty() { format!("{} {}", m.event_kind, m.r#ref) } else { m.summary.clone() };
            let payload = Payload::Event(EventPayload {
                event_kind: m.event_kind.clone(),
                reference: Some(m.r#ref.clone()),
                sender: None,
                text,
                event_time: timestamp_in(&m.timestamp)?,
            });
            Self::ingested(app, p, payload, options(&m.source, &m.sensitivity, &m.scope, &m.tags, 0.8)?)
        })
        .await
    }

    async fn ingest_tool_output(&self, request: Request<mb::IngestToolOutputRequest>) -> Reply<mb::IngestResponse> {
        self.run(Operation::IngestToolOutput, request, |app, p, m| {
            required(&m.source, "source")?;
            required(&m.tool_name, "tool_name")?;
            let args = json_in(&m.args, "args")?.unwrap_or_else(|| json!({}));
            if !args.is_object() {
                return Err(invalid("invalid args JSON: must be an object"));
            }
            let result = json_in(&m.result, "result")?;
            timestamp_in(&m.timestamp)?;
            let payload =
                Payload::ToolOutput(ToolOutputPayload { tool: m.tool_name.clone(), args, result, error: None, duration_ms: None });
            Self::ingested(app, p, payload, options(&m.source, &m.sensitivity, &m.scope, &m.tags, 0.9)?)
        })
        .await
    }

    async fn ingest_observation(&self, request: Request<mb::IngestObservationRequest>) -> Reply<mb::IngestResponse> {
        self.run(Operation::IngestObservation, request, |app, p, m| {
            required(&m.source, "source")?;
            required(&m.subject, "subject")?;
            required(&m.predicate, "predicate")?;
            let object = json_in(&m.object, "object")?
                .filter(|v| !v.is_null())
                .ok_or_else(|| invalid("object is required (mneme keeps no fact without a value)"))?;
            let payload = Payload::Semantic(SemanticPayload {
                subject: m.subject.clone(),
                predicate: m.predicate.clone(),
                object: object_text(&object),
                valid_from: timestamp_in(&m.timestamp)?,
                valid_to: None,
                evidence: vec![format!("observation:{}", m.source.trim())],
            });
            Self::ingested(app, p, payload, options(&m.source, &m.sensitivity, &m.scope, &m.tags, 0.7)?)
        })
        .await
    }

    async fn ingest_outcome(&self, request: Request<mb::IngestOutcomeRequest>) -> Reply<mb::IngestResponse> {
        self.run(Operation::IngestOutcome, request, |app, p, m| {
            let outcome = match m.outcome_status.trim() {
                "success" => OutcomeKind::Success,
                "failure" => OutcomeKind::Failure,
                "partial" => return Err(invalid("outcome_status \"partial\" cannot be mapped: mneme records success or failure")),
                _ => return Err(invalid("outcome_status must be one of: success, failure, partial")),
            };
            let target = record_id(&m.target_record_id)?;
            timestamp_in(&m.timestamp)?;
            // As membraned: an outcome belongs to an episode (what was done), not to a fact
            // or a skill.
            let (record, _) = app.ops.get(p, &target)?;
            if record.memory_type != MemoryType::Episodic {
                return Err(invalid(format!(
                    "target_record_id {} is a {} record: an outcome targets an episodic record (the event it reports on)",
                    m.target_record_id.trim(),
                    record.memory_type
                )));
            }
            let request = OutcomeRequest { target, outcome, duration_ms: None, failure_mode: None, note: None, amount: None };
            let source = if m.source.trim().is_empty() { DEFAULT_ACTOR } else { m.source.trim() };
            let options = IngestOptions { actor: Some(source.to_string()), ..IngestOptions::default() };
            let result = app.ops.ingest_outcome(p, request, options)?;
            // membrane answers with the target, its outcome set.
            let mut record = record_json(app, p, &result.target);
            if record["payload"].is_object() && result.target.memory_type == MemoryType::Episodic {
                record["payload"]["outcome"] = json!(m.outcome_status.trim());
            }
            Ok(mb::IngestResponse { record: bytes(&record) })
        })
        .await
    }

    async fn ingest_working_state(&self, request: Request<mb::IngestWorkingStateRequest>) -> Reply<mb::IngestResponse> {
        self.run(Operation::IngestWorkingState, request, |app, p, m| {
            required(&m.source, "source")?;
            required(&m.thread_id, "thread_id")?;
            if !TASK_STATES.contains(&m.state.trim()) {
                return Err(invalid("state must be one of: planning, executing, blocked, waiting, done"));
            }
            if json_in(&m.active_constraints, "active_constraints")?.as_ref().and_then(Value::as_array).is_some_and(|a| !a.is_empty()) {
                return Err(invalid("active_constraints cannot be mapped: mneme's working state has no constraints"));
            }
            timestamp_in(&m.timestamp)?;
            let payload = Payload::Working(WorkingPayload {
                thread_id: m.thread_id.clone(),
                state: m.state.trim().to_string(),
                next_actions: m.next_actions.clone(),
                open_questions: m.open_questions.clone(),
                summary: m.context_summary.clone(),
            });
            Self::ingested(app, p, payload, options(&m.source, &m.sensitivity, &m.scope, &m.tags, 1.0)?)
        })
        .await
    }

    async fn retrieve(&self, request: Request<mb::RetrieveRequest>) -> Reply<mb::RetrieveResponse> {
        self.run(Operation::Retrieve, request, |app, p, m| {
            let (ceiling, scopes) = trust(m.trust.as_ref())?;
            let types = m
                .memory_types
                .iter()
                .enumerate()
                .map(|(i, t)| memory_type_in(t, &format!("memory_types[{i}]")))
                .collect::<ApiResult<Vec<_>>>()?;
            if !m.min_salience.is_finite() || m.min_salience < 0.0 {
                return Err(invalid("min_salience must be non-negative and finite"));
            }
            if !(0..=10_000).contains(&m.limit) {
                return Err(invalid("limit must be between 0 and 10000"));
            }
            let max = app.ops.limits().max_limit;
            let limit = if m.limit == 0 { max } else { (m.limit as usize).min(max) };
            // A descriptor longer than a query may be is cut at a character boundary.
            let cut = m.task_descriptor.floor_char_boundary(app.ops.limits().max_query_bytes);
            let request = RetrieveRequest {
                query: m.task_descriptor[..cut].to_string(),
                types,
                min_salience: (m.min_salience > 0.0).then_some(m.min_salience.min(1.0)),
                max_sensitivity: Some(ceiling),
                scopes,
                limit,
                ..RetrieveRequest::default()
            };
            let hits = app.ops.retrieve(p, &request)?;
            let records = hits.iter().map(|h| bytes(&record_json(app, p, &h.record))).collect();
            Ok(mb::RetrieveResponse { records, selection: Vec::new() })
        })
        .await
    }

    async fn retrieve_by_id(&self, request: Request<mb::RetrieveByIdRequest>) -> Reply<mb::MemoryRecordResponse> {
        self.run(Operation::RetrieveById, request, |app, p, m| {
            let (ceiling, scopes) = trust(m.trust.as_ref())?;
            // Outside the request's trust: as hidden as outside the key's (NOT_FOUND).
            let within = p.reading_within(ceiling, scopes.as_deref());
            let (record, _) = app.ops.get(&within, &record_id(&m.id)?)?;
            Ok(mb::MemoryRecordResponse { record: bytes(&record_json(app, p, &record)) })
        })
        .await
    }

    async fn supersede(&self, request: Request<mb::SupersedeRequest>) -> Reply<mb::MemoryRecordResponse> {
        self.run(Operation::Supersede, request, |app, p, m| {
            let id = record_id(&m.old_id)?;
            let change = revision_from_json(&m.new_record, "new_record")?;
            let (actor, rationale) = who(&m.actor, &m.rationale);
            let record = app.ops.supersede(p, &id, change, actor, rationale)?;
            Ok(mb::MemoryRecordResponse { record: bytes(&record_json(app, p, &record)) })
        })
        .await
    }

    async fn fork(&self, request: Request<mb::ForkRequest>) -> Reply<mb::MemoryRecordResponse> {
        self.run(Operation::Fork, request, |app, p, m| {
            let id = record_id(&m.source_id)?;
            let change = revision_from_json(&m.forked_record, "forked_record")?;
            let (actor, rationale) = who(&m.actor, &m.rationale);
            let record = app.ops.fork(p, &id, change, actor, rationale)?;
            Ok(mb::MemoryRecordResponse { record: bytes(&record_json(app, p, &record)) })
        })
        .await
    }

    async fn retract(&self, request: Request<mb::RetractRequest>) -> Reply<mb::RetractResponse> {
        self.run(Operation::Retract, request, |app, p, m| {
            let (actor, rationale) = who(&m.actor, &m.rationale);
            app.ops.retract(p, &record_id(&m.id)?, actor, rationale)?;
            Ok(mb::RetractResponse {})
        })
        .await
    }

    async fn merge(&self, request: Request<mb::MergeRequest>) -> Reply<mb::MemoryRecordResponse> {
        self.run(Operation::Merge, request, |app, p, m| {
            if m.ids.is_empty() {
                return Err(invalid("ids must not be empty"));
            }
            let ids = m.ids.iter().map(|i| record_id(i)).collect::<ApiResult<Vec<_>>>()?;
            if ids.len() < 2 {
                return Err(invalid("a merge of one record cannot be mapped: mneme merges two or more (supersede one record instead)"));
            }
            let change = revision_from_json(&m.merged_record, "merged_record")?;
            let (actor, rationale) = who(&m.actor, &m.rationale);
            let record = app.ops.merge(p, &ids, change, actor, rationale)?;
            Ok(mb::MemoryRecordResponse { record: bytes(&record_json(app, p, &record)) })
        })
        .await
    }

    async fn reinforce(&self, request: Request<mb::ReinforceRequest>) -> Reply<mb::ReinforceResponse> {
        self.run(Operation::Reinforce, request, |app, p, m| {
            let (actor, rationale) = who(&m.actor, &m.rationale);
            app.ops.adjust(p, &record_id(&m.id)?, true, None, actor, rationale)?;
            Ok(mb::ReinforceResponse {})
        })
        .await
    }

    async fn penalize(&self, request: Request<mb::PenalizeRequest>) -> Reply<mb::PenalizeResponse> {
        self.run(Operation::Penalize, request, |app, p, m| {
            if !m.amount.is_finite() || m.amount < 0.0 {
                return Err(invalid("amount must be non-negative and finite"));
            }
            let id = record_id(&m.id)?;
            if m.amount == 0.0 {
                // membrane accepts a zero penalty: nothing changes (the record must exist).
                app.ops.get(p, &id)?;
                return Ok(mb::PenalizeResponse {});
            }
            let (actor, rationale) = who(&m.actor, &m.rationale);
            app.ops.adjust(p, &id, false, Some(m.amount.min(1.0)), actor, rationale)?;
            Ok(mb::PenalizeResponse {})
        })
        .await
    }

    async fn get_metrics(&self, request: Request<mb::GetMetricsRequest>) -> Reply<mb::MetricsResponse> {
        self.run(Operation::GetMetrics, request, |app, p, _m| {
            let m = app.ops.metrics(p)?;
            let active: i64 = m.live_by_type.values().sum();
            let revised: i64 = ["superseded", "retracted", "contested"].iter().filter_map(|s| m.by_status.get(*s)).sum();
            let rate = |n: i64, d: i64| if d > 0 { n as f64 / d as f64 } else { 0.0 };
            let snapshot = json!({
                "collected_at": app.ops.now().to_string(),
                "total_records": m.total_records,
                "records_by_type": m.by_type,
                "avg_salience": 0.0,
                "avg_confidence": 0.0,
                "salience_distribution": { "0.0-0.2": 0, "0.2-0.4": 0, "0.4-0.6": 0, "0.6-0.8": 0, "0.8-1.0": 0 },
                "active_records": active,
                "pinned_records": m.pinned,
                "total_audit_entries": m.audit_entries,
                "memory_growth_rate": 0.0,
                "retrieval_usefulness": 0.0,
                "competence_success_rate": 0.0,
                "plan_reuse_frequency": 0.0,
                "revision_rate": rate(revised, m.total_records),
            });
            Ok(mb::MetricsResponse { snapshot: bytes(&snapshot) })
        })
        .await
    }

    async fn contest(&self, request: Request<mb::ContestRequest>) -> Reply<mb::ContestResponse> {
        self.run(Operation::Contest, request, |app, p, m| {
            let id = record_id(&m.id)?;
            let (actor, rationale) = who(&m.actor, &m.rationale);
            // The contesting reference: a record when it names one the caller can see, else
            // the claim itself (membrane fails on anything but a record id).
            let by = RecordId::parse(m.contesting_ref.trim()).ok().filter(|r| app.ops.get(p, r).is_ok());
            let claim = match (&by, m.contesting_ref.trim()) {
                (Some(_), _) => None,
                (None, "") => Some(rationale.clone()),
                (None, text) => Some(text.to_string()),
            };
            app.ops.contest(p, &id, ContestRequest { by, claim }, actor, rationale)?;
            Ok(mb::ContestResponse {})
        })
        .await
    }
}
