//! The agent's file memory: a tiered Markdown workspace the agent reads and edits itself
//! (zylos memory v3: `identity.md`, `state.md`, `references.md`, `users/<id>/profile.md`,
//! `reference/`, `sessions/`, `archive/`; sinain layer 1's files: `memory/` daily logs,
//! session snapshots, session summaries, command log; layer 2's sync engine (`deploy`) and
//! layer 4's knowledge modules (`modules`) merged into the effective playbook), and the
//! logic around it: templates and
//! `init`, the context the agent hooks inject, session rotation, status, consolidation,
//! private-tag stripping, Markdown chunking for search, and the scheduler's due rules.
//!
//! Start with `config` (`WorkspaceSettings`, what every function takes) and `paths` (the
//! layout and `resolve`, the gate every path goes through), then the operation you care
//! about. Everything here is synchronous file logic with time passed in (`now`); there is
//! no daemon, store or network. The binary and the daemon call these functions.
//!
//! **Invariant:** every write is atomic (`atomic::write_atomic`) or a single whole-record
//! append (`atomic::append_line`); no memory file is ever deleted or overwritten by
//! maintenance (rotation and consolidation rename, choosing free names).
//! **Invariant:** no path outside the workspace is read or written (`paths::resolve`).
//! **Invariant:** journals (`journal`) strip `<private>` blocks from everything they write.

pub mod atomic;
pub mod chunk;
pub mod config;
pub mod consolidate;
pub mod context;
pub mod deploy;
pub mod error;
pub mod forget;
pub mod init;
pub mod inner;
pub mod inner_data;
pub mod journal;
pub mod knowledge;
pub mod modules;
pub mod paths;
pub mod playbook;
pub mod playbook_log;
pub mod rotate;
pub mod schedule;
pub mod status;
pub mod templates;

pub use config::{BudgetConfig, WorkspaceConfig, WorkspaceSettings};
pub use error::{PathRefusal, WorkspaceError, WorkspaceResult};
/// Private-tag stripping lives in `mneme-core` (the store's ingest path strips too).
pub use mneme_core::private;
