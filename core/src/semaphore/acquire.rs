//! The acquire futures. Each embeds its own wait-queue node, so parking allocates
//! nothing; the node is linked on the first poll that cannot be served and unlinked
//! by the future's `Drop` at the latest (see `queue.rs` for the invariants).

use core::fmt;
use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll};

use super::error::AcquireError;
use super::permit::Permit;
use super::queue::Waiter;
use crate::Semaphore;

/// The future of [`Semaphore::acquire`].
///
/// # Cancel safety
///
/// Dropping it at any point returns every unit it took and leaves the queue whole.
#[must_use = "futures do nothing unless polled"]
pub struct Acquire<'a> {
    semaphore: &'a Semaphore,
    node: Waiter,
}

// SAFETY: the node's cells are touched only under the semaphore's queue lock, or by
// the future's owner after an `Acquire` load of its phase; the waker inside is
// `Send + Sync`.
unsafe impl Send for Acquire<'_> {}
// SAFETY: `&Acquire` exposes nothing; all access goes through `Pin<&mut Self>`.
unsafe impl Sync for Acquire<'_> {}

impl<'a> Acquire<'a> {
    #[inline]
    pub(crate) fn new(semaphore: &'a Semaphore, units: usize) -> Self {
        Self {
            semaphore,
            node: Waiter::new(units),
        }
    }
}

impl<'a> Future for Acquire<'a> {
    type Output = Result<Permit<'a>, AcquireError>;

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.into_ref().get_ref();
        // SAFETY: `self` is pinned, so the node stays put until `Drop` cancels it.
        let result = unsafe { this.semaphore.poll_acquire(&this.node, cx.waker()) };
        result.map(|r| r.map(|()| Permit::new(this.semaphore, this.node.units)))
    }
}

impl Drop for Acquire<'_> {
    #[inline]
    fn drop(&mut self) {
        // SAFETY: the node is only ever used with this semaphore; after `cancel`
        // it is out of the list and may be freed.
        unsafe { self.semaphore.cancel(&self.node) }
    }
}

impl fmt::Debug for Acquire<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Acquire")
            .field("units", &self.node.units)
            .finish_non_exhaustive()
    }
}

#[cfg(feature = "alloc")]
pub use owned::AcquireOwned;

#[cfg(feature = "alloc")]
mod owned {
    use alloc::sync::Arc;
    use core::fmt;
    use core::future::Future;
    use core::pin::Pin;
    use core::task::{Context, Poll};

    use super::super::error::AcquireError;
    use super::super::permit::OwnedPermit;
    use super::super::queue::Waiter;
    use crate::Semaphore;

    /// The future of [`Semaphore::acquire_owned`].
    ///
    /// # Cancel safety
    ///
    /// Dropping it at any point returns every unit it took and leaves the queue whole.
    #[must_use = "futures do nothing unless polled"]
    pub struct AcquireOwned {
        semaphore: Arc<Semaphore>,
        node: Waiter,
    }

    // SAFETY: as for `Acquire`.
    unsafe impl Send for AcquireOwned {}
    // SAFETY: as for `Acquire`.
    unsafe impl Sync for AcquireOwned {}

    impl Future for AcquireOwned {
        type Output = Result<OwnedPermit, AcquireError>;

        #[inline]
        fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
            let this = self.into_ref().get_ref();
            // SAFETY: `self` is pinned, so the node stays put until `Drop` cancels it.
            let result = unsafe { this.semaphore.poll_acquire(&this.node, cx.waker()) };
            result.map(|r| r.map(|()| OwnedPermit::new(this.semaphore.clone(), this.node.units)))
        }
    }

    impl Drop for AcquireOwned {
        #[inline]
        fn drop(&mut self) {
            // SAFETY: as for `Acquire`.
            unsafe { self.semaphore.cancel(&self.node) }
        }
    }

    impl fmt::Debug for AcquireOwned {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.debug_struct("AcquireOwned")
                .field("units", &self.node.units)
                .finish_non_exhaustive()
        }
    }

    impl Semaphore {
        /// [`acquire`](Semaphore::acquire) with a `'static` permit.
        ///
        /// # Cancel safety
        ///
        /// As for [`acquire`](Semaphore::acquire).
        ///
        /// # Errors
        ///
        /// As for [`acquire`](Semaphore::acquire).
        ///
        /// # Panics
        ///
        /// If `units == 0`.
        #[inline]
        pub fn acquire_owned(self: Arc<Self>, units: usize) -> AcquireOwned {
            crate::semaphore::assert_nonzero(units);
            AcquireOwned {
                semaphore: self,
                node: Waiter::new(units),
            }
        }

        /// [`try_acquire`](Semaphore::try_acquire) with a `'static` permit.
        ///
        /// # Errors
        ///
        /// As for [`try_acquire`](Semaphore::try_acquire).
        ///
        /// # Panics
        ///
        /// If `units == 0`.
        #[inline]
        pub fn try_acquire_owned(
            self: Arc<Self>,
            units: usize,
        ) -> Result<OwnedPermit, crate::TryAcquireError> {
            self.try_take(units)?;
            Ok(OwnedPermit::new(self, units))
        }
    }
}
