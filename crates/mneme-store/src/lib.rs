//! mneme-store: the SQLite store. Owns the schema, migrations, transactions, the
//! full-text index and encryption at rest. Knows `mneme-core` only.
//!
//! Read [`Store::open`] first (the recovery path), then [`Store::write`] and
//! [`WriteTx`] (the write path), then `search.rs`.
//!
//! Invariant: records and audit entries are never deleted (SQL triggers enforce it).
//! Invariant: every write happens inside one `BEGIN IMMEDIATE` transaction; a failed
//! operation rolls back whole.
//! Invariant: the encryption key never appears in an error, a log line or `Debug` output.

mod agent;
mod batch;
mod context;
mod dump;
mod error;
mod lookup;
mod pg;
mod rows;
mod schema;
mod search;
mod sql;
mod vectors;

use std::fmt;
use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::Duration;

use mneme_core::DecayConfig;
use rusqlite::{Connection, OpenFlags, TransactionBehavior};

pub use agent::{
    Checkpoint, ChunkHit, ChunkTodo, ChunkVector, Conversation, Direction, Dispatch, IndexedFile, NewChunk, NewConversation, SyncState,
    TaskRow, TaskRun, WorkspaceRead, chunk_digest, chunk_model_text,
};
pub use dump::{DUMP_FORMAT, DUMP_VERSION, DumpSummary};
pub use error::{StoreError, StoreResult};
pub use lookup::AuditEvent;
pub use pg::{JobLeases, PG_SCHEMA_VERSION, PgOptions};
pub use rows::{Link, NewRows, ReadTx, RowMaker, StoreStats, WriteTx};
pub use schema::{APPLICATION_ID, SCHEMA_VERSION};
pub use search::{Candidate, RecordFilter};
pub use vectors::{EmbedTodo, PG_HNSW_DIM, StoredVector, VectorChanges, quantize};

use error::{SqlContext, classify};

/// How long a writer waits for another process's write lock before giving up with `Busy`.
pub const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// An encryption key. `Debug` and `Display` never show it.
#[derive(Clone)]
pub struct SecretKey(String);

impl SecretKey {
    /// Refuses an empty key (SQLCipher would silently treat it as "no encryption") and one
    /// with control characters (a NUL would cut the key short). A trailing newline, as
    /// key files usually have, is dropped. The error never contains the key.
    pub fn new(key: String) -> Result<Self, &'static str> {
        let trimmed = key.trim_end_matches(['\n', '\r']).to_string();
        if trimmed.is_empty() {
            return Err("is empty");
        }
        if trimmed.chars().any(char::is_control) {
            return Err("contains control characters");
        }
        Ok(SecretKey(trimmed))
    }
}

impl SecretKey {
    /// The key itself, for the one call that needs it (never for messages).
    pub(crate) fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for SecretKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SecretKey(<redacted>)")
    }
}

/// Whether SQLite connections opened from now on move the WAL into the database and
/// delete it when they close (SQLite's default, and the daemon's). See
/// [`keep_wal_on_close`].
static CHECKPOINT_ON_CLOSE: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(true);

/// For a short-lived process that writes a little (an agent's hook): its connections leave
/// the WAL for the next writer's checkpoint instead of checkpointing and deleting it on
/// close. That is two fsyncs, the copy of its pages and the WAL file's re-creation (a
/// directory fsync) saved per process. Nothing committed is at risk: the WAL is part of
/// the database for every reader, the next connection that closes normally or reaches
/// SQLite's auto-checkpoint moves it in, and `forget` still truncates it ([`Store::scrub`]).
pub fn keep_wal_on_close() {
    CHECKPOINT_ON_CLOSE.store(false, std::sync::atomic::Ordering::Relaxed);
}

/// How to open a store.
#[derive(Debug, Clone)]
pub struct StoreOptions {
    pub path: PathBuf,
    /// Encrypt with SQLCipher using this key.
    pub key: Option<SecretKey>,
    /// Create the file when it does not exist (only `mneme init` and the bench do).
    pub create: bool,
    pub decay: DecayConfig,
}

/// An open store: one SQLite connection in WAL mode, or one PostgreSQL connection
/// ([`Store::open_postgres`]).
#[derive(Debug)]
pub struct Store {
    pub(crate) engine: Engine,
    /// The SQLite file, or on PostgreSQL the database as `postgres://user@host:port/db`
    /// (never the password), which errors name.
    path: PathBuf,
    decay: DecayConfig,
    encrypted: bool,
}

/// The connection behind a [`Store`].
#[derive(Debug)]
pub(crate) enum Engine {
    Lite {
        // Invariant: declared before `_open`, so the connection (and its POSIX locks) is
        // closed before the file leaves this process's registry of open database files.
        conn: Connection,
        _open: OpenFileGuard,
    },
    Pg(Box<pg::PgConn>),
}

/// The database files this process holds SQLite connections to, by (device, inode), with
/// the number of connections.
///
/// POSIX record locks belong to the process, not the descriptor: closing *any* descriptor
/// of a file drops every lock the process holds on it (hazard 2.2 of SQLite's "How To
/// Corrupt An SQLite Database File"). SQLite's own VFS works around this for its own
/// descriptors, but [`inspect_file`] reads the header with a plain `File`. Done while
/// another connection of this process is open (a daemon opening its read connections after
/// the writer), that close silently dropped the writer's SHARED lock; the next foreign
/// client to close the database then believed itself the last one, checkpointed and
/// deleted the WAL and shared memory under the daemon, and acknowledged writes were lost.
///
/// Invariant: the plain-file header check runs only while no connection of this process
/// has the file open, and the lock is held from that check until the new connection is
/// registered, so no other thread can open a connection in between.
static OPEN_FILES: std::sync::Mutex<std::collections::BTreeMap<(u64, u64), usize>> =
    std::sync::Mutex::new(std::collections::BTreeMap::new());

/// One connection's entry in [`OPEN_FILES`], released on drop.
#[derive(Debug)]
struct OpenFileGuard {
    file: (u64, u64),
}

impl OpenFileGuard {
    /// Registers one more connection to `file`. The caller holds the registry lock.
    fn register(files: &mut std::collections::BTreeMap<(u64, u64), usize>, file: (u64, u64)) -> OpenFileGuard {
        *files.entry(file).or_insert(0) += 1;
        OpenFileGuard { file }
    }
}

impl Drop for OpenFileGuard {
    fn drop(&mut self) {
        let mut files = OPEN_FILES.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(count) = files.get_mut(&self.file) {
            *count -= 1;
            if *count == 0 {
                files.remove(&self.file);
            }
        }
    }
}

/// The (device, inode) identity of a file, read with `stat` (no descriptor opened).
fn file_identity(path: &Path) -> StoreResult<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(path).map_err(|source| StoreError::Io { path: path.to_path_buf(), source })?;
    Ok((meta.dev(), meta.ino()))
}

/// Runs SQLite's process-wide initialisation to completion exactly once, before any
/// connection is opened.
///
/// `sqlite3_initialize` marks SQLite initialised *before* it runs SQLCipher's extra
/// initialisation (which registers the crypto provider), so a second thread opening its first
/// connection at the same moment can run `PRAGMA key` against a half-initialised SQLCipher and
/// have the key rejected. Seen once in CI as `KeyRejected` on a fresh encrypted store while
/// another test opened a store in parallel. `Once` makes every other thread wait.
fn initialize_sqlite() {
    static INIT: std::sync::Once = std::sync::Once::new();
    INIT.call_once(|| {
        // Opening any connection runs sqlite3_initialize, extra initialisation included, to
        // completion on this thread (the workspace forbids `unsafe`, so no direct FFI call).
        // A failure resurfaces on the real open, which reports it with its path.
        drop(Connection::open_in_memory());
    });
}

impl Store {
    /// Opens (or creates) a store. The recovery path:
    ///
    /// 1. Inspect the file before SQLite touches it: a missing file is refused unless
    ///    `create`; a plaintext header with a key, or a truncated plaintext file, is refused.
    /// 2. Open the connection, apply the key, and read the schema. A wrong key, a
    ///    non-SQLite file or a missing key fails here, before anything is written.
    /// 3. Refuse a foreign SQLite file (application id) or a newer schema version.
    /// 4. Only now write: WAL mode, then each pending migration in its own transaction.
    ///    SQLite's own recovery replays or discards the WAL of a crashed writer, so a
    ///    committed transaction is never lost and an uncommitted one never seen.
    /// 5. Recompute the rank anchors if the decay configuration changed since last open.
    pub fn open(options: StoreOptions) -> StoreResult<Store> {
        // Some lock conflicts while another process is creating or recovering the same store
        // (switching to WAL, WAL recovery) return SQLITE_BUSY without waiting on the busy
        // handler. Opening is idempotent and transactional, so retry until BUSY_TIMEOUT.
        let started = std::time::Instant::now();
        loop {
            match Self::open_once(options.clone()) {
                Err(StoreError::Busy { .. }) if started.elapsed() < BUSY_TIMEOUT => {
                    std::thread::sleep(Duration::from_millis(20));
                }
                result => return result,
            }
        }
    }

    fn open_once(options: StoreOptions) -> StoreResult<Store> {
        initialize_sqlite();
        let StoreOptions { path, key, create, decay } = options;
        // Held until this connection is registered: see `OPEN_FILES`.
        let mut open_files = OPEN_FILES.lock().unwrap_or_else(|p| p.into_inner());
        let existed = match file_identity(&path).ok() {
            // Another connection of this process has this file open: it was inspected when
            // that connection opened, and reading it again with a plain descriptor would
            // drop that connection's locks. SQLite's own checks below still run.
            Some(file) if open_files.contains_key(&file) => true,
            _ => inspect_file(&path, key.is_some())?,
        };
        if !existed && !create {
            return Err(StoreError::Missing { path });
        }
        if !existed && let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent).map_err(|source| StoreError::Io { path: parent.to_path_buf(), source })?;
        }
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_NO_MUTEX
            | if existed { OpenFlags::empty() } else { OpenFlags::SQLITE_OPEN_CREATE };
        let conn = Connection::open_with_flags(&path, flags).ctx(&path)?;
        let open = OpenFileGuard::register(&mut open_files, file_identity(&path)?);
        drop(open_files);
        let encrypted = key.is_some();
        // Built at once so that on every error path below the connection closes before the
        // file leaves the registry (field order).
        let store = Store { engine: Engine::Lite { conn, _open: open }, path: path.clone(), decay, encrypted };
        let Engine::Lite { conn, .. } = &store.engine else { unreachable!("just built as SQLite") };
        conn.busy_timeout(BUSY_TIMEOUT).ctx(&path)?;
        // Plans never depend on bound values (the query planner stability guarantee). Without
        // it every `LIMIT ?` marks its statement for re-preparation whenever a value is bound,
        // so a cached statement was parsed and planned again on every run (7 % of a prompt hook).
        conn.set_db_config(rusqlite::config::DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG, true).ctx(&path)?;
        if !CHECKPOINT_ON_CLOSE.load(std::sync::atomic::Ordering::Relaxed) {
            conn.set_db_config(rusqlite::config::DbConfig::SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, true).ctx(&path)?;
        }
        // Retrieval builds one statement per filter shape; keep them all prepared.
        conn.set_prepared_statement_cache_capacity(128);
        if let Some(key) = &key {
            // SQLCipher logs failed decryptions to stderr by default; mneme reports them itself.
            let _ = conn.pragma_update(None, "cipher_log_level", "NONE");
            // The error of this statement could quote the key, so it is replaced, not wrapped.
            conn.pragma_update(None, "key", &key.0).map_err(|_| StoreError::KeyRejected { path: path.clone() })?;
        }
        // The first read: with a wrong or missing key this is where SQLite says "not a database".
        let objects: i64 =
            conn.query_row("SELECT count(*) FROM sqlite_master", [], |r| r.get(0)).map_err(|e| match classify(e, &path) {
                StoreError::NotADatabaseOrEncrypted { path } if encrypted => StoreError::WrongKey { path },
                other => other,
            })?;
        let application_id: i64 = conn.pragma_query_value(None, "application_id", |r| r.get(0)).ctx(&path)?;
        let version: i64 = conn.pragma_query_value(None, "user_version", |r| r.get(0)).ctx(&path)?;
        if objects > 0 && application_id != APPLICATION_ID {
            return Err(StoreError::NotMneme { path, application_id });
        }
        if objects == 0 && !create {
            return Err(StoreError::Missing { path });
        }
        if version > SCHEMA_VERSION {
            return Err(StoreError::TooNew { path, found: version, supported: SCHEMA_VERSION });
        }
        conn.pragma_update(None, "journal_mode", "WAL").ctx(&path)?;
        // WAL + NORMAL: a committed transaction survives a process crash; only an OS crash
        // or power loss can lose the last transactions (never corrupt the file).
        conn.pragma_update(None, "synchronous", "NORMAL").ctx(&path)?;
        conn.pragma_update(None, "foreign_keys", true).ctx(&path)?;
        // Freed pages are zeroed, so erased text (forget) and old index segments do not
        // linger in the file's free pages.
        conn.pragma_update(None, "secure_delete", true).ctx(&path)?;
        // 64 MiB of page cache (SQLite's default is 2 MiB): records, indexes and the FTS
        // segments being merged stay in memory during bulk ingest.
        conn.pragma_update(None, "cache_size", -65_536).ctx(&path)?;
        let mut store = store;
        store.migrate(SCHEMA_VERSION)?;
        store.refresh_rank_anchors()?;
        Ok(store)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn is_encrypted(&self) -> bool {
        self.encrypted
    }

    pub fn decay(&self) -> &DecayConfig {
        &self.decay
    }

    /// The schema version (each engine numbers its own: [`SCHEMA_VERSION`], [`PG_SCHEMA_VERSION`]).
    pub fn schema_version(&mut self) -> StoreResult<i64> {
        match &mut self.engine {
            Engine::Lite { conn, .. } => conn.pragma_query_value(None, "user_version", |r| r.get(0)).ctx(&self.path),
            Engine::Pg(pg) => pg.schema_version(),
        }
    }

    /// How many prepared statements the server holds for this store's PostgreSQL
    /// connection (`None` on SQLite), for tests that the statement cache stays bounded.
    #[doc(hidden)]
    pub fn server_prepared_statements(&mut self) -> StoreResult<Option<i64>> {
        match &mut self.engine {
            Engine::Lite { .. } => Ok(None),
            Engine::Pg(pg) => pg.prepared_statements().map(Some),
        }
    }

    /// Which engine this store runs on: `sqlite` or `postgres`.
    pub fn engine(&self) -> &'static str {
        match self.engine {
            Engine::Lite { .. } => "sqlite",
            Engine::Pg(_) => "postgres",
        }
    }

    /// The SQLite connection; the SQLite-only operations (scrub, migrations) refuse a
    /// PostgreSQL store.
    fn lite(&mut self, what: &str) -> StoreResult<&mut Connection> {
        match &mut self.engine {
            Engine::Lite { conn, .. } => Ok(conn),
            Engine::Pg(_) => Err(sql::not_on_postgres(what)),
        }
    }

    /// Runs `f` in one write transaction (`BEGIN IMMEDIATE`, so the write lock is taken up
    /// front and a concurrent writer waits up to [`BUSY_TIMEOUT`]). Commits when `f` returns
    /// `Ok`, rolls back otherwise: an operation is all or nothing.
    ///
    /// On PostgreSQL the transaction first takes the store's write lock (an advisory
    /// transaction lock), so writers are serialised as SQLite's are, across processes.
    pub fn write<T, E: From<StoreError>>(&mut self, f: impl FnOnce(&WriteTx<'_>) -> Result<T, E>) -> Result<T, E> {
        let Store { engine, path, decay, .. } = self;
        match engine {
            Engine::Lite { conn, .. } => {
                let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate).ctx(path)?;
                let exec = sql::LiteExec { conn: &tx, path };
                let wtx = WriteTx::new(&exec, path, decay);
                let value = f(&wtx)?;
                wtx.flush_context()?;
                drop(wtx);
                tx.commit().ctx(path)?;
                Ok(value)
            }
            Engine::Pg(pg) => {
                let exec = pg.begin(true)?;
                let wtx = WriteTx::new(&exec, path, decay);
                let value = f(&wtx)?;
                wtx.flush_context()?;
                drop(wtx);
                pg::commit(exec)?;
                Ok(value)
            }
        }
    }

    /// After an erasure (forget): rewrites the full-text indexes without the deleted rows'
    /// postings (FTS5 `optimize`; freed pages are zeroed by `secure_delete`), then moves
    /// the WAL into the database and truncates it, so erased text is gone from every file
    /// and not only from queries. Readers that hold an old snapshot can keep the WAL from
    /// being truncated: then it says so (`false`).
    ///
    /// On PostgreSQL: `VACUUM` of the tables that held the text, so the erased rows' old
    /// versions leave the heap and the indexes (their pages are reused; WAL segments and
    /// backups are the operator's, as they always are on a server).
    pub fn scrub(&mut self) -> StoreResult<bool> {
        if let Engine::Pg(pg) = &mut self.engine {
            pg.execute_raw("VACUUM records, records_fts, record_tags, record_vectors, audit, conversations, workspace_chunks")?;
            return Ok(true);
        }
        let path = self.path.clone();
        let conn = self.lite("scrubbing erased text")?;
        conn.execute_batch(
            "INSERT INTO records_fts (records_fts) VALUES ('optimize'); \
                 INSERT INTO workspace_chunks (workspace_chunks) VALUES ('optimize');",
        )
        .ctx(&path)?;
        let busy: i64 = conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| r.get(0)).ctx(&path)?;
        Ok(busy == 0)
    }

    /// Runs `f` in one read transaction: a consistent snapshot.
    pub fn read<T, E: From<StoreError>>(&mut self, f: impl FnOnce(&ReadTx<'_>) -> Result<T, E>) -> Result<T, E> {
        let Store { engine, path, decay, .. } = self;
        match engine {
            Engine::Lite { conn, .. } => {
                let tx = conn.transaction_with_behavior(TransactionBehavior::Deferred).ctx(path)?;
                let exec = sql::LiteExec { conn: &tx, path };
                let rtx = ReadTx::new(&exec, path, decay);
                let value = f(&rtx)?;
                tx.commit().ctx(path)?;
                Ok(value)
            }
            Engine::Pg(pg) => {
                let exec = pg.begin(false)?;
                let rtx = ReadTx::new(&exec, path, decay);
                let value = f(&rtx)?;
                pg::commit(exec)?;
                Ok(value)
            }
        }
    }

    /// Size of the database file and its WAL, in bytes.
    pub fn file_bytes(&self) -> u64 {
        let wal = PathBuf::from(format!("{}-wal", self.path.display()));
        [self.path.as_path(), wal.as_path()].iter().filter_map(|p| std::fs::metadata(p).ok()).map(|m| m.len()).sum()
    }

    /// Applies pending migrations up to `target`. Public for the migration tests, which
    /// build an old-version database and open it with a current build.
    #[doc(hidden)]
    pub fn migrate(&mut self, target: i64) -> StoreResult<()> {
        let path = self.path.clone();
        let conn = self.lite("SQLite migrations")?;
        for m in schema::MIGRATIONS.iter().filter(|m| m.version <= target) {
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate).ctx(&path)?;
            // Read the version under the write lock: a second process opening the same new
            // store at the same moment must not apply a migration twice.
            let current: i64 = tx.pragma_query_value(None, "user_version", |r| r.get(0)).ctx(&path)?;
            if current >= m.version {
                continue;
            }
            (m.apply)(&tx).ctx(&path)?;
            tx.execute(
                "INSERT INTO schema_migrations (version, applied_at, description) VALUES (?1, ?2, ?3)",
                rusqlite::params![m.version, jiff::Timestamp::now().as_millisecond(), m.description],
            )
            .ctx(&path)?;
            tx.pragma_update(None, "application_id", APPLICATION_ID).ctx(&path)?;
            tx.pragma_update(None, "user_version", m.version).ctx(&path)?;
            tx.commit().ctx(&path)?;
        }
        Ok(())
    }

    /// Opens a store at an older schema version, for migration tests only.
    #[doc(hidden)]
    pub fn create_at_version(path: &Path, version: i64, decay: DecayConfig) -> StoreResult<Store> {
        let mut open_files = OPEN_FILES.lock().unwrap_or_else(|p| p.into_inner());
        let conn = Connection::open(path).ctx(path)?;
        let open = OpenFileGuard::register(&mut open_files, file_identity(path)?);
        drop(open_files);
        let mut store = Store { engine: Engine::Lite { conn, _open: open }, path: path.to_path_buf(), decay, encrypted: false };
        store.migrate(version)?;
        Ok(store)
    }

    /// Prepares rows for [`WriteTx::insert_rows`] without the store (see [`RowMaker`]).
    pub fn row_maker(&self) -> RowMaker {
        RowMaker { decay: self.decay, path: self.path.clone(), postgres: matches!(self.engine, Engine::Pg(_)) }
    }

    /// Executes raw SQL, for tests that fabricate old or damaged data.
    #[doc(hidden)]
    pub fn execute_raw(&mut self, sql: &str) -> StoreResult<()> {
        match &mut self.engine {
            Engine::Lite { conn, .. } => conn.execute_batch(sql).ctx(&self.path),
            Engine::Pg(pg) => pg.execute_raw(sql),
        }
    }

    /// Recomputes every rank anchor when the decay settings differ from the ones the
    /// anchors were computed with (on either engine).
    pub(crate) fn refresh_rank_anchors(&mut self) -> StoreResult<()> {
        let fingerprint = serde_json::to_string(&self.decay.half_life_days).expect("plain numbers serialise");
        let stored = self.read(|tx| tx.meta("decay_half_lives"))?;
        if stored.as_deref() == Some(fingerprint.as_str()) {
            return Ok(());
        }
        self.write(|tx| {
            tx.recompute_rank_anchors()?;
            tx.set_meta("decay_half_lives", &fingerprint)
        })
    }
}

/// Looks at the file before SQLite opens it. Returns whether it exists (non-empty).
fn inspect_file(path: &Path, have_key: bool) -> StoreResult<bool> {
    let io = |source| StoreError::Io { path: path.to_path_buf(), source };
    let meta = match std::fs::metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(io(e)),
    };
    if meta.is_dir() {
        return Err(io(std::io::Error::other("is a directory, expected a database file")));
    }
    let len = meta.len();
    if len == 0 {
        return Ok(true);
    }
    let mut header = [0u8; 100];
    let mut file = File::open(path).map_err(io)?;
    let read = read_up_to(&mut file, &mut header).map_err(io)?;
    let plaintext = read >= 16 && &header[..16] == b"SQLite format 3\0";
    if plaintext && have_key {
        return Err(StoreError::NotEncrypted { path: path.to_path_buf() });
    }
    if plaintext {
        if read < 100 {
            return Err(StoreError::Truncated { path: path.to_path_buf(), expected: 100, actual: len });
        }
        let page_size = match u16::from_be_bytes([header[16], header[17]]) {
            1 => 65_536u64,
            n => u64::from(n),
        };
        let page_count = u64::from(u32::from_be_bytes([header[28], header[29], header[30], header[31]]));
        let change_counter = &header[24..28];
        let valid_for = &header[92..96];
        // The in-header page count is only authoritative when "version-valid-for" matches,
        // and a checkpoint interrupted between writing page 1 and extending the file leaves a
        // short file that the WAL still completes: only judge the file alone when no WAL exists.
        let wal = PathBuf::from(format!("{}-wal", path.display()));
        let wal_len = std::fs::metadata(&wal).map(|m| m.len()).unwrap_or(0);
        if change_counter == valid_for && wal_len == 0 && page_size * page_count > len {
            return Err(StoreError::Truncated { path: path.to_path_buf(), expected: page_size * page_count, actual: len });
        }
    } else if !have_key {
        return Err(StoreError::NotADatabaseOrEncrypted { path: path.to_path_buf() });
    }
    Ok(true)
}

fn read_up_to(file: &mut File, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        match file.read(&mut buf[filled..])? {
            0 => break,
            n => filled += n,
        }
    }
    Ok(filled)
}
