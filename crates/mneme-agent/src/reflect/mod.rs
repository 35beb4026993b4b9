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
//! The playbook's text format and the heartbeat log live in `mneme-workspace`
//! (`playbook`, `playbook_log`), so the session-start context can read them too.

pub mod curator;
pub mod feedback;
