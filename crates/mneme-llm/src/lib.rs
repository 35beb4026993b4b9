//! mneme-llm: the one LLM client every engine uses (consolidation, reflection, the relay and
//! the inner life): OpenAI-compatible `/chat/completions`, routing by model name, a
//! per-request timeout, exponential backoff shared by all callers of one client, JSON mode,
//! and robust JSON extraction from what models actually return ([`extract_json`]).
//!
//! Time: the backoff reads Tokio's clock (`tokio::time::Instant`), so tests run it on
//! paused time instead of sleeping.
//!
//! Invariant: the API key never appears in `Debug` output or in an error message.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::time::Instant;

/// Shown instead of a secret.
pub const REDACTED: &str = "<redacted>";

/// One endpoint a model name routes to.
#[derive(Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Route {
    /// OpenAI-compatible base URL (`http://127.0.0.1:11434/v1`).
    pub endpoint: String,
    /// Bearer token sent to this endpoint; unset or empty: none. `mneme config show` never
    /// prints it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_key: Option<String>,
}

impl std::fmt::Debug for Route {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Route").field("endpoint", &self.endpoint).field("api_key", &self.api_key.as_ref().map(|_| REDACTED)).finish()
    }
}

/// What a client is built from.
#[derive(Clone, Debug, PartialEq)]
pub struct LlmSettings {
    /// Where a model without its own route goes; `None`: no LLM (every call is `Disabled`).
    pub default: Option<Route>,
    /// The model used when a request names none.
    pub model: String,
    /// Model name → endpoint, for models served elsewhere than the default.
    pub routes: BTreeMap<String, Route>,
    pub timeout: Duration,
    /// First backoff after a failure; doubles per consecutive failure, capped at 10×.
    pub backoff_base: Duration,
}

/// Why a call produced no answer. `Display` is the short form engines put in reports
/// (`disabled`, `backoff`, `timeout`, `HTTP 429`, ...).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum LlmError {
    #[error("disabled")]
    Disabled,
    /// An earlier failure's backoff is still in force; nothing was sent.
    #[error("backoff")]
    Backoff { remaining: Duration },
    #[error("timeout")]
    Timeout,
    #[error("HTTP {0}")]
    Status(u16),
    #[error("request failed: {0}")]
    Transport(String),
    /// The endpoint answered, but not with a usable message or JSON.
    #[error("{0}")]
    BadResponse(String),
}

impl LlmError {
    /// Whether this failure starts (or extends) the backoff. A disabled client or a call
    /// refused by the backoff itself does not.
    fn counts(&self) -> bool {
        !matches!(self, LlmError::Disabled | LlmError::Backoff { .. })
    }
}

/// One chat request.
#[derive(Debug, Clone)]
pub struct Chat<'a> {
    /// `None`: the client's default model.
    pub model: Option<&'a str>,
    pub system: &'a str,
    pub user: &'a str,
    pub temperature: f64,
    pub max_tokens: u32,
    /// Ask for `response_format: json_object`.
    pub json: bool,
    /// This request's timeout instead of the client's.
    pub timeout: Option<Duration>,
}

/// Tokens one call used, as the endpoint reported them (zero when it did not).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Usage {
    #[serde(rename = "promptTokens")]
    pub prompt_tokens: u64,
    #[serde(rename = "completionTokens")]
    pub completion_tokens: u64,
}

impl<'a> Chat<'a> {
    pub fn new(system: &'a str, user: &'a str) -> Self {
        Chat { model: None, system, user, temperature: 0.1, max_tokens: 2000, json: false, timeout: None }
    }

    pub fn json(mut self) -> Self {
        self.json = true;
        self
    }
}

#[derive(Debug, Default)]
struct Backoff {
    failures: u32,
    until: Option<Instant>,
}

/// The client. Cheap to share (`Arc`); its backoff is shared by every caller.
pub struct LlmClient {
    http: reqwest::Client,
    settings: LlmSettings,
    backoff: Mutex<Backoff>,
}

impl std::fmt::Debug for LlmClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LlmClient").field("settings", &self.settings).finish_non_exhaustive()
    }
}

impl LlmClient {
    pub fn new(settings: LlmSettings) -> Self {
        init_tls();
        let http = reqwest::Client::builder().timeout(settings.timeout).build().unwrap_or_default();
        LlmClient { http, settings, backoff: Mutex::new(Backoff::default()) }
    }

    /// Whether any endpoint is configured.
    pub fn enabled(&self) -> bool {
        self.settings.default.is_some() || !self.settings.routes.is_empty()
    }

    /// The endpoint a model name goes to.
    pub fn route(&self, model: &str) -> Option<&Route> {
        self.settings.routes.get(model).or(self.settings.default.as_ref())
    }

    /// Refuses while a backoff is in force.
    pub fn check_backoff(&self) -> Result<(), LlmError> {
        let b = self.backoff.lock().unwrap_or_else(|p| p.into_inner());
        match b.until {
            Some(until) if Instant::now() < until => Err(LlmError::Backoff { remaining: until - Instant::now() }),
            _ => Ok(()),
        }
    }

    /// Consecutive failures so far (0 after a success).
    pub fn failures(&self) -> u32 {
        self.backoff.lock().unwrap_or_else(|p| p.into_inner()).failures
    }

    fn succeeded(&self) {
        *self.backoff.lock().unwrap_or_else(|p| p.into_inner()) = Backoff::default();
    }

    /// Records a failure; returns the backoff now in force (base, 2×, 4×, 8×, then 10×).
    pub fn failed(&self) -> Duration {
        let mut b = self.backoff.lock().unwrap_or_else(|p| p.into_inner());
        b.failures = b.failures.saturating_add(1);
        let factor = 2u32.saturating_pow(b.failures - 1).min(10);
        let wait = self.settings.backoff_base * factor;
        b.until = Some(Instant::now() + wait);
        wait
    }

    /// The assistant message's text. Failures other than `Disabled` and `Backoff` start or
    /// extend the backoff; a success clears it.
    pub async fn chat(&self, chat: &Chat<'_>) -> Result<String, LlmError> {
        self.chat_usage(chat).await.map(|(text, _)| text)
    }

    /// [`chat`](Self::chat), with the tokens the call used.
    pub async fn chat_usage(&self, chat: &Chat<'_>) -> Result<(String, Usage), LlmError> {
        let model = chat.model.unwrap_or(&self.settings.model);
        let route = self.route(model).ok_or(LlmError::Disabled)?;
        self.check_backoff()?;
        let result = self.send(route, model, chat).await;
        match &result {
            Ok(_) => self.succeeded(),
            Err(e) if e.counts() => {
                self.failed();
            }
            Err(_) => {}
        }
        result
    }

    /// [`chat`](Self::chat) in JSON mode, the answer parsed with [`extract_json`]. A reply
    /// with no JSON in it counts as a failure.
    pub async fn chat_json(&self, chat: &Chat<'_>) -> Result<Value, LlmError> {
        self.chat_json_usage(chat).await.map(|(value, _)| value)
    }

    /// [`chat_json`](Self::chat_json), with the tokens the call used.
    pub async fn chat_json_usage(&self, chat: &Chat<'_>) -> Result<(Value, Usage), LlmError> {
        let chat = chat.clone().json();
        let (text, usage) = self.chat_usage(&chat).await?;
        let value = extract_json(&text).map_err(|e| {
            self.failed();
            LlmError::BadResponse(e)
        })?;
        Ok((value, usage))
    }

    async fn send(&self, route: &Route, model: &str, chat: &Chat<'_>) -> Result<(String, Usage), LlmError> {
        // An empty system prompt sends the user message alone (the relay's prompt is one
        // user message, as its seed sends it).
        let messages = if chat.system.is_empty() {
            serde_json::json!([{ "role": "user", "content": chat.user }])
        } else {
            serde_json::json!([{ "role": "system", "content": chat.system }, { "role": "user", "content": chat.user }])
        };
        let mut body = serde_json::json!({
            "model": model,
            "messages": messages,
            "temperature": chat.temperature,
            "max_tokens": chat.max_tokens,
        });
        if chat.json {
            body["response_format"] = serde_json::json!({ "type": "json_object" });
        }
        let endpoint = route.endpoint.trim_end_matches('/');
        let mut request = self.http.post(format!("{endpoint}/chat/completions")).json(&body);
        if let Some(key) = route.api_key.as_deref().filter(|k| !k.is_empty()) {
            request = request.bearer_auth(key);
        }
        if let Some(timeout) = chat.timeout {
            request = request.timeout(timeout);
        }
        let response =
            request.send().await.map_err(|e| if e.is_timeout() { LlmError::Timeout } else { LlmError::Transport(e.to_string()) })?;
        let status = response.status();
        if !status.is_success() {
            return Err(LlmError::Status(status.as_u16()));
        }
        let text =
            response.text().await.map_err(|e| if e.is_timeout() { LlmError::Timeout } else { LlmError::Transport(e.to_string()) })?;
        let envelope: Value = serde_json::from_str(&text).map_err(|e| LlmError::BadResponse(format!("response is not JSON: {e}")))?;
        let tokens = |key: &str| envelope.pointer(&format!("/usage/{key}")).and_then(Value::as_u64).unwrap_or(0);
        let usage = Usage { prompt_tokens: tokens("prompt_tokens"), completion_tokens: tokens("completion_tokens") };
        envelope
            .pointer("/choices/0/message/content")
            .and_then(Value::as_str)
            .map(|text| (text.to_string(), usage))
            .ok_or_else(|| LlmError::BadResponse("response has no choices[0].message.content".into()))
    }
}

/// The JSON value in a model's reply, however it was wrapped. Tried in order:
/// 1. the whole reply;
/// 2. the first ```` ``` ```` fenced block (with or without a `json` tag);
/// 3. scanning for `{` or `[`: the first balanced value that parses (prose before and
///    after), or, from a bracket that never closes, the rest repaired as if cut off (open
///    strings closed, a dangling key or comma dropped, brackets closed): what a
///    `max_tokens` limit leaves.
pub fn extract_json(raw: &str) -> Result<Value, String> {
    let trimmed = raw.trim();
    if let Ok(v) = serde_json::from_str::<Value>(trimmed) {
        return Ok(v);
    }
    if let Some(block) = fenced(trimmed)
        && let Ok(v) = serde_json::from_str::<Value>(block.trim())
    {
        return Ok(v);
    }
    // The first opening bracket that never closes holds the rest of the reply: a cut-off
    // document, repaired below. Balanced candidates that do not parse (`{braces}` in
    // prose) are skipped.
    let body = fenced_open(trimmed).unwrap_or(trimmed);
    let mut from = 0;
    while let Some(offset) = body[from..].find(['{', '[']) {
        let start = from + offset;
        let candidate = match balanced_end(&body[start..]) {
            Some(end) => std::borrow::Cow::Borrowed(&body[start..start + end]),
            None => std::borrow::Cow::Owned(repair_truncated(&body[start..])),
        };
        if let Ok(v) = serde_json::from_str::<Value>(&candidate) {
            return Ok(v);
        }
        from = start + 1;
    }
    Err("model output is not JSON (tried the whole reply, fenced blocks, balanced braces and truncation repair)".into())
}

/// The inside of the first complete fenced block.
fn fenced(s: &str) -> Option<&str> {
    let start = s.find("```")?;
    let after = &s[start + 3..];
    let body_start = after.find('\n').map(|i| i + 1).unwrap_or(0);
    let tag = after[..body_start].trim();
    let body_start = if tag.is_empty() || tag.chars().all(|c| c.is_ascii_alphanumeric()) { body_start } else { 0 };
    let body = &after[body_start..];
    let end = body.find("```")?;
    Some(&body[..end])
}

/// The inside of a fenced block that was never closed (a truncated reply).
fn fenced_open(s: &str) -> Option<&str> {
    let start = s.find("```")?;
    let after = &s[start + 3..];
    let body = after.find('\n').map(|i| &after[i + 1..]).unwrap_or(after);
    Some(body.split("```").next().unwrap_or(body))
}

/// Where a JSON text stands after a prefix: inside a string (just after a backslash?),
/// and the closers its open brackets need, innermost last.
#[derive(Default)]
struct Nesting {
    in_string: bool,
    escaped: bool,
    open: Vec<char>,
}

impl Nesting {
    /// Takes one more character; true when it closed the outermost bracket.
    fn feed(&mut self, c: char) -> bool {
        if self.in_string {
            match c {
                _ if self.escaped => self.escaped = false,
                '\\' => self.escaped = true,
                '"' => self.in_string = false,
                _ => {}
            }
            return false;
        }
        match c {
            '"' => self.in_string = true,
            '{' => self.open.push('}'),
            '[' => self.open.push(']'),
            '}' | ']' => return self.open.pop().is_some() && self.open.is_empty(),
            _ => {}
        }
        false
    }
}

/// Byte length of the balanced value `s` starts with (`s` starts with `{` or `[`).
fn balanced_end(s: &str) -> Option<usize> {
    let mut nesting = Nesting::default();
    s.char_indices().find(|&(_, c)| nesting.feed(c)).map(|(i, c)| i + c.len_utf8())
}

/// Closes what a cut-off JSON text left open: a string, then any dangling `,`, `:` or
/// key without a value, then the open brackets innermost first.
pub fn repair_truncated(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 8);
    let mut nesting = Nesting::default();
    for c in s.chars() {
        out.push(c);
        if nesting.feed(c) {
            return out;
        }
    }
    let Nesting { in_string, escaped, open: mut stack } = nesting;
    if escaped {
        out.pop();
    }
    if in_string {
        out.push('"');
    }
    loop {
        let t = out.trim_end();
        let cut = if let Some(rest) = t.strip_suffix(',') {
            Some(rest.len())
        } else if let Some(rest) = t.strip_suffix(':') {
            // `"key":` without its value: drop the key too.
            Some(dangling_key_start(rest))
        } else if stack.last() == Some(&'}') && ends_with_bare_key(t) {
            Some(dangling_key_start(t))
        } else {
            // A number, literal or word cut mid-way (`tru`, `1.`): drop it back to the last separator.
            let last = t.chars().last();
            match last {
                Some(c) if c.is_ascii_alphanumeric() || c == '.' || c == '-' || c == '+' => {
                    let keep = t.trim_end_matches(|c: char| c.is_ascii_alphanumeric() || c == '.' || c == '-' || c == '+');
                    let word = &t[keep.len()..];
                    if serde_json::from_str::<Value>(word).is_ok() { None } else { Some(keep.len()) }
                }
                _ => None,
            }
        };
        match cut {
            Some(len) if len < out.len() => out.truncate(len),
            _ => break,
        }
    }
    while let Some(close) = stack.pop() {
        out.push(close);
    }
    out
}

/// Whether `t` (inside an object) ends with a string that is a key without `:`, i.e. the
/// string follows `{` or `,`.
fn ends_with_bare_key(t: &str) -> bool {
    if !t.ends_with('"') {
        return false;
    }
    let start = dangling_key_start(t);
    let before = t[..start].trim_end();
    before.ends_with('{') || before.ends_with(',')
}

/// Where the string `t` ends with begins (its opening quote), or `t.len()` if it does not
/// end with one.
fn dangling_key_start(t: &str) -> usize {
    let t2 = t.trim_end();
    if !t2.ends_with('"') || t2.len() < 2 {
        return t2.len();
    }
    let bytes = t2.as_bytes();
    let mut i = t2.len() - 1;
    while i > 0 {
        i -= 1;
        if bytes[i] == b'"' {
            let mut backslashes = 0;
            let mut j = i;
            while j > 0 && bytes[j - 1] == b'\\' {
                backslashes += 1;
                j -= 1;
            }
            if backslashes % 2 == 0 {
                return i;
            }
        }
    }
    t2.len()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn direct_fenced_and_prose_wrapped_replies() {
        assert_eq!(extract_json(r#"{"a":1}"#).expect("ok"), json!({"a":1}));
        assert_eq!(extract_json("```json\n{\"a\":1}\n```").expect("ok"), json!({"a":1}));
        assert_eq!(extract_json("Sure! Here you go:\n```\n[1,2]\n```\nAnything else?").expect("ok"), json!([1, 2]));
        assert_eq!(extract_json(r#"The facts are {"a": "x}y"} and that is all."#).expect("ok"), json!({"a": "x}y"}));
        // A stray brace in the prose before the real object.
        assert_eq!(extract_json(r#"Use {braces} like {"a": [1, {"b": 2}]} here"#).expect("ok"), json!({"a": [1, {"b": 2}]}));
    }

    #[test]
    fn truncated_replies_are_repaired() {
        assert_eq!(
            extract_json(r#"{"facts": [{"s": "a", "o": "b"}, {"s": "c", "o": "d"#).expect("ok"),
            json!({"facts": [{"s": "a", "o": "b"}, {"s": "c", "o": "d"}]})
        );
        assert_eq!(extract_json(r#"{"facts": [{"s": "a"}, "#).expect("ok"), json!({"facts": [{"s": "a"}]}));
        assert_eq!(extract_json(r#"{"facts": [], "skills":"#).expect("ok"), json!({"facts": []}));
        assert_eq!(extract_json(r#"{"facts": [], "ski"#).expect("ok"), json!({"facts": []}));
        assert_eq!(extract_json(r#"{"n": 1, "ok": tr"#).expect("ok"), json!({"n": 1}));
        assert_eq!(extract_json("```json\n{\"a\": [1, 2").expect("ok"), json!({"a": [1, 2]}));
        assert_eq!(extract_json(r#"{"a": "quote \"inside"#).expect("ok"), json!({"a": "quote \"inside"}));
    }

    #[test]
    fn no_json_is_an_error() {
        assert!(extract_json("I could not find any facts.").is_err());
        assert!(extract_json("").is_err());
    }

    proptest::proptest! {
        /// Any prefix of a valid document either repairs into JSON or is reported as an
        /// error: never a panic, never an out-of-bounds slice.
        #[test]
        fn every_prefix_of_a_document_is_handled(cut in 0usize..200) {
            let doc = r#"{"facts": [{"subject": "Dana \"D\"", "predicate": "lives_in", "object": "Lisbon", "confidence": 0.9}], "competence": [], "corrections": [{"a": true, "b": null, "c": -1.5e3}]}"#;
            let cut = doc.char_indices().map(|(i, _)| i).nth(cut).unwrap_or(doc.len());
            let _ = extract_json(&doc[..cut]);
            let _ = extract_json(&format!("Here: {}", &doc[..cut]));
        }
    }
}

/// `[llm]`: settings of the one LLM client every engine shares. The default endpoint and
/// model are `[consolidation]`'s `llm_endpoint` / `llm_model` / `llm_api_key`; a model
/// named here goes to its own endpoint instead (`[llm.routes."gpt-4o-mini"]
/// endpoint = "https://api.openai.com/v1"`), so engines can use a small local model and a
/// larger remote one side by side.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LlmConfig {
    /// Model name → endpoint, for models served elsewhere than the default endpoint; a
    /// model not listed goes to `consolidation.llm_endpoint`.
    pub routes: BTreeMap<String, Route>,
}

/// Installs the process-wide TLS crypto provider (ring) for outgoing HTTPS (LLM and
/// embedding endpoints). Idempotent.
pub fn init_tls() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}
