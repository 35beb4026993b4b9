//! The signal analyzer (sinain §4.3): what in the recent history calls for an action, and
//! the one action recommended. With a model, the model reads the effective playbook, the
//! last three tick lines, the session summary and the history, and answers with the
//! seed's mapping; its answer is validated, and anything invalid falls back.
//!
//! Offline rules, first match wins:
//! - a lesson of the last week (`lessons`: a failure with a known fix, a recurring
//!   correction, a repeated question) not delivered as a tip yet (by its head) →
//!   `telegram_tip` with its line, confidence 0.5 + 0.1 per sighting beyond two (at most
//!   0.9): a tip the feedback loop can score, where the spec's rules only ever spawn;
//! - the same normalised failure mode two or more times → `sessions_spawn` "Find root
//!   cause for: MODE", confidence 0.5 + 0.1 per further repeat (at most 0.9);
//! - three or more near-identical user messages (same words, Jaccard ≥ 0.8: the user
//!   stuck in a loop) → `sessions_spawn` "Debug: MESSAGE", confidence 0.6;
//! - otherwise `skip`.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;
use serde_json::{Value, json};

use super::config::Stage;
use super::engine::{Reflector, StageOutcome, strings, text};
use super::lessons::Lesson;
use super::setup::History;

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

impl RecommendedAction {
    fn skip() -> RecommendedAction {
        RecommendedAction { action: ActionKind::Skip, task: String::new(), confidence: 0.0 }
    }
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

fn words(text: &str) -> BTreeSet<String> {
    text.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()).map(str::to_lowercase).collect()
}

fn jaccard(a: &BTreeSet<String>, b: &BTreeSet<String>) -> f64 {
    let union = a.union(b).count();
    if union == 0 { 0.0 } else { a.intersection(b).count() as f64 / union as f64 }
}

/// The user's message repeated (near-identically) most often, if three times or more.
fn stuck_loop(history: &History) -> Option<(String, usize)> {
    let user: Vec<(&str, BTreeSet<String>)> = history
        .messages()
        .filter(|(sender, _)| sender.as_deref().is_none_or(|s| !s.eq_ignore_ascii_case("assistant")))
        .map(|(_, t)| (t, words(t)))
        .filter(|(_, w)| !w.is_empty())
        .collect();
    let mut best: Option<(String, usize)> = None;
    for (text, w) in &user {
        let n = user.iter().filter(|(_, o)| jaccard(w, o) >= 0.8).count();
        if n >= 3 && best.as_ref().is_none_or(|(_, b)| n > *b) {
            best = Some((text.chars().take(120).collect(), n));
        }
    }
    best
}

/// The first lesson not delivered as a tip yet (`delivered`: the heads of those that were).
pub fn new_lesson<'a>(lessons: &'a [Lesson], delivered: &[String]) -> Option<&'a Lesson> {
    lessons.iter().find(|l| !delivered.iter().any(|h| l.is_line(h)))
}

/// The offline report for this history and these lessons.
pub fn fallback(history: &History, idle: bool, lessons: &[Lesson], delivered: &[String]) -> SignalReport {
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for mode in history.failure_modes().into_iter().filter(|m| !m.trim().is_empty()) {
        *counts.entry(mode).or_default() += 1;
    }
    let mut repeated: Vec<(String, usize)> = counts.into_iter().filter(|(_, n)| *n >= 2).collect();
    // Most frequent first; ties by name, so the same history gives the same report.
    repeated.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    let mut signals: Vec<String> = repeated.iter().map(|(m, n)| format!("repeated error ({n}×): {m}")).collect();
    let stuck = stuck_loop(history);
    if let Some((text, n)) = &stuck {
        signals.push(format!("user repeated the same request ({n}×): {text}"));
    }
    signals.extend(lessons.iter().take(5).map(|l| format!("learned: {}", l.line)));
    let fresh = new_lesson(lessons, delivered);
    let recommended_action = match (fresh, repeated.first(), stuck) {
        (Some(l), ..) => RecommendedAction {
            action: ActionKind::TelegramTip,
            task: l.line.clone(),
            confidence: (0.5 + 0.1 * l.count.saturating_sub(2) as f64).min(0.9),
        },
        (None, Some((mode, n)), _) => RecommendedAction {
            action: ActionKind::SessionsSpawn,
            task: format!("Find root cause for: {mode}"),
            confidence: (0.5 + 0.1 * (*n as f64 - 2.0)).min(0.9),
        },
        (None, None, Some((text, _))) => {
            RecommendedAction { action: ActionKind::SessionsSpawn, task: format!("Debug: {text}"), confidence: 0.6 }
        }
        (None, None, None) => RecommendedAction::skip(),
    };
    SignalReport { signals, recommended_action, idle, repeated_failures: repeated }
}

const PROMPT: &str = "You analyse an AI agent's recent activity for actionable signals. From the playbook, the last \
heartbeat logs, the session summary and the recent events, list the signals you see and recommend ONE action: \
a repeated error -> sessions_spawn \"Find root cause for: <error>\"; a new technology or topic explored -> \
sessions_spawn \"Research <topic>\"; a clear next action -> telegram_tip with a concise suggestion as the task; \
the user stuck in a loop -> sessions_spawn \"Debug <issue>\"; no meaningful signal -> skip. Do not repeat a task \
from the prior logs. confidence is between 0 and 1. Answer only JSON: {\"signals\": [\"...\"], \
\"recommendedAction\": {\"action\": \"sessions_spawn|telegram_tip|skip\", \"task\": \"...\", \"confidence\": 0.7}}";

/// Checks a model's answer; the message says what was wrong.
pub fn validate(v: &Value, idle: bool) -> Result<SignalReport, String> {
    let signals = strings(v, "signals", 10, 300)?;
    let a = v.get("recommendedAction").filter(|a| a.is_object()).ok_or("recommendedAction: missing or not an object")?;
    let action = match a.get("action").and_then(Value::as_str) {
        Some("sessions_spawn") => ActionKind::SessionsSpawn,
        Some("telegram_tip") => ActionKind::TelegramTip,
        Some("skip") => ActionKind::Skip,
        other => return Err(format!("recommendedAction.action: {other:?} is not sessions_spawn, telegram_tip or skip")),
    };
    let confidence = match a.get("confidence") {
        None | Some(Value::Null) if action == ActionKind::Skip => 0.0,
        Some(c) => c.as_f64().filter(|c| (0.0..=1.0).contains(c)).ok_or("recommendedAction.confidence: not a number in 0..=1")?,
        None => return Err("recommendedAction.confidence: missing".into()),
    };
    let task = text(a, "task").unwrap_or_default();
    if action != ActionKind::Skip && task.is_empty() {
        return Err("recommendedAction.task: empty for an action other than skip".into());
    }
    let recommended_action = RecommendedAction { action, task: task.chars().take(500).collect(), confidence };
    Ok(SignalReport { signals, recommended_action, idle, repeated_failures: Vec::new() })
}

/// What the analyzer reads besides the history.
#[derive(Debug)]
pub struct SignalInput<'a> {
    pub history: &'a History,
    pub summary: &'a str,
    pub playbook: &'a str,
    /// The last tick lines, newest first.
    pub recent_ticks: &'a [Value],
    pub idle: bool,
    /// The last week's lessons (`lessons::learn`).
    pub lessons: &'a [Lesson],
    /// The heads of the lessons already delivered as tips.
    pub delivered: &'a [String],
}

/// Whether `action` is a tip with the line of a lesson whose tip was delivered before.
fn repeats_a_delivered_lesson(action: &RecommendedAction, input: &SignalInput<'_>) -> bool {
    action.action == ActionKind::TelegramTip
        && input.lessons.iter().any(|l| l.is_line(&action.task) && input.delivered.iter().any(|h| l.is_line(h)))
}

/// Runs the analyzer: the model's validated answer, else the offline rules. The repeated
/// failures (for the curator) always come from the history.
pub fn analyze(engine: &Reflector, input: &SignalInput<'_>) -> (SignalReport, StageOutcome) {
    let offline = fallback(input.history, input.idle, input.lessons, input.delivered);
    let recent: Vec<Value> = input
        .recent_ticks
        .iter()
        .take(3)
        .map(|t| json!({ "ts": t["ts"], "signals": t["signals"], "actionTaken": t["actionTaken"] }))
        .collect();
    let user = json!({
        "playbook": input.playbook,
        "lastHeartbeats": recent,
        "sessionSummary": input.summary,
        "events": input.history.for_model(engine.config.llm_max_sensitivity),
        "idle": input.idle,
        "lessons": input.lessons.iter().map(|l| l.line.as_str()).collect::<Vec<_>>(),
    })
    .to_string();
    match engine.ask(Stage::SignalAnalyzer, PROMPT, &user) {
        Ok(v) => match validate(&v, input.idle) {
            // The model sees three heartbeats; a lesson delivered before them is known
            // here, and a tip that repeats it is not sent again.
            Ok(report) if repeats_a_delivered_lesson(&report.recommended_action, input) => {
                (offline, StageOutcome::fallback("the model's tip repeats a lesson already delivered"))
            }
            Ok(mut report) => {
                report.repeated_failures = offline.repeated_failures;
                (report, StageOutcome::ok())
            }
            Err(e) => (offline, StageOutcome::fallback(format!("invalid model answer: {e}"))),
        },
        Err(reason) => (offline, StageOutcome::fallback(reason)),
    }
}
