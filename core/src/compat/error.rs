//! tokio's two semaphore errors.

use core::fmt;

/// Why [`Semaphore::acquire`](super::Semaphore::acquire) and its kin returned no
/// permit: the semaphore was closed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AcquireError(pub(super) ());

/// Why [`Semaphore::try_acquire`](super::Semaphore::try_acquire) and its kin
/// returned no permit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TryAcquireError {
    /// The semaphore was closed.
    Closed,
    /// Fewer permits are free than asked for, or a request is parked ahead.
    NoPermits,
}

impl TryAcquireError {
    /// Whether the semaphore was closed.
    #[must_use]
    pub fn is_closed(&self) -> bool {
        matches!(self, Self::Closed)
    }

    /// Whether too few permits were free.
    #[must_use]
    pub fn is_no_permits(&self) -> bool {
        matches!(self, Self::NoPermits)
    }
}

impl fmt::Display for AcquireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("semaphore closed")
    }
}

impl fmt::Display for TryAcquireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Closed => "semaphore closed",
            Self::NoPermits => "no permits available",
        })
    }
}

impl core::error::Error for AcquireError {}
impl core::error::Error for TryAcquireError {}
