//! Shedding parked requests by rank: the queue's help for a gate that sheds the
//! lowest priority first (with `alloc`, the only build a gate exists in).
//!
//! A request carries a rank (`RANKS` of them; 0 is shed first). Whoever wants
//! requests of a rank gone *posts* units for it and asks for service; the
//! serving pass, once the head does not fit (a grant wins: a request that the
//! free units fit is granted, never shed), walks the queue from the head and
//! resolves waiting requests of each posted rank, lowest rank first and oldest
//! first, with `SHED` until their units cover what was posted. What it cannot
//! find (the requests were granted, cancelled or shed meanwhile) is dropped.
//!
//! # The books
//!
//! For the poster to see what is already on its way out, [`Shedding::pending`]
//! counts, per rank, the units posted and not yet walked for, plus the units of
//! requests resolved `SHED` whose owners have not yet seen it (*doomed*). The
//! server counts a request doomed before its resolving CAS (and out again if
//! the owner's cancel won), and the owner counts it out once it reads `SHED`
//! (its poll, or its cancel that lost): the CAS orders the two, so the count
//! never goes below zero. Advisory, as the gate's estimate is: a read may be a
//! step stale; no unit is counted here.

use crate::loom::sync::{AtomicUsize, Ordering};

/// Ranks a request can have; a plain semaphore's requests have the highest.
pub(crate) const RANKS: usize = 4;

/// The rank of a request nobody sheds.
pub(crate) const UNSHEDDABLE: u8 = (RANKS - 1) as u8;

pub(crate) struct Shedding {
    /// Units posted per rank, not yet taken by a pass.
    posted: [AtomicUsize; RANKS],
    /// Units per rank resolved `SHED` whose owners have not yet seen it.
    doomed: [AtomicUsize; RANKS],
}

impl Shedding {
    pub(crate) fn new() -> Self {
        Self {
            posted: core::array::from_fn(|_| AtomicUsize::new(0)),
            doomed: core::array::from_fn(|_| AtomicUsize::new(0)),
        }
    }

    /// Asks for `units` of waiting requests of `rank` to be shed; the caller
    /// then asks for service. `AcqRel`, as a shrink's post.
    pub(crate) fn post(&self, rank: usize, units: usize) {
        self.posted[rank].fetch_add(units, Ordering::AcqRel);
    }

    /// Units of `rank` posted or doomed: on their way out of the queue.
    pub(crate) fn pending(&self, rank: usize) -> usize {
        self.posted[rank]
            .load(Ordering::Relaxed)
            .saturating_add(self.doomed[rank].load(Ordering::Relaxed))
    }

    /// Whether anything is posted: the server's look before a walk.
    pub(crate) fn any_posted(&self) -> bool {
        self.posted
            .iter()
            .any(|posted| posted.load(Ordering::Relaxed) != 0)
    }

    /// The server takes what is posted for `rank`. A load first: most passes
    /// find nothing.
    pub(crate) fn take(&self, rank: usize) -> usize {
        if self.posted[rank].load(Ordering::Relaxed) == 0 {
            0
        } else {
            self.posted[rank].swap(0, Ordering::AcqRel)
        }
    }

    /// The server gives back what a walk cut short by a full wake batch did not
    /// use, for the next pass.
    pub(crate) fn put_back(&self, rank: usize, units: usize) {
        if units != 0 {
            self.posted[rank].fetch_add(units, Ordering::AcqRel);
        }
    }

    /// The server drops everything posted: the queue is empty or closed.
    pub(crate) fn drop_posted(&self) {
        for rank in 0..RANKS {
            self.take(rank);
        }
    }

    /// The server is about to resolve a request of `units` of `rank` with
    /// `SHED`: counted before the CAS that its owner's read of the phase
    /// follows.
    pub(crate) fn doom(&self, rank: usize, units: usize) {
        self.doomed[rank].fetch_add(units, Ordering::Relaxed);
    }

    /// A doomed request is out of the books: its owner read `SHED`, or the
    /// server's CAS lost to the owner's cancel.
    pub(crate) fn settle(&self, rank: usize, units: usize) {
        self.doomed[rank].fetch_sub(units, Ordering::Relaxed);
    }
}
