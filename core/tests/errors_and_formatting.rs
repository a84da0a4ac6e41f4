//! What errors and diagnostics say: `GateError`'s classification, messages and
//! `io::Error` kinds, `Retry-After` rounding, and the `Debug`/`Display` output of
//! the public types (an operator reads these in logs).
// Needs the `std` feature (the feature powerset builds every test target).
#![cfg(feature = "std")]

mod support;

use std::io::ErrorKind;
use std::sync::Arc;
use std::time::Duration;

use admit::{
    whole_seconds_up, AcquireTimeoutError, Capacity, ExceedsCapacity, Gate, GateError, Semaphore,
    ShedReason, Source,
};
use support::{ManualTimer, Src};

const OVERSIZE: ExceedsCapacity = ExceedsCapacity {
    requested: 3,
    capacity: 2,
};

const ABOVE_MAX_UNITS: GateError = GateError::ExceedsMaxUnits {
    requested: 3,
    max_units: 2,
};

fn busy(secs: f64) -> GateError {
    shed(secs, ShedReason::WaitBudget)
}

fn shed(secs: f64, reason: ShedReason) -> GateError {
    GateError::Busy {
        retry_after: Duration::from_secs_f64(secs),
        reason,
    }
}

#[test]
fn only_busy_is_a_shed_and_carries_a_retry_after() {
    assert!(busy(2.0).is_shed());
    assert_eq!(busy(2.0).retry_after(), Some(Duration::from_secs(2)));
    for reason in ShedReason::ALL {
        assert_eq!(shed(1.0, reason).shed_reason(), Some(reason));
    }
    for other in [
        GateError::Cancelled,
        GateError::ExceedsCapacity(OVERSIZE),
        ABOVE_MAX_UNITS,
        GateError::Closed,
    ] {
        assert!(!other.is_shed(), "{other:?}");
        assert_eq!(other.retry_after(), None, "{other:?}");
        assert_eq!(other.shed_reason(), None, "{other:?}");
    }
}

#[test]
fn gate_errors_read_as_an_operator_would_want() {
    // Each shed says which limit turned the caller away.
    let said: Vec<_> = ShedReason::ALL
        .iter()
        .map(|&reason| shed(1.2, reason).to_string())
        .collect();
    assert_eq!(
        said,
        [
            "admission gate busy: the wait budget expired; retry after 2s",
            "admission gate busy: the call's wait ceiling expired; retry after 2s",
            "admission gate busy: the units were not free at once, and try_acquire never waits; \
             retry after 2s",
            "admission gate busy: max_waiters requests were already parked; retry after 2s",
            "admission gate busy: the gate is overloaded and the wait reached its cap; retry after 2s",
            "admission gate busy: the estimated wait was longer than the wait allowed; retry after 2s",
            "admission gate busy: shed while parked for a request of a higher priority; retry after 2s",
            "admission gate busy: its class is past its mark of the memory limit; retry after 2s",
        ]
    );
    assert_eq!(
        ABOVE_MAX_UNITS.to_string(),
        "admission gate misconfigured: request for 3 units exceeds the gate's max_units of 2"
    );
    assert_eq!(
        GateError::Cancelled.to_string(),
        "admission wait cancelled by the caller"
    );
    assert_eq!(
        GateError::ExceedsCapacity(OVERSIZE).to_string(),
        "admission gate misconfigured: request for 3 units exceeds the capacity of 2 units"
    );
    assert_eq!(
        GateError::Closed.to_string(),
        "admission gate closed: the server is shutting down"
    );
}

#[test]
fn gate_errors_map_to_fitting_io_error_kinds() {
    let kind = |e: GateError| std::io::Error::from(e).kind();
    assert_eq!(kind(busy(1.0)), ErrorKind::WouldBlock);
    assert_eq!(kind(GateError::Cancelled), ErrorKind::Interrupted);
    assert_eq!(
        kind(GateError::ExceedsCapacity(OVERSIZE)),
        ErrorKind::InvalidInput
    );
    assert_eq!(kind(ABOVE_MAX_UNITS), ErrorKind::InvalidInput);
    assert_eq!(kind(GateError::Closed), ErrorKind::NotConnected);
    let io = std::io::Error::from(GateError::Closed);
    assert_eq!(io.to_string(), GateError::Closed.to_string());
}

#[test]
fn retry_after_rounds_up_to_whole_seconds_and_is_never_zero() {
    let cases = [
        (Duration::ZERO, 1),
        (Duration::from_nanos(1), 1),
        (Duration::from_millis(300), 1),
        (Duration::from_secs(1), 1),
        (Duration::from_millis(1200), 2),
        (Duration::from_secs(5), 5),
        (Duration::new(5, 1), 6),
        (Duration::MAX, u64::MAX),
    ];
    for (d, secs) in cases {
        assert_eq!(whole_seconds_up(d), secs, "{d:?}");
    }
}

#[test]
fn semaphore_types_debug_their_units() {
    let sem = Arc::new(Semaphore::new(3));
    assert_eq!(format!("{:?}", sem.acquire(2)), "Acquire { units: 2, .. }");
    assert_eq!(
        format!("{:?}", sem.clone().acquire_owned(1)),
        "AcquireOwned { units: 1, .. }"
    );
    assert_eq!(
        format!("{:?}", sem.try_acquire(2).unwrap()),
        "Permit { units: 2, .. }"
    );
    assert_eq!(
        format!("{:?}", sem.clone().try_acquire_owned(3).unwrap()),
        "OwnedPermit { units: 3, .. }"
    );
    let drain = format!("{:?}", sem.drain());
    assert!(
        drain.starts_with("Drain { semaphore: Semaphore {"),
        "{drain}"
    );
}

#[test]
fn a_blocking_acquire_timeout_says_what_happened() {
    assert_eq!(
        AcquireTimeoutError::TimedOut.to_string(),
        "the deadline passed before the units were granted"
    );
    assert_eq!(AcquireTimeoutError::Closed.to_string(), "semaphore closed");
    assert_eq!(
        AcquireTimeoutError::ExceedsCapacity(OVERSIZE).to_string(),
        OVERSIZE.to_string()
    );
}

#[test]
fn capacity_says_where_it_came_from() {
    assert_eq!(Capacity::from(4).to_string(), "4 units");
    assert_eq!(
        Capacity::from_memory_budget(1000, 300).to_string(),
        "3 units (from a memory budget)"
    );
}

#[test]
fn gate_and_builder_debug_their_configuration() {
    let builder = Gate::<Src, _, _>::builder(4)
        .wait_budget(Duration::from_secs(2))
        .max_units(2)
        .timer(ManualTimer::new());
    let text = format!("{builder:?}");
    assert!(text.starts_with("GateBuilder { capacity: "), "{text}");
    assert!(
        text.contains("wait_budget: 2s") && text.contains("max_units: 2"),
        "{text}"
    );

    let gate = builder.build().unwrap();
    let _permit = gate.try_acquire(1, Src::Upload).unwrap();
    assert_eq!(
        format!("{gate:?}"),
        "Gate { capacity: 4, in_use: 1, waiters: 0, wait_budget: 2s, closed: false, .. }"
    );
    assert_eq!(
        format!("{:?}", gate.drain(Duration::from_secs(1))),
        "GateDrain { in_use: 1, .. }"
    );
}

#[test]
fn shed_reasons_have_stable_labels() {
    // Metric label values: an operator's dashboards and alerts name them.
    let labels: Vec<_> = ShedReason::ALL.iter().map(|r| r.label()).collect();
    assert_eq!(
        labels,
        [
            "wait_budget",
            "ceiling",
            "no_wait",
            "queue_full",
            "overload",
            "hopeless",
            "outranked",
            "memory"
        ]
    );
}

#[test]
fn a_hand_written_source_finds_its_index_by_label() {
    // `sources!` implements `index` directly; a hand-written `Source` gets the
    // default, which looks the label up in `ALL`.
    #[derive(Debug, Clone, Copy, PartialEq)]
    enum Tier {
        Free,
        Paid,
        Internal,
    }
    impl Source for Tier {
        const ALL: &'static [Self] = &[Tier::Free, Tier::Paid, Tier::Internal];
        fn label(self) -> &'static str {
            match self {
                Tier::Free => "free",
                Tier::Paid => "paid",
                Tier::Internal => "internal",
            }
        }
    }
    let indices: Vec<_> = Tier::ALL.iter().map(|t| t.index()).collect();
    assert_eq!(indices, [0, 1, 2]);
}

#[test]
fn a_gate_acquire_says_what_it_asks_for_and_how_long_it_may_wait() {
    let gate = Gate::<Src, _, _>::builder(4)
        .wait_budget(Duration::from_secs(5))
        .max_units(3)
        .timer(ManualTimer::new())
        .build()
        .unwrap();
    let acquire = gate.acquire(3, Src::Mirror);
    assert_eq!((acquire.units(), acquire.source()), (3, Src::Mirror));
    assert_eq!(acquire.max_wait(), Duration::from_secs(5), "the budget");
    let acquire = acquire.ceiling(Duration::from_secs(2));
    assert_eq!(
        acquire.max_wait(),
        Duration::from_secs(2),
        "a shorter ceiling"
    );
    assert_eq!(
        format!("{acquire:?}"),
        "GateAcquire { units: 3, source: \"mirror\", ceiling: Some(2s), state: Idle, .. }"
    );
    let permit = futures_lite::future::block_on(acquire).unwrap();
    assert_eq!(
        format!("{permit:?}"),
        "GatePermit { units: 3, source: \"mirror\", held_for: 0ns }"
    );
}
