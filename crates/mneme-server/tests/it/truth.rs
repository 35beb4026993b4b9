//! The scenario, replayed through the HTTP hooks with no LLM: a user's city,
//! employer, manager, diet, database and hosting change over five sessions, around
//! questions, hypotheticals, third parties and the assistant's suggestions. Afterwards
//! there is one live fact per slot with the current value, the old values are superseded
//! (with lineage) or retracted, recall answers the present first with dates, and the
//! context block states what is true now without contradictions.

use serde_json::{Value, json};

use crate::TestDaemon;

const CONVERSATION: &[(&str, &str, &str)] = &[
    // (time, role, text)
    ("2026-01-10T09:00:00Z", "user", "Morning! I live in Lisbon and I work at Acme."),
    ("2026-01-10T09:01:00Z", "assistant", "MySQL would be a reasonable start for that project."),
    ("2026-01-10T09:02:00Z", "user", "The project uses MySQL as its database."),
    ("2026-01-10T09:03:00Z", "user", "My manager is Rui."),
    ("2026-01-10T09:04:00Z", "user", "I'm vegetarian, so no meat recipes please."),
    ("2026-01-10T09:05:00Z", "user", "We host the project on Hetzner."),
    ("2026-01-10T09:06:00Z", "user", "Should I move to Madrid?"),
    ("2026-01-10T09:07:00Z", "assistant", "Madrid is lovely, if you ever want a change."),
    ("2026-02-14T18:00:00Z", "user", "My sister lives in Rome."),
    ("2026-02-14T18:01:00Z", "user", "If we moved to Kubernetes, would the deploy get easier?"),
    ("2026-02-14T18:02:00Z", "user", "Quick update: we moved to Munich last month."),
    ("2026-03-20T08:00:00Z", "user", "I'm no longer at Acme; I joined Globex two weeks ago."),
    ("2026-03-20T08:01:00Z", "user", "Rui is no longer my manager; it's Ines now."),
    ("2026-04-02T12:00:00Z", "user", "We switched the project from MySQL to Postgres."),
    ("2026-04-02T12:01:00Z", "assistant", "Postgres should handle that load fine."),
    ("2026-04-02T12:02:00Z", "user", "I cut out dairy too, so plant-based all the way now."),
    ("2026-05-06T10:00:00Z", "user", "We moved hosting from Hetzner to AWS."),
    ("2026-05-06T10:01:00Z", "user", "What's a good way to structure a README?"),
];

async fn hook(d: &TestDaemon, name: &str, body: Value) -> Value {
    let (status, v) = d.post(&format!("/v1/hooks/{name}"), body).await;
    assert_eq!(status, 200, "{v}");
    assert!(v.get("error").is_none(), "{v}");
    v
}

/// Every semantic record (tombstones too) as (subject, predicate, object, status).
async fn facts(d: &TestDaemon) -> Vec<(String, String, String, String)> {
    let (_, v) = d.post("/v1/retrieve", json!({ "types": ["semantic"], "include_tombstones": true, "limit": 200 })).await;
    v["hits"]
        .as_array()
        .expect("hits")
        .iter()
        .map(|h| {
            let (r, p) = (&h["record"], &h["record"]["payload"]);
            let s = |v: &Value| v.as_str().unwrap_or("").to_string();
            (s(&p["subject"]), s(&p["predicate"]), s(&p["object"]), s(&r["status"]))
        })
        .collect()
}

#[tokio::test]
async fn a_changing_user_leaves_one_live_fact_per_slot_and_a_truthful_context() {
    let d = TestDaemon::start().await;
    for (i, (at, role, text)) in CONVERSATION.iter().enumerate() {
        let name = if *role == "user" { "message_received" } else { "message_sent" };
        let from = if *role == "user" { Some("Dana") } else { None };
        let ctx = json!({ "sessionId": format!("s{}", &at[5..7]), "channelId": "web" });
        hook(&d, name, json!({ "event": { "content": text, "from": from, "timestamp": at }, "ctx": ctx })).await;
        let _ = i;
    }
    let all = facts(&d).await;
    let live = |predicate: &str| -> Vec<String> {
        all.iter().filter(|f| f.0 == "Dana" && f.1 == predicate && f.3 == "active").map(|f| f.2.clone()).collect()
    };
    assert_eq!(live("lives in"), ["Munich"], "{all:#?}");
    assert_eq!(live("works at"), ["Globex"], "{all:#?}");
    assert_eq!(live("reports to"), ["Ines"], "{all:#?}");
    assert_eq!(live("follows diet"), ["vegan"], "{all:#?}");
    assert_eq!(live("project database is"), ["Postgres"], "{all:#?}");
    assert_eq!(live("project is hosted on"), ["AWS"], "{all:#?}");
    // The old values are kept as history, never live.
    for (predicate, old) in
        [("lives in", "Lisbon"), ("works at", "Acme"), ("project database is", "MySQL"), ("project is hosted on", "Hetzner")]
    {
        let f = all.iter().find(|f| f.1 == predicate && f.2 == old).unwrap_or_else(|| panic!("{old} kept: {all:#?}"));
        assert!(f.3 == "superseded" || f.3 == "retracted", "{f:?}");
    }
    // Third parties are theirs; questions, hypotheticals and the assistant state nothing.
    assert!(all.iter().any(|f| f.0 == "Dana's sister" && f.2 == "Rome"), "{all:#?}");
    assert!(!all.iter().any(|f| f.2 == "Madrid" || f.2 == "Kubernetes"), "{all:#?}");

    // Recall answers the present first, with its date.
    let (_, v) = d.post("/v1/retrieve", json!({ "query": "Where does Dana live now?", "limit": 5 })).await;
    let top = &v["hits"][0]["record"];
    assert_eq!(top["payload"]["object"], "Munich", "{v}");
    assert_eq!(top["payload"]["valid_from"], "2026-02-14T18:02:00Z", "{v}");
    assert!(v["hits"][0]["score"]["slot"].as_f64().is_some(), "the slot boost is explained: {v}");
    // The lineage of the current city leads back to Lisbon.
    let id = top["id"].as_str().expect("id");
    let (_, history) = d.get(&format!("/v1/records/{id}/history")).await;
    assert!(history.to_string().contains("Lisbon"), "{history}");

    // The context block: what is true now about Dana first, no old values, no suggestions;
    // the same block twice.
    let start = hook(&d, "session_start", json!({ "ctx": { "sessionId": "next" } })).await;
    let context = start["context"].as_str().expect("context").to_string();
    assert!(context.starts_with("## What is true now\n\n### Dana (the user)\n- lives in: Munich (since 2026-02-14)\n"), "{context}");
    for now in ["works at: Globex", "reports to: Ines", "diet: vegan", "project database: Postgres", "project hosted on: AWS"] {
        assert!(context.contains(now), "{now}: {context}");
    }
    for old in ["Lisbon", "Acme", "Rui", "MySQL", "Hetzner", "vegetarian", "Madrid", "reasonable start"] {
        assert!(!context.contains(old), "{old}: {context}");
    }
    assert!(context.contains("### Dana's sister\n- lives in: Rome"), "{context}");
    let again = hook(&d, "session_start", json!({ "ctx": { "sessionId": "next-2" } })).await;
    assert_eq!(again["context"].as_str(), Some(context.as_str()), "deterministic");
    d.stop().await;
}

/// Memory per end user: one agent serves Ana and Ben through the same hooks. Each user's
/// messages and facts live in their scope; a session that names its user (ctx.userId, or
/// the user its messages came from) sees that user's memories and global ones, never the
/// other's; forgetting a user erases their records and conversation log and leaves the other's.
#[tokio::test]
async fn two_users_of_one_agent_never_see_each_other() {
    let d = TestDaemon::start().await;
    let say = |who: &'static str, text: &'static str, session: &'static str| json!({ "event": { "content": text, "from": who }, "ctx": { "sessionId": session, "channelId": "web" } });
    hook(&d, "message_received", say("Ana", "I live in Lisbon and I work at Acme.", "a1")).await;
    hook(&d, "message_received", say("Ben", "I live in Oslo and I work at Globex.", "b1")).await;
    hook(&d, "message_sent", json!({ "event": { "content": "Oslo is lovely." }, "ctx": { "sessionId": "b1" } })).await;
    // A global fact (ingested without a user) is everyone's.
    let global = json!({ "fact": { "subject": "The office wifi", "predicate": "is", "object": "guest-5G" } });
    assert_eq!(d.post("/v1/ingest/observation", global).await.0, 200);

    let (_, hits) = d.post("/v1/retrieve", json!({ "types": ["semantic", "episodic"], "limit": 50 })).await;
    let scopes: Vec<(String, String)> = hits["hits"]
        .as_array()
        .expect("hits")
        .iter()
        .map(|h| (h["record"]["summary"].as_str().unwrap_or("").to_string(), h["record"]["scope"].as_str().unwrap_or("").to_string()))
        .collect();
    assert!(scopes.iter().any(|(s, sc)| s.contains("Ana lives in Lisbon") && sc == "user:ana"), "{scopes:?}");
    assert!(scopes.iter().any(|(s, sc)| s.contains("Oslo is lovely") && sc == "user:ben"), "the assistant's reply is Ben's: {scopes:?}");

    for (user, mine, theirs) in [("Ana", "Lisbon", "Oslo"), ("Ben", "Oslo", "Lisbon")] {
        let start = hook(&d, "session_start", json!({ "ctx": { "sessionId": format!("new-{user}"), "userId": user } })).await;
        let context = start["context"].as_str().expect("context");
        assert!(context.contains(mine) && context.contains("guest-5G"), "{user}: {context}");
        assert!(!context.contains(theirs), "{user} sees the other's memories: {context}");
    }
    // The session's user is remembered from its messages.
    let start = hook(&d, "session_start", json!({ "ctx": { "sessionId": "a1" } })).await;
    assert!(!start["context"].as_str().unwrap_or("").contains("Oslo"), "{start}");

    // A session that names no user (and has no messages yet) is nobody's in particular:
    // global memories only, never one user's facts as "the user's".
    let start = hook(&d, "session_start", json!({ "ctx": { "sessionId": "anonymous" } })).await;
    let context = start["context"].as_str().unwrap_or("");
    assert!(!context.contains("Lisbon") && !context.contains("Oslo") && !context.contains("(the user)"), "{context}");
    assert!(context.contains("guest-5G"), "{context}");
    // MCP's recall without a user: the caller's own (global) memories only.
    let (_, own) = d.post("/v1/retrieve", json!({ "query": "live work", "own_scopes": true, "limit": 20 })).await;
    assert!(!own.to_string().contains("Lisbon") && !own.to_string().contains("Oslo"), "{own}");

    let (status, report) = d.post("/v1/forget", json!({ "user": "Ben", "reason": "account deleted" })).await;
    assert_eq!(status, 200, "{report}");
    let (_, hits) = d.post("/v1/retrieve", json!({ "query": "Oslo Globex", "include_tombstones": true, "limit": 20 })).await;
    assert!(!hits.to_string().contains("Oslo"), "{hits}");
    let (_, hits) = d.post("/v1/retrieve", json!({ "query": "Lisbon", "limit": 20 })).await;
    assert!(hits.to_string().contains("Ana lives in Lisbon"), "the other user's memories stay: {hits}");
    // Ana is now the only end user: a session naming no one is hers (a personal agent).
    let start = hook(&d, "session_start", json!({ "ctx": { "sessionId": "anonymous-2" } })).await;
    assert!(start["context"].as_str().unwrap_or("").contains("Lisbon"), "{start}");
    d.stop().await;
}

/// What the user keeps `<private>` never becomes a fact, a buffered message for the model
/// or a stored word: the message is stripped before the extractor reads it, and a message
/// that is all private is simply not remembered (no error for the agent).
#[tokio::test]
async fn a_private_block_is_never_read_for_facts() {
    let d = TestDaemon::with(crate::test_config()).await;
    let says = |text: &str| json!({ "event": { "content": text, "from": "Dana" }, "ctx": { "sessionId": "p" } });
    hook(&d, "message_received", says("I live in Lisbon. <private>Actually I moved to Porto and I work at Initech.</private>")).await;
    hook(&d, "message_received", says("<private>My manager is Rui.</private>")).await;
    let all = facts(&d).await;
    assert!(all.iter().any(|(_, p, o, s)| p == "lives in" && o == "Lisbon" && s == "active"), "{all:?}");
    for secret in ["Porto", "Initech", "Rui"] {
        assert!(!all.iter().any(|f| format!("{f:?}").contains(secret)), "{secret}: {all:?}");
        let (_, found) = d.post("/v1/retrieve", json!({ "query": secret, "include_tombstones": true })).await;
        assert!(!found.to_string().contains(secret), "{secret}: {found}");
    }
    let (_, status) = d.get("/v1/status").await;
    assert_eq!(status["consolidation_buffered"], 1, "only the public part is buffered: {status}");
    d.stop().await;
}
