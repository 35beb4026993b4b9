//! The outbound channel for tips and insights: the agent's inbox by default (a dispatch
//! delivered at its next hook), or opt-in a webhook (JSON POST) or the Telegram Bot API
//! (`sendMessage`). The Telegram token comes from an environment variable or a file and
//! never reaches a log line, an error message or the heartbeat log: request errors are
//! reported without their URL.

use jiff::Timestamp;
use mneme_service::Owner;
use serde_json::{Value, json};

use super::config::OutboundTarget;
use super::engine::Reflector;

/// Priority of tips and insights in the inbox (below a spawn instruction's 1).
pub const INBOX_PRIORITY: u8 = 2;

fn telegram_token(engine: &Reflector) -> Result<String, String> {
    let o = &engine.config.outbound;
    let token = match (&o.telegram_token_env, &o.telegram_token_file) {
        (Some(var), _) => {
            engine.telegram_token_from_env().map(str::to_string).ok_or_else(|| format!("environment variable {var} is not set"))?
        }
        (None, Some(path)) => std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read the token file {}: {e}", path.display()))?
            .lines()
            .next()
            .unwrap_or_default()
            .to_string(),
        (None, None) => return Err("no telegram_token_env or telegram_token_file".into()),
    };
    let token = token.trim().to_string();
    if token.is_empty() { Err("the Telegram token is empty".into()) } else { Ok(token) }
}

async fn post(http: &reqwest::Client, url: &str, body: &Value) -> Result<(), String> {
    let response = http.post(url).json(body).send().await.map_err(|e| e.without_url().to_string())?;
    let status = response.status();
    if status.is_success() { Ok(()) } else { Err(format!("HTTP {}", status.as_u16())) }
}

/// Delivers `text` (output `output_id`); the result as the log records it:
/// `{"channel": "inbox", "ok": true}` or with `"error"`.
pub fn deliver(engine: &Reflector, owner: &Owner<'_>, output_id: &str, kind: &str, text: &str, now: Timestamp) -> Value {
    let o = &engine.config.outbound;
    let result: Result<(), String> = match o.target {
        OutboundTarget::Inbox => {
            let text =
                format!("[Heartbeat {kind}] {text}\n(Report how useful this was: `mneme reflect feedback {output_id} --score -1..1`.)");
            owner.queue_dispatch(&format!("reflect:{kind}:{output_id}"), INBOX_PRIORITY, &text, now).map(|_| ()).map_err(|e| e.to_string())
        }
        OutboundTarget::Webhook => {
            let url = o.webhook_url.clone().unwrap_or_default();
            let body = json!({ "outputId": output_id, "kind": kind, "text": text, "ts": now.to_string() });
            engine.block_on(post(engine.http(), &url, &body)).unwrap_or_else(|| Err("no runtime for outbound calls".into()))
        }
        OutboundTarget::Telegram => match telegram_token(engine) {
            Err(e) => Err(e),
            Ok(token) => {
                let url = format!("{}/bot{token}/sendMessage", o.telegram_api.trim_end_matches('/'));
                let body = json!({ "chat_id": o.telegram_chat_id, "text": text });
                engine.block_on(post(engine.http(), &url, &body)).unwrap_or_else(|| Err("no runtime for outbound calls".into()))
            }
        },
    };
    let channel = json!(o.target);
    match result {
        Ok(()) => json!({ "channel": channel, "ok": true }),
        Err(e) => json!({ "channel": channel, "ok": false, "error": e }),
    }
}
