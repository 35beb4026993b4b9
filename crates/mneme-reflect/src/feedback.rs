//! The feedback analyzer's mechanical part (sinain §4.4, §8.2): how the heartbeat's
//! outputs scored, and the curate directive that follows.
//!
//! An output is a suggestion the heartbeat delivered (an `output` log line with
//! `skip: false`, and, with `count_tips`, a Phase 2 tip recorded on a tick line). The host
//! reports how it went with `feedback` lines carrying a `compositeScore` in [-1, 1] and,
//! normally, the output's id; a report without one counts for the latest output before it
//! (the seed's "the next tick's score"). An output's score is the mean of its reports.
//!
//! Departure from the seed, on purpose: only outputs with at least one report count.
//! Counting unscored outputs as neutral would turn "nobody reported anything" into
//! `aggressive_prune`, while the seed (and the issue) say that without reports the
//! directive is `insufficient_data`. Unscored outputs are reported separately.

use std::collections::BTreeMap;

use jiff::Timestamp;
use mneme_workspace::playbook::Effectiveness;
use mneme_workspace::playbook_log::LogLine;
use serde::Serialize;
use serde_json::Value;

/// An output scoring above this is positive.
pub const POSITIVE_ABOVE: f64 = 0.2;
/// An output scoring below this is negative.
pub const NEGATIVE_BELOW: f64 = -0.1;
/// Fewer scored outputs than this: too little to judge.
pub const MIN_OUTPUTS: u32 = 5;
/// A positive rate below this: prune aggressively.
pub const PRUNE_BELOW: f64 = 0.4;
/// A positive rate above this: keep the playbook stable.
pub const STABLE_ABOVE: f64 = 0.7;

/// How boldly the curator may change the playbook.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Directive {
    /// Fewer than five scored outputs: no effectiveness-driven changes.
    InsufficientData,
    /// Positive rate below 0.4: remove weak or unverified patterns.
    AggressivePrune,
    /// Balanced adding and pruning.
    Normal,
    /// Positive rate above 0.7: only add patterns scoring above 0.5.
    Stability,
}

impl Directive {
    /// The directive for these figures (the thresholds are checked in this order).
    pub fn for_effectiveness(e: &Effectiveness) -> Directive {
        if e.outputs < MIN_OUTPUTS {
            Directive::InsufficientData
        } else if e.rate < PRUNE_BELOW {
            Directive::AggressivePrune
        } else if e.rate > STABLE_ABOVE {
            Directive::Stability
        } else {
            Directive::Normal
        }
    }

    /// What it asks of the curator, in the words a prompt uses.
    pub fn meaning(self) -> &'static str {
        match self {
            Directive::InsufficientData => "too little feedback: skip effectiveness-driven adjustments",
            Directive::AggressivePrune => "outputs score poorly: remove weak or unverified patterns aggressively",
            Directive::Normal => "balanced: add what is new, prune what proved weak",
            Directive::Stability => "outputs score well: keep the playbook stable, only add patterns scoring above 0.5",
        }
    }
}

/// One scored output, for `feedbackScores.high` / `low`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ScoredOutput {
    #[serde(rename = "outputId")]
    pub output_id: String,
    pub score: f64,
    /// The start of what was delivered (at most 80 characters).
    pub text: String,
}

/// The feedback stage's mechanical result.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FeedbackFigures {
    pub effectiveness: Effectiveness,
    /// Outputs nobody reported on (not counted in `effectiveness`).
    pub unscored: u32,
    /// Mean score of the scored outputs; `None` without any.
    pub avg: Option<f64>,
    /// The three best and three worst scored outputs.
    pub high: Vec<ScoredOutput>,
    pub low: Vec<ScoredOutput>,
    #[serde(rename = "curateDirective")]
    pub directive: Directive,
}

pub(crate) struct Output {
    pub(crate) id: String,
    pub(crate) at: Timestamp,
    text: String,
    scores: Vec<f64>,
    /// A lesson in force (delivered through the playbook): what a report naming no output
    /// means is never this, it is what the heartbeat sent.
    pub(crate) standing: bool,
}

/// The outputs in `lines` (newest first, as `playbook_log::read` gives them) from `since`
/// on, oldest first.
pub(crate) fn outputs(lines: &[LogLine], since: Timestamp, count_tips: bool) -> Vec<Output> {
    let mut out: Vec<Output> = Vec::new();
    for line in lines.iter().rev() {
        let Some(at) = line.ts.filter(|t| *t >= since) else { continue };
        let v = &line.value;
        let delivered = match line.kind.as_str() {
            "output" if v["skip"] != Value::Bool(true) => v["outputId"].as_str().map(|id| {
                let text = [v["suggestion"].as_str(), v["insight"].as_str()].into_iter().flatten().collect::<Vec<_>>().join(" ");
                (id.to_string(), text)
            }),
            "tick" if count_tips && v["actionTaken"]["kind"] == "telegram_tip" => v["actionTaken"]["outputId"]
                .as_str()
                .map(|id| (id.to_string(), v["actionTaken"]["task"].as_str().unwrap_or_default().to_string())),
            _ => None,
        };
        if let Some((id, text)) = delivered
            && !out.iter().any(|o| o.id == id)
        {
            out.push(Output { id, at, text, scores: Vec::new(), standing: v["standing"] == true });
        }
    }
    out
}

/// The figures over the lines from `since` on. `count_tips`: Phase 2 tips count as
/// outputs too (without them an offline loop would score only the insights it finds).
pub fn figures(lines: &[LogLine], since: Timestamp, count_tips: bool) -> FeedbackFigures {
    let mut outputs = outputs(lines, since, count_tips);
    let index: BTreeMap<String, usize> = outputs.iter().enumerate().map(|(i, o)| (o.id.clone(), i)).collect();
    for line in lines.iter().rev().filter(|l| l.kind == "feedback") {
        let Some(at) = line.ts.filter(|t| *t >= since) else { continue };
        let Some(score) = line.value["compositeScore"].as_f64().filter(|s| s.is_finite() && (-1.0..=1.0).contains(s)) else { continue };
        let target = match line.value["outputId"].as_str() {
            Some(id) => index.get(id).copied(),
            // No id: the latest output delivered before the report.
            None => outputs.iter().rposition(|o| o.at <= at && !o.standing),
        };
        if let Some(i) = target {
            outputs[i].scores.push(score);
        }
    }
    let mut scored: Vec<ScoredOutput> = outputs
        .iter()
        .filter(|o| !o.scores.is_empty())
        .map(|o| ScoredOutput {
            output_id: o.id.clone(),
            score: o.scores.iter().sum::<f64>() / o.scores.len() as f64,
            text: o.text.chars().take(80).collect(),
        })
        .collect();
    let count = |f: &dyn Fn(f64) -> bool| scored.iter().filter(|s| f(s.score)).count() as u32;
    let positive = count(&|s| s > POSITIVE_ABOVE);
    let negative = count(&|s| s < NEGATIVE_BELOW);
    let n = scored.len() as u32;
    let effectiveness = Effectiveness {
        outputs: n,
        positive,
        negative,
        neutral: n - positive - negative,
        rate: if n == 0 { 0.0 } else { f64::from(positive) / f64::from(n) },
    };
    let avg = (n > 0).then(|| scored.iter().map(|s| s.score).sum::<f64>() / f64::from(n));
    scored.sort_by(|a, b| b.score.total_cmp(&a.score));
    let high = scored.iter().take(3).cloned().collect();
    let low = scored.iter().rev().take(3).cloned().collect();
    FeedbackFigures {
        directive: Directive::for_effectiveness(&effectiveness),
        effectiveness,
        unscored: outputs.len() as u32 - n,
        avg,
        high,
        low,
    }
}

const PROMPT: &str = "You interpret the feedback scores (-1..1) an AI agent's heartbeat outputs received. Say in one \
or two sentences which kinds of output score well and which poorly, and what to do more or less of. Answer only \
JSON: {\"interpretation\": \"...\"}";

/// The model's reading of the figures (the figures themselves, the directive included,
/// are always the mechanical ones). Without scored outputs there is nothing to interpret.
pub fn interpret(engine: &super::engine::Reflector, figures: &FeedbackFigures) -> (Option<String>, super::engine::StageOutcome) {
    use super::engine::StageOutcome;
    if figures.effectiveness.outputs == 0 {
        return (None, StageOutcome::fallback("no scored outputs: mechanical figures only"));
    }
    let user = serde_json::to_string(figures).unwrap_or_default();
    match engine.ask(super::config::Stage::FeedbackAnalyzer, PROMPT, &user) {
        Ok(v) => match super::engine::text(&v, "interpretation") {
            Some(t) => (Some(t.chars().take(500).collect()), StageOutcome::ok()),
            None => (None, StageOutcome::fallback("invalid model answer: no \"interpretation\" string")),
        },
        Err(reason) => (None, StageOutcome::fallback(reason)),
    }
}
