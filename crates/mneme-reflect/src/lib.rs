//! mneme-reflect: the heartbeat that makes the agent better over time (sinain §4, §6, §8).
//!
//! One tick (`tick`) runs the seed's phases as stages of one engine (`engine::Reflector`):
//! `setup` (history, idle, session summary), `git` (opt-in backup), `signals` (the
//! analyzer and its recommended action), `actions` (spawn outcome tracking, the threshold,
//! the daily minimum), `miner` (idle ticks), `feedback` (effectiveness and the curate
//! directive), `curator` (three laws, stale lifecycle, 50-line body), the Step-4 log line,
//! then `insight` delivered through `outbound`. Each thinking stage asks the model routed
//! for it in `config` when one is configured, validates the answer, and otherwise runs a
//! deterministic fallback, recording which in the log line. `report` takes the host's
//! feedback and spawn results; `status` summarises the log.
//!
//! The playbook's text format and the heartbeat log live in `mneme-workspace`
//! (`playbook`, `playbook_log`), so the session-start context can read them too.

pub mod actions;
pub mod config;
pub mod curator;
pub mod engine;
pub mod extract;
pub mod feedback;
pub mod git;
pub mod inner;
pub mod insight;
pub mod lessons;
pub mod miner;
pub mod outbound;
pub mod report;
pub mod setup;
pub mod signals;
pub mod status;
pub mod tick;

use std::path::PathBuf;

/// Why a tick or stage failed.
#[derive(Debug, thiserror::Error)]
pub enum ReflectError {
    /// Another tick holds the workspace's reflection lock.
    #[error("another reflection tick is running on this workspace (lock {0:?})")]
    Busy(PathBuf),
    /// Another inner-life job holds the workspace's job lock.
    #[error("another inner-life job is running on this workspace (lock {0:?})")]
    JobBusy(PathBuf),
    /// The workspace does not exist (the heartbeat never creates one).
    #[error("no workspace at {0:?} (run `mneme workspace init`)")]
    NoWorkspace(PathBuf),
    #[error(transparent)]
    Workspace(#[from] mneme_workspace::WorkspaceError),
    #[error(transparent)]
    Service(#[from] mneme_service::ServiceError),
}

impl ReflectError {
    /// Its class on every surface: a lock held or no workspace is a failed precondition.
    pub fn kind(&self) -> mneme_core::ErrorKind {
        match self {
            ReflectError::Busy(_) | ReflectError::JobBusy(_) | ReflectError::NoWorkspace(_) => mneme_core::ErrorKind::FailedPrecondition,
            ReflectError::Workspace(e) => e.kind(),
            ReflectError::Service(e) => e.kind(),
        }
    }
}
