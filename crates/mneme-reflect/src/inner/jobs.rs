//! The brain loop and the five extensions: each job's trigger, prompt, answer validation,
//! deterministic fallback, dispatch text, and the writes mneme applies for it.

use jiff::{SignedDuration, Timestamp};
use mneme_service::Owner;
use mneme_workspace::inner::{self, DRIVE, HABITS, INNER_STATE, InnerEvent, InnerState, Job};
use mneme_workspace::inner_data::{self, Drive, Habits};
use mneme_workspace::{WorkspaceSettings, paths};
use serde::Serialize;
use serde_json::{Value, json};

use super::digest;
use super::sense::{self, Sensed};
use crate::ReflectError;
use crate::config::{OutboundTarget, Stage};
use crate::engine::{Calls, Reflector, strings, text};

/// How to run a job.
#[derive(Debug, Clone, Default, Serialize, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct JobOptions {
    /// Run even when the job's trigger does not hold (a manual run).
    pub force: bool,
    /// Compute everything, write nothing (no state, file, link or dispatch).
    pub dry_run: bool,
}

/// What a run did.
#[derive(Debug, Clone, Serialize)]
pub struct JobReport {
    pub job: Job,
    pub at: Timestamp,
    /// `ok` (the model's answer, validated and applied), `fallback` (the deterministic
    /// path), `dispatched` (handed to the agent), `skipped` (nothing to think with), or
    /// `not_triggered` (a scheduled check whose trigger did not hold; not logged).
    pub status: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The mechanical core's findings.
    pub sensed: Sensed,
    /// Files written (workspace-relative).
    pub wrote: Vec<String>,
    /// Writes refused, with why.
    pub refused: Vec<String>,
    /// The instruction queued for the agent, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dispatch: Option<String>,
    pub llm: Calls,
    /// What the job produced, job by job.
    pub output: Value,
}

/// The one-job-at-a-time lock of a workspace; released when dropped.
struct JobLock(std::fs::File);

impl JobLock {
    fn acquire(settings: &WorkspaceSettings) -> Result<JobLock, ReflectError> {
        if !settings.dir.is_dir() {
            return Err(ReflectError::NoWorkspace(settings.dir.clone()));
        }
        let path = paths::resolve(&settings.dir, ".mneme-inner.lock")?;
        let io = |action, source| mneme_workspace::WorkspaceError::Io { action, path: path.clone(), source };
        let file = std::fs::File::options().create(true).truncate(false).write(true).open(&path).map_err(|e| io("cannot open", e))?;
        match file.try_lock() {
            Ok(()) => Ok(JobLock(file)),
            Err(std::fs::TryLockError::WouldBlock) => Err(ReflectError::JobBusy(path)),
            Err(std::fs::TryLockError::Error(source)) => Err(io("cannot lock", source).into()),
        }
    }
}

impl Drop for JobLock {
    fn drop(&mut self) {
        let _ = self.0.unlock();
    }
}

/// What the job is asked to do (the model's system prompt and the agent's instruction).
fn instruction(job: Job) -> &'static str {
    match job {
        Job::BrainLoop => {
            "Run your brain loop. Doubt your assumptions and let your state route you (low confidence: double-check; \
             low connection: reach out; high curiosity: explore). Work on the one or two top priorities of the queue, \
             report to the user in at most five sentences, and record new tasks, questions and leads. End with a \
             handoff for the next loop if work is unfinished."
        }
        Job::Reflect => {
            "Reflect on the recent corrections and repeated problems: what do they say about how you work? Write what \
             you learned about yourself for SELF.md, and the habits that would prevent the problem (a trigger and an action)."
        }
        Job::Memory => {
            "The session has ended. Keep what matters: durable facts and decisions for MEMORY.md, open questions, and \
             topics you now want to explore."
        }
        Job::Dream => {
            "Dream: recombine recent notes and the topics you are seeking, freely. When a dream gives an insight for a \
             seeking topic, name it as a spark."
        }
        Job::Chronicle => {
            "Write tonight's diary entry: what happened today, how you feel about it and why, what you wonder about. \
             Name one topic to dream about tonight."
        }
        Job::Evolve => {
            "Review everything: how you work, what keeps going wrong, what is stale. Propose improvements as queue items \
             for the user to decide. You change nothing yourself."
        }
    }
}

/// The JSON the model answers with, per job.
fn answer_shape(job: Job) -> &'static str {
    match job {
        Job::BrainLoop => {
            r#"{"thinking": "one to three sentences", "actions": ["what you did or decided"], "report": "at most five sentences for the user", "newTasks": ["..."], "questions": ["..."], "handoff": {"task": "...", "progress": "..."} or null, "events": [{"kind": "spark", "topic": "..."} | {"kind": "novelty", "what": "..."} | {"kind": "mistake", "what": "..."}]}"#
        }
        Job::Reflect => r#"{"self": "a few sentences for SELF.md", "habits": [{"trigger": "...", "action": "...", "note": "..."}]}"#,
        Job::Memory => {
            r#"{"memory": ["a durable line for MEMORY.md"], "questions": ["..."], "seeking": [{"topic": "...", "intensity": 0.5}]}"#
        }
        Job::Dream => {
            r#"{"dream": "the dream, a paragraph", "sparks": [{"topic": "...", "insight": "..."}], "seeking": [{"topic": "...", "intensity": 0.5}]}"#
        }
        Job::Chronicle => r#"{"entry": "the diary entry", "questions": ["..."], "dreamTopic": "..." or null}"#,
        Job::Evolve => r#"{"proposals": ["a change for the user to decide"]}"#,
    }
}

/// Whether the job's trigger holds at `now`; `Err` says why not. Scheduled runs of
/// reflect and memory check this every 30 minutes; the others run on their cron.
fn triggered(job: Job, owner: &Owner<'_>, settings: &WorkspaceSettings, state: &InnerState) -> Result<(), String> {
    let last = inner::last_run(settings, job);
    match job {
        Job::Reflect => match (state.last_mistake, last) {
            (None, _) => Err("no correction or repeated problem yet".into()),
            (Some(m), Some(l)) if m <= l => Err(format!("no correction or repeated problem since the last reflection ({l})")),
            _ => Ok(()),
        },
        Job::Memory => match (owner.last_activity().ok().flatten(), last) {
            (None, _) => Err("no session yet".into()),
            (Some(a), Some(l)) if a <= l => Err(format!("no session since the last run ({l})")),
            _ => Ok(()),
        },
        _ => Ok(()),
    }
}

/// The writes and events a job's thinking produced, before mneme applies them.
#[derive(Debug, Default)]
struct Plan {
    /// (path, text, append?)
    writes: Vec<(String, String, bool)>,
    events: Vec<InnerEvent>,
    drive: Option<Drive>,
    habits: Option<Habits>,
    /// Signals this run consumed (marked after the writes).
    consumed: Vec<String>,
    /// The brain loop's report for the user.
    report: Option<String>,
    output: Value,
}

fn date(settings: &WorkspaceSettings, now: Timestamp) -> String {
    settings.today(now).to_string()
}

fn hhmm(settings: &WorkspaceSettings, now: Timestamp) -> String {
    now.to_zoned(settings.timezone.clone()).strftime("%H:%M").to_string()
}

fn read(settings: &WorkspaceSettings, relative: &str) -> String {
    inner::read_file(settings, relative).unwrap_or_default()
}

fn bullets(items: &[String]) -> String {
    items.iter().map(|i| format!("- {i}\n")).collect()
}

/// Lines for `questions.md`, skipping questions already there.
fn new_questions(settings: &WorkspaceSettings, questions: &[String], day: &str) -> Option<String> {
    let existing = read(settings, "questions.md").to_lowercase();
    let fresh: Vec<String> = questions.iter().filter(|q| !existing.contains(&q.to_lowercase())).map(|q| format!("{q} ({day})")).collect();
    (!fresh.is_empty()).then(|| bullets(&fresh))
}

/// Queue lines for new tasks, skipping texts already in the queue.
fn queue_lines(settings: &WorkspaceSettings, tasks: &[String], day: &str, priority: &str) -> Option<String> {
    let existing: Vec<String> = inner_data::parse_queue(&read(settings, "QUEUE.md")).into_iter().map(|q| q.text.to_lowercase()).collect();
    let fresh: Vec<String> = tasks.iter().filter(|t| !existing.contains(&t.to_lowercase())).cloned().collect();
    (!fresh.is_empty()).then(|| fresh.iter().map(|t| format!("- [ ] {priority}{t} (added {day})\n")).collect())
}

fn events_from(v: &Value) -> Result<Vec<InnerEvent>, String> {
    let Some(items) = v.get("events") else { return Ok(Vec::new()) };
    let Some(items) = items.as_array() else { return Err("events: not a list".into()) };
    items
        .iter()
        .take(5)
        .map(|e| {
            let field = |k: &str| text(e, k).ok_or_else(|| format!("events: {k} missing"));
            match e.get("kind").and_then(Value::as_str) {
                Some("spark") => Ok(InnerEvent::Spark { topic: field("topic")? }),
                Some("novelty") => Ok(InnerEvent::Novelty { what: field("what")? }),
                Some("mistake") => Ok(InnerEvent::Mistake { what: field("what")? }),
                other => Err(format!("events: kind {other:?} must be spark, novelty or mistake")),
            }
        })
        .collect()
}

/// `[{topic, intensity}]` → (topic, intensity).
fn topics(v: &Value, key: &str) -> Result<Vec<(String, f64)>, String> {
    let Some(items) = v.get(key) else { return Ok(Vec::new()) };
    let Some(items) = items.as_array() else { return Err(format!("{key}: not a list")) };
    items
        .iter()
        .take(5)
        .map(|t| {
            let topic = text(t, "topic").ok_or_else(|| format!("{key}: topic missing"))?;
            let intensity = t.get("intensity").and_then(Value::as_f64).unwrap_or(0.5);
            if !(0.0..=1.0).contains(&intensity) {
                return Err(format!("{key}: intensity {intensity} is not within 0..=1"));
            }
            Ok((topic.chars().take(120).collect(), intensity))
        })
        .collect()
}

/// The model's own `files` (path + content): passed through `job_write`, which refuses
/// anything outside the job's files.
fn files_from(v: &Value) -> Vec<(String, String, bool)> {
    v.get("files")
        .and_then(Value::as_array)
        .map(|fs| fs.iter().take(5).filter_map(|f| Some((text(f, "path")?, f.get("content")?.as_str()?.to_string(), false))).collect())
        .unwrap_or_default()
}

/// The context the job reads: its level, plus the queue for the brain loop.
fn context(settings: &WorkspaceSettings, job: Job, now: Timestamp, sensed: &Sensed) -> Result<String, ReflectError> {
    let mut text = inner::context(settings, now, job.level())?;
    if job == Job::BrainLoop {
        // Step 1, orientation: long-term memory beside the level-2 context.
        let memory = read(settings, "MEMORY.md");
        if !memory.trim().is_empty() {
            text.push_str(&format!("\n\n## MEMORY.md\n\n{}", memory.chars().take(3_000).collect::<String>()));
        }
    }
    if matches!(job, Job::BrainLoop | Job::Evolve) {
        let queue: Vec<String> = sensed
            .queue
            .iter()
            .take(10)
            .map(|q| format!("P{} {}{}", q.priority, q.text, q.since.map(|d| format!(" (since {d})")).unwrap_or_default()))
            .collect();
        text.push_str(&format!(
            "\n\n## Queue (most urgent first)\n\n{}",
            if queue.is_empty() { "(empty)\n".into() } else { bullets(&queue) }
        ));
    }
    Ok(text)
}

/// The model's answer → the job's plan; `Err` names what was wrong.
fn plan_from_answer(job: Job, settings: &WorkspaceSettings, now: Timestamp, v: &Value, state: &InnerState) -> Result<Plan, String> {
    let day = date(settings, now);
    let mut plan = Plan { writes: files_from(v), output: v.clone(), ..Plan::default() };
    match job {
        Job::BrainLoop => {
            let report = text(v, "report").ok_or("report: missing")?;
            // At most five sentences, as the protocol says.
            let report: String = report.split_inclusive(['.', '!', '?']).take(5).collect::<String>().trim().to_string();
            let actions = strings(v, "actions", 5, 300)?;
            let tasks = strings(v, "newTasks", 10, 200)?;
            let questions = strings(v, "questions", 10, 300)?;
            let handoff = match v.get("handoff") {
                None | Some(Value::Null) => None,
                Some(h) => {
                    Some(format!("{}, {}", text(h, "task").ok_or("handoff: task missing")?, text(h, "progress").unwrap_or_default()))
                }
            };
            plan.events = events_from(v)?;
            let mut note = format!("\n## Brain loop {}\n\n{report}\n", hhmm(settings, now));
            if let Some(t) = text(v, "thinking") {
                note.push_str(&format!("\nThinking: {t}\n"));
            }
            if !actions.is_empty() {
                note.push_str(&format!("\nActions:\n{}", bullets(&actions)));
            }
            if !questions.is_empty() {
                note.push_str(&format!("\nQuestions:\n{}", bullets(&questions)));
            }
            if let Some(h) = &handoff {
                note.push_str(&format!("\n<!-- handoff: {h} -->\n"));
            }
            plan.writes.push((format!("memory/{day}.md"), note, true));
            if let Some(lines) = queue_lines(settings, &tasks, &day, "") {
                plan.writes.push(("QUEUE.md".into(), lines, true));
            }
            plan.report = Some(report);
        }
        Job::Reflect => {
            let me = text(v, "self").ok_or("self: missing")?;
            let items = v.get("habits").and_then(Value::as_array).cloned().unwrap_or_default();
            let mut habits = inner_data::read_habits(settings).map_err(|e| e.to_string())?.unwrap_or_default();
            habits.weaken(now);
            for h in items.iter().take(5) {
                let (Some(trigger), Some(action)) = (text(h, "trigger"), text(h, "action")) else {
                    return Err("habits: trigger and action are required".into());
                };
                habits.confirm(&trigger, &action, &text(h, "note").unwrap_or_default(), now);
            }
            plan.writes.push(("SELF.md".into(), format!("\n## {day} — reflection\n\n{me}\n"), true));
            plan.habits = Some(habits);
        }
        Job::Memory => {
            let memory = strings(v, "memory", 10, 400)?;
            let questions = strings(v, "questions", 10, 300)?;
            let seeking = topics(v, "seeking")?;
            if !memory.is_empty() {
                plan.writes.push(("MEMORY.md".into(), format!("\n## {day}\n\n{}", bullets(&memory)), true));
            }
            if let Some(q) = new_questions(settings, &questions, &day) {
                plan.writes.push(("questions.md".into(), q, true));
            }
            plan.drive = seek(settings, &seeking, "memory", now, &mut plan.events)?;
        }
        Job::Dream => {
            let dream = text(v, "dream").ok_or("dream: missing")?;
            let sparks = v.get("sparks").and_then(Value::as_array).cloned().unwrap_or_default();
            let mut body = format!("# Dream {day}\n\n{dream}\n");
            for s in sparks.iter().take(3) {
                let topic = text(s, "topic").ok_or("sparks: topic missing")?;
                body.push_str(&format!("\n{}\n<!-- seeking-spark: {topic} -->\n", text(s, "insight").unwrap_or_default()));
            }
            plan.writes.push((format!("memory/dreams/{day}.md"), body, false));
            plan.drive = seek(settings, &topics(v, "seeking")?, "dream", now, &mut plan.events)?;
            plan.consumed = dream_topics(settings, state, now).into_iter().map(|(_, key)| key).collect();
        }
        Job::Chronicle => {
            let entry = text(v, "entry").ok_or("entry: missing")?;
            let questions = strings(v, "questions", 10, 300)?;
            let mut body = format!("# {day}\n\n{entry}\n");
            if let Some(t) = text(v, "dreamTopic") {
                body.push_str(&format!("\n<!-- dream-topic: {t} -->\n"));
            }
            plan.writes.push((format!("memory/diary/{day}.md"), body, false));
            if let Some(q) = new_questions(settings, &questions, &day) {
                plan.writes.push(("questions.md".into(), q, true));
            }
        }
        Job::Evolve => {
            let proposals = strings(v, "proposals", 10, 300)?;
            if let Some(lines) = queue_lines(settings, &proposals, &day, "P3 ") {
                plan.writes.push(("QUEUE.md".into(), format!("\n## Proposals from evolve ({day})\n\n{lines}"), true));
            }
        }
    }
    Ok(plan)
}

/// Adds seeking topics to the drive; a new topic is novelty.
fn seek(
    settings: &WorkspaceSettings,
    topics: &[(String, f64)],
    source: &str,
    now: Timestamp,
    events: &mut Vec<InnerEvent>,
) -> Result<Option<Drive>, String> {
    if topics.is_empty() {
        return Ok(None);
    }
    let mut drive = inner_data::read_drive(settings).map_err(|e| e.to_string())?.unwrap_or_default();
    for (topic, intensity) in topics {
        if drive.seek(topic, *intensity, source, now) {
            events.push(InnerEvent::Novelty { what: format!("seeking {topic}") });
        }
    }
    Ok(Some(drive))
}

fn dream_topics(settings: &WorkspaceSettings, state: &InnerState, now: Timestamp) -> Vec<(String, String)> {
    sense::unconsumed(settings, state, "dream-topic", now)
}

/// The deterministic version of a job's thinking; `None` when the job has none (the
/// brain loop) or there is nothing to do (with the reason).
fn fallback(
    job: Job,
    owner: &Owner<'_>,
    settings: &WorkspaceSettings,
    now: Timestamp,
    state: &InnerState,
    sensed: &Sensed,
) -> Result<Plan, String> {
    let day = date(settings, now);
    let mood = state.mood(now);
    let mut plan = Plan::default();
    match job {
        Job::BrainLoop => {
            // Without a model the loop cannot think (steps 3–6), but it can say what
            // happened, what is pending and what changed since the last loop, route by the
            // state, and queue the failures nothing has fixed. Handoffs stay unconsumed:
            // nobody worked on them.
            let since = inner::last_run(settings, Job::BrainLoop)
                .unwrap_or(now - SignedDuration::from_hours(24))
                .max(now - SignedDuration::from_hours(24 * 7));
            let handoffs: Vec<String> = sense::unconsumed(settings, state, "handoff", now).into_iter().map(|(h, _)| h).collect();
            let d = digest::digest(owner, sensed, state, &handoffs, since, now).map_err(|e| e.to_string())?;
            if d.happened.is_empty() && d.changed.is_empty() {
                return Err(format!(
                    "nothing happened or changed since the last loop ({}); {} pending",
                    since.to_zoned(settings.timezone.clone()).strftime("%Y-%m-%d %H:%M"),
                    d.pending.len()
                ));
            }
            let mut note = format!(
                "\n## Brain loop {} (without a model)\n\nSince {}.\n\n{}",
                hhmm(settings, now),
                since.to_zoned(settings.timezone.clone()).strftime("%Y-%m-%d %H:%M"),
                d.markdown(false)
            );
            if !mood.hints.is_empty() {
                note.push_str(&format!("\nRouting by how I am:\n{}", bullets(&mood.hints)));
            }
            plan.writes.push((format!("memory/{day}.md"), note, true));
            if let Some(lines) = queue_lines(settings, &d.open_failures, &day, "") {
                plan.writes.push(("QUEUE.md".into(), lines, true));
            }
            plan.output = json!({ "happened": d.happened, "pending": d.pending, "changed": d.changed, "newTasks": d.open_failures });
        }
        Job::Reflect => {
            // Repeated problems become habits; the strength rule does the rest.
            let mut habits = inner_data::read_habits(settings).map_err(|e| e.to_string())?.unwrap_or_default();
            let dropped = habits.weaken(now);
            let mut lines = Vec::new();
            for f in state.frustration.iter().filter(|f| f.count >= 3) {
                let s = habits.confirm(
                    &f.what,
                    "stop retrying; find the root cause and fix it once (check SELF.md and known fixes first)",
                    "formed by reflect from a repeated problem",
                    now,
                );
                lines.push(format!("Recurring problem: {} ({}×); habit strength now {s:.2}.", f.what, f.count));
            }
            if state.last_mistake.is_some() && mood.confidence < 0.6 {
                lines.push(format!("Corrected recently; confidence {:.2}: double-check facts before acting on them.", mood.confidence));
            }
            for d in &dropped {
                lines.push(format!("Dropped the habit for \"{d}\": not confirmed for weeks."));
            }
            if lines.is_empty() {
                return Err("nothing to reflect on (no repeated problem, no recent correction)".into());
            }
            plan.writes.push(("SELF.md".into(), format!("\n## {day} — reflection\n\n{}", bullets(&lines)), true));
            plan.habits = Some(habits);
            plan.output = json!({ "lines": lines, "dropped": dropped });
        }
        Job::Memory => {
            // Open questions from the last two days' notes go to questions.md.
            let today = settings.today(now);
            let mut questions = Vec::new();
            for d in [Some(today), today.yesterday().ok()].into_iter().flatten() {
                for line in read(settings, &format!("memory/{d}.md")).lines() {
                    let q = mneme_core::private::strip(line.trim().trim_start_matches(['-', '*', ' '])).trim().to_string();
                    if q.ends_with('?') && q.len() > 8 && !q.contains("<!--") && !questions.contains(&q) {
                        questions.push(q);
                    }
                }
            }
            match new_questions(settings, &questions, &day) {
                Some(q) => plan.writes.push(("questions.md".into(), q, true)),
                None => return Err("no new open questions in the last two days' notes".into()),
            }
            plan.output = json!({ "questions": questions });
        }
        Job::Dream => {
            // Recombination without a model: each topic (tonight's dream topics, then the
            // strongest seeking topics) meets older notes that mention it.
            let signalled = dream_topics(settings, state, now);
            plan.consumed = signalled.iter().map(|(_, key)| key.clone()).collect();
            let mut wanted: Vec<String> = signalled.into_iter().map(|(topic, _)| topic).collect();
            let drive = inner_data::read_drive(settings).map_err(|e| e.to_string())?.unwrap_or_default();
            let mut seeking = drive.seeking.clone();
            seeking.sort_by(|a, b| b.intensity.total_cmp(&a.intensity));
            for s in seeking.into_iter().take(3) {
                if !wanted.contains(&s.topic) {
                    wanted.push(s.topic);
                }
            }
            if wanted.is_empty() {
                return Err("nothing to dream about (no dream-topic signal, no seeking topic)".into());
            }
            let today = settings.today(now);
            let mut body = format!("# Dream {day}\n\n(Recombined without a model: each topic beside older notes that mention it.)\n");
            let mut sparks = Vec::new();
            // The last two weeks' notes (not today's), read once for every topic.
            let older: Vec<(jiff::civil::Date, String)> = (1..=14)
                .filter_map(|back| today.checked_sub(jiff::Span::new().days(back)).ok())
                .map(|d| (d, read(settings, &format!("memory/{d}.md"))))
                .collect();
            for topic in &wanted {
                let words: Vec<String> = topic.split_whitespace().filter(|w| w.len() > 3).map(str::to_lowercase).collect();
                let mut found = Vec::new();
                for (d, text) in &older {
                    for line in text.lines() {
                        let lower = line.to_lowercase();
                        if !words.is_empty() && words.iter().any(|w| lower.contains(w)) && !line.contains("<!--") && found.len() < 3 {
                            found.push(format!("{d}: {}", mneme_core::private::strip(line.trim())));
                        }
                    }
                }
                body.push_str(&format!("\n## {topic}\n\n"));
                if found.is_empty() {
                    body.push_str("No older note mentions it yet.\n");
                } else {
                    body.push_str(&bullets(&found));
                    body.push_str(&format!("<!-- seeking-spark: {topic} -->\n"));
                    sparks.push(topic.clone());
                }
            }
            plan.writes.push((format!("memory/dreams/{day}.md"), body, false));
            plan.output = json!({ "topics": wanted, "sparks": sparks });
        }
        Job::Chronicle => {
            let note = read(settings, &format!("memory/{day}.md"));
            let heads: Vec<String> =
                note.lines().filter(|l| l.starts_with("## ")).map(|l| l.trim_start_matches("## ").to_string()).collect();
            let handoffs: Vec<String> = sense::unconsumed(settings, state, "handoff", now).into_iter().map(|(h, _)| h).collect();
            let d =
                digest::digest(owner, sensed, state, &handoffs, now - SignedDuration::from_hours(24), now).map_err(|e| e.to_string())?;
            let mut body = format!("# {day}\n\n(Written without a model, from the day's events, state and notes.)\n\n");
            if d.is_empty() && heads.is_empty() {
                body.push_str("A quiet day: nothing was recorded, nothing is waiting.\n\n");
            } else {
                body.push_str(&d.markdown(true));
            }
            body.push_str(&format!("## How I feel, and why\n\n{}\n", mood.block()));
            let mut why = vec![match d.user_messages {
                0 => format!("Connection {:.2}: no word from the user today.", mood.connection),
                n => format!("Connection {:.2}: {n} message{} from the user today.", mood.connection, if n == 1 { "" } else { "s" }),
            }];
            if d.mistakes > 0 {
                why.push(format!("Confidence {:.2}: corrected or stuck on the same problem {}× today.", mood.confidence, d.mistakes));
            }
            if mood.boredom_days >= 3 {
                why.push(format!("Nothing new for {} days.", mood.boredom_days));
            }
            for (w, days) in mood.impatience.iter().filter(|(_, d)| *d >= 2).take(3) {
                why.push(format!("Impatient: “{w}” has waited {days} days."));
            }
            body.push_str(&format!("\n{}", bullets(&why)));
            // What I wonder about: the newest open questions (`- question? (date)`).
            let wonder: Vec<String> = read(settings, "questions.md")
                .lines()
                .rev()
                .filter_map(|l| l.trim().strip_prefix("- "))
                .filter(|l| !l.starts_with("[x]") && l.contains('?'))
                .map(|l| l.trim_start_matches("[ ] ").to_string())
                .take(3)
                .collect();
            if !wonder.is_empty() {
                body.push_str(&format!("\n## What I wonder about\n\n{}", bullets(&wonder)));
            }
            if !heads.is_empty() {
                body.push_str(&format!("\nToday's notes: {}\n", heads.join("; ")));
            }
            let drive = inner_data::read_drive(settings).map_err(|e| e.to_string())?.unwrap_or_default();
            if let Some(top) = drive.seeking.iter().max_by(|a, b| a.intensity.total_cmp(&b.intensity)) {
                body.push_str(&format!("\n<!-- dream-topic: {} -->\n", top.topic));
            }
            plan.writes.push((format!("memory/diary/{day}.md"), body, false));
            plan.output = json!({ "headings": heads, "happened": d.happened, "pending": d.pending, "changed": d.changed });
        }
        Job::Evolve => {
            let mut proposals = Vec::new();
            for f in state.frustration.iter().filter(|f| f.count >= 3) {
                proposals.push(format!("Systemic fix for \"{}\" ({}× so far)", f.what, f.count));
            }
            // (Evolve's own proposals waiting in the queue are the user's to decide; no
            // proposal about a proposal.)
            let own = |w: &str| {
                ["Systemic fix for ", "Decide or drop ", "Experiment: ", "Add a verification step"].iter().any(|p| w.starts_with(p))
            };
            for (what, days) in mood.impatience.iter().filter(|(w, d)| *d > 3 && !own(w)) {
                if !sensed.queue.iter().any(|q| q.text == *what) || *days > 7 {
                    proposals.push(format!("Decide or drop \"{what}\" (waiting {days} days)"));
                }
            }
            if mood.boredom_days > 7 {
                proposals.push(format!("Experiment: {} days of routine; try one new kind of task this week", mood.boredom_days));
            }
            if mood.confidence < 0.4 {
                proposals.push("Add a verification step before acting on remembered facts (confidence is low)".into());
            }
            let day_lines = queue_lines(settings, &proposals, &day, "P3 ");
            match day_lines {
                Some(lines) => plan.writes.push(("QUEUE.md".into(), format!("\n## Proposals from evolve ({day})\n\n{lines}"), true)),
                None => return Err("no proposals: nothing recurring, stale or low".into()),
            }
            plan.output = json!({ "proposals": proposals });
        }
    }
    Ok(plan)
}

/// The instruction handed to the agent when it does the thinking.
fn dispatch_text(job: Job, settings: &WorkspaceSettings, now: Timestamp, sensed: &Sensed) -> String {
    let day = date(settings, now);
    let mut text =
        format!("[Inner life: {}] {} Read your context with `mneme inner context --level {}`.", job.name(), instruction(job), job.level());
    if job == Job::BrainLoop && !sensed.queue.is_empty() {
        let top: Vec<String> = sensed.queue.iter().take(3).map(|q| q.text.clone()).collect();
        text.push_str(&format!(" Top of the queue: {}.", top.join("; ")));
    }
    let example = match job {
        Job::BrainLoop => format!("memory/{day}.md"),
        Job::Reflect => "SELF.md".into(),
        Job::Memory => "MEMORY.md".into(),
        Job::Dream => format!("memory/dreams/{day}.md"),
        Job::Chronicle => format!("memory/diary/{day}.md"),
        Job::Evolve => "QUEUE.md".into(),
    };
    text.push_str(&format!(
        " This job writes {} only: write with `mneme inner write --job {} {example} --append` (text on stdin); other paths are refused.",
        job.writes(),
        job.name()
    ));
    if matches!(job, Job::BrainLoop | Job::Memory | Job::Dream | Job::Chronicle) {
        text.push_str(" Report how you feel with `mneme inner event spark|novelty|mistake --what …`.");
    }
    text
}

/// Applies a plan: each write through the job's permission check, then the state. A
/// refused write changes nothing and is reported; the others still apply.
fn apply(job: Job, settings: &WorkspaceSettings, plan: &Plan, now: Timestamp, report: &mut JobReport) -> Result<(), ReflectError> {
    let mut writes = plan.writes.clone();
    if let Some(d) = &plan.drive {
        writes.push((DRIVE.into(), inner_data::to_file_text(DRIVE, d)?, false));
    }
    if let Some(h) = &plan.habits {
        writes.push((HABITS.into(), inner_data::to_file_text(HABITS, h)?, false));
    }
    for (path, text, append) in writes {
        let text = mneme_core::private::strip(&text).into_owned();
        match inner::write_for(settings, job, &path, &text, append, now) {
            Ok(path) => report.wrote.push(path),
            Err(mneme_workspace::WorkspaceError::Invalid(why)) => report.refused.push(why),
            Err(e) => return Err(e.into()),
        }
    }
    if !plan.events.is_empty() {
        match inner::job_check(settings, job, INNER_STATE, now) {
            Ok(()) => {
                inner::record(settings, &plan.events, now)?;
                report.wrote.push(INNER_STATE.into());
            }
            Err(mneme_workspace::WorkspaceError::Invalid(why)) => report.refused.push(why),
            Err(e) => return Err(e.into()),
        }
    }
    sense::consume(settings, plan.consumed.clone(), now)
}

/// Runs `job` at `now`: sense, trigger, think (model → dispatch → fallback → skip),
/// apply, log.
pub fn run(
    engine: &Reflector,
    owner: &Owner<'_>,
    settings: &WorkspaceSettings,
    job: Job,
    now: Timestamp,
    options: &JobOptions,
) -> Result<JobReport, ReflectError> {
    let _lock = JobLock::acquire(settings)?;
    engine.take_calls();
    let sensed = sense::sense(owner, settings, now, options.dry_run)?;
    let state = inner::read_state(settings)?.unwrap_or_else(|| InnerState::fresh(now));
    let mut report = JobReport {
        job,
        at: now,
        status: "skipped",
        reason: None,
        sensed,
        wrote: Vec::new(),
        refused: Vec::new(),
        dispatch: None,
        llm: Calls::default(),
        output: Value::Null,
    };
    if !options.force
        && let Err(why) = triggered(job, owner, settings, &state)
    {
        report.status = "not_triggered";
        report.reason = Some(why);
        return Ok(report);
    }

    // Thinking: the model, else the agent, else the fallback, else skipped.
    let mut reasons = Vec::new();
    let mut plan = None;
    if engine.has_model() {
        let system = format!(
            "You are the inner life of an AI agent, running its {} job. {}\nAnswer with JSON only, exactly this shape: {}",
            job.name(),
            instruction(job),
            answer_shape(job)
        );
        let user = context(settings, job, now, &report.sensed)?;
        match engine.ask(Stage::InnerLife, &system, &user) {
            Ok(v) => match plan_from_answer(job, settings, now, &v, &state) {
                Ok(p) => {
                    report.status = "ok";
                    plan = Some(p);
                }
                Err(e) => reasons.push(format!("the model's answer was refused: {e}")),
            },
            Err(e) => reasons.push(e),
        }
    } else {
        reasons.push(crate::engine::NO_LLM.to_string());
    }
    if plan.is_none() && engine.inner.dispatch {
        let text = dispatch_text(job, settings, now, &report.sensed);
        if !options.dry_run {
            owner.queue_dispatch(&format!("inner:{}", job.name()), 2, &text, now)?;
        }
        report.status = "dispatched";
        report.dispatch = Some(text);
        if job == Job::Dream {
            let topics = dream_topics(settings, &state, now);
            plan = Some(Plan { consumed: topics.into_iter().map(|(_, key)| key).collect(), ..Plan::default() });
        }
    }
    if plan.is_none() && report.status == "skipped" {
        match fallback(job, owner, settings, now, &state, &report.sensed) {
            Ok(p) => {
                report.status = "fallback";
                plan = Some(p);
            }
            Err(e) => reasons.push(e),
        }
    }
    if !reasons.is_empty() {
        report.reason = Some(reasons.join("; "));
    }
    if job == Job::BrainLoop && report.status != "fallback" {
        // The handoffs of earlier loops are read by this one (not by the offline note,
        // which only lists them as pending).
        let handoffs = sense::unconsumed(settings, &state, "handoff", now);
        if let Some(p) = plan.as_mut() {
            p.consumed.extend(handoffs.into_iter().map(|(_, key)| key));
        }
    }
    if let Some(p) = &plan {
        report.output = p.output.clone();
        if !options.dry_run {
            apply(job, settings, p, now, &mut report)?;
            if let Some(text) = &p.report {
                deliver_report(engine, owner, text, now, &mut report);
            }
        }
    }
    report.llm = engine.take_calls();
    if !options.dry_run {
        inner::log_run(settings, job, report.status, report.reason.as_deref(), now)?;
    }
    Ok(report)
}

/// The brain loop's report for the user: through the reflection's outbound channel when it
/// is a webhook or Telegram, else as an instruction for the agent to relay.
fn deliver_report(engine: &Reflector, owner: &Owner<'_>, text: &str, now: Timestamp, report: &mut JobReport) {
    let result = match engine.config.outbound.target {
        OutboundTarget::Inbox => owner
            .queue_dispatch("inner:brain_loop:report", 2, &format!("[Inner life: brain loop] Tell the user: {text}"), now)
            .map(|_| json!({ "channel": "inbox", "ok": true }))
            .unwrap_or_else(|e| json!({ "channel": "inbox", "ok": false, "error": e.to_string() })),
        _ => crate::outbound::deliver(engine, owner, &format!("brain-loop-{}", now.as_millisecond()), "report", text, now),
    };
    if let Value::Object(o) = &mut report.output {
        o.insert("delivered".into(), result);
    }
}
