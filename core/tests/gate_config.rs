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
