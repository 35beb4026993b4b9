//! The context block injected at session start: Markdown grouped by memory type (the
//! seed's context formatter) or JSON.

use std::collections::BTreeMap;

use mneme_core::{MemoryType, Payload, Status};
use mneme_service::Hit;
use serde_json::json;

const ORDER: [MemoryType; 5] =
    [MemoryType::Semantic, MemoryType::Competence, MemoryType::Working, MemoryType::PlanGraph, MemoryType::Episodic];

fn label(t: MemoryType) -> &'static str {
    match t {
        MemoryType::Episodic => "Recent Events",
        MemoryType::Semantic => "Semantic Knowledge",
        MemoryType::Competence => "Competence / Skills",
        MemoryType::Working => "Working State",
        MemoryType::PlanGraph => "Plan Graphs",
    }
}

/// Groups by type (in display order), each group by current salience, highest first.
fn groups(hits: &[Hit]) -> Vec<(MemoryType, Vec<&Hit>)> {
    ORDER
        .iter()
        .filter_map(|t| {
            let mut list: Vec<&Hit> = hits.iter().filter(|h| h.record.memory_type == *t).collect();
            list.sort_by(|a, b| b.current_salience.total_cmp(&a.current_salience));
            (!list.is_empty()).then_some((*t, list))
        })
        .collect()
}

fn line(hit: &Hit) -> String {
    let r = &hit.record;
    let mut text = match &r.payload {
        Some(Payload::Semantic(s)) => format!("{} {} {}", s.subject, s.predicate, s.object),
        Some(Payload::Competence(c)) => {
            let p = &c.performance;
            format!("{} — {}/{} success ({})", c.skill, p.success_count, p.success_count + p.failure_count, r.summary)
        }
        Some(Payload::Working(_)) => format!("Last task: \"{}\" ({})", r.summary, r.updated_at),
        _ => r.summary.clone(),
    };
    if r.status == Status::Contested {
        text.push_str(" (contested)");
    }
    if let Some(o) = &hit.outdated {
        text.push_str(&format!(" ({})", o.describe()));
    }
    format!("- [{:.2}] {text}", hit.current_salience)
}

pub fn markdown(hits: &[Hit]) -> String {
    if hits.is_empty() {
        return String::new();
    }
    let mut out = vec!["## mneme Memory Context".to_string(), String::new()];
    for (t, list) in groups(hits) {
        out.push(format!("### {} ({} records)", label(t), list.len()));
        out.extend(list.into_iter().map(line));
        out.push(String::new());
    }
    out.join("\n")
}

/// The JSON block with the live facts under `facts` (subject, slot, value, since).
pub fn json_with_facts(facts: &[crate::truth::LiveFact], hits: &[Hit]) -> String {
    let mut value: serde_json::Value = serde_json::from_str(&json(hits)).unwrap_or_else(|_| json!({}));
    if !facts.is_empty() && value.is_object() {
        value["facts"] = json!(facts);
    }
    value.to_string()
}

pub fn json(hits: &[Hit]) -> String {
    let mut map = BTreeMap::new();
    for (t, list) in groups(hits) {
        let items: Vec<_> = list
            .into_iter()
            .map(|h| {
                let mut item = json!({
                    "id": h.record.id,
                    "salience": h.current_salience,
                    "summary": h.record.summary,
                    "status": h.record.status,
                    "content": h.record.payload,
                    "updatedAt": h.record.updated_at,
                });
                if let Some(o) = &h.outdated {
                    item["outdated"] = json!(o);
                }
                item
            })
            .collect();
        map.insert(t.as_str().to_string(), items);
    }
    serde_json::to_string_pretty(&map).unwrap_or_default()
}
