//! What happens to the heartbeat's actions (sinain §6.3, §6.4): spawn outcome tracking,
//! the spawn threshold it moves, and the daily action minimum. All of it is derived from
//! the heartbeat log, so there is no state file to lose or corrupt.
//!
//! A tick that spawned a task records `actionTaken.spawnId`. The agent reports the result
//! (`mneme reflect spawn-result ID useful|ignored|error`, a `spawn_result` log line; mneme
//! cannot read the host's sessions, which is how the seed finds it). Each later tick
//! settles the spawns still open: a reported result is the outcome; no report after
//! [`TIMEOUT_TICKS`] further ticks is a `timeout`. Three `ignored` in a row raise the
//! threshold by `reflection.spawn_threshold_step` (at most `spawn_threshold_max`); one
//! `useful` resets it to `spawn_threshold`; `error` and `timeout` leave it.

use jiff::{SignedDuration, Timestamp};
use mneme_workspace::playbook_log::LogLine;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// Ignored spawns in a row that raise the threshold.
pub const IGNORED_TO_RAISE: u32 = 3;
/// Ticks after which an unreported spawn times out.
pub const TIMEOUT_TICKS: usize = 3;

/// The spawn threshold and the streak that moves it (carried in each tick line).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct SpawnState {
    pub threshold: f64,
    #[serde(rename = "consecutiveIgnored")]
    pub consecutive_ignored: u32,
}

/// The threshold's settings (`[reflection]`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SpawnPolicy {
    /// Where a fresh install starts, and `useful` resets to.
    pub base: f64,
    /// What three ignored spawns in a row add.
    pub step: f64,
    /// The threshold never goes above this.
    pub max: f64,
}

impl From<&super::config::ReflectionConfig> for SpawnPolicy {
    fn from(c: &super::config::ReflectionConfig) -> Self {
        SpawnPolicy { base: c.spawn_threshold, step: c.spawn_threshold_step, max: c.spawn_threshold_max }
    }
}

impl SpawnState {
    fn apply(&mut self, outcome: &str, policy: &SpawnPolicy) {
        match outcome {
            "useful" => *self = SpawnState { threshold: policy.base, consecutive_ignored: 0 },
            "ignored" => {
                self.consecutive_ignored += 1;
                if self.consecutive_ignored >= IGNORED_TO_RAISE {
                    self.threshold = (self.threshold + policy.step).min(policy.max);
                    self.consecutive_ignored = 0;
                }
            }
            _ => {}
        }
    }
}

/// The spawns this tick settles and the state after them, from the log lines (newest
/// first, as `playbook_log::read` gives them).
pub fn settle_spawns(lines: &[LogLine], policy: &SpawnPolicy) -> (Vec<Value>, SpawnState) {
    let ticks: Vec<&LogLine> = lines.iter().filter(|l| l.kind == "tick").collect();
    let mut state: SpawnState = ticks
        .first()
        .and_then(|t| serde_json::from_value(t.value["spawnState"].clone()).ok())
        .unwrap_or(SpawnState { threshold: policy.base, consecutive_ignored: 0 });
    let settled: Vec<&str> = ticks
        .iter()
        .flat_map(|t| t.value["spawnOutcomes"].as_array().into_iter().flatten())
        .filter_map(|o| o["spawnId"].as_str())
        .collect();
    let mut outcomes = Vec::new();
    // Oldest first, so the streak counts in order. `age`: ticks since the spawn, this
    // one included.
    for (i, t) in ticks.iter().enumerate().rev() {
        let age = i + 1;
        let Some(id) = t.value["actionTaken"]["spawnId"].as_str() else { continue };
        if settled.contains(&id) || t.value["actionTaken"]["queued"] == Value::Bool(false) {
            continue;
        }
        let reported = lines.iter().find(|l| l.kind == "spawn_result" && l.value["spawnId"] == id);
        let outcome = match reported.and_then(|r| r.value["outcome"].as_str()) {
            Some(o @ ("useful" | "ignored" | "error")) => o,
            _ if age >= TIMEOUT_TICKS => "timeout",
            _ => continue,
        };
        state.apply(outcome, policy);
        outcomes.push(json!({ "spawnId": id, "outcome": outcome, "ticks": age }));
    }
    (outcomes, state)
}

/// Whether the daily action minimum applies at `now`: no spawn or tip in the tick lines
/// of the last 24 hours, the user active within them, and at least a day of tick
/// history (so a fresh install does not act on its first tick).
pub fn daily_minimum_due(lines: &[LogLine], now: Timestamp, last_activity: Option<Timestamp>) -> bool {
    let day_ago = now - SignedDuration::from_hours(24);
    let ticks: Vec<&LogLine> = lines.iter().filter(|l| l.kind == "tick").collect();
    let history = ticks.last().and_then(|t| t.ts).is_some_and(|first| first <= day_ago);
    let acted = ticks.iter().filter(|t| t.ts.is_some_and(|ts| ts > day_ago)).any(|t| {
        let kind = t.value["actionTaken"]["kind"].as_str().unwrap_or_default();
        kind == "sessions_spawn" || kind == "telegram_tip"
    });
    let active = last_activity.is_some_and(|at| at > day_ago);
    history && !acted && active
}
