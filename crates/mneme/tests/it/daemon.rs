//! The daemon as a real process: graceful shutdown with requests in flight, `up` / `status`
//! / `down` with port fallback, supervisor restarts, `mneme hook`, `config show/check`.

use std::io::Write as _;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::Mneme;

pub(crate) fn wait_until<T>(what: &str, timeout: Duration, mut f: impl FnMut() -> Option<T>) -> T {
    let start = Instant::now();
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(start.elapsed() < timeout, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

pub(crate) fn daemon_file(m: &Mneme) -> Option<Value> {
    serde_json::from_str(&std::fs::read_to_string(m.dir.path().join("daemon.json")).ok()?).ok()
}

pub(crate) fn rt() -> tokio::runtime::Runtime {
    mneme_server::init_tls();
    tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime")
}

pub(crate) fn post(addr: &str, path: &str, body: Value) -> (u16, Value) {
    rt().block_on(async {
        let r = reqwest::Client::new().post(format!("http://{addr}{path}")).json(&body).send().await.expect("request");
        let status = r.status().as_u16();
        (status, r.json().await.unwrap_or(Value::Null))
    })
}

pub(crate) fn healthy(addr: &str) -> Option<Value> {
    rt().block_on(async {
        let r = reqwest::Client::builder()
            .timeout(Duration::from_secs(1))
            .build()
            .ok()?
            .get(format!("http://{addr}/healthz"))
            .send()
            .await
            .ok()?;
        r.json::<Value>().await.ok()
    })
}

pub(crate) fn sigterm(pid: u32) {
    let pid = rustix::process::Pid::from_raw(pid as i32).expect("pid");
    rustix::process::kill_process(pid, rustix::process::Signal::TERM).expect("SIGTERM");
}

pub(crate) fn sigkill(pid: u32) {
    let pid = rustix::process::Pid::from_raw(pid as i32).expect("pid");
    let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
}

fn alive(pid: u32) -> bool {
    rustix::process::Pid::from_raw(pid as i32).is_some_and(|p| rustix::process::test_kill_process(p).is_ok())
}

/// A child process killed when the test ends, even by a panic (no stray daemons).
pub struct Guard(pub Child);

impl Drop for Guard {
    fn drop(&mut self) {
        if matches!(self.0.try_wait(), Ok(None)) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

impl std::ops::Deref for Guard {
    type Target = Child;
    fn deref(&self) -> &Child {
        &self.0
    }
}

impl std::ops::DerefMut for Guard {
    fn deref_mut(&mut self) -> &mut Child {
        &mut self.0
    }
}

/// Stops whatever `mneme up` started in this data directory when the test ends.
pub(crate) struct Down<'a>(pub(crate) &'a Mneme);

impl Drop for Down<'_> {
    fn drop(&mut self) {
        for file in ["supervisor.json", "daemon.json"] {
            if let Some(pid) = std::fs::read_to_string(self.0.dir.path().join(file))
                .ok()
                .and_then(|t| serde_json::from_str::<Value>(&t).ok())
                .and_then(|v| v["pid"].as_u64())
            {
                sigkill(pid as u32);
            }
        }
    }
}

fn serve(m: &Mneme) -> (Guard, String) {
    serve_with(m, &[], &[], Stdio::piped())
}

/// `mneme [GLOBAL...] serve` on loopback port 0 with extra `env`, once healthy: the guard
/// and the HTTP address.
pub(crate) fn serve_with(m: &Mneme, global: &[&str], env: &[(&str, &str)], stderr: Stdio) -> (Guard, String) {
    let mut cmd = m.command();
    cmd.envs(env.iter().copied());
    let child = cmd
        .args(global)
        .args(["serve", "--grpc-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0"])
        .stdout(Stdio::null())
        .stderr(stderr)
        .spawn()
        .expect("serve starts");
    let child = Guard(child);
    let addr = wait_until("daemon.json", Duration::from_secs(20), || daemon_file(m))
        .get("http_addr")
        .and_then(Value::as_str)
        .expect("addr")
        .to_string();
    wait_until("healthz", Duration::from_secs(10), || healthy(&addr));
    (child, addr)
}

/// SIGTERM to a daemon started with its stderr piped; its log, once it exited with success.
fn stop_cleanly(child: &mut Guard) -> String {
    sigterm(child.id());
    let status = child.wait().expect("exit");
    let mut stderr = String::new();
    std::io::Read::read_to_string(child.stderr.as_mut().expect("stderr"), &mut stderr).expect("stderr");
    assert!(status.success(), "exit {status}: {stderr}");
    stderr
}

#[test]
fn serve_shuts_down_cleanly_on_sigterm_with_requests_in_flight() {
    let m = Mneme::new();
    let (mut child, addr) = serve(&m);
    let acked = rt().block_on(async {
        let client = reqwest::Client::new();
        let send = |i: usize| {
            let (client, url) = (client.clone(), format!("http://{addr}/v1/ingest/event"));
            async move {
                let body = json!({ "event": { "event_kind": "message", "text": format!("in flight {i}") } });
                let r = client.post(url).json(&body).send().await.ok()?;
                r.json::<Value>().await.ok()?["record"]["id"].as_str().map(String::from)
            }
        };
        let mut acked = Vec::new();
        for i in 0..5 {
            acked.push(send(i).await.expect("served before the signal"));
        }
        let tasks: Vec<_> = (5..80).map(|i| tokio::spawn(send(i))).collect();
        let pid = child.id();
        let signal = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(15)).await;
            sigterm(pid);
        });
        for t in tasks {
            if let Some(id) = t.await.expect("task") {
                acked.push(id);
            }
        }
        signal.await.expect("the signal was sent");
        acked
    });
    let status = child.wait().expect("exit");
    let mut stderr = String::new();
    std::io::Read::read_to_string(child.stderr.as_mut().expect("stderr"), &mut stderr).expect("stderr");
    assert!(status.success(), "exit {status}: {stderr}");
    assert!(stderr.contains("shutting down") && stderr.contains("stopped"), "{stderr}");
    assert!(!m.dir.path().join("daemon.json").exists(), "daemon.json removed on shutdown");
    assert!(acked.len() >= 5);
    for id in &acked {
        m.ok(&["show", id]);
    }
}

#[test]
fn json_logs_never_carry_api_keys() {
    let m = Mneme::new();
    const KEY: &str = "ci-key-0123456789abcdef-secret";
    const WRONG: &str = "not-the-key-0123456789-secret";
    std::fs::write(m.dir.path().join("config.toml"), "[[principals]]\nname = \"ci\"\nkey_env = \"MNEME_TEST_CI_KEY\"\n").expect("write");
    let child = m
        .command()
        .args(["serve", "--grpc-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0", "--log-format", "json", "--log-level", "debug"])
        .env("MNEME_TEST_CI_KEY", KEY)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("serve starts");
    let mut child = Guard(child);
    let addr: String = wait_until("daemon.json", Duration::from_secs(20), || daemon_file(&m))["http_addr"].as_str().expect("addr").into();
    wait_until("healthz", Duration::from_secs(10), || healthy(&addr));
    rt().block_on(async {
        let client = reqwest::Client::new();
        for key in [KEY, WRONG] {
            let body = json!({ "event": { "event_kind": "message", "text": "a logged request" } });
            let r = client.post(format!("http://{addr}/v1/ingest/event")).bearer_auth(key).json(&body).send().await.expect("request");
            assert_eq!(r.status().as_u16(), if key == KEY { 200 } else { 401 });
        }
    });
    let stderr = stop_cleanly(&mut child);
    let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    assert!(lines.len() >= 3, "{stderr}");
    for line in &lines {
        let v: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("not a JSON log line ({e}): {line}"));
        assert!(v["level"].is_string() && v["timestamp"].is_string(), "{line}");
    }
    assert!(stderr.contains("mneme daemon listening") && stderr.contains("stopped"), "{stderr}");
    assert!(!stderr.contains(KEY) && !stderr.contains(WRONG) && !stderr.contains("secret"), "a key was logged: {stderr}");
}

#[test]
fn up_status_recall_down_with_port_fallback() {
    let m = Mneme::new();
    let _down = Down(&m);
    // Another program holds the configured HTTP port.
    let blocker = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = blocker.local_addr().expect("addr").port();
    let up = m.json(&["up", "--grpc-addr", "127.0.0.1:0", "--http-addr", &format!("127.0.0.1:{port}")]);
    assert_eq!(up["action"], "started", "{up}");
    let http: String = up["http_addr"].as_str().expect("addr").into();
    let got: u16 = http.rsplit(':').next().and_then(|p| p.parse().ok()).expect("port");
    assert!(got > port && got <= port + 5, "{up}");
    assert!(up["notes"][0].as_str().unwrap_or("").contains("held by another program"), "{up}");

    let status = m.json(&["status"]);
    assert_eq!((status["running"].as_bool(), status["http_addr"].as_str()), (Some(true), Some(http.as_str())), "{status}");
    let text = m.ok(&["status"]);
    assert!(text.contains("running") && text.contains("records") && text.contains("errors in the last hour"), "{text}");

    // recall goes through the daemon.
    let (s, _) = post(&http, "/v1/ingest/event", json!({ "event": { "event_kind": "m", "text": "the backup runs nightly" } }));
    assert_eq!(s, 200);
    let hits = m.json(&["recall", "backup"]);
    assert_eq!(hits.as_array().map(Vec::len), Some(1), "{hits}");

    // A second `up` reuses the running daemon.
    let again = m.json(&["up", "--grpc-addr", "127.0.0.1:0", "--http-addr", &format!("127.0.0.1:{port}")]);
    assert_eq!((again["action"].as_str(), again["pid"].as_u64()), (Some("reused"), up["pid"].as_u64()), "{again}");
    // `up` for another data directory does not take this daemon for its own: it passes
    // over the port like any other program's.
    let other = Mneme::new();
    let _other_down = Down(&other);
    let theirs = other.json(&["up", "--grpc-addr", "127.0.0.1:0", "--http-addr", &http]);
    assert_eq!(theirs["action"], "started", "{theirs}");
    assert_ne!(theirs["http_addr"].as_str(), Some(http.as_str()), "{theirs}");
    assert!(theirs["notes"].to_string().contains("a mneme daemon for another data directory"), "{theirs}");
    assert_eq!(other.json(&["down"])["stopped"], true);

    let down = m.json(&["down"]);
    assert_eq!(down["stopped"], true, "{down}");
    assert!(!alive(up["pid"].as_u64().expect("pid") as u32));
    m.fails(&["status"], 3);
    // Down again is harmless.
    assert_eq!(m.json(&["down"])["running"], false);
    drop(blocker);
}

#[test]
fn supervisor_restarts_a_crashed_daemon_three_times_then_gives_up() {
    let m = Mneme::new();
    let _down = Down(&m);
    let up = m.json(&["up", "--grpc-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0"]);
    let supervisor = up["supervisor_pid"].as_u64().expect("supervisor") as u32;
    let mut pid = up["pid"].as_u64().expect("pid") as u32;
    for round in 1..=3 {
        sigkill(pid);
        let next = wait_until("a restarted daemon", Duration::from_secs(30), || {
            let f = daemon_file(&m)?;
            let p = f["pid"].as_u64()? as u32;
            (p != pid && alive(p) && healthy(f["http_addr"].as_str()?).is_some()).then_some(p)
        });
        assert!(alive(supervisor), "round {round}");
        pid = next;
        // `status` shows the supervisor's count beside the uptime.
        let status = wait_until("the supervisor's count", Duration::from_secs(10), || {
            let s = m.json(&["status"]);
            (s["supervisor"]["restarts"].as_u64() == Some(round)).then_some(s)
        });
        assert_eq!(status["supervisor"]["pid"].as_u64(), Some(u64::from(supervisor)));
        // So does the daemon's own status (what membrane's `status` reads over HTTP).
        let http = status["http_addr"].as_str().expect("http_addr").to_string();
        let own = get(&http, "/v1/status");
        assert_eq!(
            (own["supervisor"]["pid"].as_u64(), own["supervisor"]["restarts"].as_u64()),
            (Some(u64::from(supervisor)), Some(round)),
            "{own}"
        );
        let text = m.ok(&["status"]);
        let plural = if round == 1 { "" } else { "s" };
        assert!(text.contains(&format!("supervisor pid {supervisor}: {round} restart{plural}")), "{text}");
    }
    sigkill(pid);
    wait_until("the supervisor to give up", Duration::from_secs(30), || (!alive(supervisor)).then_some(()));
    let log = std::fs::read_to_string(m.dir.path().join("mneme.log")).expect("log");
    assert!(log.contains("restart 3/3") && log.contains("not restarting"), "{log}");
    m.fails(&["status"], 3);
}

fn hook(m: &Mneme, args: &[&str], stdin: &str) -> (i32, Value, String) {
    let mut child =
        m.command().arg("hook").args(args).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("hook");
    child.stdin.take().expect("stdin").write_all(stdin.as_bytes()).expect("write");
    let out = child.wait_with_output().expect("output");
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    (
        out.status.code().unwrap_or(-1),
        serde_json::from_str(&stdout).unwrap_or(Value::String(stdout)),
        String::from_utf8_lossy(&out.stderr).into(),
    )
}

#[test]
fn hook_command_with_and_without_a_daemon() {
    let m = Mneme::new();
    // No daemon: handled in-process.
    let (code, out, _) = hook(&m, &["message_received"], r#"{"content": "Nginx uses TLS 1.3.", "sessionId": "s1"}"#);
    assert_eq!(code, 0);
    assert_eq!(out["record_ids"].as_array().map(Vec::len), Some(2), "message + fact: {out}");
    // Bad input never fails the caller.
    let (code, out, stderr) = hook(&m, &["message_received"], "{not json");
    assert_eq!(code, 0);
    assert!(out["error"].as_str().unwrap_or("").contains("not JSON") && stderr.contains("not JSON"), "{out} {stderr}");
    // An unknown hook is a usage error.
    let (code, _, stderr) = hook(&m, &["lunch_break"], "{}");
    assert_eq!(code, 2, "{stderr}");

    // With a workspace and a playbook, the block without a daemon carries what the
    // daemon's does (the playbook, the curated memory), not only the memories.
    m.ok(&["workspace", "init"]);
    let ws = m.dir.path().join("workspace");
    std::fs::write(ws.join("memory/sinain-playbook.md"), "# Playbook\n\n## Patterns\n- Run the linter before every commit\n")
        .expect("playbook");
    std::fs::write(ws.join("MEMORY.md"), "# Curated\n\n- The staging host is stage.example.org\n").expect("curated");
    let (code, local, _) = hook(&m, &["session_start", "--context-only"], r#"{"sessionId": "s2"}"#);
    assert_eq!(code, 0);
    let local = local.as_str().unwrap_or("").to_string();
    for part in ["Nginx uses TLS 1.3", "## Playbook", "Run the linter before every commit"] {
        assert!(local.contains(part), "{part:?} without a daemon: {local}");
    }

    // With a daemon: forwarded (the daemon's status counts the hook), the same block.
    let (mut child, addr) = serve(&m);
    let (code, out, _) = hook(&m, &["session_start", "--context-only"], r#"{"sessionId": "s2"}"#);
    assert_eq!(code, 0);
    assert!(out.as_str().unwrap_or("").contains("Nginx uses TLS 1.3"), "{out}");
    assert_eq!(out.as_str().unwrap_or(""), local, "one block, daemon or not");
    let metrics =
        rt().block_on(async { reqwest::get(format!("http://{addr}/metrics")).await.expect("metrics").text().await.expect("text") });
    assert!(metrics.contains("mneme_hook_events_total{hook=\"session_start\",result=\"ok\"} 1"), "{metrics}");
    sigterm(child.id());
    assert!(child.wait().expect("exit").success());
}

#[test]
fn config_show_redacts_and_check_names_the_key() {
    let m = Mneme::new();
    let out = m
        .command()
        .args(["config", "show"])
        .env("MNEME_LLM_API_KEY", "sk-live-secret")
        .env("MNEME_LLM_ENDPOINT", "http://127.0.0.1:9/v1")
        .output()
        .expect("run");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success());
    assert!(text.contains("llm_api_key = \"<redacted>\"") && !text.contains("sk-live-secret"), "{text}");
    assert!(text.contains("llm_endpoint = \"http://127.0.0.1:9/v1\""), "{text}");
    let shown = m.json(&["config", "show", "--set", "consolidation.batch_size=7"]);
    assert_eq!(shown["consolidation"]["batch_size"], 7);
    // A mistyped variable is named, not silently ignored.
    let out = m.command().args(["config", "show"]).env("MNEME_HTTP_ADRR", "127.0.0.1:1").output().expect("run");
    assert!(out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("MNEME_HTTP_ADRR") && stderr.contains("typo"), "{stderr}");

    let bad = m.dir.path().join("bad.toml");
    std::fs::write(&bad, "[server]\nhttp_addr = \"everywhere\"\n").expect("write");
    let stderr = m.fails(&["config", "check", bad.to_str().expect("utf-8")], 6);
    assert!(stderr.contains("server.http_addr") && stderr.contains("bad.toml"), "{stderr}");
    let good = m.dir.path().join("good.toml");
    std::fs::write(&good, "[consolidation]\ninterval = \"10m\"\n").expect("write");
    assert!(m.ok(&["config", "check", good.to_str().expect("utf-8")]).contains("ok"));
    // Keys are resolved too: an unset key_env and a public address without keys are
    // refused, as serve would refuse them.
    let keyless = m.dir.path().join("keyless.toml");
    std::fs::write(&keyless, "[[principals]]\nname = \"ci\"\nkey_env = \"MNEME_TEST_UNSET_KEY\"\n").expect("write");
    let out =
        m.command().args(["config", "check", keyless.to_str().expect("utf-8")]).env_remove("MNEME_TEST_UNSET_KEY").output().expect("run");
    assert_eq!(out.status.code(), Some(6));
    assert!(String::from_utf8_lossy(&out.stderr).contains("MNEME_TEST_UNSET_KEY"), "{}", String::from_utf8_lossy(&out.stderr));
    let public = m.dir.path().join("public.toml");
    std::fs::write(&public, "[server]\nhttp_addr = \"0.0.0.0:18791\"\n").expect("write");
    let stderr = m.fails(&["config", "check", public.to_str().expect("utf-8")], 6);
    assert!(stderr.contains("without API keys"), "{stderr}");
    // A bad environment value stops serve before it binds anything.
    let out = m.command().args(["serve"]).env("MNEME_HTTP_ADDR", "nowhere").output().expect("run");
    assert_eq!(out.status.code(), Some(6));
    assert!(String::from_utf8_lossy(&out.stderr).contains("server.http_addr"));
    // A key hash for [[principals]].
    let mut child = m.command().args(["key", "hash"]).stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().expect("spawn");
    child.stdin.take().expect("stdin").write_all(b"0123456789abcdef-key\n").expect("write");
    let out = child.wait_with_output().expect("out");
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), mneme_server::config::hash_key("0123456789abcdef-key"));
}

/// A foreign SQLite client (a shell, a backup script) that opened and closed `mneme.db`
/// beside a running daemon deleted the daemon's WAL: the daemon had dropped its own POSIX
/// locks while opening its read connections. Every write acknowledged after that, by the
/// daemon or by the CLI beside it, was lost on kill -9. Three cycles: writers over HTTP
/// and the CLI, foreign readers in the middle, kill -9 while writes are in flight.
#[test]
fn a_foreign_sqlite_reader_beside_the_daemon_loses_no_acknowledged_write_on_kill_9() {
    let m = Mneme::init();
    let wal = std::path::PathBuf::from(format!("{}-wal", m.db().display()));
    // Python's own SQLite, as a backup script would use it (a connection from this test
    // process's SQLCipher build closes without deleting the WAL, so it does not show the bug).
    let foreign_read = || {
        let script = "import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); c.execute('select count(*) from records').fetchone(); c.close()";
        let out = std::process::Command::new("python3").arg("-c").arg(script).arg(m.db()).output().expect("python3 runs");
        assert!(out.status.success(), "foreign reader: {}", String::from_utf8_lossy(&out.stderr));
    };
    let mut acked: Vec<String> = Vec::new();
    for cycle in 0..3 {
        let (mut child, addr) = serve(&m);
        let ingest = |text: String| -> Option<String> {
            let (status, body) = post(&addr, "/v1/ingest/event", json!({ "event": { "event_kind": "message", "text": text } }));
            (status == 200).then(|| body["record"]["id"].as_str().expect("id").to_string())
        };
        acked.push(ingest(format!("cycle {cycle}: before the foreign reader")).expect("the daemon is up"));
        foreign_read();
        assert!(wal.exists(), "cycle {cycle}: the foreign reader's close deleted the daemon's WAL");
        let stop = std::sync::atomic::AtomicBool::new(false);
        std::thread::scope(|s| {
            let writer = s.spawn(|| {
                let mut ids = Vec::new();
                let mut i = 0;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    // Killed mid-request: that write was never acknowledged.
                    if let Some(id) =
                        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| ingest(format!("cycle {cycle}: in flight {i}"))))
                            .ok()
                            .flatten()
                    {
                        ids.push(id);
                    }
                    i += 1;
                }
                ids
            });
            for i in 0..3 {
                acked.push(m.ok(&["ingest", "event", "--text", &format!("cycle {cycle}: from the CLI {i}")]).trim().to_string());
                foreign_read();
            }
            std::thread::sleep(Duration::from_millis(150));
            sigkill(child.id());
            stop.store(true, std::sync::atomic::Ordering::Relaxed);
            acked.extend(writer.join().expect("writer"));
        });
        child.wait().expect("killed");
        let _ = std::fs::remove_file(m.dir.path().join("daemon.json"));

        let conn = rusqlite::Connection::open(m.db()).expect("open after the crash");
        let check: String = conn.query_row("PRAGMA integrity_check", [], |r| r.get(0)).expect("check");
        assert_eq!(check, "ok");
        for id in &acked {
            let found: i64 = conn.query_row("SELECT count(*) FROM records WHERE id = ?1", [id], |r| r.get(0)).expect("query");
            assert_eq!(found, 1, "cycle {cycle}: acknowledged write {id} was lost");
        }
    }
    eprintln!("kill -9 cycles: 3, acknowledged writes checked: {}", acked.len());
}

/// README's exit-code table says 6 for store and configuration problems; `serve` used to
/// exit 1 for all of them.
#[test]
fn serve_that_cannot_start_exits_6_naming_the_problem() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = taken.local_addr().expect("addr").to_string();
    let m = Mneme::init();
    let stderr = m.fails(&["serve", "--grpc-addr", &port, "--http-addr", "127.0.0.1:0"], 6);
    assert!(stderr.contains("cannot listen") && stderr.contains(&port), "{stderr}");

    let mut m = Mneme::new();
    m.key = Some("the right key".into());
    m.ok(&["init"]);
    m.key = Some("a wrong key".into());
    let stderr = m.fails(&["serve", "--grpc-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0"], 6);
    assert!(stderr.contains("wrong encryption key"), "{stderr}");
    assert!(!stderr.contains("a wrong key"), "the key leaked: {stderr}");
}

/// `down` used to give up after 30 s and leave a stuck daemon running; it now escalates to
/// SIGKILL after `--grace` (the store is crash-safe) and cleans up the daemon's file.
#[test]
fn down_kills_a_daemon_that_ignores_sigterm_after_the_grace_period() {
    let m = Mneme::init();
    let (mut child, addr) = serve(&m);
    let (status, body) = post(&addr, "/v1/ingest/event", json!({ "event": { "event_kind": "message", "text": "before down" } }));
    assert_eq!(status, 200);
    let id = body["record"]["id"].as_str().expect("id").to_string();
    // A stopped process cannot act on SIGTERM: a daemon stuck in its shutdown.
    let pid = rustix::process::Pid::from_raw(child.id() as i32).expect("pid");
    rustix::process::kill_process(pid, rustix::process::Signal::STOP).expect("SIGSTOP");
    assert!(m.fails(&["down", "--grace", "nonsense"], 2).contains("--grace"));
    let out = m.json(&["down", "--grace", "300ms"]);
    assert_eq!((out["stopped"].as_bool(), out["killed"].as_bool()), (Some(true), Some(true)), "{out}");
    child.wait().expect("reaped");
    assert!(!alive(child.id()));
    assert!(!m.dir.path().join("daemon.json").exists(), "the killed daemon's file is removed");
    m.ok(&["show", &id]);
    // Nothing left to stop.
    assert_eq!(m.json(&["down"])["running"].as_bool(), Some(false));
}

/// Forgetting through a running daemon: afterwards the forgotten text is in no file of the
/// data directory, the daemon's own log included (its stderr, kept in the data directory
/// here), even at debug level.
#[test]
fn a_daemon_forgets_and_neither_its_files_nor_its_log_keep_the_text() {
    const SECRET: &str = "Wolkenkuckucksheim";
    let m = Mneme::new();
    let log_path = m.dir.path().join("daemon.log");
    let log = std::fs::File::create(&log_path).expect("log file");
    let child = m
        .command()
        .env("MNEME_LOG_LEVEL", "debug")
        .args(["serve", "--grpc-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0"])
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("serve starts");
    let mut child = Guard(child);
    let addr = wait_until("daemon.json", Duration::from_secs(20), || daemon_file(&m))
        .get("http_addr")
        .and_then(Value::as_str)
        .expect("addr")
        .to_string();
    wait_until("healthz", Duration::from_secs(10), || healthy(&addr));
    rt().block_on(async {
        let http = reqwest::Client::new();
        let say = json!({ "event": { "content": format!("my home address is {SECRET} 7"), "from": "dana" }, "ctx": { "sessionId": "s1" } });
        let r: Value = http
            .post(format!("http://{addr}/v1/hooks/message_received"))
            .json(&say)
            .send()
            .await
            .expect("hook")
            .json()
            .await
            .expect("json");
        assert!(r["error"].is_null(), "{r}");
        let forget = json!({ "query": SECRET, "reason": "dana asked" });
        let r: Value =
            http.post(format!("http://{addr}/v1/forget")).json(&forget).send().await.expect("forget").json().await.expect("json");
        assert_eq!(r["dry_run"], false, "{r}");
        assert!(r["records"].as_array().is_some_and(|a| !a.is_empty()), "{r}");
    });
    sigterm(child.id());
    let status = child.wait().expect("daemon exits");
    assert!(status.success(), "{status}");
    let needle = SECRET.to_lowercase().into_bytes();
    let mut holding = Vec::new();
    for entry in std::fs::read_dir(m.dir.path()).expect("dir").flatten() {
        if let Ok(bytes) = std::fs::read(entry.path()) {
            let lower: Vec<u8> = bytes.iter().map(u8::to_ascii_lowercase).collect();
            if lower.windows(needle.len()).any(|w| w == needle.as_slice()) {
                holding.push(entry.path().display().to_string());
            }
        }
    }
    assert!(std::fs::metadata(&log_path).map(|md| md.len() > 0).unwrap_or(false), "the daemon logged");
    assert_eq!(holding, Vec::<String>::new(), "the text is gone from every file, the log included");
}

#[test]
fn reindex_beside_a_daemon_waits_for_the_daemon_to_embed_and_refuses_force() {
    let m = Mneme::new();
    m.ok(&["init"]);
    for text in ["We hiked up to the glacier", "The espresso machine needs descaling"] {
        m.ok(&["ingest", "event", "--text", text]);
    }
    let (_child, _addr) = serve_with(&m, &["--set", "embedding.model_poll=100ms"], &[], Stdio::null());
    let _down = Down(&m);
    // No model anywhere: the daemon is lexical-only and reindex says so, naming the cure.
    let err = m.fails(&["reindex"], 4);
    assert!(err.contains("lexical-only") && err.contains("mneme model install"), "{err}");
    m.ok(&["model", "install", "--from", crate::flows::packaged_model().to_str().expect("utf-8")]);
    // The daemon attaches the model itself; reindex follows its progress.
    let done = m.json(&["reindex"]);
    assert_eq!((done["embedded_by"].as_str(), done["status"]["embedded"].as_u64()), (Some("daemon"), Some(2)), "{done}");
    assert_eq!(done["status"]["pending"], 0, "{done}");
    let err = m.fails(&["reindex", "--force"], 4);
    assert!(err.contains("mneme down"), "{err}");
}

fn get(addr: &str, path: &str) -> Value {
    rt().block_on(async {
        let r = reqwest::Client::new().get(format!("http://{addr}{path}")).send().await.expect("request");
        r.json().await.unwrap_or(Value::Null)
    })
}

/// SIGTERM with an embedding backlog: the daemon stops within its grace period (after
/// the batch in flight), not after the whole backlog; the backlog resumes at the next
/// start (the queue is the records still without vectors).
#[test]
fn sigterm_does_not_wait_for_the_embedding_backlog_and_the_backlog_resumes() {
    let m = Mneme::new();
    m.ok(&["init"]);
    let settings = ["--set", "embedding.model_poll=100ms", "--set", "server.shutdown_grace=2s"];
    let (mut child, addr) = serve_with(&m, &settings, &[], Stdio::null());
    rt().block_on(async {
        let client = reqwest::Client::new();
        for i in 0..1500 {
            let body = json!({ "event": { "event_kind": "message", "text": format!("note {i}: the backlog of the embedder grows by one more line") } });
            let r = client.post(format!("http://{addr}/v1/ingest/event")).json(&body).send().await.expect("ingest");
            assert_eq!(r.status().as_u16(), 200);
        }
    });
    m.ok(&["model", "install", "--from", crate::flows::packaged_model().to_str().expect("utf-8")]);
    let started = wait_until("the embedder at work", Duration::from_secs(60), || {
        let e = get(&addr, "/v1/status")["embedding"].clone();
        (e["embedded"].as_u64().unwrap_or(0) > 0).then_some(e)
    });
    assert!(started["pending"].as_u64().unwrap_or(0) > 500, "a backlog: {started}");
    let asked = Instant::now();
    sigterm(child.id());
    let exit = child.wait().expect("exits");
    let took = asked.elapsed();
    assert!(exit.success(), "{exit:?}");
    assert!(took < Duration::from_secs(20), "stopped within the grace, not after the backlog: {took:?}");
    // The next start takes the backlog up again.
    let (_child, addr) = serve_with(&m, &settings, &[], Stdio::null());
    let _down = Down(&m);
    let before = get(&addr, "/v1/status")["embedding"]["embedded"].as_u64().unwrap_or(0);
    wait_until("the backlog resumed", Duration::from_secs(60), || {
        (get(&addr, "/v1/status")["embedding"]["embedded"].as_u64().unwrap_or(0) > before).then_some(())
    });
}

/// `[hooks] enabled = false` turns every hook off at once: nothing is stored, the
/// session-start block is empty, and turning it back on brings the hooks back.
#[test]
fn the_master_switch_turns_every_hook_off_at_once() {
    let m = Mneme::new();
    let off = |hook_name: &str, stdin: &str| {
        let mut child = m
            .command()
            .args(["--set", "hooks.enabled=false", "hook", hook_name])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("hook");
        child.stdin.take().expect("stdin").write_all(stdin.as_bytes()).expect("write");
        let out = child.wait_with_output().expect("output");
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        serde_json::from_slice::<Value>(&out.stdout).expect("json")
    };
    let said = off("message_received", r#"{"content": "I live in Lisbon.", "sessionId": "s1"}"#);
    assert_eq!(said["record_ids"], serde_json::json!([]), "{said}");
    assert_eq!(said.get("error"), None, "{said}");
    let tool = off("after_tool_call", r#"{"toolName": "Bash", "params": {"command": "ls"}, "sessionId": "s1"}"#);
    assert_eq!(tool["record_ids"], serde_json::json!([]), "{tool}");
    let start = off("session_start", r#"{"sessionId": "s2"}"#);
    assert_eq!(start["context"], "", "{start}");
    let recalled = m.run(&["recall", "Lisbon"]);
    assert!(!String::from_utf8_lossy(&recalled.stdout).contains("Lisbon"), "nothing was stored");
    // On again (the default): the same message is stored.
    let (code, on, _) = hook(&m, &["message_received"], r#"{"content": "I live in Lisbon.", "sessionId": "s1"}"#);
    assert_eq!(code, 0);
    assert!(on["record_ids"].as_array().is_some_and(|r| !r.is_empty()), "{on}");
    assert!(m.ok(&["recall", "Lisbon"]).contains("Lisbon"));
    // A daemon started with the hooks off says so in its log, and its hooks store nothing.
    let (mut child, addr) = serve_with(&m, &["--set", "hooks.enabled=false"], &[], Stdio::piped());
    let said = rt().block_on(async {
        let body = json!({ "content": "I moved to Porto.", "sessionId": "s3" });
        let r = reqwest::Client::new().post(format!("http://{addr}/v1/hooks/message_received")).json(&body).send().await.expect("hook");
        r.json::<Value>().await.expect("json")
    });
    assert_eq!(said["record_ids"], json!([]), "{said}");
    let stderr = stop_cleanly(&mut child);
    assert!(stderr.contains("hooks are disabled ([hooks] enabled = false)"), "{stderr}");
}

/// A daemon serving TLS (`[server] tls_cert_file`, with membrane's protocol on and its
/// key): the CLI beside it (`status`, `recall`, `hook`) reaches it over HTTPS, checking its
/// certificate against the configured file; from elsewhere, `MNEME_DAEMON_URL` and
/// `MNEME_TLS_CA_FILE` reach it (`status`, and `mneme mcp` bridging to it), and another
/// authority is refused; membrane's own Python client speaks gRPC over TLS to it; a
/// public address in plain text is refused by `config check`.
#[test]
fn the_cli_the_mcp_bridge_and_membranes_client_speak_tls_to_the_daemon() {
    const KEY: &str = "membrane-key-for-the-tls-test-0123";
    let m = Mneme::init();
    let pki = tempfile::tempdir().expect("dir");
    mneme_testkit::make_certificates(pki.path());
    let p = |name: &str| pki.path().join(name).display().to_string();
    let config = m.dir.path().join("tls.toml");
    std::fs::write(
        &config,
        format!("[server]\ntls_cert_file = {:?}\ntls_key_file = {:?}\n[membrane]\nenabled = true\n", p("server.crt"), p("server.key")),
    )
    .expect("config");
    let config = config.display().to_string();
    let child = m
        .command()
        .args(["--config", &config, "serve", "--grpc-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0"])
        .env("MEMBRANE_API_KEY", KEY)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("serve starts");
    let _guard = Guard(child);
    let file = wait_until("daemon.json", Duration::from_secs(20), || daemon_file(&m));
    assert_eq!(file["tls"], true, "{file}");
    let cli = |args: &[&str]| m.command().arg("--config").arg(&config).args(args).env("MNEME_API_KEY", KEY).output().expect("runs");
    let status = wait_until("status over HTTPS", Duration::from_secs(10), || {
        let out = cli(&["status", "--json"]);
        out.status.success().then(|| serde_json::from_slice::<Value>(&out.stdout).expect("json"))
    });
    assert_eq!(status["pid"], file["pid"], "{status}");

    // membrane's client (vendored, unchanged) over gRPC with TLS, trusting the authority.
    let grpc_port = file["grpc_addr"].as_str().expect("grpc").rsplit(':').next().expect("port").to_string();
    let client_dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/membrane/clients/python");
    let script = "import sys\nsys.path.insert(0, sys.argv[1])\nfrom membrane.client import MembraneClient\n\
                  with MembraneClient(sys.argv[2], tls_ca_cert=sys.argv[3], api_key=sys.argv[4], timeout=5) as c:\n\
                  \x20   c.ingest_event('deploy', 'tls-test', summary='the deploy key rotates on Fridays')\n\
                  \x20   print(len(c.retrieve('deploy key rotates')))\n";
    let python = |ca: &str| {
        std::process::Command::new(mneme_testkit::python())
            .args(["-c", script, client_dir, &format!("localhost:{grpc_port}"), &p(ca), KEY])
            .output()
            .expect("python runs")
    };
    let out = python("ca.crt");
    assert!(out.status.success(), "membrane's client over TLS failed:\n{}", String::from_utf8_lossy(&out.stderr));
    assert_ne!(String::from_utf8_lossy(&out.stdout).trim(), "0");
    assert!(!python("other-ca.crt").status.success(), "membrane's client refuses a certificate from another authority");

    // The CLI beside the daemon: recall and a hook go through it over HTTPS.
    let out = cli(&["recall", "deploy key", "--json"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains("Fridays"));
    let mut hook = m
        .command()
        .args(["--config", &config, "hook", "message_received"])
        .env("MNEME_API_KEY", KEY)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("hook");
    hook.stdin.take().expect("stdin").write_all(br#"{"event":{"content":"my editor is zed","from":"sam"}}"#).expect("write");
    let out = hook.wait_with_output().expect("hook runs");
    assert!(!String::from_utf8_lossy(&out.stderr).contains("handling locally"), "{}", String::from_utf8_lossy(&out.stderr));

    // From elsewhere (another data directory): the daemon's URL and the authority.
    let other = Mneme::new();
    let url = format!("https://localhost:{}", file["http_addr"].as_str().expect("http").rsplit(':').next().expect("port"));
    let remote = |ca: &str, args: &[&str]| {
        other
            .command()
            .args(args)
            .env("MNEME_DAEMON_URL", &url)
            .env("MNEME_TLS_CA_FILE", p(ca))
            .env("MNEME_API_KEY", KEY)
            .output()
            .expect("runs")
    };
    let out = remote("ca.crt", &["status", "--json"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(serde_json::from_slice::<Value>(&out.stdout).expect("json")["pid"], file["pid"]);
    let out = remote("other-ca.crt", &["status"]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains(&url) && stderr.contains("certificate"), "{stderr}");
    // `mneme mcp` bridges to it: a tool call answered by the remote daemon.
    let mut mcp = other.command();
    mcp.args(["mcp"]).env("MNEME_DAEMON_URL", &url).env("MNEME_TLS_CA_FILE", p("ca.crt")).env("MNEME_API_KEY", KEY);
    let recall = json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": { "name": "recall", "arguments": { "query": "deploy key" } } });
    let (_, answers) = crate::mcp::stdio_exchange(mcp, &[recall]);
    let answer = answers.into_iter().find(|v| v["id"] == 1).expect("the tool call's answer");
    assert_eq!(answer["result"]["isError"], false, "{answer}");
    assert!(answer.to_string().contains("Fridays"), "{answer}");

    // A public address in plain text is refused before anything starts.
    let public = m.dir.path().join("public-plain.toml");
    std::fs::write(&public, "[server]\nhttp_addr = \"0.0.0.0:18791\"\n[[principals]]\nname = \"ci\"\nkey_sha256 = \"00000000000000000000000000000000000000000000000000000000000000aa\"\n").expect("write");
    let stderr = m.fails(&["config", "check", public.to_str().expect("utf-8")], 6);
    assert!(stderr.contains("plain text") && stderr.contains("plaintext_behind_proxy"), "{stderr}");
}

/// Claude Code's store hooks with a daemon of the data directory running go through it
/// (its warm store, its model and consolidation): the prompt's memories come back and the
/// prompt is stored by the daemon, which counts both hooks. A daemon that refuses (a key
/// the hook lacks) or is gone leaves the hook to the store itself, losing nothing.
#[test]
fn claude_hooks_go_through_a_running_daemon_and_work_alone_without_one() {
    let m = Mneme::init();
    m.ok(&["workspace", "init"]);
    let claude = |name: &str, stdin: Value, env: &[(&str, &str)]| -> String {
        let mut child = m
            .command()
            .envs(env.iter().copied())
            .args(["claude-hook", name, "--user", "dana"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("hook");
        child.stdin.take().expect("stdin").write_all(stdin.to_string().as_bytes()).expect("write");
        let out = child.wait_with_output().expect("output");
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let value: Value = serde_json::from_slice(&out.stdout).expect("JSON");
        value["hookSpecificOutput"]["additionalContext"].as_str().unwrap_or("").to_string()
    };
    let prompt = |text: &str| serde_json::json!({ "session_id": "c1", "prompt": text });
    // No daemon: the hook works on the store.
    claude("prompt-submit", prompt("I live in Lisbon."), &[]);

    let (mut child, addr) = serve(&m);
    claude("prompt-submit", prompt("Quick update: we moved to Munich last month."), &[]);
    let recalled = claude("prompt-submit", prompt("where do I live now?"), &[]);
    assert!(recalled.contains("## Relevant memories") && recalled.contains("Munich"), "{recalled}");
    assert!(!recalled.contains("where do I live now"), "the prompt is not its own memory: {recalled}");
    let start = claude("session-start", serde_json::json!({ "session_id": "c2" }), &[]);
    assert!(start.contains("## What is true now") && start.contains("lives in: Munich") && !start.contains("Lisbon"), "{start}");
    let metrics = get_text(&addr, "/metrics", None);
    for hook in ["message_received\",result=\"ok\"} 2", "session_start\",result=\"ok\"} 1"] {
        assert!(metrics.contains(&format!("mneme_hook_events_total{{hook=\"{hook}")), "{hook}: {metrics}");
    }
    sigkill(child.id());
    let _ = child.wait();

    // The daemon's file left behind by a killed daemon (its pid now another live
    // process's, its port closed): handled here.
    let file = m.dir.path().join("daemon.json");
    let mut stale: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap_or_default()).unwrap_or_default();
    stale["pid"] = serde_json::json!(std::process::id());
    std::fs::write(&file, stale.to_string()).expect("daemon.json");
    claude("prompt-submit", prompt("These days I live in Berlin."), &[]);
    let recalled = claude("prompt-submit", prompt("where do I live?"), &[]);
    assert!(recalled.contains("Berlin"), "{recalled}");
    std::fs::remove_file(&file).expect("daemon.json");

    // A daemon that wants a key the hook lacks refuses before doing anything: handled here.
    std::fs::write(
        m.dir.path().join("config.toml"),
        "[[principals]]\nname = \"claude\"\nkey_env = \"MNEME_TEST_HOOK_KEY\"\n\
         read_max_sensitivity = \"critical\"\nwrite_max_sensitivity = \"critical\"\n",
    )
    .expect("config");
    let (mut child, addr) = serve_with(&m, &[], &[("MNEME_TEST_HOOK_KEY", "k-0123456789abcdef")], Stdio::null());
    claude("prompt-submit", prompt("Now I live in Vienna."), &[]);
    let recalled = claude("prompt-submit", prompt("where do I live?"), &[("MNEME_API_KEY", "k-0123456789abcdef")]);
    assert!(recalled.contains("Vienna"), "{recalled}");
    let metrics = get_text(&addr, "/metrics", Some("k-0123456789abcdef"));
    assert!(metrics.contains("mneme_hook_events_total{hook=\"message_received\",result=\"ok\"} 1"), "only the keyed one: {metrics}");
    sigterm(child.id());
    assert!(child.wait().expect("exit").success());
}

fn get_text(addr: &str, path: &str, key: Option<&str>) -> String {
    rt().block_on(async {
        let mut request = reqwest::Client::new().get(format!("http://{addr}{path}"));
        if let Some(key) = key {
            request = request.bearer_auth(key);
        }
        request.send().await.expect("get").text().await.expect("text")
    })
}
