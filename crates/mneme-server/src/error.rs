//! `ApiError`: what a request can fail with, and the one exhaustive mapping to gRPC codes
//! and HTTP statuses. Every handler in `grpc.rs` and `http.rs` returns it.
//!
//! Its `Display` is what the client sees: a server fault's message has the server's
//! filesystem paths reduced to file names (`storage error: mneme.db: database or disk is
//! full`). [`ApiError::detail`] is the full message, for the daemon's log (`App::record`
//! logs every server fault with it).

use std::path::Path;
use std::sync::LazyLock;

use axum::http::StatusCode;
use mneme_service::{ErrorKind, ServiceError};
use mneme_store::StoreError;

#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error("{}", client_text(.0))]
    Service(#[from] ServiceError),
    /// Missing, malformed or unknown API key.
    #[error("{0}")]
    Unauthenticated(String),
    /// The principal's policy does not allow this write.
    #[error("{0}")]
    PermissionDenied(String),
    /// The principal's rate limit is exhausted; retry after the given seconds.
    #[error("rate limit exceeded for principal {principal:?}; retry in {retry_after_secs:.2} s")]
    RateLimited { principal: String, retry_after_secs: f64 },
    /// A request the transport could not decode or that names a bad value.
    #[error("{0}")]
    BadRequest(String),
    #[error("request body is larger than {limit} bytes")]
    TooLarge { limit: usize },
    /// The request body did not arrive in time (`server.body_read_timeout`).
    #[error("the request body did not arrive within {secs} s (server.body_read_timeout)")]
    BodyTimeout { secs: f64 },
    /// The daemon is shutting down or a worker died.
    #[error("{}", without_paths(.0))]
    Unavailable(String),
    /// A workspace engine's failure (reflection, inner life, modules, the relay), with
    /// the class it gave itself.
    #[error("{}", without_paths(message))]
    Engine { kind: ErrorKind, message: String },
}

impl ApiError {
    /// The class of failure; its wire code, HTTP status and gRPC code come from the one
    /// table, [`ErrorKind::mapping`].
    pub fn kind(&self) -> ErrorKind {
        match self {
            ApiError::Service(e) => e.kind(),
            ApiError::Unauthenticated(_) => ErrorKind::Unauthenticated,
            ApiError::PermissionDenied(_) => ErrorKind::PermissionDenied,
            ApiError::RateLimited { .. } => ErrorKind::RateLimited,
            ApiError::BadRequest(_) => ErrorKind::InvalidArgument,
            ApiError::TooLarge { .. } => ErrorKind::TooLarge,
            ApiError::BodyTimeout { .. } => ErrorKind::Timeout,
            ApiError::Unavailable(_) => ErrorKind::Unavailable,
            ApiError::Engine { kind, .. } => *kind,
        }
    }

    /// Stable machine-readable code, the same in both transports' bodies.
    pub fn code(&self) -> &'static str {
        self.kind().code()
    }

    pub fn http_status(&self) -> StatusCode {
        StatusCode::from_u16(self.kind().mapping().http_status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
    }

    pub fn grpc_code(&self) -> tonic::Code {
        tonic::Code::from_i32(self.kind().mapping().grpc_code)
    }

    /// Server-side faults (counted as errors in metrics and `mneme status`, logged).
    pub fn is_server_fault(&self) -> bool {
        self.http_status().is_server_error()
    }

    /// The full message, paths included: for the daemon's log, never for the client.
    pub fn detail(&self) -> String {
        match self {
            ApiError::Service(e) => e.to_string(),
            ApiError::Unavailable(message) => message.clone(),
            other => other.to_string(),
        }
    }
}

/// A service error as the client sees it: the classes that are the server's own faults
/// lose the server's paths (the store's becomes its file name).
fn client_text(e: &ServiceError) -> String {
    let text = e.to_string();
    let text = match e {
        ServiceError::Store(store) | ServiceError::Busy(store) => match store_path(store) {
            Some(path) => {
                let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
                text.replace(&path.display().to_string(), &name)
            }
            None => text,
        },
        _ => text,
    };
    match e.kind() {
        ErrorKind::Storage => format!("storage error: {}", without_paths(&text)),
        kind if kind.is_server_fault() || matches!(kind, ErrorKind::Busy | ErrorKind::Unavailable) => without_paths(&text),
        _ => text,
    }
}

/// The file a store error names, if any.
fn store_path(e: &StoreError) -> Option<&Path> {
    match e {
        StoreError::Missing { path }
        | StoreError::NotADatabaseOrEncrypted { path }
        | StoreError::WrongKey { path }
        | StoreError::KeyRejected { path }
        | StoreError::NotEncrypted { path }
        | StoreError::NotMneme { path, .. }
        | StoreError::TooNew { path, .. }
        | StoreError::Truncated { path, .. }
        | StoreError::Corrupt { path, .. }
        | StoreError::Busy { path, .. }
        | StoreError::Io { path, .. }
        | StoreError::Decode { path, .. }
        | StoreError::Sqlite { path, .. } => Some(path),
        StoreError::RecordNotFound(_)
        | StoreError::Dump { .. }
        | StoreError::Unsupported { .. }
        | StoreError::DumpWrite { .. }
        | StoreError::NotEmpty { .. }
        | StoreError::Postgres { .. }
        | StoreError::Unreachable { .. }
        | StoreError::PgNotMneme { .. }
        | StoreError::PgTooNew { .. }
        | StoreError::PgMissing { .. } => None,
    }
}

/// Reduces every absolute path in `text` (one starting a word, a quote or a parenthesis,
/// so not the path of a URL) to its last component.
pub(crate) fn without_paths(text: &str) -> String {
    static PATH: LazyLock<regex::Regex> =
        LazyLock::new(|| regex::Regex::new(r#"(^|[\s"'(=\[])(/[^\s"'()\[\]:,;]+)"#).expect("the path pattern is valid"));
    PATH.replace_all(text, |c: &regex::Captures<'_>| {
        let path = &c[2];
        let name = path.trim_end_matches('/').rsplit('/').next().unwrap_or_default();
        format!("{}{}", &c[1], if name.is_empty() { "/" } else { name })
    })
    .into_owned()
}

impl From<mneme_core::CoreError> for ApiError {
    fn from(e: mneme_core::CoreError) -> Self {
        ApiError::Service(e.into())
    }
}

impl From<ApiError> for tonic::Status {
    fn from(e: ApiError) -> Self {
        tonic::Status::new(e.grpc_code(), e.to_string())
    }
}

pub type ApiResult<T> = Result<T, ApiError>;
