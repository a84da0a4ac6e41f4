//! [`Semaphore::drain`]: close, then wait until every unit is back.
//!
//! A drain waiter is a request for 0 units in the ordinary wait queue: it parks
//! like any request (cancel-safe, no lock), and the server grants it, taking
//! nothing, once the semaphore is closed and every unit is back — including units
//! still owed to a shrink.

use core::fmt;
use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll};

use super::acquire::Request;
use super::error::Refusal;
use super::Semaphore;

/// The future of [`Semaphore::drain`].
///
/// # Cancel safety
///
/// Dropping it at any point leaves the queue whole; the semaphore stays closed.
#[must_use = "futures do nothing unless polled"]
pub struct Drain<'a> {
    semaphore: &'a Semaphore,
    request: Request,
}

impl Semaphore {
    /// Closes the semaphore (see [`close`](Self::close)) and returns a future that
    /// completes once every unit is back: every permit dropped or released (a
    /// forgotten permit's units have left the capacity and are not waited for).
    ///
    /// Bound the wait with the runtime's timeout; on expiry,
    /// [`available`](Self::available) and [`capacity`](Self::capacity) tell what
    /// is still held. [`Gate::drain`] does that and reports the holders per
    /// source.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future leaves the queue whole.
    ///
    /// # Examples
    ///
    /// ```
    /// use admit::Semaphore;
    /// use std::future::Future;
    /// use std::pin::pin;
    /// use std::task::{Context, Waker};
    ///
    /// let sem = Semaphore::new(2);
    /// let held = sem.try_acquire(1).unwrap();
    /// let mut drain = pin!(sem.drain());
    /// let mut cx = Context::from_waker(Waker::noop());
    /// assert!(drain.as_mut().poll(&mut cx).is_pending()); // one unit is out
    /// assert_eq!(sem.try_acquire(1).unwrap_err(), admit::TryAcquireError::Closed);
    /// drop(held);
    /// assert!(drain.as_mut().poll(&mut cx).is_ready());
    /// ```
    #[doc = alloc_item_link!("Gate::drain", "Gate::drain", "struct.Gate.html#method.drain")]
    pub fn drain(&self) -> Drain<'_> {
        self.close();
        Drain {
            semaphore: self,
            request: Request::new(0),
        }
    }
}

impl Future for Drain<'_> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        // SAFETY: `request` is structurally pinned; it is never moved out.
        let this = unsafe { self.get_unchecked_mut() };
        // SAFETY: as above.
        let request = unsafe { Pin::new_unchecked(&mut this.request) };
        // A drain waiter is only ever granted: it takes no units, and the close
        // that fails requests passes it over.
        request.poll(this.semaphore, cx).map(|outcome| {
            let outcome = outcome.map_err(Refusal::unshed);
            debug_assert!(outcome.is_ok(), "a drain waiter ended {outcome:?}");
        })
    }
}

impl Drop for Drain<'_> {
    fn drop(&mut self) {
        // SAFETY: a future's drop is its last use: the request is dropped in place
        // right after, never moved (the pinned-drop guarantee).
        unsafe { Pin::new_unchecked(&mut self.request) }.cancel(self.semaphore);
    }
}

impl fmt::Debug for Drain<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Drain")
            .field("semaphore", self.semaphore)
            .finish_non_exhaustive()
    }
}
