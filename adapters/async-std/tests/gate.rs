//! A gate on async-std's runtime: a parked waiter admitted by a release from another
//! task, and a wait-budget expiry. Real time is the only clock here: the hand-off is
//! ordered by explicit signals, and the expiry test asserts only the outcome and that
//! the timer reached the deadline.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use admit::{AdmitEvent, Gate, GateError, Observer, ShedEvent, Timer};
use admit_async_std::AsyncStdTimer;
use async_std::channel;

admit::sources! {
    /// Call sites of the tests.
    enum Route {
        Upload => "upload",
        Mirror => "mirror",
    }
}

/// Counts the gate's admissions and sheds.
#[derive(Debug, Default)]
struct Counts {
    admits: AtomicUsize,
    sheds: AtomicUsize,
}

impl Observer for Counts {
    fn on_admit(&self, _: &AdmitEvent) {
        self.admits.fetch_add(1, Ordering::SeqCst);
    }
    fn on_shed(&self, _: &ShedEvent) {
        self.sheds.fetch_add(1, Ordering::SeqCst);
    }
}

type TestGate = Gate<Route, AsyncStdTimer, Arc<Counts>>;

fn gate(capacity: usize, budget: Duration) -> (TestGate, Arc<Counts>) {
    let counts = Arc::new(Counts::default());
    let gate = admit_async_std::gate(capacity)
        .wait_budget(budget)
        .observer(Arc::clone(&counts))
        .build()
        .unwrap();
    (gate, counts)
}

#[async_std::test]
async fn a_parked_waiter_is_admitted_by_a_release_from_another_task() {
    // Far beyond the test's run time: only the release can end the wait in time (a
    // lost wake-up would show as a shed after it).
    let (gate, counts) = gate(1, Duration::from_secs(30));
    let held = gate.acquire(1, Route::Upload).await.unwrap();

    let waiter = async_std::task::spawn({
        let gate = gate.clone();
        async move { gate.acquire(1, Route::Mirror).await }
    });
    while gate.waiters() == 0 {
        async_std::task::yield_now().await;
    }

    let (release, released) = channel::bounded::<()>(1);
    let holder = async_std::task::spawn(async move {
        released.recv().await.unwrap();
        drop(held);
    });
    release.send(()).await.unwrap();
    holder.await;

    let permit = waiter.await.expect("admitted by the release, not shed");
    assert_eq!(permit.source(), Route::Mirror);
    assert_eq!(gate.in_use(), 1);
    assert_eq!(counts.admits.load(Ordering::SeqCst), 2);
    assert_eq!(counts.sheds.load(Ordering::SeqCst), 0);
}

#[async_std::test]
async fn a_full_gate_sheds_once_the_budget_has_passed() {
    let budget = Duration::from_millis(20);
    let (gate, counts) = gate(1, budget);
    let _held = gate.acquire(1, Route::Upload).await.unwrap();
    let parked_at = gate.timer().now();
    let err = gate.acquire(1, Route::Mirror).await.unwrap_err();
    assert!(matches!(err, GateError::Busy { .. }), "{err:?}");
    assert!(gate.timer().now() >= parked_at + budget);
    assert_eq!(counts.sheds.load(Ordering::SeqCst), 1);
    assert_eq!(gate.waiters(), 0);
}
