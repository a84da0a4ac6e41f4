//! A real server and a real client on loopback: axum's `serve` (with `PeerWatch` as
//! connect info) and hyper-util's HTTP/1 connection (with `PeerWatch::layer`), and a
//! raw TCP client that reads exactly what went over the wire.
//!
//! Events are ordered by hand-offs: a parked request is seen through
//! `gate.waiters()`, a release through the observer's watch channel, a streaming
//! body is fed chunk by chunk by the test. Timeouts are safety nets that fail the
//! test; the only real-time waits are the wait budgets under test.

mod support;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::time::Duration;

use admit_tower::{AdmitLayer, Decision, PeerWatch, Rejection};
use axum::extract::State;
use axum::routing::{get, post};
use axum::Router;
use bytes::Bytes;
use http::request::Parts;
use http::{Request, Response};
use http_body_util::channel::Sender;
use http_body_util::{Channel, Full};
use hyper_util::rt::TokioIo;
use support::{gate, Counting, Route, TestGate};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;

const SAFETY_NET: Duration = Duration::from_secs(20);

fn decide(head: &Parts) -> Decision<Route> {
    match head.uri.path() {
        "/upload" | "/download" => Decision::admit(1, Route::Upload),
        "/mirror" => Decision::admit(2, Route::Mirror),
        _ => Decision::Bypass,
    }
}

/// What the axum handlers share: where `/download` hands the test its body's sender.
#[derive(Clone)]
struct App {
    gate: TestGate,
    bodies: mpsc::UnboundedSender<Sender<Bytes>>,
}

async fn upload(body: axum::body::Body) -> String {
    // Admitted before the body was touched; read it now, within a limit.
    let bytes = axum::body::to_bytes(body, 1 << 20)
        .await
        .map_or(0, |b| b.len());
    format!("stored {bytes} bytes\n")
}

/// A download session: the handler returns at once, the body is the session.
async fn download(State(app): State<App>) -> axum::body::Body {
    let (tx, body) = Channel::<Bytes, Infallible>::new(1);
    app.bodies.send(tx).unwrap();
    axum::body::Body::new(body)
}

/// A handler that calls the gate itself and answers a refusal with `?`.
async fn export(State(app): State<App>) -> Result<&'static str, Rejection> {
    let _permit = app.gate.acquire(1, Route::Upload).await?;
    Ok("exported\n")
}

struct AxumServer {
    addr: SocketAddr,
    bodies: mpsc::UnboundedReceiver<Sender<Bytes>>,
}

async fn axum_server(gate: &TestGate) -> AxumServer {
    let (tx, bodies) = mpsc::unbounded_channel();
    let app = App {
        gate: gate.clone(),
        bodies: tx,
    };
    let router = Router::new()
        .route("/upload", post(upload))
        .route("/mirror", post(upload))
        .route("/download", get(download))
        .route("/export", get(export))
        .route("/healthz", get(|| async { "ok\n" }))
        .layer(AdmitLayer::new(gate.clone(), decide))
        .with_state(app);
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        axum::serve(
            listener,
            router.into_make_service_with_connect_info::<PeerWatch>(),
        )
        .await
        .unwrap();
    });
    AxumServer { addr, bodies }
}

/// hyper-util's HTTP/1 connection, no axum: the layer over a `service_fn`, with
/// `PeerWatch::layer` outside it.
async fn hyper_util_server(gate: &TestGate) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let admit = AdmitLayer::new(gate.clone(), decide);
    tokio::spawn(async move {
        loop {
            let (stream, _) = listener.accept().await.unwrap();
            let watch = PeerWatch::new(&stream);
            let service = tower::ServiceBuilder::new()
                .layer(watch.layer())
                .layer(admit.clone())
                .service_fn(
                    |_request: Request<admit_tower::WatchedBody<hyper::body::Incoming>>| async {
                        Ok::<_, Infallible>(Response::new(Full::new(Bytes::from_static(b"ok\n"))))
                    },
                );
            tokio::spawn(hyper::server::conn::http1::Builder::new().serve_connection(
                TokioIo::new(stream),
                hyper_util::service::TowerToHyperService::new(service),
            ));
        }
    });
    addr
}

async fn connect(addr: SocketAddr) -> TcpStream {
    let stream = TcpStream::connect(addr).await.unwrap();
    stream.set_nodelay(true).unwrap();
    stream
}

/// An upload's head with `Expect: 100-continue`: no body is sent before admission.
async fn send_upload_head(stream: &mut TcpStream, path: &str) {
    let head = format!(
        "POST {path} HTTP/1.1\r\nhost: test\r\ncontent-length: 5\r\n\
         expect: 100-continue\r\nconnection: close\r\n\r\n"
    );
    stream.write_all(head.as_bytes()).await.unwrap();
}

async fn send_get(stream: &mut TcpStream, path: &str, keep_alive: bool) {
    let connection = if keep_alive { "keep-alive" } else { "close" };
    let head = format!("GET {path} HTTP/1.1\r\nhost: test\r\nconnection: {connection}\r\n\r\n");
    stream.write_all(head.as_bytes()).await.unwrap();
}

async fn read_all(stream: &mut TcpStream) -> String {
    let mut answer = Vec::new();
    tokio::time::timeout(SAFETY_NET, stream.read_to_end(&mut answer))
        .await
        .expect("the server answers and closes")
        .unwrap();
    String::from_utf8(answer).unwrap()
}

/// Reads until `needle` has arrived; returns everything read.
async fn read_until(stream: &mut TcpStream, seen: &mut Vec<u8>, needle: &str) {
    tokio::time::timeout(SAFETY_NET, async {
        while !String::from_utf8_lossy(seen).contains(needle) {
            let mut chunk = [0; 1024];
            let n = stream.read(&mut chunk).await.unwrap();
            assert!(
                n > 0,
                "closed before {needle:?}: {}",
                String::from_utf8_lossy(seen)
            );
            seen.extend_from_slice(&chunk[..n]);
        }
    })
    .await
    .unwrap_or_else(|_| panic!("never received {needle:?}"));
}

async fn parked(gate: &TestGate, n: usize) {
    support::until(&format!("{n} parked"), || gate.waiters() == n).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shed_is_a_503_with_retry_after_on_the_wire_and_its_body_is_never_sent() {
    let (gate, counting) = gate(1, Duration::from_millis(300));
    let server = axum_server(&gate).await;
    let held = gate.acquire(1, Route::Upload).await.unwrap();

    let mut client = connect(server.addr).await;
    send_upload_head(&mut client, "/upload").await;
    let answer = read_all(&mut client).await;
    assert!(
        answer.starts_with("HTTP/1.1 503 Service Unavailable\r\n"),
        "{answer}"
    );
    assert!(answer.contains("\r\nretry-after: 1\r\n"), "{answer}");
    assert!(answer.ends_with("retry after 1s\n"), "{answer}");
    assert!(!answer.contains("100 Continue"), "{answer}");
    assert_eq!(counting.shed(), 1);
    drop(held);
}

async fn hang_up_while_parked(addr: SocketAddr, gate: &TestGate, counting: &Counting) {
    let held = gate.acquire(1, Route::Upload).await.unwrap();

    // A parks at the head of the queue, B behind it.
    let mut leaving = connect(addr).await;
    send_upload_head(&mut leaving, "/upload").await;
    parked(gate, 1).await;
    let mut staying = connect(addr).await;
    let head =
        "POST /upload HTTP/1.1\r\nhost: test\r\ncontent-length: 0\r\nconnection: close\r\n\r\n";
    staying.write_all(head.as_bytes()).await.unwrap();
    parked(gate, 2).await;

    // A half-closes: the server sees the FIN; A can still read whatever the server
    // writes, which must be nothing.
    leaving.shutdown().await.unwrap();
    assert_eq!(
        read_all(&mut leaving).await,
        "",
        "nothing is written to a client that left"
    );
    parked(gate, 1).await;
    assert_eq!(counting.shed(), 0, "a hang-up is not a shed");

    // A's place is free: the unit goes to B, not to a waiter nobody waits for.
    drop(held);
    let answer = read_all(&mut staying).await;
    assert!(answer.starts_with("HTTP/1.1 200 OK\r\n"), "{answer}");
    assert_eq!(counting.shed(), 0);
    assert_eq!(counting.admitted(), 2, "the test's permit and B");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn axum_a_hang_up_while_parked_is_no_shed_and_frees_its_place() {
    let (gate, counting) = gate(1, Duration::from_secs(600));
    let server = axum_server(&gate).await;
    hang_up_while_parked(server.addr, &gate, &counting).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hyper_util_a_hang_up_while_parked_is_no_shed_and_frees_its_place() {
    let (gate, counting) = gate(1, Duration::from_secs(600));
    let addr = hyper_util_server(&gate).await;
    hang_up_while_parked(addr, &gate, &counting).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_permit_is_held_while_a_slow_body_is_sent_and_returns_when_it_ends() {
    let (gate, counting) = gate(1, Duration::from_secs(600));
    let mut server = axum_server(&gate).await;

    let mut client = connect(server.addr).await;
    send_get(&mut client, "/download", false).await;
    let mut tx = tokio::time::timeout(SAFETY_NET, server.bodies.recv())
        .await
        .unwrap()
        .unwrap();
    let mut seen = Vec::new();
    read_until(&mut client, &mut seen, "\r\n\r\n").await; // the head: the handler returned
    for i in 0..3 {
        let chunk = format!("chunk {i}\n");
        tx.send_data(Bytes::from(chunk.clone())).await.unwrap();
        read_until(&mut client, &mut seen, &chunk).await;
        assert_eq!(gate.in_use(), 1, "held while the body is being sent");
    }
    drop(tx); // the last chunk
    let rest = read_all(&mut client).await;
    assert!(rest.ends_with("0\r\n\r\n"), "{rest:?}");
    counting.in_use_becomes(0).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_permit_returns_when_the_connection_drops_mid_body() {
    let (gate, counting) = gate(1, Duration::from_secs(600));
    let mut server = axum_server(&gate).await;

    let mut client = connect(server.addr).await;
    send_get(&mut client, "/download", false).await;
    let mut tx = tokio::time::timeout(SAFETY_NET, server.bodies.recv())
        .await
        .unwrap()
        .unwrap();
    tx.send_data(Bytes::from_static(b"first\n")).await.unwrap();
    let mut seen = Vec::new();
    read_until(&mut client, &mut seen, "first\n").await;
    assert_eq!(gate.in_use(), 1);
    drop(client);

    // Hyper learns of the drop when a write fails, then drops the body: the
    // channel's receiver. Keep writing until the send fails (bounded).
    let mut sent = 0;
    while tx.send_data(Bytes::from_static(b"more\n")).await.is_ok() {
        sent += 1;
        assert!(sent < 10_000, "the body was never dropped");
        tokio::task::yield_now().await;
    }
    counting.in_use_becomes(0).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_connections_and_ready_services_hold_no_unit() {
    let (gate, counting) = gate(2, Duration::from_secs(600));
    let server = axum_server(&gate).await;

    // Idle connections: accepted, a service made ready for each, no request.
    let mut idle = Vec::new();
    for _ in 0..5 {
        idle.push(connect(server.addr).await);
    }
    // A keep-alive connection after one bypassed request: idle again.
    let mut keep_alive = connect(server.addr).await;
    send_get(&mut keep_alive, "/healthz", true).await;
    let mut seen = Vec::new();
    read_until(&mut keep_alive, &mut seen, "ok\n").await;
    assert_eq!(gate.in_use(), 0);

    // The whole capacity is there for a request: a mirror (2 units) at once.
    let mut mirror = connect(server.addr).await;
    let head =
        "POST /mirror HTTP/1.1\r\nhost: test\r\ncontent-length: 0\r\nconnection: close\r\n\r\n";
    mirror.write_all(head.as_bytes()).await.unwrap();
    let answer = read_all(&mut mirror).await;
    assert!(answer.starts_with("HTTP/1.1 200 OK\r\n"), "{answer}");
    assert_eq!(counting.admitted(), 1);
    assert_eq!(counting.shed(), 0);
    drop(idle);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bypassed_routes_never_wait() {
    let (gate, counting) = gate(1, Duration::from_secs(600));
    let server = axum_server(&gate).await;
    let held = gate.acquire(1, Route::Upload).await.unwrap();
    let mut parked_upload = connect(server.addr).await;
    send_upload_head(&mut parked_upload, "/upload").await;
    parked(&gate, 1).await;

    let mut health = connect(server.addr).await;
    send_get(&mut health, "/healthz", false).await;
    let answer = read_all(&mut health).await;
    assert!(answer.starts_with("HTTP/1.1 200 OK\r\n"), "{answer}");
    assert!(answer.ends_with("ok\n"));
    assert_eq!(gate.waiters(), 1, "only the upload is parked");
    assert_eq!(counting.shed(), 0);
    drop(held);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handler_answers_a_refusal_with_question_mark() {
    let (gate, counting) = gate(1, Duration::from_millis(200));
    let server = axum_server(&gate).await;
    let held = gate.acquire(1, Route::Upload).await.unwrap();

    let mut client = connect(server.addr).await;
    send_get(&mut client, "/export", false).await; // bypassed by the layer; the handler asks
    let answer = read_all(&mut client).await;
    assert!(
        answer.starts_with("HTTP/1.1 503 Service Unavailable\r\n"),
        "{answer}"
    );
    assert!(answer.contains("\r\nretry-after: 1\r\n"), "{answer}");
    assert_eq!(counting.shed(), 1);
    drop(held);

    let mut client = connect(server.addr).await;
    send_get(&mut client, "/export", false).await;
    assert!(read_all(&mut client).await.ends_with("exported\n"));
}

/// An axum server whose graceful shutdown drains the gate first, as
/// `docs/tower.md` shows: on the signal, the gate stops admitting, the sessions in
/// flight get `grace`, and the drain's report goes to the test; then axum stops
/// accepting and closes its connections.
struct DrainingServer {
    addr: SocketAddr,
    bodies: mpsc::UnboundedReceiver<Sender<Bytes>>,
    stop: tokio::sync::oneshot::Sender<()>,
    drained: tokio::sync::oneshot::Receiver<Result<(), admit::DrainTimeout<Route>>>,
    server: tokio::task::JoinHandle<()>,
}

async fn draining_server(gate: &TestGate, grace: Duration) -> DrainingServer {
    let (tx, bodies) = mpsc::unbounded_channel();
    let app = App {
        gate: gate.clone(),
        bodies: tx,
    };
    let router = Router::new()
        .route("/upload", post(upload))
        .route("/mirror", post(upload))
        .route("/download", get(download))
        .route("/healthz", get(|| async { "ok\n" }))
        .layer(AdmitLayer::new(gate.clone(), decide))
        .with_state(app);
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let (report, drained) = tokio::sync::oneshot::channel();
    let gate = gate.clone();
    let server = tokio::spawn(async move {
        axum::serve(
            listener,
            router.into_make_service_with_connect_info::<PeerWatch>(),
        )
        .with_graceful_shutdown(async move {
            let _ = stopped.await; // the binary: SIGTERM / Ctrl-C
            let _ = report.send(gate.drain(grace).await);
        })
        .await
        .unwrap();
    });
    DrainingServer {
        addr,
        bodies,
        stop,
        drained,
        server,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn graceful_shutdown_drains_the_gate_while_the_sessions_in_flight_finish() {
    let (gate, counting) = gate(2, Duration::from_secs(600));
    let mut server = draining_server(&gate, Duration::from_secs(600)).await;

    // A download session in flight (its permit lives until its body ends), and a
    // mirror parked behind it.
    let mut download = connect(server.addr).await;
    send_get(&mut download, "/download", false).await;
    let tx = tokio::time::timeout(SAFETY_NET, server.bodies.recv())
        .await
        .unwrap()
        .unwrap();
    let mut seen = Vec::new();
    read_until(&mut download, &mut seen, "\r\n\r\n").await;
    let mut mirror = connect(server.addr).await;
    send_upload_head(&mut mirror, "/mirror").await;
    parked(&gate, 1).await;

    server.stop.send(()).unwrap();
    // The parked request ends at once: 503 without Retry-After, not a shed.
    let answer = read_all(&mut mirror).await;
    assert!(answer.starts_with("HTTP/1.1 503 "), "{answer}");
    assert!(
        !answer.to_ascii_lowercase().contains("retry-after"),
        "{answer}"
    );
    // During the drain: new uploads get the same, bypassed routes still answer.
    let mut late = connect(server.addr).await;
    send_upload_head(&mut late, "/upload").await;
    let answer = read_all(&mut late).await;
    assert!(answer.starts_with("HTTP/1.1 503 "), "{answer}");
    let mut health = connect(server.addr).await;
    send_get(&mut health, "/healthz", false).await;
    assert!(read_all(&mut health).await.ends_with("ok\n"));
    assert_eq!(gate.in_use(), 1, "the download still holds its unit");

    // The session in flight finishes: its unit comes home, and the drain with it.
    drop(tx);
    let rest = read_all(&mut download).await;
    assert!(rest.ends_with("0\r\n\r\n"), "{rest:?}");
    let drained = tokio::time::timeout(SAFETY_NET, server.drained)
        .await
        .expect("the drain ends when the last unit is back")
        .unwrap();
    assert_eq!(drained, Ok(()));
    tokio::time::timeout(SAFETY_NET, server.server)
        .await
        .expect("axum's graceful shutdown completes")
        .unwrap();
    assert_eq!(counting.shed(), 0, "a shutdown sheds nothing");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grace_period_that_ends_first_reports_the_sessions_it_cut() {
    let (gate, counting) = gate(2, Duration::from_secs(600));
    let grace = Duration::from_millis(200);
    let mut server = draining_server(&gate, grace).await;
    let mut download = connect(server.addr).await;
    send_get(&mut download, "/download", false).await;
    let _tx = tokio::time::timeout(SAFETY_NET, server.bodies.recv())
        .await
        .unwrap()
        .unwrap();

    server.stop.send(()).unwrap();
    let cut = tokio::time::timeout(SAFETY_NET, server.drained)
        .await
        .expect("the grace period ends the drain")
        .unwrap()
        .unwrap_err();
    assert_eq!(cut.held(), &[(Route::Upload, 1)]);
    assert!(cut.to_string().ends_with("still held: upload 1"), "{cut}");
    assert_eq!(counting.shed(), 0);
    server.server.abort(); // the cut session would hold axum's shutdown open
}
