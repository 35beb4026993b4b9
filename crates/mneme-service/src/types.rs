//! Requests and results of the service API. Transport-free: the CLI, HTTP, gRPC and MCP
//! front ends convert their wire types to and from these.

use jiff::Timestamp;
use mneme_core::scoring::ScoreParts;
use mneme_core::{AuditEntry, LineageOp, MemoryRecord, MemoryType, Payload, RecordId, Scope, Sensitivity, Status};
use mneme_store::Link;
use serde::{Deserialize, Serialize};

/// What a caller may see. The daemon builds one per principal from server-side policy;
/// a request can narrow it but never widen it.
#[derive(Debug, Clone, PartialEq)]
pub struct Access {
    pub max_sensitivity: Sensitivity,
    /// `None`: every scope. `Some`: these scopes plus global records.
    pub scopes: Option<Vec<Scope>>,
}

impl Access {
    /// The local owner (the CLI): sees everything.
    pub fn owner() -> Self {
        Access { max_sensitivity: Sensitivity::Critical, scopes: None }
    }

    pub fn can_see(&self, record: &MemoryRecord) -> bool {
        record.sensitivity <= self.max_sensitivity && self.covers_scope(&record.scope)
    }

    /// This access narrowed by a request's own ceiling and scopes (membrane's trust
    /// context): the lower ceiling, and only scopes both allow. It never widens.
    pub fn narrowed(&self, ceiling: Sensitivity, scopes: Option<&[Scope]>) -> Access {
        let scopes = match (&self.scopes, scopes) {
            (None, None) => None,
            (Some(mine), None) => Some(mine.clone()),
            (None, Some(asked)) => Some(asked.to_vec()),
            (Some(mine), Some(asked)) => Some(asked.iter().filter(|s| mine.contains(s)).cloned().collect()),
        };
        Access { max_sensitivity: self.max_sensitivity.min(ceiling), scopes }
    }

    /// Whether records in `scope` are within reach (global ones always are).
    pub fn covers_scope(&self, scope: &Scope) -> bool {
        match &self.scopes {
            None => true,
            Some(scopes) => scope.is_global() || scopes.contains(scope),
        }
    }
}

/// Fields common to every ingest. `None` means the documented default.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct IngestOptions {
    /// Default: derived from the payload.
    pub summary: Option<String>,
    /// Default `low`.
    pub sensitivity: Option<Sensitivity>,
    /// Default global.
    pub scope: Option<Scope>,
    pub tags: Vec<String>,
    /// Default 1.0.
    pub confidence: Option<f64>,
    /// Initial salience; default 1.0.
    pub salience: Option<f64>,
    pub pinned: bool,
    /// Default `cli`.
    pub actor: Option<String>,
    pub rationale: Option<String>,
}

/// The result of an action on a record that the action took on another record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OutcomeKind {
    Success,
    Failure,
}

/// One observed use of a skill, for `MemoryService::record_skill_use`.
#[derive(Debug, Clone, PartialEq)]
pub struct SkillUse {
    pub success: bool,
    pub duration_ms: Option<u64>,
    /// A normalised failure mode (counted per mode).
    pub failure_mode: Option<String>,
    /// The record that shows the use (a tool call's outcome record); named in the audit entry.
    pub evidence: RecordId,
}

/// An outcome report: "using record X went well / badly".
#[derive(Debug, Clone, PartialEq)]
pub struct OutcomeRequest {
    pub target: RecordId,
    pub outcome: OutcomeKind,
    pub duration_ms: Option<u64>,
    pub failure_mode: Option<String>,
    pub note: Option<String>,
    /// How much to reinforce or penalize the target; default 0.1.
    pub amount: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OutcomeResult {
    /// The episodic record of the outcome itself.
    pub record: MemoryRecord,
    pub target: MemoryRecord,
    pub salience_before: f64,
    pub salience_after: f64,
}

/// The new content for supersede, fork and merge. Unset fields are copied from the
/// (first) record being revised.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Revision {
    pub payload: Option<Payload>,
    pub summary: Option<String>,
    pub tags: Option<Vec<String>>,
    pub sensitivity: Option<Sensitivity>,
    pub confidence: Option<f64>,
}

/// Who revises and why. A rationale is required: history must say why it changed.
#[derive(Debug, Clone, PartialEq)]
pub struct Actor {
    pub actor: String,
    pub rationale: String,
}

/// What contests a record: another record, a claim in words, or both.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ContestRequest {
    pub by: Option<RecordId>,
    pub claim: Option<String>,
}

/// A retrieval. Its serde form is the HTTP API's `POST /v1/retrieve` body (every field
/// optional, unknown fields refused).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RetrieveRequest {
    /// Free text; any text is safe. Empty ranks by salience and recency alone.
    pub query: String,
    pub types: Vec<MemoryType>,
    pub min_salience: Option<f64>,
    /// Narrows the caller's ceiling; default from `[access] default_max_sensitivity`.
    pub max_sensitivity: Option<Sensitivity>,
    /// Narrows the caller's scopes; global records are always in scope.
    pub scopes: Option<Vec<Scope>>,
    /// A hit must carry all of these.
    pub tags: Vec<String>,
    pub since: Option<Timestamp>,
    pub until: Option<Timestamp>,
    pub limit: usize,
    pub include_tombstones: bool,
    /// Without `scopes`: only the caller's own memories, not every end user's: global
    /// records for a reader of every scope (the owner), a narrowed key's own scopes. What
    /// an agent's tool asks when it names no user (MCP `recall`).
    pub own_scopes: bool,
}

impl Default for RetrieveRequest {
    fn default() -> Self {
        RetrieveRequest {
            query: String::new(),
            types: Vec::new(),
            min_salience: None,
            max_sensitivity: None,
            scopes: None,
            tags: Vec::new(),
            since: None,
            until: None,
            limit: 10,
            include_tombstones: false,
            own_scopes: false,
        }
    }
}

/// One retrieved record with its score parts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Hit {
    pub record: MemoryRecord,
    pub current_salience: f64,
    pub score: ScoreParts,
    /// Said before a fact about the user changed, and resting on the old value: the
    /// record may no longer hold (`None` when no change touches it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outdated: Option<Outdated>,
}

/// Why a record may no longer hold: it was written before a fact about the user changed
/// and rests on the value the fact had then ("my commute across Lisbon takes 20 minutes"
/// after a move from Lisbon to Munich).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Outdated {
    /// The slot of the fact that changed (`city`).
    pub slot: String,
    /// The value it had when the record was written.
    pub old: String,
    /// The value it has now; `None` when it was withdrawn without a replacement.
    pub new: Option<String>,
    /// When the old value stopped holding.
    pub since: Timestamp,
    /// The fact that holds now (or, when withdrawn, the withdrawn fact; when a newer
    /// statement puts it in doubt, the fact in doubt).
    pub fact: RecordId,
    /// The newer statement that puts the fact in doubt when extraction read no new value
    /// from it ("been in portland about 6 yrs now" after "I live in Austin").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub statement: Option<RecordId>,
    /// How the record rests on the old value.
    pub by: RestsBy,
}

/// How a record rests on a value that changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RestsBy {
    /// Its words name the old value.
    NamesOld,
    /// It is about the changed slot, or a slot that comes with it (`mneme_truth::resting_on`):
    /// a fact of that slot, or a statement the topic layer puts there.
    Topic,
}

impl Outdated {
    /// One line for people, without the old value (a context block never states it):
    /// "possibly outdated: said before lives in changed to Munich on 2026-02-01".
    pub fn describe(&self) -> String {
        let label = mneme_truth::slot(&self.slot).map_or(self.slot.as_str(), |d| d.label);
        let day = self.since.strftime("%Y-%m-%d");
        match (&self.new, &self.statement) {
            (Some(new), _) => format!("possibly outdated: said before {label} changed to {new} on {day}"),
            (None, Some(_)) => format!("possibly outdated: said before newer words about {label} on {day}"),
            (None, None) => format!("possibly outdated: said before a {label} value was withdrawn on {day}"),
        }
    }
}

/// A record in someone else's history.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Brief {
    pub id: RecordId,
    pub memory_type: MemoryType,
    pub status: Status,
    pub summary: String,
    pub operation: LineageOp,
    pub parent_ids: Vec<RecordId>,
    pub created_at: Timestamp,
    pub pruned: bool,
}

impl From<&MemoryRecord> for Brief {
    fn from(r: &MemoryRecord) -> Self {
        Brief {
            id: r.id.clone(),
            memory_type: r.memory_type,
            status: r.status,
            summary: r.summary.clone(),
            operation: r.lineage.operation,
            parent_ids: r.lineage.parent_ids.clone(),
            created_at: r.created_at,
            pruned: r.pruned_at.is_some(),
        }
    }
}

/// Everything known about how a record came to be and what became of it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct History {
    pub record: MemoryRecord,
    pub current_salience: f64,
    /// Lineage parents, grandparents, ... (breadth first).
    pub ancestors: Vec<Brief>,
    /// Successors, forks and merges of this record, and theirs (breadth first).
    pub descendants: Vec<Brief>,
    pub links: Vec<Link>,
    pub audit: Vec<AuditEntry>,
    /// Related records left out because the caller may not see them.
    pub hidden: usize,
}

/// A salience change by reinforce or penalize.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SalienceChange {
    pub id: RecordId,
    pub before: f64,
    pub after: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PruneReport {
    pub threshold: f64,
    pub dry_run: bool,
    /// Records whose payload was (or, in a dry run, would be) dropped.
    pub pruned: Vec<RecordId>,
    /// The same records with what `decay` shows of each: summary, age and salience.
    pub items: Vec<PruneItem>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PruneItem {
    pub id: RecordId,
    pub memory_type: String,
    /// The summary before pruning.
    pub summary: String,
    /// Days since the record was written.
    pub age_days: f64,
    pub salience: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Metrics {
    pub path: String,
    pub schema_version: i64,
    pub encrypted: bool,
    pub file_bytes: u64,
    pub total_records: i64,
    pub by_type: std::collections::BTreeMap<String, i64>,
    pub live_by_type: std::collections::BTreeMap<String, i64>,
    pub by_status: std::collections::BTreeMap<String, i64>,
    pub pruned: i64,
    pub pinned: i64,
    pub audit_entries: i64,
    pub links: i64,
}
