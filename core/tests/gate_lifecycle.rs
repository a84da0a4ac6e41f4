//! The gate's lifecycle on a manual clock: drain (and what a grace period cuts, per
//! source), resize (with the `max_units` floor, the observer told the capacity), a
//! bounded queue (`max_waiters`, shed with its own reason), gate permits split,
//! merged and forgotten (the observer told once per unit), the blocking acquire, and
//! the memory-limit follower.
// Needs the `std` feature (the feature powerset builds every test target).
#![cfg(feature = "std")]

mod support;

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use admit::{Capacity, ConfigError, Gate, GateError, GatePermit, ShedReason, ThreadTimer};
use futures_lite::future::{block_on, poll_once};
use support::{Event, ManualTimer, Recorder, Src};

type TestGate = Gate<Src, ManualTimer, Arc<Recorder>>;

const BUDGET: Duration = Duration::from_secs(5);

fn gate_with(
    capacity: impl Into<Capacity>,
    configure: impl FnOnce(
        admit::GateBuilder<Src, ManualTimer, Arc<Recorder>>,
    ) -> admit::GateBuilder<Src, ManualTimer, Arc<Recorder>>,
) -> (TestGate, ManualTimer, Arc<Recorder>) {
    let timer = ManualTimer::new();
    let rec = Recorder::new();
    let builder = Gate::builder(capacity)
        .wait_budget(BUDGET)
        .max_units(2)
        .timer(timer.clone())
        .observer(Arc::clone(&rec));
    let gate = configure(builder).build().expect("valid config");
    (gate, timer, rec)
}

fn gate(capacity: usize) -> (TestGate, ManualTimer, Arc<Recorder>) {
    gate_with(capacity, |b| b)
}

/// Polls once; `None` while pending.
fn poll<F: Future + Unpin>(f: &mut F) -> Option<F::Output> {
    block_on(poll_once(f))
}

fn take(gate: &TestGate, units: usize, src: Src) -> GatePermit<Src> {
    block_on(gate.acquire(units, src)).expect("units free")
}

#[test]
fn drain_closes_waits_for_the_last_unit_and_counts_no_shed() {
    let (gate, timer, rec) = gate(4);
    let upload = take(&gate, 2, Src::Upload);
    let mirror = take(&gate, 1, Src::Mirror);
    let mut parked = Box::pin(gate.acquire(2, Src::Upload));
    assert!(poll(&mut parked).is_none());

    let mut drain = Box::pin(gate.drain(Duration::from_secs(30)));
    assert!(poll(&mut drain).is_none());
    assert!(gate.is_closed());
    assert_eq!(poll(&mut parked).unwrap().unwrap_err(), GateError::Closed);
    assert_eq!(
        block_on(gate.acquire(1, Src::Mirror)).unwrap_err(),
        GateError::Closed
    );
    assert_eq!(
        gate.held_by_source(),
        vec![(Src::Upload, 2), (Src::Mirror, 1)]
    );

    timer.advance(Duration::from_secs(10));
    drop(upload);
    assert!(poll(&mut drain).is_none(), "the mirror unit is still out");
    drop(mirror);
    assert_eq!(poll(&mut drain), Some(Ok(())));
    assert_eq!(rec.total_sheds(), 0, "a drain sheds nobody");
}

#[test]
fn a_drain_past_its_grace_period_reports_what_it_cut_per_source() {
    let (gate, timer, _rec) = gate(4);
    let upload = take(&gate, 1, Src::Upload);
    let mirror = take(&gate, 2, Src::Mirror);
    let also_upload = take(&gate, 1, Src::Upload);
    drop(also_upload);

    let mut drain = Box::pin(gate.drain(Duration::from_secs(30)));
    assert!(poll(&mut drain).is_none());
    timer.advance(Duration::from_secs(29));
    assert!(poll(&mut drain).is_none());
    timer.advance(Duration::from_secs(1));
    let cut = poll(&mut drain).unwrap().unwrap_err();
    assert_eq!(cut.held(), &[(Src::Upload, 1), (Src::Mirror, 2)]);
    assert_eq!(cut.units(), 3);
    assert_eq!(
        cut.to_string(),
        "drain cut short with 3 units still held: upload 1, mirror 2"
    );
    drop((upload, mirror));
    assert_eq!(gate.in_use(), 0);
}

#[test]
fn resize_grows_and_shrinks_within_the_floor_and_tells_the_observer() {
    let (gate, _timer, rec) = gate(4);
    let held = take(&gate, 2, Src::Upload);
    let mut waiter = Box::pin(gate.acquire(2, Src::Mirror));
    let _ = take(&gate, 2, Src::Mirror); // taken and dropped: back to 2 in use
    let blocker = take(&gate, 2, Src::Mirror);
    assert!(poll(&mut waiter).is_none());

    assert_eq!(gate.resize(6), Ok(4));
    assert_eq!(gate.capacity(), 6);
    let granted = poll(&mut waiter).expect("grown: granted").unwrap();

    assert_eq!(gate.resize(2), Ok(6)); // 6 in use: nothing new until 4 return
    assert!(matches!(
        gate.try_acquire(1, Src::Upload),
        Err(GateError::Busy { .. })
    ));
    drop((held, blocker));
    assert_eq!(gate.in_use(), 2);
    assert!(gate.in_use() <= gate.capacity());
    assert!(matches!(
        gate.try_acquire(1, Src::Upload),
        Err(GateError::Busy { .. })
    ));
    drop(granted);
    assert_eq!(gate.in_use(), 0);
    assert!(gate.try_acquire(2, Src::Upload).is_ok());

    assert_eq!(
        gate.resize(1),
        Err(ConfigError::CapacityBelowMaxUnits {
            capacity: 1,
            max_units: 2
        })
    );
    // A memory-derived capacity is floored at `max_units`, as at build.
    assert_eq!(
        gate.resize(Capacity::from_memory_budget(1 << 20, 1 << 20)),
        Ok(2)
    );
    assert_eq!(gate.capacity(), 2);
    let capacities: Vec<_> = rec
        .events()
        .into_iter()
        .filter_map(|e| match e {
            Event::Capacity(c) => Some(c),
            _ => None,
        })
        .collect();
    // The last resize kept the capacity at 2 but put it over a budget of 1 unit:
    // that is news too (`CapacityEvent::budget_units`).
    assert_eq!(
        capacities,
        vec![6, 2, 2],
        "told once per change, never for a no-op"
    );
}

#[test]
fn a_closed_gate_refuses_a_resize_and_keeps_its_capacity() {
    let (gate, _timer, rec) = gate(4);
    let held = take(&gate, 2, Src::Upload);
    gate.close();
    assert_eq!(gate.resize(6), Err(ConfigError::Closed));
    assert_eq!(gate.resize(2), Err(ConfigError::Closed));
    // A capacity the builder would refuse is refused as such first.
    assert_eq!(gate.resize(0), Err(ConfigError::ZeroCapacity));
    assert_eq!(gate.capacity(), 4);
    assert!(!rec.events().iter().any(|e| matches!(e, Event::Capacity(_))));
    assert_eq!(
        ConfigError::Closed.to_string(),
        "the gate is closed: a resize would configure nothing"
    );
    drop(held);
}

#[test]
fn a_full_queue_sheds_at_once_with_its_own_reason() {
    let (gate, timer, rec) = gate_with(2, |b| b.max_waiters(1));
    let held = take(&gate, 2, Src::Upload);
    let mut first = Box::pin(gate.acquire(1, Src::Upload));
    assert!(poll(&mut first).is_none());
    let second = poll(&mut Box::pin(gate.acquire(1, Src::Mirror))).expect("shed at once");
    assert!(
        matches!(second, Err(GateError::Busy { retry_after, .. }) if retry_after > Duration::ZERO)
    );
    assert_eq!(gate.waiters(), 1, "the shed request left the queue");
    assert_eq!(rec.events().last(), Some(&Event::QueueFull("mirror", 1)));

    // The parked one sheds on its budget, counted with the other reason.
    timer.advance(BUDGET);
    assert!(matches!(
        poll(&mut first),
        Some(Err(GateError::Busy { .. }))
    ));
    assert!(rec.events().contains(&Event::Shed("upload", 1, BUDGET)));
    // Its place is free again.
    let mut third = Box::pin(gate.acquire(1, Src::Upload));
    assert!(poll(&mut third).is_none());
    drop(held);
    assert!(poll(&mut third).unwrap().is_ok());
}

#[test]
fn zero_max_waiters_never_parks() {
    let (gate, _timer, rec) = gate_with(2, |b| b.max_waiters(0));
    let held = take(&gate, 2, Src::Upload);
    let shed = poll(&mut Box::pin(gate.acquire(1, Src::Upload))).expect("at once");
    assert!(matches!(shed, Err(GateError::Busy { .. })));
    assert_eq!(
        (gate.waiters(), rec.total_sheds()),
        (0, 0),
        "counted as queue full"
    );
    assert_eq!(rec.events().last(), Some(&Event::QueueFull("upload", 1)));
    drop(held);
    assert!(
        take(&gate, 2, Src::Upload).units() == 2,
        "free units need no place"
    );
}

#[test]
fn split_merge_and_forget_tell_the_observer_once_per_unit() {
    let (gate, _timer, rec) = gate(4);
    let mut upload = take(&gate, 2, Src::Upload);
    let half = upload.split(1).expect("2 units split");
    assert!(
        upload.split(1).is_none(),
        "one unit left: nothing to split off"
    );
    let mirror = take(&gate, 1, Src::Mirror);
    upload.merge(mirror); // now reported as an upload
    assert_eq!(gate.held_by_source(), vec![(Src::Upload, 3)]);
    drop(half);
    drop(upload);
    let released: usize = rec
        .events()
        .into_iter()
        .filter_map(|e| match e {
            Event::Release { units, .. } => Some(units),
            _ => None,
        })
        .sum();
    assert_eq!(released, 3, "every admitted unit released exactly once");

    let forgotten = take(&gate, 2, Src::Mirror);
    forgotten.forget();
    assert_eq!((gate.capacity(), gate.in_use()), (2, 0));
    let tail: Vec<_> = rec.events().into_iter().rev().take(2).collect();
    assert!(matches!(
        tail[1],
        Event::Release {
            source: "mirror",
            units: 2,
            ..
        }
    ));
    assert_eq!(tail[0], Event::Capacity(2));
    assert!(gate.held_by_source().is_empty());
}

#[test]
fn a_blocking_acquire_queues_with_async_callers_and_sheds_on_its_budget() {
    let timer = ManualTimer::new();
    let rec = Recorder::new();
    let gate: TestGate = Gate::builder(1)
        .wait_budget(Duration::from_millis(20))
        .timer(timer)
        .observer(Arc::clone(&rec))
        .build()
        .unwrap();
    let held = gate.try_acquire(1, Src::Upload).unwrap();
    // The budget runs on the system clock: the unit stays held past it.
    let shed = gate.acquire_blocking(1, Src::Mirror).unwrap_err();
    assert_eq!(shed.shed_reason(), Some(ShedReason::WaitBudget));
    // A deadline after the budget's end leaves the budget in charge.
    let later = Instant::now() + Duration::from_secs(3600);
    let shed = gate
        .acquire_blocking_until(1, Src::Mirror, later)
        .unwrap_err();
    assert_eq!(shed.shed_reason(), Some(ShedReason::WaitBudget));
    assert_eq!(rec.total_sheds(), 2);
    assert_eq!(gate.waiters(), 0);
    drop(held);
    let permit = gate.acquire_blocking(1, Src::Mirror).expect("free");
    assert_eq!(permit.source(), Src::Mirror);
    drop(permit);
    assert_eq!(
        gate.acquire_blocking(2, Src::Mirror).unwrap_err(),
        GateError::ExceedsMaxUnits {
            requested: 2,
            max_units: 1
        }
    );
}

#[test]
fn a_blocking_deadline_before_the_budget_sheds_as_a_ceiling() {
    let (gate, _timer, rec) = gate(2);
    let held = gate.try_acquire(2, Src::Upload).unwrap();
    // Already past: shed at once, without parking, and counted as a ceiling.
    let shed = gate
        .acquire_blocking_until(1, Src::Mirror, Instant::now())
        .unwrap_err();
    assert_eq!(shed.shed_reason(), Some(ShedReason::Ceiling));
    assert_eq!(
        rec.events().last(),
        Some(&Event::Shed("mirror", 1, Duration::ZERO))
    );
    // A short one (the budget is 5 s): shed once the deadline passes.
    let soon = Instant::now() + Duration::from_millis(10);
    let shed = gate
        .acquire_blocking_until(1, Src::Mirror, soon)
        .unwrap_err();
    assert!(Instant::now() >= soon);
    assert_eq!(shed.shed_reason(), Some(ShedReason::Ceiling));
    assert_eq!((rec.total_sheds(), gate.waiters()), (2, 0));
    assert_eq!(rec.shed_reasons(), [ShedReason::Ceiling; 2]);
    // A past deadline does not turn away a request that is granted at once.
    drop(held);
    let permit = gate
        .acquire_blocking_until(2, Src::Mirror, Instant::now())
        .expect("free");
    assert_eq!(permit.units(), 2);
}

#[test]
fn a_thread_only_gate_runs_on_a_thread_timer_and_drains_blocking() {
    let gate = Gate::builder(2)
        .max_units(2)
        .timer(ThreadTimer::new())
        .build()
        .unwrap();
    let held = gate.acquire_blocking(2, Src::Upload).unwrap();
    let blocked = {
        let gate = gate.clone();
        std::thread::spawn(move || gate.acquire_blocking(1, Src::Mirror).map(|p| p.units()))
    };
    // Hand-off: the thread is parked (its budget is the default 5 s).
    while gate.waiters() < 1 && !blocked.is_finished() {
        std::thread::yield_now();
    }
    drop(held);
    assert_eq!(blocked.join().unwrap(), Ok(1));
    // Drained with a unit out: cut short after the grace period, the unit named.
    let out = gate.acquire_blocking(1, Src::Mirror).unwrap();
    let cut = gate.drain_blocking(Duration::from_millis(10)).unwrap_err();
    assert_eq!(cut.held(), &[(Src::Mirror, 1)]);
    assert!(gate.is_closed());
    drop(out);
    assert_eq!(gate.drain_blocking(Duration::ZERO), Ok(()));
}

#[test]
#[should_panic(expected = "admit::ThreadTimer cannot sleep in an async task")]
fn an_async_acquire_that_parks_on_a_thread_timer_panics_with_the_fix() {
    let gate = Gate::builder(1).timer(ThreadTimer::new()).build().unwrap();
    let _held = gate.try_acquire(1, Src::Upload).unwrap();
    let mut parked = Box::pin(gate.acquire(1, Src::Mirror));
    let _ = poll(&mut parked);
}

#[test]
fn a_blocking_acquire_waits_for_a_release_within_its_budget() {
    let (gate, _timer, rec) = gate(2);
    let held = gate.try_acquire(2, Src::Upload).unwrap();
    let blocked = {
        let gate = gate.clone();
        std::thread::spawn(move || gate.acquire_blocking(1, Src::Mirror).map(|p| p.source()))
    };
    // Hand-off: the thread is parked in the queue (its budget is 5 s), or it gave
    // up at once, which the join below reports.
    while gate.waiters() < 1 && !blocked.is_finished() {
        std::thread::yield_now();
    }
    drop(held);
    assert_eq!(
        blocked.join().unwrap().expect("granted by the release"),
        Src::Mirror
    );
    assert_eq!(rec.total_sheds(), 0);
    assert_eq!((gate.in_use(), gate.waiters()), (0, 0));
}

#[test]
fn the_memory_follower_resizes_on_each_interval_until_closed() {
    let (gate, timer, rec) = gate(4);
    let limit = Arc::new(AtomicU64::new(8 << 20));
    let read = {
        let limit = Arc::clone(&limit);
        move || Some(limit.load(Ordering::SeqCst))
    };
    // Half the limit, 1 MiB per unit, floored at max_units (2).
    let mut follower = Box::pin(gate.follow_limit(Duration::from_secs(30), read, |limit| {
        Capacity::from_memory_budget(limit / 2, 1 << 20)
    }));
    assert!(poll(&mut follower).is_none());
    timer.advance(Duration::from_secs(30));
    assert!(poll(&mut follower).is_none());
    assert_eq!(gate.capacity(), 4, "8 MiB / 2 / 1 MiB: unchanged");

    limit.store(32 << 20, Ordering::SeqCst);
    timer.advance(Duration::from_secs(30));
    assert!(poll(&mut follower).is_none());
    assert_eq!(gate.capacity(), 16);

    limit.store(1 << 20, Ordering::SeqCst);
    timer.advance(Duration::from_secs(30));
    assert!(poll(&mut follower).is_none());
    assert_eq!(gate.capacity(), 2, "the max_units floor holds");
    assert!(rec.events().contains(&Event::Capacity(16)));

    gate.close();
    timer.advance(Duration::from_secs(30));
    assert_eq!(
        poll(&mut follower),
        Some(()),
        "ends once the gate is closed"
    );
}
