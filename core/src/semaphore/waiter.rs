//! One parked request: its node, the status word that decides who resolves it, and
//! who owns its memory.
//!
//! # The status word
//!
//! ```text
//!  bit 4        bit 3          bits 2..0
//! [QUEUE_REF] [REGISTERING] [ phase: WAITING | GRANTED | CLOSED | CANCELLED | EXCEEDS ]
//! ```
//!
//! The phase leaves `WAITING` exactly once, by one CAS, and whoever wins it resolves
//! the node: the server (`GRANTED` after taking the units, `CLOSED`, `EXCEEDS` when
//! the capacity fell below the request) or the owner (`CANCELLED`). A node of 0
//! units is a drain waiter: the server grants it, taking nothing, once the
//! semaphore is closed and every unit is back. The loser has a duty: a server that lost to a cancel gives its
//! units back; an owner that lost to a grant releases the units it will never take.
//!
//! `REGISTERING` is the owner's claim on the waker cell while it swaps in a new
//! waker (a re-poll). A server that resolves the node while it is set leaves the
//! cell alone and keeps the bit; the owner, whose CAS back to `WAITING` then fails,
//! sees the phase and needs no wake-up. So neither side waits for the other
//! (the futures crate's `AtomicWaker`, folded into the phase word).
//!
//! # Who owns the node
//!
//! Two owners: the acquire future and the queue (from the push onto the arrivals
//! stack until the server lets go, or until the owner withdraws the node from the
//! stack's top before any server took it). With `alloc` the node is an `Arc` and the
//! queue's share is a leaked strong count, so a dropped future leaves at once, never
//! waiting for the server. A future whose cancel won hands its own share over
//! with the cancel entry instead of dropping it: the server then holds both and
//! frees the node when it takes the entry, and the canceller touches no count. Without `alloc` the node lives inside the pinned future
//! and the queue's share is the `QUEUE_REF` bit: the future's drop spins until the
//! server clears it, the one place the crate waits for another thread (see
//! docs/design.md, "Progress").
//!
//! # Cells and who touches them
//!
//! - `waker`: the owner before the push; then whoever holds `REGISTERING` (owner)
//!   or won the phase CAS (server or owner).
//! - `next_arrival`: the parker before the push publishes it; then the server.
//! - `below`: the owner only (its copy of `next_arrival` as pushed, to withdraw
//!   the node; see `WaitQueue::withdraw_arrival`).
//! - `next_cancelled`: the canceller before its push publishes it; then the server.
//! - `links`: the server only.

use core::marker::PhantomPinned;
use core::pin::Pin;
use core::ptr::NonNull;
use core::task::Waker;

#[cfg(feature = "alloc")]
use crate::loom::sync::Arc;
use crate::loom::sync::{AtomicUsize, Ordering, UnsafeCell};
use crate::mechanism::Mechanism;

/// Values and bits of a node's status word.
pub(crate) mod status {
    /// In the queue, or on its way in: waiting for units.
    pub(crate) const WAITING: usize = 0;
    /// The server took the units for it; its owner now owns them.
    pub(crate) const GRANTED: usize = 1;
    /// The server resolved it because the semaphore closed.
    pub(crate) const CLOSED: usize = 2;
    /// The owner gave up (its future was dropped while waiting).
    pub(crate) const CANCELLED: usize = 3;
    /// The server resolved it because the capacity fell below its request.
    pub(crate) const EXCEEDS: usize = 4;
    /// Mask of the phase.
    pub(crate) const PHASE: usize = 7;
    /// The owner is swapping the waker.
    pub(crate) const REGISTERING: usize = 1 << 3;
    /// Without `alloc`: the queue still refers to the node.
    #[cfg(not(feature = "alloc"))]
    pub(crate) const QUEUE_REF: usize = 1 << 4;
}

/// A parked request.
pub(crate) struct Waiter {
    /// Units requested; immutable.
    pub(crate) units: usize,
    /// Phase and flags; see the module docs.
    status: AtomicUsize,
    /// # Safety
    /// See the module docs, "Cells and who touches them".
    waker: UnsafeCell<Option<Waker>>,
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
            status: AtomicUsize::new(status::WAITING),
            waker: UnsafeCell::new(None),
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

    /// Stores the first waker, before the node is shared.
    ///
    /// # Safety
    /// The caller has the only access to the node.
    unsafe fn prepare(&self, waker: Waker) {
        // SAFETY: the caller's contract: nobody else can see the node yet.
        self.waker.with_mut(|w| unsafe { *w = Some(waker) });
        #[cfg(not(feature = "alloc"))]
        self.status
            .store(status::WAITING | status::QUEUE_REF, Ordering::Relaxed);
    }

    /// The phase, with `Acquire`: once it reads `GRANTED`, the owner sees the units
    /// handed over (the server's take and everything before it).
    #[inline]
    pub(crate) fn phase(&self) -> usize {
        self.status.load(Ordering::Acquire) & status::PHASE
    }

    /// The owner's re-poll: swaps in `waker` unless the node was resolved, then
    /// returns the phase. A `WAITING` result means `waker` will be woken on
    /// resolution; any other is final.
    ///
    /// The clone is made before `REGISTERING` is taken (a waker clone is user code
    /// and may panic), and the waker it replaces is dropped after it is released.
    pub(crate) fn register(&self, waker: &Waker) -> usize {
        // `Acquire` on every read that may return a final phase (see `phase`).
        let phase = self.phase();
        if phase != status::WAITING {
            return phase;
        }
        let new = waker.clone();
        let mut current = self.status.load(Ordering::Acquire);
        loop {
            if current & status::PHASE != status::WAITING {
                return current & status::PHASE;
            }
            match self.status.compare_exchange_weak(
                current,
                current | status::REGISTERING,
                Ordering::Acquire,
                Ordering::Acquire,
            ) {
                Ok(_) => break,
                Err(actual) => current = actual,
            }
        }
        // SAFETY: `REGISTERING` is ours and the phase was `WAITING`: a server that
        // resolves the node now keeps off the cell (module docs).
        // Always the swap: the clone is made already, so keeping an equivalent
        // old waker (`will_wake`) would save nothing.
        let unused = self.waker.with_mut(|w| unsafe { (*w).replace(new) });
        let registered = current | status::REGISTERING;
        let phase = match self.status.compare_exchange(
            registered,
            current,
            Ordering::Release,
            Ordering::Acquire,
        ) {
            Ok(_) => status::WAITING,
            Err(resolved) => {
                // Resolved while we held the cell: the server left the waker to us
                // and woke nobody; the phase is our answer.
                // SAFETY: the server did not touch the cell (it saw REGISTERING),
                // and nobody else registers.
                let mine = self.waker.with_mut(|w| unsafe { (*w).take() });
                self.status
                    .fetch_and(!status::REGISTERING, Ordering::Relaxed);
                drop(mine);
                if !Mechanism::Registering.on() {
                    return status::WAITING;
                }
                resolved & status::PHASE
            }
        };
        drop(unused);
        phase
    }

    /// Server only: moves the phase from `WAITING` to `to` (`GRANTED` or
    /// `CLOSED`). `None` if the owner cancelled first; otherwise the waker to wake,
    /// which is `None` if the owner was registering (it sees the phase itself).
    ///
    /// `AcqRel`: `Release` hands the taken units (and the node's unlinking) to the
    /// owner's `Acquire` load of the phase; `Acquire` reads the owner's last waker
    /// store, published by its `Release` CAS out of `REGISTERING`.
    pub(crate) fn resolve(&self, to: usize) -> Option<Option<Waker>> {
        debug_assert!(matches!(
            to,
            status::GRANTED | status::CLOSED | status::EXCEEDS
        ));
        if !Mechanism::PhaseCas.on() {
            self.status.store(to, Ordering::Release);
            // SAFETY: none: this is the negative control the loom models must catch.
            return Some(self.waker.with_mut(|w| unsafe { (*w).take() }));
        }
        let mut current = self.status.load(Ordering::Acquire);
        loop {
            if current & status::PHASE != status::WAITING {
                return None;
            }
            match self.status.compare_exchange_weak(
                current,
                current | to,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) if current & status::REGISTERING != 0 => return Some(None),
                // SAFETY: the phase is no longer `WAITING` and `REGISTERING` was
                // clear, so the owner can no longer claim the cell: it is ours.
                Ok(_) => return Some(self.waker.with_mut(|w| unsafe { (*w).take() })),
                Err(actual) => current = actual,
            }
        }
    }

    /// The owner's cancel: moves the phase from `WAITING` to `CANCELLED`. Returns
    /// the phase it found; `WAITING` means the cancel won, and the owner now owns
    /// the waker cell and must push the node onto the cancelled stack.
    pub(crate) fn cancel(&self) -> usize {
        let mut current = self.status.load(Ordering::Acquire);
        loop {
            if current & status::PHASE != status::WAITING {
                return current & status::PHASE;
            }
            match self.status.compare_exchange_weak(
                current,
                current | status::CANCELLED,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return status::WAITING,
                Err(actual) => current = actual,
            }
        }
    }

    /// The owner, after its cancel won: takes its waker back, to drop it outside
    /// any server work.
    ///
    /// # Safety
    /// [`cancel`](Self::cancel) returned `WAITING` to this caller.
    pub(crate) unsafe fn take_cancelled_waker(&self) -> Option<Waker> {
        // SAFETY: the phase is `CANCELLED`, so the server's resolve fails and never
        // touches the cell; the owner is the only other party.
        self.waker.with_mut(|w| unsafe { (*w).take() })
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

/// The queue lets go of its share of `node`: the last touch of the node by the
/// queue.
///
/// # Safety
/// `node` came from [`NodeSlot::park`], the queue still holds its share, and it
/// never touches the node again.
pub(crate) unsafe fn release_queue_ref(node: NonNull<Waiter>) {
    #[cfg(feature = "alloc")]
    // SAFETY: `park` leaked one strong count for the queue with `Arc::into_raw`;
    // this takes it back, once (the caller's contract).
    drop(unsafe { Arc::from_raw(node.as_ptr().cast_const()) });
    #[cfg(not(feature = "alloc"))]
    {
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
            .fetch_and(!status::QUEUE_REF, Ordering::Release);
    }
}

/// The server lets go of a node taken from the cancelled stack. With `alloc` the
/// entry carries the owner's share too ([`NodeSlot::hand_over`]): both go, and
/// the node is the server's alone to free.
///
/// # Safety
/// As [`release_queue_ref`]; `node` came off the cancelled stack, which the
/// server took with `Acquire` (the owner's last touch was before its push).
pub(crate) unsafe fn release_cancelled(node: NonNull<Waiter>) {
    #[cfg(feature = "alloc")]
    // SAFETY: the owner's share, handed over with the entry (and not used by the
    // owner since): one of the two strong counts the server now holds.
    unsafe {
        Arc::decrement_strong_count(node.as_ptr().cast_const());
    }
    // SAFETY: the queue's own share, as in `release_queue_ref`.
    unsafe { release_queue_ref(node) };
}

/// An acquire future's hold on its node: none until it parks.
///
/// With `alloc` the node is allocated at the park, once; without, it is part of
/// the future, which is why the future is `!Unpin`.
#[cfg(feature = "alloc")]
pub(crate) struct NodeSlot {
    node: Option<Arc<Waiter>>,
    _pinned: PhantomPinned,
}

#[cfg(feature = "alloc")]
impl NodeSlot {
    #[inline]
    pub(crate) const fn new(_units: usize) -> Self {
        Self {
            node: None,
            _pinned: PhantomPinned,
        }
    }

    /// The node, once parked.
    #[inline]
    pub(crate) fn get(&self) -> Option<&Waiter> {
        self.node.as_deref()
    }

    /// The pointer the queue's share goes by (with the whole allocation's
    /// provenance, as `Arc::from_raw` needs), once parked.
    #[inline]
    pub(crate) fn share(&self) -> Option<NonNull<Waiter>> {
        // SAFETY: `Arc::as_ptr` never returns null.
        let ptr =
            |node: &Arc<Waiter>| unsafe { NonNull::new_unchecked(Arc::as_ptr(node).cast_mut()) };
        self.node.as_ref().map(ptr)
    }

    /// Creates the node with its first waker and returns the queue's share of it,
    /// to push onto the arrivals stack.
    pub(crate) fn park(self: Pin<&mut Self>, units: usize, waker: Waker) -> NonNull<Waiter> {
        let node = Arc::new(Waiter::new(units));
        // SAFETY: the node was just made; nobody else can see it.
        unsafe { node.prepare(waker) };
        let queue = Arc::into_raw(Arc::clone(&node)).cast_mut();
        // SAFETY: `node` is not structurally pinned (only the future's address is
        // promised, and the Arc's heap node never moves); we only store into it.
        unsafe { self.get_unchecked_mut() }.node = Some(node);
        // SAFETY: `Arc::into_raw` never returns null.
        unsafe { NonNull::new_unchecked(queue) }
    }

    /// After a won cancel, just before its push: the owner's share goes with the
    /// cancel entry, so the owner leaves without a reference-count update and the
    /// server, which lets go of both ([`release_cancelled`]), frees the node
    /// without waiting for anyone.
    pub(crate) fn hand_over(self: Pin<&mut Self>) {
        // SAFETY: as in `park`: the Arc itself is not pinned.
        let node = unsafe { self.get_unchecked_mut() }.node.take();
        // The strong count stays, owned by the entry from now on.
        let _ = node.map(Arc::into_raw);
    }
}

/// Without `alloc`: the node is inline and the future is pinned.
#[cfg(not(feature = "alloc"))]
pub(crate) struct NodeSlot {
    node: Waiter,
    parked: bool,
    _pinned: PhantomPinned,
}

#[cfg(not(feature = "alloc"))]
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

    /// The pointer the queue's share goes by, once parked.
    #[inline]
    pub(crate) fn share(&self) -> Option<NonNull<Waiter>> {
        self.parked.then(|| NonNull::from(&self.node))
    }

    /// Stores the first waker and returns the queue's share of the node (its
    /// address, valid until the queue clears `QUEUE_REF`: the slot's drop waits).
    pub(crate) fn park(self: Pin<&mut Self>, units: usize, waker: Waker) -> NonNull<Waiter> {
        debug_assert_eq!(units, self.node.units);
        // SAFETY: nothing is moved out; the node stays where the pin put it.
        let this = unsafe { self.get_unchecked_mut() };
        debug_assert!(!this.parked);
        // SAFETY: not parked yet, so nobody else can see the node.
        unsafe { this.node.prepare(waker) };
        this.parked = true;
        NonNull::from(&this.node)
    }

    /// After a won cancel: nothing to hand over, the node is the future's own
    /// memory, and its drop waits for the queue to let go (`QUEUE_REF`).
    #[inline]
    pub(crate) fn hand_over(self: Pin<&mut Self>) {}
}

#[cfg(not(feature = "alloc"))]
impl Drop for NodeSlot {
    fn drop(&mut self) {
        if !self.parked {
            return;
        }
        // The one wait in the crate, without `alloc` only: the queue may still
        // read the node. The owner's drop resolved it first (cancel or grant),
        // after which the server lets go within a bounded number of its steps.
        while Mechanism::DropWaitsForQueue.on()
            && self.node.status.load(Ordering::Acquire) & status::QUEUE_REF != 0
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
