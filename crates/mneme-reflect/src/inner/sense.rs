//! The mechanical core every inner-life job starts with (Step 0 of the brain loop): what
//! mneme already sees becomes events, without a model.
//!
//! - **Queue**: open task lines of `QUEUE.md` and `state.md` are impatience items (since
//!   their `(added …)` date, else since first seen); a line gone or ticked off resolves.
//! - **Signals**: an unconsumed `seeking-spark` tag in the last two days' notes, the newest
//!   dream or the newest diary entry is a spark for curiosity.
//! - **Synapses**: `contradicts` / `caused-by` / `updates` tags naming a record id become
//!   store links: the note's line is kept as an episodic note record, which contests the
//!   named record (`contradicts`) or is linked to it (`caused_by`, `updates`).
//! - **The store's audit log**: a supersede or contest by anyone but mneme's own engines (a
//!   user or the agent correcting a memory) is a mistake; a new competence record (a skill
//!   the agent has not used before) is novelty.
//!
//! Consumed tags are recorded in `inner-state.json` (`consumedSignals`), never by editing
//! the notes; the audit position in `auditSeen`.

use jiff::Timestamp;
use mneme_core::{EventPayload, Payload, RecordId, Sensitivity};
use mneme_service::{ContestRequest, IngestOptions, Owner};
use mneme_workspace::WorkspaceSettings;
use mneme_workspace::inner::{self, Impatience, InnerEvent, InnerState};
use mneme_workspace::inner_data::{self, QueueItem};
use serde::Serialize;

use crate::ReflectError;

/// The actor of mneme's inner-life writes to the store.
pub const ACTOR: &str = "mneme:inner";
/// How many consumed tags the state keeps (oldest dropped first).
const CONSUMED_KEPT: usize = 500;
/// Audit entries looked at per run.
const AUDIT_BATCH: usize = 2_000;

/// What one sense step found and did.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Sensed {
    /// Events applied to the state.
    pub events: Vec<InnerEvent>,
    /// Open queue items, most urgent first.
    pub queue: Vec<QueueItem>,
    /// Store links made from synapse tags (`kind → record id`).
    pub links: Vec<String>,
    /// Tags that could not be applied (and why); they are consumed all the same.
    pub errors: Vec<String>,
}

/// Unconsumed signal tags of `kind` in the tag sources, as (value, consumed key).
pub fn unconsumed(settings: &WorkspaceSettings, state: &InnerState, kind: &str, now: Timestamp) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    for (source, text) in inner::tag_sources(settings, now) {
        for tag in inner::tags(&text) {
            let key = inner::signal_key(kind, &tag.value, &source);
            if tag.kind == kind && !state.consumed_signals.contains(&key) && !out.iter().any(|(v, _)| *v == tag.value) {
                out.push((tag.value, key));
            }
        }
    }
    out
}

/// Marks signals consumed (mneme's bookkeeping, under the workspace lock).
pub fn consume(settings: &WorkspaceSettings, keys: Vec<String>, now: Timestamp) -> Result<(), ReflectError> {
    if keys.is_empty() {
        return Ok(());
    }
    inner::update(settings, now, |s| push_consumed(s, keys))?;
    Ok(())
}

fn push_consumed(state: &mut InnerState, keys: Vec<String>) {
    for k in keys {
        if !state.consumed_signals.contains(&k) {
            state.consumed_signals.push(k);
        }
    }
    let over = state.consumed_signals.len().saturating_sub(CONSUMED_KEPT);
    state.consumed_signals.drain(..over);
}

/// The open task lines of `QUEUE.md` and `state.md`, most urgent first.
pub fn open_queue(settings: &WorkspaceSettings) -> Vec<QueueItem> {
    let mut items = Vec::new();
    for file in ["QUEUE.md", "state.md"] {
        if let Some(text) = inner::read_file(settings, file) {
            items.extend(inner_data::parse_queue(&text));
        }
    }
    inner_data::prioritize(&items)
}

/// The line of `text` holding `<!-- kind: value -->`, without the tag and private blocks.
fn tag_line(text: &str, kind: &str, value: &str) -> String {
    let line = text.lines().find(|l| l.contains("<!--") && l.contains(kind) && l.contains(value)).unwrap_or_default();
    let mut out = line.to_string();
    while let (Some(a), Some(b)) = (out.find("<!--"), out.find("-->")) {
        if b < a {
            break;
        }
        out.replace_range(a..b + 3, "");
    }
    mneme_core::private::strip(out.trim().trim_start_matches(['-', '*', ' '])).trim().to_string()
}

/// Applies one synapse tag to the store; returns what was linked.
fn synapse(owner: &Owner<'_>, source: &str, text: &str, kind: &str, target: &RecordId) -> Result<String, String> {
    owner.get(target).map_err(|e| format!("{kind}: {target}: {e}"))?;
    let line = tag_line(text, kind, &target.to_string());
    let line = if line.is_empty() { format!("({kind} {target}, from {source})") } else { line };
    let payload = Payload::Event(EventPayload {
        event_kind: "note".into(),
        reference: Some(target.to_string()),
        sender: Some("agent".into()),
        text: line.clone(),
        event_time: None,
    });
    let options = IngestOptions {
        sensitivity: Some(Sensitivity::Low),
        tags: vec!["inner-life".into(), format!("synapse:{kind}")],
        actor: Some(ACTOR.into()),
        rationale: Some(format!("synapse tag in {source}")),
        ..IngestOptions::default()
    };
    let note = owner.ingest(payload, options).map_err(|e| format!("{kind}: {target}: {e}"))?;
    let done = match kind {
        "contradicts" => owner
            .contest(
                target,
                ContestRequest { by: Some(note.id.clone()), claim: Some(line) },
                ACTOR.into(),
                format!("{kind} tag in {source}"),
            )
            .map(|_| format!("contest {target} by {}", note.id)),
        other => {
            let link = other.replace('-', "_");
            owner.relate(&note.id, target, &link, source).map(|()| format!("{link} {} → {target}", note.id))
        }
    };
    done.map_err(|e| format!("{kind}: {target}: {e}"))
}

/// Runs the sense step at `now` and applies what it found (unless `dry_run`).
pub fn sense(owner: &Owner<'_>, settings: &WorkspaceSettings, now: Timestamp, dry_run: bool) -> Result<Sensed, ReflectError> {
    let state = inner::read_state(settings)?.unwrap_or_else(|| InnerState::fresh(now));
    let mut out = Sensed { queue: open_queue(settings), ..Sensed::default() };
    let mut consumed = Vec::new();

    // Signals and synapses.
    for (source, text) in inner::tag_sources(settings, now) {
        for tag in inner::tags(&text) {
            let key = inner::signal_key(&tag.kind, &tag.value, &source);
            if state.consumed_signals.contains(&key) || consumed.contains(&key) {
                continue;
            }
            match tag.kind.as_str() {
                "seeking-spark" => {
                    out.events.push(InnerEvent::Spark { topic: tag.value.clone() });
                    consumed.push(key);
                }
                "contradicts" | "caused-by" | "updates" => {
                    let Ok(target) = tag.value.parse::<RecordId>() else { continue };
                    if !dry_run {
                        match synapse(owner, &source, &text, &tag.kind, &target) {
                            Ok(link) => out.links.push(link),
                            Err(e) => out.errors.push(e),
                        }
                    }
                    consumed.push(key);
                }
                _ => {}
            }
        }
    }

    // Corrections and new skills in the store.
    let audit_seen = match state.audit_seen {
        Some(seen) => {
            let events = owner.audit_events_after(seen, AUDIT_BATCH)?;
            for e in &events {
                let what = if e.summary.trim().is_empty() { e.record.to_string() } else { e.summary.chars().take(120).collect() };
                match e.action.as_str() {
                    "supersede" | "contest" if !e.actor.starts_with("mneme:") => {
                        out.events.push(InnerEvent::Mistake { what: format!("{} corrected: {what}", e.actor) })
                    }
                    "create" => out.events.push(InnerEvent::Novelty { what: format!("new skill: {what}") }),
                    _ => {}
                }
            }
            events.last().map_or(seen, |e| e.seq)
        }
        // The first run starts from now: history before inner life began is not news.
        None => owner.max_audit_seq()?,
    };

    if dry_run {
        return Ok(out);
    }
    let queue = out.queue.clone();
    let tz = settings.timezone.clone();
    let events = out.events.clone();
    inner::update(settings, now, |s| {
        for e in &events {
            s.apply(e, now);
        }
        // The queue's open items are what waits; items gone or done are resolved.
        let open: Vec<&str> = queue.iter().map(|q| q.text.as_str()).collect();
        s.impatience.retain(|i| i.source.as_deref() != Some("queue") || open.contains(&i.what.as_str()));
        for q in &queue {
            if !s.impatience.iter().any(|i| i.what == q.text) {
                let since = q.since.and_then(|d| d.to_zoned(tz.clone()).ok()).map(|z| z.timestamp()).filter(|t| *t <= now).unwrap_or(now);
                s.impatience.push(Impatience { what: q.text.clone(), since, source: Some("queue".into()) });
            }
        }
        push_consumed(s, consumed);
        s.audit_seen = Some(audit_seen);
    })?;
    Ok(out)
}
