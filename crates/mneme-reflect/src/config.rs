//! `[reflection]`: the heartbeat's settings, model routing included (the seed's
//! `koog-config.json`, in mneme's one TOML file).
//!
//! ```toml
//! [reflection.models]
//! fast = "qwen2.5:7b"          # "" = the shared LLM client's default model
//! smart = "gpt-4o"             # routed by [llm.routes."gpt-4o"] when it lives elsewhere
//! [reflection.stages.playbook_curator]
//! model = "smart"              # "fast", "smart" or a literal model name
//! max_tokens = 3000
//! timeout = "90s"              # unset: the client's timeout
//! ```

use mneme_core::{Sensitivity, Span};
use serde::{Deserialize, Serialize};

/// The stages that can call a model, with the seed's names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Stage {
    SessionSummary,
    SignalAnalyzer,
    FeedbackAnalyzer,
    MemoryMiner,
    PlaybookCurator,
    InsightSynthesizer,
    /// The inner life's thinking steps (the brain loop and its extensions).
    InnerLife,
    /// Knowledge-module extraction (`mneme module extract`).
    ModuleExtractor,
}

impl Stage {
    pub const ALL: [Stage; 8] = [
        Stage::SessionSummary,
        Stage::SignalAnalyzer,
        Stage::FeedbackAnalyzer,
        Stage::MemoryMiner,
        Stage::PlaybookCurator,
        Stage::InsightSynthesizer,
        Stage::InnerLife,
        Stage::ModuleExtractor,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Stage::SessionSummary => "session_summary",
            Stage::SignalAnalyzer => "signal_analyzer",
            Stage::FeedbackAnalyzer => "feedback_analyzer",
            Stage::MemoryMiner => "memory_miner",
            Stage::PlaybookCurator => "playbook_curator",
            Stage::InsightSynthesizer => "insight_synthesizer",
            Stage::InnerLife => "inner_life",
            Stage::ModuleExtractor => "module_extractor",
        }
    }
}

/// One stage's model, answer size and timeout.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct StageConfig {
    /// `fast`, `smart`, or a literal model name.
    pub model: String,
    /// The most tokens the stage's answer may have (the request's `max_tokens`), 1 to 100000.
    pub max_tokens: u32,
    /// How long the stage's LLM request may take; unset: `consolidation.llm_timeout`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<Span>,
}

impl Default for StageConfig {
    fn default() -> Self {
        StageConfig { model: "fast".into(), max_tokens: 1500, timeout: None }
    }
}

fn stage(model: &str, max_tokens: u32, timeout: Option<u64>) -> StageConfig {
    StageConfig { model: model.into(), max_tokens, timeout: timeout.map(Span::secs) }
}

/// Per-stage settings; the defaults are the seed's.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct StagesConfig {
    pub session_summary: StageConfig,
    pub signal_analyzer: StageConfig,
    pub feedback_analyzer: StageConfig,
    pub memory_miner: StageConfig,
    pub playbook_curator: StageConfig,
    pub insight_synthesizer: StageConfig,
    pub inner_life: StageConfig,
    pub module_extractor: StageConfig,
}

impl Default for StagesConfig {
    fn default() -> Self {
        StagesConfig {
            session_summary: stage("fast", 300, None),
            signal_analyzer: stage("fast", 1500, None),
            feedback_analyzer: stage("fast", 800, None),
            memory_miner: stage("fast", 1000, None),
            playbook_curator: stage("fast", 3000, Some(90)),
            insight_synthesizer: stage("smart", 800, None),
            inner_life: stage("fast", 1500, None),
            module_extractor: stage("fast", 2000, None),
        }
    }
}

impl StagesConfig {
    pub fn get(&self, stage: Stage) -> &StageConfig {
        match stage {
            Stage::SessionSummary => &self.session_summary,
            Stage::SignalAnalyzer => &self.signal_analyzer,
            Stage::FeedbackAnalyzer => &self.feedback_analyzer,
            Stage::MemoryMiner => &self.memory_miner,
            Stage::PlaybookCurator => &self.playbook_curator,
            Stage::InsightSynthesizer => &self.insight_synthesizer,
            Stage::InnerLife => &self.inner_life,
            Stage::ModuleExtractor => &self.module_extractor,
        }
    }
}

/// The two model classes stages refer to. Empty: the shared client's default model.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ModelsConfig {
    /// The model of stages whose `model` is `fast` (most of them by default); a model
    /// served elsewhere than the default endpoint needs an `[llm.routes]` entry.
    pub fast: String,
    /// The model of stages whose `model` is `smart` (by default the insight synthesizer).
    pub smart: String,
}

/// Phase 1: committing (and pushing) the workspace when it is its own git repository.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct GitConfig {
    /// At each heartbeat tick, commit every change in the workspace (`auto: heartbeat
    /// <time>`) when the workspace is the top level of its own git repository.
    pub backup: bool,
    /// After committing, push to `remote` and `branch` (needs `backup = true`).
    pub push: bool,
    /// The git remote pushed to.
    pub remote: String,
    /// The remote branch pushed to (`git push REMOTE HEAD:BRANCH`).
    pub branch: String,
}

impl Default for GitConfig {
    fn default() -> Self {
        GitConfig { backup: false, push: false, remote: "origin".into(), branch: "main".into() }
    }
}

/// Where tips and insights go.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OutboundTarget {
    /// The agent's dispatch inbox (delivered at its next hook).
    #[default]
    Inbox,
    /// A JSON POST to `webhook_url`.
    Webhook,
    /// The Telegram Bot API's `sendMessage`.
    Telegram,
}

/// `[reflection.outbound]`: where the heartbeat delivers its tips and insights.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct OutboundConfig {
    /// Where tips and insights go: the agent's inbox (delivered at its next hook), a JSON
    /// POST to `webhook_url`, or Telegram's `sendMessage`.
    pub target: OutboundTarget,
    /// The URL target "webhook" POSTs each tip and insight to, as JSON (`outputId`, `kind`,
    /// `text`, `ts`); required for that target.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub webhook_url: Option<String>,
    /// The Bot API's base URL (a test points it at a loopback server).
    pub telegram_api: String,
    /// The chat target "telegram" sends to (`chat_id` of `sendMessage`); required for that
    /// target.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub telegram_chat_id: Option<String>,
    /// The environment variable holding the bot token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub telegram_token_env: Option<String>,
    /// A file holding the bot token (first line).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub telegram_token_file: Option<std::path::PathBuf>,
    /// How long one webhook or Telegram request may take.
    pub timeout: Span,
}

impl Default for OutboundConfig {
    fn default() -> Self {
        OutboundConfig {
            target: OutboundTarget::Inbox,
            webhook_url: None,
            telegram_api: "https://api.telegram.org".into(),
            telegram_chat_id: None,
            telegram_token_env: None,
            telegram_token_file: None,
            timeout: Span::secs(15),
        }
    }
}

/// `[reflection]`: the reflection heartbeat (`mneme reflect`): idle detection, the spawn
/// threshold, mining, and the model, answer size and timeout of each stage.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ReflectionConfig {
    /// The agent is idle after this long without hook activity (mining runs on idle
    /// ticks; actions wait for an active one).
    pub idle_after: Span,
    /// The spawn threshold a fresh install starts with, and one `useful` result resets to.
    pub spawn_threshold: f64,
    /// What three ignored spawns in a row add to the threshold.
    pub spawn_threshold_step: f64,
    /// The threshold never goes above this.
    pub spawn_threshold_max: f64,
    /// Phase 2 tips, and the lessons in force once a day, count as outputs for
    /// effectiveness.
    pub count_tips_as_outputs: bool,
    /// Days of daily memory files the miner looks at (and the mining index keeps).
    pub mining_window_days: u32,
    /// Heartbeat logs and playbook archive copies older than this move to `archive/`.
    pub log_retention: Span,
    /// The most sensitive records whose text reaches a model (as consolidation's cap).
    pub llm_max_sensitivity: Sensitivity,
    pub models: ModelsConfig,
    pub stages: StagesConfig,
    pub git: GitConfig,
    pub outbound: OutboundConfig,
}

impl Default for ReflectionConfig {
    fn default() -> Self {
        ReflectionConfig {
            idle_after: Span::secs(30 * 60),
            spawn_threshold: 0.5,
            spawn_threshold_step: 0.1,
            spawn_threshold_max: 0.9,
            count_tips_as_outputs: true,
            mining_window_days: 7,
            log_retention: Span::secs(30 * 86_400),
            llm_max_sensitivity: Sensitivity::Medium,
            models: ModelsConfig::default(),
            stages: StagesConfig::default(),
            git: GitConfig::default(),
            outbound: OutboundConfig::default(),
        }
    }
}

impl ReflectionConfig {
    /// The model a stage asks: its `model`, with `fast` / `smart` resolved; `None` for the
    /// client's default model.
    pub fn model_for(&self, stage: Stage) -> Option<String> {
        let named = match self.stages.get(stage).model.as_str() {
            "fast" => self.models.fast.clone(),
            "smart" => self.models.smart.clone(),
            other => other.to_string(),
        };
        (!named.trim().is_empty()).then_some(named)
    }

    /// The first problem, as (key, message).
    pub fn check(&self) -> Result<(), (String, String)> {
        let bad = |key: &str, msg: String| Err((format!("reflection.{key}"), msg));
        for (key, v) in [("spawn_threshold", self.spawn_threshold), ("spawn_threshold_step", self.spawn_threshold_step)] {
            if !(0.0..=1.0).contains(&v) {
                return bad(key, format!("{v} must be between 0 and 1"));
            }
        }
        if !(self.spawn_threshold..=1.0).contains(&self.spawn_threshold_max) {
            return bad("spawn_threshold_max", format!("{} must be between spawn_threshold and 1", self.spawn_threshold_max));
        }
        if self.idle_after.is_zero() {
            return bad("idle_after", "must be longer than zero".into());
        }
        if self.mining_window_days == 0 || self.mining_window_days > 90 {
            return bad("mining_window_days", format!("{} must be between 1 and 90", self.mining_window_days));
        }
        if self.log_retention.get() < std::time::Duration::from_secs(86_400) {
            return bad("log_retention", "must be at least a day".into());
        }
        for s in Stage::ALL {
            let c = self.stages.get(s);
            if c.model.trim().is_empty() {
                return bad(&format!("stages.{}.model", s.name()), "must be \"fast\", \"smart\" or a model name".into());
            }
            if c.max_tokens == 0 || c.max_tokens > 100_000 {
                return bad(&format!("stages.{}.max_tokens", s.name()), format!("{} must be between 1 and 100000", c.max_tokens));
            }
            if c.timeout.is_some_and(Span::is_zero) {
                return bad(&format!("stages.{}.timeout", s.name()), "must be longer than zero".into());
            }
        }
        let o = &self.outbound;
        match o.target {
            OutboundTarget::Inbox => {}
            OutboundTarget::Webhook => match &o.webhook_url {
                Some(url) if url.starts_with("http://") || url.starts_with("https://") => {}
                Some(url) => return bad("outbound.webhook_url", format!("{url:?} must start with http:// or https://")),
                None => return bad("outbound.webhook_url", "must be set when outbound.target is \"webhook\"".into()),
            },
            OutboundTarget::Telegram => {
                if o.telegram_chat_id.as_deref().is_none_or(|c| c.trim().is_empty()) {
                    return bad("outbound.telegram_chat_id", "must be set when outbound.target is \"telegram\"".into());
                }
                if o.telegram_token_env.is_some() == o.telegram_token_file.is_some() {
                    return bad("outbound", "target \"telegram\" needs exactly one of telegram_token_env, telegram_token_file".into());
                }
                if !(o.telegram_api.starts_with("http://") || o.telegram_api.starts_with("https://")) {
                    return bad("outbound.telegram_api", format!("{:?} must start with http:// or https://", o.telegram_api));
                }
            }
        }
        if o.timeout.is_zero() {
            return bad("outbound.timeout", "must be longer than zero".into());
        }
        if self.git.push && !self.git.backup {
            return bad("git.push", "needs git.backup = true".into());
        }
        Ok(())
    }
}
