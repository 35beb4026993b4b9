//! Phase 1, the git backup (sinain §4.9), opt-in (`reflection.git.backup`): when the
//! workspace is its own git repository (its top level, never an enclosing project's),
//! commit everything changed as `auto: heartbeat <UTC time>`, and push when
//! `reflection.git.push` is on. A failure is recorded in the tick line and never fails
//! the tick. Git runs without a terminal prompt, with a timeout, and with a fallback
//! identity only when none is configured.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use jiff::Timestamp;
use serde_json::{Value, json};

use super::config::GitConfig;

/// Longest a git command may run.
pub const GIT_TIMEOUT: Duration = Duration::from_secs(60);

fn git(dir: &Path, args: &[&str]) -> Result<String, String> {
    let mut child = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_TERMINAL_PROMPT", "0")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run git: {e}"))?;
    let started = Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(_)) => break,
            Ok(None) if started.elapsed() > GIT_TIMEOUT => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("git {} timed out after {}s", args.first().unwrap_or(&""), GIT_TIMEOUT.as_secs()));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => return Err(format!("git: {e}")),
        }
    }
    let out = child.wait_with_output().map_err(|e| format!("git: {e}"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
    } else {
        let err = String::from_utf8_lossy(&out.stderr);
        Err(format!("git {} failed: {}", args.first().unwrap_or(&""), err.lines().last().unwrap_or("").trim()))
    }
}

/// Runs the backup (or says why not); the result as the tick line records it.
pub fn backup(dir: &Path, config: &GitConfig, now: Timestamp, dry_run: bool) -> Value {
    if !config.backup {
        return json!({ "status": "skipped", "reason": "reflection.git.backup is off" });
    }
    let top = match git(dir, &["rev-parse", "--show-toplevel"]) {
        Ok(top) => top,
        Err(_) => return json!({ "status": "skipped", "reason": "the workspace is not a git repository" }),
    };
    let same = std::fs::canonicalize(&top).ok() == std::fs::canonicalize(dir).ok();
    if !same {
        return json!({ "status": "skipped", "reason": format!("the workspace is inside the repository at {top}, not its top level") });
    }
    let changed = match git(dir, &["status", "--porcelain"]) {
        Ok(s) => s,
        Err(e) => return json!({ "status": "failed", "error": e }),
    };
    if changed.is_empty() {
        return json!({ "status": "nothing to commit" });
    }
    if dry_run {
        return json!({ "status": "skipped", "reason": "dry run" });
    }
    let identity: Vec<&str> = if git(dir, &["config", "user.email"]).is_ok() {
        Vec::new()
    } else {
        vec!["-c", "user.name=mneme", "-c", "user.email=mneme@localhost"]
    };
    let message = format!("auto: heartbeat {}", now.strftime("%Y-%m-%dT%H:%M:%SZ"));
    let excluded = [":(exclude).mneme.lock", ":(exclude).mneme-reflect.lock"];
    let mut add = vec!["add", "-A", "--", "."];
    add.extend(excluded);
    if let Err(e) = git(dir, &add) {
        return json!({ "status": "failed", "error": e });
    }
    let mut commit = identity.clone();
    commit.extend(["commit", "-q", "-m", &message]);
    if let Err(e) = git(dir, &commit) {
        return json!({ "status": "failed", "error": e });
    }
    let hash = git(dir, &["rev-parse", "--short", "HEAD"]).unwrap_or_default();
    let push = if config.push {
        match git(dir, &["push", "-q", &config.remote, &format!("HEAD:{}", config.branch)]) {
            Ok(_) => "ok".to_string(),
            Err(e) => format!("failed: {e}"),
        }
    } else {
        "disabled".to_string()
    };
    json!({ "status": "committed", "commit": hash, "push": push })
}
