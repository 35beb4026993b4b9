//! `ServiceError`: the one error type every front end maps to its status codes.

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

/// Every class of failure any surface reports, and the one exhaustive mapping of each to
/// its wire code, HTTP status, gRPC code and CLI exit code. `ServiceError::kind` gives the
/// service's; the daemon adds the transport's own (authentication, rate limits, sizes,
/// timeouts); the CLI maps a daemon's wire code back with [`ErrorKind::from_code`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    NotFound,
    InvalidArgument,
    FailedPrecondition,
    Busy,
    Config,
    Storage,
    /// A dependency (the embedding model or provider) is not working right now.
    Unavailable,
    PermissionDenied,
    /// Missing, malformed or unknown API key.
    Unauthenticated,
    RateLimited,
    /// The request body is larger than the limit.
    TooLarge,
    /// The request did not arrive in time.
    Timeout,
}

/// How one [`ErrorKind`] appears on every surface.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mapping {
    /// The stable machine-readable code in both transports' error bodies.
    pub code: &'static str,
    pub http_status: u16,
    /// The gRPC status code's number (`tonic::Code::from_i32`).
    pub grpc_code: i32,
    /// The CLI's exit code: 2 invalid, 3 not found, 4 precondition, 5 busy or retry
    /// later, 6 store or configuration, 7 refused by policy or authentication.
    pub exit_code: u8,
}

impl ErrorKind {
    pub const ALL: [ErrorKind; 12] = [
        ErrorKind::NotFound,
        ErrorKind::InvalidArgument,
        ErrorKind::FailedPrecondition,
        ErrorKind::Busy,
        ErrorKind::Config,
        ErrorKind::Storage,
        ErrorKind::Unavailable,
        ErrorKind::PermissionDenied,
        ErrorKind::Unauthenticated,
        ErrorKind::RateLimited,
        ErrorKind::TooLarge,
        ErrorKind::Timeout,
    ];

    /// The one table. gRPC numbers: 3 INVALID_ARGUMENT, 4 DEADLINE_EXCEEDED, 5 NOT_FOUND,
    /// 7 PERMISSION_DENIED, 8 RESOURCE_EXHAUSTED, 9 FAILED_PRECONDITION, 13 INTERNAL,
    /// 14 UNAVAILABLE, 16 UNAUTHENTICATED.
    pub const fn mapping(self) -> Mapping {
        let (code, http_status, grpc_code, exit_code) = match self {
            ErrorKind::NotFound => ("not_found", 404, 5, 3),
            ErrorKind::InvalidArgument => ("invalid_argument", 400, 3, 2),
            ErrorKind::FailedPrecondition => ("failed_precondition", 409, 9, 4),
            ErrorKind::Busy => ("busy", 503, 14, 5),
            ErrorKind::Config => ("config", 500, 13, 6),
            ErrorKind::Storage => ("storage", 500, 13, 6),
            ErrorKind::Unavailable => ("unavailable", 503, 14, 5),
            ErrorKind::PermissionDenied => ("permission_denied", 403, 7, 7),
            ErrorKind::Unauthenticated => ("unauthenticated", 401, 16, 7),
            ErrorKind::RateLimited => ("rate_limited", 429, 8, 5),
            ErrorKind::TooLarge => ("too_large", 413, 8, 2),
            ErrorKind::Timeout => ("timeout", 408, 4, 5),
        };
        Mapping { code, http_status, grpc_code, exit_code }
    }

    pub const fn code(self) -> &'static str {
        self.mapping().code
    }

    pub const fn exit_code(self) -> u8 {
        self.mapping().exit_code
    }

    /// The kind a wire code names.
    pub fn from_code(code: &str) -> Option<ErrorKind> {
        ErrorKind::ALL.into_iter().find(|k| k.code() == code)
    }

    /// A fault of the server, not of the request (logged, counted as an error).
    pub const fn is_server_fault(self) -> bool {
        self.mapping().http_status >= 500
    }
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
