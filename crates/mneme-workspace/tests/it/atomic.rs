//! Atomic writes under SIGKILL: a child process rewrites one file in a loop and is killed at
//! varying moments; the file must always hold one whole generation, never a torn mix.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use mneme_workspace::atomic::{append_line, write_atomic};

/// Set in the child's environment to the file it must keep rewriting.
const CHILD_ENV: &str = "MNEME_WORKSPACE_ATOMIC_CHILD";
const BODY_BYTES: usize = 4 * 1024 * 1024;

/// The two bodies, for even and odd generations: consecutive generations differ in every
/// byte, so any mix of two is detected. Built once, so the child spends its time writing.
fn bodies() -> &'static [Vec<u8>; 2] {
    static BODIES: std::sync::OnceLock<[Vec<u8>; 2]> = std::sync::OnceLock::new();
    BODIES.get_or_init(|| {
        let body = |parity: usize| (0..BODY_BYTES).map(|index| ((parity + index) % 251) as u8).collect();
        [body(0), body(1)]
    })
}

/// Generation `n`'s content: a header naming it and the body of its parity.
fn content(generation: u64) -> Vec<u8> {
    let mut bytes = format!("generation {generation}\n").into_bytes();
    bytes.extend_from_slice(&bodies()[(generation % 2) as usize]);
    bytes
}

/// The generation the file holds, or a description of how it is torn.
fn generation_of(bytes: &[u8]) -> Result<u64, String> {
    let newline = bytes.iter().position(|&b| b == b'\n').ok_or("no header line")?;
    let header = std::str::from_utf8(&bytes[..newline]).map_err(|_| "header is not UTF-8")?;
    let generation: u64 =
        header.strip_prefix("generation ").and_then(|n| n.parse().ok()).ok_or_else(|| format!("bad header {header:?}"))?;
    if bytes == content(generation).as_slice() {
        Ok(generation)
    } else {
        Err(format!("generation {generation} has {} bytes or a torn body", bytes.len()))
    }
}

/// Not a test of its own: the entry point of the child process that `kill_during_writes`
/// spawns (this test binary, filtered to this function). Without the variable it returns.
#[test]
fn crash_child_entry() {
    let Some(path) = std::env::var_os(CHILD_ENV) else { return };
    let path = PathBuf::from(path);
    for generation in 1.. {
        write_atomic(&path, &content(generation)).expect("child write");
        if generation == 1 {
            std::fs::write(ready_marker(&path), b"").expect("child ready marker");
        }
    }
}

/// The file the child creates once its first write is complete.
fn ready_marker(path: &Path) -> PathBuf {
    path.with_extension("ready")
}

#[test]
fn a_file_killed_mid_write_holds_old_or_new_content_never_torn() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("state.md");
    write_atomic(&path, &content(0)).expect("initial content");
    let exe = std::env::current_exe().expect("test binary path");
    let mut generations_seen = Vec::new();
    for round in 0..8u64 {
        let _ = std::fs::remove_file(ready_marker(&path));
        let mut child = Command::new(&exe)
            .args(["--exact", "atomic::crash_child_entry", "--test-threads", "1", "--quiet"])
            .env(CHILD_ENV, &path)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn child");
        // Let the child complete one write, then kill it after a varying delay: most of its
        // time is spent writing, so the kill lands mid-write at different points.
        wait_for(&ready_marker(&path), Duration::from_secs(30));
        std::thread::sleep(Duration::from_millis(3 + round * 7));
        child.kill().expect("SIGKILL the child");
        child.wait().expect("reap the child");
        let bytes = std::fs::read(&path).expect("read after kill");
        match generation_of(&bytes) {
            Ok(generation) => generations_seen.push(generation),
            Err(torn) => panic!("round {round}: torn file: {torn}"),
        }
    }
    assert!(generations_seen.iter().any(|&g| g > 0), "the child never wrote: {generations_seen:?}");
}

/// Waits until `marker` exists.
fn wait_for(marker: &Path, limit: Duration) {
    let started = Instant::now();
    while !marker.exists() {
        assert!(started.elapsed() < limit, "the child wrote nothing within {limit:?}");
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[test]
fn appended_lines_are_whole_records_under_concurrent_writers() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("log.jsonl");
    std::thread::scope(|scope| {
        for writer in 0..4 {
            let path = &path;
            scope.spawn(move || {
                for n in 0..200 {
                    let line = format!("{{\"writer\":{writer},\"n\":{n},\"pad\":\"{}\"}}", "x".repeat(300));
                    append_line(path, &line).expect("append");
                }
            });
        }
    });
    let text = crate::read(&path);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 800);
    for line in lines {
        let value: serde_json::Value = serde_json::from_str(line).expect("every line is whole JSON");
        assert_eq!(value["pad"].as_str().map(str::len), Some(300));
    }
}

#[test]
fn stale_temp_files_are_swept_and_fresh_ones_and_other_files_kept() {
    let dir = tempfile::tempdir().expect("dir");
    let sub = dir.path().join("sessions");
    std::fs::create_dir_all(&sub).expect("mkdir");
    let stale = sub.join(".mneme-tmpAbC123");
    let fresh = dir.path().join(".mneme-tmpXyZ789");
    let other = dir.path().join(".notes-tmp");
    for path in [&stale, &fresh, &other] {
        std::fs::write(path, b"partial").expect("write");
    }
    let old = std::time::SystemTime::now() - Duration::from_secs(7200);
    std::fs::File::options().write(true).open(&stale).expect("open").set_modified(old).expect("set mtime");
    std::fs::File::options().write(true).open(&other).expect("open").set_modified(old).expect("set mtime");
    // A symlinked directory elsewhere is not followed.
    let outside = tempfile::tempdir().expect("outside");
    let foreign = outside.path().join(".mneme-tmpForeign");
    std::fs::write(&foreign, b"x").expect("write");
    std::fs::File::options().write(true).open(&foreign).expect("open").set_modified(old).expect("set mtime");
    std::os::unix::fs::symlink(outside.path(), dir.path().join("linked")).expect("symlink");

    let removed = mneme_workspace::atomic::sweep_stale_temp_files(dir.path(), Duration::from_secs(3600));
    assert_eq!(removed, vec![stale.clone()]);
    assert!(!stale.exists() && fresh.exists() && other.exists() && foreign.exists());
}
