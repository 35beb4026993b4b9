//! The signal analyzer without a model (sinain §4.3; the spec's offline rules): what in
//! the recent history calls for an action, and the one action recommended.
//!
//! Rules, first match wins (more arrive with the model-backed analyzer):
//! - the same normalised failure mode two or more times → `sessions_spawn` "Find root
//!   cause for: MODE", confidence 0.5 + 0.1 per further repeat (at most 0.9);
//! - otherwise `skip`.

use std::collections::BTreeMap;

use serde::Serialize;

/// The three actions the analyzer can recommend.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ActionKind {
    SessionsSpawn,
    TelegramTip,
    Skip,
}

/// The recommended action.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RecommendedAction {
    pub action: ActionKind,
    pub task: String,
    pub confidence: f64,
}

/// The analyzer's report.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SignalReport {
    pub signals: Vec<String>,
    #[serde(rename = "recommendedAction")]
    pub recommended_action: RecommendedAction,
    pub idle: bool,
    /// Repeated failure modes (mode → count), which the curator tracks as fixable items.
    #[serde(skip)]
    pub repeated_failures: Vec<(String, usize)>,
}

/// The report for these recent failure modes (already normalised, any order).
pub fn fallback(failure_modes: &[String], idle: bool) -> SignalReport {
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for mode in failure_modes.iter().filter(|m| !m.trim().is_empty()) {
        *counts.entry(mode.as_str()).or_default() += 1;
    }
    let mut repeated: Vec<(String, usize)> = counts.into_iter().filter(|(_, n)| *n >= 2).map(|(m, n)| (m.to_string(), n)).collect();
    // Most frequent first; ties by name, so the same history gives the same report.
    repeated.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    let signals = repeated.iter().map(|(m, n)| format!("repeated error ({n}×): {m}")).collect();
    let recommended_action = match repeated.first() {
        Some((mode, n)) => RecommendedAction {
            action: ActionKind::SessionsSpawn,
            task: format!("Find root cause for: {mode}"),
            confidence: (0.5 + 0.1 * (*n as f64 - 2.0)).min(0.9),
        },
        None => RecommendedAction { action: ActionKind::Skip, task: String::new(), confidence: 0.0 },
    };
    SignalReport { signals, recommended_action, idle, repeated_failures: repeated }
}
