//! `mneme`: the command line (and, from the daemon issue on, the daemon). This file
//! only parses arguments, builds the service and dispatches; `commands.rs` runs each
//! command, `render.rs` prints human output, `bench.rs` holds the benchmarks.

mod bench;
mod cli;
mod commands;
mod render;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = cli::Cli::parse();
    let json = cli.json;
    match commands::run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            let code = commands::exit_code(&err);
            if json {
                let body = serde_json::json!({ "error": format!("{err:#}"), "exit_code": code });
                println!("{body}");
            }
            eprintln!("error: {err:#}");
            ExitCode::from(code)
        }
    }
}
