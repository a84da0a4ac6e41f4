//! Live capacity: a resize ([`Semaphore::set_capacity`], [`Semaphore::add_units`])
//! or a forget changes the capacity and its units, and posts here what it leaves
//! the serving pass to do: units to retire, units that settle a retirement, and
//! that the capacity was lowered (a sweep for requests it no longer fits).
//!
//! # Invariants
//!
//! 1. **Retire before granting.** Units a shrink owes are retired (taken from
//!    the free units, now or as releases bring them back) before anything else is
//!    granted: the shrink sets `RETIRING` before it returns, which refuses the
//!    fast paths and the take for the head until the serving pass has paid the
//!    debt (`state.rs`).
//! 2. **A lowered capacity is swept.** A request for more than the capacity
//!    ends with `EXCEEDS`: the lowering marks the capacity lowered after its
//!    read-modify-write on the state word, so either the sweep that mark asks
//!    for sees the request, or the request's join sees the lowered capacity
//!    ([`Resizes::sweep_if_oversize`]).
//! 3. **One change at a time, to a reader.** A check that every unit is back
//!    never reads one change of a resize without the other
//!    ([`State::all_units_back`]).

use super::queue::Queue;
use super::state::{State, CLOSED, UNITS_OWED};
use super::wait_status::status;
use super::wake_list::WakeList;
use super::Semaphore;
use crate::loom::loom_const_fn;
use crate::loom::sync::{AtomicBool, AtomicUsize, Ordering};
use crate::safeguard::Safeguard;

/// What resizes and forgets post for the serving pass, which takes it in
/// ([`settle`](Self::settle), [`take_lowered`](Self::take_lowered)).
pub(crate) struct Resizes {
    /// Units a shrink posted for retirement, not yet taken by the server.
    retire_posted: AtomicUsize,
    /// Units of forgotten permits that were owed to a retirement (held above the
    /// capacity in force): they settle that much of the debt.
    forget_posted: AtomicUsize,
    /// The capacity was lowered since the server last swept for requests that
    /// no longer fit.
    lowered: AtomicBool,
}

impl Semaphore {
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
    ///   [`AcquireError::ExceedsCapacity`](super::AcquireError::ExceedsCapacity),
    ///   or for a [`counting`](Self::counting) semaphore wait for it to grow.
    ///
    /// Resizes that race each other end at the capacity of the last to take
    /// effect. 0 is a capacity like any other (see [`new`](Self::new)), and a
    /// closed semaphore's capacity still changes (a `Gate` refuses that resize:
    /// `ConfigError::Closed`).
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
            self.resizes.post_retirement(previous - capacity);
            self.state.start_retiring();
            if self.oversize_fails() {
                self.resizes.mark_lowered();
            }
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
            self.serve();
        }
    }

    /// Adds `units` to the capacity, free at once (tokio's `add_permits`).
    ///
    /// # Panics
    ///
    /// If the capacity would exceed [`Semaphore::MAX_UNITS`].
    #[inline]
    #[track_caller]
    pub fn add_units(&self, units: usize) {
        assert!(
            self.try_add_units(units),
            "capacity exceeds Semaphore::MAX_UNITS"
        );
    }

    /// [`add_units`](Self::add_units), or `false` (and nothing added) past
    /// [`MAX_UNITS`](Semaphore::MAX_UNITS).
    #[inline]
    pub(crate) fn try_add_units(&self, units: usize) -> bool {
        if self.oversize_fails() {
            return self.add_units_resizing(units);
        }
        // A counter's grow, outside the seqlock: the capacity, then the units,
        // so a check for every unit back that reads the units reads the
        // capacity that holds them; one that reads the capacity alone says "not
        // yet", and the release serves it. Inlined: a pool's every return.
        if !self.state.grow_capacity(units) {
            // A drain's check may have read the capacity before its undo.
            self.serve();
            return false;
        }
        self.release(units);
        true
    }

    /// [`try_add_units`](Self::try_add_units) inside the seqlock.
    fn add_units_resizing(&self, units: usize) -> bool {
        self.state.begin_resize();
        let raised = self.state.add_capacity(units);
        let owed = raised && self.state.release(units) & UNITS_OWED != 0;
        self.end_resize(owed);
        raised
    }

    /// Takes up to `units` of the free units out of the semaphore for good, as
    /// if acquired and forgotten, and returns how many it took: the capacity
    /// shrinks by them (tokio's `forget_permits`). Never waits, and takes free
    /// units even while requests are parked (they wait for more than is free)
    /// or the semaphore is closed.
    ///
    /// # Examples
    ///
    /// ```
    /// use admit::Semaphore;
    ///
    /// let sem = Semaphore::new(5);
    /// let held = sem.try_acquire(3).unwrap();
    /// assert_eq!(sem.forget_free(4), 2); // only 2 are free
    /// assert_eq!((sem.capacity(), sem.available()), (3, 0));
    /// drop(held);
    /// assert_eq!(sem.available(), 3);
    /// ```
    pub fn forget_free(&self, units: usize) -> usize {
        let taken = self.state.retire(units);
        if taken != 0 {
            self.forget(taken);
        }
        taken
    }

    /// Takes `units` held by a permit out of the semaphore for good: its capacity
    /// shrinks by them.
    #[inline]
    pub(crate) fn forget(&self, units: usize) {
        if !self.oversize_fails() && self.state.forget_held(units) {
            // A counter's parked requests wait whatever the capacity: only a
            // drain (after a close) has work for a pass. Inlined: a pool's
            // every checkout.
            if self.state.load() & CLOSED != 0 {
                self.serve();
            }
        } else {
            self.forget_resizing(units);
        }
    }

    /// [`forget`](Self::forget) inside the seqlock.
    fn forget_resizing(&self, units: usize) {
        // The capacity shrinks by the units, as far as it goes; units held above it
        // (after a shrink) were owed to the retirement, and settle it instead.
        self.state.begin_resize();
        let cut = self.state.forget_capacity(units);
        self.resizes.post_forget(units - cut);
        // Parked requests may no longer fit (the sweep; a counter's wait, and
        // its forget of units a shrink owes, which settle the debt), and a
        // drain may now be complete.
        self.state.order_after_joins();
        if self.oversize_fails() {
            self.resizes.mark_lowered();
        }
        self.end_resize(true);
    }

    /// Whether every unit is back: available equals the capacity and nothing is
    /// left to retire.
    pub(crate) fn all_units_back(&self) -> bool {
        self.state.all_units_back()
    }

    /// Fails with `EXCEEDS` every waiting request for more than the capacity
    /// (invariant *a lowered capacity is swept*). Returns `false` if the wake
    /// batch filled first.
    ///
    /// # Safety
    /// The caller holds the serving role.
    pub(super) unsafe fn sweep_oversize(&self, wakers: &mut WakeList) -> bool {
        let capacity = self.state.capacity();
        // SAFETY: the caller holds the role.
        unsafe {
            self.queue
                .resolve_every(&self.state, status::EXCEEDS, wakers, |units| {
                    units > capacity
                })
        }
    }
}

impl Resizes {
    loom_const_fn! {
        pub(super) fn new() -> Resizes {
            Resizes {
                retire_posted: AtomicUsize::new(0),
                forget_posted: AtomicUsize::new(0),
                lowered: AtomicBool::new(false),
            }
        }
    }

    /// A shrink posts `units` for the server to retire; the caller then sets
    /// `RETIRING`, marks the capacity lowered and asks for service.
    pub(super) fn post_retirement(&self, units: usize) {
        self.retire_posted.fetch_add(units, Ordering::AcqRel);
    }

    /// The capacity was lowered: the next pass sweeps for requests it no longer
    /// fits. Called after the lowering's read-modify-write on the state word (a
    /// shrink's `RETIRING`, a forget's [`State::order_after_joins`]), so that
    /// the sweep sees every request that joined before it, and a request that
    /// joined after it sees the lowered capacity
    /// ([`sweep_if_oversize`](Self::sweep_if_oversize)).
    ///
    /// A read-modify-write, not a store: a store could take its place in the
    /// flag's order before a pass's `swap(false)` that read an earlier mark,
    /// and be consumed by a pass that never synchronized with it, leaving the
    /// request parked. An RMW comes after that swap, or is the value the swap
    /// reads.
    pub(super) fn mark_lowered(&self) {
        if Safeguard::LoweredMarkIsRmw.on() {
            self.lowered.swap(true, Ordering::AcqRel);
        } else {
            self.lowered.store(true, Ordering::Release);
        }
    }

    /// After a parker's join: if its `units` no longer fit the capacity, asks
    /// for a sweep and returns `true` (the caller then asks for service). A
    /// lowering after the request checked the capacity reads and writes the
    /// state word before it marks the capacity lowered: if that came before
    /// this join, this `Acquire` read of the capacity sees the lowered one;
    /// if after, the join's publish comes before the mark, and the sweep the
    /// mark asks for sees the request.
    pub(super) fn sweep_if_oversize(&self, state: &State, units: usize) -> bool {
        if units > state.capacity() && Safeguard::JoinSweepsOversize.on() {
            self.mark_lowered();
            true
        } else {
            false
        }
    }

    /// A forget posts the units it forgot beyond the capacity: those were owed
    /// to a retirement, and settle it. The caller then marks the capacity
    /// lowered and asks for service.
    pub(super) fn post_forget(&self, owed: usize) {
        if owed != 0 {
            self.forget_posted.fetch_add(owed, Ordering::AcqRel);
        }
    }

    /// Server only: whether the capacity was lowered since the last call. A load
    /// first, as for the posted units ([`take_posted`]).
    pub(super) fn take_lowered(&self) -> bool {
        self.lowered.load(Ordering::Relaxed) && self.lowered.swap(false, Ordering::AcqRel)
    }

    /// Takes what shrinks and forgets posted into the debt and pays it from the
    /// free units. Units settled by a forget after this server (or an earlier one)
    /// already retired some for them come back: the debt never goes below zero.
    pub(super) fn pay_debt(&self, state: &State, debt: &mut usize) {
        *debt += take_posted(&self.retire_posted);
        let settled = take_posted(&self.forget_posted);
        if settled > *debt {
            // Retired for a debt a forget has since covered: give them back.
            state.give_back(settled - *debt);
            *debt = 0;
        } else {
            *debt -= settled;
        }
        *debt -= state.retire(*debt);
    }
}

/// Takes what shrinks or forgets posted in `posted`, the server only. A load
/// first: nearly every pass finds nothing posted, and then writes nothing (in a
/// profile of S4 the three swaps a pass were half of `serve`'s own samples). A post
/// the load misses is followed by its poster's request for service, which the
/// role hands to this server as `PENDING` (or to the next one), so a pass that
/// sees it comes.
fn take_posted(posted: &AtomicUsize) -> usize {
    if posted.load(Ordering::Relaxed) == 0 {
        0
    } else {
        posted.swap(0, Ordering::AcqRel)
    }
}
