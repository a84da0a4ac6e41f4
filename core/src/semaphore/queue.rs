//! The wait queue: an intrusive, doubly linked FIFO of [`Waiter`] nodes that live
//! inside the pinned acquire futures themselves, so parking allocates nothing.
//!
//! # Invariants
//!
//! - Every node in the list is pinned and stays valid until it is unlinked: a
//!   future's `Drop` unlinks its node (under the queue lock) before the memory goes.
//! - The links of every node, and the list itself, are read and written only by
//!   the holder of the semaphore's queue lock.
//! - Nodes are in arrival order: only [`WaitList::push_back`] inserts.

use core::marker::PhantomPinned;
use core::ptr::NonNull;
use core::task::Waker;

use crate::loom::loom_const_fn;
use crate::loom::sync::{AtomicU8, Ordering, UnsafeCell};

/// Where a waiter is in its life. Written by the queue-lock holder (`Queued` →
/// `Granted` / `Closed`) with `Release`, read by the future's owner with `Acquire`,
/// so everything the lock holder did to the node happens-before the owner's read.
pub(crate) mod phase {
    /// Not yet polled; not in the queue.
    pub(crate) const IDLE: u8 = 0;
    /// In the queue, waiting for units.
    pub(crate) const QUEUED: u8 = 1;
    /// Unlinked by a lock holder that took the units for it; the future owns them
    /// until it returns them in a permit or drops.
    pub(crate) const GRANTED: u8 = 2;
    /// Unlinked by a lock holder because the semaphore closed.
    pub(crate) const CLOSED: u8 = 3;
    /// The future returned its result; the node is inert.
    pub(crate) const DONE: u8 = 4;
}

/// One parked request, embedded in an acquire future.
pub(crate) struct Waiter {
    /// Units requested; immutable.
    pub(crate) units: usize,
    /// One of [`phase`].
    pub(crate) phase: AtomicU8,
    /// # Safety
    /// Accessed only by the queue-lock holder.
    links: UnsafeCell<Links>,
    /// # Safety
    /// Accessed only by the queue-lock holder while the phase is `QUEUED`; taken by
    /// the lock holder before it publishes `GRANTED` or `CLOSED`.
    waker: UnsafeCell<Option<Waker>>,
    _pinned: PhantomPinned,
}

#[derive(Clone, Copy)]
struct Links {
    prev: Option<NonNull<Waiter>>,
    next: Option<NonNull<Waiter>>,
}

impl Waiter {
    loom_const_fn! {
        pub(crate) fn new(units: usize) -> Waiter {
            Waiter {
                units,
                phase: AtomicU8::new(phase::IDLE),
                links: UnsafeCell::new(Links { prev: None, next: None }),
                waker: UnsafeCell::new(None),
                _pinned: PhantomPinned,
            }
        }
    }

    #[inline]
    pub(crate) fn phase(&self) -> u8 {
        self.phase.load(Ordering::Acquire)
    }

    /// Swaps in a new waker, returning the old one for the caller to drop after it
    /// unlocks.
    ///
    /// # Safety
    /// The caller holds the queue lock.
    pub(crate) unsafe fn replace_waker(&self, waker: Waker) -> Option<Waker> {
        // SAFETY: the caller holds the queue lock, which guards `waker`.
        self.waker.with_mut(|w| unsafe { (*w).replace(waker) })
    }

    /// Takes the waker.
    ///
    /// # Safety
    /// The caller holds the queue lock.
    pub(crate) unsafe fn take_waker(&self) -> Option<Waker> {
        // SAFETY: the caller holds the queue lock, which guards `waker`.
        self.waker.with_mut(|w| unsafe { (*w).take() })
    }

    /// # Safety
    /// The caller holds the queue lock.
    unsafe fn links(&self) -> Links {
        // SAFETY: the caller holds the queue lock, which guards `links`.
        self.links.with_mut(|l| unsafe { *l })
    }

    /// # Safety
    /// The caller holds the queue lock.
    unsafe fn set_links(&self, links: Links) {
        // SAFETY: the caller holds the queue lock, which guards `links`.
        self.links.with_mut(|l| unsafe { *l = links })
    }
}

/// The FIFO of parked waiters. Guarded by the semaphore's queue lock.
pub(crate) struct WaitList {
    head: Option<NonNull<Waiter>>,
    tail: Option<NonNull<Waiter>>,
    len: usize,
}

impl WaitList {
    pub(crate) const fn new() -> Self {
        Self {
            head: None,
            tail: None,
            len: 0,
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.head.is_none()
    }

    /// The oldest waiter.
    pub(crate) fn front(&self) -> Option<NonNull<Waiter>> {
        self.head
    }

    /// Appends `node`.
    ///
    /// # Safety
    /// The caller holds the queue lock; `node` is pinned, not in the list, and stays
    /// valid until it is unlinked.
    pub(crate) unsafe fn push_back(&mut self, node: NonNull<Waiter>) {
        // SAFETY: the caller holds the lock; `node` and the current tail are valid
        // (list invariant).
        unsafe {
            node.as_ref().set_links(Links {
                prev: self.tail,
                next: None,
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
        self.len += 1;
    }

    /// Unlinks `node`.
    ///
    /// # Safety
    /// The caller holds the queue lock and `node` is in this list.
    pub(crate) unsafe fn remove(&mut self, node: NonNull<Waiter>) {
        // SAFETY: the caller holds the lock; `node` and its neighbours are in the
        // list, hence valid.
        unsafe {
            let Links { prev, next } = node.as_ref().links();
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
            });
        }
        self.len -= 1;
    }
}
