//! `init` and the templates: layout, snapshots, idempotence, never overwriting.

use std::path::PathBuf;

use mneme_workspace::init::{add_user, init};
use mneme_workspace::templates::workspace_files;
use mneme_workspace::{PathRefusal, WorkspaceError, WorkspaceSettings};

use crate::{check_snapshot, read, ts, tz, workspace, write};

#[test]
fn templates_match_their_snapshots() {
    let mut settings = WorkspaceSettings::new("/srv/agent/workspace", tz("Asia/Tokyo"));
    settings.primary_user = "howard".to_owned();
    // 2024-03-09 20:00 UTC is 2024-03-10 in Tokyo: the session log is dated in the zone.
    let today = settings.today(ts("2024-03-09T20:00:00Z"));
    let files = workspace_files(&settings, today);
    let names: Vec<String> = files.iter().map(|(path, _)| path.display().to_string()).collect();
    assert_eq!(
        names,
        [
            "identity.md",
            "state.md",
            "references.md",
            "users/howard/profile.md",
            "reference/decisions.md",
            "reference/projects.md",
            "reference/preferences.md",
            "sessions/current.md",
        ]
    );
    for (path, content) in &files {
        check_snapshot(&format!("templates/{}", path.display()), content);
    }
    let budgets = [("identity.md", 1024), ("state.md", 2048), ("references.md", 1024)];
    for (name, budget) in budgets {
        let (_, content) = files.iter().find(|(path, _)| path.as_os_str() == name).expect(name);
        assert!(content.len() <= budget, "the {name} template is over its own budget");
    }
}

#[test]
fn init_creates_the_layout_and_reports_it() {
    let (_dir, settings) = workspace("Asia/Tokyo");
    let report = init(&settings, ts("2024-03-09T20:00:00Z")).expect("init");
    let created: Vec<String> = report.created.iter().map(|p| p.display().to_string()).collect();
    assert_eq!(
        created,
        [
            "users",
            "reference",
            "sessions",
            "archive",
            "memory",
            "users/owner",
            "identity.md",
            "state.md",
            "references.md",
            "users/owner/profile.md",
            "reference/decisions.md",
            "reference/projects.md",
            "reference/preferences.md",
            "sessions/current.md",
        ]
    );
    assert!(report.skipped.is_empty());
    assert_eq!(read(settings.dir.join("sessions/current.md")), "# Session Log: 2024-03-10\n\n");
    assert!(read(settings.dir.join("identity.md")).contains("Configured TZ: Asia/Tokyo"));
    let json = serde_json::to_value(&report).expect("report serialises");
    assert_eq!(json["created"][6], "identity.md");
}

#[test]
fn init_on_a_populated_workspace_overwrites_nothing() {
    let (_dir, settings) = workspace("UTC");
    init(&settings, ts("2024-03-09T10:00:00Z")).expect("first init");
    let state = settings.dir.join("state.md");
    write(&state, "# Active State\n\nWorking on the parser.\n");
    write(settings.dir.join("reference/decisions.md"), "   \n\t\n");
    std::fs::remove_file(settings.dir.join("references.md")).expect("remove");
    let session_before = read(settings.dir.join("sessions/current.md"));

    let report = init(&settings, ts("2024-04-01T10:00:00Z")).expect("second init");

    assert_eq!(
        report.created,
        [PathBuf::from("references.md"), PathBuf::from("reference/decisions.md")],
        "only the missing and the whitespace-only file are written"
    );
    assert_eq!(report.skipped.len(), 6);
    assert_eq!(read(&state), "# Active State\n\nWorking on the parser.\n");
    assert!(read(settings.dir.join("reference/decisions.md")).starts_with("# Decisions Log"));
    assert_eq!(read(settings.dir.join("sessions/current.md")), session_before);

    let third = init(&settings, ts("2024-04-02T10:00:00Z")).expect("third init");
    assert!(third.created.is_empty(), "init is idempotent: {third:?}");
    assert_eq!(third.skipped.len(), 8);
}

#[test]
fn init_refuses_a_symlink_that_leads_out_of_the_workspace() {
    let (dir, settings) = workspace("UTC");
    std::fs::create_dir_all(&settings.dir).expect("mkdir");
    let outside = dir.path().join("outside.md");
    write(&outside, "");
    std::os::unix::fs::symlink(&outside, settings.dir.join("identity.md")).expect("symlink");

    let error = init(&settings, ts("2024-03-09T10:00:00Z")).expect_err("escape");

    assert!(matches!(error, WorkspaceError::PathRefused { reason: PathRefusal::SymlinkEscape, .. }), "{error}");
    assert_eq!(read(&outside), "", "nothing was written outside");
}

/// Adding a user is creating their profile (zylos §3.3): from the template, with the
/// display name when given; an existing profile, a path-like id, a missing layout and a
/// two-line name are refused, and nothing is written.
#[test]
fn add_user_writes_a_profile_from_the_template_and_overwrites_nothing() {
    let (_dir, settings) = workspace("UTC");
    let now = ts("2024-03-09T10:00:00Z");
    let missing = add_user(&settings, "dana", None, now).expect_err("no layout yet");
    assert!(matches!(missing, WorkspaceError::NotFound(_)) && missing.to_string().contains("workspace init"), "{missing}");
    init(&settings, now).expect("init");
    let path = add_user(&settings, "dana", Some("Dana Weber"), now).expect("add");
    assert_eq!(path, PathBuf::from("users/dana/profile.md"));
    let text = read(settings.dir.join(&path));
    assert!(text.starts_with("# User Profile: Dana Weber\n"), "{text}");
    assert!(text.contains("- Name: Dana Weber\n") && text.contains("- User ID: dana\n"), "{text}");
    write(settings.dir.join(&path), "# User Profile: Dana\n\n## Preferences\n- tea\n");
    let again = add_user(&settings, "dana", None, now).expect_err("exists");
    assert!(matches!(again, WorkspaceError::Refused(_)) && again.to_string().contains("already exists"), "{again}");
    assert!(read(settings.dir.join(&path)).contains("- tea"), "the profile was kept");
    for bad in ["../escape", ".hidden", "a/b", ""] {
        let error = add_user(&settings, bad, None, now).expect_err(bad);
        assert!(matches!(error, WorkspaceError::PathRefused { .. }), "{bad}: {error}");
    }
    let error = add_user(&settings, "ben", Some("Ben\nEvil: yes"), now).expect_err("two lines");
    assert!(matches!(error, WorkspaceError::Invalid(_)), "{error}");
    assert!(!settings.dir.join("users/ben").exists(), "nothing written for a refused user");
    // Without a name the template's own placeholders stay.
    let plain = read(settings.dir.join(add_user(&settings, "ben", None, now).expect("plain")));
    assert!(plain.starts_with("# User Profile: ben\n") && plain.contains("- Name: (to be learned)"), "{plain}");
}
