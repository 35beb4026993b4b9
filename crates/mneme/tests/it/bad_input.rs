use std::ffi::OsStr;
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::process::Stdio;

use crate::{Mneme, read};

#[test]
fn bad_input_gets_a_clear_error_and_leaves_the_store_unchanged() {
    let m = Mneme::init();
    let fact = m.ok(&["ingest", "observation", "--subject", "a", "--predicate", "b", "--object", "c"]).trim().to_string();
    let episode = m.ok(&["ingest", "event", "--text", "it happened"]).trim().to_string();
    let missing = "01a2006e-e872-73ff-a731-254277a1f7dd";
    let before = m.footprint();
    let cases: Vec<(Vec<&str>, i32, &str)> = vec![
        (vec!["show", missing], 3, "no record"),
        (vec!["retract", missing, "--rationale", "x"], 3, "no record"),
        (vec!["show", "not-an-id"], 2, "not a record id"),
        (vec!["recall", "x", "--type", "dream"], 2, "unknown memory type"),
        (vec!["recall", "x", "--sensitivity", "secret"], 2, "unknown sensitivity"),
        (vec!["ingest", "event", "--text", "x", "--sensitivity", "topsecret"], 2, "unknown sensitivity"),
        (vec!["reinforce", &fact, "--amount", "NaN"], 2, "amount"),
        (vec!["reinforce", &fact, "--amount", "inf"], 2, "amount"),
        (vec!["penalize", &fact, "--amount", "-0.5"], 2, "amount"),
        (vec!["ingest", "outcome", "--target", &fact, "--result", "success", "--amount", "-1"], 2, "amount"),
        (vec!["ingest", "observation", "--subject", "a", "--predicate", "b", "--object", "c", "--confidence", "1.5"], 2, "confidence"),
        (vec!["ingest", "event", "--text", "x", "--at", "yesterday-ish"], 2, "--at"),
        (vec!["ingest", "tool", "--tool", "git", "--args", "{not json"], 2, "--args"),
        (vec!["ingest", "event", "--text", "x", "--scope", "two words"], 2, "scope"),
        (vec!["supersede", &episode, "--rationale", "fix"], 4, "immutable"),
        (vec!["supersede", &fact, "--rationale", ""], 2, "rationale"),
        (vec!["merge", &fact, &episode, "--rationale", "m"], 4, "immutable"),
        (vec!["decay", "--prune", "--threshold", "NaN"], 2, "threshold"),
        (vec!["recall", "--limit", "0"], 2, "limit"),
        (vec!["ingest", "Dana's new job"], 2, "to store text: mneme ingest event --text 'Dana'\\''s new job'"),
        (vec!["ingest", "evnt", "--text", "x"], 2, "unknown kind of memory \"evnt\": one of event, tool"),
    ];
    for (args, code, needle) in cases {
        let stderr = m.fails(&args, code);
        assert!(stderr.contains(needle), "mneme {args:?}: expected {needle:?} in {stderr}");
    }
    assert_eq!(before, m.footprint(), "no refused command may write");
}

#[test]
fn oversize_and_invalid_utf8_input_is_refused() {
    let m = Mneme::init();
    let before = m.footprint();
    let feed = |bytes: &[u8]| {
        let mut child =
            m.command().args(["ingest", "event", "--text", "-"]).stdin(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("spawn");
        child.stdin.take().expect("stdin").write_all(bytes).expect("write");
        let out = child.wait_with_output().expect("wait");
        (out.status.code(), String::from_utf8_lossy(&out.stderr).to_string())
    };
    let (code, stderr) = feed(&vec![b'a'; 300 * 1024]);
    assert_eq!(code, Some(2));
    assert!(stderr.contains("payload is too large") && stderr.contains("limit"), "{stderr}");
    let (code, stderr) = feed(b"valid then \xff\xfe broken");
    assert_eq!(code, Some(2));
    assert!(stderr.contains("not valid UTF-8"), "{stderr}");
    let out = m.command().args([OsStr::new("recall"), OsStr::from_bytes(b"bad \xff arg")]).output().expect("run");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("UTF-8"), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(before, m.footprint());
}

#[test]
fn damaged_foreign_and_newer_databases_are_refused_untouched() {
    // Truncated.
    let m = Mneme::init();
    for i in 0..20 {
        m.ok(&["ingest", "event", "--text", &format!("filler {i} {}", "words ".repeat(40))]);
    }
    let full = read(&m.db());
    std::fs::write(m.db(), &full[..full.len() / 2]).expect("truncate");
    let stderr = m.fails(&["metrics"], 6);
    assert!(stderr.contains("truncated"), "{stderr}");
    assert_eq!(read(&m.db()), &full[..full.len() / 2]);

    // Not a database at all.
    std::fs::write(m.db(), b"hello, I am a text file\n".repeat(50)).expect("write");
    let stderr = m.fails(&["recall", "x"], 6);
    assert!(stderr.contains("not a SQLite database"), "{stderr}");

    // Someone else's SQLite file.
    std::fs::remove_file(m.db()).expect("rm");
    rusqlite::Connection::open(m.db()).expect("open").execute_batch("CREATE TABLE t (x); INSERT INTO t VALUES (1);").expect("sql");
    let before = read(&m.db());
    let stderr = m.fails(&["ingest", "event", "--text", "x"], 6);
    assert!(stderr.contains("not a mneme store"), "{stderr}");
    assert_eq!(before, read(&m.db()));

    // A store from a newer mneme.
    let newer = Mneme::init();
    rusqlite::Connection::open(newer.db())
        .expect("open")
        .pragma_update(None, "user_version", mneme_store::SCHEMA_VERSION + 1)
        .expect("bump");
    let before = read(&newer.db());
    let stderr = newer.fails(&["ingest", "event", "--text", "x"], 6);
    assert!(stderr.contains("newer mneme"), "{stderr}");
    assert_eq!(before, read(&newer.db()));

    // No store yet.
    let empty = Mneme::new();
    let stderr = empty.fails(&["recall", "x"], 6);
    assert!(stderr.contains("mneme init"), "{stderr}");
}

#[test]
fn a_bad_config_file_is_refused_with_the_key_named() {
    let m = Mneme::init();
    std::fs::write(
        m.dir.path().join("config.toml"),
        "[decay.half_life_days]\nepisodic = -3.0\nsemantic = 1.0\ncompetence = 1.0\nworking = 1.0\nplan_graph = 1.0\n",
    )
    .expect("write");
    let stderr = m.fails(&["recall", "x"], 6);
    assert!(stderr.contains("decay.half_life_days") && stderr.contains("episodic") && stderr.contains("config.toml"), "{stderr}");
}
