//! What happened, what is pending and what changed, read from the store's events and the
//! workspace's state without a model: the offline brain loop's note and the offline
//! diary entry (issue 36). Every line is something mneme recorded; nothing is invented,
//! and a span with nothing in it says so instead of writing filler.

use jiff::{SignedDuration, Timestamp};
use mneme_core::{LineageOp, MemoryType, Payload, Sensitivity};
use mneme_service::{Owner, RetrieveRequest};
use mneme_workspace::inner::{InnerEvent, InnerState};

use super::sense::Sensed;
use crate::ReflectError;
use crate::setup::{Event, History};

/// Most events a digest reads.
const EVENTS: usize = 1_000;
/// Most lines of each part.
const LINES: usize = 5;
/// Characters of the user's words a digest quotes.
const QUOTE: usize = 90;

/// The three parts, each a list of lines (without bullets).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Digest {
    pub happened: Vec<String>,
    pub pending: Vec<String>,
    pub changed: Vec<String>,
    /// The user's messages in the span (what "how I feel, and why" counts).
    pub user_messages: usize,
    /// The store's corrections and repeats in the span.
    pub mistakes: usize,
    /// Failing actions with no passing run after their last failure, as queue tasks.
    pub open_failures: Vec<String>,
}

impl Digest {
    /// Whether nothing happened, nothing is pending and nothing changed.
    pub fn is_empty(&self) -> bool {
        self.happened.is_empty() && self.pending.is_empty() && self.changed.is_empty()
    }

    /// The three parts as Markdown: under `## ` headings when `headings`, else as labelled
    /// lists; an empty part says so.
    pub fn markdown(&self, headings: bool) -> String {
        let mut out = String::new();
        for (title, lines, none) in [
            ("What happened", &self.happened, "Nothing recorded."),
            ("What is pending", &self.pending, "Nothing waiting."),
            ("What changed", &self.changed, "Nothing."),
        ] {
            let list: String = lines.iter().map(|l| format!("- {l}\n")).collect();
            out.push_str(&match (headings, lines.is_empty()) {
                (true, true) => format!("## {title}\n\n{none}\n\n"),
                (true, false) => format!("## {title}\n\n{list}\n"),
                (false, true) => format!("{title}: {}\n", none.to_lowercase()),
                (false, false) => format!("{title}:\n{list}"),
            });
        }
        out
    }
}

fn cut(text: &str, chars: usize) -> String {
    let one = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if one.chars().count() <= chars { one } else { format!("{}…", one.chars().take(chars - 1).collect::<String>()) }
}

fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// The digest of `since..now`: the store's events and facts, the queue and signals the
/// sense step found, and the events it applied.
pub fn digest(
    owner: &Owner<'_>,
    sensed: &Sensed,
    state: &InnerState,
    handoffs: &[String],
    since: Timestamp,
    now: Timestamp,
) -> Result<Digest, ReflectError> {
    let window = now.duration_since(since).max(SignedDuration::from_secs(1));
    let mut history = History::gather_window(owner, now, window, EVENTS)?;
    // The store's `since` is coarser than a loop's: nothing from before `since` counts.
    history.events.retain(|e| match e {
        Event::Message { at, .. } | Event::Tool { at, .. } => *at > since,
    });
    let mut d = Digest::default();

    // ---- what happened ----
    let mut user = Vec::new();
    let mut agent = 0;
    for e in &history.events {
        if let Event::Message { role, text, sensitivity, .. } = e {
            match role.as_deref() {
                Some("assistant") => agent += 1,
                _ => {
                    if *sensitivity <= Sensitivity::Medium {
                        user.push(text.as_str());
                    }
                    d.user_messages += 1;
                }
            }
        }
    }
    let tools = history.tools().values().sum::<usize>();
    let failed = history.failure_modes().len();
    if d.user_messages + agent + tools > 0 {
        d.happened.push(format!(
            "{} from the user, {} from the agent, {} ({} failed)",
            plural(d.user_messages, "message", "messages"),
            agent,
            plural(tools, "tool call", "tool calls"),
            failed
        ));
    }
    // What the user talked about: their last substantive messages, oldest first.
    let said: Vec<&str> = user.iter().rev().filter(|t| t.split_whitespace().count() >= 3).take(3).copied().collect();
    for t in said.into_iter().rev() {
        d.happened.push(format!("the user: “{}”", cut(&mneme_core::private::strip(t), QUOTE)));
    }
    // Each failing action: how often, with what, and whether it passed after.
    let mut actions: Vec<(&str, &str, usize, bool)> = Vec::new();
    for e in &history.events {
        let Event::Tool { action, failure_mode, .. } = e else { continue };
        match (actions.iter_mut().find(|(a, ..)| a == action), failure_mode) {
            (Some(slot), Some(mode)) => {
                slot.1 = mode;
                slot.2 += 1;
                slot.3 = false;
            }
            (Some(slot), None) => slot.3 = true,
            (None, Some(mode)) => actions.push((action, mode, 1, false)),
            (None, None) => {}
        }
    }
    for (action, mode, n, passed) in actions.iter().take(LINES) {
        let after = if *passed { "then passed" } else { "not passed since" };
        d.happened.push(format!("`{action}` failed {}× (“{}”), {after}", n, cut(mode, 60)));
        if !*passed && *n >= 2 {
            // The same text every loop, so the queue holds one task per failure.
            d.open_failures.push(format!("Find the cause of `{action}` failing with “{}”", cut(mode, 60)));
        }
    }

    // ---- what changed: facts learned or replaced, and what the sense step applied ----
    let facts = owner.recent(&RetrieveRequest {
        types: vec![MemoryType::Semantic],
        since: Some(since),
        limit: 50,
        max_sensitivity: Some(Sensitivity::Medium),
        ..Default::default()
    })?;
    let mut learned = 0;
    for r in facts.iter().rev() {
        let Some(Payload::Semantic(_)) = &r.payload else { continue };
        if r.lineage.operation == LineageOp::Supersede {
            d.changed.push(format!("now true: {} (replaces an older fact)", cut(&r.summary, QUOTE)));
        } else {
            learned += 1;
            if learned <= 3 {
                d.changed.push(format!("learned: {}", cut(&r.summary, QUOTE)));
            }
        }
    }
    if learned > 3 {
        d.changed.push(format!("and {} more new facts", learned - 3));
    }
    for e in &sensed.events {
        let line = match e {
            InnerEvent::Mistake { what } => {
                d.mistakes += 1;
                format!("corrected: {}", cut(what, QUOTE))
            }
            InnerEvent::Repeat { what } => {
                d.mistakes += 1;
                format!("the same problem again: {}", cut(what, QUOTE))
            }
            InnerEvent::Novelty { what } => format!("something new: {}", cut(what, QUOTE)),
            InnerEvent::Spark { topic } => format!("a spark for {topic}"),
            InnerEvent::Resolved { what } => format!("done: {}", cut(what, QUOTE)),
            InnerEvent::UserMessage {} | InnerEvent::Pending { .. } => continue,
        };
        d.changed.push(line);
    }
    d.changed.truncate(LINES + 3);

    // ---- what is pending ----
    let today = now.strftime("%Y-%m-%d").to_string();
    for q in sensed.queue.iter().take(3) {
        let waiting = q
            .since
            .and_then(|s| jiff::civil::Date::strptime("%Y-%m-%d", &today).ok().and_then(|t| t.since(s).ok()))
            .map(|span| span.get_days())
            .filter(|d| *d > 0)
            .map(|d| format!(" (waiting {})", plural(d as usize, "day", "days")))
            .unwrap_or_default();
        d.pending.push(format!("P{} {}{waiting}", q.priority, cut(&q.text, QUOTE)));
    }
    if sensed.queue.len() > 3 {
        d.pending.push(format!("and {} more in the queue", sensed.queue.len() - 3));
    }
    for h in handoffs {
        d.pending.push(format!("handed over by an earlier loop: {}", cut(h, QUOTE)));
    }
    // A problem still unsolved, unless the queue already holds a task for it.
    let queued = |what: &str| sensed.queue.iter().any(|q| q.text.contains(what));
    for f in state.frustration.iter().filter(|f| f.count >= 2 && !queued(&f.what)).take(2) {
        d.pending.push(format!("unsolved: {} ({}×)", cut(&f.what, QUOTE), f.count));
    }
    let instructions = owner.pending_dispatches(20)?.len();
    if instructions > 0 {
        d.pending.push(format!("{} for the agent's next hook", plural(instructions, "instruction waits", "instructions wait")));
    }
    Ok(d)
}
