//! `Operation`: every operation the daemon serves, as one enum. Each knows whether it is
//! a read (reads share the read connections' gate), its name (the metrics label, the
//! OpenAPI `operationId` and the gRPC method where there is one) and where each transport
//! serves it. `App::call` takes one, so a handler cannot run without being counted and
//! authenticated, and the policy table test (`tests/it/policy.rs`) walks [`Operation::ALL`]
//! on both transports, so a new operation cannot skip a check.

/// An operation of the daemon's API (besides the unauthenticated `/healthz` and
/// `/openapi.json`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Operation {
    IngestEvent,
    IngestToolOutput,
    IngestObservation,
    IngestOutcome,
    IngestWorkingState,
    Retrieve,
    RetrieveById,
    History,
    Supersede,
    Fork,
    Retract,
    Merge,
    Contest,
    Reinforce,
    Penalize,
    GetMetrics,
    Status,
    Prometheus,
    Consolidate,
    Hook,
    LogConversation,
    SyncStatus,
    SyncFetch,
    SyncCheckpoint,
    SearchFiles,
    Forget,
    ReflectTick,
    ReflectStatus,
    ReflectFeedback,
    ReflectSpawnResult,
    InnerStatus,
    InnerContext,
    InnerEvent,
    InnerRun,
    InnerWrite,
    ModuleList,
    ModuleInfo,
    ModuleChange,
    ModuleExtract,
    WorkspaceSync,
    WorkspaceFiles,
    WorkspaceFile,
    RelayFeed,
    RelayFeedPoll,
    RelaySense,
    RelayHealth,
    RelayLast,
    RelayHistory,
    RelayContext,
    RelayConfig,
    RelayConfigure,
    RelayTick,
    SalienceCurve,
    ReflectPlaybook,
}

impl Operation {
    pub const ALL: [Operation; 54] = [
        Operation::IngestEvent,
        Operation::IngestToolOutput,
        Operation::IngestObservation,
        Operation::IngestOutcome,
        Operation::IngestWorkingState,
        Operation::Retrieve,
        Operation::RetrieveById,
        Operation::History,
        Operation::Supersede,
        Operation::Fork,
        Operation::Retract,
        Operation::Merge,
        Operation::Contest,
        Operation::Reinforce,
        Operation::Penalize,
        Operation::GetMetrics,
        Operation::Status,
        Operation::Prometheus,
        Operation::Consolidate,
        Operation::Hook,
        Operation::LogConversation,
        Operation::SyncStatus,
        Operation::SyncFetch,
        Operation::SyncCheckpoint,
        Operation::SearchFiles,
        Operation::Forget,
        Operation::ReflectTick,
        Operation::ReflectStatus,
        Operation::ReflectFeedback,
        Operation::ReflectSpawnResult,
        Operation::InnerStatus,
        Operation::InnerContext,
        Operation::InnerEvent,
        Operation::InnerRun,
        Operation::InnerWrite,
        Operation::ModuleList,
        Operation::ModuleInfo,
        Operation::ModuleChange,
        Operation::ModuleExtract,
        Operation::WorkspaceSync,
        Operation::WorkspaceFiles,
        Operation::WorkspaceFile,
        Operation::RelayFeed,
        Operation::RelayFeedPoll,
        Operation::RelaySense,
        Operation::RelayHealth,
        Operation::RelayLast,
        Operation::RelayHistory,
        Operation::RelayContext,
        Operation::RelayConfig,
        Operation::RelayConfigure,
        Operation::RelayTick,
        Operation::SalienceCurve,
        Operation::ReflectPlaybook,
    ];

    /// The metrics label and OpenAPI `operationId` (and the gRPC method, where served).
    pub const fn name(self) -> &'static str {
        match self {
            Operation::IngestEvent => "IngestEvent",
            Operation::IngestToolOutput => "IngestToolOutput",
            Operation::IngestObservation => "IngestObservation",
            Operation::IngestOutcome => "IngestOutcome",
            Operation::IngestWorkingState => "IngestWorkingState",
            Operation::Retrieve => "Retrieve",
            Operation::RetrieveById => "RetrieveById",
            Operation::History => "History",
            Operation::Supersede => "Supersede",
            Operation::Fork => "Fork",
            Operation::Retract => "Retract",
            Operation::Merge => "Merge",
            Operation::Contest => "Contest",
            Operation::Reinforce => "Reinforce",
            Operation::Penalize => "Penalize",
            Operation::GetMetrics => "GetMetrics",
            Operation::Status => "Status",
            Operation::Prometheus => "Prometheus",
            Operation::Consolidate => "Consolidate",
            Operation::Hook => "Hook",
            Operation::LogConversation => "LogConversation",
            Operation::SyncStatus => "SyncStatus",
            Operation::SyncFetch => "SyncFetch",
            Operation::SyncCheckpoint => "SyncCheckpoint",
            Operation::SearchFiles => "SearchFiles",
            Operation::Forget => "Forget",
            Operation::ReflectTick => "ReflectTick",
            Operation::ReflectStatus => "ReflectStatus",
            Operation::ReflectFeedback => "ReflectFeedback",
            Operation::ReflectSpawnResult => "ReflectSpawnResult",
            Operation::InnerStatus => "InnerStatus",
            Operation::InnerContext => "InnerContext",
            Operation::InnerEvent => "InnerEvent",
            Operation::InnerRun => "InnerRun",
            Operation::InnerWrite => "InnerWrite",
            Operation::ModuleList => "ModuleList",
            Operation::ModuleInfo => "ModuleInfo",
            Operation::ModuleChange => "ModuleChange",
            Operation::ModuleExtract => "ModuleExtract",
            Operation::WorkspaceSync => "WorkspaceSync",
            Operation::WorkspaceFiles => "WorkspaceFiles",
            Operation::WorkspaceFile => "WorkspaceFile",
            Operation::RelayFeed => "RelayFeed",
            Operation::RelayFeedPoll => "RelayFeedPoll",
            Operation::RelaySense => "RelaySense",
            Operation::RelayHealth => "RelayHealth",
            Operation::RelayLast => "RelayLast",
            Operation::RelayHistory => "RelayHistory",
            Operation::RelayContext => "RelayContext",
            Operation::RelayConfig => "RelayConfig",
            Operation::RelayConfigure => "RelayConfigure",
            Operation::RelayTick => "RelayTick",
            Operation::SalienceCurve => "SalienceCurve",
            Operation::ReflectPlaybook => "ReflectPlaybook",
        }
    }

    /// Reads wait for one of the read connections (`server.read_connections`); writes go
    /// to the writer.
    pub const fn is_read(self) -> bool {
        matches!(
            self,
            Operation::Retrieve
                | Operation::RetrieveById
                | Operation::SalienceCurve
                | Operation::History
                | Operation::GetMetrics
                | Operation::Status
                | Operation::Prometheus
                | Operation::SyncStatus
                | Operation::SyncFetch
                | Operation::SearchFiles
                | Operation::ReflectStatus
                | Operation::ReflectPlaybook
                | Operation::InnerStatus
                | Operation::InnerContext
                | Operation::ModuleList
                | Operation::ModuleInfo
                | Operation::WorkspaceFiles
                | Operation::WorkspaceFile
        )
    }

    /// The HTTP method and route template.
    pub const fn http(self) -> (&'static str, &'static str) {
        match self {
            Operation::IngestEvent => ("POST", "/v1/ingest/event"),
            Operation::IngestToolOutput => ("POST", "/v1/ingest/tool_output"),
            Operation::IngestObservation => ("POST", "/v1/ingest/observation"),
            Operation::IngestOutcome => ("POST", "/v1/ingest/outcome"),
            Operation::IngestWorkingState => ("POST", "/v1/ingest/working_state"),
            Operation::Retrieve => ("POST", "/v1/retrieve"),
            Operation::RetrieveById => ("GET", "/v1/records/{id}"),
            Operation::History => ("GET", "/v1/records/{id}/history"),
            Operation::Supersede => ("POST", "/v1/records/{id}/supersede"),
            Operation::Fork => ("POST", "/v1/records/{id}/fork"),
            Operation::Retract => ("POST", "/v1/records/{id}/retract"),
            Operation::Merge => ("POST", "/v1/merge"),
            Operation::Contest => ("POST", "/v1/records/{id}/contest"),
            Operation::Reinforce => ("POST", "/v1/records/{id}/reinforce"),
            Operation::Penalize => ("POST", "/v1/records/{id}/penalize"),
            Operation::GetMetrics => ("GET", "/v1/metrics"),
            Operation::Status => ("GET", "/v1/status"),
            Operation::Prometheus => ("GET", "/metrics"),
            Operation::Consolidate => ("POST", "/v1/consolidate"),
            Operation::Hook => ("POST", "/v1/hooks/{name}"),
            Operation::LogConversation => ("POST", "/v1/conversations"),
            Operation::SyncStatus => ("GET", "/v1/sync/status"),
            Operation::SyncFetch => ("POST", "/v1/sync/fetch"),
            Operation::SyncCheckpoint => ("POST", "/v1/sync/checkpoint"),
            Operation::SearchFiles => ("POST", "/v1/search/files"),
            Operation::Forget => ("POST", "/v1/forget"),
            Operation::ReflectTick => ("POST", "/v1/reflect/tick"),
            Operation::ReflectStatus => ("GET", "/v1/reflect/status"),
            Operation::ReflectFeedback => ("POST", "/v1/reflect/feedback"),
            Operation::ReflectSpawnResult => ("POST", "/v1/reflect/spawn-result"),
            Operation::InnerStatus => ("GET", "/v1/inner/status"),
            Operation::InnerContext => ("GET", "/v1/inner/context"),
            Operation::InnerEvent => ("POST", "/v1/inner/event"),
            Operation::InnerRun => ("POST", "/v1/inner/run"),
            Operation::InnerWrite => ("POST", "/v1/inner/write"),
            Operation::ModuleList => ("GET", "/v1/modules"),
            Operation::ModuleInfo => ("GET", "/v1/modules/{id}"),
            Operation::ModuleChange => ("POST", "/v1/modules/{id}"),
            Operation::ModuleExtract => ("POST", "/v1/modules/{id}/extract"),
            Operation::WorkspaceSync => ("POST", "/v1/workspace/sync"),
            Operation::WorkspaceFiles => ("GET", "/v1/workspace/files"),
            Operation::WorkspaceFile => ("GET", "/v1/workspace/file"),
            Operation::RelayFeed => ("POST", "/feed"),
            Operation::RelayFeedPoll => ("GET", "/feed"),
            Operation::RelaySense => ("POST", "/sense"),
            Operation::RelayHealth => ("GET", "/health"),
            Operation::RelayLast => ("GET", "/agent/last"),
            Operation::RelayHistory => ("GET", "/agent/history"),
            Operation::RelayContext => ("GET", "/agent/context"),
            Operation::RelayConfig => ("GET", "/agent/config"),
            Operation::RelayConfigure => ("POST", "/agent/config"),
            Operation::RelayTick => ("POST", "/agent/tick"),
            Operation::SalienceCurve => ("GET", "/v1/records/{id}/salience"),
            Operation::ReflectPlaybook => ("GET", "/v1/reflect/playbook"),
        }
    }

    /// The gRPC method (`mneme.v1.Memory/NAME`, or `mneme.v1.Hooks/*` for hooks), where
    /// gRPC serves the operation at all.
    pub const fn grpc(self) -> Option<&'static str> {
        match self {
            Operation::Status
            | Operation::Prometheus
            | Operation::Consolidate
            | Operation::LogConversation
            | Operation::SyncStatus
            | Operation::SyncFetch
            | Operation::SyncCheckpoint
            | Operation::SearchFiles
            | Operation::WorkspaceFiles
            | Operation::WorkspaceFile
            | Operation::RelayFeed
            | Operation::RelayFeedPoll
            | Operation::RelaySense
            | Operation::RelayHealth
            | Operation::RelayLast
            | Operation::RelayHistory
            | Operation::RelayContext
            | Operation::RelayConfig
            | Operation::RelayConfigure
            | Operation::RelayTick
            | Operation::SalienceCurve
            | Operation::ReflectPlaybook => None,
            Operation::Hook => Some("Hooks/*"),
            other => Some(other.name()),
        }
    }
}
