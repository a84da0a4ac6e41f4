//! tokio's `Semaphore`, over [`crate::Semaphore::counting`].

use alloc::sync::Arc;
use core::fmt;

use super::{AcquireError, OwnedSemaphorePermit, SemaphorePermit, TryAcquireError};
use crate::loom::loom_const_fn;

/// tokio's panic message, so a ported `#[should_panic(expected = ..)]` still
/// matches.
const TOO_MANY: &str = "a semaphore may not have more than MAX_PERMITS permits";

/// A counting semaphore with tokio's API: FIFO, and a request for more permits
/// than there are waits for [`add_permits`](Self::add_permits).
///
/// # Examples
///
/// ```
/// use admit::compat::Semaphore;
/// use std::sync::Arc;
///
/// # futures_lite::future::block_on(async {
/// let sem = Arc::new(Semaphore::new(3));
/// let one = sem.acquire().await.unwrap();
/// let two = Arc::clone(&sem).acquire_many_owned(2).await.unwrap();
/// assert_eq!(sem.available_permits(), 0);
/// assert!(sem.try_acquire().unwrap_err().is_no_permits());
/// drop((one, two));
/// assert_eq!(sem.available_permits(), 3);
/// # });
/// ```
pub struct Semaphore {
    inner: crate::Semaphore,
}

impl Semaphore {
    /// The most permits a semaphore can hold, free and held together: admit's
    /// [`MAX_UNITS`](crate::Semaphore::MAX_UNITS), 2²⁸ − 1 on every target.
    pub const MAX_PERMITS: usize = crate::Semaphore::MAX_UNITS;

    /// A semaphore with `permits` permits.
    ///
    /// # Panics
    ///
    /// If `permits > MAX_PERMITS`.
    #[must_use]
    #[track_caller]
    pub fn new(permits: usize) -> Semaphore {
        Semaphore::const_new(permits)
    }

    loom_const_fn! {
        /// [`new`](Self::new) as a `const fn`, for a `static`.
        ///
        /// # Panics
        ///
        /// If `permits > MAX_PERMITS`.
        #[must_use]
        #[track_caller]
        pub fn const_new(permits: usize) -> Semaphore {
            assert!(permits <= Semaphore::MAX_PERMITS, "{}", TOO_MANY);
            Semaphore {
                inner: crate::Semaphore::counting(permits),
            }
        }
    }

    /// Permits free right now.
    #[must_use]
    pub fn available_permits(&self) -> usize {
        self.inner.available()
    }

    /// Adds `n` permits, and grants parked requests from them in FIFO order.
    ///
    /// # Panics
    ///
    /// If the permits, held and free, would exceed [`MAX_PERMITS`](Self::MAX_PERMITS),
    /// with tokio's message; nothing is added then.
    #[track_caller]
    #[inline]
    pub fn add_permits(&self, n: usize) {
        assert!(self.inner.try_add_units(n), "{TOO_MANY}");
    }

    /// Removes up to `n` of the free permits for good, and returns how many it
    /// removed.
    pub fn forget_permits(&self, n: usize) -> usize {
        self.inner.forget_free(n)
    }

    /// [`acquire_many`](Self::acquire_many) of one permit.
    ///
    /// # Cancel safety
    ///
    /// As for [`acquire_many`](Self::acquire_many).
    ///
    /// # Errors
    ///
    /// If the semaphore is or becomes closed before the grant.
    pub async fn acquire(&self) -> Result<SemaphorePermit<'_>, AcquireError> {
        self.acquire_many(1).await
    }

    /// Waits until `n` permits can be taken together, in FIFO order of arrival.
    /// `n == 0` is granted at once unless the semaphore is closed.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future gives up its place in the queue and takes nothing.
    ///
    /// # Errors
    ///
    /// If the semaphore is or becomes closed before the grant.
    ///
    /// # Panics
    ///
    /// If `n > MAX_PERMITS`, with tokio's message, on the first poll (the
    /// panic's location is in this crate: an `async fn` cannot take
    /// `#[track_caller]`).
    pub async fn acquire_many(&self, n: u32) -> Result<SemaphorePermit<'_>, AcquireError> {
        let permits = checked(n);
        self.take(permits).await?;
        Ok(SemaphorePermit::new(self, permits))
    }

    /// [`try_acquire_many`](Self::try_acquire_many) of one permit.
    ///
    /// # Errors
    ///
    /// As for [`try_acquire_many`](Self::try_acquire_many).
    #[inline]
    pub fn try_acquire(&self) -> Result<SemaphorePermit<'_>, TryAcquireError> {
        self.try_acquire_many(1)
    }

    /// Takes `n` permits now if they are free and no request is parked ahead.
    ///
    /// # Errors
    ///
    /// [`TryAcquireError::Closed`] if the semaphore is closed, otherwise
    /// [`TryAcquireError::NoPermits`] if fewer than `n` permits are free or a
    /// request is parked.
    ///
    /// # Panics
    ///
    /// If `n > MAX_PERMITS`.
    #[track_caller]
    #[inline]
    pub fn try_acquire_many(&self, n: u32) -> Result<SemaphorePermit<'_>, TryAcquireError> {
        let permits = checked(n);
        self.try_take(permits)?;
        Ok(SemaphorePermit::new(self, permits))
    }

    /// [`acquire`](Self::acquire) with a `'static` permit.
    ///
    /// # Cancel safety
    ///
    /// As for [`acquire_many`](Self::acquire_many).
    ///
    /// # Errors
    ///
    /// As for [`acquire`](Self::acquire).
    pub async fn acquire_owned(self: Arc<Self>) -> Result<OwnedSemaphorePermit, AcquireError> {
        self.acquire_many_owned(1).await
    }

    /// [`acquire_many`](Self::acquire_many) with a `'static` permit.
    ///
    /// # Cancel safety
    ///
    /// As for [`acquire_many`](Self::acquire_many).
    ///
    /// # Errors
    ///
    /// As for [`acquire_many`](Self::acquire_many).
    ///
    /// # Panics
    ///
    /// If `n > MAX_PERMITS`, with tokio's message, on the first poll (the
    /// panic's location is in this crate: an `async fn` cannot take
    /// `#[track_caller]`).
    pub async fn acquire_many_owned(
        self: Arc<Self>,
        n: u32,
    ) -> Result<OwnedSemaphorePermit, AcquireError> {
        let permits = checked(n);
        self.take(permits).await?;
        Ok(OwnedSemaphorePermit::new(self, permits))
    }

    /// [`try_acquire`](Self::try_acquire) with a `'static` permit.
    ///
    /// # Errors
    ///
    /// As for [`try_acquire_many`](Self::try_acquire_many).
    #[inline]
    pub fn try_acquire_owned(self: Arc<Self>) -> Result<OwnedSemaphorePermit, TryAcquireError> {
        self.try_acquire_many_owned(1)
    }

    /// [`try_acquire_many`](Self::try_acquire_many) with a `'static` permit.
    ///
    /// # Errors
    ///
    /// As for [`try_acquire_many`](Self::try_acquire_many).
    ///
    /// # Panics
    ///
    /// If `n > MAX_PERMITS`.
    #[track_caller]
    #[inline]
    pub fn try_acquire_many_owned(
        self: Arc<Self>,
        n: u32,
    ) -> Result<OwnedSemaphorePermit, TryAcquireError> {
        let permits = checked(n);
        self.try_take(permits)?;
        Ok(OwnedSemaphorePermit::new(self, permits))
    }

    /// Closes the semaphore: parked requests fail with [`AcquireError`], and so
    /// do later ones. Permits already held stay valid.
    pub fn close(&self) {
        self.inner.close();
    }

    /// Whether [`close`](Self::close) was called.
    #[must_use]
    pub fn is_closed(&self) -> bool {
        self.inner.is_closed()
    }

    /// Waits for `permits` units and leaves them taken, for the caller's permit
    /// to hold by count: it names this type, not the core's, and may hold zero
    /// units, which a core permit refuses.
    async fn take(&self, permits: usize) -> Result<(), AcquireError> {
        if permits == 0 {
            return if self.is_closed() {
                Err(AcquireError(()))
            } else {
                Ok(())
            };
        }
        match self.inner.acquire(permits).await {
            Ok(permit) => {
                // Its units pass to the caller's permit, which returns them.
                core::mem::forget(permit);
                Ok(())
            }
            Err(crate::AcquireError::Closed) => Err(AcquireError(())),
            Err(crate::AcquireError::ExceedsCapacity(_)) => unreachable!("{}", COUNTING),
        }
    }

    /// [`take`](Self::take) now or never: one CAS.
    #[inline]
    fn try_take(&self, permits: usize) -> Result<(), TryAcquireError> {
        if permits == 0 {
            return if self.is_closed() {
                Err(TryAcquireError::Closed)
            } else {
                Ok(())
            };
        }
        self.inner.try_take(permits).map_err(|e| match e {
            crate::TryAcquireError::Closed => TryAcquireError::Closed,
            crate::TryAcquireError::NoUnits => TryAcquireError::NoPermits,
            crate::TryAcquireError::ExceedsCapacity(_) => unreachable!("{}", COUNTING),
        })
    }

    /// Returns `permits` units a permit held.
    #[inline]
    pub(super) fn release(&self, permits: usize) {
        if permits != 0 {
            self.inner.release(permits);
        }
    }

    /// Removes `permits` units a permit held for good.
    #[inline]
    pub(super) fn forget(&self, permits: usize) {
        if permits != 0 {
            self.inner.forget(permits);
        }
    }
}

/// Why a request is never `ExceedsCapacity`.
const COUNTING: &str = "a counting semaphore fails only a request above MAX_UNITS, checked before";

/// `n` as units.
///
/// # Panics
///
/// If `n > MAX_PERMITS`, with tokio's message.
#[track_caller]
#[inline]
fn checked(n: u32) -> usize {
    match usize::try_from(n) {
        Ok(permits) if permits <= Semaphore::MAX_PERMITS => permits,
        _ => panic!("{TOO_MANY}"),
    }
}

impl fmt::Debug for Semaphore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.inner.fmt(f)
    }
}
