//! Crash-safe file writes. `write_atomic` replaces a file so that a crash at any moment
//! leaves either the old or the new content, never a mix; `append_line` adds one whole
//! record to a log; `WorkspaceLock` serialises mneme's own maintenance operations
//! (init, rotate, consolidation apply) on one workspace.
//!
//! Write path of `write_atomic`, with its guarantees:
//! 1. A temporary file `.mneme-tmp*` is created in the target's directory (same file system,
//!    so the rename below is atomic). It gets the target's permissions when the target
//!    exists.
//! 2. The bytes are written and the file is fsynced: the data is on disk before it has a
//!    name.
//! 3. The temporary file is renamed over the target (atomic on POSIX): readers see the old
//!    or the new file.
//! 4. The directory is fsynced so the rename itself survives a power loss.
//!
//! A process killed between 1 and 3 leaves a stray `.mneme-tmp*` file (hidden; status,
//! consolidation and search skip dotfiles) and the target untouched;
//! `sweep_stale_temp_files` removes such leftovers (the daemon at start, `workspace status`).

use std::fs::{File, OpenOptions};
use std::io::Write as _;
use std::path::{Path, PathBuf};

use crate::error::{WorkspaceError, WorkspaceResult};
use crate::paths;

/// Removes `.mneme-tmp*` files under `root` last modified more than `older_than` ago:
/// leftovers of writers killed mid-write (a live writer's file is seconds old). Does not
/// follow symlinks. Returns what it removed; unreadable directories are skipped.
pub fn sweep_stale_temp_files(root: &Path, older_than: std::time::Duration) -> Vec<PathBuf> {
    let mut removed = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        for entry in entries.flatten() {
            let Ok(kind) = entry.file_type() else { continue };
            let name = entry.file_name();
            if kind.is_dir() {
                stack.push(entry.path());
            } else if kind.is_file() && name.to_string_lossy().starts_with(".mneme-tmp") {
                let stale =
                    entry.metadata().and_then(|m| m.modified()).ok().and_then(|t| t.elapsed().ok()).is_some_and(|age| age > older_than);
                if stale && std::fs::remove_file(entry.path()).is_ok() {
                    removed.push(entry.path());
                }
            }
        }
    }
    removed
}

/// Replaces the file at `path` with `bytes` atomically (see the module doc). The parent
/// directory must exist.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> WorkspaceResult<()> {
    let dir = parent_dir(path);
    let mut temp = tempfile::Builder::new()
        .prefix(".mneme-tmp")
        .tempfile_in(dir)
        .map_err(|source| WorkspaceError::io("cannot create a temporary file in", dir, source))?;
    if let Ok(metadata) = std::fs::metadata(path) {
        temp.as_file()
            .set_permissions(metadata.permissions())
            .map_err(|source| WorkspaceError::io("cannot set permissions for", path, source))?;
    }
    temp.write_all(bytes).map_err(|source| WorkspaceError::io("cannot write", path, source))?;
    temp.as_file().sync_all().map_err(|source| WorkspaceError::io("cannot sync", path, source))?;
    temp.persist(path).map_err(|error| WorkspaceError::io("cannot replace", path, error.error))?;
    sync_dir(dir)
}

/// Appends `line` (a newline is added unless it ends with one) to the file at `path`,
/// creating it if needed, and syncs the data.
///
/// The whole record is handed to the kernel in one `write` on a file opened with
/// `O_APPEND`, so concurrent appenders do not interleave within a record on a local file
/// system, and a crash can at worst lose or truncate the last record, never damage
/// earlier ones.
pub fn append_line(path: &Path, line: &str) -> WorkspaceResult<()> {
    let mut record = String::with_capacity(line.len() + 1);
    record.push_str(line);
    if !record.ends_with('\n') {
        record.push('\n');
    }
    let mut file = OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(|source| WorkspaceError::io("cannot open for appending", path, source))?;
    // `write_all` issues a single `write` for a regular file unless the kernel writes
    // short (disk full, signal), in which case it continues with the rest.
    file.write_all(record.as_bytes()).map_err(|source| WorkspaceError::io("cannot append to", path, source))?;
    file.sync_data().map_err(|source| WorkspaceError::io("cannot sync", path, source))
}

/// Creates `dir` and its parents if missing, then syncs the parent so the new entry is
/// durable. Returns whether it was created.
pub fn ensure_dir(dir: &Path) -> WorkspaceResult<bool> {
    if dir.is_dir() {
        return Ok(false);
    }
    std::fs::create_dir_all(dir).map_err(|source| WorkspaceError::io("cannot create directory", dir, source))?;
    sync_dir(parent_dir(dir))?;
    Ok(true)
}

/// An exclusive advisory lock on the workspace, held until dropped. mneme takes it for
/// operations that move or create files based on what they read (init, rotate, apply),
/// so two of them (the daemon's scheduler and a CLI call) cannot interleave.
#[derive(Debug)]
pub struct WorkspaceLock {
    // Invariant: holds the exclusive lock on `<root>/.mneme.lock`; the OS releases it when
    // the file is closed, i.e. when this value drops.
    _file: File,
    path: PathBuf,
}

impl WorkspaceLock {
    /// Blocks until the lock on the workspace at `root` (which must exist) is held.
    pub fn acquire(root: &Path) -> WorkspaceResult<Self> {
        let path = root.join(paths::LOCK_FILE);
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(|source| WorkspaceError::io("cannot open the lock file", &path, source))?;
        file.lock().map_err(|source| WorkspaceError::io("cannot lock", &path, source))?;
        Ok(Self { _file: file, path })
    }

    /// The lock file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// Syncs a directory so entries created, renamed or removed in it are durable.
pub(crate) fn sync_dir(dir: &Path) -> WorkspaceResult<()> {
    let handle = File::open(dir).map_err(|source| WorkspaceError::io("cannot open directory", dir, source))?;
    handle.sync_all().map_err(|source| WorkspaceError::io("cannot sync directory", dir, source))
}

fn parent_dir(path: &Path) -> &Path {
    match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn write_atomic_replaces_content_and_keeps_permissions() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("state.md");
        write_atomic(&path, b"first").expect("first write");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o640)).expect("chmod");
        write_atomic(&path, b"second").expect("second write");
        assert_eq!(std::fs::read(&path).expect("read"), b"second");
        let mode = std::fs::metadata(&path).expect("stat").permissions().mode() & 0o777;
        assert_eq!(mode, 0o640);
        let leftovers: Vec<_> = std::fs::read_dir(dir.path())
            .expect("list")
            .map(|entry| entry.expect("entry").file_name())
            .filter(|name| name != "state.md")
            .collect();
        assert!(leftovers.is_empty(), "temporary files left behind: {leftovers:?}");
    }

    #[test]
    fn append_line_adds_exactly_one_newline_per_record() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("log.jsonl");
        append_line(&path, "{\"a\":1}").expect("append");
        append_line(&path, "{\"b\":2}\n").expect("append");
        assert_eq!(std::fs::read_to_string(&path).expect("read"), "{\"a\":1}\n{\"b\":2}\n");
    }

    #[test]
    fn write_atomic_into_a_missing_directory_names_the_directory() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("missing").join("state.md");
        let error = write_atomic(&path, b"x").expect_err("no parent");
        assert!(error.to_string().contains("missing"), "{error}");
    }
}
