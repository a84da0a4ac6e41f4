//! The `Retry-After` a gate suggests when it sheds, derived from what it has seen.
//!
//! State: one atomic word holding an exponentially weighted moving average of the
//! hold times observed at release, in whole milliseconds (`EMPTY` until the first
//! release). No lock: a release folds its sample in with a CAS loop; a shed reads it
//! with one load. On 32-bit targets the average saturates at about 49 days, far
//! beyond any sensible upper bound.

use core::time::Duration;

use crate::loom::sync::{AtomicUsize, Ordering};

/// No hold time observed yet.
const EMPTY: usize = usize::MAX;
/// The longest hold a sample records, in ms: longer ones saturate here, below
/// `EMPTY`.
const LONGEST_SAMPLE: usize = EMPTY - 1;
/// Weight of a new sample: 1 / 2^WEIGHT_SHIFT (1/8).
const WEIGHT_SHIFT: u32 = 3;

pub(crate) struct RetryAfter {
    min: Duration,
    max: Duration,
    /// EWMA of hold times in ms, or `EMPTY`.
    ewma_ms: AtomicUsize,
}

impl RetryAfter {
    pub(crate) fn new(min: Duration, max: Duration) -> Self {
        Self {
            min,
            max,
            ewma_ms: AtomicUsize::new(EMPTY),
        }
    }

    pub(crate) fn bounds(&self) -> (Duration, Duration) {
        (self.min, self.max)
    }

    /// Folds one hold time into the average: `avg += (sample - avg) / 8`; the first
    /// sample becomes the average.
    pub(crate) fn record_hold(&self, held: Duration) {
        let sample =
            usize::try_from(held.as_millis()).map_or(LONGEST_SAMPLE, |ms| ms.min(LONGEST_SAMPLE));
        let mut old = self.ewma_ms.load(Ordering::Relaxed);
        loop {
            let new = if old == EMPTY {
                sample
            } else if sample >= old {
                old + ((sample - old) >> WEIGHT_SHIFT)
            } else {
                old - ((old - sample) >> WEIGHT_SHIFT)
            };
            if new == old {
                return;
            }
            match self
                .ewma_ms
                .compare_exchange(old, new, Ordering::Relaxed, Ordering::Relaxed)
            {
                Ok(_) => return,
                Err(actual) => old = actual,
            }
        }
    }

    /// The average hold time so far, `None` before the first release.
    pub(crate) fn average_hold(&self) -> Option<Duration> {
        match self.ewma_ms.load(Ordering::Relaxed) {
            EMPTY => None,
            ms => Some(Duration::from_millis(ms as u64)),
        }
    }

    /// `clamp(avg_hold × (capacity + waiters) / capacity, min, max)`; `min` before
    /// the first release. Never zero, since `min > 0` is validated.
    pub(crate) fn suggest(&self, waiters: usize, capacity: usize) -> Duration {
        let Some(avg) = self.average_hold() else {
            return self.min;
        };
        let avg_ms = avg.as_millis() as u64;
        let capacity = capacity.max(1) as u64;
        let scaled_ms = avg_ms.saturating_mul(capacity.saturating_add(waiters as u64)) / capacity;
        Duration::from_millis(scaled_ms).clamp(self.min, self.max)
    }
}
