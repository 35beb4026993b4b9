//! The agent's side tables (schema v4): the conversation log and its checkpoints (the zylos
//! seed's C4), scheduled tasks with their run log, dispatches (instructions waiting for the
//! agent's next hook), and the full-text index of the workspace's Markdown files.
//!
//! Invariant: conversations and checkpoints are append-only (SQL triggers). The sync
//! boundary is the latest checkpoint's `end_id`; a sync that crashes before its checkpoint
//! leaves the boundary where it was, so the same range is fetched again.
//! Invariant: the workspace index is derived data: a file's chunks are replaced as a whole,
//! in one transaction, together with its `workspace_files` row.

use jiff::Timestamp;
use serde::Serialize;

use crate::error::StoreResult;
use crate::rows::{ReadTx, WriteTx, decode, ts};
use crate::sql::{Dialect, Row};

/// Who sent a conversation message: the user to the agent (`in`) or the agent (`out`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Direction {
    In,
    Out,
}

impl Direction {
    pub fn as_str(self) -> &'static str {
        match self {
            Direction::In => "in",
            Direction::Out => "out",
        }
    }

    /// `in` / `out` (also `incoming`, `outgoing`, `received`, `sent`).
    pub fn parse(text: &str) -> Option<Self> {
        match text.trim().to_ascii_lowercase().as_str() {
            "in" | "incoming" | "received" | "inbound" => Some(Direction::In),
            "out" | "outgoing" | "sent" | "outbound" => Some(Direction::Out),
            _ => None,
        }
    }
}

/// A message for the conversation log.
#[derive(Debug, Clone, PartialEq)]
pub struct NewConversation {
    pub at: Timestamp,
    pub channel: String,
    pub user_id: Option<String>,
    pub direction: Direction,
    /// 1 memory, 2 maintenance, 3 normal (the seed's priorities).
    pub priority: u8,
    pub content: String,
}

/// A logged conversation message.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Conversation {
    pub id: i64,
    pub at: Timestamp,
    pub channel: String,
    pub user_id: Option<String>,
    pub direction: Direction,
    pub priority: u8,
    pub content: String,
}

/// A sync checkpoint: conversations up to `end_id` are summarized.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Checkpoint {
    pub id: i64,
    pub end_id: i64,
    pub summary: String,
    pub at: Timestamp,
}

/// Where the conversation log stands against its last checkpoint.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SyncState {
    /// Conversations after the last checkpoint.
    pub unsummarized: u64,
    /// The first and last unsummarized ids, when there are any.
    pub begin_id: Option<i64>,
    pub end_id: Option<i64>,
    pub last_checkpoint: Option<Checkpoint>,
    /// All conversations ever logged.
    pub total: u64,
}

/// A stored scheduled task: its name, the scheduler's JSON and whether it is built in.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskRow {
    pub name: String,
    pub spec: String,
    pub builtin: bool,
}

/// One run of a scheduled task.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TaskRun {
    pub id: i64,
    pub task: String,
    pub at: Timestamp,
    pub ok: bool,
    pub detail: String,
}

/// An instruction for the agent, waiting for (or delivered by) a hook.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Dispatch {
    pub id: i64,
    pub task: String,
    pub priority: u8,
    pub text: String,
    pub created_at: Timestamp,
    pub delivered_at: Option<Timestamp>,
}

/// What the index knows about one workspace file.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct IndexedFile {
    /// Workspace-relative, `/`-separated.
    pub path: String,
    /// Modification time in milliseconds since the epoch.
    pub mtime_ms: i64,
    pub size: u64,
    pub chunks: u64,
}

impl IndexedFile {
    /// The modification time (the epoch for a time before it).
    pub fn modified(&self) -> Timestamp {
        Timestamp::from_millisecond(self.mtime_ms).unwrap_or(Timestamp::UNIX_EPOCH)
    }
}

/// A chunk of a workspace file, for the index.
#[derive(Debug, Clone, PartialEq)]
pub struct NewChunk {
    pub start_line: u32,
    pub end_line: u32,
    pub heading: String,
    pub text: String,
}

/// A search hit in the workspace index.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ChunkHit {
    pub path: String,
    pub start_line: u32,
    pub end_line: u32,
    pub heading: String,
    /// The best-matching passage with the query terms in `[` `]`.
    pub snippet: String,
    /// The rank score: BM25 for a lexical search (higher is better); with a model, the
    /// fusion of the lexical and the meaning ranks (`MemoryService::search_files`).
    pub score: f64,
    /// Cosine of the chunk to the query, when a model ranked it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cosine: Option<f32>,
    /// The chunk's row in the index (SQLite's rowid, PostgreSQL's id).
    #[serde(skip)]
    pub id: i64,
}

/// A chunk's text and the digest its vectors are keyed by ([`chunk_digest`]).
#[derive(Debug, Clone, PartialEq)]
pub struct ChunkTodo {
    pub digest: String,
    /// What the model reads: the heading path, a line break, the chunk's text.
    pub text: String,
}

/// An indexed chunk's vector.
#[derive(Debug, Clone, PartialEq)]
pub struct ChunkVector {
    pub id: i64,
    pub path: String,
    pub scale: f32,
    pub codes: Vec<i8>,
}

/// How often a workspace file (`heading` empty) or one of its entries (a chunk's heading
/// path) was read: search hits, file reads, session-start injection.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WorkspaceRead {
    pub path: String,
    pub heading: String,
    pub count: u64,
    pub last_at: Timestamp,
}

/// The digest of a chunk's heading and text (SHA-256, the first 16 bytes in hex): the key
/// of its vectors, so an edited file's unchanged chunks keep theirs.
pub fn chunk_digest(heading: &str, text: &str) -> String {
    use sha2::{Digest, Sha256};
    let mut hash = Sha256::new();
    hash.update(heading.as_bytes());
    hash.update([0u8]);
    hash.update(text.as_bytes());
    hash.finalize()[..16].iter().map(|b| format!("{b:02x}")).collect()
}

/// What the model reads of a chunk: its heading path, then its text.
pub fn chunk_model_text(heading: &str, text: &str) -> String {
    if heading.is_empty() { text.to_string() } else { format!("{heading}\n{text}") }
}

const CONVERSATION_COLUMNS: &str = "id, at, channel, user_id, direction, priority, content";

type ConversationRow = (i64, i64, String, Option<String>, String, i64, String);

fn conversation_row(r: &dyn Row) -> StoreResult<ConversationRow> {
    Ok((r.i64(0)?, r.i64(1)?, r.text(2)?, r.opt_text(3)?, r.text(4)?, r.i64(5)?, r.text(6)?))
}

fn conversation(
    path: &std::path::Path,
    (id, at, channel, user_id, direction, priority, content): ConversationRow,
) -> StoreResult<Conversation> {
    let direction = Direction::parse(&direction).ok_or_else(|| decode(path, format!("conversation {id} has direction {direction:?}")))?;
    Ok(Conversation { id, at: ts(at, path)?, channel, user_id, direction, priority: priority.clamp(1, 3) as u8, content })
}

impl ReadTx<'_> {
    /// The latest checkpoint, if any.
    pub fn last_checkpoint(&self) -> StoreResult<Option<Checkpoint>> {
        let row = self.exec.row("SELECT id, end_id, summary, at FROM checkpoints ORDER BY id DESC LIMIT 1", &[], |r| {
            Ok((r.i64(0)?, r.i64(1)?, r.text(2)?, r.i64(3)?))
        })?;
        row.map(|(id, end_id, summary, at)| Ok(Checkpoint { id, end_id, summary, at: ts(at, self.path)? })).transpose()
    }

    /// The unsummarized count and range against the latest checkpoint.
    pub fn sync_state(&self) -> StoreResult<SyncState> {
        let last_checkpoint = self.last_checkpoint()?;
        let boundary = last_checkpoint.as_ref().map_or(0, |c| c.end_id);
        let (unsummarized, begin_id, end_id) = self
            .exec
            .row("SELECT count(*), min(id), max(id) FROM conversations WHERE id > ?1", &[&boundary], |r| {
                Ok((r.i64(0)?, r.opt_i64(1)?, r.opt_i64(2)?))
            })?
            .unwrap_or((0, None, None));
        let total = self.exec.int("SELECT count(*) FROM conversations", &[])?;
        Ok(SyncState { unsummarized: unsummarized as u64, begin_id, end_id, last_checkpoint, total: total as u64 })
    }

    /// Conversations with `begin <= id <= end`, oldest first, at most `limit`.
    pub fn conversations(&self, begin: i64, end: i64, limit: usize) -> StoreResult<Vec<Conversation>> {
        let sql = format!("SELECT {CONVERSATION_COLUMNS} FROM conversations WHERE id BETWEEN ?1 AND ?2 ORDER BY id LIMIT ?3");
        let rows = self.query_all(&sql, &[&begin, &end, &(limit as i64)], conversation_row)?;
        rows.into_iter().map(|row| conversation(self.path, row)).collect()
    }

    /// The highest conversation id, 0 when the log is empty.
    pub fn last_conversation_id(&self) -> StoreResult<i64> {
        self.exec.int("SELECT coalesce(max(id), 0) FROM conversations", &[])
    }

    /// Every stored task, by name (in byte order on both engines).
    pub fn tasks(&self) -> StoreResult<Vec<TaskRow>> {
        let sql = match self.dialect() {
            Dialect::Sqlite => "SELECT name, spec, builtin FROM scheduled_tasks ORDER BY name",
            Dialect::Postgres => "SELECT name, spec, builtin FROM scheduled_tasks ORDER BY name COLLATE \"C\"",
        };
        self.query_all(sql, &[], |r| Ok(TaskRow { name: r.text(0)?, spec: r.text(1)?, builtin: r.flag(2)? }))
    }

    /// The latest `limit` runs of `task` (all tasks when `None`), newest first.
    pub fn task_runs(&self, task: Option<&str>, limit: usize) -> StoreResult<Vec<TaskRun>> {
        let rows = self.query_all(
            "SELECT id, task, at, ok, detail FROM task_runs WHERE CAST(?1 AS TEXT) IS NULL OR task = ?1 ORDER BY id DESC LIMIT ?2",
            &[&task, &(limit as i64)],
            |r| Ok((r.i64(0)?, r.text(1)?, r.i64(2)?, r.flag(3)?, r.text(4)?)),
        )?;
        rows.into_iter().map(|(id, task, at, ok, detail)| Ok(TaskRun { id, task, at: ts(at, self.path)?, ok, detail })).collect()
    }

    /// Undelivered dispatches, by priority then age.
    pub fn pending_dispatches(&self, limit: usize) -> StoreResult<Vec<Dispatch>> {
        let rows = self.query_all(
            "SELECT id, task, priority, text, created_at FROM dispatches WHERE delivered_at IS NULL ORDER BY priority, id LIMIT ?1",
            &[&(limit as i64)],
            |r| Ok((r.i64(0)?, r.text(1)?, r.i64(2)?, r.text(3)?, r.i64(4)?)),
        )?;
        rows.into_iter()
            .map(|(id, task, priority, text, created)| {
                Ok(Dispatch {
                    id,
                    task,
                    priority: priority.clamp(1, 3) as u8,
                    text,
                    created_at: ts(created, self.path)?,
                    delivered_at: None,
                })
            })
            .collect()
    }

    /// A `meta` value (small daemon and agent state such as the last activity time).
    pub fn meta(&self, key: &str) -> StoreResult<Option<String>> {
        self.exec.row("SELECT value FROM meta WHERE key = ?1", &[&key], |r| r.text(0))
    }

    /// Every indexed workspace file.
    pub fn indexed_files(&self) -> StoreResult<Vec<IndexedFile>> {
        self.query_all("SELECT path, mtime, size, chunks FROM workspace_files ORDER BY path", &[], |r| {
            Ok(IndexedFile { path: r.text(0)?, mtime_ms: r.i64(1)?, size: r.i64(2)? as u64, chunks: r.i64(3)? as u64 })
        })
    }

    /// Full-text search over workspace chunks. `fts_query` is an FTS5 expression (callers
    /// build it with `mneme_core::query`); hits best first.
    ///
    /// On PostgreSQL: the chunks matching any of the expression's phrases (each its own
    /// `plainto_tsquery` parameter), best `ts_rank` first (heading 1, text ½: its weights must lie in [0, 1]), the snippet
    /// from `ts_headline` with the same `[` `]` marks.
    pub fn search_chunks(&self, fts_query: &str, limit: usize) -> StoreResult<Vec<ChunkHit>> {
        let tokens = crate::search::phrases(fts_query);
        let (sql, params): (String, Vec<&dyn crate::sql::Param>) = match self.dialect() {
            Dialect::Sqlite => (
                "SELECT path, start_line, end_line, heading, snippet(workspace_chunks, 4, '[', ']', '…', 24), -bm25(workspace_chunks, 0, 0, 0, 2.0, 1.0), rowid \
                 FROM workspace_chunks WHERE workspace_chunks MATCH ?1 ORDER BY bm25(workspace_chunks, 0, 0, 0, 2.0, 1.0) LIMIT ?2"
                    .to_string(),
                vec![&fts_query as &dyn crate::sql::Param],
            ),
            Dialect::Postgres => {
                if tokens.is_empty() {
                    return Ok(Vec::new());
                }
                let any = vec!["plainto_tsquery('english', ?)"; tokens.len()].join(" || ");
                (
                    format!(
                        "SELECT path, start_line, end_line, heading, \
                         ts_headline('english', text, q.q, 'StartSel=[, StopSel=], MaxWords=24, MinWords=6, MaxFragments=1, FragmentDelimiter=…'), \
                         ts_rank('{{0, 0, 0.5, 1.0}}', tsv, q.q)::float8 AS score, id \
                         FROM (SELECT {any} AS q) q, workspace_chunks WHERE tsv @@ q.q ORDER BY score DESC, id LIMIT ?"
                    ),
                    tokens.iter().map(|t| t as &dyn crate::sql::Param).collect(),
                )
            }
        };
        let limit = limit as i64;
        let mut params = params;
        params.push(&limit);
        self.query_all(&sql, &params, |r| {
            Ok(ChunkHit {
                path: r.text(0)?,
                start_line: r.i64(1)? as u32,
                end_line: r.i64(2)? as u32,
                heading: r.text(3)?,
                snippet: r.text(4)?,
                score: r.f64(5)?,
                cosine: None,
                id: r.i64(6)?,
            })
        })
    }

    /// Indexed chunks whose digest has no vector from `model`, at most `limit` (one per digest).
    pub fn chunks_needing_vectors(&self, model: &str, limit: usize) -> StoreResult<Vec<ChunkTodo>> {
        let rows = self.query_all(
            "SELECT c.digest, min(c.heading), min(c.text) FROM workspace_chunks c \
             WHERE NOT EXISTS (SELECT 1 FROM workspace_chunk_vectors v WHERE v.digest = c.digest AND v.model = ?1) \
             GROUP BY c.digest ORDER BY c.digest LIMIT ?2",
            &[&model, &(limit as i64)],
            |r| Ok((r.text(0)?, r.text(1)?, r.text(2)?)),
        )?;
        Ok(rows.into_iter().map(|(digest, heading, text)| ChunkTodo { digest, text: chunk_model_text(&heading, &text) }).collect())
    }

    /// How many indexed chunks have (`.0`) and lack (`.1`) a vector from `model`.
    pub fn chunk_vector_coverage(&self, model: &str) -> StoreResult<(u64, u64)> {
        let (with, all) = self
            .exec
            .row(
                "SELECT count(v.digest), count(*) FROM workspace_chunks c \
                 LEFT JOIN workspace_chunk_vectors v ON v.digest = c.digest AND v.model = ?1",
                &[&model],
                |r| Ok((r.i64(0)?, r.i64(1)?)),
            )?
            .unwrap_or((0, 0));
        Ok((with as u64, (all - with) as u64))
    }

    /// Every indexed chunk that has a vector from `model`, with it.
    pub fn chunk_vectors(&self, model: &str) -> StoreResult<Vec<ChunkVector>> {
        let id = if self.dialect() == Dialect::Sqlite { "c.rowid" } else { "c.id" };
        self.query_all(
            &format!(
                "SELECT {id}, c.path, v.scale, v.codes FROM workspace_chunks c \
                 JOIN workspace_chunk_vectors v ON v.digest = c.digest AND v.model = ?1"
            ),
            &[&model],
            |r| {
                Ok(ChunkVector {
                    id: r.i64(0)?,
                    path: r.text(1)?,
                    scale: r.f64(2)? as f32,
                    codes: r.blob(3)?.into_iter().map(|b| b as i8).collect(),
                })
            },
        )
    }

    /// The chunks with these ids (in no particular order), their snippet the start of the text.
    pub fn chunks_by_id(&self, ids: &[i64]) -> StoreResult<Vec<ChunkHit>> {
        let id = if self.dialect() == Dialect::Sqlite { "rowid" } else { "id" };
        let mut hits = Vec::with_capacity(ids.len());
        for chunk in ids {
            let hit = self.exec.row(
                &format!("SELECT path, start_line, end_line, heading, text FROM workspace_chunks WHERE {id} = ?1"),
                &[chunk],
                |r| {
                    Ok(ChunkHit {
                        path: r.text(0)?,
                        start_line: r.i64(1)? as u32,
                        end_line: r.i64(2)? as u32,
                        heading: r.text(3)?,
                        snippet: opening_words(&r.text(4)?, 24),
                        score: 0.0,
                        cosine: None,
                        id: *chunk,
                    })
                },
            )?;
            hits.extend(hit);
        }
        Ok(hits)
    }

    /// The reads of every workspace file and entry.
    pub fn workspace_reads(&self) -> StoreResult<Vec<WorkspaceRead>> {
        self.query_all("SELECT path, heading, count, last_at FROM workspace_reads ORDER BY path, heading", &[], |r| {
            Ok(WorkspaceRead { path: r.text(0)?, heading: r.text(1)?, count: r.i64(2)? as u64, last_at: ts(r.i64(3)?, self.path)? })
        })
    }
}

/// The first `words` words of a text, on one line, with `…` when cut.
fn opening_words(text: &str, words: usize) -> String {
    let mut out: Vec<&str> = text.split_whitespace().take(words + 1).collect();
    let cut = out.len() > words;
    out.truncate(words);
    let mut s = out.join(" ");
    if cut {
        s.push('…');
    }
    s
}

impl WriteTx<'_> {
    /// Stores the vectors of chunk digests from `model` (a digest already stored keeps its vector).
    pub fn put_chunk_vectors(&self, model: &str, vectors: &[(String, f32, Vec<i8>)]) -> StoreResult<()> {
        for (digest, scale, codes) in vectors {
            let blob: Vec<u8> = codes.iter().map(|c| *c as u8).collect();
            self.exec.execute(
                "INSERT INTO workspace_chunk_vectors (digest, model, scale, codes) VALUES (?1, ?2, ?3, ?4) \
                 ON CONFLICT (digest, model) DO NOTHING",
                &[digest, &model, &f64::from(*scale), &blob],
            )?;
        }
        Ok(())
    }

    /// Deletes the vectors whose chunk text is no longer indexed (an edit, a deleted file, a
    /// forget): a vector is derived from its text and goes with it. Returns how many.
    pub fn prune_chunk_vectors(&self) -> StoreResult<usize> {
        self.exec.execute("DELETE FROM workspace_chunk_vectors WHERE digest NOT IN (SELECT digest FROM workspace_chunks)", &[])
    }

    /// Counts one read of each `(path, heading)` at `at` (heading empty: the whole file).
    pub fn record_reads(&self, reads: &[(String, String)], at: Timestamp) -> StoreResult<()> {
        for (path, heading) in reads {
            self.exec.execute(
                "INSERT INTO workspace_reads (path, heading, count, last_at) VALUES (?1, ?2, 1, ?3) \
                 ON CONFLICT (path, heading) DO UPDATE SET count = workspace_reads.count + 1, \
                 last_at = CASE WHEN excluded.last_at > workspace_reads.last_at THEN excluded.last_at ELSE workspace_reads.last_at END",
                &[path, heading, &at.as_millisecond()],
            )?;
        }
        Ok(())
    }
}

impl WriteTx<'_> {
    /// Appends a message to the conversation log; returns it with its id.
    pub fn log_conversation(&self, new: &NewConversation) -> StoreResult<Conversation> {
        let id = self.exec.insert(
            "INSERT INTO conversations (at, channel, user_id, direction, priority, content) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            "id",
            &[&new.at.as_millisecond(), &new.channel, &new.user_id, &new.direction.as_str(), &i64::from(new.priority), &new.content],
        )?;
        Ok(Conversation {
            id,
            at: new.at,
            channel: new.channel.clone(),
            user_id: new.user_id.clone(),
            direction: new.direction,
            priority: new.priority,
            content: new.content.clone(),
        })
    }

    /// Appends a checkpoint (the caller checked `end_id` against the log and the boundary).
    pub fn add_checkpoint(&self, end_id: i64, summary: &str, at: Timestamp) -> StoreResult<Checkpoint> {
        let id = self.exec.insert(
            "INSERT INTO checkpoints (end_id, summary, at) VALUES (?1, ?2, ?3)",
            "id",
            &[&end_id, &summary, &at.as_millisecond()],
        )?;
        Ok(Checkpoint { id, end_id, summary: summary.to_string(), at })
    }

    /// Inserts or replaces a task.
    pub fn put_task(&self, task: &TaskRow) -> StoreResult<()> {
        self.exec.execute(
            "INSERT INTO scheduled_tasks (name, spec, builtin) VALUES (?1, ?2, ?3) \
             ON CONFLICT (name) DO UPDATE SET spec = excluded.spec, builtin = excluded.builtin",
            &[&task.name, &task.spec, &i64::from(task.builtin)],
        )?;
        Ok(())
    }

    /// Replaces a task's spec only if it is still `expected` (not removed or replaced since
    /// it was read); false otherwise.
    pub fn update_task_if(&self, name: &str, expected: &str, spec: &str) -> StoreResult<bool> {
        Ok(self.exec.execute("UPDATE scheduled_tasks SET spec = ?3 WHERE name = ?1 AND spec = ?2", &[&name, &expected, &spec])? > 0)
    }

    /// Removes a task; false if there was none by that name. Its run log stays.
    pub fn remove_task(&self, name: &str) -> StoreResult<bool> {
        Ok(self.exec.execute("DELETE FROM scheduled_tasks WHERE name = ?1", &[&name])? > 0)
    }

    /// Records a task run.
    pub fn log_task_run(&self, task: &str, at: Timestamp, ok: bool, detail: &str) -> StoreResult<()> {
        self.exec.execute(
            "INSERT INTO task_runs (task, at, ok, detail) VALUES (?1, ?2, ?3, ?4)",
            &[&task, &at.as_millisecond(), &i64::from(ok), &detail],
        )?;
        Ok(())
    }

    /// Queues an instruction for the agent, unless one from the same task is still
    /// undelivered (a check every 30 minutes must not pile up while the agent is away).
    /// Returns the new dispatch's id, `None` when it was not queued.
    pub fn add_dispatch(&self, task: &str, priority: u8, text: &str, at: Timestamp) -> StoreResult<Option<i64>> {
        let waiting = self.exec.int("SELECT count(*) FROM dispatches WHERE task = ?1 AND delivered_at IS NULL", &[&task])?;
        if waiting > 0 {
            return Ok(None);
        }
        self.exec
            .insert(
                "INSERT INTO dispatches (task, priority, text, created_at) VALUES (?1, ?2, ?3, ?4)",
                "id",
                &[&task, &i64::from(priority), &text, &at.as_millisecond()],
            )
            .map(Some)
    }

    /// Marks dispatches delivered.
    pub fn mark_delivered(&self, ids: &[i64], at: Timestamp) -> StoreResult<()> {
        for id in ids {
            self.exec
                .execute("UPDATE dispatches SET delivered_at = ?2 WHERE id = ?1 AND delivered_at IS NULL", &[id, &at.as_millisecond()])?;
        }
        Ok(())
    }

    /// Sets a `meta` value.
    pub fn put_meta(&self, key: &str, value: &str) -> StoreResult<()> {
        self.set_meta(key, value)
    }

    /// Replaces the indexed chunks of one workspace file.
    pub fn index_file(&self, file: &IndexedFile, chunks: &[NewChunk]) -> StoreResult<()> {
        self.unindex_file(&file.path)?;
        for c in chunks {
            self.exec.execute(
                "INSERT INTO workspace_chunks (path, start_line, end_line, heading, text, digest) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                &[&file.path, &i64::from(c.start_line), &i64::from(c.end_line), &c.heading, &c.text, &chunk_digest(&c.heading, &c.text)],
            )?;
        }
        self.exec.execute(
            "INSERT INTO workspace_files (path, mtime, size, chunks) VALUES (?1, ?2, ?3, ?4)",
            &[&file.path, &file.mtime_ms, &(file.size as i64), &(chunks.len() as i64)],
        )?;
        Ok(())
    }

    /// Drops a file (and its chunks) from the index.
    pub fn unindex_file(&self, path: &str) -> StoreResult<()> {
        self.exec.execute("DELETE FROM workspace_chunks WHERE path = ?1", &[&path])?;
        self.exec.execute("DELETE FROM workspace_files WHERE path = ?1", &[&path])?;
        Ok(())
    }
}
