//! `Owner`: the narrow handle the owner's engines work through (the scheduler, the file
//! index, reflection, the inner life, the daemon's background jobs). It is the only way
//! to the agent's unlabeled data (tasks, dispatches, the file index, activity, the audit
//! feed, job leases), and only an unrestricted principal gets one ([`Ops::owner`]).
//! Records read and written through it still pass the principal's policy, the same as
//! a request's: there is no master key to the service.

use jiff::Timestamp;
use mneme_core::{MemoryRecord, Payload, RecordId};

use crate::{
    ContestRequest, Dispatch, IndexedFile, IngestOptions, MemoryService, NewChunk, Ops, Principal, RetrieveRequest, ServiceResult,
    SyncState, TaskRow, TaskRun,
};

/// What an unrestricted principal's engines may do beyond [`Ops`]. Obtained from
/// [`Ops::owner`]; borrows the door and the principal it was checked for.
#[derive(Debug, Clone, Copy)]
pub struct Owner<'a> {
    ops: &'a Ops,
    principal: &'a Principal,
}

impl Ops {
    /// The owner's handle: for a principal that may read and write everything only, since
    /// the agent data behind it has no sensitivity labels or scopes to check.
    pub fn owner<'a>(&'a self, p: &'a Principal) -> ServiceResult<Owner<'a>> {
        self.owner_for(p, "the owner's engines (scheduler, file index, reflection, inner life)")
    }

    /// [`Ops::owner`] for `what` (named in the refusal: "the relay", "consolidation").
    pub fn owner_for<'a>(&'a self, p: &'a Principal, what: &str) -> ServiceResult<Owner<'a>> {
        p.require_unrestricted(what)?;
        Ok(Owner { ops: self, principal: p })
    }
}

impl<'a> Owner<'a> {
    fn service(&self) -> &'a MemoryService {
        self.ops.service()
    }

    /// The door this handle came from.
    pub fn ops(&self) -> &'a Ops {
        self.ops
    }

    /// The principal the engines act as.
    pub fn principal(&self) -> &'a Principal {
        self.principal
    }

    /// The service clock's "now".
    pub fn now(&self) -> Timestamp {
        self.ops.now()
    }

    // Records, through the door with the owner's principal.

    /// A record, as the owner sees it.
    pub fn get(&self, id: &RecordId) -> ServiceResult<MemoryRecord> {
        Ok(self.ops.get(self.principal, id)?.0)
    }

    /// Stores a record with the owner's write policy and defaults.
    pub fn ingest(&self, payload: Payload, options: IngestOptions) -> ServiceResult<MemoryRecord> {
        self.ops.ingest(self.principal, payload, options)
    }

    /// The newest records that pass `request`'s filters, newest first, unranked.
    pub fn recent(&self, request: &RetrieveRequest) -> ServiceResult<Vec<MemoryRecord>> {
        self.service().recent(request, &self.principal.read)
    }

    /// Contests `target` (the inner life's "contradicts" tag).
    pub fn contest(&self, target: &RecordId, request: ContestRequest, actor: String, rationale: String) -> ServiceResult<MemoryRecord> {
        self.ops.contest(self.principal, target, request, actor, rationale)
    }

    /// Links two records the owner may write (the inner life's synapse tags).
    pub fn relate(&self, from: &RecordId, to: &RecordId, kind: &str, note: &str) -> ServiceResult<()> {
        self.ops.get(self.principal, to)?;
        self.ops.get(self.principal, from)?;
        self.service().relate(from, to, kind, note)
    }

    // The agent's unlabeled data.

    /// Every scheduled task's stored row.
    pub fn task_rows(&self) -> ServiceResult<Vec<TaskRow>> {
        self.service().task_rows()
    }

    /// Stores task rows (and `flag`, a meta key and value, in the same transaction).
    pub fn put_task_rows(&self, rows: &[TaskRow], flag: Option<(&str, &str)>) -> ServiceResult<()> {
        self.service().put_task_rows(rows, flag)
    }

    /// Removes a scheduled task; an unknown name is "not found".
    pub fn remove_task_row(&self, name: &str) -> ServiceResult<()> {
        self.service().remove_task_row(name)
    }

    /// Records a task's run, its log entry and its dispatch in one transaction.
    #[allow(clippy::too_many_arguments)]
    pub fn record_task_run(
        &self,
        row: &TaskRow,
        read_spec: &str,
        at: Timestamp,
        ok: bool,
        detail: &str,
        dispatch: Option<(u8, &str)>,
    ) -> ServiceResult<bool> {
        self.service().record_task_run(row, read_spec, at, ok, detail, dispatch)
    }

    /// The task run log, newest first.
    pub fn task_runs(&self, task: Option<&str>, limit: usize) -> ServiceResult<Vec<TaskRun>> {
        self.service().task_runs(task, limit)
    }

    /// Queues text for the agent's next session start; false when an undelivered dispatch
    /// from `source` is already waiting.
    pub fn queue_dispatch(&self, source: &str, priority: u8, text: &str, at: Timestamp) -> ServiceResult<bool> {
        self.service().queue_dispatch(source, priority, text, at)
    }

    /// Takes up to `limit` undelivered dispatches, marking them delivered.
    pub fn take_dispatches(&self, limit: usize) -> ServiceResult<Vec<Dispatch>> {
        self.service().take_dispatches(limit)
    }

    /// Undelivered dispatches, without taking them.
    pub fn pending_dispatches(&self, limit: usize) -> ServiceResult<Vec<Dispatch>> {
        self.service().pending_dispatches(limit)
    }

    /// When the agent was last active (a hook, a request).
    pub fn last_activity(&self) -> ServiceResult<Option<Timestamp>> {
        self.service().last_activity()
    }

    /// The newest audit sequence number.
    pub fn max_audit_seq(&self) -> ServiceResult<i64> {
        self.service().max_audit_seq()
    }

    /// Audit events after `after`, oldest first.
    pub fn audit_events_after(&self, after: i64, limit: usize) -> ServiceResult<Vec<mneme_store::AuditEvent>> {
        self.service().audit_events_after(after, limit)
    }

    /// A value of the store's meta table.
    pub fn meta_value(&self, key: &str) -> ServiceResult<Option<String>> {
        self.service().meta_value(key)
    }

    /// The workspace files the search index holds.
    pub fn indexed_files(&self) -> ServiceResult<Vec<IndexedFile>> {
        self.service().indexed_files()
    }

    /// Replaces the index entries of `files` and drops `removed`, in one transaction.
    pub fn update_file_index(&self, files: &[(IndexedFile, Vec<NewChunk>)], removed: &[String]) -> ServiceResult<()> {
        self.service().update_file_index(files, removed)
    }

    /// Searches the workspace's chunks (`MemoryService::search_files`).
    pub fn search_files(&self, query: &str, limit: usize, ranking: crate::FileRanking) -> ServiceResult<crate::FileSearch> {
        self.ops.search_files(self.principal, query, limit, ranking)
    }

    /// [`Self::search_files`] without counting reads (`MemoryService::find_files`).
    pub fn find_files(&self, query: &str, limit: usize, ranking: crate::FileRanking) -> ServiceResult<crate::FileSearch> {
        self.principal.require_unrestricted("workspace search")?;
        self.service().find_files(query, limit, ranking)
    }

    /// Embeds the indexed chunks without a vector from the attached model (none: 0), until
    /// `deadline` when one is given.
    pub fn embed_file_chunks(&self, background: bool, deadline: Option<std::time::Instant>) -> ServiceResult<u64> {
        self.service().embed_file_chunks_until(background, deadline)
    }

    /// How many indexed chunks have and lack a vector from the attached model (`None` without one).
    pub fn file_chunk_coverage(&self) -> ServiceResult<Option<(u64, u64)>> {
        self.service().file_chunk_coverage()
    }

    /// Counts one read of each `(path, heading)` (heading empty: the whole file).
    pub fn record_file_reads(&self, reads: &[(String, String)]) -> ServiceResult<()> {
        self.service().record_file_reads(reads)
    }

    /// Every counted read of a workspace file or entry.
    pub fn workspace_reads(&self) -> ServiceResult<Vec<mneme_store::WorkspaceRead>> {
        self.service().workspace_reads()
    }

    /// Other files near each file in meaning (`MemoryService::related_files`).
    pub fn related_files(&self, per_file: usize) -> ServiceResult<std::collections::HashMap<String, Vec<(String, f32)>>> {
        self.service().related_files(per_file)
    }

    /// The conversation log's sync boundary.
    pub fn sync_status(&self) -> ServiceResult<SyncState> {
        self.ops.sync_status(self.principal)
    }

    /// Conversation-log entries `begin..=end`.
    pub fn sync_fetch(&self, begin: i64, end: i64) -> ServiceResult<Vec<mneme_store::Conversation>> {
        self.ops.sync_fetch(self.principal, begin, end)
    }

    /// Whether this process should run background `job` now (PostgreSQL job leases).
    pub fn holds_job(&self, job: &str) -> ServiceResult<bool> {
        self.service().holds_job(job)
    }

    /// Unit vectors of `texts` from the attached model; `None` without one or on failure.
    pub fn embed_texts(&self, texts: &[&str]) -> Option<Vec<Vec<f32>>> {
        self.service().embed_texts(texts)
    }

    /// The attached embedding model's id, if any.
    pub fn embedding_model(&self) -> Option<String> {
        self.service().embedding_model().map(str::to_string)
    }
}
