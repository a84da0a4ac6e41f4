//! The segment list's tests, on a cell of their own ([`TestCell`]): the unit
//! tests on std threads (`unit.rs`), the randomized schedules (`shuttle.rs`,
//! with `--cfg admit_shuttle`) and the loom model (`loom.rs`, with
//! `--cfg admit_loom`).

// Test code on std.
#![allow(clippy::std_instead_of_alloc, clippy::std_instead_of_core)]

#[cfg(admit_loom)]
mod loom;
#[cfg(all(admit_shuttle, not(admit_loom)))]
mod shuttle;
#[cfg(not(any(admit_loom, admit_shuttle)))]
mod unit;

use super::SegmentCell;
use crate::loom::sync::{AtomicUsize, Ordering, UnsafeCell};

/// A cell as its segment is born.
const FRESH: usize = 0;
/// Its claimer has written its value.
const PUBLISHED: usize = 1;
/// The server has taken the value.
const SERVED: usize = 2;
/// Its claimer gave it up before publishing; the server skips it.
const CANCELLED: usize = 3;

/// The tests' cell: a state, and the value its claimer publishes.
struct TestCell {
    state: AtomicUsize,
    value: UnsafeCell<usize>,
}

impl SegmentCell for TestCell {
    fn fresh() -> TestCell {
        TestCell {
            state: AtomicUsize::new(FRESH),
            value: UnsafeCell::new(0),
        }
    }
}

// SAFETY: `value` is written by the ticket holder before it publishes the cell
// (`Release`), and read by the server once it has read that (`Acquire`).
unsafe impl Sync for TestCell {}

impl TestCell {
    /// The ticket holder's: publishes `value`.
    fn publish(&self, value: usize) {
        // SAFETY: the cell is the ticket holder's until published.
        self.value.with_mut(|v| unsafe { *v = value });
        self.state.store(PUBLISHED, Ordering::Release);
    }

    /// The ticket holder's: gives the cell up unpublished.
    fn give_up(&self) {
        self.state.store(CANCELLED, Ordering::Release);
    }

    fn state(&self) -> usize {
        self.state.load(Ordering::Acquire)
    }

    /// The server's: takes the published value, and marks the cell served.
    ///
    /// # Safety
    ///
    /// The caller read `PUBLISHED` from [`state`](Self::state).
    unsafe fn serve(&self) -> usize {
        // SAFETY: published with `Release`, read after the `Acquire`.
        let value = self.value.with_mut(|v| unsafe { *v });
        self.state.store(SERVED, Ordering::Release);
        value
    }
}

/// Claimers and one server over one list, for the threaded tests (std threads)
/// and the randomized schedules (shuttle's): each claimer claims `rounds`
/// tickets, publishes its own number in each, keeps the last few past the
/// server's visit and checks them then, and returns them; the server walks the
/// cells. Every ticket is served once, each claimer's in its claiming order;
/// segments are freed as the cursor passes them (at most the cursor's and the
/// tail's remain), and every one by the list's drop (its own check).
#[cfg(not(admit_loom))]
fn claim_serve_return(
    threads: usize,
    rounds: usize,
    spawn: impl Fn(std::boxed::Box<dyn FnOnce() + Send>) -> std::boxed::Box<dyn FnOnce()>,
    yield_now: fn(),
) {
    use std::sync::Arc;
    use std::vec::Vec;

    use super::Segments;

    let segments = Arc::new(Segments::<TestCell>::new());
    let claimers: Vec<_> = (0..threads)
        .map(|me| {
            let segments = segments.clone();
            spawn(std::boxed::Box::new(move || {
                let mut held = std::collections::VecDeque::new();
                for round in 0..rounds {
                    let ticket = segments.claim();
                    if (me + round) % 3 == 0 {
                        // Give up before publishing: the server skips it.
                        ticket.cell().give_up();
                        segments.cancel(ticket);
                        continue;
                    }
                    ticket.cell().publish(me * rounds + round);
                    held.push_back(ticket);
                    if held.len() > 3 {
                        let ticket = held.pop_front().unwrap();
                        let state = ticket.cell().state();
                        assert!(state == PUBLISHED || state == SERVED);
                        segments.return_ticket(ticket);
                    }
                }
                for ticket in held {
                    segments.return_ticket(ticket);
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
            Some(cell) if cell.state() == CANCELLED => {
                // SAFETY: the only server; `cell` is not used again.
                unsafe { segments.advance() };
            }
            Some(cell) if cell.state() == PUBLISHED => {
                // SAFETY: read `PUBLISHED` just now.
                let value = unsafe { cell.serve() };
                let (me, round) = (value / rounds, value % rounds);
                while (me + next_round[me]) % 3 == 0 {
                    next_round[me] += 1; // given up
                }
                assert_eq!(round, next_round[me], "claimer {me}'s tickets out of order");
                next_round[me] += 1;
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
        assert_eq!(cell.state(), CANCELLED, "a ticket past the last");
        // SAFETY: as above.
        unsafe { segments.advance() };
    }
    assert!(
        segments.live_segments() <= 2,
        "{} segments alive with every ticket served and returned",
        segments.live_segments()
    );
}
