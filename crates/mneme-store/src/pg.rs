//! The PostgreSQL engine: connection options, the schema and its migrations, and the
//! dump (export and import).
//!
//! What holds here as in the SQLite store:
//! - records, the audit log, the conversation log and checkpoints are never deleted: row
//!   triggers refuse `DELETE` (and `UPDATE` of the logs, but for the one redaction that
//!   forgetting makes), and statement triggers refuse `TRUNCATE`, which skips row triggers;
//! - migrations are numbered, each runs in one transaction with its version bump, and a
//!   database written by a newer build is refused before anything is written;
//! - two processes starting at once migrate once: the migration transaction holds an
//!   advisory lock.
//!
//! Invariant: the password never appears in an error, a log line or `Debug` output. Errors
//! name the database by [`PgOptions::target`]: `postgres://user@host:port/db`.
//!
//! The record operations are the store's own (`rows.rs` and the rest, through
//! `sql::Exec`, with PostgreSQL's batch statements in `batch.rs`).

use std::io::Write;
use std::time::Duration;

use std::cell::RefCell;
use std::collections::HashMap;

use mneme_core::DecayConfig;
use postgres::types::{IsNull, ToSql, Type};
use postgres::{Client, NoTls, Transaction};

use crate::dump::{Cell, DumpSummary, DumpWriter, Kind, TABLES};
use crate::error::{StoreError, StoreResult};
use crate::sql::PgExec;
use crate::{SecretKey, Store};

/// The schema version this build writes on PostgreSQL (its own numbering: version 1 holds
/// what SQLite's versions 1 to 8 built but the full-text tables, version 2 the records'
/// full-text rows, version 3 the workspace search index, version 4 the embeddings in
/// pgvector, version 5 the match estimate of bounded lexical search, version 6 mneme's own
/// lexemes, version 7 the workspace's chunk vectors and reads).
pub const PG_SCHEMA_VERSION: i64 = 7;

/// The advisory lock key of migrations ("mnem").
const MIGRATION_LOCK: i64 = 0x6d6e_656d;

/// How to reach a PostgreSQL database.
#[derive(Clone)]
pub struct PgOptions {
    /// `postgres://user[:password]@host[:port]/database[?options]` or a `key=value` string.
    pub url: String,
    /// Overrides the URL's password (from `MNEME_DATABASE_PASSWORD` or a file).
    pub password: Option<SecretKey>,
    pub connect_timeout: Duration,
    /// Every statement is cancelled after this long (`statement_timeout`).
    pub statement_timeout: Duration,
    /// Create the schema in an empty database (`mneme init`); otherwise refuse it.
    pub create: bool,
    pub decay: DecayConfig,
    /// PEM certificates of the authority that signed the server's certificate, trusted
    /// beside the system's (for `sslmode=require` with a private CA).
    pub ca_file: Option<std::path::PathBuf>,
}

impl std::fmt::Debug for PgOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgOptions")
            .field("target", &self.target())
            .field("connect_timeout", &self.connect_timeout)
            .field("statement_timeout", &self.statement_timeout)
            .field("create", &self.create)
            .field("ca_file", &self.ca_file)
            .finish_non_exhaustive()
    }
}

impl PgOptions {
    /// Options with the defaults: 10 s to connect, 30 s per statement.
    pub fn new(url: impl Into<String>) -> Self {
        PgOptions {
            url: url.into(),
            password: None,
            connect_timeout: Duration::from_secs(10),
            statement_timeout: Duration::from_secs(30),
            create: false,
            decay: DecayConfig::default(),
            ca_file: None,
        }
    }

    /// Connects, over TLS when the URL asks for it (`sslmode=require`, or `prefer`: TLS
    /// when the server offers it). Over TLS the server's certificate is always verified,
    /// against the system's authorities and [`PgOptions::ca_file`], and its name must
    /// match the host: stricter than libpq's `require`, as strict as its `verify-full`.
    pub(crate) fn connect(&self) -> StoreResult<Connection> {
        let target = self.target();
        let config = self.config()?;
        let wants_tls = config.get_ssl_mode() != postgres::config::SslMode::Disable && self.url.contains("sslmode");
        if !wants_tls {
            if self.ca_file.is_some() {
                return Err(StoreError::Postgres {
                    target,
                    detail: "a CA file is set but the URL does not ask for TLS: add ?sslmode=require".into(),
                });
            }
            return config.connect(NoTls).map(Connection::new).map_err(|e| pg_error(&target, e));
        }
        let tls = tokio_postgres_rustls::MakeRustlsConnect::new(self.tls_config()?);
        config.connect(tls).map(Connection::new).map_err(|e| pg_error(&target, e))
    }

    /// A connection set up for mneme's work: the statement timeout, quiet notices.
    pub(crate) fn session(&self) -> StoreResult<Connection> {
        let mut client = self.connect()?;
        let timeout_ms = self.statement_timeout.as_millis().min(i32::MAX as u128);
        client
            .batch_execute(&format!("SET statement_timeout = {timeout_ms}; SET client_min_messages = warning"))
            .map_err(|e| pg_error(&self.target(), e))?;
        Ok(client)
    }

    fn tls_config(&self) -> StoreResult<rustls::ClientConfig> {
        use rustls::pki_types::CertificateDer;
        use rustls::pki_types::pem::PemObject;
        let fail = |detail: String| StoreError::Postgres { target: self.target(), detail };
        let mut roots = rustls::RootCertStore::empty();
        // The system's authorities; one that does not parse is skipped, as browsers do.
        for cert in rustls_native_certs::load_native_certs().certs {
            let _ = roots.add(cert);
        }
        if let Some(path) = &self.ca_file {
            let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(path)
                .and_then(|certs| certs.collect::<Result<_, _>>())
                .map_err(|e| fail(format!("cannot read the CA file {}: {e}", path.display())))?;
            if certs.is_empty() {
                return Err(fail(format!("the CA file {} holds no PEM certificate", path.display())));
            }
            for cert in certs {
                roots.add(cert).map_err(|e| fail(format!("the CA file {} holds a bad certificate: {e}", path.display())))?;
            }
        }
        let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
        Ok(rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| fail(format!("TLS set-up: {e}")))?
            .with_root_certificates(roots)
            .with_no_client_auth())
    }

    /// The database without its password: `postgres://user@host:port/database`, for
    /// messages. An unparsable URL is shown only up to its scheme.
    pub fn target(&self) -> String {
        match self.url.parse::<postgres::Config>() {
            Ok(config) => target_of(&config),
            Err(_) => {
                let scheme = self.url.split_once("://").map_or("", |(s, _)| s);
                format!("{scheme}://… (unparsable)")
            }
        }
    }

    fn config(&self) -> StoreResult<postgres::Config> {
        let mut config: postgres::Config = self.url.parse().map_err(|e: postgres::Error| StoreError::Postgres {
            target: self.target(),
            detail: format!("invalid database URL: {}", url_error(&e)),
        })?;
        if let Some(password) = &self.password {
            config.password(password.expose());
        }
        config.connect_timeout(self.connect_timeout);
        if config.get_application_name().is_none() {
            config.application_name("mneme");
        }
        Ok(config)
    }
}

/// The URL parser's complaint, with the option it names (`invalid value for option
/// \`sslmode\``, `unknown option \`colour\``); its other messages may quote a character
/// of the URL, which can be the password's, so they are not shown.
fn url_error(e: &postgres::Error) -> String {
    use std::error::Error as _;
    match e.source().map(|s| s.to_string()) {
        Some(why) if why.starts_with("invalid value for option `") || why.starts_with("unknown option `") => format!("{e}: {why}"),
        _ => e.to_string(),
    }
}

fn target_of(config: &postgres::Config) -> String {
    let host = match config.get_hosts().first() {
        Some(postgres::config::Host::Tcp(h)) => h.clone(),
        Some(postgres::config::Host::Unix(p)) => p.display().to_string(),
        None => "localhost".into(),
    };
    let port = config.get_ports().first().copied().unwrap_or(5432);
    let user = config.get_user().unwrap_or("");
    let db = config.get_dbname().unwrap_or(user);
    format!("postgres://{user}@{host}:{port}/{db}")
}

/// Turns a driver error into a store error naming the database, never the password.
pub(crate) fn pg_error(target: &str, e: postgres::Error) -> StoreError {
    let detail = match e.as_db_error() {
        Some(db) => match db.detail() {
            Some(more) => format!("{} ({more})", db.message()),
            None => db.message().to_string(),
        },
        None => {
            let mut text = e.to_string();
            let mut source = std::error::Error::source(&e);
            while let Some(s) = source {
                text.push_str(": ");
                text.push_str(&s.to_string());
                source = s.source();
            }
            text
        }
    };
    let detail = if detail.contains("password missing") {
        format!("{detail} (put it in MNEME_DATABASE_PASSWORD or MNEME_DATABASE_PASSWORD_FILE, or in the URL)")
    } else if detail.contains("invalid peer certificate") {
        format!("{detail} (to trust a private authority, give its PEM certificate in storage.ca_file or MNEME_DATABASE_CA_FILE)")
    } else {
        detail
    };
    if e.as_db_error().is_none() && (e.is_closed() || detail.contains("connect")) {
        return StoreError::Unreachable { target: target.to_string(), detail };
    }
    StoreError::Postgres { target: target.to_string(), detail }
}

/// A client that may be dropped anywhere. `postgres::Client` closes its connection on a
/// runtime of its own, which panics when the drop happens on an async runtime's thread (a
/// daemon dropping its service as it shuts down): there it is dropped on a thread of its
/// own.
pub(crate) struct Connection(Option<Client>);

impl Connection {
    fn new(client: Client) -> Self {
        Connection(Some(client))
    }
}

impl std::ops::Deref for Connection {
    type Target = Client;
    fn deref(&self) -> &Client {
        self.0.as_ref().expect("a connection is only taken by its drop")
    }
}

impl std::ops::DerefMut for Connection {
    fn deref_mut(&mut self) -> &mut Client {
        self.0.as_mut().expect("a connection is only taken by its drop")
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        if let Some(client) = self.0.take()
            && tokio::runtime::Handle::try_current().is_ok()
        {
            // The thread ends when the connection is closed; the caller waits for it.
            let _ = std::thread::spawn(move || drop(client)).join();
        }
    }
}

/// An open connection to a mneme database on PostgreSQL, behind a [`Store`], with its
/// prepared statements (valid for the connection's life, whatever the transactions do).
pub(crate) struct PgConn {
    client: Connection,
    statements: RefCell<HashMap<String, postgres::Statement>>,
    target: String,
    /// How to connect again when the server closed this connection (a restart, a
    /// failover, an idle timeout in a proxy).
    options: PgOptions,
    /// After a failed reconnect, none is tried before this instant (the backoff doubles
    /// from 100 ms to 5 s; calls in between fail at once with the last cause).
    retry: Option<(std::time::Instant, Duration, String)>,
    /// When a transaction last began on this connection.
    used: std::time::Instant,
}

/// A connection unused for this long is checked before its next transaction.
const IDLE_CHECK: Duration = Duration::from_secs(2);

impl std::fmt::Debug for PgConn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgConn").field("target", &self.target).finish_non_exhaustive()
    }
}

struct PgMigration {
    version: i64,
    description: &'static str,
    sql: &'static str,
    /// A step in Rust after the SQL, in the same transaction (work SQL cannot do).
    then: Option<fn(&mut Transaction<'_>, &str) -> StoreResult<()>>,
}

const PG_MIGRATIONS: &[PgMigration] = &[
    PgMigration {
        version: 1,
        description: "records, lineage, tags, links, append-only audit, vectors, the agent's tables, threads, forgetting",
        sql: include_str!("pg_v1.sql"),
        then: None,
    },
    PgMigration {
        version: 2,
        description: "full-text rows (own text, thread context, date words) with a weighted tsvector",
        sql: include_str!("pg_v2.sql"),
        then: None,
    },
    PgMigration {
        version: 3,
        description: "the workspace search index (chunks with a weighted tsvector)",
        sql: include_str!("pg_v3.sql"),
        then: None,
    },
    PgMigration {
        version: 4,
        description: "embeddings in pgvector (halfvec, HNSW for 384 dimensions) with a version for other daemons to catch up",
        sql: include_str!("pg_v4.sql"),
        then: None,
    },
    PgMigration {
        version: 5,
        description: "the planner's estimate of a full-text query's matches (bounded lexical work)",
        sql: include_str!("pg_v5.sql"),
        then: None,
    },
    PgMigration {
        version: 6,
        description: "full-text rows hold the lexemes mneme computes (no to_tsvector in the server)",
        sql: include_str!("pg_v6.sql"),
        then: Some(lexemes_from_v5),
    },
    PgMigration {
        version: 7,
        description: "workspace knowledge: chunk digests and their vectors, reads of files and entries",
        sql: include_str!("pg_v7.sql"),
        then: None,
    },
];

/// Schema v6's second step: each v5 full-text row's text, context and date become the
/// `tsvector` mneme computes, a thousand rows per statement; then the v5 table goes and
/// the GIN index is built over the filled table (faster than growing it row by row).
fn lexemes_from_v5(tx: &mut Transaction<'_>, target: &str) -> StoreResult<()> {
    let err = |e| pg_error(target, e);
    let mut after = i64::MIN;
    loop {
        let rows =
            tx.query("SELECT seq, text, ctx, date FROM records_fts_v5 WHERE seq > $1 ORDER BY seq LIMIT 1000", &[&after]).map_err(err)?;
        let Some(last) = rows.last() else { break };
        after = last.get(0);
        let seqs: Vec<i64> = rows.iter().map(|r| r.get(0)).collect();
        let vectors: Vec<PgTsVector> = rows.iter().map(|r| crate::context::pg_tsvector(r.get(1), r.get(2), r.get(3))).collect();
        tx.execute("INSERT INTO records_fts (seq, tsv) SELECT * FROM unnest($1::int8[], $2::tsvector[])", &[&seqs, &vectors])
            .map_err(err)?;
    }
    tx.batch_execute("DROP TABLE records_fts_v5; CREATE INDEX records_fts_tsv ON records_fts USING gin (tsv);").map_err(err)
}

/// The advisory lock every write transaction takes first ("mnew"): writers are serialised
/// as SQLite's `BEGIN IMMEDIATE` serialises them, across every process on the database.
const WRITE_LOCK: i64 = 0x6d6e_6577;

impl Store {
    /// Connects to a mneme store on PostgreSQL, then checks and migrates the schema under
    /// the migration lock:
    ///
    /// 1. An unreachable server or a refused login fails with the target named.
    /// 2. A database that has tables but no mneme schema is refused, as is one whose
    ///    schema is newer than this build; an empty one is refused unless `create`.
    /// 3. Pending migrations run, each in its own transaction with its version bump.
    pub fn open_postgres(options: PgOptions) -> StoreResult<Store> {
        Store::open_postgres_at(options, PG_SCHEMA_VERSION)
    }

    /// Opens a PostgreSQL store migrated only up to an older schema version, for
    /// migration tests only.
    #[doc(hidden)]
    pub fn create_postgres_at_version(options: PgOptions, version: i64) -> StoreResult<Store> {
        Store::open_postgres_at(options, version)
    }

    fn open_postgres_at(options: PgOptions, version: i64) -> StoreResult<Store> {
        let target = options.target();
        let client = options.session()?;
        let mut conn = PgConn {
            client,
            statements: RefCell::new(HashMap::new()),
            target: target.clone(),
            options: PgOptions { create: false, ..options.clone() },
            retry: None,
            used: std::time::Instant::now(),
        };
        conn.migrate(version, options.create)?;
        let mut store = Store {
            engine: crate::Engine::Pg(Box::new(conn)),
            path: std::path::PathBuf::from(target),
            decay: options.decay,
            encrypted: false,
        };
        store.refresh_rank_anchors()?;
        Ok(store)
    }
}

impl PgConn {
    /// Starts a transaction for `Store::write` (after the write lock) or `Store::read` (a
    /// `REPEATABLE READ` snapshot, as SQLite's read transaction is).
    pub(crate) fn begin(&mut self, write: bool) -> StoreResult<PgExec<'_>> {
        // A connection the server closed (it restarted) is replaced before the
        // transaction. One idle for a while is checked first (an empty query), so that a
        // restart while the daemon was quiet costs no request; under load a restart fails
        // the transactions in flight (not acknowledged) and the next one reconnects.
        let idle = self.used.elapsed() > IDLE_CHECK;
        if self.client.is_closed() || (idle && self.client.is_valid(self.options.connect_timeout).is_err()) {
            self.reconnect()?;
        }
        self.used = std::time::Instant::now();
        let PgConn { client, statements, target, .. } = self;
        let err = |e| pg_error(target, e);
        let tx = if write {
            let mut tx = client.transaction().map_err(err)?;
            tx.execute("SELECT pg_advisory_xact_lock($1)", &[&WRITE_LOCK]).map_err(err)?;
            tx
        } else {
            client.build_transaction().isolation_level(postgres::IsolationLevel::RepeatableRead).read_only(true).start().map_err(err)?
        };
        Ok(PgExec { tx: RefCell::new(tx), statements, target })
    }

    /// Connects again (after the backoff, if the last attempt failed); the prepared
    /// statements belonged to the old session and are forgotten.
    fn reconnect(&mut self) -> StoreResult<()> {
        let now = std::time::Instant::now();
        if let Some((not_before, _, cause)) = &self.retry
            && now < *not_before
        {
            return Err(StoreError::Unreachable { target: self.target.clone(), detail: format!("reconnecting after: {cause}") });
        }
        match self.options.session() {
            Ok(client) => {
                self.statements.borrow_mut().clear();
                self.client = client;
                self.retry = None;
                eprintln!("mneme: reconnected to PostgreSQL at {}", self.target);
                Ok(())
            }
            Err(e) => {
                let wait = self.retry.as_ref().map_or(Duration::from_millis(100), |(_, w, _)| (*w * 2).min(Duration::from_secs(5)));
                self.retry = Some((now + wait, wait, e.to_string()));
                Err(e)
            }
        }
    }

    pub(crate) fn schema_version(&mut self) -> StoreResult<i64> {
        let row = self.client.query_one("SELECT version FROM mneme_schema", &[]).map_err(|e| pg_error(&self.target, e))?;
        Ok(row.get(0))
    }

    /// How many prepared statements this connection's server session holds.
    pub(crate) fn prepared_statements(&mut self) -> StoreResult<i64> {
        let row = self.client.query_one("SELECT count(*) FROM pg_prepared_statements", &[]).map_err(|e| pg_error(&self.target, e))?;
        Ok(row.get(0))
    }

    pub(crate) fn execute_raw(&mut self, sql: &str) -> StoreResult<()> {
        self.client.batch_execute(sql).map_err(|e| pg_error(&self.target, e))
    }

    /// Applies pending migrations up to `target_version`.
    fn migrate(&mut self, target_version: i64, create: bool) -> StoreResult<()> {
        let target = self.target.clone();
        let err = |e| pg_error(&target, e);
        for m in PG_MIGRATIONS.iter().filter(|m| m.version <= target_version) {
            let mut tx = self.client.transaction().map_err(err)?;
            tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK]).map_err(err)?;
            let current = current_version(&mut tx, &target, create)?;
            if current >= m.version {
                tx.commit().map_err(err)?;
                continue;
            }
            tx.batch_execute(m.sql).map_err(|e| match pg_error(&target, e) {
                // pgvector is an extension the server must have and a superuser may create.
                StoreError::Postgres { target, detail } if detail.contains("extension \"vector\"") => StoreError::Postgres {
                    target,
                    detail: format!(
                        "{detail} (mneme needs pgvector: install it on the server, then run `CREATE EXTENSION vector;` \
                         in this database as a superuser)"
                    ),
                },
                other => other,
            })?;
            if let Some(then) = m.then {
                then(&mut tx, &target)?;
            }
            tx.execute(
                "INSERT INTO schema_migrations (version, applied_at, description) VALUES ($1, $2, $3)",
                &[&m.version, &jiff::Timestamp::now().as_millisecond(), &m.description],
            )
            .map_err(err)?;
            tx.execute("UPDATE mneme_schema SET version = $1", &[&m.version]).map_err(err)?;
            tx.commit().map_err(err)?;
        }
        // Nothing pending: still check (a newer or foreign database is refused).
        let mut tx = self.client.transaction().map_err(err)?;
        current_version(&mut tx, &target, create)?;
        tx.commit().map_err(err)
    }

    /// Writes the whole database as a dump from one snapshot (`REPEATABLE READ`).
    pub(crate) fn export(&mut self, out: &mut dyn Write, progress: &mut dyn FnMut(&str, u64)) -> StoreResult<DumpSummary> {
        let target = self.target.clone();
        let err = |e| pg_error(&target, e);
        let mut tx = self
            .client
            .build_transaction()
            .isolation_level(postgres::IsolationLevel::RepeatableRead)
            .read_only(true)
            .start()
            .map_err(err)?;
        let mut writer = DumpWriter::new(out, "postgres", progress)?;
        for table in TABLES {
            // Text keys in byte order, as SQLite sorts them: the same data, the same dump.
            let order: Vec<String> = table
                .key
                .iter()
                .map(|k| match table.columns.iter().find(|(c, _)| c == k).map(|(_, kind)| *kind) {
                    Some(Kind::Text) => format!("{k} COLLATE \"C\""),
                    _ => (*k).to_string(),
                })
                .collect();
            let sql = format!("SELECT {} FROM {} ORDER BY {}", table.column_list(), table.name, order.join(", "));
            let mut rows = tx.query_raw(sql.as_str(), std::iter::empty::<i64>()).map_err(err)?;
            let mut cells = Vec::with_capacity(table.columns.len());
            use postgres::fallible_iterator::FallibleIterator;
            while let Some(row) = rows.next().map_err(err)? {
                cells.clear();
                for (i, (_, kind)) in table.columns.iter().enumerate() {
                    let cell = match kind {
                        Kind::Int => row.try_get::<_, Option<i64>>(i).map(|v| v.map_or(Cell::Null, Cell::Int)),
                        Kind::Real => row.try_get::<_, Option<f64>>(i).map(|v| v.map_or(Cell::Null, Cell::Real)),
                        Kind::Text => row.try_get::<_, Option<String>>(i).map(|v| v.map_or(Cell::Null, Cell::Text)),
                        Kind::Blob => row.try_get::<_, Option<Vec<u8>>>(i).map(|v| v.map_or(Cell::Null, Cell::Blob)),
                    }
                    .map_err(err)?;
                    cells.push(cell);
                }
                writer.row(table, &cells)?;
            }
        }
        let summary = writer.finish()?;
        tx.commit().map_err(err)?;
        Ok(summary)
    }
}

/// Commits a transaction begun by [`PgConn::begin`].
pub(crate) fn commit(exec: PgExec<'_>) -> StoreResult<()> {
    let target = exec.target;
    exec.tx.into_inner().commit().map_err(|e| pg_error(target, e))
}

/// Reads the schema version inside the migration transaction, refusing a foreign or newer
/// database; creates the version row in an empty database when `create`.
fn current_version(tx: &mut Transaction<'_>, target: &str, create: bool) -> StoreResult<i64> {
    let err = |e| pg_error(target, e);
    let has_schema: bool = tx.query_one("SELECT to_regclass('mneme_schema') IS NOT NULL", &[]).map_err(err)?.get(0);
    if has_schema {
        let row = tx.query_one("SELECT application, version FROM mneme_schema", &[]).map_err(err)?;
        let (application, version): (String, i64) = (row.get(0), row.get(1));
        if application != "mneme" {
            return Err(StoreError::PgNotMneme { target: target.to_string(), detail: format!("its schema belongs to {application:?}") });
        }
        if version > PG_SCHEMA_VERSION {
            return Err(StoreError::PgTooNew { target: target.to_string(), found: version, supported: PG_SCHEMA_VERSION });
        }
        return Ok(version);
    }
    let tables: i64 =
        tx.query_one("SELECT count(*) FROM information_schema.tables WHERE table_schema = current_schema()", &[]).map_err(err)?.get(0);
    if tables > 0 {
        return Err(StoreError::PgNotMneme {
            target: target.to_string(),
            detail: format!("its schema has {tables} tables but no mneme_schema; use an empty database"),
        });
    }
    if !create {
        return Err(StoreError::PgMissing { target: target.to_string() });
    }
    tx.batch_execute(
        "CREATE TABLE mneme_schema (application TEXT NOT NULL, version BIGINT NOT NULL); \
         INSERT INTO mneme_schema VALUES ('mneme', 0); \
         CREATE TABLE schema_migrations (version BIGINT PRIMARY KEY, applied_at BIGINT NOT NULL, description TEXT NOT NULL);",
    )
    .map_err(err)?;
    Ok(0)
}

/// A `tsvector` in PostgreSQL's binary form ([`mneme_core::lexemes::TsVector::to_binary`]):
/// the server stores it as sent, without parsing text.
#[derive(Clone, Debug)]
pub(crate) struct PgTsVector(pub Vec<u8>);

impl ToSql for PgTsVector {
    fn to_sql(&self, _: &Type, out: &mut bytes::BytesMut) -> Result<IsNull, Box<dyn std::error::Error + Sync + Send>> {
        out.extend_from_slice(&self.0);
        Ok(IsNull::No)
    }

    fn accepts(ty: &Type) -> bool {
        ty.name() == "tsvector"
    }

    postgres::types::to_sql_checked!();
}

impl ToSql for Cell {
    fn to_sql(&self, ty: &Type, out: &mut bytes::BytesMut) -> Result<IsNull, Box<dyn std::error::Error + Sync + Send>> {
        match self {
            Cell::Null => Ok(IsNull::Yes),
            Cell::Int(n) => n.to_sql(ty, out),
            Cell::Real(x) => x.to_sql(ty, out),
            Cell::Text(s) => s.to_sql(ty, out),
            Cell::Blob(b) => b.to_sql(ty, out),
        }
    }

    fn accepts(ty: &Type) -> bool {
        matches!(*ty, Type::INT8 | Type::FLOAT8 | Type::TEXT | Type::BYTEA)
    }

    postgres::types::to_sql_checked!();
}

/// Background jobs that run once across every daemon on one database: each job is held by
/// one daemon through a session-level advisory lock on a connection of its own. The
/// holder keeps the lock while its connection lives; when the daemon dies (or is killed
/// mid-job) the server ends its session, the lock is free, and the next daemon to ask
/// takes the job over.
pub struct JobLeases {
    client: std::sync::Mutex<Connection>,
    held: std::sync::Mutex<std::collections::BTreeSet<String>>,
    target: String,
    options: PgOptions,
}

impl std::fmt::Debug for JobLeases {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JobLeases").field("target", &self.target).finish_non_exhaustive()
    }
}

impl JobLeases {
    /// A connection of its own for the leases (never used for data).
    pub fn connect(options: &PgOptions) -> StoreResult<JobLeases> {
        let target = options.target();
        let client = options.connect()?;
        Ok(JobLeases { client: std::sync::Mutex::new(client), held: Default::default(), target, options: options.clone() })
    }

    /// Whether this process holds `job` (taking it when no one does). Once held, held
    /// until the process or its lease connection ends.
    pub fn hold(&self, job: &str) -> StoreResult<bool> {
        let mut held = self.held.lock().unwrap_or_else(|p| p.into_inner());
        let mut client = self.client.lock().unwrap_or_else(|p| p.into_inner());
        // The server ends a lost connection's session and with it every lease it held
        // (another daemon may have taken them since): start over on a new connection.
        if client.is_closed() || (!held.is_empty() && client.is_valid(self.options.connect_timeout).is_err()) {
            held.clear();
            *client = self.options.connect()?;
        }
        if held.contains(job) {
            return Ok(true);
        }
        // Keys in mneme's own space: the first argument is "mnem", the second the job's hash.
        let taken: bool = client
            .query_one("SELECT pg_try_advisory_lock($1::int4, hashtext($2))", &[&(MIGRATION_LOCK as i32), &job])
            .map_err(|e| pg_error(&self.target, e))?
            .get(0);
        if taken {
            held.insert(job.to_string());
        }
        Ok(taken)
    }
}
