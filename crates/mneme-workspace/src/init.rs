//! `init`: creates the tiered workspace layout from the compiled-in templates.
//!
//! **Invariant:** `init` never overwrites a file with content. A file that exists and holds
//! anything but whitespace is reported as skipped; a missing, empty or whitespace-only file
//! is (re)written from its template, atomically. Running it again is a no-op.

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::atomic::{WorkspaceLock, ensure_dir, write_atomic};
use crate::config::WorkspaceSettings;
use crate::error::{WorkspaceError, WorkspaceResult};
use crate::{paths, templates};

/// What `init` did, with workspace-relative paths (directories included in `created`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct InitReport {
    pub dir: PathBuf,
    pub created: Vec<PathBuf>,
    pub skipped: Vec<PathBuf>,
}

/// Creates the workspace at `settings.dir`: the directories `users/<primary>/`,
/// `reference/`, `sessions/`, `archive/`, `memory/` and every template file that is
/// missing or empty. `now` dates the fresh `sessions/current.md` (today in the workspace's
/// zone).
pub fn init(settings: &WorkspaceSettings, now: jiff::Timestamp) -> WorkspaceResult<InitReport> {
    let root = &settings.dir;
    ensure_dir(root)?;
    let _lock = WorkspaceLock::acquire(root)?;
    let mut report = InitReport { dir: root.clone(), created: Vec::new(), skipped: Vec::new() };

    let user_dir = paths::profile(&settings.primary_user)?.parent().expect("a profile path has a parent directory").to_path_buf();
    let directories = templates::DIRECTORIES.iter().map(PathBuf::from).chain([user_dir]);
    for relative in directories {
        let path = paths::resolve(root, &relative)?;
        if ensure_dir(&path)? {
            report.created.push(relative);
        }
    }

    for (relative, content) in templates::workspace_files(settings, settings.today(now)) {
        let path = paths::resolve(root, &relative)?;
        if has_content(&path)? {
            report.skipped.push(relative);
        } else {
            write_atomic(&path, content.as_bytes())?;
            report.created.push(relative);
        }
    }
    Ok(report)
}

/// Adds a user (zylos §3.3: "adding a new user = creating a new `users/<id>/profile.md`"):
/// the profile template for `user` (a plain name), with `name` as its display name and
/// name line when given. Refused when the workspace has no layout yet (run `init`) or the
/// profile already has content; nothing else is touched. Returns the workspace-relative path.
pub fn add_user(settings: &WorkspaceSettings, user: &str, name: Option<&str>, now: jiff::Timestamp) -> WorkspaceResult<PathBuf> {
    let root = &settings.dir;
    let relative = paths::profile(user)?;
    if !root.join(paths::USERS_DIR).is_dir() {
        return Err(WorkspaceError::NotFound(format!("{} has no users/ directory: run `mneme workspace init` first", root.display())));
    }
    let name = name.map(str::trim).filter(|n| !n.is_empty());
    if let Some(n) = name
        && n.contains(['\n', '\r'])
    {
        return Err(WorkspaceError::Invalid("a display name is one line".into()));
    }
    let _lock = WorkspaceLock::acquire(root)?;
    let path = paths::resolve(root, &relative)?;
    if has_content(&path)? {
        return Err(WorkspaceError::Refused(format!("{} already exists; edit it instead", relative.display())));
    }
    let mut vars = templates::TemplateVars::new(settings, settings.today(now));
    vars.user = user.to_owned();
    let mut text = templates::render(templates::PROFILE, &vars);
    if let Some(n) = name {
        text = text.replacen(&format!("# User Profile: {user}"), &format!("# User Profile: {n}"), 1).replacen(
            "- Name: (to be learned)",
            &format!("- Name: {n}"),
            1,
        );
    }
    ensure_dir(path.parent().expect("a profile path has a parent directory"))?;
    write_atomic(&path, text.as_bytes())?;
    Ok(relative)
}

/// Whether the file at `path` exists and holds something other than whitespace. Files
/// above 4 KiB count as having content without being read.
fn has_content(path: &Path) -> WorkspaceResult<bool> {
    let metadata = match path.metadata() {
        Ok(metadata) => metadata,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(false),
        Err(error) => return Err(WorkspaceError::io("cannot inspect", path, error)),
    };
    if !metadata.is_file() {
        return Err(WorkspaceError::io(
            "expected a file at",
            path,
            std::io::Error::new(std::io::ErrorKind::InvalidInput, "not a regular file"),
        ));
    }
    if metadata.len() > 4096 {
        return Ok(true);
    }
    let bytes = std::fs::read(path).map_err(|error| WorkspaceError::io("cannot read", path, error))?;
    Ok(!bytes.iter().all(u8::is_ascii_whitespace))
}
