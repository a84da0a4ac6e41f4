//! The wait queue: two lock-free stacks any thread pushes onto, a FIFO list only
//! the server touches, and the serving role that decides who the server is.
//!
//! - **Arrivals** (`arrivals`): a parker pushes its node here (a CAS), then joins in
//!   the state word. Arrival order is the order of these pushes. An owner that won
//!   its node's cancel takes the node back off the top if it is still there
//!   (withdraws it, one CAS): no server ever sees it.
//! - **Cancelled** (`cancelled`): an owner that won its node's cancel pushes the node
//!   here so the server unlinks it and lets go of it. The arrival push of a node
//!   happens before its cancel push.
//! - **The list**: the server takes each stack whole (a swap), links the arrivals at
//!   the tail in push order, unlinks the cancelled, and grants from the head while
//!   the head fits.
//! - **The role** (`role`): `LOCKED | PENDING`. Whoever finds it free takes it and
//!   serves; whoever finds it taken sets `PENDING` and leaves, and the holder serves
//!   again before it lets go. Nobody ever waits for the role.
//!
//! # Invariants
//!
//! 1. Only the role holder reads or writes the list and the nodes' links, and
//!    takes the stacks.
//! 2. The list holds nodes in arrival order; only the head is granted; the server
//!    stops at the first head that does not fit (FIFO, no needless wake-up).
//! 3. Every pushed node is owned by the queue (one share) until the server lets
//!    go: when it resolves the node (grant or close), or when it handles the
//!    node's cancel entry; or until its owner withdraws it, which only succeeds
//!    while no server has taken it. Exactly once: a node that is resolved never
//!    gets a cancel entry, a cancelled node is never resolved, and a withdrawn
//!    node gets no cancel entry and is never taken.
//! 4. When the role is free and `PENDING` clear, the cancelled stack has been
//!    handled up to the last push whose pusher then asked for service, and every
//!    joined, unresolved node is queued behind a head that does not fit, with
//!    `QUEUED` set so that every release serves again.
//! 5. No user code runs in the role: wakers are collected in a [`WakeList`] and
//!    woken after it is released; nodes the server lets go of hold no waker.

use core::ptr::{self, NonNull};

use super::state::{available, HeadTake, State, CLOSED, QUEUED, RETIRING};
use super::waiter::{
    release_cancelled, release_queue_ref, status, Links, Place, StackLink, Waiter,
};
use super::wake_list::WakeList;
use crate::loom::loom_const_fn;
use crate::loom::sync::{AtomicBool, AtomicPtr, AtomicUsize, Ordering, UnsafeCell};
use crate::mechanism::Mechanism;

/// `role` bit: a thread is serving.
const LOCKED: usize = 1;
/// `role` bit: someone asked for service while the role was held.
const PENDING: usize = 1 << 1;

/// Where a serving pass stopped.
enum Stop {
    /// The wake batch is full: release the role, wake, and go again.
    BatchFull,
    /// The head does not fit: nothing more to do until units come back.
    HeadDoesNotFit,
    /// The list is empty.
    Empty,
}

pub(crate) struct WaitQueue {
    /// Nodes pushed by parkers, newest first.
    arrivals: AtomicPtr<Waiter>,
    /// Nodes pushed by cancelling owners, newest first.
    cancelled: AtomicPtr<Waiter>,
    /// `LOCKED | PENDING`, and beside it what only its holder touches.
    role: Role,
    /// Joined, unresolved waiters, for diagnostics.
    waiters: AtomicUsize,
    /// Times a call to `serve` took the role: the unit tests check that no
    /// operation serves when it need not (`semaphore/serving_tests.rs`).
    #[cfg(test)]
    roles_taken: core::sync::atomic::AtomicUsize,
}

/// The role word and what it guards: whoever takes the role goes on to the list.
struct Role {
    word: AtomicUsize,
    /// Units a shrink posted for retirement, not yet taken by the server.
    retire_posted: AtomicUsize,
    /// Units of forgotten permits that were owed to a retirement (held above the
    /// capacity in force): they settle that much of the debt.
    settle_posted: AtomicUsize,
    /// The capacity was lowered since the server last swept the list for requests
    /// that no longer fit.
    lowered: AtomicBool,
    /// # Safety
    /// The role holder's only.
    server: UnsafeCell<Server>,
}

/// What only the serving thread touches.
pub(crate) struct Server {
    list: List,
    /// Units to retire before any grant: posted by shrinks, paid by taking free
    /// units (now, or as releases bring them back), or settled by forgotten
    /// permits.
    debt: usize,
    /// A sweep for requests that no longer fit is due (it stopped at a full wake
    /// batch, or the capacity was lowered).
    sweep: bool,
}

// SAFETY: the list and the nodes' cells are touched only as the module invariants
// say (the role, or the release/acquire hand-overs of the stacks); the rest is atomics.
unsafe impl Send for WaitQueue {}
// SAFETY: as above.
unsafe impl Sync for WaitQueue {}

impl WaitQueue {
    loom_const_fn! {
        pub(crate) fn new() -> WaitQueue {
            WaitQueue {
                arrivals: AtomicPtr::new(ptr::null_mut()),
                cancelled: AtomicPtr::new(ptr::null_mut()),
                role: Role {
                    word: AtomicUsize::new(0),
                    retire_posted: AtomicUsize::new(0),
                    settle_posted: AtomicUsize::new(0),
                    lowered: AtomicBool::new(false),
                    server: UnsafeCell::new(Server {
                        list: List::new(),
                        debt: 0,
                        sweep: false,
                    }),
                },
                waiters: AtomicUsize::new(0),
                #[cfg(test)]
                roles_taken: core::sync::atomic::AtomicUsize::new(0),
            }
        }
    }

    /// Requests parked right now.
    pub(crate) fn waiters(&self) -> usize {
        self.waiters.load(Ordering::Relaxed)
    }

    /// Times a call to `serve` took the role, in a test build.
    #[cfg(all(test, not(admit_loom), not(admit_shuttle)))]
    pub(crate) fn roles_taken(&self) -> usize {
        self.roles_taken.load(Ordering::Relaxed)
    }

    /// Takes the serving role and keeps it, as a server descheduled mid-pass
    /// would; [`serve_and_let_go`](Self::serve_and_let_go) ends it.
    #[cfg(all(test, feature = "alloc", not(admit_loom), not(admit_shuttle)))]
    pub(crate) fn hold_role(&self) -> bool {
        self.take_role()
    }

    /// With the role held by [`hold_role`](Self::hold_role): serves and lets go.
    #[cfg(all(test, feature = "alloc", not(admit_loom), not(admit_shuttle)))]
    pub(crate) fn serve_and_let_go(&self, state: &State) {
        self.serve_and_release(state);
    }

    /// Entries on the two stacks, waiting for a server; the caller holds the role
    /// and no other thread touches the semaphore.
    #[cfg(all(test, feature = "alloc", not(admit_loom), not(admit_shuttle)))]
    pub(crate) fn backlog(&self) -> usize {
        let count = |top: *mut Waiter, next: fn(&Waiter) -> &StackLink| {
            let mut entries = 0;
            let mut node = NonNull::new(top);
            while let Some(n) = node {
                entries += 1;
                // SAFETY: every node on a stack is kept alive by the queue's share,
                // and with the role held here nobody takes the stacks.
                node = unsafe { next(n.as_ref()).get() };
            }
            entries
        };
        count(self.arrivals.load(Ordering::Acquire), Waiter::next_arrival)
            + count(
                self.cancelled.load(Ordering::Acquire),
                Waiter::next_cancelled,
            )
    }

    /// A parker pushes its node (the queue's share of it).
    ///
    /// `Release` publishes the node (and its `next_arrival`) to the server's
    /// `Acquire` swap.
    pub(crate) fn push_arrival(&self, node: NonNull<Waiter>) {
        self.waiters.fetch_add(1, Ordering::Relaxed);
        // SAFETY: the queue's share keeps the node alive; it is not yet shared, so
        // its `next_arrival` is ours until the push publishes it.
        let node_ref = unsafe { node.as_ref() };
        let below = push(&self.arrivals, node, node_ref.next_arrival());
        // SAFETY: `below` is the owner's cell, and the parker is the owner.
        unsafe { node_ref.below().set(below) };
    }

    /// An owner that won its node's cancel takes the node back off the arrivals
    /// stack if it is still on top: no server has taken it and nobody has pushed
    /// since. The queue's share then comes back to the caller, no cancel entry is
    /// needed, and the node is freed without a server. Returns whether it did.
    ///
    /// One CAS from the node to the node below it, as pushed. No ABA: only the
    /// owner pushes its node, once, and the owner's share keeps its address from
    /// being reused, so the head can name this node only while it is still on top
    /// of the stack it was pushed onto, with the same node below (a swap takes the
    /// whole stack, pushes only add above it).
    pub(crate) fn withdraw_arrival(&self, node: NonNull<Waiter>) -> bool {
        if self.arrivals.load(Ordering::Relaxed) != node.as_ptr() {
            return false;
        }
        // SAFETY: the caller's share keeps the node alive; `below` is the owner's.
        // (The negative control reads `next_arrival`, a data race with a server.)
        let below = unsafe {
            if Mechanism::WithdrawOwnCopy.on() {
                node.as_ref().below().get()
            } else {
                node.as_ref().next_arrival().get()
            }
        };
        let below = below.map_or(ptr::null_mut(), NonNull::as_ptr);
        let withdrawn = if Mechanism::WithdrawCas.on() {
            self.arrivals
                .compare_exchange(
                    node.as_ptr(),
                    below,
                    stack_ordering(Ordering::Release),
                    Ordering::Relaxed,
                )
                .is_ok()
        } else {
            self.arrivals.store(below, Ordering::Release);
            true
        };
        if withdrawn {
            self.waiters.fetch_sub(1, Ordering::Relaxed);
        }
        withdrawn
    }

    /// An owner that won its node's cancel pushes it, handing the server the
    /// queue's share to let go of; the caller then asks for service.
    pub(crate) fn push_cancelled(&self, node: NonNull<Waiter>) {
        self.waiters.fetch_sub(1, Ordering::Relaxed);
        // SAFETY: the queue's share keeps the node alive; the cancel was won, so
        // `next_cancelled` is the owner's until this push publishes it (a node is
        // cancelled at most once).
        let _ = push(
            &self.cancelled,
            node,
            unsafe { node.as_ref() }.next_cancelled(),
        );
    }

    /// Whether cancelled nodes wait to be let go and nobody is serving: two
    /// loads, a hint (a serve is always safe, and a missed one is made by the next
    /// parker or release).
    pub(crate) fn reclaim_due(&self) -> bool {
        !self.cancelled.load(Ordering::Relaxed).is_null()
            && self.role.word.load(Ordering::Relaxed) == 0
    }

    /// A shrink posts `units` for the server to retire; the caller then sets
    /// `RETIRING` and asks for service.
    pub(crate) fn post_retirement(&self, units: usize) {
        self.role.retire_posted.fetch_add(units, Ordering::AcqRel);
        self.role.lowered.store(true, Ordering::Release);
    }

    /// A forget that lowered the capacity posts it (so the server sweeps), with
    /// the units it forgot beyond the capacity: those were owed to a retirement,
    /// and settle it. The caller then asks for service.
    pub(crate) fn post_forget(&self, owed: usize) {
        if owed != 0 {
            self.role.settle_posted.fetch_add(owed, Ordering::AcqRel);
        }
        self.role.lowered.store(true, Ordering::Release);
    }

    /// Serves the queue now, or leaves it to the thread that is serving. Never
    /// waits: at worst one CAS on `role` and return.
    pub(crate) fn serve(&self, state: &State) {
        if self.take_role() {
            #[cfg(test)]
            self.roles_taken.fetch_add(1, Ordering::Relaxed);
            self.serve_and_release(state);
        }
    }

    /// Takes the role if it is free; if it is held, sets `PENDING` for the holder.
    /// Returns whether the role was taken.
    ///
    /// It always writes, even when `PENDING` is already set: as a read-modify-write
    /// it is ordered against the holder's releasing `swap`, which either reads it
    /// (and with it everything this thread did before, `AcqRel`) or comes first, in
    /// which case this CAS finds the role free. A plain load there would let the two
    /// miss each other (a store-buffering race loom found in the first design).
    fn take_role(&self) -> bool {
        let mut role = self.role.word.load(Ordering::Relaxed);
        loop {
            if role & PENDING != 0 && !Mechanism::RoleAlwaysWrites.on() {
                return false;
            }
            let next = if role == 0 { LOCKED } else { role | PENDING };
            match self.role.word.compare_exchange_weak(
                role,
                next,
                Ordering::AcqRel,
                Ordering::Relaxed,
            ) {
                Ok(_) => return role == 0,
                Err(actual) => role = actual,
            }
        }
    }

    /// With the role held: serves, releases the role, wakes, and goes again while a
    /// wake batch was full or someone asked for service meanwhile.
    fn serve_and_release(&self, state: &State) {
        loop {
            let mut wakers = WakeList::new();
            // SAFETY: we hold the role.
            let more = unsafe { self.serve_pass(state, &mut wakers) };
            let asked = self.role.word.swap(0, Ordering::AcqRel) & PENDING != 0;
            wakers.wake_all();
            if !(more || asked) || !self.take_role() {
                return;
            }
        }
    }

    /// One pass: absorb the stacks, grant from the head, and clear `QUEUED` if the
    /// list ran empty and nobody joined meanwhile. Returns whether to go again at
    /// once (the wake batch filled).
    ///
    /// # Safety
    /// The caller holds the role.
    unsafe fn serve_pass(&self, state: &State, wakers: &mut WakeList) -> bool {
        // SAFETY: the caller holds the role, which guards the server's state.
        self.role.server.with_mut(|server| unsafe {
            let server = &mut *server;
            loop {
                self.absorb(state, &mut server.list);
                self.settle(state, server);
                if self.role.lowered.swap(false, Ordering::AcqRel) {
                    server.sweep = true;
                }
                if server.sweep {
                    if !self.sweep_oversize(state.capacity(), &mut server.list, wakers) {
                        // The wake batch filled: wake it, and sweep on next pass.
                        return true;
                    }
                    server.sweep = false;
                }
                let stop = if state.load() & CLOSED != 0 {
                    self.close_list(state, server, wakers)
                } else if server.debt > 0 && Mechanism::DebtBeforeGrants.on() {
                    // No grant while units are owed to the retirement: the free
                    // ones went to it, and a release racing this pass asked for
                    // service, so the next pass pays with its units first.
                    Stop::HeadDoesNotFit
                } else {
                    self.grant_from_head(state, &mut server.list, wakers)
                };
                let mut flags = if server.debt == 0 { RETIRING } else { 0 };
                match stop {
                    Stop::BatchFull => return true,
                    Stop::HeadDoesNotFit => {}
                    Stop::Empty => flags |= QUEUED,
                }
                if flags == 0 || state.try_clear(flags) {
                    return false;
                }
                // A parker joined or a shrink posted since we looked: look again.
            }
        })
    }

    /// Takes both stacks: links the arrivals at the tail in arrival order, then
    /// unlinks every cancelled node and lets go of it.
    ///
    /// The cancelled stack is taken first: a node's arrival push happens before its
    /// cancel push, so every node named by an entry taken here is either in the
    /// list already or in the arrivals taken just after.
    ///
    /// # Safety
    /// The caller holds the role.
    unsafe fn absorb(&self, state: &State, list: &mut List) {
        state.clear_arrived();
        // `AcqRel`: a canceller whose push comes after this swap reads it, and with
        // it every release before this pass (`Semaphore::cancel`).
        let take = |stack: &AtomicPtr<Waiter>| {
            stack.swap(ptr::null_mut(), stack_ordering(Ordering::Acquire))
        };
        let (cancelled, arrivals) = if Mechanism::CancelsFirst.on() {
            let cancelled = take(&self.cancelled);
            (cancelled, take(&self.arrivals))
        } else {
            let arrivals = take(&self.arrivals);
            (take(&self.cancelled), arrivals)
        };

        // SAFETY: the swaps acquired the pushes, so the nodes and their stack links
        // are visible and now the server's (the caller holds the role); the queue's
        // share keeps every node alive until `release_queue_ref` below or a later
        // resolve, and each node is named by at most one cancel entry.
        unsafe {
            // The stack is newest first: reverse it, reusing the links.
            let mut node = NonNull::new(arrivals);
            let mut oldest_first = None;
            while let Some(n) = node {
                let link = n.as_ref().next_arrival();
                node = link.get();
                link.set(oldest_first.map_or(ptr::null_mut(), NonNull::as_ptr));
                oldest_first = Some(n);
            }
            let mut node = oldest_first;
            while let Some(n) = node {
                node = n.as_ref().next_arrival().get();
                // A node cancelled already is not linked: its cancel entry (taken
                // now or later) lets go of it.
                if n.as_ref().phase() == status::WAITING {
                    list.push_back(n);
                } else {
                    n.as_ref().set_place(Place::Unlinked);
                }
            }

            let mut node = NonNull::new(cancelled);
            while let Some(n) = node {
                node = n.as_ref().next_cancelled().get();
                match n.as_ref().links().place {
                    Place::Linked => list.remove(n),
                    Place::Unlinked => {}
                    // Would mean the node is still on the arrivals stack, to be
                    // taken (and read) after this entry lets go of it.
                    Place::Arriving => {
                        debug_assert!(false, "a cancel entry overtook its node's arrival")
                    }
                }
                if Mechanism::ReleaseShare.on() {
                    release_cancelled(n);
                }
            }
        }
    }

    /// Grants from the head while the head fits; a head that asks for more than
    /// the capacity (lowered since it parked) fails with `EXCEEDS`.
    ///
    /// # Safety
    /// The caller holds the role.
    unsafe fn grant_from_head(
        &self,
        state: &State,
        list: &mut List,
        wakers: &mut WakeList,
    ) -> Stop {
        while let Some(head) = list.front() {
            if wakers.is_full() {
                return Stop::BatchFull;
            }
            // SAFETY: linked nodes are alive (the queue's share) and the links are
            // ours (the role).
            let node = unsafe { head.as_ref() };
            if node.phase() == status::CANCELLED {
                // Its cancel entry is on its way and lets go of it.
                // SAFETY: as above.
                unsafe { list.remove(head) };
                continue;
            }
            let outcome = if node.units > state.capacity() {
                status::EXCEEDS
            } else {
                match state.take_for_head(node.units) {
                    HeadTake::Taken => status::GRANTED,
                    HeadTake::Closed => status::CLOSED,
                    HeadTake::DoesNotFit => return Stop::HeadDoesNotFit,
                }
            };
            // SAFETY: as above.
            unsafe { self.resolve(state, list, head, outcome, wakers) };
        }
        Stop::Empty
    }

    /// After a close: every request fails with `CLOSED`, in any order, and every
    /// drain waiter (a node of 0 units) is granted once all units are back. Drain
    /// waiters stay listed until then, keeping `QUEUED` set so that the release
    /// that brings the last unit back serves them.
    ///
    /// # Safety
    /// The caller holds the role.
    unsafe fn close_list(&self, state: &State, server: &mut Server, wakers: &mut WakeList) -> Stop {
        let drained = server.debt == 0 && available(state.load()) == state.capacity();
        let mut drain_waiters = false;
        let mut next = server.list.front();
        while let Some(node) = next {
            if wakers.is_full() {
                return Stop::BatchFull;
            }
            // SAFETY: linked nodes are alive and their links ours, as above; the
            // next link is read before `node` may leave the list.
            let (waiter, after) = unsafe { (node.as_ref(), node.as_ref().links().next) };
            next = after;
            if waiter.phase() == status::CANCELLED {
                // SAFETY: as above.
                unsafe { server.list.remove(node) };
            } else if waiter.units != 0 {
                // SAFETY: as above.
                unsafe { self.resolve(state, &mut server.list, node, status::CLOSED, wakers) };
            } else if drained {
                // SAFETY: as above; a drain waiter takes no units.
                unsafe { self.resolve(state, &mut server.list, node, status::GRANTED, wakers) };
            } else {
                drain_waiters = true;
            }
        }
        if drain_waiters && Mechanism::DrainKeepsQueued.on() {
            Stop::HeadDoesNotFit
        } else {
            Stop::Empty
        }
    }

    /// Takes what shrinks and forgets posted into the debt and pays it from the
    /// free units. Units settled by a forget after this server (or an earlier one)
    /// already retired some for them come back: the debt never goes below zero.
    fn settle(&self, state: &State, server: &mut Server) {
        server.debt += self.role.retire_posted.swap(0, Ordering::AcqRel);
        let settled = self.role.settle_posted.swap(0, Ordering::AcqRel);
        if settled > server.debt {
            // Retired for a debt a forget has since covered: give them back.
            state.give_back(settled - server.debt);
            server.debt = 0;
        } else {
            server.debt -= settled;
        }
        server.debt -= state.retire(server.debt);
    }

    /// After the capacity was lowered: every listed request for more than it
    /// fails with `EXCEEDS`, wherever it waits (a head blocked by a larger one
    /// would otherwise keep it waiting). Returns `false` if the wake batch filled
    /// first.
    ///
    /// # Safety
    /// The caller holds the role.
    unsafe fn sweep_oversize(
        &self,
        capacity: usize,
        list: &mut List,
        wakers: &mut WakeList,
    ) -> bool {
        let mut next = list.front();
        while let Some(node) = next {
            // SAFETY: as in `close_list`.
            let (waiter, after) = unsafe { (node.as_ref(), node.as_ref().links().next) };
            next = after;
            if waiter.units > capacity && waiter.phase() == status::WAITING {
                if wakers.is_full() {
                    return false;
                }
                // SAFETY: as above; no units are taken for an `EXCEEDS`.
                unsafe { self.resolve_untaken(list, node, status::EXCEEDS, wakers) };
            }
        }
        true
    }

    /// Unlinks `node` and resolves it with `outcome`: on success counts it out,
    /// queues its waker and lets go of the queue's share; if its owner cancelled
    /// first, gives back the units taken for a grant (its cancel entry lets go).
    ///
    /// # Safety
    /// The caller holds the role; `node` is linked.
    unsafe fn resolve(
        &self,
        state: &State,
        list: &mut List,
        node: NonNull<Waiter>,
        outcome: usize,
        wakers: &mut WakeList,
    ) {
        // SAFETY: the caller's contract.
        let units = unsafe { node.as_ref() }.units;
        // SAFETY: the caller's contract.
        let resolved = unsafe { self.resolve_untaken(list, node, outcome, wakers) };
        if !resolved && outcome == status::GRANTED && units != 0 && Mechanism::GrantGivesBack.on() {
            state.give_back(units);
        }
    }

    /// As [`resolve`](Self::resolve), for an outcome that took no units. Returns
    /// whether the resolve won over a cancel.
    ///
    /// # Safety
    /// As [`resolve`](Self::resolve).
    unsafe fn resolve_untaken(
        &self,
        list: &mut List,
        node: NonNull<Waiter>,
        outcome: usize,
        wakers: &mut WakeList,
    ) -> bool {
        // SAFETY: the caller's contract.
        unsafe { list.remove(node) };
        // SAFETY: the queue's share keeps it alive until the release below.
        match unsafe { node.as_ref() }.resolve(outcome) {
            Some(waker) => {
                self.waiters.fetch_sub(1, Ordering::Relaxed);
                wakers.push(waker);
                if Mechanism::ReleaseShare.on() {
                    // SAFETY: resolved by us, so no cancel entry will name it; this
                    // is the queue's last touch.
                    unsafe { release_queue_ref(node) };
                }
                true
            }
            // The owner cancelled first; its entry lets go of the node.
            None => false,
        }
    }

    /// Lets go of every node still queued, when the semaphore is dropped. Only
    /// nodes of futures that were leaked (`mem::forget`) while parked can be left.
    pub(crate) fn drain_on_drop(&mut self, state: &State) {
        // SAFETY: `&mut self`: nobody else can hold the role or push.
        self.role.server.with_mut(|server| unsafe {
            let list = &mut (*server).list;
            self.absorb(state, list);
            while let Some(head) = list.front() {
                list.remove(head);
                release_queue_ref(head);
            }
        });
    }
}

/// Pushes `node` onto a Treiber stack through its `link`, which only the pusher
/// touches until the push succeeds. Returns the head it linked to.
///
/// Push-only stacks taken whole by a swap have no ABA problem for the algorithm: a
/// CAS that succeeds links the node to whatever node is at the head at that
/// instant. The link is an address with exposed provenance so that it also names
/// that node in Rust's memory model when the address was reused ([`StackLink`]).
fn push(stack: &AtomicPtr<Waiter>, node: NonNull<Waiter>, link: &StackLink) -> *mut Waiter {
    // Anyone may link to this node by address from now on.
    let _ = node.as_ptr().expose_provenance();
    let mut head = stack.load(Ordering::Relaxed);
    loop {
        // SAFETY: the node is not published until the CAS below succeeds.
        unsafe { link.set(head) };
        match stack.compare_exchange_weak(
            head,
            node.as_ptr(),
            stack_ordering(Ordering::Release),
            Ordering::Relaxed,
        ) {
            Ok(_) => return head,
            Err(actual) => head = actual,
        }
    }
}

/// The ordering of the stack pushes and of the server's swaps that take them:
/// `AcqRel` both ways, so that a push after a swap reads it (and what the server
/// did before it). `Semaphore::cancel` relies on that to skip asking for service
/// when no unit is free. The negative control switches it to the bare minimum
/// (`weak`: `Release` for a push, `Acquire` for a swap).
#[inline(always)]
fn stack_ordering(weak: Ordering) -> Ordering {
    if Mechanism::StackAcqRel.on() {
        Ordering::AcqRel
    } else {
        weak
    }
}

/// The server's FIFO: a doubly linked list through the nodes' `links`.
pub(crate) struct List {
    head: Option<NonNull<Waiter>>,
    tail: Option<NonNull<Waiter>>,
}

impl List {
    const fn new() -> Self {
        Self {
            head: None,
            tail: None,
        }
    }

    fn front(&self) -> Option<NonNull<Waiter>> {
        self.head
    }

    /// Appends `node`.
    ///
    /// # Safety
    /// The caller is the server; `node` is alive and not linked.
    unsafe fn push_back(&mut self, node: NonNull<Waiter>) {
        // SAFETY: the caller's contract; the tail is linked, hence alive.
        unsafe {
            debug_assert_eq!(
                node.as_ref().links().place,
                Place::Arriving,
                "list corrupted: a node linked twice"
            );
            node.as_ref().set_links(Links {
                prev: self.tail,
                next: None,
                place: Place::Linked,
            });
            match self.tail {
                Some(tail) => {
                    let mut links = tail.as_ref().links();
                    links.next = Some(node);
                    tail.as_ref().set_links(links);
                }
                None => self.head = Some(node),
            }
        }
        self.tail = Some(node);
    }

    /// Unlinks `node`.
    ///
    /// # Safety
    /// The caller is the server; `node` is linked in this list.
    unsafe fn remove(&mut self, node: NonNull<Waiter>) {
        // SAFETY: the caller's contract; linked neighbours are alive.
        unsafe {
            let Links { prev, next, place } = node.as_ref().links();
            debug_assert_eq!(
                place,
                Place::Linked,
                "list corrupted: a node unlinked twice"
            );
            match prev {
                Some(prev) => {
                    let mut links = prev.as_ref().links();
                    links.next = next;
                    prev.as_ref().set_links(links);
                }
                None => self.head = next,
            }
            match next {
                Some(next) => {
                    let mut links = next.as_ref().links();
                    links.prev = prev;
                    next.as_ref().set_links(links);
                }
                None => self.tail = prev,
            }
            node.as_ref().set_links(Links {
                prev: None,
                next: None,
                place: Place::Unlinked,
            });
        }
    }
}
