//! Versioned migrations. `PRAGMA user_version` holds the schema version, the
//! `schema_migrations` table records when each step ran, and `PRAGMA application_id`
//! marks the file as mneme's.
//!
//! Invariant: a migration runs in one transaction together with its version bump, so a
//! crash mid-migration leaves the previous version intact.

use rusqlite::Transaction;

use crate::rows::fts_text;

/// "mnem" in ASCII: marks a SQLite file as a mneme store.
pub const APPLICATION_ID: i64 = 0x6d6e_656d;

pub(crate) struct Migration {
    pub version: i64,
    pub description: &'static str,
    pub apply: fn(&Transaction<'_>) -> rusqlite::Result<()>,
}

pub(crate) const MIGRATIONS: &[Migration] = &[
    Migration { version: 1, description: "records, lineage, tags, links, append-only audit", apply: v1 },
    Migration { version: 2, description: "full-text index over summaries and payload text", apply: v2 },
    Migration { version: 3, description: "record vectors (int8, one per record and model)", apply: v3 },
    Migration {
        version: 4,
        description: "conversation log and checkpoints, scheduled tasks and their runs, dispatches, workspace file index",
        apply: v4,
    },
    Migration { version: 5, description: "conversation threads; full-text index with context and date columns", apply: v5 },
    Migration { version: 6, description: "facts by subject and predicate (exact look-up index)", apply: v6 },
    Migration { version: 7, description: "competence records by skill (exact look-up index)", apply: v7 },
    Migration { version: 8, description: "forgetting: erased records, redaction of audit text and the conversation log", apply: v8 },
    Migration { version: 9, description: "workspace knowledge: chunk digests and their vectors, reads of files and entries", apply: v9 },
];

/// The schema version this build writes.
pub const SCHEMA_VERSION: i64 = 9;

fn v1(tx: &Transaction<'_>) -> rusqlite::Result<()> {
    tx.execute_batch(
        r#"
        CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
        CREATE TABLE schema_migrations (
            version INTEGER PRIMARY KEY,
            applied_at INTEGER NOT NULL,
            description TEXT NOT NULL
        );
        CREATE TABLE records (
            seq INTEGER PRIMARY KEY,
            id TEXT NOT NULL UNIQUE,
            memory_type TEXT NOT NULL
                CHECK (memory_type IN ('episodic','semantic','competence','working','plan_graph')),
            payload_kind TEXT NOT NULL,
            sensitivity INTEGER NOT NULL CHECK (sensitivity BETWEEN 0 AND 4),
            scope TEXT NOT NULL,
            tags TEXT NOT NULL,
            summary TEXT CHECK (summary IS NOT NULL OR payload IS NOT NULL),
            payload TEXT,
            confidence REAL NOT NULL CHECK (confidence BETWEEN 0 AND 1),
            salience_base REAL NOT NULL CHECK (salience_base BETWEEN 0 AND 1),
            reinforced_at INTEGER NOT NULL,
            pinned INTEGER NOT NULL CHECK (pinned IN (0, 1)),
            rank_anchor REAL NOT NULL,
            status TEXT NOT NULL CHECK (status IN ('active','contested','retracted','superseded')),
            lineage_op TEXT NOT NULL CHECK (lineage_op IN ('original','supersede','fork','merge')),
            parent_ids TEXT NOT NULL,
            lineage_actor TEXT NOT NULL,
            lineage_rationale TEXT NOT NULL,
            lineage_at INTEGER NOT NULL,
            created_at INTEGER NOT NULL,
            updated_at INTEGER NOT NULL,
            event_time INTEGER,
            sort_time INTEGER NOT NULL,
            pruned_at INTEGER
        );
        CREATE INDEX records_type_anchor ON records (memory_type, rank_anchor);
        CREATE INDEX records_sort_time ON records (sort_time);
        -- Global records (scope '') are most records and are never looked up by scope.
        CREATE INDEX records_scope ON records (scope) WHERE scope <> '';
        CREATE TABLE record_tags (
            tag TEXT NOT NULL,
            record_seq INTEGER NOT NULL REFERENCES records (seq),
            PRIMARY KEY (tag, record_seq)
        ) WITHOUT ROWID;
        CREATE TABLE record_parents (
            parent_seq INTEGER NOT NULL REFERENCES records (seq),
            child_seq INTEGER NOT NULL REFERENCES records (seq),
            PRIMARY KEY (parent_seq, child_seq)
        ) WITHOUT ROWID;
        CREATE TABLE links (
            from_seq INTEGER NOT NULL REFERENCES records (seq),
            to_seq INTEGER NOT NULL REFERENCES records (seq),
            kind TEXT NOT NULL,
            at INTEGER NOT NULL,
            note TEXT NOT NULL,
            PRIMARY KEY (from_seq, to_seq, kind)
        );
        CREATE INDEX links_to ON links (to_seq);
        -- seq grows monotonically without AUTOINCREMENT because rows are never deleted.
        CREATE TABLE audit (
            seq INTEGER PRIMARY KEY,
            record_seq INTEGER NOT NULL REFERENCES records (seq),
            at INTEGER NOT NULL,
            actor TEXT NOT NULL,
            action TEXT NOT NULL,
            rationale TEXT NOT NULL,
            details TEXT NOT NULL
        );
        CREATE INDEX audit_record ON audit (record_seq, seq);
        CREATE TRIGGER audit_no_update BEFORE UPDATE ON audit
            BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END;
        CREATE TRIGGER audit_no_delete BEFORE DELETE ON audit
            BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END;
        CREATE TRIGGER records_no_delete BEFORE DELETE ON records
            BEGIN SELECT RAISE(ABORT, 'records are never deleted; retract or prune instead'); END;
        "#,
    )
}

fn v2(tx: &Transaction<'_>) -> rusqlite::Result<()> {
    // Contentless: the text lives in `records` already; the index keeps only postings.
    tx.execute_batch(
        "CREATE VIRTUAL TABLE records_fts USING fts5(text, content = '', contentless_delete = 1, tokenize = 'porter unicode61');",
    )?;
    // Backfill the index from records written under version 1.
    let mut select = tx.prepare("SELECT seq, summary, payload FROM records")?;
    let mut insert = tx.prepare("INSERT INTO records_fts (rowid, text) VALUES (?1, ?2)")?;
    let mut rows = select.query([])?;
    while let Some(row) = rows.next()? {
        let seq: i64 = row.get(0)?;
        let summary: Option<String> = row.get(1)?;
        let payload: Option<String> = row.get(2)?;
        let payload = payload.and_then(|p| serde_json::from_str(&p).ok());
        insert.execute(rusqlite::params![seq, fts_text(summary.as_deref(), payload.as_ref())])?;
    }
    Ok(())
}

fn v3(tx: &Transaction<'_>) -> rusqlite::Result<()> {
    // Derived data: a record's vector may be replaced (a new model), never its record.
    // Records written before this version get theirs from the embedding backfill.
    tx.execute_batch(
        r#"
        CREATE TABLE record_vectors (
            record_seq INTEGER PRIMARY KEY REFERENCES records (seq),
            model TEXT NOT NULL,
            dim INTEGER NOT NULL CHECK (dim > 0),
            scale REAL NOT NULL,
            codes BLOB NOT NULL CHECK (length(codes) = dim)
        );
        "#,
    )
}

fn v4(tx: &Transaction<'_>) -> rusqlite::Result<()> {
    tx.execute_batch(
        r#"
        -- The agent's conversation log (the zylos seed's C4). `id` is the sync cursor: rows are
        -- never deleted, so ids only grow.
        CREATE TABLE conversations (
            id INTEGER PRIMARY KEY,
            at INTEGER NOT NULL,
            channel TEXT NOT NULL,
            user_id TEXT,
            direction TEXT NOT NULL CHECK (direction IN ('in', 'out')),
            priority INTEGER NOT NULL CHECK (priority BETWEEN 1 AND 3),
            content TEXT NOT NULL
        );
        CREATE TRIGGER conversations_no_delete BEFORE DELETE ON conversations
            BEGIN SELECT RAISE(ABORT, 'the conversation log is append-only'); END;
        CREATE TRIGGER conversations_no_update BEFORE UPDATE ON conversations
            BEGIN SELECT RAISE(ABORT, 'the conversation log is append-only'); END;
        -- A checkpoint says "conversations up to end_id are summarized". Append-only: the
        -- latest one is the sync boundary.
        CREATE TABLE checkpoints (
            id INTEGER PRIMARY KEY,
            end_id INTEGER NOT NULL,
            summary TEXT NOT NULL,
            at INTEGER NOT NULL
        );
        CREATE TRIGGER checkpoints_no_delete BEFORE DELETE ON checkpoints
            BEGIN SELECT RAISE(ABORT, 'checkpoints are append-only'); END;
        CREATE TRIGGER checkpoints_no_update BEFORE UPDATE ON checkpoints
            BEGIN SELECT RAISE(ABORT, 'checkpoints are append-only'); END;
        -- Scheduled tasks: `spec` is the scheduler's JSON (trigger, action, priority, ...).
        CREATE TABLE scheduled_tasks (
            name TEXT PRIMARY KEY,
            spec TEXT NOT NULL,
            builtin INTEGER NOT NULL CHECK (builtin IN (0, 1))
        );
        CREATE TABLE task_runs (
            id INTEGER PRIMARY KEY,
            task TEXT NOT NULL,
            at INTEGER NOT NULL,
            ok INTEGER NOT NULL CHECK (ok IN (0, 1)),
            detail TEXT NOT NULL
        );
        CREATE INDEX task_runs_task ON task_runs (task, id);
        -- Instructions for the agent (from scheduled tasks), delivered by the next hook.
        CREATE TABLE dispatches (
            id INTEGER PRIMARY KEY,
            task TEXT NOT NULL,
            priority INTEGER NOT NULL CHECK (priority BETWEEN 1 AND 3),
            text TEXT NOT NULL,
            created_at INTEGER NOT NULL,
            delivered_at INTEGER
        );
        CREATE INDEX dispatches_pending ON dispatches (priority, id) WHERE delivered_at IS NULL;
        -- Search over the workspace's Markdown files: derived data, rebuilt per file on change.
        CREATE TABLE workspace_files (
            path TEXT PRIMARY KEY,
            mtime INTEGER NOT NULL,
            size INTEGER NOT NULL,
            chunks INTEGER NOT NULL
        );
        CREATE VIRTUAL TABLE workspace_chunks USING fts5(
            path UNINDEXED, start_line UNINDEXED, end_line UNINDEXED, heading, text,
            tokenize = 'porter unicode61'
        );
        "#,
    )
}

fn v5(tx: &Transaction<'_>) -> rusqlite::Result<()> {
    tx.execute_batch(
        r#"
        -- Event records with a reference, per scope, in ingest order (context.rs).
        CREATE TABLE record_threads (
            thread TEXT NOT NULL,
            record_seq INTEGER NOT NULL REFERENCES records (seq),
            PRIMARY KEY (thread, record_seq)
        ) WITHOUT ROWID;
        CREATE UNIQUE INDEX record_threads_seq ON record_threads (record_seq);
        DROP TABLE records_fts;
        CREATE VIRTUAL TABLE records_fts USING fts5(
            text, ctx, date, content = '', contentless_delete = 1, tokenize = 'porter unicode61'
        );
        "#,
    )?;
    // Rebuild: threads first (in sequence order), then every row with its context.
    let mut select = tx.prepare("SELECT seq, scope, payload FROM records ORDER BY seq")?;
    let mut rows = select.query([])?;
    let mut all = std::collections::BTreeSet::new();
    while let Some(row) = rows.next()? {
        let seq: i64 = row.get(0)?;
        let scope: String = row.get(1)?;
        let payload: Option<String> = row.get(2)?;
        let payload = payload.and_then(|p| serde_json::from_str(&p).ok());
        if let Some(thread) = crate::context::thread_key(&scope, payload.as_ref()) {
            tx.prepare_cached("INSERT INTO record_threads (thread, record_seq) VALUES (?1, ?2)")?
                .execute(rusqlite::params![thread, seq])?;
        }
        all.insert(seq);
    }
    let exec = crate::sql::LiteExec { conn: tx, path: std::path::Path::new("") };
    crate::context::write_rows(&exec, &all, false).map_err(|e| rusqlite::Error::ToSqlConversionFailure(Box::new(e)))
}

/// The exact fact look-up of `lookup.rs`: semantic records by lowercased subject and
/// predicate. Partial, so episodes (most records) cost nothing.
fn v6(tx: &Transaction<'_>) -> rusqlite::Result<()> {
    tx.execute_batch(
        r#"
        CREATE INDEX records_fact_key ON records (
            lower(json_extract(payload, '$.subject')),
            lower(json_extract(payload, '$.predicate'))
        ) WHERE memory_type = 'semantic';
        "#,
    )
}

/// The exact skill look-up of `lookup.rs`: competence records by skill name. Partial, like
/// the fact key.
fn v7(tx: &Transaction<'_>) -> rusqlite::Result<()> {
    tx.execute_batch(
        r#"
        CREATE INDEX records_skill_key ON records (json_extract(payload, '$.skill'))
            WHERE memory_type = 'competence';
        "#,
    )
}

/// Forgetting (`forget`): a record's content can be erased, the one exception to
/// immutability. `forgotten_at` marks the tombstone and `content_hash` keeps a SHA-256 of
/// what was erased. The audit log and the conversation log stay append-only except for one
/// update each: replacing their text with `[forgotten]` (who, when and what happened stay).
fn v8(tx: &Transaction<'_>) -> rusqlite::Result<()> {
    tx.execute_batch(
        r#"
        ALTER TABLE records ADD COLUMN forgotten_at INTEGER;
        ALTER TABLE records ADD COLUMN content_hash TEXT;
        DROP TRIGGER audit_no_update;
        CREATE TRIGGER audit_no_update BEFORE UPDATE ON audit
            WHEN NOT (NEW.rationale = '[forgotten]' AND NEW.details = '{}' AND NEW.seq = OLD.seq
                      AND NEW.record_seq = OLD.record_seq AND NEW.at = OLD.at AND NEW.actor = OLD.actor
                      AND NEW.action = OLD.action)
            BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END;
        DROP TRIGGER conversations_no_update;
        CREATE TRIGGER conversations_no_update BEFORE UPDATE ON conversations
            WHEN NOT (NEW.content = '[forgotten]' AND NEW.id = OLD.id AND NEW.at = OLD.at
                      AND NEW.channel = OLD.channel AND NEW.direction = OLD.direction
                      AND NEW.priority = OLD.priority AND NEW.user_id IS OLD.user_id)
            BEGIN SELECT RAISE(ABORT, 'the conversation log is append-only'); END;
        "#,
    )
}

fn v9(tx: &Transaction<'_>) -> rusqlite::Result<()> {
    tx.execute_batch(
        r#"
        -- Chunks carry the digest of their text, which their vectors are keyed by: an edited
        -- file's unchanged chunks keep their vectors, and a vector whose text is gone goes.
        -- The index is derived data: emptied here, the next sync rebuilds it.
        DROP TABLE workspace_chunks;
        DELETE FROM workspace_files;
        CREATE VIRTUAL TABLE workspace_chunks USING fts5(
            path UNINDEXED, start_line UNINDEXED, end_line UNINDEXED, heading, text, digest UNINDEXED,
            tokenize = 'porter unicode61'
        );
        CREATE TABLE workspace_chunk_vectors (
            digest TEXT NOT NULL,
            model TEXT NOT NULL,
            scale REAL NOT NULL,
            codes BLOB NOT NULL,
            PRIMARY KEY (digest, model)
        ) WITHOUT ROWID;
        -- Reads of the agent's files (heading '') and of their entries (a chunk's heading
        -- path): search hits, file reads, session-start injection.
        CREATE TABLE workspace_reads (
            path TEXT NOT NULL,
            heading TEXT NOT NULL,
            count INTEGER NOT NULL,
            last_at INTEGER NOT NULL,
            PRIMARY KEY (path, heading)
        ) WITHOUT ROWID;
        "#,
    )
}
