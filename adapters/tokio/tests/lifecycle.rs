//! The gate's lifecycle on Tokio's paused clock: drain at shutdown (complete, and
//! cut short by the grace period with what was still held, per source), live
//! capacity (grow serves the parked, shrink retires units as they return and grants
//! nothing past the new capacity), `max_waiters` (shed at once, told apart), permit
//! split / merge / forget (the observer told once per unit), the blocking acquire
//! from a thread in the same FIFO as async waiters, and the memory-limit follower.
//!
//! Every duration asserted is exact: virtual time moves only when the test advances
//! it or every task waits on a timer. The one real thread (the blocking acquire) is
//! ordered by hand-offs and by waiting for the queue to show it, never by sleeping.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

use admit::{
    AdmitEvent, Capacity, CapacityEvent, ConfigError, Gate, GateError, Observer, ReleaseEvent,
    ShedEvent, ShedReason, StartEvent,
};
use admit_tokio::TokioTimer;
use tokio::time::Instant;

admit::sources! {
    /// Call sites of the tests.
    enum Route {
        Upload => "upload",
        Mirror => "mirror",
        Scrub => "scrub",
    }
}

/// What the gate told its observer.
#[derive(Debug, Clone, PartialEq)]
enum Event {
    Admit(&'static str, usize, Duration),
    Release(&'static str, usize, Duration),
    Shed(&'static str, usize, Duration, ShedReason),
    Capacity(usize),
}

/// Records every event and keeps a ledger from them: units in use (+ at admit,
/// − at release) and the capacity in force (start, then `on_capacity`). Every
/// admission that takes the ledger above the capacity in force is written down as
/// a violation: nothing may be granted beyond it.
#[derive(Debug, Default)]
struct Recorder(Mutex<Ledger>);

#[derive(Debug, Default)]
struct Ledger {
    events: Vec<Event>,
    in_use: usize,
    capacity: usize,
    violations: Vec<String>,
}

impl Recorder {
    fn take(&self) -> Vec<Event> {
        std::mem::take(&mut self.0.lock().unwrap().events)
    }
    /// Units in use by the ledger, and the capacity the observer last heard.
    fn ledger(&self) -> (usize, usize) {
        let l = self.0.lock().unwrap();
        (l.in_use, l.capacity)
    }
    fn violations(&self) -> Vec<String> {
        self.0.lock().unwrap().violations.clone()
    }
}

impl Observer for Recorder {
    fn on_start(&self, event: &StartEvent<'_>) {
        self.0.lock().unwrap().capacity = event.capacity;
    }
    fn on_admit(&self, event: &AdmitEvent) {
        let (source, units) = (event.source, event.units);
        let mut l = self.0.lock().unwrap();
        l.in_use += units;
        if l.in_use > l.capacity {
            let v = format!(
                "{source} admitted {units}: {} in use > {}",
                l.in_use, l.capacity
            );
            l.violations.push(v);
        }
        l.events.push(Event::Admit(source, units, event.waited));
    }
    fn on_release(&self, event: &ReleaseEvent) {
        let mut l = self.0.lock().unwrap();
        l.in_use -= event.units;
        l.events
            .push(Event::Release(event.source, event.units, event.held));
    }
    fn on_shed(&self, event: &ShedEvent) {
        let mut l = self.0.lock().unwrap();
        l.events.push(Event::Shed(
            event.source,
            event.units,
            event.waited,
            event.reason,
        ));
    }
    fn on_capacity(&self, event: &CapacityEvent) {
        let mut l = self.0.lock().unwrap();
        l.capacity = event.capacity;
        l.events.push(Event::Capacity(event.capacity));
    }
}

const BUDGET: Duration = Duration::from_secs(5);

type TestGate = Gate<Route, TokioTimer, Arc<Recorder>>;

fn gate(capacity: usize, max_units: usize) -> (TestGate, Arc<Recorder>) {
    let recorder = Arc::new(Recorder::default());
    let gate = admit_tokio::gate(capacity)
        .wait_budget(BUDGET)
        .max_units(max_units)
        .observer(Arc::clone(&recorder))
        .build()
        .unwrap();
    (gate, recorder)
}

/// Runs other tasks until `gate` has `n` parked waiters. Never idles the runtime, so
/// the paused clock does not auto-advance meanwhile.
async fn until_waiters(gate: &TestGate, n: usize) {
    while gate.waiters() != n {
        tokio::task::yield_now().await;
    }
}

/// Units held, summed over the gate's per-source count: what `in_use()` reads too,
/// even above a lowered capacity.
fn held(gate: &TestGate) -> usize {
    gate.held_by_source().iter().map(|&(_, n)| n).sum()
}

// --- Drain --------------------------------------------------------------------

#[tokio::test(start_paused = true)]
async fn a_drain_closes_the_gate_and_completes_when_the_last_permit_drops() {
    let (gate, rec) = gate(4, 2);
    let upload = gate.acquire(1, Route::Upload).await.unwrap();
    let mirror = gate.acquire(2, Route::Mirror).await.unwrap();
    let parked = tokio::spawn({
        let gate = gate.clone();
        async move { gate.acquire(2, Route::Scrub).await }
    });
    until_waiters(&gate, 1).await;
    // The holders finish their sessions 1 s and 3 s into the grace period.
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_secs(1)).await;
        drop(upload);
        tokio::time::sleep(Duration::from_secs(2)).await;
        drop(mirror);
    });
    rec.take();

    let started = Instant::now();
    let drain = gate.drain(Duration::from_secs(10));
    // Closed at once: the parked request ends with Closed, a new one fails at once.
    assert_eq!(parked.await.unwrap().unwrap_err(), GateError::Closed);
    assert_eq!(
        gate.acquire(1, Route::Upload).await.unwrap_err(),
        GateError::Closed
    );
    assert!(gate.is_closed());
    assert_eq!(drain.await, Ok(()));
    assert_eq!(started.elapsed(), Duration::from_secs(3), "the last return");
    assert_eq!((gate.in_use(), held(&gate)), (0, 0));
    assert_eq!(
        rec.take(),
        vec![
            Event::Release("upload", 1, Duration::from_secs(1)),
            Event::Release("mirror", 2, Duration::from_secs(3)),
        ],
        "a drain counts nothing as a shed"
    );
}

#[tokio::test(start_paused = true)]
async fn a_drain_cut_short_by_its_grace_period_reports_what_was_still_held_per_source() {
    let (gate, rec) = gate(6, 2);
    let upload = gate.acquire(1, Route::Upload).await.unwrap();
    let mirror = gate.acquire(2, Route::Mirror).await.unwrap();
    let scrub = gate.acquire(2, Route::Scrub).await.unwrap();
    let _mirror_too = gate.acquire(1, Route::Mirror).await.unwrap();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_secs(1)).await;
        drop(scrub); // comes back within the grace period
    });

    let started = Instant::now();
    let cut = gate.drain(Duration::from_secs(5)).await.unwrap_err();
    assert_eq!(
        started.elapsed(),
        Duration::from_secs(5),
        "exactly the grace"
    );
    assert_eq!(cut.held(), &[(Route::Upload, 1), (Route::Mirror, 3)]);
    assert_eq!(cut.units(), 4);
    assert_eq!(
        cut.to_string(),
        "drain cut short with 4 units still held: upload 1, mirror 3"
    );
    assert!(rec.take().iter().all(|e| !matches!(e, Event::Shed(..))));

    // What the period cut can still come home; a later drain then completes.
    drop((upload, mirror, _mirror_too));
    let started = Instant::now();
    assert_eq!(gate.drain(Duration::from_secs(5)).await, Ok(()));
    assert_eq!(started.elapsed(), Duration::ZERO);
}

// --- Live capacity ------------------------------------------------------------

#[tokio::test(start_paused = true)]
async fn growing_serves_parked_requests_at_once_in_fifo_order() {
    let (gate, rec) = gate(2, 2);
    let held_now = gate.acquire(2, Route::Upload).await.unwrap();
    let first = tokio::spawn({
        let gate = gate.clone();
        async move { gate.acquire(2, Route::Mirror).await }
    });
    until_waiters(&gate, 1).await;
    let second = tokio::spawn({
        let gate = gate.clone();
        async move { gate.acquire(1, Route::Scrub).await }
    });
    until_waiters(&gate, 2).await;
    rec.take();

    tokio::time::advance(Duration::from_secs(1)).await;
    assert_eq!(gate.resize(3), Ok(2));
    // One new unit: not enough for the head (2), and the one behind may not barge.
    tokio::task::yield_now().await;
    assert_eq!((gate.capacity(), gate.waiters()), (3, 2));
    assert_eq!(gate.resize(5), Ok(3));
    // Both served by the resize itself, before either task ran again (their
    // permits exist once they run).
    assert_eq!((gate.waiters(), gate.in_use()), (0, 2));
    let first = first.await.unwrap().unwrap();
    let second = second.await.unwrap().unwrap();
    let mut events = rec.take();
    // (The two tasks tell the observer when they next run, in whatever order.)
    events[2..].sort_by_key(|e| format!("{e:?}"));
    assert_eq!(
        events,
        vec![
            Event::Capacity(3),
            Event::Capacity(5),
            Event::Admit("mirror", 2, Duration::from_secs(1)),
            Event::Admit("scrub", 1, Duration::from_secs(1)),
        ]
    );
    assert_eq!((gate.in_use(), gate.capacity()), (5, 5));
    assert!(rec.violations().is_empty(), "{:?}", rec.violations());
    drop((held_now, first, second));
}

#[tokio::test(start_paused = true)]
async fn shrinking_retires_units_as_they_return_and_grants_nothing_past_the_new_capacity() {
    let (gate, rec) = gate(4, 1);
    let mut holders: Vec<_> = Vec::new();
    for _ in 0..4 {
        holders.push(gate.acquire(1, Route::Upload).await.unwrap());
    }
    let waiter = tokio::spawn({
        let gate = gate.clone();
        async move { gate.acquire(1, Route::Mirror).await }
    });
    until_waiters(&gate, 1).await;

    // No held permit is revoked: 4 stay held under a capacity of 2.
    assert_eq!(gate.resize(2), Ok(4));
    assert_eq!((gate.capacity(), held(&gate)), (2, 4));
    assert_eq!(rec.ledger(), (4, 2), "the capacity gauge follows at once");
    assert_eq!(gate.in_use(), held(&gate));

    // Two come back and retire: 2 still held, the new capacity; the waiter waits.
    for _ in 0..2 {
        drop(holders.pop());
        tokio::task::yield_now().await;
        assert_eq!(gate.waiters(), 1, "nothing granted while units are owed");
        assert_eq!(gate.in_use(), held(&gate));
    }
    assert_eq!(held(&gate), 2);
    // The third comes back to a free place: the waiter gets it.
    drop(holders.pop());
    let granted = waiter.await.unwrap().unwrap();
    assert_eq!((held(&gate), gate.capacity()), (2, 2));
    assert_eq!(gate.in_use(), held(&gate));
    assert!(gate.try_acquire(1, Route::Upload).unwrap_err().is_shed());
    assert!(rec.violations().is_empty(), "{:?}", rec.violations());
    drop((granted, holders));
    assert_eq!((gate.in_use(), gate.capacity()), (0, 2));
}

#[tokio::test(start_paused = true)]
async fn a_forget_below_a_parked_request_fails_it_with_exceeds_capacity_and_no_shed() {
    // A resize never goes below max_units; forgotten units can take the capacity
    // below a request that fitted.
    let (gate, rec) = gate(4, 3);
    let forgotten = gate.acquire(3, Route::Upload).await.unwrap();
    let held_now = gate.acquire(1, Route::Upload).await.unwrap();
    let big = tokio::spawn({
        let gate = gate.clone();
        async move { gate.acquire(3, Route::Mirror).await }
    });
    until_waiters(&gate, 1).await;
    forgotten.forget();
    let err = big.await.unwrap().unwrap_err();
    assert!(matches!(err, GateError::ExceedsCapacity(e) if e.requested == 3 && e.capacity == 1));
    assert!(matches!(
        gate.acquire(3, Route::Mirror).await,
        Err(GateError::ExceedsCapacity(_))
    ));
    assert!(rec.take().iter().all(|e| !matches!(e, Event::Shed(..))));
    drop(held_now);
}

#[tokio::test(start_paused = true)]
async fn resize_resolves_the_capacity_as_the_builder_does() {
    let (gate, rec) = gate(4, 2);
    rec.take();
    // An explicit capacity below max_units is refused; the gate is unchanged.
    assert_eq!(
        gate.resize(1),
        Err(ConfigError::CapacityBelowMaxUnits {
            capacity: 1,
            max_units: 2
        })
    );
    assert_eq!(gate.resize(0), Err(ConfigError::ZeroCapacity));
    assert_eq!(gate.capacity(), 4);
    // A memory-derived one is floored at max_units: 8 MiB / 8 MiB = 1 -> 2.
    assert_eq!(
        gate.resize(Capacity::from_memory_budget(8 << 20, 8 << 20)),
        Ok(4)
    );
    assert_eq!(gate.capacity(), 2);
    // The same capacity from the same budget again tells the observer nothing.
    assert_eq!(
        gate.resize(Capacity::from_memory_budget(8 << 20, 8 << 20)),
        Ok(2)
    );
    assert_eq!(rec.take(), vec![Event::Capacity(2)]);
    // The same capacity given outright is news: it has no budget any more.
    assert_eq!(gate.resize(2), Ok(2));
    assert_eq!(rec.take(), vec![Event::Capacity(2)]);
}

// --- max_waiters --------------------------------------------------------------

#[tokio::test(start_paused = true)]
async fn max_waiters_sheds_at_once_with_queue_full_and_a_retry_after() {
    let recorder = Arc::new(Recorder::default());
    let gate: TestGate = admit_tokio::gate(2)
        .wait_budget(BUDGET)
        .max_units(2)
        .max_waiters(1)
        .observer(Arc::clone(&recorder))
        .build()
        .unwrap();
    let held_now = gate.acquire(2, Route::Upload).await.unwrap();
    let parked = tokio::spawn({
        let gate = gate.clone();
        async move { gate.acquire(1, Route::Mirror).await }
    });
    until_waiters(&gate, 1).await;
    recorder.take();

    // One parked already: shed at once, without parking, with a Retry-After.
    let started = Instant::now();
    let err = gate.acquire(1, Route::Scrub).await.unwrap_err();
    assert_eq!(started.elapsed(), Duration::ZERO);
    assert!(err.is_shed());
    let (min, _) = gate.retry_after_bounds();
    assert_eq!(
        err.retry_after(),
        Some(min),
        "no release yet: the lower bound"
    );
    assert_eq!(gate.waiters(), 1);
    assert_eq!(
        recorder.take(),
        vec![Event::Shed(
            "scrub",
            1,
            Duration::ZERO,
            ShedReason::QueueFull
        )]
    );

    // The parked one waits out its budget: a shed for the other reason.
    assert!(parked.await.unwrap().unwrap_err().is_shed());
    assert_eq!(
        recorder.take(),
        vec![Event::Shed("mirror", 1, BUDGET, ShedReason::WaitBudget)]
    );

    // Its place is free again: the next request parks, and is admitted.
    let parked = tokio::spawn({
        let gate = gate.clone();
        async move { gate.acquire(2, Route::Mirror).await }
    });
    until_waiters(&gate, 1).await;
    drop(held_now);
    assert_eq!(parked.await.unwrap().unwrap().units(), 2);
}

// --- Permits ------------------------------------------------------------------

#[tokio::test(start_paused = true)]
async fn split_merge_and_forget_tell_the_observer_once_per_unit() {
    let (gate, rec) = gate(8, 4);
    let mut mirror = gate.acquire(4, Route::Mirror).await.unwrap();
    tokio::time::advance(Duration::from_secs(1)).await;

    // Split: nothing is told; each part releases its own units, with the hold time
    // from the original admission.
    assert!(mirror.split(4).is_none(), "a permit never holds nothing");
    let one = mirror.split(1).unwrap();
    assert_eq!((mirror.units(), one.units()), (3, 1));
    assert_eq!(
        (one.source(), one.held_for()),
        (Route::Mirror, Duration::from_secs(1))
    );
    assert_eq!(gate.in_use(), 4);
    drop(one);
    assert_eq!(gate.in_use(), 3);

    // Merge: the upload's units are then reported with the mirror's source.
    let upload = gate.acquire(2, Route::Upload).await.unwrap();
    mirror.merge(upload);
    assert_eq!(mirror.units(), 5);
    assert_eq!(gate.held_by_source(), vec![(Route::Mirror, 5)]);
    tokio::time::advance(Duration::from_secs(1)).await;

    // Forget: released (they leave use), then the capacity shrinks by them.
    let scrub = gate.acquire(2, Route::Scrub).await.unwrap();
    scrub.forget();
    assert_eq!((gate.capacity(), gate.in_use()), (6, 5));
    drop(mirror);
    assert_eq!((gate.capacity(), gate.in_use()), (6, 0));

    let events = rec.take();
    assert_eq!(
        events,
        vec![
            Event::Admit("mirror", 4, Duration::ZERO),
            Event::Release("mirror", 1, Duration::from_secs(1)),
            Event::Admit("upload", 2, Duration::ZERO),
            Event::Admit("scrub", 2, Duration::ZERO),
            Event::Release("scrub", 2, Duration::ZERO),
            Event::Capacity(6),
            Event::Release("mirror", 5, Duration::from_secs(2)),
        ]
    );
    let admitted: usize = events
        .iter()
        .map(|e| match e {
            Event::Admit(_, n, _) => *n,
            _ => 0,
        })
        .sum();
    let released: usize = events
        .iter()
        .map(|e| match e {
            Event::Release(_, n, _) => *n,
            _ => 0,
        })
        .sum();
    assert_eq!(admitted, released, "every unit told released exactly once");
    assert_eq!(rec.ledger(), (0, 6));
    // A drain waits for nothing forgotten.
    assert_eq!(gate.drain(Duration::from_secs(1)).await, Ok(()));
}

#[tokio::test(start_paused = true)]
#[should_panic(expected = "merged permits of two different gates")]
async fn merging_permits_of_two_gates_panics() {
    let (a, _) = gate(2, 1);
    let (b, _) = gate(2, 1);
    let mut permit = a.acquire(1, Route::Upload).await.unwrap();
    permit.merge(b.acquire(1, Route::Upload).await.unwrap());
}

// --- Blocking acquire -----------------------------------------------------------

/// Not on the paused clock: the blocked thread's wait budget runs on the system
/// clock, and a long budget keeps it out of the way. Order comes from the queue
/// (`waiters()`) and from hand-offs, not from time.
#[tokio::test(flavor = "current_thread")]
async fn a_blocking_acquire_from_a_thread_queues_fifo_with_async_waiters() {
    let recorder = Arc::new(Recorder::default());
    let gate: TestGate = admit_tokio::gate(1)
        .wait_budget(Duration::from_secs(600))
        .observer(Arc::clone(&recorder))
        .build()
        .unwrap();
    let held_now = gate.acquire(1, Route::Upload).await.unwrap();

    // First in the queue: an async waiter.
    let first = tokio::spawn({
        let gate = gate.clone();
        async move { gate.acquire(1, Route::Upload).await }
    });
    until_waiters(&gate, 1).await;
    // Second: a thread.
    let (granted_tx, granted) = mpsc::channel();
    let (release, release_rx) = mpsc::channel::<()>();
    let thread = std::thread::spawn({
        let gate = gate.clone();
        move || {
            let permit = gate.acquire_blocking(1, Route::Mirror).unwrap();
            granted_tx.send(()).unwrap();
            release_rx.recv().unwrap();
            drop(permit);
        }
    });
    until_waiters(&gate, 2).await;
    // Third: another async waiter.
    let third = tokio::spawn({
        let gate = gate.clone();
        async move { gate.acquire(1, Route::Scrub).await }
    });
    until_waiters(&gate, 3).await;
    recorder.take();

    drop(held_now);
    drop(first.await.unwrap().unwrap()); // the first in line, then hands on
    tokio::task::spawn_blocking(move || granted.recv().unwrap())
        .await
        .unwrap();
    assert_eq!(gate.waiters(), 1, "the third still waits behind the thread");
    release.send(()).unwrap();
    let third = third.await.unwrap().unwrap();
    thread.join().unwrap();

    let admitted: Vec<_> = recorder
        .take()
        .into_iter()
        .filter_map(|e| match e {
            Event::Admit(source, ..) => Some(source),
            _ => None,
        })
        .collect();
    assert_eq!(admitted, ["upload", "mirror", "scrub"]);
    drop(third);
}

#[tokio::test(flavor = "current_thread")]
async fn a_blocked_thread_wakes_with_closed_when_the_gate_is_drained() {
    let recorder = Arc::new(Recorder::default());
    let gate: TestGate = admit_tokio::gate(1)
        .wait_budget(Duration::from_secs(600))
        .max_waiters(1)
        .observer(Arc::clone(&recorder))
        .build()
        .unwrap();
    let held_now = gate.acquire(1, Route::Upload).await.unwrap();
    let thread = std::thread::spawn({
        let gate = gate.clone();
        move || gate.acquire_blocking(1, Route::Mirror)
    });
    until_waiters(&gate, 1).await;
    // The queue bound counts the thread: the next thread is shed at once.
    let gate2 = gate.clone();
    let full = tokio::task::spawn_blocking(move || gate2.acquire_blocking(1, Route::Scrub))
        .await
        .unwrap();
    assert!(full.unwrap_err().is_shed());
    assert!(matches!(
        gate.acquire_blocking(2, Route::Scrub),
        Err(GateError::ExceedsMaxUnits { .. })
    ));

    let drain = tokio::spawn({
        let gate = gate.clone();
        async move { gate.drain(Duration::from_secs(600)).await }
    });
    let blocked = tokio::task::spawn_blocking(move || thread.join().unwrap())
        .await
        .unwrap();
    assert_eq!(blocked.unwrap_err(), GateError::Closed);
    drop(held_now);
    assert_eq!(drain.await.unwrap(), Ok(()));
    let sheds: Vec<_> = recorder
        .take()
        .into_iter()
        .filter(|e| matches!(e, Event::Shed(..)))
        .collect();
    // (A blocking shed's wait is on the system clock: not asserted.)
    assert!(
        matches!(
            sheds.as_slice(),
            [Event::Shed("scrub", 1, _, ShedReason::QueueFull)]
        ),
        "{sheds:?}"
    );
}

// --- The memory-limit follower ------------------------------------------------

#[tokio::test(start_paused = true)]
async fn the_limit_follower_resizes_the_gate_from_each_reading_and_ends_when_it_closes() {
    const MIB: u64 = 1 << 20;
    let (gate, rec) = gate(4, 2);
    rec.take();
    // A fake cgroup file: 0 reads as "no limit".
    let limit = Arc::new(AtomicU64::new(64 * MIB));
    let read = {
        let limit = Arc::clone(&limit);
        move || Some(limit.load(Ordering::SeqCst)).filter(|&l| l != 0)
    };
    // Half of the limit for 8 MiB session buffers.
    let budget = |limit: u64| Capacity::from_memory_budget(limit / 2, 8 * MIB);
    let start = Instant::now();
    let follower = tokio::spawn(gate.follow_limit(Duration::from_secs(10), read, budget));
    // Just after the follower's n-th reading (virtual time: exact).
    let tick = |n: u64| {
        tokio::time::sleep_until(start + Duration::from_secs(10 * n) + Duration::from_millis(1))
    };

    // The first reading comes one interval after the start.
    tokio::time::sleep(Duration::from_secs(9)).await;
    assert_eq!(gate.capacity(), 4);
    tick(1).await;
    assert_eq!(gate.capacity(), 4, "64 MiB / 2 / 8 MiB = 4: unchanged");

    // In-place resize up: 256 MiB -> 16 units, at the next tick.
    limit.store(256 * MIB, Ordering::SeqCst);
    tick(2).await;
    assert_eq!(gate.capacity(), 16);
    // Down below the floor: 16 MiB -> 1 unit, floored at max_units 2.
    limit.store(16 * MIB, Ordering::SeqCst);
    tick(3).await;
    assert_eq!(gate.capacity(), 2);
    // No limit found: unchanged.
    limit.store(0, Ordering::SeqCst);
    tick(4).await;
    assert_eq!(gate.capacity(), 2);
    // The first reading kept 4 units but gave them a budget: told too.
    assert_eq!(
        rec.take(),
        vec![Event::Capacity(4), Event::Capacity(16), Event::Capacity(2)]
    );

    gate.close();
    tick(5).await;
    assert!(
        follower.is_finished(),
        "the follower ends once the gate is closed"
    );
    follower.await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn spawn_memory_follower_follows_the_process_limit_and_ends_with_the_gate() {
    let (gate, rec) = gate(4, 2);
    rec.take();
    let budget = |limit: u64| Capacity::from_memory_budget(limit / 2, 8 << 20);
    let follower = admit_tokio::spawn_memory_follower(&gate, Duration::from_secs(30), budget);
    tokio::time::sleep(Duration::from_secs(31)).await;
    // This machine may or may not run under a cgroup memory limit.
    let expected = match admit::process_memory_limit() {
        Some(limit) => budget(limit).floored(2).min(admit::Semaphore::MAX_UNITS),
        None => 4,
    };
    assert_eq!(gate.capacity(), expected);
    gate.close();
    tokio::time::sleep(Duration::from_secs(30)).await;
    assert!(follower.is_finished());
    follower.await.unwrap();
}
