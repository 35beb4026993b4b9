//! `mneme workspace ...` and the workspace hooks (`mneme claude-hook session-start|
//! prompt-submit|context`, also reached as `mneme hook NAME` for one release): thin
//! wrappers over `mneme_workspace`, which holds all the file logic.
//!
//! The hooks follow Claude Code's protocol (JSON on stdout) and never fail their caller:
//! on any error they print an empty result, write the reason to stderr and exit 0.

use std::path::{Path, PathBuf};

use anyhow::Result;
use mneme_workspace::context::{HookEvent, HookOutput};
use mneme_workspace::{WorkspaceSettings, consolidate, init, rotate, status};

use crate::cli::{HookArgs, WorkspaceCommand};
use crate::client::HookCall;
use crate::commands::Invocation;
use crate::render::print_json;

const HOOKS: [&str; 4] = ["session-start", "prompt-submit", "context", "session-end"];

pub fn is_workspace_hook(name: &str) -> bool {
    HOOKS.contains(&name)
}

/// The workspace settings: directory from the argument, `$MNEME_WORKSPACE`, the config,
/// else `<data dir>/workspace`.
pub(crate) fn settings(ctx: &Invocation, dir: Option<&Path>) -> Result<WorkspaceSettings> {
    let env = std::env::var_os("MNEME_WORKSPACE");
    let dir: PathBuf = mneme_workspace::config::resolve_dir(dir, env.as_deref(), &ctx.config.workspace, &ctx.data_dir);
    Ok(ctx.config.workspace.settings(dir)?)
}

pub fn command(ctx: &Invocation, cmd: WorkspaceCommand) -> Result<()> {
    let now = jiff::Timestamp::now();
    match cmd {
        WorkspaceCommand::Init { dir, agent_docs } => {
            let mut s = settings(ctx, dir.as_deref())?;
            s.agent_docs |= agent_docs;
            let report = init::init(&s, now)?;
            // The agent's files go in with the layout (the sync an agent start would run).
            let sync = mneme_workspace::deploy::sync(&s, now)?;
            if ctx.json {
                let mut value = serde_json::to_value(&report)?;
                value["sync"] = serde_json::to_value(&sync)?;
                return print_json(&value);
            }
            outln!("workspace {}", report.dir.display());
            for p in &report.created {
                outln!("  created  {}", p.display());
            }
            for p in &report.skipped {
                outln!("  kept     {}", p.display());
            }
            for f in sync.files.iter().filter(|f| f.action == "created" || f.action == "updated") {
                outln!("  {:<8} {}", f.action, f.path);
            }
            Ok(())
        }
        WorkspaceCommand::Sync { dir } => {
            let s = settings(ctx, dir.as_deref())?;
            let report = mneme_workspace::deploy::sync(&s, now)?;
            if ctx.json {
                return print_json(&report);
            }
            render_sync(&report)
        }
        WorkspaceCommand::AddUser { id, name, dir } => {
            let s = settings(ctx, dir.as_deref())?;
            let path = init::add_user(&s, &id, name.as_deref(), now)?;
            if ctx.json {
                return print_json(&serde_json::json!({ "user": id, "created": path, "dir": s.dir }));
            }
            outln!("created {} in {}", path.display(), s.dir.display());
            outln!("  loaded at session start when {id} speaks (e.g. `mneme claude-hook session-start --user {id}`)");
            Ok(())
        }
        WorkspaceCommand::Status { dir } => {
            let s = settings(ctx, dir.as_deref())?;
            for path in mneme_workspace::atomic::sweep_stale_temp_files(&s.dir, std::time::Duration::from_secs(3600)) {
                eprintln!("removed a stale temporary file: {}", path.display());
            }
            let report = status::status(&s)?;
            if ctx.json {
                return print_json(&report);
            }
            out!("{}", status::render_status(&report, &s.timezone));
            Ok(())
        }
        WorkspaceCommand::Rotate { dir } => {
            let s = settings(ctx, dir.as_deref())?;
            let report = rotate::rotate(&s, now)?;
            if ctx.json {
                return print_json(&report);
            }
            match &report.outcome {
                rotate::RotateOutcome::SameDay => outln!("sessions/current.md is already today's ({}); nothing to do", report.today),
                rotate::RotateOutcome::Created => outln!("started sessions/current.md for {}", report.today),
                rotate::RotateOutcome::HeaderAdded => outln!("added today's header ({}) to sessions/current.md", report.today),
                rotate::RotateOutcome::Rotated { log_date, archived_to, .. } => {
                    outln!("archived the log of {log_date} to {}; started sessions/current.md for {}", archived_to.display(), report.today)
                }
            }
            Ok(())
        }
        WorkspaceCommand::Consolidate { dir, apply } => {
            let s = settings(ctx, dir.as_deref())?;
            // Reads counted in the store renew a file's freshness; without a store, edits alone do.
            let reads = if ctx.store_path().exists() {
                let door = ctx.door(false)?;
                mneme_agent::file_index::file_reads(&door.owner()?)?
            } else {
                Default::default()
            };
            let report = consolidate::consolidate_with_reads(&s, now, &reads)?;
            let applied = if apply { Some(consolidate::apply(&s, &report)?) } else { None };
            if ctx.json {
                return match applied {
                    Some(applied) => print_json(&serde_json::json!({ "report": report, "applied": applied })),
                    None => print_json(&report),
                };
            }
            if report.recommendations.is_empty() {
                outln!("nothing to do: every file is within its budget and fresh");
            }
            for r in &report.recommendations {
                outln!("- {r}");
            }
            for f in &report.freshness {
                outln!(
                    "  {} [{}, {}]: not confirmed for {} days; {}",
                    f.file,
                    f.memory_type.as_str(),
                    f.freshness.as_str(),
                    f.idle_days,
                    f.suggested_action
                );
            }
            if let Some(applied) = applied {
                outln!("moved {} old session logs to the archive", applied.moved.len());
            } else if !report.sessions.archive_candidates.is_empty() {
                outln!("(--apply moves the {} session logs older than 30 days to the archive)", report.sessions.archive_candidates.len());
            }
            Ok(())
        }
    }
}

/// The sync report, one line per file: what happened and why.
fn render_sync(report: &mneme_workspace::deploy::SyncReport) -> Result<()> {
    if let Some(r) = &report.repaired {
        outln!("the module registry was unreadable ({}): set aside as {}, rebuilt with {}", r.error, r.set_aside, r.registered.join(", "));
    }
    for f in &report.files {
        outln!("  {:<9} {}  ({})", f.action, f.path, f.reason);
    }
    for d in &report.directories {
        outln!("  created   {d}/");
    }
    let e = &report.effective;
    let stack: Vec<String> = e.stack.iter().map(|m| format!("{}({})", m.id, m.priority)).collect();
    outln!(
        "effective playbook {}: modules {}{}",
        if e.changed { "regenerated" } else { "unchanged" },
        if stack.is_empty() { "none".to_string() } else { stack.join(", ") },
        if e.base { ", then the base playbook" } else { "" }
    );
    for why in &e.skipped {
        outln!("  left out: {why}");
    }
    Ok(())
}

/// A workspace hook: prints the Claude Code JSON and always exits 0.
pub fn hook(ctx: &Invocation, args: &HookArgs) -> Result<()> {
    match run_hook(ctx, args) {
        Ok((event, context)) => {
            emit(&HookOutput::new(event, context).to_json());
            Ok(())
        }
        Err(e) => hook_failed(args, &e),
    }
}

/// The empty answer of a hook that could not run, with the reason on stderr.
pub fn hook_failed(args: &HookArgs, error: &anyhow::Error) -> Result<()> {
    eprintln!("mneme claude-hook {}: {error:#}", args.name);
    emit(&HookOutput::new(event_of(&args.name), None).to_json());
    Ok(())
}

/// Writes a hook's answer; a caller that closed the pipe is not our failure.
fn emit(json: &str) {
    use std::io::Write as _;
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{json}").and_then(|()| out.flush());
}

fn event_of(name: &str) -> HookEvent {
    match name {
        "session-start" => HookEvent::SessionStart,
        "prompt-submit" => HookEvent::UserPromptSubmit,
        _ => HookEvent::PostToolUse,
    }
}

fn run_hook(ctx: &Invocation, args: &HookArgs) -> Result<(HookEvent, Option<String>)> {
    let s = settings(ctx, None)?;
    let event = event_of(&args.name);
    let input = read_hook_input();
    if args.name == "session-end" {
        session_end(&s, input.as_ref())?;
        return Ok((event, None));
    }
    if args.name == "session-start"
        && s.sync_on_start
        && s.dir.is_dir()
        && let Err(e) = mneme_workspace::deploy::sync(&s, jiff::Timestamp::now())
    {
        // Agent start deploys the agent's files; a failure never costs the session its context.
        eprintln!("mneme claude-hook session-start: workspace sync failed: {e}");
    }
    if args.name == "context" {
        // --usage when given; else what Claude Code sends: the transcript, whose last
        // assistant turn says how many tokens the model was sent.
        let from_transcript = || {
            let path = input.as_ref()?.get("transcript_path")?.as_str()?;
            mneme_workspace::context::usage_from_transcript(std::path::Path::new(path), CONTEXT_WINDOW_TOKENS)
        };
        let usage = args.usage.or_else(from_transcript).ok_or_else(|| {
            anyhow::anyhow!("no context usage: pass --usage PCT, or run it as a Claude Code hook (its input names the transcript)")
        })?;
        return Ok((event, mneme_workspace::context::context_check(&s, usage)));
    }
    let prompt = if args.name == "prompt-submit" {
        input.as_ref().and_then(|v| v.get("prompt")).and_then(|p| p.as_str()).map(str::to_string)
    } else {
        None
    };
    // The store part (conversation log, dispatches, activity) is optional: without a store
    // the workspace files are still injected.
    let user = args.user.clone().filter(|u| !u.trim().is_empty()).unwrap_or_else(|| s.primary_user.clone());
    let speaker = args.user.clone().filter(|u| !u.trim().is_empty());
    let agent = match agent_state(ctx, &s, prompt, user, speaker, args.name == "session-start") {
        Ok(state) => state,
        Err(e) => {
            eprintln!("mneme claude-hook {}: conversation log unavailable: {e:#}", args.name);
            AgentState::default()
        }
    };
    let (base, memory) = match args.name.as_str() {
        // With a store, the one block the daemon's session_start gives too (the hook engine's:
        // files, what is true now, knowledge, the conversation since the last sync, the
        // playbook), then the Memory Sync instruction when one is due.
        "session-start" if agent.memory.is_some() => {
            (agent.memory.clone(), mneme_workspace::context::prompt_submit(&s, agent.unsummarized.as_ref()))
        }
        "session-start" => {
            // No store (or its block is off, JSON, or failed): the workspace's files, in the
            // seed's shape, so the agent always starts knowing who it is.
            let speaker = args.user.as_deref().filter(|u| !u.trim().is_empty());
            let mut context = mneme_workspace::context::session_start_for(&s, agent.unsummarized.as_ref(), speaker)?;
            // How the agent is (inner life), once its state exists.
            if let Some(mood) = mneme_workspace::inner::injectable(&s, jiff::Timestamp::now()) {
                context.push_str(&format!("\n\n=== HOW I AM ===\n\n{mood}"));
            }
            (Some(context).filter(|c| !c.trim().is_empty()), None)
        }
        // The memories relevant to the prompt (`[hooks.auto_recall]`).
        _ => (mneme_workspace::context::prompt_submit(&s, agent.unsummarized.as_ref()), agent.memory.clone()),
    };
    // Dispatches are taken (marked delivered) last, once nothing else can fail.
    let dispatches = match &agent.service {
        Some(service) => match service.take_dispatches(20) {
            Ok(taken) => taken.into_iter().map(|d| d.text).collect(),
            Err(e) => {
                eprintln!("mneme claude-hook {}: dispatches unavailable: {e}", args.name);
                Vec::new()
            }
        },
        None => Vec::new(),
    };
    let parts: Vec<String> = base.into_iter().chain(memory).chain(dispatches).collect();
    Ok((event, (!parts.is_empty()).then(|| parts.join("\n\n"))))
}

/// Claude Code's SessionEnd: the daily-log entry and a named snapshot from the transcript's
/// last messages. Nothing to print (Claude Code reads no output from it).
fn session_end(s: &WorkspaceSettings, input: Option<&serde_json::Value>) -> Result<()> {
    if !s.dir.join(mneme_workspace::paths::MEMORY_DIR).is_dir() {
        anyhow::bail!("no workspace at {} (run `mneme workspace init`)", s.dir.display());
    }
    let field = |k: &str| input.and_then(|v| v.get(k)).and_then(|v| v.as_str());
    let messages = field("transcript_path").map(|p| mneme_workspace::context::transcript_messages(Path::new(p), 20)).unwrap_or_default();
    let session = field("session_id").unwrap_or("claude-code").to_string();
    let end = mneme_workspace::journal::SessionEnd { session_key: &session, reason: field("reason"), tracked: None, messages };
    let now = jiff::Timestamp::now();
    mneme_workspace::journal::write_session_end(s, now, &end)?;
    let entry = mneme_workspace::journal::CommandLogEntry {
        session_key: Some(session.clone()),
        ..mneme_workspace::journal::CommandLogEntry::new(
            now,
            "session_end",
            "claude-code",
            field("reason").map(|r| serde_json::json!({ "reason": r })),
        )
    };
    mneme_workspace::journal::log_command(s, &entry)?;
    Ok(())
}

/// What the store adds to a hook's answer.
#[derive(Debug, Default)]
struct AgentState {
    unsummarized: Option<mneme_workspace::context::UnsummarizedInfo>,
    /// The open store, for taking the dispatches at the end.
    service: Option<std::sync::Arc<mneme_service::MemoryService>>,
    /// The store's context block (session-start) or auto-recall (prompt-submit).
    memory: Option<String>,
}

/// Logs the prompt (prompt-submit), notes the agent's activity and reads the unsummarized
/// range. No store (never initialised): nothing to add.
fn agent_state(
    ctx: &Invocation,
    s: &mneme_workspace::WorkspaceSettings,
    prompt: Option<String>,
    user: String,
    speaker: Option<String>,
    session_start: bool,
) -> Result<AgentState> {
    if !ctx.store_path().exists() {
        return Ok(AgentState::default());
    }
    let prompt = prompt.filter(|p| !p.trim().is_empty());
    if (prompt.is_some() || session_start)
        && let Some(state) = through_daemon(ctx, prompt.as_deref(), &user, speaker.as_deref())
    {
        return Ok(state);
    }
    let service = std::sync::Arc::new(ctx.open(false)?);
    let ops = mneme_service::Ops::new(service.clone(), false);
    let owner = mneme_service::Principal::internal("claude-code", mneme_service::Access::owner(), mneme_core::Sensitivity::Critical);
    let hooks = mneme_agent::hooks::Hooks::new(ops, ctx.config.hooks.clone()).with_inner_life(s.clone());
    let hook_ctx = mneme_agent::hooks::HookContext {
        session_id: Some("claude-code".into()),
        channel_id: Some("claude-code".into()),
        ..Default::default()
    };
    let mut memory = None;
    // A hook the engine handles notes the activity itself (when hooks are enabled).
    let (hooks_enabled, mut noted) = (ctx.config.hooks.enabled, false);
    match prompt {
        Some(prompt) => {
            // The turn's start: the memories relevant to the prompt (the prompt itself is
            // not a memory yet), then the prompt remembered: stored, logged for memory
            // sync, and the user's facts reconciled.
            let input = mneme_agent::hooks::HookInput { event: prompt_event(prompt, user), ctx: hook_ctx };
            let outcome = hooks.handle(&owner, mneme_agent::hooks::HookName::MessageReceived, input, &mut Vec::new());
            noted = hooks_enabled;
            memory = outcome.context;
            // A prompt that is all <private> is not remembered; that is not a hook failure.
            if let Some(e) = outcome.error {
                eprintln!("mneme claude-hook prompt-submit: prompt not remembered: {e}");
            }
        }
        None if session_start => {
            // The file index first, so the block's knowledge entries are current (no model
            // in a hook process: words only).
            let index = mneme_service::Ops::new(service.clone(), false);
            if let Err(e) = index.owner(&owner).and_then(|o| {
                mneme_agent::file_index::sync(
                    &o,
                    &s.dir,
                    None,
                    mneme_agent::file_index::Embedding { background: false, budget: Some(std::time::Duration::ZERO) },
                )
            }) {
                eprintln!("mneme claude-hook session-start: the file index was not refreshed: {e}");
            }
            // A user named with --user sees their facts and their profile.
            let ctx = mneme_agent::hooks::HookContext { user_id: speaker, ..hook_ctx };
            let input = mneme_agent::hooks::HookInput { event: Default::default(), ctx };
            let outcome = hooks.handle(&owner, mneme_agent::hooks::HookName::SessionStart, input, &mut Vec::new());
            noted = hooks_enabled;
            match outcome.error {
                Some(e) => eprintln!("mneme claude-hook session-start: no memory context: {e}"),
                None => memory = outcome.context.filter(|c| !c.trim().is_empty()),
            }
        }
        None => {}
    }
    if !noted {
        service.touch_activity()?;
    }
    let state = service.sync_status()?;
    let unsummarized = match (state.begin_id, state.end_id) {
        (Some(begin_id), Some(end_id)) => Some(mneme_workspace::context::UnsummarizedInfo { count: state.unsummarized, begin_id, end_id }),
        _ => None,
    };
    Ok(AgentState { unsummarized, service: Some(service), memory })
}

/// The event of a prompt: a user message that starts the agent's turn, answered with
/// the memories relevant to it (`recall`).
fn prompt_event(prompt: String, user: String) -> mneme_agent::hooks::HookEvent {
    mneme_agent::hooks::HookEvent { content: Some(prompt), from: Some(user), recall: Some(true), ..Default::default() }
}

/// What the store adds to a hook's answer, from the daemon serving this data directory
/// when one runs (its warm store and caches, its model for recall, its consolidation):
/// the prompt's turn start or the session-start block, then the unsummarized range, on
/// one loopback connection. `None` when no daemon takes the request (none runs, it
/// cannot be reached, or it refuses before handling: a key the hook lacks, the rate
/// limit): the hook then works on the store itself. A request a daemon took is never
/// repeated here.
fn through_daemon(ctx: &Invocation, prompt: Option<&str>, user: &str, speaker: Option<&str>) -> Option<AgentState> {
    let mut daemon = crate::daemon::local_loopback(ctx)?;
    let hook_ctx = serde_json::json!({ "sessionId": "claude-code", "channelId": "claude-code", "userId": speaker });
    let (name, hook, body) = match prompt {
        Some(p) => {
            let event = prompt_event(p.to_string(), user.to_string());
            ("prompt-submit", mneme_agent::hooks::HookName::MessageReceived, serde_json::json!({ "event": event, "ctx": hook_ctx }))
        }
        None => ("session-start", mneme_agent::hooks::HookName::SessionStart, serde_json::json!({ "event": {}, "ctx": hook_ctx })),
    };
    let answer = match daemon.hook(hook, &body) {
        HookCall::Answered(answer) => answer,
        HookCall::NotTaken(None) => return None,
        // Refused before it was handled (a key the hook lacks, the rate limit), or not a
        // mneme daemon: the store is the hook's own.
        HookCall::NotTaken(Some(why)) => {
            eprintln!("mneme claude-hook {name}: the daemon did not take the hook ({why}); handled here");
            return None;
        }
        HookCall::Failed(why) => {
            eprintln!("mneme claude-hook {name}: the daemon failed the hook ({why}); nothing from memory this time");
            return Some(AgentState::default());
        }
    };
    if let Some(e) = answer["error"].as_str() {
        eprintln!("mneme claude-hook {name}: {e}");
    }
    let memory = answer["context"].as_str().filter(|c| !c.trim().is_empty()).map(str::to_string);
    let unsummarized = match daemon.call("GET", "/v1/sync/status", None) {
        Ok((200, state)) => match (state["begin_id"].as_i64(), state["end_id"].as_i64()) {
            (Some(begin_id), Some(end_id)) => {
                Some(mneme_workspace::context::UnsummarizedInfo { count: state["unsummarized"].as_u64().unwrap_or(0), begin_id, end_id })
            }
            _ => None,
        },
        _ => None,
    };
    Some(AgentState { unsummarized, service: None, memory })
}

/// The context window the `context` hook measures against (Claude's 200k tokens).
const CONTEXT_WINDOW_TOKENS: u64 = 200_000;

/// The hook's input on stdin (Claude Code sends JSON), if any. Never blocks on a
/// terminal; reads at most 1 MiB.
fn read_hook_input() -> Option<serde_json::Value> {
    use std::io::{IsTerminal as _, Read as _};
    let stdin = std::io::stdin();
    if stdin.is_terminal() {
        return None;
    }
    let mut text = String::new();
    stdin.lock().take(1 << 20).read_to_string(&mut text).ok()?;
    serde_json::from_str(&text).ok()
}
