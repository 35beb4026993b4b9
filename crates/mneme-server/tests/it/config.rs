//! Configuration layering and validation.

use mneme_server::MnemeConfig;
use mneme_server::config::parse_duration;
use std::time::Duration;

fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

#[test]
fn layers_apply_in_order_defaults_file_env_flags() {
    let dir = tempfile::tempdir().expect("dir");
    let file = dir.path().join("config.toml");
    std::fs::write(&file, "[server]\ngrpc_addr = \"127.0.0.1:7000\"\nhttp_addr = \"127.0.0.1:7001\"\n[consolidation]\nbatch_size = 10\n")
        .expect("write");
    let c = MnemeConfig::layered(Some(&file), true, env(&[]), &[]).expect("file");
    assert_eq!(
        (c.server.grpc_addr.to_string().as_str(), c.consolidation.batch_size, c.consolidation.interval.to_string().as_str()),
        ("127.0.0.1:7000", 10, "30m")
    );
    let e = env(&[("MNEME_GRPC_ADDR", "127.0.0.1:7100"), ("MNEME_CFG__CONSOLIDATION__BATCH_SIZE", "20"), ("UNRELATED", "x")]);
    let c = MnemeConfig::layered(Some(&file), true, e.clone(), &[]).expect("env");
    assert_eq!(
        (c.server.grpc_addr.to_string().as_str(), c.server.http_addr.to_string().as_str(), c.consolidation.batch_size),
        ("127.0.0.1:7100", "127.0.0.1:7001", 20)
    );
    let sets =
        vec![("server.grpc_addr".to_string(), "\"127.0.0.1:7200\"".to_string()), ("consolidation.interval".to_string(), "5m".to_string())];
    let c = MnemeConfig::layered(Some(&file), true, e, &sets).expect("flags");
    assert_eq!((c.server.grpc_addr.to_string().as_str(), c.consolidation.interval.to_string().as_str()), ("127.0.0.1:7200", "5m"));
    // A missing optional file is the defaults; a missing required one is an error.
    let missing = dir.path().join("none.toml");
    assert_eq!(MnemeConfig::layered(Some(&missing), false, env(&[]), &[]).expect("defaults"), MnemeConfig::default());
    assert!(MnemeConfig::layered(Some(&missing), true, env(&[]), &[]).is_err());
}

#[test]
fn errors_name_the_key() {
    let cases = [
        ("[server]\nhttp_addr = \"localhost\"\n", "server.http_addr"),
        ("[server]\nport = 1\n", "port"),
        ("[consolidation]\ninterval = \"soon\"\n", "consolidation.interval"),
        ("[consolidation]\nmin_confidence = 3.0\n", "consolidation.min_confidence"),
        ("[hooks.competence]\nmin_occurrences = 0\n", "hooks.competence.min_occurrences"),
        ("[decay.half_life_days]\nepisodic = -1.0\nsemantic = 1.0\ncompetence = 1.0\nworking = 1.0\nplan_graph = 1.0\n", "episodic"),
        ("[[principals]]\nname = \"a\"\n", "principals[0]"),
        ("[[principals]]\nname = \"a\"\nkey_sha256 = \"abc\"\n", "principals[0].key_sha256"),
        ("[consolidation]\nllm_endpoint = \"ftp://x\"\n", "consolidation.llm_endpoint"),
    ];
    for (text, key) in cases {
        let err = MnemeConfig::from_toml(text, "test.toml").expect_err(text).to_string();
        assert!(err.contains(key), "{err:?} should name {key}");
        assert!(err.contains("test.toml"), "{err:?} should name the file");
    }
    let err = MnemeConfig::layered(None, false, env(&[("MNEME_HTTP_ADDR", "nowhere")]), &[]).expect_err("env").to_string();
    assert!(err.contains("server.http_addr"), "{err}");
    let err =
        MnemeConfig::layered(None, false, env(&[("MNEME_CFG__SERVER__MAX_REQUEST_BYTES", "\"big\"")]), &[]).expect_err("type").to_string();
    assert!(err.contains("server.max_request_bytes"), "{err}");
}

#[test]
fn show_redacts_secrets() {
    let text = "[consolidation]\nllm_endpoint = \"http://127.0.0.1:1/v1\"\nllm_api_key = \"sk-very-secret\"\n[[principals]]\nname = \"a\"\nkey_sha256 = \"0000000000000000000000000000000000000000000000000000000000000000\"\n";
    let c = MnemeConfig::from_toml(text, "t").expect("valid");
    let shown = c.redacted_toml();
    assert!(!shown.contains("sk-very-secret") && !shown.contains("0000000000"), "{shown}");
    assert!(shown.contains("<redacted>"));
    // What is shown parses back.
    assert!(
        MnemeConfig::from_toml(&shown.replace("\"<redacted>\"", "\"x\""), "shown").is_err_and(|e| e.to_string().contains("key_sha256"))
    );
}

#[test]
fn durations() {
    assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
    assert_eq!(parse_duration("30m"), Ok(Duration::from_secs(1800)));
    assert_eq!(parse_duration("2"), Ok(Duration::from_secs(2)));
    assert!(parse_duration("5 weeks").is_err());
    assert!(parse_duration("").is_err());
}

#[test]
fn a_retention_policy_reads_ages_per_type_and_refuses_unknown_types() {
    let c = mneme_server::MnemeConfig::from_toml("[maintenance.retention]\nepisodic = \"365d\"\nworking = \"0s\"\n", "t").expect("valid");
    assert_eq!(c.maintenance.retention.policy(), vec![(mneme_core::MemoryType::Episodic, std::time::Duration::from_secs(365 * 86_400))]);
    let err = mneme_server::MnemeConfig::from_toml("[maintenance.retention]\nepisodes = \"1d\"\n", "t").expect_err("unknown type");
    assert!(err.to_string().contains("episodes"), "{err}");
}
