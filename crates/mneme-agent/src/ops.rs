//! `AgentOps`: the door for the workspace's engines, beside [`mneme_service::Ops`] (which
//! it wraps). Reflection, the inner life, knowledge modules, deploying the workspace and
//! the relay: every operation takes the caller's [`Principal`], gets the owner's handle
//! from `Ops::owner` (the one policy check: these work on the owner's files and
//! buffers, which carry no sensitivity labels or scopes) and returns a typed answer. The
//! daemon's transports call these and check no policy themselves; so do the CLI's
//! `reflect tick` and `inner run` (its file-only commands, as the local owner, call the
//! workspace functions directly, without opening the store).

use std::sync::Arc;

use mneme_reflect::ReflectError;
use mneme_reflect::engine::Reflector;
use mneme_service::{Ops, Owner, Principal, ServiceError};
use mneme_workspace::inner::{InnerEvent, InnerState, Job, Mood};
use mneme_workspace::{WorkspaceError, WorkspaceSettings};
use serde::Serialize;
use serde_json::Value;

/// Why a workspace-engine operation failed.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    /// Refused by policy, or the store failed.
    #[error(transparent)]
    Service(#[from] ServiceError),
    /// A tick or job already running, no workspace, or a file that failed.
    #[error(transparent)]
    Reflect(#[from] ReflectError),
    /// A workspace file operation failed or refused its input.
    #[error(transparent)]
    Workspace(#[from] WorkspaceError),
    /// A bad value in the request, in words.
    #[error("{0}")]
    Invalid(String),
}

impl AgentError {
    /// Its class on every surface (one table: `mneme_core::ErrorKind::mapping`).
    pub fn kind(&self) -> mneme_core::ErrorKind {
        match self {
            AgentError::Service(e) => e.kind(),
            AgentError::Reflect(e) => e.kind(),
            AgentError::Workspace(e) => e.kind(),
            AgentError::Invalid(_) => mneme_core::ErrorKind::InvalidArgument,
        }
    }
}

/// What these operations answer.
pub type AgentResult<T> = Result<T, AgentError>;

/// The base playbook and the effective one (`None` until generated).
#[derive(Debug, Clone, Serialize)]
pub struct Playbook {
    pub base: Option<String>,
    pub effective: Option<String>,
}

/// A line appended to the heartbeat log.
#[derive(Debug, Clone, Serialize)]
pub struct Recorded {
    pub recorded: Value,
}

/// The inner life's state and its mood now (`None` before the first event).
#[derive(Debug, Clone, Serialize)]
pub struct InnerStatus {
    pub state: Option<InnerState>,
    pub mood: Option<Mood>,
}

/// The inner life's context block at one level.
#[derive(Debug, Clone, Serialize)]
pub struct InnerContext {
    pub level: u8,
    pub context: String,
}

/// The state after an event, and its mood.
#[derive(Debug, Clone, Serialize)]
pub struct InnerEventAnswer {
    pub mood: Mood,
    pub state: InnerState,
}

/// A file written for an inner-life job.
#[derive(Debug, Clone, Serialize)]
pub struct Written {
    pub job: Job,
    pub path: String,
    pub append: bool,
}

/// The workspace's Markdown files, and what is known of those the search index holds.
#[derive(Debug, Clone, Serialize)]
pub struct WorkspaceFiles {
    pub files: Vec<String>,
    /// Memory type, freshness, reads, read entries and related files of each indexed file.
    pub knowledge: Vec<crate::file_index::FileKnowledge>,
}

/// One workspace file's text.
#[derive(Debug, Clone, Serialize)]
pub struct WorkspaceFile {
    pub path: String,
    pub text: String,
}

/// What `module_change` does to a module.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ModuleAction {
    /// Into the active stack, at a priority when one is given.
    Activate(Option<i64>),
    Suspend,
    Disable,
    Priority(i64),
}

impl ModuleAction {
    /// From the wire's `action` and `priority`; the error names what is wrong.
    pub fn parse(action: &str, priority: Option<i64>) -> AgentResult<ModuleAction> {
        match (action, priority) {
            ("activate", priority) => Ok(ModuleAction::Activate(priority)),
            ("suspend", None) => Ok(ModuleAction::Suspend),
            ("disable", None) => Ok(ModuleAction::Disable),
            ("priority", Some(n)) => Ok(ModuleAction::Priority(n)),
            ("priority", None) => Err(AgentError::Invalid("action \"priority\" needs \"priority\"".into())),
            ("suspend" | "disable", Some(_)) => Err(AgentError::Invalid(format!("action {action:?} takes no \"priority\""))),
            (other, _) => Err(AgentError::Invalid(format!("action {other:?}: must be activate, suspend, disable or priority"))),
        }
    }
}

/// The relay's answers keep the relay seed's JSON shapes (`{"ok": true, …}`).
#[derive(Debug, Clone, Serialize)]
pub struct RelayAnswer<T: Serialize> {
    pub ok: bool,
    #[serde(flatten)]
    pub body: T,
}

fn relay<T: Serialize>(body: T) -> RelayAnswer<T> {
    RelayAnswer { ok: true, body }
}

/// The door for the workspace's engines and the relay.
#[derive(Debug, Clone)]
pub struct AgentOps {
    ops: Ops,
    reflector: Arc<Reflector>,
    relay: Arc<mneme_relay::Relay>,
    workspace: WorkspaceSettings,
}

impl AgentOps {
    pub fn new(ops: Ops, reflector: Arc<Reflector>, relay: Arc<mneme_relay::Relay>, workspace: WorkspaceSettings) -> Self {
        AgentOps { ops, reflector, relay, workspace }
    }

    /// The memory door this one wraps.
    pub fn ops(&self) -> &Ops {
        &self.ops
    }

    /// The reflection engine (the scheduler's heartbeat task runs it).
    pub fn reflector(&self) -> &Arc<Reflector> {
        &self.reflector
    }

    /// The relay's buffers and loop (the daemon's relay job ticks it).
    pub fn relay_engine(&self) -> &Arc<mneme_relay::Relay> {
        &self.relay
    }

    /// The agent's workspace settings (its directory may not exist).
    pub fn workspace(&self) -> &WorkspaceSettings {
        &self.workspace
    }

    /// The owner's handle, and the workspace, which must exist: the heartbeat and the
    /// inner life never create one.
    fn owner<'a>(&'a self, p: &'a Principal) -> AgentResult<Owner<'a>> {
        let owner = self.ops.owner_for(p, "the workspace's reflection and inner life")?;
        if !self.workspace.dir.is_dir() {
            return Err(ReflectError::NoWorkspace(self.workspace.dir.clone()).into());
        }
        Ok(owner)
    }

    // ---- reflection ---------------------------------------------------------------------

    /// One heartbeat tick (model calls block: run it on a blocking thread).
    pub fn reflect_tick(&self, p: &Principal, options: &mneme_reflect::tick::TickOptions) -> AgentResult<mneme_reflect::tick::TickReport> {
        let owner = self.owner(p)?;
        Ok(mneme_reflect::tick::tick(&self.reflector, &owner, &self.workspace, self.ops.now(), options)?)
    }

    /// The heartbeat log, summarised.
    pub fn reflect_status(&self, p: &Principal) -> AgentResult<mneme_reflect::status::Status> {
        self.owner(p)?;
        Ok(mneme_reflect::status::status(&self.reflector, &self.workspace, self.ops.now())?)
    }

    /// The base and effective playbooks.
    pub fn reflect_playbook(&self, p: &Principal) -> AgentResult<Playbook> {
        self.owner(p)?;
        let read = |relative: &str| {
            mneme_workspace::paths::resolve(&self.workspace.dir, relative).ok().and_then(|path| std::fs::read_to_string(path).ok())
        };
        Ok(Playbook { base: read(mneme_workspace::paths::PLAYBOOK), effective: read(mneme_workspace::paths::EFFECTIVE_PLAYBOOK) })
    }

    /// The host's feedback on an output, as a heartbeat-log line.
    pub fn reflect_feedback(&self, p: &Principal, f: &mneme_reflect::report::Feedback) -> AgentResult<Recorded> {
        self.owner(p)?;
        let (recorded, _) = mneme_reflect::report::feedback(&self.workspace, self.ops.now(), f)?;
        Ok(Recorded { recorded })
    }

    /// A spawned task's outcome, as a heartbeat-log line.
    pub fn reflect_spawn_result(&self, p: &Principal, spawn_id: &str, outcome: &str, note: Option<&str>) -> AgentResult<Recorded> {
        self.owner(p)?;
        let (recorded, _) = mneme_reflect::report::spawn_result(&self.workspace, self.ops.now(), spawn_id, outcome, note)?;
        Ok(Recorded { recorded })
    }

    // ---- the inner life ------------------------------------------------------------------

    /// The state and the current mood.
    pub fn inner_status(&self, p: &Principal) -> AgentResult<InnerStatus> {
        self.owner(p)?;
        let state = mneme_workspace::inner::read_state(&self.workspace)?;
        let mood = state.as_ref().map(|s| s.mood(self.ops.now()));
        Ok(InnerStatus { state, mood })
    }

    /// The context block at `level` (1–4).
    pub fn inner_context(&self, p: &Principal, level: u8) -> AgentResult<InnerContext> {
        self.owner(p)?;
        let context = mneme_workspace::inner::context(&self.workspace, self.ops.now(), level)?;
        Ok(InnerContext { level, context })
    }

    /// Records one event.
    pub fn inner_event(&self, p: &Principal, event: &InnerEvent) -> AgentResult<InnerEventAnswer> {
        self.owner(p)?;
        let now = self.ops.now();
        let state = mneme_workspace::inner::record(&self.workspace, std::slice::from_ref(event), now)?;
        Ok(InnerEventAnswer { mood: state.mood(now), state })
    }

    /// One job (model calls block: run it on a blocking thread).
    pub fn inner_run(
        &self,
        p: &Principal,
        job: Job,
        options: &mneme_reflect::inner::JobOptions,
    ) -> AgentResult<mneme_reflect::inner::JobReport> {
        let owner = self.owner(p)?;
        Ok(mneme_reflect::inner::run(&self.reflector, &owner, &self.workspace, job, self.ops.now(), options)?)
    }

    /// A file written for `job`, refused outside the job's files.
    pub fn inner_write(&self, p: &Principal, job: Job, path: &str, content: &str, append: bool) -> AgentResult<Written> {
        self.owner(p)?;
        let path = mneme_workspace::inner::write_for(&self.workspace, job, path, content, append, self.ops.now())?;
        Ok(Written { job, path, append })
    }

    // ---- knowledge modules and the workspace ---------------------------------------------

    /// Registered and unregistered modules and the active stack.
    pub fn module_list(&self, p: &Principal) -> AgentResult<mneme_workspace::modules::ModuleList> {
        self.owner(p)?;
        Ok(mneme_workspace::modules::list(&self.workspace)?)
    }

    /// One module.
    pub fn module_info(&self, p: &Principal, id: &str) -> AgentResult<mneme_workspace::modules::ModuleInfo> {
        self.owner(p)?;
        Ok(mneme_workspace::modules::info(&self.workspace, id)?)
    }

    /// Activates, suspends or disables a module, or sets its priority.
    pub fn module_change(&self, p: &Principal, id: &str, action: ModuleAction) -> AgentResult<mneme_workspace::modules::Change> {
        use mneme_workspace::modules;
        self.owner(p)?;
        let ws = &self.workspace;
        Ok(match action {
            ModuleAction::Activate(priority) => modules::activate(ws, id, priority, self.ops.now()),
            ModuleAction::Suspend => modules::suspend(ws, id),
            ModuleAction::Disable => modules::disable(ws, id),
            ModuleAction::Priority(n) => modules::set_priority(ws, id, n),
        }?)
    }

    /// A module from the playbook and recent logs (a model call blocks: run it on a
    /// blocking thread).
    pub fn module_extract(
        &self,
        p: &Principal,
        request: &mneme_reflect::extract::ExtractRequest,
    ) -> AgentResult<mneme_reflect::extract::Extracted> {
        use mneme_reflect::extract::{self, ExtractError};
        self.owner(p)?;
        extract::extract(&self.reflector, &self.workspace, request, self.ops.now()).map_err(|e| match e {
            ExtractError::Invalid(msg) => AgentError::Invalid(msg),
            ExtractError::Workspace(w) => AgentError::Workspace(w),
        })
    }

    /// Deploys the workspace's templates (the sync engine's report).
    pub fn workspace_sync(&self, p: &Principal) -> AgentResult<mneme_workspace::deploy::SyncReport> {
        self.owner(p)?;
        Ok(mneme_workspace::deploy::sync(&self.workspace, self.ops.now())?)
    }

    /// The workspace's Markdown files (paths relative to its root, sorted; hidden names
    /// skipped): what MCP offers as resources. No workspace: none.
    pub fn workspace_files(&self, p: &Principal) -> AgentResult<WorkspaceFiles> {
        self.ops.owner_for(p, "the workspace's files")?;
        let root = &self.workspace.dir;
        let mut files = Vec::new();
        let mut stack = vec![root.clone()];
        while let Some(dir) = stack.pop() {
            let Ok(entries) = std::fs::read_dir(&dir) else { continue };
            for entry in entries.flatten() {
                let path = entry.path();
                let name = entry.file_name().to_string_lossy().into_owned();
                if name.starts_with('.') {
                    continue;
                }
                if path.is_dir() {
                    stack.push(path);
                } else if name.ends_with(".md")
                    && let Ok(relative) = path.strip_prefix(root)
                {
                    files.push(relative.to_string_lossy().into_owned());
                }
            }
        }
        files.sort();
        let knowledge = crate::file_index::knowledge(&self.ops.owner_for(p, "the workspace's files")?, self.ops.now())?;
        Ok(WorkspaceFiles { files, knowledge })
    }

    /// Searches the workspace's files by words, and by meaning with a model; each hit with
    /// its file's memory type, freshness and reads (`file_index::search`).
    pub fn search_files(
        &self,
        p: &Principal,
        query: &str,
        limit: usize,
        ranking: mneme_service::FileRanking,
    ) -> AgentResult<crate::file_index::KnownSearch> {
        let owner = self.ops.owner_for(p, "workspace search")?;
        Ok(crate::file_index::search(&owner, query, limit, ranking, self.ops.now())?)
    }

    /// One of those files: only a path the listing offers (never one a caller made up, such
    /// as `../x`), resolved inside the workspace.
    pub fn workspace_file(&self, p: &Principal, path: &str) -> AgentResult<WorkspaceFile> {
        if !self.workspace_files(p)?.files.iter().any(|f| f == path) {
            return Err(WorkspaceError::NotFound(format!(
                "no workspace file {path:?}: only the Markdown files the listing offers can be read"
            ))
            .into());
        }
        let resolved = mneme_workspace::paths::resolve(&self.workspace.dir, path)?;
        let text =
            std::fs::read_to_string(&resolved).map_err(|source| WorkspaceError::Io { action: "cannot read", path: resolved, source })?;
        // A read renews the file's freshness (`mneme_workspace::knowledge`).
        self.ops.owner_for(p, "the workspace's files")?.record_file_reads(&[(path.to_string(), String::new())])?;
        Ok(WorkspaceFile { path: path.to_string(), text })
    }

    // ---- the relay (the relay seed's routes): screen text and transcripts are the owner's --

    fn relay_owner(&self, p: &Principal) -> AgentResult<&mneme_relay::Relay> {
        self.ops.owner_for(p, "the relay")?;
        Ok(&self.relay)
    }

    /// `POST /feed`: an item into the feed ring.
    pub fn relay_feed(&self, p: &Principal, item: mneme_relay::NewFeed) -> AgentResult<RelayAnswer<Value>> {
        let item = self.relay_owner(p)?.feed(item, self.ops.now()).map_err(AgentError::Invalid)?;
        Ok(relay(serde_json::json!({ "id": item.id })))
    }

    /// `GET /feed?after=ID`.
    pub fn relay_feed_poll(&self, p: &Principal, after: u64) -> AgentResult<RelayAnswer<Value>> {
        Ok(relay(serde_json::json!({ "messages": self.relay_owner(p)?.feed_after(after) })))
    }

    /// `POST /sense`: a screen or audio event into the sense ring.
    pub fn relay_sense(&self, p: &Principal, event: mneme_relay::SenseEvent) -> AgentResult<RelayAnswer<Value>> {
        self.relay_owner(p)?.sense(event, self.ops.now()).map_err(AgentError::Invalid)?;
        Ok(relay(serde_json::json!({})))
    }

    /// `GET /health`: the relay's own health document.
    pub fn relay_health(&self, p: &Principal) -> AgentResult<Value> {
        Ok(self.relay_owner(p)?.health())
    }

    /// `GET /agent/last`.
    pub fn relay_last(&self, p: &Principal) -> AgentResult<RelayAnswer<Value>> {
        Ok(relay(serde_json::json!({ "result": self.relay_owner(p)?.last() })))
    }

    /// `GET /agent/history?limit=N`.
    pub fn relay_history(&self, p: &Principal, limit: usize) -> AgentResult<RelayAnswer<Value>> {
        Ok(relay(serde_json::json!({ "results": self.relay_owner(p)?.history(limit) })))
    }

    /// `GET /agent/context`.
    pub fn relay_context(&self, p: &Principal) -> AgentResult<RelayAnswer<Value>> {
        Ok(relay(serde_json::json!({ "context": self.relay_owner(p)?.context(self.ops.now()) })))
    }

    /// `GET /agent/config`.
    pub fn relay_config(&self, p: &Principal) -> AgentResult<RelayAnswer<Value>> {
        Ok(relay(serde_json::json!({ "config": self.relay_owner(p)?.runtime_config() })))
    }

    /// `POST /agent/config`.
    pub fn relay_configure(&self, p: &Principal, change: mneme_relay::ConfigChange) -> AgentResult<RelayAnswer<Value>> {
        let config = self.relay_owner(p)?.configure(change).map_err(AgentError::Invalid)?;
        Ok(relay(serde_json::json!({ "config": config })))
    }

    /// `POST /agent/tick`: one tick now (a model call blocks on the current runtime: call
    /// it on a blocking thread of that runtime).
    pub fn relay_tick(&self, p: &Principal) -> AgentResult<RelayAnswer<Value>> {
        let relay_engine = self.relay_owner(p)?;
        let outcome = tokio::runtime::Handle::current().block_on(relay_engine.tick(self.ops.now()));
        Ok(relay(serde_json::json!({ "tick": outcome })))
    }

    /// Consolidation may run for this principal (the owner's: it reads every buffered
    /// message).
    pub fn may_consolidate(&self, p: &Principal) -> AgentResult<()> {
        self.ops.owner_for(p, "consolidation")?;
        Ok(())
    }
}
