//! What every stage shares: the settings, the model calls (routed per stage, parsed with
//! the shared robust JSON extraction, counted per tick), and the HTTP client the outbound
//! channel uses.
//!
//! Stages are synchronous (they read and write files and the store); a model call blocks
//! on the async LLM client through a runtime handle. The daemon runs ticks on its blocking
//! pool with the daemon's handle; the CLI owns a small runtime.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use serde::Serialize;
use serde_json::Value;

use super::config::{ReflectionConfig, Stage};
use mneme_llm::{Chat, LlmClient, LlmError, Usage};

/// Where model calls run.
#[derive(Debug)]
pub enum Exec {
    /// A runtime someone else drives (the daemon's); calls block the current thread, which
    /// must not be one of the runtime's async workers.
    Handle(tokio::runtime::Handle),
    /// A runtime of our own (the CLI).
    Owned(tokio::runtime::Runtime),
}

impl Exec {
    pub fn block_on<F: std::future::Future>(&self, f: F) -> F::Output {
        match self {
            Exec::Handle(h) => h.block_on(f),
            Exec::Owned(rt) => rt.block_on(f),
        }
    }

    /// A current-thread runtime for a command-line process.
    pub fn owned() -> std::io::Result<Exec> {
        Ok(Exec::Owned(tokio::runtime::Builder::new_current_thread().enable_all().build()?))
    }
}

/// Model calls and tokens, per stage and in total.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Calls {
    pub calls: u32,
    pub failures: u32,
    #[serde(rename = "promptTokens")]
    pub prompt_tokens: u64,
    #[serde(rename = "completionTokens")]
    pub completion_tokens: u64,
    #[serde(rename = "byStage", skip_serializing_if = "BTreeMap::is_empty")]
    pub by_stage: BTreeMap<&'static str, u32>,
}

impl Calls {
    /// Adds `other`'s calls and tokens to these.
    pub fn add(&mut self, other: Calls) {
        self.calls += other.calls;
        self.failures += other.failures;
        self.prompt_tokens += other.prompt_tokens;
        self.completion_tokens += other.completion_tokens;
        for (stage, n) in other.by_stage {
            *self.by_stage.entry(stage).or_default() += n;
        }
    }
}

/// The reflection engine: settings plus, when configured, the model.
pub struct Reflector {
    pub config: ReflectionConfig,
    /// `[inner]`: the inner life's jobs share this engine's model and runtime.
    pub inner: crate::inner::InnerConfig,
    llm: Option<Arc<LlmClient>>,
    exec: Option<Exec>,
    http: reqwest::Client,
    calls: Mutex<Calls>,
    /// Vectors of texts the lessons embedded, by model and text: a daemon's ticks embed
    /// each reply once, not every 30 minutes (at most [`VECTOR_CACHE`] entries).
    vectors: Mutex<std::collections::HashMap<(String, String), Vec<f32>>>,
    /// The value of `outbound.telegram_token_env`, looked up by the caller (this crate
    /// never reads the environment).
    telegram_token: Option<String>,
}

impl std::fmt::Debug for Reflector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reflector").field("config", &self.config).field("model", &self.llm.is_some()).finish_non_exhaustive()
    }
}

/// Why a stage did not use a model: `None` configured, or the call failed (the reason).
pub type AskError = String;

/// Most texts whose vectors the engine keeps for the lessons (emptied when full).
pub const VECTOR_CACHE: usize = 5000;

/// The reason recorded when no model is configured.
pub const NO_LLM: &str = "no LLM configured";

impl Reflector {
    /// Without a model: every thinking stage runs its fallback.
    /// No runtime either: the outbound webhook and Telegram targets report a failed
    /// delivery (the inbox works).
    pub fn offline(config: ReflectionConfig) -> Reflector {
        Reflector::new(config, None, None)
    }

    /// With the shared client (used only when it has an endpoint) and a runtime for model
    /// and outbound calls.
    pub fn new(config: ReflectionConfig, llm: Option<Arc<LlmClient>>, exec: Option<Exec>) -> Reflector {
        mneme_llm::init_tls();
        let llm = llm.filter(|l| l.enabled() && exec.is_some());
        let http = reqwest::Client::builder().timeout(config.outbound.timeout.get()).build().unwrap_or_default();
        Reflector {
            config,
            inner: Default::default(),
            llm,
            exec,
            http,
            calls: Mutex::default(),
            vectors: Mutex::default(),
            telegram_token: None,
        }
    }

    /// Vectors of `texts` from `embed` (the attached encoder, `model` its id), the ones
    /// embedded before taken from the cache; `None` when `embed` gives nothing.
    pub fn cached_vectors(
        &self,
        model: Option<&str>,
        texts: &[&str],
        embed: impl Fn(&[&str]) -> Option<Vec<Vec<f32>>>,
    ) -> Option<Vec<Vec<f32>>> {
        let model = model?.to_string();
        let key = |t: &str| (model.clone(), t.to_string());
        let missing: Vec<&str> = {
            let cache = self.vectors.lock().unwrap_or_else(|p| p.into_inner());
            texts.iter().copied().filter(|t| !cache.contains_key(&key(t))).collect()
        };
        let fresh = if missing.is_empty() { Vec::new() } else { embed(&missing)? };
        if fresh.len() != missing.len() {
            return None;
        }
        let mut cache = self.vectors.lock().unwrap_or_else(|p| p.into_inner());
        let mut fresh: std::collections::HashMap<&str, Vec<f32>> = missing.into_iter().zip(fresh).collect();
        let mut out = Vec::with_capacity(texts.len());
        let mut new = Vec::new();
        for t in texts {
            match fresh.remove(t) {
                Some(v) => {
                    new.push((key(t), v.clone()));
                    out.push(v);
                }
                None => out.push(cache.get(&key(t))?.clone()),
            }
        }
        if cache.len() + new.len() > VECTOR_CACHE {
            cache.clear();
        }
        cache.extend(new);
        Some(out)
    }

    /// With the `[inner]` settings.
    pub fn with_inner(mut self, inner: crate::inner::InnerConfig) -> Reflector {
        self.inner = inner;
        self
    }

    /// Resolves `outbound.telegram_token_env` through `env`.
    pub fn with_env(mut self, env: impl Fn(&str) -> Option<String>) -> Reflector {
        self.telegram_token = self.config.outbound.telegram_token_env.as_deref().and_then(env);
        self
    }

    /// The Telegram token from the environment, when `telegram_token_env` is set.
    pub fn telegram_token_from_env(&self) -> Option<&str> {
        self.telegram_token.as_deref()
    }

    /// The HTTP client for outbound deliveries.
    pub fn http(&self) -> &reqwest::Client {
        &self.http
    }

    /// Whether a model is configured.
    pub fn has_model(&self) -> bool {
        self.llm.is_some()
    }

    /// Runs `f` on the engine's runtime (for the outbound HTTP calls); `None` without one.
    pub fn block_on<F: std::future::Future>(&self, f: F) -> Option<F::Output> {
        self.exec.as_ref().map(|exec| exec.block_on(f))
    }

    /// The calls made since the last `take_calls`.
    pub fn take_calls(&self) -> Calls {
        std::mem::take(&mut *self.calls.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// Asks `stage`'s model for JSON. `Err` carries the reason the stage records for its
    /// fallback: [`NO_LLM`], or `LLM failed: …` (HTTP status, timeout, backoff, no JSON).
    pub fn ask(&self, stage: Stage, system: &str, user: &str) -> Result<Value, AskError> {
        let (Some(client), Some(exec)) = (&self.llm, &self.exec) else { return Err(NO_LLM.into()) };
        let settings = self.config.stages.get(stage);
        let model = self.config.model_for(stage);
        let chat = Chat {
            model: model.as_deref(),
            max_tokens: settings.max_tokens,
            timeout: settings.timeout.map(|t| t.get()),
            temperature: 0.2,
            ..Chat::new(system, user)
        };
        let result = exec.block_on(client.chat_json_usage(&chat));
        let mut calls = self.calls.lock().unwrap_or_else(|p| p.into_inner());
        let sent = !matches!(result, Err(LlmError::Disabled | LlmError::Backoff { .. }));
        if sent {
            calls.calls += 1;
            *calls.by_stage.entry(stage.name()).or_default() += 1;
        }
        match result {
            Ok((value, Usage { prompt_tokens, completion_tokens })) => {
                calls.prompt_tokens += prompt_tokens;
                calls.completion_tokens += completion_tokens;
                Ok(value)
            }
            Err(e) => {
                if sent {
                    calls.failures += 1;
                }
                Err(format!("LLM failed: {e}"))
            }
        }
    }
}

/// How a stage ran this tick, as the log line records it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StageOutcome {
    /// `ok` (the model's answer, validated), `fallback` (the deterministic path),
    /// `skipped`, or `failed`.
    pub status: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

impl StageOutcome {
    pub fn ok() -> StageOutcome {
        StageOutcome { status: "ok", reason: None }
    }
    pub fn fallback(reason: impl Into<String>) -> StageOutcome {
        StageOutcome { status: "fallback", reason: Some(reason.into()) }
    }
    pub fn skipped(reason: impl Into<String>) -> StageOutcome {
        StageOutcome { status: "skipped", reason: Some(reason.into()) }
    }
    pub fn failed(reason: impl Into<String>) -> StageOutcome {
        StageOutcome { status: "failed", reason: Some(reason.into()) }
    }
}

/// A string field of a model's answer, trimmed; `None` when absent or not a string.
pub fn text(v: &Value, key: &str) -> Option<String> {
    v.get(key).and_then(Value::as_str).map(str::trim).filter(|s| !s.is_empty()).map(str::to_string)
}

/// A list-of-strings field, each trimmed and cut to `max_chars`, at most `max_items`;
/// `Err` naming the field when it is not a list of strings.
pub fn strings(v: &Value, key: &str, max_items: usize, max_chars: usize) -> Result<Vec<String>, String> {
    match v.get(key) {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(items)) => items
            .iter()
            .map(|i| {
                i.as_str()
                    .map(|s| s.trim().chars().take(max_chars).collect::<String>())
                    .ok_or_else(|| format!("{key}: not a list of strings"))
            })
            .filter(|s| s.as_ref().map_or(true, |s| !s.is_empty()))
            .take(max_items)
            .collect(),
        Some(_) => Err(format!("{key}: not a list of strings")),
    }
}
