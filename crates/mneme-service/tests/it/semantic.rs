//! The embedding pipeline, the vector index and hybrid fusion, with a small deterministic
//! embedder (concept buckets with synonyms), so a dense match is one lexical search
//! cannot make. The real model is tested against reference vectors in mneme-embed.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use mneme_embed::{EmbedError, EmbedResult, Embedder};
use mneme_service::vectors::{VectorIndex, synthetic};
use mneme_service::{IndexParams, MemoryService, RetrieveRequest, ServiceConfig, ServiceError};
use mneme_store::StoreOptions;

use crate::{Fixture, owner};

const DIM: usize = 32;

/// Words map to concept dimensions; synonyms share one. Unknown words hash to a dimension.
#[derive(Debug)]
struct Concepts {
    model: &'static str,
    /// Fails every call after this many successful ones (`usize::MAX`: never).
    fail_after: usize,
    calls: AtomicUsize,
}

impl Concepts {
    fn new(model: &'static str) -> Self {
        Concepts { model, fail_after: usize::MAX, calls: AtomicUsize::new(0) }
    }

    fn failing_after(model: &'static str, calls: usize) -> Self {
        Concepts { model, fail_after: calls, calls: AtomicUsize::new(0) }
    }
}

fn concept(word: &str) -> usize {
    match word {
        "car" | "automobile" | "vehicle" | "sedan" => 0,
        "dog" | "puppy" | "canine" => 1,
        "guitar" | "music" | "concert" => 2,
        "paris" | "france" => 3,
        w => 4 + w.bytes().fold(7usize, |h, b| h.wrapping_mul(31).wrapping_add(b as usize)) % (DIM - 4),
    }
}

impl Embedder for Concepts {
    fn model_id(&self) -> &str {
        self.model
    }

    fn dimension(&self) -> usize {
        DIM
    }

    fn embed(&self, texts: &[&str]) -> EmbedResult<Vec<Vec<f32>>> {
        if self.calls.fetch_add(1, Ordering::SeqCst) >= self.fail_after {
            return Err(EmbedError::Provider { endpoint: "test".into(), problem: "scripted failure".into() });
        }
        Ok(texts
            .iter()
            .map(|t| {
                let mut v = [0.0f32; DIM];
                for w in t.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()) {
                    v[concept(&w.to_lowercase())] += 1.0;
                }
                let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-9);
                v.iter().map(|x| x / norm).collect()
            })
            .collect())
    }
}

fn open(fx: &Fixture, config: ServiceConfig, embedder: Concepts) -> MemoryService {
    open_with(fx, config, Arc::new(embedder))
}

fn open_with(fx: &Fixture, config: ServiceConfig, embedder: Arc<dyn Embedder>) -> MemoryService {
    let local = fx._dir.path().join("mneme.db");
    let service = match &fx.database {
        None => {
            let options = StoreOptions { path: local, key: None, create: false, decay: Default::default() };
            MemoryService::open(options, config, fx.clock.clone()).expect("reopen")
        }
        Some(url) => {
            MemoryService::open_postgres(mneme_store::PgOptions::new(url.clone()), local, config, fx.clock.clone()).expect("reopen")
        }
    };
    service.enable_embeddings(embedder, IndexParams::default()).expect("enable embeddings");
    service
}

fn texts(service: &MemoryService, query: &str) -> Vec<String> {
    let request = RetrieveRequest { query: query.into(), limit: 5, ..Default::default() };
    service.retrieve(&request, &owner()).expect("retrieve").into_iter().map(|h| h.record.summary).collect()
}

fn a_synonym_is_found_by_embedding_once_the_record_has_its_vector() {
    let fx = Fixture::new();
    fx.event("my sedan is red");
    fx.event("lunch was pasta today");
    let service = open(&fx, ServiceConfig::default(), Concepts::new("concepts-v1"));
    // Ingest did not wait for the model: nothing has a vector yet, so no dense match.
    assert!(texts(&service, "automobile").is_empty(), "no vectors yet, no lexical match");
    let done = service.embed_pending(16, false, &mut |_| {}).expect("embed");
    assert_eq!(done, 2);
    let hits =
        service.retrieve(&RetrieveRequest { query: "automobile".into(), limit: 5, ..Default::default() }, &owner()).expect("retrieve");
    assert_eq!(hits[0].record.summary, "howard: my sedan is red");
    let parts = hits[0].score;
    assert_eq!(parts.bm25, None, "not a lexical match");
    assert!(parts.cosine.expect("a dense candidate") > 0.4, "{parts:?}");
    assert_eq!(parts.dense, Some(1.0));
}

fn the_dense_share_comes_from_the_configuration() {
    let fx = Fixture::new();
    // The word "concert" matches the first lexically; the second is closer in meaning
    // (two music words) but has no word in common with the query.
    fx.event("concert tickets cost 90 euros at the box office downtown");
    fx.event("guitar music");
    let ranked = |share: f64| {
        let mut config = ServiceConfig::default();
        config.retrieval.dense_share = share;
        let service = open(&fx, config, Concepts::new("concepts-v1"));
        service.embed_pending(16, false, &mut |_| {}).expect("embed");
        texts(&service, "concert")
    };
    assert_eq!(ranked(0.0)[0], "howard: concert tickets cost 90 euros at the box office downtown");
    assert_eq!(ranked(1.0)[0], "howard: guitar music");
}

fn a_failed_embedding_run_keeps_what_it_committed_and_the_rest_is_found_again() {
    let fx = Fixture::new();
    for i in 0..10 {
        fx.event(&format!("note number {i} about the dog"));
    }
    // Two batches of 3 succeed, then the model fails: 6 vectors are committed.
    let service = open(&fx, ServiceConfig::default(), Concepts::failing_after("concepts-v1", 2));
    let err = service.embed_pending(3, false, &mut |_| {}).expect_err("scripted failure");
    assert!(matches!(err, ServiceError::Embedding(_)), "{err}");
    assert_eq!(service.embedding_status().expect("status").expect("enabled").embedded, 6);
    drop(service);
    // A restart (new service on the same file) finds exactly the 4 that are missing.
    let service = open(&fx, ServiceConfig::default(), Concepts::new("concepts-v1"));
    let status = service.embedding_status().expect("status").expect("enabled");
    assert_eq!((status.embedded, status.pending, status.indexed), (6, 4, 6));
    let mut reports = Vec::new();
    assert_eq!(service.embed_pending(3, false, &mut |p| reports.push(p.done)).expect("embed"), 4);
    assert_eq!(reports, vec![3, 4]);
    let status = service.embedding_status().expect("status").expect("enabled");
    assert_eq!((status.embedded, status.pending, status.indexed), (10, 0, 10));
}

fn a_new_model_re_embeds_everything_and_force_re_embeds_the_current_one() {
    let fx = Fixture::new();
    fx.event("the puppy chewed a shoe");
    fx.event("paris in the spring");
    let v1 = open(&fx, ServiceConfig::default(), Concepts::new("concepts-v1"));
    assert_eq!(v1.embed_pending(8, false, &mut |_| {}).expect("embed"), 2);
    assert_eq!(v1.embed_pending(8, false, &mut |_| {}).expect("nothing left"), 0);
    assert_eq!(v1.embed_pending(8, true, &mut |_| {}).expect("force"), 2);
    drop(v1);
    let v2 = open(&fx, ServiceConfig::default(), Concepts::new("concepts-v2"));
    assert_eq!(v2.embedding_status().expect("status").expect("enabled").pending, 2);
    assert_eq!(v2.embed_pending(8, false, &mut |_| {}).expect("embed"), 2);
    assert_eq!(texts(&v2, "canine")[0], "howard: the puppy chewed a shoe");
}

fn the_background_embedder_catches_up_with_new_records() {
    let fx = Fixture::new();
    let service = Arc::new(open(&fx, ServiceConfig::default(), Concepts::new("concepts-v1")));
    let errors = Arc::new(AtomicUsize::new(0));
    let seen = errors.clone();
    let handle = service
        .spawn_embedder(4, Duration::from_millis(50), None, move |_| {
            seen.fetch_add(1, Ordering::SeqCst);
        })
        .expect("worker started");
    for i in 0..9 {
        service.ingest_event(crate::event(&format!("france trip day {i}")), Default::default()).expect("ingest");
    }
    // Pass by pass of the worker (woken by each ingest), never sleeping.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let seen = handle.passes();
        if service.embedding_status().expect("status").expect("enabled").pending == 0 {
            break;
        }
        assert!(Instant::now() < deadline, "the worker did not catch up");
        handle.wait_past(seen, deadline.saturating_duration_since(Instant::now()));
    }
    handle.stop();
    assert_eq!(errors.load(Ordering::SeqCst), 0);
    assert_eq!(service.embedding_status().expect("status").expect("enabled").indexed, 9);
}

fn mmr_pushes_a_near_duplicate_below_a_different_hit() {
    let fx = Fixture::new();
    fx.event("dog dog walk");
    fx.event("dog dog walk again");
    fx.event("dog paris");
    let top = |lambda: f64| {
        let mut config = ServiceConfig::default();
        config.retrieval.mmr_lambda = lambda;
        let service = open(&fx, config, Concepts::new("concepts-v1"));
        service.embed_pending(16, false, &mut |_| {}).expect("embed");
        texts(&service, "dog walk")
    };
    let plain = top(1.0);
    assert!(plain[0].contains("dog dog walk") && plain[1].contains("dog dog walk"), "{plain:?}");
    let diverse = top(0.3);
    assert_eq!(diverse[1], "howard: dog paris", "{diverse:?}");
}

fn min_score_drops_weak_hits() {
    let fx = Fixture::new();
    fx.event("dog walk in the park");
    fx.event("a dog");
    let mut config = ServiceConfig::default();
    config.retrieval.min_score = 0.7;
    let service = open(&fx, config, Concepts::new("concepts-v1"));
    service.embed_pending(16, false, &mut |_| {}).expect("embed");
    let all = texts(&open(&fx, ServiceConfig::default(), Concepts::new("concepts-v1")), "dog walk park");
    let kept = texts(&service, "dog walk park");
    assert_eq!(all.len(), 2);
    assert_eq!(kept, vec!["howard: dog walk in the park".to_string()]);
}

/// Recall@10 of `search_approximate` against exact f32 search.
fn approximate_recall(index: &VectorIndex, data: &[Vec<f32>], queries: &[Vec<f32>]) -> f64 {
    let mut found = 0usize;
    for q in queries {
        // Exact truth in f32, not on the quantised codes.
        let mut truth: Vec<(f32, i64)> =
            data.iter().enumerate().map(|(i, v)| (v.iter().zip(q).map(|(a, b)| a * b).sum::<f32>(), i as i64)).collect();
        truth.sort_by(|a, b| b.0.total_cmp(&a.0));
        let want: Vec<i64> = truth.iter().take(10).map(|t| t.1).collect();
        let got: Vec<i64> = index.search_approximate(q, 10).into_iter().map(|h| h.0).collect();
        found += got.iter().filter(|s| want.contains(s)).count();
        let exact: Vec<i64> = index.search_exact(q, 10).into_iter().map(|h| h.0).collect();
        assert!(exact.iter().filter(|s| want.contains(s)).count() >= 9, "int8 scoring loses neighbours");
    }
    found as f64 / (10 * queries.len()) as f64
}

fn the_approximate_index_finds_what_exact_search_finds() {
    let (n, dim) = (20_000, 384);
    let data = synthetic(n, dim, 7);
    let mut index = VectorIndex::new(dim, IndexParams { exact_below: 0, coarse: 4_000, rerank: 500, lists: 0, nprobe: 24 });
    for (i, v) in data.iter().enumerate() {
        let (scale, codes) = mneme_store::quantize(v);
        assert!(index.insert(i as i64, scale, &codes));
    }
    let queries = synthetic(50, dim, 99);
    // Deterministic data: the sign-sketch path measures 0.90 here (BENCHMARKS.md has the
    // figures at 1M); the floor catches a broken stage, not noise.
    let recall = approximate_recall(&index, &data, &queries);
    assert!(recall >= 0.88, "sign sketches: recall@10 {recall}");
    // The inverted-file partition, probing 24 of 144 lists: measures 0.84 (at 1M the
    // default 128 of 1,024 lists measure 0.96).
    assert!(index.build_partition());
    let recall = approximate_recall(&index, &data, &queries);
    assert!(recall >= 0.8, "inverted file: recall@10 {recall}");
    // Entries added after training are filed and found.
    let (scale, codes) = mneme_store::quantize(&queries[1]);
    index.insert(n as i64, scale, &codes);
    assert_eq!(index.search_approximate(&queries[1], 1)[0].0, n as i64);
    // Replacing a vector moves the record (in the partition too).
    let (scale, codes) = mneme_store::quantize(&queries[0]);
    index.insert(5, scale, &codes);
    assert_eq!(index.search_exact(&queries[0], 1)[0].0, 5);
    // The partition's copy was replaced too: the old vector no longer finds record 5.
    let old = index.search_approximate(&data[5], 1)[0];
    assert!(old.0 != 5 || old.1 < 0.9, "stale codes in the partition: {old:?}");
    assert_eq!(index.len(), n + 1);
}

/// A forgotten record's vector goes too: from disk with the transaction, and from the
/// in-memory index (it is similar to nothing any more).
fn forgetting_destroys_the_vector_in_memory_too() {
    let fx = Fixture::new();
    let sedan = fx.event("my sedan is red");
    fx.event("lunch was pasta today");
    let service = open(&fx, ServiceConfig::default(), Concepts::new("concepts-v1"));
    service.embed_pending(16, false, &mut |_| {}).expect("embed");
    assert_eq!(texts(&service, "automobile")[0], "howard: my sedan is red");
    let request =
        mneme_service::ForgetRequest { ids: vec![sedan.id.clone()], reason: "asked".into(), actor: "test".into(), ..Default::default() };
    service.forget(&request, &owner()).expect("forget");
    let hits = service
        .retrieve(&RetrieveRequest { query: "automobile".into(), include_tombstones: true, limit: 5, ..Default::default() }, &owner())
        .expect("retrieve");
    assert!(hits.iter().all(|h| h.score.cosine.is_none_or(|c| c.abs() < 1e-6)), "{hits:?}");
}

/// A query asked again is not embedded again (its vector is cached by the text's hash), and
/// a forget empties that cache.
fn a_repeated_query_is_embedded_once_until_a_forget() {
    let fx = Fixture::new();
    fx.event("my sedan is red");
    let lunch = fx.event("lunch was pasta today");
    let model = Arc::new(Concepts::new("concepts-v1"));
    let service = open_with(&fx, ServiceConfig::default(), model.clone());
    service.embed_pending(16, false, &mut |_| {}).expect("embed");
    let before = model.calls.load(Ordering::SeqCst);
    assert_eq!(texts(&service, "automobile")[0], "howard: my sedan is red");
    assert_eq!(model.calls.load(Ordering::SeqCst), before + 1, "the first ask embeds the query");
    assert_eq!(texts(&service, "automobile")[0], "howard: my sedan is red", "the cached vector finds the same");
    assert_eq!(model.calls.load(Ordering::SeqCst), before + 1, "the second ask does not embed it again");
    texts(&service, "vehicle");
    assert_eq!(model.calls.load(Ordering::SeqCst), before + 2, "another query is embedded");
    let request =
        mneme_service::ForgetRequest { ids: vec![lunch.id.clone()], reason: "asked".into(), actor: "test".into(), ..Default::default() };
    service.forget(&request, &owner()).expect("forget");
    texts(&service, "automobile");
    assert_eq!(model.calls.load(Ordering::SeqCst), before + 3, "after a forget the query is embedded again");
}

/// The concept embedder with token states, as an embedder that runs its encoder itself
/// gives them: one state per word, and the sentence vector `embed` gives.
#[derive(Debug)]
struct WithStates {
    concepts: Concepts,
    passes: AtomicUsize,
}

impl Embedder for WithStates {
    fn model_id(&self) -> &str {
        self.concepts.model
    }

    fn dimension(&self) -> usize {
        DIM
    }

    fn embed(&self, texts: &[&str]) -> EmbedResult<Vec<Vec<f32>>> {
        self.concepts.embed(texts)
    }

    fn token_states(&self, text: &str) -> Option<EmbedResult<mneme_embed::TokenStates>> {
        self.passes.fetch_add(1, Ordering::SeqCst);
        let (mut words, mut start) = (Vec::new(), None);
        for (i, c) in text.char_indices().chain([(text.len(), ' ')]) {
            if c.is_alphanumeric() {
                start.get_or_insert(i);
            } else if let Some(s) = start.take() {
                words.push((s, &text[s..i]));
            }
        }
        let sentence = Concepts::new("states").embed(&[text]).ok()?.pop()?;
        Some(Ok(mneme_embed::TokenStates {
            tokens: words.iter().map(|(_, w)| w.to_string()).collect(),
            offsets: words.iter().map(|(i, w)| (*i, i + w.len())).collect(),
            word_starts: vec![true; words.len()],
            states: words.iter().map(|_| sentence.clone()).collect(),
            sentence,
        }))
    }
}

/// A query's one pass gives its token states too (kept for reading the same text, an
/// agent's turn asks with the user's message and then reads it for facts): asked with an
/// embedder that has them, recall runs that pass instead of a sentence-only one, finds
/// the same, and a repeated ask runs none.
fn a_querys_pass_gives_its_token_states_and_is_not_run_twice() {
    let fx = Fixture::new();
    fx.event("my sedan is red");
    fx.event("lunch was pasta today");
    let model = Arc::new(WithStates { concepts: Concepts::new("concepts-v1"), passes: AtomicUsize::new(0) });
    let service = open_with(&fx, ServiceConfig::default(), model.clone());
    service.embed_pending(16, false, &mut |_| {}).expect("embed");
    let sentences = model.concepts.calls.load(Ordering::SeqCst);
    assert_eq!(texts(&service, "automobile")[0], "howard: my sedan is red");
    assert_eq!(model.passes.load(Ordering::SeqCst), 1, "one pass with token states");
    assert_eq!(model.concepts.calls.load(Ordering::SeqCst), sentences, "and no sentence-only pass");
    assert_eq!(texts(&service, "automobile")[0], "howard: my sedan is red");
    assert_eq!(model.passes.load(Ordering::SeqCst), 1, "the repeated ask runs none");
}

/// The concept embedder widened to the dimension PostgreSQL's HNSW index covers (384).
#[derive(Debug)]
struct Wide(Concepts);

impl Embedder for Wide {
    fn model_id(&self) -> &str {
        self.0.model
    }

    fn dimension(&self) -> usize {
        mneme_store::PG_HNSW_DIM
    }

    fn embed(&self, texts: &[&str]) -> EmbedResult<Vec<Vec<f32>>> {
        let narrow = self.0.embed(texts)?;
        Ok(narrow.into_iter().map(|v| v.into_iter().chain(std::iter::repeat(0.0)).take(mneme_store::PG_HNSW_DIM).collect()).collect())
    }
}

/// Two services (two daemons) on one PostgreSQL database: one embeds, the other finds by
/// meaning through pgvector and takes the vectors into its own index; a forgotten record's
/// vector leaves both. The embedding backfill is one daemon's job at a time.
#[test]
fn daemons_on_one_database_see_every_vector_and_every_erasure() {
    crate::with_engine(crate::Engine::Postgres, || {
        let fx = Fixture::new();
        let sedan = fx.event("my sedan is red");
        fx.event("lunch was pasta today");
        let url = fx.database.clone().expect("a database");
        let embedder = || Arc::new(Wide(Concepts::new("concepts-wide")));
        let (a, b) = (open_without_model(&fx), open_without_model(&fx));
        a.enable_embeddings(embedder(), IndexParams::default()).expect("enable");
        b.enable_embeddings(embedder(), IndexParams::default()).expect("enable");
        assert!(a.holds_job("embedding").expect("lease"), "the first to ask holds the embedding job");
        assert!(!b.holds_job("embedding").expect("lease"), "and no other daemon does");
        assert_eq!(a.embed_pending(16, false, &mut |_| {}).expect("embed"), 2);
        // B embedded nothing, yet finds the synonym, and holds A's vectors afterwards.
        let hits = b.retrieve(&RetrieveRequest { query: "automobile".into(), limit: 5, ..Default::default() }, &owner()).expect("retrieve");
        assert_eq!(hits[0].record.summary, "howard: my sedan is red");
        assert!(hits[0].score.cosine.expect("a dense candidate") > 0.4, "{:?}", hits[0].score);
        assert_eq!(b.embedding_status().expect("status").expect("a model").indexed, 2);
        // The query shape is the one pgvector's HNSW index serves.
        let mut client = ::postgres::Client::connect(&url, ::postgres::NoTls).expect("connect");
        let query = format!("[{}]", vec!["0.05"; mneme_store::PG_HNSW_DIM].join(","));
        let plan: Vec<String> = client
            .simple_query(&format!(
                "SET enable_seqscan = off; EXPLAIN SELECT record_seq FROM record_vectors WHERE model = 'concepts-wide' AND dim = 384 \
                 AND embedding IS NOT NULL ORDER BY embedding::halfvec(384) <=> ('{query}'::text)::halfvec(384) LIMIT 5"
            ))
            .expect("explain")
            .into_iter()
            .filter_map(|m| match m {
                ::postgres::SimpleQueryMessage::Row(r) => r.get(0).map(str::to_string),
                _ => None,
            })
            .collect();
        assert!(plan.iter().any(|l| l.contains("record_vectors_hnsw")), "{plan:?}");
        // A forgets the sedan: B drops the vector from memory, and pgvector no longer has it.
        let request = mneme_service::ForgetRequest {
            ids: vec![sedan.id.clone()],
            reason: "asked".into(),
            actor: "test".into(),
            ..Default::default()
        };
        a.forget(&request, &owner()).expect("forget");
        let hits = b
            .retrieve(&RetrieveRequest { query: "automobile".into(), include_tombstones: true, limit: 5, ..Default::default() }, &owner())
            .expect("retrieve");
        assert!(hits.iter().all(|h| h.score.cosine.is_none_or(|c| c.abs() < 1e-6)), "{hits:?}");
        let left: i64 = client.query_one("SELECT count(*) FROM record_vectors", &[]).expect("count").get(0);
        assert_eq!(left, 1);
    });
}

fn open_without_model(fx: &Fixture) -> MemoryService {
    let url = fx.database.clone().expect("a database");
    let local = fx._dir.path().join("mneme.db");
    MemoryService::open_postgres(mneme_store::PgOptions::new(url), local, ServiceConfig::default(), fx.clock.clone()).expect("open")
}

crate::on_both_engines!(
    a_synonym_is_found_by_embedding_once_the_record_has_its_vector,
    the_dense_share_comes_from_the_configuration,
    a_failed_embedding_run_keeps_what_it_committed_and_the_rest_is_found_again,
    a_new_model_re_embeds_everything_and_force_re_embeds_the_current_one,
    the_background_embedder_catches_up_with_new_records,
    mmr_pushes_a_near_duplicate_below_a_different_hit,
    min_score_drops_weak_hits,
    the_approximate_index_finds_what_exact_search_finds,
    forgetting_destroys_the_vector_in_memory_too,
    a_repeated_query_is_embedded_once_until_a_forget,
    a_querys_pass_gives_its_token_states_and_is_not_run_twice,
);
