//! Conversation context in the full-text index (schema v5).
//!
//! An event record with a `reference` (the hooks use the session key) belongs to the
//! *thread* `scope + reference`; `record_threads` lists each thread's records in ingest
//! order. Each record's `records_fts` row has three columns:
//! - `text`: its own text (as before);
//! - `ctx`: the text of up to [`WINDOW`] live records before and after it in its thread,
//!   those no more sensitive than the record itself;
//! - `date`: its event date as words (`8 May 2023`).
//!
//! Why: a question's words are often in the turn that *asks* while the answer is the next
//! turn; indexing neighbours (at a lower BM25 column weight) finds the answer turn, and the
//! date column answers "when" questions by date words. Measured on LoCoMo in BENCHMARKS.md.
//!
//! Invariant: the index is derived data. A write marks the rows whose context changed
//! (the neighbours of an inserted, retracted, superseded or pruned record) and
//! `flush` rewrites each once before the transaction commits.

use std::collections::BTreeSet;

use crate::error::StoreResult;
use crate::pg::PgTsVector;
use crate::rows::fts_text;
use crate::sql::{Dialect, Exec};
use mneme_core::Payload;
use mneme_core::lexemes::{TsVector, Weight};

/// Records on each side of a record whose text goes into its context column.
pub const WINDOW: usize = 2;

pub(crate) const LIVE: &str = "r.status IN ('active', 'contested') AND r.pruned_at IS NULL";

/// The thread of a record: events with a reference, per scope.
pub(crate) fn thread_key(scope: &str, payload: Option<&Payload>) -> Option<String> {
    match payload {
        Some(Payload::Event(e)) => e.reference.as_deref().filter(|r| !r.trim().is_empty()).map(|r| format!("{scope}\u{1f}{r}")),
        _ => None,
    }
}

/// `8 May 2023` for an event time (UTC), the form dates take in conversation.
pub(crate) fn date_words(ms: Option<i64>) -> String {
    const MONTHS: [&str; 12] =
        ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October", "November", "December"];
    let Some(ts) = ms.and_then(|ms| jiff::Timestamp::from_millisecond(ms).ok()) else { return String::new() };
    let date = ts.to_zoned(jiff::tz::TimeZone::UTC).date();
    format!("{} {} {}", date.day(), MONTHS[(date.month() - 1) as usize], date.year())
}

/// A record's own index text, its date words and its sensitivity level.
fn own_text(db: &dyn Exec, seq: i64) -> StoreResult<Option<(String, String, i64)>> {
    let row = db.row("SELECT summary, payload, event_time, sensitivity FROM records WHERE seq = ?1", &[&seq], |r| {
        Ok((r.opt_text(0)?, r.opt_text(1)?, r.opt_i64(2)?, r.i64(3)?))
    })?;
    Ok(row.map(|(summary, payload, event_time, sensitivity)| {
        let (text, date) = index_text(summary.as_deref(), payload.as_deref(), event_time);
        (text, date, sensitivity)
    }))
}

/// A record's own index text and date words from its stored columns.
pub(crate) fn index_text(summary: Option<&str>, payload: Option<&str>, event_time: Option<i64>) -> (String, String) {
    let payload: Option<Payload> = payload.and_then(|p| serde_json::from_str(p).ok());
    (fts_text(summary, payload.as_ref()), date_words(event_time))
}

/// The context column: the texts of the neighbours (in thread order) no more sensitive than
/// the record, whose matches must not reveal words of a record the searcher may not see.
pub(crate) fn context_text<'t>(sensitivity: i64, neighbours: impl Iterator<Item = (&'t str, i64)>) -> String {
    neighbours.filter(|(_, s)| *s <= sensitivity).map(|(t, _)| t).collect::<Vec<_>>().join("\n")
}

/// The live records up to `n` before (`.0`, nearest first) and after (`.1`) `seq` in its thread.
pub(crate) fn neighbours(db: &dyn Exec, seq: i64, n: usize) -> StoreResult<(Vec<i64>, Vec<i64>)> {
    let thread = db.row("SELECT thread FROM record_threads WHERE record_seq = ?1", &[&seq], |r| r.text(0))?;
    let Some(thread) = thread else { return Ok((Vec::new(), Vec::new())) };
    let n = n as i64;
    let side = |sql: &str| db.rows(sql, &[&thread, &seq, &n], |r| r.i64(0));
    let before = side(&format!(
        "SELECT t.record_seq FROM record_threads t JOIN records r ON r.seq = t.record_seq \
         WHERE t.thread = ?1 AND t.record_seq < ?2 AND {LIVE} ORDER BY t.record_seq DESC LIMIT ?3"
    ))?;
    let after = side(&format!(
        "SELECT t.record_seq FROM record_threads t JOIN records r ON r.seq = t.record_seq \
         WHERE t.thread = ?1 AND t.record_seq > ?2 AND {LIVE} ORDER BY t.record_seq LIMIT ?3"
    ))?;
    Ok((before, after))
}

/// Adds a record to its thread (if it has one) and returns the records whose context
/// now includes it.
pub(crate) fn join_thread(db: &dyn Exec, seq: i64, thread: Option<&str>) -> StoreResult<Vec<i64>> {
    let Some(thread) = thread else { return Ok(Vec::new()) };
    db.execute("INSERT INTO record_threads (thread, record_seq) VALUES (?1, ?2)", &[&thread, &seq])?;
    let (before, after) = neighbours(db, seq, WINDOW)?;
    Ok(before.into_iter().chain(after).collect())
}

/// The statement that deletes one full-text row: SQLite's FTS5 table is keyed by rowid,
/// PostgreSQL's by `seq`.
pub(crate) fn fts_delete(db: &dyn Exec) -> &'static str {
    match db.dialect() {
        Dialect::Sqlite => "DELETE FROM records_fts WHERE rowid = ?1",
        Dialect::Postgres => "DELETE FROM records_fts WHERE seq = ?1",
    }
}

/// Writes one full-text row: FTS5 tokenizes its three columns itself; PostgreSQL's row
/// holds the `tsvector` mneme computes ([`pg_tsvector`], schema v6).
pub(crate) fn insert_fts_row(db: &dyn Exec, seq: i64, text: &str, ctx: &str, date: &str) -> StoreResult<()> {
    match db.dialect() {
        Dialect::Sqlite => {
            db.execute("INSERT INTO records_fts (rowid, text, ctx, date) VALUES (?1, ?2, ?3, ?4)", &[&seq, &text, &ctx, &date])?;
        }
        Dialect::Postgres => {
            db.pg_query("INSERT INTO records_fts (seq, tsv) VALUES ($1, $2)", &[&seq, &pg_tsvector(text, ctx, date)], &mut |_| Ok(()))?;
        }
    }
    Ok(())
}

/// A PostgreSQL full-text row's lexemes, in binary form: its own text weighted A, its
/// context B, its date words C (`ts_rank` weighs the classes as BM25 weighs SQLite's
/// columns).
pub(crate) fn pg_tsvector(text: &str, ctx: &str, date: &str) -> PgTsVector {
    PgTsVector(TsVector::new(&[(text, Weight::A), (ctx, Weight::B), (date, Weight::C)]).to_binary())
}

/// Rewrites the index rows of `seqs` (own text, context, date). `tombstones`: the schema
/// has `forgotten_at` (v8; false only for the v5 migration, which runs before it), and a
/// forgotten record's row is dropped instead.
pub(crate) fn write_rows(db: &dyn Exec, seqs: &BTreeSet<i64>, tombstones: bool) -> StoreResult<()> {
    if seqs.is_empty() {
        return Ok(());
    }
    if db.dialect() == Dialect::Postgres && tombstones {
        return crate::batch::write_fts_rows(db, seqs);
    }
    let delete = fts_delete(db);
    for &seq in seqs {
        let forgotten =
            tombstones && db.row("SELECT forgotten_at IS NOT NULL FROM records WHERE seq = ?1", &[&seq], |r| r.flag(0))?.unwrap_or(false);
        if forgotten {
            db.execute(delete, &[&seq])?;
            continue;
        }
        let Some((text, date, sensitivity)) = own_text(db, seq)? else { continue };
        let (before, after) = neighbours(db, seq, WINDOW)?;
        let mut texts = Vec::with_capacity(before.len() + after.len());
        for n in before.iter().rev().chain(&after) {
            texts.extend(own_text(db, *n)?.map(|(t, _, s)| (t, s)));
        }
        let ctx = context_text(sensitivity, texts.iter().map(|(t, s)| (t.as_str(), *s)));
        db.execute(delete, &[&seq])?;
        insert_fts_row(db, seq, &text, &ctx, &date)?;
    }
    Ok(())
}
