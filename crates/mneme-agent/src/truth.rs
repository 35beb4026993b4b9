//! What is true now: claims from what the user says, reconciled into one live fact per
//! single-valued slot (with lineage), and the context block built from those facts.
//!
//! [`Reconciler::apply`] takes the claims of one message ([`mneme_truth::extract`])
//! and revises the store: a new value of a single-valued slot supersedes the old fact
//! (the rationale names both), a negation retracts it, a multi-valued slot gains or
//! loses one value, the same value again reinforces, and a bare correction ("actually
//! it's Rui, not Ruy") supersedes whichever of the speaker's facts holds the old value.
//! Facts about the speaker get the speaker's name as subject and the tag `about:user`;
//! facts about others ("my sister", "Bruno") are theirs, with "my" resolved to the
//! speaker. Every fact carries `slot:<id>` (what retrieval's slot boost looks up), its
//! date (`valid_from`) and the message it came from (`evidence`).
//!
//! [`live_facts`] and [`facts_markdown`] state the live facts, the user's first, grouped by subject, in a
//! fixed order, within a size budget; then the records the task descriptor retrieves,
//! leaving out the assistant's own messages and any message that still carries a value
//! the user has since changed.

use std::collections::{BTreeMap, HashSet};

use jiff::Timestamp;
use mneme_core::{MemoryRecord, MemoryType, Payload, RecordId, Scope, SemanticPayload, Sensitivity, Status};
use mneme_service::{Hit, IngestOptions, Ops, Principal, RetrieveRequest, Revision, ServiceResult};
use mneme_truth::{self as truth, Claim, Op, SlotDef, SlotKind};
use serde::Serialize;

pub const ACTOR: &str = "mneme:truth";
/// The tag of facts about the person speaking (the user), as opposed to third parties.
pub const ABOUT_USER: &str = "about:user";

/// What applying one message's claims did.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Applied {
    pub ingested: usize,
    pub superseded: usize,
    pub retracted: usize,
    pub reinforced: usize,
    /// Claims that changed nothing (a negation of a value that is not live, a correction
    /// of a value no fact holds).
    pub ignored: usize,
    pub record_ids: Vec<RecordId>,
}

/// Where and how a message's facts are written.
#[derive(Debug, Clone)]
pub struct Source<'a> {
    /// The speaker's name (the user); `None` writes "user".
    pub speaker: Option<&'a str>,
    pub at: Timestamp,
    /// The message record the claims came from, and its words.
    pub message: Option<&'a RecordId>,
    pub text: Option<&'a str>,
    pub sensitivity: Sensitivity,
    pub scope: &'a Scope,
    /// The claims were read by the span reader (`MemoryService::read_value`), not matched
    /// by a phrase: written with [`READ_CONFIDENCE`] and tagged `extraction:reader`.
    pub read: bool,
}

/// The tag of a fact the span reader read.
pub const READ_TAG: &str = "extraction:reader";
/// A fact's confidence when a phrase states it.
pub const STATED_CONFIDENCE: f64 = 0.8;
/// A fact's confidence when the span reader read it.
pub const READ_CONFIDENCE: f64 = 0.6;

impl Source<'_> {
    /// The subject of the speaker's own facts: their name, or "user".
    fn speaker_name(&self) -> &str {
        self.speaker.filter(|s| !s.trim().is_empty()).unwrap_or("user")
    }

    fn confidence(&self) -> f64 {
        if self.read { READ_CONFIDENCE } else { STATED_CONFIDENCE }
    }
}

#[derive(Debug)]
pub struct Reconciler<'a> {
    pub ops: &'a Ops,
    pub principal: &'a Principal,
}

impl Reconciler<'_> {
    /// Applies the claims in order. A claim that fails is logged and skipped; the rest
    /// still apply (the message itself is already stored).
    pub fn apply(&self, claims: &[Claim], src: &Source<'_>) -> Applied {
        let mut out = Applied::default();
        let values: Vec<&str> = claims.iter().filter(|c| matches!(c.op, Op::Set | Op::Add)).map(|c| c.value.as_str()).collect();
        self.ops.prepare_values(&values);
        for claim in claims {
            if let Err(e) = self.apply_one(claim, src, &mut out) {
                tracing::warn!(error = %e, value = %claim.value, slot = ?claim.slot, "a fact from the conversation was not applied");
            }
        }
        out
    }

    /// The values the speaker holds now for `slot` (live facts in the source's scope).
    pub fn held(&self, slot: &str, src: &Source<'_>) -> Vec<String> {
        let Some(def) = truth::slot(slot) else { return Vec::new() };
        let live = self.ops.find_facts(self.principal, src.speaker_name(), def.predicate, src.scope).unwrap_or_default();
        live.iter().filter_map(fact_of).map(|f| f.object.clone()).collect()
    }

    fn subject(&self, claim: &Claim, src: &Source<'_>) -> String {
        let speaker = src.speaker_name();
        match &claim.other {
            None => speaker.to_string(),
            Some(other) => {
                let lower = other.to_lowercase();
                for p in ["my ", "our ", "mein ", "meine ", "unser ", "unsere "] {
                    if let Some(rest) = lower.strip_prefix(p) {
                        // "my sister's dog is called Biscuit": the sister has the pet.
                        return format!("{speaker}'s {}", rest.trim_end_matches("'s"));
                    }
                }
                other.clone()
            }
        }
    }

    fn apply_one(&self, claim: &Claim, src: &Source<'_>, out: &mut Applied) -> ServiceResult<()> {
        let subject = self.subject(claim, src);
        // The value a claim replaces says which slot it is about. A bare correction names no
        // slot but that one; and a name given to someone can be any word, so the new
        // value's words do not outweigh it: "*Schnitzel, not Bagel" after "my dog Bagel"
        // renames the pet, not a favourite food. (Elsewhere they may: "it is HBase, not
        // Teradata" is a database's, even if Teradata was filed as a host; and a claim
        // that names someone itself, "I've been with Zainab since the summer", keeps its
        // slot.)
        let names_someone = |d: &&SlotDef| truth::value_kin("partner").contains(&d.id);
        let own = claim.slot.and_then(truth::slot);
        let candidates: Vec<&'static SlotDef> = match own {
            None => truth::SLOTS.iter().collect(),
            Some(d) if names_someone(&d) => vec![d],
            Some(d) => std::iter::once(d).chain(truth::SLOTS.iter().filter(names_someone)).collect(),
        };
        let holder = self.slot_holding(&subject, claim.old.as_deref(), candidates, src.scope)?;
        let def = match holder.or(own) {
            Some(d) => d,
            None => {
                out.ignored += 1;
                return Ok(());
            }
        };
        let same = |r: &MemoryRecord, v: &str| fact_of(r).is_some_and(|f| truth::normalize_value(&f.object) == truth::normalize_value(v));
        let mut live = self.ops.find_facts(self.principal, &subject, def.predicate, src.scope)?;
        // A new value must look like a value of the slot's kind ("we're on Bluehost now" is
        // no city, whatever phrase matched it): with the model, the value-kind layer says,
        // and may file it under the slot the value's kind and the clause's topic agree on.
        let mut def = def;
        // A name that replaces a held value is taken as the slot's: the value-kind layer
        // knows few names ("Komodo" reads as a food), and the replaced value said the slot.
        let name_replacing = holder.is_some() && claim.value.starts_with(char::is_uppercase);
        if matches!(claim.op, Op::Set | Op::Add) && !name_replacing && !live.iter().any(|r| same(r, &claim.value)) {
            // A slot known from the value it replaces is not weighed against the message's
            // topic, nor is the encoder's reading (it weighed the topic already). The whole
            // message, not the clause: a phrase's clause can be a fragment ("My editor these
            // days: | CotEditor").
            let clause = (holder.is_none() && !src.read).then(|| src.text.unwrap_or(&claim.clause));
            match self.ops.value_slot(def.id, &claim.value, clause).and_then(truth::slot) {
                Some(d) if d.id == def.id => {}
                Some(d) => {
                    tracing::debug!(from = def.id, to = d.id, value = %claim.value, "filed under the slot its kind and clause agree on");
                    def = d;
                    live = self.ops.find_facts(self.principal, &subject, def.predicate, src.scope)?;
                }
                None => {
                    tracing::debug!(slot = def.id, value = %claim.value, "not written: the value does not look like one of the slot's");
                    out.ignored += 1;
                    return Ok(());
                }
            }
        }
        // A value the subject holds under another slot is that slot's, mentioned: "Paprika
        // lives with my parents now" names the pet, not a partner; "Ugh typo, JupyterLab
        // not Kate" does not name a pet Kate after "my editor is Kate".
        if matches!(claim.op, Op::Set | Op::Add)
            && !live.iter().any(|r| same(r, &claim.value))
            && let Some(other) =
                self.slot_holding(&subject, Some(&claim.value), truth::SLOTS.iter().filter(|d| d.id != def.id), src.scope)?
        {
            tracing::debug!(slot = def.id, holder = other.id, value = %claim.value, "not written: the value is held under another slot");
            out.ignored += 1;
            return Ok(());
        }
        match (claim.op, def.kind) {
            (Op::Set, SlotKind::Single) | (Op::Add, SlotKind::Single) => {
                if let Some(r) = live.iter().find(|r| same(r, &claim.value)) {
                    self.ops.adjust(self.principal, &r.id, true, None, ACTOR.into(), format!("stated again{}", from_message(src)))?;
                    out.reinforced += 1;
                    // Any other live value of the slot is stale now.
                    for other in live.iter().filter(|o| o.id != r.id) {
                        self.retract(other, &format!("{} is {} now", def.label, claim.value), out)?;
                    }
                    return Ok(());
                }
                match live.last() {
                    Some(old) => {
                        let before = fact_of(old).map(|f| f.object.clone()).unwrap_or_default();
                        let change = Revision {
                            payload: Some(Payload::Semantic(self.payload(&subject, def, &claim.value, src))),
                            sensitivity: Some(old.sensitivity.max(src.sensitivity)),
                            confidence: Some(self.confidence(def, &claim.value, src)),
                            tags: Some(
                                old.tags.iter().filter(|t| *t != READ_TAG).cloned().chain(src.read.then(|| READ_TAG.to_string())).collect(),
                            ),
                            ..Revision::default()
                        };
                        let why = format!("{} changed: {before:?} → {:?}{}", def.label, claim.value, from_message(src));
                        let new = self.ops.supersede(self.principal, &old.id, change, ACTOR.into(), why)?;
                        out.superseded += 1;
                        out.record_ids.push(new.id);
                        for other in live.iter().filter(|o| o.id != old.id) {
                            self.retract(other, &format!("{} is {} now", def.label, claim.value), out)?;
                        }
                    }
                    None => self.ingest(&subject, def, claim, src, out)?,
                }
            }
            (Op::Add, SlotKind::Multi) | (Op::Set, SlotKind::Multi) => match live.iter().find(|r| same(r, &claim.value)) {
                Some(r) => {
                    self.ops.adjust(self.principal, &r.id, true, None, ACTOR.into(), format!("stated again{}", from_message(src)))?;
                    out.reinforced += 1;
                }
                None => self.ingest(&subject, def, claim, src, out)?,
            },
            (Op::Negate | Op::Remove, _) => match live.iter().find(|r| same(r, &claim.value)) {
                Some(r) => self.retract(r, &format!("no longer true{}", from_message(src)), out)?,
                None => out.ignored += 1,
            },
        }
        Ok(())
    }

    /// A new fact's confidence: its source's ([`STATED_CONFIDENCE`], [`READ_CONFIDENCE`]),
    /// or, with the model, how well the value fits the slot's kind by the value-kind
    /// layer when that is less (`Ops::value_fit`, two decimals): "list" as an allergy has
    /// 0.10. Below `retrieval.sure_confidence` the message it was read from ranks first.
    fn confidence(&self, def: &SlotDef, value: &str, src: &Source<'_>) -> f64 {
        let base = src.confidence();
        self.ops.value_fit(def.id, value).map_or(base, |fit| base.min((f64::from(fit) * 100.0).round() / 100.0))
    }

    /// The first of `slots` where the subject has a live fact whose value is `old`.
    fn slot_holding(
        &self,
        subject: &str,
        old: Option<&str>,
        slots: impl IntoIterator<Item = &'static SlotDef>,
        scope: &Scope,
    ) -> ServiceResult<Option<&'static SlotDef>> {
        let Some(old) = old.map(truth::normalize_value) else { return Ok(None) };
        for def in slots {
            let live = self.ops.find_facts(self.principal, subject, def.predicate, scope)?;
            if live.iter().any(|r| fact_of(r).is_some_and(|f| truth::normalize_value(&f.object) == old)) {
                return Ok(Some(def));
            }
        }
        Ok(None)
    }

    fn payload(&self, subject: &str, def: &SlotDef, value: &str, src: &Source<'_>) -> SemanticPayload {
        SemanticPayload {
            subject: subject.to_string(),
            predicate: def.predicate.to_string(),
            object: value.to_string(),
            valid_from: Some(src.at),
            valid_to: None,
            evidence: src.message.map(|m| vec![m.to_string()]).unwrap_or_default(),
        }
    }

    fn ingest(&self, subject: &str, def: &SlotDef, claim: &Claim, src: &Source<'_>, out: &mut Applied) -> ServiceResult<()> {
        let mut tags = vec!["source:conversation".to_string(), format!("slot:{}", def.id)];
        if claim.other.is_none() {
            tags.push(ABOUT_USER.into());
        }
        if src.read {
            tags.push(READ_TAG.into());
        }
        let options = IngestOptions {
            sensitivity: Some(src.sensitivity),
            scope: Some(src.scope.clone()),
            tags,
            confidence: Some(self.confidence(def, &claim.value, src)),
            actor: Some(ACTOR.into()),
            rationale: Some(format!("stated{}", from_message(src))),
            ..IngestOptions::default()
        };
        let record = self.ops.ingest(self.principal, Payload::Semantic(self.payload(subject, def, &claim.value, src)), options)?;
        out.ingested += 1;
        out.record_ids.push(record.id);
        Ok(())
    }

    fn retract(&self, r: &MemoryRecord, why: &str, out: &mut Applied) -> ServiceResult<()> {
        self.ops.retract(self.principal, &r.id, ACTOR.into(), why.to_string())?;
        out.retracted += 1;
        Ok(())
    }
}

fn fact_of(r: &MemoryRecord) -> Option<&SemanticPayload> {
    match &r.payload {
        Some(Payload::Semantic(f)) => Some(f),
        _ => None,
    }
}

/// A phrase's value filed under one slot while the message names a value the speaker
/// holds under another single-valued slot ("I've moved over to Komodo, Spacemacs was
/// getting too slow": a move's phrase, and the editor the speaker holds): the claim is the
/// held value's slot's, replacing it, when the encoder's reading of the message
/// (`read`: the old-value head over the held value, then the span reader past it) gives
/// that slot and the phrase's value. Claims about others, with a value they replace, or
/// whose own slot's held value the message names are left as they are; without a model
/// (`read` gives nothing) so is everything.
pub(crate) fn by_the_value_replaced(
    claims: &mut [Claim],
    text: &str,
    held: &dyn Fn(&'static str) -> Vec<String>,
    read: impl Fn(&dyn Fn(&'static str) -> Vec<String>) -> Option<(&'static str, String)>,
) {
    let named = |slot: &'static str| held(slot).into_iter().find(|v| !truth::mentions(text, v).is_empty());
    let phrased = |c: &Claim| c.other.is_none() && c.old.is_none() && c.op == Op::Set && c.slot.is_some_and(|s| named(s).is_none());
    if !claims.iter().any(phrased) {
        return;
    }
    let single = |d: &&SlotDef| d.kind == SlotKind::Single;
    let Some((slot, old)) = truth::SLOTS.iter().filter(single).find_map(|d| named(d.id).map(|v| (d.id, v))) else { return };
    let Some((read_slot, value)) = read(held) else { return };
    if read_slot != slot {
        return;
    }
    for c in claims.iter_mut().filter(|c| phrased(c)) {
        if c.slot != Some(slot) && truth::normalize_value(&c.value) == truth::normalize_value(&value) {
            tracing::debug!(from = ?c.slot, to = slot, value = %c.value, old = %old, "filed under the slot whose held value the message replaces");
            c.slot = Some(slot);
            c.old = Some(old.clone());
        }
    }
}

/// " in message <id>": rationales name the message (its evidence), never quote it, so
/// pruning or forgetting the message leaves no copy of its words in lineage.
/// One message gives a single-valued slot of the speaker one value. Where the phrases set
/// two ("So I relocated to Pittsburgh last week. The rent in Tallinn was getting insane";
/// "Officially started at InGen this week; Spacely Sprockets is behind me"), the one the
/// old-value head (`share`: how surely the message names a value as the one it replaces)
/// reads least as replaced is kept, and the other is what it replaces, when the head reads
/// that one at least [`PAIRED_REPLACED_MIN`] and by [`PAIRED_REPLACED_MARGIN`] more, and
/// the one kept looks like a value of the slot (`fit`, the value-kind layer's share on the
/// slot's kind, at least [`PAIRED_KEPT_FIT`]: "used" in "My favorite used to be rendang,
/// but now it's jollof rice" is no food). Unchanged otherwise: in order, the last stands.
pub(crate) fn one_value_per_message(
    claims: &mut Vec<Claim>,
    share: impl Fn(&str) -> Option<f32>,
    fit: impl Fn(&'static str, &str) -> Option<f32>,
) {
    let single =
        |c: &Claim| c.other.is_none() && c.op == Op::Set && c.slot.and_then(truth::slot).is_some_and(|d| d.kind == SlotKind::Single);
    let mut i = 0;
    while i < claims.len() {
        if !single(&claims[i]) {
            i += 1;
            continue;
        }
        let slot = claims[i].slot;
        let same: Vec<usize> = (0..claims.len())
            .filter(|&j| single(&claims[j]) && claims[j].slot == slot)
            .filter(|&j| truth::normalize_value(&claims[j].value) != truth::normalize_value(&claims[i].value) || j == i)
            .collect();
        if same.len() < 2 {
            i += 1;
            continue;
        }
        let shares: Option<Vec<f32>> = same.iter().map(|&j| share(&claims[j].value)).collect();
        let Some(shares) = shares else {
            i += 1;
            continue;
        };
        let by = |a: &usize, b: &usize| shares[*a].total_cmp(&shares[*b]);
        let (Some(keep), Some(old)) = ((0..same.len()).min_by(by), (0..same.len()).max_by(by)) else { break };
        let fits = claims[same[keep]].slot.and_then(|slot| fit(slot, &claims[same[keep]].value)).is_some_and(|f| f >= PAIRED_KEPT_FIT);
        if shares[old] < PAIRED_REPLACED_MIN || shares[old] < shares[keep] + PAIRED_REPLACED_MARGIN || !fits {
            i += 1;
            continue;
        }
        let (keep, old) = (same[keep], same[old]);
        let replaced = claims[old].value.clone();
        claims[keep].old.get_or_insert(replaced);
        // `same` is in ascending order: removing from the back keeps the other indices valid.
        for j in same.into_iter().rev().filter(|&j| j != keep) {
            claims.remove(j);
        }
        i = 0;
    }
}

/// The least share of the old-value head for a value a message's phrases set beside
/// another of the same slot to be read as the one replaced ([`one_value_per_message`]).
const PAIRED_REPLACED_MIN: f32 = 0.3;
/// ... and by how much more than the one kept ("After the separation from Nadine, I've
/// started a relationship with Zoltan" reads both at 0.95: no reading).
const PAIRED_REPLACED_MARGIN: f32 = 0.2;
/// The least fit to the slot's kind of the value kept.
const PAIRED_KEPT_FIT: f32 = 0.3;

fn from_message(src: &Source<'_>) -> String {
    src.message.map(|m| format!(" in message {m}")).unwrap_or_default()
}

/// A record as one line with its date: "Ana lives in Porto (since 2024-06-07)", "[2024-06-07]
/// Ana: I moved to Porto."
pub fn dated_line(r: &MemoryRecord) -> String {
    let day = |t: Timestamp| t.strftime("%Y-%m-%d").to_string();
    match &r.payload {
        Some(Payload::Semantic(f)) => {
            format!("{} {} {} (since {})", f.subject, f.predicate, f.object, day(f.valid_from.unwrap_or(r.created_at)))
        }
        Some(Payload::Event(e)) => format!("[{}] {}", day(e.event_time.unwrap_or(r.created_at)), r.summary),
        _ => format!("[{}] {}", day(r.updated_at), r.summary),
    }
}

/// One live fact as the context block states it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LiveFact {
    pub id: RecordId,
    pub subject: String,
    pub slot: Option<String>,
    pub predicate: String,
    pub value: String,
    pub since: Option<Timestamp>,
    pub about_user: bool,
    /// A newer statement that names the value or is about its slot (when and what was
    /// said): the fact may be outdated, and the block quotes the newer words in its place.
    pub newer: Option<(Timestamp, String)>,
    /// Stated before a fact it rests on changed (a manager after a change of employer):
    /// the block says so rather than stating it as current.
    pub outdated: Option<mneme_service::Outdated>,
    /// `newer` holds the words the fact was read from, not newer ones: extraction is
    /// unsure of the value (its confidence is below `retrieval.quote_confidence`), and the
    /// block quotes them in its place.
    pub own_words: bool,
}

impl LiveFact {
    /// States the value after all where the words an unsure fact was read from carry a
    /// value the user has since changed (`stale`, as [`stale_values`] gives them): a
    /// block quotes no stale value ("Drop the Coco, it's Ollie these days").
    pub fn unquote_stale(&mut self, stale: &HashSet<String>) {
        if self.own_words && self.newer.as_ref().is_some_and(|(_, said)| mentions_any(said, stale)) {
            self.newer = None;
            self.own_words = false;
        }
    }
}

/// The live facts `p` may read (every semantic record the extractor or consolidation
/// wrote that is active), in the block's order: the user's facts first, by subject,
/// then slot order, then time; at most one value per single-valued slot and subject
/// (the latest, should two ever be live).
pub fn live_facts(
    ops: &Ops,
    p: &Principal,
    max_sensitivity: Sensitivity,
    scopes: Option<Vec<Scope>>,
    limit: usize,
) -> ServiceResult<Vec<LiveFact>> {
    let request = RetrieveRequest {
        scopes,
        types: vec![MemoryType::Semantic],
        max_sensitivity: Some(max_sensitivity),
        limit: limit.clamp(1, ops.limits().max_limit),
        ..RetrieveRequest::default()
    };
    live_facts_of(ops, p, &ops.retrieve(p, &request)?)
}

/// The user's facts (tagged `about:user`), read once with the ones no longer live: the
/// live ones as [`live_facts`] gives them (what the session-start block always states), and
/// the normalised values of the superseded and withdrawn ones (see [`stale_values`]). The
/// store reads only the user's facts, not every fact `p` may read (a store with thousands
/// of facts about other things made each session start load them all, twice).
pub fn user_facts(
    ops: &Ops,
    p: &Principal,
    max_sensitivity: Sensitivity,
    scopes: Option<Vec<Scope>>,
    limit: usize,
) -> ServiceResult<(Vec<LiveFact>, Vec<String>)> {
    let request = RetrieveRequest {
        scopes,
        types: vec![MemoryType::Semantic],
        tags: vec![ABOUT_USER.into()],
        max_sensitivity: Some(max_sensitivity),
        include_tombstones: true,
        limit: limit.clamp(1, ops.limits().max_limit),
        ..RetrieveRequest::default()
    };
    let hits = ops.retrieve(p, &request)?;
    let old = hits
        .iter()
        .filter(|h| h.record.status != Status::Active)
        .filter_map(|h| fact_of(&h.record).map(|f| truth::normalize_value(&f.object)))
        .collect();
    Ok((live_facts_of(ops, p, &hits)?, old))
}

/// The live facts among `hits` (active semantic records), in the block's order and at most
/// one value per single-valued slot and subject, without asking the store again.
pub fn live_facts_of(ops: &Ops, p: &Principal, hits: &[Hit]) -> ServiceResult<Vec<LiveFact>> {
    let facts = hits.iter().filter_map(|h| live_fact(ops, p, h)).collect::<ServiceResult<_>>()?;
    Ok(in_block_order(facts))
}

/// The fact a hit states, if it is an active semantic record (with the newer statement on
/// its topic for the user's single-valued facts).
fn live_fact(ops: &Ops, p: &Principal, h: &Hit) -> Option<ServiceResult<LiveFact>> {
    if h.record.status != Status::Active {
        return None;
    }
    let f = fact_of(&h.record)?.clone();
    let slot = h.record.tags.iter().find_map(|t| t.strip_prefix("slot:")).map(str::to_string);
    let about_user = h.record.tags.iter().any(|t| t == ABOUT_USER);
    let single = slot.as_deref().and_then(truth::slot).is_some_and(|d| d.kind == SlotKind::Single);
    // Below `retrieval.quote_confidence`, the words the fact was read from stand in its
    // place (recall already puts them first below `retrieval.sure_confidence`).
    let quoted = about_user && ops.quotes_in_place(&h.record);
    // Only the user's single-valued facts: one value, and a newer word about it; and the
    // words a quoted fact was read from.
    let newer = if about_user && (single || quoted) {
        match ops.newer_statement(p, &h.record) {
            Ok(found) => found.map(|r| (mneme_service::is_evidence(&h.record, &r), r)).filter(|(own, _)| quoted || !own),
            Err(e) => return Some(Err(e)),
        }
    } else {
        None
    };
    let own_words = newer.as_ref().is_some_and(|(own, _)| *own);
    let newer = newer.and_then(|(_, r)| match r.payload {
        Some(mneme_core::Payload::Event(e)) => Some((e.event_time.unwrap_or(r.created_at), e.text)),
        _ => None,
    });
    Some(Ok(LiveFact {
        outdated: h.outdated.clone(),
        id: h.record.id.clone(),
        about_user,
        since: f.valid_from.or(Some(h.record.created_at)),
        subject: f.subject,
        slot,
        predicate: f.predicate,
        value: f.object,
        newer,
        own_words,
    }))
}

/// The block's order (the user's facts first, by subject, then slot order, then time),
/// keeping the latest value of each single-valued slot and subject.
fn in_block_order(mut facts: Vec<LiveFact>) -> Vec<LiveFact> {
    let order = |f: &LiveFact| f.slot.as_deref().and_then(|s| truth::SLOTS.iter().position(|d| d.id == s)).unwrap_or(usize::MAX);
    facts.sort_by(|a, b| {
        b.about_user
            .cmp(&a.about_user)
            .then_with(|| a.subject.to_lowercase().cmp(&b.subject.to_lowercase()))
            .then_with(|| order(a).cmp(&order(b)))
            .then_with(|| a.predicate.cmp(&b.predicate))
            .then_with(|| a.since.cmp(&b.since))
            .then_with(|| a.id.as_str().cmp(b.id.as_str()))
    });
    // One value per single-valued slot and subject: the latest.
    let mut seen: HashSet<(String, String)> = HashSet::new();
    let mut kept: Vec<LiveFact> = Vec::new();
    for f in facts.into_iter().rev() {
        let single = f.slot.as_deref().and_then(truth::slot).is_some_and(|d| d.kind == SlotKind::Single);
        if single && !seen.insert((f.subject.to_lowercase(), f.predicate.to_lowercase())) {
            continue;
        }
        kept.push(f);
    }
    kept.reverse();
    kept
}

/// The facts as Markdown lines grouped by subject, within `budget` characters.
pub fn facts_markdown(facts: &[LiveFact], budget: usize) -> String {
    let mut groups: BTreeMap<(bool, String), Vec<&LiveFact>> = BTreeMap::new();
    let mut order: Vec<(bool, String)> = Vec::new();
    for f in facts {
        let key = (!f.about_user, f.subject.clone());
        if !groups.contains_key(&key) {
            order.push(key.clone());
        }
        groups.entry(key).or_default().push(f);
    }
    let mut out = String::new();
    // Facts outside the slots ("Nginx uses TLS 1.3") read as sentences, after the people.
    let (people, things): (Vec<_>, Vec<_>) = order.into_iter().partition(|k| groups[k].iter().any(|f| f.about_user || f.slot.is_some()));
    let mut general = String::new();
    for key in &things {
        // A known fact that names a value the user has since changed ("Lisbon is 20
        // minutes on the tram" after a move) is left out, as messages carrying one are.
        for f in groups[key].iter().filter(|f| f.outdated.as_ref().is_none_or(|o| o.by != mneme_service::RestsBy::NamesOld)) {
            let date = f.since.map(|t| format!(" (since {})", t.strftime("%Y-%m-%d"))).unwrap_or_default();
            general.push_str(&format!("- {} {} {}{date}\n", f.subject, f.predicate, f.value));
        }
    }
    for key in people {
        let list = &groups[&key];
        let heading = if key.0 { format!("### {}\n", key.1) } else { format!("### {} (the user)\n", key.1) };
        let mut section = heading;
        // Multi-valued slots on one line: "hobbies: climbing, pottery".
        let mut lines: Vec<(String, Vec<String>, Option<Timestamp>)> = Vec::new();
        let mut doubts: Vec<String> = Vec::new();
        for f in list {
            let label = f.slot.as_deref().and_then(truth::slot).map_or(f.predicate.clone(), |d| d.label.to_string());
            let since = f.since.map(|t| format!(" (since {})", t.strftime("%Y-%m-%d"))).unwrap_or_default();
            // Fail safe: a fact a newer statement puts in doubt is not stated at all. The
            // newer words stand in its place, with their date, and the agent is told to ask:
            // an older value beside them is what a reader takes for current ("jollof rice
            // (since …), possibly outdated: … shakshuka is number one now").
            if let Some((at, said)) = &f.newer {
                let said: String = said.chars().take(200).collect();
                let recorded = f.since.map(|t| format!(" on {}", t.strftime("%Y-%m-%d"))).unwrap_or_default();
                let why = if f.own_words {
                    "no value read from it with certainty".to_string()
                } else {
                    format!("newer than the value recorded{recorded}; ask if unsure")
                };
                let line = format!("- {label}: on {} they said \"{}\" ({why})\n", at.strftime("%Y-%m-%d"), said.trim());
                // Two values read from one message ("list" and "sadly") quote it once.
                if !doubts.contains(&line) {
                    doubts.push(line);
                }
                continue;
            }
            if let Some(o) = &f.outdated {
                doubts.push(format!("- {label}: {}{since}, {}\n", f.value, o.describe()));
                continue;
            }
            match lines.iter_mut().find(|(l, _, _)| *l == label) {
                Some((_, values, since)) => {
                    values.push(f.value.clone());
                    *since = (*since).max(f.since);
                }
                None => lines.push((label, vec![f.value.clone()], f.since)),
            }
        }
        for (label, values, since) in lines {
            let date = since.map(|t| format!(" (since {})", t.strftime("%Y-%m-%d"))).unwrap_or_default();
            section.push_str(&format!("- {label}: {}{date}\n", values.join(", ")));
        }
        for doubt in doubts {
            section.push_str(&doubt);
        }
        if out.len() + section.len() > budget {
            break;
        }
        out.push_str(&section);
    }
    if !general.is_empty() && out.len() + general.len() + 20 <= budget {
        out.push_str("### Known facts\n");
        out.push_str(&general);
    }
    out
}

/// For each slot no live fact about the user states, the newest statement of theirs the
/// topic layer puts there (with the embedding model), quoted with its date: extraction
/// read no fact from it, so the block shows the words, not a value it cannot vouch for.
///
/// A message the block already quotes beside a fact (newer words about it, or the words
/// an unsure fact was read from) is not quoted again under another slot: one message, one
/// place, the one extraction and the topic layer agreed on.
pub fn unread_markdown(ops: &Ops, p: &Principal, user_facts: &[LiveFact]) -> ServiceResult<String> {
    let mut out = String::new();
    let mut quoted: HashSet<String> = user_facts.iter().filter_map(|f| f.newer.as_ref().map(|(_, said)| said.trim().to_string())).collect();
    for def in truth::SLOTS {
        if user_facts.iter().any(|f| f.slot.as_deref() == Some(def.id)) {
            continue;
        }
        let Some(r) = ops.topic_statement(p, def.id)? else { continue };
        let Some(mneme_core::Payload::Event(e)) = &r.payload else { continue };
        if !quoted.insert(e.text.trim().to_string()) {
            continue;
        }
        let said: String = e.text.chars().take(200).collect();
        let at = e.event_time.unwrap_or(r.created_at).strftime("%Y-%m-%d");
        out.push_str(&format!("- {}: not recorded as a fact; on {at} they said \"{}\"\n", def.label, said.trim()));
    }
    Ok(if out.is_empty() { out } else { format!("### In the user's words\n{out}") })
}

/// Values the user once stated and has since changed or withdrawn (superseded or
/// retracted facts about the user, normalised: `old` from [`user_facts`]), less any value a
/// live fact states: a message carrying one is stale.
pub fn stale_values(old: &[String], live: &[LiveFact]) -> HashSet<String> {
    let current: HashSet<String> = live.iter().map(|f| truth::normalize_value(&f.value)).collect();
    old.iter().filter(|v| !current.contains(*v)).cloned().collect()
}

/// Does `text` mention one of `values` as whole words?
pub fn mentions_any(text: &str, values: &HashSet<String>) -> bool {
    let lower = text.to_lowercase();
    values.iter().any(|v| mneme_core::query::contains_word(&lower, v))
}
