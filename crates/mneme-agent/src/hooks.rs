//! The agent hooks: what an agent runtime reports (messages, tool calls, compaction,
//! session boundaries) turned into memory, and the context block handed back at session
//! start. The seed's ingestion bridge, retrieval bridge and competence tracker, run inside
//! the daemon (or in-process by `mneme hook` when no daemon is up).
//!
//! Invariant: a hook never fails its caller. [`Hooks::handle`] returns a [`HookOutcome`]
//! whose `error` says what went wrong; the transports answer with success regardless.
//!
//! The competence tracker keeps no statistics of its own: before a tool has a competence
//! record its counts are rebuilt from the tool's episodic call records, afterwards they
//! live in the competence record's performance. So counts survive restarts and are the
//! same whether hooks arrive at a daemon or at `mneme hook`. Each call also gets an outcome
//! record linked `outcome_of` to its tool record (membrane §12), and once the competence
//! record exists each call is counted in it in place (`Ops::record_skill_use`, audited),
//! not by a supersede per call. Only the pending-call table (start times) and the
//! injected-record lists are in memory.

use std::collections::HashMap;
use std::sync::Mutex;
use tokio::time::Instant;

use jiff::Timestamp;
use mneme_core::{
    CompetencePayload, EventPayload, MemoryType, Payload, Performance, RecordId, SemanticPayload, Sensitivity, ToolOutputPayload,
    WorkingPayload, normalize_error, one_line,
};
use mneme_service::{Hit, IngestOptions, OutcomeKind, OutcomeRequest, RetrieveRequest, SkillUse};
use serde::{Deserialize, Serialize};

use mneme_service::{Ops, Principal, ServiceError, ServiceResult};

use crate::config::{ContextFormat, HooksConfig};
use crate::format;
use mneme_truth::patterns;

pub const ACTOR: &str = "mneme:hooks";
pub const COMPETENCE_ACTOR: &str = "mneme:competence";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HookName {
    SessionStart,
    MessageReceived,
    MessageSent,
    BeforeToolCall,
    AfterToolCall,
    BeforeCompaction,
    AgentEnd,
    GatewayStop,
    /// A session is over (`/new`, the host closing it): its daily-log entry and named
    /// snapshot are written and its tracking freed.
    SessionEnd,
    /// Before the host persists a tool result in its history: the result comes back with
    /// `<private>` blocks removed.
    ToolResultPersist,
}

impl HookName {
    pub const ALL: [HookName; 10] = [
        HookName::SessionStart,
        HookName::MessageReceived,
        HookName::MessageSent,
        HookName::BeforeToolCall,
        HookName::AfterToolCall,
        HookName::BeforeCompaction,
        HookName::AgentEnd,
        HookName::GatewayStop,
        HookName::SessionEnd,
        HookName::ToolResultPersist,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            HookName::SessionStart => "session_start",
            HookName::MessageReceived => "message_received",
            HookName::MessageSent => "message_sent",
            HookName::BeforeToolCall => "before_tool_call",
            HookName::AfterToolCall => "after_tool_call",
            HookName::BeforeCompaction => "before_compaction",
            HookName::AgentEnd => "agent_end",
            HookName::GatewayStop => "gateway_stop",
            HookName::SessionEnd => "session_end",
            HookName::ToolResultPersist => "tool_result_persist",
        }
    }

    /// Accepts `session_start`, `session-start` and `sessionStart`.
    pub fn parse(s: &str) -> Option<Self> {
        let norm: String = s.chars().filter(|c| *c != '_' && *c != '-').collect::<String>().to_lowercase();
        HookName::ALL.into_iter().find(|h| h.as_str().replace('_', "") == norm)
    }

    /// Hooks after which the consolidation buffer is flushed.
    pub fn flushes(self) -> bool {
        matches!(self, HookName::AgentEnd | HookName::GatewayStop)
    }
}

/// Who and where: the agent runtime's context for the event.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct HookContext {
    #[serde(alias = "agent_id")]
    pub agent_id: Option<String>,
    #[serde(alias = "session_key")]
    pub session_key: Option<String>,
    #[serde(alias = "session_id")]
    pub session_id: Option<String>,
    #[serde(alias = "channel_id")]
    pub channel_id: Option<String>,
    /// The end user the session serves (memory per user: their scope `user:<id>`).
    #[serde(alias = "user_id")]
    pub user_id: Option<String>,
}

impl HookContext {
    pub fn session(&self) -> String {
        self.session_id.clone().or_else(|| self.session_key.clone()).filter(|s| !s.is_empty()).unwrap_or_else(|| "unknown".into())
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct CompactingMessage {
    pub role: String,
    pub content: String,
    pub timestamp: Option<String>,
}

/// The event: the union of every hook's fields (as in the seed's `HookEvent`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct HookEvent {
    pub content: Option<String>,
    pub message: Option<String>,
    pub text: Option<String>,
    pub from: Option<String>,
    pub sender: Option<String>,
    pub timestamp: Option<String>,
    #[serde(alias = "tool_name")]
    pub tool_name: Option<String>,
    pub params: Option<serde_json::Value>,
    pub error: Option<String>,
    pub success: Option<bool>,
    #[serde(alias = "duration_ms")]
    pub duration_ms: Option<u64>,
    #[serde(alias = "compacting_messages")]
    pub compacting_messages: Vec<CompactingMessage>,
    #[serde(alias = "compacting_count")]
    pub compacting_count: Option<u64>,
    /// session_start: extra words describing the task.
    pub query: Option<String>,
    /// session_start: `markdown` or `json`.
    pub format: Option<ContextFormat>,
    /// tool_result_persist: the tool's result as the host will store it (a string, an
    /// array of content blocks, or any JSON).
    pub result: Option<serde_json::Value>,
    /// session_end: why it ended (`clear`, `logout`, …) and a name for its snapshot.
    pub reason: Option<String>,
    /// session_start: also write the block to the workspace's `memory/membrane/context.md`
    /// (for hosts that cannot inject context; default `hooks.session_start.context_file`).
    pub write_context_file: Option<bool>,
    /// message_received: also answer, in `context`, with the memories relevant to the
    /// message (auto-recall, `[hooks.auto_recall]`, found before the message is stored)
    /// and the instructions queued for the owner's agent: what an agent runtime injects
    /// at the start of its turn (Claude Code's `UserPromptSubmit`).
    pub recall: Option<bool>,
}

impl HookEvent {
    pub fn content(&self) -> &str {
        [&self.content, &self.message, &self.text].into_iter().flatten().map(String::as_str).find(|s| !s.trim().is_empty()).unwrap_or("")
    }
}

/// A hook request: `{"event": {...}, "ctx": {...}}`, or the event's and the context's
/// fields side by side in one flat object.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HookInput {
    pub event: HookEvent,
    pub ctx: HookContext,
}

impl HookInput {
    pub fn from_json(value: serde_json::Value) -> Result<Self, String> {
        let parse = |v: serde_json::Value, what: &str| -> Result<serde_json::Value, String> {
            if v.is_object() || v.is_null() { Ok(v) } else { Err(format!("{what} must be a JSON object")) }
        };
        let value = parse(value, "the hook input")?;
        let (event, ctx) = match value.as_object() {
            Some(o) if o.contains_key("event") || o.contains_key("ctx") => {
                (parse(o.get("event").cloned().unwrap_or_default(), "event")?, parse(o.get("ctx").cloned().unwrap_or_default(), "ctx")?)
            }
            _ => (value.clone(), value),
        };
        let event =
            if event.is_null() { HookEvent::default() } else { serde_json::from_value(event).map_err(|e| format!("event: {e}"))? };
        let ctx = if ctx.is_null() { HookContext::default() } else { serde_json::from_value(ctx).map_err(|e| format!("ctx: {e}"))? };
        Ok(HookInput { event, ctx })
    }
}

/// What a hook did. `error` is set when it could not do it; the caller is not failed.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct HookOutcome {
    pub hook: Option<HookName>,
    /// session_start: the context block (empty when there is nothing to inject). Over
    /// JSON, a block asked for as `"format": "json"` is the object itself, not a string
    /// holding JSON.
    #[serde(skip_serializing_if = "Option::is_none", serialize_with = "context_value")]
    pub context: Option<String>,
    /// Records written (or, for session_start, injected).
    pub record_ids: Vec<RecordId>,
    /// tool_result_persist: the result with `<private>` blocks removed, for the host to
    /// store instead of its own.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub result: Option<serde_json::Value>,
    /// session_end: the files written (the daily-log entry and the snapshot).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// message_received: the user asked, in conversation, to forget something about
    /// themselves (`erasure`): what was done, for the agent to confirm to the user.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub forgotten: Option<String>,
}

/// The context block as JSON: an object when it is one (the JSON format), else the text.
fn context_value<S: serde::Serializer>(context: &Option<String>, out: S) -> Result<S::Ok, S::Error> {
    use serde::Serialize as _;
    match context.as_deref() {
        Some(text) if text.starts_with('{') => match serde_json::from_str::<serde_json::Value>(text) {
            Ok(v) if v.is_object() => v.serialize(out),
            _ => text.serialize(out),
        },
        other => other.serialize(out),
    }
}

/// A message waiting for the next consolidation cycle.
#[derive(Debug, Clone, PartialEq)]
pub struct BufferedMessage {
    pub role: String,
    /// Who said it (the user's name, when the host gives one).
    pub sender: Option<String>,
    pub content: String,
    pub timestamp: Timestamp,
    pub sensitivity: Sensitivity,
    pub scope: mneme_core::Scope,
}

#[derive(Debug, Default)]
struct State {
    /// (session, tool) → the pending call: its start and parameters.
    pending: HashMap<(String, String), (Instant, Option<serde_json::Value>)>,
    /// session → records injected at its start (and when).
    injected: HashMap<String, (Instant, Vec<RecordId>)>,
    /// session → the user its messages came from (memory per user).
    users: HashMap<String, (Instant, String)>,
}

/// Pending calls and injected lists whose end never arrived are forgotten after this long,
/// and each map holds at most [`STATE_CAP`] entries (the oldest go first).
const STATE_TTL: std::time::Duration = std::time::Duration::from_secs(6 * 3600);
const STATE_CAP: usize = 10_000;
/// The largest `before_tool_call` parameters kept with a pending call (JSON bytes).
const PARAMS_KEPT: usize = 16 * 1024;

/// Drops entries older than [`STATE_TTL`], then the oldest beyond [`STATE_CAP`] − 1, so
/// one more fits.
fn make_room<K: Clone + Eq + std::hash::Hash, V>(map: &mut HashMap<K, V>, started: impl Fn(&V) -> Instant) {
    map.retain(|_, v| started(v).elapsed() < STATE_TTL);
    while map.len() >= STATE_CAP {
        let Some(oldest) = map.iter().min_by_key(|(_, v)| started(v)).map(|(k, _)| k.clone()) else { break };
        map.remove(&oldest);
    }
}

/// The hook engine.
#[derive(Debug)]
pub struct Hooks {
    ops: Ops,
    config: HooksConfig,
    state: Mutex<State>,
    /// Serialises competence updates so two results for one tool cannot race to supersede.
    competence: Mutex<()>,
    /// The file workspace's journals (session summaries, daily log, command log), written
    /// when the workspace exists.
    journal: Option<Journal>,
    /// The workspace whose inner state hook events move (`memory/inner-state.json`).
    inner: Option<mneme_workspace::WorkspaceSettings>,
    /// The workspace whose files the session-start block opens with (identity, state,
    /// references, the speaking user's profile), and whose knowledge it searches.
    files: Option<mneme_workspace::WorkspaceSettings>,
}

/// The sinain journals the hooks keep in the workspace's `memory/` folder.
#[derive(Debug)]
struct Journal {
    settings: mneme_workspace::WorkspaceSettings,
    sessions: Mutex<mneme_workspace::journal::SessionTracker>,
}

impl Hooks {
    pub fn new(ops: Ops, config: HooksConfig) -> Self {
        Hooks { ops, config, state: Mutex::new(State::default()), competence: Mutex::new(()), journal: None, inner: None, files: None }
    }

    /// Also keep the workspace journals: per-session tool and message counts with a summary
    /// line in `memory/session-summaries.jsonl` at agent end, the pre-compaction flush in
    /// the daily log, and session starts and ends in `memory/commands.log`.
    pub fn with_workspace(mut self, settings: mneme_workspace::WorkspaceSettings) -> Self {
        self.inner = Some(settings.clone());
        self.files = Some(settings.clone());
        self.journal = Some(Journal { settings, sessions: Mutex::new(Default::default()) });
        self
    }

    /// Only move the workspace's inner state and build the session-start block from its
    /// files (without the journals): what a one-shot hook process such as `mneme claude-hook` wants.
    pub fn with_inner_life(mut self, settings: mneme_workspace::WorkspaceSettings) -> Self {
        self.inner = Some(settings.clone());
        self.files = Some(settings);
        self
    }

    /// Inner life: a user message lifts connection; a failed tool call is a repeat of its
    /// normalised failure mode (frustration). Never fails the hook: a write error is logged.
    fn record_inner(&self, name: HookName, input: &HookInput) {
        let Some(settings) = &self.inner else { return };
        if !settings.dir.join(mneme_workspace::paths::MEMORY_DIR).is_dir() {
            return;
        }
        let events = match name {
            HookName::MessageReceived => vec![mneme_workspace::inner::InnerEvent::UserMessage {}],
            HookName::AfterToolCall => input
                .event
                .error
                .as_deref()
                .filter(|e| !e.trim().is_empty())
                .map(|e| vec![mneme_workspace::inner::InnerEvent::Repeat { what: normalize_error(e) }])
                .unwrap_or_default(),
            _ => Vec::new(),
        };
        if !events.is_empty()
            && let Err(e) = mneme_workspace::inner::record(settings, &events, self.ops.now())
        {
            tracing::warn!(hook = name.as_str(), error = %e, "inner state not updated");
        }
    }

    /// Updates the journals for one hook event. Never fails the hook: a write error is logged.
    fn keep_journal(&self, name: HookName, input: &HookInput) {
        use mneme_workspace::journal::{self, CommandLogEntry};
        let Some(j) = &self.journal else { return };
        if !j.settings.dir.join(mneme_workspace::paths::MEMORY_DIR).is_dir() {
            return;
        }
        let now = self.ops.now();
        let session = input.ctx.session();
        let mut tracker = j.sessions.lock().unwrap_or_else(|p| p.into_inner());
        let command = |action: &str, detail: Option<serde_json::Value>| CommandLogEntry {
            timestamp: now,
            action: action.to_string(),
            session_key: Some(session.clone()),
            sender_id: input.event.from.clone().or_else(|| input.event.sender.clone()),
            source: "hook".into(),
            detail,
        };
        let written = match name {
            HookName::SessionStart => {
                tracker.start(&session, now);
                journal::log_command(&j.settings, &command("session_start", None))
            }
            HookName::MessageReceived | HookName::MessageSent => {
                tracker.record_message(&session, now);
                Ok(())
            }
            HookName::AfterToolCall => {
                if let Some(tool) = input.event.tool_name.as_deref().filter(|t| !t.is_empty()) {
                    tracker.record_tool(&session, tool, now);
                    // The active modules this call used: a keyword in it, a file it touched.
                    let (text, files) = tool_call_terms(tool, input.event.params.as_ref());
                    if let Err(e) = mneme_workspace::modules::record_triggers(&j.settings, &text, &files, now) {
                        tracing::warn!(error = %e, "module triggers not recorded");
                    }
                }
                Ok(())
            }
            HookName::BeforeCompaction if !input.event.compacting_messages.is_empty() => {
                let text =
                    format!("Pre-compaction flush ({session}):\n\n{}", summarize_messages(&input.event.compacting_messages, 15, 200));
                journal::append_daily(&j.settings, now, &text).map(|_| ())
            }
            HookName::AgentEnd => {
                let success = input.event.success.unwrap_or(true) && input.event.error.is_none();
                tracker.end(&j.settings, &session, input.ctx.agent_id.as_deref(), success, input.event.error.as_deref(), now).and_then(
                    |summary| {
                        let detail =
                            summary.map(|s| serde_json::json!({ "toolCallCount": s.tool_call_count, "messageCount": s.message_count }));
                        journal::log_command(&j.settings, &command("agent_end", detail))
                    },
                )
            }
            HookName::GatewayStop => {
                let open = tracker.forget_all();
                journal::log_command(&j.settings, &command("gateway_stop", (open > 0).then(|| serde_json::json!({ "openSessions": open }))))
            }
            HookName::SessionEnd => journal::log_command(
                &j.settings,
                &command("session_end", input.event.reason.clone().map(|r| serde_json::json!({ "reason": r }))),
            ),
            HookName::BeforeToolCall | HookName::BeforeCompaction | HookName::ToolResultPersist => Ok(()),
        };
        if let Err(e) = written {
            tracing::warn!(hook = name.as_str(), error = %e, "workspace journal not written");
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Runs one hook. Messages to buffer for consolidation are pushed into `buffer`.
    pub fn handle(&self, p: &Principal, name: HookName, input: HookInput, buffer: &mut Vec<BufferedMessage>) -> HookOutcome {
        let mut outcome = HookOutcome { hook: Some(name), ..HookOutcome::default() };
        // `[hooks] enabled = false`: every hook is off at once.
        if !self.config.enabled {
            if name == HookName::SessionStart {
                outcome.context = Some(String::new());
            }
            return outcome;
        }
        // Every hook event is activity: the heartbeat and require-idle tasks read it.
        if let Err(e) = self.ops.touch_activity() {
            tracing::warn!(hook = name.as_str(), error = %e, "activity not recorded");
        }
        let result = match name {
            HookName::SessionStart => self.session_start(p, &input, &mut outcome),
            HookName::MessageReceived if input.event.recall == Some(true) => self.turn_start(p, &input, buffer, &mut outcome),
            HookName::MessageReceived => self.message(p, &input, "user", buffer, &mut outcome),
            HookName::MessageSent => self.message(p, &input, "assistant", buffer, &mut outcome),
            HookName::BeforeToolCall => self.before_tool_call(&input),
            HookName::AfterToolCall => self.after_tool_call(p, &input, &mut outcome),
            HookName::BeforeCompaction => self.before_compaction(p, &input, &mut outcome),
            HookName::AgentEnd => self.agent_end(p, &input),
            HookName::GatewayStop => Ok(()),
            HookName::SessionEnd => self.session_end(p, &input, &mut outcome),
            HookName::ToolResultPersist => tool_result_persist(&input, &mut outcome),
        };
        match result {
            // The journals are unlabeled workspace files: only for unrestricted principals.
            Ok(()) if p.unrestricted() => {
                self.record_inner(name, &input);
                self.keep_journal(name, &input);
            }
            Ok(()) => {}
            Err(e) => {
                tracing::warn!(hook = name.as_str(), error = %e, "hook failed");
                outcome.error = Some(e.to_string());
            }
        }
        outcome
    }

    /// Auto-recall: the few memories relevant to a prompt, as a Markdown block with their
    /// dates (`None` when nothing reaches `[hooks.auto_recall]`'s bar or it is off). Live
    /// facts of the slot the prompt asks about come first (retrieval's slot boost); the
    /// assistant's own messages are never recalled as memories.
    pub fn recall_for_prompt(&self, p: &Principal, prompt: &str, user: Option<&str>) -> ServiceResult<Option<String>> {
        let cfg = &self.config.auto_recall;
        if !self.config.enabled || !cfg.enabled || cfg.limit == 0 || prompt.trim().is_empty() {
            return Ok(None);
        }
        let query = prompt[..prompt.floor_char_boundary(self.ops.limits().max_query_bytes)].to_string();
        let scopes = self.visible_scopes(p, user);
        let request = RetrieveRequest { query, scopes, limit: cfg.limit * 3, ..RetrieveRequest::default() };
        let lines: Vec<String> = self
            .ops
            .retrieve(p, &request)?
            .into_iter()
            .filter(|h| h.score.slot.is_some() || h.score.relevance.unwrap_or(0.0) >= cfg.min_relevance)
            .filter(|h| !h.record.tags.iter().any(|t| t == "role:assistant"))
            .filter(|h| !matches!(&h.record.payload, Some(Payload::Event(e)) if e.text.trim() == prompt.trim()))
            .take(cfg.limit)
            .map(|h| match &h.outdated {
                Some(o) => format!("- {} ({})", crate::truth::dated_line(&h.record), o.describe()),
                None => format!("- {}", crate::truth::dated_line(&h.record)),
            })
            .collect();
        Ok((!lines.is_empty()).then(|| format!("## Relevant memories\n\n{}\n", lines.join("\n"))))
    }

    /// A user message that starts the agent's turn (`event.recall`): the memories relevant
    /// to it are recalled first (the message itself is not a memory yet), then it is
    /// remembered as any user message, then the instructions queued for the owner's agent
    /// are taken, once nothing else can fail.
    fn turn_start(&self, p: &Principal, input: &HookInput, buffer: &mut Vec<BufferedMessage>, out: &mut HookOutcome) -> ServiceResult<()> {
        let prompt = mneme_core::private::strip(input.event.content());
        // A request to forget is answered by the erasure alone: nothing is recalled for it.
        // A recall that fails costs the turn its memories, not the message its storing.
        let recalled = match crate::erasure::forget_request(&prompt) {
            None => self.recall_for_prompt(p, &prompt, self.user_of(input, Some("user")).as_deref()).unwrap_or_else(|e| {
                tracing::warn!(error = %e, "no auto-recall for the message");
                None
            }),
            Some(_) => None,
        };
        self.message(p, input, "user", buffer, out)?;
        let parts: Vec<String> = recalled.into_iter().chain(self.take_instructions(p)).collect();
        out.context = (!parts.is_empty()).then(|| parts.join("\n"));
        Ok(())
    }

    /// The instructions queued for the owner's agent (BOOT.md at daemon start, spawned
    /// tasks, the heartbeat's tips, inner-life dispatches) as a Markdown section, taken
    /// (so each is delivered once); only for the owner, and only where the hooks keep the
    /// workspace. A failure is logged, not the hook's.
    fn take_instructions(&self, p: &Principal) -> Option<String> {
        if self.journal.is_none() || !p.unrestricted() {
            return None;
        }
        match self.ops.owner(p).and_then(|o| o.take_dispatches(20)) {
            Ok(taken) if !taken.is_empty() => {
                let text = taken.into_iter().map(|d| d.text).collect::<Vec<_>>().join("\n\n");
                Some(format!("## Instructions from mneme\n\n{text}\n"))
            }
            Ok(_) => None,
            Err(e) => {
                tracing::warn!(error = %e, "queued instructions not delivered");
                None
            }
        }
    }

    /// The end user of a hook: `ctx.userId`, else a user message's sender, else the user
    /// this session's earlier messages came from.
    fn user_of(&self, input: &HookInput, role: Option<&str>) -> Option<String> {
        let given = input.ctx.user_id.clone().filter(|u| !u.trim().is_empty());
        let sender = if role == Some("user") { input.event.from.clone().or_else(|| input.event.sender.clone()) } else { None };
        given.or(sender.filter(|s| !s.trim().is_empty())).or_else(|| self.state().users.get(&input.ctx.session()).map(|(_, u)| u.clone()))
    }

    /// The scope of a user's memories (`user:<id>`, the id lower-cased with runs of other
    /// characters as `-`), or `None` when per-user scopes are off.
    pub fn user_scope(&self, user: &str) -> Option<mneme_core::Scope> {
        if self.config.user_scopes == crate::config::UserScopes::Off {
            return None;
        }
        mneme_core::Scope::user(user)
    }

    /// The scope of what is made in a session: its user's (`user_of`), else none (the
    /// principal's default).
    fn session_scope(&self, input: &HookInput) -> Option<mneme_core::Scope> {
        self.user_of(input, None).and_then(|u| self.user_scope(&u))
    }

    /// What a hook that reads memories sees: the user's scope and global records. When
    /// the call names no user, the user is `[hooks] default_user`, else the store's only
    /// end user when it has exactly one (a personal agent); with several and none named,
    /// only global records (the owner's own): a call without `userId` never shows one end
    /// user's facts as another's. `None` (every scope) only when per-user scopes are off.
    pub fn visible_scopes(&self, p: &Principal, user: Option<&str>) -> Option<Vec<mneme_core::Scope>> {
        if self.config.user_scopes == crate::config::UserScopes::Off {
            return None;
        }
        let named = user.or(self.config.default_user.as_deref()).and_then(|u| self.user_scope(u));
        let scope = named.or_else(|| match self.ops.user_scopes(p, 2) {
            Ok(users) if users.len() == 1 => users.into_iter().next(),
            Ok(_) => None,
            Err(e) => {
                tracing::warn!(error = %e, "the store's end users could not be listed; showing global memories only");
                None
            }
        });
        Some(scope.into_iter().collect())
    }

    /// The records injected at the start of `session`.
    pub fn injected(&self, session: &str) -> Vec<RecordId> {
        self.state().injected.get(session).map(|(_, ids)| ids.clone()).unwrap_or_default()
    }

    // ---- session start ---------------------------------------------------------------

    /// The one session-start block (zylos §8.2 and §16.1, membrane's context), in this order
    /// and within `[hooks.session_start] budget_chars`: the workspace's identity, active
    /// state and references and the speaking user's profile; what is true now (`truth`:
    /// facts and chosen memories); the knowledge entries relevant to the session (file
    /// search on its task, `event.query`, else on the active state); the last sync checkpoint's
    /// summary and the conversation since; the curated memory, the playbook, how the agent
    /// is. A section that does not fit is cut at a line with a note; the injected files
    /// count as read.
    fn one_block(
        &self,
        p: &Principal,
        input: &HookInput,
        settings: &mneme_workspace::WorkspaceSettings,
        truth: String,
        stale: &std::collections::HashSet<String>,
        of: &ConversationOf,
    ) -> String {
        let mut sections: Vec<(String, String)> = Vec::new();
        let user = self.user_of(input, None);
        let core = mneme_workspace::context::core_files(settings, user.as_deref()).unwrap_or_else(|e| {
            tracing::warn!(error = %e, "the workspace's files are not in the session-start block");
            Vec::new()
        });
        for f in &core {
            sections.push((format!("## {} ({})", f.title, f.path), mneme_workspace::context::nest_headings(&f.text, 2)));
        }
        if !truth.trim().is_empty() {
            sections.push((String::new(), truth.trim_end().to_string()));
        }
        let owner = self.ops.owner(p);
        if let Ok(owner) = &owner {
            // The session's task when the caller names one, else what the agent is working on:
            // the active state's own lines (not its headings, nor the template's placeholders).
            let template = mneme_workspace::templates::TEMPLATES.iter().find(|t| t.path == mneme_workspace::paths::STATE).map(|t| t.source);
            let state: Option<String> = core.iter().find(|f| f.path == mneme_workspace::paths::STATE).map(|f| {
                f.text
                    .lines()
                    .map(str::trim)
                    .filter(|l| {
                        !l.starts_with('#')
                            && !l.starts_with("Last updated:")
                            && !template.is_some_and(|t| t.lines().any(|t| t.trim() == *l))
                    })
                    .collect::<Vec<_>>()
                    .join("\n")
            });
            let task = input.event.query.clone().filter(|q| !q.trim().is_empty());
            let query = task.or(state).unwrap_or_default();
            // What the block injects counts as read: the files, and each entry shown with its file.
            let mut reads: Vec<(String, String)> = core.iter().map(|f| (f.path.clone(), String::new())).collect();
            if let Some(knowledge) = self.relevant_knowledge(owner, &query, &core, &mut reads) {
                sections.push(("## Relevant knowledge (the agent's files)".into(), knowledge));
            }
            if let Some(since) = since_last_sync(owner, stale, of) {
                sections.push(("## Since the last sync".into(), since));
            }
            if let Err(e) = owner.record_file_reads(&reads) {
                tracing::warn!(error = %e, "the injected files' reads were not counted");
            }
        }
        let extra = [
            ("Curated memory", mneme_workspace::context::curated_memory(settings).map(|(_, text)| text)),
            ("Playbook", mneme_workspace::playbook::injectable(settings, settings.budgets.playbook as usize)),
            ("How I am", mneme_workspace::inner::injectable(settings, self.ops.now())),
        ];
        for (title, text) in extra {
            if let Some(text) = text.filter(|t| !t.trim().is_empty()) {
                sections.push((format!("## {title}"), mneme_workspace::context::nest_headings(text.trim_end(), 2)));
            }
        }
        within_budget(&sections, self.config.session_start.budget_chars)
    }

    /// Up to three chunks of the agent's files matching `query` (by meaning too with a model),
    /// other than the files the block already holds (the core files, the playbook and the
    /// knowledge modules merged into it), as Markdown lines.
    fn relevant_knowledge(
        &self,
        owner: &mneme_service::Owner<'_>,
        query: &str,
        core: &[mneme_workspace::context::FileSection],
        reads: &mut Vec<(String, String)>,
    ) -> Option<String> {
        mneme_core::query::fts5_expression(query)?;
        let found = match owner.find_files(query, 8, mneme_service::FileRanking::Auto) {
            Ok(found) => found,
            Err(e) => {
                tracing::warn!(error = %e, "no knowledge entries in the session-start block");
                return None;
            }
        };
        let shown: Vec<&mneme_service::ChunkHit> = found
            .hits
            .iter()
            .map(|h| &h.chunk)
            // The playbook and the modules merged into it come in their own section.
            .filter(|c| !core.iter().any(|f| f.path == c.path) && !in_the_playbook(&c.path))
            .take(3)
            .collect();
        // What the block injects counts as read (file and entry), not what it passed over.
        reads.extend(shown.iter().flat_map(|c| [(c.path.clone(), String::new()), (c.path.clone(), c.heading.clone())]));
        let lines: Vec<String> = shown
            .iter()
            .map(|c| {
                let heading = if c.heading.is_empty() { String::new() } else { format!(" ({})", c.heading) };
                format!("- `{}:{}-{}`{heading}: {}", c.path, c.start_line, c.end_line, c.snippet.replace('\n', " "))
            })
            .collect();
        (!lines.is_empty()).then(|| lines.join("\n"))
    }

    fn session_start(&self, p: &Principal, input: &HookInput, outcome: &mut HookOutcome) -> ServiceResult<()> {
        // Agent start: the agent's files are deployed and the effective playbook
        // regenerated before anything reads them (sinain §3.2).
        if let Some(j) = &self.journal
            && p.unrestricted()
            && j.settings.sync_on_start
            && j.settings.dir.is_dir()
            && let Err(e) = mneme_workspace::deploy::sync(&j.settings, self.ops.now())
        {
            tracing::warn!(error = %e, "workspace sync at session start failed");
        }
        let cfg = &self.config.session_start;
        let format = input.event.format.unwrap_or(cfg.format);
        if !cfg.enabled {
            outcome.context = Some(String::new());
            return Ok(());
        }
        // A session whose user is known sees that user's memories and global ones.
        let scopes = self.visible_scopes(p, self.user_of(input, None).as_deref());
        let base = RetrieveRequest {
            scopes: scopes.clone(),
            types: cfg.memory_types.clone(),
            min_salience: Some(cfg.min_salience),
            limit: cfg.max_records,
            ..RetrieveRequest::default()
        };
        // What the session is about ranks first: the task descriptor, the caller's `query`
        // plus the agent and channel names (the seed's descriptor without its time-of-day
        // words, which match nothing useful). The most salient memories fill the rest.
        let descriptor: Vec<&str> = [input.event.query.as_deref(), input.ctx.agent_id.as_deref(), input.ctx.channel_id.as_deref()]
            .into_iter()
            .flatten()
            .filter(|s| !s.trim().is_empty())
            .collect();
        let mut hits = Vec::new();
        if !descriptor.is_empty() {
            hits = self.ops.retrieve(p, &RetrieveRequest { query: descriptor.join(" "), ..base.clone() })?;
        }
        if hits.len() < cfg.max_records {
            for hit in self.ops.retrieve(p, &base)? {
                if hits.len() >= cfg.max_records {
                    break;
                }
                if !hits.iter().any(|h| h.record.id == hit.record.id) {
                    hits.push(hit);
                }
            }
        }
        // What is true now: the user's live facts, always, first; then what the task
        // and salience chose, less what the facts already state, the assistant's own
        // messages, and messages that still carry a value the user has since changed.
        let max_sensitivity = p.read.max_sensitivity;
        // The user's facts are read on their own (all of them); other facts only as far as
        // the task and salience chose them (`hits`), not every fact in the store.
        let (mut facts, old_values) = if cfg.memory_types.contains(&MemoryType::Semantic) {
            crate::truth::user_facts(&self.ops, p, max_sensitivity, scopes.clone(), self.ops.limits().max_limit)?
        } else {
            (Vec::new(), Vec::new())
        };
        let others: Vec<Hit> = hits
            .iter()
            .filter(|h| h.record.memory_type == MemoryType::Semantic && !h.record.tags.iter().any(|t| t == crate::truth::ABOUT_USER))
            .cloned()
            .collect();
        facts.extend(crate::truth::live_facts_of(&self.ops, p, &others)?);
        let stale = crate::truth::stale_values(&old_values, &facts);
        facts.iter_mut().for_each(|f| f.unquote_stale(&stale));
        let user_facts: Vec<crate::truth::LiveFact> = facts.iter().filter(|f| f.about_user).cloned().collect();
        hits.retain(|h| {
            if user_facts.iter().any(|f| f.id == h.record.id) {
                return false;
            }
            if h.record.memory_type == MemoryType::Semantic && !facts.iter().any(|f| f.id == h.record.id) {
                // A second live value of a single-valued slot: only the latest is stated.
                return false;
            }
            !h.record.tags.iter().any(|t| t == "role:assistant") && !crate::truth::mentions_any(&h.record.summary, &stale)
        });
        // The other facts chosen (about third parties, or things) join the user's in the
        // Markdown block's fact section.
        let mut shown = user_facts.clone();
        shown.extend(facts.iter().filter(|f| !f.about_user && hits.iter().any(|h| h.record.id == f.id)).cloned());
        let ids: Vec<RecordId> = user_facts.iter().map(|f| f.id.clone()).chain(hits.iter().map(|h| h.record.id.clone())).collect();
        let mut state = self.state();
        make_room(&mut state.injected, |v| v.0);
        state.injected.insert(input.ctx.session(), (Instant::now(), ids.clone()));
        drop(state);
        let block = match format {
            ContextFormat::Markdown => {
                let mut facts = crate::truth::facts_markdown(&shown, cfg.max_chars);
                let unread = crate::truth::unread_markdown(&self.ops, p, &user_facts)?;
                if !unread.is_empty() && facts.len() + unread.len() <= cfg.max_chars {
                    facts.push_str(&unread);
                }
                let others: Vec<Hit> = hits.iter().filter(|h| h.record.memory_type != MemoryType::Semantic).cloned().collect();
                let rest = format::markdown(&others);
                let truth = match (facts.is_empty(), rest.is_empty()) {
                    (true, _) => rest,
                    (false, true) => format!("## What is true now\n\n{facts}"),
                    (false, false) => format!("## What is true now\n\n{facts}\n{rest}"),
                };
                match (&self.files, p.unrestricted()) {
                    (Some(settings), true) => {
                        // The conversation quoted is the session user's only (the log holds
                        // every user's); with user scopes off, memory is shared anyway.
                        let of = match &scopes {
                            None => ConversationOf::All,
                            Some(scopes) => scopes
                                .iter()
                                .find(|s| s.as_str().starts_with("user:"))
                                .cloned()
                                .map_or(ConversationOf::Nobody, ConversationOf::User),
                        };
                        self.one_block(p, input, settings, truth, &stale, &of)
                    }
                    _ => truth,
                }
            }
            ContextFormat::Json => format::json_with_facts(&user_facts, &hits),
        };
        if input.event.write_context_file.unwrap_or(cfg.context_file) {
            self.write_context_file(p, &block)?;
        }
        // Instructions queued for the agent (BOOT.md at daemon start, spawned tasks, the
        // heartbeat's tips, inner-life dispatches), for the owner's agent: taken last, once
        // nothing else can fail, so each is delivered exactly once.
        let mut block = block;
        if format == ContextFormat::Markdown
            && let Some(instructions) = self.take_instructions(p)
        {
            block = if block.trim().is_empty() { instructions } else { format!("{}\n\n{instructions}", block.trim_end()) };
        }
        outcome.context = Some(block);
        outcome.record_ids = ids;
        Ok(())
    }

    /// The seed's fallback for hosts that cannot inject context (membrane §8): the block in
    /// `<workspace>/memory/membrane/context.md`, written atomically, for the host's boot
    /// context to pick up. Only into the configured workspace (never a path from the
    /// request), and only for an unrestricted principal: the workspace is the owner's.
    fn write_context_file(&self, p: &Principal, block: &str) -> ServiceResult<()> {
        self.ops.owner_for(p, "the workspace's context file")?;
        let Some(j) = &self.journal else {
            return Err(ServiceError::invalid("writeContextFile", "no workspace is configured for the context file"));
        };
        let dir = j.settings.dir.join(mneme_workspace::paths::MEMORY_DIR).join("membrane");
        let path = dir.join("context.md");
        std::fs::create_dir_all(&dir)
            .and_then(|()| mneme_workspace::atomic::write_atomic(&path, block.as_bytes()).map_err(std::io::Error::other))
            .map_err(|e| ServiceError::Precondition(format!("cannot write {}: {e}", path.display())))
    }

    // ---- messages --------------------------------------------------------------------

    fn sensitivity(&self, ctx: &HookContext) -> Sensitivity {
        let direct = ctx.channel_id.as_deref().is_some_and(|c| c.starts_with("dm:") || c.starts_with('!'));
        if direct { self.config.default_sensitivity.max(Sensitivity::Medium) } else { self.config.default_sensitivity }
    }

    fn message(
        &self,
        p: &Principal,
        input: &HookInput,
        role: &str,
        buffer: &mut Vec<BufferedMessage>,
        out: &mut HookOutcome,
    ) -> ServiceResult<()> {
        // What is inside `<private>` is never read for facts, buffered for consolidation (and
        // so never sent to a model) or stored: the message is stripped before anything reads it.
        let stripped = mneme_core::private::strip(input.event.content());
        let content: &str = &stripped;
        if content.trim().is_empty() || !self.config.capture_messages {
            return Ok(());
        }
        // "Please forget my SSN": erased at once, and the request itself is not stored.
        if role == "user"
            && let Some(about) = crate::erasure::forget_request(content)
        {
            out.forgotten = Some(self.forget_on_request(p, input, &about));
            return Ok(());
        }
        let ctx = &input.ctx;
        let timestamp = parse_time(input.event.timestamp.as_deref(), self.ops.now())?;
        let sensitivity = self.sensitivity(ctx);
        let sender = input.event.from.clone().or_else(|| input.event.sender.clone()).unwrap_or_else(|| role.to_string());
        let channel = ctx.channel_id.clone().unwrap_or_else(|| "unknown".into());
        let mut tags = vec!["source:hooks".to_string(), format!("role:{role}"), format!("channel:{}", tag_value(&channel))];
        if let Some(agent) = &ctx.agent_id {
            tags.push(format!("agent:{}", tag_value(agent)));
        }
        // A user message that only asks ("what editor does sam use") states no fact and is
        // kept, tagged, out of what recall offers as memories.
        let question = role == "user" && mneme_truth::is_question(content);
        if question {
            tags.push(mneme_core::QUESTION_TAG.to_string());
        }
        let event = EventPayload {
            event_kind: format!("{role}_message"),
            reference: Some(ctx.session()),
            sender: Some(sender),
            text: content.to_string(),
            event_time: Some(timestamp),
        };
        // Memory per user: the user's messages, and the assistant's in their session, in
        // the user's scope.
        let user = self.user_of(input, Some(role));
        if let Some(u) = &user {
            let mut state = self.state();
            make_room(&mut state.users, |v| v.0);
            state.users.insert(ctx.session(), (Instant::now(), u.clone()));
        }
        let scope = user.as_deref().and_then(|u| self.user_scope(u));
        let options = IngestOptions { sensitivity: Some(sensitivity), tags, scope, actor: Some(ACTOR.into()), ..IngestOptions::default() };
        let record = self.ops.ingest(p, Payload::Event(event), options)?;
        out.record_ids.push(record.id.clone());
        // The conversation log (memory sync's input, unlabeled: unrestricted principals
        // only) gets the message too; a failure there is logged and never fails the hook.
        if p.unrestricted() {
            let logged = self.ops.log_conversation(
                p,
                mneme_service::ConversationInput {
                    channel: channel.clone(),
                    user_id: input.event.from.clone().or_else(|| input.event.sender.clone()),
                    direction: if role == "user" { "in" } else { "out" }.into(),
                    priority: None,
                    content: content.to_string(),
                    at: Some(timestamp),
                },
            );
            if let Err(e) = logged {
                tracing::warn!(error = %e, "the message was remembered but not added to the conversation log");
            }
        }
        // Facts come from the user's words only: the assistant's suggestions are not facts.
        // Of a message that asks, only what it states before asking ("Anniversary coming
        // up with Maelys (my partner), any gift ideas?"); nothing is read into the rest.
        let extracting = self.config.regex_extraction && role == "user";
        let mut claims = match (extracting, question) {
            (false, _) => Vec::new(),
            (true, false) => mneme_truth::extract(content),
            (true, true) => mneme_truth::extract_beside_questions(content),
        };
        if extracting && (!question || !claims.is_empty()) {
            let phrased = !claims.is_empty();
            let speaker = input.event.from.as_deref().or(input.event.sender.as_deref());
            let source = crate::truth::Source {
                speaker,
                at: timestamp,
                message: Some(&record.id),
                text: Some(content),
                sensitivity,
                scope: &record.scope,
                read: false,
            };
            let reconciler = crate::truth::Reconciler { ops: &self.ops, principal: p };
            let held = |slot: &'static str| reconciler.held(slot, &source);
            // A new value the span reader reads elsewhere in the message is the phrase's
            // mistake ("Favourite food update: spanakopita" is no food "update"): the
            // phrase is dropped, and the reader, asked below, gives the value. The values
            // held and the other values the phrases named ("fluent in Greek & Tagalog")
            // are no alternative; a phrase that names the value it replaces ("switched
            // tracks and I'm a security analyst now") read the change itself. The reader's
            // wider words may be the value ("disc golf" for "golf").
            let named: Vec<(Option<&'static str>, String)> = claims.iter().map(|c| (c.slot, c.value.clone())).collect();
            claims = claims
                .into_iter()
                .filter_map(|mut c| {
                    let (Some(slot), None, None, mneme_truth::Op::Set | mneme_truth::Op::Add) = (c.slot, &c.other, &c.old, c.op) else {
                        return Some(c);
                    };
                    let siblings = named.iter().filter(|(s, v)| *s == Some(slot) && *v != c.value).map(|(_, v)| v.clone());
                    let others: Vec<String> = held(slot).into_iter().chain(siblings).collect();
                    c.value = self.ops.phrase_value(content, slot, &c.value, &others)?;
                    Some(c)
                })
                .collect();
            crate::truth::by_the_value_replaced(&mut claims, content, &held, |held| self.ops.read_value(content, held, &[]));
            crate::truth::one_value_per_message(
                &mut claims,
                |v| self.ops.replaced_share(content, v),
                |slot, v| self.ops.value_fit(slot, v),
            );
            // A phrase that gives the speaker a value they do not hold yet says what is new.
            // Otherwise (no phrase, a retraction, a value restated: "living in Milan is
            // history; these days it's Naples") the encoder may read the new value.
            let news = claims.iter().any(|c| {
                c.other.is_none()
                    && matches!(c.op, mneme_truth::Op::Set | mneme_truth::Op::Add)
                    && !c.slot.is_some_and(|slot| {
                        let value = mneme_truth::normalize_value(&c.value);
                        held(slot).iter().any(|h| mneme_truth::normalize_value(h) == value)
                    })
            });
            if !phrased && !question {
                for t in general_facts(content) {
                    if let Some(id) = self.ingest_fact_once(p, &t, sensitivity, &record.scope, &record.id)? {
                        out.record_ids.push(id);
                    }
                }
            } else {
                out.record_ids.extend(reconciler.apply(&claims, &source).record_ids);
            }
            // What the phrases missed about the speaker, the encoder may read (with a local
            // model): one value, by meaning, written as less sure than a phrase's, past the
            // values the speaker holds or the phrases retracted.
            let retracted: Vec<String> = claims
                .iter()
                .filter(|c| c.other.is_none() && matches!(c.op, mneme_truth::Op::Negate | mneme_truth::Op::Remove))
                .map(|c| c.value.clone())
                .collect();
            if !news
                && !question
                && !mneme_truth::asserts_nothing(content)
                && !mneme_truth::tells_of_someone_else(content)
                && let Some((slot, value)) = self.ops.read_value(content, &held, &retracted)
            {
                // A list read for a multi-valued slot ("Malay, Punjabi and Tamil"): one
                // claim per item, as the phrases give them.
                let items: Vec<&str> = match mneme_truth::slot(slot) {
                    Some(d) if d.kind == mneme_truth::lexicon::SlotKind::Multi => mneme_truth::list_items(&value),
                    _ => vec![value.as_str()],
                };
                let claims: Vec<mneme_truth::Claim> = items
                    .into_iter()
                    .map(|item| mneme_truth::Claim {
                        other: None,
                        slot: Some(slot),
                        value: item.to_string(),
                        op: mneme_truth::Op::Set,
                        old: None,
                        clause: content.to_string(),
                    })
                    .collect();
                out.record_ids.extend(reconciler.apply(&claims, &crate::truth::Source { read: true, ..source }).record_ids);
            }
        }
        let sender = if role == "user" { input.event.from.clone().or_else(|| input.event.sender.clone()) } else { None };
        buffer.push(BufferedMessage { role: role.into(), sender, content: content.into(), timestamp, sensitivity, scope: record.scope });
        Ok(())
    }

    /// Erases what a user asked to forget about themselves (`erasure`): every record in
    /// their scope whose own text holds the words, with the facts made from them and the
    /// copies in mneme's files. Only for a known user (their scope bounds the erasure)
    /// and an unrestricted principal (the owner's hooks); otherwise nothing is erased and
    /// the answer says why. Returns what the agent can tell the user.
    fn forget_on_request(&self, p: &Principal, input: &HookInput, about: &str) -> String {
        let Some(user) = self.user_of(input, Some("user")).filter(|u| self.user_scope(u).is_some()) else {
            return format!(
                "not erased: no user is known for this conversation, so \"{about}\" could belong to anyone; the owner can run: mneme forget --query '{about}'"
            );
        };
        let request = mneme_service::ForgetRequest {
            query: Some(about.to_string()),
            user: Some(user.clone()),
            reason: "the user asked in conversation".into(),
            actor: ACTOR.into(),
            ..mneme_service::ForgetRequest::default()
        };
        match self.ops.forget(p, request) {
            Ok(mut report) => {
                if let Some(j) = &self.journal {
                    crate::forget_in_files(&mut report, &j.settings);
                }
                tracing::info!(user = %user, records = report.records.len(), "forgot on the user's request");
                let n = report.records.len();
                format!("erased {n} record{} of {user} about \"{about}\" at their request", if n == 1 { "" } else { "s" })
            }
            Err(e) => format!("not erased: {e}"),
        }
    }

    /// Ingests a regex fact unless the same fact is already live (then nothing happens;
    /// consolidation reinforces repeated facts).
    fn ingest_fact_once(
        &self,
        p: &Principal,
        t: &patterns::Triple,
        sensitivity: Sensitivity,
        scope: &mneme_core::Scope,
        source: &RecordId,
    ) -> ServiceResult<Option<RecordId>> {
        if find_fact(&self.ops, p, &t.subject, &t.predicate, scope)?.iter().any(|f| f.fact.object.eq_ignore_ascii_case(&t.object)) {
            return Ok(None);
        }
        let fact = SemanticPayload {
            subject: t.subject.clone(),
            predicate: t.predicate.clone(),
            object: t.object.clone(),
            valid_from: None,
            valid_to: None,
            evidence: vec![source.to_string()],
        };
        let options = IngestOptions {
            sensitivity: Some(sensitivity),
            scope: Some(scope.clone()),
            tags: vec!["source:hooks".into(), "extraction:regex".into()],
            confidence: Some(0.5),
            actor: Some(ACTOR.into()),
            ..IngestOptions::default()
        };
        Ok(Some(self.ops.ingest(p, Payload::Semantic(fact), options)?.id))
    }

    // ---- tool calls: the competence tracker --------------------------------------------

    fn before_tool_call(&self, input: &HookInput) -> ServiceResult<()> {
        let Some(tool) = input.event.tool_name.as_deref().filter(|t| !t.is_empty()) else {
            return Err(ServiceError::invalid("toolName", "before_tool_call needs it"));
        };
        if self.config.capture_tool_calls {
            let mut state = self.state();
            make_room(&mut state.pending, |v| v.0);
            // Parameters are kept up to PARAMS_KEPT bytes (the map may hold 10,000 calls).
            let params = input.event.params.clone().filter(|p| serde_json::to_vec(p).map_or(0, |v| v.len()) <= PARAMS_KEPT);
            state.pending.insert((input.ctx.session(), tool.to_string()), (Instant::now(), params));
        }
        Ok(())
    }

    fn after_tool_call(&self, p: &Principal, input: &HookInput, out: &mut HookOutcome) -> ServiceResult<()> {
        let Some(tool) = input.event.tool_name.as_deref().filter(|t| !t.is_empty()) else {
            return Err(ServiceError::invalid("toolName", "after_tool_call needs it"));
        };
        if !self.config.capture_tool_calls {
            return Ok(());
        }
        let pending = self.state().pending.remove(&(input.ctx.session(), tool.to_string()));
        let (started, before_params) = pending.map_or((None, None), |(at, params)| (Some(at), params));
        // The runtime's own measure when it sends one, else the time since before_tool_call.
        let duration_ms = input.event.duration_ms.or_else(|| started.map(|s| s.elapsed().as_millis() as u64));
        let error = input.event.error.clone().filter(|e| !e.trim().is_empty());
        let success = input.event.success.unwrap_or(true) && error.is_none();
        let output = ToolOutputPayload {
            tool: tool.to_string(),
            // The parameters reported with the result, else those the call began with
            // (gRPC results carry none; parallel calls of one tool share a pending slot).
            args: input.event.params.clone().or(before_params).unwrap_or(serde_json::Value::Null),
            result: Some(serde_json::Value::String(if success { "success" } else { "failure" }.into())),
            error: if success { None } else { Some(error.clone().unwrap_or_else(|| "unknown error".into())) },
            duration_ms,
        };
        // A call made in a user's session is that user's (their search words say as much
        // about them as their messages): it goes in their scope, and `forget --user` takes
        // it. The skill's competence record stays the agent's.
        let scope = self.session_scope(input);
        let options = IngestOptions {
            sensitivity: Some(self.sensitivity(&input.ctx)),
            tags: vec!["source:hooks".into(), "tracking:competence".into(), format!("tool:{}", tag_value(tool))],
            scope: scope.clone(),
            actor: Some(COMPETENCE_ACTOR.into()),
            ..IngestOptions::default()
        };
        let call = self.ops.ingest(p, Payload::ToolOutput(output), options)?;
        out.record_ids.push(call.id.clone());
        let mode = error.as_deref().map(normalize_error);
        // One outcome record per call, linked `outcome_of` to the call (membrane §12); a
        // failed call's record is penalised by it and so fades sooner.
        let outcome = self.ops.ingest_outcome(
            p,
            OutcomeRequest {
                target: call.id.clone(),
                outcome: if success { OutcomeKind::Success } else { OutcomeKind::Failure },
                duration_ms,
                failure_mode: mode.clone(),
                note: None,
                amount: None,
            },
            IngestOptions {
                sensitivity: Some(self.sensitivity(&input.ctx)),
                tags: vec!["source:hooks".into(), "outcome:tool_call".into(), format!("tool:{}", tag_value(tool))],
                scope,
                actor: Some(COMPETENCE_ACTOR.into()),
                ..IngestOptions::default()
            },
        )?;
        out.record_ids.push(outcome.record.id.clone());
        if !self.config.competence.enabled {
            return Ok(());
        }
        let _one_at_a_time = self.competence.lock().unwrap_or_else(|p| p.into_inner());
        let c = &self.config.competence;
        let record = match self.competence_record(p, tool)? {
            // Counted in place with an audit entry naming the call's outcome record (a
            // supersede per call left one tombstone per call forever).
            Some((id, _)) => {
                let used = SkillUse { success, duration_ms, failure_mode: mode.clone(), evidence: outcome.record.id.clone() };
                let why = format!("tool call {}: {tool}", if success { "succeeded" } else { "failed" });
                self.ops.record_skill_use(p, &id, &used, COMPETENCE_ACTOR.into(), why)?
            }
            None => {
                let performance = self.rebuild_performance(p, tool)?;
                let calls = performance.success_count + performance.failure_count;
                if calls < c.min_occurrences {
                    return Ok(());
                }
                let skill = CompetencePayload {
                    skill: format!("skill:{tool}"),
                    triggers: vec![format!("{tool} tool needed")],
                    steps: Vec::new(),
                    performance,
                };
                let options = IngestOptions {
                    sensitivity: Some(self.config.default_sensitivity),
                    tags: vec!["source:competence-tracker".into(), format!("tool:{}", tag_value(tool))],
                    actor: Some(COMPETENCE_ACTOR.into()),
                    rationale: Some(format!("{tool} reached {calls} calls")),
                    ..IngestOptions::default()
                };
                tracing::info!(tool, calls, "new competence record");
                self.ops.ingest(p, Payload::Competence(skill), options)?
            }
        };
        out.record_ids.push(record.id.clone());
        if success && c.reinforce_on_success {
            self.ops.adjust(
                p,
                &record.id,
                true,
                Some(c.reinforce_amount),
                COMPETENCE_ACTOR.into(),
                format!("tool call succeeded: {tool}"),
            )?;
        } else if !success && c.penalize_on_failure {
            let why = format!("tool call failed: {tool} — {}", error.as_deref().unwrap_or("unknown error"));
            self.ops.adjust(p, &record.id, false, Some(c.penalty_amount), COMPETENCE_ACTOR.into(), one_line(&why, 1000))?;
        }
        Ok(())
    }

    /// The live competence record the tracker keeps for `tool`, in the scope the caller's
    /// records land in: an exact look-up by skill (`Ops::find_skills`).
    fn competence_record(&self, p: &Principal, tool: &str) -> ServiceResult<Option<(RecordId, CompetencePayload)>> {
        let skill = format!("skill:{tool}");
        Ok(self.ops.find_skills(p, &skill, &p.default_write_scope())?.into_iter().find_map(|r| match r.payload {
            Some(Payload::Competence(c)) => Some((r.id, c)),
            _ => None,
        }))
    }

    /// A tool's performance from its episodic call records (before it has a competence record).
    fn rebuild_performance(&self, p: &Principal, tool: &str) -> ServiceResult<Performance> {
        let request = RetrieveRequest {
            types: vec![MemoryType::Episodic],
            tags: vec!["tracking:competence".into(), format!("tool:{}", tag_value(tool))],
            max_sensitivity: Some(Sensitivity::Critical),
            limit: self.ops.limits().max_limit,
            ..RetrieveRequest::default()
        };
        let mut perf = Performance::default();
        for hit in self.ops.retrieve(p, &request)? {
            if let Some(Payload::ToolOutput(t)) = hit.record.payload
                && t.tool == tool
            {
                let mode = t.error.as_deref().map(normalize_error);
                perf.record(t.error.is_none(), t.duration_ms, mode.as_deref());
            }
        }
        Ok(perf)
    }

    // ---- compaction and session end ----------------------------------------------------

    fn before_compaction(&self, p: &Principal, input: &HookInput, out: &mut HookOutcome) -> ServiceResult<()> {
        if !self.config.capture_working_state {
            return Ok(());
        }
        let messages = &input.event.compacting_messages;
        let count = input.event.compacting_count.unwrap_or(messages.len() as u64);
        let session = input.ctx.session();
        let state = summarize_messages(messages, 15, 200);
        let mut next = Vec::new();
        if let Some(agent) = &input.ctx.agent_id {
            next.push(format!("agent: {agent}"));
        }
        if let Some(channel) = &input.ctx.channel_id {
            next.push(format!("channel: {channel}"));
        }
        let summary = format!("compaction snapshot of {count} messages in {session}");
        let working = WorkingPayload {
            thread_id: session.clone(),
            state,
            next_actions: Vec::new(),
            open_questions: Vec::new(),
            summary: summary.clone(),
        };
        let options = IngestOptions {
            summary: Some(summary),
            sensitivity: Some(self.config.default_sensitivity.max(Sensitivity::Medium)),
            tags: vec!["source:hooks".into(), "trigger:compaction".into()],
            // The conversation of a user's session is theirs (see after_tool_call).
            scope: self.session_scope(input),
            actor: Some(ACTOR.into()),
            rationale: (!next.is_empty()).then(|| next.join(", ")),
            ..IngestOptions::default()
        };
        out.record_ids.push(self.ops.ingest(p, Payload::Working(working), options)?.id);
        Ok(())
    }

    /// Reinforces the records injected at the session's start when it ended well.
    /// Session end: frees the session's tracking and, for the owner with a workspace,
    /// writes its daily-log entry and named snapshot (from `compactingMessages`, the
    /// conversation's last messages, when the host sends them).
    fn session_end(&self, p: &Principal, input: &HookInput, out: &mut HookOutcome) -> ServiceResult<()> {
        let session = input.ctx.session();
        {
            let mut state = self.state();
            state.injected.remove(&session);
            state.users.remove(&session);
            state.pending.retain(|(s, _), _| *s != session);
        }
        let Some(j) = &self.journal else { return Ok(()) };
        let tracked = j.sessions.lock().unwrap_or_else(|p| p.into_inner()).take(&session);
        if !p.unrestricted() || !j.settings.dir.join(mneme_workspace::paths::MEMORY_DIR).is_dir() {
            return Ok(());
        }
        let end = mneme_workspace::journal::SessionEnd {
            session_key: &session,
            reason: input.event.reason.as_deref().filter(|r| !r.trim().is_empty()),
            tracked,
            messages: input.event.compacting_messages.iter().map(|m| (m.role.clone(), m.content.clone())).collect(),
        };
        let files = mneme_workspace::journal::write_session_end(&j.settings, self.ops.now(), &end)
            .map_err(|e| ServiceError::Precondition(format!("the session-end files were not written: {e}")))?;
        out.files = files.iter().map(|f| f.display().to_string()).collect();
        Ok(())
    }

    fn agent_end(&self, p: &Principal, input: &HookInput) -> ServiceResult<()> {
        let session = input.ctx.session();
        let injected = self.state().injected.remove(&session).map(|(_, ids)| ids).unwrap_or_default();
        let amount = self.config.session_start.reinforce_on_success;
        let error = input.event.error.as_deref().filter(|e| !e.trim().is_empty());
        if let Some(error) = error {
            tracing::info!(%session, error = %one_line(error, 500), "agent run ended with an error");
        }
        if input.event.success == Some(true) && error.is_none() && amount > 0.0 {
            for id in injected {
                // A record revised since it was injected is no longer reinforceable; skip it.
                if let Err(e) =
                    self.ops.adjust(p, &id, true, Some(amount), ACTOR.into(), format!("injected into successful session {session}"))
                {
                    tracing::debug!(%id, error = %e, "injected record not reinforced");
                }
            }
        }
        Ok(())
    }
}

/// tool_result_persist: the result with `<private>` blocks removed from every string in
/// it (a string, content blocks, or any JSON), for the host to store in its history.
fn tool_result_persist(input: &HookInput, out: &mut HookOutcome) -> ServiceResult<()> {
    let Some(result) = input.event.result.clone() else {
        return Err(ServiceError::invalid("result", "tool_result_persist needs the tool's result"));
    };
    let mut result = result;
    mneme_core::private::strip_value(&mut result);
    out.result = Some(result);
    Ok(())
}

/// What a tool call offers module triggers: its name and parameters as text (for
/// keywords), and the parameter strings that look like file paths (for file patterns).
fn tool_call_terms(tool: &str, params: Option<&serde_json::Value>) -> (String, Vec<String>) {
    fn walk(v: &serde_json::Value, text: &mut String, files: &mut Vec<String>) {
        match v {
            serde_json::Value::String(s) => {
                text.push(' ');
                text.push_str(s);
                let t = s.trim();
                let pathlike = !t.is_empty() && !t.contains(char::is_whitespace) && (t.contains('/') || t.contains('.')) && t.len() <= 512;
                if pathlike && files.len() < 64 {
                    files.push(t.to_string());
                }
            }
            serde_json::Value::Array(a) => a.iter().for_each(|x| walk(x, text, files)),
            serde_json::Value::Object(o) => o.values().for_each(|x| walk(x, text, files)),
            _ => {}
        }
    }
    let mut text = tool.to_string();
    let mut files = Vec::new();
    if let Some(p) = params {
        walk(p, &mut text, &mut files);
    }
    (text, files)
}

/// Third-person statements about things ("Docker requires the sg wrapper"), from the
/// seed's regex patterns: for a user message that states nothing about a person
/// ([`mneme_truth::extract`] found no claim) and asks nothing.
pub fn general_facts(content: &str) -> Vec<patterns::Triple> {
    if content.contains('?') || mneme_truth::is_question(content) || !mneme_truth::extract(content).is_empty() {
        return Vec::new();
    }
    patterns::extract(content)
}

/// A live fact found by [`find_fact`]: its id, payload and sensitivity.
#[derive(Debug, Clone)]
pub struct FoundFact {
    pub id: RecordId,
    pub fact: SemanticPayload,
    pub sensitivity: Sensitivity,
}

/// Live semantic records in `scope` (exactly: not global ones, when `scope` is named) with
/// this subject and predicate (case-insensitive), as far as `p` may read.
/// An exact look-up (`Ops::find_facts`), not a ranked search: a fact outranked by any
/// number of records for the words "subject predicate" is still found, so consolidation
/// revises it instead of adding a duplicate.
pub fn find_fact(ops: &Ops, p: &Principal, subject: &str, predicate: &str, scope: &mneme_core::Scope) -> ServiceResult<Vec<FoundFact>> {
    Ok(ops
        .find_facts(p, subject, predicate, scope)?
        .into_iter()
        .filter_map(|record| match record.payload {
            Some(Payload::Semantic(f)) => Some(FoundFact { id: record.id, fact: f, sensitivity: record.sensitivity }),
            _ => None,
        })
        .collect())
}

fn parse_time(s: Option<&str>, now: Timestamp) -> ServiceResult<Timestamp> {
    match s.filter(|s| !s.is_empty()) {
        None => Ok(now),
        Some(s) => s.parse().map_err(|e| ServiceError::invalid("timestamp", format!("{s:?}: {e}"))),
    }
}

/// A tag-safe rendering of a name: no whitespace, at most 48 characters.
fn tag_value(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join("_").chars().take(48).collect()
}

/// The last `max` messages, `[U]`/`[A]`-prefixed, each cut to `chars` characters.
pub fn summarize_messages(messages: &[CompactingMessage], max: usize, chars: usize) -> String {
    let recent = &messages[messages.len().saturating_sub(max)..];
    if recent.is_empty() {
        return "(no messages)".into();
    }
    recent
        .iter()
        .map(|m| {
            let prefix = if m.role == "user" { "U" } else { "A" };
            let mut content: String = m.content.chars().take(chars).collect();
            if m.content.chars().count() > chars {
                content.push_str("...");
            }
            format!("[{prefix}] {content}")
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Whose conversations the session-start block may quote.
#[derive(Debug, Clone, PartialEq, Eq)]
enum ConversationOf {
    /// Everyone's (user scopes are off: one shared memory).
    All,
    /// The session's user's only (in and out, by the log's `user_id`).
    User(mneme_core::Scope),
    /// Nobody's: several users and none known for the session.
    Nobody,
}

/// Conversations of the log quoted at session start, at most (the newest since the checkpoint).
const RECENT_CONVERSATIONS: i64 = 10;
/// The most characters of one quoted conversation.
const CONVERSATION_CHARS: usize = 300;

/// The last sync checkpoint's summary (with its date) and the newest conversations logged
/// since, for the session-start block; `None` when there is neither. A message naming a
/// value the user has since changed (`stale`) is left out, as from the rest of the block:
/// the block never states an old value.
fn since_last_sync(owner: &mneme_service::Owner<'_>, stale: &std::collections::HashSet<String>, of: &ConversationOf) -> Option<String> {
    let status = owner.sync_status().map_err(|e| tracing::warn!(error = %e, "the sync state is not in the session-start block")).ok()?;
    let mut out = String::new();
    if let Some(c) = &status.last_checkpoint {
        out.push_str(&format!(
            "Last checkpoint ({}, up to conversation {}): {}\n",
            c.at.strftime("%Y-%m-%d %H:%M UTC"),
            c.end_id,
            c.summary.trim()
        ));
    }
    if let (Some(begin), Some(end)) = (status.begin_id, status.end_id) {
        let from = begin.max(end - RECENT_CONVERSATIONS + 1);
        if let Ok(mut recent) = owner.sync_fetch(from, end) {
            recent.retain(|m| match of {
                ConversationOf::All => true,
                ConversationOf::User(scope) => m.user_id.as_deref().and_then(mneme_core::Scope::user).as_ref() == Some(scope),
                ConversationOf::Nobody => false,
            });
            let fetched = recent.len();
            recent.retain(|m| !crate::truth::mentions_any(&m.content, stale));
            let dropped = fetched - recent.len();
            if !recent.is_empty() {
                let shown = if status.unsummarized as usize > recent.len() {
                    format!("the newest {} of {} since", recent.len(), status.unsummarized)
                } else {
                    format!("{} since", recent.len())
                };
                out.push_str(&format!("{}Conversation ({shown}):\n", if out.is_empty() { "" } else { "\n" }));
            }
            for m in recent {
                let who = match (m.direction, m.user_id.as_deref()) {
                    (mneme_service::Direction::Out, _) => "agent".to_string(),
                    (_, Some(user)) => user.to_string(),
                    (_, None) => "user".to_string(),
                };
                let mut text: String = m.content.split_whitespace().collect::<Vec<_>>().join(" ");
                if text.chars().count() > CONVERSATION_CHARS {
                    text = text.chars().take(CONVERSATION_CHARS).collect::<String>() + "…";
                }
                out.push_str(&format!("- {} {who}: {text}\n", m.at.strftime("%Y-%m-%d %H:%M")));
            }
            if dropped > 0 {
                out.push_str(&format!("({dropped} earlier message(s) naming values the user has since changed left out)\n"));
            }
        }
    }
    (!out.trim().is_empty()).then(|| out.trim_end().to_string())
}

/// The sections (heading, body; an empty heading: the body is already headed) joined in
/// order within `budget` characters: a section that does not fit is cut at a line with a
/// note, and the ones after it are named in a last note.
fn within_budget(sections: &[(String, String)], budget: usize) -> String {
    let mut out = String::new();
    let mut left_out = Vec::new();
    for (heading, body) in sections {
        let text = if heading.is_empty() { body.clone() } else { format!("{heading}\n\n{body}") };
        let room = budget.saturating_sub(out.len() + 2);
        if !left_out.is_empty() || room < 200 {
            left_out.push(if heading.is_empty() { "what is true now".to_string() } else { heading.trim_start_matches("## ").to_string() });
            continue;
        }
        if !out.is_empty() {
            out.push_str("\n\n");
        }
        if text.len() <= room {
            out.push_str(&text);
        } else {
            let note = "\n[… cut to fit the session-start budget]";
            let mut cut = room.saturating_sub(note.len());
            while !text.is_char_boundary(cut) {
                cut -= 1;
            }
            let head = text[..cut].rfind('\n').map_or(&text[..cut], |at| &text[..at]);
            out.push_str(head);
            out.push_str(note);
        }
    }
    if !left_out.is_empty() {
        out.push_str(&format!("\n\n[Left out to fit the session-start budget: {}.]", left_out.join(", ")));
    }
    if out.is_empty() { out } else { out + "\n" }
}

/// Whether the block's playbook section already holds `path`: the playbook, the effective
/// playbook, and the knowledge modules merged into it.
fn in_the_playbook(path: &str) -> bool {
    use mneme_workspace::paths;
    path == paths::PLAYBOOK
        || path == paths::EFFECTIVE_PLAYBOOK
        || mneme_workspace::knowledge::is_under(path, mneme_workspace::modules::MODULES_DIR)
}
