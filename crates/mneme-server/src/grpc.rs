//! The gRPC API (`mneme.v1.Memory` and `mneme.v1.Hooks`): decode, convert, call `Ops` or
//! the hook engine through [`App::call`], encode.

use std::sync::Arc;

use mneme_core::{Payload, RecordId};
use mneme_service::{ContestRequest, OutcomeKind, OutcomeRequest, RetrieveRequest};
use tonic::{Request, Response, Status};

use mneme_agent::hooks::{CompactingMessage, HookContext, HookEvent, HookInput, HookName, HookOutcome};
use mneme_service::Principal;

use crate::app::App;
use crate::auth::Credentials;
use crate::convert::{self as cv};
use crate::error::{ApiError, ApiResult};
use crate::op::Operation;
use crate::pb;

#[derive(Debug, Clone)]
pub struct GrpcApi {
    pub app: Arc<App>,
}

fn authorization<T>(r: &Request<T>) -> Credentials {
    Credentials::from_headers(r.metadata().as_ref())
}

/// Authenticates every call of mneme's and membrane's services from its `authorization`
/// metadata before tonic decodes the message, so an unauthenticated caller never has a
/// body parsed. The handler authenticates again (for the principal, the rate limit and the
/// metrics); health checks and reflection stay open, as before. A refusal is counted
/// under the method's name, as the handler would have counted it.
pub async fn authenticate_first(
    axum::extract::State(app): axum::extract::State<Arc<App>>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    let start = std::time::Instant::now();
    let path = request.uri().path().to_string();
    let service = path.trim_start_matches('/').split('/').next().unwrap_or_default();
    let membrane = service == crate::membrane::SERVICE;
    if !membrane && !service.starts_with("mneme.v1.") {
        return next.run(request).await;
    }
    let value = request.headers().get("authorization").and_then(|v| v.to_str().ok());
    let header = if membrane { value.and_then(crate::membrane::bearer) } else { value.map(str::to_string) };
    match app.auth.authenticate(&Credentials::from_headers(request.headers()).with_authorization(header)) {
        Ok(_) => next.run(request).await,
        Err(e) => {
            let method = path.rsplit('/').next().unwrap_or_default();
            app.metrics.request(if membrane { "membrane" } else { "grpc" }, method, e.code(), e.is_server_fault(), start.elapsed());
            Status::from(e).into_http::<axum::body::Body>()
        }
    }
}

impl GrpcApi {
    async fn run<Req, Resp, F>(&self, operation: Operation, request: Request<Req>, op: F) -> Result<Response<Resp>, Status>
    where
        Req: Send + 'static,
        Resp: Send + 'static,
        F: FnOnce(&App, &Principal, Req) -> ApiResult<Resp> + Send + 'static,
    {
        let auth = authorization(&request);
        let msg = request.into_inner();
        self.app.call("grpc", operation, &auth, move |app, p| op(app, p, msg)).await.map(Response::new).map_err(Status::from)
    }
}

impl GrpcApi {
    /// The ingest RPCs: decode, then the app's ingest path (policy, then the group-commit writer).
    async fn ingest<Req>(
        &self,
        operation: Operation,
        request: Request<Req>,
        decode: impl FnOnce(Req) -> ApiResult<(Payload, Option<pb::IngestOptions>)>,
    ) -> Result<Response<pb::RecordResponse>, Status> {
        let auth = authorization(&request);
        let decoded = decode(request.into_inner()).and_then(|(payload, options)| Ok((payload, cv::ingest_options(options)?)));
        let record = self.app.ingest("grpc", operation, &auth, decoded).await?;
        Ok(Response::new(record_response(&self.app, &record)))
    }
}

fn record_response(app: &App, record: &mneme_core::MemoryRecord) -> pb::RecordResponse {
    pb::RecordResponse { record: Some(cv::record(record, app.ops.current_salience(record))) }
}

fn required<T>(field: &str, v: Option<T>) -> ApiResult<T> {
    v.ok_or_else(|| ApiError::BadRequest(format!("invalid {field}: required")))
}

fn ids(field: &str, list: &[String]) -> ApiResult<Vec<RecordId>> {
    list.iter().map(|s| cv::id(field, s)).collect()
}

#[tonic::async_trait]
impl pb::memory_server::Memory for GrpcApi {
    async fn ingest_event(&self, request: Request<pb::IngestEventRequest>) -> Result<Response<pb::RecordResponse>, Status> {
        self.ingest(Operation::IngestEvent, request, |m| Ok((Payload::Event(cv::event(required("event", m.event)?)?), m.options))).await
    }

    async fn ingest_tool_output(&self, request: Request<pb::IngestToolOutputRequest>) -> Result<Response<pb::RecordResponse>, Status> {
        self.ingest(Operation::IngestToolOutput, request, |m| {
            Ok((Payload::ToolOutput(cv::tool_output(required("output", m.output)?)?), m.options))
        })
        .await
    }

    async fn ingest_observation(&self, request: Request<pb::IngestObservationRequest>) -> Result<Response<pb::RecordResponse>, Status> {
        self.ingest(Operation::IngestObservation, request, |m| Ok((Payload::Semantic(cv::semantic(required("fact", m.fact)?)?), m.options)))
            .await
    }

    async fn ingest_outcome(&self, request: Request<pb::IngestOutcomeRequest>) -> Result<Response<pb::IngestOutcomeResponse>, Status> {
        self.run(Operation::IngestOutcome, request, |app, p, m| {
            let outcome = match pb::Outcome::try_from(m.outcome) {
                Ok(pb::Outcome::Success) => OutcomeKind::Success,
                Ok(pb::Outcome::Failure) => OutcomeKind::Failure,
                _ => return Err(ApiError::BadRequest("invalid outcome: OUTCOME_SUCCESS or OUTCOME_FAILURE is required".into())),
            };
            let request = OutcomeRequest {
                target: cv::id("target_id", &m.target_id)?,
                outcome,
                duration_ms: m.duration_ms,
                failure_mode: Some(m.failure_mode).filter(|s| !s.is_empty()),
                note: Some(m.note).filter(|s| !s.is_empty()),
                amount: m.amount,
            };
            let r = app.ops.ingest_outcome(p, request, cv::ingest_options(m.options)?)?;
            Ok(pb::IngestOutcomeResponse {
                record: Some(cv::record(&r.record, app.ops.current_salience(&r.record))),
                target: Some(cv::record(&r.target, r.salience_after)),
                salience_before: r.salience_before,
                salience_after: r.salience_after,
            })
        })
        .await
    }

    async fn ingest_working_state(&self, request: Request<pb::IngestWorkingStateRequest>) -> Result<Response<pb::RecordResponse>, Status> {
        self.ingest(Operation::IngestWorkingState, request, |m| Ok((Payload::Working(cv::working(required("state", m.state)?)), m.options)))
            .await
    }

    async fn retrieve(&self, request: Request<pb::RetrieveRequest>) -> Result<Response<pb::RetrieveResponse>, Status> {
        self.run(Operation::Retrieve, request, |app, p, m| {
            let request = RetrieveRequest {
                query: m.query,
                types: m.types.iter().map(|t| cv::memory_type("types", *t)).collect::<ApiResult<_>>()?,
                min_salience: m.min_salience,
                max_sensitivity: cv::sensitivity("max_sensitivity", m.max_sensitivity)?,
                scopes: cv::scopes("scopes", m.scopes)?,
                tags: m.tags,
                since: cv::time("since", &m.since)?,
                until: cv::time("until", &m.until)?,
                limit: if m.limit == 0 { 10 } else { m.limit as usize },
                include_tombstones: m.include_tombstones,
                own_scopes: false,
            };
            Ok(pb::RetrieveResponse { hits: app.ops.retrieve(p, &request)?.iter().map(cv::hit).collect() })
        })
        .await
    }

    async fn retrieve_by_id(&self, request: Request<pb::RetrieveByIdRequest>) -> Result<Response<pb::RecordResponse>, Status> {
        self.run(Operation::RetrieveById, request, |app, p, m| {
            let (record, salience) = app.ops.get(p, &cv::id("id", &m.id)?)?;
            Ok(pb::RecordResponse { record: Some(cv::record(&record, salience)) })
        })
        .await
    }

    async fn history(&self, request: Request<pb::HistoryRequest>) -> Result<Response<pb::HistoryResponse>, Status> {
        self.run(Operation::History, request, |app, p, m| Ok(cv::history(&app.ops.history(p, &cv::id("id", &m.id)?)?))).await
    }

    async fn supersede(&self, request: Request<pb::SupersedeRequest>) -> Result<Response<pb::RecordResponse>, Status> {
        self.run(Operation::Supersede, request, |app, p, m| {
            let r = app.ops.supersede(p, &cv::id("id", &m.id)?, cv::revision(m.change)?, m.actor, m.rationale)?;
            Ok(record_response(app, &r))
        })
        .await
    }

    async fn fork(&self, request: Request<pb::ForkRequest>) -> Result<Response<pb::RecordResponse>, Status> {
        self.run(Operation::Fork, request, |app, p, m| {
            let r = app.ops.fork(p, &cv::id("id", &m.id)?, cv::revision(m.change)?, m.actor, m.rationale)?;
            Ok(record_response(app, &r))
        })
        .await
    }

    async fn retract(&self, request: Request<pb::RetractRequest>) -> Result<Response<pb::RecordResponse>, Status> {
        self.run(Operation::Retract, request, |app, p, m| {
            Ok(record_response(app, &app.ops.retract(p, &cv::id("id", &m.id)?, m.actor, m.rationale)?))
        })
        .await
    }

    async fn forget(&self, request: Request<pb::ForgetRequest>) -> Result<Response<pb::ForgetResponse>, Status> {
        self.run(Operation::Forget, request, |app, p, m| {
            let request = mneme_service::ForgetRequest {
                ids: ids("ids", &m.ids)?,
                query: m.query,
                subject: m.subject,
                user: m.user,
                dry_run: m.dry_run,
                reason: m.reason,
                actor: m.actor,
                limit: m.limit.unwrap_or(0) as usize,
            };
            let mut r = app.ops.forget(p, request)?;
            mneme_agent::forget_in_files(&mut r, app.agent.workspace());
            Ok(pb::ForgetResponse {
                dry_run: r.dry_run,
                records: r
                    .records
                    .into_iter()
                    .map(|i| pb::ForgottenRecord {
                        id: i.id.to_string(),
                        memory_type: i.memory_type,
                        summary: i.summary,
                        because: i.because,
                    })
                    .collect(),
                conversation_entries: r.conversation_entries as u64,
                redacted_mentions: r.redacted_mentions as u64,
                workspace_chunks: r.workspace_chunks as u64,
                workspace_files: r.workspace_files,
                files_rewritten: r.files_rewritten,
                wal_truncated: r.wal_truncated,
            })
        })
        .await
    }

    async fn merge(&self, request: Request<pb::MergeRequest>) -> Result<Response<pb::RecordResponse>, Status> {
        self.run(Operation::Merge, request, |app, p, m| {
            let r = app.ops.merge(p, &ids("ids", &m.ids)?, cv::revision(m.change)?, m.actor, m.rationale)?;
            Ok(record_response(app, &r))
        })
        .await
    }

    async fn contest(&self, request: Request<pb::ContestRequest>) -> Result<Response<pb::RecordResponse>, Status> {
        self.run(Operation::Contest, request, |app, p, m| {
            let contest = ContestRequest { by: cv::opt_id("by", &m.by)?, claim: Some(m.claim).filter(|c| !c.is_empty()) };
            Ok(record_response(app, &app.ops.contest(p, &cv::id("id", &m.id)?, contest, m.actor, m.rationale)?))
        })
        .await
    }

    async fn reinforce(&self, request: Request<pb::AdjustRequest>) -> Result<Response<pb::SalienceChange>, Status> {
        self.run(Operation::Reinforce, request, |app, p, m| {
            Ok(cv::salience_change(&app.ops.adjust(p, &cv::id("id", &m.id)?, true, m.amount, m.actor, m.rationale)?))
        })
        .await
    }

    async fn penalize(&self, request: Request<pb::AdjustRequest>) -> Result<Response<pb::SalienceChange>, Status> {
        self.run(Operation::Penalize, request, |app, p, m| {
            Ok(cv::salience_change(&app.ops.adjust(p, &cv::id("id", &m.id)?, false, m.amount, m.actor, m.rationale)?))
        })
        .await
    }

    async fn reflect_tick(&self, request: Request<pb::ReflectTickRequest>) -> Result<Response<pb::ReflectReply>, Status> {
        self.run(Operation::ReflectTick, request, |app, p, m| {
            let options = mneme_reflect::tick::TickOptions {
                idle: m.idle,
                summary: (!m.summary.is_empty()).then_some(m.summary),
                dry_run: m.dry_run,
            };
            let value = crate::app::answer(app.agent.reflect_tick(p, &options))?;
            Ok(pb::ReflectReply { status: value["status"].as_str().unwrap_or_default().to_string(), json: value.to_string() })
        })
        .await
    }

    async fn inner_status(&self, request: Request<pb::InnerStatusRequest>) -> Result<Response<pb::ReflectReply>, Status> {
        self.run(Operation::InnerStatus, request, |app, p, _m| {
            Ok(pb::ReflectReply { status: "ok".into(), json: crate::app::answer(app.agent.inner_status(p))?.to_string() })
        })
        .await
    }

    async fn inner_context(&self, request: Request<pb::InnerContextRequest>) -> Result<Response<pb::ReflectReply>, Status> {
        self.run(Operation::InnerContext, request, |app, p, m| {
            let level =
                u8::try_from(m.level.max(1)).map_err(|_| ApiError::BadRequest(format!("level {}: must be 1, 2, 3 or 4", m.level)))?;
            Ok(pb::ReflectReply { status: "ok".into(), json: crate::app::answer(app.agent.inner_context(p, level))?.to_string() })
        })
        .await
    }

    async fn inner_event(&self, request: Request<pb::InnerEventRequest>) -> Result<Response<pb::ReflectReply>, Status> {
        self.run(Operation::InnerEvent, request, |app, p, m| {
            let mut event = serde_json::json!({ "kind": m.kind });
            if !m.what.is_empty() {
                event[if m.kind == "spark" { "topic" } else { "what" }] = serde_json::json!(m.what);
            }
            if !m.since.is_empty() {
                event["since"] = serde_json::json!(m.since);
            }
            let event: mneme_workspace::inner::InnerEvent =
                serde_json::from_value(event).map_err(|e| ApiError::BadRequest(format!("invalid event: {e}")))?;
            Ok(pb::ReflectReply { status: "recorded".into(), json: crate::app::answer(app.agent.inner_event(p, &event))?.to_string() })
        })
        .await
    }

    async fn inner_run(&self, request: Request<pb::InnerRunRequest>) -> Result<Response<pb::ReflectReply>, Status> {
        self.run(Operation::InnerRun, request, |app, p, m| {
            let job = m.job.parse().map_err(|e: mneme_workspace::WorkspaceError| ApiError::BadRequest(e.to_string()))?;
            let value = crate::app::answer(app.agent.inner_run(
                p,
                job,
                &mneme_reflect::inner::JobOptions { force: !m.if_triggered, dry_run: m.dry_run },
            ))?;
            Ok(pb::ReflectReply { status: value["status"].as_str().unwrap_or_default().to_string(), json: value.to_string() })
        })
        .await
    }

    async fn inner_write(&self, request: Request<pb::InnerWriteRequest>) -> Result<Response<pb::ReflectReply>, Status> {
        self.run(Operation::InnerWrite, request, |app, p, m| {
            let job = m.job.parse().map_err(|e: mneme_workspace::WorkspaceError| ApiError::BadRequest(e.to_string()))?;
            Ok(pb::ReflectReply {
                status: "written".into(),
                json: crate::app::answer(app.agent.inner_write(p, job, &m.path, &m.content, m.append))?.to_string(),
            })
        })
        .await
    }

    async fn module_list(&self, request: Request<pb::ModuleListRequest>) -> Result<Response<pb::ReflectReply>, Status> {
        self.run(Operation::ModuleList, request, |app, p, _m| {
            Ok(pb::ReflectReply { status: "ok".into(), json: crate::app::answer(app.agent.module_list(p))?.to_string() })
        })
        .await
    }

    async fn module_info(&self, request: Request<pb::ModuleInfoRequest>) -> Result<Response<pb::ReflectReply>, Status> {
        self.run(Operation::ModuleInfo, request, |app, p, m| {
            Ok(pb::ReflectReply { status: "ok".into(), json: crate::app::answer(app.agent.module_info(p, &m.id))?.to_string() })
        })
        .await
    }

    async fn module_change(&self, request: Request<pb::ModuleChangeRequest>) -> Result<Response<pb::ReflectReply>, Status> {
        self.run(Operation::ModuleChange, request, |app, p, m| {
            let action = mneme_agent::ops::ModuleAction::parse(&m.action, m.priority)?;
            let value = crate::app::answer(app.agent.module_change(p, &m.id, action))?;
            Ok(pb::ReflectReply { status: value["action"].as_str().unwrap_or_default().to_string(), json: value.to_string() })
        })
        .await
    }

    async fn module_extract(&self, request: Request<pb::ModuleExtractRequest>) -> Result<Response<pb::ReflectReply>, Status> {
        self.run(Operation::ModuleExtract, request, |app, p, m| {
            let request = mneme_reflect::extract::ExtractRequest {
                id: m.id,
                domain: m.domain,
                name: Some(m.name).filter(|n| !n.trim().is_empty()),
                keywords: m.keywords,
                file_patterns: m.file_patterns,
                priority: m.priority,
                days: (m.days > 0).then_some(m.days),
                dry_run: m.dry_run,
            };
            let value = crate::app::answer(app.agent.module_extract(p, &request))?;
            Ok(pb::ReflectReply { status: value["status"].as_str().unwrap_or_default().to_string(), json: value.to_string() })
        })
        .await
    }

    async fn workspace_sync(&self, request: Request<pb::WorkspaceSyncRequest>) -> Result<Response<pb::ReflectReply>, Status> {
        self.run(Operation::WorkspaceSync, request, |app, p, _m| {
            Ok(pb::ReflectReply { status: "ok".into(), json: crate::app::answer(app.agent.workspace_sync(p))?.to_string() })
        })
        .await
    }

    async fn reflect_status(&self, request: Request<pb::ReflectStatusRequest>) -> Result<Response<pb::ReflectReply>, Status> {
        self.run(Operation::ReflectStatus, request, |app, p, _m| {
            Ok(pb::ReflectReply { status: "ok".into(), json: crate::app::answer(app.agent.reflect_status(p))?.to_string() })
        })
        .await
    }

    async fn reflect_feedback(&self, request: Request<pb::ReflectFeedbackRequest>) -> Result<Response<pb::ReflectReply>, Status> {
        self.run(Operation::ReflectFeedback, request, |app, p, m| {
            let report = mneme_reflect::report::Feedback {
                output_id: (!m.output_id.is_empty()).then_some(m.output_id),
                score: m.score,
                error_cleared: m.error_cleared,
                re_escalated: m.re_escalated,
                dwell_ms: m.dwell_ms,
            };
            Ok(pb::ReflectReply {
                status: "recorded".into(),
                json: crate::app::answer(app.agent.reflect_feedback(p, &report))?.to_string(),
            })
        })
        .await
    }

    async fn reflect_spawn_result(&self, request: Request<pb::ReflectSpawnResultRequest>) -> Result<Response<pb::ReflectReply>, Status> {
        self.run(Operation::ReflectSpawnResult, request, |app, p, m| {
            let note = (!m.note.is_empty()).then_some(m.note.as_str());
            Ok(pb::ReflectReply {
                status: "recorded".into(),
                json: crate::app::answer(app.agent.reflect_spawn_result(p, &m.spawn_id, &m.outcome, note))?.to_string(),
            })
        })
        .await
    }

    async fn get_metrics(&self, request: Request<pb::GetMetricsRequest>) -> Result<Response<pb::Metrics>, Status> {
        self.run(Operation::GetMetrics, request, |app, p, _m| {
            let mut out = cv::metrics(&app.ops.metrics(p)?);
            out.last_consolidation = app.consolidator.last_report().and_then(|r| r.at).map(|t| t.to_string()).unwrap_or_default();
            out.uptime_seconds = app.started.elapsed().as_secs();
            out.errors_last_hour = app.metrics.errors_last_hour();
            out.pid = std::process::id();
            Ok(out)
        })
        .await
    }
}

fn ctx(c: Option<pb::HookContext>) -> HookContext {
    let c = c.unwrap_or_default();
    let opt = |s: String| Some(s).filter(|s| !s.is_empty());
    HookContext {
        agent_id: opt(c.agent_id),
        session_key: opt(c.session_key),
        session_id: opt(c.session_id),
        channel_id: opt(c.channel_id),
        user_id: opt(c.user_id),
    }
}

fn ack(o: HookOutcome) -> pb::HookAck {
    pb::HookAck {
        record_ids: o.record_ids.iter().map(ToString::to_string).collect(),
        error: o.error.unwrap_or_default(),
        context: o.context.unwrap_or_default(),
    }
}

impl GrpcApi {
    async fn hook(&self, name: HookName, auth: Credentials, input: HookInput) -> Result<HookOutcome, Status> {
        self.app.hook("grpc", &auth, name, input).await.map_err(Status::from)
    }

    async fn message(&self, name: HookName, request: Request<pb::MessageEvent>) -> Result<Response<pb::HookAck>, Status> {
        let auth = authorization(&request);
        let m = request.into_inner();
        let event = HookEvent {
            content: Some(m.content),
            from: Some(m.from).filter(|s| !s.is_empty()),
            timestamp: Some(m.timestamp).filter(|s| !s.is_empty()),
            recall: m.recall.then_some(true),
            ..HookEvent::default()
        };
        self.hook(name, auth, HookInput { event, ctx: ctx(m.ctx) }).await.map(|o| Response::new(ack(o)))
    }

    async fn end(&self, name: HookName, request: Request<pb::AgentEndEvent>) -> Result<Response<pb::HookAck>, Status> {
        let auth = authorization(&request);
        let m = request.into_inner();
        let event = HookEvent { success: m.success, error: Some(m.error).filter(|e| !e.is_empty()), ..HookEvent::default() };
        self.hook(name, auth, HookInput { event, ctx: ctx(m.ctx) }).await.map(|o| Response::new(ack(o)))
    }
}

#[tonic::async_trait]
impl pb::hooks_server::Hooks for GrpcApi {
    async fn session_start(&self, request: Request<pb::SessionStartRequest>) -> Result<Response<pb::SessionStartResponse>, Status> {
        let auth = authorization(&request);
        let m = request.into_inner();
        let format = match m.format.as_str() {
            "" => None,
            "markdown" => Some(mneme_agent::config::ContextFormat::Markdown),
            "json" => Some(mneme_agent::config::ContextFormat::Json),
            other => {
                // Fails the hook, not the caller (see `HookAck`).
                let error = format!("invalid format: {other:?} (markdown or json)");
                let o = self.app.hook_rejected("grpc", &auth, HookName::SessionStart, error).map_err(Status::from)?;
                return Ok(Response::new(pb::SessionStartResponse { error: o.error.unwrap_or_default(), ..Default::default() }));
            }
        };
        let event = HookEvent { query: Some(m.query).filter(|q| !q.is_empty()), format, ..HookEvent::default() };
        let o = self.hook(HookName::SessionStart, auth, HookInput { event, ctx: ctx(m.ctx) }).await?;
        Ok(Response::new(pb::SessionStartResponse {
            context: o.context.unwrap_or_default(),
            record_ids: o.record_ids.iter().map(ToString::to_string).collect(),
            error: o.error.unwrap_or_default(),
        }))
    }

    async fn message_received(&self, request: Request<pb::MessageEvent>) -> Result<Response<pb::HookAck>, Status> {
        self.message(HookName::MessageReceived, request).await
    }

    async fn message_sent(&self, request: Request<pb::MessageEvent>) -> Result<Response<pb::HookAck>, Status> {
        self.message(HookName::MessageSent, request).await
    }

    async fn before_tool_call(&self, request: Request<pb::ToolCallEvent>) -> Result<Response<pb::HookAck>, Status> {
        let auth = authorization(&request);
        let m = request.into_inner();
        let params = match m.params.map(|p| cv::json_from_struct("params", p)).transpose() {
            Ok(params) => params,
            Err(error) => {
                let o = self.app.hook_rejected("grpc", &auth, HookName::BeforeToolCall, error.to_string()).map_err(Status::from)?;
                return Ok(Response::new(ack(o)));
            }
        };
        let event = HookEvent { tool_name: Some(m.tool_name), params, ..HookEvent::default() };
        self.hook(HookName::BeforeToolCall, auth, HookInput { event, ctx: ctx(m.ctx) }).await.map(|o| Response::new(ack(o)))
    }

    async fn after_tool_call(&self, request: Request<pb::ToolResultEvent>) -> Result<Response<pb::HookAck>, Status> {
        let auth = authorization(&request);
        let m = request.into_inner();
        let event = HookEvent {
            tool_name: Some(m.tool_name),
            success: m.success,
            error: Some(m.error).filter(|e| !e.is_empty()),
            duration_ms: m.duration_ms,
            ..HookEvent::default()
        };
        self.hook(HookName::AfterToolCall, auth, HookInput { event, ctx: ctx(m.ctx) }).await.map(|o| Response::new(ack(o)))
    }

    async fn before_compaction(&self, request: Request<pb::CompactionEvent>) -> Result<Response<pb::HookAck>, Status> {
        let auth = authorization(&request);
        let m = request.into_inner();
        let event = HookEvent {
            compacting_messages: m
                .messages
                .into_iter()
                .map(|c| CompactingMessage { role: c.role, content: c.content, timestamp: Some(c.timestamp).filter(|t| !t.is_empty()) })
                .collect(),
            compacting_count: m.compacting_count.map(u64::from),
            ..HookEvent::default()
        };
        self.hook(HookName::BeforeCompaction, auth, HookInput { event, ctx: ctx(m.ctx) }).await.map(|o| Response::new(ack(o)))
    }

    async fn agent_end(&self, request: Request<pb::AgentEndEvent>) -> Result<Response<pb::HookAck>, Status> {
        self.end(HookName::AgentEnd, request).await
    }

    async fn gateway_stop(&self, request: Request<pb::AgentEndEvent>) -> Result<Response<pb::HookAck>, Status> {
        self.end(HookName::GatewayStop, request).await
    }
}
