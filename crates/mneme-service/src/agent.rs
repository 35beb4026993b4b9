//! The agent's side of the store (schema v4), as service operations: the conversation log
//! with sync checkpoints, scheduled-task rows and their run log, dispatches for the agent,
//! the agent's last activity (for require-idle tasks), and the workspace search index.
//!
//! The scheduler's and the file index's logic live in `mneme-server` (they need the
//! workspace crate); this layer validates input, strips `<private>` blocks from anything
//! persisted, and keeps each operation one transaction.

use jiff::Timestamp;
use mneme_core::{CoreError, private};
use mneme_store::{Checkpoint, Conversation, Direction, Dispatch, IndexedFile, NewChunk, NewConversation, SyncState, TaskRow, TaskRun};
use serde::Serialize;

use crate::{MemoryService, ServiceError, ServiceResult};

/// Longest channel or user id, in bytes.
const MAX_NAME_BYTES: usize = 256;
/// Longest conversation message or checkpoint summary, in bytes.
const MAX_CONTENT_BYTES: usize = 256 * 1024;
/// Most conversations one fetch returns.
pub const MAX_FETCH: usize = 10_000;

/// A message to log, as a front end receives it (also the HTTP body).
#[derive(Debug, Clone, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConversationInput {
    pub channel: String,
    #[serde(default)]
    pub user_id: Option<String>,
    /// `in` or `out`; `in` when omitted in JSON.
    #[serde(default = "incoming")]
    pub direction: String,
    /// 1..=3; default 3 (normal).
    #[serde(default)]
    pub priority: Option<u8>,
    pub content: String,
    /// When it was said; default now.
    #[serde(default)]
    pub at: Option<Timestamp>,
}

fn incoming() -> String {
    "in".into()
}

/// The result of a checkpoint: the checkpoint, and whether it already existed (a retried
/// sync that had committed its checkpoint gets the same one back).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CheckpointResult {
    pub checkpoint: Checkpoint,
    pub already_existed: bool,
    /// How many conversations the checkpoint newly covers.
    pub covered: u64,
}

fn invalid(field: &'static str, reason: impl Into<String>) -> ServiceError {
    ServiceError::Invalid(CoreError::invalid(field, reason))
}

fn check_name(field: &'static str, value: &str) -> ServiceResult<()> {
    if value.trim().is_empty() {
        return Err(invalid(field, "must not be empty"));
    }
    if value.len() > MAX_NAME_BYTES {
        return Err(ServiceError::Invalid(CoreError::TooLarge { field, actual: value.len(), limit: MAX_NAME_BYTES }));
    }
    if value.chars().any(char::is_control) {
        return Err(invalid(field, "must not contain control characters"));
    }
    Ok(())
}

/// Strips private blocks and checks the text is non-empty and within the limit.
fn clean_text(field: &'static str, text: &str) -> ServiceResult<String> {
    let text = private::strip(text).trim().to_string();
    if text.is_empty() {
        return Err(invalid(field, "is empty (after removing <private> blocks)"));
    }
    if text.len() > MAX_CONTENT_BYTES {
        return Err(ServiceError::Invalid(CoreError::TooLarge { field, actual: text.len(), limit: MAX_CONTENT_BYTES }));
    }
    Ok(text)
}

fn check_priority(priority: u8) -> ServiceResult<u8> {
    if (1..=3).contains(&priority) {
        Ok(priority)
    } else {
        Err(invalid("priority", format!("{priority} is not 1 (memory), 2 (maintenance) or 3 (normal)")))
    }
}

impl MemoryService {
    // ---- conversation log and sync ---------------------------------------------------

    /// Appends a message to the conversation log (private blocks removed).
    pub fn log_conversation(&self, input: ConversationInput) -> ServiceResult<Conversation> {
        check_name("channel", &input.channel)?;
        if let Some(user) = &input.user_id {
            check_name("user_id", user)?;
        }
        let direction = Direction::parse(&input.direction)
            .ok_or_else(|| invalid("direction", format!("{:?} is not `in` or `out`", input.direction)))?;
        let new = NewConversation {
            at: input.at.unwrap_or_else(|| self.now()),
            channel: input.channel.trim().to_string(),
            user_id: input.user_id.map(|u| u.trim().to_string()),
            direction,
            priority: check_priority(input.priority.unwrap_or(3))?,
            // The log carries no sensitivity and feeds memory sync (the agent's files): a
            // secret in it is kept as `[secret:<kind>]`; the message's record holds it at high.
            content: mneme_core::secrets::redact(&clean_text("content", &input.content)?).into_owned(),
        };
        self.store()?.write(|tx| tx.log_conversation(&new).map_err(ServiceError::from))
    }

    /// The unsummarized count and range, and the last checkpoint.
    pub fn sync_status(&self) -> ServiceResult<SyncState> {
        self.reader()?.read(|tx| tx.sync_state().map_err(ServiceError::from))
    }

    /// Conversations with ids in `begin..=end`, oldest first (at most [`MAX_FETCH`]); an
    /// end before begin is an empty range, as `begin..=end` is.
    pub fn sync_fetch(&self, begin: i64, end: i64) -> ServiceResult<Vec<Conversation>> {
        if begin < 1 {
            return Err(invalid("begin", format!("{begin} is not a conversation id (ids start at 1)")));
        }
        if end < begin {
            return Ok(Vec::new());
        }
        self.reader()?.read(|tx| tx.conversations(begin, end, MAX_FETCH).map_err(ServiceError::from))
    }

    /// Marks conversations up to `end_id` summarized. Idempotent: repeating the latest
    /// checkpoint's `end_id` returns that checkpoint. Refused: an `end_id` behind the
    /// latest checkpoint or past the last logged conversation, an empty summary.
    pub fn sync_checkpoint(&self, end_id: i64, summary: &str) -> ServiceResult<CheckpointResult> {
        let summary = clean_text("summary", summary)?;
        let now = self.now();
        self.store()?.write(|tx| {
            let state = tx.sync_state()?;
            let boundary = state.last_checkpoint.as_ref().map_or(0, |c| c.end_id);
            if let Some(last) = state.last_checkpoint.filter(|c| c.end_id == end_id) {
                return Ok(CheckpointResult { checkpoint: last, already_existed: true, covered: 0 });
            }
            if end_id < boundary {
                return Err(ServiceError::Precondition(format!(
                    "conversations up to {boundary} are already checkpointed; {end_id} would move the boundary back"
                )));
            }
            let last_id = tx.last_conversation_id()?;
            if end_id > last_id {
                return Err(ServiceError::Precondition(format!("no conversation {end_id}: the log ends at {last_id}")));
            }
            let covered = tx.conversations(boundary + 1, end_id, usize::MAX)?.len() as u64;
            let checkpoint = tx.add_checkpoint(end_id, &summary, now)?;
            Ok(CheckpointResult { checkpoint, already_existed: false, covered })
        })
    }

    // ---- scheduled tasks, runs, dispatches, activity ---------------------------------------

    /// Every stored task row (the scheduler owns the `spec` format).
    pub fn task_rows(&self) -> ServiceResult<Vec<TaskRow>> {
        self.reader()?.read(|tx| tx.tasks().map_err(ServiceError::from))
    }

    /// Inserts or replaces task rows in one transaction, optionally setting a `meta` flag.
    pub fn put_task_rows(&self, rows: &[TaskRow], flag: Option<(&str, &str)>) -> ServiceResult<()> {
        for row in rows {
            check_name("task name", &row.name)?;
        }
        self.store()?.write(|tx| {
            for row in rows {
                tx.put_task(row)?;
            }
            if let Some((key, value)) = flag {
                tx.put_meta(key, value)?;
            }
            Ok(())
        })
    }

    /// Removes a task by name; `NoSuch` if there is none.
    pub fn remove_task_row(&self, name: &str) -> ServiceResult<()> {
        let removed = self.store()?.write(|tx| tx.remove_task(name).map_err(ServiceError::from))?;
        if removed { Ok(()) } else { Err(ServiceError::NoSuch(format!("no scheduled task {name:?}"))) }
    }

    /// Records a task's run: its new row (with the run time) if the stored task is still
    /// `read_spec` (a task removed or replaced during the run stays so), the run log entry,
    /// and the dispatch it produced, all in one transaction. Returns whether the dispatch
    /// was queued (not when one from the same task is still undelivered).
    pub fn record_task_run(
        &self,
        row: &TaskRow,
        read_spec: &str,
        at: Timestamp,
        ok: bool,
        detail: &str,
        dispatch: Option<(u8, &str)>,
    ) -> ServiceResult<bool> {
        let detail = private::strip(detail);
        self.store()?.write(|tx| {
            let current = tx.update_task_if(&row.name, read_spec, &row.spec)?;
            let detail = if current { detail.to_string() } else { format!("{detail} (the task was changed or removed during the run)") };
            tx.log_task_run(&row.name, at, ok, &detail)?;
            match dispatch {
                Some((priority, text)) if current => {
                    Ok(tx.add_dispatch(&row.name, check_priority(priority)?, &private::strip(text), at)?.is_some())
                }
                _ => Ok(false),
            }
        })
    }

    /// The latest runs of one task (or all), newest first.
    pub fn task_runs(&self, task: Option<&str>, limit: usize) -> ServiceResult<Vec<TaskRun>> {
        self.reader()?.read(|tx| tx.task_runs(task, limit).map_err(ServiceError::from))
    }

    /// Queues an instruction for the agent (delivered by its next hook), unless one from
    /// the same `source` is still waiting. Returns whether it was queued.
    pub fn queue_dispatch(&self, source: &str, priority: u8, text: &str, at: Timestamp) -> ServiceResult<bool> {
        let priority = check_priority(priority)?;
        let text = private::strip(text);
        self.store()?.write(|tx| Ok(tx.add_dispatch(source, priority, &text, at)?.is_some()))
    }

    /// Undelivered dispatches (priority order), marked delivered in the same transaction:
    /// each is handed out once. Without any, nothing is written (hooks call this).
    pub fn take_dispatches(&self, limit: usize) -> ServiceResult<Vec<Dispatch>> {
        if self.pending_dispatches(1)?.is_empty() {
            return Ok(Vec::new());
        }
        let now = self.now();
        self.store()?.write(|tx| {
            let mut pending = tx.pending_dispatches(limit)?;
            tx.mark_delivered(&pending.iter().map(|d| d.id).collect::<Vec<_>>(), now)?;
            pending.iter_mut().for_each(|d| d.delivered_at = Some(now));
            Ok(pending)
        })
    }

    /// Undelivered dispatches without delivering them.
    pub fn pending_dispatches(&self, limit: usize) -> ServiceResult<Vec<Dispatch>> {
        self.reader()?.read(|tx| tx.pending_dispatches(limit).map_err(ServiceError::from))
    }

    /// Notes that the agent did something now (hooks call this; require-idle tasks wait).
    /// Kept in a small file beside the store (`mneme.db.activity`), not in the store: a
    /// hook must stay fast, and a store write costs a WAL checkpoint with two fsyncs when
    /// the hook's process is the last one to close the store. Losing it in a crash only
    /// makes the agent look idle.
    pub fn touch_activity(&self) -> ServiceResult<()> {
        let path = self.activity_path();
        std::fs::write(&path, self.now().as_millisecond().to_string())
            .map_err(|source| ServiceError::Store(mneme_store::StoreError::Io { path, source }))
    }

    /// When the agent was last active, if ever.
    pub fn last_activity(&self) -> ServiceResult<Option<Timestamp>> {
        let text = std::fs::read_to_string(self.activity_path()).unwrap_or_default();
        Ok(text.trim().parse::<i64>().ok().and_then(|ms| Timestamp::from_millisecond(ms).ok()))
    }

    fn activity_path(&self) -> std::path::PathBuf {
        let mut name = self.options.path.as_os_str().to_owned();
        name.push(".activity");
        name.into()
    }

    /// The highest audit sequence so far: where the inner life starts looking for
    /// corrections on its first run.
    pub fn max_audit_seq(&self) -> ServiceResult<i64> {
        self.reader()?.read(|tx| tx.max_audit_seq().map_err(ServiceError::from))
    }

    /// Corrections and new skills after audit sequence `after` (see
    /// `ReadTx::audit_events_after`), for the inner life's sense step.
    pub fn audit_events_after(&self, after: i64, limit: usize) -> ServiceResult<Vec<mneme_store::AuditEvent>> {
        self.reader()?.read(|tx| tx.audit_events_after(after, limit).map_err(ServiceError::from))
    }

    /// Links `from` to `to` with a relation `kind` (`caused_by`, `updates`), both records
    /// existing and live; in one transaction.
    pub fn relate(&self, from: &mneme_core::RecordId, to: &mneme_core::RecordId, kind: &str, note: &str) -> ServiceResult<()> {
        let now = self.now();
        self.store()?.write(|tx| {
            tx.require(from)?;
            tx.require(to)?;
            tx.add_link(from, to, kind, note, now)?;
            Ok::<_, ServiceError>(())
        })
    }

    /// A `meta` value.
    pub fn meta_value(&self, key: &str) -> ServiceResult<Option<String>> {
        self.reader()?.read(|tx| tx.meta(key).map_err(ServiceError::from))
    }

    // ---- workspace search index ----------------------------------------------------------

    /// What the index holds, per file.
    pub fn indexed_files(&self) -> ServiceResult<Vec<IndexedFile>> {
        self.reader()?.read(|tx| tx.indexed_files().map_err(ServiceError::from))
    }

    /// Replaces files' chunks and drops removed files, in one transaction. Chunk text has
    /// its private blocks removed before it is indexed.
    pub fn update_file_index(&self, files: &[(IndexedFile, Vec<NewChunk>)], removed: &[String]) -> ServiceResult<()> {
        self.store()?.write(|tx| {
            for (file, chunks) in files {
                let chunks: Vec<NewChunk> = chunks
                    .iter()
                    .map(|c| NewChunk {
                        text: private::strip(&c.text).into_owned(),
                        heading: private::strip(&c.heading).into_owned(),
                        ..c.clone()
                    })
                    .filter(|c| !c.text.trim().is_empty())
                    .collect();
                tx.index_file(&IndexedFile { chunks: chunks.len() as u64, ..file.clone() }, &chunks)?;
            }
            for path in removed {
                tx.unindex_file(path)?;
            }
            tx.prune_chunk_vectors()?;
            Ok(())
        })
    }
}
