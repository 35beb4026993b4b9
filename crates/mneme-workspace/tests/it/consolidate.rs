//! The consolidation report and `--apply`: archive candidates move, nothing is deleted or
//! overwritten.

use mneme_workspace::consolidate::{apply, consolidate};
use mneme_workspace::{PathRefusal, WorkspaceError};

use crate::{initialised, read, ts, write};

#[test]
fn the_report_finds_old_logs_large_references_and_profiles() {
    let (_dir, settings) = initialised("Asia/Tokyo", "2024-03-01T00:00:00Z");
    let sessions = settings.dir.join("sessions");
    for name in ["2024-01-01.md", "2024-02-08.md", "2024-02-08-2.md", "2024-02-09.md", "notes.md"] {
        write(sessions.join(name), "log\n");
    }
    write(settings.dir.join("state.md"), &"s".repeat(2100));
    write(settings.dir.join("reference/big.md"), &"b".repeat(11 * 1024));
    write(settings.dir.join("users/howard/profile.md"), "# User Profile: Howard\n");

    // 2024-03-09 20:00 UTC is 2024-03-10 in Tokyo: the cutoff is 2024-02-09.
    let report = consolidate(&settings, ts("2024-03-09T20:00:00Z")).expect("report");

    assert_eq!(report.sessions.archive_candidates, ["2024-01-01.md", "2024-02-08-2.md", "2024-02-08.md"]);
    let state = report.core_files.iter().find(|f| f.file == "state.md").expect("state.md");
    assert!(state.over_budget);
    let big = report.reference.iter().find(|f| f.file == "reference/big.md").expect("big.md");
    assert!(big.oversize);
    let users: Vec<&str> = report.users.iter().map(|u| u.user_id.as_str()).collect();
    assert_eq!(users, ["howard", "owner"]);
    assert_eq!(
        report.recommendations,
        [
            "state.md is 2100 bytes (budget: 2048). Trim content.",
            "3 session log(s) older than 30 days. Consider moving to archive/ (`mneme workspace consolidate --apply`).",
            "reference/big.md is 11264 bytes. Consider archiving old entries.",
        ]
    );

    let json = serde_json::to_value(&report).expect("serialise");
    assert_eq!(json["timestamp"], "2024-03-09T20:00:00Z");
    assert_eq!(json["sessions"]["archiveCandidates"][0], "2024-01-01.md");
    for key in ["file", "sizeBytes", "budget", "overBudget", "lastModified"] {
        assert!(json["coreFiles"][0].get(key).is_some(), "coreFiles lacks {key}: {json}");
    }
    assert!(json["users"][0].get("userId").is_some());
    assert!(!settings.dir.join("archive/sessions").exists(), "the report is read-only");
}

#[test]
fn apply_moves_candidates_into_the_archive_without_overwriting() {
    let (_dir, settings) = initialised("UTC", "2024-03-01T00:00:00Z");
    write(settings.dir.join("sessions/2024-01-01.md"), "january log\n");
    write(settings.dir.join("sessions/2024-01-02.md"), "second log\n");
    write(settings.dir.join("archive/sessions/2024-01-01.md"), "already archived\n");
    let report = consolidate(&settings, ts("2024-03-10T12:00:00Z")).expect("report");

    let applied = apply(&settings, &report).expect("apply");

    let moved: Vec<(String, String)> = applied.moved.iter().map(|m| (m.from.display().to_string(), m.to.display().to_string())).collect();
    assert_eq!(
        moved,
        [
            ("sessions/2024-01-01.md".into(), "archive/sessions/2024-01-01-2.md".into()),
            ("sessions/2024-01-02.md".into(), "archive/sessions/2024-01-02.md".into()),
        ]
    );
    assert_eq!(read(settings.dir.join("archive/sessions/2024-01-01.md")), "already archived\n");
    assert_eq!(read(settings.dir.join("archive/sessions/2024-01-01-2.md")), "january log\n");
    assert_eq!(read(settings.dir.join("archive/sessions/2024-01-02.md")), "second log\n");
    assert!(!settings.dir.join("sessions/2024-01-01.md").exists());
    assert!(settings.dir.join("sessions/current.md").exists());

    let again = apply(&settings, &report).expect("apply twice");
    assert!(again.moved.is_empty());
    assert_eq!(again.gone, ["2024-01-01.md", "2024-01-02.md"]);
}

#[test]
fn apply_refuses_a_report_naming_anything_but_a_session_log() {
    let (_dir, settings) = initialised("UTC", "2024-03-01T00:00:00Z");
    let mut report = consolidate(&settings, ts("2024-03-10T12:00:00Z")).expect("report");
    report.sessions.archive_candidates = vec!["../state.md".to_owned()];

    let error = apply(&settings, &report).expect_err("refused");

    assert!(matches!(error, WorkspaceError::PathRefused { reason: PathRefusal::NotAName, .. }), "{error}");
    assert!(settings.dir.join("state.md").exists());
}
