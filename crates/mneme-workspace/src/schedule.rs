//! Scheduler logic, pure (no clock, no storage): triggers (`Trigger::Cron` evaluated in the
//! workspace's zone with croner, `Trigger::Every` an interval), tasks with a priority and a
//! require-idle flag, and the choice of what is due at a given instant. The store persists
//! tasks; the daemon calls `due_tasks` on its timer, runs the result in order and records
//! each run with `Task::mark_run`.
//!
//! Due rule: a task is due when the first trigger slot after its anchor (its last run, or
//! its creation if it never ran) is at or before now. Only that one slot counts, so a task
//! whose slots were missed during downtime is due once, and after it runs its anchor is the
//! run time, so the missed slots are gone rather than replayed.
//!
//! Priorities (zylos seed §12): 1 memory, 2 maintenance, 3 normal. Due tasks are ordered by
//! priority, then by how long they have been due, then by name.

use std::fmt;
use std::str::FromStr as _;

use jiff::tz::TimeZone;
use jiff::{SignedDuration, Timestamp};
use serde::{Deserialize, Serialize};

use crate::error::{WorkspaceError, WorkspaceResult};

/// When a task fires.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Trigger {
    /// A cron expression (5 fields, or 6 with seconds first; names like `SUN`, `@daily`),
    /// evaluated in the workspace's zone.
    Cron(CronExpr),
    /// A fixed interval after the anchor (positive, at least one second).
    Every(SignedDuration),
}

/// A validated cron expression.
#[derive(Debug, Clone)]
pub struct CronExpr {
    // Invariant: `parsed` is `source` parsed by croner (boxed: the parsed pattern is large).
    source: String,
    parsed: Box<croner::Cron>,
}

/// Task priority (the seed's three levels).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "u8", into = "u8")]
pub enum Priority {
    /// 1: memory operations (sync, pre-compaction flush, context check).
    Memory = 1,
    /// 2: maintenance (rotation, consolidation).
    Maintenance = 2,
    /// 3: normal operations.
    Normal = 3,
}

/// What a task does when it runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", content = "text", rename_all = "snake_case")]
pub enum TaskAction {
    /// Rotate `sessions/current.md`.
    RotateSessions,
    /// Produce the consolidation report (for the agent to act on).
    ConsolidationReport,
    /// Ask the agent for its context usage (the pre-compaction flush follows at ≥ 70 %).
    ContextCheck,
    /// Deliver an instruction to the agent.
    Message(String),
    /// Run one reflection heartbeat tick (the agent engine's `reflect::tick`).
    ReflectionTick,
    /// Run one inner-life job (the brain loop or an extension; the agent engine's `inner::run`).
    InnerJob(crate::inner::Job),
}

/// A scheduled task.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Task {
    /// Unique name (`session-rotation-daily`).
    pub name: String,
    pub trigger: Trigger,
    pub action: TaskAction,
    pub priority: Priority,
    /// Only run while the agent is idle; a due task waits (stays due) until then.
    pub require_idle: bool,
    pub enabled: bool,
    /// When the task was added: the anchor until its first run.
    pub created: Timestamp,
    /// When it last ran (the run's time, not the slot's).
    pub last_run: Option<Timestamp>,
}

/// Name of the built-in daily session rotation.
pub const ROTATION_TASK: &str = "session-rotation-daily";
/// Name of the built-in weekly consolidation report.
pub const CONSOLIDATION_TASK: &str = "memory-consolidation-weekly";
/// Name of the built-in context check.
pub const CONTEXT_CHECK_TASK: &str = "context-check";
/// Name of the built-in reflection heartbeat.
pub const REFLECTION_TASK: &str = "reflection-heartbeat";

/// The reflection heartbeat (sinain §6): every 30 minutes, idle or not (an idle tick
/// mines and curates, an active one acts). Installed separately from [`builtin_tasks`]
/// so stores that already have those get it too.
pub fn reflection_task(created: Timestamp) -> Task {
    Task {
        name: REFLECTION_TASK.to_owned(),
        trigger: Trigger::Every(SignedDuration::from_mins(30)),
        action: TaskAction::ReflectionTick,
        priority: Priority::Maintenance,
        require_idle: false,
        enabled: true,
        created,
        last_run: None,
    }
}

/// The inner life's jobs (inner-life seed): the brain loop at 09:00, 14:00 and 19:00; the
/// dream at 03:00 once idle; the chronicle at 21:00; evolve on Monday and Thursday at
/// 10:00, once idle; reflect and memory every 30 minutes, each running only when its own
/// trigger holds (a correction or a repeated problem; a session that has ended).
pub fn inner_tasks(created: Timestamp) -> Vec<Task> {
    use crate::inner::Job;
    let task = |job: Job, trigger: Trigger, require_idle| Task {
        name: job.task_name().to_owned(),
        trigger,
        action: TaskAction::InnerJob(job),
        priority: Priority::Normal,
        require_idle,
        enabled: true,
        created,
        last_run: None,
    };
    let cron = |e: &str| Trigger::cron(e).expect("the built-in inner-life crons are valid");
    vec![
        task(Job::BrainLoop, cron("0 9,14,19 * * *"), false),
        task(Job::Reflect, Trigger::Every(SignedDuration::from_mins(30)), false),
        task(Job::Memory, Trigger::Every(SignedDuration::from_mins(30)), true),
        task(Job::Dream, cron("0 3 * * *"), true),
        task(Job::Chronicle, cron("0 21 * * *"), false),
        task(Job::Evolve, cron("0 10 * * 1,4"), true),
    ]
}

/// The built-in tasks (zylos seed §11): rotation daily at 00:00, the consolidation report
/// weekly on Sunday at 02:00, a context check every 30 minutes; all require idle.
pub fn builtin_tasks(created: Timestamp) -> Vec<Task> {
    let task = |name: &str, trigger, action, priority| Task {
        name: name.to_owned(),
        trigger,
        action,
        priority,
        require_idle: true,
        enabled: true,
        created,
        last_run: None,
    };
    vec![
        task(
            ROTATION_TASK,
            Trigger::cron("0 0 * * *").expect("the built-in rotation cron is valid"),
            TaskAction::RotateSessions,
            Priority::Maintenance,
        ),
        task(
            CONSOLIDATION_TASK,
            Trigger::cron("0 2 * * 0").expect("the built-in consolidation cron is valid"),
            TaskAction::ConsolidationReport,
            Priority::Maintenance,
        ),
        task(CONTEXT_CHECK_TASK, Trigger::Every(SignedDuration::from_mins(30)), TaskAction::ContextCheck, Priority::Memory),
    ]
}

impl Trigger {
    /// A cron trigger; the error names the expression and what is wrong with it.
    pub fn cron(expression: &str) -> WorkspaceResult<Self> {
        let source = expression.trim().to_owned();
        let parsed = croner::Cron::from_str(&source).map_err(|error| WorkspaceError::Schedule {
            value: expression.to_owned(),
            reason: format!("not a valid cron expression: {error}"),
        })?;
        Ok(Self::Cron(CronExpr { source, parsed: Box::new(parsed) }))
    }

    /// An interval trigger from text: `30m`, `30 minutes`, `1h 30m`, `2 hours`, `PT30M`.
    pub fn every(interval: &str) -> WorkspaceResult<Self> {
        let duration = SignedDuration::from_str(interval.trim()).map_err(|error| WorkspaceError::Schedule {
            value: interval.to_owned(),
            reason: format!("not an interval such as `30m` or `2 hours`: {error}"),
        })?;
        Self::every_duration(duration).map_err(|_| WorkspaceError::Schedule {
            value: interval.to_owned(),
            reason: "an interval must be at least one second".to_owned(),
        })
    }

    /// An interval trigger; at least one second.
    pub fn every_duration(duration: SignedDuration) -> WorkspaceResult<Self> {
        if duration < SignedDuration::from_secs(1) {
            return Err(WorkspaceError::Schedule {
                value: format!("{duration:#}"),
                reason: "an interval must be at least one second".to_owned(),
            });
        }
        Ok(Self::Every(duration))
    }

    /// The first instant strictly after `after` at which the trigger fires, cron slots
    /// read in `tz`. `None` if there is none within jiff's range.
    pub fn next_after(&self, after: Timestamp, tz: &TimeZone) -> Option<Timestamp> {
        match self {
            Self::Every(interval) => after.checked_add(*interval).ok(),
            Self::Cron(cron) => cron.parsed.find_next_occurrence(&after.to_zoned(tz.clone()), false).ok().map(|zoned| zoned.timestamp()),
        }
    }
}

impl Task {
    /// The instant the task becomes (or became) due: the first slot after its anchor.
    pub fn due_at(&self, tz: &TimeZone) -> Option<Timestamp> {
        self.trigger.next_after(self.last_run.unwrap_or(self.created), tz)
    }

    /// Whether the task may run at `now`: enabled, due, and idle if it requires it.
    pub fn is_due(&self, now: Timestamp, idle: bool, tz: &TimeZone) -> bool {
        self.enabled && (idle || !self.require_idle) && self.due_at(tz).is_some_and(|due| due <= now)
    }

    /// Records a run at `now`; the next slot counted is the first one after it.
    pub fn mark_run(&mut self, now: Timestamp) {
        self.last_run = Some(now);
    }
}

/// The next time `task` fires after `after` (its trigger's next slot; see
/// `Task::due_at` for when the task itself is due).
pub fn next_due(task: &Task, after: Timestamp, tz: &TimeZone) -> Option<Timestamp> {
    task.trigger.next_after(after, tz)
}

/// The tasks that may run at `now`, in the order to run them: priority, then the longest
/// due first, then name.
pub fn due_tasks<'a>(tasks: &'a [Task], now: Timestamp, idle: bool, tz: &TimeZone) -> Vec<&'a Task> {
    let mut due: Vec<(&Task, Timestamp)> =
        tasks.iter().filter(|task| task.is_due(now, idle, tz)).filter_map(|task| Some((task, task.due_at(tz)?))).collect();
    due.sort_by(|(a, a_due), (b, b_due)| a.priority.cmp(&b.priority).then(a_due.cmp(b_due)).then_with(|| a.name.cmp(&b.name)));
    due.into_iter().map(|(task, _)| task).collect()
}

impl CronExpr {
    /// The expression as given (trimmed).
    pub fn as_str(&self) -> &str {
        &self.source
    }
}

impl PartialEq for CronExpr {
    fn eq(&self, other: &Self) -> bool {
        self.source == other.source
    }
}

impl Eq for CronExpr {}

impl fmt::Display for Trigger {
    /// `cron 0 0 * * *` or `every 30m`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Cron(cron) => write!(f, "cron {}", cron.source),
            Self::Every(interval) => write!(f, "every {interval:#}"),
        }
    }
}

/// Triggers serialise as `{"cron": "0 0 * * *"}` or `{"every": "30m"}` and are validated
/// again when read.
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
enum TriggerRepr {
    Cron(String),
    Every(String),
}

impl Serialize for Trigger {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Self::Cron(cron) => TriggerRepr::Cron(cron.source.clone()),
            Self::Every(interval) => TriggerRepr::Every(format!("{interval:#}")),
        }
        .serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for Trigger {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        match TriggerRepr::deserialize(deserializer)? {
            TriggerRepr::Cron(expression) => Self::cron(&expression),
            TriggerRepr::Every(interval) => Self::every(&interval),
        }
        .map_err(serde::de::Error::custom)
    }
}

impl TryFrom<u8> for Priority {
    type Error = WorkspaceError;

    fn try_from(level: u8) -> WorkspaceResult<Self> {
        match level {
            1 => Ok(Self::Memory),
            2 => Ok(Self::Maintenance),
            3 => Ok(Self::Normal),
            other => Err(WorkspaceError::Schedule {
                value: other.to_string(),
                reason: "priority must be 1 (memory), 2 (maintenance) or 3 (normal)".to_owned(),
            }),
        }
    }
}

impl From<Priority> for u8 {
    fn from(priority: Priority) -> Self {
        priority as u8
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn invalid_triggers_are_refused_with_the_value_named() {
        for bad in ["", "61 * * * *", "* * *", "0 0 31 2 * * * *"] {
            let error = Trigger::cron(bad).expect_err(bad);
            assert!(error.to_string().contains(&format!("{bad:?}")), "{error}");
        }
        for bad in ["", "soon", "0s", "-5m", "500ms"] {
            assert!(Trigger::every(bad).is_err(), "{bad:?}");
        }
        assert_eq!(Trigger::every("30 minutes").expect("friendly"), Trigger::Every(SignedDuration::from_mins(30)));
        assert_eq!(Trigger::every("PT1H").expect("ISO"), Trigger::Every(SignedDuration::from_hours(1)));
        assert!(Priority::try_from(0).is_err());
        assert!(Priority::try_from(4).is_err());
    }

    #[test]
    fn triggers_round_trip_through_json() {
        for trigger in [Trigger::cron("0 2 * * 0").expect("cron"), Trigger::every("90m").expect("every")] {
            let json = serde_json::to_string(&trigger).expect("serialise");
            let back: Trigger = serde_json::from_str(&json).expect("deserialise");
            assert_eq!(back, trigger, "{json}");
        }
        assert_eq!(serde_json::to_string(&Trigger::every("30m").expect("every")).expect("json"), r#"{"every":"30m"}"#);
        assert!(serde_json::from_str::<Trigger>(r#"{"cron":"nope"}"#).is_err());
    }
}
