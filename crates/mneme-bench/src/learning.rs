//! `mneme-bench learning`: does reflection make the agent better? A simulated month of an
//! agent's work (issue 36's benchmark of reflection's effect), played through the hooks
//! on a fixed clock, once with the heartbeat on schedule and once without it.
//!
//! Every day is one session. At its start the agent receives the session-start block
//! (which carries the effective playbook). Its tasks, drawn with a seeded generator:
//! - **failure modes with known fixes** (`npm test` needs the database started, `pytest`
//!   the virtualenv, …): the scripted agent runs the fix first when an injected line
//!   names the action and every fix step in backticks; otherwise the action fails (with
//!   fresh ports, paths and ids in its error), the agent finds the fix, and the action
//!   passes;
//! - **corrections**: the agent would run an action the user does not want (`npm
//!   install` in a pnpm repository); unless an injected line names that action as
//!   corrected, it runs it and the user corrects it, in one of several wordings;
//! - **repeated questions**, a **flaky** call that a plain retry fixes, one-off failures,
//!   ordinary tool calls, chit-chat, one-off "no, the other file" replies, and a daily
//!   note with facts, a preference, a chat line and now and then a marked lesson.
//!
//! The configuration a user runs: the embedding model when installed (the heartbeat then
//! groups paraphrased questions and corrections by meaning), else words alone; the output
//! says which. With the loop on, four active heartbeat ticks run after each session and one idle
//! tick (mining) at night; no feedback is reported by the host, so only what the
//! heartbeat observes scores its tips. Reported per week, loop on and off: the share of
//! tasks on a failure mode already met that failed again, the same for corrections, and
//! (loop on) the playbook's size, its useful lines and its junk (a fact from the notes, a
//! chat line, a second line for one lesson, a "fix" for the flaky call), and the directive.

use std::sync::Arc;

use anyhow::{Result, anyhow};
use jiff::{SignedDuration, Timestamp};
use mneme_agent::hooks::{HookContext, HookEvent, HookInput, HookName, Hooks};
use mneme_core::FixedClock;
use mneme_reflect::config::ReflectionConfig;
use mneme_reflect::engine::Reflector;
use mneme_reflect::tick::{TickOptions, tick};
use mneme_service::{MemoryService, Ops, Principal, ServiceConfig};
use mneme_store::StoreOptions;
use mneme_workspace::playbook::{PatternLine, Playbook, normalize};
use serde::Serialize;
use serde_json::{Value, json};

use crate::scripted::ScriptedModel;
use crate::synth::Rng;

/// A failure mode: the action, its error (`{n}` a fresh number, `{p}` a fresh path, `{h}`
/// a fresh id), the steps that fix it, and how often a day's work meets it.
struct Mode {
    action: &'static str,
    error: &'static str,
    fix: &'static [&'static str],
    p: f64,
}

const MODES: [Mode; 6] = [
    Mode { action: "npm test", error: "connect ECONNREFUSED 127.0.0.1:{n}", fix: &["docker compose up -d db"], p: 0.5 },
    Mode {
        action: "pytest tests/",
        error: "ModuleNotFoundError: No module named 'requests' (in {p})",
        fix: &["source .venv/bin/activate"],
        p: 0.4,
    },
    Mode {
        action: "git push origin HEAD",
        error: "! [rejected] HEAD -> feature (non-fast-forward) error: failed to push some refs to {p}",
        fix: &["git pull --rebase"],
        p: 0.45,
    },
    Mode {
        action: "terraform plan",
        error: "Error: Backend initialization required, please run init ({h})",
        fix: &["terraform init"],
        p: 0.3,
    },
    Mode {
        action: "kubectl apply -f k8s/",
        error: "error: You must be logged in to the server (Unauthorized) request {h}",
        fix: &["aws sso login --profile prod", "aws eks update-kubeconfig --name prod"],
        p: 0.35,
    },
    Mode {
        action: "npm run build",
        error: "FATAL ERROR: Reached heap limit Allocation failed - JavaScript heap out of memory at {n}",
        fix: &["export NODE_OPTIONS=--max-old-space-size=4096"],
        p: 0.3,
    },
];

/// A correction: what the agent would run, the user's words (one of them each time), and
/// what the user wants instead.
struct Correction {
    wrong: &'static str,
    said: &'static [&'static str],
    right: &'static str,
    p: f64,
}

const CORRECTIONS: [Correction; 3] = [
    Correction {
        wrong: "npm install",
        said: &["No, don't use npm here, this repo uses pnpm.", "Stop, this is a pnpm repo.", "no npm please, pnpm"],
        right: "pnpm install",
        p: 0.4,
    },
    Correction {
        wrong: "git commit -m wip",
        said: &[
            "Don't commit with a message like wip, write what changed.",
            "no, give the commit a real message",
            "not wip again, describe the change",
        ],
        right: "git commit -m 'Describe the change'",
        p: 0.35,
    },
    Correction {
        wrong: "cargo test --release",
        said: &[
            "Actually, run the tests in debug, release takes too long here.",
            "No, debug tests are enough.",
            "don't build release for tests",
        ],
        right: "cargo test",
        p: 0.3,
    },
];

const QUESTIONS: [&[&str]; 2] = [
    &["what's the staging URL?", "What is the staging url again?", "where is staging hosted?"],
    &["how do I get a database shell on prod?", "How do I open a db shell on prod?", "remind me how to get the prod database shell?"],
];

const CHAT: [&str; 6] = [
    "thanks, that looks good",
    "ok let's move on to the next ticket",
    "great, ship it",
    "I'm grabbing a coffee, back in five",
    "nice work on that one",
    "let's look at the dashboard after lunch",
];

const FACTS: [&str; 5] = [
    "The deploy uses Kubernetes on EKS",
    "Alice owns the billing service",
    "The staging database is Postgres 15",
    "Bob is on call this week",
    "The frontend is built with Vite",
];

/// Failures met once each (by their words): no lesson may come of them.
const ONE_OFF: [&str; 10] = [
    "mismatched types: expected struct String, found integer",
    "undefined reference to symbol pthread_create",
    "permission denied while reading the cache directory",
    "unexpected token in JSON at position zero",
    "cannot find module lodash",
    "segmentation fault (core dumped)",
    "too many open files",
    "certificate has expired",
    "disk quota exceeded",
    "merge conflict in package.json",
];

const PREFERENCE: &str = "Alice prefers short answers in code review";
const NOTE_LESSONS: [&str; 2] = ["run the migrations before the API tests", "tag releases only from the main branch"];
const FLAKY: &str = "curl -sf https://api.example.com/health";

/// One week's figures for one arm.
#[derive(Debug, Clone, Default, Serialize)]
struct Week {
    week: usize,
    /// Tasks on a failure mode that had already failed in an earlier session.
    known_failure_tasks: u32,
    repeated_failures: u32,
    known_correction_tasks: u32,
    repeated_corrections: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    playbook: Option<PlaybookFigures>,
}

impl Week {
    fn failure_rate(&self) -> f64 {
        rate(self.repeated_failures, self.known_failure_tasks)
    }

    fn correction_rate(&self) -> f64 {
        rate(self.repeated_corrections, self.known_correction_tasks)
    }
}

fn rate(n: u32, of: u32) -> f64 {
    if of == 0 { 0.0 } else { f64::from(n) / f64::from(of) }
}

/// The playbook at the end of a week, judged against what the simulation knows.
#[derive(Debug, Clone, Default, Serialize)]
struct PlaybookFigures {
    lines: usize,
    useful: usize,
    junk: usize,
    junk_lines: Vec<String>,
    /// Tips delivered and tips scored by what followed them, so far.
    tips: usize,
    observed: usize,
    directive: String,
}

struct Sim {
    clock: Arc<FixedClock>,
    ops: Ops,
    owner: Principal,
    hooks: Hooks,
    settings: mneme_workspace::WorkspaceSettings,
    engine: Reflector,
    /// Draws the day's tasks: the same in both arms.
    rng: Rng,
    /// Draws wordings and error details, which the arms consume differently.
    noise: Rng,
    /// Failure modes and corrections met in an earlier session.
    failed_before: Vec<bool>,
    corrected_before: Vec<bool>,
    session: String,
    _dir: tempfile::TempDir,
}

impl Sim {
    fn new(seed: u64, start: Timestamp, model: Option<&crate::truth::Model>, engine: Reflector) -> Result<Sim> {
        let dir = tempfile::tempdir()?;
        let clock = Arc::new(FixedClock::new(start));
        let store = StoreOptions { path: dir.path().join("mneme.db"), key: None, create: true, decay: Default::default() };
        let service = Arc::new(MemoryService::open(store, ServiceConfig::default(), clock.clone())?);
        if let Some(m) = model {
            service.enable_embeddings(m.clone(), Default::default())?;
        }
        let ops = Ops::new(service, false);
        let ws = dir.path().join("workspace");
        std::fs::create_dir_all(&ws)?;
        let settings = mneme_workspace::WorkspaceConfig::default().settings(ws)?;
        let hooks = Hooks::new(ops.clone(), Default::default()).with_workspace(settings.clone());
        Ok(Sim {
            clock,
            ops,
            owner: Principal::owner("bench"),
            hooks,
            settings,
            engine,
            rng: Rng(seed),
            noise: Rng(seed ^ 0x5eed),
            failed_before: vec![false; MODES.len()],
            corrected_before: vec![false; CORRECTIONS.len()],
            session: String::new(),
            _dir: dir,
        })
    }

    fn now(&self) -> Timestamp {
        mneme_core::Clock::now(&*self.clock)
    }

    fn hook(&self, name: HookName, event: HookEvent) -> Result<Option<String>> {
        let ctx = HookContext { session_id: Some(self.session.clone()), channel_id: Some("bench".into()), ..Default::default() };
        let mut buffer = Vec::new();
        let outcome = self.hooks.handle(&self.owner, name, HookInput { event, ctx }, &mut buffer);
        self.clock.advance(SignedDuration::from_secs(40));
        match outcome.error {
            Some(e) => Err(anyhow!("{}: {e}", name.as_str())),
            None => Ok(outcome.context),
        }
    }

    fn say(&self, role: &str, text: &str) -> Result<()> {
        let name = if role == "user" { HookName::MessageReceived } else { HookName::MessageSent };
        self.hook(name, HookEvent { content: Some(text.into()), ..Default::default() }).map(|_| ())
    }

    fn run(&self, command: &str, error: Option<String>) -> Result<()> {
        let params = json!({ "command": command });
        self.hook(
            HookName::BeforeToolCall,
            HookEvent { tool_name: Some("Bash".into()), params: Some(params.clone()), ..Default::default() },
        )?;
        let event =
            HookEvent { tool_name: Some("Bash".into()), params: Some(params), success: Some(error.is_none()), error, ..Default::default() };
        self.hook(HookName::AfterToolCall, event).map(|_| ())
    }

    fn fresh(&mut self, template: &str) -> String {
        template
            .replace("{n}", &(1024 + self.noise.below(60_000)).to_string())
            .replace("{p}", &format!("/tmp/build-{}/src", self.noise.below(1_000_000)))
            .replace("{h}", &format!("{:012x}", self.noise.next() & 0xffff_ffff_ffff))
    }

    /// One day's session; adds its tasks to `week`.
    fn session(&mut self, day: usize, week: &mut Week) -> Result<()> {
        self.session = format!("day-{day}");
        let context = self.hook(HookName::SessionStart, HookEvent::default())?.unwrap_or_default();
        let lines: Vec<&str> = context.lines().collect();
        let names = |needles: &[String]| lines.iter().any(|l| needles.iter().all(|n| l.contains(n.as_str())));
        // The day's tasks, shuffled with the noise.
        let mut tasks: Vec<(u8, usize)> = Vec::new();
        for (i, m) in MODES.iter().enumerate() {
            if self.rng.unit() < m.p {
                tasks.push((0, i));
            }
        }
        for (i, c) in CORRECTIONS.iter().enumerate() {
            if self.rng.unit() < c.p {
                tasks.push((1, i));
            }
        }
        for (i, _) in QUESTIONS.iter().enumerate() {
            if self.rng.unit() < 0.3 {
                tasks.push((2, i));
            }
        }
        for _ in 0..4 {
            tasks.push((3, self.rng.below(1000)));
        }
        for i in (1..tasks.len()).rev() {
            let j = self.rng.below(i + 1);
            tasks.swap(i, j);
        }
        self.say("user", "morning! let's pick up where we left off")?;
        for (kind, i) in tasks {
            match kind {
                0 => {
                    let m = &MODES[i];
                    let mut needles = vec![format!("`{}`", m.action)];
                    needles.extend(m.fix.iter().map(|f| format!("`{f}`")));
                    let known = self.failed_before[i];
                    if names(&needles) {
                        for f in m.fix {
                            self.run(f, None)?;
                        }
                        self.run(m.action, None)?;
                    } else {
                        let error = self.fresh(m.error);
                        self.run(m.action, Some(error))?;
                        self.say("assistant", "That failed; let me look into it.")?;
                        for f in m.fix {
                            self.run(f, None)?;
                        }
                        self.run(m.action, None)?;
                        week.repeated_failures += u32::from(known);
                        self.failed_before[i] = true;
                    }
                    week.known_failure_tasks += u32::from(known);
                }
                1 => {
                    let c = &CORRECTIONS[i];
                    let known = self.corrected_before[i];
                    let warned = lines.iter().any(|l| l.contains(&format!("`{}`", c.wrong)) && l.contains("corrected"));
                    if !warned {
                        self.run(c.wrong, None)?;
                        let said = c.said[self.noise.below(c.said.len())];
                        self.say("user", said)?;
                        self.say("assistant", "Understood, fixing that.")?;
                        week.repeated_corrections += u32::from(known);
                        self.corrected_before[i] = true;
                    }
                    self.run(c.right, None)?;
                    week.known_correction_tasks += u32::from(known);
                }
                2 => {
                    let q = QUESTIONS[i];
                    let asked = q[self.noise.below(q.len())];
                    self.say("user", asked)?;
                    self.say("assistant", "Here it is: see the team wiki, section Environments.")?;
                }
                _ => match i % 10 {
                    0 => {
                        // The flaky call: fails, and a plain retry works.
                        self.run(FLAKY, Some(format!("curl: (28) Operation timed out after {} milliseconds", 5000 + i)))?;
                        self.run(FLAKY, None)?;
                    }
                    1 => {
                        let error = ONE_OFF[self.noise.below(ONE_OFF.len())];
                        self.run(&format!("make target-{i}"), Some(error.to_string()))?
                    }
                    2 => {
                        self.say("assistant", &format!("I'll edit config-{i}.yaml"))?;
                        self.say("user", "no, the other file")?;
                    }
                    3..=5 => self.say("user", CHAT[i % CHAT.len()])?,
                    _ => self.run(["git status", "ls -la", "cat README.md", "rg TODO"][i % 4], None)?,
                },
            }
        }
        self.hook(HookName::AgentEnd, HookEvent::default())?;
        // The day's note, written by the agent during the day.
        let today = self.settings.today(self.now());
        let mut note =
            format!("# {today}\n\n- {}\n- {}\n- {PREFERENCE}\n- user: {}\n", FACTS[day % 5], FACTS[(day + 2) % 5], CHAT[day % 6]);
        if day % 7 == 3 {
            note.push_str(&format!("- Lesson: {}\n", NOTE_LESSONS[(day / 7) % 2]));
        }
        std::fs::create_dir_all(self.settings.dir.join("memory"))?;
        std::fs::write(self.settings.dir.join(format!("memory/{today}.md")), note)?;
        Ok(())
    }

    fn tick(&self, idle: bool) -> Result<Value> {
        let owner = self.ops.owner(&self.owner)?;
        let report = tick(&self.engine, &owner, &self.settings, self.now(), &TickOptions { idle: Some(idle), ..Default::default() })?;
        Ok(report.line)
    }

    fn playbook(&self, tips: usize, observed: usize, directive: String) -> Result<PlaybookFigures> {
        let text = std::fs::read_to_string(self.settings.dir.join(mneme_workspace::paths::PLAYBOOK)).unwrap_or_default();
        let playbook = Playbook::parse(&text);
        let mut figures = PlaybookFigures { tips, observed, directive, ..Default::default() };
        let mut claimed: Vec<String> = Vec::new();
        for (_, p) in playbook.patterns() {
            figures.lines += 1;
            let judged = judge(&p);
            match judged {
                Judged::Useful(what) if !claimed.contains(&what) => {
                    claimed.push(what);
                    figures.useful += 1;
                }
                Judged::Useful(what) => {
                    figures.junk += 1;
                    figures.junk_lines.push(format!("duplicate of {what}: {}", p.text));
                }
                Judged::Junk(why) => {
                    figures.junk += 1;
                    figures.junk_lines.push(format!("{why}: {}", p.text));
                }
                Judged::Neutral => {}
            }
        }
        Ok(figures)
    }
}

enum Judged {
    /// A line that carries one known lesson (named, for duplicates).
    Useful(String),
    Junk(&'static str),
    /// Neither: a tracked error without its fix yet, say.
    Neutral,
}

fn judge(p: &PatternLine) -> Judged {
    let t = &p.text;
    let n = normalize(t);
    if FACTS.iter().any(|f| n.contains(&normalize(f))) || n.contains("kubernetes") {
        return Judged::Junk("a fact");
    }
    if CHAT.iter().any(|c| n.contains(&normalize(c))) || t.to_lowercase().starts_with("user:") {
        return Judged::Junk("a chat line");
    }
    if t.contains(FLAKY) && !t.starts_with("Recurring error") {
        return Judged::Junk("a fix for a flaky call");
    }
    for m in &MODES {
        if t.contains(&format!("`{}`", m.action)) {
            let fixed = m.fix.iter().all(|f| t.contains(&format!("`{f}`")));
            return if fixed { Judged::Useful(format!("the fix for {}", m.action)) } else { Judged::Junk("a wrong fix") };
        }
    }
    for c in &CORRECTIONS {
        if t.contains(&format!("`{}`", c.wrong)) {
            return Judged::Useful(format!("the correction of {}", c.wrong));
        }
    }
    for (i, q) in QUESTIONS.iter().enumerate() {
        if q.iter().any(|v| n.contains(&normalize(v))) {
            return Judged::Useful(format!("question {i}"));
        }
    }
    if n.contains(&normalize(PREFERENCE)) {
        return Judged::Useful("the preference".into());
    }
    if let Some(l) = NOTE_LESSONS.iter().find(|l| n.contains(&normalize(l))) {
        return Judged::Useful(format!("the note's lesson {l}"));
    }
    if t.starts_with("Recurring error") {
        return Judged::Neutral;
    }
    Judged::Junk("unrelated")
}

/// One arm: `weeks` weeks of daily sessions, with the heartbeat or without.
fn arm(
    seed: u64,
    weeks: usize,
    loop_on: bool,
    model: Option<&crate::truth::Model>,
    llm: Option<&ScriptedModel>,
    show_playbook: bool,
) -> Result<Vec<Week>> {
    let start = Timestamp::from_second(1_800_000_000)?;
    let engine = llm.map_or_else(|| Reflector::offline(ReflectionConfig::default()), ScriptedModel::engine);
    let mut sim = Sim::new(seed, start, model, engine)?;
    let mut out = Vec::new();
    let (mut tips, mut observed) = (0, 0);
    for w in 0..weeks {
        let mut week = Week { week: w + 1, ..Default::default() };
        let mut directive = String::new();
        for d in 0..7 {
            let day = w * 7 + d;
            sim.clock.set(start + SignedDuration::from_hours(24 * day as i64));
            sim.session(day, &mut week)?;
            if loop_on {
                for _ in 0..4 {
                    sim.clock.advance(SignedDuration::from_mins(30));
                    let line = sim.tick(false)?;
                    tips += usize::from(line["actionTaken"]["kind"] == "telegram_tip");
                    observed += line["observedFeedback"].as_array().map_or(0, Vec::len);
                    directive = line["feedback"]["curateDirective"].as_str().unwrap_or_default().to_string();
                }
                sim.clock.advance(SignedDuration::from_hours(6));
                sim.tick(true)?;
            }
        }
        if loop_on {
            if show_playbook {
                let text = std::fs::read_to_string(sim.settings.dir.join(mneme_workspace::paths::PLAYBOOK)).unwrap_or_default();
                eprintln!("--- the playbook after week {} ---\n{text}", w + 1);
            }
            week.playbook = Some(sim.playbook(tips, observed, directive)?);
        }
        out.push(week);
    }
    Ok(out)
}

/// Runs both arms and prints the table (or JSON); `show_playbook` prints the loop-on
/// playbook after each week on stderr.
pub fn learning(
    seed: u64,
    weeks: usize,
    model: Option<crate::truth::Model>,
    scripted: bool,
    show_playbook: bool,
    json_out: bool,
) -> Result<()> {
    anyhow::ensure!((1..=52).contains(&weeks), "--weeks {weeks}: between 1 and 52");
    eprintln!("learning: {weeks} simulated weeks, seed {seed}, with the heartbeat and without");
    let llm = if scripted { Some(ScriptedModel::start()?) } else { None };
    let on = arm(seed, weeks, true, model.as_ref(), llm.as_ref(), show_playbook)?;
    let off = arm(seed, weeks, false, model.as_ref(), llm.as_ref(), false)?;
    let grouping = match &model {
        Some(m) => format!("paraphrases grouped with {}", m.model_id()),
        None => "paraphrases grouped by words (no embedding model)".to_string(),
    };
    let (stages, calls) = match &llm {
        Some(l) => ("the scripted model", l.calls()),
        None => ("no LLM", 0),
    };
    if json_out {
        outln!(
            "{}",
            json!({ "seed": seed, "weeks": weeks, "grouping": grouping, "llm": stages, "llm_calls": calls, "loop_on": on, "loop_off": off })
        );
        return Ok(());
    }
    outln!("Reflection's effect, {stages} ({grouping}), seed {seed}: per week, repeated failures and corrections");
    if llm.is_some() {
        outln!("({calls} model calls; each stage's answer as scripted in crates/mneme-bench/src/scripted.rs)");
    }
    outln!("(tasks on a failure or correction already met in an earlier session that went wrong again)");
    outln!();
    outln!(
        "| week | failures again, loop off | loop on | corrections again, loop off | loop on | playbook lines | useful | junk | tips | scored by observation | directive |"
    );
    outln!("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|");
    for (a, b) in on.iter().zip(&off) {
        let p = a.playbook.clone().unwrap_or_default();
        outln!(
            "| {} | {:.0} % ({}/{}) | {:.0} % ({}/{}) | {:.0} % ({}/{}) | {:.0} % ({}/{}) | {} | {} | {} | {} | {} | {} |",
            a.week,
            100.0 * b.failure_rate(),
            b.repeated_failures,
            b.known_failure_tasks,
            100.0 * a.failure_rate(),
            a.repeated_failures,
            a.known_failure_tasks,
            100.0 * b.correction_rate(),
            b.repeated_corrections,
            b.known_correction_tasks,
            100.0 * a.correction_rate(),
            a.repeated_corrections,
            a.known_correction_tasks,
            p.lines,
            p.useful,
            p.junk,
            p.tips,
            p.observed,
            p.directive
        );
    }
    if let Some(p) = on.last().and_then(|w| w.playbook.as_ref()) {
        for j in &p.junk_lines {
            outln!("junk: {j}");
        }
    }
    Ok(())
}
