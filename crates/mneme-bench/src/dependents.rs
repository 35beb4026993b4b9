//! `mneme-bench dependents`: does recall mark what rests on a changed fact as possibly
//! outdated (`mneme_service::Outdated`), and leave what still holds alone? Each
//! conversation of a labelled set (`bench/dependents/`) is played through the hooks
//! exactly as `truth` plays it (a fresh store, the clock following the turns, a
//! consolidation cycle and the embedding backfill between sessions: turns more than four
//! hours apart); then each probe's question is recalled, and the hits that carry its
//! target (the message holding the target words, and facts read from that message) are
//! checked for the mark.

use std::path::Path;

use anyhow::{Context as _, Result, anyhow, bail};
use mneme_core::{MemoryType, Payload, Sensitivity, Status};
use mneme_service::{Hit, RetrieveRequest};
use serde::Deserialize;
use serde_json::json;

use crate::parse_time;
use crate::truth::{Conversation, answer, open, pipeline};

#[derive(Debug, Deserialize)]
struct Case {
    id: String,
    speaker: String,
    turns: Vec<Turn>,
    probes: Vec<Probe>,
}

#[derive(Debug, Deserialize)]
struct Turn {
    t: String,
    role: String,
    text: String,
}

#[derive(Debug, Deserialize)]
struct Probe {
    t: String,
    query: String,
    target: String,
    expect: Expect,
    names_old: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
enum Expect {
    Outdated,
    Current,
}

/// Counts for one kind of probe.
#[derive(Debug, Default, Clone, Copy)]
struct Tally {
    probes: usize,
    /// The target was among the hits.
    found: usize,
    /// Found, and every hit carrying it was marked.
    marked: usize,
    /// Found, and some hit carrying it was marked.
    any_marked: usize,
}

impl Tally {
    fn json(&self) -> serde_json::Value {
        let pct = |a: usize, b: usize| if b == 0 { serde_json::Value::Null } else { json!((1000.0 * a as f64 / b as f64).round() / 10.0) };
        json!({ "probes": self.probes, "found": self.found, "found_pct": pct(self.found, self.probes),
                "marked": self.marked, "marked_pct_of_found": pct(self.marked, self.found),
                "any_marked": self.any_marked, "any_marked_pct_of_found": pct(self.any_marked, self.found) })
    }
}

pub fn dependents(
    config: &mneme_server::MnemeConfig,
    data_dir: &Path,
    data: &Path,
    k: usize,
    show_errors: usize,
    json_out: bool,
) -> Result<()> {
    let text = std::fs::read_to_string(data).with_context(|| format!("reading {}", data.display()))?;
    let mut cases = Vec::new();
    for (n, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        let case: Case = serde_json::from_str(line).with_context(|| format!("{}:{}: not a conversation", data.display(), n + 1))?;
        check(&case).with_context(|| format!("{}:{} ({})", data.display(), n + 1, case.id))?;
        cases.push(case);
    }
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let (llm, model) = pipeline("dependents", config, data_dir)?;
    let (mut outdated_named, mut outdated_unnamed, mut current) = (Tally::default(), Tally::default(), Tally::default());
    // Outdated probes of conversations whose change extraction read: the marks alone.
    let mut outdated_read = Tally::default();
    let mut changes_read = 0;
    let mut errors: Vec<serde_json::Value> = Vec::new();
    for case in &cases {
        let c = open(config, &llm, model.as_ref(), &json!({ "conversation": case.id }))?;
        runtime.block_on(play(&c, case))?;
        let read = changed(&c)?;
        changes_read += usize::from(read);
        for probe in &case.probes {
            c.clock.set(parse_time(&probe.t).ok_or_else(|| anyhow!("{}: unreadable probe time {:?}", case.id, probe.t))?);
            let request = RetrieveRequest {
                query: probe.query.clone(),
                max_sensitivity: Some(Sensitivity::Critical),
                limit: k,
                ..RetrieveRequest::default()
            };
            let hits = c.ops.retrieve(&c.principal, &request)?;
            let carriers: Vec<&Hit> = carriers(&c, &hits, &probe.target)?;
            let tally = match (probe.expect, probe.names_old) {
                (Expect::Outdated, true) => &mut outdated_named,
                (Expect::Outdated, false) => &mut outdated_unnamed,
                (Expect::Current, _) => &mut current,
            };
            tally.probes += 1;
            let found = !carriers.is_empty();
            let all = found && carriers.iter().all(|h| h.outdated.is_some());
            let any = carriers.iter().any(|h| h.outdated.is_some());
            tally.found += usize::from(found);
            tally.marked += usize::from(all);
            tally.any_marked += usize::from(any);
            if read && probe.expect == Expect::Outdated {
                outdated_read.probes += 1;
                outdated_read.found += usize::from(found);
                outdated_read.marked += usize::from(all);
                outdated_read.any_marked += usize::from(any);
            }
            let wrong = match probe.expect {
                Expect::Outdated => found && !all,
                Expect::Current => any,
            };
            if wrong && errors.len() < show_errors {
                errors.push(json!({
                    "case": case.id, "query": probe.query, "target": probe.target, "expect": format!("{:?}", probe.expect).to_lowercase(),
                    "carriers": carriers.iter().map(|h| json!({ "summary": h.record.summary, "outdated": h.outdated })).collect::<Vec<_>>(),
                }));
            }
        }
    }
    let all_outdated = Tally {
        probes: outdated_named.probes + outdated_unnamed.probes,
        found: outdated_named.found + outdated_unnamed.found,
        marked: outdated_named.marked + outdated_unnamed.marked,
        any_marked: outdated_named.any_marked + outdated_unnamed.any_marked,
    };
    let flagged_right = all_outdated.any_marked;
    let precision = if flagged_right + current.any_marked == 0 {
        serde_json::Value::Null
    } else {
        json!((1000.0 * flagged_right as f64 / (flagged_right + current.any_marked) as f64).round() / 10.0)
    };
    let report = json!({
        "data": data.display().to_string(),
        "conversations": cases.len(),
        "changes_read": changes_read,
        "k": k,
        "model": model.as_ref().map(|m| m.model_id().to_string()),
        "outdated": all_outdated.json(),
        "outdated_naming_old": outdated_named.json(),
        "outdated_not_naming_old": outdated_unnamed.json(),
        "outdated_change_read": outdated_read.json(),
        "current": current.json(),
        "mark_precision": precision,
        "errors": errors,
    });
    if json_out {
        outln!("{report}");
    } else {
        outln!("{}", serde_json::to_string_pretty(&report)?);
    }
    Ok(())
}

fn check(case: &Case) -> Result<()> {
    let mut last = None;
    for t in &case.turns {
        let at = parse_time(&t.t).ok_or_else(|| anyhow!("unreadable turn time {:?}", t.t))?;
        if last.is_some_and(|l| at <= l) {
            bail!("turn times must increase ({:?})", t.t);
        }
        if t.role != "user" && t.role != "assistant" {
            bail!("role must be user or assistant, not {:?}", t.role);
        }
        last = Some(at);
    }
    for p in &case.probes {
        let users = case.turns.iter().filter(|t| t.role == "user" && t.text.contains(&p.target)).count();
        if users != 1 {
            bail!("probe target {:?} is in {users} user turns, not exactly one", p.target);
        }
    }
    Ok(())
}

/// The turns through the hooks, with a consolidation cycle and the backfill between
/// sessions and at the end.
async fn play(c: &Conversation, case: &Case) -> Result<()> {
    let mut session = 0;
    let mut last: Option<jiff::Timestamp> = None;
    for turn in &case.turns {
        let at = parse_time(&turn.t).ok_or_else(|| anyhow!("unreadable time"))?;
        if let Some(l) = last
            && at.duration_since(l).as_secs() > 4 * 3600
        {
            answer(c, "end_session", &json!({ "time": l.to_string() })).await?;
            session += 1;
        }
        let request = json!({ "time": turn.t, "role": turn.role, "text": turn.text, "speaker": case.speaker, "session": session });
        answer(c, "turn", &request).await.with_context(|| format!("{}: turn {:?}", case.id, turn.text))?;
        last = Some(at);
    }
    if let Some(l) = last {
        answer(c, "flush", &json!({ "time": l.to_string() })).await?;
    }
    Ok(())
}

/// Did extraction read a change: is any fact about the user superseded or withdrawn?
fn changed(c: &Conversation) -> Result<bool> {
    let request = RetrieveRequest {
        types: vec![MemoryType::Semantic],
        tags: vec!["about:user".into()],
        include_tombstones: true,
        max_sensitivity: Some(Sensitivity::Critical),
        limit: 100,
        ..RetrieveRequest::default()
    };
    Ok(c.ops.retrieve(&c.principal, &request)?.iter().any(|h| matches!(h.record.status, Status::Superseded | Status::Retracted)))
}

/// The hits that carry the target: the message holding its words, and facts read from
/// that message.
fn carriers<'h>(c: &Conversation, hits: &'h [Hit], target: &str) -> Result<Vec<&'h Hit>> {
    let message = hits.iter().find(|h| matches!(&h.record.payload, Some(Payload::Event(e)) if e.text.contains(target)));
    let mut out: Vec<&Hit> = message.into_iter().collect();
    // The message itself may rank below k while a fact read from it is a hit.
    let source = match message {
        Some(m) => Some(m.record.id.to_string()),
        None => {
            let request = RetrieveRequest {
                query: target.to_string(),
                types: vec![MemoryType::Episodic],
                max_sensitivity: Some(Sensitivity::Critical),
                limit: 20,
                ..RetrieveRequest::default()
            };
            c.ops
                .retrieve(&c.principal, &request)?
                .into_iter()
                .find(|h| matches!(&h.record.payload, Some(Payload::Event(e)) if e.text.contains(target)))
                .map(|h| h.record.id.to_string())
        }
    };
    if let Some(source) = source {
        out.extend(hits.iter().filter(|h| matches!(&h.record.payload, Some(Payload::Semantic(f)) if f.evidence.contains(&source))));
    }
    Ok(out)
}
