//! Blocking acquires for threads (feature `std`): the same request in the same
//! FIFO queue as the async ones, polled by a thread that parks between polls.

use alloc::sync::Arc;
use alloc::task::Wake;
use core::future::Future;
use core::pin::{pin, Pin};
use core::task::{Context, Poll, Waker};
use std::thread::{self, Thread};
use std::time::Instant;

use super::error::{AcquireError, AcquireTimeoutError};
use super::permit::Permit;
use super::Semaphore;

/// Wakes a parked thread.
struct Unpark(Thread);

impl Wake for Unpark {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }
}

/// Polls futures on the current thread and parks it between polls.
pub(crate) struct ThreadWaker(Waker);

impl ThreadWaker {
    /// A waker that unparks the current thread.
    pub(crate) fn new() -> Self {
        Self(Waker::from(Arc::new(Unpark(thread::current()))))
    }

    /// Polls `future` once with this thread's waker.
    pub(crate) fn poll<F: Future + ?Sized>(&self, future: Pin<&mut F>) -> Poll<F::Output> {
        future.poll(&mut Context::from_waker(&self.0))
    }

    /// Parks until woken (or spuriously), or until `deadline`. Returns `false` if
    /// the deadline has passed, without parking.
    pub(crate) fn park(&self, deadline: Option<Instant>) -> bool {
        match deadline {
            None => thread::park(),
            Some(deadline) => {
                let now = Instant::now();
                if now >= deadline {
                    return false;
                }
                thread::park_timeout(deadline - now);
            }
        }
        true
    }
}

/// Polls `future` on this thread, parking between polls, until it completes or
/// `deadline` passes (then it is dropped, which cancels it).
pub(crate) fn block_until<F: Future>(future: F, deadline: Option<Instant>) -> Option<F::Output> {
    let mut future = pin!(future);
    let thread = ThreadWaker::new();
    loop {
        if let Poll::Ready(output) = thread.poll(future.as_mut()) {
            return Some(output);
        }
        if !thread.park(deadline) {
            return None;
        }
    }
}

impl Semaphore {
    /// [`acquire`](Self::acquire) for a thread: blocks until the units are granted,
    /// in the same FIFO order as async requests.
    ///
    /// # Errors
    ///
    /// As for [`acquire`](Self::acquire).
    ///
    /// # Panics
    ///
    /// If `units == 0`.
    pub fn acquire_blocking(&self, units: usize) -> Result<Permit<'_>, AcquireError> {
        block_until(self.acquire(units), None).expect("no deadline")
    }

    /// [`acquire_blocking`](Self::acquire_blocking) with a deadline: when it passes
    /// first, the request leaves the queue and [`AcquireTimeoutError::TimedOut`] is
    /// returned.
    ///
    /// # Errors
    ///
    /// [`AcquireTimeoutError::TimedOut`] at the deadline; otherwise as for
    /// [`acquire`](Self::acquire).
    ///
    /// # Panics
    ///
    /// If `units == 0`.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::{Duration, Instant};
    /// use admit::{AcquireTimeoutError, Semaphore};
    ///
    /// let sem = Semaphore::new(1);
    /// let held = sem.try_acquire(1).unwrap();
    /// let soon = Instant::now() + Duration::from_millis(10);
    /// assert_eq!(sem.acquire_blocking_until(1, soon).unwrap_err(), AcquireTimeoutError::TimedOut);
    /// drop(held);
    /// assert!(sem.acquire_blocking_until(1, soon).is_ok());
    /// ```
    pub fn acquire_blocking_until(
        &self,
        units: usize,
        deadline: Instant,
    ) -> Result<Permit<'_>, AcquireTimeoutError> {
        match block_until(self.acquire(units), Some(deadline)) {
            Some(result) => result.map_err(AcquireTimeoutError::from),
            None => Err(AcquireTimeoutError::TimedOut),
        }
    }
}
