//! `mneme-bench`: mneme's benchmarks, a binary of their own so `mneme` stays thin. This
//! file parses arguments and dispatches; each benchmark is one module (`retrieval.rs`
//! speaks the retrieval-benchmark protocol on stdin/stdout, the others print figures for
//! BENCHMARKS.md). `daemon` and `workspace` run the real `mneme` binary found next to
//! this one (`mneme_exe`).

// The binary is where the process environment is read (`clippy.toml` forbids it in the
// library crates, which take it as a parameter).
#![allow(clippy::disallowed_methods)]
// Standard output goes through `outln!`, which reports a closed pipe as an error instead
// of panicking as `println!` does.
#![warn(clippy::print_stdout)]

/// `println!` that returns an error instead of panicking (e.g. on a closed pipe).
macro_rules! outln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        writeln!(std::io::stdout(), $($arg)*)?
    }};
}

mod cli;
mod console;
mod corrections;
mod daemon;
mod dependents;
mod embed;
mod fleet;
mod inner;
mod learning;
mod lexical;
mod reflect;
mod retrieval;
mod scripted;
mod spans;
mod store;
mod synth;
mod topics;
mod truth;
mod values;
mod vectors;
mod workspace;

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Result, anyhow, bail};
use clap::Parser;
use jiff::Timestamp;
use mneme_server::MnemeConfig;
use mneme_service::ServiceError;

use crate::cli::{Cli, Command};

fn main() -> ExitCode {
    let cli = Cli::parse();
    // Benchmarks measure the encoder as `mneme serve` runs it (see mneme_embed::ENCODER_ENV).
    mneme_embed::reexec_for_encoder(std::env::var_os("CANDLE_NUM_THREADS").is_some(), &std::env::args_os().collect::<Vec<_>>());
    // `daemon` talks HTTP to the daemon through reqwest, which uses rustls with ring.
    mneme_agent::init_tls();
    // `RUST_LOG=mneme_agent=debug` shows why a benchmark's facts were or were not written.
    if let Ok(filter) = tracing_subscriber::EnvFilter::try_from_env("RUST_LOG") {
        tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).init();
    }
    let json = cli.json;
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            // The exit codes `mneme` gives the same failures (6 for a bad configuration).
            let code = err.downcast_ref::<ServiceError>().map_or(1, |e| e.kind().exit_code());
            if json {
                let body = serde_json::json!({ "error": format!("{err:#}"), "exit_code": code });
                let _ = std::io::Write::write_all(&mut std::io::stdout(), format!("{body}\n").as_bytes());
            }
            eprintln!("error: {err:#}");
            ExitCode::from(code)
        }
    }
}

fn run(cli: Cli) -> Result<()> {
    let json = cli.json;
    match &cli.command {
        Command::Retrieval => {
            let data_dir = data_dir(&cli)?;
            crate::retrieval::retrieval(&config(&cli, &data_dir)?, &data_dir)
        }
        Command::Extract { read } => {
            use std::io::BufRead as _;
            // With --read, the span reader's reading too (the model installed), past the
            // held values a tab after the text names ("text\tMilan|Rome", or "text\tcity=Milan"
            // to hold a value under one slot only).
            let service = if *read {
                let data_dir = data_dir(&cli)?;
                let config = config(&cli, &data_dir)?;
                let (llm, model) = crate::truth::pipeline("extract", &config, &data_dir)?;
                let model = model.ok_or_else(|| anyhow::anyhow!("--read needs the embedding model: mneme model install"))?;
                Some(crate::truth::open(&config, &llm, Some(&model), &serde_json::json!({}))?)
            } else {
                None
            };
            for line in std::io::stdin().lock().lines() {
                let line = line?;
                let (text, held) = line.split_once('\t').unwrap_or((&line, ""));
                // "slot=value" holds a value under that slot only; a bare value under every slot.
                let held: Vec<(Option<String>, String)> = held
                    .split('|')
                    .map(str::trim)
                    .filter(|h| !h.is_empty())
                    .map(|h| match h.split_once('=') {
                        Some((slot, v)) if mneme_truth::slot(slot.trim()).is_some() => {
                            (Some(slot.trim().to_string()), v.trim().to_string())
                        }
                        _ => (None, h.to_string()),
                    })
                    .collect();
                let held_for = |slot: &'static str| -> Vec<String> {
                    held.iter().filter(|(s, _)| s.as_deref().is_none_or(|s| s == slot)).map(|(_, v)| v.clone()).collect()
                };
                let reading = service.as_ref().and_then(|c| c.service().explain_read(text, &held_for, &[]));
                let claims = mneme_truth::extract(text);
                // With --read, how well each claim's value fits its slot by the value-kind layer.
                let fits: Option<Vec<Option<f32>>> =
                    service.as_ref().map(|c| claims.iter().map(|cl| cl.slot.and_then(|s| c.service().value_fit(s, &cl.value))).collect());
                // With --read, the topic layer's likeliest slots and the read value's kinds
                // (the whole text's when nothing was read: a bare value's).
                let kinds = service
                    .as_ref()
                    .and_then(|c| c.service().explain_kinds(text, Some(reading.as_ref().and_then(|r| r.value.as_deref()).unwrap_or(text))));
                outln!("{}", serde_json::json!({ "text": text, "claims": claims, "fits": fits, "reading": reading, "kinds": kinds }));
            }
            Ok(())
        }
        Command::Truth => {
            let data_dir = data_dir(&cli)?;
            crate::truth::truth(&config(&cli, &data_dir)?, &data_dir)
        }
        Command::Dependents { data, k, show_errors } => {
            let data_dir = data_dir(&cli)?;
            crate::dependents::dependents(&config(&cli, &data_dir)?, &data_dir, data, *k, *show_errors, json)
        }
        Command::Workspace { files, queries, runs, model_dir } => {
            crate::workspace::workspace(*files, *queries, *runs, model_dir.as_deref(), json)
        }
        Command::Reflect { records, ticks } => crate::reflect::reflect(*records, *ticks, json),
        Command::Learning { weeks, seed, show_playbook, llm } => {
            let data_dir = data_dir(&cli)?;
            let (_, model) = crate::truth::pipeline("learning", &config(&cli, &data_dir)?, &data_dir)?;
            crate::learning::learning(*seed, *weeks, model, llm.as_deref() == Some("scripted"), *show_playbook, json)
        }
        Command::Inner { days, runs } => crate::inner::inner(*days, *runs, json),
        Command::Console { records, runs } => crate::console::console(*records, *runs, json),
        Command::Engines { records, queries, postgres, vectors } => crate::store::engines(*records, *queries, postgres, *vectors, json),
        Command::Dump { records, postgres } => crate::store::dump(*records, postgres.as_deref(), json),
        Command::Store { records, queries, single } => crate::store::store(records, *queries, *single, json),
        Command::Lexical { records, queries, baseline, cap } => crate::lexical::lexical(records, *queries, *baseline, *cap, json),
        Command::Spans { data, eval, out, epochs, learning_rate, l2, min_share, show_errors, model_dir, old } => {
            let config = config(&cli, &data_dir(&cli)?)?;
            let dir = model_dir.clone().or_else(|| config.embedding.model_dir.clone()).ok_or_else(|| anyhow!("no model directory"))?;
            let training = mneme_truth::spans::Training { epochs: *epochs, learning_rate: *learning_rate, l2: *l2 };
            let settings = crate::spans::Settings {
                data: data.clone(),
                eval: eval.clone(),
                out: out.clone(),
                training,
                min_share: *min_share,
                show_errors: *show_errors,
                old: *old,
            };
            crate::spans::spans(&dir, settings, json)
        }
        Command::Values { data, eval, out, epochs, hidden, l2, learning_rate, floor, show_errors, junk, model_dir } => {
            let config = config(&cli, &data_dir(&cli)?)?;
            let dir = model_dir.clone().or_else(|| config.embedding.model_dir.clone()).ok_or_else(|| anyhow!("no model directory"))?;
            let training = mneme_truth::topics::Training { epochs: *epochs, hidden: *hidden, l2: *l2, learning_rate: *learning_rate };
            let settings = crate::values::Settings {
                data: data.clone(),
                eval: eval.clone(),
                out: out.clone(),
                training,
                floors: floor.clone(),
                show_errors: *show_errors,
                junk: *junk,
            };
            crate::values::values(&dir, settings, json)
        }
        Command::Topics { action, data, out, layer, threshold, show_errors, epochs, hidden, l2, learning_rate, model_dir } => {
            let config = config(&cli, &data_dir(&cli)?)?;
            let dir = model_dir.clone().or_else(|| config.embedding.model_dir.clone()).ok_or_else(|| anyhow!("no model directory"))?;
            match action.as_str() {
                "train" => crate::topics::train(
                    &dir,
                    data,
                    out,
                    mneme_truth::topics::Training { epochs: *epochs, hidden: *hidden, l2: *l2, learning_rate: *learning_rate },
                    json,
                ),
                _ => crate::topics::eval(&dir, data, layer.as_deref(), *threshold, *show_errors, json),
            }
        }
        Command::Corrections { action, data, out, threshold, question_threshold, show_errors, layer, epochs, l2, model_dir } => {
            let config = config(&cli, &data_dir(&cli)?)?;
            let dir = model_dir.clone().or_else(|| config.embedding.model_dir.clone()).ok_or_else(|| anyhow!("no model directory"))?;
            match action.as_str() {
                "train" => crate::corrections::train(&dir, data, out, *epochs, *l2, json),
                _ => crate::corrections::eval(&dir, data, layer.as_deref(), (*threshold, *question_threshold), *show_errors, json),
            }
        }
        Command::Embed { texts, batch, model_dir, file, clients } => {
            crate::embed::embed(model_dir.as_deref(), &config(&cli, &data_dir(&cli)?)?, file.as_deref(), (*texts, *batch, *clients), json)
        }
        Command::Vectors { records, dim, queries, coarse, rerank, lists, nprobe, store } => crate::vectors::vectors(
            *records,
            *dim,
            *queries,
            mneme_service::IndexParams { exact_below: 0, coarse: *coarse, rerank: *rerank, lists: *lists, nprobe: *nprobe },
            *store,
            json,
        ),
        Command::Daemon { records, clients, seconds, queries } => crate::daemon::daemon(*records, *clients, *seconds, *queries, json),
        Command::Fleet { records, clients, seconds, queries, daemons, postgres } => {
            crate::fleet::fleet(*records, *clients, *seconds, *queries, postgres, daemons, json)
        }
    }
}

/// `--data-dir`, `MNEME_HOME`, else `~/.local/share/mneme`, as `mneme` resolves it.
fn data_dir(cli: &Cli) -> Result<PathBuf> {
    match &cli.data_dir {
        Some(d) => Ok(std::path::absolute(d).unwrap_or_else(|_| d.clone())),
        None => {
            let home = std::env::var_os("HOME").ok_or_else(|| anyhow!("neither --data-dir, MNEME_HOME nor HOME is set"))?;
            Ok(PathBuf::from(home).join(".local/share/mneme"))
        }
    }
}

/// The layered configuration, as `mneme` builds it: defaults → file → `MNEME_*` env →
/// `--set`.
fn config(cli: &Cli, data_dir: &std::path::Path) -> Result<MnemeConfig> {
    let config_path = cli.config.clone().unwrap_or_else(|| data_dir.join("config.toml"));
    let sets = cli
        .sets
        .iter()
        .map(|s| s.split_once('=').map(|(k, v)| (k.trim().to_string(), v.to_string())))
        .collect::<Option<Vec<_>>>()
        .ok_or_else(|| anyhow!("--set expects KEY=VALUE"))?;
    let mut config = MnemeConfig::layered(Some(&config_path), cli.config.is_some(), std::env::vars(), &sets)
        .map_err(|e| anyhow::Error::new(ServiceError::Config(e.0)))?;
    config.embedding.model_dir = Some(mneme_embed::resolve_model_dir(&config.embedding, data_dir, &|name| std::env::var_os(name)));
    Ok(config)
}

/// The `mneme` binary beside this one (the same target directory), which `daemon` and
/// `workspace` run as child processes.
fn mneme_exe() -> Result<PathBuf> {
    let me = std::env::current_exe().map_err(|e| anyhow!("cannot find the mneme-bench executable: {e}"))?;
    let exe = me.with_file_name(format!("mneme{}", std::env::consts::EXE_SUFFIX));
    if !exe.is_file() {
        bail!(
            "this benchmark runs the mneme binary, but there is none at {} (beside mneme-bench): build it with `cargo build --release -p mneme` (`cargo build -p mneme` for a debug mneme-bench)",
            exe.display()
        );
    }
    Ok(exe)
}

/// RFC 3339 with an offset, or a civil date / date-time taken as UTC (`mneme`'s rule for
/// `--at`; here for the harness's document timestamps).
fn parse_time(s: &str) -> Option<Timestamp> {
    if let Ok(t) = s.parse::<Timestamp>() {
        return Some(t);
    }
    if let Ok(dt) = s.parse::<jiff::civil::DateTime>() {
        return dt.to_zoned(jiff::tz::TimeZone::UTC).ok().map(|z| z.timestamp());
    }
    s.parse::<jiff::civil::Date>().ok().and_then(|d| d.to_zoned(jiff::tz::TimeZone::UTC).ok()).map(|z| z.timestamp())
}
