//! Validation and rule errors raised by the pure core.

use thiserror::Error;

pub type CoreResult<T> = Result<T, CoreError>;

/// Something a caller asked for that the domain rules refuse.
#[derive(Debug, Error, Clone, PartialEq)]
pub enum CoreError {
    /// A field's value is malformed or out of range.
    #[error("invalid {field}: {reason}")]
    Invalid { field: &'static str, reason: String },
    /// A field is larger than the documented limit.
    #[error("{field} is too large: {actual} bytes, limit {limit}")]
    TooLarge { field: &'static str, actual: usize, limit: usize },
    /// The operation is not allowed in the record's current state.
    #[error("precondition failed: {0}")]
    Precondition(String),
}

impl CoreError {
    pub fn invalid(field: &'static str, reason: impl Into<String>) -> Self {
        Self::Invalid { field, reason: reason.into() }
    }
}
