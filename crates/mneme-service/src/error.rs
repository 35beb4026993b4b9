//! `ServiceError`: the one error type every front end maps to its status codes.

pub use mneme_core::error::ErrorKind;
use mneme_core::{CoreError, RecordId};
use mneme_store::StoreError;
use thiserror::Error;

pub type ServiceResult<T> = Result<T, ServiceError>;

#[derive(Debug, Error)]
pub enum ServiceError {
    /// The record does not exist or the caller may not see it (the two are not told apart).
    #[error("no record {0}")]
    NotFound(RecordId),
    /// Something other than a record does not exist (a scheduled task); the text names it.
    #[error("{0}")]
    NoSuch(String),
    /// Malformed or oversize input.
    #[error("{0}")]
    Invalid(CoreError),
    /// The operation is not allowed in the record's current state.
    #[error("{0}")]
    Precondition(String),
    /// Another writer held the lock too long; retrying later may succeed.
    #[error("{0}")]
    Busy(StoreError),
    /// A configuration value is wrong; the message names the key.
    #[error("configuration error: {0}")]
    Config(String),
    /// The store cannot be opened or read (missing, wrong key, damaged, too new, I/O).
    #[error("{0}")]
    Store(StoreError),
    /// The embedding model or provider failed; lexical retrieval still works.
    #[error("embedding: {0}")]
    Embedding(String),
    /// The caller's policy does not allow this operation (a write outside its ceiling or
    /// scopes, or a store-wide operation for a narrowed caller).
    #[error("{0}")]
    PermissionDenied(String),
}

impl ServiceError {
    pub fn kind(&self) -> ErrorKind {
        match self {
            ServiceError::NotFound(_) | ServiceError::NoSuch(_) => ErrorKind::NotFound,
            ServiceError::Invalid(_) => ErrorKind::InvalidArgument,
            ServiceError::Precondition(_) => ErrorKind::FailedPrecondition,
            ServiceError::Busy(_) => ErrorKind::Busy,
            ServiceError::Config(_) => ErrorKind::Config,
            ServiceError::Store(_) => ErrorKind::Storage,
            ServiceError::Embedding(_) => ErrorKind::Unavailable,
            ServiceError::PermissionDenied(_) => ErrorKind::PermissionDenied,
        }
    }
}

impl ServiceError {
    /// A malformed request field, named.
    pub fn invalid(field: &'static str, reason: impl Into<String>) -> Self {
        ServiceError::Invalid(CoreError::invalid(field, reason))
    }
}

impl From<CoreError> for ServiceError {
    fn from(e: CoreError) -> Self {
        match e {
            CoreError::Precondition(msg) => ServiceError::Precondition(msg),
            other @ (CoreError::Invalid { .. } | CoreError::TooLarge { .. }) => ServiceError::Invalid(other),
        }
    }
}

impl From<StoreError> for ServiceError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::RecordNotFound(id) => ServiceError::NotFound(id),
            busy @ StoreError::Busy { .. } => ServiceError::Busy(busy),
            // A bad dump is bad input; a store that already holds data is the wrong state.
            dump @ StoreError::Dump { .. } => ServiceError::invalid("dump", dump.to_string()),
            full @ StoreError::NotEmpty { .. } => ServiceError::Precondition(full.to_string()),
            other => ServiceError::Store(other),
        }
    }
}
