//! mneme-server: the daemon behind `mneme serve`. One process serves the memory API over
//! gRPC (`mneme.v1`, with health and reflection) and HTTP/JSON (`/v1`, `/openapi.json`,
//! `/metrics`), authenticates principals, runs the agent hooks, consolidation and the
//! decay sweep.
//!
//! Read in this order: `config` (every setting), `daemon` (start and shutdown), `app`
//! (the request path), `ops` (operations with policy), then the transports (`grpc`,
//! `http`) and the agent side (`hooks`, `patterns`, `format`, `consolidate`).

pub mod app;
pub mod auth;
pub mod codec;
pub mod config;
pub mod consolidate;
pub mod convert;
pub mod daemon;
pub mod embedding;
pub mod error;
pub mod file_index;
pub mod format;
pub mod grpc;
pub mod hooks;
pub mod http;
pub mod metrics;
pub mod openapi;
pub mod ops;
pub mod patterns;
pub mod scheduler;
pub mod serve;

pub use config::MnemeConfig;
pub use daemon::{Daemon, DaemonFile, DaemonOptions, start};

/// Generated gRPC types and services (`proto/mneme/v1/mneme.proto`).
#[allow(missing_debug_implementations, clippy::all)]
pub mod pb {
    tonic::include_proto!("mneme.v1");
    pub const FILE_DESCRIPTOR_SET: &[u8] = tonic::include_file_descriptor_set!("mneme_descriptor");
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

/// Installs the process-wide TLS crypto provider (ring) for outgoing HTTPS (LLM endpoints).
/// Idempotent.
pub fn init_tls() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}
