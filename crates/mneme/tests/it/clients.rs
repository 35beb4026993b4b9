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

/// The Python client over TLS with a client certificate: `ca_file` checks the daemon's
/// certificate, `cert` presents the client's, which alone authenticates its principal.
#[test]
fn the_python_client_speaks_mutual_tls() {
    let m = Mneme::init();
    let pki = tempfile::tempdir().expect("dir");
    mneme_testkit::make_certificates(pki.path());
    let p = |name: &str| pki.path().join(name).display().to_string();
    let config = m.dir.path().join("config.toml");
    std::fs::write(
        &config,
        format!(
            "[server]\ntls_cert_file = {:?}\ntls_key_file = {:?}\ntls_client_ca_file = {:?}\n\n\
             [[principals]]\nname = \"agent\"\ntls_client_subject = \"agent-a\"\nread_max_sensitivity = \"critical\"\nwrite_max_sensitivity = \"critical\"\n",
            p("server.crt"),
            p("server.key"),
            p("ca.crt")
        ),
    )
    .expect("config");
    let child = m
        .command()
        .args(["serve", "--grpc-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("serve");
    let _guard = crate::daemon::Guard(child);
    let file = crate::daemon::wait_until("daemon.json", std::time::Duration::from_secs(20), || crate::daemon::daemon_file(&m));
    let port = file["http_addr"].as_str().expect("addr").rsplit(':').next().expect("port").to_string();
    let script = "import sys\nsys.path.insert(0, sys.argv[1])\nfrom mneme_client import Client\n\
                  with Client(sys.argv[2], ca_file=sys.argv[3], cert=(sys.argv[4], sys.argv[5])) as c:\n\
                  \x20   r = c.remember('the certificate rotates yearly')\n\
                  \x20   print(r.actor, len(c.recall('certificate rotates')))\n";
    let src = clients().join("python/src").display().to_string();
    let url = format!("https://localhost:{port}");
    let out = crate::daemon::wait_until("the daemon over TLS", std::time::Duration::from_secs(10), || {
        let out = Command::new(mneme_testkit::python())
            .args(["-c", script, &src, &url, &p("ca.crt"), &p("client.crt"), &p("client.key")])
            .output()
            .expect("python");
        out.status.success().then_some(out)
    });
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "agent 1");
    // Without the client certificate: no connection.
    let refused = Command::new(mneme_testkit::python())
        .args(["-c", &script.replace(", cert=(sys.argv[4], sys.argv[5])", ""), &src, &url, &p("ca.crt"), "", ""])
        .output()
        .expect("python");
    assert!(!refused.status.success(), "{}", String::from_utf8_lossy(&refused.stdout));
}
