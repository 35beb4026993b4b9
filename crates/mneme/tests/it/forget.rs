//! Forgetting really forgets: after `mneme forget`, the erased text is in no file of the
//! data directory (database, WAL, shared memory), with and without encryption; the
//! tombstone, its audit entry and the lineage stay.

use std::io::Write as _;
use std::process::Stdio;

use crate::Mneme;

const ADDRESS: &str = "Musterstrasse";

fn say(m: &Mneme, text: &str, session: &str) {
    let body = serde_json::json!({ "event": { "content": text, "from": "dana" }, "ctx": { "sessionId": session, "channelId": "web" } });
    let mut child = m.command().args(["hook", "message_received"]).stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().expect("hook");
    child.stdin.take().expect("stdin").write_all(body.to_string().as_bytes()).expect("write");
    assert!(child.wait_with_output().expect("hook runs").status.success());
}

/// Files under the data directory whose bytes contain `needle` (case-insensitively).
fn files_holding(m: &Mneme, needle: &str) -> Vec<String> {
    let needle = needle.to_lowercase().into_bytes();
    let mut found = Vec::new();
    let mut stack = vec![m.dir.path().to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).expect("read dir").flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if let Ok(bytes) = std::fs::read(&path) {
                let lower: Vec<u8> = bytes.iter().map(u8::to_ascii_lowercase).collect();
                if lower.windows(needle.len()).any(|w| w == needle.as_slice()) {
                    found.push(path.display().to_string());
                }
            }
        }
    }
    found
}

fn forget_an_address(m: &Mneme) {
    m.ok(&["init"]);
    say(m, "Morning! I live in Lisbon.", "s1");
    say(m, &format!("my home address is {ADDRESS} 5, Munich"), "s1");
    say(m, "We moved to Munich last month.", "s1");
    say(m, "Can you remind me to call the plumber?", "s1");
    // Enough writes that index segments merged and pages were freed before the forget.
    for i in 0..40 {
        say(m, &format!("note {i}: the deploy checklist needs another look"), "s2");
    }
    if m.key.is_none() {
        assert!(!files_holding(m, ADDRESS).is_empty(), "the address is on disk before");
    }

    // A query without --yes and without a terminal asks and erases nothing.
    let refused = m.fails(&["forget", "--query", ADDRESS], 4);
    assert!(refused.contains("--yes"), "{refused}");
    assert!(m.json(&["recall", ADDRESS]).to_string().contains(ADDRESS), "nothing was erased");

    let plan = m.json(&["forget", "--query", &format!("{ADDRESS} 5"), "--dry-run"]);
    // The message, and the facts extracted from it (here: where Dana lives, with the
    // value it replaced): they go with it.
    let records = plan["records"].as_array().expect("records");
    let chosen: Vec<&serde_json::Value> = records.iter().filter(|r| r["because"] == "chosen").collect();
    assert_eq!(chosen.len(), 1, "{plan}");
    assert!(chosen[0]["summary"].as_str().unwrap_or("").contains(ADDRESS), "{plan}");
    assert!(records.iter().all(|r| r["because"] == "chosen" || r["memory_type"] == "semantic"), "{plan}");
    let report = m.json(&["forget", "--query", &format!("{ADDRESS} 5"), "--yes", "--reason", "dana asked"]);
    assert_eq!(report["dry_run"], false);
    assert_eq!(report["conversation_entries"], 1, "{report}");
    let id = report["records"].as_array().expect("records").iter().find(|r| r["because"] == "chosen").expect("chosen")["id"]
        .as_str()
        .expect("id")
        .to_string();

    // Not in queries, not in the tombstone, not in any file.
    assert!(!m.json(&["recall", ADDRESS, "--include-tombstones"]).to_string().contains(ADDRESS));
    let tombstone = m.json(&["show", &id])["record"].clone();
    assert_eq!(tombstone["status"], "retracted", "{tombstone}");
    assert!(tombstone["forgotten_at"].is_string() && tombstone["payload"].is_null(), "{tombstone}");
    assert!(!tombstone.to_string().contains(ADDRESS), "{tombstone}");
    let history = m.json(&["history", &id]);
    assert!(history.to_string().contains("\"forget\"") && history.to_string().contains("dana asked"), "{history}");
    let log = m.json(&["sync", "fetch", "--begin", "1", "--end", "100"]);
    assert!(log.to_string().contains("[forgotten]") && !log.to_string().contains(ADDRESS), "{log}");
    assert_eq!(files_holding(m, ADDRESS), Vec::<String>::new(), "the bytes are gone");
    // The neighbours are still searchable by their own words.
    assert!(m.json(&["recall", "plumber"]).as_array().is_some_and(|h| !h.is_empty()));
}

#[test]
fn forgetting_erases_the_text_from_every_file() {
    forget_an_address(&Mneme::new());
}

#[test]
fn forgetting_erases_the_text_from_every_file_of_an_encrypted_store() {
    let mut m = Mneme::new();
    m.key = Some("correct horse battery staple forget".into());
    forget_an_address(&m);
}

#[test]
fn forgetting_a_person_takes_their_facts_and_messages_and_keeps_others() {
    let m = Mneme::new();
    m.ok(&["init"]);
    say(&m, "I work at Initech and my sister lives in Rome.", "s1");
    let report = m.json(&["forget", "--subject", "dana", "--yes", "--reason", "account deleted"]);
    let kinds: Vec<&str> = report["records"].as_array().expect("records").iter().filter_map(|r| r["memory_type"].as_str()).collect();
    assert!(kinds.contains(&"episodic") && kinds.contains(&"semantic"), "{report}");
    assert_eq!(files_holding(&m, "Initech"), Vec::<String>::new());
    // Refusals name what is wrong and change nothing.
    assert!(m.fails(&["forget"], 2).contains("ids, a query, a subject or a user"));
    assert!(m.fails(&["forget", "not-an-id"], 2).contains("not-an-id") || m.fails(&["forget", "not-an-id"], 2).contains("id"));
}

fn hook(m: &Mneme, name: &str, body: serde_json::Value) {
    let mut child = m.command().args(["hook", name]).stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().expect("hook");
    child.stdin.take().expect("stdin").write_all(body.to_string().as_bytes()).expect("write");
    let out = child.wait_with_output().expect("hook runs");
    assert!(out.status.success(), "{name}: {}", String::from_utf8_lossy(&out.stdout));
}

/// The copies mneme made in the workspace go too: the session snapshot (named after the
/// conversation's first words), the daily log that names it, the index built from them.
/// A file the agent wrote itself is named in the report and left alone.
#[test]
fn forgetting_removes_the_text_from_mnemes_own_files_and_names_the_agents() {
    let m = Mneme::new();
    m.ok(&["init"]);
    m.ok(&["workspace", "init"]);
    let message = format!("{ADDRESS} 5 is my home address now");
    say(&m, &message, "s1");
    say(&m, "Can you remind me to call the plumber?", "s1");
    // Claude Code's SessionEnd: the snapshot and the daily-log entry from the transcript.
    let transcript = m.dir.path().join("t.jsonl");
    let lines = [
        serde_json::json!({ "type": "user", "message": { "role": "user", "content": message } }),
        serde_json::json!({ "type": "assistant", "message": { "role": "assistant", "content": "Noted, I will remember it." } }),
    ];
    std::fs::write(&transcript, lines.iter().map(|l| format!("{l}\n")).collect::<String>()).expect("transcript");
    let input =
        serde_json::json!({ "session_id": "s1", "transcript_path": transcript, "reason": "logout", "hook_event_name": "SessionEnd" });
    let mut child = m.command().args(["claude-hook", "session-end"]).stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().expect("spawn");
    child.stdin.take().expect("stdin").write_all(input.to_string().as_bytes()).expect("write");
    assert!(child.wait_with_output().expect("run").status.success());
    std::fs::remove_file(&transcript).expect("the transcript is Claude Code's, not mneme's");
    let ws = m.dir.path().join("workspace");
    std::fs::write(ws.join("notes.md"), format!("Dana: {ADDRESS} 5\n")).expect("the agent's own note");
    let before = files_holding(&m, ADDRESS);
    assert!(before.iter().any(|f| f.contains("/memory/")), "the snapshot and daily log hold it: {before:?}");

    let report = m.json(&["forget", "--query", ADDRESS, "--yes", "--reason", "dana asked"]);
    let rewritten = report["files_rewritten"].as_array().expect("files_rewritten");
    assert!(rewritten.len() >= 2, "the snapshot and the daily log: {report}");
    assert_eq!(report["workspace_files"], serde_json::json!(["notes.md"]), "{report}");
    let left = files_holding(&m, ADDRESS);
    assert_eq!(left, vec![ws.join("notes.md").display().to_string()], "only the agent's own file still holds it");
    // The conversation around it is still there.
    let today = jiff::Zoned::now().date();
    let snapshot = std::fs::read_to_string(ws.join(format!("memory/{today}-forgotten.md"))).expect("the renamed snapshot");
    assert!(snapshot.contains("**user**: [forgotten]") && snapshot.contains("Noted, I will remember it."), "{snapshot}");
}

/// `forget --user` takes what was made in that user's sessions, tool calls included; and
/// a query with a user is an intersection: another user's matching records stay.
#[test]
fn forgetting_a_user_takes_their_tool_calls_and_a_query_with_a_user_takes_only_theirs() {
    let m = Mneme::new();
    m.ok(&["init"]);
    let tool = |session: &str, query: &str| {
        let ctx = serde_json::json!({ "sessionId": session, "userId": "dana" });
        hook(
            &m,
            "before_tool_call",
            serde_json::json!({ "event": { "toolName": "web_search", "params": { "query": query } }, "ctx": ctx }),
        );
        hook(
            &m,
            "after_tool_call",
            serde_json::json!({ "event": { "toolName": "web_search", "params": { "query": query }, "success": true }, "ctx": ctx }),
        );
    };
    say(&m, "I am looking for vegetarian restaurants in Lisbon", "s1");
    tool("s1", "vegetarian restaurants Lisbon");
    let sam =
        serde_json::json!({ "event": { "content": "vegetarian food in Lisbon is great", "from": "sam" }, "ctx": { "sessionId": "s2" } });
    hook(&m, "message_received", sam);
    assert!(!files_holding(&m, "restaurants Lisbon").is_empty());

    // Query and user together: only Sam's records that say "vegetarian".
    let plan = m.json(&["forget", "--query", "vegetarian", "--user", "sam", "--dry-run"]);
    let summaries: Vec<&str> = plan["records"].as_array().expect("records").iter().filter_map(|r| r["summary"].as_str()).collect();
    assert!(!summaries.is_empty() && summaries.iter().all(|s| s.starts_with("sam:")), "{plan}");

    m.json(&["forget", "--user", "dana", "--yes", "--reason", "account deleted"]);
    assert_eq!(files_holding(&m, "restaurants Lisbon"), Vec::<String>::new(), "her search went with her");
    assert!(m.json(&["recall", "vegetarian", "--scope", "user:sam"]).to_string().contains("vegetarian food"), "Sam's message stays");
}

/// "Please forget my SSN", said in conversation, erases that user's records about it at
/// once (the request itself is not stored); an everyday "I always forget my keys" erases
/// nothing; another user's records are untouched.
#[test]
fn a_user_asking_in_conversation_to_forget_is_obeyed_and_everyday_phrases_are_not() {
    let m = Mneme::new();
    m.ok(&["init"]);
    say(&m, "my SSN is 078-05-1120 and I live in Porto", "s1");
    say(&m, "I always forget my keys", "s1");
    let facts = |m: &Mneme| m.json(&["recall", "Porto", "--type", "semantic"]).to_string();
    assert!(facts(&m).contains("Porto"), "the city was extracted: {}", facts(&m));
    let sam = serde_json::json!({ "event": { "content": "my SSN is 219-09-9999", "from": "sam" }, "ctx": { "sessionId": "s2" } });
    hook(&m, "message_received", sam);
    assert!(!files_holding(&m, "078-05-1120").is_empty());
    assert!(!files_holding(&m, "always forget my keys").is_empty(), "an everyday phrase is stored and erases nothing");
    // The conversation log, which memory sync hands to the agent, never held the number.
    let log = m.json(&["sync", "fetch", "--begin", "1", "--end", "100"]).to_string();
    assert!(log.contains("my SSN is [secret:ssn] and I live in Porto") && !log.contains("078-05-1120"), "{log}");

    let body = serde_json::json!({ "event": { "content": "Please forget my SSN.", "from": "dana" }, "ctx": { "sessionId": "s1" } });
    let mut child = m.command().args(["hook", "message_received"]).stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().expect("hook");
    child.stdin.take().expect("stdin").write_all(body.to_string().as_bytes()).expect("write");
    let out = child.wait_with_output().expect("hook runs");
    let outcome: serde_json::Value = serde_json::from_slice(&out.stdout).expect("the outcome");
    assert!(outcome["forgotten"].as_str().is_some_and(|f| f.starts_with("erased") && f.contains("dana")), "{outcome}");
    assert_eq!(files_holding(&m, "078-05-1120"), Vec::<String>::new(), "Dana's SSN is gone from every file");
    assert!(!files_holding(&m, "219-09-9999").is_empty(), "Sam's is not Dana's to erase");
    assert!(!files_holding(&m, "always forget my keys").is_empty());
    assert!(facts(&m).contains("Porto"), "the city said in the same message is not the SSN: {}", facts(&m));
    let log = m.json(&["sync", "fetch", "--begin", "1", "--end", "100"]).to_string();
    assert!(!log.contains("I live in Porto") && log.contains("[forgotten]"), "the log entry went too: {log}");
}

/// `decay` lists what it would prune (summary, age, salience); `decay --prune` asks first
/// (no terminal: nothing happens) unless --yes; a pruned short message keeps no text.
#[test]
fn pruning_shows_asks_and_keeps_no_whole_message() {
    let m = Mneme::new();
    m.ok(&["init"]);
    say(&m, &format!("my home address is {ADDRESS} 5, Munich"), "s1");
    // Nothing is pruned in its first `decay.prune_min_age_days` (14) in the store.
    let young = m.json(&["decay", "--threshold", "1.0"]);
    assert!(!young.to_string().contains(ADDRESS), "a record ingested today is never pruned: {young}");
    const NOW: &str = "decay.prune_min_age_days=0";
    let listed = m.ok(&["--set", NOW, "decay", "--threshold", "1.0"]);
    assert!(listed.contains(ADDRESS) && listed.contains("days") && listed.contains("salience"), "{listed}");
    let refused = m.fails(&["--set", NOW, "decay", "--prune", "--threshold", "1.0"], 4);
    assert!(refused.contains("--yes"), "{refused}");
    assert!(m.json(&["recall", ADDRESS]).to_string().contains(ADDRESS), "nothing was pruned");
    let pruned = m.json(&["--set", NOW, "decay", "--prune", "--yes", "--threshold", "1.0"]);
    assert!(pruned["pruned"].as_array().is_some_and(|p| !p.is_empty()), "{pruned}");
    let left = m.json(&["recall", "pruned", "--include-tombstones"]);
    assert!(!left.to_string().contains(ADDRESS), "a pruned short message keeps no text: {left}");
}
