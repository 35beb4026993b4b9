//! `mneme workspace` and the Claude Code workspace hooks, end to end through the binary.
//! (The file logic itself is tested in mneme-workspace.)

use crate::Mneme;

#[test]
fn init_is_idempotent_and_status_reports_budgets() {
    let m = Mneme::new();
    let first = m.json(&["workspace", "init"]);
    let created: Vec<&str> = first["created"].as_array().expect("created").iter().filter_map(|p| p.as_str()).collect();
    assert!(created.contains(&"identity.md") && created.contains(&"users/owner/profile.md"), "{created:?}");
    let ws = m.dir.path().join("workspace");
    std::fs::write(ws.join("state.md"), "x".repeat(3000)).expect("write state");
    let again = m.json(&["workspace", "init"]);
    assert_eq!(again["created"].as_array().map(Vec::len), Some(0), "{again}");
    assert_eq!(std::fs::read_to_string(ws.join("state.md")).expect("state").len(), 3000, "init overwrote a file");
    let status = m.json(&["workspace", "status"]);
    let state = status["files"].as_array().expect("files").iter().find(|f| f["path"] == "state.md").expect("state.md listed");
    assert_eq!(state["over_budget"], true, "{state}");
    assert!(m.ok(&["workspace", "status"]).contains("OVER BUDGET"));
}

#[test]
fn session_start_injects_the_workspace_and_never_fails() {
    let m = Mneme::new();
    m.ok(&["workspace", "init"]);
    let ws = m.dir.path().join("workspace");
    std::fs::write(ws.join("identity.md"), "# Identity\nI am Ada's assistant.\n").expect("identity");
    let out: serde_json::Value = serde_json::from_str(&m.ok(&["claude-hook", "session-start"])).expect("JSON on stdout");
    assert_eq!(out["hookSpecificOutput"]["hookEventName"], "SessionStart");
    let context = out["hookSpecificOutput"]["additionalContext"].as_str().expect("context");
    assert!(context.contains("I am Ada's assistant."), "{context}");

    // A broken configuration: empty result on stdout, the reason on stderr, exit 0.
    std::fs::write(m.dir.path().join("config.toml"), "[workspace]\ntimezone = \"Mars/Olympus\"\n").expect("config");
    let run = m.run(&["claude-hook", "session-start"]);
    assert!(run.status.success());
    assert_eq!(String::from_utf8_lossy(&run.stdout).trim(), "{}");
    assert!(String::from_utf8_lossy(&run.stderr).contains("Mars/Olympus"));
}

#[test]
fn the_context_hook_asks_for_a_flush_at_seventy_percent() {
    let m = Mneme::new();
    m.ok(&["workspace", "init"]);
    assert_eq!(m.ok(&["claude-hook", "context", "--usage", "69"]).trim(), "{}");
    let out: serde_json::Value = serde_json::from_str(&m.ok(&["claude-hook", "context", "--usage", "70"])).expect("JSON");
    let text = out["hookSpecificOutput"]["additionalContext"].as_str().expect("instruction");
    assert!(text.contains("Pre-Compaction Flush"), "{text}");
}

/// The workspace hooks have their own verb; the old `mneme hook session-start` spelling
/// still works (an alias kept for one release), and a mistyped name is refused by clap.
#[test]
fn claude_hooks_have_their_own_verb_and_the_old_spelling_still_works() {
    let m = Mneme::new();
    m.ok(&["workspace", "init"]);
    let new: serde_json::Value = serde_json::from_str(&m.ok(&["claude-hook", "session-start"])).expect("JSON");
    let old: serde_json::Value = serde_json::from_str(&m.ok(&["hook", "session-start"])).expect("JSON");
    assert_eq!(new, old);
    assert_eq!(new["hookSpecificOutput"]["hookEventName"], "SessionStart");
    let stderr = m.fails(&["claude-hook", "session_start"], 2);
    assert!(stderr.contains("session-start"), "the valid names are listed: {stderr}");
}
