//! The files of a fresh workspace, compiled into the binary from
//! `crates/mneme-workspace/templates/` (adapted from the zylos v3 seed's §5.2 and
//! appendix C), and their rendering. Rendering is pure: `workspace_files` returns what
//! `init` would write, without touching the disk.
//!
//! Placeholders are `{{timezone}}` (IANA name), `{{user}}` (primary user id), `{{date}}`
//! (today in the workspace's zone, `YYYY-MM-DD`) and `{{workspace}}` (the directory).

use std::path::PathBuf;

use jiff::civil::Date;

use crate::config::WorkspaceSettings;
use crate::paths;

/// One template: where it goes (workspace-relative; `{{user}}` is replaced) and its text.
#[derive(Debug, Clone, Copy)]
pub struct Template {
    pub path: &'static str,
    pub source: &'static str,
}

/// Every template, in the order `init` creates them.
pub const TEMPLATES: &[Template] = &[
    Template { path: paths::IDENTITY, source: include_str!("../templates/identity.md") },
    Template { path: paths::STATE, source: include_str!("../templates/state.md") },
    Template { path: paths::REFERENCES, source: include_str!("../templates/references.md") },
    Template { path: "users/{{user}}/profile.md", source: PROFILE },
    Template { path: "reference/decisions.md", source: include_str!("../templates/decisions.md") },
    Template { path: "reference/projects.md", source: include_str!("../templates/projects.md") },
    Template { path: "reference/preferences.md", source: include_str!("../templates/preferences.md") },
    Template { path: paths::CURRENT_SESSION, source: SESSION_LOG },
];

/// A user's profile (zylos §3.2); `{{user}}` is the user's id.
pub const PROFILE: &str = include_str!("../templates/profile.md");

/// The header of a fresh `sessions/current.md`; rotation reads the date back from it.
const SESSION_LOG: &str = include_str!("../templates/session.md");

/// The directories of a workspace, created by `init` even when nothing goes in them yet.
pub const DIRECTORIES: &[&str] = &[paths::USERS_DIR, paths::REFERENCE_DIR, paths::SESSIONS_DIR, paths::ARCHIVE_DIR, paths::MEMORY_DIR];

/// The values the placeholders take.
#[derive(Debug, Clone)]
pub struct TemplateVars {
    pub timezone: String,
    pub user: String,
    pub date: Date,
    pub workspace: String,
}

impl TemplateVars {
    /// The values for `settings` on the civil date `today`.
    pub fn new(settings: &WorkspaceSettings, today: Date) -> Self {
        Self {
            timezone: settings.timezone_name(),
            user: settings.primary_user.clone(),
            date: today,
            workspace: settings.dir.display().to_string(),
        }
    }
}

/// Replaces the placeholders in `source`.
pub fn render(source: &str, vars: &TemplateVars) -> String {
    source
        .replace("{{timezone}}", &vars.timezone)
        .replace("{{user}}", &vars.user)
        .replace("{{date}}", &vars.date.to_string())
        .replace("{{workspace}}", &vars.workspace)
}

/// Every file of a fresh workspace as (workspace-relative path, content).
pub fn workspace_files(settings: &WorkspaceSettings, today: Date) -> Vec<(PathBuf, String)> {
    let vars = TemplateVars::new(settings, today);
    TEMPLATES.iter().map(|template| (PathBuf::from(render(template.path, &vars)), render(template.source, &vars))).collect()
}

/// A fresh session log for `date`: `# Session Log: YYYY-MM-DD` and a blank line.
pub fn session_log(date: Date) -> String {
    SESSION_LOG.replace("{{date}}", &date.to_string())
}
