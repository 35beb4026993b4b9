//! Consolidation: buffered conversation turned into durable facts (the seed's consolidator).
//!
//! A cycle drains the buffer, extracts facts with the regex patterns (always) and, when an
//! OpenAI-compatible endpoint is configured and not backing off, with the LLM (the seed's
//! system prompt and JSON schema, validated). Each fact is then ingested or used to revise:
//! the same fact again reinforces it, a conflicting one supersedes it at confidence ≥ 0.8
//! and contests it below (the new fact is kept and linked as the contesting record), a new
//! one is ingested. LLM failures (timeouts, HTTP errors including 429, invalid JSON or
//! schema) back off exponentially: base, 2×, 4×, 8×, capped at 10× the base (1, 2, 4, 8,
//! 10 minutes by default); a cycle in backoff runs regex-only and says so in its report.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use jiff::Timestamp;
use mneme_core::{CompetencePayload, MemoryRecord, Payload, Performance, RecordId, Scope, SemanticPayload, Sensitivity, one_line};
use mneme_service::{ContestRequest, IngestOptions, Revision};
use serde::{Deserialize, Serialize};

use mneme_service::{Ops, Principal, ServiceResult};

use crate::config::ConsolidationConfig;
use crate::hooks::{BufferedMessage, find_fact};
use mneme_llm::{Chat, LlmClient, LlmError, extract_json};

pub const ACTOR: &str = "mneme:consolidator";

pub const SYSTEM_PROMPT: &str = r#"You are a memory consolidation engine for an AI agent. Given a sequence of conversation events, extract durable knowledge that should persist beyond this session.

Output valid JSON matching this schema:
{
  "facts": [
    { "subject": "string", "predicate": "string", "object": "string", "confidence": 0.0-1.0 }
  ],
  "competence": [
    { "skill": "skill:name", "triggers": ["when to use"], "steps": ["step 1", "step 2"], "outcome": "success|failure" }
  ],
  "corrections": [
    { "old_fact": "what was previously known", "new_fact": "what is now true", "reason": "evidence" }
  ]
}

Rules:
- Only extract facts useful in future conversations
- Minimum confidence 0.6 for facts, 0.7 for competence
- Corrections require explicit evidence in the conversation
- Subject-Predicate-Object format for facts (e.g., "Docker" "requires" "sg wrapper on this system")
- Skill names use colon-separated namespaces (e.g., "skill:docker+exec", "skill:git+rebase")
- Do NOT extract noise: greetings, pleasantries, meta-discussion, or vague statements
- Prefer specific, actionable knowledge over generic observations

Each conversation line starts with its date and its speaker. "I", "my", "we" in a user's line mean that user: use their name as the subject. What the assistant suggests is not a fact. Questions, plans and hypotheticals are not facts.

"Known facts" lists what memory holds now, each with an id. Decide for each fact the conversation touches, in "memory":
  { "memory": [ { "event": "ADD" | "UPDATE" | "DELETE" | "NONE", "id": "F1", "subject": "string", "predicate": "string", "object": "string", "reason": "string" } ] }
- ADD: a new fact (no id). UPDATE: a known fact's value changed (its id and the new object; e.g. the user moved). DELETE: a known fact is no longer true (its id). NONE: nothing changes.
- For facts about a person prefer these predicates: {PREDICATES}.
- The latest statement wins: when the user changed something, the known fact is UPDATEd, not kept beside the new one."#;

/// What the LLM returns, after validation.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Extraction {
    pub facts: Vec<Fact>,
    pub competence: Vec<Skill>,
    pub corrections: Vec<Correction>,
    /// Decisions about known and new facts (mem0-style).
    pub memory: Vec<Decision>,
}

/// One decision of the model about a fact: add a new one, update or delete a known one
/// (by the id the prompt gave it), or leave it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Decision {
    pub event: DecisionKind,
    #[serde(default)]
    pub id: Option<String>,
    #[serde(default)]
    pub subject: String,
    #[serde(default)]
    pub predicate: String,
    #[serde(default)]
    pub object: String,
    #[serde(default)]
    pub reason: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum DecisionKind {
    Add,
    Update,
    Delete,
    None,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Fact {
    pub subject: String,
    pub predicate: String,
    pub object: String,
    pub confidence: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Skill {
    pub skill: String,
    #[serde(default)]
    pub triggers: Vec<String>,
    pub steps: Vec<String>,
    #[serde(default)]
    pub outcome: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Correction {
    pub old_fact: String,
    pub new_fact: String,
    #[serde(default)]
    pub reason: String,
}

/// What one cycle did.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct CycleReport {
    pub at: Option<Timestamp>,
    pub messages: usize,
    pub regex_facts: usize,
    pub llm_facts: usize,
    pub llm_skills: usize,
    pub reinforced: usize,
    pub superseded: usize,
    pub contested: usize,
    pub ingested: usize,
    /// Known facts the model said are no longer true.
    pub retracted: usize,
    /// Decisions not applied because a newer statement holds the slot (the latest wins).
    pub kept_newer: usize,
    /// The model's `corrections` (membrane §11) that named a known fact, applied as its new value.
    pub corrections: usize,
    /// Corrections that named no known fact, or gave no new value: not applied.
    pub corrections_unmatched: usize,
    /// `ok`, `disabled` (no endpoint), `backoff` (skipped), or the failure.
    pub llm: String,
    pub errors: Vec<String>,
}

/// The consolidator: a bounded buffer and the shared LLM client (which holds the backoff).
#[derive(Debug)]
pub struct Consolidator {
    ops: Ops,
    principal: Arc<Principal>,
    llm: Arc<LlmClient>,
    batch_size: usize,
    min_confidence: f64,
    llm_max_sensitivity: Sensitivity,
    buffer: Mutex<VecDeque<BufferedMessage>>,
    /// The users' names seen in buffered messages (facts about them are `about:user`).
    speakers: Mutex<std::collections::BTreeSet<String>>,
    last: Mutex<Option<CycleReport>>,
    /// One cycle at a time (the timer, a flush and an explicit request may coincide).
    /// Owned by the blocking apply step too, so a cancelled cycle still holds it until its
    /// facts are written.
    running: Arc<tokio::sync::Mutex<()>>,
}

impl Consolidator {
    /// `principal`: whose policy consolidation writes under (the daemon's own); `llm`: the
    /// client for `[consolidation]`'s endpoint (`ConsolidationConfig::llm_settings`).
    pub fn new(ops: Ops, principal: Arc<Principal>, config: &ConsolidationConfig, llm: Arc<LlmClient>) -> Self {
        Consolidator {
            ops,
            principal,
            llm,
            batch_size: config.batch_size,
            min_confidence: config.min_confidence,
            llm_max_sensitivity: config.llm_max_sensitivity,
            buffer: Mutex::new(VecDeque::new()),
            speakers: Mutex::new(Default::default()),
            last: Mutex::new(None),
            running: Arc::new(tokio::sync::Mutex::new(())),
        }
    }

    /// Adds messages; beyond twice the batch size the oldest are dropped.
    pub fn buffer(&self, messages: Vec<BufferedMessage>) {
        {
            let mut speakers = self.speakers.lock().unwrap_or_else(|p| p.into_inner());
            // Bounded: the names of the people the agent serves, not of every message.
            for name in messages.iter().filter_map(|m| m.sender.clone()) {
                if speakers.len() < 1000 {
                    speakers.insert(name);
                }
            }
        }
        let mut buf = self.buffer.lock().unwrap_or_else(|p| p.into_inner());
        buf.extend(messages);
        self.cap(&mut buf);
    }

    /// Drops the oldest messages beyond twice the batch size.
    fn cap(&self, buf: &mut VecDeque<BufferedMessage>) {
        let excess = buf.len().saturating_sub(self.batch_size * 2);
        buf.drain(..excess);
    }

    pub fn buffered(&self) -> usize {
        self.buffer.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    pub fn last_report(&self) -> Option<CycleReport> {
        self.last.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Runs one cycle over everything buffered. Never fails: problems are in the report.
    ///
    /// Messages are consolidated per scope: facts land in (and revise only facts of) the
    /// scope their messages came from, at those messages' sensitivity. Only messages at or
    /// below `consolidation.llm_max_sensitivity` are sent to the LLM. If the cycle is
    /// cancelled before its facts are applied (shutdown), its messages go back to the buffer.
    pub async fn run_cycle(self: &Arc<Self>) -> CycleReport {
        self.run_cycle_until(None).await
    }

    /// [`Consolidator::run_cycle`] with every LLM call ending by `deadline` (the shutdown's
    /// flush: a slow LLM then times out and regex facts are still applied).
    pub async fn run_cycle_until(self: &Arc<Self>, deadline: Option<tokio::time::Instant>) -> CycleReport {
        let one = self.running.clone().lock_owned().await;
        let batch: Vec<BufferedMessage> = self.buffer.lock().unwrap_or_else(|p| p.into_inner()).drain(..).collect();
        let mut report = CycleReport { at: Some(self.ops.now()), messages: batch.len(), ..CycleReport::default() };
        if batch.is_empty() {
            // Nothing to do; the last real cycle stays the one `status` reports.
            report.llm = "idle".into();
            return report;
        }
        let mut requeue = Requeue { consolidator: self, batch: Some(batch) };
        let mut work: Vec<ScopeWork> = Vec::new();
        let mut llm: Vec<String> = Vec::new();
        for (scope, messages) in by_scope(requeue.batch.as_deref().unwrap_or_default()) {
            let (group, status) = self.extract(scope, &messages, deadline, &mut report).await;
            if !llm.contains(&status) {
                llm.push(status);
            }
            work.push(group);
        }
        report.llm = llm.join("; ");
        // From here on the cycle completes even if its caller is cancelled, so the
        // messages are no longer requeued.
        requeue.batch = None;
        let report = self.apply(work, report, one).await;
        tracing::info!(
            messages = report.messages,
            regex_facts = report.regex_facts,
            llm_facts = report.llm_facts,
            llm = %report.llm,
            errors = report.errors.len(),
            "consolidation cycle complete"
        );
        self.finish(report)
    }

    /// One scope's facts and skills: regex facts from every message (confidence 0.5, each
    /// at its message's sensitivity), and LLM facts from the messages it may see, unless
    /// disabled or backing off (they take the highest sensitivity among those messages).
    /// Returns the work and the LLM status for the report.
    async fn extract(
        &self,
        scope: Scope,
        messages: &[&BufferedMessage],
        deadline: Option<tokio::time::Instant>,
        report: &mut CycleReport,
    ) -> (ScopeWork, String) {
        let mut group = ScopeWork {
            scope,
            facts: Vec::new(),
            decisions: Vec::new(),
            known: Vec::new(),
            skills: Vec::new(),
            skill_sensitivity: Sensitivity::Low,
        };
        for m in messages.iter().filter(|m| m.role == "user") {
            for t in crate::hooks::general_facts(&m.content) {
                let fact = Fact { subject: t.subject, predicate: t.predicate, object: t.object, confidence: 0.5 };
                group.facts.push((fact, m.sensitivity));
            }
        }
        report.regex_facts += group.facts.len();
        let sendable: Vec<&BufferedMessage> = messages.iter().copied().filter(|m| m.sensitivity <= self.llm_max_sensitivity).collect();
        let allowed = if self.llm.enabled() { self.llm.check_backoff() } else { Err(LlmError::Disabled) };
        let status = match allowed {
            Err(reason) => reason.to_string(),
            Ok(()) if sendable.is_empty() => "skipped: every message is above consolidation.llm_max_sensitivity".into(),
            Ok(()) => match self.call_llm_until(&sendable, &group.scope, deadline).await {
                Ok((extraction, known)) => {
                    let sensitivity = sendable.iter().map(|m| m.sensitivity).max().unwrap_or(Sensitivity::Low);
                    group.known = known.iter().map(|f| f.id.clone()).collect();
                    // A correction is an UPDATE of the known fact it names, applied as the
                    // model's other decisions are (`decide`: that record superseded with
                    // lineage, unless a newer statement holds it).
                    for c in &extraction.corrections {
                        match correction_update(c, &known) {
                            Some(d) => {
                                report.corrections += 1;
                                let at = decision_time(&d, &sendable);
                                group.decisions.push((d, at, sensitivity));
                            }
                            None => report.corrections_unmatched += 1,
                        }
                    }
                    for d in extraction.memory {
                        report.llm_facts += usize::from(d.event != DecisionKind::None);
                        let at = decision_time(&d, &sendable);
                        group.decisions.push((d, at, sensitivity));
                    }
                    for f in extraction.facts.into_iter().filter(|f| f.confidence >= self.min_confidence) {
                        report.llm_facts += 1;
                        group.facts.push((f, sensitivity));
                    }
                    report.llm_skills += extraction.competence.len();
                    group.skills = extraction.competence;
                    group.skill_sensitivity = sensitivity;
                    "ok".into()
                }
                Err(e) => {
                    let wait = match self.llm.check_backoff() {
                        Err(LlmError::Backoff { remaining }) => remaining,
                        _ => std::time::Duration::ZERO,
                    };
                    tracing::warn!(error = %e, backoff_secs = wait.as_secs_f64(), "LLM consolidation failed; regex only until the backoff ends");
                    report.errors.push(format!("LLM: {e}"));
                    format!("failed: {e} (backing off {:.1} s)", wait.as_secs_f64())
                }
            },
        };
        (group, status)
    }

    /// Ingests or revises every fact and skill, on a blocking thread that owns the cycle
    /// lock (`one`), so a cancelled caller still lets the writes finish under the lock.
    async fn apply(self: &Arc<Self>, work: Vec<ScopeWork>, report: CycleReport, one: tokio::sync::OwnedMutexGuard<()>) -> CycleReport {
        let this = self.clone();
        let applied = tokio::task::spawn_blocking(move || {
            let _one = one;
            let mut report = report;
            for group in work {
                for (fact, sensitivity) in group.facts {
                    if let Err(e) = this.ingest_or_revise(&fact, sensitivity, &group.scope, None, &mut report) {
                        report.errors.push(format!("{} {} {}: {e}", fact.subject, fact.predicate, fact.object));
                    }
                }
                for (decision, at, sensitivity) in group.decisions {
                    if let Err(e) = this.decide(&decision, at, sensitivity, &group.scope, &group.known, &mut report) {
                        report.errors.push(format!("{:?} {}: {e}", decision.event, decision.id.as_deref().unwrap_or(&decision.object)));
                    }
                }
                for skill in group.skills {
                    if let Err(e) = this.ingest_skill(&skill, group.skill_sensitivity, &group.scope) {
                        report.errors.push(format!("{}: {e}", skill.skill));
                    }
                }
            }
            report
        })
        .await;
        match applied {
            Ok(r) => r,
            Err(e) => {
                CycleReport { at: Some(self.ops.now()), llm: "aborted".into(), errors: vec![e.to_string()], ..CycleReport::default() }
            }
        }
    }

    fn finish(&self, report: CycleReport) -> CycleReport {
        *self.last.lock().unwrap_or_else(|p| p.into_inner()) = Some(report.clone());
        report
    }

    async fn call_llm_until(
        &self,
        batch: &[&BufferedMessage],
        scope: &Scope,
        deadline: Option<tokio::time::Instant>,
    ) -> Result<(Extraction, Vec<crate::truth::LiveFact>), LlmError> {
        match deadline {
            None => self.call_llm(batch, scope).await,
            Some(at) => tokio::time::timeout_at(at, self.call_llm(batch, scope)).await.unwrap_or(Err(LlmError::Timeout)),
        }
    }

    /// Asks the model about `batch`, showing it the live facts about the speakers and the
    /// subjects the batch names (`F1`, `F2`, … in the prompt; their record ids returned in
    /// that order).
    async fn call_llm(&self, batch: &[&BufferedMessage], scope: &Scope) -> Result<(Extraction, Vec<crate::truth::LiveFact>), LlmError> {
        let known = self.known_facts(batch, scope);
        let mut prompt = String::new();
        if !known.is_empty() {
            prompt.push_str("Known facts:\n");
            for (i, f) in known.iter().enumerate() {
                let since = f.since.map(|t| format!(" (since {})", t.strftime("%Y-%m-%d"))).unwrap_or_default();
                prompt.push_str(&format!("F{}: {} {} {}{since}\n", i + 1, f.subject, f.predicate, f.value));
            }
            prompt.push('\n');
        }
        prompt.push_str("Conversation:\n");
        for m in batch {
            let who = match (&m.sender, m.role.as_str()) {
                (Some(name), role) => format!("{name} ({role})"),
                (None, role) => role.to_string(),
            };
            prompt.push_str(&format!("[{}] {who}: {}\n", m.timestamp.strftime("%Y-%m-%d %H:%M"), m.content));
        }
        let predicates = mneme_truth::SLOTS.iter().map(|s| format!("\"{}\"", s.predicate)).collect::<Vec<_>>().join(", ");
        let system = SYSTEM_PROMPT.replace("{PREDICATES}", &predicates);
        let value = self.llm.chat_json(&Chat::new(&system, &prompt)).await?;
        let extraction = extraction_from(value).map_err(|e| {
            self.llm.failed();
            LlmError::BadResponse(e)
        })?;
        Ok((extraction, known))
    }

    /// Live facts about the batch's speakers and about subjects its messages name.
    fn known_facts(&self, batch: &[&BufferedMessage], scope: &Scope) -> Vec<crate::truth::LiveFact> {
        let p = &*self.principal;
        let scopes = (!scope.is_global()).then(|| vec![scope.clone()]);
        let facts = match crate::truth::live_facts(&self.ops, p, self.llm_max_sensitivity, scopes, self.ops.limits().max_limit) {
            Ok(f) => f,
            Err(e) => {
                tracing::warn!(error = %e, "known facts not read; the model sees the conversation only");
                return Vec::new();
            }
        };
        let text: String = batch.iter().map(|m| m.content.to_lowercase()).collect::<Vec<_>>().join("\n");
        let speakers: Vec<String> = batch.iter().filter_map(|m| m.sender.as_ref().map(|s| s.to_lowercase())).collect();
        facts
            .into_iter()
            .filter(|f| speakers.contains(&f.subject.to_lowercase()) || text.contains(&f.subject.to_lowercase()))
            .take(KNOWN_FACTS_SHOWN)
            .collect()
    }

    /// Applies one decision of the model. The latest statement wins: a decision speaks for
    /// the time of the message it is about (`at`), and a known fact stated after that is
    /// kept (`kept_newer`).
    fn decide(
        &self,
        d: &Decision,
        at: Timestamp,
        sensitivity: Sensitivity,
        scope: &Scope,
        known: &[RecordId],
        report: &mut CycleReport,
    ) -> ServiceResult<()> {
        let p = &*self.principal;
        let target = || -> ServiceResult<MemoryRecord> {
            let id = d.id.as_deref().unwrap_or("");
            let n: usize = id.trim_start_matches(['F', 'f']).parse().unwrap_or(0);
            let record = n.checked_sub(1).and_then(|i| known.get(i)).ok_or_else(|| {
                mneme_service::ServiceError::invalid("memory.id", format!("{id:?} is not one of the known facts F1..F{}", known.len()))
            })?;
            Ok(self.ops.get(p, record)?.0)
        };
        let newer = |r: &MemoryRecord| match &r.payload {
            Some(Payload::Semantic(f)) => f.valid_from.unwrap_or(r.created_at) > at,
            _ => false,
        };
        match d.event {
            DecisionKind::None => Ok(()),
            DecisionKind::Add => {
                let fact = Fact { subject: d.subject.clone(), predicate: d.predicate.clone(), object: d.object.clone(), confidence: 0.8 };
                self.ingest_or_revise(&fact, sensitivity, scope, Some(at), report)
            }
            DecisionKind::Update | DecisionKind::Delete => {
                let old = target()?;
                if old.status != mneme_core::Status::Active {
                    // Revised since the prompt was built (a newer message reconciled it).
                    report.kept_newer += 1;
                    return Ok(());
                }
                if newer(&old) {
                    report.kept_newer += 1;
                    return Ok(());
                }
                let Some(Payload::Semantic(f)) = &old.payload else { return Ok(()) };
                let why = if d.reason.trim().is_empty() { "the conversation says so".to_string() } else { one_line(&d.reason, 500) };
                if d.event == DecisionKind::Delete {
                    self.ops.retract(p, &old.id, ACTOR.into(), format!("no longer true (LLM): {why}"))?;
                    report.retracted += 1;
                    return Ok(());
                }
                if d.object.trim().is_empty() {
                    return Err(mneme_service::ServiceError::invalid("memory.object", "UPDATE needs the new value"));
                }
                let payload = SemanticPayload { object: d.object.trim().to_string(), valid_from: Some(at), ..f.clone() };
                let change = Revision {
                    payload: Some(Payload::Semantic(payload)),
                    sensitivity: Some(old.sensitivity.max(sensitivity)),
                    ..Revision::default()
                };
                self.ops.supersede(
                    p,
                    &old.id,
                    change,
                    ACTOR.into(),
                    format!("updated: {:?} → {:?} (LLM: {why})", f.object, d.object.trim()),
                )?;
                report.superseded += 1;
                Ok(())
            }
        }
    }

    /// The seed's ingest-or-revise, within `scope`. A revision is at least as sensitive
    /// as the fact it replaces and as the messages it came from.
    fn ingest_or_revise(
        &self,
        fact: &Fact,
        sensitivity: Sensitivity,
        scope: &Scope,
        at: Option<Timestamp>,
        report: &mut CycleReport,
    ) -> ServiceResult<()> {
        let p = &*self.principal;
        let existing = find_fact(&self.ops, p, &fact.subject, &fact.predicate, scope)?;
        // The latest statement wins: a known value stated after the message this fact
        // comes from stays.
        if let Some(at) = at
            && existing.iter().any(|f| f.fact.valid_from.is_some_and(|v| v > at) && !f.fact.object.eq_ignore_ascii_case(&fact.object))
        {
            report.kept_newer += 1;
            return Ok(());
        }
        if let Some(same) = existing.iter().find(|f| f.fact.object.eq_ignore_ascii_case(&fact.object)) {
            self.ops.adjust(p, &same.id, true, None, ACTOR.into(), "confirmed by consolidation".into())?;
            report.reinforced += 1;
            return Ok(());
        }
        let payload = SemanticPayload {
            subject: fact.subject.clone(),
            predicate: fact.predicate.clone(),
            object: fact.object.clone(),
            valid_from: at,
            valid_to: None,
            evidence: Vec::new(),
        };
        if let Some(old) = existing.first() {
            // The rationale and a contest claim land in the old record's audit, readable at
            // the old record's sensitivity: they name the new fact only if it is no more
            // sensitive.
            let may_name = sensitivity <= old.sensitivity;
            if fact.confidence >= 0.8 {
                let change = Revision {
                    payload: Some(Payload::Semantic(payload)),
                    confidence: Some(fact.confidence),
                    sensitivity: Some(old.sensitivity.max(sensitivity)),
                    ..Revision::default()
                };
                let why = if may_name {
                    format!("updated: {:?} → {:?} (confidence {:.2})", old.fact.object, fact.object, fact.confidence)
                } else {
                    format!("updated by a more sensitive conversation (confidence {:.2})", fact.confidence)
                };
                self.ops.supersede(p, &old.id, change, ACTOR.into(), why)?;
                report.superseded += 1;
            } else {
                let new = self.ops.ingest(p, Payload::Semantic(payload), self.options(sensitivity, scope, fact.confidence))?;
                let claim = may_name.then(|| format!("{} {} {}", fact.subject, fact.predicate, fact.object));
                let contest = ContestRequest { by: Some(new.id), claim };
                let why = format!("conflicting observation (confidence {:.2})", fact.confidence);
                self.ops.contest(p, &old.id, contest, ACTOR.into(), why)?;
                report.contested += 1;
            }
            return Ok(());
        }
        let mut options = self.options(sensitivity, scope, fact.confidence);
        if let Some(slot) = mneme_truth::SLOTS.iter().find(|s| s.predicate.eq_ignore_ascii_case(fact.predicate.trim())) {
            options.tags.push(format!("slot:{}", slot.id));
            if self.is_speaker(&fact.subject) {
                options.tags.push(crate::truth::ABOUT_USER.into());
            }
        }
        self.ops.ingest(p, Payload::Semantic(payload), options)?;
        report.ingested += 1;
        Ok(())
    }

    /// Is `subject` someone who spoke in recent batches (a user, as opposed to a third party)?
    fn is_speaker(&self, subject: &str) -> bool {
        self.speakers.lock().unwrap_or_else(|p| p.into_inner()).iter().any(|s| s.eq_ignore_ascii_case(subject))
    }

    fn ingest_skill(&self, skill: &Skill, sensitivity: Sensitivity, scope: &Scope) -> ServiceResult<()> {
        let p = &*self.principal;
        // The model's `outcome` (membrane §11): a skill seen failing is penalised, not
        // reinforced, and a new skill's statistics start with what was seen.
        let outcome = skill.outcome.as_deref().map(|o| o.trim().to_ascii_lowercase());
        let failed = outcome.as_deref() == Some("failure");
        if let Some(known) = self.ops.find_skills(p, &skill.skill, scope)?.first() {
            let why = if failed { "skill seen failing in conversation" } else { "skill seen again in conversation" };
            self.ops.adjust(p, &known.id, !failed, None, ACTOR.into(), why.into())?;
            return Ok(());
        }
        let mut performance = Performance::default();
        match outcome.as_deref() {
            Some("success") => performance.record(true, None, None),
            Some("failure") => performance.record(false, None, None),
            _ => {}
        }
        let payload =
            CompetencePayload { skill: skill.skill.clone(), triggers: skill.triggers.clone(), steps: skill.steps.clone(), performance };
        let mut options = self.options(sensitivity, scope, 0.7);
        options.tags.push("kind:skill".into());
        self.ops.ingest(p, Payload::Competence(payload), options)?;
        Ok(())
    }

    fn options(&self, sensitivity: Sensitivity, scope: &Scope, confidence: f64) -> IngestOptions {
        IngestOptions {
            sensitivity: Some(sensitivity),
            scope: Some(scope.clone()),
            tags: vec!["source:consolidation".into()],
            confidence: Some(confidence.clamp(0.0, 1.0)),
            actor: Some(ACTOR.into()),
            ..IngestOptions::default()
        }
    }
}

/// How many known facts the prompt shows at most.
const KNOWN_FACTS_SHOWN: usize = 50;

/// The time a decision speaks for: the latest message of the batch that names its value
/// (or, for a DELETE, its id's fact is judged against), else the batch's last message.
fn decision_time(d: &Decision, batch: &[&BufferedMessage]) -> Timestamp {
    let value = d.object.trim().to_lowercase();
    let last = batch.iter().map(|m| m.timestamp).max().unwrap_or(Timestamp::UNIX_EPOCH);
    if value.is_empty() {
        return last;
    }
    batch.iter().filter(|m| m.content.to_lowercase().contains(&value)).map(|m| m.timestamp).max().unwrap_or(last)
}

/// One scope's share of a cycle: facts with their sensitivity, and LLM skills.
struct ScopeWork {
    scope: Scope,
    facts: Vec<(Fact, Sensitivity)>,
    /// The model's decisions, each with the time it speaks for and the known facts' ids.
    decisions: Vec<(Decision, Timestamp, Sensitivity)>,
    known: Vec<RecordId>,
    skills: Vec<Skill>,
    skill_sensitivity: Sensitivity,
}

/// The batch's messages grouped by scope, in order of first appearance.
fn by_scope(batch: &[BufferedMessage]) -> Vec<(Scope, Vec<&BufferedMessage>)> {
    let mut groups: Vec<(Scope, Vec<&BufferedMessage>)> = Vec::new();
    for m in batch {
        match groups.iter_mut().find(|(s, _)| *s == m.scope) {
            Some((_, group)) => group.push(m),
            None => groups.push((m.scope.clone(), vec![m])),
        }
    }
    groups
}

/// A drained batch that goes back to the front of the buffer if the cycle is dropped
/// before its facts are applied (the shutdown cancelling a cycle waiting on the LLM).
struct Requeue<'a> {
    consolidator: &'a Consolidator,
    batch: Option<Vec<BufferedMessage>>,
}

impl Drop for Requeue<'_> {
    fn drop(&mut self) {
        if let Some(batch) = self.batch.take() {
            let mut buf = self.consolidator.buffer.lock().unwrap_or_else(|p| p.into_inner());
            for m in batch.into_iter().rev() {
                buf.push_front(m);
            }
            self.consolidator.cap(&mut buf);
        }
    }
}

/// Parses and validates the model's reply: the JSON is found with
/// [`mneme_llm::extract_json`] (fenced, wrapped in prose, or cut off), then validated by
/// [`extraction_from`].
pub fn parse_extraction(raw: &str) -> Result<Extraction, String> {
    extraction_from(extract_json(raw)?)
}

/// Validates the model's JSON. Invalid entries are dropped; a value that is not an object
/// with at least one of `facts`, `competence`, `corrections` is an error.
pub fn extraction_from(value: serde_json::Value) -> Result<Extraction, String> {
    let obj = value.as_object().ok_or("model output is not a JSON object")?;
    let list = |key: &str| obj.get(key).and_then(|v| v.as_array()).cloned().unwrap_or_default();
    let text_ok = |s: &str, max: usize| !s.trim().is_empty() && s.len() <= max;
    let facts = list("facts")
        .into_iter()
        .filter_map(|v| serde_json::from_value::<Fact>(v).ok())
        .filter(|f| {
            text_ok(&f.subject, 200) && text_ok(&f.predicate, 100) && text_ok(&f.object, 500) && (0.0..=1.0).contains(&f.confidence)
        })
        .map(|f| Fact {
            subject: f.subject.trim().into(),
            predicate: f.predicate.trim().to_lowercase(),
            object: f.object.trim().into(),
            ..f
        })
        .collect();
    let competence = list("competence")
        .into_iter()
        .filter_map(|v| serde_json::from_value::<Skill>(v).ok())
        .filter(|s| text_ok(&s.skill, 200) && s.steps.len() <= 50)
        .collect();
    let corrections = list("corrections").into_iter().filter_map(|v| serde_json::from_value::<Correction>(v).ok()).collect();
    let memory = list("memory")
        .into_iter()
        .filter_map(|v| serde_json::from_value::<Decision>(v).ok())
        .filter(|d| match d.event {
            // A new fact needs all three parts; a change names the known fact.
            DecisionKind::Add => text_ok(&d.subject, 200) && text_ok(&d.predicate, 100) && text_ok(&d.object, 500),
            DecisionKind::Update => d.id.is_some() && text_ok(&d.object, 500),
            DecisionKind::Delete => d.id.is_some(),
            DecisionKind::None => true,
        })
        .map(|d| Decision {
            subject: d.subject.trim().into(),
            predicate: d.predicate.trim().to_lowercase(),
            object: d.object.trim().into(),
            ..d
        })
        .collect();
    if !["facts", "competence", "corrections", "memory"].iter().any(|k| obj.contains_key(*k)) {
        return Err("model output has none of facts, competence, corrections, memory".into());
    }
    Ok(Extraction { facts, competence, corrections, memory })
}

/// The model's correction as an UPDATE decision of the known fact `old_fact` names (by its
/// value, and its subject or predicate when several known facts hold that value), with the
/// value `new_fact` gives: what the conversational extractor reads there for the fact's slot
/// ("Dana moved to Munich" → Munich), else the text after the predicate or the subject.
/// `None` when no known fact matches or no new value is left.
fn correction_update(c: &Correction, known: &[crate::truth::LiveFact]) -> Option<Decision> {
    let old = c.old_fact.to_lowercase();
    let named: Vec<(usize, &crate::truth::LiveFact)> =
        known.iter().enumerate().filter(|(_, f)| mneme_core::query::contains_word(&old, &f.value.to_lowercase())).collect();
    let (index, fact) = match named.as_slice() {
        [only] => *only,
        many => *many.iter().find(|(_, f)| old.contains(&f.predicate.to_lowercase()) || old.contains(&f.subject.to_lowercase()))?,
    };
    let new = c.new_fact.trim();
    let read = fact.slot.as_deref().and_then(|slot| {
        mneme_truth::extract(new)
            .into_iter()
            .find(|claim| claim.slot == Some(slot) && matches!(claim.op, mneme_truth::Op::Set | mneme_truth::Op::Add))
    });
    let lower = new.to_lowercase();
    // Byte offsets carry over only when lower-casing kept every length.
    let after =
        |phrase: &str| (lower.len() == new.len()).then(|| lower.find(&phrase.to_lowercase()).map(|at| &new[at + phrase.len()..])).flatten();
    let value = match &read {
        Some(claim) => claim.value.as_str(),
        None => after(&fact.predicate).or_else(|| after(&fact.subject)).unwrap_or(new),
    };
    let value = value.trim().trim_matches(|c: char| c.is_ascii_punctuation() || c.is_whitespace());
    if value.is_empty() || value.eq_ignore_ascii_case(&fact.value) {
        return None;
    }
    Some(Decision {
        event: DecisionKind::Update,
        id: Some(format!("F{}", index + 1)),
        subject: fact.subject.clone(),
        predicate: fact.predicate.clone(),
        object: value.to_string(),
        reason: if c.reason.trim().is_empty() { "corrected".into() } else { format!("corrected: {}", c.reason.trim()) },
    })
}
