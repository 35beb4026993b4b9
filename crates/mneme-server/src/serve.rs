//! The two listeners' accept loops and their connections (HTTP/1 for the JSON API, HTTP/2
//! for gRPC), with the defences against hostile or careless load. Start at [`serve`].
//!
//! - A cap on open connections across both listeners ([`Gate`], `server.max_connections`).
//!   At the cap the loops stop accepting, so new connections wait in the kernel's accept
//!   queue (costing the daemon no file descriptor) until one closes; this is logged, at most
//!   once a minute.
//! - A new connection must send its first bytes within `server.header_read_timeout`; an
//!   HTTP/1 connection also each request's headers (hyper's timer, which also runs while a
//!   kept-alive connection waits for its next request).
//! - A connection with no request in flight and no bytes moving for `server.idle_timeout`
//!   is closed gracefully (HTTP/2: GOAWAY). A request being handled never times out here.
//! - Accept errors are logged; running out of descriptors (`EMFILE`) backs off instead of
//!   spinning. [`raise_fd_limit`] lifts the soft descriptor limit to the hard one at start.
//! - With TLS ([`ServerTls`]) the handshake must finish within `server.header_read_timeout`.
//!   Each request then carries, in headers only this layer sets (a client's own are
//!   removed), the verified client certificate's subject and the peer's address.

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::{Pin, pin};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use hyper::body::{Bytes, Incoming};
use hyper::{Request, Response};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulConnection;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, watch};
use tokio::task::JoinSet;
use tokio::time::Instant;

use crate::config::MnemeConfig;
use crate::tls::{CLIENT_CN, CLIENT_PEER, CLIENT_SUBJECT, ClientIdentity, ServerTls};

/// The `[server]` settings the connections obey.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnectionLimits {
    pub max_connections: usize,
    pub header_read_timeout: Duration,
    pub idle_timeout: Duration,
}

impl ConnectionLimits {
    pub fn from_config(config: &MnemeConfig) -> Self {
        ConnectionLimits {
            max_connections: config.server.max_connections,
            header_read_timeout: config.server.header_read_timeout.get(),
            idle_timeout: config.server.idle_timeout.get(),
        }
    }
}

/// The open-connection cap, shared by both listeners.
#[derive(Debug)]
pub struct Gate {
    limits: ConnectionLimits,
    /// Peers whose `X-Forwarded-For` names the client (`server.trusted_proxies`).
    trusted_proxies: Vec<std::net::IpAddr>,
    /// Invariant: one permit per open connection; the permit lives in the connection's
    /// socket wrapper and is returned when the socket is dropped.
    slots: Arc<Semaphore>,
    full: Mutex<FullReport>,
}

/// When "connection limit reached" was last logged, and how many waits since.
#[derive(Debug, Default)]
struct FullReport {
    logged: Option<Instant>,
    waits: u64,
}

/// The wire protocol a listener speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// The JSON API (HTTP/1.1, keep-alive).
    Http1,
    /// gRPC (HTTP/2 with prior knowledge).
    Http2,
}

impl Gate {
    pub fn new(limits: ConnectionLimits, trusted_proxies: Vec<std::net::IpAddr>) -> Arc<Self> {
        Arc::new(Gate { limits, trusted_proxies, slots: Arc::new(Semaphore::new(limits.max_connections)), full: Mutex::default() })
    }

    /// A slot for the next connection; at the cap, waits (and says so in the log).
    async fn admit(&self, listener: &'static str) -> OwnedSemaphorePermit {
        if let Ok(permit) = self.slots.clone().try_acquire_owned() {
            return permit;
        }
        self.report_full(listener);
        self.slots.clone().acquire_owned().await.expect("the connection gate's semaphore is never closed")
    }

    fn report_full(&self, listener: &'static str) {
        let mut full = self.full.lock().unwrap_or_else(|p| p.into_inner());
        full.waits += 1;
        if full.logged.is_none_or(|at| at.elapsed() >= FULL_REPORT_EVERY) {
            tracing::warn!(
                listener,
                max_connections = self.limits.max_connections,
                times_since_last_report = full.waits,
                "connection limit reached: {} connections open (server.max_connections); new connections wait until one closes",
                self.limits.max_connections
            );
            full.logged = Some(Instant::now());
            full.waits = 0;
        }
    }
}

/// Raises the soft limit on open files to the hard limit (an inherited soft limit is often
/// 1,024, which a burst of connections plus the store's files can exhaust). Returns the
/// limit now in force and the one before, or `None` where it cannot be read.
pub fn raise_fd_limit() -> Option<(u64, u64)> {
    use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
    let limit = getrlimit(Resource::Nofile);
    // `None` is "unlimited".
    let before = limit.current.unwrap_or(u64::MAX);
    let hard = limit.maximum.unwrap_or(u64::MAX);
    if before >= hard {
        return Some((before, before));
    }
    // macOS reports an unlimited hard limit but refuses more than its per-process maximum.
    for target in [hard, hard.min(MACOS_OPEN_MAX)] {
        let wanted = Rlimit { current: (target != u64::MAX).then_some(target), maximum: limit.maximum };
        if setrlimit(Resource::Nofile, wanted).is_ok() {
            return Some((target, before));
        }
    }
    Some((before, before))
}

/// Serves `service` on `listener` until `shutdown` turns true, then stops accepting, lets
/// every connection finish gracefully, and returns when the last one has closed.
pub async fn serve<S, B>(
    name: &'static str,
    protocol: Protocol,
    listener: TcpListener,
    tls: Option<Arc<ServerTls>>,
    service: S,
    gate: Arc<Gate>,
    mut shutdown: watch::Receiver<bool>,
) where
    S: tower_service::Service<Request<Incoming>, Response = Response<B>, Error = Infallible> + Clone + Send + 'static,
    S::Future: Send + 'static,
    B: hyper::body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let mut connections = JoinSet::new();
    let mut backoff = ACCEPT_BACKOFF_MIN;
    loop {
        while connections.try_join_next().is_some() {}
        let permit = tokio::select! {
            permit = gate.admit(name) => permit,
            _ = stopped(&mut shutdown) => break,
        };
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            _ = stopped(&mut shutdown) => break,
        };
        match accepted {
            Ok((stream, peer)) => {
                backoff = ACCEPT_BACKOFF_MIN;
                // Small request/response calls: without TCP_NODELAY, Nagle + delayed ACK add ~40 ms.
                let _ = stream.set_nodelay(true);
                let forwarded = gate.trusted_proxies.contains(&peer.ip());
                let connection = Connection { name, peer, forwarded, limits: gate.limits, activity: Arc::new(Activity::new()) };
                connections.spawn(connection.run(protocol, stream, tls.clone(), permit, service.clone(), shutdown.clone()));
            }
            // The peer gave up before we accepted: nothing to do.
            Err(e)
                if matches!(e.kind(), io::ErrorKind::ConnectionAborted | io::ErrorKind::ConnectionReset | io::ErrorKind::Interrupted) =>
            {
                tracing::debug!(listener = name, error = %e, "a connection closed before it was accepted");
            }
            Err(e) => {
                // Out of descriptors (or memory): the connection stays queued in the kernel;
                // retrying at once would spin.
                tracing::error!(listener = name, error = %e, retry_in_ms = backoff.as_millis() as u64, "cannot accept a connection");
                tokio::select! {
                    _ = tokio::time::sleep(backoff) => {}
                    _ = stopped(&mut shutdown) => break,
                }
                backoff = (backoff * 2).min(ACCEPT_BACKOFF_MAX);
            }
        }
    }
    // Closing the listening socket now makes the kernel refuse new connections instead of
    // queueing them while the open ones drain.
    drop(listener);
    while connections.join_next().await.is_some() {}
}

/// Resolves once the daemon is stopping (or its shutdown sender is gone).
async fn stopped(shutdown: &mut watch::Receiver<bool>) {
    let _ = shutdown.wait_for(|stop| *stop).await;
}

/// How often at most "connection limit reached" is logged.
const FULL_REPORT_EVERY: Duration = Duration::from_secs(60);
const ACCEPT_BACKOFF_MIN: Duration = Duration::from_millis(50);
const ACCEPT_BACKOFF_MAX: Duration = Duration::from_secs(1);
/// How long an idle connection being closed gets to take its leave (an HTTP/2 GOAWAY
/// round trip) before it is dropped.
const CLOSE_WAIT: Duration = Duration::from_secs(5);
/// `OPEN_MAX` on macOS.
const MACOS_OPEN_MAX: u64 = 10_240;

/// One accepted connection.
#[derive(Debug)]
struct Connection {
    name: &'static str,
    peer: SocketAddr,
    /// The peer is a trusted proxy: `X-Forwarded-For` names the client.
    forwarded: bool,
    limits: ConnectionLimits,
    activity: Arc<Activity>,
}

impl Connection {
    async fn run<S, B>(
        self,
        protocol: Protocol,
        stream: TcpStream,
        tls: Option<Arc<ServerTls>>,
        permit: OwnedSemaphorePermit,
        service: S,
        shutdown: watch::Receiver<bool>,
    ) where
        S: tower_service::Service<Request<Incoming>, Response = Response<B>, Error = Infallible> + Clone + Send + 'static,
        S::Future: Send + 'static,
        B: hyper::body::Body<Data = Bytes> + Send + 'static,
        B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        let tracked = Tracked { stream, activity: self.activity.clone(), _permit: permit };
        let peer = hyper::header::HeaderValue::from_str(&self.peer.ip().to_string()).ok();
        let Some(tls) = tls else {
            let service = Counted { service, activity: self.activity.clone(), client: None, peer, forwarded: self.forwarded };
            return self.serve_io(protocol, tracked, service, shutdown).await;
        };
        // The handshake is bounded like a request's headers: a peer that stalls in it is
        // dropped.
        let stream = match tokio::time::timeout(self.limits.header_read_timeout, tls.acceptor(protocol).accept(tracked)).await {
            Ok(Ok(stream)) => stream,
            Ok(Err(e)) => {
                tracing::debug!(listener = self.name, peer = %self.peer, error = %e, "TLS handshake failed");
                return;
            }
            Err(_) => {
                tracing::debug!(listener = self.name, peer = %self.peer, "TLS handshake timed out");
                return;
            }
        };
        let client = stream.get_ref().1.peer_certificates().and_then(|certs| certs.first()).and_then(ClientIdentity::of);
        let client = client.and_then(|c| {
            let subject = hyper::header::HeaderValue::from_bytes(c.subject.as_bytes()).ok()?;
            let cn = c.common_name.and_then(|cn| hyper::header::HeaderValue::from_bytes(cn.as_bytes()).ok());
            Some(Arc::new((subject, cn)))
        });
        let service = Counted { service, activity: self.activity.clone(), client, peer, forwarded: self.forwarded };
        self.serve_io(protocol, stream, service, shutdown).await;
    }

    /// Serves the connection's protocol over `io` (the socket, or TLS over it).
    async fn serve_io<I, S, B>(self, protocol: Protocol, io: I, service: Counted<S>, shutdown: watch::Receiver<bool>)
    where
        I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
        S: tower_service::Service<Request<Incoming>, Response = Response<B>, Error = Infallible> + Clone + Send + 'static,
        S::Future: Send + 'static,
        B: hyper::body::Body<Data = Bytes> + Send + 'static,
        B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        let io = TokioIo::new(io);
        match protocol {
            Protocol::Http1 => {
                let mut builder = hyper::server::conn::http1::Builder::new();
                builder.timer(TokioTimer::new()).header_read_timeout(self.limits.header_read_timeout).keep_alive(true);
                self.drive(builder.serve_connection(io, service), shutdown).await;
            }
            Protocol::Http2 => {
                let mut builder = hyper::server::conn::http2::Builder::new(TokioExecutor::new());
                builder.timer(TokioTimer::new());
                self.drive(builder.serve_connection(io, service), shutdown).await;
            }
        }
    }

    /// Runs the connection to its end: closed by the peer, idle past its deadline, or the
    /// daemon shutting down (graceful: requests in flight finish).
    async fn drive<C>(&self, connection: C, mut shutdown: watch::Receiver<bool>)
    where
        C: GracefulConnection,
        C::Error: std::fmt::Display,
    {
        let mut connection = pin!(connection);
        loop {
            // The deadline only moves later, except when the first bytes arrive (header
            // deadline → idle deadline), which is never sooner than now + idle_timeout.
            let now = Instant::now();
            let check = match self.activity.idle_deadline(&self.limits) {
                Some(deadline) => deadline.min(now + self.limits.idle_timeout),
                None => now + self.limits.idle_timeout,
            };
            tokio::select! {
                result = connection.as_mut() => {
                    if let Err(e) = result {
                        tracing::debug!(listener = self.name, peer = %self.peer, error = %e, "connection ended with an error");
                    }
                    return;
                }
                _ = stopped(&mut shutdown) => break,
                _ = tokio::time::sleep_until(check) => {
                    if self.activity.idle_deadline(&self.limits).is_some_and(|deadline| deadline <= Instant::now()) {
                        tracing::debug!(listener = self.name, peer = %self.peer, "closing an idle connection");
                        if !self.activity.read_any.load(Ordering::Relaxed) {
                            // Silent since it was accepted: no protocol to take leave in.
                            return;
                        }
                        connection.as_mut().graceful_shutdown();
                        let _ = tokio::time::timeout(CLOSE_WAIT, connection).await;
                        return;
                    }
                }
            }
        }
        connection.as_mut().graceful_shutdown();
        let _ = connection.await;
    }
}

/// What a connection has done, for its idle deadline.
#[derive(Debug)]
struct Activity {
    accepted: Instant,
    /// Milliseconds after `accepted` of the last byte read or written.
    last_io_ms: AtomicU64,
    read_any: AtomicBool,
    /// Requests being handled (HTTP/2 runs several at once).
    in_flight: AtomicUsize,
}

impl Activity {
    fn new() -> Self {
        Activity {
            accepted: Instant::now(),
            last_io_ms: AtomicU64::new(0),
            read_any: AtomicBool::new(false),
            in_flight: AtomicUsize::new(0),
        }
    }

    fn touch(&self, read: bool) {
        self.last_io_ms.store(self.accepted.elapsed().as_millis() as u64, Ordering::Relaxed);
        if read {
            self.read_any.store(true, Ordering::Relaxed);
        }
    }

    /// When the connection counts as idle; `None` while a request is being handled.
    fn idle_deadline(&self, limits: &ConnectionLimits) -> Option<Instant> {
        if self.in_flight.load(Ordering::Acquire) > 0 {
            None
        } else if !self.read_any.load(Ordering::Relaxed) {
            Some(self.accepted + limits.header_read_timeout)
        } else {
            Some(self.accepted + Duration::from_millis(self.last_io_ms.load(Ordering::Relaxed)) + limits.idle_timeout)
        }
    }
}

/// The socket, noting progress in [`Activity`] and holding the connection's slot.
#[derive(Debug)]
struct Tracked {
    stream: TcpStream,
    activity: Arc<Activity>,
    _permit: OwnedSemaphorePermit,
}

impl AsyncRead for Tracked {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let result = Pin::new(&mut self.stream).poll_read(cx, buf);
        if matches!(result, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.activity.touch(true);
        }
        result
    }
}

impl AsyncWrite for Tracked {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, data: &[u8]) -> Poll<io::Result<usize>> {
        let result = Pin::new(&mut self.stream).poll_write(cx, data);
        if matches!(result, Poll::Ready(Ok(n)) if n > 0) {
            self.activity.touch(false);
        }
        result
    }

    fn poll_write_vectored(mut self: Pin<&mut Self>, cx: &mut Context<'_>, data: &[io::IoSlice<'_>]) -> Poll<io::Result<usize>> {
        let result = Pin::new(&mut self.stream).poll_write_vectored(cx, data);
        if matches!(result, Poll::Ready(Ok(n)) if n > 0) {
            self.activity.touch(false);
        }
        result
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}

/// The router as a hyper service, counting the requests in flight on its connection and
/// telling it who the verified client certificate names (never who a client says it is).
#[derive(Debug, Clone)]
struct Counted<S> {
    service: S,
    activity: Arc<Activity>,
    /// The verified client certificate's subject and common name, as header values.
    client: Option<Arc<(hyper::header::HeaderValue, Option<hyper::header::HeaderValue>)>>,
    /// The peer's IP address, as a header value.
    peer: Option<hyper::header::HeaderValue>,
    /// The peer is a trusted proxy: the client is the last `X-Forwarded-For` entry.
    forwarded: bool,
}

impl<S, B> hyper::service::Service<Request<Incoming>> for Counted<S>
where
    S: tower_service::Service<Request<Incoming>, Response = Response<B>, Error = Infallible> + Clone + Send + 'static,
    S::Future: Send + 'static,
{
    type Response = Response<B>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Response<B>, Infallible>> + Send>>;

    fn call(&self, mut request: Request<Incoming>) -> Self::Future {
        let guard = InFlight::enter(self.activity.clone());
        let headers = request.headers_mut();
        headers.remove(CLIENT_SUBJECT);
        headers.remove(CLIENT_CN);
        let behind_proxy = self
            .forwarded
            .then(|| headers.get("x-forwarded-for").and_then(|v| v.to_str().ok()).and_then(|v| v.rsplit(',').next()))
            .flatten()
            .and_then(|last| last.trim().parse::<std::net::IpAddr>().ok())
            .and_then(|ip| hyper::header::HeaderValue::from_str(&ip.to_string()).ok());
        headers.remove(CLIENT_PEER);
        if let Some(peer) = behind_proxy.or_else(|| self.peer.clone()) {
            headers.insert(CLIENT_PEER, peer);
        }
        if let Some((subject, cn)) = self.client.as_deref() {
            headers.insert(CLIENT_SUBJECT, subject.clone());
            if let Some(cn) = cn {
                headers.insert(CLIENT_CN, cn.clone());
            }
        }
        // Both routers (axum's and tonic's) are always ready: no `poll_ready` needed.
        let future = self.service.clone().call(request);
        Box::pin(async move {
            let response = future.await;
            drop(guard);
            response
        })
    }
}

/// One request in flight; leaving (also by cancellation) counts as activity.
#[derive(Debug)]
struct InFlight(Arc<Activity>);

impl InFlight {
    fn enter(activity: Arc<Activity>) -> Self {
        activity.in_flight.fetch_add(1, Ordering::AcqRel);
        InFlight(activity)
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.touch(false);
        self.0.in_flight.fetch_sub(1, Ordering::AcqRel);
    }
}
