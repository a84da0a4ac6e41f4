//! The `Retry-After` a shed carries: an exponentially weighted average of hold times
//! (weight 1/8 for each new sample), scaled by `(capacity + waiters) / capacity` and
//! clamped to the configured bounds.
// Needs the `alloc` feature (the feature powerset builds every test target).
#![cfg(feature = "alloc")]

mod support;

use std::future::Future;
use std::task::{Context, Waker};
use std::time::Duration;

use admit::Gate;
use support::{ManualTimer, Src};

type TestGate = Gate<Src, ManualTimer, ()>;

fn secs(s: f64) -> Duration {
    Duration::from_secs_f64(s)
}

fn gate(capacity: usize, min: Duration, max: Duration, timer: &ManualTimer) -> TestGate {
    Gate::builder(capacity)
        .retry_after_bounds(min, max)
        .timer(timer.clone())
        .build()
        .unwrap()
}

/// Holds one unit of `gate` for `d` of the manual clock.
fn hold(gate: &TestGate, timer: &ManualTimer, d: Duration) {
    let permit = gate.try_acquire(1, Src::Upload).unwrap();
    timer.advance(d);
    drop(permit);
}

const WIDE: (Duration, Duration) = (Duration::from_millis(1), Duration::from_secs(3600));

#[test]
fn the_average_follows_each_hold_by_an_eighth_of_the_difference() {
    let timer = ManualTimer::new();
    let gate = gate(2, WIDE.0, WIDE.1, &timer);
    assert_eq!(gate.retry_after(), WIDE.0, "no hold seen yet: the minimum");
    let steps = [
        (8.0, 8.0, "the first hold is the average"),
        (16.0, 9.0, "8 + (16 - 8) / 8"),
        (1.0, 8.0, "9 - (9 - 1) / 8"),
        (0.0, 7.0, "8 - (8 - 0) / 8"),
        (7.0, 7.0, "a sample equal to the average keeps it"),
    ];
    for (held, average, why) in steps {
        hold(&gate, &timer, secs(held));
        assert_eq!(gate.retry_after(), secs(average), "{why}");
    }
}

#[test]
fn the_average_scales_with_the_queue_over_the_capacity() {
    let timer = ManualTimer::new();
    let gate = gate(4, WIDE.0, WIDE.1, &timer);
    let permits: Vec<_> = (0..4)
        .map(|_| gate.try_acquire(1, Src::Upload).unwrap())
        .collect();
    timer.advance(secs(4.0));
    drop(permits); // four holds of 4 s: the average is 4 s
    assert_eq!(gate.retry_after(), secs(4.0), "4 s × (4 + 0) / 4");

    let all = gate.try_acquire(4, Src::Upload).unwrap();
    let mut waiters: Vec<_> = (0..2)
        .map(|_| Box::pin(gate.acquire(1, Src::Mirror)))
        .collect();
    for w in &mut waiters {
        assert!(w
            .as_mut()
            .poll(&mut Context::from_waker(Waker::noop()))
            .is_pending());
    }
    assert_eq!(gate.waiters(), 2);
    assert_eq!(gate.retry_after(), secs(6.0), "4 s × (4 + 2) / 4");
    drop(waiters);
    drop(all);
}

#[test]
fn the_suggestion_is_clamped_to_the_bounds() {
    let (min, max) = (Duration::from_secs(2), Duration::from_secs(5));
    let timer = ManualTimer::new();
    let short = gate(1, min, max, &timer);
    hold(&short, &timer, Duration::from_millis(500));
    assert_eq!(short.retry_after(), min, "0.5 s raised to the minimum");
    let long = gate(1, min, max, &timer);
    hold(&long, &timer, Duration::from_secs(30));
    assert_eq!(long.retry_after(), max, "30 s cut to the maximum");
}

#[test]
fn a_hold_too_long_to_count_saturates_instead_of_erasing_the_average() {
    let (min, max) = (Duration::from_secs(2), Duration::from_secs(5));
    let timer = ManualTimer::new();
    let gate = gate(1, min, max, &timer);
    hold(&gate, &timer, Duration::MAX);
    assert_eq!(
        gate.retry_after(),
        max,
        "the longest hold there is: the maximum"
    );
}
