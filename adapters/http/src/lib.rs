#![doc = include_str!("../README.md")]

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

/// The status to answer `error` with: `None` for [`GateError::Cancelled`], to
/// which nothing is written; `503 Service Unavailable` for every other variant
/// (the table in the [crate docs](crate)).
#[must_use]
pub fn status(error: &GateError) -> Option<StatusCode> {
    match error {
        GateError::Cancelled => None,
        // Every refusal, and any a later version adds: the server cannot serve the
        // request now.
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
