//! End-to-end tests of the `mneme` binary in temp directories: the demo flow, `--json`,
//! every class of bad input (each must leave the store unchanged), encryption from the
//! environment, concurrent writers, crash consistency, and the daemon as a process:
//! serve, up/down/status, the supervisor, `mneme hook`, config.

mod agent;
mod bad_input;
mod clients;
mod daemon;
mod docs;
mod dump;
mod durability;
mod flows;
mod forget;
mod mcp;
mod membrane;
mod on_postgres;
mod policy;
mod tidy;
mod workspace;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// A data directory and a way to run `mneme` against it.
#[derive(Debug)]
pub struct Mneme {
    pub dir: tempfile::TempDir,
    pub key: Option<String>,
}

impl Default for Mneme {
    fn default() -> Self {
        Self::new()
    }
}

impl Mneme {
    pub fn new() -> Self {
        Mneme { dir: tempfile::tempdir().expect("tempdir"), key: None }
    }

    /// A fresh, initialised store.
    pub fn init() -> Self {
        let m = Self::new();
        m.ok(&["init"]);
        m
    }

    pub fn command(&self) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_mneme"));
        cmd.env("MNEME_HOME", self.dir.path())
            // Never the machine's shared model cache: each test has its own.
            .env("MNEME_MODEL_CACHE", self.dir.path().join("model-cache"))
            .env_remove("MNEME_CONFIG")
            .env_remove("MNEME_ENCRYPTION_KEY")
            .env_remove("MNEME_ENCRYPTION_KEY_FILE")
            .env_remove("MNEME_DATABASE_URL")
            .env_remove("MNEME_DATABASE_PASSWORD")
            .env_remove("MNEME_DATABASE_PASSWORD_FILE")
            .stdin(Stdio::null());
        if let Some(key) = &self.key {
            cmd.env("MNEME_ENCRYPTION_KEY", key);
        }
        cmd
    }

    pub fn run(&self, args: &[&str]) -> Output {
        self.command().args(args).output().expect("mneme runs")
    }

    /// Runs and requires success; returns stdout.
    pub fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(out.status.success(), "mneme {args:?} failed: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).expect("utf-8 output")
    }

    /// Runs `--json` and parses stdout.
    pub fn json(&self, args: &[&str]) -> serde_json::Value {
        let mut all = vec!["--json"];
        all.extend_from_slice(args);
        serde_json::from_str(&self.ok(&all)).expect("valid JSON output")
    }

    /// Runs, requires the exit code, returns stderr.
    pub fn fails(&self, args: &[&str], code: i32) -> String {
        let out = self.run(args);
        let stderr = String::from_utf8_lossy(&out.stderr).to_string();
        assert_eq!(out.status.code(), Some(code), "mneme {args:?}: {stderr}");
        stderr
    }

    pub fn db(&self) -> PathBuf {
        self.dir.path().join("mneme.db")
    }

    /// Everything a failed command must leave as it was: record and audit counts.
    pub fn footprint(&self) -> (i64, i64) {
        let m = self.json(&["metrics"]);
        (m["total_records"].as_i64().expect("count"), m["audit_entries"].as_i64().expect("count"))
    }
}

pub fn read(path: &Path) -> Vec<u8> {
    std::fs::read(path).expect("readable")
}
