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

/// Appends a `feedback` line; the error names the bad field.
pub fn feedback(settings: &WorkspaceSettings, now: Timestamp, f: &Feedback) -> Result<(Value, PathBuf), WorkspaceError> {
    if !(f.score.is_finite() && (-1.0..=1.0).contains(&f.score)) {
        return Err(WorkspaceError::Invalid(format!("score {}: must be within -1..=1", f.score)));
    }
    if f.output_id.as_deref().is_some_and(|id| id.trim().is_empty()) {
        return Err(WorkspaceError::Invalid("outputId: must not be empty".into()));
    }
    let mut line = json!({ "kind": "feedback", "compositeScore": f.score });
    for (key, value) in [
        ("outputId", f.output_id.as_ref().map(|v| json!(v))),
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
