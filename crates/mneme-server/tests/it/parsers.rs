//! Property tests of every parser that takes outside input in the daemon: hook bodies,
//! the LLM's extraction JSON, configuration files and durations, and the regex fact
//! extractor. Each must answer any input with a value or an error, never a panic, and
//! keep its documented promises on the inputs it accepts. (The workspace's Markdown
//! chunker has its own property test in mneme-workspace.)

use mneme_agent::consolidate::parse_extraction;
use mneme_agent::hooks::HookInput;
use mneme_server::MnemeConfig;
use mneme_server::config::parse_duration;
use proptest::prelude::*;
use serde_json::{Value, json};

/// Any JSON value, biased towards the hook fields so that parsing goes deep.
fn json_value() -> impl Strategy<Value = Value> {
    let key = prop_oneof![
        Just("event".to_string()),
        Just("ctx".to_string()),
        Just("content".to_string()),
        Just("toolName".to_string()),
        Just("params".to_string()),
        Just("success".to_string()),
        Just("durationMs".to_string()),
        Just("compactingMessages".to_string()),
        Just("sessionKey".to_string()),
        Just("facts".to_string()),
        Just("subject".to_string()),
        Just("confidence".to_string()),
        "[a-zA-Z_]{1,10}",
    ];
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<f64>().prop_filter("finite", |f| f.is_finite()).prop_map(Value::from),
        ".{0,40}".prop_map(Value::from),
    ];
    leaf.prop_recursive(4, 64, 8, move |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            proptest::collection::btree_map(key.clone(), inner, 0..6).prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2048, ..ProptestConfig::default() })]

    #[test]
    fn any_hook_body_parses_or_is_refused_with_a_message(value in json_value()) {
        if let Err(message) = HookInput::from_json(value) {
            prop_assert!(!message.is_empty());
        }
    }

    #[test]
    fn any_model_reply_parses_or_is_refused_and_kept_facts_are_valid(
        value in json_value(),
        prose in ".{0,20}",
        fenced in any::<bool>(),
        cut in any::<prop::sample::Index>(),
    ) {
        let text = value.to_string();
        let shaped = if fenced { format!("```json\n{text}\n```") } else { text.clone() };
        // A reply cut short (the model ran out of tokens), at a character boundary.
        let mut end = cut.index(shaped.len() + 1);
        while !shaped.is_char_boundary(end) {
            end -= 1;
        }
        for raw in [shaped.clone(), format!("{prose}{shaped}"), shaped[..end].to_string()] {
            if let Ok(extraction) = parse_extraction(&raw) {
                for fact in &extraction.facts {
                    prop_assert!(!fact.subject.trim().is_empty() && !fact.predicate.trim().is_empty() && !fact.object.trim().is_empty());
                    prop_assert!((0.0..=1.0).contains(&fact.confidence));
                }
            }
        }
    }

    #[test]
    fn a_valid_extraction_survives_a_fence(subject in "[A-Za-z]{1,12}", object in "[a-z ]{1,20}", confidence in 0.0f64..=1.0) {
        prop_assume!(!object.trim().is_empty());
        let reply = json!({ "facts": [{ "subject": subject, "predicate": "Lives In", "object": object, "confidence": confidence }] });
        for raw in [reply.to_string(), format!("```json\n{reply}\n```"), format!("```\n{reply:#}\n```")] {
            let extraction = parse_extraction(&raw).expect("a valid reply parses");
            prop_assert_eq!(extraction.facts.len(), 1);
            prop_assert_eq!(&extraction.facts[0].predicate, "lives in");
        }
    }

    #[test]
    fn any_config_text_loads_or_is_refused_naming_its_source(text in config_text()) {
        match MnemeConfig::from_toml(&text, "test.toml") {
            Ok(config) => {
                // What loads validates, and its own rendering loads back to the same settings.
                prop_assert!(config.validate().is_ok());
                let again = MnemeConfig::from_toml(&config.redacted_toml(), "again").expect("a rendered config loads");
                prop_assert_eq!(again.redacted_toml(), config.redacted_toml());
            }
            Err(e) => prop_assert!(e.to_string().starts_with("test.toml"), "{}", e),
        }
    }

    #[test]
    fn any_duration_text_parses_in_range_or_is_refused(text in "[0-9.]{0,12}[a-z ]{0,3}") {
        if let Ok(d) = parse_duration(&text) {
            prop_assert!(d.as_secs_f64() <= 365.0 * 86400.0);
        }
    }

    #[test]
    fn any_text_gives_facts_with_every_part_present(text in ".{0,200}") {
        for triple in mneme_truth::patterns::extract(&text) {
            prop_assert!(!triple.subject.trim().is_empty() && !triple.predicate.trim().is_empty() && !triple.object.trim().is_empty(), "{:?}", triple);
        }
    }
}

/// TOML documents built from real section and key names with values of every kind, so
/// most of them reach validation rather than failing in the TOML parser.
fn config_text() -> impl Strategy<Value = String> {
    let section = prop_oneof![
        Just("server"),
        Just("decay"),
        Just("retrieval"),
        Just("limits"),
        Just("consolidation"),
        Just("maintenance"),
        Just("hooks"),
        Just("embedding"),
        Just("workspace"),
        Just("nosuch"),
    ];
    let key = prop_oneof![
        Just("grpc_addr"),
        Just("http_addr"),
        Just("read_connections"),
        Just("max_request_bytes"),
        Just("max_connections"),
        Just("interval"),
        Just("candidate_pool"),
        Just("dense_share"),
        Just("max_tags"),
        Just("decay_interval"),
        Just("enabled"),
        Just("typo"),
    ];
    let value = prop_oneof![
        any::<i64>().prop_map(|n| n.to_string()),
        (-2.0f64..2.0).prop_map(|f| format!("{f:?}")),
        any::<bool>().prop_map(|b| b.to_string()),
        "[a-z0-9.:]{0,12}".prop_map(|s| format!("{s:?}")),
        Just("[1, 2]".to_string()),
        ".{0,8}",
    ];
    proptest::collection::vec((section, proptest::collection::vec((key, value), 0..4)), 0..4).prop_map(|sections| {
        sections
            .into_iter()
            .map(|(name, pairs)| {
                let body: Vec<String> = pairs.into_iter().map(|(k, v)| format!("{k} = {v}")).collect();
                format!("[{name}]\n{}\n", body.join("\n"))
            })
            .collect()
    })
}
