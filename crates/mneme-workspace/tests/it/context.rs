//! The hook context: what `mneme hook session-start` injects, and the thresholds.

use mneme_workspace::context::{HookEvent, HookOutput, UnsummarizedInfo, context_check, prompt_submit, session_start};
use mneme_workspace::{PathRefusal, WorkspaceError, WorkspaceSettings};

use crate::{check_snapshot, initialised, tz, workspace, write};

#[test]
fn session_start_context_of_a_fresh_workspace_matches_its_snapshot() {
    let (_dir, settings) = initialised("Asia/Tokyo", "2024-03-09T20:00:00Z");
    // The references template names the workspace directory, which differs per run.
    let context = session_start(&settings, None).expect("context");
    let context = context.replace(&settings.dir.display().to_string(), "<workspace>");
    check_snapshot("context/session-start.txt", &context);
}

#[test]
fn session_start_injects_edited_files_and_the_sync_instruction_over_the_threshold() {
    let (_dir, mut settings) = initialised("UTC", "2024-03-09T10:00:00Z");
    settings.primary_user = "howard".to_owned();
    write(settings.dir.join("identity.md"), "# Identity\n\nI am Ada.\n\n\n");
    write(settings.dir.join("state.md"), "# Active State\n\n## Current Focus\nShip issue 5.\n");
    write(settings.dir.join("references.md"), "  \n");
    write(settings.dir.join("users/howard/profile.md"), "# User Profile: Howard\n- Prefers short answers\n");
    let pending = UnsummarizedInfo { count: 42, begin_id: 101, end_id: 142 };

    let context = session_start(&settings, Some(&pending)).expect("context");

    check_snapshot("context/session-start-edited.txt", &context);
    assert!(!context.contains("=== REFERENCES ==="), "whitespace-only files are skipped");
}

#[test]
fn session_start_without_a_workspace_says_so_instead_of_failing() {
    let (_dir, settings) = workspace("UTC");
    let context = session_start(&settings, None).expect("no workspace is not an error");
    assert_eq!(context, "=== CORE MEMORY ===\n\nNo memory files found. This may be a fresh install.");
    let at_threshold = UnsummarizedInfo { count: 30, begin_id: 1, end_id: 30 };
    assert_eq!(session_start(&settings, Some(&at_threshold)).expect("context"), context);
}

#[test]
fn session_start_refuses_a_profile_symlinked_out_of_the_workspace() {
    let (dir, settings) = initialised("UTC", "2024-03-09T10:00:00Z");
    let outside = dir.path().join("secret.md");
    write(&outside, "not memory");
    let profile = settings.dir.join("users/owner/profile.md");
    std::fs::remove_file(&profile).expect("remove profile");
    std::os::unix::fs::symlink(&outside, &profile).expect("symlink");

    let error = session_start(&settings, None).expect_err("escape");

    assert!(matches!(error, WorkspaceError::PathRefused { reason: PathRefusal::SymlinkEscape, .. }), "{error}");
}

#[test]
fn threshold_and_flush_instructions_match_their_snapshots() {
    let settings = WorkspaceSettings::new("/srv/agent/workspace", tz("UTC"));
    let pending = UnsummarizedInfo { count: 31, begin_id: 7, end_id: 37 };
    let sync = prompt_submit(&settings, Some(&pending)).expect("31 > 30");
    let flush = context_check(&settings, 72.5).expect("72.5 >= 70");
    check_snapshot("context/prompt-submit.txt", &sync);
    check_snapshot("context/context-check.txt", &flush);

    let mut lenient = settings.clone();
    lenient.sync_threshold = 50;
    lenient.flush_at_percent = 90;
    assert_eq!(prompt_submit(&lenient, Some(&pending)), None);
    assert_eq!(context_check(&lenient, 89.0), None);
}

#[test]
fn hook_output_is_what_claude_code_reads() {
    let (_dir, settings) = initialised("UTC", "2024-03-09T10:00:00Z");
    let context = session_start(&settings, None).expect("context");
    let line = HookOutput::new(HookEvent::SessionStart, Some(context.clone())).to_json();
    let parsed: serde_json::Value = serde_json::from_str(&line).expect("valid JSON");
    assert_eq!(parsed["hookSpecificOutput"]["hookEventName"], "SessionStart");
    assert_eq!(parsed["hookSpecificOutput"]["additionalContext"], context.as_str());
    assert!(!line.contains('\n'), "one line on stdout");
}
