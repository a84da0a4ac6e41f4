//! `GateError` → HTTP status and `Retry-After`, variant by variant.

use std::time::Duration;

use admit::{ExceedsCapacity, GateError};
use admit_http::{response_parts, retry_after, status};
use http::{HeaderValue, StatusCode};

fn busy(d: Duration) -> GateError {
    GateError::Busy {
        retry_after: d,
        reason: admit::ShedReason::WaitBudget,
    }
}

fn header_of(e: &GateError) -> String {
    let value = retry_after(e).expect("Busy carries Retry-After");
    value.to_str().unwrap().to_owned()
}

#[test]
fn busy_is_503_with_retry_after() {
    let e = busy(Duration::from_secs(5));
    assert_eq!(
        response_parts(&e),
        Some((
            StatusCode::SERVICE_UNAVAILABLE,
            Some(HeaderValue::from_static("5"))
        ))
    );
}

#[test]
fn retry_after_rounds_up_to_whole_seconds() {
    assert_eq!(header_of(&busy(Duration::from_millis(1200))), "2");
    assert_eq!(header_of(&busy(Duration::from_secs(5))), "5");
    assert_eq!(header_of(&busy(Duration::from_nanos(5_000_000_001))), "6");
}

#[test]
fn retry_after_is_never_zero() {
    assert_eq!(header_of(&busy(Duration::from_millis(300))), "1");
    assert_eq!(header_of(&busy(Duration::from_nanos(1))), "1");
    assert_eq!(header_of(&busy(Duration::ZERO)), "1");
}

#[test]
fn exceeds_capacity_is_503_without_retry_after() {
    let e = GateError::ExceedsCapacity(ExceedsCapacity {
        requested: 3,
        capacity: 2,
    });
    assert_eq!(status(&e), Some(StatusCode::SERVICE_UNAVAILABLE));
    assert_eq!(retry_after(&e), None);
    assert_eq!(
        response_parts(&e),
        Some((StatusCode::SERVICE_UNAVAILABLE, None))
    );
}

#[test]
fn exceeds_max_units_is_503_without_retry_after() {
    let e = GateError::ExceedsMaxUnits {
        requested: 3,
        max_units: 2,
    };
    assert_eq!(
        response_parts(&e),
        Some((StatusCode::SERVICE_UNAVAILABLE, None))
    );
}

#[test]
fn closed_is_503_without_retry_after() {
    let e = GateError::Closed;
    assert_eq!(
        response_parts(&e),
        Some((StatusCode::SERVICE_UNAVAILABLE, None))
    );
}

#[test]
fn cancelled_writes_nothing() {
    let e = GateError::Cancelled;
    assert_eq!(status(&e), None);
    assert_eq!(retry_after(&e), None);
    assert_eq!(response_parts(&e), None);
}
