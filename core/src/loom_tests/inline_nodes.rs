//! Without `alloc` the wait node lives in the future, and a future's drop waits
//! until the queue has let go of its node: the one wait in the crate. These models
//! run that build (`ci/loom.sh` runs this file with `--no-default-features`): a
//! parked future dropped while another thread serves, a granted one dropped while
//! the server is still finishing with its node, a parked one dropped while a
//! close resolves it, and a join after its own grant.
//! Loom checks the drop never returns while the server can still touch the node
//! (a cell access after the drop would race the next use of that memory), that no
//! stale `QUEUED` is left, and that nothing hangs.

use core::task::Waker;
use std::boxed::Box;

use super::support::{assert_idle, leak, poll_once, without};
use crate::mechanism::Mechanism;
use crate::Semaphore;
use loom::future::block_on;
use loom::thread;

/// X is parked behind nothing; its drop races the release that grants it, so the
/// drop meets a parked node (cancel, then wait for the server to let go), a node
/// mid-grant, or a grant it returns.
#[test]
fn drop_waits_for_the_server_to_let_go() {
    loom::model(|| {
        let semaphore = leak(Semaphore::new(1));
        let held = semaphore.try_acquire(1).unwrap();
        let dropper = {
            thread::spawn(move || {
                let mut x = Box::pin(semaphore.acquire(1));
                let _ = poll_once(x.as_mut(), Waker::noop());
                drop(x);
            })
        };
        drop(held);
        dropper.join().unwrap();
        assert_idle(semaphore);
    });
}

/// A waiter granted on another thread completes and is dropped at once, while the
/// granting thread may still be finishing with its node.
#[test]
fn a_granted_future_dropped_at_once() {
    loom::model(|| {
        let semaphore = leak(Semaphore::new(1));
        let held = semaphore.try_acquire(1).unwrap();
        let mut waiter = Box::pin(semaphore.acquire(1));
        assert!(poll_once(waiter.as_mut(), Waker::noop()).is_pending());
        let releaser = thread::spawn(move || drop(held));
        drop(block_on(waiter).expect("not closed"));
        releaser.join().unwrap();
        assert_idle(semaphore);
    });
}

/// A close resolves a parked request while its owner drops it on another thread:
/// whichever wins, nothing comes back that was not taken (a close takes no
/// units, so a close that lost to the cancel gives nothing back), and the drop
/// returns only once the close has let go of the node.
#[test]
fn a_close_racing_a_drop_gives_back_nothing() {
    loom::model(|| {
        let semaphore = leak(Semaphore::new(1));
        let held = semaphore.try_acquire(1).unwrap();
        let mut x = Box::pin(semaphore.acquire(1));
        assert!(poll_once(x.as_mut(), Waker::noop()).is_pending());
        let dropper = thread::spawn(move || drop(x));
        semaphore.close();
        dropper.join().unwrap();
        drop(held);
        assert_idle(semaphore);
    });
}

/// Negative control: a drop that does not wait for the queue to let go of the node
/// frees memory the server still touches (a race loom reports).
#[test]
fn a_drop_that_does_not_wait_races_the_server() {
    super::support::without(
        crate::mechanism::Mechanism::DropWaitsForQueue,
        "Causality violation",
        || {
            let semaphore = leak(Semaphore::new(1));
            let held = semaphore.try_acquire(1).unwrap();
            let dropper = thread::spawn(move || {
                let mut x = Box::pin(semaphore.acquire(1));
                let _ = poll_once(x.as_mut(), Waker::noop());
                drop(x);
            });
            drop(held);
            dropper.join().unwrap();
        },
    );
}

/// The first waiter is parked; the second pushes its node while the release's
/// server takes the arrivals, so the server grants the second before its join
/// (as `arrival_vs_serving`'s model of the same name, with the nodes in the
/// futures). That join sets `QUEUED` again over nobody: it must read its node's
/// phase, see the grant and ask for service, or the fast path stays refused with
/// a unit free.
///
/// A copy, not a shared model: that one needs owned permits (`alloc`), and
/// this one's leaked semaphore would, with `alloc`, leak its segments, which
/// loom reports.
fn granted_before_its_join() {
    let semaphore = leak(Semaphore::new(4));
    let held = semaphore.try_acquire(4).unwrap();
    let mut first = Box::pin(semaphore.acquire(1));
    assert!(poll_once(first.as_mut(), Waker::noop()).is_pending());
    let second = thread::spawn(move || block_on(semaphore.acquire(2)).expect("not closed"));
    drop(held);
    let second = second.join().unwrap();
    let first = block_on(first).expect("not closed");
    assert_eq!(semaphore.waiters(), 0);
    let third = semaphore.try_acquire(1);
    assert!(
        third.is_ok(),
        "a stale QUEUED refused the fast path: {semaphore:?}"
    );
    drop((first, second, third));
    assert_idle(semaphore);
}

#[test]
fn a_join_after_its_own_grant_leaves_no_stale_queued() {
    loom::model(granted_before_its_join);
}

/// Negative control: the join that finds its node granted does not ask for
/// service, and `QUEUED` stays set over an empty queue.
#[test]
fn without_serving_a_resolved_join_queued_goes_stale() {
    without(
        Mechanism::JoinServesResolved,
        "a stale QUEUED refused the fast path",
        granted_before_its_join,
    );
}
