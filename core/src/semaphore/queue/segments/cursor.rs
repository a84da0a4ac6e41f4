//! The server's cursor: the cell it is at, moving past it, the pass from one
//! segment into the next, and the walks from the cursor to the end of the list.
//! Used only by the serving role, which one thread holds at a time.

use super::link::{let_go_of_link, Word, GONE, PASSING};
use super::segment::SegmentRef;
use super::{SegmentCell, Segments, CELLS};
use crate::loom::sync::Ordering;
use crate::safeguard::Safeguard;

impl<C: SegmentCell> Segments<C> {
    /// The cell at the cursor, if its ticket has been claimed: moves the cursor
    /// into the next segment first if it has passed the last cell of its own and
    /// the next is installed. `None`: the queue ends at the cursor for now.
    ///
    /// # Safety
    ///
    /// The caller holds the serving role (no other thread uses the cursor), and
    /// does not keep the cell past the next [`advance`](Self::advance).
    pub(crate) unsafe fn current(&self) -> Option<&C> {
        // SAFETY: the caller's role.
        let index = self.index.with_mut(|i| unsafe { &mut *i });
        // `head` moves only once the cursor has flagged its link: it names the
        // cursor's segment, which its reference keeps alive. Nothing yet: no
        // ticket was ever claimed.
        let mut segment = self.head.load(Ordering::Acquire).target()?;
        if *index == CELLS {
            // SAFETY: `head`'s reference.
            let passed = unsafe { segment.as_ref() }.live();
            let word = passed.next.load(Ordering::Acquire);
            let next = word.target()?;
            if Safeguard::PassSwingsTail.on() {
                // SAFETY: `head`'s reference, under the caller's role.
                unsafe { self.swing(segment, next) };
            }
            // Our own reference for the pass: once the link is flagged, anyone
            // may swing `head` on and let go of `head`'s.
            // SAFETY: `head`'s reference keeps the segment alive until then.
            let passing = unsafe { SegmentRef::count(segment) };
            passing.next.fetch_or(PASSING, Ordering::AcqRel);
            self.finish_pass(&passing);
            drop(passing);
            *index = 0;
            segment = self.head.load(Ordering::Acquire).target().expect("head");
        }
        let tail = self.tail.load(Ordering::Acquire);
        if tail == 0 {
            return None; // the first segment is being installed
        }
        let (tail, count) = tail.split_tail();
        // `tail` is never behind the cursor (`queue/segments/` invariant
        // *tail ahead, head unspliced*): elsewhere means past.
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

    /// Finishes the cursor's move out of `passed`, whose link is flagged
    /// `PASSING`: swings `head` to the segment the link names (unless someone
    /// has), and the thread whose swing won lets go of the link.
    pub(super) fn finish_pass(&self, passed: &SegmentRef<C>) {
        let Some(next) = passed.next.follow() else {
            return; // let go of already: `head` has moved
        };
        // The reference `head` will hold.
        next.count_link();
        let mut word = self.head.load(Ordering::Acquire);
        loop {
            if word.target() != Some(passed.as_ptr()) {
                // Someone else swung it.
                // SAFETY: `head`'s reference, counted above, was not made.
                unsafe { next.drop_with_unmade_link() };
                return;
            }
            match self.head.compare_exchange_weak(
                word,
                Word::of(next.as_ptr()),
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => break,
                Err(actual) => word = actual,
            }
        }
        drop(next); // `head` holds its own now
                    // SAFETY: the word we replaced (`head`'s reference on `passed`).
        unsafe { let_go_of_link(word) };
        let old = passed.next.swap(Word::bits(GONE), Ordering::AcqRel);
        // SAFETY: the word we replaced.
        unsafe { let_go_of_link(old) };
    }

    /// Visits the cells from the cursor's to the end of the list, in ticket
    /// order, while `visit` returns `true`. Cells whose ticket is not claimed
    /// yet are visited too (they are fresh); a segment removed meanwhile
    /// (every cell cancelled) may be skipped.
    ///
    /// # Safety
    ///
    /// The caller holds the serving role, and keeps no cell past the call.
    pub(crate) unsafe fn scan(&self, mut visit: impl FnMut(&C) -> bool) {
        // SAFETY: the caller's role.
        let mut from = self.index.with_mut(|i| unsafe { *i });
        let Some(mut segment) = self.head.follow() else {
            return; // nothing was ever claimed
        };
        loop {
            for cell in segment.cells.iter().skip(from) {
                if !visit(cell) {
                    return;
                }
            }
            from = 0;
            let next = segment.next.follow().or_else(|| {
                // The end, or `segment` was removed and cleaned up (its cells
                // all cancelled, and visited): go on from what follows it.
                (segment.next.load(Ordering::Acquire) != 0 && Safeguard::ScanFindsItsWay.on())
                    .then(|| self.first_after(segment.id))
            });
            let Some(next) = next else {
                return;
            };
            segment = next;
        }
    }

    /// The first segment of the list after the `id`-th, counted, which a
    /// removal of that segment left: one exists, as a segment is frozen only
    /// once `tail` has left it (`queue/segments/` invariant
    /// *links move forward*), so the walk meets `tail`'s segment or an earlier
    /// one past `id`.
    fn first_after(&self, id: usize) -> SegmentRef<C> {
        'walk: loop {
            let mut segment = self.head.follow().expect("head names a segment");
            loop {
                if segment.id > id {
                    return segment;
                }
                // `tail` has left `segment` too: its link is set.
                debug_assert_ne!(
                    segment.next.load(Ordering::Acquire),
                    0,
                    "the list ended before"
                );
                match segment.next.follow() {
                    Some(next) => segment = next,
                    // `segment` was removed meanwhile: start again.
                    None => continue 'walk,
                }
            }
        }
    }
}
