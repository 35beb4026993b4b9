//! `ApiError`: what a request can fail with, and the one exhaustive mapping to gRPC codes
//! and HTTP statuses. Every handler in `grpc.rs` and `http.rs` returns it.

use axum::http::StatusCode;
use mneme_service::{ErrorKind, ServiceError};

#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error(transparent)]
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
    /// The daemon is shutting down or a worker died.
    #[error("{0}")]
    Unavailable(String),
}

impl ApiError {
    /// Stable machine-readable code, the same in both transports' bodies.
    pub fn code(&self) -> &'static str {
        match self {
            ApiError::Service(e) => match e.kind() {
                ErrorKind::NotFound => "not_found",
                ErrorKind::InvalidArgument => "invalid_argument",
                ErrorKind::FailedPrecondition => "failed_precondition",
                ErrorKind::Busy => "busy",
                ErrorKind::Config => "config",
                ErrorKind::Storage => "storage",
                ErrorKind::Unavailable => "unavailable",
            },
            ApiError::Unauthenticated(_) => "unauthenticated",
            ApiError::PermissionDenied(_) => "permission_denied",
            ApiError::RateLimited { .. } => "rate_limited",
            ApiError::BadRequest(_) => "invalid_argument",
            ApiError::TooLarge { .. } => "too_large",
            ApiError::Unavailable(_) => "unavailable",
        }
    }

    pub fn http_status(&self) -> StatusCode {
        match self {
            ApiError::Service(e) => match e.kind() {
                ErrorKind::NotFound => StatusCode::NOT_FOUND,
                ErrorKind::InvalidArgument => StatusCode::BAD_REQUEST,
                ErrorKind::FailedPrecondition => StatusCode::CONFLICT,
                ErrorKind::Busy | ErrorKind::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
                ErrorKind::Config | ErrorKind::Storage => StatusCode::INTERNAL_SERVER_ERROR,
            },
            ApiError::Unauthenticated(_) => StatusCode::UNAUTHORIZED,
            ApiError::PermissionDenied(_) => StatusCode::FORBIDDEN,
            ApiError::RateLimited { .. } => StatusCode::TOO_MANY_REQUESTS,
            ApiError::BadRequest(_) => StatusCode::BAD_REQUEST,
            ApiError::TooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            ApiError::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
        }
    }

    pub fn grpc_code(&self) -> tonic::Code {
        match self {
            ApiError::Service(e) => match e.kind() {
                ErrorKind::NotFound => tonic::Code::NotFound,
                ErrorKind::InvalidArgument => tonic::Code::InvalidArgument,
                ErrorKind::FailedPrecondition => tonic::Code::FailedPrecondition,
                ErrorKind::Busy | ErrorKind::Unavailable => tonic::Code::Unavailable,
                ErrorKind::Config | ErrorKind::Storage => tonic::Code::Internal,
            },
            ApiError::Unauthenticated(_) => tonic::Code::Unauthenticated,
            ApiError::PermissionDenied(_) => tonic::Code::PermissionDenied,
            ApiError::RateLimited { .. } => tonic::Code::ResourceExhausted,
            ApiError::BadRequest(_) => tonic::Code::InvalidArgument,
            ApiError::TooLarge { .. } => tonic::Code::ResourceExhausted,
            ApiError::Unavailable(_) => tonic::Code::Unavailable,
        }
    }

    /// Server-side faults (counted as errors in metrics and `mneme status`).
    pub fn is_server_fault(&self) -> bool {
        self.http_status().is_server_error()
    }
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
