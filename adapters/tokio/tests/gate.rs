//! A gate on Tokio's paused clock: budget expiry, ceiling, hand-off to a parked
//! waiter from another task, `.until` cancellation and dropping a parked acquire.

use std::future::{poll_fn, Future};
use std::pin::{pin, Pin};
use std::sync::{Arc, Mutex};
use std::task::Poll;
use std::time::Duration;

use admit::{AdmitEvent, Gate, GateError, Observer, ReleaseEvent, ShedEvent, Timer};
use admit_tokio::TokioTimer;
use tokio::sync::oneshot;
use tokio::time::Instant;

admit::sources! {
    /// Call sites of the tests.
    enum Route {
        Upload => "upload",
        Mirror => "mirror",
    }
}

/// What the gate told its observer.
#[derive(Debug, Clone, PartialEq)]
enum Event {
    Admit(&'static str, usize, Duration),
    Release(&'static str, usize, Duration),
    Shed(&'static str, usize, Duration),
}

#[derive(Debug, Default)]
struct Log(Mutex<Vec<Event>>);

impl Log {
    fn take(&self) -> Vec<Event> {
        std::mem::take(&mut self.0.lock().unwrap())
    }
    fn sheds(&self) -> usize {
        let events = self.0.lock().unwrap();
        events
            .iter()
            .filter(|e| matches!(e, Event::Shed(..)))
            .count()
    }
}

impl Observer for Log {
    fn on_admit(&self, event: &AdmitEvent) {
        self.0
            .lock()
            .unwrap()
            .push(Event::Admit(event.source, event.units, event.waited));
    }
    fn on_release(&self, event: &ReleaseEvent) {
        self.0
            .lock()
            .unwrap()
            .push(Event::Release(event.source, event.units, event.held));
    }
    fn on_shed(&self, event: &ShedEvent) {
        self.0
            .lock()
            .unwrap()
            .push(Event::Shed(event.source, event.units, event.waited));
    }
}

const BUDGET: Duration = Duration::from_secs(5);

type TestGate = Gate<Route, TokioTimer, Arc<Log>>;

fn gate(capacity: usize) -> (TestGate, Arc<Log>) {
    let log = Arc::new(Log::default());
    let gate = admit_tokio::gate(capacity)
        .wait_budget(BUDGET)
        .max_units(capacity)
        .observer(Arc::clone(&log))
        .build()
        .unwrap();
    (gate, log)
}

/// Polls `f` once, without waiting.
async fn poll_once<F: Future>(f: Pin<&mut F>) -> Poll<F::Output> {
    let mut f = Some(f);
    poll_fn(|cx| Poll::Ready(f.take().unwrap().poll(cx))).await
}

/// Runs other tasks until `gate` has `n` parked waiters. Never idles the runtime, so
/// the paused clock does not auto-advance meanwhile.
async fn until_waiters(gate: &TestGate, n: usize) {
    while gate.waiters() != n {
        tokio::task::yield_now().await;
    }
}

#[tokio::test(start_paused = true)]
async fn the_constructor_sets_a_timer_on_the_runtime_clock() {
    let (gate, _log) = gate(1);
    assert_eq!(gate.timer().now(), Duration::ZERO);
    tokio::time::advance(Duration::from_secs(3)).await;
    assert_eq!(gate.timer().now(), Duration::from_secs(3));
}

#[tokio::test(start_paused = true)]
async fn budget_expiry_is_busy_after_exactly_the_budget() {
    let (gate, log) = gate(1);
    let _held = gate.acquire(1, Route::Upload).await.unwrap();
    log.take();

    let started = Instant::now();
    // Bounded, so a gate that never expires fails instead of hanging.
    let outcome = tokio::time::timeout(2 * BUDGET, gate.acquire(1, Route::Mirror))
        .await
        .expect("the wait budget should end the wait");
    assert_eq!(started.elapsed(), BUDGET);
    let err = outcome.unwrap_err();
    assert!(matches!(err, GateError::Busy { retry_after, .. } if retry_after > Duration::ZERO));
    assert_eq!(log.take(), vec![Event::Shed("mirror", 1, BUDGET)]);
    assert_eq!(gate.waiters(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_ceiling_below_the_budget_ends_the_wait_early_and_counts() {
    let (gate, log) = gate(1);
    let _held = gate.acquire(1, Route::Upload).await.unwrap();
    log.take();

    let ceiling = Duration::from_millis(1500);
    let started = Instant::now();
    let err = gate
        .acquire(1, Route::Upload)
        .ceiling(ceiling)
        .await
        .unwrap_err();
    assert_eq!(started.elapsed(), ceiling);
    assert!(err.is_shed());
    assert_eq!(log.take(), vec![Event::Shed("upload", 1, ceiling)]);
}

#[tokio::test(start_paused = true)]
async fn a_parked_waiter_is_admitted_by_a_release_in_another_task() {
    let (gate, log) = gate(2);
    let held = gate.acquire(2, Route::Upload).await.unwrap();

    let waiter = tokio::spawn({
        let gate = gate.clone();
        async move { gate.acquire(2, Route::Mirror).await }
    });
    until_waiters(&gate, 1).await;

    // Two virtual seconds into the 5 s budget, another task releases the units.
    tokio::time::advance(Duration::from_secs(2)).await;
    let (release, released) = oneshot::channel::<()>();
    let holder = tokio::spawn(async move {
        released.await.unwrap();
        drop(held);
    });
    release.send(()).unwrap();
    holder.await.unwrap();

    let permit = waiter.await.unwrap().expect("admitted, not shed");
    assert_eq!(permit.units(), 2);
    assert_eq!(permit.source(), Route::Mirror);
    assert_eq!(gate.timer().now(), Duration::from_secs(2));
    assert_eq!(
        log.take(),
        vec![
            Event::Admit("upload", 2, Duration::ZERO),
            Event::Release("upload", 2, Duration::from_secs(2)),
            Event::Admit("mirror", 2, Duration::from_secs(2)),
        ]
    );
    assert_eq!(gate.in_use(), 2);
    drop(permit);
    assert_eq!(gate.in_use(), 0);
}

#[tokio::test(start_paused = true)]
async fn until_cancels_a_parked_wait_without_a_shed() {
    let (gate, log) = gate(1);
    let held = gate.acquire(1, Route::Upload).await.unwrap();
    log.take();

    let (disconnect, disconnected) = oneshot::channel::<()>();
    let waiter = tokio::spawn({
        let gate = gate.clone();
        async move { gate.acquire(1, Route::Mirror).until(disconnected).await }
    });
    until_waiters(&gate, 1).await;
    disconnect.send(()).unwrap();

    assert_eq!(waiter.await.unwrap().unwrap_err(), GateError::Cancelled);
    assert_eq!(
        gate.timer().now(),
        Duration::ZERO,
        "cancelled before the budget"
    );
    assert_eq!(log.sheds(), 0);
    assert_eq!(gate.waiters(), 0);
    // Nothing was granted to the cancelled caller: the units come back whole.
    drop(held);
    assert_eq!(gate.in_use(), 0);
    assert!(gate.try_acquire(1, Route::Upload).is_ok());
}

#[tokio::test(start_paused = true)]
async fn dropping_a_parked_acquire_at_the_head_lets_the_next_waiter_in() {
    let (gate, log) = gate(2);
    let _held = gate.acquire(1, Route::Upload).await.unwrap();
    log.take();

    // Head of the queue: needs both units, one is free.
    let mut head = Box::pin(gate.acquire(2, Route::Mirror));
    assert!(poll_once(head.as_mut()).await.is_pending());
    // Behind it: needs the one free unit, but may not barge past the head.
    let behind = tokio::spawn({
        let gate = gate.clone();
        async move { gate.acquire(1, Route::Upload).await }
    });
    until_waiters(&gate, 2).await;

    drop(head);

    let permit = tokio::time::timeout(BUDGET / 2, behind)
        .await
        .expect("the waiter behind a dropped head is re-examined at once")
        .unwrap()
        .unwrap();
    assert_eq!(permit.units(), 1);
    assert_eq!(gate.timer().now(), Duration::ZERO);
    assert_eq!(log.take(), vec![Event::Admit("upload", 1, Duration::ZERO)]);
    assert_eq!(gate.in_use(), 2);
    assert_eq!(gate.waiters(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_dropped_acquire_counts_nothing_and_loses_no_unit() {
    let (gate, log) = gate(1);
    let held = gate.acquire(1, Route::Upload).await.unwrap();
    log.take();
    {
        let parked = pin!(gate.acquire(1, Route::Mirror));
        assert!(poll_once(parked).await.is_pending());
        assert_eq!(gate.waiters(), 1);
    }
    assert_eq!(gate.waiters(), 0);
    // Past the dropped caller's budget: its deadline must not count a shed.
    tokio::time::advance(2 * BUDGET).await;
    drop(held);
    assert_eq!(gate.in_use(), 0);
    assert_eq!(log.sheds(), 0);
    assert!(gate.try_acquire(1, Route::Mirror).is_ok());
}

#[test]
#[should_panic(expected = "admit_tokio::gate called outside a Tokio runtime")]
fn a_gate_built_outside_a_runtime_panics_at_once_naming_the_cause() {
    // Without the check it builds, and the first acquire that parks panics inside
    // Tokio's timer, far from the cause (under smol: "there is no reactor running").
    let _ = admit_tokio::gate::<Route>(1);
}
