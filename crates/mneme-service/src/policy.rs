//! `Principal`: who is calling and what its policy lets it read and write. The daemon
//! builds one per API key (and one `local` principal without keys); the CLI and the
//! daemon's own jobs use [`Principal::internal`]. Rate limits and key digests are the
//! transports' business (`mneme-server::auth`); the policy is checked here, in [`crate::Ops`].
//!
//! Invariant: a client can narrow its view (`Access`) per request, never widen it.

use mneme_core::{MemoryRecord, Scope, Sensitivity};

use crate::{Access, ServiceError, ServiceResult};

/// A caller's read and write policy.
#[derive(Debug, Clone)]
pub struct Principal {
    pub name: String,
    pub read: Access,
    pub write_max_sensitivity: Sensitivity,
    /// `None`: any scope.
    pub write_scopes: Option<Vec<Scope>>,
}

impl Principal {
    pub fn new(name: impl Into<String>, read: Access, write_max_sensitivity: Sensitivity, write_scopes: Option<Vec<Scope>>) -> Self {
        Principal { name: name.into(), read, write_max_sensitivity, write_scopes }
    }

    /// A principal for the daemon's own work and for the local CLI.
    pub fn internal(name: &str, read: Access, write_max: Sensitivity) -> Self {
        Principal::new(name, read, write_max, None)
    }

    /// An unrestricted principal named `name`: the daemon's own jobs, the local CLI.
    pub fn owner(name: &str) -> Self {
        Principal::internal(name, Access::owner(), Sensitivity::Critical)
    }

    /// The same principal reading through a request's narrower trust (its ceiling and
    /// scopes); writes are unchanged.
    pub fn reading_within(&self, ceiling: Sensitivity, scopes: Option<&[Scope]>) -> Principal {
        Principal { read: self.read.narrowed(ceiling, scopes), ..self.clone() }
    }

    /// Whether the principal may read and write everything (the unlabeled agent data, the
    /// conversation log and the workspace files, is only for such principals).
    pub fn unrestricted(&self) -> bool {
        self.full_read() && self.write_max_sensitivity == Sensitivity::Critical && self.write_scopes.is_none()
    }

    fn full_read(&self) -> bool {
        self.read.max_sensitivity == Sensitivity::Critical && self.read.scopes.is_none()
    }

    /// Refuses a principal that may not read and write everything: for `what` has no
    /// sensitivity labels or scopes, or writes into any scope.
    pub fn require_unrestricted(&self, what: &str) -> ServiceResult<()> {
        if self.unrestricted() {
            Ok(())
        } else {
            Err(ServiceError::PermissionDenied(format!(
                "principal {:?} may not use {what}: it needs unrestricted read and write access",
                self.name
            )))
        }
    }

    /// Refuses a principal whose reads are narrowed: store-wide counts would tell it how
    /// many records exist above its ceiling or outside its scopes.
    pub fn require_full_read(&self, what: &str) -> ServiceResult<()> {
        if self.full_read() {
            Ok(())
        } else {
            Err(ServiceError::PermissionDenied(format!(
                "principal {:?} may not read {what}: store-wide counts need unrestricted read access",
                self.name
            )))
        }
    }

    /// The scope an ingest lands in when the request names none.
    pub fn default_write_scope(&self) -> Scope {
        match &self.write_scopes {
            Some(scopes) if !scopes.iter().any(Scope::is_global) => scopes.first().cloned().unwrap_or_default(),
            _ => Scope::global(),
        }
    }

    /// May this principal create a record with this sensitivity in this scope?
    pub fn check_write(&self, sensitivity: Sensitivity, scope: &Scope) -> ServiceResult<()> {
        if sensitivity > self.write_max_sensitivity {
            return Err(ServiceError::PermissionDenied(format!(
                "principal {:?} may not write {} records (its ceiling is {})",
                self.name,
                sensitivity.as_str(),
                self.write_max_sensitivity.as_str()
            )));
        }
        if let Some(scopes) = &self.write_scopes
            && !scopes.contains(scope)
        {
            return Err(ServiceError::PermissionDenied(format!("principal {:?} may not write to scope {scope}", self.name)));
        }
        Ok(())
    }

    /// May this principal change (revise, reinforce, ...) this existing record?
    pub fn check_write_record(&self, record: &MemoryRecord) -> ServiceResult<()> {
        self.check_write(record.sensitivity, &record.scope)
    }
}
