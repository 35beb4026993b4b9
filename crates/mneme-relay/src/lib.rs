//! mneme-relay: the relay's analysis loop (the relay seed): a feed ring (100 items: transcripts from the
//! bridge, the agent's own pushes), a sense ring (30 screen events), and a tick that
//! builds the seed's context window over both, analyses it, keeps the result in a ring of
//! 50, and pushes a non-trivial, non-repeated analysis back to the feed as `[🧠] …` with
//! `source: "agent"`.
//!
//! Offline first: with no model the analyzer is a deterministic rules engine (reported as
//! model `rules`): an error on screen, an app switch, sustained audio topics. With an
//! OpenAI-compatible endpoint configured the seed's prompt goes to it (max tokens 100,
//! temperature 0.3 by default). Failures as the seed says: an LLM error skips the tick, a
//! reply with nothing usable is "—", a 429 doubles the interval until a success, and an
//! explicit `analyzer = "llm"` with no endpoint starts disabled with a warning.
//!
//! Everything is in memory (the seed's buffers); `<private>` blocks are removed on the way
//! in. Time is passed in (the daemon's clock), so tests run on a fixed clock.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use jiff::Timestamp;
use mneme_core::{Span, private};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use mneme_llm::{Chat, LlmClient, LlmError};

/// Ring sizes, from the seed.
pub const FEED_RING: usize = 100;
pub const SENSE_RING: usize = 30;
pub const RESULT_RING: usize = 50;
/// The feed and sense rings also hold at most this many bytes of text each (the oldest
/// go first): a hundred large items must not make `GET /feed?after=0` a 100 MB answer.
pub const RING_BYTES: usize = 2 * 1024 * 1024;
/// The analysis the seed uses for "nothing useful".
pub const NOTHING: &str = "—";
/// The model name the rules analyzer reports.
pub const RULES: &str = "rules";

/// Which analyzer runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Analyzer {
    /// The model when an endpoint is configured, else the rules.
    #[default]
    Auto,
    Rules,
    /// The model only: without an endpoint the loop starts disabled, with a warning.
    Llm,
}

/// `[relay]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RelayConfig {
    /// Serve the relay routes (`/feed`, `/sense`, `/health`, `/agent/*`).
    pub routes: bool,
    /// Start the analysis loop (`AGENT_ENABLED`).
    pub enabled: bool,
    /// Which analyzer the loop runs: `auto` asks the model when an LLM endpoint is
    /// configured and uses the rules otherwise; `llm` without an endpoint starts disabled.
    pub analyzer: Analyzer,
    /// `AGENT_INTERVAL_MS`.
    pub interval: Span,
    /// `AGENT_MODEL`; empty: the shared LLM client's model.
    pub model: String,
    /// `AGENT_MAX_AGE_MS`: the context window.
    pub max_age: Span,
    /// `AGENT_MAX_TOKENS`.
    pub max_tokens: u32,
    /// `AGENT_TEMPERATURE`.
    pub temperature: f64,
    /// `AGENT_PUSH_TO_FEED`.
    pub push_to_feed: bool,
    /// `AGENT_LOG_VERBOSE`: log each prompt and answer.
    pub log_verbose: bool,
    /// USD per million prompt / completion tokens, for `estimatedCost` (0 for a local model).
    pub price_in_per_mtok: f64,
    /// USD per million completion tokens, for `estimatedCost` (0 for a local model).
    pub price_out_per_mtok: f64,
    /// Keep each analysis as an episodic record at `high` sensitivity (off: memory only).
    pub keep_analyses: bool,
}

impl Default for RelayConfig {
    fn default() -> Self {
        RelayConfig {
            routes: true,
            enabled: true,
            analyzer: Analyzer::Auto,
            interval: Span::secs(10),
            model: String::new(),
            max_age: Span::secs(120),
            max_tokens: 100,
            temperature: 0.3,
            push_to_feed: true,
            log_verbose: false,
            price_in_per_mtok: 0.0,
            price_out_per_mtok: 0.0,
            keep_analyses: false,
        }
    }
}

impl RelayConfig {
    /// Checks the values; `Err` is `(key, message)`.
    pub fn validate(&self) -> Result<(), (String, String)> {
        let bad = |key: &str, msg: String| Err((format!("relay.{key}"), msg));
        if self.interval.get() < std::time::Duration::from_millis(100) {
            return bad("interval", "must be at least 100ms".into());
        }
        if self.max_age.is_zero() {
            return bad("max_age", "must be longer than zero".into());
        }
        if self.max_tokens == 0 || self.max_tokens > 4_000 {
            return bad("max_tokens", format!("{} must be between 1 and 4000", self.max_tokens));
        }
        if !(0.0..=2.0).contains(&self.temperature) {
            return bad("temperature", format!("{} must be between 0 and 2", self.temperature));
        }
        for (key, v) in [("price_in_per_mtok", self.price_in_per_mtok), ("price_out_per_mtok", self.price_out_per_mtok)] {
            if !(v.is_finite() && v >= 0.0) {
                return bad(key, format!("{v} must be zero or more"));
            }
        }
        Ok(())
    }
}

/// The settings `/agent/config` reads and changes at run time (the seed's names).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RuntimeConfig {
    pub enabled: bool,
    pub interval_ms: u64,
    pub model: String,
    pub max_age: u64,
    pub push_to_feed: bool,
    pub temperature: f64,
    /// Which analyzer answers (`rules` or `llm`); read-only.
    pub analyzer: &'static str,
}

/// A `POST /agent/config` body: any subset.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ConfigChange {
    pub enabled: Option<bool>,
    pub interval_ms: Option<u64>,
    pub model: Option<String>,
    pub max_age: Option<u64>,
    pub push_to_feed: Option<bool>,
    pub temperature: Option<f64>,
}

/// One feed item.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FeedItem {
    pub id: u64,
    pub text: String,
    pub priority: String,
    /// Milliseconds since the epoch.
    pub ts: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
}

/// A `POST /feed` body.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewFeed {
    pub text: String,
    #[serde(default)]
    pub priority: Option<String>,
    #[serde(default)]
    pub source: Option<String>,
}

/// The screen events a sense client posts: `text` (what OCR read), `context` (an app
/// switch, no text), `image` (a frame without text).
pub const SENSE_TYPES: &[&str] = &["text", "context", "image"];

/// One screen event, as posted (`POST /sense`), with when it arrived.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SenseEvent {
    #[serde(rename = "type")]
    pub kind: String,
    /// The client's time (ms); the window uses `receivedAt`.
    #[serde(default)]
    pub ts: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ocr: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<serde_json::Map<String, Value>>,
    #[serde(default)]
    pub received_at: i64,
}

/// An audio chunk of the window.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AudioChunk {
    pub ts: i64,
    pub text: String,
}

/// A screen event of the window.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ScreenItem {
    pub ts: i64,
    #[serde(rename = "type")]
    pub kind: String,
    pub app: String,
    pub ocr: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ssim: Option<f64>,
}

/// What a tick analyses (`GET /agent/context`), built as the seed builds it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ContextWindow {
    pub current_app: String,
    pub audio: Vec<AudioChunk>,
    pub screen: Vec<ScreenItem>,
    pub audio_count: usize,
    pub screen_count: usize,
    pub window_ms: u64,
}

/// What an analysis looked at.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Seen {
    pub current_app: String,
    pub audio_count: usize,
    pub screen_count: usize,
}

/// One analysis (the agent ring's entry).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AnalysisResult {
    pub id: u64,
    pub ts: i64,
    pub analysis: String,
    pub context: Seen,
    pub pushed: bool,
    pub model: String,
    pub latency_ms: u64,
    pub tokens_in: u64,
    pub tokens_out: u64,
}

/// What one tick did.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum TickOutcome {
    /// The loop is disabled.
    Disabled,
    /// No new feed or sense event since the last tick: no call.
    Idle,
    /// The model call failed (the reason); nothing stored. A 429 also doubles the interval.
    Skipped { reason: String },
    /// An analysis was stored (and maybe pushed).
    Analysed { result: AnalysisResult },
}

#[derive(Debug, Default, Clone)]
struct Stats {
    total_calls: u64,
    tokens_in: u64,
    tokens_out: u64,
    last_analysis: Option<i64>,
    failures: u64,
}

#[derive(Debug)]
struct State {
    feed: VecDeque<FeedItem>,
    sense: VecDeque<SenseEvent>,
    results: VecDeque<AnalysisResult>,
    next_feed: u64,
    next_result: u64,
    /// Feed items and sense events received so far (idle suppression compares them).
    feed_received: u64,
    sense_received: u64,
    seen_at_last_tick: (u64, u64),
    enabled: bool,
    interval_ms: u64,
    model: String,
    max_age_ms: u64,
    push_to_feed: bool,
    temperature: f64,
    /// 1, doubled on each 429 until a success.
    backoff: u32,
    last_pushed: Option<String>,
    stats: Stats,
}

/// The relay: buffers, the analysis loop's state, and the analyzer.
pub struct Relay {
    config: RelayConfig,
    llm: Option<Arc<LlmClient>>,
    warning: Option<String>,
    state: Mutex<State>,
    /// Wakes the loop when `/agent/config` changes the interval or enables it.
    pub changed: tokio::sync::Notify,
}

impl std::fmt::Debug for Relay {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Relay").field("config", &self.config).field("model", &self.llm.is_some()).finish_non_exhaustive()
    }
}

fn ms(t: Timestamp) -> i64 {
    t.as_millisecond()
}

fn clip(s: &str, chars: usize) -> String {
    s.chars().take(chars).collect()
}

impl Relay {
    /// With the shared client (used only when it has an endpoint and the analyzer allows).
    pub fn new(config: RelayConfig, llm: Option<Arc<LlmClient>>) -> Relay {
        let llm = llm.filter(|l| l.enabled() && config.analyzer != Analyzer::Rules);
        let warning = (config.analyzer == Analyzer::Llm && llm.is_none()).then(|| {
            "analyzer = \"llm\" but no LLM endpoint is configured: the analysis loop starts disabled \
             (configure [consolidation] llm_endpoint, or set relay.analyzer = \"rules\")"
                .to_string()
        });
        let model = if llm.is_some() { config.model.clone() } else { RULES.to_string() };
        let state = State {
            feed: VecDeque::new(),
            sense: VecDeque::new(),
            results: VecDeque::new(),
            next_feed: 1,
            next_result: 1,
            feed_received: 0,
            sense_received: 0,
            seen_at_last_tick: (0, 0),
            enabled: config.enabled && warning.is_none(),
            interval_ms: config.interval.get().as_millis() as u64,
            model,
            max_age_ms: config.max_age.get().as_millis() as u64,
            push_to_feed: config.push_to_feed,
            temperature: config.temperature,
            backoff: 1,
            last_pushed: None,
            stats: Stats::default(),
        };
        Relay { config, llm, warning, state: Mutex::new(state), changed: tokio::sync::Notify::new() }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The warning the loop started with, if any.
    pub fn warning(&self) -> Option<&str> {
        self.warning.as_deref()
    }

    /// Whether analyses are kept as records.
    pub fn keeps_analyses(&self) -> bool {
        self.config.keep_analyses
    }

    /// How long until the next tick: the interval, doubled per 429 since the last success.
    pub fn next_wait(&self) -> std::time::Duration {
        let s = self.lock();
        std::time::Duration::from_millis(s.interval_ms.saturating_mul(u64::from(s.backoff)))
    }

    /// `POST /feed`: stores the item (private blocks removed); returns it.
    pub fn feed(&self, item: NewFeed, now: Timestamp) -> Result<FeedItem, String> {
        let text = private::strip(&item.text).trim().to_string();
        if text.is_empty() {
            return Err("text: empty (after removing <private> blocks)".into());
        }
        let priority = item.priority.unwrap_or_else(|| "normal".into());
        if !["low", "normal", "high", "urgent"].contains(&priority.as_str()) {
            return Err(format!("priority {priority:?}: must be low, normal, high or urgent"));
        }
        let mut s = self.lock();
        Ok(push_feed(&mut s, text, priority, item.source, ms(now)))
    }

    /// `GET /feed?after=ID`: the items after `after` (all when 0), oldest first.
    pub fn feed_after(&self, after: u64) -> Vec<FeedItem> {
        self.lock().feed.iter().filter(|i| i.id > after).cloned().collect()
    }

    /// `POST /sense`: stores the event with its arrival time.
    pub fn sense(&self, mut event: SenseEvent, now: Timestamp) -> Result<(), String> {
        if !SENSE_TYPES.contains(&event.kind.as_str()) {
            return Err(format!("type: {:?} is not a sense event type ({})", event.kind, SENSE_TYPES.join(", ")));
        }
        event.ocr = event.ocr.map(|o| private::strip(&o).into_owned());
        event.received_at = ms(now);
        let mut s = self.lock();
        let size = sense_bytes(&event);
        while !s.sense.is_empty() && (s.sense.len() == SENSE_RING || s.sense.iter().map(sense_bytes).sum::<usize>() + size > RING_BYTES) {
            s.sense.pop_front();
        }
        s.sense.push_back(event);
        s.sense_received += 1;
        Ok(())
    }

    /// `GET /agent/context`: the window the next tick would see.
    pub fn context(&self, now: Timestamp) -> ContextWindow {
        let s = self.lock();
        window(&s, ms(now))
    }

    /// `GET /agent/last`.
    pub fn last(&self) -> Option<AnalysisResult> {
        self.lock().results.back().cloned()
    }

    /// `GET /agent/history?limit=N`: newest first, 1..=50 (default 10).
    pub fn history(&self, limit: usize) -> Vec<AnalysisResult> {
        self.lock().results.iter().rev().take(limit.clamp(1, RESULT_RING)).cloned().collect()
    }

    /// `GET /agent/config`.
    pub fn runtime_config(&self) -> RuntimeConfig {
        let s = self.lock();
        RuntimeConfig {
            enabled: s.enabled,
            interval_ms: s.interval_ms,
            model: s.model.clone(),
            max_age: s.max_age_ms,
            push_to_feed: s.push_to_feed,
            temperature: s.temperature,
            analyzer: if self.llm.is_some() { "llm" } else { RULES },
        }
    }

    /// `POST /agent/config`: validates every field first, then applies all of them.
    pub fn configure(&self, change: ConfigChange) -> Result<RuntimeConfig, String> {
        if let Some(i) = change.interval_ms
            && !(100..=86_400_000).contains(&i)
        {
            return Err(format!("intervalMs {i}: must be between 100 and 86400000"));
        }
        if let Some(a) = change.max_age
            && !(1_000..=86_400_000).contains(&a)
        {
            return Err(format!("maxAge {a}: must be between 1000 and 86400000"));
        }
        if let Some(t) = change.temperature
            && !(0.0..=2.0).contains(&t)
        {
            return Err(format!("temperature {t}: must be between 0 and 2"));
        }
        if let Some(m) = &change.model {
            if m.trim().is_empty() {
                return Err("model: empty".into());
            }
            if self.llm.is_none() && m != RULES {
                return Err(format!("model {m:?}: no LLM endpoint is configured, so the analyzer is \"rules\""));
            }
        }
        {
            let mut s = self.lock();
            if let Some(v) = change.enabled {
                s.enabled = v;
            }
            if let Some(v) = change.interval_ms {
                s.interval_ms = v;
            }
            if let Some(v) = change.model {
                s.model = v;
            }
            if let Some(v) = change.max_age {
                s.max_age_ms = v;
            }
            if let Some(v) = change.push_to_feed {
                s.push_to_feed = v;
            }
            if let Some(v) = change.temperature {
                s.temperature = v;
            }
        }
        self.changed.notify_one();
        Ok(self.runtime_config())
    }

    /// `GET /health`: the seed's fields.
    pub fn health(&self) -> Value {
        let s = self.lock();
        let cost = (s.stats.tokens_in as f64 * self.config.price_in_per_mtok + s.stats.tokens_out as f64 * self.config.price_out_per_mtok)
            / 1_000_000.0;
        serde_json::json!({
            "ok": true,
            "messages": s.feed.len(),
            "senseEvents": s.sense.len(),
            "agent": {
                "enabled": s.enabled,
                "lastAnalysis": s.stats.last_analysis,
                "totalCalls": s.stats.total_calls,
                "totalTokens": { "in": s.stats.tokens_in, "out": s.stats.tokens_out },
                "estimatedCost": cost,
                "model": s.model,
                "analyzer": if self.llm.is_some() { "llm" } else { RULES },
                "intervalMs": s.interval_ms * u64::from(s.backoff),
                "failures": s.stats.failures,
                "warning": self.warning,
            }
        })
    }

    /// One analysis tick at `now`.
    pub async fn tick(&self, now: Timestamp) -> TickOutcome {
        let started = std::time::Instant::now();
        let (w, model, temperature, before) = {
            let mut s = self.lock();
            if !s.enabled {
                return TickOutcome::Disabled;
            }
            let seen = (s.feed_received, s.sense_received);
            if seen == s.seen_at_last_tick {
                return TickOutcome::Idle;
            }
            let before = std::mem::replace(&mut s.seen_at_last_tick, seen);
            (window(&s, ms(now)), s.model.clone(), s.temperature, before)
        };
        let mut called = false;
        let (analysis, tokens_in, tokens_out, model) = if w.audio.is_empty() && w.screen.is_empty() {
            // Nothing in the window: answered here, no call.
            (NOTHING.to_string(), 0, 0, model)
        } else {
            match &self.llm {
                None => (rules(&w), 0, 0, RULES.to_string()),
                Some(llm) => {
                    let prompt = prompt(&w);
                    let chat = Chat {
                        model: (!model.is_empty()).then_some(model.as_str()),
                        temperature,
                        max_tokens: self.config.max_tokens,
                        ..Chat::new("", &prompt)
                    };
                    if self.config.log_verbose {
                        tracing::info!(%prompt, "relay prompt");
                    }
                    match llm.chat_usage(&chat).await {
                        Ok((text, usage)) => {
                            if self.config.log_verbose {
                                tracing::info!(answer = %text, "relay answer");
                            }
                            self.lock().backoff = 1;
                            called = true;
                            (cleaned(&text), usage.prompt_tokens, usage.completion_tokens, model)
                        }
                        Err(e) => {
                            let mut s = self.lock();
                            s.stats.failures += 1;
                            // Not analysed: the next tick retries the same events.
                            s.seen_at_last_tick = before;
                            if matches!(e, LlmError::Status(429)) {
                                s.backoff = s.backoff.saturating_mul(2).min(64);
                            }
                            let reason = format!("LLM failed: {e}");
                            tracing::warn!(%reason, interval_ms = s.interval_ms * u64::from(s.backoff), "relay tick skipped");
                            return TickOutcome::Skipped { reason };
                        }
                    }
                }
            }
        };
        let mut s = self.lock();
        s.stats.total_calls += u64::from(called);
        s.stats.tokens_in += tokens_in;
        s.stats.tokens_out += tokens_out;
        s.stats.last_analysis = Some(ms(now));
        let pushed = s.push_to_feed && analysis != NOTHING && s.last_pushed.as_deref() != Some(analysis.as_str());
        if pushed {
            push_feed(&mut s, format!("[🧠] {analysis}"), "normal".into(), Some("agent".into()), ms(now));
            // The agent's own push is not news for the next tick.
            s.seen_at_last_tick.0 = s.feed_received;
            s.last_pushed = Some(analysis.clone());
        }
        let result = AnalysisResult {
            id: s.next_result,
            ts: ms(now),
            analysis,
            context: Seen { current_app: w.current_app.clone(), audio_count: w.audio_count, screen_count: w.screen_count },
            pushed,
            model: if model.is_empty() { "default".into() } else { model },
            latency_ms: started.elapsed().as_millis() as u64,
            tokens_in,
            tokens_out,
        };
        s.next_result += 1;
        if s.results.len() == RESULT_RING {
            s.results.pop_front();
        }
        s.results.push_back(result.clone());
        TickOutcome::Analysed { result }
    }
}

fn push_feed(s: &mut State, text: String, priority: String, source: Option<String>, ts: i64) -> FeedItem {
    let item = FeedItem { id: s.next_feed, text, priority, ts, source };
    s.next_feed += 1;
    let size = feed_bytes(&item);
    while !s.feed.is_empty() && (s.feed.len() == FEED_RING || s.feed.iter().map(feed_bytes).sum::<usize>() + size > RING_BYTES) {
        s.feed.pop_front();
    }
    s.feed.push_back(item.clone());
    s.feed_received += 1;
    item
}

fn feed_bytes(item: &FeedItem) -> usize {
    item.text.len() + item.source.as_ref().map_or(0, String::len) + item.priority.len()
}

fn sense_bytes(event: &SenseEvent) -> usize {
    event.kind.len()
        + event.ocr.as_ref().map_or(0, String::len)
        + event.meta.as_ref().map_or(0, |m| serde_json::to_string(m).map_or(0, |t| t.len()))
}

/// The seed's `buildContextWindow`.
fn window(s: &State, now_ms: i64) -> ContextWindow {
    let cutoff = now_ms - s.max_age_ms as i64;
    let audio: Vec<AudioChunk> = s
        .feed
        .iter()
        .filter(|m| m.ts >= cutoff)
        .filter(|m| m.text.contains("[PERIODIC]") || m.text.contains("openrouter]"))
        .map(|m| {
            let lines: Vec<String> = m
                .text
                .split('\n')
                .filter(|l| l.contains("openrouter]"))
                .map(|l| strip_speaker(l).trim().to_string())
                .filter(|l| !l.is_empty())
                .collect();
            AudioChunk { ts: m.ts, text: lines.join(" ") }
        })
        .filter(|a| !a.text.is_empty())
        .collect();
    let screen: Vec<ScreenItem> = s
        .sense
        .iter()
        .filter(|e| e.received_at >= cutoff)
        .map(|e| ScreenItem {
            ts: e.ts,
            kind: e.kind.clone(),
            app: e
                .meta
                .as_ref()
                .and_then(|m| m.get("app"))
                .and_then(Value::as_str)
                .filter(|a| !a.is_empty())
                .unwrap_or("unknown")
                .to_string(),
            ocr: e.ocr.clone().unwrap_or_default(),
            ssim: e.meta.as_ref().and_then(|m| m.get("ssim")).and_then(Value::as_f64),
        })
        .collect();
    let current_app = screen.last().map_or_else(|| "unknown".to_string(), |e| e.app.clone());
    let mut deduped: Vec<ScreenItem> = Vec::new();
    let mut last_ocr = String::new();
    for e in &screen {
        if !e.ocr.is_empty() && e.ocr != last_ocr {
            last_ocr = e.ocr.clone();
            deduped.push(e.clone());
        } else if e.ocr.is_empty() && e.kind == "context" {
            deduped.push(e.clone());
        }
    }
    let skip = |n: usize, keep: usize| n.saturating_sub(keep);
    ContextWindow {
        current_app,
        audio_count: audio.len(),
        screen_count: screen.len(),
        audio: audio[skip(audio.len(), 5)..].to_vec(),
        screen: deduped[skip(deduped.len(), 10)..].to_vec(),
        window_ms: s.max_age_ms,
    }
}

/// `^\[.*?openrouter\]\s*` removed (the transcript line's speaker tag).
fn strip_speaker(line: &str) -> &str {
    if line.starts_with('[')
        && let Some(end) = line.find("openrouter]")
    {
        return line[end + "openrouter]".len()..].trim_start();
    }
    line
}

/// The seed's prompt, verbatim.
pub fn prompt(w: &ContextWindow) -> String {
    let screen: Vec<String> = w.screen.iter().map(|e| format!("[{}] {}", e.app, clip(&e.ocr, 120))).collect();
    let audio: Vec<String> = w.audio.iter().map(|a| clip(&a.text, 200)).collect();
    let or = |lines: Vec<String>, empty: &str| if lines.is_empty() { empty.to_string() } else { lines.join("\n") };
    format!(
        "You are Sinain, an AI monitoring a user's screen and audio in real-time.\n\n\
         Active app: {}\n\n\
         Screen activity (OCR, newest last):\n{}\n\n\
         Audio (transcript, newest last):\n{}\n\n\
         Task: In 1-2 SHORT sentences:\n\
         1. What is the user doing right now?\n\
         2. One specific, actionable suggestion if you can help. If nothing useful, say \"—\".\n\n\
         Rules:\n\
         - Be terse. Max 30 words total.\n\
         - No filler. Just state it.\n\
         - If screen shows code errors, suggest a fix.\n\
         - If audio is a lecture, note the topic.\n\
         - If nothing interesting, respond with just \"—\".",
        w.current_app,
        or(screen, "(no screen data)"),
        or(audio, "(silence)")
    )
}

/// A model's reply as an analysis: trimmed; nothing usable (empty, no letters, or longer
/// than a terse answer could be) is "—".
fn cleaned(text: &str) -> String {
    let t = text.trim().trim_matches('"').trim();
    if t.is_empty() || !t.chars().any(char::is_alphabetic) || t.chars().count() > 600 || t.contains('\u{FFFD}') {
        NOTHING.to_string()
    } else {
        t.to_string()
    }
}

/// Error classes on screen, with a fixed hint each.
const ERRORS: [(&str, &str); 6] = [
    ("TypeError", "check the value for null or undefined before using it"),
    ("Traceback", "read the last frame of the traceback first"),
    ("panicked", "run it again with RUST_BACKTRACE=1"),
    ("Exception", "look at the innermost cause of the exception"),
    ("error:", "fix the first error; later ones often follow from it"),
    ("Error:", "fix the first error; later ones often follow from it"),
];

const STOP: &[&str] = &[
    "about", "after", "again", "also", "because", "been", "before", "could", "does", "from", "have", "here", "into", "just", "know",
    "like", "more", "only", "other", "really", "said", "should", "some", "than", "that", "their", "them", "then", "there", "these", "they",
    "thing", "think", "this", "those", "very", "want", "well", "were", "what", "when", "where", "which", "while", "will", "with", "would",
    "your", "going", "right", "yeah", "okay",
];

/// The error line to quote from one screen event's text, and its hint: of the lines that
/// look like an error, the last one that is not a traceback's header ("Traceback (most
/// recent call last):" is followed by frames, and the error itself comes last).
fn error_line(ocr: &str) -> Option<(&str, &'static str)> {
    let found: Vec<(&str, &'static str)> = ocr
        .lines()
        .map(str::trim)
        .filter_map(|line| ERRORS.iter().find(|(pattern, _)| line.contains(pattern)).map(|(_, hint)| (line, *hint)))
        .collect();
    let traceback = found.iter().find(|(l, _)| l.starts_with("Traceback")).map(|(_, hint)| *hint);
    let last = found.iter().rev().find(|(l, _)| !l.starts_with("Traceback")).copied();
    match (last, traceback) {
        (Some((line, _)), Some(hint)) => Some((line, hint)),
        (Some(found), None) => Some(found),
        (None, _) => found.first().copied(),
    }
}

/// The deterministic analyzer, newest first: an app switch as the newest screen event
/// ("Switched to APP", even with an older error in the window); else an error on screen
/// in the app the user is in now (an error left behind in another app is not theirs any
/// more), quoting the error line; else sustained audio (two chunks or more) by its top
/// three words; else "—".
pub fn rules(w: &ContextWindow) -> String {
    if let Some(last) = w.screen.last()
        && last.kind == "context"
        && last.ocr.is_empty()
    {
        return format!("Switched to {}.", last.app);
    }
    let here = |e: &&ScreenItem| w.current_app.is_empty() || e.app == w.current_app;
    for e in w.screen.iter().rev().filter(here) {
        if let Some((line, hint)) = error_line(&e.ocr) {
            let shown = if line.chars().count() > 60 { format!("{}…", clip(line, 60)) } else { line.to_string() };
            return format!("Error in {}: {shown} — {hint}.", e.app);
        }
    }
    if w.audio.len() >= 2 {
        let mut counts: std::collections::BTreeMap<String, usize> = Default::default();
        for a in &w.audio {
            for word in a.text.split(|c: char| !c.is_alphanumeric()).filter(|w| w.chars().count() >= 4) {
                let word = word.to_lowercase();
                if !STOP.contains(&word.as_str()) {
                    *counts.entry(word).or_default() += 1;
                }
            }
        }
        let mut top: Vec<(String, usize)> = counts.into_iter().filter(|(_, n)| *n >= 2).collect();
        top.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        if !top.is_empty() {
            let words: Vec<String> = top.into_iter().take(3).map(|(w, _)| w).collect();
            return format!("Audio: {}.", words.join(", "));
        }
    }
    NOTHING.to_string()
}
