//! `mneme-crash-writer FILE`: the child process of the atomic-write crash test. It rewrites
//! FILE with `write_atomic`, generation after generation, until it is killed, and creates
//! the ready marker once its first write is complete. Not shipped: a test helper.

use std::path::PathBuf;

use mneme_workspace::atomic::write_atomic;

#[path = "../common/generations.rs"]
mod generations;

fn main() {
    let Some(path) = std::env::args_os().nth(1).map(PathBuf::from) else {
        eprintln!("usage: mneme-crash-writer FILE");
        std::process::exit(2);
    };
    for generation in 1.. {
        if let Err(e) = write_atomic(&path, &generations::content(generation)) {
            eprintln!("mneme-crash-writer: {e}");
            std::process::exit(1);
        }
        if generation == 1
            && let Err(e) = std::fs::write(generations::ready_marker(&path), b"")
        {
            eprintln!("mneme-crash-writer: {e}");
            std::process::exit(1);
        }
    }
}
