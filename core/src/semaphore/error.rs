//! Why an acquire did not produce a permit.

use core::fmt;

/// Why [`Semaphore::try_acquire`](crate::Semaphore::try_acquire) returned no permit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TryAcquireError {
    /// Not enough units are free right now, or a waiter is parked ahead of this
    /// caller (no barging). Retrying later may succeed.
    NoUnits,
    /// The request is larger than the semaphore's capacity and can never be granted.
    ExceedsCapacity(ExceedsCapacity),
    /// The semaphore was closed.
    Closed,
}

/// Why [`Semaphore::acquire`](crate::Semaphore::acquire) returned no permit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AcquireError {
    /// The request is larger than the semaphore's capacity and can never be granted.
    /// Returned on the first poll, without parking.
    ExceedsCapacity(ExceedsCapacity),
    /// The semaphore was closed before the request was granted.
    Closed,
}

/// A request for more units than the semaphore will ever have.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ExceedsCapacity {
    /// Units asked for.
    pub requested: usize,
    /// The semaphore's capacity.
    pub capacity: usize,
}

impl fmt::Display for ExceedsCapacity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "request for {} units exceeds the capacity of {} units and can never be granted",
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

impl core::error::Error for ExceedsCapacity {}
impl core::error::Error for TryAcquireError {}
impl core::error::Error for AcquireError {}
