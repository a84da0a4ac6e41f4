//! A fixed batch of wakers collected under the queue lock and called after it is
//! released, so no user code (a waker) ever runs while the lock is held.

use core::mem::MaybeUninit;
use core::task::Waker;

/// Wakers taken from granted or closed waiters in one pass. The size bounds the
/// work done per lock hold; a pass that fills it unlocks, wakes, and goes again.
pub(crate) const WAKE_BATCH: usize = 32;

/// Entries `..len` are initialised, the rest are not. Uninitialised storage keeps
/// `new` free: a serving pass that grants nobody (the common case) writes nothing.
pub(crate) struct WakeList {
    wakers: [MaybeUninit<Waker>; WAKE_BATCH],
    len: usize,
}

impl WakeList {
    #[inline]
    pub(crate) const fn new() -> Self {
        Self {
            wakers: [const { MaybeUninit::uninit() }; WAKE_BATCH],
            len: 0,
        }
    }

    #[inline]
    pub(crate) fn is_full(&self) -> bool {
        self.len == WAKE_BATCH
    }

    /// Adds a waker; a waiter that never registered one (impossible for a parked
    /// waiter, but cheap to tolerate) is skipped.
    pub(crate) fn push(&mut self, waker: Option<Waker>) {
        debug_assert!(!self.is_full());
        if let Some(waker) = waker {
            self.wakers[self.len].write(waker);
            self.len += 1;
        }
    }

    fn pop(&mut self) -> Option<Waker> {
        if self.len == 0 {
            return None;
        }
        self.len -= 1;
        // SAFETY: entry `len` was initialised (it was below the old `len`) and is no
        // longer counted, so it is moved out exactly once.
        Some(unsafe { self.wakers[self.len].assume_init_read() })
    }

    /// Wakes every collected waker, last collected first. If one panics, the
    /// list's `Drop` wakes the rest while the panic unwinds (a second panic in the
    /// same batch aborts, as any panic during unwinding does); the queue itself was
    /// consistent before the first call.
    pub(crate) fn wake_all(&mut self) {
        while let Some(waker) = self.pop() {
            waker.wake();
        }
    }
}

/// Wakes what is left: nothing after a completed `wake_all`, the rest of the batch
/// when a waker panicked out of it.
impl Drop for WakeList {
    #[inline]
    fn drop(&mut self) {
        if self.len != 0 {
            self.wake_all();
        }
    }
}
