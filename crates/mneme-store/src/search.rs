//! Candidate generation for retrieval. The service scores; this module only finds.
//!
//! Three access paths, each pushing every filter into SQL so that a record the caller
//! may not see is never even loaded:
//! - lexical: FTS5 `MATCH` ordered by `bm25()` (the expression comes from
//!   `mneme_core::query`, never from raw user text);
//! - salience: per memory type, `ORDER BY rank_anchor DESC` on its index;
//! - recency: `ORDER BY sort_time DESC` on its index.
//!
//! BM25 costs O(matches): FTS5's `bm25()` reads each phrase's whole doclist for its
//! document frequency, then every matching row is scored and joined with `records`. A
//! word in most records (the user's name, "docker") would make every query that names it
//! visit most of the store. `bounded_lexical_candidates` bounds that work per word:
//! 1. Probe each word: its newest `cap + 1` matches, in rowid order straight from the
//!    doclist (O(cap), no scoring, no join). A word with more is *frequent*. `cap` is
//!    `max_term_matches` for a query of up to `RARE_BUDGET` words; a longer query's probes
//!    share the same `RARE_BUDGET × max_term_matches` rows (a 20-word paragraph probes each
//!    word 400 deep at the default), so no query's work grows with its length.
//! 2. No frequent word: the plain BM25 query, so results are exactly `lexical_candidates`'.
//! 3. Otherwise BM25 runs over the rare words only, the rarest first while their matches
//!    total at most `RARE_BUDGET × max_term_matches` (rare words carry nearly all of the
//!    IDF). The other words are *estimated*: each match the probe saw scores the word's
//!    BM25 IDF (its document frequency taken from the density of those newest matches
//!    across the store's rowid span), as BM25 would for one occurrence in a text of
//!    average length. A BM25 candidate adds the estimate of every such word it matched.
//! 4. Matches seen only by the probes fill the pool: best estimate first, then newest,
//!    each chunk checked against the filter, so a narrow filter costs at most the probed
//!    rows.
//!
//! Work is then O(RARE_BUDGET × max_term_matches + pool) whatever the store's size and the
//! query's length. What this gives up: a
//! frequent word's matches older than its probe window are not candidates through that
//! word, and an estimated word's score ignores term frequency and field weights.

use std::collections::{HashMap, HashSet};

use crate::dump::Cell;
use crate::sql::{Dialect, Param};
use jiff::Timestamp;
use mneme_core::query::{fts5_any, fts5_phrase};
use mneme_core::{MemoryType, SalienceState, Scope, Sensitivity};

use crate::error::StoreResult;
use crate::rows::{ReadTx, decode, ts};

/// Which records a retrieval may consider.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordFilter {
    /// Empty means every type.
    pub types: Vec<MemoryType>,
    /// Records above this are never returned.
    pub max_sensitivity: Sensitivity,
    /// `None`: every scope. `Some(list)`: these scopes plus global records.
    pub scopes: Option<Vec<Scope>>,
    /// A record must carry all of these tags.
    pub tags: Vec<String>,
    /// Inclusive bounds on the record's time (event time, else creation time).
    pub since: Option<Timestamp>,
    pub until: Option<Timestamp>,
    /// Also return superseded, retracted and pruned records.
    pub include_tombstones: bool,
}

impl Default for RecordFilter {
    fn default() -> Self {
        RecordFilter {
            types: Vec::new(),
            max_sensitivity: Sensitivity::Critical,
            scopes: None,
            tags: Vec::new(),
            since: None,
            until: None,
            include_tombstones: false,
        }
    }
}

/// What scoring needs of a candidate, without loading the whole record.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Candidate {
    pub seq: i64,
    pub memory_type: MemoryType,
    pub salience: SalienceState,
    pub sort_time: Timestamp,
    /// BM25 relevance, higher is better (lexical path only).
    pub bm25: Option<f64>,
}

/// The nearest live records before and after one record in its conversation thread.
pub type Adjacent = (Option<i64>, Option<i64>);

/// How many times `max_term_matches` the rare words' matches may total before the more
/// frequent of them are estimated instead of scored by BM25 (step 3 of the module doc).
const RARE_BUDGET: usize = 4;

/// The least a word is probed, however long the query.
const MIN_PROBE_DEPTH: usize = 64;

/// On PostgreSQL, a token's matching rows are counted (for its IDF) up to this many.
const PG_IDF_CAP: i64 = 10_000;

const CANDIDATE_COLUMNS: &str = "r.seq, r.memory_type, r.salience_base, r.reinforced_at, r.pinned, r.sort_time";

impl ReadTx<'_> {
    /// Up to `pool` records matching the FTS5 expression, best BM25 first. BM25 weighs
    /// the record's own text 1, its conversation context `weights.0` and its date words
    /// `weights.1` (see `context.rs`).
    pub fn lexical_candidates(
        &self,
        fts_expression: &str,
        filter: &RecordFilter,
        pool: usize,
        weights: (f64, f64),
    ) -> StoreResult<Vec<Candidate>> {
        if self.dialect() == Dialect::Postgres {
            return self.pg_lexical(&phrases(fts_expression), filter, pool, weights, None);
        }
        let (clause, mut values) = where_clause(filter);
        // The weights are validated finite numbers, formatted (not user text).
        let (ctx, date) = (weights.0.max(0.0), weights.1.max(0.0));
        let sql = format!(
            "SELECT {CANDIDATE_COLUMNS}, bm25(records_fts, 1.0, {ctx:?}, {date:?}) AS rank FROM records_fts \
             JOIN records r ON r.seq = records_fts.rowid \
             WHERE records_fts MATCH ? AND {clause} ORDER BY rank LIMIT ?"
        );
        values.insert(0, Cell::Text(format!("{} : ({fts_expression})", searched_columns(weights))));
        values.push(Cell::Int(pool as i64));
        self.candidates(&sql, values, true)
    }

    /// Like `lexical_candidates` for the OR of `tokens`, with the work per token bounded
    /// by `max_term_matches` (at least 1): see the module doc. Identical to
    /// `lexical_candidates` when no token matches more than `max_term_matches` records.
    pub fn bounded_lexical_candidates(
        &self,
        tokens: &[String],
        filter: &RecordFilter,
        pool: usize,
        weights: (f64, f64),
        max_term_matches: usize,
    ) -> StoreResult<Vec<Candidate>> {
        if self.dialect() == Dialect::Postgres {
            return self.pg_lexical(tokens, filter, pool, weights, Some(max_term_matches.max(1)));
        }
        // A query's probes share one budget, `RARE_BUDGET × max_term_matches` rows: a word is
        // probed `max_term_matches` deep while the query has at most `RARE_BUDGET` words, less
        // deep for a longer one (a pasted paragraph), so its work does not grow with its length.
        let budget = RARE_BUDGET.saturating_mul(max_term_matches.max(1));
        let cap = max_term_matches.max(1).min((budget / tokens.len().max(1)).max(MIN_PROBE_DEPTH));
        let columns = searched_columns(weights);
        // Each token's newest matches, newest first: all of them when there are at most `cap`.
        let mut probes: Vec<(&String, Vec<i64>)> = Vec::with_capacity(tokens.len());
        for token in tokens {
            let rows = self.query_all(
                "SELECT rowid FROM records_fts WHERE records_fts MATCH ? ORDER BY rowid DESC LIMIT ?",
                &[&format!("{columns} : {}", fts5_phrase(token)), &((cap + 1) as i64)],
                |r| r.i64(0),
            )?;
            probes.push((token, rows));
        }
        if probes.iter().all(|(_, rows)| rows.len() <= cap) {
            return match fts5_any(tokens) {
                Some(expression) => self.lexical_candidates(&expression, filter, pool, weights),
                None => Ok(Vec::new()),
            };
        }
        // The rarest tokens go to BM25 while their matches fit the budget; the rest are estimated.
        probes.sort_by_key(|(_, rows)| rows.len());
        let mut exact: Vec<String> = Vec::new();
        let mut spent = 0usize;
        let mut estimated: Vec<(Vec<i64>, bool)> = Vec::new();
        for (token, rows) in probes {
            let complete = rows.len() <= cap;
            if complete && spent + rows.len() <= budget {
                spent += rows.len();
                exact.push(token.clone());
            } else {
                estimated.push((rows, complete));
            }
        }
        // The store's size for IDF: the highest sequence number (records are never deleted).
        let total = self.exec.int("SELECT coalesce(max(seq), 0) FROM records", &[])?;
        let mut estimate: HashMap<i64, f64> = HashMap::with_capacity(estimated.iter().map(|(rows, _)| rows.len()).max().unwrap_or(0));
        for (rows, complete) in &estimated {
            let idf = estimated_idf(rows, *complete, total);
            for &seq in rows {
                *estimate.entry(seq).or_insert(0.0) += idf;
            }
        }
        let mut found = match fts5_any(&exact) {
            Some(expression) => self.lexical_candidates(&expression, filter, pool, weights)?,
            None => Vec::new(),
        };
        for c in &mut found {
            if let (Some(bm25), Some(extra)) = (c.bm25.as_mut(), estimate.get(&c.seq)) {
                *bm25 += extra;
            }
        }
        // Fill from the probed matches: best estimate first, then newest; the filter decides.
        let seen: HashSet<i64> = found.iter().map(|c| c.seq).collect();
        let mut order: Vec<(i64, f64)> = estimate.into_iter().filter(|(seq, _)| !seen.contains(seq)).collect();
        order.sort_unstable_by(|a, b| b.1.total_cmp(&a.1).then(b.0.cmp(&a.0)));
        let mut filled: Vec<Candidate> = Vec::new();
        for chunk in order.chunks(pool.clamp(64, 1024)) {
            let seqs: Vec<i64> = chunk.iter().map(|(seq, _)| *seq).collect();
            let mut visible: HashMap<i64, Candidate> = self.candidates_by_seq(&seqs, filter)?.into_iter().map(|c| (c.seq, c)).collect();
            for (seq, score) in chunk {
                if let Some(mut c) = visible.remove(seq) {
                    c.bm25 = Some(*score);
                    filled.push(c);
                }
            }
            if found.len() + filled.len() >= pool {
                break;
            }
        }
        found.append(&mut filled);
        found.sort_by(|a, b| b.bm25.unwrap_or(0.0).total_cmp(&a.bm25.unwrap_or(0.0)).then(b.seq.cmp(&a.seq)));
        found.truncate(pool);
        Ok(found)
    }

    /// PostgreSQL's lexical candidates: the records whose full-text row matches any of
    /// `tokens`, best first by a BM25-shaped score: for each token, its IDF (from how many
    /// rows match it, counted up to [`PG_IDF_CAP`]; more is treated as that many) times
    /// `ts_rank` of the row for that token alone, with the row's parts weighted as BM25
    /// weighs them on SQLite (own text 1, context `weights.0`, date `weights.1`; a part
    /// weighted 0 is not searched) and the rank divided by 1 + ln(row length). Each token is
    /// stemmed here as the rows were (`mneme_core::lexemes`) and sent as its own quoted
    /// `tsquery` parameter: user text never reaches a query parser as syntax. Retrieval
    /// normalises scores to the best candidate, as it does BM25's.
    ///
    /// With a `bound` (`max_term_matches`) the work per token is bounded as on SQLite: a
    /// token the planner estimates (from ANALYZE's lexeme statistics, `mneme_match_estimate`)
    /// to match more rows is *frequent*. Its IDF comes from that estimate instead of a count,
    /// and it only adds to the scores of rows the rare tokens match; when every token is
    /// frequent, the candidates are the newest `bound` matches of the rarest.
    fn pg_lexical(
        &self,
        tokens: &[String],
        filter: &RecordFilter,
        pool: usize,
        weights: (f64, f64),
        bound: Option<usize>,
    ) -> StoreResult<Vec<Candidate>> {
        // Each token's lexemes as a quoted `tsquery` (`mneme_core::lexemes`, as the rows
        // were written); a token with none (a stopword) matches nothing and is left out.
        let tokens: Vec<String> = tokens.iter().filter_map(|t| mneme_core::lexemes::tsquery(t)).collect();
        if tokens.is_empty() {
            return Ok(Vec::new());
        }
        let (ctx, date) = (weights.0.max(0.0), weights.1.max(0.0));
        // ts_rank takes weights in [0, 1]: scaled so the largest is 1 (ranks are relative).
        let scale = 1f64.max(ctx).max(date);
        let (own, ctx_w, date_w) = (1.0 / scale, ctx / scale, date / scale);
        let mut labels = vec!["a"];
        if ctx > 0.0 {
            labels.push("b");
        }
        if date > 0.0 {
            labels.push("c");
        }
        let only = |tsv: &str, q: &str| {
            if labels.len() < 3 { format!(" AND ts_filter({tsv}, '{{{}}}') @@ {q}", labels.join(",")) } else { String::new() }
        };
        // In one round trip: the store's size for IDF (the highest sequence number: records
        // are never deleted) and, per token, the planner's estimate of its matches (bounded
        // search only) and its exact matches counted up to the cap (a frequent token's are
        // not counted: its estimate stands in).
        let n = tokens.len();
        let (idf_cap, bound_at) = (n + 1, n + 2);
        let per_token = (1..=n)
            .map(|i| {
                let q = format!("?{i}::text::tsquery");
                let count = format!(
                    "(SELECT count(*) FROM (SELECT 1 FROM records_fts f WHERE f.tsv @@ {q}{} LIMIT ?{idf_cap}) m)",
                    only("f.tsv", &q)
                );
                match bound {
                    Some(_) => {
                        format!(", mneme_match_estimate({q}), CASE WHEN mneme_match_estimate({q}) <= ?{bound_at} THEN {count} ELSE -1 END")
                    }
                    None => format!(", -1::bigint, {count}"),
                }
            })
            .collect::<String>();
        let bound_value = bound.unwrap_or(usize::MAX).min(i64::MAX as usize) as i64;
        let mut params: Vec<&dyn crate::sql::Param> = tokens.iter().map(|t| t as &dyn crate::sql::Param).collect();
        params.push(&PG_IDF_CAP);
        if bound.is_some() {
            params.push(&bound_value);
        }
        let mut total = 0.0;
        // Per token: (estimated matches, exact matches or -1).
        let mut matches: Vec<(i64, i64)> = Vec::with_capacity(n);
        self.exec.query(&format!("SELECT (SELECT coalesce(max(seq), 0) FROM records){per_token}"), &params, &mut |row| {
            total = row.i64(0)? as f64;
            for i in 0..n {
                matches.push((row.i64(1 + 2 * i)?, row.i64(2 + 2 * i)?));
            }
            Ok(())
        })?;
        let idf: Vec<f64> = matches
            .iter()
            .map(|&(estimate, exact)| {
                let n = (if exact >= 0 { exact } else { estimate } as f64).min(total);
                let value = ((total - n + 0.5) / (n + 0.5)).ln();
                if value > 0.0 { value } else { 1e-6 }
            })
            .collect();
        // Rare tokens (all of them when unbounded) choose the candidates; frequent ones only
        // add to their scores. When every token is frequent, the candidates are the newest
        // `bound` matches of the rarest.
        let rare: Vec<usize> = (0..n).filter(|&i| matches[i].1 >= 0).collect();
        let (clause, filter_values) = where_clause(filter);
        // The IDFs and weights are parameters, not text: the query's text then depends only
        // on the number of words and the filter's shape, so its prepared statement is
        // reused (formatted numbers made nearly every query a new statement on the
        // connection). ts_rank takes the weights as {D, C, B, A}; normalization 1:
        // ÷ (1 + ln length).
        let score = vec!["?::float8 * ts_rank(?::text::float4[], f.tsv, ?::text::tsquery, 1)"; n].join(" + ");
        let rank_weights = format!("{{0, {date_w:?}, {ctx_w:?}, {own:?}}}");
        // Placeholders in text order: the source's tokens and the score's (in the order the
        // query text has them), the filter's, the limit.
        let mut values: Vec<Cell> =
            idf.iter().zip(&tokens).flat_map(|(&w, t)| [Cell::Real(w), Cell::Text(rank_weights.clone()), Cell::Text(t.clone())]).collect();
        let sql = if rare.is_empty() {
            let rarest = (0..n).min_by_key(|&i| matches[i].0).unwrap_or(0);
            values.push(Cell::Text(tokens[rarest].clone()));
            values.push(Cell::Int(bound_value));
            let q = "?::text::tsquery";
            format!(
                "SELECT {CANDIDATE_COLUMNS}, -({score})::float8 AS rank \
                 FROM (SELECT seq FROM records_fts WHERE tsv @@ {q}{} ORDER BY seq DESC LIMIT ?) newest \
                 JOIN records_fts f ON f.seq = newest.seq JOIN records r ON r.seq = f.seq \
                 WHERE {clause} ORDER BY rank, r.seq DESC LIMIT ?",
                only("tsv", q)
            )
        } else {
            // Three steps, each fenced from the planner's reordering: the matches from the
            // GIN index (MATERIALIZED: joined with the ranking, the planner would rather
            // scan the whole table in parallel workers to spread `ts_rank`'s cost); then
            // ranked and sorted (OFFSET 0); then joined with `records` in that order, so
            // the filter and the LIMIT stop after the best `pool` (joining every match
            // first cost 2,400 lookups for a three-word query at 1M).
            let any = vec!["?::text::tsquery"; rare.len()].join(" || ");
            let rare_values = rare.iter().map(|&i| Cell::Text(tokens[i].clone()));
            values = rare_values.chain(values).collect();
            format!(
                "WITH m AS MATERIALIZED (SELECT seq, tsv FROM records_fts, (SELECT {any} AS q) q WHERE tsv @@ q.q{}) \
                 SELECT {CANDIDATE_COLUMNS}, f.rank FROM \
                   (SELECT f.seq, -({score})::float8 AS rank FROM m f ORDER BY rank, f.seq DESC OFFSET 0) f \
                 JOIN records r ON r.seq = f.seq WHERE {clause} ORDER BY f.rank, r.seq DESC LIMIT ?",
                only("tsv", "q.q")
            )
        };
        values.extend(filter_values);
        values.push(Cell::Int(pool as i64));
        self.candidates(&sql, values, true)
    }

    /// Up to `n` records of one type, most salient first (by rank anchor).
    ///
    /// With tags in the filter, the records holding the first of them drive the query: a
    /// tag is far rarer than a type, and walking the type's salience index checks every
    /// record of the type for the tag (every fact in the store for a question about one
    /// slot: 40 % of a retrieve's work with the model attached).
    pub fn salience_candidates(&self, memory_type: MemoryType, filter: &RecordFilter, n: usize) -> StoreResult<Vec<Candidate>> {
        let (clause, filter_values) = where_clause(filter);
        let mut values = Vec::new();
        let (from, driver) = match filter.tags.first() {
            Some(tag) => {
                values.push(Cell::Text(tag.clone()));
                // SQLite without statistics would still walk the type index; NOT INDEXED
                // leaves it the rowids from the tag's rows.
                let table = if self.dialect() == Dialect::Sqlite { "records r NOT INDEXED" } else { "records r" };
                (table, "r.seq IN (SELECT t.record_seq FROM record_tags t WHERE t.tag = ?) AND ")
            }
            None => ("records r", ""),
        };
        let sql = format!(
            "SELECT {CANDIDATE_COLUMNS} FROM {from} WHERE {driver}r.memory_type = ? AND {clause} ORDER BY r.rank_anchor DESC, r.salience_base DESC LIMIT ?"
        );
        values.push(Cell::Text(memory_type.as_str().to_string()));
        values.extend(filter_values);
        values.push(Cell::Int(n as i64));
        self.candidates(&sql, values, false)
    }

    /// Up to `n` records, most recent first.
    pub fn recent_candidates(&self, filter: &RecordFilter, n: usize) -> StoreResult<Vec<Candidate>> {
        let (clause, mut values) = where_clause(filter);
        let sql = format!("SELECT {CANDIDATE_COLUMNS} FROM records r WHERE {clause} ORDER BY r.sort_time DESC LIMIT ?");
        values.push(Cell::Int(n as i64));
        self.candidates(&sql, values, false)
    }

    /// Up to `n` records, most recent first, walking the `sort_time` index from the newest
    /// (the planner would otherwise pick the type index and sort every record of a type):
    /// for "the last N events", which need no ranking.
    pub fn newest_candidates(&self, filter: &RecordFilter, n: usize) -> StoreResult<Vec<Candidate>> {
        let (clause, mut values) = where_clause(filter);
        // (PostgreSQL has no INDEXED BY; its planner walks the index for ORDER BY … LIMIT.)
        let indexed = if self.dialect() == Dialect::Sqlite { " INDEXED BY records_sort_time" } else { "" };
        let sql = format!("SELECT {CANDIDATE_COLUMNS} FROM records r{indexed} WHERE {clause} ORDER BY r.sort_time DESC LIMIT ?");
        values.push(Cell::Int(n as i64));
        self.candidates(&sql, values, false)
    }

    /// The records among `seqs` that pass the filter (any order).
    pub fn candidates_by_seq(&self, seqs: &[i64], filter: &RecordFilter) -> StoreResult<Vec<Candidate>> {
        if seqs.is_empty() {
            return Ok(Vec::new());
        }
        let (clause, mut values) = where_clause(filter);
        // SQLite, without statistics, prefers the memory-type index and reads every record of
        // the type (20 k rows for 64 seqs: 83 % of a session start with the model). The list of
        // rowids is the driver: NOT INDEXED still looks rowids up.
        let table = if self.dialect() == Dialect::Sqlite { "records r NOT INDEXED" } else { "records r" };
        let sql = format!("SELECT {CANDIDATE_COLUMNS} FROM {table} WHERE r.seq IN ({}) AND {clause}", placeholders(seqs.len()));
        let mut all: Vec<Cell> = seqs.iter().map(|&s| Cell::Int(s)).collect();
        all.append(&mut values);
        self.candidates(&sql, all, false)
    }

    /// For each of `seqs` in a conversation thread: the nearest live record before and
    /// after it in the thread (`context.rs`).
    pub fn thread_adjacent(&self, seqs: &[i64]) -> StoreResult<std::collections::HashMap<i64, Adjacent>> {
        let mut out = std::collections::HashMap::new();
        for &seq in seqs {
            let (before, after) = crate::context::neighbours(self.exec, seq, 1)?;
            if !before.is_empty() || !after.is_empty() {
                out.insert(seq, (before.first().copied(), after.first().copied()));
            }
        }
        Ok(out)
    }

    /// The sender of each event record among `seqs` that has one.
    pub fn event_senders(&self, seqs: &[i64]) -> StoreResult<std::collections::HashMap<i64, String>> {
        if seqs.is_empty() {
            return Ok(Default::default());
        }
        let sender = match self.dialect() {
            Dialect::Sqlite => "json_extract(payload, '$.sender')",
            Dialect::Postgres => "(payload::jsonb ->> 'sender')",
        };
        let sql = format!("SELECT seq, {sender} FROM records WHERE payload_kind = 'event' AND seq IN ({})", placeholders(seqs.len()));
        let params: Vec<&dyn Param> = seqs.iter().map(|s| s as &dyn Param).collect();
        let rows = self.query_all(&sql, &params, |r| Ok((r.i64(0)?, r.opt_text(1)?)))?;
        Ok(rows.into_iter().filter_map(|(seq, sender)| Some((seq, sender?))).collect())
    }

    fn candidates(&self, sql: &str, values: Vec<Cell>, lexical: bool) -> StoreResult<Vec<Candidate>> {
        let params: Vec<&dyn Param> = values.iter().map(|v| v as &dyn Param).collect();
        let rows = self.query_all(sql, &params, |r| {
            Ok((r.i64(0)?, r.text(1)?, r.f64(2)?, r.i64(3)?, r.flag(4)?, r.i64(5)?, if lexical { Some(r.f64(6)?) } else { None }))
        })?;
        rows.into_iter()
            .map(|(seq, memory_type, base, reinforced_at, pinned, sort_time, rank)| {
                Ok(Candidate {
                    seq,
                    memory_type: memory_type.parse().map_err(|e| decode(self.path, e))?,
                    salience: SalienceState { base, reinforced_at: ts(reinforced_at, self.path)?, pinned },
                    sort_time: ts(sort_time, self.path)?,
                    // SQLite's bm25() is lower-is-better; flip it so higher is better.
                    bm25: rank.map(|r| -r),
                })
            })
            .collect()
    }
}

/// The phrases of an FTS5 expression of the form `mneme_core::query::fts5_any` builds
/// (`"a" OR "b"`, inner quotes doubled), back as plain tokens.
pub(crate) fn phrases(expression: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut chars = expression.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '"' {
            continue;
        }
        let mut token = String::new();
        while let Some(c) = chars.next() {
            match (c, chars.peek()) {
                ('"', Some('"')) => {
                    token.push('"');
                    chars.next();
                }
                ('"', _) => break,
                (c, _) => token.push(c),
            }
        }
        out.push(token);
    }
    out
}

/// The FTS5 column filter for BM25 weights (context, date). A column weighted 0 is not
/// searched at all (else its matches would still join the pool with a zero score).
fn searched_columns(weights: (f64, f64)) -> String {
    let mut columns = vec!["text"];
    if weights.0 > 0.0 {
        columns.push("ctx");
    }
    if weights.1 > 0.0 {
        columns.push("date");
    }
    format!("{{{}}}", columns.join(" "))
}

/// FTS5's BM25 IDF, `ln((N − n + 0.5) / (n + 0.5))` floored at 1e-6, for a token whose
/// newest matches are `rows` (newest first). `complete`: `rows` are all its matches, so
/// n is exact; else n is estimated from their density over the rowids they span.
fn estimated_idf(rows: &[i64], complete: bool, total: i64) -> f64 {
    let total = total.max(rows.len() as i64) as f64;
    let matches = match (complete, rows.last()) {
        (false, Some(&oldest)) => {
            let span = (total - oldest as f64 + 1.0).max(rows.len() as f64);
            (rows.len() as f64 * total / span).min(total)
        }
        _ => rows.len() as f64,
    };
    let idf = ((total - matches + 0.5) / (matches + 0.5)).ln();
    if idf > 0.0 { idf } else { 1e-6 }
}

/// The SQL condition (over alias `r`) and its parameters for a filter.
fn where_clause(filter: &RecordFilter) -> (String, Vec<Cell>) {
    let mut parts: Vec<String> = vec!["r.sensitivity <= ?".to_string()];
    let mut values: Vec<Cell> = vec![Cell::Int(filter.max_sensitivity.level())];
    if !filter.types.is_empty() {
        parts.push(format!("r.memory_type IN ({})", placeholders(filter.types.len())));
        values.extend(filter.types.iter().map(|t| Cell::Text(t.as_str().to_string())));
    }
    if let Some(scopes) = &filter.scopes {
        let named: Vec<&Scope> = scopes.iter().filter(|s| !s.is_global()).collect();
        if named.is_empty() {
            parts.push("r.scope = ''".to_string());
        } else {
            parts.push(format!("(r.scope = '' OR r.scope IN ({}))", placeholders(named.len())));
            values.extend(named.iter().map(|s| Cell::Text(s.as_str().to_string())));
        }
    }
    let mut tags: Vec<&String> = filter.tags.iter().collect();
    tags.sort();
    tags.dedup();
    if !tags.is_empty() {
        parts.push(format!(
            "(SELECT count(*) FROM record_tags t WHERE t.record_seq = r.seq AND t.tag IN ({})) = {}",
            placeholders(tags.len()),
            tags.len()
        ));
        values.extend(tags.iter().map(|t| Cell::Text((*t).clone())));
    }
    if let Some(since) = filter.since {
        parts.push("r.sort_time >= ?".to_string());
        values.push(Cell::Int(since.as_millisecond()));
    }
    if let Some(until) = filter.until {
        parts.push("r.sort_time <= ?".to_string());
        values.push(Cell::Int(until.as_millisecond()));
    }
    if !filter.include_tombstones {
        parts.push("r.status IN ('active', 'contested') AND r.pruned_at IS NULL".to_string());
    }
    (parts.join(" AND "), values)
}

fn placeholders(n: usize) -> String {
    vec!["?"; n].join(", ")
}
