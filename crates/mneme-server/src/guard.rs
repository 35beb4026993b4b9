//! The browser guard: every request on the HTTP port (API, hooks, relay, console, MCP)
//! passes it before anything else runs, keys or no keys. A page in the user's browser is
//! not the owner, so with no API keys (the loopback default) it must not be able to write,
//! erase or read through the user's browser:
//! - `Host` must be a loopback name or address, the bound address, or a name in
//!   `[server] allowed_hosts` (DNS rebinding: a page from `evil.example` re-resolved to
//!   127.0.0.1 still sends `Host: evil.example`); refused with 403 naming the header;
//! - a request carrying an `Origin` other than the daemon's own (the scheme and authority
//!   the request was sent to) is refused with 403 unless the origin is in
//!   `[server] cors_origins`, which also opens CORS for it (closed by default); a request
//!   without `Origin` that the browser marks `Sec-Fetch-Site: cross-site`/`same-site` is
//!   refused too, navigations excepted;
//! - a body must be JSON (`Content-Type: application/json` or `…+json`), else 415: a
//!   cross-origin `text/plain` or form POST is a "simple" request that browsers send
//!   without a preflight.
//!
//! Clients that are not browsers (curl, the CLI, SDKs) send no `Origin` and a loopback or
//! configured `Host`, so they pass unchanged as long as they label their JSON.

use std::net::{IpAddr, SocketAddr};

use axum::extract::Request;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde_json::json;

/// The guard's settings, fixed at start.
#[derive(Debug, Clone)]
pub struct Guard {
    bound: SocketAddr,
    /// `https` when the listener speaks TLS: the daemon's own pages come from there.
    scheme: &'static str,
    /// Lowercased names from `[server] allowed_hosts`; `*` accepts any `Host`.
    hosts: Vec<String>,
    /// Normalised origins from `[server] cors_origins`.
    origins: Vec<String>,
}

/// Why a request was refused.
#[derive(Debug, PartialEq, Eq)]
pub enum Refusal {
    Host(String),
    Origin(String),
    FetchSite(String),
    MediaType(String),
}

impl Refusal {
    fn response(&self) -> Response {
        let (status, code, message) = match self {
            Refusal::Host(host) => (
                StatusCode::FORBIDDEN,
                "permission_denied",
                format!(
                    "the Host header {host:?} is not a name of this daemon: use a loopback address or the bound address, or add the name to [server] allowed_hosts"
                ),
            ),
            Refusal::Origin(origin) => (
                StatusCode::FORBIDDEN,
                "permission_denied",
                format!(
                    "the Origin header {origin:?} is another site: browsers may call this daemon only from its own pages, or from origins listed in [server] cors_origins"
                ),
            ),
            Refusal::FetchSite(site) => (
                StatusCode::FORBIDDEN,
                "permission_denied",
                format!("the Sec-Fetch-Site header {site:?} marks a request from another site: refused (see [server] cors_origins)"),
            ),
            Refusal::MediaType(got) => (
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "unsupported_media_type",
                format!("the Content-Type header must be application/json for a request with a body, not {got:?}"),
            ),
        };
        (status, axum::Json(json!({ "error": { "code": code, "message": message } }))).into_response()
    }
}

/// The verdict on an accepted request: whether CORS headers go on its response.
#[derive(Debug, PartialEq, Eq)]
pub enum Pass {
    SameOrigin,
    /// A configured cross-origin caller: the response carries `Access-Control-Allow-Origin`.
    Cors(String),
}

const CORS_METHODS: &str = "GET, POST, DELETE, OPTIONS";
const CORS_HEADERS: &str = "authorization, content-type, accept, mcp-session-id, mcp-protocol-version, last-event-id, x-mneme-user";

impl Guard {
    pub fn new(bound: SocketAddr, allowed_hosts: &[String], cors_origins: &[String]) -> Guard {
        Guard {
            bound,
            scheme: "http",
            hosts: allowed_hosts.iter().map(|h| h.trim().trim_end_matches('.').to_ascii_lowercase()).collect(),
            origins: cors_origins.iter().filter_map(|o| normalise_origin(o)).collect(),
        }
    }

    /// The guard of a listener that speaks TLS (its own pages are `https://`).
    pub fn with_tls(mut self, tls: bool) -> Guard {
        self.scheme = if tls { "https" } else { "http" };
        self
    }

    /// Checks one request's headers (everything the guard needs is in them).
    pub fn check(&self, method: &Method, headers: &HeaderMap) -> Result<Pass, Refusal> {
        let host = match headers.get(header::HOST) {
            Some(v) => {
                let text = v.to_str().map_err(|_| Refusal::Host(String::from_utf8_lossy(v.as_bytes()).into_owned()))?;
                if !self.host_allowed(text) {
                    return Err(Refusal::Host(text.to_string()));
                }
                Some(text.to_ascii_lowercase())
            }
            // HTTP/1.0 without Host: no browser sends that.
            None => None,
        };
        let pass = match headers.get(header::ORIGIN) {
            Some(v) => {
                let text = String::from_utf8_lossy(v.as_bytes()).into_owned();
                let origin = normalise_origin(&text).ok_or_else(|| Refusal::Origin(text.clone()))?;
                let own = host.as_deref().and_then(|h| normalise_origin(&format!("{}://{h}", self.scheme)));
                if own.as_deref() == Some(origin.as_str()) {
                    Pass::SameOrigin
                } else if self.origins.contains(&origin) {
                    Pass::Cors(text)
                } else {
                    return Err(Refusal::Origin(text));
                }
            }
            None => {
                let site = headers.get("sec-fetch-site").and_then(|v| v.to_str().ok()).unwrap_or("none");
                let navigate = headers.get("sec-fetch-mode").and_then(|v| v.to_str().ok()) == Some("navigate");
                if matches!(site, "cross-site" | "same-site") && !(navigate && (method == Method::GET || method == Method::HEAD)) {
                    return Err(Refusal::FetchSite(site.to_string()));
                }
                Pass::SameOrigin
            }
        };
        if carries_body(headers) {
            let kind = headers.get(header::CONTENT_TYPE).map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned());
            match kind {
                Some(k) if is_json(&k) => {}
                Some(k) => return Err(Refusal::MediaType(k)),
                None => return Err(Refusal::MediaType("none".into())),
            }
        }
        Ok(pass)
    }

    fn host_allowed(&self, host: &str) -> bool {
        let name = host_name(host);
        if self.hosts.iter().any(|h| h == "*" || *h == name) {
            return true;
        }
        if name == "localhost" || name.ends_with(".localhost") {
            return true;
        }
        match name.trim_start_matches('[').trim_end_matches(']').parse::<IpAddr>() {
            // An address literal cannot be rebound: it is loopback, the bound address, or
            // (bound to every interface) one of this machine's.
            Ok(ip) => ip.is_loopback() || ip == self.bound.ip() || self.bound.ip().is_unspecified(),
            Err(_) => false,
        }
    }
}

/// The host part of a `Host` header, lowercased, without port or trailing dot.
fn host_name(host: &str) -> String {
    let host = host.trim().to_ascii_lowercase();
    let name = if host.starts_with('[') {
        host.split_once(']').map(|(h, _)| format!("{h}]")).unwrap_or(host.clone())
    } else {
        match host.rsplit_once(':') {
            Some((h, port)) if port.chars().all(|c| c.is_ascii_digit()) => h.to_string(),
            _ => host.clone(),
        }
    };
    name.trim_end_matches('.').to_string()
}

/// `scheme://host:port` lowercased with the default port made explicit, or None when it
/// is not a web origin (`null`, a path, another scheme).
fn normalise_origin(origin: &str) -> Option<String> {
    let origin = origin.trim().trim_end_matches('/').to_ascii_lowercase();
    let (scheme, rest) = origin.split_once("://")?;
    let default_port = match scheme {
        "http" => 80,
        "https" => 443,
        _ => return None,
    };
    if rest.is_empty() || rest.contains(['/', '?', '#', '@']) {
        return None;
    }
    let name = host_name(rest);
    let port = match rest.strip_prefix(name.as_str()).and_then(|p| p.strip_prefix(':')) {
        Some(p) => p.parse::<u16>().ok()?,
        None if rest == name => default_port,
        None => return None,
    };
    Some(format!("{scheme}://{name}:{port}"))
}

/// Whether the request labels or announces a body: a content type (an empty form is
/// still a form), a length above zero, or a chunked one.
fn carries_body(headers: &HeaderMap) -> bool {
    let length = headers.get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()).is_some_and(|n| n.trim() != "0");
    length || headers.contains_key(header::CONTENT_TYPE) || headers.contains_key(header::TRANSFER_ENCODING)
}

/// `application/json`, `application/…+json`, parameters (charset) allowed.
fn is_json(kind: &str) -> bool {
    let essence = kind.split(';').next().unwrap_or_default().trim().to_ascii_lowercase();
    essence == "application/json" || (essence.starts_with("application/") && essence.ends_with("+json"))
}

/// The axum middleware: refuses what [`Guard::check`] refuses, answers CORS preflights
/// from configured origins, and labels their responses.
pub async fn middleware(guard: axum::extract::State<std::sync::Arc<Guard>>, request: Request, next: Next) -> Response {
    let preflight = request.method() == Method::OPTIONS && request.headers().contains_key("access-control-request-method");
    match guard.check(request.method(), request.headers()) {
        Err(refusal) => {
            tracing::warn!(?refusal, path = %request.uri().path(), "request refused by the browser guard");
            refusal.response()
        }
        Ok(Pass::Cors(origin)) => {
            let mut response = if preflight {
                let mut r = StatusCode::NO_CONTENT.into_response();
                let h = r.headers_mut();
                h.insert(header::ACCESS_CONTROL_ALLOW_METHODS, HeaderValue::from_static(CORS_METHODS));
                h.insert(header::ACCESS_CONTROL_ALLOW_HEADERS, HeaderValue::from_static(CORS_HEADERS));
                h.insert(header::ACCESS_CONTROL_MAX_AGE, HeaderValue::from_static("600"));
                r
            } else {
                next.run(request).await
            };
            let h = response.headers_mut();
            if let Ok(v) = HeaderValue::from_str(&origin) {
                h.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, v);
            }
            h.insert(header::ACCESS_CONTROL_EXPOSE_HEADERS, HeaderValue::from_static("mcp-session-id, retry-after"));
            h.append(header::VARY, HeaderValue::from_static("Origin"));
            response
        }
        Ok(Pass::SameOrigin) => next.run(request).await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(*k, HeaderValue::from_str(v).expect("header"));
        }
        h
    }

    fn loopback() -> Guard {
        Guard::new("127.0.0.1:18791".parse().expect("addr"), &[], &[])
    }

    #[test]
    fn loopback_names_and_the_bound_address_pass_other_hosts_are_refused() {
        let g = loopback();
        for host in ["127.0.0.1:18791", "localhost:18791", "LOCALHOST", "[::1]:18791", "127.0.0.2", "app.localhost:1"] {
            assert_eq!(g.check(&Method::GET, &headers(&[("host", host)])), Ok(Pass::SameOrigin), "{host}");
        }
        for host in ["evil.example", "evil.example:18791", "10.0.0.5:18791", "localhost.evil.example"] {
            assert_eq!(g.check(&Method::GET, &headers(&[("host", host)])), Err(Refusal::Host(host.into())), "{host}");
        }
        let named = Guard::new("127.0.0.1:18791".parse().expect("addr"), &["Mneme.Internal".into()], &[]);
        assert!(named.check(&Method::GET, &headers(&[("host", "mneme.internal:18791")])).is_ok());
        let any = Guard::new("127.0.0.1:18791".parse().expect("addr"), &["*".into()], &[]);
        assert!(any.check(&Method::GET, &headers(&[("host", "whatever.example")])).is_ok());
        let everywhere = Guard::new("0.0.0.0:18791".parse().expect("addr"), &[], &[]);
        assert!(everywhere.check(&Method::GET, &headers(&[("host", "10.0.0.5:18791")])).is_ok());
        assert!(everywhere.check(&Method::GET, &headers(&[("host", "box.lan:18791")])).is_err());
    }

    #[test]
    fn only_the_daemons_own_origin_or_a_configured_one_passes() {
        let g = loopback();
        let own = headers(&[("host", "127.0.0.1:18791"), ("origin", "http://127.0.0.1:18791"), ("content-type", "application/json")]);
        assert_eq!(g.check(&Method::POST, &own), Ok(Pass::SameOrigin));
        for origin in ["http://evil.example", "http://127.0.0.1:3000", "null", "https://127.0.0.1:18791", "file://"] {
            let h = headers(&[("host", "127.0.0.1:18791"), ("origin", origin), ("content-type", "application/json")]);
            assert_eq!(g.check(&Method::POST, &h), Err(Refusal::Origin(origin.into())), "{origin}");
        }
        let cors = Guard::new("127.0.0.1:18791".parse().expect("addr"), &[], &["https://app.example/".into()]);
        let h = headers(&[("host", "127.0.0.1:18791"), ("origin", "https://app.example:443"), ("content-type", "application/json")]);
        assert_eq!(cors.check(&Method::POST, &h), Ok(Pass::Cors("https://app.example:443".into())));
        let cross = headers(&[("host", "127.0.0.1:18791"), ("sec-fetch-site", "cross-site"), ("sec-fetch-mode", "no-cors")]);
        assert_eq!(g.check(&Method::GET, &cross), Err(Refusal::FetchSite("cross-site".into())));
        let link = headers(&[("host", "127.0.0.1:18791"), ("sec-fetch-site", "cross-site"), ("sec-fetch-mode", "navigate")]);
        assert_eq!(g.check(&Method::GET, &link), Ok(Pass::SameOrigin), "following a link to the console");
    }

    #[test]
    fn a_body_must_be_labelled_json() {
        let g = loopback();
        let post = |kind: Option<&str>, length: &str| {
            let mut pairs = vec![("host", "127.0.0.1"), ("content-length", length)];
            if let Some(k) = kind {
                pairs.push(("content-type", k));
            }
            g.check(&Method::POST, &headers(&pairs))
        };
        assert!(post(Some("application/json"), "2").is_ok());
        assert!(post(Some("Application/JSON; charset=utf-8"), "2").is_ok());
        assert!(post(Some("application/merge-patch+json"), "2").is_ok());
        assert!(post(None, "0").is_ok(), "an empty POST needs no label");
        assert_eq!(post(Some("text/plain"), "2"), Err(Refusal::MediaType("text/plain".into())));
        assert_eq!(
            post(Some("application/x-www-form-urlencoded"), "2"),
            Err(Refusal::MediaType("application/x-www-form-urlencoded".into()))
        );
        assert_eq!(post(None, "2"), Err(Refusal::MediaType("none".into())));
        assert_eq!(post(Some("text/plain"), "0"), Err(Refusal::MediaType("text/plain".into())), "a labelled empty form is still a form");
    }
}
