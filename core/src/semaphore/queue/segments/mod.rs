//! The wait queue's storage: cells in a list of segments, indexed by ticket, from
//! which a segment whose cells are all cancelled is removed by the cancel that
//! completes it, without waiting for anyone.
//!
//! The list is generic over its cell ([`SegmentCell`]): it makes the cells, hands
//! them out by ticket and walks them in ticket order, and knows nothing of what
//! they hold. The wait queue with `alloc` (`queue/cells.rs`) keeps its parked
//! requests in them; the list's own tests use a cell of their own (`tests/`).
//!
//! # Shape
//!
//! ```text
//!  head                                                  tail (address | count)
//!   │                                                       │
//!   ▼                                                       ▼
//! ┌──────────┐ next ┌──────────┐ next                   ┌──────────┐ next
//! │ 4        ├─────►│ 5        ├───────────────────────►│ 7        ├─────► 0
//! │  ▲       │      │          │   ┌──────────────┐     │     ▲    │
//! └──┼───────┘      └──────────┘   │ 6     FROZEN │     └─────┼────┘
//!  cursor                          │ next: GONE   │     next ticket
//!                                  └──────────────┘
//! ```
//!
//! Each box is a segment, by its `id`: `head` names the cursor's, `tail` the one
//! the next claim lands in; every cell of 6 was cancelled, so it was frozen and
//! spliced out of 5's link, and it is freed once the threads still holding it let
//! go.
//!
//! Ticket `t` is cell `t % CELLS` of segment `t / CELLS`. A claim is one CAS on
//! `tail`, the tail segment's address with a count in the low bits its alignment
//! leaves free (`link.rs`). A count below `CELLS` is the segment's next ticket;
//! once it reaches `CELLS` the segment is full, and every claimer counted above
//! `CELLS` is a *helper*: it installs the next segment unless someone has, swings
//! `tail` to it, and claims again (`claim.rs`).
//!
//! The list starts empty (so that a semaphore can be made in a `const`): the
//! first claim installs the first segment, naming it by `head`, then `tail`.
//!
//! The one cursor, the serving role's, walks the cells in ticket order; `head`
//! names its segment. It moves on in three steps any thread can finish: it flags
//! its segment's link [`PASSING`](link::PASSING), `head` swings to the next
//! segment, and the swing's winner clears the link to [`GONE`](link::GONE)
//! (`cursor.rs`).
//!
//! Links (`next`, `head`) are words: the target's address, two flags, and the
//! readers in transit: reading a link and counting a reference on its target is
//! one step on the word, so a thread that changes the link hands those readers'
//! counts to the old target, which can then never be freed under a reader
//! (`link.rs`).
//!
//! A cancel counts itself in its segment's count word and lets go of its
//! ticket's reference in the same step; the one that completes the segment keeps
//! it and removes the segment (`removal.rs`): it makes sure `tail` has left it
//! (installing the successor if need be), *freezes* its link with
//! [`FROZEN`](link::FROZEN), then walks from `head` to its predecessor and
//! *splices* it out with a CAS on the predecessor's link, splicing out any other
//! frozen segment it meets on the way. The thread whose splice wins cleans the
//! segment up: it clears the segment's link to [`GONE`](link::GONE), so a removed
//! segment keeps nothing after it alive. A segment the cursor has reached is not
//! spliced; the cursor passes it.
//!
//! A thread that works on a segment holds a reference on it as a
//! [`SegmentRef`](segment::SegmentRef), which lets go of it when dropped; a
//! [`Ticket`] holds one until it is returned or cancelled (`segment.rs`).
//!
//! # Invariants
//!
//! 1. **Claims in order.** Every ticket is claimed once, in order: a claim is a
//!    CAS that adds one to the count it read, and `tail` leaves a segment only
//!    once all its `CELLS` tickets are taken.
//! 2. **Counted references.** A segment's count holds its references: its
//!    tickets not yet returned or cancelled (`CELLS` at birth); `TAIL` while
//!    `tail` names it, less the helpers that `tail`'s count names and that have
//!    already let go (the swing adds the helpers counted and removes `TAIL`,
//!    which exceeds the most helpers there can be); `LINK_REF` for each link
//!    that names it (a predecessor's `next`, or `head`), less its readers in
//!    transit, who each give back one; and one for each thread holding it while
//!    it works (a walker, a pass, a splice).
//! 3. **Last reference frees.** Nobody touches a segment without holding one of
//!    those references, so the decrement that brings the count to zero is the
//!    last access but the free, and happens once.
//! 4. **Links move forward.** A link never names a segment it has left: `next`
//!    is empty, then names the successor, then (by splices) later segments,
//!    then `GONE`. `tail` leaves a segment before its link is frozen or let go
//!    of, so whoever reads `GONE` knows `tail` has moved on.
//! 5. **Tail ahead, head unspliced.** `tail` is never behind the cursor, and
//!    `head` never names a spliced segment: a splice's CAS fails on a link
//!    flagged `PASSING`, and a segment's link is frozen only after `tail` has
//!    left it.
//! 6. **Frozen links.** A frozen link changes only to `GONE`, by the cleaner of
//!    its segment; a splice's CAS fails on a frozen link unless it is `head`'s
//!    segment's (which is passed, never spliced), so no splice goes through a
//!    removed segment.
//!
//! A segment the cursor has left is freed once its last ticket is returned, and
//! a removed one once its splice's winner has cleaned it up and its walkers have
//! let go: each stalled thread holds at most the two segments it is working on,
//! not what follows them. The memory held is then the segments with a live
//! ticket, plus a constant per thread.
//!
//! A freed segment's memory is kept, one block for the process, for the next
//! segment's allocation (`spare.rs`): an aligned allocation is slow in common
//! allocators. In the crate's tests a freed segment is instead marked and its
//! memory kept until the list is dropped (`quarantine.rs`): a use after the
//! free fails an assertion instead of being undefined, and the drop checks that
//! every segment was freed exactly once.
//!
//! # Progress
//!
//! Every operation is lock-free: each retry of a CAS follows another thread's
//! success, a walk starts again only after another thread's splice, pass or
//! freeze changed what it read, and a helper's install and swing each complete or
//! find them done by another. The exceptions are saturated counts, where a thread
//! waits for one of the others to leave: more than `COUNT - CELLS` helpers on one
//! full segment at once (2 016), or more than `TRANSIT` readers on one link (255),
//! inside the same few instructions.
//!
//! # Memory orderings
//!
//! Counts are let go of with `AcqRel`: the decrement that reaches zero acquires
//! every other holder's accesses before the free. Links are written by `AcqRel`
//! read-modify-writes and read with `Acquire`, so whoever reaches a segment
//! through one sees its initialization and its predecessor's changes; the swing
//! passes that on to claimers through `tail`, likewise.

mod claim;
mod cursor;
mod link;
mod quarantine;
mod removal;
mod segment;
mod spare;
#[cfg(test)]
mod tests;

pub(crate) use claim::Ticket;
#[cfg(not(test))]
pub(crate) use segment::fills_one_block;

use link::AtomicWord;
use segment::{Segment, LINK_REF, TAIL};

use crate::loom::loom_const_fn;
use crate::loom::sync::{Ordering, UnsafeCell};

/// What the list keeps in each cell. The list makes the cells, one per ticket as
/// its segment is born, and hands out shared references to them; what a cell
/// holds, and how its accesses are ordered, is the cell's own business.
pub(crate) trait SegmentCell {
    /// A cell as its segment is born, before any ticket names it.
    fn fresh() -> Self;
}

/// Cells in a segment. A segment of 31 cells of one cache line each and its
/// header's line fill one 2 KiB block; under loom two cells, so a model crosses
/// a boundary within a few tickets.
#[cfg(not(admit_loom))]
const CELLS: usize = 31;
#[cfg(admit_loom)]
const CELLS: usize = 2;

/// The list of segments, and its cursor.
pub(crate) struct Segments<C> {
    /// The tail segment's address | the count (`link.rs`); 0 until the first
    /// claim.
    tail: AtomicWord<C>,
    /// A link word naming the cursor's segment (the first not yet passed); 0
    /// until the first claim.
    head: AtomicWord<C>,
    /// The cursor's cell in `head`'s segment; used only by the serving role.
    index: UnsafeCell<usize>,
    /// Where the crate's tests keep freed segments until the drop
    /// (`quarantine.rs`): made by the first allocation (`Box::into_raw`, so the
    /// segments' pointers to it stay valid when the list moves), freed last by
    /// the drop.
    #[cfg(test)]
    graveyard: core::sync::atomic::AtomicPtr<quarantine::Graveyard>,
}

// SAFETY: the segments are reached through atomics and references counted per
// invariant *counted references*, and their cells by whatever rules `C` keeps
// (it is `Send + Sync`); the cursor only by the serving role, which one thread
// holds at a time (the caller's promise to `current`, `advance` and `scan`).
unsafe impl<C: Send + Sync> Send for Segments<C> {}
// SAFETY: as above.
unsafe impl<C: Send + Sync> Sync for Segments<C> {}

impl<C: SegmentCell> Segments<C> {
    loom_const_fn! {
        /// An empty list, with no segment yet.
        pub(crate) fn new() -> Segments<C> {
            Segments {
                tail: AtomicWord::empty(),
                head: AtomicWord::empty(),
                index: UnsafeCell::new(0),
                #[cfg(test)]
                graveyard: core::sync::atomic::AtomicPtr::new(core::ptr::null_mut()),
            }
        }
    }
}

impl<C> Drop for Segments<C> {
    /// Frees every segment from the cursor's to the tail. Every ticket must have
    /// been returned (the semaphore outlives its futures); a segment holding
    /// one of a future leaked with `mem::forget` is leaked with it.
    fn drop(&mut self) {
        if self.tail.load(Ordering::Acquire) != 0 {
            self.free_all();
        }
        self.close_graveyard();
    }
}

impl<C> Segments<C> {
    /// The drop's work, once the list has started.
    fn free_all(&mut self) {
        let (tail, count) = self.tail.load(Ordering::Acquire).split_tail();
        debug_assert!(count <= CELLS, "a helper outlived the list");
        // SAFETY: `tail`'s reference and those of its tickets never claimed;
        // the link or `head` behind it keeps it alive for the walk below.
        unsafe { Segment::drop_refs(tail, TAIL + CELLS - count.min(CELLS)) };
        let mut segment = self.head.load(Ordering::Acquire).target().expect("head");
        loop {
            // SAFETY: `head`'s reference, or the link's we took over below.
            let next = unsafe { segment.as_ref() }
                .live()
                .next
                .load(Ordering::Acquire);
            // SAFETY: that reference; with every ticket returned and `tail`'s
            // gone, the last one.
            unsafe { Segment::drop_refs(segment, LINK_REF) };
            let Some(next) = next.target() else {
                break;
            };
            // We now hold the link's reference of the segment just freed.
            segment = next;
        }
    }
}
