//! Turning any user text into a safe FTS5 query.
//!
//! User text is never passed to FTS5's query language. It is split into alphanumeric
//! tokens (Unicode-aware), common English stopwords are dropped (unless nothing else
//! is left), and each remaining token is double-quoted and OR-ed. Because a token holds
//! only letters and digits, no FTS5 operator, column filter or quote can survive into
//! the expression.

/// English stopwords dropped from queries (the list of the benchmark's fts5 baseline),
/// sorted (binary search).
const STOPWORDS: &[&str] = &[
    "a",
    "about",
    "above",
    "after",
    "again",
    "against",
    "all",
    "am",
    "an",
    "and",
    "any",
    "are",
    "as",
    "at",
    "be",
    "because",
    "been",
    "before",
    "being",
    "below",
    "between",
    "both",
    "but",
    "by",
    "can",
    "could",
    "d",
    "did",
    "do",
    "does",
    "doing",
    "down",
    "during",
    "each",
    "few",
    "for",
    "from",
    "further",
    "had",
    "has",
    "have",
    "having",
    "he",
    "her",
    "here",
    "hers",
    "herself",
    "him",
    "himself",
    "his",
    "how",
    "i",
    "if",
    "in",
    "into",
    "is",
    "it",
    "its",
    "itself",
    "just",
    "ll",
    "m",
    "me",
    "more",
    "most",
    "my",
    "myself",
    "no",
    "nor",
    "not",
    "now",
    "of",
    "off",
    "on",
    "once",
    "only",
    "or",
    "other",
    "our",
    "ours",
    "ourselves",
    "out",
    "over",
    "own",
    "re",
    "s",
    "same",
    "she",
    "should",
    "so",
    "some",
    "such",
    "t",
    "than",
    "that",
    "the",
    "their",
    "theirs",
    "them",
    "themselves",
    "then",
    "there",
    "these",
    "they",
    "this",
    "those",
    "through",
    "to",
    "too",
    "under",
    "until",
    "up",
    "ve",
    "very",
    "was",
    "we",
    "were",
    "what",
    "when",
    "where",
    "which",
    "while",
    "who",
    "whom",
    "why",
    "will",
    "with",
    "would",
    "you",
    "your",
    "yours",
    "yourself",
    "yourselves",
];

/// Whether `word` (lowercase) is one of the English stopwords queries drop.
pub fn is_stopword(word: &str) -> bool {
    STOPWORDS.binary_search(&word).is_ok()
}

/// At most this many distinct tokens go into one query; the rest are ignored.
pub const MAX_QUERY_TOKENS: usize = 64;

/// Lowercased alphanumeric tokens of `text`, stopwords removed unless that leaves nothing,
/// de-duplicated in first-seen order.
pub fn query_tokens(text: &str) -> Vec<String> {
    let all: Vec<String> = text.split(|c: char| !c.is_alphanumeric()).filter(|t| !t.is_empty()).map(|t| t.to_lowercase()).collect();
    let kept: Vec<&String> = all.iter().filter(|t| !is_stopword(t)).collect();
    let chosen: Vec<&String> = if kept.is_empty() { all.iter().collect() } else { kept };
    let mut out: Vec<String> = Vec::new();
    for t in chosen {
        if !out.contains(t) {
            out.push(t.clone());
            if out.len() == MAX_QUERY_TOKENS {
                break;
            }
        }
    }
    out
}

/// Phrases of a question that say *when* or *whom about* rather than *what*: its time
/// frame ("these days", "at the moment") and the agent's name for the person it serves
/// ("the user's"). They match any turn that mentions a day or a user ("summarize the pros
/// and cons of a 4 day work week" for "What city is the user based in these days?").
const FRAME: &[&[&str]] = &[
    &["these", "days"],
    &["at", "the", "moment"],
    &["at", "the", "minute"],
    &["at", "present"],
    &["right", "now"],
    &["nowadays"],
    &["currently"],
    &["presently"],
    &["the", "user"],
    &["the", "users"],
    &["this", "user"],
    &["derzeit"],
    &["zurzeit"],
    &["momentan"],
];

/// [`query_tokens`] of a retrieval query without its frame (`FRAME`): the words that say
/// what is asked. A query that is all frame keeps its words.
pub fn retrieval_tokens(text: &str) -> Vec<String> {
    let all: Vec<String> = text.split(|c: char| !c.is_alphanumeric()).filter(|t| !t.is_empty()).map(|t| t.to_lowercase()).collect();
    let mut kept: Vec<&str> = Vec::with_capacity(all.len());
    let mut i = 0;
    while i < all.len() {
        match FRAME.iter().find(|p| all[i..].len() >= p.len() && p.iter().zip(&all[i..]).all(|(a, b)| a == b)) {
            Some(p) => i += p.len(),
            None => {
                kept.push(&all[i]);
                i += 1;
            }
        }
    }
    let tokens = query_tokens(&kept.join(" "));
    if tokens.is_empty() { query_tokens(text) } else { tokens }
}

/// Whether `text` holds `word` as whole words (no letter or digit right before or after
/// it), compared as given: lower-case both for a case-insensitive check.
pub fn contains_word(text: &str, word: &str) -> bool {
    !word.is_empty()
        && text.match_indices(word).any(|(i, _)| {
            text[..i].chars().next_back().is_none_or(|c| !c.is_alphanumeric())
                && text[i + word.len()..].chars().next().is_none_or(|c| !c.is_alphanumeric())
        })
}

/// An FTS5 MATCH expression (`"tok1" OR "tok2" ...`) for `text`, or `None` when the text
/// has no searchable token.
pub fn fts5_expression(text: &str) -> Option<String> {
    fts5_any(&query_tokens(text))
}

/// The FTS5 expression matching any of `tokens` (each one a phrase), or `None` for none.
pub fn fts5_any(tokens: &[String]) -> Option<String> {
    fts5_joined(tokens, " OR ")
}

/// The FTS5 expression matching all of `tokens` (each one a phrase), or `None` for none.
pub fn fts5_all(tokens: &[String]) -> Option<String> {
    fts5_joined(tokens, " AND ")
}

fn fts5_joined(tokens: &[String], operator: &str) -> Option<String> {
    (!tokens.is_empty()).then(|| tokens.iter().map(|t| fts5_phrase(t)).collect::<Vec<_>>().join(operator))
}

/// One token as an FTS5 phrase: double-quoted, an inner quote doubled (FTS5's escape), so
/// even a token that did not come from [`query_tokens`] stays one plain phrase.
pub fn fts5_phrase(token: &str) -> String {
    format!("\"{}\"", token.replace('"', "\"\""))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_possessive_is_its_word_not_a_contraction() {
        // "dog's" searched "s" too, which matched every "that's" and "it's".
        assert_eq!(query_tokens("my dog's name"), ["dog", "name"]);
        assert_eq!(query_tokens("we'll see, I've been, they're here"), ["see"]);
    }

    #[test]
    fn a_retrieval_query_searches_what_it_asks_not_when_or_about_whom() {
        assert_eq!(retrieval_tokens("What city is the user based in these days?"), ["city", "based"]);
        assert_eq!(retrieval_tokens("Which DB backs the user's app at the moment?"), ["db", "backs", "app"]);
        assert_eq!(retrieval_tokens("how many days did the trip take"), ["many", "days", "trip", "take"]);
        assert_eq!(retrieval_tokens("the user"), ["user"], "a query that is all frame keeps its words");
    }

    #[test]
    fn operators_and_quotes_become_plain_tokens() {
        assert_eq!(
            fts5_expression(r#"summary:secret" OR NEAR(a b) * ^x -y"#).as_deref(),
            Some(r#""summary" OR "secret" OR "near" OR "b" OR "x" OR "y""#)
        );
    }

    #[test]
    fn a_phrase_keeps_a_quote_as_text() {
        assert_eq!(fts5_phrase(r#"a"b"#), r#""a""b""#);
        assert_eq!(fts5_any(&[]), None);
    }

    #[test]
    fn the_stopword_list_is_sorted_for_binary_search() {
        assert!(STOPWORDS.windows(2).all(|w| w[0] < w[1]), "STOPWORDS must be sorted and unique");
        assert!(is_stopword("the") && is_stopword("yourselves") && is_stopword("a"));
        assert!(!is_stopword("sedan") && !is_stopword("The"));
    }

    #[test]
    fn stopwords_are_dropped_unless_nothing_else_is_left() {
        assert_eq!(query_tokens("What is the capital of France?"), vec!["capital", "france"]);
        assert_eq!(query_tokens("who are you"), vec!["who", "are", "you"]);
        assert_eq!(fts5_expression("  ?!  "), None);
    }

    proptest! {
        #[test]
        fn any_text_gives_only_quoted_alphanumeric_tokens(text in any::<String>()) {
            if let Some(expr) = fts5_expression(&text) {
                for part in expr.split(" OR ") {
                    prop_assert!(part.len() >= 3 && part.starts_with('"') && part.ends_with('"'));
                    prop_assert!(part[1..part.len() - 1].chars().all(char::is_alphanumeric), "{part}");
                }
            }
        }
    }
}
