//! The gate's pace: how long a unit is held, and from it how long a newcomer would
//! wait.
//!
//! # The estimate
//!
//! A request parks only when the gate is full, and a full gate returns units at
//! `capacity / mean_hold` per second (Little's law, with `mean_hold` the mean time
//! a *unit* is held, so a 4-unit permit weighs four times a 1-unit one). A request
//! of `units` arriving now is granted once the units queued ahead of it and its own
//! have come back, less those free already:
//!
//! `estimated_wait = (queued + units − available) × mean_hold / capacity`
//!
//! The capacity is read at the estimate, so a resize is followed at once; a change
//! of pace as the releases report it.
//!
//! # The mean hold
//!
//! Each release folds its hold time in with a weight of `units / n`, where `n`
//! counts the units folded so far up to the window: a plain running mean over the
//! first releases (so the first hold does not dominate), then a moving average over
//! about the last window of units returned. The window is twice the capacity
//! (within [`MIN_WINDOW`, `MAX_WINDOW`]): the units a full gate returns in two
//! mean holds, whatever the scale, so that one long hold of a large permit moves
//! the mean by a fraction of what it would over a fixed handful of units (with
//! heavy-tailed holds, a 4-unit permit held ten times the mean would otherwise
//! double the estimate and shed every arrival). Stored as the bits of an `f32` of
//! seconds: 32-bit atomics exist on every target, and an `f32` spans microsecond
//! RPC holds and hour-long uploads alike.
//!
//! # Advisory state
//!
//! Nothing here takes part in the accounting of units: the semaphore grants and
//! returns them by its own words. Every access is `Relaxed`, two releases that race
//! may each fold their sample into the same old mean (one is lost), and a read may
//! be stale by a few releases. The worst a stale or lost sample can do is make one
//! request's estimate a little off, so that it is shed at arrival or parks where
//! an exact estimate would have done the other, or carries a slightly different
//! `Retry-After`: no unit is lost or granted twice, and FIFO order is the
//! semaphore's.

use core::time::Duration;

use crate::loom::sync::{AtomicU32, Ordering};

/// The fewest units over which the mean hold settles into a moving average.
pub(crate) const MIN_WINDOW: u32 = 16;
/// The most.
pub(crate) const MAX_WINDOW: u32 = 1024;

/// The window of a gate of `capacity`: twice it, within the bounds.
fn window(capacity: usize) -> u32 {
    u32::try_from(capacity.saturating_mul(2))
        .map_or(MAX_WINDOW, |w| w.clamp(MIN_WINDOW, MAX_WINDOW))
}

/// No hold seen yet (a NaN no arithmetic here produces: samples are finite).
const EMPTY: u32 = u32::MAX;

pub(crate) struct Pace {
    /// The mean hold of a unit, in seconds, as `f32` bits; `EMPTY` until the first
    /// release.
    mean_hold: AtomicU32,
    /// Units folded so far, up to the window.
    folded: AtomicU32,
}

impl Pace {
    pub(crate) fn new() -> Self {
        Self {
            mean_hold: AtomicU32::new(EMPTY),
            folded: AtomicU32::new(0),
        }
    }

    /// Folds in the release of `units` held for `held`, from a gate of
    /// `capacity`.
    pub(crate) fn record(&self, units: usize, held: Duration, capacity: usize) {
        let window = window(capacity);
        let units = u32::try_from(units).unwrap_or(window).min(window);
        let n = self.folded.load(Ordering::Relaxed);
        let n = if n < window {
            let n = (n + units).min(window);
            self.folded.store(n, Ordering::Relaxed);
            n
        } else {
            window
        };
        let weight = units as f32 / n as f32;
        let sample = held.as_secs_f32();
        let mut old = self.mean_hold.load(Ordering::Relaxed);
        loop {
            let new = if old == EMPTY {
                sample
            } else {
                let mean = f32::from_bits(old);
                mean + (sample - mean) * weight
            };
            match self.mean_hold.compare_exchange_weak(
                old,
                new.to_bits(),
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => return,
                Err(actual) => old = actual,
            }
        }
    }

    /// The mean hold of a unit; `None` before the first release.
    pub(crate) fn mean_hold(&self) -> Option<Duration> {
        match self.mean_hold.load(Ordering::Relaxed) {
            EMPTY => None,
            bits => Some(seconds(f64::from(f32::from_bits(bits)))),
        }
    }

    /// The wait until `deficit` more units than are free have come back to a full
    /// gate of `capacity`; `None` before the first release.
    pub(crate) fn time_for(&self, deficit: usize, capacity: usize) -> Option<Duration> {
        let mean = self.mean_hold.load(Ordering::Relaxed);
        if mean == EMPTY {
            return None;
        }
        let mean = f64::from(f32::from_bits(mean));
        Some(seconds(mean * deficit as f64 / capacity.max(1) as f64))
    }
}

impl Pace {
    /// The most units beyond the free ones whose return a full gate of
    /// `capacity` makes within `wait`: the inverse of
    /// [`time_for`](Self::time_for), rounded down; `None` before the first
    /// release.
    pub(crate) fn units_within(&self, wait: Duration, capacity: usize) -> Option<usize> {
        let mean = self.mean_hold.load(Ordering::Relaxed);
        if mean == EMPTY {
            return None;
        }
        let mean = f64::from(f32::from_bits(mean));
        let units = wait.as_secs_f64() * capacity as f64 / mean;
        // The mean is an `f32`: its rounding must not take a whole unit off an
        // exact multiple (400 ms of 100 ms returns are four). `as` saturates,
        // and turns a NaN (a zero mean and wait) into 0.
        Some((units * (1.0 + f64::from(f32::EPSILON))) as usize)
    }
}

/// `secs` as a `Duration`, to the nearest microsecond (so a mean of 300 ms reads
/// 300 ms, not the `f32` next to it) and saturating.
fn seconds(secs: f64) -> Duration {
    // `as` saturates, and turns a negative value into 0.
    Duration::from_micros((secs * 1e6 + 0.5) as u64)
}

#[cfg(all(test, not(any(admit_loom, admit_shuttle))))]
mod tests {
    use super::*;

    fn ms(ms: u64) -> Duration {
        Duration::from_millis(ms)
    }

    fn close(a: Duration, b: Duration) -> bool {
        a.abs_diff(b) < Duration::from_micros(10)
    }

    #[test]
    fn the_first_releases_are_a_plain_mean_then_a_moving_average() {
        let pace = Pace::new();
        assert_eq!(pace.mean_hold(), None);
        pace.record(1, ms(100), 4);
        assert!(close(pace.mean_hold().unwrap(), ms(100)));
        pace.record(1, ms(300), 4);
        assert!(close(pace.mean_hold().unwrap(), ms(200)), "(100 + 300) / 2");
        pace.record(2, ms(600), 4);
        assert!(
            close(pace.mean_hold().unwrap(), ms(400)),
            "unit-weighted: (100 + 300 + 2 × 600) / 4"
        );
        for _ in 0..MIN_WINDOW {
            pace.record(1, ms(400), 4);
        }
        pace.record(1, ms(2000), 4);
        // Past the window every unit weighs 1/16.
        assert!(
            close(pace.mean_hold().unwrap(), ms(500)),
            "400 + (2000 - 400) / 16"
        );
    }

    #[test]
    fn the_window_is_twice_the_capacity_within_its_bounds() {
        assert_eq!(window(1), MIN_WINDOW);
        assert_eq!(window(64), 128);
        assert_eq!(window(usize::MAX), MAX_WINDOW);
        // A gate of 64: past the window, a 4-unit release weighs 4/128.
        let pace = Pace::new();
        for _ in 0..128 {
            pace.record(1, ms(1000), 64);
        }
        pace.record(4, ms(33_000), 64);
        assert!(
            close(pace.mean_hold().unwrap(), ms(2000)),
            "1 + 32 × 4 / 128"
        );
    }

    #[test]
    fn a_permit_of_more_units_than_the_window_replaces_the_mean() {
        let pace = Pace::new();
        pace.record(1, ms(100), 4);
        pace.record(64, ms(900), 4);
        assert!(close(pace.mean_hold().unwrap(), ms(900)));
    }

    #[test]
    fn the_time_for_a_deficit_is_its_share_of_a_turnover() {
        let pace = Pace::new();
        assert_eq!(pace.time_for(4, 4), None, "no hold seen: no estimate");
        pace.record(1, ms(800), 4);
        assert!(
            close(pace.time_for(4, 4).unwrap(), ms(800)),
            "a whole gate's worth: one mean hold"
        );
        assert!(close(pace.time_for(1, 4).unwrap(), ms(200)));
        assert!(close(pace.time_for(12, 4).unwrap(), ms(2400)));
        assert_eq!(pace.time_for(0, 4), Some(Duration::ZERO));
        assert_eq!(
            pace.time_for(usize::MAX, 1)
                .map(|d| d > Duration::from_secs(1 << 40)),
            Some(true)
        );
    }
}
