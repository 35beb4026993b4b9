//! Inner life (the inner-life seed, issue 18): the brain loop and its five extensions
//! (reflect, memory, dream, chronicle, evolve) as jobs over the state files that
//! `mneme_workspace::inner` keeps.
//!
//! Every run starts with the mechanical core ([`sense`]: queue staleness, signal and
//! synapse tags, corrections and new skills from the store's audit log), then the job's
//! *thinking* step, in this order of preference:
//! 1. the configured model (`[reflection.stages.inner_life]`), asked with the job's
//!    context level for a JSON answer that is validated, then applied by mneme;
//! 2. with no model and `[inner] dispatch = true`, an instruction for the agent at its next
//!    hook (it writes through `mneme inner write --job …`, which enforces the same lanes);
//! 3. the job's deterministic fallback (the brain loop's and the diary's from
//!    [`digest`]: what happened, what is pending, what changed);
//! 4. otherwise the run is logged as skipped with the reason (nothing to say: the brain
//!    loop's thinking steps themselves have no honest deterministic version, so with
//!    nothing new since the last loop it writes nothing).
//!
//! Every write goes through `inner::job_write` / `job_check`: a job writes only its own
//! files, and an attempt outside them (a model answer naming another file, included) is
//! refused, recorded in `memory/inner-jobs.jsonl` and reported, with nothing changed.

pub mod digest;
pub mod jobs;
pub mod sense;

use serde::{Deserialize, Serialize};

/// `[inner]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct InnerConfig {
    /// Run the brain loop and the extensions on their schedules (manual runs work either way).
    pub jobs: bool,
    /// Without a model, hand each job's thinking step to the agent as an instruction at its
    /// next hook instead of the deterministic fallback.
    pub dispatch: bool,
}

impl Default for InnerConfig {
    fn default() -> Self {
        InnerConfig { jobs: true, dispatch: false }
    }
}

pub use jobs::{JobOptions, JobReport, run};
