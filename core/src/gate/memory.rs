//! The memory watch: a gate that keeps its process under its memory limit as the
//! kernel counts it, not only under the arithmetic of its budget.
//!
//! # The signal
//!
//! Every interval, on the gate's timer, the watch reads a [`MemoryUse`]: a limit
//! and the working set counted against it. By default the process's cgroup's
//! (`process_memory_use`: usage less inactive file cache, at the cgroup whose
//! limit binds); with a [`ceiling`](MemoryWatch::ceiling) and no cgroup limit,
//! the process's resident set against the ceiling; or a source of the user's
//! own. A reading of `None` (no limit, a file gone) turns the rule off until the
//! next reading: the gate falls back to its arithmetic capacity, and the
//! observer hears so ([`MemoryEvent::reading`] is `None`).
//!
//! # The rule
//!
//! Usage rises only as admitted requests fill their buffers, so a mark read
//! from usage alone admits everything while memory is still low and is killed
//! once the buffers fill. The watch bounds two things from each reading: how
//! many units each class may hold (the *level*), and how many may be admitted
//! before the next reading (the *admissions*).
//!
//! ```text
//! other         = max(working set − high water × bytes per unit, base)
//! level(c)      = ⌊(mark(c) × limit − other) / bytes per unit⌋
//! admissions    = max(⌊(top mark × limit − working set − owed) / bytes per unit⌋, probe)
//! ```
//!
//! - **base** is the lowest working set read with no unit in use: the process
//!   without its requests' buffers. Every unit in use is counted at its full
//!   `bytes_per_unit` on top of it, so a burst admitted at once is counted
//!   whole before its bytes arrive.
//! - **high water** is the most units in use at a reading since the working set
//!   last showed no memory beyond base and the units in use. Memory a freed
//!   buffer leaves with the allocator (glibc keeps it in its arenas) is counted
//!   as the units' own, up to what that many units used: the level of a gate
//!   whose working set stays high after a load, with nothing in use, is whole.
//!   Memory beyond that lowers the level (a unit that uses more than its
//!   share, a cache that grew). Once the working set falls back (an allocator
//!   that returns freed memory: jemalloc, mimalloc, glibc with a fixed mmap
//!   threshold), high water restarts from the units in use.
//! - **The admissions** are what keeps the level honest. Kept memory is
//!   reused only sometimes: glibc gives a thread's new buffer from that
//!   thread's arena, and the buffer another thread freed stays where it was. So
//!   every admission may take a fresh unit of memory, and those between two
//!   readings may together take no more than is left under the highest mark.
//!   **owed** is what the units admitted so far may still grow by: their units
//!   less the growth of the working set seen since, at most the units in use.
//! - **A probe**: while the working set holds still (it grew by less than half
//!   a unit since the last reading: the units admitted meanwhile reused kept
//!   memory, or have not filled), one unit more may be admitted if, taken
//!   fresh, it keeps the working set and what is owed within 95 % of the limit.
//!   After a load, with the working set high, a gate admits again at once,
//!   as many a reading as the mark leaves, and at least one.
//!
//! The admissions are bounded only near the marks: while every unit of the
//! configured capacity could be admitted fresh under the highest mark, an
//! arrival reads one word and takes nothing.
//!
//! # Advisory state
//!
//! As the pace's: the allowed units are a per-class word each, and the
//! admissions left one word, written by the watch and read (the admissions
//! taken) by arrivals with `Relaxed`; a stale read admits or sheds one request
//! differently, and the semaphore's accounting is untouched. A resize
//! racing a reading may set the capacity from a stale allowance; the next
//! reading sets it again.

use alloc::boxed::Box;
use core::fmt;
use core::time::Duration;

use super::inner::Inner;
use super::on_drop::OnDrop;
use crate::loom::sync::{AtomicUsize, Ordering};
use crate::{MemoryEvent, MemoryUse, Observer, Priority, Timer};

/// Per class, in [`Priority::rank`] order, the millionths of the limit the
/// units may fill (see [the module doc](self)): `Sheddable` stops first.
pub(crate) const DEFAULT_MARKS: [u32; 4] = [750_000, 800_000, 850_000, 900_000];

/// Marks are kept in millionths, so that a mark of 0.9 is 90 % exactly, not
/// the `f32` just below it.
const MILLION: u32 = 1_000_000;

/// The default interval between two readings.
pub(crate) const DEFAULT_INTERVAL: Duration = Duration::from_millis(100);

/// A source of readings.
pub(crate) type ReadMemory = Box<dyn FnMut() -> Option<MemoryUse> + Send + Sync + 'static>;

/// How a gate follows its process's memory as the kernel counts it: what a unit
/// costs, the mark each class stops at, how often it reads, and from where.
/// Given to [`GateBuilder::memory_watch`](crate::GateBuilder::memory_watch); a
/// gate whose capacity comes from [`Capacity::from_memory_budget`](crate::Capacity::from_memory_budget)
/// gets one by default (with feature `std`), see the builder.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use admit::{MemoryUse, MemoryWatch, Priority};
///
/// // 8 MiB a unit, batch work stops at 60 % of the limit, readings every 100 ms.
/// let watch = MemoryWatch::new(8 << 20)
///     .mark(Priority::Sheddable, 0.6)
///     .interval(Duration::from_millis(100));
/// # let _ = watch;
///
/// // A source of your own: a fixed reading, for a test.
/// let fixed = MemoryWatch::new(8 << 20).source(|| Some(MemoryUse::new(160 << 20, 10 << 20)));
/// # let _ = fixed;
/// ```
pub struct MemoryWatch {
    pub(crate) bytes_per_unit: u64,
    pub(crate) marks: [u32; 4],
    pub(crate) interval: Duration,
    pub(crate) ceiling: Option<u64>,
    pub(crate) source: Option<ReadMemory>,
}

impl MemoryWatch {
    /// A watch that counts each unit in use as `bytes_per_unit`, with the
    /// default marks (of the limit: `Sheddable` 75 %, `SheddablePlus` 80 %,
    /// `Critical` 85 %, `CriticalPlus` 90 %), a reading every 100 ms, and the
    /// process's cgroup as its source (with feature `std`; without it, give a
    /// [`source`](Self::source)).
    ///
    /// # Panics
    ///
    /// If `bytes_per_unit` is 0.
    #[must_use]
    pub fn new(bytes_per_unit: u64) -> Self {
        assert!(
            bytes_per_unit != 0,
            "MemoryWatch::new: bytes_per_unit must be greater than zero"
        );
        Self {
            bytes_per_unit,
            marks: DEFAULT_MARKS,
            interval: DEFAULT_INTERVAL,
            ceiling: None,
            source: None,
        }
    }

    /// The fraction of the limit `priority`'s requests may fill before they are
    /// shed for memory. A higher class's mark should be at least a lower one's
    /// (otherwise the lower class stops last).
    ///
    /// # Panics
    ///
    /// If `fraction` is not within `(0, 1]`.
    #[must_use]
    pub fn mark(mut self, priority: Priority, fraction: f32) -> Self {
        assert!(
            fraction > 0.0 && fraction <= 1.0,
            "MemoryWatch::mark: the fraction must be within (0, 1]"
        );
        // Within 1..=MILLION: the fraction is within (0, 1].
        let millionths = (f64::from(fraction) * f64::from(MILLION) + 0.5) as u32;
        self.marks[usize::from(priority as u8)] = millionths.clamp(1, MILLION);
        self
    }

    /// The time between two readings (default 100 ms). The admissions between
    /// two readings are bounded near the marks: a shorter interval admits
    /// more a second there, for the cost of a reading (a few cgroup files).
    ///
    /// # Panics
    ///
    /// If `interval` is zero.
    #[must_use]
    pub fn interval(mut self, interval: Duration) -> Self {
        assert!(
            !interval.is_zero(),
            "MemoryWatch::interval: must not be zero"
        );
        self.interval = interval;
        self
    }

    /// A limit of `bytes` for the default source: the cgroup's limit if it is
    /// lower, and where no cgroup sets one, the process's resident set is read
    /// against it. Without a ceiling, a process with no cgroup limit has no
    /// signal and the gate keeps its arithmetic.
    #[must_use]
    pub fn ceiling(mut self, bytes: u64) -> Self {
        self.ceiling = Some(bytes);
        self
    }

    /// Readings from `read` instead of the process's cgroup: called once an
    /// interval on the watch's task; `None` turns the rule off until a reading
    /// comes back.
    #[must_use]
    pub fn source<F>(mut self, read: F) -> Self
    where
        F: FnMut() -> Option<MemoryUse> + Send + Sync + 'static,
    {
        self.source = Some(Box::new(read));
        self
    }

    /// The source the watch reads: the user's, or the process's.
    pub(crate) fn take_source(&mut self) -> Option<ReadMemory> {
        if let Some(source) = self.source.take() {
            return Some(source);
        }
        process_source(self.ceiling)
    }
}

impl fmt::Debug for MemoryWatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemoryWatch")
            .field("bytes_per_unit", &self.bytes_per_unit)
            .field("marks", &self.marks)
            .field("interval", &self.interval)
            .field("ceiling", &self.ceiling)
            .field("own_source", &self.source.is_some())
            .finish()
    }
}

/// The process's cgroup, lowered to `ceiling`; the resident set against the
/// ceiling where no cgroup sets a limit.
#[cfg(feature = "std")]
fn process_source(ceiling: Option<u64>) -> Option<ReadMemory> {
    Some(Box::new(move || {
        match (crate::process_memory_use(), ceiling) {
            (Some(used), Some(ceiling)) => {
                Some(MemoryUse::new(used.limit.min(ceiling), used.working_set))
            }
            (Some(used), None) => Some(used),
            (None, Some(ceiling)) => resident_set().map(|rss| MemoryUse::new(ceiling, rss)),
            (None, None) => None,
        }
    }))
}

#[cfg(not(feature = "std"))]
fn process_source(_ceiling: Option<u64>) -> Option<ReadMemory> {
    None
}

/// The process's resident set (`VmRSS` of `/proc/self/status`), in bytes.
#[cfg(feature = "std")]
fn resident_set() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let kib = status.lines().find_map(|line| {
        let rest = line.strip_prefix("VmRSS:")?;
        rest.trim().strip_suffix("kB")?.trim().parse::<u64>().ok()
    })?;
    kib.checked_mul(1024)
}

/// What the rule remembers between readings (see [the module doc](self)).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Room {
    /// The lowest working set read with no unit in use.
    base: Option<u64>,
    /// The most units in use at a reading since the working set last showed
    /// nothing kept beyond base and the units in use.
    high_water: usize,
    /// The working set at the last reading.
    last: Option<u64>,
    /// Memory the units admitted so far may still grow by: what their buffers
    /// have not shown in the working set yet.
    owed: u64,
}

/// What a reading allows until the next one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Allowance {
    /// Per class, in [`Priority::rank`] order: the units it may hold.
    pub(crate) levels: [usize; 4],
    /// Units that may be admitted before the next reading, whatever the
    /// class; [`UNBOUND`] when every unit of the capacity could be admitted
    /// fresh without passing the highest mark.
    pub(crate) admissions: usize,
}

/// A reading as the rule takes it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Reading {
    pub(crate) used: MemoryUse,
    /// Units in use now.
    pub(crate) in_use: usize,
    /// Units admitted since the last reading.
    pub(crate) admitted: usize,
    /// The configured capacity.
    pub(crate) configured: usize,
}

/// The working set a probe may take the limit to: 95 %.
const PROBE_CEILING: u32 = 950_000;

impl Room {
    /// What `reading` allows, with each unit counted as `bytes_per_unit` and
    /// the classes' `marks`.
    pub(crate) fn allowed(
        &mut self,
        reading: Reading,
        bytes_per_unit: u64,
        marks: &[u32; 4],
    ) -> Allowance {
        let Reading {
            used,
            in_use,
            admitted,
            configured,
        } = reading;
        let ws = used.working_set;
        let unit = bytes_per_unit;
        let held = (in_use as u64).saturating_mul(unit);
        let base = match self.base {
            Some(base) if in_use != 0 || ws >= base => base,
            // The first reading, or a lower one with nothing in use.
            _ => {
                let base = if in_use == 0 {
                    ws
                } else {
                    ws.saturating_sub(held)
                };
                self.base = Some(base);
                base
            }
        };
        if ws <= base.saturating_add(held) {
            // Nothing kept beyond the units in use: the allocator gave back.
            self.high_water = in_use;
        } else {
            self.high_water = self.high_water.max(in_use);
        }
        let grown = self.last.map_or(0, |last| ws.saturating_sub(last));
        self.last = Some(ws);
        self.owed = (self.owed + (admitted as u64).saturating_mul(unit))
            .saturating_sub(grown)
            .min(held);
        let units = |fill: u64, other: u64| {
            let room = fill.saturating_sub(other);
            usize::try_from(room / unit).unwrap_or(usize::MAX)
        };
        let fill = |millionths: u32| {
            let fill = u128::from(used.limit) * u128::from(millionths) / u128::from(MILLION);
            u64::try_from(fill).unwrap_or(u64::MAX)
        };
        let kept = (self.high_water as u64).saturating_mul(unit);
        let other = ws.saturating_sub(kept).max(base);
        let levels = marks.map(|mark| units(fill(mark), other));
        let top = fill(marks.iter().copied().max().unwrap_or(MILLION));
        // Each admission may take a unit of memory the allocator did not
        // keep (glibc's arenas keep what another thread freed).
        let fresh = units(top, ws.saturating_add(self.owed));
        // The units admitted last reused kept memory: one more may probe.
        let steady = grown < unit / 2;
        let probe = usize::from(
            steady && ws.saturating_add(self.owed).saturating_add(unit) <= fill(PROBE_CEILING),
        );
        let admissions = fresh.max(probe);
        Allowance {
            levels,
            admissions: if admissions >= configured {
                UNBOUND
            } else {
                admissions
            },
        }
    }
}

/// The units each class may hold by the last reading, and the admissions
/// left before the next: shared by the watch, which writes them, and the
/// arrivals and resizes, which read them.
pub(crate) struct MemoryBound {
    /// Per [`Priority::rank`]: [`UNBOUND`] while there is no reading.
    allowed: [AtomicUsize; 4],
    /// Units that may still be admitted before the next reading, or
    /// [`UNBOUND`].
    admissions: AtomicUsize,
}

/// No memory bound: no reading, or no watch.
pub(crate) const UNBOUND: usize = usize::MAX;

impl MemoryBound {
    pub(crate) fn new() -> Self {
        Self {
            allowed: core::array::from_fn(|_| AtomicUsize::new(UNBOUND)),
            admissions: AtomicUsize::new(UNBOUND),
        }
    }

    /// The units `priority` may hold, [`UNBOUND`] without a reading.
    pub(crate) fn allowed(&self, priority: Priority) -> usize {
        // `Relaxed`: advisory (see the module doc).
        self.allowed[usize::from(priority as u8)].load(Ordering::Relaxed)
    }

    /// Whether `units` of the admissions left before the next reading are
    /// there.
    pub(crate) fn admits(&self, units: usize) -> bool {
        // `Relaxed`: advisory (see the module doc); arrivals that race may
        // together pass the admissions by as many as race.
        let left = self.admissions.load(Ordering::Relaxed);
        left == UNBOUND || left >= units
    }

    /// An admission of `units`: taken from the admissions left, if bounded.
    pub(crate) fn took(&self, units: usize) {
        if self.admissions.load(Ordering::Relaxed) == UNBOUND {
            return;
        }
        let _ = self
            .admissions
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |left| {
                (left != UNBOUND).then(|| left.saturating_sub(units))
            });
    }

    /// The admissions left before the next reading, or [`UNBOUND`].
    pub(crate) fn left(&self) -> usize {
        self.admissions.load(Ordering::Relaxed)
    }

    /// A new reading's allowance, or `None`: unbound.
    pub(crate) fn set(&self, allowance: Option<Allowance>) {
        let levels = allowance.map_or([UNBOUND; 4], |a| a.levels);
        for (word, units) in self.allowed.iter().zip(levels) {
            word.store(units, Ordering::Relaxed);
        }
        let admissions = allowance.map_or(UNBOUND, |a| a.admissions);
        self.admissions.store(admissions, Ordering::Relaxed);
    }
}

/// The watch's task: a reading every interval, until the gate is dropped or
/// closed. Holds the gate weakly, as the overload watch does.
pub(crate) fn watch<T: Timer, O: Observer>(
    inner: &alloc::sync::Arc<Inner<T, O>>,
    mut watch: MemoryWatch,
) -> impl core::future::Future<Output = ()> + Send + 'static {
    let inner = alloc::sync::Arc::downgrade(inner);
    let mut read = watch.take_source();
    let mut room = Room::default();
    // The admissions the last reading allowed (`None`: unbound), and the
    // units in use at it.
    let (mut given, mut last_in_use): (Option<usize>, usize) = (None, 0);
    async move {
        loop {
            let sleep = {
                let Some(inner) = inner.upgrade() else {
                    return;
                };
                if inner.semaphore.is_closed() {
                    return;
                }
                // The source and the observer are user code: should either
                // panic, the watch ends here, and leaves the gate unbound
                // rather than held to its last reading for good. (Quietly:
                // the observer is not called again on the unwind.)
                let unbind_on_unwind = OnDrop::new(|| {
                    if let Some(memory) = &inner.memory {
                        memory.set(None);
                    }
                    inner.semaphore.set_capacity(inner.capacity_in_force());
                });
                let reading = read.as_mut().and_then(|read| read());
                let in_use = inner.in_use();
                // Admissions since the last reading: those taken from the
                // allowance, or while unbound, the rise of the units in use.
                let left = inner.memory.as_ref().map_or(UNBOUND, MemoryBound::left);
                let admitted = match given {
                    Some(given) => given - left.min(given),
                    None => in_use.saturating_sub(last_in_use),
                };
                let allowance = reading.map(|used| {
                    let reading = Reading {
                        used,
                        in_use,
                        admitted,
                        configured: inner.configured.load(Ordering::Relaxed),
                    };
                    room.allowed(reading, watch.bytes_per_unit, &watch.marks)
                });
                last_in_use = in_use;
                if let Some(memory) = &inner.memory {
                    memory.set(allowance);
                }
                given = allowance
                    .map(|a| a.admissions)
                    .filter(|&admissions| admissions != UNBOUND);
                inner.apply_capacity(false);
                let top = allowance.map(|a| a.levels[usize::from(Priority::CriticalPlus as u8)]);
                let event = MemoryEvent::new(reading, top, inner.semaphore.capacity());
                inner.observer.on_memory(&event);
                unbind_on_unwind.disarm();
                inner
                    .timer
                    .sleep_until(inner.timer.now().saturating_add(watch.interval))
            };
            sleep.await;
        }
    }
}

#[cfg(all(test, not(any(admit_loom, admit_shuttle))))]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;
    const UNIT: u64 = 8 * MIB;
    const LIMIT: u64 = 160 * MIB;
    /// One mark for every class: 90 % of 160 MiB is 144 MiB.
    const MARKS: [u32; 4] = [900_000; 4];
    const CONFIGURED: usize = 20;

    /// A reading of `ws_mib` with `in_use` units in use, `admitted` of them
    /// since the last.
    fn read(room: &mut Room, ws_mib: u64, in_use: usize, admitted: usize) -> Allowance {
        let reading = Reading {
            used: MemoryUse::new(LIMIT, ws_mib * MIB),
            in_use,
            admitted,
            configured: CONFIGURED,
        };
        room.allowed(reading, UNIT, &MARKS)
    }

    fn level(room: &mut Room, ws_mib: u64, in_use: usize) -> usize {
        read(room, ws_mib, in_use, 0).levels[0]
    }

    #[test]
    fn at_start_the_room_is_the_mark_less_the_process() {
        let mut room = Room::default();
        // (144 − 10) / 8 = 16.75, as level and as admissions.
        let first = read(&mut room, 10, 0, 0);
        assert_eq!(
            first,
            Allowance {
                levels: [16; 4],
                admissions: 16
            }
        );
    }

    #[test]
    fn admitted_buffers_count_whole_before_they_fill() {
        let mut room = Room::default();
        read(&mut room, 10, 0, 0);
        // 16 admitted at once, their buffers still empty: no more room under
        // the mark, and one probe, which even with all 16 full stays under
        // 95 % of the limit.
        assert_eq!(
            read(&mut room, 10, 16, 16),
            Allowance {
                levels: [16; 4],
                admissions: 1
            }
        );
        // Half filled, then full: the owed memory shows.
        assert_eq!(read(&mut room, 74, 16, 0).admissions, 0);
        assert_eq!(
            read(&mut room, 138, 16, 0),
            Allowance {
                levels: [16; 4],
                admissions: 0
            }
        );
        // Steady: a probe.
        assert_eq!(read(&mut room, 138, 16, 0).admissions, 1);
    }

    #[test]
    fn units_that_use_more_than_their_share_lower_the_room() {
        let mut room = Room::default();
        read(&mut room, 10, 0, 0);
        // 16 units at 10 MiB each: 32 MiB more than counted.
        assert_eq!(level(&mut room, 170, 16), 12);
    }

    #[test]
    fn memory_the_allocator_keeps_after_a_load_does_not_lock_the_gate() {
        let mut room = Room::default();
        read(&mut room, 10, 0, 0);
        read(&mut room, 138, 16, 16);
        // The load is over, nothing in use, glibc keeps 111 MiB: the level is
        // whole, and the admissions that could each take fresh memory are
        // those the mark leaves: (144 − 121) / 8.
        let after = read(&mut room, 121, 0, 0);
        assert_eq!(
            after,
            Allowance {
                levels: [16; 4],
                admissions: 2
            }
        );
    }

    #[test]
    fn near_the_limit_one_probe_at_a_time_while_memory_holds_still() {
        let mut room = Room::default();
        read(&mut room, 10, 0, 0);
        read(&mut room, 140, 16, 16);
        // Nothing left under the mark; the working set holds still: a probe.
        assert_eq!(read(&mut room, 142, 0, 0).admissions, 1);
        // The probe has not shown its memory yet: it may still take a fresh
        // unit, so no second one.
        assert_eq!(read(&mut room, 142, 1, 1).admissions, 0);
        // It ended without growing the working set: it reused. Another.
        assert_eq!(read(&mut room, 142, 0, 0).admissions, 1);
        // One that took fresh memory: no probe while the working set grows.
        assert_eq!(read(&mut room, 150, 1, 1).admissions, 0);
        // Past 95 % of the limit, none even when it holds still.
        read(&mut room, 153, 0, 0);
        assert_eq!(read(&mut room, 153, 0, 0).admissions, 0);
    }

    #[test]
    fn memory_kept_beyond_what_the_units_used_counts_against_the_level() {
        let mut room = Room::default();
        read(&mut room, 10, 0, 0);
        level(&mut room, 42, 4);
        // High water 4 units (32 MiB): 80 MiB kept with nothing in use leaves
        // 48 MiB unexplained: (144 − 58) / 8.
        assert_eq!(level(&mut room, 90, 0), 10);
    }

    #[test]
    fn memory_given_back_restarts_the_high_water() {
        let mut room = Room::default();
        read(&mut room, 10, 0, 0);
        level(&mut room, 138, 16);
        // The allocator returned it all.
        assert_eq!(level(&mut room, 10, 0), 16);
        // A cache of 64 MiB grows while idle: no credit hides it now.
        assert_eq!(level(&mut room, 74, 0), 8);
    }

    #[test]
    fn a_full_cgroup_allows_nothing() {
        let mut room = Room::default();
        read(&mut room, 10, 0, 0);
        assert_eq!(
            read(&mut room, 160, 0, 0),
            Allowance {
                levels: [0; 4],
                admissions: 0
            }
        );
    }

    #[test]
    fn far_from_the_marks_admissions_are_unbound() {
        let mut room = Room::default();
        let reading = Reading {
            used: MemoryUse::new(16 * LIMIT, 10 * MIB),
            in_use: 0,
            admitted: 0,
            configured: CONFIGURED,
        };
        assert_eq!(room.allowed(reading, UNIT, &MARKS).admissions, UNBOUND);
    }

    #[test]
    fn each_class_stops_at_its_own_mark() {
        let mut room = Room::default();
        let reading = Reading {
            used: MemoryUse::new(LIMIT, 10 * MIB),
            in_use: 0,
            admitted: 0,
            configured: CONFIGURED,
        };
        // (0.75 × 160 − 10) / 8 = 13.75, then 14.75, 15.75, 16.75.
        assert_eq!(
            room.allowed(reading, UNIT, &DEFAULT_MARKS).levels,
            [13, 14, 15, 16]
        );
    }
}
