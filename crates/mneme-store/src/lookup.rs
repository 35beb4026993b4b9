//! Exact look-ups for the engines, as opposed to ranked search: a fact by its subject and
//! predicate within one scope, a competence record by its skill within one scope. Consolidation must find the fact it is about to revise
//! however many other records outrank it for the words "subject predicate"; a ranked
//! search with a limit missed it and the fact was duplicated.
//!
//! Served by the partial expression indexes `records_fact_key` (schema v6) and
//! `records_skill_key` (v7); the queries' expressions are written exactly as the
//! indexes' so that SQLite's planner uses them.

use mneme_core::{MemoryRecord, MemoryType, RecordId, Scope, Sensitivity};

use crate::error::StoreResult;
use crate::rows::ReadTx;
use crate::sql::Dialect;

/// A JSON field of a text column, as each engine spells it (and as the look-up indexes
/// are written: SQLite's `json_extract(payload, '$.subject')`, PostgreSQL's
/// `(payload::jsonb ->> 'subject')`).
fn field(dialect: Dialect, column: &str, name: &str) -> String {
    match dialect {
        Dialect::Sqlite => format!("json_extract({column}, '$.{name}')"),
        Dialect::Postgres => format!("({column}::jsonb ->> '{name}')"),
    }
}

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
        let (s, p) = (field(self.dialect(), "payload", "subject"), field(self.dialect(), "payload", "predicate"));
        let seqs = self.query_all(
            &format!(
                "SELECT seq FROM records \
                 WHERE memory_type = 'semantic' AND lower({s}) = lower(?1) AND lower({p}) = lower(?2) \
                   AND scope = ?3 AND sensitivity <= ?4 \
                   AND status IN ('active', 'contested') AND pruned_at IS NULL \
                 ORDER BY seq"
            ),
            &[&subject, &predicate, &scope.as_str(), &max_sensitivity.level()],
            |r| r.i64(0),
        )?;
        self.get_many(&seqs)
    }

    /// Live competence records in exactly `scope` whose skill is exactly `skill`, at most
    /// `max_sensitivity`; oldest first. No ranking and no limit.
    pub fn skills_by_name(&self, skill: &str, scope: &Scope, max_sensitivity: Sensitivity) -> StoreResult<Vec<MemoryRecord>> {
        let k = field(self.dialect(), "payload", "skill");
        let seqs = self.query_all(
            &format!(
                "SELECT seq FROM records \
                 WHERE memory_type = 'competence' AND {k} = ?1 \
                   AND scope = ?2 AND sensitivity <= ?3 \
                   AND status IN ('active', 'contested') AND pruned_at IS NULL \
                 ORDER BY seq"
            ),
            &[&skill, &scope.as_str(), &max_sensitivity.level()],
            |r| r.i64(0),
        )?;
        self.get_many(&seqs)
    }

    /// Every semantic record whose subject is `subject` or starts with `subject's` (their
    /// sister, their manager), ASCII case-insensitively, not yet forgotten: what "forget
    /// this person" covers among facts (superseded and retracted ones too).
    pub fn facts_about(&self, subject: &str) -> StoreResult<Vec<MemoryRecord>> {
        let s = field(self.dialect(), "payload", "subject");
        let seqs = self.query_all(
            &format!(
                "SELECT seq FROM records WHERE memory_type = 'semantic' AND forgotten_at IS NULL \
                   AND (lower({s}) = lower(?1) OR lower({s}) LIKE lower(?1) || '''s %') \
                 ORDER BY seq"
            ),
            &[&subject],
            |r| r.i64(0),
        )?;
        self.get_many(&seqs)
    }

    /// Every record not yet forgotten (superseded and retracted ones too) whose own
    /// indexed text (not its neighbours' context, not its date) holds every one of
    /// `tokens` (from `mneme_core::query::query_tokens`), oldest first. No ranking and no
    /// limit: what "forget what says X" must cover. Callers check the exact words after.
    pub fn records_with_words(&self, tokens: &[String]) -> StoreResult<Vec<MemoryRecord>> {
        if tokens.is_empty() {
            return Ok(Vec::new());
        }
        let seqs = match self.dialect() {
            Dialect::Sqlite => {
                let all = tokens.iter().map(|t| mneme_core::query::fts5_phrase(t)).collect::<Vec<_>>().join(" AND ");
                self.query_all(
                    "SELECT r.seq FROM records_fts f JOIN records r ON r.seq = f.rowid \
                     WHERE records_fts MATCH ?1 AND r.forgotten_at IS NULL ORDER BY r.seq",
                    &[&format!("text : ({all})")],
                    |r| r.i64(0),
                )?
            }
            Dialect::Postgres => {
                // A token without lexemes (a stopword) is left to the caller's exact check;
                // a query of stopwords only is matched on the stored text (a scan, but only
                // the matches are loaded).
                let parts: Vec<String> = tokens.iter().filter_map(|t| mneme_core::lexemes::tsquery(t)).map(|q| format!("({q})")).collect();
                if parts.is_empty() {
                    let contains = (1..=tokens.len())
                        .map(|i| format!("strpos(lower(coalesce(summary, '') || ' ' || coalesce(payload, '')), ?{i}) > 0"))
                        .collect::<Vec<_>>()
                        .join(" AND ");
                    let params: Vec<&dyn crate::sql::Param> = tokens.iter().map(|t| t as &dyn crate::sql::Param).collect();
                    self.query_all(
                        &format!("SELECT seq FROM records WHERE forgotten_at IS NULL AND {contains} ORDER BY seq"),
                        &params,
                        |r| r.i64(0),
                    )?
                } else {
                    self.query_all(
                        "SELECT r.seq FROM records_fts f JOIN records r ON r.seq = f.seq \
                         WHERE f.tsv @@ ?1::text::tsquery AND ts_filter(f.tsv, '{a}') @@ ?1::text::tsquery \
                           AND r.forgotten_at IS NULL ORDER BY r.seq",
                        &[&parts.join(" & ")],
                        |r| r.i64(0),
                    )?
                }
            }
        };
        self.get_many(&seqs)
    }

    /// The first `limit` end-user scopes (`user:…`) that hold records, in order: one index
    /// seek per scope (`records_scope`), however many records each holds.
    pub fn user_scopes(&self, limit: usize) -> StoreResult<Vec<String>> {
        let mut out: Vec<String> = Vec::new();
        while out.len() < limit {
            let after = out.last().cloned().unwrap_or_else(|| "user:".to_string());
            let next = self.query_all(
                "SELECT scope FROM records WHERE scope <> '' AND scope > ?1 AND scope < 'user;' AND forgotten_at IS NULL ORDER BY scope LIMIT 1",
                &[&after],
                |r| r.text(0),
            )?;
            match next.into_iter().next() {
                Some(scope) => out.push(scope),
                None => break,
            }
        }
        Ok(out)
    }

    /// Every event whose sender is `sender`, case-insensitively, not yet forgotten.
    pub fn events_from(&self, sender: &str) -> StoreResult<Vec<MemoryRecord>> {
        let s = field(self.dialect(), "payload", "sender");
        let seqs = self.query_all(
            &format!(
                "SELECT seq FROM records WHERE memory_type = 'episodic' AND forgotten_at IS NULL AND lower({s}) = lower(?1) ORDER BY seq"
            ),
            &[&sender],
            |r| r.i64(0),
        )?;
        self.get_many(&seqs)
    }

    /// The facts extracted from `id` (their evidence names it), not yet forgotten. Not
    /// their successors: a later value came from another message and says nothing of this
    /// one (forgetting an address must not take the city the user moved to since).
    pub fn derived_from(&self, id: &RecordId) -> StoreResult<Vec<MemoryRecord>> {
        let each = match self.dialect() {
            Dialect::Sqlite => "json_each(r.payload, '$.evidence') e",
            Dialect::Postgres => "jsonb_array_elements_text(coalesce(r.payload::jsonb -> 'evidence', '[]'::jsonb)) e(value)",
        };
        let seqs = self.query_all(
            &format!(
                "SELECT r.seq FROM records r, {each} \
                 WHERE r.memory_type = 'semantic' AND e.value = ?1 AND r.forgotten_at IS NULL ORDER BY r.seq"
            ),
            &[&id.as_str()],
            |r| r.i64(0),
        )?;
        self.get_many(&seqs)
    }

    /// Every record in exactly `scope`, not yet forgotten (tombstones too).
    pub fn records_in_scope(&self, scope: &Scope) -> StoreResult<Vec<MemoryRecord>> {
        let seqs =
            self.query_all("SELECT seq FROM records WHERE scope = ?1 AND forgotten_at IS NULL ORDER BY seq", &[&scope.as_str()], |r| {
                r.i64(0)
            })?;
        self.get_many(&seqs)
    }

    /// Records of `memory_type` whose time (the event's, else when written) is before
    /// `cutoff`, not yet forgotten: what a retention policy erases.
    pub fn records_older_than(&self, memory_type: MemoryType, cutoff: jiff::Timestamp) -> StoreResult<Vec<MemoryRecord>> {
        let seqs = self.query_all(
            "SELECT seq FROM records WHERE memory_type = ?1 AND sort_time < ?2 AND forgotten_at IS NULL ORDER BY seq",
            &[&memory_type.as_str(), &cutoff.as_millisecond()],
            |r| r.i64(0),
        )?;
        self.get_many(&seqs)
    }
}

/// An audit entry with what the inner life's sense step needs of its record.
#[derive(Debug, Clone, PartialEq)]
pub struct AuditEvent {
    /// The audit log's own sequence (increasing).
    pub seq: i64,
    pub record: RecordId,
    pub memory_type: MemoryType,
    /// `create`, `supersede` or `contest`.
    pub action: String,
    pub actor: String,
    pub rationale: String,
    /// The record's summary, else what its payload is about (empty once forgotten).
    pub summary: String,
}

impl ReadTx<'_> {
    /// The highest audit sequence so far (0 for an empty store).
    pub fn max_audit_seq(&self) -> StoreResult<i64> {
        self.exec.int("SELECT coalesce(max(seq), 0) FROM audit", &[])
    }

    /// Corrections (`supersede`, `contest`) and new competence records (`create`) after
    /// audit sequence `after`, oldest first, at most `limit`: a range scan of the audit
    /// log's rowid.
    pub fn audit_events_after(&self, after: i64, limit: usize) -> StoreResult<Vec<AuditEvent>> {
        let f = |name| field(self.dialect(), "r.payload", name);
        let (skill, subject, predicate, object, text) = (f("skill"), f("subject"), f("predicate"), f("object"), f("text"));
        let rows = self.query_all(
            &format!(
                "SELECT a.seq, r.id, r.memory_type, a.action, a.actor, a.rationale, \
                        coalesce(r.summary, {skill}, {subject} || ' ' || {predicate} || ' ' || {object}, {text}, '') \
                 FROM audit a JOIN records r ON r.seq = a.record_seq \
                 WHERE a.seq > ?1 AND (a.action IN ('supersede', 'contest') \
                                       OR (a.action = 'create' AND r.memory_type = 'competence')) \
                 ORDER BY a.seq LIMIT ?2"
            ),
            &[&after, &(limit as i64)],
            |r| Ok((r.i64(0)?, r.text(1)?, r.text(2)?, r.text(3)?, r.text(4)?, r.text(5)?, r.text(6)?)),
        )?;
        rows.into_iter()
            .map(|(seq, id, memory_type, action, actor, rationale, summary)| {
                Ok(AuditEvent {
                    seq,
                    record: id.parse().map_err(|e| crate::rows::decode(self.path, e))?,
                    memory_type: memory_type.parse().map_err(|e| crate::rows::decode(self.path, e))?,
                    action,
                    actor,
                    rationale,
                    summary,
                })
            })
            .collect()
    }
}
