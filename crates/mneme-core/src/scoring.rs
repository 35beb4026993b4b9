//! How retrieval ranks candidates: a weighted blend of lexical relevance, current
//! salience and recency.
//!
//! ```text
//! score = w_rel * relevance + w_sal * salience + w_rec * recency
//! relevance = bm25 / max bm25 among the candidates        (0 when the query is empty)
//! recency   = 0.5 ^ (age of the event / recency_half_life)
//! ```
//!
//! With an empty query the relevance term is absent, so salience and recency alone rank.

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

use crate::decay::unix_seconds;
use crate::error::{CoreError, CoreResult};

/// Ranking parameters (config section `[retrieval]`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RankWeights {
    /// Weight of normalised BM25 relevance. Default 0.75.
    pub relevance: f64,
    /// Weight of current salience. Default 0.15.
    pub salience: f64,
    /// Weight of recency. Default 0.10.
    pub recency: f64,
    /// Age at which recency is 0.5, in days. Default 30.
    pub recency_half_life_days: f64,
    /// How many lexical candidates are re-ranked, at least. Default 200.
    pub candidate_pool: usize,
}

impl Default for RankWeights {
    fn default() -> Self {
        RankWeights { relevance: 0.75, salience: 0.15, recency: 0.10, recency_half_life_days: 30.0, candidate_pool: 200 }
    }
}

impl RankWeights {
    pub fn validate(&self) -> CoreResult<()> {
        for (key, v) in
            [("retrieval.relevance", self.relevance), ("retrieval.salience", self.salience), ("retrieval.recency", self.recency)]
        {
            if !(v.is_finite() && v >= 0.0) {
                return Err(CoreError::invalid(key, format!("{v} (must be a finite number ≥ 0)")));
            }
        }
        if !(self.recency_half_life_days.is_finite() && self.recency_half_life_days > 0.0) {
            return Err(CoreError::invalid(
                "retrieval.recency_half_life_days",
                format!("{} (must be a positive number of days)", self.recency_half_life_days),
            ));
        }
        if self.candidate_pool == 0 {
            return Err(CoreError::invalid("retrieval.candidate_pool", "0 (must be at least 1)"));
        }
        Ok(())
    }

    /// Recency in (0, 1]: 1 for an event now or in the future, halving every half-life.
    pub fn recency(&self, event: Timestamp, now: Timestamp) -> f64 {
        let age_days = ((unix_seconds(now) - unix_seconds(event)) / 86_400.0).max(0.0);
        0.5f64.powf(age_days / self.recency_half_life_days)
    }

    /// The blended score. `relevance` is `None` for an empty query.
    pub fn blend(&self, relevance: Option<f64>, salience: f64, recency: f64) -> f64 {
        relevance.map_or(0.0, |r| self.relevance * r) + self.salience * salience + self.recency * recency
    }
}

/// The parts of one hit's score, for `recall --explain` and `--json`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ScoreParts {
    pub score: f64,
    /// Normalised lexical relevance in [0, 1]; absent for an empty query.
    pub relevance: Option<f64>,
    /// Raw BM25 (higher is better); absent for an empty query.
    pub bm25: Option<f64>,
    pub salience: f64,
    pub recency: f64,
}
