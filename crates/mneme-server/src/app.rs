//! `App`: the daemon's shared state, and the one path every request takes — authenticate,
//! rate-limit, run the operation on a blocking thread, record metrics.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use jiff::Timestamp;
use mneme_core::{MemoryRecord, Payload};
use mneme_reflect::ReflectError;
use mneme_service::{IngestOptions, MemoryService, ServiceResult};
use serde::Serialize;

use mneme_service::Principal;

use crate::auth::{Auth, Caller, Credentials};
use crate::config::MnemeConfig;
use crate::error::{ApiError, ApiResult};
use crate::metrics::Registry;
use crate::op::Operation;
use mneme_agent::consolidate::{Consolidator, CycleReport};
use mneme_agent::hooks::{HookInput, HookName, HookOutcome, Hooks};
use mneme_service::Ops;

/// The ingest writer: one thread that takes every queued ingest RPC and commits them
/// together (`MemoryService::ingest_each`), so concurrent ingests cost one transaction and
/// no blocking-pool hand-off each.
#[derive(Debug)]
pub struct Ingestor {
    tx: tokio::sync::mpsc::Sender<Message>,
    thread: std::sync::Mutex<Option<std::thread::JoinHandle<()>>>,
}

type IngestJob = (Payload, IngestOptions, tokio::sync::oneshot::Sender<ServiceResult<MemoryRecord>>);

#[derive(Debug)]
enum Message {
    Ingest(Box<IngestJob>),
    /// Finish what is queued, then let go of the store.
    Stop,
}

impl Ingestor {
    /// Most ingests committed in one transaction.
    const MAX_BATCH: usize = 256;

    pub fn start(service: Arc<MemoryService>) -> Self {
        let (tx, mut rx) = tokio::sync::mpsc::channel::<Message>(4096);
        let thread = std::thread::Builder::new()
            .name("mneme-ingest".into())
            .spawn(move || {
                let mut stop = false;
                while !stop && let Some(first) = rx.blocking_recv() {
                    let mut jobs = Vec::new();
                    let mut next = Some(first);
                    while let Some(message) = next.take() {
                        match message {
                            Message::Ingest(job) => jobs.push(*job),
                            Message::Stop => stop = true,
                        }
                        if stop || jobs.len() >= Self::MAX_BATCH {
                            break;
                        }
                        next = rx.try_recv().ok();
                    }
                    if jobs.is_empty() {
                        continue;
                    }
                    let (items, replies): (Vec<_>, Vec<_>) = jobs.into_iter().map(|(p, o, r)| ((p, o), r)).unzip();
                    for (result, reply) in service.ingest_each(items).into_iter().zip(replies) {
                        let _ = reply.send(result);
                    }
                }
            })
            .expect("the ingest thread starts");
        Ingestor { tx, thread: std::sync::Mutex::new(Some(thread)) }
    }

    /// Stops the writer after what is queued and waits for it (shutdown).
    pub async fn stop(&self) {
        let _ = self.tx.send(Message::Stop).await;
        let handle = self.thread.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(h) = handle {
            let _ = tokio::task::spawn_blocking(move || h.join()).await;
        }
    }

    pub async fn ingest(&self, payload: Payload, options: IngestOptions) -> ApiResult<MemoryRecord> {
        let (reply, answer) = tokio::sync::oneshot::channel();
        self.tx
            .send(Message::Ingest(Box::new((payload, options, reply))))
            .await
            .map_err(|_| ApiError::Unavailable("the ingest writer has stopped".into()))?;
        Ok(answer.await.map_err(|_| ApiError::Unavailable("the ingest writer has stopped".into()))??)
    }
}

/// Read-only operations: they wait at a fair (FIFO) gate sized to the read connections, so
/// under load they are served in arrival order instead of racing for connections.
#[derive(Debug)]
pub struct App {
    pub ops: Ops,
    pub ingestor: Ingestor,
    /// The background embedding pipeline, taken and stopped at shutdown.
    pub embedder: std::sync::Mutex<Option<mneme_service::EmbedderHandle>>,
    pub read_gate: tokio::sync::Semaphore,
    pub auth: Auth,
    /// TLS on both listeners (`[server] tls_cert_file`), reloadable.
    pub tls: Option<Arc<crate::tls::ServerTls>>,
    pub hooks: Hooks,
    pub consolidator: Arc<Consolidator>,
    /// The door for the workspace's engines (reflection, inner life, modules, the relay),
    /// with the reflection engine, the relay and the workspace settings they share.
    pub agent: mneme_agent::ops::AgentOps,
    pub metrics: Registry,
    pub passes: JobPasses,
    pub config: MnemeConfig,
    /// `server.body_read_timeout`, parsed once (every HTTP request with a body waits on it).
    pub body_read_timeout: std::time::Duration,
    /// The daemon's own principal (unrestricted): background jobs act as it.
    pub internal: Arc<Principal>,
    pub started: Instant,
    pub started_at: Timestamp,
    pub grpc_addr: SocketAddr,
    pub http_addr: SocketAddr,
    /// The supervisor that started this daemon (`mneme up`), if one did.
    pub supervisor: Option<Supervisor>,
}

/// The supervisor (`mneme up`'s `mneme supervise`) that started the daemon, as it told the
/// daemon in `MNEME_SUPERVISOR_PID` and `MNEME_SUPERVISOR_RESTARTS` (membrane §4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Supervisor {
    pub pid: u32,
    /// How often the supervisor restarted the daemon after a crash before starting this one.
    pub restarts: u64,
}

impl Supervisor {
    /// The variable naming the supervisor's pid.
    pub const PID_VAR: &str = "MNEME_SUPERVISOR_PID";
    /// The variable carrying its restart count.
    pub const RESTARTS_VAR: &str = "MNEME_SUPERVISOR_RESTARTS";

    /// From the environment the binary passes on; `None` unless both variables are numbers.
    pub fn from_env(env: &std::collections::BTreeMap<String, String>) -> Option<Supervisor> {
        let number = |name: &str| env.get(name).and_then(|v| v.trim().parse::<u64>().ok());
        Some(Supervisor { pid: u32::try_from(number(Self::PID_VAR)?).ok()?, restarts: number(Self::RESTARTS_VAR)? })
    }
}

/// Finished passes of each background job (`consolidation`, `scheduler`,
/// `workspace_index`, `decay`), whatever a pass did. Tests await a pass with
/// [`JobPasses::wait_for`] instead of sleeping and polling.
#[derive(Debug)]
pub struct JobPasses(tokio::sync::watch::Sender<std::collections::BTreeMap<&'static str, u64>>);

impl Default for JobPasses {
    fn default() -> Self {
        JobPasses(tokio::sync::watch::Sender::new(Default::default()))
    }
}

impl JobPasses {
    /// One more finished pass of `job`.
    pub fn done(&self, job: &'static str) {
        self.0.send_modify(|m| *m.entry(job).or_default() += 1);
    }

    /// Finished passes of `job` so far.
    pub fn count(&self, job: &str) -> u64 {
        self.0.borrow().get(job).copied().unwrap_or(0)
    }

    /// Waits until `job` has finished at least `passes` passes.
    pub async fn wait_for(&self, job: &str, passes: u64) {
        let mut rx = self.0.subscribe();
        let _ = rx.wait_for(|m| m.get(job).copied().unwrap_or(0) >= passes).await;
    }
}

/// `GET /v1/status` and `mneme status`.
#[derive(Debug, Clone, Serialize)]
pub struct DaemonStatus {
    pub running: bool,
    pub pid: u32,
    pub version: &'static str,
    pub grpc_addr: String,
    pub http_addr: String,
    pub started_at: Timestamp,
    pub uptime_seconds: u64,
    pub store: String,
    pub encrypted: bool,
    pub total_records: i64,
    pub records_by_type: std::collections::BTreeMap<String, i64>,
    pub live_records_by_type: std::collections::BTreeMap<String, i64>,
    pub last_consolidation: Option<CycleReport>,
    /// The embedding model and vector index; absent when retrieval is lexical-only.
    pub embedding: Option<mneme_service::EmbeddingStatus>,
    pub consolidation_buffered: usize,
    pub errors_last_hour: u64,
    /// Under `mneme up`: the supervisor's pid and its restart count (absent otherwise).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub supervisor: Option<Supervisor>,
}

impl App {
    /// Authenticates, rate-limits and runs `op` on a blocking thread.
    pub async fn call<T, F>(
        self: &Arc<Self>,
        transport: &'static str,
        operation: Operation,
        credentials: &Credentials,
        op: F,
    ) -> ApiResult<T>
    where
        T: Send + 'static,
        F: FnOnce(&App, &Principal) -> ApiResult<T> + Send + 'static,
    {
        let start = Instant::now();
        let result = async {
            let principal = self.principal(credentials)?;
            let _permit = if operation.is_read() {
                Some(self.read_gate.acquire().await.map_err(|_| ApiError::Unavailable("shutting down".into()))?)
            } else {
                None
            };
            let app = self.clone();
            tokio::task::spawn_blocking(move || op(&app, &principal))
                .await
                .map_err(|e| ApiError::Unavailable(format!("worker failed: {e}")))?
        }
        .await;
        self.record(transport, operation.name(), &result, start);
        result
    }

    /// An ingest RPC: policy checked here, the write done by the [`Ingestor`].
    /// `decoded` is the transport's decoding of the request: a decoding error is reported
    /// only after authentication, like every other request.
    pub async fn ingest(
        self: &Arc<Self>,
        transport: &'static str,
        operation: Operation,
        credentials: &Credentials,
        decoded: ApiResult<(Payload, IngestOptions)>,
    ) -> ApiResult<MemoryRecord> {
        let start = Instant::now();
        let result = async {
            let principal = self.principal(credentials)?;
            let (payload, options) = decoded?;
            let options = self.ops.write_options(&principal, options)?;
            self.ingestor.ingest(payload, options).await
        }
        .await;
        self.record(transport, operation.name(), &result, start);
        result
    }

    pub fn principal(&self, credentials: &Credentials) -> ApiResult<Arc<Caller>> {
        let principal = self.auth.authenticate(credentials)?;
        principal.admit(credentials.peer)?;
        Ok(principal)
    }

    /// Counts the request; a server fault is also logged with its full detail (the
    /// client's message leaves the server's paths out).
    pub fn record<T>(&self, transport: &str, method: &str, result: &ApiResult<T>, start: Instant) {
        let (code, fault) = match result {
            Ok(_) => ("ok", false),
            Err(e) => (e.code(), e.is_server_fault()),
        };
        if let Err(e) = result
            && fault
        {
            tracing::error!(transport, method, code, error = %e.detail(), "request failed");
        }
        self.metrics.request(transport, method, code, fault, start.elapsed());
    }

    /// Runs a hook for an authenticated caller. Never fails: see [`HookOutcome::error`].
    /// `agent_end` and `gateway_stop` also start a consolidation cycle over the buffer
    /// (in the background; shutdown waits for it through the consolidator's lock).
    pub async fn hook(
        self: &Arc<Self>,
        transport: &'static str,
        credentials: &Credentials,
        name: HookName,
        input: HookInput,
    ) -> ApiResult<HookOutcome> {
        let start = Instant::now();
        let principal = self.hook_caller(transport, credentials, name, start)?;
        let app = self.clone();
        let outcome = tokio::task::spawn_blocking(move || {
            let mut buffer = Vec::new();
            let outcome = app.hooks.handle(&principal, name, input, &mut buffer);
            if app.config.consolidation.enabled && !buffer.is_empty() {
                app.consolidator.buffer(buffer);
            }
            outcome
        })
        .await
        .unwrap_or_else(|e| HookOutcome {
            hook: Some(name),
            error: Some(format!("hook worker failed: {e}")),
            ..HookOutcome::default()
        });
        if name.flushes() && self.config.consolidation.enabled {
            // In the background: the hook answers now, even when an LLM takes its time.
            let app = self.clone();
            tokio::spawn(async move {
                app.consolidate().await;
            });
        }
        self.metrics.hook(name.as_str(), outcome.error.is_none());
        self.record::<()>(transport, name.as_str(), &Ok(()), start);
        let mut outcome = outcome;
        if let Some(error) = outcome.error.take() {
            // The full text went to the log; the caller sees no server paths.
            outcome.error = Some(crate::error::without_paths(&error));
        }
        Ok(outcome)
    }

    /// One consolidation cycle over the buffer, counted as a run (failed when it had
    /// errors) and as a finished pass of the `consolidation` job.
    pub async fn consolidate(self: &Arc<Self>) -> CycleReport {
        let report = self.consolidator.run_cycle().await;
        self.metrics.job("consolidation", report.errors.is_empty());
        self.passes.done("consolidation");
        report
    }

    /// The hook's authenticated (and admitted) caller; a refusal is counted as the
    /// hook's failed request.
    fn hook_caller(&self, transport: &str, credentials: &Credentials, name: HookName, start: Instant) -> ApiResult<Arc<Caller>> {
        let principal = self.principal(credentials);
        if principal.is_err() {
            self.record(transport, name.as_str(), &principal, start);
        }
        principal
    }

    /// A hook whose input cannot be read (malformed JSON, an unknown format): once the
    /// caller is authenticated, answered like a failed hook, so the caller is not failed
    /// either; logged and counted among the errors.
    pub fn hook_rejected(
        &self,
        transport: &'static str,
        credentials: &Credentials,
        name: HookName,
        error: String,
    ) -> ApiResult<HookOutcome> {
        let start = Instant::now();
        self.hook_caller(transport, credentials, name, start)?;
        // The parser's message may quote the body: only its start goes to the log.
        tracing::warn!(hook = name.as_str(), error = %mneme_core::one_line(&error, 160), "hook input rejected");
        self.metrics.hook(name.as_str(), false);
        self.record::<()>(transport, name.as_str(), &Ok(()), start);
        Ok(HookOutcome { hook: Some(name), error: Some(error), ..HookOutcome::default() })
    }

    pub fn status(&self, p: &Principal) -> ApiResult<DaemonStatus> {
        let m = self.ops.metrics(p)?;
        Ok(DaemonStatus {
            running: true,
            pid: std::process::id(),
            version: env!("CARGO_PKG_VERSION"),
            grpc_addr: self.grpc_addr.to_string(),
            http_addr: self.http_addr.to_string(),
            started_at: self.started_at,
            uptime_seconds: self.started.elapsed().as_secs(),
            store: m.path,
            encrypted: m.encrypted,
            total_records: m.total_records,
            records_by_type: m.by_type,
            live_records_by_type: m.live_by_type,
            last_consolidation: self.consolidator.last_report(),
            embedding: self.ops.embedding_status(p)?,
            consolidation_buffered: self.consolidator.buffered(),
            errors_last_hour: self.metrics.errors_last_hour(),
            supervisor: self.supervisor,
        })
    }

    /// The Prometheus exposition (reads record counts from the store).
    pub fn prometheus(&self, p: &Principal) -> ApiResult<String> {
        let m = self.ops.metrics(p)?;
        let records: Vec<(String, i64, i64)> =
            m.by_type.iter().map(|(t, n)| (t.clone(), *n, m.live_by_type.get(t).copied().unwrap_or(0))).collect();
        let uptime = self.started.elapsed().as_secs_f64();
        let buffered = self.consolidator.buffered() as f64;
        let mut gauges = vec![
            ("mneme_uptime_seconds", "Seconds since the daemon started.", uptime),
            ("mneme_consolidation_buffered_messages", "Messages waiting for the next consolidation cycle.", buffered),
            ("mneme_store_bytes", "Size of the store file.", m.file_bytes as f64),
        ];
        // The heartbeat's figures, from its log (when the workspace exists).
        if let Ok(r) = mneme_reflect::status::status(self.agent.reflector(), self.agent.workspace(), self.ops.now())
            && r.last_tick.is_some()
        {
            let outcomes = |status: &str| r.stage_outcomes.values().map(|c| c.get(status).copied().unwrap_or(0)).sum::<u32>() as f64;
            gauges.extend([
                ("mneme_reflection_ticks_24h", "Heartbeat ticks in the last 24 hours.", f64::from(r.ticks_24h)),
                ("mneme_reflection_pending_spawns", "Spawned tasks not settled yet.", r.pending_spawns.len() as f64),
                (
                    "mneme_reflection_effectiveness_rate",
                    "Positive share of scored heartbeat outputs (7 days).",
                    r.effectiveness["rate"].as_f64().unwrap_or(0.0),
                ),
                ("mneme_reflection_playbook_lines", "Body lines of the base playbook.", r.playbook_lines as f64),
                (
                    "mneme_reflection_stage_fallbacks_24h",
                    "Stage runs that used the deterministic fallback (24 hours).",
                    outcomes("fallback"),
                ),
                ("mneme_reflection_stage_failures_24h", "Stage runs that failed, e.g. a git push (24 hours).", outcomes("failed")),
                ("mneme_reflection_llm_calls_24h", "Model calls by the heartbeat (24 hours).", r.llm["calls"].as_f64().unwrap_or(0.0)),
                (
                    "mneme_reflection_llm_tokens_24h",
                    "Prompt and completion tokens of those calls.",
                    r.llm["promptTokens"].as_f64().unwrap_or(0.0) + r.llm["completionTokens"].as_f64().unwrap_or(0.0),
                ),
            ]);
        }
        // The relay's buffers and analysis loop.
        let relay = self.agent.relay_engine().health();
        let n = |v: &serde_json::Value| v.as_f64().unwrap_or(0.0);
        gauges.extend([
            ("mneme_relay_enabled", "1 when the relay's analysis loop runs.", f64::from(u8::from(relay["agent"]["enabled"] == true))),
            ("mneme_relay_feed_items", "Items in the relay's feed ring.", n(&relay["messages"])),
            ("mneme_relay_sense_events", "Screen events in the relay's sense ring.", n(&relay["senseEvents"])),
            ("mneme_relay_llm_calls", "Model calls by the relay's analysis loop since start.", n(&relay["agent"]["totalCalls"])),
            (
                "mneme_relay_llm_tokens",
                "Prompt and completion tokens of those calls.",
                n(&relay["agent"]["totalTokens"]["in"]) + n(&relay["agent"]["totalTokens"]["out"]),
            ),
            ("mneme_relay_failures", "Relay ticks skipped by a failed model call since start.", n(&relay["agent"]["failures"])),
        ]);
        // The inner life's state (when it exists) and its jobs.
        let now = self.ops.now();
        if let Ok(Some(state)) = mneme_workspace::inner::read_state(self.agent.workspace()) {
            let m = state.mood(now);
            let log = mneme_workspace::inner::job_log(self.agent.workspace());
            let day_ago = now - jiff::SignedDuration::from_hours(24);
            let recent =
                |l: &&serde_json::Value| l["ts"].as_str().and_then(|t| t.parse::<jiff::Timestamp>().ok()).is_some_and(|t| t >= day_ago);
            gauges.extend([
                ("mneme_inner_connection", "Connection, 0..1 (inner life).", m.connection),
                ("mneme_inner_confidence", "Confidence, 0..1.", m.confidence),
                ("mneme_inner_curiosity", "Curiosity, 0..1.", m.curiosity),
                ("mneme_inner_boredom_days", "Days since the last novelty.", f64::from(m.boredom_days)),
                (
                    "mneme_inner_frustration_max",
                    "The most repeated open problem's count.",
                    f64::from(m.frustration.iter().map(|f| f.count).max().unwrap_or(0)),
                ),
                ("mneme_inner_impatience_items", "Items waiting (queue and events).", m.impatience.len() as f64),
                ("mneme_inner_hints", "Action hints the state gives now.", m.hints.len() as f64),
                (
                    "mneme_inner_job_runs_24h",
                    "Inner-life job runs in the last 24 hours.",
                    log.iter().filter(recent).filter(|l| l.get("run").is_some()).count() as f64,
                ),
                (
                    "mneme_inner_job_refusals_24h",
                    "Writes refused to a job outside its files (24 hours).",
                    log.iter().filter(recent).filter(|l| l["written"] == false).count() as f64,
                ),
            ]);
        }
        Ok(self.metrics.render(&records, &gauges))
    }
}

impl From<mneme_agent::ops::AgentError> for ApiError {
    /// The class comes from the error itself (`AgentError::kind`, the one table); the
    /// words are the API's, without the server's paths.
    fn from(e: mneme_agent::ops::AgentError) -> Self {
        use mneme_agent::ops::AgentError;
        let kind = e.kind();
        match e {
            AgentError::Service(e) | AgentError::Reflect(ReflectError::Service(e)) => ApiError::Service(e),
            AgentError::Reflect(ReflectError::Workspace(w)) | AgentError::Workspace(w) => {
                ApiError::Engine { kind, message: workspace_message(w) }
            }
            AgentError::Reflect(e) => ApiError::Engine { kind, message: reflect_message(&e) },
            AgentError::Invalid(message) => ApiError::Engine { kind, message },
        }
    }
}

/// A workspace file error in the API's words: the caller's path by its file name only.
fn workspace_message(e: mneme_workspace::WorkspaceError) -> String {
    use mneme_workspace::WorkspaceError;
    match e {
        WorkspaceError::PathRefused { path, reason } => format!("path {} refused: {reason}", file_name(&path)),
        WorkspaceError::Io { action, path, source } if source.kind() == std::io::ErrorKind::InvalidFilename => {
            format!("{action} {}: the file name is invalid or too long ({source})", file_name(&path))
        }
        other => other.to_string(),
    }
}

/// The last component of a path, for an answer that must not show the server's paths.
fn file_name(path: &std::path::Path) -> String {
    path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| path.display().to_string())
}

/// A heartbeat refusal in the API's words (what to do instead of a lock file's path).
fn reflect_message(e: &ReflectError) -> String {
    match e {
        ReflectError::Busy(_) => "another reflection tick is running on this workspace; try again when it is done".into(),
        ReflectError::JobBusy(_) => "another inner-life job is running on this workspace; try again when it is done".into(),
        ReflectError::NoWorkspace(_) => "the daemon has no workspace (run `mneme workspace init`); the heartbeat never creates one".into(),
        other => other.to_string(),
    }
}

/// A workspace engine's typed answer as the JSON the transports send.
pub fn answer<T: serde::Serialize>(result: mneme_agent::ops::AgentResult<T>) -> ApiResult<serde_json::Value> {
    serde_json::to_value(result?).map_err(|e| ApiError::Unavailable(format!("answer not serialisable: {e}")))
}
