//! Pressure: how hard a gate is pressed for units now, one level from calm (0) to
//! pressed (1), for the rules that scale with it (an HTTP layer's progress rule
//! shortens its limits as it rises, as Envoy's overload manager reduces timeouts).
//!
//! # The signals
//!
//! - **Someone is parked**: a request waits for units now. Level 1.
//! - **The gate is overloaded** (with an overload target): a standing queue. Level 1.
//! - **A recent shed**: a gate that sheds at arrival (a hopeless wait, a full
//!   `max_waiters` queue, a `try_acquire`) may have nobody parked at any instant,
//!   yet turns callers away. Level 1 at the shed, falling linearly to 0 over
//!   [`Pressure::SHED_MEMORY`] after the last one, so a rule that scales with it relaxes
//!   smoothly once the gate stops shedding.
//!
//! - **Memory** (with a memory watch): the last reading leaves a class less
//!   room than the configured capacity, so the gate sheds or shrinks for
//!   memory. Level 1.
//!
//! The level is the largest of them.
//!
//! # Advisory state
//!
//! Nothing here counts units: a stale read shifts a limit derived from the level
//! for one look. The last shed is a wrapping count of milliseconds in a 32-bit
//! word (no 64-bit atomics, as elsewhere in the gate); a stamp read further back
//! than `SHED_MEMORY` counts as no recent shed, so a wrap (every 49 days) can
//! only make a shed of exactly 2³² ms ago look recent for `SHED_MEMORY`.

use core::time::Duration;

use crate::loom::sync::{AtomicU32, Ordering};

/// [`Pressure::SHED_MEMORY`].
const SHED_MEMORY: Duration = Pressure::SHED_MEMORY;

/// No shed seen yet.
const NEVER: u32 = u32::MAX;

/// The last shed's time, for [`Pressure`].
pub(crate) struct ShedClock {
    /// `stamp` of the gate's timer at the last shed, or [`NEVER`].
    last: AtomicU32,
}

impl ShedClock {
    pub(crate) fn new() -> Self {
        Self {
            last: AtomicU32::new(NEVER),
        }
    }

    /// A shed, now.
    pub(crate) fn saw_shed(&self, now: Duration) {
        // `Relaxed`: advisory (see the module doc); the word orders nothing.
        self.last.store(stamp(now), Ordering::Relaxed);
    }

    /// Time since the last shed, if it was within [`SHED_MEMORY`].
    pub(crate) fn since_shed(&self, now: Duration) -> Option<Duration> {
        let last = self.last.load(Ordering::Relaxed);
        if last == NEVER {
            return None;
        }
        let since = Duration::from_millis(u64::from(stamp(now).wrapping_sub(last)));
        (since <= SHED_MEMORY).then_some(since)
    }
}

/// A point of the gate's timer as a wrapping count of milliseconds, never
/// [`NEVER`].
fn stamp(t: Duration) -> u32 {
    (t.as_millis() as u32).min(NEVER - 1)
}

/// How hard a gate is pressed for units now: a level from 0 (calm) to 1 (pressed),
/// and the signals it came from. See [`Gate::pressure`](crate::Gate::pressure).
///
/// # Examples
///
/// A limit that is generous while the gate is calm and shrinks toward a floor as
/// pressure rises:
///
/// ```
/// use std::time::Duration;
/// use admit::Pressure;
///
/// let calm = Duration::from_secs(60);
/// let floor = Duration::from_secs(10);
/// assert_eq!(Pressure::CALM.scale(calm, floor), calm);
/// assert_eq!(Pressure::from_level(1.0).scale(calm, floor), floor);
/// assert_eq!(Pressure::from_level(0.5).scale(calm, floor), Duration::from_secs(35));
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Pressure {
    level: f32,
    parked: bool,
    overloaded: bool,
    since_shed: Option<Duration>,
    memory: bool,
}

impl Pressure {
    /// How long a shed keeps pressing the gate: the level falls from 1 at the
    /// shed to 0 this long after it. Long enough that a client retrying after a
    /// short `Retry-After` keeps the gate pressed between its tries.
    pub const SHED_MEMORY: Duration = Duration::from_secs(30);

    /// No pressure: nobody parked, not overloaded, no recent shed.
    pub const CALM: Pressure = Pressure {
        level: 0.0,
        parked: false,
        overloaded: false,
        since_shed: None,
        memory: false,
    };

    /// A pressure of `level` (clamped to 0..=1, NaN read as 0) with no signal
    /// named: for tests and for rules fed from another source.
    #[must_use]
    pub fn from_level(level: f32) -> Self {
        Self {
            level: if level.is_nan() {
                0.0
            } else {
                level.clamp(0.0, 1.0)
            },
            ..Self::CALM
        }
    }

    /// The pressure the signals make (see [the module doc](self)).
    pub(crate) fn of(
        parked: bool,
        overloaded: bool,
        since_shed: Option<Duration>,
        memory: bool,
    ) -> Self {
        let shed_level = since_shed.map_or(0.0, |since| {
            1.0 - since.as_secs_f32() / SHED_MEMORY.as_secs_f32()
        });
        let level = if parked || overloaded || memory {
            1.0
        } else {
            shed_level.clamp(0.0, 1.0)
        };
        Self {
            level,
            parked,
            overloaded,
            since_shed,
            memory,
        }
    }

    /// From 0 (calm) to 1 (pressed).
    #[must_use]
    pub fn level(self) -> f32 {
        self.level
    }

    /// Whether the level is 0.
    #[must_use]
    pub fn is_calm(self) -> bool {
        self.level == 0.0
    }

    /// Whether a request was parked at the look.
    #[must_use]
    pub fn parked(self) -> bool {
        self.parked
    }

    /// Whether the gate was overloaded at the look.
    #[must_use]
    pub fn overloaded(self) -> bool {
        self.overloaded
    }

    /// Whether memory bound the gate at the look: its memory watch's last
    /// reading left a class less room than the configured capacity.
    #[must_use]
    pub fn memory(self) -> bool {
        self.memory
    }

    /// Time since the gate last shed a request, if within [`SHED_MEMORY`](Self::SHED_MEMORY).
    #[must_use]
    pub fn since_shed(self) -> Option<Duration> {
        self.since_shed
    }

    /// `calm` scaled toward `floor` by the level: `calm` at 0, `floor` at 1,
    /// linear between. A `floor` above `calm` is read as `calm`.
    #[must_use]
    pub fn scale(self, calm: Duration, floor: Duration) -> Duration {
        let floor = floor.min(calm);
        calm - (calm - floor).mul_f32(self.level)
    }
}

impl Default for Pressure {
    fn default() -> Self {
        Self::CALM
    }
}

#[cfg(all(test, not(any(admit_loom, admit_shuttle))))]
mod tests {
    use super::*;

    fn s(secs: u64) -> Duration {
        Duration::from_secs(secs)
    }

    #[test]
    fn parked_or_overloaded_is_full_pressure() {
        assert_eq!(Pressure::of(true, false, None, false).level(), 1.0);
        assert_eq!(Pressure::of(false, true, None, false).level(), 1.0);
        assert_eq!(Pressure::of(false, false, None, true).level(), 1.0);
        assert!(Pressure::of(false, false, None, false).is_calm());
    }

    #[test]
    fn a_shed_presses_and_fades_over_the_memory() {
        assert_eq!(Pressure::of(false, false, Some(s(0)), false).level(), 1.0);
        assert_eq!(
            Pressure::of(false, false, Some(SHED_MEMORY / 2), false).level(),
            0.5
        );
        assert!(Pressure::of(false, false, Some(SHED_MEMORY), false).is_calm());
    }

    #[test]
    fn the_shed_clock_forgets_after_the_memory() {
        let clock = ShedClock::new();
        assert_eq!(clock.since_shed(s(5)), None);
        clock.saw_shed(s(10));
        assert_eq!(clock.since_shed(s(10)), Some(s(0)));
        assert_eq!(clock.since_shed(s(25)), Some(s(15)));
        assert_eq!(clock.since_shed(s(40)), Some(s(30)));
        assert_eq!(clock.since_shed(s(41)), None);
    }

    #[test]
    fn scale_is_linear_between_calm_and_floor() {
        let p = Pressure::from_level(0.25);
        assert_eq!(p.scale(s(60), s(20)), s(50));
        assert_eq!(Pressure::from_level(7.0).scale(s(60), s(20)), s(20));
        assert_eq!(Pressure::from_level(f32::NAN).scale(s(60), s(20)), s(60));
        // A floor above calm is calm.
        assert_eq!(Pressure::from_level(1.0).scale(s(10), s(20)), s(10));
    }
}
