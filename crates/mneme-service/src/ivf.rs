//! An inverted-file (IVF) partition of the vector index: `k` centroids found by two-level
//! spherical k-means on a sample, every entry filed under its nearest centroid. A query
//! scores all centroids, then only the entries of the `nprobe` best lists, exactly (f32
//! query against int8 codes). At 1M entries and the default 1,000 lists, 64 probes scan
//! about 6 % of the entries (BENCHMARKS.md, "Vector index").
//!
//! Two levels keep the build affordable on two cores: `√k` coarse centroids, each split
//! into `√k` fine ones, so filing an entry costs `2·√k` dot products instead of `k`.
//! Entries added after the build are filed the same way; the partition is not re-trained
//! until the index is rebuilt (at the next start).

/// A trained partition: fine centroids (unit vectors, row-major), grouped by coarse
/// centroid, and each list's slots.
#[derive(Debug, Clone)]
pub(crate) struct Ivf {
    dim: usize,
    coarse: Vec<f32>,
    /// `fine[c]`: the fine centroids under coarse centroid `c` (row-major).
    fine: Vec<Vec<f32>>,
    /// List id = `c * per_coarse + f`.
    per_coarse: usize,
    lists: Vec<List>,
    /// Per slot: (list, position in it).
    place: Vec<(u32, u32)>,
}

/// One list: its entries' slots, with a copy of their codes and scales stored
/// contiguously, so a probe reads memory sequentially (4× faster than gathering the
/// entries from the main arrays at 1M).
#[derive(Debug, Clone, Default)]
pub(crate) struct List {
    pub slots: Vec<u32>,
    pub scales: Vec<f32>,
    pub codes: Vec<i8>,
}

/// Reads entry `slot` as f32 (scale × code), for training.
pub(crate) type Entry<'a> = &'a dyn Fn(usize) -> Vec<f32>;

fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut acc = [0.0f32; 8];
    let (ac, ar) = a.as_chunks::<8>();
    let (bc, br) = b.as_chunks::<8>();
    for (x, y) in ac.iter().zip(bc) {
        for i in 0..8 {
            acc[i] += x[i] * y[i];
        }
    }
    acc.iter().sum::<f32>() + ar.iter().zip(br).map(|(x, y)| x * y).sum::<f32>()
}

fn normalise(v: &mut [f32]) {
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 {
        v.iter_mut().for_each(|x| *x /= norm);
    }
}

/// The best row of `centroids` (row-major, `dim` wide) for `v`.
fn nearest(centroids: &[f32], dim: usize, v: &[f32]) -> usize {
    centroids.chunks_exact(dim).enumerate().map(|(i, c)| (i, dot(c, v))).max_by(|a, b| a.1.total_cmp(&b.1)).map_or(0, |(i, _)| i)
}

/// Spherical k-means of `points` into `k` centroids, `iterations` rounds, seeded with
/// evenly spaced points (deterministic).
fn kmeans(points: &[Vec<f32>], dim: usize, k: usize, iterations: usize) -> Vec<f32> {
    let k = k.min(points.len()).max(1);
    let step = points.len() / k;
    let mut centroids: Vec<f32> = (0..k).flat_map(|i| points[i * step].clone()).collect();
    for _ in 0..iterations {
        let mut sums = vec![0.0f32; k * dim];
        let mut counts = vec![0usize; k];
        for p in points {
            let c = nearest(&centroids, dim, p);
            counts[c] += 1;
            sums[c * dim..(c + 1) * dim].iter_mut().zip(p).for_each(|(s, x)| *s += x);
        }
        for c in 0..k {
            if counts[c] > 0 {
                let row = &mut sums[c * dim..(c + 1) * dim];
                normalise(row);
                centroids[c * dim..(c + 1) * dim].copy_from_slice(row);
            }
        }
    }
    centroids
}

impl Ivf {
    /// Trains on a sample of `n` entries and files all of them. `lists` is rounded to a
    /// square.
    pub(crate) fn train<'e>(
        n: usize,
        dim: usize,
        lists: usize,
        entry: Entry<'_>,
        score: &(dyn Fn(&[f32], usize) -> f32 + Sync),
        stored: &dyn Fn(usize) -> (f32, &'e [i8]),
    ) -> Ivf {
        let side = (lists as f64).sqrt().round().max(2.0) as usize;
        let sample_size = (side * side * 48).max(32_768).min(n);
        let stride = (n / sample_size.max(1)).max(1);
        let sample: Vec<Vec<f32>> = (0..n)
            .step_by(stride)
            .take(sample_size)
            .map(|slot| {
                let mut v = entry(slot);
                normalise(&mut v);
                v
            })
            .collect();
        let coarse = kmeans(&sample, dim, side, 8);
        let mut groups: Vec<Vec<Vec<f32>>> = vec![Vec::new(); side];
        for p in sample {
            groups[nearest(&coarse, dim, &p)].push(p);
        }
        let fine: Vec<Vec<f32>> = std::thread::scope(|s| {
            let half = groups.len() / 2;
            let (a, b) = groups.split_at(half);
            let first = s.spawn(move || {
                a.iter().map(|g| if g.is_empty() { coarse_fallback(dim) } else { kmeans(g, dim, side, 8) }).collect::<Vec<_>>()
            });
            let second: Vec<Vec<f32>> =
                b.iter().map(|g| if g.is_empty() { coarse_fallback(dim) } else { kmeans(g, dim, side, 8) }).collect();
            let mut all = first.join().unwrap_or_default();
            all.extend(second);
            all
        });
        let mut ivf = Ivf { dim, coarse, fine, per_coarse: side, lists: vec![List::default(); side * side], place: Vec::with_capacity(n) };
        // File every entry, in two halves on two threads.
        let (lo, hi) = {
            let shared = &ivf;
            let assign = |range: std::ops::Range<usize>| range.map(|slot| shared.list_for(|c| score(c, slot))).collect::<Vec<_>>();
            let half = n / 2;
            std::thread::scope(|s| {
                let a = s.spawn(|| assign(0..half));
                let b = assign(half..n);
                (a.join().unwrap_or_default(), b)
            })
        };
        for (slot, list) in lo.into_iter().chain(hi).enumerate() {
            let (scale, codes) = stored(slot);
            ivf.file(list, slot, scale, codes);
        }
        ivf
    }

    /// The list an entry belongs in, given how it scores against a centroid.
    fn list_for(&self, score: impl Fn(&[f32]) -> f32) -> usize {
        let best = |rows: &[f32]| {
            rows.chunks_exact(self.dim).enumerate().map(|(i, c)| (i, score(c))).max_by(|a, b| a.1.total_cmp(&b.1)).map_or(0, |(i, _)| i)
        };
        let c = best(&self.coarse);
        c * self.per_coarse + best(&self.fine[c]).min(self.per_coarse - 1)
    }

    /// Files a new entry (slots arrive in order: `slot` is the next one).
    pub(crate) fn add(&mut self, slot: usize, scale: f32, codes: &[i8], score: impl Fn(&[f32]) -> f32) {
        let list = self.list_for(score);
        self.file(list, slot, scale, codes);
    }

    /// A replaced vector: its copy in its list is overwritten (it keeps its list; the
    /// partition is re-trained at the next start).
    pub(crate) fn replace(&mut self, slot: usize, scale: f32, codes: &[i8]) {
        if let Some(&(list, at)) = self.place.get(slot) {
            let (list, at) = (list as usize, at as usize);
            self.lists[list].scales[at] = scale;
            self.lists[list].codes[at * self.dim..(at + 1) * self.dim].copy_from_slice(codes);
        }
    }

    /// The codes of entry `slot`.
    pub(crate) fn codes_of(&self, slot: usize) -> &[i8] {
        let (list, at) = self.place[slot];
        let at = at as usize;
        &self.lists[list as usize].codes[at * self.dim..(at + 1) * self.dim]
    }

    fn file(&mut self, list: usize, slot: usize, scale: f32, codes: &[i8]) {
        debug_assert_eq!(slot, self.place.len());
        self.place.push((list as u32, self.lists[list].slots.len() as u32));
        self.lists[list].push(slot, scale, codes);
    }

    /// The `nprobe` lists whose centroids score best against `query`.
    pub(crate) fn probe(&self, query: &[f32], nprobe: usize) -> Vec<&List> {
        let mut scored: Vec<(f32, usize)> = Vec::with_capacity(self.lists.len());
        for (c, rows) in self.fine.iter().enumerate() {
            for (f, centroid) in rows.chunks_exact(self.dim).enumerate() {
                scored.push((dot(centroid, query), c * self.per_coarse + f));
            }
        }
        let n = nprobe.min(scored.len());
        if n < scored.len() {
            scored.select_nth_unstable_by(n, |a, b| b.0.total_cmp(&a.0));
            scored.truncate(n);
        }
        scored.into_iter().map(|(_, list)| &self.lists[list]).collect()
    }

    /// (smallest, median, largest) list length.
    pub(crate) fn list_sizes(&self) -> (usize, usize, usize) {
        let mut sizes: Vec<usize> = self.lists.iter().map(|l| l.slots.len()).collect();
        sizes.sort_unstable();
        (sizes.first().copied().unwrap_or(0), sizes.get(sizes.len() / 2).copied().unwrap_or(0), sizes.last().copied().unwrap_or(0))
    }

    pub(crate) fn memory_bytes(&self) -> usize {
        (self.coarse.len() + self.fine.iter().map(Vec::len).sum::<usize>()) * 4
            + self.lists.iter().map(|l| l.slots.len() * 8 + l.codes.len() + 72).sum::<usize>()
    }
}

impl List {
    fn push(&mut self, slot: usize, scale: f32, codes: &[i8]) {
        self.slots.push(slot as u32);
        self.scales.push(scale);
        self.codes.extend_from_slice(codes);
    }
}

/// A placeholder centroid row block for an empty coarse group (never the best match).
fn coarse_fallback(dim: usize) -> Vec<f32> {
    vec![0.0; dim]
}
