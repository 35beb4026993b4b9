//! `status`: sizes, budgets, totals, OVER BUDGET markers.

use std::path::PathBuf;

use mneme_workspace::status::{BudgetStatus, FileStatus, StatusReport, render_status, status};

use crate::{check_snapshot, initialised, set_mtime, ts, tz, write};

#[test]
fn an_over_budget_file_is_flagged_and_totals_add_up() {
    let (_dir, settings) = initialised("UTC", "2024-03-09T10:00:00Z");
    write(settings.dir.join("state.md"), &"x".repeat(3000));
    write(settings.dir.join(".mneme-tmp-stray"), "left by a crash");
    std::os::unix::fs::symlink("/etc/hostname", settings.dir.join("link.md")).expect("symlink");
    set_mtime(settings.dir.join("state.md"), ts("2024-03-09T11:30:00Z"));

    let report = status(&settings).expect("status");

    let paths: Vec<&str> = report.files.iter().map(|file| file.path.as_str()).collect();
    assert_eq!(
        paths,
        [
            "identity.md",
            "reference/decisions.md",
            "reference/preferences.md",
            "reference/projects.md",
            "references.md",
            "sessions/current.md",
            "state.md",
            "users/owner/profile.md",
        ],
        "hidden files, the lock file and symlinks are not listed"
    );
    let state = report.files.iter().find(|file| file.path == "state.md").expect("state.md");
    assert_eq!((state.size_bytes, state.budget_bytes, state.over_budget), (3000, Some(2048), true));
    assert_eq!(state.modified, ts("2024-03-09T11:30:00Z"));
    assert_eq!(report.file_count, 8);
    assert_eq!(report.total_bytes, report.files.iter().map(|file| file.size_bytes).sum::<u64>());
    assert!(report.over_budget);
    let budgets: Vec<(&str, u64, bool)> = report.budgets.iter().map(|b| (b.path.as_str(), b.percent, b.over_budget)).collect();
    assert_eq!(budgets[1], ("state.md", 146, true));
    assert!(!budgets[0].2 && !budgets[2].2);
    assert!(report.missing.is_empty());

    let text = render_status(&report, &settings.timezone);
    assert!(text.contains("  2024-03-09 11:30  state.md [OVER BUDGET]\n"), "{text}");
    assert!(text.contains("state.md budget: 2.9KB / 2.0KB (146%) OVER BUDGET\n"), "{text}");

    let json = serde_json::to_value(&report).expect("serialise");
    assert_eq!(json["over_budget"], true);
    assert_eq!(json["files"][6]["budget_bytes"], 2048);
}

#[test]
fn missing_core_files_are_listed() {
    let (_dir, settings) = initialised("UTC", "2024-03-09T10:00:00Z");
    std::fs::remove_file(settings.dir.join("identity.md")).expect("remove");
    std::fs::remove_file(settings.dir.join("users/owner/profile.md")).expect("remove");
    let report = status(&settings).expect("status");
    assert_eq!(report.missing, ["identity.md", "users/owner/profile.md"]);
    assert!(!report.over_budget);
}

#[test]
fn the_text_report_matches_its_snapshot() {
    let file = |path: &str, size: u64, modified: &str, budget: Option<u64>| FileStatus {
        path: path.to_owned(),
        size_bytes: size,
        modified: ts(modified),
        budget_bytes: budget,
        over_budget: budget.is_some_and(|budget| size > budget),
    };
    let files = vec![
        file("identity.md", 512, "2024-03-09T01:02:00Z", Some(1024)),
        file("references.md", 1100, "2024-03-09T02:00:00Z", Some(1024)),
        file("sessions/current.md", 40_000, "2024-03-09T23:59:00Z", None),
        file("state.md", 2048, "2024-03-08T15:00:00Z", Some(2048)),
    ];
    let report = StatusReport {
        dir: PathBuf::from("/srv/agent/workspace"),
        timezone: "Asia/Tokyo".to_owned(),
        file_count: files.len(),
        total_bytes: files.iter().map(|f| f.size_bytes).sum(),
        budgets: vec![
            BudgetStatus { path: "identity.md".into(), size_bytes: 512, budget_bytes: 1024, percent: 50, over_budget: false },
            BudgetStatus { path: "state.md".into(), size_bytes: 2048, budget_bytes: 2048, percent: 100, over_budget: false },
            BudgetStatus { path: "references.md".into(), size_bytes: 1100, budget_bytes: 1024, percent: 107, over_budget: true },
        ],
        over_budget: true,
        missing: vec!["users/owner/profile.md".to_owned()],
        files,
    };
    check_snapshot("status.txt", &render_status(&report, &tz("Asia/Tokyo")));
}
