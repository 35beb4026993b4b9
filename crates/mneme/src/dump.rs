//! `mneme export` and `mneme import`: the store as a dump (versioned JSON lines, see
//! `mneme_store`'s dump module), to a file or stdout and back, on SQLite or PostgreSQL.

use std::io::{BufRead, BufReader, BufWriter, IsTerminal, Write};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, anyhow};
use mneme_store::{DumpSummary, PgOptions};

use crate::cli::PostgresArgs;
use crate::commands::{Invocation, input_error};

/// Where the dump goes to or comes from: with `--postgres` the database at
/// `MNEME_DATABASE_URL` / `--database-url`; else the configured store (`[storage]`).
fn postgres_options(ctx: &Invocation, args: &PostgresArgs, create: bool) -> Result<Option<PgOptions>> {
    if !args.postgres {
        if args.database_url.is_some() && std::env::var_os("MNEME_DATABASE_URL").is_none() {
            return Err(input_error("--database-url needs --postgres (the configured store is the default)"));
        }
        return ctx.postgres(create);
    }
    let url = args
        .database_url
        .clone()
        .ok_or_else(|| input_error("--postgres needs a database: set MNEME_DATABASE_URL or pass --database-url"))?;
    Ok(Some(crate::commands::postgres_options(url, &ctx.config.storage, create)?))
}

/// Progress on stderr, every 10 000 records, when stderr is a terminal.
fn progress(verb: &'static str) -> impl FnMut(&str, u64) {
    let show = std::io::stderr().is_terminal();
    move |table, n| {
        if show {
            eprint!("\rmneme: {verb} {n} {table}…");
        }
    }
}

pub fn export(ctx: &Invocation, output: Option<&Path>, force: bool, postgres: &PostgresArgs) -> Result<()> {
    let target = postgres_options(ctx, postgres, false)?;
    if let Some(path) = output
        && path.exists()
        && !force
    {
        return Err(input_error(format!("{} exists; pass --force to replace it", path.display())));
    }
    let mut show = progress("exported");
    let mut run = |out: &mut dyn Write| -> Result<DumpSummary> {
        Ok(match &target {
            Some(options) => mneme_service::export_postgres(options.clone(), out, &mut show)?,
            None => ctx.open(false)?.export(out, &mut show)?,
        })
    };
    let summary = match output {
        None => {
            let stdout = std::io::stdout();
            let mut out = BufWriter::with_capacity(1 << 16, stdout.lock());
            run(&mut out)?
        }
        Some(path) => {
            // Written beside the target and renamed into place: no half dump under its name.
            let partial = PathBuf::from(format!("{}.partial", path.display()));
            let file = std::fs::File::create(&partial).with_context(|| format!("cannot create {}", partial.display()))?;
            let mut out = BufWriter::with_capacity(1 << 16, file);
            let done = run(&mut out).and_then(|summary| {
                let file = out.into_inner().map_err(|e| anyhow!("cannot write {}: {}", partial.display(), e.error()))?;
                file.sync_all().with_context(|| format!("cannot sync {}", partial.display()))?;
                std::fs::rename(&partial, path).with_context(|| format!("cannot rename {} into place", partial.display()))?;
                Ok(summary)
            });
            if done.is_err() {
                let _ = std::fs::remove_file(&partial);
            }
            done?
        }
    };
    if std::io::stderr().is_terminal() {
        eprint!("\r");
    }
    report("exported", &summary, output, ctx.json, output.is_none())
}

pub fn import(ctx: &Invocation, input: &Path, postgres: &PostgresArgs) -> Result<()> {
    let target = postgres_options(ctx, postgres, true)?;
    let mut reader: Box<dyn BufRead> = if input == Path::new("-") {
        Box::new(BufReader::with_capacity(1 << 16, std::io::stdin().lock()))
    } else {
        let file = std::fs::File::open(input).with_context(|| format!("cannot open {}", input.display()))?;
        Box::new(BufReader::with_capacity(1 << 16, file))
    };
    let mut show = progress("imported");
    let summary = match target {
        Some(options) => mneme_service::import_postgres(options, &mut reader, &mut show)?,
        None => {
            if let Some(daemon) = crate::daemon::running_daemon(ctx) {
                return Err(mneme_service::ServiceError::Precondition(format!(
                    "a daemon (pid {}) is using {}; stop it first (`mneme down`), import, then start it again",
                    daemon.pid,
                    ctx.data_dir.display()
                ))
                .into());
            }
            std::fs::create_dir_all(&ctx.data_dir).with_context(|| format!("cannot create {}", ctx.data_dir.display()))?;
            ctx.open(true)?.import(&mut reader, &mut show)?
        }
    };
    if std::io::stderr().is_terminal() {
        eprint!("\r");
    }
    report("imported", &summary, Some(input), ctx.json, false)
}

/// The summary: on stdout, or on stderr when stdout carries the dump itself.
fn report(verb: &str, summary: &DumpSummary, file: Option<&Path>, json: bool, to_stderr: bool) -> Result<()> {
    let text = if json {
        serde_json::to_string_pretty(&serde_json::json!({
            verb: summary.counts,
            "bytes": summary.bytes,
            "sha256": summary.sha256,
            "file": file.map(|f| f.display().to_string()),
        }))?
    } else {
        let rows: Vec<String> =
            summary.counts.iter().filter(|(_, n)| **n > 0).map(|(table, n)| format!("{n} {}", table.replace('_', " "))).collect();
        let rows = if rows.is_empty() { "nothing (an empty store)".to_string() } else { rows.join(", ") };
        let place = file.map(|f| format!(" ({})", f.display())).unwrap_or_default();
        format!("{verb} {rows}{place}\n{} bytes, sha256 {}", summary.bytes, summary.sha256)
    };
    if to_stderr {
        eprintln!("{text}");
    } else {
        outln!("{text}");
    }
    Ok(())
}
