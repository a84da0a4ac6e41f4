//! Maps an [`admit::GateError`] to the HTTP response a server should write: a status
//! code and, for a shed, a `Retry-After` header.
//!
//! ```
//! use std::time::Duration;
//! use admit::GateError;
//! use http::{header::RETRY_AFTER, Response, StatusCode};
//!
//! let err = GateError::Busy { retry_after: Duration::from_millis(1200) };
//! let (status, retry_after) = admit_http::response_parts(&err).expect("a shed is answered");
//! let mut builder = Response::builder().status(status);
//! if let Some(value) = retry_after {
//!     builder = builder.header(RETRY_AFTER, value);
//! }
//! let response = builder.body(err.to_string()).unwrap();
//! assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
//! assert_eq!(response.headers()[RETRY_AFTER], "2"); // whole seconds, rounded up
//!
//! // The caller went away: nothing is written.
//! assert_eq!(admit_http::response_parts(&GateError::Cancelled), None);
//! ```
//!
//! | [`GateError`] | status | `Retry-After` |
//! |---|---|---|
//! | `Busy { retry_after }` | 503 | `retry_after` in whole seconds, rounded up, never 0 |
//! | `ExceedsCapacity` | 503 | none: a server configuration fault, retrying will not help |
//! | `Closed` | 503 | none: the server is shutting down |
//! | `Cancelled` | nothing is written | — |
//!
//! The messages are the core's [`Display`](core::fmt::Display) of [`GateError`]; this
//! crate adds none of its own. `From<GateError> for std::io::Error` lives in the core.

use admit::{whole_seconds_up, GateError};
use http::{HeaderValue, StatusCode};

/// The status and optional `Retry-After` value to answer `error` with, or `None` when
/// nothing must be written ([`GateError::Cancelled`]: the caller has gone).
///
/// The `Retry-After` value is present for [`GateError::Busy`] only, as delta-seconds
/// (whole seconds, rounded up, at least 1), ready for
/// [`http::header::RETRY_AFTER`].
#[must_use]
pub fn response_parts(error: &GateError) -> Option<(StatusCode, Option<HeaderValue>)> {
    status(error).map(|status| (status, retry_after(error)))
}

/// The status to answer `error` with: `503 Service Unavailable` for
/// [`GateError::Busy`], [`GateError::ExceedsCapacity`] and [`GateError::Closed`];
/// `None` for [`GateError::Cancelled`], to which nothing is written.
#[must_use]
pub fn status(error: &GateError) -> Option<StatusCode> {
    match error {
        GateError::Cancelled => None,
        // Busy, ExceedsCapacity, Closed, and any refusal a later version adds: the
        // server cannot serve the request now.
        _ => Some(StatusCode::SERVICE_UNAVAILABLE),
    }
}

/// The `Retry-After` header value for `error`: for [`GateError::Busy`] its
/// `retry_after` in whole seconds, rounded up and never 0 (`1.2s` → `"2"`, `0.3s` →
/// `"1"`); `None` for every other variant.
#[must_use]
pub fn retry_after(error: &GateError) -> Option<HeaderValue> {
    error
        .retry_after()
        .map(|d| HeaderValue::from(whole_seconds_up(d)))
}
