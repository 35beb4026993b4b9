//! Workspace configuration: `WorkspaceConfig` is the serde form (the `[workspace]` table
//! of `config.toml`, strings and numbers only), `WorkspaceSettings` the validated, typed
//! form every function of this crate takes. Validation happens once, in
//! `WorkspaceConfig::settings`, and its errors name the key and the bad value.
//!
//! The workspace directory is not decided here: the binary picks it (`DIR` argument, else
//! `$MNEME_WORKSPACE`, else the config's `dir`, else `workspace/` in the data directory,
//! see `resolve_dir`) and passes it in.

use std::path::{Path, PathBuf};

use jiff::tz::TimeZone;
use serde::{Deserialize, Serialize};

use crate::error::{WorkspaceError, WorkspaceResult};
use crate::paths;

/// Default size budget of `identity.md`, in bytes.
pub const DEFAULT_IDENTITY_BUDGET: u64 = 1024;
/// Default size budget of `state.md`, in bytes.
pub const DEFAULT_STATE_BUDGET: u64 = 2048;
/// Default size budget of `references.md`, in bytes.
pub const DEFAULT_REFERENCES_BUDGET: u64 = 1024;
/// Default number of unsummarized conversations above which a Memory Sync is requested.
pub const DEFAULT_SYNC_THRESHOLD: u64 = 30;
/// Default context usage (percent) at which the pre-compaction flush is requested.
pub const DEFAULT_FLUSH_AT_PERCENT: u8 = 70;
/// Default quiet time after the agent's last activity before require-idle tasks run, in seconds.
pub const DEFAULT_IDLE_AFTER_SECS: u64 = 120;
/// Default time a changed file must stay unchanged before the daemon re-indexes it, in ms.
pub const DEFAULT_REINDEX_DEBOUNCE_MS: u64 = 2000;
/// Default id of the primary user (whose profile is injected at session start).
pub const DEFAULT_PRIMARY_USER: &str = "owner";

/// The `[workspace]` table as written in a config file. Every key is optional.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct WorkspaceConfig {
    /// The workspace directory; `None` lets the binary choose (see `resolve_dir`).
    pub dir: Option<PathBuf>,
    /// An IANA time zone name (`Asia/Tokyo`); `None` = the system's zone (jiff honours
    /// `$TZ`), falling back to UTC when the system's cannot be determined.
    pub timezone: Option<String>,
    /// The user whose `users/<id>/profile.md` is injected at session start.
    pub primary_user: String,
    /// Size budgets of the always-loaded files, in bytes.
    pub budgets: BudgetConfig,
    /// Request a Memory Sync when more than this many conversations are unsummarized.
    pub sync_threshold: u64,
    /// Request the pre-compaction flush at or above this context usage, in percent.
    pub flush_at_percent: u8,
    /// Whether the daemon runs due scheduled tasks (`mneme schedule run-due` works either way).
    pub scheduler: bool,
    /// The agent counts as idle this many seconds after its last hook event.
    pub idle_after_secs: u64,
    /// Whether the daemon keeps the workspace search index current.
    pub index: bool,
    /// A changed file is re-indexed once it has stayed unchanged this long (ms).
    pub reindex_debounce_ms: u64,
    /// A directory whose files replace or add to the built-in agent files `mneme workspace
    /// sync` deploys (same layout: `HEARTBEAT.md`, `SKILL.md`, `koog/`, `modules/`,
    /// `skills/mneme-memory/SKILL.md`, `CLAUDE-memory-section.md`).
    pub agent_files: Option<PathBuf>,
    /// Also keep the Claude Code instruction files current: `.claude/skills/mneme-memory/
    /// SKILL.md` and the memory section of `CLAUDE.md` (they are kept current anyway once
    /// they exist, e.g. after `mneme workspace init --agent-docs`).
    pub agent_docs: bool,
    /// Run the sync at agent start (the session-start hooks) and daemon start.
    pub sync_on_start: bool,
}

/// Size budgets of the always-loaded files, in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct BudgetConfig {
    /// Size budget of `identity.md`, in bytes (at least 1): the workspace status and
    /// consolidation reports flag the file when it is larger; nothing is cut.
    pub identity: u64,
    /// Size budget of `state.md`, in bytes (at least 1), flagged the same way.
    pub state: u64,
    /// Size budget of `references.md`, in bytes (at least 1), flagged the same way.
    pub references: u64,
    /// The effective playbook's patterns injected at session start.
    pub playbook: u64,
}

/// Validated workspace settings.
#[derive(Debug, Clone)]
pub struct WorkspaceSettings {
    /// The workspace root. It need not exist before `init`.
    pub dir: PathBuf,
    /// The zone that decides "today" (session log names, daily logs, rotation) and in
    /// which cron expressions are evaluated.
    pub timezone: TimeZone,
    /// A plain directory name under `users/` (validated).
    pub primary_user: String,
    pub budgets: BudgetConfig,
    pub sync_threshold: u64,
    /// In 1..=100.
    pub flush_at_percent: u8,
    pub scheduler: bool,
    pub idle_after: std::time::Duration,
    pub index: bool,
    pub reindex_debounce: std::time::Duration,
    pub agent_files: Option<PathBuf>,
    pub agent_docs: bool,
    pub sync_on_start: bool,
}

impl Default for WorkspaceConfig {
    fn default() -> Self {
        Self {
            dir: None,
            timezone: None,
            primary_user: DEFAULT_PRIMARY_USER.to_owned(),
            budgets: BudgetConfig::default(),
            sync_threshold: DEFAULT_SYNC_THRESHOLD,
            flush_at_percent: DEFAULT_FLUSH_AT_PERCENT,
            scheduler: true,
            idle_after_secs: DEFAULT_IDLE_AFTER_SECS,
            index: true,
            reindex_debounce_ms: DEFAULT_REINDEX_DEBOUNCE_MS,
            agent_files: None,
            agent_docs: false,
            sync_on_start: true,
        }
    }
}

impl Default for BudgetConfig {
    fn default() -> Self {
        Self {
            identity: DEFAULT_IDENTITY_BUDGET,
            state: DEFAULT_STATE_BUDGET,
            references: DEFAULT_REFERENCES_BUDGET,
            playbook: crate::playbook::INJECT_BUDGET as u64,
        }
    }
}

impl WorkspaceConfig {
    /// Validates the configuration into settings for the workspace at `dir` (already
    /// chosen by the caller, see `resolve_dir`).
    pub fn settings(&self, dir: PathBuf) -> WorkspaceResult<WorkspaceSettings> {
        let timezone = match &self.timezone {
            Some(name) => parse_timezone(name)?,
            None => TimeZone::try_system().unwrap_or(TimeZone::UTC),
        };
        if paths::check_name(&self.primary_user).is_err() {
            return Err(WorkspaceError::Config {
                key: "workspace.primary_user",
                value: self.primary_user.clone(),
                reason: "must be one plain directory name (no `/`, not `.` or `..`, not hidden)".to_owned(),
            });
        }
        for (key, value) in [
            ("workspace.budgets.identity", self.budgets.identity),
            ("workspace.budgets.state", self.budgets.state),
            ("workspace.budgets.references", self.budgets.references),
        ] {
            if value == 0 {
                return Err(WorkspaceError::Config {
                    key,
                    value: value.to_string(),
                    reason: "a budget must be at least 1 byte".to_owned(),
                });
            }
        }
        if !(1..=100).contains(&self.flush_at_percent) {
            return Err(WorkspaceError::Config {
                key: "workspace.flush_at_percent",
                value: self.flush_at_percent.to_string(),
                reason: "must be a percentage in 1..=100".to_owned(),
            });
        }
        Ok(WorkspaceSettings {
            dir,
            timezone,
            primary_user: self.primary_user.clone(),
            budgets: self.budgets,
            sync_threshold: self.sync_threshold,
            flush_at_percent: self.flush_at_percent,
            scheduler: self.scheduler,
            idle_after: std::time::Duration::from_secs(self.idle_after_secs),
            index: self.index,
            reindex_debounce: std::time::Duration::from_millis(self.reindex_debounce_ms),
            agent_files: self.agent_files.clone(),
            agent_docs: self.agent_docs,
            sync_on_start: self.sync_on_start,
        })
    }
}

impl WorkspaceSettings {
    /// Default settings for the workspace at `dir` in `timezone` (tests and embedders).
    pub fn new(dir: impl Into<PathBuf>, timezone: TimeZone) -> Self {
        let defaults = WorkspaceConfig::default();
        Self {
            dir: dir.into(),
            timezone,
            primary_user: defaults.primary_user,
            budgets: defaults.budgets,
            sync_threshold: defaults.sync_threshold,
            flush_at_percent: defaults.flush_at_percent,
            scheduler: defaults.scheduler,
            idle_after: std::time::Duration::from_secs(defaults.idle_after_secs),
            index: defaults.index,
            reindex_debounce: std::time::Duration::from_millis(defaults.reindex_debounce_ms),
            agent_files: defaults.agent_files,
            agent_docs: defaults.agent_docs,
            sync_on_start: defaults.sync_on_start,
        }
    }

    /// The zone's IANA name, or `UTC` / `local` when it has none (a fixed offset or a
    /// system zone read from a file without a name).
    pub fn timezone_name(&self) -> String {
        match self.timezone.iana_name() {
            Some(name) => name.to_owned(),
            None if self.timezone == TimeZone::UTC => "UTC".to_owned(),
            None => "local".to_owned(),
        }
    }

    /// The civil date of `now` in the workspace's zone: what "today" means for session
    /// logs, daily logs and rotation.
    pub fn today(&self, now: jiff::Timestamp) -> jiff::civil::Date {
        now.to_zoned(self.timezone.clone()).date()
    }

    /// The size budget of a workspace-relative path, if it has one.
    pub fn budget_for(&self, relative: &str) -> Option<u64> {
        match relative {
            paths::IDENTITY => Some(self.budgets.identity),
            paths::STATE => Some(self.budgets.state),
            paths::REFERENCES => Some(self.budgets.references),
            _ => None,
        }
    }
}

/// Looks up an IANA time zone name; the error names the value.
pub fn parse_timezone(name: &str) -> WorkspaceResult<TimeZone> {
    TimeZone::get(name.trim()).map_err(|error| WorkspaceError::Config {
        key: "workspace.timezone",
        value: name.to_owned(),
        reason: format!("not a known IANA time zone name (such as `Asia/Tokyo` or `UTC`): {error}"),
    })
}

/// Picks the workspace directory: the explicit argument, else `$MNEME_WORKSPACE` (passed
/// in as `env`; empty counts as unset), else the config's `dir`, else `workspace/` in the
/// data directory.
pub fn resolve_dir(explicit: Option<&Path>, env: Option<&std::ffi::OsStr>, config: &WorkspaceConfig, data_dir: &Path) -> PathBuf {
    if let Some(dir) = explicit {
        return dir.to_path_buf();
    }
    if let Some(dir) = env.filter(|value| !value.is_empty()) {
        return PathBuf::from(dir);
    }
    if let Some(dir) = &config.dir {
        return dir.clone();
    }
    data_dir.join("workspace")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_match_the_seed() {
        let settings = WorkspaceConfig { timezone: Some("UTC".into()), ..Default::default() }
            .settings(PathBuf::from("/w"))
            .expect("defaults are valid");
        assert_eq!(settings.budgets, BudgetConfig { identity: 1024, state: 2048, references: 1024, playbook: 4000 });
        assert_eq!(settings.sync_threshold, 30);
        assert_eq!(settings.flush_at_percent, 70);
        assert_eq!(settings.primary_user, "owner");
        assert_eq!(settings.budget_for("state.md"), Some(2048));
        assert_eq!(settings.budget_for("reference/decisions.md"), None);
    }

    #[test]
    fn a_bad_timezone_is_named_in_the_error() {
        let config = WorkspaceConfig { timezone: Some("Mars/Olympus".into()), ..Default::default() };
        let error = config.settings(PathBuf::from("/w")).expect_err("unknown zone");
        let message = error.to_string();
        assert!(message.contains("workspace.timezone"), "{message}");
        assert!(message.contains("Mars/Olympus"), "{message}");
    }

    #[test]
    fn a_primary_user_that_is_a_path_is_refused() {
        for bad in ["", "..", "a/b", ".hidden", "a\\b"] {
            let config = WorkspaceConfig { primary_user: bad.into(), ..Default::default() };
            let error = config.settings(PathBuf::from("/w")).expect_err(bad);
            assert!(error.to_string().contains("workspace.primary_user"), "{bad}: {error}");
        }
    }

    #[test]
    fn zero_budgets_and_out_of_range_percentages_are_refused() {
        let config = WorkspaceConfig { budgets: BudgetConfig { state: 0, ..Default::default() }, ..Default::default() };
        let error = config.settings(PathBuf::from("/w")).expect_err("zero budget");
        assert!(error.to_string().contains("workspace.budgets.state"), "{error}");
        let config = WorkspaceConfig { flush_at_percent: 101, ..Default::default() };
        let error = config.settings(PathBuf::from("/w")).expect_err("101 %");
        assert!(error.to_string().contains("flush_at_percent"), "{error}");
    }

    #[test]
    fn unknown_keys_are_refused_and_missing_keys_default() {
        let config: WorkspaceConfig =
            serde_json::from_str(r#"{"timezone":"Asia/Tokyo","budgets":{"state":4096}}"#).expect("partial config");
        assert_eq!(config.budgets.state, 4096);
        assert_eq!(config.budgets.identity, 1024);
        assert_eq!(config.primary_user, "owner");
        let error = serde_json::from_str::<WorkspaceConfig>(r#"{"timezon":"UTC"}"#).expect_err("typo in key");
        assert!(error.to_string().contains("timezon"), "{error}");
    }

    #[test]
    fn the_directory_is_argument_then_env_then_config_then_data_dir() {
        let data = Path::new("/data");
        let config = WorkspaceConfig { dir: Some("/from-config".into()), ..Default::default() };
        let env = std::ffi::OsStr::new("/from-env");
        let pick = |explicit: Option<&str>, env: Option<&std::ffi::OsStr>, config: &WorkspaceConfig| {
            resolve_dir(explicit.map(Path::new), env, config, data)
        };
        assert_eq!(pick(Some("/arg"), Some(env), &config), PathBuf::from("/arg"));
        assert_eq!(pick(None, Some(env), &config), PathBuf::from("/from-env"));
        assert_eq!(pick(None, Some(std::ffi::OsStr::new("")), &config), PathBuf::from("/from-config"));
        assert_eq!(pick(None, None, &WorkspaceConfig::default()), PathBuf::from("/data/workspace"));
    }

    #[test]
    fn today_follows_the_zone() {
        // 2024-03-09 20:00 UTC is already 2024-03-10 in Tokyo.
        let now: jiff::Timestamp = "2024-03-09T20:00:00Z".parse().expect("timestamp");
        let tokyo = WorkspaceSettings::new("/w", parse_timezone("Asia/Tokyo").expect("tz"));
        let utc = WorkspaceSettings::new("/w", TimeZone::UTC);
        assert_eq!(tokyo.today(now).to_string(), "2024-03-10");
        assert_eq!(utc.today(now).to_string(), "2024-03-09");
        assert_eq!(tokyo.timezone_name(), "Asia/Tokyo");
        assert_eq!(utc.timezone_name(), "UTC");
    }
}
