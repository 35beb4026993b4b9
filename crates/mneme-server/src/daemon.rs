//! `mneme serve`: binds both listeners, opens the store, serves gRPC and HTTP, runs the
//! background jobs, and shuts down in order.
//!
//! Start: bind (port 0 allowed) → check the security rule (non-loopback needs keys) →
//! open the store → write `daemon.json` → serve. Shutdown, on the signal: stop accepting
//! and let in-flight requests finish (up to `server.shutdown_grace`) → stop the timers →
//! a last consolidation cycle over the buffer → remove `daemon.json` → close the store.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use jiff::Timestamp;
use mneme_core::{Clock, Sensitivity, SystemClock};
use mneme_service::{Access, MemoryService};
use mneme_store::StoreOptions;
use serde::{Deserialize, Serialize};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::config::MnemeConfig;
use mneme_agent::consolidate::Consolidator;
use mneme_agent::hooks::Hooks;
use mneme_llm::LlmClient;
use mneme_service::{Ops, Principal};

use crate::app::App;
use crate::auth::Auth;
use crate::grpc::GrpcApi;
use crate::metrics::Registry;
use crate::pb;
use crate::serve::{ConnectionLimits, Gate, Protocol};

/// Written next to the store while the daemon runs; `mneme status/down/recall` read it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DaemonFile {
    pub pid: u32,
    pub grpc_addr: String,
    pub http_addr: String,
    pub started_at: Timestamp,
    pub version: String,
    /// Whether both listeners speak TLS (clients then use `https://`).
    #[serde(default)]
    pub tls: bool,
}

impl DaemonFile {
    pub fn read(path: &std::path::Path) -> Option<Self> {
        std::fs::read_to_string(path).ok().and_then(|t| serde_json::from_str(&t).ok())
    }
}

#[derive(Debug)]
pub struct DaemonOptions {
    pub config: MnemeConfig,
    /// SQLite: the store file. With `postgres`, only where the data directory is (its side
    /// files and the workspace's default place).
    pub store: StoreOptions,
    /// The store on PostgreSQL, instead of the SQLite file.
    pub postgres: Option<mneme_store::PgOptions>,
    /// Where to write `daemon.json`; `None` for embedded (test) daemons.
    pub daemon_file: Option<PathBuf>,
    pub clock: Arc<dyn Clock>,
    /// The environment the daemon may consult (`key_env` keys, `MNEME_WORKSPACE`): the
    /// binary passes the process's, tests their own. This crate never reads the process
    /// environment itself.
    pub env: BTreeMap<String, String>,
}

impl DaemonOptions {
    pub fn new(config: MnemeConfig, store: StoreOptions) -> Self {
        DaemonOptions { config, store, postgres: None, daemon_file: None, clock: Arc::new(SystemClock), env: BTreeMap::new() }
    }
}

/// A started daemon.
#[derive(Debug)]
pub struct Daemon {
    pub app: Arc<App>,
    shutdown: watch::Sender<bool>,
    task: JoinHandle<()>,
}

/// Each workspace-index pass embeds chunks for at most this long, behind queries: a first
/// pass over a large workspace would otherwise hold the index job for minutes.
const EMBED_PASS: mneme_agent::file_index::Embedding =
    mneme_agent::file_index::Embedding { background: true, budget: Some(Duration::from_secs(5)) };

fn is_loopback(addr: &SocketAddr) -> bool {
    addr.ip().is_loopback()
}

/// Why the daemon did not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The API keys or principals were refused (a key variable unset, a public address
    /// without keys).
    #[error("{0}")]
    Keys(String),
    /// An address could not be bound.
    #[error("cannot listen on {addr} ({listener}): {source}")]
    Listen {
        addr: SocketAddr,
        listener: &'static str,
        #[source]
        source: std::io::Error,
    },
    /// TLS was refused: a public address in plain text, or certificate files that do not
    /// load.
    #[error("{0}")]
    Tls(String),
    /// The workspace settings or the daemon file were refused.
    #[error(transparent)]
    Workspace(#[from] mneme_workspace::WorkspaceError),
    /// The store could not be opened (missing, wrong key, too new, busy, unreachable).
    #[error(transparent)]
    Store(#[from] mneme_service::ServiceError),
    /// A part of the daemon itself failed to start (a worker, gRPC reflection).
    #[error("{0}")]
    Internal(String),
}

impl StartError {
    /// Its class on every surface (`mneme serve` exits with its code).
    pub fn kind(&self) -> mneme_core::ErrorKind {
        match self {
            StartError::Keys(_) | StartError::Tls(_) | StartError::Listen { .. } => mneme_core::ErrorKind::Config,
            StartError::Workspace(e) => e.kind(),
            StartError::Store(e) => e.kind(),
            StartError::Internal(_) => mneme_core::ErrorKind::Unavailable,
        }
    }
}

/// Starts the daemon; returns once both listeners are bound and the store is open.
pub async fn start(options: DaemonOptions) -> Result<Daemon, StartError> {
    let DaemonOptions { config, store, postgres, daemon_file, clock, env } = options;
    let fd_limit = crate::serve::raise_fd_limit();
    match fd_limit {
        Some((now, before)) if now > before => tracing::info!(limit = now, was = before, "raised the open-file limit"),
        Some((now, _)) => tracing::info!(limit = now, "open-file limit"),
        None => {}
    }
    if let Some((now, _)) = fd_limit
        && now < config.server.max_connections as u64 + FD_RESERVE
    {
        tracing::warn!(
            limit = now,
            max_connections = config.server.max_connections,
            "the open-file limit leaves little room beyond server.max_connections; accepting may fail under load (raise `ulimit -n` or lower server.max_connections)"
        );
    }
    let grpc_want = config.server.grpc_addr;
    let http_want = config.server.http_addr;
    let auth = Auth::from_config(&config, is_loopback(&grpc_want) && is_loopback(&http_want), &|name| env.get(name).cloned())
        .map_err(StartError::Keys)?;
    config.plaintext_rule().map_err(StartError::Tls)?;
    let tls = crate::tls::ServerTls::from_config(&config.server).map_err(StartError::Tls)?;
    if tls.is_none() && !config.loopback_only() {
        tracing::warn!(
            grpc = %grpc_want,
            http = %http_want,
            "serving a non-loopback address in PLAIN TEXT: [server] plaintext_behind_proxy = true says a proxy in front terminates TLS; \
             without one, API keys and memories cross the network readable"
        );
    }
    let listen = |addr, listener| move |source| StartError::Listen { addr, listener, source };
    let grpc_listener = TcpListener::bind(grpc_want).await.map_err(listen(grpc_want, "gRPC"))?;
    let http_listener = TcpListener::bind(http_want).await.map_err(listen(http_want, "HTTP"))?;
    let grpc_addr = grpc_listener.local_addr().map_err(listen(grpc_want, "gRPC"))?;
    let http_addr = http_listener.local_addr().map_err(listen(http_want, "HTTP"))?;

    let service_config = config.service();
    let readers = config.server.read_connections;
    let data_dir = store.path.parent().map(std::path::Path::to_path_buf).unwrap_or_default();
    let workspace = {
        let from_env = env.get("MNEME_WORKSPACE").map(std::ffi::OsStr::new);
        let dir = mneme_workspace::config::resolve_dir(None, from_env, &config.workspace, &data_dir);
        config.workspace.settings(dir)?
    };
    // Leftovers of writers killed mid-write (an hour old: no live writer's).
    for path in mneme_workspace::atomic::sweep_stale_temp_files(&workspace.dir, Duration::from_secs(3600)) {
        tracing::info!(path = %path.display(), "removed a stale temporary file from the workspace");
    }
    let embedding = config.clone();
    let clock_for_service = clock.clone();
    let model_home = data_dir.clone();
    let service = tokio::task::spawn_blocking(move || {
        let mut service = match postgres {
            Some(pg) => MemoryService::open_postgres(pg, store.path.clone(), service_config, clock_for_service),
            None => MemoryService::open(store, service_config, clock_for_service),
        }?;
        service.add_readers(readers)?;
        // No model (or a broken one) never stops the daemon: retrieval is lexical-only.
        match mneme_embed::choose(&embedding.embedding, &model_home) {
            Ok(mneme_embed::Choice::Model(model)) => {
                let id = model.model_id().to_string();
                match service.enable_embeddings(model, embedding.embedding.index) {
                    Ok(n) => tracing::info!(model = %id, vectors = n, "embeddings enabled"),
                    Err(e) => tracing::warn!(error = %e, "embeddings disabled; retrieval is lexical-only"),
                }
            }
            Ok(mneme_embed::Choice::LexicalOnly(why)) => tracing::info!("retrieval is lexical-only: {why}"),
            Err(e) => tracing::warn!(error = %e, "the embedding model cannot be loaded; retrieval is lexical-only"),
        }
        Ok::<_, StartError>(service)
    })
    .await
    .map_err(|e| StartError::Internal(format!("the store's opener failed: {e}")))??;
    let service = Arc::new(service);
    let watch = (service.embedding_model().is_none() && config.embedding.provider == mneme_embed::EmbeddingProvider::Local)
        .then(|| model_watch(config.embedding.clone(), data_dir.clone()));
    let embedder = service.spawn_embedder(config.embedding.batch_size, Duration::from_secs(30), watch, |e| {
        tracing::warn!(error = %e, "background embedding failed; retrying in 30 s");
    });
    let ingestor = crate::app::Ingestor::start(service.clone());
    let ops = Ops::new(service, auth.requires_keys());
    // Consolidation writes with its own full-access principal: it only ever writes facts
    // with the sensitivity and scope of the messages they came from.
    let internal = Arc::new(Principal::internal("mneme", Access::owner(), Sensitivity::Critical));
    let llm = Arc::new(LlmClient::new(config.llm_settings()));
    let reflector = Arc::new(
        mneme_reflect::engine::Reflector::new(
            config.reflection.clone(),
            Some(llm.clone()),
            Some(mneme_reflect::engine::Exec::Handle(tokio::runtime::Handle::current())),
        )
        .with_env(|var| env.get(var).cloned())
        .with_inner(config.inner.clone()),
    );
    let relay = Arc::new(mneme_relay::Relay::new(config.relay.clone(), Some(llm.clone())));
    if let Some(warning) = relay.warning() {
        tracing::warn!("relay: {warning}");
    }
    let consolidator = Arc::new(Consolidator::new(ops.clone(), internal.clone(), &config.consolidation, llm));
    let app = Arc::new(App {
        hooks: Hooks::new(ops.clone(), config.hooks.clone()).with_workspace(workspace.clone()),
        ingestor,
        embedder: std::sync::Mutex::new(embedder),
        read_gate: tokio::sync::Semaphore::new(readers.max(1)),
        auth,
        tls: tls.clone(),
        consolidator,
        agent: mneme_agent::ops::AgentOps::new(ops.clone(), reflector, relay, workspace),
        ops,
        metrics: Registry::default(),
        passes: Default::default(),
        body_read_timeout: config.server.body_read_timeout.get(),
        internal,
        config,
        started: Instant::now(),
        started_at: clock.now(),
        grpc_addr,
        http_addr,
        supervisor: crate::app::Supervisor::from_env(&env),
    });
    if let Some(path) = &daemon_file {
        let file = DaemonFile {
            pid: std::process::id(),
            grpc_addr: grpc_addr.to_string(),
            http_addr: http_addr.to_string(),
            started_at: app.started_at,
            version: env!("CARGO_PKG_VERSION").into(),
            tls: tls.is_some(),
        };
        let text = serde_json::to_string_pretty(&file).map_err(|e| StartError::Internal(e.to_string()))?;
        mneme_workspace::atomic::write_atomic(path, text.as_bytes())?;
    }

    // Agent start (sinain §2.6, §3.2): the agent's files deployed, BOOT.md queued.
    let started = app.clone();
    if let Err(e) = tokio::task::spawn_blocking(move || agent_start(&started)).await {
        tracing::warn!(error = %e, "agent start work aborted");
    }

    let (shutdown, rx) = watch::channel(false);
    // The listeners stop on their own signal, after the health service has told its
    // watchers NOT_SERVING.
    let (stop_listeners, listeners_rx) = watch::channel(false);
    let gate = Gate::new(ConnectionLimits::from_config(&app.config), app.config.server.trusted_proxies.clone());
    let (grpc, health) = grpc_server(app.clone(), grpc_listener, gate.clone(), listeners_rx.clone()).await.map_err(StartError::Internal)?;
    let http = tokio::spawn(crate::serve::serve(
        "http",
        Protocol::Http1,
        http_listener,
        tls.clone(),
        crate::mcp::router_with_mcp(app.clone()),
        gate.clone(),
        listeners_rx,
    ));
    let jobs = spawn_jobs(app.clone(), rx.clone());
    let scheme = if tls.is_some() { "https" } else { "http" };
    tracing::info!(
        %grpc_addr,
        %http_addr,
        keys = app.auth.requires_keys(),
        tls = tls.is_some(),
        client_certificates = tls.as_ref().is_some_and(|t| t.mutual),
        console = %format!("{scheme}://{http_addr}/"),
        "mneme daemon listening"
    );
    if !app.config.hooks.enabled {
        tracing::warn!("hooks are disabled ([hooks] enabled = false): every hook answers at once and remembers nothing");
    }

    let task = tokio::spawn(shut_down(app.clone(), rx, Servers { grpc, http, jobs, health, stop_listeners }, daemon_file));
    Ok(Daemon { app, shutdown, task })
}

/// What the daemon does for the agent when it starts, each step logged and never fatal:
/// - the sync engine deploys the agent's files and regenerates the effective playbook
///   (`[workspace] sync_on_start`);
/// - `BOOT.md` (workspace root), when it has content, is queued once as a priority-1
///   dispatch for the agent's next hook (not again while an earlier one is undelivered);
/// - `gateway_start` goes in the command log.
fn agent_start(app: &App) {
    let ws = app.agent.workspace();
    if !ws.dir.join(mneme_workspace::paths::MEMORY_DIR).is_dir() {
        return;
    }
    let now = app.ops.now();
    if ws.sync_on_start {
        match mneme_workspace::deploy::sync(ws, now) {
            Ok(report) => tracing::info!(written = ?report.written(), repaired = report.repaired.is_some(), "workspace synced"),
            Err(e) => tracing::warn!(error = %e, "workspace sync at start failed"),
        }
    }
    let boot = mneme_workspace::paths::resolve(&ws.dir, BOOT_FILE).ok().and_then(|p| std::fs::read_to_string(p).ok());
    let mut queued = false;
    if let Some(text) = boot.map(|t| mneme_workspace::private::strip(&t).trim().to_string()).filter(|t| !t.is_empty()) {
        let text = format!("[BOOT.md] Start-up instructions from the workspace's BOOT.md:\n\n{text}");
        match app.ops.owner(&app.internal).and_then(|o| o.queue_dispatch("boot-md", 1, &text, now)) {
            Ok(q) => queued = q,
            Err(e) => tracing::warn!(error = %e, "BOOT.md not queued"),
        }
    }
    let entry =
        mneme_workspace::journal::CommandLogEntry::new(now, "gateway_start", "daemon", Some(serde_json::json!({ "bootQueued": queued })));
    if let Err(e) = mneme_workspace::journal::log_command(ws, &entry) {
        tracing::warn!(error = %e, "the command log was not written");
    }
}

/// The workspace file whose instructions the agent gets once per daemon start.
const BOOT_FILE: &str = "BOOT.md";

/// What `start` runs and `shutdown` stops.
struct Servers {
    grpc: JoinHandle<()>,
    http: JoinHandle<()>,
    jobs: Vec<JoinHandle<()>>,
    /// The gRPC health service's reporter and the services it reports.
    health: (tonic_health::server::HealthReporter, Vec<&'static str>),
    stop_listeners: watch::Sender<bool>,
}

/// How long gRPC health watchers get to see NOT_SERVING before the listeners close.
const NOT_SERVING_NOTICE: Duration = Duration::from_millis(200);

/// The ordered shutdown, once the signal comes: stop accepting and let in-flight requests
/// finish (up to `server.shutdown_grace`) → the timers stop (a run in progress gets one
/// more grace period) → the ingest writer drains → the embedder stops → a last
/// consolidation cycle over the buffer → `daemon.json` removed.
async fn shut_down(app: Arc<App>, mut rx: watch::Receiver<bool>, servers: Servers, daemon_file: Option<PathBuf>) {
    let Servers { grpc, http, jobs, health: (reporter, services), stop_listeners } = servers;
    let _ = rx.wait_for(|stop| *stop).await;
    // Health watchers (membrane's clients, load balancers) hear NOT_SERVING first, rather
    // than a stream cut.
    reporter.set_service_status("", tonic_health::ServingStatus::NotServing).await;
    for service in services {
        reporter.set_service_status(service, tonic_health::ServingStatus::NotServing).await;
    }
    tokio::time::sleep(NOT_SERVING_NOTICE).await;
    let _ = stop_listeners.send(true);
    tracing::info!("shutting down: finishing in-flight requests");
    let grace = app.config.server.shutdown_grace.get();
    let servers = async {
        let _ = grpc.await;
        let _ = http.await;
    };
    if tokio::time::timeout(grace, servers).await.is_err() {
        tracing::warn!(grace_secs = grace.as_secs_f64(), "requests still running after the grace period; closing anyway");
    }
    // The timers stop at their next tick; a run in progress (a consolidation cycle
    // waiting on the LLM) gets the grace period to finish, then is cancelled (a
    // cancelled cycle puts its messages back for the flush below).
    let deadline = tokio::time::Instant::now() + grace;
    for mut job in jobs {
        if tokio::time::timeout_at(deadline, &mut job).await.is_err() {
            tracing::warn!("a background job was still running after the grace period; cancelling it");
            job.abort();
        }
    }
    app.ingestor.stop().await;
    let embedder = app.embedder.lock().unwrap_or_else(|p| p.into_inner()).take();
    if let Some(handle) = embedder {
        // Waits for the batch in flight; its vectors are committed or found again.
        let _ = tokio::task::spawn_blocking(move || handle.stop()).await;
    }
    if app.config.consolidation.enabled {
        // Always through the cycle lock: this also waits for a cycle a flush hook
        // started in the background.
        tracing::info!(messages = app.consolidator.buffered(), "flushing the consolidation buffer");
        // The LLM gets one more grace period at most; regex facts are applied anyway.
        let report = app.consolidator.run_cycle_until(Some(tokio::time::Instant::now() + grace)).await;
        if report.messages > 0 {
            app.metrics.job("consolidation", report.errors.is_empty());
        }
    }
    if let Some(path) = &daemon_file {
        // Only remove our own file (a newer daemon may have replaced it).
        if DaemonFile::read(path).is_some_and(|f| f.pid == std::process::id()) {
            let _ = std::fs::remove_file(path);
        }
    }
    tracing::info!("stopped");
}

/// The health reporter and the services it reports, for the shutdown's NOT_SERVING.
type Health = (tonic_health::server::HealthReporter, Vec<&'static str>);

async fn grpc_server(
    app: Arc<App>,
    listener: TcpListener,
    gate: Arc<Gate>,
    rx: watch::Receiver<bool>,
) -> Result<(JoinHandle<()>, Health), String> {
    let limit = app.config.server.max_request_bytes;
    let (reporter, health) = tonic_health::server::health_reporter();
    reporter.set_serving::<pb::memory_server::MemoryServer<GrpcApi>>().await;
    reporter.set_serving::<pb::hooks_server::HooksServer<GrpcApi>>().await;
    let membrane_on = app.config.membrane.enabled;
    let membrane_limit = app.config.membrane.max_message_bytes;
    // Reflection lists membrane's own service only when it is served.
    let reflection = || {
        let builder = tonic_reflection::server::Builder::configure()
            .register_encoded_file_descriptor_set(pb::FILE_DESCRIPTOR_SET)
            .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET);
        if membrane_on { builder.register_encoded_file_descriptor_set(crate::membrane_pb::FILE_DESCRIPTOR_SET) } else { builder }
    };
    let reflection_v1 = reflection().build_v1().map_err(|e| e.to_string())?;
    let reflection_v1alpha = reflection().build_v1alpha().map_err(|e| e.to_string())?;
    let membrane = crate::membrane::MembraneApi { app: app.clone() };
    let guard = axum::middleware::from_fn_with_state(app.clone(), crate::grpc::authenticate_first);
    let tls = app.tls.clone();
    let api = GrpcApi { app };
    let memory = pb::memory_server::MemoryServer::new(api.clone()).max_decoding_message_size(limit);
    let hooks = pb::hooks_server::HooksServer::new(api).max_decoding_message_size(limit);
    let mut routes = tonic::service::Routes::new(health)
        .add_service(reflection_v1)
        .add_service(reflection_v1alpha)
        .add_service(memory)
        .add_service(hooks);
    if membrane_on {
        reporter.set_service_status(crate::membrane::SERVICE, tonic_health::ServingStatus::Serving).await;
        routes = routes.add_service(
            crate::membrane_pb::membrane_service_server::MembraneServiceServer::new(membrane).max_decoding_message_size(membrane_limit),
        );
    }
    let routes = routes.prepare().into_axum_router().layer(guard);
    let mut services = vec!["mneme.v1.Memory", "mneme.v1.Hooks"];
    if membrane_on {
        services.push(crate::membrane::SERVICE);
    }
    Ok((tokio::spawn(crate::serve::serve("grpc", Protocol::Http2, listener, tls, routes, gate, rx)), (reporter, services)))
}

/// The consolidation timer and the decay/prune sweep.
fn spawn_jobs(app: Arc<App>, rx: watch::Receiver<bool>) -> Vec<JoinHandle<()>> {
    let mut jobs = Vec::new();
    let poll = app.config.server.tls_reload_poll.get();
    if let Some(tls) = app.tls.clone()
        && !poll.is_zero()
    {
        // Certificates rotate without a restart: new connections get the new files.
        jobs.push(every_until(poll, rx.clone(), move || {
            let tls = tls.clone();
            async move {
                if tls.changed() {
                    reload_tls(&tls, "the certificate files changed");
                }
            }
        }));
    }
    if app.config.consolidation.enabled {
        let app = app.clone();
        let every = app.config.consolidation.interval.get();
        jobs.push(every_until(every, rx.clone(), move || {
            let app = app.clone();
            async move {
                if runs(&app, "consolidation").await {
                    app.consolidate().await;
                } else {
                    app.passes.done("consolidation");
                }
            }
        }));
    }
    if app.agent.workspace().scheduler {
        // The first pass runs right away: tasks whose slots passed while the daemon was
        // down run once now (the due rule never replays missed slots).
        let app = app.clone();
        jobs.push(every_until_from(Duration::from_millis(200), SCHEDULER_TICK, rx.clone(), move || {
            let app = app.clone();
            async move {
                if !runs(&app, "scheduler").await {
                    app.passes.done("scheduler");
                    return;
                }
                let pass = blocking_job(&app, "scheduler", |job| {
                    mneme_agent::scheduler::run_due(
                        &job.ops.owner(&job.internal)?,
                        job.agent.workspace(),
                        job.agent.reflector(),
                        job.ops.now(),
                        None,
                    )
                });
                for run in pass.await.map(|pass| pass.ran).unwrap_or_default() {
                    tracing::info!(task = %run.task, ok = run.ok, detail = %run.detail, "scheduled task ran");
                    app.metrics.job("scheduler", run.ok);
                }
                app.passes.done("scheduler");
            }
        }));
    }
    if app.agent.workspace().index {
        // Poll modification times (cheap: one stat per file) at half the debounce; a
        // changed file is re-indexed once it has been quiet for the debounce.
        let debounce = app.agent.workspace().reindex_debounce;
        let tick = (debounce / 2).clamp(Duration::from_millis(100), Duration::from_secs(5));
        let app = app.clone();
        jobs.push(every_until_from(Duration::from_millis(100), tick, rx.clone(), move || {
            let app = app.clone();
            async move {
                if !runs(&app, "workspace_index").await {
                    app.passes.done("workspace_index");
                    return;
                }
                let report = blocking_job(&app, "workspace_index", move |job| {
                    mneme_agent::file_index::sync(&job.ops.owner(&job.internal)?, &job.agent.workspace().dir, Some(debounce), EMBED_PASS)
                });
                if let Some(report) = report.await.filter(|r| r.changed()) {
                    if let Some(error) = &report.embed_error {
                        tracing::warn!(%error, "workspace chunks not embedded (retried at every pass)");
                    }
                    tracing::info!(
                        indexed = report.indexed.len(),
                        removed = report.removed.len(),
                        chunks = report.chunks,
                        embedded = report.embedded,
                        "workspace re-indexed"
                    );
                    app.metrics.job("workspace_index", true);
                }
                app.passes.done("workspace_index");
            }
        }));
    }
    if app.config.relay.routes {
        jobs.push(relay_loop(app.clone(), rx.clone()));
    }
    let decay = app.config.maintenance.decay_interval.get();
    let retains = !app.config.maintenance.retention.policy().is_empty();
    if !decay.is_zero() && (app.config.maintenance.prune || retains) {
        jobs.push(every_until(decay, rx, move || {
            let app = app.clone();
            async move {
                if !runs(&app, "decay").await {
                    app.passes.done("decay");
                    return;
                }
                let policy = app.config.maintenance.retention.policy();
                let prune = app.config.maintenance.prune;
                let report = blocking_job(&app, "decay", move |job| {
                    let pruned = if prune { job.ops.prune(&job.internal, None, false)?.pruned.len() } else { 0 };
                    let erased = if policy.is_empty() { 0 } else { job.ops.apply_retention(&job.internal, &policy)? };
                    Ok((pruned, erased))
                });
                if let Some((pruned, erased)) = report.await {
                    tracing::info!(pruned, erased, "decay sweep");
                    app.metrics.job("decay", true);
                }
                app.passes.done("decay");
            }
        }));
    }
    jobs
}

/// The relay's analysis loop: a tick every interval (doubled after a 429 until a success),
/// woken early when `/agent/config` changes it. An analysis kept as a record
/// (`relay.keep_analyses`) is ingested at `high` sensitivity by the daemon's principal.
fn relay_loop(app: Arc<App>, mut rx: watch::Receiver<bool>) -> JoinHandle<()> {
    tokio::spawn(async move {
        loop {
            let wait = app.agent.relay_engine().next_wait();
            tokio::select! {
                _ = tokio::time::sleep(wait) => {
                    let outcome = app.agent.relay_engine().tick(app.ops.now()).await;
                    if let mneme_relay::TickOutcome::Analysed { result } = &outcome
                        && app.agent.relay_engine().keeps_analyses()
                        && result.analysis != mneme_relay::NOTHING
                    {
                        let text = result.analysis.clone();
                        let _ = blocking_job(&app, "relay", move |job| {
                            let payload = mneme_core::Payload::Event(mneme_core::EventPayload {
                                event_kind: "relay_analysis".into(),
                                reference: None,
                                sender: Some("relay".into()),
                                text,
                                event_time: None,
                            });
                            let options = mneme_service::IngestOptions {
                                sensitivity: Some(mneme_core::Sensitivity::High),
                                tags: vec!["source:relay".into()],
                                actor: Some("mneme:relay".into()),
                                ..Default::default()
                            };
                            job.ops.ingest(&job.internal, payload, options).map(|_| ())
                        })
                        .await;
                    }
                    app.passes.done("relay");
                }
                _ = app.agent.relay_engine().changed.notified() => {}
                changed = rx.changed() => {
                    if changed.is_err() || *rx.borrow() {
                        break;
                    }
                }
            }
        }
    })
}

/// Whether this daemon runs background `job`: always on SQLite; on PostgreSQL only the
/// daemon holding the job's lease (`MemoryService::holds_job`), so every job runs once
/// across the daemons on one database and passes on when its holder dies. A lease that
/// cannot be checked is not run (logged): running twice is the worse failure.
async fn runs(app: &Arc<App>, job: &'static str) -> bool {
    let shared = app.clone();
    let held = tokio::task::spawn_blocking(move || shared.ops.owner(&shared.internal)?.holds_job(job)).await;
    match held {
        Ok(Ok(held)) => {
            if !held {
                tracing::debug!(job, "another daemon on this database runs this job");
            }
            held
        }
        Ok(Err(e)) => {
            tracing::warn!(job, error = %e, "cannot check the job's lease; not running it");
            false
        }
        Err(e) => {
            tracing::warn!(job, error = %e, "the lease check was aborted");
            false
        }
    }
}

/// Runs a background job's blocking work off the async threads. A failure (or a panic)
/// is logged and counted as a failed run of `job`; the caller reports success.
async fn blocking_job<T: Send + 'static>(
    app: &Arc<App>,
    job: &'static str,
    work: impl FnOnce(&App) -> mneme_service::ServiceResult<T> + Send + 'static,
) -> Option<T> {
    let shared = app.clone();
    let error = match tokio::task::spawn_blocking(move || work(&shared)).await {
        Ok(Ok(value)) => return Some(value),
        Ok(Err(e)) => e.to_string(),
        Err(e) => format!("aborted: {e}"),
    };
    tracing::warn!(job, %error, "background job failed");
    app.metrics.job(job, false);
    None
}

/// Descriptors the daemon needs besides its connections (store, WAL, readers, logs, model).
const FD_RESERVE: u64 = 64;

/// How often the daemon looks for due scheduled tasks (cron slots are minutes apart).
const SCHEDULER_TICK: Duration = Duration::from_secs(20);

fn every_until<F, Fut>(every: Duration, rx: watch::Receiver<bool>, job: F) -> JoinHandle<()>
where
    F: Fn() -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = ()> + Send,
{
    every_until_from(every, every, rx, job)
}

/// Runs `job` after `first`, then every `every`, until shutdown.
fn every_until_from<F, Fut>(first: Duration, every: Duration, mut rx: watch::Receiver<bool>, job: F) -> JoinHandle<()>
where
    F: Fn() -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = ()> + Send,
{
    tokio::spawn(async move {
        let mut ticker = tokio::time::interval_at(tokio::time::Instant::now() + first, every);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        loop {
            tokio::select! {
                _ = ticker.tick() => job().await,
                changed = rx.changed() => {
                    if changed.is_err() || *rx.borrow() {
                        break;
                    }
                }
            }
        }
    })
}

/// Looks for the local model a daemon started without (`mneme model install` while it
/// runs): a stat of the weights file every `model_poll`, and a load only when that file
/// is new or changed (an install moves the finished directory into place in one rename,
/// so a present file is a complete one).
fn model_watch(embedding: mneme_embed::EmbeddingConfig, data_dir: PathBuf) -> mneme_service::ModelWatch {
    let weights = mneme_embed::model_dir(&embedding, &data_dir).join("model.safetensors");
    let mut seen: Option<std::time::SystemTime> = None;
    mneme_service::ModelWatch {
        every: embedding.model_poll.get(),
        attach: Box::new(move |service| {
            let Ok(stamp) = std::fs::metadata(&weights).and_then(|m| m.modified()) else { return false };
            if seen == Some(stamp) {
                return false;
            }
            seen = Some(stamp);
            match mneme_embed::choose(&embedding, &data_dir) {
                Ok(mneme_embed::Choice::Model(model)) => {
                    let id = model.model_id().to_string();
                    match service.enable_embeddings(model, embedding.index) {
                        Ok(n) => {
                            tracing::info!(model = %id, vectors = n, "embedding model installed: embeddings enabled without a restart");
                            true
                        }
                        Err(e) => {
                            tracing::warn!(error = %e, "the new embedding model cannot be attached; retrieval stays lexical-only");
                            false
                        }
                    }
                }
                Ok(mneme_embed::Choice::LexicalOnly(_)) => false,
                Err(e) => {
                    tracing::warn!(error = %e, "the new embedding model cannot be loaded; retrieval stays lexical-only");
                    false
                }
            }
        }),
    }
}

impl Daemon {
    pub fn grpc_addr(&self) -> SocketAddr {
        self.app.grpc_addr
    }

    pub fn http_addr(&self) -> SocketAddr {
        self.app.http_addr
    }

    /// The running daemon's state (for tests and embedding programs).
    pub fn app(&self) -> &Arc<App> {
        &self.app
    }

    /// Asks the daemon to stop; [`Daemon::wait`] returns when it has.
    pub fn shutdown(&self) {
        let _ = self.shutdown.send(true);
    }

    /// A handle that can trigger the shutdown from elsewhere (a signal handler).
    pub fn shutdown_handle(&self) -> watch::Sender<bool> {
        self.shutdown.clone()
    }

    pub async fn wait(self) {
        let _ = self.task.await;
    }

    pub async fn stop(self) {
        self.shutdown();
        self.wait().await;
    }
}

/// Loads the TLS files again; a failure keeps the certificate in use (logged). `why` is
/// logged with it (`SIGHUP`).
pub fn reload_tls(tls: &crate::tls::ServerTls, why: &str) -> bool {
    match tls.reload() {
        Ok(()) => {
            tracing::info!(cert = %tls.cert_file().display(), "{why}: TLS reloaded; new connections use the new certificate");
            true
        }
        Err(e) => {
            tracing::error!(error = %e, "{why}, but TLS was not reloaded; the certificate in use stays");
            false
        }
    }
}
