//! The unit tests, on std threads (and under miri, with shorter loops).

use std::boxed::Box;
use std::vec::Vec;

use super::{claim_serve_return, TestCell};
use crate::semaphore::queue::segments::{Segments, CELLS};

fn std_spawn(f: Box<dyn FnOnce() + Send>) -> Box<dyn FnOnce()> {
    let handle = std::thread::spawn(f);
    Box::new(move || handle.join().unwrap())
}

#[test]
fn every_ticket_is_served_once_in_order_and_every_segment_freed() {
    let rounds = if cfg!(miri) { 2 * CELLS } else { 20_000 };
    claim_serve_return(4, rounds, std_spawn, std::thread::yield_now);
}

/// The case the removal exists for: the cursor is stuck behind a ticket nobody
/// publishes (a descheduled server or head), while `threads` callers claim
/// `rounds` tickets each and give them up. The segments they fill are removed by
/// their cancels, not left for the cursor.
///
/// While they run, the segments alive never exceed a few per caller (each
/// holds at most its ticket's segment and the two a splice works on), however
/// the scheduler slices them; once they are done, those of the one live ticket.
fn given_up_behind_a_stuck_cursor(threads: usize, rounds: usize) {
    let segments = std::sync::Arc::new(Segments::<TestCell>::new());
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
    segments.return_ticket(stuck);
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

/// A segment the cursor has left, one of whose tickets was returned (a grant)
/// and the others cancelled, so no cancel completes it: the cancel that lets
/// go of its last reference frees it.
#[test]
fn the_last_cancel_behind_the_cursor_frees_its_segment() {
    let segments = Segments::<TestCell>::new();
    let mut tickets: Vec<_> = (0..CELLS + 1).map(|_| segments.claim()).collect();
    for ticket in &tickets[1..CELLS] {
        ticket.cell().give_up();
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
    segments.return_ticket(first.next().unwrap()); // the granted one
    for ticket in first {
        assert_eq!(segments.live_segments(), 2);
        segments.cancel(ticket);
    }
    assert_eq!(
        segments.live_segments(),
        1,
        "the left segment was not freed"
    );
    segments.return_ticket(last);
}

/// A removal walks from the cursor's segment past a live one to the
/// predecessor of the segment it removes: the live one stays linked, and the
/// cursor meets every one of its cells, in ticket order, then the ticket after
/// the removed segment.
#[test]
fn a_removal_walks_past_a_live_segment() {
    let segments = Segments::<TestCell>::new();
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
        segments.return_ticket(ticket);
    }
}

#[test]
fn tickets_left_unserved_are_freed_with_the_list() {
    let segments = Segments::<TestCell>::new();
    // Three segments' worth and one more: the cursor never moves.
    let tickets: Vec<_> = (0..3 * CELLS + 1).map(|_| segments.claim()).collect();
    assert_eq!(segments.live_segments(), 4);
    for ticket in tickets {
        segments.return_ticket(ticket);
    }
    // Released tickets free nothing the cursor has not passed.
    assert_eq!(segments.live_segments(), 4);
    drop(segments); // checks every segment is freed once
}

#[test]
fn a_segment_goes_once_the_cursor_and_its_tickets_have_left() {
    let segments = Segments::<TestCell>::new();
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
        segments.return_ticket(tickets.next().unwrap());
    }
    assert_eq!(segments.live_segments(), 1);
    segments.return_ticket(tickets.next().unwrap());
}
