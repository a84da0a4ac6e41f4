//! Claiming tickets: the CAS on `tail`, the helpers that move `tail` on from a
//! full segment, and the ticket a claim returns.

use core::fmt;
use core::ptr::NonNull;

use super::link::{Word, COUNT};
use super::segment::{Segment, SegmentRef, LINK_REF, TAIL};
use super::{SegmentCell, Segments, CELLS};
use crate::loom::sync::Ordering;
use crate::safeguard::Safeguard;

/// A claimed ticket: its cell, kept alive until [`Segments::return_ticket`] or
/// [`Segments::cancel`] takes the ticket. One word, so that an acquire future
/// stays small: the segment's address with the cell's index in the low bits its
/// alignment leaves free.
pub(crate) struct Ticket<C>(NonNull<Segment<C>>);

impl<C> fmt::Debug for Ticket<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Ticket").field(&self.0).finish()
    }
}

impl<C> Ticket<C> {
    fn new(segment: NonNull<Segment<C>>, index: usize) -> Ticket<C> {
        debug_assert!(index < CELLS);
        // SAFETY: the address only grows by less than the alignment: not null.
        Ticket(unsafe { NonNull::new_unchecked(segment.as_ptr().map_addr(|a| a | index)) })
    }

    /// The ticket's segment.
    fn segment(&self) -> NonNull<Segment<C>> {
        // SAFETY: a segment's address, which is not null.
        unsafe { NonNull::new_unchecked(self.0.as_ptr().map_addr(|a| a & !COUNT)) }
    }

    /// The ticket's cell.
    pub(crate) fn cell(&self) -> &C {
        let index = self.0.as_ptr().addr() & COUNT;
        // SAFETY: the ticket's reference keeps its segment alive while `self`
        // exists (it is let go of only through `into_ref`, which takes `self`).
        unsafe { &self.segment().as_ref().live().cells[index] }
    }

    /// The ticket's reference on its segment, as a guard.
    pub(super) fn into_ref(self) -> SegmentRef<C> {
        // SAFETY: the ticket's reference, counted at its segment's birth and
        // handed over once: `self` is consumed.
        unsafe { SegmentRef::from_raw(self.segment()) }
    }
}

// SAFETY: a ticket is a counted reference on its segment (`queue/segments/`
// invariant *counted references*), and its cell is shared by the rules of `C`,
// which is `Send + Sync`: any thread may hold it, and let go of it.
unsafe impl<C: Send + Sync> Send for Ticket<C> {}
// SAFETY: as above; `&Ticket` gives only `cell`.
unsafe impl<C: Send + Sync> Sync for Ticket<C> {}

impl<C: SegmentCell> Segments<C> {
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
                let head = actual.target().expect("installed");
                if Safeguard::StartTakesTheAddress.on() {
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
    #[inline]
    pub(crate) fn claim(&self) -> Ticket<C> {
        let mut word = self.tail.load(Ordering::Acquire);
        if word == 0 {
            self.start();
            word = self.tail.load(Ordering::Acquire);
        }
        loop {
            let (segment, count) = word.split_tail();
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
                    // SAFETY: a helper's reference, counted in `tail`.
                    let helper = unsafe { SegmentRef::from_raw(segment) };
                    self.move_tail_past(&helper);
                    drop(helper);
                    word = self.tail.load(Ordering::Acquire);
                }
                Err(actual) => word = actual,
            }
        }
    }

    /// Makes sure the segment `full`, all of whose tickets are taken, has a
    /// successor and `tail` has left it; returns its link word then (or `GONE`:
    /// `tail` has moved on already).
    pub(super) fn move_tail_past(&self, full: &SegmentRef<C>) -> Word<C> {
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
        if let Some(next) = word.target() {
            // SAFETY: `full` is held.
            unsafe { self.swing(full.as_ptr(), next) };
        }
        word
    }

    /// Moves `tail` from `full` to `next` (its successor) unless it has moved on,
    /// handing the helpers counted in `tail` over to `full`'s own count.
    ///
    /// # Safety
    ///
    /// A reference the caller holds, or `head`'s while the caller holds the
    /// serving role, keeps `full` alive: letting go of `tail`'s never frees it.
    pub(super) unsafe fn swing(&self, full: NonNull<Segment<C>>, next: NonNull<Segment<C>>) {
        let mut word = self.tail.load(Ordering::Acquire);
        while word.split_tail().0 == full {
            match self.tail.compare_exchange_weak(
                word,
                Word::of(next),
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => {
                    let helpers = (word & COUNT) - CELLS;
                    let handed_over = if Safeguard::SwingCountsHelpers.on() {
                        TAIL - helpers
                    } else {
                        TAIL
                    };
                    // SAFETY: `tail`'s reference, which the swing ended; by the
                    // caller, not the last.
                    unsafe { Segment::drop_refs(full, handed_over) };
                    return;
                }
                Err(actual) => word = actual,
            }
        }
    }

    /// Lets go of a ticket: its holder is done with its cell.
    pub(crate) fn return_ticket(&self, ticket: Ticket<C>) {
        drop(ticket.into_ref());
    }
}
