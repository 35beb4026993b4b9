//! mneme's own clients (`clients/python`, `clients/typescript`) run their test suites
//! against a live daemon (`mneme serve` with an API key): the Python client's under pytest,
//! sync and async; the TypeScript client's type-checked by `tsc` and run under vitest.

use std::path::Path;
use std::process::{Command, Stdio};

use crate::Mneme;
use crate::daemon::serve_with;
use crate::membrane::copy_tree;

const KEY: &str = "client-tests-key-0123456789abcdef";

/// A daemon that requires `KEY` (as an owner): the clients send it as a bearer token.
fn keyed_daemon(m: &Mneme) -> (crate::daemon::Guard, String) {
    std::fs::write(
        m.dir.path().join("config.toml"),
        "[[principals]]\nname = \"app\"\nkey_env = \"MNEME_TEST_CLIENT_KEY\"\nread_max_sensitivity = \"critical\"\nwrite_max_sensitivity = \"critical\"\n",
    )
    .expect("config");
    serve_with(m, &[], &[("MNEME_TEST_CLIENT_KEY", KEY)], Stdio::null())
}

fn clients() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../../clients"))
}

fn report(out: &std::process::Output) -> String {
    format!("{}\n{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

#[test]
fn the_python_client_passes_its_tests_against_a_live_daemon() {
    let m = Mneme::new();
    let (_guard, addr) = keyed_daemon(&m);
    let client = clients().join("python");
    let out = Command::new(mneme_testkit::python())
        .args(["-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"])
        .current_dir(&client)
        .env("PYTHONPATH", client.join("src"))
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .env("MNEME_URL", format!("http://{addr}"))
        .env("MNEME_API_KEY", KEY)
        .output()
        .expect("pytest runs");
    let report = report(&out);
    assert!(out.status.success(), "the Python client's tests failed:\n{report}");
    assert!(report.contains("9 passed"), "{report}");
}

#[test]
fn the_typescript_client_type_checks_and_passes_its_tests_against_a_live_daemon() {
    let tools = mneme_testkit::node_tools();
    // A copy beside the installed packages (tsc and vitest resolve them upwards).
    let work = tempfile::tempdir().expect("work dir");
    let client = work.path().join("typescript");
    copy_tree(&clients().join("typescript"), &client);
    std::os::unix::fs::symlink(&tools.modules, client.join("node_modules")).expect("link node_modules");
    let tsc = Command::new(&tools.node)
        .arg(tools.modules.join("typescript/bin/tsc"))
        .args(["-p", "tsconfig.json", "--noEmit"])
        .current_dir(&client)
        .output()
        .expect("tsc runs");
    assert!(tsc.status.success(), "tsc found type errors:\n{}", report(&tsc));

    let m = Mneme::new();
    let (_guard, addr) = keyed_daemon(&m);
    let out = Command::new(&tools.node)
        .arg(tools.modules.join("vitest/vitest.mjs"))
        .args(["run", "test/client.test.ts"])
        .current_dir(&client)
        .env("MNEME_URL", format!("http://{addr}"))
        .env("MNEME_API_KEY", KEY)
        .env("CI", "1")
        .output()
        .expect("vitest runs");
    let report = report(&out);
    assert!(out.status.success(), "the TypeScript client's tests failed:\n{report}");
    assert!(report.contains("6 passed"), "{report}");
}
