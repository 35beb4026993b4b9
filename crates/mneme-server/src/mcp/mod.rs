//! MCP (Model Context Protocol): mneme's memory as tools, resources and prompts for any
//! agent host (Claude Code, Claude Desktop, Cursor, Codex), over stdio (`mneme mcp`) and
//! Streamable HTTP (the daemon's `/mcp`). Built on `rmcp`, the official Rust SDK.
//!
//! A thin adapter like the gRPC and HTTP front ends: every tool call becomes requests to
//! the HTTP API ([`tools::call`]) through a [`Backend`]. On the daemon, that is its own
//! router in process, with the MCP request's `Authorization` header, so keys, principals,
//! sensitivity ceilings, scopes, limits and error messages are the HTTP API's exactly.

pub mod backend;
pub mod tools;

use std::sync::Arc;

use axum::Router;
use axum::http;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, GetPromptRequestParams, GetPromptResponse, GetPromptResult,
    Implementation, ListPromptsResult, ListResourceTemplatesResult, ListResourcesResult, ListToolsResult, PaginatedRequestParams,
    ProgressNotificationParam, Prompt, PromptArgument, PromptMessage, ReadResourceRequestParams, ReadResourceResponse, ReadResourceResult,
    Resource, ResourceContents, ResourceTemplate, Role, ServerCapabilities, ServerConfig, Tool, ToolAnnotations,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler};
use serde_json::{Value, json};

pub use axum::http::HeaderValue;
pub use backend::{Backend, RemoteBackend, RouterBackend};

use crate::app::App;

/// Where the tool calls of one MCP server go.
#[derive(Debug, Clone)]
pub enum Door {
    /// The daemon's HTTP router in process; `authorization` is used when the MCP request
    /// carries none (stdio: the key from `MNEME_API_KEY`, if any).
    Router { router: Router, authorization: Option<HeaderValue> },
    /// A running daemon over loopback HTTP.
    Remote(RemoteBackend),
}

/// The MCP server: tools over a [`Door`], and as resources the records and the daemon's
/// workspace files (`/v1/workspace/files`, owner only), both through the same door.
#[derive(Debug, Clone)]
pub struct MnemeMcp {
    door: Door,
    /// The tools offered: all, or only these (`--tools memory`).
    only: Option<&'static [&'static str]>,
    /// The end user this session speaks for (`mneme mcp --user`); over HTTP the request's
    /// `X-Mneme-User` header says it instead.
    user: Option<String>,
}

/// Tools whose calls report progress (start and end) when the client asks for it.
const LONG_TOOLS: &[&str] = &["reflection", "inner", "modules", "forget"];

/// The header that binds an MCP request over HTTP to an end user.
pub const USER_HEADER: &str = "x-mneme-user";

const INSTRUCTIONS: &str = "mneme is this agent's long-term memory. At the start of a conversation call \
session_context (with the user's id when you know it). Before answering questions about the user, their \
preferences, people, projects or past conversations, call recall. When the user tells you something worth \
keeping, call remember (events, in full) or remember_fact (subject/predicate/object). When something you \
remember turns out wrong, call correct with a rationale: history keeps the old value. Use forget only when \
someone asks for their data to be erased.";

impl MnemeMcp {
    pub fn new(door: Door) -> Self {
        MnemeMcp { door, user: None, only: None }
    }

    /// Offers only `tools` (listed and callable).
    pub fn only_tools(mut self, tools: Option<&'static [&'static str]>) -> Self {
        self.only = tools;
        self
    }

    fn offers(&self, name: &str) -> bool {
        self.only.is_none_or(|only| only.contains(&name))
    }

    /// Binds the session to an end user: `recall`, `remember`, `remember_fact` and
    /// `session_context` are theirs unless a call names a user or scope itself.
    pub fn for_user(mut self, user: Option<String>) -> Self {
        self.user = user.filter(|u| !u.trim().is_empty());
        self
    }

    /// The backend for one request: over HTTP, the request's own `Authorization` header.
    fn backend(&self, context: &RequestContext<RoleServer>) -> Box<dyn Backend> {
        match &self.door {
            Door::Router { router, authorization } => {
                let parts = context.extensions.get::<http::request::Parts>();
                let from_request = parts.and_then(|p| p.headers.get(http::header::AUTHORIZATION).cloned());
                // The client certificate the connection verified goes along, as the
                // connection layer set it.
                let client = parts
                    .map(|p| {
                        [crate::tls::CLIENT_SUBJECT, crate::tls::CLIENT_CN, crate::tls::CLIENT_PEER]
                            .into_iter()
                            .filter_map(|name| Some((name, p.headers.get(name)?.clone())))
                            .collect()
                    })
                    .unwrap_or_default();
                Box::new(RouterBackend { router: router.clone(), authorization: from_request.or_else(|| authorization.clone()), client })
            }
            Door::Remote(remote) => Box::new(remote.clone()),
        }
    }

    /// The end user the request speaks for: its `X-Mneme-User` header over HTTP, else the
    /// session's (`mneme mcp --user`).
    fn session_user(&self, context: &RequestContext<RoleServer>) -> Option<String> {
        let header = context
            .extensions
            .get::<http::request::Parts>()
            .and_then(|p| p.headers.get(USER_HEADER))
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        header.or_else(|| self.user.clone()).filter(|u| !u.trim().is_empty())
    }

    /// The workspace's Markdown files (relative paths): the daemon's `/v1/workspace/files`
    /// (owner only), so the daemon's workspace and its policy, whoever serves MCP.
    async fn workspace_files(&self, backend: &dyn Backend) -> Result<Vec<String>, McpError> {
        let listing = backend.send("GET", "/v1/workspace/files".into(), None).await.map_err(|e| McpError::invalid_request(e.0, None))?;
        Ok(listing["files"]
            .as_array()
            .map(|files| files.iter().filter_map(|f| f.as_str().map(str::to_string)).collect())
            .unwrap_or_default())
    }
}

/// Wraps the API's JSON answer as a tool result: the JSON as text, and as structured
/// content when it is an object.
fn tool_result(result: Result<Value, tools::ToolError>) -> CallToolResult {
    match result {
        Ok(value) if value.is_object() => CallToolResult::structured(value),
        Ok(value) => CallToolResult::success(vec![ContentBlock::text(value.to_string())]),
        Err(e) => CallToolResult::error(vec![ContentBlock::text(e.0)]),
    }
}

/// A tool as listed. Its annotations carry only what differs from MCP's defaults (not
/// read-only, destructive, not idempotent, open world), and the title once, on the tool:
/// the list is part of every session's context.
fn as_tool(spec: &tools::ToolSpec) -> Tool {
    let schema = spec.schema.as_object().cloned().unwrap_or_default();
    let mut annotations = ToolAnnotations::default();
    if spec.read_only {
        annotations.read_only_hint = Some(true);
    } else {
        annotations.destructive_hint = Some(spec.destructive);
        annotations.idempotent_hint = spec.idempotent.then_some(true);
    }
    annotations.open_world_hint = Some(false);
    Tool::new(spec.name, spec.description, Arc::new(schema)).with_title(spec.title).with_annotations(annotations)
}

/// The tools of `mneme mcp --tools memory`: the memory itself, without the agent's
/// workspace loops (sync, inner life, modules, reflection), for hosts that only want
/// memory in their context.
pub const MEMORY_TOOLS: &[&str] =
    &["remember", "remember_fact", "recall", "show", "correct", "retract", "contest", "feedback", "session_context", "forget"];

const RECORD_PREFIX: &str = "mneme://records/";
const FILE_PREFIX: &str = "mneme://workspace/";
/// `mneme://users/{user}/facts`: what is true now about one end user.
const USERS_PREFIX: &str = "mneme://users/";
const FACTS_SUFFIX: &str = "/facts";
/// The effective playbook the agent follows (owner only).
const PLAYBOOK_URI: &str = "mneme://playbook";

/// What is true now about `user`: their live facts (`user:<id>` scope), newest first, one
/// Markdown line each with the date it was recorded.
async fn user_facts(backend: &dyn Backend, user: &str) -> Result<String, tools::ToolError> {
    let scope = mneme_core::Scope::user(user).ok_or_else(|| tools::ToolError(format!("{user:?} names no user")))?;
    let request = json!({ "query": "", "types": ["semantic"], "scopes": [scope.as_str()], "limit": 200 });
    let answer = backend.send("POST", "/v1/retrieve".into(), Some(request)).await?;
    let mut facts: Vec<(String, String)> = answer["hits"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|h| &h["record"])
        .filter(|r| r["scope"] == scope.as_str())
        .map(|r| {
            let p = &r["payload"];
            let text = [&p["subject"], &p["predicate"], &p["object"]].iter().filter_map(|v| v.as_str()).collect::<Vec<_>>().join(" ");
            let at = r["created_at"].as_str().unwrap_or_default().to_string();
            (at, text)
        })
        .collect();
    facts.sort_by(|a, b| b.0.cmp(&a.0));
    let mut out = format!("# What is true now about {user}\n\n");
    if facts.is_empty() {
        out.push_str("Nothing is known yet.\n");
    }
    for (at, text) in facts {
        out.push_str(&format!("- {text} (recorded {})\n", at.get(..10).unwrap_or(&at)));
    }
    Ok(out)
}

fn prompts() -> Vec<Prompt> {
    vec![
        Prompt::new(
            "memory-sync",
            Some("Summarize the conversations not yet in the memory files, then checkpoint"),
            Some(vec![PromptArgument::new("max_conversations").with_description("At most this many at once (default 50)")]),
        ),
        Prompt::new(
            "reflect-on-session",
            Some("Review this session: what to remember, what to correct, what helped"),
            Some(vec![PromptArgument::new("user_id").with_description("The user the session served")]),
        ),
    ]
}

fn prompt_text(name: &str, args: &serde_json::Map<String, Value>) -> Option<String> {
    let arg = |n: &str| args.get(n).and_then(Value::as_str).map(str::to_string);
    match name {
        "memory-sync" => {
            let max = arg("max_conversations").unwrap_or_else(|| "50".into());
            Some(format!(
                "Bring the memory files up to date with the conversation log.\n\
                 1. Call agent_state with op=sync_status. If nothing is unsummarized, stop.\n\
                 2. Call agent_state with op=sync_fetch for at most {max} conversations from the first unsummarized id.\n\
                 3. Update the workspace's memory files (profile, people, projects, decisions) with what matters; \
                    search_files finds where things are. Record new facts with remember_fact and changed ones with correct.\n\
                 4. Call memory_sync with op=checkpoint, end_id = the last id you covered, and a one-line summary.\n\
                 Never copy secrets or `<private>` content into the files."
            ))
        }
        "reflect-on-session" => {
            let user = arg("user_id").map(|u| format!(" (user {u})")).unwrap_or_default();
            Some(format!(
                "Reflect on this session{user} before it ends.\n\
                 - New lasting facts about the user or their work: remember_fact (scope user:<id> when they are about one user).\n\
                 - Memories that proved wrong: correct them with a rationale, or contest them when unsure.\n\
                 - Memories that helped: feedback op=reinforce; ones that misled: op=penalize.\n\
                 - One remember call with what was decided and what is still open.\n\
                 Keep it short; do not store what is already remembered."
            ))
        }
        _ => None,
    }
}

impl ServerHandler for MnemeMcp {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().enable_resources().enable_prompts().build())
            .with_server_info(Implementation::new("mneme", env!("CARGO_PKG_VERSION")))
            .with_instructions(INSTRUCTIONS)
    }

    async fn list_tools(&self, _: Option<PaginatedRequestParams>, _: RequestContext<RoleServer>) -> Result<ListToolsResult, McpError> {
        Ok(ListToolsResult::with_all_items(tools::tools().iter().filter(|t| self.offers(t.name)).map(as_tool).collect()))
    }

    async fn call_tool(&self, request: CallToolRequestParams, context: RequestContext<RoleServer>) -> Result<CallToolResponse, McpError> {
        if !tools::tools().iter().any(|t| t.name == request.name && self.offers(t.name)) {
            let names: Vec<&str> = tools::tools().iter().filter(|t| self.offers(t.name)).map(|t| t.name).collect();
            return Err(McpError::invalid_params(format!("no tool named {:?}; the tools are {}", request.name, names.join(", ")), None));
        }
        let backend = self.backend(&context);
        let user = self.session_user(&context);
        let mut args = request.arguments.unwrap_or_default();
        // The calls that can take a while (a heartbeat tick, an inner-life job, a module's
        // extraction, an erasure) report their start and end to a client that asked for
        // progress.
        let progress = context.meta.get_progress_token().filter(|_| LONG_TOOLS.contains(&request.name.as_ref()));
        let notify = |step: f64, message: String| {
            let peer = context.peer.clone();
            let token = progress.clone();
            async move {
                if let Some(token) = token {
                    let _ = peer.notify_progress(ProgressNotificationParam::new(token, step).with_total(1.0).with_message(message)).await;
                }
            }
        };
        notify(0.0, format!("{}: started", request.name)).await;
        let result = match tools::bind_user(&request.name, &mut args, user.as_deref()) {
            Ok(()) => tools::call(backend.as_ref(), &request.name, args).await,
            Err(e) => Err(e),
        };
        notify(1.0, format!("{}: {}", request.name, if result.is_ok() { "done" } else { "failed" })).await;
        Ok(tool_result(result).into())
    }

    async fn list_resources(
        &self,
        _: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        let backend = self.backend(&context);
        // Not an owner: no files to list (records are reached through the template).
        let files = self.workspace_files(backend.as_ref()).await.unwrap_or_default();
        let mut resources: Vec<Resource> = Vec::new();
        if let Some(user) = self.session_user(&context) {
            resources.push(
                Resource::new(format!("{USERS_PREFIX}{user}{FACTS_SUFFIX}"), format!("what is true now about {user}"))
                    .with_mime_type("text/markdown")
                    .with_description("The session's end user: their live facts, newest first, with dates"),
            );
        }
        if backend.send("GET", "/v1/reflect/playbook".into(), None).await.is_ok() {
            resources.push(
                Resource::new(PLAYBOOK_URI, "playbook")
                    .with_mime_type("text/markdown")
                    .with_description("The effective playbook the agent follows (base, modules and what reflection learned)"),
            );
        }
        resources.extend(files.into_iter().map(|f| {
            Resource::new(format!("{FILE_PREFIX}{f}"), f.clone())
                .with_mime_type("text/markdown")
                .with_description("A workspace memory file")
        }));
        Ok(ListResourcesResult::with_all_items(resources))
    }

    async fn list_resource_templates(
        &self,
        _: Option<PaginatedRequestParams>,
        _: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, McpError> {
        Ok(ListResourceTemplatesResult::with_all_items(vec![
            ResourceTemplate::new(format!("{RECORD_PREFIX}{{id}}"), "memory record")
                .with_mime_type("application/json")
                .with_description("One memory record by id, as JSON (tombstones included)"),
            ResourceTemplate::new(format!("{USERS_PREFIX}{{user}}{FACTS_SUFFIX}"), "what is true now about a user")
                .with_mime_type("text/markdown")
                .with_description("An end user's live facts (scope user:<id>), newest first, with dates"),
        ]))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        let backend = self.backend(&context);
        let uri = request.uri.clone();
        if let Some(id) = uri.strip_prefix(RECORD_PREFIX) {
            let result = tools::call(backend.as_ref(), "show", serde_json::Map::from_iter([("id".to_string(), json!(id))])).await;
            return match result {
                Ok(record) => {
                    Ok(ReadResourceResult::new(vec![ResourceContents::text(record.to_string(), uri).with_mime_type("application/json")])
                        .into())
                }
                Err(e) => Err(McpError::resource_not_found(e.0, Some(json!({ "uri": request.uri })))),
            };
        }
        if let Some(user) = uri.strip_prefix(USERS_PREFIX).and_then(|rest| rest.strip_suffix(FACTS_SUFFIX)) {
            return match user_facts(backend.as_ref(), user).await {
                Ok(text) => Ok(ReadResourceResult::new(vec![ResourceContents::text(text, uri).with_mime_type("text/markdown")]).into()),
                Err(e) => Err(McpError::resource_not_found(e.0, Some(json!({ "uri": request.uri })))),
            };
        }
        if uri == PLAYBOOK_URI {
            return match backend.send("GET", "/v1/reflect/playbook".into(), None).await {
                Ok(p) => {
                    let text = p["effective"]
                        .as_str()
                        .or_else(|| p["base"].as_str())
                        .unwrap_or("(no playbook yet: the first reflection tick writes it)");
                    Ok(ReadResourceResult::new(vec![ResourceContents::text(text, uri).with_mime_type("text/markdown")]).into())
                }
                Err(e) => Err(McpError::resource_not_found(e.0, Some(json!({ "uri": request.uri })))),
            };
        }
        if let Some(rel) = uri.strip_prefix(FILE_PREFIX) {
            // The route refuses a path its listing does not offer (`../`, a made-up name).
            let query = format!("/v1/workspace/file?path={}", percent_encoded(rel));
            return match backend.send("GET", query, None).await {
                Ok(file) => {
                    let text = file["text"].as_str().unwrap_or_default().to_string();
                    Ok(ReadResourceResult::new(vec![ResourceContents::text(text, uri).with_mime_type("text/markdown")]).into())
                }
                Err(e) => Err(McpError::resource_not_found(e.0, Some(json!({ "uri": request.uri })))),
            };
        }
        Err(McpError::resource_not_found(format!("no resource {uri}"), Some(json!({ "uri": request.uri }))))
    }

    async fn list_prompts(&self, _: Option<PaginatedRequestParams>, _: RequestContext<RoleServer>) -> Result<ListPromptsResult, McpError> {
        Ok(ListPromptsResult::with_all_items(prompts()))
    }

    async fn get_prompt(&self, request: GetPromptRequestParams, _: RequestContext<RoleServer>) -> Result<GetPromptResponse, McpError> {
        let args = request.arguments.unwrap_or_default();
        let text = prompt_text(&request.name, &args).ok_or_else(|| {
            McpError::invalid_params(format!("no prompt named {:?}; the prompts are memory-sync, reflect-on-session", request.name), None)
        })?;
        Ok(GetPromptResult::new(vec![PromptMessage::new_text(Role::User, text)]).into())
    }
}

/// The daemon's `/mcp` endpoint (Streamable HTTP) over its HTTP `api` router. Requests
/// without valid credentials (when keys are required) are refused with 401 before MCP
/// sees them; each tool call is then checked again by the API route it uses.
pub fn http_endpoint(app: &Arc<App>, api: Router) -> Router {
    use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
    use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
    let door = Door::Router { router: api, authorization: None };
    // `Host` and `Origin` are checked for every route on the port, /mcp included, by the
    // daemon's browser guard (`crate::guard`, with `[server] allowed_hosts`), so the SDK's
    // own narrower list would only refuse names the configuration allows.
    let config = StreamableHttpServerConfig::default().disable_allowed_hosts();
    let server = MnemeMcp::new(door);
    let service = StreamableHttpService::new(move || Ok(server.clone()), Arc::new(LocalSessionManager::default()), config);
    let auth_app = app.clone();
    let limit = app.config.server.max_request_bytes;
    Router::new().nest_service("/mcp", service).layer(axum::middleware::from_fn(
        move |request: axum::extract::Request, next: axum::middleware::Next| {
            let app = auth_app.clone();
            async move {
                if let Err(e) = app.auth.authenticate(&crate::auth::Credentials::from_headers(request.headers())) {
                    return axum::response::IntoResponse::into_response(crate::http::HttpError(e));
                }
                let delete = request.method() == http::Method::DELETE;
                let request = match checked(request, limit).await {
                    Ok(request) => request,
                    Err(refusal) => return refusal,
                };
                let mut response = next.run(request).await;
                // A session ended: 200, which the SDKs take as done (the transport answers
                // 202, which the Python SDK logs as a failed termination).
                if delete && response.status() == http::StatusCode::ACCEPTED {
                    *response.status_mut() = http::StatusCode::OK;
                }
                response
            }
        },
    ))
}

/// A JSON-RPC request whose required parameters are missing (`tools/call` without a tool
/// name, `resources/read` without a URI, `prompts/get` without a name): the error to
/// answer, `-32602 Invalid params`, naming what is missing. The SDK would answer
/// "method not found", which sends an agent looking for a method that exists.
pub fn malformed(message: &Value) -> Option<Value> {
    let method = message.get("method")?.as_str()?;
    let id = message.get("id")?;
    let required = match method {
        "tools/call" | "prompts/get" => "name",
        "resources/read" => "uri",
        _ => return None,
    };
    if message.pointer(&format!("/params/{required}")).is_some_and(Value::is_string) {
        return None;
    }
    let message = format!("Invalid params: {method} needs params.{required} (a string)");
    Some(json!({ "jsonrpc": "2.0", "id": id, "error": { "code": -32602, "message": message } }))
}

/// A `/mcp` POST whose body is a malformed request is answered here (see [`malformed`]);
/// anything else goes on with its body as it came.
async fn checked(request: axum::extract::Request, limit: usize) -> Result<axum::extract::Request, axum::response::Response> {
    use axum::response::IntoResponse as _;
    if request.method() != http::Method::POST {
        return Ok(request);
    }
    let (parts, body) = request.into_parts();
    let bytes = match axum::body::to_bytes(body, limit).await {
        Ok(bytes) => bytes,
        Err(e) => {
            let message = format!("the request body could not be read (at most {limit} bytes): {e}");
            return Err((
                http::StatusCode::PAYLOAD_TOO_LARGE,
                axum::Json(json!({ "error": { "code": "invalid_argument", "message": message } })),
            )
                .into_response());
        }
    };
    if let Some(error) = serde_json::from_slice::<Value>(&bytes).ok().as_ref().and_then(malformed) {
        return Err((http::StatusCode::OK, axum::Json(error)).into_response());
    }
    Ok(axum::extract::Request::from_parts(parts, axum::body::Body::from(bytes)))
}

/// The daemon's HTTP router: the `/v1` API and the MCP endpoint over it, every route
/// behind the browser guard (`Host`, `Origin`, JSON bodies).
pub fn router_with_mcp(app: Arc<App>) -> Router {
    let api = crate::http::router(app.clone());
    let server = &app.config.server;
    let guard = Arc::new(crate::guard::Guard::new(app.http_addr, &server.allowed_hosts, &server.cors_origins).with_tls(app.tls.is_some()));
    http_endpoint(&app, api.clone()).merge(api).layer(axum::middleware::from_fn_with_state(guard, crate::guard::middleware))
}

/// The HTTP API router of a running daemon, for an in-process [`Door::Router`].
pub fn api_router(app: Arc<App>) -> Router {
    crate::http::router(app)
}

/// Serves MCP over stdin/stdout until the client closes stdin.
///
/// A line that is not JSON is answered with JSON-RPC's parse error (-32700, `id` null),
/// as the specification asks, instead of being dropped in silence: stdin goes through a
/// filter before the SDK reads it, and the SDK's replies and the filter's go to stdout
/// through one writer, a whole line at a time.
pub async fn serve_stdio(server: MnemeMcp) -> Result<(), String> {
    use rmcp::ServiceExt as _;
    use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _};
    let (to_sdk, sdk_in) = tokio::io::duplex(1 << 16);
    let (sdk_out, from_sdk) = tokio::io::duplex(1 << 16);
    let (lines, mut outgoing) = tokio::sync::mpsc::unbounded_channel::<String>();
    let writer = tokio::spawn(async move {
        let mut stdout = tokio::io::stdout();
        while let Some(line) = outgoing.recv().await {
            if stdout.write_all(line.as_bytes()).await.is_err() || stdout.flush().await.is_err() {
                break;
            }
        }
    });
    let replies = lines.clone();
    let relay = tokio::spawn(async move {
        let mut from_sdk = tokio::io::BufReader::new(from_sdk);
        let mut line = String::new();
        while from_sdk.read_line(&mut line).await.is_ok_and(|n| n > 0) {
            if replies.send(std::mem::take(&mut line)).is_err() {
                break;
            }
        }
    });
    let filter = tokio::spawn(async move {
        let mut to_sdk = to_sdk;
        let mut stdin = tokio::io::BufReader::new(tokio::io::stdin());
        let mut line = String::new();
        while stdin.read_line(&mut line).await.is_ok_and(|n| n > 0) {
            let text = std::mem::take(&mut line);
            if text.trim().is_empty() {
                continue;
            }
            match serde_json::from_str::<serde_json::Value>(&text).map(|message| malformed(&message)) {
                Ok(Some(error)) => {
                    let _ = lines.send(format!("{error}\n"));
                }
                Ok(None) => {
                    let framed = if text.ends_with('\n') { text } else { format!("{text}\n") };
                    if to_sdk.write_all(framed.as_bytes()).await.is_err() {
                        break;
                    }
                }
                Err(e) => {
                    let error = serde_json::json!({
                        "jsonrpc": "2.0", "id": null,
                        "error": { "code": -32700, "message": format!("Parse error: the line is not JSON ({e})") }
                    });
                    let _ = lines.send(format!("{error}\n"));
                }
            }
        }
        // EOF: the SDK sees its input close and ends the session.
        let _ = to_sdk.shutdown().await;
    });
    let running = server.serve((sdk_in, sdk_out)).await.map_err(|e| format!("MCP over stdio: {e}"))?;
    let done = running.waiting().await.map_err(|e| format!("MCP over stdio: {e}"));
    filter.abort();
    let _ = relay.await;
    let _ = writer.await;
    done.map(|_| ())
}

/// `text` as a URL query value: unreserved characters as they are, everything else as %XX.
fn percent_encoded(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' | b'/' => out.push(byte as char),
            other => out.push_str(&format!("%{other:02X}")),
        }
    }
    out
}
