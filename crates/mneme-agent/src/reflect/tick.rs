//! One heartbeat tick (sinain §6), offline: setup, Phase 1 (git backup), Phase 2 (signals
//! and the recommended action), Phase 3 (mining, feedback, curation, the Step-4 log line,
//! insight). `HEARTBEAT_OK` only once the Step-4 line is durably appended; every file
//! write before it is atomic, so a crash leaves no half-written file and the next tick
//! proceeds. One tick at a time per workspace (`.mneme-reflect.lock`).
//!
//! Stages not built yet (issue 16 in progress) are recorded as `skipped` with the reason,
//! in the line itself, so nothing pretends to have run: git backup, the miner, the
//! model-backed stages and the insight synthesizer.

use std::collections::BTreeMap;
use std::path::PathBuf;

use jiff::{SignedDuration, Timestamp};
use mneme_core::{MemoryType, Payload};
use mneme_service::{Access, MemoryService, RetrieveRequest};
use mneme_workspace::playbook::{Playbook, parse_module_stack, write_curated};
use mneme_workspace::{WorkspaceSettings, paths, playbook_log};
use serde::Serialize;
use serde_json::{Value, json};

use super::ReflectError;
use super::actions::{daily_minimum_due, settle_spawns};
use super::curator::{CurateInput, curate_offline};
use super::feedback::figures;
use super::signals::{ActionKind, fallback};

/// The agent is idle after this long without hook activity (the seed's 30 minutes).
pub const IDLE_AFTER: SignedDuration = SignedDuration::from_mins(30);
/// Days of log the feedback stage reads.
pub const FEEDBACK_DAYS: i64 = 7;
/// Days of tick lines whose stale-item actions count.
pub const STALE_ACTION_DAYS: i64 = 30;
/// Records of the last day the setup looks at (the seed's last 50 session events).
pub const HISTORY_LIMIT: usize = 50;

/// How a tick is run.
#[derive(Debug, Clone, Default)]
pub struct TickOptions {
    /// Treat the agent as idle (or not) instead of deciding from its activity.
    pub idle: Option<bool>,
    /// A session summary to use instead of the one built from the history.
    pub summary: Option<String>,
    /// Compute everything, write nothing (no playbook, log line or dispatch).
    pub dry_run: bool,
}

/// What a tick did.
#[derive(Debug, Clone, Serialize)]
pub struct TickReport {
    /// `HEARTBEAT_OK`, or `DRY_RUN`.
    pub status: &'static str,
    #[serde(rename = "tickId")]
    pub tick_id: String,
    /// The Step-4 log line (written unless a dry run).
    pub line: Value,
    /// The log file written (workspace-relative).
    pub log: Option<PathBuf>,
}

fn stage(status: &str, reason: Option<&str>) -> Value {
    match reason {
        Some(r) => json!({ "status": status, "reason": r }),
        None => json!({ "status": status }),
    }
}

/// The one-tick-per-workspace lock; released when dropped.
struct TickLock(std::fs::File);

impl TickLock {
    fn acquire(settings: &WorkspaceSettings) -> Result<TickLock, ReflectError> {
        // The heartbeat curates a workspace the user set up; it never creates one.
        if !settings.dir.is_dir() {
            return Err(ReflectError::NoWorkspace(settings.dir.clone()));
        }
        let path = paths::resolve(&settings.dir, ".mneme-reflect.lock")?;
        let file = std::fs::File::options()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(|source| mneme_workspace::WorkspaceError::Io { action: "cannot open", path: path.clone(), source })?;
        match file.try_lock() {
            Ok(()) => Ok(TickLock(file)),
            Err(std::fs::TryLockError::WouldBlock) => Err(ReflectError::Busy(path)),
            Err(std::fs::TryLockError::Error(source)) => {
                Err(mneme_workspace::WorkspaceError::Io { action: "cannot lock", path: path.clone(), source }.into())
            }
        }
    }
}

impl Drop for TickLock {
    fn drop(&mut self) {
        let _ = self.0.unlock();
    }
}

/// Runs one tick at `now`.
pub fn tick(
    service: &MemoryService,
    settings: &WorkspaceSettings,
    now: Timestamp,
    options: &TickOptions,
) -> Result<TickReport, ReflectError> {
    let started = std::time::Instant::now();
    let _lock = TickLock::acquire(settings)?;
    let tick_id = format!("t{}", now.strftime("%Y%m%dT%H%M%SZ"));
    let today = settings.today(now);
    let mut stages = serde_json::Map::new();

    // ---- setup: history, idle, session summary, module stack ----
    let recent = service.retrieve(
        &RetrieveRequest {
            types: vec![MemoryType::Episodic],
            since: Some(now - SignedDuration::from_hours(24)),
            limit: HISTORY_LIMIT,
            ..Default::default()
        },
        &Access::owner(),
    )?;
    let mut messages = 0usize;
    let mut tools: BTreeMap<String, usize> = BTreeMap::new();
    let mut failure_modes = Vec::new();
    for hit in &recent {
        match &hit.record.payload {
            Some(Payload::Event(_)) => messages += 1,
            Some(Payload::ToolOutput(t)) => {
                *tools.entry(t.tool.clone()).or_default() += 1;
                if let Some(e) = &t.error {
                    failure_modes.push(crate::hooks::normalize_error(e));
                }
            }
            _ => {}
        }
    }
    let idle = match options.idle {
        Some(idle) => idle,
        None => service.last_activity()?.is_none_or(|at| now.duration_since(at) >= IDLE_AFTER),
    };
    let summary = options.summary.clone().unwrap_or_else(|| {
        let mut top: Vec<(&String, &usize)> = tools.iter().collect();
        top.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
        let top: Vec<String> = top.iter().take(3).map(|(t, n)| format!("{t} ×{n}")).collect();
        format!(
            "{messages} messages and {} tool calls in the last 24 hours{}; {} failed.",
            tools.values().sum::<usize>(),
            if top.is_empty() { String::new() } else { format!(" (top: {})", top.join(", ")) },
            failure_modes.len()
        )
    });
    let effective =
        paths::resolve(&settings.dir, paths::EFFECTIVE_PLAYBOOK).ok().and_then(|p| std::fs::read_to_string(p).ok()).unwrap_or_default();
    let module_stack = parse_module_stack(&effective);
    stages.insert("setup".into(), stage("ok", None));

    // ---- Phase 1: git backup ----
    stages.insert("git".into(), stage("skipped", Some("git backup is not built yet")));

    // The log and the playbook as they were before this tick.
    let lines = playbook_log::read(settings, today - jiff::Span::new().days(STALE_ACTION_DAYS), today)?;
    let playbook_path = paths::resolve(&settings.dir, paths::PLAYBOOK)?;
    let old = std::fs::read_to_string(&playbook_path).unwrap_or_default();
    let base = if old.is_empty() { Playbook::fresh() } else { Playbook::parse(&old) };
    let mut stale_actions: BTreeMap<String, u32> = BTreeMap::new();
    let mut acted_today: Vec<String> = Vec::new();
    for line in lines.iter().filter(|l| l.kind == "tick") {
        if let Some(item) = line.value["actionTaken"]["staleItem"].as_str() {
            let key = mneme_workspace::playbook::normalize(item);
            if line.ts.is_some_and(|ts| ts > now - SignedDuration::from_hours(24)) {
                acted_today.push(key.clone());
            }
            *stale_actions.entry(key).or_default() += 1;
        }
    }
    // Items tracked since two days or more, not yet deferred: each needs an action, at
    // most one a day (the seed says "mandatory action" without a rate; one a day keeps a
    // stale item from taking three ticks in a row and being deferred within the hour).
    let stale_due: Vec<String> = base
        .patterns()
        .into_iter()
        .filter_map(|(_, p)| {
            let since = p.since?;
            let key = p.key();
            let acted = stale_actions.get(&key).copied().unwrap_or(0);
            let due = (today - since).get_days() >= super::curator::STALE_AFTER_DAYS
                && acted < super::curator::ACTIONS_BEFORE_DEFERRAL
                && !acted_today.contains(&key);
            due.then_some(p.text)
        })
        .collect();

    // ---- Phase 2: signals, spawn outcomes, the action ----
    let report = fallback(&failure_modes, idle);
    stages.insert("signals".into(), stage("fallback", Some("no model-backed analyzer yet: offline rules")));
    let (spawn_outcomes, spawn_state) = settle_spawns(&lines);
    let daily_minimum = !idle && daily_minimum_due(&lines, now, service.last_activity()?);
    let action = &report.recommended_action;
    let spawn = |task: &str, extra: Value| -> Result<Value, ReflectError> {
        let spawn_id = format!("{tick_id}-spawn");
        let text = format!(
            "Spawn a subagent to: {task}. When it is done, report with `mneme reflect spawn-result {spawn_id} useful|ignored|error`."
        );
        let queued = !options.dry_run && service.queue_dispatch(&format!("reflect:spawn:{spawn_id}"), 1, &text, now)?;
        let mut taken =
            json!({ "kind": "sessions_spawn", "spawnId": spawn_id, "task": task, "threshold": spawn_state.threshold, "queued": queued });
        if let (Some(t), Some(e)) = (taken.as_object_mut(), extra.as_object()) {
            t.extend(e.clone());
        }
        Ok(taken)
    };
    let action_taken = if idle {
        json!({ "kind": "none", "reason": "idle: actions wait for an active tick" })
    } else if let Some(item) = stale_due.first() {
        // A stale item's action is mandatory, ahead of the analyzer's.
        spawn(&format!("Resolve stale playbook item: {item}"), json!({ "staleItem": item, "mandatory": true }))?
    } else if action.action == ActionKind::Skip {
        json!({ "kind": "none", "reason": "nothing to act on", "dailyMinimum": if daily_minimum { "no candidate" } else { "not due" } })
    } else if action.confidence >= spawn_state.threshold {
        spawn(&action.task, json!({}))?
    } else if daily_minimum {
        spawn(&action.task, json!({ "dailyMinimum": true }))?
    } else {
        json!({ "kind": "none", "reason": format!("confidence {:.2} below the threshold {:.2}", action.confidence, spawn_state.threshold) })
    };

    // ---- Phase 3, step 1: mining ----
    stages.insert("mine".into(), stage("skipped", Some(if idle { "the memory miner is not built yet" } else { "not idle" })));

    // ---- step 2: feedback ----
    let feedback = figures(&lines, now - SignedDuration::from_hours(24 * FEEDBACK_DAYS), true);
    stages.insert("feedback".into(), stage("fallback", Some("mechanical figures only (no model)")));

    // ---- step 3: curation ----
    let fixable: Vec<String> = report.repeated_failures.iter().map(|(mode, _)| format!("Recurring error: {mode}")).collect();
    let mut curation = curate_offline(&CurateInput {
        playbook: &base,
        directive: feedback.directive,
        new_patterns: &[],
        fixable: &fixable,
        stale_actions: &stale_actions,
        today,
    });
    curation.playbook.set_effectiveness(&feedback.effectiveness);
    let archive = if options.dry_run { None } else { write_curated(settings, &old, &curation.playbook, now)? };
    if !options.dry_run {
        // What stages and the next session read: regenerated after every curation.
        mneme_workspace::playbook::generate_effective(settings)?;
    }
    stages.insert("curate".into(), stage("fallback", Some("offline curation (no model)")));

    // ---- step 5's stage record (it runs after the log line) ----
    stages.insert("insight".into(), stage("skipped", Some("the insight synthesizer is not built yet")));

    // ---- step 4: the log line; HEARTBEAT_OK only once it is appended ----
    let line = json!({
        "kind": "tick",
        "v": 1,
        "ts": now.to_string(),
        "tickId": tick_id,
        "idle": idle,
        "sessionSummary": summary,
        "moduleStack": module_stack,
        "git": { "status": "skipped" },
        "signals": report.signals,
        "recommendedAction": report.recommended_action,
        "actionTaken": action_taken,
        "spawnOutcomes": spawn_outcomes,
        "spawnState": spawn_state,
        "mining": Value::Null,
        "feedback": {
            "feedbackScores": { "avg": feedback.avg, "high": feedback.high, "low": feedback.low },
            "effectiveness": feedback.effectiveness,
            "unscored": feedback.unscored,
            "curateDirective": feedback.directive,
        },
        "playbookChanges": {
            "changes": curation.changes,
            "staleItemActions": curation.stale_item_actions,
            "staleDue": curation.stale_due,
            "playbookLines": curation.playbook_lines,
            "archive": archive,
            "written": !options.dry_run,
        },
        "stages": stages,
        "durationMs": started.elapsed().as_millis() as u64,
    });
    if options.dry_run {
        return Ok(TickReport { status: "DRY_RUN", tick_id, line, log: None });
    }
    let log = playbook_log::append(settings, now, &line)?;
    Ok(TickReport { status: "HEARTBEAT_OK", tick_id, line, log: Some(log) })
}
