//! The critical-section queue's own promise: no drop waits for a server.

use core::future::Future;
use core::pin::pin;
use core::task::{Context, Waker};

use crate::Semaphore;

/// A server is away mid-pass (it holds the role and will not come back before
/// this thread goes on, as when an interrupt handler preempts it): a parked
/// future dropped now lets go of its node at once and leaves the work to the
/// server. A drop that waited for the server to let go of the node would never
/// return here.
#[test]
fn a_parked_future_dropped_while_a_server_is_away_never_waits() {
    let sem = Semaphore::new(1);
    let held = sem.try_acquire(1).unwrap();
    let mut cx = Context::from_waker(Waker::noop());
    let mut first = pin!(Some(sem.acquire(1)));
    let mut second = pin!(sem.acquire(1));
    assert!(first
        .as_mut()
        .as_pin_mut()
        .unwrap()
        .poll(&mut cx)
        .is_pending());
    assert!(second.as_mut().poll(&mut cx).is_pending());

    assert!(sem.role.take(), "the role was free");
    drop(held); // asks the away server for service
    first.set(None);
    assert_eq!(sem.waiters(), 1, "the cancelled node is gone at once");

    // The server comes back and serves what was asked of it meanwhile.
    sem.serve_as_holder();
    assert!(second.as_mut().poll(&mut cx).is_ready());
}
