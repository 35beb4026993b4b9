//! The tick's setup (sinain §6.1): the recent history from mneme's own records, whether
//! the agent is idle, and the session summary (the model's when one is configured, else
//! counted from the history).

use std::collections::BTreeMap;

use jiff::{SignedDuration, Timestamp};
use mneme_core::{MemoryType, Payload, Sensitivity};
use mneme_service::{Owner, RetrieveRequest, ServiceResult};
use serde_json::json;

use super::config::Stage;
use super::engine::{Reflector, StageOutcome, text};

/// Records of the last day the setup looks at (the seed's last 50 session events).
pub const HISTORY_LIMIT: usize = 50;

/// One event of the recent history, oldest first.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    Message {
        at: Timestamp,
        /// `user` or `assistant` when the record says (hooks' `user_message`,
        /// `assistant_message`; the conversation log's direction).
        role: Option<String>,
        sender: Option<String>,
        text: String,
        sensitivity: Sensitivity,
    },
    Tool {
        at: Timestamp,
        tool: String,
        /// What was run, in a few words (`action_of`).
        action: String,
        failure_mode: Option<String>,
        /// The files it acted on (`files_of`): what module file-pattern triggers match.
        files: Vec<String>,
    },
}

/// The files a tool call acted on: its `file_path`, `path`, `file`, `notebook_path`, and
/// the strings of a `files` or `paths` list.
pub fn files_of(args: &serde_json::Value) -> Vec<String> {
    let mut out: Vec<String> = ["file_path", "path", "file", "notebook_path"]
        .iter()
        .filter_map(|k| args.get(*k).and_then(serde_json::Value::as_str))
        .map(str::to_string)
        .collect();
    for k in ["files", "paths"] {
        if let Some(list) = args.get(k).and_then(serde_json::Value::as_array) {
            out.extend(list.iter().filter_map(serde_json::Value::as_str).map(str::to_string));
        }
    }
    out.retain(|f| !f.trim().is_empty());
    out
}

/// A tool call in a few words: its command (`command`, `cmd`, `script`), else the tool and
/// the file or URL it acted on, else the tool's name; at most 120 characters.
pub fn action_of(tool: &str, args: &serde_json::Value) -> String {
    let field = |names: &[&str]| names.iter().find_map(|n| args.get(*n).and_then(serde_json::Value::as_str)).map(str::trim);
    let action = match (field(&["command", "cmd", "script"]), field(&["file_path", "path", "file", "url"])) {
        (Some(c), _) if !c.is_empty() => c.split_whitespace().collect::<Vec<_>>().join(" "),
        (_, Some(target)) if !target.is_empty() => format!("{tool} {target}"),
        _ => tool.to_string(),
    };
    action.chars().take(120).collect()
}

/// The last day's session events.
#[derive(Debug, Clone, Default)]
pub struct History {
    pub events: Vec<Event>,
}

impl History {
    /// The last [`HISTORY_LIMIT`] session events of the 24 hours before `now`: episodic
    /// records and conversation-log entries, oldest first.
    pub fn gather(owner: &Owner<'_>, now: Timestamp) -> ServiceResult<History> {
        History::gather_window(owner, now, SignedDuration::from_hours(24), HISTORY_LIMIT)
    }

    /// The last `limit` session events (at most 1,000) of the `window` before `now`,
    /// oldest first.
    pub fn gather_window(owner: &Owner<'_>, now: Timestamp, window: SignedDuration, limit: usize) -> ServiceResult<History> {
        // The newest first, unranked; every sensitivity (what reaches a model is capped
        // separately, in `for_model`).
        let since = now - window;
        let recent = owner.recent(&RetrieveRequest {
            types: vec![MemoryType::Episodic],
            since: Some(since),
            limit,
            max_sensitivity: Some(Sensitivity::Critical),
            ..Default::default()
        })?;
        let mut events: Vec<Event> = recent
            .into_iter()
            .filter_map(|r| match r.payload? {
                // Messages only: outcome and note events are not something anyone said.
                Payload::Event(e) if e.event_kind == "message" || e.event_kind.ends_with("_message") => Some(Event::Message {
                    at: e.event_time.unwrap_or(r.created_at),
                    role: e.event_kind.strip_suffix("_message").map(str::to_string),
                    sender: e.sender,
                    text: e.text,
                    sensitivity: r.sensitivity,
                }),
                Payload::ToolOutput(t) => Some(Event::Tool {
                    at: r.created_at,
                    action: action_of(&t.tool, &t.args),
                    files: files_of(&t.args),
                    failure_mode: t.error.as_deref().map(mneme_core::normalize_error),
                    tool: t.tool,
                }),
                _ => None,
            })
            .collect();
        // The conversation log (messages an agent logs without hooks), the same window;
        // a message already in the records is not counted twice.
        let total = owner.sync_status()?.total as i64;
        if total > 0 {
            for c in owner.sync_fetch((total - limit as i64 + 1).max(1), total)? {
                let known = events.iter().any(|e| matches!(e, Event::Message { text, .. } if *text == c.content));
                if c.at < since || c.content == "[forgotten]" || known {
                    continue;
                }
                let (role, sender) = match c.direction {
                    mneme_service::Direction::Out => ("assistant", Some("assistant".to_string())),
                    _ => ("user", c.user_id.clone().or_else(|| Some("user".into()))),
                };
                let role = Some(role.to_string());
                events.push(Event::Message { at: c.at, role, sender, text: c.content, sensitivity: Sensitivity::Medium });
            }
        }
        events.sort_by_key(|e| match e {
            Event::Message { at, .. } | Event::Tool { at, .. } => *at,
        });
        // The last `limit` of both sources together.
        let drop = events.len().saturating_sub(limit);
        events.drain(..drop);
        Ok(History { events })
    }

    pub fn messages(&self) -> impl Iterator<Item = (&Option<String>, &str)> {
        self.events.iter().filter_map(|e| match e {
            Event::Message { sender, text, .. } => Some((sender, text.as_str())),
            Event::Tool { .. } => None,
        })
    }

    /// The normalised failure modes, oldest first.
    pub fn failure_modes(&self) -> Vec<String> {
        self.events
            .iter()
            .filter_map(|e| match e {
                Event::Tool { failure_mode: Some(m), .. } => Some(m.clone()),
                _ => None,
            })
            .collect()
    }

    /// The files the tool calls acted on, each once, in order.
    pub fn files_touched(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for e in &self.events {
            if let Event::Tool { files, .. } = e {
                for f in files {
                    if !out.contains(f) {
                        out.push(f.clone());
                    }
                }
            }
        }
        out
    }

    /// Tool → calls.
    pub fn tools(&self) -> BTreeMap<&str, usize> {
        let mut tools = BTreeMap::new();
        for e in &self.events {
            if let Event::Tool { tool, .. } = e {
                *tools.entry(tool.as_str()).or_default() += 1;
            }
        }
        tools
    }

    /// The history as text for a model: one line per event, messages above `max` left
    /// out, each line at most 300 characters.
    pub fn for_model(&self, max: Sensitivity) -> String {
        let mut out = String::new();
        for e in &self.events {
            let line = match e {
                Event::Message { sensitivity, .. } if *sensitivity > max => continue,
                Event::Message { at, sender, text, .. } => {
                    format!("{} {}: {}", at.strftime("%H:%M"), sender.as_deref().unwrap_or("message"), text.replace('\n', " "))
                }
                Event::Tool { at, tool, failure_mode, .. } => match failure_mode {
                    Some(m) => format!("{} tool {tool} failed: {m}", at.strftime("%H:%M")),
                    None => format!("{} tool {tool} ok", at.strftime("%H:%M")),
                },
            };
            out.extend(line.chars().take(300));
            out.push('\n');
        }
        out
    }

    /// The summary counted from the history.
    pub fn counted_summary(&self) -> String {
        let tools = self.tools();
        let mut top: Vec<(&&str, &usize)> = tools.iter().collect();
        top.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
        let top: Vec<String> = top.iter().take(3).map(|(t, n)| format!("{t} ×{n}")).collect();
        format!(
            "{} messages and {} tool calls in the last 24 hours{}; {} failed.",
            self.messages().count(),
            tools.values().sum::<usize>(),
            if top.is_empty() { String::new() } else { format!(" (top: {})", top.join(", ")) },
            self.failure_modes().len()
        )
    }
}

const SUMMARY_PROMPT: &str = "You summarise an AI agent's recent session for its own heartbeat. In 2-3 sentences, say \
what the user and the agent worked on, what went well and what failed. Answer only JSON: {\"summary\": \"...\"}";

/// The session summary: the model's (2–3 sentences, at most 600 characters), else the
/// counted one. With no events the counted one is used without asking.
pub fn summarize(engine: &Reflector, history: &History) -> (String, StageOutcome) {
    let counted = history.counted_summary();
    if history.events.is_empty() {
        return (counted, StageOutcome::fallback("no events to summarise"));
    }
    let user = json!({ "counts": counted, "events": history.for_model(engine.config.llm_max_sensitivity) }).to_string();
    match engine.ask(Stage::SessionSummary, SUMMARY_PROMPT, &user) {
        Ok(v) => match text(&v, "summary") {
            Some(s) => (s.chars().take(600).collect(), StageOutcome::ok()),
            None => (counted, StageOutcome::fallback("invalid model answer: no \"summary\" string")),
        },
        Err(reason) => (counted, StageOutcome::fallback(reason)),
    }
}
