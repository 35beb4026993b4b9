use mneme_store::{Store, StoreError};

use crate::{db_path, file_bytes, insert, options};

const KEY: &str = "correct horse battery staple 7f3a";
const SECRET: &str = "zebra-lighthouse-4921 is the vault code";

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

#[test]
fn an_encrypted_store_holds_no_plaintext_and_reopens_with_its_key() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = db_path(&dir);
    let mut store = Store::open(options(&path, Some(KEY), true)).expect("create encrypted");
    assert!(store.is_encrypted());
    let id = insert(&mut store, 1, SECRET);
    drop(store);
    for file in std::fs::read_dir(dir.path()).expect("list") {
        let bytes = file_bytes(&file.expect("entry").path());
        assert!(!contains(&bytes, b"zebra-lighthouse"), "plaintext of a memory on disk");
        assert!(!contains(&bytes, b"SQLite format 3"), "the file must not even be recognisable");
    }
    let mut store = Store::open(options(&path, Some(KEY), false)).expect("reopen");
    let record = store.read(|tx| tx.require(&id)).expect("read back");
    assert_eq!(record.summary, format!("howard: {SECRET}"));
}

#[test]
fn a_wrong_or_missing_key_is_refused_without_changing_the_file_or_leaking_the_key() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = db_path(&dir);
    let mut store = Store::open(options(&path, Some(KEY), true)).expect("create encrypted");
    insert(&mut store, 1, SECRET);
    drop(store);
    let before = file_bytes(&path);

    let wrong = "wrong key 123";
    let err = Store::open(options(&path, Some(wrong), false)).expect_err("wrong key");
    assert!(matches!(err, StoreError::WrongKey { .. }), "{err}");
    assert!(!err.to_string().contains(wrong) && !format!("{err:?}").contains(wrong), "the key leaked: {err:?}");

    let err = Store::open(options(&path, None, false)).expect_err("no key");
    assert!(matches!(err, StoreError::NotADatabaseOrEncrypted { .. }), "{err}");
    assert!(err.to_string().contains("MNEME_ENCRYPTION_KEY"), "{err}");

    assert_eq!(before, file_bytes(&path), "failed opens must not write");
    assert!(!dir.path().join("mneme.db-wal").exists() || file_bytes(&dir.path().join("mneme.db-wal")).is_empty());
}

#[test]
fn a_key_for_a_plaintext_store_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = db_path(&dir);
    drop(Store::open(options(&path, None, true)).expect("create plaintext"));
    let err = Store::open(options(&path, Some(KEY), false)).expect_err("must refuse");
    assert!(matches!(err, StoreError::NotEncrypted { .. }), "{err}");
    assert!(format!("{:?}", options(&path, Some(KEY), false)).contains("redacted"));
    assert!(!format!("{:?}", options(&path, Some(KEY), false)).contains(KEY));
}
