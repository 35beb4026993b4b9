//! The in-memory vector index: every stored vector of the current model, for cosine
//! nearest-neighbour search.
//!
//! Each entry keeps its int8 codes and scale (as stored, `mneme_store::vectors`) and a
//! 1-bit sign sketch (one bit per dimension, 48 bytes for 384 dimensions).
//!
//! - **Exact** while the index is small (`exact_below` entries, default 20 000): the int8
//!   dot product with every entry.
//! - **Approximate** beyond, in three stages:
//!   1. a Hamming-distance scan over the sign sketches (six XOR + popcount per entry,
//!      split over two threads) keeps the `coarse` closest entries (default 16 000);
//!   2. those are re-scored asymmetrically: the query's own values summed over each
//!      entry's positive bits (48 table lookups per entry), which weighs every sign by how
//!      much that dimension matters to the query; the best `rerank` (default 2 000) stay;
//!   3. those are scored exactly on their int8 codes.
//!
//!   Nothing to train, nothing to persist: the index is rebuilt from the store at start
//!   (1M vectors: BENCHMARKS.md, "Vector index") and updated in place on every new vector.
//!
//! Scores are cosines (stored vectors are unit length); entries are keyed by record
//! sequence number and filtered by the caller (status, sensitivity, scope) afterwards.

use std::collections::HashMap;

pub use mneme_embed::IndexParams;

/// Cosine nearest neighbours over int8-quantised unit vectors.
#[derive(Debug, Clone)]
pub struct VectorIndex {
    dim: usize,
    words: usize,
    params: IndexParams,
    seqs: Vec<i64>,
    slot_of: HashMap<i64, usize>,
    scales: Vec<f32>,
    codes: Vec<i8>,
    bits: Vec<u64>,
    /// The inverted-file partition, once built (`build_partition`).
    ivf: Option<crate::ivf::Ivf>,
}

impl VectorIndex {
    pub fn new(dim: usize, params: IndexParams) -> Self {
        VectorIndex {
            dim,
            words: dim.div_ceil(64),
            params,
            seqs: Vec::new(),
            slot_of: HashMap::new(),
            scales: Vec::new(),
            codes: Vec::new(),
            bits: Vec::new(),
            ivf: None,
        }
    }

    /// Trains the inverted-file partition over the current entries (when there are more
    /// than `exact_below`); approximate queries then scan only the best `nprobe` lists.
    /// Seconds at 1M entries; entries added later are filed into the trained lists.
    pub fn build_partition(&mut self) -> bool {
        let n = self.len();
        if self.ivf.is_some() || n <= self.params.exact_below || n < 1000 {
            return false;
        }
        let lists = if self.params.lists > 0 { self.params.lists } else { ((n as f64).sqrt() as usize).clamp(64, 4096) };
        let entry = |slot: usize| self.codes_of(slot).iter().map(|&c| f32::from(c)).collect::<Vec<f32>>();
        let score = |centroid: &[f32], slot: usize| dot_f32_i8(centroid, self.codes_of(slot));
        let stored = |slot: usize| (self.scales[slot], self.codes_of(slot));
        let ivf = crate::ivf::Ivf::train(n, self.dim, lists, &entry, &score, &stored);
        self.ivf = Some(ivf);
        // The lists hold every entry's codes now: free the flat copies.
        self.codes = Vec::new();
        self.bits = Vec::new();
        true
    }

    /// Whether the inverted-file partition is built.
    pub fn partitioned(&self) -> bool {
        self.ivf.is_some()
    }

    /// The partition's (smallest, median, largest) list length, once built.
    pub fn list_sizes(&self) -> Option<(usize, usize, usize)> {
        self.ivf.as_ref().map(crate::ivf::Ivf::list_sizes)
    }

    pub fn dim(&self) -> usize {
        self.dim
    }

    pub fn len(&self) -> usize {
        self.seqs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.seqs.is_empty()
    }

    pub fn params(&self) -> IndexParams {
        self.params
    }

    /// Bytes held by the entries (codes, sketches, scales, keys).
    pub fn memory_bytes(&self) -> usize {
        self.codes.len()
            + self.bits.len() * 8
            + self.scales.len() * 4
            + self.seqs.len() * (8 + 24)
            + self.ivf.as_ref().map_or(0, crate::ivf::Ivf::memory_bytes)
    }

    pub fn reserve(&mut self, n: usize) {
        self.seqs.reserve(n);
        self.slot_of.reserve(n);
        self.scales.reserve(n);
        self.codes.reserve(n * self.dim);
        self.bits.reserve(n * self.words);
    }

    /// Adds or replaces the vector of record `seq`. Codes of the wrong length are refused.
    pub fn insert(&mut self, seq: i64, scale: f32, codes: &[i8]) -> bool {
        if codes.len() != self.dim {
            return false;
        }
        // Once partitioned, the codes live only in the partition's lists (and the sign
        // sketches, which only the unpartitioned path reads, are gone).
        match (self.slot_of.get(&seq).copied(), &mut self.ivf) {
            (Some(slot), Some(ivf)) => {
                self.scales[slot] = scale;
                ivf.replace(slot, scale, codes);
            }
            (Some(slot), None) => {
                self.scales[slot] = scale;
                self.codes[slot * self.dim..(slot + 1) * self.dim].copy_from_slice(codes);
                let sketch = sketch(codes.iter().map(|&c| c > 0), self.words);
                self.bits[slot * self.words..(slot + 1) * self.words].copy_from_slice(&sketch);
            }
            (None, ivf) => {
                let slot = self.seqs.len();
                self.slot_of.insert(seq, slot);
                self.seqs.push(seq);
                self.scales.push(scale);
                match ivf {
                    Some(ivf) => ivf.add(slot, scale, codes, |centroid| dot_f32_i8(centroid, codes)),
                    None => {
                        self.codes.extend_from_slice(codes);
                        self.bits.extend_from_slice(&sketch(codes.iter().map(|&c| c > 0), self.words));
                    }
                }
            }
        }
        true
    }

    /// Destroys the vector of record `seq` in memory (a forgotten record): it becomes the
    /// zero vector, similar to nothing. Its slot stays (slots are positions).
    pub fn erase(&mut self, seq: i64) -> bool {
        if !self.slot_of.contains_key(&seq) {
            return false;
        }
        let zeros = vec![0i8; self.dim];
        self.insert(seq, 0.0, &zeros)
    }

    /// Cosine between the stored vectors of two records, if both are indexed.
    pub fn similarity(&self, a: i64, b: i64) -> Option<f32> {
        let (&sa, &sb) = (self.slot_of.get(&a)?, self.slot_of.get(&b)?);
        Some(dot_i8(self.codes_of(sa), self.codes_of(sb)) as f32 * self.scales[sa] * self.scales[sb])
    }

    /// The scale of a record's stored vector, if indexed: it changes when the vector does.
    pub fn scale(&self, seq: i64) -> Option<f32> {
        self.slot_of.get(&seq).map(|&slot| self.scales[slot])
    }

    /// The stored vector of a record (its int8 codes times its scale), if indexed.
    pub fn vector(&self, seq: i64) -> Option<Vec<f32>> {
        let &slot = self.slot_of.get(&seq)?;
        let scale = self.scales[slot];
        Some(self.codes_of(slot).iter().map(|&c| f32::from(c) * scale).collect())
    }

    /// Cosines between a unit query and the stored vectors of `seqs` (`None` where a
    /// record is not indexed), quantising the query once.
    pub fn similarities_to(&self, query: &[f32], seqs: &[i64]) -> Vec<Option<f32>> {
        let Some(q) = self.prepare(query) else { return vec![None; seqs.len()] };
        seqs.iter().map(|seq| self.slot_of.get(seq).map(|&slot| self.score(q, slot))).collect()
    }

    /// The `k` nearest entries to a unit `query` by cosine, best first: exact while the
    /// index is small, approximate beyond.
    pub fn search(&self, query: &[f32], k: usize) -> Vec<(i64, f32)> {
        if self.len() <= self.params.exact_below { self.search_exact(query, k) } else { self.search_approximate(query, k) }
    }

    /// Scores every entry.
    pub fn search_exact(&self, query: &[f32], k: usize) -> Vec<(i64, f32)> {
        let Some(q) = self.prepare(query) else { return Vec::new() };
        let mut top = TopK::new(k);
        for slot in 0..self.len() {
            top.push(self.score(q, slot), slot);
        }
        top.into_sorted().into_iter().map(|(s, slot)| (self.seqs[slot], s)).collect()
    }

    /// The inverted-file partition when it is built (`search_ivf`), else the sign-sketch
    /// cascade (`search_sketch`).
    pub fn search_approximate(&self, query: &[f32], k: usize) -> Vec<(i64, f32)> {
        let Some(q) = self.prepare(query) else { return Vec::new() };
        match &self.ivf {
            Some(ivf) => self.search_ivf(ivf, q, k),
            None => self.search_sketch(q, k),
        }
    }

    /// The entries of the `nprobe` lists nearest the query, scored on int8 codes (the query
    /// quantised too: the fastest dot) on two threads, then the best `rerank` of those
    /// re-scored exactly.
    fn search_ivf(&self, ivf: &crate::ivf::Ivf, q: &[f32], k: usize) -> Vec<(i64, f32)> {
        let lists = ivf.probe(q, self.params.nprobe.max(1));
        let (scale, codes) = mneme_store::quantize(q);
        let keep = self.params.rerank.clamp(k, 1000.max(k));
        let dim = self.dim;
        let pass = |part: &[&crate::ivf::List]| {
            let mut top = TopK::new(keep);
            for list in part {
                for (i, (&slot, &s)) in list.slots.iter().zip(&list.scales).enumerate() {
                    top.push(dot_i8(&list.codes[i * dim..(i + 1) * dim], &codes) as f32 * scale * s, slot as usize);
                }
            }
            top.into_sorted()
        };
        let total: usize = lists.iter().map(|l| l.slots.len()).sum();
        // Split the lists into two halves of about equal entries.
        let mut acc = 0;
        let cut = lists.iter().position(|l| {
            acc += l.slots.len();
            acc * 2 >= total
        });
        let (a, b) = lists.split_at(cut.map_or(lists.len(), |c| c + 1));
        let (first, second) = if total >= 8192 {
            std::thread::scope(|s| {
                let h = s.spawn(|| pass(a));
                let second = pass(b);
                (h.join().unwrap_or_default(), second)
            })
        } else {
            (pass(&lists), Vec::new())
        };
        let mut top = TopK::new(k);
        for (_, slot) in first.into_iter().chain(second) {
            top.push(self.score(q, slot), slot);
        }
        top.into_sorted().into_iter().map(|(s, slot)| (self.seqs[slot], s)).collect()
    }

    /// Hamming scan of the sign sketches, asymmetric re-scoring of the closest, then
    /// exact int8 scores for the best of those.
    fn search_sketch(&self, q: &[f32], k: usize) -> Vec<(i64, f32)> {
        let n = self.len();
        let rerank = self.params.rerank.max(k).min(n);
        let coarse = self.params.coarse.max(rerank).min(n);
        let qbits = sketch(q.iter().map(|&x| x > 0.0), self.words);
        // Stage 1: distances per slot; two halves in parallel on large indexes.
        let mut dist = vec![0u16; n];
        let mut hist = vec![0u32; self.words * 64 + 1];
        let half = n / 2;
        if n >= 100_000 {
            let (lo, hi) = dist.split_at_mut(half);
            let (h1, h2) = std::thread::scope(|s| {
                let a = s.spawn(|| self.hamming(&qbits, 0, lo));
                let b = self.hamming(&qbits, half, hi);
                (a.join().unwrap_or_default(), b)
            });
            for (h, (x, y)) in hist.iter_mut().zip(h1.iter().zip(&h2)) {
                *h = x + y;
            }
        } else {
            hist = self.hamming(&qbits, 0, &mut dist);
        }
        // The smallest distance d* with at least `coarse` entries at distance ≤ d*.
        let mut cut = 0usize;
        let mut seen = 0u32;
        for (d, &c) in hist.iter().enumerate() {
            seen += c;
            cut = d;
            if seen as usize >= coarse {
                break;
            }
        }
        let mut at_cut = coarse.saturating_sub((seen - hist[cut]) as usize);
        // Stage 2: per sketch byte, the sum of the query's values over each bit pattern.
        let table = byte_table(q);
        let mut middle = TopK::new(rerank);
        for (slot, &d) in dist.iter().enumerate() {
            let d = d as usize;
            if d < cut || (d == cut && at_cut > 0) {
                if d == cut {
                    at_cut -= 1;
                }
                middle.push(self.asymmetric(&table, slot), slot);
            }
        }
        // Stage 3: exact int8 scores.
        let mut top = TopK::new(k);
        for (_, slot) in middle.into_sorted() {
            top.push(self.score(q, slot), slot);
        }
        top.into_sorted().into_iter().map(|(s, slot)| (self.seqs[slot], s)).collect()
    }

    fn asymmetric(&self, table: &[[f32; 256]], slot: usize) -> f32 {
        let words = &self.bits[slot * self.words..(slot + 1) * self.words];
        let mut sum = 0.0f32;
        for (w, word) in words.iter().enumerate() {
            for (b, byte) in word.to_le_bytes().iter().enumerate() {
                if let Some(row) = table.get(w * 8 + b) {
                    sum += row[*byte as usize];
                }
            }
        }
        sum
    }

    /// Hamming distances for slots `start..start + out.len()`, and their histogram.
    fn hamming(&self, q: &[u64], start: usize, out: &mut [u16]) -> Vec<u32> {
        let mut hist = vec![0u32; self.words * 64 + 1];
        let w = self.words;
        for (i, d) in out.iter_mut().enumerate() {
            let base = (start + i) * w;
            let bits = &self.bits[base..base + w];
            let mut h = 0u32;
            for (a, b) in bits.iter().zip(q) {
                h += (a ^ b).count_ones();
            }
            *d = h as u16;
            hist[h as usize] += 1;
        }
        hist
    }

    /// The query as it is scored; `None` for a query of the wrong dimension.
    fn prepare<'q>(&self, query: &'q [f32]) -> Option<&'q [f32]> {
        (query.len() == self.dim).then_some(query)
    }

    /// Asymmetric: the f32 query against the entry's int8 codes, so only the stored
    /// vector's quantisation error remains (quantising the query too doubled it and
    /// capped recall@10 against exact f32 at 0.96 on the 1M benchmark).
    fn score(&self, q: &[f32], slot: usize) -> f32 {
        dot_f32_i8(q, self.codes_of(slot)) * self.scales[slot]
    }

    fn codes_of(&self, slot: usize) -> &[i8] {
        match &self.ivf {
            Some(ivf) => ivf.codes_of(slot),
            None => &self.codes[slot * self.dim..(slot + 1) * self.dim],
        }
    }
}

fn dot_f32_i8(q: &[f32], codes: &[i8]) -> f32 {
    // Eight independent accumulators let the compiler vectorise the sum.
    let mut acc = [0.0f32; 8];
    let (qc, qr) = q.as_chunks::<8>();
    let (cc, cr) = codes.as_chunks::<8>();
    for (a, b) in qc.iter().zip(cc) {
        for i in 0..8 {
            acc[i] += a[i] * f32::from(b[i]);
        }
    }
    let tail: f32 = qr.iter().zip(cr).map(|(a, &b)| a * f32::from(b)).sum();
    acc.iter().sum::<f32>() + tail
}

fn dot_i8(a: &[i8], b: &[i8]) -> i32 {
    a.iter().zip(b).map(|(&x, &y)| i32::from(x) * i32::from(y)).sum()
}

/// For each group of 8 dimensions, the query's sum over every subset (bit pattern).
fn byte_table(query: &[f32]) -> Vec<[f32; 256]> {
    query
        .chunks(8)
        .map(|dims| {
            let mut row = [0.0f32; 256];
            for (pattern, slot) in row.iter_mut().enumerate() {
                *slot = dims.iter().enumerate().filter(|(i, _)| pattern & (1 << i) != 0).map(|(_, x)| x).sum();
            }
            row
        })
        .collect()
}

fn sketch(signs: impl Iterator<Item = bool>, words: usize) -> Vec<u64> {
    let mut out = vec![0u64; words];
    for (i, positive) in signs.enumerate() {
        if positive {
            out[i / 64] |= 1 << (i % 64);
        }
    }
    out
}

/// The k best (score, slot) pairs seen, as a small min-heap.
struct TopK {
    k: usize,
    heap: std::collections::BinaryHeap<std::cmp::Reverse<(OrdF32, usize)>>,
}

#[derive(Debug, Clone, Copy, PartialEq)]
struct OrdF32(f32);
impl Eq for OrdF32 {}
impl PartialOrd for OrdF32 {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for OrdF32 {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0.total_cmp(&other.0)
    }
}

impl TopK {
    fn new(k: usize) -> Self {
        TopK { k, heap: std::collections::BinaryHeap::with_capacity(k + 1) }
    }

    fn push(&mut self, score: f32, slot: usize) {
        if self.k == 0 {
            return;
        }
        if self.heap.len() < self.k {
            self.heap.push(std::cmp::Reverse((OrdF32(score), slot)));
        } else if let Some(std::cmp::Reverse((worst, _))) = self.heap.peek()
            && score > worst.0
        {
            self.heap.pop();
            self.heap.push(std::cmp::Reverse((OrdF32(score), slot)));
        }
    }

    fn into_sorted(self) -> Vec<(f32, usize)> {
        let mut v: Vec<(f32, usize)> = self.heap.into_iter().map(|std::cmp::Reverse((s, slot))| (s.0, slot)).collect();
        v.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        v
    }
}

/// Synthetic unit vectors for tests and benchmarks, with graded structure like sentence
/// embeddings: 200 topics, 20
/// subtopics each, points scattered around their subtopic.
pub fn synthetic(n: usize, dim: usize, seed: u64) -> Vec<Vec<f32>> {
    let mut state = seed;
    let mut gauss = move || {
        // Box-Muller on SplitMix64.
        let mut next = || {
            state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = state;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            ((z ^ (z >> 31)) >> 11) as f64 / (1u64 << 53) as f64
        };
        let (u, v) = (next().max(1e-12), next());
        ((-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()) as f32
    };
    let topics: Vec<Vec<f32>> = (0..200).map(|_| (0..dim).map(|_| gauss()).collect()).collect();
    let subtopics: Vec<Vec<f32>> = (0..4000).map(|i| topics[i % 200].iter().map(|x| x + 0.8 * gauss()).collect()).collect();
    (0..n)
        .map(|_| {
            let pick = (gauss().abs() * 1e6) as usize % subtopics.len();
            let v: Vec<f32> = subtopics[pick].iter().map(|x| x + 0.9 * gauss()).collect();
            let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
            v.iter().map(|x| x / norm).collect()
        })
        .collect()
}
