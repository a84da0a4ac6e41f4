//! The weighted, FIFO-fair semaphore.
//!
//! # Implementation notes
//!
//! ## Parts
//!
//! - `state.rs`: one atomic word, `available << 4 | RETIRING | ARRIVED | QUEUED |
//!   CLOSED`. Every fast path is one read-modify-write on it.
//! - `wait_status.rs`: a parked request's status word and waker; the phase leaves
//!   `WAITING` exactly once (granted, closed, exceeds or cancelled), by one CAS.
//! - `serving.rs`: the serving role (whoever finds it free serves, whoever finds
//!   it taken leaves the work to the holder and returns) and the pass it makes.
//! - With `alloc`, `cell_queue.rs` on `segments.rs`: each parked request is a
//!   cell of a lock-free list of segments, in ticket order; the server walks the
//!   cells with the list's cursor, and a cancel that completes a segment removes
//!   it. Without, `queue.rs` on `waiter.rs`: nodes inside the futures, pushed onto
//!   two lock-free stacks that the server takes and links.
//! - `acquire.rs`, `permit.rs`: the futures and permits built on the above.
//!
//! ## The paths (with `alloc`)
//!
//! - **Acquire fast path** (`try_acquire`, the first poll of `acquire`): a CAS that
//!   takes `n` units if `QUEUED`, `RETIRING` and `CLOSED` are clear and
//!   `available >= n`.
//! - **Release**: a `fetch_add` of the units. Only if units are owed to the queue
//!   (`QUEUED` or `RETIRING` was set) does the releaser ask for service.
//! - **Park** (a first poll the fast path refused): claim a ticket (a CAS on the
//!   list's tail; one in 31 also allocates the next segment), write the units and
//!   the waker into its cell and publish it (a CAS `EMPTY → WAITING`), then
//!   *join*: one `fetch_or` of `QUEUED | ARRIVED`. Then ask for service only if
//!   the join found the semaphore closed, or found nobody queued and the units
//!   free (they came back between the refused fast path and the join), or the
//!   request already resolved (a server granted it before the join).
//! - **Re-poll**: swap the waker in the cell (`WaitStatus::register`), no lock.
//! - **Cancel** (a parked future dropped): CAS the cell's phase to `CANCELLED`; if
//!   that wins, give the ticket back counted as cancelled (the cancel that
//!   completes a segment removes it from the list), then ask for service if a
//!   unit is free (the request may have been the head blocking others); if a
//!   grant won, release the units; if a close won, nothing.
//! - **Close**: `fetch_or(CLOSED)`, and ask for service if `QUEUED` was set.
//! - **Serve** (the role holder): clear `ARRIVED`, then at the cursor skip what
//!   is done and grant the head while it fits: a CAS takes its units, a CAS on its
//!   phase publishes `GRANTED`, its waker goes into a batch woken after the role
//!   is released. A cell claimed but not yet published is broken (`EMPTY →
//!   BROKEN`, its owner claims again) if units are free, so a descheduled parker
//!   holds up nobody. If the queue ran empty, clear `QUEUED` with a CAS that fails
//!   if `ARRIVED` was set again (a parker joined meanwhile), and look again.
//!
//! ## Invariants
//!
//! 1. `held + available + granted-not-yet-taken == capacity`, where *held* sums the
//!    live permits and *granted-not-yet-taken* the requests in phase `GRANTED`
//!    whose future has not yet turned them into a permit (or released them).
//!    Units move only by a take (a CAS that checks they are there) or a release.
//! 2. `available <= capacity`: units in use never exceed the capacity.
//! 3. Arrival order is ticket order: a request publishes its cell before it joins,
//!    and only the cell at the cursor is ever granted.
//! 4. No barging: once a parker's join is done, `QUEUED` stays set until its
//!    request is resolved and the server, with nothing left at the cursor, clears
//!    it by a CAS that fails if anyone joined after the server's pass began.
//! 5. No lost wake-up: every event that can make the head fit — a release with
//!    `QUEUED` set, a close, a cancel (the head may go), a join that found the
//!    units free — asks for service, and a request for service is never lost: it
//!    takes the role or sets `PENDING`, which the holder reads when it lets go.
//!    A server stops only at a head that does not fit (re-read by a
//!    read-modify-write, so a cancel of it sees the units the server saw) or at
//!    an unpublished cell with no unit free.
//! 6. No needless wake-up, and at most one per request: a waker is taken only by
//!    the CAS that resolves the request, which happens once.
//! 7. Every segment is freed exactly once, when the last of its tickets, links
//!    and walkers lets go of it (`segments.rs`).
//!
//! ## Progress
//!
//! With `alloc`, no operation waits for another thread: each but serving finishes
//! in a bounded number of its own steps, counting a CAS retry as a step that
//! another thread's success caused (lock-free). Asking for service is one CAS on
//! the role word; the work goes to whichever thread holds the role. A descheduled
//! thread holds up nobody: a parker descheduled before it published has its cell
//! broken by a server with units to give; one descheduled after has published;
//! a canceller has cancelled in one CAS and its segment's removal is finished by
//! any thread that meets it; a descheduled server delays only grants that were
//! waiting for it anyway, and memory: cancelled cells are let go of by their
//! cancels, so what is held is the segments with a live request plus a few per
//! thread.
//!
//! Without `alloc`, nodes live in the futures, and a future's drop waits (spins)
//! until the server has let go of its node: the one wait in the crate, never on a
//! path a std user takes.
//!
//! ## Memory orderings
//!
//! Each atomic operation's ordering is given, with its reason, beside it:
//! `state.rs` for the state word, `wait_status.rs` for a request's status,
//! `serving.rs` for the role, `segments.rs` for the list, `queue.rs` for the
//! stacks.

mod acquire;
#[cfg(feature = "std")]
mod blocking;
mod drain;
mod error;
mod permit;
pub(crate) mod queue;
mod serving;
#[cfg(all(test, not(admit_loom), not(admit_shuttle)))]
mod serving_tests;
#[cfg(all(test, admit_shuttle))]
mod shuttle;
mod state;
mod wait_status;
mod wake_list;

use core::fmt;
use core::pin::Pin;
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
use queue::{Queue, Slot, WaitQueue};
use state::{available, Refused, State, CLOSED, QUEUED, UNITS_OWED};
use wait_status::status;

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
/// Lock-free on every path with `alloc`: a parked request is a cell in a list of
/// segments (one allocation per 31 parks), so a dropped future marks its cell
/// cancelled and leaves without waiting for anyone, and the cancel that
/// completes a segment removes it; the queue is served by whichever thread finds
/// the serving role free, and the rest hand it their work. `docs/design.md` has
/// the algorithm and the argument for each property.
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
        self.state.begin_resize();
        let previous = self.state.swap_capacity(capacity);
        let owed = if capacity > previous {
            // New units are released like returned ones.
            self.state.release(capacity - previous) & UNITS_OWED != 0
        } else if capacity < previous {
            self.queue.role().post_retirement(previous - capacity);
            self.state.start_retiring();
            self.queue.role().mark_lowered();
            true
        } else {
            false
        };
        self.end_resize(owed);
        previous
    }

    /// After a change of the capacity and its units: serves if the change
    /// concerns the queue (`owed`), or if a check for every unit back failed
    /// on it meanwhile (a drain waiter to look at again).
    fn end_resize(&self, owed: bool) {
        if self.state.end_resize() || owed {
            self.queue.serve(&self.state);
        }
    }

    /// Adds `units` to the capacity, free at once (tokio's `add_permits`).
    ///
    /// # Panics
    ///
    /// If the capacity would exceed [`Semaphore::MAX_UNITS`].
    pub fn add_units(&self, units: usize) {
        self.state.begin_resize();
        let raised = self.state.add_capacity(units);
        let owed = raised && self.state.release(units) & UNITS_OWED != 0;
        self.end_resize(owed);
        assert!(raised, "capacity exceeds Semaphore::MAX_UNITS");
    }

    /// Takes `units` held by a permit out of the semaphore for good: its capacity
    /// shrinks by them.
    pub(crate) fn forget(&self, units: usize) {
        // The capacity shrinks by the units, as far as it goes; units held above it
        // (after a shrink) were owed to the retirement, and settle it instead.
        self.state.begin_resize();
        let cut = self.state.forget_capacity(units);
        self.queue.role().post_forget(units - cut);
        // Parked requests may no longer fit (the sweep), and a drain may now be
        // complete.
        self.state.order_after_joins();
        self.queue.role().mark_lowered();
        self.end_resize(true);
    }

    /// Units free right now. A snapshot for diagnostics: it may change at once.
    #[must_use]
    pub fn available(&self) -> usize {
        available(self.state.load())
    }

    /// Requests parked right now. A snapshot for diagnostics.
    #[must_use]
    pub fn waiters(&self) -> usize {
        self.queue.parked()
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
    /// poll nothing was taken; while parked its request leaves the queue (and the
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

    /// Parks a request the fast path refused. Returns its phase (`WAITING`
    /// unless it was resolved meanwhile).
    pub(crate) fn park(&self, slot: Pin<&mut Slot>, units: usize, waker: Waker) -> usize {
        self.queue.park(&self.state, slot, units, waker)
    }

    /// The owner of a parked request has read its final phase.
    pub(crate) fn finish(&self, slot: Pin<&mut Slot>) {
        self.queue.finish(slot);
    }

    /// Gives up a parked request (its future is being dropped): whatever it
    /// holds goes back.
    pub(crate) fn cancel(&self, slot: Pin<&mut Slot>) {
        let granted = self.queue.cancel(&self.state, slot);
        if granted != 0 {
            self.release(granted);
        }
    }

    /// Maps a request's phase to what its future returns.
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

    /// A re-poll of a parked request: its phase.
    #[inline]
    pub(crate) fn repoll(&self, slot: &Slot, waker: &Waker) -> usize {
        WaitQueue::repoll(slot, waker)
    }

    /// Whether every unit is back: available equals the capacity and nothing is
    /// left to retire.
    pub(crate) fn all_units_back(&self) -> bool {
        self.state.all_units_back()
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
