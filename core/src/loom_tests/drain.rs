//! Drain against the last releases: the drain waiter completes once every unit is
//! back, whichever release is last and whenever the drain parks.

use std::sync::Arc;

use super::support::{without, DEADLOCK};
use crate::mechanism::Mechanism;
use crate::Semaphore;
use loom::future::block_on;
use loom::thread;

/// The last unit comes back on another thread while the drain closes, checks,
/// parks and joins.
fn last_release_against_the_drain() {
    let sem = Arc::new(Semaphore::new(2));
    let last = sem.clone().try_acquire_owned(2).unwrap();
    let releaser = thread::spawn(move || drop(last));
    block_on(sem.drain());
    assert_eq!(sem.available(), 2, "drained with a unit still out");
    releaser.join().unwrap();
    assert!(sem.is_closed());
    assert_eq!(sem.waiters(), 0);
}

#[test]
fn drain_completes_with_the_last_release() {
    loom::model(last_release_against_the_drain);
}

/// Negative control: if a close pass left `QUEUED` clear over a waiting drain, the
/// last release would serve nobody.
#[test]
fn without_queued_the_last_release_misses_the_drain() {
    without(
        Mechanism::DrainKeepsQueued,
        DEADLOCK,
        last_release_against_the_drain,
    );
}
