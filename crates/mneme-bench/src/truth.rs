//! `mneme-bench truth`: the current-truth benchmark's protocol (truth-1,
//! `../shared/bench/truth/README.md`) on stdin/stdout, through the real pipeline: every
//! turn goes through the hook engine (`message_received` / `message_sent`: the message is
//! stored and the user's facts extracted and reconciled), `end_session` and `flush` run a
//! consolidation cycle (the LLM when `[consolidation]` names an endpoint), `ask` is the
//! service's `retrieve` and `context` is the `session_start` hook's block. Each
//! conversation gets a fresh temporary store whose clock follows the turns' times. The
//! configuration is a user's: hybrid retrieval when the embedding model is installed (or
//! named by `MNEME_MODEL_DIR`), lexical-only otherwise (`MNEME_EMBEDDING_PROVIDER=none`);
//! stderr says which.

use std::io::{BufRead, Write};
use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context as _, Result, anyhow};
use jiff::Timestamp;
use mneme_agent::consolidate::Consolidator;
use mneme_agent::hooks::{HookContext, HookEvent, HookInput, HookName, Hooks};
use mneme_core::{FixedClock, Payload, Sensitivity};
use mneme_llm::LlmClient;
use mneme_service::{Access, MemoryService, Ops, Principal, RetrieveRequest};
use mneme_store::StoreOptions;
use serde_json::{Value, json};

use crate::parse_time;

pub(crate) struct Conversation {
    id: String,
    service: Arc<MemoryService>,
    pub(crate) ops: Ops,
    hooks: Hooks,
    consolidator: Arc<Consolidator>,
    pub(crate) clock: Arc<FixedClock>,
    pub(crate) principal: Arc<Principal>,
    _dir: tempfile::TempDir,
}

impl Conversation {
    pub(crate) fn service(&self) -> &MemoryService {
        &self.service
    }
}

pub fn truth(config: &mneme_server::MnemeConfig, data_dir: &std::path::Path) -> Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let (llm, model) = pipeline("truth", config, data_dir)?;
    let stdin = std::io::stdin();
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let mut current: Option<Conversation> = None;
    for line in stdin.lock().lines() {
        let line = line.context("reading a request from stdin")?;
        if line.trim().is_empty() {
            continue;
        }
        let started = Instant::now();
        let request: Value = match serde_json::from_str(&line) {
            Ok(v) => v,
            Err(e) => {
                writeln!(out, "{}", json!({ "error": format!("request is not JSON: {e}") }))?;
                out.flush()?;
                continue;
            }
        };
        let op = request["op"].as_str().unwrap_or("");
        let result = match op {
            "hello" => Ok(json!({ "ok": true, "name": format!("mneme {}", env!("CARGO_PKG_VERSION")) })),
            "reset" => open(config, &llm, model.as_ref(), &request).map(|c| {
                current = Some(c);
                json!({ "ok": true })
            }),
            "end" => {
                writeln!(out, "{}", json!({ "ok": true }))?;
                out.flush()?;
                break;
            }
            _ => match current.as_ref() {
                None => Err(anyhow!("{op:?} before any reset")),
                Some(c) => runtime.block_on(answer(c, op, &request)),
            },
        };
        let mut reply = result.unwrap_or_else(|e| json!({ "error": format!("{e:#}") }));
        reply["elapsed_ms"] = json!(started.elapsed().as_secs_f64() * 1000.0);
        writeln!(out, "{reply}")?;
        out.flush()?;
    }
    Ok(())
}

/// The embedding model a benchmark runs with.
pub(crate) type Model = Arc<dyn mneme_embed::Embedder>;

/// What a user's configuration gives the pipeline: the LLM client (consolidation) and
/// the embedding model when installed; stderr says which (`bench` names the benchmark).
pub(crate) fn pipeline(
    bench: &str,
    config: &mneme_server::MnemeConfig,
    data_dir: &std::path::Path,
) -> Result<(Arc<LlmClient>, Option<Model>)> {
    let llm = Arc::new(LlmClient::new(config.llm_settings()));
    eprintln!("bench {bench}: LLM consolidation {}", if llm.enabled() { "on" } else { "off (offline extraction only)" });
    let model = match mneme_embed::choose(&config.embedding, data_dir).map_err(|e| anyhow!(e))? {
        mneme_embed::Choice::Model(m) => {
            eprintln!("bench {bench}: hybrid retrieval with {}", m.model_id());
            Some(m)
        }
        mneme_embed::Choice::LexicalOnly(why) => {
            eprintln!("bench {bench}: lexical-only retrieval ({why})");
            None
        }
    };
    Ok((llm, model))
}

pub(crate) fn open(
    config: &mneme_server::MnemeConfig,
    llm: &Arc<LlmClient>,
    model: Option<&Arc<dyn mneme_embed::Embedder>>,
    request: &Value,
) -> Result<Conversation> {
    let id = request["conversation"].as_str().unwrap_or("conversation").to_string();
    let dir = tempfile::tempdir().context("creating a temporary store")?;
    let clock = Arc::new(FixedClock::new(Timestamp::UNIX_EPOCH));
    let options = StoreOptions { path: dir.path().join("truth.db"), key: None, create: true, decay: config.decay };
    let service = Arc::new(MemoryService::open(options, config.service(), clock.clone())?);
    if let Some(m) = model {
        service.enable_embeddings(m.clone(), config.embedding.index)?;
    }
    let ops = Ops::new(service.clone(), false);
    let principal = Arc::new(Principal::internal("bench", Access::owner(), Sensitivity::Critical));
    let hooks = Hooks::new(ops.clone(), config.hooks.clone());
    let consolidator = Arc::new(Consolidator::new(ops.clone(), principal.clone(), &config.consolidation, llm.clone()));
    Ok(Conversation { id, service, ops, hooks, consolidator, clock, principal, _dir: dir })
}

fn at(request: &Value) -> Result<Timestamp> {
    request["time"].as_str().and_then(parse_time).ok_or_else(|| anyhow!("missing or unreadable time"))
}

pub(crate) async fn answer(c: &Conversation, op: &str, request: &Value) -> Result<Value> {
    let ctx = |session: &str| HookContext {
        session_id: Some(format!("{}/s{session}", c.id)),
        channel_id: Some("bench".into()),
        ..HookContext::default()
    };
    match op {
        "turn" => {
            let time = at(request)?;
            c.clock.set(time);
            let role = request["role"].as_str().unwrap_or("user");
            let name = if role == "assistant" { HookName::MessageSent } else { HookName::MessageReceived };
            let session = request["session"].to_string();
            let event = HookEvent {
                content: request["text"].as_str().map(str::to_string),
                from: request["speaker"].as_str().filter(|_| role != "assistant").map(str::to_string),
                timestamp: Some(time.to_string()),
                ..HookEvent::default()
            };
            let mut buffer = Vec::new();
            let outcome = c.hooks.handle(&c.principal, name, HookInput { event, ctx: ctx(&session) }, &mut buffer);
            c.consolidator.buffer(buffer);
            match outcome.error {
                Some(e) => Err(anyhow!(e)),
                None => Ok(json!({ "ok": true })),
            }
        }
        "end_session" | "flush" => {
            if let Ok(time) = at(request) {
                c.clock.set(time);
            }
            let report = c.consolidator.run_cycle().await;
            // The daemon's backfill, between sessions: asks then find every vector ready
            // (and their latency is recall's, not the embedding backlog's).
            c.service.embed_pending(64, false, &mut |_| {})?;
            Ok(json!({ "ok": true, "errors": report.errors.len() }))
        }
        "ask" => {
            c.clock.set(at(request)?);
            let k = request["k"].as_u64().unwrap_or(10).clamp(1, 100) as usize;
            let retrieve = RetrieveRequest {
                query: request["question"].as_str().unwrap_or("").to_string(),
                max_sensitivity: Some(Sensitivity::Critical),
                limit: k,
                ..RetrieveRequest::default()
            };
            let hits = c.ops.retrieve(&c.principal, &retrieve)?;
            let hits: Vec<Value> = hits
                .iter()
                .map(|h| {
                    let r = &h.record;
                    let (text, time) = match &r.payload {
                        Some(Payload::Semantic(f)) => {
                            (format!("{} {} {}", f.subject, f.predicate, f.object), f.valid_from.unwrap_or(r.created_at))
                        }
                        Some(Payload::Event(e)) => (r.summary.clone(), e.event_time.unwrap_or(r.created_at)),
                        _ => (r.summary.clone(), r.created_at),
                    };
                    json!({ "text": text, "time": time.to_string(), "score": h.score.score, "parts": h.score })
                })
                .collect();
            Ok(json!({ "hits": hits }))
        }
        "context" => {
            c.clock.set(at(request)?);
            let mut buffer = Vec::new();
            let outcome = c.hooks.handle(
                &c.principal,
                HookName::SessionStart,
                HookInput { event: HookEvent::default(), ctx: ctx("next") },
                &mut buffer,
            );
            match outcome.error {
                Some(e) => Err(anyhow!(e)),
                None => Ok(json!({ "text": outcome.context.unwrap_or_default() })),
            }
        }
        other => Err(anyhow!("unknown op {other:?}")),
    }
}
