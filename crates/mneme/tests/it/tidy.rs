//! Habits checked on the source tree, so they stay true: every module says what it owns
//! (a `//!` doc first), no test is ignored or expects a panic, the binary prints through
//! `outln!` (which reports a closed pipe instead of panicking), never a bare `println!`
//! (so does the benchmark binary, `mneme-bench`), and ARCHITECTURE.md's codemap names
//! every source file and every invariant a test.

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

/// ARCHITECTURE.md's codemap names every source file, under a heading
/// ``### `crates/<crate>/src/` ``, one ``- `path` `` line each, and names nothing that does
/// not exist; every invariant names a test that exists.
#[test]
fn the_codemap_names_every_source_file_and_every_invariant_a_test() {
    let root = workspace_root();
    let doc = std::fs::read_to_string(root.join("ARCHITECTURE.md")).expect("ARCHITECTURE.md");
    assert!(doc.lines().count() <= 260, "ARCHITECTURE.md has {} lines; keep it to about 250", doc.lines().count());
    let mut named = std::collections::BTreeSet::new();
    let mut dir: Option<String> = None;
    for line in doc.lines() {
        if let Some(rest) = line.strip_prefix("### `crates/") {
            dir = rest.strip_suffix("/src/`").map(|c| format!("crates/{c}/src/"));
            assert!(dir.is_some(), "a codemap heading must be ### `crates/<crate>/src/`: {line}");
        } else if line.starts_with("## ") {
            dir = None;
        } else if let (Some(d), Some(rest)) = (&dir, line.strip_prefix("- `")) {
            let path = rest.split('`').next().unwrap_or_default();
            assert!(named.insert(format!("{d}{path}")), "{d}{path} is named twice");
        }
    }
    let mut files = Vec::new();
    rust_files(&root.join("crates"), &mut files);
    let sources: std::collections::BTreeSet<String> = files
        .iter()
        .map(|p| p.strip_prefix(&root).expect("under the root").display().to_string())
        .filter(|p| p.contains("/src/"))
        .collect();
    let missing: Vec<&String> = sources.difference(&named).collect();
    let stale: Vec<&String> = named.difference(&sources).collect();
    assert!(missing.is_empty(), "source files the codemap does not name: {missing:#?}");
    assert!(stale.is_empty(), "codemap entries that do not exist: {stale:#?}");

    let all_tests: String = files
        .iter()
        .filter(|p| {
            p.components().any(|c| c.as_os_str() == "tests") || std::fs::read_to_string(p).is_ok_and(|t| t.contains("#[cfg(test)]"))
        })
        .map(|p| std::fs::read_to_string(p).expect("readable"))
        .collect();
    let mut invariants = 0;
    for item in doc.split("\n- ").filter(|i| i.starts_with("**Invariant")) {
        invariants += 1;
        let item = item.split("\n\n").next().unwrap_or(item);
        let test = item.split("(test: `").nth(1).and_then(|r| r.split('`').next());
        let test = test.unwrap_or_else(|| panic!("an invariant names no test (`(test: `name`)`): {item}"));
        assert!(all_tests.contains(&format!("fn {test}(")), "the invariant's test `{test}` does not exist: {item}");
    }
    assert!(invariants >= 10, "found only {invariants} invariants in ARCHITECTURE.md");
}

/// No test expects a panic: a test states what should happen instead.
#[test]
fn no_test_expects_a_panic() {
    let needle = ["should", "_panic"].concat();
    let found: Vec<String> = all_crate_files()
        .into_iter()
        .filter(|p| std::fs::read_to_string(p).expect("readable").contains(&needle))
        .map(|p| p.display().to_string())
        .collect();
    assert!(found.is_empty(), "tests that expect a panic: {found:#?}");
}
