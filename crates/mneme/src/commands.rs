//! One function per command: turn arguments into requests, call the door ([`Door`]: the
//! same `Ops` and checks a request to the daemon meets, as the local owner), print the
//! result.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context as _, Result, anyhow, bail};
use jiff::Timestamp;
use mneme_core::validate::{check_amount, check_unit};
use mneme_core::{
    CompetencePayload, CoreError, EventPayload, MemoryType, Payload, PlanEdge, PlanGraphPayload, PlanNode, RecordId, Scope,
    SemanticPayload, Sensitivity, SystemClock, ToolOutputPayload, WorkingPayload,
};
use mneme_service::{
    ContestRequest, ErrorKind, IngestOptions, MemoryService, Ops, OutcomeKind, OutcomeRequest, Owner, Principal, RetrieveRequest, Revision,
    ServiceError,
};
use mneme_store::{SecretKey, StoreError, StoreOptions};

use mneme_server::MnemeConfig;

use crate::cli::{
    Cli, Command, ConfigCommand, HookArgs, IngestArgs, IngestCommand, KeyCommand, ModelCommand, OutcomeArg, RecallArgs, RevisionArgs,
};
use crate::render;

/// The database file inside the data directory.
pub const DB_FILE: &str = "mneme.db";

/// Where and how to open the store, resolved from flags, env and defaults.
pub struct Invocation {
    pub data_dir: PathBuf,
    /// The layered configuration: defaults → file → `MNEME_*` env → flags.
    pub config: MnemeConfig,
    pub key: Option<SecretKey>,
    pub json: bool,
    /// As given on the command line (handed down to daemon children).
    pub config_path: Option<PathBuf>,
    pub key_file: Option<PathBuf>,
    pub user_sets: Vec<(String, String)>,
}

impl Invocation {
    fn from_cli(cli: &Cli) -> Result<Invocation> {
        let data_dir = match &cli.data_dir {
            Some(d) => std::path::absolute(d).unwrap_or_else(|_| d.clone()),
            None => default_data_dir()?,
        };
        let config_path = cli.config.clone().unwrap_or_else(|| data_dir.join("config.toml"));
        let user_sets = cli
            .sets
            .iter()
            .map(|s| {
                s.split_once('=')
                    .map(|(k, v)| (k.trim().to_string(), v.to_string()))
                    .ok_or_else(|| input(format!("--set {s:?}: expected KEY=VALUE")))
            })
            .collect::<Result<Vec<_>>>()?;
        let mut sets = user_sets.clone();
        if let Command::Serve(a) | Command::Up(a) | Command::Supervise(a) = &cli.command {
            sets.extend(crate::daemon::serve_sets(a));
        }
        let mut config = MnemeConfig::layered(Some(&config_path), cli.config.is_some(), std::env::vars(), &sets)
            .map_err(|e| anyhow::Error::new(ServiceError::Config(e.0)))?;
        // The local model: configured, this data directory's own copy, or the machine-wide
        // cache, resolved once here so `serve`, `reindex` and `model` agree.
        config.embedding.model_dir = Some(mneme_embed::resolve_model_dir(&config.embedding, &data_dir, &|name| std::env::var_os(name)));
        Ok(Invocation {
            data_dir,
            config,
            key: encryption_key(cli.key_file.as_deref())?,
            json: cli.json,
            config_path: cli.config.as_ref().map(|c| std::path::absolute(c).unwrap_or_else(|_| c.clone())),
            key_file: cli.key_file.as_ref().map(|k| std::path::absolute(k).unwrap_or_else(|_| k.clone())),
            user_sets,
        })
    }

    /// The local embedding model's directory (resolved in [`Invocation::from_cli`]).
    pub fn model_dir(&self) -> PathBuf {
        mneme_embed::model_dir(&self.config.embedding, &self.data_dir)
    }

    pub fn store_path(&self) -> std::path::PathBuf {
        self.data_dir.join(DB_FILE)
    }

    pub fn store_options(&self, create: bool) -> StoreOptions {
        StoreOptions { path: self.data_dir.join(DB_FILE), key: self.key.clone(), create, decay: self.config.decay }
    }

    /// The PostgreSQL store, when `[storage] backend = "postgres"`: its URL, the password
    /// from `MNEME_DATABASE_PASSWORD` or `MNEME_DATABASE_PASSWORD_FILE`, and the timeouts.
    pub fn postgres(&self, create: bool) -> Result<Option<mneme_store::PgOptions>> {
        if self.config.storage.backend != mneme_server::config::Backend::Postgres {
            return Ok(None);
        }
        let url = self.config.storage.database_url.clone().unwrap_or_default();
        Ok(Some(postgres_options(url, &self.config.storage, create)?))
    }

    /// The store itself, for what works below the door: export and import of the whole
    /// store, and opening the door.
    pub fn open(&self, create: bool) -> Result<MemoryService> {
        self.open_with_clock(create, Arc::new(SystemClock))
    }

    fn open_with_clock(&self, create: bool, clock: Arc<dyn mneme_core::Clock>) -> Result<MemoryService> {
        match self.postgres(create)? {
            Some(pg) => Ok(MemoryService::open_postgres(pg, self.store_path(), self.config.service(), clock)?),
            None => Ok(MemoryService::open(self.store_options(create), self.config.service(), clock)?),
        }
    }

    /// The door over the existing store, its clock fixed at `now` when one is given (a
    /// command's `--now`: everything it does happens as of then).
    pub fn door_at(&self, now: Option<Timestamp>) -> Result<Door> {
        let clock: Arc<dyn mneme_core::Clock> = match now {
            Some(at) => Arc::new(mneme_core::FixedClock::new(at)),
            None => Arc::new(SystemClock),
        };
        Ok(Door::new(self.open_with_clock(false, clock)?))
    }

    /// The door over the store, as the local owner.
    pub fn door(&self, create: bool) -> Result<Door> {
        Ok(Door::new(self.open(create)?))
    }

    /// The door over the store with the configured embedding model attached, when there
    /// is one (else lexical-only, and the reason).
    pub fn door_semantic(&self) -> Result<(Door, Option<String>)> {
        let service = self.open(false)?;
        let lexical_only = match mneme_embed::choose(&self.config.embedding, &self.data_dir).map_err(|e| anyhow::anyhow!(e))? {
            mneme_embed::Choice::Model(model) => {
                service.enable_embeddings(model, self.config.embedding.index)?;
                None
            }
            mneme_embed::Choice::LexicalOnly(why) => Some(why),
        };
        Ok((Door::new(service), lexical_only))
    }
}

/// The CLI's way in: the door the daemon's requests go through (`Ops`), with the local
/// owner's principal (`cli`, the default actor of every command), so a command and its
/// HTTP route run the same code and the same checks.
pub struct Door {
    pub ops: Ops,
    pub me: Principal,
}

impl Door {
    fn new(service: MemoryService) -> Door {
        Door { ops: Ops::new(Arc::new(service), false), me: Principal::owner("cli") }
    }

    /// The owner's handle (scheduler, file index, reflection, the inbox).
    pub fn owner(&self) -> Result<Owner<'_>> {
        Ok(self.ops.owner(&self.me)?)
    }
}

/// `mneme serve` could not start (address in use, store refused, ...).
#[derive(Debug)]
pub struct ServeError(pub String);

impl std::fmt::Display for ServeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ServeError {}

/// Runs a parsed command; `action` is its subcommand path (`module activate`), for the
/// command log.
pub fn run(cli: Cli, action: String) -> Result<()> {
    match without_store(&cli) {
        Some(done) => done,
        None => with_store(cli, action),
    }
}

/// The commands answered before any store or layered configuration is read: the Claude
/// Code workspace hooks (which never fail their caller, not even on a broken
/// configuration), `config check` and `key hash`. `None`: the command needs the store.
fn without_store(cli: &Cli) -> Option<Result<()>> {
    let claude;
    let workspace_hook = match &cli.command {
        Command::ClaudeHook(args) => {
            claude = HookArgs { name: args.name.clone(), context_only: false, local: false, usage: args.usage, user: args.user.clone() };
            Some(&claude)
        }
        // The old spelling, kept for one release.
        Command::Hook(args) if crate::workspace::is_workspace_hook(&args.name) => Some(args),
        _ => None,
    };
    if let Some(args) = workspace_hook {
        // A hook is a process per agent event: its one write's WAL is left for the next
        // checkpoint rather than checkpointed and deleted as the process ends.
        mneme_store::keep_wal_on_close();
        return Some(match Invocation::from_cli(cli) {
            Ok(ctx) => crate::workspace::hook(&ctx, args),
            Err(e) => crate::workspace::hook_failed(args, &e),
        });
    }
    match &cli.command {
        Command::Bench { args } => Some(bench(cli, args)),
        Command::Config(ConfigCommand::Check { file }) => Some(config_check(file, cli.json)),
        Command::Key(KeyCommand::Hash) => Some(key_hash()),
        _ => None,
    }
}

/// `mneme bench ARGS`: runs `mneme-bench` from this binary's directory with the global
/// options given to `mneme` (data dir, config, `--set`, `--json`) and ARGS, and exits
/// with its status.
fn bench(cli: &Cli, args: &[String]) -> Result<()> {
    let exe = std::env::current_exe().context("cannot find this executable")?;
    let bench = exe.with_file_name(format!("mneme-bench{}", std::env::consts::EXE_SUFFIX));
    if !bench.exists() {
        return Err(anyhow::Error::new(ServiceError::Precondition(format!(
            "mneme bench runs the benchmarks binary {}, which is not there; build it with `cargo build --release -p mneme-bench`",
            bench.display()
        ))));
    }
    let mut command = std::process::Command::new(&bench);
    if let Some(d) = &cli.data_dir {
        command.arg("--data-dir").arg(d);
    }
    if let Some(c) = &cli.config {
        command.arg("--config").arg(c);
    }
    for s in &cli.sets {
        command.arg("--set").arg(s);
    }
    if cli.json {
        command.arg("--json");
    }
    command.args(args);
    let status = command.status().with_context(|| format!("cannot run {}", bench.display()))?;
    if !status.success() {
        std::process::exit(status.code().unwrap_or(1));
    }
    Ok(())
}

/// `mneme config check FILE`: what `serve` would refuse at start, without starting.
fn config_check(file: &std::path::Path, json: bool) -> Result<()> {
    let text = std::fs::read_to_string(file).with_context(|| format!("cannot read {}", file.display()))?;
    let config = MnemeConfig::from_toml(&text, &file.display().to_string()).map_err(|e| anyhow::Error::new(ServiceError::Config(e.0)))?;
    config.validate().map_err(|e| anyhow::Error::new(ServiceError::Config(e.0)))?;
    // Keys that do not resolve (an unset key_env, an unreadable key_file, a short key), or
    // a non-loopback address without keys.
    config
        .resolved_keys(config.loopback_only(), &|name| std::env::var(name).ok())
        .map_err(|e| anyhow::Error::new(ServiceError::Config(e)))?;
    // A public address in plain text, and certificate files that do not load.
    config.plaintext_rule().map_err(|e| anyhow::Error::new(ServiceError::Config(e)))?;
    mneme_server::tls::ServerTls::from_config(&config.server).map_err(|e| anyhow::Error::new(ServiceError::Config(e)))?;
    if json {
        outln!("{}", serde_json::json!({ "ok": true, "file": file }));
    } else {
        outln!("{}: ok", file.display());
    }
    Ok(())
}

/// `mneme key hash`: the key on stdin → its `key_sha256`.
fn key_hash() -> Result<()> {
    let key = read_stdin()?;
    if key.trim().len() < 16 {
        return Err(input("the key must be at least 16 characters"));
    }
    outln!("{}", mneme_server::config::hash_key(&key));
    Ok(())
}

/// Every other command: the layered configuration, then the command (most open the store).
fn with_store(cli: Cli, action: String) -> Result<()> {
    let ctx = Invocation::from_cli(&cli)?;
    // Every command is recorded in the workspace's command log (sinain §2.7) when the
    // workspace exists: long-running ones when they start, the rest with their outcome.
    let long_running = matches!(cli.command, Command::Serve(_) | Command::Up(_) | Command::Supervise(_) | Command::Mcp { .. });
    let workspace = crate::workspace::settings(&ctx, None).ok().filter(|s| s.dir.join(mneme_workspace::paths::MEMORY_DIR).is_dir());
    let log = |detail: serde_json::Value| {
        if let Some(s) = &workspace {
            let entry = mneme_workspace::journal::CommandLogEntry::new(jiff::Timestamp::now(), action.clone(), "cli", Some(detail));
            if let Err(e) = mneme_workspace::journal::log_command(s, &entry) {
                eprintln!("warning: the command log was not written: {e}");
            }
        }
    };
    if long_running {
        log(serde_json::json!({ "started": true }));
        return dispatch(ctx, cli.command);
    }
    let started = std::time::Instant::now();
    let result = dispatch(ctx, cli.command);
    log(serde_json::json!({
        "ok": result.is_ok(),
        "exit": result.as_ref().err().map_or(0, exit_code),
        "ms": started.elapsed().as_millis() as u64,
    }));
    result
}

/// The subcommand path of a parsed command line (`module activate`).
pub fn action_name(matches: &clap::ArgMatches) -> String {
    let mut names = Vec::new();
    let mut at = matches;
    while let Some((name, sub)) = at.subcommand() {
        names.push(name.to_string());
        at = sub;
    }
    names.join(" ")
}

fn dispatch(ctx: Invocation, command: Command) -> Result<()> {
    match command {
        Command::Serve(_) => crate::daemon::serve(&ctx),
        Command::Up(args) => crate::supervise::up(&ctx, &args),
        Command::Supervise(args) => crate::supervise::supervise(&ctx, &args),
        Command::Down { grace } => crate::supervise::down(&ctx, &grace),
        Command::Status => crate::daemon::status(&ctx),
        Command::Hook(args) => crate::daemon::hook(&ctx, &args),
        Command::ClaudeHook(_) => unreachable!("answered by without_store"),
        Command::Config(ConfigCommand::Show) => {
            for name in mneme_server::config::unknown_env(std::env::vars()) {
                eprintln!("warning: {name} is not a variable mneme reads (a typo?); it was ignored");
            }
            if ctx.json {
                let shown: toml::Table = toml::from_str(&ctx.config.redacted_toml())?;
                outln!("{}", serde_json::to_string_pretty(&shown)?);
            } else {
                outln!("{}", ctx.config.redacted_toml().trim_end());
            }
            Ok(())
        }
        Command::Config(ConfigCommand::Check { .. }) | Command::Key(_) | Command::Bench { .. } => unreachable!("answered by without_store"),
        Command::Model(ModelCommand::Install { from, force }) => crate::model::install(&ctx.model_dir(), from.as_deref(), force, ctx.json),
        Command::Model(ModelCommand::Status) => crate::model::status(&ctx.model_dir(), ctx.json),
        Command::Init => {
            std::fs::create_dir_all(&ctx.data_dir).with_context(|| format!("cannot create {}", ctx.data_dir.display()))?;
            let door = ctx.door(true)?;
            render::init(&door.ops.metrics(&door.me)?, ctx.json)
        }
        Command::Demo => demo(&ctx),
        Command::Export { output, force, postgres } => crate::dump::export(&ctx, output.as_deref(), force, &postgres),
        Command::Import { input, postgres } => crate::dump::import(&ctx, &input, &postgres),
        Command::Reindex { force, batch } => reindex(&ctx, force, batch),
        Command::Workspace(cmd) => crate::workspace::command(&ctx, cmd),
        Command::Sync(cmd) => crate::agent::sync(&ctx, cmd),
        Command::Schedule(cmd) => crate::agent::schedule(&ctx, cmd),
        Command::Reflect(cmd) => crate::agent::reflect(&ctx, cmd),
        Command::Inner(cmd) => crate::agent::inner(&ctx, cmd),
        Command::Module(cmd) => crate::agent::module(&ctx, cmd),
        Command::Membraned { .. } => Err(input(
            "run it as `mneme membraned -addr ADDR -db PATH` (first on the command line; mneme's own options go in MNEME_* variables)",
        )),
        Command::Search(args) => crate::agent::search(&ctx, args),
        Command::Mcp { local, user, tools } => crate::daemon::mcp(&ctx, local, user, &tools),
        Command::Ingest(cmd) => ingest(&ctx, cmd),
        Command::Recall(args) => recall(&ctx, args),
        // Every argument is parsed and checked before the store is opened: a refused command
        // must not even open (and so possibly migrate) the store.
        Command::Show { id } => {
            let id = parse_id(&id)?;
            let door = ctx.door(false)?;
            let (record, salience) = door.ops.get(&door.me, &id)?;
            render::record(&record, salience, ctx.json)
        }
        Command::History { id } => {
            let id = parse_id(&id)?;
            let door = ctx.door(false)?;
            render::history(&door.ops.history(&door.me, &id)?, ctx.json)
        }
        Command::Supersede { id, change, who } => {
            let (id, change) = (parse_id(&id)?, RevisionInput::parse(change)?);
            let door = ctx.door(false)?;
            let change = change.resolve(&door, &id)?;
            render::revised("superseded", &door.ops.supersede(&door.me, &id, change, who.actor, who.rationale)?, ctx.json)
        }
        Command::Fork { id, change, who } => {
            let (id, change) = (parse_id(&id)?, RevisionInput::parse(change)?);
            let door = ctx.door(false)?;
            let change = change.resolve(&door, &id)?;
            render::revised("forked", &door.ops.fork(&door.me, &id, change, who.actor, who.rationale)?, ctx.json)
        }
        Command::Merge { ids, change, who } => {
            let ids = ids.iter().map(|i| parse_id(i)).collect::<Result<Vec<_>>>()?;
            let change = RevisionInput::parse(change)?;
            let door = ctx.door(false)?;
            let change = change.resolve(&door, &ids[0])?;
            render::revised("merged", &door.ops.merge(&door.me, &ids, change, who.actor, who.rationale)?, ctx.json)
        }
        Command::Retract { id, who } => {
            let id = parse_id(&id)?;
            let door = ctx.door(false)?;
            render::status_change(&door.ops.retract(&door.me, &id, who.actor, who.rationale)?, ctx.json)
        }
        Command::Forget { ids, query, subject, user, reason, yes, dry_run, actor, limit } => {
            let ids = ids.iter().map(|i| parse_id(i)).collect::<Result<Vec<_>>>()?;
            let door = ctx.door(false)?;
            let mut request = mneme_service::ForgetRequest { ids, query, subject, user, dry_run: true, reason, actor, limit };
            // A query, a subject or a user is shown first; ids are exact.
            let ask = !yes && (request.query.is_some() || request.subject.is_some() || request.user.is_some());
            if dry_run || ask {
                let plan = door.ops.forget(&door.me, request.clone())?;
                if dry_run || plan.records.is_empty() {
                    return render::forget(&plan, ctx.json);
                }
                render::forget(&plan, false)?;
                if !confirm(&format!("erase these {} records for good?", plan.records.len()))? {
                    anyhow::bail!(ServiceError::Precondition(
                        "nothing was forgotten (not confirmed; pass --yes to skip the question)".into()
                    ));
                }
            }
            request.dry_run = false;
            if request.reason.trim().is_empty() {
                request.reason = "forgotten on request".into();
            }
            // Read before anything is erased: a bad setting must not fail a done erasure.
            let workspace = crate::workspace::settings(&ctx, None)?;
            let mut report = door.ops.forget(&door.me, request)?;
            mneme_agent::forget_in_files(&mut report, &workspace);
            render::forget(&report, ctx.json)
        }
        Command::Contest { id, by, claim, who } => {
            let (id, by) = (parse_id(&id)?, by.as_deref().map(parse_id).transpose()?);
            let door = ctx.door(false)?;
            let record = door.ops.contest(&door.me, &id, ContestRequest { by, claim }, who.actor, who.rationale)?;
            render::status_change(&record, ctx.json)
        }
        Command::Reinforce(a) => {
            let id = parse_id(&a.id)?;
            a.amount.map(check_amount).transpose()?;
            let door = ctx.door(false)?;
            render::salience(&door.ops.adjust(&door.me, &id, true, a.amount, a.actor, a.rationale)?, ctx.json)
        }
        Command::Penalize(a) => {
            let id = parse_id(&a.id)?;
            a.amount.map(check_amount).transpose()?;
            let door = ctx.door(false)?;
            render::salience(&door.ops.adjust(&door.me, &id, false, a.amount, a.actor, a.rationale)?, ctx.json)
        }
        Command::Metrics => {
            let door = ctx.door(false)?;
            render::metrics(&door.ops.metrics(&door.me)?, ctx.json)
        }
        Command::Decay { prune, yes, threshold } => {
            threshold.map(|t| check_unit("threshold", t)).transpose()?;
            let door = ctx.door(false)?;
            if prune && !yes {
                let plan = door.ops.prune(&door.me, threshold, true)?;
                if plan.pruned.is_empty() {
                    return render::prune(&plan, ctx.json);
                }
                render::prune(&plan, false)?;
                if !confirm(&format!("drop the payloads of these {} records?", plan.pruned.len()))? {
                    anyhow::bail!(ServiceError::Precondition("nothing was pruned (not confirmed; pass --yes to skip the question)".into()));
                }
            }
            render::prune(&door.ops.prune(&door.me, threshold, !prune)?, ctx.json)
        }
        Command::StressWrite { count } => {
            let door = ctx.door(false)?;
            let mut out = std::io::stdout().lock();
            for i in 0..count {
                let event = EventPayload {
                    event_kind: "stress".into(),
                    reference: None,
                    sender: None,
                    text: format!("stress write {i}"),
                    event_time: None,
                };
                let record = door.ops.ingest(&door.me, Payload::Event(event), IngestOptions::default())?;
                // Printed only after COMMIT returned: every printed id is acknowledged.
                writeln!(out, "{}", record.id)?;
                out.flush()?;
            }
            Ok(())
        }
    }
}

/// Exit status by error class, from the one table (`ErrorKind::mapping`): every error type
/// classifies itself with `kind()`. 1 is left for what no error type classifies (an I/O
/// error of the terminal, say).
pub fn exit_code(err: &anyhow::Error) -> u8 {
    error_kind(err).map_or(1, ErrorKind::exit_code)
}

/// The class of a command's failure, whichever layer raised it.
pub fn error_kind(err: &anyhow::Error) -> Option<ErrorKind> {
    if let Some(e) = err.downcast_ref::<ServiceError>() {
        return Some(e.kind());
    }
    if let Some(e) = err.downcast_ref::<CoreError>() {
        return Some(e.kind());
    }
    if let Some(e) = err.downcast_ref::<StoreError>() {
        return Some(e.kind());
    }
    if let Some(e) = err.downcast_ref::<mneme_workspace::WorkspaceError>() {
        return Some(e.kind());
    }
    if let Some(e) = err.downcast_ref::<mneme_reflect::ReflectError>() {
        return Some(e.kind());
    }
    if let Some(e) = err.downcast_ref::<mneme_agent::ops::AgentError>() {
        return Some(e.kind());
    }
    if let Some(e) = err.downcast_ref::<mneme_server::StartError>() {
        return Some(e.kind());
    }
    if let Some(e) = err.downcast_ref::<crate::client::RemoteError>() {
        return ErrorKind::from_code(&e.code);
    }
    if err.downcast_ref::<InputError>().is_some() {
        return Some(ErrorKind::InvalidArgument);
    }
    if err.downcast_ref::<crate::daemon::NotRunning>().is_some() {
        return Some(ErrorKind::NotFound);
    }
    // The daemon could not start: its store, key, configuration or addresses were refused.
    if err.downcast_ref::<ServeError>().is_some() {
        return Some(ErrorKind::Config);
    }
    None
}

/// Bad command-line input that clap could not catch.
#[derive(Debug)]
pub struct InputError(pub String);

impl std::fmt::Display for InputError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for InputError {}

pub fn input_error(msg: impl Into<String>) -> anyhow::Error {
    input(msg)
}

/// `text` as one POSIX shell word, for commands quoted back in messages.
fn shell_quote(text: &str) -> String {
    if !text.is_empty() && text.chars().all(|c| c.is_ascii_alphanumeric() || "-_./:@".contains(c)) {
        text.to_string()
    } else {
        format!("'{}'", text.replace('\'', "'\\''"))
    }
}

fn input(msg: impl Into<String>) -> anyhow::Error {
    anyhow::Error::new(InputError(msg.into()))
}

/// Initialises a store in a fresh directory (never the user's own store), remembers a
/// few things, corrects one, and recalls.
fn demo(ctx: &Invocation) -> Result<()> {
    let dir = tempfile::Builder::new().prefix("mneme-demo-").tempdir().context("cannot create a demo directory")?.keep();
    let ctx = Invocation {
        data_dir: dir,
        config: ctx.config.clone(),
        key: ctx.key.clone(),
        json: ctx.json,
        config_path: None,
        key_file: None,
        user_sets: Vec::new(),
    };
    let door = ctx.door(true)?;
    let (ops, me) = (&door.ops, &door.me);
    outln!("demo store: {} (your own store is not touched)", ctx.data_dir.join(DB_FILE).display());
    let say = |text: &str| {
        let event = EventPayload {
            event_kind: "message".into(),
            reference: None,
            sender: Some("howard".into()),
            text: text.into(),
            event_time: Some(ops.now()),
        };
        ops.ingest(me, Payload::Event(event), IngestOptions { actor: Some("demo".into()), ..Default::default() })
    };
    say("I moved from Berlin to Hamburg last month")?;
    say("Remember that the staging deploy needs the sg docker wrapper")?;
    let fact = |s: &str, p: &str, o: &str| SemanticPayload {
        subject: s.into(),
        predicate: p.into(),
        object: o.into(),
        valid_from: None,
        valid_to: None,
        evidence: vec![],
    };
    let options = || IngestOptions { actor: Some("demo".into()), ..Default::default() };
    let old = ops.ingest(me, Payload::Semantic(fact("Howard", "lives in", "Berlin")), options())?;
    ops.ingest(me, Payload::Semantic(fact("staging deploy", "requires", "sg docker wrapper")), options())?;
    outln!("remembered 2 events and 2 facts");
    let new = ops.supersede(
        me,
        &old.id,
        Revision { payload: Some(Payload::Semantic(fact("Howard", "lives in", "Hamburg"))), ..Default::default() },
        "demo".into(),
        "Howard said he moved to Hamburg".into(),
    )?;
    outln!("corrected: \"{}\" -> \"{}\" (the old fact is kept as a tombstone)", old.summary, new.summary);
    for query in ["where does Howard live", "docker wrapper for staging"] {
        outln!("\nrecall {query:?}:");
        let hits = ops.retrieve(me, &RetrieveRequest { query: query.into(), limit: 3, ..Default::default() })?;
        render::hits(&hits, Some(&ctx.config.retrieval), false)?;
    }
    outln!("\nhistory of {}:", new.id);
    render::history(&ops.history(me, &new.id)?, false)?;
    outln!("\nexplore it: mneme --data-dir {} recall Hamburg --explain", ctx.data_dir.display());
    Ok(())
}

fn ingest(ctx: &Invocation, cmd: IngestCommand) -> Result<()> {
    let (payload, common) = match cmd {
        IngestCommand::Event { text, kind, sender, reference, at, common } => {
            let text = if text == "-" { read_stdin()? } else { text };
            let event_time = Some(match at {
                Some(at) => parse_time("--at", &at)?,
                None => Timestamp::now(),
            });
            (Payload::Event(EventPayload { event_kind: kind, reference, sender, text, event_time }), common)
        }
        IngestCommand::Unknown(words) => {
            let kinds = "event, tool, observation, outcome, working, competence, plan";
            return Err(input(match &words[..] {
                // A lone argument is most likely the text itself.
                [text] => {
                    format!("\"{text}\" is not a kind of memory ({kinds}); to store text: mneme ingest event --text {}", shell_quote(text))
                }
                _ => format!("unknown kind of memory \"{}\": one of {kinds}", words.first().map(String::as_str).unwrap_or_default()),
            }));
        }
        IngestCommand::Tool { tool, args, result, error, duration_ms, common } => {
            let args = match args {
                Some(a) => serde_json::from_str(&a).map_err(|e| input(format!("--args is not valid JSON: {e}")))?,
                None => serde_json::Value::Null,
            };
            let result = result.map(|r| serde_json::from_str(&r).unwrap_or(serde_json::Value::String(r)));
            (Payload::ToolOutput(ToolOutputPayload { tool, args, result, error, duration_ms }), common)
        }
        IngestCommand::Observation { subject, predicate, object, valid_from, valid_to, evidence, common } => {
            let valid_from = valid_from.map(|t| parse_time("--valid-from", &t)).transpose()?;
            let valid_to = valid_to.map(|t| parse_time("--valid-to", &t)).transpose()?;
            (Payload::Semantic(SemanticPayload { subject, predicate, object, valid_from, valid_to, evidence }), common)
        }
        IngestCommand::Working { thread, state, next_actions, open_questions, summary_text, common } => {
            (Payload::Working(WorkingPayload { thread_id: thread, state, next_actions, open_questions, summary: summary_text }), common)
        }
        IngestCommand::Competence { skill, triggers, steps, common } => {
            (Payload::Competence(CompetencePayload { skill, triggers, steps, performance: Default::default() }), common)
        }
        IngestCommand::Plan { intent, nodes, edges, common } => {
            let nodes = nodes
                .iter()
                .map(|n| match n.split_once('=') {
                    Some((id, label)) if !id.trim().is_empty() => {
                        Ok(PlanNode { id: id.trim().into(), label: label.trim().into(), status: None })
                    }
                    _ => Err(input(format!("--node {n:?} is not ID=LABEL"))),
                })
                .collect::<Result<Vec<_>>>()?;
            let edges = edges
                .iter()
                .map(|e| match e.split_once("->") {
                    Some((from, to)) if !from.trim().is_empty() && !to.trim().is_empty() => {
                        Ok(PlanEdge { from: from.trim().into(), to: to.trim().into(), kind: None })
                    }
                    _ => Err(input(format!("--edge {e:?} is not FROM->TO"))),
                })
                .collect::<Result<Vec<_>>>()?;
            (Payload::PlanGraph(PlanGraphPayload { intent, nodes, edges }), common)
        }
        IngestCommand::Outcome { target, result, duration_ms, failure_mode, note, amount, common } => {
            let request = OutcomeRequest {
                target: parse_id(&target)?,
                outcome: match result {
                    OutcomeArg::Success => OutcomeKind::Success,
                    OutcomeArg::Failure => OutcomeKind::Failure,
                },
                duration_ms,
                failure_mode,
                note,
                amount,
            };
            amount.map(check_amount).transpose()?;
            let options = ingest_options(common)?;
            let door = ctx.door(false)?;
            let outcome = door.ops.ingest_outcome(&door.me, request, options)?;
            return render::outcome(&outcome, ctx.json);
        }
    };
    let options = ingest_options(common)?;
    let door = ctx.door(false)?;
    let record = door.ops.ingest(&door.me, payload, options)?;
    render::ingested(&record, ctx.json)
}

fn recall(ctx: &Invocation, args: RecallArgs) -> Result<()> {
    let request = RetrieveRequest {
        query: args.query,
        types: args.types.iter().map(|t| t.parse::<MemoryType>()).collect::<Result<_, _>>()?,
        min_salience: args.min_salience,
        max_sensitivity: args.sensitivity.as_deref().map(str::parse::<Sensitivity>).transpose()?,
        scopes: if args.scopes.is_empty() { None } else { Some(args.scopes.iter().map(|s| Scope::parse(s)).collect::<Result<_, _>>()?) },
        tags: args.tags,
        since: args.since.as_deref().map(|t| parse_time("--since", t)).transpose()?,
        until: args.until.as_deref().map(|t| parse_time("--until", t)).transpose()?,
        limit: args.limit,
        include_tombstones: args.include_tombstones,
        own_scopes: false,
    };
    if !args.local
        && let Some(hits) = crate::daemon::remote_recall(ctx, &request)?
    {
        return render::hits(&hits, args.explain.then_some(&ctx.config.retrieval), ctx.json);
    }
    let (door, lexical_only) = ctx.door_semantic()?;
    if let Some(why) = lexical_only
        && args.explain
    {
        eprintln!("lexical-only retrieval: {why}");
    }
    let hits = door.ops.retrieve(&door.me, &request)?;
    render::hits(&hits, args.explain.then_some(&ctx.config.retrieval), ctx.json)
}

fn reindex(ctx: &Invocation, force: bool, batch: usize) -> Result<()> {
    if !(1..=1024).contains(&batch) {
        return Err(input(format!("--batch {batch}: must be between 1 and 1024")));
    }
    // A running daemon holds the vector index in memory: vectors written by a second
    // process would reach its index only at its next start, so it does the work itself.
    if let Some(d) = crate::daemon::running_daemon(ctx) {
        if force {
            return Err(anyhow::Error::new(ServiceError::Precondition(format!(
                "a daemon (pid {}) is running and holds the vector index in memory; stop it (`mneme down`) before `reindex --force`, then start it again",
                d.pid
            ))));
        }
        return crate::daemon::wait_for_embeddings(ctx, &d);
    }
    let (door, lexical_only) = ctx.door_semantic()?;
    if let Some(why) = lexical_only {
        return Err(anyhow::Error::new(ServiceError::Precondition(format!("nothing to reindex with: {why}"))));
    }
    let show = !ctx.json && std::io::IsTerminal::is_terminal(&std::io::stderr());
    let done = door.ops.embed_pending(&door.me, batch, force, &mut |p| {
        let rate = p.done as f64 / p.elapsed.as_secs_f64().max(1e-9);
        let eta = (p.total.saturating_sub(p.done)) as f64 / rate.max(1e-9);
        let line = format!("embedded {}/{} ({rate:.0}/s, {eta:.0} s left)", p.done, p.total);
        if show {
            eprint!("\r{line}   ")
        } else if !ctx.json {
            eprintln!("{line}")
        }
    })?;
    if show {
        eprintln!();
    }
    // The workspace's indexed chunks too (search by meaning over the agent's files).
    let chunks = door.owner()?.embed_file_chunks(false, None)?;
    let status = door.ops.embedding_status(&door.me)?;
    if ctx.json {
        return render::print_json(&serde_json::json!({ "embedded": done, "workspace_chunks_embedded": chunks, "status": status }));
    }
    if let Some(s) = status {
        outln!("embedded {done} records with {}; {} of {} live records have vectors", s.model, s.embedded, s.embedded + s.pending);
    }
    if chunks > 0 {
        outln!("embedded {chunks} chunks of the workspace's files");
    }
    Ok(())
}

fn ingest_options(a: IngestArgs) -> Result<IngestOptions> {
    Ok(IngestOptions {
        summary: a.summary,
        sensitivity: a.sensitivity.as_deref().map(str::parse).transpose()?,
        scope: a.scope.as_deref().map(Scope::parse).transpose()?,
        tags: a.tags,
        confidence: a.confidence,
        salience: a.salience,
        pinned: a.pinned,
        actor: a.actor,
        rationale: None,
    })
}

/// The new content of a revision, parsed and checked before the store is opened.
struct RevisionInput {
    payload: Option<Payload>,
    subject: Option<String>,
    predicate: Option<String>,
    object: Option<String>,
    summary: Option<String>,
    tags: Option<Vec<String>>,
    sensitivity: Option<Sensitivity>,
    confidence: Option<f64>,
}

impl RevisionInput {
    fn parse(a: RevisionArgs) -> Result<Self> {
        let payload: Option<Payload> = match &a.payload {
            Some(json) => Some(serde_json::from_str(json).map_err(|e| input(format!("--payload is not a valid payload: {e}")))?),
            None => None,
        };
        let shortcuts = a.subject.is_some() || a.predicate.is_some() || a.object.is_some();
        if shortcuts && payload.is_some() {
            bail!(input("give either --payload or --subject/--predicate/--object, not both"));
        }
        if let Some(c) = a.confidence {
            check_unit("confidence", c)?;
        }
        Ok(RevisionInput {
            payload,
            subject: a.subject,
            predicate: a.predicate,
            object: a.object,
            summary: a.summary,
            tags: if a.tags.is_empty() { None } else { Some(a.tags) },
            sensitivity: a.sensitivity.as_deref().map(str::parse).transpose()?,
            confidence: a.confidence,
        })
    }

    /// Applies fact shortcuts over the payload of `first` (the record being revised).
    fn resolve(self, door: &Door, first: &RecordId) -> Result<Revision> {
        let mut payload = self.payload;
        if self.subject.is_some() || self.predicate.is_some() || self.object.is_some() {
            let (record, _) = door.ops.get(&door.me, first)?;
            let Some(Payload::Semantic(mut fact)) = record.payload else {
                bail!(input(format!("--subject/--predicate/--object apply to facts, but {} is {}", record.id, record.memory_type)));
            };
            fact.subject = self.subject.unwrap_or(fact.subject);
            fact.predicate = self.predicate.unwrap_or(fact.predicate);
            fact.object = self.object.unwrap_or(fact.object);
            payload = Some(Payload::Semantic(fact));
        }
        Ok(Revision { payload, summary: self.summary, tags: self.tags, sensitivity: self.sensitivity, confidence: self.confidence })
    }
}

/// Asks on the terminal; without one (a script), the answer is no.
fn confirm(question: &str) -> Result<bool> {
    use std::io::{BufRead as _, IsTerminal as _, Write as _};
    if !std::io::stdin().is_terminal() {
        eprintln!("{question} (not asked: stdin is not a terminal; pass --yes)");
        return Ok(false);
    }
    eprint!("{question} [y/N] ");
    std::io::stderr().flush()?;
    let mut answer = String::new();
    std::io::stdin().lock().read_line(&mut answer)?;
    Ok(matches!(answer.trim(), "y" | "Y" | "yes"))
}

fn parse_id(s: &str) -> Result<RecordId> {
    Ok(RecordId::parse(s)?)
}

/// RFC 3339 with an offset, or a civil date / date-time taken as UTC.
pub fn parse_time(flag: &str, s: &str) -> Result<Timestamp> {
    if let Ok(t) = s.parse::<Timestamp>() {
        return Ok(t);
    }
    if let Ok(dt) = s.parse::<jiff::civil::DateTime>() {
        return Ok(dt.to_zoned(jiff::tz::TimeZone::UTC)?.timestamp());
    }
    if let Ok(d) = s.parse::<jiff::civil::Date>() {
        return Ok(d.to_zoned(jiff::tz::TimeZone::UTC)?.timestamp());
    }
    // Relative: "now", "today", "yesterday" (UTC midnights), or an age such as "7d", "36h",
    // "90m" (that long before now).
    let now = Timestamp::now();
    let midnight = |days: i64| -> Result<Timestamp> {
        let date = now.to_zoned(jiff::tz::TimeZone::UTC).date() - jiff::Span::new().days(days);
        Ok(date.to_zoned(jiff::tz::TimeZone::UTC)?.timestamp())
    };
    match s.trim().to_lowercase().as_str() {
        "now" => return Ok(now),
        "today" => return midnight(0),
        "yesterday" => return midnight(1),
        _ => {}
    }
    if let Ok(age) = mneme_core::parse_duration(s)
        && let Ok(span) = jiff::SignedDuration::try_from(age)
    {
        return Ok(now - span);
    }
    Err(input(format!(
        "{flag} {s:?} is not a time (use RFC 3339 like 2026-01-31T12:00:00Z, YYYY-MM-DD, an age like 7d or 36h, today or yesterday)"
    )))
}

fn read_stdin() -> Result<String> {
    let mut bytes = Vec::new();
    std::io::stdin().read_to_end(&mut bytes).context("cannot read stdin")?;
    String::from_utf8(bytes)
        .map_err(|e| input(format!("stdin is not valid UTF-8 (invalid byte at offset {})", e.utf8_error().valid_up_to())))
}

fn default_data_dir() -> Result<PathBuf> {
    let home = std::env::var_os("HOME").ok_or_else(|| anyhow!("neither --data-dir, MNEME_HOME nor HOME is set"))?;
    Ok(PathBuf::from(home).join(".local/share/mneme"))
}

/// PostgreSQL options for `url` with the password from `MNEME_DATABASE_PASSWORD`, else
/// `MNEME_DATABASE_PASSWORD_FILE` (else the URL's own). Never printed.
pub fn postgres_options(url: String, storage: &mneme_server::config::StorageConfig, create: bool) -> Result<mneme_store::PgOptions> {
    let password = match (std::env::var_os("MNEME_DATABASE_PASSWORD"), std::env::var_os("MNEME_DATABASE_PASSWORD_FILE")) {
        (Some(value), _) => {
            let value = value.into_string().map_err(|_| input("MNEME_DATABASE_PASSWORD is not valid UTF-8"))?;
            Some(SecretKey::new(value).map_err(|why| input(format!("MNEME_DATABASE_PASSWORD {why}")))?)
        }
        (None, Some(file)) => {
            let path = PathBuf::from(file);
            let text = std::fs::read_to_string(&path).with_context(|| format!("cannot read the password file {}", path.display()))?;
            Some(SecretKey::new(text).map_err(|why| input(format!("password file {} {why}", path.display())))?)
        }
        (None, None) => None,
    };
    Ok(mneme_store::PgOptions {
        password,
        connect_timeout: storage.connect_timeout.get(),
        statement_timeout: storage.statement_timeout.get(),
        create,
        ca_file: storage.ca_file.clone(),
        ..mneme_store::PgOptions::new(url)
    })
}

/// The key from MNEME_ENCRYPTION_KEY, else from the key file. Never printed.
fn encryption_key(key_file: Option<&Path>) -> Result<Option<SecretKey>> {
    if let Some(value) = std::env::var_os("MNEME_ENCRYPTION_KEY") {
        let value = value.into_string().map_err(|_| input("MNEME_ENCRYPTION_KEY is not valid UTF-8"))?;
        return SecretKey::new(value).map(Some).map_err(|why| input(format!("MNEME_ENCRYPTION_KEY {why}")));
    }
    let Some(path) = key_file else { return Ok(None) };
    let bytes = std::fs::read(path).with_context(|| format!("cannot read key file {}", path.display()))?;
    let text = String::from_utf8(bytes).map_err(|_| input(format!("key file {} is not valid UTF-8", path.display())))?;
    SecretKey::new(text).map(Some).map_err(|why| input(format!("key file {} {why}", path.display())))
}
