//! `mneme sync`, `schedule`, `search`, `reflect`, `inner` and `module`: the conversation log
//! and its checkpoints, the scheduler, search over the workspace files, reflection, the
//! inner life and knowledge modules. They open the store through the CLI's door (SQLite in
//! WAL mode lets them run next to a daemon); the logic is in `mneme_service` (log,
//! checkpoints), `mneme_agent::{scheduler, file_index, ops}` and `mneme_reflect`.

use std::io::Read as _;

use anyhow::Result;
use jiff::Timestamp;
use mneme_agent::ops::AgentOps;
use mneme_agent::{file_index, scheduler};
use mneme_service::FileRanking;

use crate::cli::{InnerCommand, ModuleCommand, ReflectCommand, ScheduleCommand, SearchArgs, SyncCommand};
use crate::commands::{Invocation, input_error as input, parse_time};
use crate::render::print_json;

fn now_or(flag: Option<&str>) -> Result<Timestamp> {
    match flag {
        Some(text) => parse_time("--now", text),
        None => Ok(Timestamp::now()),
    }
}

pub fn sync(ctx: &Invocation, cmd: SyncCommand) -> Result<()> {
    // Everything is checked before the store is opened.
    match cmd {
        SyncCommand::Status => {
            let door = ctx.door(false)?;
            let state = door.ops.sync_status(&door.me)?;
            if ctx.json {
                return print_json(&state);
            }
            match (state.begin_id, state.end_id) {
                (Some(begin), Some(end)) => outln!("{} unsummarized conversations (conversation id {begin} ~ {end})", state.unsummarized),
                _ => outln!("no unsummarized conversations"),
            }
            match &state.last_checkpoint {
                Some(c) => outln!("last checkpoint: up to {} at {} — {}", c.end_id, c.at, c.summary),
                None => outln!("no checkpoint yet ({} conversations logged)", state.total),
            }
            Ok(())
        }
        SyncCommand::Fetch { begin, end } => {
            // The service reads an end before begin as an empty range; typed at a prompt it
            // is a slip.
            if end < begin {
                return Err(mneme_service::ServiceError::invalid("--end", format!("{end} is before --begin {begin}")).into());
            }
            let door = ctx.door(false)?;
            let conversations = door.ops.sync_fetch(&door.me, begin, end)?;
            if ctx.json {
                return print_json(&conversations);
            }
            for c in &conversations {
                let who = c.user_id.as_deref().unwrap_or("-");
                outln!("[{}] {} {} {} {}: {}", c.id, c.at, c.channel, c.direction.as_str(), who, c.content);
            }
            if conversations.is_empty() {
                outln!("no conversations with ids {begin}..={end}");
            }
            Ok(())
        }
        SyncCommand::Checkpoint { end_id, summary } => {
            let door = ctx.door(false)?;
            let result = door.ops.sync_checkpoint(&door.me, end_id, &summary)?;
            if ctx.json {
                return print_json(&result);
            }
            if result.already_existed {
                outln!("checkpoint up to {end_id} already exists (created {}); nothing changed", result.checkpoint.at);
            } else {
                outln!("Memory sync complete: checkpoint up to conversation {end_id} ({} conversations).", result.covered);
            }
            Ok(())
        }
        SyncCommand::Log { channel, user, direction, priority, content } => {
            let content = match content {
                Some(c) => c,
                None => {
                    let mut text = String::new();
                    std::io::stdin().read_to_string(&mut text).map_err(|e| input(format!("cannot read the message from stdin: {e}")))?;
                    text
                }
            };
            let input = mneme_service::ConversationInput { channel, user_id: user, direction, priority: Some(priority), content, at: None };
            let door = ctx.door(false)?;
            let logged = door.ops.log_conversation(&door.me, input)?;
            if ctx.json {
                return print_json(&logged);
            }
            outln!("{}", logged.id);
            Ok(())
        }
    }
}

pub fn schedule(ctx: &Invocation, cmd: ScheduleCommand) -> Result<()> {
    let settings = crate::workspace::settings(ctx, None)?;
    match cmd {
        ScheduleCommand::List { now } => {
            let now = now_or(now.as_deref())?;
            let door = ctx.door(false)?;
            let tasks = scheduler::list(&door.owner()?, &settings, now)?;
            if ctx.json {
                return print_json(&tasks);
            }
            outln!("{:<30} {:<22} {:>3} {:<5} {:<26} {}", "NAME", "TRIGGER", "PRI", "IDLE", "LAST RUN", "DUE");
            for t in &tasks {
                let last = t.last_run.map(|l| l.to_string()).unwrap_or_else(|| "never".into());
                let due = match (t.enabled, t.due, t.due_at) {
                    (false, _, _) => "disabled".to_string(),
                    (true, true, _) => "now".to_string(),
                    (true, false, Some(at)) => at.to_zoned(settings.timezone.clone()).strftime("%Y-%m-%d %H:%M %Z").to_string(),
                    (true, false, None) => "never".to_string(),
                };
                outln!(
                    "{:<30} {:<22} {:>3} {:<5} {:<26} {}",
                    t.name,
                    t.trigger,
                    t.priority,
                    if t.require_idle { "yes" } else { "no" },
                    last,
                    due
                );
            }
            Ok(())
        }
        ScheduleCommand::Add { name, cron, every, message, action, priority, require_idle, replace } => {
            let new = scheduler::NewTask { name, cron, every, message, action, priority, require_idle, replace };
            let door = ctx.door(false)?;
            let task = scheduler::add(&door.owner()?, new, Timestamp::now())?;
            if ctx.json {
                return print_json(&task);
            }
            outln!("added {} ({}, priority {})", task.name, task.trigger, u8::from(task.priority));
            Ok(())
        }
        ScheduleCommand::Remove { name } => {
            let door = ctx.door(false)?;
            scheduler::remove(&door.owner()?, &name, Timestamp::now())?;
            if ctx.json {
                return print_json(&serde_json::json!({ "removed": name }));
            }
            outln!("removed {name}");
            Ok(())
        }
        ScheduleCommand::RunDue { now, idle, dry_run } => {
            let now = now_or(now.as_deref())?;
            let door = ctx.door(false)?;
            let owner = door.owner()?;
            let pass = if dry_run {
                scheduler::due_now(&owner, &settings, now, idle.then_some(true))?
            } else {
                scheduler::run_due(&owner, &settings, &reflector(ctx)?, now, idle.then_some(true))?
            };
            if ctx.json {
                return print_json(&pass);
            }
            if pass.ran.is_empty() {
                outln!("nothing due");
            }
            for run in &pass.ran {
                if dry_run {
                    outln!("due: {} (dry run: not run)", run.task);
                } else {
                    outln!("{} {}: {}", if run.ok { "ran" } else { "FAILED" }, run.task, run.detail);
                }
            }
            for name in &pass.waiting_for_idle {
                outln!("waiting for idle: {name}");
            }
            // A failed task is recorded (and its slot consumed); say so in the exit status.
            if pass.ran.iter().any(|r| !r.ok) {
                return Err(anyhow::Error::new(mneme_service::ServiceError::Precondition("a scheduled task failed (see above)".into())));
            }
            Ok(())
        }
        ScheduleCommand::Runs { task, limit } => {
            let door = ctx.door(false)?;
            let runs = door.owner()?.task_runs(task.as_deref(), limit)?;
            if ctx.json {
                return print_json(&runs);
            }
            for r in &runs {
                outln!("{} {} {} {}", r.at, r.task, if r.ok { "ok" } else { "FAILED" }, r.detail);
            }
            Ok(())
        }
        ScheduleCommand::Inbox { take } => {
            let door = ctx.door(false)?;
            let owner = door.owner()?;
            let dispatches = if take { owner.take_dispatches(100)? } else { owner.pending_dispatches(100)? };
            if ctx.json {
                return print_json(&dispatches);
            }
            for d in &dispatches {
                outln!("[{}] priority {} from {}: {}", d.id, d.priority, d.task, d.text);
            }
            Ok(())
        }
    }
}

/// The reflection engine for this process: the configured model (if any) through the
/// shared client, on a runtime of its own.
fn reflector(ctx: &Invocation) -> Result<mneme_reflect::engine::Reflector> {
    use mneme_reflect::engine::{Exec, Reflector};
    let llm = std::sync::Arc::new(mneme_llm::LlmClient::new(ctx.config.llm_settings()));
    Ok(Reflector::new(ctx.config.reflection.clone(), Some(llm), Some(Exec::owned()?))
        .with_env(|var| std::env::var(var).ok())
        .with_inner(ctx.config.inner.clone()))
}

/// The workspace engines' door for this process, over the CLI's door: the same
/// operations (and checks) as the daemon's `/v1/reflect/tick` and `/v1/inner/run`. No relay
/// loop runs in the CLI.
fn agent_ops(ctx: &Invocation, door: &crate::commands::Door, settings: &mneme_workspace::WorkspaceSettings) -> Result<AgentOps> {
    let relay = std::sync::Arc::new(mneme_relay::Relay::new(ctx.config.relay.clone(), None));
    Ok(AgentOps::new(door.ops.clone(), std::sync::Arc::new(reflector(ctx)?), relay, settings.clone()))
}

/// `mneme reflect signals|feedback|mine|curate|insight`: one stage alone, as JSON.
fn stage(ctx: &Invocation, settings: &mneme_workspace::WorkspaceSettings, now: Timestamp, name: &str, idle: Option<bool>) -> Result<()> {
    let door = ctx.door(false)?;
    let owner = door.owner()?;
    let value = mneme_reflect::tick::run_stage(&reflector(ctx)?, &owner, settings, now, name, idle)?;
    print_json(&value)
}

/// `mneme inner …`.
pub fn inner(ctx: &Invocation, cmd: InnerCommand) -> Result<()> {
    use mneme_workspace::inner::{self, InnerEvent};
    let settings = crate::workspace::settings(ctx, None)?;
    let now = jiff::Timestamp::now();
    match cmd {
        InnerCommand::Status => {
            let state = inner::read_state(&settings)?;
            let mood = state.as_ref().map(|s| s.mood(now));
            if ctx.json {
                return print_json(&serde_json::json!({ "state": state, "mood": mood }));
            }
            match mood {
                Some(m) => outln!("{}", m.block()),
                None => outln!("no inner state yet: it starts with the first hook event (or `mneme inner event`)"),
            }
            Ok(())
        }
        InnerCommand::Context { level } => {
            let text = inner::context(&settings, now, level)?;
            if ctx.json {
                return print_json(&serde_json::json!({ "level": level, "context": text }));
            }
            outln!("{text}");
            Ok(())
        }
        InnerCommand::Event { kind, what, since } => {
            let what = || what.clone().filter(|w| !w.trim().is_empty()).ok_or_else(|| input(format!("{kind} needs --what")));
            let event = match kind.as_str() {
                "user-message" => InnerEvent::UserMessage {},
                "mistake" => InnerEvent::Mistake { what: what()? },
                "spark" => InnerEvent::Spark { topic: what()? },
                "novelty" => InnerEvent::Novelty { what: what()? },
                "repeat" => InnerEvent::Repeat { what: what()? },
                "pending" => InnerEvent::Pending {
                    what: what()?,
                    since: match since.as_deref() {
                        Some(t) => parse_time("--since", t)?,
                        None => now,
                    },
                },
                _ => InnerEvent::Resolved { what: what()? },
            };
            if !settings.dir.is_dir() {
                return Err(anyhow::Error::new(mneme_service::ServiceError::Precondition(format!(
                    "no workspace at {} (run `mneme workspace init`)",
                    settings.dir.display()
                ))));
            }
            let state = inner::record(&settings, &[event], now)?;
            if ctx.json {
                return print_json(&serde_json::json!({ "state": state, "mood": state.mood(now) }));
            }
            outln!("{}", state.mood(now).block());
            Ok(())
        }
        InnerCommand::Run { job, dry_run, if_triggered, now: at } => {
            let job: inner::Job = job.parse()?;
            let now = match at.as_deref() {
                Some(t) => parse_time("--now", t)?,
                None => now,
            };
            // `--now`: the whole run, store included, happens as of that time.
            let door = ctx.door_at(at.is_some().then_some(now))?;
            let options = mneme_reflect::inner::JobOptions { force: !if_triggered, dry_run };
            let report = agent_ops(ctx, &door, &settings)?.inner_run(&door.me, job, &options)?;
            if ctx.json {
                return print_json(&report);
            }
            outln!("{} {}{}", job.name(), report.status, report.reason.as_deref().map(|r| format!(": {r}")).unwrap_or_default());
            for path in &report.wrote {
                outln!("  wrote {path}");
            }
            for why in &report.refused {
                outln!("  refused: {why}");
            }
            if let Some(d) = &report.dispatch {
                outln!("  queued for the agent: {d}");
            }
            Ok(())
        }
        InnerCommand::Write { job, path, append } => {
            let job: inner::Job = job.parse()?;
            let mut text = String::new();
            std::io::stdin().read_to_string(&mut text).map_err(|e| anyhow::anyhow!("cannot read stdin: {e}"))?;
            let written = inner::write_for(&settings, job, &path, &text, append, now)?;
            if ctx.json {
                return print_json(&serde_json::json!({ "job": job, "path": written, "append": append }));
            }
            outln!("wrote {written}");
            Ok(())
        }
    }
}

/// `mneme module …`: the files under the workspace's `modules/` (no store or daemon).
pub fn module(ctx: &Invocation, cmd: ModuleCommand) -> Result<()> {
    use mneme_workspace::modules;
    let settings = crate::workspace::settings(ctx, None)?;
    let now = jiff::Timestamp::now();
    let changed = |change: modules::Change| -> Result<()> {
        if ctx.json {
            return print_json(&change);
        }
        let stack: Vec<String> = change.stack.iter().map(|m| format!("{}({})", m.id, m.priority)).collect();
        outln!("{}: {} ({} at priority {})", change.id, change.action, change.status.as_str(), change.priority);
        outln!("stack: {}", if stack.is_empty() { "empty".to_string() } else { stack.join(", ") });
        Ok(())
    };
    match cmd {
        ModuleCommand::List => {
            let list = modules::list(&settings)?;
            if ctx.json {
                return print_json(&list);
            }
            if list.modules.is_empty() && list.unregistered.is_empty() {
                outln!("no modules (run `mneme workspace sync` to deploy base-behaviors, or `mneme module extract`)");
            }
            for m in &list.modules {
                let status = m.status.map_or("?", |s| s.as_str());
                outln!(
                    "{:<24} {:<9} priority {:<4}{} {} pattern lines  {}",
                    m.id,
                    status,
                    m.priority.unwrap_or_default(),
                    if m.locked { " locked" } else { "       " },
                    m.pattern_lines,
                    m.name.as_deref().unwrap_or("")
                );
                for p in &m.problems {
                    outln!("    problem: {p}");
                }
            }
            for m in &list.unregistered {
                outln!("{:<24} unregistered (activate it with `mneme module activate {}`)", m.id, m.id);
                for p in &m.problems {
                    outln!("    problem: {p}");
                }
            }
            Ok(())
        }
        ModuleCommand::Activate { id, priority } => changed(modules::activate(&settings, &id, priority, now)?),
        ModuleCommand::Suspend { id } => changed(modules::suspend(&settings, &id)?),
        ModuleCommand::Disable { id } => changed(modules::disable(&settings, &id)?),
        ModuleCommand::Priority { id, priority } => changed(modules::set_priority(&settings, &id, priority)?),
        ModuleCommand::Stack => {
            let stack = modules::list(&settings)?.stack;
            if ctx.json {
                return print_json(&stack);
            }
            if stack.is_empty() {
                outln!("no active modules");
            }
            for m in &stack {
                outln!("{:>4}  {}", m.priority, m.id);
            }
            Ok(())
        }
        ModuleCommand::Info { id } => {
            let info = modules::info(&settings, &id)?;
            if ctx.json {
                return print_json(&info);
            }
            let v = &info.view;
            outln!("{} — {}", v.id, v.name.as_deref().unwrap_or("(no manifest)"));
            if let Some(d) = v.description.as_deref().filter(|d| !d.is_empty()) {
                outln!("  {d}");
            }
            outln!("  status:        {}", v.status.map_or("unregistered", |s| s.as_str()));
            if let (Some(p), Some([lo, hi])) = (v.priority, v.range) {
                outln!("  priority:      {p} (range {lo}..={hi})");
            }
            outln!("  locked:        {}", v.locked);
            outln!("  version:       {}", v.version.as_deref().unwrap_or("-"));
            outln!("  activated at:  {}", v.activated_at.map_or("-".into(), |t| t.to_string()));
            outln!("  last triggered: {}", v.last_triggered.map_or("-".into(), |t| t.to_string()));
            if let Some(m) = &info.manifest {
                outln!("  keywords:      {}", m.triggers.keywords.join(", "));
                outln!("  file patterns: {}", m.triggers.file_patterns.join(", "));
            }
            outln!("  patterns:      {} lines in {}/patterns.md", v.pattern_lines, info.path);
            for p in &v.problems {
                outln!("  problem: {p}");
            }
            Ok(())
        }
        ModuleCommand::Extract { id, domain, name, keywords, file_patterns, priority, days, dry_run } => {
            use mneme_reflect::extract::{self, ExtractError, ExtractRequest};
            let request = ExtractRequest { id, domain, name, keywords, file_patterns, priority, days: Some(days), dry_run };
            let extracted = extract::extract(&reflector(ctx)?, &settings, &request, now).map_err(|e| match e {
                ExtractError::Invalid(msg) => input(msg),
                ExtractError::Workspace(w) => anyhow::Error::new(w),
            })?;
            if ctx.json {
                return print_json(&extracted);
            }
            let how = match &extracted.stage.reason {
                None => "by the model".to_string(),
                Some(r) => format!("offline ({r})"),
            };
            outln!(
                "extracted {} {how}: {} established, {} emerging, {} vocabulary (from {} playbook patterns and {} log lines)",
                extracted.id,
                extracted.established,
                extracted.emerging,
                extracted.vocabulary,
                extracted.read["playbookPatterns"],
                extracted.read["logLines"]
            );
            match &extracted.path {
                Some(path) => {
                    outln!("wrote {path}/manifest.json and {path}/patterns.md; registered suspended");
                    outln!("activate it with: {}", extracted.activate);
                }
                None => {
                    outln!("(dry run: nothing written)\n");
                    out!("{}", extracted.patterns);
                }
            }
            Ok(())
        }
    }
}

/// `mneme reflect …`.
pub fn reflect(ctx: &Invocation, cmd: ReflectCommand) -> Result<()> {
    use mneme_reflect::tick;
    let settings = crate::workspace::settings(ctx, None)?;
    let now = jiff::Timestamp::now();
    match cmd {
        ReflectCommand::Tick { idle, active, summary, dry_run } => {
            let door = ctx.door(false)?;
            let options = tick::TickOptions {
                idle: if idle {
                    Some(true)
                } else if active {
                    Some(false)
                } else {
                    None
                },
                summary,
                dry_run,
            };
            let report = agent_ops(ctx, &door, &settings)?.reflect_tick(&door.me, &options)?;
            if ctx.json {
                return print_json(&report);
            }
            let line = &report.line;
            outln!("tick {}: {}", report.tick_id, line["sessionSummary"].as_str().unwrap_or_default());
            outln!("  signals: {}", line["signals"].as_array().map_or(0, Vec::len));
            outln!("  action: {}", line["actionTaken"]["kind"].as_str().unwrap_or("none"));
            outln!(
                "  feedback: {} scored outputs, directive {}",
                line["feedback"]["effectiveness"]["outputs"],
                line["feedback"]["curateDirective"].as_str().unwrap_or("?")
            );
            let changes = &line["playbookChanges"]["changes"];
            outln!(
                "  playbook: +{} -{} ({} lines)",
                changes["added"].as_array().map_or(0, Vec::len),
                changes["pruned"].as_array().map_or(0, Vec::len),
                line["playbookChanges"]["playbookLines"]
            );
            // In the order the tick runs them.
            for name in ["setup", "summary", "git", "signals", "mine", "feedback", "curate"] {
                let s = &line["stages"][name];
                if let Some(status) = s["status"].as_str() {
                    let reason = s["reason"].as_str().map(|r| format!(" ({r})")).unwrap_or_default();
                    outln!("  {name}: {status}{reason}");
                }
            }
            let out = &report.output;
            let reason = out["stage"]["reason"].as_str().map(|r| format!(" ({r})")).unwrap_or_default();
            outln!("  insight: {}{reason}", out["stage"]["status"].as_str().unwrap_or("?"));
            if out["skip"] == false {
                outln!("  output {}: {}", out["outputId"].as_str().unwrap_or("?"), out["suggestion"].as_str().unwrap_or(""));
            }
            if report.llm.calls > 0 {
                outln!(
                    "  model: {} call(s), {} prompt + {} completion tokens",
                    report.llm.calls,
                    report.llm.prompt_tokens,
                    report.llm.completion_tokens
                );
            }
            outln!("{}", report.status);
            Ok(())
        }
        ReflectCommand::Feedback { output_id, score: None, .. } => {
            if output_id.is_some() {
                return Err(input("an output id needs --score (without --score, the feedback stage runs alone)"));
            }
            stage(ctx, &settings, now, "feedback", None)
        }
        ReflectCommand::Feedback { output_id, score: Some(score), error_cleared, re_escalated, dwell_ms } => {
            let report = mneme_reflect::report::Feedback {
                output_id,
                score,
                error_cleared: error_cleared.then_some(true),
                re_escalated: re_escalated.then_some(true),
                dwell_ms,
            };
            let (line, path) = mneme_reflect::report::feedback(&settings, now, &report)?;
            if ctx.json {
                return print_json(&serde_json::json!({ "recorded": line, "log": path }));
            }
            outln!("feedback recorded in {}", path.display());
            Ok(())
        }
        ReflectCommand::SpawnResult { spawn_id, outcome, note } => {
            let (line, path) = mneme_reflect::report::spawn_result(&settings, now, &spawn_id, &outcome, note.as_deref())?;
            if ctx.json {
                return print_json(&serde_json::json!({ "recorded": line, "log": path }));
            }
            outln!("spawn result recorded in {}", path.display());
            Ok(())
        }
        ReflectCommand::Status => {
            let status = mneme_reflect::status::status(&reflector(ctx)?, &settings, now)?;
            if ctx.json {
                return print_json(&status);
            }
            let model = if status.model { "configured" } else { "none (every thinking stage runs its fallback)" };
            outln!("model: {model}; outbound: {}", status.outbound.as_str().unwrap_or("inbox"));
            let Some(at) = status.last_tick else {
                outln!("no tick yet (`mneme reflect tick` runs one; the daemon runs one every 30 minutes)");
                return Ok(());
            };
            outln!("last tick: {} ({} in the last 24 hours)", at.round(jiff::Unit::Second).unwrap_or(at), status.ticks_24h);
            let e = &status.effectiveness;
            outln!(
                "directive: {} ({} scored outputs in 7 days, {} positive, rate {:.2})",
                status.directive.as_str().unwrap_or("-"),
                e["outputs"],
                e["positive"],
                e["rate"].as_f64().unwrap_or(0.0)
            );
            outln!(
                "spawn threshold: {:.2}; pending spawns: {}",
                status.spawn_state["threshold"].as_f64().unwrap_or(0.5),
                status.pending_spawns.len()
            );
            for p in &status.pending_spawns {
                outln!("  {} {}", p["spawnId"].as_str().unwrap_or("?"), p["task"].as_str().unwrap_or(""));
            }
            outln!("playbook: {} lines", status.playbook_lines);
            outln!("stage outcomes (24 h):");
            for (stage, counts) in &status.stage_outcomes {
                let counts: Vec<String> = counts.iter().map(|(k, v)| format!("{k} {v}")).collect();
                outln!("  {stage}: {}", counts.join(", "));
            }
            outln!(
                "model calls (24 h): {} ({} prompt + {} completion tokens)",
                status.llm["calls"],
                status.llm["promptTokens"],
                status.llm["completionTokens"]
            );
            Ok(())
        }
        ReflectCommand::Signals { idle } => stage(ctx, &settings, now, "signals", idle.then_some(true)),
        ReflectCommand::Mine => stage(ctx, &settings, now, "mine", None),
        ReflectCommand::Curate => stage(ctx, &settings, now, "curate", None),
        ReflectCommand::Insight => stage(ctx, &settings, now, "insight", None),
    }
}

/// `mneme search` embeds the chunks without a vector for at most this long (a first search of
/// a large workspace would otherwise take minutes); the rest are found by words until the
/// daemon or `mneme reindex` embeds them.
const SEARCH_EMBEDDING: file_index::Embedding =
    file_index::Embedding { background: false, budget: Some(std::time::Duration::from_secs(3)) };

pub fn search(ctx: &Invocation, args: SearchArgs) -> Result<()> {
    if mneme_core::query::fts5_expression(&args.query).is_none() {
        return Err(input(format!("the query {:?} has no word to search for", args.query)));
    }
    if args.limit == 0 {
        return Err(input("--limit must be at least 1"));
    }
    let settings = crate::workspace::settings(ctx, args.dir.as_deref())?;
    let (door, lexical_only) = if args.lexical { (ctx.door(false)?, None) } else { ctx.door_semantic()? };
    let ranking = match (args.semantic, args.lexical) {
        (true, _) => {
            if let Some(why) = &lexical_only {
                return Err(input(format!(
                    "--semantic needs the embedding model ({why}); run `mneme model install`, or leave out --semantic"
                )));
            }
            FileRanking::Semantic
        }
        (_, true) => FileRanking::Lexical,
        _ => FileRanking::Auto,
    };
    let owner = door.owner()?;
    let refreshed = if args.no_refresh { None } else { Some(file_index::sync(&owner, &settings.dir, None, SEARCH_EMBEDDING)?) };
    let found = file_index::search(&owner, &args.query, args.limit, ranking, door.ops.now())?;
    if ctx.json {
        return print_json(
            &serde_json::json!({ "workspace": settings.dir, "ranking": found.ranking, "hits": found.hits, "refreshed": refreshed }),
        );
    }
    if found.hits.is_empty() {
        outln!("no matches in {}", settings.dir.display());
    }
    for h in &found.hits {
        let c = &h.hit.chunk;
        let heading = if c.heading.is_empty() { String::new() } else { format!("  ({})", c.heading) };
        outln!("{}:{}-{}{}  [{}, {}]", c.path, c.start_line, c.end_line, heading, h.memory_type.as_str(), h.freshness.as_str());
        outln!("    {}", c.snippet.replace('\n', " "));
        for r in &h.hit.related {
            let heading = if r.heading.is_empty() { String::new() } else { format!(" ({})", r.heading) };
            outln!("    related: {}{heading}", r.path);
        }
    }
    if let Some(why) = lexical_only.filter(|_| !args.lexical) {
        outln!("(by words only: {why})");
    } else if let Some(n) = refreshed.as_ref().map(|r| r.unembedded).filter(|n| *n > 0 && !args.lexical) {
        outln!("({n} chunks have no vector yet and were found by words only; the daemon embeds them, or run `mneme reindex`)");
    }
    Ok(())
}
