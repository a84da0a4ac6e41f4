//! The removal of a completed segment (every cell cancelled) by the cancel that
//! completes it: `tail` moved past it, its link frozen, then a walk from `head`
//! to its predecessor, which splices it out of the predecessor's link, and with
//! it every other frozen segment the walk meets.

use super::link::{let_go_of_link, Word, FROZEN, GONE, PASSING};
use super::segment::SegmentRef;
use super::{SegmentCell, Segments, Ticket};
use crate::loom::sync::Ordering;
use crate::safeguard::Safeguard;

impl<C: SegmentCell> Segments<C> {
    /// Lets go of a ticket whose cell was cancelled (the caller's protocol made
    /// sure of it, once): counts the cancel and lets go of the ticket's reference
    /// in one step, or, if every other cell of the segment is cancelled already,
    /// removes the segment from the list.
    pub(crate) fn cancel(&self, ticket: Ticket<C>) {
        if let Err(completed) = ticket.into_ref().let_go_cancelled() {
            self.remove(&completed);
        }
    }

    /// Removes `completed`, whose cells are all cancelled: freezes its link, then
    /// walks from the cursor's segment to its predecessor and splices it out,
    /// splicing out on the way any other frozen segment it meets. A segment the
    /// cursor has reached is left to the cursor, which passes it.
    fn remove(&self, completed: &SegmentRef<C>) {
        // Every ticket of it was taken: all are cancelled.
        let word = self.move_tail_past(completed);
        if word == GONE {
            return; // the cursor has passed it
        }
        if Safeguard::Freeze.on() {
            completed.next.fetch_or(FROZEN, Ordering::AcqRel);
        }
        'walk: loop {
            let mut pred = self.head.follow().expect("head names a segment");
            let mut pred_is_head = true;
            loop {
                if pred.id >= completed.id {
                    // `completed` is the cursor's, or behind it: passed, not
                    // spliced.
                    return;
                }
                let word = pred.next.load(Ordering::Acquire);
                if word & PASSING != 0 && word != GONE {
                    // The cursor is moving on from `pred`: help it, then start
                    // over.
                    self.finish_pass(&pred);
                }
                if word & PASSING != 0 || (word & FROZEN != 0 && !pred_is_head) {
                    continue 'walk;
                }
                let Some(next) = pred.next.follow() else {
                    // Empty: the end of the list, `completed` not met (spliced
                    // out by another). Otherwise `pred` was cleaned up meanwhile.
                    if pred.next.load(Ordering::Acquire) == 0 {
                        return;
                    }
                    continue 'walk;
                };
                if next.id > completed.id {
                    // Past `completed`: another walker spliced it out.
                    return;
                }
                if next.next.load(Ordering::Acquire) & FROZEN == 0 {
                    // `next` is live: walk on.
                    pred = next;
                    pred_is_head = false;
                    continue;
                }
                // `next` is frozen: splice it out of `pred`'s link.
                let spliced = self.splice(&pred, &next, pred_is_head);
                let spliced_ours = spliced && next.as_ptr() == completed.as_ptr();
                drop(next);
                if !spliced {
                    continue 'walk;
                }
                if spliced_ours {
                    return;
                }
            }
        }
    }

    /// Splices `frozen` out of `pred`'s link, and if this thread's CAS is the one
    /// that did, cleans `frozen` up. Returns whether this thread's CAS did.
    fn splice(&self, pred: &SegmentRef<C>, frozen: &SegmentRef<C>, pred_is_head: bool) -> bool {
        // `frozen`'s link is frozen: its target stays until `frozen` is cleaned up.
        let Some(succ) = frozen.next.follow() else {
            return false; // cleaned up: spliced by someone else
        };
        // The reference the new link will hold.
        succ.count_link();
        let mut word = pred.next.load(Ordering::Acquire);
        loop {
            let live_link =
                word & FROZEN == 0 || pred_is_head || !Safeguard::SpliceNeedsLiveLink.on();
            let passing = word & PASSING != 0 && Safeguard::SpliceRespectsPass.on();
            if word.target() != Some(frozen.as_ptr()) || passing || !live_link {
                // SAFETY: the new link's reference, counted above, was not made.
                unsafe { succ.drop_with_unmade_link() };
                return false;
            }
            let new = Word::of(succ.as_ptr()) | (word & FROZEN);
            match pred
                .next
                .compare_exchange_weak(word, new, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => {
                    drop(succ); // the new link holds its own
                                // SAFETY: the word we replaced.
                    unsafe { let_go_of_link(word) };
                    // Ours to clean up: let go of its link (`tail` left it
                    // before it was frozen), so it keeps nothing after it alive.
                    let old = frozen.next.swap(Word::bits(GONE), Ordering::AcqRel);
                    // SAFETY: the word we replaced.
                    unsafe { let_go_of_link(old) };
                    return true;
                }
                Err(actual) => word = actual,
            }
        }
    }
}
