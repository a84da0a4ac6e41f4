#![doc = include_str!("../README.md")]

use core::sync::atomic::{fence, AtomicBool, AtomicIsize, AtomicU64, Ordering};
use core::time::Duration;
use std::sync::OnceLock;

use admit::{
    AdmitEvent, CapacityEvent, CutEvent, CutReason, LeaseEnd, LeaseEndEvent, LeaseStartEvent,
    MemoryEvent, OverloadEvent, Priority, ReleaseEvent, ShedEvent, ShedReason, StartEvent,
};
use metrics::{Counter, Gauge, Histogram, SharedString, Unit};

/// Reports a gate's events as the metrics in the [crate docs](crate#metrics).
///
/// # Examples
///
/// ```
/// let observer = admit_metrics::MetricsObserver::new("upload_sessions");
/// assert_eq!(observer.prefix(), "upload_sessions");
/// ```
#[derive(Debug)]
pub struct MetricsObserver {
    prefix: String,
    names: Names,
    /// Set at the first `on_start`: the labels, the capacity and overload state in
    /// force, and what a late recorder must be caught up with.
    state: OnceLock<State>,
    /// Resolved against the first real recorder found (at start, or at a later
    /// event); from then on every event goes through them.
    handles: OnceLock<Handles>,
    /// The global recorder this observer's prefix is claimed in, from its
    /// first start with that recorder in force ([`claim_prefix`]).
    claimed_in: OnceLock<usize>,
}

/// The prefixes claimed by live observers, with the recorder each reports to:
/// two observers of one prefix in one recorder would write the same series.
static CLAIMED: std::sync::Mutex<Vec<(usize, String)>> = std::sync::Mutex::new(Vec::new());

/// The recorder in force, by address: the global one, or a thread's local one.
fn recorder_id() -> usize {
    metrics::with_recorder(|recorder| core::ptr::from_ref(recorder).cast::<()>() as usize)
}

/// The global recorder's address, if it is the one in force here.
///
/// Only the global recorder is claimed in: it lives as long as the program, so
/// its address names it. A local recorder lives for a scope, and a later one
/// may take its address while a gate that reported to it still lives, so
/// claiming in it could refuse a prefix that is free. A thread of our own sees
/// no local recorder, so the address it finds is the global one's; a platform
/// with no threads claims nothing.
fn global_recorder_in_force() -> Option<usize> {
    let here = recorder_id();
    let global = std::thread::scope(|scope| {
        std::thread::Builder::new()
            .spawn_scoped(scope, recorder_id)
            .ok()?
            .join()
            .ok()
    })?;
    (global == here).then_some(here)
}

/// Claims `prefix` in the global recorder (at `recorder`) for a starting
/// observer.
///
/// # Panics
///
/// If another live observer claimed it there: its series would merge with
/// this one's (`units_in_use` summed, `capacity_units` overwritten).
fn claim_prefix(prefix: &str, recorder: usize) {
    let mut claimed = CLAIMED
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let taken = claimed.iter().any(|(r, p)| *r == recorder && p == prefix);
    if !taken {
        claimed.push((recorder, prefix.to_owned()));
    }
    drop(claimed);
    assert!(
        !taken,
        "admit-metrics: two gates report to one recorder as `{prefix}`: their series \
         would merge ({prefix}_units_in_use summed, {prefix}_capacity_units overwritten); \
         give each gate a prefix of its own"
    );
}

impl Drop for MetricsObserver {
    fn drop(&mut self) {
        if let Some(&recorder) = self.claimed_in.get() {
            let mut claimed = CLAIMED
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if let Some(i) = claimed
                .iter()
                .position(|(r, p)| *r == recorder && *p == self.prefix)
            {
                claimed.swap_remove(i);
            }
        }
    }
}

/// The number of shed reasons counted apart: [`ShedReason::ALL`].
const REASONS: usize = ShedReason::ALL.len();
/// The number of cut reasons counted apart: [`CutReason::ALL`].
const CUT_REASONS: usize = CutReason::ALL.len();
/// The number of priority classes counted apart: [`Priority::ALL`].
const PRIORITIES: usize = Priority::ALL.len();

/// The position of `priority` in [`Priority::ALL`].
fn priority_index(priority: Priority) -> usize {
    Priority::ALL
        .iter()
        .position(|&p| p == priority)
        .expect("every class is in ALL")
}

/// A gauge's count (units in use, live leases) once it was handed over: events
/// then go to the handles.
const GAUGE_HANDED_OVER: isize = isize::MIN;
/// A counter's count (sheds, cuts, admissions) once it was handed over.
const COUNTER_HANDED_OVER: u64 = u64::MAX;

/// What the observer knows from `on_start` and counts itself while no handles are
/// resolved.
///
/// Each count is an atomic that an event adds to only while it is not yet handed
/// over (a compare-and-swap loop); the thread that resolves the handles swaps the
/// count out for a "handed over" mark and adds it to the handles. An event's count
/// thus reaches the recorder exactly once: through the hand-over, or, once the mark
/// is set, by the event itself on the handles, which the mark's thread published
/// before setting it.
#[derive(Debug)]
struct State {
    /// The source labels of the gate, in `Source::ALL` order.
    sources: Box<[&'static str]>,
    /// The capacity last reported (`on_start`, then `on_capacity`), with its
    /// units over the memory budget: one [`CapacityReport`] packed, so the two
    /// gauges always show one report.
    capacity: AtomicU64,
    /// The overload state last reported: not overloaded at `on_start`, then
    /// `on_overload`.
    overloaded: AtomicBool,
    /// Units admitted minus units released, or [`GAUGE_HANDED_OVER`].
    in_use: AtomicIsize,
    /// Admissions at `admit_slot(source, priority)`, or [`COUNTER_HANDED_OVER`].
    admissions: Box<[AtomicU64]>,
    /// Leases started minus leases ended, per source in `sources` order, or
    /// [`GAUGE_HANDED_OVER`].
    leases_live: Box<[AtomicIsize]>,
    /// Sheds at `slot(source, reason)`, or [`COUNTER_HANDED_OVER`].
    sheds: Box<[AtomicU64]>,
    /// Cuts at `cut_slot(source, reason)`, or [`COUNTER_HANDED_OVER`].
    cuts: Box<[AtomicU64]>,
}

/// Where [`State::count`] put an event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Counted {
    /// In the observer's own count: the hand-over carries it to the recorder.
    Pending,
    /// The count was already handed over: the event goes to the handles.
    HandedOver,
    /// An event of a label or reason outside the known set: it has no slot.
    NoSlot,
}

/// A capacity report: the capacity, and the units of it above what the memory
/// budget allows (0 for an explicit capacity, or one within its budget).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct CapacityReport {
    units: usize,
    over_budget: usize,
}

impl CapacityReport {
    fn new(units: usize, budget_units: Option<usize>) -> Self {
        Self {
            units,
            over_budget: budget_units.map_or(0, |budget| units.saturating_sub(budget)),
        }
    }

    /// Both counts in one word (each is at most `Semaphore::MAX_UNITS < 2^32`).
    fn pack(self) -> u64 {
        (self.units as u64) | ((self.over_budget as u64) << 32)
    }

    fn unpack(word: u64) -> Self {
        Self {
            units: (word & u64::from(u32::MAX)) as usize,
            over_budget: (word >> 32) as usize,
        }
    }

    /// Sets `units` and `over_budget` to this report.
    fn show(self, units: &Gauge, over_budget: &Gauge) {
        units.set(self.units as f64);
        over_budget.set(self.over_budget as f64);
    }
}

impl State {
    fn new(capacity: CapacityReport, sources: &[&'static str]) -> Self {
        Self {
            sources: sources.into(),
            capacity: AtomicU64::new(capacity.pack()),
            overloaded: AtomicBool::new(false),
            in_use: AtomicIsize::new(0),
            admissions: (0..sources.len() * PRIORITIES)
                .map(|_| AtomicU64::new(0))
                .collect(),
            leases_live: (0..sources.len()).map(|_| AtomicIsize::new(0)).collect(),
            sheds: (0..sources.len() * REASONS * PRIORITIES)
                .map(|_| AtomicU64::new(0))
                .collect(),
            cuts: (0..sources.len() * CUT_REASONS)
                .map(|_| AtomicU64::new(0))
                .collect(),
        }
    }

    /// The position of `source` among the gate's labels, if it is one of them:
    /// its index in `leases_live` and in `Handles::leases_live`.
    fn source_index(&self, source: &'static str) -> Option<usize> {
        self.sources.iter().position(|&label| label == source)
    }

    /// The index of `(source, reason, priority)` in `sheds` and in `Handles::shed_total`, if
    /// both are known (a gate only reports its own labels; a reason added to
    /// `admit` later, or an observer called by hand, may not be).
    fn slot(&self, source: &'static str, reason: ShedReason, priority: Priority) -> Option<usize> {
        let source = self.source_index(source)?;
        let reason = ShedReason::ALL.iter().position(|&r| r == reason)?;
        Some((source * REASONS + reason) * PRIORITIES + priority_index(priority))
    }

    /// The index of `(source, priority)` in `admissions` and in
    /// `Handles::admitted_total`, if the source is known, as for
    /// [`slot`](Self::slot).
    fn admit_slot(&self, source: &'static str, priority: Priority) -> Option<usize> {
        Some(self.source_index(source)? * PRIORITIES + priority_index(priority))
    }

    /// The index of `(source, reason)` in `cuts` and in `Handles::cuts_total`, if
    /// both are known, as for [`slot`](Self::slot).
    fn cut_slot(&self, source: &'static str, reason: CutReason) -> Option<usize> {
        let source = self.source_index(source)?;
        let reason = CutReason::ALL.iter().position(|&r| r == reason)?;
        Some(source * CUT_REASONS + reason)
    }

    /// Counts `event`, unless its count was handed over already.
    fn count(&self, event: Event) -> Counted {
        // Acquire on the mark: the handles published before it are then visible.
        let added = match event {
            Event::Admit { units, .. } => add_unless_handed_over(&self.in_use, signed(units)),
            Event::Release { units, .. } => add_unless_handed_over(&self.in_use, -signed(units)),
            Event::Admitted { source, priority } => {
                let Some(slot) = self.admit_slot(source, priority) else {
                    return Counted::NoSlot;
                };
                increment_unless_handed_over(&self.admissions[slot])
            }
            Event::LeaseStart { source } | Event::LeaseEnd { source } => {
                let Some(index) = self.source_index(source) else {
                    return Counted::NoSlot;
                };
                let delta = if matches!(event, Event::LeaseStart { .. }) {
                    1
                } else {
                    -1
                };
                add_unless_handed_over(&self.leases_live[index], delta)
            }
            Event::Shed {
                source,
                reason,
                priority,
            } => {
                let Some(slot) = self.slot(source, reason, priority) else {
                    return Counted::NoSlot;
                };
                increment_unless_handed_over(&self.sheds[slot])
            }
            Event::Cut { source, reason } => {
                let Some(slot) = self.cut_slot(source, reason) else {
                    return Counted::NoSlot;
                };
                increment_unless_handed_over(&self.cuts[slot])
            }
        };
        if added {
            Counted::Pending
        } else {
            Counted::HandedOver
        }
    }

    /// Moves every count into `handles` and marks it handed over. Idempotent: a
    /// second call (a thread that lost the race to resolve) finds only marks.
    fn hand_over(&self, handles: &Handles) {
        let in_use = core::iter::once((&self.in_use, &handles.units_in_use));
        let leases_live = self.leases_live.iter().zip(handles.leases_live.iter());
        for (pending, gauge) in in_use.chain(leases_live) {
            let count = pending.swap(GAUGE_HANDED_OVER, Ordering::AcqRel);
            if count != GAUGE_HANDED_OVER && count != 0 {
                gauge.increment(count as f64);
            }
        }
        let sheds = self.sheds.iter().zip(handles.shed_total.iter());
        let cuts = self.cuts.iter().zip(handles.cuts_total.iter());
        let admissions = self.admissions.iter().zip(handles.admitted_total.iter());
        for (pending, counter) in sheds.chain(cuts).chain(admissions) {
            let count = pending.swap(COUNTER_HANDED_OVER, Ordering::AcqRel);
            if count != COUNTER_HANDED_OVER && count != 0 {
                counter.increment(count);
            }
        }
    }

    /// Sets the capacity gauges to the capacity last reported. Re-reads after
    /// setting, so of two threads racing here the gauges end at the later report.
    fn show_capacity(&self, handles: &Handles) {
        let mut capacity = self.capacity.load(Ordering::Acquire);
        loop {
            CapacityReport::unpack(capacity)
                .show(&handles.capacity_units, &handles.capacity_over_budget_units);
            let now = self.capacity.load(Ordering::Acquire);
            if now == capacity {
                return;
            }
            capacity = now;
        }
    }

    /// Sets the overloaded gauge to the state last reported (1 or 0), re-reading
    /// after setting as [`show_capacity`](Self::show_capacity) does.
    fn show_overloaded(&self, gauge: &Gauge) {
        let mut overloaded = self.overloaded.load(Ordering::Acquire);
        loop {
            gauge.set(gauge_value(overloaded));
            let now = self.overloaded.load(Ordering::Acquire);
            if now == overloaded {
                return;
            }
            overloaded = now;
        }
    }
}

/// Adds `delta` to `count` unless it holds [`GAUGE_HANDED_OVER`]; `false` if it
/// did.
fn add_unless_handed_over(count: &AtomicIsize, delta: isize) -> bool {
    count
        .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
            (n != GAUGE_HANDED_OVER).then(|| n + delta)
        })
        .is_ok()
}

/// Adds 1 to a counter's `count` unless it holds [`COUNTER_HANDED_OVER`];
/// `false` if it did.
fn increment_unless_handed_over(count: &AtomicU64) -> bool {
    count
        .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
            (n != COUNTER_HANDED_OVER).then(|| n + 1)
        })
        .is_ok()
}

/// The overloaded gauge's value for a state: 1 or 0.
fn gauge_value(overloaded: bool) -> f64 {
    if overloaded {
        1.0
    } else {
        0.0
    }
}

/// A unit count as a signed delta (capacities are far below `isize::MAX`).
fn signed(units: usize) -> isize {
    isize::try_from(units).unwrap_or(isize::MAX)
}

/// One event, for the path that runs while no handles are resolved.
#[derive(Debug, Clone, Copy)]
enum Event {
    Admit {
        units: usize,
        waited: Duration,
        priority: Priority,
    },
    Release {
        units: usize,
        held: Duration,
    },
    /// One admission, for `admitted_total` (the units and the wait are
    /// [`Admit`](Self::Admit)'s: each event has one count of its own).
    Admitted {
        source: &'static str,
        priority: Priority,
    },
    /// A lease started: `leases_live` of its source goes up by one.
    LeaseStart {
        source: &'static str,
    },
    /// A lease ended: `leases_live` of its source goes down by one.
    LeaseEnd {
        source: &'static str,
    },
    Shed {
        source: &'static str,
        reason: ShedReason,
        priority: Priority,
    },
    Cut {
        source: &'static str,
        reason: CutReason,
    },
}

/// Whether a real recorder is in force on this thread: local, or global. The
/// facade falls back to its zero-sized no-op recorder.
fn recorder_in_force() -> bool {
    metrics::with_recorder(|recorder| core::mem::size_of_val(recorder) != 0)
}

/// The full metric names, built once from the prefix.
#[derive(Debug)]
struct Names {
    units_in_use: SharedString,
    capacity_units: SharedString,
    capacity_over_budget_units: SharedString,
    hold_seconds: SharedString,
    wait_seconds: SharedString,
    shed_total: SharedString,
    overloaded: SharedString,
    leases_ended_total: SharedString,
    lease_hold_seconds: SharedString,
    cuts_total: SharedString,
    admitted_total: SharedString,
    leases_live: SharedString,
    memory_limit_bytes: SharedString,
    memory_working_set_bytes: SharedString,
    memory_allowed_units: SharedString,
}

/// Handles resolved against the first real recorder in force.
#[derive(Debug)]
struct Handles {
    units_in_use: Gauge,
    capacity_units: Gauge,
    capacity_over_budget_units: Gauge,
    hold_seconds: Histogram,
    /// One per class, in [`Priority::ALL`]'s order.
    wait_seconds: [Histogram; PRIORITIES],
    /// One counter per source × reason × class, at `State::slot`.
    shed_total: Box<[Counter]>,
    overloaded: Gauge,
    /// One counter per source × way, at `State::lease_slot`.
    leases_ended_total: Box<[Counter]>,
    /// One per way, in [`LeaseEnd::ALL`]'s order.
    lease_hold_seconds: [Histogram; LEASE_ENDS],
    /// One counter per source × cut reason, at `State::cut_slot`.
    cuts_total: Box<[Counter]>,
    /// One counter per source × class, at `State::admit_slot`.
    admitted_total: Box<[Counter]>,
    /// One gauge per source, at `State::source_index`.
    leases_live: Box<[Gauge]>,
    memory_limit_bytes: Gauge,
    memory_working_set_bytes: Gauge,
    memory_allowed_units: Gauge,
}

/// The ways a lease ends, counted apart: [`LeaseEnd::ALL`].
const LEASE_ENDS: usize = LeaseEnd::ALL.len();

/// The position of `how` in [`LeaseEnd::ALL`].
fn lease_end_index(how: LeaseEnd) -> usize {
    LeaseEnd::ALL
        .iter()
        .position(|&h| h == how)
        .expect("every way is in ALL")
}

/// The label key of a call site (admissions, sheds, leases, cuts).
const SOURCE_LABEL: &str = "source";
/// The label key of a shed's or a cut's reason.
const REASON_LABEL: &str = "reason";
/// The label key of a request's priority class (admissions, sheds and waits).
const PRIORITY_LABEL: &str = "priority";
/// The label key of how a lease ended.
const HOW_LABEL: &str = "how";

impl MetricsObserver {
    /// An observer reporting the metrics of the [table](crate#metrics), each
    /// name starting with `<prefix>_`.
    ///
    /// The prefix should be `snake_case`, naming what the gate admits (e.g.
    /// `upload_sessions`), and be the gate's own: a second live observer of the
    /// same prefix, reporting to the global recorder, panics when its gate is
    /// built (their series would merge). Nothing is registered until the gate starts
    /// the observer.
    #[must_use]
    pub fn new(prefix: impl Into<String>) -> Self {
        let prefix = prefix.into();
        let name = |suffix: &str| SharedString::from(format!("{prefix}_{suffix}"));
        let names = Names {
            units_in_use: name("units_in_use"),
            capacity_units: name("capacity_units"),
            capacity_over_budget_units: name("capacity_over_budget_units"),
            hold_seconds: name("hold_seconds"),
            wait_seconds: name("wait_seconds"),
            shed_total: name("shed_total"),
            overloaded: name("overloaded"),
            leases_ended_total: name("leases_ended_total"),
            lease_hold_seconds: name("lease_hold_seconds"),
            cuts_total: name("cuts_total"),
            admitted_total: name("admitted_total"),
            leases_live: name("leases_live"),
            memory_limit_bytes: name("memory_limit_bytes"),
            memory_working_set_bytes: name("memory_working_set_bytes"),
            memory_allowed_units: name("memory_allowed_units"),
        };
        Self {
            prefix,
            names,
            state: OnceLock::new(),
            handles: OnceLock::new(),
            claimed_in: OnceLock::new(),
        }
    }

    /// The prefix the metric names start with.
    #[must_use]
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    fn describe(&self) {
        let n = &self.names;
        metrics::describe_gauge!(
            n.units_in_use.clone(),
            Unit::Count,
            "Units of the admission gate held now."
        );
        metrics::describe_gauge!(
            n.capacity_units.clone(),
            Unit::Count,
            "Capacity of the admission gate in units: the denominator of units_in_use."
        );
        metrics::describe_gauge!(
            n.capacity_over_budget_units.clone(),
            Unit::Count,
            "Units of the capacity above what its memory budget allows: the max_units \
             floor raised a capacity derived from a memory budget, so the gate may \
             hold more memory than the budget; 0 otherwise."
        );
        metrics::describe_histogram!(
            n.hold_seconds.clone(),
            Unit::Seconds,
            "How long admitted units were held, observed at release."
        );
        metrics::describe_histogram!(
            n.wait_seconds.clone(),
            Unit::Seconds,
            "How long admitted callers waited for their units, per priority class."
        );
        metrics::describe_counter!(
            n.shed_total.clone(),
            Unit::Count,
            "Callers shed (turned away busy) by the admission gate, per call site and \
             reason (wait_budget: the wait budget expired; ceiling: the call's shorter \
             ceiling expired; no_wait: a try_acquire found the units taken; \
             queue_full: max_waiters already parked; overload: waited twice the overload target while the gate \
             was overloaded; hopeless: shed at arrival, its estimated wait longer than \
             it could wait; outranked: shed while parked for a request of a higher \
             priority; memory: shed at arrival, its class past its mark of the memory \
             limit), and priority class."
        );
        metrics::describe_gauge!(
            n.overloaded.clone(),
            Unit::Count,
            "1 while the admission gate is overloaded (from an interval whose shortest \
             wait stayed above its overload target until two intervals in a row in which its \
             queue was seen empty), 0 otherwise; always 0 without an overload target."
        );
        metrics::describe_counter!(
            n.leases_ended_total.clone(),
            Unit::Count,
            "Leases (sessions that span requests) ended, per call site and by how: \
             finished, cancelled, expired (idle past the limit: a client that went \
             away), drained, aged (past the maximum age, however recently touched)."
        );
        metrics::describe_histogram!(
            n.lease_hold_seconds.clone(),
            Unit::Seconds,
            "How long a lease's units were held, observed at its end, by how it ended."
        );
        metrics::describe_counter!(
            n.cuts_total.clone(),
            Unit::Count,
            "Requests cut by a progress rule, per call site and reason (idle: its body \
             delivered nothing for the idle limit; rate: its body came slower than the \
             minimum rate after the grace; response: its client stopped reading the \
             response for the idle limit)."
        );
        metrics::describe_counter!(
            n.admitted_total.clone(),
            Unit::Count,
            "Callers admitted (granted their units) by the admission gate, per call site \
             and priority class; with shed_total, the admission ratio per call site."
        );
        metrics::describe_gauge!(
            n.leases_live.clone(),
            Unit::Count,
            "Leases (sessions that span requests) live now, per call site: started and \
             not yet ended."
        );
        metrics::describe_gauge!(
            n.memory_limit_bytes.clone(),
            Unit::Bytes,
            "The memory limit the gate's memory watch read last (the cgroup's that \
             binds); 0 with no reading."
        );
        metrics::describe_gauge!(
            n.memory_working_set_bytes.clone(),
            Unit::Bytes,
            "The working set the gate's memory watch read last against that limit \
             (usage less inactive file cache); 0 with no reading."
        );
        // Registered with the descriptions (moved by nothing here: a second
        // start keeps the last reading).
        for gauge in [
            &n.memory_limit_bytes,
            &n.memory_working_set_bytes,
            &n.memory_allowed_units,
        ] {
            metrics::gauge!(gauge.clone()).increment(0.0);
        }
        metrics::describe_gauge!(
            n.memory_allowed_units.clone(),
            Unit::Count,
            "Units the memory watch's last reading allows the highest priority class \
             (lower classes stop at lower marks); the capacity in force is the least \
             of this and the configured capacity, never below max_units. 0 with no \
             reading."
        );
    }

    /// The shed counter of `(source, reason, priority)` in the recorder in force.
    fn shed_counter(
        &self,
        source: &'static str,
        reason: ShedReason,
        priority: Priority,
    ) -> Counter {
        metrics::counter!(
            self.names.shed_total.clone(),
            SOURCE_LABEL => source,
            REASON_LABEL => reason.label(),
            PRIORITY_LABEL => priority.label()
        )
    }

    /// The admission counter of `(source, priority)` in the recorder in force.
    fn admitted_counter(&self, source: &'static str, priority: Priority) -> Counter {
        metrics::counter!(
            self.names.admitted_total.clone(),
            SOURCE_LABEL => source,
            PRIORITY_LABEL => priority.label()
        )
    }

    /// The live-leases gauge of `source` in the recorder in force.
    fn leases_live_gauge(&self, source: &'static str) -> Gauge {
        metrics::gauge!(self.names.leases_live.clone(), SOURCE_LABEL => source)
    }

    /// The cut counter of `(source, reason)` in the recorder in force.
    fn cut_counter(&self, source: &'static str, reason: CutReason) -> Counter {
        metrics::counter!(
            self.names.cuts_total.clone(),
            SOURCE_LABEL => source,
            REASON_LABEL => reason.label()
        )
    }

    /// Sets both capacity gauges in the recorder in force.
    fn show_capacity_through_facade(&self, capacity: CapacityReport) {
        capacity.show(
            &metrics::gauge!(self.names.capacity_units.clone()),
            &metrics::gauge!(self.names.capacity_over_budget_units.clone()),
        );
    }

    /// The lease counter of `(source, how)` in the recorder in force.
    fn lease_counter(&self, source: &'static str, how: LeaseEnd) -> Counter {
        metrics::counter!(
            self.names.leases_ended_total.clone(),
            SOURCE_LABEL => source,
            HOW_LABEL => how.label()
        )
    }

    /// The lease hold histogram of `how` in the recorder in force.
    fn lease_hold_histogram(&self, how: LeaseEnd) -> Histogram {
        metrics::histogram!(self.names.lease_hold_seconds.clone(), HOW_LABEL => how.label())
    }

    /// Registers every lease series in the recorder in force: each
    /// `(source, how)` counter at 0, each `how` histogram, each source's live
    /// gauge (moved by nothing: a second start keeps the count).
    fn register_lease_series(&self, state: &State) {
        for &source in state.sources.iter() {
            for how in LeaseEnd::ALL {
                self.lease_counter(source, how).absolute(0);
            }
            self.leases_live_gauge(source).increment(0.0);
        }
        for how in LeaseEnd::ALL {
            drop(self.lease_hold_histogram(how));
        }
    }

    /// The wait histogram of `priority` in the recorder in force.
    fn wait_histogram(&self, priority: Priority) -> Histogram {
        metrics::histogram!(self.names.wait_seconds.clone(), PRIORITY_LABEL => priority.label())
    }

    /// Describes and registers every metric in the recorder in force, each series
    /// at its starting value: the capacity, the overload state (0 at start), and 0
    /// for every counter. Used when no handles are kept (a second gate, or no
    /// real recorder yet).
    fn register_through_facade(&self, state: &State) {
        self.describe();
        self.show_capacity_through_facade(CapacityReport::unpack(
            state.capacity.load(Ordering::Acquire),
        ));
        metrics::gauge!(self.names.overloaded.clone())
            .set(gauge_value(state.overloaded.load(Ordering::Acquire)));
        for &source in state.sources.iter() {
            for reason in ShedReason::ALL {
                for priority in Priority::ALL {
                    self.shed_counter(source, reason, priority).absolute(0);
                }
            }
            for priority in Priority::ALL {
                self.admitted_counter(source, priority).absolute(0);
            }
        }
        self.register_lease_series(state);
        for &source in state.sources.iter() {
            for reason in CutReason::ALL {
                self.cut_counter(source, reason).absolute(0);
            }
        }
    }

    /// Resolves the handles against the recorder in force (the first thread to get
    /// here wins; the others use its handles), hands the counts over to them and
    /// shows the capacity and the overload state.
    fn resolve(&self, state: &State) -> &Handles {
        self.describe();
        let n = &self.names;
        let resolved = Handles {
            units_in_use: metrics::gauge!(n.units_in_use.clone()),
            capacity_units: metrics::gauge!(n.capacity_units.clone()),
            capacity_over_budget_units: metrics::gauge!(n.capacity_over_budget_units.clone()),
            hold_seconds: metrics::histogram!(n.hold_seconds.clone()),
            wait_seconds: Priority::ALL.map(|priority| self.wait_histogram(priority)),
            shed_total: state
                .sources
                .iter()
                .flat_map(|&source| {
                    ShedReason::ALL.into_iter().flat_map(move |reason| {
                        Priority::ALL.map(|priority| self.shed_counter(source, reason, priority))
                    })
                })
                .collect(),
            overloaded: metrics::gauge!(n.overloaded.clone()),
            leases_ended_total: state
                .sources
                .iter()
                .flat_map(|&source| LeaseEnd::ALL.map(|how| self.lease_counter(source, how)))
                .collect(),
            lease_hold_seconds: LeaseEnd::ALL.map(|how| self.lease_hold_histogram(how)),
            cuts_total: state
                .sources
                .iter()
                .flat_map(|&source| CutReason::ALL.map(|reason| self.cut_counter(source, reason)))
                .collect(),
            admitted_total: state
                .sources
                .iter()
                .flat_map(|&source| {
                    Priority::ALL.map(|priority| self.admitted_counter(source, priority))
                })
                .collect(),
            leases_live: state
                .sources
                .iter()
                .map(|&source| self.leases_live_gauge(source))
                .collect(),
            memory_limit_bytes: metrics::gauge!(n.memory_limit_bytes.clone()),
            memory_working_set_bytes: metrics::gauge!(n.memory_working_set_bytes.clone()),
            memory_allowed_units: metrics::gauge!(n.memory_allowed_units.clone()),
        };
        // Every series exists from now on: each gauge at 0 until the hand-over
        // adds the units (live leases) counted so far, every counter at 0 until
        // its sheds (cuts, admissions) are added.
        for gauge in core::iter::once(&resolved.units_in_use).chain(&resolved.leases_live) {
            gauge.increment(0.0);
        }
        for counter in resolved
            .shed_total
            .iter()
            .chain(&resolved.leases_ended_total)
            .chain(&resolved.cuts_total)
            .chain(&resolved.admitted_total)
        {
            counter.absolute(0);
        }
        // Published before the marks `hand_over` sets, so an event that finds a
        // mark finds the handles.
        let handles = self.handles.get_or_init(|| resolved);
        state.hand_over(handles);
        // Pairs with the fences in `on_capacity` and `on_overload`: either the load
        // in `show_capacity` (`show_overloaded`) sees a value stored before that
        // fence, or that thread sees the handles and shows it itself.
        fence(Ordering::SeqCst);
        state.show_capacity(handles);
        state.show_overloaded(&handles.overloaded);
        handles
    }

    /// An event while no handles were resolved (as this thread last saw): count
    /// it; then, if handles exist or a recorder is now in force, the count goes
    /// (or went) to them with the hand-over, and the event's observation is
    /// recorded; otherwise the event is emitted through the facade (which reaches a
    /// zero-sized recorder of the application's, if that is what is in force).
    fn unresolved(&self, event: Event) {
        let Some(state) = self.state.get() else {
            // Before any `on_start`: nothing to catch up with later.
            self.through_facade(event);
            return;
        };
        let counted = state.count(event);
        let handles = match self.handles.get() {
            Some(handles) => handles,
            None if recorder_in_force() => self.resolve(state),
            None => {
                self.through_facade(event);
                return;
            }
        };
        match counted {
            // Counted before the hand-over: the counts went with it (or go with it,
            // in the thread resolving right now, together with the admission of any
            // units this event releases). The observation is left.
            Counted::Pending => match event {
                Event::Admit {
                    waited, priority, ..
                } => handles.wait_seconds[priority_index(priority)].record(waited.as_secs_f64()),
                Event::Release { held, .. } => handles.hold_seconds.record(held.as_secs_f64()),
                Event::Admitted { .. }
                | Event::LeaseStart { .. }
                | Event::LeaseEnd { .. }
                | Event::Shed { .. }
                | Event::Cut { .. } => {}
            },
            Counted::HandedOver | Counted::NoSlot => self.apply(handles, event),
        }
    }

    /// An event through the facade's macros, to whatever recorder is in force.
    fn through_facade(&self, event: Event) {
        let n = &self.names;
        match event {
            Event::Admit {
                units,
                waited,
                priority,
            } => {
                metrics::gauge!(n.units_in_use.clone()).increment(units as f64);
                self.wait_histogram(priority).record(waited.as_secs_f64());
            }
            Event::Release { units, held } => {
                metrics::gauge!(n.units_in_use.clone()).decrement(units as f64);
                metrics::histogram!(n.hold_seconds.clone()).record(held.as_secs_f64());
            }
            Event::Admitted { source, priority } => {
                self.admitted_counter(source, priority).increment(1);
            }
            Event::LeaseStart { source } => self.leases_live_gauge(source).increment(1.0),
            Event::LeaseEnd { source } => self.leases_live_gauge(source).decrement(1.0),
            Event::Shed {
                source,
                reason,
                priority,
            } => self.shed_counter(source, reason, priority).increment(1),
            Event::Cut { source, reason } => self.cut_counter(source, reason).increment(1),
        }
    }

    /// An event on resolved handles.
    fn apply(&self, h: &Handles, event: Event) {
        match event {
            Event::Admit {
                units,
                waited,
                priority,
            } => {
                h.units_in_use.increment(units as f64);
                h.wait_seconds[priority_index(priority)].record(waited.as_secs_f64());
            }
            Event::Release { units, held } => {
                h.units_in_use.decrement(units as f64);
                h.hold_seconds.record(held.as_secs_f64());
            }
            Event::Admitted { source, priority } => {
                match self
                    .state
                    .get()
                    .and_then(|s| s.admit_slot(source, priority))
                {
                    Some(slot) => h.admitted_total[slot].increment(1),
                    // A label the source type did not list at start: still counted.
                    None => self.admitted_counter(source, priority).increment(1),
                }
            }
            Event::LeaseStart { source } | Event::LeaseEnd { source } => {
                let gauge = self.state.get().and_then(|s| s.source_index(source));
                let delta = if matches!(event, Event::LeaseStart { .. }) {
                    1.0
                } else {
                    -1.0
                };
                match gauge {
                    Some(index) => h.leases_live[index].increment(delta),
                    // A label the source type did not list at start: still counted.
                    None => self.leases_live_gauge(source).increment(delta),
                }
            }
            Event::Shed {
                source,
                reason,
                priority,
            } => {
                match self
                    .state
                    .get()
                    .and_then(|s| s.slot(source, reason, priority))
                {
                    Some(slot) => h.shed_total[slot].increment(1),
                    // A label the source type did not list at start: still counted.
                    None => self.shed_counter(source, reason, priority).increment(1),
                }
            }
            Event::Cut { source, reason } => {
                match self.state.get().and_then(|s| s.cut_slot(source, reason)) {
                    Some(slot) => h.cuts_total[slot].increment(1),
                    // A label the source type did not list at start: still counted.
                    None => self.cut_counter(source, reason).increment(1),
                }
            }
        }
    }

    fn event(&self, event: Event) {
        match self.handles.get() {
            Some(handles) => self.apply(handles, event),
            None => self.unresolved(event),
        }
    }
}

impl admit::Observer for MetricsObserver {
    fn on_start(&self, event: &StartEvent<'_>) {
        let capacity = CapacityReport::new(event.capacity, event.budget_units);
        let sources = event.sources;
        let mut first = false;
        let state = self.state.get_or_init(|| {
            first = true;
            State::new(capacity, sources)
        });
        if first && recorder_in_force() {
            if let Some(recorder) = global_recorder_in_force() {
                claim_prefix(&self.prefix, recorder);
                let _ = self.claimed_in.set(recorder);
            }
        }
        if !first {
            // A second gate on this observer: the labels and handles stay the first
            // one's; the capacity and the overload state are the last reported (a
            // gate starts not overloaded).
            state.capacity.store(capacity.pack(), Ordering::Release);
            state.overloaded.store(false, Ordering::Release);
        }
        if let Some(handles) = self.handles.get() {
            self.describe();
            state.show_capacity(handles);
            state.show_overloaded(&handles.overloaded);
        } else if recorder_in_force() {
            self.resolve(state);
        } else {
            // No recorder yet: describe and register through the facade anyway (a
            // zero-sized recorder of the application's gets them), and wait for one.
            self.register_through_facade(state);
        }
    }

    fn on_admit(&self, event: &AdmitEvent) {
        self.event(Event::Admit {
            units: event.units,
            waited: event.waited,
            priority: event.priority,
        });
        self.event(Event::Admitted {
            source: event.source,
            priority: event.priority,
        });
    }

    fn on_release(&self, event: &ReleaseEvent) {
        self.event(Event::Release {
            units: event.units,
            held: event.held,
        });
    }

    fn on_shed(&self, event: &ShedEvent) {
        self.event(Event::Shed {
            source: event.source,
            reason: event.reason,
            priority: event.priority,
        });
    }

    /// Counted as a shed is: on the handles, or, before any recorder, in the
    /// observer's own count that a late recorder is caught up with.
    fn on_cut(&self, event: &CutEvent) {
        self.event(Event::Cut {
            source: event.source,
            reason: event.reason,
        });
    }

    fn on_capacity(&self, event: &CapacityEvent) {
        let capacity = CapacityReport::new(event.capacity, event.budget_units);
        let Some(state) = self.state.get() else {
            self.show_capacity_through_facade(capacity);
            return;
        };
        state.capacity.store(capacity.pack(), Ordering::Release);
        // Pairs with the fence in `resolve`: a resolver whose `show_capacity` missed
        // this store published its handles before that fence, so they are seen here.
        fence(Ordering::SeqCst);
        match self.handles.get() {
            Some(handles) => state.show_capacity(handles),
            None if recorder_in_force() => {
                self.resolve(state);
            }
            None => self.show_capacity_through_facade(capacity),
        }
    }

    /// Set at every reading (on the handles, or through the facade before
    /// any recorder): the last reading is the value, nothing to catch up.
    fn on_memory(&self, event: &MemoryEvent) {
        let (limit, working_set) = event
            .reading
            .map_or((0, 0), |reading| (reading.limit, reading.working_set));
        let allowed = event.allowed_units.unwrap_or(0);
        let show = |limit_gauge: &Gauge, working_set_gauge: &Gauge, allowed_gauge: &Gauge| {
            limit_gauge.set(limit as f64);
            working_set_gauge.set(working_set as f64);
            allowed_gauge.set(allowed as f64);
        };
        match self.handles.get() {
            Some(h) => show(
                &h.memory_limit_bytes,
                &h.memory_working_set_bytes,
                &h.memory_allowed_units,
            ),
            None => {
                let n = &self.names;
                show(
                    &metrics::gauge!(n.memory_limit_bytes.clone()),
                    &metrics::gauge!(n.memory_working_set_bytes.clone()),
                    &metrics::gauge!(n.memory_allowed_units.clone()),
                );
            }
        }
    }

    fn on_overload(&self, event: &OverloadEvent) {
        let overloaded = event.overloaded;
        let Some(state) = self.state.get() else {
            metrics::gauge!(self.names.overloaded.clone()).set(gauge_value(overloaded));
            return;
        };
        state.overloaded.store(overloaded, Ordering::Release);
        // Pairs with the fence in `resolve`, as in `on_capacity`.
        fence(Ordering::SeqCst);
        match self.handles.get() {
            Some(handles) => state.show_overloaded(&handles.overloaded),
            None if recorder_in_force() => {
                self.resolve(state);
            }
            None => {
                metrics::gauge!(self.names.overloaded.clone()).set(gauge_value(overloaded));
            }
        }
    }

    /// Counted as units in use are: on the handles, or, before any recorder,
    /// in the observer's own count of live leases that a late recorder is
    /// caught up with.
    fn on_lease_start(&self, event: &LeaseStartEvent) {
        self.event(Event::LeaseStart {
            source: event.source,
        });
    }

    /// The live count goes down by one, as a start's went up. The end itself
    /// is counted on the handles, as every other event (resolved now if a
    /// recorder has come since the start); before any recorder, through the
    /// facade (lost to none, as any metric emitted then).
    fn on_lease_end(&self, event: &LeaseEndEvent) {
        self.event(Event::LeaseEnd {
            source: event.source,
        });
        let handles = match (self.handles.get(), self.state.get()) {
            (Some(handles), _) => Some(handles),
            (None, Some(state)) if recorder_in_force() => Some(self.resolve(state)),
            _ => None,
        };
        let slot = self.state.get().and_then(|state| {
            Some(state.source_index(event.source)? * LEASE_ENDS + lease_end_index(event.how))
        });
        match (handles, slot) {
            (Some(h), Some(slot)) => {
                h.leases_ended_total[slot].increment(1);
                h.lease_hold_seconds[lease_end_index(event.how)].record(event.held.as_secs_f64());
            }
            _ => {
                self.lease_counter(event.source, event.how).increment(1);
                self.lease_hold_histogram(event.how)
                    .record(event.held.as_secs_f64());
            }
        }
    }
}

// Every public type is `Send + Sync`, checked at compile time.
const _: fn() = || {
    fn check<T: Send + Sync>() {}
    check::<MetricsObserver>();
};
