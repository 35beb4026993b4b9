//! mneme-server: the daemon behind `mneme serve`, and only the daemon's own parts: the
//! transports (gRPC `mneme.v1` with health and reflection; HTTP/JSON `/v1`,
//! `/openapi.json`, `/metrics`; MCP at `/mcp` and over stdio), authentication and rate limits, metrics, the OpenAPI
//! document, and the daemon's lifecycle (start, timers, ordered shutdown). The engines it
//! drives (hooks, consolidation, scheduler, file index) live in `mneme-agent`; every
//! operation goes through `mneme_service::Ops`.
//!
//! Read in this order: `daemon` (start and shutdown), `app` (the request path), `op`
//! (the operations), then the transports (`grpc`, `http`).

// The OpenAPI document's `json!` literals nest deeper than serde_json's default allows.
#![recursion_limit = "256"]

pub mod app;
pub mod auth;
mod codec;
pub mod config;
mod console;
mod convert;
pub mod daemon;
pub mod error;
mod grpc;
pub mod guard;
mod http;
pub mod mcp;
pub mod membrane;
mod metrics;
pub mod op;
pub mod openapi;
mod serve;
pub mod tls;

pub use config::{ConfigError, MnemeConfig};
pub use convert::{json_from_pb, pb_from_json};
pub use daemon::{Daemon, DaemonFile, DaemonOptions, StartError, start};

/// Generated gRPC types and services (`proto/mneme/v1/mneme.proto`).
#[allow(missing_debug_implementations, clippy::all)]
pub mod pb {
    tonic::include_proto!("mneme.v1");
    pub const FILE_DESCRIPTOR_SET: &[u8] = tonic::include_file_descriptor_set!("mneme_descriptor");
}

/// Generated types and service of membrane's wire protocol (`proto/membrane/v1/membrane.proto`,
/// membrane v0.2.0 verbatim), served by [`membrane`] when `[membrane] enabled`.
#[allow(missing_debug_implementations, clippy::all)]
pub mod membrane_pb {
    tonic::include_proto!("membrane.v1");
    pub const FILE_DESCRIPTOR_SET: &[u8] = tonic::include_file_descriptor_set!("membrane_descriptor");
}

/// A short, stable identity of a store file, for `/healthz` (which is unauthenticated, so
/// not the path itself): the first 16 hex digits of SHA-256 of its canonical path.
/// `mneme up` compares it to tell its own daemon from one serving another data directory.
pub fn store_id(path: &std::path::Path) -> String {
    use sha2::Digest as _;
    let canonical = path.canonicalize().unwrap_or_else(|_| path.to_path_buf());
    let digest = sha2::Sha256::digest(canonical.as_os_str().as_encoded_bytes());
    digest.iter().take(8).map(|b| format!("{b:02x}")).collect()
}

pub use mneme_agent::init_tls;
