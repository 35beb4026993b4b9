//! The workspace's layout (the names of its files) and the one gate every path goes
//! through: `resolve`, which maps a workspace-relative path to a real path and refuses
//! anything that would land outside the workspace.
//!
//! **Invariant:** every file this crate reads or writes inside the workspace was returned
//! by `resolve` (or is a fixed name joined onto a directory `resolve` returned).
//!
//! The check is made when the path is resolved. A symlink swapped in between the check and
//! the write (by another process with write access to the workspace) is not detected; the
//! workspace's writers are mneme and the agent it serves, and the check exists to stop an
//! agent-supplied path or a planted link from reaching outside, not a concurrent attacker.

use std::io::ErrorKind;
use std::path::{Component, Path, PathBuf};

use crate::error::{PathRefusal, WorkspaceError, WorkspaceResult};

/// The bot's identity ("soul"), always loaded.
pub const IDENTITY: &str = "identity.md";
/// Active working state, always loaded.
pub const STATE: &str = "state.md";
/// Key paths, ids and configuration, always loaded.
pub const REFERENCES: &str = "references.md";
/// Per-user profiles live in `users/<id>/profile.md`.
pub const USERS_DIR: &str = "users";
/// The file name of a user profile inside `users/<id>/`.
pub const PROFILE: &str = "profile.md";
/// Long-term reference files (`decisions.md`, `projects.md`, `preferences.md`).
pub const REFERENCE_DIR: &str = "reference";
/// Session logs: `current.md` and the archived `YYYY-MM-DD.md`.
pub const SESSIONS_DIR: &str = "sessions";
/// Today's session log.
pub const CURRENT_SESSION: &str = "sessions/current.md";
/// Cold storage; consolidation moves files here, nothing is ever deleted.
pub const ARCHIVE_DIR: &str = "archive";
/// Daily logs, session snapshots, session summaries and the command log.
pub const MEMORY_DIR: &str = "memory";
/// One JSON line per finished agent session.
pub const SESSION_SUMMARIES: &str = "memory/session-summaries.jsonl";
/// The command audit log (JSON lines; the name is the seed's `commands.log`).
pub const COMMAND_LOG: &str = "memory/commands.log";
/// The reflection playbook the heartbeat curates.
pub const PLAYBOOK: &str = "memory/sinain-playbook.md";
/// The playbook with the active knowledge modules merged in (what stages and sessions read).
pub const EFFECTIVE_PLAYBOOK: &str = "memory/sinain-playbook-effective.md";
/// The heartbeat's log: one `YYYY-MM-DD.jsonl` per day.
pub const PLAYBOOK_LOGS_DIR: &str = "memory/playbook-logs";
/// Copies of the playbook taken before each curation that changes it.
pub const PLAYBOOK_ARCHIVE_DIR: &str = "memory/playbook-archive";
/// Advisory lock file serialising mneme's own maintenance operations on one workspace.
pub const LOCK_FILE: &str = ".mneme.lock";

/// The workspace-relative path of a user's profile. `user` must be a plain name.
pub fn profile(user: &str) -> WorkspaceResult<PathBuf> {
    check_name(user)?;
    Ok(Path::new(USERS_DIR).join(user).join(PROFILE))
}

/// Resolves `relative` inside the workspace `root` (which must exist) and returns the path
/// to use for reading or writing.
///
/// Refused: absolute paths, any `..` component, and paths whose deepest existing ancestor
/// (symlinks followed) is not under the canonical root, including a dangling symlink on the
/// path. The part of the path that exists is returned canonicalised; the rest (files or
/// directories still to be created) is appended as given. `""` and `"."` resolve to the
/// root itself.
pub fn resolve(root: &Path, relative: impl AsRef<Path>) -> WorkspaceResult<PathBuf> {
    let relative = relative.as_ref();
    let mut clean = PathBuf::new();
    for component in relative.components() {
        match component {
            Component::Normal(part) => clean.push(part),
            Component::CurDir => {}
            Component::ParentDir => {
                return Err(WorkspaceError::refused(relative, PathRefusal::ParentComponent));
            }
            Component::RootDir | Component::Prefix(_) => {
                return Err(WorkspaceError::refused(relative, PathRefusal::Absolute));
            }
        }
    }
    let canonical_root = root.canonicalize().map_err(|source| WorkspaceError::io("cannot open the workspace", root, source))?;
    let candidate = canonical_root.join(&clean);

    // Walk up from the full path to the deepest ancestor that exists (as a directory entry,
    // so a dangling symlink counts as existing) and check where it really is.
    let mut existing = candidate.as_path();
    let mut missing_tail = Vec::new();
    loop {
        match existing.symlink_metadata() {
            Ok(_) => break,
            Err(error) if error.kind() == ErrorKind::NotFound => {
                let Some(name) = existing.file_name() else {
                    // Only the root has no file name, and the root exists: canonicalize
                    // succeeded above. Treat a vanished root as an I/O error.
                    return Err(WorkspaceError::io("cannot open the workspace", root, error));
                };
                missing_tail.push(name.to_owned());
                existing = existing.parent().expect("a path with a file name has a parent (at worst the root)");
            }
            Err(error) => return Err(WorkspaceError::io("cannot inspect", existing, error)),
        }
    }
    let real = match existing.canonicalize() {
        Ok(real) => real,
        Err(error) if error.kind() == ErrorKind::NotFound => {
            return Err(WorkspaceError::refused(relative, PathRefusal::DanglingSymlink));
        }
        Err(error) => return Err(WorkspaceError::io("cannot resolve", existing, error)),
    };
    if !real.starts_with(&canonical_root) {
        return Err(WorkspaceError::refused(relative, PathRefusal::SymlinkEscape));
    }
    let mut resolved = real;
    resolved.extend(missing_tail.iter().rev());
    Ok(resolved)
}

/// Checks that `name` is one plain path component: not empty, no separator, not `.`/`..`,
/// not hidden (leading `.`), no NUL. Used for user ids and similar names that become
/// directory or file names.
pub fn check_name(name: &str) -> WorkspaceResult<()> {
    let plain =
        !name.is_empty() && !name.starts_with('.') && !name.contains(['/', '\\', '\0']) && Path::new(name).components().count() == 1;
    if plain { Ok(()) } else { Err(WorkspaceError::refused(Path::new(name), PathRefusal::NotAName)) }
}

/// `dir/<stem>.<extension>`, or the first of `dir/<stem>-2.<extension>`, `-3`, … that
/// does not exist yet. Callers hold the workspace lock, so the name stays free until used.
pub(crate) fn free_name(dir: &Path, stem: &str, extension: &str) -> PathBuf {
    let first = dir.join(format!("{stem}.{extension}"));
    if first.symlink_metadata().is_err() {
        return first;
    }
    (2u32..)
        .map(|n| dir.join(format!("{stem}-{n}.{extension}")))
        .find(|candidate| candidate.symlink_metadata().is_err())
        .expect("some suffix is free")
}

/// The workspace-relative display form of `path` (forward slashes), for reports.
/// The modification time of the file at `path` from its metadata, as a timestamp; the
/// error names the file.
pub(crate) fn modified_at(path: &Path, metadata: &std::fs::Metadata) -> WorkspaceResult<jiff::Timestamp> {
    let modified = metadata.modified().map_err(|error| WorkspaceError::io("cannot read the modification time of", path, error))?;
    jiff::Timestamp::try_from(modified).map_err(|source| WorkspaceError::Time { context: "reading a modification time", source })
}

pub fn display_relative(root: &Path, path: &Path) -> String {
    let relative = path.strip_prefix(root).unwrap_or(path);
    let parts: Vec<_> = relative.components().map(|c| c.as_os_str().to_string_lossy()).collect();
    parts.join("/")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_must_be_single_plain_components() {
        for good in ["owner", "howard", "teammate-a", "user.name"] {
            assert!(check_name(good).is_ok(), "{good}");
        }
        for bad in ["", ".", "..", ".git", "a/b", "/abs", "a\\b", "nul\0"] {
            assert!(check_name(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn profile_paths_refuse_escaping_user_ids() {
        assert_eq!(profile("owner").expect("plain"), PathBuf::from("users/owner/profile.md"));
        assert!(profile("../etc").is_err());
    }
}
