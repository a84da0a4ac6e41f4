//! One parked request: its node, the status word that decides who resolves it, and
//! who owns its memory.
//!
//! Without `alloc` only: with it, a parked request lives in a cell of the
//! segment list (`cell_queue.rs`). Its status word and waker are a
//! [`WaitStatus`], with one more bit: `QUEUE_REF`.
//!
//! # Who owns the node
//!
//! The node lives inside the pinned acquire future, and the queue refers to it
//! from the push onto the arrivals stack until the server lets go (or until the
//! owner withdraws the node from the stack's top before any server took it): the
//! `QUEUE_REF` bit. The future's drop spins until the queue clears it, the one
//! place the crate waits for another thread (see docs/design.md, "Progress").
//!
//! # Cells and who touches them
//!
//! - `status`: see [`WaitStatus`].
//! - `next_arrival`: the parker before the push publishes it; then the server.
//! - `below`: the owner only (its copy of `next_arrival` as pushed, to withdraw
//!   the node; see `WaitQueue::withdraw_arrival`).
//! - `next_cancelled`: the canceller before its push publishes it; then the server.
//! - `links`: the server only.

use core::marker::PhantomPinned;
use core::pin::Pin;
use core::ptr::NonNull;
use core::task::Waker;

use super::wait_status::{status, WaitStatus};
use crate::loom::sync::{Ordering, UnsafeCell};
use crate::mechanism::Mechanism;

/// A parked request.
pub(crate) struct Waiter {
    /// Units requested; immutable.
    pub(crate) units: usize,
    /// Phase, flags and waker.
    pub(crate) status: WaitStatus,
    /// # Safety
    /// Written before the arrivals push, then the server's.
    next_arrival: StackLink,
    /// # Safety
    /// The owner's only: the node below this one on the arrivals stack, as pushed.
    below: StackLink,
    /// # Safety
    /// Written before the cancelled push, then the server's.
    next_cancelled: StackLink,
    /// # Safety
    /// The server's only.
    links: UnsafeCell<Links>,
}

// SAFETY: the raw pointers are links between nodes that the protocol above hands
// from one thread to the next with release/acquire pairs; the waker is `Send`.
unsafe impl Send for Waiter {}
// SAFETY: every cell is accessed by one party at a time, as the module docs set
// out, and each hand-over is a release/acquire pair on an atomic.
unsafe impl Sync for Waiter {}

/// A node's link in one of the push-only stacks: the address of the next node,
/// with exposed provenance.
///
/// Why an address: a pusher links its node to the head it read, and its CAS
/// succeeds if the head still has that *address*. Between the read and the CAS the
/// node there may have been taken by the server, freed, and its memory reused by a
/// new node now at the head (ABA). The link is then right (it names the node at the
/// head), but a pointer read before the reuse carries the freed node's provenance,
/// and following it would be undefined behaviour in Rust's memory model even though
/// the address is live. Every node's provenance is exposed when it is pushed, and
/// the server rebuilds each link with [`core::ptr::with_exposed_provenance_mut`],
/// which takes the provenance of the node that lives at the address now.
pub(crate) struct StackLink(UnsafeCell<usize>);

impl StackLink {
    fn new() -> Self {
        Self(UnsafeCell::new(0))
    }

    /// # Safety
    /// The caller may touch this link (module docs: "Cells and who touches them").
    pub(crate) unsafe fn get(&self) -> Option<NonNull<Waiter>> {
        // SAFETY: the caller's contract.
        let addr = self.0.with_mut(|a| unsafe { *a });
        NonNull::new(core::ptr::with_exposed_provenance_mut(addr))
    }

    /// # Safety
    /// The caller may touch this link (module docs).
    pub(crate) unsafe fn set(&self, next: *mut Waiter) {
        let addr = next.expose_provenance();
        // SAFETY: the caller's contract.
        self.0.with_mut(|a| unsafe { *a = addr });
    }
}

/// The server's doubly linked list links, and where the node is for the server.
#[derive(Clone, Copy)]
pub(crate) struct Links {
    pub(crate) prev: Option<NonNull<Waiter>>,
    pub(crate) next: Option<NonNull<Waiter>>,
    pub(crate) place: Place,
}

/// Where a node is, as the server sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Place {
    /// Not yet taken from the arrivals stack.
    Arriving,
    /// In the list.
    Linked,
    /// Out of the list (or never put in, being cancelled on arrival).
    Unlinked,
}

impl Waiter {
    fn new(units: usize) -> Waiter {
        Waiter {
            units,
            status: WaitStatus::new(status::WAITING | status::QUEUE_REF),
            next_arrival: StackLink::new(),
            below: StackLink::new(),
            next_cancelled: StackLink::new(),
            links: UnsafeCell::new(Links {
                prev: None,
                next: None,
                place: Place::Arriving,
            }),
        }
    }

    /// The phase (see [`WaitStatus::phase`]).
    #[inline]
    pub(crate) fn phase(&self) -> usize {
        self.status.phase()
    }

    /// The link of the arrivals stack.
    pub(crate) fn next_arrival(&self) -> &StackLink {
        &self.next_arrival
    }

    /// The owner's copy of the arrivals link, as pushed.
    pub(crate) fn below(&self) -> &StackLink {
        &self.below
    }

    /// The link of the cancelled stack.
    pub(crate) fn next_cancelled(&self) -> &StackLink {
        &self.next_cancelled
    }

    /// # Safety
    /// The caller is the server.
    pub(crate) unsafe fn links(&self) -> Links {
        // SAFETY: the caller's contract.
        self.links.with_mut(|l| unsafe { *l })
    }

    /// # Safety
    /// The caller is the server.
    pub(crate) unsafe fn set_links(&self, links: Links) {
        // SAFETY: the caller's contract.
        self.links.with_mut(|l| unsafe { *l = links });
    }

    /// # Safety
    /// The caller is the server.
    pub(crate) unsafe fn set_place(&self, place: Place) {
        // SAFETY: the caller's contract.
        self.links.with_mut(|l| unsafe { (*l).place = place });
    }
}

/// The queue lets go of `node`: the last touch of the node by the queue.
///
/// # Safety
/// `node` came from [`NodeSlot::park`], the queue still refers to it, and it
/// never touches the node again.
pub(crate) unsafe fn release_queue_ref(node: NonNull<Waiter>) {
    // Under loom, stand in for this last touch being a use of the node's
    // memory: a read of the server's cell, which loom reports as a race with
    // the owner's stand-in for freeing it (`NodeSlot::drop`) if the owner could
    // get there first.
    #[cfg(all(test, admit_loom))]
    // SAFETY: the server's cell; the owner writes it only after this bit is
    // clear (the drop's wait), which the read below comes before.
    unsafe { node.as_ref() }.links.with(|_| ());
    // SAFETY: the owner's drop waits for this bit before the memory goes, so the
    // node is valid here. `Release`: everything the queue did to the node
    // happens-before the owner's `Acquire` read of the cleared bit.
    unsafe { node.as_ref() }
        .status
        .word
        .fetch_and(!status::QUEUE_REF, Ordering::Release);
}

/// An acquire future's node, inline: the future is pinned.
pub(crate) struct NodeSlot {
    node: Waiter,
    parked: bool,
    _pinned: PhantomPinned,
}

impl NodeSlot {
    #[inline]
    pub(crate) fn new(units: usize) -> Self {
        Self {
            node: Waiter::new(units),
            parked: false,
            _pinned: PhantomPinned,
        }
    }

    /// The node, once parked.
    #[inline]
    pub(crate) fn get(&self) -> Option<&Waiter> {
        self.parked.then_some(&self.node)
    }

    /// The pointer the queue goes by, once parked.
    #[inline]
    pub(crate) fn share(&self) -> Option<NonNull<Waiter>> {
        self.parked.then(|| NonNull::from(&self.node))
    }

    /// Stores the first waker and returns the node's address for the queue,
    /// valid until the queue clears `QUEUE_REF` (the slot's drop waits).
    pub(crate) fn park(self: Pin<&mut Self>, units: usize, waker: Waker) -> NonNull<Waiter> {
        debug_assert_eq!(units, self.node.units);
        // SAFETY: nothing is moved out; the node stays where the pin put it.
        let this = unsafe { self.get_unchecked_mut() };
        debug_assert!(!this.parked);
        // SAFETY: not parked yet, so nobody else can see the node.
        unsafe { this.node.status.set_waker(Some(waker)) };
        this.parked = true;
        NonNull::from(&this.node)
    }
}

impl Drop for NodeSlot {
    fn drop(&mut self) {
        if !self.parked {
            return;
        }
        // The one wait in the crate, without `alloc` only: the queue may still
        // read the node. The owner's drop resolved it first (cancel or grant),
        // after which the server lets go within a bounded number of its steps.
        while Mechanism::DropWaitsForQueue.on()
            && self.node.status.word.load(Ordering::Acquire) & status::QUEUE_REF != 0
        {
            crate::loom::sync::spin_loop();
        }
        // Under loom, stand in for the memory going away: a write to the
        // server's cell, which loom reports as a race if the queue could still
        // touch the node.
        #[cfg(all(test, admit_loom))]
        // SAFETY: the queue let go of the node (the wait above), so its cells
        // are the owner's again.
        unsafe {
            self.node.set_place(Place::Unlinked);
        }
    }
}
