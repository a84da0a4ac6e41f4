//! One small trait, [`Peer`], and one adapter per semaphore under test, so every
//! scenario is written once and runs unchanged for every column.
//!
//! Release is always "drop the permit". A capability a peer lacks (weights, a
//! parking acquire) is a `const` on the trait, and the scenarios print `n/a` for
//! it instead of measuring something else. Every peer has `try_acquire`; every
//! weighted peer is FIFO, and the unfair floor runs S6 as the control that shows
//! the scenario does detect starvation.
//!
//! A semaphore used as a counter (S13, a pool's count of its objects) is the one
//! optional part: [`Peer::counter`] makes it, `None` by default, and only then are
//! [`Peer::forget`] and [`Peer::add_units`] called. Every peer here has both.

use std::future::Future;
use std::mem::size_of;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};

/// A semaphore as the scenarios see it.
pub trait Peer: Send + Sync + Sized + 'static {
    /// The column header.
    const NAME: &'static str;
    /// The column whose medians this one's ratios are taken against.
    const BASELINE: &'static str = "admit";
    /// Whether a request may be for more than one unit.
    const WEIGHTED: bool;
    /// Whether `acquire` parks the task (registers a waker) rather than spinning (S7).
    const PARKS: bool;
    /// `size_of` the semaphore itself (not of an `Arc` around it).
    const SEMAPHORE_SIZE: usize;

    /// What a successful acquire returns; dropping it releases the units.
    type Permit<'a>: Send
    where
        Self: 'a;

    /// A semaphore with `capacity` units.
    fn new(capacity: usize) -> Self;

    /// Takes `units` now or returns `None`; never parks.
    fn try_acquire(&self, units: usize) -> Option<Self::Permit<'_>>;

    /// Waits for `units`. The future is the peer's own acquire future (wrapped,
    /// where its output is a `Result`, in a zero-size-overhead [`Expect`]).
    fn acquire(&self, units: usize) -> impl Future<Output = Self::Permit<'_>> + Send + '_;

    /// A semaphore of `capacity` units used as a counter (S13), as a pool uses
    /// one: a checkout forgets its permit, a return adds a unit. `None` (the
    /// default) if the peer cannot do both, [`forget`](Self::forget) and
    /// [`add_units`](Self::add_units).
    fn counter(capacity: usize) -> Option<Self> {
        let _ = capacity;
        None
    }

    /// Keeps `permit`'s units out of the semaphore for good (tokio's
    /// `SemaphorePermit::forget`). Called only on a [`counter`](Self::counter).
    fn forget(permit: Self::Permit<'_>) {
        drop(permit);
        unreachable!("{} has no counter", Self::NAME);
    }

    /// Adds `units` to the semaphore, free at once (tokio's `add_permits`).
    /// Called only on a [`counter`](Self::counter).
    fn add_units(&self, units: usize) {
        let _ = units;
        unreachable!("{} has no counter", Self::NAME);
    }
}

/// Unwraps a `Result`-valued future: the scenarios never close a semaphore, so an
/// error is a bug in the benchmark. Same size as the future it wraps.
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

fn units_u32(units: usize) -> u32 {
    u32::try_from(units).expect("benchmark requests are small")
}

/// `admit::Semaphore`, borrowed permits.
#[derive(Debug)]
pub struct Admit(admit::Semaphore);

impl Peer for Admit {
    const NAME: &'static str = "admit";
    const WEIGHTED: bool = true;
    const PARKS: bool = true;
    const SEMAPHORE_SIZE: usize = size_of::<admit::Semaphore>();
    type Permit<'a> = admit::Permit<'a>;

    fn new(capacity: usize) -> Self {
        Self(admit::Semaphore::new(capacity))
    }
    #[inline]
    fn try_acquire(&self, units: usize) -> Option<Self::Permit<'_>> {
        self.0.try_acquire(units).ok()
    }
    #[inline]
    fn acquire(&self, units: usize) -> impl Future<Output = Self::Permit<'_>> + Send + '_ {
        Expect(self.0.acquire(units))
    }
    fn counter(capacity: usize) -> Option<Self> {
        Some(Self(admit::Semaphore::counting(capacity)))
    }
    #[inline]
    fn forget(permit: Self::Permit<'_>) {
        permit.forget();
    }
    #[inline]
    fn add_units(&self, units: usize) {
        self.0.add_units(units);
    }
}

/// `admit::Semaphore` on an `Arc`, owned permits (`acquire_owned`).
#[derive(Debug)]
pub struct AdmitOwned(Arc<admit::Semaphore>);

impl Peer for AdmitOwned {
    const NAME: &'static str = "admit-owned";
    const WEIGHTED: bool = true;
    const PARKS: bool = true;
    const SEMAPHORE_SIZE: usize = size_of::<admit::Semaphore>();
    type Permit<'a> = admit::OwnedPermit;

    fn new(capacity: usize) -> Self {
        Self(Arc::new(admit::Semaphore::new(capacity)))
    }
    #[inline]
    fn try_acquire(&self, units: usize) -> Option<Self::Permit<'_>> {
        Arc::clone(&self.0).try_acquire_owned(units).ok()
    }
    #[inline]
    fn acquire(&self, units: usize) -> impl Future<Output = Self::Permit<'_>> + Send + '_ {
        Expect(Arc::clone(&self.0).acquire_owned(units))
    }
    fn counter(capacity: usize) -> Option<Self> {
        Some(Self(Arc::new(admit::Semaphore::counting(capacity))))
    }
    #[inline]
    fn forget(permit: Self::Permit<'_>) {
        permit.forget();
    }
    #[inline]
    fn add_units(&self, units: usize) {
        self.0.add_units(units);
    }
}

/// `admit::compat::Semaphore`: tokio's API over admit's counter (feature
/// `tokio-compat`), what a crate ported from tokio by its `use` line runs.
#[derive(Debug)]
pub struct AdmitCompat(admit::compat::Semaphore);

impl Peer for AdmitCompat {
    const NAME: &'static str = "admit-compat";
    const WEIGHTED: bool = true;
    const PARKS: bool = true;
    const SEMAPHORE_SIZE: usize = size_of::<admit::compat::Semaphore>();
    type Permit<'a> = admit::compat::SemaphorePermit<'a>;

    fn new(capacity: usize) -> Self {
        Self(admit::compat::Semaphore::new(capacity))
    }
    #[inline]
    fn try_acquire(&self, units: usize) -> Option<Self::Permit<'_>> {
        self.0.try_acquire_many(units_u32(units)).ok()
    }
    #[inline]
    fn acquire(&self, units: usize) -> impl Future<Output = Self::Permit<'_>> + Send + '_ {
        Expect(self.0.acquire_many(units_u32(units)))
    }
    fn counter(capacity: usize) -> Option<Self> {
        Some(Self::new(capacity))
    }
    #[inline]
    fn forget(permit: Self::Permit<'_>) {
        permit.forget();
    }
    #[inline]
    fn add_units(&self, units: usize) {
        self.0.add_permits(units);
    }
}

/// `tokio::sync::Semaphore`, borrowed permits (`acquire_many`).
#[derive(Debug)]
pub struct Tokio(tokio::sync::Semaphore);

impl Peer for Tokio {
    const NAME: &'static str = "tokio";
    const WEIGHTED: bool = true;
    const PARKS: bool = true;
    const SEMAPHORE_SIZE: usize = size_of::<tokio::sync::Semaphore>();
    type Permit<'a> = tokio::sync::SemaphorePermit<'a>;

    fn new(capacity: usize) -> Self {
        Self(tokio::sync::Semaphore::new(capacity))
    }
    #[inline]
    fn try_acquire(&self, units: usize) -> Option<Self::Permit<'_>> {
        self.0.try_acquire_many(units_u32(units)).ok()
    }
    #[inline]
    fn acquire(&self, units: usize) -> impl Future<Output = Self::Permit<'_>> + Send + '_ {
        Expect(self.0.acquire_many(units_u32(units)))
    }
    fn counter(capacity: usize) -> Option<Self> {
        Some(Self::new(capacity))
    }
    #[inline]
    fn forget(permit: Self::Permit<'_>) {
        permit.forget();
    }
    #[inline]
    fn add_units(&self, units: usize) {
        self.0.add_permits(units);
    }
}

/// `tokio::sync::Semaphore` on an `Arc`, owned permits (`acquire_many_owned`);
/// compared with `admit-owned`.
#[derive(Debug)]
pub struct TokioOwned(Arc<tokio::sync::Semaphore>);

impl Peer for TokioOwned {
    const NAME: &'static str = "tokio-owned";
    const BASELINE: &'static str = "admit-owned";
    const WEIGHTED: bool = true;
    const PARKS: bool = true;
    const SEMAPHORE_SIZE: usize = size_of::<tokio::sync::Semaphore>();
    type Permit<'a> = tokio::sync::OwnedSemaphorePermit;

    fn new(capacity: usize) -> Self {
        Self(Arc::new(tokio::sync::Semaphore::new(capacity)))
    }
    #[inline]
    fn try_acquire(&self, units: usize) -> Option<Self::Permit<'_>> {
        Arc::clone(&self.0)
            .try_acquire_many_owned(units_u32(units))
            .ok()
    }
    #[inline]
    fn acquire(&self, units: usize) -> impl Future<Output = Self::Permit<'_>> + Send + '_ {
        Expect(Arc::clone(&self.0).acquire_many_owned(units_u32(units)))
    }
    fn counter(capacity: usize) -> Option<Self> {
        Some(Self::new(capacity))
    }
    #[inline]
    fn forget(permit: Self::Permit<'_>) {
        permit.forget();
    }
    #[inline]
    fn add_units(&self, units: usize) {
        self.0.add_permits(units);
    }
}

/// `async_lock::Semaphore`: one unit per request only, and not FIFO (a woken
/// listener competes with newcomers).
#[derive(Debug)]
pub struct AsyncLock(async_lock::Semaphore);

impl Peer for AsyncLock {
    const NAME: &'static str = "async-lock";
    const WEIGHTED: bool = false;
    const PARKS: bool = true;
    const SEMAPHORE_SIZE: usize = size_of::<async_lock::Semaphore>();
    type Permit<'a> = async_lock::SemaphoreGuard<'a>;

    fn new(capacity: usize) -> Self {
        Self(async_lock::Semaphore::new(capacity))
    }
    #[inline]
    fn try_acquire(&self, units: usize) -> Option<Self::Permit<'_>> {
        assert_eq!(units, 1, "async-lock has no weighted acquire");
        self.0.try_acquire()
    }
    #[inline]
    fn acquire(&self, units: usize) -> impl Future<Output = Self::Permit<'_>> + Send + '_ {
        assert_eq!(units, 1, "async-lock has no weighted acquire");
        self.0.acquire()
    }
    fn counter(capacity: usize) -> Option<Self> {
        Some(Self::new(capacity))
    }
    #[inline]
    fn forget(permit: Self::Permit<'_>) {
        permit.forget();
    }
    #[inline]
    fn add_units(&self, units: usize) {
        self.0.add_permits(units);
    }
}

/// `futures_intrusive::sync::Semaphore`, created fair (`is_fair = true`): a
/// `parking_lot` mutex around the count and an intrusive wait list.
#[derive(Debug)]
pub struct FuturesIntrusive(futures_intrusive::sync::Semaphore);

impl Peer for FuturesIntrusive {
    const NAME: &'static str = "futures-intrusive";
    const WEIGHTED: bool = true;
    const PARKS: bool = true;
    const SEMAPHORE_SIZE: usize = size_of::<futures_intrusive::sync::Semaphore>();
    type Permit<'a> = futures_intrusive::sync::SemaphoreReleaser<'a>;

    fn new(capacity: usize) -> Self {
        Self(futures_intrusive::sync::Semaphore::new(true, capacity))
    }
    #[inline]
    fn try_acquire(&self, units: usize) -> Option<Self::Permit<'_>> {
        self.0.try_acquire(units)
    }
    #[inline]
    fn acquire(&self, units: usize) -> impl Future<Output = Self::Permit<'_>> + Send + '_ {
        self.0.acquire(units)
    }
    fn counter(capacity: usize) -> Option<Self> {
        Some(Self::new(capacity))
    }
    #[inline]
    fn forget(mut permit: Self::Permit<'_>) {
        permit.disarm();
    }
    #[inline]
    fn add_units(&self, units: usize) {
        self.0.release(units);
    }
}

/// `maitake_sync::Semaphore`: an atomic count plus a spinlock-guarded FIFO.
#[derive(Debug)]
pub struct Maitake(maitake_sync::Semaphore);

impl Peer for Maitake {
    const NAME: &'static str = "maitake-sync";
    const WEIGHTED: bool = true;
    const PARKS: bool = true;
    const SEMAPHORE_SIZE: usize = size_of::<maitake_sync::Semaphore>();
    type Permit<'a> = maitake_sync::semaphore::Permit<'a>;

    fn new(capacity: usize) -> Self {
        Self(maitake_sync::Semaphore::new(capacity))
    }
    #[inline]
    fn try_acquire(&self, units: usize) -> Option<Self::Permit<'_>> {
        self.0.try_acquire(units).ok()
    }
    #[inline]
    fn acquire(&self, units: usize) -> impl Future<Output = Self::Permit<'_>> + Send + '_ {
        Expect(self.0.acquire(units))
    }
    fn counter(capacity: usize) -> Option<Self> {
        Some(Self::new(capacity))
    }
    #[inline]
    fn forget(permit: Self::Permit<'_>) {
        permit.forget();
    }
    #[inline]
    fn add_units(&self, units: usize) {
        self.0.add_permits(units);
    }
}

/// `async_weighted_semaphore::Semaphore`: a lock-free FIFO whose cancel may park
/// the cancelling thread.
#[derive(Debug)]
pub struct AsyncWeighted(async_weighted_semaphore::Semaphore);

impl Peer for AsyncWeighted {
    const NAME: &'static str = "async-weighted";
    const WEIGHTED: bool = true;
    const PARKS: bool = true;
    const SEMAPHORE_SIZE: usize = size_of::<async_weighted_semaphore::Semaphore>();
    type Permit<'a> = async_weighted_semaphore::SemaphoreGuard<'a>;

    fn new(capacity: usize) -> Self {
        Self(async_weighted_semaphore::Semaphore::new(capacity))
    }
    #[inline]
    fn try_acquire(&self, units: usize) -> Option<Self::Permit<'_>> {
        self.0.try_acquire(units).ok()
    }
    #[inline]
    fn acquire(&self, units: usize) -> impl Future<Output = Self::Permit<'_>> + Send + '_ {
        Expect(self.0.acquire(units))
    }
    fn counter(capacity: usize) -> Option<Self> {
        Some(Self::new(capacity))
    }
    #[inline]
    fn forget(permit: Self::Permit<'_>) {
        permit.forget();
    }
    #[inline]
    fn add_units(&self, units: usize) {
        self.0.release(units);
    }
}

/// The floor: a bare `AtomicUsize`, one `fetch_sub` to take and one `fetch_add`
/// to give back. No queue, no fairness; its `acquire` retries after a yield.
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
    const WEIGHTED: bool = true;
    const PARKS: bool = false;
    const SEMAPHORE_SIZE: usize = size_of::<AtomicUsize>();
    type Permit<'a> = FloorPermit<'a>;

    fn new(capacity: usize) -> Self {
        // Room below zero is not needed: `take` undoes an overdraft at once, and
        // capacities here are tiny next to `usize::MAX / 2`.
        Self(AtomicUsize::new(capacity))
    }
    #[inline]
    fn try_acquire(&self, units: usize) -> Option<Self::Permit<'_>> {
        self.take(units)
    }
    #[inline]
    fn acquire(&self, units: usize) -> impl Future<Output = Self::Permit<'_>> + Send + '_ {
        FloorAcquire { floor: self, units }
    }
    fn counter(capacity: usize) -> Option<Self> {
        Some(Self::new(capacity))
    }
    #[inline]
    fn forget(permit: Self::Permit<'_>) {
        // The units stay taken: no `fetch_add`.
        std::mem::forget(permit);
    }
    #[inline]
    fn add_units(&self, units: usize) {
        self.0.fetch_add(units, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::pin::pin;
    use std::task::Waker;

    fn check<P: Peer>() {
        let sem = P::new(2);
        let one = sem.try_acquire(1).expect("free");
        let two = sem.try_acquire(1).expect("free");
        assert!(sem.try_acquire(1).is_none(), "{}: over capacity", P::NAME);
        drop((one, two));
        if P::WEIGHTED {
            let both = sem.try_acquire(2).expect("free");
            assert!(sem.try_acquire(1).is_none());
            drop(both);
        }
        let mut cx = Context::from_waker(Waker::noop());
        let permit = match pin!(sem.acquire(1)).poll(&mut cx) {
            Poll::Ready(p) => p,
            Poll::Pending => panic!("{}: ready acquire parked", P::NAME),
        };
        drop(permit);
        assert!(sem.try_acquire(1).is_some(), "{}: units lost", P::NAME);
        check_counter::<P>();
    }

    /// S13's counter: a forgotten permit's unit leaves it, an added one is
    /// free at once. Every peer here has one.
    fn check_counter<P: Peer>() {
        let sem = P::counter(2).unwrap_or_else(|| panic!("{}: no counter", P::NAME));
        P::forget(sem.try_acquire(1).expect("free"));
        let last = sem.try_acquire(1).expect("free");
        assert!(
            sem.try_acquire(1).is_none(),
            "{}: a forgotten unit came back",
            P::NAME
        );
        drop(last);
        sem.add_units(1);
        let one = sem.try_acquire(1).expect("free");
        let two = sem.try_acquire(1).expect("an added unit");
        assert!(sem.try_acquire(1).is_none(), "{}: over capacity", P::NAME);
        drop((one, two));
    }

    #[test]
    fn adapters_take_and_return_units() {
        check::<Admit>();
        check::<AdmitOwned>();
        check::<AdmitCompat>();
        check::<Tokio>();
        check::<TokioOwned>();
        check::<AsyncLock>();
        check::<FuturesIntrusive>();
        check::<Maitake>();
        check::<AsyncWeighted>();
        check::<Floor>();
    }
}
