//! Forgetting: erasing what a record says, everywhere it lives, for good.
//!
//! What is chosen: records by id, by query (every record whose own text holds every
//! word, however many), by subject (facts about a person, "their sister" too, and the
//! messages they sent), by user (every record in their scope). Several selectors are an
//! intersection. With a query, a fact made from a chosen message goes only if it holds
//! the words too ("forget my SSN" keeps "lives in Porto" said in the same breath). Each chosen record
//! brings the facts extracted from it (their `evidence` names it), not the values stated
//! since by other messages (forgetting an address must not take the city moved to since).
//! A dry run returns the plan and changes
//! nothing.
//!
//! What is erased, in one transaction: the payload, summary and tags (the row stays as a
//! retracted tombstone with its id, type, times and a SHA-256 of the content, so lineage
//! holds); its full-text row and its text in the context rows of its thread neighbours;
//! its vectors on disk; the text of its audit entries and lineage rationale, and of any
//! other audit entry or rationale quoting it; conversation-log entries holding it; and the
//! workspace search chunks holding it (the files are the agent's: they are listed). Each
//! erased record gets a `forget` audit entry (who, why). Then the full-text indexes are
//! rewritten without the deleted postings and the WAL is checkpointed and truncated, with
//! `secure_delete` zeroing freed pages, so the bytes are gone from the data directory.

use jiff::Timestamp;
use mneme_core::{AuditAction, MemoryRecord, RecordId};
use serde::Serialize;
use serde_json::json;

use crate::{Access, MemoryService, ServiceError, ServiceResult};

/// A message's text as the conversation log holds it: the summary "sender: text" without
/// its sender.
fn message_body(text: &str) -> String {
    match text.split_once(": ") {
        Some((sender, body)) if !sender.contains(' ') && !body.is_empty() => body.to_string(),
        _ => text.to_string(),
    }
}

/// What a record says, lowercased, for matching a query's words: an event's own text
/// (not its sender, whom the summary names), else its summary and payload.
fn own_words(r: &MemoryRecord) -> String {
    match &r.payload {
        Some(p @ mneme_core::Payload::Event(_)) => p.own_text(),
        Some(p) => format!("{}\n{}", r.summary, p.own_text()),
        None => r.summary.clone(),
    }
    .to_lowercase()
}

/// Whether `r` says every one of `words` (lowercase).
fn holds_words(r: &MemoryRecord, words: &[String]) -> bool {
    let own = own_words(r);
    words.iter().all(|w| own.contains(w.as_str()))
}

/// What to forget.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ForgetRequest {
    pub ids: Vec<RecordId>,
    /// Records whose text matches these words.
    pub query: Option<String>,
    /// A person: facts about them (and "their …") and the messages they sent.
    pub subject: Option<String>,
    /// An end user: every record in their scope (`user:<id>`) and their conversation-log
    /// entries.
    pub user: Option<String>,
    /// Plan only: what would be erased.
    pub dry_run: bool,
    /// Why (the audit entry's rationale; it must not repeat what is forgotten).
    pub reason: String,
    pub actor: String,
    /// The most records the selection may choose (0: no limit, the default). A selection
    /// that matches more is refused with the count and nothing is erased: a cap that
    /// silently erased the first N would report success while copies stay.
    pub limit: usize,
}

/// One record chosen.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ForgetItem {
    pub id: RecordId,
    pub memory_type: String,
    /// Its summary before erasure (in the plan; the report of a real run carries it only
    /// back to the caller who asked).
    pub summary: String,
    /// Why it is included: `chosen`, or `derived` (a fact extracted from a chosen record).
    pub because: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ForgetReport {
    pub dry_run: bool,
    pub records: Vec<ForgetItem>,
    /// Conversation-log entries replaced by `[forgotten]`.
    pub conversation_entries: usize,
    /// Audit entries and lineage rationales elsewhere that quoted the text.
    pub redacted_mentions: usize,
    /// Workspace search chunks dropped.
    pub workspace_chunks: usize,
    /// Workspace files that still hold the text: the agent's own files, which mneme does
    /// not edit (edit them). Filled by the caller that knows the workspace
    /// (`mneme_agent::forget_in_files`), and from the search index's chunks.
    pub workspace_files: Vec<String>,
    /// mneme's own files in the workspace (session snapshots, daily logs, journals) it
    /// rewrote without the text (a snapshot named after a forgotten message by its new
    /// name).
    pub files_rewritten: Vec<String>,
    /// The erased messages' texts, for the caller to remove from files (never sent).
    #[serde(skip)]
    pub erased_texts: Vec<String>,
    /// The WAL was checkpointed and truncated (false: a reader held an old snapshot; the
    /// next checkpoint completes it).
    pub wal_truncated: bool,
}

impl MemoryService {
    /// Erases the chosen records (see the module's documentation). Refused: an empty
    /// request, an unknown id, an empty reason on a real run.
    pub fn forget(&self, request: &ForgetRequest, access: &Access) -> ServiceResult<ForgetReport> {
        let blank = |v: &Option<String>| v.as_deref().is_none_or(|x| x.trim().is_empty());
        if request.ids.is_empty() && blank(&request.query) && blank(&request.subject) && blank(&request.user) {
            return Err(ServiceError::invalid("forget", "name what to forget: ids, a query, a subject or a user"));
        }
        if !request.dry_run && request.reason.trim().is_empty() {
            return Err(ServiceError::invalid("reason", "say why (it goes into the audit entry)"));
        }
        self.config.limits.check_actor(&request.actor)?;
        let plan = self.forget_plan(request, access)?;
        if !request.dry_run {
            self.forget_query_vectors();
        }
        if request.dry_run || plan.is_empty() {
            return Ok(ForgetReport {
                dry_run: request.dry_run,
                records: plan,
                conversation_entries: 0,
                redacted_mentions: 0,
                workspace_chunks: 0,
                workspace_files: Vec::new(),
                files_rewritten: Vec::new(),
                erased_texts: Vec::new(),
                wal_truncated: false,
            });
        }
        let now: Timestamp = self.now();
        let written = self.store()?.write(|tx| {
            // Audit texts and rationales quote values ("changed: \"Lisbon\" → …"): every
            // erased text is redacted there. The conversation log and the workspace hold
            // messages: only the chosen records' texts are looked for there (a derived
            // fact's bare value, "Munich", would take every line that names the city).
            let (mut texts, mut messages): (Vec<String>, Vec<String>) = (Vec::new(), Vec::new());
            let mut seqs = Vec::new();
            for item in &plan {
                let (seq, erased) = tx.forget(&item.id, now)?;
                seqs.push(seq);
                if item.because == "chosen" {
                    messages.extend(erased.iter().cloned());
                    // The log and the snapshots keep a message with its secrets redacted.
                    messages.extend(
                        erased
                            .iter()
                            .map(|t| mneme_core::secrets::redact(t))
                            .filter(|r| matches!(r, std::borrow::Cow::Owned(_)))
                            .map(|r| r.into_owned()),
                    );
                }
                texts.extend(erased);
                tx.append_audit(&item.id, now, &request.actor, AuditAction::Forget, &request.reason, &json!({ "because": item.because }))?;
            }
            texts.sort();
            texts.dedup();
            messages.sort();
            messages.dedup();
            let mut report = ForgetReport {
                dry_run: false,
                records: plan.clone(),
                conversation_entries: 0,
                redacted_mentions: 0,
                workspace_chunks: 0,
                workspace_files: Vec::new(),
                files_rewritten: Vec::new(),
                erased_texts: Vec::new(),
                wal_truncated: false,
            };
            for text in &texts {
                report.redacted_mentions += tx.redact_mentions(text)?;
            }
            for text in &messages {
                report.conversation_entries += tx.redact_conversations(&message_body(text))?;
                let files = tx.drop_chunks_with(&message_body(text))?;
                report.workspace_chunks += files.len();
                report.workspace_files.extend(files);
            }
            if let Some(user) = request.user.as_deref().filter(|u| !u.trim().is_empty()) {
                report.conversation_entries += tx.redact_conversations_of(user)?;
            }
            report.workspace_files.sort();
            report.workspace_files.dedup();
            report.erased_texts = messages.iter().map(|t| message_body(t)).collect();
            Ok::<_, ServiceError>((report, seqs))
        })?;
        let (mut report, seqs) = written;
        self.erase_vectors(&seqs);
        report.wal_truncated = self.store()?.scrub()?;
        Ok(report)
    }

    /// The retention policy: erases every record of `memory_type` whose time (its event's,
    /// else when it was written) is before `cutoff`, as `forget` does but without taking
    /// derived facts along (a fact stated a year ago may still be true). Returns how many.
    pub fn forget_older_than(&self, memory_type: mneme_core::MemoryType, cutoff: Timestamp, actor: &str) -> ServiceResult<usize> {
        let old = self.reader()?.read(|tx| Ok::<_, ServiceError>(tx.records_older_than(memory_type, cutoff)?))?;
        if old.is_empty() {
            return Ok(0);
        }
        let now = self.now();
        let reason = format!("retention: {memory_type} records older than {}", cutoff.strftime("%Y-%m-%d"));
        self.store()?
            .write(|tx| {
                let mut seqs = Vec::new();
                for r in &old {
                    let (seq, texts) = tx.forget(&r.id, now)?;
                    seqs.push(seq);
                    tx.append_audit(&r.id, now, actor, AuditAction::Forget, &reason, &json!({ "because": "retention" }))?;
                    for t in &texts {
                        tx.redact_mentions(t)?;
                    }
                }
                Ok::<_, ServiceError>(seqs)
            })
            .map(|seqs| self.erase_vectors(&seqs))?;
        self.store()?.scrub()?;
        Ok(old.len())
    }

    fn forget_plan(&self, request: &ForgetRequest, access: &Access) -> ServiceResult<Vec<ForgetItem>> {
        // Each selector given chooses a set of records; several are an intersection
        // (`--query X --user y`: what user y's records say about X, nothing elsewhere).
        let mut sets: Vec<Vec<MemoryRecord>> = Vec::new();
        let query = request.query.as_deref().filter(|q| !q.trim().is_empty());
        let words: Vec<String> =
            query.unwrap_or_default().split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()).map(str::to_lowercase).collect();
        if !request.ids.is_empty() {
            sets.push(request.ids.iter().map(|id| self.get(id, access)).collect::<ServiceResult<_>>()?);
        }
        if let Some(q) = query {
            // Every record whose own text holds every word: not a neighbour's context, not
            // a boost, not the sender's name (`Payload::own_text`), and no ranking cap.
            let tokens = mneme_core::query::query_tokens(q);
            let found = self.reader()?.read(|tx| Ok::<_, ServiceError>(tx.records_with_words(&tokens)?))?;
            sets.push(found.into_iter().filter(|r| access.can_see(r) && holds_words(r, &words)).collect());
        }
        if let Some(s) = request.subject.as_deref().filter(|s| !s.trim().is_empty()) {
            let (facts, events) = self.reader()?.read(|tx| Ok::<_, ServiceError>((tx.facts_about(s)?, tx.events_from(s)?)))?;
            sets.push(facts.into_iter().chain(events).filter(|r| access.can_see(r)).collect());
        }
        if let Some(u) = request.user.as_deref().filter(|u| !u.trim().is_empty()) {
            let scope = mneme_core::Scope::user(u).ok_or_else(|| ServiceError::invalid("user", format!("{u:?} names no user")))?;
            let records = self.reader()?.read(|tx| Ok::<_, ServiceError>(tx.records_in_scope(&scope)?))?;
            sets.push(records.into_iter().filter(|r| access.can_see(r)).collect());
        }
        let mut sets = sets.into_iter();
        let mut chosen: Vec<MemoryRecord> = sets.next().unwrap_or_default();
        for other in sets {
            let ids: std::collections::HashSet<&RecordId> = other.iter().map(|r| &r.id).collect();
            chosen.retain(|r| ids.contains(&r.id));
        }
        if request.limit > 0 && chosen.len() > request.limit {
            return Err(ServiceError::invalid(
                "limit",
                format!(
                    "{} records match, more than the limit of {}: nothing was erased; raise the limit, or narrow the selection",
                    chosen.len(),
                    request.limit
                ),
            ));
        }
        let mut plan: Vec<ForgetItem> = Vec::new();
        let push = |r: &MemoryRecord, because: &str, plan: &mut Vec<ForgetItem>| {
            if !plan.iter().any(|p| p.id == r.id) {
                plan.push(ForgetItem {
                    id: r.id.clone(),
                    memory_type: r.memory_type.to_string(),
                    summary: r.summary.clone(),
                    because: because.into(),
                });
            }
        };
        // With a query, a fact made from a chosen message goes only if it says the words
        // too ("forget my SSN" must not take "lives in Porto" said in the same message), or
        // carries a secret, whatever it is called.
        let says_it =
            |r: &MemoryRecord| query.is_none() || holds_words(r, &words) || !mneme_core::secrets::detect(&own_words(r)).is_empty();
        let mut derived: Vec<MemoryRecord> = Vec::new();
        for r in &chosen {
            let related = self.reader()?.read(|tx| Ok::<_, ServiceError>(tx.derived_from(&r.id)?))?;
            derived.extend(related.into_iter().filter(|d| access.can_see(d) && says_it(d)));
        }
        // A fact the selection chose itself stays `chosen`: its value is then looked for in
        // the conversation log and the files too (a derived one's bare value is not).
        for r in &chosen {
            push(r, "chosen", &mut plan);
        }
        for d in &derived {
            push(d, "derived", &mut plan);
        }
        Ok(plan)
    }

    /// Destroys the forgotten records' vectors in the in-memory index too (the rows on
    /// disk went with the transaction).
    fn erase_vectors(&self, seqs: &[i64]) {
        if let Some(s) = self.semantic.get() {
            let mut index = s.index.write().unwrap_or_else(|p| p.into_inner());
            for &seq in seqs {
                index.erase(seq);
            }
        }
    }
}
