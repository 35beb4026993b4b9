//! Integration tests of mneme-workspace: the public API on real temporary directories,
//! with fixed instants instead of the clock. Rendered text is compared with the snapshot
//! files in `tests/snapshots/` (`UPDATE_SNAPSHOTS=1 cargo test -p mneme-workspace`
//! rewrites them; review the diff).

// Tests read their own switches (`UPDATE_SNAPSHOTS`).
#![allow(clippy::disallowed_methods)]

mod atomic;
mod chunk;
mod consolidate;
mod context;
mod init;
mod inner;
mod journal;
mod modules;
mod paths;
mod playbook;
mod private;
mod rotate;
mod schedule;
mod status;

use std::path::{Path, PathBuf};

use jiff::Timestamp;
use jiff::tz::TimeZone;
use mneme_workspace::WorkspaceSettings;

/// A fixed instant from RFC 3339 text.
pub fn ts(text: &str) -> Timestamp {
    text.parse().unwrap_or_else(|error| panic!("bad test timestamp {text:?}: {error}"))
}

/// An IANA zone.
pub fn tz(name: &str) -> TimeZone {
    TimeZone::get(name).unwrap_or_else(|error| panic!("unknown test zone {name:?}: {error}"))
}

/// A fresh, empty temporary workspace directory and default settings for it in `zone`.
pub fn workspace(zone: &str) -> (tempfile::TempDir, WorkspaceSettings) {
    let dir = tempfile::tempdir().expect("temp dir");
    let settings = WorkspaceSettings::new(dir.path().join("ws"), tz(zone));
    (dir, settings)
}

/// A workspace initialised at `now`.
pub fn initialised(zone: &str, now: &str) -> (tempfile::TempDir, WorkspaceSettings) {
    let (dir, settings) = workspace(zone);
    mneme_workspace::init::init(&settings, ts(now)).expect("init");
    (dir, settings)
}

pub fn read(path: impl AsRef<Path>) -> String {
    let path = path.as_ref();
    std::fs::read_to_string(path).unwrap_or_else(|error| panic!("cannot read {path:?}: {error}"))
}

pub fn write(path: impl AsRef<Path>, content: &str) {
    let path = path.as_ref();
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).expect("create parent");
    }
    std::fs::write(path, content).unwrap_or_else(|error| panic!("cannot write {path:?}: {error}"));
}

/// Sets a file's modification time.
pub fn set_mtime(path: impl AsRef<Path>, when: Timestamp) {
    let file = std::fs::File::options().write(true).open(path.as_ref()).expect("open for mtime");
    file.set_modified(std::time::SystemTime::from(when)).expect("set mtime");
}

/// Compares `actual` with the snapshot file `tests/snapshots/<name>`.
pub fn check_snapshot(name: &str, actual: &str) {
    let path = snapshot_path(name);
    if std::env::var_os("UPDATE_SNAPSHOTS").is_some() {
        write(&path, actual);
        return;
    }
    let expected =
        std::fs::read_to_string(&path).unwrap_or_else(|_| panic!("missing snapshot {path:?}; run with UPDATE_SNAPSHOTS=1 and review it"));
    assert!(actual == expected, "snapshot {name} differs (UPDATE_SNAPSHOTS=1 rewrites it)\n--- expected\n{expected}\n--- actual\n{actual}");
}

fn snapshot_path(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/snapshots").join(name)
}
