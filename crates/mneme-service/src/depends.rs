//! Dependent facts: when a fact about the user changes, what the user said before the
//! change that rests on the old value may no longer hold ("my commute across Lisbon takes
//! 20 minutes" after a move to Munich; "my team lead Petra signs off my leave" after a
//! move from Acme to Globex). Retrieval marks such hits (`Hit::outdated`) instead of
//! stating them as current; their rank is kept, because a question about the past still
//! wants them.
//!
//! A change is a fact about the user (`about:user`, `slot:<id>`) that was superseded or
//! withdrawn, with the value that replaced it (following the lineage to the live fact)
//! and when the old value stopped holding; or, with the model, a live single-valued fact
//! that newer words on its topic put in doubt without naming its value (a change
//! extraction did not read: "been in portland about 6 yrs now" after "I live in Austin"). A hit rests on it when it is the user's own
//! (a statement in their message, or a fact about them), dated before the change, and
//! - its words name the old value (whole words, ignoring case), unless extraction read
//!   that value from it as someone else's ("my sister lives in Lisbon"); or
//! - it is about the changed slot or one that comes with it (`mneme_truth::resting_on`):
//!   a fact of that slot, or a statement the topic layer puts there; or the second layer
//!   (`TopicModel::resting`) reads it as resting on the changed slot's value without
//!   naming it ("the gym is a 5 minute walk from my flat" rests on `city`).
//!
//! Values that are also live now (the user moved back) and values too short or too
//! common to name anything (`Go`, `C`) put nothing in doubt by their words.

use std::collections::HashMap;

use jiff::Timestamp;
use mneme_core::{MemoryRecord, MemoryType, Payload, RecordId, Status};
use mneme_store::{ReadTx, RecordFilter};

use crate::{Hit, MemoryService, Outdated, RestsBy, ServiceResult};

/// How many of the newest facts about the user are read for changes.
const CHANGE_WINDOW: usize = 256;

/// One change of a fact about the user.
#[derive(Debug, Clone)]
struct Change {
    slot: &'static str,
    old: String,
    /// `old`, lower case, when its words can name it.
    words: Option<String>,
    new: Option<String>,
    since: Timestamp,
    fact: RecordId,
    /// A newer statement that puts a live fact in doubt (no new value was read).
    statement: Option<RecordId>,
}

impl MemoryService {
    /// Marks the hits that rest on a value the user has since changed (see the module).
    /// Changes and hits are read within `filter`'s access.
    pub(crate) fn mark_outdated(&self, tx: &ReadTx<'_>, hits: &mut [Hit], filter: &RecordFilter) -> ServiceResult<()> {
        if !hits.iter().any(|h| users_words(&h.record).is_some()) {
            return Ok(());
        }
        let ids: Vec<&RecordId> = hits.iter().map(|h| &h.record.id).collect();
        let seqs = tx.seqs_of(&ids)?;
        let order: Vec<i64> = hits.iter().map(|h| seqs.get(&h.record.id).copied().unwrap_or(-1)).collect();
        let weights = self.config.retrieval;
        let read = |found: Vec<Option<(Option<&'static str>, f32)>>, min: f64| -> Vec<Option<&'static str>> {
            found.into_iter().map(|t| t.filter(|(_, p)| min < 1.0 && f64::from(*p) >= min).and_then(|(s, _)| s)).collect()
        };
        let topics = read(self.topics_of(&order), weights.topic_min_p);
        let resting = read(self.resting_of(&order), weights.resting_min_p);
        let said: Vec<Option<Said>> = hits
            .iter()
            .zip(topics.into_iter().zip(resting))
            .map(|(hit, (topic, rests))| {
                let (at, own) = users_words(&hit.record)?;
                // A fact's topic is its slot; a statement's, the layers' readings.
                let (topic, rests) = match &hit.record.payload {
                    Some(Payload::Semantic(_)) => (slot_of(&hit.record), None),
                    _ => (topic, rests),
                };
                Some(Said { at, lower: own.to_lowercase(), topic, rests })
            })
            .collect();
        if said.iter().all(Option::is_none) {
            return Ok(());
        }
        let (mut changes, live) = changes(tx, filter)?;
        // A live fact that newer words on its topic put in doubt (a change extraction did
        // not read, `newer_on_topic`) is a change too, for the hits that could rest on it.
        for fact in live {
            let Some(slot) = slot_of(&fact) else { continue };
            let Some(Payload::Semantic(f)) = &fact.payload else { continue };
            let words = Some(f.object.to_lowercase()).filter(|w| names_something(w));
            let c = Change { slot, old: f.object.clone(), words, new: None, since: Timestamp::MAX, fact: fact.id.clone(), statement: None };
            if !said.iter().flatten().any(|s| rests_on(s, &c)) {
                continue;
            }
            // Words on its topic that do not name its value: "been in portland about 6 yrs
            // now" after "I live in Austin" (words naming it, "my commute across Austin",
            // are what rests on it, not a change).
            let Some(newer) = self.newer_on_topic(tx, &fact, filter, false)? else { continue };
            if c.words.as_deref().is_some_and(|w| {
                mneme_core::query::contains_word(&newer.payload.as_ref().map(|p| p.own_text()).unwrap_or_default().to_lowercase(), w)
            }) {
                continue;
            }
            changes.push(Change { since: crate::retrieve::said_at(&newer), statement: Some(newer.id), ..c });
        }
        for (hit, said) in hits.iter_mut().zip(said) {
            let Some(said) = said else { continue };
            // The latest change the record was said before and rests on.
            let mut found: Option<Outdated> = None;
            for c in changes.iter().filter(|c| said.at < c.since) {
                if found.as_ref().is_some_and(|f| f.since >= c.since) {
                    continue;
                }
                let by = if names(&said, c) && !someone_elses(tx, &hit.record, c.words.as_deref().unwrap_or_default())? {
                    Some(RestsBy::NamesOld)
                } else if about(&said, c) && !is_the_change(&hit.record, c) {
                    Some(RestsBy::Topic)
                } else {
                    None
                };
                if let Some(by) = by {
                    found = Some(Outdated {
                        slot: c.slot.to_string(),
                        old: c.old.clone(),
                        new: c.new.clone(),
                        since: c.since,
                        fact: c.fact.clone(),
                        statement: c.statement.clone(),
                        by,
                    });
                }
            }
            // A fact the fail-safe already found in doubt keeps that mark.
            hit.outdated = found.or(hit.outdated.take());
        }
        Ok(())
    }
}

/// A hit's words as the user's: when, lower case, and what the layers read it as about.
struct Said {
    at: Timestamp,
    lower: String,
    topic: Option<&'static str>,
    rests: Option<&'static str>,
}

/// Do the words name the change's old value?
fn names(said: &Said, c: &Change) -> bool {
    c.words.as_deref().is_some_and(|w| mneme_core::query::contains_word(&said.lower, w))
}

/// Are the words about the changed slot, or one that comes with it?
fn about(said: &Said, c: &Change) -> bool {
    said.topic.is_some_and(|t| mneme_truth::resting_on(c.slot).contains(&t)) || said.rests == Some(c.slot)
}

/// Could the words rest on the change, by either way (before `someone_elses`)?
fn rests_on(said: &Said, c: &Change) -> bool {
    names(said, c) || about(said, c)
}

fn slot_of(r: &MemoryRecord) -> Option<&'static str> {
    r.tags.iter().find_map(|t| t.strip_prefix("slot:")).and_then(mneme_truth::slot).map(|d| d.id)
}

/// When the record's words were said and the words, if they are the user's own: a
/// statement in their message (`role:user`, not a question), a live fact about them, or
/// a fact without a slot read from the conversation (the hooks' regex triples,
/// `extraction:regex`, and consolidation's, `source:consolidation`: the block's "Known
/// facts"), whose words are the whole sentence. A slot fact about someone else ("Maya's sister lives in
/// Lisbon") is theirs, not the user's.
fn users_words(r: &MemoryRecord) -> Option<(Timestamp, String)> {
    let has = |tag: &str| r.tags.iter().any(|t| t == tag);
    match &r.payload {
        Some(Payload::Event(e)) if crate::retrieve::is_users(r) => Some((e.event_time.unwrap_or(r.created_at), e.text.clone())),
        Some(Payload::Semantic(f)) if r.status == Status::Active => {
            let said = f.valid_from.unwrap_or(r.created_at);
            if has("about:user") {
                Some((said, f.object.clone()))
            } else if (has("extraction:regex") || has("source:consolidation")) && !r.tags.iter().any(|t| t.starts_with("slot:")) {
                Some((said, format!("{} {} {}", f.subject, f.predicate, f.object)))
            } else {
                None
            }
        }
        _ => None,
    }
}

/// Is `r` the fact that holds now after `c`, or one it replaced? (Facts of the changed
/// slot itself are the change, not something resting on it.)
fn is_the_change(r: &MemoryRecord, c: &Change) -> bool {
    r.id == c.fact || r.tags.iter().any(|t| t.strip_prefix("slot:") == Some(c.slot)) && r.memory_type == MemoryType::Semantic
}

/// Did extraction read `value` from `statement` as someone else's ("my sister lives in
/// Lisbon")? Then naming it says nothing about the user's own value.
fn someone_elses(tx: &ReadTx<'_>, statement: &MemoryRecord, value: &str) -> ServiceResult<bool> {
    if statement.memory_type != MemoryType::Episodic {
        return Ok(false);
    }
    Ok(tx.derived_from(&statement.id)?.iter().any(|fact| {
        !fact.tags.iter().any(|t| t == "about:user")
            && matches!(&fact.payload, Some(Payload::Semantic(f)) if mneme_core::query::contains_word(&f.object.to_lowercase(), value))
    }))
}

/// The changes of facts about the user among the newest `CHANGE_WINDOW` facts within
/// `filter`'s access: each superseded or withdrawn fact whose value is not live again,
/// with what replaced it; and the live single-valued facts among them.
fn changes(tx: &ReadTx<'_>, filter: &RecordFilter) -> ServiceResult<(Vec<Change>, Vec<MemoryRecord>)> {
    let facts = RecordFilter {
        types: vec![MemoryType::Semantic],
        tags: vec!["about:user".into()],
        include_tombstones: true,
        since: None,
        until: None,
        ..filter.clone()
    };
    let seqs: Vec<i64> = tx.recent_candidates(&facts, CHANGE_WINDOW)?.iter().map(|c| c.seq).collect();
    let records = tx.get_many(&seqs)?;
    let value = |r: &MemoryRecord| match &r.payload {
        Some(Payload::Semantic(f)) => Some(f.object.clone()),
        _ => None,
    };
    // Values live now, per slot: a value that holds again puts nothing in doubt.
    let mut live: HashMap<&'static str, Vec<String>> = HashMap::new();
    for r in records.iter().filter(|r| r.status == Status::Active || r.status == Status::Contested) {
        if let (Some(slot), Some(v)) = (slot_of(r), value(r)) {
            live.entry(slot).or_default().push(mneme_truth::normalize_value(&v));
        }
    }
    let mut out = Vec::new();
    for r in &records {
        let (Some(slot), Some(old)) = (slot_of(r), value(r)) else { continue };
        if !matches!(r.status, Status::Superseded | Status::Retracted) || r.forgotten_at.is_some() {
            continue;
        }
        let norm = mneme_truth::normalize_value(&old);
        if live.get(slot).is_some_and(|l| l.contains(&norm)) {
            continue;
        }
        // What replaced it: the successor's value and date, then the lineage on to the
        // fact that holds now.
        let (mut new, mut since, mut fact) = (None, r.updated_at, r.id.clone());
        if r.status == Status::Superseded {
            let Some(next) = tx.children(&r.id)?.into_iter().find(|c| value(c).is_some()) else { continue };
            since = match &next.payload {
                Some(Payload::Semantic(f)) => f.valid_from.unwrap_or(next.created_at),
                _ => next.created_at,
            };
            let mut now = next;
            for _ in 0..16 {
                if now.status != Status::Superseded {
                    break;
                }
                match tx.children(&now.id)?.into_iter().find(|c| value(c).is_some()) {
                    Some(c) => now = c,
                    None => break,
                }
            }
            new = value(&now);
            fact = now.id.clone();
        }
        if new.as_deref().is_some_and(|n| mneme_truth::normalize_value(n) == norm) {
            continue;
        }
        let words = Some(old.to_lowercase()).filter(|w| names_something(w));
        out.push(Change { slot, old, words, new, since, fact, statement: None });
    }
    let single = |r: &MemoryRecord| slot_of(r).and_then(mneme_truth::slot).is_some_and(|d| d.kind == mneme_truth::SlotKind::Single);
    let live = records.into_iter().filter(|r| r.status == Status::Active && single(r)).collect();
    Ok((out, live))
}

/// Can a value's words name it in a sentence: at least three letters, not a stopword.
fn names_something(lower: &str) -> bool {
    lower.chars().filter(|c| c.is_alphanumeric()).count() >= 3 && !mneme_core::query::query_tokens(lower).is_empty()
}
