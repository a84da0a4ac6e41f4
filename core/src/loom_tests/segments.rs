//! The next queue's segment list on its own (`semaphore/segments.rs`): the first
//! segment's two tickets taken and published, two claimers both find it full, so
//! each is a helper (one installs the next segment, either swings `tail`) and then
//! takes a ticket of the next, while the cursor serves the first segment's cells
//! and moves on, swinging `tail` itself if the helpers have not. Every ticket is
//! served once, in ticket order; every segment is freed exactly once (loom's
//! allocator reports a leak or a double free); a ticket's cell stays readable after
//! the cursor has passed it, until the ticket is released.

use std::sync::Arc;
use std::vec::Vec;

use super::support::without;
use crate::mechanism::Mechanism;
use crate::semaphore::segments::{Segments, Ticket, CELLS};
use loom::sync::atomic::Ordering::{Acquire, Release};
use loom::thread;

const PUBLISHED: usize = 1;
const SERVED: usize = 2;

/// Claims a ticket and publishes `value` in its cell.
fn claim_and_publish(segments: &Segments, value: usize) -> Ticket {
    let ticket = segments.claim();
    let cell = ticket.cell();
    // SAFETY: the cell is the ticket holder's until published.
    cell.units.with_mut(|u| unsafe { *u = value });
    cell.status.store(PUBLISHED, Release);
    ticket
}

fn helpers_cross_a_boundary_while_the_cursor_passes() {
    assert_eq!(CELLS, 2, "the model is sized for two cells a segment");
    let segments = Arc::new(Segments::new());
    let mut first: Vec<_> = (0..2).map(|v| claim_and_publish(&segments, v)).collect();
    // Served before anyone else runs: the cursor waits at the end of the first
    // segment, whose last ticket is released only after the cursor may have left.
    let mut served = serve_published(&segments);
    segments.release(first.remove(0));
    let claimers: Vec<_> = (2..4)
        .map(|value| {
            let segments = segments.clone();
            thread::spawn(move || {
                let ticket = claim_and_publish(&segments, value);
                // The cursor may have served the cell and left its segment.
                let status = ticket.cell().status.load(Acquire);
                assert!(status == PUBLISHED || status == SERVED);
                segments.release(ticket);
                value
            })
        })
        .collect();
    // The cursor moves on as far as the published cells go while the claimers run
    // (a thread of its own, so no thread starts ahead of the others), then, once
    // they are done, over the rest (a cursor that spun waiting for them would
    // multiply the schedules without adding a race).
    let server = {
        let segments = segments.clone();
        thread::spawn(move || {
            let served = serve_published(&segments);
            for ticket in first {
                segments.release(ticket);
            }
            served
        })
    };
    let mut values: Vec<_> = claimers.into_iter().map(|c| c.join().unwrap()).collect();
    served.extend(server.join().unwrap());
    served.extend(serve_published(&segments));
    // Tickets 0 and 1 are the first segment's; the claimers' two come after,
    // in whichever order they claimed them.
    assert_eq!(served[..2], [0, 1], "the first segment served out of order");
    values.sort_unstable();
    let mut rest = served[2..].to_vec();
    rest.sort_unstable();
    assert_eq!(rest, values, "a ticket lost or served twice");
    // SAFETY: the only server.
    let past_the_last = unsafe { segments.current() };
    assert!(past_the_last.is_none(), "a ticket past the last");
}

/// Serves cells in ticket order until the cursor meets one not yet published;
/// returns their values.
fn serve_published(segments: &Segments) -> Vec<usize> {
    let mut served = Vec::new();
    // SAFETY: this thread is the only server.
    while let Some(cell) = unsafe { segments.current() } {
        if cell.status.load(Acquire) != PUBLISHED {
            break;
        }
        // SAFETY: published with `Release`, read after the `Acquire`.
        served.push(cell.units.with_mut(|u| unsafe { *u }));
        cell.status.store(SERVED, Release);
        // SAFETY: the only server; `cell` is not used again.
        unsafe { segments.advance() };
    }
    served
}

#[test]
fn tickets_cross_a_segment_boundary_and_every_segment_is_freed_once() {
    loom::model(helpers_cross_a_boundary_while_the_cursor_passes);
}

/// Negative control: a swing that drops `tail`'s reference without counting the
/// helpers `tail` named lets their releases free the segment while it is in use.
#[test]
fn a_swing_that_forgets_the_helpers_frees_a_segment_in_use() {
    without(
        Mechanism::SwingCountsHelpers,
        "a segment used after it was freed",
        helpers_cross_a_boundary_while_the_cursor_passes,
    );
}

/// Negative control: a cursor that marks a segment passed without first swinging
/// `tail` off it leaves a helper that reads the mark claiming on the full segment
/// again and again, waiting for another helper's swing.
#[test]
fn a_pass_before_the_swing_leaves_helpers_spinning() {
    without(
        Mechanism::PassSwingsTail,
        "Model exceeded maximum number of branches",
        helpers_cross_a_boundary_while_the_cursor_passes,
    );
}
