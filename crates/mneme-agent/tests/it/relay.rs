//! The relay's analysis loop: the seed's context window, the rules analyzer on recorded
//! fixtures, ring bounds under concurrent writers, idle and duplicate suppression, and the
//! seed's failure behaviour against a scripted OpenAI-compatible endpoint (valid, garbage,
//! 429, slow).

use std::sync::Arc;

use jiff::{SignedDuration, Timestamp};
use mneme_relay::{
    Analyzer, ConfigChange, FEED_RING, NOTHING, NewFeed, RESULT_RING, RULES, Relay, RelayConfig, SENSE_RING, SenseEvent, TickOutcome,
};
use serde_json::{Value, json};

use crate::reflect_model::{Bench, Reply};

fn t(secs: i64) -> Timestamp {
    Timestamp::from_second(1_800_000_000 + secs).expect("time")
}

fn feed(relay: &Relay, text: &str, at: Timestamp) {
    relay.feed(NewFeed { text: text.into(), priority: None, source: None }, at).expect("feed");
}

fn sense(relay: &Relay, event: Value, at: Timestamp) {
    relay.sense(serde_json::from_value::<SenseEvent>(event).expect("event"), at).expect("sense");
}

fn rules_relay() -> Relay {
    Relay::new(RelayConfig::default(), None)
}

fn block<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime").block_on(f)
}

fn analysed(outcome: TickOutcome) -> mneme_relay::AnalysisResult {
    match outcome {
        TickOutcome::Analysed { result } => result,
        other => panic!("expected an analysis, got {other:?}"),
    }
}

/// The window as the seed builds it: the cutoff, transcript lines stripped of their
/// speaker tag, app names, consecutive identical OCR dropped but app switches kept, the
/// last 5 audio chunks and 10 screen events.
#[test]
fn the_context_window_is_built_as_the_seed_builds_it() {
    let relay = rules_relay();
    feed(&relay, "[PERIODIC] (normal)\n[9s ago, openrouter] too old to matter", t(0));
    sense(&relay, json!({ "type": "text", "ocr": "stale", "meta": { "app": "Old" } }), t(0));
    let now = t(200);
    for i in 0..7 {
        feed(&relay, &format!("[PERIODIC] (normal)\nContext (1 entries):\n[{i}s ago, openrouter] chunk {i}"), now);
    }
    feed(&relay, "Deploy finished", now);
    sense(&relay, json!({ "type": "text", "ocr": "same text", "meta": { "app": "Chrome", "ssim": 0.9 } }), now);
    sense(&relay, json!({ "type": "text", "ocr": "same text", "meta": { "app": "Chrome" } }), now);
    sense(&relay, json!({ "type": "context", "meta": { "app": "IntelliJ IDEA" } }), now);
    sense(&relay, json!({ "type": "text", "meta": {} }), now);
    let w = relay.context(now);
    assert_eq!(w.audio_count, 7, "the old chunk is out, the plain message is not audio");
    let audio: Vec<&str> = w.audio.iter().map(|a| a.text.as_str()).collect();
    assert_eq!(audio, ["chunk 2", "chunk 3", "chunk 4", "chunk 5", "chunk 6"]);
    assert_eq!(w.screen_count, 4);
    let screen: Vec<(&str, &str, &str)> = w.screen.iter().map(|s| (s.kind.as_str(), s.app.as_str(), s.ocr.as_str())).collect();
    assert_eq!(screen, [("text", "Chrome", "same text"), ("context", "IntelliJ IDEA", "")], "duplicate OCR dropped, switch kept");
    assert_eq!(w.current_app, "unknown", "the newest event has no app");
    assert_eq!(w.window_ms, 120_000);
    let prompt = mneme_relay::prompt(&w);
    assert!(prompt.starts_with("You are Sinain, an AI monitoring a user's screen and audio in real-time.\n\nActive app: unknown\n"));
    assert!(prompt.contains(
        "Screen activity (OCR, newest last):\n[Chrome] same text\n[IntelliJ IDEA] \n\nAudio (transcript, newest last):\nchunk 2\n"
    ));
    assert!(prompt.ends_with("- If nothing interesting, respond with just \"—\"."));
    let empty = rules_relay().context(now);
    let prompt = mneme_relay::prompt(&empty);
    assert!(prompt.contains("(no screen data)") && prompt.contains("(silence)"));
}

/// The rules analyzer on recorded situations (`tests/fixtures/relay_rules.jsonl`).
#[test]
fn the_rules_analyzer_on_recorded_fixtures() {
    let now = t(0);
    let mut failures = Vec::new();
    for line in include_str!("../fixtures/relay_rules.jsonl").lines().filter(|l| !l.trim().is_empty()) {
        let case: Value = serde_json::from_str(line).expect("fixture line");
        let relay = rules_relay();
        for text in case["feed"].as_array().expect("feed") {
            feed(&relay, text.as_str().expect("text"), now);
        }
        for event in case["sense"].as_array().expect("sense") {
            sense(&relay, event.clone(), now);
        }
        let result = analysed(block(relay.tick(now)));
        assert_eq!(result.model, RULES);
        if result.analysis != case["expect"].as_str().expect("expect") {
            failures.push(format!("{}: got {:?}, expected {:?}", case["name"], result.analysis, case["expect"]));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Bounded rings under concurrent writers; idle ticks make no call; "—" and repeats are
/// not pushed; the agent's own push is not news; private blocks never enter.
#[test]
fn rings_stay_bounded_and_ticks_suppress_idle_empty_and_repeated_analyses() {
    let relay = Arc::new(rules_relay());
    let threads: Vec<_> = (0..4)
        .map(|n| {
            let relay = relay.clone();
            std::thread::spawn(move || {
                for i in 0..100 {
                    feed(&relay, &format!("message {n}/{i}"), t(0));
                    sense(&relay, json!({ "type": "text", "ocr": format!("screen {n}/{i}") }), t(0));
                }
            })
        })
        .collect();
    for th in threads {
        th.join().expect("writer");
    }
    let all = relay.feed_after(0);
    assert_eq!(all.len(), FEED_RING);
    assert_eq!(all.last().map(|i| i.id), Some(400), "every id handed out once");
    assert!(all.windows(2).all(|w| w[0].id + 1 == w[1].id));
    assert_eq!(relay.health()["senseEvents"], SENSE_RING);

    let relay = rules_relay();
    let now = t(10);
    assert_eq!(block(relay.tick(now)), TickOutcome::Idle, "nothing posted yet");
    sense(
        &relay,
        json!({ "type": "text", "ocr": "TypeError: x is undefined <private>token=abc</private>", "meta": { "app": "Code" } }),
        now,
    );
    assert!(!serde_json::to_string(&relay.context(now)).expect("json").contains("token=abc"));
    let first = analysed(block(relay.tick(now)));
    assert!(first.pushed && first.analysis.starts_with("Error in Code: TypeError"), "{first:?}");
    assert_eq!(
        relay.feed_after(0).last().map(|i| (i.text.starts_with("[🧠] Error in Code"), i.source.clone())),
        Some((true, Some("agent".into())))
    );
    assert_eq!(block(relay.tick(now)), TickOutcome::Idle, "its own push is not news");
    sense(&relay, json!({ "type": "text", "ocr": "TypeError: x is undefined", "meta": { "app": "Code" } }), now);
    let again = analysed(block(relay.tick(now)));
    assert_eq!(again.analysis, first.analysis);
    assert!(!again.pushed, "the same analysis is not pushed twice");
    sense(&relay, json!({ "type": "text", "ocr": "Inbox", "meta": { "app": "Mail" } }), t(1_000));
    let later = analysed(block(relay.tick(t(1_000))));
    assert_eq!((later.analysis.as_str(), later.pushed), (NOTHING, false), "a dash is logged, never pushed");
    for i in 0..60 {
        sense(&relay, json!({ "type": "text", "ocr": format!("page {i}") }), t(2_000 + i));
        block(relay.tick(t(2_000 + i)));
    }
    assert_eq!(relay.history(500).len(), RESULT_RING);
    assert_eq!(relay.history(0).len(), 1);
    assert_eq!(relay.history(500)[0].id, 63, "newest first");
    assert!(relay.feed(NewFeed { text: "<private>only secret</private>".into(), priority: None, source: None }, now).is_err());
    assert!(
        relay
            .feed(NewFeed { text: "x".into(), priority: Some("loud".into()), source: None }, now)
            .expect_err("priority")
            .contains("priority")
    );
}

/// `/agent/config` changes the loop at run time, validated as a whole; "llm" without an
/// endpoint starts disabled with a warning.
#[test]
fn the_config_changes_at_run_time_and_is_validated() {
    let relay = rules_relay();
    let c = relay.configure(ConfigChange { interval_ms: Some(2_000), push_to_feed: Some(false), ..Default::default() }).expect("ok");
    assert_eq!((c.interval_ms, c.push_to_feed, c.model.as_str(), c.analyzer), (2_000, false, RULES, RULES));
    assert_eq!(relay.next_wait(), std::time::Duration::from_secs(2));
    let bad = ConfigChange { interval_ms: Some(5), enabled: Some(false), ..Default::default() };
    assert!(relay.configure(bad).expect_err("too fast").contains("intervalMs 5"));
    assert!(relay.runtime_config().enabled, "a refused change applies nothing");
    assert!(
        relay.configure(ConfigChange { model: Some("gpt-4o".into()), ..Default::default() }).expect_err("no endpoint").contains("rules")
    );
    assert!(relay.configure(ConfigChange { temperature: Some(3.0), ..Default::default() }).is_err());

    let llm_only = Relay::new(RelayConfig { analyzer: Analyzer::Llm, ..RelayConfig::default() }, None);
    assert!(!llm_only.runtime_config().enabled);
    assert!(llm_only.warning().is_some_and(|w| w.contains("starts disabled")));
    assert_eq!(llm_only.health()["agent"]["warning"], llm_only.warning().expect("warning"));
    assert_eq!(block(llm_only.tick(t(0))), TickOutcome::Disabled);
    assert!(RelayConfig { interval: mneme_core::Span::millis(5), ..RelayConfig::default() }.validate().is_err());
}

/// With a model: the seed's prompt as one user message with max_tokens 100 and
/// temperature 0.3; the answer pushed and counted (tokens, cost); garbage becomes "—"; a
/// 429 doubles the interval until a success; a slow model skips the tick.
#[test]
fn with_a_model_the_seed_flow_and_its_failures() {
    let b = Bench::new();
    let config = RelayConfig { price_in_per_mtok: 0.1, price_out_per_mtok: 0.4, ..RelayConfig::default() };
    let relay = Relay::new(config, Some(b.llm()));
    assert_eq!(relay.runtime_config().analyzer, "llm");
    let mut now = t(0);
    let post = |relay: &Relay, now: Timestamp, ocr: &str| {
        sense(relay, json!({ "type": "text", "ts": 1, "ocr": ocr, "meta": { "app": "VS Code", "ssim": 0.85 } }), now)
    };
    post(&relay, now, "function main() { throw new Error(\"null ref\") }");
    feed(&relay, "[PERIODIC] (normal)\nContext (1 entries):\n[1s ago, openrouter] So the key insight with Laplace transforms is...", now);
    b.script("relay", Reply::Ok("Debugging a null ref in VS Code. Audio: Laplace transforms lecture.".into()));
    let result = analysed(b.block_on(relay.tick(now)));
    assert_eq!(result.analysis, "Debugging a null ref in VS Code. Audio: Laplace transforms lecture.");
    assert!(result.pushed);
    assert_eq!((result.tokens_in, result.tokens_out, result.model.as_str()), (120, 30, "default"));
    let seen = b.seen();
    let (_, request) = seen.last().expect("called");
    assert_eq!(request["messages"].as_array().map(Vec::len), Some(1), "one user message, as the seed sends it");
    assert_eq!(request["messages"][0]["role"], "user");
    assert!(request["messages"][0]["content"].as_str().unwrap_or_default().contains("[VS Code] function main()"));
    assert_eq!((request["max_tokens"].as_u64(), request["temperature"].as_f64()), (Some(100), Some(0.3)));
    let health = relay.health();
    assert_eq!((health["agent"]["totalCalls"].as_u64(), health["agent"]["totalTokens"]["in"].as_u64()), (Some(1), Some(120)));
    assert!((health["agent"]["estimatedCost"].as_f64().expect("cost") - (120.0 * 0.1 + 30.0 * 0.4) / 1e6).abs() < 1e-12);

    // Garbage is a dash: stored, not pushed.
    now += SignedDuration::from_secs(10);
    post(&relay, now, "new screen");
    b.script("relay", Reply::Ok("  {} ... ".into()));
    let garbage = analysed(b.block_on(relay.tick(now)));
    assert_eq!((garbage.analysis.as_str(), garbage.pushed), (NOTHING, false));

    // 429: the tick is skipped and the interval doubles, twice; a success resets it.
    for expected in [20, 40] {
        now += SignedDuration::from_secs(10);
        post(&relay, now, &format!("screen {expected}"));
        b.script("relay", Reply::Status(429));
        let outcome = b.block_on(relay.tick(now));
        assert!(matches!(&outcome, TickOutcome::Skipped { reason } if reason.contains("HTTP 429")), "{outcome:?}");
        assert_eq!(relay.next_wait(), std::time::Duration::from_secs(expected));
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert_eq!(relay.health()["agent"]["intervalMs"], 40_000);
    // The failed ticks' events are retried: no new event, yet the next tick calls.
    now += SignedDuration::from_secs(10);
    b.script("relay", Reply::Ok("Back to editing.".into()));
    assert_eq!(analysed(b.block_on(relay.tick(now))).analysis, "Back to editing.");
    assert_eq!(relay.next_wait(), std::time::Duration::from_secs(10));

    // A model slower than the client's timeout: the tick is skipped, nothing stored.
    now += SignedDuration::from_secs(10);
    post(&relay, now, "slow");
    b.script("relay", Reply::Slow(std::time::Duration::from_secs(4), "too late".into()));
    let before = relay.history(50).len();
    assert!(matches!(b.block_on(relay.tick(now)), TickOutcome::Skipped { .. }));
    assert_eq!(relay.history(50).len(), before);
    assert!(relay.health()["agent"]["failures"].as_u64() >= Some(3));
}
