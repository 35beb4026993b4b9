//! The policy table's CLI row: every `Operation` has its `mneme` command, or none (what
//! only a running daemon holds: its metrics, the relay's buffers, consolidation). The CLI
//! is the local owner, going through the same door (`Ops`, `AgentOps`' checks via
//! `Ops::owner`) as an unrestricted principal's request, so every command succeeds on
//! records a narrowed principal could neither see nor change: a `high` fact in `team-b`.
//! The match is exhaustive, so a new operation does not compile until it is placed here.

use mneme_server::op::Operation;

use crate::Mneme;

/// The targets: two `high` facts in scope `team-b`.
fn targets(m: &Mneme) -> (String, String) {
    let fact = |object: &str| {
        m.ok(&[
            "ingest",
            "observation",
            "--subject",
            "the gateway",
            "--predicate",
            "runs on",
            "--object",
            object,
            "--sensitivity",
            "high",
            "--scope",
            "team-b",
        ])
        .trim()
        .to_string()
    };
    (fact("port 8080"), fact("port 8081"))
}

/// The command for `op` (arguments, and stdin), or `None` when the CLI has none.
fn command(op: Operation, one: &str, two: &str) -> Option<(Vec<String>, Option<&'static str>)> {
    use Operation::*;
    let args: &[&str] = match op {
        IngestEvent => &["ingest", "event", "--text", "policy table event"],
        IngestToolOutput => &["ingest", "tool", "--tool", "ls"],
        IngestObservation => &["ingest", "observation", "--subject", "policy", "--predicate", "is", "--object", "tested"],
        IngestOutcome => &["ingest", "outcome", "--target", one, "--result", "success"],
        IngestWorkingState => &["ingest", "working", "--thread", "t", "--state", "executing"],
        Retrieve => &["recall", "gateway", "--local"],
        RetrieveById => &["show", one],
        History => &["history", one],
        Supersede => &["supersede", one, "--object", "port 9090", "--rationale", "the policy table"],
        Fork => &["fork", one, "--summary", "a variant", "--rationale", "the policy table"],
        Retract => &["retract", one, "--rationale", "the policy table"],
        Merge => &["merge", one, two, "--rationale", "the policy table"],
        Contest => &["contest", one, "--by", two, "--rationale", "the policy table"],
        Reinforce => &["reinforce", one, "--rationale", "the policy table"],
        Penalize => &["penalize", one, "--rationale", "the policy table"],
        GetMetrics => &["metrics"],
        LogConversation => &["sync", "log", "--channel", "cli", "before the checkpoint"],
        SyncStatus => &["sync", "status"],
        SyncFetch => &["sync", "fetch", "--begin", "1", "--end", "1"],
        SyncCheckpoint => &["sync", "checkpoint", "1", "--summary", "the policy table"],
        SearchFiles => &["search", "policy"],
        Forget => &["forget", two, "--yes", "--reason", "the policy table"],
        Hook => return Some((vec!["hook".into(), "message_received".into(), "--local".into()], Some(r#"{"content":"hello"}"#))),
        ReflectTick => &["reflect", "tick", "--dry-run"],
        ReflectStatus => &["reflect", "status"],
        ReflectFeedback => &["reflect", "feedback", "--score", "0.5"],
        ReflectSpawnResult => &["reflect", "spawn-result", "s-1", "useful"],
        InnerStatus => &["inner", "status"],
        InnerContext => &["inner", "context", "--level", "2"],
        InnerEvent => &["inner", "event", "spark", "--what", "policy tables"],
        InnerRun => &["inner", "run", "chronicle", "--dry-run"],
        InnerWrite => {
            return Some((
                vec!["inner".into(), "write".into(), "--job".into(), "evolve".into(), "QUEUE.md".into(), "--append".into()],
                Some("- [ ] P3 policy\n"),
            ));
        }
        ModuleList => &["module", "list"],
        ModuleInfo => &["module", "info", "base-behaviors"],
        ModuleChange => &["module", "activate", "base-behaviors"],
        ModuleExtract => &["module", "extract", "policy-extract", "--domain", "policy tables", "--dry-run"],
        WorkspaceSync => &["workspace", "sync"],
        // The playbook and the workspace's files are files the CLI user reads directly.
        ReflectPlaybook | WorkspaceFiles | WorkspaceFile => return None,
        // Only a running daemon holds these: its own status and metrics, the consolidation
        // buffer, the salience curve of its API, and the relay's in-memory rings.
        Status | Prometheus | SalienceCurve | Consolidate | RelayFeed | RelayFeedPoll | RelaySense | RelayHealth | RelayLast
        | RelayHistory | RelayContext | RelayConfig | RelayConfigure | RelayTick => return None,
    };
    Some((args.iter().map(|a| a.to_string()).collect(), None))
}

#[test]
fn every_operation_the_cli_offers_runs_through_the_door_as_the_local_owner() {
    let m = Mneme::init();
    let ws = m.dir.path().join("workspace");
    m.ok(&["workspace", "init"]);
    // One heartbeat output (a day ago), so feedback has something to score.
    let yesterday = jiff::Timestamp::now() - jiff::SignedDuration::from_hours(24);
    std::fs::create_dir_all(ws.join("memory/playbook-logs")).expect("log dir");
    let line =
        serde_json::json!({ "kind": "output", "ts": yesterday.to_string(), "outputId": "t-policy", "suggestion": "Check the table" });
    std::fs::write(
        ws.join(format!("memory/playbook-logs/{}.jsonl", yesterday.to_zoned(jiff::tz::TimeZone::UTC).date())),
        format!("{line}\n"),
    )
    .expect("log");
    m.ok(&["workspace", "sync"]);
    std::fs::write(ws.join("memory/sinain-playbook.md"), "# Playbook\n\n## Patterns\n- Check the policy table before a release\n")
        .expect("playbook");
    let mut failures = Vec::new();
    let mut offered = 0;
    for op in Operation::ALL {
        let (one, two) = targets(&m);
        let Some((args, stdin)) = command(op, &one, &two) else { continue };
        offered += 1;
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = match stdin {
            None => m.run(&args),
            Some(text) => {
                use std::io::Write as _;
                let mut child = m
                    .command()
                    .args(&args)
                    .stdin(std::process::Stdio::piped())
                    .stdout(std::process::Stdio::piped())
                    .stderr(std::process::Stdio::piped())
                    .spawn()
                    .expect("mneme runs");
                child.stdin.take().expect("stdin").write_all(text.as_bytes()).expect("stdin written");
                child.wait_with_output().expect("mneme ends")
            }
        };
        if !out.status.success() {
            failures.push(format!(
                "mneme {} ({}): exit {:?}: {}",
                args.join(" "),
                op.name(),
                out.status.code(),
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
    }
    assert!(failures.is_empty(), "{} of {offered} commands:\n{}", failures.len(), failures.join("\n"));
    assert!(offered >= 35, "only {offered} operations have a command");
}
