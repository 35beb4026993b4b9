//! `StoreError`: everything that can go wrong below the service layer, with the file named.

use std::path::{Path, PathBuf};

use mneme_core::RecordId;
use thiserror::Error;

pub type StoreResult<T> = Result<T, StoreError>;

#[derive(Debug, Error)]
pub enum StoreError {
    #[error("no mneme store at {path} (run `mneme init` to create one)")]
    Missing { path: PathBuf },
    #[error(
        "{path} is not a SQLite database, or it is an encrypted mneme store opened without a key (set MNEME_ENCRYPTION_KEY or MNEME_ENCRYPTION_KEY_FILE)"
    )]
    NotADatabaseOrEncrypted { path: PathBuf },
    #[error("cannot open {path}: wrong encryption key, or the file is not an encrypted mneme store")]
    WrongKey { path: PathBuf },
    #[error("{path}: SQLCipher rejected the encryption key")]
    KeyRejected { path: PathBuf },
    #[error("{path} is not encrypted but an encryption key was given (unset MNEME_ENCRYPTION_KEY to open it)")]
    NotEncrypted { path: PathBuf },
    #[error("{path} is a SQLite database but not a mneme store (application id {application_id:#x})")]
    NotMneme { path: PathBuf, application_id: i64 },
    #[error("{path} was written by a newer mneme (schema version {found}; this build supports up to {supported}); upgrade mneme")]
    TooNew { path: PathBuf, found: i64, supported: i64 },
    #[error("{path} is truncated: its header says {expected} bytes but the file has {actual}")]
    Truncated { path: PathBuf, expected: u64, actual: u64 },
    #[error("{path} is damaged: {detail}")]
    Corrupt { path: PathBuf, detail: String },
    #[error("{path} is busy: another process held the write lock for more than {waited_ms} ms; try again")]
    Busy { path: PathBuf, waited_ms: u64 },
    #[error("no record {0}")]
    RecordNotFound(RecordId),
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("{path}: stored data could not be decoded: {detail}")]
    Decode { path: PathBuf, detail: String },
    #[error("dump line {line}: {detail}")]
    Dump { line: u64, detail: String },
    #[error("{detail}")]
    DumpWrite { detail: String },
    #[error("cannot import into {target}: it is not empty ({table} has {rows} rows); import into a new store")]
    NotEmpty { target: String, table: &'static str, rows: i64 },
    #[error("{what} is not available on PostgreSQL yet (the engine is being ported; use the SQLite store)")]
    Unsupported { what: String },
    #[error("{target}: {detail}")]
    Postgres { target: String, detail: String },
    #[error("cannot reach the database {target}: {detail}")]
    Unreachable { target: String, detail: String },
    #[error("{target} is not a mneme database: {detail}")]
    PgNotMneme { target: String, detail: String },
    #[error("{target} was written by a newer mneme (schema version {found}; this build supports up to {supported}); upgrade mneme")]
    PgTooNew { target: String, found: i64, supported: i64 },
    #[error("{target} holds no mneme store (run `mneme init` to create one)")]
    PgMissing { target: String },
    #[error("{path}: {source}")]
    Sqlite { path: PathBuf, source: rusqlite::Error },
}

impl StoreError {
    /// Its class on every surface: a held lock is worth retrying, a bad dump is bad input,
    /// a store that already holds data is the wrong state, the rest is the store's.
    pub fn kind(&self) -> mneme_core::ErrorKind {
        use mneme_core::ErrorKind;
        match self {
            StoreError::Busy { .. } => ErrorKind::Busy,
            StoreError::RecordNotFound(_) => ErrorKind::NotFound,
            StoreError::Dump { .. } => ErrorKind::InvalidArgument,
            StoreError::NotEmpty { .. } => ErrorKind::FailedPrecondition,
            StoreError::Missing { .. }
            | StoreError::NotADatabaseOrEncrypted { .. }
            | StoreError::WrongKey { .. }
            | StoreError::KeyRejected { .. }
            | StoreError::NotEncrypted { .. }
            | StoreError::NotMneme { .. }
            | StoreError::TooNew { .. }
            | StoreError::Truncated { .. }
            | StoreError::Corrupt { .. }
            | StoreError::Io { .. }
            | StoreError::Decode { .. }
            | StoreError::DumpWrite { .. }
            | StoreError::Unsupported { .. }
            | StoreError::Postgres { .. }
            | StoreError::Unreachable { .. }
            | StoreError::PgNotMneme { .. }
            | StoreError::PgTooNew { .. }
            | StoreError::PgMissing { .. }
            | StoreError::Sqlite { .. } => ErrorKind::Storage,
        }
    }
}

/// Attaches the database path to rusqlite errors and classifies the ones callers act on.
pub(crate) trait SqlContext<T> {
    fn ctx(self, path: &Path) -> StoreResult<T>;
}

impl<T> SqlContext<T> for rusqlite::Result<T> {
    fn ctx(self, path: &Path) -> StoreResult<T> {
        self.map_err(|e| classify(e, path))
    }
}

pub(crate) fn classify(e: rusqlite::Error, path: &Path) -> StoreError {
    use rusqlite::ErrorCode;
    let path = path.to_path_buf();
    match e.sqlite_error_code() {
        Some(ErrorCode::DatabaseBusy) | Some(ErrorCode::DatabaseLocked) => {
            StoreError::Busy { path, waited_ms: crate::BUSY_TIMEOUT.as_millis() as u64 }
        }
        Some(ErrorCode::DatabaseCorrupt) => StoreError::Corrupt { path, detail: e.to_string() },
        Some(ErrorCode::NotADatabase) => StoreError::NotADatabaseOrEncrypted { path },
        _ => StoreError::Sqlite { path, source: e },
    }
}
