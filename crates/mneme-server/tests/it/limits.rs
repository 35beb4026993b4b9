//! Hostile load and failures the client must not see into: the connection cap and the
//! timeouts (issue 11's connection-exhaustion probe, bounded in time), and storage errors
//! answered without the server's paths but logged with them.

use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use mneme_server::pb;
use tokio::io::AsyncReadExt as _;
use tokio::net::TcpStream;

use crate::{TestDaemon, event_body, test_config};

/// Everything the daemons in this test binary log (a process-wide subscriber, installed on
/// first use; tests look for lines only they can cause).
fn logs() -> String {
    static LOG: OnceLock<Arc<Mutex<Vec<u8>>>> = OnceLock::new();
    let buffer = LOG.get_or_init(|| {
        let buffer = Arc::new(Mutex::new(Vec::new()));
        let sink = buffer.clone();
        tracing_subscriber::fmt()
            .with_ansi(false)
            .with_max_level(tracing::Level::INFO)
            .with_writer(move || Capture(sink.clone()))
            .try_init()
            .expect("no other global subscriber in this test binary");
        buffer
    });
    String::from_utf8_lossy(&buffer.lock().unwrap_or_else(|p| p.into_inner())).into_owned()
}

struct Capture(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Capture {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).write(data)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Reads until the daemon closes the connection; `false` if it is still open after `wait`.
async fn closed_by_server(stream: &mut TcpStream, wait: Duration) -> bool {
    let mut buf = [0u8; 256];
    let deadline = tokio::time::Instant::now() + wait;
    loop {
        match tokio::time::timeout_at(deadline, stream.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => return true,
            Ok(Ok(_)) => continue,
            Err(_) => return false,
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn silent_connections_beyond_the_cap_are_queued_then_timed_out_and_healthz_still_answers() {
    logs();
    let mut config = test_config();
    config.server.max_connections = 8;
    config.server.header_read_timeout = mneme_core::Span::millis(300);
    config.server.idle_timeout = mneme_core::Span::secs(2);
    let d = TestDaemon::with(config).await;

    // Three times the cap of connections that never send a byte, on both listeners.
    let mut silent = Vec::new();
    for i in 0..24 {
        let addr = if i % 2 == 0 { d.daemon.http_addr() } else { d.grpc_addr() };
        silent.push(TcpStream::connect(addr).await.expect("connects (accepted or queued by the kernel)"));
    }
    // /healthz waits in the accept queue behind them and is answered once the daemon has
    // closed enough silent ones (300 ms each round of 8).
    let started = Instant::now();
    let (status, body) =
        tokio::time::timeout(Duration::from_secs(15), d.get("/healthz")).await.expect("/healthz answers within 15 s despite the flood");
    assert_eq!((status, body["status"].as_str()), (200, Some("ok")), "{body}");
    let waited = started.elapsed();

    // Every silent connection is closed by the daemon: none is held open forever.
    for stream in &mut silent {
        assert!(closed_by_server(stream, Duration::from_secs(10)).await, "a silent connection was never closed");
    }
    let log = logs();
    assert!(
        log.contains("connection limit reached") && log.contains("server.max_connections") && log.contains("max_connections=8"),
        "the cap is not named in the log (healthz waited {waited:?}):\n{log}"
    );
    d.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_keepalive_connections_are_closed_and_clients_reconnect() {
    let mut config = test_config();
    config.server.header_read_timeout = mneme_core::Span::secs(5);
    config.server.idle_timeout = mneme_core::Span::millis(400);
    let d = TestDaemon::with(config).await;

    // gRPC: a channel left idle past idle_timeout gets a GOAWAY; its next call reconnects.
    let mut memory = d.memory().await;
    memory.get_metrics(pb::GetMetricsRequest::default()).await.expect("first call");
    tokio::time::sleep(Duration::from_millis(1200)).await;
    memory.get_metrics(pb::GetMetricsRequest::default()).await.expect("a call after the idle close reconnects");

    // HTTP/1: a kept-alive connection is closed after idle_timeout once its response was read.
    let mut raw = TcpStream::connect(d.daemon.http_addr()).await.expect("connects");
    tokio::io::AsyncWriteExt::write_all(&mut raw, b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n").await.expect("request");
    assert!(closed_by_server(&mut raw, Duration::from_secs(6)).await, "an idle keep-alive connection stayed open");
    assert_eq!(d.get("/healthz").await.0, 200);
    d.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_storage_failure_is_answered_without_the_server_path_and_logged_with_it() {
    logs();
    let d = TestDaemon::start().await;
    assert_eq!(d.post("/v1/ingest/event", event_body("before the disk filled up")).await.0, 200);
    // Another connection to the same file makes every insert fail as a full disk would.
    let db = d.dir.path().join("mneme.db");
    let sql = rusqlite::Connection::open(&db).expect("opens the store");
    sql.execute_batch(
        "CREATE TRIGGER simulated_disk_full BEFORE INSERT ON records \
         BEGIN SELECT RAISE(ABORT, 'database or disk is full (simulated)'); END;",
    )
    .expect("trigger");
    let dir = d.dir.path().to_string_lossy().into_owned();

    let (status, body) = d.post("/v1/ingest/event", event_body("after the disk filled up")).await;
    let message = body["error"]["message"].as_str().unwrap_or_default().to_string();
    assert_eq!((status, body["error"]["code"].as_str()), (500, Some("storage")), "{body}");
    assert!(message.contains("disk is full (simulated)") && message.contains("mneme.db"), "{body}");
    assert!(!message.contains(&dir), "the response names the server's path: {body}");

    let status = d
        .memory()
        .await
        .ingest_event(pb::IngestEventRequest {
            options: None,
            event: Some(pb::EventPayload { event_kind: "message".into(), text: "over gRPC".into(), ..Default::default() }),
        })
        .await
        .expect_err("the insert fails");
    assert_eq!(status.code(), tonic::Code::Internal, "{status:?}");
    assert!(status.message().contains("disk is full (simulated)") && !status.message().contains(&dir), "{status:?}");

    let log = logs();
    let logged: Vec<&str> = log.lines().filter(|l| l.contains("request failed") && l.contains(&dir)).collect();
    assert!(
        logged.iter().any(|l| l.contains("transport=\"http\"") || l.contains("transport=http"))
            && logged.iter().any(|l| l.contains("grpc"))
            && logged.iter().all(|l| l.contains("disk is full (simulated)") && l.contains("ERROR")),
        "the failures are not logged with their detail:\n{log}"
    );
    d.stop().await;
}
