//! Which corrections a record accepts.
//!
//! Rules: episodic records are immutable (they are what happened); tombstones
//! (superseded or retracted records) are history and cannot be revised again, only
//! their successors can; a pruned record has lost its payload and can no longer be
//! superseded, forked or merged. Supersede and merge keep the record's memory type.

use crate::error::{CoreError, CoreResult};
use crate::record::{MemoryRecord, MemoryType, Payload, RecordId};

/// A revision operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Revision {
    Supersede,
    Fork,
    Merge,
    Retract,
    Contest,
}

impl Revision {
    pub fn as_str(self) -> &'static str {
        match self {
            Revision::Supersede => "supersede",
            Revision::Fork => "fork",
            Revision::Merge => "merge",
            Revision::Retract => "retract",
            Revision::Contest => "contest",
        }
    }
}

/// Refuses a revision that the record's type or state does not allow.
pub fn check_revisable(record: &MemoryRecord, op: Revision) -> CoreResult<()> {
    if record.memory_type == MemoryType::Episodic {
        return Err(CoreError::Precondition(format!(
            "cannot {} record {}: episodic records are immutable (record a new event instead)",
            op.as_str(),
            record.id
        )));
    }
    if record.status.is_tombstone() {
        return Err(CoreError::Precondition(format!(
            "cannot {} record {}: it is {} (revise its successor; see `mneme history {}`)",
            op.as_str(),
            record.id,
            record.status,
            record.id
        )));
    }
    if record.pruned_at.is_some() && matches!(op, Revision::Supersede | Revision::Fork | Revision::Merge) {
        return Err(CoreError::Precondition(format!("cannot {} record {}: it was pruned and its payload is gone", op.as_str(), record.id)));
    }
    Ok(())
}

/// A replacement payload must keep the memory type of what it replaces.
pub fn check_same_type(expected: MemoryType, payload: &Payload) -> CoreResult<()> {
    if payload.memory_type() != expected {
        return Err(CoreError::Precondition(format!(
            "the new payload is {} but the record being revised is {expected}",
            payload.memory_type()
        )));
    }
    Ok(())
}

/// Merge takes at least two distinct revisable records of one memory type.
pub fn check_merge(records: &[MemoryRecord]) -> CoreResult<MemoryType> {
    if records.len() < 2 {
        return Err(CoreError::invalid("merge", "needs at least two record ids"));
    }
    let mut seen: Vec<&RecordId> = Vec::with_capacity(records.len());
    for r in records {
        if seen.contains(&&r.id) {
            return Err(CoreError::invalid("merge", format!("record {} is listed twice", r.id)));
        }
        seen.push(&r.id);
        check_revisable(r, Revision::Merge)?;
    }
    if let Some(other) = records.iter().find(|r| r.scope != records[0].scope) {
        return Err(CoreError::Precondition(format!(
            "cannot merge records of different scopes: {} is in {}, {} is in {}",
            records[0].id, records[0].scope, other.id, other.scope
        )));
    }
    let first = records[0].memory_type;
    if let Some(other) = records.iter().find(|r| r.memory_type != first) {
        return Err(CoreError::Precondition(format!(
            "cannot merge records of different types: {} is {first}, {} is {}",
            records[0].id, other.id, other.memory_type
        )));
    }
    Ok(first)
}
