//! A reference model of the gate contract and a deterministic replay against the
//! real [`admit::Gate`], on a manual clock ([`SpawningTimer`]), with a hand-fired
//! [`Trigger`] as each acquire's cancellation signal.
//!
//! The model is the semaphore model (a counter and a FIFO queue) plus, per waiter,
//! the instant it parked, its deadline (`min(ceiling, wait budget)` later) and its
//! cancellation signal. A poll is resolved in the gate's documented order: a
//! request above the gate's `max_units` (`ExceedsMaxUnits`, at once, even when the
//! capacity would fit it), then above the capacity (`ExceedsCapacity`, at once);
//! the caller's signal (`Cancelled`, not counted, units granted meanwhile
//! returned); the semaphore (a grant wins over a deadline reached in the same
//! poll; `Closed`); then the deadline (`Busy`, one shed for the call's source, for
//! `Ceiling` if the call's ceiling is below the wait budget, else `WaitBudget`; a
//! zero ceiling sheds at the first poll). `try_acquire` that finds no units is a
//! `NoWait` shed with a zero wait. Neither refusal at once is a shed: the observer
//! hears nothing. The reason of every shed is predicted both in the error
//! (`Busy { reason, .. }`) and in `on_shed`.
//!
//! After every step it checks: the observer's events of that step are exactly the
//! model's (`on_admit` / `on_release` / `on_shed`, with source, units, class,
//! the wait or hold time on the manual clock, and a shed's reason, `Retry-After`
//! and estimate), so shed counts per source, reason and class agree; the gauge
//! the observer keeps (`+units` at admit, `−units` at release) equals the units in
//! permits and never exceeds the capacity; `in_use()`, `waiters()`, `is_closed()`
//! agree with the model; a `Busy` carries the model's `Retry-After` for its units
//! and class, within its bounds (for the lowest class, the `retry_after()` the
//! gate reports right after); and every live waiter's waker (a fresh one per
//! poll) was called exactly once per event that concerns it since its last poll
//! (a grant, close or shed by the semaphore, its deadline passing, its signal
//! firing; a resolution during the poll itself wakes the waker the semaphore
//! holds then, the last poll's): no lost wake-up, no needless one. At the end
//! everything is drained and all units must be back, and no retired waker may
//! have been called or still be held.
//!
//! # Resize, split, merge, forget
//!
//! The model also keeps the capacity in force and the debt a shrink leaves, with
//! the semaphore model's serving pass (pay the debt from free units first, fail
//! parked requests above the capacity wherever they wait, grant only with no
//! debt). `Resize` must return the previous capacity and tell the observer the new
//! one (`on_capacity`, only if it changed). It is refused, changing nothing and
//! telling nothing, in this order: to 0 (`ZeroCapacity`), below `max_units`
//! (`CapacityBelowMaxUnits`), on a closed gate (`Closed`). So a resize never
//! lowers the capacity below a parked request (none is above `max_units`): only
//! forgets do, and a parked acquire failed by a forget is woken once and ends
//! `ExceedsCapacity` (not a shed: the observer hears nothing), as does a later
//! request between the capacity and `max_units`. `split` and `merge` tell the
//! observer nothing, and each part's units are later reported released once,
//! with the source and hold time of the permit that holds them then; `forget`
//! reports its units released, then the new capacity. `capacity()` is checked
//! after every step, and the observer's gauge may exceed the capacity only by
//! the units still owed to a shrink; `in_use()` counts the units in permits.
//!
//! # Overload
//!
//! A case whose capacity byte has its high bit set builds the gate with an
//! overload target of a quarter of the budget, and the model follows the rule
//! step for step: the mean hold of a unit (the same `f32` arithmetic as the
//! gate's pace), the units parked (every acquire past its first poll that has not
//! ended), the estimate `(queued + units − available) × mean / capacity`, CoDel's
//! state (the shortest wait of each interval, seen at every admission, parked
//! shed and release with nobody parked; entered above the target, left after two
//! intervals in a row that saw the queue empty: a grant at once, a release with
//! nobody parked), the limits on a wait (the cap while overloaded: twice the
//! target, less what a request's size takes off it) and the looks at them (a waiter's sleep fires at the cap, then once
//! a recheck, which the wake-up counts check). So it predicts each `Hopeless` shed at
//! arrival and `Overload` shed after parking, every `on_overload`, the
//! `Retry-After` of every shed, and `is_overloaded()` and `estimated_wait()` after
//! every step.
//!
//! # Priority
//!
//! Every acquire and `try_acquire` has a class (the raw site byte's
//! [`class_of`]: the source's own, `Critical`, or one set with `.priority()`),
//! and a case may bound the parked acquires with `max_waiters` (bits 6 and 7 of
//! the budget byte, [`GateCase::max_waiters`]). The model keeps, per class, the
//! units of the acquires that hold a place among the parked (from parking to
//! their end), the units posted for the serving pass to shed, and those of
//! waiters shed that have not yet seen it; the estimate counts a class and those
//! above it, less what is on its way out, so `estimated_wait()` (the lowest
//! class's) and each shed's `Retry-After` and estimate (its own class's) are
//! predicted. The serving pass is the semaphore's: grants from the head first,
//! then, only behind a head that does not fit, the walk from the head that
//! resolves the oldest waiting requests of each posted class, lowest first,
//! until their units cover what was posted (a larger one still goes; what it
//! cannot find is dropped; a full wake batch of 32 ends the pass and the walk
//! goes on in the next). A waiter so shed is woken once, and on its next poll
//! ends `Busy` for `Outranked`, counted once (its wait is seen by the overload
//! rule, as every parked shed's is); signalled or dropped first, nothing is
//! counted. A grant wins: a granted waiter is never shed. The model predicts
//! when the gate sheds for a class: an arrival at a full `max_waiters` queue
//! sheds the oldest waiter of the lowest class parked below its own and parks
//! (else `QueueFull`); with a target, an arrival is `Hopeless` only by the
//! estimate of its own class and above, and, while the gate is pressed
//! (overloaded, or within an interval of an arrival past four targets or of a
//! shed so made), sheds enough of the lower classes, lowest first, to be within
//! the target, whereupon its own wait is no sample of the queue's; a waiter at
//! the overload cap sheds its own units' worth of lower classes and waits on
//! (shedding nobody, itself included, until a recheck later; its admission then
//! no sample either), and is shed (`Overload`) only at a look that finds none
//! of them parked. That look comes before the poll reads the semaphore, so a
//! waiter already granted (or shed itself) sheds lower classes all the same, as
//! the gate does. Each event's class is checked, and a permit's class goes with
//! its split-off parts and is the one its merged units are released with. Not
//! modelled: the blocking acquire (no op makes one).
//!
//! # Memory
//!
//! A case with a [`GateOp::Memory`] among its operations builds the gate with a
//! memory watch ([`MemoryWatch`]) of [`MEMORY_UNIT`] bytes a unit, the default
//! marks and a reading every [`MEMORY_INTERVAL`], whose source is a cell the
//! replay sets ([`memory_reading`]: a working set against a limit, or `None`,
//! the source failing); it starts `None`. Its timer spawns the watch's task (and
//! refuses the overload watch, which the model does not follow), and the replay
//! polls the task right after the build (the first reading) and after every
//! clock advance; the watch reads once its interval has passed since its last
//! reading, so a `Memory` op shows from the next such reading on. A case
//! without one has no watch, and replays as before. The model re-implements the
//! rule (`memory.rs`, `ModelRoom`) from the units in use (in permits) at each
//! reading: the base, high water, last working set and what the units admitted
//! may still grow by (owed), kept between readings; each class's level
//! `⌊(mark × limit − other) / bytes per unit⌋`; the admissions until the next
//! reading, as many as could each take a fresh unit under the highest mark, or
//! one probe while the working set holds still (unbound if the configured
//! capacity could be admitted); the units admitted since the last reading
//! (taken from the admissions it bound, else the rise of the units in use);
//! and the capacity in force `max(min(configured, level of CriticalPlus),
//! max_units)`, set as a resize sets it (grants, debt). A `None` reading
//! unbinds everything. Each reading's `on_capacity` (if it changed) and
//! `on_memory` (reading, level of `CriticalPlus`, capacity) are predicted, the
//! watch ends at its first reading due after a close, and `pressure().memory()`
//! is checked after every step (its level of `Sheddable` against the
//! configured capacity). A resize sets the configured capacity, and a forget
//! lowers it by the units forgotten (as it lowers the capacity in force), so
//! that no reading or resize gives them back; the capacity in force is
//! re-applied at each. An arrival (`try_acquire`, an acquire's first poll) on
//! an open gate is shed for [`ShedReason::Memory`] if its class's level is
//! below the capacity in force and its units with those in use pass it, or if
//! fewer admissions are left than its units; it takes nothing at arrival. An
//! admission (every permit made: `try_acquire`'s, a first poll's, a parked
//! waiter's grant when it is polled) takes its units from the admissions left
//! (down to none; nothing while unbound), so the watch's count of the units
//! admitted since the last reading (given less left) counts admissions only:
//! a turned-away arrival (a `NoWait` shed, a close, a shed for memory) uses
//! none, nor does a wait until its grant is polled. A shed for memory is one
//! at arrival (zero wait, its class's estimate, no wait seen by the overload
//! rule). A closed gate sheds nobody for memory (its arrivals are refused
//! `Closed`), and `try_acquire` refuses a request above `max_units`, then one
//! above the capacity in force (`ExceedsCapacity`), before it looks at memory,
//! as an acquire's first poll does. [`GateStats`] counts where these rules
//! decide against what the watch's bounds alone would say
//! (`memory_forgets_kept`, `memory_closed_refusals`, `memory_oversize_try`,
//! `memory_admissions_untaken`) and the parked admissions that take from the
//! admissions (`memory_parked_admissions`).
//!
//! Beyond the predictions it checks, at every step, that no admission took the
//! units in permits past the capacity in force (with the debt of a shrink, which
//! revokes nothing), and at the end that every unit is back: nothing in use,
//! and the gate's own drain finds every unit at once.

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use admit::{
    AdmitEvent, CapacityEvent, ConfigError, Gate, GateAcquire, GateError, GatePermit, MemoryEvent,
    MemoryUse, MemoryWatch, Observer, OverloadEvent, Priority, ReleaseEvent, ShedEvent, ShedReason,
    Source, StartEvent, Timer,
};
use arbitrary::{Arbitrary, Unstructured};

use crate::counting_waker::CountingWaker;
use crate::overload::{micros_of, ModelCodel, ModelPace, CAP_TARGETS, PRESS_MARK};
use crate::pick;
use crate::signal::{Fired, Trigger};
use crate::spawning_timer::SpawningTimer;

admit::sources! {
    /// The call sites of the replayed gate.
    pub enum Site {
        /// `"a"`.
        A => "a",
        /// `"b"`.
        B => "b",
        /// `"c"`.
        C => "c",
    }
}

/// At most this many gate acquires are alive at once.
pub const MAX_LIVE_WAITERS: usize = 48;

/// One step of a replayed gate sequence. Indices are taken modulo the number of
/// live waiters (or held permits); a step with nothing to act on does nothing.
///
/// Decoded as [`Op`](crate::semaphore::Op) is: a selector byte picks the variant by
/// `GateOp::SELECTOR`'s weights, then the fields are read with `Arbitrary`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GateOp {
    /// Creates `gate.acquire(units, site)` with an `until` signal, with
    /// `.priority(class)` if the site byte sets one ([`class_of`]), and with
    /// `.ceiling(ms)` if given (`ceiling % 80` ms: zero, below and above the
    /// budget); not polled yet. Raw units `0..224` map onto `1..=capacity` (those
    /// above `max_units` are refused), `224..=255` to more than the capacity.
    Acquire {
        /// Raw units.
        units: u8,
        /// Raw site, `% 3`, and its class, [`class_of`] (see [`raw_site`]).
        site: u8,
        /// Raw ceiling in ms, `% 80`.
        ceiling: Option<u8>,
    },
    /// `gate.try_acquire(units, site)`, or, if the site byte sets a class,
    /// `gate.acquire(units, site).priority(class).try_now()`.
    TryAcquire {
        /// Raw units, as for `Acquire`.
        units: u8,
        /// Raw site, `% 3`, and its class, as for `Acquire`.
        site: u8,
    },
    /// Polls a live waiter (with a fresh waker).
    Poll(u8),
    /// Drops a live waiter, in whatever phase it is.
    Drop(u8),
    /// Fires a live waiter's cancellation signal.
    Fire(u8),
    /// Advances the manual clock by `ms % 40` milliseconds.
    Advance(u8),
    /// Releases a held permit, by `release()` if `explicit`, else by dropping it.
    Release {
        /// Which permit.
        permit: u8,
        /// Call `release()` rather than drop.
        explicit: bool,
    },
    /// Polls every waiter whose waker was called since its last poll.
    RunWoken,
    /// `gate.close()`.
    Close,
    /// `gate.resize(raw % 12)`: 0, below `max_units`, or on a closed gate is
    /// refused; the rest grow or shrink.
    Resize(u8),
    /// `split(n)` on a held permit of `u` units, `n = 1 + raw % (u + 1)` (`None`
    /// when `n >= u`).
    Split {
        /// Which permit.
        permit: u8,
        /// Raw units.
        units: u8,
    },
    /// `a.merge(b)` for two held permits (of any sources).
    Merge {
        /// The permit that takes the units.
        a: u8,
        /// The permit merged into it (another one).
        b: u8,
    },
    /// `forget()` on a held permit.
    Forget(u8),
    /// Sets what the memory watch's source reports from its next reading on:
    /// [`memory_reading`]`(raw)`, a working set against a limit or `None`. A
    /// case with one has a memory watch (see "Memory" in the module docs).
    Memory(u8),
}

/// The class a raw site byte asks for: `(raw / 3) % 5` picks the source's own
/// (0: no `.priority()` call; every [`Site`] is [`Priority::Critical`]), or sets
/// [`Priority::Sheddable`], [`Priority::SheddablePlus`], [`Priority::Critical`] or
/// [`Priority::CriticalPlus`] (1 to 4).
///
/// In the site byte, whose `% 3` alone picked the site before classes were
/// modelled, so that the byte layout of every input stays: a case written then
/// keeps its operations and fields, and one with site bytes below 3 (every
/// hand-written case) its meaning, all `Critical`.
#[must_use]
pub fn class_of(raw_site: u8) -> Option<Priority> {
    match (raw_site / 3) % 5 {
        0 => None,
        1 => Some(Priority::Sheddable),
        2 => Some(Priority::SheddablePlus),
        3 => Some(Priority::Critical),
        _ => Some(Priority::CriticalPlus),
    }
}

/// The raw site byte of site `site` (`% 3`) with class `class` ([`class_of`]):
/// for writing cases by hand.
#[must_use]
pub fn raw_site(site: u8, class: Option<Priority>) -> u8 {
    let code = match class {
        None => 0,
        Some(Priority::Sheddable) => 1,
        Some(Priority::SheddablePlus) => 2,
        Some(Priority::Critical) => 3,
        Some(Priority::CriticalPlus) => 4,
    };
    site % 3 + 3 * code
}

/// The bytes a unit stands for in a replayed gate's memory watch: 1 MiB.
pub const MEMORY_UNIT: u64 = 1 << 20;

/// The time between two readings of a replayed gate's memory watch: a clock
/// advance (up to 39 ms) often passes one, sometimes not.
pub const MEMORY_INTERVAL: Duration = Duration::from_millis(10);

/// The limits, in units, that the top two bits of a [`GateOp::Memory`] byte
/// pick. Against gates of 1 to 11 units: the marks (75 % to 90 %) of 8 units
/// (6 to 7.2) bind a gate above 7 units even with nothing else in memory,
/// those of 24 units (18 to 21.6) only past a working set of 10 units.
const MEMORY_LIMITS: [u64; 4] = [16, 12, 8, 24];

/// The working-set levels (the low six bits of a [`GateOp::Memory`] byte) at
/// or above which the source fails.
const MEMORY_FAILS: u8 = 60;

/// The watch's default marks (`MemoryWatch::new`'s documentation: of the limit,
/// `Sheddable` 75 %, `SheddablePlus` 80 %, `Critical` 85 %, `CriticalPlus`
/// 90 %), in millionths, by rank.
const MEMORY_MARKS: [u64; RANKS] = [750_000, 800_000, 850_000, 900_000];

/// The working set, with what is owed and the unit, that a probe may take the
/// limit to: 95 %, in millionths.
const PROBE_CEILING: u64 = 950_000;

const MILLION: u64 = 1_000_000;

/// No allowance: no reading (or a `None` one), or no watch.
const UNBOUND: usize = usize::MAX;

/// The rank of `CriticalPlus`, whose allowance bounds the capacity in force.
const TOP: usize = RANKS - 1;

/// What a [`GateOp::Memory`] byte sets the watch's source to: `None` (the
/// source fails) if its low six bits are 60 or more, else a working set of
/// that many quarters of a unit (0 to 14.75 MiB) against a limit of 16, 12, 8
/// or 24 units (the top two bits). With gates of 1 to 11 units, the levels and
/// admissions range from none to more than any capacity.
#[must_use]
pub fn memory_reading(raw: u8) -> Option<MemoryUse> {
    let level = raw & 0x3f;
    (level < MEMORY_FAILS).then(|| {
        MemoryUse::new(
            MEMORY_LIMITS[usize::from(raw >> 6)] * MEMORY_UNIT,
            u64::from(level) * (MEMORY_UNIT / 4),
        )
    })
}

/// The memory rule's state between readings, as the model keeps it by the
/// rule's documentation (`gate/memory.rs`).
#[derive(Debug, Default)]
struct ModelRoom {
    /// The lowest working set read with nothing in use (at the first reading,
    /// the working set less the units in use).
    base: Option<u64>,
    /// The most units in use at a reading since the working set last showed
    /// nothing beyond the base and the units in use.
    high_water: usize,
    /// The working set at the last reading (of one).
    last: Option<u64>,
    /// What the units admitted so far may still grow by: their units less the
    /// growth of the working set seen since, at most the units in use.
    owed: u64,
}

/// What a reading allows until the next one.
#[derive(Debug, Clone, Copy)]
struct ModelAllowance {
    /// The units each class may hold, by rank: its level.
    levels: [usize; RANKS],
    /// The units that may be admitted before the next reading, whatever the
    /// class; [`UNBOUND`] if the configured capacity could be.
    admissions: usize,
    /// Its one admission is the probe's (no fresh unit fits under the mark).
    probe: bool,
}

/// `⌊(fraction × limit − used) / unit⌋` units, none below zero, the fraction
/// in millionths: exact, in millionths of a byte.
fn units_under(limit: u64, millionths: u64, used: u64) -> usize {
    let fill = u128::from(limit) * u128::from(millionths);
    let room = fill.saturating_sub(u128::from(used) * u128::from(MILLION));
    usize::try_from(room / (u128::from(MEMORY_UNIT) * u128::from(MILLION))).unwrap_or(UNBOUND)
}

impl ModelRoom {
    /// What a reading of `used` allows, with `in_use` units in permits,
    /// `admitted` of them since the last reading, and the gate's `configured`
    /// capacity: each class's level `⌊(mark × limit − other) / unit⌋`, where
    /// `other = max(working set − high water × unit, base)`; and the
    /// admissions, as many as could each take a fresh unit under the highest
    /// mark (`⌊(top mark × limit − working set − owed) / unit⌋`), or one probe
    /// if the working set grew by less than half a unit and a fresh unit would
    /// keep it, with what is owed, within 95 % of the limit.
    fn read(
        &mut self,
        used: MemoryUse,
        in_use: usize,
        admitted: usize,
        configured: usize,
    ) -> ModelAllowance {
        let ws = used.working_set;
        let held = in_use as u64 * MEMORY_UNIT;
        let base = match self.base {
            Some(base) if in_use != 0 || ws >= base => base,
            // The first reading, or a lower one with nothing in use.
            _ => *self.base.insert(ws.saturating_sub(held)),
        };
        self.high_water = if ws <= base + held {
            in_use
        } else {
            self.high_water.max(in_use)
        };
        let other = ws
            .saturating_sub(self.high_water as u64 * MEMORY_UNIT)
            .max(base);
        let levels = MEMORY_MARKS.map(|mark| units_under(used.limit, mark, other));
        let grown = self
            .last
            .replace(ws)
            .map_or(0, |last| ws.saturating_sub(last));
        self.owed = (self.owed + admitted as u64 * MEMORY_UNIT)
            .saturating_sub(grown)
            .min(held);
        let top = MEMORY_MARKS.iter().copied().max().unwrap_or(MILLION);
        let fresh = units_under(used.limit, top, ws + self.owed);
        let probe = grown < MEMORY_UNIT / 2
            && u128::from(ws + self.owed + MEMORY_UNIT) * u128::from(MILLION)
                <= u128::from(used.limit) * u128::from(PROBE_CEILING);
        let admissions = fresh.max(usize::from(probe));
        ModelAllowance {
            levels,
            probe: fresh == 0 && probe,
            admissions: if admissions >= configured {
                UNBOUND
            } else {
                admissions
            },
        }
    }
}

/// The variants of [`GateOp`] in selector order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum GateKind {
    Acquire,
    TryAcquire,
    Poll,
    Drop,
    Fire,
    Advance,
    Release,
    RunWoken,
    Close,
    Resize,
    Split,
    Merge,
    Forget,
    Memory,
}

impl GateOp {
    /// Each kind with the number of the 256 selector byte values that pick it.
    ///
    /// `Memory` took the last three values of `Split`'s (241 to 243), which no
    /// input of the corpus used: every other value picks what it picked before.
    const SELECTOR: [(GateKind, u16); 14] = [
        (GateKind::Acquire, 56),
        (GateKind::TryAcquire, 18),
        (GateKind::Poll, 46),
        (GateKind::Drop, 14),
        (GateKind::Fire, 14),
        (GateKind::Advance, 26),
        (GateKind::Release, 26),
        (GateKind::RunWoken, 18),
        (GateKind::Close, 4),
        (GateKind::Resize, 14),
        (GateKind::Split, 5),
        (GateKind::Memory, 3),
        (GateKind::Merge, 6),
        (GateKind::Forget, 6),
    ];

    fn kind(&self) -> GateKind {
        match self {
            GateOp::Acquire { .. } => GateKind::Acquire,
            GateOp::TryAcquire { .. } => GateKind::TryAcquire,
            GateOp::Poll(_) => GateKind::Poll,
            GateOp::Drop(_) => GateKind::Drop,
            GateOp::Fire(_) => GateKind::Fire,
            GateOp::Advance(_) => GateKind::Advance,
            GateOp::Release { .. } => GateKind::Release,
            GateOp::RunWoken => GateKind::RunWoken,
            GateOp::Close => GateKind::Close,
            GateOp::Resize(_) => GateKind::Resize,
            GateOp::Split { .. } => GateKind::Split,
            GateOp::Merge { .. } => GateKind::Merge,
            GateOp::Forget(_) => GateKind::Forget,
            GateOp::Memory(_) => GateKind::Memory,
        }
    }

    fn encode(&self, out: &mut Vec<u8>) {
        out.push(crate::selector_of(&GateOp::SELECTOR, self.kind()));
        match *self {
            GateOp::Acquire {
                units,
                site,
                ceiling,
            } => {
                out.extend([units, site]);
                match ceiling {
                    // `Option`'s `Arbitrary`: a `bool` (the low bit), then the value.
                    Some(c) => out.extend([1, c]),
                    None => out.push(0),
                }
            }
            GateOp::TryAcquire { units, site } => out.extend([units, site]),
            GateOp::Release { permit, explicit } => out.extend([permit, u8::from(explicit)]),
            GateOp::Poll(i)
            | GateOp::Drop(i)
            | GateOp::Fire(i)
            | GateOp::Advance(i)
            | GateOp::Resize(i)
            | GateOp::Forget(i)
            | GateOp::Memory(i) => out.push(i),
            GateOp::Split { permit, units } => out.extend([permit, units]),
            GateOp::Merge { a, b } => out.extend([a, b]),
            GateOp::RunWoken | GateOp::Close => {}
        }
    }
}

impl<'a> Arbitrary<'a> for GateOp {
    fn arbitrary(u: &mut Unstructured<'a>) -> arbitrary::Result<Self> {
        Ok(match crate::kind_of(&GateOp::SELECTOR, u.arbitrary()?) {
            GateKind::Acquire => GateOp::Acquire {
                units: u.arbitrary()?,
                site: u.arbitrary()?,
                ceiling: u.arbitrary()?,
            },
            GateKind::TryAcquire => GateOp::TryAcquire {
                units: u.arbitrary()?,
                site: u.arbitrary()?,
            },
            GateKind::Poll => GateOp::Poll(u.arbitrary()?),
            GateKind::Drop => GateOp::Drop(u.arbitrary()?),
            GateKind::Fire => GateOp::Fire(u.arbitrary()?),
            GateKind::Advance => GateOp::Advance(u.arbitrary()?),
            GateKind::Release => GateOp::Release {
                permit: u.arbitrary()?,
                explicit: u.arbitrary()?,
            },
            GateKind::RunWoken => GateOp::RunWoken,
            GateKind::Close => GateOp::Close,
            GateKind::Resize => GateOp::Resize(u.arbitrary()?),
            GateKind::Split => GateOp::Split {
                permit: u.arbitrary()?,
                units: u.arbitrary()?,
            },
            GateKind::Merge => GateOp::Merge {
                a: u.arbitrary()?,
                b: u.arbitrary()?,
            },
            GateKind::Forget => GateOp::Forget(u.arbitrary()?),
            GateKind::Memory => GateOp::Memory(u.arbitrary()?),
        })
    }
}

/// A decoded gate input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GateCase {
    /// Raw capacity; the gate gets `1 + capacity % 8` units (the low three bits),
    /// a `max_units` of `1 + bits` from bits 3 to 6, capped at those units (see
    /// [`GateCase::max_units`]), and an overload target of a quarter of the
    /// budget if the high bit is set.
    pub capacity: u8,
    /// Raw wait budget; the gate gets `1 + budget % 64` ms (the low six bits), and
    /// a `max_waiters` from the top two (see [`GateCase::max_waiters`]).
    pub budget: u8,
    /// The operations, in order.
    pub ops: Vec<GateOp>,
}

impl GateCase {
    /// The gate's capacity at the start: `1 + capacity % 8`.
    #[must_use]
    pub fn initial_capacity(&self) -> usize {
        1 + usize::from(self.capacity % 8)
    }

    /// The gate's `max_units`: `1 + ((capacity >> 3) & 15)`, capped at the
    /// initial capacity (the builder refuses a capacity below it). From bits 3 to
    /// 6 of the capacity byte, which no other field reads, so a case written when
    /// the gate had a `max_units` of 1 keeps its capacity, budget and target
    /// (those bits at 0 still give 1).
    ///
    /// Capped rather than taken modulo the capacity: over uniform bytes about
    /// half the gates get `max_units == capacity`, which refuses no request
    /// within the capacity (and every shrink below it), and the rest spread over
    /// `1..capacity`, which refuse some requests the capacity would fit (and allow
    /// shrinks down to `max_units`). A modulo spreads them evenly, refuses more,
    /// and builds queues (and so overload) far less often.
    #[must_use]
    pub fn max_units(&self) -> usize {
        (1 + usize::from((self.capacity >> 3) & 0x0f)).min(self.initial_capacity())
    }

    /// Whether the gate has an overload target (the high bit of the capacity
    /// byte).
    #[must_use]
    pub fn has_overload_target(&self) -> bool {
        self.capacity & 0x80 != 0
    }

    /// The gate's `max_waiters`, from the top two bits of the budget byte, which
    /// no other field reads: none for 0 and 1 (so every hand-written case keeps
    /// its meaning), 2 for 2, 5 for 3.
    #[must_use]
    pub fn max_waiters(&self) -> Option<usize> {
        match self.budget >> 6 {
            2 => Some(2),
            3 => Some(5),
            _ => None,
        }
    }

    /// Whether the gate gets a memory watch: the case sets its source at least
    /// once ([`GateOp::Memory`]).
    #[must_use]
    pub fn has_memory_watch(&self) -> bool {
        self.ops.iter().any(|op| matches!(op, GateOp::Memory(_)))
    }

    /// Decodes fuzzer bytes: capacity, budget, then [`GateOp`]s until the bytes run
    /// out. `None` if fewer than two bytes.
    pub fn decode(data: &[u8]) -> Option<GateCase> {
        let [capacity, budget, rest @ ..] = data else {
            return None;
        };
        let mut u = Unstructured::new(rest);
        let mut ops = Vec::new();
        while !u.is_empty() {
            ops.push(GateOp::arbitrary(&mut u).ok()?);
        }
        Some(GateCase {
            capacity: *capacity,
            budget: *budget,
            ops,
        })
    }

    /// The bytes that [`decode`](Self::decode) reads back as this case: for
    /// writing corpus seeds by hand.
    #[must_use]
    pub fn encode(&self) -> Vec<u8> {
        let mut out = vec![self.capacity, self.budget];
        for op in &self.ops {
            op.encode(&mut out);
        }
        out
    }
}

/// What a gate replay did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct GateStats {
    /// Operations applied (including the final drain).
    pub ops: usize,
    /// Acquires admitted on their first poll.
    pub immediate_admits: usize,
    /// Acquires admitted after parking.
    pub parked_admits: usize,
    /// Admitted although the deadline had also passed (the grant wins the tie).
    pub admits_at_deadline: usize,
    /// Admissions (of any kind) of more than one unit.
    pub multi_unit_admits: usize,
    /// Budget or ceiling expiries (sheds) of acquires: parked ones, and zero
    /// ceilings at the first poll; `budget_sheds + ceiling_sheds`.
    pub sheds: usize,
    /// Of `sheds`, those for [`ShedReason::WaitBudget`].
    pub budget_sheds: usize,
    /// Of `budget_sheds`, calls with a ceiling not below the budget (the budget
    /// is what binds: still `WaitBudget`).
    pub budget_sheds_with_ceiling: usize,
    /// Of `sheds`, those for [`ShedReason::Ceiling`].
    pub ceiling_sheds: usize,
    /// Sheds on the first poll (a zero ceiling: [`ShedReason::Ceiling`]).
    pub sheds_at_once: usize,
    /// `try_acquire` refusals (sheds with zero wait, [`ShedReason::NoWait`]).
    pub try_sheds: usize,
    /// `try_acquire` admissions.
    pub try_admits: usize,
    /// `Cancelled` outcomes.
    pub cancels: usize,
    /// `Cancelled` while the semaphore had already granted the units.
    pub cancels_after_grant: usize,
    /// `Closed` outcomes.
    pub closed: usize,
    /// `ExceedsMaxUnits` outcomes (the first poll of an acquire, or a
    /// `try_acquire`).
    pub exceeds_max_units: usize,
    /// Of `exceeds_max_units`, requests the capacity in force would have fit.
    pub exceeds_max_units_within_capacity: usize,
    /// Of `exceeds_max_units`, acquires whose signal had fired before the first
    /// poll (the refusal wins).
    pub exceeds_max_units_fired: usize,
    /// `ExceedsCapacity` outcomes, at once or of a parked acquire.
    pub oversize: usize,
    /// Of `oversize`, at once (a first poll or a `try_acquire`): a request within
    /// `max_units` above a capacity that forgets lowered.
    pub oversize_at_once: usize,
    /// Waiters woken by their deadline.
    pub deadline_wakes: usize,
    /// Waiters dropped while parked or granted.
    pub dropped_parked_or_granted: usize,
    /// Resizes that raised the capacity.
    pub grows: usize,
    /// Resizes that lowered it.
    pub shrinks: usize,
    /// Resizes to 0, refused (`ZeroCapacity`).
    pub resize_refusals: usize,
    /// Resizes to a capacity below `max_units`, refused
    /// (`CapacityBelowMaxUnits`).
    pub resize_below_max_units: usize,
    /// Valid resizes of a closed gate, refused (`ConfigError::Closed`).
    pub resize_closed: usize,
    /// Invalid resizes (0, below `max_units`) of a closed gate: refused for the
    /// capacity, not for the close.
    pub resize_invalid_while_closed: usize,
    /// Units retired after a shrink (free at once, or as they came back).
    pub retired_units: usize,
    /// Parked acquires ended `ExceedsCapacity` by a forget (a shrink stays at
    /// `max_units` or above, which no parked request exceeds).
    pub exceeds_after_forget: usize,
    /// `split` calls that returned a permit.
    pub splits: usize,
    /// `merge` calls, and of those, ones across two sources.
    pub merges: usize,
    /// Merges of permits of two different sources.
    pub merges_across_sources: usize,
    /// `forget` calls.
    pub forgets: usize,
    /// Forgets that left the capacity below `max_units`.
    pub forgets_below_max_units: usize,
    /// Sheds at arrival by the estimate (`Hopeless`).
    pub hopeless: usize,
    /// Sheds of parked acquires at the overload cap (`Overload`).
    pub overload_sheds: usize,
    /// Changes of the overload state.
    pub overload_changes: usize,
    /// Admissions (of any kind) of a class below `Critical`.
    pub admits_below_critical: usize,
    /// Admissions of `CriticalPlus`.
    pub admits_critical_plus: usize,
    /// Parked acquires shed for a higher class (`Outranked`), seen at their
    /// poll.
    pub outranked: usize,
    /// Waiters shed for a higher class whose signal fired before they saw it
    /// (`Cancelled`, counted nowhere).
    pub outranked_cancelled: usize,
    /// Waiters shed for a higher class dropped before they saw it.
    pub outranked_dropped: usize,
    /// Arrivals that had lower classes shed for them while the gate was
    /// pressed.
    pub pressed_sheds: usize,
    /// Looks at the overload cap that shed lower classes instead of the waiter.
    pub cap_sheds: usize,
    /// Waiters shed at the overload cap that had shed lower classes there at
    /// an earlier look.
    pub cap_sheds_then_self: usize,
    /// Admissions of waiters that had lower classes shed for them (not a
    /// sample of the queue's wait).
    pub outranked_others_admits: usize,
    /// Arrivals at a full `max_waiters` queue that shed a lower class.
    pub evictions: usize,
    /// `QueueFull` sheds.
    pub queue_full: usize,
    /// Units posted for a class that the walk could not find (dropped).
    pub shed_units_not_found: usize,
    /// Walks cut short by a full wake batch.
    pub walks_cut_by_batch: usize,
    /// `Memory` ops: the source set.
    pub memory_sets: usize,
    /// Readings of the memory watch (the first, at the build, included).
    pub memory_readings: usize,
    /// Of those, `None` ones (the source failed, or was not set yet).
    pub memory_unbound_readings: usize,
    /// Readings that lowered the capacity in force.
    pub memory_lowered: usize,
    /// Readings that raised it.
    pub memory_raised: usize,
    /// Readings that allowed `CriticalPlus` less than `max_units` (the capacity
    /// in force held at that floor).
    pub memory_floored: usize,
    /// Readings that would have given back units a forget had taken, were the
    /// configured capacity not lowered by the forget (it is: they stay out).
    pub memory_forgets_kept: usize,
    /// Arrivals shed for memory (`ShedReason::Memory`): `try_acquire`s and
    /// first polls.
    pub memory_sheds: usize,
    /// Of `memory_sheds`, `try_acquire`s.
    pub memory_sheds_try: usize,
    /// Of `memory_sheds`, of `CriticalPlus` (its allowance below the floor).
    pub memory_sheds_critical_plus: usize,
    /// Arrivals on a closed gate refused `Closed` whose class's level or the
    /// admissions left would have shed them for memory (the watch's last
    /// reading stays in force after the close).
    pub memory_closed_refusals: usize,
    /// `try_acquire`s refused `ExceedsCapacity` that memory would have shed
    /// (the capacity is checked first).
    pub memory_oversize_try: usize,
    /// Arrivals within bound admissions, not shed for memory, that were not
    /// admitted at once (a `NoWait` shed, a wait): they took none of them.
    pub memory_admissions_untaken: usize,
    /// Parked waiters admitted (their grant polled) while the admissions were
    /// bound: they took their units from them then.
    pub memory_parked_admissions: usize,
    /// Arrivals admitted at once while their class's allowance was below the
    /// capacity in force (within it).
    pub memory_bound_admits: usize,
    /// Readings due after a close: the watch ended (at the latest at the
    /// replay's end, whose drain closes the gate).
    pub memory_watch_ends: usize,
    /// Readings that bound the admissions until the next one.
    pub memory_admissions_bound: usize,
    /// Of those, readings whose one admission was the probe's.
    pub memory_probes: usize,
    /// Of `memory_sheds`, arrivals within their class's level that found the
    /// admissions spent.
    pub memory_admissions_spent: usize,
}

/// Decodes `data` as a [`GateCase`] and replays it; `None` if it does not decode.
pub fn replay_gate_bytes(data: &[u8]) -> Option<GateStats> {
    Some(replay_gate(&GateCase::decode(data)?))
}

/// Replays a gate case against the model (see the module docs).
///
/// # Panics
///
/// On the first disagreement.
pub fn replay_gate(case: &GateCase) -> GateStats {
    let capacity = case.initial_capacity();
    let max_units = case.max_units();
    let budget = Duration::from_millis(1 + u64::from(case.budget % 64));
    let target = case.has_overload_target().then(|| budget / 4);
    let timer = SpawningTimer::refusing(usize::from(target.is_some()));
    let obs = Arc::new(Recorder::default());
    let source: Arc<Mutex<Option<MemoryUse>>> = Arc::default();
    let mut builder = Gate::builder(capacity).wait_budget(budget);
    if let Some(target) = target {
        builder = builder.overload_target(target);
    }
    if let Some(max) = case.max_waiters() {
        builder = builder.max_waiters(max);
    }
    let watch = case.has_memory_watch();
    if watch {
        let cell = Arc::clone(&source);
        builder = builder.memory_watch(
            MemoryWatch::new(MEMORY_UNIT)
                .interval(MEMORY_INTERVAL)
                .source(move || *cell.lock().unwrap()),
        );
    }
    let gate = builder
        .max_units(max_units)
        .timer(timer.clone())
        .observer(Arc::clone(&obs))
        .build()
        .expect("a valid gate configuration");
    let labels: Vec<&'static str> = Site::ALL.iter().map(|s| s.label()).collect();
    assert_eq!(obs.take(), vec![Event::Start(capacity, labels)], "on_start");
    assert_eq!(gate.max_units(), max_units, "max_units()");
    assert_eq!(gate.wait_budget(), budget, "wait_budget()");
    assert_eq!(
        timer.tasks(),
        usize::from(watch),
        "the memory watch's task, no other"
    );
    let mut h = GateHarness {
        gate: &gate,
        timer: &timer,
        obs: &obs,
        capacity,
        configured: capacity,
        allowed: [UNBOUND; RANKS],
        admissions: UNBOUND,
        given: None,
        last_in_use: 0,
        room: ModelRoom::default(),
        source,
        reading: None,
        next_reading: watch.then_some(Duration::ZERO),
        forgotten: 0,
        max_units,
        max_waiters: case.max_waiters(),
        budget,
        pace: ModelPace::default(),
        codel: target.map(ModelCodel::new),
        now: Duration::ZERO,
        available: capacity,
        debt: 0,
        closed: false,
        queue: VecDeque::new(),
        posted: [0; RANKS],
        doomed: [0; RANKS],
        polling: None,
        old_wakes: 0,
        waiters: Vec::new(),
        permits: Vec::new(),
        retired: Vec::new(),
        expected_events: Vec::new(),
        next_key: 0,
        step: 0,
        last_op: None,
        stats: GateStats::default(),
    };
    // The watch's first reading, at its first poll.
    h.watch_turn();
    h.check();
    for &op in &case.ops {
        h.apply(op);
    }
    h.drain();
    h.stats
}

/// One observer call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// `on_start(capacity, labels)`.
    Start(usize, Vec<&'static str>),
    /// `on_admit(source, units, waited, priority)`.
    Admit(&'static str, usize, Duration, Priority),
    /// `on_release(source, units, held, priority)`.
    Release(&'static str, usize, Duration, Priority),
    /// `on_shed`.
    Shed(Shed),
    /// `on_capacity(capacity)`.
    Capacity(usize),
    /// `on_overload`: the state from now on.
    Overloaded(bool),
    /// `on_memory(reading, allowed_units, capacity)`.
    Memory(Option<MemoryUse>, Option<usize>, usize),
}

/// An `on_shed` event's fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shed {
    /// The call site.
    pub source: &'static str,
    /// The units asked for.
    pub units: usize,
    /// The wait before the shed.
    pub waited: Duration,
    /// Why.
    pub reason: ShedReason,
    /// Its class.
    pub priority: Priority,
    /// The `Retry-After` it was told.
    pub retry_after: Duration,
    /// The gate's estimate for its units and class.
    pub estimated_wait: Option<Duration>,
}

/// Records events and keeps an in-use gauge the way a metrics observer would.
#[derive(Debug, Default)]
struct Recorder {
    events: Mutex<Vec<Event>>,
    gauge: AtomicUsize,
    max_gauge: AtomicUsize,
}

impl Recorder {
    fn take(&self) -> Vec<Event> {
        core::mem::take(&mut *self.events.lock().unwrap())
    }

    fn push(&self, event: Event) {
        self.events.lock().unwrap().push(event);
    }
}

impl Observer for Recorder {
    fn on_start(&self, e: &StartEvent<'_>) {
        self.push(Event::Start(e.capacity, e.sources.to_vec()));
    }

    fn on_admit(&self, e: &AdmitEvent) {
        let now = self.gauge.fetch_add(e.units, Ordering::SeqCst) + e.units;
        self.max_gauge.fetch_max(now, Ordering::SeqCst);
        self.push(Event::Admit(e.source, e.units, e.waited, e.priority));
    }

    fn on_release(&self, e: &ReleaseEvent) {
        self.gauge.fetch_sub(e.units, Ordering::SeqCst);
        self.push(Event::Release(e.source, e.units, e.held, e.priority));
    }

    fn on_shed(&self, e: &ShedEvent) {
        self.push(Event::Shed(Shed {
            source: e.source,
            units: e.units,
            waited: e.waited,
            reason: e.reason,
            priority: e.priority,
            retry_after: e.retry_after,
            estimated_wait: e.estimated_wait,
        }));
    }

    fn on_overload(&self, e: &OverloadEvent) {
        self.push(Event::Overloaded(e.overloaded));
    }

    fn on_capacity(&self, e: &CapacityEvent) {
        self.push(Event::Capacity(e.capacity));
    }

    fn on_memory(&self, e: &MemoryEvent) {
        self.push(Event::Memory(e.reading, e.allowed_units, e.capacity));
    }
}

type Fut<'g> = Pin<Box<GateAcquire<'g, Site, SpawningTimer, Arc<Recorder>, Fired>>>;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Never polled.
    Fresh,
    /// Parked in the semaphore's queue.
    Parked,
    /// Granted by the semaphore, not yet polled to see it.
    Granted,
    /// Closed by the semaphore, not yet polled to see it.
    Closed,
    /// Failed by a forget (`ExceedsCapacity`), not yet polled to see it.
    Exceeds,
    /// Shed by the serving pass for a higher class, not yet polled to see it.
    Doomed,
}

/// Priority classes: the gate's ranks, 0 shed first.
const RANKS: usize = 4;

/// The serving pass's wake batch: a pass that fills it ends, and the next goes
/// on.
const WAKE_BATCH: usize = 32;

fn rank(priority: Priority) -> usize {
    priority as usize
}

/// A poll's result, its permit as its units, for a message.
fn outcome(result: &Poll<Result<GatePermit<Site>, GateError>>) -> Poll<Result<usize, GateError>> {
    match result {
        Poll::Ready(Ok(p)) => Poll::Ready(Ok(p.units())),
        Poll::Ready(Err(e)) => Poll::Ready(Err(*e)),
        Poll::Pending => Poll::Pending,
    }
}

struct GWaiter<'g> {
    key: u64,
    fut: Fut<'g>,
    units: usize,
    site: Site,
    priority: Priority,
    /// It holds a place among the parked (from parking to its end): its units
    /// count in its class's queue.
    has_slot: bool,
    /// Lower classes were shed for it (at arrival or at the cap).
    outranked_others: bool,
    /// The wait before which it sheds no lower class at the cap again (nor
    /// itself): one recheck after it last did.
    outranks_again_at: Duration,
    /// Its last look found it at the cap with lower classes parked: it sheds
    /// them once its poll has seen the semaphore leave it parked.
    outrank_owed: bool,
    max_wait: Duration,
    /// Why it is shed when `max_wait` runs out: `Ceiling` if its ceiling is below
    /// the budget, else `WaitBudget`.
    limit_reason: ShedReason,
    /// It has a ceiling (of any length).
    has_ceiling: bool,
    trigger: Trigger,
    fired: bool,
    phase: Phase,
    /// When it parked.
    start: Duration,
    /// The wait, from parking, at which its sleep fires next.
    look_at: Duration,
    /// The sleep is registered with the timer and not yet woken by it.
    sleep_armed: bool,
    /// The signal holds this waiter's waker and has not fired.
    signal_armed: bool,
    /// A fresh waker per poll, so its count is the wakes since the last poll.
    waker: Arc<CountingWaker>,
    expected_wakes: usize,
}

struct GPermit {
    permit: GatePermit<Site>,
    /// The units the model says it holds.
    units: usize,
    admitted_at: Duration,
    priority: Priority,
}

struct GateHarness<'g> {
    gate: &'g Gate<Site, SpawningTimer, Arc<Recorder>>,
    timer: &'g SpawningTimer,
    obs: &'g Arc<Recorder>,
    /// The capacity in force.
    capacity: usize,
    /// The capacity configured (built, or last resized to, less the units
    /// forgotten since): the capacity in force before memory lowers it.
    configured: usize,
    /// Each class's level by the memory watch's last reading, by rank;
    /// [`UNBOUND`] without one.
    allowed: [usize; RANKS],
    /// The admissions left before the next reading, or [`UNBOUND`].
    admissions: usize,
    /// The admissions the last reading allowed, if it bound them.
    given: Option<usize>,
    /// The units in use at the last reading.
    last_in_use: usize,
    room: ModelRoom,
    /// The cell the watch's source reads.
    source: Arc<Mutex<Option<MemoryUse>>>,
    /// What it holds.
    reading: Option<MemoryUse>,
    /// When the watch reads next; `None` without a watch, or once it ended.
    next_reading: Option<Duration>,
    /// Units forgotten since the capacity in force was last applied (for
    /// [`GateStats::memory_forgets_kept`]).
    forgotten: usize,
    /// The gate's `max_units`: no request above it is served, no resize goes
    /// below it.
    max_units: usize,
    max_waiters: Option<usize>,
    budget: Duration,
    pace: ModelPace,
    /// With an overload target.
    codel: Option<ModelCodel>,
    now: Duration,
    available: usize,
    /// Units owed to a retirement.
    debt: usize,
    closed: bool,
    /// The keys of the waiting requests, in arrival order.
    queue: VecDeque<u64>,
    /// Units posted per class for the serving pass to shed, not yet walked for.
    posted: [usize; RANKS],
    /// Units per class of waiters shed that have not yet seen it.
    doomed: [usize; RANKS],
    /// The waiter being polled, while its look runs: its cell still holds the
    /// waker of its last poll, which a resolution then wakes.
    polling: Option<u64>,
    /// Wakes of that old waker during the look.
    old_wakes: usize,
    waiters: Vec<GWaiter<'g>>,
    permits: Vec<GPermit>,
    retired: Vec<(Arc<CountingWaker>, usize)>,
    expected_events: Vec<Event>,
    next_key: u64,
    step: usize,
    last_op: Option<GateOp>,
    stats: GateStats,
}

impl<'g> GateHarness<'g> {
    fn units(&self, raw: u8) -> usize {
        let raw = usize::from(raw);
        if raw >= 224 {
            self.capacity + 1 + raw % 2
        } else {
            1 + raw % self.capacity.max(1)
        }
    }

    /// Whether the fast path takes `units` (not oversize, not closed).
    fn fits(&self, units: usize) -> bool {
        self.queue.is_empty() && self.debt == 0 && self.available >= units
    }

    fn apply(&mut self, op: GateOp) {
        self.step += 1;
        self.last_op = Some(op);
        self.stats.ops += 1;
        match op {
            GateOp::Acquire {
                units,
                site,
                ceiling,
            } => self.acquire(self.units(units), site, ceiling),
            GateOp::TryAcquire { units, site } => self.try_acquire(self.units(units), site),
            GateOp::Poll(i) => {
                if let Some(i) = pick(i, self.waiters.len()) {
                    self.poll(i);
                }
            }
            GateOp::Drop(i) => {
                if let Some(i) = pick(i, self.waiters.len()) {
                    self.drop_waiter(i);
                }
            }
            GateOp::Fire(i) => {
                if let Some(i) = pick(i, self.waiters.len()) {
                    self.fire(i);
                }
            }
            GateOp::Advance(ms) => self.advance(Duration::from_millis(u64::from(ms % 40))),
            GateOp::Release { permit, explicit } => {
                if let Some(i) = pick(permit, self.permits.len()) {
                    self.release(i, explicit);
                }
            }
            GateOp::RunWoken => self.run_woken(),
            GateOp::Close => self.close(),
            GateOp::Resize(raw) => self.resize(usize::from(raw % 12)),
            GateOp::Split { permit, units } => {
                if let Some(i) = pick(permit, self.permits.len()) {
                    let n = 1 + usize::from(units) % (self.permits[i].units + 1);
                    self.split(i, n);
                }
            }
            GateOp::Merge { a, b } => {
                let len = self.permits.len();
                if let (Some(a), Some(b)) = (pick(a, len), pick(b, len.saturating_sub(1))) {
                    // `b` among the others: skip over `a`.
                    self.merge(a, if b >= a { b + 1 } else { b });
                }
            }
            GateOp::Forget(i) => {
                if let Some(i) = pick(i, self.permits.len()) {
                    self.forget(i);
                }
            }
            GateOp::Memory(raw) => {
                let reading = memory_reading(raw);
                *self.source.lock().unwrap() = reading;
                self.reading = reading;
                self.stats.memory_sets += 1;
            }
        }
        self.check();
    }

    fn acquire(&mut self, units: usize, raw_site: u8, ceiling: Option<u8>) {
        if self.waiters.len() >= MAX_LIVE_WAITERS {
            return;
        }
        let site = Site::ALL[usize::from(raw_site) % Site::ALL.len()];
        let class = class_of(raw_site);
        let trigger = Trigger::new();
        let mut fut = self.gate.acquire(units, site);
        if let Some(class) = class {
            fut = fut.priority(class);
        }
        let priority = class.unwrap_or(site.priority());
        self.expect(fut.priority_class() == priority, || {
            format!("priority_class() is {:?}", fut.priority_class())
        });
        let (mut max_wait, mut limit_reason) = (self.budget, ShedReason::WaitBudget);
        if let Some(c) = ceiling {
            let c = Duration::from_millis(u64::from(c % 80));
            fut = fut.ceiling(c);
            // Only a ceiling below the budget is what binds (and names the shed).
            if c < self.budget {
                (max_wait, limit_reason) = (c, ShedReason::Ceiling);
            }
        }
        let fut = Box::pin(fut.until(trigger.fired()));
        self.expect(fut.max_wait() == max_wait, || "max_wait()".into());
        self.waiters.push(GWaiter {
            key: self.next_key,
            fut,
            units,
            site,
            priority,
            has_slot: false,
            outranked_others: false,
            outranks_again_at: Duration::ZERO,
            outrank_owed: false,
            max_wait,
            limit_reason,
            has_ceiling: ceiling.is_some(),
            trigger,
            fired: false,
            phase: Phase::Fresh,
            start: Duration::ZERO,
            look_at: Duration::ZERO,
            sleep_armed: false,
            signal_armed: false,
            waker: Arc::new(CountingWaker::default()),
            expected_wakes: 0,
        });
        self.next_key += 1;
    }

    fn try_acquire(&mut self, units: usize, raw_site: u8) {
        let site = Site::ALL[usize::from(raw_site) % Site::ALL.len()];
        let class = class_of(raw_site);
        let got = match class {
            None => self.gate.try_acquire(units, site),
            Some(class) => self.gate.acquire(units, site).priority(class).try_now(),
        };
        let priority = class.unwrap_or(site.priority());
        let too_big = units > self.max_units;
        let oversize = !too_big && units > self.capacity;
        let refused = too_big || oversize;
        // `max_units`, then the capacity, then memory (see "Memory").
        let memory = !refused && self.refused_for_memory(units, priority);
        if oversize && self.memory_bars(units, priority) {
            self.stats.memory_oversize_try += 1;
        }
        match got {
            Err(GateError::ExceedsMaxUnits {
                requested,
                max_units,
            }) if too_big => {
                self.expect(requested == units && max_units == self.max_units, || {
                    format!("ExceedsMaxUnits {{ requested: {requested}, max_units: {max_units} }}")
                });
                self.exceeds_max_units(units, false);
            }
            Err(GateError::ExceedsCapacity(e)) if oversize => {
                self.expect(e.requested == units && e.capacity == self.capacity, || {
                    format!("{e:?}")
                });
                self.stats.oversize += 1;
                self.stats.oversize_at_once += 1;
            }
            Err(GateError::Busy {
                retry_after,
                reason,
            }) if memory => {
                self.check_shed_reason(reason, ShedReason::Memory);
                self.shed_event(
                    site,
                    units,
                    priority,
                    Duration::ZERO,
                    ShedReason::Memory,
                    retry_after,
                );
                self.memory_shed(priority);
                self.stats.memory_sheds_try += 1;
            }
            Err(GateError::Closed) if self.closed && !refused && !memory => {
                self.closed_arrival(units, priority);
            }
            Err(GateError::Busy {
                retry_after,
                reason,
            }) if !refused && !memory && !self.closed && !self.fits(units) => {
                self.untaken(units);
                self.check_shed_reason(reason, ShedReason::NoWait);
                self.shed_event(
                    site,
                    units,
                    priority,
                    Duration::ZERO,
                    ShedReason::NoWait,
                    retry_after,
                );
                self.stats.try_sheds += 1;
            }
            Ok(permit) if !refused && !memory && !self.closed && self.fits(units) => {
                self.available -= units;
                self.expected_events.push(Event::Admit(
                    site.label(),
                    units,
                    Duration::ZERO,
                    priority,
                ));
                self.saw_wait(Duration::ZERO, true);
                self.stats.try_admits += 1;
                self.take_permit(permit, units, site, priority);
                self.bound_admit(priority);
            }
            other => self.fail(&format!(
                "try_acquire({units}, {priority:?}) returned {:?}; model: available {}, \
                 queued {}, closed {}, max_units {}, in use {}, memory: {}, memory shed {memory}",
                other.map(|p| p.units()),
                self.available,
                self.queue.len(),
                self.closed,
                self.max_units,
                self.held(),
                self.memory_now(),
            )),
        }
    }

    /// An `ExceedsMaxUnits` refusal of `units`, checked by the caller.
    fn exceeds_max_units(&mut self, units: usize, fired: bool) {
        self.stats.exceeds_max_units += 1;
        if units <= self.capacity {
            self.stats.exceeds_max_units_within_capacity += 1;
        }
        if fired {
            self.stats.exceeds_max_units_fired += 1;
        }
    }

    fn check_shed_reason(&self, got: ShedReason, model: ShedReason) {
        self.expect(got == model, || {
            format!("Busy carried {got:?}, the model's reason is {model:?}")
        });
    }

    /// A shed of a caller that has left the queue (and given back its place):
    /// checks the `Busy`'s `retry_after` and expects the `on_shed` it tells
    /// (with its class's estimate); the rule sees the shed.
    fn shed_event(
        &mut self,
        site: Site,
        units: usize,
        priority: Priority,
        waited: Duration,
        reason: ShedReason,
        retry_after: Duration,
    ) {
        self.check_retry_after(retry_after, units, priority);
        self.expected_events.push(Event::Shed(Shed {
            source: site.label(),
            units,
            waited,
            reason,
            priority,
            retry_after,
            estimated_wait: self.estimate_of(units, priority),
        }));
        self.saw_shed();
    }

    /// Counts a budget, ceiling or overload shed of an acquire (a `Hopeless`
    /// one is counted where it is predicted).
    fn count_shed(&mut self, reason: ShedReason, has_ceiling: bool) {
        match reason {
            ShedReason::Overload => self.stats.overload_sheds += 1,
            ShedReason::Ceiling => {
                self.stats.sheds += 1;
                self.stats.ceiling_sheds += 1;
            }
            ShedReason::WaitBudget => {
                self.stats.sheds += 1;
                self.stats.budget_sheds += 1;
                if has_ceiling {
                    self.stats.budget_sheds_with_ceiling += 1;
                }
            }
            other => self.fail(&format!("the model never predicts a {other:?} shed here")),
        }
    }

    fn take_permit(
        &mut self,
        permit: GatePermit<Site>,
        units: usize,
        site: Site,
        priority: Priority,
    ) {
        self.expect(
            permit.units() == units && permit.source() == site && permit.priority() == priority,
            || {
                format!(
                    "{permit:?} of {:?} for {units} units from {site:?}, {priority:?}",
                    permit.priority()
                )
            },
        );
        self.expect(permit.held_for() == Duration::ZERO, || {
            "held_for() at admission".into()
        });
        if units > 1 {
            self.stats.multi_unit_admits += 1;
        }
        if priority < Priority::Critical {
            self.stats.admits_below_critical += 1;
        } else if priority == Priority::CriticalPlus {
            self.stats.admits_critical_plus += 1;
        }
        // The gate's `admit`: an admission takes its units from the admissions
        // left before the next reading, down to none (nothing while unbound).
        if self.admissions != UNBOUND {
            self.admissions = self.admissions.saturating_sub(units);
        }
        self.permits.push(GPermit {
            permit,
            units,
            admitted_at: self.now,
            priority,
        });
    }

    /// The `Retry-After` of a shed of `units` of `priority` now: its class's
    /// estimate within the bounds.
    fn retry_after_of(&self, units: usize, priority: Priority) -> Duration {
        let (min, max) = self.gate.retry_after_bounds();
        self.estimate_of(units, priority)
            .map_or(min, |e| e.clamp(min, max))
    }

    fn check_retry_after(&self, retry_after: Duration, units: usize, priority: Priority) {
        let (min, max) = self.gate.retry_after_bounds();
        self.expect(
            retry_after > Duration::ZERO && (min..=max).contains(&retry_after),
            || format!("retry_after {retry_after:?} outside {min:?}..={max:?}"),
        );
        if priority == Priority::Sheddable {
            let now = self.gate.retry_after(units);
            self.expect(retry_after == now, || {
                format!("Busy carried {retry_after:?}, the gate now says {now:?}")
            });
        }
        let model = self.retry_after_of(units, priority);
        self.expect(retry_after == model, || {
            format!(
                "Busy carried {retry_after:?}, the model's estimate for {priority:?} says \
                 {model:?}"
            )
        });
    }

    /// Units of the acquires of class `rank` that hold a place among the parked
    /// (granted ones count until they are polled).
    fn queued_of(&self, rank: usize) -> usize {
        self.waiters
            .iter()
            .filter(|w| w.has_slot && self::rank(w.priority) == rank)
            .map(|w| w.units)
            .sum()
    }

    /// Units of every class holding a place among the parked.
    fn queued_units(&self) -> usize {
        self.waiters
            .iter()
            .filter(|w| w.has_slot)
            .map(|w| w.units)
            .sum()
    }

    /// Units parked of class `rank`, less those on their way out (posted, or
    /// shed and not yet seen).
    fn parked_of(&self, rank: usize) -> usize {
        self.queued_of(rank)
            .saturating_sub(self.posted[rank] + self.doomed[rank])
    }

    /// The units a request of `units` and `priority` arriving now waits for
    /// beyond the free ones: its class's queue and those above, and its own.
    fn deficit(&self, units: usize, priority: Priority) -> usize {
        let ahead: usize = (rank(priority)..RANKS).map(|r| self.parked_of(r)).sum();
        (ahead + units).saturating_sub(self.available)
    }

    /// The gate's estimate for a newcomer of `units` and `priority`.
    fn estimate_of(&self, units: usize, priority: Priority) -> Option<Duration> {
        let mean = f64::from(self.pace.mean?);
        Some(micros_of(
            mean * self.deficit(units, priority) as f64 / self.capacity.max(1) as f64,
        ))
    }

    /// The gate's `estimated_wait(units)`: the lowest class's.
    fn estimate(&self, units: usize) -> Option<Duration> {
        self.estimate_of(units, Priority::Sheddable)
    }

    /// The pace's `units_within`: the units a full gate returns within `wait`
    /// (an `f32` mean's rounding taken off), `None` before the first release.
    fn units_within(&self, wait: Duration) -> Option<usize> {
        let mean = f64::from(self.pace.mean?);
        let units = wait.as_secs_f64() * self.capacity as f64 / mean;
        Some((units * (1.0 + f64::from(f32::EPSILON))) as usize)
    }

    /// The cap on a wait of `units` while overloaded: `CAP_TARGETS` targets, less
    /// the time the units it asks for fewer than `max_units` take to come back
    /// to a full gate (nothing before the first release), never below the
    /// target.
    fn cap(&self, c: &ModelCodel, units: usize) -> Duration {
        let deduction = self.pace.mean.map_or(Duration::ZERO, |mean| {
            micros_of(
                f64::from(mean) * self.max_units.saturating_sub(units) as f64
                    / self.capacity.max(1) as f64,
            )
        });
        (c.target * CAP_TARGETS)
            .saturating_sub(deduction)
            .max(c.target)
    }

    fn longest_now(&self, units: usize, max_wait: Duration) -> Duration {
        match &self.codel {
            Some(c) if c.overloaded => max_wait.min(self.cap(c, units)),
            _ => max_wait,
        }
    }

    /// Why a parked wait of at most `max_wait` (named `limit_reason`) that has
    /// waited `waited` must end now by its limits, if it must.
    fn expired(
        &self,
        units: usize,
        max_wait: Duration,
        limit_reason: ShedReason,
        waited: Duration,
    ) -> Option<ShedReason> {
        if waited >= max_wait {
            return Some(limit_reason);
        }
        match &self.codel {
            Some(c) if c.overloaded && waited >= self.cap(c, units) => Some(ShedReason::Overload),
            _ => None,
        }
    }

    /// The gate's `Wait::look` (`gate/protocol.rs`) for the waiter `key` that
    /// has waited `waited`: at the overload cap it sheds its own units' worth of
    /// lower classes and waits on, if any is parked, once per look (until a
    /// recheck later it sheds nobody, itself included).
    fn expired_or_shed_below(&mut self, key: u64, waited: Duration) -> Option<ShedReason> {
        let w = self.waiter(key);
        let (units, max_wait, limit_reason, priority, again_at) = (
            w.units,
            w.max_wait,
            w.limit_reason,
            w.priority,
            w.outranks_again_at,
        );
        let reason = self.expired(units, max_wait, limit_reason, waited)?;
        if reason == ShedReason::Overload {
            if waited < again_at {
                return None;
            }
            if self.anyone_below(priority) {
                let recheck = self.recheck(max_wait);
                let w = self.waiter_mut(key);
                w.outranks_again_at = waited + recheck;
                // Shed once its poll has seen the semaphore leave it parked
                // (`poll_parked`): a waiter granted meanwhile sheds nobody.
                w.outrank_owed = true;
                return None;
            }
        }
        Some(reason)
    }

    /// How often a wait past the cap looks again: the target, or a sixteenth
    /// of its limit if longer.
    fn recheck(&self, max_wait: Duration) -> Duration {
        self.codel
            .as_ref()
            .map_or(max_wait, |c| c.target.max(max_wait / 16))
    }

    /// The next look of a waiter that has waited `waited` and not expired: its
    /// limit, the cap, or past the cap one recheck (the target, at least a
    /// sixteenth of the limit) later.
    fn next_look(&self, units: usize, max_wait: Duration, waited: Duration) -> Duration {
        let Some(c) = &self.codel else {
            return max_wait;
        };
        let cap = self.cap(c, units);
        if cap >= max_wait {
            max_wait
        } else if waited < cap {
            cap
        } else {
            max_wait.min(waited + self.recheck(max_wait))
        }
    }

    /// A shed: the interval is not calm.
    fn saw_shed(&mut self) {
        if let Some(c) = &mut self.codel {
            c.shed = true;
        }
    }

    /// A release with nobody parked: the overload rule sees an empty queue.
    fn released_with_nobody_parked(&mut self) {
        if self.queued_units() == 0 {
            self.saw_wait(Duration::ZERO, true);
        }
    }

    /// A wait the overload rule sees (an admission's, or a parked shed's);
    /// `empty` if it showed the queue empty.
    fn saw_wait(&mut self, waited: Duration, empty: bool) {
        let mean = self.pace.mean_hold();
        let now = self.now;
        if let Some(c) = &mut self.codel {
            if let Some(overloaded) = c.observe(waited, empty, now, mean) {
                self.expected_events.push(Event::Overloaded(overloaded));
                self.stats.overload_changes += 1;
            }
        }
    }

    /// The gate's `Inner::shed_below`: asks the serving pass to shed up to
    /// `units` of waiting requests of classes below `priority`, the lowest
    /// first, of what is parked there and not on its way out; one post (and
    /// pass) per class. Returns whether it asked for any.
    /// Whether any request of a class below `priority` is parked and not on
    /// its way out.
    fn anyone_below(&self, priority: Priority) -> bool {
        (0..rank(priority)).any(|r| self.parked_of(r) != 0)
    }

    fn shed_below(&mut self, priority: Priority, units: usize) -> bool {
        let mut left = units;
        for r in 0..rank(priority) {
            if left == 0 {
                break;
            }
            let take = left.min(self.parked_of(r));
            if take != 0 {
                self.posted[r] += take;
                self.serve();
                left -= take;
            }
        }
        left != units
    }

    fn poll(&mut self, i: usize) {
        // A fresh waker for every poll. The old one is retired with its count;
        // a parked waiter's cell still holds it until the semaphore is polled
        // (after the look at the deadline), so it is retired after the look.
        let w = &mut self.waiters[i];
        let old = core::mem::replace(&mut w.waker, Arc::new(CountingWaker::default()));
        let (count, expected) = (old.count(), w.expected_wakes);
        w.expected_wakes = 0;
        self.expect(count == expected, || {
            format!("waker woken {count} times before the poll, expected {expected}")
        });
        let w = &mut self.waiters[i];
        let waker = Waker::from(Arc::clone(&w.waker));
        let result = w.fut.as_mut().poll(&mut Context::from_waker(&waker));
        drop(waker);
        if w.phase == Phase::Fresh {
            self.retired.push((old, count));
            self.poll_fresh(i, result);
        } else {
            self.poll_parked(i, result, old, count);
        }
    }

    /// The first poll: the refusals at once, the signal, the close, a grant at
    /// once, else it parks (the gate's `park`: a place among the parked, a
    /// zero ceiling, the estimate, the lower classes shed while pressed).
    fn poll_fresh(&mut self, i: usize, result: Poll<Result<GatePermit<Site>, GateError>>) {
        let w = &self.waiters[i];
        let (key, units, site, priority, fired, max_wait, has_ceiling) = (
            w.key,
            w.units,
            w.site,
            w.priority,
            w.fired,
            w.max_wait,
            w.has_ceiling,
        );
        let label = site.label();
        let too_big = units > self.max_units;
        let oversize = units > self.capacity;
        if too_big {
            match result {
                Poll::Ready(Err(GateError::ExceedsMaxUnits {
                    requested,
                    max_units,
                })) => {
                    self.expect(requested == units && max_units == self.max_units, || {
                        format!(
                            "ExceedsMaxUnits {{ requested: {requested}, max_units: {max_units} }}"
                        )
                    });
                    self.exceeds_max_units(units, fired);
                }
                other => self.first_poll_failed(i, &other, "ExceedsMaxUnits"),
            }
            return self.finish(i);
        }
        if oversize {
            match result {
                Poll::Ready(Err(GateError::ExceedsCapacity(e))) => {
                    self.expect(e.requested == units && e.capacity == self.capacity, || {
                        format!("{e:?}")
                    });
                    self.stats.oversize += 1;
                    self.stats.oversize_at_once += 1;
                }
                other => self.first_poll_failed(i, &other, "ExceedsCapacity"),
            }
            return self.finish(i);
        }
        if fired {
            if !matches!(result, Poll::Ready(Err(GateError::Cancelled))) {
                self.first_poll_failed(i, &result, "Cancelled");
            }
            self.stats.cancels += 1;
            return self.finish(i);
        }
        if self.refused_for_memory(units, priority) {
            // Before the semaphore: a shed at arrival that never waited.
            let Poll::Ready(Err(GateError::Busy {
                retry_after,
                reason,
            })) = result
            else {
                self.first_poll_failed(i, &result, "Busy for Memory");
            };
            self.check_shed_reason(reason, ShedReason::Memory);
            self.shed_event(
                site,
                units,
                priority,
                Duration::ZERO,
                ShedReason::Memory,
                retry_after,
            );
            self.memory_shed(priority);
            return self.finish(i);
        }
        if self.closed {
            if !matches!(result, Poll::Ready(Err(GateError::Closed))) {
                self.first_poll_failed(i, &result, "Closed");
            }
            self.closed_arrival(units, priority);
            return self.finish(i);
        }
        if self.fits(units) {
            let Poll::Ready(Ok(permit)) = result else {
                self.first_poll_failed(i, &result, "a grant at once");
            };
            self.available -= units;
            self.expected_events
                .push(Event::Admit(label, units, Duration::ZERO, priority));
            self.saw_wait(Duration::ZERO, true);
            self.stats.immediate_admits += 1;
            self.take_permit(permit, units, site, priority);
            self.bound_admit(priority);
            return self.finish(i);
        }
        // It joins the queue (with this poll's waker), then parks: it takes
        // no admissions until it is admitted.
        self.untaken(units);
        let w = &mut self.waiters[i];
        w.phase = Phase::Parked;
        w.signal_armed = true;
        self.queue.push_back(key);
        match self.park(key) {
            Ok(()) => {
                if !result.is_pending() {
                    self.first_poll_failed(i, &result, "Pending (parked)");
                }
                let now = self.now;
                let look_at = self.next_look(units, max_wait, Duration::ZERO);
                let w = &mut self.waiters[i];
                w.start = now;
                w.look_at = look_at;
                w.sleep_armed = true;
            }
            Err(reason) => {
                // Shed at arrival: its place given back, then out of the queue
                // (a grant the pass made it meanwhile goes back), then the shed,
                // with a newcomer's estimate. It never waited: no wait is seen.
                self.withdraw(key);
                let Poll::Ready(Err(GateError::Busy {
                    retry_after,
                    reason: got,
                })) = result
                else {
                    self.first_poll_failed(i, &result, &format!("Busy for {reason:?}"));
                };
                self.check_shed_reason(got, reason);
                self.shed_event(site, units, priority, Duration::ZERO, reason, retry_after);
                match reason {
                    ShedReason::Hopeless => self.stats.hopeless += 1,
                    ShedReason::QueueFull => self.stats.queue_full += 1,
                    _ => {
                        self.count_shed(reason, has_ceiling);
                        self.stats.sheds_at_once += 1;
                    }
                }
                self.finish(i);
            }
        }
    }

    fn first_poll_failed(
        &self,
        i: usize,
        result: &Poll<Result<GatePermit<Site>, GateError>>,
        model: &str,
    ) -> ! {
        let w = &self.waiters[i];
        self.fail(&format!(
            "first poll of #{} ({} units, {:?}, max wait {:?}, fired {}) returned {:?}, the \
             model expected {model}; model: available {}, queued {}, per class parked {:?} \
             (posted {:?}, doomed {:?}), closed {}, max_units {}, max_waiters {:?}, now {:?}, \
             in use {}, memory: {}",
            w.key,
            w.units,
            w.priority,
            w.max_wait,
            w.fired,
            outcome(result),
            self.available,
            self.queue.len(),
            (0..RANKS).map(|r| self.queued_of(r)).collect::<Vec<_>>(),
            self.posted,
            self.doomed,
            self.closed,
            self.max_units,
            self.max_waiters,
            self.now,
            self.held(),
            self.memory_now(),
        ))
    }

    /// The gate's `Wait::park` (`gate/protocol.rs`) for the waiter `key`,
    /// joined already: its place among the parked (a full queue sheds the
    /// oldest of the lowest class below it, else `QueueFull`), its own limit (a
    /// zero ceiling), then with a target the estimate (`Hopeless`) and, while
    /// pressed, the lower classes shed for it. `Err` is the shed at arrival (its
    /// place not yet given back).
    fn park(&mut self, key: u64) -> Result<(), ShedReason> {
        let w = self.waiter(key);
        let (units, priority, max_wait, limit_reason) =
            (w.units, w.priority, w.max_wait, w.limit_reason);
        if let Some(max) = self.max_waiters {
            let parked = self.waiters.iter().filter(|w| w.has_slot).count();
            if parked >= max {
                let lowest = (0..rank(priority))
                    .find(|&r| self.parked_of(r) != 0)
                    .ok_or(ShedReason::QueueFull)?;
                self.stats.evictions += 1;
                self.posted[lowest] += 1;
                self.serve();
            }
        }
        self.waiter_mut(key).has_slot = true;
        if max_wait.is_zero() {
            return Err(limit_reason);
        }
        let Some(target) = self.codel.as_ref().map(|c| c.target) else {
            return Ok(());
        };
        // Its own units are counted among the queued already.
        let longest = self.longest_now(units, max_wait);
        if self.estimate_of(0, priority).is_some_and(|e| e > longest) {
            return Err(ShedReason::Hopeless);
        }
        if let (Some(goal), Some(mark)) = (
            self.units_within(target.min(longest)),
            self.units_within((target * PRESS_MARK).min(longest)),
        ) {
            let behind_all = self.deficit(0, Priority::Sheddable);
            let now = self.now;
            let interval = self
                .codel
                .as_ref()
                .expect("a target")
                .interval(self.pace.mean_hold());
            let pressed =
                self.codel
                    .as_mut()
                    .expect("a target")
                    .pressed(behind_all > mark, now, interval);
            if pressed && behind_all > goal && self.shed_below(priority, behind_all - goal) {
                self.waiter_mut(key).outranked_others = true;
                self.stats.pressed_sheds += 1;
                self.codel.as_mut().expect("a target").press(now, interval);
            }
        }
        Ok(())
    }

    /// The waiter `key` gives back its place and leaves the semaphore: out of
    /// the queue if waiting, its units back if granted, its shed settled if
    /// doomed.
    fn withdraw(&mut self, key: u64) {
        let w = self.waiter_mut(key);
        w.has_slot = false;
        let (phase, units, r) = (w.phase, w.units, rank(w.priority));
        w.phase = Phase::Fresh;
        match phase {
            Phase::Parked => self.leave_queue(key),
            Phase::Granted => self.give_back(units),
            Phase::Doomed => self.doomed[r] -= units,
            Phase::Fresh | Phase::Closed | Phase::Exceeds => {}
        }
    }

    /// A poll of a waiter past its first poll: the signal, then the look at
    /// the deadline (which at the overload cap may shed lower classes), then
    /// the semaphore (a grant, a close, a forget's refusal, a shed for a higher
    /// class), then the deadline.
    fn poll_parked(
        &mut self,
        i: usize,
        result: Poll<Result<GatePermit<Site>, GateError>>,
        old: Arc<CountingWaker>,
        old_count: usize,
    ) {
        let w = &self.waiters[i];
        let (key, units, site, priority, fired, start, has_ceiling) = (
            w.key,
            w.units,
            w.site,
            w.priority,
            w.fired,
            w.start,
            w.has_ceiling,
        );
        let label = site.label();
        let waited = self.now.saturating_sub(start);
        if fired {
            self.retired.push((old, old_count));
            if !matches!(result, Poll::Ready(Err(GateError::Cancelled))) {
                self.parked_poll_failed(i, &result, "Cancelled", None);
            }
            match self.waiters[i].phase {
                Phase::Granted => self.stats.cancels_after_grant += 1,
                Phase::Doomed => self.stats.outranked_cancelled += 1,
                _ => {}
            }
            self.withdraw(key);
            self.stats.cancels += 1;
            return self.finish(i);
        }
        self.polling = Some(key);
        self.old_wakes = 0;
        let expired_for = self.look(key);
        self.polling = None;
        let count = old.count();
        let expected = old_count + self.old_wakes;
        self.expect(count == expected, || {
            format!("the old waker was woken {count} times, expected {expected}")
        });
        self.retired.push((old, count));
        let phase = self.waiters[i].phase;
        match (phase, result) {
            (Phase::Granted, Poll::Ready(Ok(permit))) => {
                let w = &mut self.waiters[i];
                w.has_slot = false;
                let outranked_others = w.outranked_others;
                self.expected_events
                    .push(Event::Admit(label, units, waited, priority));
                if outranked_others {
                    // Its wait was shortened by the sheds: no sample.
                    self.stats.outranked_others_admits += 1;
                } else {
                    self.saw_wait(waited, false);
                }
                self.stats.parked_admits += 1;
                if expired_for.is_some() {
                    self.stats.admits_at_deadline += 1;
                }
                if self.admissions != UNBOUND {
                    self.stats.memory_parked_admissions += 1;
                }
                self.take_permit(permit, units, site, priority);
                self.finish(i);
            }
            (Phase::Closed, Poll::Ready(Err(GateError::Closed))) => {
                self.waiters[i].has_slot = false;
                self.stats.closed += 1;
                self.finish(i);
            }
            (Phase::Exceeds, Poll::Ready(Err(GateError::ExceedsCapacity(e))))
                if e.requested == units && e.capacity == self.capacity =>
            {
                self.waiters[i].has_slot = false;
                self.stats.oversize += 1;
                self.finish(i);
            }
            (
                Phase::Doomed,
                Poll::Ready(Err(GateError::Busy {
                    retry_after,
                    reason,
                })),
            ) => {
                self.check_shed_reason(reason, ShedReason::Outranked);
                self.withdraw(key);
                self.shed_event(
                    site,
                    units,
                    priority,
                    waited,
                    ShedReason::Outranked,
                    retry_after,
                );
                self.saw_wait(waited, false);
                self.stats.outranked += 1;
                self.finish(i);
            }
            (
                Phase::Parked,
                Poll::Ready(Err(GateError::Busy {
                    retry_after,
                    reason: got,
                })),
            ) if expired_for.is_some() => {
                let reason = expired_for.expect("guarded");
                self.check_shed_reason(got, reason);
                if reason == ShedReason::Overload && !self.waiters[i].outranks_again_at.is_zero() {
                    self.stats.cap_sheds_then_self += 1;
                }
                self.withdraw(key);
                self.shed_event(site, units, priority, waited, reason, retry_after);
                self.saw_wait(waited, false);
                self.count_shed(reason, has_ceiling);
                self.finish(i);
            }
            (Phase::Parked, Poll::Pending) if expired_for.is_none() => {
                let w = &mut self.waiters[i];
                w.sleep_armed = true;
                w.signal_armed = true;
                if core::mem::take(&mut w.outrank_owed) && self.shed_below(priority, units) {
                    self.waiters[i].outranked_others = true;
                    self.stats.cap_sheds += 1;
                }
            }
            (_, other) => self.parked_poll_failed(i, &other, "", expired_for),
        }
    }

    fn parked_poll_failed(
        &self,
        i: usize,
        result: &Poll<Result<GatePermit<Site>, GateError>>,
        model: &str,
        expired_for: Option<ShedReason>,
    ) -> ! {
        let w = &self.waiters[i];
        self.fail(&format!(
            "waiter #{} ({} units, {:?}, max wait {:?} for {:?}, model phase {:?}, fired {}, \
             expired {expired_for:?}, outranked others {}) polled: {:?} {model}; model: \
             available {}, queued {}, per class parked {:?} (posted {:?}, doomed {:?}), \
             closed {}, max_units {}, now {:?}",
            w.key,
            w.units,
            w.priority,
            w.max_wait,
            w.limit_reason,
            w.phase,
            w.fired,
            w.outranked_others,
            outcome(result),
            self.available,
            self.queue.len(),
            (0..RANKS).map(|r| self.queued_of(r)).collect::<Vec<_>>(),
            self.posted,
            self.doomed,
            self.closed,
            self.max_units,
            self.now
        ))
    }

    /// The gate's look at the deadline of the waiter `key`: whether its limits
    /// end its wait now (at the overload cap, only with no lower class to shed
    /// instead); if not, a look that came due arms the next one, and the
    /// limits are looked at again (so a look at the cap that shed lower
    /// classes looks once more, and may shed more of them, or find none left
    /// and end the wait after all).
    fn look(&mut self, key: u64) -> Option<ShedReason> {
        loop {
            let w = self.waiter(key);
            let waited = self.now.saturating_sub(w.start);
            // Its sleep fires at `start + look_at`.
            let came_due = waited >= w.look_at;
            if let Some(reason) = self.expired_or_shed_below(key, waited) {
                return Some(reason);
            }
            if !came_due {
                return None;
            }
            let w = self.waiter(key);
            let next = self.next_look(w.units, w.max_wait, waited);
            self.waiter_mut(key).look_at = next;
        }
    }

    /// Removes a waiter whose future completed.
    fn finish(&mut self, i: usize) {
        let w = self.waiters.remove(i);
        let count = w.waker.count();
        self.expect(count == w.expected_wakes, || {
            format!(
                "waker called {count} times during its own poll, expected {}",
                w.expected_wakes
            )
        });
        drop(w.fut);
        drop(w.trigger);
        self.retired.push((w.waker, count));
    }

    fn leave_queue(&mut self, key: u64) {
        let at = self
            .queue
            .iter()
            .position(|&k| k == key)
            .expect("model: parked waiter not queued");
        self.queue.remove(at);
        self.serve();
    }

    fn drop_waiter(&mut self, i: usize) {
        let key = self.waiters[i].key;
        match self.waiters[i].phase {
            Phase::Parked | Phase::Granted => self.stats.dropped_parked_or_granted += 1,
            Phase::Doomed => self.stats.outranked_dropped += 1,
            Phase::Fresh | Phase::Closed | Phase::Exceeds => {}
        }
        // The gate's cancel, then its place given back: as the model orders it
        // in `withdraw` (nothing reads the place during the cancel's pass).
        let w = self.waiters.remove(i);
        drop(w.fut);
        let (count, expected) = (w.waker.count(), w.expected_wakes);
        let phase = w.phase;
        let (units, r) = (w.units, rank(w.priority));
        drop(w.trigger);
        self.retired.push((w.waker, count));
        match phase {
            Phase::Parked => self.leave_queue(key),
            Phase::Granted => self.give_back(units),
            Phase::Doomed => self.doomed[r] -= units,
            Phase::Fresh | Phase::Closed | Phase::Exceeds => {}
        }
        self.expect(count == expected, || {
            format!("dropped waiter woken {count} times, expected {expected}")
        });
    }

    fn fire(&mut self, i: usize) {
        let w = &mut self.waiters[i];
        w.trigger.fire();
        w.fired = true;
        if w.signal_armed {
            w.signal_armed = false;
            w.expected_wakes += 1;
        }
    }

    fn advance(&mut self, by: Duration) {
        self.timer.clock().advance(by);
        self.now += by;
        let now = self.now;
        for w in &mut self.waiters {
            if w.sleep_armed && now >= w.start + w.look_at {
                w.sleep_armed = false;
                w.expected_wakes += 1;
                self.stats.deadline_wakes += 1;
            }
        }
        self.watch_turn();
    }

    /// The replay polls the spawned tasks: the memory watch reads if its
    /// interval has passed since its last reading (at once, the first time),
    /// and ends instead on a closed gate.
    fn watch_turn(&mut self) {
        self.timer.run();
        let Some(due) = self.next_reading else {
            return;
        };
        if self.now < due {
            return;
        }
        if self.closed {
            self.next_reading = None;
            self.stats.memory_watch_ends += 1;
            return;
        }
        self.read_memory();
        self.next_reading = Some(self.now + MEMORY_INTERVAL);
    }

    /// A reading of the watch: each class's allowance with the units in
    /// permits now (all unbound for `None`), then the capacity in force, then
    /// `on_memory`.
    fn read_memory(&mut self) {
        let reading = self.reading;
        let in_use = self.held();
        // Admitted since the last reading: what the arrivals took of the
        // admissions it bound, or without a bound, the rise of the units in
        // use.
        let admitted = match self.given {
            Some(given) => given - self.admissions.min(given),
            None => in_use.saturating_sub(self.last_in_use),
        };
        let configured = self.configured;
        let allowance = reading.map(|used| self.room.read(used, in_use, admitted, configured));
        self.last_in_use = in_use;
        self.allowed = allowance.map_or([UNBOUND; RANKS], |a| a.levels);
        self.admissions = allowance.map_or(UNBOUND, |a| a.admissions);
        self.given = Some(self.admissions).filter(|&a| a != UNBOUND);
        if let Some(a) = allowance.filter(|a| a.admissions != UNBOUND) {
            self.stats.memory_admissions_bound += 1;
            if a.probe {
                self.stats.memory_probes += 1;
            }
        }
        let allowed = allowance.map(|a| a.levels);
        // In force were the units forgotten since still configured.
        let undone = (self.configured + self.forgotten)
            .min(self.allowed[TOP])
            .max(self.max_units.min(self.configured + self.forgotten));
        let from = self.apply_capacity();
        if undone > self.capacity {
            self.stats.memory_forgets_kept += 1;
        }
        self.stats.memory_readings += 1;
        if reading.is_none() {
            self.stats.memory_unbound_readings += 1;
        }
        if self.capacity < from {
            self.stats.memory_lowered += 1;
        } else if self.capacity > from {
            self.stats.memory_raised += 1;
        }
        if self.allowed[TOP] < self.max_units {
            self.stats.memory_floored += 1;
        }
        self.expected_events.push(Event::Memory(
            reading,
            allowed.map(|allowed| allowed[TOP]),
            self.capacity,
        ));
    }

    /// The capacity in force: the configured one lowered to `CriticalPlus`'s
    /// allowance, never below `max_units` (or the configured one, if forgets
    /// took it lower).
    fn in_force(&self) -> usize {
        self.configured
            .min(self.allowed[TOP])
            .max(self.max_units.min(self.configured))
    }

    /// The gate's `Inner::apply_capacity`: sets the capacity to the one in
    /// force, as a resize sets it (new units served, a shrink's debt), telling
    /// the observer if it changed. Returns the previous capacity.
    fn apply_capacity(&mut self) -> usize {
        let (from, to) = (self.capacity, self.in_force());
        self.forgotten = 0;
        if to != from {
            self.expected_events.push(Event::Capacity(to));
        }
        self.capacity = to;
        if to > from {
            self.give_back(to - from);
        } else if to < from {
            self.debt += from - to;
            self.serve();
        }
        from
    }

    /// Units in permits: the gate's `in_use()`.
    fn held(&self) -> usize {
        self.permits.iter().map(|p| p.units).sum()
    }

    /// The levels and the admissions left, `None` for unbound, for a message.
    fn memory_now(&self) -> String {
        let bound = |units: usize| (units != UNBOUND).then_some(units);
        format!(
            "levels {:?}, admissions left {:?}",
            self.allowed.map(bound),
            bound(self.admissions)
        )
    }

    /// Whether an arrival of `units` and `priority` is shed for memory: the
    /// gate is open and [`memory_bars`](Self::memory_bars) it. It takes
    /// nothing: an admission does ([`take_permit`](Self::take_permit)).
    fn refused_for_memory(&mut self, units: usize, priority: Priority) -> bool {
        if self.closed || !self.memory_bars(units, priority) {
            return false;
        }
        let allowed = self.allowed[rank(priority)];
        if !(allowed < self.capacity && self.held() + units > allowed) {
            self.stats.memory_admissions_spent += 1;
        }
        true
    }

    /// Whether the watch's last reading bars an arrival of `units` and
    /// `priority`, open gate or not: its class's level is below the capacity
    /// in force and its units with those in use pass it, or fewer admissions
    /// are left before the next reading than its units.
    fn memory_bars(&self, units: usize, priority: Priority) -> bool {
        let allowed = self.allowed[rank(priority)];
        (allowed < self.capacity && self.held() + units > allowed)
            || (self.admissions != UNBOUND && self.admissions < units)
    }

    /// An arrival refused `Closed` (the caller checked it).
    fn closed_arrival(&mut self, units: usize, priority: Priority) {
        self.stats.closed += 1;
        if self.memory_bars(units, priority) {
            self.stats.memory_closed_refusals += 1;
        }
    }

    /// An arrival within bound admissions, not shed for memory, that is not
    /// admitted at once: it takes none of them.
    fn untaken(&mut self, units: usize) {
        if self.admissions != UNBOUND && self.admissions >= units {
            self.stats.memory_admissions_untaken += 1;
        }
    }

    /// Counts a shed for memory (the caller checked it and expects its event).
    fn memory_shed(&mut self, priority: Priority) {
        self.stats.memory_sheds += 1;
        if priority == Priority::CriticalPlus {
            self.stats.memory_sheds_critical_plus += 1;
        }
    }

    /// After an admission at once of `priority`: while its class's allowance
    /// binds (below the capacity in force), the gate's units in use stay
    /// within it.
    fn bound_admit(&mut self, priority: Priority) {
        let allowed = self.allowed[rank(priority)];
        if allowed < self.capacity {
            self.stats.memory_bound_admits += 1;
            let in_use = self.gate.in_use();
            self.expect(in_use <= allowed, || {
                format!(
                    "{priority:?} admitted at once past its allowance: {in_use} in use, \
                     {allowed} allowed"
                )
            });
        }
    }

    fn release(&mut self, i: usize, explicit: bool) {
        let GPermit {
            permit,
            units,
            admitted_at,
            priority,
        } = self.permits.remove(i);
        let site = permit.source();
        let held = self.now - admitted_at;
        self.expect(permit.held_for() == held, || "held_for()".into());
        if explicit {
            permit.release();
        } else {
            drop(permit);
        }
        self.expected_events
            .push(Event::Release(site.label(), units, held, priority));
        self.pace.record(units, held, self.capacity);
        self.released_with_nobody_parked();
        self.give_back(units);
    }

    /// Units come back to the semaphore (a release, a grant given back, or a
    /// grow's new units) and are served.
    fn give_back(&mut self, units: usize) {
        self.available += units;
        self.serve();
    }

    fn resize(&mut self, to: usize) {
        let from = self.capacity;
        let previous = self.gate.resize(to);
        // The capacity is validated first, then the close: the gate is unchanged.
        let refusal = if to == 0 {
            self.stats.resize_refusals += 1;
            Some(ConfigError::ZeroCapacity)
        } else if to < self.max_units {
            self.stats.resize_below_max_units += 1;
            Some(ConfigError::CapacityBelowMaxUnits {
                capacity: to,
                max_units: self.max_units,
            })
        } else if self.closed {
            self.stats.resize_closed += 1;
            Some(ConfigError::Closed)
        } else {
            None
        };
        if let Some(refusal) = refusal {
            if self.closed && refusal != ConfigError::Closed {
                self.stats.resize_invalid_while_closed += 1;
            }
            self.expect(previous == Err(refusal), || {
                format!(
                    "resize({to}) returned {previous:?}, the model's refusal is {refusal:?} \
                     (capacity {from}, max_units {}, closed {})",
                    self.max_units, self.closed
                )
            });
            return;
        }
        self.expect(previous == Ok(from), || {
            format!("resize({to}) returned {previous:?}, the model's capacity is {from}")
        });
        // The configured capacity, then the one in force (which memory may
        // lower).
        self.configured = to;
        self.apply_capacity();
        if self.capacity > from {
            self.stats.grows += 1;
        } else if self.capacity < from {
            self.stats.shrinks += 1;
        }
    }

    fn split(&mut self, i: usize, n: usize) {
        let p = &mut self.permits[i];
        let (units, admitted_at, site, priority) =
            (p.units, p.admitted_at, p.permit.source(), p.priority);
        match p.permit.split(n) {
            Some(part) if n < units => {
                self.permits[i].units -= n;
                self.expect(part.source() == site && part.priority() == priority, || {
                    "split permit's source and class".into()
                });
                self.expect(part.held_for() == self.now - admitted_at, || {
                    "split permit's hold time".into()
                });
                self.stats.splits += 1;
                self.permits.push(GPermit {
                    permit: part,
                    units: n,
                    admitted_at,
                    priority,
                });
            }
            None if n >= units => {}
            other => self.fail(&format!(
                "split({n}) of a permit of {units} returned {:?}",
                other.map(|p| p.units())
            )),
        }
    }

    fn merge(&mut self, a: usize, b: usize) {
        let other = self.permits.remove(b);
        let a = if b < a { a - 1 } else { a };
        if other.permit.source() != self.permits[a].permit.source() {
            self.stats.merges_across_sources += 1;
        }
        self.permits[a].permit.merge(other.permit);
        self.permits[a].units += other.units;
        self.stats.merges += 1;
    }

    fn forget(&mut self, i: usize) {
        let units = self.permits[i].units;
        let GPermit {
            permit,
            admitted_at,
            priority,
            ..
        } = self.permits.remove(i);
        let site = permit.source();
        permit.forget();
        self.stats.forgets += 1;
        // As in the semaphore model: units above the capacity settle the debt.
        // The release is reported (and the pace fed) before the units leave.
        self.pace
            .record(units, self.now - admitted_at, self.capacity);
        let cut = units.min(self.capacity);
        self.capacity -= cut;
        self.debt -= units - cut;
        // The configured capacity follows (see "Memory"): no reading or
        // resize gives the units back.
        self.configured = self.configured.saturating_sub(units);
        self.forgotten += units;
        if self.capacity < self.max_units {
            self.stats.forgets_below_max_units += 1;
        }
        self.expected_events.push(Event::Release(
            site.label(),
            units,
            self.now - admitted_at,
            priority,
        ));
        self.released_with_nobody_parked();
        self.expected_events.push(Event::Capacity(self.capacity));
        self.serve();
    }

    fn close(&mut self) {
        self.gate.close();
        self.closed = true;
        while let Some(key) = self.queue.pop_front() {
            self.resolve(key, Phase::Closed);
        }
        // The close's pass drops what was posted (nothing is, between steps).
        self.posted = [0; RANKS];
    }

    /// The semaphore's serving: passes until one ends without a full wake
    /// batch.
    fn serve(&mut self) {
        while self.pass() {}
    }

    /// One serving pass, as the semaphore model's plus the shed walk: pay the
    /// debt, fail parked requests above the capacity, then (open, no debt)
    /// grant from the head while it fits; then, behind a head that does not
    /// fit, walk for what is posted and, if that shed anyone, go round again.
    /// Each resolution takes a place in the pass's wake batch; returns whether
    /// the batch filled (the next pass goes on).
    fn pass(&mut self) -> bool {
        let mut batch = 0;
        loop {
            let take = self.available.min(self.debt);
            self.available -= take;
            self.debt -= take;
            self.stats.retired_units += take;
            let capacity = self.capacity;
            let mut at = 0;
            while at < self.queue.len() {
                let key = self.queue[at];
                if self.waiter(key).units > capacity {
                    if batch == WAKE_BATCH {
                        return true;
                    }
                    self.queue.remove(at);
                    self.resolve(key, Phase::Exceeds);
                    batch += 1;
                    self.stats.exceeds_after_forget += 1;
                } else {
                    at += 1;
                }
            }
            if self.closed {
                self.posted = [0; RANKS];
                return false;
            }
            let blocked = loop {
                if batch == WAKE_BATCH {
                    // What is posted waits for the next pass.
                    return true;
                }
                let Some(&key) = self.queue.front() else {
                    break false;
                };
                let units = self.waiter(key).units;
                if self.debt > 0 || units > self.available {
                    break true;
                }
                self.queue.pop_front();
                self.available -= units;
                self.resolve(key, Phase::Granted);
                batch += 1;
            };
            if !blocked {
                // Nobody left to shed: what was posted is dropped.
                self.stats.shed_units_not_found += self.posted.iter().sum::<usize>();
                self.posted = [0; RANKS];
                return false;
            }
            if self.posted.iter().all(|&p| p == 0) {
                return false;
            }
            match self.walk(&mut batch) {
                None => return true,
                Some(0) => return false,
                // The head may fit now: look again.
                Some(_) => {}
            }
        }
    }

    /// The shed walk: for each class, lowest first, takes what is posted and
    /// resolves the oldest waiting requests of the class until their units
    /// cover it (a larger one goes all the same); what it cannot find is
    /// dropped. A full wake batch stops it, the class's remainder posted again.
    /// Returns the units shed, or `None` if the batch filled.
    fn walk(&mut self, batch: &mut usize) -> Option<usize> {
        let mut shed = 0;
        for r in 0..RANKS {
            let mut owed = core::mem::take(&mut self.posted[r]);
            let mut at = 0;
            while owed > 0 && at < self.queue.len() {
                let key = self.queue[at];
                let w = self.waiter(key);
                if rank(w.priority) != r {
                    at += 1;
                    continue;
                }
                if *batch == WAKE_BATCH {
                    self.posted[r] += owed;
                    self.stats.walks_cut_by_batch += 1;
                    return None;
                }
                let units = w.units;
                self.queue.remove(at);
                self.doomed[r] += units;
                self.resolve(key, Phase::Doomed);
                *batch += 1;
                owed = owed.saturating_sub(units);
                shed += units;
            }
            self.stats.shed_units_not_found += owed;
        }
        Some(shed)
    }

    /// The serving pass resolves the waiting request `key`: its waker is
    /// woken (the one its cell holds: the last poll's, while it is being
    /// polled and has not reached the semaphore yet).
    fn resolve(&mut self, key: u64, phase: Phase) {
        let polling = self.polling == Some(key);
        let w = self.waiter_mut(key);
        w.phase = phase;
        if polling {
            self.old_wakes += 1;
        } else {
            w.expected_wakes += 1;
        }
    }

    fn run_woken(&mut self) {
        let woken: Vec<u64> = self
            .waiters
            .iter()
            .filter(|w| w.waker.count() > 0)
            .map(|w| w.key)
            .collect();
        for key in woken {
            let i = self
                .waiters
                .iter()
                .position(|w| w.key == key)
                .expect("woken waiter vanished");
            self.poll(i);
        }
    }

    fn waiter(&self, key: u64) -> &GWaiter<'g> {
        self.waiters
            .iter()
            .find(|w| w.key == key)
            .expect("model: queued key has no live waiter")
    }

    fn waiter_mut(&mut self, key: u64) -> &mut GWaiter<'g> {
        self.waiters
            .iter_mut()
            .find(|w| w.key == key)
            .expect("model: queued key has no live waiter")
    }
    fn check(&mut self) {
        let events = self.obs.take();
        let expected = core::mem::take(&mut self.expected_events);
        self.expect(events == expected, || {
            format!("observer saw {events:?}, model expected {expected:?}")
        });
        for p in &self.permits {
            self.expect(
                p.permit.units() == p.units && p.permit.priority() == p.priority,
                || {
                    format!(
                        "{:?} of {:?}, the model says {} units of {:?}",
                        p.permit,
                        p.permit.priority(),
                        p.units,
                        p.priority
                    )
                },
            );
            self.expect(p.permit.held_for() == self.now - p.admitted_at, || {
                format!("{:?}, admitted at {:?}", p.permit, p.admitted_at)
            });
        }
        let held: usize = self.permits.iter().map(|p| p.units).sum();
        let granted: usize = self
            .waiters
            .iter()
            .filter(|w| w.phase == Phase::Granted)
            .map(|w| w.units)
            .sum();
        let gauge = self.obs.gauge.load(Ordering::SeqCst);
        // The highest the gauge read right after an admit during this step (a
        // poll: the capacity and the debt are the model's now).
        let max_gauge = self.obs.max_gauge.swap(0, Ordering::SeqCst);
        self.expect(
            gauge == held && max_gauge <= self.capacity + self.debt,
            || {
                format!(
                    "observer gauge {gauge} (max {max_gauge}), {held} units in permits, \
                     capacity {} + debt {}",
                    self.capacity, self.debt
                )
            },
        );
        self.expect(self.gate.capacity() == self.capacity, || {
            format!("capacity() is {}", self.gate.capacity())
        });
        self.expect(
            held + self.available + granted == self.capacity + self.debt,
            || {
                format!(
                    "held {held} + available {} + granted {granted} != capacity {} + debt {}",
                    self.available, self.capacity, self.debt
                )
            },
        );
        // `in_use()` counts the units in permits: what the observer's gauge counts.
        let in_use = self.gate.in_use();
        self.expect(in_use == held, || {
            format!(
                "in_use() is {in_use}, {held} units held by permits ({granted} granted, \
                 capacity {}, available {}, debt {})",
                self.capacity, self.available, self.debt
            )
        });
        let waiters = self.gate.waiters();
        self.expect(waiters == self.queue.len(), || {
            format!("waiters() is {waiters}, model has {}", self.queue.len())
        });
        self.expect(self.gate.is_closed() == self.closed, || {
            "is_closed()".into()
        });
        // No admission past the capacity in force: the units in use are within
        // it, or within what a shrink (which revokes nothing) still owes.
        self.expect(in_use <= self.capacity + self.debt, || {
            format!(
                "{in_use} in use, capacity in force {} + debt {}",
                self.capacity, self.debt
            )
        });
        let memory = self.allowed[0] < self.configured;
        self.expect(self.gate.pressure().memory() == memory, || {
            format!(
                "pressure().memory() is {}, the model's {}, configured {}",
                !memory,
                self.memory_now(),
                self.configured
            )
        });
        self.expect(
            self.timer.tasks() == usize::from(self.next_reading.is_some()),
            || {
                format!(
                    "{} tasks alive, the model's watch {:?}",
                    self.timer.tasks(),
                    self.next_reading
                )
            },
        );
        let overloaded = self.codel.as_ref().is_some_and(|c| c.overloaded);
        self.expect(self.gate.is_overloaded() == overloaded, || {
            format!("is_overloaded() is {}", self.gate.is_overloaded())
        });
        for units in [1, self.capacity] {
            let (gate, model) = (self.gate.estimated_wait(units), self.estimate(units));
            self.expect(gate == model, || {
                format!(
                    "estimated_wait({units}) is {gate:?}, the model's {model:?} (per class \
                     parked {:?}, posted {:?}, doomed {:?}, available {})",
                    (0..RANKS).map(|r| self.queued_of(r)).collect::<Vec<_>>(),
                    self.posted,
                    self.doomed,
                    self.available
                )
            });
            let (gate, model) = (
                self.gate.retry_after(units),
                self.retry_after_of(units, Priority::Sheddable),
            );
            self.expect(gate == model, || {
                format!("retry_after({units}) is {gate:?}, the model's {model:?}")
            });
        }
        self.expect(self.posted == [0; RANKS], || {
            format!("posted {:?} left after a step", self.posted)
        });
        self.expect(self.timer.now() == self.now, || "clock".into());
        for w in &self.waiters {
            let count = w.waker.count();
            self.expect(count == w.expected_wakes, || {
                format!(
                    "waiter #{} ({} units, phase {:?}, fired {}) woken {count} times since \
                     its last poll, expected {}",
                    w.key, w.units, w.phase, w.fired, w.expected_wakes
                )
            });
        }
    }

    fn drain(&mut self) {
        self.apply(GateOp::RunWoken);
        while !self.waiters.is_empty() {
            self.apply(GateOp::Drop(0));
        }
        while !self.permits.is_empty() {
            self.apply(GateOp::Release {
                permit: 0,
                explicit: false,
            });
        }
        self.expect(self.gate.in_use() == 0 && self.gate.waiters() == 0, || {
            "units or waiters left after the drain".into()
        });
        self.expect(self.available == self.capacity && self.debt == 0, || {
            format!(
                "the model has {} of {} units back, debt {}",
                self.available, self.capacity, self.debt
            )
        });
        // The watch's sleep, while it runs.
        let watching = usize::from(self.next_reading.is_some());
        self.expect(self.timer.clock().pending_sleeps() == watching, || {
            format!("{} sleeps left", self.timer.clock().pending_sleeps())
        });
        self.every_unit_back();
        for (waker, count) in &self.retired {
            let now = waker.count();
            self.expect(now == *count, || {
                format!("a retired waker was called after retirement ({count} -> {now})")
            });
            self.expect(Arc::strong_count(waker) == 1, || {
                "a retired waker is still held".into()
            });
        }
    }

    /// Every unit is back: the gate's own drain (which closes it) finds them
    /// all at once; then the watch ends at its next reading due.
    fn every_unit_back(&mut self) {
        {
            let mut drain = core::pin::pin!(self.gate.drain(Duration::ZERO));
            let got = drain.as_mut().poll(&mut Context::from_waker(Waker::noop()));
            self.expect(matches!(got, Poll::Ready(Ok(()))), || {
                format!("the gate's drain found units missing: {got:?}")
            });
        }
        self.closed = true;
        if let Some(due) = self.next_reading {
            self.advance(due.saturating_sub(self.now));
        }
        self.check();
        self.expect(
            self.timer.tasks() == 0 && self.timer.clock().pending_sleeps() == 0,
            || "the watch outlived the close".into(),
        );
    }

    fn expect(&self, ok: bool, what: impl FnOnce() -> String) {
        if !ok {
            self.fail(&what());
        }
    }

    fn fail(&self, what: &str) -> ! {
        panic!(
            "gate model disagrees at step {} ({:?}), capacity {}, budget {:?}: {what}",
            self.step, self.last_op, self.capacity, self.budget
        );
    }
}
