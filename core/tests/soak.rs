//! A multi-threaded soak of the semaphore, ignored by default. Run it with
//!
//! ```text
//! ADMIT_SOAK_SECS=600 cargo test -p admit --release --test soak -- --ignored --nocapture
//! ```
//!
//! (`ADMIT_SOAK_SECS` defaults to 600.) The run is a sequence of rounds until the
//! time is up. Each round makes a fresh semaphore of a random capacity and runs
//! `ADMIT_SOAK_WORKERS` worker threads (default 4; 32 for the oversubscribed soak)
//! and one releaser thread against it:
//!
//! - workers mix blocking `acquire` / `acquire_owned` (under futures-lite's
//!   `block_on`), `try_acquire` / `try_acquire_owned`, and *probes*: an acquire
//!   future polled 0, 1 or 2 times and then dropped unless granted, so
//!   cancellations land before the first poll, while parked, and after a grant the
//!   future was not polled to see;
//! - weights are mixed (mostly 1 or 2 units, sometimes the whole capacity, rarely
//!   more than the capacity, which must fail at once);
//! - owned permits, and owned acquire futures still parked, cross to the releaser
//!   thread, which releases or cancels them there;
//! - in half of the rounds one worker closes the semaphore at a random point: every
//!   blocked worker must then wake with `Closed`.
//!
//! Checked during the run: an in-use counter, incremented after each grant and
//! decremented before each release, never exceeds the capacity (checked at every
//! grant and sampled by the main thread); a permit holds exactly the units asked
//! for. Checked after every round: `available() == capacity`, `waiters() == 0`,
//! the in-use counter is 0, and the semaphore still grants its whole capacity (or
//! refuses with `Closed` if it was closed). A round that makes no progress for 60 s
//! (a lost wake-up leaves a worker blocked forever) aborts the run with a
//! diagnostic. Nothing is ordered by sleeping; threads are never paused on
//! purpose.
// Needs the `alloc` feature (the feature powerset builds every test target).
#![cfg(feature = "alloc")]
// Test code, never built without std: the `core`/`alloc` path lints do not apply.
#![allow(clippy::std_instead_of_core, clippy::std_instead_of_alloc)]

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::time::{Duration, Instant};

use admit::{AcquireError, AcquireOwned, OwnedPermit, Permit, Semaphore, TryAcquireError};
use futures_lite::future::block_on;

const OPS_PER_WORKER: u64 = 5_000;
const CAPACITIES: [usize; 8] = [1, 2, 3, 4, 5, 8, 16, 64];
const STALL_LIMIT: Duration = Duration::from_secs(60);

#[test]
#[ignore = "a long soak: ADMIT_SOAK_SECS=600 cargo test -p admit --release --test soak -- --ignored --nocapture"]
fn soak() {
    let secs: u64 = std::env::var("ADMIT_SOAK_SECS")
        .ok()
        .map(|s| s.parse().expect("ADMIT_SOAK_SECS is a number of seconds"))
        .unwrap_or(600);
    let started = Instant::now();
    let deadline = started + Duration::from_secs(secs);
    let totals = Totals::default();
    let mut round = 0u64;
    while round == 0 || Instant::now() < deadline {
        run_round(round, &totals);
        round += 1;
    }
    let elapsed = started.elapsed();
    totals.report(round, elapsed);
}

/// Counters summed over the whole run.
#[derive(Default)]
struct Totals {
    ops: AtomicU64,
    closes: AtomicU64,
    grants_blocking: AtomicU64,
    grants_try: AtomicU64,
    grants_probe: AtomicU64,
    refused_no_units: AtomicU64,
    refused_closed: AtomicU64,
    refused_oversize: AtomicU64,
    cancels_unpolled: AtomicU64,
    cancels_after_1_poll: AtomicU64,
    cancels_after_2_polls: AtomicU64,
    cancels_cross_thread: AtomicU64,
    /// Of the cancels: the future's waker had been called (a grant or close it was
    /// not polled to see).
    cancels_woken_unseen: AtomicU64,
    releases_cross_thread: AtomicU64,
    max_in_use_ratio_pct: AtomicU64,
    samples: AtomicU64,
}

impl Totals {
    fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }

    fn report(&self, rounds: u64, elapsed: Duration) {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        let grants = get(&self.grants_blocking) + get(&self.grants_try) + get(&self.grants_probe);
        let cancels = get(&self.cancels_unpolled)
            + get(&self.cancels_after_1_poll)
            + get(&self.cancels_after_2_polls)
            + get(&self.cancels_cross_thread);
        println!(
            "soak: {:.1} s, {rounds} rounds ({} closed mid-round)",
            elapsed.as_secs_f64(),
            get(&self.closes)
        );
        println!(
            "soak: {} ops ({:.0}/s), {grants} grants (blocking {}, try {}, probe {})",
            get(&self.ops),
            get(&self.ops) as f64 / elapsed.as_secs_f64(),
            get(&self.grants_blocking),
            get(&self.grants_try),
            get(&self.grants_probe)
        );
        println!(
            "soak: {cancels} cancels (unpolled {}, after 1 poll {}, after 2 polls {}, \
             on another thread {}; woken but not re-polled {})",
            get(&self.cancels_unpolled),
            get(&self.cancels_after_1_poll),
            get(&self.cancels_after_2_polls),
            get(&self.cancels_cross_thread),
            get(&self.cancels_woken_unseen)
        );
        println!(
            "soak: refusals: no units {}, closed {}, oversize {}; {} permits released on another thread",
            get(&self.refused_no_units),
            get(&self.refused_closed),
            get(&self.refused_oversize),
            get(&self.releases_cross_thread)
        );
        println!(
            "soak: {} in-use samples, highest in-use/capacity {}%",
            get(&self.samples),
            get(&self.max_in_use_ratio_pct)
        );
    }
}

/// What one round shares between its threads.
struct Round<'t> {
    sem: Arc<Semaphore>,
    capacity: usize,
    /// Units in permits: +n after each grant, −n before each release.
    in_use: AtomicUsize,
    max_in_use: AtomicUsize,
    progress: AtomicU64,
    totals: &'t Totals,
}

impl Round<'_> {
    fn granted(&self, requested: usize, got: usize) {
        assert_eq!(got, requested, "a permit holds exactly the units asked for");
        let now = self.in_use.fetch_add(got, Ordering::AcqRel) + got;
        assert!(
            now <= self.capacity,
            "{now} units in use, capacity {}",
            self.capacity
        );
        self.max_in_use.fetch_max(now, Ordering::Relaxed);
    }

    fn releasing(&self, units: usize) {
        self.in_use.fetch_sub(units, Ordering::AcqRel);
    }

    fn tick(&self) {
        self.progress.fetch_add(1, Ordering::Relaxed);
        Totals::add(&self.totals.ops, 1);
    }
}

/// Sent to the releaser thread.
enum Msg {
    Permit(OwnedPermit),
    /// An owned acquire future for `.1` units, already polled and not granted; the
    /// releaser polls it once more and drops it.
    Waiter(Pin<Box<AcquireOwned>>, usize),
}

fn run_round(round: u64, totals: &Totals) {
    let mut rng = XorShift::new(round.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ 0x5eed);
    let capacity = CAPACITIES[(rng.next() % CAPACITIES.len() as u64) as usize];
    let close_at = (rng.next() % 2 == 0).then(|| rng.next() % OPS_PER_WORKER);
    let workers: u64 = std::env::var("ADMIT_SOAK_WORKERS").ok().map_or(4, |s| {
        s.parse()
            .expect("ADMIT_SOAK_WORKERS is a number of threads")
    });
    let r = Round {
        sem: Arc::new(Semaphore::new(capacity)),
        capacity,
        in_use: AtomicUsize::new(0),
        max_in_use: AtomicUsize::new(0),
        progress: AtomicU64::new(0),
        totals,
    };
    let done = AtomicBool::new(false);
    std::thread::scope(|s| {
        let (tx, rx) = mpsc::channel::<Msg>();
        let releaser = s.spawn(|| releaser(&r, rx));
        let workers: Vec<_> = (0..workers)
            .map(|w| {
                let tx = tx.clone();
                let close_at = if w == 0 { close_at } else { None };
                let seed = rng.next() | 1;
                let r = &r;
                s.spawn(move || worker(r, seed, close_at, tx))
            })
            .collect();
        drop(tx);
        // Sample the in-use counter and watch for a stall while the round runs.
        s.spawn(|| {
            let mut last = (0, Instant::now());
            while !done.load(Ordering::Acquire) {
                let in_use = r.in_use.load(Ordering::Acquire);
                assert!(in_use <= capacity, "sampled {in_use} units in use, capacity {capacity}");
                Totals::add(&totals.samples, 1);
                let progress = r.progress.load(Ordering::Relaxed);
                if progress != last.0 {
                    last = (progress, Instant::now());
                } else if last.1.elapsed() > STALL_LIMIT {
                    eprintln!(
                        "soak: round {round} made no progress for {STALL_LIMIT:?}: {:?}, in use {in_use}; \
                         a worker is blocked: lost wake-up?",
                        r.sem
                    );
                    std::process::abort();
                }
                // A sampling interval; it orders nothing.
                std::thread::park_timeout(Duration::from_millis(1));
            }
        });
        for w in workers {
            w.join().expect("worker panicked");
        }
        releaser.join().expect("releaser panicked");
        done.store(true, Ordering::Release);
    });

    let sem = &r.sem;
    assert_eq!(sem.available(), capacity, "round {round}: units lost");
    assert_eq!(sem.waiters(), 0, "round {round}: waiters left");
    assert_eq!(r.in_use.load(Ordering::Acquire), 0);
    if close_at.is_some() {
        Totals::add(&totals.closes, 1);
        assert!(sem.is_closed());
        assert_eq!(sem.try_acquire(1).err(), Some(TryAcquireError::Closed));
    } else {
        let all = sem
            .try_acquire(capacity)
            .expect("the whole capacity is free");
        drop(all);
    }
    let max = r.max_in_use.load(Ordering::Relaxed) as u64;
    totals
        .max_in_use_ratio_pct
        .fetch_max(max * 100 / capacity as u64, Ordering::Relaxed);
}

/// A held permit, borrowed or owned.
enum Held<'a> {
    Borrowed(Permit<'a>),
    Owned(OwnedPermit),
}

impl Held<'_> {
    fn units(&self) -> usize {
        match self {
            Held::Borrowed(p) => p.units(),
            Held::Owned(p) => p.units(),
        }
    }
}

fn release(r: &Round<'_>, held: Held<'_>) {
    r.releasing(held.units());
    drop(held);
}

fn worker(r: &Round<'_>, seed: u64, close_at: Option<u64>, tx: mpsc::Sender<Msg>) {
    let mut rng = XorShift::new(seed);
    let sem: &Semaphore = &r.sem;
    let mut held: Vec<Held<'_>> = Vec::new();
    for op in 0..OPS_PER_WORKER {
        if close_at == Some(op) {
            sem.close();
        }
        let units = weight(&mut rng, r.capacity);
        let owned = rng.next() % 2 == 0;
        match rng.next() % 100 {
            // Blocking acquire: only while holding nothing, so no hold-and-wait cycle.
            0..=29 => {
                for p in held.drain(..) {
                    release(r, p);
                }
                let got = if owned {
                    block_on(Arc::clone(&r.sem).acquire_owned(units)).map(Held::Owned)
                } else {
                    block_on(sem.acquire(units)).map(Held::Borrowed)
                };
                match got {
                    Ok(p) => {
                        r.granted(units, p.units());
                        Totals::add(&r.totals.grants_blocking, 1);
                        match p {
                            Held::Owned(p) if rng.next() % 2 == 0 => {
                                tx.send(Msg::Permit(p)).expect("releaser alive");
                            }
                            p => held.push(p),
                        }
                    }
                    Err(e) => refused(r, units, e),
                }
            }
            30..=49 if held.len() < 4 => {
                let got = if owned {
                    Arc::clone(&r.sem).try_acquire_owned(units).map(Held::Owned)
                } else {
                    sem.try_acquire(units).map(Held::Borrowed)
                };
                match got {
                    Ok(p) => {
                        r.granted(units, p.units());
                        Totals::add(&r.totals.grants_try, 1);
                        held.push(p);
                    }
                    Err(TryAcquireError::NoUnits) => Totals::add(&r.totals.refused_no_units, 1),
                    Err(TryAcquireError::Closed) => Totals::add(&r.totals.refused_closed, 1),
                    Err(TryAcquireError::ExceedsCapacity(_)) => {
                        assert!(units > r.capacity);
                        Totals::add(&r.totals.refused_oversize, 1);
                    }
                    Err(e) => panic!("unexpected {e:?}"),
                }
            }
            50..=79 if held.len() < 4 => {
                let polls = rng.next() % 3;
                if owned {
                    let fut = Box::pin(Arc::clone(&r.sem).acquire_owned(units));
                    match probe(r, fut, polls, units) {
                        Ok(p) => held.extend(p.map(Held::Owned)),
                        Err((fut, _)) if polls > 0 && rng.next() % 4 == 0 => {
                            tx.send(Msg::Waiter(fut, units)).expect("releaser alive");
                        }
                        Err(fut) => cancel(r, fut, polls),
                    }
                } else {
                    match probe(r, Box::pin(sem.acquire(units)), polls, units) {
                        Ok(p) => held.extend(p.map(Held::Borrowed)),
                        Err(fut) => cancel(r, fut, polls),
                    }
                }
            }
            _ => {
                if !held.is_empty() {
                    let i = (rng.next() % held.len() as u64) as usize;
                    release(r, held.swap_remove(i));
                }
            }
        }
        r.tick();
    }
    for p in held.drain(..) {
        release(r, p);
    }
}

/// Polls `fut` up to `polls` times: `Ok(Some)` if granted, `Ok(None)` if refused,
/// `Err((fut, woken))` if not done, for the caller to cancel; `woken` if its waker
/// was called since the last poll (granted or closed, and not polled to see it).
fn probe<F, P>(
    r: &Round<'_>,
    mut fut: Pin<Box<F>>,
    polls: u64,
    units: usize,
) -> Result<Option<P>, (Pin<Box<F>>, bool)>
where
    F: Future<Output = Result<P, AcquireError>>,
    P: Units,
{
    let wakes = Arc::new(CountingWaker::default());
    let waker = Waker::from(Arc::clone(&wakes));
    let mut cx = Context::from_waker(&waker);
    for i in 0..polls {
        if i > 0 {
            std::thread::yield_now(); // give releases a chance; orders nothing
        }
        match fut.as_mut().poll(&mut cx) {
            Poll::Ready(Ok(p)) => {
                r.granted(units, p.units());
                Totals::add(&r.totals.grants_probe, 1);
                return Ok(Some(p));
            }
            Poll::Ready(Err(e)) => {
                refused(r, units, e);
                return Ok(None);
            }
            Poll::Pending => {}
        }
    }
    if polls > 0 {
        // A window for a release to grant it before it is dropped; orders nothing.
        std::thread::yield_now();
    }
    Err((fut, wakes.0.load(Ordering::Acquire) > 0))
}

/// Drops a probed future that was not granted: a cancel, before its first poll,
/// while parked, or after a grant it was not polled to see.
fn cancel<F>(r: &Round<'_>, (fut, woken): (F, bool), polls: u64) {
    drop(fut);
    let counter = match polls {
        0 => &r.totals.cancels_unpolled,
        1 => &r.totals.cancels_after_1_poll,
        _ => &r.totals.cancels_after_2_polls,
    };
    Totals::add(counter, 1);
    if woken {
        Totals::add(&r.totals.cancels_woken_unseen, 1);
    }
}

/// The units of a permit type.
trait Units {
    fn units(&self) -> usize;
}

impl Units for Permit<'_> {
    fn units(&self) -> usize {
        Permit::units(self)
    }
}

impl Units for OwnedPermit {
    fn units(&self) -> usize {
        OwnedPermit::units(self)
    }
}

fn refused(r: &Round<'_>, units: usize, e: AcquireError) {
    match e {
        AcquireError::Closed => Totals::add(&r.totals.refused_closed, 1),
        AcquireError::ExceedsCapacity(e) => {
            assert!(units > r.capacity && e.requested == units && e.capacity == r.capacity);
            Totals::add(&r.totals.refused_oversize, 1);
        }
        e => panic!("unexpected {e:?}"),
    }
}

/// Releases what it receives on its own thread: owned permits, and parked owned
/// acquire futures, which it polls once more and then drops (a cancel from a
/// thread other than the one that parked them). It holds what it has only while
/// more is queued in the channel, so it never sits on units while workers wait.
fn releaser(r: &Round<'_>, rx: mpsc::Receiver<Msg>) {
    let waker = Waker::from(Arc::new(CountingWaker::default()));
    let mut held: Vec<OwnedPermit> = Vec::new();
    let take = |msg: Msg, held: &mut Vec<OwnedPermit>| match msg {
        Msg::Permit(p) => held.push(p),
        Msg::Waiter(mut fut, units) => match fut.as_mut().poll(&mut Context::from_waker(&waker)) {
            Poll::Ready(Ok(p)) => {
                r.granted(units, p.units());
                Totals::add(&r.totals.grants_probe, 1);
                held.push(p);
            }
            Poll::Ready(Err(e)) => refused(r, units, e),
            Poll::Pending => {
                drop(fut);
                Totals::add(&r.totals.cancels_cross_thread, 1);
            }
        },
    };
    while let Ok(msg) = rx.recv() {
        take(msg, &mut held);
        while let Ok(msg) = rx.try_recv() {
            take(msg, &mut held);
        }
        for p in held.drain(..) {
            r.releasing(p.units());
            drop(p);
            Totals::add(&r.totals.releases_cross_thread, 1);
        }
    }
}

/// Mostly 1 or 2 units, sometimes up to or exactly the capacity, rarely more.
fn weight(rng: &mut XorShift, capacity: usize) -> usize {
    match rng.next() % 100 {
        0..=54 => 1,
        55..=79 => 2.min(capacity),
        80..=93 => 1 + (rng.next() % capacity as u64) as usize,
        94..=98 => capacity,
        _ => capacity + 1,
    }
}

#[derive(Default)]
struct CountingWaker(AtomicUsize);

impl Wake for CountingWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }
}

/// xorshift64.
struct XorShift(u64);

impl XorShift {
    fn new(seed: u64) -> Self {
        Self(seed | 1)
    }

    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}
