//! The serving role, and the pass its holder makes over a wait queue
//! (`queue/`, which says what the pass may assume of it).
//!
//! - **The role** (`word`): `LOCKED | PENDING`. Whoever finds it free takes it and
//!   serves; whoever finds it taken sets `PENDING` and leaves, and the holder serves
//!   again before it lets go. Nobody ever waits for the role.
//! - **A pass**: the server settles what shrinks and forgets posted (`resize.rs`), sweeps for
//!   requests the capacity no longer fits if it was lowered, then closes every
//!   request (after a close) or resolves the head by one rule for both queues
//!   ([`head_outcome`]); and clears `QUEUED` (and `RETIRING`) once nothing is
//!   left, unless a parker joined meanwhile.
//!
//! # Invariants
//!
//! 1. **One server.** Only the role holder runs a pass, and touches [`PassState`].
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

use super::queue::{Queue, Stop};
use super::state::{available, HeadTake, State, CLOSED, QUEUED, RETIRING};
use super::wait_status::status;
use super::wake_list::WakeList;
use super::Semaphore;
use crate::loom::loom_const_fn;
use crate::loom::sync::{AtomicUsize, Ordering, UnsafeCell};
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
/// with (a grant takes the units here), or where to stop. A head above the
/// capacity fails if `oversize_fails`, and otherwise waits for it (a counter's).
fn head_outcome(state: &State, units: usize, oversize_fails: bool) -> Result<usize, Stop> {
    if oversize_fails && units > state.capacity() {
        return Ok(status::EXCEEDS);
    }
    match state.take_for_head(units) {
        HeadTake::Taken => Ok(status::GRANTED),
        // Closed since this pass looked: leave every request to the next
        // pass's close, which a drain waiter needs (it waits for the units; it
        // is never closed). The close served if anyone was queued, and every
        // request enqueued after it serves at its join, so that pass comes.
        HeadTake::Closed if Safeguard::ClosedMidPassWaits.on() => Err(Stop::Blocked),
        HeadTake::Closed => Ok(status::SHUT_OUT),
        // A shrink posted since this pass settled: stop. It set `ARRIVED`, so
        // the pass goes round and pays it.
        HeadTake::Retiring => Err(Stop::Blocked),
        // Stop: a cancel of this head either is seen by this pass or sees the
        // units of the release that asked for it, and serves
        // (`State::cancel_count_out`).
        HeadTake::DoesNotFit => Err(Stop::Blocked),
    }
}

/// The role word and what only its holder touches.
pub(crate) struct ServingRole {
    word: AtomicUsize,
    /// # Safety
    /// The role holder's only.
    server: UnsafeCell<PassState>,
    /// Times a call to `serve` took the role: the unit tests check that no
    /// operation serves when it need not (`semaphore/tests/serving.rs`).
    #[cfg(test)]
    roles_taken: core::sync::atomic::AtomicUsize,
}

/// What only the serving thread touches.
struct PassState {
    /// Units to retire before any grant: posted by shrinks, paid by taking free
    /// units (now, or as releases bring them back), or settled by forgotten
    /// permits (`resize.rs`).
    debt: usize,
    /// A sweep for requests that no longer fit is due (it stopped at a full wake
    /// batch, or the capacity was lowered).
    sweep: bool,
}

// SAFETY: `server` is touched only by the role holder, one thread at a time
// (invariant *one server*), handed over by the `AcqRel` role word; the rest is atomics.
unsafe impl Send for ServingRole {}
// SAFETY: as above.
unsafe impl Sync for ServingRole {}

impl ServingRole {
    loom_const_fn! {
        pub(crate) fn new() -> ServingRole {
            ServingRole {
                word: AtomicUsize::new(0),
                server: UnsafeCell::new(PassState {
                    debt: 0,
                    sweep: false,
                }),
                #[cfg(test)]
                roles_taken: core::sync::atomic::AtomicUsize::new(0),
            }
        }
    }

    /// Times a call to `serve` took the role, in a test build.
    #[cfg(all(test, not(admit_loom), not(admit_shuttle)))]
    pub(crate) fn roles_taken(&self) -> usize {
        self.roles_taken.load(Ordering::Relaxed)
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

    /// The holder lets go of the role; returns whether someone asked for
    /// service meanwhile (`PENDING`).
    fn let_go(&self) -> bool {
        self.word.swap(0, Ordering::AcqRel) & PENDING != 0
    }
}

impl Semaphore {
    /// Serves the queue now, or leaves it to the thread that is serving. Never
    /// waits: at worst one CAS on the role word and return.
    ///
    /// Never inlined: a release calls it only when units are owed, and inlined
    /// the pass would turn every uncontended release into a call with a large
    /// frame (measured without `alloc`, docs/benchmarks.md).
    #[inline(never)]
    pub(super) fn serve(&self) {
        if self.role.take() {
            #[cfg(test)]
            self.role.roles_taken.fetch_add(1, Ordering::Relaxed);
            self.serve_as_holder();
        }
    }

    /// With the role held: serves, lets go of the role, wakes, and goes again while a
    /// wake batch was full or someone asked for service meanwhile.
    ///
    /// A waker that panics does not end the serving: the rest of its batch is
    /// woken as the list drops, then [`ServeOnUnwind`] goes again if this loop
    /// would have, so no request that the free units fit is left parked.
    pub(crate) fn serve_as_holder(&self) {
        loop {
            // Declared before the wake list, so dropped after it on unwind.
            let mut on_unwind = ServeOnUnwind {
                semaphore: self,
                again: false,
            };
            let mut wakers = WakeList::new();
            // SAFETY: we hold the role.
            let more = unsafe { self.pass(&mut wakers) };
            let asked = self.role.let_go();
            on_unwind.again = (more || asked) && Safeguard::ServesOnUnwind.on();
            wakers.wake_all();
            on_unwind.again = false;
            if !(more || asked) || !self.role.take() {
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
    unsafe fn pass(&self, wakers: &mut WakeList) -> bool {
        let (state, queue) = (&self.state, &self.queue);
        // SAFETY: the caller holds the role, which guards the server's state
        // and the queue's (`Waiters`).
        self.role.server.with_mut(|server| unsafe {
            let server = &mut *server;
            loop {
                // Each queue takes a park in order itself (the cells by ticket,
                // the list at its link): nothing to take in but the flag.
                state.clear_arrived();
                self.resizes.pay_debt(state, &mut server.debt);
                // Paid up: clear `RETIRING`, so that finding it set again (in the
                // take for the head) means a shrink posted since, whose units this
                // pass must not grant. If a parker joined or a shrink posted since
                // `clear_arrived`, look again first.
                if server.debt == 0 && !state.clear_retiring() {
                    continue;
                }
                if self.resizes.take_lowered() {
                    server.sweep = true;
                }
                if server.sweep {
                    if !self.sweep_oversize(wakers) {
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
                    match queue.close(state, drained, wakers) {
                        // Drain waiters left keep `QUEUED` set, so that the
                        // release that brings the last unit back serves them.
                        Stop::Blocked if !Safeguard::DrainKeepsQueued.on() => Stop::Empty,
                        stop => stop,
                    }
                } else {
                    // While units are owed, `RETIRING` stays set and the take for
                    // the head refuses: the free units went to the retirement,
                    // and a release racing this pass asked for service, so the
                    // next pass pays with its units first.
                    let oversize_fails = self.oversize_fails();
                    queue.grant_from_head(state, wakers, |units| {
                        head_outcome(state, units, oversize_fails)
                    })
                };
                #[cfg(feature = "alloc")]
                if let Some(shedding) = self.shedding.as_deref() {
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
}

/// What a serving loop still owes when a waker panics out of it: the next pass,
/// if it was to go again (a full batch, or service asked for meanwhile). Run
/// while the panic unwinds, after the rest of the batch was woken; its own
/// wakers are user code too, and a second panic aborts, as any panic during an
/// unwind does.
struct ServeOnUnwind<'a> {
    semaphore: &'a Semaphore,
    /// Set only while the batch is being woken, and only if the loop would go
    /// again.
    again: bool,
}

impl Drop for ServeOnUnwind<'_> {
    fn drop(&mut self) {
        if self.again && self.semaphore.role.take() {
            self.semaphore.serve_as_holder();
        }
    }
}
