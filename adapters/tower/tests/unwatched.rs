//! The warning for a request that reaches the gate with no hang-up watch (an axum
//! router served with `into_make_service()`, which forgets `PeerWatch`): given
//! once per layer through `tracing`, for HTTP/1 only, naming the fix, and
//! silenced by `AdmitLayer::allow_unwatched`.
//!
//! Each test captures the warnings with a subscriber set for its own thread; the
//! runtimes are current-thread, so the layer's code runs on that thread too.

mod support;

use std::convert::Infallible;
use std::fmt;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use admit_tower::{AdmitLayer, Decision, HangUp, PeerWatch};
use axum::routing::{get, post};
use axum::Router;
use bytes::Bytes;
use http::request::Parts;
use http::{Request, Response, StatusCode, Version};
use http_body_util::Full;
use support::{gate, Route, TestGate};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tower::{Layer, ServiceExt};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::subscriber::Interest;
use tracing::{Event, Level, Metadata};

/// Keeps every `admit_tower` warning's message.
#[derive(Clone, Default)]
struct Capture(Arc<Mutex<Vec<String>>>);

impl Capture {
    /// Captures on this thread until the guard drops.
    fn install() -> (Self, tracing::subscriber::DefaultGuard) {
        let capture = Self::default();
        let guard = tracing::subscriber::set_default(capture.clone());
        (capture, guard)
    }

    fn warnings(&self) -> Vec<String> {
        self.0.lock().unwrap().clone()
    }
}

struct Message(String);

impl Visit for Message {
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        if field.name() == "message" {
            self.0 = format!("{value:?}");
        }
    }
}

impl tracing::Subscriber for Capture {
    fn register_callsite(&self, _: &'static Metadata<'static>) -> Interest {
        // Asked again at each event: another test's thread may have no subscriber.
        Interest::sometimes()
    }
    fn enabled(&self, _: &Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, _: &Attributes<'_>) -> Id {
        Id::from_u64(1)
    }
    fn record(&self, _: &Id, _: &Record<'_>) {}
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, event: &Event<'_>) {
        let metadata = event.metadata();
        if *metadata.level() == Level::WARN && metadata.target().starts_with("admit_tower") {
            let mut message = Message(String::new());
            event.record(&mut message);
            self.0.lock().unwrap().push(message.0);
        }
    }
    fn enter(&self, _: &Id) {}
    fn exit(&self, _: &Id) {}
}

/// `/upload` 1 unit, anything else bypassed.
fn decide(head: &Parts) -> Decision<Route> {
    match head.uri.path() {
        "/upload" => Decision::admit(1, Route::Upload),
        _ => Decision::Bypass,
    }
}

fn layer(gate: &TestGate) -> AdmitLayer<Route, fn(&Parts) -> Decision<Route>> {
    AdmitLayer::new(gate.clone(), decide as fn(&Parts) -> Decision<Route>)
}

fn request(path: &str, version: Version) -> Request<Full<Bytes>> {
    Request::post(path)
        .version(version)
        .body(Full::new(Bytes::new()))
        .unwrap()
}

/// Sends `request` through a fresh service of `layer` (as each connection gets
/// one); asserts it was answered by the inner service.
async fn send(
    layer: &AdmitLayer<Route, fn(&Parts) -> Decision<Route>>,
    request: Request<Full<Bytes>>,
) {
    let inner = tower::service_fn(|_: Request<admit_tower::WatchedBody<Full<Bytes>>>| async {
        Ok::<_, Infallible>(Response::new(Full::new(Bytes::from_static(b"ok"))))
    });
    let response = layer.layer(inner).oneshot(request).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
}

/// A hang-up signal that never fires: a watch is there, the client stays.
fn watched(mut request: Request<Full<Bytes>>) -> Request<Full<Bytes>> {
    request
        .extensions_mut()
        .insert(HangUp::new(std::future::pending::<()>));
    request
}

fn assert_names_the_fix(warning: &str) {
    for fix in [
        "into_make_service_with_connect_info::<admit_tower::PeerWatch>()",
        "PeerWatchLayer",
        "HangUp",
        "AdmitLayer::allow_unwatched()",
    ] {
        assert!(warning.contains(fix), "{fix:?} is not in: {warning}");
    }
}

#[tokio::test(start_paused = true)]
async fn unwatched_http1_requests_warn_once_per_layer_naming_the_fix() {
    let (capture, _guard) = Capture::install();
    let (gate, _) = gate(2, Duration::from_secs(5));
    let shared = layer(&gate);

    send(&shared, request("/healthz", Version::HTTP_11)).await;
    assert_eq!(
        capture.warnings().len(),
        0,
        "a bypassed request never reaches the gate"
    );

    // Several requests, through clones of the layer and an HTTP/1.0 one among them.
    send(&shared, request("/upload", Version::HTTP_11)).await;
    send(&shared.clone(), request("/upload", Version::HTTP_11)).await;
    send(&shared.clone(), request("/upload", Version::HTTP_10)).await;
    send(&shared, request("/upload", Version::HTTP_11)).await;
    let warnings = capture.warnings();
    assert_eq!(warnings.len(), 1, "once, for the layer and its clones");
    assert_names_the_fix(&warnings[0]);

    // Another layer (on the same gate) has its own warning.
    let other = layer(&gate);
    send(&other, request("/upload", Version::HTTP_11)).await;
    send(&other, request("/upload", Version::HTTP_11)).await;
    assert_eq!(capture.warnings().len(), 2);
}

#[tokio::test(start_paused = true)]
async fn requests_with_a_hang_up_watch_never_warn() {
    let (capture, _guard) = Capture::install();
    let (gate, _) = gate(2, Duration::from_secs(5));
    let layer = layer(&gate);

    for _ in 0..3 {
        send(&layer, watched(request("/upload", Version::HTTP_11))).await;
    }
    assert_eq!(capture.warnings(), Vec::<String>::new());

    // The control: the same layer still warns for one without a watch.
    send(&layer, request("/upload", Version::HTTP_11)).await;
    assert_eq!(capture.warnings().len(), 1);
}

#[tokio::test(start_paused = true)]
async fn allow_unwatched_silences_the_warning_for_the_layer_and_its_clones() {
    let (capture, _guard) = Capture::install();
    let (gate, _) = gate(2, Duration::from_secs(5));

    let silenced = layer(&gate).allow_unwatched();
    for _ in 0..3 {
        send(&silenced, request("/upload", Version::HTTP_11)).await;
    }
    // Called on one handle after the layer was cloned: the clone is silenced too.
    let original = layer(&gate);
    let clone = original.clone();
    let _silenced = original.allow_unwatched();
    send(&clone, request("/upload", Version::HTTP_11)).await;
    assert_eq!(capture.warnings(), Vec::<String>::new());

    // The control: a layer without the opt-out warns.
    send(&layer(&gate), request("/upload", Version::HTTP_11)).await;
    assert_eq!(capture.warnings().len(), 1);
}

/// hyper sees an HTTP/2 client's stream reset and drops the request's future.
#[tokio::test(start_paused = true)]
async fn http2_requests_need_no_watch_and_never_warn() {
    let (capture, _guard) = Capture::install();
    let (gate, _) = gate(2, Duration::from_secs(5));
    let layer = layer(&gate);

    for _ in 0..3 {
        send(&layer, request("/upload", Version::HTTP_2)).await;
    }
    assert_eq!(capture.warnings(), Vec::<String>::new());

    // The control: the first HTTP/1.1 one warns.
    send(&layer, request("/upload", Version::HTTP_11)).await;
    assert_eq!(capture.warnings().len(), 1);
}

/// Posts an empty upload on a connection of its own; returns the answer.
async fn upload(addr: SocketAddr) -> String {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    let head =
        "POST /upload HTTP/1.1\r\nhost: test\r\ncontent-length: 0\r\nconnection: close\r\n\r\n";
    stream.write_all(head.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    tokio::time::timeout(Duration::from_secs(20), stream.read_to_end(&mut answer))
        .await
        .expect("the server answers and closes")
        .unwrap();
    String::from_utf8(answer).unwrap()
}

fn router(gate: &TestGate) -> Router {
    Router::new()
        .route("/upload", post(|| async { "stored\n" }))
        .route("/healthz", get(|| async { "ok\n" }))
        .layer(layer(gate))
}

#[tokio::test]
async fn axum_served_with_into_make_service_warns_once() {
    let (capture, _guard) = Capture::install();
    let (gate, _) = gate(2, Duration::from_secs(5));
    let app = router(&gate);
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app.into_make_service()).await });

    for _ in 0..3 {
        let answer = upload(addr).await;
        assert!(answer.starts_with("HTTP/1.1 200 OK\r\n"), "{answer}");
    }
    let warnings = capture.warnings();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert_names_the_fix(&warnings[0]);
}

#[tokio::test]
async fn axum_served_with_peer_watch_connect_info_does_not_warn() {
    let (capture, _guard) = Capture::install();
    let (gate, _) = gate(2, Duration::from_secs(5));
    let app = router(&gate);
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        axum::serve(
            listener,
            app.into_make_service_with_connect_info::<PeerWatch>(),
        )
        .await
    });

    for _ in 0..3 {
        let answer = upload(addr).await;
        assert!(answer.starts_with("HTTP/1.1 200 OK\r\n"), "{answer}");
    }
    assert_eq!(capture.warnings(), Vec::<String>::new());
}
