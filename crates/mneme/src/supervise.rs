//! The background daemon: `up` (start a supervisor, or reuse a running daemon), `supervise`
//! (the supervisor process: runs `mneme serve`, restarts it after a crash) and `down`
//! (SIGTERM, then SIGKILL after the grace period). Files in the data directory:
//! `supervisor.json` (written by the supervisor), `daemon.json` (by the daemon) and
//! `mneme.log` (both processes' output).
//!
//! The decisions are pure functions, unit-tested below: the restart budget
//! (`RestartBudget`), the port choice (`choose_port`, over a probe of each address) and
//! whom `down` signals, when (`StopPlan`). The rest runs processes and sleeps.

use std::net::{SocketAddr, TcpListener};
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, anyhow, bail};
use mneme_server::{DaemonFile, MnemeConfig};
use serde::{Deserialize, Serialize};

use crate::cli::ServeArgs;
use crate::client::DaemonClient;
use crate::commands::Invocation;
use crate::daemon::{DAEMON_FILE, running_daemon, termination};

pub const SUPERVISOR_FILE: &str = "supervisor.json";
pub const LOG_FILE: &str = "mneme.log";
/// Restarts allowed within [`RESTART_WINDOW`] before the supervisor gives up.
const MAX_RESTARTS: usize = 3;
const RESTART_WINDOW: Duration = Duration::from_secs(300);
/// Ports tried after the configured one when it is held by another program.
const PORT_FALLBACKS: u16 = 5;
/// How long `down` waits for the processes to vanish after SIGKILL.
const AFTER_KILL: Duration = Duration::from_secs(5);

// ---- decisions ---------------------------------------------------------------------------------

/// The supervisor's crash budget: at most [`MAX_RESTARTS`] restarts within any
/// [`RESTART_WINDOW`].
#[derive(Debug, Default)]
pub struct RestartBudget {
    /// Invariant: only restarts younger than the window as of the last `crashed` call.
    recent: Vec<Instant>,
}

impl RestartBudget {
    /// The daemon crashed at `now`: `Some(n)` when it may be restarted (this is restart n
    /// within the window), `None` when the budget is spent.
    pub fn crashed(&mut self, now: Instant) -> Option<usize> {
        self.recent.retain(|t| now.saturating_duration_since(*t) < RESTART_WINDOW);
        if self.recent.len() >= MAX_RESTARTS {
            return None;
        }
        self.recent.push(now);
        Some(self.recent.len())
    }

    /// Restarts counted in the current window (what `supervisor.json` reports).
    pub fn used(&self) -> usize {
        self.recent.len()
    }
}

/// What answers at an address `up` might listen on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Probe {
    /// Nothing: it can be bound.
    Free,
    /// A mneme daemon, serving the store with this id.
    Mneme { store_id: String },
    /// Another program (or, on the gRPC port, anything).
    Taken,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pick {
    Free(SocketAddr),
    /// A mneme daemon for this store already answers here: reuse it.
    Mneme(SocketAddr),
}

/// The configured port if free, else the first free one of up to [`PORT_FALLBACKS`] above
/// it. On the HTTP port, a mneme daemon for this store (`store_id`) is reused; one serving
/// another store is passed over like any other program. Port 0 (any) is never probed.
pub fn choose_port(
    want: SocketAddr,
    http: bool,
    store_id: &str,
    probe: &mut dyn FnMut(SocketAddr) -> Result<Probe>,
    notes: &mut Vec<String>,
) -> Result<Pick> {
    if want.port() == 0 {
        return Ok(Pick::Free(want));
    }
    for offset in 0..=PORT_FALLBACKS {
        let Some(port) = want.port().checked_add(offset) else { break };
        let addr = SocketAddr::new(want.ip(), port);
        match probe(addr)? {
            Probe::Free => {
                if offset > 0 {
                    notes.push(format!("port {} was held by another program; using {port}", want.port()));
                }
                return Ok(Pick::Free(addr));
            }
            Probe::Mneme { store_id: theirs } if http => {
                if theirs == store_id {
                    return Ok(Pick::Mneme(addr));
                }
                notes.push(format!("port {port} is held by a mneme daemon for another data directory"));
            }
            Probe::Mneme { .. } | Probe::Taken => {}
        }
    }
    bail!("no free port in {}..={} for {}", want.port(), want.port().saturating_add(PORT_FALLBACKS), if http { "HTTP" } else { "gRPC" })
}

/// Whom `down` signals, and when: SIGTERM to `term` (the supervisor when there is one: it
/// stops the daemon and then itself), up to `grace` for every process in `watch` to exit;
/// then SIGKILL to each of them still alive, and up to `after_kill` more.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StopPlan {
    pub term: u32,
    pub grace: Duration,
    /// The processes that must be gone (and are killed after the grace period).
    pub watch: Vec<u32>,
    pub after_kill: Duration,
    /// The pid `down` reports: the daemon's when known.
    pub reported: u32,
}

impl StopPlan {
    /// `None` when neither a supervisor nor a daemon is alive.
    pub fn new(supervisor: Option<u32>, daemon: Option<u32>, grace: Duration) -> Option<StopPlan> {
        let term = supervisor.or(daemon)?;
        let mut watch = vec![term];
        watch.extend(daemon.filter(|d| *d != term));
        Some(StopPlan { term, grace, watch, after_kill: AFTER_KILL, reported: daemon.unwrap_or(term) })
    }
}

// ---- processes -----------------------------------------------------------------------------

/// Whether `pid` is a running process. A zombie (exited, not yet reaped by its parent)
/// counts as gone: it holds no locks or ports and will never run again.
pub fn pid_alive(pid: u32) -> bool {
    let exists =
        i32::try_from(pid).ok().and_then(rustix::process::Pid::from_raw).is_some_and(|p| rustix::process::test_kill_process(p).is_ok());
    exists && !is_zombie(pid)
}

/// Linux: the state field of `/proc/PID/stat` (after the parenthesised command name) is `Z`.
fn is_zombie(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| stat.rsplit_once(')').map(|(_, rest)| rest.trim_start().starts_with('Z')))
        .unwrap_or(false)
}

fn signal(pid: u32, sig: rustix::process::Signal) -> Result<()> {
    let p = i32::try_from(pid).ok().and_then(rustix::process::Pid::from_raw).ok_or_else(|| anyhow!("bad pid {pid}"))?;
    rustix::process::kill_process(p, sig).with_context(|| format!("cannot signal process {pid}"))
}

/// What is at `addr`: bindable, a mneme daemon (asked on `/healthz`, HTTP port only), or
/// something else.
fn probe_port(config: &MnemeConfig, addr: SocketAddr, http: bool) -> Result<Probe> {
    if TcpListener::bind(addr).is_ok() {
        return Ok(Probe::Free);
    }
    let tls = config.server.tls_cert_file.is_some();
    if http && let Some(health) = DaemonClient::local(config, &addr.to_string(), tls, None)?.healthz() {
        return Ok(Probe::Mneme { store_id: health.store_id.unwrap_or_default() });
    }
    Ok(Probe::Taken)
}

fn pick_port(config: &MnemeConfig, want: SocketAddr, http: bool, store_id: &str, notes: &mut Vec<String>) -> Result<Pick> {
    choose_port(want, http, store_id, &mut |addr| probe_port(config, addr, http), notes)
}

// ---- up / supervise / down -----------------------------------------------------------------

#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct SupervisorFile {
    pub(crate) pid: u32,
    child_pid: Option<u32>,
    /// Restarts within the crash budget's window (five minutes).
    pub(crate) restarts: usize,
    /// Restarts since the supervisor started.
    #[serde(default)]
    pub(crate) total_restarts: usize,
}
/// Global flags to hand down to `supervise` and `serve`.
fn passthrough(ctx: &Invocation) -> Vec<String> {
    let mut args = vec!["--data-dir".to_string(), ctx.data_dir.display().to_string()];
    if let Some(c) = &ctx.config_path {
        args.extend(["--config".into(), c.display().to_string()]);
    }
    if let Some(k) = &ctx.key_file {
        args.extend(["--key-file".into(), k.display().to_string()]);
    }
    for (k, v) in &ctx.user_sets {
        args.extend(["--set".into(), format!("{k}={v}")]);
    }
    args
}

fn log_file(ctx: &Invocation) -> Result<std::fs::File> {
    let path = ctx.data_dir.join(LOG_FILE);
    std::fs::OpenOptions::new().create(true).append(true).open(&path).with_context(|| format!("cannot open {}", path.display()))
}

#[derive(Debug, Serialize)]
struct UpReport {
    action: &'static str,
    pid: u32,
    supervisor_pid: Option<u32>,
    grpc_addr: String,
    http_addr: String,
    /// Whether it serves TLS (the console is then `https://`).
    tls: bool,
    notes: Vec<String>,
    log: String,
}

pub fn up(ctx: &Invocation, args: &ServeArgs) -> Result<()> {
    std::fs::create_dir_all(&ctx.data_dir).with_context(|| format!("cannot create {}", ctx.data_dir.display()))?;
    let log = ctx.data_dir.join(LOG_FILE).display().to_string();
    let report = |action, d: &DaemonFile, sup: Option<u32>, notes: Vec<String>| UpReport {
        action,
        pid: d.pid,
        supervisor_pid: sup,
        grpc_addr: d.grpc_addr.clone(),
        http_addr: d.http_addr.clone(),
        tls: d.tls,
        notes,
        log: log.clone(),
    };
    if let Some(d) = running_daemon(ctx) {
        return print_up(
            &report("reused", &d, supervisor(&ctx.data_dir).map(|s| s.pid), vec!["a daemon already serves this data directory".into()]),
            ctx.json,
        );
    }
    let mut notes = Vec::new();
    let store_id = mneme_server::store_id(&ctx.store_path());
    let http = match pick_port(&ctx.config, ctx.config.server.http_addr, true, &store_id, &mut notes)? {
        Pick::Mneme(addr) => {
            let tls = ctx.config.server.tls_cert_file.is_some();
            let health = DaemonClient::local(&ctx.config, &addr.to_string(), tls, None)?.healthz();
            let d = DaemonFile {
                pid: health.as_ref().and_then(|h| h.pid).unwrap_or(0),
                grpc_addr: health.as_ref().and_then(|h| h.grpc_addr.clone()).unwrap_or_else(|| "?".into()),
                http_addr: addr.to_string(),
                started_at: jiff::Timestamp::now(),
                version: health.and_then(|h| h.version).unwrap_or_else(|| "?".into()),
                tls,
            };
            return print_up(&report("reused", &d, None, vec![format!("a mneme daemon already answers on {addr}")]), ctx.json);
        }
        Pick::Free(a) => a,
    };
    let grpc = match pick_port(&ctx.config, ctx.config.server.grpc_addr, false, &store_id, &mut notes)? {
        Pick::Free(a) | Pick::Mneme(a) => a,
    };
    let exe = std::env::current_exe().context("cannot find the mneme executable")?;
    let mut command = std::process::Command::new(exe);
    command.args(passthrough(ctx)).arg("supervise").args(["--grpc-addr", &grpc.to_string(), "--http-addr", &http.to_string()]);
    if let Some(f) = &args.log_format {
        command.args(["--log-format", f]);
    }
    if let Some(l) = &args.log_level {
        command.args(["--log-level", l]);
    }
    let log_out = log_file(ctx)?;
    let log_err = log_out.try_clone()?;
    {
        use std::os::unix::process::CommandExt as _;
        // Its own process group: a Ctrl-C in this terminal does not reach it.
        command.process_group(0);
    }
    let mut child = command.stdin(Stdio::null()).stdout(log_out).stderr(log_err).spawn().context("cannot start the supervisor")?;
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(d) = running_daemon(ctx) {
            return print_up(&report("started", &d, Some(child.id()), notes), ctx.json);
        }
        if let Some(status) = child.try_wait()? {
            bail!("the daemon did not start (supervisor exited with {status}); see {log}");
        }
        if Instant::now() > deadline {
            bail!("the daemon did not become healthy within 30 s; see {log}");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn print_up(r: &UpReport, json: bool) -> Result<()> {
    if json {
        outln!("{}", serde_json::to_string(r)?);
        return Ok(());
    }
    for note in &r.notes {
        outln!("note: {note}");
    }
    let sup = r.supervisor_pid.map(|p| format!(", supervisor pid {p}")).unwrap_or_default();
    outln!("mneme daemon {} (pid {}{sup}): gRPC {}, HTTP {}", r.action, r.pid, r.grpc_addr, r.http_addr);
    outln!("console: {}://{}/", if r.tls { "https" } else { "http" }, r.http_addr);
    outln!("logs: {}", r.log);
    Ok(())
}

/// The running supervisor's file, if a supervisor is alive.
pub(crate) fn supervisor(data_dir: &Path) -> Option<SupervisorFile> {
    let f: SupervisorFile = serde_json::from_str(&std::fs::read_to_string(data_dir.join(SUPERVISOR_FILE)).ok()?).ok()?;
    pid_alive(f.pid).then_some(f)
}

/// `mneme supervise`: runs `mneme serve` and restarts it after a crash, at most three
/// times in five minutes. SIGTERM/SIGINT stop the daemon and then the supervisor.
pub fn supervise(ctx: &Invocation, args: &ServeArgs) -> Result<()> {
    let path = ctx.data_dir.join(SUPERVISOR_FILE);
    let exe = std::env::current_exe()?;
    let mut budget = RestartBudget::default();
    let mut total_restarts = 0;
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let result = rt.block_on(async {
        loop {
            let mut command = tokio::process::Command::new(&exe);
            command.args(passthrough(ctx)).arg("serve");
            // The daemon reports these in its status (`/v1/status`'s `supervisor`).
            command.env(mneme_server::app::Supervisor::PID_VAR, std::process::id().to_string());
            command.env(mneme_server::app::Supervisor::RESTARTS_VAR, total_restarts.to_string());
            for (flag, v) in [
                ("--grpc-addr", &args.grpc_addr),
                ("--http-addr", &args.http_addr),
                ("--log-format", &args.log_format),
                ("--log-level", &args.log_level),
            ] {
                if let Some(v) = v {
                    command.args([flag, v]);
                }
            }
            let mut child = command.stdin(Stdio::null()).spawn().context("cannot start mneme serve")?;
            let file = SupervisorFile { pid: std::process::id(), child_pid: child.id(), restarts: budget.used(), total_restarts };
            mneme_workspace::atomic::write_atomic(&path, serde_json::to_string(&file)?.as_bytes())?;
            tokio::select! {
                status = child.wait() => {
                    let status = status?;
                    if status.success() {
                        eprintln!("supervisor: the daemon stopped cleanly; exiting");
                        return Ok(());
                    }
                    let Some(restart) = budget.crashed(Instant::now()) else {
                        bail!("supervisor: the daemon crashed {} times in 5 minutes ({status}); not restarting", MAX_RESTARTS + 1);
                    };
                    eprintln!("supervisor: the daemon exited with {status}; restart {restart}/{MAX_RESTARTS}");
                    total_restarts += 1;
                    tokio::time::sleep(Duration::from_millis(500)).await;
                }
                _ = termination() => {
                    if let Some(pid) = child.id() {
                        let _ = signal(pid, rustix::process::Signal::TERM);
                    }
                    let _ = child.wait().await;
                    return Ok(());
                }
            }
        }
    });
    let _ = std::fs::remove_file(&path);
    result
}

/// SIGTERM to the supervisor (or the daemon), then, if they are still alive after `grace`,
/// SIGKILL to both: a daemon stuck in shutdown must not outlive `down` (the store is
/// crash-safe, so a killed daemon loses nothing it acknowledged).
pub fn down(ctx: &Invocation, grace: &str) -> Result<()> {
    let grace = mneme_server::config::parse_duration(grace).map_err(|e| crate::commands::InputError(format!("--grace: {e}")))?;
    let supervisor_pid = supervisor(&ctx.data_dir).map(|s| s.pid);
    let daemon_pid = DaemonFile::read(&ctx.data_dir.join(DAEMON_FILE)).map(|d| d.pid).filter(|pid| pid_alive(*pid));
    let Some(plan) = StopPlan::new(supervisor_pid, daemon_pid, grace) else {
        if ctx.json {
            outln!("{}", serde_json::json!({ "stopped": false, "running": false }));
        } else {
            outln!("mneme daemon: not running");
        }
        return Ok(());
    };
    signal(plan.term, rustix::process::Signal::TERM)?;
    let stopped = |deadline: Instant| {
        while plan.watch.iter().any(|pid| pid_alive(*pid)) {
            if Instant::now() > deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        true
    };
    let mut killed = false;
    if !stopped(Instant::now() + plan.grace) {
        eprintln!("the daemon (pid {}) did not stop within {:?} of SIGTERM; sending SIGKILL", plan.reported, plan.grace);
        for &pid in &plan.watch {
            if pid_alive(pid) {
                let _ = signal(pid, rustix::process::Signal::KILL);
            }
        }
        if !stopped(Instant::now() + plan.after_kill) {
            bail!("the daemon (pid {}) survived SIGKILL", plan.term);
        }
        // A killed daemon leaves its files behind; nothing else removes them.
        for file in [DAEMON_FILE, SUPERVISOR_FILE] {
            let _ = std::fs::remove_file(ctx.data_dir.join(file));
        }
        killed = true;
    }
    if ctx.json {
        outln!("{}", serde_json::json!({ "stopped": true, "killed": killed, "pid": plan.reported }));
    } else if killed {
        outln!("mneme daemon killed (pid {})", plan.reported);
    } else {
        outln!("mneme daemon stopped (pid {})", plan.reported);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_restart_budget_allows_three_restarts_in_five_minutes() {
        let start = Instant::now();
        let at = |secs: u64| start + Duration::from_secs(secs);
        let mut budget = RestartBudget::default();
        assert_eq!(budget.crashed(at(0)), Some(1));
        assert_eq!(budget.crashed(at(10)), Some(2));
        assert_eq!(budget.crashed(at(20)), Some(3));
        // A fourth crash within five minutes of the first: give up.
        assert_eq!(budget.crashed(at(299)), None);
        assert_eq!(budget.used(), 3);
    }

    #[test]
    fn restarts_older_than_the_window_are_forgotten() {
        let start = Instant::now();
        let at = |secs: u64| start + Duration::from_secs(secs);
        let mut budget = RestartBudget::default();
        for (i, t) in [0, 100, 200].into_iter().enumerate() {
            assert_eq!(budget.crashed(at(t)), Some(i + 1));
        }
        // At 300 s the first restart is exactly one window old: it no longer counts.
        assert_eq!(budget.crashed(at(300)), Some(3));
        assert_eq!(budget.crashed(at(301)), None, "100, 200 and 300 are still within the window");
        // Long after, a crash starts a fresh window.
        assert_eq!(budget.crashed(at(1000)), Some(1));
    }

    fn addr(port: u16) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], port))
    }

    /// `choose_port` over a table of what answers on each port (unlisted ports are free).
    fn choose(want: u16, http: bool, taken: &[(u16, Probe)]) -> (Result<Pick>, Vec<String>, Vec<u16>) {
        let mut probed = Vec::new();
        let mut notes = Vec::new();
        let mut probe = |a: SocketAddr| {
            probed.push(a.port());
            Ok(taken.iter().find(|(p, _)| *p == a.port()).map_or(Probe::Free, |(_, what)| what.clone()))
        };
        let pick = choose_port(addr(want), http, "ours", &mut probe, &mut notes);
        (pick, notes, probed)
    }

    fn mneme(store: &str) -> Probe {
        Probe::Mneme { store_id: store.into() }
    }

    #[test]
    fn a_free_configured_port_is_used_without_a_note() {
        let (pick, notes, probed) = choose(18791, true, &[]);
        assert_eq!(pick.expect("a port"), Pick::Free(addr(18791)));
        assert!(notes.is_empty());
        assert_eq!(probed, [18791]);
    }

    #[test]
    fn port_zero_is_never_probed() {
        let (pick, _, probed) = choose(0, true, &[]);
        assert_eq!(pick.expect("a port"), Pick::Free(addr(0)));
        assert!(probed.is_empty());
    }

    #[test]
    fn a_port_held_by_another_program_falls_back_to_the_next_free_one() {
        let (pick, notes, _) = choose(18791, true, &[(18791, Probe::Taken), (18792, Probe::Taken)]);
        assert_eq!(pick.expect("a port"), Pick::Free(addr(18793)));
        assert_eq!(notes, ["port 18791 was held by another program; using 18793"]);
    }

    #[test]
    fn a_daemon_for_this_store_is_reused_on_the_http_port_only() {
        let (pick, _, _) = choose(18791, true, &[(18791, mneme("ours"))]);
        assert_eq!(pick.expect("a port"), Pick::Mneme(addr(18791)));
        // On the gRPC port the same answer is just a taken port.
        let (pick, _, _) = choose(9090, false, &[(9090, mneme("ours"))]);
        assert_eq!(pick.expect("a port"), Pick::Free(addr(9091)));
    }

    #[test]
    fn a_daemon_for_another_store_is_passed_over_with_a_note() {
        let (pick, notes, _) = choose(18791, true, &[(18791, mneme("theirs"))]);
        assert_eq!(pick.expect("a port"), Pick::Free(addr(18792)));
        assert_eq!(notes[0], "port 18791 is held by a mneme daemon for another data directory");
    }

    #[test]
    fn six_taken_ports_are_an_error_naming_the_range() {
        let taken: Vec<(u16, Probe)> = (9090..=9095).map(|p| (p, Probe::Taken)).collect();
        let (pick, _, probed) = choose(9090, false, &taken);
        let err = pick.expect_err("no port left").to_string();
        assert_eq!(err, "no free port in 9090..=9095 for gRPC");
        assert_eq!(probed, (9090..=9095).collect::<Vec<_>>());
        // Near the top of the range the search stops at 65535 instead of wrapping.
        let (pick, _, probed) = choose(65534, true, &[(65534, Probe::Taken), (65535, Probe::Taken)]);
        assert!(pick.is_err());
        assert_eq!(probed, [65534, 65535]);
    }

    #[test]
    fn down_terms_the_supervisor_then_kills_both_after_the_grace() {
        let grace = Duration::from_secs(30);
        let plan = StopPlan::new(Some(10), Some(11), grace).expect("something runs");
        assert_eq!(plan, StopPlan { term: 10, grace, watch: vec![10, 11], after_kill: AFTER_KILL, reported: 11 });
    }

    #[test]
    fn down_without_a_supervisor_signals_the_daemon_alone() {
        let grace = Duration::from_millis(250);
        let plan = StopPlan::new(None, Some(11), grace).expect("a daemon runs");
        assert_eq!((plan.term, plan.watch, plan.reported), (11, vec![11], 11));
        let plan = StopPlan::new(Some(10), None, grace).expect("a supervisor runs");
        assert_eq!((plan.term, plan.watch, plan.reported), (10, vec![10], 10));
        assert_eq!(StopPlan::new(None, None, grace), None);
    }
}
