//! The gate's lifecycle on smol: drain at shutdown (complete, and cut short by the
//! grace period with what was still held, per source), live capacity (grow serves
//! the parked, shrink retires units as they return and grants nothing past the new
//! capacity), `max_waiters` (shed at once, told apart), permit split / merge /
//! forget (the observer told once per unit), the blocking acquire from a thread in
//! the same FIFO as async waiters, and the memory-limit follower.
//!
//! smol has no virtual clock. Order comes from hand-offs (channels, the queue's
//! `waiters()`), never from sleeping; the only real-time waits are grace periods
//! and intervals of a few milliseconds that the test means to pass, and the
//! assertions are about outcomes, not about how long anything took (bar "at least
//! the grace period"). Every wait for an event is bounded, so a lost wake-up fails
//! instead of hanging.

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

use admit::{
    AdmitEvent, Capacity, CapacityEvent, Gate, GateError, Observer, ReleaseEvent, ShedEvent,
    ShedReason, StartEvent, Timer,
};
use admit_smol::SmolTimer;
use futures_lite::future;
use smol::channel::{unbounded, Receiver, Sender};

admit::sources! {
    /// Call sites of the tests.
    enum Route {
        Upload => "upload",
        Mirror => "mirror",
        Scrub => "scrub",
    }
}

/// What the gate told its observer (hold and wait times left out: real time).
#[derive(Debug, Clone, PartialEq)]
enum Event {
    Admit(&'static str, usize),
    Release(&'static str, usize),
    Shed(&'static str, usize, ShedReason),
    Capacity(usize),
}

/// Records every event, keeps a ledger of units in use against the capacity in
/// force (an admission above it is a violation: nothing may be granted past it),
/// and sends each new capacity down a channel, for tests that wait for one.
#[derive(Debug)]
struct Recorder {
    ledger: Mutex<Ledger>,
    capacities: Sender<usize>,
}

#[derive(Debug, Default)]
struct Ledger {
    events: Vec<Event>,
    in_use: usize,
    capacity: usize,
    violations: Vec<String>,
}

impl Recorder {
    fn new() -> (Arc<Self>, Receiver<usize>) {
        let (capacities, rx) = unbounded();
        let recorder = Self {
            ledger: Mutex::default(),
            capacities,
        };
        (Arc::new(recorder), rx)
    }
    fn take(&self) -> Vec<Event> {
        std::mem::take(&mut self.ledger.lock().unwrap().events)
    }
    fn ledger(&self) -> (usize, usize) {
        let l = self.ledger.lock().unwrap();
        (l.in_use, l.capacity)
    }
    fn violations(&self) -> Vec<String> {
        self.ledger.lock().unwrap().violations.clone()
    }
}

impl Observer for Recorder {
    fn on_start(&self, event: &StartEvent<'_>) {
        self.ledger.lock().unwrap().capacity = event.capacity;
    }
    fn on_admit(&self, event: &AdmitEvent) {
        let (source, units) = (event.source, event.units);
        let mut l = self.ledger.lock().unwrap();
        l.in_use += units;
        if l.in_use > l.capacity {
            let v = format!(
                "{source} admitted {units}: {} in use > {}",
                l.in_use, l.capacity
            );
            l.violations.push(v);
        }
        l.events.push(Event::Admit(source, units));
    }
    fn on_release(&self, event: &ReleaseEvent) {
        let mut l = self.ledger.lock().unwrap();
        l.in_use -= event.units;
        l.events.push(Event::Release(event.source, event.units));
    }
    fn on_shed(&self, event: &ShedEvent) {
        let mut l = self.ledger.lock().unwrap();
        l.events
            .push(Event::Shed(event.source, event.units, event.reason));
    }
    fn on_capacity(&self, event: &CapacityEvent) {
        let capacity = event.capacity;
        let mut l = self.ledger.lock().unwrap();
        l.capacity = capacity;
        l.events.push(Event::Capacity(capacity));
        let _ = self.capacities.try_send(capacity);
    }
}

type TestGate = Gate<Route, SmolTimer, Arc<Recorder>>;

/// A budget far beyond any test's run time: only the event under test can end a
/// wait in time.
const LONG: Duration = Duration::from_secs(60);

fn gate(capacity: usize, max_units: usize) -> (TestGate, Arc<Recorder>, Receiver<usize>) {
    let (recorder, capacities) = Recorder::new();
    let gate = admit_smol::gate(capacity)
        .wait_budget(LONG)
        .max_units(max_units)
        .observer(Arc::clone(&recorder))
        .build()
        .unwrap();
    (gate, recorder, capacities)
}

/// Runs `test` on a fresh executor (tasks spawned with the `&Executor` it gets).
fn run<T>(test: impl AsyncFnOnce(&smol::Executor<'static>) -> T) -> T {
    let ex = smol::Executor::new();
    future::block_on(ex.run(test(&ex)))
}

/// `f`, or a panic naming `what` if it takes more than 20 s (a lost wake-up).
async fn bounded<F: Future>(what: &str, f: F) -> F::Output {
    future::or(f, async {
        smol::Timer::after(Duration::from_secs(20)).await;
        panic!("{what}: not within 20 s");
    })
    .await
}

/// Runs other tasks until `gate` has `n` parked waiters.
async fn until_waiters(gate: &TestGate, n: usize) {
    bounded("parked waiters", async {
        while gate.waiters() != n {
            future::yield_now().await;
        }
    })
    .await;
}

fn held(gate: &TestGate) -> usize {
    gate.held_by_source().iter().map(|&(_, n)| n).sum()
}

// --- Drain --------------------------------------------------------------------

#[test]
fn a_drain_closes_the_gate_and_completes_when_the_last_permit_drops() {
    let (gate, rec, _) = gate(4, 2);
    run(async |ex| {
        let upload = gate.acquire(1, Route::Upload).await.unwrap();
        let mirror = gate.acquire(2, Route::Mirror).await.unwrap();
        let parked = ex.spawn({
            let gate = gate.clone();
            async move { gate.acquire(2, Route::Scrub).await }
        });
        until_waiters(&gate, 1).await;
        let (done, finish) = unbounded::<()>();
        let holders = ex.spawn(async move {
            finish.recv().await.unwrap();
            drop(upload);
            finish.recv().await.unwrap();
            drop(mirror);
        });
        rec.take();

        // A grace period far beyond the test: only the last return ends the drain.
        let drain = ex.spawn({
            let gate = gate.clone();
            async move { gate.drain(LONG).await }
        });
        assert_eq!(
            bounded("closed", parked).await.unwrap_err(),
            GateError::Closed
        );
        assert_eq!(
            gate.acquire(1, Route::Upload).await.unwrap_err(),
            GateError::Closed
        );
        done.send(()).await.unwrap();
        done.send(()).await.unwrap();
        holders.await;
        assert_eq!(bounded("drain", drain).await, Ok(()));
        assert_eq!((gate.in_use(), held(&gate)), (0, 0));
    });
    assert_eq!(
        rec.take(),
        vec![Event::Release("upload", 1), Event::Release("mirror", 2)],
        "a drain counts nothing as a shed"
    );
}

#[test]
fn a_drain_cut_short_by_its_grace_period_reports_what_was_still_held_per_source() {
    let (gate, rec, _) = gate(6, 2);
    let grace = Duration::from_millis(30);
    smol::block_on(async {
        let upload = gate.acquire(1, Route::Upload).await.unwrap();
        let mirror = gate.acquire(2, Route::Mirror).await.unwrap();
        let scrub = gate.acquire(2, Route::Scrub).await.unwrap();
        drop(scrub); // back before the drain

        let started = gate.timer().now();
        let cut = gate.drain(grace).await.unwrap_err();
        assert!(gate.timer().now() >= started + grace);
        assert_eq!(cut.held(), &[(Route::Upload, 1), (Route::Mirror, 2)]);
        assert_eq!(
            cut.to_string(),
            "drain cut short with 3 units still held: upload 1, mirror 2"
        );
        drop((upload, mirror));
        assert_eq!(gate.drain(grace).await, Ok(()));
    });
    assert!(rec.take().iter().all(|e| !matches!(e, Event::Shed(..))));
}

// --- Live capacity ------------------------------------------------------------

#[test]
fn growing_serves_parked_requests_at_once_in_fifo_order() {
    let (gate, rec, _) = gate(2, 2);
    run(async |ex| {
        let held_now = gate.acquire(2, Route::Upload).await.unwrap();
        let first = ex.spawn({
            let gate = gate.clone();
            async move { gate.acquire(2, Route::Mirror).await }
        });
        until_waiters(&gate, 1).await;
        let second = ex.spawn({
            let gate = gate.clone();
            async move { gate.acquire(1, Route::Scrub).await }
        });
        until_waiters(&gate, 2).await;

        assert_eq!(gate.resize(3), Ok(2));
        // One new unit: not enough for the head; the one behind may not barge.
        future::yield_now().await;
        assert_eq!(gate.waiters(), 2);
        assert_eq!(gate.resize(5), Ok(3));
        assert_eq!(gate.waiters(), 0, "served by the resize");
        let (first, second) = (
            bounded("first", first).await.unwrap(),
            bounded("second", second).await.unwrap(),
        );
        assert_eq!((first.units(), second.units()), (2, 1));
        assert_eq!(gate.in_use(), 5);
        drop((held_now, first, second));
    });
    assert_eq!(rec.ledger(), (0, 5));
    assert!(rec.violations().is_empty(), "{:?}", rec.violations());
}

#[test]
fn shrinking_retires_units_as_they_return_and_grants_nothing_past_the_new_capacity() {
    let (gate, rec, _) = gate(4, 1);
    run(async |ex| {
        let mut holders = Vec::new();
        for _ in 0..4 {
            holders.push(gate.acquire(1, Route::Upload).await.unwrap());
        }
        let waiter = ex.spawn({
            let gate = gate.clone();
            async move { gate.acquire(1, Route::Mirror).await }
        });
        until_waiters(&gate, 1).await;

        assert_eq!(gate.resize(2), Ok(4));
        assert_eq!((gate.capacity(), held(&gate)), (2, 4), "nothing revoked");
        assert_eq!(rec.ledger(), (4, 2));
        for _ in 0..2 {
            drop(holders.pop());
            future::yield_now().await;
            assert_eq!(gate.waiters(), 1, "nothing granted while units are owed");
            // Units in permits: above the new capacity until they come back.
            assert_eq!(gate.in_use(), holders.len());
        }
        drop(holders.pop());
        let granted = bounded("the waiter", waiter).await.unwrap();
        assert_eq!((held(&gate), gate.capacity()), (2, 2));
        drop((granted, holders));
    });
    assert_eq!((gate.in_use(), gate.capacity()), (0, 2));
    assert!(rec.violations().is_empty(), "{:?}", rec.violations());
}

// --- max_waiters --------------------------------------------------------------

#[test]
fn max_waiters_sheds_at_once_with_queue_full_and_a_retry_after() {
    let (recorder, _) = Recorder::new();
    let gate: TestGate = admit_smol::gate(1)
        .wait_budget(LONG)
        .max_waiters(1)
        .observer(Arc::clone(&recorder))
        .build()
        .unwrap();
    run(async |ex| {
        let held_now = gate.acquire(1, Route::Upload).await.unwrap();
        let parked = ex.spawn({
            let gate = gate.clone();
            async move { gate.acquire(1, Route::Mirror).await }
        });
        until_waiters(&gate, 1).await;
        recorder.take();

        // Shed at once: with a 60 s budget, only the queue bound can answer now.
        let err = bounded("the shed", gate.acquire(1, Route::Scrub))
            .await
            .unwrap_err();
        assert!(err.is_shed());
        let (min, max) = gate.retry_after_bounds();
        assert!(err.retry_after().is_some_and(|r| min <= r && r <= max));
        assert_eq!(
            recorder.take(),
            vec![Event::Shed("scrub", 1, ShedReason::QueueFull)]
        );
        // The parked one is untouched and admitted on release.
        drop(held_now);
        assert_eq!(
            bounded("parked", parked).await.unwrap().source(),
            Route::Mirror
        );
    });
}

// --- Permits ------------------------------------------------------------------

#[test]
fn split_merge_and_forget_tell_the_observer_once_per_unit() {
    let (gate, rec, _) = gate(8, 4);
    smol::block_on(async {
        let mut mirror = gate.acquire(4, Route::Mirror).await.unwrap();
        let one = mirror.split(1).unwrap();
        assert_eq!((mirror.units(), one.units()), (3, 1));
        drop(one);
        let upload = gate.acquire(2, Route::Upload).await.unwrap();
        mirror.merge(upload);
        assert_eq!(gate.held_by_source(), vec![(Route::Mirror, 5)]);
        gate.acquire(2, Route::Scrub).await.unwrap().forget();
        assert_eq!((gate.capacity(), gate.in_use()), (6, 5));
        drop(mirror);
        assert_eq!(
            gate.drain(LONG).await,
            Ok(()),
            "nothing forgotten is waited for"
        );
    });
    assert_eq!(
        rec.take(),
        vec![
            Event::Admit("mirror", 4),
            Event::Release("mirror", 1),
            Event::Admit("upload", 2),
            Event::Admit("scrub", 2),
            Event::Release("scrub", 2),
            Event::Capacity(6),
            Event::Release("mirror", 5),
        ]
    );
    assert_eq!(rec.ledger(), (0, 6));
}

// --- Blocking acquire -----------------------------------------------------------

#[test]
fn a_blocking_acquire_from_a_thread_queues_fifo_with_async_waiters() {
    let (gate, rec, _) = gate(1, 1);
    run(async |ex| {
        let held_now = gate.acquire(1, Route::Upload).await.unwrap();
        let first = ex.spawn({
            let gate = gate.clone();
            async move { gate.acquire(1, Route::Upload).await }
        });
        until_waiters(&gate, 1).await;
        let (granted_tx, granted) = unbounded();
        let (release, release_rx) = mpsc::channel::<()>();
        let thread = std::thread::spawn({
            let gate = gate.clone();
            move || {
                let permit = gate.acquire_blocking(1, Route::Mirror).unwrap();
                granted_tx.send_blocking(()).unwrap();
                release_rx.recv().unwrap();
                drop(permit);
            }
        });
        until_waiters(&gate, 2).await;
        let third = ex.spawn({
            let gate = gate.clone();
            async move { gate.acquire(1, Route::Scrub).await }
        });
        until_waiters(&gate, 3).await;
        rec.take();

        drop(held_now);
        drop(bounded("first", first).await.unwrap());
        bounded("the thread", granted.recv()).await.unwrap();
        assert_eq!(gate.waiters(), 1, "the third still waits behind the thread");
        release.send(()).unwrap();
        drop(bounded("third", third).await.unwrap());
        thread.join().unwrap();
    });
    let admitted: Vec<_> = rec
        .take()
        .into_iter()
        .filter_map(|e| match e {
            Event::Admit(source, _) => Some(source),
            _ => None,
        })
        .collect();
    assert_eq!(admitted, ["upload", "mirror", "scrub"]);
}

#[test]
fn a_blocking_acquire_is_shed_after_its_budget_on_the_system_clock() {
    let (recorder, _) = Recorder::new();
    let budget = Duration::from_millis(20);
    let gate: TestGate = admit_smol::gate(1)
        .wait_budget(budget)
        .observer(Arc::clone(&recorder))
        .build()
        .unwrap();
    let _held = gate.try_acquire(1, Route::Upload).unwrap();
    let started = std::time::Instant::now();
    let err = gate.acquire_blocking(1, Route::Mirror).unwrap_err();
    assert!(err.is_shed() && started.elapsed() >= budget, "{err:?}");
    assert_eq!(gate.waiters(), 0);
    assert!(recorder
        .take()
        .contains(&Event::Shed("mirror", 1, ShedReason::WaitBudget)));
}

// --- The memory-limit follower ------------------------------------------------

#[test]
fn the_limit_follower_resizes_the_gate_from_each_reading_and_ends_when_it_closes() {
    const MIB: u64 = 1 << 20;
    let (gate, rec, capacities) = gate(4, 2);
    let limit = Arc::new(AtomicU64::new(256 * MIB)); // 0 reads as "no limit"
    let read = {
        let limit = Arc::clone(&limit);
        move || Some(limit.load(Ordering::SeqCst)).filter(|&l| l != 0)
    };
    let budget = |limit: u64| Capacity::from_memory_budget(limit / 2, 8 * MIB);
    run(async |ex| {
        let follower = ex.spawn(gate.follow_limit(Duration::from_millis(5), read, budget));
        // Each change arrives at a reading; the test waits for it, not for time.
        assert_eq!(bounded("grow", capacities.recv()).await, Ok(16));
        assert_eq!(gate.capacity(), 16);
        limit.store(16 * MIB, Ordering::SeqCst); // 1 unit, floored at max_units 2
        assert_eq!(bounded("shrink", capacities.recv()).await, Ok(2));
        limit.store(0, Ordering::SeqCst);
        gate.close();
        bounded("the follower's end", follower).await;
        assert_eq!(gate.capacity(), 2, "no limit found: unchanged");
    });
    assert_eq!(rec.take(), vec![Event::Capacity(16), Event::Capacity(2)]);
}

#[test]
fn spawn_memory_follower_follows_the_process_limit_and_ends_with_the_gate() {
    let (gate, _rec, capacities) = gate(4, 2);
    let budget = |limit: u64| Capacity::from_memory_budget(limit / 2, 8 << 20);
    smol::block_on(async {
        let follower = admit_smol::spawn_memory_follower(&gate, Duration::from_millis(5), budget);
        // This machine may or may not run under a cgroup memory limit.
        if let Some(limit) = admit::process_memory_limit() {
            let expected = budget(limit).floored(2).min(admit::Semaphore::MAX_UNITS);
            if expected != 4 {
                assert_eq!(bounded("resize", capacities.recv()).await, Ok(expected));
            }
        }
        gate.close();
        bounded("the follower's end", follower).await;
    });
}
