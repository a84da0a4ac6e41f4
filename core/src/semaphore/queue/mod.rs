//! The wait queue: where a request the fast path refused waits, in arrival
//! order. Two implementations of one interface, [`Queue`]:
//!
//! - with `alloc`, [`cells`]: each request is a cell of a lock-free list of
//!   segments ([`segments`]), in ticket order. Lock-free on every path.
//! - without, [`list`]: each request is a node inside its pinned future, on an
//!   intrusive list guarded by a critical section, held for a bounded number of
//!   steps by each call. Safe from an interrupt handler.
//!
//! A queue is storage: where requests wait, in order, and how each is resolved
//! once. When to serve, and what the head gets, are the semaphore's rules
//! (`Semaphore::park`, `Semaphore::cancel`, `serving.rs`), written once for both.
//!
//! # What the serving pass may assume of a queue
//!
//! The pass (`serving.rs`) runs only in the serving role, one thread at a time,
//! and calls [`resolve_every`](Queue::resolve_every), [`close`](Queue::close),
//! [`shed`](Queue::shed) and [`grant_from_head`](Queue::grant_from_head). A
//! queue promises it:
//!
//! 1. **Arrival order.** A request is in the queue before it joins in the state
//!    word (`State::join`), and only the head is ever granted (FIFO).
//! 2. **One resolution.** A request leaves `WAITING` once (`wait_status.rs`): a
//!    grant, a close, an oversize failure or a shed by the pass, or a cancel by
//!    its owner. The loser of a grant and a cancel gives the units back (the pass if
//!    its grant lost, the owner if its cancel did).
//! 3. **A stop that loses nothing.** `grant_from_head` stops at a head the
//!    pass's rule refuses only so that a cancel of that head, coming after,
//!    sees the units the pass saw, and serves (`State::cancel_count_out`, or
//!    the critical section).
//! 4. **Bounded work.** Each call does a bounded amount of work per request it
//!    resolves, and stops with [`Stop::BatchFull`] when the wake batch is full.
//!    No user code (a waker) runs inside a call.
//!
//! The queue's owner-side calls ([`enqueue`](Queue::enqueue),
//! [`repoll`](Queue::repoll), [`finish`](Queue::finish), [`cancel`](Queue::cancel))
//! never wait for the pass.

#[cfg(feature = "alloc")]
pub(crate) mod cells;
#[cfg(not(feature = "alloc"))]
pub(crate) mod list;
#[cfg(feature = "alloc")]
pub(crate) mod segments;

use core::pin::Pin;
use core::task::Waker;

use super::state::State;
use super::wait_status::WaitStatus;
use super::wake_list::WakeList;

#[cfg(feature = "alloc")]
pub(crate) use cells::{CellQueue as WaitQueue, Slot};
#[cfg(not(feature = "alloc"))]
pub(crate) use list::{ListQueue as WaitQueue, Slot};

/// Where a walk of the waiting requests stopped.
pub(crate) enum Stop {
    /// The wake batch is full: let go of the role, wake, and go again.
    BatchFull,
    /// The queue cannot move until something else happens, which will ask for
    /// service: the head does not fit, a shrink is owed, the semaphore closed
    /// mid-pass, a cell claimed but unpublished meets no free unit, or after a
    /// close the drain waiters wait for every unit back.
    Blocked,
    /// Nobody is waiting.
    Empty,
}

/// What an owner's cancel found.
pub(crate) enum Cancel {
    /// The cancel won: the request is out of the queue, and this is its waker,
    /// to be dropped after the caller's work (user code).
    Won(Option<Waker>),
    /// It lost to this final phase, which the caller settles (a grant's units,
    /// a shed's count); `WAITING` if there was nothing to cancel.
    Lost(usize),
}

/// A wait queue: the owner's side (enqueue, re-poll, finish, cancel) and the
/// serving pass's (sweep, close, shed, grant). See the module docs for what
/// each side may assume.
pub(crate) trait Queue {
    /// What an acquire future holds of its parked request (structurally pinned).
    type Slot;

    /// Puts a request of `units` and `rank` (`shedding.rs`) the fast path
    /// refused in the queue, with `waker`: in arrival order, before its owner
    /// joins in the state word. Returns the request's status word, for the
    /// owner to read its phase after the join.
    fn enqueue<'s>(
        &self,
        slot: Pin<&'s mut Self::Slot>,
        units: usize,
        rank: u8,
        waker: Waker,
    ) -> &'s WaitStatus;

    /// A re-poll of a parked request: its phase, with `waker` registered if it
    /// is still waiting. Lock-free in both queues.
    fn repoll(slot: &Self::Slot, waker: &Waker) -> usize;

    /// The owner has read its request's final phase: it lets go of its place.
    fn finish(&self, slot: Pin<&mut Self::Slot>);

    /// Gives up a parked request (its future is being dropped).
    fn cancel(&self, slot: Pin<&mut Self::Slot>) -> Cancel;

    /// Resolves with `outcome` (which takes no units) every waiting request whose
    /// units `matches`, in queue order. Returns `false` if the wake batch filled
    /// first.
    ///
    /// # Safety
    /// The caller holds the role.
    unsafe fn resolve_every(
        &self,
        state: &State,
        outcome: usize,
        wakers: &mut WakeList,
        matches: impl Fn(usize) -> bool,
    ) -> bool;

    /// After a close: fails every request with `SHUT_OUT`, and grants the drain
    /// waiters (requests of 0 units) if `drained`, else leaves them waiting and
    /// stops with [`Stop::Blocked`].
    ///
    /// # Safety
    /// As for `resolve_every`.
    unsafe fn close(&self, state: &State, drained: bool, wakers: &mut WakeList) -> Stop;

    /// Resolves with `SHED` waiting requests of the ranks `shedding` has posted
    /// for, lowest rank first and oldest first, until their units cover what
    /// was posted (`shedding.rs`). Returns the units shed, or `None` if the wake
    /// batch filled first (what was left posted is put back).
    ///
    /// # Safety
    /// As for `resolve_every`.
    #[cfg(feature = "alloc")]
    unsafe fn shed(
        &self,
        state: &State,
        shedding: &super::shedding::Shedding,
        wakers: &mut WakeList,
    ) -> Option<usize>;

    /// Resolves waiting requests from the head, each with the outcome `head`
    /// gives for its units (taking them, for a grant), until `head` says stop.
    ///
    /// # Safety
    /// As for `resolve_every`.
    unsafe fn grant_from_head(
        &self,
        state: &State,
        wakers: &mut WakeList,
        head: impl FnMut(usize) -> Result<usize, Stop>,
    ) -> Stop;
}
