//! Which slot a sentence is about, by meaning: a softmax layer over the local encoder's
//! sentence vector, trained on a committed labelled set (`bench/topics/`, trained by
//! `mneme-bench topics train`). It generalises where the cue lists cannot: "been in
//! portland about 6 yrs now" and "wir sind nach Graz gezogen" are about `city` although
//! neither holds a cue the extractor knows. The classes are the slots of
//! [`crate::SLOTS`] and `none` (chit-chat, requests, other people's facts, plans).
//!
//! The compiled-in layer has a hidden ReLU layer beside the linear one ([`Hidden`]):
//! on the tuning set it read 5 points more of the slot statements at the same
//! precision (BENCHMARKS.md, "The topic layer").
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
    /// A hidden layer beside the linear one, when trained with one: its logits add to
    /// the linear logits. The linear rows stay the class directions a vector index
    /// searches with ([`TopicModel::direction`]); the hidden layer only sharpens the
    /// reading of each vector found.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hidden: Option<Hidden>,
}

/// A ReLU layer of `bias.len()` units over the sentence vector, and its output rows (one
/// per class, one weight per unit).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Hidden {
    pub weights: Vec<Vec<f32>>,
    pub bias: Vec<f32>,
    pub out: Vec<Vec<f32>>,
}

impl Hidden {
    fn activations(&self, v: &[f32]) -> Vec<f32> {
        self.weights.iter().zip(&self.bias).map(|(w, b)| (dot(w, v) + b).max(0.0)).collect()
    }
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
    /// Units of the hidden layer; 0 trains the linear layer alone.
    pub hidden: usize,
}

impl Default for Training {
    fn default() -> Self {
        Training { epochs: 400, learning_rate: 0.05, l2: 1e-4, hidden: 0 }
    }
}

static BUILTIN: OnceLock<Option<TopicModel>> = OnceLock::new();
static RESTING: OnceLock<Option<TopicModel>> = OnceLock::new();
static VALUES: OnceLock<Option<TopicModel>> = OnceLock::new();

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

    /// The compiled-in value-kind layer, if trained on the encoder `model`: which slot a
    /// value alone ("Bluehost", "Ottawa", "Marzipan") looks like a value of, over the
    /// slots (no `none` class), trained on the values of `bench/topics/spans/values_a.jsonl`
    /// and `swaps_a.jsonl` and the slots' known values (`mneme-bench values`).
    pub fn values(model: &str) -> Option<&'static TopicModel> {
        VALUES
            .get_or_init(|| serde_json::from_str(include_str!("../data/values.json")).ok())
            .as_ref()
            .filter(|m| m.model == model && m.weights.len() == m.classes.len())
    }

    /// Class probabilities for a unit sentence vector, in `classes` order; empty when the
    /// vector's dimension is not the layer's.
    pub fn probabilities(&self, v: &[f32]) -> Vec<f32> {
        if v.len() != self.dim {
            return Vec::new();
        }
        let mut logits: Vec<f32> = self.weights.iter().zip(&self.bias).map(|(w, b)| dot(w, v) + b).collect();
        if let Some(h) = &self.hidden {
            let a = h.activations(v);
            logits.iter_mut().zip(&h.out).for_each(|(l, o)| *l += dot(o, &a));
        }
        softmax(&logits)
    }

    /// Whether [`TopicModel::topic_of_logits`] over the linear logits is the whole
    /// reading (no hidden layer): a caller that has only cosines to the class directions
    /// needs the vectors otherwise.
    pub fn is_linear(&self) -> bool {
        self.hidden.is_none()
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
    /// With `settings.hidden` units, a ReLU layer is trained beside the linear one, from a
    /// fixed pseudo-random start (the same examples give the same layer).
    pub fn train(model: &str, classes: Vec<String>, examples: &[(Vec<f32>, usize)], settings: Training) -> TopicModel {
        let dim = examples.first().map_or(0, |(v, _)| v.len());
        let (k, h) = (classes.len(), settings.hidden);
        // One flat parameter vector: linear rows, biases, hidden rows, hidden biases,
        // output rows.
        let (lin, hid, out) = (k * dim + k, h * dim + h, k * h);
        let mut theta = vec![0.0f32; lin + hid + out];
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let scale = (2.0 / dim.max(1) as f32).sqrt();
        for x in &mut theta[lin..lin + h * dim] {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            *x = ((seed >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0) * scale;
        }
        let mut adam = Adam::new(theta.len(), settings.learning_rate, settings.l2);
        let n = examples.len().max(1) as f32;
        for _ in 0..settings.epochs {
            let grad = gradient(&theta, examples, (dim, k, h), n);
            // No decay on biases (the k linear ones sit at the end of the linear block).
            adam.step(&mut theta, grad, |j| (k * dim..lin).contains(&j) || (lin + h * dim..lin + hid).contains(&j));
        }
        let rows = |block: &[f32], width: usize| block.chunks(width.max(1)).map(<[f32]>::to_vec).collect::<Vec<_>>();
        let weights = rows(&theta[..k * dim], dim);
        let bias = theta[k * dim..lin].to_vec();
        let hidden = (h > 0).then(|| Hidden {
            weights: rows(&theta[lin..lin + h * dim], dim),
            bias: theta[lin + h * dim..lin + hid].to_vec(),
            out: rows(&theta[lin + hid..], h),
        });
        TopicModel { model: model.to_string(), dim, classes, bias, weights, hidden }
    }
}

/// The mean cross-entropy's gradient over `examples` for the flat parameters of
/// [`TopicModel::train`], in `GRADIENT_PARTS` parts on threads of their own: a fixed
/// split, so the sum's order (and the layer) does not depend on the machine.
fn gradient(theta: &[f32], examples: &[(Vec<f32>, usize)], (dim, k, h): (usize, usize, usize), n: f32) -> Vec<f32> {
    let chunk = examples.len().div_ceil(GRADIENT_PARTS).max(1);
    let parts: Vec<Vec<f32>> = std::thread::scope(|scope| {
        let handles: Vec<_> = examples.chunks(chunk).map(|part| scope.spawn(move || gradient_of(theta, part, (dim, k, h), n))).collect();
        handles.into_iter().map(|t| t.join().expect("a gradient thread does not panic")).collect()
    });
    let mut total = vec![0.0f32; theta.len()];
    for p in parts {
        total.iter_mut().zip(p).for_each(|(a, b)| *a += b);
    }
    total
}

const GRADIENT_PARTS: usize = 4;

fn gradient_of(theta: &[f32], examples: &[(Vec<f32>, usize)], (dim, k, h): (usize, usize, usize), n: f32) -> Vec<f32> {
    let lin = k * dim + k;
    let hid = h * dim + h;
    let (w, b) = (&theta[..k * dim], &theta[k * dim..lin]);
    let (w1, b1, w2) = (&theta[lin..lin + h * dim], &theta[lin + h * dim..lin + hid], &theta[lin + hid..]);
    let mut g = vec![0.0f32; theta.len()];
    let mut z = vec![0.0f32; h];
    for (v, y) in examples {
        for u in 0..h {
            z[u] = (dot(&w1[u * dim..(u + 1) * dim], v) + b1[u]).max(0.0);
        }
        let logits: Vec<f32> = (0..k)
            .map(|c| dot(&w[c * dim..(c + 1) * dim], v) + b[c] + if h > 0 { dot(&w2[c * h..(c + 1) * h], &z) } else { 0.0 })
            .collect();
        let p = softmax(&logits);
        let mut back = vec![0.0f32; h];
        for c in 0..k {
            let gc = (p[c] - if c == *y { 1.0 } else { 0.0 }) / n;
            g[k * dim + c] += gc;
            g[c * dim..(c + 1) * dim].iter_mut().zip(v).for_each(|(a, x)| *a += gc * x);
            if h > 0 {
                let row = lin + hid + c * h;
                g[row..row + h].iter_mut().zip(&z).for_each(|(a, x)| *a += gc * x);
                back.iter_mut().zip(&w2[c * h..(c + 1) * h]).for_each(|(a, wv)| *a += gc * wv);
            }
        }
        for u in 0..h {
            if z[u] > 0.0 {
                let row = lin + u * dim;
                g[row..row + dim].iter_mut().zip(v).for_each(|(a, x)| *a += back[u] * x);
                g[lin + h * dim + u] += back[u];
            }
        }
    }
    g
}

/// Adam (β₁ 0.9, β₂ 0.999) over a flat parameter vector, with weight decay on every
/// parameter but the biases: the trainer of the topic layer and of the span reader.
pub(crate) struct Adam {
    m: Vec<f32>,
    v: Vec<f32>,
    steps: i32,
    learning_rate: f32,
    l2: f32,
}

impl Adam {
    pub(crate) fn new(size: usize, learning_rate: f32, l2: f32) -> Adam {
        Adam { m: vec![0.0; size], v: vec![0.0; size], steps: 0, learning_rate, l2 }
    }

    /// One step down `grad`; `is_bias(j)` exempts parameter `j` from the decay.
    pub(crate) fn step(&mut self, theta: &mut [f32], grad: Vec<f32>, is_bias: impl Fn(usize) -> bool) {
        let (beta1, beta2, eps) = (0.9f32, 0.999f32, 1e-8f32);
        self.steps += 1;
        let (c1, c2) = (1.0 - beta1.powi(self.steps), 1.0 - beta2.powi(self.steps));
        for (j, g) in grad.into_iter().enumerate() {
            let g = if is_bias(j) { g } else { g + self.l2 * theta[j] };
            self.m[j] = beta1 * self.m[j] + (1.0 - beta1) * g;
            self.v[j] = beta2 * self.v[j] + (1.0 - beta2) * g * g;
            theta[j] -= self.learning_rate * (self.m[j] / c1) / ((self.v[j] / c2).sqrt() + eps);
        }
    }
}

pub(crate) fn dot(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

pub(crate) fn softmax(logits: &[f32]) -> Vec<f32> {
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
    fn a_hidden_layer_separates_what_no_line_can() {
        // XOR: class 0 on two opposite corners, class 1 on the other two.
        let corners = [(vec![1.0, 0.0, 0.1], 0), (vec![0.0, 1.0, 0.1], 0), (vec![1.0, 1.0, 0.1], 1), (vec![0.0, 0.0, 0.1], 1)];
        let examples: Vec<(Vec<f32>, usize)> = corners.iter().cycle().take(40).cloned().collect();
        let classes = vec!["city".to_string(), NONE.to_string()];
        let settings = Training { epochs: 400, learning_rate: 0.05, l2: 0.0, hidden: 0 };
        let right = |m: &TopicModel| corners.iter().filter(|(v, y)| m.probabilities(v)[*y] > 0.5).count();
        let linear = TopicModel::train("test-model", classes.clone(), &examples, settings);
        assert!(linear.is_linear());
        assert!(right(&linear) < 4, "no line separates XOR");
        let deep = TopicModel::train("test-model", classes.clone(), &examples, Training { hidden: 8, ..settings });
        assert!(!deep.is_linear());
        assert_eq!(right(&deep), 4);
        let again = TopicModel::train("test-model", classes, &examples, Training { hidden: 8, ..settings });
        assert_eq!(serde_json::to_string(&deep).ok(), serde_json::to_string(&again).ok(), "the same examples give the same layer");
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
