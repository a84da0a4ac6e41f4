//! The `Retry-After` a shed carries: an exponentially weighted average of hold times
//! (weight 1/8 for each new sample), scaled by `(capacity + waiters) / capacity` and
//! clamped to the configured bounds.

mod support;

use std::future::Future;
use std::time::Duration;

use admit::Gate;
use support::{ManualTimer, Src};

fn secs(s: f64) -> Duration {
    Duration::from_secs_f64(s)
}

#[test]
fn the_average_follows_each_hold_by_an_eighth_of_the_difference() {
    let timer = ManualTimer::new();
    let gate = Gate::<Src, _, _>::builder(2)
        .retry_after_bounds(Duration::from_millis(1), Duration::from_secs(3600))
        .timer(timer.clone())
        .build()
        .unwrap();
    let hold = |d: Duration| {
        let permit = gate.try_acquire(1, Src::Upload).unwrap();
        timer.advance(d);
        drop(permit);
    };

    assert_eq!(
        gate.retry_after(),
        Duration::from_millis(1),
        "no hold seen yet: the minimum"
    );
    hold(secs(8.0));
    assert_eq!(
        gate.retry_after(),
        secs(8.0),
        "the first hold is the average"
    );
    hold(secs(16.0));
    assert_eq!(gate.retry_after(), secs(9.0), "8 + (16 - 8) / 8");
    hold(secs(1.0));
    assert_eq!(gate.retry_after(), secs(8.0), "9 - (9 - 1) / 8");
    hold(Duration::ZERO);
    assert_eq!(gate.retry_after(), secs(7.0), "8 - (8 - 0) / 8");
    hold(secs(7.0));
    assert_eq!(
        gate.retry_after(),
        secs(7.0),
        "a sample equal to the average keeps it"
    );
}

#[test]
fn the_average_scales_with_the_queue_over_the_capacity() {
    let timer = ManualTimer::new();
    let gate = Gate::<Src, _, _>::builder(4)
        .retry_after_bounds(Duration::from_millis(1), Duration::from_secs(3600))
        .timer(timer.clone())
        .build()
        .unwrap();
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
        let waker = std::task::Waker::noop();
        let poll = w.as_mut().poll(&mut std::task::Context::from_waker(waker));
        assert!(poll.is_pending());
    }
    assert_eq!(gate.waiters(), 2);
    assert_eq!(gate.retry_after(), secs(6.0), "4 s × (4 + 2) / 4");
    drop(waiters);
    drop(all);
}

#[test]
fn the_suggestion_is_clamped_to_the_bounds() {
    let timer = ManualTimer::new();
    let gate = Gate::<Src, _, _>::builder(1)
        .retry_after_bounds(Duration::from_secs(2), Duration::from_secs(5))
        .timer(timer.clone())
        .build()
        .unwrap();
    let hold = |d: Duration| {
        let permit = gate.try_acquire(1, Src::Upload).unwrap();
        timer.advance(d);
        drop(permit);
    };
    hold(Duration::from_millis(500));
    assert_eq!(
        gate.retry_after(),
        Duration::from_secs(2),
        "0.5 s raised to the minimum"
    );
    let gate_long = Gate::<Src, _, _>::builder(1)
        .retry_after_bounds(Duration::from_secs(2), Duration::from_secs(5))
        .timer(timer.clone())
        .build()
        .unwrap();
    let permit = gate_long.try_acquire(1, Src::Upload).unwrap();
    timer.advance(Duration::from_secs(30));
    drop(permit);
    assert_eq!(
        gate_long.retry_after(),
        Duration::from_secs(5),
        "30 s cut to the maximum"
    );
}
