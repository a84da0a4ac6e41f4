//! The upload server: axum routes behind `admit_tower::AdmitLayer`, on a hyper-util
//! HTTP/1.1 accept loop with a `PeerWatch` per connection.
//!
//! `POST /upload` opens one session (one unit), `POST /mirror` two at once (two
//! units: the same body staged for two destinations); `POST /v2/uploads` opens an
//! OCI-style upload session that spans requests (one unit, held by a lease until
//! the session ends: see [`sessions`](crate::sessions)); `GET /metrics` and the
//! session's later requests bypass the gate. The layer parks a request *before*
//! the handler reads its body, so a parked request holds no staging buffer and
//! (with `Expect: 100-continue`) its client has not sent the body; it answers a
//! shed with `503` + `Retry-After`, writes nothing to a client that hung up while
//! parked (the `PeerWatch` notices), and holds the units until the response has
//! been sent. Its progress rule cuts an admitted request (and a session's `PATCH`,
//! decided [`Decision::watch`]) whose client stalls: `408`, `Connection: close`.
//! What is left here is the demo's own:
//! the staging buffers, the simulated processing, and the server-side tallies.

use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use admit::{
    AdmitEvent, CapacityEvent, CutEvent, CutReason, GateError, LeaseEndEvent, MemoryEvent,
    Observer, OverloadEvent, Priority, ReleaseEvent, ShedEvent, ShedReason, Source, StartEvent,
};
use admit_metrics::MetricsObserver;
use admit_tower::{
    AdmitLayer, AdmitPermit, BodyCut, ClientGone, Decision, PeerWatch, ProgressRule,
};
use axum::body::Body;
use axum::extract::{Extension, State};
use axum::http::header::CONTENT_TYPE;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, patch, post};
use axum::Router;
use http::request::Parts;
use http_body_util::BodyExt;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use metrics_exporter_prometheus::PrometheusHandle;
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::{JoinHandle, JoinSet};
use tower::ServiceBuilder;

use crate::sessions::{IdMinter, SessionLeases, SessionLedger};

admit::sources! {
    /// Where an upload session is opened: one label per endpoint, so the shed
    /// counter has exactly these series.
    pub enum Route {
        /// `POST /upload`: a plain upload, one session.
        Upload => "upload",
        /// `POST /mirror`: the upload staged for two destinations, two sessions at once.
        Mirror => "mirror",
        /// `POST /v2/uploads`: an upload session that spans requests, one session
        /// held by a lease from the `POST` to its `PUT`, `DELETE` or expiry.
        Session => "session",
    }
}

/// The number of routes: [`Route::ALL`](admit::Source::ALL)'s length.
pub const ROUTES: usize = 3;
const _: () = assert!(Route::ALL.len() == ROUTES);

impl Route {
    /// Units (sessions) a request on this route holds.
    #[must_use]
    pub const fn units(self) -> usize {
        match self {
            Self::Upload | Self::Session => 1,
            Self::Mirror => 2,
        }
    }

    /// The route's path (of its `POST`).
    #[must_use]
    pub const fn path(self) -> &'static str {
        match self {
            Self::Upload => "/upload",
            Self::Mirror => "/mirror",
            Self::Session => crate::sessions::UPLOADS,
        }
    }

    /// Its position in [`Route::ALL`](admit::Source::ALL).
    #[must_use]
    pub const fn index(self) -> usize {
        match self {
            Self::Upload => 0,
            Self::Mirror => 1,
            Self::Session => 2,
        }
    }

    fn from_label(label: &str) -> Option<Self> {
        Self::ALL.iter().copied().find(|r| r.label() == label)
    }
}

/// The query of an upload that resumes a session: it outranks every new one
/// ([`Priority::CriticalPlus`]), since most of its bytes are sent already.
pub const RESUMED: &str = "resumed=1";

/// The layer's decision: the upload routes and the `POST` that opens an upload
/// session wait for their units, a resumed upload first among them when someone
/// must be shed; a session's `PATCH`, whose unit its lease holds, takes none but
/// is watched by the progress rule (its body fills the session's buffer);
/// everything else (`/metrics`, a session's `PUT` and `DELETE`) bypasses the gate.
#[must_use]
pub fn decide(head: &Parts) -> Decision<Route> {
    let decision = match head.uri.path() {
        "/upload" => Decision::admit(Route::Upload.units(), Route::Upload),
        "/mirror" => Decision::admit(Route::Mirror.units(), Route::Mirror),
        crate::sessions::UPLOADS if head.method == http::Method::POST => {
            Decision::admit(Route::Session.units(), Route::Session)
        }
        path if head.method == http::Method::PATCH
            && path.starts_with(crate::sessions::UPLOADS) =>
        {
            return Decision::watch(Route::Session)
        }
        _ => return Decision::Bypass,
    };
    if head.uri.query() == Some(RESUMED) {
        decision.priority(Priority::CriticalPlus)
    } else {
        decision
    }
}

/// The largest request any route makes: the gate's `max_units`, and the floor of a
/// memory-derived capacity.
pub const MAX_UNITS: usize = 2;

/// Metric name prefix: `upload_sessions_units_in_use` and so on.
pub const METRICS_PREFIX: &str = "upload_sessions";

/// The demo's gate.
pub type UploadGate = admit_tokio::Gate<Route, DemoObserver>;

/// The number of shed reasons counted apart: [`ShedReason::ALL`].
pub const REASONS: usize = ShedReason::ALL.len();

/// The number of cut reasons counted apart: [`CutReason::ALL`].
pub const CUT_REASONS: usize = CutReason::ALL.len();

/// What the server saw, counted on the server side.
#[derive(Debug, Default)]
pub struct ServerStats {
    /// Requests admitted (a permit was granted).
    pub admitted: AtomicUsize,
    /// `GateError::Busy` per route (indexed like [`Route::ALL`](admit::Source::ALL)).
    pub busy: [AtomicUsize; ROUTES],
    /// `GateError::Busy` per reason (indexed like [`ShedReason::ALL`]).
    pub busy_by_reason: [AtomicUsize; REASONS],
    /// `GateError::Cancelled`: the client hung up while parked.
    pub cancelled: AtomicUsize,
    /// `GateError::Closed`.
    pub closed: AtomicUsize,
    /// `GateError::ExceedsCapacity`.
    pub exceeds_capacity: AtomicUsize,
    /// Admitted, but the body did not arrive whole (e.g. the client hung up).
    pub body_errors: AtomicUsize,
    /// Units held now, per route.
    pub in_use: [AtomicUsize; ROUTES],
    /// How long each admitted request waited for its units.
    waits: Mutex<Vec<Duration>>,
    /// How long each shed request waited before it was shed (zero: at arrival).
    shed_waits: Mutex<Vec<Duration>>,
    /// Every change of the overload state the observer heard, in order.
    overload_changes: Mutex<Vec<(Instant, bool)>>,
    /// Set when the gate becomes overloaded; the timeline's sampler clears it, so
    /// an episode shorter than a sample still shows.
    pub overloaded_since_sample: AtomicBool,
    /// The upload sessions: opened, ended, and in which order each one's buffer
    /// and units went.
    pub sessions: SessionLedger,
    /// Requests the progress rule cut, per reason (indexed like [`CutReason::ALL`]).
    pub cuts: [AtomicUsize; CUT_REASONS],
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

    /// Busy answers for `reason`.
    #[must_use]
    pub fn busy_for(&self, reason: ShedReason) -> usize {
        reason_index(reason).map_or(0, |i| self.busy_by_reason[i].load(Ordering::Relaxed))
    }

    /// Units held now on `route`.
    #[must_use]
    pub fn in_use(&self, route: Route) -> usize {
        self.in_use[route.index()].load(Ordering::Relaxed)
    }

    /// The admitted requests' waits so far.
    #[must_use]
    pub fn waits(&self) -> Vec<Duration> {
        self.waits.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// The shed requests' waits so far: how long each waited before its `503`.
    #[must_use]
    pub fn shed_waits(&self) -> Vec<Duration> {
        self.shed_waits
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The changes of the overload state so far, as heard: when, and to what.
    #[must_use]
    pub fn overload_changes(&self) -> Vec<(Instant, bool)> {
        self.overload_changes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

/// `reason`'s position in [`ShedReason::ALL`].
#[must_use]
pub fn reason_index(reason: ShedReason) -> Option<usize> {
    ShedReason::ALL.iter().position(|&r| r == reason)
}

/// The gate's observer: the `metrics` one, plus the demo's own tallies.
#[derive(Debug)]
pub struct DemoObserver {
    metrics: MetricsObserver,
    stats: Arc<ServerStats>,
    announce_resizes: bool,
}

impl DemoObserver {
    /// Reports to `metrics` under [`METRICS_PREFIX`], and counts into `stats`.
    #[must_use]
    pub fn new(stats: Arc<ServerStats>) -> Self {
        Self {
            metrics: MetricsObserver::new(METRICS_PREFIX),
            stats,
            announce_resizes: false,
        }
    }

    /// Also prints a line at every change of the gate's capacity (`serve` following
    /// the memory limit).
    #[must_use]
    pub fn announcing_resizes(mut self) -> Self {
        self.announce_resizes = true;
        self
    }
}

impl Observer for DemoObserver {
    fn on_start(&self, event: &StartEvent<'_>) {
        self.metrics.on_start(event);
    }

    fn on_admit(&self, event: &AdmitEvent) {
        self.metrics.on_admit(event);
        self.stats.admitted.fetch_add(1, Ordering::Relaxed);
        if let Some(route) = Route::from_label(event.source) {
            self.stats.in_use[route.index()].fetch_add(event.units, Ordering::Relaxed);
        }
        self.stats
            .waits
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(event.waited);
    }

    fn on_release(&self, event: &ReleaseEvent) {
        self.metrics.on_release(event);
        if let Some(route) = Route::from_label(event.source) {
            self.stats.in_use[route.index()].fetch_sub(event.units, Ordering::Relaxed);
            if route == Route::Session {
                self.stats.sessions.units_returned();
            }
        }
    }

    fn on_lease_end(&self, event: &LeaseEndEvent) {
        self.metrics.on_lease_end(event);
        self.stats.sessions.ended(event);
    }

    fn on_shed(&self, event: &ShedEvent) {
        self.metrics.on_shed(event);
        if let Some(route) = Route::from_label(event.source) {
            self.stats.busy[route.index()].fetch_add(1, Ordering::Relaxed);
        }
        if let Some(i) = reason_index(event.reason) {
            self.stats.busy_by_reason[i].fetch_add(1, Ordering::Relaxed);
        }
        self.stats
            .shed_waits
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(event.waited);
    }

    fn on_capacity(&self, event: &CapacityEvent) {
        self.metrics.on_capacity(event);
        if self.announce_resizes {
            println!("  resized   capacity now {} units", event.capacity);
        }
    }

    fn on_cut(&self, event: &CutEvent) {
        self.metrics.on_cut(event);
        if let Some(i) = CutReason::ALL.iter().position(|r| *r == event.reason) {
            self.stats.cuts[i].fetch_add(1, Ordering::Relaxed);
        }
    }

    fn on_memory(&self, event: &MemoryEvent) {
        self.metrics.on_memory(event);
    }

    fn on_overload(&self, event: &OverloadEvent) {
        self.metrics.on_overload(event);
        if event.overloaded {
            self.stats
                .overloaded_since_sample
                .store(true, Ordering::Relaxed);
        }
        self.stats
            .overload_changes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((Instant::now(), event.overloaded));
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
    /// The upload sessions that span requests, by id; each holds its unit.
    pub sessions: SessionLeases,
    /// Mints the sessions' ids.
    pub ids: IdMinter,
}

/// The longest a connection may take to send a request's headers (counted from
/// when hyper starts reading them: a new connection, or a kept-alive one after its
/// last response): past it hyper closes the connection without an answer. Such a
/// request never reaches the gate and takes no unit, but without this bound it
/// would hold a connection and its task forever.
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);

/// A running server; [`stop`](Self::stop) ends it.
#[derive(Debug)]
pub struct Server {
    /// Where it listens.
    pub addr: SocketAddr,
    shutdown: oneshot::Sender<()>,
    task: JoinHandle<()>,
}

impl Server {
    /// Serves `app` on `listener` until [`stop`](Self::stop), with the layer's
    /// progress rule at admit-tower's defaults.
    ///
    /// # Errors
    ///
    /// If the listener's address cannot be read.
    pub fn start(listener: TcpListener, app: Arc<App>) -> io::Result<Self> {
        Self::start_with_progress(listener, app, Some(ProgressRule::new()))
    }

    /// [`start`](Self::start) with the layer's progress rule set to `progress`
    /// (`None`: off).
    ///
    /// # Errors
    ///
    /// If the listener's address cannot be read.
    pub fn start_with_progress(
        listener: TcpListener,
        app: Arc<App>,
        progress: Option<ProgressRule>,
    ) -> io::Result<Self> {
        let addr = listener.local_addr()?;
        let stats = Arc::clone(&app.stats);
        let admit = AdmitLayer::new(app.gate.clone(), decide);
        let admit = match progress {
            Some(rule) => admit.progress(rule),
            None => admit.without_progress(),
        };
        let admit = admit.on_reject(move |error, _head| {
            // Busy is tallied by the observer; these two are not sheds.
            match error {
                GateError::Closed => stats.closed.fetch_add(1, Ordering::Relaxed),
                GateError::ExceedsCapacity(_) => {
                    stats.exceeds_capacity.fetch_add(1, Ordering::Relaxed)
                }
                _ => 0,
            };
            admit_tower::default_response(error).unwrap_or_default()
        });
        let router = Router::new()
            .route(Route::Upload.path(), post(stage))
            .route(Route::Mirror.path(), post(stage))
            .route(crate::sessions::UPLOADS, post(crate::sessions::open))
            .route(
                crate::sessions::UPLOAD,
                patch(crate::sessions::append)
                    .put(crate::sessions::close)
                    .delete(crate::sessions::cancel),
            )
            .route("/metrics", get(metrics))
            .layer(admit)
            .layer(axum::middleware::from_fn_with_state(
                Arc::clone(&app),
                count_hang_ups,
            ))
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
        let service = ServiceBuilder::new()
            // The hang-up watch; a "client gone" answer closes without a byte.
            .layer(PeerWatch::new(&stream).layer())
            .service(router.clone());
        connections.spawn(
            hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(HEADER_READ_TIMEOUT)
                .serve_connection(TokioIo::new(stream), TowerToHyperService::new(service)),
        );
        while connections.try_join_next().is_some() {}
    }
    connections.shutdown().await;
}

/// Counts a hang-up the layer answered with "nothing" (before `PeerWatch`'s layer
/// turns it into a closed connection).
async fn count_hang_ups(
    State(app): State<Arc<App>>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let response = next.run(request).await;
    if response.extensions().get::<ClientGone>().is_some() {
        app.stats.cancelled.fetch_add(1, Ordering::Relaxed);
    }
    response
}

async fn metrics(State(app): State<Arc<App>>) -> Response {
    app.prometheus.run_upkeep();
    (
        [(CONTENT_TYPE, "text/plain; version=0.0.4")],
        app.prometheus.render(),
    )
        .into_response()
}

/// Both upload routes, once admitted: one staging buffer per session, filled from
/// the body (at most a session buffer: `413` past it), then "processing" for the
/// configured hold. The layer returns the units when the answer has been sent.
async fn stage(
    State(app): State<Arc<App>>,
    Extension(permit): Extension<AdmitPermit<Route>>,
    mut body: Body,
) -> Response {
    let units = permit.units();
    // Asking for the body is what makes hyper send `100 Continue` to a client that
    // waits for it: a parked or shed request never had its body sent at all.
    let mut sessions: Vec<Vec<u8>> = (0..units)
        .map(|_| Vec::with_capacity(app.session_buffer))
        .collect();
    while let Some(frame) = body.frame().await {
        let frame = match frame {
            Ok(frame) => frame,
            // Cut by the progress rule: the observer counted it, and the layer
            // answers 408 whatever we say.
            Err(error) if BodyCut::find(&error).is_some() => {
                return (StatusCode::REQUEST_TIMEOUT, "upload cut: it stalled\n").into_response();
            }
            Err(_) => {
                app.stats.body_errors.fetch_add(1, Ordering::Relaxed);
                return (StatusCode::BAD_REQUEST, "upload body incomplete\n").into_response();
            }
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
    (
        StatusCode::OK,
        format!("stored {stored} bytes in {units} session(s)\n"),
    )
        .into_response()
}
