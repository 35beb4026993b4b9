//! The HTTP/JSON API (axum): the same operations as gRPC under `/v1`, plus `/healthz`,
//! `/metrics` (Prometheus) and `/openapi.json`. Bodies are parsed *after* authentication,
//! so an unauthenticated caller learns nothing about the request format; every error is
//! `{"error": {"code", "message"}}` with the status from [`ApiError::http_status`].

use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, FromRequest, Path, RawQuery, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use mneme_core::{EventPayload, MemoryRecord, Payload, RecordId, Scope, SemanticPayload, Sensitivity, ToolOutputPayload, WorkingPayload};
use mneme_service::{ContestRequest, IngestOptions, OutcomeKind, OutcomeRequest, RetrieveRequest, Revision};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::app::App;
use crate::auth::Credentials;
use mneme_agent::hooks::{HookInput, HookName};

use crate::error::{ApiError, ApiResult};
use crate::op::Operation;

/// An [`ApiError`] as an HTTP response.
#[derive(Debug)]
pub struct HttpError(pub ApiError);

impl IntoResponse for HttpError {
    fn into_response(self) -> Response {
        let e = self.0;
        let status = e.http_status();
        let mut response = (status, axum::Json(json!({ "error": { "code": e.code(), "message": e.to_string() } }))).into_response();
        match &e {
            ApiError::RateLimited { retry_after_secs, .. } => {
                if let Ok(v) = HeaderValue::from_str(&format!("{}", retry_after_secs.ceil().max(1.0) as u64)) {
                    response.headers_mut().insert(header::RETRY_AFTER, v);
                }
            }
            ApiError::Unauthenticated(_) => {
                response.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
            }
            _ => {}
        }
        response
    }
}

impl From<ApiError> for HttpError {
    fn from(e: ApiError) -> Self {
        HttpError(e)
    }
}

type HttpResult = Result<axum::Json<Value>, HttpError>;

/// The raw body, with axum's size-limit rejection turned into our JSON error, read within
/// `server.body_read_timeout` (408 otherwise).
#[derive(Debug)]
pub struct Body(Bytes);

impl FromRequest<Arc<App>> for Body {
    type Rejection = HttpError;

    async fn from_request(req: Request, app: &Arc<App>) -> Result<Self, Self::Rejection> {
        let limit = app.config.server.max_request_bytes;
        let within = app.body_read_timeout;
        let read = tokio::time::timeout(within, Bytes::from_request(req, app))
            .await
            .map_err(|_| HttpError(ApiError::BodyTimeout { secs: within.as_secs_f64() }))?;
        read.map(Body).map_err(|e| {
            if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
                HttpError(ApiError::TooLarge { limit })
            } else {
                HttpError(ApiError::BadRequest(format!("cannot read the request body: {}", e.body_text())))
            }
        })
    }
}

/// Parses a JSON body (empty means `{}`); errors name the path of the bad field.
/// Only a JSON object is a body: an array (which serde would read as a struct's fields in
/// order) and anything after the object are refused.
fn parse<T: DeserializeOwned>(body: &[u8]) -> ApiResult<T> {
    let body = if body.iter().all(u8::is_ascii_whitespace) { b"{}".as_slice() } else { body };
    if body.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'{') {
        return Err(ApiError::BadRequest("invalid request body: expected a JSON object".into()));
    }
    let de = &mut serde_json::Deserializer::from_slice(body);
    let value = serde_path_to_error::deserialize(&mut *de).map_err(|e| {
        let path = e.path().to_string();
        // A syntax error has no field to name ("." or "?"): the body is what is invalid.
        if path == "." || path == "?" {
            ApiError::BadRequest(format!("invalid request body: {}", e.inner()))
        } else {
            ApiError::BadRequest(format!("invalid {path}: {}", e.inner()))
        }
    })?;
    de.end().map_err(|e| ApiError::BadRequest(format!("invalid request body: {e} (after the JSON object)")))?;
    Ok(value)
}

fn authorization(headers: &HeaderMap) -> Credentials {
    Credentials::from_headers(headers)
}

fn record_json(app: &App, record: &MemoryRecord) -> Value {
    json!({ "record": record, "current_salience": app.ops.current_salience(record) })
}

fn id(s: &str) -> ApiResult<RecordId> {
    RecordId::parse(s).map_err(|e| ApiError::BadRequest(format!("invalid id: {e}")))
}

// ---- request bodies ----------------------------------------------------------------

/// An optional field that, when given, must be a value: `null` is refused (serde would read
/// it as absent) where the schema has no `null` to offer, as for a `$ref`.
fn present<'de, D: serde::Deserializer<'de>, T: Deserialize<'de>>(deserializer: D) -> Result<Option<T>, D::Error> {
    T::deserialize(deserializer).map(Some)
}

/// A body's nested object (`options`, `event`, `change`, ...) as an object only: serde
/// would also read a struct from a JSON array of its fields in order.
fn object<'de, D: serde::Deserializer<'de>, T: Deserialize<'de>>(deserializer: D) -> Result<T, D::Error> {
    struct Only<T>(std::marker::PhantomData<T>);
    impl<'de, T: Deserialize<'de>> serde::de::Visitor<'de> for Only<T> {
        type Value = T;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a JSON object")
        }
        fn visit_map<A: serde::de::MapAccess<'de>>(self, map: A) -> Result<T, A::Error> {
            T::deserialize(serde::de::value::MapAccessDeserializer::new(map))
        }
    }
    deserializer.deserialize_map(Only(std::marker::PhantomData))
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
struct OptionsBody {
    summary: Option<String>,
    sensitivity: Option<Sensitivity>,
    scope: Option<Scope>,
    tags: Vec<String>,
    confidence: Option<f64>,
    salience: Option<f64>,
    pinned: bool,
    actor: Option<String>,
    rationale: Option<String>,
}

impl From<OptionsBody> for IngestOptions {
    fn from(o: OptionsBody) -> Self {
        IngestOptions {
            summary: o.summary,
            sensitivity: o.sensitivity,
            scope: o.scope,
            tags: o.tags,
            confidence: o.confidence,
            salience: o.salience,
            pinned: o.pinned,
            actor: o.actor,
            rationale: o.rationale,
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct EventBody {
    #[serde(default, deserialize_with = "object")]
    options: OptionsBody,
    #[serde(deserialize_with = "object")]
    event: EventPayload,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ToolOutputBody {
    #[serde(default, deserialize_with = "object")]
    options: OptionsBody,
    #[serde(deserialize_with = "object")]
    output: ToolOutputPayload,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ObservationBody {
    #[serde(default, deserialize_with = "object")]
    options: OptionsBody,
    #[serde(deserialize_with = "object")]
    fact: SemanticPayload,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct WorkingBody {
    #[serde(default, deserialize_with = "object")]
    options: OptionsBody,
    #[serde(deserialize_with = "object")]
    state: WorkingPayload,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct OutcomeBody {
    #[serde(default, deserialize_with = "object")]
    options: OptionsBody,
    target_id: RecordId,
    outcome: OutcomeKind,
    #[serde(default)]
    duration_ms: Option<u64>,
    #[serde(default)]
    failure_mode: Option<String>,
    #[serde(default)]
    note: Option<String>,
    #[serde(default)]
    amount: Option<f64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
struct ChangeBody {
    #[serde(deserialize_with = "present")]
    payload: Option<Payload>,
    summary: Option<String>,
    tags: Option<Vec<String>>,
    sensitivity: Option<Sensitivity>,
    confidence: Option<f64>,
}

impl From<ChangeBody> for Revision {
    fn from(c: ChangeBody) -> Self {
        Revision { payload: c.payload, summary: c.summary, tags: c.tags, sensitivity: c.sensitivity, confidence: c.confidence }
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
struct ReviseBody {
    #[serde(deserialize_with = "object")]
    change: ChangeBody,
    actor: String,
    rationale: String,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
struct MergeBody {
    ids: Vec<RecordId>,
    #[serde(deserialize_with = "object")]
    change: ChangeBody,
    actor: String,
    rationale: String,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
struct WhoBody {
    actor: String,
    rationale: String,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
struct ContestBody {
    by: Option<RecordId>,
    claim: Option<String>,
    actor: String,
    rationale: String,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
struct AdjustBody {
    amount: Option<f64>,
    actor: String,
    rationale: String,
}

// ---- router --------------------------------------------------------------------------

pub fn router(app: Arc<App>) -> Router {
    let limit = app.config.server.max_request_bytes;
    // The relay's routes (the relay seed, on the same port): on unless `relay.routes = false`.
    let relay = if app.config.relay.routes {
        Router::new()
            .route("/feed", post(relay_feed).get(relay_feed_poll))
            .route("/sense", post(relay_sense))
            .route("/health", get(relay_health))
            .route("/agent/last", get(relay_last))
            .route("/agent/history", get(relay_history))
            .route("/agent/context", get(relay_context))
            .route("/agent/config", get(relay_config).post(relay_configure))
            .route("/agent/tick", post(relay_tick))
    } else {
        Router::new()
    };
    Router::new()
        .merge(relay)
        .route("/", get(console))
        .route("/healthz", get(healthz))
        .route("/metrics", get(prometheus))
        .route("/openapi.json", get(openapi))
        .route("/v1/status", get(status))
        .route("/v1/metrics", get(metrics))
        .route("/v1/consolidate", post(consolidate))
        .route("/v1/ingest/event", post(ingest_event))
        .route("/v1/ingest/tool_output", post(ingest_tool_output))
        .route("/v1/ingest/observation", post(ingest_observation))
        .route("/v1/ingest/outcome", post(ingest_outcome))
        .route("/v1/ingest/working_state", post(ingest_working_state))
        .route("/v1/retrieve", post(retrieve))
        .route("/v1/records/{id}", get(retrieve_by_id))
        .route("/v1/records/{id}/history", get(history))
        .route("/v1/records/{id}/salience", get(salience_curve))
        .route("/v1/records/{id}/supersede", post(supersede))
        .route("/v1/records/{id}/fork", post(fork))
        .route("/v1/records/{id}/retract", post(retract))
        .route("/v1/records/{id}/contest", post(contest))
        .route("/v1/records/{id}/reinforce", post(reinforce))
        .route("/v1/records/{id}/penalize", post(penalize))
        .route("/v1/merge", post(merge))
        .route("/v1/hooks/{name}", post(hook))
        .route("/v1/conversations", post(log_conversation))
        .route("/v1/sync/status", get(sync_status))
        .route("/v1/sync/fetch", post(sync_fetch))
        .route("/v1/sync/checkpoint", post(sync_checkpoint))
        .route("/v1/search/files", post(search_files))
        .route("/v1/forget", post(forget))
        .route("/v1/reflect/tick", post(reflect_tick))
        .route("/v1/reflect/status", get(reflect_status))
        .route("/v1/reflect/playbook", get(reflect_playbook))
        .route("/v1/reflect/feedback", post(reflect_feedback))
        .route("/v1/reflect/spawn-result", post(reflect_spawn_result))
        .route("/v1/inner/status", get(inner_status))
        .route("/v1/inner/context", get(inner_context))
        .route("/v1/inner/event", post(inner_event))
        .route("/v1/inner/run", post(inner_run))
        .route("/v1/inner/write", post(inner_write))
        .route("/v1/modules", get(module_list))
        .route("/v1/modules/{id}", get(module_info).post(module_change))
        .route("/v1/modules/{id}/extract", post(module_extract))
        .route("/v1/workspace/sync", post(workspace_sync))
        .route("/v1/workspace/files", get(workspace_files))
        .route("/v1/workspace/file", get(workspace_file))
        .fallback(not_found)
        .layer(DefaultBodyLimit::max(limit))
        .with_state(app)
}

async fn not_found(uri: axum::http::Uri) -> Response {
    let message = format!("no such endpoint: {uri} (see /openapi.json)");
    (StatusCode::NOT_FOUND, axum::Json(json!({ "error": { "code": "not_found", "message": message } }))).into_response()
}

/// Liveness and readiness: 200 with `status: ok` when the store answers a read, else 503
/// with `status: unavailable` (on PostgreSQL: the database is down or unreachable). The
/// store is named by engine only: this endpoint needs no key.
async fn healthz(State(app): State<Arc<App>>) -> Response {
    let shared = app.clone();
    let (engine, ready) = tokio::task::spawn_blocking(move || shared.ops.store_ready())
        .await
        .unwrap_or(("unknown", Err(mneme_service::ServiceError::Precondition("the readiness check was aborted".into()))));
    if let Err(e) = &ready {
        tracing::warn!(error = %e, "readiness: the store does not answer");
    }
    let status = if ready.is_ok() { StatusCode::OK } else { StatusCode::SERVICE_UNAVAILABLE };
    let body = json!({
        "status": if ready.is_ok() { "ok" } else { "unavailable" },
        "service": "mneme",
        "version": env!("CARGO_PKG_VERSION"),
        "pid": std::process::id(),
        "grpc_addr": app.grpc_addr.to_string(),
        "http_addr": app.http_addr.to_string(),
        "store_id": crate::store_id(app.ops.store_path()),
        "store": { "engine": engine, "ready": ready.is_ok() },
    });
    (status, axum::Json(body)).into_response()
}

/// The web console: one self-contained page (HTML, CSS and script in the binary, no CDN).
/// The page holds no data; everything it shows comes from the API with the key the person
/// enters, so with keys configured it shows nothing without one.
async fn console() -> Response {
    (
        [
            (axum::http::header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (axum::http::header::CACHE_CONTROL, "no-cache"),
            (
                axum::http::header::HeaderName::from_static("content-security-policy"),
                "default-src 'self'; style-src 'self' 'unsafe-inline'; script-src 'self' 'unsafe-inline'; img-src 'self' data:",
            ),
        ],
        crate::console::PAGE,
    )
        .into_response()
}

async fn openapi() -> axum::Json<Value> {
    axum::Json(crate::openapi::document())
}

/// Open on a loopback daemon without keys (like every route); with keys, a scraper needs
/// a key whose reads are unrestricted (Prometheus sends it as `authorization.credentials`).
async fn prometheus(State(app): State<Arc<App>>, headers: HeaderMap) -> Result<Response, HttpError> {
    let auth = authorization(&headers);
    // Through `App::call` like every operation: authenticated, counted, a fault logged.
    let text = app.call("http", Operation::Prometheus, &auth, |app, p| app.prometheus(p)).await?;
    Ok(([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], text).into_response())
}

async fn status(State(app): State<Arc<App>>, headers: HeaderMap) -> HttpResult {
    let auth = authorization(&headers);
    Ok(axum::Json(app.call("http", Operation::Status, &auth, |app, p| Ok(json!(app.status(p)?))).await?))
}

async fn metrics(State(app): State<Arc<App>>, headers: HeaderMap) -> HttpResult {
    let auth = authorization(&headers);
    Ok(axum::Json(app.call("http", Operation::GetMetrics, &auth, |app, p| Ok(json!(app.ops.metrics(p)?))).await?))
}

async fn consolidate(State(app): State<Arc<App>>, headers: HeaderMap) -> HttpResult {
    let auth = authorization(&headers);
    // Authenticate (and count) like any call, then run the async cycle.
    // It writes facts into any scope, so only for an unrestricted principal.
    app.call("http", Operation::Consolidate, &auth, |app, p| Ok(app.agent.may_consolidate(p)?)).await?;
    let report = app.consolidate().await;
    Ok(axum::Json(json!(report)))
}

macro_rules! handler {
    ($name:ident, $op:expr, |$app:ident, $p:ident, $body:ident : $ty:ty| $e:expr) => {
        async fn $name(State(app): State<Arc<App>>, headers: HeaderMap, Body(raw): Body) -> HttpResult {
            let auth = authorization(&headers);
            let value = app
                .call("http", $op, &auth, move |$app, $p| {
                    let $body: $ty = parse(&raw)?;
                    $e
                })
                .await?;
            Ok(axum::Json(value))
        }
    };
    ($name:ident, $op:expr, |$app:ident, $p:ident, $id:ident, $body:ident : $ty:ty| $e:expr) => {
        async fn $name(State(app): State<Arc<App>>, headers: HeaderMap, Path(raw_id): Path<String>, Body(raw): Body) -> HttpResult {
            let auth = authorization(&headers);
            let value = app
                .call("http", $op, &auth, move |$app, $p| {
                    let $id = id(&raw_id)?;
                    let $body: $ty = parse(&raw)?;
                    $e
                })
                .await?;
            Ok(axum::Json(value))
        }
    };
}

// ---- the agent's conversation log and workspace search ---------------------------------

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FetchBody {
    begin: i64,
    end: i64,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CheckpointBody {
    end_id: i64,
    summary: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SearchFilesBody {
    query: String,
    #[serde(default = "default_search_limit")]
    limit: usize,
    #[serde(default)]
    ranking: mneme_service::FileRanking,
}

fn default_search_limit() -> usize {
    10
}

handler!(log_conversation, Operation::LogConversation, |app, p, body: mneme_service::ConversationInput| {
    Ok(json!(app.ops.log_conversation(p, body)?))
});

async fn sync_status(State(app): State<Arc<App>>, headers: HeaderMap) -> HttpResult {
    let auth = authorization(&headers);
    Ok(axum::Json(app.call("http", Operation::SyncStatus, &auth, |app, p| Ok(json!(app.ops.sync_status(p)?))).await?))
}

handler!(sync_fetch, Operation::SyncFetch, |app, p, body: FetchBody| Ok(json!(app.ops.sync_fetch(p, body.begin, body.end)?)));

handler!(sync_checkpoint, Operation::SyncCheckpoint, |app, p, body: CheckpointBody| {
    Ok(json!(app.ops.sync_checkpoint(p, body.end_id, &body.summary)?))
});

/// `POST /v1/reflect/tick`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct ReflectTickBody {
    /// Unset: decided from the agent's hook activity.
    #[serde(default)]
    idle: Option<bool>,
    #[serde(default)]
    summary: Option<String>,
    #[serde(default)]
    dry_run: bool,
}

handler!(reflect_tick, Operation::ReflectTick, |app, p, body: ReflectTickBody| {
    crate::app::answer(
        app.agent.reflect_tick(p, &mneme_reflect::tick::TickOptions { idle: body.idle, summary: body.summary, dry_run: body.dry_run }),
    )
});

async fn reflect_status(State(app): State<Arc<App>>, headers: HeaderMap) -> HttpResult {
    let auth = authorization(&headers);
    Ok(axum::Json(app.call("http", Operation::ReflectStatus, &auth, |app, p| crate::app::answer(app.agent.reflect_status(p))).await?))
}

handler!(reflect_feedback, Operation::ReflectFeedback, |app, p, body: mneme_reflect::report::Feedback| {
    crate::app::answer(app.agent.reflect_feedback(p, &body))
});

/// `POST /v1/reflect/spawn-result`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct SpawnResultBody {
    spawn_id: String,
    outcome: String,
    #[serde(default)]
    note: Option<String>,
}

handler!(reflect_spawn_result, Operation::ReflectSpawnResult, |app, p, body: SpawnResultBody| {
    crate::app::answer(app.agent.reflect_spawn_result(p, &body.spawn_id, &body.outcome, body.note.as_deref()))
});

async fn inner_status(State(app): State<Arc<App>>, headers: HeaderMap) -> HttpResult {
    let auth = authorization(&headers);
    Ok(axum::Json(app.call("http", Operation::InnerStatus, &auth, |app, p| crate::app::answer(app.agent.inner_status(p))).await?))
}

/// `GET /v1/inner/context?level=N` (1 by default).
async fn inner_context(State(app): State<Arc<App>>, headers: HeaderMap, RawQuery(query): RawQuery) -> HttpResult {
    let auth = authorization(&headers);
    let value = app
        .call("http", Operation::InnerContext, &auth, move |app, p| {
            let mut level = 1u8;
            for pair in query.as_deref().unwrap_or_default().split('&').filter(|p| !p.is_empty()) {
                match pair.split_once('=') {
                    Some(("level", raw)) => {
                        level = raw.parse().map_err(|_| ApiError::BadRequest(format!("level {raw:?}: must be 1, 2, 3 or 4")))?;
                    }
                    _ => return Err(ApiError::BadRequest(format!("unknown query parameter {pair:?} (only level)"))),
                }
            }
            crate::app::answer(app.agent.inner_context(p, level))
        })
        .await?;
    Ok(axum::Json(value))
}

handler!(inner_event, Operation::InnerEvent, |app, p, body: mneme_workspace::inner::InnerEvent| crate::app::answer(
    app.agent.inner_event(p, &body)
));

/// `POST /v1/inner/run`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct InnerRunBody {
    job: mneme_workspace::inner::Job,
    /// Run only when the job's trigger holds (as the scheduler does).
    #[serde(default)]
    if_triggered: bool,
    #[serde(default)]
    dry_run: bool,
}

handler!(inner_run, Operation::InnerRun, |app, p, body: InnerRunBody| {
    crate::app::answer(app.agent.inner_run(
        p,
        body.job,
        &mneme_reflect::inner::JobOptions { force: !body.if_triggered, dry_run: body.dry_run },
    ))
});

// ---- knowledge modules and the sync engine --------------------------------------------

async fn module_list(State(app): State<Arc<App>>, headers: HeaderMap) -> HttpResult {
    let auth = authorization(&headers);
    Ok(axum::Json(app.call("http", Operation::ModuleList, &auth, |app, p| crate::app::answer(app.agent.module_list(p))).await?))
}

async fn module_info(State(app): State<Arc<App>>, headers: HeaderMap, Path(id): Path<String>) -> HttpResult {
    let auth = authorization(&headers);
    Ok(axum::Json(app.call("http", Operation::ModuleInfo, &auth, move |app, p| crate::app::answer(app.agent.module_info(p, &id))).await?))
}

/// `POST /v1/modules/{id}`: `{"action": "activate"|"suspend"|"disable"|"priority", "priority": N}`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ModuleChangeBody {
    action: String,
    #[serde(default)]
    priority: Option<i64>,
}

async fn module_change(State(app): State<Arc<App>>, headers: HeaderMap, Path(id): Path<String>, Body(raw): Body) -> HttpResult {
    let auth = authorization(&headers);
    let value = app
        .call("http", Operation::ModuleChange, &auth, move |app, p| {
            let body: ModuleChangeBody = parse(&raw)?;
            let action = mneme_agent::ops::ModuleAction::parse(&body.action, body.priority)?;
            crate::app::answer(app.agent.module_change(p, &id, action))
        })
        .await?;
    Ok(axum::Json(value))
}

/// `POST /v1/modules/{id}/extract`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct ModuleExtractBody {
    domain: String,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    keywords: Vec<String>,
    #[serde(default)]
    file_patterns: Vec<String>,
    #[serde(default)]
    priority: Option<i64>,
    #[serde(default)]
    days: Option<u32>,
    #[serde(default)]
    dry_run: bool,
}

async fn module_extract(State(app): State<Arc<App>>, headers: HeaderMap, Path(id): Path<String>, Body(raw): Body) -> HttpResult {
    let auth = authorization(&headers);
    let value = app
        .call("http", Operation::ModuleExtract, &auth, move |app, p| {
            let b: ModuleExtractBody = parse(&raw)?;
            let request = mneme_reflect::extract::ExtractRequest {
                id,
                domain: b.domain,
                name: b.name,
                keywords: b.keywords,
                file_patterns: b.file_patterns,
                priority: b.priority,
                days: b.days,
                dry_run: b.dry_run,
            };
            crate::app::answer(app.agent.module_extract(p, &request))
        })
        .await?;
    Ok(axum::Json(value))
}

async fn workspace_sync(State(app): State<Arc<App>>, headers: HeaderMap) -> HttpResult {
    let auth = authorization(&headers);
    Ok(axum::Json(app.call("http", Operation::WorkspaceSync, &auth, |app, p| crate::app::answer(app.agent.workspace_sync(p))).await?))
}

async fn workspace_files(State(app): State<Arc<App>>, headers: HeaderMap) -> HttpResult {
    let auth = authorization(&headers);
    Ok(axum::Json(app.call("http", Operation::WorkspaceFiles, &auth, |app, p| crate::app::answer(app.agent.workspace_files(p))).await?))
}

/// `GET /v1/workspace/file?path=REL`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct WorkspaceFileQuery {
    path: String,
}

async fn workspace_file(State(app): State<Arc<App>>, headers: HeaderMap, uri: axum::http::Uri) -> HttpResult {
    let auth = authorization(&headers);
    let value = app
        .call("http", Operation::WorkspaceFile, &auth, move |app, p| {
            let query = axum::extract::Query::<WorkspaceFileQuery>::try_from_uri(&uri)
                .map_err(|e| ApiError::BadRequest(format!("{} (expected ?path=RELATIVE_PATH)", e.body_text())))?;
            crate::app::answer(app.agent.workspace_file(p, &query.path))
        })
        .await?;
    Ok(axum::Json(value))
}

/// `POST /v1/inner/write`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct InnerWriteBody {
    job: mneme_workspace::inner::Job,
    path: String,
    content: String,
    #[serde(default)]
    append: bool,
}

handler!(inner_write, Operation::InnerWrite, |app, p, body: InnerWriteBody| crate::app::answer(app.agent.inner_write(
    p,
    body.job,
    &body.path,
    &body.content,
    body.append
)));

/// `POST /v1/forget`: what to erase (ids, a query, a subject), why, and whether to only plan.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ForgetBody {
    #[serde(default)]
    ids: Vec<String>,
    #[serde(default)]
    query: Option<String>,
    #[serde(default)]
    subject: Option<String>,
    #[serde(default)]
    user: Option<String>,
    #[serde(default)]
    reason: String,
    #[serde(default)]
    dry_run: bool,
    #[serde(default)]
    actor: Option<String>,
    #[serde(default)]
    limit: Option<usize>,
}

handler!(forget, Operation::Forget, |app, p, body: ForgetBody| {
    let ids = body
        .ids
        .iter()
        .map(|i| mneme_core::RecordId::parse(i).map_err(|e| mneme_service::ServiceError::invalid("ids", e.to_string())))
        .collect::<Result<Vec<_>, _>>()?;
    let request = mneme_service::ForgetRequest {
        ids,
        query: body.query,
        subject: body.subject,
        user: body.user,
        dry_run: body.dry_run,
        reason: body.reason,
        actor: body.actor.unwrap_or_default(),
        limit: body.limit.unwrap_or(0),
    };
    let mut report = app.ops.forget(p, request)?;
    mneme_agent::forget_in_files(&mut report, app.agent.workspace());
    Ok(json!(report))
});

handler!(search_files, Operation::SearchFiles, |app, p, body: SearchFilesBody| {
    Ok(json!(app.agent.search_files(p, &body.query, body.limit, body.ranking)?))
});

/// The ingest endpoints: authenticate, parse, then the group-commit writer.
async fn ingest_with<T: DeserializeOwned>(
    app: Arc<App>,
    headers: HeaderMap,
    raw: Bytes,
    operation: Operation,
    split: impl FnOnce(T) -> (Payload, OptionsBody),
) -> HttpResult {
    let auth = authorization(&headers);
    let decoded = parse::<T>(&raw).map(split).map(|(payload, options)| (payload, options.into()));
    let record = app.ingest("http", operation, &auth, decoded).await?;
    Ok(axum::Json(record_json(&app, &record)))
}

async fn ingest_event(State(app): State<Arc<App>>, headers: HeaderMap, Body(raw): Body) -> HttpResult {
    ingest_with(app, headers, raw, Operation::IngestEvent, |b: EventBody| (Payload::Event(b.event), b.options)).await
}

async fn ingest_tool_output(State(app): State<Arc<App>>, headers: HeaderMap, Body(raw): Body) -> HttpResult {
    ingest_with(app, headers, raw, Operation::IngestToolOutput, |b: ToolOutputBody| (Payload::ToolOutput(b.output), b.options)).await
}

async fn ingest_observation(State(app): State<Arc<App>>, headers: HeaderMap, Body(raw): Body) -> HttpResult {
    ingest_with(app, headers, raw, Operation::IngestObservation, |b: ObservationBody| (Payload::Semantic(b.fact), b.options)).await
}

async fn ingest_working_state(State(app): State<Arc<App>>, headers: HeaderMap, Body(raw): Body) -> HttpResult {
    ingest_with(app, headers, raw, Operation::IngestWorkingState, |b: WorkingBody| (Payload::Working(b.state), b.options)).await
}
handler!(ingest_outcome, Operation::IngestOutcome, |app, p, b: OutcomeBody| {
    let request = OutcomeRequest {
        target: b.target_id,
        outcome: b.outcome,
        duration_ms: b.duration_ms,
        failure_mode: b.failure_mode,
        note: b.note,
        amount: b.amount,
    };
    Ok(json!(app.ops.ingest_outcome(p, request, b.options.into())?))
});
handler!(retrieve, Operation::Retrieve, |app, p, request: RetrieveRequest| Ok(json!({ "hits": app.ops.retrieve(p, &request)? })));
handler!(supersede, Operation::Supersede, |app, p, id, b: ReviseBody| {
    Ok(record_json(app, &app.ops.supersede(p, &id, b.change.into(), b.actor, b.rationale)?))
});
handler!(fork, Operation::Fork, |app, p, id, b: ReviseBody| Ok(record_json(
    app,
    &app.ops.fork(p, &id, b.change.into(), b.actor, b.rationale)?
)));
handler!(retract, Operation::Retract, |app, p, id, b: WhoBody| Ok(record_json(app, &app.ops.retract(p, &id, b.actor, b.rationale)?)));
handler!(contest, Operation::Contest, |app, p, id, b: ContestBody| {
    let contest = ContestRequest { by: b.by, claim: b.claim };
    Ok(record_json(app, &app.ops.contest(p, &id, contest, b.actor, b.rationale)?))
});
handler!(reinforce, Operation::Reinforce, |app, p, id, b: AdjustBody| Ok(json!(app.ops.adjust(
    p,
    &id,
    true,
    b.amount,
    b.actor,
    b.rationale
)?)));
handler!(penalize, Operation::Penalize, |app, p, id, b: AdjustBody| Ok(json!(app.ops.adjust(
    p,
    &id,
    false,
    b.amount,
    b.actor,
    b.rationale
)?)));
handler!(merge, Operation::Merge, |app, p, b: MergeBody| Ok(record_json(
    app,
    &app.ops.merge(p, &b.ids, b.change.into(), b.actor, b.rationale)?
)));

async fn retrieve_by_id(State(app): State<Arc<App>>, headers: HeaderMap, Path(raw_id): Path<String>) -> HttpResult {
    let auth = authorization(&headers);
    let value = app
        .call("http", Operation::RetrieveById, &auth, move |app, p| {
            let (record, salience) = app.ops.get(p, &id(&raw_id)?)?;
            Ok(json!({ "record": record, "current_salience": salience }))
        })
        .await?;
    Ok(axum::Json(value))
}

/// `GET /v1/records/{id}/salience?days=N`: the record's salience from its anchor to N days
/// ahead (default 90), for the console's plot.
async fn salience_curve(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    Path(raw_id): Path<String>,
    RawQuery(query): RawQuery,
) -> HttpResult {
    let auth = authorization(&headers);
    let value = app
        .call("http", Operation::SalienceCurve, &auth, move |app, p| {
            let days = query_number(query.as_deref(), "days", 90)?;
            if !(1..=3650).contains(&days) {
                return Err(ApiError::BadRequest(format!("days {days}: must be between 1 and 3650")));
            }
            let points = app.ops.salience_curve(p, &id(&raw_id)?, days as u32)?;
            let points: Vec<Value> = points.into_iter().map(|(at, s)| json!({ "at": at, "salience": s })).collect();
            Ok(json!({ "points": points, "now": app.ops.now() }))
        })
        .await?;
    Ok(axum::Json(value))
}

async fn history(State(app): State<Arc<App>>, headers: HeaderMap, Path(raw_id): Path<String>) -> HttpResult {
    let auth = authorization(&headers);
    let value = app.call("http", Operation::History, &auth, move |app, p| Ok(json!(app.ops.history(p, &id(&raw_id)?)?))).await?;
    Ok(axum::Json(value))
}

async fn hook(State(app): State<Arc<App>>, headers: HeaderMap, Path(name): Path<String>, Body(raw): Body) -> HttpResult {
    let auth = authorization(&headers);
    let Some(hook) = HookName::parse(&name) else {
        let known: Vec<&str> = HookName::ALL.iter().map(|h| h.as_str()).collect();
        return Err(HttpError(ApiError::BadRequest(format!("unknown hook {name:?}; hooks: {}", known.join(", ")))));
    };
    // Authenticate before looking at the body (the rate limit is taken by `App::hook`). A
    // body that cannot be read then fails the hook, not the caller (200 with `error`).
    app.auth.authenticate(&auth)?;
    let outcome = match parse::<Value>(&raw).and_then(|v| HookInput::from_json(v).map_err(ApiError::BadRequest)) {
        Ok(input) => app.hook("http", &auth, hook, input).await?,
        Err(e) => app.hook_rejected("http", &auth, hook, e.to_string())?,
    };
    Ok(axum::Json(json!(outcome)))
}

// ---- the relay -----------------------------------------------------------------------

/// A query's one numeric parameter `name` (default `default`); anything else is refused.
fn query_number(query: Option<&str>, name: &str, default: u64) -> ApiResult<u64> {
    let mut value = default;
    for pair in query.unwrap_or_default().split('&').filter(|p| !p.is_empty()) {
        match pair.split_once('=') {
            Some((key, raw)) if key == name => {
                value = raw.parse().map_err(|_| ApiError::BadRequest(format!("{name} {raw:?}: must be a whole number")))?;
            }
            _ => return Err(ApiError::BadRequest(format!("unknown query parameter {pair:?} (only {name})"))),
        }
    }
    Ok(value)
}

handler!(relay_feed, Operation::RelayFeed, |app, p, body: mneme_relay::NewFeed| crate::app::answer(app.agent.relay_feed(p, body)));
handler!(relay_sense, Operation::RelaySense, |app, p, body: mneme_relay::SenseEvent| crate::app::answer(app.agent.relay_sense(p, body)));
handler!(relay_configure, Operation::RelayConfigure, |app, p, body: mneme_relay::ConfigChange| crate::app::answer(
    app.agent.relay_configure(p, body)
));

async fn relay_feed_poll(State(app): State<Arc<App>>, headers: HeaderMap, RawQuery(query): RawQuery) -> HttpResult {
    let auth = authorization(&headers);
    let value = app
        .call("http", Operation::RelayFeedPoll, &auth, move |app, p| {
            crate::app::answer(app.agent.relay_feed_poll(p, query_number(query.as_deref(), "after", 0)?))
        })
        .await?;
    Ok(axum::Json(value))
}

async fn relay_history(State(app): State<Arc<App>>, headers: HeaderMap, RawQuery(query): RawQuery) -> HttpResult {
    let auth = authorization(&headers);
    let value = app
        .call("http", Operation::RelayHistory, &auth, move |app, p| {
            let limit = query_number(query.as_deref(), "limit", 10)?;
            if !(1..=50).contains(&limit) {
                return Err(ApiError::BadRequest(format!("limit {limit}: must be within 1..=50")));
            }
            crate::app::answer(app.agent.relay_history(p, usize::try_from(limit).unwrap_or(usize::MAX)))
        })
        .await?;
    Ok(axum::Json(value))
}

macro_rules! relay_get {
    ($name:ident, $op:expr, $method:ident) => {
        async fn $name(State(app): State<Arc<App>>, headers: HeaderMap) -> HttpResult {
            let auth = authorization(&headers);
            Ok(axum::Json(app.call("http", $op, &auth, |app, p| crate::app::answer(app.agent.$method(p))).await?))
        }
    };
}

relay_get!(relay_health, Operation::RelayHealth, relay_health);
relay_get!(reflect_playbook, Operation::ReflectPlaybook, reflect_playbook);
relay_get!(relay_last, Operation::RelayLast, relay_last);
relay_get!(relay_context, Operation::RelayContext, relay_context);
relay_get!(relay_config, Operation::RelayConfig, relay_config);

async fn relay_tick(State(app): State<Arc<App>>, headers: HeaderMap) -> HttpResult {
    let auth = authorization(&headers);
    Ok(axum::Json(app.call("http", Operation::RelayTick, &auth, |app, p| crate::app::answer(app.agent.relay_tick(p))).await?))
}
