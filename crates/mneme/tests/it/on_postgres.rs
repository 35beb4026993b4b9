//! mneme on PostgreSQL as a user runs it: `init` and `serve` with `[storage] backend =
//! "postgres"`, two daemons serving one memory, readiness in `/healthz` and `status`, each
//! background job held by one daemon and passed on when its holder is killed, and a clear
//! refusal when the database cannot be reached.

use std::process::Stdio;
use std::time::Duration;

use serde_json::{Value, json};

use crate::Mneme;
use crate::daemon::{post, serve_with, sigkill, wait_until};

const ON_POSTGRES: [&str; 2] = ["--set", "storage.backend=postgres"];

/// A fresh database's URL without a password, and the password (as a user would split them).
fn database() -> (String, &'static str) {
    let server = mneme_testkit::postgres();
    let url = mneme_testkit::postgres_database();
    let name = url.rsplit('/').next().expect("a database name").to_string();
    (format!("postgres://mneme@127.0.0.1:{}/{name}", server.port), server.password)
}

/// The backend pid holding background job `job`'s lease, if any (from `pg_locks`).
fn holder(client: &mut postgres::Client, job: &str) -> Option<i32> {
    client
        .query_opt(
            "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted \
             AND classid = x'6d6e656d'::int::oid AND objid = hashtext($1)::oid AND objsubid = 2",
            &[&job],
        )
        .expect("pg_locks")
        .map(|row| row.get(0))
}

#[test]
fn two_daemons_on_one_postgres_serve_one_memory_and_a_killed_holders_jobs_pass_on() {
    let (url, password) = database();
    let env = [("MNEME_DATABASE_URL", url.as_str()), ("MNEME_DATABASE_PASSWORD", password)];
    let (a, b) = (Mneme::new(), Mneme::new());
    let init = a.command().envs(env).args(ON_POSTGRES).arg("init").output().expect("init runs");
    assert!(init.status.success(), "{}", String::from_utf8_lossy(&init.stderr));
    assert!(String::from_utf8_lossy(&init.stdout).contains(&url), "init names the database: {}", String::from_utf8_lossy(&init.stdout));

    let (mut first, addr_a) = serve_with(&a, &ON_POSTGRES, &env, Stdio::null());
    let log = tempfile::NamedTempFile::new().expect("a log file");
    let (mut second, addr_b) = serve_with(&b, &ON_POSTGRES, &env, Stdio::from(log.reopen().expect("reopen")));
    for addr in [&addr_a, &addr_b] {
        let health = crate::daemon::healthy(addr).expect("healthz");
        assert_eq!(health["status"], "ok");
        assert_eq!(health["store"], json!({ "engine": "postgres", "ready": true }));
    }
    // One memory: written through one daemon, found through the other.
    let (status, written) =
        post(&addr_a, "/v1/ingest/event", json!({ "event": { "event_kind": "message", "text": "The kettle needs descaling on Sunday" } }));
    assert_eq!(status, 200, "{written}");
    let (status, found) = post(&addr_b, "/v1/retrieve", json!({ "query": "kettle descaling" }));
    assert_eq!(status, 200, "{found}");
    assert_eq!(found["hits"][0]["record"]["id"], written["record"]["id"]);
    let status = b.command().envs(env).args(ON_POSTGRES).args(["--json", "status"]).output().expect("status");
    let status: Value = serde_json::from_slice(&status.stdout).expect("status JSON");
    assert_eq!(status["store"], Value::String(url.clone()), "status names the database without a password");

    // Each background job is held by exactly one daemon: the first one started took the
    // workspace index's lease on its first pass.
    let mut client =
        postgres::Client::connect(&format!("{}/{}", mneme_testkit::postgres().url, url.rsplit('/').next().expect("name")), postgres::NoTls)
            .expect("a plain client");
    let first_holder = wait_until("a lease holder", Duration::from_secs(10), || holder(&mut client, "workspace_index"));
    let holders: i64 = client
        .query_one(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted AND objid = hashtext('workspace_index')::oid",
            &[],
        )
        .expect("count")
        .get(0);
    assert_eq!(holders, 1, "one daemon holds the job");
    // Killed mid-run: the server ends its session, and the other daemon takes the job at
    // its next pass.
    sigkill(first.id());
    let _ = first.wait();
    let next_holder = wait_until("the lease passed on", Duration::from_secs(30), || {
        holder(&mut client, "workspace_index").filter(|pid| *pid != first_holder)
    });
    assert_ne!(next_holder, first_holder);
    let (status, found) = post(&addr_b, "/v1/retrieve", json!({ "query": "kettle" }));
    assert_eq!((status, found["hits"].as_array().map(Vec::len)), (200, Some(1)), "{found}");
    // SIGTERM: a clean exit (the database connections close outside the async runtime).
    crate::daemon::sigterm(second.id());
    let exit = second.wait().expect("exits");
    let stderr = std::fs::read_to_string(log.path()).expect("the log");
    assert!(exit.success() && !stderr.contains("panicked"), "{exit:?}: {stderr}");
}

#[test]
fn an_unreachable_database_is_named_without_its_password_and_nothing_starts() {
    let port = std::net::TcpListener::bind("127.0.0.1:0").expect("a port").local_addr().expect("addr").port();
    let m = Mneme::new();
    let url = format!("postgres://agent:hunter2@127.0.0.1:{port}/memory");
    let out = m
        .command()
        .env("MNEME_DATABASE_URL", &url)
        .args(ON_POSTGRES)
        .args(["--set", "storage.connect_timeout=2s", "serve", "--grpc-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0"])
        .output()
        .expect("serve runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(6), "{stderr}");
    assert!(stderr.contains(&format!("cannot reach the database postgres://agent@127.0.0.1:{port}/memory")), "{stderr}");
    assert!(!stderr.contains("hunter2"), "{stderr}");
    // A backend without a URL is a configuration error naming the key.
    let out = m.command().args(ON_POSTGRES).arg("status").output().expect("runs");
    assert!(String::from_utf8_lossy(&out.stderr).contains("storage.database_url"), "{}", String::from_utf8_lossy(&out.stderr));
}

/// The server restarts under writers (`pg_ctl restart -m fast`: every session ended): the
/// daemon reconnects by itself, `/healthz` is ready again without a restart of mneme,
/// writes succeed again, and every write it acknowledged is in the database.
#[test]
fn a_postgres_restart_under_writers_loses_no_acknowledged_write_and_the_daemon_recovers() {
    let server = mneme_testkit::postgres_private();
    let url = server.database("restarts");
    let name = url.rsplit('/').next().expect("a database name").to_string();
    let plain = format!("postgres://mneme@127.0.0.1:{}/{name}", server.port);
    let env = [("MNEME_DATABASE_URL", plain.as_str()), ("MNEME_DATABASE_PASSWORD", server.password)];
    let m = Mneme::new();
    let init = m.command().envs(env).args(ON_POSTGRES).arg("init").output().expect("init runs");
    assert!(init.status.success(), "{}", String::from_utf8_lossy(&init.stderr));
    let (mut daemon, addr) = serve_with(&m, &ON_POSTGRES, &env, Stdio::null());

    // Two writers until told to stop, each remembering the texts acknowledged with 200.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writers: Vec<_> = (0..2)
        .map(|w| {
            let (addr, stop) = (addr.clone(), stop.clone());
            std::thread::spawn(move || {
                let (mut acknowledged, mut failed) = (Vec::new(), 0usize);
                let mut i = 0;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let text = format!("writer {w} note {i} about the restart drill");
                    let (status, _) = post(&addr, "/v1/ingest/event", json!({ "event": { "event_kind": "message", "text": text } }));
                    if status == 200 {
                        acknowledged.push(text);
                    } else {
                        failed += 1;
                    }
                    i += 1;
                }
                (acknowledged, failed)
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(500));
    server.restart();
    // Ready again without restarting mneme, and writes succeed again.
    wait_until("healthz ready after the restart", Duration::from_secs(30), || {
        crate::daemon::healthy(&addr).filter(|h| h["status"] == "ok").map(|_| ())
    });
    wait_until("a write after the restart", Duration::from_secs(30), || {
        let (status, _) = post(&addr, "/v1/ingest/event", json!({ "event": { "event_kind": "message", "text": "after the restart" } }));
        (status == 200).then_some(())
    });
    std::thread::sleep(Duration::from_millis(500));
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let mut acknowledged = Vec::new();
    for w in writers {
        let (ok, _failed) = w.join().expect("writer");
        acknowledged.extend(ok);
    }
    assert!(acknowledged.len() > 10, "the writers wrote: {}", acknowledged.len());
    let mut client = postgres::Client::connect(&url, postgres::NoTls).expect("a plain client");
    let stored: std::collections::HashSet<String> = client
        .query("SELECT payload::jsonb ->> 'text' FROM records WHERE memory_type = 'episodic'", &[])
        .expect("records")
        .iter()
        .filter_map(|r| r.get::<_, Option<String>>(0))
        .collect();
    let lost: Vec<&String> = acknowledged.iter().filter(|t| !stored.contains(*t)).collect();
    assert!(lost.is_empty(), "{} acknowledged writes are missing, e.g. {:?}", lost.len(), lost.first());
    crate::daemon::sigterm(daemon.id());
    assert!(daemon.wait().expect("exits").success());
}

/// As root, the test servers run as `nobody`: their binaries are unpacked where `nobody`
/// can reach them however private the target directory is (a clone under `/root`).
#[test]
fn the_test_postgres_starts_from_a_target_directory_nobody_else_may_enter() {
    use std::os::unix::fs::PermissionsExt;
    let private = tempfile::tempdir().expect("a directory");
    std::fs::set_permissions(private.path(), std::fs::Permissions::from_mode(0o700)).expect("chmod 700");
    let tools = private.path().join("target/test-tools");
    let bin = mneme_testkit::install_postgres(&tools);
    let root = std::fs::metadata("/proc/self").map(|m| std::os::unix::fs::MetadataExt::uid(&m) == 0).unwrap_or(false);
    if root {
        assert!(!bin.starts_with(private.path()), "as root the binaries are outside the private directory: {}", bin.display());
    }
    let out = std::process::Command::new(bin.join("postgres")).arg("--version").output().expect("postgres runs");
    assert!(out.status.success() && String::from_utf8_lossy(&out.stdout).contains("18."), "{out:?}");
    // A server started from them answers (as nobody when root).
    let server = mneme_testkit::postgres_private();
    let mut client = postgres::Client::connect(&format!("{}/postgres", server.url), postgres::NoTls).expect("the server answers");
    let one: i32 = client.query_one("SELECT 1", &[]).expect("a query").get(0);
    assert_eq!(one, 1);
}
