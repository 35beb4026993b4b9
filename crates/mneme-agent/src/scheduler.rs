//! The scheduler: tasks persisted in the store (`scheduled_tasks`, the JSON of
//! `mneme_workspace::schedule::Task`), the built-in tasks installed once, and running what
//! is due. The daemon calls [`run_due`] on its timer; `mneme schedule run-due` calls it once.
//!
//! What a run does depends on the action: rotation and the consolidation report work on the
//! workspace files directly; the context check and plain messages become *dispatches*,
//! instructions the agent's next hook (`mneme hook session-start` / `prompt-submit`) hands
//! to the agent in priority order. Every run is logged (`task_runs`) with its outcome, in
//! the same transaction that moves the task's anchor, so a crash never runs a task twice
//! and never loses a run's record.
//!
//! Due rules (in `mneme_workspace::schedule`): a task is due once its first slot after its
//! last run (or creation) has passed; missed slots during downtime make it due once.
//! Require-idle tasks wait until the agent has been idle for `workspace.idle_after_secs`.

use jiff::Timestamp;
use mneme_core::CoreError;
use mneme_reflect::engine::Reflector;
use mneme_service::{Owner, ServiceError, ServiceResult, TaskRow};
use mneme_workspace::WorkspaceSettings;
use mneme_workspace::schedule::{self, Priority, Task, TaskAction, Trigger};
use serde::Serialize;

/// `meta` flag: the built-in tasks were installed (so removing one sticks).
const BUILTINS_FLAG: &str = "scheduler_builtins_installed";
/// `meta` flag: the reflection heartbeat task was installed (stores created before it
/// existed get it once, like the others).
const REFLECTION_FLAG: &str = "scheduler_reflection_installed";
/// `meta` flag: the inner life's jobs were installed.
const INNER_FLAG: &str = "scheduler_inner_installed";

/// A task as `mneme schedule list` shows it.
#[derive(Debug, Clone, Serialize)]
pub struct TaskView {
    pub name: String,
    /// `cron 0 0 * * *` or `every 30m`.
    pub trigger: String,
    pub action: TaskAction,
    pub priority: u8,
    pub require_idle: bool,
    pub enabled: bool,
    pub builtin: bool,
    pub created: Timestamp,
    pub last_run: Option<Timestamp>,
    /// When it is (or became) due next.
    pub due_at: Option<Timestamp>,
    /// Due at the time asked about (ignoring idleness).
    pub due: bool,
}

/// What one run did.
#[derive(Debug, Clone, Serialize)]
pub struct RunOutcome {
    pub task: String,
    pub at: Timestamp,
    pub ok: bool,
    /// What happened, or why it failed.
    pub detail: String,
    /// The instruction queued for the agent, if any.
    pub dispatched: Option<String>,
}

/// The result of a `run_due` pass.
#[derive(Debug, Clone, Serialize)]
pub struct DuePass {
    pub at: Timestamp,
    /// Whether the agent counted as idle.
    pub idle: bool,
    pub ran: Vec<RunOutcome>,
    /// Due tasks that wait because they require idle and the agent is active.
    pub waiting_for_idle: Vec<String>,
}

fn invalid(field: &'static str, reason: impl Into<String>) -> ServiceError {
    ServiceError::Invalid(CoreError::invalid(field, reason))
}

fn to_row(task: &Task, builtin: bool) -> ServiceResult<TaskRow> {
    let spec = serde_json::to_string(task).map_err(|e| invalid("task", e.to_string()))?;
    Ok(TaskRow { name: task.name.clone(), spec, builtin })
}

fn from_row(row: &TaskRow) -> ServiceResult<Task> {
    serde_json::from_str(&row.spec)
        .map_err(|e| ServiceError::Precondition(format!("scheduled task {:?} is stored in a form this build cannot read: {e}", row.name)))
}

/// Installs the built-in tasks the first time (and never again, so a removed one stays removed).
pub fn ensure_builtins(owner: &Owner<'_>, now: Timestamp) -> ServiceResult<()> {
    for (flag, tasks) in [
        (BUILTINS_FLAG, schedule::builtin_tasks(now)),
        (REFLECTION_FLAG, vec![schedule::reflection_task(now)]),
        (INNER_FLAG, schedule::inner_tasks(now)),
    ] {
        if owner.meta_value(flag)?.is_some() {
            continue;
        }
        let existing: Vec<String> = owner.task_rows()?.into_iter().map(|r| r.name).collect();
        let rows = tasks.iter().filter(|t| !existing.contains(&t.name)).map(|t| to_row(t, true)).collect::<ServiceResult<Vec<_>>>()?;
        owner.put_task_rows(&rows, Some((flag, &now.as_millisecond().to_string())))?;
    }
    Ok(())
}

/// Every task (built-ins installed first), with whether it is built in.
pub fn tasks(owner: &Owner<'_>, now: Timestamp) -> ServiceResult<Vec<(Task, bool)>> {
    ensure_builtins(owner, now)?;
    owner.task_rows()?.iter().map(|row| Ok((from_row(row)?, row.builtin))).collect()
}

/// The tasks as `schedule list` shows them, due status evaluated at `now`.
pub fn list(owner: &Owner<'_>, settings: &WorkspaceSettings, now: Timestamp) -> ServiceResult<Vec<TaskView>> {
    Ok(tasks(owner, now)?
        .into_iter()
        .map(|(task, builtin)| {
            let due_at = task.due_at(&settings.timezone);
            TaskView {
                name: task.name.clone(),
                trigger: task.trigger.to_string(),
                action: task.action.clone(),
                priority: task.priority.into(),
                require_idle: task.require_idle,
                enabled: task.enabled,
                builtin,
                created: task.created,
                last_run: task.last_run,
                due_at,
                due: task.enabled && due_at.is_some_and(|d| d <= now),
            }
        })
        .collect())
}

/// What `schedule add` takes.
#[derive(Debug, Clone)]
pub struct NewTask {
    pub name: String,
    /// Exactly one of `cron` and `every`.
    pub cron: Option<String>,
    pub every: Option<String>,
    /// The instruction delivered to the agent when it runs; or one of the built-in actions
    /// (`rotate`, `consolidate`, `context-check`) via `action`.
    pub message: Option<String>,
    pub action: Option<String>,
    pub priority: u8,
    pub require_idle: bool,
    /// Replace a task of the same name instead of refusing.
    pub replace: bool,
}

/// Adds (or with `replace`, replaces) a task. Errors name the bad field.
pub fn add(owner: &Owner<'_>, new: NewTask, now: Timestamp) -> ServiceResult<Task> {
    ensure_builtins(owner, now)?;
    let name = new.name.trim();
    if name.is_empty() || name.len() > 64 || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.') {
        return Err(invalid("name", format!("{name:?} must be 1–64 characters of letters, digits, `-`, `_` or `.`")));
    }
    let to_invalid = |field| move |e: mneme_workspace::WorkspaceError| invalid(field, e.to_string());
    let trigger = match (&new.cron, &new.every) {
        (Some(cron), None) => Trigger::cron(cron).map_err(to_invalid("--cron"))?,
        (None, Some(every)) => Trigger::every(every).map_err(to_invalid("--every"))?,
        _ => return Err(invalid("schedule", "give exactly one of --cron and --every")),
    };
    let action = match (new.action.as_deref(), new.message) {
        (Some(_), Some(_)) => return Err(invalid("action", "give either --action or --message, not both")),
        (None, Some(text)) if text.trim().is_empty() => return Err(invalid("message", "must not be empty")),
        (None, Some(text)) => TaskAction::Message(text.trim().to_string()),
        (Some("rotate"), None) => TaskAction::RotateSessions,
        (Some("consolidate"), None) => TaskAction::ConsolidationReport,
        (Some("context-check"), None) => TaskAction::ContextCheck,
        (Some("reflect"), None) => TaskAction::ReflectionTick,
        (Some(other), None) => return Err(invalid("action", format!("{other:?} is not rotate, consolidate, context-check or reflect"))),
        (None, None) => return Err(invalid("action", "give --message TEXT or --action rotate|consolidate|context-check|reflect")),
    };
    let priority = Priority::try_from(new.priority).map_err(to_invalid("--priority"))?;
    let existing = owner.task_rows()?.into_iter().find(|r| r.name == name);
    if existing.is_some() && !new.replace {
        return Err(ServiceError::Precondition(format!("a task named {name:?} exists; use --replace to change it")));
    }
    let task = Task {
        name: name.to_string(),
        trigger,
        action,
        priority,
        require_idle: new.require_idle,
        enabled: true,
        created: now,
        last_run: None,
    };
    owner.put_task_rows(&[to_row(&task, existing.is_some_and(|r| r.builtin))?], None)?;
    Ok(task)
}

/// Removes a task by name (built-ins too; they are not reinstalled).
pub fn remove(owner: &Owner<'_>, name: &str, now: Timestamp) -> ServiceResult<()> {
    ensure_builtins(owner, now)?;
    owner.remove_task_row(name)
}

/// Whether the agent counts as idle at `now`: no hook activity within `idle_after`.
pub fn is_idle(owner: &Owner<'_>, settings: &WorkspaceSettings, now: Timestamp) -> ServiceResult<bool> {
    let idle_after = jiff::SignedDuration::try_from(settings.idle_after).unwrap_or(jiff::SignedDuration::MAX);
    Ok(match owner.last_activity()? {
        None => true,
        Some(at) => now.duration_since(at) >= idle_after,
    })
}

/// Runs every task due at `now`, in priority order. `idle` overrides the activity check
/// (`None` = decide from the agent's last activity).
pub fn run_due(
    owner: &Owner<'_>,
    settings: &WorkspaceSettings,
    reflector: &Reflector,
    now: Timestamp,
    idle: Option<bool>,
) -> ServiceResult<DuePass> {
    let idle = match idle {
        Some(idle) => idle,
        None => is_idle(owner, settings, now)?,
    };
    let (all, builtin): (Vec<Task>, Vec<bool>) = tasks(owner, now)?.into_iter().unzip();
    let waiting_for_idle = if idle {
        Vec::new()
    } else {
        all.iter().filter(|t| t.require_idle && t.is_due(now, true, &settings.timezone)).map(|t| t.name.clone()).collect()
    };
    let mut ran = Vec::new();
    for task in schedule::due_tasks(&all, now, idle, &settings.timezone) {
        let is_builtin = all.iter().position(|t| t.name == task.name).is_some_and(|i| builtin[i]);
        ran.push(run_task(owner, settings, reflector, task.clone(), is_builtin, now)?);
    }
    Ok(DuePass { at: now, idle, ran, waiting_for_idle })
}

/// What `run_due` would run at `now`, without running anything or recording a run (each
/// entry's detail says "would run").
pub fn due_now(owner: &Owner<'_>, settings: &WorkspaceSettings, now: Timestamp, idle: Option<bool>) -> ServiceResult<DuePass> {
    let idle = match idle {
        Some(idle) => idle,
        None => is_idle(owner, settings, now)?,
    };
    let all: Vec<Task> = tasks(owner, now)?.into_iter().map(|(t, _)| t).collect();
    let waiting_for_idle = if idle {
        Vec::new()
    } else {
        all.iter().filter(|t| t.require_idle && t.is_due(now, true, &settings.timezone)).map(|t| t.name.clone()).collect()
    };
    let ran = schedule::due_tasks(&all, now, idle, &settings.timezone)
        .into_iter()
        .map(|t| RunOutcome { task: t.name.clone(), at: now, ok: true, detail: "would run (dry run)".into(), dispatched: None })
        .collect();
    Ok(DuePass { at: now, idle, ran, waiting_for_idle })
}

/// Runs one task now (due or not) and records the run.
pub fn run_task(
    owner: &Owner<'_>,
    settings: &WorkspaceSettings,
    reflector: &Reflector,
    mut task: Task,
    builtin: bool,
    now: Timestamp,
) -> ServiceResult<RunOutcome> {
    // The row is only updated if nobody removed or replaced the task during the run.
    let read_spec = to_row(&task, builtin)?.spec;
    let (ok, detail, dispatch) = match perform(owner, settings, reflector, &task.action, now) {
        Ok((detail, dispatch)) => (true, detail, dispatch),
        Err(error) => (false, error, None),
    };
    task.mark_run(now);
    let dispatched = owner.record_task_run(
        &to_row(&task, builtin)?,
        &read_spec,
        now,
        ok,
        &detail,
        dispatch.as_deref().map(|text| (u8::from(task.priority), text)),
    )?;
    // Every scheduler action in the workspace's command log (sinain §2.7).
    if settings.dir.join(mneme_workspace::paths::MEMORY_DIR).is_dir() {
        let detail = Some(serde_json::json!({ "ok": ok, "detail": detail }));
        let entry = mneme_workspace::journal::CommandLogEntry::new(now, task.name.clone(), "scheduler", detail);
        if let Err(e) = mneme_workspace::journal::log_command(settings, &entry) {
            tracing::warn!(task = %task.name, error = %e, "the command log was not written");
        }
    }
    Ok(RunOutcome { task: task.name, at: now, ok, detail, dispatched: dispatched.then_some(dispatch).flatten() })
}

/// Does a task's work. Returns what happened and the instruction for the agent, if any.
fn perform(
    owner: &Owner<'_>,
    settings: &WorkspaceSettings,
    reflector: &Reflector,
    action: &TaskAction,
    now: Timestamp,
) -> Result<(String, Option<String>), String> {
    match action {
        TaskAction::ReflectionTick => {
            let report = match mneme_reflect::tick::tick(reflector, owner, settings, now, &Default::default()) {
                Ok(report) => report,
                // A store used without a file workspace: nothing to curate, not a failure.
                Err(e @ mneme_reflect::ReflectError::NoWorkspace(_)) => return Ok((format!("skipped: {e}"), None)),
                Err(e) => return Err(e.to_string()),
            };
            let line = &report.line;
            let detail = format!(
                "{} (action {}, directive {}, playbook {} lines)",
                report.status,
                line["actionTaken"]["kind"].as_str().unwrap_or("none"),
                line["feedback"]["curateDirective"].as_str().unwrap_or("?"),
                line["playbookChanges"]["playbookLines"]
            );
            // The tick queues its own instructions (with their spawn ids).
            Ok((detail, None))
        }
        TaskAction::InnerJob(job) => {
            if !reflector.inner.jobs {
                return Ok(("skipped: [inner] jobs = false".into(), None));
            }
            let report = match mneme_reflect::inner::run(reflector, owner, settings, *job, now, &Default::default()) {
                Ok(report) => report,
                Err(e @ mneme_reflect::ReflectError::NoWorkspace(_)) => return Ok((format!("skipped: {e}"), None)),
                Err(e) => return Err(e.to_string()),
            };
            let mut detail = report.status.to_string();
            if let Some(reason) = &report.reason {
                detail.push_str(&format!(": {reason}"));
            }
            if !report.wrote.is_empty() {
                detail.push_str(&format!(" (wrote {})", report.wrote.join(", ")));
            }
            if !report.refused.is_empty() {
                detail.push_str(&format!(" (refused {})", report.refused.len()));
            }
            // The job queues its own instruction.
            Ok((detail, None))
        }
        TaskAction::RotateSessions => {
            let report = mneme_workspace::rotate::rotate(settings, now).map_err(|e| e.to_string())?;
            Ok((serde_json::to_string(&report).unwrap_or_default(), None))
        }
        TaskAction::ConsolidationReport => {
            let reads = crate::file_index::file_reads(owner).map_err(|e| e.to_string())?;
            let report = mneme_workspace::consolidate::consolidate_with_reads(settings, now, &reads).map_err(|e| e.to_string())?;
            let detail = format!(
                "{} recommendation(s), {} session log(s) to archive, {} file(s) aging or fading",
                report.recommendations.len(),
                report.sessions.archive_candidates.len(),
                report.freshness.len()
            );
            let dispatch = (!report.recommendations.is_empty()).then(|| {
                let mut text = String::from("[Memory Consolidation] The weekly report recommends:\n");
                for r in &report.recommendations {
                    text.push_str(&format!("- {r}\n"));
                }
                text.push_str("Run `mneme workspace consolidate` for the full report; `--apply` moves old session logs to archive/.");
                text
            });
            Ok((detail, dispatch))
        }
        TaskAction::ContextCheck => Ok((
            "context check requested".into(),
            Some(format!(
                "[Context Check] Check how full your context window is (e.g. /context). At {}% or more, save your working state \
                 before compaction: update state.md (current focus, pending tasks) and append important events to \
                 sessions/current.md.",
                settings.flush_at_percent
            )),
        )),
        TaskAction::Message(text) => Ok(("message queued".into(), Some(text.clone()))),
    }
}
