//! Permits: units held by ownership. Dropping a permit (or calling `release`)
//! returns exactly its units, once; the type system rules out a second release.

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
    }

    impl Drop for OwnedPermit {
        #[inline]
        fn drop(&mut self) {
            self.semaphore.release(self.units);
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
