//! The words of `tail` and of the links (`head`, and each segment's `next`): a
//! segment's address, with counts and flags in the low bits its alignment leaves
//! free; and reading a link without its target being freed under the reader.
//!
//! ```text
//!     bit:      63 ........ 11 │ 10 │   9    │    8    │ 7 ...... 0
//! tail:         segment address│ count of claims (0 ..= COUNT)
//! head, next:   segment address│ 0  │ FROZEN │ PASSING │ in transit
//! ```
//!
//! A link holds `LINK_REF` of its target's count (`queue/segments/` invariant
//! *counted references*). A reader counts itself *in transit* in the link word
//! in the same step that reads the address ([`AtomicWord::follow`]); a
//! thread that changes the link hands the counts of the readers in transit over
//! to the old target ([`let_go_of_link`]), which is then never freed under a
//! reader.

use core::fmt;
use core::ptr::NonNull;

use super::segment::{Segment, SegmentRef, LINK_REF};
use crate::loom::loom_const_fn;
use crate::loom::sync::{AtomicPtr, Ordering};

/// A segment's alignment: a word's bits below it are counts and flags.
pub(super) const ALIGN: usize = 2048;
/// The count's bits in `tail`: below `CELLS`, the tail segment's next ticket;
/// above, `CELLS` and the helpers counted since it filled.
pub(super) const COUNT: usize = ALIGN - 1;
/// A link word's readers in transit: a reader counts itself here in the same step
/// that reads the address, then moves the count to the target.
pub(super) const TRANSIT: usize = 0xff;
/// On `next`: the cursor is moving from this segment into the one named.
pub(super) const PASSING: usize = 1 << 8;
/// On `next`: every cell of this segment is cancelled, and the link is frozen.
pub(super) const FROZEN: usize = 1 << 9;
/// A link let go of: the cursor has left its segment, or the segment was spliced
/// out and cleaned up. Whoever reads it knows `tail` and `head` have moved on.
pub(super) const GONE: usize = PASSING | FROZEN;

/// A word of `tail` or of a link: a segment's address, which keeps the
/// segment's provenance (so that a segment is reachable, for miri's leak check,
/// from wherever the list is), with counts and flags in the low bits its
/// alignment leaves free. Compared and combined by its bits.
pub(super) struct Word<C>(*mut Segment<C>);

impl<C> Clone for Word<C> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<C> Copy for Word<C> {}

impl<C> fmt::Debug for Word<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Word").field(&self.0).finish()
    }
}

impl<C> Word<C> {
    /// A word of bits alone, naming no segment: empty (0), or [`GONE`].
    pub(super) const fn bits(bits: usize) -> Word<C> {
        Word(core::ptr::without_provenance_mut(bits))
    }

    /// A word naming `segment`, with no bits set.
    pub(super) fn of(segment: NonNull<Segment<C>>) -> Word<C> {
        Word(segment.as_ptr())
    }

    /// The segment a link word names, if any.
    pub(super) fn target(self) -> Option<NonNull<Segment<C>>> {
        NonNull::new(self.0.map_addr(|a| a & !COUNT))
    }

    /// The segment a word of `tail` names, and its count.
    pub(super) fn split_tail(self) -> (NonNull<Segment<C>>, usize) {
        // SAFETY: `tail` always names a segment: the word is never zero above
        // its count bits.
        let segment = unsafe { NonNull::new_unchecked(self.0.map_addr(|a| a & !COUNT)) };
        (segment, self & COUNT)
    }
}

impl<C> PartialEq<usize> for Word<C> {
    fn eq(&self, bits: &usize) -> bool {
        self.0.addr() == *bits
    }
}

impl<C> core::ops::BitAnd<usize> for Word<C> {
    type Output = usize;
    fn bitand(self, mask: usize) -> usize {
        self.0.addr() & mask
    }
}

impl<C> core::ops::BitOr<usize> for Word<C> {
    type Output = Word<C>;
    fn bitor(self, bits: usize) -> Word<C> {
        Word(self.0.map_addr(|a| a | bits))
    }
}

impl<C> core::ops::Add<usize> for Word<C> {
    type Output = Word<C>;
    fn add(self, n: usize) -> Word<C> {
        Word(self.0.map_addr(|a| a + n))
    }
}

impl<C> core::ops::Sub<usize> for Word<C> {
    type Output = Word<C>;
    fn sub(self, n: usize) -> Word<C> {
        Word(self.0.map_addr(|a| a - n))
    }
}

/// An atomic [`Word`].
pub(super) struct AtomicWord<C>(AtomicPtr<Segment<C>>);

impl<C> AtomicWord<C> {
    loom_const_fn! {
        /// An empty word (0): no segment yet.
        pub(super) fn empty() -> AtomicWord<C> {
            AtomicWord(AtomicPtr::new(core::ptr::null_mut()))
        }
    }

    #[inline]
    pub(super) fn load(&self, order: Ordering) -> Word<C> {
        Word(self.0.load(order))
    }

    #[inline]
    pub(super) fn compare_exchange(
        &self,
        current: Word<C>,
        new: Word<C>,
        success: Ordering,
        failure: Ordering,
    ) -> Result<Word<C>, Word<C>> {
        self.0
            .compare_exchange(current.0, new.0, success, failure)
            .map(Word)
            .map_err(Word)
    }

    #[inline]
    pub(super) fn compare_exchange_weak(
        &self,
        current: Word<C>,
        new: Word<C>,
        success: Ordering,
        failure: Ordering,
    ) -> Result<Word<C>, Word<C>> {
        self.0
            .compare_exchange_weak(current.0, new.0, success, failure)
            .map(Word)
            .map_err(Word)
    }

    #[inline]
    pub(super) fn swap(&self, new: Word<C>, order: Ordering) -> Word<C> {
        Word(self.0.swap(new.0, order))
    }

    /// Sets `bits`; returns the word before. A CAS loop (`AtomicPtr::fetch_or`
    /// is newer than the crate's MSRV): lock-free, each retry follows another
    /// thread's change of the word.
    pub(super) fn fetch_or(&self, bits: usize, order: Ordering) -> Word<C> {
        let mut word = self.load(Ordering::Relaxed);
        loop {
            match self.compare_exchange_weak(word, word | bits, order, Ordering::Relaxed) {
                Ok(before) => return before,
                Err(actual) => word = actual,
            }
        }
    }

    /// Follows the link to the segment it names, if any, with a reference counted
    /// for the caller. The read and a reader's count in the link word are one
    /// step; the count then moves to the segment, and is given back to the link
    /// unless the link has changed and handed it over (links never come back to
    /// a segment they left, so an unchanged address means unchanged).
    pub(super) fn follow(&self) -> Option<SegmentRef<C>> {
        let mut word = self.load(Ordering::Acquire);
        let segment = loop {
            let segment = word.target()?;
            if word & TRANSIT == TRANSIT {
                // Saturated: 255 readers of one link at once. Wait for one.
                core::hint::spin_loop();
                word = self.load(Ordering::Acquire);
                continue;
            }
            match self.compare_exchange_weak(word, word + 1, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => break segment,
                Err(actual) => word = actual,
            }
        };
        // SAFETY: the link's reference keeps the segment alive: our count in
        // transit keeps back the part of it a change of the link hands over.
        let held = unsafe { SegmentRef::count(segment) };
        let mut now = self.load(Ordering::Acquire);
        loop {
            if now.target() != Some(segment) {
                // Handed over with the change: a second reference of ours,
                // given back.
                // SAFETY: the count in transit the change handed over to us.
                drop(unsafe { SegmentRef::from_raw(segment) });
                break;
            }
            match self.compare_exchange_weak(now, now - 1, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => break,
                Err(actual) => now = actual,
            }
        }
        Some(held)
    }
}

/// After a CAS or swap replaced the link word `old`: its target lets go of the
/// link's reference, less the readers in transit, each of whom gives back one.
///
/// # Safety
///
/// `old` was the link's word, replaced by the caller.
pub(super) unsafe fn let_go_of_link<C>(old: Word<C>) {
    if let Some(segment) = old.target() {
        // SAFETY: the link's reference, less what its readers in transit
        // will give back one by one.
        unsafe { Segment::drop_refs(segment, LINK_REF - (old & TRANSIT)) };
    }
}
