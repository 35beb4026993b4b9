//! Retrieval v1: lexical candidates from FTS5 (or, for an empty query, the most salient
//! and most recent records), re-ranked by `mneme_core::scoring`.
//!
//! With a query, the top `max(candidate_pool, 5 × limit)` BM25 matches are re-ranked; a
//! record outside that pool cannot win on salience alone (a deliberate bound on work).
//! Without a query, the ranking is exact: candidates come from the per-type salience
//! index and the recency index, and the pool grows until no unseen record could beat
//! the k-th result (Fagin's threshold argument).

use std::collections::HashMap;

use mneme_core::query::fts5_expression;
use mneme_core::scoring::ScoreParts;
use mneme_core::validate::check_unit;
use mneme_core::{MemoryType, Scope};
use mneme_store::{Candidate, ReadTx, RecordFilter};

use crate::{Access, Hit, MemoryService, RetrieveRequest, ServiceError, ServiceResult};

impl MemoryService {
    /// Ranked records for a query and filters, never above the caller's access.
    pub fn retrieve(&self, request: &RetrieveRequest, access: &Access) -> ServiceResult<Vec<Hit>> {
        self.config.limits.check_query(&request.query, request.limit)?;
        if let Some(m) = request.min_salience {
            check_unit("min salience", m)?;
        }
        self.config.limits.check_tags(&request.tags)?;
        let filter = self.effective_filter(request, access);
        let now = self.now();
        let min_salience = request.min_salience.unwrap_or(0.0);
        self.reader()?.read(|tx| {
            let scored = match fts5_expression(&request.query) {
                Some(expr) => self.lexical(tx, &expr, &filter, request.limit, min_salience, now)?,
                None => self.by_salience_and_recency(tx, &filter, request.limit, min_salience, now)?,
            };
            let seqs: Vec<i64> = scored.iter().map(|(c, _)| c.seq).collect();
            let records = tx.get_many(&seqs)?;
            Ok::<_, ServiceError>(
                records
                    .into_iter()
                    .zip(scored)
                    .map(|(record, (_, score))| Hit { record, current_salience: score.salience, score })
                    .collect(),
            )
        })
    }

    /// The request's filters, narrowed to what `access` allows.
    fn effective_filter(&self, request: &RetrieveRequest, access: &Access) -> RecordFilter {
        let asked = request.max_sensitivity.unwrap_or(self.config.access.default_max_sensitivity);
        let scopes = match (&access.scopes, &request.scopes) {
            (None, None) => None,
            (None, Some(r)) => Some(r.clone()),
            (Some(a), None) => Some(a.clone()),
            (Some(a), Some(r)) => Some(r.iter().filter(|s| s.is_global() || a.contains(s)).cloned().collect::<Vec<Scope>>()),
        };
        let mut types = request.types.clone();
        types.sort();
        types.dedup();
        RecordFilter {
            types,
            max_sensitivity: asked.min(access.max_sensitivity),
            scopes,
            tags: request.tags.clone(),
            since: request.since,
            until: request.until,
            include_tombstones: request.include_tombstones,
        }
    }

    fn lexical(
        &self,
        tx: &ReadTx<'_>,
        expr: &str,
        filter: &RecordFilter,
        limit: usize,
        min_salience: f64,
        now: jiff::Timestamp,
    ) -> ServiceResult<Vec<(Candidate, ScoreParts)>> {
        let weights = self.config.retrieval;
        let pool = weights.candidate_pool.max(limit.saturating_mul(5));
        let candidates = tx.lexical_candidates(expr, filter, pool)?;
        let best = candidates.iter().filter_map(|c| c.bm25).fold(0.0f64, f64::max);
        let mut scored: Vec<(Candidate, ScoreParts)> = candidates
            .into_iter()
            .filter_map(|c| {
                let bm25 = c.bm25.unwrap_or(0.0);
                let relevance = if best > 0.0 { (bm25 / best).clamp(0.0, 1.0) } else { 0.0 };
                self.score(c, Some((bm25, relevance)), min_salience, now)
            })
            .collect();
        sort_and_cut(&mut scored, limit);
        Ok(scored)
    }

    fn by_salience_and_recency(
        &self,
        tx: &ReadTx<'_>,
        filter: &RecordFilter,
        limit: usize,
        min_salience: f64,
        now: jiff::Timestamp,
    ) -> ServiceResult<Vec<(Candidate, ScoreParts)>> {
        let weights = self.config.retrieval;
        let decay = self.config.decay;
        let types: Vec<MemoryType> = if filter.types.is_empty() { MemoryType::ALL.to_vec() } else { filter.types.clone() };
        let max_floor = types.iter().map(|t| decay.floor.get(*t)).fold(0.0, f64::max);
        let mut n = limit.saturating_mul(4).max(32);
        loop {
            let mut pool: HashMap<i64, Candidate> = HashMap::new();
            let mut salience_bound = 0.0f64;
            let mut all_seen = true;
            for &t in &types {
                let list = tx.salience_candidates(t, filter, n)?;
                if list.len() == n {
                    all_seen = false;
                    let last = list.last().expect("a full list is not empty");
                    salience_bound = salience_bound.max(decay.salience_at(t, &last.salience, now));
                }
                pool.extend(list.into_iter().map(|c| (c.seq, c)));
            }
            let recent = tx.recent_candidates(filter, n)?;
            let recency_bound = if recent.len() == n {
                weights.recency(recent.last().expect("a full list is not empty").sort_time, now)
            } else {
                all_seen = true;
                0.0
            };
            pool.extend(recent.into_iter().map(|c| (c.seq, c)));
            let mut scored: Vec<(Candidate, ScoreParts)> =
                pool.into_values().filter_map(|c| self.score(c, None, min_salience, now)).collect();
            sort_and_cut(&mut scored, limit);
            // No unseen record can score above this.
            let unseen_bound = weights.salience * salience_bound.max(max_floor) + weights.recency * recency_bound;
            let settled = scored.len() == limit && scored.last().is_some_and(|(_, s)| s.score >= unseen_bound);
            if all_seen || settled || n >= 1 << 20 {
                return Ok(scored);
            }
            n = n.saturating_mul(4);
        }
    }

    /// Scores one candidate; `None` when its current salience is below `min_salience`.
    /// `lexical` is (raw BM25, normalised relevance) for a text query.
    fn score(&self, c: Candidate, lexical: Option<(f64, f64)>, min_salience: f64, now: jiff::Timestamp) -> Option<(Candidate, ScoreParts)> {
        let weights = &self.config.retrieval;
        let salience = self.config.decay.salience_at(c.memory_type, &c.salience, now);
        if salience < min_salience {
            return None;
        }
        let recency = weights.recency(c.sort_time, now);
        let relevance = lexical.map(|(_, r)| r);
        let score = weights.blend(relevance, salience, recency);
        Some((c, ScoreParts { score, relevance, bm25: lexical.map(|(b, _)| b), salience, recency }))
    }
}

fn sort_and_cut(scored: &mut Vec<(Candidate, ScoreParts)>, limit: usize) {
    // Ties go to the newer record (higher sequence number), so order is deterministic.
    scored.sort_by(|a, b| b.1.score.total_cmp(&a.1.score).then(b.0.seq.cmp(&a.0.seq)));
    scored.truncate(limit);
}
