//! The wait queue without `alloc`: an intrusive doubly-linked list of nodes
//! that live inside the pinned acquire futures, guarded by a critical section
//! (`critical-section`, as embassy-sync guards its queues).
//!
//! - **Enqueue**: in one section, link the node at the tail (its owner then
//!   joins in the state word).
//! - **Re-poll**: no section: the status word's `REGISTERING` protocol
//!   (`wait_status.rs`).
//! - **Cancel**: in one section, the phase `WAITING → CANCELLED` and, if that
//!   won, unlink the node.
//! - **Finish** (the owner read a final phase): one empty section before the
//!   future may let go of the node.
//! - **Serve**: one section per request resolved (or skipped, in a walk):
//!   unlink it, then resolve it and take its waker. The waker is woken after
//!   the role is released, outside every section.
//!
//! # Invariants
//!
//! 1. **Links inside the section.** A node's links and the list are touched
//!    only inside the section; a node's units never change once it exists.
//! 2. **Listed while waiting.** A node is listed exactly while its phase is
//!    `WAITING`: it is linked before it can be resolved, and whoever moves the
//!    phase off `WAITING` (the server's resolve, the owner's cancel) does so in
//!    the section that unlinks it.
//! 3. **Server inside the section.** The server touches a node only inside a
//!    section. The owner's finish (or cancel) enters the section after the
//!    phase it read was written, so the server is done with the node before its
//!    memory can go.
//! 4. **Bounded sections.** Each call holds the section for a bounded number of
//!    steps, and nothing waits for anything else: no drop waits for a serving
//!    pass, and every call is safe from an interrupt handler that preempts any
//!    other (the section masks it on a single core).
//! 5. **No lost wake-up at a stop.** A server that finds the head does not fit
//!    read the units inside the section; a cancel of that head enters the
//!    section after, and its read of the units sees what the server saw. This
//!    is how the list keeps `queue/` invariant *a stop that loses nothing*.

use core::marker::PhantomPinned;
use core::mem::ManuallyDrop;
use core::pin::Pin;
use core::ptr::NonNull;
use core::task::Waker;

use super::{Cancel, Queue, Stop};
use crate::loom::loom_const_fn;
use crate::loom::sync::UnsafeCell;
use crate::loom::CriticalSection;
use crate::safeguard::Safeguard;
use crate::semaphore::state::State;
use crate::semaphore::wait_status::{status, WaitStatus};
use crate::semaphore::wake_list::WakeList;

#[cfg(all(test, not(admit_loom), not(admit_shuttle)))]
mod tests;

pub(crate) struct ListQueue {
    list: CriticalSection<List>,
}

/// The list, inside the section.
struct List {
    head: Option<NonNull<Node>>,
    tail: Option<NonNull<Node>>,
    /// A walk's next node (a close's, a sweep's), kept right by every unlink.
    walk: Option<NonNull<Node>>,
}

// SAFETY: the nodes it names are touched only inside the section
// (invariant *links inside the section*), whichever thread or handler holds it.
unsafe impl Send for List {}

/// A parked request: inside its future, pinned.
struct Node {
    /// Its waker is taken by the slot's drop (`ManuallyDrop`: no field drop
    /// follows it).
    status: ManuallyDrop<WaitStatus>,
    /// Never changes.
    units: usize,
    /// # Safety
    /// Inside the section only.
    links: UnsafeCell<Links>,
    /// The list points into the node while the owner holds `&mut` of its
    /// future: `!Unpin` keeps such a reference from asserting uniqueness over
    /// the node (miri's Stacked Borrows reports it otherwise).
    _pinned: PhantomPinned,
}

#[derive(Clone, Copy)]
struct Links {
    prev: Option<NonNull<Node>>,
    next: Option<NonNull<Node>>,
}

/// What an acquire future holds of its request: the node, once parked.
pub(crate) struct Slot {
    /// Made at the first park, in place: an acquire granted at once writes
    /// nothing here.
    node: Option<Node>,
    /// Linked, or resolved and not finished: the owner's only.
    parked: bool,
    _pinned: PhantomPinned,
}

// SAFETY: the node's status is atomics plus a waker cell whose owner the status
// word decides (`wait_status.rs`); its links are touched only inside the
// section; `parked` only through the owner's `&mut`.
unsafe impl Send for Slot {}
// SAFETY: as above: a shared `Slot` is read only through atomics.
unsafe impl Sync for Slot {}

impl Slot {
    #[inline]
    pub(crate) fn new(_units: usize) -> Slot {
        Slot {
            node: None,
            parked: false,
            _pinned: PhantomPinned,
        }
    }

    fn node(&self) -> &Node {
        self.node.as_ref().expect("parked")
    }
}

impl Node {
    fn new(units: usize, waker: Waker) -> Node {
        let status = WaitStatus::new(status::WAITING);
        // SAFETY: not listed yet: the waker cell is the owner's.
        unsafe { status.set_waker(Some(waker)) };
        Node {
            status: ManuallyDrop::new(status),
            units,
            links: UnsafeCell::new(Links {
                prev: None,
                next: None,
            }),
            _pinned: PhantomPinned,
        }
    }
}

impl Drop for Slot {
    #[inline]
    fn drop(&mut self) {
        if self.node.is_some() {
            self.drop_waker();
        }
    }
}

impl Slot {
    /// The node's waker, dropped when the future is: the only part of the node
    /// that owns anything; out of line, so the drop of a future granted at once
    /// stays a test of `node`.
    #[inline(never)]
    fn drop_waker(&mut self) {
        // SAFETY: the node is not listed and no server touches it (the owner
        // finished or cancelled it), so the cell is ours. Taken here rather
        // than by a field's drop so that loom sees the access, and reports a
        // server still inside the node.
        drop(unsafe { self.node().status.take_waker() });
    }
}

impl List {
    loom_const_fn! {
        fn new() -> List {
            List {
                head: None,
                tail: None,
                walk: None,
            }
        }
    }

    /// Links `node` at the tail.
    ///
    /// # Safety
    /// Inside the section; `node` is alive, pinned and not listed.
    unsafe fn push_back(&mut self, node: NonNull<Node>) {
        let prev = self.tail;
        // SAFETY: the caller's: the node is alive and nobody else touches its links.
        unsafe { node.as_ref() }.links.with_mut(|links| unsafe {
            *links = Links { prev, next: None };
        });
        match prev {
            // SAFETY: a listed node is alive (its future unlinks it before it goes).
            Some(prev) => unsafe { prev.as_ref() }
                .links
                .with_mut(|links| unsafe { (*links).next = Some(node) }),
            None => self.head = Some(node),
        }
        self.tail = Some(node);
        if self.walk.is_none() {
            // A walk that had run off the end picks it up.
            self.walk = Some(node);
        }
    }

    /// Unlinks `node`, moving a walk that was at it on to the next.
    ///
    /// # Safety
    /// Inside the section; `node` is listed.
    unsafe fn unlink(&mut self, node: NonNull<Node>) {
        // SAFETY: listed nodes are alive, and their links are the section's.
        let Links { prev, next } = unsafe { node.as_ref() }
            .links
            .with(|links| unsafe { *links });
        match prev {
            // SAFETY: as above.
            Some(prev) => unsafe { prev.as_ref() }
                .links
                .with_mut(|links| unsafe { (*links).next = next }),
            None => self.head = next,
        }
        match next {
            // SAFETY: as above.
            Some(next) => unsafe { next.as_ref() }
                .links
                .with_mut(|links| unsafe { (*links).prev = prev }),
            None => self.tail = prev,
        }
        if self.walk == Some(node) {
            self.walk = next;
        }
    }

    /// The node after `node`.
    ///
    /// # Safety
    /// Inside the section; `node` is listed.
    unsafe fn next(node: NonNull<Node>) -> Option<NonNull<Node>> {
        // SAFETY: the caller's.
        unsafe { node.as_ref() }
            .links
            .with(|links| unsafe { (*links).next })
    }
}

/// One section's worth of a serving walk.
enum Step {
    /// Resolved a request: its waker, if the owner was not registering.
    Resolved(Option<Waker>),
    /// Passed a request the walk leaves waiting.
    Skipped,
    /// Nothing further.
    Stop(Stop),
}

impl ListQueue {
    loom_const_fn! {
        pub(crate) fn new() -> ListQueue {
            ListQueue {
                list: CriticalSection::new(List::new()),
            }
        }
    }

    /// Unlinks `node` and resolves it with `outcome`; a grant's units are taken.
    ///
    /// # Safety
    /// Inside the section (`list` is its value); `node` is listed.
    unsafe fn resolve(list: &mut List, node: NonNull<Node>, outcome: usize) -> Step {
        // SAFETY: the caller's.
        unsafe { list.unlink(node) };
        // SAFETY: listed until just now, and the owner cannot let go of it
        // before it enters the section (invariant *server inside the section*).
        match unsafe { node.as_ref() }.status.resolve(outcome) {
            Some(waker) => Step::Resolved(waker),
            // Only a cancel resolves a node besides the server, and it unlinks
            // it in the same section: a listed node is waiting.
            None => unreachable!("a listed request was resolved"),
        }
    }

    /// Resolves with the outcome `decide` gives (none: leave it waiting) every
    /// listed request, from the head on, one section each. Returns `false` if
    /// the wake batch filled first.
    fn walk(
        &self,
        state: &State,
        wakers: &mut WakeList,
        decide: impl Fn(usize) -> Option<usize>,
    ) -> bool {
        self.list.with(|list| list.walk = list.head);
        loop {
            if wakers.is_full() {
                return false;
            }
            let step = self.list.with(|list| {
                let Some(node) = list.walk else {
                    return Step::Stop(Stop::Empty);
                };
                // SAFETY: listed, so alive; its units never change.
                match decide(unsafe { node.as_ref() }.units) {
                    // SAFETY: inside the section, and listed.
                    Some(outcome) => unsafe { Self::resolve(list, node, outcome) },
                    None => {
                        // SAFETY: as above.
                        list.walk = unsafe { List::next(node) };
                        Step::Skipped
                    }
                }
            });
            match step {
                Step::Resolved(waker) => self.resolved(state, waker, wakers),
                Step::Skipped => {}
                Step::Stop(_) => return true,
            }
        }
    }

    /// Counts a resolved request out and queues its waker.
    fn resolved(&self, state: &State, waker: Option<Waker>, wakers: &mut WakeList) {
        state.count_out();
        wakers.push(waker);
    }
}

impl Queue for ListQueue {
    type Slot = Slot;

    #[inline]
    fn enqueue<'s>(
        &self,
        slot: Pin<&'s mut Slot>,
        units: usize,
        _rank: u8,
        waker: Waker,
    ) -> &'s WaitStatus {
        // SAFETY: the slot is not moved: the node is linked where it is pinned.
        let slot = unsafe { slot.get_unchecked_mut() };
        debug_assert!(slot.node.is_none(), "a request parks once");
        // In place: the node is pinned with the slot from here on.
        let node = &*slot.node.insert(Node::new(units, waker));
        slot.parked = true;
        let node_ptr = NonNull::from(node);
        // SAFETY: inside the section; the node is pinned, alive until its owner
        // cancels or finishes (both enter the section), and not listed.
        self.list.with(|list| unsafe { list.push_back(node_ptr) });
        &node.status
    }

    #[inline]
    fn repoll(slot: &Slot, waker: &Waker) -> usize {
        slot.node().status.register(waker)
    }

    #[inline]
    fn finish(&self, slot: Pin<&mut Slot>) {
        // SAFETY: nothing is moved.
        let slot = unsafe { slot.get_unchecked_mut() };
        if core::mem::take(&mut slot.parked) && Safeguard::FinishEntersCriticalSection.on() {
            // The server that resolved the node did so in a section that ends
            // before this one begins (invariant *server inside the section*).
            self.list.with(|_| ());
        }
    }

    #[inline]
    fn cancel(&self, slot: Pin<&mut Slot>) -> Cancel {
        // SAFETY: nothing is moved.
        let slot = unsafe { slot.get_unchecked_mut() };
        if !core::mem::take(&mut slot.parked) {
            return Cancel::Lost(status::WAITING);
        }
        let node = slot.node();
        let phase = self.list.with(|list| {
            let phase = node.status.cancel();
            if phase == status::WAITING {
                // SAFETY: inside the section; a waiting node is listed.
                unsafe { list.unlink(NonNull::from(node)) };
            }
            phase
        });
        match phase {
            // SAFETY: our cancel won.
            status::WAITING => Cancel::Won(unsafe { node.status.take_waker() }),
            phase => Cancel::Lost(phase),
        }
    }

    #[inline]
    unsafe fn resolve_every(
        &self,
        state: &State,
        outcome: usize,
        wakers: &mut WakeList,
        matches: impl Fn(usize) -> bool,
    ) -> bool {
        self.walk(state, wakers, |units| matches(units).then_some(outcome))
    }

    #[inline]
    unsafe fn close(&self, state: &State, drained: bool, wakers: &mut WakeList) -> Stop {
        let done = self.walk(state, wakers, |units| match units {
            0 if drained => Some(status::GRANTED),
            // A drain waiter takes no units: it waits for every unit back.
            0 => None,
            _ => Some(status::SHUT_OUT),
        });
        if !done {
            Stop::BatchFull
        } else if self.list.with(|list| list.head.is_some()) {
            // Drain waiters are left, waiting for the last unit back.
            Stop::Blocked
        } else {
            Stop::Empty
        }
    }

    #[inline]
    unsafe fn grant_from_head(
        &self,
        state: &State,
        wakers: &mut WakeList,
        mut head: impl FnMut(usize) -> Result<usize, Stop>,
    ) -> Stop {
        loop {
            if wakers.is_full() {
                return Stop::BatchFull;
            }
            let step = self.list.with(|list| {
                let Some(first) = list.head else {
                    return Step::Stop(Stop::Empty);
                };
                // SAFETY: listed, so alive; its units never change.
                let units = unsafe { first.as_ref() }.units;
                match head(units) {
                    // SAFETY: inside the section; the head is listed.
                    Ok(outcome) => unsafe { Self::resolve(list, first, outcome) },
                    Err(stop) => Step::Stop(stop),
                }
            });
            match step {
                Step::Resolved(waker) => self.resolved(state, waker, wakers),
                Step::Skipped => {}
                Step::Stop(stop) => return stop,
            }
        }
    }
}
