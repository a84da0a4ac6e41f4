//! The gate's overload rule as the gate model follows it, step for step: the
//! mean hold of a unit ([`ModelPace`], in the gate's `f32` arithmetic) and CoDel's
//! state ([`ModelCodel`]: the shortest wait of each interval, entered above the
//! target, left after two intervals in a row that saw the queue empty and shed
//! nobody), and whether the gate is pressed (when a higher class sheds lower
//! ones). What the gate model predicts from them is in [`crate::gate`]'s module
//! docs, "Overload" and "Priority".

use std::time::Duration;

// The gate's own numbers: the model follows its rules, not copies of its constants.
use admit::__model::{
    CALM_INTERVALS, INTERVAL_HOLDS, MAX_INTERVAL, MAX_WINDOW, MIN_INTERVAL, MIN_WINDOW,
};
pub(crate) use admit::__model::{CAP_TARGETS, PRESS_MARK};

/// The gate's mean hold of a unit, with the same `f32` steps.
#[derive(Debug, Default)]
pub(crate) struct ModelPace {
    /// The mean hold of a unit, in seconds; `None` before the first release.
    pub(crate) mean: Option<f32>,
    folded: u32,
}

impl ModelPace {
    /// Folds in a release of `units` held for `held`.
    pub(crate) fn record(&mut self, units: usize, held: Duration, capacity: usize) {
        // Twice the capacity, within the bounds.
        let window = u32::try_from(capacity * 2)
            .unwrap_or(MAX_WINDOW)
            .clamp(MIN_WINDOW, MAX_WINDOW);
        let units = u32::try_from(units).unwrap_or(window).min(window);
        // Past the window (which a shrink may have lowered) the count stays.
        let n = if self.folded < window {
            self.folded = (self.folded + units).min(window);
            self.folded
        } else {
            window
        };
        let weight = units as f32 / n as f32;
        let sample = held.as_secs_f32();
        self.mean = Some(match self.mean {
            None => sample,
            Some(mean) => mean + (sample - mean) * weight,
        });
    }

    /// The mean hold of a unit, rounded as the gate rounds it.
    pub(crate) fn mean_hold(&self) -> Option<Duration> {
        self.mean.map(|m| micros_of(f64::from(m)))
    }
}

/// CoDel's state as the gate keeps it: the end of the interval (in wrapping
/// microseconds), the shortest wait in it, and whether the gate is overloaded.
#[derive(Debug)]
pub(crate) struct ModelCodel {
    /// The overload target.
    pub(crate) target: Duration,
    /// Whether the gate is overloaded.
    pub(crate) overloaded: bool,
    end: u32,
    shortest: Option<u32>,
    /// The interval saw the queue empty.
    emptied: bool,
    /// Overloaded: intervals in a row that saw the queue empty.
    calm: u32,
    /// The interval shed a request.
    pub(crate) shed: bool,
    /// The gate may be pressed: until `pressed_until`.
    pressed: bool,
    /// The end of the pressed time, in wrapping microseconds.
    pressed_until: u32,
}

impl ModelCodel {
    /// Not overloaded, no interval yet.
    pub(crate) fn new(target: Duration) -> Self {
        Self {
            target,
            overloaded: false,
            end: 0,
            shortest: None,
            emptied: false,
            calm: 0,
            shed: false,
            pressed: false,
            pressed_until: 0,
        }
    }

    /// Whether the gate is pressed at `now` (overloaded, or within an interval
    /// of a press); `past_mark` presses it for an interval from now.
    pub(crate) fn pressed(&mut self, past_mark: bool, now: Duration, interval: Duration) -> bool {
        if past_mark {
            self.press(now, interval);
            return true;
        }
        if self.overloaded {
            return true;
        }
        if !self.pressed {
            return false;
        }
        if passed(self.pressed_until, now) {
            self.pressed = false;
            return false;
        }
        true
    }

    /// A lower class was shed for a higher one at `now`: pressed for an
    /// interval more.
    pub(crate) fn press(&mut self, now: Duration, interval: Duration) {
        self.pressed_until = stamp(now + interval);
        self.pressed = true;
    }

    pub(crate) fn interval(&self, mean_hold: Option<Duration>) -> Duration {
        mean_hold
            .map(|m| m * INTERVAL_HOLDS)
            .unwrap_or(self.target)
            .clamp(MIN_INTERVAL, MAX_INTERVAL)
    }

    /// Returns the new state if this wait changed it.
    pub(crate) fn observe(
        &mut self,
        waited: Duration,
        empty: bool,
        now: Duration,
        mean: Option<Duration>,
    ) -> Option<bool> {
        if passed(self.end, now) {
            self.end = stamp(now + self.interval(mean));
            // Entered above the target; left after `CALM_INTERVALS` in a row
            // that saw the queue empty.
            let shed = core::mem::take(&mut self.shed);
            let emptied = core::mem::replace(&mut self.emptied, empty) && !shed;
            let overloaded = if !self.overloaded {
                self.shortest.is_some_and(|s| s > us(self.target))
            } else if emptied {
                self.calm += 1;
                self.calm < CALM_INTERVALS
            } else {
                self.calm = 0;
                true
            };
            if !overloaded {
                self.calm = 0;
            }
            self.shortest = Some(us(waited));
            let changed = overloaded != self.overloaded;
            self.overloaded = overloaded;
            return changed.then_some(overloaded);
        }
        self.shortest = Some(self.shortest.map_or(us(waited), |s| s.min(us(waited))));
        self.emptied |= empty;
        None
    }
}

/// `d` in whole microseconds, saturating below `u32::MAX` (no wait seen).
fn us(d: Duration) -> u32 {
    u32::try_from(d.as_micros()).unwrap_or(u32::MAX - 1)
}

/// A point of the clock as a wrapping count of microseconds.
fn stamp(d: Duration) -> u32 {
    d.as_micros() as u32
}

/// Whether the stamped end `end` has passed at `now`: one read further ahead
/// than the longest interval is stale.
fn passed(end: u32, now: Duration) -> bool {
    let ahead = end.wrapping_sub(stamp(now));
    ahead == 0 || ahead > us(MAX_INTERVAL)
}

/// Seconds to the nearest microsecond, as the gate rounds its estimate.
pub(crate) fn micros_of(secs: f64) -> Duration {
    Duration::from_micros((secs * 1e6 + 0.5) as u64)
}
