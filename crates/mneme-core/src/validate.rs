//! Input limits and checks applied before anything reaches the store.
//!
//! Every limit is documented in README.md ("Limits"). A request that breaks one is
//! refused whole: nothing is written.

use serde::{Deserialize, Serialize};

use crate::error::{CoreError, CoreResult};
use crate::record::NewRecord;

/// Size limits (config section `[limits]`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Limits {
    /// Summary, in bytes. Default 1 KiB.
    pub max_summary_bytes: usize,
    /// The serialised payload (JSON), in bytes. Default 256 KiB.
    pub max_payload_bytes: usize,
    /// Tags per record. Default 32.
    pub max_tags: usize,
    /// One tag, in characters (as JSON Schema's `maxLength` counts). Default 64.
    #[serde(alias = "max_tag_bytes")]
    pub max_tag_chars: usize,
    /// Actor names, in bytes. Default 256.
    pub max_actor_bytes: usize,
    /// Rationales, in bytes. Default 4 KiB.
    pub max_rationale_bytes: usize,
    /// Query text, in bytes. Default 4 KiB.
    pub max_query_bytes: usize,
    /// Results per retrieval. Default 1000.
    pub max_limit: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_summary_bytes: 1024,
            max_payload_bytes: 256 * 1024,
            max_tags: 32,
            max_tag_chars: 64,
            max_actor_bytes: 256,
            max_rationale_bytes: 4096,
            max_query_bytes: 4096,
            max_limit: 1000,
        }
    }
}

impl Limits {
    /// Checks a record before it is written.
    pub fn check_new_record(&self, record: &NewRecord) -> CoreResult<()> {
        if let Some(summary) = &record.summary {
            self.check_len("summary", summary, self.max_summary_bytes)?;
            if summary.trim().is_empty() {
                return Err(CoreError::invalid("summary", "must not be empty"));
            }
        }
        let payload_len = serde_json::to_vec(&record.payload).map_err(|e| CoreError::invalid("payload", e.to_string()))?.len();
        if payload_len > self.max_payload_bytes {
            return Err(CoreError::TooLarge { field: "payload", actual: payload_len, limit: self.max_payload_bytes });
        }
        self.check_tags(&record.tags)?;
        check_unit("confidence", record.confidence)?;
        check_unit("salience", record.salience)?;
        self.check_actor(&record.actor)?;
        self.check_rationale(&record.rationale)?;
        Ok(())
    }

    pub fn check_tags(&self, tags: &[String]) -> CoreResult<()> {
        if tags.len() > self.max_tags {
            return Err(CoreError::TooLarge { field: "tags (count)", actual: tags.len(), limit: self.max_tags });
        }
        for tag in tags {
            let chars = tag.chars().count();
            if chars > self.max_tag_chars {
                return Err(CoreError::invalid("tag", format!("{tag:?} has {chars} characters, limit {}", self.max_tag_chars)));
            }
            if tag.is_empty() || tag.chars().any(|c| c.is_control() || c.is_whitespace()) {
                return Err(CoreError::invalid("tag", format!("{tag:?} (tags are non-empty and contain no whitespace)")));
            }
        }
        Ok(())
    }

    pub fn check_actor(&self, actor: &str) -> CoreResult<()> {
        self.check_len("actor", actor, self.max_actor_bytes)?;
        if actor.trim().is_empty() {
            return Err(CoreError::invalid("actor", "must not be empty"));
        }
        Ok(())
    }

    pub fn check_rationale(&self, rationale: &str) -> CoreResult<()> {
        self.check_len("rationale", rationale, self.max_rationale_bytes)
    }

    pub fn check_query(&self, query: &str, limit: usize) -> CoreResult<()> {
        self.check_len("query", query, self.max_query_bytes)?;
        if limit == 0 || limit > self.max_limit {
            return Err(CoreError::invalid("limit", format!("{limit} (must be within 1..={})", self.max_limit)));
        }
        Ok(())
    }

    fn check_len(&self, field: &'static str, value: &str, limit: usize) -> CoreResult<()> {
        if value.len() > limit {
            return Err(CoreError::TooLarge { field, actual: value.len(), limit });
        }
        Ok(())
    }
}

/// A probability-like number: finite and within [0, 1].
pub fn check_unit(field: &'static str, value: f64) -> CoreResult<()> {
    if !value.is_finite() || !(0.0..=1.0).contains(&value) {
        return Err(CoreError::invalid(field, format!("{value} (must be a finite number within 0..=1)")));
    }
    Ok(())
}

/// A reinforcement or penalty amount: finite and within (0, 1].
pub fn check_amount(value: f64) -> CoreResult<()> {
    if !value.is_finite() || value <= 0.0 || value > 1.0 {
        return Err(CoreError::invalid("amount", format!("{value} (must be a finite number within 0 < amount ≤ 1)")));
    }
    Ok(())
}

/// Checks the fields a payload cannot do without.
pub fn check_payload(payload: &crate::record::Payload) -> CoreResult<()> {
    use crate::record::Payload;
    let required: Vec<(&'static str, &str)> = match payload {
        Payload::Event(e) => vec![("text", &e.text), ("event kind", &e.event_kind)],
        Payload::ToolOutput(t) => vec![("tool", &t.tool)],
        Payload::Semantic(s) => vec![("subject", &s.subject), ("predicate", &s.predicate), ("object", &s.object)],
        Payload::Competence(c) => vec![("skill", &c.skill)],
        Payload::Working(w) => vec![("thread id", &w.thread_id), ("state", &w.state)],
        Payload::PlanGraph(p) => vec![("intent", &p.intent)],
    };
    for (field, value) in required {
        if value.trim().is_empty() {
            return Err(CoreError::invalid(field, "must not be empty"));
        }
    }
    // Labels are keys (`user_message`, a tool's name, a thread): no control characters.
    let labels: Vec<(&'static str, &str)> = match payload {
        Payload::Event(e) => vec![("event kind", &e.event_kind)],
        Payload::ToolOutput(t) => vec![("tool", &t.tool)],
        Payload::Working(w) => vec![("thread id", &w.thread_id)],
        _ => Vec::new(),
    };
    for (field, value) in labels {
        if let Some(c) = value.chars().find(|c| c.is_control()) {
            return Err(CoreError::invalid(field, format!("contains the control character {c:?}; it is a label like user_message")));
        }
    }
    if let Payload::Semantic(s) = payload
        && let (Some(from), Some(to)) = (s.valid_from, s.valid_to)
        && from > to
    {
        return Err(CoreError::invalid("validity window", format!("valid_from {from} is after valid_to {to}")));
    }
    if let Payload::Competence(c) = payload {
        check_unit("performance.success_rate", c.performance.success_rate)?;
    }
    Ok(())
}
