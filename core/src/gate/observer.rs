//! Event hooks a [`Gate`](crate::Gate) calls, so a metrics adapter can report what it
//! does without the core knowing any metrics crate.
//!
//! Each hook takes one event struct. The structs are `#[non_exhaustive]`: the gate
//! builds them, an observer reads their fields, and a field added later breaks no
//! implementor.
//!
//! # Ordering guarantees
//!
//! - [`Observer::on_admit`] is called *after* the units were granted, and
//!   [`Observer::on_release`] *before* they return to the semaphore. A gauge of units
//!   in use kept by these two hooks therefore never reads above the capacity, but
//!   for a shrink below the units in use, until the units held above the new
//!   capacity come back (nothing held is revoked).
//! - Exactly one of `on_admit` or `on_shed` is called per acquire that ends in a
//!   grant or a shed; cancellations, oversize requests and closes call neither.
//! - Every admitted unit is reported released exactly once: by its permit's
//!   release, or by a [`forget`](crate::GatePermit::forget) (then `on_capacity`
//!   follows); splitting and merging permits report nothing.
//! - A hook that panics ends the operation that called it with that panic, and
//!   the gate's own counts (`in_use`, the units held per source, a drain's report,
//!   the capacity) stay exact; the hooks that operation would have called after
//!   it are skipped. A panicking `on_admit` returns the units with no
//!   `on_release` (no permit was made); a panicking `on_release` of a `forget`
//!   skips `on_capacity`, the units forgotten all the same.
//! - With an overload target, `on_overload` is called once per change of the
//!   overload state, by the thread that changed it, and that thread reads the
//!   state again afterwards and reports it once more if a racing change reached
//!   the observer first: the last event an observer hears says the state in force.

use core::time::Duration;

use super::priority::Priority;

/// Hooks for a gate's events. Every method has a no-op default; `()` is the
/// observer that observes nothing.
pub trait Observer: Send + Sync + 'static {
    /// Once, when the gate is built.
    fn on_start(&self, event: &StartEvent<'_>) {
        let _ = event;
    }

    /// A caller was granted its units.
    fn on_admit(&self, event: &AdmitEvent) {
        let _ = event;
    }

    /// A permit's units are being released; they return to the semaphore right
    /// after this returns.
    fn on_release(&self, event: &ReleaseEvent) {
        let _ = event;
    }

    /// A caller was shed: told [`GateError::Busy`](crate::GateError::Busy).
    fn on_shed(&self, event: &ShedEvent) {
        let _ = event;
    }

    /// The gate's capacity changed (a resize, or a forgotten permit).
    fn on_capacity(&self, event: &CapacityEvent) {
        let _ = event;
    }

    /// The gate became overloaded, or stopped being so (gates with an
    /// [`overload_target`] only).
    #[doc = alloc_item_link!("overload_target", "GateBuilder::overload_target", "struct.GateBuilder.html#method.overload_target")]
    fn on_overload(&self, event: &OverloadEvent) {
        let _ = event;
    }

    /// The [memory watch] read the process's memory (gates with a memory watch
    /// only, once an interval): the reading, what it allows, the capacity in
    /// force.
    #[doc = alloc_item_link!("memory watch", "MemoryWatch", "struct.MemoryWatch.html")]
    fn on_memory(&self, event: &MemoryEvent) {
        let _ = event;
    }

    /// A lease started (`Leases::insert`): its units
    /// are held by the table from now until [`on_lease_end`](Self::on_lease_end),
    /// which follows once for it. With that hook, a gauge of live leases.
    fn on_lease_start(&self, event: &LeaseStartEvent) {
        let _ = event;
    }

    /// A lease ended: its value was dropped, and its units are released right
    /// after this returns (their own [`on_release`](Self::on_release) follows).
    /// Once per lease, whichever way it ended.
    fn on_lease_end(&self, event: &LeaseEndEvent) {
        let _ = event;
    }

    /// A holder was cut by a progress rule: a request whose client stopped
    /// sending its body, sent it too slowly, or stopped reading its response
    /// (admit-tower's rule). Its units, if it held any, are released after the
    /// handler's buffers are gone, with their own
    /// [`on_release`](Self::on_release). Once per cut request.
    fn on_cut(&self, event: &CutEvent) {
        let _ = event;
    }
}

/// [`Observer::on_start`]: the gate was built.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct StartEvent<'a> {
    /// The capacity in units.
    pub capacity: usize,
    /// Every label the gate's [`Source`](crate::Source) type can produce, so
    /// per-source series can be registered at zero.
    pub sources: &'a [&'static str],
    /// The overload target, if the gate has one.
    pub overload_target: Option<Duration>,
    /// The units the memory budget allows, for a capacity from
    /// [`Capacity::from_memory_budget`](crate::Capacity::from_memory_budget).
    /// Below `capacity` when the builder's `max_units` floor raised it: the gate
    /// may then hold more memory than the budget.
    pub budget_units: Option<usize>,
}

/// [`Observer::on_admit`]: a caller was granted its units.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct AdmitEvent {
    /// The call site.
    pub source: &'static str,
    /// The units granted.
    pub units: usize,
    /// How long it waited (zero when granted at once).
    pub waited: Duration,
    /// Its priority class.
    pub priority: Priority,
}

/// [`Observer::on_release`]: a permit's units are being released.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct ReleaseEvent {
    /// The call site the units were acquired for.
    pub source: &'static str,
    /// The units released.
    pub units: usize,
    /// How long they were held.
    pub held: Duration,
    /// The priority class they were admitted with.
    pub priority: Priority,
}

/// [`Observer::on_lease_start`]: a lease started.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct LeaseStartEvent {
    /// The call site its units were acquired for.
    pub source: &'static str,
    /// Its units.
    pub units: usize,
    /// The priority class its units were admitted with.
    pub priority: Priority,
}

impl LeaseStartEvent {
    /// A lease's start, of the default class ([`Priority::Critical`]).
    #[must_use]
    pub const fn new(source: &'static str, units: usize) -> Self {
        Self {
            source,
            units,
            priority: Priority::Critical,
        }
    }

    /// The same, of class `priority`.
    #[must_use]
    pub const fn with_priority(mut self, priority: Priority) -> Self {
        self.priority = priority;
        self
    }
}

/// [`Observer::on_lease_end`]: a lease ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct LeaseEndEvent {
    /// The call site its units were acquired for.
    pub source: &'static str,
    /// Its units.
    pub units: usize,
    /// How long its units were held, from their admission to the lease's end.
    pub held: Duration,
    /// How it ended.
    pub how: LeaseEnd,
    /// The priority class its units were admitted with.
    pub priority: Priority,
    /// How long past its deadline it ended, when the table's driver or a
    /// request found it due; zero for an end by its owner or at its check-in.
    /// A driver that runs keeps this near zero: seconds mean it is late or
    /// not running.
    pub late: Duration,
}

impl LeaseEndEvent {
    /// A lease's end, of the default class ([`Priority::Critical`]).
    #[must_use]
    pub const fn new(source: &'static str, units: usize, held: Duration, how: LeaseEnd) -> Self {
        Self {
            source,
            units,
            held,
            how,
            priority: Priority::Critical,
            late: Duration::ZERO,
        }
    }

    /// The same, ended `late` past its deadline.
    #[must_use]
    pub const fn with_late(mut self, late: Duration) -> Self {
        self.late = late;
        self
    }

    /// The same, of class `priority`.
    #[must_use]
    pub const fn with_priority(mut self, priority: Priority) -> Self {
        self.priority = priority;
        self
    }
}

/// How a lease ended: each lease ends exactly one way.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum LeaseEnd {
    /// Its owner finished it (`Lease::finish`): an upload's last `PUT`.
    Finished,
    /// Its owner cancelled it (`Lease::cancel`): a `DELETE`.
    Cancelled,
    /// It stayed idle past its idle limit: its client went away.
    Expired,
    /// A drain ended it while idle (`Leases::drain`).
    Drained,
    /// It outlived its maximum age (`Leases::max_age`), however recently it was
    /// touched: ended as soon as nobody held it checked out.
    Aged,
}

impl LeaseEnd {
    /// Every way, in declaration order.
    pub const ALL: [LeaseEnd; 5] = [
        LeaseEnd::Finished,
        LeaseEnd::Cancelled,
        LeaseEnd::Expired,
        LeaseEnd::Drained,
        LeaseEnd::Aged,
    ];

    /// Its metric label value: `finished`, `cancelled`, `expired`, `drained`,
    /// `aged`.
    #[must_use]
    pub const fn label(self) -> &'static str {
        match self {
            Self::Finished => "finished",
            Self::Cancelled => "cancelled",
            Self::Expired => "expired",
            Self::Drained => "drained",
            Self::Aged => "aged",
        }
    }
}

/// [`Observer::on_cut`]: a progress rule cut a holder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct CutEvent {
    /// The call site.
    pub source: &'static str,
    /// The units it held: 0 for a request that works on a lease (the lease
    /// holds the units) or that was watched without units.
    pub units: usize,
    /// Which rule cut it.
    pub reason: CutReason,
    /// How long the rule had watched it (from the first read of its body, or
    /// its response's first frame) when it was cut.
    pub watched: Duration,
}

impl CutEvent {
    /// A cut.
    #[must_use]
    pub const fn new(
        source: &'static str,
        units: usize,
        reason: CutReason,
        watched: Duration,
    ) -> Self {
        Self {
            source,
            units,
            reason,
            watched,
        }
    }
}

/// Why a progress rule cut a holder: each cut has one reason.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CutReason {
    /// Its request body delivered nothing for the idle limit while the handler
    /// waited for it.
    Idle,
    /// Its request body delivered less than the minimum rate after the grace.
    Rate,
    /// Its client stopped reading the response for the idle limit.
    Response,
}

impl CutReason {
    /// Every reason, for registering per-reason series up front.
    pub const ALL: [CutReason; 3] = [CutReason::Idle, CutReason::Rate, CutReason::Response];

    /// A stable `snake_case` label: `"idle"`, `"rate"` or `"response"`.
    #[must_use]
    pub const fn label(self) -> &'static str {
        match self {
            Self::Idle => "idle",
            Self::Rate => "rate",
            Self::Response => "response",
        }
    }
}

/// [`Observer::on_shed`]: a caller was shed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct ShedEvent {
    /// The call site.
    pub source: &'static str,
    /// The units it asked for.
    pub units: usize,
    /// How long it waited before it was shed (zero when shed at arrival).
    pub waited: Duration,
    /// The limit that turned it away.
    pub reason: ShedReason,
    /// The `Retry-After` it was told: when a request of its units and class
    /// would get in.
    pub retry_after: Duration,
    /// Its priority class.
    pub priority: Priority,
    /// The gate's estimate, at the shed, of how long a request of these units
    /// arriving then would wait; `None` before the gate has seen a hold. See
    /// [`Gate::estimated_wait`].
    #[doc = alloc_item_link!("Gate::estimated_wait", "Gate::estimated_wait", "struct.Gate.html#method.estimated_wait")]
    pub estimated_wait: Option<Duration>,
}

/// [`Observer::on_capacity`]: the capacity changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct CapacityEvent {
    /// The capacity now, in units.
    pub capacity: usize,
    /// The units the memory budget in force allows (the last one given to the
    /// builder or to [`Gate::resize`]), as for [`StartEvent::budget_units`].
    #[doc = alloc_item_link!("Gate::resize", "Gate::resize", "struct.Gate.html#method.resize")]
    pub budget_units: Option<usize>,
}

/// A memory limit and the working set counted against it, in bytes: a reading
/// of the memory watch (`process_memory_use` reads the process's cgroup).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct MemoryUse {
    /// The limit.
    pub limit: u64,
    /// What is counted against it: a cgroup's usage less its inactive file
    /// cache.
    pub working_set: u64,
}

impl MemoryUse {
    /// A reading of `working_set` bytes against `limit` (for a source of your
    /// own, and tests).
    #[must_use]
    pub const fn new(limit: u64, working_set: u64) -> Self {
        Self { limit, working_set }
    }
}

/// [`Observer::on_memory`]: a reading of the memory watch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct MemoryEvent {
    /// The limit and working set read; `None` when the source had none (no
    /// limit, a file gone): the gate keeps its configured capacity until a
    /// reading comes back.
    pub reading: Option<MemoryUse>,
    /// The units the reading allows the highest class (`CriticalPlus`), each
    /// lower class a little fewer; `None` with no reading.
    pub allowed_units: Option<usize>,
    /// The capacity in force after the reading: the configured one, lowered to
    /// the allowed units but not below `max_units`.
    pub capacity: usize,
}

impl MemoryEvent {
    /// A reading.
    #[must_use]
    pub const fn new(
        reading: Option<MemoryUse>,
        allowed_units: Option<usize>,
        capacity: usize,
    ) -> Self {
        Self {
            reading,
            allowed_units,
            capacity,
        }
    }
}

/// [`Observer::on_overload`]: the overload rule started or stopped holding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct OverloadEvent {
    /// Whether the gate is overloaded from now on.
    pub overloaded: bool,
    /// The shortest wait seen over the interval that decided it.
    pub shortest_wait: Duration,
    /// The interval it was seen over.
    pub interval: Duration,
    /// The gate's overload target.
    pub target: Duration,
}

// Constructors, for the tests of an observer and for observers that wrap others:
// fields added later get a default here, so these calls keep compiling.

impl<'a> StartEvent<'a> {
    /// A start without an overload target.
    #[must_use]
    pub const fn new(capacity: usize, sources: &'a [&'static str]) -> Self {
        Self {
            capacity,
            sources,
            overload_target: None,
            budget_units: None,
        }
    }

    /// The same, with an overload target.
    #[must_use]
    pub const fn with_overload_target(mut self, target: Duration) -> Self {
        self.overload_target = Some(target);
        self
    }

    /// The same, with the units a memory budget allows.
    #[must_use]
    pub const fn with_budget_units(mut self, units: usize) -> Self {
        self.budget_units = Some(units);
        self
    }
}

impl AdmitEvent {
    /// An admission, of the default class ([`Priority::Critical`]).
    #[must_use]
    pub const fn new(source: &'static str, units: usize, waited: Duration) -> Self {
        Self {
            source,
            units,
            waited,
            priority: Priority::Critical,
        }
    }

    /// The same, of class `priority`.
    #[must_use]
    pub const fn with_priority(mut self, priority: Priority) -> Self {
        self.priority = priority;
        self
    }
}

impl ReleaseEvent {
    /// A release, of the default class ([`Priority::Critical`]).
    #[must_use]
    pub const fn new(source: &'static str, units: usize, held: Duration) -> Self {
        Self {
            source,
            units,
            held,
            priority: Priority::Critical,
        }
    }

    /// The same, of class `priority`.
    #[must_use]
    pub const fn with_priority(mut self, priority: Priority) -> Self {
        self.priority = priority;
        self
    }
}

impl ShedEvent {
    /// A shed with no estimate.
    #[must_use]
    pub const fn new(
        source: &'static str,
        units: usize,
        waited: Duration,
        reason: ShedReason,
        retry_after: Duration,
    ) -> Self {
        Self {
            source,
            units,
            waited,
            reason,
            retry_after,
            priority: Priority::Critical,
            estimated_wait: None,
        }
    }

    /// The same, of class `priority` (the default is [`Priority::Critical`]).
    #[must_use]
    pub const fn with_priority(mut self, priority: Priority) -> Self {
        self.priority = priority;
        self
    }

    /// The same, with the gate's estimate.
    #[must_use]
    pub const fn with_estimated_wait(mut self, estimated_wait: Duration) -> Self {
        self.estimated_wait = Some(estimated_wait);
        self
    }
}

impl CapacityEvent {
    /// A capacity change.
    #[must_use]
    pub const fn new(capacity: usize) -> Self {
        Self {
            capacity,
            budget_units: None,
        }
    }

    /// The same, with the units a memory budget allows.
    #[must_use]
    pub const fn with_budget_units(mut self, units: usize) -> Self {
        self.budget_units = Some(units);
        self
    }
}

impl OverloadEvent {
    /// A change of the overload state.
    #[must_use]
    pub const fn new(
        overloaded: bool,
        shortest_wait: Duration,
        interval: Duration,
        target: Duration,
    ) -> Self {
        Self {
            overloaded,
            shortest_wait,
            interval,
            target,
        }
    }
}

/// Why a caller was shed: the limit that turned it away.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ShedReason {
    /// Its wait budget expired while it waited.
    WaitBudget,
    /// Its [`ceiling`], shorter than the wait budget, expired while it waited.
    #[doc = alloc_item_link!("ceiling", "GateAcquire::ceiling", "struct.GateAcquire.html#method.ceiling")]
    Ceiling,
    /// A [`try_acquire`], which never waits, found the units not free at once.
    #[doc = alloc_item_link!("try_acquire", "Gate::try_acquire", "struct.Gate.html#method.try_acquire")]
    NoWait,
    /// [`max_waiters`] requests were already parked: shed at once, without parking.
    #[doc = alloc_item_link!("max_waiters", "GateBuilder::max_waiters", "struct.GateBuilder.html#method.max_waiters")]
    QueueFull,
    /// The gate was overloaded (a standing queue) and the request had waited as
    /// long as an overloaded gate lets anyone wait: twice the
    /// [`overload_target`].
    #[doc = alloc_item_link!("overload_target", "GateBuilder::overload_target", "struct.GateBuilder.html#method.overload_target")]
    Overload,
    /// Shed at arrival, without parking: the units queued ahead of it, at the pace
    /// units come back, would not have been free within the longest it could wait
    /// (budget, ceiling, or the overload cap). Only with an [`overload_target`].
    #[doc = alloc_item_link!("overload_target", "GateBuilder::overload_target", "struct.GateBuilder.html#method.overload_target")]
    Hopeless,
    /// Shed while parked, to make room for a request of a higher
    /// [`Priority`]: the gate sheds the lowest class first.
    Outranked,
    /// Shed at arrival, without parking: by the [memory watch]'s last reading,
    /// its units would take its class past its mark of the memory limit.
    #[doc = alloc_item_link!("memory watch", "MemoryWatch", "struct.MemoryWatch.html")]
    Memory,
}

impl ShedReason {
    /// Every reason, for registering per-reason series up front.
    pub const ALL: [ShedReason; 8] = [
        ShedReason::WaitBudget,
        ShedReason::Ceiling,
        ShedReason::NoWait,
        ShedReason::QueueFull,
        ShedReason::Overload,
        ShedReason::Hopeless,
        ShedReason::Outranked,
        ShedReason::Memory,
    ];

    /// A stable `snake_case` label: `"wait_budget"`, `"ceiling"`, `"no_wait"`,
    /// `"queue_full"`, `"overload"`, `"hopeless"`, `"outranked"` or `"memory"`.
    #[must_use]
    pub fn label(self) -> &'static str {
        match self {
            Self::WaitBudget => "wait_budget",
            Self::Ceiling => "ceiling",
            Self::NoWait => "no_wait",
            Self::QueueFull => "queue_full",
            Self::Overload => "overload",
            Self::Hopeless => "hopeless",
            Self::Outranked => "outranked",
            Self::Memory => "memory",
        }
    }
}

impl Observer for () {}

#[cfg(feature = "alloc")]
impl<O: Observer + ?Sized> Observer for alloc::sync::Arc<O> {
    fn on_start(&self, event: &StartEvent<'_>) {
        (**self).on_start(event);
    }
    fn on_admit(&self, event: &AdmitEvent) {
        (**self).on_admit(event);
    }
    fn on_release(&self, event: &ReleaseEvent) {
        (**self).on_release(event);
    }
    fn on_shed(&self, event: &ShedEvent) {
        (**self).on_shed(event);
    }
    fn on_capacity(&self, event: &CapacityEvent) {
        (**self).on_capacity(event);
    }
    fn on_overload(&self, event: &OverloadEvent) {
        (**self).on_overload(event);
    }
    fn on_memory(&self, event: &MemoryEvent) {
        (**self).on_memory(event);
    }
    fn on_lease_start(&self, event: &LeaseStartEvent) {
        (**self).on_lease_start(event);
    }
    fn on_lease_end(&self, event: &LeaseEndEvent) {
        (**self).on_lease_end(event);
    }
    fn on_cut(&self, event: &CutEvent) {
        (**self).on_cut(event);
    }
}
