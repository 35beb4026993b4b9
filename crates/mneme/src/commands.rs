//! One function per command: turn arguments into service requests, call the service,
//! print the result.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context as _, Result, anyhow, bail};
use jiff::Timestamp;
use mneme_core::{
    CompetencePayload, CoreError, EventPayload, MemoryType, Payload, PlanEdge, PlanGraphPayload, PlanNode, RecordId, Scope,
    SemanticPayload, Sensitivity, SystemClock, ToolOutputPayload, WorkingPayload,
};
use mneme_service::{
    Access, Actor, ContestRequest, ErrorKind, IngestOptions, MemoryService, OutcomeKind, OutcomeRequest, RetrieveRequest, Revision,
    ServiceConfig, ServiceError,
};
use mneme_store::{SecretKey, StoreError, StoreOptions};

use crate::cli::{BenchCommand, Cli, Command, IngestArgs, IngestCommand, OutcomeArg, RecallArgs, RevisionArgs, WhoArgs};
use crate::render;

/// The database file inside the data directory.
pub const DB_FILE: &str = "mneme.db";

/// Where and how to open the store, resolved from flags, env and defaults.
pub struct Invocation {
    pub data_dir: PathBuf,
    pub config: ServiceConfig,
    pub key: Option<SecretKey>,
    pub json: bool,
}

impl Invocation {
    fn from_cli(cli: &Cli) -> Result<Invocation> {
        let data_dir = match &cli.data_dir {
            Some(d) => d.clone(),
            None => default_data_dir()?,
        };
        let config_path = cli.config.clone().unwrap_or_else(|| data_dir.join("config.toml"));
        if cli.config.is_some() && !config_path.exists() {
            bail!("configuration file {} does not exist", config_path.display());
        }
        let config = ServiceConfig::load(&config_path)?;
        Ok(Invocation { data_dir, config, key: encryption_key(cli.key_file.as_deref())?, json: cli.json })
    }

    fn open(&self, create: bool) -> Result<MemoryService> {
        let options = StoreOptions { path: self.data_dir.join(DB_FILE), key: self.key.clone(), create, decay: self.config.decay };
        Ok(MemoryService::open(options, self.config, Arc::new(SystemClock))?)
    }
}

pub fn run(cli: Cli) -> Result<()> {
    if let Command::Bench(bench) = &cli.command {
        return match bench {
            BenchCommand::Retrieval => crate::bench::retrieval(),
            BenchCommand::Store { records, queries, single } => crate::bench::store(records, *queries, *single, cli.json),
        };
    }
    let ctx = Invocation::from_cli(&cli)?;
    let access = Access::owner();
    match cli.command {
        Command::Init => {
            std::fs::create_dir_all(&ctx.data_dir).with_context(|| format!("cannot create {}", ctx.data_dir.display()))?;
            let service = ctx.open(true)?;
            render::init(&service.metrics()?, ctx.json)
        }
        Command::Demo => demo(&ctx, &access),
        Command::Ingest(cmd) => ingest(&ctx, cmd, &access),
        Command::Recall(args) => recall(&ctx, args, &access),
        Command::Show { id } => {
            let service = ctx.open(false)?;
            let record = service.get(&parse_id(&id)?, &access)?;
            render::record(&record, service.current_salience(&record), ctx.json)
        }
        Command::History { id } => {
            let service = ctx.open(false)?;
            render::history(&service.history(&parse_id(&id)?, &access)?, ctx.json)
        }
        Command::Supersede { id, change, who } => {
            let service = ctx.open(false)?;
            let id = parse_id(&id)?;
            let change = revision(&service, &[&id], change, &access)?;
            render::revised("superseded", &service.supersede(&id, change, actor(who), &access)?, ctx.json)
        }
        Command::Fork { id, change, who } => {
            let service = ctx.open(false)?;
            let id = parse_id(&id)?;
            let change = revision(&service, &[&id], change, &access)?;
            render::revised("forked", &service.fork(&id, change, actor(who), &access)?, ctx.json)
        }
        Command::Merge { ids, change, who } => {
            let service = ctx.open(false)?;
            let ids = ids.iter().map(|i| parse_id(i)).collect::<Result<Vec<_>>>()?;
            let refs: Vec<&RecordId> = ids.iter().collect();
            let change = revision(&service, &refs, change, &access)?;
            render::revised("merged", &service.merge(&ids, change, actor(who), &access)?, ctx.json)
        }
        Command::Retract { id, who } => {
            let service = ctx.open(false)?;
            let record = service.retract(&parse_id(&id)?, actor(who), &access)?;
            render::status_change(&record, ctx.json)
        }
        Command::Contest { id, by, claim, who } => {
            let service = ctx.open(false)?;
            let by = by.as_deref().map(parse_id).transpose()?;
            let record = service.contest(&parse_id(&id)?, ContestRequest { by, claim }, actor(who), &access)?;
            render::status_change(&record, ctx.json)
        }
        Command::Reinforce(a) => {
            let service = ctx.open(false)?;
            let who = Actor { actor: a.actor, rationale: a.rationale };
            render::salience(&service.reinforce(&parse_id(&a.id)?, a.amount, who, &access)?, ctx.json)
        }
        Command::Penalize(a) => {
            let service = ctx.open(false)?;
            let who = Actor { actor: a.actor, rationale: a.rationale };
            render::salience(&service.penalize(&parse_id(&a.id)?, a.amount, who, &access)?, ctx.json)
        }
        Command::Metrics => render::metrics(&ctx.open(false)?.metrics()?, ctx.json),
        Command::Decay { prune, threshold } => {
            let service = ctx.open(false)?;
            render::prune(&service.prune(threshold, !prune, "cli")?, ctx.json)
        }
        Command::StressWrite { count } => {
            let service = ctx.open(false)?;
            let mut out = std::io::stdout().lock();
            for i in 0..count {
                let event = EventPayload {
                    event_kind: "stress".into(),
                    reference: None,
                    sender: None,
                    text: format!("stress write {i}"),
                    event_time: None,
                };
                let record = service.ingest_event(event, IngestOptions::default())?;
                // Printed only after COMMIT returned: every printed id is acknowledged.
                writeln!(out, "{}", record.id)?;
                out.flush()?;
            }
            Ok(())
        }
        Command::Bench(_) => unreachable!("handled above"),
    }
}

/// Exit status by error class: 2 invalid input, 3 not found, 4 precondition, 5 busy,
/// 6 store or configuration problem, 1 anything else.
pub fn exit_code(err: &anyhow::Error) -> u8 {
    if let Some(e) = err.downcast_ref::<ServiceError>() {
        return match e.kind() {
            ErrorKind::InvalidArgument => 2,
            ErrorKind::NotFound => 3,
            ErrorKind::FailedPrecondition => 4,
            ErrorKind::Busy => 5,
            ErrorKind::Config | ErrorKind::Storage => 6,
        };
    }
    if err.downcast_ref::<CoreError>().is_some() || err.downcast_ref::<InputError>().is_some() {
        return 2;
    }
    if let Some(e) = err.downcast_ref::<StoreError>() {
        return if matches!(e, StoreError::Busy { .. }) { 5 } else { 6 };
    }
    1
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

fn input(msg: impl Into<String>) -> anyhow::Error {
    anyhow::Error::new(InputError(msg.into()))
}

/// Initialises a store in a fresh directory (never the user's own store), remembers a
/// few things, corrects one, and recalls.
fn demo(ctx: &Invocation, access: &Access) -> Result<()> {
    let dir = tempfile::Builder::new().prefix("mneme-demo-").tempdir().context("cannot create a demo directory")?.keep();
    let ctx = Invocation { data_dir: dir, config: ctx.config, key: ctx.key.clone(), json: ctx.json };
    let service = ctx.open(true)?;
    outln!("demo store: {} (your own store is not touched)", ctx.data_dir.join(DB_FILE).display());
    let say = |text: &str| {
        let event = EventPayload {
            event_kind: "message".into(),
            reference: None,
            sender: Some("howard".into()),
            text: text.into(),
            event_time: Some(service.now()),
        };
        service.ingest_event(event, IngestOptions { actor: Some("demo".into()), ..Default::default() })
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
    let old = service.ingest_observation(fact("Howard", "lives in", "Berlin"), options())?;
    service.ingest_observation(fact("staging deploy", "requires", "sg docker wrapper"), options())?;
    outln!("remembered 2 events and 2 facts");
    let who = Actor { actor: "demo".into(), rationale: "Howard said he moved to Hamburg".into() };
    let new = service.supersede(
        &old.id,
        Revision { payload: Some(Payload::Semantic(fact("Howard", "lives in", "Hamburg"))), ..Default::default() },
        who,
        access,
    )?;
    outln!("corrected: \"{}\" -> \"{}\" (the old fact is kept as a tombstone)", old.summary, new.summary);
    for query in ["where does Howard live", "docker wrapper for staging"] {
        outln!("\nrecall {query:?}:");
        let hits = service.retrieve(&RetrieveRequest { query: query.into(), limit: 3, ..Default::default() }, access)?;
        render::hits(&hits, true, false)?;
    }
    outln!("\nhistory of {}:", new.id);
    render::history(&service.history(&new.id, access)?, false)?;
    outln!("\nexplore it: mneme --data-dir {} recall Hamburg --explain", ctx.data_dir.display());
    Ok(())
}

fn ingest(ctx: &Invocation, cmd: IngestCommand, access: &Access) -> Result<()> {
    let service = ctx.open(false)?;
    let (payload, common) = match cmd {
        IngestCommand::Event { text, kind, sender, reference, at, common } => {
            let text = if text == "-" { read_stdin()? } else { text };
            let event_time = Some(match at {
                Some(at) => parse_time("--at", &at)?,
                None => service.now(),
            });
            (Payload::Event(EventPayload { event_kind: kind, reference, sender, text, event_time }), common)
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
            let outcome = service.ingest_outcome(request, ingest_options(common)?, access)?;
            return render::outcome(&outcome, ctx.json);
        }
    };
    let record = service.ingest(payload, ingest_options(common)?)?;
    render::ingested(&record, ctx.json)
}

fn recall(ctx: &Invocation, args: RecallArgs, access: &Access) -> Result<()> {
    let service = ctx.open(false)?;
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
    };
    let hits = service.retrieve(&request, access)?;
    render::hits(&hits, args.explain, ctx.json)
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

/// Builds the new content of a revision; fact shortcuts apply over the first record's payload.
fn revision(service: &MemoryService, ids: &[&RecordId], a: RevisionArgs, access: &Access) -> Result<Revision> {
    let mut payload: Option<Payload> = match &a.payload {
        Some(json) => Some(serde_json::from_str(json).map_err(|e| input(format!("--payload is not a valid payload: {e}")))?),
        None => None,
    };
    if a.subject.is_some() || a.predicate.is_some() || a.object.is_some() {
        if payload.is_some() {
            bail!(input("give either --payload or --subject/--predicate/--object, not both"));
        }
        let first = service.get(ids[0], access)?;
        let Some(Payload::Semantic(mut fact)) = first.payload else {
            bail!(input(format!("--subject/--predicate/--object apply to facts, but {} is {}", first.id, first.memory_type)));
        };
        if let Some(s) = a.subject {
            fact.subject = s;
        }
        if let Some(p) = a.predicate {
            fact.predicate = p;
        }
        if let Some(o) = a.object {
            fact.object = o;
        }
        payload = Some(Payload::Semantic(fact));
    }
    Ok(Revision {
        payload,
        summary: a.summary,
        tags: if a.tags.is_empty() { None } else { Some(a.tags) },
        sensitivity: a.sensitivity.as_deref().map(str::parse).transpose()?,
        confidence: a.confidence,
    })
}

fn actor(who: WhoArgs) -> Actor {
    Actor { actor: who.actor, rationale: who.rationale }
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
    Err(input(format!("{flag} {s:?} is not a time (use RFC 3339 like 2026-01-31T12:00:00Z, or YYYY-MM-DD)")))
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

/// The key from MNEME_ENCRYPTION_KEY, else from the key file. Never printed.
fn encryption_key(key_file: Option<&Path>) -> Result<Option<SecretKey>> {
    if let Some(value) = std::env::var_os("MNEME_ENCRYPTION_KEY") {
        let value = value.into_string().map_err(|_| input("MNEME_ENCRYPTION_KEY is not valid UTF-8"))?;
        return SecretKey::new(value).map(Some).ok_or_else(|| input("MNEME_ENCRYPTION_KEY is set but empty"));
    }
    let Some(path) = key_file else { return Ok(None) };
    let bytes = std::fs::read(path).with_context(|| format!("cannot read key file {}", path.display()))?;
    let text = String::from_utf8(bytes).map_err(|_| input(format!("key file {} is not valid UTF-8", path.display())))?;
    SecretKey::new(text).map(Some).ok_or_else(|| input(format!("key file {} is empty", path.display())))
}
