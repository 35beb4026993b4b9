use jiff::{SignedDuration, Timestamp};
use mneme_core::{MemoryType, RankWeights, Scope, Sensitivity};
use mneme_service::{Access, IngestOptions, RetrieveRequest, ServiceConfig};

use mneme_core::{Clock as _, Payload};

use crate::{Fixture, event, fact, owner, who};

fn ids(hits: &[mneme_service::Hit]) -> Vec<String> {
    hits.iter().map(|h| h.record.summary.clone()).collect()
}

fn with(sensitivity: Sensitivity, scope: &str) -> IngestOptions {
    IngestOptions { sensitivity: Some(sensitivity), scope: Some(Scope::parse(scope).expect("scope")), ..Default::default() }
}

fn the_callers_ceiling_and_scopes_hold_even_when_the_request_asks_for_more() {
    let fx = Fixture::new();
    let s = |s, o| fx.service.ingest_observation(fact("password", "of", o), with(s, "")).expect("ingest").summary;
    let public = s(Sensitivity::Public, "wifi");
    s(Sensitivity::High, "bank");
    s(Sensitivity::Critical, "vault");
    let mine =
        fx.service.ingest_observation(fact("password", "of", "atlas laptop"), with(Sensitivity::Low, "agent:atlas")).expect("i").summary;
    fx.service.ingest_observation(fact("password", "of", "zeus laptop"), with(Sensitivity::Low, "agent:zeus")).expect("i");

    let atlas = Access { max_sensitivity: Sensitivity::Medium, scopes: Some(vec![Scope::parse("agent:atlas").expect("scope")]) };
    let greedy = RetrieveRequest {
        query: "password".into(),
        max_sensitivity: Some(Sensitivity::Critical),
        scopes: Some(vec![Scope::parse("agent:zeus").expect("s"), Scope::parse("agent:atlas").expect("s")]),
        limit: 100,
        ..Default::default()
    };
    let mut got = ids(&fx.service.retrieve(&greedy, &atlas).expect("retrieve"));
    got.sort();
    let mut want = vec![public.clone(), mine];
    want.sort();
    assert_eq!(got, want, "global + own scope, at most medium");
    // Without a ceiling in the request, the configured default (medium) applies even for the owner.
    let default =
        fx.service.retrieve(&RetrieveRequest { query: "password".into(), limit: 100, ..Default::default() }, &owner()).expect("r");
    assert!(default.iter().all(|h| h.record.sensitivity <= Sensitivity::Medium));
    assert_eq!(default.len(), 3);
    let everything = RetrieveRequest { max_sensitivity: Some(Sensitivity::Critical), ..greedy };
    assert_eq!(fx.service.retrieve(&everything, &owner()).expect("r").len(), 5, "zeus + atlas + 3 global");
}

fn fts_syntax_in_a_query_is_plain_text() {
    let fx = Fixture::new();
    fx.service.ingest_event(event("the secret summary is here"), IngestOptions::default()).expect("ingest");
    fx.service.ingest_event(event("nothing to see"), IngestOptions::default()).expect("ingest");
    for query in [
        "\"",
        "\"\"\"",
        "summary:secret",
        "secret*",
        "NEAR(secret summary)",
        "secret AND",
        "OR",
        "NOT secret",
        "^secret",
        "{summary body}: secret",
        "'); DROP TABLE records; --",
        "secret\0summary",
        "(((",
        "-secret",
        "s\u{301}ecret ✓ 秘密",
        "+",
        "col:",
        "* OR *",
    ] {
        let hits = fx.service.retrieve(&RetrieveRequest { query: query.into(), ..Default::default() }, &owner());
        assert!(hits.is_ok(), "{query:?} failed: {:?}", hits.err());
    }
    // "summary:secret" is two words, not a column filter that would hide body matches.
    let hits = fx.service.retrieve(&RetrieveRequest { query: "summary:secret".into(), ..Default::default() }, &owner()).expect("r");
    assert_eq!(hits.len(), 1);
    assert_eq!(fx.service.metrics().expect("metrics").total_records, 2, "nothing was injected");
}

fn an_empty_query_ranks_exactly_like_a_naive_scan_of_every_record() {
    let fx = Fixture::new();
    // A spread of types, ages, saliences and event times.
    for i in 0..120u32 {
        let salience = f64::from(i % 10) / 10.0 + 0.05;
        let options = IngestOptions { salience: Some(salience), pinned: i % 37 == 0, ..Default::default() };
        if i % 3 == 0 {
            let mut e = event(&format!("event {i}"));
            e.event_time = Some(Timestamp::from_second(1_800_000_000 - i64::from(i) * 3600 * 7).expect("t"));
            fx.service.ingest_event(e, options).expect("i");
        } else {
            fx.service.ingest_observation(fact(&format!("s{i}"), "p", "o"), options).expect("i");
        }
        fx.clock.advance(SignedDuration::from_hours(5));
    }
    fx.advance_days(3);
    let weights = RankWeights::default();
    let now = fx.service.now();
    let all = fx.service.retrieve(&RetrieveRequest { limit: 1000, ..Default::default() }, &owner()).expect("all");
    assert_eq!(all.len(), 120);
    let mut oracle: Vec<(f64, String)> = all
        .iter()
        .map(|h| {
            let r = &h.record;
            let salience = fx.service.config().decay.salience_at(r.memory_type, &r.salience, now);
            let recency = weights.recency_of(r.memory_type, r.salience.pinned, r.event_time.unwrap_or(r.created_at), now);
            (weights.blend(None, salience, recency), r.id.to_string())
        })
        .collect();
    oracle.sort_by(|a, b| b.0.total_cmp(&a.0).then(b.1.cmp(&a.1)));
    for limit in [1, 5, 10, 33] {
        let got = fx.service.retrieve(&RetrieveRequest { limit, ..Default::default() }, &owner()).expect("top");
        let got_scores: Vec<f64> = got.iter().map(|h| h.score.score).collect();
        let want_scores: Vec<f64> = oracle.iter().take(limit).map(|o| o.0).collect();
        assert_eq!(got_scores.len(), want_scores.len());
        for (g, w) in got_scores.iter().zip(&want_scores) {
            assert!((g - w).abs() < 1e-12, "limit {limit}: got {got_scores:?} want {want_scores:?}");
        }
    }
}

fn filters_by_type_tags_time_and_minimum_salience() {
    let fx = Fixture::new();
    let tagged = |text: &str, tags: &[&str], salience: f64| {
        fx.service
            .ingest_event(
                event(text),
                IngestOptions { tags: tags.iter().map(|t| t.to_string()).collect(), salience: Some(salience), ..Default::default() },
            )
            .expect("ingest")
    };
    let both = tagged("deploy notes alpha", &["infra", "prod"], 0.9);
    tagged("deploy notes beta", &["infra"], 0.9);
    let low = tagged("deploy notes gamma", &["infra", "prod"], 0.2);
    fx.advance_days(10);
    let late = tagged("deploy notes delta", &["infra", "prod"], 0.9);
    fx.fact("deploy", "notes", "epsilon");

    let q = |req: RetrieveRequest| {
        let mut got: Vec<String> =
            fx.service.retrieve(&req, &owner()).expect("retrieve").into_iter().map(|h| h.record.id.to_string()).collect();
        got.sort();
        got
    };
    let base = RetrieveRequest { query: "deploy notes".into(), types: vec![MemoryType::Episodic], limit: 50, ..Default::default() };
    let mut want = vec![both.id.to_string(), low.id.to_string(), late.id.to_string()];
    want.sort();
    assert_eq!(q(RetrieveRequest { tags: vec!["prod".into(), "infra".into()], ..base.clone() }), want, "all tags required");
    assert_eq!(q(RetrieveRequest { since: Some(late.created_at), ..base.clone() }), vec![late.id.to_string()]);
    assert_eq!(q(RetrieveRequest { until: Some(both.created_at), tags: vec!["prod".into()], ..base.clone() }).len(), 2);
    let strong = q(RetrieveRequest { min_salience: Some(0.5), tags: vec!["prod".into()], ..base.clone() });
    assert_eq!(strong, vec![late.id.to_string()], "the 10-day-old episodes decayed below 0.5");
    assert_eq!(q(RetrieveRequest { types: vec![MemoryType::Semantic], ..base }).len(), 1);
}

/// A long query (a pasted paragraph) probes each word less deep, so a word in 80 records
/// (under the cap of 100) is frequent for a 12-word query: the rare word's record still
/// comes first, and the pool still fills from the probed matches.
fn a_long_querys_words_share_one_probe_budget() {
    for fx in [capped(), Fixture::new()] {
        let kettle = fx.event("docker kettle descaled").summary;
        filler(&fx, 80, "docker deploy");
        let query = "docker deploy kettle alpha bravo charlie delta echo foxtrot golf hotel india";
        let got = ask(&fx, query);
        assert_eq!(got[0], kettle, "{got:?}");
        assert_eq!(got.len(), 5, "{got:?}");
    }
}

// BM25's own shape (SQLite only): PostgreSQL ranks with IDF-weighted `ts_rank`.
#[test]
fn ranking_weights_come_from_the_configuration() {
    let config: ServiceConfig =
        ServiceConfig::from_toml("[retrieval]\nrelevance = 0.0\nsalience = 1.0\nrecency = 0.0\n", "test.toml").expect("config");
    let fx = Fixture::with_config(config);
    let strong_match =
        fx.service.ingest_event(event("kettle kettle kettle"), IngestOptions { salience: Some(0.2), ..Default::default() }).expect("i");
    let weak_match = fx
        .service
        .ingest_event(event("kettle and a lot of other words here"), IngestOptions { salience: Some(0.9), ..Default::default() })
        .expect("i");
    let hits = fx.service.retrieve(&RetrieveRequest { query: "kettle".into(), ..Default::default() }, &owner()).expect("r");
    assert_eq!(hits.iter().map(|h| h.record.id.clone()).collect::<Vec<_>>(), vec![weak_match.id.clone(), strong_match.id.clone()]);

    let fx = Fixture::new();
    let strong_match =
        fx.service.ingest_event(event("kettle kettle kettle"), IngestOptions { salience: Some(0.2), ..Default::default() }).expect("i");
    fx.service
        .ingest_event(event("kettle and a lot of other words here"), IngestOptions { salience: Some(0.9), ..Default::default() })
        .expect("i");
    let hits = fx.service.retrieve(&RetrieveRequest { query: "kettle".into(), ..Default::default() }, &owner()).expect("r");
    assert_eq!(hits[0].record.id, strong_match.id, "by default relevance dominates");
}

fn bad_configuration_names_the_key() {
    for (toml, key) in [
        ("[retrieval]\nrelevance = -1.0\n", "retrieval.relevance"),
        ("[decay]\nprune_threshold = 2.0\n", "decay.prune_threshold"),
        ("[decay]\nbogus = 1\n", "bogus"),
        ("[access]\ndefault_max_sensitivity = \"secret\"\n", "default_max_sensitivity"),
        ("[retrieval]\nmax_term_matches = 99\n", "retrieval.max_term_matches"),
        ("[retrieval]\nmax_term_matches = 2000000\n", "retrieval.max_term_matches"),
    ] {
        let err = ServiceConfig::from_toml(toml, "cfg.toml").expect_err("invalid").to_string();
        assert!(err.contains(key) && err.contains("cfg.toml"), "{toml}: {err}");
    }
    for cap in [0, 100, 1_000_000] {
        ServiceConfig::from_toml(&format!("[retrieval]\nmax_term_matches = {cap}\n"), "cfg.toml").expect("valid cap");
    }
}

fn bad_queries_are_refused_with_the_field_named() {
    let fx = Fixture::new();
    let long = "word ".repeat(2000);
    for (req, field) in [
        (RetrieveRequest { query: long, ..Default::default() }, "query"),
        (RetrieveRequest { limit: 0, ..Default::default() }, "limit"),
        (RetrieveRequest { limit: 100_000, ..Default::default() }, "limit"),
        (RetrieveRequest { min_salience: Some(f64::NAN), ..Default::default() }, "min salience"),
    ] {
        let err = fx.service.retrieve(&req, &owner()).expect_err("refused").to_string();
        assert!(err.contains(field), "{err}");
    }
}

fn among_pinned_records_the_most_salient_comes_first() {
    let fx = Fixture::new();
    let mut strongest = None;
    for i in 0..40 {
        let base = if i == 35 { 1.0 } else { 0.2 };
        let r = fx
            .service
            .ingest_observation(
                fact(&format!("s{i}"), "p", "o"),
                IngestOptions { salience: Some(base), pinned: true, ..Default::default() },
            )
            .expect("ingest");
        if i == 35 {
            strongest = Some(r.id);
        }
    }
    let top = fx.service.retrieve(&RetrieveRequest { limit: 1, ..Default::default() }, &owner()).expect("retrieve");
    assert_eq!(Some(top[0].record.id.clone()), strongest);
}

/// Ingests `(thread, sender, text)` turns as events; returns their summaries in order.
fn turns(fx: &Fixture, turns: &[(&str, &str, &str)]) -> Vec<String> {
    turns.iter().map(|t| turn(fx, *t, IngestOptions::default())).collect()
}

fn turn(fx: &Fixture, (thread, sender, text): (&str, &str, &str), options: IngestOptions) -> String {
    let e = mneme_core::EventPayload {
        event_kind: "message".into(),
        reference: Some(thread.into()),
        sender: Some(sender.into()),
        text: text.into(),
        event_time: None,
    };
    fx.service.ingest_event(e, options).expect("ingest").summary
}

fn ask(fx: &Fixture, query: &str) -> Vec<String> {
    ids(&hits(fx, query))
}

fn hits(fx: &Fixture, query: &str) -> Vec<mneme_service::Hit> {
    let request = RetrieveRequest { query: query.into(), limit: 5, ..Default::default() };
    fx.service.retrieve(&request, &owner()).expect("retrieve")
}

fn the_answer_turn_is_found_through_its_question_and_the_weights_come_from_config() {
    let conversation = [
        ("s1", "ana", "What causes are you volunteering for these days?"),
        ("s1", "bo", "Mostly animal shelters and a literacy program downtown."),
        ("s1", "ana", "That sounds great."),
        ("s2", "ana", "Did you watch the match?"),
        ("s2", "bo", "Yes, what a finish."),
    ];
    let fx = Fixture::new();
    let t = turns(&fx, &conversation);
    // The answer shares no word with the query: it is found through its thread context
    // (the question before it) and inherits part of the question's relevance.
    let found = hits(&fx, "which causes is she volunteering for");
    assert!(ids(&found)[..2].contains(&t[1]), "{:?}", ids(&found));
    let answer = found.iter().find(|h| h.record.summary == t[1]).expect("answer");
    assert!(answer.score.neighbour.is_some_and(|n| n > 0.0), "{:?}", answer.score);

    // Both mechanisms off: the answer has no way in.
    let mut config = ServiceConfig::default();
    config.retrieval.context_weight = 0.0;
    config.retrieval.neighbour_share = 0.0;
    let plain = Fixture::with_config(config);
    let t = turns(&plain, &conversation);
    assert_eq!(ask(&plain, "which causes is she volunteering for"), [t[0].clone()]);
}

fn a_pruned_turn_leaves_its_neighbours_context() {
    let fx = Fixture::new();
    let secret = turn(&fx, ("s1", "ana", "The vault code is zebra"), IngestOptions::default());
    let pinned = IngestOptions { pinned: true, ..Default::default() };
    let reply = turn(&fx, ("s1", "bo", "Noted, thanks."), pinned);
    assert_eq!(ask(&fx, "zebra"), [secret.clone(), reply.clone()], "the reply matches through its context");
    fx.advance_days(90);
    let report = fx.service.prune(None, false, "test").expect("prune");
    assert_eq!(report.pruned.len(), 1, "{report:?}");
    assert!(ask(&fx, "zebra").is_empty(), "neither the pruned turn nor its neighbour's context still match");
}

fn a_sender_named_in_the_query_is_boosted() {
    let conversation = [("s1", "bo", "I like hiking in the hills"), ("s2", "ana", "I like hiking in the hills")];
    let fx = Fixture::new();
    turns(&fx, &conversation);
    let found = hits(&fx, "what does bo like about hiking");
    let boost = |sender: &str| found.iter().find(|h| h.record.summary.starts_with(sender)).expect("hit").score.speaker;
    assert_eq!((boost("bo:"), boost("ana:")), (Some(0.2), None));
    assert!(found[0].record.summary.starts_with("bo:"));
    let mut config = ServiceConfig::default();
    config.retrieval.speaker_boost = 0.0;
    let plain = Fixture::with_config(config);
    turns(&plain, &conversation);
    assert!(hits(&plain, "what does bo like about hiking").iter().all(|h| h.score.speaker.is_none()));
}

fn a_neighbours_context_never_reveals_a_more_sensitive_turn() {
    let fx = Fixture::new();
    turn(&fx, ("s1", "ana", "What is the vault code?"), with(Sensitivity::Low, ""));
    turn(&fx, ("s1", "bo", "It is zebra"), with(Sensitivity::Critical, ""));
    let limited = Access { max_sensitivity: Sensitivity::Medium, scopes: None };
    let request = RetrieveRequest { query: "zebra".into(), limit: 5, max_sensitivity: Some(Sensitivity::Critical), ..Default::default() };
    assert!(fx.service.retrieve(&request, &limited).expect("retrieve").is_empty(), "the low turn must not match the critical word");
    let hits = fx.service.retrieve(&request, &owner()).expect("retrieve");
    assert_eq!(hits[0].record.summary, "bo: It is zebra", "the owner finds it");
}

/// A service whose per-word cap is the smallest allowed (100), so a word in 150 records
/// is frequent.
fn capped() -> Fixture {
    let config = ServiceConfig::from_toml("[retrieval]\nmax_term_matches = 100\n", "test.toml").expect("config");
    Fixture::with_config(config)
}

/// `n` events that all hold `words`, each with a distinct filler word.
fn filler(fx: &Fixture, n: usize, words: &str) {
    let batch = (0..n).map(|i| (Payload::Event(event(&format!("{words} filler{i}"))), IngestOptions::default())).collect();
    fx.service.ingest_batch(batch).expect("ingest");
}

fn a_rare_word_beats_records_holding_only_frequent_words() {
    for fx in [capped(), Fixture::new()] {
        let kettle = fx.event("docker kettle descaled").summary;
        filler(&fx, 150, "docker deploy");
        let got = ask(&fx, "docker deploy kettle");
        assert_eq!(got[0], kettle, "{got:?}");
        assert_eq!(got.len(), 5);
    }
}

// BM25's own shape (SQLite only): PostgreSQL ranks with IDF-weighted `ts_rank`.
#[test]
fn an_all_frequent_query_returns_the_newest_visible_matches_and_more_words_first() {
    let fx = capped();
    let both = fx.event("docker deploy together").summary;
    filler(&fx, 150, "docker");
    let newest_visible: Vec<String> = (0..3).map(|i| fx.event(&format!("docker newest {i}")).summary).collect();
    // Newer still, but hidden from the caller: too sensitive, another agent's scope, retracted.
    fx.service.ingest_event(event("docker secret"), with(Sensitivity::High, "")).expect("ingest");
    fx.service.ingest_event(event("docker zeus"), with(Sensitivity::Low, "agent:zeus")).expect("ingest");
    let retracted = fx.service.ingest_observation(fact("docker", "runs", "retracted"), IngestOptions::default()).expect("ingest");
    fx.service.retract(&retracted.id, who("wrong"), &owner()).expect("retract");

    let atlas = Access { max_sensitivity: Sensitivity::Medium, scopes: Some(vec![Scope::parse("agent:atlas").expect("scope")]) };
    let request = RetrieveRequest { query: "docker deploy".into(), limit: 4, ..Default::default() };
    let got = ids(&fx.service.retrieve(&request, &atlas).expect("retrieve"));
    let mut want = vec![both];
    want.extend(newest_visible.iter().rev().cloned());
    assert_eq!(got, want, "the record with both words, then the newest visible ones");

    let tombstones = RetrieveRequest { query: "docker".into(), limit: 1, include_tombstones: true, ..Default::default() };
    let got = fx.service.retrieve(&tombstones, &atlas).expect("retrieve");
    assert_eq!(got[0].record.id, retracted.id, "asked for, a tombstone is a match like any other");
}

fn below_the_cap_ranking_is_unchanged() {
    let (capped, uncapped) = (capped(), Fixture::new());
    for fx in [&capped, &uncapped] {
        for i in 0..60 {
            fx.event(&format!("kettle {} descaled {}", "tea ".repeat(i % 7), i % 5));
        }
    }
    let scores = |fx: &Fixture| -> Vec<(String, Option<f64>)> {
        let request = RetrieveRequest { query: "kettle descaled tea 3".into(), limit: 20, ..Default::default() };
        fx.service.retrieve(&request, &owner()).expect("retrieve").into_iter().map(|h| (h.record.summary, h.score.bm25)).collect()
    };
    assert_eq!(scores(&capped), scores(&uncapped));
}

/// For a question about the present, the newer of two statements with the same words wins;
/// a question about the past gets no such term; a live fact of the slot a question asks
/// about comes first however few words it shares with it, and a superseded one never does.
fn the_present_favours_the_newer_statement_and_slot_facts_come_first() {
    let fx = Fixture::new();
    let said = |text: &str, days_ago: i64| {
        let mut e = event(text);
        e.event_time = Some(fx.clock.now() - SignedDuration::from_hours(24 * days_ago));
        fx.service.ingest_event(e, IngestOptions::default()).expect("ingest").summary
    };
    // The older statement is the shorter one: BM25 favours it on the shared words.
    let old = said("we live in Lisbon", 90);
    let new = said("we live in Munich now with the kids", 2);
    let ask =
        |q: &str| fx.service.retrieve(&RetrieveRequest { query: q.into(), limit: 5, ..Default::default() }, &owner()).expect("retrieve");
    let now = ask("where do we live");
    assert_eq!(now[0].record.summary, new, "{:?}", ids(&now));
    assert!(now[0].score.present.is_some_and(|p| p > 0.0));
    let before = ask("where did we live before");
    assert!(before.iter().all(|h| h.score.present.is_none()), "no present term for the past");
    let mut off = ServiceConfig::default();
    off.retrieval.present_boost = 0.0;
    let fx0 = Fixture::with_config(off);
    let mut e = event("we live in Lisbon");
    e.event_time = Some(fx0.clock.now() - SignedDuration::from_hours(24 * 90));
    fx0.service.ingest_event(e, IngestOptions::default()).expect("ingest");
    let mut e = event("we live in Munich now with the kids");
    e.event_time = Some(fx0.clock.now() - SignedDuration::from_hours(48));
    fx0.service.ingest_event(e, IngestOptions::default()).expect("ingest");
    let hits =
        fx0.service.retrieve(&RetrieveRequest { query: "where do we live".into(), limit: 5, ..Default::default() }, &owner()).expect("r");
    // (The baseline is BM25's: PostgreSQL's length-normalised rank may already prefer the
    // newer statement, and the present term's effect is checked above on both engines.)
    if crate::engine() == crate::Engine::Sqlite {
        assert_eq!(hits[0].record.summary, old, "without the term BM25 alone prefers the shorter, older statement");
    }

    // A slot fact: tagged by the conversation extractor; its words barely overlap the question.
    let tagged = |_: &str| IngestOptions { tags: vec!["slot:city".into(), "about:user".into()], ..Default::default() };
    let lisbon = fx.service.ingest_observation(fact("Dana", "lives in", "Lisbon"), tagged("Lisbon")).expect("fact");
    let change = mneme_service::Revision { payload: Some(Payload::Semantic(fact("Dana", "lives in", "Munich"))), ..Default::default() };
    fx.service.supersede(&lisbon.id, change, who("moved"), &owner()).expect("supersede");
    let hits = ask("Which city is Dana's home these days?");
    assert_eq!(hits[0].record.summary, "Dana lives in Munich", "{:?}", ids(&hits));
    assert_eq!(hits[0].score.slot, Some(1.0));
    assert!(!hits.iter().any(|h| h.record.summary == "Dana lives in Lisbon"), "superseded facts are not retrieved");
}

/// The retention policy erases a type's records older than the age (by their event's
/// time) as forget does, leaving tombstones; newer records and other types stay.
fn retention_erases_old_records_of_a_type_and_nothing_else() {
    let fx = Fixture::new();
    let said = |text: &str, days_ago: i64| {
        let mut e = event(text);
        e.event_time = Some(fx.clock.now() - SignedDuration::from_hours(24 * days_ago));
        fx.service.ingest_event(e, IngestOptions::default()).expect("ingest")
    };
    let old = said("the old flat on Rua Augusta", 400);
    let recent = said("the new flat near the river", 10);
    let fact = fx.fact("Dana", "lives near", "the river");
    let cutoff = fx.clock.now() - SignedDuration::from_hours(24 * 365);
    assert_eq!(fx.service.forget_older_than(MemoryType::Episodic, cutoff, "test").expect("retention"), 1);
    let gone = fx.service.get(&old.id, &owner()).expect("tombstone");
    assert!(gone.forgotten_at.is_some() && gone.payload.is_none() && !gone.summary.contains("Augusta"), "{gone:?}");
    assert!(fx.service.get(&recent.id, &owner()).expect("recent").payload.is_some());
    assert!(fx.service.get(&fact.id, &owner()).expect("fact").payload.is_some());
    // Idempotent: nothing left to erase.
    assert_eq!(fx.service.forget_older_than(MemoryType::Episodic, cutoff, "test").expect("again"), 0);
}

/// `recent`: the newest records that pass the filters, unranked, within the caller's access.
fn recent_is_the_newest_first_within_the_filters_and_the_callers_access() {
    let fx = Fixture::new();
    let mut written = Vec::new();
    for i in 0..6 {
        let sensitivity = if i == 4 { Sensitivity::High } else { Sensitivity::Low };
        written.push(fx.service.ingest_event(event(&format!("message {i}")), with(sensitivity, "")).expect("ingest").summary);
        fx.clock.advance(SignedDuration::from_mins(10));
    }
    fx.service.ingest_observation(fact("the kettle", "needs", "descaling"), IngestOptions::default()).expect("fact");
    let request = |limit, since: Option<Timestamp>| RetrieveRequest {
        types: vec![MemoryType::Episodic],
        max_sensitivity: Some(Sensitivity::Critical),
        since,
        limit,
        ..Default::default()
    };
    let got: Vec<String> = fx.service.recent(&request(3, None), &owner()).expect("recent").into_iter().map(|r| r.summary).collect();
    assert_eq!(got, [written[5].clone(), written[4].clone(), written[3].clone()], "newest first, episodic only");
    let low = Access { max_sensitivity: Sensitivity::Low, scopes: None };
    let got: Vec<String> = fx.service.recent(&request(3, None), &low).expect("recent").into_iter().map(|r| r.summary).collect();
    assert_eq!(got, [written[5].clone(), written[3].clone(), written[2].clone()], "never above the caller's ceiling");
    let since = fx.clock.now() - SignedDuration::from_mins(25);
    assert_eq!(fx.service.recent(&request(10, Some(since)), &owner()).expect("recent").len(), 2, "since bounds it");
    assert!(fx.service.recent(&request(0, None), &owner()).is_err(), "limit 0 is refused");
}

crate::on_both_engines!(
    the_callers_ceiling_and_scopes_hold_even_when_the_request_asks_for_more,
    fts_syntax_in_a_query_is_plain_text,
    an_empty_query_ranks_exactly_like_a_naive_scan_of_every_record,
    filters_by_type_tags_time_and_minimum_salience,
    bad_configuration_names_the_key,
    bad_queries_are_refused_with_the_field_named,
    among_pinned_records_the_most_salient_comes_first,
    the_answer_turn_is_found_through_its_question_and_the_weights_come_from_config,
    a_pruned_turn_leaves_its_neighbours_context,
    a_sender_named_in_the_query_is_boosted,
    a_neighbours_context_never_reveals_a_more_sensitive_turn,
    a_rare_word_beats_records_holding_only_frequent_words,
    a_long_querys_words_share_one_probe_budget,
    below_the_cap_ranking_is_unchanged,
    the_present_favours_the_newer_statement_and_slot_facts_come_first,
    retention_erases_old_records_of_a_type_and_nothing_else,
    recent_is_the_newest_first_within_the_filters_and_the_callers_access,
);
