//! `status`: sizes, modification times and budgets of every file in the workspace, as a
//! serialisable report and as text with OVER BUDGET markers (the seed's
//! `memory-status.js`, with times shown in the workspace's zone).
//!
//! Hidden entries (names starting with `.`: the lock file, stray temporary files) and
//! symlinks are not listed; symlinks are not followed.

use std::path::{Path, PathBuf};

use jiff::Timestamp;
use jiff::tz::TimeZone;
use serde::Serialize;

use crate::config::WorkspaceSettings;
use crate::error::{WorkspaceError, WorkspaceResult};
use crate::paths;

/// The state of the workspace's files.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StatusReport {
    pub dir: PathBuf,
    pub timezone: String,
    /// Every file, sorted by path.
    pub files: Vec<FileStatus>,
    pub file_count: usize,
    pub total_bytes: u64,
    /// The budgeted files that exist, in the order identity, state, references.
    pub budgets: Vec<BudgetStatus>,
    /// Whether any budgeted file is over its budget.
    pub over_budget: bool,
    /// Always-loaded files (and the primary user's profile) that do not exist.
    pub missing: Vec<String>,
}

/// One file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FileStatus {
    /// Workspace-relative, `/`-separated.
    pub path: String,
    pub size_bytes: u64,
    pub modified: Timestamp,
    pub budget_bytes: Option<u64>,
    pub over_budget: bool,
}

/// One budgeted file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BudgetStatus {
    pub path: String,
    pub size_bytes: u64,
    pub budget_bytes: u64,
    /// `size / budget`, rounded to the nearest percent.
    pub percent: u64,
    pub over_budget: bool,
}

/// Scans the workspace (which must exist).
pub fn status(settings: &WorkspaceSettings) -> WorkspaceResult<StatusReport> {
    let root = paths::resolve(&settings.dir, "")?;
    let mut files = Vec::new();
    scan(&root, &root, settings, &mut files)?;
    files.sort_by(|a, b| a.path.cmp(&b.path));

    let profile = paths::display_relative(Path::new(""), &paths::profile(&settings.primary_user)?);
    let mut budgets = Vec::new();
    let mut missing = Vec::new();
    for name in [paths::IDENTITY, paths::STATE, paths::REFERENCES, profile.as_str()] {
        match files.iter().find(|file| file.path == name) {
            None => missing.push(name.to_owned()),
            Some(file) => {
                if let Some(budget) = file.budget_bytes {
                    budgets.push(BudgetStatus {
                        path: file.path.clone(),
                        size_bytes: file.size_bytes,
                        budget_bytes: budget,
                        percent: (file.size_bytes * 100 + budget / 2) / budget,
                        over_budget: file.over_budget,
                    });
                }
            }
        }
    }
    Ok(StatusReport {
        dir: settings.dir.clone(),
        timezone: settings.timezone_name(),
        file_count: files.len(),
        total_bytes: files.iter().map(|file| file.size_bytes).sum(),
        over_budget: budgets.iter().any(|budget| budget.over_budget),
        files,
        budgets,
        missing,
    })
}

/// The report as text, times in `timezone`.
pub fn render_status(report: &StatusReport, timezone: &TimeZone) -> String {
    let title = format!("Memory Status Report: {} ({})", report.dir.display(), report.timezone);
    let mut lines = vec![title.clone(), "=".repeat(title.chars().count()), String::new()];
    for file in &report.files {
        let modified = file.modified.to_zoned(timezone.clone()).strftime("%Y-%m-%d %H:%M");
        let marker = if file.over_budget { " [OVER BUDGET]" } else { "" };
        lines.push(format!("{:>8}  {modified}  {}{marker}", format_size(file.size_bytes), file.path));
    }
    lines.push(String::new());
    let plural = if report.file_count == 1 { "" } else { "s" };
    lines.push(format!("Total: {} across {} file{plural}", format_size(report.total_bytes), report.file_count));
    for budget in &report.budgets {
        let marker = if budget.over_budget { " OVER BUDGET" } else { "" };
        lines.push(format!(
            "{} budget: {} / {} ({}%){marker}",
            budget.path,
            format_size(budget.size_bytes),
            format_size(budget.budget_bytes),
            budget.percent
        ));
    }
    if !report.missing.is_empty() {
        lines.push(format!("Missing: {}", report.missing.join(", ")));
    }
    let mut text = lines.join("\n");
    text.push('\n');
    text
}

/// `512B`, `1.5KB`, `2.0MB`.
pub fn format_size(bytes: u64) -> String {
    const KIB: u64 = 1024;
    // Sizes are shown to one decimal; the float conversion is exact below 2^53 bytes.
    #[allow(clippy::cast_precision_loss)]
    let scaled = |unit: u64| bytes as f64 / unit as f64;
    if bytes < KIB {
        format!("{bytes}B")
    } else if bytes < KIB * KIB {
        format!("{:.1}KB", scaled(KIB))
    } else {
        format!("{:.1}MB", scaled(KIB * KIB))
    }
}

fn scan(root: &Path, dir: &Path, settings: &WorkspaceSettings, files: &mut Vec<FileStatus>) -> WorkspaceResult<()> {
    let entries = std::fs::read_dir(dir).map_err(|error| WorkspaceError::io("cannot list", dir, error))?;
    for entry in entries {
        let entry = entry.map_err(|error| WorkspaceError::io("cannot list", dir, error))?;
        if entry.file_name().to_string_lossy().starts_with('.') {
            continue;
        }
        let path = entry.path();
        let metadata = entry.metadata().map_err(|error| WorkspaceError::io("cannot inspect", &path, error))?;
        if metadata.is_dir() {
            scan(root, &path, settings, files)?;
        } else if metadata.is_file() {
            let relative = paths::display_relative(root, &path);
            let modified = paths::modified_at(&path, &metadata)?;
            let budget_bytes = settings.budget_for(&relative);
            files.push(FileStatus {
                over_budget: budget_bytes.is_some_and(|budget| metadata.len() > budget),
                path: relative,
                size_bytes: metadata.len(),
                modified,
                budget_bytes,
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_are_formatted_like_the_seed() {
        assert_eq!(format_size(0), "0B");
        assert_eq!(format_size(1023), "1023B");
        assert_eq!(format_size(1024), "1.0KB");
        assert_eq!(format_size(1536), "1.5KB");
        assert_eq!(format_size(3 * 1024 * 1024), "3.0MB");
    }
}
