//! What a [`Gate`](crate::Gate) acquire can end in besides a permit, and what a bad
//! gate configuration is.

use core::fmt;
use core::time::Duration;

use crate::{ExceedsCapacity, ShedReason};

/// Why a gate acquire returned no permit. Only [`GateError::Busy`] counts as a shed.
///
/// When several hold, a fault of the request against the configuration comes
/// first: `ExceedsMaxUnits`, then `ExceedsCapacity`, then `Closed`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum GateError {
    /// The units could not be granted within the wait allowed; `reason` says which
    /// limit turned the caller away: the wait budget or the call's ceiling expired,
    /// a `try_acquire` found them not free, the queue was full, or (with an
    /// overload target) the wait reached the overload cap or was hopeless at
    /// arrival, or it was shed while parked to make room for a request of a
    /// higher [`Priority`](crate::Priority) class. The caller should be told to retry after `retry_after` (HTTP 503
    /// with `Retry-After`). Counted as a shed for the call's source, with the same
    /// reason the observer hears.
    Busy {
        /// A suggested back-off, never zero; see the gate's docs for how it is
        /// derived.
        retry_after: Duration,
        /// The limit that turned the caller away.
        reason: ShedReason,
    },
    /// The caller's own cancellation signal fired first. Not a shed: nothing should
    /// be written back, the caller has gone.
    Cancelled,
    /// The request is larger than the gate's capacity and can never be served.
    /// Returned at once, without parking; not a shed. A server configuration fault.
    ExceedsCapacity(ExceedsCapacity),
    /// The request is larger than the gate's [`max_units`], the largest request
    /// it was built to keep servable (a resize never goes below it). Returned at
    /// once, without parking, even when the capacity would fit it today; not a
    /// shed. A composition fault, like a zero-unit request, but one a request's
    /// size may carry, so an error rather than a panic: raise `max_units`, or cap
    /// the units the call site asks for.
    #[doc = alloc_item_link!("max_units", "GateBuilder::max_units", "struct.GateBuilder.html#method.max_units")]
    ExceedsMaxUnits {
        /// Units asked for.
        requested: usize,
        /// The gate's `max_units`.
        max_units: usize,
    },
    /// The gate was closed (the server is shutting down). Not a shed.
    Closed,
}

impl GateError {
    /// Whether this outcome counts as a shed (only [`GateError::Busy`]).
    #[must_use]
    pub fn is_shed(&self) -> bool {
        matches!(self, Self::Busy { .. })
    }

    /// The `Retry-After` to send, for [`GateError::Busy`] only.
    #[must_use]
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            Self::Busy { retry_after, .. } => Some(*retry_after),
            _ => None,
        }
    }

    /// The limit that shed the caller, for [`GateError::Busy`] only.
    #[must_use]
    pub fn shed_reason(&self) -> Option<ShedReason> {
        match self {
            Self::Busy { reason, .. } => Some(*reason),
            _ => None,
        }
    }
}

impl fmt::Display for GateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Busy {
                retry_after,
                reason,
            } => {
                let why = match reason {
                    ShedReason::WaitBudget => "the wait budget expired",
                    ShedReason::Ceiling => "the call's wait ceiling expired",
                    ShedReason::NoWait => {
                        "the units were not free at once, and try_acquire never waits"
                    }
                    ShedReason::QueueFull => "max_waiters requests were already parked",
                    ShedReason::Overload => "the gate is overloaded and the wait reached its cap",
                    ShedReason::Hopeless => "the estimated wait was longer than the wait allowed",
                    ShedReason::Outranked => "shed while parked for a request of a higher priority",
                    ShedReason::Memory => "its class is past its mark of the memory limit",
                };
                write!(
                    f,
                    "admission gate busy: {why}; retry after {}s",
                    whole_seconds_up(*retry_after)
                )
            }
            Self::Cancelled => f.write_str("admission wait cancelled by the caller"),
            Self::ExceedsCapacity(e) => write!(f, "admission gate misconfigured: {e}"),
            Self::ExceedsMaxUnits {
                requested,
                max_units,
            } => write!(
                f,
                "admission gate misconfigured: request for {requested} units exceeds the gate's \
                 max_units of {max_units}"
            ),
            Self::Closed => f.write_str("admission gate closed: the server is shutting down"),
        }
    }
}

/// `d` in whole seconds, rounded up, at least 1 (saturating at `u64::MAX`): the value
/// of a `Retry-After` header.
#[must_use]
pub fn whole_seconds_up(d: Duration) -> u64 {
    let secs = d.as_secs().saturating_add(u64::from(d.subsec_nanos() > 0));
    secs.max(1)
}

impl core::error::Error for GateError {}

#[cfg(feature = "std")]
impl From<GateError> for std::io::Error {
    fn from(e: GateError) -> Self {
        use std::io::ErrorKind;
        let kind = match e {
            GateError::Busy { .. } => ErrorKind::WouldBlock,
            GateError::Cancelled => ErrorKind::Interrupted,
            GateError::ExceedsCapacity(_) | GateError::ExceedsMaxUnits { .. } => {
                ErrorKind::InvalidInput
            }
            GateError::Closed => ErrorKind::NotConnected,
        };
        std::io::Error::new(kind, e)
    }
}

/// A gate configuration that cannot work.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ConfigError {
    /// Capacity 0: nothing could ever be admitted. A [`Semaphore`](crate::Semaphore)
    /// accepts 0, since forgotten permits can bring it there and
    /// [`add_units`](crate::Semaphore::add_units) back; a gate's capacity is a
    /// configuration, and 0 there is always a mistake.
    ZeroCapacity,
    /// Capacity above [`Semaphore::MAX_UNITS`](crate::Semaphore::MAX_UNITS).
    CapacityTooLarge {
        /// The capacity asked for.
        capacity: usize,
    },
    /// Capacity below the largest request a call site makes: that call site could
    /// never be served.
    CapacityBelowMaxUnits {
        /// The capacity asked for.
        capacity: usize,
        /// The largest request declared with `max_units`.
        max_units: usize,
    },
    /// `max_units` of 0.
    ZeroMaxUnits,
    /// A zero wait budget: every caller that cannot be served at once would be shed
    /// without waiting. Use `try_acquire` for that.
    ZeroWaitBudget,
    /// A wait budget shorter than [`MIN_WAIT_BUDGET`] (a millisecond): below the
    /// resolution of Tokio's timer, which would round it up unseen. Use
    /// `try_acquire` for no wait at all.
    #[doc = alloc_item_link!("MIN_WAIT_BUDGET", "MIN_WAIT_BUDGET", "constant.MIN_WAIT_BUDGET.html")]
    WaitBudgetTooShort {
        /// The budget asked for.
        budget: Duration,
    },
    /// A wait budget longer than the gate allows (an hour): a caller parked that long
    /// has gone.
    WaitBudgetTooLong {
        /// The budget asked for.
        budget: Duration,
    },
    /// An overload target of zero, or not below the wait budget (a standing wait
    /// as long as the budget is no overload control).
    InvalidOverloadTarget {
        /// The target asked for.
        target: Duration,
        /// The wait budget.
        budget: Duration,
    },
    /// `Retry-After` bounds with `min` zero or `min > max`.
    InvalidRetryAfter {
        /// Lower bound.
        min: Duration,
        /// Upper bound.
        max: Duration,
    },
    /// A [`resize`] of a closed gate: it admits nobody again, so a new capacity
    /// would configure nothing. The gate is left unchanged.
    #[doc = alloc_item_link!("resize", "Gate::resize", "struct.Gate.html#method.resize")]
    Closed,
    /// A [`memory_watch`] was asked for, and the gate's timer cannot
    /// spawn (`Timer::spawn`) the task that reads the memory.
    #[doc = alloc_item_link!("memory_watch", "GateBuilder::memory_watch", "struct.GateBuilder.html#method.memory_watch")]
    MemoryWatchNeedsSpawn,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::ZeroCapacity => f.write_str("gate capacity must be at least 1 unit"),
            Self::CapacityTooLarge { capacity } => write!(
                f,
                "gate capacity {capacity} exceeds the maximum of {} units",
                crate::Semaphore::MAX_UNITS
            ),
            Self::CapacityBelowMaxUnits {
                capacity,
                max_units,
            } => write!(
                f,
                "gate capacity {capacity} is below max_units {max_units}: a request of \
                 {max_units} units could never be served"
            ),
            Self::ZeroMaxUnits => f.write_str("max_units must be at least 1"),
            Self::ZeroWaitBudget => f.write_str("wait budget must be greater than zero"),
            Self::WaitBudgetTooShort { budget } => {
                write!(
                    f,
                    "wait budget {budget:?} is shorter than the minimum of 1ms"
                )
            }
            Self::WaitBudgetTooLong { budget } => {
                write!(f, "wait budget {budget:?} is longer than the allowed hour")
            }
            Self::InvalidOverloadTarget { target, budget } => write!(
                f,
                "overload target must satisfy 0 < target < wait budget (got target {target:?}, \
                 budget {budget:?})"
            ),
            Self::InvalidRetryAfter { min, max } => write!(
                f,
                "Retry-After bounds must satisfy 0 < min <= max (got min {min:?}, max {max:?})"
            ),
            Self::Closed => f.write_str("the gate is closed: a resize would configure nothing"),
            Self::MemoryWatchNeedsSpawn => {
                f.write_str("a memory watch needs a timer that can spawn its task (Timer::spawn)")
            }
        }
    }
}

impl core::error::Error for ConfigError {}
