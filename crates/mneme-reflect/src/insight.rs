//! The insight synthesizer (sinain §4.7), Phase 3 step 5, after the Step-4 log line: one
//! practical suggestion and one surprising insight from the post-curation playbook and the
//! last three days of logs, or a skip with a specific reason.
//!
//! The quality gate is the model's (skip unless it has both, and nothing obvious) plus
//! two mechanical checks: a suggestion that repeats an output of the last three days
//! (Jaccard ≥ 0.8 over its words) is skipped, and the message (`suggestion`, a blank line,
//! `insight`) must stay under 500 characters: a longer insight is cut (ending in `…`),
//! and one left with fewer than 50 characters is skipped.
//!
//! Without a model (or when its answer is refused) the synthesis is deterministic
//! ([`offline`]): it looks for two or more *distinct* observations of the last week that
//! share something (failing actions fixed by the same step, failing with the same error,
//! or acting on the same directory; an action the user corrected that also fails) and
//! says what connects them, with the evidence. With nothing connected it skips and names
//! what it examined.

use std::collections::BTreeSet;

use serde::Serialize;
use serde_json::{Value, json};

use super::config::Stage;
use super::engine::{Reflector, StageOutcome, text};
use super::lessons::{Lesson, LessonKind, content_words, jaccard};
use super::setup::{Event, History};

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

/// What the synthesizer reads besides the playbook and the logs: the week's events and
/// the lessons read from them (what [`offline`] connects).
#[derive(Debug)]
pub struct Week<'a> {
    pub history: &'a History,
    pub lessons: &'a [Lesson],
}

/// Runs the synthesizer. `recent_outputs`: the suggestions delivered in the last three
/// days. Without a model, or when its answer is refused, [`offline`] decides.
pub fn synthesize(
    engine: &Reflector,
    playbook: &str,
    recent_logs: &[Value],
    recent_outputs: &[String],
    week: &Week<'_>,
) -> (Insight, StageOutcome) {
    let user = json!({ "playbook": playbook, "logs": recent_logs, "recentOutputs": recent_outputs }).to_string();
    let why = match engine.ask(Stage::InsightSynthesizer, PROMPT, &user) {
        Ok(v) => match validate(&v, recent_outputs) {
            Ok(i) => return (i, StageOutcome::ok()),
            Err(e) => format!("invalid model answer: {e}"),
        },
        Err(reason) => reason,
    };
    let insight = offline(week, recent_outputs);
    let outcome = if insight.skip {
        StageOutcome::skipped(format!("{why}; offline: {}", insight.skip_reason.as_deref().unwrap_or("")))
    } else {
        StageOutcome::fallback(why)
    };
    (insight, outcome)
}

/// Most actions an offline insight names.
const NAMED: usize = 3;
/// Two errors say the same when their content words overlap this much (Jaccard).
const SAME_ERROR: f64 = 0.5;

/// One failing action of the week: its errors and the directories of the files it acted on.
#[derive(Debug, Default)]
struct Failing {
    action: String,
    modes: Vec<(String, usize)>,
    dirs: BTreeSet<String>,
}

fn failing(history: &History) -> Vec<Failing> {
    let mut out: Vec<Failing> = Vec::new();
    for e in &history.events {
        let Event::Tool { action, failure_mode: Some(mode), files, .. } = e else { continue };
        let slot = match out.iter().position(|f| f.action == *action) {
            Some(p) => p,
            None => {
                out.push(Failing { action: action.clone(), ..Failing::default() });
                out.len() - 1
            }
        };
        let f = &mut out[slot];
        match f.modes.iter_mut().find(|(m, _)| m == mode) {
            Some((_, n)) => *n += 1,
            None => f.modes.push((mode.clone(), 1)),
        }
        f.dirs.extend(
            files
                .iter()
                .filter_map(|p| std::path::Path::new(p).parent())
                .map(|d| d.to_string_lossy().into_owned())
                .filter(|d| !d.is_empty()),
        );
    }
    out
}

fn ticked(actions: &[&str]) -> String {
    let named: Vec<String> = actions.iter().take(NAMED).map(|a| format!("`{a}`")).collect();
    let more = actions.len().saturating_sub(NAMED);
    let mut text = match named.len() {
        0 | 1 => named.join(""),
        n => format!("{} and {}", named[..n - 1].join(", "), named[n - 1]),
    };
    if more > 0 {
        text.push_str(&format!(" (and {more} more)"));
    }
    text
}

fn short(text: &str, chars: usize) -> String {
    if text.chars().count() <= chars { text.to_string() } else { format!("{}…", text.chars().take(chars - 1).collect::<String>()) }
}

/// A connection between distinct observations: (evidence weight, suggestion, insight).
type Connection = (usize, String, String);

/// Failing actions fixed by the same step.
fn shared_fixes(lessons: &[Lesson]) -> Vec<Connection> {
    let fixes: Vec<&Lesson> = lessons.iter().filter(|l| l.kind == LessonKind::Fix && l.action.is_some()).collect();
    let mut steps: Vec<&str> = fixes.iter().flat_map(|l| l.fix.iter().map(String::as_str)).collect();
    steps.sort_unstable();
    steps.dedup();
    steps
        .into_iter()
        .filter_map(|step| {
            let group: Vec<&&Lesson> = fixes.iter().filter(|l| l.fix.iter().any(|s| s == step)).collect();
            let mut actions: Vec<&str> = group.iter().filter_map(|l| l.action.as_deref()).collect();
            // One action failing with two errors is one action.
            actions.sort_unstable();
            actions.dedup();
            if actions.len() < 2 {
                return None;
            }
            let failures: usize = group.iter().map(|l| l.count).sum();
            Some((
                failures,
                format!("Run `{step}` before {} (or once at the start of a session): it was the fix for each of them.", ticked(&actions)),
                format!(
                    "{} failures of {} different actions this week have one cause: each passed only after `{step}` ran. One setup step, not {} problems.",
                    failures,
                    actions.len(),
                    actions.len()
                ),
            ))
        })
        .collect()
}

/// Distinct actions that fail with errors saying the same thing, or on files in one directory.
fn shared_errors(failing: &[Failing]) -> Vec<Connection> {
    let mut out = Vec::new();
    let mut used: Vec<usize> = Vec::new();
    for (i, f) in failing.iter().enumerate() {
        if used.contains(&i) {
            continue;
        }
        for (mode, _) in &f.modes {
            let words = content_words(mode);
            let group: Vec<usize> = failing
                .iter()
                .enumerate()
                .filter(|(_, g)| g.modes.iter().any(|(m, _)| m == mode || jaccard(&words, &content_words(m)) >= SAME_ERROR))
                .map(|(j, _)| j)
                .collect();
            if group.len() < 2 {
                continue;
            }
            used.extend(&group);
            let actions: Vec<&str> = group.iter().map(|j| failing[*j].action.as_str()).collect();
            let times: usize = group
                .iter()
                .flat_map(|j| failing[*j].modes.iter())
                .filter(|(m, _)| m == mode || jaccard(&words, &content_words(m)) >= SAME_ERROR)
                .map(|(_, n)| n)
                .sum();
            out.push((
                times,
                format!("Find the one cause of “{}” before the next run of {}: it broke each of them.", short(mode, 80), ticked(&actions)),
                format!(
                    "{} different actions failed {times}× this week with the same error, so fixing each on its own treats a symptom: the error names what they share.",
                    actions.len()
                ),
            ));
            break;
        }
    }
    let mut dirs: Vec<&str> = failing.iter().flat_map(|f| f.dirs.iter().map(String::as_str)).collect();
    dirs.sort_unstable();
    dirs.dedup();
    for dir in dirs {
        let group: Vec<&Failing> = failing.iter().filter(|f| f.dirs.contains(dir)).collect();
        if group.len() < 2 {
            continue;
        }
        let actions: Vec<&str> = group.iter().map(|f| f.action.as_str()).collect();
        let times: usize = group.iter().flat_map(|f| f.modes.iter().map(|(_, n)| n)).sum();
        out.push((
            times,
            format!("Look at `{dir}/` first when {} fails: every failing action this week that touched files touched it.", ticked(&actions)),
            format!("{} different actions failed {times}× this week on files in one directory, `{dir}/`: the trouble is likely there, not in the tools.", actions.len()),
        ));
    }
    out
}

/// An action the user corrected that also fails.
fn corrected_and_failing(lessons: &[Lesson], failing: &[Failing]) -> Vec<Connection> {
    lessons
        .iter()
        .filter(|l| l.kind == LessonKind::Correction)
        .filter_map(|l| {
            let action = l.action.as_deref()?;
            let f = failing.iter().find(|f| f.action == action)?;
            let (mode, n) = f.modes.iter().max_by_key(|(_, n)| *n)?;
            let said = l.text.as_deref().unwrap_or("");
            Some((
                l.count + n,
                format!("Before the next `{action}`, apply the user's correction (“{}”) rather than fixing its error.", short(said, 100)),
                format!(
                    "`{action}` is both corrected by the user ({}×) and failing (“{}”, {n}×): the way it is run may be the problem, not the error it shows.",
                    l.count,
                    short(mode, 60)
                ),
            ))
        })
        .collect()
}

/// The deterministic synthesis: the strongest connection between distinct observations
/// of the week whose suggestion repeats no recent output, or a skip naming what was
/// examined.
pub fn offline(week: &Week<'_>, recent_outputs: &[String]) -> Insight {
    let failing = failing(week.history);
    let mut connections = shared_fixes(week.lessons);
    connections.extend(corrected_and_failing(week.lessons, &failing));
    connections.extend(shared_errors(&failing));
    // The strongest first; ties in the order found (fixes, corrections, errors, files).
    connections.sort_by_key(|c| std::cmp::Reverse(c.0));
    let examined = format!("examined {} lessons and {} failing actions of the last 7 days", week.lessons.len(), failing.len());
    if connections.is_empty() {
        return Insight::skipped(format!("{examined}: no two share a fix, an error or a directory"));
    }
    match connections.iter().find(|(_, s, _)| !is_repeat(s, recent_outputs)) {
        Some((_, suggestion, insight)) => fit(suggestion, insight),
        None => Insight::skipped(format!("{examined}: every connection found repeats an output of the last three days")),
    }
}
