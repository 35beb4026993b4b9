//! `mneme`: the command line (and, from the daemon issue on, the daemon). This file
//! only parses arguments, builds the service and dispatches; `commands.rs` runs each
//! command, `render.rs` prints human output. The benchmarks are another binary,
//! `mneme-bench` (crates/mneme-bench).

// The doc comments in `cli.rs` are the CLI's help text (clap), where `[default: now]` and
// `[[principals]]` are literal text, not links.
#![allow(rustdoc::broken_intra_doc_links)]
// The binary is where the process environment is read (`clippy.toml` forbids it in the
// library crates, which take it as a parameter).
#![allow(clippy::disallowed_methods)]
// Standard output goes through `outln!` / `out!`, which report a closed pipe as an error
// instead of panicking as `println!` does.
#![warn(clippy::print_stdout)]

/// `println!` that returns an error instead of panicking (e.g. on a closed pipe).
macro_rules! outln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        writeln!(std::io::stdout(), $($arg)*)?
    }};
}

/// `print!` that returns an error instead of panicking (e.g. on a closed pipe).
macro_rules! out {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        write!(std::io::stdout(), $($arg)*)?
    }};
}

mod agent;
mod cli;
mod client;
mod commands;
mod daemon;
mod dump;
mod model;
mod render;
mod supervise;
mod workspace;

use std::process::ExitCode;

use clap::{CommandFactory as _, FromArgMatches as _};

fn main() -> ExitCode {
    // `mneme membraned` takes membraned's Go-style flags, which clap does not parse.
    let mut args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    if args.get(1).is_some_and(|a| a == "membraned") {
        let rest: Vec<String> = args[2..].iter().map(|a| a.to_string_lossy().into_owned()).collect();
        match cli::membraned(&rest) {
            Ok(cli::Membraned::Serve(translated)) => args = translated,
            Ok(cli::Membraned::Help) => args = ["mneme", "help", "membraned"].iter().map(std::ffi::OsString::from).collect(),
            Ok(cli::Membraned::Version(v)) => {
                let _ = std::io::Write::write_all(&mut std::io::stdout(), format!("{v}\n").as_bytes());
                return ExitCode::SUCCESS;
            }
            Err(e) => {
                eprintln!("mneme membraned: {e}");
                return ExitCode::from(2);
            }
        }
    }
    // One parse gives the typed command and the subcommand path the command log records.
    let matches = cli::Cli::command().get_matches_from(args.clone());
    // Commands that may run the embedding model restart themselves once with candle's
    // threading off, so forward passes spread over mneme's encoder threads (mneme_embed).
    if matches.subcommand_name().is_some_and(|c| ["serve", "reindex", "bench", "mcp", "demo"].contains(&c)) {
        mneme_embed::reexec_for_encoder(std::env::var_os("CANDLE_NUM_THREADS").is_some(), &args);
    }
    let cli = cli::Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    let action = commands::action_name(&matches);
    // Outgoing HTTPS (daemon calls, LLM endpoints) uses rustls with ring.
    mneme_agent::init_tls();
    let json = cli.json;
    match commands::run(cli, action) {
        Ok(()) => ExitCode::SUCCESS,
        // A reader that stops reading (`mneme recall | head`) is not an error.
        Err(err)
            if err.chain().any(|e| e.downcast_ref::<std::io::Error>().is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)) =>
        {
            ExitCode::SUCCESS
        }
        Err(err) => {
            let code = commands::exit_code(&err);
            if json {
                let body = serde_json::json!({ "error": format!("{err:#}"), "exit_code": code });
                let _ = std::io::Write::write_all(&mut std::io::stdout(), format!("{body}\n").as_bytes());
            }
            eprintln!("error: {err:#}");
            ExitCode::from(code)
        }
    }
}
