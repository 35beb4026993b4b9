//! What happens to the heartbeat's actions (sinain §6.3, §6.4): spawn outcome tracking,
//! the spawn threshold it moves, and the daily action minimum. All of it is derived from
//! the heartbeat log, so there is no state file to lose or corrupt.
//!
//! A tick that spawned a task records `actionTaken.spawnId`. The agent reports the result
//! (`mneme reflect spawn-result ID useful|ignored|error`, a `spawn_result` log line; mneme
//! cannot read the host's sessions, which is how the seed finds it). Each later tick
//! settles the spawns still open: a reported result is the outcome; no report after
//! [`TIMEOUT_TICKS`] further ticks is a `timeout`. Three `ignored` in a row raise the
//! threshold by [`THRESHOLD_STEP`] (at most [`THRESHOLD_MAX`]); one `useful` resets it;
//! `error` and `timeout` leave it.

use jiff::{SignedDuration, Timestamp};
use mneme_workspace::playbook_log::LogLine;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// The threshold a fresh install starts with, and `useful` resets to.
pub const BASE_THRESHOLD: f64 = 0.5;
/// What three ignored spawns in a row add.
pub const THRESHOLD_STEP: f64 = 0.1;
/// The threshold never goes above this.
pub const THRESHOLD_MAX: f64 = 0.9;
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

impl Default for SpawnState {
    fn default() -> Self {
        SpawnState { threshold: BASE_THRESHOLD, consecutive_ignored: 0 }
    }
}

impl SpawnState {
    fn apply(&mut self, outcome: &str) {
        match outcome {
            "useful" => *self = SpawnState::default(),
            "ignored" => {
                self.consecutive_ignored += 1;
                if self.consecutive_ignored >= IGNORED_TO_RAISE {
                    self.threshold = (self.threshold + THRESHOLD_STEP).min(THRESHOLD_MAX);
                    self.consecutive_ignored = 0;
                }
            }
            _ => {}
        }
    }
}

/// The spawns this tick settles and the state after them, from the log lines (newest
/// first, as `playbook_log::read` gives them).
pub fn settle_spawns(lines: &[LogLine]) -> (Vec<Value>, SpawnState) {
    let ticks: Vec<&LogLine> = lines.iter().filter(|l| l.kind == "tick").collect();
    let mut state: SpawnState = ticks.first().and_then(|t| serde_json::from_value(t.value["spawnState"].clone()).ok()).unwrap_or_default();
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
        state.apply(outcome);
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
