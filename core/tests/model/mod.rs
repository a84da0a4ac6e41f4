//! A reference model of the semaphore contract and a deterministic replay of
//! operation sequences against the real [`admit::Semaphore`], through its public API
//! only.
//!
//! Shared test support: `tests/fuzz_corpus.rs` replays the committed corpus and a
//! random sweep with it on stable, and the cargo-fuzz targets
//! `fuzz/fuzz_targets/{semaphore_ops,gate_ops}.rs` include this file by path. No
//! `#[test]`s live here. The gate's model is in [`gate`].
//!
//! # The model
//!
//! A counter of free units, a `closed` flag and a plain FIFO `VecDeque` of parked
//! waiters. A release (or a parked waiter leaving, or a granted one dropped)
//! grants from the head while the head fits; a close empties the queue, every
//! parked waiter getting `Closed`. Each waiter of the model is in one phase:
//! *fresh* (never polled), *parked*, *granted* (woken, not yet re-polled) or
//! *closed* (woken, not yet re-polled).
//!
//! # What is checked, after every step
//!
//! - `available()` equals the model's counter, and
//!   `units held + available + granted-not-yet-polled == capacity`, with
//!   `held <= capacity`;
//! - `waiters()` equals the model's queue length, `is_closed()` its flag;
//! - every live waiter's waker was called exactly as often as the model granted or
//!   closed it (0 or 1): no lost wake-up, no needless one, never twice;
//! - every poll returns what the model says: a fresh waiter is granted at once,
//!   parks, or fails (`ExceedsCapacity` / `Closed`); a parked one stays `Pending`; a
//!   granted one is `Ready(Ok)` with a permit of exactly its units; a closed one is
//!   `Ready(Err(Closed))`. Since the model grants strictly from the head of its
//!   queue, agreement means grants come in arrival order;
//! - `try_acquire` agrees with the model (all or nothing, no barging past a
//!   parked waiter).
//!
//! At the end every woken waiter is polled, the rest are dropped, every permit is
//! released, and then: all units are back, no waiter is queued, no waker retired
//! earlier (replaced by a re-poll, or of a finished or dropped future) was called
//! after it was retired, and the semaphore holds no waker clone (each counting
//! waker's `Arc` is unique again).

// Shared by the corpus test and the fuzz targets; each uses a part.
#![allow(dead_code)]

pub mod gate;

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};

use admit::{Acquire, AcquireError, AcquireOwned, OwnedPermit, Permit, Semaphore, TryAcquireError};
use arbitrary::{Arbitrary, Unstructured};

/// At most this many acquire futures are alive at once (more than one wake batch
/// of the core, so a close or a large release must wake in several batches).
pub const MAX_LIVE_WAITERS: usize = 72;
/// The capacities a case can choose: small ones, and one larger than a wake batch
/// of the core (32), so a single release can wake more than one batch.
pub const CAPACITIES: [usize; 10] = [0, 1, 2, 3, 4, 5, 6, 7, 8, 40];

/// One step of a replayed sequence. Indices are taken modulo the number of live
/// waiters (or held permits); a step with nothing to act on does nothing.
#[derive(Arbitrary, Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// Creates an `acquire` future (`acquire_owned` on the `Arc` if `owned`); it is
    /// not polled yet. Raw units `0..224` map onto `1..=capacity`, `224..=255` to
    /// more than the capacity.
    Acquire {
        /// Raw units, mapped as above.
        units: u8,
        /// Use `acquire_owned`.
        owned: bool,
    },
    /// `try_acquire` (`try_acquire_owned` if `owned`); units mapped as for `Acquire`.
    TryAcquire {
        /// Raw units, mapped as for `Acquire`.
        units: u8,
        /// Use `try_acquire_owned`.
        owned: bool,
    },
    /// Polls a live waiter with its current waker.
    Poll(u8),
    /// Polls a live waiter with a fresh waker; the old one must never be called again.
    PollNewWaker(u8),
    /// Drops a live waiter, in whatever phase it is: fresh, parked, or granted but
    /// not yet polled again.
    Drop(u8),
    /// Releases a held permit, by `release()` if `explicit`, else by dropping it.
    Release {
        /// Which permit.
        permit: u8,
        /// Call `release()` rather than drop.
        explicit: bool,
    },
    /// Polls every waiter whose waker was called since its last poll, as an
    /// executor would.
    RunWoken,
    /// `close()`.
    Close,
}

/// A whole replay input: the capacity, then the operations.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Case {
    /// Raw capacity; the semaphore gets `CAPACITIES[capacity % 10]`.
    pub capacity: u8,
    /// The operations, in order.
    pub ops: Vec<Op>,
}

/// What a replay did, so a sweep can show it reached the interesting states.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Stats {
    /// Operations applied (including the final drain).
    pub ops: usize,
    /// Waiters granted on their first poll.
    pub immediate_grants: usize,
    /// Waiters granted while parked (woken by a release, cancel or close).
    pub queued_grants: usize,
    /// Parked waiters woken by a close.
    pub closed_wakes: usize,
    /// `try_acquire` successes.
    pub try_grants: usize,
    /// `try_acquire` refusals for lack of units or a parked waiter.
    pub try_refusals: usize,
    /// Requests refused because they exceed the capacity.
    pub oversize: usize,
    /// Waiters dropped before their first poll.
    pub dropped_fresh: usize,
    /// Waiters dropped while parked.
    pub dropped_parked: usize,
    /// Parked waiters dropped at the head of the queue with others behind them.
    pub dropped_head_with_followers: usize,
    /// Waiters dropped after a grant they were not polled to see.
    pub dropped_granted: usize,
    /// Waiters re-polled with a new waker while parked.
    pub waker_replacements: usize,
    /// The largest queue length seen.
    pub max_parked: usize,
}

impl Case {
    /// Decodes fuzzer bytes: the first byte is the capacity, then [`Op`]s are read
    /// with `Arbitrary` until the bytes run out. (Not `Vec::arbitrary_take_rest`,
    /// whose continuation flags make a random input only a couple of ops long.)
    /// `None` for an empty input.
    pub fn decode(data: &[u8]) -> Option<Case> {
        let (&capacity, rest) = data.split_first()?;
        let mut u = Unstructured::new(rest);
        let mut ops = Vec::new();
        while !u.is_empty() {
            ops.push(Op::arbitrary(&mut u).ok()?);
        }
        Some(Case { capacity, ops })
    }
}

/// Decodes `data` as a [`Case`] and replays it; `None` if it does not decode. The
/// fuzz target and the corpus test both come through here, so a corpus file means
/// the same to both.
pub fn replay_bytes(data: &[u8]) -> Option<Stats> {
    Some(replay_case(&Case::decode(data)?))
}

/// Replays a decoded [`Case`].
pub fn replay_case(case: &Case) -> Stats {
    replay(case.capacity, &case.ops)
}

/// Runs `ops` against a fresh semaphore of capacity `CAPACITIES[capacity % 10]`
/// and the model, checking the invariants after every step (see the module docs),
/// then drains everything and checks that nothing was lost.
///
/// # Panics
///
/// On the first disagreement between the semaphore and the model.
pub fn replay(capacity: u8, ops: &[Op]) -> Stats {
    let capacity = CAPACITIES[usize::from(capacity) % CAPACITIES.len()];
    let sem = Arc::new(Semaphore::new(capacity));
    let mut h = Harness::new(&sem, capacity);
    h.check();
    for &op in ops {
        h.apply(op);
    }
    h.drain();
    h.stats
}

/// A waker that counts its calls.
#[derive(Debug, Default)]
struct CountingWaker {
    wakes: AtomicUsize,
}

impl CountingWaker {
    fn count(&self) -> usize {
        self.wakes.load(Ordering::SeqCst)
    }
}

impl Wake for CountingWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.wakes.fetch_add(1, Ordering::SeqCst);
    }
}

/// A live acquire future, borrowed or owned.
enum Fut<'a> {
    Borrowed(Pin<Box<Acquire<'a>>>),
    Owned(Pin<Box<AcquireOwned>>),
}

impl<'a> Fut<'a> {
    fn poll(&mut self, cx: &mut Context<'_>) -> Poll<Result<Held<'a>, AcquireError>> {
        match self {
            Fut::Borrowed(f) => f.as_mut().poll(cx).map(|r| r.map(Held::Borrowed)),
            Fut::Owned(f) => f.as_mut().poll(cx).map(|r| r.map(Held::Owned)),
        }
    }
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

    fn belongs_to(&self, sem: &Arc<Semaphore>) -> bool {
        match self {
            Held::Borrowed(p) => core::ptr::eq(p.semaphore(), &**sem),
            Held::Owned(p) => Arc::ptr_eq(p.semaphore(), sem),
        }
    }

    fn release(self, explicit: bool) {
        match (self, explicit) {
            (Held::Borrowed(p), true) => p.release(),
            (Held::Owned(p), true) => p.release(),
            (held, false) => drop(held),
        }
    }
}

/// Where a waiter is, according to the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Never polled.
    Fresh,
    /// In the model's queue.
    Parked,
    /// Granted (units taken for it) and woken; not yet polled again.
    Granted,
    /// Woken by a close; not yet polled again.
    Closed,
}

struct Waiter<'a> {
    key: u64,
    fut: Fut<'a>,
    units: usize,
    phase: Phase,
    waker: Arc<CountingWaker>,
    /// Calls the model expects on `waker`.
    expected_wakes: usize,
    /// `waker`'s count at the last poll, for [`Op::RunWoken`].
    wakes_at_last_poll: usize,
}

struct Harness<'a> {
    sem: &'a Arc<Semaphore>,
    capacity: usize,
    // The model.
    available: usize,
    closed: bool,
    queue: VecDeque<u64>,
    // The live objects, waiters in creation order.
    waiters: Vec<Waiter<'a>>,
    permits: Vec<Held<'a>>,
    /// Wakers no longer registered anywhere, with their count when retired.
    retired: Vec<(Arc<CountingWaker>, usize)>,
    next_key: u64,
    step: usize,
    last_op: Option<Op>,
    stats: Stats,
}

impl<'a> Harness<'a> {
    fn new(sem: &'a Arc<Semaphore>, capacity: usize) -> Self {
        Harness {
            sem,
            capacity,
            available: capacity,
            closed: false,
            queue: VecDeque::new(),
            waiters: Vec::new(),
            permits: Vec::new(),
            retired: Vec::new(),
            next_key: 0,
            step: 0,
            last_op: None,
            stats: Stats::default(),
        }
    }

    /// Raw units: `224..=255` ask for more than the capacity (one time in eight);
    /// the rest map onto `1..=capacity`.
    fn units(&self, raw: u8) -> usize {
        let raw = usize::from(raw);
        if raw >= 224 {
            self.capacity + 1 + raw % 2
        } else {
            1 + raw % self.capacity.max(1)
        }
    }

    fn apply(&mut self, op: Op) {
        self.step += 1;
        self.last_op = Some(op);
        self.stats.ops += 1;
        match op {
            Op::Acquire { units, owned } => self.acquire(self.units(units), owned),
            Op::TryAcquire { units, owned } => self.try_acquire(self.units(units), owned),
            Op::Poll(i) => {
                if let Some(i) = pick(i, self.waiters.len()) {
                    self.poll(i, false);
                }
            }
            Op::PollNewWaker(i) => {
                if let Some(i) = pick(i, self.waiters.len()) {
                    self.poll(i, true);
                }
            }
            Op::Drop(i) => {
                if let Some(i) = pick(i, self.waiters.len()) {
                    self.drop_waiter(i);
                }
            }
            Op::Release { permit, explicit } => {
                if let Some(i) = pick(permit, self.permits.len()) {
                    self.release(i, explicit);
                }
            }
            Op::RunWoken => self.run_woken(),
            Op::Close => self.close(),
        }
        self.check();
    }

    fn acquire(&mut self, units: usize, owned: bool) {
        if self.waiters.len() >= MAX_LIVE_WAITERS {
            return;
        }
        let sem: &'a Arc<Semaphore> = self.sem;
        let fut = if owned {
            Fut::Owned(Box::pin(Arc::clone(sem).acquire_owned(units)))
        } else {
            Fut::Borrowed(Box::pin(sem.acquire(units)))
        };
        self.waiters.push(Waiter {
            key: self.next_key,
            fut,
            units,
            phase: Phase::Fresh,
            waker: Arc::new(CountingWaker::default()),
            expected_wakes: 0,
            wakes_at_last_poll: 0,
        });
        self.next_key += 1;
    }

    fn try_acquire(&mut self, units: usize, owned: bool) {
        let got = if owned {
            Arc::clone(self.sem)
                .try_acquire_owned(units)
                .map(Held::Owned)
        } else {
            let sem: &'a Arc<Semaphore> = self.sem;
            sem.try_acquire(units).map(Held::Borrowed)
        };
        let oversize = units > self.capacity;
        match got {
            Err(TryAcquireError::ExceedsCapacity(e)) if oversize => {
                self.expect(e.requested == units && e.capacity == self.capacity, || {
                    format!("ExceedsCapacity carries {e:?}")
                });
                self.stats.oversize += 1;
            }
            // The contract does not order the two refusals when both apply.
            Err(TryAcquireError::Closed) if self.closed => {}
            Err(TryAcquireError::NoUnits)
                if !oversize
                    && !self.closed
                    && (!self.queue.is_empty() || self.available < units) =>
            {
                self.stats.try_refusals += 1;
            }
            Ok(permit)
                if !oversize
                    && !self.closed
                    && self.queue.is_empty()
                    && self.available >= units =>
            {
                self.available -= units;
                self.stats.try_grants += 1;
                self.take_permit(permit, units);
            }
            other => self.fail(&format!(
                "try_acquire({units}) returned {:?}; model: available {}, queued {}, closed {}",
                other.map(|p| p.units()),
                self.available,
                self.queue.len(),
                self.closed
            )),
        }
    }

    fn take_permit(&mut self, permit: Held<'a>, units: usize) {
        self.expect(permit.units() == units, || {
            format!(
                "permit of {} units for a request of {units}",
                permit.units()
            )
        });
        self.expect(permit.belongs_to(self.sem), || {
            "permit names another semaphore".into()
        });
        self.permits.push(permit);
    }

    fn poll(&mut self, i: usize, new_waker: bool) {
        if new_waker {
            let w = &mut self.waiters[i];
            let old = core::mem::replace(&mut w.waker, Arc::new(CountingWaker::default()));
            let (count, expected) = (old.count(), w.expected_wakes);
            w.expected_wakes = 0;
            w.wakes_at_last_poll = 0;
            if w.phase == Phase::Parked {
                self.stats.waker_replacements += 1;
            }
            self.expect(count == expected, || {
                format!("replaced waker was called {count} times, expected {expected}")
            });
            self.retired.push((old, count));
        }
        let w = &mut self.waiters[i];
        let waker = Waker::from(Arc::clone(&w.waker));
        let result = w.fut.poll(&mut Context::from_waker(&waker));
        drop(waker);
        w.wakes_at_last_poll = w.waker.count();
        let (units, phase, key) = (w.units, w.phase, w.key);
        let oversize = units > self.capacity;
        match (phase, result) {
            (Phase::Fresh, Poll::Ready(Err(AcquireError::ExceedsCapacity(e)))) if oversize => {
                self.expect(e.requested == units && e.capacity == self.capacity, || {
                    format!("ExceedsCapacity carries {e:?}")
                });
                self.stats.oversize += 1;
                self.finish(i);
            }
            (Phase::Fresh, Poll::Ready(Err(AcquireError::Closed))) if self.closed => {
                self.finish(i);
            }
            (Phase::Fresh, Poll::Pending)
                if !oversize
                    && !self.closed
                    && (!self.queue.is_empty() || self.available < units) =>
            {
                self.waiters[i].phase = Phase::Parked;
                self.queue.push_back(key);
                self.stats.max_parked = self.stats.max_parked.max(self.queue.len());
            }
            (Phase::Fresh, Poll::Ready(Ok(permit)))
                if !oversize
                    && !self.closed
                    && self.queue.is_empty()
                    && self.available >= units =>
            {
                self.available -= units;
                self.stats.immediate_grants += 1;
                self.take_permit(permit, units);
                self.finish(i);
            }
            (Phase::Parked, Poll::Pending) => {}
            (Phase::Granted, Poll::Ready(Ok(permit))) => {
                self.take_permit(permit, units);
                self.finish(i);
            }
            (Phase::Closed, Poll::Ready(Err(AcquireError::Closed))) => self.finish(i),
            (phase, other) => self.fail(&format!(
                "waiter #{key} ({units} units, model phase {phase:?}) polled: {:?}; \
                 model: available {}, queued {}, closed {}",
                other.map(|r| r.map(|p| p.units())),
                self.available,
                self.queue.len(),
                self.closed
            )),
        }
    }

    /// Removes a waiter whose future completed; its waker is retired.
    fn finish(&mut self, i: usize) {
        let w = self.waiters.remove(i);
        let count = w.waker.count();
        self.expect(count == w.expected_wakes, || {
            format!("finished waiter's waker was called {count} times")
        });
        self.retired.push((w.waker, count));
        drop(w.fut);
    }

    fn drop_waiter(&mut self, i: usize) {
        let w = self.waiters.remove(i);
        drop(w.fut); // the real cancel
        match w.phase {
            Phase::Fresh => self.stats.dropped_fresh += 1,
            Phase::Parked => {
                let at = self
                    .queue
                    .iter()
                    .position(|&k| k == w.key)
                    .expect("model: parked waiter not in queue");
                self.queue.remove(at);
                self.stats.dropped_parked += 1;
                if at == 0 && !self.queue.is_empty() {
                    self.stats.dropped_head_with_followers += 1;
                }
                // Removing the head may let the waiters behind it in.
                self.serve();
            }
            Phase::Granted => {
                self.stats.dropped_granted += 1;
                self.available += w.units;
                self.serve();
            }
            Phase::Closed => {}
        }
        let count = w.waker.count();
        self.expect(count == w.expected_wakes, || {
            format!(
                "dropped waiter's waker was called {count} times, expected {}",
                w.expected_wakes
            )
        });
        self.retired.push((w.waker, count));
    }

    fn release(&mut self, i: usize, explicit: bool) {
        let permit = self.permits.remove(i);
        let units = permit.units();
        permit.release(explicit);
        self.available += units;
        self.serve();
    }

    fn close(&mut self) {
        self.sem.close();
        self.closed = true;
        while let Some(key) = self.queue.pop_front() {
            let w = self.waiter_mut(key);
            w.phase = Phase::Closed;
            w.expected_wakes += 1;
            self.stats.closed_wakes += 1;
        }
    }

    /// The model's hand-off: grant from the head while the head fits.
    fn serve(&mut self) {
        while let Some(&key) = self.queue.front() {
            let units = self.waiter_mut(key).units;
            if units > self.available {
                break;
            }
            self.queue.pop_front();
            self.available -= units;
            let w = self.waiter_mut(key);
            w.phase = Phase::Granted;
            w.expected_wakes += 1;
            self.stats.queued_grants += 1;
        }
    }

    fn run_woken(&mut self) {
        let woken: Vec<u64> = self
            .waiters
            .iter()
            .filter(|w| w.waker.count() > w.wakes_at_last_poll)
            .map(|w| w.key)
            .collect();
        for key in woken {
            let i = self
                .waiters
                .iter()
                .position(|w| w.key == key)
                .expect("woken waiter vanished");
            self.poll(i, false);
        }
    }

    fn waiter_mut(&mut self, key: u64) -> &mut Waiter<'a> {
        self.waiters
            .iter_mut()
            .find(|w| w.key == key)
            .expect("model: queued key has no live waiter")
    }

    /// The invariants that must hold between any two steps.
    fn check(&self) {
        let available = self.sem.available();
        self.expect(available == self.available, || {
            format!("available() is {available}, model says {}", self.available)
        });
        let held: usize = self.permits.iter().map(Held::units).sum();
        let granted: usize = self
            .waiters
            .iter()
            .filter(|w| w.phase == Phase::Granted)
            .map(|w| w.units)
            .sum();
        self.expect(held <= self.capacity, || format!("{held} units held"));
        self.expect(held + available + granted == self.capacity, || {
            format!("held {held} + available {available} + granted {granted} != capacity")
        });
        self.expect(self.sem.capacity() == self.capacity, || "capacity()".into());
        let waiters = self.sem.waiters();
        self.expect(waiters == self.queue.len(), || {
            format!(
                "waiters() is {waiters}, model has {} parked",
                self.queue.len()
            )
        });
        self.expect(self.sem.is_closed() == self.closed, || "is_closed()".into());
        for w in &self.waiters {
            let count = w.waker.count();
            self.expect(count == w.expected_wakes, || {
                format!(
                    "waiter #{} ({} units, model phase {:?}) woken {count} times, expected {}",
                    w.key, w.units, w.phase, w.expected_wakes
                )
            });
        }
    }

    /// Polls every woken waiter, drops the rest, releases every permit, and checks
    /// that everything came back.
    fn drain(&mut self) {
        self.apply(Op::RunWoken);
        while !self.waiters.is_empty() {
            self.apply(Op::Drop(0));
        }
        while !self.permits.is_empty() {
            self.apply(Op::Release {
                permit: 0,
                explicit: false,
            });
        }
        self.expect(self.sem.available() == self.capacity, || {
            "units missing after the drain".into()
        });
        self.expect(self.sem.waiters() == 0, || {
            "waiters left after the drain".into()
        });
        for (waker, count) in &self.retired {
            let now = waker.count();
            self.expect(now == *count, || {
                format!("a retired waker was called after retirement ({count} -> {now})")
            });
            self.expect(Arc::strong_count(waker) == 1, || {
                "the semaphore still holds a clone of a retired waker".into()
            });
        }
        if !self.closed && self.capacity > 0 {
            // Nothing lost: the whole capacity can be taken at once.
            match self.sem.try_acquire(self.capacity) {
                Ok(p) => drop(p),
                Err(e) => self.fail(&format!("try_acquire(capacity) after the drain: {e:?}")),
            }
        }
    }

    fn expect(&self, ok: bool, what: impl FnOnce() -> String) {
        if !ok {
            self.fail(&what());
        }
    }

    fn fail(&self, what: &str) -> ! {
        panic!(
            "model disagrees at step {} ({:?}), capacity {}: {what}",
            self.step, self.last_op, self.capacity
        );
    }
}

fn pick(raw: u8, len: usize) -> Option<usize> {
    (len > 0).then(|| usize::from(raw) % len)
}
