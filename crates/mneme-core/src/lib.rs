//! mneme-core: the domain of mneme with no I/O.
//!
//! Start with [`record`] (what a memory is), then [`decay`] (how salience fades with
//! time), [`revision`] (which corrections are allowed), [`validate`] (input limits),
//! [`query`] (turning user text into a safe FTS5 expression) and [`scoring`] (how
//! retrieval blends relevance, salience and recency).
//!
//! Invariant: nothing in this crate touches the filesystem, the network, a database
//! or the wall clock. Time enters through the [`clock::Clock`] trait.

pub mod clock;
pub mod decay;
pub mod duration;
pub mod error;
pub mod lexemes;
pub mod private;
pub mod query;
pub mod record;
pub mod revision;
pub mod scoring;
pub mod secrets;
pub mod validate;

pub use clock::{Clock, FixedClock, SystemClock};
pub use decay::{DecayConfig, SalienceState};
pub use duration::{Span, parse_duration};
pub use error::{CoreError, CoreResult, ErrorKind};
pub use record::*;
pub use scoring::RankWeights;
pub use validate::Limits;

/// The tag of a user message that only asks, requests or thanks
/// (`mneme_truth::is_question`): it stays in the log and the store, but default recall,
/// auto-recall and the session-start block do not offer the user's own questions as
/// memories. A recall that names this tag finds them.
pub const QUESTION_TAG: &str = "kind:question";
