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
use mneme_truth::topics::{NONE, TopicModel, Training};
use serde::Deserialize;
use serde_json::json;

#[derive(Deserialize)]
struct Row {
    slot: String,
    value: Option<String>,
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    old: Option<String>,
}

fn read_rows(path: &Path) -> Result<Vec<Row>> {
    let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        let row: Row = serde_json::from_str(line).with_context(|| format!("{}:{}: not a labelled row", path.display(), i + 1))?;
        if mneme_truth::slot(&row.slot).is_none() {
            bail!("{}:{}: unknown slot {:?}", path.display(), i + 1, row.slot);
        }
        out.push(row);
    }
    Ok(out)
}

/// `(slot, value)` pairs.
type Pairs = BTreeSet<(String, String)>;

/// What is no value, from the messages of labelled rows that name one: `.0` the phrase
/// extractor's values for the row's slot that share no word with the labelled value (or
/// the old one), `.1` up to two windows of one or two words of the message apart from
/// them (picked by a hash of the message). Known values (`seen`) are left out.
fn junk(paths: &[PathBuf], seen: &BTreeSet<String>) -> Result<(Pairs, Pairs)> {
    let words = |s: &str| -> Vec<String> {
        s.split_whitespace()
            .map(|w| w.trim_matches(|c: char| !c.is_alphanumeric() && c != '+' && c != '#').to_lowercase())
            .filter(|w| !w.is_empty())
            .collect()
    };
    let (mut extracted, mut windows) = (BTreeSet::new(), BTreeSet::new());
    for path in paths {
        for row in read_rows(path)? {
            let (Some(text), Some(value)) = (&row.text, &row.value) else { continue };
            let mut taken: BTreeSet<String> = words(value).into_iter().collect();
            taken.extend(row.old.as_deref().map(words).unwrap_or_default());
            let apart = |w: &[String]| !w.is_empty() && w.iter().all(|x| !taken.contains(x)) && !seen.contains(&w.join(" "));
            for claim in mneme_truth::extract(text) {
                if claim.slot == Some(row.slot.as_str()) && claim.other.is_none() && apart(&words(&claim.value)) {
                    extracted.insert((row.slot.clone(), claim.value.clone()));
                }
            }
            let raw: Vec<&str> = text
                .split_whitespace()
                .map(|w| w.trim_matches(|c: char| !c.is_alphanumeric() && c != '+' && c != '#'))
                .filter(|w| !w.is_empty())
                .collect();
            let mut cands: Vec<String> = Vec::new();
            for n in 1..=2 {
                for w in raw.windows(n) {
                    if apart(&words(&w.join(" "))) {
                        cands.push(w.join(" "));
                    }
                }
            }
            let h = text.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3));
            for k in 0..cands.len().min(2) {
                let at = ((h >> (k * 16)) as usize + k) % cands.len();
                windows.insert((row.slot.clone(), cands[at].clone()));
            }
        }
    }
    Ok((extracted, windows))
}

/// The distinct `(slot, value)` pairs of labelled JSON Lines (rows without a value skipped).
fn pairs(paths: &[PathBuf]) -> Result<BTreeSet<(String, String)>> {
    let mut out = BTreeSet::new();
    for path in paths {
        for row in read_rows(path)? {
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
    pub junk: bool,
}

fn key(v: &str) -> String {
    v.to_lowercase()
}

pub fn values(dir: &Path, s: Settings, json_out: bool) -> Result<()> {
    let model = crate::topics::load(dir)?;
    let (labelled, measured) = (pairs(&s.data)?, pairs(&s.eval)?);
    let train: BTreeSet<(String, String)> = labelled.into_iter().chain(known_values()).collect();
    let seen: BTreeSet<String> = train.iter().map(|(_, v)| key(v)).collect();
    let mut classes: Vec<String> = mneme_truth::SLOTS.iter().map(|d| d.id.to_string()).collect();
    if s.junk {
        classes.push(NONE.to_string());
    }
    let class = |slot: &str| classes.iter().position(|c| c == slot).expect("checked slot");
    let seen_all: BTreeSet<String> = seen.iter().cloned().chain(measured.iter().map(|(_, v)| key(v))).collect();
    let (no_values, held_junk) = if s.junk {
        let (a, b) = junk(&s.data, &seen_all)?;
        let (c, d) = junk(&s.eval, &seen_all)?;
        let trained: BTreeSet<String> = a.iter().chain(&b).map(|(_, v)| key(v)).collect();
        let fresh = |set: Pairs| set.into_iter().filter(|(_, v)| !trained.contains(&key(v))).collect::<Vec<_>>();
        (a.into_iter().chain(b).map(|(_, v)| v).collect::<BTreeSet<String>>(), (fresh(c), fresh(d)))
    } else {
        (BTreeSet::new(), (Vec::new(), Vec::new()))
    };
    let texts: Vec<&str> = train.iter().map(|(_, v)| v.as_str()).chain(no_values.iter().map(String::as_str)).collect();
    let vectors = embed(&model, &texts)?;
    let labels = train.iter().map(|(slot, _)| class(slot)).chain(no_values.iter().map(|_| class(NONE)));
    let examples: Vec<(Vec<f32>, usize)> = vectors.into_iter().zip(labels).collect();
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
    let read = |set: &[(String, String)]| -> Result<Vec<Vec<f32>>> {
        let texts: Vec<&str> = set.iter().map(|(_, v)| v.as_str()).collect();
        Ok(embed(&model, &texts)?.iter().map(|v| layer.probabilities(v)).collect())
    };
    let junk_probs = (read(&held_junk.0)?, read(&held_junk.1)?);
    let mut shown_junk = 0;
    for ((slot, v), p) in held_junk.0.iter().zip(&junk_probs.0) {
        if s.junk && shown_junk < s.show_errors && argmax(p) != class(NONE) {
            shown_junk += 1;
            eprintln!("extracted {v:?} for {slot}: read as {} ({:.2})", classes[argmax(p)], p[argmax(p)]);
        }
    }
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
            for other in classes.iter().filter(|c| *c != NONE) {
                let kin = mneme_truth::value_kin(other);
                if slots_of.get(&key(v)).is_some_and(|s| s.iter().any(|s| kin.contains(s))) {
                    continue;
                }
                wrong += 1;
                caught += usize::from(share(p, other) < floor);
            }
        }
        let total: usize = refused.values().map(|(_, r)| r).sum();
        let junk_refused = |probs: &[Vec<f32>], set: &[(String, String)]| {
            let n = set.iter().zip(probs).filter(|((slot, _), p)| share(p, slot) < floor).count();
            pct(n, set.len())
        };
        by_floor.push(json!({
            "floor": floor,
            "extracted_junk_refused": junk_refused(&junk_probs.0, &held_junk.0),
            "window_junk_refused": junk_refused(&junk_probs.1, &held_junk.1),
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
        "held_out_junk": [held_junk.0.len(), held_junk.1.len()],
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
            if s.junk {
                outln!(
                    "    no values refused: {} % of {} the phrase extractor wrote, {} % of {} other words",
                    f["extracted_junk_refused"],
                    held_junk.0.len(),
                    f["window_junk_refused"],
                    held_junk.1.len()
                );
            }
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
