//! Inner life: dynamics from elapsed time (path independence, clamping, thresholds at the
//! right time), the state file (created on first use, refused when corrupt or newer, never
//! overwritten then), tags, and the context levels.

use jiff::{SignedDuration, Timestamp};
use mneme_workspace::inner::{self, Anchor, InnerEvent, InnerState};
use proptest::prelude::*;

fn t0() -> Timestamp {
    Timestamp::from_second(1_800_000_000).expect("instant")
}

fn hours(h: i64) -> Timestamp {
    t0() + SignedDuration::from_hours(h)
}

fn workspace() -> (tempfile::TempDir, mneme_workspace::WorkspaceSettings) {
    let dir = tempfile::tempdir().expect("dir");
    let settings = mneme_workspace::WorkspaceConfig::default().settings(dir.path().join("ws")).expect("settings");
    std::fs::create_dir_all(settings.dir.join("memory")).expect("memory");
    (dir, settings)
}

fn event() -> impl Strategy<Value = InnerEvent> {
    prop_oneof![
        Just(InnerEvent::UserMessage {}),
        Just(InnerEvent::Mistake { what: "m".into() }),
        Just(InnerEvent::Spark { topic: "s".into() }),
        Just(InnerEvent::Novelty { what: "n".into() }),
        Just(InnerEvent::Repeat { what: "r".into() }),
        Just(InnerEvent::Resolved { what: "r".into() }),
    ]
}

proptest! {
    /// Reading at intermediate times (a sweep that re-anchors without an event) never
    /// changes what a later read gives.
    #[test]
    fn drift_is_path_independent(value in 0.0f64..=1.0, drift in prop_oneof![Just(-0.05), Just(0.02), Just(-0.03)], steps in proptest::collection::vec(0i64..48, 1..20)) {
        let once = Anchor { value, at: t0() };
        let mut swept = once;
        let mut now = t0();
        for h in steps {
            now += SignedDuration::from_hours(h);
            swept = Anchor { value: swept.at(drift, now), at: now };
        }
        let later = now + SignedDuration::from_hours(5);
        prop_assert!((swept.at(drift, later) - once.at(drift, later)).abs() < 1e-9);
    }

    /// Whatever happens, every value stays within [0, 1].
    #[test]
    fn values_stay_within_bounds(events in proptest::collection::vec((event(), 0i64..200), 0..60)) {
        let mut state = InnerState::fresh(t0());
        let mut now = t0();
        for (e, h) in events {
            now += SignedDuration::from_hours(h);
            state.apply(&e, now);
            let m = state.mood(now);
            for v in [m.connection, m.confidence, m.curiosity] {
                prop_assert!((0.0..=1.0).contains(&v), "{v}");
            }
        }
    }
}

/// Each threshold turns into its hint at the time the rates say, and not before.
#[test]
fn hints_appear_when_the_rates_say() {
    let state = InnerState::fresh(t0());
    let has = |h: i64, hint: &str| state.mood(hours(h)).hints.iter().any(|x| x.starts_with(hint));
    // connection 0.5 − 0.05/6 h: 0.3 at 24 h, below after.
    assert!(!has(23, "reach out") && has(25, "reach out"));
    // curiosity 0.5 − 0.03/6 h: 0.3 at 40 h.
    assert!(!has(39, "find a stimulus") && has(41, "find a stimulus"));
    // boredom: more than 7 days since the last novelty.
    assert!(!has(7 * 24 + 23, "experiment") && has(8 * 24, "experiment"));
    let mut s = InnerState::fresh(t0());
    s.apply(&InnerEvent::UserMessage {}, hours(25));
    assert!(s.mood(hours(25)).hints.iter().all(|h| !h.starts_with("reach out")), "a message lifts connection");
    assert!((s.mood(hours(25)).connection - (0.5 - 0.05 * 25.0 / 6.0 + 0.2)).abs() < 1e-9);
    // confidence 0.7 + 0.02/6 h = 0.787 at 26 h; four mistakes take it to 0.387.
    for _ in 0..4 {
        s.apply(&InnerEvent::Mistake { what: "wrong target".into() }, hours(26));
    }
    assert!(s.mood(hours(26)).hints.iter().any(|h| h.starts_with("double-check")), "{:?}", s.mood(hours(26)));
    assert!(s.mood(hours(26 + 6 * 3)).hints.iter().all(|h| !h.starts_with("double-check")), "confidence recovers +0.02/6 h");
    for _ in 0..2 {
        s.apply(&InnerEvent::Repeat { what: "quota exceeded".into() }, hours(27));
    }
    assert!(s.mood(hours(27)).hints.iter().all(|h| !h.starts_with("systemic fix")));
    s.apply(&InnerEvent::Repeat { what: "quota exceeded".into() }, hours(28));
    assert!(s.mood(hours(28)).hints.contains(&"systemic fix: quota exceeded (3×)".to_string()));
    s.apply(&InnerEvent::Pending { what: "review PR 12".into(), since: hours(0) }, hours(28));
    assert!(!s.mood(hours(3 * 24)).hints.iter().any(|h| h.starts_with("reminder")));
    assert!(s.mood(hours(4 * 24 + 1)).hints.iter().any(|h| h == "reminder: review PR 12 (waiting 4 days)"));
    s.apply(&InnerEvent::Resolved { what: "review PR 12".into() }, hours(100));
    assert!(s.impatience.is_empty());
    // curiosity has drifted to 0 by 100 h; eight sparks take it to 0.8.
    for _ in 0..8 {
        s.apply(&InnerEvent::Spark { topic: "rust".into() }, hours(100));
    }
    assert!(s.mood(hours(100)).hints.iter().any(|h| h.starts_with("explore")));
}

/// The file: created on first use, atomic, refused (and kept) when corrupt or newer.
#[test]
fn the_state_file_is_validated_and_never_overwritten_when_bad() {
    let (_dir, settings) = workspace();
    assert_eq!(inner::read_state(&settings).expect("read"), None);
    let state = inner::record(&settings, &[InnerEvent::UserMessage {}], t0()).expect("record");
    assert!((state.connection.value - 0.7).abs() < 1e-9);
    assert_eq!(inner::read_state(&settings).expect("read"), Some(state));
    let path = settings.dir.join(inner::INNER_STATE);
    let good = std::fs::read_to_string(&path).expect("file");
    for (bad, names) in [
        (good.replace("\"version\": 1", "\"version\": 9"), "version: 9 is newer"),
        (good.replacen("\"value\": 0.7", "\"value\": 1.7", 1), "connection.value: 1.7"),
        ("{ not json".to_string(), "memory/inner-state.json: JSON"),
        (good.replace("\"curiosity\"", "\"curiositty\""), "memory/inner-state.json: format"),
    ] {
        std::fs::write(&path, &bad).expect("write");
        let err = inner::record(&settings, &[InnerEvent::UserMessage {}], t0()).expect_err("refused").to_string();
        assert!(err.contains(names), "{err}");
        assert_eq!(std::fs::read_to_string(&path).expect("file"), bad, "the bad file is kept as it was");
    }
    let (_none, missing) = {
        let dir = tempfile::tempdir().expect("dir");
        let s = mneme_workspace::WorkspaceConfig::default().settings(dir.path().join("absent")).expect("settings");
        (dir, s)
    };
    assert!(inner::record(&missing, &[InnerEvent::UserMessage {}], t0()).is_err());
    assert!(!missing.dir.exists(), "no workspace is created");
}

#[test]
fn signal_and_synapse_tags_are_parsed_from_notes() {
    let text = "## 09:00\nwork <!-- handoff: migrate store, half done -->\n<!-- seeking-spark: vector quantisation -->\n\
                <!-- not-a-tag: x --> <!-- contradicts: 01J8Z3 --> <!-- updates:  --> <!-- dream-topic: tides";
    let tags: Vec<(String, String)> = inner::tags(text).into_iter().map(|t| (t.kind, t.value)).collect();
    assert_eq!(
        tags,
        [
            ("handoff".to_string(), "migrate store, half done".to_string()),
            ("seeking-spark".to_string(), "vector quantisation".to_string()),
            ("contradicts".to_string(), "01J8Z3".to_string()),
        ]
    );
}

/// Each level holds what the seed lists, within its budget.
#[test]
fn context_levels_hold_their_contents_within_budget() {
    let (_dir, settings) = workspace();
    let now = hours(10);
    let today = settings.today(now);
    let root = &settings.dir;
    std::fs::write(root.join(format!("memory/{today}.md")), "## 09:00\nWorked on the store. <!-- dream-topic: tides -->\n").expect("note");
    std::fs::write(root.join(inner::DRIVE), r#"{"version":1,"seeking":[{"topic":"rust"}]}"#).expect("drive");
    std::fs::write(root.join(inner::HABITS), r#"{"version":1,"myHabits":[]}"#).expect("habits");
    std::fs::create_dir_all(root.join("memory/diary")).expect("diary");
    std::fs::write(root.join("memory/diary/2026-11-20.md"), "Quiet day.").expect("diary");
    std::fs::write(root.join("BRAIN.md"), "# Brain\nThe protocol.").expect("brain");
    let relationship = r#"{"version":1,"trustLevel":{"technical":0.8,"proactive":0.5,"creative":0.5,"spending":0.1},
        "trustRules":[{"domain":"spending","below":0.5,"then":"ask before any purchase"},{"domain":"technical","below":0.5,"then":"explain first"}]}"#;
    std::fs::write(root.join(inner::RELATIONSHIP), relationship).expect("relationship");
    let level = |n| inner::context(&settings, now, n).expect("context");
    let (l1, l2, l3, l4) = (level(1), level(2), level(3), level(4));
    assert!(l1.starts_with("Context level 1 of 4: how I am.\n\n## How I am") && !l1.contains("Drive"), "{l1}");
    assert!(l2.contains("## Drive") && l2.contains("Worked on the store") && l2.contains("- dream-topic: tides"), "{l2}");
    assert!(!l2.contains("Habits") && l3.contains("## Habits") && l3.contains("Quiet day."), "{l3}");
    assert!(l3.contains("## Trust rules in force\n\n- spending (trust 0.10 < 0.50): ask before any purchase\n"), "{l3}");
    let in_force = l3.split("## Trust rules in force").nth(1).and_then(|t| t.split("\n## ").next()).unwrap_or_default();
    assert!(!in_force.contains("explain first"), "technical trust is above its rule's threshold: {in_force}");
    assert!(!l3.contains("The protocol.") && l4.contains("The protocol.") && l4.contains("## Weekly digest"), "{l4}");
    for (n, text) in [l1, l2, l3, l4].iter().enumerate() {
        assert!(text.len() <= inner::LEVEL_BUDGETS[n]);
    }
    // A broken file is an error naming the file and the field.
    std::fs::write(
        root.join(inner::HABITS),
        r#"{"version":1,"myHabits":[{"trigger":"t","action":"a","strength":2,"formed":"2026-11-01T00:00:00Z"}]}"#,
    )
    .expect("habits");
    let err = inner::context(&settings, now, 3).expect_err("invalid habits").to_string();
    assert!(err.contains("memory/habits.json: myHabits[0].strength: 2 is not within 0..=1"), "{err}");
    assert!(inner::context(&settings, now, 2).is_ok(), "level 2 does not read habits");
    std::fs::write(root.join(format!("memory/{today}.md")), "x".repeat(50_000)).expect("big note");
    assert!(level(2).len() <= inner::LEVEL_BUDGETS[1]);
    assert!(inner::context(&settings, now, 5).expect_err("level 5").to_string().contains("level 5"));
}

/// Write permissions are mneme's, not the job's: evolve writes QUEUE.md only; a refused
/// write changes nothing and is recorded, like an allowed one.
#[test]
fn a_job_writes_only_its_own_files() {
    use mneme_workspace::inner::{JOB_LOG, Job, job_write};
    let (_dir, settings) = workspace();
    let root = settings.dir.clone();
    inner::record(&settings, &[InnerEvent::UserMessage {}], t0()).expect("state");
    let state_before = std::fs::read_to_string(root.join(inner::INNER_STATE)).expect("state");
    let err = job_write(&settings, Job::Evolve, inner::INNER_STATE, "{}", t0()).expect_err("refused").to_string();
    assert!(err.contains("the evolve job may not write memory/inner-state.json (it writes QUEUE.md only)"), "{err}");
    assert_eq!(std::fs::read_to_string(root.join(inner::INNER_STATE)).expect("state"), state_before, "nothing changed");
    job_write(&settings, Job::Evolve, "QUEUE.md", "- [ ] propose: weekly review\n", t0()).expect("evolve writes the queue");
    job_write(&settings, Job::Dream, "memory/dreams/2026-11-23.md", "A tide of logs.\n", t0()).expect("dream");
    job_write(&settings, Job::Chronicle, "memory/diary/2026-11-23.md", "Quiet day.\n", t0()).expect("chronicle");
    for (job, path) in [
        (Job::Dream, "memory/dreams/../../SELF.md"),
        (Job::Reflect, "QUEUE.md"),
        (Job::Memory, "SELF.md"),
        (Job::Chronicle, "memory/diary/deep/x.md"),
        (Job::BrainLoop, "memory/notes.md"),
    ] {
        assert!(job_write(&settings, job, path, "x", t0()).is_err(), "{job:?} {path}");
    }
    assert!(!root.join("SELF.md").exists());
    let log = std::fs::read_to_string(root.join(JOB_LOG)).expect("log");
    let lines: Vec<serde_json::Value> = log.lines().map(|l| serde_json::from_str(l).expect("json")).collect();
    assert_eq!(lines.len(), 9);
    assert_eq!(lines[0]["job"], "evolve");
    assert_eq!(lines[0]["written"], false);
    assert_eq!(lines.iter().filter(|l| l["written"] == true).count(), 3);
}

/// The strength rule: a confirmed habit grows by `reinforce`, loses `weaken` per whole week
/// unconfirmed (applying it twice changes nothing more), and is dropped below `dropBelow`.
#[test]
fn habits_follow_the_strength_rule() {
    use mneme_workspace::inner_data::{Habits, NEW_HABIT_STRENGTH};
    let mut h = Habits::default();
    assert_eq!(h.confirm("deploy fails", "read the quota", "", t0()), NEW_HABIT_STRENGTH);
    assert!((h.confirm("Deploy fails", "", "", t0()) - 0.4).abs() < 1e-9, "case-insensitive trigger, +0.1");
    assert_eq!(h.my_habits[0].action, "read the quota", "an empty action keeps the old one");
    let weeks = |n: i64| t0() + jiff::SignedDuration::from_hours(24 * 7 * n);
    assert!(h.weaken(weeks(2)).is_empty());
    assert!((h.my_habits[0].strength - 0.3).abs() < 1e-9, "{:?}", h.my_habits);
    assert!(h.weaken(weeks(2)).is_empty());
    assert!((h.my_habits[0].strength - 0.3).abs() < 1e-9, "path-independent: {:?}", h.my_habits);
    assert!(h.weaken(weeks(6)).is_empty(), "0.3 − 4 × 0.05 = 0.1 is at the threshold: kept");
    assert_eq!(h.weaken(weeks(7)), ["deploy fails"], "one more week drops it");
    assert!(h.my_habits.is_empty());
}

/// Queue lines: checkboxes, dates, priorities; open items sort by priority, then age.
#[test]
fn queue_lines_parse_and_prioritise() {
    use mneme_workspace::inner_data::{parse_queue, prioritize};
    let text = "# Queue\n- [ ] write docs\n- [x] ship it (added 2026-11-01)\n* [ ] P1 fix login (since 2026-11-10)\n- [ ] [P1] rotate keys (added 2026-11-05)\n- [] not a task\n  - [ ] P3 someday\n";
    let items = parse_queue(text);
    assert_eq!(items.len(), 5, "{items:?}");
    assert!(items[1].done && items[1].text == "ship it" && items[1].since.is_some());
    let order: Vec<String> = prioritize(&items).into_iter().map(|i| i.text).collect();
    assert_eq!(order, ["rotate keys", "fix login", "write docs", "someday"]);
}
