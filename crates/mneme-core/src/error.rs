//! Validation and rule errors raised by the pure core, and [`ErrorKind`]: the one table
//! of how every class of failure appears on every surface (HTTP, gRPC, MCP, the CLI).

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

/// Every class of failure any surface reports, and the one exhaustive mapping of each to
/// its wire code, HTTP status, gRPC code and CLI exit code. Every error type classifies
/// itself with a `kind()` (`CoreError`, `StoreError`, `ServiceError`, `WorkspaceError`,
/// `ReflectError`, `AgentError`, each an exhaustive match); the daemon adds the
/// transport's own (authentication, rate limits, sizes, timeouts); the CLI maps a
/// daemon's wire code back with [`ErrorKind::from_code`].
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

    /// What the class means, in a sentence (the generated exit-code reference shows it).
    pub const fn meaning(self) -> &'static str {
        match self {
            ErrorKind::NotFound => "no such record (or one the caller may not see), task, module or daemon",
            ErrorKind::InvalidArgument => "a malformed or out-of-range value, named in the message",
            ErrorKind::FailedPrecondition => "not allowed in the current state (a tombstone, a tick already running, not confirmed)",
            ErrorKind::Busy => "another writer held the lock too long; retrying later may succeed",
            ErrorKind::Config => "a configuration value is wrong (the key is named), or the daemon could not start",
            ErrorKind::Storage => "the store cannot be opened, read or written (missing, wrong key, damaged, too new, I/O)",
            ErrorKind::Unavailable => "a dependency (the embedding model, a workspace file, a worker) is not working right now",
            ErrorKind::PermissionDenied => "the caller's policy does not allow this operation",
            ErrorKind::Unauthenticated => "a missing, malformed or unknown API key",
            ErrorKind::RateLimited => "the principal's rate limit is exhausted; retry after the time given",
            ErrorKind::TooLarge => "the request body is larger than the limit",
            ErrorKind::Timeout => "the request did not arrive in time",
        }
    }

    /// The stable machine-readable code in both transports' error bodies.
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

impl CoreError {
    /// Its class on every surface: a bad value, or a refused state.
    pub fn kind(&self) -> ErrorKind {
        match self {
            CoreError::Invalid { .. } | CoreError::TooLarge { .. } => ErrorKind::InvalidArgument,
            CoreError::Precondition(_) => ErrorKind::FailedPrecondition,
        }
    }
}
