//! Full-text lexemes for PostgreSQL, computed by mneme rather than by the server.
//!
//! PostgreSQL's `to_tsvector` took most of the database's time in an ingest (its parser
//! and the stemmer run inside the server, serialised behind the write lock), so on
//! PostgreSQL mneme computes each full-text row's `tsvector` itself and the server only
//! stores and indexes it (schema v6). Queries go through the same function, so a query
//! word matches exactly the document words that stem alike:
//!
//! - a *word* is a run of alphanumeric characters (Unicode-aware), lowercased: the split
//!   [`crate::query::query_tokens`] makes of a query;
//! - a stopword ([`crate::query::is_stopword`]) takes its position but is not indexed,
//!   as PostgreSQL's `english` configuration does;
//! - every other word is stemmed with Snowball English, the stemmer of that configuration.
//!
//! A [`TsVector`] goes to the server in PostgreSQL's binary form (no parsing there); its
//! text form (`'lexeme':1A,4A 'other':2B`) and a query's [`tsquery`] quote each lexeme
//! with `'` and `\` escaped, so no text reaches the server as syntax. PostgreSQL's limits
//! are kept the way `to_tsvector` keeps them: positions above 16,383 count as 16,383, a
//! lexeme keeps at most 255 positions, a word longer than 2,047 bytes is not indexed, and
//! lexemes stop being added once their bytes would pass the 1 MiB a `tsvector` may hold.

use std::collections::BTreeMap;
use std::sync::LazyLock;

use rust_stemmers::{Algorithm, Stemmer};

use crate::query::is_stopword;

static ENGLISH: LazyLock<Stemmer> = LazyLock::new(|| Stemmer::create(Algorithm::English));

/// The highest position PostgreSQL stores (`MAXENTRYPOS - 1`).
const MAX_POSITION: usize = 16_383;
/// The position bits of a `WordEntryPos`.
const POSITION_BITS: u16 = 0x3fff;
/// Positions kept per lexeme (below PostgreSQL's `MAXNUMPOS`).
const MAX_POSITIONS: usize = 255;
/// The longest lexeme PostgreSQL indexes, in bytes (`MAXSTRLEN`).
const MAX_LEXEME_BYTES: usize = 2_047;
/// The bytes of lexemes one `tsvector` may hold (`MAXSTRPOS`).
const MAX_TSVECTOR_BYTES: usize = (1 << 20) - 1;

/// The weight of a part of a document: `ts_rank` weighs each class separately.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Weight {
    A,
    B,
    C,
}

impl Weight {
    /// PostgreSQL's `WordEntryPos` weight bits (A 3 … D 0, in bits 14 and 15).
    fn bits(self) -> u16 {
        match self {
            Weight::A => 3 << 14,
            Weight::B => 2 << 14,
            Weight::C => 1 << 14,
        }
    }
}

/// The words of `text` (alphanumeric runs), in order.
fn words(text: &str) -> impl Iterator<Item = &str> {
    text.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty())
}

/// A word's lexeme: lowercased and stemmed, or `None` for a stopword or an overlong word.
fn lexeme(word: &str) -> Option<String> {
    let lower = word.to_lowercase();
    if is_stopword(&lower) {
        return None;
    }
    let stem = ENGLISH.stem(&lower).into_owned();
    (stem.len() <= MAX_LEXEME_BYTES).then_some(stem)
}

/// The distinct lexemes of `text` (stemmed, lowercased, stopwords left out): what a
/// query word must share with a text to match it.
pub fn lexeme_set(text: &str) -> std::collections::HashSet<String> {
    words(text).filter_map(lexeme).collect()
}

/// A document's lexemes, PostgreSQL's `tsvector`: each lexeme (in PostgreSQL's order,
/// bytewise) with its positions as `WordEntryPos` values (position in the low 14 bits,
/// weight in the top two), increasing.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TsVector(BTreeMap<String, Vec<u16>>);

impl TsVector {
    /// The lexemes of a document made of `parts`, each weighted: positions run on from one
    /// part to the next, as PostgreSQL's `||` shifts them.
    pub fn new(parts: &[(&str, Weight)]) -> TsVector {
        let mut lexemes: BTreeMap<String, Vec<u16>> = BTreeMap::new();
        let (mut offset, mut bytes) = (0, 0);
        for &(text, weight) in parts {
            let mut count = 0;
            for word in words(text) {
                count += 1;
                let Some(lexeme) = lexeme(word) else { continue };
                let position = (offset + count).min(MAX_POSITION) as u16;
                let entry = position | weight.bits();
                if let Some(positions) = lexemes.get_mut(&lexeme) {
                    if positions.len() < MAX_POSITIONS && positions.last().is_none_or(|&p| p & POSITION_BITS < position) {
                        positions.push(entry);
                    }
                } else if bytes + lexeme.len() <= MAX_TSVECTOR_BYTES {
                    bytes += lexeme.len();
                    lexemes.insert(lexeme, vec![entry]);
                }
            }
            // Stopwords count too: the next part starts after this one's last word.
            offset += count;
        }
        TsVector(lexemes)
    }

    /// PostgreSQL's binary form (what `tsvectorrecv` reads): the number of lexemes, then
    /// each lexeme NUL-terminated, its number of positions and the positions (big-endian).
    pub fn to_binary(&self) -> Vec<u8> {
        let size: usize = self.0.iter().map(|(l, p)| l.len() + 3 + 2 * p.len()).sum();
        let mut out = Vec::with_capacity(4 + size);
        out.extend_from_slice(&(self.0.len() as u32).to_be_bytes());
        for (lexeme, positions) in &self.0 {
            out.extend_from_slice(lexeme.as_bytes());
            out.push(0);
            out.extend_from_slice(&(positions.len() as u16).to_be_bytes());
            for p in positions {
                out.extend_from_slice(&p.to_be_bytes());
            }
        }
        out
    }
}

/// PostgreSQL's text form: `'lexeme':1A,4A 'other':2B`.
impl std::fmt::Display for TsVector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (i, (lexeme, positions)) in self.0.iter().enumerate() {
            let mut quoted = String::with_capacity(lexeme.len() + 2);
            quote(&mut quoted, lexeme);
            write!(f, "{}{quoted}:", if i > 0 { " " } else { "" })?;
            for (j, p) in positions.iter().enumerate() {
                let weight = ["D", "C", "B", "A"][usize::from(p >> 14)];
                write!(f, "{}{}{weight}", if j > 0 { "," } else { "" }, p & POSITION_BITS)?;
            }
        }
        Ok(())
    }
}

/// The `tsquery` (text form) matching documents with every indexed word of `token` (one
/// word for a token of `query_tokens`), or `None` when it has none (a stopword).
pub fn tsquery(token: &str) -> Option<String> {
    let mut out = String::new();
    for lexeme in words(token).filter_map(lexeme) {
        if !out.is_empty() {
            out.push_str(" & ");
        }
        quote(&mut out, &lexeme);
    }
    (!out.is_empty()).then_some(out)
}

fn quote(out: &mut String, lexeme: &str) {
    out.push('\'');
    for c in lexeme.chars() {
        match c {
            '\'' => out.push_str("''"),
            '\\' => out.push_str("\\\\"),
            c => out.push(c),
        }
    }
    out.push('\'');
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tsvector(parts: &[(&str, Weight)]) -> String {
        TsVector::new(parts).to_string()
    }

    #[test]
    fn words_are_lowercased_stemmed_and_stopwords_keep_their_place() {
        assert_eq!(tsvector(&[("The cats were Running, running!", Weight::A)]), "'cat':2A 'run':4A,5A");
        assert_eq!(tsvector(&[("", Weight::A)]), "");
        assert_eq!(tsvector(&[("the of and", Weight::A)]), "");
    }

    #[test]
    fn parts_keep_their_weights_and_positions_run_on() {
        let v = tsvector(&[("red sedan", Weight::A), ("my sedan is red", Weight::B), ("8 May 2023", Weight::C)]);
        assert_eq!(v, "'2023':9C '8':7C 'may':8C 'red':1A,6B 'sedan':2A,4B");
        // Trailing stopwords of one part still move the next part on.
        assert_eq!(tsvector(&[("cars are", Weight::A), ("cars", Weight::B)]), "'car':1A,3B");
    }

    #[test]
    fn queries_stem_like_documents_and_a_stopword_has_no_lexeme() {
        assert_eq!(tsquery("Running").as_deref(), Some("'run'"));
        assert_eq!(tsquery("the"), None);
        assert_eq!(tsquery("well-known").as_deref(), Some("'well' & 'known'"));
        assert_eq!(tsquery("Ünïcode").as_deref(), Some("'ünïcode'"));
    }

    #[test]
    fn text_never_becomes_syntax() {
        // Punctuation splits words, so no quote, colon or operator survives.
        // ("s" of "it's" and a lone "d" are contraction tails: stopwords, like "'ll" and "'ve".)
        assert_eq!(tsvector(&[("it's a:1 'b' | !c \\ d", Weight::A)]), "'1':4A 'b':5A 'c':6A");
        let mut out = String::new();
        quote(&mut out, "o'k\\");
        assert_eq!(out, r"'o''k\\'");
    }

    #[test]
    fn the_binary_form_is_what_tsvectorrecv_reads() {
        let v = TsVector::new(&[("red sedan", Weight::A), ("red", Weight::B)]);
        let mut want = vec![0, 0, 0, 2];
        want.extend_from_slice(b"red\0");
        want.extend_from_slice(&[0, 2, 0xc0, 1, 0x80, 3]);
        want.extend_from_slice(b"sedan\0");
        want.extend_from_slice(&[0, 1, 0xc0, 2]);
        assert_eq!(v.to_binary(), want);
        assert_eq!(TsVector::new(&[]).to_binary(), [0, 0, 0, 0]);
    }

    #[test]
    fn postgres_limits_are_kept() {
        let many = "word ".repeat(300);
        let v = tsvector(&[(&many, Weight::A)]);
        assert_eq!(v.matches(',').count(), MAX_POSITIONS - 1, "at most {MAX_POSITIONS} positions");
        let far = format!("{} zebra", "x ".repeat(20_000));
        assert!(tsvector(&[(&far, Weight::A)]).contains("'zebra':16383A"));
        let long = "y".repeat(MAX_LEXEME_BYTES + 1);
        assert_eq!(tsvector(&[(&format!("{long} ok"), Weight::A)]), "'ok':2A");
    }
}
