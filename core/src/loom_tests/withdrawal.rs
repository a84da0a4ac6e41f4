//! A cancel withdrawing its node from the arrivals stack while another parker
//! pushes and a server takes the stack: the withdrawal succeeds only while the node
//! is on top and untaken, every other arrival stays on the stack, and every node is
//! let go of exactly once (by the future after a withdrawal, by the server
//! otherwise). Without `alloc`, the build whose queue has stacks.

use core::task::Waker;
use std::boxed::Box;

use super::support::{assert_idle, heavy, leak, poll_once, without};
use crate::mechanism::Mechanism;
use crate::Semaphore;
use loom::future::block_on;
use loom::thread;

/// The unit is held; `X` parks and gives up (its cancel withdraws `X` or pushes an
/// entry) while `Y` parks and waits, pushed above or below `X`, and the release
/// serves. `Y` must be granted, and the semaphore end idle.
fn withdrawal_racing_a_push_and_a_server() {
    let semaphore = leak(Semaphore::new(1));
    let held = semaphore.try_acquire(1).unwrap();
    let canceller = {
        thread::spawn(move || {
            let mut x = Box::pin(semaphore.acquire(1));
            let _ = poll_once(x.as_mut(), Waker::noop());
            drop(x); // a cancel (withdrawn or pushed), or the return of a grant
        })
    };
    let waiter =
        { thread::spawn(move || drop(block_on(semaphore.acquire(1)).expect("not closed"))) };
    drop(held); // the server
    canceller.join().unwrap();
    waiter.join().unwrap();
    assert_idle(semaphore);
}

/// Heavy (`support::heavy`): about four minutes at `LOOM_MAX_PREEMPTIONS=3`
/// with the futures' drops spinning for the server, so CI runs it at 2.
#[test]
fn a_withdrawal_loses_no_arrival() {
    heavy(withdrawal_racing_a_push_and_a_server);
}

/// Negative control: a withdrawal by a blind store, after the check that its node
/// is on top, can undo a server's take of the stack (putting back a node the server
/// took) or drop a push that landed above the node meanwhile. Loom meets the first:
/// the server handles the node again after its owner's drop took it back, a race
/// on the node's cells.
#[test]
fn a_blind_withdrawal_corrupts_the_stack() {
    without(
        Mechanism::WithdrawCas,
        "Causality violation",
        withdrawal_racing_a_push_and_a_server,
    );
}

/// Negative control: a withdrawal that reads `next_arrival` instead of its own copy
/// races with a server that took the stack and is relinking it.
#[test]
fn reading_the_shared_link_races_with_the_server() {
    without(
        Mechanism::WithdrawOwnCopy,
        "Causality violation",
        withdrawal_racing_a_push_and_a_server,
    );
}
