//! tokio-util's `PollSemaphore`, over this facade's [`Semaphore`].

use alloc::boxed::Box;
use alloc::sync::Arc;
use core::fmt;
use core::future::Future;
use core::pin::Pin;
use core::task::{ready, Context, Poll};

use super::{AcquireError, OwnedSemaphorePermit, Semaphore, TryAcquireError};

/// The request a call left in flight: [`Semaphore::acquire_many_owned`], boxed
/// (its type cannot be named).
type InFlight =
    Pin<Box<dyn Future<Output = Result<OwnedSemaphorePermit, AcquireError>> + Send + Sync>>;

/// tokio-util 0.7's `PollSemaphore` (`tokio_util::sync::PollSemaphore`), by name
/// and signature, over an `Arc<`[`Semaphore`]`>` of this facade: a handle that
/// acquires by polling, for a `poll_*` method such as tower's
/// `Service::poll_ready`, which cannot hold a future itself. The handle holds
/// the one it is waiting on, boxed.
///
/// The semaphore may be shared with callers of
/// [`acquire_owned`](Semaphore::acquire_owned) and its kin (tower's
/// `ConcurrencyLimit::with_semaphore`): all wait in the one FIFO queue.
///
/// tokio-util's `impl Stream for PollSemaphore` is left out, since it would
/// take a dependency on `futures-core`: a stream of permits is
/// `futures::stream::poll_fn(move |cx| poll.poll_acquire(cx))`.
///
/// # Cancel safety
///
/// A call that returns `Pending` leaves its request parked in the handle,
/// keeping its place in the FIFO queue for the next call with the same count.
/// If the grant comes and no call takes it, its permits stay in the handle,
/// held, until the next call returns them in a permit or the handle is
/// dropped: a handle should be polled again once woken, or dropped. Dropping
/// the handle cancels the request as dropping the future of
/// [`acquire_many_owned`](Semaphore::acquire_many_owned) does, giving back
/// anything it holds.
///
/// # Examples
///
/// ```
/// // use tokio_util::sync::PollSemaphore;
/// // use tokio::sync::Semaphore;
/// use admit::compat::{PollSemaphore, Semaphore};
/// use std::sync::Arc;
/// use std::task::{Context, Poll, Waker};
///
/// let sem = Arc::new(Semaphore::new(0));
/// let mut poll = PollSemaphore::new(Arc::clone(&sem));
/// let mut cx = Context::from_waker(Waker::noop());
/// assert!(poll.poll_acquire(&mut cx).is_pending()); // parked, in the handle
/// sem.add_permits(1); // the waker passed last is woken
/// assert!(matches!(poll.poll_acquire(&mut cx), Poll::Ready(Some(_))));
/// sem.close();
/// assert!(matches!(poll.poll_acquire(&mut cx), Poll::Ready(None)));
/// ```
pub struct PollSemaphore {
    semaphore: Arc<Semaphore>,
    /// The request a call left parked, and its count.
    in_flight: Option<(u32, InFlight)>,
}

impl PollSemaphore {
    /// A handle on `semaphore`, with no request in flight.
    #[must_use]
    pub fn new(semaphore: Arc<Semaphore>) -> Self {
        Self {
            semaphore,
            in_flight: None,
        }
    }

    /// Closes the semaphore ([`Semaphore::close`]).
    pub fn close(&self) {
        self.semaphore.close();
    }

    /// The semaphore, shared.
    #[must_use]
    pub fn clone_inner(&self) -> Arc<Semaphore> {
        Arc::clone(&self.semaphore)
    }

    /// The semaphore; a request in flight is cancelled.
    #[must_use]
    pub fn into_inner(self) -> Arc<Semaphore> {
        self.semaphore
    }

    /// [`poll_acquire_many`](Self::poll_acquire_many) of one permit.
    #[track_caller]
    pub fn poll_acquire(&mut self, cx: &mut Context<'_>) -> Poll<Option<OwnedSemaphorePermit>> {
        self.poll_acquire_many(cx, 1)
    }

    /// Polls for `permits` permits: `Ready(Some(permit))` once granted,
    /// `Ready(None)` once the semaphore is closed (and at every call after), and
    /// otherwise `Pending`, with the request parked in the handle and the waker
    /// of `cx` to be woken when it is granted or the semaphore closes. Only the
    /// waker of the latest call is woken.
    ///
    /// A call takes the permits at once if they are free and no request is
    /// parked ahead, with no allocation; otherwise it boxes a request and parks
    /// it. A call with a different count than the parked request's replaces
    /// that request with a new one, at the back of the queue, as tokio-util's
    /// does: the old one's place is lost, and whatever was granted to it goes
    /// back.
    ///
    /// # Panics
    ///
    /// If `permits > MAX_PERMITS`, with tokio's message (see
    /// [`Semaphore::acquire_many`]).
    #[track_caller]
    pub fn poll_acquire_many(
        &mut self,
        cx: &mut Context<'_>,
        permits: u32,
    ) -> Poll<Option<OwnedSemaphorePermit>> {
        let acquire = match &mut self.in_flight {
            Some((count, acquire)) if *count == permits => acquire,
            _ => {
                // Another count: the parked request goes first, with its place
                // and anything granted to it.
                self.in_flight = None;
                // No allocation when the permits are free now.
                match Arc::clone(&self.semaphore).try_acquire_many_owned(permits) {
                    Ok(permit) => return Poll::Ready(Some(permit)),
                    Err(TryAcquireError::Closed) => return Poll::Ready(None),
                    Err(TryAcquireError::NoPermits) => {}
                }
                let acquire = Box::pin(Arc::clone(&self.semaphore).acquire_many_owned(permits));
                &mut self.in_flight.insert((permits, acquire)).1
            }
        };
        let outcome = ready!(acquire.as_mut().poll(cx));
        // A completed future must not be polled again; the next call tries
        // first, as this one did.
        self.in_flight = None;
        Poll::Ready(outcome.ok())
    }

    /// Permits free right now ([`Semaphore::available_permits`]).
    #[must_use]
    pub fn available_permits(&self) -> usize {
        self.semaphore.available_permits()
    }

    /// Adds `n` permits ([`Semaphore::add_permits`]).
    ///
    /// # Panics
    ///
    /// If the permits, held and free, would exceed
    /// [`MAX_PERMITS`](Semaphore::MAX_PERMITS).
    #[track_caller]
    pub fn add_permits(&self, n: usize) {
        self.semaphore.add_permits(n);
    }
}

/// A handle on the same semaphore, with no request in flight.
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
