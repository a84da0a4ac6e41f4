//! tokio's two permits. Each holds its permits by count (zero allowed) and
//! returns them when dropped.

use alloc::sync::Arc;
use core::fmt;
use core::mem;

use super::Semaphore;

/// Permits held from a [`Semaphore`], returned when dropped.
#[must_use = "dropping a permit returns its permits at once"]
pub struct SemaphorePermit<'a> {
    sem: &'a Semaphore,
    permits: usize,
}

/// Permits held from an `Arc<Semaphore>`: `'static`. Returned when dropped.
#[must_use = "dropping a permit returns its permits at once"]
pub struct OwnedSemaphorePermit {
    sem: Arc<Semaphore>,
    permits: usize,
}

impl<'a> SemaphorePermit<'a> {
    #[inline]
    pub(super) fn new(sem: &'a Semaphore, permits: usize) -> Self {
        Self { sem, permits }
    }

    /// Keeps the permits out of the semaphore for good.
    #[inline]
    pub fn forget(mut self) {
        self.sem.forget(mem::take(&mut self.permits));
    }

    /// Takes `other`'s permits into this one.
    ///
    /// # Panics
    ///
    /// If `other` is from another semaphore.
    #[track_caller]
    pub fn merge(&mut self, mut other: Self) {
        assert!(
            core::ptr::eq(self.sem, other.sem),
            "merging permits from different semaphore instances"
        );
        self.permits += mem::take(&mut other.permits);
    }

    /// Moves `n` of the permits into a new permit, or returns `None` if this
    /// one holds fewer than `n`. Either may be left with none.
    pub fn split(&mut self, n: usize) -> Option<Self> {
        (n <= self.permits).then(|| {
            self.permits -= n;
            Self::new(self.sem, n)
        })
    }

    /// The semaphore the permits came from.
    #[must_use]
    pub fn semaphore(&self) -> &Semaphore {
        self.sem
    }

    /// The permits held.
    #[must_use]
    pub fn num_permits(&self) -> usize {
        self.permits
    }
}

impl OwnedSemaphorePermit {
    #[inline]
    pub(super) fn new(sem: Arc<Semaphore>, permits: usize) -> Self {
        Self { sem, permits }
    }

    /// Keeps the permits out of the semaphore for good.
    #[inline]
    pub fn forget(mut self) {
        self.sem.forget(mem::take(&mut self.permits));
    }

    /// Takes `other`'s permits into this one.
    ///
    /// # Panics
    ///
    /// If `other` is from another semaphore.
    #[track_caller]
    pub fn merge(&mut self, mut other: Self) {
        assert!(
            Arc::ptr_eq(&self.sem, &other.sem),
            "merging permits from different semaphore instances"
        );
        self.permits += mem::take(&mut other.permits);
    }

    /// Moves `n` of the permits into a new permit, or returns `None` if this
    /// one holds fewer than `n`. Either may be left with none.
    pub fn split(&mut self, n: usize) -> Option<Self> {
        (n <= self.permits).then(|| {
            self.permits -= n;
            Self::new(Arc::clone(&self.sem), n)
        })
    }

    /// The semaphore the permits came from.
    #[must_use]
    pub fn semaphore(&self) -> &Arc<Semaphore> {
        &self.sem
    }

    /// The permits held.
    #[must_use]
    pub fn num_permits(&self) -> usize {
        self.permits
    }
}

impl Drop for SemaphorePermit<'_> {
    #[inline]
    fn drop(&mut self) {
        self.sem.release(self.permits);
    }
}

impl Drop for OwnedSemaphorePermit {
    #[inline]
    fn drop(&mut self) {
        self.sem.release(self.permits);
    }
}

impl fmt::Debug for SemaphorePermit<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SemaphorePermit")
            .field("permits", &self.permits)
            .finish_non_exhaustive()
    }
}

impl fmt::Debug for OwnedSemaphorePermit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OwnedSemaphorePermit")
            .field("permits", &self.permits)
            .finish_non_exhaustive()
    }
}
