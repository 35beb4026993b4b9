//! Pinned formats: one stored row per payload kind (`tests/fixtures/stored_payloads.json`).
//! Stores written by earlier builds hold exactly these JSON shapes, so each fixture must
//! still decode, and what this build writes must be byte-for-byte the same JSON. Renaming
//! or dropping a field in mneme-core fails here instead of breaking existing stores.
//! After an intended format change (with a migration), update the fixture by hand.

use mneme_core::Payload;
use mneme_service::IngestOptions;

use crate::Fixture;

fn every_payload_kind_is_stored_exactly_as_the_pinned_json() {
    let fixtures: Vec<serde_json::Value> =
        serde_json::from_str(include_str!("../fixtures/stored_payloads.json")).expect("the fixture is JSON");
    let kinds: Vec<&str> = fixtures.iter().map(|f| f["kind"].as_str().expect("kind")).collect();
    assert_eq!(kinds, ["event", "tool_output", "semantic", "competence", "working", "plan_graph"], "one fixture per payload kind");
    let fx = Fixture::new();
    for fixture in &fixtures {
        let payload: Payload =
            serde_json::from_value(fixture.clone()).unwrap_or_else(|e| panic!("stored {fixture} no longer decodes: {e}"));
        let record = fx.service.ingest(payload, IngestOptions::default()).expect("ingest");
        let stored: String = fx.raw_payload(&record.id);
        let stored: serde_json::Value = serde_json::from_str(&stored).expect("stored JSON");
        assert_eq!(&stored, fixture, "the stored form of a {} payload changed", fixture["kind"]);
    }
}

crate::on_both_engines!(every_payload_kind_is_stored_exactly_as_the_pinned_json,);
