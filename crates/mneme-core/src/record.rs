//! The record model: what one memory is.
//!
//! A [`MemoryRecord`] has an id, a [`MemoryType`], a [`Sensitivity`], a [`Scope`], tags,
//! a one-line summary, a typed [`Payload`], confidence, salience state, a [`Status`] and
//! its [`Lineage`]. Every change to a record is also written to its append-only
//! [`AuditEntry`] log by the store.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

use crate::decay::SalienceState;
use crate::error::{CoreError, CoreResult};

/// The five kinds of memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MemoryType {
    /// Something that happened: a message, a tool call, an outcome. Immutable.
    Episodic,
    /// A fact: subject, predicate, object.
    Semantic,
    /// A skill: how to do something and how well it has gone.
    Competence,
    /// The state of a thread of work.
    Working,
    /// A plan as a graph of steps.
    PlanGraph,
}

impl MemoryType {
    pub const ALL: [MemoryType; 5] =
        [MemoryType::Episodic, MemoryType::Semantic, MemoryType::Competence, MemoryType::Working, MemoryType::PlanGraph];

    pub fn as_str(self) -> &'static str {
        match self {
            MemoryType::Episodic => "episodic",
            MemoryType::Semantic => "semantic",
            MemoryType::Competence => "competence",
            MemoryType::Working => "working",
            MemoryType::PlanGraph => "plan_graph",
        }
    }
}

impl fmt::Display for MemoryType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for MemoryType {
    type Err = CoreError;
    fn from_str(s: &str) -> CoreResult<Self> {
        let wanted = s.trim().to_ascii_lowercase().replace('-', "_");
        MemoryType::ALL.into_iter().find(|t| t.as_str() == wanted).ok_or_else(|| {
            CoreError::invalid(
                "memory type",
                format!("unknown memory type {s:?}; expected one of episodic, semantic, competence, working, plan_graph"),
            )
        })
    }
}

/// How careful mneme must be with a record. Ordered: `public < low < medium < high < critical`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Sensitivity {
    Public,
    Low,
    Medium,
    High,
    Critical,
}

impl Sensitivity {
    pub const ALL: [Sensitivity; 5] =
        [Sensitivity::Public, Sensitivity::Low, Sensitivity::Medium, Sensitivity::High, Sensitivity::Critical];

    pub fn as_str(self) -> &'static str {
        match self {
            Sensitivity::Public => "public",
            Sensitivity::Low => "low",
            Sensitivity::Medium => "medium",
            Sensitivity::High => "high",
            Sensitivity::Critical => "critical",
        }
    }

    /// The stored integer level (0 = public .. 4 = critical); ordering by level is ordering by sensitivity.
    pub fn level(self) -> i64 {
        self as i64
    }

    pub fn from_level(level: i64) -> Option<Self> {
        Sensitivity::ALL.into_iter().find(|s| s.level() == level)
    }
}

impl fmt::Display for Sensitivity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Sensitivity {
    type Err = CoreError;
    fn from_str(s: &str) -> CoreResult<Self> {
        let wanted = s.trim().to_ascii_lowercase();
        Sensitivity::ALL.into_iter().find(|v| v.as_str() == wanted).ok_or_else(|| {
            CoreError::invalid("sensitivity", format!("unknown sensitivity {s:?}; expected one of public, low, medium, high, critical"))
        })
    }
}

/// Where a record stands in its revision history.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Active,
    /// Disputed by another observation; still retrieved, marked as contested.
    Contested,
    /// Withdrawn. A tombstone: hidden from default retrieval, kept for history.
    Retracted,
    /// Replaced by a newer record (supersede or merge). A tombstone.
    Superseded,
}

impl Status {
    pub const ALL: [Status; 4] = [Status::Active, Status::Contested, Status::Retracted, Status::Superseded];

    pub fn as_str(self) -> &'static str {
        match self {
            Status::Active => "active",
            Status::Contested => "contested",
            Status::Retracted => "retracted",
            Status::Superseded => "superseded",
        }
    }

    /// Tombstones are hidden from default retrieval but reachable by id and in history.
    pub fn is_tombstone(self) -> bool {
        matches!(self, Status::Retracted | Status::Superseded)
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Status {
    type Err = CoreError;
    fn from_str(s: &str) -> CoreResult<Self> {
        Status::ALL.into_iter().find(|v| v.as_str() == s).ok_or_else(|| CoreError::invalid("status", format!("unknown status {s:?}")))
    }
}

/// A record id: a UUIDv7 in its lowercase hyphenated form, so ids sort by creation time.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct RecordId(String);

impl RecordId {
    /// Accepts the canonical 8-4-4-4-12 hex form (any case) and normalises to lowercase.
    pub fn parse(s: &str) -> CoreResult<Self> {
        let t = s.trim();
        let groups: Vec<&str> = t.split('-').collect();
        let shape_ok =
            groups.len() == 5 && groups.iter().zip([8, 4, 4, 4, 12]).all(|(g, n)| g.len() == n && g.bytes().all(|b| b.is_ascii_hexdigit()));
        if !shape_ok {
            let shown: String = t.chars().take(64).collect();
            return Err(CoreError::invalid(
                "record id",
                format!("{shown:?} is not a record id (expected a UUID such as 0192f3c4-...-...)"),
            ));
        }
        Ok(RecordId(t.to_ascii_lowercase()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for RecordId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl TryFrom<String> for RecordId {
    type Error = CoreError;
    fn try_from(s: String) -> CoreResult<Self> {
        RecordId::parse(&s)
    }
}

impl From<RecordId> for String {
    fn from(id: RecordId) -> String {
        id.0
    }
}

impl FromStr for RecordId {
    type Err = CoreError;
    fn from_str(s: &str) -> CoreResult<Self> {
        RecordId::parse(s)
    }
}

/// A tenant key such as `agent:atlas`, `user:howard` or `project:x`. Empty means global:
/// a global record is visible in every scope.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Scope(String);

impl Scope {
    pub const MAX_BYTES: usize = 128;

    pub fn global() -> Self {
        Scope(String::new())
    }

    pub fn parse(s: &str) -> CoreResult<Self> {
        let t = s.trim();
        if t.len() > Self::MAX_BYTES {
            return Err(CoreError::TooLarge { field: "scope", actual: t.len(), limit: Self::MAX_BYTES });
        }
        if let Some(bad) = t.chars().find(|c| c.is_whitespace() || c.is_control()) {
            return Err(CoreError::invalid("scope", format!("{t:?} contains {bad:?}; scopes are keys like agent:atlas")));
        }
        Ok(Scope(t.to_string()))
    }

    pub fn is_global(&self) -> bool {
        self.0.is_empty()
    }

    /// The scope of one end user's memories: `user:<id>`, the id lower-cased with every run
    /// of characters other than letters, digits, `.`, `_`, `@` and `-` as one `-`
    /// ("Mei Chen" → `user:mei-chen`). `None` for a name with nothing left.
    pub fn user(name: &str) -> Option<Scope> {
        let mut id = String::new();
        for c in name.trim().to_lowercase().chars() {
            if c.is_alphanumeric() || matches!(c, '.' | '_' | '@' | '-') {
                id.push(c);
            } else if !id.ends_with('-') {
                id.push('-');
            }
        }
        let id: String = id.trim_matches('-').chars().take(100).collect();
        if id.is_empty() { None } else { Scope::parse(&format!("user:{id}")).ok() }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() { f.write_str("(global)") } else { f.write_str(&self.0) }
    }
}

impl TryFrom<String> for Scope {
    type Error = CoreError;
    fn try_from(s: String) -> CoreResult<Self> {
        Scope::parse(&s)
    }
}

impl From<Scope> for String {
    fn from(s: Scope) -> String {
        s.0
    }
}

/// Something that happened in a conversation or the agent's world.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EventPayload {
    /// What kind of event: `message`, `outcome`, `note`, ...
    pub event_kind: String,
    /// An external reference (message id, URL, target record id for outcomes).
    #[serde(rename = "ref", default, skip_serializing_if = "Option::is_none")]
    pub reference: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sender: Option<String>,
    pub text: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event_time: Option<Timestamp>,
}

/// One tool call and its result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolOutputPayload {
    pub tool: String,
    #[serde(default)]
    pub args: serde_json::Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<u64>,
}

/// A fact as subject, predicate, object, with an optional validity window.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SemanticPayload {
    pub subject: String,
    pub predicate: String,
    pub object: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub valid_from: Option<Timestamp>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub valid_to: Option<Timestamp>,
    /// Ids of records (or external references) that support the fact.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub evidence: Vec<String>,
}

/// How a skill has performed so far.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Performance {
    pub success_count: u64,
    pub failure_count: u64,
    /// successes / (successes + failures); 0 before the first outcome.
    pub success_rate: f64,
    /// Normalised failure mode → occurrences.
    #[serde(default)]
    pub failure_modes: BTreeMap<String, u64>,
    /// Mean duration over outcomes that reported one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub avg_duration_ms: Option<f64>,
    /// How many outcomes reported a duration (the weight of `avg_duration_ms`).
    #[serde(default)]
    pub timed_count: u64,
}

impl Performance {
    /// Folds one outcome into the statistics.
    pub fn record(&mut self, success: bool, duration_ms: Option<u64>, failure_mode: Option<&str>) {
        // Counters saturate: a payload written with huge counts must not wrap to 0/0 = NaN.
        if success {
            self.success_count = self.success_count.saturating_add(1);
        } else {
            self.failure_count = self.failure_count.saturating_add(1);
            if let Some(mode) = failure_mode.map(normalize_failure_mode).filter(|m| !m.is_empty()) {
                let n = self.failure_modes.entry(mode).or_insert(0);
                *n = n.saturating_add(1);
            }
        }
        let total = self.success_count as f64 + self.failure_count as f64;
        self.success_rate = self.success_count as f64 / total;
        if let Some(d) = duration_ms {
            let prev = self.avg_duration_ms.unwrap_or(0.0) * self.timed_count as f64;
            self.timed_count = self.timed_count.saturating_add(1);
            self.avg_duration_ms = Some((prev + d as f64) / self.timed_count as f64);
        }
    }
}

/// Lowercases, collapses digits and whitespace, and cuts a failure message to 80 chars so
/// "timeout after 30s" and "Timeout after 31s" count as the same failure mode.
pub fn normalize_failure_mode(raw: &str) -> String {
    let mut out = String::new();
    let mut last_space = true;
    for c in raw.trim().chars() {
        let c = if c.is_ascii_digit() { '#' } else { c.to_ascii_lowercase() };
        if c.is_whitespace() {
            if !last_space {
                out.push(' ');
            }
            last_space = true;
        } else {
            if c == '#' && out.ends_with('#') {
                continue;
            }
            out.push(c);
            last_space = false;
        }
        if out.chars().count() >= 80 {
            break;
        }
    }
    out.trim_end().to_string()
}

/// A skill: when to use it, how, and how well it has gone.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CompetencePayload {
    pub skill: String,
    #[serde(default)]
    pub triggers: Vec<String>,
    #[serde(default)]
    pub steps: Vec<String>,
    #[serde(default)]
    pub performance: Performance,
}

/// The state of a thread of work.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkingPayload {
    pub thread_id: String,
    pub state: String,
    #[serde(default)]
    pub next_actions: Vec<String>,
    #[serde(default)]
    pub open_questions: Vec<String>,
    #[serde(default)]
    pub summary: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlanNode {
    pub id: String,
    pub label: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlanEdge {
    pub from: String,
    pub to: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
}

/// A plan as a graph: steps are nodes, dependencies are edges.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlanGraphPayload {
    pub intent: String,
    #[serde(default)]
    pub nodes: Vec<PlanNode>,
    #[serde(default)]
    pub edges: Vec<PlanEdge>,
}

/// The typed content of a record. The variant fixes the memory type.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Payload {
    Event(EventPayload),
    ToolOutput(ToolOutputPayload),
    Semantic(SemanticPayload),
    Competence(CompetencePayload),
    Working(WorkingPayload),
    PlanGraph(PlanGraphPayload),
}

impl Payload {
    pub fn memory_type(&self) -> MemoryType {
        match self {
            Payload::Event(_) | Payload::ToolOutput(_) => MemoryType::Episodic,
            Payload::Semantic(_) => MemoryType::Semantic,
            Payload::Competence(_) => MemoryType::Competence,
            Payload::Working(_) => MemoryType::Working,
            Payload::PlanGraph(_) => MemoryType::PlanGraph,
        }
    }

    /// The payload's variant name as stored (`event`, `tool_output`, ...).
    pub fn kind(&self) -> &'static str {
        match self {
            Payload::Event(_) => "event",
            Payload::ToolOutput(_) => "tool_output",
            Payload::Semantic(_) => "semantic",
            Payload::Competence(_) => "competence",
            Payload::Working(_) => "working",
            Payload::PlanGraph(_) => "plan_graph",
        }
    }

    /// When the remembered thing happened, if the payload says.
    pub fn event_time(&self) -> Option<Timestamp> {
        match self {
            Payload::Event(e) => e.event_time,
            Payload::Semantic(s) => s.valid_from,
            _ => None,
        }
    }

    /// All human-readable text of the payload, one part per line, for the full-text index.
    pub fn search_text(&self) -> String {
        let mut out = TextParts(String::new());
        match self {
            Payload::Event(e) => {
                out.push_opt(&e.sender);
                out.push(&e.text);
            }
            Payload::ToolOutput(t) => {
                out.push(&t.tool);
                out.push_json(&t.args);
                if let Some(r) = &t.result {
                    out.push_json(r);
                }
                out.push_opt(&t.error);
            }
            Payload::Semantic(s) => [&s.subject, &s.predicate, &s.object].into_iter().for_each(|p| out.push(p)),
            Payload::Competence(c) => {
                out.push(&c.skill);
                c.triggers.iter().chain(&c.steps).chain(c.performance.failure_modes.keys()).for_each(|p| out.push(p));
            }
            Payload::Working(w) => {
                [&w.thread_id, &w.state, &w.summary].into_iter().for_each(|p| out.push(p));
                w.next_actions.iter().chain(&w.open_questions).for_each(|p| out.push(p));
            }
            Payload::PlanGraph(p) => {
                out.push(&p.intent);
                p.nodes.iter().for_each(|n| out.push(&n.label));
            }
        }
        out.0
    }

    /// What the record says, as opposed to who said it or which tool ran: an event's
    /// text (not its sender), a tool call's arguments, result and error (not the tool's
    /// name), a fact's value; else the searchable text. What forgetting matches a query
    /// against and looks for in the copies it erases (the conversation log, audit text,
    /// workspace files): a sender's name is in many messages that say nothing of it.
    pub fn own_text(&self) -> String {
        match self {
            Payload::Event(e) => e.text.clone(),
            Payload::ToolOutput(t) => {
                let mut out = TextParts(String::new());
                out.push_json(&t.args);
                if let Some(r) = &t.result {
                    out.push_json(r);
                }
                out.push_opt(&t.error);
                out.0
            }
            other => other.search_text(),
        }
    }

    /// A one-line summary for callers that did not give one (at most 200 chars).
    pub fn default_summary(&self) -> String {
        let raw = match self {
            Payload::Event(e) => match &e.sender {
                Some(s) if !s.is_empty() => format!("{s}: {}", e.text),
                _ => e.text.clone(),
            },
            Payload::ToolOutput(t) => match &t.error {
                Some(err) => format!("{} failed: {err}", t.tool),
                None => format!("{} succeeded", t.tool),
            },
            Payload::Semantic(s) => format!("{} {} {}", s.subject, s.predicate, s.object),
            Payload::Competence(c) => format!("skill {}", c.skill),
            Payload::Working(w) => format!("thread {}: {}", w.thread_id, w.state),
            Payload::PlanGraph(p) => format!("plan: {}", p.intent),
        };
        one_line(&raw, 200)
    }
}

/// Newline-separated non-blank text parts.
struct TextParts(String);

impl TextParts {
    fn push(&mut self, part: &str) {
        if part.trim().is_empty() {
            return;
        }
        if !self.0.is_empty() {
            self.0.push('\n');
        }
        self.0.push_str(part);
    }

    fn push_opt(&mut self, part: &Option<String>) {
        if let Some(p) = part {
            self.push(p);
        }
    }

    fn push_json(&mut self, v: &serde_json::Value) {
        match v {
            serde_json::Value::String(s) => self.push(s),
            serde_json::Value::Array(items) => items.iter().for_each(|i| self.push_json(i)),
            serde_json::Value::Object(map) => map.values().for_each(|i| self.push_json(i)),
            serde_json::Value::Number(n) => self.push(&n.to_string()),
            serde_json::Value::Bool(_) | serde_json::Value::Null => {}
        }
    }
}

/// Collapses whitespace to single spaces and cuts to `max_chars` characters (with an ellipsis).
pub fn one_line(text: &str, max_chars: usize) -> String {
    let mut out = String::with_capacity(text.len().min(max_chars * 4));
    let mut chars = 0;
    for word in text.split_whitespace() {
        for c in (chars > 0).then_some(' ').into_iter().chain(word.chars()) {
            if chars == max_chars {
                // One character too many: replace the last kept one by the ellipsis.
                out.pop();
                out.push('…');
                return out;
            }
            out.push(c);
            chars += 1;
        }
    }
    out
}

/// How a record came to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LineageOp {
    Original,
    Supersede,
    Fork,
    Merge,
}

impl LineageOp {
    pub fn as_str(self) -> &'static str {
        match self {
            LineageOp::Original => "original",
            LineageOp::Supersede => "supersede",
            LineageOp::Fork => "fork",
            LineageOp::Merge => "merge",
        }
    }
}

impl FromStr for LineageOp {
    type Err = CoreError;
    fn from_str(s: &str) -> CoreResult<Self> {
        [LineageOp::Original, LineageOp::Supersede, LineageOp::Fork, LineageOp::Merge]
            .into_iter()
            .find(|v| v.as_str() == s)
            .ok_or_else(|| CoreError::invalid("lineage operation", format!("unknown operation {s:?}")))
    }
}

/// Where a record came from: its parents and the operation, actor and reason that made it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Lineage {
    pub parent_ids: Vec<RecordId>,
    pub operation: LineageOp,
    pub actor: String,
    pub rationale: String,
    pub timestamp: Timestamp,
}

/// One memory.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MemoryRecord {
    pub id: RecordId,
    pub memory_type: MemoryType,
    pub sensitivity: Sensitivity,
    pub scope: Scope,
    pub tags: Vec<String>,
    pub summary: String,
    /// `None` once a prune sweep dropped the payload of a decayed record.
    pub payload: Option<Payload>,
    pub confidence: f64,
    pub salience: SalienceState,
    pub status: Status,
    pub lineage: Lineage,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    pub event_time: Option<Timestamp>,
    pub pruned_at: Option<Timestamp>,
    /// Set when the record's content was erased (`forget`): the tombstone keeps its id,
    /// type, times, status and a hash of what was erased.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forgotten_at: Option<Timestamp>,
}

impl MemoryRecord {
    /// Hidden from default retrieval: superseded, retracted or pruned.
    pub fn is_tombstone(&self) -> bool {
        self.status.is_tombstone() || self.pruned_at.is_some()
    }

    /// The record's state in words: `pruned`, or its status.
    pub fn state(&self) -> &'static str {
        if self.pruned_at.is_some() { "pruned" } else { self.status.as_str() }
    }
}

/// A record as a caller submits it, before the store gives it an id and a status.
#[derive(Debug, Clone, PartialEq)]
pub struct NewRecord {
    pub payload: Payload,
    /// `None`: derived from the payload (and not stored twice).
    pub summary: Option<String>,
    pub sensitivity: Sensitivity,
    pub scope: Scope,
    pub tags: Vec<String>,
    pub confidence: f64,
    pub salience: f64,
    pub pinned: bool,
    pub event_time: Option<Timestamp>,
    pub actor: String,
    pub rationale: String,
}

impl NewRecord {
    /// A record with the documented defaults: summary from the payload, sensitivity `low`,
    /// global scope, confidence 1.0, salience 1.0, actor `cli`.
    pub fn new(payload: Payload) -> Self {
        let event_time = payload.event_time();
        NewRecord {
            payload,
            summary: None,
            sensitivity: Sensitivity::Low,
            scope: Scope::global(),
            tags: Vec::new(),
            confidence: 1.0,
            salience: 1.0,
            pinned: false,
            event_time,
            actor: "cli".to_string(),
            rationale: String::new(),
        }
    }

    pub fn memory_type(&self) -> MemoryType {
        self.payload.memory_type()
    }

    /// The summary as it will read: the given one, else derived from the payload.
    pub fn effective_summary(&self) -> String {
        self.summary.clone().unwrap_or_else(|| self.payload.default_summary())
    }
}

/// What an audit entry records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AuditAction {
    Create,
    Supersede,
    SupersededBy,
    Fork,
    ForkedInto,
    Merge,
    MergedInto,
    Retract,
    Contest,
    Reinforce,
    Penalize,
    Outcome,
    Prune,
    /// The record's content was erased (`forget`): the one exception to immutability.
    Forget,
}

impl AuditAction {
    pub const ALL: [AuditAction; 14] = [
        AuditAction::Create,
        AuditAction::Supersede,
        AuditAction::SupersededBy,
        AuditAction::Fork,
        AuditAction::ForkedInto,
        AuditAction::Merge,
        AuditAction::MergedInto,
        AuditAction::Retract,
        AuditAction::Contest,
        AuditAction::Reinforce,
        AuditAction::Penalize,
        AuditAction::Outcome,
        AuditAction::Prune,
        AuditAction::Forget,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            AuditAction::Create => "create",
            AuditAction::Supersede => "supersede",
            AuditAction::SupersededBy => "superseded_by",
            AuditAction::Fork => "fork",
            AuditAction::ForkedInto => "forked_into",
            AuditAction::Merge => "merge",
            AuditAction::MergedInto => "merged_into",
            AuditAction::Retract => "retract",
            AuditAction::Contest => "contest",
            AuditAction::Reinforce => "reinforce",
            AuditAction::Penalize => "penalize",
            AuditAction::Outcome => "outcome",
            AuditAction::Prune => "prune",
            AuditAction::Forget => "forget",
        }
    }
}

impl FromStr for AuditAction {
    type Err = CoreError;
    fn from_str(s: &str) -> CoreResult<Self> {
        AuditAction::ALL
            .into_iter()
            .find(|v| v.as_str() == s)
            .ok_or_else(|| CoreError::invalid("audit action", format!("unknown action {s:?}")))
    }
}

/// One line of a record's append-only audit log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AuditEntry {
    /// Global sequence number: audit entries are totally ordered.
    pub seq: i64,
    pub record_id: RecordId,
    pub at: Timestamp,
    pub actor: String,
    pub action: AuditAction,
    pub rationale: String,
    /// Operation-specific facts (old and new salience, the other record's id, ...).
    pub details: serde_json::Value,
}

/// Groups similar errors: paths, long hex ids, timestamps and port numbers are replaced by
/// placeholders, then the text is normalised like every failure mode.
pub fn normalize_error(error: &str) -> String {
    static RULES: std::sync::LazyLock<[(regex::Regex, &str); 4]> = std::sync::LazyLock::new(|| {
        [
            (regex::Regex::new(r"/[^\s]+").expect("valid"), "<path>"),
            (regex::Regex::new(r"(?i)\b[0-9a-f]{8,}\b").expect("valid"), "<id>"),
            (regex::Regex::new(r"\d{4}-\d{2}-\d{2}[T\s]\d{2}:\d{2}(:\d{2})?(\.\d+)?Z?").expect("valid"), "<timestamp>"),
            (regex::Regex::new(r":\d+\b").expect("valid"), ":<port>"),
        ]
    });
    let mut s = error.to_string();
    for (re, with) in RULES.iter() {
        s = re.replace_all(&s, *with).into_owned();
    }
    normalize_failure_mode(&s)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A typo (`sendr`) used to be dropped silently, losing the sender.
    #[test]
    fn payloads_refuse_unknown_fields_naming_them() {
        let err = serde_json::from_str::<EventPayload>(r#"{"event_kind":"m","text":"x","sendr":"d"}"#).expect_err("refused");
        assert!(err.to_string().contains("sendr"), "{err}");
        let err = serde_json::from_str::<Payload>(r#"{"kind":"semantic","subject":"a","predicate":"b","object":"c","valid_form":"x"}"#)
            .expect_err("refused");
        assert!(err.to_string().contains("valid_form"), "{err}");
    }
}
