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
//! once the buffers fill. The watch counts what the units in use may still grow
//! into instead: every unit in use is taken at its full `bytes_per_unit`, and
//! the rest of the working set is the process's *other* memory:
//!
//! ```text
//! other      = max(working set − high water × bytes per unit, base)
//! allowed(c) = ⌊(mark(c) × limit − other) / bytes per unit⌋     for each class c
//! ```
//!
//! - **base** is the lowest working set read with no unit in use: the process
//!   without its requests' buffers. It keeps `other` from falling below what
//!   the process needs anyway while admitted buffers are still empty (a burst
//!   admitted at once is counted whole before its bytes arrive).
//! - **high water** is the most units in use at a reading since the working set
//!   last showed no memory beyond base and the units in use. Memory a freed
//!   buffer leaves with the allocator (glibc keeps it in its arenas) is counted
//!   as the units' own, up to what that many units used, since the next buffers
//!   reuse it; so a gate whose working set stays high after a load, with
//!   nothing in use, still admits to its full room. Memory beyond that counts
//!   against the room. Once the working set falls back (an allocator that
//!   returns freed memory: jemalloc, mimalloc, glibc with a fixed mmap
//!   threshold), high water restarts from the units in use.
//!
//! Memory that is neither the units' nor kept after them (a cache that grew
//! while the gate was idle) is hidden by the high water's credit until the
//! buffers fill again and show it; the marks' headroom below the limit is for
//! that, and for a unit that uses a little more than `bytes_per_unit`.
//!
//! # What it changes
//!
//! - **The capacity in force** is the configured one (built, resized, or set by
//!   a memory-limit follower) lowered to what the highest class's mark allows,
//!   never below `max_units`: parked requests wait as on a smaller gate, FIFO.
//!   The capacity gauge shows the capacity in force.
//! - **A class past its own mark** is shed at arrival with
//!   [`ShedReason::Memory`]: a request whose units, with those in use, are more
//!   than its class is allowed while that is below the capacity in force. Lower
//!   classes have lower marks and stop first; below the `max_units` floor even
//!   `CriticalPlus` is shed, since the alternative is the kill, which loses
//!   every request in flight, `CriticalPlus` ones included.
//! - Nothing admitted is revoked; the room comes back as the next readings see
//!   it.
//!
//! # Advisory state
//!
//! As the pace's: the allowed units are a per-class word each, written by the
//! watch and read by arrivals with `Relaxed`; a stale read admits or sheds one
//! request differently, and the semaphore's accounting is untouched. A resize
//! racing a reading may set the capacity from a stale allowance; the next
//! reading sets it again.

use alloc::boxed::Box;
use core::fmt;
use core::time::Duration;

use super::inner::Inner;
use crate::loom::sync::{AtomicUsize, Ordering};
use crate::{MemoryEvent, MemoryUse, Observer, Priority, Timer};

/// Per class, in [`Priority::rank`] order, the millionths of the limit the
/// units may fill (see [the module doc](self)): `Sheddable` stops first.
pub(crate) const DEFAULT_MARKS: [u32; 4] = [750_000, 800_000, 850_000, 900_000];

/// Marks are kept in millionths, so that a mark of 0.9 is 90 % exactly, not
/// the `f32` just below it.
const MILLION: u32 = 1_000_000;

/// The default interval between two readings.
pub(crate) const DEFAULT_INTERVAL: Duration = Duration::from_millis(250);

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
    /// `Critical` 85 %, `CriticalPlus` 90 %), a reading every 250 ms, and the
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

    /// The time between two readings (default 250 ms).
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
}

impl Room {
    /// The units each class may hold after a reading of `used` with `in_use`
    /// units in use, in [`Priority::rank`] order.
    pub(crate) fn allowed(
        &mut self,
        used: MemoryUse,
        in_use: usize,
        bytes_per_unit: u64,
        marks: &[u32; 4],
    ) -> [usize; 4] {
        let ws = used.working_set;
        let held = (in_use as u64).saturating_mul(bytes_per_unit);
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
        let credit = (self.high_water as u64).saturating_mul(bytes_per_unit);
        let other = ws.saturating_sub(credit).max(base);
        marks.map(|mark| {
            let fill = u128::from(used.limit) * u128::from(mark) / u128::from(MILLION);
            let room = fill.saturating_sub(u128::from(other));
            // Saturating: a huge room is "no bound" anyway.
            usize::try_from(room / u128::from(bytes_per_unit)).unwrap_or(usize::MAX)
        })
    }
}

/// The units each class may hold by the last reading: shared by the watch,
/// which writes it, and the arrivals and resizes, which read it.
pub(crate) struct MemoryBound {
    /// Per [`Priority::rank`]: [`UNBOUND`] while there is no reading.
    allowed: [AtomicUsize; 4],
}

/// No memory bound: no reading, or no watch.
pub(crate) const UNBOUND: usize = usize::MAX;

impl MemoryBound {
    pub(crate) fn new() -> Self {
        Self {
            allowed: core::array::from_fn(|_| AtomicUsize::new(UNBOUND)),
        }
    }

    /// The units `priority` may hold, [`UNBOUND`] without a reading.
    pub(crate) fn allowed(&self, priority: Priority) -> usize {
        // `Relaxed`: advisory (see the module doc).
        self.allowed[usize::from(priority as u8)].load(Ordering::Relaxed)
    }

    /// A new reading's allowances, or `None`: unbound.
    pub(crate) fn set(&self, allowed: Option<[usize; 4]>) {
        let allowed = allowed.unwrap_or([UNBOUND; 4]);
        for (word, units) in self.allowed.iter().zip(allowed) {
            word.store(units, Ordering::Relaxed);
        }
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
    async move {
        loop {
            let sleep = {
                let Some(inner) = inner.upgrade() else {
                    return;
                };
                if inner.semaphore.is_closed() {
                    return;
                }
                let reading = read.as_mut().and_then(|read| read());
                let allowed = reading.map(|used| {
                    room.allowed(used, inner.in_use(), watch.bytes_per_unit, &watch.marks)
                });
                if let Some(memory) = &inner.memory {
                    memory.set(allowed);
                }
                inner.apply_capacity(false);
                let top = allowed.map(|allowed| allowed[usize::from(Priority::CriticalPlus as u8)]);
                let event = MemoryEvent::new(reading, top, inner.semaphore.capacity());
                inner.observer.on_memory(&event);
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

    fn read(room: &mut Room, ws_mib: u64, in_use: usize) -> usize {
        room.allowed(MemoryUse::new(LIMIT, ws_mib * MIB), in_use, UNIT, &MARKS)[0]
    }

    #[test]
    fn at_start_the_room_is_the_mark_less_the_process() {
        let mut room = Room::default();
        // (144 − 10) / 8 = 16.75.
        assert_eq!(read(&mut room, 10, 0), 16);
    }

    #[test]
    fn admitted_buffers_count_whole_before_they_fill() {
        let mut room = Room::default();
        assert_eq!(read(&mut room, 10, 0), 16);
        // 16 admitted at once, their buffers still empty: no more room.
        assert_eq!(read(&mut room, 10, 16), 16);
        // Half filled, then full.
        assert_eq!(read(&mut room, 74, 16), 16);
        assert_eq!(read(&mut room, 138, 16), 16);
    }

    #[test]
    fn units_that_use_more_than_their_share_lower_the_room() {
        let mut room = Room::default();
        read(&mut room, 10, 0);
        // 16 units at 10 MiB each: 32 MiB more than counted.
        assert_eq!(read(&mut room, 170, 16), 12);
    }

    #[test]
    fn memory_the_allocator_keeps_after_a_load_does_not_lock_the_gate() {
        let mut room = Room::default();
        read(&mut room, 10, 0);
        read(&mut room, 138, 16);
        // The load is over, nothing in use, glibc keeps 111 MiB.
        assert_eq!(read(&mut room, 121, 0), 16);
    }

    #[test]
    fn memory_kept_beyond_what_the_units_used_counts_against_the_room() {
        let mut room = Room::default();
        read(&mut room, 10, 0);
        read(&mut room, 42, 4);
        // High water 4 units (32 MiB): 80 MiB kept with nothing in use leaves
        // 48 MiB unexplained: (144 − 58) / 8.
        assert_eq!(read(&mut room, 90, 0), 10);
    }

    #[test]
    fn memory_given_back_restarts_the_high_water() {
        let mut room = Room::default();
        read(&mut room, 10, 0);
        read(&mut room, 138, 16);
        // The allocator returned it all.
        assert_eq!(read(&mut room, 10, 0), 16);
        // A cache of 64 MiB grows while idle: no credit hides it now.
        assert_eq!(read(&mut room, 74, 0), 8);
    }

    #[test]
    fn a_full_cgroup_allows_nothing() {
        let mut room = Room::default();
        read(&mut room, 10, 0);
        assert_eq!(read(&mut room, 160, 0), 0);
        assert_eq!(read(&mut room, 200, 0), 0);
    }

    #[test]
    fn each_class_stops_at_its_own_mark() {
        let mut room = Room::default();
        let allowed = room.allowed(MemoryUse::new(LIMIT, 10 * MIB), 0, UNIT, &DEFAULT_MARKS);
        // (0.75 × 160 − 10) / 8 = 13.75, then 14.75, 15.75, 16.75.
        assert_eq!(allowed, [13, 14, 15, 16]);
    }
}
