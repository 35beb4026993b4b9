//! membrane's own Python client (v0.2.0, vendored unchanged in `tests/membrane/`) and its
//! integration tests against `mneme membraned`: the tests build membraned with
//! `go build ./cmd/membraned`, so a stand-in `go` first on `PATH` writes a script that runs
//! `mneme membraned` instead. They start it with `-addr`, `-db` and `MEMBRANE_API_KEY`, poll
//! GetMetrics until it answers, and check authentication, ingest, retrieve (with a trust
//! context), retrieve by id, metrics, and that retracting an episode is FAILED_PRECONDITION.

use std::path::Path;
use std::process::Command;

/// The stand-in for `go`: `build -o OUT` writes a launcher for `$MNEME_BIN membraned`, `run`
/// execs it.
const GO_SHIM: &str = r#"#!/bin/sh
case "$1" in
  build)
    out=""
    while [ $# -gt 0 ]; do [ "$1" = "-o" ] && out="$2"; shift; done
    printf '#!/bin/sh\nexec "%s" membraned "$@"\n' "$MNEME_BIN" > "$out"
    chmod +x "$out" ;;
  run) shift 2; exec "$MNEME_BIN" membraned "$@" ;;
  *) echo "go shim: unsupported: $*" >&2; exit 2 ;;
esac
"#;

#[test]
// The test passes its own PATH (with the shim first) to pytest.
#[allow(clippy::disallowed_methods)]
fn membranes_python_client_passes_its_integration_tests_against_mneme_membraned() {
    let shim = tempfile::tempdir().expect("shim dir");
    let go = shim.path().join("go");
    std::fs::write(&go, GO_SHIM).expect("shim");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(&go, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    }
    let home = tempfile::tempdir().expect("home");
    let client = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/membrane/clients/python");
    let path = format!("{}:{}", shim.path().display(), std::env::var("PATH").unwrap_or_default());
    let out = Command::new(mneme_testkit::python())
        .args(["-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_integration.py"])
        .current_dir(&client)
        .env("PATH", path)
        .env("MNEME_BIN", env!("CARGO_BIN_EXE_mneme"))
        .env("MNEME_HOME", home.path())
        .env("MNEME_MODEL_CACHE", home.path().join("model-cache"))
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .env_remove("MNEME_CONFIG")
        .env_remove("MEMBRANE_API_KEY")
        .output()
        .expect("pytest runs");
    let report = format!("{}\n{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "membrane's Python integration tests failed:\n{report}");
    assert!(report.contains("2 passed"), "{report}");
}

/// membraned's start-up surface: `-version`, and the flags it does not share refused.
#[test]
fn membraned_flags_are_parsed_go_style_and_unknown_ones_refused() {
    let m = crate::Mneme::new();
    let out = m.run(&["membraned", "-version"]);
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("membraned (mneme "));
    let out = m.run(&["membraned", "-config", "membrane.yaml"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("membrane's YAML"));
    let out = m.run(&["membraned", "-bogus"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("flag provided but not defined: -bogus"));
}

/// membrane's TypeScript client (v0.2.0, vendored unchanged) and its integration test under
/// vitest on Node: the same stand-in `go` (`go run ./cmd/membraned ARGS`) starts mneme.
#[test]
#[allow(clippy::disallowed_methods)]
fn membranes_typescript_client_passes_its_integration_test_against_mneme_membraned() {
    let tools = mneme_testkit::node_tools();
    let shim = tempfile::tempdir().expect("shim dir");
    let go = shim.path().join("go");
    std::fs::write(&go, GO_SHIM).expect("shim");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(&go, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    }
    // A copy of the client beside the installed packages (vitest resolves them upwards).
    let work = tempfile::tempdir().expect("work dir");
    let client = work.path().join("clients/typescript");
    copy_tree(&Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/membrane/clients/typescript"), &client);
    #[cfg(unix)]
    std::os::unix::fs::symlink(&tools.modules, client.join("node_modules")).expect("link node_modules");
    let home = tempfile::tempdir().expect("home");
    let node_dir = tools.node.parent().expect("node's directory").display().to_string();
    let path = format!("{}:{node_dir}:{}", shim.path().display(), std::env::var("PATH").unwrap_or_default());
    let out = Command::new(&tools.node)
        .arg(tools.modules.join("vitest/vitest.mjs"))
        .args(["run", "test/client.integration.test.ts"])
        .current_dir(&client)
        .env("PATH", path)
        .env("MNEME_BIN", env!("CARGO_BIN_EXE_mneme"))
        .env("MNEME_HOME", home.path())
        .env("MNEME_MODEL_CACHE", home.path().join("model-cache"))
        .env("CI", "1")
        .env_remove("MNEME_CONFIG")
        .env_remove("MEMBRANE_API_KEY")
        .output()
        .expect("vitest runs");
    let report = format!("{}\n{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "membrane's TypeScript integration test failed:\n{report}");
    assert!(report.contains("2 passed"), "{report}");
}

/// Copies a client's sources (not its `node_modules` or `dist`).
pub(crate) fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for entry in std::fs::read_dir(from).expect("list").flatten() {
        let target = to.join(entry.file_name());
        if entry.file_name() == "node_modules" || entry.file_name() == "dist" {
            continue;
        }
        if entry.path().is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).expect("copy");
        }
    }
}
