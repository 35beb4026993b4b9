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

/// Knowledge modules through the binary: extract from a week of notes, activate, see the
/// module in the effective playbook and the next session's context, suspend it again; every
/// refusal exits with its code and changes nothing; `workspace sync` restores what mneme
/// owns and keeps what the user owns; every command lands in the command log.
#[test]
fn modules_go_from_extraction_to_the_next_session_and_back() {
    let m = Mneme::new();
    let init = m.json(&["workspace", "init"]);
    let synced: Vec<&str> = init["sync"]["files"].as_array().expect("sync files").iter().filter_map(|f| f["path"].as_str()).collect();
    assert!(synced.contains(&"HEARTBEAT.md") && synced.contains(&"modules/base-behaviors/patterns.md"), "{synced:?}");
    let ws = m.dir.path().join("workspace");
    let today = jiff::Zoned::now().date();
    std::fs::write(
        ws.join(format!("memory/{today}.md")),
        "# Daily Log\n\n- Metro crashed: restart with --reset-cache\n- Metro crashed: restart with --reset-cache\n- Expo prebuild once fixed the camera module\n",
    )
    .expect("notes");

    let out = m.ok(&["module", "extract", "react-native-dev", "--domain", "React Native", "--keyword", "metro", "--keyword", "expo"]);
    assert!(out.contains("extracted react-native-dev offline (no LLM configured): 1 established, 1 emerging"), "{out}");
    assert!(out.contains("activate it with: mneme module activate react-native-dev"), "{out}");
    let list = m.json(&["module", "list"]);
    let rn = list["modules"].as_array().expect("modules").iter().find(|x| x["id"] == "react-native-dev").expect("listed").clone();
    assert_eq!((rn["status"].as_str(), rn["priority"].as_i64()), (Some("suspended"), Some(50)));

    // Refusals: each with its exit code, nothing changed.
    let registry = || std::fs::read_to_string(ws.join("modules/module-registry.json")).expect("registry");
    let before = registry();
    assert!(
        m.fails(&["module", "priority", "react-native-dev", "101"], 2).contains("outside module \"react-native-dev\"'s range [50, 100]")
    );
    assert!(m.fails(&["module", "suspend", "base-behaviors"], 4).contains("is locked"));
    assert!(m.fails(&["module", "activate", "nope"], 3).contains("unknown module \"nope\""));
    assert!(m.fails(&["module", "extract", "react-native-dev", "--domain", "again"], 4).contains("already exists"));
    assert_eq!(registry(), before);

    let activated = m.json(&["module", "activate", "react-native-dev", "--priority", "80"]);
    assert_eq!(
        activated["stack"],
        serde_json::json!([{ "id": "react-native-dev", "priority": 80 }, { "id": "base-behaviors", "priority": 0 }])
    );
    assert_eq!(m.ok(&["module", "stack"]), "  80  react-native-dev\n   0  base-behaviors\n");
    let effective = std::fs::read_to_string(ws.join("memory/sinain-playbook-effective.md")).expect("effective");
    assert!(effective.starts_with("<!-- module-stack: react-native-dev(80), base-behaviors(0) -->"), "{effective}");
    let context = m.ok(&["claude-hook", "session-start"]);
    assert!(context.contains("Metro crashed: restart with --reset-cache"), "{context}");
    m.ok(&["module", "suspend", "react-native-dev"]);
    assert!(!m.ok(&["claude-hook", "session-start"]).contains("Metro crashed"));

    // A corrupt registry: changes refused (exit 4, file untouched); sync sets it aside.
    std::fs::write(ws.join("modules/module-registry.json"), "{\"version\": 1, \"modules\": {\"x\": 3}}").expect("corrupt");
    assert!(m.fails(&["module", "activate", "react-native-dev"], 4).contains("modules/module-registry.json: modules.x"));
    assert_eq!(
        std::fs::read_to_string(ws.join("modules/module-registry.json")).expect("kept"),
        "{\"version\": 1, \"modules\": {\"x\": 3}}"
    );
    std::fs::write(ws.join("HEARTBEAT.md"), "scribbled").expect("scribble");
    let sync = m.ok(&["workspace", "sync"]);
    assert!(
        sync.contains("the module registry was unreadable") && sync.contains("set aside as modules/module-registry.json.corrupt-"),
        "{sync}"
    );
    assert!(sync.contains("updated   HEARTBEAT.md  (always-overwrite: restored to the shipped version)"), "{sync}");
    assert!(
        sync.contains("skipped   modules/react-native-dev/patterns.md") || sync.contains("skipped   modules/base-behaviors/patterns.md"),
        "{sync}"
    );
    assert_eq!(m.json(&["module", "info", "react-native-dev"])["status"], "suspended", "rebuilt from the folders");

    let log = std::fs::read_to_string(ws.join("memory/commands.log")).expect("command log");
    let actions: Vec<String> = log
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["source"] == "cli")
        .map(|v| format!("{} {}", v["action"].as_str().unwrap_or_default(), v["detail"]["exit"]))
        .collect();
    assert!(actions.contains(&"module extract 0".to_string()) && actions.contains(&"module suspend 4".to_string()), "{actions:?}");
    assert!(actions.contains(&"workspace sync 0".to_string()), "{actions:?}");
}

/// Claude Code's SessionEnd: a daily-log entry and a named snapshot from the transcript,
/// nothing on stdout that Claude Code would misread, exit 0.
#[test]
fn session_end_writes_the_daily_entry_and_a_snapshot_from_the_transcript() {
    let m = Mneme::new();
    m.ok(&["workspace", "init"]);
    let ws = m.dir.path().join("workspace");
    let transcript = m.dir.path().join("t.jsonl");
    let lines = [
        serde_json::json!({ "type": "user", "message": { "role": "user", "content": "Plan the Lisbon offsite" } }),
        serde_json::json!({ "type": "assistant", "message": { "role": "assistant", "content": [{ "type": "text", "text": "Booked the venue <private>card 4111</private>" }, { "type": "tool_use", "name": "Bash" }] } }),
    ];
    std::fs::write(&transcript, lines.iter().map(|l| format!("{l}\n")).collect::<String>()).expect("transcript");
    let input =
        serde_json::json!({ "session_id": "abc", "transcript_path": transcript, "reason": "logout", "hook_event_name": "SessionEnd" });
    let mut child = m
        .command()
        .args(["claude-hook", "session-end"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("spawn");
    use std::io::Write as _;
    child.stdin.take().expect("stdin").write_all(input.to_string().as_bytes()).expect("write");
    let out = child.wait_with_output().expect("run");
    assert!(out.status.success());
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "{}");
    let today = jiff::Zoned::now().date();
    let snapshot = std::fs::read_to_string(ws.join(format!("memory/{today}-plan-the-lisbon-offsite.md"))).expect("snapshot");
    assert!(snapshot.contains("**assistant**: Booked the venue") && !snapshot.contains("4111"), "{snapshot}");
    assert!(std::fs::read_to_string(ws.join(format!("memory/{today}.md"))).expect("daily").contains("Session ended: abc (logout)"));
}

/// `workspace add-user` creates a new user's profile (zylos §3.3), which the session-start
/// block then loads when that user speaks; adding them twice is refused (exit 4) and a
/// path-like id is refused (exit 2), each naming what was wrong.
#[test]
fn add_user_creates_the_profile_the_session_start_block_loads() {
    let m = Mneme::new();
    m.ok(&["workspace", "init"]);
    let added: serde_json::Value =
        serde_json::from_str(&m.ok(&["workspace", "add-user", "dana", "--name", "Dana Weber", "--json"])).expect("JSON");
    assert_eq!(added["created"], "users/dana/profile.md", "{added}");
    let out: serde_json::Value = serde_json::from_str(&m.ok(&["claude-hook", "session-start", "--user", "dana"])).expect("JSON");
    let context = out["hookSpecificOutput"]["additionalContext"].as_str().expect("context");
    assert!(context.contains("User Profile: Dana Weber"), "{context}");
    let again = m.fails(&["workspace", "add-user", "dana"], 4);
    assert!(again.contains("users/dana/profile.md already exists"), "{again}");
    let bad = m.fails(&["workspace", "add-user", "../root"], 2);
    assert!(bad.contains("../root"), "{bad}");
}
