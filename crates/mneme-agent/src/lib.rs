//! mneme-agent: the engines an agent's memory runs on, free of any transport. The daemon
//! (`mneme-server`) drives them from its timers and hook endpoints; the CLI calls them
//! directly for work that needs no daemon (`mneme schedule`, `mneme search`). Reflection
//! and the inner life are `mneme-reflect`, the relay `mneme-relay`, the LLM client
//! `mneme-llm`, claim extraction `mneme-truth`.
//!
//! Read in this order: `config` (the engines' settings), `hooks` (the hook engine and the
//! competence tracker), `format` (the context block), `truth` (claims → live facts),
//! `consolidate` (buffered messages → facts), `erasure` (a user's request to forget),
//! `scheduler` (tasks and what each action does), `file_index` (workspace search).
//!
//! Invariant: every engine reaches the store through [`mneme_service::Ops`] with a
//! [`mneme_service::Principal`], so it obeys the same policy as a request; the scheduler,
//! the file index and reflection (owner-only data with no labels) take the narrow
//! [`mneme_service::Owner`] handle that only an unrestricted principal gets.

pub mod config;
pub mod consolidate;
pub mod erasure;
pub mod file_index;
pub mod format;
pub mod hooks;
pub mod ops;
pub mod scheduler;
pub mod truth;

/// After a real `forget`, the copies of the erased texts in mneme's own workspace files
/// go too (`mneme_workspace::forget::scrub`): the report lists the files rewritten, and,
/// as `workspace_files`, the agent's own files that still hold a text (mneme does not
/// edit those). A scrub that fails is reported in `workspace_files` with its cause,
/// never as success.
pub fn forget_in_files(report: &mut mneme_service::ForgetReport, workspace: &mneme_workspace::WorkspaceSettings) {
    if report.dry_run || report.erased_texts.is_empty() || !workspace.dir.is_dir() {
        return;
    }
    match mneme_workspace::forget::scrub(workspace, &report.erased_texts) {
        Ok(scrub) => {
            report.files_rewritten = scrub.rewritten;
            report.workspace_files = scrub.kept.into_iter().map(|(path, _why)| path).collect();
        }
        Err(e) => {
            tracing::warn!(error = %e, "forget: the workspace files could not all be rewritten");
            report.workspace_files.push(format!("(not scrubbed: {e})"));
        }
    }
    report.erased_texts.clear();
}

pub use mneme_llm::init_tls;
