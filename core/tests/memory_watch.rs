//! The memory watch on virtual time, with an injected source: the capacity in
//! force follows the readings (rising, falling, oscillating around a mark), a
//! class past its mark is shed at arrival for memory, a source that fails
//! falls back to the arithmetic and says so, resizes compose, nothing admitted
//! is revoked and every unit comes back.

#![cfg(feature = "std")]

mod support;

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use admit::{
    Capacity, ConfigError, Gate, GateError, MemoryEvent, MemoryUse, MemoryWatch, Observer,
    Priority, ShedEvent, ShedReason,
};
use support::{ManualTimer, SpawningTimer, Src};

const MIB: u64 = 1 << 20;
const UNIT: u64 = 8 * MIB;
const LIMIT: u64 = 160 * MIB;
const INTERVAL: Duration = Duration::from_millis(250);

/// Moves the clock one interval on and lets the watch read.
fn next_reading(timer: &SpawningTimer) {
    timer.clock().advance(INTERVAL);
    timer.run();
}

/// What the gate told of memory and sheds.
#[derive(Default)]
struct Heard {
    memory: Mutex<Vec<MemoryEvent>>,
    sheds: Mutex<Vec<ShedEvent>>,
}

impl Observer for Heard {
    fn on_memory(&self, event: &MemoryEvent) {
        self.memory.lock().unwrap().push(*event);
    }
    fn on_shed(&self, event: &ShedEvent) {
        self.sheds.lock().unwrap().push(*event);
    }
}

impl Heard {
    fn last_memory(&self) -> MemoryEvent {
        *self.memory.lock().unwrap().last().expect("a reading")
    }
    fn last_shed(&self) -> ShedEvent {
        *self.sheds.lock().unwrap().last().expect("a shed")
    }
}

/// The working set the source reports next (`None`: the source fails).
#[derive(Clone)]
struct Source(Arc<Mutex<Option<u64>>>);

impl Source {
    fn new(ws_mib: u64) -> Self {
        Self(Arc::new(Mutex::new(Some(ws_mib * MIB))))
    }
    fn set(&self, ws_mib: u64) {
        *self.0.lock().unwrap() = Some(ws_mib * MIB);
    }
    fn fail(&self) {
        *self.0.lock().unwrap() = None;
    }
    fn watch(&self) -> MemoryWatch {
        let source = self.clone();
        MemoryWatch::new(UNIT)
            .interval(INTERVAL)
            .source(move || source.0.lock().unwrap().map(|ws| MemoryUse::new(LIMIT, ws)))
    }
}

struct Setup {
    gate: Gate<Src, SpawningTimer, Arc<Heard>>,
    timer: SpawningTimer,
    heard: Arc<Heard>,
    source: Source,
}

/// A gate of 20 units of 8 MiB (160 MiB) with a watch, its first reading at
/// `ws_mib` taken.
fn setup(ws_mib: u64, max_units: usize) -> Setup {
    let timer = SpawningTimer::new();
    let heard = Arc::new(Heard::default());
    let source = Source::new(ws_mib);
    let gate = Gate::builder(Capacity::from_memory_budget(LIMIT, UNIT))
        .max_units(max_units)
        .memory_watch(source.watch())
        .timer(timer.clone())
        .observer(Arc::clone(&heard))
        .build()
        .unwrap();
    assert_eq!(
        gate.capacity(),
        20,
        "before the first reading: the arithmetic"
    );
    timer.run();
    Setup {
        gate,
        timer,
        heard,
        source,
    }
}

fn take(s: &Setup, units: usize, priority: Priority) -> Result<admit::GatePermit<Src>, GateError> {
    s.gate
        .acquire(units, Src::Upload)
        .priority(priority)
        .try_now()
}

fn shed_reason(result: Result<admit::GatePermit<Src>, GateError>) -> Option<ShedReason> {
    result.err().and_then(|e| e.shed_reason())
}

#[test]
fn the_first_reading_lowers_the_capacity_to_the_highest_mark() {
    let s = setup(10, 1);
    // (0.90 × 160 − 10) / 8 = 16.75.
    assert_eq!(s.gate.capacity(), 16);
    let event = s.heard.last_memory();
    assert_eq!(event.reading, Some(MemoryUse::new(LIMIT, 10 * MIB)));
    assert_eq!(event.allowed_units, Some(16));
    assert_eq!(event.capacity, 16);
    assert!(s.gate.pressure().memory());
}

#[test]
fn a_class_past_its_mark_is_shed_at_arrival_and_a_higher_one_still_gets_in() {
    let s = setup(10, 1);
    // Critical's mark: (0.85 × 160 − 10) / 8 = 15.75.
    let held: Vec<_> = (0..15)
        .map(|_| take(&s, 1, Priority::Critical).unwrap())
        .collect();
    assert_eq!(
        shed_reason(take(&s, 1, Priority::Critical)),
        Some(ShedReason::Memory)
    );
    let shed = s.heard.last_shed();
    assert_eq!(shed.reason, ShedReason::Memory);
    assert!(
        shed.retry_after >= Duration::from_secs(1) && shed.retry_after <= Duration::from_secs(60)
    );
    // Sheddable stopped earlier: (0.75 × 160 − 10) / 8 = 13.75.
    assert_eq!(
        shed_reason(take(&s, 1, Priority::Sheddable)),
        Some(ShedReason::Memory)
    );
    // CriticalPlus takes the last unit under its mark; then the admissions
    // this reading allows are spent for every class: 16, each of which may
    // still grow by a unit before the next reading.
    let last = take(&s, 1, Priority::CriticalPlus).unwrap();
    assert_eq!(
        shed_reason(take(&s, 1, Priority::CriticalPlus)),
        Some(ShedReason::Memory)
    );
    drop((held, last));
    assert_eq!(s.gate.in_use(), 0);
}

#[test]
fn admissions_between_two_readings_stop_where_fresh_memory_would_pass_the_mark() {
    let s = setup(10, 1);
    // Each admission and release within one interval: a churn the level
    // alone (16 in use at most) would let through without end, each buffer
    // perhaps on memory the allocator cannot reuse.
    for _ in 0..16 {
        drop(take(&s, 1, Priority::CriticalPlus).unwrap());
    }
    assert_eq!(
        shed_reason(take(&s, 1, Priority::CriticalPlus)),
        Some(ShedReason::Memory)
    );
    // The next reading: they took no memory (the allocator reused it); a new
    // allowance, as much as the mark leaves.
    next_reading(&s.timer);
    for _ in 0..16 {
        drop(take(&s, 1, Priority::CriticalPlus).unwrap());
    }
}

#[test]
fn an_async_acquire_past_its_mark_is_shed_before_it_parks() {
    let s = setup(10, 1);
    let _held: Vec<_> = (0..15)
        .map(|_| take(&s, 1, Priority::Critical).unwrap())
        .collect();
    let mut acquire = Box::pin(s.gate.acquire(1, Src::Publish));
    let mut cx = Context::from_waker(Waker::noop());
    match acquire.as_mut().poll(&mut cx) {
        Poll::Ready(Err(e)) => assert_eq!(e.shed_reason(), Some(ShedReason::Memory)),
        other => panic!("expected a memory shed, got {other:?}"),
    }
    assert_eq!(s.gate.waiters(), 0);
}

#[test]
fn a_rising_working_set_lowers_the_capacity_and_revokes_nothing() {
    let s = setup(10, 1);
    let held: Vec<_> = (0..16)
        .map(|_| take(&s, 1, Priority::CriticalPlus).unwrap())
        .collect();
    // The buffers fill, 2 MiB more each than counted: (144 − 42) / 8 = 12.75.
    s.source.set(10 + 16 * 10);
    next_reading(&s.timer);
    assert_eq!(s.gate.capacity(), 12);
    assert_eq!(s.gate.in_use(), 16, "nothing admitted is revoked");
    assert_eq!(
        shed_reason(take(&s, 1, Priority::CriticalPlus)),
        Some(ShedReason::Memory)
    );
    drop(held);
    assert_eq!(s.gate.in_use(), 0);
}

#[test]
fn a_falling_working_set_brings_the_capacity_back() {
    let s = setup(10, 1);
    s.source.set(140);
    next_reading(&s.timer);
    // (144 − 140) / 8 = 0.5: below the max_units floor of 1.
    assert_eq!(s.gate.capacity(), 1);
    s.source.set(10);
    next_reading(&s.timer);
    assert_eq!(s.gate.capacity(), 16);
}

#[test]
fn with_no_room_every_class_is_shed_below_the_floor() {
    let s = setup(10, 2);
    s.source.set(150);
    next_reading(&s.timer);
    assert_eq!(s.gate.capacity(), 2, "the max_units floor");
    assert_eq!(s.heard.last_memory().allowed_units, Some(0));
    for priority in Priority::ALL {
        assert_eq!(
            shed_reason(take(&s, 1, priority)),
            Some(ShedReason::Memory),
            "{priority}"
        );
    }
}

#[test]
fn a_working_set_oscillating_around_a_mark_moves_the_capacity_and_loses_no_unit() {
    let s = setup(10, 1);
    let mut held = Vec::new();
    for round in 0..40u64 {
        // Around Critical's mark of 136 MiB: 10 MiB less, then 10 MiB more.
        s.source.set(if round % 2 == 0 { 126 } else { 146 });
        next_reading(&s.timer);
        while let Ok(permit) = take(&s, 1, Priority::Critical) {
            held.push(permit);
        }
        assert!(
            s.gate.in_use() <= 16,
            "round {round}: {} in use",
            s.gate.in_use()
        );
        if round % 3 == 0 {
            held.truncate(held.len() / 2);
        }
    }
    drop(held);
    assert_eq!(s.gate.in_use(), 0);
    s.source.set(10);
    next_reading(&s.timer);
    let all: Vec<_> = (0..16)
        .map(|_| take(&s, 1, Priority::CriticalPlus).unwrap())
        .collect();
    assert_eq!(all.len(), s.gate.capacity());
}

#[test]
fn a_source_that_fails_falls_back_to_the_arithmetic_and_says_so() {
    let s = setup(10, 1);
    assert_eq!(s.gate.capacity(), 16);
    s.source.fail();
    next_reading(&s.timer);
    assert_eq!(s.gate.capacity(), 20);
    let event = s.heard.last_memory();
    assert_eq!((event.reading, event.allowed_units), (None, None));
    assert!(!s.gate.pressure().memory());
    // No memory shed while it is gone.
    let held: Vec<_> = (0..20)
        .map(|_| take(&s, 1, Priority::Sheddable).unwrap())
        .collect();
    drop(held);
    // It comes back.
    s.source.set(10);
    next_reading(&s.timer);
    assert_eq!(s.gate.capacity(), 16);
}

#[test]
fn memory_kept_by_the_allocator_after_a_load_does_not_lock_the_gate() {
    let s = setup(10, 1);
    let held: Vec<_> = (0..16)
        .map(|_| take(&s, 1, Priority::CriticalPlus).unwrap())
        .collect();
    s.source.set(138);
    next_reading(&s.timer);
    drop(held);
    // glibc keeps 111 MiB of freed buffers: nothing in use, a high working set.
    s.source.set(121);
    next_reading(&s.timer);
    // The capacity in force is whole at once: the kept memory is the units'.
    assert_eq!(s.gate.capacity(), 16);
    // Admissions go on every interval, as many as could each take a fresh
    // unit under the mark, (144 − 121) / 8 = 2, while their buffers reuse
    // the kept memory and the working set holds still.
    for interval in 0..8 {
        let two: Vec<_> = (0..2)
            .map(|_| take(&s, 1, Priority::CriticalPlus).unwrap())
            .collect();
        assert_eq!(
            shed_reason(take(&s, 1, Priority::CriticalPlus)),
            Some(ShedReason::Memory),
            "interval {interval}"
        );
        drop(two);
        next_reading(&s.timer);
    }
    assert_eq!(s.gate.capacity(), 16);
}

#[test]
fn resizes_and_memory_compose_as_the_least_of_them() {
    let s = setup(10, 1);
    assert_eq!(s.gate.capacity(), 16);
    // A resize below what memory allows wins.
    s.gate.resize(10).unwrap();
    assert_eq!(s.gate.capacity(), 10);
    next_reading(&s.timer);
    assert_eq!(s.gate.capacity(), 10);
    // Above it, memory wins, at once.
    s.gate.resize(30).unwrap();
    assert_eq!(s.gate.capacity(), 16);
    // More room: up to what memory allows, below the configured 30.
    s.source.set(0);
    next_reading(&s.timer);
    assert_eq!(s.gate.capacity(), 18);
    s.source.fail();
    next_reading(&s.timer);
    assert_eq!(s.gate.capacity(), 30);
}

#[test]
fn the_watch_ends_with_the_gate() {
    let s = setup(10, 1);
    assert_eq!(s.timer.tasks(), 1);
    let Setup { gate, timer, .. } = s;
    drop(gate);
    next_reading(&timer);
    assert_eq!(timer.tasks(), 0);
}

#[test]
fn a_memory_budget_gets_a_watch_by_default_and_a_count_does_not() {
    let timer = SpawningTimer::new();
    let _budget = Gate::<Src, _>::builder(Capacity::from_memory_budget(LIMIT, UNIT))
        .timer(timer.clone())
        .build()
        .unwrap();
    assert_eq!(timer.tasks(), 1, "a watch for a memory budget");
    let _off = Gate::<Src, _>::builder(Capacity::from_memory_budget(LIMIT, UNIT))
        .without_memory_watch()
        .timer(timer.clone())
        .build()
        .unwrap();
    let _count = Gate::<Src, _>::builder(20)
        .timer(timer.clone())
        .build()
        .unwrap();
    assert_eq!(timer.tasks(), 1, "none when turned off, none for a count");
}

#[test]
fn an_explicit_watch_needs_a_timer_that_spawns() {
    let result = Gate::<Src, _>::builder(20)
        .memory_watch(Source::new(10).watch())
        .timer(ManualTimer::new())
        .build();
    assert_eq!(result.err(), Some(ConfigError::MemoryWatchNeedsSpawn));
    // By default, a timer that cannot spawn just keeps the arithmetic.
    let gate = Gate::<Src, _>::builder(Capacity::from_memory_budget(LIMIT, UNIT))
        .timer(ManualTimer::new())
        .build()
        .unwrap();
    assert_eq!(gate.capacity(), 20);
}

#[test]
fn a_forgotten_unit_stays_out_when_a_reading_reapplies_the_capacity() {
    let s = setup(10, 1);
    assert_eq!(s.gate.capacity(), 16);
    // Memory binds no more: the configured 20 is in force.
    s.source.fail();
    next_reading(&s.timer);
    assert_eq!(s.gate.capacity(), 20);
    let two = s.gate.try_acquire(1, Src::Upload).unwrap();
    two.forget();
    assert_eq!(s.gate.capacity(), 19);
    next_reading(&s.timer);
    assert_eq!(s.gate.capacity(), 19, "out for good");
    // And memory binds below it as before.
    s.source.set(10);
    next_reading(&s.timer);
    assert_eq!(s.gate.capacity(), 16);
}

#[test]
fn a_closed_gate_refuses_as_closed_not_for_memory() {
    let s = setup(150, 1);
    assert_eq!(s.heard.last_memory().allowed_units, Some(0));
    s.gate.close();
    for priority in Priority::ALL {
        assert_eq!(
            take(&s, 1, priority).err(),
            Some(GateError::Closed),
            "{priority}"
        );
    }
    assert!(s.heard.sheds.lock().unwrap().is_empty());
}

#[test]
fn a_request_above_the_capacity_is_refused_as_such_before_memory() {
    let s = setup(10, 4);
    s.source.fail();
    next_reading(&s.timer);
    let one = take(&s, 1, Priority::CriticalPlus).unwrap();
    s.gate.resize(4).unwrap();
    // Memory allows nothing; the max_units floor keeps the capacity at 4.
    s.source.set(150);
    next_reading(&s.timer);
    assert_eq!(s.gate.capacity(), 4);
    // A forget takes the capacity below the floor.
    one.forget();
    assert_eq!(s.gate.capacity(), 3);
    next_reading(&s.timer);
    assert_eq!(
        s.gate.capacity(),
        3,
        "forgotten below the floor: out for good"
    );
    // 4 units can never fit: a fault of the request, before any shed,
    // as `acquire` refuses it.
    assert!(matches!(
        take(&s, 4, Priority::CriticalPlus),
        Err(GateError::ExceedsCapacity(_))
    ));
    assert_eq!(
        shed_reason(take(&s, 3, Priority::CriticalPlus)),
        Some(ShedReason::Memory)
    );
}

#[test]
fn arrivals_turned_away_for_want_of_units_spend_no_admissions() {
    let s = setup(10, 1);
    // 16 admissions this reading; the level is 16 too. Take them all.
    let held: Vec<_> = (0..16)
        .map(|_| take(&s, 1, Priority::CriticalPlus).unwrap())
        .collect();
    drop(held);
    next_reading(&s.timer);
    // A resize to 2: most arrivals now find no free unit.
    s.gate.resize(2).unwrap();
    let two: Vec<_> = (0..2)
        .map(|_| take(&s, 1, Priority::CriticalPlus).unwrap())
        .collect();
    for _ in 0..100 {
        assert_eq!(
            shed_reason(take(&s, 1, Priority::CriticalPlus)),
            Some(ShedReason::NoWait)
        );
    }
    drop(two);
    // The admissions left were not spent by the 100 turned away.
    let again: Vec<_> = (0..2)
        .map(|_| take(&s, 1, Priority::CriticalPlus).unwrap())
        .collect();
    assert_eq!(again.len(), 2);
}

#[test]
#[cfg_attr(miri, ignore = "reads /proc and the cgroup files")]
fn a_ceiling_gives_a_signal_where_no_cgroup_sets_a_limit() {
    const CEILING: u64 = 1 << 40;
    let timer = SpawningTimer::new();
    let heard = Arc::new(Heard::default());
    let gate = Gate::<Src, _, _>::builder(Capacity::from_memory_budget(LIMIT, UNIT))
        .memory_watch(MemoryWatch::new(UNIT).ceiling(CEILING))
        .timer(timer.clone())
        .observer(Arc::clone(&heard))
        .build()
        .unwrap();
    timer.run();
    let reading = heard.last_memory().reading.expect("a reading");
    // The cgroup's limit where one is lower, else the ceiling; the process's
    // own memory, or its cgroup's, counted against it.
    assert!(reading.limit <= CEILING);
    assert!(reading.working_set > 0);
    drop(gate);
}

/// Panics in `on_memory` once armed.
#[derive(Default)]
struct PanicsOnMemory(std::sync::atomic::AtomicBool);

impl Observer for PanicsOnMemory {
    fn on_memory(&self, _: &MemoryEvent) {
        if self.0.load(std::sync::atomic::Ordering::SeqCst) {
            panic!("an observer that panics");
        }
    }
}

#[test]
fn a_panicking_observer_or_source_ends_the_watch_and_leaves_the_gate_unbound() {
    // The observer.
    let timer = SpawningTimer::new();
    let observer = Arc::new(PanicsOnMemory::default());
    let source = Source::new(10);
    let gate = Gate::builder(Capacity::from_memory_budget(LIMIT, UNIT))
        .memory_watch(source.watch())
        .timer(timer.clone())
        .observer(Arc::clone(&observer))
        .build()
        .unwrap();
    timer.run();
    assert_eq!(gate.capacity(), 16);
    source.set(150);
    observer.0.store(true, std::sync::atomic::Ordering::SeqCst);
    let unwound = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| next_reading(&timer)));
    assert!(unwound.is_err());
    // Not held to the reading of 150 MiB (nothing allowed) for good: the
    // configured capacity, every unit of it admitted.
    assert_eq!(gate.capacity(), 20);
    let all: Vec<_> = (0..20)
        .map(|_| gate.try_acquire(1, Src::Upload).unwrap())
        .collect();
    drop(all);

    // The source.
    let timer = SpawningTimer::new();
    let armed = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let trips = Arc::clone(&armed);
    let watch = MemoryWatch::new(UNIT).interval(INTERVAL).source(move || {
        assert!(
            !trips.load(std::sync::atomic::Ordering::SeqCst),
            "a source that panics"
        );
        Some(MemoryUse::new(LIMIT, 150 * MIB))
    });
    let gate = Gate::<Src, _>::builder(Capacity::from_memory_budget(LIMIT, UNIT))
        .memory_watch(watch)
        .timer(timer.clone())
        .build()
        .unwrap();
    timer.run();
    assert_eq!(gate.capacity(), 1, "nothing allowed: the floor");
    armed.store(true, std::sync::atomic::Ordering::SeqCst);
    let unwound = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| next_reading(&timer)));
    assert!(unwound.is_err());
    assert_eq!(gate.capacity(), 20);
    assert!(gate.try_acquire(1, Src::Upload).is_ok());
}
