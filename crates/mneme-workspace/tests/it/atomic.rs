//! Atomic writes under SIGKILL: a child process (`mneme-crash-writer`) rewrites one file
//! in a loop and is killed at varying moments; the file must always hold one whole
//! generation, never a torn mix.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use mneme_workspace::atomic::{append_line, write_atomic};

#[path = "../common/generations.rs"]
mod generations;

use generations::{content, generation_of, ready_marker};

#[test]
fn a_file_killed_mid_write_holds_old_or_new_content_never_torn() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("state.md");
    write_atomic(&path, &content(0)).expect("initial content");
    let mut generations_seen = Vec::new();
    for round in 0..8u64 {
        let _ = std::fs::remove_file(ready_marker(&path));
        let mut child = Command::new(env!("CARGO_BIN_EXE_mneme-crash-writer"))
            .arg(&path)
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
