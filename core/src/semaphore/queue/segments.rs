//! The next wait queue's storage (issue 9, docs/next-queue.md): cells in a list
//! of segments, indexed by ticket, from which a segment whose cells are all
//! cancelled is removed by the cancel that completes it, without waiting for
//! anyone.
//!
//! The semaphore's wait queue with `alloc` (`cell_queue.rs`) keeps its parked
//! requests here; the list is also model-checked on its own
//! (`loom_tests/segments.rs`).
//!
//! # Shape
//!
//! Ticket `t` is cell `t % CELLS` of the `t / CELLS`-th segment. A claim is one
//! CAS on `tail`, the tail segment's address with a count in the low bits its
//! alignment leaves free. A count below `CELLS` is the segment's next ticket; once
//! it reaches `CELLS` the segment is full, and every claimer counted above `CELLS`
//! is a *helper*: it installs the next segment unless someone has, swings `tail`
//! to it, and claims again.
//!
//! The list starts empty (so that a semaphore can be made in a `const`): the
//! first claim installs the first segment, naming it by `head`, then `tail`.
//!
//! The one cursor, the serving role's, walks the cells in ticket order; `head`
//! names its segment. It moves on in three steps any thread can finish: it flags
//! its segment's link [`PASSING`], `head` swings to the next segment, and the
//! swing's winner clears the link to [`GONE`].
//!
//! Links (`next`, `head`) are words: the target's address, two flags, and the
//! readers in transit: reading a link and counting a reference on its target is
//! one step on the word, so a thread that changes the link hands those readers'
//! counts to the old target, which can then never be freed under a reader.
//!
//! A cancel counts itself in its segment's count word and lets go of its
//! ticket's reference in the same step; the one that completes the segment keeps
//! it and removes the segment: it makes sure `tail` has left it (installing the
//! successor if need be), *freezes* its link with [`MARK`], then walks from
//! `head` to its predecessor and *splices* it out with a CAS on the
//! predecessor's link, splicing out any other frozen segment it meets on the way.
//! The thread whose splice wins cleans the segment up: it clears the segment's
//! link to [`GONE`], so a removed segment keeps nothing after it alive. A
//! segment the cursor has reached is not spliced; the cursor passes it.
//!
//! # Invariants
//!
//! 1. Every ticket is claimed once, in order: a claim is a CAS that adds one to
//!    the count it read, and `tail` leaves a segment only once all its `CELLS`
//!    tickets are taken.
//! 2. A segment's count holds its references: its tickets not yet released or
//!    cancelled (`CELLS` at birth); `TAIL` while `tail` names it, less the helpers
//!    that `tail`'s count names and that have already let go (the swing adds the
//!    helpers counted and removes `TAIL`, which exceeds the most helpers there can
//!    be); [`LINK_REF`] for each link that names it (a predecessor's `next`, or
//!    `head`), less its readers in transit, who each give back one; and one for
//!    each thread holding it while it works (a walker, a pass, a splice).
//! 3. Nobody touches a segment without holding one of those references, so the
//!    release that brings the count to zero is the last access but the free, and
//!    happens once.
//! 4. A link never names a segment it has left: `next` is empty, then names the
//!    successor, then (by splices) later segments, then [`GONE`]. `tail` leaves a
//!    segment before its link is frozen or let go of, so whoever reads [`GONE`]
//!    knows `tail` has moved on.
//! 5. `tail` is never behind the cursor, and `head` never names a spliced
//!    segment: a splice's CAS fails on a link flagged [`PASSING`], and a
//!    segment's link is frozen only after `tail` has left it.
//! 6. A frozen link changes only to [`GONE`], by the cleaner of its segment; a
//!    splice's CAS fails on a frozen link unless it is `head`'s segment's (which
//!    is passed, never spliced), so no splice goes through a removed segment.
//!
//! A segment the cursor has left is freed once its last ticket is released, and
//! a removed one once its splice's winner has cleaned it up and its walkers have
//! let go: each stalled thread holds at most the two segments it is working on,
//! not what follows them. The memory held is then the segments with a live
//! ticket, plus a constant per thread.
//!
//! In the crate's tests a freed segment is marked and its memory kept until the
//! list is dropped: a use after the free fails an assertion instead of being
//! undefined, and the drop checks that every segment was freed exactly once.
//!
//! # Progress
//!
//! Every operation is lock-free: each retry of a CAS follows another thread's
//! success, a walk starts again only after another thread's splice, pass or
//! freeze changed what it read, and a helper's install and swing each complete or
//! find them done by another. The exceptions are saturated counts, where a thread
//! waits for one of the others to leave: more than `COUNT - CELLS` helpers on one
//! full segment at once (2 016), or more than [`TRANSIT`] readers on one link (255),
//! inside the same few instructions.
//!
//! # Memory orderings
//!
//! Counts are let go of with `AcqRel`: the release that reaches zero acquires
//! every other holder's accesses before the free. Links are written by `AcqRel`
//! read-modify-writes and read with `Acquire`, so whoever reaches a segment
//! through one sees its initialization and its predecessor's changes; the swing
//! passes that on to claimers through `tail`, likewise.

use core::ptr::{addr_of_mut, NonNull};

use crate::loom::heap::{self, Layout};
use crate::loom::loom_const_fn;
use crate::loom::sync::{AtomicPtr, AtomicUsize, Ordering, UnsafeCell};
use crate::mechanism::Mechanism;
use crate::semaphore::wait_status::{status, WaitStatus, WakerId};

/// Cells in a segment. A segment of 31 cells of one cache line each and its
/// header's line fill one 2 KiB block; under loom two cells, so a model crosses
/// a boundary within a few tickets.
#[cfg(not(all(test, admit_loom)))]
pub(crate) const CELLS: usize = 31;
#[cfg(all(test, admit_loom))]
pub(crate) const CELLS: usize = 2;

/// A segment's alignment: `tail`'s low bits below it hold the count.
const ALIGN: usize = 2048;
/// The count's bits in `tail`.
const COUNT: usize = ALIGN - 1;
/// `tail`'s reference on the segment it names: more than the helpers `COUNT`
/// can name, so the segment outlives every helper that lets go before the swing.
const TAIL: usize = ALIGN;
/// A link word (`next`, `head`): the target's address | [`MARK`] | [`PASSING`] |
/// readers in transit (below [`TRANSIT`]): a reader counts itself in the word in
/// the same step that reads the address, then moves the count to the target.
const TRANSIT: usize = 0xff;
/// On `next`: the cursor is moving from this segment into the one named.
const PASSING: usize = 1 << 8;
/// On `next`: every cell of this segment is cancelled, and the link is frozen.
const MARK: usize = 1 << 9;
/// A link let go of: the cursor has left its segment, or the segment was spliced
/// out and cleaned up. Whoever reads it knows `tail` and `head` have moved on.
const GONE: usize = PASSING | MARK;
/// What a link (a `next` or `head`) holds of its target's count: more than the
/// readers a link word can have in transit, so a reader that gives back the count
/// the link handed over, before the link's changer has handed it over, never
/// takes the target to zero (the changer lets go of `LINK_REF - transit` in one step).
const LINK_REF: usize = TRANSIT + 1;
/// A segment's count word: references below, cancelled cells from here up.
const CANCEL_SHIFT: usize = usize::BITS as usize - 6;
const CANCEL_UNIT: usize = 1 << CANCEL_SHIFT;
const REFS: usize = CANCEL_UNIT - 1;

/// The segment a link word names, if any.
fn target(word: Word) -> Option<NonNull<Segment>> {
    NonNull::new(word.0.map_addr(|a| a & !COUNT))
}

/// A word of `tail` or of a link: a segment's address, which keeps the
/// segment's provenance (so that a segment is reachable, for miri's leak check,
/// from wherever the list is), with flags and counts in the low bits its
/// alignment leaves free. Compared and combined by its bits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Word(*mut Segment);

impl Word {
    /// A word of bits alone, naming no segment: empty (0), or [`GONE`].
    const fn bits(bits: usize) -> Word {
        Word(core::ptr::without_provenance_mut(bits))
    }

    /// A word naming `segment`, with no bits set.
    fn of(segment: NonNull<Segment>) -> Word {
        Word(segment.as_ptr())
    }
}

impl PartialEq<usize> for Word {
    fn eq(&self, bits: &usize) -> bool {
        self.0.addr() == *bits
    }
}

impl core::ops::BitAnd<usize> for Word {
    type Output = usize;
    fn bitand(self, mask: usize) -> usize {
        self.0.addr() & mask
    }
}

impl core::ops::BitOr<usize> for Word {
    type Output = Word;
    fn bitor(self, bits: usize) -> Word {
        Word(self.0.map_addr(|a| a | bits))
    }
}

impl core::ops::Add<usize> for Word {
    type Output = Word;
    fn add(self, n: usize) -> Word {
        Word(self.0.map_addr(|a| a + n))
    }
}

impl core::ops::Sub<usize> for Word {
    type Output = Word;
    fn sub(self, n: usize) -> Word {
        Word(self.0.map_addr(|a| a - n))
    }
}

/// An atomic [`Word`].
struct AtomicWord(AtomicPtr<Segment>);

impl AtomicWord {
    loom_const_fn! {
        fn new(word: Word) -> AtomicWord {
            AtomicWord(AtomicPtr::new(word.0))
        }
    }

    #[inline]
    fn load(&self, order: Ordering) -> Word {
        Word(self.0.load(order))
    }

    #[inline]
    fn compare_exchange(
        &self,
        current: Word,
        new: Word,
        success: Ordering,
        failure: Ordering,
    ) -> Result<Word, Word> {
        self.0
            .compare_exchange(current.0, new.0, success, failure)
            .map(Word)
            .map_err(Word)
    }

    #[inline]
    fn compare_exchange_weak(
        &self,
        current: Word,
        new: Word,
        success: Ordering,
        failure: Ordering,
    ) -> Result<Word, Word> {
        self.0
            .compare_exchange_weak(current.0, new.0, success, failure)
            .map(Word)
            .map_err(Word)
    }

    #[inline]
    fn swap(&self, new: Word, order: Ordering) -> Word {
        Word(self.0.swap(new.0, order))
    }

    /// Sets `bits`; returns the word before. A CAS loop (`AtomicPtr::fetch_or`
    /// is newer than the crate's MSRV): lock-free, each retry follows another
    /// thread's change of the word.
    fn fetch_or(&self, bits: usize, order: Ordering) -> Word {
        let mut word = self.load(Ordering::Relaxed);
        loop {
            match self.compare_exchange_weak(word, word | bits, order, Ordering::Relaxed) {
                Ok(before) => return before,
                Err(actual) => word = actual,
            }
        }
    }
}

// The block the shape is sized for (the crate's tests add the quarantine, and
// their loom and shuttle atomics are larger).
#[cfg(not(test))]
const _: () = assert!(core::mem::size_of::<Segment>() == ALIGN);

/// One parked request's place, on a cache line of its own: consecutive tickets
/// go to parkers running at the same time, and two cells on one line would have
/// each one's publish, re-poll and cancel take the line from the other (32-byte
/// cells made the storm, S10, 1.5× slower; docs/design.md, "Layout").
#[repr(align(64))]
pub(crate) struct Cell {
    /// The request's phase and waker (`EMPTY` at birth).
    pub(crate) status: WaitStatus,
    /// The units asked for, written by the ticket holder before it publishes.
    pub(crate) units: UnsafeCell<usize>,
    /// Which waker the cell holds, kept by the ticket holder alone (the server
    /// never touches it): a re-poll with an equivalent waker registers nothing.
    pub(crate) registered: UnsafeCell<WakerId>,
}

/// `CELLS` cells and the links and count that keep them.
#[repr(C, align(2048))]
struct Segment {
    /// Empty (0), then a link word naming the successor, then [`GONE`].
    next: AtomicWord,
    /// The references that keep the segment alive (invariant 2), and its
    /// cancelled cells above [`CANCEL_SHIFT`].
    refs: AtomicUsize,
    /// The segment's place in the list: its first ticket divided by `CELLS`.
    id: usize,
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
    fn alloc(refs: usize, id: usize, graveyard: &Graveyard) -> NonNull<Segment> {
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
            addr_of_mut!((*p).next).write(AtomicWord::new(Word::bits(0)));
            addr_of_mut!((*p).refs).write(AtomicUsize::new(refs));
            addr_of_mut!((*p).id).write(id);
            let cells = addr_of_mut!((*p).cells).cast::<Cell>();
            for i in 0..CELLS {
                cells.add(i).write(Cell {
                    status: WaitStatus::new(status::EMPTY),
                    units: UnsafeCell::new(0),
                    registered: UnsafeCell::new(WakerId::NONE),
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
        debug_assert!(before & REFS >= n, "segment references underflow");
        if before & REFS == n {
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

    /// Counts a reference on the segment `link` names, if it names one, and
    /// returns it. The read and a reader's count in the link
    /// word are one step; the count then moves to the segment, and is given back
    /// to the link unless the link has changed and handed it over (links never
    /// come back to a segment they left, so an unchanged address means unchanged).
    fn acquire(link: &AtomicWord) -> Option<NonNull<Segment>> {
        let mut word = link.load(Ordering::Acquire);
        let segment = loop {
            let segment = target(word)?;
            if word & TRANSIT == TRANSIT {
                // Saturated: 255 readers of one link at once. Wait for one.
                core::hint::spin_loop();
                word = link.load(Ordering::Acquire);
                continue;
            }
            match link.compare_exchange_weak(word, word + 1, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => break segment,
                Err(actual) => word = actual,
            }
        };
        // SAFETY: the link's reference, which our count in it keeps or hands over.
        unsafe { segment.as_ref() }
            .live()
            .refs
            .fetch_add(1, Ordering::AcqRel);
        let mut now = link.load(Ordering::Acquire);
        loop {
            if target(now) != Some(segment) {
                // Handed over with the change: give back the count it added.
                // SAFETY: ours, and the one counted above keeps it alive.
                unsafe { Segment::release(segment, 1) };
                break;
            }
            match link.compare_exchange_weak(now, now - 1, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => break,
                Err(actual) => now = actual,
            }
        }
        Some(segment)
    }

    /// After a CAS or swap replaced the link word `old`: its target lets go of the
    /// link's reference, less the readers in transit, each of whom gives back one.
    ///
    /// # Safety
    ///
    /// `old` was the link's word, replaced by the caller.
    unsafe fn let_go_of_link(old: Word) {
        if let Some(segment) = target(old) {
            // SAFETY: the link's reference, less what its readers in transit
            // will give back one by one.
            unsafe { Segment::release(segment, LINK_REF - (old & TRANSIT)) };
        }
    }

    /// The segment `tail`'s word names, and its count.
    fn split(word: Word) -> (NonNull<Segment>, usize) {
        // SAFETY: `tail` always names a segment: the word is never zero above
        // its count bits.
        let segment = unsafe { NonNull::new_unchecked(word.0.map_addr(|a| a & !COUNT)) };
        (segment, word & COUNT)
    }
}

/// A claimed ticket: its cell, kept alive until [`Segments::release`] or
/// [`Segments::cancel`] takes the ticket. One word, so that an acquire future
/// stays small: the segment's address with the cell's index in the low bits its
/// alignment leaves free.
#[derive(Debug)]
pub(crate) struct Ticket(NonNull<Segment>);

impl Ticket {
    fn new(segment: NonNull<Segment>, index: usize) -> Ticket {
        debug_assert!(index < CELLS);
        // SAFETY: the address only grows by less than the alignment: not null.
        Ticket(unsafe { NonNull::new_unchecked(segment.as_ptr().map_addr(|a| a | index)) })
    }

    /// The ticket's segment.
    fn segment(&self) -> NonNull<Segment> {
        // SAFETY: a segment's address, which is not null.
        unsafe { NonNull::new_unchecked(self.0.as_ptr().map_addr(|a| a & !COUNT)) }
    }

    /// The ticket's cell.
    pub(crate) fn cell(&self) -> &Cell {
        let index = self.0.as_ptr().addr() & COUNT;
        // SAFETY: the ticket's reference keeps its segment alive while `self`
        // exists (it is let go only by `Segments::release` or `Segments::cancel`,
        // which take `self`).
        unsafe { &self.segment().as_ref().live().cells[index] }
    }
}

// SAFETY: a ticket is a counted reference on its segment (invariant 2), and its
// cell is reached through atomics or by its one holder: any thread may hold it.
unsafe impl Send for Ticket {}
// SAFETY: as above; `&Ticket` gives only `cell`.
unsafe impl Sync for Ticket {}

/// The list of segments, and its cursor.
pub(crate) struct Segments {
    /// The tail segment's address | the count (see the module docs); 0 until
    /// the first claim.
    tail: AtomicWord,
    /// A link word naming the cursor's segment (the first not yet passed); 0
    /// until the first claim.
    head: AtomicWord,
    /// The cursor's cell in `head`'s segment; used only by the serving role.
    index: UnsafeCell<usize>,
    /// Where the crate's tests keep freed segments until the drop: made by the
    /// first allocation (`Box::into_raw`, so the segments' pointers to it stay
    /// valid when the list moves), freed last by the drop.
    #[cfg(test)]
    graveyard: core::sync::atomic::AtomicPtr<Graveyard>,
}

// SAFETY: the segments are reached through atomics and references counted per
// invariant 2; the cursor only by the serving role, which one thread holds at a
// time (the caller's promise to `current` and `advance`).
unsafe impl Send for Segments {}
// SAFETY: as above.
unsafe impl Sync for Segments {}

impl Segments {
    loom_const_fn! {
        /// An empty list, with no segment yet.
        pub(crate) fn new() -> Segments {
            Segments {
                tail: AtomicWord::new(Word::bits(0)),
                head: AtomicWord::new(Word::bits(0)),
                index: UnsafeCell::new(0),
                #[cfg(test)]
                graveyard: core::sync::atomic::AtomicPtr::new(core::ptr::null_mut()),
            }
        }
    }

    /// Where freed segments wait for the drop (in the crate's tests).
    #[cfg(test)]
    fn graveyard(&self) -> &Graveyard {
        use core::sync::atomic::Ordering::{AcqRel, Acquire};
        let mut current = self.graveyard.load(Acquire);
        if current.is_null() {
            let fresh = alloc::boxed::Box::into_raw(alloc::boxed::Box::default());
            match self
                .graveyard
                .compare_exchange(current, fresh, AcqRel, Acquire)
            {
                Ok(_) => current = fresh,
                Err(actual) => {
                    // SAFETY: never shared.
                    drop(unsafe { alloc::boxed::Box::from_raw(fresh) });
                    current = actual;
                }
            }
        }
        // SAFETY: the list owns it until the end of its drop.
        unsafe { &*current }
    }

    #[cfg(not(test))]
    fn graveyard(&self) -> &Graveyard {
        &()
    }

    /// Installs the first segment, unless someone has: `head` first, so that
    /// `tail`, once it names a segment, never names one `head` does not lead to.
    #[cold]
    fn start(&self) {
        let first = Segment::alloc(CELLS + TAIL + LINK_REF, 0, self.graveyard());
        let first = match self.head.compare_exchange(
            Word::bits(0),
            Word::of(first),
            Ordering::AcqRel,
            Ordering::Acquire,
        ) {
            Ok(_) => Word::of(first),
            Err(actual) => {
                // SAFETY: never shared.
                unsafe { Segment::free(first) };
                // No ticket of it is claimed until `tail` names it, so the
                // cursor cannot have passed it: `head` still names it. Its word
                // may count readers in transit (a sweep's or a removal's walk):
                // `tail` takes the address alone, or its count would start there.
                let head = target(actual).expect("installed");
                if Mechanism::StartTakesTheAddress.on() {
                    Word::of(head)
                } else {
                    actual
                }
            }
        };
        // Whoever wins puts `head`'s segment in `tail`.
        let _ =
            self.tail
                .compare_exchange(Word::bits(0), first, Ordering::AcqRel, Ordering::Acquire);
    }

    /// Claims the next ticket.
    pub(crate) fn claim(&self) -> Ticket {
        let mut word = self.tail.load(Ordering::Acquire);
        if word == 0 {
            self.start();
            word = self.tail.load(Ordering::Acquire);
        }
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
                    return Ticket::new(segment, count);
                }
                Ok(_) => {
                    // A helper, holding a reference counted in `tail`.
                    // SAFETY: that reference.
                    unsafe { self.move_tail_past(segment) };
                    // SAFETY: the helper's reference, not touched again.
                    unsafe { Segment::release(segment, 1) };
                    word = self.tail.load(Ordering::Acquire);
                }
                Err(actual) => word = actual,
            }
        }
    }

    /// Makes sure the full `segment` has a successor and `tail` has left it;
    /// returns its link word then (or [`GONE`]: `tail` has moved on already).
    ///
    /// # Safety
    ///
    /// The caller holds a reference on `segment`, all of whose tickets are taken.
    unsafe fn move_tail_past(&self, segment: NonNull<Segment>) -> Word {
        // SAFETY: the caller's reference.
        let full = unsafe { segment.as_ref() }.live();
        let mut word = full.next.load(Ordering::Acquire);
        if word == 0 {
            // Its tickets, `tail`'s reference, and the link about to name it.
            let fresh = Segment::alloc(CELLS + TAIL + LINK_REF, full.id + 1, self.graveyard());
            match full.next.compare_exchange(
                Word::bits(0),
                Word::of(fresh),
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => word = Word::of(fresh),
                Err(actual) => {
                    // SAFETY: never shared.
                    unsafe { Segment::free(fresh) };
                    word = actual;
                }
            }
        }
        // A `GONE` link: whoever let go of it moved `tail` on first.
        if let Some(next) = target(word) {
            self.swing(segment, next);
        }
        word
    }

    /// Moves `tail` from `full` to `next` (its successor) unless it has moved on,
    /// handing the helpers counted in `tail` over to `full`'s own count.
    fn swing(&self, full: NonNull<Segment>, next: NonNull<Segment>) {
        let mut word = self.tail.load(Ordering::Acquire);
        while Segment::split(word).0 == full {
            match self.tail.compare_exchange_weak(
                word,
                Word::of(next),
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => {
                    let helpers = (word & COUNT) - CELLS;
                    let handed_over = if Mechanism::SwingCountsHelpers.on() {
                        TAIL - helpers
                    } else {
                        TAIL
                    };
                    // SAFETY: `tail`'s reference, which the swing ended; the
                    // caller holds another, so this never frees.
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
        unsafe { Segment::release(ticket.segment(), 1) };
    }

    /// Lets go of a ticket whose cell was cancelled (the caller's protocol made
    /// sure of it, once): counts the cancel and lets go of the ticket's reference
    /// in one step, or, if every other cell of the segment is cancelled already,
    /// removes the segment from the list.
    pub(crate) fn cancel(&self, ticket: Ticket) {
        let segment = ticket.segment();
        // SAFETY: the ticket's reference.
        let counts = &unsafe { segment.as_ref() }.live().refs;
        let mut word = counts.load(Ordering::Acquire);
        loop {
            if (word >> CANCEL_SHIFT) + 1 == CELLS {
                // Every other cell's cancel is counted: this one completes the
                // segment (no one else will count here), keeps the ticket's
                // reference, and removes the segment.
                // SAFETY: the ticket's reference, kept.
                unsafe { self.remove(segment) };
                // SAFETY: as above, let go of now.
                unsafe { Segment::release(segment, 1) };
                return;
            }
            // The others count themselves and let go of the ticket's reference
            // in the same step.
            let new = word + CANCEL_UNIT - 1;
            match counts.compare_exchange_weak(word, new, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => {
                    if new & REFS == 0 {
                        // SAFETY: the last reference was the ticket's, let go of.
                        unsafe { Segment::free(segment) };
                    }
                    return;
                }
                Err(actual) => word = actual,
            }
        }
    }

    /// Removes `x`, whose cells are all cancelled: freezes its link, then walks
    /// from the cursor's segment to its predecessor and splices it out, splicing
    /// out on the way any other frozen segment it meets. A segment the cursor
    /// has reached is left to the cursor, which passes it.
    ///
    /// # Safety
    ///
    /// The caller holds a reference on `x`.
    unsafe fn remove(&self, x: NonNull<Segment>) {
        // SAFETY: the caller's reference.
        let xs = unsafe { x.as_ref() }.live();
        // SAFETY: as above; every ticket of `x` was taken (all are cancelled).
        let word = unsafe { self.move_tail_past(x) };
        if word == GONE {
            return; // the cursor has passed `x`
        }
        if Mechanism::Freeze.on() {
            xs.next.fetch_or(MARK, Ordering::AcqRel);
        }
        'walk: loop {
            let mut p = Segment::acquire(&self.head).expect("head names a segment");
            let mut p_is_head = true;
            loop {
                // SAFETY: `p` is counted (ours).
                let ps = unsafe { p.as_ref() }.live();
                if ps.id >= xs.id {
                    // `x` is the cursor's, or behind it: passed, not spliced.
                    // SAFETY: ours.
                    unsafe { Segment::release(p, 1) };
                    return;
                }
                let word = ps.next.load(Ordering::Acquire);
                if word & PASSING != 0 && word != GONE {
                    // The cursor is moving on from `p`: help it, then start over.
                    // SAFETY: ours.
                    unsafe { self.finish_pass(p) };
                }
                if word & PASSING != 0 || (word & MARK != 0 && !p_is_head) {
                    // SAFETY: ours.
                    unsafe { Segment::release(p, 1) };
                    continue 'walk;
                }
                let Some(c) = Segment::acquire(&ps.next) else {
                    // Empty: the end of the list, `x` not met (spliced out by
                    // another). Otherwise `p` was cleaned up meanwhile.
                    let end = ps.next.load(Ordering::Acquire) == 0;
                    // SAFETY: ours.
                    unsafe { Segment::release(p, 1) };
                    if end {
                        return;
                    }
                    continue 'walk;
                };
                // SAFETY: `c` is counted (ours).
                let cs = unsafe { c.as_ref() }.live();
                if cs.id > xs.id {
                    // Past `x`: another walker spliced it out.
                    // SAFETY: ours.
                    unsafe {
                        Segment::release(c, 1);
                        Segment::release(p, 1);
                    }
                    return;
                }
                if cs.next.load(Ordering::Acquire) & MARK == 0 {
                    // `c` is live: walk on.
                    // SAFETY: ours.
                    unsafe { Segment::release(p, 1) };
                    p = c;
                    p_is_head = false;
                    continue;
                }
                // `c` is frozen: splice it out of `p`'s link.
                // SAFETY: ours.
                let spliced = unsafe { self.splice(p, c, p_is_head) };
                // SAFETY: ours.
                unsafe { Segment::release(c, 1) };
                if !spliced {
                    // SAFETY: ours.
                    unsafe { Segment::release(p, 1) };
                    continue 'walk;
                }
                if c == x {
                    // SAFETY: ours.
                    unsafe { Segment::release(p, 1) };
                    return;
                }
            }
        }
    }

    /// Splices the frozen `c` out of `p`'s link, and if this thread's CAS is the
    /// one that did, cleans `c` up. Returns whether `c` is out of `p`'s link.
    ///
    /// # Safety
    ///
    /// The caller holds references on `p` and `c`.
    unsafe fn splice(&self, p: NonNull<Segment>, c: NonNull<Segment>, p_is_head: bool) -> bool {
        // SAFETY: the caller's references.
        let (ps, cs) = unsafe { (p.as_ref().live(), c.as_ref().live()) };
        // `c`'s link is frozen: its target stays until `c` is cleaned up.
        let Some(succ) = Segment::acquire(&cs.next) else {
            return false; // cleaned up: spliced by someone else
        };
        // SAFETY: ours; the reference the new link will hold.
        unsafe { succ.as_ref() }
            .refs
            .fetch_add(LINK_REF, Ordering::AcqRel);
        let mut word = ps.next.load(Ordering::Acquire);
        loop {
            let live_link = word & MARK == 0 || p_is_head || !Mechanism::SpliceNeedsLiveLink.on();
            let passing = word & PASSING != 0 && Mechanism::SpliceRespectsPass.on();
            if target(word) != Some(c) || passing || !live_link {
                // SAFETY: ours, and the link's that was not made.
                unsafe { Segment::release(succ, LINK_REF + 1) };
                return false;
            }
            let new = Word::of(succ) | (word & MARK);
            match ps
                .next
                .compare_exchange_weak(word, new, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => {
                    // SAFETY: ours (the link holds its own now).
                    unsafe { Segment::release(succ, 1) };
                    // SAFETY: the word we replaced.
                    unsafe { Segment::let_go_of_link(word) };
                    // Ours to clean up: let go of its link (`tail` left it
                    // before it was frozen), so it keeps nothing after it alive.
                    let old = cs.next.swap(Word::bits(GONE), Ordering::AcqRel);
                    // SAFETY: the word we replaced.
                    unsafe { Segment::let_go_of_link(old) };
                    return true;
                }
                Err(actual) => word = actual,
            }
        }
    }

    /// Finishes the cursor's move out of `p`, whose link is flagged [`PASSING`]:
    /// swings `head` to the segment the link names (unless someone has), and the
    /// thread whose swing won lets go of the link.
    ///
    /// # Safety
    ///
    /// The caller holds a reference on `p`.
    unsafe fn finish_pass(&self, p: NonNull<Segment>) {
        // SAFETY: the caller's reference.
        let ps = unsafe { p.as_ref() }.live();
        let Some(next) = Segment::acquire(&ps.next) else {
            return; // let go of already: `head` has moved
        };
        // SAFETY: ours; the reference `head` will hold.
        unsafe { next.as_ref() }
            .refs
            .fetch_add(LINK_REF, Ordering::AcqRel);
        let mut word = self.head.load(Ordering::Acquire);
        loop {
            if target(word) != Some(p) {
                // Someone else swung it.
                // SAFETY: ours, and `head`'s that was not made.
                unsafe { Segment::release(next, LINK_REF + 1) };
                return;
            }
            match self.head.compare_exchange_weak(
                word,
                Word::of(next),
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => break,
                Err(actual) => word = actual,
            }
        }
        // SAFETY: ours (`head` holds its own now).
        unsafe { Segment::release(next, 1) };
        // SAFETY: the word we replaced (`head`'s reference on `p`).
        unsafe { Segment::let_go_of_link(word) };
        let old = ps.next.swap(Word::bits(GONE), Ordering::AcqRel);
        // SAFETY: the word we replaced.
        unsafe { Segment::let_go_of_link(old) };
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
        let index = self.index.with_mut(|i| unsafe { &mut *i });
        // `head` moves only once the cursor has flagged its link: it names the
        // cursor's segment, which its reference keeps alive. Nothing yet: no
        // ticket was ever claimed.
        let mut segment = target(self.head.load(Ordering::Acquire))?;
        if *index == CELLS {
            // SAFETY: `head`'s reference.
            let passed = unsafe { segment.as_ref() }.live();
            let word = passed.next.load(Ordering::Acquire);
            let next = target(word)?;
            if Mechanism::PassSwingsTail.on() {
                self.swing(segment, next);
            }
            // Our own reference for the pass: once the link is flagged, anyone
            // may swing `head` on and let go of `head`'s.
            passed.refs.fetch_add(1, Ordering::AcqRel);
            passed.next.fetch_or(PASSING, Ordering::AcqRel);
            // SAFETY: the reference just counted.
            unsafe {
                self.finish_pass(segment);
                Segment::release(segment, 1);
            }
            *index = 0;
            segment = target(self.head.load(Ordering::Acquire)).expect("head");
        }
        let tail = self.tail.load(Ordering::Acquire);
        if tail == 0 {
            return None; // the first segment is being installed
        }
        let (tail, count) = Segment::split(tail);
        // `tail` is never behind the cursor (invariant 5): elsewhere means past.
        if tail == segment && *index >= count {
            return None;
        }
        // SAFETY: `head`'s reference keeps the segment alive until the cursor moves.
        Some(unsafe { &segment.as_ref().live().cells[*index] })
    }

    /// Moves the cursor past the cell [`current`](Self::current) returned.
    ///
    /// # Safety
    ///
    /// As for `current`, which returned a cell since the last call.
    pub(crate) unsafe fn advance(&self) {
        // SAFETY: the caller's role.
        self.index.with_mut(|i| unsafe { *i += 1 });
    }

    /// Visits the cells from the cursor's to the end of the list, in ticket
    /// order, while `visit` returns `true`. Cells whose ticket is not claimed
    /// yet are visited too (they are `EMPTY`); a segment removed meanwhile
    /// (every cell cancelled) may be skipped.
    ///
    /// # Safety
    ///
    /// The caller holds the serving role, and keeps no cell past the call.
    pub(crate) unsafe fn scan(&self, mut visit: impl FnMut(&Cell) -> bool) {
        // SAFETY: the caller's role.
        let mut from = self.index.with_mut(|i| unsafe { *i });
        let Some(mut segment) = Segment::acquire(&self.head) else {
            return; // nothing was ever claimed
        };
        loop {
            // SAFETY: counted (ours).
            let current = unsafe { segment.as_ref() }.live();
            for cell in current.cells.iter().skip(from) {
                if !visit(cell) {
                    // SAFETY: ours.
                    unsafe { Segment::release(segment, 1) };
                    return;
                }
            }
            from = 0;
            let next = Segment::acquire(&current.next).or_else(|| {
                // The end, or `current` was removed and cleaned up (its cells
                // all cancelled, and visited): go on from what follows it.
                (current.next.load(Ordering::Acquire) != 0 && Mechanism::ScanFindsItsWay.on())
                    .then(|| self.first_after(current.id))
            });
            // SAFETY: ours.
            unsafe { Segment::release(segment, 1) };
            match next {
                Some(next) => segment = next,
                None => return,
            }
        }
    }

    /// The first segment of the list after the `id`-th, counted, which a
    /// removal of that segment left: one exists, as a segment is frozen only once
    /// `tail` has left it (invariant 4), so the walk meets `tail`'s segment or an
    /// earlier one past `id`.
    fn first_after(&self, id: usize) -> NonNull<Segment> {
        'walk: loop {
            let mut p = Segment::acquire(&self.head).expect("head names a segment");
            loop {
                // SAFETY: counted (ours).
                let ps = unsafe { p.as_ref() }.live();
                if ps.id > id {
                    return p;
                }
                // `tail` has left `p` too: its link is set.
                debug_assert_ne!(ps.next.load(Ordering::Acquire), 0, "the list ended before");
                let next = Segment::acquire(&ps.next);
                // SAFETY: ours.
                unsafe { Segment::release(p, 1) };
                match next {
                    Some(next) => p = next,
                    // `p` was removed meanwhile: start again.
                    None => continue 'walk,
                }
            }
        }
    }
}

impl Drop for Segments {
    /// Frees every segment from the cursor's to the tail. Every ticket must have
    /// been released (the semaphore outlives its futures); a segment holding
    /// one of a future leaked with `mem::forget` is leaked with it.
    fn drop(&mut self) {
        if self.tail.load(Ordering::Acquire) != 0 {
            self.free_all();
        }
        #[cfg(test)]
        {
            let graveyard = self.graveyard.load(core::sync::atomic::Ordering::Acquire);
            if let Some(graveyard) = NonNull::new(graveyard) {
                // SAFETY: the list's own, not used again.
                unsafe { Graveyard::close(graveyard) };
            }
        }
    }
}

impl Segments {
    /// The drop's work, once the list has started.
    fn free_all(&mut self) {
        let (tail, count) = Segment::split(self.tail.load(Ordering::Acquire));
        debug_assert!(count <= CELLS, "a helper outlived the list");
        // SAFETY: `tail`'s reference and those of its tickets never claimed;
        // the link or `head` behind it keeps it alive for the walk below.
        unsafe { Segment::release(tail, TAIL + CELLS - count.min(CELLS)) };
        let mut segment = target(self.head.load(Ordering::Acquire)).expect("head");
        loop {
            // SAFETY: `head`'s reference, or the link's we took over below.
            let next = unsafe { segment.as_ref() }
                .live()
                .next
                .load(Ordering::Acquire);
            // SAFETY: that reference; with every ticket released and `tail`'s
            // gone, the last one.
            unsafe { Segment::release(segment, LINK_REF) };
            let Some(next) = target(next) else {
                break;
            };
            // We now hold the link's reference of the segment just freed.
            segment = next;
        }
    }
}

#[cfg(test)]
impl Segments {
    /// Segments allocated and not yet freed.
    /// While others work, a consistent snapshot: the frees are read between two
    /// reads of the allocations that agree, so both counts are of one moment
    /// (a reader descheduled between two lone reads would count everything
    /// allocated meanwhile as alive).
    pub(crate) fn live_segments(&self) -> usize {
        let graveyard = self.graveyard();
        let allocated = || {
            graveyard
                .allocated
                .load(core::sync::atomic::Ordering::SeqCst)
        };
        loop {
            let before = allocated();
            let freed = graveyard.freed.lock().unwrap().len();
            if allocated() == before {
                return before - freed;
            }
        }
    }
}

/// The scenarios the threaded tests and the shuttle schedule share (a module of
/// its own so that mutation testing leaves test code alone).
#[cfg(test)]
#[allow(clippy::std_instead_of_alloc, clippy::std_instead_of_core)] // test code on std
mod scenarios {
    #[cfg(not(admit_loom))]
    use super::Segments;

    /// Claimers and one server over one list, for the threaded tests (std threads)
    /// and the randomized schedules (shuttle's): each claimer claims `rounds`
    /// tickets, publishes its own number in each, keeps the last few past the
    /// server's visit and checks them then, and releases them; the server walks the
    /// cells. Every ticket is served once, each claimer's in its claiming order;
    /// segments are freed as the cursor passes them (at most the cursor's and the
    /// tail's remain), and every one by the list's drop (its own check).
    #[cfg(not(admit_loom))]
    pub(super) fn claim_serve_release(
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
        const CANCELLED: usize = 3;

        let segments = Arc::new(Segments::new());
        let claimers: Vec<_> = (0..threads)
            .map(|me| {
                let segments = segments.clone();
                spawn(std::boxed::Box::new(move || {
                    let mut held = std::collections::VecDeque::new();
                    for round in 0..rounds {
                        let ticket = segments.claim();
                        let cell = ticket.cell();
                        if (me + round) % 3 == 0 {
                            // Give up before publishing: the server skips it.
                            cell.status.word.store(CANCELLED, Release);
                            segments.cancel(ticket);
                            continue;
                        }
                        // SAFETY: the cell is the ticket holder's until published.
                        cell.units.with_mut(|u| unsafe { *u = me * rounds + round });
                        cell.status.word.store(PUBLISHED, Release);
                        held.push_back(ticket);
                        if held.len() > 3 {
                            let ticket = held.pop_front().unwrap();
                            let status = ticket.cell().status.word.load(Acquire);
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
        let given_up = (0..threads)
            .map(|me| (0..rounds).filter(|round| (me + round) % 3 == 0).count())
            .sum::<usize>();
        while served < threads * rounds - given_up {
            // SAFETY: this thread is the only server.
            match unsafe { segments.current() } {
                Some(cell) if cell.status.word.load(Acquire) == CANCELLED => {
                    // SAFETY: the only server; `cell` is not used again.
                    unsafe { segments.advance() };
                }
                Some(cell) if cell.status.word.load(Acquire) == PUBLISHED => {
                    // SAFETY: published with `Release`, read after the `Acquire`.
                    let value = cell.units.with_mut(|u| unsafe { *u });
                    let (me, round) = (value / rounds, value % rounds);
                    while (me + next_round[me]) % 3 == 0 {
                        next_round[me] += 1; // given up
                    }
                    assert_eq!(round, next_round[me], "claimer {me}'s tickets out of order");
                    next_round[me] += 1;
                    cell.status.word.store(SERVED, Release);
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
        // Past the last served ticket: only given-up ones, then the end.
        // SAFETY: the only server.
        while let Some(cell) = unsafe { segments.current() } {
            assert_eq!(
                cell.status.word.load(Acquire),
                CANCELLED,
                "a ticket past the last"
            );
            // SAFETY: as above.
            unsafe { segments.advance() };
        }
        assert!(
            segments.live_segments() <= 2,
            "{} segments alive with every ticket served and released",
            segments.live_segments()
        );
    }
}

#[cfg(all(test, not(admit_loom), not(admit_shuttle)))]
#[allow(clippy::std_instead_of_alloc, clippy::std_instead_of_core)] // test code on std
mod tests {
    extern crate std;

    use std::boxed::Box;
    use std::vec::Vec;

    use core::sync::atomic::Ordering::Release;

    use super::scenarios::claim_serve_release;
    use super::{Segments, CELLS};

    fn std_spawn(f: Box<dyn FnOnce() + Send>) -> Box<dyn FnOnce()> {
        let handle = std::thread::spawn(f);
        Box::new(move || handle.join().unwrap())
    }

    #[test]
    fn every_ticket_is_served_once_in_order_and_every_segment_freed() {
        let rounds = if cfg!(miri) { 2 * CELLS } else { 20_000 };
        claim_serve_release(4, rounds, std_spawn, std::thread::yield_now);
    }

    /// The defect the list exists to fix, at its level: the cursor is stuck behind
    /// a ticket nobody publishes (a descheduled server or head), while `threads`
    /// callers claim `rounds` tickets each and give them up. The segments they
    /// fill are removed by their cancels, not left for the cursor.
    ///
    /// While they run, the segments alive never exceed a few per caller (each
    /// holds at most its ticket's segment and the two a splice works on), however
    /// the scheduler slices them; once they are done, those of the one live ticket.
    fn given_up_behind_a_stuck_cursor(threads: usize, rounds: usize) {
        let segments = std::sync::Arc::new(Segments::new());
        let stuck = segments.claim();
        let callers: Vec<_> = (0..threads)
            .map(|_| {
                let segments = segments.clone();
                std::thread::spawn(move || {
                    for _ in 0..rounds {
                        let ticket = segments.claim();
                        segments.cancel(ticket);
                    }
                })
            })
            .collect();
        let mut most = 0;
        while callers.iter().any(|c| !c.is_finished()) {
            most = most.max(segments.live_segments());
            std::thread::yield_now();
        }
        assert!(
            most <= 3 + 4 * threads,
            "{most} segments alive at once for {threads} callers and one live ticket"
        );
        for caller in callers {
            caller.join().unwrap();
        }
        assert!(
            segments.live_segments() <= 3,
            "{} segments alive for one live ticket",
            segments.live_segments()
        );
        segments.release(stuck);
    }

    #[test]
    fn cancelled_segments_go_while_the_cursor_is_stuck() {
        given_up_behind_a_stuck_cursor(1, 100 * CELLS);
    }

    #[test]
    fn cancelled_segments_go_while_the_cursor_is_stuck_threaded() {
        given_up_behind_a_stuck_cursor(4, if cfg!(miri) { 3 * CELLS } else { 20_000 });
    }

    /// The storm's shape: more runnable callers than this machine has cores.
    #[test]
    fn cancelled_segments_stay_bounded_with_more_callers_than_cores() {
        given_up_behind_a_stuck_cursor(32, if cfg!(miri) { CELLS } else { 5_000 });
    }

    /// A segment the cursor has left, one of whose tickets was released (a grant)
    /// and the others cancelled, so no cancel completes it: the cancel that lets
    /// go of its last reference frees it.
    #[test]
    fn the_last_cancel_behind_the_cursor_frees_its_segment() {
        const CANCELLED: usize = 3;
        let segments = Segments::new();
        let mut tickets: Vec<_> = (0..CELLS + 1).map(|_| segments.claim()).collect();
        for ticket in &tickets[1..CELLS] {
            ticket.cell().status.word.store(CANCELLED, Release);
        }
        for _ in 0..CELLS {
            // SAFETY: the only server; it serves or skips every cell.
            assert!(unsafe { segments.current() }.is_some());
            // SAFETY: as above.
            unsafe { segments.advance() };
        }
        // SAFETY: as above: into the second segment.
        assert!(unsafe { segments.current() }.is_some());
        let last = tickets.pop().unwrap();
        let mut first = tickets.into_iter();
        segments.release(first.next().unwrap()); // the granted one
        for ticket in first {
            assert_eq!(segments.live_segments(), 2);
            segments.cancel(ticket);
        }
        assert_eq!(
            segments.live_segments(),
            1,
            "the left segment was not freed"
        );
        segments.release(last);
    }

    /// A removal walks from the cursor's segment past a live one to the
    /// predecessor of the segment it removes: the live one stays linked, and the
    /// cursor meets every one of its cells, in ticket order, then the ticket after
    /// the removed segment.
    #[test]
    fn a_removal_walks_past_a_live_segment() {
        let segments = Segments::new();
        // Two live segments, one given up, one ticket after them.
        let live: Vec<_> = (0..2 * CELLS).map(|_| segments.claim()).collect();
        let given_up: Vec<_> = (0..CELLS).map(|_| segments.claim()).collect();
        let after = segments.claim();
        for ticket in given_up {
            segments.cancel(ticket);
        }
        assert_eq!(segments.live_segments(), 3, "the given-up segment stayed");
        for ticket in live.iter().chain([&after]) {
            // SAFETY: the only server; each cell is dropped before the advance.
            let cell = unsafe { segments.current() }.expect("the list ends early");
            assert!(
                core::ptr::eq(cell, ticket.cell()),
                "the cursor skipped a live ticket"
            );
            // SAFETY: as above.
            unsafe { segments.advance() };
        }
        for ticket in live.into_iter().chain([after]) {
            segments.release(ticket);
        }
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

    use super::scenarios::claim_serve_release;
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
