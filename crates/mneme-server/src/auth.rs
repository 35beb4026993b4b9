//! Principals: API keys, the policy each key carries, and per-principal rate limits.
//!
//! Invariants: keys are held only as SHA-256 digests and never logged; a request is
//! checked against *every* configured digest (no early exit on the first byte); the
//! policy is server-side, so a client can narrow its view (`max_sensitivity`, `scopes`)
//! but never widen it.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use mneme_core::{MemoryRecord, Scope, Sensitivity};
use mneme_service::Access;
use sha2::{Digest, Sha256};

use crate::config::{MnemeConfig, PrincipalConfig};
use crate::error::{ApiError, ApiResult};

/// Who is calling, and what it may do.
#[derive(Debug)]
pub struct Principal {
    pub name: String,
    pub read: Access,
    pub write_max_sensitivity: Sensitivity,
    /// `None`: any scope.
    pub write_scopes: Option<Vec<Scope>>,
    bucket: Mutex<Bucket>,
    rate: f64,
    burst: f64,
}

#[derive(Debug)]
struct Bucket {
    tokens: f64,
    at: Instant,
}

impl Principal {
    fn new(name: String, read: Access, write_max: Sensitivity, write_scopes: Option<Vec<Scope>>, rate: f64, burst: f64) -> Self {
        Principal {
            name,
            read,
            write_max_sensitivity: write_max,
            write_scopes,
            bucket: Mutex::new(Bucket { tokens: burst, at: Instant::now() }),
            rate,
            burst,
        }
    }

    /// A principal for the daemon's own work and for the local CLI: never rate-limited.
    pub fn internal(name: &str, read: Access, write_max: Sensitivity) -> Self {
        Principal::new(name.into(), read, write_max, None, 1e12, 1e12)
    }

    /// Whether the principal may read and write everything (the unlabeled agent data, the
    /// conversation log and the workspace files, is only for such principals).
    pub fn unrestricted(&self) -> bool {
        self.read.max_sensitivity == Sensitivity::Critical
            && self.read.scopes.is_none()
            && self.write_max_sensitivity == Sensitivity::Critical
            && self.write_scopes.is_none()
    }

    /// Refuses (403) a principal that may not read and write everything: for `what` has
    /// no sensitivity labels or scopes, or writes into any scope.
    pub fn require_unrestricted(&self, what: &str) -> crate::error::ApiResult<()> {
        if self.unrestricted() {
            Ok(())
        } else {
            Err(crate::error::ApiError::PermissionDenied(format!(
                "principal {:?} may not use {what}: it needs unrestricted read and write access",
                self.name
            )))
        }
    }

    /// Refuses (403) a principal whose reads are narrowed: store-wide counts would tell it
    /// how many records exist above its ceiling or outside its scopes.
    pub fn require_full_read(&self, what: &str) -> crate::error::ApiResult<()> {
        if self.read.max_sensitivity == Sensitivity::Critical && self.read.scopes.is_none() {
            Ok(())
        } else {
            Err(crate::error::ApiError::PermissionDenied(format!(
                "principal {:?} may not read {what}: store-wide counts need unrestricted read access",
                self.name
            )))
        }
    }

    /// Takes one token from the principal's bucket.
    pub fn admit(&self) -> ApiResult<()> {
        let mut b = self.bucket.lock().unwrap_or_else(|p| p.into_inner());
        let now = Instant::now();
        b.tokens = (b.tokens + now.duration_since(b.at).as_secs_f64() * self.rate).min(self.burst);
        b.at = now;
        if b.tokens >= 1.0 {
            b.tokens -= 1.0;
            Ok(())
        } else {
            Err(ApiError::RateLimited { principal: self.name.clone(), retry_after_secs: (1.0 - b.tokens) / self.rate })
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
    pub fn check_write(&self, sensitivity: Sensitivity, scope: &Scope) -> ApiResult<()> {
        if sensitivity > self.write_max_sensitivity {
            return Err(ApiError::PermissionDenied(format!(
                "principal {:?} may not write {} records (its ceiling is {})",
                self.name,
                sensitivity.as_str(),
                self.write_max_sensitivity.as_str()
            )));
        }
        if let Some(scopes) = &self.write_scopes
            && !scopes.contains(scope)
        {
            return Err(ApiError::PermissionDenied(format!("principal {:?} may not write to scope {scope}", self.name)));
        }
        Ok(())
    }

    /// May this principal change (revise, reinforce, ...) this existing record?
    pub fn check_write_record(&self, record: &MemoryRecord) -> ApiResult<()> {
        self.check_write(record.sensitivity, &record.scope)
    }
}

/// The configured principals, or the single local one.
#[derive(Debug)]
pub struct Auth {
    keys: Vec<([u8; 32], Arc<Principal>)>,
    /// Set when no principals are configured (loopback only): every request is this one.
    local: Option<Arc<Principal>>,
}

impl Auth {
    /// Resolves every key (env variables and files are read now, once). `loopback_only`:
    /// whether all listeners are on loopback; without principals anything else is refused.
    pub fn from_config(config: &MnemeConfig, loopback_only: bool) -> Result<Self, String> {
        let rate = config.server.rate_limit_per_second;
        let burst = config.server.rate_limit_burst;
        if config.principals.is_empty() {
            if !loopback_only {
                return Err("refusing to listen on a non-loopback address without API keys: configure [[principals]] \
                            (see README, \"Security\")"
                    .into());
            }
            let local = Principal::new("local".into(), Access::owner(), Sensitivity::Critical, None, rate, burst);
            return Ok(Auth { keys: Vec::new(), local: Some(Arc::new(local)) });
        }
        let mut keys = Vec::new();
        for p in &config.principals {
            let digest = key_digest(p)?;
            let parse = |list: &Option<Vec<String>>| -> Result<Option<Vec<Scope>>, String> {
                list.as_ref()
                    .map(|l| l.iter().map(|s| Scope::parse(s).map_err(|e| format!("principal {:?}: {e}", p.name))).collect())
                    .transpose()
            };
            let read = Access { max_sensitivity: p.read_max_sensitivity, scopes: parse(&p.read_scopes)? };
            let principal = Principal::new(
                p.name.clone(),
                read,
                p.write_max_sensitivity,
                parse(&p.write_scopes)?,
                p.rate_limit_per_second.unwrap_or(rate),
                burst,
            );
            keys.push((digest, Arc::new(principal)));
        }
        Ok(Auth { keys, local: None })
    }

    /// The principal for an `Authorization` header value (`Bearer KEY`).
    pub fn authenticate(&self, authorization: Option<&str>) -> ApiResult<Arc<Principal>> {
        if let Some(local) = &self.local {
            return Ok(local.clone());
        }
        let header = authorization.ok_or_else(|| ApiError::Unauthenticated("missing API key: send Authorization: Bearer KEY".into()))?;
        let key = header
            .strip_prefix("Bearer ")
            .or_else(|| header.strip_prefix("bearer "))
            .map(str::trim)
            .filter(|k| !k.is_empty())
            .ok_or_else(|| ApiError::Unauthenticated("malformed Authorization header: expected \"Bearer KEY\"".into()))?;
        let digest: [u8; 32] = Sha256::digest(key.as_bytes()).into();
        let mut found = None;
        for (d, p) in &self.keys {
            // Constant-time comparison over every key.
            let diff = d.iter().zip(digest.iter()).fold(0u8, |acc, (a, b)| acc | (a ^ b));
            if diff == 0 {
                found = Some(p.clone());
            }
        }
        found.ok_or_else(|| ApiError::Unauthenticated("unknown API key".into()))
    }

    pub fn requires_keys(&self) -> bool {
        self.local.is_none()
    }
}

fn key_digest(p: &PrincipalConfig) -> Result<[u8; 32], String> {
    let raw = if let Some(hex) = &p.key_sha256 {
        let mut out = [0u8; 32];
        for (i, chunk) in hex.as_bytes().chunks(2).enumerate() {
            let s = std::str::from_utf8(chunk).map_err(|_| format!("principal {:?}: key_sha256 is not hex", p.name))?;
            out[i] = u8::from_str_radix(s, 16).map_err(|_| format!("principal {:?}: key_sha256 is not hex", p.name))?;
        }
        return Ok(out);
    } else if let Some(var) = &p.key_env {
        std::env::var(var).map_err(|_| format!("principal {:?}: environment variable {var} (key_env) is not set", p.name))?
    } else if let Some(path) = &p.key_file {
        std::fs::read_to_string(path).map_err(|e| format!("principal {:?}: key_file {}: {e}", p.name, path.display()))?
    } else {
        return Err(format!("principal {:?} has no key", p.name));
    };
    let key = raw.trim();
    if key.len() < 16 {
        return Err(format!("principal {:?}: the key must be at least 16 characters", p.name));
    }
    Ok(Sha256::digest(key.as_bytes()).into())
}

/// Hex SHA-256 of a key, for `key_sha256` in the config (`mneme key hash`).
pub fn hash_key(key: &str) -> String {
    Sha256::digest(key.trim().as_bytes()).iter().map(|b| format!("{b:02x}")).collect()
}
