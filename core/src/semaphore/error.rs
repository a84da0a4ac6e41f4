//! Why an acquire did not produce a permit.

use core::fmt;

/// Why [`Semaphore::try_acquire`](crate::Semaphore::try_acquire) returned no permit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum TryAcquireError {
    /// Not enough units are free right now, or a waiter is parked ahead of this
    /// caller (no barging), or units are being retired after a shrink. Retrying
    /// later may succeed.
    NoUnits,
    /// The request is larger than the capacity in force: it cannot be granted
    /// unless the capacity grows.
    ExceedsCapacity(ExceedsCapacity),
    /// The semaphore was closed.
    Closed,
}

/// Why [`Semaphore::acquire`](crate::Semaphore::acquire) returned no permit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum AcquireError {
    /// The request is larger than the capacity in force: on the first poll,
    /// without parking; or to a parked request when the capacity is lowered below
    /// it.
    ExceedsCapacity(ExceedsCapacity),
    /// The semaphore was closed before the request was granted.
    Closed,
}

/// Why a request ended without its units, inside the crate: an
/// [`AcquireError`], or a shed (`shedding.rs`), which only a ranked request (a
/// gate's) can meet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refusal {
    Error(AcquireError),
    /// Shed for a request of a higher rank.
    #[cfg(feature = "alloc")]
    Shed,
}

impl Refusal {
    /// The error of a request that cannot be shed (every public future's).
    pub(crate) fn unshed(self) -> AcquireError {
        match self {
            Refusal::Error(e) => e,
            #[cfg(feature = "alloc")]
            Refusal::Shed => unreachable!("a request of the top rank is never shed"),
        }
    }
}

/// A request for more units than the semaphore has: it cannot be granted unless the
/// capacity grows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ExceedsCapacity {
    /// Units asked for.
    pub requested: usize,
    /// The semaphore's capacity when the request was refused.
    pub capacity: usize,
}

impl fmt::Display for ExceedsCapacity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "request for {} units exceeds the capacity of {} units",
            self.requested, self.capacity
        )
    }
}

impl fmt::Display for TryAcquireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NoUnits => f.write_str("not enough units are free right now"),
            Self::ExceedsCapacity(e) => e.fmt(f),
            Self::Closed => f.write_str("semaphore closed"),
        }
    }
}

impl fmt::Display for AcquireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::ExceedsCapacity(e) => e.fmt(f),
            Self::Closed => f.write_str("semaphore closed"),
        }
    }
}

/// Why [`Semaphore::acquire_blocking_until`](crate::Semaphore::acquire_blocking_until)
/// returned no permit.
#[cfg(feature = "std")]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum AcquireTimeoutError {
    /// The deadline passed before the units were granted; the request left the
    /// queue.
    TimedOut,
    /// As [`AcquireError::ExceedsCapacity`].
    ExceedsCapacity(ExceedsCapacity),
    /// As [`AcquireError::Closed`].
    Closed,
}

#[cfg(feature = "std")]
impl From<AcquireError> for AcquireTimeoutError {
    fn from(e: AcquireError) -> Self {
        match e {
            AcquireError::ExceedsCapacity(e) => Self::ExceedsCapacity(e),
            AcquireError::Closed => Self::Closed,
        }
    }
}

#[cfg(feature = "std")]
impl fmt::Display for AcquireTimeoutError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::TimedOut => f.write_str("the deadline passed before the units were granted"),
            Self::ExceedsCapacity(e) => e.fmt(f),
            Self::Closed => f.write_str("semaphore closed"),
        }
    }
}

#[cfg(feature = "std")]
impl core::error::Error for AcquireTimeoutError {}

impl core::error::Error for ExceedsCapacity {}
impl core::error::Error for TryAcquireError {}
impl core::error::Error for AcquireError {}
