//! Integration tests of the daemon: real gRPC and HTTP servers on loopback port 0, a real
//! SQLite store in a temporary directory, and a scripted loopback LLM server.

mod agent;
mod api;
mod auth;
mod config;
mod console;
mod consolidation;
mod embedding;
mod golden;
mod hooks;
mod limits;
mod membrane;
mod parsers;
mod policy;
mod protocol;
mod tls;
mod truth;

use std::net::SocketAddr;

use mneme_server::pb::hooks_client::HooksClient;
use mneme_server::pb::memory_client::MemoryClient;
use mneme_server::{Daemon, DaemonOptions, MnemeConfig};
use mneme_store::StoreOptions;
use serde_json::Value;
use tempfile::TempDir;
use tonic::transport::Channel;

/// A daemon on ephemeral ports with its own store.
#[derive(Debug)]
pub struct TestDaemon {
    pub daemon: Daemon,
    pub dir: TempDir,
    pub http: reqwest::Client,
}

/// Defaults for tests: loopback port 0 for both servers, no timers firing during a test.
pub fn test_config() -> MnemeConfig {
    let mut c = MnemeConfig::default();
    c.server.grpc_addr = "127.0.0.1:0".parse().expect("address");
    c.server.http_addr = "127.0.0.1:0".parse().expect("address");
    c.consolidation.interval = mneme_core::Span::secs(3600);
    c.maintenance.decay_interval = mneme_core::Span::secs(0);
    c.workspace.scheduler = false;
    c.workspace.index = false;
    // The relay's loop ticks only when a test asks (`POST /agent/tick`).
    c.relay.interval = mneme_core::Span::secs(3600);
    c
}

impl TestDaemon {
    pub async fn start() -> Self {
        Self::with(test_config()).await
    }

    pub async fn with(config: MnemeConfig) -> Self {
        Self::try_with(config).await.expect("daemon starts")
    }

    pub async fn try_with(config: MnemeConfig) -> Result<Self, mneme_server::StartError> {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = StoreOptions { path: dir.path().join("mneme.db"), key: None, create: true, decay: config.decay };
        let daemon = mneme_server::start(DaemonOptions::new(config, store)).await?;
        Ok(TestDaemon { daemon, dir, http: reqwest::Client::new() })
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.daemon.http_addr())
    }

    pub fn grpc_addr(&self) -> SocketAddr {
        self.daemon.grpc_addr()
    }

    pub async fn channel(&self) -> Channel {
        Channel::from_shared(format!("http://{}", self.grpc_addr())).expect("uri").connect().await.expect("gRPC connects")
    }

    pub async fn memory(&self) -> MemoryClient<Channel> {
        MemoryClient::new(self.channel().await)
    }

    pub async fn hooks(&self) -> HooksClient<Channel> {
        HooksClient::new(self.channel().await)
    }

    /// POST JSON; returns (status, body).
    pub async fn post(&self, path: &str, body: Value) -> (u16, Value) {
        self.post_auth(path, body, None).await
    }

    pub async fn post_auth(&self, path: &str, body: Value, key: Option<&str>) -> (u16, Value) {
        let mut r = self.http.post(self.url(path)).json(&body);
        if let Some(k) = key {
            r = r.bearer_auth(k);
        }
        let response = r.send().await.expect("HTTP request");
        let status = response.status().as_u16();
        (status, response.json().await.unwrap_or(Value::Null))
    }

    pub async fn get(&self, path: &str) -> (u16, Value) {
        self.get_auth(path, None).await
    }

    pub async fn get_auth(&self, path: &str, key: Option<&str>) -> (u16, Value) {
        let mut r = self.http.get(self.url(path));
        if let Some(k) = key {
            r = r.bearer_auth(k);
        }
        let response = r.send().await.expect("HTTP request");
        let status = response.status().as_u16();
        (status, response.json().await.unwrap_or(Value::Null))
    }

    pub async fn total_records(&self) -> i64 {
        self.get("/v1/metrics").await.1["total_records"].as_i64().expect("metrics")
    }

    pub async fn stop(self) {
        self.daemon.stop().await;
    }
}

/// `{"event": {...}}` for /v1/ingest/event.
pub fn event_body(text: &str) -> Value {
    serde_json::json!({ "event": { "event_kind": "message", "text": text } })
}

/// Waits, pass by pass of the daemon's background `job` (`consolidation`, `scheduler`,
/// `workspace_index`, `decay`), until `check` holds; fails after 20 s. Never sleeps: each
/// round awaits the job's next finished pass.
pub async fn after_passes(app: &mneme_server::app::App, job: &str, what: &str, mut check: impl AsyncFnMut() -> bool) {
    let wait = async {
        loop {
            let seen = app.passes.count(job);
            if check().await {
                return;
            }
            app.passes.wait_for(job, seen + 1).await;
        }
    };
    tokio::time::timeout(std::time::Duration::from_secs(20), wait).await.unwrap_or_else(|_| panic!("timed out waiting for: {what}"));
}

/// Moves Tokio's clock forward by `by` at once: the daemon's timers and backoffs see the
/// time pass without the test waiting for it. (Tokio's clock stays ahead afterwards.)
pub async fn skip(by: std::time::Duration) {
    tokio::time::pause();
    tokio::time::advance(by).await;
    tokio::time::resume();
}
