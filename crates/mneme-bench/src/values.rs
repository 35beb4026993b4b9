//! `mneme-bench values`: trains the value-kind layer (`TopicModel::values`: which slot a
//! value alone looks like a value of: "Bluehost" a cloud host, "Ottawa" a city,
//! "Marzipan" a pet or a food) on the values of hand-labelled sets (`bench/topics/spans/`)
//! and the slots' known values, and measures it on values it never saw.
//!
//! What matters at run time is the floor (`retrieval.value_min_p`): a fact whose value
//! has less than the floor's probability for its slot is not written. So `eval` reports,
//! per floor, how many right values it would refuse (false refusals, the cost) and how
//! many values paired with another slot's it would refuse (the catch).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use mneme_embed::Embedder;
use mneme_truth::topics::{TopicModel, Training};
use serde::Deserialize;
use serde_json::json;

#[derive(Deserialize)]
struct Row {
    slot: String,
    value: Option<String>,
}

/// The distinct `(slot, value)` pairs of labelled JSON Lines (rows without a value skipped).
fn pairs(paths: &[PathBuf]) -> Result<BTreeSet<(String, String)>> {
    let mut out = BTreeSet::new();
    for path in paths {
        let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
        for (i, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
            let row: Row = serde_json::from_str(line).with_context(|| format!("{}:{}: not a labelled row", path.display(), i + 1))?;
            if mneme_truth::slot(&row.slot).is_none() {
                bail!("{}:{}: unknown slot {:?}", path.display(), i + 1, row.slot);
            }
            if let Some(v) = row.value.filter(|v| !v.trim().is_empty()) {
                out.insert((row.slot, v.trim().to_string()));
            }
        }
    }
    Ok(out)
}

/// Every slot's known values (gazetteer aliases and canonical names).
fn known_values() -> BTreeSet<(String, String)> {
    let mut out = BTreeSet::new();
    for def in mneme_truth::SLOTS {
        for entry in def.gazetteer {
            for v in entry.split('=') {
                out.insert((def.id.to_string(), v.trim().to_string()));
            }
        }
    }
    out
}

pub struct Settings {
    pub data: Vec<PathBuf>,
    pub eval: Vec<PathBuf>,
    pub out: Option<PathBuf>,
    pub training: Training,
    pub floors: Vec<f32>,
    pub show_errors: usize,
}

fn key(v: &str) -> String {
    v.to_lowercase()
}

pub fn values(dir: &Path, s: Settings, json_out: bool) -> Result<()> {
    let model = crate::topics::load(dir)?;
    let (labelled, measured) = (pairs(&s.data)?, pairs(&s.eval)?);
    let train: BTreeSet<(String, String)> = labelled.into_iter().chain(known_values()).collect();
    let seen: BTreeSet<String> = train.iter().map(|(_, v)| key(v)).collect();
    let classes: Vec<String> = mneme_truth::SLOTS.iter().map(|d| d.id.to_string()).collect();
    let class = |slot: &str| classes.iter().position(|c| c == slot).expect("checked slot");
    let texts: Vec<&str> = train.iter().map(|(_, v)| v.as_str()).collect();
    let vectors = embed(&model, &texts)?;
    let examples: Vec<(Vec<f32>, usize)> = train.iter().zip(vectors).map(|((slot, _), v)| (v, class(slot))).collect();
    let layer = TopicModel::train(model.model_id(), classes.clone(), &examples, s.training);
    let fit = examples.iter().filter(|(v, y)| argmax(&layer.probabilities(v)) == *y).count() as f64 / examples.len().max(1) as f64;
    if let Some(out) = &s.out {
        crate::topics::write_layer(&layer, out)?;
    }
    // Measured on values never trained on (by their lower-case form).
    let held: Vec<(String, String)> = measured.iter().filter(|(_, v)| !seen.contains(&key(v))).cloned().collect();
    // Every slot each value is labelled with anywhere: a pairing with one of those is not wrong.
    let mut slots_of: BTreeMap<String, BTreeSet<&str>> = BTreeMap::new();
    for (slot, v) in train.iter().chain(&measured) {
        slots_of.entry(key(v)).or_default().insert(slot);
    }
    let texts: Vec<&str> = held.iter().map(|(_, v)| v.as_str()).collect();
    let probs: Vec<Vec<f32>> = embed(&model, &texts)?.iter().map(|v| layer.probabilities(v)).collect();
    let right = held.iter().zip(&probs).filter(|((slot, _), p)| argmax(p) == class(slot)).count();
    let mut by_floor = Vec::new();
    for &floor in &s.floors {
        // Refused right values, per slot; and values refused for a slot they are never a value of.
        let mut refused: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
        let (mut caught, mut wrong) = (0usize, 0usize);
        // A slot's share: the probability of the slots of its kind (`value_kin`).
        let share = |p: &[f32], slot: &str| mneme_truth::value_kin(slot).iter().map(|k| p[class(k)]).sum::<f32>();
        for ((slot, v), p) in held.iter().zip(&probs) {
            let e = refused.entry(slot.as_str()).or_default();
            e.0 += 1;
            e.1 += usize::from(share(p, slot) < floor);
            for other in &classes {
                let kin = mneme_truth::value_kin(other);
                if slots_of.get(&key(v)).is_some_and(|s| s.iter().any(|s| kin.contains(s))) {
                    continue;
                }
                wrong += 1;
                caught += usize::from(share(p, other) < floor);
            }
        }
        let total: usize = refused.values().map(|(_, r)| r).sum();
        by_floor.push(json!({
            "floor": floor,
            "refused_right": pct(total, held.len()),
            "refused_right_by_slot": refused.iter().map(|(k, (n, r))| (k.to_string(), json!(pct(*r, *n)))).collect::<serde_json::Map<_, _>>(),
            "caught_wrong": pct(caught, wrong),
        }));
    }
    let mut shown = 0;
    for ((slot, v), p) in held.iter().zip(&probs) {
        if argmax(p) != class(slot) && shown < s.show_errors {
            shown += 1;
            eprintln!("{v:?} is {slot}: read as {} ({:.2}), {slot} {:.3}", classes[argmax(p)], p[argmax(p)], p[class(slot)]);
        }
    }
    let report = json!({
        "trained_on": examples.len(),
        "training_accuracy": pct_f(fit),
        "held_out_values": held.len(),
        "held_out_accuracy": pct(right, held.len()),
        "floors": by_floor,
    });
    if json_out {
        outln!("{report}");
    } else {
        outln!(
            "trained on {} values (training accuracy {} %); {} values never trained on: accuracy {} %",
            report["trained_on"],
            report["training_accuracy"],
            report["held_out_values"],
            report["held_out_accuracy"]
        );
        for f in &by_floor {
            outln!(
                "floor {}: right values refused {} %, values paired with a slot they are not of refused {} %",
                f["floor"],
                f["refused_right"],
                f["caught_wrong"]
            );
            outln!("    refused by slot: {}", f["refused_right_by_slot"]);
        }
    }
    Ok(())
}

fn embed(model: &mneme_embed::MiniLm, texts: &[&str]) -> Result<Vec<Vec<f32>>> {
    let mut out = Vec::with_capacity(texts.len());
    for chunk in texts.chunks(256) {
        out.extend(model.embed(chunk)?);
    }
    Ok(out)
}

fn argmax(p: &[f32]) -> usize {
    p.iter().enumerate().max_by(|a, b| a.1.total_cmp(b.1)).map_or(0, |(i, _)| i)
}

fn pct(a: usize, b: usize) -> f64 {
    if b == 0 { 0.0 } else { (a as f64 * 1000.0 / b as f64).round() / 10.0 }
}

fn pct_f(x: f64) -> f64 {
    (x * 1000.0).round() / 10.0
}
