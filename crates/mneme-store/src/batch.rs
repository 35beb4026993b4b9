//! PostgreSQL's batch statements: one round trip per table for many rows.
//!
//! On SQLite a statement is a function call; on PostgreSQL it is a round trip to the server
//! and a parse/bind/execute there, so a group-committed ingest of N records written row by
//! row costs about 3N round trips. Here each table gets one statement for the whole batch,
//! its columns sent as arrays and expanded by `unnest … WITH ORDINALITY` (rows keep the
//! batch's order, so sequence numbers follow the ids as they do on SQLite). The rows written
//! are the same as the one-row path's (`rows.rs`, `context.rs`); the store and service suites
//! run both engines against the same expectations.

use std::collections::{BTreeSet, HashMap};
use std::path::Path;

use crate::context::{LIVE, WINDOW, context_text, index_text, pg_tsvector};
use crate::error::StoreResult;
use crate::rows::{NewRow, decode};
use crate::sql::Exec;

/// Writes new original records (no lineage parents): their rows, tags, thread entries,
/// threadless full-text rows and creation audit entries. Returns the records whose
/// full-text rows the caller must (re)write at flush: the new threaded records and the
/// earlier thread members whose context now includes them.
pub(crate) fn insert_originals(db: &dyn Exec, rows: &[NewRow], path: &Path) -> StoreResult<Vec<i64>> {
    let col = |f: fn(&NewRow) -> String| rows.iter().map(f).collect::<Vec<String>>();
    let ids = col(|r| r.record.id.as_str().to_string());
    let types = col(|r| r.record.memory_type.as_str().to_string());
    let kinds = col(|r| r.payload_kind.to_string());
    let scopes = col(|r| r.record.scope.as_str().to_string());
    let tags = col(|r| r.tags_json.clone());
    let payloads = col(|r| r.payload_json.clone());
    let ops = col(|r| r.record.lineage.operation.as_str().to_string());
    let parents = col(|r| r.parents_json.clone());
    let actors = col(|r| r.record.lineage.actor.clone());
    let rationales = col(|r| r.record.lineage.rationale.clone());
    let summaries: Vec<Option<String>> = rows.iter().map(|r| r.stored_summary.clone()).collect();
    let sensitivities: Vec<i64> = rows.iter().map(|r| r.record.sensitivity.level()).collect();
    let confidences: Vec<f64> = rows.iter().map(|r| r.record.confidence).collect();
    let bases: Vec<f64> = rows.iter().map(|r| r.record.salience.base).collect();
    let nows: Vec<i64> = rows.iter().map(|r| r.now_ms).collect();
    let pinned: Vec<i64> = rows.iter().map(|r| r.pinned).collect();
    let anchors: Vec<f64> = rows.iter().map(|r| r.anchor).collect();
    let lineage_at: Vec<i64> = rows.iter().map(|r| r.record.lineage.timestamp.as_millisecond()).collect();
    let event_times: Vec<Option<i64>> = rows.iter().map(|r| r.event_time).collect();
    let sort_times: Vec<i64> = rows.iter().map(|r| r.sort_time).collect();

    let mut seq_of: HashMap<String, i64> = HashMap::with_capacity(rows.len());
    db.pg_query(
        "INSERT INTO records (id, memory_type, payload_kind, sensitivity, scope, tags, summary, payload, \
         confidence, salience_base, reinforced_at, pinned, rank_anchor, status, lineage_op, parent_ids, \
         lineage_actor, lineage_rationale, lineage_at, created_at, updated_at, event_time, sort_time, pruned_at) \
         SELECT id, mt, pk, sens, scope, tags, summary, payload, conf, base, now, pinned, anchor, 'active', op, parents, \
                actor, rationale, lat, now, now, et, st, NULL \
         FROM unnest($1::text[], $2::text[], $3::text[], $4::int8[], $5::text[], $6::text[], $7::text[], $8::text[], \
                     $9::float8[], $10::float8[], $11::int8[], $12::int8[], $13::float8[], $14::text[], $15::text[], \
                     $16::text[], $17::text[], $18::int8[], $19::int8[], $20::int8[]) \
              WITH ORDINALITY AS u(id, mt, pk, sens, scope, tags, summary, payload, conf, base, now, pinned, anchor, op, \
                                   parents, actor, rationale, lat, et, st, ord) \
         ORDER BY ord RETURNING seq, id",
        &[
            &ids,
            &types,
            &kinds,
            &sensitivities,
            &scopes,
            &tags,
            &summaries,
            &payloads,
            &confidences,
            &bases,
            &nows,
            &pinned,
            &anchors,
            &ops,
            &parents,
            &actors,
            &rationales,
            &lineage_at,
            &event_times,
            &sort_times,
        ],
        &mut |row| {
            seq_of.insert(row.text(1)?, row.i64(0)?);
            Ok(())
        },
    )?;
    let seqs = ids
        .iter()
        .map(|id| seq_of.get(id).copied().ok_or_else(|| decode(path, format!("the batch insert returned no sequence number for {id}"))))
        .collect::<StoreResult<Vec<i64>>>()?;

    let (mut tag_names, mut tag_seqs) = (Vec::new(), Vec::new());
    for (row, &seq) in rows.iter().zip(&seqs) {
        for tag in &row.record.tags {
            tag_names.push(tag.clone());
            tag_seqs.push(seq);
        }
    }
    if !tag_names.is_empty() {
        run(db, "INSERT INTO record_tags (tag, record_seq) SELECT * FROM unnest($1::text[], $2::int8[])", &[&tag_names, &tag_seqs])?;
    }

    // Threadless records: their full-text row now. Threaded ones join their threads and are
    // written at flush with their context, as are the earlier members they neighbour.
    let (mut fts_seqs, mut fts_vectors) = (Vec::new(), Vec::new());
    let (mut threads, mut thread_seqs) = (Vec::new(), Vec::new());
    let mut first_in_thread: HashMap<&str, i64> = HashMap::new();
    for (row, &seq) in rows.iter().zip(&seqs) {
        match &row.thread {
            Some(thread) => {
                threads.push(thread.clone());
                thread_seqs.push(seq);
                first_in_thread.entry(thread.as_str()).or_insert(seq);
            }
            None => {
                fts_seqs.push(seq);
                fts_vectors.push(row.pg_tsvector.clone().unwrap_or_else(|| pg_tsvector(&row.fts_text, "", &row.date)));
            }
        }
    }
    if !fts_seqs.is_empty() {
        run(db, "INSERT INTO records_fts (seq, tsv) SELECT * FROM unnest($1::int8[], $2::tsvector[])", &[&fts_seqs, &fts_vectors])?;
    }
    let mut touched = thread_seqs.clone();
    if !threads.is_empty() {
        run(db, "INSERT INTO record_threads (thread, record_seq) SELECT * FROM unnest($1::text[], $2::int8[])", &[&threads, &thread_seqs])?;
        // Every earlier member is before the batch's first record of its thread.
        let (names, firsts): (Vec<String>, Vec<i64>) = first_in_thread.iter().map(|(t, s)| (t.to_string(), *s)).unzip();
        db.pg_query(
            &format!(
                "SELECT n.record_seq FROM unnest($1::text[], $2::int8[]) AS u(thread, first_seq), LATERAL ( \
                   SELECT t.record_seq FROM record_threads t JOIN records r ON r.seq = t.record_seq \
                   WHERE t.thread = u.thread AND t.record_seq < u.first_seq AND {LIVE} \
                   ORDER BY t.record_seq DESC LIMIT {WINDOW}) n"
            ),
            &[&names, &firsts],
            &mut |row| {
                touched.push(row.i64(0)?);
                Ok(())
            },
        )?;
    }

    let actions = col(|r| r.action.as_str().to_string());
    let details = col(|r| r.details.to_string());
    run(
        db,
        "INSERT INTO audit (record_seq, at, actor, action, rationale, details) \
         SELECT s, at, actor, action, rationale, details \
         FROM unnest($1::int8[], $2::int8[], $3::text[], $4::text[], $5::text[], $6::text[]) \
              WITH ORDINALITY AS u(s, at, actor, action, rationale, details, ord) ORDER BY ord",
        &[&seqs, &nows, &actors, &actions, &rationales, &details],
    )?;
    Ok(touched)
}

/// Rewrites the full-text rows of `seqs` (own text, thread context, date; a forgotten
/// record's row is dropped) in four statements: the neighbours of all of them, the stored
/// text of all involved, one delete and one insert.
pub(crate) fn write_fts_rows(db: &dyn Exec, seqs: &BTreeSet<i64>) -> StoreResult<()> {
    let dirty: Vec<i64> = seqs.iter().copied().collect();
    let mut neighbours: HashMap<i64, Vec<i64>> = HashMap::new();
    let side = |cmp: &str, order: &str| {
        format!(
            "(SELECT t.record_seq FROM record_threads t JOIN records r ON r.seq = t.record_seq \
              WHERE t.thread = dt.thread AND t.record_seq {cmp} d.seq AND {LIVE} ORDER BY t.record_seq {order} LIMIT {WINDOW})"
        )
    };
    db.pg_query(
        &format!(
            "SELECT d.seq, n.record_seq FROM unnest($1::int8[]) AS d(seq) \
             JOIN record_threads dt ON dt.record_seq = d.seq \
             CROSS JOIN LATERAL ({} UNION ALL {}) n",
            side("<", "DESC"),
            side(">", "")
        ),
        &[&dirty],
        &mut |row| {
            neighbours.entry(row.i64(0)?).or_default().push(row.i64(1)?);
            Ok(())
        },
    )?;
    let mut wanted: BTreeSet<i64> = seqs.clone();
    wanted.extend(neighbours.values().flatten());
    let wanted: Vec<i64> = wanted.into_iter().collect();
    // seq → (text, date, sensitivity, forgotten)
    let mut stored: HashMap<i64, (String, String, i64, bool)> = HashMap::with_capacity(wanted.len());
    db.pg_query(
        "SELECT seq, summary, payload, event_time, sensitivity, forgotten_at IS NOT NULL FROM records WHERE seq = ANY($1)",
        &[&wanted],
        &mut |row| {
            let (text, date) = index_text(row.opt_text(1)?.as_deref(), row.opt_text(2)?.as_deref(), row.opt_i64(3)?);
            stored.insert(row.i64(0)?, (text, date, row.i64(4)?, row.flag(5)?));
            Ok(())
        },
    )?;
    let (mut out_seqs, mut out_vectors) = (Vec::new(), Vec::new());
    for &seq in &dirty {
        let Some((text, date, sensitivity, forgotten)) = stored.get(&seq) else { continue };
        if *forgotten {
            continue;
        }
        // Thread order: the nearest-first befores reversed, then the afters.
        let mut around = neighbours.get(&seq).cloned().unwrap_or_default();
        around.sort_unstable();
        let ctx = context_text(*sensitivity, around.iter().filter_map(|n| stored.get(n)).map(|(t, _, s, _)| (t.as_str(), *s)));
        out_seqs.push(seq);
        out_vectors.push(pg_tsvector(text, &ctx, date));
    }
    run(db, "DELETE FROM records_fts WHERE seq = ANY($1)", &[&dirty])?;
    if !out_seqs.is_empty() {
        run(db, "INSERT INTO records_fts (seq, tsv) SELECT * FROM unnest($1::int8[], $2::tsvector[])", &[&out_seqs, &out_vectors])?;
    }
    Ok(())
}

fn run(db: &dyn Exec, sql: &str, params: &[&crate::sql::PgParam<'_>]) -> StoreResult<()> {
    db.pg_query(sql, params, &mut |_| Ok(()))
}
