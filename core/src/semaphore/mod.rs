//! The weighted, FIFO-fair semaphore.
//!
//! # Implementation notes
//!
//! ## State word
//!
//! One `AtomicUsize`, `state`:
//!
//! ```text
//!  bits 31..2 (and up)          bit 1     bit 0
//! [ available units        ]  [QUEUED]  [CLOSED]
//! ```
//!
//! - `available` is the number of free units, shifted left by [`SHIFT`]. Capacity is
//!   capped at [`Semaphore::MAX_UNITS`] = 2³⁰ − 1, so the word fits in 32 bits and no
//!   64-bit atomic is needed on any target.
//! - `QUEUED` is set exactly while the wait queue is non-empty. It is set and
//!   cleared only by the holder of the queue lock.
//! - `CLOSED` is set once by [`Semaphore::close`] and never cleared.
//!
//! ## Fast paths: one atomic read-modify-write each
//!
//! - Acquire (`try_acquire`, and the first poll of `acquire`): a CAS that subtracts
//!   `n` units if `QUEUED` and `CLOSED` are clear and `available >= n`. Checking
//!   `QUEUED` in the same CAS is what forbids barging: a parked waiter is always
//!   served first.
//! - Release: a `fetch_add` of the units. Only when the previous value had `QUEUED`
//!   set does the releaser go on to serve the queue.
//!
//! ## The wait queue and its combining lock
//!
//! Parked waiters are nodes of an intrusive FIFO list embedded in the acquire
//! futures (see `queue.rs`), guarded by `lock`, a word with two bits:
//! `LOCKED` and `PENDING`. The list is only touched by the lock holder, and the lock
//! is never held across a waker call, a waker clone or drop, or an allocation.
//!
//! - *Serving* the queue (after a release or a close) never waits for the lock: the
//!   server either takes it, or, if it is held, sets `PENDING` and leaves. The
//!   holder, on unlocking, sees `PENDING` and serves the queue again on the
//!   server's behalf. So `release` and `close` never spin and never block.
//! - *Enqueueing* a new waiter, *cancelling* a parked one and *re-registering* a
//!   waker must change a node that belongs to the caller's future, so they take the
//!   lock, spinning while another holder finishes a bounded critical section (a
//!   list edit plus at most [`WAKE_BATCH`](crate::wake_list::WAKE_BATCH) grants).
//!   A cancelled future's node lives in the future's own memory, so its `Drop`
//!   cannot return before the node is out of the list; that is why this short lock
//!   remains (docs/design.md, "Gaps").
//!
//! A holder whose change cannot have made the head fit (joining the tail,
//! re-registering a waker, cancelling a node behind the head) unlocks with one CAS,
//! and serves first only if that CAS finds `PENDING`.
//!
//! Serving: while the head waiter's request fits in `available`, the holder unlinks
//! it, subtracts its units (and `QUEUED`, if the list became empty) from `state` in
//! one `fetch_sub`, takes its waker and publishes `GRANTED` in the node. Wakers are
//! collected and called after unlocking. If `CLOSED` is set, each waiter is
//! unlinked and published `CLOSED` instead. It stops at the first head that does not
//! fit: FIFO, so no later, smaller request may pass it, and no waiter that cannot be
//! served is woken.
//!
//! ## Invariants
//!
//! 1. `held + available + granted-not-yet-returned == capacity`, where *held* is the
//!    sum over live permits and *granted-not-yet-returned* over nodes in phase
//!    `GRANTED` whose future has not produced its permit.
//! 2. `available <= capacity`, so units in use never exceed capacity.
//! 3. `QUEUED` is set iff the list is non-empty (observed under the lock).
//! 4. The list is in arrival order; a waiter is granted only as the head.
//! 5. When the lock is free and `PENDING` is clear, either the list is empty or the
//!    head's request does not fit in `available` (and `CLOSED` is clear). Every
//!    change that could break this — a release, a close, removing the head — serves
//!    the queue or leaves `PENDING` for the holder to serve it.
//! 6. A node is woken at most once: its waker is taken in the same critical section
//!    that unlinks it and publishes its final phase.
//!
//! Together, 3 and 5 make wake-ups neither lost nor needless: units come back only
//! through a `fetch_add` that sees `QUEUED`, and a waiter is only woken once it holds
//! its units.
//!
//! ## Memory orderings
//!
//! - Acquire CAS: `Acquire` on success, pairing with the `Release` of the release
//!   `fetch_add`, so a new holder sees what the previous holder wrote.
//! - Release `fetch_add`: `Release` (see above). The granting `fetch_sub` is
//!   `AcqRel`: it reads every release before it (release sequence) and the node's
//!   `GRANTED` store, `Release`, hands that on to the waiting future.
//! - Lock: taken with `Acquire`, dropped with an `AcqRel` swap that also reads
//!   `PENDING`; setting `PENDING` is an `AcqRel` read-modify-write even when the bit
//!   is already set, so the holder's swap either acquires it (and with it the
//!   releaser's `fetch_add`) or the releaser finds the lock free and serves itself.
//! - Node phase: `Release` by the lock holder, `Acquire` by the owner (`queue.rs`).

use core::fmt;
use core::ptr::NonNull;

mod acquire;
mod error;
mod permit;
mod queue;
mod wake_list;

pub use acquire::Acquire;
#[cfg(feature = "alloc")]
pub use acquire::AcquireOwned;
pub use error::{AcquireError, ExceedsCapacity, TryAcquireError};
#[cfg(feature = "alloc")]
pub use permit::OwnedPermit;
pub use permit::Permit;

use crate::loom::loom_const_fn;
use crate::loom::sync::{spin_loop, AtomicUsize, Ordering, UnsafeCell};
use queue::{phase, WaitList, Waiter};
use wake_list::WakeList;

/// Bit 0 of `state`: the semaphore is closed.
const CLOSED: usize = 1;
/// Bit 1 of `state`: the wait queue is non-empty.
const QUEUED: usize = 1 << 1;
/// `available` starts at this bit.
const SHIFT: u32 = 2;

/// `lock` bit: the wait queue is held.
const LOCKED: usize = 1;
/// `lock` bit: someone found the lock held and left the holder to serve the queue.
const PENDING: usize = 1 << 1;

const _: () = assert!(usize::BITS >= 32, "admit needs at least 32-bit pointers");

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
pub struct Semaphore {
    /// `available << SHIFT | QUEUED | CLOSED`; see the module notes.
    state: AtomicUsize,
    /// `LOCKED | PENDING`; guards `queue`.
    lock: AtomicUsize,
    /// # Safety
    /// Accessed only while holding `lock`.
    queue: UnsafeCell<WaitList>,
    /// Mirror of the queue length, written under the lock, for [`Semaphore::waiters`].
    waiters: AtomicUsize,
    capacity: usize,
}

// SAFETY: the raw node pointers in `queue` are only dereferenced under `lock`, and
// every node they point to is `Sync` data (atomics, lock-guarded cells, a `Send +
// Sync` waker); everything else is atomics or immutable.
unsafe impl Send for Semaphore {}
// SAFETY: as above.
unsafe impl Sync for Semaphore {}

impl Semaphore {
    /// The largest capacity the state encoding allows on every target: 2³⁰ − 1.
    pub const MAX_UNITS: usize = (u32::MAX >> SHIFT) as usize;

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
                state: AtomicUsize::new(capacity << SHIFT),
                lock: AtomicUsize::new(0),
                queue: UnsafeCell::new(WaitList::new()),
                waiters: AtomicUsize::new(0),
                capacity,
            }
        }
    }

    /// The number of units this semaphore was created with.
    #[must_use]
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Units free right now. A snapshot for diagnostics: it may change at once.
    #[must_use]
    pub fn available(&self) -> usize {
        self.state.load(Ordering::Acquire) >> SHIFT
    }

    /// Requests parked right now. A snapshot for diagnostics.
    #[must_use]
    pub fn waiters(&self) -> usize {
        self.waiters.load(Ordering::Relaxed)
    }

    /// Whether [`close`](Self::close) was called.
    #[must_use]
    pub fn is_closed(&self) -> bool {
        self.state.load(Ordering::Acquire) & CLOSED != 0
    }

    /// Closes the semaphore: every parked request completes with
    /// [`AcquireError::Closed`], and later acquires fail at once. Permits already
    /// held stay valid and return their units as usual. Never blocks.
    pub fn close(&self) {
        let prev = self.state.fetch_or(CLOSED, Ordering::AcqRel);
        if prev & QUEUED != 0 {
            self.serve_queue();
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
        let mut state = self.state.load(Ordering::Relaxed);
        loop {
            if state & CLOSED != 0 {
                return Err(TryAcquireError::Closed);
            }
            if state & QUEUED != 0 || state >> SHIFT < units {
                return Err(TryAcquireError::NoUnits);
            }
            match self.state.compare_exchange_weak(
                state,
                state - (units << SHIFT),
                Ordering::Acquire,
                Ordering::Relaxed,
            ) {
                Ok(_) => return Ok(()),
                Err(actual) => state = actual,
            }
        }
    }

    #[inline]
    pub(crate) fn check_fits(&self, units: usize) -> Result<(), ExceedsCapacity> {
        if units > self.capacity {
            Err(ExceedsCapacity {
                requested: units,
                capacity: self.capacity,
            })
        } else {
            Ok(())
        }
    }

    /// Returns `units` units: one `fetch_add`, then the queue is served if parked
    /// requests may now fit.
    #[inline]
    pub(crate) fn release(&self, units: usize) {
        let prev = self.state.fetch_add(units << SHIFT, Ordering::Release);
        debug_assert!(
            (prev >> SHIFT) + units <= self.capacity,
            "released more units than held"
        );
        if prev & QUEUED != 0 {
            self.serve_queue();
        }
    }

    /// Polls a waiter node embedded in an acquire future.
    ///
    /// # Safety
    ///
    /// `node` is pinned: it stays at this address until [`Self::cancel`] has been
    /// called with it (the future's `Drop`), and it is only used with this semaphore.
    #[inline]
    pub(crate) unsafe fn poll_acquire(
        &self,
        node: &Waiter,
        waker: &core::task::Waker,
    ) -> core::task::Poll<Result<(), AcquireError>> {
        use core::task::Poll;
        let units = node.units;
        match node.phase() {
            phase::IDLE => {
                // Fast path: one CAS when nobody is queued and the units are free.
                let done = match self.try_take(units) {
                    Ok(()) => Ok(()),
                    Err(TryAcquireError::Closed) => Err(AcquireError::Closed),
                    Err(TryAcquireError::ExceedsCapacity(e)) => {
                        Err(AcquireError::ExceedsCapacity(e))
                    }
                    Err(TryAcquireError::NoUnits) => {
                        // SAFETY: the caller's contract, and the node is IDLE.
                        return unsafe { self.park(node, waker) };
                    }
                };
                node.phase.store(phase::DONE, Ordering::Relaxed);
                Poll::Ready(done)
            }
            phase::QUEUED => {
                let mut waker = Some(waker.clone());
                self.lock();
                if node.phase.load(Ordering::Relaxed) == phase::QUEUED {
                    // SAFETY: we hold the lock, and the phase, re-read under it, says
                    // the node is in the list: its waker is ours to replace.
                    waker = unsafe { node.replace_waker(waker.take().unwrap()) };
                }
                self.unlock();
                // After unlocking: dropping a waker (the old one, or the new clone if
                // the node left the queue meanwhile) is user code.
                drop(waker);
                self.finish(node)
            }
            phase::DONE => panic!("`Acquire` polled after completion"),
            _ => self.finish(node),
        }
    }

    /// The slow path of a first poll: under the lock, take the units after all or
    /// join the queue.
    ///
    /// # Safety
    /// As [`Self::poll_acquire`]; the node is in phase `IDLE`.
    unsafe fn park(
        &self,
        node: &Waiter,
        waker: &core::task::Waker,
    ) -> core::task::Poll<Result<(), AcquireError>> {
        use core::task::Poll;
        // Clone before locking: a waker clone is user code.
        let waker = waker.clone();
        self.lock();
        let outcome = self.take_or_mark_queued(node.units);
        if outcome == phase::QUEUED {
            // SAFETY: we hold the lock; `node` is pinned and not in the list (phase
            // IDLE), and its future's Drop unlinks it (caller contract).
            unsafe {
                let old = node.replace_waker(waker);
                debug_assert!(old.is_none());
                node.phase.store(phase::QUEUED, Ordering::Relaxed);
                self.with_queue(|q| {
                    q.push_back(NonNull::from(node));
                    self.waiters.store(q.len(), Ordering::Relaxed);
                });
            }
        } else {
            node.phase.store(phase::DONE, Ordering::Relaxed);
        }
        // Joining the tail, or taking units, cannot make the head fit.
        self.unlock();
        match outcome {
            phase::GRANTED => Poll::Ready(Ok(())),
            phase::CLOSED => Poll::Ready(Err(AcquireError::Closed)),
            // Serving on unlock (a deferred release) may have granted us already.
            _ => self.finish(node),
        }
    }

    /// Resolves a node the lock holder has finished with; `Pending` if still queued.
    #[inline]
    fn finish(&self, node: &Waiter) -> core::task::Poll<Result<(), AcquireError>> {
        use core::task::Poll;
        let result = match node.phase() {
            phase::GRANTED => Ok(()),
            phase::CLOSED => Err(AcquireError::Closed),
            _ => return Poll::Pending,
        };
        node.phase.store(phase::DONE, Ordering::Relaxed);
        Poll::Ready(result)
    }

    /// Under the lock, on the slow path: takes the units if nobody is queued and
    /// they fit, else marks the queue non-empty so every later release serves it.
    /// Returns the phase the caller's node ends in.
    fn take_or_mark_queued(&self, units: usize) -> u8 {
        let mut state = self.state.load(Ordering::Acquire);
        loop {
            let (next, outcome) = if state & CLOSED != 0 {
                return phase::CLOSED;
            } else if state & QUEUED != 0 {
                return phase::QUEUED;
            } else if state >> SHIFT >= units {
                (state - (units << SHIFT), phase::GRANTED)
            } else {
                (state | QUEUED, phase::QUEUED)
            };
            match self
                .state
                .compare_exchange_weak(state, next, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => return outcome,
                Err(actual) => state = actual,
            }
        }
    }

    /// Called from an acquire future's `Drop`: gives back whatever the node holds.
    ///
    /// # Safety
    ///
    /// Same contract as [`Self::poll_acquire`]; after this returns the node is out
    /// of the list and may be freed.
    #[inline]
    pub(crate) unsafe fn cancel(&self, node: &Waiter) {
        match node.phase() {
            phase::GRANTED => self.release(node.units),
            // SAFETY: the caller's contract.
            phase::QUEUED => unsafe { self.cancel_queued(node) },
            _ => {}
        }
    }

    /// Cancels a node that was parked when last seen.
    ///
    /// # Safety
    /// As [`Self::cancel`].
    #[inline(never)]
    unsafe fn cancel_queued(&self, node: &Waiter) {
        self.lock();
        // Re-read under the lock: a server may have granted (or closed) it meanwhile.
        let was = node.phase.load(Ordering::Relaxed);
        let (waker, was_head) = if was == phase::QUEUED {
            // SAFETY: we hold the lock and the node is in the list (QUEUED, re-read
            // under the lock).
            unsafe {
                let was_head = self.with_queue(|q| {
                    let was_head = q.front() == Some(NonNull::from(node));
                    q.remove(NonNull::from(node));
                    self.waiters.store(q.len(), Ordering::Relaxed);
                    if q.is_empty() {
                        self.state.fetch_and(!QUEUED, Ordering::AcqRel);
                    }
                    was_head
                });
                (node.take_waker(), was_head)
            }
        } else {
            (None, false)
        };
        node.phase.store(phase::DONE, Ordering::Relaxed);
        if was_head {
            // The waiters behind it may fit now (Go's canceled-waiter-at-the-front bug).
            self.serve_and_unlock();
        } else {
            self.unlock();
        }
        drop(waker); // after unlocking: dropping a waker is user code
        if was == phase::GRANTED {
            self.release(node.units);
        }
    }

    /// Runs `f` on the wait list.
    ///
    /// # Safety
    /// The caller holds the lock.
    unsafe fn with_queue<R>(&self, f: impl FnOnce(&mut WaitList) -> R) -> R {
        // SAFETY: the caller holds the lock, which guards `queue`; the reference
        // does not escape `f`.
        self.queue.with_mut(|q| f(unsafe { &mut *q }))
    }

    /// Takes the lock, spinning while a holder finishes its bounded critical section.
    fn lock(&self) {
        while self
            .lock
            .compare_exchange_weak(0, LOCKED, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            spin_loop();
        }
    }

    /// Unlocks after a critical section that cannot have made the head fit: one CAS.
    /// If someone deferred serving to us meanwhile (`PENDING`), serves first.
    fn unlock(&self) {
        // Failure reads `PENDING` with `Acquire`, so serving sees the deferred
        // release's `fetch_add` (see `lock_or_defer`).
        if self
            .lock
            .compare_exchange(LOCKED, 0, Ordering::Release, Ordering::Acquire)
            .is_err()
        {
            self.serve_and_unlock();
        }
    }

    /// Takes the lock if it is free; if it is held, leaves `PENDING` for the holder
    /// to serve the queue when it unlocks. Returns whether the lock was taken.
    ///
    /// It always writes the lock word, even when `PENDING` is already set: a plain
    /// load there would let the holder's unlocking `swap` and this caller's earlier
    /// `fetch_add` on `state` miss each other (a store-buffering race, found by
    /// loom). As a read-modify-write it is ordered against the holder's `swap`:
    /// either it comes first, and the swap acquires it (and the `fetch_add` before
    /// it), or it comes after and finds the lock free.
    fn lock_or_defer(&self) -> bool {
        let mut lock = self.lock.load(Ordering::Relaxed);
        loop {
            let next = if lock == 0 { LOCKED } else { lock | PENDING };
            match self
                .lock
                .compare_exchange_weak(lock, next, Ordering::AcqRel, Ordering::Relaxed)
            {
                Ok(_) => return lock == 0,
                Err(actual) => lock = actual,
            }
        }
    }

    /// Serves the queue now, or defers it to the current lock holder. Never waits.
    fn serve_queue(&self) {
        if self.lock_or_defer() {
            self.serve_and_unlock();
        }
    }

    /// With the lock held: grants (or closes) waiters from the head while they fit,
    /// unlocks, wakes them, and repeats while a batch was full or someone deferred
    /// work to us.
    fn serve_and_unlock(&self) {
        loop {
            let mut wakers = WakeList::new();
            // SAFETY: we hold the lock.
            let batch_full = unsafe { self.with_queue(|q| self.serve_locked(q, &mut wakers)) };
            let deferred = self.lock.swap(0, Ordering::AcqRel) & PENDING != 0;
            wakers.wake_all();
            if !(batch_full || deferred) || !self.lock_or_defer() {
                return;
            }
        }
    }

    /// Grants or closes waiters from the head while they fit, collecting their
    /// wakers. Returns `true` if it stopped because `wakers` is full.
    fn serve_locked(&self, queue: &mut WaitList, wakers: &mut WakeList) -> bool {
        while let Some(head) = queue.front() {
            if wakers.is_full() {
                return true;
            }
            // SAFETY: nodes in the list are valid until unlinked, and we hold the lock.
            let node = unsafe { head.as_ref() };
            let state = self.state.load(Ordering::Acquire);
            let (units, outcome) = if state & CLOSED != 0 {
                (0, phase::CLOSED)
            } else if state >> SHIFT >= node.units {
                (node.units, phase::GRANTED)
            } else {
                return false;
            };
            // SAFETY: we hold the lock and `head` is in the list.
            unsafe { queue.remove(head) };
            self.waiters.store(queue.len(), Ordering::Relaxed);
            let take = (units << SHIFT) | if queue.is_empty() { QUEUED } else { 0 };
            if take != 0 {
                // Only the lock holder subtracts while QUEUED is set, and others only
                // add, so `available >= units` still holds.
                self.state.fetch_sub(take, Ordering::AcqRel);
            }
            // SAFETY: we hold the lock.
            wakers.push(unsafe { node.take_waker() });
            // Last touch of the node: after this its owner may free it.
            node.phase.store(outcome, Ordering::Release);
        }
        false
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
            .field("capacity", &self.capacity)
            .field("available", &self.available())
            .field("waiters", &self.waiters())
            .field("closed", &self.is_closed())
            .finish()
    }
}
