//! The cell queue's own hazard: a parker that has claimed a ticket but not yet
//! published its cell when the server reaches it. With units free the server
//! breaks the cell and moves on (the parker, which had not joined, claims again);
//! with none free it stops there (the parker's join, or a release after it,
//! serves). Under loom a segment holds two cells, so three parkers cross a
//! segment boundary.

use std::sync::Arc;

use super::support::{assert_idle, without, DEADLOCK};
use crate::mechanism::Mechanism;
use crate::Semaphore;
use loom::future::block_on;
use loom::thread;

/// The unit is held; `A` and `B` park on their own threads, in either order and
/// with the release anywhere around their claims, publishes and joins. Both are
/// granted, one after the other.
fn parkers_racing_the_release() {
    let semaphore = Arc::new(Semaphore::new(1));
    let held = semaphore.try_acquire(1).unwrap();
    let parkers: std::vec::Vec<_> = (0..2)
        .map(|_| {
            let semaphore = semaphore.clone();
            thread::spawn(move || drop(block_on(semaphore.acquire(1)).expect("not closed")))
        })
        .collect();
    drop(held);
    for parker in parkers {
        parker.join().unwrap();
    }
    assert_idle(&semaphore);
}

#[test]
fn an_unpublished_cell_does_not_hold_up_the_queue() {
    loom::model(parkers_racing_the_release);
}

/// Negative control: a server that waits at an unpublished cell while units are
/// free. Its owner publishes and joins behind a `QUEUED` the other parker set,
/// so its join does not serve: both wait for ever with the unit free.
#[test]
fn waiting_at_an_unpublished_cell_strands_the_queue() {
    without(
        Mechanism::BreakUnpublished,
        DEADLOCK,
        parkers_racing_the_release,
    );
}
