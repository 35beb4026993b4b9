use mneme_core::{
    AuditAction, CompetencePayload, LineageOp, MemoryType, Payload, PlanEdge, PlanGraphPayload, PlanNode, Status, ToolOutputPayload,
    WorkingPayload,
};
use mneme_service::{ContestRequest, ErrorKind, IngestOptions, OutcomeKind, OutcomeRequest, RetrieveRequest, Revision, ServiceError};

use crate::{Fixture, event, owner, payload_fact, who};

fn every_payload_type_round_trips_with_an_original_lineage_and_a_create_audit_entry() {
    let fx = Fixture::new();
    let payloads = vec![
        Payload::Event(event("we shipped v2")),
        Payload::ToolOutput(ToolOutputPayload {
            tool: "git".into(),
            args: serde_json::json!({"cmd": "push"}),
            result: Some(serde_json::json!("ok")),
            error: None,
            duration_ms: Some(120),
        }),
        payload_fact("Docker", "requires", "sg wrapper"),
        Payload::Competence(CompetencePayload {
            skill: "skill:git+rebase".into(),
            triggers: vec!["conflict".into()],
            steps: vec!["fetch".into()],
            performance: Default::default(),
        }),
        Payload::Working(WorkingPayload {
            thread_id: "t1".into(),
            state: "drafting".into(),
            next_actions: vec!["review".into()],
            open_questions: vec![],
            summary: String::new(),
        }),
        Payload::PlanGraph(PlanGraphPayload {
            intent: "release".into(),
            nodes: vec![
                PlanNode { id: "a".into(), label: "build".into(), status: None },
                PlanNode { id: "b".into(), label: "ship".into(), status: None },
            ],
            edges: vec![PlanEdge { from: "a".into(), to: "b".into(), kind: None }],
        }),
    ];
    let expected_types = [
        MemoryType::Episodic,
        MemoryType::Episodic,
        MemoryType::Semantic,
        MemoryType::Competence,
        MemoryType::Working,
        MemoryType::PlanGraph,
    ];
    for (payload, ty) in payloads.into_iter().zip(expected_types) {
        let record = fx.service.ingest(payload.clone(), IngestOptions::default()).expect("ingest");
        let back = fx.service.get(&record.id, &owner()).expect("get");
        assert_eq!(back, record);
        assert_eq!(back.payload, Some(payload));
        assert_eq!(back.memory_type, ty);
        assert_eq!(back.status, Status::Active);
        assert_eq!(back.lineage.operation, LineageOp::Original);
        let history = fx.service.history(&record.id, &owner()).expect("history");
        assert_eq!(history.audit.iter().map(|a| a.action).collect::<Vec<_>>(), vec![AuditAction::Create]);
    }
    let ids: Vec<String> = (0..5).map(|_| fx.event("x").id.to_string()).collect();
    let mut sorted = ids.clone();
    sorted.sort();
    assert_eq!(ids, sorted, "ids sort by creation order even within one clock tick");
}

fn episodic_records_cannot_be_revised_and_the_refusal_changes_nothing() {
    let fx = Fixture::new();
    let episode = fx.event("the deploy failed at 3am");
    let other = fx.event("another event");
    let before = fx.footprint();
    let attempts: Vec<ServiceError> = vec![
        fx.service.supersede(&episode.id, Revision::default(), who("fix"), &owner()).expect_err("supersede"),
        fx.service.fork(&episode.id, Revision::default(), who("fork"), &owner()).expect_err("fork"),
        fx.service.retract(&episode.id, who("oops"), &owner()).expect_err("retract"),
        fx.service.merge(&[episode.id.clone(), other.id.clone()], Revision::default(), who("merge"), &owner()).expect_err("merge"),
        fx.service
            .contest(&episode.id, ContestRequest { by: None, claim: Some("no".into()) }, who("doubt"), &owner())
            .expect_err("contest"),
    ];
    for err in attempts {
        assert_eq!(err.kind(), ErrorKind::FailedPrecondition, "{err}");
        assert!(err.to_string().contains("episodic records are immutable"), "{err}");
    }
    assert_eq!(before, fx.footprint());
    assert_eq!(fx.service.get(&episode.id, &owner()).expect("get").status, Status::Active);
}

fn supersede_keeps_the_old_record_as_a_tombstone_with_lineage_both_ways() {
    let fx = Fixture::new();
    let old = fx.fact("Howard", "lives in", "Berlin");
    let new = fx
        .service
        .supersede(
            &old.id,
            Revision { payload: Some(payload_fact("Howard", "lives in", "Hamburg")), ..Default::default() },
            who("he moved"),
            &owner(),
        )
        .expect("supersede");
    assert_eq!(new.lineage.operation, LineageOp::Supersede);
    assert_eq!(new.lineage.parent_ids, vec![old.id.clone()]);
    assert_eq!(new.lineage.rationale, "he moved");
    assert_eq!(new.summary, "Howard lives in Hamburg");

    let tomb = fx.service.get(&old.id, &owner()).expect("tombstone reachable by id");
    assert_eq!(tomb.status, Status::Superseded);
    assert_eq!(tomb.payload, old.payload, "the old content is kept");

    let hits = fx.service.retrieve(&RetrieveRequest { query: "Howard lives".into(), ..Default::default() }, &owner()).expect("retrieve");
    assert_eq!(hits.iter().map(|h| h.record.id.clone()).collect::<Vec<_>>(), vec![new.id.clone()]);
    let all = fx
        .service
        .retrieve(&RetrieveRequest { query: "Howard lives".into(), include_tombstones: true, ..Default::default() }, &owner())
        .expect("retrieve");
    assert_eq!(all.len(), 2);

    let new_history = fx.service.history(&new.id, &owner()).expect("history");
    assert_eq!(new_history.ancestors.iter().map(|b| b.id.clone()).collect::<Vec<_>>(), vec![old.id.clone()]);
    let old_history = fx.service.history(&old.id, &owner()).expect("history");
    assert_eq!(old_history.descendants.iter().map(|b| b.id.clone()).collect::<Vec<_>>(), vec![new.id.clone()]);
    assert_eq!(old_history.audit.iter().map(|a| a.action).collect::<Vec<_>>(), vec![AuditAction::Create, AuditAction::SupersededBy]);

    let again = fx.service.supersede(&old.id, Revision::default(), who("again"), &owner()).expect_err("tombstones are final");
    assert_eq!(again.kind(), ErrorKind::FailedPrecondition);
}

fn supersede_refuses_a_payload_of_another_type() {
    let fx = Fixture::new();
    let old = fx.fact("a", "b", "c");
    let before = fx.footprint();
    let err = fx
        .service
        .supersede(&old.id, Revision { payload: Some(Payload::Event(event("x"))), ..Default::default() }, who("x"), &owner())
        .expect_err("type change");
    assert_eq!(err.kind(), ErrorKind::FailedPrecondition, "{err}");
    assert_eq!(before, fx.footprint());
}

fn fork_keeps_the_source_active_and_links_the_variant() {
    let fx = Fixture::new();
    let source = fx.fact("deploy", "uses", "blue-green");
    let variant = fx
        .service
        .fork(
            &source.id,
            Revision { payload: Some(payload_fact("deploy", "uses", "canary")), ..Default::default() },
            who("staging differs"),
            &owner(),
        )
        .expect("fork");
    assert_eq!(fx.service.get(&source.id, &owner()).expect("get").status, Status::Active);
    assert_eq!(variant.lineage.operation, LineageOp::Fork);
    let history = fx.service.history(&source.id, &owner()).expect("history");
    assert_eq!(history.descendants.len(), 1);
    assert!(history.audit.iter().any(|a| a.action == AuditAction::ForkedInto));
}

fn merge_needs_one_type_and_turns_every_source_into_a_tombstone() {
    let fx = Fixture::new();
    let a = fx.fact("kettle", "is", "descaled");
    let b = fx.fact("kettle", "is", "clean");
    let episode = fx.event("kettle boiled");
    let before = fx.footprint();
    let err = fx.service.merge(&[a.id.clone(), episode.id.clone()], Revision::default(), who("m"), &owner()).expect_err("mixed");
    assert_eq!(err.kind(), ErrorKind::FailedPrecondition);
    let err = fx.service.merge(&[a.id.clone(), a.id.clone()], Revision::default(), who("m"), &owner()).expect_err("twice");
    assert_eq!(err.kind(), ErrorKind::InvalidArgument);
    assert_eq!(before, fx.footprint());

    let merged = fx
        .service
        .merge(
            &[a.id.clone(), b.id.clone()],
            Revision { payload: Some(payload_fact("kettle", "is", "descaled and clean")), ..Default::default() },
            who("same fact"),
            &owner(),
        )
        .expect("merge");
    assert_eq!(merged.lineage.operation, LineageOp::Merge);
    assert_eq!(merged.lineage.parent_ids, vec![a.id.clone(), b.id.clone()]);
    for id in [&a.id, &b.id] {
        let source = fx.service.get(id, &owner()).expect("get");
        assert_eq!(source.status, Status::Superseded);
        assert!(fx.service.history(id, &owner()).expect("history").audit.iter().any(|e| e.action == AuditAction::MergedInto));
    }
}

fn retract_hides_the_record_but_keeps_it_reachable() {
    let fx = Fixture::new();
    let record = fx.fact("the api", "returns", "xml");
    let retracted = fx.service.retract(&record.id, who("it returns json"), &owner()).expect("retract");
    assert_eq!(retracted.status, Status::Retracted);
    assert!(fx.service.retrieve(&RetrieveRequest { query: "api xml".into(), ..Default::default() }, &owner()).expect("r").is_empty());
    assert_eq!(fx.service.get(&record.id, &owner()).expect("get").payload, record.payload);
    let audit = fx.service.history(&record.id, &owner()).expect("history").audit;
    assert_eq!(audit.last().map(|a| (a.action, a.rationale.as_str())), Some((AuditAction::Retract, "it returns json")));
}

fn contest_marks_and_links_without_hiding() {
    let fx = Fixture::new();
    let claim = fx.fact("meeting", "is on", "Monday");
    let counter = fx.fact("meeting", "is on", "Tuesday");
    let contested = fx
        .service
        .contest(
            &claim.id,
            ContestRequest { by: Some(counter.id.clone()), claim: Some("calendar says Tuesday".into()) },
            who("conflict"),
            &owner(),
        )
        .expect("contest");
    assert_eq!(contested.status, Status::Contested);
    let hits = fx.service.retrieve(&RetrieveRequest { query: "meeting Monday".into(), ..Default::default() }, &owner()).expect("r");
    assert!(hits.iter().any(|h| h.record.id == claim.id), "contested records stay retrievable");
    let history = fx.service.history(&claim.id, &owner()).expect("history");
    assert_eq!(history.links.len(), 1);
    assert_eq!((history.links[0].from.clone(), history.links[0].kind.as_str()), (counter.id.clone(), "contests"));
    let err = fx.service.contest(&claim.id, ContestRequest::default(), who("x"), &owner()).expect_err("needs by or claim");
    assert_eq!(err.kind(), ErrorKind::InvalidArgument);
    let err =
        fx.service.contest(&claim.id, ContestRequest { by: Some(claim.id.clone()), claim: None }, who("x"), &owner()).expect_err("self");
    assert_eq!(err.kind(), ErrorKind::FailedPrecondition);
}

fn revisions_require_a_rationale() {
    let fx = Fixture::new();
    let record = fx.fact("a", "b", "c");
    let before = fx.footprint();
    let err = fx.service.retract(&record.id, who("  "), &owner()).expect_err("no rationale");
    assert_eq!(err.kind(), ErrorKind::InvalidArgument);
    assert!(err.to_string().contains("rationale"), "{err}");
    assert_eq!(before, fx.footprint());
}

fn outcomes_update_competence_statistics_and_salience() {
    let fx = Fixture::new();
    let skill = fx
        .service
        .ingest_competence(
            CompetencePayload { skill: "skill:docker+exec".into(), triggers: vec![], steps: vec![], performance: Default::default() },
            IngestOptions { salience: Some(0.5), ..Default::default() },
        )
        .expect("skill");
    let report = |outcome, duration_ms, mode: Option<&str>| {
        fx.service
            .ingest_outcome(
                OutcomeRequest {
                    target: skill.id.clone(),
                    outcome,
                    duration_ms,
                    failure_mode: mode.map(str::to_string),
                    note: None,
                    amount: None,
                },
                IngestOptions::default(),
                &owner(),
            )
            .expect("outcome")
    };
    let first = report(OutcomeKind::Success, Some(100), None);
    assert!((first.salience_after - 0.6).abs() < 1e-9, "success reinforces by 0.1: {}", first.salience_after);
    report(OutcomeKind::Failure, Some(300), Some("Timeout after 30s"));
    let last = report(OutcomeKind::Failure, None, Some("timeout after 31s"));
    assert!((last.salience_after - 0.4).abs() < 1e-9, "{}", last.salience_after);
    let Some(Payload::Competence(c)) = last.target.payload else { panic!("competence payload expected") };
    assert_eq!((c.performance.success_count, c.performance.failure_count), (1, 2));
    assert!((c.performance.success_rate - 1.0 / 3.0).abs() < 1e-12);
    assert_eq!(c.performance.avg_duration_ms, Some(200.0));
    assert_eq!(c.performance.failure_modes.get("timeout after #s"), Some(&2), "{:?}", c.performance.failure_modes);
    let outcome_record = fx.service.get(&first.record.id, &owner()).expect("outcome record");
    assert_eq!(outcome_record.memory_type, MemoryType::Episodic);
    let history = fx.service.history(&skill.id, &owner()).expect("history");
    assert_eq!(history.audit.iter().filter(|a| a.action == AuditAction::Outcome).count(), 3);
    assert_eq!(history.links.len(), 3);
    // Updated statistics are re-indexed: the failure mode is now searchable on the skill.
    let hits = fx
        .service
        .retrieve(&RetrieveRequest { query: "timeout".into(), types: vec![MemoryType::Competence], ..Default::default() }, &owner())
        .expect("retrieve");
    assert_eq!(hits.iter().map(|h| h.record.id.clone()).collect::<Vec<_>>(), vec![skill.id.clone()]);
}

fn bad_amounts_are_refused_and_change_nothing() {
    let fx = Fixture::new();
    let record = fx.fact("a", "b", "c");
    let before = fx.footprint();
    for amount in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY, -0.1, 0.0, 1.5] {
        let err = fx.service.reinforce(&record.id, Some(amount), who(""), &owner()).expect_err("bad amount");
        assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{amount}: {err}");
        let err = fx.service.penalize(&record.id, Some(amount), who(""), &owner()).expect_err("bad amount");
        assert!(err.to_string().contains("amount"), "{err}");
    }
    for bad in [f64::NAN, -1.0, 2.0] {
        let err = fx
            .service
            .ingest_observation(crate::fact("x", "y", "z"), IngestOptions { confidence: Some(bad), ..Default::default() })
            .expect_err("bad confidence");
        assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
    }
    assert_eq!(before, fx.footprint());
}

fn oversize_and_empty_input_is_refused_whole() {
    let fx = Fixture::new();
    let before = fx.footprint();
    let huge = "x".repeat(300 * 1024);
    let err = fx.service.ingest_event(event(&huge), IngestOptions::default()).expect_err("too big");
    assert!(err.to_string().contains("payload is too large"), "{err}");
    let err =
        fx.service.ingest_event(event("ok"), IngestOptions { summary: Some("s".repeat(2000)), ..Default::default() }).expect_err("summary");
    assert!(err.to_string().contains("summary"), "{err}");
    let err =
        fx.service.ingest_event(event("ok"), IngestOptions { tags: vec!["two words".into()], ..Default::default() }).expect_err("tag");
    assert!(err.to_string().contains("tag"), "{err}");
    let err = fx.service.ingest_observation(crate::fact("", "is", "x"), IngestOptions::default()).expect_err("empty subject");
    assert!(err.to_string().contains("subject"), "{err}");
    // A batch with one bad record writes none of them.
    let batch = vec![(Payload::Event(event("fine")), IngestOptions::default()), (Payload::Event(event(&huge)), IngestOptions::default())];
    assert!(fx.service.ingest_batch(batch).is_err());
    assert_eq!(before, fx.footprint());
    // Also when it comes after whole chunks of the pipeline were written in the transaction.
    let fine = |i: usize| (Payload::Event(event(&format!("fine number {i}"))), IngestOptions::default());
    let mut batch: Vec<_> = (0..2 * mneme_service::INGEST_CHUNK + 1).map(fine).collect();
    batch.push((Payload::Event(event(&huge)), IngestOptions::default()));
    let err = fx.service.ingest_batch(batch).expect_err("a bad record in the third chunk");
    assert!(err.to_string().contains("payload is too large"), "{err}");
    assert_eq!(before, fx.footprint());
    // A good batch of several chunks: every record, in order, with its own text.
    let n = 2 * mneme_service::INGEST_CHUNK + 3;
    let ids = fx.service.ingest_batch((0..n).map(fine).collect()).expect("a batch of three chunks");
    assert_eq!(ids.len(), n);
    for (i, id) in ids.iter().enumerate() {
        let record = fx.service.get(id, &owner()).expect("stored");
        assert_eq!(record.summary, format!("howard: fine number {i}"), "record {i} in batch order");
    }
    assert!(ids.windows(2).all(|w| w[0].as_str() < w[1].as_str()), "ids increase in batch order");
}

fn unknown_and_invisible_ids_are_not_found() {
    let fx = Fixture::new();
    let unknown = mneme_core::RecordId::parse("00000000-0000-7000-8000-000000000042").expect("id");
    assert_eq!(fx.service.get(&unknown, &owner()).expect_err("unknown").kind(), ErrorKind::NotFound);
    assert_eq!(fx.service.retract(&unknown, who("x"), &owner()).expect_err("unknown").kind(), ErrorKind::NotFound);
    let secret = fx
        .service
        .ingest_observation(
            crate::fact("vault", "code", "4921"),
            IngestOptions { sensitivity: Some(mneme_core::Sensitivity::Critical), ..Default::default() },
        )
        .expect("ingest");
    let reader = mneme_service::Access { max_sensitivity: mneme_core::Sensitivity::Medium, scopes: None };
    assert_eq!(fx.service.get(&secret.id, &reader).expect_err("hidden").kind(), ErrorKind::NotFound);
    assert_eq!(fx.service.history(&secret.id, &reader).expect_err("hidden").kind(), ErrorKind::NotFound);
    assert_eq!(fx.service.reinforce(&secret.id, None, who(""), &reader).expect_err("hidden").kind(), ErrorKind::NotFound);
}

fn pruning_drops_payloads_of_faded_records_but_keeps_tombstones_lineage_and_audit() {
    let fx = Fixture::new();
    // The last word is beyond the 200-character summary: only the payload holds it.
    let episode = fx.event(&format!("ate a sandwich {} marmalade", "and then some more ".repeat(12)));
    let fact = fx.fact("Howard", "likes", "rye bread");
    let pinned = fx.service.ingest_event(event("wedding day"), IngestOptions { pinned: true, ..Default::default() }).expect("pinned");
    let fix = fx
        .service
        .supersede(
            &fact.id,
            Revision { payload: Some(payload_fact("Howard", "likes", "sourdough")), ..Default::default() },
            who("changed"),
            &owner(),
        )
        .expect("supersede");
    fx.advance_days(30);
    let salience_before: Vec<f64> =
        [&fix.id, &pinned.id].iter().map(|id| fx.service.current_salience(&fx.service.get(id, &owner()).expect("get"))).collect();

    let before = fx.service.retrieve(&RetrieveRequest { query: "marmalade".into(), ..Default::default() }, &owner()).expect("r");
    assert_eq!(before.len(), 1, "the payload-only word is indexed before pruning");
    let dry = fx.service.prune(None, true, "test").expect("dry run");
    assert_eq!(dry.pruned, vec![episode.id.clone()]);
    assert!(fx.service.get(&episode.id, &owner()).expect("get").payload.is_some(), "a dry run changes nothing");

    let report = fx.service.prune(None, false, "test").expect("prune");
    assert_eq!(report.pruned, vec![episode.id.clone()], "only the faded episode; facts last months, pinned never fade");
    let tomb = fx.service.get(&episode.id, &owner()).expect("pruned records stay reachable");
    assert!(tomb.payload.is_none() && tomb.pruned_at.is_some());
    assert_eq!(tomb.summary, episode.summary);
    let audit = fx.service.history(&episode.id, &owner()).expect("history").audit;
    assert_eq!(audit.iter().map(|a| a.action).collect::<Vec<_>>(), vec![AuditAction::Create, AuditAction::Prune]);
    let search = |q: &str| {
        fx.service
            .retrieve(&RetrieveRequest { query: q.into(), include_tombstones: true, ..Default::default() }, &owner())
            .expect("r")
            .len()
    };
    assert!(fx.service.retrieve(&RetrieveRequest { query: "sandwich".into(), ..Default::default() }, &owner()).expect("r").is_empty());
    assert_eq!(search("sandwich"), 1, "the tombstone's summary stays searchable");
    assert_eq!(search("marmalade"), 0, "the dropped payload's text left the index");

    // The superseded fact is history, not decayed knowledge: never pruned.
    assert!(fx.service.get(&fact.id, &owner()).expect("get").payload.is_some());
    // The sweep did not touch the survivors' salience (no compounding).
    let salience_after: Vec<f64> =
        [&fix.id, &pinned.id].iter().map(|id| fx.service.current_salience(&fx.service.get(id, &owner()).expect("get"))).collect();
    assert_eq!(salience_before, salience_after);
    assert!(fx.service.prune(None, false, "test").expect("again").pruned.is_empty(), "pruning is idempotent");
}

fn a_month_of_daily_sweeps_does_not_prune_a_fact() {
    let fx = Fixture::new();
    let fact = fx.fact("the office", "is in", "Kreuzberg");
    for _ in 0..60 {
        fx.advance_days(1);
        fx.service.prune(None, false, "sweeper").expect("sweep");
    }
    let record = fx.service.get(&fact.id, &owner()).expect("get");
    assert!(record.payload.is_some());
    let salience = fx.service.current_salience(&record);
    // 60 days at a 180-day half-life: 0.5^(1/3), whatever the number of sweeps.
    assert!((salience - 0.5f64.powf(60.0 / 180.0)).abs() < 1e-9, "{salience}");
}

fn an_outcome_is_as_sensitive_as_its_target_and_in_its_scope() {
    let fx = Fixture::new();
    let secret = fx
        .service
        .ingest_observation(
            crate::fact("alice", "vault code", "4921"),
            IngestOptions {
                sensitivity: Some(mneme_core::Sensitivity::Critical),
                scope: Some(mneme_core::Scope::parse("user:alice").expect("scope")),
                ..Default::default()
            },
        )
        .expect("ingest");
    let request = OutcomeRequest {
        target: secret.id.clone(),
        outcome: OutcomeKind::Success,
        duration_ms: None,
        failure_mode: None,
        note: None,
        amount: None,
    };
    let outcome = fx.service.ingest_outcome(request, IngestOptions::default(), &owner()).expect("outcome");
    assert_eq!(outcome.record.sensitivity, mneme_core::Sensitivity::Critical);
    assert_eq!(outcome.record.scope.as_str(), "user:alice");
    let reader = mneme_service::Access { max_sensitivity: mneme_core::Sensitivity::Low, scopes: None };
    let leaked = fx.service.retrieve(&RetrieveRequest { query: "vault code".into(), ..Default::default() }, &reader).expect("r");
    assert!(leaked.is_empty(), "the outcome must not leak the target's summary: {leaked:?}");
}

fn huge_competence_counters_saturate_instead_of_breaking_the_record() {
    let fx = Fixture::new();
    let mut skill = CompetencePayload { skill: "s".into(), triggers: vec![], steps: vec![], performance: Default::default() };
    skill.performance.success_count = u64::MAX;
    skill.performance.success_rate = 1.0;
    let record = fx.service.ingest_competence(skill, IngestOptions::default()).expect("ingest");
    let request = OutcomeRequest {
        target: record.id.clone(),
        outcome: OutcomeKind::Success,
        duration_ms: Some(5),
        failure_mode: None,
        note: None,
        amount: None,
    };
    fx.service.ingest_outcome(request, IngestOptions::default(), &owner()).expect("outcome");
    let Some(Payload::Competence(c)) = fx.service.get(&record.id, &owner()).expect("still readable").payload else { panic!("competence") };
    assert_eq!(c.performance.success_count, u64::MAX);
    assert!(c.performance.success_rate.is_finite());
}

fn merge_refuses_records_of_different_scopes() {
    let fx = Fixture::new();
    let scoped = |scope: &str| {
        fx.service
            .ingest_observation(
                crate::fact("k", "is", scope),
                IngestOptions { scope: Some(mneme_core::Scope::parse(scope).expect("s")), ..Default::default() },
            )
            .expect("ingest")
    };
    let (a, b) = (scoped("project:a"), scoped("project:b"));
    let before = fx.footprint();
    let err = fx.service.merge(&[a.id, b.id], Revision::default(), who("m"), &owner()).expect_err("cross-scope merge");
    assert!(err.to_string().contains("different scopes"), "{err}");
    assert_eq!(before, fx.footprint());
}

fn history_does_not_reveal_the_ids_of_hidden_records() {
    let fx = Fixture::new();
    let claim = fx.fact("meeting", "is on", "Monday");
    let hidden = fx
        .service
        .ingest_observation(
            crate::fact("meeting", "is on", "Tuesday"),
            IngestOptions { sensitivity: Some(mneme_core::Sensitivity::High), ..Default::default() },
        )
        .expect("ingest");
    fx.service.contest(&claim.id, ContestRequest { by: Some(hidden.id.clone()), claim: None }, who("conflict"), &owner()).expect("contest");
    let reader = mneme_service::Access { max_sensitivity: mneme_core::Sensitivity::Medium, scopes: None };
    let history = fx.service.history(&claim.id, &reader).expect("history");
    let text = serde_json::to_string(&history).expect("json");
    assert!(!text.contains(hidden.id.as_str()), "hidden id leaked: {text}");
    assert!(text.contains("(hidden)"));
    assert_eq!(history.hidden, 1);
    let owner_view = serde_json::to_string(&fx.service.history(&claim.id, &owner()).expect("history")).expect("json");
    assert!(owner_view.contains(hidden.id.as_str()));
}

fn group_commit_gives_each_concurrent_ingest_its_own_record() {
    let mut fx = Fixture::new();
    fx.service.add_readers(2).expect("readers");
    let service = &fx.service;
    let ids: Vec<String> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..8)
            .map(|t| {
                s.spawn(move || {
                    (0..50)
                        .map(|i| {
                            service
                                .ingest_event(event(&format!("thread {t} item {i}")), IngestOptions::default())
                                .expect("ingest")
                                .id
                                .to_string()
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles.into_iter().flat_map(|h| h.join().expect("thread")).collect()
    });
    let unique: std::collections::HashSet<&String> = ids.iter().collect();
    assert_eq!((ids.len(), unique.len()), (400, 400));
    // Every acknowledged record is readable (through the reader connections) with its text.
    for (n, id) in ids.iter().enumerate().step_by(37) {
        let record = fx.service.get(&id.parse().expect("id"), &owner()).expect("committed");
        assert!(record.summary.contains("thread "), "{n}: {}", record.summary);
    }
    assert_eq!(fx.footprint().0, 400);
}

fn ingest_each_keeps_bad_items_from_failing_good_ones() {
    let fx = Fixture::new();
    let bad = IngestOptions { confidence: Some(f64::NAN), ..IngestOptions::default() };
    let results = fx.service.ingest_each(vec![
        (Payload::Event(event("first")), IngestOptions::default()),
        (Payload::Event(event("second")), bad),
        (Payload::Event(event("third")), IngestOptions::default()),
    ]);
    assert!(results[0].is_ok() && results[2].is_ok(), "{results:?}");
    assert!(matches!(results[1], Err(mneme_service::ServiceError::Invalid(_))), "{:?}", results[1]);
    assert_eq!(fx.footprint().0, 2);
}

fn private_blocks_are_stripped_from_records_and_an_all_private_record_is_refused() {
    let fx = Fixture::new();
    let options = IngestOptions { summary: Some("deploy <private>key=abc</private> notes".into()), ..Default::default() };
    let tool = ToolOutputPayload {
        tool: "shell".into(),
        args: serde_json::json!({"cmd": "login", "<private>token</private>": [{"type": "text", "text": "<Private>pw hunter2</private>ok"}]}),
        result: Some(serde_json::json!({"content": [{"type": "tool_result", "content": "<private>ssh-rsa AAA</private>done"}]})),
        error: None,
        duration_ms: None,
    };
    let record = fx.service.ingest_tool_output(tool, options).expect("ingest");
    let stored = serde_json::to_string(&fx.service.get(&record.id, &owner()).expect("get")).expect("json");
    for secret in ["key=abc", "token", "hunter2", "ssh-rsa"] {
        assert!(!stored.contains(secret), "{secret} persisted: {stored}");
    }
    assert!(stored.contains("done") && stored.contains("deploy"), "{stored}");
    // Nothing but private text: nothing to remember, refused, store unchanged.
    let before = fx.footprint();
    let refused = fx.service.ingest_event(event("<private>only secrets</private>"), IngestOptions::default()).expect_err("refused");
    assert_eq!(refused.kind(), ErrorKind::InvalidArgument, "{refused}");
    assert_eq!(fx.footprint(), before);
}

/// Consolidation looked for the fact it revises with a ranked search limited to 50 hits:
/// a fact outranked by 50 others for "subject predicate" was missed and duplicated.
fn find_facts_is_exact_however_many_records_outrank_the_fact() {
    use mneme_core::{Scope, Sensitivity};
    use mneme_service::{Access, Actor};
    let fx = Fixture::new();
    let wanted = fx.fact("Howard", "lives in", "Berlin");
    // 80 records that win on every ranked signal: the same words, more often, and newer.
    for i in 0..80 {
        fx.fact("Howard", &format!("lives in lives in howard {i}"), "somewhere");
        fx.event(&format!("Howard lives in Howard lives in {i}"));
    }
    let ranked = fx
        .service
        .retrieve(&mneme_service::RetrieveRequest { query: "Howard lives in".into(), limit: 50, ..Default::default() }, &Access::owner())
        .expect("retrieve");
    assert!(ranked.iter().all(|h| h.record.id != wanted.id), "the test needs the fact outranked");

    let found = fx.service.find_facts("howard", "LIVES IN", &Scope::global(), &Access::owner()).expect("find");
    assert_eq!(found.iter().map(|r| &r.id).collect::<Vec<_>>(), vec![&wanted.id]);

    // Exactly the scope, never above the caller's access, never a tombstone.
    let scoped = Scope::parse("user:howard").expect("scope");
    let in_scope = fx
        .service
        .ingest_observation(
            crate::fact("Howard", "lives in", "Hamburg"),
            IngestOptions { scope: Some(scoped.clone()), sensitivity: Some(Sensitivity::High), ..Default::default() },
        )
        .expect("ingest");
    assert_eq!(fx.service.find_facts("Howard", "lives in", &Scope::global(), &Access::owner()).expect("find").len(), 1);
    let found = fx.service.find_facts("Howard", "lives in", &scoped, &Access::owner()).expect("find");
    assert_eq!(found.iter().map(|r| &r.id).collect::<Vec<_>>(), vec![&in_scope.id]);
    let low = Access { max_sensitivity: Sensitivity::Medium, scopes: None };
    assert!(fx.service.find_facts("Howard", "lives in", &scoped, &low).expect("find").is_empty());
    let elsewhere = Access { max_sensitivity: Sensitivity::Critical, scopes: Some(vec![Scope::parse("user:dana").expect("scope")]) };
    assert!(fx.service.find_facts("Howard", "lives in", &scoped, &elsewhere).expect("find").is_empty());
    let who = Actor { actor: "test".into(), rationale: "moved away".into() };
    fx.service.retract(&wanted.id, who, &Access::owner()).expect("retract");
    assert!(fx.service.find_facts("Howard", "lives in", &Scope::global(), &Access::owner()).expect("find").is_empty());
}

/// The competence tracker and consolidation found a skill's record with a search limited
/// to 20 hits: a record outranked by 20 others was missed and a second one created.
fn find_skills_is_exact_however_many_records_outrank_the_skill() {
    use mneme_core::{CompetencePayload, Payload, Performance, Scope, Sensitivity};
    use mneme_service::{Access, Actor};
    let fx = Fixture::new();
    let skill = |name: &str, scope: &Scope, sensitivity: Sensitivity| {
        let payload = Payload::Competence(CompetencePayload {
            skill: name.into(),
            triggers: vec![format!("{name} needed")],
            steps: Vec::new(),
            performance: Performance::default(),
        });
        let options = IngestOptions { scope: Some(scope.clone()), sensitivity: Some(sensitivity), ..Default::default() };
        fx.service.ingest(payload, options).expect("skill")
    };
    let global = Scope::global();
    let wanted = skill("skill:git+rebase", &global, Sensitivity::Low);
    // 40 skills that share the words and are newer.
    for i in 0..40 {
        skill(&format!("skill:git+rebase git rebase {i}"), &global, Sensitivity::Low);
    }
    let ranked = fx
        .service
        .retrieve(&mneme_service::RetrieveRequest { query: "skill:git+rebase".into(), limit: 20, ..Default::default() }, &Access::owner())
        .expect("retrieve");
    // (BM25 on SQLite ranks the 40 newer ones first; PostgreSQL's length-normalised rank
    // may not, and the exact look-up must not depend on either.)
    if crate::engine() == crate::Engine::Sqlite {
        assert!(ranked.iter().all(|h| h.record.id != wanted.id), "the test needs the skill outranked");
    }
    let found = fx.service.find_skills("skill:git+rebase", &global, &Access::owner()).expect("find");
    assert_eq!(found.iter().map(|r| &r.id).collect::<Vec<_>>(), vec![&wanted.id]);
    // Exact name (no case folding), exactly the scope, within access, never a tombstone.
    assert!(fx.service.find_skills("skill:GIT+rebase", &global, &Access::owner()).expect("find").is_empty());
    let team = Scope::parse("team:a").expect("scope");
    let secret = skill("skill:git+rebase", &team, Sensitivity::High);
    assert_eq!(fx.service.find_skills("skill:git+rebase", &team, &Access::owner()).expect("find")[0].id, secret.id);
    let medium = Access { max_sensitivity: Sensitivity::Medium, scopes: None };
    assert!(fx.service.find_skills("skill:git+rebase", &team, &medium).expect("find").is_empty());
    fx.service.retract(&wanted.id, Actor { actor: "test".into(), rationale: "gone".into() }, &Access::owner()).expect("retract");
    assert!(fx.service.find_skills("skill:git+rebase", &global, &Access::owner()).expect("find").is_empty());
}

/// The one error table: every kind has its own wire code that maps back to it, a client
/// error is 4xx and a server fault 5xx, and the exit codes are the documented ones.
fn every_error_kind_has_one_code_status_and_exit_code() {
    let mut codes = std::collections::HashSet::new();
    for kind in ErrorKind::ALL {
        let m = kind.mapping();
        assert!(codes.insert(m.code), "{} used twice", m.code);
        assert_eq!(ErrorKind::from_code(m.code), Some(kind));
        assert!((400..600).contains(&m.http_status), "{kind:?}");
        assert_eq!(kind.is_server_fault(), m.http_status >= 500, "{kind:?}");
        assert!((2..=7).contains(&m.exit_code), "{kind:?}");
        assert!((1..=16).contains(&m.grpc_code), "{kind:?}");
    }
    assert_eq!(ErrorKind::from_code("no_such_code"), None);
    let exits: Vec<(ErrorKind, u8)> = [
        ErrorKind::InvalidArgument,
        ErrorKind::NotFound,
        ErrorKind::FailedPrecondition,
        ErrorKind::Busy,
        ErrorKind::Storage,
        ErrorKind::PermissionDenied,
        ErrorKind::Unauthenticated,
    ]
    .into_iter()
    .map(|k| (k, k.exit_code()))
    .collect();
    assert_eq!(
        exits,
        [
            (ErrorKind::InvalidArgument, 2),
            (ErrorKind::NotFound, 3),
            (ErrorKind::FailedPrecondition, 4),
            (ErrorKind::Busy, 5),
            (ErrorKind::Storage, 6),
            (ErrorKind::PermissionDenied, 7),
            (ErrorKind::Unauthenticated, 7)
        ]
    );
}

fn an_episode_fades_from_when_it_happened_and_is_not_pruned_in_its_first_two_weeks_in_the_store() {
    use mneme_core::Clock as _;
    let fx = Fixture::new();
    let mut old = crate::event("we hiked to the glacier");
    old.event_time = Some(fx.clock.now() - jiff::SignedDuration::from_hours(24 * 9));
    let old = fx.service.ingest_event(old, IngestOptions::default()).expect("ingest");
    let mut soon = crate::event("the dentist appointment is next week");
    soon.event_time = Some(fx.clock.now() + jiff::SignedDuration::from_hours(24 * 7));
    let soon = fx.service.ingest_event(soon, IngestOptions::default()).expect("ingest");
    // Nine days at the episodic half-life of three: 1/8, not a fresh 1.0. A future
    // event time counts from now.
    assert!((fx.service.current_salience(&old) - 0.125).abs() < 1e-9, "{}", fx.service.current_salience(&old));
    assert_eq!(fx.service.current_salience(&soon), 1.0);
    // Below a threshold of 0.2, but new in the store: kept.
    assert!(fx.service.prune(Some(0.2), false, "sweeper").expect("sweep").pruned.is_empty());
    fx.advance_days(14);
    let pruned = fx.service.prune(Some(0.2), false, "sweeper").expect("sweep").pruned;
    assert!(pruned.contains(&old.id), "{pruned:?}");
}

crate::on_both_engines!(
    every_payload_type_round_trips_with_an_original_lineage_and_a_create_audit_entry,
    episodic_records_cannot_be_revised_and_the_refusal_changes_nothing,
    supersede_keeps_the_old_record_as_a_tombstone_with_lineage_both_ways,
    supersede_refuses_a_payload_of_another_type,
    fork_keeps_the_source_active_and_links_the_variant,
    merge_needs_one_type_and_turns_every_source_into_a_tombstone,
    retract_hides_the_record_but_keeps_it_reachable,
    contest_marks_and_links_without_hiding,
    revisions_require_a_rationale,
    outcomes_update_competence_statistics_and_salience,
    bad_amounts_are_refused_and_change_nothing,
    oversize_and_empty_input_is_refused_whole,
    unknown_and_invisible_ids_are_not_found,
    pruning_drops_payloads_of_faded_records_but_keeps_tombstones_lineage_and_audit,
    a_month_of_daily_sweeps_does_not_prune_a_fact,
    an_outcome_is_as_sensitive_as_its_target_and_in_its_scope,
    huge_competence_counters_saturate_instead_of_breaking_the_record,
    merge_refuses_records_of_different_scopes,
    history_does_not_reveal_the_ids_of_hidden_records,
    group_commit_gives_each_concurrent_ingest_its_own_record,
    ingest_each_keeps_bad_items_from_failing_good_ones,
    private_blocks_are_stripped_from_records_and_an_all_private_record_is_refused,
    find_facts_is_exact_however_many_records_outrank_the_fact,
    find_skills_is_exact_however_many_records_outrank_the_skill,
    every_error_kind_has_one_code_status_and_exit_code,
    an_episode_fades_from_when_it_happened_and_is_not_pruned_in_its_first_two_weeks_in_the_store,
);
