//! Gate configuration: every `ConfigError`, the defaults, and the memory-derived
//! capacity floor.
// Needs the `alloc` feature (the feature powerset builds every test target).
#![cfg(feature = "alloc")]

mod support;

use std::time::Duration;

use admit::{
    Capacity, ConfigError, Gate, GateBuilder, NoTimer, Semaphore, MAX_WAIT_BUDGET, MIN_WAIT_BUDGET,
};
use support::{ManualTimer, Src};

fn build(b: GateBuilder<Src, NoTimer, ()>) -> Result<Gate<Src, ManualTimer, ()>, ConfigError> {
    b.timer(ManualTimer::new()).build()
}

#[test]
fn defaults() {
    let gate = build(Gate::builder(3)).unwrap();
    assert_eq!(gate.capacity(), 3);
    assert_eq!(gate.wait_budget(), Duration::from_secs(5));
    assert_eq!(gate.max_units(), 1);
    assert_eq!(
        gate.retry_after_bounds(),
        (Duration::from_secs(1), Duration::from_secs(60))
    );
    assert_eq!(gate.in_use(), 0);
    assert!(!gate.is_closed());
}

#[test]
fn zero_capacity() {
    assert_eq!(
        build(Gate::builder(0)).unwrap_err(),
        ConfigError::ZeroCapacity
    );
}

#[test]
fn capacity_above_max_units_of_the_semaphore() {
    let capacity = Semaphore::MAX_UNITS + 1;
    assert_eq!(
        build(Gate::builder(capacity)).unwrap_err(),
        ConfigError::CapacityTooLarge { capacity }
    );
    assert!(build(Gate::builder(Semaphore::MAX_UNITS)).is_ok());
}

#[test]
fn explicit_capacity_below_max_units() {
    assert_eq!(
        build(Gate::builder(1).max_units(2)).unwrap_err(),
        ConfigError::CapacityBelowMaxUnits {
            capacity: 1,
            max_units: 2
        }
    );
    assert!(build(Gate::builder(2).max_units(2)).is_ok());
}

#[test]
fn zero_max_units() {
    assert_eq!(
        build(Gate::builder(4).max_units(0)).unwrap_err(),
        ConfigError::ZeroMaxUnits
    );
}

#[test]
fn zero_wait_budget() {
    assert_eq!(
        build(Gate::builder(4).wait_budget(Duration::ZERO)).unwrap_err(),
        ConfigError::ZeroWaitBudget
    );
}

#[test]
fn wait_budget_over_an_hour() {
    let budget = MAX_WAIT_BUDGET + Duration::from_nanos(1);
    assert_eq!(
        build(Gate::builder(4).wait_budget(budget)).unwrap_err(),
        ConfigError::WaitBudgetTooLong { budget }
    );
    assert!(build(Gate::builder(4).wait_budget(MAX_WAIT_BUDGET)).is_ok());
}

#[test]
fn wait_budget_under_a_millisecond() {
    // Below the resolution of Tokio's timer, which would round it up unseen.
    for budget in [
        Duration::from_nanos(1),
        MIN_WAIT_BUDGET - Duration::from_nanos(1),
    ] {
        assert_eq!(
            build(Gate::builder(4).wait_budget(budget)).unwrap_err(),
            ConfigError::WaitBudgetTooShort { budget }
        );
    }
    assert!(build(Gate::builder(4).wait_budget(MIN_WAIT_BUDGET)).is_ok());
    let msg = ConfigError::WaitBudgetTooShort {
        budget: Duration::from_nanos(1),
    }
    .to_string();
    assert_eq!(msg, "wait budget 1ns is shorter than the minimum of 1ms");
}

#[test]
fn bad_retry_after_bounds() {
    let s = Duration::from_secs;
    for (min, max) in [
        (Duration::ZERO, s(1)),
        (s(2), s(1)),
        (Duration::ZERO, Duration::ZERO),
    ] {
        assert_eq!(
            build(Gate::builder(4).retry_after_bounds(min, max)).unwrap_err(),
            ConfigError::InvalidRetryAfter { min, max }
        );
    }
    let gate = build(Gate::builder(4).retry_after_bounds(s(3), s(3))).unwrap();
    assert_eq!(gate.retry_after(1), s(3));
}

#[test]
fn an_overload_target_must_be_above_zero_and_below_the_budget() {
    let budget = Duration::from_secs(5);
    for target in [Duration::ZERO, budget, budget * 2] {
        assert_eq!(
            build(Gate::builder(4).wait_budget(budget).overload_target(target)).unwrap_err(),
            ConfigError::InvalidOverloadTarget { target, budget }
        );
    }
    let gate = build(
        Gate::builder(4)
            .wait_budget(budget)
            .overload_target(budget - Duration::from_nanos(1)),
    )
    .unwrap();
    assert_eq!(
        gate.overload_target(),
        Some(budget - Duration::from_nanos(1))
    );
    assert!(!gate.is_overloaded());
    let plain = build(Gate::builder(4)).unwrap();
    assert_eq!(plain.overload_target(), None);
}

#[test]
fn memory_derived_capacity_is_floored_at_max_units() {
    // 1 unit's worth of memory, but an operation takes 2: raised to 2, not rejected.
    let cap = Capacity::from_memory_budget(100, 100);
    assert_eq!(cap.units(), 1);
    let gate = build(Gate::builder(cap).max_units(2)).unwrap();
    assert_eq!(gate.capacity(), 2);

    // Not even one unit's worth: still max_units.
    let gate = build(Gate::builder(Capacity::from_memory_budget(10, 100)).max_units(3)).unwrap();
    assert_eq!(gate.capacity(), 3);

    // Enough memory: the floor does not apply.
    let gate = build(Gate::builder(Capacity::from_memory_budget(1000, 100)).max_units(3)).unwrap();
    assert_eq!(gate.capacity(), 10);
}

#[test]
fn resolved_capacity_is_what_the_gate_gets() {
    fn builder(capacity: impl Into<Capacity>) -> GateBuilder<Src, NoTimer, ()> {
        Gate::builder(capacity)
    }
    // The builder says the capacity before building, floor included.
    let floored = builder(Capacity::from_memory_budget(100, 100)).max_units(3);
    assert_eq!(floored.resolved_capacity(), 3);
    let derived = builder(Capacity::from_memory_budget(1000, 100)).max_units(3);
    assert_eq!(derived.resolved_capacity(), 10);
    assert_eq!(build(derived).unwrap().capacity(), 10);
    assert_eq!(builder(7).resolved_capacity(), 7);
}

#[test]
fn memory_derived_capacity_saturates_and_builds() {
    let gate = build(Gate::builder(Capacity::from_memory_budget(u64::MAX, 1))).unwrap();
    assert_eq!(gate.capacity(), Semaphore::MAX_UNITS);
}

#[test]
fn config_errors_explain_themselves() {
    let msg = ConfigError::CapacityBelowMaxUnits {
        capacity: 1,
        max_units: 2,
    }
    .to_string();
    assert!(msg.contains("below max_units 2"), "{msg}");
}

/// Records the capacity and budget of every start and capacity event.
#[derive(Default)]
struct BudgetLog(std::sync::Mutex<Vec<(usize, Option<usize>)>>);

impl admit::Observer for BudgetLog {
    fn on_start(&self, event: &admit::StartEvent<'_>) {
        self.0
            .lock()
            .unwrap()
            .push((event.capacity, event.budget_units));
    }
    fn on_capacity(&self, event: &admit::CapacityEvent) {
        self.0
            .lock()
            .unwrap()
            .push((event.capacity, event.budget_units));
    }
}

#[test]
fn a_floor_above_the_memory_budget_is_reported_to_the_observer() {
    let log = std::sync::Arc::new(BudgetLog::default());
    // 1 unit's worth of memory, raised to max_units 2: the start says so.
    let gate = Gate::<Src, NoTimer>::builder(Capacity::from_memory_budget(100, 100))
        .max_units(2)
        .timer(ManualTimer::new())
        .observer(log.clone())
        .build()
        .unwrap();
    assert_eq!(log.0.lock().unwrap().as_slice(), [(2, Some(1))]);

    // Within budget, the budget is still told (capacity = budget).
    gate.resize(Capacity::from_memory_budget(500, 100)).unwrap();
    // Back below the floor: capacity 2 again, budget 0 units.
    gate.resize(Capacity::from_memory_budget(10, 100)).unwrap();
    // A forgotten permit reports the budget in force beside the capacity.
    gate.try_acquire(1, Src::Upload).unwrap().forget();
    // An explicit capacity has no budget.
    gate.resize(4).unwrap();
    assert_eq!(
        log.0.lock().unwrap().as_slice(),
        [
            (2, Some(1)),
            (5, Some(5)),
            (2, Some(0)),
            (1, Some(0)),
            (4, None)
        ]
    );
}

#[test]
fn a_resize_to_the_same_capacity_with_another_budget_is_reported() {
    let log = std::sync::Arc::new(BudgetLog::default());
    let gate = Gate::<Src, NoTimer>::builder(2)
        .max_units(2)
        .timer(ManualTimer::new())
        .observer(log.clone())
        .build()
        .unwrap();
    // Same capacity (the floor), but now over a budget of 1: the observer hears it.
    gate.resize(Capacity::from_memory_budget(100, 100)).unwrap();
    // Same again: nothing new to say.
    gate.resize(Capacity::from_memory_budget(100, 100)).unwrap();
    assert_eq!(log.0.lock().unwrap().as_slice(), [(2, None), (2, Some(1))]);
}
