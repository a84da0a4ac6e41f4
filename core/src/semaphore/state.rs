//! The state word: the free units, four flags and (on 64-bit targets) the count
//! of parked requests in one atomic, so that every fast path is one
//! read-modify-write and sees, in the same step, whether anyone waits; and beside
//! it, on the same cache line, the capacity in force and whether a request above
//! it waits (a counter's) or fails.
//!
//! ```text
//!  bits 63..36 (64-bit)   bits 35..4 (31..4)   bit 3        bit 2       bit 1      bit 0
//! [ parked requests ]   [ available units ]  [ RETIRING ]  [ ARRIVED ]  [ QUEUED ]  [ CLOSED ]
//! ```
//!
//! - `available`: free units, shifted by [`SHIFT`]. Capacity is capped at
//!   [`MAX_UNITS`] = 2²⁸ − 1 so that the units fit in 32 bits: no 64-bit atomic is
//!   needed on any target. On 64-bit targets the field has four bits more, so that
//!   units a grow adds while a shrink's are still to retire never reach the count.
//! - parked requests: counted in by the parker's [`State::join`], out by whoever
//!   resolves the request (the server's [`State::count_out`], or the owner's
//!   [`State::cancel_count_out`] if its cancel won), so that [`State::waiters`]
//!   is exact once both have run, and park and cancel pay no read-modify-write
//!   of their own for it. A server may count a
//!   request out before its parker counts it in: the field is modular, and read
//!   below zero as zero. On 32-bit targets the count is an atomic of its own beside
//!   the word.
//! - `QUEUED`: a waiter may be unresolved. Set by a parker's [`State::join`], cleared
//!   only by the server ([`State::try_clear`]) once its list is empty and no
//!   parker joined since it last looked. The fast paths refuse while it is set: that
//!   is the no-barging rule.
//! - `ARRIVED`: a parker joined since the server last looked. Set with `QUEUED` by
//!   every [`State::join`], cleared only by the server ([`State::clear_arrived`]).
//!   It makes each join change the word, so the server's clearing of `QUEUED` (a
//!   CAS expecting `ARRIVED` clear) fails if anyone joined after the server took the
//!   arrivals. `ARRIVED` set implies `QUEUED` or `RETIRING` set.
//! - `RETIRING`: the capacity was lowered and units still have to be retired. Set
//!   (with `ARRIVED`) by a shrink after it posted the units to retire; cleared only by
//!   the server once it retired them all, by a CAS that fails if `ARRIVED` was set
//!   again: before it grants anything ([`State::clear_retiring`]), or with `QUEUED`
//!   at the end of a pass. The fast paths refuse while it is set, and every release
//!   asks for service, so returned units go to the retirement first. The server's
//!   take for the head refuses too: once the server has cleared it, it is set again
//!   only by a shrink the server has not paid yet, whose owed units a pass in
//!   flight must not grant.
//! - `CLOSED`: set once by [`State::close`], never cleared.
//!
//! Beside them, two counts that let a drain's check read the capacity and the
//! units as one: `resizing` (resizes and forgets between their change of the
//! capacity and the matching change of the units, and a [`DEFERRED`] bit asking
//! the last of them to serve) and `resizes_begun` (a seqlock's count). See
//! [`State::all_units_back`].
//!
//! Only units move through `available`: taken by a fast path or by the server (for
//! the head waiter, or to retire them), each a CAS that checks they are there;
//! returned by a release or added by a grow (a `fetch_add`). So `available` never
//! exceeds the capacity in force plus the units still to retire, and never
//! underflows.

use crate::loom::loom_const_fn;
use crate::loom::sync::{AtomicUsize, Ordering};
use crate::safeguard::Safeguard;

/// The semaphore is closed.
pub(crate) const CLOSED: usize = 1;
/// A waiter may be unresolved: fast paths refuse.
pub(crate) const QUEUED: usize = 1 << 1;
/// A parker joined (or a shrink posted) since the server last looked.
pub(crate) const ARRIVED: usize = 1 << 2;
/// Units are being retired after the capacity was lowered: fast paths refuse.
pub(crate) const RETIRING: usize = 1 << 3;
/// Returned units are owed to a queued request or to a retirement: the fast
/// paths refuse, and every release serves the queue.
pub(crate) const UNITS_OWED: usize = QUEUED | RETIRING;
/// `resizing` bit: a check for every unit back failed on a resize in flight.
const DEFERRED: usize = 1;
/// One resize in flight, in `resizing`.
const ONE_RESIZE: usize = 2;

/// `available` starts at this bit.
pub(crate) const SHIFT: u32 = 4;
/// The largest capacity the encoding holds in 32 bits.
pub(crate) const MAX_UNITS: usize = (u32::MAX >> SHIFT) as usize;
/// The count of parked requests starts at this bit (64-bit targets).
#[cfg(target_pointer_width = "64")]
const COUNT_SHIFT: u32 = 36;
/// One parked request, in the word (64-bit targets).
#[cfg(target_pointer_width = "64")]
const ONE_WAITER: usize = 1 << COUNT_SHIFT;
/// The bits below the count: the units and the flags.
#[cfg(target_pointer_width = "64")]
const UNITS_AND_FLAGS: usize = ONE_WAITER - 1;
#[cfg(not(target_pointer_width = "64"))]
const UNITS_AND_FLAGS: usize = usize::MAX;

const _: () = assert!(usize::BITS >= 32, "admit needs at least 32-bit pointers");

/// Free units in a state value.
#[inline]
pub(crate) const fn available(state: usize) -> usize {
    (state & UNITS_AND_FLAGS) >> SHIFT
}

/// Why a fast-path take failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refused {
    /// Too few units free, or a waiter is queued ahead.
    NoUnits,
    /// The semaphore is closed.
    Closed,
}

/// What the server's take for the head waiter found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum HeadTake {
    /// The units are taken for the head.
    Taken,
    /// Too few units free: the head keeps waiting.
    DoesNotFit,
    /// A shrink posted units to retire since the server settled: it pays them
    /// before granting anything.
    Retiring,
    /// The semaphore is closed: the head is to be told so.
    Closed,
}

/// The state word and the capacity; see the module docs.
pub(crate) struct State {
    word: AtomicUsize,
    /// Parked requests, modular (see the module docs), where the word has no
    /// room for them.
    #[cfg(not(target_pointer_width = "64"))]
    parked: AtomicUsize,
    /// The capacity in force. Read by every request (a request above it fails at
    /// once); written by resizes and by `forget`.
    capacity: AtomicUsize,
    /// Resizes (and forgets) between their change of the capacity and the
    /// matching change of the units (a grow's release, a shrink's `RETIRING`),
    /// counted from bit 1; bit 0 ([`DEFERRED`]) asks the last of them to serve
    /// when it ends, for a check of [`all_units_back`](Self::all_units_back)
    /// that they made fail.
    resizing: AtomicUsize,
    /// Resizes begun: with `resizing`, a seqlock's count, so that
    /// [`all_units_back`](Self::all_units_back) knows the capacity and the
    /// units it read belong together.
    resizes_begun: AtomicUsize,
    /// A counter's semaphore (`Semaphore::counting`): a request above the
    /// capacity waits for it to grow instead of failing. Set at construction;
    /// here because it is read with the capacity, on the word's line.
    counting: bool,
}

impl State {
    loom_const_fn! {
        pub(crate) fn new(capacity: usize, counting: bool) -> State {
            State {
                word: AtomicUsize::new(capacity << SHIFT),
                #[cfg(not(target_pointer_width = "64"))]
                parked: AtomicUsize::new(0),
                capacity: AtomicUsize::new(capacity),
                resizing: AtomicUsize::new(0),
                resizes_begun: AtomicUsize::new(0),
                counting,
            }
        }
    }

    /// A snapshot, for diagnostics and for the server's decisions.
    #[inline]
    pub(crate) fn load(&self) -> usize {
        self.word.load(Ordering::Acquire)
    }

    /// The capacity in force.
    #[inline]
    pub(crate) fn capacity(&self) -> usize {
        self.capacity.load(Ordering::Acquire)
    }

    /// Whether this is a counter's semaphore, whose requests above the capacity
    /// wait for it.
    #[inline]
    pub(crate) fn counting(&self) -> bool {
        self.counting
    }

    /// Before a change of the capacity: from here until
    /// [`end_resize`](Self::end_resize), [`all_units_back`](Self::all_units_back)
    /// answers `false`.
    pub(crate) fn begin_resize(&self) {
        self.resizing.fetch_add(ONE_RESIZE, Ordering::AcqRel);
        self.resizes_begun.fetch_add(1, Ordering::AcqRel);
    }

    /// After the units matched the change of the capacity. Returns whether a
    /// check for every unit back failed on the resizes in flight and this was
    /// the last of them: the caller then serves, so that the check is made
    /// again.
    pub(crate) fn end_resize(&self) -> bool {
        let mut resizing = self.resizing.load(Ordering::Relaxed);
        loop {
            let last = resizing >> 1 == 1;
            let next = if last { 0 } else { resizing - ONE_RESIZE };
            match self.resizing.compare_exchange_weak(
                resizing,
                next,
                Ordering::AcqRel,
                Ordering::Relaxed,
            ) {
                Ok(_) => {
                    return last && resizing & DEFERRED != 0 && Safeguard::DeferredCheckServes.on()
                }
                Err(actual) => resizing = actual,
            }
        }
    }

    /// Whether every unit is back: available equals the capacity and nothing is
    /// left to retire, read so that no resize or forget came between.
    ///
    /// A resize changes the capacity and then the units (a grow's release after
    /// the new capacity, a shrink's `RETIRING` after its lower one): a check that
    /// read one change without the other would see a lowered capacity with the
    /// units it owes not yet posted, or the old capacity with a grow's units, and
    /// could count a held unit as back. Reading either change acquires the
    /// resize's begin, so the second read of the count sees it, unless the first
    /// already had: then `resizing` was read after the begin, and is nonzero
    /// unless that resize's end (after both changes) was seen too.
    ///
    /// With a resize in flight it answers `false` and asks the last resize in
    /// flight to serve when it ends (a read-modify-write on the count that the
    /// end's CAS then sees, or that fails because the count fell to zero), so
    /// that a drain waiter is looked at again.
    pub(crate) fn all_units_back(&self) -> bool {
        let seqlock = Safeguard::ResizeSeqlock.on();
        loop {
            let begun = self.resizes_begun.load(Ordering::Acquire);
            let resizing = self.resizing.load(Ordering::Acquire);
            if resizing >= ONE_RESIZE && seqlock {
                if resizing & DEFERRED != 0
                    || self
                        .resizing
                        .compare_exchange(
                            resizing,
                            resizing | DEFERRED,
                            Ordering::AcqRel,
                            Ordering::Relaxed,
                        )
                        .is_ok()
                {
                    return false;
                }
                continue;
            }
            let state = self.load();
            // A read-modify-write: a counter's forget, which lowers the
            // capacity outside the seqlock and then reads the state word, either
            // comes first and is read here, or reads this and, after it, the
            // drain waiter's join ([`forget_held`](Self::forget_held)).
            let capacity = if Safeguard::CheckReadsCapacityByRmw.on() {
                self.capacity.fetch_add(0, Ordering::AcqRel)
            } else {
                self.capacity()
            };
            if self.resizes_begun.load(Ordering::Acquire) != begun && seqlock {
                // A resize began meanwhile: look again.
                continue;
            }
            return state & RETIRING == 0 && available(state) == capacity;
        }
    }

    /// Sets the capacity; returns the previous one.
    pub(crate) fn swap_capacity(&self, capacity: usize) -> usize {
        self.capacity.swap(capacity, Ordering::AcqRel)
    }

    /// Raises the capacity by `units`; `false` (and nothing changed) if it would
    /// exceed [`MAX_UNITS`].
    #[inline]
    pub(crate) fn add_capacity(&self, units: usize) -> bool {
        self.capacity
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |c| {
                c.checked_add(units).filter(|&c| c <= MAX_UNITS)
            })
            .is_ok()
    }

    /// A counter's grow: [`add_capacity`](Self::add_capacity) as one
    /// `fetch_add`, with no load ahead of it (a pool's every return; the load
    /// was a tenth of the checkout's time), undone past [`MAX_UNITS`]. Only a
    /// counter's: the capacity may read above `MAX_UNITS` until the undo, which
    /// a counter never compares a request with, and whose drain the caller
    /// then serves.
    #[inline]
    pub(crate) fn grow_capacity(&self, units: usize) -> bool {
        if units > MAX_UNITS {
            return false;
        }
        let before = self.capacity.fetch_add(units, Ordering::AcqRel);
        if before + units > MAX_UNITS {
            self.capacity.fetch_sub(units, Ordering::AcqRel);
            return false;
        }
        true
    }

    /// A counter's forget of `units` held: lowers the capacity by them if it
    /// holds them all (no shrink owes them), and returns whether it did. One
    /// step, outside the seqlock: the units were held, so no check for every
    /// unit back could count them either way, and a check's read of the
    /// capacity orders it against a drain's join
    /// ([`all_units_back`](Self::all_units_back)).
    #[inline]
    pub(crate) fn forget_held(&self, units: usize) -> bool {
        self.capacity
            .fetch_update(Ordering::AcqRel, Ordering::Relaxed, |c| {
                c.checked_sub(units)
            })
            .is_ok()
    }

    /// Lowers the capacity by `units` (a forgotten permit's), or to zero if that is
    /// less; returns by how much it went down.
    pub(crate) fn forget_capacity(&self, units: usize) -> usize {
        let before = self
            .capacity
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |c| {
                Some(c.saturating_sub(units))
            })
            .unwrap_or_else(|c| c);
        before.min(units)
    }

    /// The fast path: takes `units` if nobody is queued, the semaphore is open and
    /// they are free. One CAS, retried only when another thread changed the word.
    ///
    /// `Acquire` on success pairs with the `Release` of every earlier release, so a
    /// new holder sees what the previous holders wrote.
    #[inline]
    pub(crate) fn try_take(&self, units: usize) -> Result<(), Refused> {
        let mut state = self.word.load(Ordering::Relaxed);
        loop {
            if state & CLOSED != 0 {
                return Err(Refused::Closed);
            }
            let refuse = if Safeguard::RetiringBlocksFastPath.on() {
                UNITS_OWED
            } else {
                QUEUED
            };
            if state & refuse != 0 || available(state) < units {
                return Err(Refused::NoUnits);
            }
            match self.word.compare_exchange_weak(
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

    /// Returns `units` (or adds them, for a grow): one `fetch_add`. Returns the
    /// previous value; if it had [`UNITS_OWED`], the caller serves the queue.
    #[inline]
    pub(crate) fn release(&self, units: usize) -> usize {
        self.word.fetch_add(units << SHIFT, Ordering::Release)
    }

    /// A parker's join, after its request is published (its cell, or its node on
    /// the list): sets `QUEUED` and `ARRIVED`, the parker's place in the
    /// no-barging order, and counts the request in; returns the previous value.
    ///
    /// `Release` so the server's `Acquire` read of this value (in
    /// [`clear_arrived`](Self::clear_arrived) or [`try_clear`](Self::try_clear))
    /// sees the publish; `Acquire` so the parker sees the units released before
    /// it, and a grant of its own request made before it.
    #[inline]
    pub(crate) fn join(&self) -> usize {
        let flags = QUEUED | if Safeguard::Arrived.on() { ARRIVED } else { 0 };
        #[cfg(target_pointer_width = "64")]
        {
            // A CAS loop, as `fetch_or` is here too: one read-modify-write sets
            // the flags and counts the request in.
            let mut state = self.word.load(Ordering::Relaxed);
            loop {
                let next = (state | flags).wrapping_add(ONE_WAITER);
                match self.word.compare_exchange_weak(
                    state,
                    next,
                    Ordering::AcqRel,
                    Ordering::Relaxed,
                ) {
                    Ok(prev) => return prev,
                    Err(actual) => state = actual,
                }
            }
        }
        #[cfg(not(target_pointer_width = "64"))]
        {
            self.parked.fetch_add(1, Ordering::Relaxed);
            self.word.fetch_or(flags, Ordering::AcqRel)
        }
    }

    /// The server counts out a request it resolved.
    #[inline]
    pub(crate) fn count_out(&self) {
        // A count only: any read-modify-write keeps the word's release
        // sequences whole, whatever its ordering.
        #[cfg(target_pointer_width = "64")]
        self.word.fetch_sub(ONE_WAITER, Ordering::Relaxed);
        #[cfg(not(target_pointer_width = "64"))]
        self.parked.fetch_sub(1, Ordering::Relaxed);
    }

    /// A cancel that won counts its request out, and reads the word to see
    /// whether a unit is free (then it serves: the request may have been the
    /// head). Returns the word as it was.
    ///
    /// A read-modify-write, `AcqRel`, after the cancel's phase CAS. Every
    /// serving pass reads the word with `Acquire` before it walks the queue,
    /// after the release that asked it to serve. If that read comes after this
    /// write in the word's order, it is in this write's release sequence (every
    /// write of the word is a read-modify-write), and the pass sees the head
    /// cancelled; if before, this read comes after that release and sees its
    /// units. A relaxed count and a plain load could miss each other (store
    /// buffering).
    #[inline]
    pub(crate) fn cancel_count_out(&self) -> usize {
        if !Safeguard::CancelReadsByRmw.on() {
            self.count_out();
            return self.word.load(Ordering::Acquire);
        }
        #[cfg(target_pointer_width = "64")]
        {
            self.word.fetch_sub(ONE_WAITER, Ordering::AcqRel)
        }
        #[cfg(not(target_pointer_width = "64"))]
        {
            self.parked.fetch_sub(1, Ordering::Relaxed);
            // Without `alloc` the server stops inside the critical section,
            // which this cancel entered after it: a load sees its units.
            if cfg!(feature = "alloc") {
                self.word.fetch_add(0, Ordering::AcqRel)
            } else {
                self.word.load(Ordering::Acquire)
            }
        }
    }

    /// Parked requests: exact once every park and resolution in flight has
    /// counted.
    #[inline]
    pub(crate) fn waiters(&self) -> usize {
        #[cfg(target_pointer_width = "64")]
        let (count, shift) = (self.word.load(Ordering::Relaxed), COUNT_SHIFT);
        #[cfg(not(target_pointer_width = "64"))]
        let (count, shift) = (self.parked.load(Ordering::Relaxed), 0);
        // The count is the top field: below zero (a request counted out by a
        // server before its parker counted it in) it reads as zero.
        if (count as isize) < 0 {
            0
        } else {
            count >> shift
        }
    }

    /// Sets `CLOSED`; returns the previous value.
    pub(crate) fn close(&self) -> usize {
        self.word.fetch_or(CLOSED, Ordering::AcqRel)
    }

    /// Server only: clears `ARRIVED` before it looks at the queue, so that a join
    /// after that is seen by [`try_clear`](Self::try_clear).
    ///
    /// A plain load first: a stale "clear" only means `try_clear` sees
    /// `ARRIVED` later and the server passes once more.
    #[inline]
    pub(crate) fn clear_arrived(&self) {
        if self.word.load(Ordering::Relaxed) & ARRIVED != 0 {
            self.word.fetch_and(!ARRIVED, Ordering::AcqRel);
        }
    }

    /// Server only: clears `flags` (`QUEUED` if its list is empty, `RETIRING` if
    /// nothing is left to retire) unless a parker joined or a shrink posted since
    /// [`clear_arrived`](Self::clear_arrived). Returns `false` if one did: the
    /// server must look again.
    pub(crate) fn try_clear(&self, flags: usize) -> bool {
        debug_assert_eq!(flags & !UNITS_OWED, 0);
        let mut state = self.word.load(Ordering::Acquire);
        loop {
            if state & ARRIVED != 0 {
                return false;
            }
            if state & flags == 0 {
                return true;
            }
            match self.word.compare_exchange_weak(
                state,
                state & !flags,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return true,
                Err(actual) => state = actual,
            }
        }
    }

    /// A shrink, after it posted the units to retire: sets `RETIRING` (and
    /// `ARRIVED`, so a server about to clear `RETIRING` looks again). From here
    /// on no fast path takes a unit, and every release asks for service.
    pub(crate) fn start_retiring(&self) {
        self.word.fetch_or(RETIRING | ARRIVED, Ordering::AcqRel);
    }

    /// A read-modify-write that changes nothing: a forget's lowering of the
    /// capacity is then ordered against every parker's join, as a shrink's is
    /// by its `RETIRING` ([`Resizes::mark_lowered`](super::resize::Resizes::mark_lowered)).
    pub(crate) fn order_after_joins(&self) {
        if Safeguard::ForgetOrdersAfterJoins.on() {
            self.word.fetch_add(0, Ordering::AcqRel);
        }
    }

    /// Takes up to `debt` free units out of circulation, whoever waits and
    /// whatever the flags; returns how many it took. The server's, for a
    /// retirement, and `forget_free`'s, which forgets them at once.
    pub(crate) fn retire(&self, debt: usize) -> usize {
        let mut state = self.word.load(Ordering::Acquire);
        loop {
            let take = available(state).min(debt);
            if take == 0 {
                return 0;
            }
            match self.word.compare_exchange_weak(
                state,
                state - (take << SHIFT),
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return take,
                Err(actual) => state = actual,
            }
        }
    }

    /// Server only, once it owes nothing: clears `RETIRING` (left set by the
    /// retirement it has just paid) unless a parker joined or a shrink posted
    /// since [`clear_arrived`](Self::clear_arrived). Returns `false` if one did:
    /// the server must look again. From here until the server looks again,
    /// `RETIRING` set means a new shrink, which stops grants
    /// ([`take_for_head`](Self::take_for_head)).
    pub(crate) fn clear_retiring(&self) -> bool {
        let mut state = self.word.load(Ordering::Acquire);
        loop {
            if state & RETIRING == 0 {
                return true;
            }
            if state & ARRIVED != 0 {
                return false;
            }
            match self.word.compare_exchange_weak(
                state,
                state & !RETIRING,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return true,
                Err(actual) => state = actual,
            }
        }
    }

    /// Server only: takes `units` for the head waiter if they are free, whatever
    /// `QUEUED` says (the head may be a parker that has not joined yet, while fast
    /// paths still run), and unless `RETIRING` is set (the server cleared it when
    /// it had paid its debt, so a shrink posted since). A CAS, so it never takes
    /// units that are not there, nor units a shrink that returned before it owes.
    ///
    /// `AcqRel`: it acquires the releases whose units it hands on, and the request's
    /// `GRANTED` store after it hands them to the waiter.
    #[inline]
    pub(crate) fn take_for_head(&self, units: usize) -> HeadTake {
        let mut state = self.word.load(Ordering::Acquire);
        loop {
            if state & CLOSED != 0 {
                return HeadTake::Closed;
            }
            if state & RETIRING != 0 && Safeguard::RetiringStopsGrants.on() {
                return HeadTake::Retiring;
            }
            if available(state) < units {
                return HeadTake::DoesNotFit;
            }
            match self.word.compare_exchange_weak(
                state,
                state - (units << SHIFT),
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return HeadTake::Taken,
                Err(actual) => state = actual,
            }
        }
    }

    /// Server only: puts back units it took for a head that was cancelled before
    /// the grant reached it. The server goes on serving, so nobody else need.
    #[inline]
    pub(crate) fn give_back(&self, units: usize) {
        self.word.fetch_add(units << SHIFT, Ordering::Release);
    }
}
