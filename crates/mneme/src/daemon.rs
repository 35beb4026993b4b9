//! The daemon's commands: `serve` (foreground), `up` / `supervise` / `down` (background
//! with restarts), `status`, `hook`, and the client side of `recall` against a running
//! daemon. Files in the data directory: `daemon.json` (written by the daemon while it
//! serves), `supervisor.json` (by the supervisor) and `mneme.log` (both processes' logs).

use std::io::Read as _;
use std::net::{SocketAddr, TcpListener};
use std::path::Path;
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, anyhow, bail};
use mneme_agent::config::LogFormat;
use mneme_agent::hooks::{HookInput, HookName, HookOutcome, Hooks};
use mneme_core::{Sensitivity, SystemClock};
use mneme_server::{DaemonFile, DaemonOptions};
use mneme_service::{Access, ErrorKind, Hit, Ops, Principal, RetrieveRequest};
use serde::{Deserialize, Serialize};

use crate::cli::{HookArgs, ServeArgs};
use crate::commands::Invocation;

pub const DAEMON_FILE: &str = "daemon.json";
pub const SUPERVISOR_FILE: &str = "supervisor.json";
pub const LOG_FILE: &str = "mneme.log";
/// Restarts allowed within [`RESTART_WINDOW`] before the supervisor gives up.
const MAX_RESTARTS: usize = 3;
const RESTART_WINDOW: Duration = Duration::from_secs(300);
/// Ports tried after the configured one when it is held by another program.
const PORT_FALLBACKS: u16 = 5;

/// The `--set` pairs that `serve`/`up` flags stand for.
pub fn serve_sets(args: &ServeArgs) -> Vec<(String, String)> {
    let mut sets = Vec::new();
    let mut push = |key: &str, v: &Option<String>| {
        if let Some(v) = v {
            // Quoted, so an address is a TOML string rather than a parse error.
            sets.push((key.to_string(), format!("{v:?}")));
        }
    };
    push("server.grpc_addr", &args.grpc_addr);
    push("server.http_addr", &args.http_addr);
    push("server.log_format", &args.log_format);
    push("server.log_level", &args.log_level);
    sets
}

/// A daemon that is error in a command's sense: not running.
#[derive(Debug)]
pub struct NotRunning;

impl std::fmt::Display for NotRunning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the mneme daemon is not running (start it with `mneme up` or `mneme serve`)")
    }
}

impl std::error::Error for NotRunning {}

/// An error answer from the daemon.
#[derive(Debug)]
pub struct RemoteError {
    pub status: u16,
    pub code: String,
    pub message: String,
}

impl std::fmt::Display for RemoteError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "daemon: {} ({}, HTTP {})", self.message, self.code, self.status)
    }
}

impl std::error::Error for RemoteError {}

impl RemoteError {
    pub fn exit_code(&self) -> u8 {
        ErrorKind::from_code(&self.code).map_or(1, ErrorKind::exit_code)
    }
}

fn runtime() -> Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_current_thread().enable_all().build()?)
}

fn client(timeout: Duration) -> reqwest::Client {
    reqwest::Client::builder().timeout(timeout).connect_timeout(Duration::from_millis(500)).build().unwrap_or_default()
}

/// Whether `pid` is a running process. A zombie (exited, not yet reaped by its parent)
/// counts as gone: it holds no locks or ports and will never run again.
fn pid_alive(pid: u32) -> bool {
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

/// `/healthz` at `addr`, if a mneme daemon answers there.
async fn healthz(addr: &str) -> Option<serde_json::Value> {
    let body: serde_json::Value =
        client(Duration::from_secs(1)).get(format!("http://{addr}/healthz")).send().await.ok()?.json().await.ok()?;
    (body["service"] == "mneme").then_some(body)
}

/// The daemon serving this data directory, if it is alive and answers.
pub fn running_daemon(data_dir: &Path) -> Option<DaemonFile> {
    let file = DaemonFile::read(&data_dir.join(DAEMON_FILE))?;
    if !pid_alive(file.pid) {
        return None;
    }
    let health = runtime().ok()?.block_on(healthz(&file.http_addr))?;
    (health["pid"].as_u64() == Some(u64::from(file.pid))).then_some(file)
}

/// Calls the daemon's HTTP API; the key comes from `MNEME_API_KEY`.
async fn call(
    daemon: &DaemonFile,
    method: reqwest::Method,
    path: &str,
    body: Option<&serde_json::Value>,
    timeout: Duration,
) -> Result<serde_json::Value> {
    let mut request = client(timeout).request(method, format!("http://{}{path}", daemon.http_addr));
    if let Ok(key) = std::env::var("MNEME_API_KEY") {
        request = request.bearer_auth(key.trim());
    }
    if let Some(b) = body {
        request = request.json(b);
    }
    let response = request.send().await.with_context(|| format!("cannot reach the daemon at {}", daemon.http_addr))?;
    let status = response.status().as_u16();
    let value: serde_json::Value = response.json().await.context("the daemon's answer is not JSON")?;
    if status >= 400 {
        return Err(RemoteError {
            status,
            code: value["error"]["code"].as_str().unwrap_or("unknown").into(),
            message: value["error"]["message"].as_str().unwrap_or("unknown error").into(),
        }
        .into());
    }
    Ok(value)
}

// ---- serve ------------------------------------------------------------------------------

fn init_logging(ctx: &Invocation) -> Result<()> {
    let server = &ctx.config.server;
    let filter = tracing_subscriber::EnvFilter::try_new(&server.log_level).map_err(|e| anyhow!("server.log_level: {e}"))?;
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_ansi(ansi).with_writer(std::io::stderr);
    let result = match server.log_format {
        LogFormat::Json => builder.json().try_init(),
        LogFormat::Text => builder.try_init(),
    };
    result.map_err(|e| anyhow!("cannot set up logging: {e}"))
}

async fn termination() {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).ok();
    let mut int = signal(SignalKind::interrupt()).ok();
    tokio::select! {
        _ = async { if let Some(t) = term.as_mut() { t.recv().await; } else { std::future::pending::<()>().await } } => {}
        _ = async { if let Some(i) = int.as_mut() { i.recv().await; } else { std::future::pending::<()>().await } } => {}
    }
}

/// `mneme serve`: runs until SIGINT or SIGTERM, then shuts down in order and exits 0.
pub fn serve(ctx: &Invocation) -> Result<()> {
    std::fs::create_dir_all(&ctx.data_dir).with_context(|| format!("cannot create {}", ctx.data_dir.display()))?;
    if let Some(d) = running_daemon(&ctx.data_dir) {
        return Err(anyhow::Error::new(crate::commands::ServeError(format!(
            "a mneme daemon (pid {}) already serves {} on {} / {}",
            d.pid,
            ctx.data_dir.display(),
            d.grpc_addr,
            d.http_addr
        ))));
    }
    init_logging(ctx)?;
    for name in mneme_agent::config::unknown_env(std::env::vars()) {
        tracing::warn!(variable = %name, "ignoring an MNEME_* environment variable mneme does not read (a typo?); see `mneme config show`");
    }
    mneme_agent::init_tls();
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    let result = rt.block_on(async {
        let options = DaemonOptions {
            config: ctx.config.clone(),
            store: ctx.store_options(true),
            daemon_file: Some(ctx.data_dir.join(DAEMON_FILE)),
            clock: Arc::new(SystemClock),
            env: std::env::vars().collect(),
        };
        let daemon = mneme_server::start(options).await.map_err(|e| anyhow::Error::new(crate::commands::ServeError(e)))?;
        let stop = daemon.shutdown_handle();
        tokio::spawn(async move {
            termination().await;
            tracing::info!("signal received");
            let _ = stop.send(true);
        });
        daemon.wait().await;
        Ok(())
    });
    // Never hang on exit because some blocking task does not return.
    rt.shutdown_timeout(Duration::from_secs(5));
    result
}

// ---- up / supervise / down -----------------------------------------------------------------

#[derive(Debug, Serialize, Deserialize)]
struct SupervisorFile {
    pid: u32,
    child_pid: Option<u32>,
    restarts: usize,
}

enum Pick {
    Free(SocketAddr),
    Mneme(SocketAddr),
}

/// The configured port if free, else the next of up to five that is; a mneme daemon
/// answering on a tried HTTP port is reused.
/// A free port at `want` or up to [`PORT_FALLBACKS`] above it. On the HTTP port, a mneme
/// daemon for this store (`store_id`) is reused; one serving another store is passed over
/// like any other program.
fn pick_port(want: SocketAddr, http: bool, store_id: &str, notes: &mut Vec<String>) -> Result<Pick> {
    if want.port() == 0 {
        return Ok(Pick::Free(want));
    }
    for offset in 0..=PORT_FALLBACKS {
        let Some(port) = want.port().checked_add(offset) else { break };
        let addr = SocketAddr::new(want.ip(), port);
        if TcpListener::bind(addr).is_ok() {
            if offset > 0 {
                notes.push(format!("port {} was held by another program; using {port}", want.port()));
            }
            return Ok(Pick::Free(addr));
        }
        if http && let Some(health) = runtime()?.block_on(healthz(&addr.to_string())) {
            if health["store_id"] == store_id {
                return Ok(Pick::Mneme(addr));
            }
            notes.push(format!("port {port} is held by a mneme daemon for another data directory"));
            continue;
        }
    }
    bail!("no free port in {}..={} for {}", want.port(), want.port().saturating_add(PORT_FALLBACKS), if http { "HTTP" } else { "gRPC" })
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
        notes,
        log: log.clone(),
    };
    if let Some(d) = running_daemon(&ctx.data_dir) {
        return print_up(
            &report("reused", &d, supervisor(&ctx.data_dir).map(|s| s.pid), vec!["a daemon already serves this data directory".into()]),
            ctx.json,
        );
    }
    let mut notes = Vec::new();
    let store_id = mneme_server::store_id(&ctx.store_path());
    let http = match pick_port(ctx.config.server.http_addr, true, &store_id, &mut notes)? {
        Pick::Mneme(addr) => {
            let body = runtime()?.block_on(healthz(&addr.to_string())).unwrap_or_default();
            let d = DaemonFile {
                pid: body["pid"].as_u64().unwrap_or(0) as u32,
                grpc_addr: body["grpc_addr"].as_str().unwrap_or("?").into(),
                http_addr: addr.to_string(),
                started_at: jiff::Timestamp::now(),
                version: body["version"].as_str().unwrap_or("?").into(),
            };
            return print_up(&report("reused", &d, None, vec![format!("a mneme daemon already answers on {addr}")]), ctx.json);
        }
        Pick::Free(a) => a,
    };
    let grpc = match pick_port(ctx.config.server.grpc_addr, false, &store_id, &mut notes)? {
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
        if let Some(d) = running_daemon(&ctx.data_dir) {
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
    outln!("logs: {}", r.log);
    Ok(())
}

fn supervisor(data_dir: &Path) -> Option<SupervisorFile> {
    let f: SupervisorFile = serde_json::from_str(&std::fs::read_to_string(data_dir.join(SUPERVISOR_FILE)).ok()?).ok()?;
    pid_alive(f.pid).then_some(f)
}

/// `mneme supervise`: runs `mneme serve` and restarts it after a crash, at most three
/// times in five minutes. SIGTERM/SIGINT stop the daemon and then the supervisor.
pub fn supervise(ctx: &Invocation, args: &ServeArgs) -> Result<()> {
    let path = ctx.data_dir.join(SUPERVISOR_FILE);
    let exe = std::env::current_exe()?;
    let mut restarts: Vec<Instant> = Vec::new();
    let rt = runtime()?;
    let result = rt.block_on(async {
        loop {
            let mut command = tokio::process::Command::new(&exe);
            command.args(passthrough(ctx)).arg("serve");
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
            let file = SupervisorFile { pid: std::process::id(), child_pid: child.id(), restarts: restarts.len() };
            mneme_server::daemon::write_atomic(&path, &serde_json::to_string(&file)?)?;
            tokio::select! {
                status = child.wait() => {
                    let status = status?;
                    if status.success() {
                        eprintln!("supervisor: the daemon stopped cleanly; exiting");
                        return Ok(());
                    }
                    let now = Instant::now();
                    restarts.retain(|t| now.duration_since(*t) < RESTART_WINDOW);
                    if restarts.len() >= MAX_RESTARTS {
                        bail!("supervisor: the daemon crashed {} times in 5 minutes ({status}); not restarting", MAX_RESTARTS + 1);
                    }
                    restarts.push(now);
                    eprintln!("supervisor: the daemon exited with {status}; restart {}/{MAX_RESTARTS}", restarts.len());
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
    let grace = mneme_agent::config::parse_duration(grace).map_err(|e| crate::commands::InputError(format!("--grace: {e}")))?;
    let sup = supervisor(&ctx.data_dir);
    let daemon = DaemonFile::read(&ctx.data_dir.join(DAEMON_FILE)).filter(|d| pid_alive(d.pid));
    let target = match (&sup, &daemon) {
        (Some(s), _) => s.pid,
        (None, Some(d)) => d.pid,
        (None, None) => {
            if ctx.json {
                outln!("{}", serde_json::json!({ "stopped": false, "running": false }));
            } else {
                outln!("mneme daemon: not running");
            }
            return Ok(());
        }
    };
    signal(target, rustix::process::Signal::TERM)?;
    let daemon_pid = daemon.as_ref().map(|d| d.pid);
    let stopped = |deadline: Instant| {
        while pid_alive(target) || daemon_pid.is_some_and(pid_alive) {
            if Instant::now() > deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        true
    };
    let mut killed = false;
    if !stopped(Instant::now() + grace) {
        eprintln!("the daemon (pid {}) did not stop within {grace:?} of SIGTERM; sending SIGKILL", daemon_pid.unwrap_or(target));
        for pid in std::iter::once(target).chain(daemon_pid) {
            if pid_alive(pid) {
                let _ = signal(pid, rustix::process::Signal::KILL);
            }
        }
        if !stopped(Instant::now() + Duration::from_secs(5)) {
            bail!("the daemon (pid {target}) survived SIGKILL");
        }
        // A killed daemon leaves its files behind; nothing else removes them.
        for file in [DAEMON_FILE, SUPERVISOR_FILE] {
            let _ = std::fs::remove_file(ctx.data_dir.join(file));
        }
        killed = true;
    }
    if ctx.json {
        outln!("{}", serde_json::json!({ "stopped": true, "killed": killed, "pid": daemon_pid.unwrap_or(target) }));
    } else if killed {
        outln!("mneme daemon killed (pid {})", daemon_pid.unwrap_or(target));
    } else {
        outln!("mneme daemon stopped (pid {})", daemon_pid.unwrap_or(target));
    }
    Ok(())
}

pub fn status(ctx: &Invocation) -> Result<()> {
    let Some(d) = running_daemon(&ctx.data_dir) else {
        if ctx.json {
            outln!("{}", serde_json::json!({ "running": false }));
        }
        return Err(NotRunning.into());
    };
    let s = runtime()?.block_on(call(&d, reqwest::Method::GET, "/v1/status", None, Duration::from_secs(5)))?;
    if ctx.json {
        outln!("{s}");
        return Ok(());
    }
    outln!("mneme daemon: running (pid {}, version {})", s["pid"], s["version"].as_str().unwrap_or("?"));
    outln!("  gRPC {}   HTTP {}", s["grpc_addr"].as_str().unwrap_or("?"), s["http_addr"].as_str().unwrap_or("?"));
    let up = s["uptime_seconds"].as_u64().unwrap_or(0);
    outln!("  uptime {}h {:02}m {:02}s (since {})", up / 3600, up / 60 % 60, up % 60, s["started_at"].as_str().unwrap_or("?"));
    outln!("  store {}{}", s["store"].as_str().unwrap_or("?"), if s["encrypted"] == true { " (encrypted)" } else { "" });
    let types: Vec<String> =
        s["records_by_type"].as_object().map(|o| o.iter().map(|(k, v)| format!("{k}={v}")).collect()).unwrap_or_default();
    outln!("  records {} ({})", s["total_records"], types.join(" "));
    let last = &s["last_consolidation"];
    if last.is_null() {
        outln!("  last consolidation: never ({} messages buffered)", s["consolidation_buffered"]);
    } else {
        outln!(
            "  last consolidation: {} ({} messages, {} regex + {} LLM facts, LLM {})",
            last["at"].as_str().unwrap_or("?"),
            last["messages"],
            last["regex_facts"],
            last["llm_facts"],
            last["llm"].as_str().unwrap_or("?")
        );
    }
    outln!("  errors in the last hour: {}", s["errors_last_hour"]);
    Ok(())
}

// ---- hooks and remote recall ------------------------------------------------------------------

/// `mneme hook NAME`: the event JSON on stdin; the outcome JSON on stdout. Never fails the
/// caller: problems are in the outcome's `error` (and on stderr), the exit status is 0.
pub fn hook(ctx: &Invocation, args: &HookArgs) -> Result<()> {
    let Some(name) = HookName::ALL.into_iter().find(|h| h.as_str() == args.name) else {
        let known: Vec<&str> = HookName::ALL.iter().map(|h| h.as_str()).collect();
        return Err(crate::commands::input_error(format!("unknown hook {:?}; hooks: {}", args.name, known.join(", "))));
    };
    let mut raw = String::new();
    let outcome = match std::io::stdin().take(4 * 1024 * 1024).read_to_string(&mut raw) {
        Err(e) => HookOutcome { hook: Some(name), error: Some(format!("cannot read stdin: {e}")), ..HookOutcome::default() },
        Ok(_) => {
            let value = if raw.trim().is_empty() {
                Ok(serde_json::json!({}))
            } else {
                serde_json::from_str(&raw).map_err(|e| format!("stdin is not JSON: {e}"))
            };
            match value.and_then(|v| HookInput::from_json(v.clone()).map(|i| (v, i))) {
                Err(e) => HookOutcome { hook: Some(name), error: Some(e), ..HookOutcome::default() },
                Ok((value, input)) => run_hook(ctx, args, name, value, input),
            }
        }
    };
    if let Some(e) = &outcome.error {
        eprintln!("mneme hook {}: {e}", name.as_str());
    }
    if args.context_only {
        outln!("{}", outcome.context.clone().unwrap_or_default());
    } else {
        outln!("{}", serde_json::to_string(&outcome)?);
    }
    Ok(())
}

fn run_hook(ctx: &Invocation, args: &HookArgs, name: HookName, value: serde_json::Value, input: HookInput) -> HookOutcome {
    if !args.local
        && let Some(d) = running_daemon(&ctx.data_dir)
    {
        let timeout = Duration::from_secs(10);
        let path = format!("/v1/hooks/{}", name.as_str());
        match runtime().and_then(|rt| rt.block_on(call(&d, reqwest::Method::POST, &path, Some(&value), timeout))) {
            Ok(v) => match serde_json::from_value::<RemoteOutcome>(v) {
                Ok(o) => return o.into_outcome(name),
                Err(e) => tracing::debug!(error = %e, "unexpected hook answer; handling locally"),
            },
            Err(e) => eprintln!("mneme hook: daemon unavailable ({e:#}); handling locally"),
        }
    }
    if let Err(e) = std::fs::create_dir_all(&ctx.data_dir) {
        return HookOutcome {
            hook: Some(name),
            error: Some(format!("cannot create {}: {e}", ctx.data_dir.display())),
            ..HookOutcome::default()
        };
    }
    match ctx.open(true) {
        Err(e) => HookOutcome { hook: Some(name), error: Some(format!("{e:#}")), ..HookOutcome::default() },
        Ok(service) => {
            let hooks = Hooks::new(Ops::new(Arc::new(service), false), ctx.config.hooks.clone());
            let local = Principal::internal("local", Access::owner(), Sensitivity::Critical);
            // No daemon: no consolidation buffer (regex facts were extracted already).
            hooks.handle(&local, name, input, &mut Vec::new())
        }
    }
}

#[derive(Debug, Deserialize)]
struct RemoteOutcome {
    context: Option<String>,
    #[serde(default)]
    record_ids: Vec<mneme_core::RecordId>,
    error: Option<String>,
}

impl RemoteOutcome {
    fn into_outcome(self, name: HookName) -> HookOutcome {
        HookOutcome { hook: Some(name), context: self.context, record_ids: self.record_ids, error: self.error }
    }
}

/// Recall through a running daemon; `None` when none runs.
pub fn remote_recall(ctx: &Invocation, request: &RetrieveRequest) -> Result<Option<Vec<Hit>>> {
    let Some(d) = running_daemon(&ctx.data_dir) else { return Ok(None) };
    let body = serde_json::to_value(request)?;
    let v = runtime()?.block_on(call(&d, reqwest::Method::POST, "/v1/retrieve", Some(&body), Duration::from_secs(10)))?;
    let hits: Vec<Hit> = serde_json::from_value(v["hits"].clone()).context("unexpected answer from the daemon")?;
    Ok(Some(hits))
}
