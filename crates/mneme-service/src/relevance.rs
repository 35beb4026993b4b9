//! Relevance that means something. The ranking's `relevance` is normalised to the best
//! candidate, so the top hit of any query scores near 1 and cannot say "nothing
//! relevant". `ScoreParts::relevant` is a calibrated probability instead: a logistic
//! function of two absolute signals, the hit's cosine to the query (with the model) and
//! the share of the query's words its text holds (`coverage`: stemmed, stopwords left
//! out), fitted on LoCoMo conversations and checked on others (`bench/relevance/`,
//! BENCHMARKS.md). A hit scored 0.5 was evidence for its question about half the time.
//! Retrieval drops hits below `retrieval.min_relevant` (a live fact of a slot the query
//! asks about always stays), so a query about something never said answers empty.

use std::collections::HashSet;

/// `[bias, cosine, coverage]`, fitted with the model attached.
const WITH_MODEL: [f64; 3] = [-4.723, 1.004, 3.873];
/// `[bias, coverage]`, fitted without a model (lexical retrieval).
const LEXICAL: [f64; 2] = [-4.403, 4.024];

/// The share of `query`'s lexemes found in `text`'s; `None` when the query has none.
pub(crate) fn coverage(query: &HashSet<String>, text: &str) -> Option<f64> {
    if query.is_empty() {
        return None;
    }
    let words = mneme_core::lexemes::lexeme_set(text);
    Some(query.iter().filter(|q| words.contains(*q)).count() as f64 / query.len() as f64)
}

/// The calibrated probability that a hit is relevant, from its cosine to the query
/// (`None` without a model or vector) and its coverage.
pub(crate) fn probability(cosine: Option<f64>, coverage: f64, model: bool) -> f64 {
    let z = match (model, cosine) {
        (true, Some(c)) => WITH_MODEL[0] + WITH_MODEL[1] * c + WITH_MODEL[2] * coverage,
        _ => LEXICAL[0] + LEXICAL[1] * coverage,
    };
    1.0 / (1.0 + (-z).exp())
}
