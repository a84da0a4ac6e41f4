//! The weighted, FIFO-fair semaphore.
//!
//! # Parts
//!
//! - `state.rs`: the state word (free units and four flags). Every fast path,
//!   `try_acquire`, the first poll of `acquire` and release, is one
//!   read-modify-write on it, in every build.
//! - `queue/`: storage, where a refused request waits, in arrival order, behind
//!   one interface: with `alloc` a lock-free list of segments of cells, without
//!   it an intrusive list guarded by a critical section. Its module doc says
//!   what the serving pass may assume of a queue.
//! - `resize.rs`: live capacity: a resize or a forget changes the capacity and
//!   its units, and posts what it leaves the serving pass to do.
//! - `serving.rs`: the serving role (whoever finds it free serves, whoever finds
//!   it taken leaves the work to the holder) and the pass it makes, with the
//!   rule for the head. The rules around a park and a cancel (when to ask for
//!   service) are [`Semaphore::park`] and [`Semaphore::cancel`]: each rule is
//!   written once, for both queues, and calls run one way (the semaphore and
//!   the pass call the queue; the queue calls neither).
//! - `wait_status.rs`: a parked request's status word and waker: it leaves
//!   `WAITING` once, by one CAS, and its waker is woken at most once.
//! - `acquire.rs`, `permit.rs`, `drain.rs`, `blocking.rs`: what users hold.
//!
//! # Invariants
//!
//! Each is stated, with its argument, in the module it governs:
//!
//! 1. **Units conserved.**
//!    `held + available + granted-not-yet-taken == capacity`, and units in use
//!    never exceed the capacity: units move only by a take that checks they are
//!    there, or by a release (`state.rs`).
//! 2. **Arrival order.** Queue order is arrival order, and only the head is
//!    granted (`queue/` invariant *arrival order*).
//! 3. **No barging, no lost wake-up.** `QUEUED` stays set while anyone waits,
//!    and every event that can make the head fit asks for service, which is
//!    never lost (`serving.rs` invariants *no barging* and *no lost wake-up*).
//! 4. **Resolved once.** A request is resolved once and woken at most once
//!    (`wait_status.rs`).
//!
//! The modules' lists are numbered, but an invariant is cited by its name:
//! (invariant *name*) for the list of the same file, and
//! (`queue/segments/` invariant *name*) for another module's, by its path under
//! `semaphore/` (`semaphore/` is this list).
//!
//! # Progress
//!
//! With `alloc`, no operation waits for another thread: each finishes in a
//! bounded number of its own steps (a CAS retry counts as a step another
//! thread's success caused), or hands the rest to the role holder. A
//! descheduled thread holds up nobody; `queue/cells.rs` says why for each of
//! its steps. Without `alloc`, the queue's critical section is held for a
//! bounded number of steps by each call, and nothing else waits: no drop waits
//! for a serving pass (`queue/list.rs`). docs/design.md argues both.
//!
//! Each atomic operation's ordering is given, with its reason, beside it.

mod acquire;
#[cfg(feature = "std")]
mod blocking;
mod drain;
mod error;
mod permit;
#[cfg(feature = "alloc")]
mod poll;
pub(crate) mod queue;
mod resize;
mod serving;
#[cfg(feature = "alloc")]
pub(crate) mod shedding;
mod state;
#[cfg(test)]
pub(crate) mod tests;
mod wait_status;
mod wake_list;

use core::fmt;
use core::pin::Pin;
use core::task::{Poll, Waker};

pub use acquire::Acquire;
#[cfg(feature = "alloc")]
pub use acquire::AcquireOwned;
#[cfg(feature = "alloc")]
pub(crate) use acquire::RankedAcquire;
#[cfg(feature = "std")]
pub(crate) use blocking::{block_until, ThreadWaker};
pub use drain::Drain;
#[cfg(feature = "std")]
pub use error::AcquireTimeoutError;
pub(crate) use error::Refusal;
pub use error::{AcquireError, ExceedsCapacity, TryAcquireError};
#[cfg(feature = "alloc")]
pub use permit::OwnedPermit;
pub use permit::Permit;
#[cfg(feature = "alloc")]
pub use poll::PollSemaphore;

use crate::loom::loom_const_fn;
use crate::safeguard::Safeguard;
#[cfg(feature = "alloc")]
use alloc::boxed::Box;
use queue::{Cancel, Queue, Slot, WaitQueue};

use resize::Resizes;
use serving::{join_needs_service, ServingRole};
#[cfg(feature = "alloc")]
use shedding::Shedding;
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
/// Lock-free on every path with `alloc`: a dropped future marks its request
/// cancelled and leaves without waiting for anyone, and the queue is served by
/// whichever thread finds the serving role free, while the rest hand it their
/// work. Without `alloc` the queue is guarded by a critical section, held for a
/// bounded number of steps. `docs/design.md` has the algorithm and the argument
/// for each property.
// `repr(C)`: the order below is the layout, not rustc's to choose (design.md,
// "Layout"): the first line is what a fast path and a release touch, the second
// what a park and a pass add.
#[repr(C)]
pub struct Semaphore {
    state: State,
    /// Who serves the queue (`serving.rs`).
    role: ServingRole,
    queue: WaitQueue,
    /// What resizes and forgets post for the serving pass (`resize.rs`).
    resizes: Resizes,
    /// A gate's semaphore's shedding by rank (`shedding.rs`); set before the
    /// semaphore is shared, never after.
    #[cfg(feature = "alloc")]
    shedding: Option<Box<Shedding>>,
    /// One 128-byte block, shared with nothing else (design.md, "Layout"). A
    /// private field rather than `repr(align)` on the public type: the
    /// alignment is a detail, not a promise of the API.
    _block: [Align128; 0],
}

/// Gives a struct that holds `[Align128; 0]` a 128-byte alignment, adding no size.
#[repr(align(128))]
struct Align128;

// The first line is the state and the role, whole: the queue starts the second.
// Checked where the layout is the one users run (loom's, shuttle's and the unit
// tests' atomics and counters are larger).
#[cfg(all(
    target_pointer_width = "64",
    not(test),
    not(admit_loom),
    not(admit_shuttle)
))]
const _: () = assert!(core::mem::offset_of!(Semaphore, queue) == 64);

impl Semaphore {
    /// The largest capacity the state encoding allows on every target: 2²⁸ − 1.
    pub const MAX_UNITS: usize = state::MAX_UNITS;

    loom_const_fn! {
        /// A semaphore with `capacity` units, all free.
        ///
        /// A request for more units than the capacity fails at once with
        /// [`ExceedsCapacity`](AcquireError::ExceedsCapacity), since no request
        /// waits for units that do not exist, and a parked one fails so when a
        /// shrink lowers the capacity below it: right for admission, where the
        /// capacity is what the service can take. A capacity of 0 is allowed,
        /// as it is reachable anyway (forgotten permits shrink the capacity);
        /// every acquire fails until [`add_units`](Self::add_units) or
        /// [`set_capacity`](Self::set_capacity) raises it. A `Gate`'s capacity
        /// is a configuration and refuses 0 (`ConfigError::ZeroCapacity`). To
        /// wait for the capacity instead, as a pool's counter does, see
        /// [`counting`](Self::counting).
        ///
        /// # Panics
        ///
        /// If `capacity > Semaphore::MAX_UNITS`.
        #[must_use]
        pub fn new(capacity: usize) -> Semaphore {
            Semaphore::with_mode(capacity, false)
        }
    }

    loom_const_fn! {
        /// A semaphore used as a counter, as tokio's is: a request above the
        /// capacity parks, in FIFO order like any other, until
        /// [`add_units`](Self::add_units) or [`set_capacity`](Self::set_capacity)
        /// makes room for it or the semaphore closes; a shrink or a forgotten
        /// permit never fails a parked request; and
        /// [`try_acquire`](Self::try_acquire) of more than is free says
        /// [`NoUnits`](TryAcquireError::NoUnits). Only a request above
        /// [`MAX_UNITS`](Self::MAX_UNITS), which nothing can make fit, fails at
        /// once with [`ExceedsCapacity`](AcquireError::ExceedsCapacity).
        ///
        /// A pool starts at `counting(0)`, adds a unit per object it makes, and
        /// [`forget`](Permit::forget)s one per object it retires.
        ///
        /// Arrival order holds for an oversize request too: parked at the head,
        /// it blocks every request behind it until the capacity fits it, even
        /// those that would fit now (head-of-line blocking, as in tokio).
        /// `docs/from-tokio.md` maps each call of tokio's semaphore to this one.
        ///
        /// # Panics
        ///
        /// If `capacity > Semaphore::MAX_UNITS`.
        ///
        /// # Examples
        ///
        /// ```
        /// use admit::Semaphore;
        /// use std::future::Future;
        /// use std::pin::pin;
        /// use std::task::{Context, Waker};
        ///
        /// let pool = Semaphore::counting(0);
        /// let mut cx = Context::from_waker(Waker::noop());
        /// let mut checkout = pin!(pool.acquire(1));
        /// assert!(checkout.as_mut().poll(&mut cx).is_pending()); // waits: no object yet
        /// pool.add_units(1); // an object is made
        /// assert!(checkout.as_mut().poll(&mut cx).is_ready());
        /// ```
        #[must_use]
        pub fn counting(capacity: usize) -> Semaphore {
            Semaphore::with_mode(capacity, true)
        }
    }

    loom_const_fn! {
        fn with_mode(capacity: usize, counting: bool) -> Semaphore {
            assert!(capacity <= Semaphore::MAX_UNITS, "capacity exceeds Semaphore::MAX_UNITS");
            Semaphore {
                state: State::new(capacity, counting),
                role: ServingRole::new(),
                resizes: Resizes::new(),
                #[cfg(feature = "alloc")]
                shedding: None,
                queue: WaitQueue::new(),
                _block: [],
            }
        }
    }

    /// Whether a request above the capacity fails (the default) rather than
    /// waits for it (a counter's, [`counting`](Self::counting)): read at a
    /// park, at the head, and where the capacity is lowered.
    #[inline]
    fn oversize_fails(&self) -> bool {
        !self.state.counting() || !Safeguard::CounterWaitsOversize.on()
    }

    /// A semaphore whose parked requests can be shed by rank (`shedding.rs`):
    /// a gate's.
    #[cfg(feature = "alloc")]
    pub(crate) fn with_shedding(capacity: usize) -> Semaphore {
        let mut semaphore = Semaphore::new(capacity);
        semaphore.shedding = Some(Box::new(Shedding::new()));
        semaphore
    }

    /// Asks the serving pass to shed waiting requests of `rank` whose units
    /// cover `units`, oldest first, from behind a head that does not fit; a
    /// semaphore made without shedding ignores it.
    #[cfg(feature = "alloc")]
    pub(crate) fn shed(&self, rank: u8, units: usize) {
        if let Some(shedding) = self.shedding.as_deref() {
            shedding.post(usize::from(rank), units);
            self.serve();
        }
    }

    /// Units of `rank` asked to be shed or shed and not yet seen by their
    /// owners: on their way out of the queue.
    #[cfg(feature = "alloc")]
    pub(crate) fn shed_pending(&self, rank: u8) -> usize {
        self.shedding
            .as_deref()
            .map_or(0, |shedding| shedding.pending(usize::from(rank)))
    }

    /// Units free right now. A snapshot for diagnostics: it may change at once.
    #[must_use]
    pub fn available(&self) -> usize {
        available(self.state.load())
    }

    /// Requests parked right now. A snapshot for diagnostics.
    #[must_use]
    pub fn waiters(&self) -> usize {
        self.state.waiters()
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
            self.serve();
        }
    }

    /// Takes `units` units now if they are all free and no request is parked ahead.
    ///
    /// # Errors
    ///
    /// [`TryAcquireError::Closed`] if closed, whatever else holds;
    /// [`TryAcquireError::ExceedsCapacity`] if `units > capacity` (for a
    /// [`counting`](Self::counting) semaphore, `units > MAX_UNITS`);
    /// [`TryAcquireError::NoUnits`] if fewer than `units` are free or a request is
    /// parked.
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
    /// [`AcquireError::Closed`] if the semaphore is or becomes closed before the
    /// grant (first, if both hold); [`AcquireError::ExceedsCapacity`] on the
    /// first poll if `units > capacity`, without parking (for a
    /// [`counting`](Self::counting) semaphore, only if `units > MAX_UNITS`: it
    /// waits for the capacity instead).
    ///
    /// # Panics
    ///
    /// If `units == 0`.
    #[inline]
    pub fn acquire(&self, units: usize) -> Acquire<'_> {
        assert_nonzero(units);
        Acquire::new(self, units)
    }

    /// The shared part of every `try_acquire`: one CAS, and nothing else unless
    /// it refuses.
    ///
    /// The capacity is read only to tell why: while the fast path may take
    /// units, the free ones never exceed the capacity (a shrink sets `RETIRING`
    /// before it returns, and until then a take is one made before it), so a
    /// request above the capacity is always refused, and then reported as
    /// [`ExceedsCapacity`](TryAcquireError::ExceedsCapacity) unless the
    /// semaphore is closed: `Closed` comes first, as in tokio, since a closed
    /// semaphore grants nothing whatever the capacity.
    #[inline]
    pub(crate) fn try_take(&self, units: usize) -> Result<(), TryAcquireError> {
        assert_nonzero(units);
        self.state
            .try_take(units)
            .map_err(|refused| self.refusal(units, refused))
    }

    /// Why the fast path refused `units`.
    #[cold]
    fn refusal(&self, units: usize, refused: Refused) -> TryAcquireError {
        match (refused, self.check_fits(units)) {
            (Refused::Closed, _) => TryAcquireError::Closed,
            (Refused::NoUnits, Err(exceeds)) => TryAcquireError::ExceedsCapacity(exceeds),
            (Refused::NoUnits, Ok(())) => TryAcquireError::NoUnits,
        }
    }

    /// Whether a request of `units` can ever be granted: not above the
    /// capacity, or for a counter, not above [`MAX_UNITS`](Self::MAX_UNITS).
    #[inline]
    pub(crate) fn check_fits(&self, units: usize) -> Result<(), ExceedsCapacity> {
        let capacity = self.capacity();
        let limit = if self.oversize_fails() {
            capacity
        } else {
            Semaphore::MAX_UNITS
        };
        if units > limit {
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
            self.serve();
        }
    }

    /// Parks a request of `rank` the fast path refused: enqueues it, joins, and
    /// asks for service if the join shows it could be resolved now. Returns its
    /// phase (`WAITING` unless it was resolved meanwhile).
    ///
    /// Inlined into the refused first poll, which is out of line itself: a
    /// call of its own here made a park a third slower (S7, docs/benchmarks.md).
    #[inline]
    pub(crate) fn park(&self, slot: Pin<&mut Slot>, units: usize, rank: u8, waker: Waker) -> usize {
        let request = self.queue.enqueue(slot, units, rank, waker);
        let prev = self.state.join();
        let oversize = self.oversize_fails() && self.resizes.sweep_if_oversize(&self.state, units);
        if oversize || join_needs_service(prev, units, request.phase() != status::WAITING) {
            self.serve();
        }
        request.phase()
    }

    /// The owner of a parked request has read its final phase.
    pub(crate) fn finish(&self, slot: Pin<&mut Slot>) {
        self.queue.finish(slot);
    }

    /// Gives up a parked request of `units` and `rank` (its future is being
    /// dropped): whatever it holds goes back; a shed it lost to is settled.
    #[cfg_attr(not(feature = "alloc"), allow(unused_variables))]
    pub(crate) fn cancel(&self, slot: Pin<&mut Slot>, units: usize, rank: u8) {
        match self.queue.cancel(slot) {
            Cancel::Won(waker) => {
                // It may have been the head, blocking requests that fit in the
                // free units (Go's canceled-waiter-at-the-front bug): then serve.
                // With no unit free nobody behind it fits, and the next release
                // serves. The count's read of the word is ordered with a server
                // that stopped at this head (`State::cancel_count_out`).
                let now = self.state.cancel_count_out();
                let units_free = available(now) > 0 || now & CLOSED != 0;
                if units_free && Safeguard::CancelServes.on() {
                    self.serve();
                }
                drop(waker); // user code, after all our work
            }
            // A drain waiter (0 units) holds nothing to give back.
            Cancel::Lost(status::GRANTED) if units != 0 && Safeguard::CancelReleasesGrant.on() => {
                self.release(units);
            }
            #[cfg(feature = "alloc")]
            Cancel::Lost(status::SHED) => self.settle_shed(rank, units),
            Cancel::Lost(_) => {}
        }
    }

    /// Maps a request's phase to what its future returns (the owner has read
    /// it: a shed is settled).
    #[inline]
    #[cfg_attr(not(feature = "alloc"), allow(unused_variables))]
    pub(crate) fn outcome(
        &self,
        phase: usize,
        units: usize,
        rank: u8,
    ) -> Poll<Result<(), Refusal>> {
        let refused = |e| Poll::Ready(Err(Refusal::Error(e)));
        match phase {
            status::GRANTED => Poll::Ready(Ok(())),
            #[cfg(feature = "alloc")]
            status::SHED => {
                self.settle_shed(rank, units);
                Poll::Ready(Err(Refusal::Shed))
            }
            status::SHUT_OUT => refused(AcquireError::Closed),
            status::EXCEEDS => refused(AcquireError::ExceedsCapacity(ExceedsCapacity {
                requested: units,
                capacity: self.capacity(),
            })),
            _ => Poll::Pending,
        }
    }

    /// The owner of a request of `rank` read `SHED`: it leaves the books.
    #[cfg(feature = "alloc")]
    fn settle_shed(&self, rank: u8, units: usize) {
        if let Some(shedding) = self.shedding.as_deref() {
            shedding.settle(usize::from(rank), units);
        }
    }

    /// A re-poll of a parked request: its phase.
    #[inline]
    pub(crate) fn repoll(&self, slot: &Slot, waker: &Waker) -> usize {
        WaitQueue::repoll(slot, waker)
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
