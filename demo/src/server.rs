//! The upload server: axum routes on a hyper HTTP/1.1 accept loop, each upload
//! opening sessions through the gate.
//!
//! `POST /upload` opens one session (one unit), `POST /mirror` two at once (two
//! units: the same body staged for two destinations). The handler parks on the gate
//! *before* it reads the body, so a parked request holds no staging buffer; once
//! admitted it buffers the body into its session buffers, "processes" it for the
//! configured hold time, and releases the units.
//!
//! A client that hangs up while parked must not be counted as a shed. Hyper does not
//! notice a hang-up while the handler has not asked for the body yet (it is not
//! reading the socket then), so each connection gets a [`PeerWatch`] that waits for
//! the peer's FIN or RST without reading, and the handler passes it to
//! [`GateAcquire::until`](admit::GateAcquire::until). On
//! [`GateError::Cancelled`] nothing is written: the handler marks its response
//! [`ClientGone`] and the accept loop turns that into a service error, on which hyper
//! closes the connection without a response.

use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use admit::{Gate, GateError};
use admit_metrics::MetricsObserver;
use admit_tokio::TokioTimer;
use axum::body::Body;
use axum::extract::{Extension, State};
use axum::http::header::{CONTENT_TYPE, RETRY_AFTER};
use axum::http::{Request, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use metrics_exporter_prometheus::PrometheusHandle;
use tokio::io::Interest;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;
use tokio::task::{JoinHandle, JoinSet};
use tower::ServiceExt;

admit::sources! {
    /// Where an upload session is opened: one label per endpoint, so the shed
    /// counter has exactly these series.
    pub enum Route {
        /// `POST /upload`: a plain upload, one session.
        Upload => "upload",
        /// `POST /mirror`: the upload staged for two destinations, two sessions at once.
        Mirror => "mirror",
    }
}

impl Route {
    /// Units (sessions) a request on this route holds.
    #[must_use]
    pub const fn units(self) -> usize {
        match self {
            Self::Upload => 1,
            Self::Mirror => 2,
        }
    }

    /// The route's path.
    #[must_use]
    pub const fn path(self) -> &'static str {
        match self {
            Self::Upload => "/upload",
            Self::Mirror => "/mirror",
        }
    }

    const fn index(self) -> usize {
        match self {
            Self::Upload => 0,
            Self::Mirror => 1,
        }
    }
}

/// The largest request any route makes: the gate's `max_units`, and the floor of a
/// memory-derived capacity.
pub const MAX_UNITS: usize = 2;

/// Metric name prefix: `upload_sessions_units_in_use` and so on.
pub const METRICS_PREFIX: &str = "upload_sessions";

/// The demo's gate.
pub type UploadGate = Gate<Route, TokioTimer, MetricsObserver>;

/// What the handlers saw, counted on the server side.
#[derive(Debug, Default)]
pub struct ServerStats {
    /// Requests admitted (a permit was granted).
    pub admitted: AtomicUsize,
    /// `GateError::Busy` per route (indexed like [`Route::ALL`](admit::Source::ALL)).
    pub busy: [AtomicUsize; 2],
    /// `GateError::Cancelled`: the client hung up while parked.
    pub cancelled: AtomicUsize,
    /// Handler futures dropped while parked (hyper closed the connection first).
    pub dropped_while_parked: AtomicUsize,
    /// `GateError::Closed`.
    pub closed: AtomicUsize,
    /// `GateError::ExceedsCapacity`.
    pub exceeds_capacity: AtomicUsize,
    /// Admitted, but the body did not arrive whole (e.g. the client hung up).
    pub body_errors: AtomicUsize,
    /// How long each admitted request waited for its units.
    waits: Mutex<Vec<Duration>>,
}

impl ServerStats {
    /// Busy answers on every route.
    #[must_use]
    pub fn busy_total(&self) -> usize {
        self.busy.iter().map(|b| b.load(Ordering::Relaxed)).sum()
    }

    /// Busy answers on `route`.
    #[must_use]
    pub fn busy(&self, route: Route) -> usize {
        self.busy[route.index()].load(Ordering::Relaxed)
    }

    /// The admitted requests' waits so far.
    #[must_use]
    pub fn waits(&self) -> Vec<Duration> {
        self.waits.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

/// What every handler shares.
#[derive(Debug)]
pub struct App {
    /// The admission gate.
    pub gate: UploadGate,
    /// Server-side tallies.
    pub stats: Arc<ServerStats>,
    /// Renders `/metrics`.
    pub prometheus: PrometheusHandle,
    /// Bytes of one session's staging buffer.
    pub session_buffer: usize,
    /// Simulated processing time with the permit held.
    pub hold: Duration,
}

/// A running server; [`stop`](Self::stop) ends it.
#[derive(Debug)]
pub struct Server {
    /// Where it listens.
    pub addr: SocketAddr,
    shutdown: oneshot::Sender<()>,
    task: JoinHandle<()>,
}

impl Server {
    /// Serves `app` on `listener` until [`stop`](Self::stop).
    pub fn start(listener: TcpListener, app: Arc<App>) -> io::Result<Self> {
        let addr = listener.local_addr()?;
        let router = Router::new()
            .route(Route::Upload.path(), post(upload))
            .route(Route::Mirror.path(), post(mirror))
            .route("/metrics", get(metrics))
            .with_state(app);
        let (shutdown, stopped) = oneshot::channel();
        let task = tokio::spawn(accept_loop(listener, router, stopped));
        Ok(Self {
            addr,
            shutdown,
            task,
        })
    }

    /// Stops accepting and aborts every open connection.
    pub async fn stop(self) {
        let _ = self.shutdown.send(());
        let _ = self.task.await;
    }
}

/// Marks a response that must not be written: the client has gone. The accept loop
/// turns it into a service error, and hyper closes the connection without writing.
#[derive(Debug, Clone, Copy)]
pub struct ClientGone;

impl std::fmt::Display for ClientGone {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the client hung up while waiting for admission")
    }
}

impl std::error::Error for ClientGone {}

async fn accept_loop(listener: TcpListener, router: Router, mut stopped: oneshot::Receiver<()>) {
    let mut connections = JoinSet::new();
    loop {
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(_) => continue, // e.g. too many open files: keep serving
            },
            _ = &mut stopped => break,
        };
        let _ = stream.set_nodelay(true);
        let peer = PeerWatch::new(&stream);
        let router = router.clone();
        connections.spawn(async move {
            let service = hyper::service::service_fn(move |mut request: Request<Incoming>| {
                request.extensions_mut().insert(peer.clone());
                let router = router.clone();
                async move {
                    let response = match router.oneshot(request).await {
                        Ok(response) => response,
                        Err(never) => match never {},
                    };
                    if response.extensions().get::<ClientGone>().is_some() {
                        Err(ClientGone)
                    } else {
                        Ok(response)
                    }
                }
            });
            // An error here is a client that went away, or a `ClientGone`: both end
            // the connection, which is all there is to do.
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
        while connections.try_join_next().is_some() {}
    }
    connections.shutdown().await;
}

/// Resolves when the peer of a connection has hung up (FIN or RST), without
/// reading from it.
///
/// Holds a second handle (a `dup`) of the connection's socket, registered with
/// Tokio on its own, and waits for "read closed" readiness. Data arriving is not a
/// hang-up: its readiness is cleared and the wait goes on. The duplicate is dropped
/// with the connection, so it never keeps a socket open past hyper's close.
#[derive(Debug, Clone)]
pub struct PeerWatch(Option<Arc<TcpStream>>);

impl PeerWatch {
    fn new(stream: &TcpStream) -> Self {
        let dup = socket2::SockRef::from(stream)
            .try_clone()
            .ok()
            .and_then(|socket| {
                let std: std::net::TcpStream = socket.into();
                std.set_nonblocking(true).ok()?;
                TcpStream::from_std(std).ok()
            });
        Self(dup.map(Arc::new))
    }

    /// Completes when the peer has hung up; never, if the socket could not be
    /// watched.
    pub async fn gone(&self) {
        let Some(socket) = &self.0 else {
            return std::future::pending().await;
        };
        loop {
            match socket.ready(Interest::READABLE).await {
                Ok(ready) if ready.is_read_closed() || ready.is_error() => return,
                Ok(_) => {
                    // Only data (e.g. a body sent without `Expect: 100-continue`):
                    // clear that readiness and wait for the next event.
                    let _ = socket.try_io(Interest::READABLE, || {
                        Err::<(), _>(io::ErrorKind::WouldBlock.into())
                    });
                }
                Err(_) => return,
            }
        }
    }
}

async fn upload(
    State(app): State<Arc<App>>,
    Extension(peer): Extension<PeerWatch>,
    body: Body,
) -> Response {
    open_sessions(&app, Route::Upload, &peer, body).await
}

async fn mirror(
    State(app): State<Arc<App>>,
    Extension(peer): Extension<PeerWatch>,
    body: Body,
) -> Response {
    open_sessions(&app, Route::Mirror, &peer, body).await
}

async fn metrics(State(app): State<Arc<App>>) -> Response {
    app.prometheus.run_upkeep();
    (
        [(CONTENT_TYPE, "text/plain; version=0.0.4")],
        app.prometheus.render(),
    )
        .into_response()
}

/// The handler of both upload routes: admission, then the staging buffers.
async fn open_sessions(app: &App, route: Route, peer: &PeerWatch, body: Body) -> Response {
    let units = route.units();
    let started = Instant::now();
    let parked = ParkedGuard(&app.stats);
    let acquired = app.gate.acquire(units, route).until(peer.gone()).await;
    std::mem::forget(parked);
    let permit = match acquired {
        Ok(permit) => permit,
        Err(refused) => return refuse(app, route, &refused),
    };
    app.stats.admitted.fetch_add(1, Ordering::Relaxed);
    app.stats
        .waits
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push(started.elapsed());

    // One staging buffer per session, filled while the units are held. Asking for
    // the body is also what makes hyper send `100 Continue` to a client that waits
    // for it, so a parked or shed request never had its body sent at all.
    let mut sessions: Vec<Vec<u8>> = (0..units)
        .map(|_| Vec::with_capacity(app.session_buffer))
        .collect();
    let mut body = body;
    while let Some(frame) = body.frame().await {
        let Ok(frame) = frame else {
            app.stats.body_errors.fetch_add(1, Ordering::Relaxed);
            return (StatusCode::BAD_REQUEST, "upload body incomplete\n").into_response();
        };
        let Ok(data) = frame.into_data() else {
            continue; // trailers
        };
        if sessions[0].len() + data.len() > app.session_buffer {
            return (
                StatusCode::PAYLOAD_TOO_LARGE,
                "upload larger than a session buffer\n",
            )
                .into_response();
        }
        for session in &mut sessions {
            session.extend_from_slice(&data);
        }
    }
    tokio::time::sleep(app.hold).await; // "processing", with the sessions held
    let stored = sessions[0].len();
    drop(sessions);
    drop(permit);
    (
        StatusCode::OK,
        format!("stored {stored} bytes in {units} session(s)\n"),
    )
        .into_response()
}

/// The answer to a refused acquire, through `admit-http`: 503 with `Retry-After` for
/// a shed, 503 without it for a closed or misconfigured gate, nothing at all for a
/// client that has gone.
fn refuse(app: &App, route: Route, error: &GateError) -> Response {
    let tally = match error {
        GateError::Busy { .. } => &app.stats.busy[route.index()],
        GateError::Cancelled => &app.stats.cancelled,
        GateError::ExceedsCapacity(_) => &app.stats.exceeds_capacity,
        GateError::Closed => &app.stats.closed,
    };
    tally.fetch_add(1, Ordering::Relaxed);
    match admit_http::response_parts(error) {
        None => {
            let mut gone = Response::new(Body::empty());
            gone.extensions_mut().insert(ClientGone);
            gone
        }
        Some((status, retry_after)) => {
            let mut response = (status, format!("{error}\n")).into_response();
            if let Some(value) = retry_after {
                response.headers_mut().insert(RETRY_AFTER, value);
            }
            response
        }
    }
}

/// Counts a handler dropped while parked (the acquire future dropped, not
/// `Cancelled`); forgotten once the acquire returns.
struct ParkedGuard<'a>(&'a ServerStats);

impl Drop for ParkedGuard<'_> {
    fn drop(&mut self) {
        self.0.dropped_while_parked.fetch_add(1, Ordering::Relaxed);
    }
}
