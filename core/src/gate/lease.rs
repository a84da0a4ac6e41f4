//! Leases: a gate's permits held across requests, keyed by session id, each
//! with an idle limit and optionally a maximum age (an upload session that
//! opens with one request and ends with another, or never).
//!
//! # Invariants
//!
//! - A lease is in exactly one state: *idle* (its value and permit in the
//!   table, with a deadline), *checked out* (its permit in the table, its value
//!   in one [`Lease`] guard, no deadline: in flight is not idle), or *ended*
//!   (neither; its id remembered with how it ended until `remember` passes).
//!   Every change of state happens under the table's lock, so an expiry and a
//!   finish that race are ordered there: exactly one ends the lease.
//! - An idle lease's deadline is the soonest of three, and names how it ends
//!   there: its idle limit from when it last became idle (expired), its
//!   maximum age from its insert (aged), the drain's end (drained); on a tie
//!   the drain names it, then the age. A touch or a check-in restarts the
//!   idle clock, never the age, and sets the deadline anew. The table files
//!   each idle lease under its own deadline (idle limit or age); the drain's
//!   end, one for every lease, is applied when a deadline is read
//!   ([`State::due`]), so a drain costs nothing per lease.
//! - Only an idle lease ends by its deadline, and one past it is ended by
//!   whoever looks first: the driver ([`Expire`]) or a request for it.
//!   The driver's lateness never lets a request use an ended lease. A lease
//!   checked out past its age or the drain's end ends when it is checked in
//!   (its deadline is already past), unless its request ends it first.
//! - Every end runs [`end_all`]: the value is dropped, then the observer hears
//!   [`Observer::on_lease_end`], then the permit is dropped (its units return).
//!   The permit is dropped even if the value's drop or the observer panics, and
//!   the panic is resumed afterwards (caught for good only by the driver, which
//!   must go on).
//! - User code (a value's drop, the observer, a waker) never runs under the
//!   lock, except the key's `Hash`, `Eq` and `Clone`, which the maps need.
//! - No pass holds the lock for more than [`BATCH`] leases ended or ids
//!   forgotten: a mass expiry lets go between batches, and while a request is
//!   blocked on the lock it yields its thread (a bounded number of times)
//!   before taking it again, so a request waits for about one batch, not for
//!   the whole pass.
//! - An ended id answers [`LeaseError::Ended`] until its own `remember`
//!   window passes and [`LeaseError::Unknown`] after, whenever the table gets
//!   round to forgetting it; the driver forgets it at that time, and the maps
//!   give memory back once they are half empty ([`State::shrink`]).

use alloc::boxed::Box;
use alloc::collections::BTreeMap;
use alloc::sync::{Arc, Weak};
use alloc::vec::Vec;
use core::borrow::Borrow;
use core::fmt;
use core::future::Future;
use core::hash::Hash;
use core::ops::{Deref, DerefMut};
use core::panic::AssertUnwindSafe;
use core::pin::Pin;
use core::sync::atomic::{AtomicUsize, Ordering};
use core::task::{Context, Poll, Waker};
use core::time::Duration;
use std::collections::HashMap;
use std::panic::{catch_unwind, resume_unwind};
use std::sync::{Mutex, MutexGuard, TryLockError};

use super::handle::Gate;
use super::observer::{LeaseEnd, LeaseEndEvent, LeaseStartEvent, Observer};
use super::permit::GatePermit;
use super::source::Source;
use super::timer::Timer;

/// The most leases a pass ends, or ids it forgets, under one hold of the lock.
const BATCH: usize = 64;

/// The most times a pass yields its thread between two batches while a request
/// is blocked on the lock.
const HAND_OVER_YIELDS: usize = 16;

/// A table of leases on one gate: permits held across requests, keyed by
/// session id, each ended when it has been idle for `idle_limit` (or, with a
/// [`max_age`](Self::max_age), once it is that old and nobody holds it).
///
/// A request that opens a session acquires its units as any other and
/// [`insert`](Self::insert)s the permit with the session's value (its buffers,
/// its file); each later request [`checkout`](Self::checkout)s the lease, works
/// on the value, and drops the guard (the idle clock restarts) or ends the
/// lease with [`Lease::finish`] or [`Lease::cancel`]. A lease left idle past
/// the limit expires with no request arriving: the table's driver, which
/// [`new`](Self::new) runs in the background on the gate's timer, ends it. However
/// a lease ends, its value is dropped *before* its units return, so a new
/// session is never admitted while an old one's buffers still exist. Dropping
/// the last handle to the table ends the leases left as [`LeaseEnd::Drained`].
///
/// Ids are the caller's: mint them unguessable (a UUID), since the id is all a
/// request needs to reach a session. The table hashes, compares and clones
/// them under its lock: keep their `Hash`, `Eq` and `Clone` plain (a `String`,
/// a UUID), never blocking or panicking. A request for a lease that ended
/// within `remember_ended` (by default the idle limit) is told how it ended,
/// apart from an id never seen ([`LeaseError`]).
///
/// No request waits on the table for long: the driver ends a mass of leases
/// due at once in batches of 64, letting go of the table's lock between them,
/// and the table gives back the memory of ids it has forgotten.
///
/// Cloning is cheap and shares the table.
///
/// # Examples
///
/// ```
/// # use admit::{Gate, LeaseEnd, LeaseError, Leases, ThreadTimer};
/// # use std::time::Duration;
/// admit::sources! { enum Route { Upload => "upload" } }
/// let gate = Gate::builder(4).timer(ThreadTimer::new()).build().unwrap();
/// // Its driver runs on a thread of the ThreadTimer's.
/// let uploads = Leases::new(&gate, Duration::from_secs(30));
///
/// // POST: open a session.
/// let permit = gate.try_acquire(1, Route::Upload).unwrap();
/// uploads.insert("3f9c", permit, Vec::<u8>::new()).unwrap();
///
/// // PATCH: append a chunk; the idle clock stops while it runs.
/// uploads.checkout("3f9c").unwrap().extend_from_slice(b"chunk");
///
/// // PUT: finish it. The buffer is freed, then the unit returns.
/// let session = uploads.checkout("3f9c").unwrap();
/// assert_eq!(*session, b"chunk");
/// session.finish();
/// assert_eq!(gate.in_use(), 0);
/// assert_eq!(uploads.checkout("3f9c").unwrap_err(), LeaseError::Ended(LeaseEnd::Finished));
/// ```
pub struct Leases<K: Hash + Eq + Clone, V, S: Source, T: Timer, O: Observer> {
    table: Arc<Table<K, V, S, T, O>>,
}

/// Why a request could not check out a lease.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum LeaseError {
    /// No lease has this id, nor had one recently (an OCI registry answers
    /// `404 BLOB_UPLOAD_UNKNOWN` either way, but only this one is the client's
    /// mistake rather than its slowness).
    Unknown,
    /// The lease ended, this way, within `remember_ended`.
    Ended(LeaseEnd),
    /// Another request has it checked out.
    InUse,
}

impl fmt::Display for LeaseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LeaseError::Unknown => f.write_str("no lease has this id"),
            LeaseError::Ended(how) => write!(f, "the lease ended ({})", how.label()),
            LeaseError::InUse => f.write_str("the lease is checked out by another request"),
        }
    }
}

impl core::error::Error for LeaseError {}

struct Table<K: Hash + Eq + Clone, V, S: Source, T: Timer, O: Observer> {
    gate: Gate<S, T, O>,
    idle_limit: Duration,
    state: Mutex<State<K, V, S>>,
    /// Threads blocked on `state` now ([`Table::lock`]): a pass lets them
    /// have it between batches ([`Table::pass`]).
    blocked: AtomicUsize,
}

/// The table's state, locked.
type Locked<'a, K, V, S> = MutexGuard<'a, State<K, V, S>>;

/// A place on one of the table's time lines: a time, and a sequence number
/// that tells equal times apart.
type When = (Duration, u64);

struct State<K, V, S: Source> {
    /// How long an ended lease's id is remembered.
    remember: Duration,
    /// The maximum age of the leases inserted from now on (`None`: none).
    max_age: Option<Duration>,
    /// Every id the table knows: its live lease, or how it ended. One map, so
    /// that a lease's end changes its entry in place and a mass expiry never
    /// grows a map (a rehash) under the lock.
    entries: HashMap<K, Entry<V, S>>,
    /// How many of `entries` are live.
    live: usize,
    /// The most `entries` held since the map last shrank: what its memory
    /// was sized for.
    entries_peak: usize,
    /// The idle leases by their own deadline (idle limit or age).
    deadlines: BTreeMap<When, K>,
    /// The ended ids by when they are forgotten.
    forget: BTreeMap<When, K>,
    next_seq: u64,
    /// Set by [`Leases::drain`]: every idle lease ends by then, as drained.
    drain_by: Option<Duration>,
    /// The driver's waker, and the time it sleeps until (`None`: none).
    driver: Option<(Waker, Option<Duration>)>,
    /// The wakers of [`LeasesDrain`]s, woken once no lease is live.
    on_empty: Vec<Waker>,
}

/// What the table knows of an id.
enum Entry<V, S: Source> {
    Live(Live<V, S>),
    /// How it ended, and its place in `forget`.
    Ended(LeaseEnd, When),
}

struct Live<V, S: Source> {
    /// `None` while checked out. Declared before the permit: dropped first.
    value: Option<V>,
    permit: GatePermit<S>,
    /// When it has lived its maximum age: its insert plus the table's
    /// `max_age` then (`None`: no maximum age).
    aged_at: Option<Duration>,
    /// While idle: its place in `deadlines`, and how it ends there.
    deadline: Option<(When, LeaseEnd)>,
}

/// A lease to end, taken out of the table under the lock and ended outside it.
struct Ending<V, S: Source> {
    /// Declared before the permit: dropped first, even on a path that drops
    /// the whole `Ending`.
    value: Option<V>,
    permit: GatePermit<S>,
    how: LeaseEnd,
    /// How long past its deadline it ended, when the driver or a request
    /// found it due (zero otherwise).
    late: Duration,
    /// Woken once its units are back: it was the last live lease, and drains
    /// wait for that.
    then_wake: Vec<Waker>,
}

impl<K: Hash + Eq + Clone, V, S: Source, T: Timer, O: Observer> Clone for Leases<K, V, S, T, O> {
    fn clone(&self) -> Self {
        Self {
            table: Arc::clone(&self.table),
        }
    }
}

impl<K, V, S, T, O> Leases<K, V, S, T, O>
where
    K: Hash + Eq + Clone + Send + 'static,
    V: Send + 'static,
    S: Source,
    T: Timer,
    O: Observer,
{
    /// An empty table on `gate` (whose timer it keeps time by, and whose
    /// observer hears each lease's end), whose leases end after `idle_limit`
    /// idle, with its driver spawned on the gate's timer ([`Timer::spawn`]):
    /// Tokio's, smol's and async-std's spawn it on their runtime, a
    /// [`ThreadTimer`](crate::ThreadTimer) on a thread of its own. The driver
    /// ends each idle lease at its deadline with no request arriving, and
    /// stops once every handle to the table is gone.
    ///
    /// # Panics
    ///
    /// If `idle_limit` is zero (every lease would end as it is made), or if
    /// the timer cannot spawn (Tokio's outside a runtime, smol's without its
    /// `spawn` feature, a timer of yours): its leases would never expire.
    /// There, build it with [`with_driver`](Self::with_driver) and run the
    /// driver yourself.
    #[must_use]
    pub fn new(gate: &Gate<S, T, O>, idle_limit: Duration) -> Self {
        let (leases, driver) = Self::with_driver(gate, idle_limit);
        assert!(
            gate.inner.timer.spawn(Box::new(driver)),
            "Leases::new: the gate's timer cannot spawn the table's driver, so its \
             leases would never expire; use Leases::with_driver and run the driver"
        );
        leases
    }

    /// An empty table as [`new`](Self::new) builds it, and its driver for you
    /// to run (on an executor of your own, or in a test): a future that ends
    /// each idle lease at its deadline with no request arriving, and completes
    /// once every handle to the table is gone. Until it runs, leases end only
    /// when a request asks for them. A value whose drop panics while the
    /// driver ends it still ends (its units return, the observer hears it);
    /// the driver goes on.
    ///
    /// # Panics
    ///
    /// If `idle_limit` is zero.
    pub fn with_driver(
        gate: &Gate<S, T, O>,
        idle_limit: Duration,
    ) -> (Self, Expire<K, V, S, T, O>) {
        assert!(
            !idle_limit.is_zero(),
            "Leases::new: the idle limit must be greater than zero"
        );
        let table = Arc::new(Table {
            gate: gate.clone(),
            idle_limit,
            blocked: AtomicUsize::new(0),
            state: Mutex::new(State {
                remember: idle_limit,
                max_age: None,
                entries: HashMap::new(),
                live: 0,
                entries_peak: 0,
                deadlines: BTreeMap::new(),
                forget: BTreeMap::new(),
                next_seq: 0,
                drain_by: None,
                driver: None,
                on_empty: Vec::new(),
            }),
        });
        let driver = Expire {
            table: Arc::downgrade(&table),
            sleep: None,
        };
        (Self { table }, driver)
    }

    /// How long an ended lease's id is remembered, so a request for it is told
    /// how it ended rather than [`LeaseError::Unknown`]; by default the idle
    /// limit. For the leases that end from now on, in every clone of the
    /// table: each id is remembered for the window in force when it ended.
    #[must_use]
    pub fn remember_ended(self, for_: Duration) -> Self {
        self.table.lock().remember = for_;
        self
    }

    /// Gives leases a maximum age (a registry purges uploads by age): a lease
    /// `age` past its [`insert`](Self::insert) ends as [`LeaseEnd::Aged`] as
    /// soon as nobody holds it checked out, however recently it was used. A
    /// touch or a check-in restarts its idle clock, never its age.
    ///
    /// An idle lease ends at the sooner of its idle deadline and its age, with
    /// no request arriving; one checked
    /// out when its age passes ends as it is checked in, unless its request
    /// [`finish`](Lease::finish)es or [`cancel`](Lease::cancel)s it first (the
    /// owner's end is the one heard). By default a lease has no maximum age.
    /// For the leases inserted from now on, in every clone of the table.
    ///
    /// # Panics
    ///
    /// If `age` is zero: every lease would end as it is made.
    #[must_use]
    pub fn max_age(self, age: Duration) -> Self {
        assert!(
            !age.is_zero(),
            "Leases::max_age: the maximum age must be greater than zero"
        );
        self.table.lock().max_age = Some(age);
        self
    }

    /// The idle limit.
    #[must_use]
    pub fn idle_limit(&self) -> Duration {
        self.table.idle_limit
    }

    /// The maximum age of the leases inserted from now on, if they have one
    /// ([`max_age`](Self::max_age)).
    #[must_use]
    pub fn age_limit(&self) -> Option<Duration> {
        self.table.lock().max_age
    }

    /// Starts a lease of `permit` and `value` under `id`, idle from now; its
    /// age counts from now too.
    ///
    /// # Errors
    ///
    /// If a lease under `id` is live: both are handed back, untouched.
    pub fn insert(&self, id: K, permit: GatePermit<S>, value: V) -> Result<(), (GatePermit<S>, V)> {
        let now = self.table.now();
        let mut state = self.table.lock();
        match state.entries.get(&id) {
            Some(Entry::Live(_)) => return Err((permit, value)),
            Some(&Entry::Ended(_, forget_at)) => {
                state.forget.remove(&forget_at);
            }
            None => {}
        }
        let aged_at = state.max_age.map(|age| now.saturating_add(age));
        let start = LeaseStartEvent::new(permit.source().label(), permit.units())
            .with_priority(permit.priority());
        let live = Live {
            value: Some(value),
            permit,
            aged_at,
            deadline: None,
        };
        state.entries.insert(id.clone(), Entry::Live(live));
        state.live += 1;
        state.entries_peak = state.entries_peak.max(state.entries.len());
        let (ending, wake) = self.table.idle_from(&mut state, id, now);
        drop(state);
        wake_driver(wake);
        // Heard before its end, which may follow at once (past a drain's end);
        // the end runs even if the hook panics.
        let told = catch_unwind(AssertUnwindSafe(|| {
            self.table.gate.inner.observer.on_lease_start(&start)
        }));
        end_all(&self.table.gate, ending.into_iter(), Panics::Resume);
        if let Err(panic) = told {
            resume_unwind(panic);
        }
        Ok(())
    }

    /// Checks out the lease under `id` for a request: its value, until the
    /// guard is dropped (the lease is idle again from then) or ends it. While
    /// checked out it never expires.
    ///
    /// # Errors
    ///
    /// [`LeaseError::InUse`] if another request has it; [`LeaseError::Ended`]
    /// if it ended (one idle past its deadline, be it its idle limit, its
    /// maximum age or a drain's end, ends now if the driver has not ended it
    /// yet); [`LeaseError::Unknown`] otherwise.
    pub fn checkout<Q>(&self, id: &Q) -> Result<Lease<K, V, S, T, O>, LeaseError>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let now = self.table.now();
        let (mut state, id) = self.table.find(id, now)?;
        let live = state.live_mut(&id);
        let value = live.value.take().ok_or(LeaseError::InUse)?;
        if let Some((key, _)) = live.deadline.take() {
            state.deadlines.remove(&key);
        }
        drop(state);
        Ok(Lease {
            table: Arc::clone(&self.table),
            id,
            value: Some(value),
        })
    }

    /// Restarts the idle clock of the lease under `id` (a client's keep-alive),
    /// never its age. A lease checked out is in flight: nothing to restart.
    ///
    /// # Errors
    ///
    /// As [`checkout`](Self::checkout), but never [`LeaseError::InUse`].
    pub fn touch<Q>(&self, id: &Q) -> Result<(), LeaseError>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let now = self.table.now();
        let (mut state, id) = self.table.find(id, now)?;
        let live = state.live_mut(&id);
        let Some((key, _)) = live.deadline.take() else {
            return Ok(()); // checked out: in flight
        };
        state.deadlines.remove(&key);
        let (ending, wake) = self.table.idle_from(&mut state, id, now);
        drop(state);
        wake_driver(wake);
        end_all(&self.table.gate, ending.into_iter(), Panics::Resume);
        Ok(())
    }

    /// How long the lease under `id` may stay idle from now before it ends (by
    /// its idle limit, its maximum age or a drain, whichever comes first);
    /// `None` while it is checked out (in flight, its clock stopped).
    ///
    /// # Errors
    ///
    /// As [`touch`](Self::touch).
    pub fn idle_left<Q>(&self, id: &Q) -> Result<Option<Duration>, LeaseError>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let now = self.table.now();
        let (state, id) = self.table.find(id, now)?;
        Ok(state
            .live_ref(&id)
            .deadline
            .map(|own| state.due(own).0.saturating_sub(now)))
    }

    /// Leases live now, idle or checked out.
    #[must_use]
    pub fn len(&self) -> usize {
        self.table.lock().live
    }

    /// Whether no lease is live.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Ends every idle lease by `grace` from now: at the grace's end as
    /// [`LeaseEnd::Drained`], or sooner as [`Expired`](LeaseEnd::Expired) or
    /// [`Aged`](LeaseEnd::Aged) if its own deadline falls within the grace;
    /// a lease that becomes idle later ends by then too (at once, past it). A
    /// lease checked out is in flight: it ends when its request ends or
    /// returns it (the gate's drain waits for its units).
    ///
    /// The returned future completes once no lease is live, or at the grace's
    /// end once it has ended every idle lease itself; await it before the
    /// gate's drain, so that drain sees the idle leases' units back on every
    /// runtime:
    ///
    /// ```
    /// # use admit::{Gate, Leases};
    /// # use std::time::Duration;
    /// # async fn shutdown<S: admit::Source, T: admit::Timer, O: admit::Observer>(
    /// #     gate: Gate<S, T, O>, uploads: Leases<String, Vec<u8>, S, T, O>,
    /// # ) -> Result<(), admit::DrainTimeout<S>> {
    /// let grace = Duration::from_secs(5);
    /// let sessions = uploads.drain(grace); // idle sessions end by the grace's end
    /// let requests = gate.drain(grace); // the gate admits no one from now
    /// sessions.await;
    /// requests.await // a cut only if units are still held
    /// # }
    /// ```
    ///
    /// The drain starts when this is called, whether or not the future is
    /// awaited. Draining again never moves the end later.
    pub fn drain(&self, grace: Duration) -> LeasesDrain<K, V, S, T, O> {
        let now = self.table.now();
        let by = now.saturating_add(grace);
        let mut state = self.table.lock();
        let by = state.drain_by.map_or(by, |earlier| earlier.min(by));
        state.drain_by = Some(by);
        let wake = match &state.driver {
            Some((_, Some(armed))) if *armed <= by => None,
            Some(_) if !state.deadlines.is_empty() => state.driver.take().map(|(waker, _)| waker),
            _ => None,
        };
        drop(state);
        wake_driver(wake);
        if by <= now {
            self.table.pass(now, None);
        }
        LeasesDrain {
            table: Arc::clone(&self.table),
            by,
            sleep: None,
        }
    }
}

impl<K, V, S, T, O> Table<K, V, S, T, O>
where
    K: Hash + Eq + Clone,
    S: Source,
    T: Timer,
    O: Observer,
{
    fn now(&self) -> Duration {
        self.gate.inner.timer.now()
    }

    /// The lock: the state is never left half-changed by a panic (no user code
    /// but the key's runs under it, and a map left mid-change by a key that
    /// panics is what `HashMap` itself allows), so a poisoned lock is taken as
    /// it is.
    fn lock(&self) -> MutexGuard<'_, State<K, V, S>> {
        match self.state.try_lock() {
            Ok(state) => return state,
            Err(TryLockError::Poisoned(poisoned)) => return poisoned.into_inner(),
            Err(TryLockError::WouldBlock) => {}
        }
        self.blocked.fetch_add(1, Ordering::Relaxed);
        let state = self
            .state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        self.blocked.fetch_sub(1, Ordering::Relaxed);
        state
    }

    /// The table locked, and the key of the live lease under `id`. A lease
    /// idle past its deadline is ended first, as the driver would have (the
    /// lock let go for that: user code runs), and the request is told so.
    fn find<Q>(&self, id: &Q, now: Duration) -> Result<(Locked<'_, K, V, S>, K), LeaseError>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let mut state = self.lock();
        let (key, live) = match state.entries.get_key_value(id) {
            Some((key, Entry::Live(live))) => (key, live),
            Some((_, &Entry::Ended(how, (forget_at, _)))) if forget_at > now => {
                return Err(LeaseError::Ended(how))
            }
            _ => return Err(LeaseError::Unknown),
        };
        let key = key.clone();
        match live.deadline.map(|own| state.due(own)) {
            Some((deadline, how)) if deadline <= now => {
                let mut ending = state.end(key, how, now);
                ending.late = now - deadline;
                drop(state);
                end_all(&self.gate, core::iter::once(ending), Panics::Resume);
                Err(LeaseError::Ended(how))
            }
            _ => Ok((state, key)),
        }
    }

    /// Makes the checked-in lease under `id` idle from `now`: its own deadline
    /// is the idle limit away (it ends expired), or its maximum age if that
    /// comes no later (aged); the drain's end overrides both if it comes no
    /// later still (drained); one already past its deadline ends now. Returns
    /// the lease to end, if it must, and the driver's waker if the deadline
    /// is sooner than the time it sleeps until.
    fn idle_from(
        &self,
        state: &mut State<K, V, S>,
        id: K,
        now: Duration,
    ) -> (Option<Ending<V, S>>, Option<Waker>) {
        let mut own = (now.saturating_add(self.idle_limit), LeaseEnd::Expired);
        if let Some(at) = state.live_ref(&id).aged_at {
            if at <= own.0 {
                own = (at, LeaseEnd::Aged);
            }
        }
        let (due, how) = state.due(((own.0, 0), own.1));
        if due <= now {
            return (Some(state.end(id, how, now)), None);
        }
        let key = state.stamp(own.0);
        state.deadlines.insert(key, id.clone());
        state.live_mut(&id).deadline = Some((key, own.1));
        let wake = match &state.driver {
            Some((_, Some(armed))) if *armed <= due => None,
            Some(_) => state.driver.take().map(|(waker, _)| waker),
            None => None,
        };
        (None, wake)
    }

    /// Ends every idle lease due at `now` and forgets every ended id whose
    /// window has passed, [`BATCH`] at a time with the lock let go between
    /// batches. With `driver`, registers it, under the last batch's lock, to
    /// be woken at the next time there is work, and returns that time.
    fn pass(&self, now: Duration, driver: Option<&Waker>) -> Option<Duration> {
        loop {
            let mut state = self.lock();
            let mut more = state.forget_due(now);
            let mut ending = Vec::new();
            while let Some((_, id)) = state.deadlines.first_key_value() {
                if ending.len() == BATCH {
                    more = true;
                    break;
                }
                let id = id.clone();
                let own = state
                    .live_ref(&id)
                    .deadline
                    .expect("an idle lease has a deadline");
                let (due, how) = state.due(own);
                if due > now {
                    break;
                }
                let mut end = state.end(id, how, now);
                end.late = now - due;
                ending.push(end);
            }
            state.shrink();
            let next = if more {
                None
            } else {
                let next = state.next_work();
                if let Some(waker) = driver {
                    state.driver = Some((waker.clone(), next));
                }
                next
            };
            drop(state);
            end_all(&self.gate, ending.into_iter(), Panics::Catch);
            if !more {
                return next;
            }
            // The lock barges: a request woken to take it would lose it to
            // this loop batch after batch. Give it a bounded chance first.
            for _ in 0..HAND_OVER_YIELDS {
                if self.blocked.load(Ordering::Relaxed) == 0 {
                    break;
                }
                std::thread::yield_now();
            }
        }
    }
}

impl<K: Hash + Eq + Clone, V, S: Source> State<K, V, S> {
    /// A place on a time line at `at`, after every place given before.
    fn stamp(&mut self, at: Duration) -> When {
        self.next_seq += 1;
        (at, self.next_seq)
    }

    /// When, and how, an idle lease filed under its own deadline `own` ends:
    /// the drain's end if that comes no later.
    fn due(&self, ((at, _), how): (When, LeaseEnd)) -> (Duration, LeaseEnd) {
        match self.drain_by {
            Some(by) if by <= at => (by, LeaseEnd::Drained),
            _ => (at, how),
        }
    }

    /// The soonest time at which a lease is due or an id is forgotten.
    fn next_work(&self) -> Option<Duration> {
        let deadline = self
            .deadlines
            .first_key_value()
            .map(|(&own, _)| self.due((own, LeaseEnd::Expired)).0);
        let forget = self.forget.first_key_value().map(|(&(at, _), _)| at);
        match (deadline, forget) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// The live lease under `id`.
    fn live_ref(&self, id: &K) -> &Live<V, S> {
        match self.entries.get(id) {
            Some(Entry::Live(live)) => live,
            _ => unreachable!("the lease is live"),
        }
    }

    /// The live lease under `id`.
    fn live_mut(&mut self, id: &K) -> &mut Live<V, S> {
        match self.entries.get_mut(id) {
            Some(Entry::Live(live)) => live,
            _ => unreachable!("the lease is live"),
        }
    }

    /// Takes the lease under `id` out of the table as ended `how` at `now`.
    fn end(&mut self, id: K, how: LeaseEnd, now: Duration) -> Ending<V, S> {
        let forget_at = self.stamp(now.saturating_add(self.remember));
        let entry = self.entries.get_mut(&id).expect("the lease is live");
        let Entry::Live(live) = core::mem::replace(entry, Entry::Ended(how, forget_at)) else {
            unreachable!("the lease is live");
        };
        self.forget.insert(forget_at, id);
        self.live -= 1;
        if let Some((key, _)) = live.deadline {
            self.deadlines.remove(&key);
        }
        let then_wake = if self.live == 0 {
            core::mem::take(&mut self.on_empty)
        } else {
            Vec::new()
        };
        Ending {
            value: live.value,
            permit: live.permit,
            how,
            late: Duration::ZERO,
            then_wake,
        }
    }

    /// Forgets up to [`BATCH`] ended ids whose window has passed; says whether
    /// more are due.
    fn forget_due(&mut self, now: Duration) -> bool {
        for _ in 0..BATCH {
            let Some(entry) = self.forget.first_entry() else {
                return false;
            };
            if entry.key().0 > now {
                return false;
            }
            let id = entry.remove();
            self.entries.remove(&id);
        }
        self.forget
            .first_key_value()
            .is_some_and(|(&(at, _), _)| at <= now)
    }

    /// Gives back the memory of a map of entries less than half full (the
    /// B-trees give theirs back node by node). The map shrinks only after
    /// losing half of what it could hold, so its rehashes cost, in sum, no
    /// more than the entries it once held.
    fn shrink(&mut self) {
        // Not `capacity()`: a removal can leave a tombstone, which takes room
        // that `capacity()` then leaves out, though the memory stays.
        if self.entries_peak > 64 && self.entries.len() * 2 < self.entries_peak {
            self.entries.shrink_to_fit();
            self.entries_peak = self.entries.len();
        }
    }
}

fn wake_driver(waker: Option<Waker>) {
    if let Some(waker) = waker {
        waker.wake();
    }
}

/// What [`end_all`] does with a panic of a value's drop or of the observer.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Panics {
    /// Resumed once every lease has ended: a caller's own call.
    Resume,
    /// Dropped (the panic hook has reported it): the driver, which must go on.
    Catch,
}

/// Ends each lease: its value dropped, the observer told, then its units
/// returned; every lease ends even if a drop or the observer panics.
fn end_all<V, S: Source, T: Timer, O: Observer>(
    gate: &Gate<S, T, O>,
    ending: impl Iterator<Item = Ending<V, S>>,
    panics: Panics,
) {
    let mut first_panic = None;
    for Ending {
        value,
        permit,
        how,
        late,
        then_wake,
    } in ending
    {
        let dropped = catch_unwind(AssertUnwindSafe(move || drop(value)));
        let event = LeaseEndEvent::new(
            permit.source().label(),
            permit.units(),
            permit.held_for(),
            how,
        )
        .with_priority(permit.priority())
        .with_late(late);
        let told = catch_unwind(AssertUnwindSafe(|| {
            gate.inner.observer.on_lease_end(&event)
        }));
        let released = catch_unwind(AssertUnwindSafe(move || drop(permit)));
        let woken = catch_unwind(AssertUnwindSafe(move || {
            then_wake.into_iter().for_each(Waker::wake)
        }));
        for outcome in [dropped, told, released, woken] {
            if let Err(panic) = outcome {
                first_panic.get_or_insert(panic);
            }
        }
    }
    if let (Some(panic), Panics::Resume) = (first_panic, panics) {
        resume_unwind(panic);
    }
}

/// A lease checked out by a request: its value, by [`Deref`]. Dropping the
/// guard returns the lease to the table, idle from then (or ends it, if it
/// outlived its maximum age or a drain's end meanwhile);
/// [`finish`](Self::finish) and [`cancel`](Self::cancel) end it.
///
/// A panic while the guard is held returns the value to the table as it is
/// (as a poisoned lock would hand it on, unmarked): end the lease instead if a
/// half-done change would leave it unusable.
pub struct Lease<K, V, S, T, O>
where
    K: Hash + Eq + Clone,
    S: Source,
    T: Timer,
    O: Observer,
{
    table: Arc<Table<K, V, S, T, O>>,
    id: K,
    /// `Some` until the guard ends or returns the lease.
    value: Option<V>,
}

impl<K, V, S, T, O> Lease<K, V, S, T, O>
where
    K: Hash + Eq + Clone,
    S: Source,
    T: Timer,
    O: Observer,
{
    /// The lease's id.
    pub fn id(&self) -> &K {
        &self.id
    }

    /// Ends the lease as [`LeaseEnd::Finished`]: its value is dropped, then
    /// its units return.
    pub fn finish(mut self) {
        self.end(LeaseEnd::Finished);
    }

    /// Ends the lease as [`LeaseEnd::Cancelled`]: its value is dropped, then
    /// its units return.
    pub fn cancel(mut self) {
        self.end(LeaseEnd::Cancelled);
    }

    fn end(&mut self, how: LeaseEnd) {
        let value = self.value.take();
        let now = self.table.now();
        let mut state = self.table.lock();
        let mut ending = state.end(self.id.clone(), how, now);
        ending.value = value;
        drop(state);
        end_all(&self.table.gate, core::iter::once(ending), Panics::Resume);
    }
}

impl<K, V, S, T, O> Deref for Lease<K, V, S, T, O>
where
    K: Hash + Eq + Clone,
    S: Source,
    T: Timer,
    O: Observer,
{
    type Target = V;

    fn deref(&self) -> &V {
        self.value
            .as_ref()
            .expect("a lease's value is here until it ends")
    }
}

impl<K, V, S, T, O> DerefMut for Lease<K, V, S, T, O>
where
    K: Hash + Eq + Clone,
    S: Source,
    T: Timer,
    O: Observer,
{
    fn deref_mut(&mut self) -> &mut V {
        self.value
            .as_mut()
            .expect("a lease's value is here until it ends")
    }
}

impl<K, V, S, T, O> Drop for Lease<K, V, S, T, O>
where
    K: Hash + Eq + Clone,
    S: Source,
    T: Timer,
    O: Observer,
{
    fn drop(&mut self) {
        let Some(value) = self.value.take() else {
            return;
        };
        let now = self.table.now();
        let mut state = self.table.lock();
        state.live_mut(&self.id).value = Some(value);
        let (ending, wake) = self.table.idle_from(&mut state, self.id.clone(), now);
        drop(state);
        wake_driver(wake);
        // A drop must not panic again while unwinding: caught then.
        let panics = if std::thread::panicking() {
            Panics::Catch
        } else {
            Panics::Resume
        };
        end_all(&self.table.gate, ending.into_iter(), panics);
    }
}

impl<K, V, S, T, O> fmt::Debug for Lease<K, V, S, T, O>
where
    K: Hash + Eq + Clone + fmt::Debug,
    S: Source,
    T: Timer,
    O: Observer,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Lease")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

impl<K: Hash + Eq + Clone, V, S: Source, T: Timer, O: Observer> fmt::Debug
    for Leases<K, V, S, T, O>
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Leases")
            .field("idle_limit", &self.table.idle_limit)
            .finish_non_exhaustive()
    }
}

/// A table's driver ([`Leases::with_driver`]): ends each idle lease at its
/// deadline and forgets each ended id when its window passes, and completes
/// once every handle to the table is gone.
#[must_use = "futures do nothing unless polled: the table's leases would never expire"]
pub struct Expire<K: Hash + Eq + Clone, V, S: Source, T: Timer, O: Observer> {
    table: Weak<Table<K, V, S, T, O>>,
    /// The sleep until the next work, and its time.
    sleep: Option<(Pin<Box<T::Sleep>>, Duration)>,
}

impl<K: Hash + Eq + Clone, V, S: Source, T: Timer, O: Observer> fmt::Debug
    for Expire<K, V, S, T, O>
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Expire")
            .field("sleeping_until", &self.sleep.as_ref().map(|(_, at)| *at))
            .finish_non_exhaustive()
    }
}

impl<K, V, S, T, O> Future for Expire<K, V, S, T, O>
where
    K: Hash + Eq + Clone,
    S: Source,
    T: Timer,
    O: Observer,
{
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        loop {
            let Some(table) = self.table.upgrade() else {
                return Poll::Ready(());
            };
            let Some(next) = table.pass(table.now(), Some(cx.waker())) else {
                self.sleep = None;
                return Poll::Pending;
            };
            if self.sleep.as_ref().is_none_or(|(_, armed)| *armed != next) {
                self.sleep = Some((Box::pin(table.gate.inner.timer.sleep_until(next)), next));
            }
            drop(table);
            let (sleep, _) = self.sleep.as_mut().expect("armed above");
            if sleep.as_mut().poll(cx).is_pending() {
                return Poll::Pending;
            }
        }
    }
}

/// The future of [`Leases::drain`]: complete once no lease is live, or at the
/// drain's end once it has ended every idle lease.
#[must_use = "the drain has started; await this before the gate's drain, so it sees the idle leases' units back"]
pub struct LeasesDrain<K: Hash + Eq + Clone, V, S: Source, T: Timer, O: Observer> {
    table: Arc<Table<K, V, S, T, O>>,
    /// The drain's end.
    by: Duration,
    sleep: Option<Pin<Box<T::Sleep>>>,
}

impl<K: Hash + Eq + Clone, V, S: Source, T: Timer, O: Observer> fmt::Debug
    for LeasesDrain<K, V, S, T, O>
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LeasesDrain")
            .field("by", &self.by)
            .finish_non_exhaustive()
    }
}

impl<K, V, S, T, O> Future for LeasesDrain<K, V, S, T, O>
where
    K: Hash + Eq + Clone,
    S: Source,
    T: Timer,
    O: Observer,
{
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = &mut *self;
        loop {
            let now = this.table.now();
            if now >= this.by {
                // Ends the idle leases itself rather than wait for the
                // driver: the caller's next step may count what is left.
                this.table.pass(now, None);
                return Poll::Ready(());
            }
            {
                let mut state = this.table.lock();
                if state.live == 0 {
                    return Poll::Ready(());
                }
                if !state.on_empty.iter().any(|w| w.will_wake(cx.waker())) {
                    state.on_empty.push(cx.waker().clone());
                }
            }
            let sleep = this
                .sleep
                .get_or_insert_with(|| Box::pin(this.table.gate.inner.timer.sleep_until(this.by)));
            if sleep.as_mut().poll(cx).is_pending() {
                return Poll::Pending;
            }
        }
    }
}

impl<K: Hash + Eq + Clone, V, S: Source, T: Timer, O: Observer> Drop for Table<K, V, S, T, O> {
    fn drop(&mut self) {
        // The driver, asleep with nothing to wait for, must see the table gone.
        let state = self
            .state
            .get_mut()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some((waker, _)) = state.driver.take() {
            waker.wake();
        }
        // The leases left end with the table, as drained: values first, then
        // units (a drop must not unwind: panics caught).
        let now = self.gate.inner.timer.now();
        let ids: Vec<K> = state
            .entries
            .iter()
            .filter(|(_, entry)| matches!(entry, Entry::Live(_)))
            .map(|(id, _)| id.clone())
            .collect();
        let ending: Vec<_> = ids
            .into_iter()
            .map(|id| state.end(id, LeaseEnd::Drained, now))
            .collect();
        end_all(&self.gate, ending.into_iter(), Panics::Catch);
    }
}
