//! `mneme-bench corrections`: trains the correction layer the heartbeat reads replies
//! with (`mneme_reflect::lessons::CorrectionLayer`) on a labelled set embedded by the
//! local encoder, and measures it, beside the word rule, on another. The sets are in
//! `bench/reflect/` (`train/corrections_train.jsonl` to train, `corrections.jsonl` held
//! out).

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use mneme_embed::Embedder;
use mneme_truth::topics::{TopicModel, Training};
use serde::Deserialize;
use serde_json::json;

#[derive(Deserialize)]
struct Row {
    text: String,
    correction: bool,
}

fn rows(paths: &[PathBuf]) -> Result<Vec<Row>> {
    let mut out = Vec::new();
    for path in paths {
        let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
        for (i, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
            out.push(serde_json::from_str(line).with_context(|| format!("{}:{}: not a labelled row", path.display(), i + 1))?);
        }
    }
    if out.is_empty() {
        bail!("no labelled row in {paths:?}");
    }
    Ok(out)
}

fn embed(model: &dyn Embedder, rows: &[Row]) -> Result<Vec<Vec<f32>>> {
    let mut out = Vec::with_capacity(rows.len());
    for chunk in rows.chunks(64) {
        let texts: Vec<&str> = chunk.iter().map(|r| r.text.as_str()).collect();
        out.extend(model.embed(&texts)?);
    }
    Ok(out)
}

pub fn train(dir: &Path, data: &[PathBuf], out: &Path, epochs: usize, l2: f32, json_out: bool) -> Result<()> {
    let rows = rows(data)?;
    let model = crate::topics::load(dir)?;
    let vectors = embed(&model, &rows)?;
    let classes = vec![mneme_reflect::lessons::CORRECTION.to_string(), mneme_truth::topics::NONE.to_string()];
    let examples: Vec<(Vec<f32>, usize)> = rows.iter().zip(vectors).map(|(r, v)| (v, usize::from(!r.correction))).collect();
    let layer = TopicModel::train(model.model_id(), classes, &examples, Training { epochs, l2, ..Training::default() });
    let right = examples.iter().filter(|(v, y)| usize::from(layer.probabilities(v)[0] < 0.5) == *y).count();
    crate::topics::write_layer(&layer, out)?;
    let accuracy = right as f64 / examples.len() as f64;
    if json_out {
        outln!("{}", json!({ "examples": examples.len(), "train_accuracy": accuracy, "out": out }));
    } else {
        outln!("trained on {} replies: training accuracy {:.1} %; wrote {}", examples.len(), 100.0 * accuracy, out.display());
    }
    Ok(())
}

#[derive(Default, serde::Serialize)]
struct Counts {
    tp: u32,
    fp: u32,
    fn_: u32,
    tn: u32,
}

impl Counts {
    fn add(&mut self, truth: bool, said: bool) {
        match (truth, said) {
            (true, true) => self.tp += 1,
            (false, true) => self.fp += 1,
            (true, false) => self.fn_ += 1,
            (false, false) => self.tn += 1,
        }
    }

    fn figures(&self) -> serde_json::Value {
        let p = f64::from(self.tp) / f64::from((self.tp + self.fp).max(1));
        let r = f64::from(self.tp) / f64::from((self.tp + self.fn_).max(1));
        json!({ "precision": p, "recall": r, "tp": self.tp, "fp": self.fp, "fn": self.fn_, "tn": self.tn })
    }
}

pub fn eval(
    dir: &Path,
    data: &[PathBuf],
    layer_file: Option<&Path>,
    (threshold, question_threshold): (f32, f32),
    show_errors: usize,
    json_out: bool,
) -> Result<()> {
    let rows = rows(data)?;
    let model = crate::topics::load(dir)?;
    let from_file = match layer_file {
        Some(path) => {
            let text = std::fs::read_to_string(path).with_context(|| format!("cannot read the layer {}", path.display()))?;
            let layer: mneme_truth::topics::TopicModel =
                serde_json::from_str(&text).with_context(|| format!("{}: not a layer `train` wrote", path.display()))?;
            anyhow::ensure!(layer.model == model.model_id(), "{}: trained on {}, not {}", path.display(), layer.model, model.model_id());
            Some(layer)
        }
        None => None,
    };
    let builtin = match &from_file {
        Some(_) => None,
        None => Some(
            mneme_reflect::lessons::CorrectionLayer::builtin(model.model_id())
                .with_context(|| format!("no compiled-in correction layer for {}", model.model_id()))?,
        ),
    };
    let probability = |v: &[f32]| match (&from_file, builtin) {
        (Some(l), _) => l.probabilities(v).first().copied().unwrap_or(0.0),
        (None, Some(b)) => b.probability(v),
        (None, None) => 0.0,
    };
    let vectors = embed(&model, &rows)?;
    let (mut rule, mut learned, mut either) = (Counts::default(), Counts::default(), Counts::default());
    let mut errors = Vec::new();
    for (r, v) in rows.iter().zip(&vectors) {
        let by_rule = mneme_reflect::lessons::is_correction(&r.text);
        rule.add(r.correction, by_rule);
        let p = probability(v);
        let said = mneme_reflect::lessons::corrects_at(p, &r.text, threshold, question_threshold);
        learned.add(r.correction, said);
        either.add(r.correction, by_rule || said);
        if said != r.correction && errors.len() < show_errors {
            errors.push(format!("{:.2} {} {}", p, if r.correction { "missed" } else { "false" }, r.text));
        }
    }
    let out = json!({
        "rows": rows.len(), "threshold": threshold,
        "rule": rule.figures(), "layer": learned.figures(), "either": either.figures(),
    });
    if json_out {
        outln!("{out}");
    } else {
        for (name, c) in [("word rule", &out["rule"]), ("layer", &out["layer"]), ("either", &out["either"])] {
            outln!(
                "{name:>9}: precision {:.3} recall {:.3} (tp {} fp {} fn {} tn {})",
                c["precision"].as_f64().unwrap_or(0.0),
                c["recall"].as_f64().unwrap_or(0.0),
                c["tp"],
                c["fp"],
                c["fn"],
                c["tn"]
            );
        }
        for e in errors {
            outln!("  {e}");
        }
    }
    Ok(())
}
