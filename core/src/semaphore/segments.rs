//! The next wait queue's storage (issue 9, docs/next-queue.md): cells in a list
//! of segments, indexed by ticket, reclaimed without waiting for anyone.
//!
//! Not used by the semaphore yet, so built only in the crate's tests: it is
//! model-checked on its own first (`loom_tests/segments.rs`), and removing a
//! segment whose cells are all cancelled from the middle of the list is the next
//! step. What is here: claiming tickets, installing segments, the serving cursor's
//! walk, and freeing every segment exactly once.
//!
//! # Shape
//!
//! Ticket `t` is cell `t % CELLS` of the `t / CELLS`-th segment. A claim is one
//! CAS on `tail`, the tail segment's address with a count in the low bits its
//! alignment leaves free. A count below `CELLS` is the segment's next ticket; once
//! it reaches `CELLS` the segment is full, and every claimer counted above `CELLS`
//! is a *helper*: it installs the next segment unless someone has, swings `tail`
//! to it, and claims again. The one cursor, the serving role's, walks the cells in
//! ticket order and moves into the next segment when it has passed the last cell.
//!
//! # Invariants
//!
//! 1. Every ticket is claimed once, in order: a claim is a CAS that adds one to
//!    the count it read, and `tail` leaves a segment only once all its `CELLS`
//!    tickets are taken.
//! 2. A segment's `refs` counts the references that keep it alive: its tickets not
//!    yet released (`CELLS` at birth, each released once by its holder); `TAIL`
//!    while `tail` names it, less the helpers that `tail`'s count names and that
//!    have already let go (the swing adds the helpers counted and removes `TAIL`,
//!    so `TAIL` above the most helpers there can be keeps the count above zero
//!    until then); and one for what reaches it from behind: its predecessor's
//!    `next`, or the cursor (which takes the link's reference over when it moves
//!    in, and starts with the first segment's).
//! 3. Nobody touches a segment without holding one of those references, so the
//!    release that brings `refs` to zero is the last access but the free, and
//!    happens once.
//! 4. `next` is empty, then the successor (set once, by a CAS), then [`PASSED`]
//!    once the cursor has moved in. The cursor swings `tail` off a segment before
//!    marking it passed, so whoever reads [`PASSED`] knows `tail` has moved on.
//! 5. `tail` is never behind the cursor: the cursor moves into a segment only
//!    after `tail` has left the one before.
//!
//! A segment the cursor has left is freed as soon as its last ticket is released:
//! a ticket held for long (a granted request whose owner is descheduled) keeps its
//! own segment, not the ones after it, since the cursor's move clears the link.
//!
//! In the crate's tests a freed segment is marked and its memory kept until the
//! list is dropped: a use after the free fails an assertion instead of being
//! undefined, and the drop checks that every segment was freed exactly once.
//!
//! # Progress
//!
//! A claim is lock-free: each retry of its CAS follows another claim's success,
//! a helper's install and swing each complete or find them done by another, and a
//! helper claims again only after the segment it found full has been left behind.
//! The one exception is a saturated count (more than `COUNT - CELLS` helpers on one
//! full segment at once: 992 threads inside the same few instructions), where a
//! claimer waits for one of them. Releasing a ticket is one `fetch_sub`; moving the
//! cursor is bounded (at most one swing, which another thread may have done).
//!
//! # Memory orderings
//!
//! `refs` is released with `AcqRel`: the release that reaches zero acquires every
//! other holder's accesses before the free. `next` is published with a `Release`
//! CAS and read with `Acquire`, so whoever reaches a segment through it sees its
//! initialization; the swing passes that on to claimers through `tail`, whose
//! CASes are `AcqRel` and loads `Acquire`. The cursor's store of [`PASSED`] is
//! `Release` after its swing, and a helper's `Acquire` read of it orders its next
//! read of `tail` after the swing.

use core::ptr::{addr_of_mut, NonNull};
use core::task::Waker;

use crate::loom::heap::{self, Layout};
use crate::loom::sync::{AtomicUsize, Ordering, UnsafeCell};
use crate::mechanism::Mechanism;

/// Cells in a segment. A segment of 31 cells of 32 bytes and its header fill one
/// 1 KiB block; under loom two cells, so a model crosses a boundary within a few
/// tickets.
#[cfg(not(all(test, admit_loom)))]
pub(crate) const CELLS: usize = 31;
#[cfg(all(test, admit_loom))]
pub(crate) const CELLS: usize = 2;

/// A segment's alignment: `tail`'s low bits below it hold the count.
const ALIGN: usize = 1024;
/// The count's bits in `tail`.
const COUNT: usize = ALIGN - 1;
/// `tail`'s reference on the segment it names: more than the helpers `COUNT`
/// can name, so the segment outlives every helper that lets go before the swing.
const TAIL: usize = ALIGN;
/// `next` of a segment the cursor has moved out of (not an address: unaligned).
pub(crate) const PASSED: usize = 1;

// The block the shape is sized for (atomics of the loom and shuttle builds are
// larger; the quarantine's fields take the bytes the header leaves in a test build).
#[cfg(not(any(admit_loom, admit_shuttle)))]
const _: () = assert!(core::mem::size_of::<Segment>() == ALIGN);

/// One parked request's place: what the semaphore will keep in it.
#[derive(Debug)]
pub(crate) struct Cell {
    /// The cell's phase, the semaphore's to define (zero at birth).
    pub(crate) status: AtomicUsize,
    /// The units asked for, written by the ticket holder before it publishes.
    pub(crate) units: UnsafeCell<usize>,
    /// The parked request's waker.
    #[allow(dead_code, reason = "the semaphore's, once it uses the list")]
    pub(crate) waker: UnsafeCell<Option<Waker>>,
}

/// `CELLS` cells and the links and count that keep them.
#[repr(C, align(1024))]
struct Segment {
    /// Empty (0), the successor's address, or [`PASSED`] (invariant 4).
    next: AtomicUsize,
    /// The references that keep the segment alive (invariant 2).
    refs: AtomicUsize,
    cells: [Cell; CELLS],
    /// In the crate's tests a freed segment's memory is kept until its list is
    /// dropped, so that a use after the free is caught, not undefined.
    #[cfg(test)]
    quarantine: Quarantine,
}

#[cfg(not(test))]
type Graveyard = ();

#[cfg(test)]
impl Graveyard {
    /// Checks that every segment the list allocated was freed, then releases
    /// their memory and the graveyard's.
    ///
    /// # Safety
    ///
    /// `graveyard` came from the list's `Box::leak`, and nothing uses it or a
    /// segment of the list again.
    unsafe fn close(graveyard: NonNull<Graveyard>) {
        // SAFETY: by the caller, ours to free.
        let graveyard = unsafe { alloc::boxed::Box::from_raw(graveyard.as_ptr()) };
        let freed = graveyard.freed.into_inner().unwrap();
        if !std::thread::panicking() {
            let allocated = graveyard.allocated.into_inner();
            assert_eq!(freed.len(), allocated, "a segment leaked");
        }
        for segment in freed {
            // SAFETY: freed once each (a second free fails its check), and by
            // the caller nobody touches them again.
            unsafe { Segment::dealloc(NonNull::new_unchecked(segment as *mut Segment)) };
        }
    }
}

/// A freed segment's mark, and the list that keeps its memory until its drop.
#[cfg(test)]
struct Quarantine {
    freed: core::sync::atomic::AtomicBool,
    graveyard: *const Graveyard,
}

/// In the crate's tests, what a list allocated and freed: its drop checks that
/// every segment was freed once, then releases their memory.
#[cfg(test)]
#[derive(Default)]
struct Graveyard {
    allocated: core::sync::atomic::AtomicUsize,
    freed: std::sync::Mutex<alloc::vec::Vec<usize>>,
}

impl Segment {
    /// Allocates a segment with `refs` references, every cell zeroed. Fields are
    /// written in place: a segment is a kilobyte, not to be built on the stack.
    fn alloc(refs: usize, graveyard: &Graveyard) -> NonNull<Segment> {
        let layout = Layout::new::<Segment>();
        // SAFETY: `Segment` is not zero-sized.
        let raw = unsafe { heap::alloc(layout) }.cast::<Segment>();
        let Some(segment) = NonNull::new(raw) else {
            heap::handle_alloc_error(layout)
        };
        let p = segment.as_ptr();
        // SAFETY: `p` is a fresh allocation of `Segment`'s layout, shared with
        // nobody yet; each field is written once before any read.
        unsafe {
            addr_of_mut!((*p).next).write(AtomicUsize::new(0));
            addr_of_mut!((*p).refs).write(AtomicUsize::new(refs));
            let cells = addr_of_mut!((*p).cells).cast::<Cell>();
            for i in 0..CELLS {
                cells.add(i).write(Cell {
                    status: AtomicUsize::new(0),
                    units: UnsafeCell::new(0),
                    waker: UnsafeCell::new(None),
                });
            }
            #[cfg(test)]
            addr_of_mut!((*p).quarantine).write(Quarantine {
                freed: core::sync::atomic::AtomicBool::new(false),
                graveyard,
            });
        }
        #[cfg(not(test))]
        let _ = graveyard;
        #[cfg(test)]
        graveyard
            .allocated
            .fetch_add(1, core::sync::atomic::Ordering::Relaxed);
        segment
    }

    /// Lets go of `n` references, freeing the segment if they were the last.
    ///
    /// # Safety
    ///
    /// The caller holds the `n` references (invariant 2) and touches the segment
    /// through them no more.
    unsafe fn release(segment: NonNull<Segment>, n: usize) {
        // SAFETY: the caller's references keep the segment alive up to this RMW.
        let before = unsafe { segment.as_ref() }
            .live()
            .refs
            .fetch_sub(n, Ordering::AcqRel);
        debug_assert!(before >= n, "segment references underflow");
        if before == n {
            // SAFETY: the last reference: nobody else can reach the segment
            // (invariant 3), and `AcqRel` above ordered their accesses before this.
            unsafe { Segment::free(segment) };
        }
    }

    /// Drops the segment's fields and its memory (in the crate's tests, marks it
    /// freed and leaves the memory to its list's drop).
    ///
    /// # Safety
    ///
    /// Nobody holds a reference to the segment, and it was allocated by
    /// [`Segment::alloc`].
    unsafe fn free(segment: NonNull<Segment>) {
        #[cfg(test)]
        {
            // SAFETY: by the caller, ours alone; its memory is not freed here.
            let quarantine = unsafe { &segment.as_ref().quarantine };
            let was_freed = quarantine
                .freed
                .swap(true, core::sync::atomic::Ordering::Relaxed);
            assert!(!was_freed, "a segment freed twice");
            // SAFETY: the list outlives its segments' frees (its drop is the last).
            let graveyard = unsafe { &*quarantine.graveyard };
            graveyard
                .freed
                .lock()
                .unwrap()
                .push(segment.as_ptr() as usize);
        }
        #[cfg(not(test))]
        // SAFETY: by the caller.
        unsafe {
            Segment::dealloc(segment);
        }
    }

    /// Drops the segment's fields and frees its memory.
    ///
    /// # Safety
    ///
    /// As for [`Segment::free`]; in the crate's tests, once the segment was freed.
    unsafe fn dealloc(segment: NonNull<Segment>) {
        // SAFETY: by the caller, ours alone; dropped once, then its memory freed
        // with the layout it was allocated with.
        unsafe {
            segment.as_ptr().drop_in_place();
            heap::dealloc(segment.as_ptr().cast(), Layout::new::<Segment>());
        }
    }

    /// The segment, checked (in the crate's tests) not to have been freed.
    #[inline(always)]
    fn live(&self) -> &Segment {
        #[cfg(test)]
        assert!(
            !self
                .quarantine
                .freed
                .load(core::sync::atomic::Ordering::Relaxed),
            "a segment used after it was freed"
        );
        self
    }

    /// The segment `tail`'s word names, and its count.
    fn split(word: usize) -> (NonNull<Segment>, usize) {
        // SAFETY: `tail` always names a segment: the word is never zero above
        // its count bits.
        let segment = unsafe { NonNull::new_unchecked((word & !COUNT) as *mut Segment) };
        (segment, word & COUNT)
    }
}

/// A claimed ticket: its cell, kept alive until [`Segments::release`].
#[derive(Debug)]
pub(crate) struct Ticket {
    segment: NonNull<Segment>,
    index: usize,
}

impl Ticket {
    /// The ticket's cell.
    pub(crate) fn cell(&self) -> &Cell {
        // SAFETY: the ticket's reference keeps its segment alive while `self`
        // exists (it is let go only by `Segments::release`, which takes `self`).
        unsafe { &self.segment.as_ref().live().cells[self.index] }
    }
}

/// The serving role's place in the list: the next cell to look at.
#[derive(Debug)]
pub(crate) struct Cursor {
    /// Holds one reference (invariant 2).
    segment: NonNull<Segment>,
    index: usize,
}

/// The list of segments, and its cursor.
pub(crate) struct Segments {
    /// The tail segment's address | the count (see the module docs).
    tail: AtomicUsize,
    /// Used only by whoever holds the serving role.
    cursor: UnsafeCell<Cursor>,
    /// Where the crate's tests keep freed segments until the drop.
    #[cfg(test)]
    /// Owned: from `Box::into_raw`, so the segments' pointers to it stay valid
    /// when the list moves; freed last by the drop.
    graveyard: NonNull<Graveyard>,
}

// SAFETY: the segments are reached through atomics and references counted per
// invariant 2; the cursor only by the serving role, which one thread holds at a
// time (the caller's promise to `cursor`).
unsafe impl Send for Segments {}
// SAFETY: as above.
unsafe impl Sync for Segments {}

impl Segments {
    /// An empty list: one segment, named by `tail` and by the cursor.
    pub(crate) fn new() -> Segments {
        #[cfg(test)]
        let graveyard = NonNull::from(alloc::boxed::Box::leak(alloc::boxed::Box::default()));
        #[cfg(test)]
        // SAFETY: just made, freed only by the list's drop.
        let first = Segment::alloc(CELLS + TAIL + 1, unsafe { graveyard.as_ref() });
        #[cfg(not(test))]
        let first = Segment::alloc(CELLS + TAIL + 1, &());
        Segments {
            #[cfg(test)]
            graveyard,
            tail: AtomicUsize::new(first.as_ptr() as usize),
            cursor: UnsafeCell::new(Cursor {
                segment: first,
                index: 0,
            }),
        }
    }

    /// Where freed segments wait for the drop (in the crate's tests).
    #[cfg(test)]
    fn graveyard(&self) -> &Graveyard {
        // SAFETY: the list owns it until the end of its drop.
        unsafe { self.graveyard.as_ref() }
    }

    #[cfg(not(test))]
    fn graveyard(&self) -> &Graveyard {
        &()
    }

    /// Claims the next ticket.
    pub(crate) fn claim(&self) -> Ticket {
        let mut word = self.tail.load(Ordering::Acquire);
        loop {
            let (segment, count) = Segment::split(word);
            if count == COUNT {
                // Saturated (see "Progress"): wait for a helper to swing.
                core::hint::spin_loop();
                word = self.tail.load(Ordering::Acquire);
                continue;
            }
            match self.tail.compare_exchange_weak(
                word,
                word + 1,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) if count < CELLS => {
                    // The ticket's reference was counted at the segment's birth.
                    return Ticket {
                        segment,
                        index: count,
                    };
                }
                Ok(_) => {
                    // A helper, holding a reference counted in `tail`.
                    // SAFETY: that reference.
                    unsafe { self.help(segment) };
                    word = self.tail.load(Ordering::Acquire);
                }
                Err(actual) => word = actual,
            }
        }
    }

    /// Moves `tail` past the full `segment`, installing its successor if need be,
    /// then lets go of the helper's reference.
    ///
    /// # Safety
    ///
    /// The caller holds a helper's reference on `segment` (counted in `tail`).
    unsafe fn help(&self, segment: NonNull<Segment>) {
        // SAFETY: the helper's reference.
        let full = unsafe { segment.as_ref() }.live();
        let mut next = full.next.load(Ordering::Acquire);
        if next == 0 {
            // Its tickets, `tail`'s reference, and the link about to name it.
            let fresh = Segment::alloc(CELLS + TAIL + 1, self.graveyard());
            match full.next.compare_exchange(
                0,
                fresh.as_ptr() as usize,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => next = fresh.as_ptr() as usize,
                Err(actual) => {
                    // SAFETY: never shared.
                    unsafe { Segment::free(fresh) };
                    next = actual;
                }
            }
        }
        if next != PASSED {
            self.swing(segment, next);
        }
        // A `PASSED` link: the cursor swung `tail` before marking it (invariant 4).
        // SAFETY: the helper's reference, not touched again.
        unsafe { Segment::release(segment, 1) };
    }

    /// Moves `tail` from `full` to `next` (its successor) unless it has moved on,
    /// handing the helpers counted in `tail` over to `full`'s own count.
    fn swing(&self, full: NonNull<Segment>, next: usize) {
        let mut word = self.tail.load(Ordering::Acquire);
        while Segment::split(word).0 == full {
            match self
                .tail
                .compare_exchange_weak(word, next, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => {
                    let helpers = (word & COUNT) - CELLS;
                    let handed_over = if Mechanism::SwingCountsHelpers.on() {
                        TAIL - helpers
                    } else {
                        TAIL
                    };
                    // SAFETY: `tail`'s reference, which the swing ended; the
                    // caller (a helper, or the cursor) holds another, so this
                    // never frees.
                    unsafe { Segment::release(full, handed_over) };
                    return;
                }
                Err(actual) => word = actual,
            }
        }
    }

    /// Lets go of a ticket: its holder is done with its cell.
    pub(crate) fn release(&self, ticket: Ticket) {
        // SAFETY: the ticket's reference, counted at its segment's birth and let
        // go once: `ticket` is consumed.
        unsafe { Segment::release(ticket.segment, 1) };
    }

    /// The cell at the cursor, if its ticket has been claimed: moves the cursor
    /// into the next segment first if it has passed the last cell of its own and
    /// the next is installed. `None`: the queue ends at the cursor for now.
    ///
    /// # Safety
    ///
    /// The caller holds the serving role (no other thread uses the cursor), and
    /// does not keep the cell past the next [`advance`](Self::advance).
    pub(crate) unsafe fn current(&self) -> Option<&Cell> {
        // SAFETY: the caller's role.
        let cursor = self.cursor.with_mut(|c| unsafe { &mut *c });
        if cursor.index == CELLS {
            // SAFETY: the cursor's reference.
            let passed = unsafe { cursor.segment.as_ref() }.live();
            let next = passed.next.load(Ordering::Acquire);
            if next == 0 {
                return None;
            }
            debug_assert_ne!(next, PASSED, "the cursor passed its own segment");
            if Mechanism::PassSwingsTail.on() {
                self.swing(cursor.segment, next);
            }
            // The link's reference on `next` becomes the cursor's.
            passed.next.store(PASSED, Ordering::Release);
            let old = core::mem::replace(
                cursor,
                Cursor {
                    // SAFETY: installed segments are never null.
                    segment: unsafe { NonNull::new_unchecked(next as *mut Segment) },
                    index: 0,
                },
            );
            // SAFETY: the cursor's old reference, not touched again.
            unsafe { Segment::release(old.segment, 1) };
        }
        let (tail, count) = Segment::split(self.tail.load(Ordering::Acquire));
        // `tail` is never behind the cursor (invariant 5): elsewhere means past.
        if tail == cursor.segment && cursor.index >= count {
            return None;
        }
        // SAFETY: the cursor's reference keeps the segment alive until it moves.
        Some(unsafe { &cursor.segment.as_ref().live().cells[cursor.index] })
    }

    /// Moves the cursor past the cell [`current`](Self::current) returned.
    ///
    /// # Safety
    ///
    /// As for `current`, which returned a cell since the last call.
    pub(crate) unsafe fn advance(&self) {
        // SAFETY: the caller's role.
        self.cursor.with_mut(|c| unsafe { (*c).index += 1 });
    }
}

impl Drop for Segments {
    /// Frees every segment from the cursor's to the tail. Every ticket must have
    /// been released (the semaphore outlives its futures).
    fn drop(&mut self) {
        let (tail, count) = Segment::split(self.tail.load(Ordering::Acquire));
        debug_assert!(count <= CELLS, "a helper outlived the list");
        // SAFETY: `tail`'s reference and those of its tickets never claimed;
        // the link or cursor behind it keeps it alive for the walk below.
        unsafe { Segment::release(tail, TAIL + CELLS - count.min(CELLS)) };
        // SAFETY: `&mut self`: nobody else holds the role.
        let mut segment = self.cursor.with_mut(|c| unsafe { (*c).segment });
        loop {
            // SAFETY: the cursor's reference, or the link's we took over below.
            let next = unsafe { segment.as_ref() }
                .live()
                .next
                .load(Ordering::Acquire);
            // SAFETY: that reference; with every ticket released and `tail`'s
            // gone, the last one.
            unsafe { Segment::release(segment, 1) };
            if next == 0 {
                break;
            }
            // SAFETY: installed segments are never null; we now hold the link's
            // reference of the segment just freed.
            segment = unsafe { NonNull::new_unchecked(next as *mut Segment) };
        }
        #[cfg(test)]
        // SAFETY: the list's own, not used again.
        unsafe {
            Graveyard::close(self.graveyard);
        }
    }
}

#[cfg(all(test, not(admit_loom)))]
impl Segments {
    /// Segments allocated and not yet freed.
    fn live_segments(&self) -> usize {
        let graveyard = self.graveyard();
        let allocated = graveyard
            .allocated
            .load(core::sync::atomic::Ordering::Relaxed);
        allocated - graveyard.freed.lock().unwrap().len()
    }
}

/// Claimers and one server over one list, for the threaded tests (std threads)
/// and the randomized schedules (shuttle's): each claimer claims `rounds`
/// tickets, publishes its own number in each, keeps the last few past the
/// server's visit and checks them then, and releases them; the server walks the
/// cells. Every ticket is served once, each claimer's in its claiming order;
/// segments are freed as the cursor passes them (at most the cursor's and the
/// tail's remain), and every one by the list's drop (its own check).
#[cfg(all(test, not(admit_loom)))]
#[allow(clippy::std_instead_of_alloc, clippy::std_instead_of_core)] // test code on std
fn claim_serve_release(
    threads: usize,
    rounds: usize,
    spawn: impl Fn(std::boxed::Box<dyn FnOnce() + Send>) -> std::boxed::Box<dyn FnOnce()>,
    yield_now: fn(),
) {
    use core::sync::atomic::Ordering::{Acquire, Release};
    use std::sync::Arc;
    use std::vec::Vec;

    const PUBLISHED: usize = 1;
    const SERVED: usize = 2;

    let segments = Arc::new(Segments::new());
    let claimers: Vec<_> = (0..threads)
        .map(|me| {
            let segments = segments.clone();
            spawn(std::boxed::Box::new(move || {
                let mut held = std::collections::VecDeque::new();
                for round in 0..rounds {
                    let ticket = segments.claim();
                    let cell = ticket.cell();
                    // SAFETY: the cell is the ticket holder's until published.
                    cell.units.with_mut(|u| unsafe { *u = me * rounds + round });
                    cell.status.store(PUBLISHED, Release);
                    held.push_back(ticket);
                    if held.len() > 3 {
                        let ticket = held.pop_front().unwrap();
                        let status = ticket.cell().status.load(Acquire);
                        assert!(status == PUBLISHED || status == SERVED);
                        segments.release(ticket);
                    }
                }
                for ticket in held {
                    segments.release(ticket);
                }
            }))
        })
        .collect();
    let mut next_round = std::vec![0; threads];
    let mut served = 0;
    while served < threads * rounds {
        // SAFETY: this thread is the only server.
        match unsafe { segments.current() } {
            Some(cell) if cell.status.load(Acquire) == PUBLISHED => {
                // SAFETY: published with `Release`, read after the `Acquire`.
                let value = cell.units.with_mut(|u| unsafe { *u });
                let (me, round) = (value / rounds, value % rounds);
                assert_eq!(round, next_round[me], "claimer {me}'s tickets out of order");
                next_round[me] += 1;
                cell.status.store(SERVED, Release);
                // SAFETY: the only server; `cell` is not used again.
                unsafe { segments.advance() };
                served += 1;
            }
            _ => yield_now(),
        }
    }
    for join in claimers {
        join();
    }
    // SAFETY: the only server.
    let past_the_last = unsafe { segments.current() };
    assert!(past_the_last.is_none(), "a ticket past the last");
    assert!(
        segments.live_segments() <= 2,
        "{} segments alive with every ticket served and released",
        segments.live_segments()
    );
}

#[cfg(all(test, not(admit_loom), not(admit_shuttle)))]
#[allow(clippy::std_instead_of_alloc, clippy::std_instead_of_core)] // test code on std
mod tests {
    extern crate std;

    use std::boxed::Box;
    use std::vec::Vec;

    use super::{claim_serve_release, Segments, CELLS};

    fn std_spawn(f: Box<dyn FnOnce() + Send>) -> Box<dyn FnOnce()> {
        let handle = std::thread::spawn(f);
        Box::new(move || handle.join().unwrap())
    }

    #[test]
    fn every_ticket_is_served_once_in_order_and_every_segment_freed() {
        let rounds = if cfg!(miri) { 2 * CELLS } else { 20_000 };
        claim_serve_release(4, rounds, std_spawn, std::thread::yield_now);
    }

    #[test]
    fn tickets_left_unserved_are_freed_with_the_list() {
        let segments = Segments::new();
        // Three segments' worth and one more: the cursor never moves.
        let tickets: Vec<_> = (0..3 * CELLS + 1).map(|_| segments.claim()).collect();
        assert_eq!(segments.live_segments(), 4);
        for t in tickets {
            segments.release(t);
        }
        // Released tickets free nothing the cursor has not passed.
        assert_eq!(segments.live_segments(), 4);
        drop(segments); // checks every segment is freed once
    }

    #[test]
    fn a_segment_goes_once_the_cursor_and_its_tickets_have_left() {
        let segments = Segments::new();
        let tickets: Vec<_> = (0..CELLS + 1).map(|_| segments.claim()).collect();
        for _ in 0..CELLS {
            // SAFETY: the only server.
            assert!(unsafe { segments.current() }.is_some());
            // SAFETY: as above.
            unsafe { segments.advance() };
        }
        // Into the second segment: the first is held by its tickets alone.
        // SAFETY: as above.
        assert!(unsafe { segments.current() }.is_some());
        assert_eq!(segments.live_segments(), 2);
        let mut tickets = tickets.into_iter();
        for _ in 0..CELLS {
            assert_eq!(segments.live_segments(), 2);
            segments.release(tickets.next().unwrap());
        }
        assert_eq!(segments.live_segments(), 1);
        segments.release(tickets.next().unwrap());
    }
}

#[cfg(all(test, admit_shuttle))]
#[allow(clippy::std_instead_of_alloc, clippy::std_instead_of_core)] // test code on std
mod shuttle_tests {
    extern crate std;

    use std::boxed::Box;

    use super::claim_serve_release;
    use crate::semaphore::shuttle::iterations;

    fn shuttle_spawn(f: Box<dyn FnOnce() + Send>) -> Box<dyn FnOnce()> {
        let handle = shuttle::thread::spawn(f);
        Box::new(move || handle.join().unwrap())
    }

    /// Six claimers of 40 tickets each (eight segments), the server among them.
    #[test]
    fn segments_six_claimers_pct() {
        shuttle::check_pct(
            || claim_serve_release(6, 40, shuttle_spawn, shuttle::thread::yield_now),
            iterations(),
            3,
        );
    }
}
