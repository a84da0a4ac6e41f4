//! A reference model of the semaphore contract and a deterministic replay of
//! operation sequences against the real [`admit::Semaphore`], through its public API
//! only.
//!
//! The cargo-fuzz target `semaphore_ops` replays fuzzer bytes with
//! [`replay_bytes`], and `tests/corpus.rs` the committed corpus, sweeps and named
//! cases. The gate's model is in [`crate::gate`].
//!
//! # The model
//!
//! The capacity in force, a counter of free units, the *debt* (units a shrink
//! still has to retire as permits return them), a `closed` flag, a plain FIFO
//! `VecDeque` of parked waiters and the set of parked drains. Every event that
//! can change what is served runs the model's serving pass, as the real server
//! does within the call that started it (the replay is single-threaded):
//!
//! 1. the debt is paid from the free units first (`min(available, debt)` retire);
//! 2. every parked waiter for more than the capacity in force, wherever it waits,
//!    is resolved `ExceedsCapacity` and woken once;
//! 3. closed: the parked drains are granted once every unit is back
//!    (`available == capacity` and no debt); open and debt-free: grants from the
//!    head while the head fits, stopping at the first that does not.
//!
//! A release or a grow adds units and serves; a shrink lowers the capacity, adds
//! the difference to the debt and serves; a forget lowers the capacity by the
//! permit's units (held, so the free count is unchanged) and serves; a split or a
//! merge moves units between permits and wakes nobody; a close wakes every parked
//! waiter with `Closed` (the drains wait on). Each waiter of the model is in one
//! phase: *fresh* (never polled), *parked*, *granted*, *closed* or *exceeds*
//! (woken with that outcome, not yet re-polled). The fast path (`try_acquire`, a
//! first poll) refuses with `NoUnits` while anyone is queued, while a debt is
//! owed, or when the units are not free.
//!
//! # What is checked, after every step
//!
//! - `available()` equals the model's counter, `capacity()` its capacity, and
//!   `units held + available + granted-not-yet-polled == capacity + debt`, where
//!   each permit holds exactly the units the model says (after splits, merges);
//!   with no debt, `held + granted <= capacity`; with a debt, nothing is free;
//! - `waiters()` equals the model's queue length plus its parked drains,
//!   `is_closed()` its flag;
//! - every live waiter's waker was called exactly as often as the model resolved
//!   it (0 or 1): no lost wake-up, no needless one, never twice;
//! - every poll returns what the model says: a fresh waiter is granted at once,
//!   parks, or fails (`ExceedsCapacity` against the capacity now / `Closed`); a
//!   parked one stays `Pending`; a granted one is `Ready(Ok)` with a permit of
//!   exactly its units; a closed one `Ready(Err(Closed))`; one resolved by a
//!   shrink `Ready(Err(ExceedsCapacity))` naming its units and the capacity at
//!   that poll; a drain is `Ready` exactly when every unit is back. Since the model
//!   grants strictly from the head of its queue, agreement means grants come in
//!   arrival order;
//! - `try_acquire` agrees with the model (all or nothing, no barging past a
//!   parked waiter or a retirement); `split` returns a permit exactly when asked
//!   for fewer units than the permit holds.
//!
//! At the end every woken waiter is polled, the rest are dropped, every permit is
//! released, and then: all units are back and the debt paid, no waiter is
//! queued, no waker retired earlier (replaced by a re-poll, or of a finished or
//! dropped future) was called after it was retired, and the semaphore holds no
//! waker clone (each counting waker's `Arc` is unique again).
//!
//! The lifecycle states a core most easily gets wrong have plain tests too, in
//! `core/tests/model_findings.rs`.

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use admit::{
    Acquire, AcquireError, AcquireOwned, Drain, OwnedPermit, Permit, Semaphore, TryAcquireError,
};
use arbitrary::{Arbitrary, Unstructured};

use crate::counting_waker::CountingWaker;
use crate::pick;

/// At most this many acquire futures are alive at once (more than one wake batch
/// of the core, so a close or a large release must wake in several batches).
pub const MAX_LIVE_WAITERS: usize = 72;
/// The capacities a case can choose: small ones, and one larger than a wake batch
/// of the core (32), so a single release can wake more than one batch.
pub const CAPACITIES: [usize; 10] = [0, 1, 2, 3, 4, 5, 6, 7, 8, 40];
/// The largest capacity [`Op::SetCapacity`] sets.
pub const MAX_SET_CAPACITY: usize = 40;
/// The largest capacity [`Op::AddUnits`] grows to.
pub const MAX_CAPACITY: usize = 64;

/// One step of a replayed sequence. Indices are taken modulo the number of live
/// waiters (or held permits); a step with nothing to act on does nothing.
///
/// Decoded from bytes by `Op::SELECTOR`: one byte picks the variant, with
/// weights that favour building queues (acquires and polls) over ending them
/// (closes and drains), then the fields are read with `Arbitrary`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// Creates an `acquire` future (`acquire_owned` on the `Arc` if `owned`); it is
    /// not polled yet. Raw units `0..224` map onto `1..=capacity` (the capacity in
    /// force now), `224..=255` to more than the capacity.
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
    /// Drops a live waiter, in whatever phase it is: fresh, parked, or resolved but
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
    /// `set_capacity(c)`: raw `0..128` puts `c` within 3 of the capacity now (a
    /// small grow or shrink, or none), `128..=255` anywhere in
    /// `0..=MAX_SET_CAPACITY`.
    SetCapacity(u8),
    /// `add_units(raw % 5)`, keeping the capacity at most [`MAX_CAPACITY`].
    AddUnits(u8),
    /// `split(n)` on a held permit of `u` units, `n = 1 + raw % (u + 1)`: a split
    /// when `n < u`, `None` when `n` is `u` or `u + 1`.
    Split {
        /// Which permit.
        permit: u8,
        /// Raw units, mapped as above.
        units: u8,
    },
    /// `a.merge(b)`: `b` picked among the other held permits of `a`'s kind
    /// (borrowed or owned); nothing happens if there is none.
    Merge {
        /// The permit that takes the units.
        a: u8,
        /// The permit merged into it.
        b: u8,
    },
    /// `forget()` on a held permit.
    Forget(u8),
    /// `drain()`: closes, and a drain future joins the live waiters (polled by
    /// `Poll` and `RunWoken`, dropped by `Drop`).
    Drain,
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
    /// Waiters granted while parked (woken by a release, cancel, grow or forget).
    pub queued_grants: usize,
    /// Parked waiters woken by a close.
    pub closed_wakes: usize,
    /// `try_acquire` successes.
    pub try_grants: usize,
    /// `try_acquire` refusals for lack of units, a parked waiter or a debt.
    pub try_refusals: usize,
    /// Requests refused at once because they exceed the capacity.
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
    /// `set_capacity` or `add_units` calls that raised the capacity.
    pub grows: usize,
    /// `set_capacity` calls that lowered it.
    pub shrinks: usize,
    /// Shrinks that left units owed (held units to retire as they return).
    pub shrinks_with_debt: usize,
    /// Units retired in all (free at the shrink, or paid back by a release).
    pub retired_units: usize,
    /// Units retired from a release or a grow, after the shrink had returned.
    pub retired_later: usize,
    /// Parked waiters that a grow let in.
    pub grants_by_grow: usize,
    /// Parked waiters woken with `ExceedsCapacity` by a shrink or a forget.
    pub exceeds_after_shrink: usize,
    /// Of those, ones that were not at the head of the queue.
    pub exceeds_behind_head: usize,
    /// Fresh requests refused (or parked) while units were owed.
    pub refused_for_debt: usize,
    /// `split` calls that returned a permit.
    pub splits: usize,
    /// `split` calls that returned `None` (asked for all the units or more).
    pub split_refusals: usize,
    /// `merge` calls.
    pub merges: usize,
    /// `forget` calls.
    pub forgets: usize,
    /// Parked waiters that a forget let in or woke (`ExceedsCapacity`).
    pub forget_wakes: usize,
    /// Drains ready on their first poll.
    pub drains_at_once: usize,
    /// Drains that parked and were granted when the last unit came back.
    pub drains_waited: usize,
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

    /// The bytes that [`decode`](Self::decode) reads back as this case: for
    /// writing corpus seeds by hand.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = vec![self.capacity];
        for op in &self.ops {
            op.encode(&mut out);
        }
        out
    }
}

/// The variants of [`Op`] in selector order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Acquire,
    TryAcquire,
    Poll,
    PollNewWaker,
    Drop,
    Release,
    RunWoken,
    Close,
    SetCapacity,
    AddUnits,
    Split,
    Merge,
    Forget,
    Drain,
}

impl Op {
    /// How a selector byte picks the variant: each kind with the number of the
    /// 256 byte values that select it (in order, from 0).
    const SELECTOR: [(Kind, u16); 14] = [
        (Kind::Acquire, 56),
        (Kind::TryAcquire, 20),
        (Kind::Poll, 48),
        (Kind::PollNewWaker, 12),
        (Kind::Drop, 16),
        (Kind::Release, 28),
        (Kind::RunWoken, 14),
        (Kind::Close, 4),
        (Kind::SetCapacity, 20),
        (Kind::AddUnits, 8),
        (Kind::Split, 10),
        (Kind::Merge, 8),
        (Kind::Forget, 8),
        (Kind::Drain, 4),
    ];

    fn kind(&self) -> Kind {
        match self {
            Op::Acquire { .. } => Kind::Acquire,
            Op::TryAcquire { .. } => Kind::TryAcquire,
            Op::Poll(_) => Kind::Poll,
            Op::PollNewWaker(_) => Kind::PollNewWaker,
            Op::Drop(_) => Kind::Drop,
            Op::Release { .. } => Kind::Release,
            Op::RunWoken => Kind::RunWoken,
            Op::Close => Kind::Close,
            Op::SetCapacity(_) => Kind::SetCapacity,
            Op::AddUnits(_) => Kind::AddUnits,
            Op::Split { .. } => Kind::Split,
            Op::Merge { .. } => Kind::Merge,
            Op::Forget(_) => Kind::Forget,
            Op::Drain => Kind::Drain,
        }
    }

    fn encode(&self, out: &mut Vec<u8>) {
        out.push(crate::selector_of(&Op::SELECTOR, self.kind()));
        match *self {
            Op::Acquire { units, owned } | Op::TryAcquire { units, owned } => {
                out.extend([units, u8::from(owned)]);
            }
            Op::Release { permit, explicit } => out.extend([permit, u8::from(explicit)]),
            Op::Poll(i)
            | Op::PollNewWaker(i)
            | Op::Drop(i)
            | Op::SetCapacity(i)
            | Op::AddUnits(i)
            | Op::Forget(i) => out.push(i),
            Op::Split { permit, units } => out.extend([permit, units]),
            Op::Merge { a, b } => out.extend([a, b]),
            Op::RunWoken | Op::Close | Op::Drain => {}
        }
    }
}

impl<'a> Arbitrary<'a> for Op {
    fn arbitrary(u: &mut Unstructured<'a>) -> arbitrary::Result<Self> {
        Ok(match crate::kind_of(&Op::SELECTOR, u.arbitrary()?) {
            Kind::Acquire => Op::Acquire {
                units: u.arbitrary()?,
                owned: u.arbitrary()?,
            },
            Kind::TryAcquire => Op::TryAcquire {
                units: u.arbitrary()?,
                owned: u.arbitrary()?,
            },
            Kind::Poll => Op::Poll(u.arbitrary()?),
            Kind::PollNewWaker => Op::PollNewWaker(u.arbitrary()?),
            Kind::Drop => Op::Drop(u.arbitrary()?),
            Kind::Release => Op::Release {
                permit: u.arbitrary()?,
                explicit: u.arbitrary()?,
            },
            Kind::RunWoken => Op::RunWoken,
            Kind::Close => Op::Close,
            Kind::SetCapacity => Op::SetCapacity(u.arbitrary()?),
            Kind::AddUnits => Op::AddUnits(u.arbitrary()?),
            Kind::Split => Op::Split {
                permit: u.arbitrary()?,
                units: u.arbitrary()?,
            },
            Kind::Merge => Op::Merge {
                a: u.arbitrary()?,
                b: u.arbitrary()?,
            },
            Kind::Forget => Op::Forget(u.arbitrary()?),
            Kind::Drain => Op::Drain,
        })
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

/// A live acquire future, borrowed or owned, or a drain.
enum Fut<'a> {
    Borrowed(Pin<Box<Acquire<'a>>>),
    Owned(Pin<Box<AcquireOwned>>),
    Drain(Pin<Box<Drain<'a>>>),
}

/// What a future completed with: a permit, or (a drain) nothing.
enum Out<'a> {
    Permit(Held<'a>),
    Drained,
}

impl<'a> Fut<'a> {
    fn poll(&mut self, cx: &mut Context<'_>) -> Poll<Result<Out<'a>, AcquireError>> {
        match self {
            Fut::Borrowed(f) => f
                .as_mut()
                .poll(cx)
                .map(|r| r.map(|p| Out::Permit(Held::Borrowed(p)))),
            Fut::Owned(f) => f
                .as_mut()
                .poll(cx)
                .map(|r| r.map(|p| Out::Permit(Held::Owned(p)))),
            Fut::Drain(f) => f.as_mut().poll(cx).map(|()| Ok(Out::Drained)),
        }
    }
}

/// What the model expects of a poll's output, for failure messages.
fn describe(result: &Poll<Result<Out<'_>, AcquireError>>) -> String {
    match result {
        Poll::Pending => "Pending".into(),
        Poll::Ready(Ok(Out::Permit(p))) => format!("Ready(Ok(permit of {}))", p.units()),
        Poll::Ready(Ok(Out::Drained)) => "Ready(drained)".into(),
        Poll::Ready(Err(e)) => format!("Ready(Err({e:?}))"),
    }
}

/// A held permit, borrowed or owned.
enum Held<'a> {
    Borrowed(Permit<'a>),
    Owned(OwnedPermit),
}

impl<'a> Held<'a> {
    fn units(&self) -> usize {
        match self {
            Held::Borrowed(p) => p.units(),
            Held::Owned(p) => p.units(),
        }
    }

    fn is_owned(&self) -> bool {
        matches!(self, Held::Owned(_))
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

    fn split(&mut self, units: usize) -> Option<Held<'a>> {
        match self {
            Held::Borrowed(p) => p.split(units).map(Held::Borrowed),
            Held::Owned(p) => p.split(units).map(Held::Owned),
        }
    }

    /// Merges `other` into `self`; both of one kind (the caller picks them so).
    fn merge(&mut self, other: Held<'a>) {
        match (self, other) {
            (Held::Borrowed(a), Held::Borrowed(b)) => a.merge(b),
            (Held::Owned(a), Held::Owned(b)) => a.merge(b),
            _ => unreachable!("merge of a borrowed and an owned permit"),
        }
    }

    fn forget(self) {
        match self {
            Held::Borrowed(p) => p.forget(),
            Held::Owned(p) => p.forget(),
        }
    }
}

/// Where a waiter is, according to the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Never polled.
    Fresh,
    /// In the model's queue (or, a drain, among its parked drains).
    Parked,
    /// Granted (units taken for it) and woken; not yet polled again.
    Granted,
    /// Woken by a close; not yet polled again.
    Closed,
    /// Woken with `ExceedsCapacity` by a shrink or forget; not yet polled again.
    Exceeds,
}

struct Waiter<'a> {
    key: u64,
    fut: Fut<'a>,
    /// Units asked for; 0 for a drain.
    units: usize,
    phase: Phase,
    waker: Arc<CountingWaker>,
    /// Calls the model expects on `waker`.
    expected_wakes: usize,
    /// `waker`'s count at the last poll, for [`Op::RunWoken`].
    wakes_at_last_poll: usize,
}

impl Waiter<'_> {
    fn is_drain(&self) -> bool {
        matches!(self.fut, Fut::Drain(_))
    }
}

/// What caused a serving pass, for the stats.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cause {
    Release,
    Grow,
    Shrink,
    Forget,
    Cancel,
    Close,
}

struct Harness<'a> {
    sem: &'a Arc<Semaphore>,
    // The model.
    capacity: usize,
    available: usize,
    /// Units owed to a retirement.
    debt: usize,
    closed: bool,
    queue: VecDeque<u64>,
    /// Parked drains, in no particular order (all are granted together).
    drains: Vec<u64>,
    // The live objects, waiters in creation order.
    waiters: Vec<Waiter<'a>>,
    /// Held permits, each with the units the model says it holds.
    permits: Vec<(Held<'a>, usize)>,
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
            debt: 0,
            closed: false,
            queue: VecDeque::new(),
            drains: Vec::new(),
            waiters: Vec::new(),
            permits: Vec::new(),
            retired: Vec::new(),
            next_key: 0,
            step: 0,
            last_op: None,
            stats: Stats::default(),
        }
    }

    /// Raw units: `224..=255` ask for more than the capacity in force (one time in
    /// eight); the rest map onto `1..=capacity`.
    fn units(&self, raw: u8) -> usize {
        let raw = usize::from(raw);
        if raw >= 224 {
            self.capacity + 1 + raw % 2
        } else {
            1 + raw % self.capacity.max(1)
        }
    }

    /// Raw capacity for [`Op::SetCapacity`].
    fn new_capacity(&self, raw: u8) -> usize {
        let raw = usize::from(raw);
        if raw < 128 {
            (self.capacity + raw % 7)
                .saturating_sub(3)
                .min(MAX_SET_CAPACITY)
        } else {
            (raw - 128) % (MAX_SET_CAPACITY + 1)
        }
    }

    /// Every unit is back: what a drain waits for.
    fn all_back(&self) -> bool {
        self.available == self.capacity && self.debt == 0
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
            Op::SetCapacity(raw) => self.set_capacity(self.new_capacity(raw)),
            Op::AddUnits(raw) => {
                let n = usize::from(raw % 5).min(MAX_CAPACITY.saturating_sub(self.capacity));
                self.add_units(n);
            }
            Op::Split { permit, units } => {
                if let Some(i) = pick(permit, self.permits.len()) {
                    let n = 1 + usize::from(units) % (self.permits[i].1 + 1);
                    self.split(i, n);
                }
            }
            Op::Merge { a, b } => {
                if let Some(a) = pick(a, self.permits.len()) {
                    let owned = self.permits[a].0.is_owned();
                    let others: Vec<usize> = (0..self.permits.len())
                        .filter(|&j| j != a && self.permits[j].0.is_owned() == owned)
                        .collect();
                    if let Some(j) = pick(b, others.len()) {
                        self.merge(a, others[j]);
                    }
                }
            }
            Op::Forget(i) => {
                if let Some(i) = pick(i, self.permits.len()) {
                    self.forget(i);
                }
            }
            Op::Drain => self.drain_op(),
        }
        self.check();
    }

    fn push_waiter(&mut self, fut: Fut<'a>, units: usize) {
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
        self.push_waiter(fut, units);
    }

    /// Whether the fast path takes `units` (not oversize, not closed).
    fn fast_path_fits(&self, units: usize) -> bool {
        self.queue.is_empty() && self.debt == 0 && self.available >= units
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
        let fits = self.fast_path_fits(units);
        match got {
            Err(TryAcquireError::ExceedsCapacity(e)) if oversize => {
                self.expect(e.requested == units && e.capacity == self.capacity, || {
                    format!("ExceedsCapacity carries {e:?}")
                });
                self.stats.oversize += 1;
            }
            // The contract does not order the two refusals when both apply.
            Err(TryAcquireError::Closed) if self.closed => {}
            Err(TryAcquireError::NoUnits) if !oversize && !self.closed && !fits => {
                self.stats.try_refusals += 1;
                if self.debt > 0 {
                    self.stats.refused_for_debt += 1;
                }
            }
            Ok(permit) if !oversize && !self.closed && fits => {
                self.available -= units;
                self.stats.try_grants += 1;
                self.take_permit(permit, units);
            }
            other => self.fail(&format!(
                "try_acquire({units}) returned {:?}; {}",
                other.map(|p| p.units()),
                self.model_state()
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
        self.permits.push((permit, units));
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
        let (units, phase, key, drain) = (w.units, w.phase, w.key, w.is_drain());
        if drain {
            return self.polled_drain(i, key, phase, result);
        }
        let oversize = units > self.capacity;
        let fits = self.fast_path_fits(units);
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
            (Phase::Fresh, Poll::Pending) if !oversize && !self.closed && !fits => {
                if self.debt > 0 {
                    self.stats.refused_for_debt += 1;
                }
                self.waiters[i].phase = Phase::Parked;
                self.queue.push_back(key);
                self.stats.max_parked = self.stats.max_parked.max(self.queue.len());
            }
            (Phase::Fresh, Poll::Ready(Ok(Out::Permit(permit))))
                if !oversize && !self.closed && fits =>
            {
                self.available -= units;
                self.stats.immediate_grants += 1;
                self.take_permit(permit, units);
                self.finish(i);
            }
            (Phase::Parked, Poll::Pending) => {}
            (Phase::Granted, Poll::Ready(Ok(Out::Permit(permit)))) => {
                self.take_permit(permit, units);
                self.finish(i);
            }
            (Phase::Closed, Poll::Ready(Err(AcquireError::Closed))) => self.finish(i),
            (Phase::Exceeds, Poll::Ready(Err(AcquireError::ExceedsCapacity(e))))
                if e.requested == units && e.capacity == self.capacity =>
            {
                self.finish(i);
            }
            (phase, other) => self.fail(&format!(
                "waiter #{key} ({units} units, model phase {phase:?}) polled: {}; {}",
                describe(&other),
                self.model_state()
            )),
        }
    }

    fn polled_drain(
        &mut self,
        i: usize,
        key: u64,
        phase: Phase,
        result: Poll<Result<Out<'a>, AcquireError>>,
    ) {
        match (phase, result) {
            (Phase::Fresh, Poll::Ready(Ok(Out::Drained))) if self.all_back() => {
                self.stats.drains_at_once += 1;
                self.finish(i);
            }
            (Phase::Fresh, Poll::Pending) if !self.all_back() => {
                self.waiters[i].phase = Phase::Parked;
                self.drains.push(key);
            }
            (Phase::Parked, Poll::Pending) => {}
            (Phase::Granted, Poll::Ready(Ok(Out::Drained))) => {
                self.stats.drains_waited += 1;
                self.finish(i);
            }
            (phase, other) => self.fail(&format!(
                "drain #{key} (model phase {phase:?}) polled: {}; {}",
                describe(&other),
                self.model_state()
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
        let drain = w.is_drain();
        drop(w.fut); // the real cancel
        match w.phase {
            Phase::Fresh => self.stats.dropped_fresh += 1,
            Phase::Parked if drain => {
                let at = self
                    .drains
                    .iter()
                    .position(|&k| k == w.key)
                    .expect("model: parked drain not listed");
                self.drains.swap_remove(at);
            }
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
                self.serve(Cause::Cancel);
            }
            Phase::Granted if drain => {}
            Phase::Granted => {
                self.stats.dropped_granted += 1;
                self.give_back(w.units, Cause::Release);
            }
            Phase::Closed | Phase::Exceeds => {}
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

    /// Units come back (a release, or a grow's new units) and are served.
    fn give_back(&mut self, units: usize, cause: Cause) {
        self.available += units;
        self.serve(cause);
    }

    fn release(&mut self, i: usize, explicit: bool) {
        let (permit, units) = self.permits.remove(i);
        permit.release(explicit);
        self.give_back(units, Cause::Release);
    }

    fn close(&mut self) {
        self.sem.close();
        self.close_model();
    }

    fn close_model(&mut self) {
        self.closed = true;
        while let Some(key) = self.queue.pop_front() {
            let w = self.waiter_mut(key);
            w.phase = Phase::Closed;
            w.expected_wakes += 1;
            self.stats.closed_wakes += 1;
        }
        self.serve(Cause::Close);
    }

    fn drain_op(&mut self) {
        if self.waiters.len() >= MAX_LIVE_WAITERS {
            return;
        }
        let sem: &'a Arc<Semaphore> = self.sem;
        let fut = Fut::Drain(Box::pin(sem.drain()));
        self.close_model();
        self.push_waiter(fut, 0);
    }

    fn set_capacity(&mut self, to: usize) {
        let from = self.capacity;
        let previous = self.sem.set_capacity(to);
        self.expect(previous == from, || {
            format!("set_capacity returned {previous}, the model's capacity is {from}")
        });
        if to > from {
            self.stats.grows += 1;
            self.capacity = to;
            self.give_back(to - from, Cause::Grow);
        } else if to < from {
            self.stats.shrinks += 1;
            self.capacity = to;
            self.debt += from - to;
            self.serve(Cause::Shrink);
            if self.debt > 0 {
                self.stats.shrinks_with_debt += 1;
            }
        }
    }

    fn add_units(&mut self, n: usize) {
        self.sem.add_units(n);
        if n > 0 {
            self.stats.grows += 1;
        }
        self.capacity += n;
        self.give_back(n, Cause::Grow);
    }

    fn split(&mut self, i: usize, n: usize) {
        let (permit, units) = &mut self.permits[i];
        let units = *units;
        let split = permit.split(n);
        match split {
            Some(part) if n < units => {
                self.permits[i].1 -= n;
                self.stats.splits += 1;
                self.take_permit(part, n);
            }
            None if n >= units => self.stats.split_refusals += 1,
            other => self.fail(&format!(
                "split({n}) of a permit of {units} returned {:?}",
                other.map(|p| p.units())
            )),
        }
    }

    fn merge(&mut self, a: usize, b: usize) {
        let (other, units) = self.permits.remove(b);
        let a = if b < a { a - 1 } else { a };
        self.permits[a].0.merge(other);
        self.permits[a].1 += units;
        self.stats.merges += 1;
    }

    fn forget(&mut self, i: usize) {
        let units = self.permits[i].1;
        let (permit, _) = self.permits.remove(i);
        permit.forget();
        self.stats.forgets += 1;
        // The capacity shrinks by the units as far as it goes; units held above it
        // were owed to a retirement and settle that much of the debt.
        let cut = units.min(self.capacity);
        self.capacity -= cut;
        let owed = units - cut;
        self.expect(owed <= self.debt, || {
            format!(
                "forgot {owed} units above the capacity, but only {} were owed",
                self.debt
            )
        });
        self.debt -= owed;
        self.serve(Cause::Forget);
    }

    /// The model's serving pass: pay the debt from the free units, fail parked
    /// requests above the capacity, then (open, no debt) grant from the head while
    /// the head fits, or (closed, every unit back) grant the drains.
    fn serve(&mut self, cause: Cause) {
        let take = self.available.min(self.debt);
        self.available -= take;
        self.debt -= take;
        self.stats.retired_units += take;
        if cause != Cause::Shrink {
            self.stats.retired_later += take;
        }

        let capacity = self.capacity;
        let mut at = 0;
        while at < self.queue.len() {
            let key = self.queue[at];
            let w = self.waiter_mut(key);
            if w.units > capacity {
                w.phase = Phase::Exceeds;
                w.expected_wakes += 1;
                self.queue.remove(at);
                self.stats.exceeds_after_shrink += 1;
                if at > 0 {
                    self.stats.exceeds_behind_head += 1;
                }
                if cause == Cause::Forget {
                    self.stats.forget_wakes += 1;
                }
            } else {
                at += 1;
            }
        }

        if self.closed {
            assert!(self.queue.is_empty(), "model: queued after a close");
            if self.all_back() {
                for key in core::mem::take(&mut self.drains) {
                    let w = self.waiter_mut(key);
                    w.phase = Phase::Granted;
                    w.expected_wakes += 1;
                }
            }
            return;
        }
        if self.debt > 0 {
            return;
        }
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
            match cause {
                Cause::Grow => self.stats.grants_by_grow += 1,
                Cause::Forget => self.stats.forget_wakes += 1,
                _ => {}
            }
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

    fn model_state(&self) -> String {
        format!(
            "model: capacity {}, available {}, debt {}, queued {}, drains {}, closed {}",
            self.capacity,
            self.available,
            self.debt,
            self.queue.len(),
            self.drains.len(),
            self.closed
        )
    }

    /// The invariants that must hold between any two steps.
    fn check(&self) {
        let available = self.sem.available();
        self.expect(available == self.available, || {
            format!("available() is {available}, {}", self.model_state())
        });
        let capacity = self.sem.capacity();
        self.expect(capacity == self.capacity, || {
            format!("capacity() is {capacity}, {}", self.model_state())
        });
        for (permit, units) in &self.permits {
            self.expect(permit.units() == *units, || {
                format!(
                    "a permit holds {} units, the model says {units}",
                    permit.units()
                )
            });
        }
        let held: usize = self.permits.iter().map(|(_, units)| units).sum();
        let granted: usize = self
            .waiters
            .iter()
            .filter(|w| w.phase == Phase::Granted)
            .map(|w| w.units)
            .sum();
        self.expect(
            held + available + granted == self.capacity + self.debt,
            || {
                format!(
                    "held {held} + available {available} + granted {granted} != capacity \
                     {} + debt {}",
                    self.capacity, self.debt
                )
            },
        );
        self.expect(self.debt == 0 || available == 0, || {
            format!("{available} units free while {} are owed", self.debt)
        });
        self.expect(self.debt > 0 || held + granted <= self.capacity, || {
            format!("{held} units held and {granted} granted over the capacity")
        });
        let waiters = self.sem.waiters();
        self.expect(waiters == self.queue.len() + self.drains.len(), || {
            format!("waiters() is {waiters}, {}", self.model_state())
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
        self.expect(self.debt == 0, || "units still owed after the drain".into());
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
