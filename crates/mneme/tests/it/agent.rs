//! `mneme sync`, `mneme schedule`, `mneme search` and the store side of the workspace hooks,
//! end to end through the binary. (The scheduler's daemon loop and the debounced re-index
//! are tested in mneme-server.)

use std::io::Write as _;
use std::process::Stdio;

use jiff::{SignedDuration, Timestamp};

use crate::Mneme;

fn workspace() -> Mneme {
    let m = Mneme::init();
    m.ok(&["workspace", "init"]);
    m
}

/// Runs a hook with `stdin` and returns its additionalContext ("" when none).
fn hook(m: &Mneme, name: &str, stdin: &str) -> String {
    hook_with(m, &["hook", name], stdin)
}

/// [`hook`] with the command's arguments given whole (`claude-hook NAME --user dana`).
fn hook_with(m: &Mneme, args: &[&str], stdin: &str) -> String {
    let mut child = m.command().args(args).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("spawn");
    child.stdin.take().expect("stdin").write_all(stdin.as_bytes()).expect("write stdin");
    let out = child.wait_with_output().expect("hook runs");
    assert!(out.status.success(), "hooks never fail: {}", String::from_utf8_lossy(&out.stderr));
    let value: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON on stdout");
    value["hookSpecificOutput"]["additionalContext"].as_str().unwrap_or("").to_string()
}

/// One session-start block (zylos §8.2, §16.1; issue 40): with a store, Claude Code's
/// session-start gives the hook engine's block (the daemon's `session_start` builds it too),
/// in one documented order and within one budget: the workspace's files with the profile of
/// the user who is speaking (zylos §3), what is true now, the knowledge entries relevant to
/// the active state, the last checkpoint's summary and the conversation since, the playbook.
#[test]
fn session_start_gives_one_block_in_order_within_one_budget() {
    let m = workspace();
    let ws = m.dir.path().join("workspace");
    std::fs::create_dir_all(ws.join("users/dana")).expect("mkdir");
    std::fs::write(ws.join("users/dana/profile.md"), "# User Profile: Dana\n\n## Preferences\n- Likes short answers\n").expect("profile");
    std::fs::write(
        ws.join("reference/projects.md"),
        "# Projects\n\n## Infra\n\nThe kubernetes migration is blocked on the load balancer.\n",
    )
    .expect("projects");
    std::fs::write(ws.join("state.md"), "# Active State\n\n## Current Focus\n- unblock the kubernetes migration\n").expect("state");
    let say = |prompt: &str| {
        hook_with(&m, &["claude-hook", "prompt-submit", "--user", "dana"], &serde_json::json!({ "prompt": prompt }).to_string())
    };
    say("the standup moved to 10am");
    m.ok(&["sync", "checkpoint", "1", "--summary", "Standup time recorded"]);
    say("I live in Lisbon.");
    say("Quick update: we moved to Munich last month.");

    let start = hook_with(&m, &["claude-hook", "session-start", "--user", "dana"], "{}");
    let order = [
        "## Identity (identity.md)",
        "## Active state (state.md)",
        "## References (references.md)",
        "## User: dana (users/dana/profile.md)",
        "Likes short answers",
        "## What is true now",
        "- lives in: Munich",
        "## Relevant knowledge (the agent's files)",
        "`reference/projects.md:1-5` (Projects)",
        "## Since the last sync",
        "Last checkpoint (",
        "Standup time recorded",
        "dana: Quick update: we moved to Munich last month.",
        "## Playbook",
        "## How I am",
    ];
    let mut at = 0;
    for part in order {
        let found = start[at..].find(part).unwrap_or_else(|| panic!("{part:?} missing or out of order in:\n{start}"));
        at += found + part.len();
    }
    assert!(!start.contains("Lisbon"), "the old city is in no section, the conversation's neither: {start}");
    assert!(start.contains("earlier message(s) naming values the user has since changed left out"), "{start}");
    assert!(!start.contains("=== "), "one block, not the files' block beside the store's: {start}");
    // The files the block injected count as read.
    let found = m.json(&["search", "unblock", "--lexical"]);
    let state = found["hits"].as_array().expect("hits").iter().find(|h| h["path"] == "state.md").expect("state.md");
    assert_eq!(state["reads"], 2, "injected once, found once: {found}");
    // Without --user: the primary user's profile.
    let primary = hook(&m, "session-start", "{}");
    assert!(primary.contains("## Primary user: owner (users/owner/profile.md)") && !primary.contains("Likes short answers"), "{primary}");

    // One budget: what does not fit is cut or named as left out.
    std::fs::write(m.dir.path().join("config.toml"), "[hooks.session_start]\nbudget_chars = 1500\n").expect("config");
    let small = hook_with(&m, &["claude-hook", "session-start", "--user", "dana"], "{}");
    assert!(small.len() <= 1600, "{} bytes: {small}", small.len());
    assert!(small.contains("[Left out to fit the session-start budget: ") && small.contains("Playbook"), "{small}");
    // The store's block off: the files still come, in the seed's shape, the speaker's profile too.
    std::fs::write(m.dir.path().join("config.toml"), "[hooks]\nenabled = false\n").expect("config");
    let off = hook_with(&m, &["claude-hook", "session-start", "--user", "dana"], "{}");
    assert!(off.contains("=== BOT IDENTITY ===") && off.contains("=== USER: dana ===") && !off.contains("## What is true now"), "{off}");
    std::fs::write(m.dir.path().join("config.toml"), "[hooks.session_start]\nbudget_chars = 10\n").expect("config");
    assert!(m.fails(&["config", "show"], 6).contains("hooks.session_start.budget_chars"));
}

#[test]
fn sync_counts_fetches_and_checkpoints_and_a_crashed_sync_refetches_the_same_range() {
    let m = workspace();
    for i in 1..=31 {
        let text = format!("message {i} <private>card 4111-1111</private>");
        m.ok(&["sync", "log", "--channel", "telegram", "--user", "ada", &text]);
    }
    let status = m.json(&["sync", "status"]);
    assert_eq!((status["unsummarized"].as_u64(), status["begin_id"].as_i64(), status["end_id"].as_i64()), (Some(31), Some(1), Some(31)));
    // Over the threshold (30): both hooks ask for a Memory Sync with the range.
    let context = hook(&m, "session-start", "{}");
    assert!(context.contains("[Action Required] There are 31 unsummarized conversations (conversation id 1 ~ 31)."), "{context}");

    let fetched = m.json(&["sync", "fetch", "--begin", "1", "--end", "31"]);
    let fetched = fetched.as_array().expect("list");
    assert_eq!(fetched.len(), 31);
    assert_eq!(fetched[0]["content"], "message 1", "private blocks are never stored");
    assert_eq!(
        (fetched[0]["channel"].as_str(), fetched[0]["user_id"].as_str(), fetched[0]["direction"].as_str()),
        (Some("telegram"), Some("ada"), Some("in"))
    );

    // The sync "crashes" after fetching: no checkpoint, so the same range comes back.
    let again = m.json(&["sync", "status"]);
    assert_eq!((again["begin_id"].as_i64(), again["end_id"].as_i64()), (Some(1), Some(31)));
    assert_eq!(m.json(&["sync", "fetch", "--begin", "1", "--end", "31"]).as_array().map(Vec::len), Some(31));

    // Refused checkpoints change nothing.
    assert!(m.fails(&["sync", "checkpoint", "32", "--summary", "too far"], 4).contains("the log ends at 31"));
    assert!(m.fails(&["sync", "checkpoint", "31", "--summary", "  "], 2).contains("summary"));
    assert!(m.fails(&["sync", "fetch", "--begin", "9", "--end", "3"], 2).contains("before --begin"));
    assert_eq!(m.json(&["sync", "status"])["last_checkpoint"], serde_json::Value::Null);

    let done = m.json(&["sync", "checkpoint", "31", "--summary", "Ada's preferences recorded"]);
    assert_eq!((done["already_existed"].as_bool(), done["covered"].as_u64()), (Some(false), Some(31)));
    // A retried checkpoint (the sync crashed after committing it) is the same checkpoint.
    let retried = m.json(&["sync", "checkpoint", "31", "--summary", "again"]);
    assert_eq!(
        (retried["already_existed"].as_bool(), retried["checkpoint"]["summary"].as_str()),
        (Some(true), Some("Ada's preferences recorded"))
    );
    assert!(m.fails(&["sync", "checkpoint", "5", "--summary", "back"], 4).contains("already checkpointed"));
    let after = m.json(&["sync", "status"]);
    assert_eq!((after["unsummarized"].as_u64(), after["begin_id"].as_i64()), (Some(0), None));
    assert!(!hook(&m, "session-start", "{}").contains("[Action Required]"));
}

/// Claude Code's hooks consult the store: what the user says in prompts becomes facts,
/// reconciled over time; session-start injects what is true now, prompt-submit the few
/// memories relevant to the prompt (with their dates), unless `[hooks.auto_recall]` is off.
#[test]
fn claude_code_hooks_remember_the_user_and_inject_what_is_true_now() {
    let m = workspace();
    hook(&m, "prompt-submit", r#"{"prompt":"I live in Lisbon and I work at Acme."}"#);
    hook(&m, "prompt-submit", r#"{"prompt":"Quick update: we moved to Munich last month."}"#);
    let start = hook(&m, "session-start", r#"{"session_id":"s2"}"#);
    assert!(start.contains("## What is true now") && start.contains("### owner (the user)"), "{start}");
    assert!(start.contains("- lives in: Munich (since ") && start.contains("- works at: Acme"), "{start}");
    assert!(!start.contains("Lisbon"), "the old city is not stated: {start}");
    let recalled = hook(&m, "prompt-submit", r#"{"prompt":"Which city do I live in again?"}"#);
    assert!(recalled.contains("## Relevant memories\n\n- owner lives in Munich (since "), "{recalled}");
    // The history keeps the old value: superseded, not deleted.
    let facts = m.json(&["recall", "Lisbon", "--include-tombstones", "--type", "semantic"]);
    let lisbon = facts.as_array().expect("hits").iter().find(|h| h["record"]["payload"]["object"] == "Lisbon").expect("old fact");
    assert_eq!(lisbon["record"]["status"], "superseded", "{lisbon}");

    std::fs::write(m.dir.path().join("config.toml"), "[hooks.auto_recall]\nenabled = false\n").expect("config");
    let off = hook(&m, "prompt-submit", r#"{"prompt":"Which city do I live in again?"}"#);
    assert!(!off.contains("Relevant memories"), "{off}");
}

/// A question is not knowledge: asked in lower case without a `?`, it does not overwrite
/// the fact it asks about, and later prompts are not offered the user's own earlier
/// questions as "relevant memories" (they stay in the store, found by their tag).
#[test]
fn questions_neither_become_facts_nor_come_back_as_memories() {
    let m = workspace();
    hook(&m, "prompt-submit", r#"{"prompt":"my editor is zed"}"#);
    hook(&m, "prompt-submit", r#"{"prompt":"what editor does sam use"}"#);
    hook(&m, "prompt-submit", r#"{"prompt":"where does sam live now?"}"#);
    hook(&m, "prompt-submit", r#"{"prompt":"Where do I keep the editor config?"}"#);
    let facts = m.json(&["recall", "editor", "--type", "semantic"]);
    let objects: Vec<&str> = facts.as_array().expect("hits").iter().filter_map(|h| h["record"]["payload"]["object"].as_str()).collect();
    assert_eq!(objects, ["zed"], "{facts}");
    let recalled = hook(&m, "prompt-submit", r#"{"prompt":"which editor do I use, and where does sam live?"}"#);
    assert!(recalled.contains("zed"), "{recalled}");
    assert!(!recalled.contains("what editor does sam use") && !recalled.contains("where does sam live now"), "{recalled}");
    let default = m.json(&["recall", "sam"]);
    let questions = default.as_array().expect("hits").iter().filter(|h| h["record"]["tags"].to_string().contains("kind:question")).count();
    assert_eq!(questions, 0, "default recall offers no questions: {default}");
    let tagged = m.json(&["recall", "sam", "--tag", "kind:question"]);
    let texts: Vec<&str> = tagged.as_array().expect("hits").iter().filter_map(|h| h["record"]["payload"]["text"].as_str()).collect();
    assert!(
        texts.contains(&"what editor does sam use") && texts.contains(&"where does sam live now?"),
        "the questions are kept: {texts:?}"
    );
}

/// What a message states before it asks is a statement: "Anniversary coming up with
/// Maelys (my partner), any gift ideas?" makes Maelys the partner, and the message is
/// still kept as a question. A clause that asks first, or only supposes ("Say we moved
/// to …", "Were I to retrain as …"), makes no fact.
#[test]
fn what_a_message_states_before_it_asks_is_a_fact() {
    let m = workspace();
    for prompt in [
        "Anniversary coming up with Maelys (my partner), any gift ideas that aren't flowers?",
        "Should I move to Madrid, since I live in Lisbon now?",
        "Say we moved to Exoscale; would the DNS setup change?",
        "Were I to retrain as a machine learning engineer, would I need a degree?",
    ] {
        hook(&m, "prompt-submit", &serde_json::json!({ "prompt": prompt }).to_string());
    }
    let facts = m.json(&["recall", "", "--type", "semantic", "--limit", "50"]);
    let objects: Vec<&str> = facts.as_array().expect("hits").iter().filter_map(|h| h["record"]["payload"]["object"].as_str()).collect();
    assert_eq!(objects, ["Maelys"], "{facts}");
    let tagged = m.json(&["recall", "Maelys", "--tag", "kind:question"]);
    assert!(tagged.to_string().contains("Anniversary coming up with Maelys"), "still a question: {tagged}");
}

/// Fail safe: when extraction misses a change, the fact it made earlier does not come
/// first; the newer statement that names the fact's value does, with its date.
#[test]
fn a_fact_yields_to_a_newer_statement_that_names_its_value() {
    let m = workspace();
    hook(&m, "prompt-submit", r#"{"prompt":"Our project is hosted on UpCloud."}"#);
    let before = m.json(&["recall", "Which hosting company runs the project's servers?"]);
    assert!(before[0]["record"]["payload"]["object"] == "UpCloud", "the fact answers first: {before}");
    hook(&m, "prompt-submit", r#"{"prompt":"Hi again! We shifted everything over to Rackspace because UpCloud kept going down."}"#);
    let after = m.json(&["recall", "Which hosting company runs the project's servers?"]);
    let first = after[0]["record"]["payload"].to_string();
    assert!(first.contains("Rackspace"), "the newer statement comes first: {after}");
    let fact = after.as_array().expect("hits").iter().position(|h| h["record"]["payload"]["object"] == "UpCloud");
    assert!(fact.is_some_and(|i| i > 0), "the older fact is still shown, after it: {after}");
    // Asked for facts only, no event joins them: the fact stands, marked as in doubt.
    let facts = m.json(&["recall", "Which hosting company runs the project's servers?", "--type", "semantic"]);
    let facts = facts.as_array().expect("hits");
    assert!(facts.iter().all(|h| h["record"]["memory_type"] == "semantic"), "{facts:?}");
    let doubted = facts.iter().find(|h| h["record"]["payload"]["object"] == "UpCloud").expect("the fact");
    assert!(doubted["outdated"]["statement"].is_string() && doubted["outdated"]["new"].is_null(), "{doubted}");
    // The session-start block does not state it at all: the newer words stand in its place.
    let start = hook(&m, "session-start", r#"{"session_id":"s2"}"#);
    assert!(!start.contains("UpCloud (since "), "{start}");
    assert!(start.contains("they said \"Hi again! We shifted everything over to Rackspace"), "{start}");
    assert!(start.contains("(newer than the value recorded on "), "{start}");
}

#[test]
fn a_fact_yields_to_a_newer_statement_naming_another_known_value_of_its_slot() {
    let m = workspace();
    hook(&m, "prompt-submit", r#"{"prompt":"My primary programming language is Dart."}"#);
    hook(&m, "prompt-submit", r#"{"prompt":"Learning curve on Zig is steep but it's what I use daily now"}"#);
    // Someone else's habit names a language the user does not use.
    hook(&m, "prompt-submit", r#"{"prompt":"Kofi keeps pitching Haskell in every architecture meeting"}"#);
    let hits = m.json(&["recall", "Which programming language does the user code in?"]);
    assert!(hits[0]["record"]["payload"].to_string().contains("Zig is steep"), "the newer words come first: {hits}");
    let start = hook(&m, "session-start", r#"{"session_id":"s2"}"#);
    // The hooks keep the first-person sentence as a fact of no slot; that reads nothing
    // against the statement (it hid it before).
    assert!(start.contains("- Learning curve on Zig is steep"), "{start}");
    assert!(!start.contains("Dart (since "), "the older value is not stated as a fact: {start}");
    assert!(
        start.contains("they said \"Learning curve on Zig is steep but it's what I use daily now\" (newer than the value recorded on "),
        "{start}"
    );
    assert!(start.contains("they said \"Learning curve on Zig"), "{start}");
}

#[test]
fn a_fact_about_someone_else_does_not_answer_a_question_about_the_user() {
    let m = workspace();
    hook(&m, "prompt-submit", r#"{"prompt":"My sister's dog is called Biscuit."}"#);
    hook(&m, "prompt-submit", r#"{"prompt":"Took Pepper to the vet, my pet greyhound hates the car"}"#);
    let first = |q: &str| m.json(&["recall", q])[0]["record"]["payload"].to_string();
    // The sister's pet is hers: the user's own words come first.
    assert!(first("What is the name of my pet?").contains("Pepper"), "{}", m.json(&["recall", "What is the name of my pet?"]));
    // Asked about the sister, her fact stands.
    assert!(first("What is my sister's dog called?").contains("Biscuit"));
}

#[test]
fn what_was_said_before_a_fact_changed_is_marked_as_possibly_outdated() {
    let m = workspace();
    hook(&m, "prompt-submit", r#"{"prompt":"I live in Lisbon."}"#);
    hook(&m, "prompt-submit", r#"{"prompt":"my commute across Lisbon to the office is 20 minutes"}"#);
    hook(&m, "prompt-submit", r#"{"prompt":"My sister lives in Lisbon."}"#);
    let commute = |m: &Mneme| -> serde_json::Value {
        let hits = m.json(&["recall", "commute to the office"]);
        hits.as_array()
            .expect("hits")
            .iter()
            .find(|h| h["record"]["summary"].as_str().is_some_and(|s| s.contains("commute")))
            .cloned()
            .expect("found")
    };
    assert!(commute(&m).get("outdated").is_none(), "nothing changed yet");
    hook(&m, "prompt-submit", r#"{"prompt":"I moved to Munich last month."}"#);
    let hit = commute(&m);
    assert_eq!(hit["outdated"]["by"], "names_old", "{hit}");
    assert_eq!((hit["outdated"]["old"].as_str(), hit["outdated"]["new"].as_str()), (Some("Lisbon"), Some("Munich")), "{hit}");
    // Someone else's value is theirs: the sister still lives in Lisbon.
    let sister = m.json(&["recall", "sister"]);
    let said = sister
        .as_array()
        .expect("hits")
        .iter()
        .find(|h| h["record"]["summary"].as_str().is_some_and(|s| s.contains("My sister")))
        .expect("found");
    assert!(said.get("outdated").is_none(), "{said}");
    // People see it too: the CLI's listing and the prompt's auto-recall say so.
    let text = m.ok(&["recall", "commute to the office"]);
    assert!(text.contains("possibly outdated: said before lives in changed to Munich on "), "{text}");
    let recalled = hook(&m, "prompt-submit", r#"{"prompt":"how long is my commute to the office?"}"#);
    assert!(recalled.contains("possibly outdated"), "{recalled}");
    // The session-start block states no fact that names the old value as current: not
    // the user's (the move replaced it) and not a known fact read from those words.
    let start = hook(&m, "session-start", r#"{"session_id":"s1"}"#);
    let known = start.split("### Known facts").nth(1).unwrap_or_default();
    assert!(!known.contains("Lisbon"), "{start}");

    // A fact that comes with another (a manager with an employer) is not stated as
    // current once the other changes.
    hook(&m, "prompt-submit", r#"{"prompt":"I work at Acme."}"#);
    hook(&m, "prompt-submit", r#"{"prompt":"My manager is Petra."}"#);
    let start = hook(&m, "session-start", r#"{"session_id":"s2"}"#);
    assert!(start.contains("- reports to: Petra (since "), "{start}");
    hook(&m, "prompt-submit", r#"{"prompt":"I just started a new job at Globex."}"#);
    let start = hook(&m, "session-start", r#"{"session_id":"s3"}"#);
    let line = start.lines().find(|l| l.starts_with("- reports to: Petra (since ")).unwrap_or_default();
    assert!(line.contains("), possibly outdated: said before works at changed to Globex on "), "{start}");
}

#[test]
fn prompt_submit_logs_the_prompt_and_delivers_each_dispatch_once() {
    let m = workspace();
    let context = hook(&m, "prompt-submit", r#"{"session_id":"s1","prompt":"Please deploy on Friday <private>token abc</private>"}"#);
    assert_eq!(context, "", "nothing to say yet");
    let logged = m.json(&["sync", "fetch", "--begin", "1", "--end", "1"]);
    assert_eq!(logged[0]["content"], "Please deploy on Friday");
    assert_eq!((logged[0]["channel"].as_str(), logged[0]["user_id"].as_str()), (Some("claude-code"), Some("owner")));

    m.ok(&["schedule", "add", "standup", "--every", "1h", "--message", "Post the standup summary"]);
    let later = (Timestamp::now() + SignedDuration::from_mins(61)).to_string();
    // A dry run names what is due and runs nothing (the real pass below still runs it).
    let dry = m.json(&["schedule", "run-due", "--now", &later, "--dry-run"]);
    assert!(
        dry["ran"]
            .as_array()
            .is_some_and(|r| r.iter().any(|t| t["task"] == "standup" && t["detail"].as_str().unwrap_or("").contains("dry run"))),
        "{dry}"
    );
    let pass = m.json(&["schedule", "run-due", "--now", &later]);
    let ran: Vec<&str> = pass["ran"].as_array().expect("ran").iter().filter_map(|r| r["task"].as_str()).collect();
    assert!(ran.contains(&"standup"), "{pass}");
    let context = hook(&m, "prompt-submit", r#"{"prompt":"next"}"#);
    assert!(context.contains("Post the standup summary"), "{context}");
    assert!(!hook(&m, "prompt-submit", r#"{"prompt":"and again"}"#).contains("standup"), "delivered once");
    // Not JSON on stdin: the hook still answers.
    assert_eq!(hook(&m, "prompt-submit", "not json"), "");

    // A host shared by several people names the prompt's author.
    let mut child = m
        .command()
        .args(["claude-hook", "prompt-submit", "--user", "dana"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn");
    child.stdin.take().expect("stdin").write_all(br#"{"prompt":"from dana"}"#).expect("write stdin");
    assert!(child.wait_with_output().expect("hook runs").status.success());
    let log = m.json(&["sync", "fetch", "--begin", "1", "--end", "10"]);
    let dana = log.as_array().expect("log").iter().find(|c| c["content"] == "from dana").expect("logged");
    assert_eq!(dana["user_id"], "dana");
}

#[test]
fn the_scheduler_catches_up_once_in_priority_order_and_waits_for_idle() {
    let m = workspace();
    std::fs::write(m.dir.path().join("config.toml"), "[workspace]\ntimezone = \"Asia/Tokyo\"\n").expect("config");
    m.ok(&["schedule", "add", "report", "--every", "1h", "--message", "Send the report", "--priority", "3"]);
    let listed = m.json(&["schedule", "list"]);
    let names: Vec<&str> = listed.as_array().expect("list").iter().filter_map(|t| t["name"].as_str()).collect();
    assert_eq!(
        names,
        [
            "context-check",
            "inner-brain-loop",
            "inner-chronicle",
            "inner-dream",
            "inner-evolve",
            "inner-memory",
            "inner-reflect",
            "memory-consolidation-weekly",
            "reflection-heartbeat",
            "report",
            "session-rotation-daily"
        ]
    );

    // Two days of downtime: every task is due, each runs once, memory tasks first. The pass
    // runs at 03:00 UTC (noon in Tokyo), so the hour below never crosses the workspace's
    // midnight whatever time of day the test runs (it did at 15:44 UTC, and the daily
    // rotation fell due again).
    let later = (Timestamp::now() + SignedDuration::from_hours(72))
        .to_zoned(jiff::tz::TimeZone::UTC)
        .date()
        .at(3, 0, 0, 0)
        .to_zoned(jiff::tz::TimeZone::UTC)
        .expect("a UTC time")
        .timestamp();
    let pass = m.json(&["schedule", "run-due", "--idle", "--now", &later.to_string()]);
    let ran: Vec<&str> = pass["ran"].as_array().expect("ran").iter().filter_map(|r| r["task"].as_str()).collect();
    assert_eq!(ran[0], "context-check", "{pass}");
    // Normal-priority tasks (the user's and the inner life's) after memory and maintenance.
    let report_at = ran.iter().position(|t| *t == "report").expect("report ran");
    assert!(ran[report_at..].iter().all(|t| *t == "report" || t.starts_with("inner-")), "{pass}");
    assert!(ran.contains(&"inner-chronicle") && ran.contains(&"inner-dream"), "the inner life's jobs ran: {pass}");
    assert!(ran.contains(&"session-rotation-daily"), "{pass}");
    assert_eq!(ran.iter().filter(|t| **t == "report").count(), 1);
    let heartbeat = pass["ran"].as_array().expect("ran").iter().find(|r| r["task"] == "reflection-heartbeat").expect("heartbeat");
    assert!(heartbeat["detail"].as_str().is_some_and(|d| d.starts_with("HEARTBEAT_OK")), "{heartbeat}");
    assert!(m.dir.path().join("workspace/memory/playbook-logs").is_dir(), "the tick wrote its log line");
    // The rotation archived yesterday's log (the workspace's zone decides the day).
    let archived =
        pass["ran"].as_array().expect("ran").iter().find(|r| r["task"] == "session-rotation-daily").expect("rotation")["detail"].clone();
    assert!(archived.as_str().is_some_and(|d| d.contains("\"rotated\"")), "{archived}");
    // A minute later nothing is due: the missed slots are gone, not replayed.
    let minute = later + SignedDuration::from_mins(1);
    assert_eq!(m.json(&["schedule", "run-due", "--idle", "--now", &minute.to_string()])["ran"].as_array().map(Vec::len), Some(0));
    assert_eq!(m.json(&["schedule", "runs", "--task", "report"]).as_array().map(Vec::len), Some(1));

    // An active agent: require-idle tasks wait, the others run.
    std::fs::write(m.dir.path().join("config.toml"), "[workspace]\ntimezone = \"Asia/Tokyo\"\nidle_after_secs = 1000000\n")
        .expect("config");
    hook(&m, "prompt-submit", r#"{"prompt":"busy"}"#);
    let hour = later + SignedDuration::from_mins(61);
    let pass = m.json(&["schedule", "run-due", "--now", &hour.to_string()]);
    let ran: Vec<&str> = pass["ran"].as_array().expect("ran").iter().filter_map(|r| r["task"].as_str()).collect();
    assert_eq!(ran, ["reflection-heartbeat", "inner-reflect", "report"], "the heartbeat does not wait for idle: {pass}");
    assert_eq!(pass["waiting_for_idle"], serde_json::json!(["context-check", "inner-memory"]), "{pass}");

    // Bad input is refused with the field named; removal works and sticks.
    assert!(m.fails(&["schedule", "add", "x", "--cron", "61 * * * *", "--message", "m"], 2).contains("--cron"));
    assert!(m.fails(&["schedule", "add", "x", "--every", "5m"], 2).contains("--message"));
    assert!(m.fails(&["schedule", "add", "report", "--every", "5m", "--message", "m"], 4).contains("--replace"));
    m.ok(&["schedule", "remove", "context-check"]);
    assert!(m.fails(&["schedule", "remove", "context-check"], 3).contains("context-check"));
    assert!(!m.ok(&["schedule", "list"]).contains("context-check"), "a removed built-in is not reinstalled");
}

#[test]
fn search_returns_file_line_range_and_snippet_and_follows_edits() {
    let m = workspace();
    let ws = m.dir.path().join("workspace");
    let mut notes = String::from("# Projects\n\n## Infra\n\n");
    for i in 0..200 {
        notes.push_str(&format!("Line {i} about routine chores and errands.\n"));
    }
    notes.push_str("\n## Database\n\nThe postgres upgrade is scheduled for March. <private>root password swordfish</private>\n");
    // A private block longer than a chunk: its end must not leak from the next chunk.
    notes.push_str("\n## Keys\n\n<private>\n");
    for i in 0..150 {
        notes.push_str(&format!("pelican key {i} is hidden here\n"));
    }
    notes.push_str("</private>\nThe end.\n");
    std::fs::write(ws.join("reference/projects.md"), &notes).expect("write");
    std::fs::write(ws.join(".scratch.md"), "postgres in a hidden file\n").expect("write");
    std::os::unix::fs::symlink("/etc/hostname", ws.join("linked.md")).expect("symlink");

    let found = m.json(&["search", "postgres upgrade"]);
    let hits = found["hits"].as_array().expect("hits");
    assert_eq!(hits.len(), 1, "hidden files and symlinks are not indexed: {found}");
    assert_eq!(hits[0]["path"], "reference/projects.md");
    // The heading path in effect at the chunk's first line.
    assert!(hits[0]["heading"].as_str().is_some_and(|h| h.starts_with("Projects > ")), "{found}");
    let (start, end) = (hits[0]["start_line"].as_u64().expect("start"), hits[0]["end_line"].as_u64().expect("end"));
    assert!(start > 100 && end == 208, "{start}-{end}");
    assert!(hits[0]["snippet"].as_str().is_some_and(|s| s.contains("[postgres]")), "{found}");
    assert_eq!(m.json(&["search", "swordfish"])["hits"].as_array().map(Vec::len), Some(0), "private blocks are not indexed");
    assert_eq!(m.json(&["search", "pelican"])["hits"].as_array().map(Vec::len), Some(0), "not even across chunks");
    let end = m.json(&["search", "end"]);
    assert_eq!(end["hits"][0]["end_line"].as_u64(), Some(208 + 4 + 150 + 2), "line numbers still point at the file: {end}");
    assert!(m.ok(&["search", "postgres"]).contains("reference/projects.md:"));

    // Edits and deletions are followed (search refreshes the index first).
    std::fs::write(ws.join("reference/projects.md"), "# Projects\n\nMySQL it is.\n").expect("edit");
    assert_eq!(m.json(&["search", "postgres"])["hits"].as_array().map(Vec::len), Some(0));
    assert_eq!(m.json(&["search", "mysql"])["hits"][0]["path"], "reference/projects.md");
    std::fs::remove_file(ws.join("reference/projects.md")).expect("delete");
    assert_eq!(m.json(&["search", "mysql"])["hits"].as_array().map(Vec::len), Some(0));

    assert!(m.fails(&["search", "?!"], 2).contains("no word"));
    assert!(m.fails(&["search", "x", "--limit", "0"], 2).contains("--limit"));
}

/// `workspace rotate` and `workspace consolidate` speak plainly without `--json` and give
/// their reports with it.
#[test]
fn workspace_maintenance_prints_sentences_or_json() {
    let m = workspace();
    let rotated = m.ok(&["workspace", "rotate"]);
    assert!(rotated.contains("sessions/current.md") && !rotated.trim_start().starts_with('{'), "{rotated}");
    assert!(m.json(&["workspace", "rotate"])["outcome"].is_string());
    let report = m.ok(&["workspace", "consolidate"]);
    assert!(!report.trim_start().starts_with('{'), "{report}");
    assert!(m.json(&["workspace", "consolidate"])["recommendations"].is_array());
}

/// The `context` hook works from what Claude Code sends: the transcript's last assistant
/// turn says how many tokens the model was sent (input + cache creation + cache reads).
#[test]
fn the_context_hook_reads_usage_from_the_transcript() {
    let m = workspace();
    let transcript = m.dir.path().join("transcript.jsonl");
    let turn = |tokens: u64| {
        serde_json::json!({ "type": "assistant", "message": { "role": "assistant", "usage": {
            "input_tokens": 10, "cache_creation_input_tokens": 0, "cache_read_input_tokens": tokens } } })
        .to_string()
    };
    std::fs::write(&transcript, format!("{}\n{}\n", turn(20_000), turn(150_000))).expect("transcript");
    let input = serde_json::json!({ "session_id": "s1", "transcript_path": transcript }).to_string();
    let context = hook(&m, "context", &input);
    assert!(context.contains("[Pre-Compaction Flush] Context usage is 75"), "{context}");
    std::fs::write(&transcript, format!("{}\n", turn(20_000))).expect("transcript");
    assert_eq!(hook(&m, "context", &input), "", "10 % is below the flush threshold");
}

/// `mneme reflect` as a new user meets it: refused without a workspace (naming the fix),
/// then a tick, its status, feedback (bad input refused naming the field), one stage
/// alone, and a dry run that writes nothing.
#[test]
fn reflect_commands_from_a_fresh_install() {
    let m = crate::Mneme::init();
    let refused = m.fails(&["reflect", "tick"], 4);
    assert!(refused.contains("mneme workspace init"), "{refused}");
    m.ok(&["workspace", "init"]);
    let status = m.ok(&["reflect", "status"]);
    assert!(status.contains("no tick yet"), "{status}");
    let out = m.ok(&["reflect", "tick"]);
    assert!(out.trim_end().ends_with("HEARTBEAT_OK"), "{out}");
    assert!(
        out.contains("signals: fallback (no LLM configured)") && out.contains("insight: skipped (no LLM configured; offline: "),
        "{out}"
    );
    let log = m.dir.path().join("workspace/memory/playbook-logs");
    let lines = || -> usize {
        std::fs::read_dir(&log)
            .expect("logs")
            .map(|e| std::fs::read_to_string(e.expect("entry").path()).expect("log").lines().count())
            .sum()
    };
    assert_eq!(lines(), 2, "a tick line and an output line");
    let dry = m.json(&["reflect", "tick", "--dry-run"]);
    assert_eq!(dry["status"], "DRY_RUN");
    assert_eq!(lines(), 2, "a dry run writes nothing");
    let status = m.ok(&["reflect", "status"]);
    assert!(status.contains("last tick: ") && status.contains("directive: insufficient_data"), "{status}");
    assert!(m.fails(&["reflect", "feedback", "--score", "1.5"], 2).contains("score 1.5: must be within -1..=1"));
    assert!(m.fails(&["reflect", "feedback", "some-output"], 2).contains("needs --score"));
    m.fails(&["reflect", "spawn-result", "t1-spawn", "great"], 2);
    // The tick's output was a skip: feedback has nothing to score, and says so instead of
    // writing a line nothing would ever count.
    let refused = m.fails(&["reflect", "feedback", "--score", "-0.5", "--re-escalated"], 2);
    assert!(refused.contains("no heartbeat output in the last 30 days to attach this feedback to"), "{refused}");
    assert!(
        m.fails(&["reflect", "feedback", "out-1", "--score", "0.5"], 2).contains("outputId \"out-1\": no heartbeat output has that id")
    );
    assert_eq!(lines(), 2, "a refused report writes nothing");
    let stage = m.json(&["reflect", "feedback"]);
    assert_eq!(m.json(&["reflect", "signals"])["recommendedAction"]["action"], "skip");
    assert_eq!(m.json(&["reflect", "curate"])["stage"]["status"], "fallback");
    assert_eq!(stage["curateDirective"], "insufficient_data", "{stage}");
    assert_eq!(stage["stage"]["status"], "fallback");
}

/// `mneme inner` from a fresh install: no state until the first event, events move it,
/// bad input names what was wrong, context levels print, and session start shows the
/// "how I am" block once the state exists.
#[test]
fn inner_commands_from_a_fresh_install() {
    let m = crate::Mneme::init();
    m.fails(&["inner", "event", "user-message"], 4);
    m.ok(&["workspace", "init"]);
    assert!(m.ok(&["inner", "status"]).contains("no inner state yet"));
    let before = m.ok(&["claude-hook", "session-start"]);
    assert!(!before.contains("HOW I AM"), "{before}");
    // Claude Code's prompt hook is a user message: connection rises from 0.5.
    hook(&m, "prompt-submit", r#"{"prompt":"morning! the deploy is on Friday"}"#);
    let out = m.ok(&["inner", "status"]);
    assert!(out.starts_with("connection 0.70"), "{out}");
    let out = m.ok(&["inner", "event", "user-message"]);
    assert!(out.starts_with("connection 0.90"), "{out}");
    assert!(m.fails(&["inner", "event", "mistake"], 2).contains("mistake needs --what"));
    assert!(m.fails(&["inner", "event", "pending", "--what", "x", "--since", "someday"], 2).contains("--since"));
    m.ok(&["inner", "event", "pending", "--what", "review PR 12", "--since", "2020-01-01"]);
    let status = m.json(&["inner", "status"]);
    assert!(
        status["mood"]["hints"].as_array().expect("hints").iter().any(|h| h.as_str().expect("hint").starts_with("reminder: review PR 12"))
    );
    assert!(m.ok(&["inner", "context", "--level", "2"]).starts_with("Context level 2 of 4: how I am, drive"));
    assert!(m.fails(&["inner", "context", "--level", "7"], 2).contains("level 7"));
    let after = m.ok(&["claude-hook", "session-start"]);
    assert!(after.contains("## How I am") && after.contains("reminder: review PR 12"), "{after}");

    // The jobs, offline: the brain loop notes what happened (the user's words), then, with
    // nothing new, says why it skipped; the chronicle falls back.
    let brain = m.json(&["inner", "run", "brain-loop"]);
    assert_eq!(brain["status"], "fallback", "{brain}");
    assert_eq!(brain["output"]["happened"][1], "the user: “morning! the deploy is on Friday”", "{brain}");
    let brain = m.json(&["inner", "run", "brain-loop"]);
    assert_eq!(brain["status"], "skipped", "{brain}");
    assert!(brain["reason"].as_str().is_some_and(|r| r.starts_with("no LLM configured; nothing happened or changed")), "{brain}");
    assert!(m.ok(&["inner", "run", "chronicle"]).starts_with("chronicle fallback"));
    assert!(m.dir.path().join("workspace/memory/diary").is_dir());
    assert!(m.ok(&["inner", "run", "reflect", "--if-triggered"]).starts_with("reflect not_triggered"));
    assert!(m.fails(&["inner", "run", "sleep"], 2).contains("job \"sleep\": must be brain_loop"));
    // Writing for a job: inside its lane it works; outside it is refused, nothing written.
    let write = |args: &[&str], text: &str| {
        let mut child = m.command().args(args).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("spawn");
        child.stdin.take().expect("stdin").write_all(text.as_bytes()).expect("write stdin");
        child.wait_with_output().expect("runs")
    };
    let ok = write(&["inner", "write", "--job", "evolve", "QUEUE.md", "--append"], "- [ ] P3 try pairing on deploys\n");
    assert!(ok.status.success(), "{ok:?}");
    let refused = write(&["inner", "write", "--job", "evolve", "SELF.md"], "I am evolve now");
    assert_eq!(refused.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("the evolve job may not write SELF.md (it writes QUEUE.md only)"));
    assert!(!m.dir.path().join("workspace/SELF.md").exists());
    let log = std::fs::read_to_string(m.dir.path().join("workspace/memory/inner-jobs.jsonl")).expect("job log");
    assert!(log.contains(r#""path":"SELF.md","ts""#) || log.contains(r#""written":false"#), "{log}");
    // The next job's sense step sees the new queue item.
    m.ok(&["inner", "run", "reflect", "--if-triggered"]);
    let status = m.json(&["inner", "status"]);
    assert!(status["state"]["impatience"].as_array().expect("list").iter().any(|i| i["what"] == "try pairing on deploys"), "{status}");
}

/// `mneme search --semantic` (zylos §16.3) needs the model: without one it fails naming
/// the fix, while the default falls back to words and says so, and `--lexical` loads none.
#[test]
fn semantic_file_search_without_the_model_fails_and_the_default_says_words_only() {
    let m = workspace();
    std::fs::write(m.dir.path().join("workspace/reference/projects.md"), "# Projects\n\nThe kubernetes migration is blocked.\n")
        .expect("write");
    let refused = m.fails(&["search", "kubernetes", "--semantic"], 2);
    assert!(refused.contains("--semantic needs the embedding model") && refused.contains("mneme model install"), "{refused}");
    let out = m.ok(&["search", "kubernetes"]);
    assert!(out.contains("reference/projects.md:1-3  (Projects)  [strategic, active]") && out.contains("(by words only: "), "{out}");
    let found = m.json(&["search", "kubernetes", "--lexical"]);
    assert_eq!(found["ranking"], "lexical", "{found}");
    assert!(m.fails(&["search", "x", "--semantic", "--lexical"], 2).contains("cannot be used with"));
}

/// Claude Code's prompt-submit and session-start note the agent's activity
/// (`mneme.db.activity`, what the heartbeat's require-idle tasks read): through the hook
/// engine when hooks are on, and with `[hooks] enabled = false` too.
#[test]
fn claude_code_hooks_note_the_agents_activity() {
    let m = workspace();
    let activity = m.dir.path().join("mneme.db.activity");
    let noted = |name: &str, stdin: &str| {
        let _ = std::fs::remove_file(&activity);
        hook_with(&m, &["claude-hook", name], stdin);
        let text = std::fs::read_to_string(&activity).unwrap_or_else(|e| panic!("{name}: no activity noted: {e}"));
        let ms: i64 = text.trim().parse().unwrap_or_else(|e| panic!("{name}: activity {text:?}: {e}"));
        let age = Timestamp::now().as_millisecond() - ms;
        assert!((0..60_000).contains(&age), "{name}: activity noted {age} ms ago");
    };
    noted("prompt-submit", r#"{"prompt":"I live in Lisbon."}"#);
    // A hook process leaves its WAL for the next checkpoint (no checkpoint, fsyncs or file
    // re-creation as it exits); what it wrote is there for the next process all the same.
    let wal = m.dir.path().join("mneme.db-wal");
    assert!(wal.exists(), "the hook kept the WAL");
    let told = m.json(&["recall", "Lisbon"]);
    assert!(told.to_string().contains("I live in Lisbon."), "{told}");
    // `forget` still moves it into the database and truncates it: erased words are in no file.
    m.ok(&["forget", "--query", "Lisbon", "--yes"]);
    assert_eq!(std::fs::metadata(&wal).map(|w| w.len()).unwrap_or(0), 0, "forget truncated the WAL");
    noted("session-start", r#"{"session_id":"s1"}"#);
    std::fs::write(m.dir.path().join("config.toml"), "[hooks]\nenabled = false\n").expect("config");
    noted("prompt-submit", r#"{"prompt":"I live in Munich."}"#);
    noted("session-start", r#"{"session_id":"s2"}"#);
}
