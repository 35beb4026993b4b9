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
    /// The master switch (membrane §1, §3): off, every hook answers at once and does
    /// nothing: no record, no activity, no journal, an empty session-start block, no
    /// auto-recall (a `tool_result_persist` gives no cleaned result, so the host keeps
    /// its own).
    pub enabled: bool,
    /// Remember each user and assistant message as an episodic record (and add it to the
    /// conversation log and the consolidation buffer); off: messages are not kept.
    pub capture_messages: bool,
    /// Remember each tool call's result and outcome, which the competence tracker counts;
    /// off: tool calls are not kept and no competence records are made.
    pub capture_tool_calls: bool,
    /// Before the runtime compacts a conversation, keep a working-memory snapshot of the
    /// messages being compacted.
    pub capture_working_state: bool,
    /// Sensitivity of captured messages and facts (direct-message channels: at least medium).
    pub default_sensitivity: Sensitivity,
    /// Take facts from each user message with the built-in patterns as it arrives, without
    /// an LLM (the assistant's messages are never mined).
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
    /// Inject the memories relevant to each prompt; off: nothing is injected.
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
            enabled: true,
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

/// `[hooks.session_start]`: the context block the session-start hook injects: the user's
/// live facts first, then the memories the task and salience choose.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SessionStartConfig {
    /// Inject memories at session start; off: the hook returns an empty block.
    pub enabled: bool,
    /// The most memories chosen for the block (task-relevant ones first, then the most
    /// salient), between 1 and `limits.max_limit`. The user's live facts come on top.
    pub max_records: usize,
    /// Memories whose current salience (0 to 1) is below this are not chosen; the user's
    /// live facts are shown whatever their salience.
    pub min_salience: f64,
    /// The memory types the block draws on; the user's live facts are shown only when
    /// `semantic` is listed.
    pub memory_types: Vec<MemoryType>,
    /// The block's format when the request names none. Only the Markdown block carries the
    /// curated memory, the playbook and queued instructions.
    pub format: ContextFormat,
    /// The most characters the block's facts take (the user's first). Default 4000.
    pub max_chars: usize,
    /// The most characters of the whole block: the workspace's files, what is true now, the
    /// relevant knowledge, the conversation since the last sync, the playbook (in that
    /// order; what does not fit is cut with a note). Instructions from mneme come on top.
    /// Default 16000.
    pub budget_chars: usize,
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
            budget_chars: 16_000,
            format: ContextFormat::Markdown,
            reinforce_on_success: 0.05,
            context_file: false,
        }
    }
}

/// `[hooks.competence]`: the competence tracker, which keeps one record per tool
/// (`skill:<tool>`) with its calls' successes and failures.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CompetenceConfig {
    /// Keep a competence record per tool, made once the tool has `min_occurrences` calls and
    /// updated with each call's outcome. Needs `hooks.capture_tool_calls`.
    pub enabled: bool,
    /// Calls of a tool before it gets a competence record.
    pub min_occurrences: u64,
    /// Raise the salience of the tool's competence record after each successful call.
    pub reinforce_on_success: bool,
    /// Lower the salience of the tool's competence record after each failed call.
    pub penalize_on_failure: bool,
    /// Salience a successful call adds to the record (0 to 1).
    pub reinforce_amount: f64,
    /// Salience a failed call takes from the record (0 to 1).
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

/// `[consolidation]`: turning the buffered conversation into durable facts, with the regex
/// patterns always and with an LLM when `llm_endpoint` is set.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ConsolidationConfig {
    /// Buffer captured messages and consolidate them in cycles; off: nothing is buffered
    /// and no cycle runs.
    pub enabled: bool,
    /// Time between consolidation cycles (`30m`); an agent-end or gateway-stop hook and the
    /// daemon's shutdown also run one.
    pub interval: Span,
    /// Messages per cycle; the buffer holds at most twice this many (oldest dropped).
    pub batch_size: usize,
    /// LLM facts below this confidence are dropped.
    pub min_confidence: f64,
    /// OpenAI-compatible base URL (`http://127.0.0.1:11434/v1`); unset: regex only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub llm_endpoint: Option<String>,
    /// The model asked for facts (`MNEME_LLM_MODEL`), and the shared LLM client's default
    /// model for every engine that names no other.
    pub llm_model: String,
    /// Bearer token sent to `llm_endpoint` (`MNEME_LLM_API_KEY`); unset or empty: none.
    /// `mneme config show` never prints it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub llm_api_key: Option<String>,
    /// How long one LLM request may take, for every engine (a reflection stage may set its
    /// own); a request that runs over counts as a failure and starts the backoff.
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

/// `[maintenance]`: the periodic sweep that prunes faded records and applies the retention
/// policy.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MaintenanceConfig {
    /// How often the decay/prune sweep runs; "0s" turns it off.
    pub decay_interval: Span,
    /// At each sweep, drop the payload of unpinned records whose salience fell below
    /// `decay.prune_threshold` (the record, its links and audit stay).
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
    /// Erase episodic records older than this (up to `365d`), counted from their event time
    /// (else from when they were stored); unset or 0: keep them.
    pub episodic: Option<Span>,
    /// Erase semantic records (facts) older than this (up to `365d`); unset or 0: keep them.
    pub semantic: Option<Span>,
    /// Erase competence records older than this (up to `365d`); unset or 0: keep them.
    pub competence: Option<Span>,
    /// Erase working-memory records older than this (up to `365d`); unset or 0: keep them.
    pub working: Option<Span>,
    /// Erase plan-graph records older than this (up to `365d`); unset or 0: keep them.
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
