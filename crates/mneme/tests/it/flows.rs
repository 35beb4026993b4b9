use std::io::Write;
use std::process::Stdio;

use crate::Mneme;

/// Calibrated relevance: every hit of a query carries `relevant`, the probability that it
/// answers the query, higher for the record that holds more of the query's words; a floor
/// (`retrieval.min_relevant`) leaves out what is below it, down to an empty answer.
#[test]
fn recall_reports_a_calibrated_relevance_and_a_floor_can_answer_nothing() {
    let m = Mneme::new();
    m.ok(&["init"]);
    m.ok(&["ingest", "event", "--text", "Melanie painted a sunset over the lake last summer", "--sender", "melanie"]);
    m.ok(&["ingest", "event", "--text", "The lake was cold this morning", "--sender", "caroline"]);
    let hits = m.json(&["recall", "what did melanie paint at the lake last summer"]);
    let relevant = |h: &serde_json::Value| h["score"]["relevant"].as_f64().expect("a calibrated relevance");
    assert_eq!(hits.as_array().map(Vec::len), Some(2), "{hits}");
    assert!(hits[0]["record"]["summary"].as_str().is_some_and(|s| s.contains("sunset")), "{hits}");
    assert!(relevant(&hits[0]) > relevant(&hits[1]) && relevant(&hits[1]) > 0.0 && relevant(&hits[0]) < 1.0, "{hits}");
    assert!(hits[0]["score"]["coverage"].as_f64().is_some_and(|c| c > 0.5), "{hits}");
    // A floor between the two keeps the better one only; above both, nothing is relevant.
    let floor = format!("retrieval.min_relevant={}", (relevant(&hits[0]) + relevant(&hits[1])) / 2.0);
    let kept = m.json(&["--set", &floor, "recall", "what did melanie paint at the lake last summer"]);
    assert_eq!(kept.as_array().map(Vec::len), Some(1), "{kept}");
    let none = m.json(&["--set", "retrieval.min_relevant=0.99", "recall", "what did melanie paint at the lake last summer"]);
    assert_eq!(none, serde_json::json!([]));
    let out = m.run(&["--set", "retrieval.min_relevant=0.99", "recall", "what did melanie paint at the lake last summer"]);
    assert!(out.status.success() && String::from_utf8_lossy(&out.stderr).contains("no matching records"));
}

#[test]
fn init_ingest_recall_revise_and_inspect_with_json() {
    let m = Mneme::new();
    let init = m.json(&["init"]);
    assert_eq!(init["schema_version"], mneme_store::SCHEMA_VERSION);
    assert_eq!(init["encrypted"], false);
    m.ok(&["init"]); // idempotent

    let fact =
        m.json(&["ingest", "observation", "--subject", "Docker", "--predicate", "requires", "--object", "sg wrapper", "--tag", "infra"]);
    let id = fact["id"].as_str().expect("id").to_string();
    assert_eq!(fact["record"]["memory_type"], "semantic");
    let event = m.ok(&["ingest", "event", "--text", "Howard prefers tabs", "--sender", "howard", "--at", "2026-01-02T10:00:00Z"]);
    assert_eq!(event.trim().len(), 36, "human output of an ingest is the bare id");

    let hits = m.json(&["recall", "docker wrapper"]);
    assert_eq!(hits[0]["record"]["id"], id.as_str());
    assert!(hits[0]["score"]["bm25"].as_f64().is_some());

    let new = m.json(&["supersede", &id, "--object", "rootless mode", "--rationale", "moved to rootless"]);
    let new_id = new["id"].as_str().expect("id").to_string();
    assert_eq!(new["record"]["payload"]["object"], "rootless mode");
    let history = m.json(&["history", &new_id]);
    assert_eq!(history["ancestors"][0]["id"], id.as_str());
    let old = m.json(&["show", &id]);
    assert_eq!(old["record"]["status"], "superseded");
    let explain = m.ok(&["recall", "docker", "--explain"]);
    assert!(explain.contains("rootless") && !explain.contains("sg wrapper") && explain.contains("score"), "{explain}");

    let skill = m.ok(&["ingest", "competence", "--skill", "skill:docker+exec", "--step", "use sg"]).trim().to_string();
    let outcome = m.json(&[
        "ingest",
        "outcome",
        "--target",
        &skill,
        "--result",
        "failure",
        "--failure-mode",
        "permission denied",
        "--duration-ms",
        "50",
    ]);
    assert_eq!(outcome["target"]["payload"]["performance"]["failure_count"], 1);
    m.ok(&["reinforce", &skill, "--amount", "0.3"]);
    let metrics = m.json(&["metrics"]);
    assert_eq!(metrics["total_records"], 5);
    assert_eq!(metrics["by_status"]["superseded"], 1);
    let decay = m.json(&["decay"]);
    assert_eq!(decay["dry_run"], true);
}

#[test]
fn event_text_can_come_from_stdin() {
    let m = Mneme::init();
    let mut child =
        m.command().args(["ingest", "event", "--text", "-"]).stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().expect("spawn");
    child.stdin.take().expect("stdin").write_all("multi\nline — ünïcode".as_bytes()).expect("write");
    let out = child.wait_with_output().expect("wait");
    assert!(out.status.success());
    let id = String::from_utf8(out.stdout).expect("utf-8");
    let shown = m.json(&["show", id.trim()]);
    assert_eq!(shown["record"]["payload"]["text"], "multi\nline — ünïcode");
}

#[test]
fn a_closed_stdout_is_not_a_crash() {
    let m = Mneme::init();
    for i in 0..3 {
        m.ok(&["ingest", "event", "--text", &format!("pipe test {i}")]);
    }
    let mut child = m.command().args(["recall", "pipe", "--explain"]).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("spawn");
    drop(child.stdout.take()); // the reader goes away before mneme writes
    let out = child.wait_with_output().expect("wait");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(out.status.code(), Some(0), "{stderr}");
}

/// The test suites' copy of the model files (`mneme_testkit::model_dir`).
pub(crate) fn packaged_model() -> std::path::PathBuf {
    mneme_testkit::model_dir(
        mneme_embed::DEFAULT_MODEL,
        |dir| mneme_embed::verify_model_dir(dir).is_ok(),
        |dest, python| {
            mneme_embed::install_model(dest, mneme_embed::ModelSource::Pip, python, &mut |step| eprintln!("mneme-testkit: {step}"))
                .map_err(|e| e.to_string())
        },
    )
}

#[test]
fn model_install_verifies_and_never_half_installs() {
    let m = Mneme::new();
    let status = m.json(&["model", "status"]);
    assert_eq!((status["installed"].as_bool(), status["verified"].as_bool()), (Some(false), Some(false)), "{status}");
    // A damaged copy is refused and nothing is left behind.
    let bad = tempfile::tempdir().expect("dir");
    for f in ["config.json", "tokenizer.json", "model.safetensors"] {
        std::fs::copy(packaged_model().join(f), bad.path().join(f)).expect("copy");
    }
    let mut t = std::fs::read(bad.path().join("tokenizer.json")).expect("read");
    t[100] ^= 1;
    std::fs::write(bad.path().join("tokenizer.json"), t).expect("write");
    let out = m.run(&["model", "install", "--from", bad.path().to_str().expect("utf-8")]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("sha256"), "{}", String::from_utf8_lossy(&out.stderr));
    let shared = m.dir.path().join("model-cache/all-MiniLM-L6-v2");
    assert!(!shared.exists() && !m.dir.path().join("models/all-MiniLM-L6-v2").exists());
    // The real files install, verify and load, into the machine-wide cache.
    let done = m.json(&["model", "install", "--from", packaged_model().to_str().expect("utf-8")]);
    assert_eq!((done["action"].as_str(), done["path"].as_str()), (Some("installed"), shared.to_str()), "{done}");
    let status = m.json(&["model", "status"]);
    assert_eq!((status["verified"].as_bool(), status["dimension"].as_u64()), (Some(true), Some(384)), "{status}");
    assert_eq!(m.json(&["model", "install"])["action"], "already installed");
    // Another data directory on the same machine uses the same copy.
    let other = tempfile::tempdir().expect("dir");
    let out = m.command().args(["--json", "--data-dir", other.path().to_str().expect("utf-8"), "model", "status"]).output().expect("run");
    let status: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!((status["verified"].as_bool(), status["path"].as_str()), (Some(true), shared.to_str()), "{status}");
}

/// The subcommand names listed under "Commands:" in a help text.
fn subcommands(help: &str) -> Vec<String> {
    help.lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .filter(|c| c != "help")
        .collect()
}

/// Every command's `--help`: each option and argument says what it is for, every command
/// that does something shows examples, and the global options are grouped apart.
#[test]
fn every_command_documents_its_options_and_shows_examples() {
    let m = Mneme::new();
    let mut todo: Vec<Vec<String>> = subcommands(&m.ok(&["--help"])).into_iter().map(|c| vec![c]).collect();
    let mut problems = Vec::new();
    let mut seen = 0;
    while let Some(path) = todo.pop() {
        if path == ["bench"] {
            continue; // hands everything to mneme-bench, whose own --help documents it
        }
        let mut args: Vec<&str> = path.iter().map(String::as_str).collect();
        args.push("--help");
        let help = m.ok(&args);
        seen += 1;
        if help.lines().next().is_none_or(|l| l.trim().is_empty() || l.starts_with("Usage:")) {
            problems.push(format!("`mneme {}` says nothing about what it does", path.join(" ")));
        }
        let nested = subcommands(&help);
        if !nested.is_empty() {
            todo.extend(nested.into_iter().map(|c| [path.clone(), vec![c]].concat()));
            continue;
        }
        let name = path.join(" ");
        if !help.split_once("Examples:\n  ").is_some_and(|(_, examples)| examples.contains("mneme ")) {
            problems.push(format!("`mneme {name}` shows no example"));
        }
        let mut section = "";
        for line in help.lines() {
            if !line.starts_with(' ') && line.ends_with(':') {
                section = line;
                continue;
            }
            let entry = line.trim_start();
            if (section == "Options:" || section == "Arguments:")
                && (entry.starts_with('-') || entry.starts_with('<') || entry.starts_with('['))
            {
                // "  --flag <VALUE>   description": a description follows two spaces.
                if !entry.trim_end().contains("  ") {
                    problems.push(format!("`mneme {name}`: {entry:?} has no description"));
                }
                if entry.starts_with("--data-dir") || entry.starts_with("--json") {
                    problems.push(format!("`mneme {name}`: global option {entry:?} is not under \"Global options:\""));
                }
            }
        }
    }
    assert!(seen > 40, "only {seen} commands found");
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
