//! `mneme reflect status` (and `GET /v1/reflect/status`, `/metrics`): what the heartbeat
//! has been doing, from its log and playbook alone.

use jiff::{SignedDuration, Timestamp};
use mneme_workspace::playbook::Playbook;
use mneme_workspace::{WorkspaceSettings, paths, playbook_log};
use serde::Serialize;
use serde_json::{Value, json};

use super::ReflectError;
use super::engine::Reflector;

/// Ticks listed in full.
pub const RECENT_TICKS: usize = 5;

/// The heartbeat's state.
#[derive(Debug, Clone, Serialize)]
pub struct Status {
    /// Whether a model is configured (else every thinking stage runs its fallback).
    pub model: bool,
    pub outbound: Value,
    #[serde(rename = "lastTick")]
    pub last_tick: Option<Timestamp>,
    /// Ticks in the last 24 hours.
    #[serde(rename = "ticks24h")]
    pub ticks_24h: u32,
    #[serde(rename = "curateDirective")]
    pub directive: Value,
    pub effectiveness: Value,
    #[serde(rename = "spawnState")]
    pub spawn_state: Value,
    /// Spawns queued and not settled yet (no outcome recorded by a later tick).
    #[serde(rename = "pendingSpawns")]
    pub pending_spawns: Vec<Value>,
    #[serde(rename = "playbookLines")]
    pub playbook_lines: usize,
    /// Stage → outcome → count over the last 24 hours.
    #[serde(rename = "stageOutcomes")]
    pub stage_outcomes: std::collections::BTreeMap<String, std::collections::BTreeMap<String, u32>>,
    /// Model calls and tokens over the last 24 hours.
    pub llm: Value,
    /// The last ticks, newest first.
    pub recent: Vec<Value>,
    /// The last delivered output (tip or insight).
    #[serde(rename = "lastOutput")]
    pub last_output: Option<Value>,
}

/// The status at `now`.
pub fn status(engine: &Reflector, settings: &WorkspaceSettings, now: Timestamp) -> Result<Status, ReflectError> {
    let today = settings.today(now);
    let lines = playbook_log::read(settings, today - jiff::Span::new().days(super::tick::STALE_ACTION_DAYS), today)?;
    let ticks: Vec<&Value> = lines.iter().filter(|l| l.kind == "tick").map(|l| &l.value).collect();
    let day_ago = now - SignedDuration::from_hours(24);
    let in_day = |l: &&playbook_log::LogLine| l.ts.is_some_and(|t| t > day_ago);
    let mut stage_outcomes: std::collections::BTreeMap<String, std::collections::BTreeMap<String, u32>> = Default::default();
    let (mut calls, mut prompt, mut completion) = (0u64, 0u64, 0u64);
    for line in lines.iter().filter(in_day) {
        let stages: Vec<(String, &Value)> = match line.kind.as_str() {
            "tick" => line.value["stages"].as_object().map(|m| m.iter().map(|(k, v)| (k.clone(), v)).collect()).unwrap_or_default(),
            "output" => vec![("insight".to_string(), &line.value["stage"])],
            _ => Vec::new(),
        };
        for (name, s) in stages {
            if let Some(status) = s["status"].as_str() {
                *stage_outcomes.entry(name).or_default().entry(status.to_string()).or_default() += 1;
            }
        }
        calls += line.value["llm"]["calls"].as_u64().unwrap_or(0);
        prompt += line.value["llm"]["promptTokens"].as_u64().unwrap_or(0);
        completion += line.value["llm"]["completionTokens"].as_u64().unwrap_or(0);
    }
    let settled: Vec<&str> =
        ticks.iter().flat_map(|t| t["spawnOutcomes"].as_array().into_iter().flatten()).filter_map(|o| o["spawnId"].as_str()).collect();
    let pending_spawns = ticks
        .iter()
        .filter(|t| t["actionTaken"]["queued"] == Value::Bool(true))
        .filter_map(|t| {
            let id = t["actionTaken"]["spawnId"].as_str()?;
            let reported = lines.iter().find(|l| l.kind == "spawn_result" && l.value["spawnId"] == id).map(|l| l.value["outcome"].clone());
            (!settled.contains(&id))
                .then(|| json!({ "spawnId": id, "task": t["actionTaken"]["task"], "since": t["ts"], "reported": reported }))
        })
        .collect();
    let playbook = paths::resolve(&settings.dir, paths::PLAYBOOK).ok().and_then(|p| std::fs::read_to_string(p).ok());
    let last = ticks.first();
    Ok(Status {
        model: engine.has_model(),
        outbound: json!(engine.config.outbound.target),
        last_tick: lines.iter().find(|l| l.kind == "tick").and_then(|l| l.ts),
        ticks_24h: lines.iter().filter(in_day).filter(|l| l.kind == "tick").count() as u32,
        directive: last.map_or(Value::Null, |t| t["feedback"]["curateDirective"].clone()),
        effectiveness: last.map_or(Value::Null, |t| t["feedback"]["effectiveness"].clone()),
        spawn_state: last.map_or(Value::Null, |t| t["spawnState"].clone()),
        pending_spawns,
        playbook_lines: playbook.map_or(0, |p| Playbook::parse(&p).body.len()),
        stage_outcomes,
        llm: json!({ "calls": calls, "promptTokens": prompt, "completionTokens": completion }),
        recent: ticks
            .iter()
            .take(RECENT_TICKS)
            .map(|t| {
                json!({
                    "tickId": t["tickId"], "ts": t["ts"], "idle": t["idle"], "action": t["actionTaken"]["kind"],
                    "directive": t["feedback"]["curateDirective"], "stages": t["stages"], "durationMs": t["durationMs"],
                })
            })
            .collect(),
        last_output: lines
            .iter()
            .find(|l| l.kind == "output" && l.value["skip"] == Value::Bool(false))
            .map(|l| json!({ "outputId": l.value["outputId"], "ts": l.value["ts"], "suggestion": l.value["suggestion"], "delivery": l.value["delivery"] })),
    })
}
