//! Refused requests: the `503` a shed, an oversized request or a closed gate gets,
//! and the nothing a client that went away gets.

use std::fmt;

use admit::GateError;
use bytes::Bytes;
use http::header::{CONTENT_TYPE, RETRY_AFTER};
use http::{Response, StatusCode};

/// The status written to logs for a client that hung up while parked (nginx's
/// "client closed request"). It never reaches the client: the response carrying it
/// has a body that fails at once, and hyper closes the connection instead of
/// finishing it.
pub const CLIENT_CLOSED_REQUEST: u16 = 499;

/// The answer [`Admit`](crate::Admit) writes for a refused request unless
/// [`AdmitLayer::on_reject`](crate::AdmitLayer::on_reject) replaces it; `None` for
/// [`GateError::Cancelled`], to which nothing is written.
///
/// Status and `Retry-After` are [`admit_http::response_parts`]: `503` for
/// [`GateError::Busy`] (with `Retry-After`, whole seconds rounded up, never 0),
/// [`GateError::ExceedsCapacity`] and [`GateError::Closed`] (without it). The body
/// is the error's one-line message, as `text/plain`.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use admit::{GateError, ShedReason};
///
/// let busy = GateError::Busy {
///     retry_after: Duration::from_millis(1500),
///     reason: ShedReason::WaitBudget,
/// };
/// let response = admit_tower::default_response(&busy).unwrap();
/// assert_eq!(response.status(), 503);
/// assert_eq!(response.headers()["retry-after"], "2");
///
/// assert!(admit_tower::default_response(&GateError::Cancelled).is_none());
/// ```
#[must_use]
pub fn default_response(error: &GateError) -> Option<Response<Bytes>> {
    let (status, retry_after) = admit_http::response_parts(error)?;
    let mut response = Response::new(Bytes::from(format!("{error}\n")));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(
        CONTENT_TYPE,
        http::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    if let Some(value) = retry_after {
        headers.insert(RETRY_AFTER, value);
    }
    Some(response)
}

/// The answer to a request the progress rule cut before a response started:
/// `408 Request Timeout` with `Connection: close` (the rest of the body will not
/// be read), the reason in the body.
pub(crate) fn cut_response(reason: admit::CutReason) -> Response<Bytes> {
    let mut response = Response::new(Bytes::from(format!("{}\n", crate::BodyCut::new(reason))));
    *response.status_mut() = StatusCode::REQUEST_TIMEOUT;
    let headers = response.headers_mut();
    headers.insert(
        CONTENT_TYPE,
        http::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    headers.insert(
        http::header::CONNECTION,
        http::HeaderValue::from_static("close"),
    );
    response
}

/// A client hung up while its request was parked: nothing is to be written.
///
/// Used three ways: as the error of the body of the response that stands for
/// "nothing" (so hyper closes the connection rather than finish it), as an
/// extension on that response (so a server loop can spot it, as
/// `PeerWatch::layer` does), and as the error a connection-level
/// service returns so hyper never writes at all.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct ClientGone;

impl fmt::Display for ClientGone {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("the client hung up while waiting for admission: nothing is written")
    }
}

impl std::error::Error for ClientGone {}

/// A [`GateError`] as an HTTP answer, for handlers that call the gate themselves.
///
/// `GateError` cannot become an axum response in your crate (both the type and
/// axum's `IntoResponse` are foreign there), so `?` would not work on it in a
/// handler. `Rejection` is `From<GateError>` and, with the `axum` feature,
/// `IntoResponse`: the same answer as [`default_response`], and for
/// [`GateError::Cancelled`] a response marked [`ClientGone`] whose body fails at
/// once, so hyper closes the connection without finishing it.
///
/// # Examples
///
/// ```
/// # #[cfg(feature = "axum")] {
/// use admit_tower::Rejection;
/// use axum::extract::State;
///
/// admit::sources! { pub enum Route { Export => "export" } }
/// type Gate = admit_tokio::Gate<Route, ()>;
///
/// async fn export(State(gate): State<Gate>) -> Result<String, Rejection> {
///     let permit = gate.acquire(1, Route::Export).await?; // 503 + Retry-After on a shed
///     Ok(format!("exported with {} unit(s)\n", permit.units()))
/// }
/// # let _ = export;
/// # }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Rejection {
    error: GateError,
}

impl Rejection {
    /// The gate's error.
    #[must_use]
    pub const fn error(&self) -> GateError {
        self.error
    }

    /// The answer, as [`default_response`]; `None` for a client that has gone.
    #[must_use]
    pub fn response(&self) -> Option<Response<Bytes>> {
        default_response(&self.error)
    }
}

impl From<GateError> for Rejection {
    fn from(error: GateError) -> Self {
        Self { error }
    }
}

impl fmt::Display for Rejection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.error, f)
    }
}

/// Transparent: the message is the gate error's own, so the gate error is not
/// reported again as the source (an error report would print it twice).
impl std::error::Error for Rejection {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        std::error::Error::source(&self.error)
    }
}

/// The response standing for "write nothing": status 499 (for logs), marked
/// [`ClientGone`], with a body that fails on its first poll.
pub(crate) fn gone_parts() -> http::response::Parts {
    let (mut parts, ()) = Response::new(()).into_parts();
    parts.status = StatusCode::from_u16(CLIENT_CLOSED_REQUEST).expect("499 is a valid status code");
    parts.extensions.insert(ClientGone);
    parts
}

#[cfg(feature = "axum")]
impl axum::response::IntoResponse for Rejection {
    fn into_response(self) -> axum::response::Response {
        match default_response(&self.error) {
            Some(response) => response.map(axum::body::Body::from),
            None => axum::response::Response::from_parts(
                gone_parts(),
                axum::body::Body::new(crate::AdmitBody::<http_body_util_empty::Empty>::gone()),
            ),
        }
    }
}

/// An empty body type to instantiate [`AdmitBody::gone`](crate::AdmitBody) with.
#[cfg(feature = "axum")]
mod http_body_util_empty {
    use std::convert::Infallible;
    use std::pin::Pin;
    use std::task::{Context, Poll};

    use bytes::Bytes;
    use http_body::{Body, Frame};

    pub(crate) struct Empty;

    impl Body for Empty {
        type Data = Bytes;
        type Error = Infallible;

        fn poll_frame(
            self: Pin<&mut Self>,
            _: &mut Context<'_>,
        ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
            Poll::Ready(None)
        }
    }
}
