//! Choosing the embedder from the configuration: the local model, an OpenAI-compatible
//! endpoint, or none. A local model that is not installed is not an error: retrieval is
//! lexical-only and the caller says so once.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use mneme_embed::{DEFAULT_MODEL, Embedder, MiniLm, OpenAiEmbedder};

use crate::config::{EmbeddingProvider, MnemeConfig, parse_duration};

/// The outcome of [`choose`]: an embedder, or the reason there is none.
#[derive(Debug)]
pub enum Choice {
    Model(Arc<dyn Embedder>),
    /// Lexical-only, and why (for the one log line).
    LexicalOnly(String),
}

/// The local model's directory: the configured one, else `<data dir>/models/<default>`.
pub fn model_dir(config: &MnemeConfig, data_dir: &Path) -> PathBuf {
    config.embedding.model_dir.clone().unwrap_or_else(|| data_dir.join("models").join(DEFAULT_MODEL))
}

/// Builds the configured embedder. Errors are real problems (a damaged model, a bad
/// endpoint); a model that was never installed is `LexicalOnly`.
pub fn choose(config: &MnemeConfig, data_dir: &Path) -> Result<Choice, String> {
    let e = &config.embedding;
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
            let timeout = parse_duration(&e.timeout).map_err(|x| format!("embedding.timeout: {x}"))?;
            let model = OpenAiEmbedder::new(endpoint, &e.model, e.api_key.clone(), e.dimension, timeout).map_err(|e| e.to_string())?;
            Ok(Choice::Model(Arc::new(model)))
        }
    }
}
