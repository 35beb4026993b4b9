//! Principals: API keys, the policy each key carries, and per-principal rate limits.
//!
//! Invariants: keys are held only as SHA-256 digests and never logged; a request is
//! checked against *every* configured digest (no early exit on the first byte); the
//! policy is server-side, so a client can narrow its view (`max_sensitivity`, `scopes`)
//! but never widen it.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use mneme_core::{Scope, Sensitivity};
use mneme_service::{Access, Principal};
use sha2::{Digest, Sha256};

use crate::config::MnemeConfig;
use crate::error::{ApiError, ApiResult};
use crate::tls::{CLIENT_CN, CLIENT_PEER, CLIENT_SUBJECT, ClientIdentity};

/// What a request presents: its `Authorization` value, and the client certificate its
/// connection verified (set only by the connection layer, see [`crate::tls`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Credentials {
    pub authorization: Option<String>,
    pub client: Option<ClientIdentity>,
    /// The connection's peer address (its own rate-limit bucket).
    pub peer: Option<IpAddr>,
}

impl Credentials {
    /// From a request's headers: `Authorization`, and the verified client certificate.
    pub fn from_headers(headers: &axum::http::HeaderMap) -> Self {
        let text = |name: &str| headers.get(name).map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned());
        Credentials {
            authorization: headers.get(axum::http::header::AUTHORIZATION).and_then(|v| v.to_str().ok()).map(String::from),
            client: text(CLIENT_SUBJECT).map(|subject| ClientIdentity { subject, common_name: text(CLIENT_CN) }),
            peer: text(CLIENT_PEER).and_then(|p| p.parse().ok()),
        }
    }

    /// The same client certificate with another `Authorization` value.
    pub fn with_authorization(mut self, authorization: Option<String>) -> Self {
        self.authorization = authorization;
        self
    }
}

/// An authenticated caller: its [`Principal`] (the policy, checked in `Ops`) and its
/// token bucket. Derefs to the principal.
#[derive(Debug)]
pub struct Caller {
    pub principal: Principal,
    /// One token bucket per client address (as membraned limits each client): a busy
    /// client of a shared key does not starve the others. `None`: a caller in process.
    buckets: Mutex<HashMap<Option<IpAddr>, Bucket>>,
    rate: f64,
    burst: f64,
}

/// Client addresses whose buckets are kept; beyond it, full (idle) buckets are dropped.
const MAX_BUCKETS: usize = 4096;

#[derive(Debug)]
struct Bucket {
    tokens: f64,
    at: Instant,
}

impl std::ops::Deref for Caller {
    type Target = Principal;
    fn deref(&self) -> &Principal {
        &self.principal
    }
}

impl Caller {
    fn new(principal: Principal, rate: f64, burst: f64) -> Self {
        Caller { principal, buckets: Mutex::new(HashMap::new()), rate, burst }
    }

    /// Takes one token from the bucket of the caller at `client`.
    pub fn admit(&self, client: Option<IpAddr>) -> ApiResult<()> {
        let mut buckets = self.buckets.lock().unwrap_or_else(|p| p.into_inner());
        let now = Instant::now();
        if buckets.len() >= MAX_BUCKETS && !buckets.contains_key(&client) {
            let (rate, burst) = (self.rate, self.burst);
            buckets.retain(|_, b| b.tokens + now.duration_since(b.at).as_secs_f64() * rate < burst);
        }
        let b = buckets.entry(client).or_insert(Bucket { tokens: self.burst, at: now });
        b.tokens = (b.tokens + now.duration_since(b.at).as_secs_f64() * self.rate).min(self.burst);
        b.at = now;
        if b.tokens >= 1.0 {
            b.tokens -= 1.0;
            Ok(())
        } else {
            Err(ApiError::RateLimited { principal: self.name.clone(), retry_after_secs: (1.0 - b.tokens) / self.rate })
        }
    }
}

/// A configured principal's policy (its scopes parsed).
fn policy(p: &crate::config::PrincipalConfig) -> Result<Principal, String> {
    let parse = |list: &Option<Vec<String>>| -> Result<Option<Vec<Scope>>, String> {
        list.as_ref().map(|l| l.iter().map(|s| Scope::parse(s).map_err(|e| format!("principal {:?}: {e}", p.name))).collect()).transpose()
    };
    let read = Access { max_sensitivity: p.read_max_sensitivity, scopes: parse(&p.read_scopes)? };
    Ok(Principal::new(p.name.clone(), read, p.write_max_sensitivity, parse(&p.write_scopes)?))
}

/// The configured principals, or the single local one.
#[derive(Debug)]
pub struct Auth {
    keys: Vec<([u8; 32], Arc<Caller>)>,
    /// Principals bound to a client certificate's subject (`tls_client_subject`); with a
    /// key too (`true`), both are required.
    subjects: Vec<(String, bool, Arc<Caller>)>,
    /// Set when no principals are configured (loopback only): every request is this one.
    local: Option<Arc<Caller>>,
}

impl Auth {
    /// Resolves every key (env variables and files are read now, once). `loopback_only`:
    /// whether all listeners are on loopback; without principals anything else is refused.
    /// `env` looks up `key_env` variables (the daemon passes the environment it was given).
    pub fn from_config(config: &MnemeConfig, loopback_only: bool, env: &dyn Fn(&str) -> Option<String>) -> Result<Self, String> {
        let rate = config.server.rate_limit_per_second;
        let burst = config.server.rate_limit_burst;
        let digests = config.resolved_keys(loopback_only, env)?;
        // membraned's single shared key (`[membrane]`), when the protocol is on and the key set.
        let shared = config.membrane.enabled.then(|| env(&config.membrane.api_key_env)).flatten().filter(|k| !k.trim().is_empty());
        if config.principals.is_empty() && shared.is_none() {
            let local = Caller::new(Principal::new("local", Access::owner(), Sensitivity::Critical, None), rate, burst);
            return Ok(Auth { keys: Vec::new(), subjects: Vec::new(), local: Some(Arc::new(local)) });
        }
        let mut keys = Vec::new();
        if let Some(key) = shared {
            let name = &config.membrane.principal;
            let principal = match config.principals.iter().find(|p| &p.name == name) {
                Some(p) => policy(p)?,
                None => Principal::new(name.clone(), Access::owner(), Sensitivity::Critical, None),
            };
            let digest: [u8; 32] = Sha256::digest(key.trim().as_bytes()).into();
            keys.push((digest, Arc::new(Caller::new(principal, rate, burst))));
        }
        let mut subjects = Vec::new();
        for (p, digest) in config.principals.iter().zip(digests) {
            let caller = Arc::new(Caller::new(policy(p)?, p.rate_limit_per_second.unwrap_or(rate), burst));
            if let Some(subject) = &p.tls_client_subject {
                subjects.push((subject.trim().to_string(), digest.is_some(), caller.clone()));
            }
            if let Some(digest) = digest {
                keys.push((digest, caller));
            }
        }
        Ok(Auth { keys, subjects, local: None })
    }

    /// The principal a request's credentials name: its key (`Authorization: Bearer KEY`),
    /// checked against the client certificate when the principal is bound to one; or,
    /// without a key, a client certificate bound to a principal that has no key.
    pub fn authenticate(&self, credentials: &Credentials) -> ApiResult<Arc<Caller>> {
        if let Some(local) = &self.local {
            return Ok(local.clone());
        }
        let Some(header) = credentials.authorization.as_deref() else {
            let by_certificate = credentials.client.as_ref().and_then(|client| {
                self.subjects.iter().find(|(subject, keyed, _)| !keyed && client.matches(subject)).map(|(_, _, caller)| caller.clone())
            });
            return by_certificate.ok_or_else(|| ApiError::Unauthenticated("missing API key: send Authorization: Bearer KEY".into()));
        };
        let caller = self.by_key(header)?;
        // A principal bound to a certificate needs that certificate too (a second factor).
        match self.subjects.iter().find(|(_, _, c)| Arc::ptr_eq(c, &caller)) {
            Some((subject, _, _)) if !credentials.client.as_ref().is_some_and(|client| client.matches(subject)) => {
                Err(ApiError::Unauthenticated(format!(
                    "principal {:?} must also present its client certificate (subject {subject:?}) over TLS",
                    caller.name
                )))
            }
            _ => Ok(caller),
        }
    }

    /// The principal whose key an `Authorization` value carries.
    fn by_key(&self, header: &str) -> ApiResult<Arc<Caller>> {
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
