//! The heartbeat with a model: a loopback server scripted to act as an OpenAI-compatible
//! endpoint plays every stage (told apart by its system prompt). Valid answers are used;
//! JSON in prose and truncated JSON are recovered; garbage, 429 and timeouts fall back
//! without touching a file wrongly; a simulated week drives the feedback loop.

use std::collections::{BTreeMap, VecDeque};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::post;
use jiff::{SignedDuration, Timestamp};
use mneme_core::{FixedClock, Payload, ToolOutputPayload};
use mneme_llm::{LlmClient, LlmSettings, Route};
use mneme_reflect::config::ReflectionConfig;
use mneme_reflect::engine::{Exec, Reflector};
use mneme_reflect::tick::{TickOptions, TickReport, tick};
use mneme_service::{IngestOptions, MemoryService, ServiceConfig};
use mneme_store::StoreOptions;
use mneme_workspace::playbook::{BODY_LIMIT, Playbook};
use mneme_workspace::playbook_log;
use serde_json::{Value, json};

/// One scripted answer.
#[derive(Clone, Debug)]
pub(crate) enum Reply {
    Ok(String),
    Status(u16),
    /// Answer after this long (longer than the stage's timeout).
    Slow(Duration, String),
}

/// The stage a request is for, from the start of its system prompt.
fn stage_of(system: &str) -> &'static str {
    // The inner life's jobs: "You are the inner life of an AI agent, running its dream job."
    if let Some(rest) = system.strip_prefix("You are the inner life of an AI agent, running its ") {
        for job in ["brain_loop", "reflect", "memory", "dream", "chronicle", "evolve"] {
            if rest.starts_with(&format!("{job} job")) {
                return job;
            }
        }
    }
    for (prefix, stage) in [
        ("You are Sinain", "relay"),
        ("You summarise", "summary"),
        ("You analyse", "signals"),
        ("You interpret", "feedback"),
        ("You deep-mine", "mine"),
        ("You curate", "curate"),
        ("From the agent's playbook", "insight"),
        ("You extract a knowledge module", "extract"),
    ] {
        if system.starts_with(prefix) {
            return stage;
        }
    }
    panic!("a prompt no stage sends: {system}")
}

#[derive(Default)]
struct Script {
    queued: BTreeMap<&'static str, VecDeque<Reply>>,
    /// Used when a stage's queue is empty.
    fallback: BTreeMap<&'static str, Reply>,
    /// (stage, request body)
    seen: Vec<(&'static str, Value)>,
    /// The insight answers count up, so no two repeat.
    insights: usize,
}

async fn completions(State(script): State<Arc<Mutex<Script>>>, Json(body): Json<Value>) -> (StatusCode, Json<Value>) {
    let reply = {
        let mut s = script.lock().expect("script");
        let stage = stage_of(body["messages"][0]["content"].as_str().unwrap_or_default());
        s.seen.push((stage, body.clone()));
        let reply = s.queued.get_mut(stage).and_then(VecDeque::pop_front).or_else(|| s.fallback.get(stage).cloned());
        match reply {
            Some(Reply::Ok(text)) if text == "<insight>" => {
                s.insights += 1;
                let i = s.insights;
                Reply::Ok(
                    json!({ "skip": false, "suggestion": format!("Try alpha{i} beta{i} gamma{i} before deploying."), "insight": format!("Deploy failures {i} cluster after long sessions: the errors and the fatigue are the same signal seen twice.") })
                        .to_string(),
                )
            }
            Some(r) => r,
            None => Reply::Ok("{}".into()),
        }
    };
    let text = match reply {
        Reply::Status(code) => return (StatusCode::from_u16(code).expect("status"), Json(json!({ "error": "scripted" }))),
        Reply::Slow(wait, text) => {
            tokio::time::sleep(wait).await;
            text
        }
        Reply::Ok(text) => text,
    };
    let body = json!({
        "choices": [{ "message": { "role": "assistant", "content": text } }],
        "usage": { "prompt_tokens": 120, "completion_tokens": 30 },
    });
    (StatusCode::OK, Json(body))
}

/// The scripted endpoint on its own runtime, and a store and workspace to tick on.
pub(crate) struct Bench {
    rt: tokio::runtime::Runtime,
    url: String,
    script: Arc<Mutex<Script>>,
    pub(crate) clock: Arc<FixedClock>,
    pub(crate) service: crate::Owned,
    pub(crate) settings: mneme_workspace::WorkspaceSettings,
    _dirs: (tempfile::TempDir, tempfile::TempDir),
}

impl Bench {
    pub(crate) fn new() -> Bench {
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().expect("runtime");
        let script = Arc::new(Mutex::new(Script::default()));
        let app = axum::Router::new().route("/v1/chat/completions", post(completions)).with_state(script.clone());
        let listener = rt.block_on(tokio::net::TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0)))).expect("bind");
        let addr = listener.local_addr().expect("addr");
        rt.spawn(async move { axum::serve(listener, app).await });
        let clock = Arc::new(FixedClock::new(Timestamp::from_second(1_800_000_000).expect("instant")));
        let dir = tempfile::tempdir().expect("dir");
        let store = StoreOptions { path: dir.path().join("mneme.db"), key: None, create: true, decay: Default::default() };
        let service = crate::Owned::new(MemoryService::open(store, ServiceConfig::default(), clock.clone()).expect("store"));
        let (ws, settings) = crate::reflect::workspace();
        Bench { rt, url: format!("http://{addr}/v1"), script, clock, service, settings, _dirs: (dir, ws) }
    }

    /// The shared client, pointed at the scripted endpoint (default model `small`).
    pub(crate) fn llm(&self) -> Arc<LlmClient> {
        Arc::new(LlmClient::new(LlmSettings {
            default: Some(Route { endpoint: self.url.clone(), api_key: None }),
            model: "small".into(),
            routes: BTreeMap::new(),
            timeout: Duration::from_secs(2),
            backoff_base: Duration::from_millis(1),
        }))
    }

    pub(crate) fn block_on<F: std::future::Future>(&self, f: F) -> F::Output {
        self.rt.block_on(f)
    }

    pub(crate) fn engine(&self, config: ReflectionConfig) -> Reflector {
        let mut routes = BTreeMap::new();
        routes.insert("big".to_string(), Route { endpoint: self.url.clone(), api_key: None });
        let llm = LlmClient::new(LlmSettings {
            default: Some(Route { endpoint: self.url.clone(), api_key: None }),
            model: "small".into(),
            routes,
            timeout: Duration::from_secs(10),
            backoff_base: Duration::from_millis(1),
        });
        Reflector::new(config, Some(Arc::new(llm)), Some(Exec::Handle(self.rt.handle().clone())))
    }

    pub(crate) fn now(&self) -> Timestamp {
        mneme_core::Clock::now(&*self.clock)
    }

    pub(crate) fn script(&self, stage: &'static str, reply: Reply) {
        self.script.lock().expect("script").fallback.insert(stage, reply);
    }

    pub(crate) fn seen(&self) -> Vec<(&'static str, Value)> {
        std::mem::take(&mut self.script.lock().expect("script").seen)
    }

    fn fail(&self, n: usize, error: &str) {
        for _ in 0..n {
            let output =
                ToolOutputPayload { tool: "deploy".into(), args: Value::Null, result: None, error: Some(error.into()), duration_ms: None };
            self.service.ingest(Payload::ToolOutput(output), IngestOptions::default()).expect("ingest");
        }
        self.service.touch_activity().expect("activity");
    }

    fn tick(&self, engine: &Reflector, idle: bool) -> TickReport {
        tick(engine, &self.service.owner(), &self.settings, self.now(), &TickOptions { idle: Some(idle), ..Default::default() })
            .expect("tick")
    }

    fn playbook(&self) -> String {
        std::fs::read_to_string(self.settings.dir.join("memory/sinain-playbook.md")).unwrap_or_default()
    }
}

fn valid_answers(b: &Bench) {
    b.script("summary", Reply::Ok(r#"{"summary": "The user deployed twice; both deploys failed on quota."}"#.into()));
    b.script(
        "signals",
        Reply::Ok(r#"{"signals": ["deploy fails on quota"], "recommendedAction": {"action": "sessions_spawn", "task": "Find root cause for: quota exceeded", "confidence": 0.8}}"#.into()),
    );
    b.script("feedback", Reply::Ok(r#"{"interpretation": "Concrete deploy tips score well."}"#.into()));
    b.script(
        "mine",
        Reply::Ok(r#"{"findings": "Deploys fail late in the day.", "newPatterns": ["Check the quota before a deploy"], "contradictions": [], "preferences": ["The user prefers short answers"], "minedSources": ["x.md"]}"#.into()),
    );
    b.script(
        "curate",
        Reply::Ok(json!({ "body": "# Playbook\n\n## Error prevention\n\n## Patterns\n- Check the quota before a deploy\n- Prefer short answers (score: 0.6)" }).to_string()),
    );
    b.script("insight", Reply::Ok("<insight>".into()));
}

/// With a model every stage uses it: the answers are validated and land where they
/// belong, routed to the model and answer size configured per stage.
#[test]
fn with_a_model_every_stage_uses_it_routed_per_stage() {
    let b = Bench::new();
    valid_answers(&b);
    let mut config = ReflectionConfig::default();
    config.models.smart = "big".into();
    let engine = b.engine(config);
    // Yesterday's daily file to mine; a protected playbook line the model will drop.
    let yesterday = b.settings.today(b.now()) - jiff::Span::new().days(1);
    std::fs::create_dir_all(b.settings.dir.join("memory")).expect("memory");
    std::fs::write(b.settings.dir.join(format!("memory/{yesterday}.md")), "# Daily Log\n## 10:00\nDeploy failed: quota exceeded.\n")
        .expect("daily");
    std::fs::write(
        b.settings.dir.join("memory/sinain-playbook.md"),
        "# Playbook\n\n## Error prevention\n- Never deploy on Fridays\n\n## Patterns\n",
    )
    .expect("playbook");
    // An earlier output with a report, so the feedback stage has something to interpret.
    playbook_log::append(
        &b.settings,
        b.now() - SignedDuration::from_hours(2),
        &json!({ "kind": "output", "outputId": "o1", "skip": false, "suggestion": "Check quotas", "insight": "x" }),
    )
    .expect("output");
    playbook_log::append(
        &b.settings,
        b.now() - SignedDuration::from_hours(1),
        &json!({ "kind": "feedback", "outputId": "o1", "compositeScore": 0.8 }),
    )
    .expect("feedback");
    b.fail(2, "quota exceeded");

    let report = b.tick(&engine, true);
    assert_eq!(report.status, "HEARTBEAT_OK");
    let stages = &report.line["stages"];
    for stage in ["summary", "signals", "mine", "feedback", "curate"] {
        assert_eq!(stages[stage]["status"], "ok", "{stage}: {stages}");
    }
    assert_eq!(report.output["stage"]["status"], "ok");
    assert_eq!(report.line["sessionSummary"], "The user deployed twice; both deploys failed on quota.");
    assert_eq!(report.line["recommendedAction"]["confidence"], 0.8);
    assert_eq!(report.line["actionTaken"]["kind"], "none", "idle: the action waits");
    assert_eq!(report.line["mining"]["minedSources"], json!([format!("{yesterday}.md")]), "only what was sent counts as mined");
    assert_eq!(report.line["feedback"]["interpretation"], "Concrete deploy tips score well.");
    // The model's body, governed: the protected line it dropped is back, the fixable
    // error is tracked, the mining index moved.
    let playbook = b.playbook();
    assert!(playbook.contains("- Check the quota before a deploy"), "{playbook}");
    assert!(playbook.contains("- Never deploy on Fridays"), "law 1 restored it: {playbook}");
    assert!(playbook.contains("Recurring error: quota exceeded [since: "), "{playbook}");
    assert_eq!(Playbook::parse(&playbook).mining_index(), vec![yesterday]);
    // The insight went to the inbox, after the log line, with its output line.
    let insight = report.output["suggestion"].as_str().expect("suggestion");
    let pending = b.service.pending_dispatches(10).expect("dispatches");
    assert!(pending.iter().any(|d| d.text.contains(insight)), "{pending:?}");
    assert_eq!(report.output["delivery"], json!({ "channel": "inbox", "ok": true }));
    assert!(report.output["totalChars"].as_u64().expect("chars") < 500);
    // Six calls, their tokens counted; the smart stage went to the "big" model.
    assert_eq!(report.llm.calls, 6, "{:?}", report.llm);
    assert_eq!(report.llm.prompt_tokens, 6 * 120);
    let seen = b.seen();
    let model_of = |stage: &str| seen.iter().find(|(s, _)| *s == stage).map(|(_, body)| body["model"].clone()).expect("called");
    assert_eq!(model_of("insight"), "big");
    assert_eq!(model_of("signals"), "small", "fast = \"\" is the client's default model");
    let curate = seen.iter().find(|(s, _)| *s == "curate").expect("curate");
    assert_eq!(curate.1["max_tokens"], 3000);
    assert_eq!(curate.1["response_format"]["type"], "json_object");
}

/// Every kind of bad answer: the tick still completes, each stage records a fallback
/// with the reason, the playbook stays a valid playbook and the mining index does not
/// move (the files are mined again next time).
#[test]
fn bad_answers_fall_back_and_never_corrupt_a_file() {
    let cases: Vec<(&str, Reply, &str)> = vec![
        ("garbage", Reply::Ok("I am sorry, I cannot do that.".into()), "LLM failed: model output is not JSON"),
        ("429", Reply::Status(429), "LLM failed: "),
        ("500", Reply::Status(500), "LLM failed: "),
        ("timeout", Reply::Slow(Duration::from_millis(1500), "{}".into()), "LLM failed: "),
        (
            "wrong shape",
            Reply::Ok(r#"{"body": 7, "recommendedAction": {"action": "dance"}, "summary": 3, "findings": []}"#.into()),
            "invalid model answer",
        ),
    ];
    for (name, reply, reason) in cases {
        let b = Bench::new();
        for stage in ["summary", "signals", "feedback", "mine", "curate", "insight"] {
            b.script(stage, reply.clone());
        }
        let mut config = ReflectionConfig::default();
        for s in [
            &mut config.stages.session_summary,
            &mut config.stages.signal_analyzer,
            &mut config.stages.memory_miner,
            &mut config.stages.playbook_curator,
            &mut config.stages.insight_synthesizer,
        ] {
            s.timeout = Some(mneme_core::Span::millis(300));
        }
        let engine = b.engine(config);
        let yesterday = b.settings.today(b.now()) - jiff::Span::new().days(1);
        std::fs::create_dir_all(b.settings.dir.join("memory")).expect("memory");
        std::fs::write(b.settings.dir.join(format!("memory/{yesterday}.md")), "Alice prefers tea.\n").expect("daily");
        let before = "<!-- mining-index: -->\n# Playbook\n\n## Error prevention\n- Never deploy on Fridays\n\n## Patterns\n- Keep answers short (score: 0.7)\n";
        std::fs::write(b.settings.dir.join("memory/sinain-playbook.md"), before).expect("playbook");
        b.fail(2, "quota exceeded");
        let report = b.tick(&engine, true);
        assert_eq!(report.status, "HEARTBEAT_OK", "{name}");
        let stages = &report.line["stages"];
        for stage in ["summary", "signals", "mine", "curate"] {
            assert_eq!(stages[stage]["status"], "fallback", "{name}/{stage}: {stages}");
            let why = stages[stage]["reason"].as_str().unwrap_or_default();
            assert!(why.contains(reason) || why.contains("LLM failed: backoff"), "{name}/{stage}: {why}");
        }
        assert_eq!(report.output["skip"], true, "{name}");
        assert!(report.line["mining"]["newIndex"].is_null(), "{name}: a failed model leaves the index");
        let after = b.playbook();
        let parsed = Playbook::parse(&after);
        assert!(after.contains("- Never deploy on Fridays") && after.contains("- Keep answers short (score: 0.7)"), "{name}: {after}");
        assert!(parsed.body.len() <= BODY_LIMIT);
        assert!(parsed.mining_index().is_empty(), "{name}: {after}");
        assert!(b.tick(&engine, true).line["stages"]["mine"]["status"] != "skipped", "{name}: the file is mined again");
    }
}

/// JSON in prose, fenced, or cut off by the token limit is recovered and used.
#[test]
fn json_in_prose_or_cut_short_is_recovered() {
    let b = Bench::new();
    valid_answers(&b);
    b.script(
        "summary",
        Reply::Ok("Here is the summary you asked for:\n```json\n{\"summary\": \"Two failed deploys.\"}\n```\nAnything else?".into()),
    );
    b.script(
        "signals",
        Reply::Ok(
            r#"Sure. {"signals": ["quota"], "recommendedAction": {"action": "skip", "task": "", "confidence": 0.1}} Hope that helps."#
                .into(),
        ),
    );
    b.script("feedback", Reply::Ok(r#"{"interpretation": "Tips about quotas work"#.into()));
    let engine = b.engine(ReflectionConfig::default());
    playbook_log::append(
        &b.settings,
        b.now(),
        &json!({ "kind": "output", "outputId": "o1", "skip": false, "suggestion": "s", "insight": "i" }),
    )
    .expect("output");
    playbook_log::append(&b.settings, b.now(), &json!({ "kind": "feedback", "outputId": "o1", "compositeScore": 0.5 })).expect("feedback");
    b.fail(1, "quota exceeded");
    let report = b.tick(&engine, false);
    assert_eq!(report.line["sessionSummary"], "Two failed deploys.");
    assert_eq!(report.line["recommendedAction"]["action"], "skip");
    assert_eq!(report.line["feedback"]["interpretation"], "Tips about quotas work", "repaired from a cut-off reply");
}

/// A simulated week, a tick every 30 minutes: feedback reports drive the directive through
/// all four values, the body never exceeds 50 lines, unreported spawns time out, the
/// daily minimum fires, and what curation writes reaches the next session's context.
#[test]
fn a_simulated_week_drives_the_feedback_loop() {
    let b = Bench::new();
    valid_answers(&b);
    // A low-confidence recommendation: only the daily minimum acts on it.
    b.script(
        "signals",
        Reply::Ok(r#"{"signals": ["deploys are slow"], "recommendedAction": {"action": "sessions_spawn", "task": "Research faster deploys", "confidence": 0.2}}"#.into()),
    );
    // The model keeps adding a pattern a tick, so the limit is exercised.
    let engine = b.engine(ReflectionConfig::default());
    let mut directives = Vec::new();
    let mut outcomes = Vec::new();
    let mut daily_minimum = 0;
    let mut acted_on = std::collections::BTreeSet::new();
    let mut max_lines = 0;
    for t in 0..(7 * 48) {
        let day = t / 48;
        if t % 48 == 18 {
            b.fail(1, &format!("deploy timeout {day}"));
        }
        // Score the newest insight: day 1 well, days 2-3 badly, then mixed.
        let score = match day {
            0 => None,
            1 => Some(0.9),
            2 | 3 => Some(-0.6),
            _ => Some(if t % 2 == 0 { 0.9 } else { 0.0 }),
        };
        let body: Vec<String> = (0..60).map(|i| format!("- Pattern {t}-{i} from the model")).collect();
        b.script("curate", Reply::Ok(json!({ "body": format!("# Playbook\n## Patterns\n{}", body.join("\n")) }).to_string()));
        let report = b.tick(&engine, false);
        if let (Some(score), Some(id)) = (score, report.output["outputId"].as_str()) {
            playbook_log::append(&b.settings, b.now(), &json!({ "kind": "feedback", "outputId": id, "compositeScore": score }))
                .expect("report");
        }
        let line = &report.line;
        let directive = line["feedback"]["curateDirective"].as_str().expect("directive").to_string();
        if directives.last() != Some(&directive) {
            directives.push(directive);
        }
        for o in line["spawnOutcomes"].as_array().expect("outcomes") {
            outcomes.push(o["outcome"].as_str().expect("outcome").to_string());
        }
        if line["actionTaken"]["dailyMinimum"] == true {
            daily_minimum += 1;
        }
        if line["actionTaken"]["kind"] == "sessions_spawn" {
            acted_on.insert(day);
        }
        max_lines = max_lines.max(line["playbookChanges"]["playbookLines"].as_u64().expect("lines"));
        b.clock.advance(SignedDuration::from_mins(30));
    }
    for d in ["insufficient_data", "stability", "aggressive_prune", "normal"] {
        assert!(directives.iter().any(|x| x == d), "{d} never came: {directives:?}");
    }
    assert!(max_lines as usize <= BODY_LIMIT, "{max_lines}");
    assert!(outcomes.iter().any(|o| o == "timeout"), "{outcomes:?}");
    // Low-confidence advice only: the daily minimum (or a stale item's mandatory action)
    // makes sure every active day after the first has an action.
    assert!(daily_minimum >= 1, "the daily minimum never fired");
    assert_eq!(acted_on.into_iter().collect::<Vec<_>>(), (1..7).collect::<Vec<_>>(), "an action every day after the first");
    let text = mneme_workspace::context::session_start(&b.settings, None).expect("context");
    assert!(text.contains("from the model"), "the curated playbook reaches the next session: {text}");
}

mod properties {
    use std::collections::BTreeMap;

    use mneme_llm::extract_json;
    use mneme_reflect::curator::{CurateInput, govern};
    use mneme_reflect::feedback::Directive;
    use mneme_reflect::{curator, insight, miner, signals};
    use mneme_workspace::playbook::{BODY_LIMIT, Playbook};
    use proptest::prelude::*;

    fn line() -> impl Strategy<Value = String> {
        prop_oneof![
            "[a-z ]{0,30}".prop_map(|t| format!("- {t}")),
            "[a-z ]{1,20}".prop_map(|t| format!("- Never {t}")),
            ("[a-z ]{1,20}", 0.0f64..1.0).prop_map(|(t, s)| format!("- {t} (score: {s:.1})")),
            "[a-z ]{1,20}".prop_map(|t| format!("- {t} [since: 2026-11-01]")),
            "[a-z ]{0,12}".prop_map(|t| format!("## {t}")),
            Just(String::new()),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

        /// Whatever a model says, every stage's validation parses it or refuses it with a
        /// message; nothing panics.
        #[test]
        fn any_model_text_is_parsed_or_refused_by_every_stage(raw in "(?s).{0,400}", wrap in any::<bool>()) {
            let raw = if wrap { format!("{{\"body\": {raw:?}, \"recommendedAction\": {{\"action\": \"skip\"}}, \"skip\": true, \"skipReason\": {raw:?}}}") } else { raw };
            if let Ok(v) = extract_json(&raw) {
                if let Err(e) = signals::validate(&v, false) { prop_assert!(!e.is_empty()); }
                if let Err(e) = miner::validate(&v, &["a.md".to_string()]) { prop_assert!(!e.is_empty()); }
                if let Err(e) = curator::validate(&v) { prop_assert!(!e.is_empty()); }
                if let Err(e) = insight::validate(&v, &[]) { prop_assert!(!e.is_empty()); }
            }
        }

        /// Whatever body a model proposes, the governed body keeps at most 50 lines, and
        /// every protected or high-scoring line of the old body survives unless the limit
        /// itself had to drop it.
        #[test]
        fn a_governed_body_never_exceeds_fifty_lines(old in proptest::collection::vec(line(), 0..40), proposed in proptest::collection::vec(line(), 1..120)) {
            let base = Playbook::parse(&format!("# Playbook\n{}\n", old.join("\n")));
            let stale = BTreeMap::new();
            let input = CurateInput {
                playbook: &base,
                directive: Directive::Normal,
                new_patterns: &[],
                fixable: &[],
                stale_actions: &stale,
                lessons: &[],
                scored: &[],
                today: jiff::civil::date(2026, 11, 23),
            };
            let c = govern(&input, proposed);
            prop_assert!(c.playbook.body.len() <= BODY_LIMIT);
            if c.changes.pruned.is_empty() || c.playbook.body.len() < BODY_LIMIT {
                for (heading, p) in base.patterns() {
                    if p.is_protected(heading.as_deref()) || p.score.is_some_and(|s| s >= 0.5) {
                        let kept = c.playbook.patterns().iter().any(|(_, q)| q.key() == p.key());
                        prop_assert!(kept || c.changes.pruned.contains(&p.text), "lost {:?}", p.text);
                    }
                }
            }
        }
    }
}

/// The outbound channel: a webhook and the Telegram Bot API (a loopback server acting as
/// both). The token is in the URL only: never in the log line or an error.
#[test]
fn tips_and_insights_reach_a_webhook_or_telegram_and_the_token_stays_secret() {
    let b = Bench::new();
    valid_answers(&b);
    let received: Arc<Mutex<Vec<(String, Value)>>> = Arc::default();
    let sink = received.clone();
    let app = axum::Router::new().route(
        "/{*path}",
        post(move |axum::extract::Path(path): axum::extract::Path<String>, Json(body): Json<Value>| {
            let sink = sink.clone();
            async move {
                sink.lock().expect("sink").push((path.clone(), body));
                if path.contains("bad-token") { StatusCode::UNAUTHORIZED } else { StatusCode::OK }
            }
        }),
    );
    let listener = b.rt.block_on(tokio::net::TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0)))).expect("bind");
    let addr = listener.local_addr().expect("addr");
    b.rt.spawn(async move { axum::serve(listener, app).await });

    let mut config = ReflectionConfig::default();
    config.outbound.target = mneme_reflect::config::OutboundTarget::Webhook;
    config.outbound.webhook_url = Some(format!("http://{addr}/hook"));
    let report = b.tick(&b.engine(config), true);
    assert_eq!(report.output["delivery"], json!({ "channel": "webhook", "ok": true }));
    let (path, body) = received.lock().expect("sink").remove(0);
    assert_eq!(path, "hook");
    assert_eq!(body["outputId"], report.output["outputId"]);
    assert!(body["text"].as_str().expect("text").contains(report.output["suggestion"].as_str().expect("suggestion")));

    let token_file = b.settings.dir.join("telegram.token");
    for (token, ok) in [("123:secret-token", true), ("456:bad-token", false)] {
        std::fs::write(&token_file, format!("{token}\n")).expect("token");
        let mut config = ReflectionConfig::default();
        config.outbound.target = mneme_reflect::config::OutboundTarget::Telegram;
        config.outbound.telegram_api = format!("http://{addr}");
        config.outbound.telegram_chat_id = Some("42".into());
        config.outbound.telegram_token_file = Some(token_file.clone());
        config.check().expect("valid");
        b.clock.advance(SignedDuration::from_mins(30));
        let report = b.tick(&b.engine(config), true);
        let delivery = &report.output["delivery"];
        assert_eq!(delivery["ok"], ok, "{delivery}");
        let (path, body) = received.lock().expect("sink").remove(0);
        assert_eq!(path, format!("bot{token}/sendMessage"));
        assert_eq!(body["chat_id"], "42");
        if !ok {
            assert_eq!(delivery["error"], "HTTP 401");
        }
        let logs = std::fs::read_dir(b.settings.dir.join("memory/playbook-logs")).expect("logs");
        for entry in logs {
            let text = std::fs::read_to_string(entry.expect("entry").path()).expect("log");
            assert!(!text.contains("secret-token") && !text.contains("bad-token"), "a token leaked into the log");
        }
    }
}

/// Phase 1: a workspace that is its own git repository is committed (and pushed to a
/// bare remote); a failing push is recorded and the tick still succeeds; a workspace
/// inside another repository is never committed.
#[test]
fn git_backup_commits_pushes_and_survives_a_failing_push() {
    let git = |dir: &std::path::Path, args: &[&str]| {
        let out = std::process::Command::new("git").args(args).current_dir(dir).output().expect("git");
        assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    let b = Bench::new();
    let remote = tempfile::tempdir().expect("remote");
    git(remote.path(), &["init", "-q", "--bare", "-b", "main"]);
    git(&b.settings.dir, &["init", "-q", "-b", "main"]);
    git(&b.settings.dir, &["remote", "add", "origin", remote.path().to_str().expect("utf-8")]);
    let mut config = ReflectionConfig::default();
    config.git.backup = true;
    config.git.push = true;
    let engine = Reflector::offline(config.clone());
    std::fs::write(b.settings.dir.join("state.md"), "# State\n").expect("file");
    let report = b.tick(&engine, false);
    assert_eq!(report.line["git"]["status"], "committed", "{}", report.line["git"]);
    assert_eq!(report.line["git"]["push"], "ok");
    assert_eq!(report.line["stages"]["git"]["status"], "ok");
    let subject = git(remote.path(), &["log", "-1", "--format=%s", "main"]);
    assert!(subject.starts_with("auto: heartbeat "), "{subject}");
    let tracked = git(&b.settings.dir, &["ls-files"]);
    assert!(tracked.contains("state.md") && !tracked.contains(".mneme-reflect.lock"), "{tracked}");

    // The remote goes away: the commit is made, the push fails, the tick succeeds.
    git(&b.settings.dir, &["remote", "set-url", "origin", "/nonexistent/remote.git"]);
    b.clock.advance(SignedDuration::from_mins(30));
    std::fs::write(b.settings.dir.join("state.md"), "# State\nchanged\n").expect("file");
    let report = b.tick(&engine, false);
    assert_eq!(report.status, "HEARTBEAT_OK");
    assert_eq!(report.line["git"]["status"], "committed");
    assert!(report.line["git"]["push"].as_str().expect("push").starts_with("failed: "), "{}", report.line["git"]);

    // A workspace inside a project's repository: skipped, nothing committed.
    let (_outer, nested) = crate::reflect::workspace();
    git(nested.dir.parent().expect("parent"), &["init", "-q"]);
    let report =
        tick(&engine, &b.service.owner(), &nested, b.now(), &TickOptions { idle: Some(false), ..Default::default() }).expect("tick");
    assert_eq!(report.line["git"]["status"], "skipped", "{}", report.line["git"]);
}

/// Retention: logs and playbook copies older than the window move to archive/.
#[test]
fn old_heartbeat_logs_move_to_the_archive() {
    let b = Bench::new();
    let engine = Reflector::offline(ReflectionConfig::default());
    let old = b.now() - SignedDuration::from_hours(24 * 40);
    playbook_log::append(&b.settings, old, &json!({ "kind": "feedback", "compositeScore": 0.1 })).expect("old line");
    let recent = b.now() - SignedDuration::from_hours(24 * 3);
    playbook_log::append(&b.settings, recent, &json!({ "kind": "feedback", "compositeScore": 0.1 })).expect("recent line");
    let report = b.tick(&engine, false);
    let old_day = b.settings.today(old);
    assert_eq!(report.archived, vec![std::path::PathBuf::from(format!("archive/playbook-logs/{old_day}.jsonl"))]);
    assert!(b.settings.dir.join(format!("archive/playbook-logs/{old_day}.jsonl")).is_file());
    assert!(b.settings.dir.join(format!("memory/playbook-logs/{}.jsonl", b.settings.today(recent))).is_file());
}
