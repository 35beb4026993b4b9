//! `MnemeConfig`: every setting of mneme, engine and daemon, in one TOML document.
//!
//! Layers, each overriding the one before: built-in defaults → the TOML file → `MNEME_*`
//! environment variables → command-line flags. The result is validated once, and every
//! error names the key (`server.http_addr: invalid socket address ...`).
//!
//! Environment: the named variables in [`ENV_KEYS`], plus the generic
//! `MNEME_CFG__SECTION__KEY=value` for any key (`MNEME_CFG__CONSOLIDATION__INTERVAL=5m`).
//! Flags: `--set section.key=value`. A value is read as a TOML value when it parses as one
//! (`10`, `true`, `["a"]`), else as a string.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use mneme_core::{DecayConfig, Limits, RankWeights, Sensitivity};
pub use mneme_core::{Span, parse_duration};
pub use mneme_embed::{EmbeddingConfig, EmbeddingProvider};
use mneme_service::{AccessConfig, ServiceConfig};
use serde::{Deserialize, Serialize};
use sha2::Digest as _;

use mneme_agent::config::{ConsolidationConfig, HooksConfig, MaintenanceConfig};
use mneme_llm::{LlmConfig, LlmSettings, Route};

/// Named environment variables and the key each sets.
pub const ENV_KEYS: &[(&str, &str)] = &[
    ("MNEME_GRPC_ADDR", "server.grpc_addr"),
    ("MNEME_HTTP_ADDR", "server.http_addr"),
    ("MNEME_LOG_FORMAT", "server.log_format"),
    ("MNEME_LOG_LEVEL", "server.log_level"),
    ("MNEME_LLM_ENDPOINT", "consolidation.llm_endpoint"),
    ("MNEME_LLM_MODEL", "consolidation.llm_model"),
    ("MNEME_LLM_API_KEY", "consolidation.llm_api_key"),
    ("MNEME_EMBEDDING_PROVIDER", "embedding.provider"),
    ("MNEME_EMBEDDING_API_KEY", "embedding.api_key"),
    ("MNEME_MODEL_DIR", "embedding.model_dir"),
    ("MNEME_DATABASE_URL", "storage.database_url"),
    ("MNEME_DATABASE_CA_FILE", "storage.ca_file"),
    ("MNEME_DAEMON_URL", "client.daemon_url"),
    ("MNEME_TLS_CA_FILE", "client.tls_ca_file"),
];

/// The other `MNEME_*` variables mneme reads (paths and keys, not configuration keys).
pub const OTHER_ENV: &[&str] = &[
    "MNEME_HOME",
    "MNEME_CONFIG",
    "MNEME_API_KEY",
    "MNEME_ENCRYPTION_KEY",
    "MNEME_ENCRYPTION_KEY_FILE",
    "MNEME_WORKSPACE",
    "MNEME_MODEL_CACHE",
    "MNEME_DATABASE_PASSWORD",
    "MNEME_DATABASE_PASSWORD_FILE",
];

/// The `MNEME_*` variables in `env` that mneme does not read: most likely typos, which
/// would otherwise be ignored without a word. `MNEME_TEST*` (the test suites') are left out.
pub fn unknown_env(env: impl IntoIterator<Item = (String, String)>) -> Vec<String> {
    let mut unknown: Vec<String> = env
        .into_iter()
        .map(|(name, _)| name)
        .filter(|n| n.starts_with("MNEME_") && !n.starts_with("MNEME_CFG__") && !n.starts_with("MNEME_TEST"))
        .filter(|n| !ENV_KEYS.iter().any(|(k, _)| k == n) && !OTHER_ENV.contains(&n.as_str()))
        .collect();
    unknown.sort();
    unknown
}

/// Shown instead of a secret by `mneme config show`.
pub const REDACTED: &str = "<redacted>";

/// Every setting of mneme, engine and daemon, in one TOML document. Layers, each
/// overriding the one before: built-in defaults → the TOML file → `MNEME_*` environment
/// variables → `--set section.key=value` flags. The result is validated once, and every
/// error names the key (`server.http_addr: invalid socket address ...`).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MnemeConfig {
    pub decay: DecayConfig,
    pub retrieval: RankWeights,
    pub access: AccessConfig,
    pub limits: Limits,
    pub server: ServerConfig,
    /// API keys and what each may read and write. None configured: loopback-only, one
    /// local principal with full access.
    pub principals: Vec<PrincipalConfig>,
    pub hooks: HooksConfig,
    pub consolidation: ConsolidationConfig,
    pub maintenance: MaintenanceConfig,
    pub embedding: EmbeddingConfig,
    /// The shared LLM client's routes: model name → endpoint.
    pub llm: LlmConfig,
    /// The agent's file workspace (`mneme workspace`, `mneme hook session-start`).
    pub workspace: mneme_workspace::WorkspaceConfig,
    /// The reflection heartbeat (`mneme reflect`), its model routing included.
    pub reflection: mneme_reflect::config::ReflectionConfig,
    /// The inner life's jobs (`mneme inner run`).
    pub inner: mneme_reflect::inner::InnerConfig,
    /// The relay's feed, sense and analysis loop (`/feed`, `/sense`, `/agent/*`).
    pub relay: mneme_relay::RelayConfig,
    /// membrane's wire protocol (`membrane.v1.MembraneService`) on the gRPC port.
    pub membrane: MembraneConfig,
    /// Where the memory lives: the data directory's SQLite file, or PostgreSQL.
    pub storage: StorageConfig,
    /// How the CLI and `mneme mcp` reach a daemon: its URL and the TLS they use for it.
    pub client: ClientConfig,
}

/// `[client]`: the daemon the CLI (`status`, `recall`, `hook`) and the MCP stdio bridge
/// (`mneme mcp`) talk to, and the TLS they speak to it.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ClientConfig {
    /// The daemon's HTTP address as a URL (`https://mneme.internal:18791`;
    /// `MNEME_DAEMON_URL`). Unset: the daemon serving this data directory, found through
    /// its `daemon.json` (HTTPS when it serves TLS).
    pub daemon_url: Option<String>,
    /// PEM certificates of the authority that signed the daemon's certificate
    /// (`MNEME_TLS_CA_FILE`); unset: the system's authorities. The daemon's name (or IP
    /// address) in the URL must be one its certificate holds.
    pub tls_ca_file: Option<PathBuf>,
    /// A client certificate (PEM, leaf first) for a daemon that requires one
    /// (`[server] tls_client_ca_file`), with `tls_key_file`.
    pub tls_cert_file: Option<PathBuf>,
    /// The client certificate's private key (PEM).
    pub tls_key_file: Option<PathBuf>,
}

/// `[storage]`: the engine. SQLite (the default) needs nothing; PostgreSQL needs a URL.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct StorageConfig {
    /// The storage engine: SQLite in the data directory, or PostgreSQL at `database_url`.
    pub backend: Backend,
    /// `postgres://user@host:port/database` (`MNEME_DATABASE_URL`). The password comes
    /// from `MNEME_DATABASE_PASSWORD` or `MNEME_DATABASE_PASSWORD_FILE`, or the URL;
    /// `mneme config show` never prints it.
    pub database_url: Option<String>,
    /// How long connecting may take before the store is called unreachable.
    pub connect_timeout: Span,
    /// Every statement is cancelled after this long (PostgreSQL's `statement_timeout`).
    pub statement_timeout: Span,
    /// PEM certificates of a private authority that signed the server's certificate
    /// (`MNEME_DATABASE_CA_FILE`). TLS is on when the URL says `sslmode=require` (or
    /// `prefer`); the server's certificate and name are always verified.
    pub ca_file: Option<PathBuf>,
}

impl Default for StorageConfig {
    fn default() -> Self {
        StorageConfig {
            backend: Backend::Sqlite,
            database_url: None,
            connect_timeout: Span::secs(10),
            statement_timeout: Span::secs(30),
            ca_file: None,
        }
    }
}

/// The storage engine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Backend {
    #[default]
    Sqlite,
    Postgres,
}

/// A database URL without its password (`postgres://user:…@host` → `postgres://user@host`).
pub fn url_without_password(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else { return url.to_string() };
    let (authority, tail) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, ""),
    };
    match authority.rsplit_once('@') {
        Some((userinfo, host)) => {
            let user = userinfo.split_once(':').map_or(userinfo, |(u, _)| u);
            format!("{scheme}://{user}@{host}{tail}")
        }
        None => url.to_string(),
    }
}

/// `[membrane]`: serve membrane's `membrane.v1` protocol beside `mneme.v1`, so membrane's
/// clients and the OpenClaw plugin work unchanged.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MembraneConfig {
    /// Off by default.
    pub enabled: bool,
    /// The environment variable holding membraned's single shared API key (read at start;
    /// never logged). Unset or empty: no shared key.
    pub api_key_env: String,
    /// The principal that key maps to: the `[[principals]]` entry of this name (its
    /// sensitivity and scope policy), else a principal of this name with full access, as
    /// membraned's key has.
    pub principal: String,
    /// Largest `membrane.v1` message, in bytes: 10 MiB by default, as membraned takes
    /// (large tool outputs); `server.max_request_bytes` bounds mneme's own services.
    pub max_message_bytes: usize,
}

impl Default for MembraneConfig {
    fn default() -> Self {
        MembraneConfig {
            enabled: false,
            api_key_env: "MEMBRANE_API_KEY".into(),
            principal: "membrane".into(),
            max_message_bytes: 10 * 1024 * 1024,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    #[default]
    Text,
    Json,
}

/// `[server]`: the daemon's listeners, logging, limits and timeouts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ServerConfig {
    /// Address and port of the gRPC API (`mneme.v1`, and `membrane.v1` when `[membrane]` is
    /// on); `MNEME_GRPC_ADDR` sets it. Port 0 takes any free port. A non-loopback address
    /// needs `[[principals]]`.
    pub grpc_addr: SocketAddr,
    /// Address and port of the HTTP API, the console, `/mcp` and the relay routes;
    /// `MNEME_HTTP_ADDR` sets it. Port 0 takes any free port. A non-loopback address needs
    /// `[[principals]]`.
    pub http_addr: SocketAddr,
    /// Log lines as plain text for people, or as one JSON object per line for a collector.
    pub log_format: LogFormat,
    /// A tracing filter: `info`, `debug`, `mneme_server=debug,info`.
    pub log_level: String,
    /// Largest request body (HTTP) or message (gRPC), in bytes.
    pub max_request_bytes: usize,
    /// Requests per second each principal may make from each client address (token
    /// bucket refill rate; membraned also limits each client).
    pub rate_limit_per_second: f64,
    /// Burst size of the token bucket.
    pub rate_limit_burst: f64,
    /// How long shutdown waits for in-flight requests before closing anyway.
    pub shutdown_grace: Span,
    /// SQLite connections for reads besides the writer (0: reads share the writer).
    pub read_connections: usize,
    /// Open connections across both listeners; at the cap, new ones wait in the kernel's
    /// accept queue until one closes (logged).
    pub max_connections: usize,
    /// A new connection must send its first bytes, and an HTTP/1 connection each request's
    /// headers (kept-alive ones included), within this time, else it is closed.
    pub header_read_timeout: Span,
    /// A connection with no request in flight and no bytes moving for this long is closed
    /// (gRPC channels between calls, responses the client does not read).
    pub idle_timeout: Span,
    /// An HTTP request's whole body must arrive within this time (408 otherwise): a client
    /// that trickles a body cannot hold a connection open. Bodies are read before
    /// authentication is checked, so this bounds what an unauthenticated peer can hold.
    pub body_read_timeout: Span,
    /// Names (besides loopback names and addresses and the bound address) that HTTP
    /// requests may carry in `Host`; anything else is refused (DNS rebinding). `"*"`
    /// accepts any, for a daemon behind a proxy that checks it.
    pub allowed_hosts: Vec<String>,
    /// Addresses of the proxies in front of the daemon whose `X-Forwarded-For` names the
    /// client (its last entry, the one the proxy added): rate limits then apply to each
    /// client behind them. From any other peer the header is ignored.
    pub trusted_proxies: Vec<std::net::IpAddr>,
    /// Web origins (`https://app.example`) whose pages may call the HTTP API from a
    /// browser (CORS). Empty by default: only the daemon's own pages (the console).
    pub cors_origins: Vec<String>,
    /// PEM certificate chain (leaf first) for TLS on both listeners (HTTP, `/mcp`, gRPC
    /// and `membrane.v1`), with `tls_key_file`. Re-read on SIGHUP and when the files
    /// change, so a certificate can be rotated without a restart. A non-loopback address
    /// needs TLS, or `plaintext_behind_proxy`.
    pub tls_cert_file: Option<PathBuf>,
    /// The private key (PEM: PKCS#8, PKCS#1 or SEC1) of `tls_cert_file`.
    pub tls_key_file: Option<PathBuf>,
    /// PEM certificates of the authority that signs client certificates. Set: every
    /// connection must present a certificate it signed (mutual TLS), and
    /// `[[principals]] tls_client_subject` binds a certificate to a principal.
    pub tls_client_ca_file: Option<PathBuf>,
    /// How often the certificate files are checked for a change (`0s`: only on SIGHUP).
    pub tls_reload_poll: Span,
    /// The daemon sits behind a proxy that terminates TLS: a non-loopback address may then
    /// listen in plain text (logged as a warning at start). Off: refused.
    pub plaintext_behind_proxy: bool,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            grpc_addr: SocketAddr::from(([127, 0, 0, 1], 9090)),
            http_addr: SocketAddr::from(([127, 0, 0, 1], 18791)),
            log_format: LogFormat::Text,
            log_level: "info".into(),
            max_request_bytes: 1024 * 1024,
            rate_limit_per_second: 20_000.0,
            rate_limit_burst: 40_000.0,
            shutdown_grace: Span::secs(10),
            read_connections: 2,
            max_connections: 512,
            header_read_timeout: Span::secs(10),
            idle_timeout: Span::secs(60),
            body_read_timeout: Span::secs(30),
            allowed_hosts: Vec::new(),
            trusted_proxies: Vec::new(),
            cors_origins: Vec::new(),
            tls_cert_file: None,
            tls_key_file: None,
            tls_client_ca_file: None,
            tls_reload_poll: Span::secs(5),
            plaintext_behind_proxy: false,
        }
    }
}

/// One API key and its server-side policy. Exactly one of `key_sha256`, `key_env`,
/// `key_file` names the key; the key itself is never stored in the config.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PrincipalConfig {
    /// The principal's name, unique among `[[principals]]`: what it writes is attributed to
    /// it (an actor the client gives is prefixed with `name/`), and its errors name it.
    pub name: String,
    /// Hex SHA-256 of the key (`printf %s "$KEY" | sha256sum`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_sha256: Option<String>,
    /// Environment variable holding the key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_env: Option<String>,
    /// File holding the key (surrounding whitespace ignored).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_file: Option<PathBuf>,
    /// The most sensitive records it may read, whatever a request asks for. Default `medium`.
    #[serde(default = "medium")]
    pub read_max_sensitivity: Sensitivity,
    /// Scopes it may read besides global records; absent: all. `""` is the global scope.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_scopes: Option<Vec<String>>,
    /// The most sensitive records it may create or change. Default `medium`.
    #[serde(default = "medium")]
    pub write_max_sensitivity: Sensitivity,
    /// Scopes it may write; absent: all. Restricted writers write global records only if
    /// `""` is listed; their ingests default to the first listed scope.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub write_scopes: Option<Vec<String>>,
    /// Overrides `server.rate_limit_per_second` for this principal.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_limit_per_second: Option<f64>,
    /// A client certificate's subject that is this principal (needs
    /// `[server] tls_client_ca_file`): its common name (`agent-a`) or the whole subject as
    /// RFC 4514 writes it (`CN=agent-a,O=Acme`). With a key, both are required (a second
    /// factor); without one, the certificate alone authenticates.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls_client_subject: Option<String>,
}

impl MnemeConfig {
    /// The shared LLM client's settings.
    pub fn llm_settings(&self) -> LlmSettings {
        let c = &self.consolidation;
        LlmSettings {
            default: c.llm_endpoint.clone().map(|endpoint| Route { endpoint, api_key: c.llm_api_key.clone() }),
            model: c.llm_model.clone(),
            routes: self.llm.routes.clone(),
            timeout: c.llm_timeout.get(),
            backoff_base: c.llm_backoff.get(),
        }
    }
}

/// A configuration problem; the message names the key and, for the file layer, the file.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ConfigError(pub String);

fn err(key: &str, msg: impl std::fmt::Display) -> ConfigError {
    ConfigError(format!("{key}: {msg}"))
}

impl MnemeConfig {
    /// The layered configuration. `file`: the TOML file (missing is fine unless `required`);
    /// `env`: the process environment (or a test's); `sets`: `--set`-style `key=value` pairs
    /// (later wins).
    pub fn layered(
        file: Option<&Path>,
        required: bool,
        env: impl IntoIterator<Item = (String, String)>,
        sets: &[(String, String)],
    ) -> Result<Self, ConfigError> {
        let mut table = toml::Table::new();
        if let Some(path) = file {
            match std::fs::read_to_string(path) {
                Ok(text) => {
                    // Parse the file alone first: its errors carry line numbers.
                    Self::from_toml(&text, &path.display().to_string())?;
                    table = toml::from_str(&text).map_err(|e| ConfigError(format!("{}: {e}", path.display())))?;
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound && !required => {}
                Err(e) => return Err(ConfigError(format!("{}: {e}", path.display()))),
            }
        }
        for (name, value) in env {
            if let Some((_, key)) = ENV_KEYS.iter().find(|(n, _)| *n == name) {
                set_path(&mut table, key, &value).map_err(|e| ConfigError(format!("{name}: {e}")))?;
            } else if let Some(rest) = name.strip_prefix("MNEME_CFG__") {
                let key = rest.split("__").map(str::to_ascii_lowercase).collect::<Vec<_>>().join(".");
                set_path(&mut table, &key, &value).map_err(|e| ConfigError(format!("{name}: {e}")))?;
            }
        }
        for (key, value) in sets {
            set_path(&mut table, key, value).map_err(|e| ConfigError(format!("--set {key}: {e}")))?;
        }
        let config: MnemeConfig =
            serde_path_to_error::deserialize(toml::Value::Table(table)).map_err(|e| ConfigError(format!("{}: {}", e.path(), e.inner())))?;
        config.validate()?;
        Ok(config)
    }

    /// Parses and validates one TOML document; `source` names it in errors.
    pub fn from_toml(text: &str, source: &str) -> Result<Self, ConfigError> {
        let de = toml::de::Deserializer::parse(text).map_err(|e| ConfigError(format!("{source}: {e}")))?;
        let config: MnemeConfig =
            serde_path_to_error::deserialize(de).map_err(|e| ConfigError(format!("{source}: {}: {}", e.path(), e.inner())))?;
        config.validate().map_err(|e| ConfigError(format!("{source}: {}", e.0)))?;
        Ok(config)
    }

    /// The engine's part.
    pub fn service(&self) -> ServiceConfig {
        ServiceConfig { decay: self.decay, retrieval: self.retrieval, access: self.access, limits: self.limits }
    }

    pub fn validate(&self) -> Result<(), ConfigError> {
        self.service().validate().map_err(|e| ConfigError(e.to_string().trim_start_matches("configuration error: ").to_string()))?;
        tracing_subscriber::EnvFilter::try_new(&self.server.log_level).map_err(|e| err("server.log_level", e))?;
        if self.storage.backend == Backend::Postgres && self.storage.database_url.as_deref().is_none_or(|u| u.trim().is_empty()) {
            return Err(err("storage.database_url", "backend = \"postgres\" needs a URL: set it here or in MNEME_DATABASE_URL"));
        }
        if self.storage.connect_timeout.is_zero() || self.storage.statement_timeout.is_zero() {
            return Err(err("storage", "connect_timeout and statement_timeout must be longer than zero"));
        }
        if self.server.read_connections > 64 {
            return Err(err("server.read_connections", "must be at most 64"));
        }
        if !(1..=1_000_000).contains(&self.server.max_connections) {
            return Err(err("server.max_connections", "must be between 1 and 1000000"));
        }
        if self.server.max_request_bytes < 1024 {
            return Err(err("server.max_request_bytes", "must be at least 1024"));
        }
        if self.membrane.max_message_bytes < 1024 {
            return Err(err("membrane.max_message_bytes", "must be at least 1024"));
        }
        for origin in &self.server.cors_origins {
            let valid = origin.split_once("://").is_some_and(|(scheme, rest)| {
                matches!(scheme, "http" | "https")
                    && !rest.trim_end_matches('/').is_empty()
                    && !rest.trim_end_matches('/').contains(['/', '?', '#', '@'])
            });
            if !valid {
                return Err(err("server.cors_origins", format!("{origin:?} is not a web origin like https://app.example:8443")));
            }
        }
        let server = &self.server;
        if server.tls_cert_file.is_some() != server.tls_key_file.is_some() {
            return Err(err("server.tls_cert_file", "set both tls_cert_file and tls_key_file, or neither"));
        }
        if server.tls_client_ca_file.is_some() && server.tls_cert_file.is_none() {
            return Err(err("server.tls_client_ca_file", "client certificates need TLS: set tls_cert_file and tls_key_file too"));
        }
        let client = &self.client;
        if let Some(url) = &client.daemon_url
            && !(url.starts_with("http://") || url.starts_with("https://"))
        {
            return Err(err("client.daemon_url", format!("{url:?} must start with http:// or https://")));
        }
        if client.tls_cert_file.is_some() != client.tls_key_file.is_some() {
            return Err(err("client.tls_cert_file", "set both tls_cert_file and tls_key_file, or neither"));
        }
        positive("server.rate_limit_per_second", self.server.rate_limit_per_second)?;
        positive("server.rate_limit_burst", self.server.rate_limit_burst)?;
        for (key, value) in [
            ("server.header_read_timeout", self.server.header_read_timeout),
            ("server.idle_timeout", self.server.idle_timeout),
            ("server.body_read_timeout", self.server.body_read_timeout),
            ("consolidation.interval", self.consolidation.interval),
            ("consolidation.llm_timeout", self.consolidation.llm_timeout),
            ("consolidation.llm_backoff", self.consolidation.llm_backoff),
            ("embedding.timeout", self.embedding.timeout),
        ] {
            if value.is_zero() {
                return Err(err(key, "must be longer than zero"));
            }
        }
        if self.consolidation.batch_size == 0 {
            return Err(err("consolidation.batch_size", "must be at least 1"));
        }
        unit("consolidation.min_confidence", self.consolidation.min_confidence)?;
        let e = &self.embedding;
        if e.batch_size == 0 || e.batch_size > 1024 {
            return Err(err("embedding.batch_size", "must be between 1 and 1024"));
        }
        if e.provider == EmbeddingProvider::Openai {
            match &e.endpoint {
                None => return Err(err("embedding.endpoint", "must be set when embedding.provider is \"openai\"")),
                Some(url) if !(url.starts_with("http://") || url.starts_with("https://")) => {
                    return Err(err("embedding.endpoint", format!("{url:?} must start with http:// or https://")));
                }
                Some(_) => {}
            }
            if e.dimension == 0 {
                return Err(err("embedding.dimension", "must be at least 1"));
            }
        }
        self.workspace.settings(PathBuf::from(".")).map_err(|e| ConfigError(e.to_string()))?;
        if e.index.rerank == 0 {
            return Err(err("embedding.index.rerank", "must be at least 1"));
        }
        if let Some(url) = &self.consolidation.llm_endpoint
            && !(url.starts_with("http://") || url.starts_with("https://"))
        {
            return Err(err("consolidation.llm_endpoint", format!("{url:?} must start with http:// or https://")));
        }
        for (model, route) in &self.llm.routes {
            if !(route.endpoint.starts_with("http://") || route.endpoint.starts_with("https://")) {
                return Err(err(
                    &format!("llm.routes.{model:?}.endpoint"),
                    format!("{:?} must start with http:// or https://", route.endpoint),
                ));
            }
        }
        self.reflection.check().map_err(|(key, msg)| err(&key, msg))?;
        self.relay.validate().map_err(|(key, msg)| err(&key, msg))?;
        let ss = &self.hooks.session_start;
        if ss.max_records == 0 || ss.max_records > self.limits.max_limit {
            return Err(err(
                "hooks.session_start.max_records",
                format!("must be between 1 and limits.max_limit ({})", self.limits.max_limit),
            ));
        }
        if ss.budget_chars < 1000 {
            return Err(err("hooks.session_start.budget_chars", format!("{} (must be at least 1000)", ss.budget_chars)));
        }
        unit("hooks.session_start.min_salience", ss.min_salience)?;
        unit("hooks.session_start.reinforce_on_success", ss.reinforce_on_success)?;
        let c = &self.hooks.competence;
        if c.min_occurrences == 0 {
            return Err(err("hooks.competence.min_occurrences", "must be at least 1"));
        }
        unit("hooks.competence.reinforce_amount", c.reinforce_amount)?;
        unit("hooks.competence.penalty_amount", c.penalty_amount)?;
        let mut names = std::collections::HashSet::new();
        for (i, p) in self.principals.iter().enumerate() {
            let key = format!("principals[{i}]");
            if p.name.trim().is_empty() {
                return Err(err(&format!("{key}.name"), "must not be empty"));
            }
            if !names.insert(p.name.as_str()) {
                return Err(err(&format!("{key}.name"), format!("{:?} is used twice", p.name)));
            }
            let sources = [p.key_sha256.is_some(), p.key_env.is_some(), p.key_file.is_some()].iter().filter(|b| **b).count();
            if sources > 1 || (sources == 0 && p.tls_client_subject.is_none()) {
                return Err(err(
                    &key,
                    format!("principal {:?} needs exactly one of key_sha256, key_env, key_file (or a tls_client_subject alone)", p.name),
                ));
            }
            if let Some(subject) = &p.tls_client_subject {
                if subject.trim().is_empty() {
                    return Err(err(&format!("{key}.tls_client_subject"), "must not be empty"));
                }
                if self.server.tls_client_ca_file.is_none() {
                    return Err(err(
                        &format!("{key}.tls_client_subject"),
                        "needs [server] tls_client_ca_file (the authority that signs client certificates)",
                    ));
                }
            }
            if let Some(h) = &p.key_sha256
                && (h.len() != 64 || !h.chars().all(|c| c.is_ascii_hexdigit()))
            {
                return Err(err(&format!("{key}.key_sha256"), "must be 64 hex digits (the SHA-256 of the key)"));
            }
            for scopes in [&p.read_scopes, &p.write_scopes].into_iter().flatten() {
                for s in scopes {
                    mneme_core::Scope::parse(s).map_err(|e| err(&format!("{key} scopes"), e))?;
                }
            }
            if let Some(r) = p.rate_limit_per_second {
                positive(&format!("{key}.rate_limit_per_second"), r)?;
            }
        }
        Ok(())
    }

    /// The configuration as TOML with every secret replaced by [`REDACTED`].
    pub fn redacted_toml(&self) -> String {
        let mut shown = self.clone();
        if shown.consolidation.llm_api_key.is_some() {
            shown.consolidation.llm_api_key = Some(REDACTED.into());
        }
        if shown.embedding.api_key.is_some() {
            shown.embedding.api_key = Some(REDACTED.into());
        }
        for route in shown.llm.routes.values_mut() {
            if route.api_key.is_some() {
                route.api_key = Some(REDACTED.into());
            }
        }
        for p in &mut shown.principals {
            if p.key_sha256.is_some() {
                p.key_sha256 = Some(REDACTED.into());
            }
        }
        if let Some(url) = &shown.storage.database_url {
            shown.storage.database_url = Some(url_without_password(url));
        }
        toml::to_string_pretty(&shown).unwrap_or_else(|e| format!("# cannot render configuration: {e}\n"))
    }
}

fn positive(key: &str, v: f64) -> Result<(), ConfigError> {
    if v.is_finite() && v > 0.0 { Ok(()) } else { Err(err(key, format!("{v} must be a positive number"))) }
}

fn unit(key: &str, v: f64) -> Result<(), ConfigError> {
    if (0.0..=1.0).contains(&v) { Ok(()) } else { Err(err(key, format!("{v} must be between 0 and 1"))) }
}

/// Sets `a.b.c` in `table` to `raw`, read as a TOML value when it is one, else a string.
fn set_path(table: &mut toml::Table, key: &str, raw: &str) -> Result<(), String> {
    let parts: Vec<&str> = key.split('.').collect();
    if parts.iter().any(|p| p.is_empty()) {
        return Err(format!("{key:?} is not a key like section.name"));
    }
    let value = toml::from_str::<toml::Table>(&format!("v = {raw}"))
        .ok()
        .and_then(|mut t| t.remove("v"))
        .unwrap_or_else(|| toml::Value::String(raw.to_string()));
    let mut cur = table;
    for part in &parts[..parts.len() - 1] {
        let entry = cur.entry(part.to_string()).or_insert_with(|| toml::Value::Table(toml::Table::new()));
        cur = match entry {
            toml::Value::Table(t) => t,
            _ => return Err(format!("{part} is not a table")),
        };
    }
    cur.insert(parts[parts.len() - 1].to_string(), value);
    Ok(())
}

impl MnemeConfig {
    /// The configured keys' digests, in `principals` order, resolved now; or why the
    /// daemon would refuse to start: a key that does not resolve (an unset `key_env`, an
    /// unreadable `key_file`, a short key), or no principals while `loopback_only` is
    /// false (listening beyond loopback needs keys). `mneme serve` and `mneme config
    /// check` both ask this.
    /// A principal authenticated by its client certificate alone has no key (`None`).
    pub fn resolved_keys(&self, loopback_only: bool, env: &dyn Fn(&str) -> Option<String>) -> Result<Vec<Option<[u8; 32]>>, String> {
        if self.principals.is_empty() && !loopback_only {
            return Err("refusing to listen on a non-loopback address without API keys: configure [[principals]] \
                        (see README, \"Security\")"
                .into());
        }
        self.principals.iter().map(|p| if p.has_key() { p.key_digest(env).map(Some) } else { Ok(None) }).collect()
    }

    /// Why the daemon would refuse its addresses: a non-loopback listener in plain text,
    /// where every key and memory would cross the network readable, unless a proxy in
    /// front terminates TLS (`plaintext_behind_proxy`). `mneme serve` and `mneme config
    /// check` both ask this.
    pub fn plaintext_rule(&self) -> Result<(), String> {
        let s = &self.server;
        if s.tls_cert_file.is_some() || s.plaintext_behind_proxy {
            return Ok(());
        }
        match [("gRPC", s.grpc_addr), ("HTTP", s.http_addr)].into_iter().find(|(_, a)| !a.ip().is_loopback()) {
            None => Ok(()),
            Some((name, addr)) => Err(format!(
                "refusing to serve {name} on the non-loopback address {addr} in plain text (API keys and memories would cross the \
                 network readable): set [server] tls_cert_file and tls_key_file, or plaintext_behind_proxy = true when a \
                 proxy in front of the daemon terminates TLS (see README, \"Running mneme on a network\")"
            )),
        }
    }

    /// Whether both listeners are on loopback addresses.
    pub fn loopback_only(&self) -> bool {
        self.server.grpc_addr.ip().is_loopback() && self.server.http_addr.ip().is_loopback()
    }
}

impl PrincipalConfig {
    /// Whether a key is configured (else a client certificate alone authenticates it).
    pub fn has_key(&self) -> bool {
        self.key_sha256.is_some() || self.key_env.is_some() || self.key_file.is_some()
    }

    /// The SHA-256 digest of this principal's key, resolved now: from `key_sha256`, the
    /// variable `key_env` names (looked up through `env`: this crate never reads the
    /// process environment) or `key_file`. The key itself is not kept.
    pub fn key_digest(&self, env: &dyn Fn(&str) -> Option<String>) -> Result<[u8; 32], String> {
        let p = self;
        let raw = if let Some(hex) = &p.key_sha256 {
            let mut out = [0u8; 32];
            for (i, chunk) in hex.as_bytes().chunks(2).enumerate() {
                let s = std::str::from_utf8(chunk).map_err(|_| format!("principal {:?}: key_sha256 is not hex", p.name))?;
                out[i] = u8::from_str_radix(s, 16).map_err(|_| format!("principal {:?}: key_sha256 is not hex", p.name))?;
            }
            return Ok(out);
        } else if let Some(var) = &p.key_env {
            env(var).ok_or_else(|| format!("principal {:?}: environment variable {var} (key_env) is not set", p.name))?
        } else if let Some(path) = &p.key_file {
            std::fs::read_to_string(path).map_err(|e| format!("principal {:?}: key_file {}: {e}", p.name, path.display()))?
        } else {
            return Err(format!("principal {:?} has no key", p.name));
        };
        let key = raw.trim();
        if key.len() < 16 {
            return Err(format!("principal {:?}: the key must be at least 16 characters", p.name));
        }
        Ok(sha2::Sha256::digest(key.as_bytes()).into())
    }
}

/// Hex SHA-256 of a key, for `key_sha256` in the config (`mneme key hash`).
pub fn hash_key(key: &str) -> String {
    sha2::Sha256::digest(key.trim().as_bytes()).iter().map(|b| format!("{b:02x}")).collect()
}

fn medium() -> Sensitivity {
    Sensitivity::Medium
}
