//! `mneme workspace ...` and the workspace hooks (`mneme hook session-start|prompt-submit|
//! context`): thin wrappers over `mneme_workspace`, which holds all the file logic.
//!
//! The hooks follow Claude Code's protocol (JSON on stdout) and never fail their caller:
//! on any error they print an empty result, write the reason to stderr and exit 0.

use std::path::{Path, PathBuf};

use anyhow::Result;
use mneme_workspace::context::{HookEvent, HookOutput};
use mneme_workspace::{WorkspaceSettings, consolidate, init, rotate, status};

use crate::cli::{HookArgs, WorkspaceCommand};
use crate::commands::Invocation;
use crate::render::print_json;

const HOOKS: [&str; 3] = ["session-start", "prompt-submit", "context"];

pub fn is_workspace_hook(name: &str) -> bool {
    HOOKS.contains(&name)
}

/// The workspace settings: directory from the argument, `$MNEME_WORKSPACE`, the config,
/// else `<data dir>/workspace`.
fn settings(ctx: &Invocation, dir: Option<&Path>) -> Result<WorkspaceSettings> {
    let env = std::env::var_os("MNEME_WORKSPACE");
    let dir: PathBuf = mneme_workspace::config::resolve_dir(dir, env.as_deref(), &ctx.config.workspace, &ctx.data_dir);
    Ok(ctx.config.workspace.settings(dir)?)
}

pub fn command(ctx: &Invocation, cmd: WorkspaceCommand) -> Result<()> {
    let now = jiff::Timestamp::now();
    match cmd {
        WorkspaceCommand::Init { dir } => {
            let s = settings(ctx, dir.as_deref())?;
            let report = init::init(&s, now)?;
            if ctx.json {
                return print_json(&report);
            }
            println!("workspace {}", report.dir.display());
            for p in &report.created {
                println!("  created  {}", p.display());
            }
            for p in &report.skipped {
                println!("  kept     {}", p.display());
            }
            Ok(())
        }
        WorkspaceCommand::Status { dir } => {
            let s = settings(ctx, dir.as_deref())?;
            let report = status::status(&s)?;
            if ctx.json {
                return print_json(&report);
            }
            print!("{}", status::render_status(&report, &s.timezone));
            Ok(())
        }
        WorkspaceCommand::Rotate { dir } => {
            let s = settings(ctx, dir.as_deref())?;
            let report = rotate::rotate(&s, now)?;
            if ctx.json {
                return print_json(&report);
            }
            println!("{}", serde_json::to_string_pretty(&report)?);
            Ok(())
        }
        WorkspaceCommand::Consolidate { dir, apply } => {
            let s = settings(ctx, dir.as_deref())?;
            let report = consolidate::consolidate(&s, now)?;
            if apply {
                let applied = consolidate::apply(&s, &report)?;
                return print_json(&serde_json::json!({ "report": report, "applied": applied }));
            }
            print_json(&report)
        }
    }
}

/// A workspace hook: prints the Claude Code JSON and always exits 0.
pub fn hook(ctx: &Invocation, args: &HookArgs) -> Result<()> {
    match run_hook(ctx, args) {
        Ok((event, context)) => {
            println!("{}", HookOutput::new(event, context).to_json());
            Ok(())
        }
        Err(e) => hook_failed(args, &e),
    }
}

/// The empty answer of a hook that could not run, with the reason on stderr.
pub fn hook_failed(args: &HookArgs, error: &anyhow::Error) -> Result<()> {
    eprintln!("mneme hook {}: {error:#}", args.name);
    println!("{}", HookOutput::new(event_of(&args.name), None).to_json());
    Ok(())
}

fn event_of(name: &str) -> HookEvent {
    match name {
        "session-start" => HookEvent::SessionStart,
        "prompt-submit" => HookEvent::UserPromptSubmit,
        _ => HookEvent::PostToolUse,
    }
}

fn run_hook(ctx: &Invocation, args: &HookArgs) -> Result<(HookEvent, Option<String>)> {
    let s = settings(ctx, None)?;
    let event = event_of(&args.name);
    // The conversation log (and so the unsummarized count) is not in the store yet.
    let context = match args.name.as_str() {
        "session-start" => Some(mneme_workspace::context::session_start(&s, None)?).filter(|c| !c.trim().is_empty()),
        "prompt-submit" => mneme_workspace::context::prompt_submit(&s, None),
        _ => {
            let usage = args.usage.ok_or_else(|| anyhow::anyhow!("--usage PCT is required"))?;
            mneme_workspace::context::context_check(&s, usage)
        }
    };
    Ok((event, context))
}
