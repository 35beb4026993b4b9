//! mneme-service: the transport-free memory API. Every front end (HTTP, gRPC, MCP,
//! membrane, the CLI) and every engine comes in through [`Ops`], the one door, with a
//! [`Principal`]; the owner's engines get the narrow [`Owner`] handle from `Ops::owner`.
//! [`MemoryService`] underneath is the engine; none of them touches the store directly.
//!
//! Read [`MemoryService`]'s methods in order: ingest, revise, retrieve (in
//! `retrieve.rs`), read, maintain. Each write operation is one store transaction (the
//! retention sweep one per memory type; forget scrubs the indexes after its commit) and
//! writes at least one audit entry per record it changes; reads are deferred transactions.
//!
//! Invariant: access control happens here, in SQL. A record the caller's [`Access`] does
//! not cover is reported as not found, never returned, never revised.

mod agent;
mod config;
mod depends;
mod error;
mod files;
mod forget;
mod ivf;
mod ops;
mod owner;
mod policy;
mod relevance;
mod retrieve;
mod semantic;
mod types;
pub mod vectors;

use std::collections::{HashSet, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};

use jiff::Timestamp;
use mneme_core::private;
use mneme_core::validate::{check_amount, check_payload, check_unit};
use mneme_core::{
    AuditAction, Clock, CompetencePayload, EventPayload, Lineage, LineageOp, MemoryRecord, NewRecord, Payload, PlanGraphPayload, RecordId,
    SemanticPayload, Sensitivity, ToolOutputPayload, WorkingPayload, revision,
};
use mneme_store::{NewRows, RowMaker, Store, StoreOptions};
use serde_json::json;

pub use agent::{CheckpointResult, ConversationInput, MAX_FETCH};
pub use config::{AccessConfig, ServiceConfig};
pub use error::{ErrorKind, ServiceError, ServiceResult};
pub use files::{FileHit, FileRanking, FileSearch, RELATED_MIN_COSINE, RELATED_PER_HIT, RelatedEntry};
pub use forget::{ForgetItem, ForgetReport, ForgetRequest};
pub use mneme_store::{
    Checkpoint, ChunkHit, Conversation, Direction, Dispatch, IndexedFile, NewChunk, SyncState, TaskRow, TaskRun, WorkspaceRead,
};
pub use ops::Ops;
pub use owner::Owner;
pub use policy::Principal;
pub use retrieve::is_evidence;
pub use semantic::{EmbedProgress, EmbedderHandle, EmbeddingStatus, ModelWatch, ValueReading};
pub use types::*;
pub use vectors::IndexParams;

/// Reinforce / penalize amount when none is given.
pub const DEFAULT_AMOUNT: f64 = 0.1;

/// Records per chunk of a batch ingest's pipeline (`ingest_batch`): small enough that the
/// helper's first chunk and the writer's last one (the parts that do not overlap) are
/// short, large enough that PostgreSQL's statements per chunk stay few.
pub const INGEST_CHUNK: usize = 100;

/// The memory engine.
#[derive(Debug)]
pub struct MemoryService {
    // Invariant: the one writing connection; held for the duration of one operation only.
    store: Mutex<Store>,
    /// Read-only work (retrieve, get, history, metrics) runs on these when present, in
    /// parallel with each other and with the writer (WAL readers see committed data only).
    readers: ReaderPool,
    /// Ingests waiting to be written; whoever holds the writer lock commits them all in one
    /// transaction (group commit), see [`MemoryService::ingest`].
    pending: Mutex<Vec<PendingIngest>>,
    /// SQLite: the store file. PostgreSQL: a local path that only names side files (the
    /// activity file), beside the database in `postgres`.
    options: StoreOptions,
    postgres: Option<mneme_store::PgOptions>,
    /// On PostgreSQL: which background jobs this process runs (one process per job
    /// across the fleet). `None` on SQLite: the daemon owns its file and runs them all.
    leases: Option<mneme_store::JobLeases>,
    config: ServiceConfig,
    clock: Arc<dyn Clock>,
    // Invariant: guards v7 id generation so ids are strictly increasing in this process.
    ids: Mutex<uuid::ContextV7>,
    /// The embedding model and vector index, when enabled (`semantic.rs`).
    semantic: std::sync::OnceLock<semantic::Semantic>,
}

impl MemoryService {
    /// Opens the store with the service's decay configuration.
    pub fn open(mut options: StoreOptions, config: ServiceConfig, clock: Arc<dyn Clock>) -> ServiceResult<Self> {
        config.validate()?;
        options.decay = config.decay;
        let store = Store::open(options.clone())?;
        Ok(Self::with_store(store, options, None, config, clock))
    }

    /// Opens a store on PostgreSQL with the service's decay configuration. `local` names
    /// the side files a store keeps beside itself (the agent's activity file).
    pub fn open_postgres(
        mut options: mneme_store::PgOptions,
        local: std::path::PathBuf,
        config: ServiceConfig,
        clock: Arc<dyn Clock>,
    ) -> ServiceResult<Self> {
        config.validate()?;
        options.decay = config.decay;
        let store = Store::open_postgres(options.clone())?;
        let side = StoreOptions { path: local, key: None, create: false, decay: config.decay };
        let leases = mneme_store::JobLeases::connect(&options)?;
        let mut service = Self::with_store(store, side, Some(options), config, clock);
        service.leases = Some(leases);
        Ok(service)
    }

    fn with_store(
        store: Store,
        options: StoreOptions,
        postgres: Option<mneme_store::PgOptions>,
        config: ServiceConfig,
        clock: Arc<dyn Clock>,
    ) -> Self {
        MemoryService {
            store: Mutex::new(store),
            readers: ReaderPool::default(),
            pending: Mutex::new(Vec::new()),
            options,
            postgres,
            leases: None,
            config,
            clock,
            ids: Mutex::new(uuid::ContextV7::new()),
            semantic: std::sync::OnceLock::new(),
        }
    }

    /// Opens `n` more connections for reads (a long-running daemon wants them; a one-shot
    /// CLI command does not).
    pub fn add_readers(&mut self, n: usize) -> ServiceResult<()> {
        let options = StoreOptions { create: false, ..self.options.clone() };
        let mut free = self.readers.free.lock().unwrap_or_else(|p| p.into_inner());
        for _ in 0..n {
            free.push(match &self.postgres {
                Some(pg) => Store::open_postgres(mneme_store::PgOptions { create: false, ..pg.clone() })?,
                None => Store::open(options.clone())?,
            });
            self.readers.count += 1;
        }
        Ok(())
    }

    pub fn config(&self) -> &ServiceConfig {
        &self.config
    }

    pub fn now(&self) -> Timestamp {
        self.clock.now()
    }

    // ---- ingest -------------------------------------------------------------------

    pub fn ingest_event(&self, event: EventPayload, options: IngestOptions) -> ServiceResult<MemoryRecord> {
        self.ingest(Payload::Event(event), options)
    }

    pub fn ingest_tool_output(&self, output: ToolOutputPayload, options: IngestOptions) -> ServiceResult<MemoryRecord> {
        self.ingest(Payload::ToolOutput(output), options)
    }

    /// A subject-predicate-object fact.
    pub fn ingest_observation(&self, fact: SemanticPayload, options: IngestOptions) -> ServiceResult<MemoryRecord> {
        self.ingest(Payload::Semantic(fact), options)
    }

    pub fn ingest_working_state(&self, state: WorkingPayload, options: IngestOptions) -> ServiceResult<MemoryRecord> {
        self.ingest(Payload::Working(state), options)
    }

    pub fn ingest_competence(&self, skill: CompetencePayload, options: IngestOptions) -> ServiceResult<MemoryRecord> {
        self.ingest(Payload::Competence(skill), options)
    }

    pub fn ingest_plan(&self, plan: PlanGraphPayload, options: IngestOptions) -> ServiceResult<MemoryRecord> {
        self.ingest(Payload::PlanGraph(plan), options)
    }

    /// Ingests any payload.
    ///
    /// Group commit: the request joins a queue; whoever next holds the writer lock writes
    /// every queued ingest in one transaction and hands each its record. Under concurrency
    /// this turns N commits into one; alone, it is one transaction as before. If the joint
    /// transaction fails, each queued ingest is retried on its own, so every caller gets
    /// its own result and an acknowledged record is always committed.
    pub fn ingest(&self, payload: Payload, options: IngestOptions) -> ServiceResult<MemoryRecord> {
        self.ingest_each(vec![(payload, options)])
            .pop()
            .unwrap_or_else(|| Err(ServiceError::Precondition("ingest was not processed".into())))
    }

    /// Ingests each item independently (one bad item does not fail the others), committing
    /// the valid ones together with whatever else is queued: the group commit behind
    /// [`MemoryService::ingest`], for callers that already hold a batch.
    pub fn ingest_each(&self, items: Vec<(Payload, IngestOptions)>) -> Vec<ServiceResult<MemoryRecord>> {
        let mut results: Vec<Option<ServiceResult<MemoryRecord>>> = Vec::with_capacity(items.len());
        let mut slots = Vec::new();
        {
            let mut pending = self.pending.lock().unwrap_or_else(|p| p.into_inner());
            for (payload, options) in items {
                match self.new_record(payload, options) {
                    Err(e) => results.push(Some(Err(e))),
                    Ok(new) => {
                        let slot = Arc::new(Mutex::new(None));
                        let now = self.now();
                        // Ids are taken in queue order, so commit order follows id order.
                        pending.push(PendingIngest { id: self.next_id(now), new, now, slot: slot.clone() });
                        slots.push((results.len(), slot));
                        results.push(None);
                    }
                }
            }
        }
        if !slots.is_empty() {
            match self.store() {
                Err(e) => return vec![Err(e)],
                Ok(mut store) => {
                    // Someone else may have committed ours while we waited for the lock.
                    let mine_done = slots.iter().all(|(_, s)| s.lock().unwrap_or_else(|p| p.into_inner()).is_some());
                    if !mine_done {
                        let batch = std::mem::take(&mut *self.pending.lock().unwrap_or_else(|p| p.into_inner()));
                        commit_pending(&mut store, batch);
                    }
                }
            }
            self.embed_fresh();
            self.wake_embedder();
        }
        for (i, slot) in slots {
            results[i] = slot.lock().unwrap_or_else(|p| p.into_inner()).take();
        }
        results.into_iter().map(|r| r.unwrap_or_else(|| Err(ServiceError::Precondition("ingest was not processed".into())))).collect()
    }

    /// Ingests many records in one transaction: all or none.
    ///
    /// A pipeline of two stages: a helper thread validates the records, gives them ids and
    /// turns them into rows (`RowMaker`) a chunk of [`INGEST_CHUNK`] ahead, while this
    /// thread writes the previous chunk in the one transaction. On PostgreSQL the client's
    /// work then overlaps the server's instead of alternating with it; on SQLite the rows
    /// are prepared on the second core. A record refused in any chunk rolls the whole
    /// batch back, as before.
    pub fn ingest_batch(&self, records: Vec<(Payload, IngestOptions)>) -> ServiceResult<Vec<RecordId>> {
        let now = self.now();
        let mut store = self.store()?;
        let maker = store.row_maker();
        let ids = std::thread::scope(|scope| {
            let (ready, arrived) = std::sync::mpsc::sync_channel::<ServiceResult<NewRows>>(1);
            scope.spawn(move || {
                let mut records = records.into_iter();
                loop {
                    let chunk: Vec<_> = records.by_ref().take(INGEST_CHUNK).collect();
                    if chunk.is_empty() {
                        break;
                    }
                    let rows = self.new_rows(chunk, &maker, now);
                    let failed = rows.is_err();
                    // A closed channel: the writer failed and stopped listening.
                    if ready.send(rows).is_err() || failed {
                        break;
                    }
                }
            });
            store.write(|tx| {
                let mut ids = Vec::new();
                for rows in arrived {
                    let rows = rows?;
                    ids.extend(rows.ids().cloned());
                    tx.insert_rows(rows)?;
                }
                ServiceResult::Ok(ids)
            })
        })?;
        drop(store);
        self.wake_embedder();
        Ok(ids)
    }

    /// One chunk of a batch ingest, validated, given ids and turned into rows.
    fn new_rows(&self, chunk: Vec<(Payload, IngestOptions)>, maker: &RowMaker, now: Timestamp) -> ServiceResult<NewRows> {
        let news = chunk.into_iter().map(|(p, o)| self.new_record(p, o)).collect::<ServiceResult<Vec<_>>>()?;
        let items: Vec<_> = news.iter().map(|new| (new, self.next_id(now), original_lineage(new, now), now)).collect();
        Ok(maker.originals(&items)?)
    }

    /// Records an outcome as an episodic event, reinforces (success) or penalizes (failure)
    /// the target, and folds it into the target's performance if it is a competence record.
    pub fn ingest_outcome(&self, request: OutcomeRequest, options: IngestOptions, access: &Access) -> ServiceResult<OutcomeResult> {
        let amount = request.amount.unwrap_or(DEFAULT_AMOUNT);
        check_amount(amount)?;
        let success = request.outcome == OutcomeKind::Success;
        let mut text = if success { "success".to_string() } else { "failure".to_string() };
        if let Some(mode) = request.failure_mode.as_deref().filter(|m| !m.trim().is_empty()) {
            text.push_str(&format!(": {mode}"));
        }
        if let Some(note) = request.note.as_deref().filter(|n| !n.trim().is_empty()) {
            text.push_str(&format!(" — {note}"));
        }
        let now = self.now();
        let event = EventPayload {
            event_kind: "outcome".into(),
            reference: Some(request.target.to_string()),
            sender: None,
            text,
            event_time: Some(now),
        };
        let scope_given = options.scope.is_some();
        let mut new = self.new_record(Payload::Event(event), options)?;
        let id = self.next_id(now);
        self.store()?.write(|tx| {
            let target = self.visible(tx.get(&request.target)?, &request.target, access)?;
            if target.is_tombstone() {
                return Err(ServiceError::Precondition(format!("cannot record an outcome for {}: it is {}", target.id, target.state())));
            }
            // The outcome speaks about the target (its summary may be quoted), so it is at
            // least as sensitive as the target and, unless told otherwise, in its scope.
            new.sensitivity = new.sensitivity.max(target.sensitivity);
            if !scope_given {
                new.scope = target.scope.clone();
            }
            if new.summary.is_none() {
                new.summary = Some(mneme_core::one_line(&format!("outcome for {}: {}", target.summary, text_of(&new.payload)), 200));
            }
            let record = tx.insert(&new, id.clone(), original_lineage(&new, now), now)?;
            let (before, after) = tx.adjust_salience(&target, if success { amount } else { -amount }, now)?;
            let mut details = json!({ "outcome_record": id, "success": success, "salience_before": before, "salience_after": after });
            if let Some(Payload::Competence(mut skill)) = target.payload.clone() {
                skill.performance.record(success, request.duration_ms, request.failure_mode.as_deref());
                details["performance"] = serde_json::to_value(&skill.performance).expect("plain data serialises");
                tx.set_payload_stats(&target.id, &Payload::Competence(skill), now)?;
            }
            tx.append_audit(&target.id, now, &new.actor, AuditAction::Outcome, &new.rationale, &details)?;
            tx.add_link(&id, &target.id, "outcome_of", if success { "success" } else { "failure" }, now)?;
            let target = tx.require(&target.id)?;
            Ok(OutcomeResult { record, target, salience_before: before, salience_after: after })
        })
    }

    /// Adds one use of a skill to a competence record's statistics, in place, with an
    /// `outcome` audit entry naming what was observed (`evidence`, e.g. the outcome record
    /// of a tool call). A tracker counting every call of a tool uses this instead of a
    /// supersede per call, which left one tombstone per call forever.
    pub fn record_skill_use(&self, skill: &RecordId, used: &SkillUse, who: Actor, access: &Access) -> ServiceResult<MemoryRecord> {
        self.check_actor(&who)?;
        let now = self.now();
        self.store()?.write(|tx| {
            let target = self.visible(tx.get(skill)?, skill, access)?;
            if target.is_tombstone() {
                return Err(ServiceError::Precondition(format!("cannot update {}: it is {}", target.id, target.state())));
            }
            let Some(Payload::Competence(mut competence)) = target.payload.clone() else {
                return Err(ServiceError::Precondition(format!("{} is not a competence record", target.id)));
            };
            competence.performance.record(used.success, used.duration_ms, used.failure_mode.as_deref());
            let details = json!({
                "evidence": used.evidence,
                "success": used.success,
                "performance": serde_json::to_value(&competence.performance).expect("plain data serialises"),
            });
            tx.set_payload_stats(&target.id, &Payload::Competence(competence), now)?;
            tx.append_audit(&target.id, now, &who.actor, AuditAction::Outcome, &who.rationale, &details)?;
            Ok(tx.require(&target.id)?)
        })
    }

    // ---- revise -------------------------------------------------------------------

    /// Replaces a record with a new one; the old one becomes a `superseded` tombstone.
    pub fn supersede(&self, id: &RecordId, change: Revision, who: Actor, access: &Access) -> ServiceResult<MemoryRecord> {
        self.check_actor(&who)?;
        let now = self.now();
        let new_id = self.next_id(now);
        self.store()?.write(|tx| {
            let old = self.visible(tx.get(id)?, id, access)?;
            revision::check_revisable(&old, revision::Revision::Supersede)?;
            let new = self.revised(&[&old], change, &who)?;
            let lineage = self.lineage(vec![old.id.clone()], LineageOp::Supersede, &who, now);
            let record = tx.insert(&new, new_id.clone(), lineage, now)?;
            tx.set_status(&old.id, mneme_core::Status::Superseded, now)?;
            tx.append_audit(&old.id, now, &who.actor, AuditAction::SupersededBy, &who.rationale, &json!({ "successor": new_id }))?;
            Ok(record)
        })
    }

    /// Creates a variant of a record; the original stays active.
    pub fn fork(&self, id: &RecordId, change: Revision, who: Actor, access: &Access) -> ServiceResult<MemoryRecord> {
        self.check_actor(&who)?;
        let now = self.now();
        let new_id = self.next_id(now);
        self.store()?.write(|tx| {
            let source = self.visible(tx.get(id)?, id, access)?;
            revision::check_revisable(&source, revision::Revision::Fork)?;
            let new = self.revised(&[&source], change, &who)?;
            let lineage = self.lineage(vec![source.id.clone()], LineageOp::Fork, &who, now);
            let record = tx.insert(&new, new_id.clone(), lineage, now)?;
            tx.append_audit(&source.id, now, &who.actor, AuditAction::ForkedInto, &who.rationale, &json!({ "fork": new_id }))?;
            Ok(record)
        })
    }

    /// Combines records of one type into a new one; each source becomes a `superseded` tombstone.
    pub fn merge(&self, ids: &[RecordId], change: Revision, who: Actor, access: &Access) -> ServiceResult<MemoryRecord> {
        self.check_actor(&who)?;
        let now = self.now();
        let new_id = self.next_id(now);
        self.store()?.write(|tx| {
            let sources = ids.iter().map(|id| self.visible(tx.get(id)?, id, access)).collect::<ServiceResult<Vec<_>>>()?;
            revision::check_merge(&sources)?;
            let refs: Vec<&MemoryRecord> = sources.iter().collect();
            let new = self.revised(&refs, change, &who)?;
            let lineage = self.lineage(ids.to_vec(), LineageOp::Merge, &who, now);
            let record = tx.insert(&new, new_id.clone(), lineage, now)?;
            for source in &sources {
                tx.set_status(&source.id, mneme_core::Status::Superseded, now)?;
                tx.append_audit(&source.id, now, &who.actor, AuditAction::MergedInto, &who.rationale, &json!({ "merged_into": new_id }))?;
            }
            Ok(record)
        })
    }

    /// Withdraws a record; it stays as a `retracted` tombstone.
    pub fn retract(&self, id: &RecordId, who: Actor, access: &Access) -> ServiceResult<MemoryRecord> {
        self.check_actor(&who)?;
        let now = self.now();
        self.store()?.write(|tx| {
            let record = self.visible(tx.get(id)?, id, access)?;
            revision::check_revisable(&record, revision::Revision::Retract)?;
            tx.set_status(id, mneme_core::Status::Retracted, now)?;
            tx.append_audit(id, now, &who.actor, AuditAction::Retract, &who.rationale, &json!({ "previous_status": record.status }))?;
            Ok(tx.require(id)?)
        })
    }

    /// Marks a record as disputed and links what disputes it. It stays retrievable.
    pub fn contest(&self, id: &RecordId, contest: ContestRequest, who: Actor, access: &Access) -> ServiceResult<MemoryRecord> {
        self.check_actor(&who)?;
        if contest.by.is_none() && contest.claim.as_deref().is_none_or(|c| c.trim().is_empty()) {
            return Err(ServiceError::Invalid(mneme_core::CoreError::invalid(
                "contest",
                "name the contesting record (--by ID) or the conflicting claim (--claim TEXT)",
            )));
        }
        if let Some(claim) = &contest.claim {
            self.config.limits.check_rationale(claim)?;
        }
        let now = self.now();
        self.store()?.write(|tx| {
            let record = self.visible(tx.get(id)?, id, access)?;
            revision::check_revisable(&record, revision::Revision::Contest)?;
            if let Some(by) = &contest.by {
                if by == id {
                    return Err(ServiceError::Precondition(format!("record {id} cannot contest itself")));
                }
                self.visible(tx.get(by)?, by, access)?;
                tx.add_link(by, id, "contests", contest.claim.as_deref().unwrap_or(""), now)?;
                tx.append_audit(by, now, &who.actor, AuditAction::Contest, &who.rationale, &json!({ "contests": id }))?;
            }
            tx.set_status(id, mneme_core::Status::Contested, now)?;
            tx.append_audit(
                id,
                now,
                &who.actor,
                AuditAction::Contest,
                &who.rationale,
                &json!({ "by": contest.by, "claim": contest.claim }),
            )?;
            Ok(tx.require(id)?)
        })
    }

    pub fn reinforce(&self, id: &RecordId, amount: Option<f64>, who: Actor, access: &Access) -> ServiceResult<SalienceChange> {
        self.adjust(id, amount.unwrap_or(DEFAULT_AMOUNT), true, who, access)
    }

    pub fn penalize(&self, id: &RecordId, amount: Option<f64>, who: Actor, access: &Access) -> ServiceResult<SalienceChange> {
        self.adjust(id, amount.unwrap_or(DEFAULT_AMOUNT), false, who, access)
    }

    // ---- read ---------------------------------------------------------------------

    /// A record by id, tombstones included.
    pub fn get(&self, id: &RecordId, access: &Access) -> ServiceResult<MemoryRecord> {
        self.reader()?.read(|tx| self.visible(tx.get(id)?, id, access))
    }

    /// The live facts in exactly `scope` with this subject and predicate (ASCII
    /// case-insensitive), oldest first, never above `access`: an exact look-up, not a
    /// ranked search, so a fact is found however many records outrank it.
    pub fn find_facts(
        &self,
        subject: &str,
        predicate: &str,
        scope: &mneme_core::Scope,
        access: &Access,
    ) -> ServiceResult<Vec<MemoryRecord>> {
        if !access.covers_scope(scope) {
            return Ok(Vec::new());
        }
        Ok(self.reader()?.read(|tx| tx.facts_by_key(subject.trim(), predicate.trim(), scope, access.max_sensitivity))?)
    }

    /// Live competence records for exactly this skill in exactly `scope`, as far as
    /// `access` may read: the exact look-up behind the competence tracker and
    /// consolidation's skills (not a ranked search with a limit).
    /// The first `limit` end-user scopes (`user:<id>`) that hold records and that
    /// `access` reaches.
    pub fn user_scopes(&self, limit: usize, access: &Access) -> ServiceResult<Vec<mneme_core::Scope>> {
        let names = self.reader()?.read(|tx| tx.user_scopes(limit))?;
        Ok(names.iter().filter_map(|n| mneme_core::Scope::parse(n).ok()).filter(|s| access.covers_scope(s)).collect())
    }

    pub fn find_skills(&self, skill: &str, scope: &mneme_core::Scope, access: &Access) -> ServiceResult<Vec<MemoryRecord>> {
        if !access.covers_scope(scope) {
            return Ok(Vec::new());
        }
        Ok(self.reader()?.read(|tx| tx.skills_by_name(skill.trim(), scope, access.max_sensitivity))?)
    }

    /// Current salience of a record at the service clock's now.
    pub fn current_salience(&self, record: &MemoryRecord) -> f64 {
        self.config.decay.salience_at(record.memory_type, &record.salience, self.now())
    }

    /// Salience from its anchor (the last reinforcement) to `days` days from now, at 61
    /// evenly spaced instants: what the console plots. Pure: decay is read-time only.
    pub fn salience_curve(&self, record: &MemoryRecord, days: u32) -> Vec<(Timestamp, f64)> {
        let from = record.salience.reinforced_at.min(self.now());
        let to = self.now() + jiff::SignedDuration::from_hours(24 * i64::from(days));
        let step = to.duration_since(from) / 60;
        (0..=60)
            .map(|i| {
                let at = from + step * i;
                (at, self.config.decay.salience_at(record.memory_type, &record.salience, at))
            })
            .collect()
    }

    /// Lineage (ancestors and descendants), links and the audit log of a record.
    pub fn history(&self, id: &RecordId, access: &Access) -> ServiceResult<History> {
        const MAX_RELATED: usize = 1000;
        self.reader()?.read(|tx| {
            let record = self.visible(tx.get(id)?, id, access)?;
            let mut hidden = 0;
            let mut seen: HashSet<RecordId> = HashSet::from([record.id.clone()]);
            let mut ancestors = Vec::new();
            let mut queue: VecDeque<RecordId> = record.lineage.parent_ids.iter().cloned().collect();
            while let Some(pid) = queue.pop_front() {
                if ancestors.len() >= MAX_RELATED || !seen.insert(pid.clone()) {
                    continue;
                }
                let parent = tx.require(&pid)?;
                if access.can_see(&parent) {
                    queue.extend(parent.lineage.parent_ids.iter().cloned());
                    ancestors.push(Brief::from(&parent));
                } else {
                    hidden += 1;
                }
            }
            let mut descendants = Vec::new();
            let mut queue: VecDeque<RecordId> = VecDeque::from([record.id.clone()]);
            while let Some(cur) = queue.pop_front() {
                for child in tx.children(&cur)? {
                    if descendants.len() >= MAX_RELATED || !seen.insert(child.id.clone()) {
                        continue;
                    }
                    if access.can_see(&child) {
                        queue.push_back(child.id.clone());
                        descendants.push(Brief::from(&child));
                    } else {
                        hidden += 1;
                    }
                }
            }
            let mut links = Vec::new();
            for link in tx.links(id)? {
                let other = if &link.from == id { &link.to } else { &link.from };
                if access.can_see(&tx.require(other)?) { links.push(link) } else { hidden += 1 }
            }
            let mut audit = tx.audit(id)?;
            let mut record = record;
            if *access != Access::owner() {
                // Ids of records the caller may not see are not revealed either.
                let visible_id = |rid: &RecordId| -> ServiceResult<bool> { Ok(tx.get(rid)?.is_some_and(|r| access.can_see(&r))) };
                for entry in &mut audit {
                    redact_ids(&mut entry.details, &visible_id)?;
                }
                let retain_visible = |ids: &mut Vec<RecordId>| -> ServiceResult<()> {
                    let mut keep = Vec::with_capacity(ids.len());
                    for pid in ids.drain(..) {
                        if visible_id(&pid)? {
                            keep.push(pid);
                        }
                    }
                    *ids = keep;
                    Ok(())
                };
                retain_visible(&mut record.lineage.parent_ids)?;
                for brief in ancestors.iter_mut().chain(descendants.iter_mut()) {
                    retain_visible(&mut brief.parent_ids)?;
                }
            }
            let current_salience = self.current_salience(&record);
            Ok(History { record, current_salience, ancestors, descendants, links, audit, hidden })
        })
    }

    pub fn metrics(&self) -> ServiceResult<Metrics> {
        let mut store = self.reader()?;
        let stats = store.read(|tx| tx.stats())?;
        Ok(Metrics {
            path: store.path().display().to_string(),
            schema_version: store.schema_version()?,
            encrypted: store.is_encrypted(),
            file_bytes: store.file_bytes(),
            total_records: stats.by_type.values().sum(),
            by_type: stats.by_type,
            live_by_type: stats.live_by_type,
            by_status: stats.by_status,
            pruned: stats.pruned,
            pinned: stats.pinned,
            audit_entries: stats.audit_entries,
            links: stats.links,
        })
    }

    // ---- maintain -----------------------------------------------------------------

    /// Drops the payload of every live, unpinned record whose current salience is below
    /// `threshold` (default: the configured prune threshold). Rows, lineage, links and
    /// audit stay; each pruned record gets a `prune` audit entry.
    pub fn prune(&self, threshold: Option<f64>, dry_run: bool, actor: &str) -> ServiceResult<PruneReport> {
        let threshold = threshold.unwrap_or(self.config.decay.prune_threshold);
        check_unit("threshold", threshold)?;
        self.config.limits.check_actor(actor)?;
        let now = self.now();
        let decay = self.config.decay;
        self.store()?.write(|tx| {
            let mut pruned = Vec::new();
            let mut items = Vec::new();
            if threshold <= 0.0 {
                return Ok(PruneReport { threshold, dry_run, pruned, items });
            }
            for t in mneme_core::MemoryType::ALL {
                // salience < threshold  ⇔  anchor < now + half_life · log2(threshold), floors aside.
                let cut = mneme_core::decay::unix_seconds(now) + decay.half_life_seconds(t) * threshold.log2();
                let young = mneme_core::decay::unix_seconds(now) - decay.prune_min_age_days * mneme_core::decay::SECONDS_PER_DAY;
                for record in tx.below_anchor(t, cut)? {
                    let salience = decay.salience_at(t, &record.salience, now);
                    if salience >= threshold || mneme_core::decay::unix_seconds(record.created_at) > young {
                        continue;
                    }
                    if !dry_run {
                        tx.prune(&record.id, now)?;
                        tx.append_audit(
                            &record.id,
                            now,
                            actor,
                            AuditAction::Prune,
                            "salience below prune threshold",
                            &json!({ "salience": salience, "threshold": threshold }),
                        )?;
                    }
                    items.push(crate::PruneItem {
                        id: record.id.clone(),
                        memory_type: record.memory_type.to_string(),
                        summary: record.summary.clone(),
                        age_days: (now.as_millisecond() - record.created_at.as_millisecond()) as f64 / 86_400_000.0,
                        salience,
                    });
                    pruned.push(record.id);
                }
            }
            Ok::<_, ServiceError>(PruneReport { threshold, dry_run, pruned, items })
        })
    }

    /// Whether this process should run background `job` now: always on SQLite; on
    /// PostgreSQL only the one process (of every daemon on the database) that holds the
    /// job's lease, which passes on when that process dies.
    pub fn holds_job(&self, job: &str) -> ServiceResult<bool> {
        match &self.leases {
            Some(leases) => Ok(leases.hold(job)?),
            None => Ok(true),
        }
    }

    /// Whether the store answers: one read on a reading connection (for readiness).
    pub fn ping(&self) -> ServiceResult<()> {
        self.reader()?.read(|tx| tx.meta("decay_half_lives").map(|_| ()).map_err(ServiceError::from))
    }

    /// The store's engine (`sqlite` or `postgres`) and where it is: the file, or the
    /// database without its password.
    pub fn store_location(&self) -> (&'static str, String) {
        match &self.postgres {
            Some(pg) => ("postgres", pg.target()),
            None => ("sqlite", self.options.path.display().to_string()),
        }
    }

    // ---- helpers ------------------------------------------------------------------

    /// The store file this service opened.
    pub fn store_path(&self) -> &std::path::Path {
        &self.options.path
    }

    fn store(&self) -> ServiceResult<MutexGuard<'_, Store>> {
        // A panic while holding the lock cannot leave a half-written transaction (SQLite
        // rolls back an unfinished one), so a poisoned lock is safe to reuse.
        Ok(self.store.lock().unwrap_or_else(|poison| poison.into_inner()))
    }

    /// A connection for read-only work: the first reader to come free (a waiter never
    /// queues behind one busy connection while another is idle), or the writer when no
    /// readers were opened.
    fn reader(&self) -> ServiceResult<Conn<'_>> {
        if self.readers.count == 0 {
            return Ok(Conn::Writer(self.store()?));
        }
        let mut free = self.readers.free.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            if let Some(store) = free.pop() {
                return Ok(Conn::Reader { pool: &self.readers, store: Some(Box::new(store)) });
            }
            free = self.readers.available.wait(free).unwrap_or_else(|p| p.into_inner());
        }
    }

    fn next_id(&self, now: Timestamp) -> RecordId {
        let ctx = self.ids.lock().unwrap_or_else(|poison| poison.into_inner());
        let secs = u64::try_from(now.as_second()).unwrap_or(0);
        let ts = uuid::Timestamp::from_unix(&*ctx, secs, now.subsec_nanosecond().unsigned_abs());
        RecordId::parse(&uuid::Uuid::new_v7(ts).to_string()).expect("uuid strings are record ids")
    }

    fn visible(&self, record: Option<MemoryRecord>, id: &RecordId, access: &Access) -> ServiceResult<MemoryRecord> {
        match record {
            Some(r) if access.can_see(&r) => Ok(r),
            _ => Err(ServiceError::NotFound(id.clone())),
        }
    }

    fn check_actor(&self, who: &Actor) -> ServiceResult<()> {
        self.config.limits.check_actor(&who.actor)?;
        self.config.limits.check_rationale(&who.rationale)?;
        if who.rationale.trim().is_empty() {
            return Err(ServiceError::Invalid(mneme_core::CoreError::invalid("rationale", "must not be empty: say why history changes")));
        }
        Ok(())
    }

    fn new_record(&self, payload: Payload, options: IngestOptions) -> ServiceResult<NewRecord> {
        // Nothing inside <private> blocks is ever persisted (checked after stripping, so a
        // text that was all private is refused as empty).
        let payload = private::strip_payload(payload)?;
        check_payload(&payload)?;
        let mut new = NewRecord::new(payload);
        new.summary = private::strip_opt(options.summary);
        if let Some(s) = options.sensitivity {
            new.sensitivity = s;
        }
        if let Some(scope) = options.scope {
            new.scope = scope;
        }
        new.tags = options.tags;
        if let Some(c) = options.confidence {
            new.confidence = c;
        }
        if let Some(s) = options.salience {
            new.salience = s;
        }
        new.pinned = options.pinned;
        if let Some(actor) = options.actor {
            new.actor = actor;
        }
        new.rationale = private::strip_opt(options.rationale).unwrap_or_default();
        self.guard_secrets(&mut new);
        self.config.limits.check_new_record(&new)?;
        Ok(new)
    }

    /// A record that carries a secret (`mneme_core::secrets`: a card number, IBAN, SSN,
    /// API key or token, private key, a password given in words) is stored at `high` at
    /// least, whatever the caller asked, and tagged `secret:<kind>`: recall and injected
    /// context leave it out unless the caller's ceiling reaches `high`.
    fn guard_secrets(&self, new: &mut NewRecord) {
        let mut text = new.payload.own_text();
        if let Some(summary) = &new.summary {
            text.push('\n');
            text.push_str(summary);
        }
        let kinds = mneme_core::secrets::detect(&text);
        if kinds.is_empty() {
            return;
        }
        new.sensitivity = new.sensitivity.max(Sensitivity::High);
        for kind in kinds {
            let tag = format!("secret:{}", kind.as_str());
            if !new.tags.contains(&tag) && new.tags.len() < self.config.limits.max_tags {
                new.tags.push(tag);
            }
        }
    }

    /// The new record of a supersede, fork or merge: the revision's fields over the first source's.
    fn revised(&self, sources: &[&MemoryRecord], change: Revision, who: &Actor) -> ServiceResult<NewRecord> {
        let first = sources[0];
        let payload = match change.payload {
            Some(p) => {
                revision::check_same_type(first.memory_type, &p)?;
                let p = private::strip_payload(p)?;
                check_payload(&p)?;
                p
            }
            None => first.payload.clone().ok_or_else(|| ServiceError::Precondition(format!("record {} has no payload", first.id)))?,
        };
        let payload_changed = Some(&payload) != first.payload.as_ref();
        let mut new = NewRecord::new(payload);
        new.summary = match private::strip_opt(change.summary) {
            Some(s) => Some(s),
            None if payload_changed => None,
            // Same payload: keep the old summary, stored only if it was not derived.
            None => Some(first.summary.clone()).filter(|s| *s != new.payload.default_summary()),
        };
        new.sensitivity = change.sensitivity.unwrap_or_else(|| sources.iter().map(|s| s.sensitivity).max().unwrap_or(first.sensitivity));
        new.scope = first.scope.clone();
        new.tags = change.tags.unwrap_or_else(|| {
            let mut tags: Vec<String> = Vec::new();
            for t in sources.iter().flat_map(|s| s.tags.iter()) {
                if !tags.contains(t) {
                    tags.push(t.clone());
                }
            }
            tags
        });
        new.confidence = change.confidence.unwrap_or(first.confidence);
        new.salience = sources.iter().map(|s| self.current_salience(s)).fold(0.0, f64::max).max(0.5);
        new.pinned = sources.iter().any(|s| s.salience.pinned);
        new.event_time = new.payload.event_time().or(first.event_time);
        new.actor = who.actor.clone();
        new.rationale = who.rationale.clone();
        self.guard_secrets(&mut new);
        self.config.limits.check_new_record(&new)?;
        Ok(new)
    }

    fn lineage(&self, parent_ids: Vec<RecordId>, operation: LineageOp, who: &Actor, now: Timestamp) -> Lineage {
        Lineage { parent_ids, operation, actor: who.actor.clone(), rationale: who.rationale.clone(), timestamp: now }
    }

    fn adjust(&self, id: &RecordId, amount: f64, up: bool, who: Actor, access: &Access) -> ServiceResult<SalienceChange> {
        check_amount(amount)?;
        self.config.limits.check_actor(&who.actor)?;
        self.config.limits.check_rationale(&who.rationale)?;
        let now = self.now();
        self.store()?.write(|tx| {
            let record = self.visible(tx.get(id)?, id, access)?;
            if record.is_tombstone() {
                return Err(ServiceError::Precondition(format!(
                    "cannot {} record {id}: it is {}",
                    if up { "reinforce" } else { "penalize" },
                    record.state()
                )));
            }
            let (before, after) = tx.adjust_salience(&record, if up { amount } else { -amount }, now)?;
            let action = if up { AuditAction::Reinforce } else { AuditAction::Penalize };
            tx.append_audit(id, now, &who.actor, action, &who.rationale, &json!({ "amount": amount, "before": before, "after": after }))?;
            Ok(SalienceChange { id: id.clone(), before, after })
        })
    }
}

/// Idle read connections.
#[derive(Debug, Default)]
struct ReaderPool {
    free: Mutex<Vec<Store>>,
    available: std::sync::Condvar,
    count: usize,
}

/// A connection lent for one operation; a reader goes back to the pool when dropped.
enum Conn<'a> {
    Writer(MutexGuard<'a, Store>),
    Reader { pool: &'a ReaderPool, store: Option<Box<Store>> },
}

impl std::ops::Deref for Conn<'_> {
    type Target = Store;
    fn deref(&self) -> &Store {
        match self {
            Conn::Writer(g) => g,
            Conn::Reader { store, .. } => store.as_ref().expect("held until drop"),
        }
    }
}

impl std::ops::DerefMut for Conn<'_> {
    fn deref_mut(&mut self) -> &mut Store {
        match self {
            Conn::Writer(g) => g,
            Conn::Reader { store, .. } => store.as_mut().expect("held until drop"),
        }
    }
}

impl Drop for Conn<'_> {
    fn drop(&mut self) {
        if let Conn::Reader { pool, store } = self
            && let Some(s) = store.take()
        {
            pool.free.lock().unwrap_or_else(|p| p.into_inner()).push(*s);
            pool.available.notify_one();
        }
    }
}

/// An ingest waiting for the group commit; `slot` receives its result.
#[derive(Debug)]
struct PendingIngest {
    id: RecordId,
    new: NewRecord,
    now: Timestamp,
    slot: Arc<Mutex<Option<ServiceResult<MemoryRecord>>>>,
}

/// Writes queued ingests in one transaction and fills their slots. If that transaction
/// fails, each is retried on its own so every caller gets its own result.
fn commit_pending(store: &mut Store, batch: Vec<PendingIngest>) {
    let insert = |tx: &mneme_store::WriteTx<'_>, p: &PendingIngest| tx.insert(&p.new, p.id.clone(), original_lineage(&p.new, p.now), p.now);
    let items: Vec<_> = batch.iter().map(|p| (&p.new, p.id.clone(), original_lineage(&p.new, p.now), p.now)).collect();
    let joint = store.write(|tx| tx.insert_originals(&items));
    match joint {
        Ok(records) => {
            for (p, record) in batch.iter().zip(records) {
                *p.slot.lock().unwrap_or_else(|e| e.into_inner()) = Some(Ok(record));
            }
        }
        Err(_) => {
            for p in &batch {
                let one = store.write(|tx| insert(tx, p)).map_err(ServiceError::from);
                *p.slot.lock().unwrap_or_else(|e| e.into_inner()) = Some(one);
            }
        }
    }
}

fn original_lineage(new: &NewRecord, now: Timestamp) -> Lineage {
    Lineage {
        parent_ids: Vec::new(),
        operation: LineageOp::Original,
        actor: new.actor.clone(),
        rationale: new.rationale.clone(),
        timestamp: now,
    }
}

/// Replaces every record id in `value` that `visible` rejects by `"(hidden)"`.
fn redact_ids(value: &mut serde_json::Value, visible: &dyn Fn(&RecordId) -> ServiceResult<bool>) -> ServiceResult<()> {
    match value {
        serde_json::Value::String(s) => {
            if let Ok(rid) = RecordId::parse(s)
                && !visible(&rid)?
            {
                *s = "(hidden)".to_string();
            }
        }
        serde_json::Value::Array(items) => items.iter_mut().try_for_each(|v| redact_ids(v, visible))?,
        serde_json::Value::Object(map) => map.values_mut().try_for_each(|v| redact_ids(v, visible))?,
        serde_json::Value::Null | serde_json::Value::Bool(_) | serde_json::Value::Number(_) => {}
    }
    Ok(())
}

fn text_of(payload: &Payload) -> &str {
    match payload {
        Payload::Event(e) => &e.text,
        _ => "",
    }
}

// ---- dump: export and import (the owner's; no principal is offered them) ------------------

impl MemoryService {
    /// Writes the whole store as a dump (`mneme_store`'s versioned JSON lines) from one
    /// read snapshot; writers go on meanwhile.
    pub fn export(&self, out: &mut dyn std::io::Write, progress: &mut dyn FnMut(&str, u64)) -> ServiceResult<mneme_store::DumpSummary> {
        Ok(self.reader()?.export(out, progress)?)
    }

    /// Loads a dump into this store, which must be empty: all of it, checked against its
    /// trailer, or nothing.
    pub fn import(&self, input: &mut dyn std::io::BufRead, progress: &mut dyn FnMut(&str, u64)) -> ServiceResult<mneme_store::DumpSummary> {
        Ok(self.store()?.import(input, progress)?)
    }
}

/// Exports a store on PostgreSQL (the service does not run on PostgreSQL yet; moving data
/// in and out of it does).
pub fn export_postgres(
    options: mneme_store::PgOptions,
    out: &mut dyn std::io::Write,
    progress: &mut dyn FnMut(&str, u64),
) -> ServiceResult<mneme_store::DumpSummary> {
    Ok(mneme_store::Store::open_postgres(options)?.export(out, progress)?)
}

/// Imports a dump into a PostgreSQL database, creating mneme's schema in an empty one.
pub fn import_postgres(
    options: mneme_store::PgOptions,
    input: &mut dyn std::io::BufRead,
    progress: &mut dyn FnMut(&str, u64),
) -> ServiceResult<mneme_store::DumpSummary> {
    Ok(mneme_store::Store::open_postgres(mneme_store::PgOptions { create: true, ..options })?.import(input, progress)?)
}
