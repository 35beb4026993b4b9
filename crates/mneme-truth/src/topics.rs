//! Which slot a sentence is about, by meaning: a softmax layer over the local encoder's
//! sentence vector, trained on a committed labelled set (`bench/topics/`, trained by
//! `mneme-bench topics train`). It generalises where the cue lists cannot: "been in
//! portland about 6 yrs now" and "wir sind nach Graz gezogen" are about `city` although
//! neither holds a cue the extractor knows. The classes are the slots of
//! [`crate::SLOTS`] and `none` (chit-chat, requests, other people's facts, plans).
//!
//! The layer belongs to one encoder: [`TopicModel::builtin`] answers only for the model
//! it was trained on. Pure: no I/O; the weights are compiled in.

use std::sync::OnceLock;

use serde::{Deserialize, Serialize};

/// The class of sentences about no slot.
pub const NONE: &str = "none";

/// A trained layer: `classes.len()` rows of `dim` weights and a bias each.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TopicModel {
    /// The encoder the layer was trained on (`Embedder::model_id`).
    pub model: String,
    pub dim: usize,
    pub classes: Vec<String>,
    pub bias: Vec<f32>,
    pub weights: Vec<Vec<f32>>,
}

/// A sentence's most likely class and its probability.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Topic<'a> {
    /// `None` for the `none` class.
    pub slot: Option<&'a str>,
    pub p: f32,
}

/// Training settings: full-batch Adam on the cross-entropy plus `l2` times the squared
/// weights; deterministic (zero start, no sampling).
#[derive(Debug, Clone, Copy)]
pub struct Training {
    pub epochs: usize,
    pub learning_rate: f32,
    pub l2: f32,
}

impl Default for Training {
    fn default() -> Self {
        Training { epochs: 400, learning_rate: 0.05, l2: 1e-4 }
    }
}

static BUILTIN: OnceLock<Option<TopicModel>> = OnceLock::new();
static RESTING: OnceLock<Option<TopicModel>> = OnceLock::new();

impl TopicModel {
    /// The compiled-in layer, if it was trained on the encoder `model`.
    pub fn builtin(model: &str) -> Option<&'static TopicModel> {
        BUILTIN
            .get_or_init(|| serde_json::from_str(include_str!("../data/topics.json")).ok())
            .as_ref()
            .filter(|m| m.model == model && m.weights.len() == m.classes.len())
    }

    /// The compiled-in second layer, if trained on the encoder `model`: which slot's value
    /// a sentence silently rests on without naming it ("the gym is a 5 minute walk from
    /// my flat" rests on `city`; "Petra signs off my expenses" on `manager`), trained on
    /// `bench/dependents/rests_train.jsonl`. Same classes as the topic layer.
    pub fn resting(model: &str) -> Option<&'static TopicModel> {
        RESTING
            .get_or_init(|| serde_json::from_str(include_str!("../data/rests.json")).ok())
            .as_ref()
            .filter(|m| m.model == model && m.weights.len() == m.classes.len())
    }

    /// Class probabilities for a unit sentence vector, in `classes` order; empty when the
    /// vector's dimension is not the layer's.
    pub fn probabilities(&self, v: &[f32]) -> Vec<f32> {
        if v.len() != self.dim {
            return Vec::new();
        }
        let logits: Vec<f32> = self.weights.iter().zip(&self.bias).map(|(w, b)| dot(w, v) + b).collect();
        softmax(&logits)
    }

    /// Class `i`'s weight vector as a unit direction and its norm: its logit for a unit
    /// vector `v` is `norm · cos(direction, v) + bias` (how a vector index scores it).
    pub fn direction(&self, i: usize) -> (Vec<f32>, f32) {
        let w = &self.weights[i];
        let norm = w.iter().map(|x| x * x).sum::<f32>().sqrt().max(f32::MIN_POSITIVE);
        (w.iter().map(|x| x / norm).collect(), norm)
    }

    /// The most likely class of a unit sentence vector.
    pub fn classify(&self, v: &[f32]) -> Option<Topic<'_>> {
        self.best(&self.probabilities(v))
    }

    /// The most likely class given the layer's logits (one per class, in `classes`
    /// order), for callers that compute them another way.
    pub fn topic_of_logits(&self, logits: &[f32]) -> Option<Topic<'_>> {
        if logits.len() != self.classes.len() {
            return None;
        }
        self.best(&softmax(logits))
    }

    fn best(&self, p: &[f32]) -> Option<Topic<'_>> {
        let (best, &pb) = p.iter().enumerate().max_by(|a, b| a.1.total_cmp(b.1))?;
        let class = self.classes[best].as_str();
        Some(Topic { slot: (class != NONE).then_some(class), p: pb })
    }

    /// Fits a layer to `(vector, class index)` examples. Classes are weighted equally
    /// per example: the layer learns how rare a slot mention is, which keeps it precise.
    pub fn train(model: &str, classes: Vec<String>, examples: &[(Vec<f32>, usize)], settings: Training) -> TopicModel {
        let dim = examples.first().map_or(0, |(v, _)| v.len());
        let k = classes.len();
        let mut w = vec![vec![0.0f32; dim]; k];
        let mut b = vec![0.0f32; k];
        let (mut mw, mut vw) = (vec![vec![0.0f32; dim]; k], vec![vec![0.0f32; dim]; k]);
        let (mut mb, mut vb) = (vec![0.0f32; k], vec![0.0f32; k]);
        let (beta1, beta2, eps) = (0.9f32, 0.999f32, 1e-8f32);
        let n = examples.len().max(1) as f32;
        for epoch in 1..=settings.epochs {
            let mut gw = vec![vec![0.0f32; dim]; k];
            let mut gb = vec![0.0f32; k];
            for (v, y) in examples {
                let logits: Vec<f32> = w.iter().zip(&b).map(|(wc, bc)| dot(wc, v) + bc).collect();
                let p = softmax(&logits);
                for c in 0..k {
                    let g = (p[c] - if c == *y { 1.0 } else { 0.0 }) / n;
                    gb[c] += g;
                    gw[c].iter_mut().zip(v).for_each(|(a, x)| *a += g * x);
                }
            }
            let (c1, c2) = (1.0 - beta1.powi(epoch as i32), 1.0 - beta2.powi(epoch as i32));
            for c in 0..k {
                for j in 0..dim {
                    let g = gw[c][j] + settings.l2 * w[c][j];
                    mw[c][j] = beta1 * mw[c][j] + (1.0 - beta1) * g;
                    vw[c][j] = beta2 * vw[c][j] + (1.0 - beta2) * g * g;
                    w[c][j] -= settings.learning_rate * (mw[c][j] / c1) / ((vw[c][j] / c2).sqrt() + eps);
                }
                mb[c] = beta1 * mb[c] + (1.0 - beta1) * gb[c];
                vb[c] = beta2 * vb[c] + (1.0 - beta2) * gb[c] * gb[c];
                b[c] -= settings.learning_rate * (mb[c] / c1) / ((vb[c] / c2).sqrt() + eps);
            }
        }
        TopicModel { model: model.to_string(), dim, classes, bias: b, weights: w }
    }
}

fn dot(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

fn softmax(logits: &[f32]) -> Vec<f32> {
    let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let exp: Vec<f32> = logits.iter().map(|l| (l - max).exp()).collect();
    let sum: f32 = exp.iter().sum();
    exp.into_iter().map(|e| e / sum).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn training_separates_what_the_examples_separate() {
        // Two clusters around two axes, and a third class around the diagonal.
        let examples: Vec<(Vec<f32>, usize)> = (0..30)
            .map(|i| {
                let e = (i % 5) as f32 * 0.02;
                match i % 3 {
                    0 => (vec![1.0 - e, e, 0.0], 0),
                    1 => (vec![e, 1.0 - e, 0.0], 1),
                    _ => (vec![0.0, e, 1.0 - e], 2),
                }
            })
            .collect();
        let classes = vec!["city".to_string(), "editor".to_string(), NONE.to_string()];
        let m = TopicModel::train("test-model", classes, &examples, Training { epochs: 300, ..Training::default() });
        assert_eq!(m.classify(&[0.9, 0.1, 0.0]).map(|t| t.slot), Some(Some("city")));
        assert_eq!(m.classify(&[0.1, 0.9, 0.0]).map(|t| t.slot), Some(Some("editor")));
        let none = m.classify(&[0.0, 0.1, 0.9]).expect("a class");
        assert_eq!(none.slot, None);
        assert!(none.p > 0.5, "{none:?}");
        assert!(m.probabilities(&[1.0, 0.0]).is_empty(), "a vector of another dimension has no topic");
    }

    #[test]
    fn the_builtin_layer_answers_only_for_its_own_encoder() {
        assert!(TopicModel::builtin("some-other-encoder").is_none());
        let m = TopicModel::builtin("all-MiniLM-L6-v2").expect("the compiled-in layer parses");
        assert_eq!(m.weights.len(), m.classes.len());
        assert!(m.weights.iter().all(|w| w.len() == m.dim));
        assert!(m.classes.iter().any(|c| c == NONE));
        for c in m.classes.iter().filter(|c| *c != NONE) {
            assert!(crate::slot(c).is_some(), "class {c} is a slot");
        }
        assert!(TopicModel::resting("some-other-encoder").is_none());
        let r = TopicModel::resting("all-MiniLM-L6-v2").expect("the compiled-in resting layer parses");
        assert_eq!((&r.classes, r.dim), (&m.classes, m.dim), "the same classes over the same encoder");
        assert!(r.weights.iter().all(|w| w.len() == r.dim));
    }

    #[test]
    fn a_change_puts_its_own_slot_and_what_comes_with_it_in_doubt() {
        assert_eq!(crate::resting_on("employer"), ["employer", "manager", "job_title"]);
        assert_eq!(crate::resting_on("city"), ["city"]);
        // A multi-valued slot's other values do not rest on the one that went.
        assert!(crate::resting_on("hobbies").is_empty());
        assert!(crate::resting_on("no-such-slot").is_empty());
    }
}
