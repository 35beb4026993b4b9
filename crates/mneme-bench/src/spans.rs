//! `mneme-bench spans`: trains the span reader (`mneme_truth::spans`) on hand-labelled
//! values (`bench/topics/spans/`) and measures it, beside the phrase extractor, on the
//! parts it did not train on. The parts follow `bench/topics/build.py`'s split by a hash
//! of the text, so a message the topic layer holds out is held out here too.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use mneme_embed::{DEFAULT_MODEL, TokenStates};
use mneme_truth::spans::{Example, SpanReader, Tokens, Training};
use serde::Deserialize;
use serde_json::json;
use sha2::{Digest, Sha256};

#[derive(Deserialize)]
struct Row {
    text: String,
    slot: String,
    value: Option<String>,
    /// The value this message replaces, where it names one: at run time the reader looks
    /// past the value the speaker holds, so it is measured that way here.
    #[serde(default)]
    old: Option<String>,
    #[serde(default)]
    source: String,
    /// `restate`: the message names the value held as still current (the old-value head
    /// must not read it as old).
    #[serde(default)]
    kind: Option<String>,
    /// Which part it is in ([`part`]), set once read.
    #[serde(skip)]
    part: &'static str,
    /// The file it was read from (its name), set once read.
    #[serde(skip)]
    file: String,
}

/// The rows of the `--data` files (part `train_part(row)`) and the `--eval` files (part
/// `eval`), each with its file's name; an unknown slot is an error.
fn read_rows(settings: &Settings, train_part: fn(&Row) -> &'static str) -> Result<Vec<Row>> {
    let mut rows = Vec::new();
    for (path, measured_only) in settings.data.iter().map(|p| (p, false)).chain(settings.eval.iter().map(|p| (p, true))) {
        let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
        for (i, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
            let mut row: Row = serde_json::from_str(line).with_context(|| format!("{}:{}: not a labelled value", path.display(), i + 1))?;
            if mneme_truth::slot(&row.slot).is_none() {
                bail!("{}:{}: unknown slot {:?}", path.display(), i + 1, row.slot);
            }
            row.part = if measured_only { "eval" } else { train_part(&row) };
            row.file = path.file_name().map(|f| f.to_string_lossy().to_string()).unwrap_or_default();
            rows.push(row);
        }
    }
    Ok(rows)
}

/// A training example: the message's states, the slot, and the tokens of `label` in it
/// (`None`: no label; skipped when the label is not in the text).
fn example(s: &TokenStates, text: &str, label: Option<&str>, slot: usize) -> Option<Example> {
    let span = match label {
        Some(v) => Some(token_span(s, text, v)?),
        None => None,
    };
    Some(Example { states: s.states.clone(), word_starts: s.word_starts.clone(), slot, span })
}

/// Prints a report: one line with `--json`, indented otherwise.
fn print(report: &serde_json::Value, json: bool) -> Result<()> {
    if json {
        outln!("{report}");
    } else {
        outln!("{}", serde_json::to_string_pretty(report)?);
    }
    Ok(())
}

/// Which part a row is in: `build.py` holds out one part in `parts` of each file (the
/// changes file's other half tunes the topic layer: held out here as well).
fn part(row: &Row) -> &'static str {
    let parts = if row.source.starts_with("paraphrases.") || row.source.starts_with("paraphrases_changes") { 2 } else { 3 };
    if Sha256::digest(row.text.as_bytes())[0] % parts == 1 {
        if row.source.starts_with("paraphrases_changes") { "tune" } else { "held" }
    } else {
        "train"
    }
}

/// The value's token span: the tokens whose bytes overlap its first occurrence.
fn token_span(states: &TokenStates, text: &str, value: &str) -> Option<(usize, usize)> {
    let at = text.find(value)?;
    let end = at + value.len();
    let inside: Vec<usize> =
        states.offsets.iter().enumerate().filter(|(i, (a, b))| *i > 0 && a < b && *a < end && *b > at).map(|(i, _)| i).collect();
    Some((*inside.first()?, *inside.last()?))
}

fn span_text<'a>(states: &TokenStates, text: &'a str, (start, end): (usize, usize)) -> &'a str {
    text.get(states.offsets[start].0..states.offsets[end].1).unwrap_or("")
}

#[derive(Default)]
struct Tally {
    rows: usize,
    with_value: usize,
    reader_right: usize,
    reader_wrong: usize,
    extractor_right: usize,
    extractor_wrong: usize,
    either_right: usize,
    none_rows: usize,
    reader_abstained_on_none: usize,
}

impl Tally {
    fn figures(&self) -> serde_json::Value {
        let pct = |a: usize, b: usize| if b == 0 { 0.0 } else { 100.0 * a as f64 / b as f64 };
        json!({
            "rows": self.rows,
            "with_value": self.with_value,
            "reader_recall": pct(self.reader_right, self.with_value),
            "reader_precision": pct(self.reader_right, self.reader_right + self.reader_wrong),
            "extractor_recall": pct(self.extractor_right, self.with_value),
            "extractor_precision": pct(self.extractor_right, self.extractor_right + self.extractor_wrong),
            "extractor_else_reader_recall": pct(self.either_right, self.with_value),
            "no_value_rows": self.none_rows,
            "reader_abstains_on_no_value": pct(self.reader_abstained_on_none, self.none_rows),
        })
    }
}

pub struct Settings {
    pub data: Vec<PathBuf>,
    /// Measured only, never trained on.
    pub eval: Vec<PathBuf>,
    pub out: Option<PathBuf>,
    pub training: Training,
    /// The reader answers when its span's probability is at least this share of the
    /// span's and "no value"'s together.
    pub min_share: f32,
    pub show_errors: usize,
    /// Train and measure the old-value head instead (`--old`).
    pub old: bool,
}

/// The old-value head (`SpanReader::builtin_old`): trained on every `--data` row (the
/// words naming the value a message replaces, or none), measured on each file as the
/// service asks it: does the mention of the value the speaker held read as old? For a
/// swap it should (`old_read`); for a restatement of the held value (`kind: restate`)
/// it should not (`restate_read_as_old`).
fn olds(dir: &Path, settings: Settings, json: bool) -> Result<()> {
    let model = crate::topics::load(dir)?;
    let mut rows = read_rows(&settings, |_| "train")?;
    rows.retain(|r| !(r.part == "eval" && r.kind.as_deref() == Some("other")));
    eprintln!("reading {} messages with the encoder", rows.len());
    let states: Vec<TokenStates> = rows.iter().map(|r| model.token_states(&r.text)).collect::<Result<_, _>>()?;
    let examples: Vec<Example> =
        rows.iter().zip(&states).filter(|(r, _)| r.part == "train").filter_map(|(r, s)| example(s, &r.text, r.old.as_deref(), 0)).collect();
    eprintln!("training the old-value head on {} messages", examples.len());
    let head = SpanReader::train(DEFAULT_MODEL, vec!["old".into()], &examples, settings.training);
    if let Some(out) = &settings.out {
        write_reader(&head, out)?;
    }
    // Per file: swaps whose old mention reads as old, restatements whose held mention does.
    let mut tallies: std::collections::BTreeMap<String, [usize; 4]> = Default::default();
    let mut errors = Vec::new();
    for (r, s) in rows.iter().zip(&states) {
        let (held, restate) = match (&r.old, &r.value) {
            (Some(old), _) => (old, false),
            (None, Some(v)) if r.kind.as_deref() == Some("restate") => (v, true),
            _ => continue,
        };
        let Some(at) = r.text.find(held.as_str()) else { continue };
        let mention = at..at + held.len();
        let read = head
            .read_where(&Tokens { states: &s.states, word_starts: &s.word_starts }, 0, |i, j| {
                s.offsets[i].0 < mention.end && mention.start < s.offsets[j].1
            })
            .is_some_and(|span| span.p >= settings.min_share * (span.p + span.p_none));
        let t = tallies.entry(format!("{} ({})", r.file, r.part)).or_default();
        if restate {
            t[2] += 1;
            t[3] += usize::from(read);
        } else {
            t[0] += 1;
            t[1] += usize::from(read);
        }
        if r.part == "eval" && read == restate && errors.len() < settings.show_errors {
            errors.push(json!({ "text": r.text, "held": held, "restate": restate }));
        }
    }
    let pct = |a: usize, b: usize| if b == 0 { 0.0 } else { 100.0 * a as f64 / b as f64 };
    let out = json!({
        "files": tallies.iter().map(|(k, t)| (k.clone(), json!({
            "swaps": t[0], "old_read": pct(t[1], t[0]), "restatements": t[2], "restate_read_as_old": pct(t[3], t[2]),
        }))).collect::<serde_json::Map<_, _>>(),
        "errors": errors,
    });
    print(&out, json)
}

fn write_reader(reader: &SpanReader, out: &Path) -> Result<()> {
    use crate::topics::{rounded, rounded_rows};
    let file = json!({
        "model": reader.model,
        "dim": reader.dim,
        "slots": reader.slots,
        "start": rounded_rows(&reader.start),
        "start_bias": rounded(&reader.start_bias),
        "end": rounded_rows(&reader.end),
        "end_bias": rounded(&reader.end_bias),
    });
    std::fs::write(out, format!("{file}\n")).with_context(|| format!("cannot write {}", out.display()))
}

pub fn spans(dir: &Path, settings: Settings, json: bool) -> Result<()> {
    if settings.old {
        return olds(dir, settings, json);
    }
    let model = crate::topics::load(dir)?;
    let rows = read_rows(&settings, part)?;
    let slots: Vec<String> = mneme_truth::SLOTS.iter().map(|s| s.id.to_string()).collect();
    eprintln!("reading {} messages with the encoder", rows.len());
    let states: Vec<TokenStates> = rows.iter().map(|r| model.token_states(&r.text)).collect::<Result<_, _>>()?;
    let examples: Vec<Example> = rows
        .iter()
        .zip(&states)
        .filter(|(r, _)| r.part == "train")
        .filter_map(|(r, s)| example(s, &r.text, r.value.as_deref(), slots.iter().position(|x| *x == r.slot)?))
        .collect();
    eprintln!("training on {} messages", examples.len());
    let reader = SpanReader::train(DEFAULT_MODEL, slots.clone(), &examples, settings.training);
    if let Some(out) = &settings.out {
        write_reader(&reader, out)?;
    }
    let mut tallies: std::collections::BTreeMap<String, Tally> = Default::default();
    let mut errors = Vec::new();
    for (r, s) in rows.iter().zip(&states) {
        // Each part, and apart the messages that name the value they replace.
        let key = if r.old.is_some() { format!("{} (naming the old value)", r.part) } else { r.part.to_string() };
        let tally = tallies.entry(key).or_default();
        tally.rows += 1;
        let slot = slots.iter().position(|x| *x == r.slot).expect("checked above");
        let old = r.old.as_deref().and_then(|v| r.text.find(v).map(|at| at..at + v.len()));
        let apart = |i: usize, j: usize| old.as_ref().is_none_or(|o| s.offsets[j].1 <= o.start || o.end <= s.offsets[i].0);
        let read = reader
            .read_where(&Tokens { states: &s.states, word_starts: &s.word_starts }, slot, apart)
            .filter(|span| span.p >= settings.min_share * (span.p + span.p_none))
            .map(|span| span_text(s, &r.text, (span.start, span.end)).to_string());
        let extracted = mneme_truth::extract(&r.text)
            .into_iter()
            .find(|c| c.other.is_none() && c.slot == Some(r.slot.as_str()) && c.op == mneme_truth::Op::Set)
            .map(|c| c.value);
        let Some(value) = &r.value else {
            tally.none_rows += 1;
            tally.reader_abstained_on_none += usize::from(read.is_none());
            continue;
        };
        tally.with_value += 1;
        let same = |v: &Option<String>| v.as_deref().map(mneme_truth::normalize_value) == Some(mneme_truth::normalize_value(value));
        let (reader_right, extractor_right) = (same(&read), same(&extracted));
        tally.reader_right += usize::from(reader_right);
        tally.reader_wrong += usize::from(read.is_some() && !reader_right);
        tally.extractor_right += usize::from(extractor_right);
        tally.extractor_wrong += usize::from(extracted.is_some() && !extractor_right);
        tally.either_right += usize::from(if extracted.is_some() { extractor_right } else { reader_right });
        if r.part != "train" && !reader_right && errors.len() < settings.show_errors {
            errors.push(json!({ "text": r.text, "slot": r.slot, "value": value, "reader": read, "extractor": extracted }));
        }
    }
    let out = json!({
        "parts": tallies.iter().map(|(k, t)| (k.clone(), t.figures())).collect::<serde_json::Map<_, _>>(),
        "errors": errors,
    });
    print(&out, json)
}
