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
use mneme_server::{DaemonFile, MnemeConfig};
use mneme_service::{Hit, RetrieveRequest};
use serde::Deserialize;
use serde_json::Value;

/// How long `/healthz` may take: it answers from memory, so a slow one is not a daemon
/// worth talking to.
const HEALTH_TIMEOUT: Duration = Duration::from_secs(1);
const STATUS_TIMEOUT: Duration = Duration::from_secs(5);
/// Retrieve and hooks do real work (a query embedding, a context block).
const WORK_TIMEOUT: Duration = Duration::from_secs(10);

/// A daemon's HTTP API at one base URL (`http://127.0.0.1:18791`, or `https://…` when it
/// serves TLS), with the caller's API key (from `MNEME_API_KEY`).
#[derive(Debug)]
pub struct DaemonClient {
    base: String,
    api_key: Option<String>,
    tls: Option<rustls::ClientConfig>,
    http: reqwest::Client,
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
    /// A client of the daemon at `base` (scheme and authority, a path allowed); `api_key`
    /// is sent as a bearer token; `tls` is required for an `https://` base.
    pub fn new(base: &str, api_key: Option<String>, tls: Option<rustls::ClientConfig>) -> Result<DaemonClient> {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
        let http = http_client(tls.clone())?;
        Ok(DaemonClient {
            base: base.trim_end_matches('/').to_string(),
            api_key: api_key.map(|k| k.trim().to_string()),
            tls,
            http,
            runtime,
        })
    }

    /// A client of the daemon serving this data directory at `http_addr` (from its
    /// `daemon.json`, or a port being probed), over TLS when it serves TLS: its
    /// certificate must be the one in `[server] tls_cert_file`.
    pub fn local(config: &MnemeConfig, http_addr: &str, tls: bool, api_key: Option<String>) -> Result<DaemonClient> {
        let addr = connectable(http_addr);
        if !tls {
            return DaemonClient::new(&format!("http://{addr}"), api_key, None);
        }
        let cert = config.server.tls_cert_file.as_deref().ok_or_else(|| {
            anyhow::anyhow!("the daemon at {addr} serves TLS, but this configuration names no [server] tls_cert_file to check it against")
        })?;
        let tls =
            mneme_server::tls::client_config(mneme_server::tls::Trust::Pinned(cert), client_cert(config)).map_err(anyhow::Error::msg)?;
        DaemonClient::new(&format!("https://{addr}"), api_key, Some(tls))
    }

    /// A client of the daemon at `[client] daemon_url`: over TLS for `https://`, checked
    /// against `[client] tls_ca_file` (else the system's authorities).
    pub fn remote(config: &MnemeConfig, url: &str, api_key: Option<String>) -> Result<DaemonClient> {
        let tls = url
            .starts_with("https://")
            .then(|| {
                let trust = mneme_server::tls::Trust::Authorities(config.client.tls_ca_file.as_deref());
                mneme_server::tls::client_config(trust, client_cert(config)).map_err(anyhow::Error::msg)
            })
            .transpose()?;
        DaemonClient::new(url, api_key, tls)
    }

    /// A client of the daemon `daemon.json` names, with the key from `MNEME_API_KEY`.
    pub fn for_daemon(config: &MnemeConfig, daemon: &DaemonFile) -> Result<DaemonClient> {
        DaemonClient::local(config, &daemon.http_addr, daemon.tls, std::env::var("MNEME_API_KEY").ok())
    }

    /// The base URL (`https://host:port`).
    pub fn base(&self) -> &str {
        &self.base
    }

    /// A new HTTP client with the same TLS, for use in another runtime (the MCP bridge):
    /// this one's pooled connections are driven by its own runtime only.
    pub fn fresh_http(&self) -> Result<reqwest::Client> {
        http_client(self.tls.clone())
    }

    /// `/healthz`, if a mneme daemon answers (anything else, or nothing, is `None`).
    pub fn healthz(&self) -> Option<Health> {
        self.health().ok()
    }

    /// `/healthz`, or why no mneme daemon answered (unreachable, a certificate refused,
    /// something else on the port).
    pub fn health(&self) -> Result<Health> {
        let url = format!("{}/healthz", self.base);
        let health: Health = self.runtime.block_on(async {
            let response = self.http.get(&url).timeout(HEALTH_TIMEOUT).send().await.with_context(|| format!("cannot reach {url}"))?;
            response.json().await.with_context(|| format!("{url} did not answer as a mneme daemon"))
        })?;
        anyhow::ensure!(health.service == "mneme", "{url} is not a mneme daemon (service {:?})", health.service);
        Ok(health)
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
            let mut request = self.http.request(method, format!("{}{path}", self.base)).timeout(timeout);
            if let Some(key) = &self.api_key {
                request = request.bearer_auth(key);
            }
            if let Some(b) = body {
                request = request.json(b);
            }
            let response = request.send().await.with_context(|| format!("cannot reach the daemon at {}", self.base))?;
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

fn http_client(tls: Option<rustls::ClientConfig>) -> Result<reqwest::Client> {
    let mut builder = reqwest::Client::builder().connect_timeout(Duration::from_millis(500));
    if let Some(tls) = tls {
        builder = builder.tls_backend_preconfigured(tls);
    }
    builder.build().context("cannot set up the daemon's HTTP client")
}

/// The client certificate and key of `[client]`, when configured.
fn client_cert(config: &MnemeConfig) -> Option<(&std::path::Path, &std::path::Path)> {
    Some((config.client.tls_cert_file.as_deref()?, config.client.tls_key_file.as_deref()?))
}

/// An address to connect to for a bound one: the unspecified address (`0.0.0.0`, `::`)
/// is reached on loopback.
fn connectable(addr: &str) -> String {
    match addr.parse::<std::net::SocketAddr>() {
        Ok(a) if a.ip().is_unspecified() => {
            let ip: std::net::IpAddr =
                if a.is_ipv4() { std::net::Ipv4Addr::LOCALHOST.into() } else { std::net::Ipv6Addr::LOCALHOST.into() };
            std::net::SocketAddr::new(ip, a.port()).to_string()
        }
        _ => addr.to_string(),
    }
}

/// The local daemon over one kept-alive plain HTTP/1.1 connection, with std alone: what a
/// Claude Code hook process uses, where setting up `DaemonClient` (its runtime, reqwest,
/// TLS) costs more than the call it makes (about 10 ms). Only a daemon of this data
/// directory serving plain HTTP on a loopback address; anything else is `None`, and the
/// caller works on the store itself.
#[derive(Debug)]
pub struct Loopback {
    reader: std::io::BufReader<std::net::TcpStream>,
    host: String,
    api_key: Option<String>,
}

/// How a hook sent over [`Loopback`] ended.
#[derive(Debug)]
pub enum HookCall {
    /// A mneme daemon's hook outcome (it names its hook).
    Answered(Value),
    /// Not handled: never sent (`None`), refused before handling (a key the caller lacks,
    /// the rate limit), or not a mneme daemon's answer. The caller may do the work itself.
    NotTaken(Option<String>),
    /// Sent and then failed (a server error, no answer): the daemon may have done part of it.
    Failed(String),
}

/// Why a call over [`Loopback`] got no answer: before the request was sent (the caller
/// may do the work itself) or after (the daemon may have done it: it is not done twice).
#[derive(Debug)]
pub enum LoopbackError {
    NotSent(std::io::Error),
    NoAnswer(String),
}

impl std::fmt::Display for LoopbackError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LoopbackError::NotSent(e) => write!(f, "the request could not be sent: {e}"),
            LoopbackError::NoAnswer(why) => write!(f, "no answer: {why}"),
        }
    }
}

impl Loopback {
    /// Connects to the daemon `file` describes, when it serves plain HTTP on loopback.
    pub fn connect(file: &DaemonFile, api_key: Option<String>) -> Option<Loopback> {
        let addr: std::net::SocketAddr = connectable(&file.http_addr).parse().ok()?;
        if file.tls || !addr.ip().is_loopback() {
            return None;
        }
        let stream = std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(200)).ok()?;
        stream.set_nodelay(true).ok()?;
        stream.set_read_timeout(Some(WORK_TIMEOUT)).ok()?;
        stream.set_write_timeout(Some(HEALTH_TIMEOUT)).ok()?;
        Some(Loopback { reader: std::io::BufReader::new(stream), host: addr.to_string(), api_key })
    }

    /// `POST /v1/hooks/NAME` with `body`, classified ([`HookCall`]).
    pub fn hook(&mut self, name: HookName, body: &Value) -> HookCall {
        match self.call("POST", &format!("/v1/hooks/{}", name.as_str()), Some(body)) {
            Ok((200, answer)) if answer.get("hook").is_some() => HookCall::Answered(answer),
            Ok((status, answer)) if status < 500 => {
                HookCall::NotTaken(Some(answer["error"]["message"].as_str().map_or_else(|| format!("HTTP {status}"), str::to_string)))
            }
            Ok((status, _)) => HookCall::Failed(format!("HTTP {status}")),
            Err(LoopbackError::NotSent(_)) => HookCall::NotTaken(None),
            Err(e) => HookCall::Failed(e.to_string()),
        }
    }

    /// One call: the status and the JSON answer. The connection stays open for the next.
    pub fn call(&mut self, method: &str, path: &str, body: Option<&Value>) -> Result<(u16, Value), LoopbackError> {
        use std::io::{BufRead as _, Read as _, Write as _};
        let body = body.map(Value::to_string).unwrap_or_default();
        let mut request = format!("{method} {path} HTTP/1.1\r\nHost: {}\r\nContent-Length: {}\r\n", self.host, body.len());
        if !body.is_empty() {
            request.push_str("Content-Type: application/json\r\n");
        }
        if let Some(key) = &self.api_key {
            request.push_str(&format!("Authorization: Bearer {key}\r\n"));
        }
        request.push_str("\r\n");
        request.push_str(&body);
        self.reader.get_mut().write_all(request.as_bytes()).map_err(LoopbackError::NotSent)?;
        let no_answer = |what: &str| LoopbackError::NoAnswer(what.to_string());
        let io = |e: std::io::Error| LoopbackError::NoAnswer(e.to_string());
        let mut line = String::new();
        self.reader.read_line(&mut line).map_err(io)?;
        let status: u16 = line
            .strip_prefix("HTTP/1.1 ")
            .and_then(|rest| rest.get(..3))
            .and_then(|code| code.parse().ok())
            .ok_or_else(|| no_answer("not an HTTP/1.1 status line"))?;
        let (mut length, mut chunked) = (None, false);
        loop {
            line.clear();
            self.reader.read_line(&mut line).map_err(io)?;
            let header = line.trim_end();
            if header.is_empty() {
                break;
            }
            let (name, value) = header.split_once(':').ok_or_else(|| no_answer("a malformed header"))?;
            if name.eq_ignore_ascii_case("content-length") {
                length = Some(value.trim().parse::<usize>().map_err(|_| no_answer("a malformed Content-Length"))?);
            } else if name.eq_ignore_ascii_case("transfer-encoding") {
                chunked = value.trim().eq_ignore_ascii_case("chunked");
            }
        }
        let mut raw = Vec::new();
        match (length, chunked) {
            (Some(n), false) => {
                raw.resize(n.min(64 << 20), 0);
                self.reader.read_exact(&mut raw).map_err(io)?;
            }
            (_, true) => loop {
                line.clear();
                self.reader.read_line(&mut line).map_err(io)?;
                let size = usize::from_str_radix(line.trim().split(';').next().unwrap_or(""), 16)
                    .map_err(|_| no_answer("a malformed chunk size"))?;
                let start = raw.len();
                raw.resize(start + size + 2, 0);
                self.reader.read_exact(&mut raw[start..]).map_err(io)?;
                raw.truncate(start + size);
                if size == 0 {
                    break;
                }
            },
            (None, false) => return Err(no_answer("an answer without a length")),
        }
        let value = serde_json::from_slice(&raw).map_err(|_| no_answer("the answer is not JSON"))?;
        Ok((status, value))
    }
}
