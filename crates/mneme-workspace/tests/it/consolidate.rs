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

/// Sets a file's modification time.
fn touch(path: &std::path::Path, at: &str) {
    let file = std::fs::File::options().write(true).open(path).expect("open");
    file.set_modified(std::time::SystemTime::from(ts(at))).expect("set mtime");
}

/// Freshness (zylos §16.4, §16.6): a file not edited or read for 30 days is aging, for 60
/// fading; a read renews it; the report lists both with a suggested action and moves or
/// deletes nothing; the session logs, the archive and mneme's journals are left to their
/// own rules.
#[test]
fn files_not_confirmed_for_a_month_age_then_fade_and_a_read_renews_them() {
    use std::collections::HashMap;

    use mneme_workspace::consolidate::{FileReads, consolidate_with_reads};
    use mneme_workspace::knowledge::{Freshness, MemoryKind};

    let (_dir, settings) = initialised("UTC", "2024-01-01T00:00:00Z");
    let now = "2024-06-01T12:00:00Z";
    let files = [
        ("reference/decisions.md", "2024-05-20T00:00:00Z"), // 12 days: active
        ("reference/projects.md", "2024-04-20T00:00:00Z"),  // 42 days: aging
        ("users/dana/profile.md", "2024-03-01T00:00:00Z"),  // 92 days: fading
        ("notes/gift-ideas.md", "2024-03-01T00:00:00Z"),    // 92 days, but read last week
        ("sessions/2024-01-01.md", "2024-01-01T00:00:00Z"), // a session log: its own rule
        ("archive/old.md", "2023-01-01T00:00:00Z"),         // archived
    ];
    for (file, at) in files {
        write(settings.dir.join(file), "# Notes\n\n- something worth keeping\n");
        touch(&settings.dir.join(file), at);
    }
    for core in ["identity.md", "state.md", "references.md", "users/owner/profile.md"] {
        touch(&settings.dir.join(core), "2024-05-30T00:00:00Z");
    }
    let reads = HashMap::from([("notes/gift-ideas.md".to_string(), FileReads { count: 3, last: ts("2024-05-25T00:00:00Z") })]);

    let report = consolidate_with_reads(&settings, ts(now), &reads).expect("report");

    let listed: Vec<(&str, Freshness, MemoryKind, i64)> =
        report.freshness.iter().map(|f| (f.file.as_str(), f.freshness, f.memory_type, f.idle_days)).collect();
    assert_eq!(
        listed,
        [
            ("users/dana/profile.md", Freshness::Fading, MemoryKind::Factual, 92),
            ("reference/projects.md", Freshness::Aging, MemoryKind::Strategic, 42),
        ],
        "{:#?}",
        report.freshness
    );
    assert!(report.freshness.iter().all(|f| !f.suggested_action.is_empty()));
    assert!(report.recommendations.iter().any(|r| r.starts_with("1 file(s) aging and 1 fading")), "{:?}", report.recommendations);
    // Without the reads, the gift ideas fade too.
    let unread = consolidate_with_reads(&settings, ts(now), &HashMap::new()).expect("report");
    assert!(unread.freshness.iter().any(|f| f.file == "notes/gift-ideas.md" && f.freshness == Freshness::Fading));
    // Nothing moved or deleted.
    for (file, _) in files {
        assert!(settings.dir.join(file).is_file(), "{file}");
    }
    let json = serde_json::to_value(&report).expect("serialise");
    for key in ["file", "memoryType", "freshness", "lastConfirmed", "idleDays", "reads", "suggestedAction"] {
        assert!(json["freshness"][0].get(key).is_some(), "freshness lacks {key}: {json}");
    }
}

#[test]
fn a_files_memory_type_follows_the_layout() {
    use mneme_workspace::knowledge::MemoryKind::{self, *};
    let cases = [
        ("identity.md", Strategic),
        ("state.md", Strategic),
        ("reference/decisions.md", Strategic),
        ("references.md", Factual),
        ("users/dana/profile.md", Factual),
        ("reference/preferences.md", Factual),
        ("notes.md", Factual),
        ("sessions/current.md", Experiential),
        ("archive/sessions/2024-01-01.md", Experiential),
        ("memory/2024-01-01.md", Experiential),
        ("memory/sinain-playbook.md", Procedural),
        ("modules/react-native/patterns.md", Procedural),
        ("sessionsX.md", Factual),
    ];
    for (path, want) in cases {
        assert_eq!(MemoryKind::of(path), want, "{path}");
    }
}
