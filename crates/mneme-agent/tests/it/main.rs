//! mneme-agent's integration tests: the engines together (hooks, scheduler, reflection,
//! inner life, modules, the relay, truth), with scripted OpenAI-compatible servers on loopback.

mod inner;
mod llm;
mod modules;
mod reflect;
mod reflect_model;
mod relay;
mod truth;

/// A service with what the daemon hands the owner's engines: the door over it and an
/// unrestricted principal. Dereferences to the service for the tests' own set-up.
#[derive(Debug)]
pub struct Owned {
    service: std::sync::Arc<mneme_service::MemoryService>,
    ops: mneme_service::Ops,
    principal: mneme_service::Principal,
}

impl Owned {
    pub fn new(service: mneme_service::MemoryService) -> Owned {
        let service = std::sync::Arc::new(service);
        Owned { ops: mneme_service::Ops::new(service.clone(), false), service, principal: mneme_service::Principal::owner("test") }
    }

    /// The owner's handle, as the daemon's jobs get it.
    pub fn owner(&self) -> mneme_service::Owner<'_> {
        self.ops.owner(&self.principal).expect("an unrestricted principal")
    }
}

impl std::ops::Deref for Owned {
    type Target = mneme_service::MemoryService;
    fn deref(&self) -> &mneme_service::MemoryService {
        &self.service
    }
}
