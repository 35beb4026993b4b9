//! Session log rotation across day boundaries in non-UTC zones, with fixed instants.

use std::path::PathBuf;

use mneme_workspace::rotate::{DatedBy, RotateOutcome, rotate};

use crate::{initialised, read, set_mtime, ts, workspace, write};

fn rotated(log_date: &str, dated_by: DatedBy, archived_to: &str) -> RotateOutcome {
    RotateOutcome::Rotated { log_date: log_date.parse().expect("date"), dated_by, archived_to: PathBuf::from(archived_to) }
}

#[test]
fn tokyo_rotates_at_its_own_midnight_not_utcs() {
    // Initialised at 10:00 JST on 2024-03-09.
    let (_dir, settings) = initialised("Asia/Tokyo", "2024-03-09T01:00:00Z");
    let current = settings.dir.join("sessions/current.md");
    write(&current, "# Session Log: 2024-03-09\n\n- 10:05 started the parser\n");

    // 23:59:59 JST: still the same day.
    let report = rotate(&settings, ts("2024-03-09T14:59:59Z")).expect("rotate");
    assert_eq!(report.outcome, RotateOutcome::SameDay);

    // 00:00 JST on 2024-03-10, while UTC is still on 2024-03-09.
    let report = rotate(&settings, ts("2024-03-09T15:00:00Z")).expect("rotate");
    assert_eq!(report.today.to_string(), "2024-03-10");
    assert_eq!(report.outcome, rotated("2024-03-09", DatedBy::Header, "sessions/2024-03-09.md"));
    assert_eq!(read(settings.dir.join("sessions/2024-03-09.md")), "# Session Log: 2024-03-09\n\n- 10:05 started the parser\n");
    assert_eq!(read(&current), "# Session Log: 2024-03-10\n\n");

    // Idempotent within the new day.
    let report = rotate(&settings, ts("2024-03-09T16:00:00Z")).expect("rotate");
    assert_eq!(report.outcome, RotateOutcome::SameDay);
}

#[test]
fn los_angeles_keeps_the_day_after_utc_midnight() {
    let (_dir, settings) = initialised("America/Los_Angeles", "2024-03-09T18:00:00Z");
    let current = settings.dir.join("sessions/current.md");
    assert_eq!(read(&current), "# Session Log: 2024-03-09\n\n");

    // 23:59:59 PST on 2024-03-09 is already 2024-03-10 in UTC.
    let report = rotate(&settings, ts("2024-03-10T07:59:59Z")).expect("rotate");
    assert_eq!(report.outcome, RotateOutcome::SameDay);

    let report = rotate(&settings, ts("2024-03-10T08:00:00Z")).expect("rotate");
    assert_eq!(report.outcome, rotated("2024-03-09", DatedBy::Header, "sessions/2024-03-09.md"));
    assert_eq!(read(&current), "# Session Log: 2024-03-10\n\n");
}

#[test]
fn an_existing_archive_is_never_overwritten() {
    let (_dir, settings) = initialised("UTC", "2024-03-09T10:00:00Z");
    let sessions = settings.dir.join("sessions");
    write(sessions.join("2024-03-09.md"), "earlier archive\n");
    write(sessions.join("2024-03-09-2.md"), "second archive\n");
    write(sessions.join("current.md"), "# Session Log: 2024-03-09\n\nlater entries\n");

    let report = rotate(&settings, ts("2024-03-10T00:00:01Z")).expect("rotate");

    assert_eq!(report.outcome, rotated("2024-03-09", DatedBy::Header, "sessions/2024-03-09-3.md"));
    assert_eq!(read(sessions.join("2024-03-09.md")), "earlier archive\n");
    assert_eq!(read(sessions.join("2024-03-09-2.md")), "second archive\n");
    assert_eq!(read(sessions.join("2024-03-09-3.md")), "# Session Log: 2024-03-09\n\nlater entries\n");
}

#[test]
fn a_log_without_a_header_is_kept() {
    let (_dir, settings) = initialised("Asia/Tokyo", "2024-03-01T01:00:00Z");
    let current = settings.dir.join("sessions/current.md");

    // Written yesterday (JST): archived under that date.
    write(&current, "notes without a header\n");
    set_mtime(&current, ts("2024-03-08T03:00:00Z"));
    let report = rotate(&settings, ts("2024-03-09T03:00:00Z")).expect("rotate");
    assert_eq!(report.outcome, rotated("2024-03-08", DatedBy::ModificationTime, "sessions/2024-03-08.md"));
    assert_eq!(read(settings.dir.join("sessions/2024-03-08.md")), "notes without a header\n");
    assert_eq!(read(&current), "# Session Log: 2024-03-09\n\n");

    // Written today: today's header goes on top.
    write(&current, "more notes\n");
    set_mtime(&current, ts("2024-03-09T02:00:00Z"));
    let report = rotate(&settings, ts("2024-03-09T03:00:00Z")).expect("rotate");
    assert_eq!(report.outcome, RotateOutcome::HeaderAdded);
    assert_eq!(read(&current), "# Session Log: 2024-03-09\n\nmore notes\n");
}

#[test]
fn a_missing_or_empty_log_is_created() {
    let (_dir, settings) = workspace("UTC");
    std::fs::create_dir_all(&settings.dir).expect("mkdir");
    let report = rotate(&settings, ts("2024-03-09T10:00:00Z")).expect("rotate");
    assert_eq!(report.outcome, RotateOutcome::Created);
    let current = settings.dir.join("sessions/current.md");
    assert_eq!(read(&current), "# Session Log: 2024-03-09\n\n");

    write(&current, "\n \n");
    let report = rotate(&settings, ts("2024-03-10T10:00:00Z")).expect("rotate");
    assert_eq!(report.outcome, RotateOutcome::Created);
    assert_eq!(read(&current), "# Session Log: 2024-03-10\n\n");

    let json = serde_json::to_value(&report).expect("serialise");
    assert_eq!(json, serde_json::json!({"today": "2024-03-10", "outcome": "created"}));
}
