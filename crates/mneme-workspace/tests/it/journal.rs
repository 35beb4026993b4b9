//! Daily logs, session snapshots, session summaries and the command log.

use std::path::PathBuf;

use mneme_workspace::journal::{CommandLogEntry, SessionTracker, append_daily, log_command, write_snapshot};
use serde_json::json;

use crate::{read, ts, workspace};

#[test]
fn daily_logs_are_dated_in_the_workspace_zone_and_get_one_header() {
    let (_dir, settings) = workspace("Asia/Tokyo");
    // 15:30 UTC on 2024-03-09 is 00:30 on 2024-03-10 in Tokyo.
    let first = append_daily(&settings, ts("2024-03-09T15:30:00Z"), "Flushed: parser work in progress.").expect("append");
    let second = append_daily(&settings, ts("2024-03-09T16:05:00Z"), "Decided on <private>the vendor's secret price</private>option B.\n")
        .expect("append");
    let empty = append_daily(&settings, ts("2024-03-09T16:06:00Z"), "<private>only secret</private>").expect("append");

    assert_eq!(first, PathBuf::from("memory/2024-03-10.md"));
    assert_eq!(second, first);
    assert_eq!(empty, first);
    assert_eq!(
        read(settings.dir.join(&first)),
        "# Daily Log: 2024-03-10\n\n## 00:30\n\nFlushed: parser work in progress.\n\n## 01:05\n\nDecided on option B.\n"
    );
}

#[test]
fn snapshots_are_named_by_date_and_slug_and_never_replaced() {
    let (_dir, settings) = workspace("UTC");
    let now = ts("2024-03-09T10:00:00Z");
    let first = write_snapshot(&settings, now, "Parser Refactor", "first <private>x</private>").expect("snapshot");
    let second = write_snapshot(&settings, now, "parser refactor!", "second").expect("snapshot");
    assert_eq!(first, PathBuf::from("memory/2024-03-09-parser-refactor.md"));
    assert_eq!(second, PathBuf::from("memory/2024-03-09-parser-refactor-2.md"));
    assert_eq!(read(settings.dir.join(&first)), "first\n");
    assert_eq!(read(settings.dir.join(&second)), "second\n");
}

#[test]
fn a_finished_session_appends_its_summary_line() {
    let (_dir, settings) = workspace("UTC");
    let mut tracker = SessionTracker::new();
    let start = ts("2026-02-18T11:59:15Z");
    tracker.start("agent:main:sinain", start);
    for tool in ["Write", "sessions_history", "Write", "Write", "sessions_history"] {
        tracker.record_tool("agent:main:sinain", tool, start);
    }
    for _ in 0..8 {
        tracker.record_message("agent:main:sinain", start);
    }
    tracker.record_tool("other-session", "Read", start);
    assert_eq!(tracker.active(), 2);

    let summary = tracker
        .end(
            &settings,
            "agent:main:sinain",
            Some("agent-7"),
            false,
            Some("timeout <private>token=abc</private>"),
            ts("2026-02-18T12:00:00Z"),
        )
        .expect("end")
        .expect("the session was tracked");

    assert_eq!(summary.duration_ms, 45_000);
    assert_eq!(tracker.active(), 1);
    let text = read(settings.dir.join("memory/session-summaries.jsonl"));
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 1);
    let line: serde_json::Value = serde_json::from_str(lines[0]).expect("JSON line");
    assert_eq!(
        line,
        json!({
            "ts": "2026-02-18T12:00:00Z",
            "sessionKey": "agent:main:sinain",
            "agentId": "agent-7",
            "durationMs": 45000,
            "success": false,
            "error": "timeout",
            "toolCallCount": 5,
            "toolBreakdown": {"Write": 3, "sessions_history": 2},
            "messageCount": 8
        })
    );
}

#[test]
fn ending_an_untracked_session_writes_nothing() {
    let (_dir, settings) = workspace("UTC");
    let mut tracker = SessionTracker::new();
    tracker.start("s1", ts("2024-03-09T10:00:00Z"));
    assert!(tracker.forget("s1"));
    let ended = tracker.end(&settings, "s1", None, true, None, ts("2024-03-09T10:01:00Z")).expect("end");
    assert_eq!(ended, None);
    assert!(!settings.dir.join("memory/session-summaries.jsonl").exists());
}

#[test]
fn command_log_lines_are_stripped_of_private_blocks() {
    let (_dir, settings) = workspace("UTC");
    let entry = CommandLogEntry {
        timestamp: ts("2024-03-09T10:00:00Z"),
        action: "workspace rotate".to_owned(),
        session_key: Some("s1".to_owned()),
        sender_id: None,
        source: "cli".to_owned(),
        detail: Some(json!({"args": ["--note", "<private>pw</private>ok"]})),
    };
    log_command(&settings, &entry).expect("log");
    log_command(&settings, &CommandLogEntry { detail: None, ..entry }).expect("log");

    let text = read(settings.dir.join("memory/commands.log"));
    let lines: Vec<serde_json::Value> = text.lines().map(|line| serde_json::from_str(line).expect("JSON line")).collect();
    assert_eq!(lines.len(), 2);
    assert_eq!(
        lines[0],
        json!({
            "timestamp": "2024-03-09T10:00:00Z",
            "action": "workspace rotate",
            "sessionKey": "s1",
            "senderId": null,
            "source": "cli",
            "detail": {"args": ["--note", "ok"]}
        })
    );
    assert!(lines[1].get("detail").is_none());
}

#[test]
fn a_full_command_log_is_moved_aside_never_over_an_earlier_one() {
    use mneme_workspace::journal::COMMAND_LOG_ROTATE_BYTES;
    let (_dir, settings) = workspace("UTC");
    let entry = CommandLogEntry {
        timestamp: ts("2024-03-09T10:00:00Z"),
        action: "status".to_owned(),
        session_key: None,
        sender_id: None,
        source: "cli".to_owned(),
        detail: None,
    };
    log_command(&settings, &entry).expect("log");
    let memory = settings.dir.join("memory");
    let full = "x".repeat(COMMAND_LOG_ROTATE_BYTES as usize) + "\n";
    for round in 0..2 {
        std::fs::write(memory.join("commands.log"), format!("{round}{full}")).expect("fill");
        log_command(&settings, &entry).expect("log");
        assert_eq!(read(memory.join("commands.log")).lines().count(), 1, "a fresh log with the new line");
    }
    assert!(read(memory.join("commands-2024-03-09.log")).starts_with("0xxx"), "the first full log kept");
    assert!(read(memory.join("commands-2024-03-09-2.log")).starts_with("1xxx"), "the second beside it");
}
