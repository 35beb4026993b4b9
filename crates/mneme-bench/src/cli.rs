//! The benchmark binary's grammar (clap derive): the global flags `mneme` takes (so a
//! harness command such as `mneme-bench --set retrieval.dense_share=0.3 retrieval` reads
//! the configuration the same way) and one subcommand per benchmark.

use std::path::PathBuf;

use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(name = "mneme-bench", version, about = "mneme's benchmarks: figures for BENCHMARKS.md, and the retrieval-benchmark protocol")]
pub struct Cli {
    /// Data directory (its config.toml and installed model are read) [default: ~/.local/share/mneme].
    #[arg(long, global = true, env = "MNEME_HOME", value_name = "DIR")]
    pub data_dir: Option<PathBuf>,
    /// Configuration file [default: DATA_DIR/config.toml].
    #[arg(long, global = true, env = "MNEME_CONFIG", value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Accepted for compatibility with `mneme`'s global flags; benchmarks use temporary,
    /// unencrypted stores.
    #[arg(long, global = true, env = "MNEME_ENCRYPTION_KEY_FILE", value_name = "FILE", hide = true)]
    pub key_file: Option<PathBuf>,
    /// Print machine-readable JSON instead of text.
    #[arg(long, global = true)]
    pub json: bool,
    /// Override one configuration key, e.g. --set retrieval.dense_share=0.3 (repeatable).
    #[arg(long = "set", global = true, value_name = "KEY=VALUE")]
    pub sets: Vec<String>,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Speak the retrieval-benchmark protocol (../shared/bench/README.md) on stdin/stdout.
    Retrieval,
    /// Speak the current-truth benchmark's protocol (../shared/bench/truth/README.md) on
    /// stdin/stdout: the hooks, consolidation, recall and session context on a fresh
    /// store per conversation.
    Truth,
    /// The conversational fact extractor on each line of stdin: one JSON line of claims
    /// per input line (for inspecting what a phrasing yields).
    Extract {
        /// Also the span reader's reading of each line with the embedding model (its slot,
        /// value and probabilities, and why it was refused), and `kinds`: the topic
        /// layer's likeliest slots for the line and the value-kind layer's for the value
        /// read (for the whole line when none was); values the speaker holds may follow
        /// the text after a tab, separated by `|` (`slot=value` holds one under that slot
        /// only).
        #[arg(long)]
        read: bool,
    },
    /// Workspace search at scale: index time, refresh cost, search latency, and the
    /// `mneme search` / `mneme claude-hook session-start` processes.
    Workspace {
        #[arg(long, default_value_t = 1000)]
        files: usize,
        #[arg(long, default_value_t = 500)]
        queries: usize,
        /// Process runs per command.
        #[arg(long, default_value_t = 100)]
        runs: usize,
        /// Also embed every chunk with this model directory and measure search by words and
        /// meaning (the hybrid ranking) beside search by words.
        #[arg(long)]
        model_dir: Option<std::path::PathBuf>,
    },
    /// The wall time of an offline heartbeat tick on a store of N records with 30 days of
    /// heartbeat logs, against an empty store in the same process.
    Reflect {
        #[arg(long, default_value_t = 100_000)]
        records: usize,
        #[arg(long, default_value_t = 40)]
        ticks: usize,
    },
    /// Reflection's effect (issue 36): a simulated month of an agent's work through the
    /// hooks, with the heartbeat on schedule and without; per week, how often a failure
    /// or a correction already met comes back, and the playbook's useful and junk lines.
    Learning {
        #[arg(long, default_value_t = 4)]
        weeks: usize,
        #[arg(long, default_value_t = 36)]
        seed: u64,
        /// Print the playbook (heartbeat on) after each week, on stderr.
        #[arg(long)]
        show_playbook: bool,
        /// `scripted`: every heartbeat stage asks a loopback model scripted to follow its
        /// prompt and add nothing of its own (the tip it recommends is the first lesson it
        /// is given that no recent heartbeat acted on); default: no LLM.
        #[arg(long, value_parser = ["scripted"])]
        llm: Option<String>,
    },
    /// What each web-console view costs to load (its API requests) on a store of N
    /// records, against an empty store.
    Console {
        #[arg(long, default_value_t = 100_000)]
        records: usize,
        /// Timed loads per view.
        #[arg(long, default_value_t = 30)]
        runs: usize,
    },
    /// The inner life's context assembly (levels 1–4) and an offline job run on a
    /// workspace with N days of notes, diary entries and dreams, against one day.
    Inner {
        #[arg(long, default_value_t = 90)]
        days: i64,
        /// Timed repetitions per level.
        #[arg(long, default_value_t = 100)]
        runs: usize,
    },
    /// Ingest throughput and recall latency on synthetic records, beside raw SQLite.
    Store {
        /// Store sizes to measure, comma separated.
        #[arg(long, value_delimiter = ',', default_value = "10000,100000")]
        records: Vec<usize>,
        /// Queries per size.
        #[arg(long, default_value_t = 1000)]
        queries: usize,
        /// Records ingested one transaction each (the rest are batched).
        #[arg(long, default_value_t = 2000)]
        single: usize,
    },
    /// Export and import throughput of the dump (`mneme export` / `import`) on a store of
    /// N synthetic records: SQLite → dump → a new SQLite store, and with --postgres the
    /// same into and out of PostgreSQL, in one process.
    Dump {
        /// Records in the store.
        #[arg(long, default_value_t = 100_000)]
        records: usize,
        /// An empty PostgreSQL database to import into and export from.
        #[arg(long, value_name = "URL")]
        postgres: Option<String>,
    },
    /// The same service on both engines, in one process: batched ingest throughput of N
    /// synthetic records into a new SQLite store and into an empty PostgreSQL database,
    /// then recall latency for the same queries, interleaved: right after the load and
    /// after `VACUUM ANALYZE`; with `--vectors`, synthetic 384-dimension vectors stored on
    /// both (pgvector's HNSW on PostgreSQL) and hybrid recall.
    Engines {
        /// Records in each store.
        #[arg(long, default_value_t = 100_000)]
        records: usize,
        /// Queries (each asked of both engines).
        #[arg(long, default_value_t = 500)]
        queries: usize,
        /// An empty PostgreSQL database.
        #[arg(long, value_name = "URL")]
        postgres: String,
        /// Also store vectors and measure hybrid recall.
        #[arg(long)]
        vectors: bool,
    },
    /// Retrieve latency for queries of frequent words (Zipf vocabulary, words in most
    /// records), with and without the per-word cap `retrieval.max_term_matches`.
    Lexical {
        /// Store sizes to measure, comma separated.
        #[arg(long, value_delimiter = ',', default_value = "100000,1000000")]
        records: Vec<usize>,
        /// Queries per class and size.
        #[arg(long, default_value_t = 200)]
        queries: usize,
        /// How many of them the uncapped retrieve also answers (it is slow on frequent words).
        #[arg(long, default_value_t = 20)]
        baseline: usize,
        /// `retrieval.max_term_matches` of the capped retrieve.
        #[arg(long, default_value_t = mneme_core::RankWeights::default().max_term_matches)]
        cap: usize,
    },
    /// The span reader (`mneme_truth::spans`): trains it on hand-labelled values
    /// (`bench/topics/spans/`) and reports it beside the phrase extractor on each part.
    Spans {
        /// Labelled JSON Lines, `{"text", "slot", "value": SPAN or null, "source"}` (repeatable).
        #[arg(long, required = true)]
        data: Vec<PathBuf>,
        /// Labelled JSON Lines measured only, never trained on (part `eval`; repeatable).
        #[arg(long)]
        eval: Vec<PathBuf>,
        /// Where to write the trained reader.
        #[arg(long)]
        out: Option<PathBuf>,
        /// Training epochs (full batch).
        #[arg(long, default_value_t = 300)]
        epochs: usize,
        /// Adam's learning rate.
        #[arg(long, default_value_t = 0.02)]
        learning_rate: f32,
        /// Weight decay (times the squared weights).
        #[arg(long, default_value_t = 1e-4)]
        l2: f32,
        /// The reader answers when its span has at least this share of the span's and "no
        /// value"'s probability together.
        #[arg(long, default_value_t = 0.5)]
        min_share: f32,
        /// Prints up to this many held-out rows the reader got wrong.
        #[arg(long, default_value_t = 0)]
        show_errors: usize,
        /// Model directory [default: DATA_DIR/models/all-MiniLM-L6-v2].
        #[arg(long)]
        model_dir: Option<PathBuf>,
        /// Train the old-value head instead: the rows' `old` words (the value a message
        /// replaces, `bench/topics/spans/olds_train.jsonl`), measured on whether a held
        /// value's mention reads as old (crates/mneme-truth/data/olds.json for `--out`).
        #[arg(long)]
        old: bool,
    },
    /// The value-kind layer (`TopicModel::values`): trains it on the values of labelled
    /// sets and the slots' known values, and reports, per floor, the right values it would
    /// refuse and the values paired with another slot's it would catch, on values it never saw.
    Values {
        /// Labelled JSON Lines whose `(slot, value)` pairs are trained on (repeatable).
        #[arg(long, required = true)]
        data: Vec<PathBuf>,
        /// Labelled JSON Lines measured only (values also in `--data` are left out; repeatable).
        #[arg(long)]
        eval: Vec<PathBuf>,
        /// Where to write the trained layer (crates/mneme-truth/data/values.json for the
        /// compiled-in one).
        #[arg(long)]
        out: Option<PathBuf>,
        /// Training epochs (full batch).
        #[arg(long, default_value_t = 300)]
        epochs: usize,
        /// Units of a hidden layer trained beside the linear one (0: linear only).
        #[arg(long, default_value_t = 0)]
        hidden: usize,
        /// Weight decay (times the squared weights).
        #[arg(long, default_value_t = 1e-4)]
        l2: f32,
        /// Adam's learning rate.
        #[arg(long, default_value_t = 0.01)]
        learning_rate: f32,
        /// Floors to report (repeatable).
        #[arg(long, default_values_t = [0.01f32, 0.02, 0.05])]
        floor: Vec<f32>,
        /// Prints up to this many held-out values read as another slot's.
        #[arg(long, default_value_t = 0)]
        show_errors: usize,
        /// Also train a `none` class on what is no value: the phrase extractor's wrong
        /// values on the rows' messages ("update" from "Favourite food update:
        /// spanakopita") and a few words of each message apart from its value; the report
        /// adds how much of the same from `--eval` each floor refuses.
        #[arg(long)]
        junk: bool,
        /// Model directory [default: DATA_DIR/models/all-MiniLM-L6-v2].
        #[arg(long)]
        model_dir: Option<PathBuf>,
    },
    /// The topic layer (`mneme_truth::topics`): `train` fits it to a labelled set and
    /// writes the weights; `eval` reports accuracy, precision and recall on a labelled set.
    Topics {
        /// `train` or `eval`.
        #[arg(value_parser = ["train", "eval"])]
        action: String,
        /// Labelled JSON Lines, one `{"text": …, "slot": SLOT or null, "family": …}` per line.
        #[arg(long)]
        data: PathBuf,
        /// Where `train` writes the layer [default: crates/mneme-truth/data/topics.json].
        #[arg(long, default_value = "crates/mneme-truth/data/topics.json")]
        out: PathBuf,
        /// The layer `eval` reads [default: the compiled-in one].
        #[arg(long)]
        layer: Option<PathBuf>,
        /// Probability below which `eval` counts a slot answer as `none` (the runtime's
        /// `retrieval.topic_min_p` default).
        #[arg(long, default_value_t = 0.3)]
        threshold: f32,
        /// `eval` prints up to this many rows it got wrong.
        #[arg(long, default_value_t = 0)]
        show_errors: usize,
        /// Training epochs (full batch).
        #[arg(long, default_value_t = 300)]
        epochs: usize,
        /// Units of a hidden layer trained beside the linear one (0: linear only). The
        /// defaults train the compiled-in layer.
        #[arg(long, default_value_t = 64)]
        hidden: usize,
        /// Weight decay (times the squared weights).
        #[arg(long, default_value_t = 1e-4)]
        l2: f32,
        /// Adam's learning rate.
        #[arg(long, default_value_t = 0.01)]
        learning_rate: f32,
        /// Model directory [default: DATA_DIR/models/all-MiniLM-L6-v2].
        #[arg(long)]
        model_dir: Option<PathBuf>,
    },
    /// The correction layer the heartbeat reads replies with: `train` it on labelled
    /// replies, or `eval` it beside the word rule (`bench/reflect/`).
    Corrections {
        /// `train` or `eval`.
        #[arg(value_parser = ["train", "eval"])]
        action: String,
        /// Labelled JSON Lines, one `{"text": …, "correction": true|false}` per line
        /// (repeat for several files).
        #[arg(long, required = true)]
        data: Vec<PathBuf>,
        /// Where `train` writes the layer.
        #[arg(long, default_value = "crates/mneme-reflect/data/corrections.json")]
        out: PathBuf,
        /// Probability from which `eval` counts a reply as a correction (the runtime's).
        #[arg(long, default_value_t = mneme_reflect::lessons::CORRECTION_MIN_P)]
        threshold: f32,
        /// ...and a reply that asks (the runtime's).
        #[arg(long, default_value_t = mneme_reflect::lessons::CORRECTION_QUESTION_MIN_P)]
        question_threshold: f32,
        /// `eval` prints up to this many replies it got wrong.
        #[arg(long, default_value_t = 0)]
        show_errors: usize,
        /// `eval` reads this layer file (as `train` wrote it) instead of the compiled-in one.
        #[arg(long)]
        layer: Option<PathBuf>,
        /// Training epochs (full batch).
        #[arg(long, default_value_t = 100)]
        epochs: usize,
        /// L2 penalty on the weights: larger generalises more and fits less.
        #[arg(long, default_value_t = 1e-3)]
        l2: f32,
        /// Model directory [default: DATA_DIR/models/all-MiniLM-L6-v2].
        #[arg(long)]
        model_dir: Option<PathBuf>,
    },
    /// Dependent facts: conversations in which a fact about the user changes, played
    /// through the hooks as `truth` plays them, then questions whose answer was said
    /// before the change; reports how often recall marks what rests on the old value as
    /// possibly outdated, and how often it marks what still holds.
    Dependents {
        /// JSON Lines, one conversation per line: `{"id", "speaker", "turns": [{"t",
        /// "role", "text"}], "probes": [{"t", "query", "target", "expect":
        /// "outdated"|"current", "names_old"}]}` (`bench/dependents/README.md`).
        #[arg(long)]
        data: PathBuf,
        /// Hits read per question.
        #[arg(long, default_value_t = 10)]
        k: usize,
        /// Print up to this many probes it got wrong.
        #[arg(long, default_value_t = 0)]
        show_errors: usize,
    },
    /// Embedding throughput (batched short texts) and single-query latency.
    Embed {
        /// Texts to embed.
        #[arg(long, default_value_t = 2000)]
        texts: usize,
        /// Batch size.
        #[arg(long, default_value_t = 32)]
        batch: usize,
        /// Model directory [default: DATA_DIR/models/all-MiniLM-L6-v2].
        #[arg(long)]
        model_dir: Option<PathBuf>,
        /// Real texts to embed, one per line (the first --texts lines, repeated if fewer),
        /// instead of synthetic 8–16-word texts.
        #[arg(long)]
        file: Option<PathBuf>,
        /// Also embed the texts as queries (one text a call) from this many threads at
        /// once, as concurrent recalls do, and report queries/s, CPU and latency.
        #[arg(long, default_value_t = 0)]
        clients: usize,
    },
    /// The vector index at scale on synthetic vectors: build time, memory, ANN latency and
    /// recall@10 against exact search; with --store, hybrid retrieve latency on a real store.
    Vectors {
        /// Vectors (and, with --store, records).
        #[arg(long, default_value_t = 1_000_000)]
        records: usize,
        #[arg(long, default_value_t = 384)]
        dim: usize,
        #[arg(long, default_value_t = 200)]
        queries: usize,
        /// Candidates kept by the Hamming pass.
        #[arg(long, default_value_t = 16_000)]
        coarse: usize,
        /// Candidates kept by the asymmetric pass for exact scoring.
        #[arg(long, default_value_t = 2_000)]
        rerank: usize,
        /// Inverted-file lists (0 = about √n).
        #[arg(long, default_value_t = 0)]
        lists: usize,
        /// Inverted-file lists scanned per query.
        #[arg(long, default_value_t = 128)]
        nprobe: usize,
        /// Also build a real store with these records and vectors and time `retrieve`.
        #[arg(long)]
        store: bool,
    },
    /// The daemon under load: ingest RPC throughput and Retrieve latency with concurrent
    /// clients, hook round trips, RSS; beside direct in-process calls on the same store.
    Daemon {
        /// Records in the store before the load starts.
        #[arg(long, default_value_t = 100_000)]
        records: usize,
        /// Concurrent clients.
        #[arg(long, default_value_t = 8)]
        clients: usize,
        /// Seconds of ingest load.
        #[arg(long, default_value_t = 5.0)]
        seconds: f64,
        /// Retrieve calls (spread over the clients) and hook round trips.
        #[arg(long, default_value_t = 4000)]
        queries: usize,
    },
    /// Several `mneme serve` on one PostgreSQL database against one: ingest and retrieve
    /// throughput with concurrent gRPC clients, and CPU per operation of the daemons, the
    /// database and the clients.
    Fleet {
        /// Records put in the (empty) database before the load.
        #[arg(long, default_value_t = 100_000)]
        records: usize,
        /// Concurrent gRPC clients, spread over the daemons.
        #[arg(long, default_value_t = 8)]
        clients: usize,
        /// Seconds of ingest load per fleet.
        #[arg(long, default_value_t = 10.0)]
        seconds: f64,
        /// Retrieve calls per fleet (spread over the clients).
        #[arg(long, default_value_t = 2000)]
        queries: usize,
        /// Fleet sizes to measure, comma separated.
        #[arg(long, value_delimiter = ',', default_value = "1,2")]
        daemons: Vec<usize>,
        /// An empty PostgreSQL database (the password in the URL).
        #[arg(long, value_name = "URL")]
        postgres: String,
    },
}
