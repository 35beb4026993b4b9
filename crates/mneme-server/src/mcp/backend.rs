//! Where an MCP tool call's HTTP requests go: the daemon's own router, in process (the
//! `/mcp` endpoint, and `mneme mcp` when it runs the engine itself), or a running daemon
//! over loopback HTTP (`mneme mcp` beside `mneme serve`, so there is one writer).

use std::future::Future;
use std::pin::Pin;

use axum::Router;
use axum::body::Body;
use axum::http;
use serde_json::Value;
use tower_service::Service as _;

use super::tools::ToolError;

/// A boxed future, for the object-safe [`Backend`].
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Sends one HTTP API request; `Ok` is a 2xx answer's JSON, `Err` the API's error
/// message (for a tool error).
pub trait Backend: Send + Sync {
    fn send(&self, method: &'static str, path: String, body: Option<Value>) -> BoxFuture<'_, Result<Value, ToolError>>;
}

/// The error message of an API error body (`{"error": {"code", "message"}}`), else the
/// status and body.
fn api_error(status: u16, body: &Value) -> ToolError {
    match body.pointer("/error/message").and_then(Value::as_str) {
        Some(message) => {
            let code = body.pointer("/error/code").and_then(Value::as_str).unwrap_or("error");
            ToolError(format!("{code}: {message}"))
        }
        None => ToolError(format!("HTTP {status}: {body}")),
    }
}

/// The daemon's HTTP router, called in process with the caller's `Authorization` header:
/// the same authentication, policy and limits as a request from the network.
#[derive(Clone)]
pub struct RouterBackend {
    pub router: Router,
    pub authorization: Option<http::HeaderValue>,
    /// The verified client certificate's headers of the MCP request (`crate::tls`).
    pub client: Vec<(&'static str, http::HeaderValue)>,
}

impl std::fmt::Debug for RouterBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RouterBackend").field("authorized", &self.authorization.is_some()).finish_non_exhaustive()
    }
}

impl Backend for RouterBackend {
    fn send(&self, method: &'static str, path: String, body: Option<Value>) -> BoxFuture<'_, Result<Value, ToolError>> {
        Box::pin(async move {
            let mut request = http::Request::builder().method(method).uri(&path);
            if let Some(auth) = &self.authorization {
                request = request.header(http::header::AUTHORIZATION, auth.clone());
            }
            for (name, value) in &self.client {
                request = request.header(*name, value.clone());
            }
            let body = match body {
                Some(json) => {
                    request = request.header(http::header::CONTENT_TYPE, "application/json");
                    Body::from(json.to_string())
                }
                None => Body::empty(),
            };
            let request = request.body(body).map_err(|e| ToolError(format!("bad request to {path}: {e}")))?;
            // A Router is always ready: `call` without `poll_ready` is its documented use.
            let response = self.router.clone().call(request).await.map_err(|e| ToolError(format!("{path}: {e}")))?;
            let status = response.status().as_u16();
            let bytes = axum::body::to_bytes(response.into_body(), usize::MAX).await.map_err(|e| ToolError(format!("{path}: {e}")))?;
            let json: Value =
                serde_json::from_slice(&bytes).unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()));
            if (200..300).contains(&status) { Ok(json) } else { Err(api_error(status, &json)) }
        })
    }
}

/// A running daemon's HTTP API (loopback), with an API key when one is configured.
#[derive(Debug, Clone)]
pub struct RemoteBackend {
    pub base: String,
    pub key: Option<String>,
    pub client: reqwest::Client,
}

impl Backend for RemoteBackend {
    fn send(&self, method: &'static str, path: String, body: Option<Value>) -> BoxFuture<'_, Result<Value, ToolError>> {
        Box::pin(async move {
            let url = format!("{}{path}", self.base);
            let mut request = match method {
                "GET" => self.client.get(&url),
                _ => self.client.post(&url),
            };
            if let Some(key) = &self.key {
                request = request.bearer_auth(key);
            }
            if let Some(json) = body {
                request = request.json(&json);
            }
            let response = request.send().await.map_err(|e| ToolError(format!("the mneme daemon at {} did not answer: {e}", self.base)))?;
            let status = response.status().as_u16();
            let bytes = response.bytes().await.map_err(|e| ToolError(format!("{path}: {e}")))?;
            let json: Value =
                serde_json::from_slice(&bytes).unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()));
            if (200..300).contains(&status) { Ok(json) } else { Err(api_error(status, &json)) }
        })
    }
}
