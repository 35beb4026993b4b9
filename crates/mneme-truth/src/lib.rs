//! What a person says about themselves, as facts that can be reconciled over time.
//!
//! [`extract`] reads one utterance and returns [`Claim`]s: a slot (where the user lives,
//! works, their manager, diet, …; [`lexicon::SLOTS`]), a value and what the utterance
//! does to it (states it, adds or removes one of several, says it is no longer true, or
//! corrects an earlier value). First and second person are resolved: "I", "my", "we",
//! "ich", "mein", "wir" are the speaker; "my sister" and "Bruno" are someone else and
//! their claims are theirs. Questions, hypotheticals and plans are not facts.
//!
//! The method: sentences and clauses are split on punctuation and connectives; each
//! clause's words are stemmed (Snowball, English or German, chosen per utterance), so
//! a cue such as "move to" also matches "moving to" and "moved to"; slots are scored by
//! the cues and possessive nouns ("my manager") they contain and by typed values from
//! the gazetteers; the value is the typed value, or the name or noun phrase after the
//! cue. A clause with a value but no cue of its own ("…; it's Daniel now") takes the
//! slot of its neighbour in the same utterance. [`question_slots`] maps a question to
//! the slots it asks about with the same stems.
//!
//! Pure: no I/O; deterministic.

mod extract;
pub mod lexicon;
pub mod patterns;
pub mod spans;
pub mod topics;

pub use extract::{
    Claim, Op, asks_about_speaker, asserts_nothing, extract, extract_beside_questions, is_question, named_values, question_slots,
    tells_of_someone_else,
};
pub use lexicon::{SLOTS, SlotDef, SlotKind, resting_on, slot, value_kin};

/// The byte ranges where `value` occurs in `text` as whole words, ignoring case.
pub fn mentions(text: &str, value: &str) -> Vec<std::ops::Range<usize>> {
    let value = value.trim();
    if value.is_empty() {
        return Vec::new();
    }
    let word = |c: Option<char>| c.is_some_and(char::is_alphanumeric);
    text.char_indices()
        .filter(|&(i, _)| !word(text[..i].chars().next_back()))
        .filter_map(|(i, _)| {
            let mut rest = text[i..].char_indices();
            let mut end = i;
            for v in value.chars() {
                let (at, c) = rest.next()?;
                if !c.to_lowercase().eq(v.to_lowercase()) {
                    return None;
                }
                end = i + at + c.len_utf8();
            }
            (!word(text[end..].chars().next())).then_some(i..end)
        })
        .collect()
}

/// The items of a value that lists several ("hazelnuts, sesame and kiwi" → three; "&",
/// "und" join too); a value of one item is itself.
pub fn list_items(value: &str) -> Vec<&str> {
    value
        .split(',')
        .flat_map(|part| part.split(" and ").flat_map(|p| p.split(" und ")).flat_map(|p| p.split(" & ")))
        .map(str::trim)
        .filter(|item| !item.is_empty())
        .collect()
}

/// A value as compared between statements: lower case, inner whitespace collapsed,
/// aliases mapped to their canonical form ("PostgreSQL" and "postgres" are one value).
pub fn normalize_value(value: &str) -> String {
    let lower = value.split_whitespace().collect::<Vec<_>>().join(" ").to_lowercase();
    let lower = lower.trim_matches(|c: char| c == '.' || c == ',' || c == '!' || c == '"' || c == '\'').to_string();
    // Every gazetteer alias with its canonical value (the first slot's wins, as the scan
    // this replaces did): one lookup instead of a pass over every entry for each value.
    static ALIASES: std::sync::LazyLock<std::collections::HashMap<&'static str, &'static str>> = std::sync::LazyLock::new(|| {
        let mut map = std::collections::HashMap::new();
        for entry in SLOTS.iter().flat_map(|s| s.gazetteer) {
            if let Some((alias, canonical)) = entry.split_once('=') {
                map.entry(alias).or_insert(canonical);
            }
        }
        map
    });
    match ALIASES.get(lower.as_str()) {
        Some(canonical) => (*canonical).to_string(),
        None => lower,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_list_value_is_read_item_by_item() {
        assert_eq!(list_items("hazelnuts, sesame and kiwi"), ["hazelnuts", "sesame", "kiwi"]);
        assert_eq!(list_items("Procter & Gamble"), ["Procter", "Gamble"]);
        assert_eq!(list_items("Lisbon"), ["Lisbon"]);
        assert!(list_items(" , ").is_empty());
    }

    #[test]
    fn a_held_value_is_found_as_whole_words_in_any_case() {
        let text = "Finished the migration: CouchDB out, couchdb-free Db2 in. Not couchdbx.";
        let found: Vec<&str> = mentions(text, "CouchDB").into_iter().map(|r| &text[r]).collect();
        assert_eq!(found, ["CouchDB", "couchdb"]);
        assert!(mentions("Hansi is here", "Hans").is_empty(), "a name inside a longer one is not it");
        let text = "Zürich → München";
        assert_eq!(mentions(text, "münchen").iter().map(|r| &text[r.clone()]).collect::<Vec<_>>(), ["München"]);
        assert!(mentions("anything", " ").is_empty());
    }
}
