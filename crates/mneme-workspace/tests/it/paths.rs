//! `paths::resolve`: absolute paths, `..` and symlink escapes are refused.

use std::os::unix::fs::symlink;
use std::path::Path;

use mneme_workspace::paths::resolve;
use mneme_workspace::{PathRefusal, WorkspaceError};

fn refusal(root: &Path, relative: &str) -> PathRefusal {
    match resolve(root, relative) {
        Err(WorkspaceError::PathRefused { reason, path }) => {
            assert_eq!(path, Path::new(relative), "the error names the path");
            reason
        }
        other => panic!("{relative:?} was not refused: {other:?}"),
    }
}

#[test]
fn plain_relative_paths_resolve_inside_the_workspace() {
    let dir = tempfile::tempdir().expect("temp dir");
    let root = dir.path().canonicalize().expect("canonical");
    std::fs::create_dir(root.join("users")).expect("mkdir");
    assert_eq!(resolve(&root, "users").expect("existing"), root.join("users"));
    assert_eq!(resolve(&root, "users/howard/profile.md").expect("not yet existing"), root.join("users/howard/profile.md"));
    assert_eq!(resolve(&root, "./state.md").expect("dot"), root.join("state.md"));
    assert_eq!(resolve(&root, "").expect("root"), root);
}

#[test]
fn absolute_paths_and_parent_components_are_refused() {
    let dir = tempfile::tempdir().expect("temp dir");
    let root = dir.path();
    assert_eq!(refusal(root, "/etc/passwd"), PathRefusal::Absolute);
    assert_eq!(refusal(root, "../outside.md"), PathRefusal::ParentComponent);
    assert_eq!(refusal(root, "users/../../outside.md"), PathRefusal::ParentComponent);
    assert_eq!(refusal(root, "users/.."), PathRefusal::ParentComponent);
}

#[test]
fn symlinks_out_of_the_workspace_are_refused() {
    let dir = tempfile::tempdir().expect("temp dir");
    let root = dir.path().join("ws");
    let outside = dir.path().join("outside");
    std::fs::create_dir_all(&root).expect("mkdir root");
    std::fs::create_dir_all(&outside).expect("mkdir outside");
    std::fs::write(outside.join("secret.md"), "secret").expect("write");
    symlink(&outside, root.join("linked-dir")).expect("dir symlink");
    symlink(outside.join("secret.md"), root.join("linked.md")).expect("file symlink");
    symlink(dir.path().join("nowhere"), root.join("dangling.md")).expect("dangling symlink");

    assert_eq!(refusal(&root, "linked-dir/secret.md"), PathRefusal::SymlinkEscape);
    assert_eq!(refusal(&root, "linked-dir/new/file.md"), PathRefusal::SymlinkEscape);
    assert_eq!(refusal(&root, "linked.md"), PathRefusal::SymlinkEscape);
    assert_eq!(refusal(&root, "dangling.md"), PathRefusal::DanglingSymlink);
}

#[test]
fn symlinks_that_stay_inside_are_followed() {
    let dir = tempfile::tempdir().expect("temp dir");
    let root = dir.path().canonicalize().expect("canonical");
    std::fs::create_dir(root.join("real")).expect("mkdir");
    symlink(root.join("real"), root.join("alias")).expect("symlink");
    assert_eq!(resolve(&root, "alias/notes.md").expect("inside"), root.join("real/notes.md"));
}

#[test]
fn a_workspace_reached_through_a_symlink_still_works() {
    let dir = tempfile::tempdir().expect("temp dir");
    let real = dir.path().canonicalize().expect("canonical").join("real-ws");
    std::fs::create_dir(&real).expect("mkdir");
    let link = dir.path().join("ws-link");
    symlink(&real, &link).expect("symlink");
    assert_eq!(resolve(&link, "state.md").expect("inside"), real.join("state.md"));
}
