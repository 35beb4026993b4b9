//! One heartbeat tick (sinain §6): setup, Phase 1 (git backup), Phase 2 (signals and the
//! recommended action), Phase 3 (mining on idle ticks, feedback, curation, the Step-4 log
//! line, insight). `HEARTBEAT_OK` only once the Step-4 line is durably appended; every
//! file write before it is atomic, so a crash leaves no half-written file and the next
//! tick proceeds. One tick at a time per workspace (`.mneme-reflect.lock`).
//!
//! Each thinking stage uses the model when one is configured and records how it ran
//! (`ok`, `fallback` with the reason, `skipped` with the reason) in the line's `stages`.
//! Step 5 runs after the Step-4 line and records itself in an `output` line.

use std::collections::BTreeMap;
use std::path::PathBuf;

use jiff::{SignedDuration, Timestamp};
use mneme_service::Owner;
use mneme_workspace::playbook::{Playbook, normalize, parse_module_stack, write_curated};
use mneme_workspace::{WorkspaceSettings, paths, playbook_log};
use serde::Serialize;
use serde_json::{Value, json};

use super::ReflectError;
use super::actions::{SpawnPolicy, daily_minimum_due, settle_spawns};
use super::curator::{CurateInput, curate, stale_due};
use super::engine::{Calls, Reflector, StageOutcome};
use super::feedback::{figures, interpret};
use super::insight::{Week, synthesize};
use super::lessons::{LESSON_DAYS, LESSON_EVENTS, Lesson, Meanings, delivered, learn, observe, recognise, trigger};
use super::setup::{History, summarize};
use super::signals::{ActionKind, SignalInput, analyze};
use super::{git, miner, outbound};

/// Days of log the feedback stage reads.
pub const FEEDBACK_DAYS: i64 = 7;
/// Days of tick lines whose stale-item actions count.
pub const STALE_ACTION_DAYS: i64 = 30;
/// Days of logs the insight synthesizer reads.
pub const INSIGHT_DAYS: i64 = 3;

/// How a tick is run.
#[derive(Debug, Clone, Default)]
pub struct TickOptions {
    /// Treat the agent as idle (or not) instead of deciding from its activity.
    pub idle: Option<bool>,
    /// A session summary to use instead of building one.
    pub summary: Option<String>,
    /// Compute everything, write nothing (no playbook, log line, dispatch, delivery or
    /// commit).
    pub dry_run: bool,
}

/// What a tick did.
#[derive(Debug, Clone, Serialize)]
pub struct TickReport {
    /// `HEARTBEAT_OK`, or `DRY_RUN`.
    pub status: &'static str,
    #[serde(rename = "tickId")]
    pub tick_id: String,
    /// The Step-4 log line (written unless a dry run).
    pub line: Value,
    /// The Step-5 output line (written unless a dry run).
    pub output: Value,
    /// The log file written (workspace-relative).
    pub log: Option<PathBuf>,
    /// Model calls and tokens, the whole tick.
    pub llm: Calls,
    /// Heartbeat logs and playbook copies moved to `archive/` by retention.
    pub archived: Vec<PathBuf>,
}

/// The one-tick-per-workspace lock; released when dropped.
struct TickLock(std::fs::File);

impl TickLock {
    fn acquire(settings: &WorkspaceSettings) -> Result<TickLock, ReflectError> {
        // The heartbeat curates a workspace the user set up; it never creates one.
        if !settings.dir.is_dir() {
            return Err(ReflectError::NoWorkspace(settings.dir.clone()));
        }
        let path = paths::resolve(&settings.dir, ".mneme-reflect.lock")?;
        let file = std::fs::File::options()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(|source| mneme_workspace::WorkspaceError::Io { action: "cannot open", path: path.clone(), source })?;
        match file.try_lock() {
            Ok(()) => Ok(TickLock(file)),
            Err(std::fs::TryLockError::WouldBlock) => Err(ReflectError::Busy(path)),
            Err(std::fs::TryLockError::Error(source)) => {
                Err(mneme_workspace::WorkspaceError::Io { action: "cannot lock", path: path.clone(), source }.into())
            }
        }
    }
}

impl Drop for TickLock {
    fn drop(&mut self) {
        let _ = self.0.unlock();
    }
}

/// Whether the agent is idle at `now`: no hook activity for `reflection.idle_after`.
pub fn is_idle(engine: &Reflector, last_activity: Option<Timestamp>, now: Timestamp) -> bool {
    let after = SignedDuration::try_from(engine.config.idle_after.get()).unwrap_or(SignedDuration::MAX);
    last_activity.is_none_or(|at| now.duration_since(at) >= after)
}

fn record(stages: &mut serde_json::Map<String, Value>, name: &str, outcome: &StageOutcome) {
    stages.insert(name.into(), serde_json::to_value(outcome).unwrap_or(Value::Null));
}

/// The effective playbook's text, else the base playbook's.
pub fn read_effective(settings: &WorkspaceSettings) -> String {
    [paths::EFFECTIVE_PLAYBOOK, paths::PLAYBOOK]
        .iter()
        .find_map(|p| paths::resolve(&settings.dir, p).ok().and_then(|p| std::fs::read_to_string(p).ok()))
        .unwrap_or_default()
}

/// Runs one tick at `now`.
pub fn tick(
    engine: &Reflector,
    owner: &Owner<'_>,
    settings: &WorkspaceSettings,
    now: Timestamp,
    options: &TickOptions,
) -> Result<TickReport, ReflectError> {
    let started = std::time::Instant::now();
    let _lock = TickLock::acquire(settings)?;
    engine.take_calls();
    // Milliseconds: two ticks in one second (a command run twice) still get their own ids.
    let tick_id = format!("t{}", now.strftime("%Y%m%dT%H%M%S%3fZ"));
    let today = settings.today(now);
    let mut stages = serde_json::Map::new();

    // ---- setup: history, idle, session summary, module stack, the week's lessons ----
    let history = History::gather(owner, now)?;
    let week = History::gather_window(owner, now, SignedDuration::from_hours(24 * LESSON_DAYS), LESSON_EVENTS)?;
    let last_activity = owner.last_activity()?;
    let idle = options.idle.unwrap_or_else(|| is_idle(engine, last_activity, now));
    let summary = match &options.summary {
        Some(s) => s.clone(),
        None => {
            let (s, outcome) = summarize(engine, &history);
            record(&mut stages, "summary", &outcome);
            s
        }
    };
    let effective = read_effective(settings);
    let module_stack = parse_module_stack(&effective);
    record(&mut stages, "setup", &StageOutcome::ok());

    // ---- Phase 1: git backup (never fails the tick) ----
    let git = git::backup(&settings.dir, &engine.config.git, now, options.dry_run);
    let git_outcome = match git["status"].as_str() {
        Some("committed" | "nothing to commit") => StageOutcome::ok(),
        Some("failed") => StageOutcome::failed(git["error"].as_str().unwrap_or("git failed")),
        _ => StageOutcome::skipped(git["reason"].as_str().unwrap_or("skipped")),
    };
    record(&mut stages, "git", &git_outcome);

    // The log and the playbook as they were before this tick.
    let mut lines = playbook_log::read(settings, today - jiff::Span::new().days(STALE_ACTION_DAYS), today)?;
    let recent_ticks: Vec<Value> = lines.iter().filter(|l| l.kind == "tick").take(10).map(|l| l.value.clone()).collect();
    let playbook_path = paths::resolve(&settings.dir, paths::PLAYBOOK)?;
    let old = std::fs::read_to_string(&playbook_path).unwrap_or_default();
    let base = if old.is_empty() { Playbook::fresh() } else { Playbook::parse(&old) };
    // The week's lessons, recognised in the playbook and among the tips delivered.
    let delivered = delivered(&lines);
    let (meanings, lessons) = week_lessons(engine, owner, &week, &base, &delivered);
    // Tips scored by what happened after them (written before the feedback stage reads).
    let observed = observe_tips(&lines, &week, &meanings, now - SignedDuration::from_hours(24 * FEEDBACK_DAYS), now);
    for value in &observed {
        if !options.dry_run {
            playbook_log::append(settings, now, value)?;
        }
        let line = playbook_log::LogLine { day: today, kind: "feedback".into(), ts: Some(now), value: value.clone() };
        lines.insert(0, line);
    }
    // Lessons in force: a day's work with a learned line at every session start is an
    // output too, scored like its tip by the ticks after it.
    let standing = if engine.config.count_tips_as_outputs { standing_outputs(&lines, &base, &week, &tick_id, now) } else { Vec::new() };
    for value in &standing {
        if !options.dry_run {
            playbook_log::append(settings, now, value)?;
        }
        lines.insert(0, playbook_log::LogLine { day: today, kind: "output".into(), ts: Some(now), value: value.clone() });
    }
    let mut stale_actions: BTreeMap<String, u32> = BTreeMap::new();
    let mut acted_today: Vec<String> = Vec::new();
    for line in lines.iter().filter(|l| l.kind == "tick") {
        if let Some(item) = line.value["actionTaken"]["staleItem"].as_str() {
            let key = normalize(item);
            if line.ts.is_some_and(|ts| ts > now - SignedDuration::from_hours(24)) {
                acted_today.push(key.clone());
            }
            *stale_actions.entry(key).or_default() += 1;
        }
    }
    let stale_due = stale_due(&base, &stale_actions, &acted_today, today);

    // ---- Phase 2: signals, spawn outcomes, the action ----
    let (report, outcome) = analyze(
        engine,
        &SignalInput {
            history: &history,
            summary: &summary,
            playbook: if effective.is_empty() { &old } else { &effective },
            recent_ticks: &recent_ticks,
            idle,
            lessons: &lessons,
            delivered: &delivered,
        },
    );
    record(&mut stages, "signals", &outcome);
    let policy = SpawnPolicy::from(&engine.config);
    let (spawn_outcomes, spawn_state) = settle_spawns(&lines, &policy);
    let daily_minimum = !idle && daily_minimum_due(&lines, now, last_activity);
    let action = &report.recommended_action;
    let spawn = |task: &str, extra: Value| -> Result<Value, ReflectError> {
        let spawn_id = format!("{tick_id}-spawn");
        let text = format!(
            "Spawn a subagent to: {task}. When it is done, report with `mneme reflect spawn-result {spawn_id} useful|ignored|error`."
        );
        let queued = !options.dry_run && owner.queue_dispatch(&format!("reflect:spawn:{spawn_id}"), 1, &text, now)?;
        let mut taken =
            json!({ "kind": "sessions_spawn", "spawnId": spawn_id, "task": task, "threshold": spawn_state.threshold, "queued": queued });
        if let (Some(t), Some(e)) = (taken.as_object_mut(), extra.as_object()) {
            t.extend(e.clone());
        }
        Ok(taken)
    };
    let tip = |task: &str, extra: Value| -> Value {
        let output_id = format!("{tick_id}-tip");
        let mut extra = extra;
        if let (Some(e), Some(l)) = (extra.as_object_mut(), lessons.iter().find(|l| l.line == task)) {
            e.insert("lesson".into(), trigger(l));
        }
        let delivery = if options.dry_run {
            json!({ "channel": engine.config.outbound.target, "ok": false, "error": "dry run" })
        } else {
            outbound::deliver(engine, owner, &output_id, "tip", task, now)
        };
        let mut taken = json!({ "kind": "telegram_tip", "outputId": output_id, "task": task, "delivery": delivery });
        if let (Some(t), Some(e)) = (taken.as_object_mut(), extra.as_object()) {
            t.extend(e.clone());
        }
        taken
    };
    let act = |extra: Value| -> Result<Value, ReflectError> {
        match action.action {
            ActionKind::TelegramTip => Ok(tip(&action.task, extra)),
            _ => spawn(&action.task, extra),
        }
    };
    let action_taken = if idle {
        json!({ "kind": "none", "reason": "idle: actions wait for an active tick" })
    } else if let Some(item) = stale_due.first() {
        // A stale item's action is mandatory, ahead of the analyzer's.
        spawn(&format!("Resolve stale playbook item: {item}"), json!({ "staleItem": item, "mandatory": true }))?
    } else if action.action == ActionKind::Skip {
        json!({ "kind": "none", "reason": "nothing to act on", "dailyMinimum": if daily_minimum { "no candidate" } else { "not due" } })
    } else if action.confidence >= spawn_state.threshold {
        act(json!({}))?
    } else if daily_minimum {
        act(json!({ "dailyMinimum": true }))?
    } else {
        json!({ "kind": "none", "reason": format!("confidence {:.2} below the threshold {:.2}", action.confidence, spawn_state.threshold) })
    };

    // ---- Phase 3, step 1: mining (idle ticks only) ----
    let mining = if idle {
        let (m, outcome) = miner::mine(engine, settings, &base, today);
        record(&mut stages, "mine", &outcome);
        Some(m)
    } else {
        record(&mut stages, "mine", &StageOutcome::skipped("not idle"));
        None
    };

    // ---- step 2: feedback ----
    let feedback = figures(&lines, now - SignedDuration::from_hours(24 * FEEDBACK_DAYS), engine.config.count_tips_as_outputs);
    let (interpretation, outcome) = interpret(engine, &feedback);
    record(&mut stages, "feedback", &outcome);

    // ---- step 3: curation (one playbook write: body, mining index, effectiveness) ----
    let mut fixable = unresolved(&report.repeated_failures, &lessons);
    let mut new_patterns = Vec::new();
    if let Some(m) = &mining {
        fixable.extend(m.contradictions.iter().cloned());
        new_patterns.extend(m.new_patterns.iter().cloned());
        new_patterns.extend(m.preferences.iter().map(|p| format!("User preference: {p}")));
    }
    let context = json!({
        "recentTicks": recent_ticks.iter().map(|t| json!({ "ts": t["ts"], "signals": t["signals"], "actionTaken": t["actionTaken"], "feedback": t["feedback"]["feedbackScores"] })).collect::<Vec<_>>(),
        "mining": mining.as_ref().map(|m| &m.findings),
        "feedbackInterpretation": interpretation,
    });
    let (mut curation, outcome) = curate(
        engine,
        &CurateInput {
            playbook: &base,
            directive: feedback.directive,
            new_patterns: &new_patterns,
            fixable: &fixable,
            stale_actions: &stale_actions,
            lessons: &lessons,
            scored: &scored_lessons(&observed),
            today,
        },
        &context,
    );
    record(&mut stages, "curate", &outcome);
    curation.playbook.set_effectiveness(&feedback.effectiveness);
    if let Some(index) = mining.as_ref().and_then(|m| m.new_index.as_ref()) {
        curation.playbook.set_mining_index(index);
    }
    let archive = if options.dry_run { None } else { write_curated(settings, &old, &curation.playbook, now)? };
    if !options.dry_run {
        // What stages and the next session read: regenerated after every curation.
        mneme_workspace::playbook::generate_effective(settings)?;
    }
    // The active modules this tick used: their keywords in the summary or the signals,
    // their file patterns over the files the day's tool calls acted on.
    let modules_triggered = if options.dry_run {
        Vec::new()
    } else {
        let signals = serde_json::to_string(&(&report.signals, &report.recommended_action)).unwrap_or_default();
        let text = format!("{summary}\n{signals}");
        // The files the agent touched today: what file-pattern triggers match.
        mneme_workspace::modules::record_triggers(settings, &text, &history.files_touched(), now).unwrap_or_else(|e| {
            tracing::warn!(error = %e, "module triggers not recorded");
            Vec::new()
        })
    };
    let calls_before_log = engine.take_calls();

    // ---- step 4: the log line; HEARTBEAT_OK only once it is appended ----
    let line = json!({
        "kind": "tick",
        "v": 1,
        "ts": now.to_string(),
        "tickId": tick_id,
        "idle": idle,
        "sessionSummary": summary,
        "moduleStack": module_stack,
        "modulesTriggered": modules_triggered,
        "git": git,
        "signals": report.signals,
        "recommendedAction": report.recommended_action,
        "actionTaken": action_taken,
        "spawnOutcomes": spawn_outcomes,
        "spawnState": spawn_state,
        "lessons": lessons,
        "lessonsBy": match (meanings.by_layer(), meanings.by_model()) {
            (true, _) => "model and correction layer",
            (false, true) => "model",
            _ => "words",
        },
        "observedFeedback": observed,
        "mining": mining,
        "feedback": {
            "feedbackScores": { "avg": feedback.avg, "high": feedback.high, "low": feedback.low },
            "effectiveness": feedback.effectiveness,
            "unscored": feedback.unscored,
            "curateDirective": feedback.directive,
            "interpretation": interpretation,
        },
        "playbookChanges": {
            "changes": curation.changes,
            "staleItemActions": curation.stale_item_actions,
            "staleDue": curation.stale_due,
            "playbookLines": curation.playbook_lines,
            "archive": archive,
            "written": !options.dry_run,
        },
        "stages": stages,
        "llm": calls_before_log,
        "durationMs": started.elapsed().as_millis() as u64,
    });
    let log = if options.dry_run { None } else { Some(playbook_log::append(settings, now, &line)?) };

    // ---- step 5: insight, delivered and logged after the gate ----
    let since = now - SignedDuration::from_hours(24 * INSIGHT_DAYS);
    let recent_logs: Vec<Value> = lines
        .iter()
        .filter(|l| l.ts.is_some_and(|t| t >= since) && l.kind == "tick")
        .take(20)
        .map(|l| json!({ "ts": l.value["ts"], "summary": l.value["sessionSummary"], "signals": l.value["signals"], "action": l.value["actionTaken"]["task"] }))
        .collect();
    let recent_outputs: Vec<String> = lines
        .iter()
        .filter(|l| l.kind == "output" && l.ts.is_some_and(|t| t >= since))
        .filter_map(|l| l.value["suggestion"].as_str().map(str::to_string))
        .collect();
    let (insight, outcome) =
        synthesize(engine, &read_effective(settings), &recent_logs, &recent_outputs, &Week { history: &week, lessons: &lessons });
    let output_id = format!("{tick_id}-insight");
    let mut output = json!({ "kind": "output", "v": 1, "ts": now.to_string(), "tickId": tick_id, "stage": outcome });
    if let (Some(o), Some(i)) = (output.as_object_mut(), serde_json::to_value(&insight).ok().and_then(|v| v.as_object().cloned())) {
        o.extend(i);
    }
    if let Some(message) = insight.message().filter(|_| !insight.skip) {
        output["outputId"] = json!(output_id);
        output["delivery"] = if options.dry_run {
            json!({ "channel": engine.config.outbound.target, "ok": false, "error": "dry run" })
        } else {
            outbound::deliver(engine, owner, &output_id, "insight", &message, now)
        };
    }
    let calls_after_log = engine.take_calls();
    output["llm"] = json!(calls_after_log);
    let mut archived = Vec::new();
    if !options.dry_run {
        playbook_log::append(settings, now, &output)?;
        // Retention: logs and playbook copies older than the window move to archive/.
        let days = (engine.config.log_retention.get().as_secs() / 86_400) as i64;
        archived = playbook_log::archive_old(settings, today - jiff::Span::new().days(days))?;
    }
    let mut llm = calls_before_log;
    llm.add(calls_after_log);
    let status = if options.dry_run { "DRY_RUN" } else { "HEARTBEAT_OK" };
    Ok(TickReport { status, tick_id, line, output, log, llm, archived })
}

/// The week's lessons and the meanings they were read with (the attached encoder's, its
/// vectors cached by the engine), recognised among the playbook's lines and the heads of
/// the tips `delivered`.
fn week_lessons(engine: &Reflector, owner: &Owner<'_>, week: &History, base: &Playbook, delivered: &[String]) -> (Meanings, Vec<Lesson>) {
    let known: Vec<String> = base.patterns().into_iter().map(|(_, p)| p.text).chain(delivered.iter().cloned()).collect();
    let model = owner.embedding_model();
    let meanings = Meanings::of(week, &known, model.as_deref(), |texts| {
        engine.cached_vectors(model.as_deref(), texts, |missing| owner.embed_texts(missing))
    });
    let mut lessons = learn(week, &meanings);
    recognise(&mut lessons, &known, &meanings);
    (meanings, lessons)
}

/// The lesson heads the observed feedback scored, with the score.
fn scored_lessons(observed: &[Value]) -> Vec<(String, f64)> {
    observed.iter().filter_map(|o| Some((o["lessonHead"].as_str()?.to_string(), o["compositeScore"].as_f64()?))).collect()
}

/// The repeated failures to track as `Recurring error: MODE`: those no learned fix covers.
fn unresolved(repeated: &[(String, usize)], lessons: &[Lesson]) -> Vec<String> {
    repeated
        .iter()
        .filter(|(mode, _)| !lessons.iter().any(|l| l.mode.as_deref() == Some(mode.as_str())))
        .map(|(mode, _)| format!("Recurring error: {mode}"))
        .collect()
}

/// A delivered lesson in `line`: a tick's tip that carries one, or a standing output;
/// as (output id, the lesson's trigger).
fn lesson_output(line: &playbook_log::LogLine) -> Option<(&str, &Value)> {
    let v = &line.value;
    match line.kind.as_str() {
        "tick" if v["actionTaken"]["kind"] == "telegram_tip" => {
            Some((v["actionTaken"]["outputId"].as_str()?, v["actionTaken"].get("lesson")?))
        }
        "output" if v["standing"] == true => Some((v["outputId"].as_str()?, v.get("lesson")?)),
        _ => None,
    }
}

/// Feedback lines for the lessons delivered in `lines` (tips and standing outputs, from
/// `since` on) that have no observed score yet, where `week` shows what followed them.
fn observe_tips(lines: &[playbook_log::LogLine], week: &History, meanings: &Meanings, since: Timestamp, now: Timestamp) -> Vec<Value> {
    let scored: Vec<&str> = lines
        .iter()
        .filter(|l| l.kind == "feedback" && l.value["source"] == "observed")
        .filter_map(|l| l.value["outputId"].as_str())
        .collect();
    lines
        .iter()
        .filter(|l| l.ts.is_some_and(|t| t >= since))
        .filter_map(|l| {
            let (id, lesson) = lesson_output(l).filter(|(id, _)| !scored.contains(id))?;
            let (score, evidence) = observe(week, meanings, lesson, l.ts?)?;
            Some(json!({
                "kind": "feedback", "v": 1, "ts": now.to_string(), "outputId": id,
                "compositeScore": score, "source": "observed", "evidence": evidence,
                "lessonHead": lesson["head"],
            }))
        })
        .collect()
}

/// Hours between two outputs of one lesson in force.
pub const STANDING_HOURS: i64 = 24;

/// The lessons in force (sinain's outputs, extended; issue 36): a lesson whose tip was
/// delivered and whose line is still in the playbook reaches the agent at every session
/// start, so once a day with work since its last delivery it is an output of its own,
/// scored by [`observe_tips`] like the tip. This keeps the feedback loop informed after
/// everything is learned, instead of falling back to `insufficient_data` once no new
/// tip is due.
fn standing_outputs(lines: &[playbook_log::LogLine], base: &Playbook, week: &History, tick_id: &str, now: Timestamp) -> Vec<Value> {
    // Head → (its newest delivery, its trigger); `lines` are newest first.
    let mut newest: Vec<(String, Timestamp, &Value)> = Vec::new();
    for l in lines {
        let (Some((_, lesson)), Some(at)) = (lesson_output(l), l.ts) else { continue };
        let Some(head) = lesson["head"].as_str() else { continue };
        if !newest.iter().any(|(h, ..)| h == head) {
            newest.push((head.to_string(), at, lesson));
        }
    }
    let patterns = base.patterns();
    let last_event = week.events.last().map(|e| match e {
        super::setup::Event::Message { at, .. } | super::setup::Event::Tool { at, .. } => *at,
    });
    newest
        .into_iter()
        .filter(|(_, at, _)| now.duration_since(*at) >= SignedDuration::from_hours(STANDING_HOURS) && last_event.is_some_and(|e| e > *at))
        .filter_map(|(head, _, lesson)| {
            let head_key = normalize(&head);
            patterns.iter().find(|(_, p)| normalize(&p.text).starts_with(&head_key)).map(|(_, p)| (p.text.clone(), lesson))
        })
        .enumerate()
        .map(|(i, (text, lesson))| {
            json!({
                "kind": "output", "v": 1, "ts": now.to_string(), "tickId": tick_id,
                "outputId": format!("{tick_id}-standing-{i}"), "skip": false, "standing": true,
                "suggestion": text, "lesson": lesson,
                "stage": StageOutcome::ok(), "delivery": { "channel": "playbook", "ok": true },
            })
        })
        .collect()
}

/// The stages that run alone (`mneme reflect signals|feedback|mine|curate|insight`).
pub const STAGES: [&str; 5] = ["signals", "feedback", "mine", "curate", "insight"];

/// Runs one stage alone on the current files and records, writing nothing; its result
/// as one JSON object with the stage's outcome under `stage`.
pub fn run_stage(
    engine: &Reflector,
    owner: &Owner<'_>,
    settings: &WorkspaceSettings,
    now: Timestamp,
    name: &str,
    idle: Option<bool>,
) -> Result<Value, ReflectError> {
    if !settings.dir.is_dir() {
        return Err(ReflectError::NoWorkspace(settings.dir.clone()));
    }
    let today = settings.today(now);
    let lines = playbook_log::read(settings, today - jiff::Span::new().days(STALE_ACTION_DAYS), today)?;
    let old = paths::resolve(&settings.dir, paths::PLAYBOOK).ok().and_then(|p| std::fs::read_to_string(p).ok()).unwrap_or_default();
    let base = if old.is_empty() { Playbook::fresh() } else { Playbook::parse(&old) };
    let feedback = || figures(&lines, now - SignedDuration::from_hours(24 * FEEDBACK_DAYS), engine.config.count_tips_as_outputs);
    let with_stage = |mut v: Value, outcome: &StageOutcome| {
        v["stage"] = json!(outcome);
        v
    };
    let signals = || -> Result<_, ReflectError> {
        let history = History::gather(owner, now)?;
        let idle = idle.unwrap_or_else(|| owner.last_activity().ok().flatten().is_none_or(|at| is_idle(engine, Some(at), now)));
        let (summary, _) = summarize(engine, &history);
        let recent: Vec<Value> = lines.iter().filter(|l| l.kind == "tick").take(3).map(|l| l.value.clone()).collect();
        let effective = read_effective(settings);
        let week = History::gather_window(owner, now, SignedDuration::from_hours(24 * LESSON_DAYS), LESSON_EVENTS)?;
        let delivered = delivered(&lines);
        let (_, lessons) = week_lessons(engine, owner, &week, &base, &delivered);
        let input = SignalInput {
            history: &history,
            summary: &summary,
            playbook: &effective,
            recent_ticks: &recent,
            idle,
            lessons: &lessons,
            delivered: &delivered,
        };
        Ok((analyze(engine, &input), lessons))
    };
    Ok(match name {
        "signals" => {
            let ((report, outcome), lessons) = signals()?;
            let mut v = json!(report);
            v["lessons"] = json!(lessons);
            with_stage(v, &outcome)
        }
        "feedback" => {
            let f = feedback();
            let (interpretation, outcome) = interpret(engine, &f);
            let mut v = json!(f);
            v["interpretation"] = json!(interpretation);
            with_stage(v, &outcome)
        }
        "mine" => {
            let (m, outcome) = miner::mine(engine, settings, &base, today);
            with_stage(json!(m), &outcome)
        }
        "curate" => {
            let ((report, _), lessons) = signals()?;
            let fixable = unresolved(&report.repeated_failures, &lessons);
            let stale_actions = BTreeMap::new();
            let input = CurateInput {
                playbook: &base,
                directive: feedback().directive,
                new_patterns: &[],
                fixable: &fixable,
                stale_actions: &stale_actions,
                lessons: &lessons,
                scored: &[],
                today,
            };
            let (c, outcome) = curate(engine, &input, &json!({}));
            let mut v = json!(c);
            v["body"] = json!(c.playbook.body);
            with_stage(v, &outcome)
        }
        "insight" => {
            let outputs: Vec<String> =
                lines.iter().filter(|l| l.kind == "output").filter_map(|l| l.value["suggestion"].as_str().map(str::to_string)).collect();
            let logs: Vec<Value> = lines.iter().filter(|l| l.kind == "tick").take(20).map(|l| l.value.clone()).collect();
            let week = History::gather_window(owner, now, SignedDuration::from_hours(24 * LESSON_DAYS), LESSON_EVENTS)?;
            let (_, lessons) = week_lessons(engine, owner, &week, &base, &delivered(&lines));
            let (i, outcome) = synthesize(engine, &read_effective(settings), &logs, &outputs, &Week { history: &week, lessons: &lessons });
            with_stage(json!(i), &outcome)
        }
        other => return Err(mneme_workspace::WorkspaceError::Invalid(format!("no stage {other:?} (one of {})", STAGES.join(", "))).into()),
    })
}
