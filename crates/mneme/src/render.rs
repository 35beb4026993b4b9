//! Human-readable and `--json` output of each command. Human output of an ingest or a
//! revision is just the new id, so scripts can capture it with `$(...)`.

use anyhow::Result;
use mneme_core::MemoryRecord;
use mneme_service::{History, Hit, Metrics, OutcomeResult, PruneReport, SalienceChange};
use serde::Serialize;
use serde_json::json;

pub fn print_json(value: &impl Serialize) -> Result<()> {
    outln!("{}", serde_json::to_string_pretty(value)?);
    Ok(())
}

pub fn init(m: &Metrics, json: bool) -> Result<()> {
    if json {
        return print_json(m);
    }
    outln!(
        "store ready: {} (schema v{}, {}, {} records)",
        m.path,
        m.schema_version,
        if m.encrypted { "encrypted" } else { "not encrypted" },
        m.total_records
    );
    Ok(())
}

pub fn ingested(record: &MemoryRecord, json: bool) -> Result<()> {
    if json {
        return print_json(&json!({ "id": record.id, "record": record }));
    }
    outln!("{}", record.id);
    Ok(())
}

pub fn outcome(o: &OutcomeResult, json: bool) -> Result<()> {
    if json {
        return print_json(o);
    }
    outln!("{}", o.record.id);
    eprintln!("target {}: salience {:.3} -> {:.3}", o.target.id, o.salience_before, o.salience_after);
    Ok(())
}

pub fn revised(verb: &str, record: &MemoryRecord, json: bool) -> Result<()> {
    if json {
        return print_json(&json!({ "id": record.id, "record": record }));
    }
    outln!("{}", record.id);
    eprintln!("{verb} {} into {}", record.lineage.parent_ids.iter().map(|p| p.as_str()).collect::<Vec<_>>().join(", "), record.id);
    Ok(())
}

pub fn status_change(record: &MemoryRecord, json: bool) -> Result<()> {
    if json {
        return print_json(record);
    }
    outln!("{} is now {}", record.id, record.status);
    Ok(())
}

pub fn salience(change: &SalienceChange, json: bool) -> Result<()> {
    if json {
        return print_json(change);
    }
    outln!("{}: salience {:.3} -> {:.3}", change.id, change.before, change.after);
    Ok(())
}

pub fn record(record: &MemoryRecord, current_salience: f64, json: bool) -> Result<()> {
    if json {
        return print_json(&json!({ "record": record, "current_salience": current_salience }));
    }
    outln!("id          {}", record.id);
    outln!("type        {}", record.memory_type);
    outln!("status      {}{}", record.status, if record.pruned_at.is_some() { " (pruned)" } else { "" });
    outln!("summary     {}", record.summary);
    outln!("sensitivity {}", record.sensitivity);
    outln!("scope       {}", record.scope);
    if !record.tags.is_empty() {
        outln!("tags        {}", record.tags.join(", "));
    }
    outln!("confidence  {:.2}", record.confidence);
    outln!(
        "salience    {current_salience:.3} now (base {:.3} at {}{})",
        record.salience.base,
        record.salience.reinforced_at,
        if record.salience.pinned { ", pinned" } else { "" }
    );
    outln!(
        "lineage     {} by {}{}",
        record.lineage.operation.as_str(),
        record.lineage.actor,
        if record.lineage.parent_ids.is_empty() {
            String::new()
        } else {
            format!(" from {}", record.lineage.parent_ids.iter().map(|p| p.as_str()).collect::<Vec<_>>().join(", "))
        }
    );
    outln!("created     {}", record.created_at);
    if let Some(t) = record.event_time {
        outln!("event time  {t}");
    }
    match &record.payload {
        Some(p) => outln!("payload     {}", serde_json::to_string(p)?),
        None => outln!("payload     (dropped by pruning at {})", record.pruned_at.map(|t| t.to_string()).unwrap_or_default()),
    }
    Ok(())
}

pub fn history(h: &History, json: bool) -> Result<()> {
    if json {
        return print_json(h);
    }
    record(&h.record, h.current_salience, false)?;
    if !h.ancestors.is_empty() {
        outln!("\nancestors:");
        for b in &h.ancestors {
            outln!("  {} [{} {}, {}] {}", b.id, b.memory_type, b.status, b.operation.as_str(), b.summary);
        }
    }
    if !h.descendants.is_empty() {
        outln!("\ndescendants:");
        for b in &h.descendants {
            outln!("  {} [{} {}, {}] {}", b.id, b.memory_type, b.status, b.operation.as_str(), b.summary);
        }
    }
    if !h.links.is_empty() {
        outln!("\nlinks:");
        for l in &h.links {
            outln!("  {} --{}--> {} {}", l.from, l.kind, l.to, l.note);
        }
    }
    outln!("\naudit:");
    for a in &h.audit {
        let why = if a.rationale.is_empty() { String::new() } else { format!(" \"{}\"", a.rationale) };
        outln!("  #{} {} {} by {}{} {}", a.seq, a.at, a.action.as_str(), a.actor, why, a.details);
    }
    if h.hidden > 0 {
        outln!("\n({} related records hidden by your access)", h.hidden);
    }
    Ok(())
}

/// Ranked hits, each with its date (the event's time, a fact's `valid_from`, else when it
/// was written); `explain` adds each hit's score parts and the formula with the weights
/// that produced it.
pub fn hits(hits: &[Hit], explain: Option<&mneme_core::RankWeights>, json: bool) -> Result<()> {
    if json {
        return print_json(&hits);
    }
    if hits.is_empty() {
        eprintln!("no matching records");
        return Ok(());
    }
    for (rank, hit) in hits.iter().enumerate() {
        let r = &hit.record;
        let marker = if r.is_tombstone() || r.status != mneme_core::Status::Active { format!(" ({})", r.status) } else { String::new() };
        let date = match &r.payload {
            Some(mneme_core::Payload::Event(e)) => e.event_time,
            Some(mneme_core::Payload::Semantic(f)) => f.valid_from,
            _ => None,
        }
        .unwrap_or(r.created_at)
        .strftime("%Y-%m-%d");
        outln!("{:>2}. {} [{}{}] {date} {}", rank + 1, r.id, r.memory_type, marker, r.summary);
        if let Some(o) = &hit.outdated {
            outln!("    {}", o.describe());
        }
        if let Some(weights) = explain {
            let s = &hit.score;
            let num = |v: Option<f64>| {
                v.map_or("-".to_string(), |v| if v != 0.0 && v.abs() < 0.01 { format!("{v:.1e}") } else { format!("{v:.3}") })
            };
            outln!("    {}", s.formula(weights));
            outln!(
                "    relevance {} [lexical {} (bm25 {}) · dense {} (cosine {}) · speaker {} · neighbour {}]",
                num(s.relevance),
                num(s.lexical),
                num(s.bm25),
                num(s.dense),
                num(s.cosine),
                num(s.speaker),
                num(s.neighbour)
            );
        }
    }
    Ok(())
}

pub fn metrics(m: &Metrics, json: bool) -> Result<()> {
    if json {
        return print_json(m);
    }
    outln!("store        {} (schema v{}, {})", m.path, m.schema_version, if m.encrypted { "encrypted" } else { "not encrypted" });
    outln!("size         {} bytes", m.file_bytes);
    outln!("records      {} ({} pruned, {} pinned)", m.total_records, m.pruned, m.pinned);
    for (t, n) in &m.by_type {
        outln!("  {t:<11} {n:>8} total, {:>8} live", m.live_by_type.get(t).copied().unwrap_or(0));
    }
    for (s, n) in &m.by_status {
        outln!("  {s:<11} {n:>8}");
    }
    outln!("audit        {} entries", m.audit_entries);
    outln!("links        {}", m.links);
    Ok(())
}

pub fn prune(r: &PruneReport, json: bool) -> Result<()> {
    if json {
        return print_json(r);
    }
    for item in &r.items {
        outln!("{}  [{}]  {:>6.1} days  salience {:.3}  {}", item.id, item.memory_type, item.age_days, item.salience, item.summary);
    }
    if r.dry_run {
        eprintln!("{} records below salience {} (run with --prune to drop their payloads)", r.pruned.len(), r.threshold);
    } else {
        eprintln!("pruned {} records below salience {} (rows, lineage and audit kept)", r.pruned.len(), r.threshold);
    }
    Ok(())
}

/// What `forget` erased (or, in a dry run, would erase).
pub fn forget(r: &mneme_service::ForgetReport, json: bool) -> Result<()> {
    if json {
        return print_json(r);
    }
    if r.records.is_empty() {
        eprintln!("nothing matches: nothing to forget");
        return Ok(());
    }
    let verb = if r.dry_run { "would erase" } else { "erased" };
    outln!("{verb} {} records:", r.records.len());
    for item in &r.records {
        outln!("  {} [{}] ({}) {}", item.id, item.memory_type, item.because, item.summary);
    }
    if !r.dry_run {
        outln!(
            "conversation-log entries redacted: {}; audit texts redacted: {}; workspace search chunks dropped: {}",
            r.conversation_entries,
            r.redacted_mentions,
            r.workspace_chunks
        );
        for f in &r.files_rewritten {
            outln!("  removed from mneme's own file {f}");
        }
        for f in &r.workspace_files {
            outln!("  still in the agent's file {f} (mneme does not edit the agent's files): edit it to remove the text");
        }
        if !r.wal_truncated {
            outln!("the write-ahead log could not be truncated yet (a reader is busy); the next checkpoint finishes it");
        }
    }
    Ok(())
}
