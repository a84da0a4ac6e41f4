//! `admit` built without `alloc` (`default-features = false, features =
//! ["critical-section"]`: parked requests on the intrusive list of
//! `core/src/semaphore/queue/list.rs`) in the uncontended scenarios S1–S3 of
//! `admit-benches`, against the same bare-atomic `floor`.
//!
//! ```text
//! CARGO_TARGET_DIR=target-bench cargo bench -p admit-benches-no-alloc -- --bench
//! ```
//!
//! **Run it alone, with `-p`.** Cargo unifies a dependency's features among the
//! packages it builds together, so in `cargo bench --workspace` (or next to
//! `admit-benches`, which uses admit's defaults) admit is built *with* `alloc` and
//! this crate would time the alloc build. [`admit_has_alloc`] tells which build it
//! got; the bench binary refuses a `--bench` run with `alloc` and says so.
//!
//! **Why a crate of its own** and not a column of `admit-benches`: that crate
//! depends on admit with its default features (and on adapters that need
//! `alloc`), and the same unification would turn `alloc` on here too. So the
//! little this needs of it is duplicated: the floor and its acquire
//! (`benches/src/peer.rs`), the S1–S3 timing loops (`benches/src/scenario.rs`),
//! the interleaved repetitions and the median/min/max (`benches/benches/peers.rs`,
//! `benches/src/report.rs`).

use std::any::TypeId;
use std::future::Future;
use std::hint::black_box;
use std::pin::{pin, Pin};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Instant;

// The host's implementation of the section: linked through admit's use of it.
use critical_section as _;

/// How much work one sample does (the S1–S3 part of `admit-benches`' `Config`).
#[derive(Debug, Clone)]
pub struct Config {
    /// Repetitions per scenario and column, after one discarded warm-up.
    pub reps: usize,
    /// `try_acquire` + release pairs per sample (S1, S3).
    pub try_iters: u32,
    /// Ready `acquire` + release per sample (S2).
    pub acquire_iters: u32,
}

impl Config {
    /// The recorded run: `admit-benches`' sample sizes, 61 repetitions of
    /// 1–5 ms samples (about 2 s in all).
    #[must_use]
    pub fn full() -> Self {
        Self {
            reps: 61,
            try_iters: 200_000,
            acquire_iters: 100_000,
        }
    }

    /// A quick pass: what `cargo test --benches` runs.
    #[must_use]
    pub fn smoke() -> Self {
        Self {
            reps: 1,
            try_iters: 1_000,
            acquire_iters: 1_000,
        }
    }
}

/// A semaphore as S1–S3 see it (`admit-benches`' `Peer`, cut to what they use).
pub trait Peer: Sized {
    /// The column header.
    const NAME: &'static str;
    /// What a successful acquire returns; dropping it releases the units.
    type Permit<'a>
    where
        Self: 'a;
    /// A semaphore with `capacity` units.
    fn new(capacity: usize) -> Self;
    /// Takes `units` now or returns `None`.
    fn try_acquire(&self, units: usize) -> Option<Self::Permit<'_>>;
    /// Waits for `units`: the peer's own acquire future.
    fn acquire(&self, units: usize) -> impl Future<Output = Self::Permit<'_>> + '_;
}

/// Unwraps a `Result`-valued future, as `admit-benches`' `Expect` does (so admit's
/// S2 does the same work in both crates). Same size as the future it wraps.
#[derive(Debug)]
pub struct Expect<F>(F);

impl<F, T, E> Future for Expect<F>
where
    F: Future<Output = Result<T, E>>,
    E: std::fmt::Debug,
{
    type Output = T;

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<T> {
        // SAFETY: structural pinning of the only field; `Expect` never moves it,
        // has no `Drop`, and is `Unpin` only if `F` is.
        let inner = unsafe { self.map_unchecked_mut(|e| &mut e.0) };
        inner
            .poll(cx)
            .map(|r| r.expect("benchmark semaphores are never closed"))
    }
}

/// `admit::Semaphore` as this crate's build of it (without `alloc`, if run alone).
#[derive(Debug)]
pub struct AdmitNoAlloc(admit::Semaphore);

impl Peer for AdmitNoAlloc {
    const NAME: &'static str = "admit-no-alloc";
    type Permit<'a> = admit::Permit<'a>;

    fn new(capacity: usize) -> Self {
        Self(admit::Semaphore::new(capacity))
    }
    #[inline]
    fn try_acquire(&self, units: usize) -> Option<Self::Permit<'_>> {
        self.0.try_acquire(units).ok()
    }
    #[inline]
    fn acquire(&self, units: usize) -> impl Future<Output = Self::Permit<'_>> + '_ {
        Expect(self.0.acquire(units))
    }
}

/// The floor of `admit-benches`: a bare `AtomicUsize`, `fetch_sub` to take,
/// `fetch_add` to give back (an overdraft is undone at once).
#[derive(Debug)]
pub struct Floor(AtomicUsize);

/// A unit count taken from [`Floor`]; returns it with one `fetch_add`.
#[derive(Debug)]
pub struct FloorPermit<'a> {
    count: &'a AtomicUsize,
    units: usize,
}

impl Drop for FloorPermit<'_> {
    #[inline]
    fn drop(&mut self) {
        self.count.fetch_add(self.units, Ordering::Release);
    }
}

impl Floor {
    #[inline]
    fn take(&self, units: usize) -> Option<FloorPermit<'_>> {
        let prev = self.0.fetch_sub(units, Ordering::Acquire);
        if prev >= units {
            Some(FloorPermit {
                count: &self.0,
                units,
            })
        } else {
            self.0.fetch_add(units, Ordering::Relaxed);
            None
        }
    }
}

/// [`Floor`]'s acquire: try, else wake itself and yield.
#[derive(Debug)]
pub struct FloorAcquire<'a> {
    floor: &'a Floor,
    units: usize,
}

impl<'a> Future for FloorAcquire<'a> {
    type Output = FloorPermit<'a>;

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<FloorPermit<'a>> {
        match self.floor.take(self.units) {
            Some(permit) => Poll::Ready(permit),
            None => {
                cx.waker().wake_by_ref();
                Poll::Pending
            }
        }
    }
}

impl Peer for Floor {
    const NAME: &'static str = "floor";
    type Permit<'a> = FloorPermit<'a>;

    fn new(capacity: usize) -> Self {
        Self(AtomicUsize::new(capacity))
    }
    #[inline]
    fn try_acquire(&self, units: usize) -> Option<Self::Permit<'_>> {
        self.take(units)
    }
    #[inline]
    fn acquire(&self, units: usize) -> impl Future<Output = Self::Permit<'_>> + '_ {
        FloorAcquire { floor: self, units }
    }
}

/// The scenarios measured here, as `admit-benches` labels them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scenario {
    /// Uncontended `try_acquire(1)` + release, capacity 16.
    S1,
    /// Uncontended `acquire(1)`, polled once with a no-op waker (ready), + release.
    S2,
    /// Uncontended `try_acquire(2)` + release, capacity 16.
    S3,
}

impl Scenario {
    /// All of them.
    pub const ALL: [Self; 3] = [Self::S1, Self::S2, Self::S3];

    /// `"S1"` etc.
    #[must_use]
    pub fn id(self) -> &'static str {
        match self {
            Self::S1 => "S1",
            Self::S2 => "S2",
            Self::S3 => "S3",
        }
    }

    /// The row label of `admit-benches`.
    #[must_use]
    pub fn label(self) -> &'static str {
        match self {
            Self::S1 => "S1 try_acquire(1)+release",
            Self::S2 => "S2 acquire(1).await+release, ready",
            Self::S3 => "S3 try_acquire(2)+release",
        }
    }

    /// One sample for peer `P`: ns per pair.
    #[must_use]
    pub fn sample<P: Peer>(self, config: &Config) -> f64 {
        match self {
            Self::S1 => try_release::<P>(1, config.try_iters),
            Self::S2 => ready_acquire::<P>(config.acquire_iters),
            Self::S3 => try_release::<P>(2, config.try_iters),
        }
    }
}

fn per_op(start: Instant, ops: u32) -> f64 {
    start.elapsed().as_nanos() as f64 / f64::from(ops)
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
    per_op(start, iters)
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
    per_op(start, iters)
}

/// Whether cargo built admit with `alloc`, i.e. unified its features with another
/// package's. With `alloc` the call below resolves to the inherent
/// `Semaphore::try_acquire_owned` (inherent methods win over trait methods);
/// without, that method does not exist and it resolves to `Fallback`'s.
#[must_use]
pub fn admit_has_alloc() -> bool {
    struct NoOwned;
    #[allow(dead_code)] // never called in a build with `alloc`
    trait Fallback {
        fn try_acquire_owned(self, units: usize) -> NoOwned;
    }
    impl Fallback for Arc<admit::Semaphore> {
        fn try_acquire_owned(self, _units: usize) -> NoOwned {
            NoOwned
        }
    }
    fn is_fallback<T: 'static>(_: &T) -> bool {
        TypeId::of::<T>() == TypeId::of::<NoOwned>()
    }
    !is_fallback(&Arc::new(admit::Semaphore::new(1)).try_acquire_owned(1))
}

/// Median, min and max of `samples` (sorted in place); `None` if empty.
#[must_use]
pub fn median_min_max(samples: &mut [f64]) -> Option<(f64, f64, f64)> {
    samples.sort_by(f64::total_cmp);
    let n = samples.len();
    let median = match n {
        0 => return None,
        _ if n % 2 == 1 => samples[n / 2],
        _ => (samples[n / 2 - 1] + samples[n / 2]) / 2.0,
    };
    Some((median, samples[0], samples[n - 1]))
}

/// The `p`-quantile (0..=1) of sorted `samples`, by nearest rank.
#[must_use]
pub fn quantile(sorted: &[f64], p: f64) -> f64 {
    let rank = (p * (sorted.len() - 1) as f64).round() as usize;
    sorted[rank]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check<P: Peer>() {
        let sem = P::new(2);
        let both = sem.try_acquire(2).expect("free");
        assert!(sem.try_acquire(1).is_none(), "{}: over capacity", P::NAME);
        drop(both);
        let mut cx = Context::from_waker(Waker::noop());
        let permit = match pin!(sem.acquire(1)).poll(&mut cx) {
            Poll::Ready(p) => p,
            Poll::Pending => panic!("{}: ready acquire parked", P::NAME),
        };
        drop(permit);
        assert!(sem.try_acquire(2).is_some(), "{}: units lost", P::NAME);
    }

    #[test]
    fn peers_take_and_return_units() {
        check::<AdmitNoAlloc>();
        check::<Floor>();
    }

    #[test]
    fn stats() {
        assert_eq!(
            median_min_max(&mut [3.0, 1.0, 2.0, 9.0]),
            Some((2.5, 1.0, 9.0))
        );
        assert_eq!(quantile(&[1.0, 2.0, 3.0, 4.0, 5.0], 0.25), 2.0);
    }
}
