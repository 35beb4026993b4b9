//! Knowledge modules, the effective playbook and the sync engine, on real directories.

use std::collections::BTreeMap;
use std::path::Path;

use mneme_workspace::modules::{self, Status};
use mneme_workspace::{WorkspaceError, deploy};

use crate::{check_snapshot, initialised, read, ts, write};

const NOW: &str = "2026-11-23T10:00:00Z";

/// Every file under `root` with a hash of its bytes: what "nothing changed on disk" compares.
fn disk(root: &Path) -> BTreeMap<String, u64> {
    fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<String, u64>) {
        for entry in std::fs::read_dir(dir).expect("list").flatten() {
            let path = entry.path();
            if entry.file_name() == ".mneme.lock" {
                continue;
            }
            if path.is_dir() {
                walk(root, &path, out);
            } else {
                use std::hash::{Hash as _, Hasher as _};
                let mut h = std::collections::hash_map::DefaultHasher::new();
                std::fs::read(&path).expect("read").hash(&mut h);
                out.insert(path.strip_prefix(root).expect("under root").display().to_string(), h.finish());
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(root, root, &mut out);
    out
}

fn manifest(id: &str, name: &str, default: i64, range: [i64; 2], keywords: &[&str], files: &[&str]) -> String {
    serde_json::json!({
        "id": id, "name": name, "description": format!("{name} patterns"), "version": "1.0.0",
        "priority": { "default": default, "range": range },
        "triggers": { "keywords": keywords, "filePatterns": files },
        "locked": false
    })
    .to_string()
}

/// A workspace as `mneme workspace init` leaves it: the layout, then the sync.
fn synced(zone: &str) -> (tempfile::TempDir, mneme_workspace::WorkspaceSettings) {
    let (dir, s) = initialised(zone, NOW);
    let report = deploy::sync(&s, ts(NOW)).expect("sync");
    assert!(report.files.iter().all(|f| f.action == "created"), "{:?}", report.files);
    (dir, s)
}

/// A synced workspace (base-behaviors deployed) with two more module folders.
fn with_modules() -> (tempfile::TempDir, mneme_workspace::WorkspaceSettings) {
    let (dir, s) = synced("UTC");
    let m = s.dir.join("modules");
    write(
        m.join("react-native-dev/manifest.json"),
        &manifest("react-native-dev", "React Native", 80, [50, 100], &["metro", "expo"], &["*.tsx"]),
    );
    write(m.join("react-native-dev/patterns.md"), "# React Native\n\n## Build & Metro\n- Clear the Metro cache after a native change\n");
    write(m.join("deploys/manifest.json"), &manifest("deploys", "Deploys", 60, [50, 100], &["deploy", "rollback"], &[]));
    write(m.join("deploys/patterns.md"), "# Deploys\n\n- Never deploy on Fridays\n- Tag the release before the rollout\n");
    (dir, s)
}

#[test]
fn the_lifecycle_keeps_priorities_in_range_and_locked_modules_active() {
    let (_dir, s) = with_modules();
    let list = modules::list(&s).expect("list");
    assert_eq!(list.modules.iter().map(|m| m.id.as_str()).collect::<Vec<_>>(), ["base-behaviors"], "init deployed the built-in one");
    assert_eq!(list.unregistered.iter().map(|m| m.id.as_str()).collect::<Vec<_>>(), ["deploys", "react-native-dev"]);
    assert_eq!(list.stack, [modules::StackEntry { id: "base-behaviors".into(), priority: 0 }]);

    // Activating an unregistered folder registers it at its default priority.
    let change = modules::activate(&s, "react-native-dev", None, ts(NOW)).expect("activate");
    assert_eq!((change.action.as_str(), change.status, change.priority), ("activated", Status::Active, 80));
    assert!(change.effective_changed);
    let later = ts("2026-11-23T11:00:00Z");
    modules::activate(&s, "deploys", Some(95), later).expect("activate at 95");
    let stack: Vec<(String, i64)> = modules::list(&s).expect("list").stack.into_iter().map(|e| (e.id, e.priority)).collect();
    assert_eq!(stack, [("deploys".into(), 95), ("react-native-dev".into(), 80), ("base-behaviors".into(), 0)]);
    let info = modules::info(&s, "deploys").expect("info");
    assert_eq!(info.entry.as_ref().and_then(|e| e.activated_at), Some(later));
    assert_eq!(info.view.pattern_lines, 3);

    // Activating an active module again keeps its activation time.
    assert_eq!(modules::activate(&s, "deploys", None, ts("2026-11-24T00:00:00Z")).expect("again").action, "unchanged");
    assert_eq!(modules::info(&s, "deploys").expect("info").entry.and_then(|e| e.activated_at), Some(later));

    modules::set_priority(&s, "deploys", 55).expect("priority");
    let change = modules::suspend(&s, "deploys").expect("suspend");
    assert_eq!(change.stack.iter().map(|e| e.id.as_str()).collect::<Vec<_>>(), ["react-native-dev", "base-behaviors"]);
    let effective = read(s.dir.join("memory/sinain-playbook-effective.md"));
    assert!(!effective.contains("Never deploy on Fridays"), "a suspended module is not merged:\n{effective}");
    assert!(effective.contains("Clear the Metro cache"), "{effective}");
    modules::disable(&s, "react-native-dev").expect("disable");
    assert_eq!(modules::info(&s, "react-native-dev").expect("info").entry.map(|e| e.status), Some(Status::Disabled));
}

#[test]
fn every_refusal_names_the_problem_and_changes_nothing_on_disk() {
    let (_dir, s) = with_modules();
    modules::activate(&s, "deploys", None, ts(NOW)).expect("activate");
    let refused = |result: Result<modules::Change, WorkspaceError>, before: &BTreeMap<String, u64>| -> WorkspaceError {
        let e = result.expect_err("refused");
        assert_eq!(&disk(&s.dir), before, "a refused change wrote something: {e}");
        e
    };
    let before = disk(&s.dir);
    let e = refused(modules::set_priority(&s, "deploys", 101), &before);
    assert!(matches!(&e, WorkspaceError::Invalid(m) if m.contains("priority 101 is outside module \"deploys\"'s range [50, 100]")), "{e}");
    let e = refused(modules::activate(&s, "react-native-dev", Some(10), ts(NOW)), &before);
    assert!(e.to_string().contains("range [50, 100]"), "{e}");
    let e = refused(modules::suspend(&s, "base-behaviors"), &before);
    assert!(matches!(&e, WorkspaceError::Refused(m) if m.contains("\"base-behaviors\" is locked")), "{e}");
    let e = refused(modules::disable(&s, "base-behaviors"), &before);
    assert!(matches!(e, WorkspaceError::Refused(_)));
    let e = refused(modules::set_priority(&s, "base-behaviors", 1), &before);
    assert!(e.to_string().contains("range [0, 0]"), "{e}");
    let e = refused(modules::suspend(&s, "no-such"), &before);
    assert!(
        matches!(&e, WorkspaceError::NotFound(m) if m.contains("unknown module \"no-such\" (known: base-behaviors, deploys, react-native-dev)")),
        "{e}"
    );
    let e = refused(modules::activate(&s, "../etc", None, ts(NOW)), &before);
    assert!(matches!(e, WorkspaceError::Invalid(_)), "{e}");
    let e = refused(modules::suspend(&s, "react-native-dev"), &before);
    assert!(e.to_string().contains("not registered"), "{e}");

    // A malformed manifest: named file and field.
    write(
        s.dir.join("modules/broken/manifest.json"),
        r#"{"id":"broken","name":"B","version":"1","priority":{"default":5,"range":[10,20]}}"#,
    );
    let before = disk(&s.dir);
    let e = refused(modules::activate(&s, "broken", None, ts(NOW)), &before);
    assert_eq!(e.to_string(), "modules/broken/manifest.json: priority.default: 5 is outside the range [10, 20]");
    write(
        s.dir.join("modules/broken/manifest.json"),
        r#"{"id":"broken","name":"B","version":"1","priority":{"default":10,"range":[10,20]},"trigger":{}}"#,
    );
    let before2 = disk(&s.dir);
    let e = modules::activate(&s, "broken", None, ts(NOW)).expect_err("unknown field");
    assert!(e.to_string().starts_with("modules/broken/manifest.json: trigger: unknown field `trigger`"), "{e}");
    assert_eq!(disk(&s.dir), before2);

    // A corrupt registry: reads and changes are refused, the file is left as it was.
    let registry = s.dir.join("modules/module-registry.json");
    let corrupt = r#"{"version":1,"modules":{"deploys":{"status":"active","priority":"high","activatedAt":null,"lastTriggered":null}}}"#;
    write(&registry, corrupt);
    let before = disk(&s.dir);
    let e = modules::list(&s).expect_err("corrupt");
    assert!(e.to_string().starts_with("modules/module-registry.json: modules.deploys.priority: invalid type"), "{e}");
    let e = refused(modules::activate(&s, "react-native-dev", None, ts(NOW)), &before);
    assert!(matches!(&e, WorkspaceError::Refused(m) if m.contains("nothing was changed") && m.contains("mneme workspace sync")), "{e}");
    assert_eq!(disk(&s.dir), before);
    assert!(
        mneme_workspace::playbook::generate_effective(&s).is_err(),
        "the effective playbook is not regenerated from a corrupt registry"
    );
    assert_eq!(disk(&s.dir), before);
}

#[test]
fn sync_sets_a_corrupt_registry_aside_and_rebuilds_it_from_the_folders() {
    let (_dir, s) = with_modules();
    let registry = s.dir.join("modules/module-registry.json");
    write(&registry, "{ not json");
    let report = deploy::sync(&s, ts(NOW)).expect("sync");
    let repaired = report.repaired.expect("repaired");
    assert_eq!(repaired.set_aside, "modules/module-registry.json.corrupt-20261123-100000");
    assert!(repaired.error.starts_with("modules/module-registry.json: JSON: key must be a string"), "{}", repaired.error);
    assert_eq!(repaired.registered, ["base-behaviors", "deploys", "react-native-dev"]);
    assert_eq!(read(s.dir.join(&repaired.set_aside)), "{ not json", "the bad copy is kept as it was");
    let list = modules::list(&s).expect("readable again");
    let statuses: Vec<(String, Option<Status>)> = list.modules.iter().map(|m| (m.id.clone(), m.status)).collect();
    assert_eq!(
        statuses,
        [
            ("base-behaviors".to_string(), Some(Status::Active)),
            ("deploys".to_string(), Some(Status::Suspended)),
            ("react-native-dev".to_string(), Some(Status::Suspended))
        ]
    );
}

#[test]
fn the_effective_playbook_of_a_three_module_stack_has_the_seeds_layout() {
    let (_dir, s) = with_modules();
    modules::activate(&s, "react-native-dev", None, ts(NOW)).expect("rn");
    modules::activate(&s, "deploys", Some(60), ts(NOW)).expect("deploys");
    write(
        s.dir.join("modules/base-behaviors/patterns.md"),
        "# Base Behaviors\n\n## Communication Style\n- Keep Telegram messages under 500 characters\n",
    );
    write(
        s.dir.join("memory/sinain-playbook.md"),
        "<!-- mining-index: 2026-11-22 -->\n# Playbook\n\n## Patterns\n- Ask before spending (score: 0.8)\n\n<!-- effectiveness: outputs=8,positive=4,negative=2,neutral=2,rate=0.50 -->\n",
    );
    let outcome = mneme_workspace::playbook::generate_effective(&s).expect("generate");
    assert!(outcome.changed && outcome.base && outcome.skipped.is_empty());
    let text = read(s.dir.join("memory/sinain-playbook-effective.md"));
    check_snapshot("effective-playbook.md", &text);
    assert_eq!(
        mneme_workspace::playbook::parse_module_stack(&text).into_iter().map(|m| (m.id, m.priority)).collect::<Vec<_>>(),
        [("react-native-dev".to_string(), 80), ("deploys".into(), 60), ("base-behaviors".into(), 0)]
    );
    // What the next session is given: modules first, comments gone.
    let injected = mneme_workspace::playbook::injectable(&s, 4000).expect("injectable");
    assert!(injected.starts_with("# React Native\n\n## Build & Metro\n- Clear the Metro cache"), "{injected}");
    assert!(injected.contains("- Ask before spending (score: 0.8)") && !injected.contains("<!--"), "{injected}");
}

#[test]
fn deploy_once_files_survive_a_sync_and_always_overwrite_files_are_restored() {
    let (_dir, s) = synced("UTC");
    let first = deploy::sync(&s, ts(NOW)).expect("sync");
    assert!(
        first.files.iter().all(|f| f.action == "unchanged" || f.action == "skipped"),
        "nothing to do the second time: {:?}",
        first.files
    );
    assert!(!first.effective.changed);

    // The user edits what they own and scribbles over what mneme owns.
    let patterns = s.dir.join("modules/base-behaviors/patterns.md");
    let mine = "# Base Behaviors\n\n- My own rule\n";
    write(&patterns, mine);
    write(s.dir.join("HEARTBEAT.md"), "scribbled");
    write(s.dir.join("modules/base-behaviors/manifest.json"), &manifest("base-behaviors", "Hacked", 5, [0, 10], &[], &[]));
    let report = deploy::sync(&s, ts(NOW)).expect("sync");
    let by_path: BTreeMap<&str, (&str, &str)> =
        report.files.iter().map(|f| (f.path.as_str(), (f.action.as_str(), f.reason.as_str()))).collect();
    assert_eq!(by_path["modules/base-behaviors/patterns.md"], ("skipped", "deploy-once: present, owned by the user or agent"));
    assert_eq!(by_path["HEARTBEAT.md"], ("updated", "always-overwrite: restored to the shipped version"));
    assert_eq!(by_path["modules/base-behaviors/manifest.json"].0, "updated");
    assert_eq!(by_path["SKILL.md"].0, "unchanged");
    assert_eq!(read(&patterns), mine, "the user's patterns survive");
    assert!(read(s.dir.join("HEARTBEAT.md")).starts_with("# HEARTBEAT.md"), "the protocol is restored");
    assert!(read(s.dir.join("memory/sinain-playbook-effective.md")).contains("- My own rule"), "the effective playbook follows the edit");
    assert!(!by_path.contains_key("CLAUDE.md") && !s.dir.join("CLAUDE.md").exists(), "agent docs are opt-in");
    for dir in ["memory", "memory/playbook-archive", "memory/playbook-logs"] {
        assert!(s.dir.join(dir).is_dir(), "{dir}");
    }
}

#[test]
fn the_claude_code_files_are_kept_current_once_opted_in_without_touching_the_users_text() {
    let (_dir, mut s) = synced("Asia/Tokyo");
    write(s.dir.join("CLAUDE.md"), "# My project\n\nUse pnpm.\n");
    s.agent_docs = true;
    let report = deploy::sync(&s, ts(NOW)).expect("sync");
    let claude = read(s.dir.join("CLAUDE.md"));
    assert!(claude.starts_with("# My project\n\nUse pnpm.\n\n<!-- mneme:memory-section begin"), "{claude}");
    assert!(claude.contains("## Memory System") && claude.trim_end().ends_with(deploy::SECTION_END), "{claude}");
    let skill = read(s.dir.join(".claude/skills/mneme-memory/SKILL.md"));
    assert!(skill.contains(&s.dir.display().to_string()) && !skill.contains("{{workspace}}"), "placeholders rendered");
    assert!(report.files.iter().any(|f| f.path == "CLAUDE.md" && f.action == "updated"));

    // Off again: the files exist, so they are still kept current; the user's lines stay.
    s.agent_docs = false;
    let edited = claude.replace("Use pnpm.", "Use pnpm. Never npm.");
    let inside = edited.replace("## Memory System", "## Memory System (edited inside)");
    write(s.dir.join("CLAUDE.md"), &inside);
    deploy::sync(&s, ts(NOW)).expect("sync");
    assert_eq!(read(s.dir.join("CLAUDE.md")), edited, "mneme's section is restored, the rest is the user's");

    // Broken markers: the file is left alone, and the report says why.
    let broken = format!("{}\nmore\n", edited.replace(deploy::SECTION_END, ""));
    write(s.dir.join("CLAUDE.md"), &broken);
    let report = deploy::sync(&s, ts(NOW)).expect("sync");
    let claude_md = report.files.iter().find(|f| f.path == "CLAUDE.md").expect("reported");
    assert_eq!(claude_md.action, "skipped");
    assert!(claude_md.reason.contains("unmatched"), "{}", claude_md.reason);
    assert_eq!(read(s.dir.join("CLAUDE.md")), broken);
}

#[test]
fn an_override_directory_replaces_and_adds_files_with_the_koog_policies() {
    let (_dir, mut s) = synced("UTC");
    let over = tempfile::tempdir().expect("override dir");
    write(over.path().join("HEARTBEAT.md"), "# Our heartbeat\n");
    write(over.path().join("koog/koog-config.json"), "{\"v\":1}");
    write(over.path().join("koog/git_backup.sh"), "#!/bin/sh\necho backup\n");
    write(over.path().join("koog/notes.md"), "shipped notes\n");
    write(over.path().join("modules/ops/manifest.json"), &manifest("ops", "Ops", 50, [50, 100], &["pager"], &[]));
    write(over.path().join("modules/ops/patterns.md"), "- Page the on-call after 5 minutes\n");
    s.agent_files = Some(over.path().to_path_buf());
    deploy::sync(&s, ts(NOW)).expect("sync");
    assert_eq!(read(s.dir.join("HEARTBEAT.md")), "# Our heartbeat\n");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(s.dir.join("koog/git_backup.sh")).expect("script").permissions().mode();
        assert_eq!(mode & 0o777, 0o755);
    }
    // The agent edits its copies: .json/.sh come back, .md is the agent's.
    write(s.dir.join("koog/koog-config.json"), "{\"v\":0}");
    write(s.dir.join("koog/notes.md"), "my notes\n");
    write(s.dir.join("modules/ops/patterns.md"), "- Page after 10 minutes\n");
    deploy::sync(&s, ts(NOW)).expect("sync");
    assert_eq!(read(s.dir.join("koog/koog-config.json")), "{\"v\":1}");
    assert_eq!(read(s.dir.join("koog/notes.md")), "my notes\n");
    assert_eq!(read(s.dir.join("modules/ops/patterns.md")), "- Page after 10 minutes\n");
    assert_eq!(modules::list(&s).expect("list").unregistered.iter().map(|m| m.id.as_str()).collect::<Vec<_>>(), ["ops"]);

    s.agent_files = Some(s.dir.join("no-such-dir"));
    let e = deploy::sync(&s, ts(NOW)).expect_err("a missing override directory");
    assert!(e.to_string().contains("workspace.agent_files") && e.to_string().contains("is not a directory"), "{e}");
}

#[test]
fn triggers_mark_the_active_modules_a_tick_or_tool_call_used() {
    let (_dir, s) = with_modules();
    modules::activate(&s, "react-native-dev", None, ts(NOW)).expect("rn");
    modules::activate(&s, "deploys", None, ts(NOW)).expect("deploys");
    let at = ts("2026-11-23T12:00:00Z");
    let hit = modules::record_triggers(&s, "Edit", &["app/screens/Home.tsx".into()], at).expect("record");
    assert_eq!(hit, ["react-native-dev"]);
    assert_eq!(modules::info(&s, "react-native-dev").expect("info").entry.and_then(|e| e.last_triggered), Some(at));
    assert_eq!(modules::info(&s, "deploys").expect("info").entry.and_then(|e| e.last_triggered), None);
    let hit = modules::record_triggers(&s, "the user asked for a rollback of the deploy", &[], at).expect("record");
    assert_eq!(hit, ["deploys"]);
    // Suspended modules are not used, so not triggered.
    modules::suspend(&s, "deploys").expect("suspend");
    assert!(modules::record_triggers(&s, "deploy again", &[], ts("2026-11-23T13:00:00Z")).expect("record").is_empty());
}
