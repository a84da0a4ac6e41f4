//! A segment: `CELLS` cells, the link to its successor, and the count of the
//! references that keep it alive (`queue/segments/` invariant
//! *counted references*); and [`SegmentRef`], one of those references held by a
//! thread.
//!
//! What each holder counts:
//!
//! | holder                                   | counts                   |
//! |------------------------------------------|--------------------------|
//! | a ticket not yet returned or cancelled   | 1 (`CELLS` at birth)     |
//! | `tail`, while it names the segment       | [`TAIL`], less helpers   |
//! | a link (`head`, a predecessor's `next`)  | [`LINK_REF`], less transit |
//! | a thread at work on it ([`SegmentRef`])  | 1                        |

use core::mem::ManuallyDrop;
use core::ops::Deref;
use core::ptr::{addr_of_mut, NonNull};

use super::link::{AtomicWord, ALIGN, TRANSIT};
use super::quarantine::Graveyard;
#[cfg(test)]
use super::quarantine::Quarantine;
use super::spare;
use super::{SegmentCell, CELLS};
use crate::loom::heap::{self, Layout};
use crate::loom::sync::{AtomicUsize, Ordering};

/// `tail`'s reference on the segment it names: more than the helpers `COUNT`
/// can name, so the segment outlives every helper that lets go before the swing.
pub(super) const TAIL: usize = ALIGN;
/// What a link holds of its target's count: more than the readers a link word
/// can have in transit, so a reader that gives back the count the link handed
/// over, before the link's changer has handed it over, never takes the target to
/// zero (the changer lets go of `LINK_REF - transit` in one step).
pub(super) const LINK_REF: usize = TRANSIT + 1;
/// A segment's count word: references below, cancelled cells from here up.
const CANCEL_SHIFT: usize = usize::BITS as usize - 6;
const CANCEL_UNIT: usize = 1 << CANCEL_SHIFT;
const REFS: usize = CANCEL_UNIT - 1;

/// `CELLS` cells and the link and count that keep them.
#[repr(C, align(2048))]
pub(super) struct Segment<C> {
    /// Empty (0), then a link word naming the successor, then `GONE`.
    pub(super) next: AtomicWord<C>,
    /// The references that keep the segment alive (`queue/segments/` invariant
    /// *counted references*), and its cancelled cells above `CANCEL_SHIFT`.
    refs: AtomicUsize,
    /// The segment's place in the list: its first ticket divided by `CELLS`.
    pub(super) id: usize,
    pub(super) cells: [C; CELLS],
    /// In the crate's tests, the mark that the segment was freed.
    #[cfg(test)]
    quarantine: Quarantine,
}

/// Whether a segment of `C` cells fills exactly one block of `ALIGN` bytes,
/// the size the shape is chosen for: for a compile-time check beside the cell
/// type (the crate's tests add the quarantine).
#[cfg(not(test))]
pub(crate) const fn fills_one_block<C>() -> bool {
    core::mem::size_of::<Segment<C>>() == ALIGN
}

impl<C: SegmentCell> Segment<C> {
    /// Allocates a segment with `refs` references, every cell fresh. Fields are
    /// written in place: a segment is two kilobytes, not to be built on the stack.
    pub(super) fn alloc(refs: usize, id: usize, graveyard: &Graveyard) -> NonNull<Segment<C>> {
        let layout = Layout::new::<Segment<C>>();
        // SAFETY: `Segment` is not zero-sized.
        let raw = unsafe { spare::alloc(layout) }.cast::<Segment<C>>();
        let Some(segment) = NonNull::new(raw) else {
            heap::handle_alloc_error(layout)
        };
        // SAFETY: `raw` is a fresh allocation of `Segment`'s layout, shared with
        // nobody yet; each field is written once before any read.
        unsafe {
            addr_of_mut!((*raw).next).write(AtomicWord::empty());
            addr_of_mut!((*raw).refs).write(AtomicUsize::new(refs));
            addr_of_mut!((*raw).id).write(id);
            let cells = addr_of_mut!((*raw).cells).cast::<C>();
            for i in 0..CELLS {
                cells.add(i).write(C::fresh());
            }
            #[cfg(test)]
            addr_of_mut!((*raw).quarantine).write(Quarantine::new(graveyard));
        }
        #[cfg(not(test))]
        let _ = graveyard;
        #[cfg(test)]
        graveyard.count_allocation();
        segment
    }
}

impl<C> Segment<C> {
    /// Lets go of `n` references, freeing the segment if they were the last.
    ///
    /// # Safety
    ///
    /// The caller holds the `n` references (`queue/segments/` invariant
    /// *counted references*) and touches the segment through them no more.
    pub(super) unsafe fn drop_refs(segment: NonNull<Segment<C>>, n: usize) {
        // SAFETY: the caller's references keep the segment alive up to this RMW.
        let before = unsafe { segment.as_ref() }
            .live()
            .refs
            .fetch_sub(n, Ordering::AcqRel);
        debug_assert!(before & REFS >= n, "segment references underflow");
        if before & REFS == n {
            // SAFETY: the last reference: nobody else can reach the segment
            // (`queue/segments/` invariant *last reference frees*), and
            // `AcqRel` above ordered their accesses before this.
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
    pub(super) unsafe fn free(segment: NonNull<Segment<C>>) {
        #[cfg(test)]
        {
            // SAFETY: by the caller, ours alone; its memory is not freed here.
            let quarantine = unsafe { &segment.as_ref().quarantine };
            quarantine.bury(segment.cast());
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
    pub(super) unsafe fn dealloc(segment: NonNull<Segment<C>>) {
        // SAFETY: by the caller, ours alone; dropped once, then its memory freed
        // with the layout it was allocated with.
        unsafe {
            segment.as_ptr().drop_in_place();
            spare::dealloc(segment.as_ptr().cast(), Layout::new::<Segment<C>>());
        }
    }

    /// The segment, checked (in the crate's tests) not to have been freed.
    #[inline(always)]
    pub(super) fn live(&self) -> &Segment<C> {
        #[cfg(test)]
        self.quarantine.assert_live();
        self
    }
}

/// One counted reference on a segment, held by this thread (`queue/segments/`
/// invariant *counted references*): the segment stays allocated while the guard
/// exists, and the guard's drop lets go of the reference, freeing the segment
/// if it was the last (`queue/segments/` invariant *last reference frees*). So
/// a segment reached through a guard is alive; each way to make one says whose
/// reference it takes, and [`into_raw`](SegmentRef::into_raw) gives one up
/// where the reference is let go of by other means.
pub(super) struct SegmentRef<C>(NonNull<Segment<C>>);

impl<C> SegmentRef<C> {
    /// Takes over a reference the caller holds on `segment`.
    ///
    /// # Safety
    ///
    /// The caller holds a reference on `segment` (counted in its count word),
    /// hands it to the guard, and touches the segment through it no more.
    #[inline]
    pub(super) unsafe fn from_raw(segment: NonNull<Segment<C>>) -> SegmentRef<C> {
        SegmentRef(segment)
    }

    /// Counts a new reference on `segment`, for this thread.
    ///
    /// # Safety
    ///
    /// Another reference keeps `segment` alive during the call.
    #[inline]
    pub(super) unsafe fn count(segment: NonNull<Segment<C>>) -> SegmentRef<C> {
        // SAFETY: by the caller, alive up to this RMW; the count keeps it after.
        unsafe { segment.as_ref() }
            .live()
            .refs
            .fetch_add(1, Ordering::AcqRel);
        SegmentRef(segment)
    }

    /// The segment's address.
    #[inline]
    pub(super) fn as_ptr(&self) -> NonNull<Segment<C>> {
        self.0
    }

    /// Gives the guard up without letting go of its reference: the caller has
    /// let go of it by other means, or hands it on.
    #[inline]
    pub(super) fn into_raw(self) -> NonNull<Segment<C>> {
        ManuallyDrop::new(self).0
    }

    /// Counts the reference a link about to name this segment will hold
    /// ([`LINK_REF`]).
    #[inline]
    pub(super) fn count_link(&self) {
        self.refs.fetch_add(LINK_REF, Ordering::AcqRel);
    }

    /// Lets go, in one step, of this reference and of the link's that
    /// [`count_link`](SegmentRef::count_link) counted for a link not made.
    ///
    /// # Safety
    ///
    /// The caller counted a link's reference on this segment that no link holds.
    pub(super) unsafe fn drop_with_unmade_link(self) {
        let segment = self.into_raw();
        // SAFETY: the guard's reference, and the link's by the caller.
        unsafe { Segment::drop_refs(segment, LINK_REF + 1) };
    }

    /// For the holder of a ticket whose cell was cancelled: counts the cancel
    /// and lets go of this reference (the ticket's) in the same step. Unless
    /// every other cell's cancel is counted already: then this one completes the
    /// segment (no one else will count here) and keeps the reference, `Err`, for
    /// the caller to remove the segment.
    pub(super) fn let_go_cancelled(self) -> Result<(), SegmentRef<C>> {
        let mut word = self.refs.load(Ordering::Acquire);
        loop {
            if (word >> CANCEL_SHIFT) + 1 == CELLS {
                return Err(self);
            }
            let new = word + CANCEL_UNIT - 1;
            match self
                .refs
                .compare_exchange_weak(word, new, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => {
                    // Let go of by the CAS.
                    let segment = self.into_raw();
                    if new & REFS == 0 {
                        // SAFETY: the last reference was ours, let go of.
                        unsafe { Segment::free(segment) };
                    }
                    return Ok(());
                }
                Err(actual) => word = actual,
            }
        }
    }
}

impl<C> Deref for SegmentRef<C> {
    type Target = Segment<C>;

    #[inline]
    fn deref(&self) -> &Segment<C> {
        // SAFETY: the guard's reference keeps the segment alive.
        unsafe { self.0.as_ref() }.live()
    }
}

impl<C> Drop for SegmentRef<C> {
    #[inline]
    fn drop(&mut self) {
        // SAFETY: the guard's reference, let go of once, after its last use.
        unsafe { Segment::drop_refs(self.0, 1) };
    }
}
