//! The engines' settings: `[hooks]` (with its session-start, competence and auto-recall
//! tables), `[consolidation]` and `[maintenance]`. The binary and the daemon compose them
//! with every other crate's settings into `mneme_server::MnemeConfig`, which layers and
//! validates the whole document.

use mneme_core::{MemoryType, Sensitivity, Span};
use serde::{Deserialize, Serialize};

/// `[hooks]`: what the hook engine captures from a conversation and puts in a session's context.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HooksConfig {
    pub capture_messages: bool,
    pub capture_tool_calls: bool,
    pub capture_working_state: bool,
    /// Sensitivity of captured messages and facts (direct-message channels: at least medium).
    pub default_sensitivity: Sensitivity,
    pub regex_extraction: bool,
    pub session_start: SessionStartConfig,
    pub competence: CompetenceConfig,
    pub auto_recall: AutoRecallConfig,
    /// Memory per end user: `sender` (default) puts a user's messages, and the facts from
    /// them, in the scope `user:<id>`, the id being `ctx.userId` or the message's
    /// `from`/`sender`; a session whose user is known sees that user's memories and global
    /// ones. `off`: every message in the principal's default scope.
    pub user_scopes: UserScopes,
    /// The end user a hook that names none (no `userId`, no sender) is for: session start
    /// and recall see this user's memories. Unset: the store's only end user when it has
    /// exactly one, else global memories only (never several users' facts at once).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_user: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum UserScopes {
    #[default]
    Sender,
    Off,
}

/// `[hooks.auto_recall]`: the memories relevant to a prompt, injected by Claude Code's
/// `prompt-submit` hook (`mneme claude-hook prompt-submit`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AutoRecallConfig {
    pub enabled: bool,
    /// The most memories injected per prompt. Default 3.
    pub limit: usize,
    /// Only memories whose relevance (normalised to the best match, 0–1) reaches this.
    /// Default 0.5.
    pub min_relevance: f64,
}

impl Default for AutoRecallConfig {
    fn default() -> Self {
        AutoRecallConfig { enabled: true, limit: 3, min_relevance: 0.5 }
    }
}

impl Default for HooksConfig {
    fn default() -> Self {
        HooksConfig {
            capture_messages: true,
            capture_tool_calls: true,
            capture_working_state: true,
            default_sensitivity: Sensitivity::Low,
            regex_extraction: true,
            session_start: SessionStartConfig::default(),
            competence: CompetenceConfig::default(),
            auto_recall: AutoRecallConfig::default(),
            user_scopes: UserScopes::Sender,
            default_user: None,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ContextFormat {
    #[default]
    Markdown,
    Json,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SessionStartConfig {
    pub enabled: bool,
    pub max_records: usize,
    pub min_salience: f64,
    pub memory_types: Vec<MemoryType>,
    pub format: ContextFormat,
    /// The most characters the block's facts take (the user's first). Default 4000.
    pub max_chars: usize,
    /// Reinforcement given to the injected records when the session ends successfully.
    pub reinforce_on_success: f64,
    /// Also write every block to the workspace's `memory/membrane/context.md`, for hosts
    /// that cannot inject context (the seed's fallback); a request's `writeContextFile`
    /// overrides it.
    pub context_file: bool,
}

impl Default for SessionStartConfig {
    fn default() -> Self {
        SessionStartConfig {
            enabled: true,
            max_records: 20,
            min_salience: 0.3,
            memory_types: vec![MemoryType::Semantic, MemoryType::Competence, MemoryType::Working],
            max_chars: 4000,
            format: ContextFormat::Markdown,
            reinforce_on_success: 0.05,
            context_file: false,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CompetenceConfig {
    pub enabled: bool,
    /// Calls of a tool before it gets a competence record.
    pub min_occurrences: u64,
    pub reinforce_on_success: bool,
    pub penalize_on_failure: bool,
    pub reinforce_amount: f64,
    pub penalty_amount: f64,
}

impl Default for CompetenceConfig {
    fn default() -> Self {
        CompetenceConfig {
            enabled: true,
            min_occurrences: 3,
            reinforce_on_success: true,
            penalize_on_failure: true,
            reinforce_amount: 0.05,
            penalty_amount: 0.1,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ConsolidationConfig {
    pub enabled: bool,
    pub interval: Span,
    /// Messages per cycle; the buffer holds at most twice this many (oldest dropped).
    pub batch_size: usize,
    /// LLM facts below this confidence are dropped.
    pub min_confidence: f64,
    /// OpenAI-compatible base URL (`http://127.0.0.1:11434/v1`); unset: regex only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub llm_endpoint: Option<String>,
    pub llm_model: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub llm_api_key: Option<String>,
    pub llm_timeout: Span,
    /// First LLM backoff after a failure; doubles per failure, capped at 10×.
    pub llm_backoff: Span,
    /// The most sensitive messages sent to the LLM endpoint; above this, regex only.
    pub llm_max_sensitivity: Sensitivity,
}

impl Default for ConsolidationConfig {
    fn default() -> Self {
        ConsolidationConfig {
            enabled: true,
            interval: Span::secs(1800),
            batch_size: 50,
            min_confidence: 0.6,
            llm_endpoint: None,
            llm_model: "mistral:7b".into(),
            llm_api_key: None,
            llm_timeout: Span::secs(30),
            llm_backoff: Span::secs(60),
            llm_max_sensitivity: Sensitivity::Medium,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MaintenanceConfig {
    /// How often the decay/prune sweep runs; "0s" turns it off.
    pub decay_interval: Span,
    pub prune: bool,
    /// `[maintenance.retention]`: erase records of a type older than an age (`episodic =
    /// "365d"`), as `mneme forget` does, at each sweep. Unset types are kept forever.
    pub retention: RetentionConfig,
}

impl Default for MaintenanceConfig {
    fn default() -> Self {
        MaintenanceConfig { decay_interval: Span::secs(3600), prune: true, retention: RetentionConfig::default() }
    }
}

/// Ages per memory type after which the sweep erases records (none by default).
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RetentionConfig {
    pub episodic: Option<Span>,
    pub semantic: Option<Span>,
    pub competence: Option<Span>,
    pub working: Option<Span>,
    pub plan_graph: Option<Span>,
}

impl RetentionConfig {
    /// The policy as (type, age) pairs, zero ages left out.
    pub fn policy(&self) -> Vec<(MemoryType, std::time::Duration)> {
        [
            (MemoryType::Episodic, self.episodic),
            (MemoryType::Semantic, self.semantic),
            (MemoryType::Competence, self.competence),
            (MemoryType::Working, self.working),
            (MemoryType::PlanGraph, self.plan_graph),
        ]
        .into_iter()
        .filter_map(|(t, age)| age.filter(|a| !a.is_zero()).map(|a| (t, a.get())))
        .collect()
    }
}
