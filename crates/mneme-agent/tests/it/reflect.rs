//! Reflection: the feedback analyzer's figures and the curate directive.

use jiff::Timestamp;
use mneme_agent::reflect::feedback::{Directive, figures};
use mneme_workspace::playbook::Effectiveness;
use mneme_workspace::playbook_log::LogLine;
use serde_json::{Value, json};

fn at(hour: i64) -> Timestamp {
    Timestamp::from_second(1_800_000_000 + hour * 3600).expect("instant")
}

fn line(hour: i64, value: Value) -> LogLine {
    let ts = at(hour);
    let kind = value["kind"].as_str().expect("kind").to_string();
    let mut value = value;
    value["ts"] = json!(ts.to_string());
    LogLine { day: ts.to_zoned(jiff::tz::TimeZone::UTC).date(), kind, ts: Some(ts), value }
}

fn output(hour: i64, id: &str) -> LogLine {
    line(hour, json!({ "kind": "output", "outputId": id, "skip": false, "suggestion": format!("suggestion {id}"), "insight": "…" }))
}

fn report(hour: i64, id: Option<&str>, score: f64) -> LogLine {
    let mut v = json!({ "kind": "feedback", "compositeScore": score });
    if let Some(id) = id {
        v["outputId"] = json!(id);
    }
    line(hour, v)
}

/// Newest first, as `playbook_log::read` gives lines.
fn newest_first(mut lines: Vec<LogLine>) -> Vec<LogLine> {
    lines.sort_by_key(|l| std::cmp::Reverse(l.ts));
    lines
}

fn scored(scores: &[f64]) -> Vec<LogLine> {
    let mut lines = Vec::new();
    for (i, s) in scores.iter().enumerate() {
        let id = format!("o{i}");
        lines.push(output(i as i64 * 2, &id));
        lines.push(report(i as i64 * 2 + 1, Some(&id), *s));
    }
    newest_first(lines)
}

#[test]
fn the_directive_follows_the_positive_rate_of_scored_outputs() {
    let since = at(-1);
    // Four scored outputs are too few, whatever they scored.
    assert_eq!(figures(&scored(&[0.9, 0.9, 0.9, 0.9]), since, false).directive, Directive::InsufficientData);
    // rate = positive / outputs: 1/5 = 0.2 → prune; 2/5 = 0.4 → normal; 3/5 → normal; 4/5 = 0.8 → stability.
    let table = [
        (vec![0.9, 0.0, 0.0, -0.5, -0.5], Directive::AggressivePrune, (1, 2, 2)),
        (vec![0.9, 0.9, 0.0, 0.0, -0.5], Directive::Normal, (2, 1, 2)),
        (vec![0.9, 0.9, 0.9, 0.0, 0.0], Directive::Normal, (3, 0, 2)),
        (vec![0.9, 0.9, 0.9, 0.9, 0.0], Directive::Stability, (4, 0, 1)),
    ];
    for (scores, want, (pos, neg, neu)) in table {
        let f = figures(&scored(&scores), since, false);
        assert_eq!(f.directive, want, "{scores:?}: {:?}", f.effectiveness);
        assert_eq!((f.effectiveness.positive, f.effectiveness.negative, f.effectiveness.neutral), (pos, neg, neu), "{scores:?}");
    }
    // The thresholds are strict: exactly 0.2 and exactly -0.1 are neutral.
    let edges = figures(&scored(&[0.2, -0.1, 0.2000001, -0.1000001, 0.0]), since, false).effectiveness;
    assert_eq!((edges.positive, edges.negative, edges.neutral), (1, 1, 3));
    // Rates right at the directive thresholds.
    let e = |outputs, positive| Effectiveness {
        outputs,
        positive,
        negative: 0,
        neutral: outputs - positive,
        rate: f64::from(positive) / f64::from(outputs),
    };
    assert_eq!(Directive::for_effectiveness(&e(10, 4)), Directive::Normal, "0.4 is normal");
    assert_eq!(Directive::for_effectiveness(&e(10, 7)), Directive::Normal, "0.7 is normal");
    assert_eq!(Directive::for_effectiveness(&e(100, 39)), Directive::AggressivePrune);
    assert_eq!(Directive::for_effectiveness(&e(100, 71)), Directive::Stability);
}

#[test]
fn only_reported_outputs_count_and_reports_find_their_output() {
    let since = at(-1);
    // Ten outputs and no reports: insufficient data, not aggressive pruning.
    let silent: Vec<LogLine> = newest_first((0..10).map(|i| output(i, &format!("o{i}"))).collect());
    let f = figures(&silent, since, false);
    assert_eq!((f.directive, f.effectiveness.outputs, f.unscored, f.avg), (Directive::InsufficientData, 0, 10, None));
    // A report without an id counts for the latest output before it; two reports average.
    let lines = newest_first(vec![
        output(0, "a"),
        output(2, "b"),
        report(3, None, 0.5),
        report(4, Some("a"), -0.6),
        report(5, Some("a"), -0.2),
        report(6, Some("nobody"), 1.0),
        report(7, Some("b"), f64::NAN),
        line(8, json!({ "kind": "output", "skip": true, "skipReason": "nothing new" })),
    ]);
    let f = figures(&lines, since, false);
    assert_eq!((f.effectiveness.outputs, f.effectiveness.positive, f.effectiveness.negative), (2, 1, 1));
    assert_eq!(f.high[0].output_id, "b");
    assert!((f.low[0].score - (-0.4)).abs() < 1e-12, "{:?}", f.low);
    assert!((f.avg.expect("avg") - 0.05).abs() < 1e-12);
    // Outside the window: not counted.
    assert_eq!(figures(&lines, at(1), false).effectiveness.outputs, 1, "only b is inside");
}

#[test]
fn tips_count_as_outputs_when_asked() {
    let tip =
        line(0, json!({ "kind": "tick", "actionTaken": { "kind": "telegram_tip", "outputId": "t1", "task": "run the tests first" } }));
    let lines = newest_first(vec![tip, report(1, Some("t1"), 0.8)]);
    assert_eq!(figures(&lines, at(-1), false).effectiveness.outputs, 0);
    let f = figures(&lines, at(-1), true);
    assert_eq!((f.effectiveness.outputs, f.effectiveness.positive), (1, 1));
    assert_eq!(f.high[0].text, "run the tests first");
}
