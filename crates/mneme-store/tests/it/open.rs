use mneme_core::query::fts5_expression;
use mneme_store::{RecordFilter, SCHEMA_VERSION, Store, StoreError};

use std::path::PathBuf;

use crate::{db_path, file_bytes, insert, options};

#[test]
fn a_missing_store_is_not_created_unless_asked() {
    let dir = tempfile::tempdir().expect("tempdir");
    let err = Store::open(options(&db_path(&dir), None, false)).expect_err("must refuse");
    assert!(matches!(err, StoreError::Missing { .. }), "{err}");
    assert!(err.to_string().contains("mneme init"), "{err}");
    assert!(!db_path(&dir).exists());
}

#[test]
fn a_new_store_records_its_version_and_application_id() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut store = Store::open(options(&db_path(&dir), None, true)).expect("create");
    assert_eq!(store.schema_version().expect("version"), SCHEMA_VERSION);
    drop(store);
    let conn = rusqlite::Connection::open(db_path(&dir)).expect("plain open");
    let app: i64 = conn.pragma_query_value(None, "application_id", |r| r.get(0)).expect("pragma");
    assert_eq!(app, mneme_store::APPLICATION_ID);
    let steps: i64 = conn.query_row("SELECT count(*) FROM schema_migrations", [], |r| r.get(0)).expect("count");
    assert_eq!(steps, SCHEMA_VERSION);
}

#[test]
fn a_version_1_store_is_migrated_and_its_records_become_searchable() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = db_path(&dir);
    let mut old = Store::create_at_version(&path, 1, Default::default()).expect("v1 store");
    assert_eq!(old.schema_version().expect("version"), 1);
    // A row as version 1 wrote it (no full-text index existed yet).
    old.execute_raw(
        r#"INSERT INTO records (id, memory_type, payload_kind, sensitivity, scope, tags, summary, payload, confidence,
            salience_base, reinforced_at, pinned, rank_anchor, status, lineage_op, parent_ids, lineage_actor,
            lineage_rationale, lineage_at, created_at, updated_at, event_time, sort_time, pruned_at)
           VALUES ('00000000-0000-7000-8000-000000000001', 'semantic', 'semantic', 1, '', '[]', 'old fact',
            '{"kind":"semantic","subject":"kettle","predicate":"is","object":"descaled"}', 1.0, 1.0,
            1800000000000, 0, 0.0, 'active', 'original', '[]', 'test', '', 1800000000000, 1800000000000,
            1800000000000, NULL, 1800000000000, NULL);"#,
    )
    .expect("raw insert");
    drop(old);

    let mut store = Store::open(options(&path, None, false)).expect("open migrates");
    assert_eq!(store.schema_version().expect("version"), SCHEMA_VERSION);
    let hits = store
        .read(|tx| tx.lexical_candidates(&fts5_expression("kettle descaled").expect("tokens"), &RecordFilter::default(), 10, (0.25, 1.0)))
        .expect("search");
    assert_eq!(hits.len(), 1, "the migrated record is in the new index");
}

#[test]
fn a_store_from_a_newer_mneme_is_refused_untouched() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = db_path(&dir);
    let mut store = Store::open(options(&path, None, true)).expect("create");
    insert(&mut store, 1, "hello");
    drop(store);
    rusqlite::Connection::open(&path).expect("open").pragma_update(None, "user_version", 99).expect("bump");
    let before = file_bytes(&path);
    let err = Store::open(options(&path, None, false)).expect_err("must refuse");
    assert!(matches!(err, StoreError::TooNew { found: 99, .. }), "{err}");
    assert!(err.to_string().contains("newer mneme"), "{err}");
    assert_eq!(before, file_bytes(&path), "refusing must not write");
}

#[test]
fn a_foreign_sqlite_database_is_refused_untouched() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = db_path(&dir);
    let conn = rusqlite::Connection::open(&path).expect("open");
    conn.execute_batch("CREATE TABLE invoices (id INTEGER PRIMARY KEY); INSERT INTO invoices VALUES (7);").expect("setup");
    drop(conn);
    let before = file_bytes(&path);
    let err = Store::open(options(&path, None, false)).expect_err("must refuse");
    assert!(matches!(err, StoreError::NotMneme { .. }), "{err}");
    assert_eq!(before, file_bytes(&path));
}

#[test]
fn a_file_that_is_not_a_database_is_refused_untouched() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = db_path(&dir);
    std::fs::write(&path, b"these are my notes, not a database\n".repeat(100)).expect("write");
    let before = file_bytes(&path);
    let err = Store::open(options(&path, None, false)).expect_err("must refuse");
    assert!(matches!(err, StoreError::NotADatabaseOrEncrypted { .. }), "{err}");
    assert_eq!(before, file_bytes(&path));
}

#[test]
fn a_truncated_store_is_refused_untouched() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = db_path(&dir);
    let mut store = Store::open(options(&path, None, true)).expect("create");
    for n in 0..200 {
        insert(&mut store, n, &format!("record number {n} with some words to fill pages {}", "x".repeat(200)));
    }
    drop(store);
    let full = file_bytes(&path);
    assert!(full.len() > 16 * 4096, "the store spans many pages");
    for cut in [50usize, full.len() / 2, full.len() - 4096] {
        std::fs::write(&path, &full[..cut]).expect("truncate");
        let err = Store::open(options(&path, None, false)).expect_err("must refuse");
        assert!(matches!(err, StoreError::Truncated { .. }), "cut at {cut}: {err}");
        assert_eq!(&full[..cut], &file_bytes(&path)[..], "refusing must not write");
    }
}

#[test]
fn audit_entries_and_records_cannot_be_deleted_or_edited() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut store = Store::open(options(&db_path(&dir), None, true)).expect("create");
    insert(&mut store, 1, "keep me");
    for sql in ["DELETE FROM audit", "UPDATE audit SET actor = 'mallory'", "DELETE FROM records"] {
        let err = store.execute_raw(sql).expect_err("the schema forbids it");
        let text = err.to_string();
        assert!(text.contains("append-only") || text.contains("never deleted"), "{sql}: {text}");
    }
    let audit = store.read(|tx| tx.stats()).expect("stats");
    assert_eq!(audit.audit_entries, 1);
}

#[test]
fn processes_creating_the_same_store_at_once_all_succeed() {
    for _ in 0..5 {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = db_path(&dir);
        let results: Vec<Result<i64, String>> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..4)
                .map(|_| {
                    s.spawn(|| Store::open(options(&path, None, true)).and_then(|mut st| st.schema_version()).map_err(|e| e.to_string()))
                })
                .collect();
            handles.into_iter().map(|h| h.join().expect("thread")).collect()
        });
        for r in results {
            assert_eq!(r, Ok(SCHEMA_VERSION));
        }
        let conn = rusqlite::Connection::open(&path).expect("open");
        let steps: i64 = conn.query_row("SELECT count(*) FROM schema_migrations", [], |r| r.get(0)).expect("count");
        assert_eq!(steps, SCHEMA_VERSION, "each migration applied once");
    }
}

/// The daemon opens its writer, then read connections. Opening the second connection read
/// the file header with a plain descriptor whose close dropped every POSIX lock of the
/// process on the file: the next foreign client to close the database took itself for the
/// last one and deleted the WAL under the open connections (acknowledged writes lost).
#[test]
fn opening_a_second_connection_keeps_the_first_ones_locks() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = db_path(&dir);
    let mut writer = Store::open(options(&path, None, true)).expect("create");
    let reader = Store::open(options(&path, None, false)).expect("second connection");
    insert(&mut writer, 1, "before the foreign reader");
    assert!(holds_a_lock_on(&path), "this process must hold SQLite's lock on the database");

    // A foreign client in another process opens, reads and closes the database.
    let script =
        "import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); print(c.execute('select count(*) from records').fetchone()[0]); c.close()";
    let out = std::process::Command::new("python3").arg("-c").arg(script).arg(&path).output().expect("python3 runs");
    assert!(out.status.success(), "foreign reader failed: {}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "1");

    let wal = PathBuf::from(format!("{}-wal", path.display()));
    assert!(wal.exists(), "the foreign close must not delete the WAL of open connections");
    insert(&mut writer, 2, "after the foreign reader");
    drop(reader);
    drop(writer);
    let mut reopened = Store::open(options(&path, None, false)).expect("reopen");
    let stats = reopened.read(|tx| tx.stats()).expect("stats");
    assert_eq!(stats.by_type.values().sum::<i64>(), 2, "both acknowledged writes are in the store");
}

/// Whether `/proc/locks` lists a lock of this process on `path`'s inode. The kernel
/// writes that file a page at a time from a list other processes change as they lock and
/// unlock (the other tests' SQLite files), so one read can skip a line: a lock seen in
/// any of five reads is held (a lock the second connection dropped is never seen again).
fn holds_a_lock_on(path: &std::path::Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    let inode = std::fs::metadata(path).expect("stat").ino();
    let pid = std::process::id().to_string();
    (0..5).any(|_| {
        let locks = std::fs::read_to_string("/proc/locks").expect("/proc/locks is readable on Linux");
        locks.lines().any(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            // "1: POSIX  ADVISORY  READ 1234 fe:00:5308690 1073741826 1073742335"
            fields.len() >= 6 && fields[4] == pid && fields[5].rsplit(':').next().and_then(|i| i.parse::<u64>().ok()) == Some(inode)
        })
    })
}
