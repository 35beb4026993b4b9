//! The `[embedding]` settings and choosing the embedder from them: the local model, an
//! OpenAI-compatible endpoint, or none. A local model that is not installed is not an
//! error: retrieval is lexical-only and the caller says so once.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use mneme_core::Span;
use serde::{Deserialize, Serialize};

use crate::{DEFAULT_MODEL, Embedder, MiniLm, OpenAiEmbedder};

/// Where vectors come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EmbeddingProvider {
    /// The in-process model under the data directory (`mneme model install`); when it is
    /// not installed, retrieval is lexical-only (said once in the log).
    #[default]
    Local,
    /// An OpenAI-compatible `/embeddings` endpoint.
    Openai,
    /// No embeddings: lexical retrieval only.
    None,
}

/// `[embedding]`: where the vectors for dense retrieval come from, and the vector index.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EmbeddingConfig {
    /// Where vectors come from (`MNEME_EMBEDDING_PROVIDER`): the in-process model, an
    /// OpenAI-compatible endpoint, or none (lexical retrieval only).
    pub provider: EmbeddingProvider,
    /// The local model's directory. Unset, the CLI uses the machine-wide cache (`MNEME_MODEL_CACHE`, else
    /// `$XDG_CACHE_HOME/mneme/models`, else `~/.cache/mneme/models`) when the model is there, else
    /// `<data dir>/models/all-MiniLM-L6-v2`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_dir: Option<PathBuf>,
    /// OpenAI-compatible base URL (`http://127.0.0.1:11434/v1`), for provider "openai".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
    /// The provider's model name (provider "openai").
    pub model: String,
    /// Bearer token sent to the endpoint (provider "openai"; `MNEME_EMBEDDING_API_KEY`);
    /// unset: none. `mneme config show` never prints it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_key: Option<String>,
    /// Dimension the provider's model returns (provider "openai"; checked on every answer).
    pub dimension: usize,
    /// How long one request to the endpoint may take (provider "openai").
    pub timeout: Span,
    /// Records per embedding batch in the background pipeline. Default 128: the model
    /// sorts a batch by length and pads only within groups of similar length, so larger
    /// batches waste less (LoCoMo turns: 67 texts/s in batches of 32, 97 in 256).
    pub batch_size: usize,
    /// How often a daemon that started without the local model looks for it again, so a
    /// `mneme model install` while it runs takes effect without a restart. Default 10s.
    pub model_poll: Span,
    /// The vector index: exact below `exact_below` vectors, approximate beyond.
    pub index: IndexParams,
}

impl Default for EmbeddingConfig {
    fn default() -> Self {
        EmbeddingConfig {
            provider: EmbeddingProvider::Local,
            model_dir: None,
            endpoint: None,
            model: "text-embedding-3-small".into(),
            api_key: None,
            dimension: 1536,
            timeout: Span::secs(30),
            batch_size: 128,
            model_poll: Span::secs(10),
            index: Default::default(),
        }
    }
}

/// Vector index parameters (`[embedding.index]`; used by mneme-service's `VectorIndex`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct IndexParams {
    /// Below this many entries every query is exact. Default 20 000.
    pub exact_below: usize,
    /// Candidates kept from the Hamming pass for the asymmetric pass. Default 16 000.
    pub coarse: usize,
    /// Candidates kept from the asymmetric pass for exact re-scoring. Default 2 000.
    pub rerank: usize,
    /// Inverted-file partition (built at start above `exact_below`): number of lists,
    /// 0 = about √n. Default 0.
    pub lists: usize,
    /// Lists scanned per query when the partition is built. Default 128.
    pub nprobe: usize,
}

impl Default for IndexParams {
    fn default() -> Self {
        IndexParams { exact_below: 20_000, coarse: 16_000, rerank: 2_000, lists: 0, nprobe: 128 }
    }
}

/// The outcome of [`choose`]: an embedder, or the reason there is none.
#[derive(Debug)]
pub enum Choice {
    Model(Arc<dyn Embedder>),
    /// Lexical-only, and why (for the one log line).
    LexicalOnly(String),
}

/// The local model's directory: the configured one, else `<data dir>/models/<default>`.
/// The CLI resolves `model_dir` before this is asked ([`resolve_model_dir`]), so a daemon
/// started by `mneme serve` finds the machine-wide copy too.
pub fn model_dir(config: &EmbeddingConfig, data_dir: &Path) -> PathBuf {
    config.model_dir.clone().unwrap_or_else(|| data_dir.join("models").join(DEFAULT_MODEL))
}

/// The machine-wide model cache every data directory shares (one 88 MB copy, not one per
/// store): `MNEME_MODEL_CACHE`, else `$XDG_CACHE_HOME/mneme/models`, else
/// `$HOME/.cache/mneme/models`; the default model's directory inside it. `None` when none
/// of those variables is set.
pub fn shared_model_dir(env: &dyn Fn(&str) -> Option<std::ffi::OsString>) -> Option<PathBuf> {
    let nonempty = |name: &str| env(name).filter(|v| !v.is_empty()).map(PathBuf::from);
    let cache = nonempty("MNEME_MODEL_CACHE")
        .or_else(|| nonempty("XDG_CACHE_HOME").map(|d| d.join("mneme").join("models")))
        .or_else(|| nonempty("HOME").map(|d| d.join(".cache").join("mneme").join("models")))?;
    Some(cache.join(DEFAULT_MODEL))
}

/// Where the local model is for a data directory: `embedding.model_dir` when configured;
/// else the data directory's own copy when it has one (`<data dir>/models/<default>`, where
/// earlier versions installed it); else the shared cache ([`shared_model_dir`]).
pub fn resolve_model_dir(config: &EmbeddingConfig, data_dir: &Path, env: &dyn Fn(&str) -> Option<std::ffi::OsString>) -> PathBuf {
    if let Some(dir) = &config.model_dir {
        return dir.clone();
    }
    let own = data_dir.join("models").join(DEFAULT_MODEL);
    if own.join("model.safetensors").exists() {
        return own;
    }
    shared_model_dir(env).unwrap_or(own)
}

/// Builds the configured embedder. Errors are real problems (a damaged model, a bad
/// endpoint); a model that was never installed is `LexicalOnly`.
pub fn choose(config: &EmbeddingConfig, data_dir: &Path) -> Result<Choice, String> {
    let e = config;
    match e.provider {
        EmbeddingProvider::None => Ok(Choice::LexicalOnly("embedding.provider is \"none\"".into())),
        EmbeddingProvider::Local => {
            let dir = model_dir(config, data_dir);
            if !dir.join("model.safetensors").exists() {
                return Ok(Choice::LexicalOnly(format!("no embedding model in {} (run `mneme model install`)", dir.display())));
            }
            let model = MiniLm::load(&dir, DEFAULT_MODEL).map_err(|e| e.to_string())?;
            Ok(Choice::Model(Arc::new(model)))
        }
        EmbeddingProvider::Openai => {
            let endpoint = e.endpoint.as_deref().ok_or("embedding.endpoint is not set")?;
            let timeout: Duration = e.timeout.get();
            let model = OpenAiEmbedder::new(endpoint, &e.model, e.api_key.clone(), e.dimension, timeout).map_err(|e| e.to_string())?;
            Ok(Choice::Model(Arc::new(model)))
        }
    }
}
