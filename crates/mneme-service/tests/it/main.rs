//! Integration tests of the service API on real SQLite files with an injected clock.

mod golden;
mod ops;
mod retrieval;
mod semantic;

use std::sync::Arc;

use jiff::{SignedDuration, Timestamp};
use mneme_core::{EventPayload, FixedClock, MemoryRecord, Payload, SemanticPayload};
use mneme_service::{Access, Actor, IngestOptions, MemoryService, ServiceConfig};
use mneme_store::StoreOptions;

/// A service on a fresh store in a temp dir, with a clock the test moves.
#[derive(Debug)]
pub struct Fixture {
    pub service: MemoryService,
    pub clock: Arc<FixedClock>,
    pub _dir: tempfile::TempDir,
}

impl Default for Fixture {
    fn default() -> Self {
        Self::new()
    }
}

impl Fixture {
    pub fn new() -> Self {
        Self::with_config(ServiceConfig::default())
    }

    pub fn with_config(config: ServiceConfig) -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let clock = Arc::new(FixedClock::new(Timestamp::from_second(1_800_000_000).expect("in range")));
        let options = StoreOptions { path: dir.path().join("mneme.db"), key: None, create: true, decay: Default::default() };
        let service = MemoryService::open(options, config, clock.clone()).expect("open");
        Fixture { service, clock, _dir: dir }
    }

    pub fn advance_days(&self, days: i64) {
        self.clock.advance(SignedDuration::from_hours(24 * days));
    }

    pub fn fact(&self, s: &str, p: &str, o: &str) -> MemoryRecord {
        self.service.ingest_observation(fact(s, p, o), IngestOptions::default()).expect("ingest fact")
    }

    pub fn event(&self, text: &str) -> MemoryRecord {
        self.service.ingest_event(event(text), IngestOptions::default()).expect("ingest event")
    }

    /// The `payload` column of a record as stored, read with a plain SQLite connection.
    pub fn raw_payload(&self, id: &mneme_core::RecordId) -> String {
        let conn = rusqlite::Connection::open(self._dir.path().join("mneme.db")).expect("open");
        conn.query_row("SELECT payload FROM records WHERE id = ?1", [id.as_str()], |r| r.get(0)).expect("the record's payload")
    }

    /// (records, audit entries): what a refused operation must leave unchanged.
    pub fn footprint(&self) -> (i64, i64, i64) {
        let m = self.service.metrics().expect("metrics");
        (m.total_records, m.audit_entries, m.links)
    }
}

pub fn fact(s: &str, p: &str, o: &str) -> SemanticPayload {
    SemanticPayload { subject: s.into(), predicate: p.into(), object: o.into(), valid_from: None, valid_to: None, evidence: vec![] }
}

pub fn event(text: &str) -> EventPayload {
    EventPayload { event_kind: "message".into(), reference: None, sender: Some("howard".into()), text: text.into(), event_time: None }
}

pub fn payload_fact(s: &str, p: &str, o: &str) -> Payload {
    Payload::Semantic(fact(s, p, o))
}

pub fn who(rationale: &str) -> Actor {
    Actor { actor: "test".into(), rationale: rationale.into() }
}

pub fn owner() -> Access {
    Access::owner()
}
