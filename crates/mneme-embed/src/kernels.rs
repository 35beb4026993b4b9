//! The encoder's element-wise work as fused CPU kernels. Each is one pass over a layer's
//! activations where candle's own operations made two to four, each with its own output
//! buffer:
//! - [`bias_gelu`]: a dense layer's bias, then GELU with the exact-erf definition. candle's
//!   `gelu_erf` evaluates erf in f64 on one thread (about 7 ns an element); here erf is a
//!   rational approximation (absolute error below 5e-7) that the compiler vectorises, far
//!   inside the embedder's 1e-4 agreement with sentence-transformers.
//! - [`AddNorm`]: a dense layer's bias and the residual, then LayerNorm, with the row's sums
//!   kept in eight lanes (candle's LayerNorm adds a row's 384 values one after another).
//! - [`masked_softmax`]: attention scores scaled, padding masked out and the softmax taken,
//!   with an exponential the compiler vectorises (candle's calls the C library's `expf`, which
//!   takes a slow path for the −1e9 that masked padding).
//!
//! Each works in place on the fresh product it follows (no output buffer to allocate and
//! clear). Rows are split across the current rayon pool, and each task's loop is compiled for the
//! widest vectors the CPU has (AVX-512, AVX2, else the build's baseline), chosen at run time
//! by `pulp`: the loops are plain scalar code that the compiler vectorises for each.

use candle_core::{CpuStorage, InplaceOp1, InplaceOp2, Layout, Result, Tensor};
use rayon::prelude::*;

/// Rows per rayon task: enough that scheduling is noise beside the work.
const ROWS_PER_TASK: usize = 16;
/// Independent partial sums per row, so a row's reduction vectorises.
const LANES: usize = 8;

/// `e^x` for `x ≤ 0`, for the softmax (Cephes' `expf`: range reduction by ln 2, a degree-6 polynomial, the
/// power of two built in the exponent bits; relative error about 2e-7), written without
/// branches, calls or float-to-integer conversions, so that a loop over it vectorises.
/// Below −87 it returns about 1.6e-38 instead of the exact tiny value, which nothing here
/// can tell apart from zero.
#[inline(always)]
fn exp_nonpositive(x: f32) -> f32 {
    const LN2_HI: f32 = 0.693_359_4;
    const LN2_LO: f32 = -2.121_944_4e-4;
    // Adding 1.5 · 2^23 rounds to the nearest integer and leaves it in the low mantissa bits.
    const SHIFTER: f32 = 12_582_912.0;
    let x = x.max(-87.0);
    let shifted = x * std::f32::consts::LOG2_E + SHIFTER;
    let n = shifted - SHIFTER;
    let r = x - n * LN2_HI - n * LN2_LO;
    let p = ((((1.987_569_1e-4 * r + 1.398_199_9e-3) * r + 8.333_452e-3) * r + 4.166_579_6e-2) * r + 1.666_666_5e-1) * r + 0.5;
    let e = p * r * r + r + 1.0;
    // 2^n: n + 127 in the exponent bits (n is in −126..=0 here).
    let n_bits = shifted.to_bits().wrapping_sub(SHIFTER.to_bits());
    e * f32::from_bits(n_bits.wrapping_add(127) << 23)
}

/// erf as the ratio of an odd degree-13 and an even degree-8 polynomial on `[−4, 4]`
/// (outside it erf is ±1 in f32): Eigen's and XLA's single-precision erf. No exponential
/// and one division; |error| below 5e-7 against the exact erf over `[−6, 6]`.
#[inline(always)]
fn erf(x: f32) -> f32 {
    const ALPHA: [f32; 7] =
        [-1.609_603_3e-2, -2.954_6e-3, -7.349_906_3e-4, -5.692_506_4e-5, -2.101_024e-6, 2.770_681_4e-8, -2.726_142_3e-10];
    const BETA: [f32; 5] = [-1.426_473_9e-2, -7.373_329_2e-3, -1.682_827e-3, -2.133_740_6e-4, -1.456_607_2e-5];
    let x = x.clamp(-4.0, 4.0);
    let x2 = x * x;
    let p = x * ALPHA.iter().rev().fold(0.0, |p, &a| p * x2 + a);
    let q = BETA.iter().rev().fold(0.0, |q, &b| q * x2 + b);
    p / q
}

#[inline(always)]
fn gelu(x: f32) -> f32 {
    0.5 * x * (1.0 + erf(x * std::f32::consts::FRAC_1_SQRT_2))
}

/// The contiguous f32 data of a CPU tensor, or an error naming the kernel.
fn contiguous<'a>(kernel: &str, storage: &'a CpuStorage, layout: &Layout) -> Result<&'a [f32]> {
    let CpuStorage::F32(data) = storage else {
        return Err(candle_core::Error::Msg(format!("{kernel}: f32 only")));
    };
    Ok(&data[offsets(kernel, layout)?])
}

/// [`contiguous`], to write in place.
fn contiguous_mut<'a>(kernel: &str, storage: &'a mut CpuStorage, layout: &Layout) -> Result<&'a mut [f32]> {
    let CpuStorage::F32(data) = storage else {
        return Err(candle_core::Error::Msg(format!("{kernel}: f32 only")));
    };
    Ok(&mut data[offsets(kernel, layout)?])
}

fn offsets(kernel: &str, layout: &Layout) -> Result<std::ops::Range<usize>> {
    let (start, end) =
        layout.contiguous_offsets().ok_or_else(|| candle_core::Error::Msg(format!("{kernel}: the input must be contiguous")))?;
    Ok(start..end)
}

/// `x ← gelu(x + bias)` element-wise, `bias` broadcast over the last dimension; `x` must be
/// f32 on the CPU, contiguous, its last dimension `bias.len()`.
pub(crate) fn bias_gelu(x: Tensor, bias: &[f32]) -> Result<Tensor> {
    x.inplace_op1(&BiasGelu { bias })?;
    Ok(x)
}

struct BiasGelu<'a> {
    bias: &'a [f32],
}

/// Rows of `gelu(x + bias)`, in place, as one vectorised loop.
struct GeluRows<'a> {
    rows: &'a mut [f32],
    bias: &'a [f32],
}

impl pulp::WithSimd for GeluRows<'_> {
    type Output = ();

    #[inline(always)]
    fn with_simd<S: pulp::Simd>(self, _: S) {
        for row in self.rows.chunks_exact_mut(self.bias.len()) {
            for (x, &b) in row.iter_mut().zip(self.bias) {
                *x = gelu(*x + b);
            }
        }
    }
}

impl InplaceOp1 for BiasGelu<'_> {
    fn name(&self) -> &'static str {
        "bias-gelu-erf"
    }

    fn cpu_fwd(&self, storage: &mut CpuStorage, layout: &Layout) -> Result<()> {
        let n = self.bias.len();
        if n == 0 || layout.shape().dims().last() != Some(&n) {
            return Err(candle_core::Error::Msg(format!("bias-gelu-erf: a bias of {n} for a tensor of {:?}", layout.shape())));
        }
        let data = contiguous_mut(self.name(), storage, layout)?;
        let arch = pulp::Arch::new();
        data.par_chunks_mut(n * ROWS_PER_TASK).for_each(|rows| arch.dispatch(GeluRows { rows, bias: self.bias }));
        Ok(())
    }
}

/// `scores ← softmax(scores · scale)` over the last dimension, keys where `valid[b · seq + j]`
/// is 0 (padding) getting weight 0. `scores` is `batch × heads × seq × seq`, f32,
/// contiguous; `valid` holds `batch × seq` flags (the tokenizer's attention mask).
pub(crate) fn masked_softmax(scores: Tensor, valid: &[u32], scale: f32) -> Result<Tensor> {
    scores.inplace_op1(&MaskedSoftmax { valid, scale })?;
    Ok(scores)
}

struct MaskedSoftmax<'a> {
    valid: &'a [u32],
    scale: f32,
}

impl InplaceOp1 for MaskedSoftmax<'_> {
    fn name(&self) -> &'static str {
        "masked-softmax"
    }

    fn cpu_fwd(&self, storage: &mut CpuStorage, layout: &Layout) -> Result<()> {
        let (batch, heads, seq, keys) = layout.shape().dims4()?;
        if keys != seq || self.valid.len() != batch * seq || seq == 0 {
            return Err(candle_core::Error::Msg(format!(
                "masked-softmax: scores {:?} with a mask of {}",
                layout.shape(),
                self.valid.len()
            )));
        }
        let data = contiguous_mut(self.name(), storage, layout)?;
        let arch = pulp::Arch::new();
        // One task per text and head: its rows share one mask row.
        data.par_chunks_mut(seq * seq).enumerate().for_each(|(at, rows)| {
            let valid = &self.valid[(at / heads) * seq..][..seq];
            arch.dispatch(SoftmaxRows { rows, valid, scale: self.scale });
        });
        Ok(())
    }
}

/// Rows of [`masked_softmax`] sharing one mask, in place, as vectorised loops.
struct SoftmaxRows<'a> {
    rows: &'a mut [f32],
    valid: &'a [u32],
    scale: f32,
}

impl pulp::WithSimd for SoftmaxRows<'_> {
    type Output = ();

    #[inline(always)]
    fn with_simd<S: pulp::Simd>(self, _: S) {
        for row in self.rows.chunks_exact_mut(self.valid.len()) {
            let mut max = f32::MIN;
            for (&s, &v) in row.iter().zip(self.valid) {
                if v != 0 {
                    max = max.max(s * self.scale);
                }
            }
            for (x, &v) in row.iter_mut().zip(self.valid) {
                let e = exp_nonpositive(*x * self.scale - max);
                *x = if v != 0 { e } else { 0.0 };
            }
            let inv = 1.0 / lane_sum(row, |e| e);
            row.iter_mut().for_each(|x| *x *= inv);
        }
    }
}

/// `LayerNorm(x + bias + residual)` over the last dimension, as BERT ends its attention and
/// its feed-forward block (`x` is the dense layer's product before its bias).
#[derive(Debug)]
pub(crate) struct AddNorm {
    bias: Vec<f32>,
    gamma: Vec<f32>,
    beta: Vec<f32>,
    eps: f32,
}

impl AddNorm {
    /// The dense layer's `bias`, the LayerNorm's `weight` (gamma) and `bias` (beta).
    pub(crate) fn new(bias: &Tensor, gamma: &Tensor, beta: &Tensor, eps: f64) -> Result<AddNorm> {
        let norm = AddNorm { bias: bias.to_vec1()?, gamma: gamma.to_vec1()?, beta: beta.to_vec1()?, eps: eps as f32 };
        if norm.gamma.len() != norm.bias.len() || norm.beta.len() != norm.bias.len() || norm.bias.is_empty() {
            return Err(candle_core::Error::Msg(format!(
                "add-norm: bias {}, gamma {} and beta {} differ in length",
                norm.bias.len(),
                norm.gamma.len(),
                norm.beta.len()
            )));
        }
        Ok(norm)
    }

    /// `x ← LayerNorm(x + bias + residual)`; `x` is the dense layer's fresh product.
    pub(crate) fn forward(&self, x: Tensor, residual: &Tensor) -> Result<Tensor> {
        x.inplace_op2(residual, self)?;
        Ok(x)
    }

    /// One row: `out += bias + residual`, then normalised in place.
    #[inline(always)]
    fn row(&self, residual: &[f32], out: &mut [f32]) {
        let n = out.len() as f32;
        for (o, (&r, &b)) in out.iter_mut().zip(residual.iter().zip(&self.bias)) {
            *o += r + b;
        }
        let mean = lane_sum(out, |v| v) / n;
        let inv_std = 1.0 / (lane_sum(out, |v| (v - mean) * (v - mean)) / n + self.eps).sqrt();
        for ((o, &g), &b) in out.iter_mut().zip(&self.gamma).zip(&self.beta) {
            *o = (*o - mean) * inv_std * g + b;
        }
    }
}

/// `Σ f(v)` over `values`, in [`LANES`] partial sums that the compiler keeps in one vector.
#[inline(always)]
fn lane_sum(values: &[f32], f: impl Fn(f32) -> f32) -> f32 {
    let mut sums = [0f32; LANES];
    let chunks = values.chunks_exact(LANES);
    let rest: f32 = chunks.remainder().iter().map(|&v| f(v)).sum();
    for chunk in chunks {
        for (s, &v) in sums.iter_mut().zip(chunk) {
            *s += f(v);
        }
    }
    sums.iter().sum::<f32>() + rest
}

/// Rows of [`AddNorm`], in place, as vectorised loops.
struct NormRows<'a> {
    norm: &'a AddNorm,
    residual: &'a [f32],
    rows: &'a mut [f32],
}

impl pulp::WithSimd for NormRows<'_> {
    type Output = ();

    #[inline(always)]
    fn with_simd<S: pulp::Simd>(self, _: S) {
        let n = self.norm.bias.len();
        for (row, residual) in self.rows.chunks_exact_mut(n).zip(self.residual.chunks_exact(n)) {
            self.norm.row(residual, row);
        }
    }
}

impl InplaceOp2 for AddNorm {
    fn name(&self) -> &'static str {
        "add-norm"
    }

    fn cpu_fwd(&self, s1: &mut CpuStorage, l1: &Layout, s2: &CpuStorage, l2: &Layout) -> Result<()> {
        let n = self.bias.len();
        if l1.shape() != l2.shape() || l1.shape().dims().last() != Some(&n) {
            return Err(candle_core::Error::Msg(format!("add-norm: {:?} and {:?} with a bias of {n}", l1.shape(), l2.shape())));
        }
        let residual = contiguous(self.name(), s2, l2)?;
        let data = contiguous_mut(self.name(), s1, l1)?;
        let task = n * ROWS_PER_TASK;
        let arch = pulp::Arch::new();
        data.par_chunks_mut(task).zip(residual.par_chunks(task)).for_each(|(rows, residual)| {
            arch.dispatch(NormRows { norm: self, residual, rows });
        });
        Ok(())
    }
}
