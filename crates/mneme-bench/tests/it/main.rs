//! End-to-end tests of the `mneme-bench` binary: the retrieval-benchmark protocol on
//! stdin/stdout (what `../shared/bench/locomo_retrieval.py` drives), and the benchmarks
//! that run `mneme` refusing clearly when no `mneme` binary sits beside them.

use std::io::Write as _;
use std::process::{Command, Stdio};

fn bench(data_dir: &std::path::Path) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_mneme-bench"));
    cmd.env("MNEME_HOME", data_dir).env_remove("MNEME_CONFIG").env_remove("MNEME_ENCRYPTION_KEY").stdin(Stdio::null());
    cmd
}

#[test]
fn retrieval_speaks_the_protocol() {
    let dir = tempfile::tempdir().expect("tempdir");
    let requests = [
        r#"{"op":"hello","protocol":1}"#,
        r#"{"op":"corpus","corpus_id":"c1","docs":[{"id":"D1:1","text":"Caroline: I went to the LGBTQ support group yesterday","ts":"2023-05-08T13:56:00","meta":{"speaker":"Caroline"}},{"id":"D1:2","text":"Melanie: I painted a sunrise","ts":"2023-05-08T13:57:00","meta":{"speaker":"Melanie"}}]}"#,
        r#"{"op":"query","qid":"q1","corpus_id":"c1","query":"When did Caroline go to the support group?","k":10,"ts":null}"#,
        r#"{"op":"query","qid":"q2","corpus_id":"nope","query":"x","k":10}"#,
        r#"{"op":"drop","corpus_id":"c1"}"#,
        r#"{"op":"end"}"#,
    ];
    let mut child = bench(dir.path()).arg("retrieval").stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().expect("spawn");
    child.stdin.take().expect("stdin").write_all((requests.join("\n") + "\n").as_bytes()).expect("write");
    let out = child.wait_with_output().expect("wait");
    assert!(out.status.success());
    let replies: Vec<serde_json::Value> =
        String::from_utf8(out.stdout).expect("utf-8").lines().map(|l| serde_json::from_str(l).expect("json line")).collect();
    assert_eq!(replies.len(), requests.len(), "exactly one reply per request");
    assert_eq!(replies[0]["ok"], true);
    assert_eq!(replies[0]["name"], format!("mneme {}", env!("CARGO_PKG_VERSION")));
    assert_eq!(replies[1]["ok"], true);
    assert_eq!(replies[2]["ids"][0], "D1:1");
    assert_eq!(replies[3]["op"], "error");
    assert_eq!(replies[3]["qid"], "q2");
    assert_eq!(replies[5]["op"], "end");
}

#[test]
fn retrieval_reads_the_global_flags_before_or_after_the_subcommand() {
    let dir = tempfile::tempdir().expect("tempdir");
    for args in [&["--set", "retrieval.dense_share=2", "retrieval"], &["retrieval", "--set", "retrieval.dense_share=2"]] {
        let out = bench(dir.path()).args(args).output().expect("runs");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(6), "{args:?}: {stderr}");
        assert!(stderr.contains("dense_share"), "{stderr}");
    }
}

#[test]
fn a_bench_that_runs_mneme_names_the_build_command_when_mneme_is_missing() {
    let alone = tempfile::tempdir().expect("tempdir");
    let exe = alone.path().join("mneme-bench");
    std::fs::copy(env!("CARGO_BIN_EXE_mneme-bench"), &exe).expect("copy the binary");
    let data = tempfile::tempdir().expect("tempdir");
    for args in [&["workspace", "--files", "1", "--queries", "1", "--runs", "1"][..], &["daemon", "--records", "10"]] {
        let out = Command::new(&exe).env("MNEME_HOME", data.path()).args(args).stdin(Stdio::null()).output().expect("runs");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
        assert!(stderr.contains("cargo build --release -p mneme"), "{stderr}");
    }
}

#[test]
fn topics_names_the_line_of_a_bad_label_before_loading_any_model() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("labelled.jsonl");
    std::fs::write(&data, "{\"text\":\"I live in Graz\",\"slot\":\"city\"}\n{\"text\":\"hi\",\"slot\":\"weather\"}\n").expect("write");
    let missing = dir.path().join("no-model");
    for action in ["train", "eval"] {
        let out = bench(dir.path())
            .args(["topics", action, "--data"])
            .arg(&data)
            .arg("--model-dir")
            .arg(&missing)
            .arg("--out")
            .arg(dir.path().join("layer.json"))
            .output()
            .expect("runs");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{action}: {stderr}");
        assert!(stderr.contains("labelled.jsonl:2: unknown slot \"weather\""), "{action}: {stderr}");
    }
    assert!(!dir.path().join("layer.json").exists(), "nothing written");
}

/// Reflection's effect, offline and without a model: two simulated weeks with the
/// heartbeat repeat fewer failures and corrections than without it, and the playbook it
/// writes holds no fact, chat line or second line for one lesson.
#[test]
fn learning_shows_the_loop_on_repeating_fewer_failures_than_the_loop_off() {
    let dir = tempfile::tempdir().expect("dir");
    let out = bench(dir.path()).args(["--json", "learning", "--weeks", "2", "--seed", "5"]).output().expect("runs");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    let sum = |arm: &str, key: &str| v[arm].as_array().expect("weeks").iter().map(|w| w[key].as_u64().expect(key)).sum::<u64>();
    let (on, off) = (sum("loop_on", "repeated_failures"), sum("loop_off", "repeated_failures"));
    let (on_tasks, off_tasks) = (sum("loop_on", "known_failure_tasks"), sum("loop_off", "known_failure_tasks"));
    assert_eq!(off, off_tasks, "without the loop every known failure comes back");
    assert!(on_tasks > 0 && (on as f64) < 0.5 * on_tasks as f64, "with the loop fewer than half come back: {on}/{on_tasks}");
    let last = &v["loop_on"][1]["playbook"];
    assert!(last["useful"].as_u64().expect("useful") >= 8, "{last}");
    let junk: Vec<&str> = last["junk_lines"].as_array().expect("junk").iter().filter_map(|j| j.as_str()).collect();
    assert!(junk.iter().all(|j| j.starts_with("duplicate of question")), "only an unworded paraphrase may repeat: {junk:?}");
    assert!(last["tips"].as_u64().expect("tips") >= 5 && last["observed"].as_u64().expect("observed") >= 1, "{last}");
    let none = bench(dir.path()).args(["learning", "--weeks", "0"]).output().expect("runs");
    assert!(!none.status.success() && String::from_utf8_lossy(&none.stderr).contains("--weeks 0: between 1 and 52"));

    // With the scripted model at every stage: the model's tips are the lessons it is
    // given, each delivered once (a tip that repeats a lesson delivered before the three
    // heartbeats the model sees is not sent again), so the loop learns as offline.
    let out = bench(dir.path()).args(["--json", "learning", "--weeks", "2", "--seed", "5", "--llm", "scripted"]).output().expect("runs");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let m: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(m["llm"], "the scripted model");
    assert!(m["llm_calls"].as_u64().is_some_and(|n| n > 100), "{}", m["llm_calls"]);
    assert_eq!(m["loop_on"][1]["playbook"]["tips"], v["loop_on"][1]["playbook"]["tips"], "one tip per lesson, as offline");
    assert_eq!(m["loop_on"][1]["repeated_failures"], v["loop_on"][1]["repeated_failures"]);
}
