//! Reflection: the heartbeat that makes the agent better over time (sinain §4, §6, §8).
//! Being built stage by stage (issue 16); what exists so far:
//!
//! - `curator`: the playbook curator without a model (three laws, stale lifecycle,
//!   50-line body); the archive copy before a change is `mneme_workspace::playbook::write_curated`.
//! - `feedback`: the feedback analyzer's mechanical part. From the heartbeat log's
//!   `output` and `feedback` lines over the last days, the effectiveness of the outputs
//!   and the curate directive that tells the playbook curator how boldly to change the
//!   playbook.
//!
//! - `signals`: the signal analyzer's offline rules and the recommended action.
//! - `tick`: one heartbeat tick, offline, with the stages not built yet recorded as
//!   skipped with their reason; `HEARTBEAT_OK` only after the Step-4 log line.
//!
//! The playbook's text format and the heartbeat log live in `mneme-workspace`
//! (`playbook`, `playbook_log`), so the session-start context can read them too.

pub mod actions;
pub mod curator;
pub mod feedback;
pub mod signals;
pub mod tick;

use std::path::PathBuf;

/// Why a tick or stage failed.
#[derive(Debug, thiserror::Error)]
pub enum ReflectError {
    /// Another tick holds the workspace's reflection lock.
    #[error("another reflection tick is running on this workspace (lock {0:?})")]
    Busy(PathBuf),
    /// The workspace does not exist (the heartbeat never creates one).
    #[error("no workspace at {0:?} (run `mneme workspace init`)")]
    NoWorkspace(PathBuf),
    #[error(transparent)]
    Workspace(#[from] mneme_workspace::WorkspaceError),
    #[error(transparent)]
    Service(#[from] mneme_service::ServiceError),
}
