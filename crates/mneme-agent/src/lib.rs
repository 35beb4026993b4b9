//! mneme-agent: the engines an agent's memory runs on, free of any transport. The daemon
//! (`mneme-server`) drives them from its timers and hook endpoints; the CLI calls them
//! directly for work that needs no daemon (`mneme schedule`, `mneme search`).
//!
//! Read in this order: `config` (every setting, typed), `hooks` (the hook engine and the
//! competence tracker), `format` (the context block), `patterns` (regex facts),
//! `consolidate` (buffered messages → facts), `llm` (the one LLM client, with JSON
//! extraction), `scheduler` (tasks and what each action does), `file_index` (workspace
//! search).
//!
//! Invariant: every engine reaches the store through [`mneme_service::Ops`] with a
//! [`mneme_service::Principal`], so the engines obey the same policy as a request;
//! the scheduler and the file index (owner-only data with no labels) take the service.

pub mod config;
pub mod consolidate;
pub mod file_index;
pub mod format;
pub mod hooks;
pub mod inner;
pub mod llm;
pub mod patterns;
pub mod reflect;
pub mod relay;
pub mod scheduler;
pub mod truth;

pub use config::{ConfigError, MnemeConfig};

/// Installs the process-wide TLS crypto provider (ring) for outgoing HTTPS (LLM and
/// embedding endpoints). Idempotent.
pub fn init_tls() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}
