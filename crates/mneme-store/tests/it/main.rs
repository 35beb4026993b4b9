//! Integration tests of the store on real SQLite files: opening, migrations, refusal of
//! foreign, newer, damaged or wrongly keyed files, encryption at rest, and the
//! never-delete triggers.

mod dump;
mod encryption;
mod open;

use std::path::{Path, PathBuf};

use jiff::Timestamp;
use mneme_core::{EventPayload, Lineage, LineageOp, NewRecord, Payload, RecordId};
use mneme_store::{SecretKey, Store, StoreOptions};

pub fn options(path: &Path, key: Option<&str>, create: bool) -> StoreOptions {
    StoreOptions {
        path: path.to_path_buf(),
        key: key.map(|k| SecretKey::new(k.to_string()).expect("valid test key")),
        create,
        decay: Default::default(),
    }
}

pub fn db_path(dir: &tempfile::TempDir) -> PathBuf {
    dir.path().join("mneme.db")
}

pub fn event(text: &str) -> NewRecord {
    NewRecord::new(Payload::Event(EventPayload {
        event_kind: "message".into(),
        reference: None,
        sender: Some("howard".into()),
        text: text.into(),
        event_time: None,
    }))
}

pub fn insert(store: &mut Store, n: u32, text: &str) -> RecordId {
    let id = RecordId::parse(&format!("00000000-0000-7000-8000-{n:012}")).expect("valid id");
    let now = Timestamp::from_second(1_800_000_000).expect("in range");
    let lineage =
        Lineage { parent_ids: vec![], operation: LineageOp::Original, actor: "test".into(), rationale: String::new(), timestamp: now };
    let record = event(text);
    store.write(|tx| tx.insert(&record, id.clone(), lineage, now)).expect("insert succeeds");
    id
}

pub fn file_bytes(path: &Path) -> Vec<u8> {
    std::fs::read(path).expect("file readable")
}
