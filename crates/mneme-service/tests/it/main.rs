//! Integration tests of the service API with an injected clock, on both engines: the tests
//! listed in each module's `on_both_engines!` run once on a SQLite file and once on a fresh
//! PostgreSQL database (mneme-testkit's throwaway server); the rest are SQLite's own.

mod forget;
mod golden;
mod ops;
mod retrieval;
mod semantic;

use std::sync::Arc;

use jiff::{SignedDuration, Timestamp};
use mneme_core::{EventPayload, FixedClock, MemoryRecord, Payload, SemanticPayload};
use mneme_service::{Access, Actor, IngestOptions, MemoryService, ServiceConfig};
use mneme_store::StoreOptions;

/// The engine the fixtures of this test thread open.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Engine {
    Sqlite,
    Postgres,
}

thread_local! {
    static ENGINE: std::cell::Cell<Engine> = const { std::cell::Cell::new(Engine::Sqlite) };
}

/// The engine this test thread's fixtures open.
pub fn engine() -> Engine {
    ENGINE.with(|e| e.get())
}

/// Runs `test` with every fixture it opens on `engine`.
pub fn with_engine(engine: Engine, test: fn()) {
    ENGINE.with(|e| e.set(engine));
    test();
}

/// Turns the listed test functions (plain `fn`s of the calling module) into two tests each:
/// `sqlite::NAME` and `postgres::NAME`.
#[macro_export]
macro_rules! on_both_engines {
    ($($name:ident),* $(,)?) => {
        mod sqlite {
            $( #[test] fn $name() { $crate::with_engine($crate::Engine::Sqlite, super::$name) } )*
        }
        mod postgres {
            $( #[test] fn $name() { $crate::with_engine($crate::Engine::Postgres, super::$name) } )*
        }
    };
}

/// A service on a fresh store (a temp dir's SQLite file, or a new PostgreSQL database),
/// with a clock the test moves.
#[derive(Debug)]
pub struct Fixture {
    pub service: MemoryService,
    pub clock: Arc<FixedClock>,
    pub _dir: tempfile::TempDir,
    /// The PostgreSQL database, when the fixture is on PostgreSQL.
    pub database: Option<String>,
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
        let (service, database) = match ENGINE.with(|e| e.get()) {
            Engine::Sqlite => {
                let options = StoreOptions { path: dir.path().join("mneme.db"), key: None, create: true, decay: Default::default() };
                (MemoryService::open(options, config, clock.clone()).expect("open"), None)
            }
            Engine::Postgres => {
                let url = mneme_testkit::postgres_database();
                let options = mneme_store::PgOptions { create: true, ..mneme_store::PgOptions::new(url.clone()) };
                (MemoryService::open_postgres(options, dir.path().join("mneme.db"), config, clock.clone()).expect("open"), Some(url))
            }
        };
        Fixture { service, clock, _dir: dir, database }
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

    /// The `payload` column of a record as stored, read with the engine's plain client.
    pub fn raw_payload(&self, id: &mneme_core::RecordId) -> String {
        match &self.database {
            None => {
                let conn = rusqlite::Connection::open(self._dir.path().join("mneme.db")).expect("open");
                conn.query_row("SELECT payload FROM records WHERE id = ?1", [id.as_str()], |r| r.get(0)).expect("the record's payload")
            }
            Some(url) => {
                let mut client = postgres::Client::connect(url, postgres::NoTls).expect("connect");
                client.query_one("SELECT payload FROM records WHERE id = $1", &[&id.as_str()]).expect("the record's payload").get(0)
            }
        }
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
