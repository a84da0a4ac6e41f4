//! The wait queue without `alloc`: two lock-free stacks any thread pushes onto,
//! and a FIFO list only the server (the role holder, `serving.rs`) touches. The
//! nodes live in the acquire futures (`waiter.rs`).
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
//!    handled up to the last push whose pusher then asked for service.

use core::pin::Pin;
use core::ptr::{self, NonNull};
use core::task::Waker;

use super::serving::{join_needs_service, Role, Stop, Waiters};
use super::state::{available, HeadTake, State, CLOSED};
use super::wait_status::status;
use super::waiter::{release_queue_ref, Links, NodeSlot, Place, StackLink, Waiter};
use super::wake_list::WakeList;
use crate::loom::loom_const_fn;
use crate::loom::sync::{AtomicPtr, AtomicUsize, Ordering, UnsafeCell};
use crate::mechanism::Mechanism;

/// What an acquire future holds of its parked request.
pub(crate) type Slot = NodeSlot;

pub(crate) struct WaitQueue {
    /// Nodes pushed by parkers, newest first.
    arrivals: AtomicPtr<Waiter>,
    /// Nodes pushed by cancelling owners, newest first.
    cancelled: AtomicPtr<Waiter>,
    /// The serving role, which guards `list`.
    pub(crate) role: Role,
    /// # Safety
    /// The role holder's only.
    list: UnsafeCell<List>,
    /// Joined, unresolved waiters, for diagnostics.
    waiters: AtomicUsize,
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
                role: Role::new(),
                list: UnsafeCell::new(List::new()),
                waiters: AtomicUsize::new(0),
            }
        }
    }

    /// Requests parked right now.
    pub(crate) fn waiters(&self) -> usize {
        self.waiters.load(Ordering::Relaxed)
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
                .compare_exchange(node.as_ptr(), below, STACK_ORDERING, Ordering::Relaxed)
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
    fn push_cancelled(&self, node: NonNull<Waiter>) {
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

    /// Serves the queue now, or leaves it to the thread that is serving.
    pub(crate) fn serve(&self, state: &State) {
        self.role.serve(state, self);
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
    unsafe fn absorb_into(&self, list: &mut List) {
        let take = |stack: &AtomicPtr<Waiter>| stack.swap(ptr::null_mut(), STACK_ORDERING);
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
                    release_queue_ref(n);
                }
            }
        }
    }

    /// Grants from the head while the head fits; a head that asks for more than
    /// the capacity (lowered since it parked) fails with `EXCEEDS`.
    ///
    /// # Safety
    /// The caller holds the role.
    unsafe fn grant_from_list(
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
                    // A shrink posted since this pass settled: it set
                    // `ARRIVED`, so the pass goes round and pays it first.
                    HeadTake::DoesNotFit | HeadTake::Retiring => return Stop::HeadDoesNotFit,
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
    unsafe fn close_list(
        &self,
        state: &State,
        drained: bool,
        list: &mut List,
        wakers: &mut WakeList,
    ) -> Stop {
        let mut drain_waiters = false;
        let mut next = list.front();
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
                unsafe { list.remove(node) };
            } else if waiter.units != 0 {
                // SAFETY: as above.
                unsafe { self.resolve(state, list, node, status::CLOSED, wakers) };
            } else if drained {
                // SAFETY: as above; a drain waiter takes no units.
                unsafe { self.resolve(state, list, node, status::GRANTED, wakers) };
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

    /// After the capacity was lowered: every listed request for more than it
    /// fails with `EXCEEDS`, wherever it waits (a head blocked by a larger one
    /// would otherwise keep it waiting). Returns `false` if the wake batch filled
    /// first.
    ///
    /// # Safety
    /// The caller holds the role.
    unsafe fn sweep_list(&self, capacity: usize, list: &mut List, wakers: &mut WakeList) -> bool {
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
        match unsafe { node.as_ref() }.status.resolve(outcome) {
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
    pub(crate) fn drain_on_drop(&mut self) {
        // SAFETY: `&mut self`: nobody else can hold the role or push.
        self.list.with_mut(|list| unsafe {
            let list = &mut *list;
            self.absorb_into(list);
            while let Some(head) = list.front() {
                list.remove(head);
                release_queue_ref(head);
            }
        });
    }
}

impl Waiters for WaitQueue {
    unsafe fn absorb(&self, _state: &State) {
        // SAFETY: the caller holds the role, which guards the list.
        self.list
            .with_mut(|list| unsafe { self.absorb_into(&mut *list) });
    }

    unsafe fn sweep_oversize(&self, capacity: usize, wakers: &mut WakeList) -> bool {
        // SAFETY: as in `absorb`.
        self.list
            .with_mut(|list| unsafe { self.sweep_list(capacity, &mut *list, wakers) })
    }

    unsafe fn close(&self, state: &State, drained: bool, wakers: &mut WakeList) -> Stop {
        // SAFETY: as in `absorb`.
        self.list
            .with_mut(|list| unsafe { self.close_list(state, drained, &mut *list, wakers) })
    }

    unsafe fn grant_from_head(&self, state: &State, wakers: &mut WakeList) -> Stop {
        // SAFETY: as in `absorb`.
        self.list
            .with_mut(|list| unsafe { self.grant_from_list(state, &mut *list, wakers) })
    }
}

/// A parked request's life, as the semaphore drives it.
impl WaitQueue {
    /// Parks a request the fast path refused: pushes its node, joins, and asks
    /// for service if the join shows the node could be resolved now. Returns the
    /// node's phase (`WAITING` unless it was resolved meanwhile).
    pub(crate) fn park(
        &self,
        state: &State,
        slot: Pin<&mut Slot>,
        units: usize,
        waker: Waker,
    ) -> usize {
        let share = slot.park(units, waker);
        // SAFETY: the slot keeps the node where it is until the queue lets go.
        let node = unsafe { share.as_ref() };
        self.push_arrival(share);
        let prev = state.join();
        let resolved = node.phase() != status::WAITING;
        // Cancelled nodes need no parker to serve them: a cancel that pushed
        // one served, or left the pass to the role's holder.
        let oversize = self.role.sweep_if_oversize(state, units);
        if oversize || join_needs_service(prev, units, resolved) {
            self.serve(state);
        }
        node.phase()
    }

    /// A re-poll of a parked request: its phase, with `waker` registered if it
    /// is still waiting.
    pub(crate) fn repoll(slot: &Slot, waker: &Waker) -> usize {
        slot.get().expect("parked").status.register(waker)
    }

    /// The request's outcome was read: nothing to let go of (the node is the
    /// future's, and the queue let go of it when it resolved it).
    pub(crate) fn finish(&self, _slot: Pin<&mut Slot>) {}

    /// Gives up a parked request (its future is being dropped). Returns the
    /// units of a grant it had not taken, for the caller to release.
    pub(crate) fn cancel(&self, state: &State, slot: Pin<&mut Slot>) -> usize {
        let node = slot.share().expect("a parked request has a node");
        // SAFETY: the slot keeps the node until the queue lets go.
        let (phase, units) = unsafe { (node.as_ref().status.cancel(), node.as_ref().units) };
        match phase {
            status::WAITING => {
                // SAFETY: our cancel won.
                let waker = unsafe { node.as_ref().status.take_waker() };
                let withdrawn = self.withdraw_arrival(node);
                if withdrawn {
                    // No server saw the node: the queue is done with it.
                    // SAFETY: withdrawn, so the queue will never touch it again.
                    unsafe { release_queue_ref(node) };
                } else {
                    self.push_cancelled(node);
                }
                // It may have been the head, blocking requests that fit in the
                // free units (Go's canceled-waiter-at-the-front bug): then serve.
                // And the slot's drop waits for the server to let go of a node
                // it may have seen, so a cancel that pushed an entry serves.
                let state_now = state.load();
                let units_free = available(state_now) > 0 || state_now & CLOSED != 0;
                if Mechanism::CancelServes.on() && (units_free || !withdrawn) {
                    self.serve(state);
                }
                drop(waker); // user code, after all our work
                0
            }
            // A drain waiter (0 units) holds nothing to give back.
            status::GRANTED if Mechanism::CancelReleasesGrant.on() => units,
            _ => 0,
        }
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
        match stack.compare_exchange_weak(head, node.as_ptr(), STACK_ORDERING, Ordering::Relaxed) {
            Ok(_) => return head,
            Err(actual) => head = actual,
        }
    }
}

/// The ordering of the stack pushes and of the server's swaps that take them:
/// `Release` for a push and `Acquire` for a swap publish the node and its link
/// to the server. Both are `AcqRel`, so that a push after a swap also reads it
/// (and what the server did before it); nothing relies on that since a cancel
/// that pushed always serves, and a read-modify-write pays nothing for it.
const STACK_ORDERING: Ordering = Ordering::AcqRel;

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
