use std::collections::HashSet;
use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::time::{Duration, Instant};

use crate::{Mneme, read};

const KEY: &str = "tr0ub4dor&3 horse";

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

#[test]
fn encryption_from_the_environment_keeps_memories_and_the_key_off_disk_and_out_of_output() {
    let mut m = Mneme::new();
    m.key = Some(KEY.into());
    let init = m.ok(&["--json", "init"]);
    assert!(init.contains("\"encrypted\": true") && !init.contains(KEY));
    let id = m.ok(&["ingest", "event", "--text", "the alarm code is 88-31-stingray"]).trim().to_string();
    assert!(m.ok(&["--json", "show", &id]).contains("stingray"));
    for entry in std::fs::read_dir(m.dir.path()).expect("ls") {
        let bytes = read(&entry.expect("entry").path());
        assert!(!contains(&bytes, b"stingray") && !contains(&bytes, b"alarm code"), "plaintext on disk");
    }
    let before = read(&m.db());
    m.key = Some("not the key".into());
    let out = m.run(&["--json", "recall", "alarm"]);
    assert_eq!(out.status.code(), Some(6));
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(stderr.contains("wrong encryption key"), "{stderr}");
    assert!(!stderr.contains("not the key") && !stdout.contains("not the key"), "the key leaked");
    m.key = None;
    let stderr = m.fails(&["recall", "alarm"], 6);
    assert!(stderr.contains("MNEME_ENCRYPTION_KEY"), "{stderr}");
    assert_eq!(before, read(&m.db()), "failed opens changed nothing");

    // The key can also come from a file.
    let key_file = m.dir.path().join("key");
    std::fs::write(&key_file, format!("{KEY}\n")).expect("write key");
    let hits = m.json(&["--key-file", key_file.to_str().expect("utf-8 path"), "recall", "alarm"]);
    assert_eq!(hits[0]["record"]["id"], id.as_str());
}

#[test]
fn two_processes_writing_at_once_both_succeed_or_get_busy_and_nothing_is_corrupted() {
    let m = Mneme::init();
    let per_writer = 15;
    let outcomes: Vec<(usize, usize)> = std::thread::scope(|s| {
        let writers: Vec<_> = (0..2)
            .map(|w| {
                let m = &m;
                s.spawn(move || {
                    let (mut ok, mut busy) = (0, 0);
                    for i in 0..per_writer {
                        let out = m.run(&["ingest", "event", "--text", &format!("writer {w} item {i}")]);
                        match out.status.code() {
                            Some(0) => ok += 1,
                            Some(5) => {
                                assert!(String::from_utf8_lossy(&out.stderr).contains("busy"));
                                busy += 1
                            }
                            other => panic!("writer {w}: exit {other:?}: {}", String::from_utf8_lossy(&out.stderr)),
                        }
                    }
                    (ok, busy)
                })
            })
            .collect();
        writers.into_iter().map(|h| h.join().expect("writer thread")).collect()
    });
    let succeeded: usize = outcomes.iter().map(|o| o.0).sum();
    assert!(succeeded > 0);
    let conn = rusqlite::Connection::open(m.db()).expect("open");
    let count: i64 = conn.query_row("SELECT count(*) FROM records", [], |r| r.get(0)).expect("count");
    assert_eq!(count as usize, succeeded, "every acknowledged write is there, nothing else");
    let check: String = conn.query_row("PRAGMA integrity_check", [], |r| r.get(0)).expect("check");
    assert_eq!(check, "ok");
}

#[test]
fn acknowledged_writes_survive_a_killed_writer() {
    let m = Mneme::init();
    let mut acknowledged: HashSet<String> = HashSet::new();
    // Kill the writer at different moments; each round reopens the store the last one crashed on.
    for (round, kill_after) in [40u64, 150, 400].into_iter().enumerate() {
        let mut child = m.command().args(["stress-write", "--count", "1000000"]).stdout(Stdio::piped()).spawn().expect("spawn");
        let stdout = child.stdout.take().expect("stdout");
        let reader = std::thread::spawn(move || BufReader::new(stdout).lines().map_while(Result::ok).collect::<Vec<String>>());
        let started = Instant::now();
        while started.elapsed() < Duration::from_millis(kill_after) {
            std::thread::sleep(Duration::from_millis(5));
        }
        child.kill().expect("SIGKILL");
        child.wait().expect("reap");
        let ids = reader.join().expect("reader");
        acknowledged.extend(ids);
        let conn = rusqlite::Connection::open(m.db()).expect("reopen after crash");
        let check: String = conn.query_row("PRAGMA integrity_check", [], |r| r.get(0)).expect("check");
        assert_eq!(check, "ok", "round {round}");
        let mut stmt = conn.prepare("SELECT id FROM records").expect("prepare");
        let stored: HashSet<String> = stmt.query_map([], |r| r.get(0)).expect("query").map(|r| r.expect("row")).collect();
        let lost: Vec<&String> = acknowledged.difference(&stored).collect();
        assert!(lost.is_empty(), "round {round}: acknowledged writes lost: {lost:?}");
        let audit: i64 = conn.query_row("SELECT count(*) FROM audit", [], |r| r.get(0)).expect("audit");
        assert_eq!(audit as usize, stored.len(), "every record has its creation audit entry (same transaction)");
    }
    assert!(!acknowledged.is_empty(), "the writer got some writes in before each kill");
    // And mneme itself opens the crashed store normally.
    assert_eq!(m.json(&["metrics"])["total_records"].as_u64().map(|n| n as usize >= acknowledged.len()), Some(true));
}

#[test]
fn a_key_with_control_characters_is_refused_without_echoing_it() {
    let m = Mneme::new();
    let key_file = m.dir.path().join("key");
    std::fs::write(&key_file, b"s3cret-part\0tail-part").expect("write");
    let out = m.run(&["--json", "--key-file", key_file.to_str().expect("utf-8"), "init"]);
    assert_eq!(out.status.code(), Some(2));
    let all = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(all.contains("control characters"), "{all}");
    assert!(!all.contains("s3cret") && !all.contains("tail-part"), "the key leaked: {all}");
    assert!(!m.db().exists(), "nothing was created");
}

/// A tmpfs of a few MiB, unmounted when dropped. `None` (with the reason) where the test
/// process may not mount (not root, or no CAP_SYS_ADMIN in a container).
struct SmallDisk {
    dir: tempfile::TempDir,
}

impl SmallDisk {
    fn mount(mib: u32) -> Result<SmallDisk, String> {
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let out = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={mib}m"), "tmpfs"])
            .arg(dir.path())
            .output()
            .map_err(|e| format!("cannot run mount: {e}"))?;
        if !out.status.success() {
            return Err(format!("mount -t tmpfs failed: {}", String::from_utf8_lossy(&out.stderr).trim()));
        }
        Ok(SmallDisk { dir })
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount").arg("-l").arg(self.dir.path()).output();
    }
}

/// The disk fills up under a writer: every write either succeeds and survives, or fails
/// with exit 6 naming the full disk and changes nothing; the store stays intact and takes
/// writes again once space is freed.
#[test]
fn a_full_disk_refuses_writes_cleanly_and_loses_nothing_acknowledged() {
    let disk = match SmallDisk::mount(8) {
        Ok(disk) => disk,
        Err(reason) => {
            eprintln!("SKIPPED a_full_disk_refuses_writes_cleanly_and_loses_nothing_acknowledged: {reason} (needs root)");
            return;
        }
    };
    let home = disk.dir.path().join("home");
    let run = |args: &[&str]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_mneme"))
            .env("MNEME_HOME", &home)
            .env("MNEME_MODEL_CACHE", home.join("model-cache"))
            .env_remove("MNEME_CONFIG")
            .env_remove("MNEME_ENCRYPTION_KEY")
            .env_remove("MNEME_ENCRYPTION_KEY_FILE")
            .args(args)
            .output()
            .expect("mneme runs")
    };
    assert!(run(&["init"]).status.success());
    // Leave about 1.5 MiB free.
    let filler = disk.dir.path().join("filler");
    let used: u64 = std::fs::read_dir(&home).expect("ls").filter_map(|e| e.ok()?.metadata().ok()).map(|m| m.len()).sum();
    std::fs::write(&filler, vec![7u8; (8 * 1024 * 1024 - 1536 * 1024 - used) as usize]).expect("filler");
    let chunk = "x".repeat(60 * 1024);
    let (mut acked, mut refused) = (Vec::new(), 0);
    for i in 0..80 {
        let out = run(&["ingest", "event", "--text", &format!("{i} {chunk}")]);
        if out.status.success() {
            acked.push(String::from_utf8_lossy(&out.stdout).trim().to_string());
        } else {
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(6), "{stderr}");
            assert!(stderr.contains("full"), "the error names the full disk: {stderr}");
            refused += 1;
            if refused >= 3 {
                break;
            }
        }
    }
    assert!(refused > 0, "the disk never filled up ({} writes acknowledged)", acked.len());
    assert!(!acked.is_empty());
    std::fs::remove_file(&filler).expect("free space");
    let after = run(&["ingest", "event", "--text", "after space was freed"]);
    assert!(after.status.success(), "{}", String::from_utf8_lossy(&after.stderr));
    let conn = rusqlite::Connection::open(home.join("mneme.db")).expect("open");
    let check: String = conn.query_row("PRAGMA integrity_check", [], |r| r.get(0)).expect("check");
    assert_eq!(check, "ok");
    for id in &acked {
        let n: i64 = conn.query_row("SELECT count(*) FROM records WHERE id = ?1", [id], |r| r.get(0)).expect("query");
        assert_eq!(n, 1, "acknowledged write {id} lost");
    }
    let total: i64 = conn.query_row("SELECT count(*) FROM records", [], |r| r.get(0)).expect("count");
    assert_eq!(total as usize, acked.len() + 1, "refused writes left nothing behind");
}
