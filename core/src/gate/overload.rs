//! Overload control: a standing queue detected by CoDel's rule, and the limits it
//! puts on a wait.
//!
//! # The rule
//!
//! The gate becomes *overloaded* when the shortest wait seen over an interval
//! stayed above the target (RFC 8289's "the minimum sojourn time over an
//! interval", as folly's `Codel` applies it to a server's queue), and stays so
//! until [`CALM_INTERVALS`] intervals in a row each saw the queue empty and shed
//! nobody. A wait is
//! seen when a request is admitted, and when a request is shed after it parked
//! (for a higher class too), but not the wait of one admitted after lower
//! classes were shed for it (a class that always gets in by shedding others
//! would otherwise hide the queue the others stand in);
//! the queue is seen empty at a grant at once (nobody was parked ahead: no
//! barging) and at a release with nobody parked (both also count as waits of
//! zero). At the first wait seen after an interval ends, the interval decides the
//! state for the next one, and that wait opens it.
//!
//! A burst is a queue that drains: its last waits fall below the target and the
//! rule does not fire. A queue that stays above the target for a whole interval is
//! standing, and waiting longer helps nobody: the units come back no faster. Once
//! overloaded, the gate itself keeps waits between the target and the cap, so a
//! wait below the target is no sign that the overload ended; an empty queue is,
//! and one empty moment under a load that goes on is chance: two intervals of
//! them are not. An interval that shed a request is not calm however empty its
//! queue was seen: the gate's own sheds keep the queue short under overload.
//!
//! # The interval
//!
//! Two mean holds of a unit ([`Pace`](super::pace)): the time a full gate takes
//! to turn its whole capacity over twice. A wait above the target means the queue
//! has stood for the target already; the interval gives it two more turnovers to
//! clear, so a burst of up to two gates' worth of requests beyond the target's is
//! absorbed without an alarm, whatever the scale of the holds (microsecond RPCs or
//! multi-second uploads). With heavy-tailed holds one turnover is too short: a
//! queue above the target for a whole mean hold happens at 0.8× the capacity
//! (docs/overload.md). It is bounded to [`MIN_INTERVAL`, `MAX_INTERVAL`], and is
//! the target before the first release.
//!
//! # The limits
//!
//! While overloaded, no request waits longer than [`cap`](Overload::cap), twice
//! the target (folly's "slough timeout", Breakwater's drop threshold), less its
//! size deduction (below): a request parked that long is shed with
//! [`ShedReason::Overload`]. At arrival, a request whose estimated wait is longer
//! than the most it could wait (its budget or ceiling, and the cap while
//! overloaded) is shed at once with [`ShedReason::Hopeless`]. FIFO order is the
//! semaphore's and stays: nothing admitted is revoked, and nobody is served out of
//! turn.
//!
//! # Size
//!
//! Under a standing queue the waits stand at the edge of the limit that sheds,
//! and a request of `k` units, at the head, waits for `k − 1` more units to come
//! back than a request of one: one limit for all sheds the larger far more often
//! (a 2-unit request got in half as often as a 1-unit one at twice the capacity,
//! docs/overload.md). So the cap is the largest request's: a request of `k` units
//! is capped at twice the target less the time the `max_units − k` units it asks
//! for fewer than the largest take to come back to a full gate
//! ([`WaitLimits::size_deduction`], never below the target), and the test at
//! arrival measures it against that cap. Every request is then judged as the
//! largest would be, at the same queue, and nobody waits past twice the target.
//! The request's own limits (the wait budget, its ceiling) take nothing off: the
//! budget is the most any caller waits, and without a target the gate behaves as
//! it always has. `max_units` is what makes this right: declared above the
//! largest request any call site makes, it shortens every cap for nothing.

//! # Pressed: when a higher class sheds a lower one
//!
//! A request arriving behind lower classes past the target has enough of them
//! shed to be within it ([`Wait::park`](super::protocol::Wait::park)), but only
//! while the gate is *pressed*: overloaded, or within an interval of an arrival
//! that found the queue past [`PRESS_MARK`] targets (or past the most it may
//! wait, if that is less), or of a shed so made. A queue that long is no burst
//! the target tolerates: at 0.8× the capacity the waits of one FIFO reach
//! twice the target on their own, and shedding for them sheds at a load nobody
//! needs shed (docs/overload.md). A spike of a lower class crosses the mark
//! within moments, long before an interval shows the queue standing; and while
//! the gate sheds so, its waits stay short and the overload rule may never see
//! them stand, so the sheds themselves keep it pressed.
//!
//! # Advisory state
//!
//! As the pace's: nothing here counts units. A stale read of the state or of the
//! interval's end can only make one request be shed or admitted differently from
//! an exact one, or delay a change of state by one wait seen; the semaphore's
//! accounting is untouched. Times are stored as microseconds in 32-bit words
//! (wrapping every 71 minutes, so 32-bit targets need no 64-bit atomics): an
//! interval's end, or the pressed time's, is never further ahead than
//! `MAX_INTERVAL`, so one that reads further ahead is stale and counts as
//! passed.

use core::time::Duration;

use crate::loom::sync::{AtomicBool, AtomicU32, Ordering};
use crate::{OverloadEvent, ShedReason};

/// The shortest interval: below it the clock's resolution and the cost of a
/// change of state per wait would dominate.
pub(crate) const MIN_INTERVAL: Duration = Duration::from_micros(100);
/// The longest interval.
pub(crate) const MAX_INTERVAL: Duration = Duration::from_secs(60);
/// An overloaded gate becomes calm again after this many intervals in a row that
/// each saw its queue empty.
pub(crate) const CALM_INTERVALS: u32 = 2;
/// The interval is this many mean holds of a unit (the target before the first
/// release): long enough that a queue a burst leaves drains within it.
pub(crate) const INTERVAL_HOLDS: u32 = 2;
/// An overloaded gate lets a request wait at most this many targets.
pub(crate) const CAP_TARGETS: u32 = 2;
/// No wait seen in this interval yet.
const NONE: u32 = u32::MAX;
/// A queue this many targets long presses the gate (see
/// [Pressed](self#pressed-when-a-higher-class-sheds-a-lower-one)): twice the
/// cap.
pub(crate) const PRESS_MARK: u32 = 4;

pub(crate) struct Overload {
    target: Duration,
    overloaded: AtomicBool,
    /// The end of the current interval: `stamp` of the gate's timer.
    interval_end: AtomicU32,
    /// The shortest wait seen in the current interval, in µs (saturating), or
    /// `NONE`.
    shortest: AtomicU32,
    /// Whether the current interval saw the queue empty.
    emptied: AtomicBool,
    /// While overloaded: the intervals in a row that saw the queue empty.
    calm: AtomicU32,
    /// Whether the current interval shed a request.
    shed: AtomicBool,
    /// Whether the gate may be pressed: until `pressed_until`.
    pressed: AtomicBool,
    /// The end of the pressed time: `stamp` of the gate's timer.
    pressed_until: AtomicU32,
}

impl Overload {
    pub(crate) fn new(target: Duration) -> Self {
        Self {
            target,
            overloaded: AtomicBool::new(false),
            interval_end: AtomicU32::new(0),
            shortest: AtomicU32::new(NONE),
            emptied: AtomicBool::new(false),
            calm: AtomicU32::new(0),
            shed: AtomicBool::new(false),
            pressed: AtomicBool::new(false),
            pressed_until: AtomicU32::new(0),
        }
    }

    /// Whether the gate is pressed at `now`, with the interval in force
    /// `interval`; `past_mark` if an arrival found the queue past the
    /// [mark](PRESS_MARK), which presses it for an interval from now.
    pub(crate) fn pressed(&self, past_mark: bool, now: Duration, interval: Duration) -> bool {
        if past_mark {
            self.press(now, interval);
            return true;
        }
        if self.is_overloaded() {
            return true;
        }
        if !self.pressed.load(Ordering::Relaxed) {
            return false;
        }
        let until = self.pressed_until.load(Ordering::Relaxed);
        if passed(until, now) {
            self.pressed.store(false, Ordering::Relaxed);
            return false;
        }
        true
    }

    /// A lower class was shed for a higher one at `now`: pressed for an
    /// interval more.
    pub(crate) fn press(&self, now: Duration, interval: Duration) {
        self.pressed_until
            .store(stamp(now.saturating_add(interval)), Ordering::Relaxed);
        self.pressed.store(true, Ordering::Relaxed);
    }

    /// The queue length that presses the gate, for a request that may wait
    /// `longest`.
    pub(crate) fn press_mark(&self, longest: Duration) -> Duration {
        self.target.saturating_mul(PRESS_MARK).min(longest)
    }

    /// A request was shed: however empty the queue was seen, the demand was more
    /// than the gate admitted.
    pub(crate) fn saw_shed(&self) {
        self.shed.store(true, Ordering::Relaxed);
    }

    pub(crate) fn target(&self) -> Duration {
        self.target
    }

    /// The longest an overloaded gate lets a request wait: [`CAP_TARGETS`]
    /// targets.
    pub(crate) fn cap(&self) -> Duration {
        self.target.saturating_mul(CAP_TARGETS)
    }

    pub(crate) fn is_overloaded(&self) -> bool {
        self.overloaded.load(Ordering::Relaxed)
    }

    /// The interval for a mean hold of `mean_hold` (`None`: no release yet).
    pub(crate) fn interval(&self, mean_hold: Option<Duration>) -> Duration {
        mean_hold
            .map(|mean| mean.saturating_mul(INTERVAL_HOLDS))
            .unwrap_or(self.target)
            .clamp(MIN_INTERVAL, MAX_INTERVAL)
    }

    /// A wait seen at `now`, with the interval in force `interval`; `empty` if it
    /// showed the queue empty (a grant at once, a release with nobody parked).
    /// Returns the event to report when this wait changed the state.
    pub(crate) fn observe(
        &self,
        waited: Duration,
        empty: bool,
        now: Duration,
        interval: Duration,
    ) -> Option<OverloadEvent> {
        let waited_us = micros(waited);
        let end = self.interval_end.load(Ordering::Relaxed);
        if passed(end, now)
            && self
                .interval_end
                .compare_exchange(
                    end,
                    stamp(now.saturating_add(interval)),
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                )
                .is_ok()
        {
            // This wait opens the next interval.
            let shortest = self.shortest.swap(waited_us, Ordering::Relaxed);
            // Calm: the queue seen empty, and nobody shed.
            let emptied = self.emptied.swap(empty, Ordering::Relaxed)
                & !self.shed.swap(false, Ordering::Relaxed);
            let overloaded = if !self.overloaded.load(Ordering::Relaxed) {
                shortest != NONE && shortest > micros(self.target)
            } else if emptied {
                self.calm.fetch_add(1, Ordering::Relaxed) + 1 < CALM_INTERVALS
            } else {
                self.calm.store(0, Ordering::Relaxed);
                true
            };
            if !overloaded {
                self.calm.store(0, Ordering::Relaxed);
            }
            if self.overloaded.swap(overloaded, Ordering::Relaxed) != overloaded {
                return Some(OverloadEvent::new(
                    overloaded,
                    Duration::from_micros(u64::from(shortest)),
                    interval,
                    self.target,
                ));
            }
            return None;
        }
        if waited_us < self.shortest.load(Ordering::Relaxed) {
            self.shortest.fetch_min(waited_us, Ordering::Relaxed);
        }
        if empty {
            self.emptied.store(true, Ordering::Relaxed);
        }
        None
    }
}

/// How long a request may wait, and when it must look again: its own limit (the
/// budget, or its ceiling) and, with an overload target, the cap while overloaded.
#[derive(Clone, Copy)]
pub(crate) struct WaitLimits<'a> {
    /// The budget, or the ceiling if shorter.
    pub(crate) limit: Duration,
    /// Which of the two `limit` is: [`ShedReason::WaitBudget`] or
    /// [`ShedReason::Ceiling`].
    pub(crate) limit_reason: ShedReason,
    pub(crate) overload: Option<&'a Overload>,
    /// With an overload target: what the request's size takes off the cap, the
    /// time the units it asks for fewer than `max_units` take to come back to a
    /// full gate (zero for the largest request, and before the first release).
    /// See [Size](self#size).
    pub(crate) size_deduction: Duration,
    /// With an overload target: how often a request parked past the cap looks
    /// again whether the gate has become overloaded: the target, or a sixteenth
    /// of the limit if longer, so a wait looks at most 16 more times.
    pub(crate) recheck: Duration,
}

impl WaitLimits<'_> {
    /// The cap on this request's wait while overloaded: twice the target, less
    /// its size deduction, and never below the target.
    fn cap(&self, overload: &Overload) -> Duration {
        overload
            .cap()
            .saturating_sub(self.size_deduction)
            .max(overload.target())
    }

    /// The most a request arriving now may wait.
    pub(crate) fn longest_now(&self) -> Duration {
        match self.overload {
            Some(overload) if overload.is_overloaded() => self.limit.min(self.cap(overload)),
            _ => self.limit,
        }
    }

    /// Why a request parked for `waited` must be shed now, if it must.
    pub(crate) fn expired(&self, waited: Duration) -> Option<ShedReason> {
        if waited >= self.limit {
            return Some(self.limit_reason);
        }
        match self.overload {
            Some(overload) if overload.is_overloaded() && waited >= self.cap(overload) => {
                Some(ShedReason::Overload)
            }
            _ => None,
        }
    }

    /// The wait, counted from parking, at which a request that has not
    /// [`expired`](Self::expired) after `waited` must look again: its limit, the
    /// cap, or (past the cap, while not overloaded) one recheck later.
    pub(crate) fn next_look(&self, waited: Duration) -> Duration {
        let Some(overload) = self.overload else {
            return self.limit;
        };
        let cap = self.cap(overload);
        if cap >= self.limit {
            self.limit
        } else if waited < cap {
            cap
        } else {
            self.limit.min(waited.saturating_add(self.recheck))
        }
    }
}

/// `d` in whole microseconds, saturating below `NONE`.
fn micros(d: Duration) -> u32 {
    u32::try_from(d.as_micros()).map_or(NONE - 1, |us| us.min(NONE - 1))
}

/// A point of the gate's timer as a wrapping count of microseconds.
fn stamp(t: Duration) -> u32 {
    t.as_micros() as u32
}

/// Whether the stamped end of a time, `end`, has passed at `now`: it is
/// never set further ahead than `MAX_INTERVAL`, so one read further ahead is
/// stale.
fn passed(end: u32, now: Duration) -> bool {
    let ahead = end.wrapping_sub(stamp(now));
    ahead == 0 || ahead > micros(MAX_INTERVAL)
}

#[cfg(all(test, not(any(admit_loom, admit_shuttle))))]
mod tests {
    use super::*;

    const TARGET: Duration = Duration::from_millis(100);
    const INTERVAL: Duration = Duration::from_secs(1);

    fn ms(ms: u64) -> Duration {
        Duration::from_millis(ms)
    }

    #[test]
    fn the_state_changes_only_when_an_interval_ends() {
        let o = Overload::new(TARGET);
        // The first wait opens the first interval: no evidence yet.
        assert_eq!(o.observe(ms(500), false, ms(0), INTERVAL), None);
        assert_eq!(o.observe(ms(300), false, ms(500), INTERVAL), None);
        assert!(!o.is_overloaded(), "within the interval nothing changes");
        let event = o
            .observe(ms(400), false, ms(1000), INTERVAL)
            .expect("a change");
        assert!(event.overloaded);
        assert_eq!(event.shortest_wait, ms(300));
        assert!(o.is_overloaded());
        // Overloaded, a wait below the target is within what the gate keeps: it
        // stays overloaded.
        assert_eq!(o.observe(ms(50), false, ms(1500), INTERVAL), None);
        assert_eq!(o.observe(ms(400), false, ms(2000), INTERVAL), None);
        assert!(o.is_overloaded());
        // So is a wait of zero after parking: the queue was not seen empty.
        assert_eq!(o.observe(Duration::ZERO, false, ms(2500), INTERVAL), None);
        assert_eq!(o.observe(ms(400), false, ms(3000), INTERVAL), None);
        assert!(o.is_overloaded());
        // Intervals that each saw the queue empty, `CALM_INTERVALS` in a row, end it.
        let mut now = ms(3000);
        for i in 1..=CALM_INTERVALS {
            assert_eq!(
                o.observe(Duration::ZERO, true, now + ms(500), INTERVAL),
                None
            );
            now += INTERVAL;
            let event = o.observe(ms(400), false, now, INTERVAL);
            if i < CALM_INTERVALS {
                assert_eq!(event, None, "calm for {i} interval(s) only");
            } else {
                let event = event.expect("a change");
                assert!(!event.overloaded);
                assert_eq!(event.shortest_wait, Duration::ZERO);
            }
        }
    }

    #[test]
    fn a_wait_equal_to_the_target_is_not_above_it() {
        let o = Overload::new(TARGET);
        o.observe(TARGET, false, ms(0), INTERVAL);
        o.observe(TARGET, false, ms(1000), INTERVAL);
        assert!(!o.is_overloaded());
    }

    #[test]
    fn an_interval_end_read_far_ahead_is_stale_and_passed() {
        let o = Overload::new(TARGET);
        o.observe(ms(500), false, ms(0), INTERVAL);
        // About 70 minutes later the µs stamp has wrapped to 62 s before the end
        // the first wait set: further ahead than any interval, so it has passed.
        let later = Duration::from_micros(1 << 32) - Duration::from_secs(61);
        assert!(o.observe(ms(500), false, later, INTERVAL).is_some());
    }

    #[test]
    fn an_interval_of_the_longest_length_is_not_read_as_stale() {
        let o = Overload::new(TARGET);
        o.observe(ms(500), false, ms(0), MAX_INTERVAL);
        // Its end is exactly the longest interval ahead: a running interval.
        assert_eq!(o.observe(ms(500), false, ms(0), MAX_INTERVAL), None);
        assert_eq!(
            o.observe(ms(500), false, MAX_INTERVAL - ms(1), MAX_INTERVAL),
            None
        );
        assert!(o
            .observe(ms(500), false, MAX_INTERVAL, MAX_INTERVAL)
            .is_some());
    }

    #[test]
    fn the_interval_is_two_mean_holds_within_its_bounds() {
        let o = Overload::new(TARGET);
        assert_eq!(o.interval(None), TARGET);
        assert_eq!(o.interval(Some(ms(2500))), ms(5000));
        assert_eq!(o.interval(Some(Duration::from_micros(3))), MIN_INTERVAL);
        assert_eq!(o.interval(Some(Duration::from_secs(3600))), MAX_INTERVAL);
    }

    #[test]
    fn an_interval_that_shed_a_request_is_not_calm() {
        let o = Overload::new(TARGET);
        o.observe(ms(500), false, ms(0), INTERVAL);
        o.observe(ms(500), false, ms(1000), INTERVAL);
        assert!(o.is_overloaded());
        // Each interval sees the queue empty, but the second also sheds.
        o.observe(Duration::ZERO, true, ms(1500), INTERVAL);
        o.observe(Duration::ZERO, true, ms(2000), INTERVAL);
        o.saw_shed();
        o.observe(Duration::ZERO, true, ms(3000), INTERVAL);
        assert!(o.is_overloaded(), "a shed breaks the calm");
        o.observe(Duration::ZERO, true, ms(4000), INTERVAL);
        o.observe(Duration::ZERO, true, ms(5000), INTERVAL);
        assert!(!o.is_overloaded(), "two calm intervals after it");
    }

    #[test]
    fn limits_cap_an_overloaded_wait_and_recheck_past_the_cap() {
        let o = Overload::new(TARGET);
        let limits = WaitLimits {
            limit: ms(1000),
            limit_reason: ShedReason::WaitBudget,
            overload: Some(&o),
            size_deduction: Duration::ZERO,
            recheck: ms(300),
        };
        assert_eq!(limits.longest_now(), ms(1000));
        assert_eq!(limits.next_look(ms(0)), ms(200), "the cap first");
        assert_eq!(
            limits.expired(ms(250)),
            None,
            "not overloaded: the cap does not bind"
        );
        assert_eq!(limits.next_look(ms(250)), ms(550), "one recheck later");
        assert_eq!(limits.next_look(ms(900)), ms(1000), "never past the limit");
        assert_eq!(limits.expired(ms(1000)), Some(ShedReason::WaitBudget));
        o.overloaded.store(true, Ordering::Relaxed);
        assert_eq!(limits.longest_now(), ms(200));
        assert_eq!(limits.expired(ms(199)), None);
        assert_eq!(limits.expired(ms(200)), Some(ShedReason::Overload));
        let tight = WaitLimits {
            limit: ms(150),
            limit_reason: ShedReason::Ceiling,
            ..limits
        };
        assert_eq!(tight.next_look(ms(0)), ms(150), "a ceiling below the cap");
        assert_eq!(tight.expired(ms(150)), Some(ShedReason::Ceiling));
        let small = WaitLimits {
            size_deduction: ms(30),
            ..limits
        };
        assert_eq!(
            small.longest_now(),
            ms(170),
            "the cap, less the size's deduction"
        );
        assert_eq!(small.expired(ms(169)), None);
        assert_eq!(small.expired(ms(170)), Some(ShedReason::Overload));
        assert_eq!(small.next_look(ms(0)), ms(170));
        let tiny = WaitLimits {
            size_deduction: ms(150),
            ..limits
        };
        assert_eq!(tiny.longest_now(), ms(100), "never below the target");
    }
}
