//! `mneme export` / `mneme import` as a user runs them: a store made with the CLI moves to
//! a new data directory and to PostgreSQL and back, byte for byte; refusals change nothing.

use crate::Mneme;

/// The dump's rows, without the header and trailer (the engine and time differ).
fn rows(dump: &str) -> Vec<&str> {
    let lines: Vec<&str> = dump.lines().collect();
    lines[1..lines.len() - 1].to_vec()
}

fn populated() -> Mneme {
    let m = Mneme::init();
    m.ok(&["ingest", "event", "--text", "We planned the Lisbon trip for May", "--tag", "travel"]);
    let fact = m.ok(&["ingest", "observation", "--subject", "dana", "--predicate", "lives in", "--object", "Porto"]);
    m.ok(&["supersede", fact.trim(), "--object", "Lisbon", "--rationale", "she moved"]);
    let secret = m.ok(&["ingest", "event", "--text", "my locker code is 4711"]);
    m.ok(&["forget", secret.trim(), "--reason", "asked to", "--yes"]);
    m
}

#[test]
fn a_store_moves_to_a_new_directory_and_to_postgres_and_back() {
    let source = populated();
    let dump = source.ok(&["export"]);
    assert!(dump.starts_with("{\"t\":\"header\",\"format\":\"mneme-dump\""), "{dump}");
    let file = source.dir.path().join("backup.jsonl");
    std::fs::write(&file, &dump).expect("write the dump");
    let file = file.to_str().expect("utf-8 path");

    // Into a new data directory (created by the import), then searchable there.
    let copy = Mneme::new();
    let summary = copy.json(&["import", file]);
    assert_eq!(summary["imported"]["records"], 4, "{summary}");
    assert!(copy.ok(&["recall", "Lisbon trip"]).contains("We planned the Lisbon trip"));
    assert!(!copy.ok(&["recall", "locker code"]).contains("4711"), "the forgotten text stays forgotten");
    assert_eq!(rows(&copy.ok(&["export"])), rows(&dump));

    // Into PostgreSQL (the password from MNEME_DATABASE_PASSWORD, not the URL) and back out.
    let server = mneme_testkit::postgres();
    let database = mneme_testkit::postgres_database();
    let name = database.rsplit('/').next().expect("a database name");
    let url = format!("postgres://mneme@127.0.0.1:{}/{name}", server.port);
    let pg = |args: &[&str]| {
        let mut cmd = source.command();
        cmd.env("MNEME_DATABASE_URL", &url).env("MNEME_DATABASE_PASSWORD", server.password).args(args);
        cmd.output().expect("mneme runs")
    };
    let out = pg(&["import", "--postgres", file]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let out = pg(&["export", "--postgres"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let from_pg = String::from_utf8(out.stdout).expect("utf-8");
    assert!(from_pg.contains("\"engine\":\"postgres\""));
    assert_eq!(rows(&from_pg), rows(&dump));
    // A second import into the same database is refused (exit 4) and changes nothing.
    let out = pg(&["import", "--postgres", file]);
    assert_eq!(out.status.code(), Some(4), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stderr).contains("it is not empty (records has 4 rows)"));

    // Back to SQLite from PostgreSQL's dump.
    let back = Mneme::new();
    let mut cmd = back.command();
    cmd.args(["import", "-"]).stdin(std::process::Stdio::piped());
    let mut child = cmd.stdout(std::process::Stdio::piped()).spawn().expect("spawn");
    std::io::Write::write_all(&mut child.stdin.take().expect("stdin"), from_pg.as_bytes()).expect("feed the dump");
    assert!(child.wait_with_output().expect("wait").status.success());
    assert_eq!(rows(&back.ok(&["export"])), rows(&dump));
}

#[test]
fn refused_exports_and_imports_change_nothing() {
    let source = populated();
    let file = source.dir.path().join("backup.jsonl");
    let path = file.to_str().expect("utf-8 path");
    source.ok(&["export", "-o", path]);
    let first = std::fs::read(&file).expect("the dump");
    // An existing file is not replaced without --force.
    assert!(source.fails(&["export", "-o", path], 2).contains("exists; pass --force"));
    assert_eq!(std::fs::read(&file).expect("the dump"), first);
    source.ok(&["export", "-o", path, "--force"]);
    assert!(!source.dir.path().join("backup.jsonl.partial").exists());

    // Damaged dumps: exit 2, the line named, the new store left empty.
    let text = String::from_utf8(first).expect("utf-8");
    let damaged = source.dir.path().join("damaged.jsonl");
    let target = Mneme::init();
    for (dump, needle) in [
        (text.replacen("Lisbon trip", "Porto trip", 1), "was changed or damaged"),
        (text.lines().take(3).collect::<Vec<_>>().join("\n") + "\n", "ends without its trailer"),
        ("not json\n".to_string(), "dump line 1: not a mneme dump header"),
    ] {
        std::fs::write(&damaged, dump).expect("write");
        let stderr = target.fails(&["import", damaged.to_str().expect("utf-8")], 2);
        assert!(stderr.contains(needle), "{stderr}");
        assert_eq!(target.footprint(), (0, 0));
    }
    // A store with records: exit 4; --postgres without a URL: exit 2.
    assert!(source.fails(&["import", path], 4).contains("import into a new store"));
    assert!(target.fails(&["export", "--postgres"], 2).contains("--postgres needs a database: set MNEME_DATABASE_URL"));
}
