//! What the host reports back (sinain §8.2 leaves this to the host): how a heartbeat
//! output went (a composite score in -1..=1, with optional error-cleared / re-escalated /
//! dwell signals) and what a spawned task came to. Both are lines in the heartbeat log,
//! so the next tick reads them like everything else. Shared by the CLI, HTTP and gRPC.

use std::path::PathBuf;

use jiff::Timestamp;
use mneme_workspace::{WorkspaceError, WorkspaceSettings, playbook_log};
use serde::Deserialize;
use serde_json::{Value, json};

/// A feedback report.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Feedback {
    /// The output reported on; `None`: the latest output before the report.
    #[serde(default)]
    pub output_id: Option<String>,
    pub score: f64,
    #[serde(default)]
    pub error_cleared: Option<bool>,
    #[serde(default)]
    pub re_escalated: Option<bool>,
    #[serde(default)]
    pub dwell_ms: Option<u64>,
}

/// How far back feedback looks for the output it scores.
const FEEDBACK_DAYS: i64 = 30;

/// Appends a `feedback` line attached to an output (the one named, else the latest); the
/// error names the bad field, or says there is no output to attach it to.
pub fn feedback(settings: &WorkspaceSettings, now: Timestamp, f: &Feedback) -> Result<(Value, PathBuf), WorkspaceError> {
    if !(f.score.is_finite() && (-1.0..=1.0).contains(&f.score)) {
        return Err(WorkspaceError::Invalid(format!("score {}: must be within -1..=1", f.score)));
    }
    if f.output_id.as_deref().is_some_and(|id| id.trim().is_empty()) {
        return Err(WorkspaceError::Invalid("outputId: must not be empty".into()));
    }
    // Feedback scores an output: the one named, else the latest before now. With none to
    // attach to it would be a line nothing ever counts, so it is refused.
    let today = now.to_zoned(settings.timezone.clone()).date();
    let lines = playbook_log::read(settings, today.saturating_sub(jiff::Span::new().days(FEEDBACK_DAYS)), today)?;
    let outputs = crate::feedback::outputs(&lines, Timestamp::MIN, true);
    let output_id = match &f.output_id {
        Some(id) if outputs.iter().any(|o| o.id == id.trim()) => id.trim().to_string(),
        Some(id) => {
            return Err(WorkspaceError::Invalid(format!(
                "outputId {id:?}: no heartbeat output has that id in the last {FEEDBACK_DAYS} days (`mneme reflect status` lists the recent ones)"
            )));
        }
        None => match outputs.iter().rev().find(|o| o.at <= now && !o.standing) {
            Some(o) => o.id.clone(),
            None => {
                return Err(WorkspaceError::Invalid(format!(
                    "no heartbeat output in the last {FEEDBACK_DAYS} days to attach this feedback to: run a tick (`mneme reflect tick`) or name an output (outputId)"
                )));
            }
        },
    };
    let mut line = json!({ "kind": "feedback", "compositeScore": f.score });
    for (key, value) in [
        ("outputId", Some(json!(output_id))),
        ("errorCleared", f.error_cleared.map(|v| json!(v))),
        ("reEscalated", f.re_escalated.map(|v| json!(v))),
        ("dwellMs", f.dwell_ms.map(|v| json!(v))),
    ] {
        if let Some(v) = value {
            line[key] = v;
        }
    }
    let path = playbook_log::append(settings, now, &line)?;
    Ok((line, path))
}

/// Appends a `spawn_result` line (`outcome`: useful, ignored or error).
pub fn spawn_result(
    settings: &WorkspaceSettings,
    now: Timestamp,
    spawn_id: &str,
    outcome: &str,
    note: Option<&str>,
) -> Result<(Value, PathBuf), WorkspaceError> {
    if spawn_id.trim().is_empty() {
        return Err(WorkspaceError::Invalid("spawnId: must not be empty".into()));
    }
    if !matches!(outcome, "useful" | "ignored" | "error") {
        return Err(WorkspaceError::Invalid(format!("outcome {outcome:?}: must be useful, ignored or error")));
    }
    let line = json!({ "kind": "spawn_result", "spawnId": spawn_id.trim(), "outcome": outcome, "note": note });
    let path = playbook_log::append(settings, now, &line)?;
    Ok((line, path))
}
