//! The CLI's client of a running daemon: `DaemonClient`, one typed method per call the CLI
//! makes over the daemon's HTTP API (`/healthz`, `/v1/status`, `/v1/retrieve`,
//! `/v1/hooks/NAME`), and `RemoteError`, a daemon's error answer, whose wire code gives
//! the exit code through `ErrorKind::from_code`. Methods block (each client owns a
//! current-thread runtime): the CLI makes one or two calls and exits.
//!
//! The daemon's answers are read into the CLI's own types, with only the fields it uses,
//! so a daemon of another version that adds fields is still understood.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{Context as _, Result};
use mneme_agent::hooks::{HookName, HookOutcome};
use mneme_core::RecordId;
use mneme_server::DaemonFile;
use mneme_service::{Hit, RetrieveRequest};
use serde::Deserialize;
use serde_json::Value;

/// How long `/healthz` may take: it answers from memory, so a slow one is not a daemon
/// worth talking to.
const HEALTH_TIMEOUT: Duration = Duration::from_secs(1);
const STATUS_TIMEOUT: Duration = Duration::from_secs(5);
/// Retrieve and hooks do real work (a query embedding, a context block).
const WORK_TIMEOUT: Duration = Duration::from_secs(10);

/// A daemon's HTTP API at one address, with the caller's API key (from `MNEME_API_KEY`).
#[derive(Debug)]
pub struct DaemonClient {
    http_addr: String,
    api_key: Option<String>,
    runtime: tokio::runtime::Runtime,
}

/// `/healthz`: who answers at an address (unauthenticated).
#[derive(Debug, Clone, Deserialize)]
pub struct Health {
    pub service: String,
    #[serde(default)]
    pub version: Option<String>,
    #[serde(default)]
    pub pid: Option<u32>,
    #[serde(default)]
    pub grpc_addr: Option<String>,
    /// `mneme_server::store_id` of the store it serves.
    #[serde(default)]
    pub store_id: Option<String>,
}

/// `/v1/status`: the daemon's answer as sent (what `--json` prints) and the fields the
/// text view shows.
#[derive(Debug)]
pub struct Status {
    pub json: Value,
    pub view: StatusView,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct StatusView {
    pub pid: u32,
    pub version: Option<String>,
    pub grpc_addr: Option<String>,
    pub http_addr: Option<String>,
    pub uptime_seconds: u64,
    pub started_at: Option<String>,
    pub store: Option<String>,
    pub encrypted: bool,
    pub total_records: i64,
    pub records_by_type: BTreeMap<String, i64>,
    pub last_consolidation: Option<LastConsolidation>,
    pub consolidation_buffered: u64,
    pub errors_last_hour: u64,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct LastConsolidation {
    pub at: Option<String>,
    pub messages: u64,
    pub regex_facts: u64,
    pub llm_facts: u64,
    pub llm: Option<String>,
}

/// A hook's answer from the daemon.
#[derive(Debug, Deserialize)]
pub struct HookAnswer {
    pub context: Option<String>,
    #[serde(default)]
    pub record_ids: Vec<RecordId>,
    pub error: Option<String>,
    pub result: Option<serde_json::Value>,
    #[serde(default)]
    pub files: Vec<String>,
    pub forgotten: Option<String>,
}

impl HookAnswer {
    pub fn into_outcome(self, name: HookName) -> HookOutcome {
        HookOutcome {
            hook: Some(name),
            context: self.context,
            record_ids: self.record_ids,
            error: self.error,
            result: self.result,
            files: self.files,
            forgotten: self.forgotten,
        }
    }
}

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

impl DaemonClient {
    /// A client of the daemon at `http_addr`; `api_key` is sent as a bearer token.
    pub fn new(http_addr: &str, api_key: Option<String>) -> Result<DaemonClient> {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
        Ok(DaemonClient { http_addr: http_addr.to_string(), api_key: api_key.map(|k| k.trim().to_string()), runtime })
    }

    /// A client of the daemon `daemon.json` names, with the key from `MNEME_API_KEY`.
    pub fn for_daemon(daemon: &DaemonFile) -> Result<DaemonClient> {
        DaemonClient::new(&daemon.http_addr, std::env::var("MNEME_API_KEY").ok())
    }

    /// `/healthz`, if a mneme daemon answers (anything else, or nothing, is `None`).
    pub fn healthz(&self) -> Option<Health> {
        let url = format!("http://{}/healthz", self.http_addr);
        let health: Health = self.runtime.block_on(async { http(HEALTH_TIMEOUT).get(url).send().await.ok()?.json().await.ok() })?;
        (health.service == "mneme").then_some(health)
    }

    pub fn status(&self) -> Result<Status> {
        let json = self.call(reqwest::Method::GET, "/v1/status", None, STATUS_TIMEOUT)?;
        let view = StatusView::deserialize(&json).context("unexpected status answer from the daemon")?;
        Ok(Status { json, view })
    }

    pub fn retrieve(&self, request: &RetrieveRequest) -> Result<Vec<Hit>> {
        #[derive(Deserialize)]
        struct Answer {
            hits: Vec<Hit>,
        }
        let body = serde_json::to_value(request)?;
        let answer = self.call(reqwest::Method::POST, "/v1/retrieve", Some(&body), WORK_TIMEOUT)?;
        Ok(Answer::deserialize(answer).context("unexpected answer from the daemon")?.hits)
    }

    /// A memory hook with its event as sent by the agent. `Ok(None)` when the daemon's
    /// answer is not a hook outcome (a daemon of another version).
    pub fn hook(&self, name: HookName, event: &Value) -> Result<Option<HookAnswer>> {
        let path = format!("/v1/hooks/{}", name.as_str());
        let answer = self.call(reqwest::Method::POST, &path, Some(event), WORK_TIMEOUT)?;
        Ok(HookAnswer::deserialize(answer).map_err(|e| tracing::debug!(error = %e, "unexpected hook answer")).ok())
    }

    /// One authenticated call; an error answer becomes a `RemoteError`.
    fn call(&self, method: reqwest::Method, path: &str, body: Option<&Value>, timeout: Duration) -> Result<Value> {
        self.runtime.block_on(async {
            let mut request = http(timeout).request(method, format!("http://{}{path}", self.http_addr));
            if let Some(key) = &self.api_key {
                request = request.bearer_auth(key);
            }
            if let Some(b) = body {
                request = request.json(b);
            }
            let response = request.send().await.with_context(|| format!("cannot reach the daemon at {}", self.http_addr))?;
            let status = response.status().as_u16();
            let value: Value = response.json().await.context("the daemon's answer is not JSON")?;
            if status >= 400 {
                return Err(RemoteError {
                    status,
                    code: value["error"]["code"].as_str().unwrap_or("unknown").into(),
                    message: value["error"]["message"].as_str().unwrap_or("unknown error").into(),
                }
                .into());
            }
            Ok(value)
        })
    }
}

fn http(timeout: Duration) -> reqwest::Client {
    reqwest::Client::builder().timeout(timeout).connect_timeout(Duration::from_millis(500)).build().unwrap_or_default()
}
