//! The state word: the free units and three flags in one atomic, so that every fast
//! path is one read-modify-write and sees, in the same step, whether anyone waits.
//!
//! ```text
//!  bits 31..3 (and up)        bit 2       bit 1      bit 0
//! [ available units     ]  [ ARRIVED ]  [ QUEUED ]  [ CLOSED ]
//! ```
//!
//! - `available`: free units, shifted by [`SHIFT`]. Capacity is capped at
//!   [`MAX_UNITS`] = 2²⁹ − 1 so the word fits in 32 bits: no 64-bit atomic is needed
//!   on any target.
//! - `QUEUED`: a waiter may be unresolved. Set by a parker's [`State::join`], cleared
//!   only by the server ([`State::try_clear_queued`]) once its list is empty and no
//!   parker joined since it last looked. The fast paths refuse while it is set: that
//!   is the no-barging rule.
//! - `ARRIVED`: a parker joined since the server last looked. Set with `QUEUED` by
//!   every [`State::join`], cleared only by the server ([`State::clear_arrived`]).
//!   It makes each join change the word, so the server's clearing of `QUEUED` (a
//!   CAS expecting `ARRIVED` clear) fails if anyone joined after the server took the
//!   arrivals. `ARRIVED` set implies `QUEUED` set.
//! - `CLOSED`: set once by [`State::close`], never cleared.
//!
//! Only units move through `available`: taken by a fast path or by the server for
//! the head waiter (each a CAS that checks they are there), returned by a release (a
//! `fetch_add`). So `available` never exceeds the capacity, and never underflows.

use crate::loom::loom_const_fn;
use crate::loom::sync::{AtomicUsize, Ordering};
use crate::mechanism::Mechanism;

/// The semaphore is closed.
pub(crate) const CLOSED: usize = 1;
/// A waiter may be unresolved: fast paths refuse.
pub(crate) const QUEUED: usize = 1 << 1;
/// A parker joined since the server last took the arrivals.
pub(crate) const ARRIVED: usize = 1 << 2;
/// `available` starts at this bit.
pub(crate) const SHIFT: u32 = 3;
/// The largest capacity the encoding holds in 32 bits.
pub(crate) const MAX_UNITS: usize = (u32::MAX >> SHIFT) as usize;

const _: () = assert!(usize::BITS >= 32, "admit needs at least 32-bit pointers");

/// Free units in a state value.
#[inline]
pub(crate) const fn available(state: usize) -> usize {
    state >> SHIFT
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
    /// The semaphore is closed: the head is to be told so.
    Closed,
}

/// The state word; see the module docs.
pub(crate) struct State(AtomicUsize);

impl State {
    loom_const_fn! {
        pub(crate) fn new(capacity: usize) -> State {
            State(AtomicUsize::new(capacity << SHIFT))
        }
    }

    /// A snapshot, for diagnostics and for the server's decisions.
    #[inline]
    pub(crate) fn load(&self) -> usize {
        self.0.load(Ordering::Acquire)
    }

    /// The fast path: takes `units` if nobody is queued, the semaphore is open and
    /// they are free. One CAS, retried only when another thread changed the word.
    ///
    /// `Acquire` on success pairs with the `Release` of every earlier release, so a
    /// new holder sees what the previous holders wrote.
    #[inline]
    pub(crate) fn try_take(&self, units: usize) -> Result<(), Refused> {
        let mut state = self.0.load(Ordering::Relaxed);
        loop {
            if state & CLOSED != 0 {
                return Err(Refused::Closed);
            }
            if state & QUEUED != 0 || available(state) < units {
                return Err(Refused::NoUnits);
            }
            match self.0.compare_exchange_weak(
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

    /// Returns `units`: one `fetch_add`. Returns the previous value; if it had
    /// `QUEUED`, the caller serves the queue.
    #[inline]
    pub(crate) fn release(&self, units: usize) -> usize {
        self.0.fetch_add(units << SHIFT, Ordering::Release)
    }

    /// A parker's join, after its node is on the arrivals stack: sets `QUEUED` and
    /// `ARRIVED` in one `fetch_or`, the parker's place in the no-barging order, and
    /// returns the previous value.
    ///
    /// `Release` so the server's `Acquire` read of this value (in
    /// [`clear_arrived`](Self::clear_arrived) or
    /// [`try_clear_queued`](Self::try_clear_queued)) sees the node's push; `Acquire`
    /// so the parker sees the units released before it, and a grant of its own node
    /// made before it.
    #[inline]
    pub(crate) fn join(&self) -> usize {
        let arrived = if Mechanism::Arrived.on() { ARRIVED } else { 0 };
        self.0.fetch_or(QUEUED | arrived, Ordering::AcqRel)
    }

    /// Sets `CLOSED`; returns the previous value.
    pub(crate) fn close(&self) -> usize {
        self.0.fetch_or(CLOSED, Ordering::AcqRel)
    }

    /// Server only: clears `ARRIVED` before it takes the arrivals, so that a join
    /// after that is seen by [`try_clear_queued`](Self::try_clear_queued).
    ///
    /// A plain load first: a stale "clear" only means `try_clear_queued` sees
    /// `ARRIVED` later and the server absorbs once more.
    #[inline]
    pub(crate) fn clear_arrived(&self) {
        if self.0.load(Ordering::Relaxed) & ARRIVED != 0 {
            self.0.fetch_and(!ARRIVED, Ordering::AcqRel);
        }
    }

    /// Server only, with its list empty: clears `QUEUED` unless a parker joined since
    /// [`clear_arrived`](Self::clear_arrived). Returns `false` if one did: the
    /// server must take the arrivals again.
    pub(crate) fn try_clear_queued(&self) -> bool {
        let mut state = self.0.load(Ordering::Acquire);
        loop {
            if state & ARRIVED != 0 {
                return false;
            }
            if state & QUEUED == 0 {
                return true;
            }
            match self.0.compare_exchange_weak(
                state,
                state & !QUEUED,
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
    /// paths still run). A CAS, so it never takes units that are not there.
    ///
    /// `AcqRel`: it acquires the releases whose units it hands on, and the node's
    /// `GRANTED` store after it hands them to the waiter.
    #[inline]
    pub(crate) fn take_for_head(&self, units: usize) -> HeadTake {
        let mut state = self.0.load(Ordering::Acquire);
        loop {
            if state & CLOSED != 0 {
                return HeadTake::Closed;
            }
            if available(state) < units {
                return HeadTake::DoesNotFit;
            }
            match self.0.compare_exchange_weak(
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
        self.0.fetch_add(units << SHIFT, Ordering::Release);
    }
}
