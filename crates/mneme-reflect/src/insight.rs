//! The insight synthesizer (sinain §4.7), Phase 3 step 5, after the Step-4 log line: one
//! practical suggestion and one surprising insight from the post-curation playbook and the
//! last three days of logs, or a skip with a specific reason.
//!
//! The quality gate is the model's (skip unless it has both, and nothing obvious) plus
//! two mechanical checks: a suggestion that repeats an output of the last three days
//! (Jaccard ≥ 0.8 over its words) is skipped, and the message (`suggestion`, a blank line,
//! `insight`) must stay under 500 characters: a longer insight is cut (ending in `…`),
//! and one left with fewer than 50 characters is skipped. Without a model the stage
//! always skips ("no LLM configured").

use std::collections::BTreeSet;

use serde::Serialize;
use serde_json::{Value, json};

use super::config::Stage;
use super::engine::{Reflector, StageOutcome, text};

/// The message must be shorter than this (characters).
pub const MAX_CHARS: usize = 500;
/// An insight cut shorter than this is not worth sending.
pub const MIN_INSIGHT_CHARS: usize = 50;

/// What the synthesizer produced.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Insight {
    pub skip: bool,
    #[serde(rename = "skipReason", skip_serializing_if = "Option::is_none")]
    pub skip_reason: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub suggestion: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub insight: Option<String>,
    #[serde(rename = "totalChars", skip_serializing_if = "Option::is_none")]
    pub total_chars: Option<usize>,
}

impl Insight {
    pub fn skipped(reason: impl Into<String>) -> Insight {
        Insight { skip: true, skip_reason: Some(reason.into()), suggestion: None, insight: None, total_chars: None }
    }

    /// The message delivered.
    pub fn message(&self) -> Option<String> {
        Some(format!("{}\n\n{}", self.suggestion.as_deref()?, self.insight.as_deref()?))
    }
}

fn words(text: &str) -> BTreeSet<String> {
    text.split(|c: char| !c.is_alphanumeric()).filter(|w| w.len() > 2).map(str::to_lowercase).collect()
}

/// Whether `suggestion` repeats one of `recent` (normalised words, Jaccard ≥ 0.8).
pub fn is_repeat(suggestion: &str, recent: &[String]) -> bool {
    let a = words(suggestion);
    recent.iter().any(|r| {
        let b = words(r);
        let union = a.union(&b).count();
        union > 0 && a.intersection(&b).count() as f64 / union as f64 >= 0.8
    })
}

/// Holds a suggestion and insight to the 500-character rule.
pub fn fit(suggestion: &str, insight: &str) -> Insight {
    let s_len = suggestion.chars().count();
    let total = s_len + 2 + insight.chars().count();
    let insight = if total < MAX_CHARS {
        insight.to_string()
    } else {
        let room = (MAX_CHARS - 1).saturating_sub(s_len + 2);
        if room < MIN_INSIGHT_CHARS {
            return Insight::skipped(format!("over {MAX_CHARS} characters even with the insight cut"));
        }
        let mut cut: String = insight.chars().take(room - 1).collect();
        cut.push('…');
        cut
    };
    let total_chars = s_len + 2 + insight.chars().count();
    Insight {
        skip: false,
        skip_reason: None,
        suggestion: Some(suggestion.to_string()),
        insight: Some(insight),
        total_chars: Some(total_chars),
    }
}

const PROMPT: &str = "From the agent's playbook and its last heartbeat logs, produce ONE practical, actionable \
suggestion for the user and ONE surprising, non-obvious insight that connects distinct observations. If you cannot \
produce both, or the suggestion repeats a recent output, or the insight is obvious, skip and give a specific reason \
naming the patterns or logs you examined. Together under 500 characters. Answer only JSON: {\"skip\": false, \
\"suggestion\": \"...\", \"insight\": \"...\"} or {\"skip\": true, \"skipReason\": \"...\"}";

/// Checks a model's answer and applies the mechanical gate.
pub fn validate(v: &Value, recent: &[String]) -> Result<Insight, String> {
    let skip = v.get("skip").and_then(Value::as_bool).ok_or("skip: missing or not a boolean")?;
    if skip {
        let reason = text(v, "skipReason").ok_or("skipReason: missing for a skip")?;
        return Ok(Insight::skipped(reason.chars().take(300).collect::<String>()));
    }
    let suggestion = text(v, "suggestion").ok_or("suggestion: missing or empty")?;
    let insight = text(v, "insight").ok_or("insight: missing or empty")?;
    if is_repeat(&suggestion, recent) {
        return Ok(Insight::skipped("the suggestion repeats an output of the last three days"));
    }
    Ok(fit(&suggestion, &insight))
}

/// Runs the synthesizer. `recent_outputs`: the suggestions delivered in the last three days.
pub fn synthesize(engine: &Reflector, playbook: &str, recent_logs: &[Value], recent_outputs: &[String]) -> (Insight, StageOutcome) {
    let user = json!({ "playbook": playbook, "logs": recent_logs, "recentOutputs": recent_outputs }).to_string();
    match engine.ask(Stage::InsightSynthesizer, PROMPT, &user) {
        Ok(v) => match validate(&v, recent_outputs) {
            Ok(i) => (i, StageOutcome::ok()),
            Err(e) => {
                (Insight::skipped(format!("invalid model answer: {e}")), StageOutcome::fallback(format!("invalid model answer: {e}")))
            }
        },
        Err(reason) => (Insight::skipped(reason.clone()), StageOutcome::skipped(reason)),
    }
}
