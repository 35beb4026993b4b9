//! `WorkspaceError`, the one error type of this crate. Every variant that concerns a file
//! names it; every configuration error names the key and the bad value.
//!
//! Expected conditions are not errors: a missing memory file is skipped by the hook
//! context, an already-rotated session log is `RotateOutcome::SameDay`, an empty file is
//! "no chunks".

use std::path::{Path, PathBuf};

/// Result alias for this crate.
pub type WorkspaceResult<T> = Result<T, WorkspaceError>;

/// Everything that can go wrong in the workspace layer.
#[derive(Debug, thiserror::Error)]
pub enum WorkspaceError {
    /// A configuration value was refused; `key` is the setting's name as written in the
    /// config file, `value` what was given.
    #[error("invalid workspace setting `{key}` = {value:?}: {reason}")]
    Config { key: &'static str, value: String, reason: String },

    /// A path was refused because it would leave the workspace (or is not a plain relative
    /// path). Nothing was read or written.
    #[error("path {path:?} refused: {reason}")]
    PathRefused { path: PathBuf, reason: PathRefusal },

    /// A file-system operation failed; `path` is the file or directory it concerned.
    #[error("{action} {path:?}: {source}")]
    Io {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    /// A value handed to a writer was refused (what is wrong with it, in words).
    #[error("{0}")]
    Invalid(String),

    /// The thing named does not exist (an unknown module), in words.
    #[error("{0}")]
    NotFound(String),

    /// Not allowed in the current state (suspending a locked module, a name already taken,
    /// a corrupt file that must be fixed first), in words. Nothing was changed.
    #[error("{0}")]
    Refused(String),

    /// A schedule trigger (cron expression or interval) was refused.
    #[error("invalid schedule trigger {value:?}: {reason}")]
    Schedule { value: String, reason: String },

    /// Time arithmetic went out of range (years beyond ±9999 and similar).
    #[error("time out of range while {context}: {source}")]
    Time {
        context: &'static str,
        #[source]
        source: jiff::Error,
    },

    /// A value could not be serialised to JSON (only reachable with non-string map keys
    /// or similar programming errors, reported rather than panicking).
    #[error("cannot serialise {what} as JSON: {source}")]
    Json {
        what: &'static str,
        #[source]
        source: serde_json::Error,
    },
}

impl WorkspaceError {
    /// Its class on every surface: the caller's value or path, a missing or refused thing,
    /// or the disk (worth retrying).
    pub fn kind(&self) -> mneme_core::ErrorKind {
        use mneme_core::ErrorKind;
        match self {
            WorkspaceError::Config { .. } => ErrorKind::Config,
            WorkspaceError::PathRefused { .. }
            | WorkspaceError::Invalid(_)
            | WorkspaceError::Schedule { .. }
            | WorkspaceError::Time { .. } => ErrorKind::InvalidArgument,
            WorkspaceError::Io { source, .. } if source.kind() == std::io::ErrorKind::InvalidFilename => ErrorKind::InvalidArgument,
            WorkspaceError::Io { .. } | WorkspaceError::Json { .. } => ErrorKind::Unavailable,
            WorkspaceError::NotFound(_) => ErrorKind::NotFound,
            WorkspaceError::Refused(_) => ErrorKind::FailedPrecondition,
        }
    }
}

/// Why a path was refused by `paths::resolve`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PathRefusal {
    /// The path is absolute (or has a Windows prefix); workspace paths are relative.
    Absolute,
    /// The path contains a `..` component. These are refused outright rather than resolved
    /// lexically: through a symlink, `a/..` is not the directory that contains `a`.
    ParentComponent,
    /// An existing part of the path is a symlink (or the path itself is) that resolves
    /// outside the workspace.
    SymlinkEscape,
    /// An existing part of the path is a symlink whose target does not exist, so where a
    /// write would land cannot be checked.
    DanglingSymlink,
    /// A name that must be one plain path component (a user id, a snapshot name) is empty,
    /// contains a separator, or is `.`/`..`.
    NotAName,
}

impl std::fmt::Display for PathRefusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Absolute => "absolute paths are not allowed, use a path relative to the workspace",
            Self::ParentComponent => "`..` components are not allowed",
            Self::SymlinkEscape => "a symlink leads outside the workspace",
            Self::DanglingSymlink => "a symlink on the path points to nothing",
            Self::NotAName => "not a single plain file or directory name",
        })
    }
}

impl WorkspaceError {
    pub(crate) fn io(action: &'static str, path: &Path, source: std::io::Error) -> Self {
        Self::Io { action, path: path.to_path_buf(), source }
    }

    pub(crate) fn refused(path: &Path, reason: PathRefusal) -> Self {
        Self::PathRefused { path: path.to_path_buf(), reason }
    }
}
