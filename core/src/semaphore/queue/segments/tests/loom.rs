//! The loom model of the segment list on its own (`--cfg admit_loom`, two cells a
//! segment): the first segment's two tickets taken and published, two claimers
//! both find it full, so each is a helper (one installs the next segment, either
//! swings `tail`) and then takes a ticket of the next, while the cursor serves
//! the first segment's cells and moves on, swinging `tail` itself if the helpers
//! have not. Every ticket is served once, in ticket order; every segment is freed
//! exactly once (loom's allocator reports a leak or a double free); a ticket's
//! cell stays readable after the cursor has passed it, until the ticket is
//! returned. Then the removals: completing cancels racing each other, the
//! cursor, and a claim.

use std::sync::Arc;
use std::vec::Vec;

use loom::thread;

use super::{TestCell, CANCELLED, PUBLISHED, SERVED};
use crate::safeguard::{expect_failure, Safeguard};
use crate::semaphore::queue::segments::{Segments, Ticket, CELLS};

/// A negative control: `model` under loom with `mechanism` off must fail with
/// `expected` ([`expect_failure`]).
fn without(mechanism: Safeguard, expected: &str, model: impl Fn() + Sync + Send + 'static) {
    expect_failure(Some(mechanism), expected, || loom::model(model));
}

/// Claims a ticket and gives it up at once.
fn claim_and_give_up(segments: &Segments<TestCell>) -> Ticket<TestCell> {
    let ticket = segments.claim();
    ticket.cell().give_up();
    ticket
}

/// Claims a ticket and publishes `value` in its cell.
fn claim_and_publish(segments: &Segments<TestCell>, value: usize) -> Ticket<TestCell> {
    let ticket = segments.claim();
    ticket.cell().publish(value);
    ticket
}

fn helpers_cross_a_boundary_while_the_cursor_passes() {
    assert_eq!(CELLS, 2, "the model is sized for two cells a segment");
    let segments = Arc::new(Segments::<TestCell>::new());
    let mut first: Vec<_> = (0..2).map(|v| claim_and_publish(&segments, v)).collect();
    // Served before anyone else runs: the cursor waits at the end of the first
    // segment, whose last ticket is returned only after the cursor may have left.
    let mut served = serve_published(&segments);
    segments.return_ticket(first.remove(0));
    let claimers: Vec<_> = (2..4)
        .map(|value| {
            let segments = segments.clone();
            thread::spawn(move || {
                let ticket = claim_and_publish(&segments, value);
                // The cursor may have served the cell and left its segment.
                let state = ticket.cell().state();
                assert!(state == PUBLISHED || state == SERVED);
                segments.return_ticket(ticket);
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
                segments.return_ticket(ticket);
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
fn serve_published(segments: &Segments<TestCell>) -> Vec<usize> {
    let mut served = Vec::new();
    // SAFETY: this thread is the only server.
    while let Some(cell) = unsafe { segments.current() } {
        match cell.state() {
            PUBLISHED => {}
            CANCELLED => {
                // SAFETY: the only server; `cell` is not used again.
                unsafe { segments.advance() };
                continue;
            }
            _ => break,
        }
        // SAFETY: read `PUBLISHED` just now.
        served.push(unsafe { cell.serve() });
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
/// helpers `tail` named lets those helpers, letting go, free the segment while it is in use.
#[test]
fn a_swing_that_forgets_the_helpers_frees_a_segment_in_use() {
    without(
        Safeguard::SwingCountsHelpers,
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
        Safeguard::PassSwingsTail,
        "Model exceeded maximum number of branches",
        helpers_cross_a_boundary_while_the_cursor_passes,
    );
}

/// Two adjacent segments complete at once (the cursor stuck in front of them):
/// each completing cancel freezes its segment and walks from the cursor's to
/// splice it out, splicing the other too if it meets it frozen. Both go, each
/// cleaned up once, the list stays whole (the cursor then finds the ticket after
/// them), and nothing leaks.
fn adjacent_segments_complete_at_once() {
    let segments = Arc::new(Segments::<TestCell>::new());
    // A: 0 1 (live), B: 2 3, C: 4 5 (given up), D: 6 (live).
    let a: Vec<_> = (0..2).map(|v| claim_and_publish(&segments, v)).collect();
    let (b0, b1) = (claim_and_give_up(&segments), claim_and_give_up(&segments));
    let (c0, c1) = (claim_and_give_up(&segments), claim_and_give_up(&segments));
    let d = claim_and_publish(&segments, 6);
    segments.cancel(b0);
    segments.cancel(c0);
    let completers: Vec<_> = [b1, c1]
        .into_iter()
        .map(|ticket| {
            let segments = segments.clone();
            thread::spawn(move || segments.cancel(ticket))
        })
        .collect();
    for completer in completers {
        completer.join().unwrap();
    }
    assert_eq!(
        segments.live_segments(),
        2,
        "a removed segment is still alive"
    );
    assert_eq!(
        serve_published(&segments),
        [0, 1, 6],
        "the list lost a ticket"
    );
    for ticket in a.into_iter().chain([d]) {
        segments.return_ticket(ticket);
    }
}

#[test]
fn adjacent_segments_completing_at_once_both_go() {
    loom::model(adjacent_segments_complete_at_once);
}

/// Negative control: a splice through a link frozen meanwhile puts back a
/// segment that the other removal had already cleaned up; it stays linked.
#[test]
fn a_splice_through_a_frozen_link_resurrects_a_segment() {
    without(
        Safeguard::SpliceNeedsLiveLink,
        "a removed segment is still alive",
        adjacent_segments_complete_at_once,
    );
}

/// Negative control: without the freeze nothing is found to splice.
#[test]
fn without_the_freeze_nothing_is_removed() {
    without(
        Safeguard::Freeze,
        "a removed segment is still alive",
        adjacent_segments_complete_at_once,
    );
}

/// A removal races the cursor: `live_in_front` published tickets (whole
/// segments), then a segment given up whose last cancel runs on another thread,
/// then one more published ticket, while the cursor serves. The completing
/// cancel walks from the cursor's segment to the given-up one's predecessor and
/// splices it out; the cursor serves every live ticket in order.
fn a_removal_races_the_cursor(live_in_front: usize) {
    let segments = Arc::new(Segments::<TestCell>::new());
    let live: Vec<_> = (0..live_in_front)
        .map(|v| claim_and_publish(&segments, v))
        .collect();
    let (given_up, last) = (claim_and_give_up(&segments), claim_and_give_up(&segments));
    let after = claim_and_publish(&segments, live_in_front + 2);
    segments.cancel(given_up);
    let completer = {
        let segments = segments.clone();
        thread::spawn(move || segments.cancel(last))
    };
    let served = serve_published(&segments);
    completer.join().unwrap();
    let expected: Vec<_> = (0..live_in_front).chain([live_in_front + 2]).collect();
    assert_eq!(served, expected, "the cursor lost a ticket");
    for ticket in live.into_iter().chain([after]) {
        segments.return_ticket(ticket);
    }
}

/// The cursor passes the segment in front of one being removed (A: 0 1 live,
/// B: 2 3 given up, C: 4 live): the removal's splice and the cursor's pass race
/// on the same link (one wins; a walker that meets the pass helps it finish),
/// and the cursor serves what follows.
fn the_cursor_passes_while_a_segment_is_spliced() {
    a_removal_races_the_cursor(2);
}

#[test]
fn the_cursor_passing_races_a_splice() {
    loom::model(the_cursor_passes_while_a_segment_is_spliced);
}

/// Negative control: a splice that ignores the cursor's pass can take out the
/// segment the cursor has just moved into and clean it up under it: the cursor
/// finds its link gone and loses what follows.
#[test]
fn a_splice_under_the_cursor_loses_its_way() {
    without(
        Safeguard::SpliceRespectsPass,
        "the cursor lost a ticket",
        the_cursor_passes_while_a_segment_is_spliced,
    );
}

/// The segment a removal completes is still the tail (full, no successor yet)
/// while a claimer arrives: the removal installs the successor and swings `tail`
/// as a helper would, racing the claimer's own help, before it freezes and
/// splices. The claimer's ticket lands in the successor and is served; the
/// removed segment goes.
fn a_removal_at_the_tail_races_a_claim() {
    let segments = Arc::new(Segments::<TestCell>::new());
    // A: 0 1 (live), B: 2 3 (given up; the tail, full).
    let a: Vec<_> = (0..2).map(|v| claim_and_publish(&segments, v)).collect();
    let (b0, b1) = (claim_and_give_up(&segments), claim_and_give_up(&segments));
    segments.cancel(b0);
    let completer = {
        let segments = segments.clone();
        thread::spawn(move || segments.cancel(b1))
    };
    let claimer = {
        let segments = segments.clone();
        thread::spawn(move || claim_and_publish(&segments, 4))
    };
    completer.join().unwrap();
    let c = claimer.join().unwrap();
    assert_eq!(
        segments.live_segments(),
        2,
        "a removed segment is still alive"
    );
    assert_eq!(
        serve_published(&segments),
        [0, 1, 4],
        "the list lost a ticket"
    );
    for ticket in a.into_iter().chain([c]) {
        segments.return_ticket(ticket);
    }
}

#[test]
fn a_removal_at_the_tail_installs_and_swings() {
    loom::model(a_removal_at_the_tail_races_a_claim);
}

/// A removal's walk passes a live segment on its way to the one it removes
/// (A: 0 1, B: 2 3 live, C: 4 5 given up, D: 6 live), while the cursor serves
/// and passes the segments in front: the walk starts from whichever segment the
/// cursor is in (helping its pass if it meets one), walks on over the live
/// segment without touching it, and splices out only the frozen one.
fn a_removal_walks_past_a_live_segment() {
    a_removal_races_the_cursor(4);
}

#[test]
fn a_removal_walks_past_a_live_segment_to_its_own() {
    loom::model(a_removal_walks_past_a_live_segment);
}

/// Two first claims race, and with them a walk from `head` (a sweep's, by the
/// server): the walker counts itself in `head`'s word while it reads it. The
/// claimer that finds the first segment installed by the other must put its
/// address alone in `tail`: with the walker's count it would start the tickets
/// at 1, and the ticket never claimed would keep the segment alive for ever
/// (the drop's check: "a segment leaked").
fn first_claims_race_a_walk_from_head() {
    let segments = Arc::new(Segments::<TestCell>::new());
    let claimers: Vec<_> = (0..2)
        .map(|_| {
            let segments = segments.clone();
            thread::spawn(move || {
                let ticket = segments.claim();
                segments.return_ticket(ticket);
            })
        })
        .collect();
    let mut visited = 0;
    // SAFETY: this thread is the only server.
    unsafe {
        segments.scan(|_| {
            visited += 1;
            true
        });
    }
    assert!(visited <= CELLS);
    for claimer in claimers {
        claimer.join().unwrap();
    }
}

#[test]
fn the_first_claims_race_a_walk_from_head() {
    loom::model(first_claims_race_a_walk_from_head);
}

/// Negative control: `tail` copied from `head`'s word with the walker's count.
#[test]
fn a_tail_with_the_walkers_count_leaks_the_first_segment() {
    without(
        Safeguard::StartTakesTheAddress,
        "a segment leaked",
        first_claims_race_a_walk_from_head,
    );
}
