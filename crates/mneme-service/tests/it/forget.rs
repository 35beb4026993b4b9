//! Forgetting by selection: a query takes every record whose own text holds its words,
//! however many (no silent cap), a dry run's plan is the real run's, a limit refuses
//! rather than erasing part, selectors are an intersection, and a sender's name is not
//! the text of their messages. Secrets in text are stored at `high`. On both engines.

use mneme_core::{EventPayload, Payload, Scope, Sensitivity};
use mneme_service::{ForgetRequest, IngestOptions, RetrieveRequest};

use crate::{Fixture, owner};

fn message(sender: &str, text: &str) -> Payload {
    Payload::Event(EventPayload {
        event_kind: "message".into(),
        reference: None,
        sender: Some(sender.into()),
        text: text.into(),
        event_time: None,
    })
}

fn in_scope(scope: &str) -> IngestOptions {
    IngestOptions { scope: Some(Scope::parse(scope).expect("scope")), ..IngestOptions::default() }
}

fn found(fx: &Fixture, query: &str) -> usize {
    let request = RetrieveRequest { query: query.into(), limit: 500, ..RetrieveRequest::default() };
    fx.service.retrieve(&request, &owner()).expect("retrieve").len()
}

fn forget(query: Option<&str>, user: Option<&str>, dry_run: bool, limit: usize) -> ForgetRequest {
    ForgetRequest {
        query: query.map(String::from),
        user: user.map(String::from),
        dry_run,
        reason: "asked".into(),
        actor: "test".into(),
        limit,
        ..ForgetRequest::default()
    }
}

fn a_query_forgets_every_match_and_the_dry_run_counts_what_the_real_run_erases() {
    let fx = Fixture::new();
    let batch: Vec<(Payload, IngestOptions)> =
        (0..300).map(|i| (message("dana", &format!("parcel {i} goes to Quellenweg 12")), IngestOptions::default())).collect();
    fx.service.ingest_batch(batch).expect("batch");
    fx.event("the kettle needs descaling");
    assert!(found(&fx, "Quellenweg") > 0);

    // A limit below the count refuses with the count, and erases nothing.
    let refused = fx.service.forget(&forget(Some("Quellenweg"), None, false, 100), &owner()).expect_err("over the limit");
    assert!(refused.to_string().contains("300 records match"), "{refused}");
    assert!(found(&fx, "Quellenweg") > 0, "nothing was erased");

    let plan = fx.service.forget(&forget(Some("Quellenweg"), None, true, 0), &owner()).expect("plan");
    let report = fx.service.forget(&forget(Some("Quellenweg"), None, false, 0), &owner()).expect("forget");
    assert_eq!(plan.records.len(), 300);
    assert_eq!(report.records.len(), plan.records.len(), "the dry run's count is the real run's");
    assert_eq!(found(&fx, "Quellenweg"), 0, "every match is gone");
    assert_eq!(found(&fx, "kettle"), 1, "nothing else is");
}

fn the_senders_name_is_not_what_their_messages_say_and_selectors_intersect() {
    let fx = Fixture::new();
    let ingest = |sender: &str, text: &str, scope: &str| fx.service.ingest(message(sender, text), in_scope(scope)).expect("ingest");
    let about = ingest("jordan", "I moved to Kreuzberg last spring", "user:jordan");
    ingest("jordan", "I am vegetarian now", "user:jordan");
    ingest("sam", "Jordan told me about Kreuzberg too", "user:sam");
    ingest("sam", "my bike is in Kreuzberg", "user:sam");

    // "jordan" names Jordan's messages only where their text does: the one from Sam.
    let plan = fx.service.forget(&forget(Some("Jordan"), None, true, 0), &owner()).expect("plan");
    let summaries: Vec<&str> = plan.records.iter().map(|r| r.summary.as_str()).collect();
    assert_eq!(summaries, ["sam: Jordan told me about Kreuzberg too"], "{plan:?}");

    // Query and user intersect: Kreuzberg in Sam's scope only.
    let report = fx.service.forget(&forget(Some("Kreuzberg"), Some("sam"), false, 0), &owner()).expect("forget");
    assert_eq!(report.records.len(), 2, "{report:?}");
    let left = fx.service.get(&about.id, &owner()).expect("Jordan's message");
    assert!(left.forgotten_at.is_none() && left.summary.contains("Kreuzberg"), "Jordan's Kreuzberg stays: {left:?}");
    assert_eq!(found(&fx, "vegetarian"), 1);
}

fn secrets_in_text_are_stored_at_high_and_kept_out_of_default_recall() {
    let fx = Fixture::new();
    let ssn = fx.event("my SSN is 078-05-1120");
    let card = fx.event("charge it to 4111 1111 1111 1111 please");
    let plain = fx.event("my order number is 1234567890123");
    assert_eq!(ssn.sensitivity, Sensitivity::High);
    assert!(ssn.tags.contains(&"secret:ssn".to_string()), "{:?}", ssn.tags);
    assert_eq!(card.sensitivity, Sensitivity::High);
    assert!(card.tags.contains(&"secret:card".to_string()), "{:?}", card.tags);
    assert_eq!(plain.sensitivity, Sensitivity::Low, "an order number is not a secret");
    // A default recall (ceiling medium) does not return them; one that asks for high does.
    assert_eq!(found(&fx, "SSN"), 0);
    assert_eq!(found(&fx, "charge"), 0);
    let high = RetrieveRequest { query: "SSN".into(), max_sensitivity: Some(Sensitivity::High), ..RetrieveRequest::default() };
    assert_eq!(fx.service.retrieve(&high, &owner()).expect("retrieve").len(), 1);
    // Asking for a lower sensitivity does not lower it.
    let low = IngestOptions { sensitivity: Some(Sensitivity::Public), ..IngestOptions::default() };
    let key = fx.service.ingest(message("dana", "the key is sk-proj-abcdefghijklmnopqrstuvwxyz0123"), low).expect("ingest");
    assert_eq!(key.sensitivity, Sensitivity::High);
}

crate::on_both_engines!(
    a_query_forgets_every_match_and_the_dry_run_counts_what_the_real_run_erases,
    the_senders_name_is_not_what_their_messages_say_and_selectors_intersect,
    secrets_in_text_are_stored_at_high_and_kept_out_of_default_recall,
);
