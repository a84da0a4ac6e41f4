//! The weighted, FIFO-fair semaphore.
//!
//! # Implementation notes
//!
//! ## Parts
//!
//! - `state.rs`: one atomic word, `available << 3 | ARRIVED | QUEUED | CLOSED`. Every
//!   fast path is one read-modify-write on it.
//! - `waiter.rs`: a parked request's node and its status word, whose phase leaves
//!   `WAITING` exactly once (granted, closed or cancelled), by one CAS.
//! - `queue.rs`: two lock-free stacks (arrivals, cancelled), a FIFO list only the
//!   server touches, and the serving role: whoever finds it free serves, whoever
//!   finds it taken leaves the work to the holder and returns.
//! - `acquire.rs`, `permit.rs`: the futures and permits built on the above.
//!
//! ## The paths
//!
//! - **Acquire fast path** (`try_acquire`, the first poll of `acquire`): a CAS that
//!   takes `n` units if `QUEUED` and `CLOSED` are clear and `available >= n`.
//! - **Release**: a `fetch_add` of the units. Only if `QUEUED` was set does the
//!   releaser ask for service.
//! - **Park** (a first poll the fast path refused): allocate the node (once, with
//!   `alloc`), push it onto the arrivals stack, then *join*: one `fetch_or` of
//!   `QUEUED | ARRIVED`. Then ask for service only if the join found the semaphore
//!   closed, or found nobody queued and the units free (they came back between the
//!   refused fast path and the join), or the node already resolved (a server took
//!   it before the join), or cancelled nodes waiting to be freed with nobody
//!   serving (so that, with every unit held and callers giving up, cancelled
//!   nodes do not pile up; but see "Progress" for what a slowed server leaves).
//! - **Re-poll**: swap the waker in the node ([`Waiter::register`]), no lock.
//! - **Cancel** (a parked future dropped): CAS the node's phase to `CANCELLED`; if
//!   that wins, withdraw the node from the arrivals stack if it is still on top (no
//!   server saw it: the future frees it), else push it onto the cancelled stack,
//!   handing the future's share of it to the server with the entry; then ask for
//!   service if a unit is free (the node may have been the head blocking others,
//!   or its join left `QUEUED` set over nobody); if a grant won, release the
//!   units; if a close won, nothing.
//! - **Close**: `fetch_or(CLOSED)`, and ask for service if `QUEUED` was set.
//! - **Serve** (the role holder): clear `ARRIVED`, take both stacks, link the
//!   arrivals in push order, unlink the cancelled, then grant from the head while
//!   it fits: a CAS takes its units, a CAS on its phase publishes `GRANTED`, its
//!   waker goes into a batch woken after the role is released. If the list runs
//!   empty, clear `QUEUED` with a CAS that fails if `ARRIVED` was set again (a
//!   parker joined meanwhile), and then absorb again.
//!
//! ## Invariants
//!
//! 1. `held + available + granted-not-yet-taken == capacity`, where *held* sums the
//!    live permits and *granted-not-yet-taken* the nodes in phase `GRANTED` whose
//!    future has not yet turned them into a permit (or released them). Units move
//!    only by a take (a CAS that checks they are there) or a release.
//! 2. `available <= capacity`: units in use never exceed the capacity.
//! 3. Arrival order is the order of the arrivals pushes; the server's list keeps
//!    it, and only its head is ever granted.
//! 4. No barging: once a parker's join is done, `QUEUED` stays set until the node
//!    is resolved and the server, with its list empty, clears it by a CAS that
//!    fails if anyone joined after the server last took the arrivals.
//! 5. No lost wake-up: every event that can make the head fit — a release with
//!    `QUEUED` set, a close, a cancel (the head may go), a join that found the
//!    units free — asks for service, and a request for service is never lost: it
//!    takes the role or sets `PENDING`, which the holder reads when it lets go.
//! 6. No needless wake-up, and at most one per node: a waker is taken only by the
//!    CAS that resolves the node, which happens once.
//! 7. Every node is freed exactly once: the future and the queue each own a share;
//!    the queue's is let go by the server, once (queue.rs, invariant 3).
//!
//! ## Progress
//!
//! With `alloc`, no operation waits for another thread: each but serving finishes
//! in a bounded number of its own steps, counting a CAS retry as a step that
//! another thread's success caused (lock-free). Asking for service is one CAS on
//! the role word; the work goes to whichever thread holds the role. The server's
//! own work per pass is the stacks it takes plus at most one wake batch of grants;
//! it goes round again only if others asked meanwhile. A descheduled thread holds
//! up nobody: a descheduled parker or canceller has published everything others
//! need in one atomic step, and a descheduled server delays only grants that were
//! waiting for it anyway — every other operation proceeds.
//!
//! The open defect (docs/design.md, "Known limits"): the stacks a pass takes are
//! whatever was pushed since the last one, and nothing bounds them while the role
//! holder is descheduled or slowed. Under a storm of parks and cancels with more
//! runnable threads than cores the backlog feeds itself: the memory of cancelled
//! nodes grows without bound, and so does the serving thread's call.
//!
//! Without `alloc`, nodes live in the futures, and a future's drop waits (spins)
//! until the server has let go of its node: the one wait in the crate, never on a
//! path a std user takes.
//!
//! ## Memory orderings
//!
//! Each atomic operation's ordering is given, with its reason, beside it:
//! `state.rs` for the state word, `waiter.rs` for the node's status, `queue.rs`
//! for the stacks and the role.

mod acquire;
#[cfg(feature = "std")]
mod blocking;
mod drain;
mod error;
mod permit;
mod queue;
// The next queue's storage, model-checked on its own before the semaphore uses it.
#[cfg(all(test, feature = "alloc"))]
pub(crate) mod segments;
#[cfg(all(test, not(admit_loom), not(admit_shuttle)))]
mod serving_tests;
#[cfg(all(test, admit_shuttle))]
mod shuttle;
mod state;
mod waiter;
mod wake_list;

use core::fmt;
use core::pin::Pin;
use core::ptr::NonNull;
use core::task::{Poll, Waker};

pub use acquire::Acquire;
#[cfg(feature = "alloc")]
pub use acquire::AcquireOwned;
#[cfg(feature = "std")]
pub(crate) use blocking::ThreadWaker;
pub use drain::Drain;
#[cfg(feature = "std")]
pub use error::AcquireTimeoutError;
pub use error::{AcquireError, ExceedsCapacity, TryAcquireError};
#[cfg(feature = "alloc")]
pub use permit::OwnedPermit;
pub use permit::Permit;

use crate::loom::loom_const_fn;
use crate::mechanism::Mechanism;
use queue::WaitQueue;
use state::{available, Refused, State, CLOSED, QUEUED, RETIRING, UNITS_OWED};
use waiter::{release_queue_ref, status, NodeSlot, Waiter};

/// A counting semaphore with weighted, all-or-nothing, first-in-first-out acquires.
///
/// A request for `n` units is granted all `n` at once or not at all, and parked
/// requests are granted strictly in arrival order: a parked request also blocks
/// [`try_acquire`](Self::try_acquire), and a large request is never starved by a
/// stream of small ones.
///
/// # Examples
///
/// ```
/// use admit::Semaphore;
///
/// # futures_lite::future::block_on(async {
/// let sem = Semaphore::new(3);
/// let two = sem.acquire(2).await?;
/// assert_eq!(sem.available(), 1);
/// assert!(sem.try_acquire(2).is_err()); // all or nothing: one unit is not taken
/// drop(two);
/// assert_eq!(sem.available(), 3);
/// # Ok::<(), admit::AcquireError>(())
/// # }).unwrap();
/// ```
///
/// # Implementation notes
///
/// Lock-free on every path with `alloc`: a parked request's node is allocated
/// once and co-owned by its future and the queue, so a dropped future marks its
/// node cancelled and leaves without waiting for anyone; the queue is served by
/// whichever thread finds the serving role free, and the rest hand it their work.
/// `docs/design.md` has the algorithm and the argument for each property.
///
/// A known limitation: a cancelled request's node is freed by that serving
/// thread unless no serving thread has seen it yet. While the serving thread is
/// descheduled or starved (many more runnable threads than cores) and other
/// threads keep parking and giving up at a high rate, those nodes pile up, and
/// the heap grows until it catches up (`docs/design.md`, "Known limits").
pub struct Semaphore {
    state: State,
    queue: WaitQueue,
    /// One 128-byte block (two 64-byte lines, fetched in pairs on x86): every
    /// contended operation touches the state word and the queue's heads together,
    /// so one line transfer brings both, and nothing else shares the block
    /// (design.md, "Layout"). A private field rather than `repr(align)` on the
    /// public type: the alignment is the one 0.1.0 had, not a new promise.
    _block: [Align128; 0],
}

/// Gives a struct that holds `[Align128; 0]` a 128-byte alignment, adding no size.
#[repr(align(128))]
struct Align128;

impl Semaphore {
    /// The largest capacity the state encoding allows on every target: 2²⁸ − 1.
    pub const MAX_UNITS: usize = state::MAX_UNITS;

    loom_const_fn! {
        /// A semaphore with `capacity` units, all free.
        ///
        /// # Panics
        ///
        /// If `capacity > Semaphore::MAX_UNITS`.
        #[must_use]
        pub fn new(capacity: usize) -> Semaphore {
            assert!(capacity <= Semaphore::MAX_UNITS, "capacity exceeds Semaphore::MAX_UNITS");
            Semaphore {
                state: State::new(capacity),
                queue: WaitQueue::new(),
                _block: [],
            }
        }
    }

    /// The capacity in force: the units it was created with, as changed since by
    /// [`set_capacity`](Self::set_capacity), [`add_units`](Self::add_units) and
    /// forgotten permits.
    #[must_use]
    pub fn capacity(&self) -> usize {
        self.state.capacity()
    }

    /// Sets the capacity to `capacity` and returns the previous one. Never blocks.
    ///
    /// - **Grow**: the new units are free at once, and parked requests are served
    ///   from them in FIFO order.
    /// - **Shrink**: no held permit is revoked. Free units retire at once; the rest
    ///   retire as permits return them, before anything else is granted, so units in
    ///   use never exceed the new capacity once the shrink has returned (except
    ///   those already held above it, which only come back). Parked and later
    ///   requests for more than the new capacity fail with
    ///   [`AcquireError::ExceedsCapacity`].
    ///
    /// Resizes that race each other end at the capacity of the last to take
    /// effect.
    ///
    /// # Panics
    ///
    /// If `capacity > Semaphore::MAX_UNITS`.
    ///
    /// # Examples
    ///
    /// ```
    /// use admit::Semaphore;
    ///
    /// let sem = Semaphore::new(4);
    /// let held = sem.try_acquire(3).unwrap();
    /// assert_eq!(sem.set_capacity(2), 4); // 1 free unit retires now, 1 on return
    /// assert_eq!((sem.capacity(), sem.available()), (2, 0));
    /// drop(held); // of the 3 coming back, 1 retires
    /// assert_eq!(sem.available(), 2);
    /// ```
    pub fn set_capacity(&self, capacity: usize) -> usize {
        assert!(
            capacity <= Semaphore::MAX_UNITS,
            "capacity exceeds Semaphore::MAX_UNITS"
        );
        let previous = self.state.swap_capacity(capacity);
        if capacity > previous {
            // New units are released like returned ones.
            self.release(capacity - previous);
        } else if capacity < previous {
            self.queue.post_retirement(previous - capacity);
            self.state.start_retiring();
            self.queue.serve(&self.state);
        }
        previous
    }

    /// Adds `units` to the capacity, free at once (tokio's `add_permits`).
    ///
    /// # Panics
    ///
    /// If the capacity would exceed [`Semaphore::MAX_UNITS`].
    pub fn add_units(&self, units: usize) {
        self.state.add_capacity(units);
        self.release(units);
    }

    /// Takes `units` held by a permit out of the semaphore for good: its capacity
    /// shrinks by them.
    pub(crate) fn forget(&self, units: usize) {
        // The capacity shrinks by the units, as far as it goes; units held above it
        // (after a shrink) were owed to the retirement, and settle it instead.
        let cut = self.state.forget_capacity(units);
        self.queue.post_forget(units - cut);
        // Parked requests may no longer fit, and a drain may now be complete.
        self.queue.serve(&self.state);
    }

    /// Units free right now. A snapshot for diagnostics: it may change at once.
    #[must_use]
    pub fn available(&self) -> usize {
        available(self.state.load())
    }

    /// Requests parked right now. A snapshot for diagnostics.
    #[must_use]
    pub fn waiters(&self) -> usize {
        self.queue.waiters()
    }

    /// Whether [`close`](Self::close) was called.
    #[must_use]
    pub fn is_closed(&self) -> bool {
        self.state.load() & CLOSED != 0
    }

    /// Closes the semaphore: every parked request completes with
    /// [`AcquireError::Closed`], and later acquires fail at once. Permits already
    /// held stay valid and return their units as usual. Never blocks.
    pub fn close(&self) {
        if self.state.close() & QUEUED != 0 {
            self.queue.serve(&self.state);
        }
    }

    /// Takes `units` units now if they are all free and no request is parked ahead.
    ///
    /// # Errors
    ///
    /// [`TryAcquireError::NoUnits`] if fewer than `units` are free or a request is
    /// parked, [`TryAcquireError::ExceedsCapacity`] if `units > capacity`,
    /// [`TryAcquireError::Closed`] if closed.
    ///
    /// # Panics
    ///
    /// If `units == 0`: a permit covering nothing can only come from a bug in the
    /// caller's accounting.
    #[inline]
    pub fn try_acquire(&self, units: usize) -> Result<Permit<'_>, TryAcquireError> {
        self.try_take(units)?;
        Ok(Permit::new(self, units))
    }

    /// Waits until `units` units can be granted together, in FIFO order of arrival.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future at any point gives back everything: before its first
    /// poll nothing was taken; while parked its node leaves the queue (and the
    /// waiters behind it are served if it was blocking them); after a grant it was
    /// not polled to see, its units return to the semaphore.
    ///
    /// # Errors
    ///
    /// [`AcquireError::ExceedsCapacity`] on the first poll if `units > capacity`,
    /// without parking; [`AcquireError::Closed`] if the semaphore is or becomes closed
    /// before the grant.
    ///
    /// # Panics
    ///
    /// If `units == 0`.
    #[inline]
    pub fn acquire(&self, units: usize) -> Acquire<'_> {
        assert_nonzero(units);
        Acquire::new(self, units)
    }

    /// The shared part of every `try_acquire`: one CAS.
    #[inline]
    pub(crate) fn try_take(&self, units: usize) -> Result<(), TryAcquireError> {
        assert_nonzero(units);
        self.check_fits(units)
            .map_err(TryAcquireError::ExceedsCapacity)?;
        self.state.try_take(units).map_err(|refused| match refused {
            Refused::NoUnits => TryAcquireError::NoUnits,
            Refused::Closed => TryAcquireError::Closed,
        })
    }

    #[inline]
    pub(crate) fn check_fits(&self, units: usize) -> Result<(), ExceedsCapacity> {
        let capacity = self.capacity();
        if units > capacity {
            Err(ExceedsCapacity {
                requested: units,
                capacity,
            })
        } else {
            Ok(())
        }
    }

    /// Returns `units` units (or adds them, for a grow): one `fetch_add`, then the
    /// queue is served if returned units are owed to it.
    #[inline]
    pub(crate) fn release(&self, units: usize) {
        let prev = self.state.release(units);
        if prev & UNITS_OWED != 0 {
            self.queue.serve(&self.state);
        }
    }

    /// Parks a request the fast path refused: pushes its node, joins, and asks for
    /// service if the join shows the node could be resolved now. Returns the node's
    /// phase (`WAITING` unless it was resolved meanwhile).
    ///
    /// # Safety
    /// `queue_share` is the queue's share of `node`, fresh from `NodeSlot::park`.
    pub(crate) unsafe fn join(&self, node: &Waiter, queue_share: NonNull<Waiter>) -> usize {
        self.queue.push_arrival(queue_share);
        let prev = self.state.join();
        let closed = prev & CLOSED != 0 && Mechanism::JoinServesClosed.on();
        let units_back = prev & QUEUED == 0
            && available(prev) >= node.units
            && Mechanism::JoinServesUnitsBack.on();
        // A server may have taken the node from the arrivals, granted it and
        // cleared `QUEUED` before our join set it again: serve to clear it.
        let resolved = node.phase() != status::WAITING && Mechanism::JoinServesResolved.on();
        // Cancelled nodes wait on their stack for a server; with no unit coming
        // back (a stuck holder, callers timing out) parkers are the only ones left
        // to serve, so one that finds the role free lets them go (a role holder
        // that is slowed still lets them pile up: docs/design.md, "Known limits").
        let reclaim = self.queue.reclaim_due();
        if closed || units_back || resolved || reclaim {
            self.queue.serve(&self.state);
        }
        node.phase()
    }

    /// Gives up a parked node (its future is being dropped): whatever it holds
    /// goes back.
    ///
    /// The node is named by pointer, not reference: once a won cancel is pushed,
    /// the server may free the node at any moment (with `alloc`, the owner's share
    /// goes with the cancel entry), so nothing here may still borrow it.
    pub(crate) fn cancel(&self, slot: Pin<&mut NodeSlot>) {
        let node = slot.share().expect("a parked request has a node");
        // SAFETY: the slot still holds the owner's share.
        let (phase, units) = unsafe { (node.as_ref().cancel(), node.as_ref().units) };
        match phase {
            status::WAITING => {
                // SAFETY: our cancel won.
                let waker = unsafe { node.as_ref().take_cancelled_waker() };
                let withdrawn = self.queue.withdraw_arrival(node);
                if withdrawn {
                    // No server saw the node: the queue's share is ours to let go
                    // of, and the node is never in the list.
                    // SAFETY: withdrawn, so the queue will never touch it again.
                    unsafe { release_queue_ref(node) };
                } else {
                    slot.hand_over();
                    self.queue.push_cancelled(node);
                }
                // It may have been the head, blocking requests that fit in the free
                // units (Go's canceled-waiter-at-the-front bug): then serve. With no
                // unit free nobody behind it fits, and the next release serves
                // (`QUEUED` stays set while the list holds the node). A release
                // whose server took the cancelled stack before our push is seen by
                // this load: the push reads that swap (both `AcqRel`), which came
                // after the release's `fetch_add`.
                // Without `alloc` the future's drop waits for the server to let go
                // of a node it may have seen, so a cancel that pushed an entry
                // always serves.
                let state = self.state.load();
                let units_free = available(state) > 0 || state & CLOSED != 0;
                let owes_entry = !withdrawn && cfg!(not(feature = "alloc"));
                if Mechanism::CancelServes.on() && (units_free || owes_entry) {
                    self.queue.serve(&self.state);
                }
                drop(waker); // user code, after all our work
            }
            // A drain waiter (0 units) holds nothing to give back.
            status::GRANTED if units != 0 && Mechanism::CancelReleasesGrant.on() => {
                self.release(units);
            }
            _ => {}
        }
    }

    /// Maps a node's phase to what its future returns.
    #[inline]
    pub(crate) fn outcome(&self, phase: usize, units: usize) -> Poll<Result<(), AcquireError>> {
        match phase {
            status::GRANTED => Poll::Ready(Ok(())),
            status::CLOSED => Poll::Ready(Err(AcquireError::Closed)),
            status::EXCEEDS => Poll::Ready(Err(AcquireError::ExceedsCapacity(ExceedsCapacity {
                requested: units,
                capacity: self.capacity(),
            }))),
            _ => Poll::Pending,
        }
    }

    /// A re-poll of a parked node.
    #[inline]
    pub(crate) fn repoll(&self, node: &Waiter, waker: &Waker) -> Poll<Result<(), AcquireError>> {
        self.outcome(node.register(waker), node.units)
    }

    /// Whether every unit is back: available equals the capacity and nothing is
    /// left to retire.
    pub(crate) fn all_units_back(&self) -> bool {
        let state = self.state.load();
        state & RETIRING == 0 && available(state) == self.capacity()
    }
}

/// Without `alloc` no node can outlive its future; with it, a future leaked while
/// parked (`mem::forget`) leaves the queue's share of its node, let go here.
impl Drop for Semaphore {
    fn drop(&mut self) {
        self.queue.drain_on_drop(&self.state);
    }
}

#[inline]
pub(crate) fn assert_nonzero(units: usize) {
    assert!(
        units != 0,
        "a permit of zero units covers nothing: acquire at least one unit"
    );
}

impl fmt::Debug for Semaphore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Semaphore")
            .field("capacity", &self.capacity())
            .field("available", &self.available())
            .field("waiters", &self.waiters())
            .field("closed", &self.is_closed())
            .finish()
    }
}
