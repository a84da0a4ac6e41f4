//! What a park + cancel costs in cache-line transfers alone, by the shape of
//! its shared accesses: no semaphore, only the atomic operations each design
//! makes on lines the other core wrote last, with the parked operation of S11
//! and S12 between them (a 0–63 iteration spin).
//!
//! ```text
//! cargo bench -p admit-benches --bench transfers            # threads = cores
//! cargo bench -p admit-benches --bench transfers -- 16      # 16 threads
//! ```
//!
//! The shapes (`S` the state word, `T` the queue's tail, `H` a segment's
//! count word, each on a line of its own; a cell is a line of its own, the
//! parker's):
//!
//! - `admit`: what the cell queue does. Park: read `S` (the refused fast
//!   path), claim a ticket on `T`, publish the cell, join on `S`. Cancel: the
//!   cell's CAS, count the cancel on `H`, count out on `S`.
//! - `ticket in S`: as `admit`, the ticket taken in the join.
//! - `no H`: as `admit`, without the segment's count.
//! - `ticket in S, no H`: both.
//! - `lock x3`: a spin lock taken and let go three times (park, re-poll,
//!   cancel), with a counter on its line: a mutex-guarded list's shape,
//!   without its neighbours' links. It spins on a lock holder that is not
//!   running, so with more threads than cores it collapses, as `parking_lot`'s
//!   mutex (which yields, then sleeps) does not.
//!
//! Without `--bench` (as `cargo test --benches` runs it) one short pass.

use std::hint::black_box;
use std::sync::atomic::{AtomicUsize, Ordering::*};
use std::sync::{Arc, Barrier};
use std::time::Instant;

use admit_benches::scenario::{work, ParkedSpins};

/// A word on a 128-byte block of its own (x86 fetches lines in pairs).
#[repr(align(128))]
struct Line(AtomicUsize);

impl Line {
    fn new() -> Self {
        Self(AtomicUsize::new(0))
    }
}

/// A lock and the data it guards, on one block.
#[repr(align(128))]
struct Locked {
    lock: AtomicUsize,
    data: AtomicUsize,
}

/// A cell: a 64-byte line, as the cell queue's.
#[repr(align(64))]
struct Cell(AtomicUsize);

const EMPTY: usize = 5;
const WAITING: usize = 0;
const CANCELLED: usize = 3;
/// One parked request in the state word's count (its top field).
const ONE_WAITER: usize = 1 << 36;
/// Cells of a segment, as the cell queue's.
const CELLS: usize = 31;

struct Shared {
    state: Line,
    tail: Line,
    /// Segment count words, one per 31 tickets, reused round the ring.
    segments: Vec<Line>,
    lock: Locked,
    cells: Vec<Cell>,
}

#[derive(Clone, Copy)]
enum Shape {
    Admit,
    TicketInState,
    NoSegmentCount,
    TicketInStateNoSegmentCount,
    LockThrice,
}

const SHAPES: [(Shape, &str); 5] = [
    (Shape::Admit, "admit: T, S, H, S"),
    (Shape::TicketInState, "ticket in S: S, H, S"),
    (Shape::NoSegmentCount, "no H: T, S, S"),
    (
        Shape::TicketInStateNoSegmentCount,
        "ticket in S, no H: S, S",
    ),
    (Shape::LockThrice, "lock x3"),
];

impl Shared {
    fn new(cells: usize) -> Self {
        Self {
            state: Line::new(),
            tail: Line::new(),
            segments: (0..64).map(|_| Line::new()).collect(),
            lock: Locked {
                lock: AtomicUsize::new(0),
                data: AtomicUsize::new(0),
            },
            cells: (0..cells).map(|_| Cell(AtomicUsize::new(EMPTY))).collect(),
        }
    }

    fn cell(&self, ticket: usize) -> &AtomicUsize {
        &self.cells[ticket % self.cells.len()].0
    }

    fn segment(&self, ticket: usize) -> &AtomicUsize {
        &self.segments[(ticket / CELLS) % self.segments.len()].0
    }

    /// Park: the refused fast path's read, the ticket, the publish, the join.
    fn park(&self, ticket_in_state: bool) -> usize {
        let ticket = if ticket_in_state {
            // The join takes the ticket: one RMW on `S`.
            self.state.0.fetch_add(ONE_WAITER | 1, AcqRel) & 0xffff_ffff
        } else {
            black_box(self.state.0.load(Relaxed));
            self.tail.0.fetch_add(1, AcqRel)
        };
        let cell = self.cell(ticket);
        cell.store(EMPTY, Relaxed);
        let _ = cell.compare_exchange(EMPTY, WAITING, Release, Relaxed);
        if !ticket_in_state {
            self.state.0.fetch_add(ONE_WAITER, AcqRel);
        }
        ticket
    }

    /// The re-poll and the cancel: the cell's phase, its CAS, the segment's
    /// count, the count-out.
    fn cancel(&self, ticket: usize, segment_count: bool) {
        let cell = self.cell(ticket);
        black_box(cell.load(Acquire));
        let _ = cell.compare_exchange(WAITING, CANCELLED, AcqRel, Relaxed);
        if segment_count {
            self.segment(ticket).fetch_add(1, AcqRel);
        }
        self.state.0.fetch_sub(ONE_WAITER, AcqRel);
    }

    fn locked(&self) {
        let Locked { lock, data } = &self.lock;
        while lock.compare_exchange_weak(0, 1, Acquire, Relaxed).is_err() {
            std::hint::spin_loop();
        }
        data.store(data.load(Relaxed) + 1, Relaxed);
        lock.store(0, Release);
    }
}

/// Wall time per operation, ns, of `threads` threads doing `ops` each.
fn run(shape: Shape, threads: usize, ops: usize) -> f64 {
    let shared = Arc::new(Shared::new(ops * threads + CELLS));
    let start_line = Arc::new(Barrier::new(threads + 1));
    let workers: Vec<_> = (0..threads as u64)
        .map(|seed| {
            let (shared, start_line) = (Arc::clone(&shared), Arc::clone(&start_line));
            std::thread::spawn(move || {
                let mut spins = ParkedSpins::new(seed);
                start_line.wait();
                for _ in 0..ops {
                    let spin = spins.next_spin();
                    match shape {
                        Shape::LockThrice => {
                            shared.locked();
                            work(spin);
                            shared.locked();
                            shared.locked();
                        }
                        _ => {
                            let in_state = matches!(
                                shape,
                                Shape::TicketInState | Shape::TicketInStateNoSegmentCount
                            );
                            let counted = matches!(shape, Shape::Admit | Shape::TicketInState);
                            let ticket = shared.park(in_state);
                            work(spin);
                            shared.cancel(ticket, counted);
                        }
                    }
                }
            })
        })
        .collect();
    start_line.wait();
    let start = Instant::now();
    for worker in workers {
        worker.join().expect("a thread panicked");
    }
    start.elapsed().as_nanos() as f64 / (ops * threads) as f64
}

fn main() {
    let full = std::env::args().any(|a| a == "--bench");
    let threads = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(2, usize::from));
    let (reps, ops) = if full { (15, 200_000) } else { (1, 1_000) };
    let mut samples = vec![Vec::new(); SHAPES.len()];
    // Interleaved round-robin, the first round discarded.
    for rep in 0..=reps {
        for k in 0..SHAPES.len() {
            let i = (k + rep) % SHAPES.len();
            let ns = run(SHAPES[i].0, threads, ops);
            if rep > 0 {
                samples[i].push(ns);
            }
        }
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let lock = median(&mut samples[SHAPES.len() - 1].clone());
    println!("{threads} threads, {reps} repetitions interleaved; wall per park + cancel, ns");
    println!();
    println!("| shape | median | min–max | ÷ lock x3 |");
    println!("|---|---:|---:|---:|");
    for ((_, name), mut v) in SHAPES.iter().zip(samples) {
        let m = median(&mut v);
        println!(
            "| {name} | {m:.1} | {:.1}–{:.1} | {:.2}× |",
            v[0],
            v[v.len() - 1],
            m / lock
        );
    }
}
