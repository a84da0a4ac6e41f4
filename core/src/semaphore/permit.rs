//! Permits: units held by ownership. Dropping a permit (or calling `release`)
//! returns exactly its units, once; the type system rules out a second release.
//! A permit can be split, merged with another of the same semaphore, or forgotten
//! (its units leave the semaphore for good); every unit stays owned by exactly one
//! permit throughout.

use core::fmt;

use crate::Semaphore;

/// Units held from a [`Semaphore`], returned when dropped.
///
/// A panic in the holder's code returns the units on unwind, like any drop.
#[must_use = "dropping a permit returns its units at once"]
pub struct Permit<'a> {
    semaphore: &'a Semaphore,
    units: usize,
}

impl<'a> Permit<'a> {
    #[inline]
    pub(crate) fn new(semaphore: &'a Semaphore, units: usize) -> Self {
        Self { semaphore, units }
    }

    /// The units this permit holds.
    #[must_use]
    pub fn units(&self) -> usize {
        self.units
    }

    /// The semaphore the units came from.
    #[must_use]
    pub fn semaphore(&self) -> &'a Semaphore {
        self.semaphore
    }

    /// Returns the units now; the same as dropping the permit.
    pub fn release(self) {}

    /// Moves `units` of this permit's units into a new permit, or returns `None`
    /// if this permit holds `units` or fewer (a permit never holds nothing).
    ///
    /// # Panics
    ///
    /// If `units == 0`.
    ///
    /// # Examples
    ///
    /// ```
    /// let sem = admit::Semaphore::new(3);
    /// let mut both = sem.try_acquire(3).unwrap();
    /// let one = both.split(1).unwrap();
    /// assert_eq!((both.units(), one.units()), (2, 1));
    /// drop(one);
    /// assert_eq!(sem.available(), 1);
    /// ```
    #[must_use = "dropping the split-off permit returns its units at once"]
    pub fn split(&mut self, units: usize) -> Option<Permit<'a>> {
        crate::semaphore::assert_nonzero(units);
        (units < self.units).then(|| {
            self.units -= units;
            Permit::new(self.semaphore, units)
        })
    }

    /// Takes `other`'s units into this permit.
    ///
    /// # Panics
    ///
    /// If `other` is from another semaphore.
    pub fn merge(&mut self, other: Permit<'a>) {
        assert!(
            core::ptr::eq(self.semaphore, other.semaphore),
            "merged permits of two different semaphores"
        );
        self.units += other.units;
        core::mem::forget(other);
    }

    /// Keeps the units out of the semaphore for good: its capacity shrinks by them
    /// (a deliberate leak, as tokio's `forget`). Requests parked for more than the
    /// new capacity then fail with [`ExceedsCapacity`](crate::ExceedsCapacity),
    /// or on a [`counting`](Semaphore::counting) semaphore wait for it to grow.
    #[inline]
    pub fn forget(self) {
        self.semaphore.forget(self.units);
        core::mem::forget(self);
    }
}

impl Drop for Permit<'_> {
    #[inline]
    fn drop(&mut self) {
        self.semaphore.release(self.units);
    }
}

impl fmt::Debug for Permit<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Permit")
            .field("units", &self.units)
            .finish_non_exhaustive()
    }
}

#[cfg(feature = "alloc")]
pub use owned::OwnedPermit;

#[cfg(feature = "alloc")]
mod owned {
    use alloc::sync::Arc;
    use core::fmt;

    use crate::Semaphore;

    /// Units held from an `Arc<Semaphore>`: `'static`, so it can move into a
    /// spawned task or a response body. Returned when dropped.
    #[must_use = "dropping a permit returns its units at once"]
    pub struct OwnedPermit {
        semaphore: Arc<Semaphore>,
        units: usize,
    }

    impl OwnedPermit {
        #[inline]
        pub(crate) fn new(semaphore: Arc<Semaphore>, units: usize) -> Self {
            Self { semaphore, units }
        }

        /// The units this permit holds.
        #[must_use]
        pub fn units(&self) -> usize {
            self.units
        }

        /// The semaphore the units came from.
        #[must_use]
        pub fn semaphore(&self) -> &Arc<Semaphore> {
            &self.semaphore
        }

        /// Returns the units now; the same as dropping the permit.
        pub fn release(self) {}

        /// Moves `units` of this permit's units into a new permit, or returns
        /// `None` if this permit holds `units` or fewer.
        ///
        /// # Panics
        ///
        /// If `units == 0`.
        #[must_use = "dropping the split-off permit returns its units at once"]
        pub fn split(&mut self, units: usize) -> Option<OwnedPermit> {
            crate::semaphore::assert_nonzero(units);
            (units < self.units).then(|| {
                self.units -= units;
                OwnedPermit::new(Arc::clone(&self.semaphore), units)
            })
        }

        /// Takes `other`'s units into this permit.
        ///
        /// # Panics
        ///
        /// If `other` is from another semaphore.
        pub fn merge(&mut self, mut other: OwnedPermit) {
            assert!(
                Arc::ptr_eq(&self.semaphore, &other.semaphore),
                "merged permits of two different semaphores"
            );
            self.units += core::mem::take(&mut other.units);
        }

        /// Keeps the units out of the semaphore for good: its capacity shrinks by
        /// them (a deliberate leak).
        #[inline]
        pub fn forget(mut self) {
            self.semaphore.forget(core::mem::take(&mut self.units));
        }
    }

    impl Drop for OwnedPermit {
        #[inline]
        fn drop(&mut self) {
            // 0 after `merge` or `forget` moved the units out.
            if self.units != 0 {
                self.semaphore.release(self.units);
            }
        }
    }

    impl fmt::Debug for OwnedPermit {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.debug_struct("OwnedPermit")
                .field("units", &self.units)
                .finish_non_exhaustive()
        }
    }
}
