//! Node reclamation: a parker pushes its node and cancels it while a server takes
//! the stacks, so the node may be named by an arrival and a cancel entry in one
//! pass or in two, or be granted before the cancel. Loom checks that every node (a
//! `loom::sync::Arc`) is freed exactly once: a leak fails the model, and so does a
//! second free.

use core::task::Waker;
use std::boxed::Box;
use std::sync::Arc;

use super::support::{assert_idle, poll_once, without};
use crate::mechanism::Mechanism;
use crate::Semaphore;
use loom::future::block_on;
use loom::thread;

/// `first` is parked when the model starts, so the release serves; meanwhile the
/// canceller parks `X` and `Z` behind it and drops `X`, then `Z`. `Z` above `X`
/// keeps `X`'s cancel from withdrawing it, so `X` leaves by a cancel entry (`Z`
/// may withdraw; `withdrawal.rs` races that).
fn cancel_racing_the_server() {
    let semaphore = Arc::new(Semaphore::new(1));
    let held = semaphore.clone().try_acquire_owned(1).unwrap();
    let mut first = Box::pin(semaphore.clone().acquire_owned(1));
    assert!(poll_once(first.as_mut(), Waker::noop()).is_pending());
    let canceller = {
        let semaphore = semaphore.clone();
        thread::spawn(move || {
            let mut x = Box::pin(semaphore.clone().acquire_owned(1));
            let _ = poll_once(x.as_mut(), Waker::noop());
            let mut z = Box::pin(semaphore.acquire_owned(1));
            let _ = poll_once(z.as_mut(), Waker::noop());
            drop(x); // a cancel, or the return of a grant not yet seen
            drop(z);
        })
    };
    drop(held); // the server: grants `first`, meets X's arrival and cancel
    drop(block_on(first).expect("not closed"));
    canceller.join().unwrap();
    assert_idle(&semaphore);
}

#[test]
fn every_node_is_freed_once() {
    loom::model(cancel_racing_the_server);
}

/// Negative control: a server that forgets the queue's share of the nodes it is
/// done with leaks them.
#[test]
fn a_share_never_let_go_leaks() {
    without(
        Mechanism::ReleaseShare,
        "Arc leaked",
        cancel_racing_the_server,
    );
}

/// Negative control: a server that takes the arrivals before the cancel entries
/// can meet an entry for a node pushed after its arrival swap, and let go of it
/// while the node is still on the arrivals stack, to be read again (freed) on the
/// next pass. The server's check on each entry's node reports it first.
#[test]
fn taking_arrivals_first_lets_an_entry_overtake_its_node() {
    without(
        Mechanism::CancelsFirst,
        "a cancel entry overtook its node's arrival",
        cancel_racing_the_server,
    );
}
