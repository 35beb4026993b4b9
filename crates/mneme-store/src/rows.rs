//! Reading and writing records inside a transaction: [`ReadTx`] and [`WriteTx`].
//!
//! The write path of one operation (the service decides *what*, this module *how*):
//!
//! 1. `Store::write` opens `BEGIN IMMEDIATE` (waits up to `BUSY_TIMEOUT` for the lock).
//! 2. Rows change: `records` (+ its mirrors `record_tags`, `record_parents`), the FTS row
//!    in `records_fts`, `links`, and at least one `audit` entry per touched record.
//! 3. `COMMIT` appends the transaction to the WAL; it is durable once `COMMIT` returns.
//!    Any error before that rolls everything back.

use std::collections::BTreeMap;
use std::ops::Deref;
use std::path::{Path, PathBuf};

use jiff::Timestamp;
use mneme_core::{
    AuditAction, AuditEntry, DecayConfig, Lineage, LineageOp, MemoryRecord, MemoryType, NewRecord, Payload, RecordId, SalienceState, Scope,
    Sensitivity, Status,
};
use rusqlite::Connection;
use serde::Serialize;

use crate::error::{StoreError, StoreResult};
use crate::sql::{Dialect, Exec, Param, Row};

pub(crate) const RECORD_COLUMNS: &str = "seq, id, memory_type, sensitivity, scope, tags, summary, payload, confidence, \
     salience_base, reinforced_at, pinned, status, lineage_op, parent_ids, lineage_actor, lineage_rationale, \
     lineage_at, created_at, updated_at, event_time, pruned_at, forgotten_at";

/// Record and audit counts.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct StoreStats {
    pub by_type: BTreeMap<String, i64>,
    pub by_status: BTreeMap<String, i64>,
    /// Records neither tombstoned nor pruned, by type.
    pub live_by_type: BTreeMap<String, i64>,
    pub pruned: i64,
    pub pinned: i64,
    pub audit_entries: i64,
    pub links: i64,
}

/// A typed relation between two records, e.g. `contests`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Link {
    pub from: RecordId,
    pub to: RecordId,
    pub kind: String,
    pub at: Timestamp,
    pub note: String,
}

/// Read access inside a transaction, on either engine.
pub struct ReadTx<'a> {
    pub(crate) exec: &'a (dyn Exec + 'a),
    pub(crate) path: &'a Path,
    pub(crate) decay: &'a DecayConfig,
}

impl std::fmt::Debug for ReadTx<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReadTx").field("path", &self.path).field("dialect", &self.exec.dialect()).finish_non_exhaustive()
    }
}

/// Write access inside a `BEGIN IMMEDIATE` transaction. Derefs to [`ReadTx`].
pub struct WriteTx<'a> {
    read: ReadTx<'a>,
    /// Index rows whose conversation context changed; rewritten once by `flush_context`.
    dirty: std::cell::RefCell<std::collections::BTreeSet<i64>>,
}

impl<'a> Deref for WriteTx<'a> {
    type Target = ReadTx<'a>;
    fn deref(&self) -> &ReadTx<'a> {
        &self.read
    }
}

impl std::fmt::Debug for WriteTx<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WriteTx").field("read", &self.read).finish_non_exhaustive()
    }
}

impl<'a> ReadTx<'a> {
    pub(crate) fn new(exec: &'a (dyn Exec + 'a), path: &'a Path, decay: &'a DecayConfig) -> Self {
        ReadTx { exec, path, decay }
    }

    /// The SQLite connection, for SQLite's own paths (FTS5 statements, SQLite's dump
    /// export): on PostgreSQL they fail with `Unsupported`.
    pub(crate) fn lite(&self) -> StoreResult<&'a Connection> {
        // The executor outlives 'a's borrow of it; its connection is the store's.
        self.exec.sqlite().ok_or_else(|| crate::sql::not_on_postgres("this operation"))
    }

    pub(crate) fn dialect(&self) -> Dialect {
        self.exec.dialect()
    }

    pub fn decay(&self) -> &DecayConfig {
        self.decay
    }

    /// The record with this id, tombstones included.
    pub fn get(&self, id: &RecordId) -> StoreResult<Option<MemoryRecord>> {
        let sql = format!("SELECT {RECORD_COLUMNS} FROM records WHERE id = ?1");
        let raw = self.exec.row(&sql, &[&id.as_str()], RawRecord::from_row)?;
        raw.map(|r| r.into_record(self.path)).transpose()
    }

    /// Like [`ReadTx::get`] but a missing record is an error.
    pub fn require(&self, id: &RecordId) -> StoreResult<MemoryRecord> {
        self.get(id)?.ok_or_else(|| StoreError::RecordNotFound(id.clone()))
    }

    pub(crate) fn get_by_seq(&self, seq: i64) -> StoreResult<MemoryRecord> {
        let sql = format!("SELECT {RECORD_COLUMNS} FROM records WHERE seq = ?1");
        let raw = self.exec.row(&sql, &[&seq], RawRecord::from_row)?;
        raw.ok_or_else(|| decode(self.path, format!("no record with sequence number {seq}")))?.into_record(self.path)
    }

    /// Loads records by their internal sequence numbers, in the given order.
    pub fn get_many(&self, seqs: &[i64]) -> StoreResult<Vec<MemoryRecord>> {
        seqs.iter().map(|&s| self.get_by_seq(s)).collect()
    }

    /// Runs a query (on either engine) and collects every row mapped by `map`.
    pub(crate) fn query_all<T>(
        &self,
        sql: &str,
        params: &[&dyn Param],
        map: impl FnMut(&dyn Row) -> StoreResult<T>,
    ) -> StoreResult<Vec<T>> {
        self.exec.rows(sql, params, map)
    }

    pub(crate) fn seq_of(&self, id: &RecordId) -> StoreResult<i64> {
        self.exec
            .row("SELECT seq FROM records WHERE id = ?1", &[&id.as_str()], |r| r.i64(0))?
            .ok_or_else(|| StoreError::RecordNotFound(id.clone()))
    }

    /// The sequence numbers of `ids` (those that exist), in no order.
    pub fn seqs_of(&self, ids: &[&RecordId]) -> StoreResult<std::collections::HashMap<RecordId, i64>> {
        let mut out = std::collections::HashMap::new();
        for id in ids {
            if let Some(seq) = self.exec.row("SELECT seq FROM records WHERE id = ?1", &[&id.as_str()], |r| r.i64(0))? {
                out.insert((*id).clone(), seq);
            }
        }
        Ok(out)
    }

    /// Records that name `id` among their lineage parents (its successors, forks, merges).
    pub fn children(&self, id: &RecordId) -> StoreResult<Vec<MemoryRecord>> {
        let seq = self.seq_of(id)?;
        let seqs =
            self.query_all("SELECT child_seq FROM record_parents WHERE parent_seq = ?1 ORDER BY child_seq", &[&seq], |r| r.i64(0))?;
        self.get_many(&seqs)
    }

    /// The record's audit log, oldest first.
    pub fn audit(&self, id: &RecordId) -> StoreResult<Vec<AuditEntry>> {
        let seq = self.seq_of(id)?;
        let rows = self.query_all(
            "SELECT seq, at, actor, action, rationale, details FROM audit WHERE record_seq = ?1 ORDER BY seq",
            &[&seq],
            |r| Ok((r.i64(0)?, r.i64(1)?, r.text(2)?, r.text(3)?, r.text(4)?, r.text(5)?)),
        )?;
        rows.into_iter()
            .map(|(aseq, at, actor, action, rationale, details)| {
                Ok(AuditEntry {
                    seq: aseq,
                    record_id: id.clone(),
                    at: ts(at, self.path)?,
                    actor,
                    action: action.parse().map_err(|e| decode(self.path, e))?,
                    rationale,
                    details: serde_json::from_str(&details).map_err(|e| decode(self.path, e))?,
                })
            })
            .collect()
    }

    /// Links from or to the record.
    pub fn links(&self, id: &RecordId) -> StoreResult<Vec<Link>> {
        let seq = self.seq_of(id)?;
        let rows = self.query_all(
            "SELECT f.id, t.id, l.kind, l.at, l.note FROM links l \
             JOIN records f ON f.seq = l.from_seq JOIN records t ON t.seq = l.to_seq \
             WHERE l.from_seq = ?1 OR l.to_seq = ?1 ORDER BY l.at",
            &[&seq],
            |r| Ok((r.text(0)?, r.text(1)?, r.text(2)?, r.i64(3)?, r.text(4)?)),
        )?;
        rows.into_iter()
            .map(|(from, to, kind, at, note)| {
                Ok(Link {
                    from: RecordId::parse(&from).map_err(|e| decode(self.path, e))?,
                    to: RecordId::parse(&to).map_err(|e| decode(self.path, e))?,
                    kind,
                    at: ts(at, self.path)?,
                    note,
                })
            })
            .collect()
    }

    /// Counts for `metrics`.
    pub fn stats(&self) -> StoreResult<StoreStats> {
        // One pass over the records for every per-record count (five passes took five
        // times as long: 150 ms at 100k records).
        let rows = self.query_all(
            "SELECT memory_type, status, pruned_at IS NOT NULL, pinned, count(*) FROM records GROUP BY 1, 2, 3, 4",
            &[],
            |r| Ok((r.text(0)?, r.text(1)?, r.flag(2)?, r.flag(3)?, r.i64(4)?)),
        )?;
        let mut stats = StoreStats::default();
        for (memory_type, status, pruned, pinned, n) in rows {
            *stats.by_type.entry(memory_type.clone()).or_default() += n;
            *stats.by_status.entry(status.clone()).or_default() += n;
            if !pruned && matches!(status.as_str(), "active" | "contested") {
                *stats.live_by_type.entry(memory_type).or_default() += n;
            }
            stats.pruned += if pruned { n } else { 0 };
            stats.pinned += if pinned { n } else { 0 };
        }
        let one = |sql: &str| self.exec.int(sql, &[]);
        stats.audit_entries = one("SELECT count(*) FROM audit")?;
        stats.links = one("SELECT count(*) FROM links")?;
        Ok(stats)
    }

    /// Live, unpinned, unpruned records of `memory_type` whose rank anchor is below `anchor`
    /// (candidates for pruning; the caller checks the exact salience).
    pub fn below_anchor(&self, memory_type: MemoryType, anchor: f64) -> StoreResult<Vec<MemoryRecord>> {
        let seqs = self.query_all(
            "SELECT seq FROM records WHERE memory_type = ?1 AND rank_anchor < ?2 AND pinned = 0 \
             AND pruned_at IS NULL AND status IN ('active', 'contested') ORDER BY seq",
            &[&memory_type.as_str(), &anchor],
            |r| r.i64(0),
        )?;
        self.get_many(&seqs)
    }
}

impl<'a> WriteTx<'a> {
    pub(crate) fn new(exec: &'a (dyn Exec + 'a), path: &'a Path, decay: &'a DecayConfig) -> Self {
        WriteTx { read: ReadTx::new(exec, path, decay), dirty: Default::default() }
    }

    /// Rewrites the index rows whose conversation context changed in this transaction
    /// (`Store::write` calls it before committing).
    pub(crate) fn flush_context(&self) -> StoreResult<()> {
        let dirty = std::mem::take(&mut *self.dirty.borrow_mut());
        crate::context::write_rows(self.exec, &dirty, true)
    }

    /// Marks records' full-text rows for rewriting at `flush_context` (the dump's import).
    pub(crate) fn mark_for_reindex(&self, seqs: impl IntoIterator<Item = i64>) {
        self.dirty.borrow_mut().extend(seqs);
    }

    /// Marks a record's thread neighbours (their context holds its text) for rewriting.
    fn neighbours_changed(&self, seq: i64) -> StoreResult<()> {
        let (before, after) = crate::context::neighbours(self.exec, seq, crate::context::WINDOW)?;
        self.dirty.borrow_mut().extend(before.into_iter().chain(after));
        Ok(())
    }

    /// Inserts a new record with its lineage, tags, index entry and a creation audit entry.
    pub fn insert(&self, new: &NewRecord, id: RecordId, lineage: Lineage, now: Timestamp) -> StoreResult<MemoryRecord> {
        self.insert_row(NewRow::new(new, id, lineage, now, self.decay, self.path, false)?)
    }

    fn insert_row(&self, row: NewRow) -> StoreResult<MemoryRecord> {
        let now = row.record.created_at;
        let seq = self.exec.insert(
            "INSERT INTO records (id, memory_type, payload_kind, sensitivity, scope, tags, summary, payload, \
             confidence, salience_base, reinforced_at, pinned, rank_anchor, status, lineage_op, parent_ids, \
             lineage_actor, lineage_rationale, lineage_at, created_at, updated_at, event_time, sort_time, pruned_at) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, 'active', ?14, ?15, ?16, ?17, ?18, ?19, ?19, ?20, ?21, NULL)",
            "seq",
            &[
                &row.record.id.as_str(),
                &row.record.memory_type.as_str(),
                &row.payload_kind,
                &row.record.sensitivity.level(),
                &row.record.scope.as_str(),
                &row.tags_json,
                &row.stored_summary,
                &row.payload_json,
                &row.record.confidence,
                &row.record.salience.base,
                &row.now_ms,
                &row.pinned,
                &row.anchor,
                &row.record.lineage.operation.as_str(),
                &row.parents_json,
                &row.record.lineage.actor,
                &row.record.lineage.rationale,
                &row.record.lineage.timestamp.as_millisecond(),
                &row.now_ms,
                &row.event_time,
                &row.sort_time,
            ],
        )?;
        for tag in &row.record.tags {
            self.exec.execute("INSERT INTO record_tags (tag, record_seq) VALUES (?1, ?2)", &[tag, &seq])?;
        }
        for parent in &row.record.lineage.parent_ids {
            self.exec.execute("INSERT INTO record_parents (parent_seq, child_seq) VALUES (?1, ?2)", &[&self.seq_of(parent)?, &seq])?;
        }
        match &row.thread {
            // In a thread: this row and its neighbours' are written at flush, once each.
            Some(thread) => {
                let touched = crate::context::join_thread(self.exec, seq, Some(thread))?;
                let mut dirty = self.dirty.borrow_mut();
                dirty.insert(seq);
                dirty.extend(touched);
            }
            None => {
                crate::context::insert_fts_row(self.exec, seq, &row.fts_text, "", &row.date)?;
            }
        }
        let (actor, rationale) = (&row.record.lineage.actor, &row.record.lineage.rationale);
        self.append_audit_seq(seq, now, actor, row.action, rationale, &row.details)?;
        Ok(row.record)
    }

    /// Inserts new original records (no lineage parents), as [`WriteTx::insert`] would one
    /// by one, in order: [`WriteTx::insert_rows`] of [`RowMaker::originals`].
    pub fn insert_originals(&self, items: &[(&NewRecord, RecordId, Lineage, Timestamp)]) -> StoreResult<Vec<MemoryRecord>> {
        let maker = RowMaker { decay: *self.decay, path: self.path.to_path_buf(), postgres: self.dialect() == Dialect::Postgres };
        self.insert_rows(maker.originals(items)?)
    }

    /// Inserts records a [`RowMaker`] prepared, in order. On PostgreSQL each table gets one
    /// statement for the whole batch (`unnest` of column arrays) instead of one round trip
    /// per row; SQLite, in process, inserts them one by one (as does a revision, which has
    /// parents).
    pub fn insert_rows(&self, rows: NewRows) -> StoreResult<Vec<MemoryRecord>> {
        let rows = rows.0;
        if self.dialect() == Dialect::Sqlite || rows.len() < 2 || rows.iter().any(|r| !r.record.lineage.parent_ids.is_empty()) {
            return rows.into_iter().map(|row| self.insert_row(row)).collect();
        }
        let touched = crate::batch::insert_originals(self.exec, &rows, self.path)?;
        self.dirty.borrow_mut().extend(touched);
        Ok(rows.into_iter().map(|r| r.record).collect())
    }

    pub fn set_status(&self, id: &RecordId, status: Status, now: Timestamp) -> StoreResult<()> {
        self.update(
            id,
            "UPDATE records SET status = ?2, updated_at = ?3 WHERE id = ?1",
            &[&id.as_str(), &status.as_str(), &now.as_millisecond()],
        )?;
        // A record that stops being live leaves its neighbours' context.
        if !matches!(status, Status::Active | Status::Contested) {
            self.neighbours_changed(self.seq_of(id)?)?;
        }
        Ok(())
    }

    /// Adds `delta` (negative to penalize) to the record's current salience, re-anchors it at
    /// `now` and stores it with its rank anchor. Returns (salience before, salience after).
    pub fn adjust_salience(&self, record: &MemoryRecord, delta: f64, now: Timestamp) -> StoreResult<(f64, f64)> {
        let before = self.decay.salience_at(record.memory_type, &record.salience, now);
        let state = self.decay.adjusted(record.memory_type, &record.salience, delta, now);
        let anchor = self.decay.rank_anchor(record.memory_type, &state);
        self.update(
            &record.id,
            "UPDATE records SET salience_base = ?2, reinforced_at = ?3, pinned = ?4, rank_anchor = ?5, updated_at = ?6 WHERE id = ?1",
            &[
                &record.id.as_str(),
                &state.base,
                &state.reinforced_at.as_millisecond(),
                &i64::from(state.pinned),
                &anchor,
                &now.as_millisecond(),
            ],
        )?;
        Ok((before, state.base))
    }

    /// Replaces the payload in place. Only for statistics (competence performance), never
    /// for content: content changes go through supersede so they keep lineage.
    pub fn set_payload_stats(&self, id: &RecordId, payload: &Payload, now: Timestamp) -> StoreResult<()> {
        let json = serde_json::to_string(payload).map_err(|e| decode(self.path, e))?;
        self.update(id, "UPDATE records SET payload = ?2, updated_at = ?3 WHERE id = ?1", &[&id.as_str(), &json, &now.as_millisecond()])?;
        self.reindex(self.seq_of(id)?)
    }

    /// Drops the payload of a decayed record and its payload text from the index. The row,
    /// summary, lineage, links and audit stay.
    pub fn prune(&self, id: &RecordId, now: Timestamp) -> StoreResult<()> {
        // With the payload gone the summary is the record's only text: store it and index it
        // in full. A summary that is the whole payload (the default one of a short message,
        // "dana: my address is …") would keep everything pruning drops: it becomes a
        // content-free one instead.
        let record = self.require(id)?;
        // (A long message's default summary is a cut one-line excerpt, kept as before.)
        let whole = record.payload.as_ref().is_some_and(|p| p.default_summary() == record.summary && !record.summary.ends_with('…'));
        let summary = if whole { format!("pruned {} record", record.memory_type) } else { record.summary.clone() };
        self.update(
            id,
            "UPDATE records SET summary = ?3, payload = NULL, pruned_at = ?2, updated_at = ?2 WHERE id = ?1",
            &[&id.as_str(), &now.as_millisecond(), &summary],
        )?;
        self.reindex(self.seq_of(id)?)
    }

    /// Erases a record's content: the payload, the summary (a fixed marker instead), the
    /// tags, its full-text row (and its text in its neighbours' context rows, rewritten at
    /// flush), its vectors, and the text of its audit entries and lineage rationale. The
    /// row stays as a tombstone (retracted, pruned, `forgotten_at`, `content_hash`) so
    /// lineage holds. Returns the texts that were erased, for the caller to scrub from the
    /// conversation log and elsewhere. The caller appends the audit entry of the erasure.
    pub fn forget(&self, id: &RecordId, now: Timestamp) -> StoreResult<(i64, Vec<String>)> {
        let record = self.require(id)?;
        let seq = self.seq_of(id)?;
        let mut texts = Vec::new();
        match &record.payload {
            // A fact's value is what rationales quote ("changed: \"Lisbon\" → …"); its
            // subject and predicate name other things too ("dana", "lives in").
            Some(Payload::Semantic(f)) => texts.push(f.object.clone()),
            // A message as a whole: one of its lines ("Thanks!") is in many other messages.
            // Never its sender: their name is in every message they sent.
            Some(Payload::Event(e)) => texts.push(e.text.trim().to_string()),
            Some(p) => texts.extend(p.own_text().lines().map(str::to_string).filter(|t| t.trim().len() >= 4)),
            None => {}
        }
        if record.forgotten_at.is_none() && !record.summary.trim().is_empty() {
            texts.push(record.summary.clone());
        }
        use sha2::Digest as _;
        let mut hash = sha2::Sha256::new();
        hash.update(record.payload.as_ref().map(|p| serde_json::to_string(p).unwrap_or_default()).unwrap_or_default());
        hash.update(record.summary.as_bytes());
        let digest: String = hash.finalize().iter().map(|b| format!("{b:02x}")).collect();
        let marker = format!("forgotten {} record", record.memory_type);
        // The neighbours' context held this text: mark them before the record stops being live.
        self.neighbours_changed(seq)?;
        self.update(
            id,
            "UPDATE records SET payload = NULL, summary = ?3, tags = '[]', status = 'retracted', \
             pruned_at = coalesce(pruned_at, ?2), forgotten_at = ?2, updated_at = ?2, \
             content_hash = coalesce(content_hash, ?4), lineage_rationale = '[forgotten]' WHERE id = ?1",
            &[&id.as_str(), &now.as_millisecond(), &marker, &digest],
        )?;
        let exec = |sql: &str| self.exec.execute(sql, &[&seq]);
        exec("DELETE FROM record_tags WHERE record_seq = ?1")?;
        exec("DELETE FROM record_vectors WHERE record_seq = ?1")?;
        exec(crate::context::fts_delete(self.exec))?;
        exec("UPDATE audit SET rationale = '[forgotten]', details = '{}' WHERE record_seq = ?1")?;
        Ok((seq, texts))
    }

    /// Replaces the text of audit entries and lineage rationales that quote `text` (a
    /// revision's rationale names the old and new values) with `[forgotten]`.
    pub fn redact_mentions(&self, text: &str) -> StoreResult<usize> {
        if text.trim().len() < 3 {
            return Ok(0);
        }
        let like = format!("%{}%", text.replace('\\', "\\\\").replace('%', "\\%").replace('_', "\\_"));
        // SQLite's LIKE ignores ASCII case; PostgreSQL's ILIKE does.
        let (a, b) = match self.dialect() {
            Dialect::Sqlite => (
                "UPDATE audit SET rationale = '[forgotten]', details = '{}' \
                 WHERE (rationale LIKE ?1 ESCAPE '\\' OR details LIKE ?1 ESCAPE '\\') AND rationale <> '[forgotten]' AND action <> 'forget'",
                "UPDATE records SET lineage_rationale = '[forgotten]' WHERE lineage_rationale LIKE ?1 ESCAPE '\\'",
            ),
            Dialect::Postgres => (
                "UPDATE audit SET rationale = '[forgotten]', details = '{}' \
                 WHERE (rationale ILIKE ?1 ESCAPE '\\' OR details ILIKE ?1 ESCAPE '\\') AND rationale <> '[forgotten]' AND action <> 'forget'",
                "UPDATE records SET lineage_rationale = '[forgotten]' WHERE lineage_rationale ILIKE ?1 ESCAPE '\\'",
            ),
        };
        Ok(self.exec.execute(a, &[&like])? + self.exec.execute(b, &[&like])?)
    }

    /// Replaces every conversation-log entry that contains `text` with `[forgotten]`
    /// (who, when, channel and direction stay). Returns how many.
    pub fn redact_conversations(&self, text: &str) -> StoreResult<usize> {
        if text.trim().len() < 3 {
            return Ok(0);
        }
        let sql = match self.dialect() {
            Dialect::Sqlite => {
                "UPDATE conversations SET content = '[forgotten]' WHERE instr(lower(content), lower(?1)) > 0 AND content <> '[forgotten]'"
            }
            Dialect::Postgres => {
                "UPDATE conversations SET content = '[forgotten]' WHERE strpos(lower(content), lower(?1)) > 0 AND content <> '[forgotten]'"
            }
        };
        self.exec.execute(sql, &[&text])
    }

    /// Replaces every conversation-log entry of `user_id` (case-insensitively) with
    /// `[forgotten]`. Returns how many.
    pub fn redact_conversations_of(&self, user_id: &str) -> StoreResult<usize> {
        self.exec.execute(
            "UPDATE conversations SET content = '[forgotten]' WHERE lower(user_id) = lower(?1) AND content <> '[forgotten]'",
            &[&user_id],
        )
    }

    /// Drops the workspace search chunks that contain `text` and returns their files (the
    /// files themselves are the agent's: the caller reports them).
    pub fn drop_chunks_with(&self, text: &str) -> StoreResult<Vec<String>> {
        if text.trim().len() < 3 {
            return Ok(Vec::new());
        }
        let contains = match self.dialect() {
            Dialect::Sqlite => "instr(lower(text), lower(?1)) > 0",
            Dialect::Postgres => "strpos(lower(text), lower(?1)) > 0",
        };
        let paths = self.query_all(&format!("SELECT DISTINCT path FROM workspace_chunks WHERE {contains}"), &[&text], |r| r.text(0))?;
        self.exec.execute(&format!("DELETE FROM workspace_chunks WHERE {contains}"), &[&text])?;
        self.prune_chunk_vectors()?;
        Ok(paths)
    }

    /// Marks a record's full-text row (its text changed) and its neighbours' (whose context
    /// held the old text) for rewriting at `flush_context`.
    fn reindex(&self, seq: i64) -> StoreResult<()> {
        self.neighbours_changed(seq)?;
        self.dirty.borrow_mut().insert(seq);
        Ok(())
    }

    pub fn add_link(&self, from: &RecordId, to: &RecordId, kind: &str, note: &str, now: Timestamp) -> StoreResult<()> {
        let (from_seq, to_seq) = (self.seq_of(from)?, self.seq_of(to)?);
        self.exec.execute(
            "INSERT INTO links (from_seq, to_seq, kind, at, note) VALUES (?1, ?2, ?3, ?4, ?5) \
             ON CONFLICT (from_seq, to_seq, kind) DO UPDATE SET at = excluded.at, note = excluded.note",
            &[&from_seq, &to_seq, &kind, &now.as_millisecond(), &note],
        )?;
        Ok(())
    }

    pub fn append_audit(
        &self,
        id: &RecordId,
        now: Timestamp,
        actor: &str,
        action: AuditAction,
        rationale: &str,
        details: &serde_json::Value,
    ) -> StoreResult<()> {
        self.append_audit_seq(self.seq_of(id)?, now, actor, action, rationale, details)
    }

    fn append_audit_seq(
        &self,
        seq: i64,
        now: Timestamp,
        actor: &str,
        action: AuditAction,
        rationale: &str,
        details: &serde_json::Value,
    ) -> StoreResult<()> {
        self.exec.execute(
            "INSERT INTO audit (record_seq, at, actor, action, rationale, details) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            &[&seq, &now.as_millisecond(), &actor, &action.as_str(), &rationale, &details.to_string()],
        )?;
        Ok(())
    }

    pub(crate) fn set_meta(&self, key: &str, value: &str) -> StoreResult<()> {
        self.exec.execute(
            "INSERT INTO meta (key, value) VALUES (?1, ?2) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            &[&key, &value],
        )?;
        Ok(())
    }

    pub(crate) fn recompute_rank_anchors(&self) -> StoreResult<()> {
        let rows = self.query_all("SELECT seq, memory_type, salience_base, reinforced_at, pinned FROM records", &[], |r| {
            Ok((r.i64(0)?, r.text(1)?, r.f64(2)?, r.i64(3)?, r.flag(4)?))
        })?;
        for (seq, memory_type, base, reinforced_at, pinned) in rows {
            let memory_type: MemoryType = memory_type.parse().map_err(|e| decode(self.path, e))?;
            let state = SalienceState { base, reinforced_at: ts(reinforced_at, self.path)?, pinned };
            self.exec
                .execute("UPDATE records SET rank_anchor = ?2 WHERE seq = ?1", &[&seq, &self.decay.rank_anchor(memory_type, &state)])?;
        }
        Ok(())
    }

    fn update(&self, id: &RecordId, sql: &str, params: &[&dyn Param]) -> StoreResult<()> {
        let changed = self.exec.execute(sql, params)?;
        if changed == 0 {
            return Err(StoreError::RecordNotFound(id.clone()));
        }
        Ok(())
    }
}

/// Turns new records into rows without the database: the part of an insert that is the
/// caller's own work (serialising payloads, the index text and, on PostgreSQL, its
/// lexemes). A bulk ingest prepares the next batch with it on another thread while the
/// database writes the current one ([`crate::Store::row_maker`], [`WriteTx::insert_rows`]).
#[derive(Clone, Debug)]
pub struct RowMaker {
    pub(crate) decay: DecayConfig,
    pub(crate) path: PathBuf,
    pub(crate) postgres: bool,
}

/// New records prepared by a [`RowMaker`], for [`WriteTx::insert_rows`].
pub struct NewRows(Vec<NewRow>);

impl std::fmt::Debug for NewRows {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NewRows").field("records", &self.0.len()).finish()
    }
}

impl NewRows {
    /// The records' ids, in order.
    pub fn ids(&self) -> impl Iterator<Item = &RecordId> {
        self.0.iter().map(|r| &r.record.id)
    }
}

impl RowMaker {
    /// The rows of new original records (each with its id, lineage and time).
    pub fn originals(&self, items: &[(&NewRecord, RecordId, Lineage, Timestamp)]) -> StoreResult<NewRows> {
        items
            .iter()
            .map(|(new, id, lineage, now)| NewRow::new(new, id.clone(), lineage.clone(), *now, &self.decay, &self.path, self.postgres))
            .collect::<StoreResult<Vec<_>>>()
            .map(NewRows)
    }
}

/// A new record as its rows will hold it, computed once for the one-row and the batch
/// insert.
pub(crate) struct NewRow {
    pub record: MemoryRecord,
    pub payload_kind: &'static str,
    /// NULL when the summary is derived from the payload (it is not stored twice).
    pub stored_summary: Option<String>,
    pub payload_json: String,
    pub tags_json: String,
    pub parents_json: String,
    pub now_ms: i64,
    pub pinned: i64,
    pub anchor: f64,
    pub event_time: Option<i64>,
    pub sort_time: i64,
    /// The conversation thread it joins (`context.rs`), if any.
    pub thread: Option<String>,
    /// Its own full-text and date words.
    pub fts_text: String,
    pub date: String,
    /// On PostgreSQL, the `tsvector` (binary form) of a threadless record's full-text row
    /// (a threaded one's is written at flush, with its context).
    pub pg_tsvector: Option<crate::pg::PgTsVector>,
    pub action: AuditAction,
    pub details: serde_json::Value,
}

impl NewRow {
    /// `lexemes`: compute a threadless record's PostgreSQL lexemes now (a batch for
    /// PostgreSQL; the one-row path computes them as it writes).
    fn new(
        new: &NewRecord,
        id: RecordId,
        lineage: Lineage,
        now: Timestamp,
        decay: &DecayConfig,
        path: &Path,
        lexemes: bool,
    ) -> StoreResult<NewRow> {
        let memory_type = new.memory_type();
        // An episode's salience counts from when it happened (an imported conversation from
        // last year is not fresh news); never from the future. Facts and the rest count from
        // now: a fact true since 2019 is not less important for having been true long.
        let anchor = match (memory_type, new.event_time) {
            (MemoryType::Episodic, Some(at)) if at < now => at,
            _ => now,
        };
        let salience = SalienceState { base: new.salience, reinforced_at: anchor, pinned: new.pinned };
        let record = MemoryRecord {
            id,
            memory_type,
            sensitivity: new.sensitivity,
            scope: new.scope.clone(),
            tags: dedup(&new.tags),
            summary: new.effective_summary(),
            payload: Some(new.payload.clone()),
            confidence: new.confidence,
            salience,
            status: Status::Active,
            lineage,
            created_at: now,
            updated_at: now,
            event_time: new.event_time,
            pruned_at: None,
            forgotten_at: None,
        };
        let event_time = record.event_time.map(|t| t.as_millisecond());
        let action = match record.lineage.operation {
            LineageOp::Original => AuditAction::Create,
            LineageOp::Supersede => AuditAction::Supersede,
            LineageOp::Fork => AuditAction::Fork,
            LineageOp::Merge => AuditAction::Merge,
        };
        // The record row holds everything about an original; a revision notes its parents.
        let details = if record.lineage.parent_ids.is_empty() {
            serde_json::Value::Object(Default::default())
        } else {
            serde_json::json!({ "parents": record.lineage.parent_ids })
        };
        let thread = crate::context::thread_key(record.scope.as_str(), record.payload.as_ref());
        let fts_text = fts_text(new.summary.as_deref(), record.payload.as_ref());
        let date = crate::context::date_words(event_time);
        let pg_tsvector = (lexemes && thread.is_none()).then(|| crate::context::pg_tsvector(&fts_text, "", &date));
        Ok(NewRow {
            payload_kind: new.payload.kind(),
            stored_summary: new.summary.clone(),
            payload_json: to_json(&new.payload, path)?,
            tags_json: to_json(&record.tags, path)?,
            parents_json: to_json(&record.lineage.parent_ids, path)?,
            now_ms: now.as_millisecond(),
            pinned: i64::from(salience.pinned),
            anchor: decay.rank_anchor(memory_type, &salience),
            event_time,
            sort_time: record.event_time.unwrap_or(now).as_millisecond(),
            thread,
            pg_tsvector,
            fts_text,
            date,
            action,
            details,
            record,
        })
    }
}

fn to_json<T: Serialize + ?Sized>(value: &T, path: &Path) -> StoreResult<String> {
    serde_json::to_string(value).map_err(|e| decode(path, e))
}

/// The text indexed for a record: its stored summary (absent when derived from the
/// payload, whose words would otherwise count twice in BM25) and the payload's text.
pub(crate) fn fts_text(stored_summary: Option<&str>, payload: Option<&Payload>) -> String {
    let body = payload.map(Payload::search_text).unwrap_or_default();
    match stored_summary {
        Some(summary) if !body.is_empty() => format!("{summary}\n{body}"),
        Some(summary) => summary.to_string(),
        None => body,
    }
}

fn dedup(tags: &[String]) -> Vec<String> {
    let mut out: Vec<String> = Vec::with_capacity(tags.len());
    for t in tags {
        if !out.contains(t) {
            out.push(t.clone());
        }
    }
    out
}

pub(crate) fn ts(ms: i64, path: &Path) -> StoreResult<Timestamp> {
    Timestamp::from_millisecond(ms).map_err(|e| decode(path, e))
}

pub(crate) fn decode(path: &Path, e: impl std::fmt::Display) -> StoreError {
    StoreError::Decode { path: path.to_path_buf(), detail: e.to_string() }
}

/// A `records` row as the engine returns it, before validation.
struct RawRecord {
    id: String,
    memory_type: String,
    sensitivity: i64,
    scope: String,
    tags: String,
    summary: Option<String>,
    payload: Option<String>,
    confidence: f64,
    salience_base: f64,
    reinforced_at: i64,
    pinned: bool,
    status: String,
    lineage_op: String,
    parent_ids: String,
    lineage_actor: String,
    lineage_rationale: String,
    lineage_at: i64,
    created_at: i64,
    updated_at: i64,
    event_time: Option<i64>,
    pruned_at: Option<i64>,
    forgotten_at: Option<i64>,
}

impl RawRecord {
    fn from_row(r: &dyn Row) -> StoreResult<Self> {
        Ok(RawRecord {
            id: r.text(1)?,
            memory_type: r.text(2)?,
            sensitivity: r.i64(3)?,
            scope: r.text(4)?,
            tags: r.text(5)?,
            summary: r.opt_text(6)?,
            payload: r.opt_text(7)?,
            confidence: r.f64(8)?,
            salience_base: r.f64(9)?,
            reinforced_at: r.i64(10)?,
            pinned: r.flag(11)?,
            status: r.text(12)?,
            lineage_op: r.text(13)?,
            parent_ids: r.text(14)?,
            lineage_actor: r.text(15)?,
            lineage_rationale: r.text(16)?,
            lineage_at: r.i64(17)?,
            created_at: r.i64(18)?,
            updated_at: r.i64(19)?,
            event_time: r.opt_i64(20)?,
            pruned_at: r.opt_i64(21)?,
            forgotten_at: r.opt_i64(22)?,
        })
    }

    fn into_record(self, path: &Path) -> StoreResult<MemoryRecord> {
        let d = |e: mneme_core::CoreError| decode(path, e);
        let payload: Option<Payload> = self.payload.map(|p| serde_json::from_str(&p)).transpose().map_err(|e| decode(path, e))?;
        Ok(MemoryRecord {
            id: RecordId::parse(&self.id).map_err(d)?,
            memory_type: self.memory_type.parse().map_err(d)?,
            sensitivity: Sensitivity::from_level(self.sensitivity)
                .ok_or_else(|| decode(path, format!("sensitivity level {}", self.sensitivity)))?,
            scope: Scope::parse(&self.scope).map_err(d)?,
            tags: serde_json::from_str(&self.tags).map_err(|e| decode(path, e))?,
            summary: match (self.summary, &payload) {
                (Some(summary), _) => summary,
                (None, Some(p)) => p.default_summary(),
                (None, None) => return Err(decode(path, "a record with neither summary nor payload")),
            },
            payload,
            confidence: self.confidence,
            salience: SalienceState { base: self.salience_base, reinforced_at: ts(self.reinforced_at, path)?, pinned: self.pinned },
            status: self.status.parse().map_err(d)?,
            lineage: Lineage {
                parent_ids: serde_json::from_str(&self.parent_ids).map_err(|e| decode(path, e))?,
                operation: self.lineage_op.parse().map_err(d)?,
                actor: self.lineage_actor,
                rationale: self.lineage_rationale,
                timestamp: ts(self.lineage_at, path)?,
            },
            created_at: ts(self.created_at, path)?,
            updated_at: ts(self.updated_at, path)?,
            event_time: self.event_time.map(|t| ts(t, path)).transpose()?,
            pruned_at: self.pruned_at.map(|t| ts(t, path)).transpose()?,
            forgotten_at: self.forgotten_at.map(|t| ts(t, path)).transpose()?,
        })
    }
}
