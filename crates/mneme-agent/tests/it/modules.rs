//! Knowledge modules from the agent's side: extraction with a scripted model and offline,
//! the module reaching the next session's context, and the layer-1 hooks (session end,
//! the tool-result privacy pass, the curated memory file, triggers from tool calls).

use std::sync::Arc;

use mneme_agent::config::HooksConfig;
use mneme_agent::hooks::{HookInput, HookName, Hooks};
use mneme_reflect::config::ReflectionConfig;
use mneme_reflect::extract::{ExtractRequest, extract};
use mneme_service::{Access, Ops, Principal};
use mneme_workspace::modules::{self, Status};
use serde_json::json;

use crate::reflect_model::{Bench, Reply};

fn write(settings: &mneme_workspace::WorkspaceSettings, relative: &str, text: &str) {
    let path = settings.dir.join(relative);
    std::fs::create_dir_all(path.parent().expect("parent")).expect("dir");
    std::fs::write(path, text).expect("write");
}

fn read(settings: &mneme_workspace::WorkspaceSettings, relative: &str) -> String {
    std::fs::read_to_string(settings.dir.join(relative)).unwrap_or_default()
}

/// A week of notes about deploys (one line twice), and a playbook with a scored pattern.
fn history(b: &Bench) {
    let today = b.settings.today(b.now());
    write(
        &b.settings,
        "memory/sinain-playbook.md",
        "# Playbook\n\n## Patterns\n- Check the quota before a deploy (score: 0.7)\n- Keep answers short\n",
    );
    let day = |n: i64| today.checked_sub(jiff::Span::new().days(n)).expect("date");
    write(
        &b.settings,
        &format!("memory/{}.md", day(1)),
        "# Daily Log\n\n- The deploy failed: quota exceeded <private>token abc123</private>\n- Rollback: return to the last good release\n",
    );
    write(&b.settings, &format!("memory/{}.md", day(3)), "- The deploy failed: quota exceeded\n- Tried a canary deploy once\n");
    write(&b.settings, &format!("memory/{}.md", day(20)), "- An old deploy note from three weeks ago\n");
}

fn request(id: &str) -> ExtractRequest {
    ExtractRequest {
        id: id.into(),
        domain: "deploys and releases".into(),
        keywords: vec!["deploy".into(), "rollback".into()],
        ..Default::default()
    }
}

#[test]
fn a_module_extracted_by_the_model_starts_suspended_and_reaches_the_next_session_once_activated() {
    let b = Bench::new();
    history(&b);
    mneme_workspace::deploy::sync(&b.settings, b.now()).expect("sync");
    b.script(
        "extract",
        Reply::Ok(
            json!({
                "name": "Deploys",
                "description": "How deploys go wrong and how to recover.",
                "keywords": ["canary"],
                "filePatterns": ["deploy/*.yaml"],
                "established": ["Check the quota before every deploy"],
                "emerging": ["A canary deploy may catch quota problems early"],
                "vocabulary": [{ "term": "Rollback", "definition": "return to the last good release" }]
            })
            .to_string(),
        ),
    );
    let engine = b.engine(ReflectionConfig::default());
    let out = extract(&engine, &b.settings, &request("deploys"), b.now()).expect("extract");
    assert_eq!(out.stage.status, "ok");
    assert_eq!((out.established, out.emerging, out.vocabulary), (1, 1, 1));
    assert_eq!(out.manifest.triggers.keywords, ["deploy", "rollback", "canary"]);
    assert_eq!(out.manifest.triggers.file_patterns, ["deploy/*.yaml"]);
    assert_eq!((out.manifest.priority.default, out.manifest.priority.range), (50, [50, 100]));
    assert_eq!(out.activate, "mneme module activate deploys");
    let patterns = read(&b.settings, "modules/deploys/patterns.md");
    assert_eq!(
        patterns,
        "# Deploys\n\nHow deploys go wrong and how to recover.\n\n## Established\n\n- Check the quota before every deploy\n\n\
         ## Emerging\n\n- A canary deploy may catch quota problems early\n\n## Vocabulary\n\n- **Rollback**: return to the last good release\n"
    );
    // What the model was sent: the playbook and the week's notes, nothing private, nothing older.
    let seen = b.seen();
    let (_, body) = seen.iter().find(|(stage, _)| *stage == "extract").expect("asked");
    assert_eq!(body["max_tokens"], 2000);
    let prompt = body["messages"][1]["content"].as_str().expect("user message");
    assert!(
        prompt.contains("Check the quota before a deploy (score: 0.7)") && prompt.contains("Rollback: return to the last good release"),
        "{prompt}"
    );
    assert!(!prompt.contains("abc123") && !prompt.contains("three weeks ago"), "{prompt}");

    // Suspended: listed, not merged.
    assert_eq!(modules::info(&b.settings, "deploys").expect("info").entry.map(|e| e.status), Some(Status::Suspended));
    assert!(!read(&b.settings, "memory/sinain-playbook-effective.md").contains("Check the quota before every deploy"));

    // Activated: in the effective playbook and in the next session's injected context.
    modules::activate(&b.settings, "deploys", None, b.now()).expect("activate");
    let service = Arc::new(
        mneme_service::MemoryService::open(
            mneme_store::StoreOptions { path: b.settings.dir.join("../hooks.db"), key: None, create: true, decay: Default::default() },
            mneme_service::ServiceConfig::default(),
            b.clock.clone(),
        )
        .expect("store"),
    );
    let hooks = Hooks::new(Ops::new(service, false), HooksConfig::default()).with_workspace(b.settings.clone());
    let owner = Principal::internal("owner", Access::owner(), mneme_core::Sensitivity::Critical);
    let start = |hooks: &Hooks| {
        let input = HookInput::from_json(json!({ "sessionId": "next" })).expect("input");
        hooks.handle(&owner, HookName::SessionStart, input, &mut Vec::new()).context.unwrap_or_default()
    };
    let context = start(&hooks);
    assert!(context.contains("## Playbook\n\n### Deploys") && context.contains("- Check the quota before every deploy"), "{context}");
    modules::suspend(&b.settings, "deploys").expect("suspend");
    assert!(!start(&hooks).contains("Check the quota before every deploy"), "suspended again: gone from the next session");
}

#[test]
fn without_a_usable_answer_extraction_falls_back_and_refusals_write_nothing() {
    let b = Bench::new();
    history(&b);
    // A wrong field type from the model, then HTTP 500: the deterministic path, with the reason.
    b.script("extract", Reply::Ok(json!({ "established": "not a list" }).to_string()));
    let engine = b.engine(ReflectionConfig::default());
    let mut dry = request("deploys");
    dry.dry_run = true;
    let out = extract(&engine, &b.settings, &dry, b.now()).expect("fallback");
    assert_eq!(out.stage.status, "fallback");
    assert_eq!(out.stage.reason.as_deref(), Some("established: not a list of strings"));
    assert!(out.path.is_none() && !b.settings.dir.join("modules/deploys").exists(), "a dry run writes nothing");
    b.script("extract", Reply::Status(500));
    let out = extract(&engine, &b.settings, &request("deploys"), b.now()).expect("fallback");
    assert!(out.stage.reason.as_deref().is_some_and(|r| r.starts_with("LLM failed")), "{:?}", out.stage);
    let patterns = read(&b.settings, "modules/deploys/patterns.md");
    // Seen twice, or scored 0.5+ → established; once → emerging; `Term: definition` → vocabulary.
    assert!(patterns.contains("## Established\n\n- The deploy failed: quota exceeded\n- Check the quota before a deploy\n"), "{patterns}");
    assert!(patterns.contains("## Emerging\n\n- Tried a canary deploy once\n"), "{patterns}");
    assert!(patterns.contains("## Vocabulary\n\n- **Rollback**: return to the last good release\n"), "{patterns}");
    assert!(!patterns.contains("abc123") && !patterns.contains("three weeks"), "{patterns}");

    // Offline (no model at all): the same deterministic module, the reason recorded.
    let offline = crate::reflect::offline();
    let out = extract(&offline, &b.settings, &request("deploys-2"), b.now()).expect("offline");
    assert_eq!(out.stage.reason.as_deref(), Some("no LLM configured"));
    assert_eq!(
        read(&b.settings, "modules/deploys-2/patterns.md").replace("Deploys And Releases", "x"),
        patterns.replace("Deploys And Releases", "x")
    );

    // Refusals: the id is taken, nothing matches, a bad id, a priority out of range.
    let before = read(&b.settings, "modules/module-registry.json");
    let e = extract(&offline, &b.settings, &request("deploys"), b.now()).expect_err("taken");
    assert!(e.to_string().contains("already exists"), "{e}");
    let mut nothing = request("gardening");
    nothing.keywords = vec!["tomatoes".into()];
    let e = extract(&offline, &b.settings, &nothing, b.now()).expect_err("nothing matches");
    assert!(e.to_string().contains("mentions tomatoes: no module extracted"), "{e}");
    assert!(extract(&offline, &b.settings, &request("Bad Id"), b.now()).is_err());
    let mut high = request("high");
    high.priority = Some(200);
    assert!(extract(&offline, &b.settings, &high, b.now()).expect_err("range").to_string().contains("[50, 100]"));
    // A look-back past what a date can hold is refused, not a panic (schemathesis found it).
    let mut far = request("far");
    far.days = Some(u32::MAX);
    assert!(extract(&offline, &b.settings, &far, b.now()).expect_err("days").to_string().contains("at most 3650"));
    assert_eq!(read(&b.settings, "modules/module-registry.json"), before, "the registry is as it was");
    assert!(!b.settings.dir.join("modules/gardening").exists() && !b.settings.dir.join("modules/high").exists());
}

#[test]
fn session_end_tool_results_curated_memory_and_triggers_go_through_the_hooks() {
    let b = Bench::new();
    let s = &b.settings;
    mneme_workspace::init::init(s, b.now()).expect("init");
    write(s, "memory.md", "# Curated\n\n- The user's cat is called Miso <private>vet 555-0100</private>\n");
    write(s, "modules/rn/manifest.json", &json!({ "id": "rn", "name": "RN", "version": "1", "priority": { "default": 60, "range": [50, 100] }, "triggers": { "keywords": ["metro"], "filePatterns": ["*.tsx"] } }).to_string());
    write(s, "modules/rn/patterns.md", "- Clear the Metro cache\n");
    let service = Arc::new(
        mneme_service::MemoryService::open(
            mneme_store::StoreOptions { path: s.dir.join("../hooks.db"), key: None, create: true, decay: Default::default() },
            mneme_service::ServiceConfig::default(),
            b.clock.clone(),
        )
        .expect("store"),
    );
    let hooks = Hooks::new(Ops::new(service, false), HooksConfig::default()).with_workspace(s.clone());
    let owner = Principal::internal("owner", Access::owner(), mneme_core::Sensitivity::Critical);
    let hook =
        |name: HookName, input: serde_json::Value| hooks.handle(&owner, name, HookInput::from_json(input).expect("input"), &mut Vec::new());

    // Agent start: the files are deployed, the curated memory injected (private part gone).
    let context = hook(HookName::SessionStart, json!({ "sessionId": "s1" })).context.unwrap_or_default();
    assert!(s.dir.join("HEARTBEAT.md").exists() && s.dir.join("modules/base-behaviors/patterns.md").exists(), "synced at agent start");
    assert!(context.contains("## Curated memory\n\n### Curated\n\n- The user's cat is called Miso"), "{context}");
    assert!(!context.contains("555-0100"), "{context}");

    // A tool call on a .tsx file marks the active module it matches.
    modules::activate(s, "rn", None, b.now()).expect("activate");
    hook(HookName::MessageReceived, json!({ "content": "fix the home screen", "sessionId": "s1" }));
    hook(HookName::AfterToolCall, json!({ "toolName": "Edit", "params": { "file_path": "app/Home.tsx" }, "sessionId": "s1" }));
    assert_eq!(modules::info(s, "rn").expect("info").entry.and_then(|e| e.last_triggered), Some(b.now()));

    // The host's tool result comes back without its private blocks.
    let outcome = hook(
        HookName::ToolResultPersist,
        json!({ "result": [{ "type": "text", "text": "key=<private>sk-123</private> ok" }], "sessionId": "s1" }),
    );
    assert_eq!(outcome.result, Some(json!([{ "type": "text", "text": "key= ok" }])));
    let missing = hook(HookName::ToolResultPersist, json!({ "sessionId": "s1" }));
    assert!(missing.error.is_some_and(|e| e.contains("result")));

    // Session end: a daily-log entry and a named snapshot; the session is no longer tracked.
    let end = hook(
        HookName::SessionEnd,
        json!({ "sessionId": "s1", "reason": "clear", "compactingMessages": [
            { "role": "user", "content": "Fix the home screen crash please" },
            { "role": "assistant", "content": "Done: the Metro cache was stale. <private>internal</private>" }
        ] }),
    );
    assert_eq!(end.error, None);
    let day = s.today(b.now());
    assert_eq!(end.files, [format!("memory/{day}.md"), format!("memory/{day}-fix-the-home-screen-crash-please.md")]);
    let snapshot = read(s, &end.files[1]);
    assert!(snapshot.starts_with("# Session: Fix the home screen crash please\n\n- session: s1\n"), "{snapshot}");
    assert!(
        snapshot.contains("1 messages, 1 tool calls (Edit 1)") && snapshot.contains("**assistant**: Done: the Metro cache was stale."),
        "{snapshot}"
    );
    assert!(!snapshot.contains("internal"), "{snapshot}");
    let daily = read(s, &end.files[0]);
    assert!(daily.contains("Session ended: s1 (clear)") && daily.contains(&end.files[1]), "{daily}");
    let again = hook(HookName::SessionEnd, json!({ "sessionId": "s1" }));
    let second = read(s, &again.files[1]);
    assert!(!second.contains("tool calls"), "the first end freed the tracking: {second}");
    let log = read(s, "memory/commands.log");
    assert!(log.contains("\"action\":\"session_end\"") && log.contains("\"reason\":\"clear\""), "{log}");
}
