//! How retrieval ranks candidates: a weighted blend of relevance, current salience and
//! recency.
//!
//! ```text
//! score     = w_rel * relevance + w_sal * salience + w_rec * recency
//! fused     = (1 - dense_share) * lexical + dense_share * dense
//!             + speaker_boost                  (if the record's sender is named in the query)
//! own       = fused / max fused among the candidates
//! relevance = (own + neighbour_share * max(own of the previous, own of the next record
//!              in its conversation thread)) / (1 + neighbour_share)
//! lexical   = bm25 / max bm25 among the lexical candidates          (0 if not matched;
//!             BM25 over the record's text, weight 1, its thread context, context_weight,
//!             and its date words, date_weight)
//! dense     = (cos - min cos) / (max cos - min cos) over the dense candidates
//!                                                  (0 if not a dense candidate)
//! recency   = 0.5 ^ (age of the event / recency_half_life)   (1 for evergreen records)
//! ```
//!
//! With an empty query the relevance term is absent, so salience and recency alone rank.
//! Without vectors (no model, or none stored yet) `dense_share` is ignored and relevance
//! is the lexical part alone.

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

use crate::decay::unix_seconds;
use crate::error::{CoreError, CoreResult};
use crate::record::MemoryType;

/// The smallest non-zero `max_term_matches`: below it, ordinary words of a small store
/// would lose their BM25 weight.
pub const MIN_TERM_MATCHES: usize = 100;
/// The largest `max_term_matches`: the per-word probe holds this many record numbers.
pub const MAX_TERM_MATCHES: usize = 1_000_000;

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
    /// A query word matching more records than this is "frequent": BM25 is computed over
    /// the other words only, and the frequent word is scored from its newest matches
    /// (`mneme-store/src/search.rs`), so a query's cost no longer grows with the store.
    /// Default 2000; 0 scores every word over all its matches (unbounded work).
    pub max_term_matches: usize,
    /// Share of the dense (embedding) similarity in relevance, in [0, 1]. Default 0.4,
    /// chosen on the LoCoMo dev half (BENCHMARKS.md, "Conversation context").
    pub dense_share: f64,
    /// BM25 weight of a record's conversation context (its thread neighbours' text)
    /// against 1 for its own text. Default 0.25; 0 ignores the context.
    pub context_weight: f64,
    /// BM25 weight of a record's event date in words (`8 May 2023`). Default 1.
    pub date_weight: f64,
    /// Added to the fused relevance of an event whose sender is named in the query.
    /// Default 0.2.
    pub speaker_boost: f64,
    /// How much of the best thread neighbour's relevance a record inherits (the answer
    /// follows the question). Default 0.3; 0 turns it off.
    pub neighbour_share: f64,
    /// How many nearest neighbours by embedding join the candidates. Default 100.
    pub dense_pool: usize,
    /// Memory types whose recency is always 1 (facts and skills do not get stale by
    /// age); pinned records are evergreen too. Default `["semantic", "competence"]`.
    pub evergreen: TypeSet,
    /// Maximal marginal relevance: 1 ranks by score alone (off); lower values trade
    /// score for diversity among the results (needs vectors). Default 1.
    pub mmr_lambda: f64,
    /// Hits scoring below this are dropped. Default 0.
    pub min_score: f64,
    /// "Nothing relevant": a candidate that shares no word with the query and is not a fact
    /// of the slot it asks about is kept only when the model's cosine similarity to the
    /// query reaches this. An absolute bar, unlike the normalised relevance (whose best
    /// candidate is always 1): all-MiniLM-L6-v2 puts unrelated texts below about 0.16 and
    /// loose paraphrases from about 0.21 (BENCHMARKS.md, "Nothing relevant"). Default 0.2;
    /// 0 keeps every nearest neighbour.
    pub min_cosine: f64,
    /// Added to the score of a live fact whose slot the query asks about ("where does
    /// the user live?" → the `lives in` fact; `mneme_truth`). Default 1; 0 turns
    /// it off.
    pub slot_boost: f64,
    /// The topic layer (`mneme_truth::topics`, needs the embedding model) reads which
    /// slot a sentence is about by meaning; its answers count when their probability
    /// reaches this. A query about a slot then gets that slot's facts, and a fact yields
    /// to a newer statement on its topic that extraction did not turn into a fact
    /// ("been in portland about 6 yrs now" after "I live in Austin"). Default 0.3 (chosen
    /// on the tune split; on held-out phrasing 77 % of its answers were right and it read
    /// 74 % of the statements, BENCHMARKS.md); 1 turns it off.
    pub topic_min_p: f64,
    /// The span reader (`mneme_truth::spans`, needs the embedding model) reads the value a
    /// user's message gives when no phrase matched it ("i do backend stuff at nike"): it
    /// is written as a fact (confidence 0.6, tagged `extraction:reader`) when both the
    /// topic layer's probability for the slot and the span's share against "no value"
    /// reach this. Default 0.5; 1 turns it off.
    pub read_min_p: f64,
    /// The value-kind layer (`TopicModel::values`, needs the embedding model) reads which
    /// slots a value alone looks like a value of. A fact from the conversation whose value
    /// has less than this probability for its slot's kind (`mneme_truth::value_kin`) is
    /// not written ("lives in: Bluehost" from "we're on Bluehost now"); the message stays.
    /// Default 0.02 (on values never trained on, 0.9 % of right values refused and 36 %
    /// of values paired with a slot of another kind, BENCHMARKS.md); 0 turns it off.
    pub value_min_p: f64,
    /// A fact below this confidence comes after the message it was read from (its first
    /// `evidence`) when recall ranks it first for the slot a query asks about: the words,
    /// with their date, before a value extraction is unsure of. A fact from the
    /// conversation has, with the embedding model, the value-kind layer's probability for
    /// its slot's kind as its confidence when that is lower than its source's (0.8 stated,
    /// 0.6 read): "is allergic to: list" from "Add lanolin to my allergy list, sadly" has
    /// 0.10. Default 0.5 (chosen on the truth families, BENCHMARKS.md); 0 turns it off.
    pub sure_confidence: f64,
    /// A fact of the user's below this confidence is not stated in the context block: the
    /// message it was read from is quoted in its place, with its date, unless that message
    /// names a value the user has since changed. Lower than `sure_confidence`: a quote
    /// costs the block room and may name other values, so only values extraction doubts
    /// most are replaced. Default 0.2 (BENCHMARKS.md); 0 turns it off.
    pub quote_confidence: f64,
    /// The old-value head (`SpanReader::builtin_old`, needs the embedding model) reads
    /// whether a message names the value the speaker holds as the one it replaces
    /// ("We migrated our servers to Hostinger because Railway kept going down"). When its
    /// share against "no old value" reaches this, the span reader's value past the held
    /// one is taken even when the held value's own reading is far stronger (otherwise
    /// that reads as a restatement in passing), and the message is about the held value's
    /// slot. Default 0.8 (chosen on truth families D and E and
    /// `swaps_a` against 0.2, 0.5 and 0.9, BENCHMARKS.md); 1 turns it off.
    pub old_min_p: f64,
    /// The resting layer (`TopicModel::resting`, needs the embedding model) reads which
    /// fact's value a statement silently rests on ("the gym is a 5 minute walk from my
    /// flat" rests on where the user lives). A statement said before that fact changed
    /// comes back marked possibly outdated when the reading's probability reaches this.
    /// Default 0.3 (chosen on `bench/dependents/dev.jsonl`, BENCHMARKS.md); 1 turns it off.
    pub resting_min_p: f64,
    /// Hits whose calibrated relevance (`ScoreParts::relevant`: the probability that the
    /// record answers the query) is below this leave the answer, down to an empty one; a
    /// live fact of a slot the query asks about always stays. Default 0 (off): the
    /// calibration leans on shared words, so a match by meaning alone (a synonym, no
    /// shared word) scores about 0.01 and any floor that empties questions about people
    /// never mentioned (0.015: one in ten on held-out LoCoMo conversations) drops it too
    /// (BENCHMARKS.md). Raise it where shared words are expected.
    pub min_relevant: f64,
    /// For a question about the present (no past-tense words), the newer of equally
    /// relevant records wins: `present_boost · relevance · newness`, newness being the
    /// record's rank by time among the candidates (newest 1, oldest 0). Default 0.1.
    pub present_boost: f64,
}

impl Default for RankWeights {
    fn default() -> Self {
        RankWeights {
            relevance: 0.75,
            salience: 0.15,
            recency: 0.10,
            recency_half_life_days: 30.0,
            candidate_pool: 200,
            max_term_matches: 2000,
            dense_share: 0.4,
            context_weight: 0.25,
            date_weight: 1.0,
            speaker_boost: 0.2,
            neighbour_share: 0.3,
            dense_pool: 100,
            evergreen: TypeSet::of(&[MemoryType::Semantic, MemoryType::Competence]),
            mmr_lambda: 1.0,
            min_score: 0.0,
            min_cosine: 0.2,
            slot_boost: 1.0,
            topic_min_p: 0.3,
            read_min_p: 0.5,
            value_min_p: 0.02,
            sure_confidence: 0.5,
            quote_confidence: 0.2,
            old_min_p: 0.8,
            resting_min_p: 0.3,
            min_relevant: 0.0,
            present_boost: 0.1,
        }
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
        for (key, v) in [("retrieval.candidate_pool", self.candidate_pool), ("retrieval.dense_pool", self.dense_pool)] {
            if v == 0 {
                return Err(CoreError::invalid(key, "0 (must be at least 1)"));
            }
        }
        if self.max_term_matches != 0 && !(MIN_TERM_MATCHES..=MAX_TERM_MATCHES).contains(&self.max_term_matches) {
            return Err(CoreError::invalid(
                "retrieval.max_term_matches",
                format!("{} (must be 0, for no cap, or between {MIN_TERM_MATCHES} and {MAX_TERM_MATCHES})", self.max_term_matches),
            ));
        }
        for (key, v) in [("retrieval.dense_share", self.dense_share), ("retrieval.mmr_lambda", self.mmr_lambda)] {
            if !(0.0..=1.0).contains(&v) {
                return Err(CoreError::invalid(key, format!("{v} (must be between 0 and 1)")));
            }
        }
        for (key, v) in [
            ("retrieval.context_weight", self.context_weight),
            ("retrieval.date_weight", self.date_weight),
            ("retrieval.speaker_boost", self.speaker_boost),
            ("retrieval.neighbour_share", self.neighbour_share),
            ("retrieval.slot_boost", self.slot_boost),
            ("retrieval.present_boost", self.present_boost),
        ] {
            if !(v.is_finite() && (0.0..=10.0).contains(&v)) {
                return Err(CoreError::invalid(key, format!("{v} (must be a number between 0 and 10)")));
            }
        }
        if !(0.0..=1.0).contains(&self.topic_min_p) {
            return Err(CoreError::invalid("retrieval.topic_min_p", format!("{} (must be between 0 and 1)", self.topic_min_p)));
        }
        if !(0.0..=1.0).contains(&self.read_min_p) {
            return Err(CoreError::invalid("retrieval.read_min_p", format!("{} (must be between 0 and 1)", self.read_min_p)));
        }
        if !(0.0..=1.0).contains(&self.value_min_p) {
            return Err(CoreError::invalid("retrieval.value_min_p", format!("{} (must be between 0 and 1)", self.value_min_p)));
        }
        for (key, v) in [("retrieval.sure_confidence", self.sure_confidence), ("retrieval.quote_confidence", self.quote_confidence)] {
            if !(0.0..=1.0).contains(&v) {
                return Err(CoreError::invalid(key, format!("{v} (must be between 0 and 1)")));
            }
        }
        if !(0.0..=1.0).contains(&self.old_min_p) {
            return Err(CoreError::invalid("retrieval.old_min_p", format!("{} (must be between 0 and 1)", self.old_min_p)));
        }
        if !(0.0..=1.0).contains(&self.min_relevant) {
            return Err(CoreError::invalid("retrieval.min_relevant", format!("{} (must be between 0 and 1)", self.min_relevant)));
        }
        if !(0.0..=1.0).contains(&self.resting_min_p) {
            return Err(CoreError::invalid("retrieval.resting_min_p", format!("{} (must be between 0 and 1)", self.resting_min_p)));
        }
        if !(0.0..=1.0).contains(&self.min_cosine) {
            return Err(CoreError::invalid("retrieval.min_cosine", format!("{} (must be between 0 and 1)", self.min_cosine)));
        }
        if !self.min_score.is_finite() {
            return Err(CoreError::invalid("retrieval.min_score", format!("{} (must be a finite number)", self.min_score)));
        }
        Ok(())
    }

    /// Recency of a record of type `t`, honouring the evergreen exemption.
    pub fn recency_of(&self, t: MemoryType, pinned: bool, event: Timestamp, now: Timestamp) -> f64 {
        if pinned || self.evergreen.contains(t) { 1.0 } else { self.recency(event, now) }
    }

    /// Relevance from the normalised lexical and dense parts (`dense` is `None` when the
    /// query has no vector, so the lexical part stands alone).
    pub fn fuse(&self, lexical: f64, dense: Option<f64>) -> f64 {
        match dense {
            Some(d) => (1.0 - self.dense_share) * lexical + self.dense_share * d,
            None => lexical,
        }
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
    /// Fused relevance in [0, 1]; absent for an empty query.
    pub relevance: Option<f64>,
    /// Raw BM25 (higher is better); absent unless the record matched lexically.
    pub bm25: Option<f64>,
    /// Normalised lexical part of relevance; absent for an empty query.
    #[serde(default)]
    pub lexical: Option<f64>,
    /// Cosine similarity to the query's embedding; absent unless the record was a
    /// dense candidate.
    #[serde(default)]
    pub cosine: Option<f64>,
    /// Normalised dense part of relevance; absent when the query had no vector.
    #[serde(default)]
    pub dense: Option<f64>,
    /// The speaker boost applied (the record's sender is named in the query).
    #[serde(default)]
    pub speaker: Option<f64>,
    /// What the record inherited from its best thread neighbour (before normalising).
    #[serde(default)]
    pub neighbour: Option<f64>,
    pub salience: f64,
    pub recency: f64,
    /// The slot boost applied (a live fact of the slot the query asks about).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slot: Option<f64>,
    /// The present-tense bonus applied (`present_boost · relevance · newness`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub present: Option<f64>,
    /// The share of the query's words (stemmed, stopwords left out) that the record's
    /// text holds, in [0, 1]; absent for an empty query or one with no such word.
    #[serde(default)]
    pub coverage: Option<f64>,
    /// Calibrated relevance: the probability that the record answers the query, from its
    /// cosine to the query (with the model) and its `coverage` (`mneme-service`'s
    /// `relevance.rs`; a hit scored 0.5 was evidence for its question half the time on
    /// held-out LoCoMo conversations). Absent for an empty query.
    #[serde(default)]
    pub relevant: Option<f64>,
}

impl ScoreParts {
    /// The formula that produced `score`, with this hit's numbers, for `--explain`.
    pub fn formula(&self, w: &RankWeights) -> String {
        let mut f = format!("{:.2}·salience {:.3} + {:.2}·recency {:.3}", w.salience, self.salience, w.recency, self.recency);
        if let Some(r) = self.relevance {
            f = format!("{:.2}·relevance {r:.3} + {f}", w.relevance);
        }
        if let Some(s) = self.slot {
            f.push_str(&format!(" + slot {s:.2}"));
        }
        if let Some(p) = self.present {
            f.push_str(&format!(" + present {p:.3}"));
        }
        format!("score {:.4} = {f}", self.score)
    }
}

/// A set of memory types, written as a list of names in the configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TypeSet(u8);

impl TypeSet {
    pub fn of(types: &[MemoryType]) -> Self {
        TypeSet(types.iter().fold(0, |bits, t| bits | Self::bit(*t)))
    }

    pub fn contains(&self, t: MemoryType) -> bool {
        self.0 & Self::bit(t) != 0
    }

    pub fn types(&self) -> Vec<MemoryType> {
        MemoryType::ALL.into_iter().filter(|t| self.contains(*t)).collect()
    }

    fn bit(t: MemoryType) -> u8 {
        1 << MemoryType::ALL.iter().position(|x| *x == t).unwrap_or(0)
    }
}

impl Serialize for TypeSet {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.types().serialize(s)
    }
}

impl<'de> Deserialize<'de> for TypeSet {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(TypeSet::of(&Vec::<MemoryType>::deserialize(d)?))
    }
}
