//! What the heartbeat learns without a model (issue 36): lessons read from the structure
//! of the last week's events, each with its evidence, each becoming one playbook line.
//!
//! - **Fix**: a tool action that failed with the same normalised error on two or more
//!   occasions, where after a failure the agent ran other steps and the same action then
//!   succeeded (within [`FIX_WINDOW_MINS`] minutes). The steps are the fix. The line: "When
//!   `npm test` fails with “…”, first run `docker compose up -d db` (it fixed this N×, …)".
//!   A plain retry that worked is not a fix.
//! - **Correction**: a user message that corrects what the agent just did (within
//!   [`CORRECTION_WINDOW_MINS`] minutes of the agent's tool call or message): it opens
//!   with a refusal or a correction ("no", "don't", "stop", "actually", "wrong", "instead",
//!   "I said", …) and does not ask (`asks`). It counts when it recurs (the same action
//!   corrected, or the same words) or when it is worded as a standing rule ("always",
//!   "never", "from now on").
//! - **Repeated question**: a question the user asked on two or more days (the same
//!   content words, Jaccard ≥ [`SAME_WORDS`]): the answer belongs where the session start
//!   shows it.
//!
//! Each lesson has a `head`, the start of its line, which names the trigger and stays the
//! same while the evidence grows: the curator finds the line by it and updates it instead
//! of adding a second one, and the analyzer delivers one tip per head (one a tick), so
//! each lesson is an output the feedback loop can score. Lessons never hold facts about people (those are the memory's); the words
//! they quote are the user's corrections and questions, cut to [`QUOTE_CHARS`].
//!
//! The observed-feedback part ([`observe`]) scores a delivered tip from what happened
//! after it: the failure or correction came back (negative), or the action ran again
//! without it (positive). Without evidence a tip stays unscored.

use std::collections::BTreeSet;

use jiff::{SignedDuration, Timestamp};
use serde::Serialize;

use super::setup::{Event, History};

/// Days of events lessons are read from.
pub const LESSON_DAYS: i64 = 7;
/// Most events read for lessons.
pub const LESSON_EVENTS: usize = 1000;
/// A fix is what ran between a failure and the same action's success within this window.
pub const FIX_WINDOW_MINS: i64 = 60;
/// Most steps a fix has.
pub const MAX_FIX_STEPS: usize = 3;
/// A correction answers the agent's last step within this window.
pub const CORRECTION_WINDOW_MINS: i64 = 15;
/// Two texts say the same when their content words overlap this much (Jaccard).
pub const SAME_WORDS: f64 = 0.6;
/// Characters of the user's words a line quotes.
pub const QUOTE_CHARS: usize = 160;

/// What kind of lesson.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LessonKind {
    Fix,
    Correction,
    Question,
}

/// One lesson and its evidence.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Lesson {
    pub kind: LessonKind,
    /// The start of the line: names the trigger, stable while the evidence grows.
    pub head: String,
    /// The whole playbook line (without the bullet).
    pub line: String,
    /// How often the trigger was seen in the window.
    pub count: usize,
    /// When it was last seen.
    pub last: Timestamp,
    /// The action it is about (fix and correction lessons): the failing or corrected one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub action: Option<String>,
    /// The normalised error (fix lessons).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
    /// The words that recur (correction and question lessons), normalised.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub words: Option<String>,
}

impl Lesson {
    /// The playbook section the line goes under.
    pub fn section(&self) -> &'static str {
        match self.kind {
            LessonKind::Fix => "Error prevention",
            LessonKind::Correction => "Corrections from the user",
            LessonKind::Question => "Repeated questions",
        }
    }

    /// Whether `text` (a playbook line's text) is this lesson's line, by its head.
    pub fn is_line(&self, text: &str) -> bool {
        let head = mneme_workspace::playbook::normalize(&self.head);
        !head.is_empty() && mneme_workspace::playbook::normalize(text).starts_with(&head)
    }
}

const STOP: [&str; 24] = [
    "the", "and", "for", "you", "your", "this", "that", "with", "what", "was", "are", "is", "it", "of", "to", "a", "an", "in", "on", "me",
    "my", "do", "does", "again",
];

/// The content words of `text`, lower-cased.
pub fn content_words(text: &str) -> BTreeSet<String> {
    text.split(|c: char| !c.is_alphanumeric() && c != '\'')
        .map(|w| w.trim_matches('\'').to_lowercase())
        .filter(|w| w.len() > 1 && !STOP.contains(&w.as_str()))
        .collect()
}

fn jaccard(a: &BTreeSet<String>, b: &BTreeSet<String>) -> f64 {
    let union = a.union(b).count();
    if union == 0 { 0.0 } else { a.intersection(b).count() as f64 / union as f64 }
}

fn quote(text: &str) -> String {
    let one: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if one.chars().count() <= QUOTE_CHARS { one } else { format!("{}…", one.chars().take(QUOTE_CHARS - 1).collect::<String>()) }
}

fn day(at: Timestamp) -> String {
    at.strftime("%Y-%m-%d").to_string()
}

/// The openings that make a user's reply a correction of the agent's last step.
const CORRECTION_OPENINGS: [&str; 14] = [
    "no",
    "nope",
    "don't",
    "dont",
    "do not",
    "stop",
    "wrong",
    "not",
    "never",
    "actually",
    "instead",
    "i said",
    "i told you",
    "please don't",
];
/// Words that make a correction a standing rule, counted from its first occurrence.
const STANDING: [&str; 5] = ["always", "never", "from now on", "every time", "in future"];

/// Whether `text` (a user's message) corrects the agent: it opens with a refusal or a
/// correction, or says "instead" / "not … but", and does not ask.
pub fn is_correction(text: &str) -> bool {
    let lower = text.trim().to_lowercase().replace('’', "'");
    if lower.is_empty() || asks(text) {
        return false;
    }
    let opens = CORRECTION_OPENINGS
        .iter()
        .any(|o| lower.strip_prefix(o).is_some_and(|rest| rest.chars().next().is_none_or(|c| !c.is_alphanumeric() && c != '\'')));
    opens || lower.contains(" instead") || lower.contains("i told you") || lower.contains("i said ")
}

const INTERROGATIVES: [&str; 18] = [
    "what", "what's", "whats", "where", "when", "who", "why", "how", "which", "is", "are", "can", "could", "do", "does", "did", "should",
    "will",
];

/// Whether `text` asks a question (a request, which the truth extractor also keeps out of
/// facts, does not count): it has a question mark, or opens with an interrogative.
pub fn asks(text: &str) -> bool {
    let first = text.trim_start().split(|c: char| c.is_whitespace() || c == ',').next().unwrap_or("").to_lowercase().replace('’', "'");
    text.contains('?') || INTERROGATIVES.contains(&first.as_str())
}

fn tool_at(e: &Event) -> Option<(&str, Option<&str>, Timestamp)> {
    match e {
        Event::Tool { action, failure_mode, at, .. } => Some((action.as_str(), failure_mode.as_deref(), *at)),
        Event::Message { .. } => None,
    }
}

fn at_of(e: &Event) -> Timestamp {
    match e {
        Event::Message { at, .. } | Event::Tool { at, .. } => *at,
    }
}

/// Fix lessons: failures of one action with one error, and the steps that made it pass.
fn fixes(events: &[Event]) -> Vec<Lesson> {
    // (action, mode) → (failures, last failure, fixes seen: steps → count)
    type Fixes = Vec<(Vec<String>, usize)>;
    let mut seen: Vec<((String, String), usize, Timestamp, Fixes)> = Vec::new();
    for (i, e) in events.iter().enumerate() {
        let Some((action, Some(mode), at)) = tool_at(e) else { continue };
        let key = (action.to_string(), mode.to_string());
        let slot = match seen.iter().position(|(k, ..)| *k == key) {
            Some(p) => p,
            None => {
                seen.push((key.clone(), 0, at, Vec::new()));
                seen.len() - 1
            }
        };
        seen[slot].1 += 1;
        seen[slot].2 = at;
        // Forward to the same action's next success; what ran in between is the fix.
        let mut steps: Vec<String> = Vec::new();
        for later in &events[i + 1..] {
            if at_of(later).duration_since(at) > SignedDuration::from_mins(FIX_WINDOW_MINS) {
                break;
            }
            let Some((a, failed, _)) = tool_at(later) else { continue };
            if a == action {
                if failed.is_none() && !steps.is_empty() && steps.len() <= MAX_FIX_STEPS {
                    let fixes = &mut seen[slot].3;
                    match fixes.iter_mut().find(|(s, _)| *s == steps) {
                        Some((_, n)) => *n += 1,
                        None => fixes.push((steps.clone(), 1)),
                    }
                }
                break;
            }
            if failed.is_none() && !steps.iter().any(|s| s == a) {
                steps.push(a.to_string());
            }
        }
    }
    seen.into_iter()
        .filter(|(_, failures, ..)| *failures >= 2)
        .filter_map(|((action, mode), failures, last, mut fixes)| {
            fixes.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.len().cmp(&b.0.len())));
            let (steps, fixed) = fixes.into_iter().next()?;
            let head = format!("When `{action}` fails with “{}”", quote(&mode));
            let run = steps.iter().map(|s| format!("`{s}`")).collect::<Vec<_>>().join(", then ");
            let line = format!("{head}, first run {run}, then retry (it fixed this {fixed} of {failures} times, last {})", day(last));
            Some(Lesson { kind: LessonKind::Fix, head, line, count: failures, last, action: Some(action), mode: Some(mode), words: None })
        })
        .collect()
}

/// The agent's step a user's message at `i` answers: a tool call's action, or `None` for
/// an assistant message; `Err` when it answers nothing of the agent's.
fn answered(events: &[Event], i: usize) -> Result<Option<String>, ()> {
    let at = at_of(&events[i]);
    let prev = events[..i].iter().rev().find(|e| !matches!(e, Event::Message { role: Some(r), .. } if r == "user")).ok_or(())?;
    if at.duration_since(at_of(prev)) > SignedDuration::from_mins(CORRECTION_WINDOW_MINS) {
        return Err(());
    }
    match prev {
        Event::Tool { action, .. } => Ok(Some(action.clone())),
        Event::Message { role: Some(r), .. } if r == "assistant" => Ok(None),
        _ => Err(()),
    }
}

fn user_messages(events: &[Event]) -> impl Iterator<Item = (usize, &str, Timestamp)> {
    events.iter().enumerate().filter_map(|(i, e)| match e {
        Event::Message { role: Some(r), text, at, .. } if r == "user" => Some((i, text.as_str(), *at)),
        _ => None,
    })
}

/// User messages that say the same thing (corrections of one action, or one question).
struct Group {
    action: Option<String>,
    words: BTreeSet<String>,
    /// The first wording (questions) or the latest (corrections).
    text: String,
    days: BTreeSet<String>,
    count: usize,
    last: Timestamp,
    standing: bool,
}

impl Group {
    fn new(action: Option<String>, words: BTreeSet<String>, text: &str, at: Timestamp) -> Group {
        Group { action, words, text: text.to_string(), days: BTreeSet::from([day(at)]), count: 1, last: at, standing: false }
    }

    fn add(&mut self, at: Timestamp) {
        self.days.insert(day(at));
        self.count += 1;
        self.last = at;
    }

    fn words(&self) -> Option<String> {
        Some(self.words.iter().cloned().collect::<Vec<_>>().join(" "))
    }
}

/// Correction lessons: the user correcting the same action (or in the same words) again,
/// or once in a standing rule.
fn corrections(events: &[Event]) -> Vec<Lesson> {
    let mut groups: Vec<Group> = Vec::new();
    for (i, text, at) in user_messages(events) {
        if !is_correction(text) {
            continue;
        }
        let Ok(action) = answered(events, i) else { continue };
        let words = content_words(text);
        let standing = STANDING.iter().any(|w| text.to_lowercase().contains(w));
        let same = groups.iter_mut().find(|g| (action.is_some() && g.action == action) || jaccard(&g.words, &words) >= SAME_WORDS);
        let group = match same {
            Some(g) => {
                g.add(at);
                g.text = text.to_string();
                g
            }
            None => {
                groups.push(Group::new(action, words, text, at));
                groups.last_mut().expect("just pushed")
            }
        };
        group.standing |= standing;
    }
    groups
        .into_iter()
        .filter(|g| g.count >= 2 || g.standing)
        .map(|g| {
            let (head, line) = match &g.action {
                Some(a) => {
                    let head = format!("After `{a}`, the user corrected the agent");
                    let line = format!("{head} ({}×, last {}): “{}”", g.count, day(g.last), quote(&g.text));
                    (head, line)
                }
                None => {
                    let head = format!("The user corrected the agent: “{}”", quote(&g.text));
                    let line = format!("{head} ({}×, last {})", g.count, day(g.last));
                    (head, line)
                }
            };
            Lesson {
                kind: LessonKind::Correction,
                head,
                line,
                count: g.count,
                last: g.last,
                words: g.words(),
                action: g.action,
                mode: None,
            }
        })
        .collect()
}

/// Repeated-question lessons: the same question on two or more days.
fn questions(events: &[Event]) -> Vec<Lesson> {
    let mut groups: Vec<Group> = Vec::new();
    for (_, text, at) in user_messages(events) {
        if !asks(text) {
            continue;
        }
        let words = content_words(text);
        if words.len() < 2 {
            continue;
        }
        match groups.iter_mut().find(|g| jaccard(&g.words, &words) >= SAME_WORDS) {
            Some(g) => g.add(at),
            None => groups.push(Group::new(None, words, text, at)),
        }
    }
    groups
        .into_iter()
        .filter(|g| g.days.len() >= 2)
        .map(|g| {
            let head = format!("The user keeps asking “{}”", quote(&g.text));
            let line = format!("{head} ({}×, last {}): keep the answer in MEMORY.md so the session start carries it", g.count, day(g.last));
            Lesson { kind: LessonKind::Question, head, line, count: g.count, last: g.last, words: g.words(), action: None, mode: None }
        })
        .collect()
}

/// The lessons in `history` (oldest events first): fixes, then corrections, then
/// repeated questions, each group with the most frequent first.
pub fn learn(history: &History) -> Vec<Lesson> {
    let mut out = Vec::new();
    for mut group in [fixes(&history.events), corrections(&history.events), questions(&history.events)] {
        group.sort_by(|a, b| b.count.cmp(&a.count).then(a.head.cmp(&b.head)));
        out.extend(group);
    }
    out
}

/// The heads of the lessons delivered as tips in `lines` (tick lines' `actionTaken.lesson`).
pub fn delivered(lines: &[mneme_workspace::playbook_log::LogLine]) -> Vec<String> {
    lines
        .iter()
        .filter(|l| l.kind == "tick")
        .filter_map(|l| l.value["actionTaken"]["lesson"]["head"].as_str().map(str::to_string))
        .collect()
}

/// A lesson as an output line records it, for [`observe`] to score later.
pub fn trigger(lesson: &Lesson) -> serde_json::Value {
    serde_json::json!({ "kind": lesson.kind, "head": lesson.head, "action": lesson.action, "mode": lesson.mode, "words": lesson.words })
}

/// What happened after a tip about `trigger` delivered at `since`: a score in [-1, 1] and
/// the evidence, or `None` while nothing shows either way.
pub fn observe(history: &History, trigger: &serde_json::Value, since: Timestamp) -> Option<(f64, String)> {
    let text = |k: &str| trigger[k].as_str();
    match trigger["kind"].as_str()? {
        "fix" => {
            let (action, mode) = (text("action")?, text("mode")?);
            let runs: Vec<Option<&str>> = history
                .events
                .iter()
                .filter(|e| at_of(e) > since)
                .filter_map(tool_at)
                .filter(|(a, ..)| *a == action)
                .map(|(_, failed, _)| failed)
                .collect();
            if let Some(n) = Some(runs.iter().filter(|f| **f == Some(mode)).count()).filter(|n| *n > 0) {
                Some((-0.5, format!("`{action}` failed with the same error {n}× after the tip")))
            } else if !runs.is_empty() && runs.iter().all(Option::is_none) {
                Some((0.6, format!("`{action}` ran {}× after the tip without the error", runs.len())))
            } else {
                None
            }
        }
        kind @ ("correction" | "question") => {
            let words: BTreeSet<String> = text("words")?.split(' ').map(str::to_string).collect();
            let action = text("action");
            let again = user_messages(&history.events)
                .filter(|(i, said, at)| {
                    *at > since && {
                        let same = jaccard(&content_words(said), &words) >= SAME_WORDS;
                        if kind == "question" {
                            same && asks(said)
                        } else {
                            let corrected = answered(&history.events, *i).ok().flatten();
                            is_correction(said) && (same || (action.is_some() && corrected.as_deref() == action))
                        }
                    }
                })
                .count();
            (again > 0).then(|| (-0.5, format!("the same {kind} came back {again}× after the tip")))
        }
        _ => None,
    }
}
