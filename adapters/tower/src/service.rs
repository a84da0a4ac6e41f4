//! The `Layer`/`Service` pair and its response future.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use admit::{Gate, GateError, GatePermit, Observer, Priority, Source, Timer};
use bytes::Bytes;
use http::request::Parts;
use http::{Request, Response, Version};
use pin_project_lite::pin_project;
use tower_layer::Layer;
use tower_service::Service;

use crate::body::AdmitBody;
use crate::permit::{AdmitPermit, Hold, Slot};
use crate::progress::{BoxSleep, GateClock, ProgressRule, Watch};
use crate::reject::{cut_response, default_response, gone_parts};
use crate::signal::{BoxSignal, HangUp, WaitCeiling};
use crate::watched::WatchedBody;
use crate::Decision;

type BoxAcquire<S> = Pin<Box<dyn Future<Output = Result<GatePermit<S>, GateError>> + Send>>;

/// A gate with its timer and observer types erased: the layer names only the
/// source type. The acquire is boxed anyway (it must own a clone of the gate to be
/// `'static`), so the erasure costs one indirect call.
trait DynGate<S: Source>: Send + Sync {
    fn acquire(
        &self,
        units: usize,
        source: S,
        priority: Priority,
        ceiling: Option<Duration>,
        hang_up: Option<HangUp>,
    ) -> BoxAcquire<S>;

    fn debug(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result;
}

impl<S: Source, T: Timer, O: Observer> DynGate<S> for Gate<S, T, O> {
    fn acquire(
        &self,
        units: usize,
        source: S,
        priority: Priority,
        ceiling: Option<Duration>,
        hang_up: Option<HangUp>,
    ) -> BoxAcquire<S> {
        let gate = self.clone();
        Box::pin(async move {
            let mut acquire = gate.acquire(units, source).priority(priority);
            if let Some(ceiling) = ceiling {
                acquire = acquire.ceiling(ceiling);
            }
            match hang_up {
                Some(hang_up) => until_gone(acquire, &hang_up).await,
                None => acquire.await,
            }
        })
    }

    fn debug(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

/// `acquire`, ended as [`GateError::Cancelled`] once `hang_up` says the client
/// has gone.
///
/// The watch is armed only once the acquire has parked: most requests are
/// admitted at their first poll, and arming it (a boxed future, `PeerWatch`'s
/// socket registered for readiness) would cost each of them for nothing. From
/// then on the signal is looked at first, as `GateAcquire::until` does: a client
/// gone when its grant comes is not served, and dropping the acquire returns the
/// units and counts nothing.
async fn until_gone<S: Source, F>(acquire: F, hang_up: &HangUp) -> Result<GatePermit<S>, GateError>
where
    F: Future<Output = Result<GatePermit<S>, GateError>>,
{
    let mut acquire = std::pin::pin!(acquire);
    let mut gone = None;
    std::future::poll_fn(|cx| {
        if let Some(gone) = gone.as_mut().map(BoxSignal::as_mut) {
            if gone.poll(cx).is_ready() {
                return Poll::Ready(Err(GateError::Cancelled));
            }
        }
        if let Poll::Ready(outcome) = acquire.as_mut().poll(cx) {
            return Poll::Ready(outcome);
        }
        if gone.is_none() {
            let mut signal = hang_up.signal();
            if signal.as_mut().poll(cx).is_ready() {
                return Poll::Ready(Err(GateError::Cancelled));
            }
            gone = Some(signal);
        }
        Poll::Pending
    })
    .await
}

type RejectFn = dyn Fn(&GateError, &Parts) -> Response<Bytes> + Send + Sync;

/// What every clone of the layer and its services share.
struct Shared<S: Source, D> {
    gate: Box<dyn DynGate<S>>,
    /// The same gate, for the progress rule of each watched request.
    clock: Arc<dyn GateClock>,
    /// The progress rule, unless turned off.
    progress: Option<ProgressRule>,
    decide: D,
    reject: Option<Box<RejectFn>>,
    /// Set by the first HTTP/1 request that reaches the gate with no hang-up watch
    /// (which warns), or from the start by [`AdmitLayer::allow_unwatched`]: the
    /// warning is given at most once per layer.
    unwatched_warned: AtomicBool,
}

impl<S: Source, D> Shared<S, D> {
    /// The progress rule's state for a request of `units` for `source`, if on.
    fn watch(&self, source: S, units: usize, hang_up: Option<HangUp>) -> Option<Watch> {
        let rule = self.progress?;
        Some(Watch::new(
            Arc::clone(&self.clock),
            rule,
            source.label(),
            units,
            hang_up,
        ))
    }

    fn reject(&self, error: &GateError, head: &Parts) -> Option<Response<Bytes>> {
        match (error, &self.reject) {
            (GateError::Cancelled, _) => None,
            (_, Some(reject)) => Some(reject(error, head)),
            (_, None) => default_response(error),
        }
    }

    /// Warns, once per layer, that a request reached the gate with nothing to tell
    /// it that its client left: a hang-up while it waits would end as a shed.
    fn warn_unwatched(&self, version: Version) {
        // HTTP/2 and HTTP/3 cancel a request with a stream reset, which hyper sees
        // itself: it drops the request's future, and a dropped acquire counts nothing.
        if !matches!(
            version,
            Version::HTTP_09 | Version::HTTP_10 | Version::HTTP_11
        ) {
            return;
        }
        // The flag guards nothing but itself, so `Relaxed`; the swap lets exactly
        // one request warn, the load keeps the others from writing the shared line.
        if self.unwatched_warned.load(Ordering::Relaxed)
            || self.unwatched_warned.swap(true, Ordering::Relaxed)
        {
            return;
        }
        tracing::warn!("{UNWATCHED}");
    }
}

/// The warning of [`Shared::warn_unwatched`]: what is wrong, the fix, the opt-out.
const UNWATCHED: &str = "admit-tower: an HTTP/1 request reached the admission gate with no \
    hang-up watch, so a client that hangs up while its request waits will be counted as a \
    shed instead of a client that left. With axum, serve \
    `app.into_make_service_with_connect_info::<admit_tower::PeerWatch>()` (admit-tower \
    features `axum` and `tokio`); with hyper-util, wrap each connection's service in \
    `PeerWatch::new(&stream).layer()` (a `PeerWatchLayer`); or put a `HangUp` in the \
    request's extensions. Without a watch on purpose: `AdmitLayer::allow_unwatched()` \
    silences this warning, given once per layer.";

/// A [`Layer`] that admits each request through a [`Gate`]: see [`Admit`].
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use admit_tower::{AdmitLayer, Decision};
/// use axum::{routing::{get, post}, Router};
///
/// admit::sources! {
///     /// Where an upload session is opened.
///     pub enum Route { Upload => "upload", Mirror => "mirror" }
/// }
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), admit::ConfigError> {
/// let gate = admit_tokio::gate(4).max_units(2).wait_budget(Duration::from_secs(5)).build()?;
/// let app: Router = Router::new()
///     .route("/upload", post(|| async { "stored\n" }))
///     .route("/mirror", post(|| async { "mirrored\n" }))
///     .route("/healthz", get(|| async { "ok\n" }))
///     .layer(AdmitLayer::new(gate, |head: &http::request::Parts| match head.uri.path() {
///         "/upload" => Decision::admit(1, Route::Upload),
///         "/mirror" => Decision::admit(2, Route::Mirror),
///         _ => Decision::Bypass,
///     }));
/// # let _ = app;
/// # Ok(())
/// # }
/// ```
pub struct AdmitLayer<S: Source, D> {
    shared: Arc<Shared<S, D>>,
}

impl<S: Source, D> AdmitLayer<S, D>
where
    D: Fn(&Parts) -> Decision<S> + Send + Sync + 'static,
{
    /// Admits every request through `gate`, with the units and source (or bypass)
    /// that `decide` picks from the request's head.
    #[must_use]
    pub fn new<T: Timer, O: Observer>(gate: Gate<S, T, O>, decide: D) -> Self {
        Self {
            shared: Arc::new(Shared {
                clock: Arc::new(gate.clone()),
                gate: Box::new(gate),
                progress: Some(ProgressRule::new()),
                decide,
                reject: None,
                unwatched_warned: AtomicBool::new(false),
            }),
        }
    }

    /// Replaces the answer to a refused request ([`GateError::Busy`],
    /// [`ExceedsCapacity`](GateError::ExceedsCapacity), [`Closed`](GateError::Closed);
    /// never called for [`Cancelled`](GateError::Cancelled), to which nothing is
    /// written). The default is [`default_response`](crate::default_response).
    ///
    /// # Panics
    ///
    /// If the layer was already cloned (set it right after [`new`](Self::new)).
    ///
    /// # Examples
    ///
    /// ```
    /// use admit::GateError;
    /// use admit_tower::{AdmitLayer, Decision};
    /// use http::header::{CONTENT_TYPE, RETRY_AFTER};
    ///
    /// admit::sources! { pub enum Route { Upload => "upload" } }
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), admit::ConfigError> {
    /// let gate = admit_tokio::gate(4).build()?;
    /// let layer = AdmitLayer::new(gate, |_: &http::request::Parts| Decision::admit(1, Route::Upload))
    ///     .on_reject(|error, _head| {
    ///         let mut response = http::Response::new(format!("{{\"error\":\"{error}\"}}").into());
    ///         *response.status_mut() = admit_http::status(error).unwrap_or_default();
    ///         response.headers_mut().insert(CONTENT_TYPE, "application/json".parse().unwrap());
    ///         if let Some(retry_after) = admit_http::retry_after(error) {
    ///             response.headers_mut().insert(RETRY_AFTER, retry_after);
    ///         }
    ///         response
    ///     });
    /// # let _ = layer;
    /// # Ok(())
    /// # }
    /// ```
    #[must_use]
    pub fn on_reject<R>(mut self, reject: R) -> Self
    where
        R: Fn(&GateError, &Parts) -> Response<Bytes> + Send + Sync + 'static,
    {
        Arc::get_mut(&mut self.shared)
            .expect("AdmitLayer::on_reject must be called before the layer is cloned")
            .reject = Some(Box::new(reject));
        self
    }

    /// Silences the warning this layer gives (once, through [`tracing`]) when an
    /// HTTP/1 request reaches the gate with no hang-up watch: for a server without
    /// one on purpose.
    ///
    /// Without a watch, hyper does not notice an HTTP/1 client that hangs up while
    /// its request is parked (it is not reading the socket then), so the request
    /// waits out its budget and is counted as a shed, the one miscount the gate
    /// exists to avoid. The watch is `ConnectInfo<PeerWatch>` with axum, a
    /// `PeerWatchLayer` with hyper-util (both feature `tokio`), or any [`HangUp`]
    /// in the request's extensions; serving an axum router with
    /// `into_make_service()` forgets it, and the first such request that reaches
    /// the gate logs a warning that names the fix. HTTP/2 requests need no watch
    /// and never warn; bypassed ones never reach the gate.
    ///
    /// Reasons to run without one: a listener `PeerWatch` cannot watch (a Unix
    /// socket, a stream that is not a Tokio `TcpStream`), a proxy in front that
    /// keeps the upstream connection when its client leaves, a test in process.
    /// Applies to this layer and every clone of it, whenever called.
    ///
    /// [`tracing`]: https://docs.rs/tracing
    ///
    /// # Examples
    ///
    /// ```
    /// use admit_tower::{AdmitLayer, Decision};
    ///
    /// admit::sources! { pub enum Route { Upload => "upload" } }
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), admit::ConfigError> {
    /// let gate = admit_tokio::gate(4).build()?;
    /// // Served on a Unix socket: no `PeerWatch`, and no warning for it.
    /// let layer = AdmitLayer::new(gate, |_: &http::request::Parts| Decision::admit(1, Route::Upload))
    ///     .allow_unwatched();
    /// # let _ = layer;
    /// # Ok(())
    /// # }
    /// ```
    #[must_use]
    pub fn allow_unwatched(self) -> Self {
        self.shared.unwatched_warned.store(true, Ordering::Relaxed);
        self
    }

    /// Sets the progress rule's limits (the default is [`ProgressRule::new`]):
    /// see [Holders that stall](crate#holders-that-stall).
    ///
    /// # Panics
    ///
    /// If the layer was already cloned (set it right after [`new`](Self::new)).
    #[must_use]
    pub fn progress(mut self, rule: ProgressRule) -> Self {
        Arc::get_mut(&mut self.shared)
            .expect("AdmitLayer::progress must be called before the layer is cloned")
            .progress = Some(rule);
        self
    }

    /// Turns the progress rule off: a client that stops sending its body or
    /// reading its response keeps its units until the server's own timeouts end
    /// the connection. For a server whose every connection already has a body
    /// and write timeout in front of the layer (tower-http's
    /// `RequestBodyTimeoutLayer` covers the idle rule only: a byte a second
    /// passes it).
    ///
    /// # Panics
    ///
    /// If the layer was already cloned.
    #[must_use]
    pub fn without_progress(mut self) -> Self {
        Arc::get_mut(&mut self.shared)
            .expect("AdmitLayer::without_progress must be called before the layer is cloned")
            .progress = None;
        self
    }
}

impl<S: Source, D> Clone for AdmitLayer<S, D> {
    fn clone(&self) -> Self {
        Self {
            shared: Arc::clone(&self.shared),
        }
    }
}

impl<S: Source, D> fmt::Debug for AdmitLayer<S, D> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AdmitLayer")
            .field("gate", &DebugGate(&*self.shared.gate))
            .field("custom_reject", &self.shared.reject.is_some())
            .field("progress", &self.shared.progress)
            .finish_non_exhaustive()
    }
}

struct DebugGate<'a, S: Source>(&'a dyn DynGate<S>);

impl<S: Source> fmt::Debug for DebugGate<'_, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.debug(f)
    }
}

impl<Svc, S: Source, D> Layer<Svc> for AdmitLayer<S, D> {
    type Service = Admit<Svc, S, D>;

    fn layer(&self, inner: Svc) -> Self::Service {
        Admit {
            inner,
            shared: Arc::clone(&self.shared),
        }
    }
}

/// A [`Service`] that admits each request through a [`Gate`] before calling the
/// inner service, and holds the units until the response body is finished.
///
/// Per request, in `call`:
///
/// 1. The layer's closure looks at the head ([`Parts`]) and returns a
///    [`Decision`]: [`Bypass`](Decision::Bypass) calls the inner service at once;
///    [`Watch`](Decision::Watch) too, under the progress rule;
///    [`Admit`](Decision::Admit) waits for the units. The body is not touched before
///    admission, so a parked request holds no memory for it (and a client that sent
///    `Expect: 100-continue` has not sent it). The inner service sees it as a
///    [`WatchedBody`].
/// 2. The wait ends at the gate's budget, at the request's [`WaitCeiling`] if
///    sooner, or when its [`HangUp`] fires (or, with the `axum` and `tokio` features,
///    its `ConnectInfo<PeerWatch>`). The first HTTP/1 request with neither logs a
///    warning, once per layer: see [`AdmitLayer::allow_unwatched`].
/// 3. Granted: an [`AdmitPermit`] goes into the request's extensions, the inner
///    service is called, and the permit rides in the response's [`AdmitBody`] until
///    the body has yielded its last frame or is dropped. Dropped before a response
///    (the connection closed): the units return at once. A client that stalls or
///    trickles its body, or stops reading the response, is cut by the
///    [`ProgressRule`] (see [`AdmitLayer::progress`]): `408` before a response.
/// 4. Refused: the inner service is not called. [`GateError::Busy`],
///    [`ExceedsCapacity`](GateError::ExceedsCapacity) and [`Closed`](GateError::Closed)
///    become a `503` (with `Retry-After` for `Busy` only), or what
///    [`AdmitLayer::on_reject`] makes of them. [`Cancelled`](GateError::Cancelled)
///    becomes a response marked [`ClientGone`](crate::ClientGone) whose body fails at
///    once, so hyper closes the connection instead of answering.
///
/// `poll_ready` only asks the inner service: no unit is taken before a request
/// exists, so a service made ready and never called (by a server, a `Buffer`, a
/// balancer) and an idle keep-alive connection hold nothing. The ready inner service
/// moves into the response future and is called once the request is admitted; a
/// fresh clone takes its place (so `Svc: Clone`, as axum's and tower's services
/// are).
///
/// Runtime-agnostic: the only clock is the gate's [`Timer`].
pub struct Admit<Svc, S: Source, D> {
    inner: Svc,
    shared: Arc<Shared<S, D>>,
}

impl<Svc: Clone, S: Source, D> Clone for Admit<Svc, S, D> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
            shared: Arc::clone(&self.shared),
        }
    }
}

impl<Svc: fmt::Debug, S: Source, D> fmt::Debug for Admit<Svc, S, D> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Admit")
            .field("inner", &self.inner)
            .field("gate", &DebugGate(&*self.shared.gate))
            .finish_non_exhaustive()
    }
}

impl<Svc, S, D, B, RB> Service<Request<B>> for Admit<Svc, S, D>
where
    Svc: Service<Request<WatchedBody<B>>, Response = Response<RB>> + Clone,
    S: Source,
    D: Fn(&Parts) -> Decision<S> + Send + Sync + 'static,
{
    type Response = Response<AdmitBody<RB>>;
    type Error = Svc::Error;
    type Future = ResponseFuture<Svc, B, S, D>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        // Only the inner service: the units are taken in `call`, for a request that
        // exists.
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        let (head, body) = request.into_parts();
        let decision = (self.shared.decide)(&head);
        let request = Request::from_parts(head, body);
        match decision {
            Decision::Watch { source } => {
                let watch = self.shared.watch(source, 0, hang_up(&request));
                let Some(watch) = watch else {
                    return self.call_now(request.map(WatchedBody::unwatched), Hold::none());
                };
                let slot = Slot::watch_only(source, watch);
                let request = request.map(|body| WatchedBody::watched(body, slot.clone()));
                self.call_now(request, Hold::new(slot))
            }
            Decision::Bypass => self.call_now(request.map(WatchedBody::unwatched), Hold::none()),
            Decision::Admit {
                units,
                source,
                priority,
            } => {
                let ceiling = request.extensions().get::<WaitCeiling>().map(|c| c.0);
                let hang_up = hang_up(&request);
                if hang_up.is_none() {
                    self.shared.warn_unwatched(request.version());
                }
                let priority = priority.unwrap_or_else(|| source.priority());
                let acquire =
                    self.shared
                        .gate
                        .acquire(units, source, priority, ceiling, hang_up.clone());
                // The ready service goes with the request; a clone stays for the next.
                let ready = self.inner.clone();
                let ready = std::mem::replace(&mut self.inner, ready);
                ResponseFuture {
                    state: State::Admitting {
                        acquire,
                        service: Some(ready),
                        request: Some(request),
                        shared: Arc::clone(&self.shared),
                        hang_up,
                    },
                }
            }
        }
    }
}

impl<Svc, S: Source, D> Admit<Svc, S, D> {
    /// Calls the inner service at once, `hold` riding with the response.
    fn call_now<B>(
        &mut self,
        request: Request<WatchedBody<B>>,
        hold: Hold,
    ) -> ResponseFuture<Svc, B, S, D>
    where
        Svc: Service<Request<WatchedBody<B>>>,
    {
        ResponseFuture {
            state: State::Calling {
                future: self.inner.call(request),
                hold: Some(hold),
                cut_bound: None,
            },
        }
    }
}

/// The request's hang-up signal: a [`HangUp`] extension, or (axum and tokio
/// features) the [`PeerWatch`](crate::PeerWatch) axum put in its connect info.
fn hang_up<B>(request: &Request<B>) -> Option<HangUp> {
    if let Some(hang_up) = request.extensions().get::<HangUp>() {
        return Some(hang_up.clone());
    }
    #[cfg(all(feature = "axum", feature = "tokio"))]
    if let Some(axum::extract::ConnectInfo(peer)) = request
        .extensions()
        .get::<axum::extract::ConnectInfo<crate::PeerWatch>>()
    {
        return Some(peer.hang_up());
    }
    None
}

pin_project! {
    /// The future of [`Admit::call`]: waits for admission, then runs the inner
    /// service's future.
    ///
    /// # Cancel safety
    ///
    /// Dropping it while parked counts nothing and frees the request's place in
    /// the queue; dropping it after admission returns the units.
    #[must_use = "futures do nothing unless polled"]
    pub struct ResponseFuture<Svc, B, S, D>
    where
        Svc: Service<Request<WatchedBody<B>>>,
        S: Source,
    {
        #[pin]
        state: State<Svc, B, S, D>,
    }
}

pin_project! {
    #[project = StateProj]
    enum State<Svc, B, S, D>
    where
        Svc: Service<Request<WatchedBody<B>>>,
        S: Source,
    {
        Admitting {
            acquire: BoxAcquire<S>,
            service: Option<Svc>,
            request: Option<Request<B>>,
            shared: Arc<Shared<S, D>>,
            hang_up: Option<HangUp>,
        },
        Calling {
            // Declared before the hold: on a cut, the handler's future (its
            // buffers) is dropped before the units return.
            #[pin]
            future: Svc::Future,
            // Taken when the response is ready; dropped (units returned) if the
            // future is dropped first.
            hold: Option<Hold>,
            // Once the request is cut: the end of the handler's time to answer.
            cut_bound: Option<BoxSleep>,
        },
        Refused {
            response: Option<Response<AdmitBody<()>>>,
        },
    }
}

impl<Svc, B, S, D, RB> Future for ResponseFuture<Svc, B, S, D>
where
    Svc: Service<Request<WatchedBody<B>>, Response = Response<RB>>,
    S: Source,
{
    type Output = Result<Response<AdmitBody<RB>>, Svc::Error>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        loop {
            let mut state = self.as_mut().project().state;
            match state.as_mut().project() {
                StateProj::Admitting {
                    acquire,
                    service,
                    request,
                    shared,
                    hang_up,
                } => {
                    let outcome = match acquire.as_mut().poll(cx) {
                        Poll::Pending => return Poll::Pending,
                        Poll::Ready(outcome) => outcome,
                    };
                    let request = request.take().expect("polled after completion");
                    let mut service = service.take().expect("polled after completion");
                    let next = match outcome {
                        Ok(permit) => {
                            let watch =
                                shared.watch(permit.source(), permit.units(), hang_up.take());
                            let slot = Slot::new(permit, watch);
                            let mut request =
                                request.map(|body| WatchedBody::watched(body, slot.clone()));
                            request
                                .extensions_mut()
                                .insert(AdmitPermit::new(Arc::clone(&slot)));
                            State::Calling {
                                future: service.call(request),
                                hold: Some(Hold::new(slot)),
                                cut_bound: None,
                            }
                        }
                        Err(error) => {
                            let (head, _body) = request.into_parts();
                            let response = match shared.reject(&error, &head) {
                                Some(response) => response.map(AdmitBody::full),
                                None => Response::from_parts(gone_parts(), AdmitBody::gone()),
                            };
                            State::Refused {
                                response: Some(response),
                            }
                        }
                    };
                    state.set(next);
                }
                StateProj::Calling {
                    future,
                    hold,
                    cut_bound,
                } => {
                    let polled = future.poll(cx);
                    let watch = hold.as_ref().and_then(Hold::watch);
                    let cut = watch.and_then(Watch::cut_state);
                    let response = match (polled, cut) {
                        (Poll::Ready(Err(e)), None) => return Poll::Ready(Err(e)),
                        (Poll::Ready(Ok(response)), None) => response,
                        (Poll::Ready(answer), Some((reason, _))) => {
                            // Cut: whatever the handler answered (an error too),
                            // the client is told 408; its answer goes before the
                            // units.
                            drop(answer);
                            drop(hold.take());
                            state.set(cut_state(reason));
                            continue;
                        }
                        (Poll::Pending, None) => return Poll::Pending,
                        (Poll::Pending, Some((reason, at))) => {
                            let watch = watch.expect("a cut has a watch");
                            let bound = cut_bound.get_or_insert_with(|| {
                                watch.gate.sleep_until(at + watch.rule.cut_bound)
                            });
                            if bound.as_mut().poll(cx).is_pending() {
                                return Poll::Pending;
                            }
                            // The handler did not answer in time: its future goes
                            // (declared before the hold), then the units.
                            state.set(cut_state(reason));
                            continue;
                        }
                    };
                    let hold = hold.take().expect("polled after completion");
                    return Poll::Ready(Ok(response.map(|body| AdmitBody::inner(body, hold))));
                }
                StateProj::Refused { response } => {
                    let response = response.take().expect("polled after completion");
                    return Poll::Ready(Ok(response.map(AdmitBody::retype)));
                }
            }
        }
    }
}

/// The answer to a cut request: `408`, the connection closed after it.
fn cut_state<Svc, B, S, D>(reason: admit::CutReason) -> State<Svc, B, S, D>
where
    Svc: Service<Request<WatchedBody<B>>>,
    S: Source,
{
    State::Refused {
        response: Some(cut_response(reason).map(AdmitBody::full)),
    }
}

impl<Svc, B, S, D> fmt::Debug for ResponseFuture<Svc, B, S, D>
where
    Svc: Service<Request<WatchedBody<B>>>,
    S: Source,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = match &self.state {
            State::Admitting { .. } => "admitting",
            State::Calling { .. } => "calling",
            State::Refused { .. } => "refused",
        };
        f.debug_struct("ResponseFuture")
            .field("state", &state)
            .finish()
    }
}
