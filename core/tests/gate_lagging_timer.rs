//! A timer whose sleeps fire late (here: never) still cannot keep a caller past its
//! deadline: any poll after the clock passed the deadline sheds.
// Needs the `alloc` feature (the feature powerset builds every test target).
#![cfg(feature = "alloc")]

use std::future::{Future, Pending};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use admit::{Gate, GateError, Timer};

admit::sources! {
    enum Src { Upload => "upload" }
}

/// A clock the test sets, whose sleeps never complete.
#[derive(Clone, Default)]
struct LaggingTimer(Arc<AtomicU64>);

impl Timer for LaggingTimer {
    type Sleep = Pending<()>;
    fn now(&self) -> Duration {
        Duration::from_millis(self.0.load(Ordering::SeqCst))
    }
    fn sleep_until(&self, _deadline: Duration) -> Pending<()> {
        std::future::pending()
    }
}

#[test]
fn a_repoll_past_the_deadline_sheds_even_if_the_sleep_has_not_fired() {
    let timer = LaggingTimer::default();
    let gate = Gate::<Src, _, _>::builder(1)
        .wait_budget(Duration::from_secs(5))
        .timer(timer.clone())
        .build()
        .unwrap();
    let _held = gate.try_acquire(1, Src::Upload).unwrap();
    let mut waiter = Box::pin(gate.acquire(1, Src::Upload));
    let mut cx = Context::from_waker(Waker::noop());
    assert!(waiter.as_mut().poll(&mut cx).is_pending());

    timer.0.store(4_999, Ordering::SeqCst);
    assert!(
        waiter.as_mut().poll(&mut cx).is_pending(),
        "1 ms before the deadline"
    );
    timer.0.store(5_000, Ordering::SeqCst);
    match waiter.as_mut().poll(&mut cx) {
        Poll::Ready(Err(GateError::Busy { .. })) => {}
        other => panic!("expected Busy at the deadline, got {other:?}"),
    }
    assert_eq!(gate.waiters(), 0, "the shed caller left the queue");
}
