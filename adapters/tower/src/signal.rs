//! What a server tells the layer about one request through its extensions: the
//! client's hang-up, and how long the request may wait.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

/// The longest this request may wait for admission, counted from when the layer's
/// `call` runs: a request extension a server sets, e.g. the time left before its
/// write or request timeout, so that a shed is always written in time.
///
/// The wait ends at the gate's wait budget or at this ceiling, whichever is sooner;
/// a wait ended by the ceiling is a shed like any other (`503` with `Retry-After`,
/// counted): the client is still there and must be told.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use admit_tower::WaitCeiling;
///
/// let mut request = http::Request::post("/upload").body(()).unwrap();
/// // The server answers every request within 30 s; keep 100 ms to write the 503.
/// request.extensions_mut().insert(WaitCeiling(Duration::from_millis(29_900)));
/// # assert!(request.extensions().get::<WaitCeiling>().is_some());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct WaitCeiling(pub Duration);

pub(crate) type BoxSignal = Pin<Box<dyn Future<Output = ()> + Send + 'static>>;

/// A request extension that resolves when the client has gone: a client that hangs
/// up while its request is parked ends the wait as
/// [`GateError::Cancelled`](admit::GateError), as the acquire's
/// [`until`](admit::GateAcquire::until) would: no shed is counted, its place in the
/// queue is freed, and nothing is written. The layer makes the "gone" future only
/// once the request has parked: one admitted at its first poll costs nothing here.
///
/// Runtime-agnostic: it wraps a function that makes a fresh "gone" future for each
/// request on a connection that parks. With the `tokio` feature,
/// `PeerWatch` (feature `tokio`) makes one for a Tokio `TcpStream`. HTTP/2 needs
/// none: hyper drops the request's future when the client resets the stream, and a
/// dropped acquire counts nothing either.
///
/// # Examples
///
/// ```
/// use admit_tower::HangUp;
///
/// let (gone, hung_up) = tokio::sync::watch::channel(false);
/// let hang_up = HangUp::new(move || {
///     let mut hung_up = hung_up.clone();
///     async move {
///         let _ = hung_up.wait_for(|gone| *gone).await;
///     }
/// });
/// let mut request = http::Request::post("/upload").body(()).unwrap();
/// request.extensions_mut().insert(hang_up);
/// # let _ = gone;
/// ```
#[derive(Clone)]
pub struct HangUp {
    make: Arc<dyn Fn() -> BoxSignal + Send + Sync>,
    abort: Option<Arc<dyn Fn() + Send + Sync>>,
}

impl HangUp {
    /// A signal whose [`wait`](Self::wait) is a fresh future from `make`, which
    /// must complete once the client has gone.
    #[must_use]
    pub fn new<F, Fut>(make: F) -> Self
    where
        F: Fn() -> Fut + Send + Sync + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        Self {
            make: Arc::new(move || Box::pin(make()) as BoxSignal),
            abort: None,
        }
    }

    /// The same signal, with a way to abort the connection: the progress rule
    /// calls `abort` when it cuts a response whose client stopped reading, since
    /// hyper, stuck writing to a full socket, would not notice the cut itself
    /// (`PeerWatch` shuts its socket down).
    #[must_use]
    pub fn with_abort<F>(mut self, abort: F) -> Self
    where
        F: Fn() + Send + Sync + 'static,
    {
        self.abort = Some(Arc::new(abort));
        self
    }

    /// Aborts the connection, if [`with_abort`](Self::with_abort) gave a way.
    pub fn abort(&self) {
        if let Some(abort) = &self.abort {
            abort();
        }
    }

    /// Completes when the client has gone.
    pub fn wait(&self) -> impl Future<Output = ()> + Send + 'static {
        self.signal()
    }

    /// [`wait`](Self::wait), as the box it already is.
    pub(crate) fn signal(&self) -> BoxSignal {
        (self.make)()
    }
}

impl fmt::Debug for HangUp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HangUp").finish_non_exhaustive()
    }
}
