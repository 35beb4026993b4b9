//! Conversions between the gRPC messages (`pb`) and the service's types. Requests are
//! checked here: a bad enum, id, scope or timestamp is an `InvalidArgument` naming the field.

use jiff::Timestamp;
use mneme_core::{
    AuditEntry, CompetencePayload, EventPayload, MemoryRecord, MemoryType, Payload, Performance, PlanEdge, PlanGraphPayload, PlanNode,
    RecordId, Scope, SemanticPayload, Sensitivity, Status, ToolOutputPayload, WorkingPayload,
};
use mneme_service::{Brief, History, Hit, IngestOptions, Metrics, Revision, SalienceChange};
use mneme_store::Link;
use prost_types::value::Kind;

use crate::error::{ApiError, ApiResult};
use crate::pb;

fn bad(field: &str, msg: impl std::fmt::Display) -> ApiError {
    ApiError::BadRequest(format!("invalid {field}: {msg}"))
}

pub fn id(field: &str, s: &str) -> ApiResult<RecordId> {
    if s.is_empty() {
        return Err(bad(field, "required"));
    }
    RecordId::parse(s).map_err(|e| bad(field, e))
}

pub fn opt_id(field: &str, s: &str) -> ApiResult<Option<RecordId>> {
    if s.is_empty() { Ok(None) } else { id(field, s).map(Some) }
}

pub fn time(field: &str, s: &str) -> ApiResult<Option<Timestamp>> {
    if s.is_empty() {
        return Ok(None);
    }
    s.parse::<Timestamp>().map(Some).map_err(|e| bad(field, format!("{s:?} is not an RFC 3339 timestamp ({e})")))
}

fn ts(t: Timestamp) -> String {
    t.to_string()
}

fn opt_ts(t: Option<Timestamp>) -> String {
    t.map(ts).unwrap_or_default()
}

fn non_empty(s: String) -> Option<String> {
    if s.is_empty() { None } else { Some(s) }
}

// ---- enums --------------------------------------------------------------------------

pub fn memory_type(field: &str, v: i32) -> ApiResult<MemoryType> {
    match pb::MemoryType::try_from(v) {
        Ok(pb::MemoryType::Episodic) => Ok(MemoryType::Episodic),
        Ok(pb::MemoryType::Semantic) => Ok(MemoryType::Semantic),
        Ok(pb::MemoryType::Competence) => Ok(MemoryType::Competence),
        Ok(pb::MemoryType::Working) => Ok(MemoryType::Working),
        Ok(pb::MemoryType::PlanGraph) => Ok(MemoryType::PlanGraph),
        Ok(pb::MemoryType::Unspecified) | Err(_) => Err(bad(field, format!("{v} is not a memory type"))),
    }
}

pub fn pb_memory_type(t: MemoryType) -> i32 {
    (match t {
        MemoryType::Episodic => pb::MemoryType::Episodic,
        MemoryType::Semantic => pb::MemoryType::Semantic,
        MemoryType::Competence => pb::MemoryType::Competence,
        MemoryType::Working => pb::MemoryType::Working,
        MemoryType::PlanGraph => pb::MemoryType::PlanGraph,
    }) as i32
}

/// `None` for UNSPECIFIED.
pub fn sensitivity(field: &str, v: i32) -> ApiResult<Option<Sensitivity>> {
    match pb::Sensitivity::try_from(v) {
        Ok(pb::Sensitivity::Unspecified) => Ok(None),
        Ok(pb::Sensitivity::Public) => Ok(Some(Sensitivity::Public)),
        Ok(pb::Sensitivity::Low) => Ok(Some(Sensitivity::Low)),
        Ok(pb::Sensitivity::Medium) => Ok(Some(Sensitivity::Medium)),
        Ok(pb::Sensitivity::High) => Ok(Some(Sensitivity::High)),
        Ok(pb::Sensitivity::Critical) => Ok(Some(Sensitivity::Critical)),
        Err(_) => Err(bad(field, format!("{v} is not a sensitivity"))),
    }
}

fn pb_sensitivity(s: Sensitivity) -> i32 {
    (match s {
        Sensitivity::Public => pb::Sensitivity::Public,
        Sensitivity::Low => pb::Sensitivity::Low,
        Sensitivity::Medium => pb::Sensitivity::Medium,
        Sensitivity::High => pb::Sensitivity::High,
        Sensitivity::Critical => pb::Sensitivity::Critical,
    }) as i32
}

fn pb_status(s: Status) -> i32 {
    (match s {
        Status::Active => pb::Status::Active,
        Status::Contested => pb::Status::Contested,
        Status::Superseded => pb::Status::Superseded,
        Status::Retracted => pb::Status::Retracted,
    }) as i32
}

// ---- JSON values ----------------------------------------------------------------------

/// A protobuf `Value` as JSON. NaN and ±Infinity have no JSON form: refused (they used to
/// be stored as `null`, silently losing the number), naming the field.
pub fn json_from_pb(field: &str, v: Option<prost_types::Value>) -> ApiResult<serde_json::Value> {
    Ok(match v.and_then(|v| v.kind) {
        None | Some(Kind::NullValue(_)) => serde_json::Value::Null,
        Some(Kind::BoolValue(b)) => b.into(),
        Some(Kind::NumberValue(n)) if !n.is_finite() => return Err(bad(field, format!("{n} is not a JSON number"))),
        Some(Kind::NumberValue(n)) if n.fract() == 0.0 && n.abs() < 9.0e15 => serde_json::Value::from(n as i64),
        Some(Kind::NumberValue(n)) => serde_json::Number::from_f64(n).map(serde_json::Value::Number).expect("finite numbers are JSON"),
        Some(Kind::StringValue(s)) => s.into(),
        Some(Kind::ListValue(l)) => {
            l.values.into_iter().enumerate().map(|(i, v)| json_from_pb(&format!("{field}[{i}]"), Some(v))).collect::<ApiResult<_>>()?
        }
        Some(Kind::StructValue(s)) => json_from_struct(field, s)?,
    })
}

pub fn json_from_struct(field: &str, s: prost_types::Struct) -> ApiResult<serde_json::Value> {
    Ok(serde_json::Value::Object(
        s.fields.into_iter().map(|(k, v)| Ok((k.clone(), json_from_pb(&format!("{field}.{k}"), Some(v))?))).collect::<ApiResult<_>>()?,
    ))
}

pub fn pb_from_json(v: &serde_json::Value) -> prost_types::Value {
    let kind = match v {
        serde_json::Value::Null => Kind::NullValue(0),
        serde_json::Value::Bool(b) => Kind::BoolValue(*b),
        serde_json::Value::Number(n) => Kind::NumberValue(n.as_f64().unwrap_or(0.0)),
        serde_json::Value::String(s) => Kind::StringValue(s.clone()),
        serde_json::Value::Array(a) => Kind::ListValue(prost_types::ListValue { values: a.iter().map(pb_from_json).collect() }),
        serde_json::Value::Object(o) => {
            Kind::StructValue(prost_types::Struct { fields: o.iter().map(|(k, v)| (k.clone(), pb_from_json(v))).collect() })
        }
    };
    prost_types::Value { kind: Some(kind) }
}

// ---- payloads -------------------------------------------------------------------------

pub fn event(e: pb::EventPayload) -> ApiResult<EventPayload> {
    Ok(EventPayload {
        event_kind: if e.event_kind.is_empty() { "message".into() } else { e.event_kind },
        reference: non_empty(e.reference),
        sender: non_empty(e.sender),
        text: e.text,
        event_time: time("event.event_time", &e.event_time)?,
    })
}

pub fn tool_output(t: pb::ToolOutputPayload) -> ApiResult<ToolOutputPayload> {
    let result = json_from_pb("output.result", t.result)?;
    Ok(ToolOutputPayload {
        tool: t.tool,
        args: json_from_pb("output.args", t.args)?,
        result: if result.is_null() { None } else { Some(result) },
        error: non_empty(t.error),
        duration_ms: t.duration_ms,
    })
}

pub fn semantic(f: pb::SemanticPayload) -> ApiResult<SemanticPayload> {
    Ok(SemanticPayload {
        subject: f.subject,
        predicate: f.predicate,
        object: f.object,
        valid_from: time("fact.valid_from", &f.valid_from)?,
        valid_to: time("fact.valid_to", &f.valid_to)?,
        evidence: f.evidence,
    })
}

pub fn working(w: pb::WorkingPayload) -> WorkingPayload {
    WorkingPayload {
        thread_id: w.thread_id,
        state: w.state,
        next_actions: w.next_actions,
        open_questions: w.open_questions,
        summary: w.summary,
    }
}

fn performance(p: Option<pb::Performance>) -> Performance {
    let p = p.unwrap_or_default();
    Performance {
        success_count: p.success_count,
        failure_count: p.failure_count,
        success_rate: p.success_rate,
        failure_modes: p.failure_modes.into_iter().collect(),
        avg_duration_ms: p.avg_duration_ms,
        timed_count: p.timed_count,
    }
}

pub fn payload(p: pb::Payload) -> ApiResult<Payload> {
    use pb::payload::Kind as K;
    Ok(match p.kind.ok_or_else(|| bad("payload", "one of event, tool_output, semantic, competence, working, plan_graph is required"))? {
        K::Event(e) => Payload::Event(event(e)?),
        K::ToolOutput(t) => Payload::ToolOutput(tool_output(t)?),
        K::Semantic(s) => Payload::Semantic(semantic(s)?),
        K::Competence(c) => Payload::Competence(CompetencePayload {
            skill: c.skill,
            triggers: c.triggers,
            steps: c.steps,
            performance: performance(c.performance),
        }),
        K::Working(w) => Payload::Working(working(w)),
        K::PlanGraph(g) => Payload::PlanGraph(PlanGraphPayload {
            intent: g.intent,
            nodes: g.nodes.into_iter().map(|n| PlanNode { id: n.id, label: n.label, status: non_empty(n.status) }).collect(),
            edges: g.edges.into_iter().map(|e| PlanEdge { from: e.from, to: e.to, kind: non_empty(e.kind) }).collect(),
        }),
    })
}

fn pb_payload(p: &Payload) -> pb::Payload {
    use pb::payload::Kind as K;
    let kind = match p {
        Payload::Event(e) => K::Event(pb::EventPayload {
            event_kind: e.event_kind.clone(),
            reference: e.reference.clone().unwrap_or_default(),
            sender: e.sender.clone().unwrap_or_default(),
            text: e.text.clone(),
            event_time: opt_ts(e.event_time),
        }),
        Payload::ToolOutput(t) => K::ToolOutput(pb::ToolOutputPayload {
            tool: t.tool.clone(),
            args: Some(pb_from_json(&t.args)),
            result: t.result.as_ref().map(pb_from_json),
            error: t.error.clone().unwrap_or_default(),
            duration_ms: t.duration_ms,
        }),
        Payload::Semantic(s) => K::Semantic(pb::SemanticPayload {
            subject: s.subject.clone(),
            predicate: s.predicate.clone(),
            object: s.object.clone(),
            valid_from: opt_ts(s.valid_from),
            valid_to: opt_ts(s.valid_to),
            evidence: s.evidence.clone(),
        }),
        Payload::Competence(c) => K::Competence(pb::CompetencePayload {
            skill: c.skill.clone(),
            triggers: c.triggers.clone(),
            steps: c.steps.clone(),
            performance: Some(pb::Performance {
                success_count: c.performance.success_count,
                failure_count: c.performance.failure_count,
                success_rate: c.performance.success_rate,
                failure_modes: c.performance.failure_modes.clone().into_iter().collect(),
                avg_duration_ms: c.performance.avg_duration_ms,
                timed_count: c.performance.timed_count,
            }),
        }),
        Payload::Working(w) => K::Working(pb::WorkingPayload {
            thread_id: w.thread_id.clone(),
            state: w.state.clone(),
            next_actions: w.next_actions.clone(),
            open_questions: w.open_questions.clone(),
            summary: w.summary.clone(),
        }),
        Payload::PlanGraph(g) => K::PlanGraph(pb::PlanGraphPayload {
            intent: g.intent.clone(),
            nodes: g
                .nodes
                .iter()
                .map(|n| pb::PlanNode { id: n.id.clone(), label: n.label.clone(), status: n.status.clone().unwrap_or_default() })
                .collect(),
            edges: g
                .edges
                .iter()
                .map(|e| pb::PlanEdge { from: e.from.clone(), to: e.to.clone(), kind: e.kind.clone().unwrap_or_default() })
                .collect(),
        }),
    };
    pb::Payload { kind: Some(kind) }
}

// ---- records --------------------------------------------------------------------------

pub fn record(r: &MemoryRecord, current_salience: f64) -> pb::MemoryRecord {
    pb::MemoryRecord {
        id: r.id.to_string(),
        memory_type: pb_memory_type(r.memory_type),
        sensitivity: pb_sensitivity(r.sensitivity),
        scope: r.scope.as_str().to_string(),
        tags: r.tags.clone(),
        summary: r.summary.clone(),
        payload: r.payload.as_ref().map(pb_payload),
        confidence: r.confidence,
        salience: Some(pb::Salience {
            base: r.salience.base,
            reinforced_at: ts(r.salience.reinforced_at),
            pinned: r.salience.pinned,
            current: current_salience,
        }),
        status: pb_status(r.status),
        lineage: Some(pb::Lineage {
            parent_ids: r.lineage.parent_ids.iter().map(ToString::to_string).collect(),
            operation: r.lineage.operation.as_str().into(),
            actor: r.lineage.actor.clone(),
            rationale: r.lineage.rationale.clone(),
            timestamp: ts(r.lineage.timestamp),
        }),
        created_at: ts(r.created_at),
        updated_at: ts(r.updated_at),
        event_time: opt_ts(r.event_time),
        pruned_at: opt_ts(r.pruned_at),
    }
}

pub fn hit(h: &Hit) -> pb::Hit {
    pb::Hit {
        record: Some(record(&h.record, h.current_salience)),
        score: Some(pb::ScoreParts {
            total: h.score.score,
            relevance: h.score.relevance.unwrap_or(0.0),
            bm25: h.score.bm25.unwrap_or(0.0),
            salience: h.score.salience,
            recency: h.score.recency,
            lexical: h.score.lexical.unwrap_or(0.0),
            cosine: h.score.cosine,
            dense: h.score.dense,
            slot: h.score.slot,
            present: h.score.present,
            coverage: h.score.coverage,
            relevant: h.score.relevant,
        }),
        outdated: h.outdated.as_ref().map(|o| pb::Outdated {
            slot: o.slot.clone(),
            old: o.old.clone(),
            new: o.new.clone().unwrap_or_default(),
            since: ts(o.since),
            fact_id: o.fact.to_string(),
            statement_id: o.statement.as_ref().map(ToString::to_string).unwrap_or_default(),
            by: match o.by {
                mneme_service::RestsBy::NamesOld => "names_old",
                mneme_service::RestsBy::Topic => "topic",
            }
            .into(),
        }),
    }
}

fn brief(b: &Brief) -> pb::Brief {
    pb::Brief {
        id: b.id.to_string(),
        memory_type: pb_memory_type(b.memory_type),
        status: pb_status(b.status),
        summary: b.summary.clone(),
        operation: b.operation.as_str().into(),
        parent_ids: b.parent_ids.iter().map(ToString::to_string).collect(),
        created_at: ts(b.created_at),
        pruned: b.pruned,
    }
}

fn link(l: &Link) -> pb::Link {
    pb::Link { from: l.from.to_string(), to: l.to.to_string(), kind: l.kind.clone(), note: l.note.clone(), created_at: ts(l.at) }
}

fn audit(a: &AuditEntry) -> pb::AuditEntry {
    pb::AuditEntry {
        seq: a.seq,
        record_id: a.record_id.to_string(),
        at: ts(a.at),
        actor: a.actor.clone(),
        action: a.action.as_str().into(),
        rationale: a.rationale.clone(),
        details: Some(pb_from_json(&a.details)),
    }
}

pub fn history(h: &History) -> pb::HistoryResponse {
    pb::HistoryResponse {
        record: Some(record(&h.record, h.current_salience)),
        ancestors: h.ancestors.iter().map(brief).collect(),
        descendants: h.descendants.iter().map(brief).collect(),
        links: h.links.iter().map(link).collect(),
        audit: h.audit.iter().map(audit).collect(),
        hidden: u32::try_from(h.hidden).unwrap_or(u32::MAX),
    }
}

pub fn salience_change(c: &SalienceChange) -> pb::SalienceChange {
    pb::SalienceChange { id: c.id.to_string(), before: c.before, after: c.after }
}

pub fn metrics(m: &Metrics) -> pb::Metrics {
    pb::Metrics {
        total_records: m.total_records,
        by_type: m.by_type.clone().into_iter().collect(),
        live_by_type: m.live_by_type.clone().into_iter().collect(),
        by_status: m.by_status.clone().into_iter().collect(),
        pruned: m.pruned,
        pinned: m.pinned,
        audit_entries: m.audit_entries,
        links: m.links,
        file_bytes: m.file_bytes,
        encrypted: m.encrypted,
        schema_version: m.schema_version,
        ..Default::default()
    }
}

// ---- request parts -----------------------------------------------------------------------

pub fn ingest_options(o: Option<pb::IngestOptions>) -> ApiResult<IngestOptions> {
    let o = o.unwrap_or_default();
    Ok(IngestOptions {
        summary: o.summary,
        sensitivity: sensitivity("options.sensitivity", o.sensitivity)?,
        scope: if o.scope.is_empty() { None } else { Some(Scope::parse(&o.scope).map_err(|e| bad("options.scope", e))?) },
        tags: o.tags,
        confidence: o.confidence,
        salience: o.salience,
        pinned: o.pinned,
        actor: non_empty(o.actor),
        rationale: non_empty(o.rationale),
    })
}

pub fn revision(c: Option<pb::RevisionChange>) -> ApiResult<Revision> {
    let c = c.unwrap_or_default();
    Ok(Revision {
        payload: c.payload.map(payload).transpose()?,
        summary: c.summary,
        tags: if c.replace_tags { Some(c.tags) } else { None },
        sensitivity: sensitivity("change.sensitivity", c.sensitivity)?,
        confidence: c.confidence,
    })
}

pub fn scopes(field: &str, list: Vec<String>) -> ApiResult<Option<Vec<Scope>>> {
    if list.is_empty() {
        return Ok(None);
    }
    list.iter().map(|s| Scope::parse(s).map_err(|e| bad(field, e))).collect::<ApiResult<Vec<_>>>().map(Some)
}
