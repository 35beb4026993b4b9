//! Deterministic synthetic data shared by the benchmarks: a small generator (`Rng`),
//! Zipf-distributed text (`TextGen`) and latency percentiles (`summarize`).

/// SplitMix64: a small deterministic generator, so every run sees the same data.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    pub fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// Synthetic text: words from a 20,000-word vocabulary with a Zipf(1) distribution.
pub struct TextGen {
    words: Vec<String>,
    cumulative: Vec<f64>,
    rng: Rng,
}

impl TextGen {
    pub fn new(seed: u64) -> Self {
        const VOCAB: usize = 20_000;
        let syllables = ["ka", "lo", "mi", "ne", "ru", "sa", "ti", "vo", "ze", "pa", "qu", "dor", "fen", "gil", "hax", "jun"];
        let words: Vec<String> = (0..VOCAB)
            .map(|mut i| {
                let mut w = String::new();
                loop {
                    w.push_str(syllables[i % syllables.len()]);
                    i /= syllables.len();
                    if i == 0 {
                        break;
                    }
                }
                w
            })
            .collect();
        let mut total = 0.0;
        let cumulative = (1..=VOCAB)
            .map(|r| {
                total += 1.0 / r as f64;
                total
            })
            .collect::<Vec<_>>();
        let cumulative = cumulative.iter().map(|c| c / total).collect();
        TextGen { words, cumulative, rng: Rng(seed) }
    }

    fn word(&mut self) -> &str {
        let u = self.rng.unit();
        let i = self.cumulative.partition_point(|&c| c < u).min(self.words.len() - 1);
        &self.words[i]
    }

    pub fn sentence(&mut self) -> String {
        let n = 12 + self.rng.below(19);
        (0..n).map(|_| self.word().to_string()).collect::<Vec<_>>().join(" ")
    }

    /// A query of 2–3 mid-frequency words (vocabulary ranks 100..20,000).
    pub fn query(&mut self) -> String {
        let n = 2 + self.rng.below(2);
        (0..n).map(|_| self.words[100 + self.rng.below(self.words.len() - 100)].clone()).collect::<Vec<_>>().join(" ")
    }
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

/// A chat message event, user and assistant turns alternating with `i`.
pub fn message_event(text: String, i: usize) -> mneme_core::Payload {
    mneme_core::Payload::Event(mneme_core::EventPayload {
        event_kind: "message".into(),
        reference: None,
        sender: Some(if i.is_multiple_of(2) { "user".into() } else { "assistant".into() }),
        text,
        event_time: None,
    })
}

pub fn summarize(mut v: Vec<f64>) -> (f64, f64) {
    v.sort_by(f64::total_cmp);
    (percentile(&v, 0.5), percentile(&v, 0.99))
}
