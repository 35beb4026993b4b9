//! `Ops`: the one door. Every operation a front end or an agent engine offers, with the
//! caller's policy applied. The daemon's transports, the hook engine, consolidation and
//! the scheduler call these (synchronously, on a blocking thread); none of them calls
//! `MemoryService` directly.
//!
//! Policy: reads use the principal's read `Access` (a record outside it is "not found");
//! writes need the record's sensitivity and scope to be within the principal's write
//! policy (else "permission denied"). Actors are prefixed with the principal's name when
//! keys are in use, so history says who really made a change.

use std::sync::Arc;

use crate::{
    Actor, CheckpointResult, ContestRequest, Conversation, ConversationInput, History, Hit, IngestOptions, MemoryService, Metrics,
    OutcomeRequest, OutcomeResult, RetrieveRequest, Revision, SalienceChange, SkillUse, SyncState,
};
use mneme_core::{MemoryRecord, Payload, RecordId, Sensitivity};

use crate::Principal;
use crate::{FileRanking, FileSearch};
use crate::{ServiceError, ServiceResult};

#[derive(Debug, Clone)]
pub struct Ops {
    service: Arc<MemoryService>,
    /// Whether principals are keyed (then actors are attributed to them).
    keyed: bool,
}

impl Ops {
    pub fn new(service: Arc<MemoryService>, keyed: bool) -> Self {
        Ops { service, keyed }
    }

    fn actor(&self, p: &Principal, given: Option<String>) -> String {
        match given.filter(|a| !a.trim().is_empty()) {
            None => p.name.clone(),
            Some(a) if !self.keyed || a == p.name || a.starts_with(&format!("{}/", p.name)) => a,
            Some(a) => format!("{}/{a}", p.name),
        }
    }

    fn who(&self, p: &Principal, actor: String, rationale: String) -> Actor {
        Actor { actor: self.actor(p, Some(actor)), rationale }
    }

    /// The options with the principal's defaults filled in, after the write check.
    pub fn write_options(&self, p: &Principal, mut options: IngestOptions) -> ServiceResult<IngestOptions> {
        let scope = options.scope.clone().unwrap_or_else(|| p.default_write_scope());
        p.check_write(options.sensitivity.unwrap_or(Sensitivity::Low), &scope)?;
        options.scope = Some(scope);
        options.actor = Some(self.actor(p, options.actor.take()));
        Ok(options)
    }

    /// A record the principal can see and may change.
    fn writable(&self, p: &Principal, id: &RecordId) -> ServiceResult<MemoryRecord> {
        let record = self.service.get(id, &p.read)?;
        p.check_write_record(&record)?;
        Ok(record)
    }

    pub fn ingest(&self, p: &Principal, payload: Payload, options: IngestOptions) -> ServiceResult<MemoryRecord> {
        let options = self.write_options(p, options)?;
        self.service.ingest(payload, options)
    }

    pub fn ingest_outcome(&self, p: &Principal, request: OutcomeRequest, options: IngestOptions) -> ServiceResult<OutcomeResult> {
        let target = self.writable(p, &request.target)?;
        let mut options = options;
        if options.scope.is_none() {
            options.scope = Some(target.scope.clone());
        }
        // The outcome record is at least as sensitive as its target (the service raises it).
        options.sensitivity = Some(options.sensitivity.unwrap_or(Sensitivity::Low).max(target.sensitivity));
        let options = self.write_options(p, options)?;
        self.service.ingest_outcome(request, options, &p.read)
    }

    /// One more use of a skill, counted in its competence record in place (audited).
    pub fn record_skill_use(
        &self,
        p: &Principal,
        skill: &RecordId,
        used: &SkillUse,
        actor: String,
        rationale: String,
    ) -> ServiceResult<MemoryRecord> {
        self.writable(p, skill)?;
        let who = Actor { actor: self.actor(p, Some(actor)), rationale };
        self.service.record_skill_use(skill, used, who, &p.read)
    }

    pub fn retrieve(&self, p: &Principal, request: &RetrieveRequest) -> ServiceResult<Vec<Hit>> {
        self.service.retrieve(request, &p.read)
    }

    /// The newest statement `p` may read, said after the fact `fact` and naming its value:
    /// the sign that the fact may be outdated (see `MemoryService::newer_statement`).
    pub fn newer_statement(&self, p: &Principal, fact: &MemoryRecord) -> ServiceResult<Option<MemoryRecord>> {
        self.service.newer_statement(fact, &p.read)
    }

    /// The newest statement `p` may read that the topic layer puts in `slot` (see
    /// `MemoryService::topic_statement`).
    pub fn topic_statement(&self, p: &Principal, slot: &str) -> ServiceResult<Option<MemoryRecord>> {
        self.service.topic_statement(slot, &p.read)
    }

    pub fn get(&self, p: &Principal, id: &RecordId) -> ServiceResult<(MemoryRecord, f64)> {
        let record = self.service.get(id, &p.read)?;
        let salience = self.service.current_salience(&record);
        Ok((record, salience))
    }

    /// What the span reader makes of a phrase's value for a slot in a message (`None`:
    /// doubted; `MemoryService::phrase_value`): text in, no record read, so no principal.
    pub fn phrase_value(&self, text: &str, slot: &str, value: &str, others: &[String]) -> Option<String> {
        self.service.phrase_value(text, slot, value, others)
    }

    /// How surely a message names `value` as the value it replaces, by the old-value head
    /// (`MemoryService::replaced_share`): text in, no record read, so no principal.
    pub fn replaced_share(&self, text: &str, value: &str) -> Option<f32> {
        self.service.replaced_share(text, value)
    }

    /// The slot and value a user's message gives, read by meaning (`MemoryService::read_value`),
    /// past the values `held` says the speaker holds for a slot: text in, no record read,
    /// so no principal.
    pub fn read_value(
        &self,
        text: &str,
        held: &dyn Fn(&'static str) -> Vec<String>,
        retracted: &[String],
    ) -> Option<(&'static str, String)> {
        self.service.read_value(text, held, retracted)
    }

    /// Where a fact of `slot` with `value` from `clause` belongs by the value's kind
    /// (`MemoryService::value_slot`; `None`: nowhere): text in, no record read, so no
    /// principal. Without a clause (the slot is known otherwise: the value replaces one
    /// held there), the value's kind alone decides whether it stays.
    pub fn value_slot(&self, slot: &'static str, value: &str, clause: Option<&str>) -> Option<&'static str> {
        self.service.value_slot(slot, value, clause)
    }

    /// How well `value` fits `slot` by the value-kind layer (`MemoryService::value_fit`;
    /// `None` without the model): text in, no record read, so no principal.
    pub fn value_fit(&self, slot: &str, value: &str) -> Option<f32> {
        self.service.value_fit(slot, value)
    }

    /// Whether the context block quotes the words a fact was read from in place of its
    /// value (its confidence is below `retrieval.quote_confidence`; no policy: not data).
    pub fn quotes_in_place(&self, fact: &mneme_core::MemoryRecord) -> bool {
        fact.confidence < self.service.config().retrieval.quote_confidence
    }

    /// Reads the values of facts about to be written in one pass
    /// (`MemoryService::prepare_values`).
    pub fn prepare_values(&self, values: &[&str]) {
        self.service.prepare_values(values)
    }

    /// Live facts by subject and predicate in exactly `scope`, as far as `p` may read.
    pub fn find_facts(&self, p: &Principal, subject: &str, predicate: &str, scope: &mneme_core::Scope) -> ServiceResult<Vec<MemoryRecord>> {
        self.service.find_facts(subject, predicate, scope, &p.read)
    }

    /// The first `limit` end-user scopes with records that `p` may read (to tell whether
    /// a store serves one end user or several).
    pub fn user_scopes(&self, p: &Principal, limit: usize) -> ServiceResult<Vec<mneme_core::Scope>> {
        self.service.user_scopes(limit, &p.read)
    }

    /// Live competence records for exactly `skill` in exactly `scope`, as far as `p` may read.
    pub fn find_skills(&self, p: &Principal, skill: &str, scope: &mneme_core::Scope) -> ServiceResult<Vec<MemoryRecord>> {
        self.service.find_skills(skill, scope, &p.read)
    }

    pub fn history(&self, p: &Principal, id: &RecordId) -> ServiceResult<History> {
        self.service.history(id, &p.read)
    }

    fn check_change(&self, p: &Principal, source: &MemoryRecord, change: &Revision) -> ServiceResult<()> {
        if let Some(s) = change.sensitivity {
            p.check_write(s, &source.scope)?;
        }
        Ok(())
    }

    pub fn supersede(
        &self,
        p: &Principal,
        id: &RecordId,
        change: Revision,
        actor: String,
        rationale: String,
    ) -> ServiceResult<MemoryRecord> {
        let source = self.writable(p, id)?;
        self.check_change(p, &source, &change)?;
        self.service.supersede(id, change, self.who(p, actor, rationale), &p.read)
    }

    pub fn fork(&self, p: &Principal, id: &RecordId, change: Revision, actor: String, rationale: String) -> ServiceResult<MemoryRecord> {
        let source = self.writable(p, id)?;
        self.check_change(p, &source, &change)?;
        self.service.fork(id, change, self.who(p, actor, rationale), &p.read)
    }

    pub fn merge(
        &self,
        p: &Principal,
        ids: &[RecordId],
        change: Revision,
        actor: String,
        rationale: String,
    ) -> ServiceResult<MemoryRecord> {
        if ids.len() < 2 {
            return Err(ServiceError::invalid("ids", "merge needs at least two records"));
        }
        for id in ids {
            let source = self.writable(p, id)?;
            self.check_change(p, &source, &change)?;
        }
        self.service.merge(ids, change, self.who(p, actor, rationale), &p.read)
    }

    pub fn retract(&self, p: &Principal, id: &RecordId, actor: String, rationale: String) -> ServiceResult<MemoryRecord> {
        self.writable(p, id)?;
        self.service.retract(id, self.who(p, actor, rationale), &p.read)
    }

    pub fn contest(
        &self,
        p: &Principal,
        id: &RecordId,
        contest: ContestRequest,
        actor: String,
        rationale: String,
    ) -> ServiceResult<MemoryRecord> {
        self.writable(p, id)?;
        self.service.contest(id, contest, self.who(p, actor, rationale), &p.read)
    }

    pub fn adjust(
        &self,
        p: &Principal,
        id: &RecordId,
        up: bool,
        amount: Option<f64>,
        actor: String,
        rationale: String,
    ) -> ServiceResult<SalienceChange> {
        self.writable(p, id)?;
        let who = Actor { actor: self.actor(p, Some(actor)), rationale };
        Ok(if up { self.service.reinforce(id, amount, who, &p.read)? } else { self.service.penalize(id, amount, who, &p.read)? })
    }

    /// Store-wide counts: only for a principal whose reads are not narrowed.
    pub fn metrics(&self, p: &Principal) -> ServiceResult<Metrics> {
        p.require_full_read("the metrics")?;
        self.service.metrics()
    }

    pub(crate) fn service(&self) -> &MemoryService {
        &self.service
    }

    /// Marks the agent active now (what idle detection reads: the scheduler's require-idle
    /// tasks, the heartbeat). Activity is not data, so any principal's hook counts.
    pub fn touch_activity(&self) -> ServiceResult<()> {
        self.service.touch_activity()
    }

    /// The service clock's "now" (injected: tests run on a fixed clock).
    pub fn now(&self) -> jiff::Timestamp {
        self.service.now()
    }

    /// The configured request limits (no policy: they are not data).
    pub fn limits(&self) -> mneme_core::Limits {
        self.service.config().limits
    }

    /// The store file's path (for `/healthz`'s store id; no policy: not data).
    pub fn store_path(&self) -> &std::path::Path {
        self.service.store_path()
    }

    /// Readiness: the store's engine, and `Ok` when it answers a read.
    pub fn store_ready(&self) -> (&'static str, ServiceResult<()>) {
        (self.service.store_location().0, self.service.ping())
    }

    /// How embedding is doing (model, backlog). Store-wide, like metrics.
    pub fn embedding_status(&self, p: &Principal) -> ServiceResult<Option<crate::EmbeddingStatus>> {
        p.require_full_read("the embedding status")?;
        self.service.embedding_status()
    }

    /// Erases records for good (`MemoryService::forget`): only an unrestricted principal
    /// (the owner) may, since it reaches the conversation log and every scope. The actor
    /// is the principal's.
    pub fn forget(&self, p: &Principal, mut request: crate::ForgetRequest) -> ServiceResult<crate::ForgetReport> {
        p.require_unrestricted("forget")?;
        request.actor = self.actor(p, Some(request.actor.clone()).filter(|a| !a.trim().is_empty()));
        self.service.forget(&request, &p.read)
    }

    /// The retention policy (the decay sweep's second step): for each (type, age), erase
    /// the records of that type older than the age. Returns how many were erased.
    pub fn apply_retention(&self, p: &Principal, policy: &[(mneme_core::MemoryType, std::time::Duration)]) -> ServiceResult<usize> {
        p.require_unrestricted("the retention policy")?;
        let now = self.service.now();
        let mut n = 0;
        for (t, age) in policy {
            let age =
                jiff::SignedDuration::try_from(*age).map_err(|e| crate::ServiceError::invalid("maintenance.retention", e.to_string()))?;
            n += self.service.forget_older_than(*t, now - age, "mneme:retention")?;
        }
        Ok(n)
    }

    /// The decay sweep: drops the payloads of records whose salience fell below
    /// `threshold` (the configured one when `None`); `dry_run` only lists them. Store-wide,
    /// so for an unrestricted principal only.
    pub fn prune(&self, p: &Principal, threshold: Option<f64>, dry_run: bool) -> ServiceResult<crate::PruneReport> {
        p.require_unrestricted("the decay sweep")?;
        self.service.prune(threshold, dry_run, &self.actor(p, None))
    }

    /// Gives every live record without one a vector from the attached model, `batch` at a
    /// time (`force`: every record again), reporting progress. Store-wide: for an
    /// unrestricted principal only.
    pub fn embed_pending(
        &self,
        p: &Principal,
        batch: usize,
        force: bool,
        progress: &mut dyn FnMut(crate::EmbedProgress),
    ) -> ServiceResult<u64> {
        p.require_unrestricted("re-embedding the store")?;
        self.service.embed_pending(batch, force, progress)
    }

    /// A visible record's salience curve (see `MemoryService::salience_curve`).
    pub fn salience_curve(&self, p: &Principal, id: &RecordId, days: u32) -> ServiceResult<Vec<(jiff::Timestamp, f64)>> {
        let (record, _) = self.get(p, id)?;
        Ok(self.service.salience_curve(&record, days))
    }

    /// A record's salience now (no policy: the caller already holds the record).
    pub fn current_salience(&self, record: &MemoryRecord) -> f64 {
        self.service.current_salience(record)
    }

    // ---- the conversation log, sync and workspace search: owner principals only ----------
    // These are not scoped or graded by sensitivity, so only an unrestricted principal may
    // use them; the check lives here, not in each transport.

    pub fn log_conversation(&self, p: &Principal, input: ConversationInput) -> ServiceResult<Conversation> {
        p.require_unrestricted("the conversation log")?;
        self.service.log_conversation(input)
    }

    pub fn sync_status(&self, p: &Principal) -> ServiceResult<SyncState> {
        p.require_unrestricted("the conversation log")?;
        self.service.sync_status()
    }

    pub fn sync_fetch(&self, p: &Principal, begin: i64, end: i64) -> ServiceResult<Vec<Conversation>> {
        p.require_unrestricted("the conversation log")?;
        self.service.sync_fetch(begin, end)
    }

    pub fn sync_checkpoint(&self, p: &Principal, end_id: i64, summary: &str) -> ServiceResult<CheckpointResult> {
        p.require_unrestricted("the conversation log")?;
        self.service.sync_checkpoint(end_id, summary)
    }

    pub fn search_files(&self, p: &Principal, query: &str, limit: usize, ranking: FileRanking) -> ServiceResult<FileSearch> {
        p.require_unrestricted("workspace search")?;
        self.service.search_files(query, limit, ranking)
    }
}
