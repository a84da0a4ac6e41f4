//! Node reclamation, without `alloc`: a parker pushes its node and cancels it
//! while a server takes the stacks, so the node may be named by an arrival and a
//! cancel entry in one pass or in two, or be granted before the cancel. The queue
//! lets go of every node exactly once: a node never let go keeps its future's drop
//! waiting, and a server that touches a node after letting go of it races the
//! owner's stand-in for freeing it (`NodeSlot::drop`).

use core::task::Waker;
use std::boxed::Box;

use super::support::{assert_idle, heavy, leak, poll_once, without};
use crate::mechanism::Mechanism;
use crate::Semaphore;
use loom::future::block_on;
use loom::thread;

/// `first` is parked when the model starts, so the release serves; meanwhile the
/// canceller parks `X` and `Z` behind it and drops `X`, then `Z`. `Z` above `X`
/// keeps `X`'s cancel from withdrawing it, so `X` leaves by a cancel entry (`Z`
/// may withdraw; `withdrawal.rs` races that).
fn cancel_racing_the_server() {
    let semaphore = leak(Semaphore::new(1));
    let held = semaphore.try_acquire(1).unwrap();
    let mut first = Box::pin(semaphore.acquire(1));
    assert!(poll_once(first.as_mut(), Waker::noop()).is_pending());
    let canceller = {
        thread::spawn(move || {
            let mut x = Box::pin(semaphore.acquire(1));
            let _ = poll_once(x.as_mut(), Waker::noop());
            let mut z = Box::pin(semaphore.acquire(1));
            let _ = poll_once(z.as_mut(), Waker::noop());
            drop(x); // a cancel, or the return of a grant not yet seen
            drop(z);
        })
    };
    drop(held); // the server: grants `first`, meets X's arrival and cancel
    drop(block_on(first).expect("not closed"));
    canceller.join().unwrap();
    assert_idle(semaphore);
}

/// Heavy (`support::heavy`): about four minutes at `LOOM_MAX_PREEMPTIONS=3`
/// with the futures' drops spinning for the server, so CI runs it at 2.
#[test]
fn every_node_is_freed_once() {
    heavy(cancel_racing_the_server);
}

/// Negative control: a server that never lets go of the nodes it is done with
/// (never clears `QUEUE_REF`) leaves their futures' drops waiting for ever, which
/// loom reports as a spin that never ends.
#[test]
fn a_node_never_let_go_keeps_its_drop_waiting() {
    without(
        Mechanism::ReleaseShare,
        "Model exceeded maximum number of branches",
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
