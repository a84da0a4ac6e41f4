//! The `Retry-After` a shed carries: the estimated wait of a request of the same
//! units arriving at the shed, `(queued + units − available) × mean hold /
//! capacity`, within the configured bounds; the lower bound before any estimate.
// Needs the `alloc` feature (the feature powerset builds every test target).
#![cfg(feature = "alloc")]

mod support;

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use admit::{Gate, GateAcquire, GateError, GatePermit};
use support::{ManualTimer, Src};

type TestGate = Gate<Src, ManualTimer, ()>;

fn secs(s: f64) -> Duration {
    Duration::from_secs_f64(s)
}

/// Within a microsecond: the mean is an `f32` of seconds.
fn close(a: Duration, b: Duration) -> bool {
    a.abs_diff(b) <= Duration::from_micros(1)
}

/// A gate whose requests may take all of it.
fn gate(capacity: usize, min: Duration, max: Duration, timer: &ManualTimer) -> TestGate {
    Gate::builder(capacity)
        .max_units(capacity)
        .retry_after_bounds(min, max)
        .timer(timer.clone())
        .build()
        .unwrap()
}

/// `units` held for `d` of the manual clock, then released.
fn hold(gate: &TestGate, timer: &ManualTimer, units: usize, d: Duration) {
    let permit = gate.try_acquire(units, Src::Upload).unwrap();
    timer.advance(d);
    drop(permit);
}

fn take(gate: &TestGate, units: usize) -> GatePermit<Src> {
    gate.try_acquire(units, Src::Upload).unwrap()
}

fn poll<F: Future + ?Sized>(f: Pin<&mut F>) -> Poll<F::Output> {
    f.poll(&mut Context::from_waker(Waker::noop()))
}

/// Parks `n` acquires of `units` each.
fn park(
    gate: &TestGate,
    n: usize,
    units: usize,
) -> Vec<Pin<Box<GateAcquire<'_, Src, ManualTimer, ()>>>> {
    (0..n)
        .map(|_| {
            let mut w = Box::pin(gate.acquire(units, Src::Mirror));
            assert!(poll(w.as_mut()).is_pending());
            w
        })
        .collect()
}

const WIDE: (Duration, Duration) = (Duration::from_millis(1), Duration::from_secs(3600));

#[test]
fn before_any_hold_and_with_units_free_it_is_the_lower_bound() {
    let timer = ManualTimer::new();
    let gate = gate(2, WIDE.0, WIDE.1, &timer);
    assert_eq!(gate.estimated_wait(1), None, "no hold seen: no estimate");
    assert_eq!(gate.retry_after(1), WIDE.0);
    hold(&gate, &timer, 1, secs(8.0));
    assert_eq!(
        gate.estimated_wait(1),
        Some(Duration::ZERO),
        "a unit is free"
    );
    assert_eq!(gate.retry_after(1), WIDE.0);
}

#[test]
fn it_is_the_queue_ahead_and_the_request_over_the_pace_of_a_full_gate() {
    let timer = ManualTimer::new();
    let gate = gate(4, WIDE.0, WIDE.1, &timer);
    hold(&gate, &timer, 4, secs(4.0)); // one 4-unit hold: the mean hold of a unit is 4 s
    let _all = take(&gate, 4);
    // A full gate returns 4 units per 4 s: one per second.
    assert!(close(gate.retry_after(1), secs(1.0)));
    assert!(close(gate.retry_after(4), secs(4.0)), "judged by its size");
    let _parked = park(&gate, 2, 1);
    assert!(
        close(gate.retry_after(1), secs(3.0)),
        "(2 queued + 1) × 4 s / 4"
    );
    assert!(
        close(gate.retry_after(4), secs(6.0)),
        "(2 queued + 4) × 4 s / 4"
    );
}

#[test]
fn a_busy_carries_the_estimate_for_its_own_units_after_it_left_the_queue() {
    let timer = ManualTimer::new();
    let gate = gate(2, WIDE.0, WIDE.1, &timer);
    hold(&gate, &timer, 2, secs(2.0));
    let _all = take(&gate, 2);
    let mut parked = park(&gate, 2, 2);
    timer.advance(admit::GateBuilder::<Src, (), ()>::DEFAULT_WAIT_BUDGET);
    // The first leaves one 2-unit request behind it: (2 + 2) × 2 s / 2.
    match poll(parked[0].as_mut()) {
        Poll::Ready(Err(GateError::Busy { retry_after, .. })) => {
            assert!(close(retry_after, secs(4.0)))
        }
        other => panic!("{other:?}"),
    }
    match poll(parked[1].as_mut()) {
        Poll::Ready(Err(GateError::Busy { retry_after, .. })) => {
            assert!(close(retry_after, secs(2.0)))
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn the_estimate_follows_holds_getting_longer_and_shorter() {
    let timer = ManualTimer::new();
    let gate = gate(2, WIDE.0, WIDE.1, &timer);
    // One unit held throughout, the holds on the other: a 2-unit request waits
    // for one unit, half a mean hold.
    let _probe = take(&gate, 1);
    let mean = || gate.estimated_wait(2).unwrap() * 2;
    for _ in 0..32 {
        hold(&gate, &timer, 1, secs(1.0));
    }
    assert!(close(mean(), secs(1.0)));
    // Longer holds: the estimate climbs towards them, and the first long one does
    // not replace the mean.
    hold(&gate, &timer, 1, secs(5.0));
    assert!(
        close(mean(), secs(1.25)),
        "1 + (5 − 1) / 16, got {:?}",
        mean()
    );
    for _ in 0..64 {
        hold(&gate, &timer, 1, secs(5.0));
    }
    assert!(mean() > secs(4.9) && mean() <= secs(5.0), "{:?}", mean());
    // Shorter again.
    for _ in 0..64 {
        hold(&gate, &timer, 1, secs(0.5));
    }
    assert!(mean() >= secs(0.5) && mean() < secs(0.6), "{:?}", mean());
}

#[test]
fn the_estimate_follows_a_resize_at_once() {
    let timer = ManualTimer::new();
    let gate: TestGate = Gate::builder(4)
        .max_units(2)
        .retry_after_bounds(WIDE.0, WIDE.1)
        .timer(timer.clone())
        .build()
        .unwrap();
    let held = [take(&gate, 2), take(&gate, 2)];
    timer.advance(secs(4.0));
    drop(held);
    let _all = [take(&gate, 2), take(&gate, 2)];
    assert!(close(gate.retry_after(1), secs(1.0)));
    // Shrunk to 2 with all 4 held: the units retire as they come back, and the
    // gate returns 2 units per mean hold from then on.
    assert_eq!(gate.resize(2), Ok(4));
    assert!(close(gate.retry_after(1), secs(2.0)), "1 × 4 s / 2");
}

#[test]
fn the_suggestion_is_clamped_to_the_bounds() {
    let (min, max) = (Duration::from_secs(2), Duration::from_secs(5));
    let timer = ManualTimer::new();
    let short = gate(1, min, max, &timer);
    hold(&short, &timer, 1, Duration::from_millis(500));
    let _held = take(&short, 1);
    assert_eq!(short.retry_after(1), min, "0.5 s raised to the minimum");
    let long = gate(1, min, max, &timer);
    hold(&long, &timer, 1, Duration::from_secs(30));
    let _held = take(&long, 1);
    assert_eq!(long.retry_after(1), max, "30 s cut to the maximum");
}

#[test]
fn a_hold_too_long_to_count_saturates_instead_of_erasing_the_average() {
    let (min, max) = (Duration::from_secs(2), Duration::from_secs(5));
    let timer = ManualTimer::new();
    let gate = gate(1, min, max, &timer);
    hold(&gate, &timer, 1, Duration::MAX);
    let _held = take(&gate, 1);
    assert_eq!(
        gate.retry_after(1),
        max,
        "the longest hold there is: the maximum"
    );
}
