//! Noticing a client's hang-up on a Tokio `TcpStream` that hyper is not reading.
//!
//! Behind the `tokio` feature: watching a socket needs a reactor, and this one is
//! Tokio's (the servers the crate is wired to, axum's and hyper-util's, run on it).
//! The layer itself stays runtime-agnostic: it only sees the [`HangUp`] this makes.

use std::fmt;
use std::future::Future;
use std::io;
use std::net::Shutdown;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};

use http::{Request, Response};
use pin_project_lite::pin_project;
use tokio::io::Interest;
use tokio::net::TcpStream;
use tower_layer::Layer;
use tower_service::Service;

use crate::{BoxError, ClientGone, HangUp};

/// Resolves when the peer of a connection has hung up (FIN or RST), without
/// reading from the connection.
///
/// Hyper does not notice a hang-up while the handler has not asked for the body:
/// it is not reading the socket then. A request parked on the gate has not, so
/// without a watch its client's hang-up goes unseen until the wait ends, and is
/// then counted as a shed. `PeerWatch` holds a second handle (a `dup`) of the
/// connection's socket, registered with Tokio once a request on the connection
/// first parks, and waits for "read closed" readiness. Data arriving (a body sent without `Expect: 100-continue`, a
/// pipelined request) is not a hang-up: its readiness is cleared and the wait goes
/// on.
///
/// Wire it per connection:
///
/// - **axum**: `axum::serve(listener, app.into_make_service_with_connect_info::<PeerWatch>())`;
///   the layer finds it in `ConnectInfo<PeerWatch>` (features `axum` and `tokio`).
/// - **hyper-util**: `PeerWatch::new(&stream).layer()` around the service of that
///   connection ([`PeerWatchLayer`]); it also turns the "client gone" response into
///   a service error, so hyper closes the connection without writing a byte.
///
/// Forgotten (an axum router served with a plain `into_make_service()`), nothing
/// fails: the layer logs one `tracing` warning, at the first HTTP/1 request that
/// reaches the gate unwatched, naming this fix
/// ([`AdmitLayer::allow_unwatched`](crate::AdmitLayer::allow_unwatched) silences it).
///
/// HTTP/1 only: an HTTP/2 client cancels a request with a stream reset, which hyper
/// sees and answers by dropping the request's future.
///
/// # Examples
///
/// ```no_run
/// use admit_tower::PeerWatch;
/// use axum::{routing::post, Router};
///
/// # #[tokio::main] async fn main() -> std::io::Result<()> {
/// let app: Router = Router::new().route("/upload", post(|| async { "ok" }));
/// // ... .layer(AdmitLayer::new(gate, decide)) ...
/// let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
/// axum::serve(listener, app.into_make_service_with_connect_info::<PeerWatch>()).await
/// # }
/// ```
#[derive(Clone)]
pub struct PeerWatch {
    socket: Option<Arc<Mutex<Socket>>>,
    /// Made once per connection: each request's signal is a clone of it.
    hang_up: HangUp,
}

/// The duplicate of a connection's socket. It is registered with Tokio's reactor
/// only once a request on the connection first waits for its peer, so a
/// connection whose requests are all admitted at once never has the reactor
/// report its readiness twice.
enum Socket {
    Unregistered(std::net::TcpStream),
    Registered(Arc<TcpStream>),
    /// Its registration failed: it never fires.
    Lost,
}

/// Locks a connection's socket; a panic under the lock leaves the state whole.
fn lock(socket: &Mutex<Socket>) -> MutexGuard<'_, Socket> {
    socket.lock().unwrap_or_else(|e| e.into_inner())
}

/// The socket, registered with the reactor (at its first call); `None` if its
/// registration failed.
fn registered(socket: &Mutex<Socket>) -> Option<Arc<TcpStream>> {
    let mut socket = lock(socket);
    if let Socket::Unregistered(_) = &*socket {
        let Socket::Unregistered(std) = std::mem::replace(&mut *socket, Socket::Lost) else {
            unreachable!("matched above")
        };
        if let Ok(tokio) = TcpStream::from_std(std) {
            *socket = Socket::Registered(Arc::new(tokio));
        }
    }
    match &*socket {
        Socket::Registered(tokio) => Some(Arc::clone(tokio)),
        _ => None,
    }
}

/// Completes when the peer of `socket` has hung up; never without a socket.
async fn gone(socket: Option<Arc<Mutex<Socket>>>) {
    let Some(socket) = socket.as_deref().and_then(registered) else {
        return std::future::pending().await;
    };
    loop {
        match socket.ready(Interest::READABLE).await {
            Ok(ready) if ready.is_read_closed() || ready.is_error() => return,
            Ok(_) => {
                // Only data: clear that readiness and wait for the next event.
                let _ = socket.try_io(Interest::READABLE, || {
                    Err::<(), _>(io::ErrorKind::WouldBlock.into())
                });
            }
            Err(_) => return,
        }
    }
}

/// Shuts `socket` down both ways, registered or not.
fn abort(socket: Option<&Mutex<Socket>>) {
    let Some(socket) = socket else { return };
    let _ = match &*lock(socket) {
        Socket::Unregistered(std) => socket2::SockRef::from(std).shutdown(Shutdown::Both),
        Socket::Registered(tokio) => socket2::SockRef::from(&**tokio).shutdown(Shutdown::Both),
        Socket::Lost => Ok(()),
    };
}

impl PeerWatch {
    /// A watch on `stream`'s peer. Must be called inside a Tokio runtime with I/O
    /// enabled. If the socket cannot be duplicated (out of file descriptors), the
    /// watch never fires: hang-ups are then noticed only when the wait ends.
    #[must_use]
    pub fn new(stream: &TcpStream) -> Self {
        let socket = socket2::SockRef::from(stream)
            .try_clone()
            .ok()
            .and_then(|socket| {
                let std: std::net::TcpStream = socket.into();
                std.set_nonblocking(true).ok()?;
                Some(Arc::new(Mutex::new(Socket::Unregistered(std))))
            });
        let watched = socket.clone();
        let aborted = socket.clone();
        Self {
            socket,
            hang_up: HangUp::new(move || gone(watched.clone()))
                .with_abort(move || abort(aborted.as_deref())),
        }
    }

    /// Whether the socket is watched (it could be duplicated).
    #[must_use]
    pub fn is_watching(&self) -> bool {
        self.socket.is_some()
    }

    /// Completes when the peer has hung up; never, if the socket is not watched.
    pub fn gone(&self) -> impl Future<Output = ()> + Send + 'static {
        gone(self.socket.clone())
    }

    /// The runtime-agnostic signal the layer waits on, with [`abort`](Self::abort)
    /// as its way to abort the connection.
    #[must_use]
    pub fn hang_up(&self) -> HangUp {
        self.hang_up.clone()
    }

    /// Shuts the connection down both ways: hyper's next write or read on it
    /// fails, and hyper drops the connection. What the progress rule does to a
    /// response whose client stopped reading. Nothing, if the socket is not
    /// watched.
    pub fn abort(&self) {
        abort(self.socket.as_deref());
    }

    /// A layer for one hyper-util connection's service: puts this watch's
    /// [`HangUp`] in every request, and turns a response marked [`ClientGone`] into
    /// a service error, on which hyper closes the connection without writing.
    #[must_use]
    pub fn layer(&self) -> PeerWatchLayer {
        PeerWatchLayer {
            hang_up: self.hang_up(),
        }
    }
}

impl fmt::Debug for PeerWatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PeerWatch")
            .field("watching", &self.is_watching())
            .finish()
    }
}

/// For `axum::serve` on a plain `TcpListener`. (Not for a listener with
/// `tap_io`: axum's own impl for tapped listeners overlaps; set `TCP_NODELAY` in
/// `connect_info` instead, or use hyper-util and [`PeerWatch::layer`].)
#[cfg(feature = "axum")]
impl
    axum::extract::connect_info::Connected<axum::serve::IncomingStream<'_, tokio::net::TcpListener>>
    for PeerWatch
{
    fn connect_info(stream: axum::serve::IncomingStream<'_, tokio::net::TcpListener>) -> Self {
        Self::new(stream.io())
    }
}

/// From [`PeerWatch::layer`]: see there.
#[derive(Debug, Clone)]
pub struct PeerWatchLayer {
    hang_up: HangUp,
}

impl<Svc> Layer<Svc> for PeerWatchLayer {
    type Service = PeerWatchService<Svc>;

    fn layer(&self, inner: Svc) -> Self::Service {
        PeerWatchService {
            inner,
            hang_up: self.hang_up.clone(),
        }
    }
}

/// From [`PeerWatchLayer`]: see [`PeerWatch::layer`].
#[derive(Debug, Clone)]
pub struct PeerWatchService<Svc> {
    inner: Svc,
    hang_up: HangUp,
}

impl<Svc, B, RB> Service<Request<B>> for PeerWatchService<Svc>
where
    Svc: Service<Request<B>, Response = Response<RB>>,
    Svc::Error: Into<BoxError>,
{
    type Response = Response<RB>;
    type Error = BoxError;
    type Future = PeerWatchFuture<Svc::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, mut request: Request<B>) -> Self::Future {
        request.extensions_mut().insert(self.hang_up.clone());
        PeerWatchFuture {
            inner: self.inner.call(request),
        }
    }
}

pin_project! {
    /// The future of [`PeerWatchService`].
    #[derive(Debug)]
    #[must_use = "futures do nothing unless polled"]
    pub struct PeerWatchFuture<F> {
        #[pin]
        inner: F,
    }
}

impl<F, RB, E> Future for PeerWatchFuture<F>
where
    F: Future<Output = Result<Response<RB>, E>>,
    E: Into<BoxError>,
{
    type Output = Result<Response<RB>, BoxError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.project().inner.poll(cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(Err(e)) => Poll::Ready(Err(e.into())),
            Poll::Ready(Ok(response)) if response.extensions().get::<ClientGone>().is_some() => {
                Poll::Ready(Err(Box::new(ClientGone)))
            }
            Poll::Ready(Ok(response)) => Poll::Ready(Ok(response)),
        }
    }
}
