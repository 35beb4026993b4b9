//! The inner life's jobs: with a scripted model (each job's answer applied to its own files,
//! a write outside them refused with nothing changed), offline (the deterministic
//! fallbacks, the brain loop skipped with its reason, dispatch to the agent), the sense
//! step (queue, tags, synapses, corrections, new skills), and a simulated month on the
//! scheduler.

use jiff::SignedDuration;
use mneme_core::{CompetencePayload, EventPayload, Payload, SemanticPayload};
use mneme_reflect::config::ReflectionConfig;
use mneme_reflect::engine::Reflector;
use mneme_reflect::inner::{InnerConfig, JobOptions, JobReport, run};
use mneme_service::{Access, Actor, IngestOptions, Revision};
use mneme_workspace::inner::{self, InnerEvent, Job};
use mneme_workspace::inner_data;
use serde_json::json;

use crate::reflect_model::{Bench, Reply};

fn force() -> JobOptions {
    JobOptions { force: true, dry_run: false }
}

fn go(b: &Bench, engine: &Reflector, job: Job) -> JobReport {
    run(engine, &b.service.owner(), &b.settings, job, b.now(), &force()).expect("job runs")
}

fn file(b: &Bench, relative: &str) -> String {
    std::fs::read_to_string(b.settings.dir.join(relative)).unwrap_or_default()
}

fn write(b: &Bench, relative: &str, text: &str) {
    let path = b.settings.dir.join(relative);
    std::fs::create_dir_all(path.parent().expect("parent")).expect("dir");
    std::fs::write(path, text).expect("write");
}

fn today(b: &Bench) -> jiff::civil::Date {
    b.settings.today(b.now())
}

fn offline(dispatch: bool) -> Reflector {
    Reflector::offline(ReflectionConfig::default()).with_inner(InnerConfig { jobs: true, dispatch })
}

fn script_all(b: &Bench) {
    b.script(
        "brain_loop",
        Reply::Ok(
            json!({
                "thinking": "Confidence is fine; the deploy item is oldest.",
                "actions": ["Checked the deploy quota"],
                "report": "The deploy is blocked on quota. I checked the limits. One. Two. Three. Six is cut.",
                "newTasks": ["Ask for a quota raise"],
                "questions": ["Does the staging cluster share the quota?"],
                "handoff": { "task": "quota raise", "progress": "limits checked" },
                "events": [{ "kind": "novelty", "what": "quota internals" }]
            })
            .to_string(),
        ),
    );
    b.script(
        "reflect",
        Reply::Ok(
            json!({
                "self": "I retry deploys instead of reading the error.",
                "habits": [{ "trigger": "deploy fails", "action": "read the quota first", "note": "from three failures" }],
                "files": [{ "path": "memory/inner-state.json", "content": "{}" }]
            })
            .to_string(),
        ),
    );
    b.script(
        "memory",
        Reply::Ok(
            json!({
                "memory": ["Deploys need quota headroom of 20 %"],
                "questions": ["Who approves quota raises?"],
                "seeking": [{ "topic": "cluster autoscaling", "intensity": 0.7 }]
            })
            .to_string(),
        ),
    );
    b.script(
        "dream",
        Reply::Ok(
            json!({
                "dream": "A harbour where ships wait for the tide, like deploys for quota.",
                "sparks": [{ "topic": "cluster autoscaling", "insight": "Scale in before deploys, not after." }]
            })
            .to_string(),
        ),
    );
    b.script(
        "chronicle",
        Reply::Ok(
            json!({ "entry": "A day of waiting on quota; oddly calm.", "questions": ["Why is quota per region?"], "dreamTopic": "tides" })
                .to_string(),
        ),
    );
    b.script(
        "evolve",
        Reply::Ok(
            json!({
                "proposals": ["Add a quota check to the deploy script"],
                "files": [
                    { "path": "SELF.md", "content": "evolve was here" },
                    { "path": "memory/habits.json", "content": "{}" }
                ]
            })
            .to_string(),
        ),
    );
}

/// With a model every job asks it with its context level, applies the validated answer to
/// its own files, and a file outside them (even one the model names) is refused and
/// recorded with nothing changed.
#[test]
fn with_a_model_each_job_writes_only_its_own_files() {
    let b = Bench::new();
    script_all(&b);
    let engine = b.engine(ReflectionConfig::default());
    let day = today(&b);
    write(&b, "QUEUE.md", "# Queue\n\n- [ ] P1 fix the deploy (added 2026-01-01)\n");
    write(&b, &format!("memory/{day}.md"), "# Notes\n\n## Deploy\n\nFailed again on quota.\n");

    let brain = go(&b, &engine, Job::BrainLoop);
    assert_eq!(brain.status, "ok", "{brain:?}");
    let note = file(&b, &format!("memory/{day}.md"));
    assert!(note.contains("## Brain loop") && note.contains("<!-- handoff: quota raise, limits checked -->"), "{note}");
    assert!(note.contains("Three.") && !note.contains("Six is cut"), "the report keeps five sentences: {note}");
    assert!(file(&b, "QUEUE.md").contains("- [ ] Ask for a quota raise (added "), "{}", file(&b, "QUEUE.md"));
    assert!(brain.wrote.contains(&inner::INNER_STATE.to_string()), "the novelty event: {brain:?}");
    let dispatches = b.service.take_dispatches(10).expect("dispatches");
    assert!(dispatches.iter().any(|d| d.text.contains("Tell the user: The deploy is blocked")), "{dispatches:?}");
    let seen = b.seen();
    let (_, request) = seen.iter().find(|(s, _)| *s == "brain_loop").expect("asked");
    let user = request["messages"][1]["content"].as_str().unwrap_or_default();
    assert!(user.contains("## How I am") && user.contains("## Queue (most urgent first)") && user.contains("P1 fix the deploy"), "{user}");

    // Reflect may not write the state file: the model's attempt is refused, the rest applies.
    let reflect = go(&b, &engine, Job::Reflect);
    assert_eq!(reflect.status, "ok");
    assert_eq!(reflect.refused.len(), 1, "{reflect:?}");
    assert!(reflect.refused[0].contains("reflect job may not write memory/inner-state.json"), "{:?}", reflect.refused);
    // (mneme's own sense step keeps the state current; the model's "{}" never landed.)
    assert!(inner::read_state(&b.settings).expect("still valid").is_some(), "{}", file(&b, inner::INNER_STATE));
    assert!(file(&b, "SELF.md").contains("I retry deploys"));
    let habits = inner_data::read_habits(&b.settings).expect("valid").expect("written");
    assert_eq!(habits.my_habits[0].trigger, "deploy fails");

    let memory = go(&b, &engine, Job::Memory);
    assert_eq!(memory.status, "ok", "{memory:?}");
    assert!(file(&b, "MEMORY.md").contains("quota headroom"));
    assert!(file(&b, "questions.md").contains("Who approves quota raises?"));
    let drive = inner_data::read_drive(&b.settings).expect("valid").expect("written");
    assert_eq!(drive.seeking[0].topic, "cluster autoscaling");

    let dream = go(&b, &engine, Job::Dream);
    assert_eq!(dream.status, "ok");
    assert!(file(&b, &format!("memory/dreams/{day}.md")).contains("<!-- seeking-spark: cluster autoscaling -->"));

    // The next run's sense step consumes the dream's spark: curiosity rises by 0.1.
    let curiosity = || inner::read_state(&b.settings).expect("state").expect("exists").mood(b.now()).curiosity;
    let before = curiosity();
    let chronicle = go(&b, &engine, Job::Chronicle);
    assert_eq!(chronicle.status, "ok");
    assert!(chronicle.sensed.events.contains(&InnerEvent::Spark { topic: "cluster autoscaling".into() }), "{:?}", chronicle.sensed);
    assert!((curiosity() - before - 0.1).abs() < 1e-9, "{before} → {}", curiosity());
    assert!(file(&b, &format!("memory/diary/{day}.md")).contains("<!-- dream-topic: tides -->"));
    assert!(file(&b, "questions.md").contains("Why is quota per region?"));

    // Evolve writes QUEUE.md only: SELF.md and habits.json stay as they were.
    let (me, habits_text) = (file(&b, "SELF.md"), file(&b, inner::HABITS));
    let evolve = go(&b, &engine, Job::Evolve);
    assert_eq!(evolve.status, "ok");
    assert_eq!(evolve.refused.len(), 2, "{evolve:?}");
    assert_eq!((file(&b, "SELF.md"), file(&b, inner::HABITS)), (me, habits_text), "evolve changed nothing but the queue");
    assert!(file(&b, "QUEUE.md").contains("- [ ] P3 Add a quota check to the deploy script"));
    let seen = b.seen();
    let (_, request) = seen.iter().find(|(s, _)| *s == "evolve").expect("asked");
    assert!(request["messages"][1]["content"].as_str().unwrap_or_default().contains("## Drive"), "level 4 carries level 2");

    // The job log has every attempt: three refusals, and one run line per job.
    let log = inner::job_log(&b.settings);
    assert_eq!(log.iter().filter(|l| l["written"] == false).count(), 3);
    for job in Job::ALL {
        assert_eq!(log.iter().filter(|l| l["job"] == job.name() && l["run"] == "ok").count(), 1, "{job:?}");
    }
}

/// A model answer that does not have the job's shape falls back, with the reason.
#[test]
fn a_bad_answer_falls_back_with_the_reason() {
    let b = Bench::new();
    b.script("chronicle", Reply::Ok(r#"{"diary": "wrong field"}"#.into()));
    b.script("brain_loop", Reply::Status(500));
    let engine = b.engine(ReflectionConfig::default());
    let chronicle = go(&b, &engine, Job::Chronicle);
    assert_eq!(chronicle.status, "fallback");
    assert!(chronicle.reason.as_deref().is_some_and(|r| r.contains("entry: missing")), "{chronicle:?}");
    assert!(file(&b, &format!("memory/diary/{}.md", today(&b))).contains("Written without a model"));
    let brain = go(&b, &engine, Job::BrainLoop);
    assert_eq!(brain.status, "skipped");
    assert!(brain.reason.as_deref().is_some_and(|r| r.contains("LLM failed")), "{brain:?}");
    assert!(brain.wrote.is_empty());
}

/// Offline: with nothing new the brain loop is skipped with the reason (its mechanical
/// steps still ran), the extensions run their deterministic versions, and a scheduled
/// reflect or memory run waits for its trigger.
#[test]
fn offline_the_extensions_fall_back_and_the_brain_loop_skips() {
    let b = Bench::new();
    let engine = offline(false);
    let day = today(&b);
    let yesterday = day.yesterday().expect("date");
    write(&b, "QUEUE.md", "- [ ] renew the TLS certificate (added 2026-01-01)\n- [x] rotate keys\n");
    write(&b, &format!("memory/{yesterday}.md"), "## Infra\n\nThe cluster autoscaling lagged at noon.\nShould we pin the node pool?\n");

    let brain = go(&b, &engine, Job::BrainLoop);
    assert_eq!(brain.status, "skipped");
    assert!(
        brain.reason.as_deref().is_some_and(
            |r| r.starts_with("no LLM configured; nothing happened or changed since the last loop (") && r.ends_with("); 1 pending")
        ),
        "{brain:?}"
    );
    assert!(brain.wrote.is_empty());
    assert_eq!(brain.sensed.queue.len(), 1, "the open item, prioritised: {brain:?}");
    let state = inner::read_state(&b.settings).expect("read").expect("the sense step wrote it");
    assert_eq!(state.impatience[0].what, "renew the TLS certificate");
    assert!(state.mood(b.now()).hints.iter().any(|h| h.starts_with("reminder: renew the TLS certificate")), "{:?}", state.mood(b.now()));

    // Reflect: not triggered until a problem repeats; then it forms a habit.
    let waiting = run(&engine, &b.service.owner(), &b.settings, Job::Reflect, b.now(), &JobOptions::default()).expect("run");
    assert_eq!(waiting.status, "not_triggered");
    inner::record(&b.settings, &vec![InnerEvent::Repeat { what: "quota exceeded".into() }; 3], b.now()).expect("repeats");
    let reflect = run(&engine, &b.service.owner(), &b.settings, Job::Reflect, b.now(), &JobOptions::default()).expect("run");
    assert_eq!(reflect.status, "fallback", "{reflect:?}");
    assert!(file(&b, "SELF.md").contains("Recurring problem: quota exceeded (3×)"));
    let habits = inner_data::read_habits(&b.settings).expect("valid").expect("written");
    assert_eq!((habits.my_habits[0].trigger.as_str(), habits.my_habits[0].strength), ("quota exceeded", inner_data::NEW_HABIT_STRENGTH));
    let again = run(&engine, &b.service.owner(), &b.settings, Job::Reflect, b.now(), &JobOptions::default()).expect("run");
    assert_eq!(again.status, "not_triggered", "once per new problem");

    // Memory: the open question of yesterday's note.
    b.service.touch_activity().expect("activity");
    b.clock.advance(SignedDuration::from_mins(1));
    let memory = run(&engine, &b.service.owner(), &b.settings, Job::Memory, b.now(), &JobOptions::default()).expect("run");
    assert_eq!(memory.status, "fallback", "{memory:?}");
    assert!(file(&b, "questions.md").contains("Should we pin the node pool?"));

    // Dream: a seeking topic meets the older note that mentions it, and sparks.
    let mut drive = inner_data::Drive::default();
    drive.seek("cluster autoscaling", 0.8, "user", b.now());
    write(&b, inner::DRIVE, &inner_data::to_file_text(inner::DRIVE, &drive).expect("json"));
    let dream = go(&b, &engine, Job::Dream);
    assert_eq!(dream.status, "fallback");
    let dreamt = file(&b, &format!("memory/dreams/{day}.md"));
    assert!(
        dreamt.contains("The cluster autoscaling lagged") && dreamt.contains("<!-- seeking-spark: cluster autoscaling -->"),
        "{dreamt}"
    );

    // Chronicle: the day's state, with tonight's dream topic.
    let chronicle = go(&b, &engine, Job::Chronicle);
    assert_eq!(chronicle.status, "fallback");
    let diary = file(&b, &format!("memory/diary/{day}.md"));
    assert!(diary.contains("## How I feel, and why") && diary.contains("<!-- dream-topic: cluster autoscaling -->"), "{diary}");
    assert!(diary.contains("## What is pending\n\n- P2 renew the TLS certificate (waiting "), "{diary}");

    // Evolve: proposals from what recurs and what waits, into the queue only.
    let evolve = go(&b, &engine, Job::Evolve);
    assert_eq!(evolve.status, "fallback");
    let queue = file(&b, "QUEUE.md");
    assert!(
        queue.contains("Systemic fix for \"quota exceeded\"") && queue.contains("Decide or drop \"renew the TLS certificate\""),
        "{queue}"
    );
    assert_eq!(evolve.wrote, ["QUEUE.md"]);
    // Its proposals wait in the queue for the user; a week later evolve does not propose
    // deciding on its own proposals, and repeats none.
    b.clock.advance(SignedDuration::from_hours(24 * 8));
    go(&b, &engine, Job::Evolve);
    let queue = file(&b, "QUEUE.md");
    assert!(!queue.contains("Decide or drop \"Systemic fix") && !queue.contains("Decide or drop \"Decide"), "{queue}");
    assert_eq!(queue.matches("Systemic fix for \"quota exceeded\"").count(), 1, "{queue}");
    assert!(inner::job_log(&b.settings).iter().all(|l| l["written"] != false), "no job tried another's files");
}

/// Offline, the brain loop and the diary say what happened, what is pending and what
/// changed, from the store's events and the workspace; a loop with nothing new writes
/// nothing, and a failure nothing fixed becomes a queue task once.
#[test]
fn offline_the_brain_loop_and_the_diary_say_what_happened_what_is_pending_and_what_changed() {
    let b = Bench::new();
    let engine = offline(false);
    let day = today(&b);
    write(&b, "QUEUE.md", "- [ ] P1 renew the TLS certificate (added 2026-01-01)\n");
    write(&b, &format!("memory/{day}.md"), "## Morning\n\nStarted on the login bug.\n<!-- handoff: login bug, reproduced locally -->\n");
    write(&b, "questions.md", "- Why does staging take 20 minutes to deploy? (2026-01-01)\n");
    let said = |text: &str| {
        let event = EventPayload {
            event_kind: "user_message".into(),
            reference: None,
            sender: Some("dana".into()),
            text: text.into(),
            event_time: None,
        };
        b.service.ingest(Payload::Event(event), IngestOptions::default()).expect("ingest");
    };
    said("please fix the failing login test before the demo");
    for _ in 0..2 {
        let failed = mneme_core::ToolOutputPayload {
            tool: "bash".into(),
            args: json!({ "command": "npm test" }),
            result: None,
            error: Some("Error: connect ECONNREFUSED 127.0.0.1:5432".into()),
            duration_ms: None,
        };
        b.service.ingest(Payload::ToolOutput(failed), IngestOptions::default()).expect("ingest");
    }
    let fact = SemanticPayload {
        subject: "dana".into(),
        predicate: "lives_in".into(),
        object: "Berlin".into(),
        valid_from: None,
        valid_to: None,
        evidence: Vec::new(),
    };
    b.service.ingest(Payload::Semantic(fact), IngestOptions::default()).expect("fact");
    b.clock.advance(SignedDuration::from_mins(5));

    let brain = go(&b, &engine, Job::BrainLoop);
    assert_eq!((brain.status, brain.reason.as_deref()), ("fallback", Some("no LLM configured")), "{brain:?}");
    let note = file(&b, &format!("memory/{day}.md"));
    for part in [
        "(without a model)",
        "What happened:\n- 1 message from the user, 0 from the agent, 2 tool calls (2 failed)\n- the user: “please fix the failing login test before the demo”\n- `npm test` failed 2× (“error: connect econnrefused #.#.#.#:<port>”), not passed since\n",
        "What is pending:\n- P1 renew the TLS certificate (waiting ",
        "- handed over by an earlier loop: login bug, reproduced locally\n",
        "What changed:\n- learned: ",
    ] {
        assert!(note.contains(part), "{part:?} in {note}");
    }
    let queue = file(&b, "QUEUE.md");
    assert!(
        queue.contains("- [ ] Find the cause of `npm test` failing with “error: connect econnrefused #.#.#.#:<port>” (added "),
        "{queue}"
    );
    // Nobody worked on the handoff: it is still there for the next loop (or the model).
    let state = inner::read_state(&b.settings).expect("read").expect("state");
    assert!(!state.consumed_signals.iter().any(|k| k.starts_with("handoff:")), "{:?}", state.consumed_signals);

    // Nothing new since: no note, no second task.
    b.clock.advance(SignedDuration::from_mins(30));
    let quiet = go(&b, &engine, Job::BrainLoop);
    assert_eq!(quiet.status, "skipped", "{quiet:?}");
    assert!(quiet.wrote.is_empty());
    assert_eq!(file(&b, &format!("memory/{day}.md")), note);

    let chronicle = go(&b, &engine, Job::Chronicle);
    assert_eq!(chronicle.status, "fallback");
    let diary = file(&b, &format!("memory/diary/{day}.md"));
    for part in [
        "## What happened\n\n- 1 message from the user",
        "- the user: “please fix the failing login test before the demo”",
        "## How I feel, and why",
        "- Connection 0.",
        ": 1 message from the user today.",
        "## What I wonder about\n\n- Why does staging take 20 minutes to deploy? (2026-01-01)",
        "Today's notes: Morning; Brain loop ",
    ] {
        assert!(diary.contains(part), "{part:?} in {diary}");
    }
}

/// On a fresh workspace each context level says what it holds and what is not written
/// yet, so the four levels differ and a reader knows what it was not given.
#[test]
fn each_context_level_names_what_it_holds_and_what_is_missing() {
    let b = Bench::new();
    let levels: Vec<String> = (1..=4).map(|l| inner::context(&b.settings, b.now(), l).expect("context")).collect();
    for (i, text) in levels.iter().enumerate() {
        assert!(text.starts_with(&format!("Context level {} of 4: how I am", i + 1)), "{text}");
        assert!(text.contains("## How I am"), "{text}");
    }
    assert!(!levels[0].contains("Not written yet"), "level 1 only needs the state: {}", levels[0]);
    assert!(levels[1].contains("## Not written yet\n\nmemory/drive.json, daily notes of the last two days"), "{}", levels[1]);
    assert!(levels[2].contains("questions.md, memory/diary/, memory/dreams/"), "{}", levels[2]);
    assert!(levels[3].contains("BRAIN.md, SELF.md, MEMORY.md, QUEUE.md, daily notes of the last seven days"), "{}", levels[3]);
    let distinct: std::collections::BTreeSet<&String> = levels.iter().collect();
    assert_eq!(distinct.len(), 4);
}

/// With `[inner] dispatch = true` and no model, the thinking goes to the agent; the agent
/// writes through the same lanes.
#[test]
fn with_dispatch_the_agent_does_the_thinking_in_the_same_lanes() {
    let b = Bench::new();
    let engine = offline(true);
    let report = go(&b, &engine, Job::Chronicle);
    assert_eq!(report.status, "dispatched");
    let text = report.dispatch.expect("instruction");
    assert!(text.starts_with("[Inner life: chronicle]") && text.contains("mneme inner context --level 3"), "{text}");
    assert!(text.contains("mneme inner write --job chronicle memory/diary/"), "{text}");
    let queued = b.service.take_dispatches(10).expect("dispatches");
    assert_eq!(queued.len(), 1);
    assert!(report.wrote.is_empty(), "the agent writes, not mneme");
    // The agent's write through the lane works; outside it is refused with nothing written.
    let day = today(&b);
    inner::write_for(&b.settings, Job::Chronicle, &format!("memory/diary/{day}.md"), "# today\n", false, b.now()).expect("allowed");
    let err = inner::write_for(&b.settings, Job::Evolve, "SELF.md", "hijack", false, b.now()).expect_err("refused");
    assert!(err.to_string().contains("the evolve job may not write SELF.md (it writes QUEUE.md only)"), "{err}");
    assert!(!b.settings.dir.join("SELF.md").exists());
    let err = inner::write_for(&b.settings, Job::Dream, "memory/dreams/../../x.md", "escape", false, b.now()).expect_err("refused");
    assert!(err.to_string().contains("may not write"), "{err}");
}

/// The sense step: corrections by people lower confidence (mneme's own engines do not), a
/// new skill is novelty, synapse tags become store links, consumed once.
#[test]
fn sense_turns_corrections_skills_and_synapses_into_events_and_links() {
    let b = Bench::new();
    let engine = offline(false);
    let fact = |object: &str| {
        Payload::Semantic(SemanticPayload {
            subject: "deploy".into(),
            predicate: "region".into(),
            object: object.into(),
            valid_from: None,
            valid_to: None,
            evidence: Vec::new(),
        })
    };
    let old = b.service.ingest(fact("eu-west-1"), IngestOptions::default()).expect("fact");
    let other = b.service.ingest(fact("us-east-1"), IngestOptions::default()).expect("fact");
    // The first run starts from now: what happened before is not news.
    let first = go(&b, &engine, Job::BrainLoop);
    assert!(first.sensed.events.is_empty(), "{first:?}");

    let revise = |id, actor: &str| {
        let change = Revision { payload: Some(fact("eu-central-1")), summary: None, tags: None, sensitivity: None, confidence: None };
        b.service.supersede(id, change, Actor { actor: actor.into(), rationale: "moved".into() }, &Access::owner()).expect("supersede")
    };
    revise(&old.id, "user");
    revise(&other.id, "mneme:truth");
    let live = b.service.ingest(fact("ap-south-1"), IngestOptions::default()).expect("fact");
    let skill =
        CompetencePayload { skill: "terraform import".into(), triggers: Vec::new(), steps: Vec::new(), performance: Default::default() };
    b.service.ingest(Payload::Competence(skill), IngestOptions::default()).expect("skill");
    let note = b
        .service
        .ingest(
            Payload::Event(EventPayload {
                event_kind: "message".into(),
                reference: None,
                sender: None,
                text: "deploy done".into(),
                event_time: None,
            }),
            IngestOptions::default(),
        )
        .expect("event");
    write(
        &b,
        &format!("memory/{}.md", today(&b)),
        &format!(
            "- The region is not ap-south-1 after all <!-- contradicts: {} -->\n- Deploy went out <!-- caused-by: {} -->\n\
             <!-- updates: not-a-record -->\n- Old news <!-- contradicts: {} -->\n",
            live.id, note.id, old.id
        ),
    );
    let confidence = inner::read_state(&b.settings).expect("s").expect("s").mood(b.now()).confidence;
    let second = go(&b, &engine, Job::BrainLoop);
    let mistakes = second.sensed.events.iter().filter(|e| matches!(e, InnerEvent::Mistake { .. })).count();
    assert_eq!(mistakes, 1, "only the person's correction counts: {:?}", second.sensed.events);
    assert!(
        second.sensed.events.iter().any(|e| matches!(e, InnerEvent::Novelty { what } if what.contains("terraform import"))),
        "{:?}",
        second.sensed.events
    );
    let after = inner::read_state(&b.settings).expect("s").expect("s").mood(b.now()).confidence;
    assert!((confidence - after - 0.1).abs() < 1e-9, "{confidence} → {after}");
    assert_eq!(second.sensed.links.len(), 2, "{:?}", second.sensed);
    // A superseded record cannot be contested: the tag is reported, and not retried.
    assert_eq!(second.sensed.errors.len(), 1, "{:?}", second.sensed);
    assert!(second.sensed.errors[0].contains("it is superseded"), "{:?}", second.sensed.errors);
    let contested = b.service.get(&live.id, &Access::owner()).expect("get");
    assert_eq!(contested.status, mneme_core::Status::Contested);
    let history = b.service.history(&live.id, &Access::owner()).expect("history");
    let json = format!("{history:?}");
    assert!(json.contains("The region is not ap-south-1 after all"), "{json}");
    let third = go(&b, &engine, Job::BrainLoop);
    assert!(third.sensed.links.is_empty() && third.sensed.events.is_empty(), "consumed once: {:?}", third.sensed);
}

/// A simulated month on the scheduler (a pass every hour), offline: the user writes daily
/// for a week and then goes quiet; a deploy fails on three days running; an item waits in
/// the queue; on day 20 a person corrects the agent's facts seven times. Each emotion and
/// hint moves when the seed says, and the jobs run on their schedules writing only their
/// own files.
#[test]
fn a_simulated_month_moves_each_emotion_and_runs_the_jobs_on_schedule() {
    let b = Bench::new();
    let engine = offline(false);
    let tz = b.settings.timezone.clone();
    let start_day = b.now().to_zoned(tz.clone()).date();
    write(&b, "QUEUE.md", &format!("- [ ] renew the TLS certificate (added {start_day})\n"));
    write(&b, &format!("memory/{start_day}.md"), "## Infra\n\nThe autoscaling group lagged behind the load.\n");
    let mut drive = inner_data::Drive::default();
    drive.seek("autoscaling behaviour", 0.6, "user", b.now());
    write(&b, inner::DRIVE, &inner_data::to_file_text(inner::DRIVE, &drive).expect("json"));
    let fact = b
        .service
        .ingest(
            Payload::Semantic(SemanticPayload {
                subject: "deploy".into(),
                predicate: "region".into(),
                object: "eu-west-1".into(),
                valid_from: None,
                valid_to: None,
                evidence: Vec::new(),
            }),
            IngestOptions::default(),
        )
        .expect("fact");
    let mood = || inner::read_state(&b.settings).expect("s").map(|s| s.mood(b.now()));
    let mut first_hint: std::collections::BTreeMap<String, i64> = Default::default();
    let mut curiosity_low = 1.0f64;
    let mut latest = fact.id.clone();
    for hour in 0..(30 * 24) {
        let day = hour / 24;
        if day < 7 && hour % 24 == 10 {
            inner::record(&b.settings, &[InnerEvent::UserMessage {}], b.now()).expect("message");
            b.service.touch_activity().expect("activity");
        }
        if (10..13).contains(&day) && hour % 24 == 15 {
            inner::record(&b.settings, &[InnerEvent::Repeat { what: "deploy: quota exceeded".into() }], b.now()).expect("failure");
        }
        if day == 20 && hour % 24 == 12 {
            for i in 0..7 {
                let change = Revision { summary: Some(format!("region, take {i}")), ..Revision::default() };
                let who = Actor { actor: "dana".into(), rationale: "wrong again".into() };
                latest = b.service.supersede(&latest, change, who, &Access::owner()).expect("correction").id;
            }
        }
        mneme_agent::scheduler::run_due(&b.service.owner(), &b.settings, &engine, b.now(), Some(true)).expect("scheduler");
        let Some(m) = mood() else {
            b.clock.advance(SignedDuration::from_hours(1));
            continue;
        };
        curiosity_low = curiosity_low.min(m.curiosity);
        for h in m.hints {
            let key = h.split(':').next().unwrap_or_default().to_string();
            first_hint.entry(key).or_insert(day);
        }
        b.clock.advance(SignedDuration::from_hours(1));
    }
    // Connection: the daily +0.2 offsets a day's −0.2 drift at 0.62 from day 0; after the
    // last message (day 6, hour 10) it falls below 0.3 after 38 hours: day 8.
    assert_eq!(first_hint["reach out"], 8, "{first_hint:?}");
    // The TLS item (since midnight of day 0) has waited more than three days at hour 88.
    assert_eq!(first_hint["reminder"], 3, "{first_hint:?}");
    // The third failure (day 12) asks for a systemic fix.
    assert_eq!(first_hint["systemic fix"], 12, "{first_hint:?}");
    // Boredom: more than seven days without novelty.
    assert_eq!(first_hint["experiment"], 8, "{first_hint:?}");
    // Seven corrections by a person take confidence from 1 to 0.3 on day 20.
    assert_eq!(first_hint["double-check"], 20, "{first_hint:?}");
    // Curiosity drifts −0.12 a day from 0.5 and each night's dream finds the day-0 note
    // about the seeking topic and sparks (+0.1): a net −0.02 a day, so it is still 0.5 −
    // 0.72 + 0.5 = 0.28 on day 6 (without the sparks it would be day 1).
    assert_eq!(first_hint["find a stimulus"], 6, "{first_hint:?}");
    let state = inner::read_state(&b.settings).expect("s").expect("s");
    let sparks = state.consumed_signals.iter().filter(|k| k.starts_with("seeking-spark: autoscaling behaviour @ memory/dreams/")).count();
    assert!(sparks >= 10, "the nightly dreams sparked: {:?}", state.consumed_signals);
    assert!(curiosity_low < 0.3);

    let log = inner::job_log(&b.settings);
    let runs = |job: Job| log.iter().filter(|l| l["job"] == job.name() && l.get("run").is_some()).count();
    assert_eq!(runs(Job::Chronicle), 30, "every evening");
    assert_eq!(runs(Job::BrainLoop), 90, "three times a day");
    assert_eq!(runs(Job::Dream), 30, "every night (08:00 on day 0 to 07:00 on day 30 holds 30 nights)");
    let evolve = runs(Job::Evolve);
    assert!((8..=9).contains(&evolve), "twice a week: {evolve}");
    assert_eq!(runs(Job::Reflect), 2, "after the third failure and after the corrections");
    assert!(file(&b, "SELF.md").contains("Recurring problem: deploy: quota exceeded (3×)"), "{}", file(&b, "SELF.md"));
    assert!(file(&b, "SELF.md").contains("double-check facts before acting"), "{}", file(&b, "SELF.md"));
    assert!(log.iter().all(|l| l["written"] != false), "no job wrote outside its files");
}
