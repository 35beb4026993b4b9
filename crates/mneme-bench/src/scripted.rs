//! A scripted model for `mneme-bench learning --llm scripted`: a loopback
//! OpenAI-compatible endpoint that answers every heartbeat stage the way a cautious model
//! that follows its prompt would, from what the prompt hands it, and nothing else:
//!
//! - the session summary restates the counts it is given;
//! - the signal analyzer recommends, as a tip, the first lesson in its input that none of
//!   the last heartbeats acted on (the prompt's "a clear next action → telegram_tip"),
//!   else a skip;
//! - the feedback analyzer says which outputs scored well, from the scores it is given;
//! - the miner reports the files it was sent and proposes no pattern;
//! - the curator keeps the body it is given (mneme's laws put the lessons in);
//! - the insight synthesizer skips, saying so.
//!
//! So the arm measures mneme's model path (prompts, parsing, validation, the governed
//! curator, tips that carry their lesson) with a model that adds no knowledge of its own;
//! it says nothing about what a real model would add.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use anyhow::Result;
use axum::Json;
use axum::extract::State;
use axum::routing::post;
use mneme_llm::{LlmClient, LlmSettings, Route};
use mneme_reflect::config::ReflectionConfig;
use mneme_reflect::engine::{Exec, Reflector};
use serde_json::{Value, json};

/// The endpoint, served on its own runtime for as long as this lives.
pub struct ScriptedModel {
    rt: tokio::runtime::Runtime,
    url: String,
    calls: Arc<AtomicUsize>,
}

/// The first lesson of the signal analyzer's input that no recent heartbeat acted on.
fn next_tip(input: &Value) -> Option<String> {
    let acted: Vec<&str> = input["lastHeartbeats"].as_array()?.iter().filter_map(|h| h["actionTaken"]["task"].as_str()).collect();
    input["lessons"].as_array()?.iter().filter_map(Value::as_str).find(|l| !acted.contains(l)).map(str::to_string)
}

/// The answer to one request: its stage is told by how the system prompt opens.
fn answer(system: &str, input: &Value) -> Value {
    if system.starts_with("You summarise") {
        json!({ "summary": input["counts"].as_str().unwrap_or("No activity.") })
    } else if system.starts_with("You analyse") {
        match next_tip(input) {
            Some(task) => {
                json!({ "signals": ["a lesson not acted on yet"], "recommendedAction": { "action": "telegram_tip", "task": task, "confidence": 0.8 } })
            }
            None => json!({ "signals": [], "recommendedAction": { "action": "skip", "task": "", "confidence": 0.0 } }),
        }
    } else if system.starts_with("You interpret") {
        let high = input["high"].as_array().map_or(0, Vec::len);
        json!({ "interpretation": format!("{high} outputs scored best; keep tips that name the failing action and its fix.") })
    } else if system.starts_with("You deep-mine") {
        json!({ "findings": "Nothing beyond what the playbook says.", "newPatterns": [], "contradictions": [], "preferences": [], "minedSources": [] })
    } else if system.starts_with("You curate") {
        let body = input["body"].as_str().filter(|b| !b.trim().is_empty()).unwrap_or("# Playbook");
        json!({ "body": body })
    } else {
        json!({ "skip": true, "skipReason": "nothing non-obvious to add to the playbook and the logs" })
    }
}

async fn completions(State(calls): State<Arc<AtomicUsize>>, Json(body): Json<Value>) -> Json<Value> {
    calls.fetch_add(1, Ordering::Relaxed);
    let system = body["messages"][0]["content"].as_str().unwrap_or_default();
    let input: Value = body["messages"][1]["content"].as_str().and_then(|u| serde_json::from_str(u).ok()).unwrap_or(Value::Null);
    let content = answer(system, &input).to_string();
    Json(
        json!({ "choices": [{ "message": { "role": "assistant", "content": content } }], "usage": { "prompt_tokens": 0, "completion_tokens": 0 } }),
    )
}

impl ScriptedModel {
    /// Serves the endpoint on 127.0.0.1 (a free port).
    pub fn start() -> Result<ScriptedModel> {
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build()?;
        let calls = Arc::new(AtomicUsize::new(0));
        let app = axum::Router::new().route("/v1/chat/completions", post(completions)).with_state(calls.clone());
        let listener = rt.block_on(tokio::net::TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0))))?;
        let addr = listener.local_addr()?;
        rt.spawn(async move { axum::serve(listener, app).await });
        Ok(ScriptedModel { rt, url: format!("http://{addr}/v1"), calls })
    }

    /// A heartbeat engine whose every stage asks this endpoint.
    pub fn engine(&self) -> Reflector {
        let llm = LlmClient::new(LlmSettings {
            default: Some(Route { endpoint: self.url.clone(), api_key: None }),
            model: "scripted".into(),
            routes: BTreeMap::new(),
            timeout: Duration::from_secs(10),
            backoff_base: Duration::from_millis(1),
        });
        Reflector::new(ReflectionConfig::default(), Some(Arc::new(llm)), Some(Exec::Handle(self.rt.handle().clone())))
    }

    /// Requests answered so far.
    pub fn calls(&self) -> usize {
        self.calls.load(Ordering::Relaxed)
    }
}
