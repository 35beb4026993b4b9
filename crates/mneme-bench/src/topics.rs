//! `mneme-bench topics`: trains the topic layer (`mneme_truth::topics`) on a labelled set
//! embedded by the local encoder, and measures it on another. The labelled sets and the
//! script that builds them are in `bench/topics/`.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context, Result, bail};
use mneme_embed::{DEFAULT_MODEL, Embedder, MiniLm, verify_model_dir};
use mneme_truth::topics::{NONE, TopicModel, Training};
use serde::Deserialize;
use serde_json::json;

#[derive(Deserialize, Clone)]
struct Row {
    text: String,
    slot: Option<String>,
    #[serde(default)]
    kind: String,
    #[serde(default)]
    family: String,
}

/// Senders the stored form names when training (any names would do; several, so none is
/// learned). Session 35 tried thousands of combinations of 48 first names and 48 surnames
/// instead: the layer read 4–5 points more of the same turns alike after two unseen names
/// (`eval`'s `name_stable`), but the truth benchmark did not gain (BENCHMARKS.md), so the
/// compiled-in layer is still trained with these.
const SENDERS: &[&str] = &["Dana", "Ana Ribeiro", "Kwame Mensah", "Li Wei", "Sofia Rossi", "Jonas Berg", "Priya Nair", "Tom"];
/// The senders `eval` draws from, none of them in [`SENDERS`] or a truth family, so the
/// measure is of names the layer never saw.
const EVAL_FIRST: &[&str] =
    &["Aurora", "Bogdan", "Celeste", "Dembe", "Esperanza", "Fintan", "Gulnara", "Horatio", "Ikaika", "Jolanta", "Kwabena", "Ludmila"];
const EVAL_LAST: &[&str] =
    &["Abara", "Blomqvist", "Cervantes", "Dufresne", "Eklund", "Fitzgerald", "Grzybowski", "Hakimi", "Ivanescu", "Jaramillo"];

/// The name of the `n`th sender drawn from a pool: "First Last" mostly, a first name
/// alone, or a lower-case handle as chat tools give them.
fn sender(n: u64, (first, last): (&[&str], &[&str])) -> String {
    let n = n.wrapping_mul(0x9E37_79B9_7F4A_7C15).rotate_left(17);
    let (f, l) = (first[(n % first.len() as u64) as usize], last[((n >> 20) % last.len() as u64) as usize]);
    match (n >> 40) % 8 {
        0 => f.to_string(),
        1 => f.to_lowercase(),
        _ => format!("{f} {l}"),
    }
}

/// Who sends the turns of a stored form.
enum Senders {
    /// In turn, from [`SENDERS`].
    Training,
    /// Drawn from the eval pool by the row's place and a salt.
    Unseen(u64),
}

/// A turn as the store embeds it: an event's search text, its sender and its text
/// (`Payload::search_text`; the summary "Dana: …" is derived, not stored). Questions
/// (what a query is) stay raw.
fn stored(rows: &[Row], senders: Senders) -> Vec<Row> {
    rows.iter()
        .enumerate()
        .map(|(i, r)| {
            let mut r = r.clone();
            if r.kind != "question" {
                let name = match senders {
                    Senders::Training => SENDERS[i % SENDERS.len()].to_string(),
                    Senders::Unseen(salt) => sender(i as u64 * 7919 + salt, EVAL_NAMES),
                };
                r.text = format!("{name} {}", r.text);
            }
            r
        })
        .collect()
}

const EVAL_NAMES: (&[&str], &[&str]) = (EVAL_FIRST, EVAL_LAST);

fn rows(path: &Path) -> Result<Vec<Row>> {
    let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        let row: Row = serde_json::from_str(line).with_context(|| format!("{}:{}: not a labelled row", path.display(), i + 1))?;
        if let Some(s) = &row.slot
            && mneme_truth::slot(s).is_none()
        {
            bail!("{}:{}: unknown slot {s:?}", path.display(), i + 1);
        }
        out.push(row);
    }
    if out.is_empty() {
        bail!("{} has no labelled row", path.display());
    }
    Ok(out)
}

fn embed_all(model: &MiniLm, rows: &[Row]) -> Result<Vec<Vec<f32>>> {
    let mut out = Vec::with_capacity(rows.len());
    for (i, chunk) in rows.chunks(64).enumerate() {
        let texts: Vec<&str> = chunk.iter().map(|r| r.text.as_str()).collect();
        out.extend(model.embed(&texts)?);
        if i % 20 == 19 {
            eprintln!("embedded {} of {}", out.len(), rows.len());
        }
    }
    Ok(out)
}

/// Writes a trained layer as the JSON the runtime compiles in. Five significant digits are
/// plenty for the layer and keep the file reviewable.
pub(crate) fn write_layer(layer: &TopicModel, out: &Path) -> Result<()> {
    let mut file = json!({
        "model": layer.model,
        "dim": layer.dim,
        "classes": layer.classes,
        "bias": rounded(&layer.bias),
        "weights": rounded_rows(&layer.weights),
    });
    if let Some(h) = &layer.hidden {
        file["hidden"] = json!({ "weights": rounded_rows(&h.weights), "bias": rounded(&h.bias), "out": rounded_rows(&h.out) });
    }
    std::fs::write(out, format!("{file}\n")).with_context(|| format!("cannot write {}", out.display()))
}

/// Weights to five decimals, for the JSON files the runtime compiles in.
pub(crate) fn rounded(w: &[f32]) -> Vec<f64> {
    w.iter().map(|x| (f64::from(*x) * 1e5).round() / 1e5).collect()
}

pub(crate) fn rounded_rows(m: &[Vec<f32>]) -> Vec<Vec<f64>> {
    m.iter().map(|w| rounded(w)).collect()
}

pub(crate) fn load(dir: &Path) -> Result<MiniLm> {
    verify_model_dir(dir)?;
    Ok(MiniLm::load(dir, DEFAULT_MODEL)?)
}

pub fn train(dir: &Path, data: &Path, out: &Path, settings: Training, json: bool) -> Result<()> {
    let raw = rows(data)?;
    let model = load(dir)?;
    // Each turn twice: as written and as the store embeds it (with its sender).
    let rows: Vec<Row> = raw.iter().cloned().chain(stored(&raw, Senders::Training).into_iter().filter(|r| r.kind != "question")).collect();
    let vectors = embed_all(&model, &rows)?;
    let mut classes: Vec<String> = mneme_truth::SLOTS.iter().map(|s| s.id.to_string()).collect();
    classes.push(NONE.to_string());
    let examples: Vec<(Vec<f32>, usize)> = rows
        .iter()
        .zip(vectors)
        .map(|(r, v)| {
            let class = r.slot.as_deref().unwrap_or(NONE);
            (v, classes.iter().position(|c| c == class).expect("checked slot"))
        })
        .collect();
    let layer = TopicModel::train(model.model_id(), classes, &examples, settings);
    let accuracy = examples.iter().filter(|(v, y)| argmax(&layer.probabilities(v)) == *y).count() as f64 / examples.len() as f64;
    write_layer(&layer, out)?;
    if json {
        outln!("{}", json!({ "examples": examples.len(), "train_accuracy": accuracy, "out": out }));
    } else {
        outln!("trained on {} examples, training accuracy {:.1} %, wrote {}", examples.len(), accuracy * 100.0, out.display());
    }
    Ok(())
}

fn argmax(p: &[f32]) -> usize {
    p.iter().enumerate().max_by(|a, b| a.1.total_cmp(b.1)).map_or(0, |(i, _)| i)
}

#[derive(Default)]
struct Tally {
    rows: usize,
    exact: usize,
    /// Rows with a slot, rows answered with a slot, and rows answered with the right slot.
    labelled: usize,
    answered: usize,
    right: usize,
}

impl Tally {
    fn add(&mut self, truth: Option<&str>, answer: Option<&str>) {
        self.rows += 1;
        self.exact += usize::from(truth == answer);
        self.labelled += usize::from(truth.is_some());
        self.answered += usize::from(answer.is_some());
        self.right += usize::from(truth.is_some() && truth == answer);
    }

    fn figures(&self) -> serde_json::Value {
        let pct = |a: usize, b: usize| if b == 0 { 0.0 } else { (a as f64 * 1000.0 / b as f64).round() / 10.0 };
        json!({
            "rows": self.rows,
            "accuracy": pct(self.exact, self.rows),
            "precision": pct(self.right, self.answered),
            "recall": pct(self.right, self.labelled),
        })
    }
}

pub fn eval(dir: &Path, data: &Path, layer: Option<&Path>, threshold: f32, show_errors: usize, json: bool) -> Result<()> {
    let raw = rows(data)?;
    let rows = stored(&raw, Senders::Unseen(0));
    // The same turns after other senders: a reading that changes with the name alone is
    // the name's, not the words'.
    let renamed: Vec<Row> = stored(&raw, Senders::Unseen(1)).into_iter().filter(|r| r.kind != "question").collect();
    let model = load(dir)?;
    let owned;
    let layer = match layer {
        Some(path) => {
            let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
            owned = serde_json::from_str::<TopicModel>(&text).with_context(|| format!("{} is not a topic layer", path.display()))?;
            &owned
        }
        None => TopicModel::builtin(model.model_id()).context("the compiled-in topic layer was not trained on this encoder")?,
    };
    let vectors = embed_all(&model, &rows)?;
    let answer_of = |v: &[f32]| layer.classify(v).and_then(|t| t.slot.filter(|_| t.p >= threshold));
    let turns = rows.iter().zip(&vectors).filter(|(r, _)| r.kind != "question").map(|(_, v)| answer_of(v));
    let stable = turns.zip(embed_all(&model, &renamed)?).filter(|(a, v)| *a == answer_of(v)).count();
    let name_stable = if renamed.is_empty() { 100.0 } else { (stable as f64 * 1000.0 / renamed.len() as f64).round() / 10.0 };
    let mut by_family: BTreeMap<String, Tally> = BTreeMap::new();
    let mut all = Tally::default();
    let mut by_slot: BTreeMap<String, Tally> = BTreeMap::new();
    let mut shown = 0;
    for (r, v) in rows.iter().zip(&vectors) {
        let topic = layer.classify(v);
        let answer = topic.and_then(|t| t.slot.filter(|_| t.p >= threshold));
        if answer != r.slot.as_deref() && shown < show_errors {
            shown += 1;
            let (slot, p) = topic.map_or((None, 0.0), |t| (t.slot, t.p));
            eprintln!("[{}] want {:?}, got {:?} p={p:.2}: {}", r.family, r.slot, slot, r.text);
        }
        all.add(r.slot.as_deref(), answer);
        by_family.entry(r.family.clone()).or_default().add(r.slot.as_deref(), answer);
        for s in [r.slot.as_deref(), answer].into_iter().flatten() {
            // Per slot: precision and recall of that one slot against everything else.
            let t = by_slot.entry(s.to_string()).or_default();
            t.add(r.slot.as_deref().filter(|x| *x == s), answer.filter(|x| *x == s));
            if r.slot.as_deref() == answer {
                break;
            }
        }
    }
    let report = json!({
        "threshold": threshold,
        "all": all.figures(),
        "name_stable": name_stable,
        "families": by_family.iter().map(|(k, t)| (k.clone(), t.figures())).collect::<serde_json::Map<_, _>>(),
        "slots": by_slot.iter().map(|(k, t)| (k.clone(), t.figures())).collect::<serde_json::Map<_, _>>(),
    });
    if json {
        outln!("{report}");
    } else {
        outln!(
            "threshold {threshold}: precision and recall of slot answers (a `none` answer is no answer); turns as the store embeds them"
        );
        let line = |name: &str, f: &serde_json::Value| {
            format!(
                "{name:<18} rows {:>5}  accuracy {:>5}  precision {:>5}  recall {:>5}",
                f["rows"], f["accuracy"], f["precision"], f["recall"]
            )
        };
        outln!("{}", line("all", &report["all"]));
        outln!("the same reading after another sender's name: {name_stable} % of {} turns", renamed.len());
        for (k, f) in report["families"].as_object().into_iter().flatten() {
            outln!("{}", line(&format!("family {k}"), f));
        }
        for (k, f) in report["slots"].as_object().into_iter().flatten() {
            outln!("{}", line(&format!("slot {k}"), f));
        }
    }
    Ok(())
}
