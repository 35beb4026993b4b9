//! The span reader: which words of a message are its value for a slot, read from the
//! encoder's token states rather than from phrase patterns.
//!
//! For each slot it holds two rows over the last hidden state of a token: how likely the
//! value starts there, and how likely it ends there (the extractive reading-comprehension
//! head, over a frozen encoder). Position 0 (`[CLS]`) stands for "no value here". A span
//! starts at a word's first piece, ends at a word's last, and is at most [`MAX_SPAN`]
//! tokens long. Trained on hand-labelled messages (`bench/topics/spans/`) by
//! `mneme-bench spans train`, full-batch Adam as the topic layer is.

use serde::{Deserialize, Serialize};

use crate::topics::{Adam, dot, softmax};

/// Longest value, in WordPiece tokens.
pub const MAX_SPAN: usize = 8;

/// One message as the reader sees it: the encoder's last hidden state per token, and
/// whether each token begins a word.
#[derive(Debug, Clone)]
pub struct Tokens<'a> {
    pub states: &'a [Vec<f32>],
    pub word_starts: &'a [bool],
}

/// A span read for a slot: token positions (inclusive) and the probability of the pair.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Span {
    pub start: usize,
    pub end: usize,
    pub p: f32,
    /// The probability the head gives to "no value" (position 0 for both ends).
    pub p_none: f32,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SpanReader {
    /// The encoder whose token states this was trained on.
    pub model: String,
    pub dim: usize,
    pub slots: Vec<String>,
    /// Per slot: start row, start bias, end row, end bias.
    pub start: Vec<Vec<f32>>,
    pub start_bias: Vec<f32>,
    pub end: Vec<Vec<f32>>,
    pub end_bias: Vec<f32>,
}

/// One training example: a message, a slot index, and the value's token span (`None`: the
/// message names no value for the slot).
#[derive(Debug, Clone)]
pub struct Example {
    pub states: Vec<Vec<f32>>,
    pub word_starts: Vec<bool>,
    pub slot: usize,
    pub span: Option<(usize, usize)>,
}

#[derive(Debug, Clone, Copy)]
pub struct Training {
    pub epochs: usize,
    pub learning_rate: f32,
    pub l2: f32,
}

impl Default for Training {
    fn default() -> Self {
        Training { epochs: 300, learning_rate: 0.02, l2: 1e-4 }
    }
}

static BUILTIN: std::sync::OnceLock<Option<SpanReader>> = std::sync::OnceLock::new();
static BUILTIN_OLD: std::sync::OnceLock<Option<SpanReader>> = std::sync::OnceLock::new();

impl SpanReader {
    /// The compiled-in reader (`data/spans.json`), if it was trained on the encoder `model`.
    pub fn builtin(model: &str) -> Option<&'static SpanReader> {
        BUILTIN
            .get_or_init(|| serde_json::from_str(include_str!("../data/spans.json")).ok())
            .as_ref()
            .filter(|r| r.model == model && r.start.len() == r.slots.len() && r.end.len() == r.slots.len())
    }

    /// The compiled-in old-value head (`data/olds.json`, one pseudo-slot `old` for every
    /// slot): which words of a message name the value it replaces ("We migrated our
    /// servers to Hostinger because **Railway** kept going down"), if it was trained on
    /// the encoder `model`.
    /// Trained by `mneme-bench spans --old` on `bench/topics/spans/olds_train.jsonl`.
    pub fn builtin_old(model: &str) -> Option<&'static SpanReader> {
        BUILTIN_OLD
            .get_or_init(|| serde_json::from_str(include_str!("../data/olds.json")).ok())
            .as_ref()
            .filter(|r| r.model == model && r.start.len() == 1 && r.end.len() == 1)
    }

    pub fn slot_index(&self, slot: &str) -> Option<usize> {
        self.slots.iter().position(|s| s == slot)
    }

    /// The best span for `slot` in the message, with its probability beside "no value";
    /// `None` when the slot is unknown, the dimension is not the reader's, or the message
    /// has no word between `[CLS]` and `[SEP]`.
    pub fn read(&self, tokens: &Tokens<'_>, slot: usize) -> Option<Span> {
        self.read_where(tokens, slot, |_, _| true)
    }

    /// The likeliest span of `slot` among those `keep(start, end)` accepts (the same
    /// probabilities as [`SpanReader::read`]: a span left out does not lend its mass).
    pub fn read_where(&self, tokens: &Tokens<'_>, slot: usize, keep: impl Fn(usize, usize) -> bool) -> Option<Span> {
        let n = tokens.states.len();
        if slot >= self.slots.len() || n < 3 || tokens.states[0].len() != self.dim {
            return None;
        }
        let ps = softmax(&logits(&self.start[slot], self.start_bias[slot], tokens.states));
        let pe = softmax(&logits(&self.end[slot], self.end_bias[slot], tokens.states));
        let mut best: Option<Span> = None;
        for i in 1..n - 1 {
            if !tokens.word_starts[i] {
                continue;
            }
            for j in i..(i + MAX_SPAN).min(n - 1) {
                // A span ends where the next token starts a word (or at [SEP]).
                if !tokens.word_starts.get(j + 1).copied().unwrap_or(true) {
                    continue;
                }
                let p = ps[i] * pe[j];
                if best.is_none_or(|b| p > b.p) && keep(i, j) {
                    best = Some(Span { start: i, end: j, p, p_none: ps[0] * pe[0] });
                }
            }
        }
        best
    }

    /// Trains one start row and one end row per slot on `examples`.
    pub fn train(model: &str, slots: Vec<String>, examples: &[Example], settings: Training) -> SpanReader {
        let dim = examples.iter().find_map(|e| e.states.first()).map_or(0, Vec::len);
        let k = slots.len();
        // Flat parameters: start rows, start biases, end rows, end biases.
        let rows = k * dim;
        let size = 2 * (rows + k);
        let mut theta = vec![0.0f32; size];
        let mut adam = Adam::new(size, settings.learning_rate, settings.l2);
        let n = examples.len().max(1) as f32;
        let offset = |end: bool| if end { rows + k } else { 0 };
        for _ in 0..settings.epochs {
            let mut grad = vec![0.0f32; size];
            for e in examples.iter().filter(|e| e.slot < k && e.states.len() >= 3) {
                let (target_start, target_end) = e.span.unwrap_or((0, 0));
                for (end, target) in [(false, target_start), (true, target_end)] {
                    let base = offset(end);
                    let row = &theta[base + e.slot * dim..base + (e.slot + 1) * dim];
                    let p = softmax(&logits(row, theta[base + rows + e.slot], &e.states));
                    for (t, (h, pt)) in e.states.iter().zip(&p).enumerate() {
                        let g = (pt - f32::from(u8::from(t == target))) / n;
                        if g == 0.0 {
                            continue;
                        }
                        let at = base + e.slot * dim;
                        grad[at..at + dim].iter_mut().zip(h).for_each(|(gr, x)| *gr += g * x);
                        grad[base + rows + e.slot] += g;
                    }
                }
            }
            adam.step(&mut theta, grad, |j| (rows..rows + k).contains(&j) || j >= 2 * rows + k);
        }
        let split = |block: &[f32]| block.chunks(dim.max(1)).map(<[f32]>::to_vec).collect::<Vec<_>>();
        SpanReader {
            model: model.to_string(),
            dim,
            slots,
            start: split(&theta[..rows]),
            start_bias: theta[rows..rows + k].to_vec(),
            end: split(&theta[rows + k..2 * rows + k]),
            end_bias: theta[2 * rows + k..].to_vec(),
        }
    }
}

/// One row's score at each token.
fn logits(row: &[f32], bias: f32, states: &[Vec<f32>]) -> Vec<f32> {
    states.iter().map(|h| dot(row, h) + bias).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Token states on three axes: "filler", "value-like", and "[CLS]/[SEP]".
    fn message(kinds: &[u8]) -> (Vec<Vec<f32>>, Vec<bool>) {
        let states = kinds
            .iter()
            .map(|k| match k {
                0 => vec![0.0, 0.0, 1.0],
                1 => vec![1.0, 0.0, 0.0],
                _ => vec![0.0, 1.0, 0.0],
            })
            .collect();
        (states, vec![true; kinds.len()])
    }

    /// The compiled-in readers load for the encoder they were trained on (a file that did
    /// not parse would turn the reading off without a word).
    #[test]
    fn the_compiled_in_readers_load() {
        let spans: SpanReader = serde_json::from_str(include_str!("../data/spans.json")).expect("spans.json");
        assert!(SpanReader::builtin(&spans.model).is_some());
        let old: SpanReader = serde_json::from_str(include_str!("../data/olds.json")).expect("olds.json");
        assert_eq!(old.slots, ["old"]);
        assert_eq!(old.dim, spans.dim);
        assert!(SpanReader::builtin_old(&old.model).is_some());
        assert!(SpanReader::builtin_old("another-model").is_none());
    }

    #[test]
    fn training_finds_the_value_where_the_examples_put_it() {
        // [CLS] filler filler VALUE filler [SEP], the value at varying places.
        let mut examples = Vec::new();
        for at in 1..5 {
            let mut kinds = vec![0u8, 1, 1, 1, 1, 1, 0];
            kinds[at] = 2;
            let (states, word_starts) = message(&kinds);
            examples.push(Example { states, word_starts, slot: 0, span: Some((at, at)) });
        }
        // A message with no value-like token names no value.
        let (states, word_starts) = message(&[0, 1, 1, 1, 0]);
        examples.push(Example { states, word_starts, slot: 0, span: None });
        let reader = SpanReader::train("test-model", vec!["city".into()], &examples, Training::default());
        let (states, word_starts) = message(&[0, 1, 2, 1, 1, 0]);
        let span = reader.read(&Tokens { states: &states, word_starts: &word_starts }, 0).expect("a span");
        assert_eq!((span.start, span.end), (2, 2));
        assert!(span.p > span.p_none, "{span:?}");
        let (states, word_starts) = message(&[0, 1, 1, 1, 0]);
        let none = reader.read(&Tokens { states: &states, word_starts: &word_starts }, 0).expect("a reading");
        assert!(none.p_none > none.p, "{none:?}");
        assert!(reader.read(&Tokens { states: &states, word_starts: &word_starts }, 1).is_none(), "an unknown slot has no reading");
    }
}
