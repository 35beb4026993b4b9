//! What the crash test and its child process (`mneme-crash-writer`) share: the file's
//! generations (a header and a 4 MiB body whose bytes all change between consecutive
//! generations), and the marker the child creates once its first write is complete.

#![allow(dead_code)]

use std::path::{Path, PathBuf};

const BODY_BYTES: usize = 4 * 1024 * 1024;

/// The two bodies, for even and odd generations: consecutive generations differ in every
/// byte, so any mix of two is detected. Built once, so the child spends its time writing.
fn bodies() -> &'static [Vec<u8>; 2] {
    static BODIES: std::sync::OnceLock<[Vec<u8>; 2]> = std::sync::OnceLock::new();
    BODIES.get_or_init(|| {
        let body = |parity: usize| (0..BODY_BYTES).map(|index| ((parity + index) % 251) as u8).collect();
        [body(0), body(1)]
    })
}

/// Generation `n`'s content: a header naming it and the body of its parity.
pub fn content(generation: u64) -> Vec<u8> {
    let mut bytes = format!("generation {generation}\n").into_bytes();
    bytes.extend_from_slice(&bodies()[(generation % 2) as usize]);
    bytes
}

/// The generation the file holds, or a description of how it is torn.
pub fn generation_of(bytes: &[u8]) -> Result<u64, String> {
    let newline = bytes.iter().position(|&b| b == b'\n').ok_or("no header line")?;
    let header = std::str::from_utf8(&bytes[..newline]).map_err(|_| "header is not UTF-8")?;
    let generation: u64 =
        header.strip_prefix("generation ").and_then(|n| n.parse().ok()).ok_or_else(|| format!("bad header {header:?}"))?;
    if bytes == content(generation).as_slice() {
        Ok(generation)
    } else {
        Err(format!("generation {generation} has {} bytes or a torn body", bytes.len()))
    }
}

/// The file the child creates once its first write is complete.
pub fn ready_marker(path: &Path) -> PathBuf {
    path.with_extension("ready")
}
