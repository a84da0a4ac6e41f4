//! The scenarios S1–S13, each written once, generic over [`Peer`].
//!
//! Every function returns one sample: the time of a fixed amount of work divided by
//! the number of operations, or, for S8, a size. The harness repeats them,
//! interleaved across peers.

use std::future::Future;
use std::hint::black_box;
use std::marker::PhantomData;
use std::mem::size_of_val;
use std::pin::pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use crate::heap;
use crate::peer::Peer;

/// How much work one sample does. [`Config::full`] is the recorded run,
/// [`Config::smoke`] a seconds-long check that every scenario runs.
#[derive(Debug, Clone)]
pub struct Config {
    /// Repetitions of S4–S6 for every peer (after one discarded warm-up).
    pub reps: usize,
    /// Repetitions of the single-thread scenarios (S1–S3, S7, S13, the gate), whose
    /// samples are kept short (~1–5 ms) so that on a loaded machine most of them
    /// run without being preempted and the median is one of those.
    pub micro_reps: usize,
    /// try_acquire + release pairs per sample (S1, S3), and checkouts + returns
    /// (S13).
    pub try_iters: u32,
    /// acquire().await on a ready semaphore + release per sample (S2).
    pub acquire_iters: u32,
    /// Loop iterations per task in S4/S5 (64 tasks).
    pub loop_iters: u32,
    /// Iterations of the ~100 ns `black_box` spin that stands for the work done
    /// while holding a permit (S4–S6).
    pub spin_iters: u32,
    /// The 4-unit waiter of S6 counts as starved past this wait.
    pub starve_cap: Duration,
    /// Batches of [`PARK_BATCH`] park + cancel per sample (S7).
    pub park_batches: u32,
    /// Length of one sample of the storms (S9, S10).
    pub storm_duration: Duration,
    /// Operations per thread of one sample of the storm with a held unit (S11).
    pub held_storm_ops: u64,
}

impl Config {
    /// The recorded run.
    #[must_use]
    pub fn full() -> Self {
        Self {
            reps: 21,
            micro_reps: 61,
            try_iters: 200_000,
            acquire_iters: 100_000,
            loop_iters: 1_500,
            spin_iters: 330,
            starve_cap: Duration::from_millis(20),
            park_batches: 2_000,
            storm_duration: Duration::from_millis(500),
            held_storm_ops: 100_000,
        }
    }

    /// A seconds-long pass over every scenario: what `cargo test --benches` runs.
    #[must_use]
    pub fn smoke() -> Self {
        Self {
            reps: 1,
            micro_reps: 1,
            try_iters: 1_000,
            acquire_iters: 1_000,
            loop_iters: 5,
            spin_iters: 330,
            starve_cap: Duration::from_millis(5),
            park_batches: 5,
            storm_duration: Duration::from_millis(20),
            held_storm_ops: 500,
        }
    }
}

/// What one sample of one metric came out as.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Cell {
    /// A time in nanoseconds or a size in bytes.
    Value(f64),
    /// S6: the waiter was still waiting at the cap.
    Starved,
    /// The peer lacks what the scenario needs.
    NotApplicable,
}

/// The scenarios, in the order of issue 5.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scenario {
    /// Uncontended `try_acquire(1)` + release.
    S1,
    /// Uncontended `acquire(1)`, polled once on a ready semaphore, + release.
    S2,
    /// Uncontended `try_acquire(2)` + release.
    S3,
    /// 64 tasks on 2 workers, capacity 4, each acquire(1) / work / yield / release.
    S4,
    /// S4 with weights 1, 2, 4.
    S5,
    /// A 4-unit waiter amid 16 one-unit churners, capacity 4: its wait.
    S6,
    /// Park, then cancel: ns each, the semaphore checked whole afterwards.
    S7,
    /// Sizes of the acquire future, the permit and the semaphore.
    S8,
    /// The park/cancel storm with as many threads as cores.
    S9,
    /// The park/cancel storm with 16 threads, many more than cores.
    S10,
    /// The storm with a held unit: 16 threads, each granted unit held a moment,
    /// a fixed number of operations per thread.
    S11,
    /// S11's parked operations alone: every unit held, each operation parks,
    /// spins, polls again and gives up; threads = cores, then 16.
    S12,
    /// A pool's checkout and return on a semaphore used as a counter:
    /// uncontended `try_acquire(1)` + forget the permit, then add a unit.
    S13,
}

impl Scenario {
    /// All of them.
    pub const ALL: [Scenario; 13] = [
        Self::S1,
        Self::S2,
        Self::S3,
        Self::S4,
        Self::S5,
        Self::S6,
        Self::S7,
        Self::S8,
        Self::S9,
        Self::S10,
        Self::S11,
        Self::S12,
        Self::S13,
    ];

    /// `"S1"` etc.
    #[must_use]
    pub fn id(self) -> &'static str {
        match self {
            Self::S1 => "S1",
            Self::S2 => "S2",
            Self::S3 => "S3",
            Self::S4 => "S4",
            Self::S5 => "S5",
            Self::S6 => "S6",
            Self::S7 => "S7",
            Self::S8 => "S8",
            Self::S9 => "S9",
            Self::S10 => "S10",
            Self::S11 => "S11",
            Self::S12 => "S12",
            Self::S13 => "S13",
        }
    }

    /// One row label per metric the scenario yields, with its unit.
    #[must_use]
    pub fn metrics(self) -> &'static [(&'static str, &'static str)] {
        match self {
            Self::S1 => &[("S1 try_acquire(1)+release", "ns/op")],
            Self::S2 => &[("S2 acquire(1).await+release, ready", "ns/op")],
            Self::S3 => &[("S3 try_acquire(2)+release", "ns/op")],
            Self::S4 => &[("S4 contended, 64 tasks/2 workers, cap 4", "ns/op")],
            Self::S5 => &[("S5 as S4, weights 1/2/4", "ns/op")],
            Self::S6 => &[("S6 4-unit waiter amid 16 churners: wait", "µs")],
            Self::S7 => &[
                ("S7 park (first poll, queued)", "ns"),
                ("S7 cancel (drop parked)", "ns"),
                ("S7 re-poll (parked, its task's waker again)", "ns"),
            ],
            Self::S8 => &[
                ("S8 size_of acquire future", "B"),
                ("S8 size_of permit", "B"),
                ("S8 size_of semaphore", "B"),
            ],
            Self::S9 => &[
                ("S9 storm, threads = cores, cap 2: wall per op", "ns/op"),
                ("S9 storm, threads = cores: p99.9 op latency", "ns"),
                ("S9 storm, threads = cores: ops that parked", "%"),
                ("S9 storm, threads = cores: ops that got their unit", "%"),
                (
                    "S9 storm, threads = cores: wall per op that got its unit",
                    "ns/op",
                ),
                ("S9 storm, threads = cores: peak heap growth", "KiB"),
            ],
            Self::S10 => &[
                (
                    "S10 storm, 16 threads on the cores, cap 2: wall per op",
                    "ns/op",
                ),
                ("S10 storm, 16 threads: p99.9 op latency", "ns"),
                ("S10 storm, 16 threads: ops that parked", "%"),
                ("S10 storm, 16 threads: ops that got their unit", "%"),
                (
                    "S10 storm, 16 threads: wall per op that got its unit",
                    "ns/op",
                ),
                ("S10 storm, 16 threads: peak heap growth", "KiB"),
            ],
            Self::S11 => &[
                (
                    "S11 held storm, 16 threads, cap 2, units held: wall per op",
                    "ns/op",
                ),
                ("S11 held storm: p99.9 op latency", "ns"),
                ("S11 held storm: ops that parked", "%"),
                ("S11 held storm: ops that got their unit", "%"),
                ("S11 held storm: wall per op that got its unit", "ns/op"),
                ("S11 held storm: last thread's time over the median's", "×"),
            ],
            Self::S12 => &[
                (
                    "S12 parked cycle, every unit held, threads = cores: wall per op",
                    "ns/op",
                ),
                ("S12 parked cycle, 16 threads: wall per op", "ns/op"),
                ("S12 parked cycle, 16 threads: p99.9 op latency", "ns"),
                ("S12 parked cycle, 16 threads: peak heap growth", "KiB"),
            ],
            Self::S13 => &[("S13 counter: try_acquire(1)+forget, add_units(1)", "ns/op")],
        }
    }

    /// Whether it measures time (S8 measures sizes, once).
    #[must_use]
    pub fn is_time(self) -> bool {
        self != Self::S8
    }

    /// Repetitions under `config`: one for sizes, `micro_reps` for the
    /// single-thread timings, `reps` for the runtime scenarios.
    #[must_use]
    pub fn reps(self, config: &Config) -> usize {
        match self {
            Self::S8 => 1,
            Self::S1 | Self::S2 | Self::S3 | Self::S7 | Self::S13 => config.micro_reps,
            Self::S4 | Self::S5 | Self::S6 | Self::S9 | Self::S10 | Self::S11 | Self::S12 => {
                config.reps
            }
        }
    }
}

/// What the scenarios share: the configuration and the 2-worker Tokio runtime.
#[derive(Debug)]
pub struct Env {
    /// How much work a sample does.
    pub config: Config,
    /// A multi-thread runtime with 2 workers and timers, for S4–S6.
    pub runtime: tokio::runtime::Runtime,
}

impl Env {
    /// Builds the runtime.
    ///
    /// # Panics
    ///
    /// If the runtime cannot be built.
    #[must_use]
    pub fn new(config: Config) -> Self {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_time()
            .build()
            .expect("tokio runtime");
        Self { config, runtime }
    }
}

/// A column of the table: a [`Peer`] behind a trait object, so the harness can
/// hold every peer in one list.
pub trait Column {
    /// The peer's name.
    fn name(&self) -> &'static str;
    /// The column its ratios are taken against.
    fn baseline(&self) -> &'static str;
    /// One sample of `scenario`: one [`Cell`] per entry of [`Scenario::metrics`].
    fn sample(&self, scenario: Scenario, env: &Env) -> Vec<Cell>;
}

/// The [`Column`] of peer `P`.
#[derive(Debug, Default)]
pub struct Of<P>(PhantomData<fn() -> P>);

impl<P: Peer> Of<P> {
    /// The column.
    #[must_use]
    pub fn new() -> Self {
        Self(PhantomData)
    }
}

impl<P: Peer> Column for Of<P> {
    fn name(&self) -> &'static str {
        P::NAME
    }

    fn baseline(&self) -> &'static str {
        P::BASELINE
    }

    fn sample(&self, scenario: Scenario, env: &Env) -> Vec<Cell> {
        let c = &env.config;
        let na = || vec![Cell::NotApplicable; scenario.metrics().len()];
        match scenario {
            Scenario::S1 => vec![Cell::Value(try_release::<P>(1, c.try_iters))],
            Scenario::S2 => vec![Cell::Value(ready_acquire::<P>(c.acquire_iters))],
            Scenario::S3 if P::WEIGHTED => vec![Cell::Value(try_release::<P>(2, c.try_iters))],
            Scenario::S4 => vec![Cell::Value(contended::<P>(env, &[1]))],
            Scenario::S5 if P::WEIGHTED => vec![Cell::Value(contended::<P>(env, &[1, 2, 4]))],
            Scenario::S6 if P::WEIGHTED => vec![large_waiter::<P>(env)],
            Scenario::S7 if P::PARKS => {
                let (park, cancel) = park_cancel::<P>(c.park_batches);
                let repoll = repoll::<P>(c.park_batches);
                vec![Cell::Value(park), Cell::Value(cancel), Cell::Value(repoll)]
            }
            Scenario::S8 => sizes::<P>().map(|b| Cell::Value(b as f64)).to_vec(),
            Scenario::S9 | Scenario::S10 if P::PARKS => {
                let threads = if scenario == Scenario::S9 {
                    std::thread::available_parallelism().map_or(2, usize::from)
                } else {
                    STORM_OVERSUBSCRIBED
                };
                let s = storm::<P>(threads, c.storm_duration, c.spin_iters);
                [
                    s.per_op,
                    s.p999,
                    s.parked,
                    s.got_unit,
                    s.per_unit,
                    s.heap_growth,
                ]
                .map(Cell::Value)
                .to_vec()
            }
            Scenario::S11 if P::PARKS => {
                let s = held_storm::<P>(STORM_OVERSUBSCRIBED, c.held_storm_ops);
                [
                    s.per_op,
                    s.p999,
                    s.parked,
                    s.got_unit,
                    s.per_unit,
                    s.last_over_median,
                ]
                .map(Cell::Value)
                .to_vec()
            }
            Scenario::S12 if P::PARKS => {
                // As many operations as a sample of S11.
                let ops = c.held_storm_ops * STORM_OVERSUBSCRIBED as u64;
                let cores = std::thread::available_parallelism().map_or(2, usize::from);
                let at_cores = parked_cycle::<P>(cores, ops);
                let over = parked_cycle::<P>(STORM_OVERSUBSCRIBED, ops);
                [at_cores.per_op, over.per_op, over.p999, over.heap_growth]
                    .map(Cell::Value)
                    .to_vec()
            }
            Scenario::S13 => {
                forget_add::<P>(c.try_iters).map_or_else(na, |ns| vec![Cell::Value(ns)])
            }
            _ => na(),
        }
    }
}

fn per_op(elapsed: Duration, ops: u64) -> f64 {
    elapsed.as_nanos() as f64 / ops as f64
}

/// The stand-in for ~100 ns of work done while a permit is held.
#[inline(never)]
pub fn work(spin_iters: u32) {
    for i in 0..spin_iters {
        black_box(i);
    }
}

/// S1, S3: `try_acquire(units)` and drop the permit, `iters` times.
#[inline(never)]
fn try_release<P: Peer>(units: usize, iters: u32) -> f64 {
    let sem = P::new(16);
    let sem = black_box(&sem);
    let start = Instant::now();
    for _ in 0..iters {
        let permit = sem.try_acquire(black_box(units));
        drop(black_box(permit).expect("uncontended"));
    }
    per_op(start.elapsed(), iters.into())
}

/// S13: on a [`Peer::counter`] of capacity 16, `try_acquire(1)` and forget the
/// permit (a pool's checkout: the unit leaves the semaphore), then add one unit
/// (its return), `iters` times. `None` for a peer without a counter.
#[inline(never)]
fn forget_add<P: Peer>(iters: u32) -> Option<f64> {
    let sem = P::counter(16)?;
    let sem = black_box(&sem);
    let start = Instant::now();
    for _ in 0..iters {
        let permit = sem.try_acquire(black_box(1));
        P::forget(black_box(permit).expect("uncontended"));
        sem.add_units(black_box(1));
    }
    Some(per_op(start.elapsed(), iters.into()))
}

/// S2: build the acquire future, poll it once (it is ready), drop the permit.
#[inline(never)]
fn ready_acquire<P: Peer>(iters: u32) -> f64 {
    let sem = P::new(16);
    let sem = black_box(&sem);
    let mut cx = Context::from_waker(Waker::noop());
    let start = Instant::now();
    for _ in 0..iters {
        let acquire = pin!(sem.acquire(black_box(1)));
        match acquire.poll(&mut cx) {
            Poll::Ready(permit) => drop(black_box(permit)),
            Poll::Pending => panic!("{}: uncontended acquire parked", P::NAME),
        }
    }
    per_op(start.elapsed(), iters.into())
}

/// Tasks in S4/S5.
const TASKS: usize = 64;

/// S4, S5: 64 tasks, task `i` asking for `weights[i % len]` units of 4, each
/// looping acquire / work / yield / release. Wall time per completed loop.
#[inline(never)]
fn contended<P: Peer>(env: &Env, weights: &[usize]) -> f64 {
    let sem = Arc::new(P::new(4));
    let iters = env.config.loop_iters;
    let spin = env.config.spin_iters;
    let start = Instant::now();
    env.runtime.block_on(async {
        let tasks: Vec<_> = (0..TASKS)
            .map(|i| {
                let sem = Arc::clone(&sem);
                let units = weights[i % weights.len()];
                tokio::spawn(async move {
                    for _ in 0..iters {
                        let permit = sem.acquire(units).await;
                        work(spin);
                        tokio::task::yield_now().await;
                        drop(permit);
                    }
                })
            })
            .collect();
        for task in tasks {
            task.await.expect("task panicked");
        }
    });
    per_op(start.elapsed(), (TASKS as u64) * u64::from(iters))
}

/// Churners in S6.
const CHURNERS: usize = 16;
/// Loops the churners complete before the large waiter arrives.
const CHURN_WARMUP: usize = 256;

/// S6: 16 one-unit churners keep capacity 4 busy; then a 4-unit request arrives.
/// Its wait in µs, or [`Cell::Starved`] past the cap.
#[inline(never)]
fn large_waiter<P: Peer>(env: &Env) -> Cell {
    let sem = Arc::new(P::new(4));
    let stop = Arc::new(AtomicBool::new(false));
    let loops = Arc::new(AtomicUsize::new(0));
    let spin = env.config.spin_iters;
    let cap = env.config.starve_cap;
    env.runtime.block_on(async {
        let churners: Vec<_> = (0..CHURNERS)
            .map(|_| {
                let (sem, stop, loops) = (Arc::clone(&sem), Arc::clone(&stop), Arc::clone(&loops));
                tokio::spawn(async move {
                    while !stop.load(Ordering::Relaxed) {
                        let permit = sem.acquire(1).await;
                        work(spin);
                        tokio::task::yield_now().await;
                        drop(permit);
                        loops.fetch_add(1, Ordering::Relaxed);
                    }
                })
            })
            .collect();
        while loops.load(Ordering::Relaxed) < CHURN_WARMUP {
            tokio::task::yield_now().await;
        }
        let waiter = {
            let sem = Arc::clone(&sem);
            tokio::spawn(async move {
                let start = Instant::now();
                let got = tokio::time::timeout(cap, sem.acquire(4)).await;
                let waited = start.elapsed();
                got.map(|permit| {
                    drop(permit);
                    waited
                })
            })
        };
        let outcome = waiter.await.expect("waiter panicked");
        stop.store(true, Ordering::Relaxed);
        for churner in churners {
            churner.await.expect("churner panicked");
        }
        match outcome {
            Ok(waited) => Cell::Value(waited.as_nanos() as f64 / 1_000.0),
            Err(_elapsed) => Cell::Starved,
        }
    })
}

/// Acquire futures parked at once in S7 before they are cancelled in order.
pub const PARK_BATCH: usize = 32;

/// S7: with the only unit held, park [`PARK_BATCH`] one-unit acquires (first
/// poll each), then drop them oldest first. Returns (park ns, cancel ns) per
/// future. Afterwards the semaphore must be whole: the unit comes back and
/// can be taken again, by `try_acquire` and by a ready `acquire`.
#[inline(never)]
fn park_cancel<P: Peer>(batches: u32) -> (f64, f64) {
    let sem = P::new(1);
    let mut cx = Context::from_waker(Waker::noop());
    let holder = sem.try_acquire(1).expect("fresh semaphore");
    let mut parked = Vec::with_capacity(PARK_BATCH);
    let (mut park, mut cancel) = (Duration::ZERO, Duration::ZERO);
    for _ in 0..batches {
        parked.extend((0..PARK_BATCH).map(|_| sem.acquire(1)));
        let start = Instant::now();
        poll_each_pending::<P, _>(&mut parked, &mut cx, "did not park");
        let parked_at = Instant::now();
        parked.clear();
        let cancelled_at = Instant::now();
        park += parked_at - start;
        cancel += cancelled_at - parked_at;
    }
    drop(holder);
    assert!(
        sem.try_acquire(1).is_some(),
        "{}: a unit was lost by cancellation",
        P::NAME
    );
    match pin!(sem.acquire(1)).poll(&mut cx) {
        Poll::Ready(permit) => drop(permit),
        Poll::Pending => panic!("{}: a cancelled waiter stranded the queue", P::NAME),
    }
    assert!(sem.try_acquire(1).is_some(), "{}: unit lost", P::NAME);
    let ops = u64::from(batches) * PARK_BATCH as u64;
    (per_op(park, ops), per_op(cancel, ops))
}

/// Polls each future of `parked` once, in place, and asserts it is pending
/// (`what` says what it means if not). The caller keeps every future at its
/// address until it is dropped: S7's `Vec` never reallocates (it is filled to
/// its capacity, [`PARK_BATCH`]) and drops its futures in place (`clear`).
fn poll_each_pending<P: Peer, F: Future>(parked: &mut [F], cx: &mut Context<'_>, what: &str) {
    for future in parked.iter_mut() {
        // SAFETY: by the contract above, each future stays at this address
        // until it is dropped.
        let future = unsafe { std::pin::Pin::new_unchecked(future) };
        assert!(future.poll(cx).is_pending(), "{}: {what}", P::NAME);
    }
}

/// A task's waker as a runtime makes it: reference-counted, so a clone and a
/// drop are each an atomic on the task (a no-op waker would hide them).
struct TaskWaker;

impl std::task::Wake for TaskWaker {
    fn wake(self: Arc<Self>) {}
}

/// S7's re-poll: with the only unit held, park [`PARK_BATCH`] one-unit
/// acquires with one task's waker, then poll each once more with that waker
/// (what a spurious wake-up or a `select!` sibling's wake does). Returns ns per
/// re-poll.
#[inline(never)]
fn repoll<P: Peer>(batches: u32) -> f64 {
    let sem = P::new(1);
    let waker = Waker::from(Arc::new(TaskWaker));
    let mut cx = Context::from_waker(&waker);
    let holder = sem.try_acquire(1).expect("fresh semaphore");
    let mut parked = Vec::with_capacity(PARK_BATCH);
    let mut repoll = Duration::ZERO;
    for _ in 0..batches {
        parked.extend((0..PARK_BATCH).map(|_| sem.acquire(1)));
        poll_each_pending::<P, _>(&mut parked, &mut cx, "did not park");
        let start = Instant::now();
        let granted = "a re-poll was granted with the unit held";
        poll_each_pending::<P, _>(&mut parked, &mut cx, granted);
        repoll += start.elapsed();
        parked.clear();
    }
    drop(holder);
    per_op(repoll, u64::from(batches) * PARK_BATCH as u64)
}

/// How often a storm's idle main thread samples the heap. Each sample wakes a
/// thread beside the storm's own, which shows in the p99.9 with threads = cores
/// (S9: about 0.5 µs instead of 0.17 when it was every millisecond).
const HEAP_SAMPLE_EVERY: Duration = Duration::from_millis(10);

/// Threads of the oversubscribed storm (S10).
pub const STORM_OVERSUBSCRIBED: usize = 16;

/// S9, S10: `threads` OS threads hammer one semaphore of capacity 2 for
/// `duration`. Each operation: build `acquire(1)` and poll it once; if granted,
/// drop the permit; if parked, spin a moment, poll once more, and drop it (a
/// cancel if it is still parked). With more runnable threads than cores, threads
/// are descheduled in the middle of operations, for whole time slices: a semaphore
/// whose park or cancel waits for another thread (a lock holder) stalls everyone
/// behind that thread.
///
/// Returns the wall time per operation over all threads (the inverse of the
/// throughput), the p99.9 latency of one operation in 16, each timed alone (two
/// clock reads) into a log-linear histogram, and what the operations came to.
#[inline(never)]
fn storm<P: Peer>(threads: usize, duration: Duration, spin: u32) -> Storm {
    let sem = Arc::new(P::new(2));
    let stop = Arc::new(AtomicBool::new(false));
    let start_line = Arc::new(std::sync::Barrier::new(threads + 1));
    let workers: Vec<_> = (0..threads)
        .map(|_| {
            let (sem, stop, start_line) =
                (Arc::clone(&sem), Arc::clone(&stop), Arc::clone(&start_line));
            std::thread::spawn(move || {
                let mut cx = Context::from_waker(Waker::noop());
                let mut histogram = Histogram::default();
                let (mut ops, mut parked, mut got_unit) = (0u64, 0u64, 0u64);
                start_line.wait();
                while !stop.load(Ordering::Relaxed) {
                    let timed = ops.is_multiple_of(16);
                    let began = timed.then(Instant::now);
                    let mut acquire = pin!(sem.acquire(1));
                    if let Poll::Ready(permit) = acquire.as_mut().poll(&mut cx) {
                        got_unit += 1;
                        drop(permit);
                    } else {
                        parked += 1;
                        work(spin);
                        if let Poll::Ready(permit) = acquire.as_mut().poll(&mut cx) {
                            got_unit += 1;
                            drop(permit);
                        }
                    }
                    // The acquire future is dropped here: a cancel if still parked.
                    if let Some(began) = began {
                        histogram.record(began.elapsed());
                    }
                    ops += 1;
                }
                (ops, parked, got_unit, histogram)
            })
        })
        .collect();
    start_line.wait();
    let start = Instant::now();
    // The run's length, not an ordering; meanwhile the heap is sampled for its
    // peak.
    let heap_at_start = heap::live();
    let mut heap_peak = heap_at_start;
    while let Some(left) = duration.checked_sub(start.elapsed()) {
        std::thread::sleep(left.min(HEAP_SAMPLE_EVERY));
        heap_peak = heap_peak.max(heap::live());
    }
    stop.store(true, Ordering::Relaxed);
    let (mut total, mut parked, mut got_unit) = (0, 0, 0);
    let mut histogram = Histogram::default();
    for worker in workers {
        let (ops, p, g, h) = worker.join().expect("storm thread panicked");
        total += ops;
        parked += p;
        got_unit += g;
        histogram.merge(&h);
    }
    let elapsed = start.elapsed();
    // Every thread has stopped and dropped its futures: both units should be free
    // and nobody queued. A peer that cleans cancelled waiters up lazily (or lost a
    // unit) refuses here; that is reported, not treated as a benchmark failure.
    let both = (sem.try_acquire(1), sem.try_acquire(1));
    if both.0.is_none() || both.1.is_none() {
        eprintln!(
            "note: {}: after the storm, try_acquire refused the 2 free units",
            P::NAME
        );
    }
    drop(both);
    let share = |n: u64| 100.0 * n as f64 / total.max(1) as f64;
    Storm {
        per_op: per_op(elapsed, total),
        p999: histogram.quantile(0.999),
        parked: share(parked),
        got_unit: share(got_unit),
        per_unit: per_op(elapsed, got_unit.max(1)),
        heap_growth: (heap_peak - heap_at_start) as f64 / 1024.0,
    }
}

/// How long a parked operation of S11 and S12 spins before its second poll:
/// 0–63 iterations from a per-thread xorshift, so the threads' polls drift
/// apart.
#[derive(Debug, Clone)]
pub struct ParkedSpins(u64);

impl ParkedSpins {
    /// The sequence of thread `seed`.
    #[must_use]
    #[inline]
    pub fn new(seed: u64) -> Self {
        Self(0x9E37_79B9_7F4A_7C15 ^ (seed + 1).wrapping_mul(0xBF58_476D_1CE4_E5B9))
    }

    /// The next spin, in iterations of [`work`].
    #[inline]
    pub fn next_spin(&mut self) -> u32 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 & 63) as u32
    }
}

/// Spin iterations a granted unit is held for in S11 before its permit drops.
const HELD_STORM_HOLD: u32 = 30;

/// S11: the storm with a held unit. `threads` OS threads share one semaphore of
/// capacity 2, and each does `ops` operations (the sample ends when the last
/// thread is done). An operation builds `acquire(1)` and polls it once; a grant
/// holds the unit for [`HELD_STORM_HOLD`] spin iterations, then drops it. A
/// parked one spins 0–63 iterations (a per-thread xorshift), polls once more,
/// and holds the unit likewise if it got it, or drops the future (a cancel).
/// Every grant is followed by a release that serves a queue whose head, with
/// more threads than cores, is often descheduled.
///
/// Returns the wall time per operation over all threads, the p99.9 latency of
/// one operation in 16, the shares that parked and that got their unit, and the
/// last thread's time over the median thread's (how evenly the work was shared).
#[inline(never)]
fn held_storm<P: Peer>(threads: usize, ops: u64) -> HeldStorm {
    let sem = Arc::new(P::new(2));
    let start_line = Arc::new(std::sync::Barrier::new(threads + 1));
    let workers: Vec<_> = (0..threads as u64)
        .map(|seed| {
            let (sem, start_line) = (Arc::clone(&sem), Arc::clone(&start_line));
            std::thread::spawn(move || {
                let mut cx = Context::from_waker(Waker::noop());
                let mut histogram = Histogram::default();
                let (mut parked, mut got_unit) = (0u64, 0u64);
                let mut spins = ParkedSpins::new(seed);
                start_line.wait();
                for op in 0..ops {
                    let began = op.is_multiple_of(16).then(Instant::now);
                    let mut acquire = pin!(sem.acquire(1));
                    if let Poll::Ready(permit) = acquire.as_mut().poll(&mut cx) {
                        got_unit += 1;
                        work(HELD_STORM_HOLD);
                        drop(permit);
                    } else {
                        parked += 1;
                        work(spins.next_spin());
                        if let Poll::Ready(permit) = acquire.as_mut().poll(&mut cx) {
                            got_unit += 1;
                            work(HELD_STORM_HOLD);
                            drop(permit);
                        }
                    }
                    if let Some(began) = began {
                        histogram.record(began.elapsed());
                    }
                }
                (parked, got_unit, histogram, Instant::now())
            })
        })
        .collect();
    start_line.wait();
    let start = Instant::now();
    let (mut parked, mut got_unit) = (0, 0);
    let mut histogram = Histogram::default();
    let mut finished = Vec::with_capacity(threads);
    for worker in workers {
        let (p, g, h, done) = worker.join().expect("storm thread panicked");
        parked += p;
        got_unit += g;
        histogram.merge(&h);
        finished.push(done.saturating_duration_since(start));
    }
    finished.sort_unstable();
    let last = finished[finished.len() - 1];
    let median = finished[finished.len() / 2];
    let total = ops * threads as u64;
    let share = |n: u64| 100.0 * n as f64 / total.max(1) as f64;
    HeldStorm {
        per_op: per_op(last, total),
        p999: histogram.quantile(0.999),
        parked: share(parked),
        got_unit: share(got_unit),
        per_unit: per_op(last, got_unit.max(1)),
        last_over_median: last.as_secs_f64() / median.as_secs_f64().max(1e-9),
    }
}

/// S12: the parked operations of S11 alone. The semaphore's only unit is held
/// throughout, and `threads` OS threads share `ops` operations: each builds
/// `acquire(1)`, polls it once (it parks), spins 0–63 iterations (S11's
/// xorshift), polls once more (still parked) and drops it (a cancel). Nobody
/// serves, so this is the cost of a park, a re-poll and a cancel with the other
/// threads doing the same, and the memory the cancels leave behind.
///
/// Returns the wall time per operation over all threads, the p99.9 latency of
/// one operation in 16, and how far the heap grew above its size at the start.
#[inline(never)]
fn parked_cycle<P: Peer>(threads: usize, ops: u64) -> ParkedCycle {
    let sem = Arc::new(P::new(1));
    let held = sem.try_acquire(1).expect("a fresh unit");
    let per_thread = ops / threads as u64;
    let start_line = Arc::new(std::sync::Barrier::new(threads + 1));
    let running = Arc::new(AtomicUsize::new(threads));
    let workers: Vec<_> = (0..threads as u64)
        .map(|seed| {
            let (sem, start_line, running) = (
                Arc::clone(&sem),
                Arc::clone(&start_line),
                Arc::clone(&running),
            );
            std::thread::spawn(move || {
                let mut cx = Context::from_waker(Waker::noop());
                let mut histogram = Histogram::default();
                let mut spins = ParkedSpins::new(seed);
                start_line.wait();
                let started = Instant::now();
                for op in 0..per_thread {
                    let began = op.is_multiple_of(16).then(Instant::now);
                    {
                        let mut acquire = pin!(sem.acquire(1));
                        let parked = acquire.as_mut().poll(&mut cx).is_pending();
                        work(spins.next_spin());
                        let still = acquire.as_mut().poll(&mut cx).is_pending();
                        assert!(parked && still, "a unit held throughout was granted");
                    } // the cancel, timed with the rest
                    if let Some(began) = began {
                        histogram.record(began.elapsed());
                    }
                }
                let done = Instant::now();
                running.fetch_sub(1, Ordering::Release);
                (histogram, started, done)
            })
        })
        .collect();
    start_line.wait();
    // Meanwhile the heap is sampled. The run is from the first thread's start
    // to the last one's end, as each thread timed them.
    let heap_at_start = heap::live();
    let mut heap_peak = heap_at_start;
    while running.load(Ordering::Acquire) != 0 {
        std::thread::sleep(HEAP_SAMPLE_EVERY);
        heap_peak = heap_peak.max(heap::live());
    }
    let mut histogram = Histogram::default();
    let (mut first, mut last) = (None::<Instant>, None::<Instant>);
    for worker in workers {
        let (h, started, done) = worker.join().expect("parked-cycle thread panicked");
        histogram.merge(&h);
        first = Some(first.map_or(started, |f| f.min(started)));
        last = Some(last.map_or(done, |l| l.max(done)));
    }
    let elapsed = last
        .zip(first)
        .map_or(Duration::ZERO, |(l, f)| l.saturating_duration_since(f));
    drop(held);
    ParkedCycle {
        per_op: per_op(elapsed, per_thread * threads as u64),
        p999: histogram.quantile(0.999),
        heap_growth: (heap_peak - heap_at_start) as f64 / 1024.0,
    }
}

/// One sample of S12.
struct ParkedCycle {
    /// Wall time per operation over all threads, ns.
    per_op: f64,
    /// p99.9 latency of one operation, ns.
    p999: f64,
    /// How far the heap grew above its size at the start, at its peak, KiB.
    heap_growth: f64,
}

/// One sample of the storm with a held unit.
struct HeldStorm {
    /// Wall time per operation over all threads, until the last one finished, ns.
    per_op: f64,
    /// p99.9 latency of one operation, ns.
    p999: f64,
    /// Operations whose first poll parked, %.
    parked: f64,
    /// Operations that ended holding their unit, %.
    got_unit: f64,
    /// Wall time per operation that got its unit, ns: the inverse of the
    /// throughput of units handed out.
    per_unit: f64,
    /// The last thread's time over the median thread's.
    last_over_median: f64,
}

/// One storm sample.
struct Storm {
    /// Wall time per operation over all threads, ns.
    per_op: f64,
    /// p99.9 latency of one operation, ns.
    p999: f64,
    /// Operations whose first poll parked, %.
    parked: f64,
    /// Operations that ended holding their unit (at once or after parking), %;
    /// the rest gave up (a cancel).
    got_unit: f64,
    /// Wall time per operation that got its unit, ns: the inverse of the
    /// throughput of units actually handed out.
    per_unit: f64,
    /// How far the heap grew above its size at the start, at its peak (sampled
    /// every [`HEAP_SAMPLE_EVERY`]), KiB.
    heap_growth: f64,
}

/// Latencies in nanoseconds, in buckets of 1/8 of a power of two (within 12.5 %).
#[derive(Debug, Clone)]
struct Histogram {
    counts: Vec<u64>,
}

impl Default for Histogram {
    fn default() -> Self {
        Self {
            counts: vec![0; 64 * 8],
        }
    }
}

impl Histogram {
    fn bucket(ns: u64) -> usize {
        if ns < 8 {
            return ns as usize;
        }
        let exp = 63 - ns.leading_zeros() as usize; // >= 3
        let sub = ((ns >> (exp - 3)) & 7) as usize;
        exp * 8 + sub
    }

    /// The largest value of bucket `b` (buckets 8..24 are never used: values
    /// below 8 have one bucket each, and 8 starts at bucket 24).
    fn upper(b: usize) -> u64 {
        if b < 24 {
            return b.min(7) as u64;
        }
        let (exp, sub) = (b / 8, (b % 8) as u64);
        ((8 + sub + 1) << (exp - 3)) - 1
    }

    fn record(&mut self, elapsed: Duration) {
        let ns = u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX);
        self.counts[Self::bucket(ns)] += 1;
    }

    fn merge(&mut self, other: &Self) {
        for (a, b) in self.counts.iter_mut().zip(&other.counts) {
            *a += b;
        }
    }

    /// The upper bound of the bucket holding quantile `q`.
    fn quantile(&self, q: f64) -> f64 {
        let total: u64 = self.counts.iter().sum();
        let rank = ((total as f64) * q).ceil() as u64;
        let mut seen = 0;
        for (b, &n) in self.counts.iter().enumerate() {
            seen += n;
            if seen >= rank.max(1) {
                return Self::upper(b) as f64;
            }
        }
        f64::NAN
    }
}

/// S8: bytes of the acquire future (unpolled), the permit, the semaphore.
fn sizes<P: Peer>() -> [usize; 3] {
    let sem = P::new(1);
    let future = size_of_val(&sem.acquire(1));
    let permit = sem.try_acquire(1).expect("fresh semaphore");
    [future, size_of_val(&permit), P::SEMAPHORE_SIZE]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_buckets_hold_their_values_within_an_eighth() {
        for ns in [0, 1, 7, 8, 9, 15, 16, 17, 100, 1_000, 123_456, u64::MAX / 2] {
            let b = Histogram::bucket(ns);
            assert!(Histogram::upper(b) >= ns, "{ns} above its bucket's top");
            assert!(
                b == 0 || Histogram::upper(b - 1) < ns,
                "{ns} fits a lower bucket"
            );
            assert!(
                Histogram::upper(b) - ns <= ns / 8 + 1,
                "{ns}: bucket too wide"
            );
        }
        let mut h = Histogram::default();
        for ns in 1..=1000 {
            h.record(Duration::from_nanos(ns));
        }
        assert!((990.0..=1_100.0).contains(&h.quantile(0.999)));
    }
    use crate::peer::{Admit, AsyncLock, Floor, Tokio};

    #[test]
    fn every_scenario_runs_for_a_weighted_and_a_one_unit_peer() {
        let env = Env::new(Config::smoke());
        for scenario in Scenario::ALL {
            for column in [
                &Of::<Admit>::new() as &dyn Column,
                &Of::<Tokio>::new(),
                &Of::<AsyncLock>::new(),
                &Of::<Floor>::new(),
            ] {
                let cells = column.sample(scenario, &env);
                assert_eq!(cells.len(), scenario.metrics().len());
            }
        }
    }

    /// The floor with the trait's default [`Peer::counter`]: no counter.
    struct NoCounter(Floor);

    impl Peer for NoCounter {
        const NAME: &'static str = "no-counter";
        const WEIGHTED: bool = true;
        const PARKS: bool = false;
        const SEMAPHORE_SIZE: usize = Floor::SEMAPHORE_SIZE;
        type Permit<'a> = <Floor as Peer>::Permit<'a>;

        fn new(capacity: usize) -> Self {
            Self(Floor::new(capacity))
        }
        fn try_acquire(&self, units: usize) -> Option<Self::Permit<'_>> {
            self.0.try_acquire(units)
        }
        fn acquire(&self, units: usize) -> impl Future<Output = Self::Permit<'_>> + Send + '_ {
            self.0.acquire(units)
        }
    }

    #[test]
    fn a_peer_without_a_counter_is_not_applicable_in_s13() {
        let env = Env::new(Config::smoke());
        let cells = Of::<NoCounter>::new().sample(Scenario::S13, &env);
        assert_eq!(cells, [Cell::NotApplicable]);
        let cells = Of::<Floor>::new().sample(Scenario::S13, &env);
        assert!(matches!(cells[..], [Cell::Value(ns)] if ns > 0.0));
    }

    #[test]
    fn the_storm_counts_what_its_operations_came_to() {
        let s = storm::<Admit>(STORM_OVERSUBSCRIBED, Duration::from_millis(20), 330);
        assert!(s.per_op > 0.0 && s.p999 > 0.0 && s.per_unit >= s.per_op);
        assert!((0.0..=100.0).contains(&s.parked), "parked {}", s.parked);
        assert!(s.got_unit <= 100.0, "got their unit {}", s.got_unit);
        // An operation that did not park got its unit at once.
        assert!(
            s.got_unit >= 100.0 - s.parked - 1e-9,
            "parked {} %, got their unit {} %",
            s.parked,
            s.got_unit
        );
    }
}
