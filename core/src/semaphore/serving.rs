//! The serving role, and the pass its holder makes over a wait queue
//! (`queue/`, which says what the pass may assume of it).
//!
//! - **The role** (`word`): `LOCKED | PENDING`. Whoever finds it free takes it and
//!   serves; whoever finds it taken sets `PENDING` and leaves, and the holder serves
//!   again before it lets go. Nobody ever waits for the role.
//! - **A pass**: the server settles what shrinks and forgets posted, sweeps for
//!   requests the capacity no longer fits if it was lowered, then closes every
//!   request (after a close) or resolves the head by one rule for both queues
//!   ([`head_outcome`]); and clears `QUEUED` (and `RETIRING`) once nothing is
//!   left, unless a parker joined meanwhile.
//!
//! # Invariants
//!
//! 1. **One server.** Only the role holder runs a pass, and touches [`Server`].
//! 2. **Blocked at rest.** When the role is free and `PENDING` clear, every
//!    joined, unresolved request waits behind a head that does not fit, with
//!    `QUEUED` set so that every release serves again.
//! 3. **No user code in the role.** Wakers are collected in a [`WakeList`] and
//!    woken after it is released.
//! 4. **No barging.** Once a parker has joined, `QUEUED` stays set until its
//!    request is resolved and a server, with nothing left in the queue, clears
//!    it by a CAS that fails if anyone joined after its pass began.
//! 5. **No lost wake-up.** Every event that can make the head fit asks for
//!    service (a release with `QUEUED` set, a close, a won cancel with a unit
//!    free, a join that found the units free or its request resolved), and a
//!    request for service is never lost: it takes the role or sets `PENDING`,
//!    which the holder reads when it lets go; nor by a waker that panics (the
//!    pass the holder owed is made while the panic unwinds).

#[cfg(feature = "alloc")]
use alloc::boxed::Box;

use super::queue::{Queue, Stop};
#[cfg(feature = "alloc")]
use super::shedding::Shedding;
use super::state::{available, HeadTake, State, CLOSED, QUEUED, RETIRING};
use super::wait_status::status;
use super::wake_list::WakeList;
use crate::loom::loom_const_fn;
use crate::loom::sync::{AtomicBool, AtomicUsize, Ordering, UnsafeCell};
use crate::safeguard::Safeguard;

/// `word` bit: a thread is serving.
const LOCKED: usize = 1;
/// `word` bit: someone asked for service while the role was held.
const PENDING: usize = 1 << 1;

/// Whether a parker's join, which read the state word `prev`, must ask for
/// service: it found the semaphore closed, or nobody queued and its `units`
/// free (they came back between the refused fast path and the join, and that
/// release served nobody), or its request `resolved` already (a server granted
/// it and may have cleared `QUEUED`, which the join then set again over nobody).
pub(crate) fn join_needs_service(prev: usize, units: usize, resolved: bool) -> bool {
    let closed = prev & CLOSED != 0 && Safeguard::JoinServesClosed.on();
    let units_back =
        prev & QUEUED == 0 && available(prev) >= units && Safeguard::JoinServesUnitsBack.on();
    closed || units_back || (resolved && Safeguard::JoinServesResolved.on())
}

/// What the pass does with a waiting head of `units`: the outcome to resolve it
/// with (a grant takes the units here), or where to stop.
fn head_outcome(state: &State, units: usize) -> Result<usize, Stop> {
    if units > state.capacity() {
        return Ok(status::EXCEEDS);
    }
    match state.take_for_head(units) {
        HeadTake::Taken => Ok(status::GRANTED),
        // Closed since this pass looked: leave every request to the next
        // pass's close, which a drain waiter needs (it waits for the units; it
        // is never closed). The close served if anyone was queued, and every
        // request enqueued after it serves at its join, so that pass comes.
        HeadTake::Closed if Safeguard::ClosedMidPassWaits.on() => Err(Stop::Blocked),
        HeadTake::Closed => Ok(status::CLOSED),
        // A shrink posted since this pass settled: stop. It set `ARRIVED`, so
        // the pass goes round and pays it.
        HeadTake::Retiring => Err(Stop::Blocked),
        // Stop: a cancel of this head either is seen by this pass or sees the
        // units of the release that asked for it, and serves
        // (`State::cancel_count_out`).
        HeadTake::DoesNotFit => Err(Stop::Blocked),
    }
}

/// The role word and what it guards.
pub(crate) struct Role {
    word: AtomicUsize,
    /// Units a shrink posted for retirement, not yet taken by the server.
    retire_posted: AtomicUsize,
    /// Units of forgotten permits that were owed to a retirement (held above the
    /// capacity in force): they settle that much of the debt.
    settle_posted: AtomicUsize,
    /// The capacity was lowered since the server last swept for requests that
    /// no longer fit.
    lowered: AtomicBool,
    /// # Safety
    /// The role holder's only.
    server: UnsafeCell<Server>,
    /// A gate's semaphore's shedding by rank (`shedding.rs`); set before the
    /// semaphore is shared, never after.
    #[cfg(feature = "alloc")]
    shedding: Option<Box<Shedding>>,
    /// Times a call to `serve` took the role: the unit tests check that no
    /// operation serves when it need not (`semaphore/tests/serving.rs`).
    #[cfg(test)]
    roles_taken: core::sync::atomic::AtomicUsize,
}

/// What only the serving thread touches.
struct Server {
    /// Units to retire before any grant: posted by shrinks, paid by taking free
    /// units (now, or as releases bring them back), or settled by forgotten
    /// permits.
    debt: usize,
    /// A sweep for requests that no longer fit is due (it stopped at a full wake
    /// batch, or the capacity was lowered).
    sweep: bool,
}

// SAFETY: `server` is touched only by the role holder, one thread at a time
// (invariant *one server*), handed over by the `AcqRel` role word; the rest is atomics.
unsafe impl Send for Role {}
// SAFETY: as above.
unsafe impl Sync for Role {}

impl Role {
    loom_const_fn! {
        pub(crate) fn new() -> Role {
            Role {
                word: AtomicUsize::new(0),
                retire_posted: AtomicUsize::new(0),
                settle_posted: AtomicUsize::new(0),
                lowered: AtomicBool::new(false),
                server: UnsafeCell::new(Server {
                    debt: 0,
                    sweep: false,
                }),
                #[cfg(feature = "alloc")]
                shedding: None,
                #[cfg(test)]
                roles_taken: core::sync::atomic::AtomicUsize::new(0),
            }
        }
    }

    /// Gives this role a shedding by rank: before the semaphore is shared.
    #[cfg(feature = "alloc")]
    pub(crate) fn enable_shedding(&mut self) {
        self.shedding = Some(Box::new(Shedding::new()));
    }

    /// The shedding by rank, if the semaphore has one.
    #[cfg(feature = "alloc")]
    pub(crate) fn shedding(&self) -> Option<&Shedding> {
        self.shedding.as_deref()
    }

    /// Times a call to `serve` took the role, in a test build.
    #[cfg(all(test, not(admit_loom), not(admit_shuttle)))]
    pub(crate) fn roles_taken(&self) -> usize {
        self.roles_taken.load(Ordering::Relaxed)
    }

    /// A shrink posts `units` for the server to retire; the caller then sets
    /// `RETIRING`, marks the capacity lowered and asks for service.
    pub(crate) fn post_retirement(&self, units: usize) {
        self.retire_posted.fetch_add(units, Ordering::AcqRel);
    }

    /// The capacity was lowered: the next pass sweeps for requests it no longer
    /// fits. Called after the lowering's read-modify-write on the state word (a
    /// shrink's `RETIRING`, a forget's [`State::order_after_joins`]), so that
    /// the sweep sees every request that joined before it, and a request that
    /// joined after it sees the lowered capacity
    /// ([`sweep_if_oversize`](Self::sweep_if_oversize)).
    ///
    /// A read-modify-write, not a store: a store could take its place in the
    /// flag's order before a pass's `swap(false)` that read an earlier mark,
    /// and be consumed by a pass that never synchronized with it (loom found
    /// the request left parked). An RMW comes after that swap, or is the value
    /// the swap reads.
    pub(crate) fn mark_lowered(&self) {
        if Safeguard::LoweredMarkIsRmw.on() {
            self.lowered.swap(true, Ordering::AcqRel);
        } else {
            self.lowered.store(true, Ordering::Release);
        }
    }

    /// After a parker's join: if its `units` no longer fit the capacity, asks
    /// for a sweep and returns `true` (the caller then asks for service). A
    /// lowering after the request checked the capacity reads and writes the
    /// state word before it marks the capacity lowered: if that came before
    /// this join, this `Acquire` read of the capacity sees the lowered one;
    /// if after, the join's publish comes before the mark, and the sweep the
    /// mark asks for sees the request.
    pub(crate) fn sweep_if_oversize(&self, state: &State, units: usize) -> bool {
        if units > state.capacity() && Safeguard::JoinSweepsOversize.on() {
            self.mark_lowered();
            true
        } else {
            false
        }
    }

    /// A forget posts the units it forgot beyond the capacity: those were owed
    /// to a retirement, and settle it. The caller then marks the capacity
    /// lowered and asks for service.
    pub(crate) fn post_forget(&self, owed: usize) {
        if owed != 0 {
            self.settle_posted.fetch_add(owed, Ordering::AcqRel);
        }
    }

    /// Serves `queue` now, or leaves it to the thread that is serving. Never
    /// waits: at worst one CAS on the role word and return.
    ///
    /// Never inlined: a release calls it only when units are owed, and inlined
    /// the pass would turn every uncontended release into a call with a large
    /// frame (measured without `alloc`, docs/benchmarks.md).
    #[inline(never)]
    pub(crate) fn serve(&self, state: &State, queue: &impl Queue) {
        if self.take() {
            #[cfg(test)]
            self.roles_taken.fetch_add(1, Ordering::Relaxed);
            self.serve_and_release(state, queue);
        }
    }

    /// Takes the role if it is free; if it is held, sets `PENDING` for the holder.
    /// Returns whether the role was taken.
    ///
    /// It always writes, even when `PENDING` is already set: as a read-modify-write
    /// it is ordered against the holder's releasing `swap`, which either reads it
    /// (and with it everything this thread did before, `AcqRel`) or comes first, in
    /// which case this CAS finds the role free. A plain load there would let the two
    /// miss each other (store buffering: the `RoleAlwaysWrites` control deadlocks
    /// `three_releases_reach_a_parked_waiter` under loom).
    pub(crate) fn take(&self) -> bool {
        let mut role = self.word.load(Ordering::Relaxed);
        loop {
            if role & PENDING != 0 && !Safeguard::RoleAlwaysWrites.on() {
                return false;
            }
            let next = if role == 0 { LOCKED } else { role | PENDING };
            match self
                .word
                .compare_exchange_weak(role, next, Ordering::AcqRel, Ordering::Relaxed)
            {
                Ok(_) => return role == 0,
                Err(actual) => role = actual,
            }
        }
    }

    /// With the role held: serves, releases the role, wakes, and goes again while a
    /// wake batch was full or someone asked for service meanwhile.
    ///
    /// A waker that panics does not end the serving: the rest of its batch is
    /// woken as the list drops, then [`ServeOnUnwind`] goes again if this loop
    /// would have, so no request that the free units fit is left parked.
    pub(crate) fn serve_and_release(&self, state: &State, queue: &impl Queue) {
        loop {
            // Declared before the wake list, so dropped after it on unwind.
            let mut on_unwind = ServeOnUnwind {
                role: self,
                state,
                queue,
                again: false,
            };
            let mut wakers = WakeList::new();
            // SAFETY: we hold the role.
            let more = unsafe { self.pass(state, queue, &mut wakers) };
            let asked = self.word.swap(0, Ordering::AcqRel) & PENDING != 0;
            on_unwind.again = (more || asked) && Safeguard::ServesOnUnwind.on();
            wakers.wake_all();
            on_unwind.again = false;
            if !(more || asked) || !self.take() {
                return;
            }
        }
    }

    /// One pass: clear `ARRIVED`, settle the retirement, sweep, then close
    /// or grant, and clear `QUEUED` if nobody is left and nobody joined
    /// meanwhile. Returns whether to go again at once (the wake batch filled).
    ///
    /// # Safety
    /// The caller holds the role.
    unsafe fn pass(&self, state: &State, queue: &impl Queue, wakers: &mut WakeList) -> bool {
        // SAFETY: the caller holds the role, which guards the server's state
        // and the queue's (`Waiters`).
        self.server.with_mut(|server| unsafe {
            let server = &mut *server;
            loop {
                // Each queue takes a park in order itself (the cells by ticket,
                // the list at its link): nothing to take in but the flag.
                state.clear_arrived();
                self.settle(state, server);
                // Paid up: clear `RETIRING`, so that finding it set again (in the
                // take for the head) means a shrink posted since, whose units this
                // pass must not grant. If a parker joined or a shrink posted since
                // `clear_arrived`, look again first.
                if server.debt == 0 && !state.clear_retiring() {
                    continue;
                }
                // A load first, as for the posted units (`settle`).
                if self.lowered.load(Ordering::Relaxed)
                    && self.lowered.swap(false, Ordering::AcqRel)
                {
                    server.sweep = true;
                }
                if server.sweep {
                    if !queue.sweep_oversize(state, wakers) {
                        // The wake batch filled: wake it, and sweep on next pass.
                        return true;
                    }
                    server.sweep = false;
                }
                // `Acquire`, before the walk: a won cancel's count-out that
                // this read comes after is seen with its cancel
                // (`State::cancel_count_out`).
                let now = state.load();
                let stop = if now & CLOSED != 0 {
                    // Read apart from any resize in flight: a shrink posted
                    // since the settlement owes units still held.
                    let drained = server.debt == 0 && state.all_units_back();
                    queue.close(state, drained, wakers)
                } else {
                    // While units are owed, `RETIRING` stays set and the take for
                    // the head refuses: the free units went to the retirement,
                    // and a release racing this pass asked for service, so the
                    // next pass pays with its units first.
                    queue.grant_from_head(state, wakers, |units| head_outcome(state, units))
                };
                #[cfg(feature = "alloc")]
                if let Some(shedding) = self.shedding() {
                    match stop {
                        // A grant wins: only requests behind a head that does
                        // not fit are shed. Then the head may fit: look again.
                        Stop::Blocked if now & CLOSED == 0 && shedding.any_posted() => {
                            match queue.shed(state, shedding, wakers) {
                                None => return true,
                                Some(0) => {}
                                Some(_) => continue,
                            }
                        }
                        Stop::BatchFull | Stop::Blocked => {}
                        Stop::Empty => shedding.drop_posted(),
                    }
                    if now & CLOSED != 0 {
                        shedding.drop_posted();
                    }
                }
                let mut flags = if server.debt == 0 { RETIRING } else { 0 };
                match stop {
                    Stop::BatchFull => return true,
                    Stop::Blocked => {}
                    Stop::Empty => flags |= QUEUED,
                }
                if flags == 0 || state.try_clear(flags) {
                    return false;
                }
                // A parker joined or a shrink posted since we looked: look again.
            }
        })
    }

    /// Takes what shrinks and forgets posted into the debt and pays it from the
    /// free units. Units settled by a forget after this server (or an earlier one)
    /// already retired some for them come back: the debt never goes below zero.
    fn settle(&self, state: &State, server: &mut Server) {
        server.debt += take_posted(&self.retire_posted);
        let settled = take_posted(&self.settle_posted);
        if settled > server.debt {
            // Retired for a debt a forget has since covered: give them back.
            state.give_back(settled - server.debt);
            server.debt = 0;
        } else {
            server.debt -= settled;
        }
        server.debt -= state.retire(server.debt);
    }
}

/// What a serving loop still owes when a waker panics out of it: the next pass,
/// if it was to go again (a full batch, or service asked for meanwhile). Run
/// while the panic unwinds, after the rest of the batch was woken; its own
/// wakers are user code too, and a second panic aborts, as any panic during an
/// unwind does.
struct ServeOnUnwind<'a, Q: Queue> {
    role: &'a Role,
    state: &'a State,
    queue: &'a Q,
    /// Set only while the batch is being woken, and only if the loop would go
    /// again.
    again: bool,
}

impl<Q: Queue> Drop for ServeOnUnwind<'_, Q> {
    fn drop(&mut self) {
        if self.again && self.role.take() {
            self.role.serve_and_release(self.state, self.queue);
        }
    }
}

/// Takes what shrinks or forgets posted in `posted`, the server only. A load
/// first: nearly every pass finds nothing posted, and then writes nothing (in a
/// profile of S4 the three swaps a pass were half of `serve`'s own samples). A post
/// the load misses is followed by its poster's request for service, which the
/// role hands to this server as `PENDING` (or to the next one), so a pass that
/// sees it comes.
fn take_posted(posted: &AtomicUsize) -> usize {
    if posted.load(Ordering::Relaxed) == 0 {
        0
    } else {
        posted.swap(0, Ordering::AcqRel)
    }
}
