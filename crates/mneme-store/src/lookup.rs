//! Exact look-ups for the engines, as opposed to ranked search: a fact by its subject and
//! predicate within one scope, a competence record by its skill within one scope. Consolidation must find the fact it is about to revise
//! however many other records outrank it for the words "subject predicate"; a ranked
//! search with a limit missed it and the fact was duplicated.
//!
//! Served by the partial expression indexes `records_fact_key` (schema v6) and
//! `records_skill_key` (v7); the queries' expressions are written exactly as the
//! indexes' so that SQLite's planner uses them.

use mneme_core::{MemoryRecord, Scope, Sensitivity};

use crate::error::StoreResult;
use crate::rows::ReadTx;

impl ReadTx<'_> {
    /// Live semantic records in exactly `scope` (a named scope does not match global
    /// records) whose subject and predicate equal these, ASCII case-insensitively, at most
    /// `max_sensitivity`; oldest first. No ranking and no limit.
    pub fn facts_by_key(
        &self,
        subject: &str,
        predicate: &str,
        scope: &Scope,
        max_sensitivity: Sensitivity,
    ) -> StoreResult<Vec<MemoryRecord>> {
        let seqs = self.query_all(
            "SELECT seq FROM records \
             WHERE memory_type = 'semantic' \
               AND lower(json_extract(payload, '$.subject')) = lower(?1) \
               AND lower(json_extract(payload, '$.predicate')) = lower(?2) \
               AND scope = ?3 AND sensitivity <= ?4 \
               AND status IN ('active', 'contested') AND pruned_at IS NULL \
             ORDER BY seq",
            rusqlite::params![subject, predicate, scope.as_str(), max_sensitivity.level()],
            |r| r.get::<_, i64>(0),
        )?;
        self.get_many(&seqs)
    }

    /// Live competence records in exactly `scope` whose skill is exactly `skill`, at most
    /// `max_sensitivity`; oldest first. No ranking and no limit.
    pub fn skills_by_name(&self, skill: &str, scope: &Scope, max_sensitivity: Sensitivity) -> StoreResult<Vec<MemoryRecord>> {
        let seqs = self.query_all(
            "SELECT seq FROM records \
             WHERE memory_type = 'competence' \
               AND json_extract(payload, '$.skill') = ?1 \
               AND scope = ?2 AND sensitivity <= ?3 \
               AND status IN ('active', 'contested') AND pruned_at IS NULL \
             ORDER BY seq",
            rusqlite::params![skill, scope.as_str(), max_sensitivity.level()],
            |r| r.get::<_, i64>(0),
        )?;
        self.get_many(&seqs)
    }
}
