//! [`PollSemaphore`]: the semaphore for code that can only poll (`poll_ready`),
//! tokio-util's `PollSemaphore` over admit's semaphore.

use alloc::boxed::Box;
use alloc::sync::Arc;
use core::fmt;
use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll};

use super::{AcquireError, AcquireOwned, OwnedPermit, Semaphore, TryAcquireError};

/// A handle on an `Arc<Semaphore>` that acquires by polling, for a `poll_*`
/// method such as tower's `Service::poll_ready`, which cannot hold a future
/// itself: the handle holds the one it is waiting on, boxed.
///
/// Made for a [`counting`](Semaphore::counting) semaphore, as tokio-util's is
/// for tokio's: a request above the capacity then waits for it to grow. With a
/// semaphore made by [`Semaphore::new`], a request above its capacity panics
/// (see [`poll_acquire_many`](Self::poll_acquire_many)).
///
/// # Cancel safety
///
/// A call that returns `Pending` leaves its request parked in the handle,
/// keeping its place in the FIFO queue for the next call. If the grant comes
/// and no call takes it, its units stay in the handle, held, until the next
/// call returns them in a permit or the handle is dropped: a handle should be
/// polled again once woken, or dropped. Dropping the handle cancels the request
/// as dropping [`AcquireOwned`] does, giving back anything it holds.
///
/// # Examples
///
/// ```
/// use admit::{PollSemaphore, Semaphore};
/// use std::sync::Arc;
/// use std::task::{Context, Waker};
///
/// let mut poll = PollSemaphore::new(Arc::new(Semaphore::counting(0)));
/// let mut cx = Context::from_waker(Waker::noop());
/// assert!(poll.poll_acquire(&mut cx).is_pending()); // parked, in the handle
/// poll.add_units(1); // the waker passed last is woken
/// let permit = poll.poll_acquire(&mut cx);
/// assert!(matches!(permit, std::task::Poll::Ready(Some(_))));
/// ```
pub struct PollSemaphore {
    semaphore: Arc<Semaphore>,
    /// The request a call left parked (or, after a grant, the next one, not
    /// yet polled, so the box is reused), and its units.
    pending: Option<(usize, Pin<Box<AcquireOwned>>)>,
}

impl PollSemaphore {
    /// A handle on `semaphore`, with no request parked.
    #[must_use]
    pub fn new(semaphore: Arc<Semaphore>) -> Self {
        Self {
            semaphore,
            pending: None,
        }
    }

    /// [`poll_acquire_many`](Self::poll_acquire_many) of one unit.
    pub fn poll_acquire(&mut self, cx: &mut Context<'_>) -> Poll<Option<OwnedPermit>> {
        self.poll_acquire_many(cx, 1)
    }

    /// Polls for a permit of `units` units: `Ready(Some(permit))` once granted,
    /// `Ready(None)` once the semaphore is closed, and otherwise `Pending`, with
    /// the request parked in the handle and the waker of `cx` to be woken when
    /// it is granted or the semaphore closes. Only the waker of the latest call
    /// is woken.
    ///
    /// A call with a different number of units than the parked request's
    /// replaces that request with a new one, at the back of the queue, as
    /// tokio-util's does: the old one's place is lost, and whatever was granted
    /// to it goes back.
    ///
    /// # Panics
    ///
    /// If `units == 0`, or if the semaphore fails the request with
    /// [`ExceedsCapacity`](AcquireError::ExceedsCapacity): `units` above
    /// [`Semaphore::MAX_UNITS`], or, for a semaphore made by [`Semaphore::new`],
    /// above its capacity (at the call, or lowered below it while parked). The
    /// handle's `Option` can only say "closed", and a `None` for a semaphore
    /// that is open would read as shut down; an oversize request on such a
    /// semaphore can use [`Semaphore::acquire_owned`], which returns the error.
    pub fn poll_acquire_many(
        &mut self,
        cx: &mut Context<'_>,
        units: usize,
    ) -> Poll<Option<OwnedPermit>> {
        let acquire = match &mut self.pending {
            Some((pending, acquire)) => {
                if *pending != units {
                    acquire.set(Arc::clone(&self.semaphore).acquire_owned(units));
                    *pending = units;
                }
                acquire
            }
            None => {
                // No allocation when the units are free now.
                match Arc::clone(&self.semaphore).try_acquire_owned(units) {
                    Ok(permit) => return Poll::Ready(Some(permit)),
                    Err(TryAcquireError::Closed) => return Poll::Ready(None),
                    Err(TryAcquireError::ExceedsCapacity(e)) => oversize(e),
                    Err(TryAcquireError::NoUnits) => {}
                }
                let acquire = Box::pin(Arc::clone(&self.semaphore).acquire_owned(units));
                &mut self.pending.insert((units, acquire)).1
            }
        };
        let outcome = match acquire.as_mut().poll(cx) {
            Poll::Pending => return Poll::Pending,
            Poll::Ready(outcome) => outcome,
        };
        // A completed future must not be polled again: the next request, in
        // the same box (it takes nothing until polled).
        acquire.set(Arc::clone(&self.semaphore).acquire_owned(units));
        match outcome {
            Ok(permit) => Poll::Ready(Some(permit)),
            Err(AcquireError::Closed) => {
                self.pending = None;
                Poll::Ready(None)
            }
            Err(AcquireError::ExceedsCapacity(e)) => {
                self.pending = None;
                oversize(e)
            }
        }
    }

    /// Units free right now ([`Semaphore::available`]).
    #[must_use]
    pub fn available(&self) -> usize {
        self.semaphore.available()
    }

    /// Adds `units` to the capacity ([`Semaphore::add_units`]).
    ///
    /// # Panics
    ///
    /// If the capacity would exceed [`Semaphore::MAX_UNITS`].
    pub fn add_units(&self, units: usize) {
        self.semaphore.add_units(units);
    }

    /// The semaphore, shared.
    #[must_use]
    pub fn clone_inner(&self) -> Arc<Semaphore> {
        Arc::clone(&self.semaphore)
    }

    /// The semaphore; a parked request is cancelled.
    #[must_use]
    pub fn into_inner(self) -> Arc<Semaphore> {
        self.semaphore
    }
}

#[cold]
fn oversize(e: crate::ExceedsCapacity) -> ! {
    panic!("PollSemaphore cannot report an oversize request: {e}")
}

/// A handle on the same semaphore, with no request parked.
impl Clone for PollSemaphore {
    fn clone(&self) -> Self {
        Self::new(self.clone_inner())
    }
}

impl AsRef<Semaphore> for PollSemaphore {
    fn as_ref(&self) -> &Semaphore {
        &self.semaphore
    }
}

impl fmt::Debug for PollSemaphore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PollSemaphore")
            .field("semaphore", &self.semaphore)
            .finish_non_exhaustive()
    }
}
