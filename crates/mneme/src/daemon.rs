//! The daemon's commands: `serve` (foreground), `status`, `hook`, and the client side of
//! `recall` against a running daemon. The background daemon (`up` / `supervise` / `down`)
//! is `supervise.rs`. `daemon.json` in the data directory is written by the daemon while
//! it serves; `running_daemon` reads it and checks the daemon answers.

use std::io::Read as _;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context as _, Result, anyhow};
use mneme_agent::config::LogFormat;
use mneme_agent::hooks::{HookInput, HookName, HookOutcome, Hooks};
use mneme_core::{Sensitivity, SystemClock};
use mneme_server::{DaemonFile, DaemonOptions};
use mneme_service::{Access, ErrorKind, Hit, Ops, Principal, RetrieveRequest};
use serde::Deserialize;

use crate::cli::{HookArgs, ServeArgs};
use crate::commands::Invocation;

pub const DAEMON_FILE: &str = "daemon.json";

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

pub(crate) fn runtime() -> Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_current_thread().enable_all().build()?)
}

fn client(timeout: Duration) -> reqwest::Client {
    reqwest::Client::builder().timeout(timeout).connect_timeout(Duration::from_millis(500)).build().unwrap_or_default()
}

/// `/healthz` at `addr`, if a mneme daemon answers there.
pub(crate) async fn healthz(addr: &str) -> Option<serde_json::Value> {
    let body: serde_json::Value =
        client(Duration::from_secs(1)).get(format!("http://{addr}/healthz")).send().await.ok()?.json().await.ok()?;
    (body["service"] == "mneme").then_some(body)
}

/// The daemon serving this data directory, if it is alive and answers.
pub fn running_daemon(data_dir: &Path) -> Option<DaemonFile> {
    let file = DaemonFile::read(&data_dir.join(DAEMON_FILE))?;
    if !crate::supervise::pid_alive(file.pid) {
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

pub(crate) async fn termination() {
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
