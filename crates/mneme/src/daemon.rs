//! The daemon's commands: `serve` (foreground), `status`, `hook`, and the client side of
//! `recall` against a running daemon. The background daemon (`up` / `supervise` / `down`)
//! is `supervise.rs`. `daemon.json` in the data directory is written by the daemon while
//! it serves; `running_daemon` reads it and checks the daemon answers.

use std::io::Read as _;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context as _, Result, anyhow};
use mneme_agent::hooks::{HookInput, HookName, HookOutcome, Hooks};
use mneme_core::{Sensitivity, SystemClock};
use mneme_server::config::LogFormat;
use mneme_server::{DaemonFile, DaemonOptions};
use mneme_service::{Access, Hit, Ops, Principal, RetrieveRequest, ServiceError};

use crate::cli::{HookArgs, ServeArgs};
use crate::client::{DaemonClient, HookAnswer, HookCall, Loopback};
use crate::commands::Invocation;
use serde::Deserialize as _;

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

/// The daemon serving this data directory, if it is alive and answers.
pub fn running_daemon(ctx: &Invocation) -> Option<DaemonFile> {
    local_daemon(ctx, None).map(|(file, _)| file)
}

/// The daemon file of this data directory when its process is alive (not asked whether
/// it answers: the caller's first request does that).
pub fn running_daemon_file(ctx: &Invocation) -> Option<DaemonFile> {
    DaemonFile::read(&ctx.data_dir.join(DAEMON_FILE)).filter(|file| crate::supervise::pid_alive(file.pid))
}

/// The caller's API key for the daemon (`MNEME_API_KEY`), when set.
fn api_key() -> Option<String> {
    std::env::var("MNEME_API_KEY").ok().filter(|k| !k.trim().is_empty())
}

/// A [`Loopback`] connection to this data directory's daemon, when one runs serving plain
/// HTTP on loopback (with the caller's key).
pub fn local_loopback(ctx: &Invocation) -> Option<Loopback> {
    Loopback::connect(&running_daemon_file(ctx)?, api_key())
}

/// The daemon serving this data directory, if it is alive and answers, with the client
/// that asked it (sending `key` to the calls that need one).
fn local_daemon(ctx: &Invocation, key: Option<String>) -> Option<(DaemonFile, DaemonClient)> {
    let file = running_daemon_file(ctx)?;
    let client = DaemonClient::local(&ctx.config, &file.http_addr, file.tls, key).ok()?;
    let health = client.healthz()?;
    (health.pid == Some(file.pid)).then_some((file, client))
}

/// The daemon `status`, `recall`, `hook` and `mcp` call, with its client: the one
/// `[client] daemon_url` names (an error when it does not answer), else the one serving
/// this data directory, if any.
pub fn daemon_to_call(ctx: &Invocation) -> Result<Option<(DaemonFile, DaemonClient)>> {
    let key = api_key();
    let Some(url) = &ctx.config.client.daemon_url else { return Ok(local_daemon(ctx, key)) };
    let client = DaemonClient::remote(&ctx.config, url, key)?;
    let health = client.health().with_context(|| format!("the daemon at [client] daemon_url {url} does not answer"))?;
    let file = DaemonFile {
        pid: health.pid.unwrap_or(0),
        grpc_addr: health.grpc_addr.unwrap_or_else(|| "?".into()),
        http_addr: client.base().to_string(),
        started_at: jiff::Timestamp::now(),
        version: health.version.unwrap_or_else(|| "?".into()),
        tls: url.starts_with("https://"),
    };
    Ok(Some((file, client)))
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
    if let Some(d) = running_daemon(ctx) {
        return Err(anyhow::Error::new(crate::commands::ServeError(format!(
            "a mneme daemon (pid {}) already serves {} on {} / {}",
            d.pid,
            ctx.data_dir.display(),
            d.grpc_addr,
            d.http_addr
        ))));
    }
    init_logging(ctx)?;
    for name in mneme_server::config::unknown_env(std::env::vars()) {
        tracing::warn!(variable = %name, "ignoring an MNEME_* environment variable mneme does not read (a typo?); see `mneme config show`");
    }
    mneme_agent::init_tls();
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    let result = rt.block_on(async {
        let options = DaemonOptions {
            config: ctx.config.clone(),
            store: ctx.store_options(true),
            postgres: ctx.postgres(false)?,
            daemon_file: Some(ctx.data_dir.join(DAEMON_FILE)),
            clock: Arc::new(SystemClock),
            env: std::env::vars().collect(),
        };
        let daemon = mneme_server::start(options).await?;
        let stop = daemon.shutdown_handle();
        if let Some(tls) = daemon.app().tls.clone() {
            // SIGHUP: the certificate files again (they are also watched).
            let mut hangup = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())?;
            tokio::spawn(async move {
                while hangup.recv().await.is_some() {
                    mneme_server::daemon::reload_tls(&tls, "SIGHUP");
                }
            });
        }
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

/// `mneme mcp`: MCP over stdin/stdout. Beside a running daemon the tool calls go to its
/// HTTP API (with `MNEME_API_KEY`); otherwise this process runs the engine (on loopback
/// port 0, announced in `daemon.json` so other commands use it meanwhile) and the calls
/// go to its router in process. Logs go to stderr: stdout is the protocol's.
pub fn mcp(ctx: &Invocation, local: bool, user: Option<String>, tools: &str) -> Result<()> {
    let only = (tools == "memory").then_some(mneme_server::mcp::MEMORY_TOOLS);
    use mneme_server::mcp::{Door, MnemeMcp, RemoteBackend};
    init_logging(ctx)?;
    mneme_agent::init_tls();
    let key = std::env::var("MNEME_API_KEY").ok().filter(|k| !k.is_empty());
    // Asked before the runtime exists: the daemon client blocks on its own.
    let running = match if local { None } else { daemon_to_call(ctx)? } {
        Some((d, client)) => Some((d.pid, client.base().to_string(), client.fresh_http()?)),
        None => None,
    };
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    let result = rt.block_on(async {
        if let Some((pid, base, client)) = running {
            tracing::info!(pid, http = %base, "MCP over stdio, forwarding to the running daemon");
            let remote = RemoteBackend { base, key, client };
            return mneme_server::mcp::serve_stdio(MnemeMcp::new(Door::Remote(remote)).for_user(user).only_tools(only))
                .await
                .map_err(|e| anyhow!(e));
        }
        std::fs::create_dir_all(&ctx.data_dir).with_context(|| format!("cannot create {}", ctx.data_dir.display()))?;
        let mut config = ctx.config.clone();
        config.server.grpc_addr = "127.0.0.1:0".parse().expect("a literal address");
        config.server.http_addr = "127.0.0.1:0".parse().expect("a literal address");
        let options = DaemonOptions {
            config,
            store: ctx.store_options(true),
            postgres: ctx.postgres(false)?,
            daemon_file: (!local).then(|| ctx.data_dir.join(DAEMON_FILE)),
            clock: Arc::new(SystemClock),
            env: std::env::vars().collect(),
        };
        let daemon = mneme_server::start(options).await?;
        let app = daemon.app().clone();
        let authorization = key.and_then(|k| axum_header(&format!("Bearer {k}")));
        let door = Door::Router { router: mneme_server::mcp::api_router(app.clone()), authorization };
        let served = mneme_server::mcp::serve_stdio(MnemeMcp::new(door).for_user(user).only_tools(only)).await;
        daemon.stop().await;
        served.map_err(|e| anyhow!(e))
    });
    rt.shutdown_timeout(Duration::from_secs(5));
    result
}

fn axum_header(value: &str) -> Option<mneme_server::mcp::HeaderValue> {
    mneme_server::mcp::HeaderValue::from_str(value).ok()
}

pub fn status(ctx: &Invocation) -> Result<()> {
    let Some((_, client)) = daemon_to_call(ctx)? else {
        if ctx.json {
            outln!("{}", serde_json::json!({ "running": false }));
        }
        return Err(NotRunning.into());
    };
    let status = client.status()?;
    // Under `mneme up`, the supervisor beside it: how often it restarted the daemon.
    let supervisor = crate::supervise::supervisor(&ctx.data_dir);
    if ctx.json {
        let mut json = status.json.clone();
        if let (Some(sup), Some(o)) = (&supervisor, json.as_object_mut()) {
            o.insert(
                "supervisor".into(),
                serde_json::json!({ "pid": sup.pid, "restarts": sup.total_restarts, "restarts_last_5m": sup.restarts }),
            );
        }
        outln!("{json}");
        return Ok(());
    }
    let s = status.view;
    let or_unknown = |v: &Option<String>| v.clone().unwrap_or_else(|| "?".into());
    outln!("mneme daemon: running (pid {}, version {})", s.pid, or_unknown(&s.version));
    outln!("  gRPC {}   HTTP {}", or_unknown(&s.grpc_addr), or_unknown(&s.http_addr));
    let up = s.uptime_seconds;
    outln!("  uptime {}h {:02}m {:02}s (since {})", up / 3600, up / 60 % 60, up % 60, or_unknown(&s.started_at));
    if let Some(sup) = &supervisor {
        let plural = if sup.total_restarts == 1 { "" } else { "s" };
        outln!("  supervisor pid {}: {} restart{plural} ({} in the last 5 minutes)", sup.pid, sup.total_restarts, sup.restarts);
    }
    outln!("  store {}{}", or_unknown(&s.store), if s.encrypted { " (encrypted)" } else { "" });
    let types: Vec<String> = s.records_by_type.iter().map(|(k, v)| format!("{k}={v}")).collect();
    outln!("  records {} ({})", s.total_records, types.join(" "));
    match &s.last_consolidation {
        None => outln!("  last consolidation: never ({} messages buffered)", s.consolidation_buffered),
        Some(last) => outln!(
            "  last consolidation: {} ({} messages, {} regex + {} LLM facts, LLM {})",
            or_unknown(&last.at),
            last.messages,
            last.regex_facts,
            last.llm_facts,
            or_unknown(&last.llm)
        ),
    }
    outln!("  errors in the last hour: {}", s.errors_last_hour);
    Ok(())
}

// ---- hooks and remote recall ------------------------------------------------------------------

/// `mneme hook NAME`: the event JSON on stdin; the outcome JSON on stdout. Never fails the
/// caller: problems are in the outcome's `error` (and on stderr), the exit status is 0.
pub fn hook(ctx: &Invocation, args: &HookArgs) -> Result<()> {
    let Some(name) = HookName::parse(&args.name) else {
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
        && let Some(answer) = through_loopback(ctx, name, &value)
    {
        return answer;
    }
    if !args.local {
        let answer = match daemon_to_call(ctx) {
            Ok(Some((_, client))) => Some(client.hook(name, &value)),
            Ok(None) => None,
            Err(e) => Some(Err(e)),
        };
        match answer {
            None => {}
            Some(Ok(Some(answer))) => return answer.into_outcome(name),
            // Not an outcome (a daemon of another version): handled here instead.
            Some(Ok(None)) => {}
            Some(Err(e)) => eprintln!("mneme hook: daemon unavailable ({e:#}); handling locally"),
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
            // The daemon's hooks keep the workspace (its playbook, curated memory, inner
            // state and journals); so do these, so one block comes out either way.
            let mut hooks = Hooks::new(Ops::new(Arc::new(service), false), ctx.config.hooks.clone());
            match crate::workspace::settings(ctx, None) {
                Ok(settings) => hooks = hooks.with_workspace(settings),
                Err(e) => eprintln!("mneme hook: the workspace is left out ({e:#})"),
            }
            let local = Principal::internal("local", Access::owner(), Sensitivity::Critical);
            // No daemon: no consolidation buffer (regex facts were extracted already).
            hooks.handle(&local, name, input, &mut Vec::new())
        }
    }
}

/// A hook through this data directory's daemon over [`Loopback`] (plain HTTP on loopback,
/// no `DaemonClient` to set up), when no `[client] daemon_url` names another. `None` when
/// it cannot be asked that way or does not answer with an outcome: then `DaemonClient`
/// (TLS) or the store itself.
fn through_loopback(ctx: &Invocation, name: HookName, value: &serde_json::Value) -> Option<HookOutcome> {
    if ctx.config.client.daemon_url.is_some() {
        return None;
    }
    match local_loopback(ctx)?.hook(name, value) {
        HookCall::Answered(answer) => HookAnswer::deserialize(answer).ok().map(|a| a.into_outcome(name)),
        HookCall::NotTaken(None) => None,
        HookCall::NotTaken(Some(why)) => {
            eprintln!("mneme hook: the daemon did not take the hook ({why}); handling locally");
            None
        }
        HookCall::Failed(why) => {
            eprintln!("mneme hook: daemon unavailable ({why}); handling locally");
            None
        }
    }
}

/// `mneme reindex` while a daemon runs: the daemon's own pipeline embeds the pending
/// records (and attaches a model installed after it started, within
/// `embedding.model_poll`); this follows its progress through `status` until nothing is
/// pending. Fails when the daemon has no model to embed with, or makes no progress for
/// two minutes.
pub fn wait_for_embeddings(ctx: &Invocation, d: &DaemonFile) -> Result<()> {
    let client = DaemonClient::for_daemon(&ctx.config, d)?;
    let poll = std::time::Duration::from_millis(500);
    let patience = std::time::Duration::from_secs(120);
    let show = !ctx.json && std::io::IsTerminal::is_terminal(&std::io::stderr());
    let started = std::time::Instant::now();
    let mut last_change = started;
    let mut last: Option<(u64, u64)> = None;
    let mut said_waiting = false;
    loop {
        let status = client.status()?.json;
        let embedding = &status["embedding"];
        if embedding.is_null() {
            let installed = mneme_embed::verify_model_dir(&ctx.model_dir()).is_ok();
            let wait = ctx.config.embedding.provider == mneme_embed::EmbeddingProvider::Local && installed;
            if !wait || last_change.elapsed() > ctx.config.embedding.model_poll.get() + std::time::Duration::from_secs(30) {
                let why = if installed {
                    "it has not attached the installed model (see its log)".to_string()
                } else {
                    format!("no embedding model is installed at {} (run `mneme model install`)", ctx.model_dir().display())
                };
                return Err(anyhow::Error::new(ServiceError::Precondition(format!(
                    "nothing to reindex with: the daemon (pid {}) runs lexical-only: {why}",
                    d.pid
                ))));
            }
            if !said_waiting && !ctx.json {
                eprintln!(
                    "the daemon (pid {}) attaches the installed model within {}; waiting ...",
                    d.pid, ctx.config.embedding.model_poll
                );
                said_waiting = true;
            }
            std::thread::sleep(poll);
            continue;
        }
        let embedded = embedding["embedded"].as_u64().unwrap_or(0);
        let pending = embedding["pending"].as_u64().unwrap_or(0);
        if last != Some((embedded, pending)) {
            last = Some((embedded, pending));
            last_change = std::time::Instant::now();
            let line = format!("the daemon (pid {}) is embedding: {embedded} of {} live records have vectors", d.pid, embedded + pending);
            if show {
                eprint!("\r{line}   ");
            } else if !ctx.json {
                eprintln!("{line}");
            }
        }
        if pending == 0 {
            if show {
                eprintln!();
            }
            if ctx.json {
                outln!("{}", serde_json::json!({ "embedded_by": "daemon", "pid": d.pid, "status": embedding }));
            } else {
                let model = embedding["model"].as_str().unwrap_or("?");
                outln!("every live record has a vector from {model} ({embedded}), embedded by the running daemon (pid {})", d.pid);
            }
            return Ok(());
        }
        if last_change.elapsed() > patience {
            return Err(anyhow!(
                "the daemon (pid {}) made no embedding progress for {} s ({pending} records pending); see its log",
                d.pid,
                patience.as_secs()
            ));
        }
        std::thread::sleep(poll);
    }
}

/// Recall through a running daemon; `None` when none runs.
pub fn remote_recall(ctx: &Invocation, request: &RetrieveRequest) -> Result<Option<Vec<Hit>>> {
    let Some((_, client)) = daemon_to_call(ctx)? else { return Ok(None) };
    Ok(Some(client.retrieve(request)?))
}
