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
//!   idle clock, never the age, and sets the deadline anew.
//! - Only an idle lease ends by its deadline, and one past it is ended by
//!   whoever looks first: the driver ([`Leases::expire`]) or a request for it.
//!   The driver's lateness never lets a request use an ended lease. A lease
//!   checked out past its age or the drain's end ends when it is checked in
//!   (its deadline is already past), unless its request ends it first.
//! - Every end runs [`end`]: the value is dropped, then the observer hears
//!   [`Observer::on_lease_end`], then the permit is dropped (its units return).
//!   The permit is dropped even if the value's drop or the observer panics, and
//!   the panic is resumed afterwards (caught for good only by the driver, which
//!   must go on).
//! - User code (a value's drop, the observer) never runs under the lock.

use alloc::boxed::Box;
use alloc::collections::{BTreeMap, VecDeque};
use alloc::sync::{Arc, Weak};
use alloc::vec::Vec;
use core::borrow::Borrow;
use core::fmt;
use core::hash::Hash;
use core::ops::{Deref, DerefMut};
use core::panic::AssertUnwindSafe;
use core::pin::Pin;
use core::task::{Context, Poll, Waker};
use core::time::Duration;
use std::collections::HashMap;
use std::panic::{catch_unwind, resume_unwind};
use std::sync::{Mutex, MutexGuard};

use super::handle::Gate;
use super::observer::{LeaseEnd, LeaseEndEvent, Observer};
use super::permit::GatePermit;
use super::source::Source;
use super::timer::Timer;

/// A table of leases on one gate: permits held across requests, keyed by
/// session id, each ended when it has been idle for `idle_limit` (or, with a
/// [`max_age`](Self::max_age), once it is that old and nobody holds it).
///
/// A request that opens a session acquires its units as any other and
/// [`insert`](Self::insert)s the permit with the session's value (its buffers,
/// its file); each later request [`checkout`](Self::checkout)s the lease, works
/// on the value, and drops the guard (the idle clock restarts) or ends the
/// lease with [`Lease::finish`] or [`Lease::cancel`]. A lease left idle past
/// the limit expires with no request arriving, once [`expire`](Self::expire)
/// is driven (the runtime adapters spawn it). However a lease ends, its value
/// is dropped *before* its units return, so a new session is never admitted
/// while an old one's buffers still exist.
///
/// Ids are the caller's: mint them unguessable (a UUID), since the id is all a
/// request needs to reach a session. A request for a lease that ended within
/// `remember_ended` (by default the idle limit) is told how it ended, apart
/// from an id never seen ([`LeaseError`]).
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
}

/// The table's state, locked.
type Locked<'a, K, V, S> = MutexGuard<'a, State<K, V, S>>;

struct State<K, V, S: Source> {
    /// How long an ended lease's id is remembered.
    remember: Duration,
    /// The maximum age of the leases inserted from now on (`None`: none).
    max_age: Option<Duration>,
    live: HashMap<K, Live<V, S>>,
    /// The idle leases by deadline; the sequence number tells equal deadlines
    /// apart.
    deadlines: BTreeMap<(Duration, u64), K>,
    next_seq: u64,
    /// Ended leases: how, and when they are forgotten.
    ended: HashMap<K, (LeaseEnd, Duration)>,
    /// `ended`'s keys in the order they are forgotten; an entry whose time no
    /// longer matches `ended` is stale (the id was reused).
    forget_order: VecDeque<(Duration, K)>,
    /// Set by [`Leases::drain`]: every idle lease ends by then, as drained.
    drain_by: Option<Duration>,
    /// The driver's waker, and the deadline it sleeps until (`None`: none).
    driver: Option<(Waker, Option<Duration>)>,
}

struct Live<V, S: Source> {
    /// `None` while checked out. Declared before the permit: dropped first.
    value: Option<V>,
    permit: GatePermit<S>,
    /// When it has lived its maximum age: its insert plus the table's
    /// `max_age` then (`None`: no maximum age).
    aged_at: Option<Duration>,
    /// While idle: its key in `deadlines`, and how it ends there.
    deadline: Option<((Duration, u64), LeaseEnd)>,
}

/// A lease to end, taken out of the table under the lock and ended outside it.
struct Ending<V, S: Source> {
    /// Declared before the permit: dropped first, even on a path that drops
    /// the whole `Ending`.
    value: Option<V>,
    permit: GatePermit<S>,
    how: LeaseEnd,
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
    /// idle.
    ///
    /// # Panics
    ///
    /// If `idle_limit` is zero: every lease would end as it is made.
    #[must_use]
    pub fn new(gate: &Gate<S, T, O>, idle_limit: Duration) -> Self {
        assert!(
            !idle_limit.is_zero(),
            "Leases::new: the idle limit must be greater than zero"
        );
        Self {
            table: Arc::new(Table {
                gate: gate.clone(),
                idle_limit,
                state: Mutex::new(State {
                    remember: idle_limit,
                    max_age: None,
                    live: HashMap::new(),
                    deadlines: BTreeMap::new(),
                    next_seq: 0,
                    ended: HashMap::new(),
                    forget_order: VecDeque::new(),
                    drain_by: None,
                    driver: None,
                }),
            }),
        }
    }

    /// How long an ended lease's id is remembered, so a request for it is told
    /// how it ended rather than [`LeaseError::Unknown`]; by default the idle
    /// limit. For the leases that end from now on, in every clone of the table.
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
    /// no request arriving once [`expire`](Self::expire) is driven; one checked
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
        if state.live.contains_key(&id) {
            return Err((permit, value));
        }
        state.ended.remove(&id);
        let aged_at = state.max_age.map(|age| now.saturating_add(age));
        let live = Live {
            value: Some(value),
            permit,
            aged_at,
            deadline: None,
        };
        state.live.insert(id.clone(), live);
        let (ending, wake) = self.table.idle_from(&mut state, id, now);
        drop(state);
        wake_driver(wake);
        end_all(&self.table.gate, ending.into_iter(), Panics::Resume);
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
        let live = state.live.get_mut::<K>(&id).expect("found live");
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
        let live = state.live.get_mut::<K>(&id).expect("found live");
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
            .live
            .get::<K>(&id)
            .expect("found live")
            .deadline
            .map(|((deadline, _), _)| deadline.saturating_sub(now)))
    }

    /// Leases live now, idle or checked out.
    #[must_use]
    pub fn len(&self) -> usize {
        self.table.lock().live.len()
    }

    /// Whether no lease is live.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Ends every idle lease within `grace` from now at the latest, as
    /// [`LeaseEnd::Drained`] unless its idle limit or maximum age ends it
    /// first, and every lease that becomes idle later by then too (at once,
    /// past it): call it with the gate's drain, so the drain never waits out an
    /// idle limit longer than its grace. A lease checked out
    /// is in flight, and ends when its request ends it or returns it.
    pub fn drain(&self, grace: Duration) {
        let now = self.table.now();
        let by = now.saturating_add(grace);
        let mut state = self.table.lock();
        state.drain_by = Some(state.drain_by.map_or(by, |earlier| earlier.min(by)));
        let idle: Vec<K> = state
            .deadlines
            .range(..)
            .filter(|((deadline, _), _)| *deadline > by)
            .map(|(_, id)| id.clone())
            .collect();
        let mut ending = Vec::new();
        let mut wake = None;
        for id in idle {
            let live = state.live.get_mut(&id).expect("an idle lease is live");
            let (key, _) = live.deadline.take().expect("an idle lease has a deadline");
            state.deadlines.remove(&key);
            let (end, woken) = self.table.idle_from(&mut state, id, now);
            ending.extend(end);
            wake = wake.or(woken);
        }
        drop(state);
        wake_driver(wake);
        end_all(&self.table.gate, ending.into_iter(), Panics::Resume);
    }

    /// The driver of expiry: a future that ends each idle lease at its
    /// deadline, with no request arriving, and completes once every handle to
    /// the table is gone. Run one per table; the runtime adapters spawn it.
    /// A value whose drop panics while the driver ends it still ends (its units
    /// return, the observer hears it); the driver goes on.
    #[must_use = "futures do nothing unless polled"]
    pub fn expire(&self) -> Expire<K, V, S, T, O> {
        Expire {
            table: Arc::downgrade(&self.table),
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
    /// runs under it), so a poisoned lock is taken as it is.
    fn lock(&self) -> MutexGuard<'_, State<K, V, S>> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
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
        state.forget_ended(now);
        let Some((key, live)) = state.live.get_key_value(id) else {
            return Err(state
                .ended
                .get(id)
                .map_or(LeaseError::Unknown, |&(how, _)| LeaseError::Ended(how)));
        };
        let key = key.clone();
        match live.deadline {
            Some(((deadline, _), how)) if deadline <= now => {
                let ending = state.end(key, how, now);
                drop(state);
                end_all(&self.gate, core::iter::once(ending), Panics::Resume);
                Err(LeaseError::Ended(how))
            }
            _ => Ok((state, key)),
        }
    }

    /// Makes the checked-in lease under `id` idle from `now`: its deadline is
    /// the idle limit away (it ends expired), or its maximum age if that comes
    /// no later (aged), or the drain's end if that comes no later still
    /// (drained); one already past it ends now. Returns the lease to end, if it
    /// must, and the driver's waker if the new deadline is sooner than the one
    /// it sleeps until.
    fn idle_from(
        &self,
        state: &mut State<K, V, S>,
        id: K,
        now: Duration,
    ) -> (Option<Ending<V, S>>, Option<Waker>) {
        let mut deadline = (now.saturating_add(self.idle_limit), LeaseEnd::Expired);
        if let Some(at) = state.live.get(&id).expect("the lease is live").aged_at {
            if at <= deadline.0 {
                deadline = (at, LeaseEnd::Aged);
            }
        }
        if let Some(by) = state.drain_by {
            if by <= deadline.0 {
                deadline = (by, LeaseEnd::Drained);
            }
        }
        if deadline.0 <= now {
            return (Some(state.end(id, deadline.1, now)), None);
        }
        let key = (deadline.0, state.next_seq);
        state.next_seq += 1;
        state.deadlines.insert(key, id.clone());
        state.live.get_mut(&id).expect("the lease is live").deadline = Some((key, deadline.1));
        let wake = match &state.driver {
            Some((_, Some(armed))) if *armed <= deadline.0 => None,
            Some(_) => state.driver.take().map(|(waker, _)| waker),
            None => None,
        };
        (None, wake)
    }
}

impl<K: Hash + Eq + Clone, V, S: Source> State<K, V, S> {
    /// Takes the lease under `id` out of the table as ended `how` at `now`.
    fn end(&mut self, id: K, how: LeaseEnd, now: Duration) -> Ending<V, S> {
        let live = self.live.remove(&id).expect("the lease is live");
        if let Some((key, _)) = live.deadline {
            self.deadlines.remove(&key);
        }
        let forget_at = now.saturating_add(self.remember);
        self.ended.insert(id.clone(), (how, forget_at));
        self.forget_order.push_back((forget_at, id));
        Ending {
            value: live.value,
            permit: live.permit,
            how,
        }
    }

    /// Forgets the ended leases whose time to be remembered has passed.
    fn forget_ended(&mut self, now: Duration) {
        while let Some((at, _)) = self.forget_order.front() {
            if *at > now {
                break;
            }
            let (at, id) = self.forget_order.pop_front().expect("looked at the front");
            if self
                .ended
                .get(&id)
                .is_some_and(|&(_, forget_at)| forget_at == at)
            {
                self.ended.remove(&id);
            }
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
    for Ending { value, permit, how } in ending {
        let dropped = catch_unwind(AssertUnwindSafe(move || drop(value)));
        let event = LeaseEndEvent::new(
            permit.source().label(),
            permit.units(),
            permit.held_for(),
            how,
        )
        .with_priority(permit.priority());
        let told = catch_unwind(AssertUnwindSafe(|| {
            gate.inner.observer.on_lease_end(&event)
        }));
        let released = catch_unwind(AssertUnwindSafe(move || drop(permit)));
        for outcome in [dropped, told, released] {
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
        state
            .live
            .get_mut(&self.id)
            .expect("a checked-out lease stays live")
            .value = Some(value);
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

/// The future of [`Leases::expire`].
#[must_use = "futures do nothing unless polled"]
pub struct Expire<K: Hash + Eq + Clone, V, S: Source, T: Timer, O: Observer> {
    table: Weak<Table<K, V, S, T, O>>,
    /// The sleep until the soonest deadline, and that deadline.
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

impl<K, V, S, T, O> core::future::Future for Expire<K, V, S, T, O>
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
            let now = table.now();
            let mut state = table.lock();
            state.forget_ended(now);
            let mut ending = Vec::new();
            while let Some(entry) = state.deadlines.first_entry() {
                if entry.key().0 > now {
                    break;
                }
                let id = entry.remove();
                let how = state.live[&id]
                    .deadline
                    .expect("an idle lease has a deadline")
                    .1;
                ending.push(state.end(id, how, now));
            }
            let next = state.deadlines.keys().next().map(|&(deadline, _)| deadline);
            state.driver = Some((cx.waker().clone(), next));
            drop(state);
            end_all(&table.gate, ending.into_iter(), Panics::Catch);
            let Some(next) = next else {
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
        let ids: Vec<K> = state.live.keys().cloned().collect();
        let ending: Vec<_> = ids
            .into_iter()
            .map(|id| state.end(id, LeaseEnd::Drained, now))
            .collect();
        end_all(&self.gate, ending.into_iter(), Panics::Catch);
    }
}
