//! The dump (`export` / `import`) on both engines, and the PostgreSQL schema's guarantees.
//! Each test runs on SQLite files and on a real PostgreSQL 18 (mneme-testkit's throwaway
//! server, a fresh database per test).

use jiff::Timestamp;
use mneme_core::{AuditAction, EventPayload, Lineage, LineageOp, NewRecord, Payload, RecordId, SemanticPayload, Sensitivity, Status};
use mneme_store::{
    Direction, DumpSummary, NewConversation, PgOptions, RecordFilter, Store, StoreError, StoreResult, StoredVector, TaskRow,
};

use crate::{db_path, options};

/// One store on either engine (a SQLite store keeps its directory alive).
enum Db {
    Lite(Store, #[allow(dead_code)] tempfile::TempDir),
    Pg(Store),
}

#[derive(Debug, Clone, Copy)]
enum Engine {
    Sqlite,
    Postgres,
}

const ENGINES: [Engine; 2] = [Engine::Sqlite, Engine::Postgres];

fn pg_options(url: String, create: bool) -> PgOptions {
    PgOptions { create, ..PgOptions::new(url) }
}

impl Db {
    fn new(engine: Engine) -> Db {
        match engine {
            Engine::Sqlite => {
                let dir = tempfile::tempdir().expect("temp dir");
                let store = Store::open(options(&db_path(&dir), None, true)).expect("new store");
                Db::Lite(store, dir)
            }
            Engine::Postgres => Db::Pg(Store::open_postgres(pg_options(mneme_testkit::postgres_database(), true)).expect("new database")),
        }
    }

    fn export(&mut self) -> Vec<u8> {
        let mut out = Vec::new();
        match self {
            Db::Lite(store, _) => store.export(&mut out, &mut |_, _| {}),
            Db::Pg(store) => store.export(&mut out, &mut |_, _| {}),
        }
        .expect("export succeeds");
        out
    }

    fn import(&mut self, dump: &[u8]) -> StoreResult<DumpSummary> {
        let mut input = dump;
        match self {
            Db::Lite(store, _) => store.import(&mut input, &mut |_, _| {}),
            Db::Pg(store) => store.import(&mut input, &mut |_, _| {}),
        }
    }
}

fn at(second: i64) -> Timestamp {
    Timestamp::from_second(1_800_000_000 + second).expect("in range")
}

fn id(n: u32) -> RecordId {
    RecordId::parse(&format!("00000000-0000-7000-8000-{n:012}")).expect("valid id")
}

fn lineage(op: LineageOp, parents: Vec<RecordId>, second: i64) -> Lineage {
    Lineage { parent_ids: parents, operation: op, actor: "test".into(), rationale: format!("{op:?}"), timestamp: at(second) }
}

fn message(text: &str, reference: Option<&str>) -> NewRecord {
    NewRecord::new(Payload::Event(EventPayload {
        event_kind: "message".into(),
        reference: reference.map(str::to_string),
        sender: Some("dana".into()),
        text: text.into(),
        event_time: None,
    }))
}

fn fact(object: &str) -> NewRecord {
    NewRecord::new(Payload::Semantic(SemanticPayload {
        subject: "dana".into(),
        predicate: "lives in".into(),
        object: object.into(),
        valid_from: None,
        valid_to: None,
        evidence: Vec::new(),
    }))
}

/// A SQLite store with every kind of dumped row: threaded events, a superseded fact and its
/// successor, a link, audit entries, a forgotten record, a vector, and the agent's tables.
fn seeded() -> Db {
    let mut db = Db::new(Engine::Sqlite);
    let Db::Lite(store, _) = &mut db else { unreachable!() };
    seed(store);
    db
}

/// Every kind of dumped row, written through the store's operations (on either engine).
fn seed(store: &mut Store) {
    store
        .write(|tx| {
            tx.insert(&message("we planned the lisbon trip", Some("chat-1")), id(1), lineage(LineageOp::Original, vec![], 1), at(1))?;
            tx.insert(&message("the flight leaves friday", Some("chat-1")), id(2), lineage(LineageOp::Original, vec![], 2), at(2))?;
            let mut secret = message("my passport number is X123", Some("chat-1"));
            secret.sensitivity = Sensitivity::High;
            secret.tags = vec!["travel".into(), "private".into()];
            tx.insert(&secret, id(3), lineage(LineageOp::Original, vec![], 3), at(3))?;
            tx.insert(&fact("Porto"), id(4), lineage(LineageOp::Original, vec![], 4), at(4))?;
            tx.insert(&fact("Lisbon"), id(5), lineage(LineageOp::Supersede, vec![id(4)], 5), at(5))?;
            tx.set_status(&id(4), Status::Superseded, at(5))?;
            tx.append_audit(&id(4), at(5), "test", AuditAction::SupersededBy, "moved", &serde_json::json!({"by": id(5).as_str()}))?;
            tx.add_link(&id(2), &id(1), "contests", "dates differ", at(6))?;
            tx.put_vectors("all-MiniLM-L6-v2", &[StoredVector { seq: 1, scale: 0.0123, codes: vec![-128, 0, 5, 127] }])?;
            tx.forget(&id(3), at(7))?;
            tx.append_audit(&id(3), at(7), "test", AuditAction::Retract, "forgotten", &serde_json::json!({}))?;
            let first = tx.log_conversation(&NewConversation {
                at: at(8),
                channel: "telegram".into(),
                user_id: Some("u-1".into()),
                direction: Direction::In,
                priority: 3,
                content: "hello \"quoted\" ünïcode\nline".into(),
            })?;
            tx.log_conversation(&NewConversation {
                at: at(9),
                channel: "telegram".into(),
                user_id: None,
                direction: Direction::Out,
                priority: 1,
                content: "hi".into(),
            })?;
            tx.add_checkpoint(first.id, "greeted", at(10))?;
            tx.put_task(&TaskRow { name: "zeta".into(), spec: "{\"every\":\"1h\"}".into(), builtin: false })?;
            tx.put_task(&TaskRow { name: "Alpha".into(), spec: "{}".into(), builtin: true })?;
            tx.log_task_run("zeta", at(11), false, "timed out")?;
            let dispatch = tx.add_dispatch("zeta", 2, "review the notes", at(12))?.expect("queued");
            tx.mark_delivered(&[dispatch], at(13))?;
            tx.add_dispatch("zeta", 1, "still pending", at(14))?;
            tx.put_meta("sync_cursor", "42")?;
            StoreResult::Ok(())
        })
        .expect("seeding succeeds");
    // A real that serde_json's default (not correctly rounded) parser reads back one unit
    // in the last place off: the dump needs `float_roundtrip`.
    store.execute_raw("UPDATE records SET rank_anchor = 1795470180.144703 WHERE seq = 2").expect("a hard real");
}

/// The dump's rows: without its header (whose engine and time differ between exports) and
/// its trailer (whose digest covers the header).
fn body(dump: &[u8]) -> &[u8] {
    let start = dump.iter().position(|&b| b == b'\n').expect("a header line") + 1;
    let end = dump[..dump.len() - 1].iter().rposition(|&b| b == b'\n').expect("a trailer line") + 1;
    &dump[start..end]
}

#[test]
fn round_trips_are_lossless_between_engines() {
    let mut source = seeded();
    let first = source.export();
    let text = String::from_utf8(first.clone()).expect("utf-8");
    assert!(text.starts_with("{\"t\":\"header\",\"format\":\"mneme-dump\",\"version\":1,\"engine\":\"sqlite\""), "{text}");
    assert!(text.contains("\"records\":5"), "the trailer counts five records: {text}");

    // SQLite → PostgreSQL → SQLite, and SQLite → SQLite: every export is the same bytes.
    let mut pg = Db::new(Engine::Postgres);
    let summary = pg.import(&first).expect("import into PostgreSQL");
    assert_eq!(summary.records(), 5);
    let second = pg.export();
    assert!(String::from_utf8_lossy(&second).contains("\"engine\":\"postgres\""));
    assert_eq!(String::from_utf8_lossy(body(&second)), String::from_utf8_lossy(body(&first)), "PostgreSQL's export differs");
    for engine in ENGINES {
        let mut target = Db::new(engine);
        target.import(&second).expect("import the PostgreSQL export");
        assert_eq!(String::from_utf8_lossy(body(&target.export())), String::from_utf8_lossy(body(&first)), "{engine:?}");
    }

    // What the dump does not carry was rebuilt: the lineage mirror, threads and full text.
    let mut copy = Db::new(Engine::Sqlite);
    copy.import(&first).expect("import into SQLite");
    let Db::Lite(store, _) = &mut copy else { unreachable!() };
    store
        .read(|tx| {
            let children = tx.children(&id(4))?;
            assert_eq!(children.iter().map(|r| r.id.clone()).collect::<Vec<_>>(), vec![id(5)]);
            let hits = tx.lexical_candidates("lisbon", &RecordFilter::default(), 10, (0.5, 0.5))?;
            // "lisbon" is record 1's own word and record 2's thread context; the forgotten
            // record is in no index.
            let seqs: Vec<i64> = hits.iter().map(|c| c.seq).collect();
            assert!(seqs.contains(&1) && seqs.contains(&2) && seqs.contains(&5), "{seqs:?}");
            assert!(tx.lexical_candidates("passport", &RecordFilter::default(), 10, (0.5, 0.5))?.is_empty());
            let forgotten = tx.require(&id(3))?;
            assert!(forgotten.forgotten_at.is_some() && forgotten.payload.is_none());
            StoreResult::Ok(())
        })
        .expect("reads succeed");
}

#[test]
fn a_damaged_dump_changes_nothing() {
    let good = seeded().export();
    let text = String::from_utf8(good.clone()).expect("utf-8");
    let lines: Vec<&str> = text.lines().collect();
    let without_trailer = lines[..lines.len() - 1].join("\n") + "\n";
    let edited = text.replacen("we planned the lisbon trip", "we planned the porto trip", 1);
    let cut = &text[..text.len() - 10];
    let newer = text.replacen("\"version\":1", "\"version\":9", 1);
    let foreign = text.replacen("mneme-dump", "other-dump", 1);
    let bad_kind = text.replacen("\"u-1\"", "17", 1);
    let extra = format!("{text}{{\"t\":\"meta\",\"v\":[\"a\",\"b\"]}}\n");
    let cases: [(&str, &str, &str); 7] = [
        ("no trailer", &without_trailer, "ends without its trailer"),
        ("an edited value", &edited, "was changed or damaged"),
        ("cut short", cut, "cut short"),
        ("a newer format", &newer, "format version 9, this build reads up to 1"),
        ("another format", &foreign, "not a mneme dump"),
        ("a number for text", &bad_kind, "conversations.user_id: expected Text, found 17"),
        ("data after the trailer", &extra, "data after the trailer"),
    ];
    for engine in ENGINES {
        let mut target = Db::new(engine);
        let empty = target.export();
        for (what, dump, expected) in cases {
            let err = target.import(dump.as_bytes()).expect_err(what);
            assert!(matches!(err, StoreError::Dump { .. }), "{engine:?}, {what}: {err:?}");
            assert!(err.to_string().contains(expected), "{engine:?}, {what}: {err}");
            assert_eq!(body(&target.export()), body(&empty), "{engine:?}, {what}: the failed import left rows behind");
        }
        // The rolled-back target takes the good dump afterwards.
        target.import(&good).expect("the good dump imports");
        assert_eq!(body(&target.export()), body(&good), "{engine:?}");
    }
}

#[test]
fn import_refuses_a_store_that_holds_data() {
    let dump = seeded().export();
    for engine in ENGINES {
        let mut target = Db::new(engine);
        target.import(&dump).expect("the first import");
        let before = target.export();
        let err = target.import(&dump).expect_err("a second import");
        assert!(matches!(err, StoreError::NotEmpty { table: "records", rows: 5, .. }), "{engine:?}: {err:?}");
        assert!(err.to_string().contains("import into a new store"), "{err}");
        assert_eq!(body(&target.export()), body(&before));
    }
}

#[test]
fn postgres_refuses_deleting_history() {
    let url = mneme_testkit::postgres_database();
    let mut db = Store::open_postgres(pg_options(url.clone(), true)).expect("new database");
    let mut input = &seeded().export()[..];
    db.import(&mut input, &mut |_, _| {}).expect("import");
    for (sql, expected) in [
        ("DELETE FROM records WHERE seq = 1", "records are never deleted"),
        ("TRUNCATE records CASCADE", "records are never deleted"),
        ("DELETE FROM audit", "the audit log is append-only"),
        ("TRUNCATE audit", "the audit log is append-only"),
        ("UPDATE audit SET actor = 'someone else'", "the audit log is append-only"),
        ("UPDATE conversations SET content = 'rewritten'", "the conversation log is append-only"),
        ("DELETE FROM conversations", "the conversation log is append-only"),
        ("UPDATE checkpoints SET summary = 'other'", "checkpoints are append-only"),
    ] {
        let err = db.execute_raw(sql).expect_err(sql);
        assert!(err.to_string().contains(expected), "{sql}: {err}");
    }
    // The one update forgetting makes is allowed.
    db.execute_raw("UPDATE audit SET rationale = '[forgotten]', details = '{}' WHERE record_seq = 1").expect("redaction");
    db.execute_raw("UPDATE conversations SET content = '[forgotten]' WHERE id = 1").expect("redaction");
}

#[test]
fn postgres_refuses_newer_foreign_and_missing_databases() {
    // An empty database is not a store unless asked to create one.
    let url = mneme_testkit::postgres_database();
    let err = Store::open_postgres(pg_options(url.clone(), false)).expect_err("no store yet");
    assert!(matches!(err, StoreError::PgMissing { .. }), "{err:?}");
    assert!(err.to_string().contains("run `mneme init`"), "{err}");

    // Two processes creating the same store at once migrate it once.
    let handles: Vec<_> = (0..2)
        .map(|_| {
            let url = url.clone();
            std::thread::spawn(move || Store::open_postgres(pg_options(url, true)).map(|mut s| s.schema_version()))
        })
        .collect();
    for handle in handles {
        assert_eq!(handle.join().expect("no panic").expect("connects").expect("version"), mneme_store::PG_SCHEMA_VERSION);
    }

    let mut db = Store::open_postgres(pg_options(url.clone(), false)).expect("the store exists now");
    db.execute_raw("UPDATE mneme_schema SET version = 99").expect("fabricate a newer schema");
    let err = Store::open_postgres(pg_options(url, false)).expect_err("newer schema");
    let expected = format!("schema version 99; this build supports up to {}", mneme_store::PG_SCHEMA_VERSION);
    assert!(err.to_string().contains(&expected), "{err}");

    // A database that holds someone else's tables.
    let other = mneme_testkit::postgres_database();
    let mut client = postgres::Client::connect(&other, postgres::NoTls).expect("plain client");
    client.batch_execute("CREATE TABLE invoices (id int)").expect("a foreign table");
    let err = Store::open_postgres(pg_options(other, true)).expect_err("foreign database");
    assert!(err.to_string().contains("is not a mneme database: its schema has 1 tables but no mneme_schema"), "{err}");
}

#[test]
fn postgres_errors_name_the_database_but_never_the_password() {
    // A closed port: the connection is refused.
    let port = std::net::TcpListener::bind("127.0.0.1:0").expect("a port").local_addr().expect("addr").port();
    let url = format!("postgres://agent:hunter2-secret@127.0.0.1:{port}/memories");
    let options = PgOptions { connect_timeout: std::time::Duration::from_secs(2), ..pg_options(url, false) };
    assert!(!format!("{options:?}").contains("hunter2"));
    let err = Store::open_postgres(options).expect_err("nothing listens");
    let text = err.to_string();
    assert!(matches!(err, StoreError::Unreachable { .. }), "{err:?}");
    assert!(text.contains(&format!("postgres://agent@127.0.0.1:{port}/memories")), "{text}");
    assert!(!text.contains("hunter2"), "{text}");

    // The password from the options (MNEME_DATABASE_PASSWORD), not the URL: a wrong one is
    // refused by the server and not shown; the right one connects.
    let server = mneme_testkit::postgres();
    let url = format!("postgres://mneme@127.0.0.1:{}/{}", server.port, database_name(&mneme_testkit::postgres_database()));
    let with = |password: &str| PgOptions {
        password: Some(mneme_store::SecretKey::new(password.into()).expect("key")),
        ..pg_options(url.clone(), true)
    };
    let err = Store::open_postgres(with("wrong-password")).expect_err("a wrong password");
    assert!(err.to_string().contains("password authentication failed"), "{err}");
    assert!(!err.to_string().contains("wrong-password"), "{err}");
    Store::open_postgres(with(server.password)).expect("the right password");

    // A bad URL is refused naming the option at fault, never showing the password.
    for (url, option) in [
        ("postgres://agent:s3cret@127.0.0.1:notaport/x", "`port`"),
        ("postgres://agent:s3cret@127.0.0.1/x?sslmode=bogus", "`sslmode`"),
        ("postgres://agent:s3cret@127.0.0.1/x?colour=blue", "`colour`"),
    ] {
        let err = Store::open_postgres(pg_options(url.into(), false)).expect_err("bad URL").to_string();
        assert!(err.contains("invalid database URL") && err.contains(option), "{url}: {err}");
        assert!(!err.contains("s3cret"), "{err}");
    }
}

fn database_name(url: &str) -> &str {
    url.rsplit('/').next().expect("a database in the URL")
}

/// A store on `engine` seeded through the store's own write operations.
fn seeded_on(engine: Engine) -> Db {
    let mut db = Db::new(engine);
    match &mut db {
        Db::Lite(store, _) | Db::Pg(store) => seed(store),
    }
    db
}

/// Every read the engines and the service make, as text, on one store.
fn reads(store: &mut Store) -> Vec<String> {
    let scope = mneme_core::Scope::global();
    store
        .read(|tx| {
            let all = RecordFilter { include_tombstones: true, ..RecordFilter::default() };
            let candidates =
                |c: Vec<mneme_store::Candidate>| c.iter().map(|c| format!("{}:{:?}", c.seq, c.memory_type)).collect::<Vec<_>>();
            StoreResult::Ok(vec![
                format!("{:?}", tx.get(&id(5))?),
                format!("{:?}", tx.get(&id(3))?),
                format!("{:?}", tx.get(&id(99))?),
                format!("{:?}", tx.children(&id(4))?.iter().map(|r| r.id.clone()).collect::<Vec<_>>()),
                format!("{:?}", tx.audit(&id(4))?),
                format!("{:?}", tx.links(&id(1))?),
                format!("{:?}", tx.stats()?),
                format!("{:?}", tx.below_anchor(mneme_core::MemoryType::Episodic, f64::MAX)?.len()),
                format!(
                    "{:?}",
                    tx.facts_by_key("DANA", "lives in", &scope, Sensitivity::Critical)?.iter().map(|r| r.id.clone()).collect::<Vec<_>>()
                ),
                format!("{:?}", tx.facts_about("dana")?.len()),
                format!("{:?}", tx.events_from("Dana")?.len()),
                format!("{:?}", tx.records_in_scope(&scope)?.len()),
                format!("{:?}", tx.max_audit_seq()?),
                format!("{:?}", tx.audit_events_after(0, 10)?),
                format!("{:?}", tx.sync_state()?),
                format!("{:?}", tx.conversations(0, 100, 10)?),
                format!("{:?}", tx.tasks()?),
                format!("{:?}", tx.task_runs(Some("zeta"), 5)?),
                format!("{:?}", tx.task_runs(None, 5)?),
                format!("{:?}", tx.pending_dispatches(5)?),
                format!("{:?}", tx.meta("sync_cursor")?),
                format!("{:?}", candidates(tx.salience_candidates(mneme_core::MemoryType::Semantic, &all, 5)?)),
                format!("{:?}", candidates(tx.recent_candidates(&RecordFilter::default(), 5)?)),
                format!("{:?}", candidates(tx.newest_candidates(&RecordFilter::default(), 5)?)),
                format!("{:?}", candidates(tx.candidates_by_seq(&[1, 2, 3, 4], &RecordFilter::default())?)),
                format!("{:?}", tx.thread_adjacent(&[1, 2])?.into_iter().collect::<std::collections::BTreeMap<_, _>>()),
                format!("{:?}", tx.event_senders(&[1, 2, 4])?.into_iter().collect::<std::collections::BTreeMap<_, _>>()),
                format!("{:?}", tx.vector(1, "all-MiniLM-L6-v2")?),
                format!("{:?}", tx.vector_coverage("all-MiniLM-L6-v2")?),
                format!("{:?}", tx.records_needing_vectors("all-MiniLM-L6-v2", 0, 10)?),
            ])
        })
        .expect("reads succeed")
}

#[test]
fn the_store_operations_give_the_same_rows_and_answers_on_both_engines() {
    let mut lite = seeded_on(Engine::Sqlite);
    let mut pg = seeded_on(Engine::Postgres);
    // Written by the same operations: the same rows, byte for byte.
    assert_eq!(String::from_utf8_lossy(body(&pg.export())), String::from_utf8_lossy(body(&lite.export())));
    let (Db::Lite(lite, _), Db::Pg(pg)) = (&mut lite, &mut pg) else { unreachable!() };
    for (on_sqlite, on_postgres) in reads(lite).into_iter().zip(reads(pg)) {
        assert_eq!(on_postgres, on_sqlite);
    }
    // Writes that change what reads see, then the reads again.
    for store in [&mut *lite, &mut *pg] {
        store
            .write(|tx| {
                let record = tx.require(&id(1))?;
                tx.adjust_salience(&record, -0.25, at(20))?;
                tx.prune(&id(2), at(21))?;
                tx.set_status(&id(5), Status::Contested, at(22))?;
                assert_eq!(tx.redact_conversations("HELLO")?, 1);
                assert_eq!(tx.redact_conversations_of("u-1")?, 0, "already redacted");
                assert_eq!(tx.redact_mentions("MOVED")?, 1, "the superseded fact's audit rationale");
                assert!(tx.update_task_if("zeta", "{\"every\":\"1h\"}", "{\"every\":\"2h\"}")?);
                assert!(!tx.update_task_if("zeta", "stale", "{}")?);
                assert!(tx.remove_task("Alpha")?);
                StoreResult::Ok(())
            })
            .expect("writes succeed");
    }
    assert_eq!(reads(pg), reads(lite));
    // A failed write leaves nothing behind on either engine.
    for store in [&mut *lite, &mut *pg] {
        let before = reads(store);
        let err = store
            .write(|tx| {
                tx.set_status(&id(1), Status::Retracted, at(30))?;
                tx.set_status(&id(98), Status::Retracted, at(30))
            })
            .expect_err("an unknown record");
        assert!(matches!(err, StoreError::RecordNotFound(_)), "{err:?}");
        assert_eq!(reads(store), before);
    }
}

#[test]
fn full_text_search_finds_the_same_records_on_both_engines() {
    let mut lite = seeded_on(Engine::Sqlite);
    let mut pg = seeded_on(Engine::Postgres);
    let (Db::Lite(lite, _), Db::Pg(pg)) = (&mut lite, &mut pg) else { unreachable!() };
    let search = |store: &mut Store, tokens: &[&str], weights: (f64, f64)| {
        let tokens: Vec<String> = tokens.iter().map(|t| t.to_string()).collect();
        let expression = mneme_core::query::fts5_any(&tokens).expect("tokens");
        let mut by_expression: Vec<i64> = store
            .read(|tx| tx.lexical_candidates(&expression, &RecordFilter::default(), 10, weights))
            .expect("search")
            .iter()
            .map(|c| c.seq)
            .collect();
        let mut bounded: Vec<i64> = store
            .read(|tx| tx.bounded_lexical_candidates(&tokens, &RecordFilter::default(), 10, weights, 1000))
            .expect("search")
            .iter()
            .map(|c| c.seq)
            .collect();
        by_expression.sort_unstable();
        bounded.sort_unstable();
        assert_eq!(by_expression, bounded);
        bounded
    };
    for (tokens, weights, expected) in [
        // Own text (1), a thread neighbour's context (2), the fact (5); stemmed: "planning".
        (&["lisbon"][..], (0.5, 0.5), vec![1, 2, 5]),
        (&["planning"][..], (0.5, 0.5), vec![1, 2]),
        // Context weighted 0: only the record's own words.
        (&["lisbon"][..], (0.0, 0.5), vec![1, 5]),
        // The forgotten record's words are in no index; quotes and operators are text.
        (&["passport"][..], (0.5, 0.5), vec![]),
        (&["x123\" OR \"lisbon", "friday"][..], (0.5, 0.5), vec![1, 2]),
    ] {
        let on_sqlite = search(lite, tokens, weights);
        let on_postgres = search(pg, tokens, weights);
        assert_eq!(on_sqlite, expected, "SQLite, {tokens:?} {weights:?}");
        assert_eq!(on_postgres, expected, "PostgreSQL, {tokens:?} {weights:?}");
    }
}

#[test]
fn postgres_lexical_searches_reuse_their_prepared_statements() {
    // Every write changes the words' IDFs; they are parameters, not query text, so the
    // searches after it run the same few prepared statements on the server.
    let mut db = seeded_on(Engine::Postgres);
    let Db::Pg(store) = &mut db else { unreachable!() };
    let tokens: Vec<String> = ["lisbon", "friday"].iter().map(|t| t.to_string()).collect();
    let expression = mneme_core::query::fts5_any(&tokens).expect("tokens");
    let mut held = Vec::new();
    for i in 0..30 {
        crate::insert(store, 200 + i, &format!("lisbon trip note {i} for friday"));
        let (all, bounded) = store
            .read(|tx| {
                let filter = RecordFilter::default();
                StoreResult::Ok((
                    tx.lexical_candidates(&expression, &filter, 10, (0.5, 0.5))?,
                    tx.bounded_lexical_candidates(&tokens, &filter, 10, (0.5, 0.5), 5)?,
                ))
            })
            .expect("search");
        assert!(!all.is_empty() && !bounded.is_empty(), "both searches find the notes");
        held.push(store.server_prepared_statements().expect("count").expect("a PostgreSQL store"));
    }
    assert_eq!(held[29], held[2], "prepared statements held after each search: {held:?}");
}

#[test]
fn the_workspace_index_finds_the_same_chunks_on_both_engines() {
    use mneme_store::{IndexedFile, NewChunk};
    for engine in ENGINES {
        let mut db = Db::new(engine);
        let (Db::Lite(store, _) | Db::Pg(store)) = &mut db;
        let chunk = |start: u32, heading: &str, text: &str| NewChunk {
            start_line: start,
            end_line: start + 2,
            heading: heading.into(),
            text: text.into(),
        };
        store
            .write(|tx| {
                tx.index_file(
                    &IndexedFile { path: "memory/2026-11-20.md".into(), mtime_ms: 1, size: 10, chunks: 0 },
                    &[chunk(1, "Deploys", "We deploy with docker on Fridays"), chunk(4, "Kettle", "The kettle needs descaling")],
                )?;
                tx.index_file(
                    &IndexedFile { path: "MEMORY.md".into(), mtime_ms: 2, size: 20, chunks: 0 },
                    &[chunk(1, "Docker", "Images live in the registry")],
                )
            })
            .expect("index");
        let search = |store: &mut Store, words: &str| {
            let expression = mneme_core::query::fts5_expression(words).expect("words");
            store.read(|tx| tx.search_chunks(&expression, 10)).expect("search")
        };
        let hits = search(store, "docker");
        // The heading match weighs more; every hit marks the word in its snippet or heading.
        assert_eq!(hits.iter().map(|h| h.path.as_str()).collect::<Vec<_>>(), ["MEMORY.md", "memory/2026-11-20.md"], "{engine:?}");
        assert!(hits[1].snippet.contains("[docker]"), "{engine:?}: {:?}", hits[1].snippet);
        assert_eq!((hits[1].start_line, hits[1].end_line, hits[1].heading.as_str()), (1, 3, "Deploys"));
        assert!(search(store, "descaled kettles").iter().any(|h| h.heading == "Kettle"), "{engine:?}: stemmed");
        // Vectors are keyed by the chunk's digest, one per distinct text.
        let todo = store.read(|tx| tx.chunks_needing_vectors("m", 10)).expect("todo");
        assert_eq!(todo.len(), 3, "{engine:?}");
        assert!(todo.iter().any(|t| t.text == "Kettle\nThe kettle needs descaling"), "{engine:?}: {todo:?}");
        let vectors: Vec<(String, f32, Vec<i8>)> = todo.iter().map(|t| (t.digest.clone(), 0.5, vec![1, -2, 3])).collect();
        store.write(|tx| tx.put_chunk_vectors("m", &vectors)).expect("vectors");
        assert_eq!(store.read(|tx| tx.chunk_vector_coverage("m")).expect("coverage"), (3, 0), "{engine:?}");
        let stored = store.read(|tx| tx.chunk_vectors("m")).expect("vectors");
        assert_eq!((stored.len(), stored[0].codes.as_slice(), stored[0].scale), (3, &[1i8, -2, 3][..], 0.5), "{engine:?}");
        let ids: Vec<i64> = stored.iter().map(|v| v.id).collect();
        let mut by_id: Vec<String> = store.read(|tx| tx.chunks_by_id(&ids)).expect("by id").into_iter().map(|h| h.heading).collect();
        by_id.sort();
        assert_eq!(by_id, ["Deploys", "Docker", "Kettle"], "{engine:?}");
        let dropped = store.write(|tx| tx.drop_chunks_with("NEEDS DESCALING")).expect("drop");
        assert_eq!(dropped, ["memory/2026-11-20.md"], "{engine:?}");
        assert!(search(store, "kettle").is_empty(), "{engine:?}");
        // The forgotten text's vector went with it: the same text indexed again needs one.
        store
            .write(|tx| {
                tx.index_file(
                    &IndexedFile { path: "notes.md".into(), mtime_ms: 3, size: 5, chunks: 0 },
                    &[chunk(1, "Kettle", "The kettle needs descaling")],
                )
            })
            .expect("index");
        assert_eq!(store.read(|tx| tx.chunks_needing_vectors("m", 10)).expect("todo").len(), 1, "{engine:?}");
        store.write(|tx| tx.unindex_file("notes.md")).expect("unindex");
        // Reads are counted per file and entry.
        let at = jiff::Timestamp::from_second(1_800_000_000).expect("time");
        let reads = [("MEMORY.md".to_string(), String::new()), ("MEMORY.md".to_string(), "Docker".to_string())];
        store.write(|tx| tx.record_reads(&reads, at)).expect("reads");
        store.write(|tx| tx.record_reads(&reads[..1], at + jiff::SignedDuration::from_secs(60))).expect("reads");
        let counted: Vec<(String, String, u64, i64)> = store
            .read(|tx| tx.workspace_reads())
            .expect("reads")
            .into_iter()
            .map(|r| (r.path, r.heading, r.count, r.last_at.as_second()))
            .collect();
        assert_eq!(
            counted,
            [("MEMORY.md".into(), String::new(), 2, 1_800_000_060), ("MEMORY.md".into(), "Docker".into(), 1, 1_800_000_000)],
            "{engine:?}"
        );
        store.write(|tx| tx.unindex_file("MEMORY.md")).expect("unindex");
        let files = store.read(|tx| tx.indexed_files()).expect("files");
        assert_eq!(files.iter().map(|f| f.path.as_str()).collect::<Vec<_>>(), ["memory/2026-11-20.md"], "{engine:?}");
    }
}

#[test]
fn a_batch_insert_on_postgres_writes_what_one_by_one_inserts_write() {
    // The same writes into two databases: the batch path (`insert_originals`, one statement
    // per table) and the one-row path; then every row, derived ones included, compared.
    let urls = [mneme_testkit::postgres_database(), mneme_testkit::postgres_database()];
    let mut returned = Vec::new();
    for (url, batched) in urls.iter().zip([true, false]) {
        let mut store = Store::open_postgres(pg_options(url.clone(), true)).expect("new database");
        store
            .write(|tx| {
                // Earlier members of the thread the batch joins; one no longer live.
                tx.insert(&message("earlier one about lisbon", Some("chat-1")), id(1), lineage(LineageOp::Original, vec![], 1), at(1))?;
                tx.insert(&message("earlier two withdrawn", Some("chat-1")), id(2), lineage(LineageOp::Original, vec![], 2), at(2))?;
                tx.set_status(&id(2), Status::Retracted, at(2))?;
                tx.insert(&message("earlier three, the flight", Some("chat-1")), id(3), lineage(LineageOp::Original, vec![], 3), at(3))?;
                StoreResult::Ok(())
            })
            .expect("earlier records");
        let mut secret = message("my passport number is X123", Some("chat-1"));
        secret.sensitivity = Sensitivity::High;
        secret.tags = vec!["travel".into(), "private".into(), "travel".into()];
        let mut tagged = message("no thread here", None);
        tagged.tags = vec!["misc".into()];
        let mut dated = message("a dated turn in the other chat", Some("chat-2"));
        if let Payload::Event(e) = &mut dated.payload {
            e.event_time = Some(at(-86_400 * 400));
        }
        dated.event_time = Some(at(-86_400 * 400));
        let news = [
            message("the new turn in chat one", Some("chat-1")),
            dated,
            secret,
            fact("Lisbon"),
            tagged,
            message("the last turn in chat one", Some("chat-1")),
            message("and in chat two", Some("chat-2")),
        ];
        let items: Vec<_> =
            news.iter().enumerate().map(|(i, n)| (n, id(10 + i as u32), lineage(LineageOp::Original, vec![], 10), at(10))).collect();
        let records = store
            .write(|tx| {
                if batched {
                    tx.insert_originals(&items)
                } else {
                    items.iter().map(|(n, id, l, now)| tx.insert(n, id.clone(), l.clone(), *now)).collect()
                }
            })
            .expect("the batch");
        returned.push(format!("{records:?}"));
    }
    assert_eq!(returned[0], returned[1], "the records returned");
    let rows = |url: &str| {
        let mut client = postgres::Client::connect(url, postgres::NoTls).expect("connect");
        let mut out = Vec::new();
        for sql in [
            "SELECT seq::text || ' ' || id || ' ' || coalesce(summary, '-') || ' ' || payload || ' ' || tags || ' ' || sensitivity \
             || ' ' || rank_anchor || ' ' || coalesce(event_time::text, '-') || ' ' || sort_time || ' ' || created_at FROM records ORDER BY seq",
            "SELECT tag || ' ' || record_seq FROM record_tags ORDER BY record_seq, tag",
            "SELECT thread || ' ' || record_seq FROM record_threads ORDER BY record_seq",
            "SELECT seq || ' ' || tsv::text FROM records_fts ORDER BY seq",
            "SELECT seq || ' ' || record_seq || ' ' || at || ' ' || actor || ' ' || action || ' ' || rationale || ' ' || details FROM audit ORDER BY seq",
        ] {
            for row in client.query(sql, &[]).expect("query") {
                out.push(row.get::<_, String>(0));
            }
        }
        out
    };
    let (batched, single) = (rows(&urls[0]), rows(&urls[1]));
    assert_eq!(batched, single);
    // The rows hold what they should: the new turn's context (weight B) has the earlier live
    // turns but neither the withdrawn one nor the more sensitive one.
    let mut client = postgres::Client::connect(&urls[0], postgres::NoTls).expect("connect");
    let mut in_context = |seq: i64, word: &str| -> bool {
        let query = mneme_core::lexemes::tsquery(word).expect("a word");
        let sql = "SELECT ts_filter(tsv, '{b}') @@ $2::text::tsquery FROM records_fts WHERE seq = $1";
        client.query_one(sql, &[&seq, &query]).expect("an index row").get(0)
    };
    for (word, expected) in [("lisbon", true), ("three", true), ("flight", true), ("last", true), ("withdrawn", false), ("passport", false)]
    {
        assert_eq!(in_context(4, word), expected, "{word:?} in the new turn's context: {batched:?}");
    }
    assert!(in_context(3, "new"), "an earlier member's context gained the new turn: {batched:?}");
    assert!(!in_context(3, "flight"), "a record's own words are weighted A, not B: {batched:?}");
    assert!(batched.iter().any(|r| r == "travel 6") && batched.iter().filter(|r| r.starts_with("travel ")).count() == 1, "{batched:?}");
}

#[test]
fn a_version_5_postgres_store_gets_the_lexemes_mneme_computes() {
    let url = mneme_testkit::postgres_database();
    let mut old = Store::create_postgres_at_version(pg_options(url.clone(), true), 5).expect("v5 store");
    // Rows as version 5 wrote them: the server derived the tsvector from three text columns.
    old.execute_raw(
        r#"INSERT INTO records (id, memory_type, payload_kind, sensitivity, scope, tags, summary, payload, confidence,
            salience_base, reinforced_at, pinned, rank_anchor, status, lineage_op, parent_ids, lineage_actor,
            lineage_rationale, lineage_at, created_at, updated_at, event_time, sort_time, pruned_at)
           SELECT '00000000-0000-7000-8000-00000000000' || n, 'episodic', 'event', 1, '', '[]', NULL,
            '{"kind":"event","event_kind":"message","text":"t"}', 1.0, 1.0, 1800000000000, 0, 0.0, 'active', 'original',
            '[]', 'test', '', 1800000000000, 1800000000000, 1800000000000, NULL, 1800000000000, NULL
           FROM generate_series(1, 2) n;
           INSERT INTO records_fts (seq, text, ctx, date) VALUES
            (1, 'The kettles were descaled', 'a turn about Lisbon', '8 May 2023'),
            (2, 'the second row', '', '');"#,
    )
    .expect("v5 rows");
    drop(old);

    let mut store = Store::open_postgres(pg_options(url.clone(), false)).expect("open migrates");
    assert_eq!(store.schema_version().expect("version"), mneme_store::PG_SCHEMA_VERSION);
    let mut client = postgres::Client::connect(&url, postgres::NoTls).expect("connect");
    let rows: Vec<String> =
        client.query("SELECT seq || ' ' || tsv::text FROM records_fts ORDER BY seq", &[]).expect("rows").iter().map(|r| r.get(0)).collect();
    assert_eq!(rows, ["1 '2023':11C '8':9C 'descal':4A 'kettl':2A 'lisbon':8B 'may':10C 'turn':6B", "2 'row':3A 'second':2A"]);
    let gone: bool = client.query_one("SELECT to_regclass('records_fts_v5') IS NULL", &[]).expect("query").get(0);
    assert!(gone, "the v5 table is dropped");
    let indexed: bool = client.query_one("SELECT to_regclass('records_fts_tsv') IS NOT NULL", &[]).expect("query").get(0);
    assert!(indexed, "the GIN index is rebuilt");
    let hits = store
        .read(|tx| {
            tx.lexical_candidates(
                &mneme_core::query::fts5_any(&["kettle".into(), "lisbon".into()]).expect("tokens"),
                &RecordFilter::default(),
                10,
                (0.25, 1.0),
            )
        })
        .expect("search");
    assert_eq!(hits.iter().map(|h| h.seq).collect::<Vec<_>>(), [1], "found by its own words and its context");
}

#[test]
fn postgres_keeps_every_vector_in_pgvector_and_versions_every_change() {
    let url = mneme_testkit::postgres_database();
    let mut store = Store::open_postgres(pg_options(url.clone(), true)).expect("new database");
    seed(&mut store);
    let model = "all-MiniLM-L6-v2";
    let mut client = postgres::Client::connect(&url, postgres::NoTls).expect("plain client");
    // The trigger derived the halfvec from the int8 codes: code × scale.
    let text: String = client.query_one("SELECT embedding::text FROM record_vectors WHERE record_seq = 1", &[]).expect("row").get(0);
    let values: Vec<f32> = text.trim_matches(['[', ']']).split(',').map(|x| x.parse().expect("a number")).collect();
    for (got, code) in values.iter().zip([-128i8, 0, 5, 127]) {
        assert!((got - f32::from(code) * 0.0123).abs() < 2e-3, "{values:?}");
    }
    let start = store.read(|tx| tx.vector_version()).expect("version");
    assert!(start > 0, "a vector was written");
    assert_eq!(store.read(|tx| tx.vector_changes(model, start)).expect("changes").stored, vec![]);
    // Another daemon writes a vector and forgets a record with one: both are reported.
    store
        .write(|tx| {
            tx.put_vectors(model, &[StoredVector { seq: 2, scale: 0.01, codes: vec![1, 2, 3, 4] }])?;
            tx.forget(&id(1), at(40))?;
            StoreResult::Ok(())
        })
        .expect("writes");
    let changes = store.read(|tx| tx.vector_changes(model, start)).expect("changes");
    assert_eq!(changes.stored, vec![StoredVector { seq: 2, scale: 0.01, codes: vec![1, 2, 3, 4] }]);
    assert_eq!(changes.erased, vec![1]);
    assert!(changes.version > start);
    assert_eq!(
        store.read(|tx| tx.vector_changes(model, changes.version)).expect("changes"),
        mneme_store::VectorChanges { version: changes.version, ..Default::default() }
    );
    // Nearest by cosine, in the database (4 dimensions: exact, no HNSW index).
    let near = store.read(|tx| tx.nearest_vectors(model, &[0.18, 0.36, 0.54, 0.73], 5, 40)).expect("search").expect("on postgres");
    assert_eq!(near.len(), 1, "{near:?}");
    assert_eq!(near[0].0, 2);
    assert!(near[0].1 > 0.99, "{near:?}");
    // SQLite has one writer and its own index: nothing to catch up, no database search.
    let Db::Lite(mut lite, _dir) = seeded() else { unreachable!() };
    assert_eq!(lite.read(|tx| tx.vector_changes(model, 0)).expect("changes"), mneme_store::VectorChanges::default());
    assert_eq!(lite.read(|tx| tx.nearest_vectors(model, &[1.0, 0.0, 0.0, 0.0], 5, 40)).expect("search"), None);
}

#[test]
fn without_pgvector_rights_the_error_says_what_to_do() {
    // A role that owns its database but is no superuser cannot create pgvector.
    let admin = mneme_testkit::postgres_database();
    let mut client = postgres::Client::connect(&admin, postgres::NoTls).expect("plain client");
    for sql in ["CREATE ROLE plain_owner LOGIN PASSWORD 'plain-pw'", "CREATE DATABASE owned_by_plain OWNER plain_owner"] {
        client.batch_execute(sql).expect("a plain role and its database");
    }
    let server = mneme_testkit::postgres();
    let url = format!("postgres://plain_owner@127.0.0.1:{}/owned_by_plain", server.port);
    let options =
        PgOptions { password: Some(mneme_store::SecretKey::new("plain-pw".into()).expect("a password")), ..pg_options(url, true) };
    let err = Store::open_postgres(options).expect_err("no right to create the extension");
    let text = err.to_string();
    assert!(text.contains("permission denied to create extension \"vector\""), "{text}");
    assert!(text.contains("CREATE EXTENSION vector;"), "{text}");
    assert!(!text.contains("plain-pw"), "{text}");
}

#[test]
fn tls_to_the_server_is_verified_against_the_given_authority() {
    // Debian's PostgreSQL (built with TLS; the wheel's is not, and has pgvector instead).
    let server = mneme_testkit::postgres_tls();
    let ca = server.ca_file.clone().expect("the TLS server's authority");
    let url = format!("postgres://mneme@127.0.0.1:{}/postgres", server.port);
    let tls = |ca_file: Option<std::path::PathBuf>, url: String| PgOptions {
        ca_file,
        password: Some(mneme_store::SecretKey::new(server.password.to_string()).expect("a password")),
        ..pg_options(url, true)
    };
    // With the authority: an encrypted session, verified (the leases' connection is a bare
    // one; the store's gets as far as the schema, which needs pgvector this server lacks).
    let leases = mneme_store::JobLeases::connect(&tls(Some(ca.clone()), format!("{url}?sslmode=require"))).expect("TLS with the test CA");
    assert!(leases.hold("probe").expect("a lease over TLS"));
    let mut client = postgres::Client::connect(&format!("{}/postgres", server.url), postgres::NoTls).expect("plain client");
    let encrypted: i64 = client
        .query_one("SELECT count(*) FROM pg_stat_ssl s JOIN pg_locks l USING (pid) WHERE s.ssl AND l.locktype = 'advisory'", &[])
        .expect("count")
        .get(0);
    assert_eq!(encrypted, 1, "the lease is held over an encrypted connection");
    let err = Store::open_postgres(tls(Some(ca.clone()), format!("{url}?sslmode=require"))).expect_err("no pgvector here");
    assert!(err.to_string().contains("CREATE EXTENSION vector"), "connected over TLS, then stopped at the schema: {err}");
    // Without the authority the server's certificate is not trusted, and the error says so.
    let err = Store::open_postgres(tls(None, format!("{url}?sslmode=require"))).expect_err("an unknown authority");
    let text = err.to_string();
    assert!(text.contains("invalid peer certificate: UnknownIssuer") && text.contains(&url), "{text}");
    assert!(text.contains("MNEME_DATABASE_CA_FILE"), "the way out is named: {text}");
    assert!(!text.contains(server.password), "{text}");
    // A CA file without a URL that asks for TLS is a mistake worth naming.
    let err = Store::open_postgres(tls(Some(ca.clone()), url.clone())).expect_err("TLS not asked for");
    assert!(err.to_string().contains("sslmode=require"), "{err}");
    // A file that holds no certificate is named.
    let dir = tempfile::tempdir().expect("dir");
    let bad = dir.path().join("ca.pem");
    std::fs::write(&bad, "not a certificate").expect("write");
    let err = Store::open_postgres(tls(Some(bad.clone()), format!("{url}?sslmode=require"))).expect_err("no certificate");
    assert!(err.to_string().contains(&bad.display().to_string()), "{err}");
}

#[test]
fn postgres_bounds_the_work_of_frequent_words() {
    let url = mneme_testkit::postgres_database();
    let mut store = Store::open_postgres(pg_options(url, true)).expect("new database");
    store
        .write(|tx| {
            for i in 1..=60u32 {
                let text = match i {
                    7 | 40 => format!("common note {i} with a rare zebra"),
                    _ => format!("common note {i}"),
                };
                tx.insert(&message(&text, None), id(i), lineage(LineageOp::Original, vec![], 1), at(i64::from(i)))?;
            }
            StoreResult::Ok(())
        })
        .expect("records");
    // The estimates come from ANALYZE's statistics (autovacuum gathers them on a live store).
    store.execute_raw("ANALYZE").expect("analyze");
    let seqs = |store: &mut Store, tokens: &[&str], bound: usize| {
        let tokens: Vec<String> = tokens.iter().map(|t| t.to_string()).collect();
        store
            .read(|tx| tx.bounded_lexical_candidates(&tokens, &RecordFilter::default(), 100, (0.5, 0.5), bound))
            .expect("search")
            .iter()
            .map(|c| c.seq)
            .collect::<Vec<i64>>()
    };
    // Unbounded in effect (no word matches more than 1000): every match, rare ones first.
    let all = seqs(&mut store, &["common", "zebra"], 1000);
    assert_eq!(all.len(), 60);
    assert_eq!(&all[..2], &[40, 7], "the rows with both words first, newest first on a tie: {all:?}");
    // "common" is frequent at a bound of 10: only the rare word chooses candidates, and the
    // frequent one still adds to their scores.
    assert_eq!(seqs(&mut store, &["common", "zebra"], 10), vec![40, 7]);
    // Every word frequent: the newest `bound` matches of the rarest.
    let newest = seqs(&mut store, &["common", "note"], 10);
    let mut sorted = newest.clone();
    sorted.sort_unstable();
    assert_eq!(sorted, (51..=60).collect::<Vec<i64>>(), "{newest:?}");
}
