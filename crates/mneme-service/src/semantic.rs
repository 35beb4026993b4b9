//! Embeddings in the engine: the model, the in-memory vector index, and the pipeline
//! that gives every live record a vector.
//!
//! Ingest never waits for the model. A record is searchable lexically the moment it is
//! committed; [`MemoryService::embed_pending`] (run by the daemon's background worker,
//! by `mneme reindex`, and by the retrieval benchmark) finds the live records without a
//! vector from the current model, embeds them in batches, stores the vectors and adds
//! them to the index. The "queue" is that query, so it is bounded (one batch in memory),
//! restart-safe (a crash loses at most the batch in flight, found again next time) and
//! covers the backfill of old records and the re-embed after a model change for free.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, RwLock};
use std::time::{Duration, Instant};

use mneme_embed::Embedder;
use mneme_store::{StoredVector, quantize};

use crate::vectors::{IndexParams, VectorIndex};
use crate::{MemoryService, ServiceError, ServiceResult};

/// Candidates pgvector's HNSW search keeps (`hnsw.ef_search`; its default, 40, also caps
/// how many rows a search returns).
const PG_EF_SEARCH: usize = 100;

/// The model and its index, attached by [`MemoryService::enable_embeddings`].
/// The stopwords a name may hold inside ("Bank of America", "Procter and Gamble").
const NAME_JOINERS: [&str; 3] = ["of", "and", "the"];

/// The least probability a value the span reader finds past a held value must have, as a
/// share of the held value's own (`MemoryService::read_value`). Chosen on the hand-written
/// swaps of `bench/topics/spans/swaps_a.jsonl` and the truth families C and E (0, 0.001,
/// 0.01, 0.03): 0 wrote a new value from most messages that restate the held one.
const PAST_HELD_SHARE: f32 = 0.01;

/// The span reader doubts a phrase's value (`MemoryService::phrase_value`) when its
/// likeliest span over the value's words has less than this share of its likeliest span
/// elsewhere. Chosen on the truth families D, E (seed 11), F (seed 31) and `swaps_a`
/// against 0.1.
const PHRASE_DOUBT: f32 = 0.03;

/// The span reader's own span over a phrase's value replaces it when this many times
/// likelier than the phrase's exact words (`MemoryService::phrase_value`).
const PHRASE_REFINE: f32 = 3.0;

/// A value with at least this share on its slot's kind is that slot's whatever the
/// clause's topic (`MemoryService::value_slot`); below it, the topic is weighed too.
const SURE_FIT: f32 = 0.3;

/// The least topic probability of the clause, and the least share of the value on the
/// slot's kind, for a fact whose value does not fit its own slot to be filed under
/// another (`MemoryService::value_slot`).
const REFILE_TOPIC_MIN: f32 = 0.2;
const REFILE_KIND_MIN: f32 = 0.35;

/// How many times the other slot's topic probability times the value's share on its kind
/// must exceed the own slot's for a value to be filed there: the value-kind layer knows
/// few names of databases and editors, and spreads an unknown one ("Memgraph") thin.
const REFILE_MARGIN: f32 = 2.0;

/// The old-value head's least share for a held value's words when the message also names
/// another value of that single-valued slot's kind (`MemoryService::explain_read`): a
/// correction or change that names both values ("ABAP was a slip, sorry, the right one is
/// CoffeeScript", "Correcting myself: Maelys. I wrote Maelis by mistake") is read as one at a
/// lower share than `retrieval.old_min_p`, which stands alone. Chosen on the truth
/// families C, D and F (seed 113) and `swaps_a`/`swaps_b` against 0.2 (session 39).
const PAIRED_OLD_MIN: f32 = 0.3;

/// The other value is of the held value's kind when it fits the slot's kind by the
/// value-kind layer at least this well (`MemoryService::value_fit`) ...
const PAIRED_FIT_MIN: f32 = 0.5;

/// ... or when the two values' kinds overlap this much (`MemoryService::kind_overlap`:
/// the layer knows few names of languages or people, but it sees "ABAP" and
/// "CoffeeScript" alike), or they are one name spelled two ways (`spelled_alike`).
const PAIRED_OVERLAP_MIN: f32 = 0.35;

/// The least fit to a slot's kind by the value-kind layer of a value a newer statement
/// offers for the slot (`MemoryService::offers_value`): the span reader finds some span in
/// almost any message ("patience" as a city), and 0.2 lets through the unusual names of
/// languages and people the layer knows little of.
const OFFER_FIT_MIN: f32 = 0.2;

/// Whether `value` is written as `slot`'s value can be: where the writer uses capitals, a
/// name slot's value is capitalised or one the phrases name (`named`, asked only then): "The
/// coffee machine at Globex broke again" names no employer in "coffee machine".
fn written_as_its_kind(text: &str, slot: &str, value: &str, named: impl FnOnce(&str) -> bool) -> bool {
    let name = mneme_truth::slot(slot).is_some_and(|d| d.shape == mneme_truth::lexicon::Shape::Name);
    !name || value.chars().next().is_some_and(char::is_uppercase) || !text.chars().any(char::is_uppercase) || named(value)
}

/// Whether `value` is one of `named` (as values compare).
fn among(named: &[String], value: &str) -> bool {
    named.iter().any(|v| mneme_truth::normalize_value(v) == mneme_truth::normalize_value(value))
}

/// The least share against "no value" of a name read inside the span reader's likeliest
/// words when those have no value's shape (`explain_read`): the names it rightly reads
/// there ("CotEditor", "Delphi", "Pascal") have 0.999 and more.
const NAME_INSIDE_SHARE: f32 = 0.95;

/// Whether words the span reader found can be a slot's value: one to four words, no
/// clause punctuation ("correction: poutine"), no stopword but a name's joiners inside
/// ("Fabrikam was a slip"), and neither the first nor the last a stopword.
fn looks_like_a_value(value: &str) -> bool {
    let words: Vec<String> = value.split_whitespace().map(str::to_lowercase).collect();
    let edge = |w: Option<&String>| w.is_some_and(|w| !mneme_core::query::is_stopword(w.trim_matches(|c: char| !c.is_alphanumeric())));
    (1..=4).contains(&words.len())
        && !value.contains([':', ';', ',', '!', '?', '(', ')', '"'])
        && words.iter().all(|w| !mneme_core::query::is_stopword(w) || NAME_JOINERS.contains(&w.as_str()))
        && edge(words.first())
        && edge(words.last())
}

/// The value-kind layer's probability, in `p`, on the slots of `slot`'s kind.
fn kin_share(layer: &mneme_truth::topics::TopicModel, p: &[f32], slot: &str) -> f32 {
    mneme_truth::value_kin(slot).iter().filter_map(|k| layer.classes.iter().position(|c| c == k)).filter_map(|i| p.get(i)).sum()
}

/// Whether two values are one spelled two ways ("Maelis" and "Maelys", "Ifeomah" and
/// "Ifeoma"): the same length give or take one, at most one letter in four changed
/// (edit distance, ignoring case), and not the same.
fn spelled_alike(a: &str, b: &str) -> bool {
    let (a, b): (Vec<char>, Vec<char>) = (a.to_lowercase().chars().collect(), b.to_lowercase().chars().collect());
    if a == b || a.len().abs_diff(b.len()) > 1 || a.len().min(b.len()) < 4 {
        return false;
    }
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.iter().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let next = (prev + usize::from(ca != cb)).min(row[j] + 1).min(row[j + 1] + 1);
            prev = row[j + 1];
            row[j + 1] = next;
        }
    }
    4 * row[b.len()] <= a.len().max(b.len())
}

/// Whether the words at `range` are cut out of a longer capitalised name: the word right
/// after them (one space between) is capitalised, or the word right before them is and
/// does not begin its sentence ("The commute to the Ironbark Robotics office" read as a
/// city "Ironbark"; "in San Francisco" read as "Francisco"). "I" joins no name.
fn cut_from_a_name(text: &str, range: std::ops::Range<usize>) -> bool {
    let capitalised = |w: &str| w != "I" && w.chars().next().is_some_and(char::is_uppercase) && w.chars().all(char::is_alphanumeric);
    let (Some(before), Some(after)) = (text.get(..range.start), text.get(range.end..)) else { return false };
    let next = after.strip_prefix(' ').and_then(|rest| rest.split(|c: char| !c.is_alphanumeric()).next());
    if next.is_some_and(capitalised) {
        return true;
    }
    let Some(head) = before.strip_suffix(' ') else { return false };
    let previous = head.rsplit(|c: char| !c.is_alphanumeric()).next().unwrap_or_default();
    capitalised(previous) && !opens_a_sentence(text, head.len() - previous.len())
}

/// Whether a word at byte `at` of `text` begins a sentence (or the text): what comes before
/// it ends in ".", "!", "?", ":" or a quote, or nothing does. Its capital says nothing.
fn opens_a_sentence(text: &str, at: usize) -> bool {
    text[..at].trim_end().chars().next_back().is_none_or(|c| matches!(c, '.' | '!' | '?' | ':' | '"'))
}

/// A span's words without the punctuation around them ("C++" and "C#" keep theirs).
fn value_words(span: &str) -> &str {
    span.trim_matches(|c: char| !c.is_alphanumeric() && c != '+' && c != '#')
}

/// How a list joins its items: a comma (maybe with "and"), "and", "und" or "&".
const LIST_JOINS: [&str; 7] = [", and ", ", und ", ", & ", ", ", " and ", " und ", " & "];

/// The least share of a list item's kind on its slot's (`MemoryService::value_fit`) for it
/// to join a value read for a multi-valued slot.
const LIST_FIT_MIN: f32 = 0.5;

/// The words (byte ranges) of the run of `text` in `range` up to clause punctuation.
fn list_run_words(text: &str, range: std::ops::Range<usize>) -> Vec<std::ops::Range<usize>> {
    let mut out = Vec::new();
    let mut start = None;
    for (i, c) in text[range.clone()].char_indices().map(|(i, c)| (range.start + i, c)).chain([(range.end, ' ')]) {
        if c.is_whitespace() {
            if let Some(s) = start.take() {
                out.push(s..i);
            }
        } else {
            start.get_or_insert(i);
        }
    }
    out
}

/// Classes of a layer with their probabilities, likeliest first
/// ([`MemoryService::explain_kinds`]).
pub type Ranked = Vec<(String, f32)>;

/// What the span reader made of a message ([`MemoryService::explain_read`]).
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct ValueReading {
    /// The topic layer's slot (`None`: no slot's topic) and its probability.
    pub slot: Option<&'static str>,
    pub topic_p: f32,
    /// The words read past the held values, with the span's probability, "no value"'s,
    /// and the best span's over a held value.
    pub value: Option<String>,
    pub span_p: f32,
    pub none_p: f32,
    pub restated_p: f32,
    /// The old-value head's share for a held value's words: that the message replaces it.
    pub old_p: f32,
    pub accepted: bool,
    /// Why the reading was refused, or "accepted".
    pub verdict: &'static str,
}

#[derive(Debug)]
pub(crate) struct Semantic {
    pub(crate) embedder: Arc<dyn Embedder>,
    pub(crate) index: RwLock<VectorIndex>,
    /// Highest record sequence number the pipeline has looked at; held for a whole batch,
    /// so two callers of `embed_pending` never embed the same records.
    watermark: Mutex<i64>,
    /// Set when new records may be waiting; the worker sleeps on it.
    wake: (Mutex<bool>, Condvar),
    /// The last query-embedding failure was reported (log once, not per query).
    query_failure_reported: AtomicBool,
    /// On PostgreSQL: the highest vector version the index holds, so each query first
    /// takes what other daemons stored or erased since (`catch_up`).
    synced: Mutex<i64>,
    /// Vectors of recent queries ([`QueryCache`]).
    queries: Mutex<QueryCache>,
    /// A hidden topic layer's readings of indexed records ([`Readings`]).
    readings: Mutex<Readings>,
    /// The last message's token states: the phrase check of each of its values and the
    /// span reader's reading share one encoder pass.
    last_states: Mutex<Option<(String, Arc<mneme_embed::TokenStates>)>>,
}

impl Semantic {
    /// The encoder's token states for `text` (`None` without them), the last message's
    /// kept for the next call.
    fn token_states(&self, text: &str) -> Option<Arc<mneme_embed::TokenStates>> {
        let last = || self.last_states.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((_, states)) = last().as_ref().filter(|(t, _)| t == text) {
            return Some(states.clone());
        }
        // Not under the lock: another message's pass need not wait for this one.
        let states = Arc::new(self.embedder.token_states(text)?.ok()?);
        *last() = Some((text.to_string(), states.clone()));
        // The pass gave the text's sentence vector too: asked as a query next, it is not
        // encoded again.
        self.queries.lock().unwrap_or_else(|p| p.into_inner()).put(text, states.sentence.clone());
        Some(states)
    }
}

/// What a layer with a hidden part read from each record's vector, keyed by the layer
/// and the record, with the vector's scale it was read from: a record whose vector
/// changed (erased, re-embedded) is read again. Reading costs the hidden layer's
/// multiply per record, and retrieval reads the same records for every question.
#[derive(Debug, Default)]
struct Readings {
    entries: std::collections::HashMap<(usize, i64), (u32, Reading)>,
}

/// A record's most likely class (`None` for `none`) and its probability; `None` when
/// the layer gave no answer.
type Reading = Option<(Option<&'static str>, f32)>;

/// Past this many readings the memo starts afresh.
const READINGS: usize = 200_000;

/// How many query vectors [`QueryCache`] keeps.
const QUERY_CACHE: usize = 256;

/// Most records a write embeds on its own thread ([`MemoryService::embed_fresh`]); more
/// are a backlog, the backfill's.
const FRESH_MAX: usize = 16;

/// How often an idle backfill looks for records it was not told of (written by another
/// process on the same store, such as `mneme ingest` beside a daemon): one look past the
/// watermark, by sequence number.
const IDLE_POLL: Duration = Duration::from_secs(1);

/// The vectors of recently embedded queries, keyed by the SHA-256 of the query's text (the
/// text itself is not kept). Agents ask the same often: a session's task descriptor at every
/// session start, a retried recall. A query's embedding is most of what recall costs with
/// the model (10–15 ms of a core against about 1 ms for the rest). Emptied by `forget`.
#[derive(Debug, Default)]
pub(crate) struct QueryCache {
    entries: std::collections::HashMap<[u8; 32], (Vec<f32>, u64)>,
    clock: u64,
}

impl QueryCache {
    fn key(query: &str) -> [u8; 32] {
        use sha2::Digest as _;
        sha2::Sha256::digest(query.as_bytes()).into()
    }

    fn get(&mut self, query: &str) -> Option<Vec<f32>> {
        self.clock += 1;
        let clock = self.clock;
        self.entries.get_mut(&Self::key(query)).map(|(v, used)| {
            *used = clock;
            v.clone()
        })
    }

    fn put(&mut self, query: &str, vector: Vec<f32>) {
        if self.entries.len() >= QUERY_CACHE
            && let Some(oldest) = self.entries.iter().min_by_key(|(_, (_, used))| *used).map(|(k, _)| *k)
        {
            self.entries.remove(&oldest);
        }
        self.clock += 1;
        self.entries.insert(Self::key(query), (vector, self.clock));
    }
}

/// Progress of [`MemoryService::embed_pending`], for progress bars.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct EmbedProgress {
    pub done: u64,
    /// Records that lacked a vector when the run started (more may arrive meanwhile).
    pub total: u64,
    pub elapsed: Duration,
}

/// What the pipeline holds, for `mneme status` and `model status`.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct EmbeddingStatus {
    pub model: String,
    pub dimension: usize,
    /// Live records with and without a vector from this model.
    pub embedded: u64,
    pub pending: u64,
    /// Vectors in the in-memory index (any record status).
    pub indexed: usize,
    pub index_bytes: usize,
    /// "exact" or "approximate" (the in-memory index), or "pgvector" (on PostgreSQL).
    pub search: &'static str,
}

impl MemoryService {
    /// Attaches an embedding model: loads the stored vectors of `embedder.model_id()`
    /// into the index. Records without one are embedded by [`MemoryService::embed_pending`].
    /// A service takes one model in its life (a running daemon attaches one when it is
    /// installed after start, [`ModelWatch`]); a second is refused.
    pub fn enable_embeddings(&self, embedder: Arc<dyn Embedder>, params: IndexParams) -> ServiceResult<usize> {
        if let Some(s) = self.semantic.get() {
            return Err(ServiceError::Precondition(format!("embedding model {} is already attached", s.embedder.model_id())));
        }
        let model = embedder.model_id().to_string();
        let mut index = VectorIndex::new(embedder.dimension(), params);
        let mut wrong_dimension = 0usize;
        // One snapshot: the vectors and the version they are current to.
        let version = self.reader()?.read(|tx| {
            tx.for_each_vector(&model, |v| {
                if !index.insert(v.seq, v.scale, &v.codes) {
                    wrong_dimension += 1;
                }
            })?;
            tx.vector_version()
        })?;
        if wrong_dimension > 0 {
            return Err(ServiceError::Embedding(format!(
                "{wrong_dimension} stored vectors of model {model} do not have {} dimensions; run `mneme reindex --force`",
                embedder.dimension()
            )));
        }
        // Above `exact_below`, approximate queries scan the best lists of a partition. On
        // PostgreSQL pgvector answers them; the index serves look-ups by record only.
        if self.postgres.is_none() {
            index.build_partition();
        }
        let n = index.len();
        let semantic = Semantic {
            embedder,
            index: RwLock::new(index),
            watermark: Mutex::new(0),
            wake: (Mutex::new(true), Condvar::new()),
            query_failure_reported: AtomicBool::new(false),
            synced: Mutex::new(version),
            queries: Mutex::new(QueryCache::default()),
            readings: Mutex::new(Readings::default()),
            last_states: Mutex::new(None),
        };
        self.semantic.set(semantic).map_err(|_| ServiceError::Precondition("another embedding model was attached meanwhile".into()))?;
        Ok(n)
    }

    /// The attached model's id, if any.
    pub fn embedding_model(&self) -> Option<&str> {
        self.semantic.get().map(|s| s.embedder.model_id())
    }

    /// Embeds every live record that has no vector from the current model, `batch` at a
    /// time, reporting progress after each batch. Returns how many were embedded. With
    /// `force`, records that already have a vector are embedded again.
    pub fn embed_pending(&self, batch: usize, force: bool, progress: &mut dyn FnMut(EmbedProgress)) -> ServiceResult<u64> {
        self.embed_pending_until(batch, force, false, progress, &|| false)
    }

    /// [`Self::embed_pending`] that also ends after the batch in flight once `stop()`
    /// says so (the daemon's shutdown: the backlog resumes at the next start, since the
    /// queue is the records still without vectors). `background`: nobody waits for it (the
    /// daemon's backfill), so the model runs it behind queries ([`Embedder::embed_background`]).
    pub fn embed_pending_until(
        &self,
        batch: usize,
        force: bool,
        background: bool,
        progress: &mut dyn FnMut(EmbedProgress),
        stop: &dyn Fn() -> bool,
    ) -> ServiceResult<u64> {
        let Some(semantic) = self.semantic.get() else { return Ok(0) };
        let model = semantic.embedder.model_id().to_string();
        let mut watermark = semantic.watermark.lock().unwrap_or_else(|p| p.into_inner());
        if force {
            *watermark = 0;
        }
        let started = Instant::now();
        // Counted once there is work: the count reads every live record, and an idle pass
        // (most of them) finds nothing after the watermark.
        let mut total: Option<u64> = None;
        let mut done = 0u64;
        // With `force`, a record's old vector must not count as done: look under a
        // throwaway model name so every live record is "missing" once.
        // (A control character no model id holds; not NUL, which PostgreSQL text refuses.)
        let lookup = if force { format!("{model}\u{1f}reindex") } else { model.clone() };
        while !stop() {
            let todo = self.reader()?.read(|tx| tx.records_needing_vectors(&lookup, *watermark, batch.max(1)))?;
            let Some(last) = todo.last().map(|t| t.seq) else { break };
            if total.is_none() {
                let (with, without) = self.reader()?.read(|tx| tx.vector_coverage(&model))?;
                total = Some(if force { with + without } else { without });
            }
            done += self.embed_todo(semantic, &todo, background)?;
            *watermark = last;
            progress(EmbedProgress { done, total: total.unwrap_or(0).max(done), elapsed: started.elapsed() });
        }
        Ok(done)
    }

    /// Embeds `todo`, stores the vectors and puts them in the index; how many.
    fn embed_todo(&self, semantic: &Semantic, todo: &[mneme_store::EmbedTodo], background: bool) -> ServiceResult<u64> {
        let texts: Vec<&str> = todo.iter().map(|t| t.text.as_str()).collect();
        let vectors = if background { semantic.embedder.embed_background(&texts) } else { semantic.embedder.embed(&texts) }
            .map_err(|e| ServiceError::Embedding(e.to_string()))?;
        if vectors.len() != todo.len() {
            return Err(ServiceError::Embedding(format!("the model returned {} vectors for {} texts", vectors.len(), todo.len())));
        }
        let stored: Vec<StoredVector> = todo
            .iter()
            .zip(&vectors)
            .map(|(t, v)| {
                let (scale, codes) = quantize(v);
                StoredVector { seq: t.seq, scale, codes }
            })
            .collect();
        self.store()?.write(|tx| tx.put_vectors(semantic.embedder.model_id(), &stored))?;
        let mut index = semantic.index.write().unwrap_or_else(|p| p.into_inner());
        for v in &stored {
            index.insert(v.seq, v.scale, &v.codes);
        }
        Ok(stored.len() as u64)
    }

    /// Embeds the records written since the pipeline last looked, on the writer's thread,
    /// when they are few (at most [`FRESH_MAX`]): a record is then found by meaning as soon
    /// as its write is acknowledged, not when the backfill next wakes. Nothing when the
    /// backfill is mid-pass (it reaches them in order) or there is a backlog (its job); a
    /// failure leaves them to the backfill, which retries. Each daemon embeds its own small
    /// writes, on PostgreSQL too: the embedding lease is the backlog's, and asking for it
    /// is a round trip to the server per write (other daemons take the vectors at query
    /// time, and a record embedded twice is stored once).
    pub(crate) fn embed_fresh(&self) {
        let Some(semantic) = self.semantic.get() else { return };
        let Ok(mut watermark) = semantic.watermark.try_lock() else { return };
        let model = semantic.embedder.model_id();
        let Ok(todo) = self.reader().and_then(|mut r| Ok(r.read(|tx| tx.records_needing_vectors(model, *watermark, FRESH_MAX + 1))?))
        else {
            return;
        };
        let Some(last) = todo.last().map(|t| t.seq) else { return };
        if todo.len() > FRESH_MAX {
            return;
        }
        if self.embed_todo(semantic, &todo, false).is_ok() {
            *watermark = last;
        }
    }

    /// Tells the background embedder that new records may be waiting.
    pub(crate) fn wake_embedder(&self) {
        if let Some(s) = self.semantic.get() {
            let (flag, cv) = &s.wake;
            *flag.lock().unwrap_or_else(|p| p.into_inner()) = true;
            cv.notify_one();
        }
    }

    /// Blocks until new records may need vectors, `stop` is set, or `timeout` passes.
    fn wait_for_work(&self, stop: &AtomicBool, timeout: Duration) {
        let Some(s) = self.semantic.get() else { return };
        let (flag, cv) = &s.wake;
        let mut woken = flag.lock().unwrap_or_else(|p| p.into_inner());
        if !*woken && !stop.load(Ordering::Relaxed) {
            woken = cv.wait_timeout(woken, timeout).unwrap_or_else(|p| p.into_inner()).0;
        }
        *woken = false;
    }

    /// Runs the embedding pipeline on a background thread until the handle is stopped.
    /// Failures (a model error, a busy store) are logged through `on_error` and retried
    /// after `retry`; the records stay pending meanwhile. Without a model the thread runs
    /// only with a `watch`: it waits for the model to appear, attaches it, and goes on as
    /// if it had been there from the start (no model and no watch: no thread, `None`).
    pub fn spawn_embedder(
        self: &Arc<Self>,
        batch: usize,
        retry: Duration,
        watch: Option<ModelWatch>,
        on_error: impl Fn(&ServiceError) + Send + 'static,
    ) -> Option<EmbedderHandle> {
        if self.semantic.get().is_none() && watch.is_none() {
            return None;
        }
        let stop = Arc::new(AtomicBool::new(false));
        let passes = Arc::new((std::sync::Mutex::new(0u64), std::sync::Condvar::new()));
        let service = Arc::clone(self);
        let flag = Arc::clone(&stop);
        let counted = Arc::clone(&passes);
        let mut watch = watch;
        let thread = std::thread::Builder::new()
            .name("mneme-embedder".into())
            .spawn(move || {
                while !flag.load(Ordering::Relaxed) {
                    if service.semantic.get().is_none() {
                        let Some(w) = watch.as_mut() else { return };
                        if !(w.attach)(&service) {
                            sleep_unless(&flag, w.every);
                            continue;
                        }
                    }
                    // On PostgreSQL one daemon (the lease holder) embeds for all; the others
                    // take its vectors at query time (`catch_up`), and the job when it dies.
                    let result = match service.holds_job("embedding") {
                        Ok(true) => service.embed_pending_until(batch, false, true, &mut |_| {}, &|| flag.load(Ordering::Relaxed)),
                        Ok(false) => Ok(0),
                        Err(e) => Err(e),
                    };
                    if let Err(e) = &result {
                        on_error(e);
                    }
                    let (count, changed) = &*counted;
                    *count.lock().unwrap_or_else(|p| p.into_inner()) += 1;
                    changed.notify_all();
                    service.wait_for_work(&flag, if result.is_ok() { IDLE_POLL } else { retry });
                }
            })
            .ok()?;
        Some(EmbedderHandle { stop, service: Arc::clone(self), thread: Some(thread), passes })
    }

    /// Unit vectors of `texts` from the attached model, or `None` without one or when it
    /// fails (callers fall back to words): what the heartbeat groups paraphrases with.
    pub fn embed_texts(&self, texts: &[&str]) -> Option<Vec<Vec<f32>>> {
        let s = self.semantic.get()?;
        if texts.is_empty() {
            return Some(Vec::new());
        }
        s.embedder.embed(texts).ok()
    }

    /// The query's unit vector, or `None` (no model, or the model failed: then retrieval
    /// is lexical and the failure is reported once through the returned flag).
    pub(crate) fn query_vector(&self, query: &str) -> Option<Vec<f32>> {
        let s = self.semantic.get()?;
        self.catch_up(s);
        if s.index.read().unwrap_or_else(|p| p.into_inner()).is_empty() {
            return None;
        }
        self.text_query_vector(query)
    }

    /// A query's unit vector from the attached model, whatever the records' index holds (the
    /// workspace's chunks have their own vectors): cached like [`Self::query_vector`]'s.
    pub(crate) fn text_query_vector(&self, query: &str) -> Option<Vec<f32>> {
        let s = self.semantic.get()?;
        if let Some(v) = s.queries.lock().unwrap_or_else(|p| p.into_inner()).get(query) {
            return Some(v);
        }
        // A query's one pass also gives its token states, kept for the reading of the same
        // text: an agent's turn asks with the user's message (auto-recall) and then reads
        // it for facts, one pass for both. Without token states (another embedder), the
        // sentence vector alone.
        if let Some(states) = s.token_states(query) {
            s.query_failure_reported.store(false, Ordering::Relaxed);
            return Some(states.sentence.clone());
        }
        match s.embedder.embed(&[query]) {
            Ok(mut v) => {
                s.query_failure_reported.store(false, Ordering::Relaxed);
                let v = v.pop()?;
                s.queries.lock().unwrap_or_else(|p| p.into_inner()).put(query, v.clone());
                Some(v)
            }
            Err(e) => {
                if !s.query_failure_reported.swap(true, Ordering::Relaxed) {
                    eprintln!("mneme: query embedding failed, retrieval is lexical-only until it works again: {e}");
                }
                None
            }
        }
    }

    /// Reads the values of several facts about to be written in one forward pass (their
    /// vectors wait in the query cache for [`Self::value_slot`]).
    pub fn prepare_values(&self, values: &[&str]) {
        if self.config.retrieval.value_min_p > 0.0 && values.len() > 1 {
            let items: Vec<&str> = values.iter().flat_map(|v| mneme_truth::list_items(v)).collect();
            let _ = self.text_vectors(&items);
        }
    }

    /// The unit vectors of several short texts from the attached model, in one forward
    /// pass for those not in the query cache (and cached like [`Self::text_query_vector`]'s).
    fn text_vectors(&self, texts: &[&str]) -> Option<Vec<Vec<f32>>> {
        let s = self.semantic.get()?;
        let mut out: Vec<Option<Vec<f32>>> = {
            let mut cache = s.queries.lock().unwrap_or_else(|p| p.into_inner());
            texts.iter().map(|t| cache.get(t)).collect()
        };
        let missing: Vec<&str> = texts.iter().zip(&out).filter(|(_, v)| v.is_none()).map(|(t, _)| *t).collect();
        if !missing.is_empty() {
            let mut fresh = s.embedder.embed(&missing).ok()?.into_iter();
            let mut cache = s.queries.lock().unwrap_or_else(|p| p.into_inner());
            for (t, slot) in texts.iter().zip(out.iter_mut()).filter(|(_, v)| v.is_none()) {
                let v = fresh.next()?;
                cache.put(t, v.clone());
                *slot = Some(v);
            }
        }
        out.into_iter().collect()
    }

    /// Forgets the cached query vectors (after a `forget`: a query may have named what was
    /// erased).
    pub(crate) fn forget_query_vectors(&self) {
        if let Some(s) = self.semantic.get() {
            *s.queries.lock().unwrap_or_else(|p| p.into_inner()) = QueryCache::default();
        }
    }

    /// On PostgreSQL, where other daemons embed and forget too: takes the vectors stored
    /// and erased since the index's version into the index. A failure is reported and the
    /// query goes on with what the index holds.
    fn catch_up(&self, s: &Semantic) {
        if self.postgres.is_none() {
            return;
        }
        let mut synced = s.synced.lock().unwrap_or_else(|p| p.into_inner());
        let model = s.embedder.model_id();
        match self.reader().and_then(|mut r| Ok(r.read(|tx| tx.vector_changes(model, *synced))?)) {
            Ok(changes) if changes.version > *synced => {
                let mut index = s.index.write().unwrap_or_else(|p| p.into_inner());
                for v in &changes.stored {
                    index.insert(v.seq, v.scale, &v.codes);
                }
                for seq in &changes.erased {
                    index.erase(*seq);
                }
                *synced = changes.version;
            }
            Ok(_) => {}
            Err(e) => eprintln!("mneme: could not fetch other daemons' vectors, searching what this one holds: {e}"),
        }
    }

    /// Nearest records to `query` by cosine, best first: from pgvector's index on
    /// PostgreSQL (every daemon's vectors), from the in-memory index on SQLite. `tx` is the
    /// retrieval's read transaction (one snapshot for every part of it; a failed statement
    /// ends it, so a database error fails the retrieval).
    pub(crate) fn nearest(&self, tx: &mneme_store::ReadTx<'_>, query: &[f32], k: usize) -> ServiceResult<Vec<(i64, f32)>> {
        let Some(s) = self.semantic.get() else { return Ok(Vec::new()) };
        let ef_search = (2 * k).max(PG_EF_SEARCH);
        if let Some(found) = tx.nearest_vectors(s.embedder.model_id(), query, k, ef_search)? {
            return Ok(found);
        }
        Ok(s.index.read().unwrap_or_else(|p| p.into_inner()).search(query, k))
    }

    /// Cosines between a query vector and the stored vectors of `seqs`.
    pub(crate) fn similarities_to(&self, query: &[f32], seqs: &[i64]) -> Vec<Option<f32>> {
        match self.semantic.get() {
            Some(s) => s.index.read().unwrap_or_else(|p| p.into_inner()).similarities_to(query, seqs),
            None => vec![None; seqs.len()],
        }
    }

    /// The value a user's message gives for one of their slots, read by meaning: the slot
    /// the topic layer puts the message in and the words the span reader
    /// (`mneme_truth::spans`) finds as its value, each at least `retrieval.read_min_p` sure
    /// (the span against "no value"). A value must look like one: at most four words, no
    /// clause punctuation, not starting or ending with a stopword. One pass of the
    /// attached encoder; `None` without a local model, or when unsure. `held` gives the
    /// values the speaker holds for a slot, `retracted` those a phrase of the message
    /// withdrew: the reader looks past them. A message that names a held value as the one
    /// it replaces (the old-value head) is about that value's slot, whatever the topic
    /// layer reads ("Ugh typo, Ramona not Ramonna" after "my partner is Ramonna").
    pub fn read_value(
        &self,
        text: &str,
        held: &dyn Fn(&'static str) -> Vec<String>,
        retracted: &[String],
    ) -> Option<(&'static str, String)> {
        let r = self.explain_read(text, held, retracted)?;
        if r.accepted { Some((r.slot?, r.value?)) } else { None }
    }

    /// What the span reader makes of a phrase's value for `slot` in `text`: `None` when it
    /// doubts it (its likeliest span apart from the value's words is more than
    /// `1 / PHRASE_DOUBT` times likelier than its likeliest span over them: "Favourite food
    /// update: spanakopita" → a phrase reads "update", the reader "spanakopita"); its own
    /// span around the value's words when that is `PHRASE_REFINE` times likelier than the
    /// phrase's exact words and looks like a value ("disc golf" where the phrase read
    /// "golf"); otherwise the phrase's value. Spans over `others` (the values the speaker
    /// holds, the other values the phrases named) are no alternative: the reader leans to
    /// a held value ("Oops, it's Cloudflare not Vultr"). The phrase's value unchanged
    /// without a local model or reader, or when its words are not in the text: nothing is
    /// doubted without a reading.
    pub fn phrase_value(&self, text: &str, slot: &str, value: &str, others: &[String]) -> Option<String> {
        let unread = Some(value.to_string());
        let Some(s) = self.semantic.get().filter(|_| self.config.retrieval.read_min_p < 1.0) else { return unread };
        let Some(reader) = mneme_truth::spans::SpanReader::builtin(s.embedder.model_id()) else { return unread };
        let (Some(index), words) = (reader.slot_index(slot), mneme_truth::mentions(text, value)) else { return unread };
        if words.is_empty() {
            return unread;
        }
        let Some(states) = s.token_states(text) else { return unread };
        let tokens = mneme_truth::spans::Tokens { states: &states.states, word_starts: &states.word_starts };
        let bytes = |i: usize, j: usize| states.offsets[i].0..states.offsets[j].1;
        let outside = |ranges: &[std::ops::Range<usize>], i: usize, j: usize| {
            ranges.iter().all(|w| bytes(i, j).end <= w.start || w.end <= bytes(i, j).start)
        };
        let taken: Vec<std::ops::Range<usize>> = others.iter().flat_map(|v| mneme_truth::mentions(text, v)).collect();
        let Some(on) = reader.read_where(&tokens, index, |i, j| !outside(&words, i, j)) else { return unread };
        // Only another span the reading itself could accept is a doubt ("I'm at Vehement
        // Capital, mostly on internal tools": "internal tools" is no employer's name).
        let named = std::cell::OnceCell::new();
        let could_be = |i: usize, j: usize| {
            text.get(bytes(i, j)).map(value_words).is_some_and(|v| {
                looks_like_a_value(v)
                    && written_as_its_kind(text, slot, v, |v| among(named.get_or_init(|| mneme_truth::named_values(text, slot)), v))
            })
        };
        let off =
            reader.read_where(&tokens, index, |i, j| outside(&words, i, j) && outside(&taken, i, j) && could_be(i, j)).map_or(0.0, |s| s.p);
        if on.p < PHRASE_DOUBT * off {
            return None;
        }
        // Wider words only: narrowing cut names ("Hannah Price" → "Hannah") and kinds
        // ("nurse practitioner" → "nurse") more often than it trimmed junk.
        let exact = reader.read_where(&tokens, index, |i, j| words.contains(&bytes(i, j))).map_or(0.0, |s| s.p);
        let wider = |i: usize, j: usize| {
            let b = bytes(i, j);
            words.iter().any(|w| b.start <= w.start && w.end <= b.end && b != *w) && outside(&taken, i, j)
        };
        let Some(wide) = reader.read_where(&tokens, index, wider).filter(|w| exact > 0.0 && w.p >= PHRASE_REFINE * exact) else {
            return unread;
        };
        match text.get(bytes(wide.start, wide.end)).map(value_words) {
            Some(v) if looks_like_a_value(v) => Some(v.to_string()),
            _ => unread,
        }
    }

    /// How surely `text` names `value` as the value it replaces, by the old-value head: its
    /// share against "no value" for the likeliest span over `value`'s words. `None`
    /// without a local model or the head, or when the words are not in the text.
    pub fn replaced_share(&self, text: &str, value: &str) -> Option<f32> {
        let s = self.semantic.get().filter(|_| self.config.retrieval.old_min_p < 1.0)?;
        let head = mneme_truth::spans::SpanReader::builtin_old(s.embedder.model_id())?;
        let words = mneme_truth::mentions(text, value);
        if words.is_empty() {
            return None;
        }
        let states = s.token_states(text)?;
        let tokens = mneme_truth::spans::Tokens { states: &states.states, word_starts: &states.word_starts };
        let bytes = |i: usize, j: usize| states.offsets[i].0..states.offsets[j].1;
        let over = |i: usize, j: usize| words.iter().any(|w| bytes(i, j).start < w.end && w.start < bytes(i, j).end);
        Some(head.read_where(&tokens, 0, over).map_or(0.0, |s| s.p / (s.p + s.p_none)))
    }

    /// Whether `text` offers a value for `slot` other than `value` by the span reader: its
    /// likeliest span apart from `value`'s words is at least `retrieval.read_min_p` sure
    /// against "no value" and looks like a value. What tells a change the extractor missed
    /// ("Been writing nothing but CoffeeScript for the last two months") from a message the
    /// topic layer merely puts near the slot ("Review season again, too many of them to
    /// write" is no new manager). `None` without a local model or reader.
    pub(crate) fn offers_value(&self, text: &str, slot: &str, value: &str) -> Option<bool> {
        let min = self.config.retrieval.read_min_p as f32;
        let s = self.semantic.get().filter(|_| min < 1.0)?;
        let reader = mneme_truth::spans::SpanReader::builtin(s.embedder.model_id())?;
        let index = reader.slot_index(slot)?;
        let states = s.token_states(text)?;
        let tokens = mneme_truth::spans::Tokens { states: &states.states, word_starts: &states.word_starts };
        let held = mneme_truth::mentions(text, value);
        let bytes = |i: usize, j: usize| states.offsets[i].0..states.offsets[j].1;
        let apart = |i: usize, j: usize| held.iter().all(|h| bytes(i, j).end <= h.start || h.end <= bytes(i, j).start);
        let Some(span) = reader.read_where(&tokens, index, apart).filter(|s| s.p >= min * (s.p + s.p_none)) else { return Some(false) };
        // The value-kind layer must see the slot's kind in it ("patience" is no city).
        Some(
            text.get(bytes(span.start, span.end))
                .map(value_words)
                .is_some_and(|v| looks_like_a_value(v) && self.value_fit(slot, v).is_none_or(|fit| fit >= OFFER_FIT_MIN)),
        )
    }

    /// [`MemoryService::read_value`]'s reading with its figures, whether or not it is
    /// accepted (what `mneme-bench extract --read` prints). `None` without a local model.
    pub fn explain_read(&self, text: &str, held: &dyn Fn(&'static str) -> Vec<String>, retracted: &[String]) -> Option<ValueReading> {
        let min = self.config.retrieval.read_min_p as f32;
        let s = self.semantic.get().filter(|_| min < 1.0)?;
        let reader = mneme_truth::spans::SpanReader::builtin(s.embedder.model_id())?;
        let layer = self.topic_layer()?;
        let states = s.token_states(text)?;
        let topic = layer.classify(&states.sentence)?;
        let mut out = ValueReading { slot: topic.slot, topic_p: topic.p, ..ValueReading::default() };
        let tokens = mneme_truth::spans::Tokens { states: &states.states, word_starts: &states.word_starts };
        let bytes = |i: usize, j: usize| states.offsets[i].0..states.offsets[j].1;
        let apart_from = |held: &[std::ops::Range<usize>], i: usize, j: usize| {
            held.iter().all(|h| bytes(i, j).end <= h.start || h.end <= bytes(i, j).start)
        };
        // The old-value head's share for the words of `held`: that the message replaces them.
        let old_min = self.config.retrieval.old_min_p as f32;
        let head = mneme_truth::spans::SpanReader::builtin_old(s.embedder.model_id()).filter(|_| old_min < 1.0);
        let old_share = |held: &[std::ops::Range<usize>]| match head.filter(|_| !held.is_empty()) {
            Some(head) => head.read_where(&tokens, 0, |i, j| !apart_from(held, i, j)).map_or(0.0, |s| s.p / (s.p + s.p_none)),
            None => 0.0,
        };
        let mentioned = |slot: &'static str| -> Vec<std::ops::Range<usize>> {
            held(slot).iter().flat_map(|v| mneme_truth::mentions(text, v)).collect()
        };
        // Past a slot's held values, another value of the slot's kind the reader finds there.
        let paired = |slot: &'static str, held: &[std::ops::Range<usize>]| {
            if mneme_truth::slot(slot).is_none_or(|d| d.kind != mneme_truth::lexicon::SlotKind::Single) {
                return false;
            }
            let found = reader.slot_index(slot).and_then(|index| {
                reader.read_where(&tokens, index, |i, j| apart_from(held, i, j)).filter(|s| s.p >= min * (s.p + s.p_none))
            });
            found.and_then(|s| text.get(states.offsets[s.start].0..states.offsets[s.end].1)).map(value_words).is_some_and(|v| {
                looks_like_a_value(v)
                    && (self.value_fit(slot, v).is_some_and(|fit| fit >= PAIRED_FIT_MIN)
                        || held
                            .iter()
                            .filter_map(|r| text.get(r.clone()))
                            .any(|h| spelled_alike(h, v) || self.kind_overlap(h, v).is_some_and(|o| o >= PAIRED_OVERLAP_MIN)))
            })
        };
        // The value a message replaces says which slot it is about: the topic's slot first,
        // then the others in slot order.
        let replaced_slot = head.and_then(|_| {
            topic.slot.into_iter().chain(mneme_truth::SLOTS.iter().map(|d| d.id).filter(|id| Some(*id) != topic.slot)).find_map(|slot| {
                let words = mentioned(slot);
                let share = old_share(&words);
                (share >= old_min || (share >= PAIRED_OLD_MIN && paired(slot, &words))).then_some((slot, share, words))
            })
        });
        let (slot, mut held, old_p) = match (replaced_slot, topic.slot.filter(|_| topic.p >= min)) {
            (Some((slot, share, words)), _) => (slot, words, Some(share)),
            (None, Some(slot)) => (slot, mentioned(slot), None),
            (None, None) => {
                out.verdict = "topic: none or below read_min_p";
                return Some(out);
            }
        };
        out.slot = Some(slot);
        let index = reader.slot_index(slot)?;
        // A value the speaker already holds for the slot is not news: the reader looks past
        // it ("CouchDB out, Db2 in"). What it finds there must hold a share of the held
        // value's probability too, or the message restates the held value in passing
        // ("still loving Lisbon, though the Monday trams are chaos").
        held.extend(retracted.iter().flat_map(|v| mneme_truth::mentions(text, v)));
        let apart = |i: usize, j: usize| apart_from(&held, i, j);
        out.restated_p = if held.is_empty() { 0.0 } else { reader.read_where(&tokens, index, |i, j| !apart(i, j)).map_or(0.0, |s| s.p) };
        // Unless the message names the held value as the one it replaces (the old-value
        // head, over a held value's words): then what stands past it is the news.
        out.old_p = old_p.unwrap_or_else(|| old_share(&held));
        let replaced = head.is_some() && (old_p.is_some() || out.old_p >= old_min);
        let Some(span) = reader.read_where(&tokens, index, apart) else {
            out.verdict = "no span";
            return Some(out);
        };
        // The reader's boundaries drift ("'ve moved over to CotEditor", "language: Pascal"):
        // when its likeliest span has no value's shape, the likeliest name inside it that
        // has one is read instead, held to the same thresholds. Not any span elsewhere (a
        // message without a value has its likeliest words anywhere), nor the whole name a
        // span was cut from ("Ironbark" of "Ironbark Robotics" read as a hobby: the cut
        // says the reader is reading another slot's name).
        let named = std::cell::OnceCell::new();
        let shaped = |i: usize, j: usize| {
            let b = bytes(i, j);
            text.get(b.clone()).map(value_words).is_some_and(|v| {
                looks_like_a_value(v)
                    && written_as_its_kind(text, slot, v, |v| among(named.get_or_init(|| mneme_truth::named_values(text, slot)), v))
                    && !cut_from_a_name(text, b)
            })
        };
        let span = if shaped(span.start, span.end) {
            span
        } else {
            let first = span.start..=span.end;
            // A name: capitalised where a sentence does not start ("Outside of work? fly
            // fishing" holds no name "Outside of work").
            let name = |i: usize, j: usize| {
                let b = bytes(i, j);
                !opens_a_sentence(text, b.start) && text.get(b).map(value_words).is_some_and(|v| v.starts_with(char::is_uppercase))
            };
            let inside = |i: usize, j: usize| first.contains(&i) && first.contains(&j);
            // One name only: "Exoscale because UpCloud" holds two, and which is the value
            // is what the reader could not say.
            let names = text.get(bytes(span.start, span.end)).map_or(0, |t| {
                let capital = |w: &str| w.trim_start_matches(|c: char| !c.is_alphanumeric()).starts_with(char::is_uppercase);
                let words: Vec<&str> = t.split_whitespace().collect();
                // A run of capitalised words is one name; punctuation ends it ("Trieste; Granada").
                let joined = |k: usize| k > 0 && capital(words[k - 1]) && !words[k - 1].ends_with(|c: char| c.is_ascii_punctuation());
                (0..words.len()).filter(|&k| capital(words[k]) && !joined(k)).count()
            });
            let found =
                (names == 1).then(|| reader.read_where(&tokens, index, |i, j| apart(i, j) && inside(i, j) && name(i, j) && shaped(i, j)));
            // A second choice must stand clear of "no value" ("Learning curve on Dart is
            // steep", read as a hobby: "Dart" at 0.84 against no value).
            found.flatten().filter(|f| f.p >= NAME_INSIDE_SHARE * (f.p + f.p_none)).unwrap_or(span)
        };
        (out.span_p, out.none_p) = (span.p, span.p_none);
        let span_bytes = states.offsets[span.start].0..states.offsets[span.end].1;
        let value = value_words(text.get(span_bytes.clone())?);
        out.value = Some(value.to_string());
        out.verdict = if span.p < min * (span.p + span.p_none) {
            "span: below read_min_p against no value"
        } else if !replaced && span.p < PAST_HELD_SHARE * out.restated_p {
            "span: below the held value's share"
        } else if !looks_like_a_value(value) {
            "value: does not look like one"
        } else if !written_as_its_kind(text, slot, value, |v| among(&mneme_truth::named_values(text, slot), v)) {
            "value: a name not capitalised"
        } else if cut_from_a_name(text, span_bytes.clone()) {
            "value: part of a longer name"
        } else {
            out.accepted = true;
            "accepted"
        };
        // A value that does not look like the topic's slot's kind may be another slot's the
        // message is about too: "Switched to fruitarian this week" reads as hobbies (0.58)
        // and as diet (0.39), and "fruitarian" is a diet's kind. The slot with the most of
        // both (topic probability times the value's share on the slot's kind) is read. Not
        // when the slot is the one whose value the message replaces: that is structure.
        let mut span_bytes = span_bytes;
        if out.accepted && old_p.is_none() {
            let fit = self.value_fit(slot, value).unwrap_or(1.0);
            let p = layer.probabilities(&states.sentence);
            let topic_p = |s: &str| layer.classes.iter().position(|c| c == s).and_then(|i| p.get(i)).copied().unwrap_or(0.0);
            if fit < SURE_FIT && topic_p(mneme_truth::topics::NONE) < 0.5 {
                let mut best = (REFILE_MARGIN * topic_p(slot) * fit, slot, span_bytes.clone());
                for d in mneme_truth::SLOTS.iter().filter(|d| d.id != slot && topic_p(d.id) >= REFILE_TOPIC_MIN) {
                    let Some(index) = reader.slot_index(d.id) else { continue };
                    let held = mentioned(d.id);
                    let Some(span) = reader.read_where(&tokens, index, |i, j| apart_from(&held, i, j)) else { continue };
                    let bytes = states.offsets[span.start].0..states.offsets[span.end].1;
                    let Some(v) = text.get(bytes.clone()).map(value_words) else { continue };
                    let readable = span.p >= min * (span.p + span.p_none)
                        && looks_like_a_value(v)
                        && written_as_its_kind(text, d.id, v, |v| among(&mneme_truth::named_values(text, d.id), v))
                        && !cut_from_a_name(text, bytes.clone());
                    let kind = self.value_fit(d.id, v).unwrap_or(0.0);
                    if readable && kind >= REFILE_KIND_MIN && topic_p(d.id) * kind > best.0 {
                        best = (topic_p(d.id) * kind, d.id, bytes);
                    }
                }
                if best.1 != slot {
                    (out.slot, span_bytes) = (Some(best.1), best.2);
                }
            }
        }
        if out.accepted {
            let slot = out.slot.unwrap_or(slot);
            let list = self.widen_to_list(text, slot, span_bytes.clone());
            out.value = text.get(list).map(|v| value_words(v).to_string());
        }
        Some(out)
    }

    /// For a multi-valued slot, a value read widened to the list it stands in ("Malay,
    /// Punjabi and Tamil" around "Punjabi", "Iodine, pistachios and sunflower seeds"):
    /// each neighbour joined by a comma, "and", "und" or "&" whose words look like a value,
    /// are written as the slot's kind and fit it by the value-kind layer (at least
    /// [`LIST_FIT_MIN`]; of the one to four words next to the join, the best fitting),
    /// when an "and" closes the list. The span reader reads one item (its annotators took a list's first); the list is
    /// structure. Unchanged for a single-valued slot or without the layer.
    fn widen_to_list(&self, text: &str, slot: &str, range: std::ops::Range<usize>) -> std::ops::Range<usize> {
        if mneme_truth::slot(slot).is_none_or(|d| d.kind != mneme_truth::lexicon::SlotKind::Multi) {
            return range;
        }
        let Some(layer) = self.semantic.get().and_then(|s| mneme_truth::topics::TopicModel::values(s.embedder.model_id())) else {
            return range;
        };
        let clause_end = |c: char| matches!(c, ',' | ';' | ':' | '.' | '!' | '?' | '(' | ')' | '"');
        // The best fitting of the candidate items, if one fits.
        let best = |candidates: Vec<std::ops::Range<usize>>| -> Option<std::ops::Range<usize>> {
            let candidates: Vec<std::ops::Range<usize>> = candidates
                .into_iter()
                .filter(|r| looks_like_a_value(&text[r.clone()]) && written_as_its_kind(text, slot, &text[r.clone()], |_| false))
                .collect();
            let words: Vec<&str> = candidates.iter().map(|r| &text[r.clone()]).collect();
            let vectors = self.text_vectors(&words)?;
            candidates
                .into_iter()
                .zip(vectors.iter().map(|v| kin_share(layer, &layer.probabilities(v), slot)))
                .filter(|(_, fit)| *fit >= LIST_FIT_MIN)
                .max_by(|a, b| a.1.total_cmp(&b.1))
                .map(|(r, _)| r)
        };
        let (mut start, mut end) = (range.start, range.end);
        // A list closes with its "and": past it a bare comma starts something else
        // ("amoxicillin and cashews, allergies"). Leftwards first, so the right side knows.
        let closes = |join: &str| join != ", ";
        let mut closed = list_run_words(text, start..end).iter().any(|w| ["and", "und", "&"].contains(&&text[w.clone()]));
        while let Some(join) = LIST_JOINS.iter().find(|j| text[..start].ends_with(**j)) {
            let to = start - join.len();
            let from = text[..to].rfind(clause_end).map_or(0, |i| i + 1);
            let words = list_run_words(text, from..to);
            let n = words.len();
            let Some(item) = best((1..=n.min(4)).map(|k| words[n - k].start..words[n - 1].end).collect()) else { break };
            closed |= closes(join);
            start = item.start;
        }
        while let Some(join) = LIST_JOINS.iter().find(|j| text[end..].starts_with(**j) && (!closed || closes(j))) {
            let from = end + join.len();
            let to = text[from..].find(clause_end).map_or(text.len(), |i| from + i);
            let words = list_run_words(text, from..to);
            let Some(item) = best((1..=words.len().min(4)).map(|k| words[0].start..words[k - 1].end).collect()) else { break };
            closed |= closes(join);
            end = item.end;
        }
        // Items joined by commas alone are no list but a label or an aside ("Cant have
        // cinnamon, allergies"): a list is closed by its "and".
        if !closed {
            return range;
        }
        start..end
    }

    /// Where a fact of `slot` with `value`, read from `clause`, belongs by the value-kind
    /// layer (`TopicModel::values`) and the clause's topic (the topic layer), weighed
    /// together:
    /// - `slot` when each value of a list ("hazelnuts, sesame") has at least
    ///   `SURE_FIT` (0.3) of its probability on the slots of `slot`'s kind
    ///   (`mneme_truth::value_kin`);
    /// - otherwise the slot with the most of both, the clause's topic probability times
    ///   the value's share on the slot's kind, when the topic gives it at least
    ///   `REFILE_TOPIC_MIN` (0.2) (and `none` less than half), the value at least
    ///   `REFILE_KIND_MIN` (0.35), and the product is `REFILE_MARGIN` (2) times the own
    ///   slot's: "Switched to fruitarian this week" reads as hobbies by its topic (0.58)
    ///   and as diet (0.39), and
    ///   "fruitarian" is a diet's kind, not a hobby's; "gave Lapce a try last month and
    ///   never went back" reads as diet (0.59) and as editor (0.26), and "Lapce" is an
    ///   editor's kind;
    /// - otherwise `slot` while the value has at least `retrieval.value_min_p` on its kind;
    /// - otherwise `None`: not a value of any slot the clause is about.
    ///
    /// Without a `clause` (the caller knows the slot otherwise: the value replaces one held
    /// there, "*Beckett, not Zoltan"), no other slot is weighed. `slot` unchanged when
    /// there is no model or layer, or the floor is 0: nothing is refused without the
    /// reading.
    pub fn value_slot(&self, slot: &'static str, value: &str, clause: Option<&str>) -> Option<&'static str> {
        let floor = self.config.retrieval.value_min_p as f32;
        if floor <= 0.0 {
            return Some(slot);
        }
        // The slot's own noun is no value of it ("Ich nutze jetzt Atom als Editor").
        let named_by = |slot: &str| mneme_truth::slot(slot).is_some_and(|d| d.nouns.contains(&value.trim().to_lowercase().as_str()));
        if named_by(slot) {
            return None;
        }
        let Some((layer, probs)) = self.value_kinds(value) else { return Some(slot) };
        let fits = |slot: &str| probs.iter().filter(|p| !p.is_empty()).map(|p| kin_share(layer, p, slot)).min_by(f32::total_cmp);
        let fit = fits(slot).unwrap_or(1.0);
        if fit >= SURE_FIT {
            return Some(slot);
        }
        let kept = (fit >= floor).then_some(slot);
        let Some(topics) = self.topic_layer() else { return kept };
        let Some(vector) = clause.and_then(|c| self.text_query_vector(c)) else { return kept };
        let p = topics.probabilities(&vector);
        let topic_p = |s: &str| topics.classes.iter().position(|c| c == s).and_then(|i| p.get(i)).copied().unwrap_or(0.0);
        // A clause the topic layer finds about no slot ("My twin is teaching the kids
        // Yoruba") gives no other slot either.
        if topic_p(mneme_truth::topics::NONE) >= 0.5 {
            return kept;
        }
        let own = topic_p(slot) * fit;
        let best = mneme_truth::SLOTS
            .iter()
            .map(|d| (d.id, topic_p(d.id), fits(d.id).unwrap_or(0.0)))
            .filter(|(id, tp, kp)| *tp >= REFILE_TOPIC_MIN && *kp >= REFILE_KIND_MIN && !named_by(id))
            .max_by(|a, b| (a.1 * a.2).total_cmp(&(b.1 * b.2)));
        match best {
            Some((id, tp, kp)) if id != slot && tp * kp > REFILE_MARGIN * own => Some(id),
            _ => kept,
        }
    }

    /// The topic layer's classes for `text` and the value-kind layer's for `value`, each
    /// with its probability, likeliest first (what `mneme-bench extract --read` prints
    /// beside a reading). `None` without the model or the layers.
    pub fn explain_kinds(&self, text: &str, value: Option<&str>) -> Option<(Ranked, Ranked)> {
        let ranked = |layer: &mneme_truth::topics::TopicModel, p: Vec<f32>| {
            let mut r: Vec<(String, f32)> = layer.classes.iter().cloned().zip(p).collect();
            r.sort_by(|a, b| b.1.total_cmp(&a.1));
            r.truncate(6);
            r
        };
        let topics = self.topic_layer()?;
        let topic = ranked(topics, topics.probabilities(&self.text_query_vector(text)?));
        let kinds = match value {
            Some(v) => {
                let layer = self.semantic.get().and_then(|s| mneme_truth::topics::TopicModel::values(s.embedder.model_id()))?;
                ranked(layer, layer.probabilities(&self.text_vectors(&[v])?.pop()?))
            }
            None => Vec::new(),
        };
        Some((topic, kinds))
    }

    /// How well `value` fits `slot` by the value-kind layer: the least share, over the
    /// items of a list ("hazelnuts, sesame"), of the probability on the slots of `slot`'s
    /// kind (`mneme_truth::value_kin`). `None` without the model or the layer.
    pub fn value_fit(&self, slot: &str, value: &str) -> Option<f32> {
        let (layer, probs) = self.value_kinds(value)?;
        probs.iter().filter(|p| !p.is_empty()).map(|p| kin_share(layer, p, slot)).min_by(f32::total_cmp)
    }

    /// How alike two values are in kind by the value-kind layer: the overlap of their
    /// probabilities over its classes (1 for the same distribution, 0 for disjoint ones).
    /// `None` without the model or the layer.
    pub(crate) fn kind_overlap(&self, a: &str, b: &str) -> Option<f32> {
        let layer = self.semantic.get().and_then(|s| mneme_truth::topics::TopicModel::values(s.embedder.model_id()))?;
        let v = self.text_vectors(&[a, b])?;
        let (pa, pb) = (layer.probabilities(&v[0]), layer.probabilities(&v[1]));
        Some(pa.iter().zip(&pb).map(|(x, y)| x.min(*y)).sum())
    }

    /// The value-kind layer and its probabilities for each item of `value`.
    fn value_kinds(&self, value: &str) -> Option<(&'static mneme_truth::topics::TopicModel, Vec<Vec<f32>>)> {
        let layer = self.semantic.get().and_then(|s| mneme_truth::topics::TopicModel::values(s.embedder.model_id()))?;
        let parts: Vec<&str> = mneme_truth::list_items(value);
        let vectors = self.text_vectors(&parts)?;
        Some((layer, vectors.iter().map(|v| layer.probabilities(v)).collect()))
    }

    /// The topic layer trained on the attached encoder (`mneme_truth::topics`), if any.
    pub(crate) fn topic_layer(&self) -> Option<&'static mneme_truth::topics::TopicModel> {
        self.semantic.get().and_then(|s| mneme_truth::topics::TopicModel::builtin(s.embedder.model_id()))
    }

    /// The slot each of `seqs` is about by the topic layer, with its probability (`None`
    /// where a record has no vector or there is no layer; a `None` slot is the `none`
    /// class). From the index's quantised vectors: each class's logit is its weight
    /// vector's norm times its cosine to the record, plus its bias.
    pub(crate) fn topics_of(&self, seqs: &[i64]) -> Vec<Option<(Option<&'static str>, f32)>> {
        self.classes_of(self.topic_layer(), seqs)
    }

    /// The slot whose value each of `seqs` silently rests on, by the second layer
    /// (`TopicModel::resting`), as `topics_of` reads the topic layer.
    pub(crate) fn resting_of(&self, seqs: &[i64]) -> Vec<Option<(Option<&'static str>, f32)>> {
        let layer = self.semantic.get().and_then(|s| mneme_truth::topics::TopicModel::resting(s.embedder.model_id()));
        self.classes_of(layer, seqs)
    }

    fn classes_of(
        &self,
        layer: Option<&'static mneme_truth::topics::TopicModel>,
        seqs: &[i64],
    ) -> Vec<Option<(Option<&'static str>, f32)>> {
        let (Some(s), Some(layer)) = (self.semantic.get(), layer) else { return vec![None; seqs.len()] };
        let index = s.index.read().unwrap_or_else(|p| p.into_inner());
        if !layer.is_linear() {
            // A hidden layer reads the vector itself, not cosines to the class directions.
            let id = std::ptr::from_ref(layer) as usize;
            let mut memo = s.readings.lock().unwrap_or_else(|p| p.into_inner());
            if memo.entries.len() > READINGS {
                memo.entries.clear();
            }
            return seqs
                .iter()
                .map(|&seq| {
                    let scale = index.scale(seq)?;
                    let key = (id, seq);
                    if let Some((_, reading)) = memo.entries.get(&key).filter(|(bits, _)| *bits == scale.to_bits()) {
                        return *reading;
                    }
                    let reading = index.vector(seq).and_then(|v| layer.classify(&v)).map(|t| (t.slot, t.p));
                    memo.entries.insert(key, (scale.to_bits(), reading));
                    reading
                })
                .collect();
        }
        let mut logits: Vec<Option<Vec<f32>>> = vec![Some(Vec::with_capacity(layer.classes.len())); seqs.len()];
        for (i, b) in layer.bias.iter().enumerate() {
            let (unit, norm) = layer.direction(i);
            for (l, cos) in logits.iter_mut().zip(index.similarities_to(&unit, seqs)) {
                match (l.as_mut(), cos) {
                    (Some(l), Some(cos)) => l.push(norm * cos + b),
                    _ => *l = None,
                }
            }
        }
        logits.into_iter().map(|l| l.and_then(|l| layer.topic_of_logits(&l)).map(|t| (t.slot, t.p))).collect()
    }

    /// Cosine between two indexed records (for MMR), if both have vectors.
    pub(crate) fn similarity(&self, a: i64, b: i64) -> Option<f32> {
        self.semantic.get().and_then(|s| s.index.read().unwrap_or_else(|p| p.into_inner()).similarity(a, b))
    }

    pub fn embedding_status(&self) -> ServiceResult<Option<EmbeddingStatus>> {
        let Some(s) = self.semantic.get() else { return Ok(None) };
        let model = s.embedder.model_id().to_string();
        let (embedded, pending) = self.reader()?.read(|tx| tx.vector_coverage(&model))?;
        let index = s.index.read().unwrap_or_else(|p| p.into_inner());
        Ok(Some(EmbeddingStatus {
            model,
            dimension: index.dim(),
            embedded,
            pending,
            indexed: index.len(),
            index_bytes: index.memory_bytes(),
            search: if self.postgres.is_some() {
                "pgvector"
            } else if index.len() <= index.params().exact_below {
                "exact"
            } else {
                "approximate"
            },
        }))
    }
}

/// How a pipeline started without a model gets one: every `every`, `attach` is called
/// with the service; it looks for the model (a cheap check first: the daemon compares a
/// file's modification time), calls [`MemoryService::enable_embeddings`] when it finds
/// one, logs what happened, and says whether a model is attached now.
pub struct ModelWatch {
    pub every: Duration,
    pub attach: Box<dyn FnMut(&MemoryService) -> bool + Send>,
}

impl std::fmt::Debug for ModelWatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModelWatch").field("every", &self.every).finish_non_exhaustive()
    }
}

/// Sleeps for `total` in short steps, returning early once `stop` is set.
fn sleep_unless(stop: &AtomicBool, total: Duration) {
    let until = Instant::now() + total;
    while !stop.load(Ordering::Relaxed) {
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return;
        }
        std::thread::sleep(left.min(Duration::from_millis(100)));
    }
}

/// Stops the background embedder when dropped (or explicitly, with [`EmbedderHandle::stop`]).
#[derive(Debug)]
pub struct EmbedderHandle {
    stop: Arc<AtomicBool>,
    service: Arc<MemoryService>,
    thread: Option<std::thread::JoinHandle<()>>,
    /// Finished passes over the queue, for callers that wait for the worker (tests)
    /// instead of sleeping.
    passes: Arc<(std::sync::Mutex<u64>, std::sync::Condvar)>,
}

impl EmbedderHandle {
    /// Passes over the queue the worker has finished.
    pub fn passes(&self) -> u64 {
        *self.passes.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Waits until the worker has finished more than `seen` passes, or `timeout` passes;
    /// returns the count then.
    pub fn wait_past(&self, seen: u64, timeout: Duration) -> u64 {
        let (count, changed) = &*self.passes;
        let guard = count.lock().unwrap_or_else(|p| p.into_inner());
        let (guard, _) = changed.wait_timeout_while(guard, timeout, |n| *n <= seen).unwrap_or_else(|p| p.into_inner());
        *guard
    }

    /// Signals the worker and waits for the batch in flight to finish.
    pub fn stop(mut self) {
        self.halt();
    }

    fn halt(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        self.service.wake_embedder();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for EmbedderHandle {
    fn drop(&mut self) {
        self.halt();
    }
}
