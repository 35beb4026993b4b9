//! Habits checked on the source tree, so they stay true: every module says what it owns
//! (a `//!` doc first), no test is ignored, and the binary prints through `outln!` (which
//! reports a closed pipe instead of panicking), never a bare `println!`; so does the
//! benchmark binary, `mneme-bench`.

use std::path::{Path, PathBuf};

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).ancestors().nth(2).expect("crates/mneme is two levels down").to_path_buf()
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

fn all_crate_files() -> Vec<PathBuf> {
    let mut files = Vec::new();
    rust_files(&workspace_root().join("crates"), &mut files);
    assert!(files.len() > 50, "found only {} files: wrong root?", files.len());
    files
}

#[test]
fn every_source_module_opens_with_a_module_doc() {
    let missing: Vec<String> = all_crate_files()
        .into_iter()
        .filter(|p| p.components().any(|c| c.as_os_str() == "src"))
        .filter(|p| !std::fs::read_to_string(p).expect("readable").starts_with("//!"))
        .map(|p| p.display().to_string())
        .collect();
    assert!(missing.is_empty(), "modules without a `//!` doc: {missing:#?}");
}

#[test]
fn no_test_is_ignored() {
    let needle = ["#[", "ignore"].concat();
    let ignored: Vec<String> = all_crate_files()
        .into_iter()
        .filter(|p| std::fs::read_to_string(p).expect("readable").contains(&needle))
        .map(|p| p.display().to_string())
        .collect();
    assert!(ignored.is_empty(), "ignored tests in: {ignored:#?}");
}

#[test]
fn the_binaries_print_through_outln() {
    let mut files = Vec::new();
    for binary in ["crates/mneme/src", "crates/mneme-bench/src"] {
        rust_files(&workspace_root().join(binary), &mut files);
    }
    let needle = ["print", "ln!("].concat();
    let bare: Vec<String> = files
        .into_iter()
        .flat_map(|p| {
            let text = std::fs::read_to_string(&p).expect("readable");
            text.lines()
                .enumerate()
                .filter(|(_, line)| line.match_indices(&needle).any(|(i, _)| i == 0 || !line[..i].ends_with('e')))
                .map(|(n, _)| format!("{}:{}", p.display(), n + 1))
                .collect::<Vec<_>>()
        })
        .collect();
    assert!(bare.is_empty(), "bare println! (use outln!): {bare:#?}");
}
