//! `MetricsObserver` hooks against a `DebuggingRecorder`: names, units, descriptions
//! and values.

mod support;

use std::time::Duration;

use admit::ShedReason::{Hopeless, Overload, QueueFull, WaitBudget};
use admit::{
    AdmitEvent, CapacityEvent, LeaseEnd, LeaseEndEvent, LeaseStartEvent, Observer, OverloadEvent,
    ReleaseEvent, ShedEvent, ShedReason, StartEvent,
};
use admit_metrics::MetricsObserver;
use metrics::Unit;
use metrics_util::debugging::{DebuggingRecorder, Snapshotter};
use metrics_util::MetricKind;
use support::{counter, gauge, get, histogram, read, sheds};

const SOURCES: &[&str] = &["npm_publish", "cargo_publish", "pypi_upload"];

/// The `Retry-After` the sheds of these tests carry (the observer ignores it).
const RETRY: Duration = Duration::from_secs(1);

/// A recorder, and an observer started (as a gate's build does) with it current.
fn started(prefix: &str, capacity: usize) -> (Snapshotter, MetricsObserver) {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let observer = MetricsObserver::new(prefix);
    metrics::with_local_recorder(&recorder, || {
        observer.on_start(&StartEvent::new(capacity, SOURCES))
    });
    (snapshotter, observer)
}

#[test]
fn start_describes_every_metric_with_its_unit() {
    let (snapshotter, _observer) = started("upload_sessions", 8);
    let m = read(&snapshotter);
    let expected = [
        (
            "upload_sessions_units_in_use",
            "",
            MetricKind::Gauge,
            Unit::Count,
        ),
        (
            "upload_sessions_capacity_units",
            "",
            MetricKind::Gauge,
            Unit::Count,
        ),
        (
            "upload_sessions_hold_seconds",
            "",
            MetricKind::Histogram,
            Unit::Seconds,
        ),
        (
            "upload_sessions_wait_seconds",
            "",
            MetricKind::Histogram,
            Unit::Seconds,
        ),
        (
            "upload_sessions_shed_total",
            "npm_publish",
            MetricKind::Counter,
            Unit::Count,
        ),
        (
            "upload_sessions_overloaded",
            "",
            MetricKind::Gauge,
            Unit::Count,
        ),
    ];
    for (name, source, kind, unit) in expected {
        let reason = if source.is_empty() { "" } else { "queue_full" };
        let s = get(&m, name, source, reason);
        assert_eq!(s.kind, kind, "{name}");
        assert_eq!(s.unit, Some(unit), "{name}");
        assert!(s.described, "{name} has no description");
    }
}

#[test]
fn start_sets_capacity_and_registers_every_source_and_reason_at_zero() {
    let (snapshotter, _observer) = started("upload_sessions", 8);
    let m = read(&snapshotter);
    assert_eq!(gauge(&m, "upload_sessions_capacity_units"), 8.0);
    assert_eq!(gauge(&m, "upload_sessions_units_in_use"), 0.0);
    assert_eq!(gauge(&m, "upload_sessions_overloaded"), 0.0);
    for source in SOURCES {
        for reason in ShedReason::ALL {
            assert_eq!(
                counter(&m, "upload_sessions_shed_total", source, reason.label()),
                0
            );
        }
    }
    // Exactly the declared sources × every reason, nothing else.
    let shed_series = m
        .keys()
        .filter(|(name, _, _)| name == "upload_sessions_shed_total")
        .count();
    assert_eq!(shed_series, SOURCES.len() * admit::ShedReason::ALL.len());
}

#[test]
fn units_in_use_follows_admits_and_releases() {
    let (snapshotter, observer) = started("s", 8);
    observer.on_admit(&AdmitEvent::new("npm_publish", 2, Duration::ZERO));
    observer.on_admit(&AdmitEvent::new("cargo_publish", 3, Duration::ZERO));
    observer.on_release(&ReleaseEvent::new("npm_publish", 2, Duration::from_secs(1)));
    observer.on_admit(&AdmitEvent::new("npm_publish", 1, Duration::ZERO));
    let m = read(&snapshotter);
    assert_eq!(gauge(&m, "s_units_in_use"), 4.0);
    assert_eq!(gauge(&m, "s_capacity_units"), 8.0);
}

#[test]
fn wait_and_hold_histograms_record_seconds() {
    let (snapshotter, observer) = started("s", 8);
    observer.on_admit(&AdmitEvent::new(
        "npm_publish",
        1,
        Duration::from_millis(40),
    ));
    observer.on_admit(&AdmitEvent::new(
        "npm_publish",
        1,
        Duration::from_millis(2500),
    ));
    observer.on_release(&ReleaseEvent::new("npm_publish", 1, Duration::from_secs(3)));
    let m = read(&snapshotter);
    assert_eq!(histogram(&m, "s_wait_seconds"), vec![0.04, 2.5]);
    assert_eq!(histogram(&m, "s_hold_seconds"), vec![3.0]);
}

#[test]
fn shed_counts_per_source_and_reason() {
    let (snapshotter, observer) = started("s", 8);
    observer.on_shed(&ShedEvent::new(
        "npm_publish",
        1,
        Duration::from_secs(5),
        WaitBudget,
        RETRY,
    ));
    observer.on_shed(&ShedEvent::new(
        "npm_publish",
        2,
        Duration::from_secs(5),
        WaitBudget,
        RETRY,
    ));
    observer.on_shed(&ShedEvent::new(
        "npm_publish",
        1,
        Duration::ZERO,
        QueueFull,
        RETRY,
    ));
    observer.on_shed(&ShedEvent::new(
        "pypi_upload",
        1,
        Duration::ZERO,
        QueueFull,
        RETRY,
    ));
    observer.on_shed(&ShedEvent::new(
        "npm_publish",
        1,
        Duration::from_millis(200),
        Overload,
        RETRY,
    ));
    observer.on_shed(
        &ShedEvent::new("pypi_upload", 2, Duration::ZERO, Hopeless, RETRY)
            .with_estimated_wait(Duration::from_secs(7)),
    );
    observer.on_shed(&ShedEvent::new(
        "pypi_upload",
        1,
        Duration::ZERO,
        Hopeless,
        RETRY,
    ));
    let m = read(&snapshotter);
    assert_eq!(counter(&m, "s_shed_total", "npm_publish", "wait_budget"), 2);
    assert_eq!(counter(&m, "s_shed_total", "npm_publish", "queue_full"), 1);
    assert_eq!(counter(&m, "s_shed_total", "npm_publish", "overload"), 1);
    assert_eq!(counter(&m, "s_shed_total", "npm_publish", "hopeless"), 0);
    assert_eq!(counter(&m, "s_shed_total", "pypi_upload", "overload"), 0);
    assert_eq!(counter(&m, "s_shed_total", "pypi_upload", "hopeless"), 2);
    assert_eq!(counter(&m, "s_shed_total", "pypi_upload", "wait_budget"), 0);
    assert_eq!(counter(&m, "s_shed_total", "pypi_upload", "queue_full"), 1);
    assert_eq!(sheds(&m, "s_shed_total", "cargo_publish"), 0);
    // A shed is not an admission: nothing is in use and nothing waited.
    assert_eq!(gauge(&m, "s_units_in_use"), 0.0);
    assert_eq!(histogram(&m, "s_wait_seconds"), Vec::<f64>::new());
}

#[test]
fn shed_from_an_undeclared_label_is_still_counted() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let observer = MetricsObserver::new("s");
    metrics::with_local_recorder(&recorder, || {
        observer.on_start(&StartEvent::new(1, SOURCES));
        observer.on_shed(&ShedEvent::new(
            "not_declared",
            1,
            Duration::from_secs(1),
            WaitBudget,
            RETRY,
        ));
    });
    let m = read(&snapshotter);
    assert_eq!(
        counter(&m, "s_shed_total", "not_declared", "wait_budget"),
        1
    );
}

/// Handles are resolved once, at start, against the recorder current then: events
/// after the local recorder's scope ended still reach it.
#[test]
fn handles_resolved_at_start_keep_reporting_to_that_recorder() {
    let (snapshotter, observer) = started("s", 4);
    // No recorder is current here: a per-event lookup would reach the no-op recorder.
    observer.on_admit(&AdmitEvent::new(
        "cargo_publish",
        3,
        Duration::from_millis(500),
    ));
    observer.on_shed(&ShedEvent::new(
        "cargo_publish",
        1,
        Duration::from_secs(1),
        WaitBudget,
        RETRY,
    ));
    observer.on_release(&ReleaseEvent::new(
        "cargo_publish",
        1,
        Duration::from_secs(2),
    ));
    observer.on_capacity(&CapacityEvent::new(5));
    let m = read(&snapshotter);
    assert_eq!(gauge(&m, "s_units_in_use"), 2.0);
    assert_eq!(gauge(&m, "s_capacity_units"), 5.0);
    assert_eq!(histogram(&m, "s_wait_seconds"), vec![0.5]);
    assert_eq!(histogram(&m, "s_hold_seconds"), vec![2.0]);
    assert_eq!(
        counter(&m, "s_shed_total", "cargo_publish", "wait_budget"),
        1
    );
}

#[test]
fn a_second_start_does_not_reset_shed_counts() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let observer = MetricsObserver::new("s");
    metrics::with_local_recorder(&recorder, || {
        observer.on_start(&StartEvent::new(2, SOURCES));
        observer.on_shed(&ShedEvent::new(
            "npm_publish",
            1,
            Duration::from_secs(1),
            WaitBudget,
            RETRY,
        ));
        observer.on_start(&StartEvent::new(2, SOURCES));
    });
    let m = read(&snapshotter);
    assert_eq!(counter(&m, "s_shed_total", "npm_publish", "wait_budget"), 1);
}

#[test]
fn prefixes_keep_two_gates_apart() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let uploads = MetricsObserver::new("uploads");
    let bodies = MetricsObserver::new("bodies");
    metrics::with_local_recorder(&recorder, || {
        uploads.on_start(&StartEvent::new(4, SOURCES));
        bodies.on_start(&StartEvent::new(16, SOURCES));
    });
    uploads.on_admit(&AdmitEvent::new("npm_publish", 3, Duration::ZERO));
    bodies.on_admit(&AdmitEvent::new("npm_publish", 5, Duration::ZERO));
    let m = read(&snapshotter);
    assert_eq!(gauge(&m, "uploads_capacity_units"), 4.0);
    assert_eq!(gauge(&m, "bodies_capacity_units"), 16.0);
    assert_eq!(gauge(&m, "uploads_units_in_use"), 3.0);
    assert_eq!(gauge(&m, "bodies_units_in_use"), 5.0);
}

#[test]
fn on_capacity_sets_the_capacity_gauge() {
    let (snapshotter, observer) = started("s", 8);
    observer.on_admit(&AdmitEvent::new("npm_publish", 3, Duration::ZERO));
    observer.on_capacity(&CapacityEvent::new(12));
    observer.on_capacity(&CapacityEvent::new(4));
    let m = read(&snapshotter);
    assert_eq!(gauge(&m, "s_capacity_units"), 4.0);
    assert_eq!(gauge(&m, "s_units_in_use"), 3.0, "a resize moves no unit");
}

/// An overload state change, as the gate reports it.
fn overload(overloaded: bool) -> OverloadEvent {
    OverloadEvent::new(
        overloaded,
        Duration::from_millis(700),
        Duration::from_secs(2),
        Duration::from_millis(500),
    )
}

#[test]
fn on_overload_sets_the_overloaded_gauge() {
    let (snapshotter, observer) = started("s", 8);
    observer.on_overload(&overload(true));
    let m = read(&snapshotter);
    assert_eq!(gauge(&m, "s_overloaded"), 1.0);
    assert_eq!(gauge(&m, "s_capacity_units"), 8.0, "nothing else moves");
    assert_eq!(sheds(&m, "s_shed_total", "npm_publish"), 0);
    // (A read resets the debugging recorder's gauges: set again below.)
    observer.on_overload(&overload(false));
    assert_eq!(gauge(&read(&snapshotter), "s_overloaded"), 0.0);
}

#[test]
fn a_start_with_an_overload_target_registers_the_gauge_at_zero() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let observer = MetricsObserver::new("s");
    let start = StartEvent::new(4, SOURCES).with_overload_target(Duration::from_millis(500));
    metrics::with_local_recorder(&recorder, || observer.on_start(&start));
    let m = read(&snapshotter);
    assert_eq!(gauge(&m, "s_overloaded"), 0.0);
    assert!(get(&m, "s_overloaded", "", "").described);
}

/// A recorder that appears after the gate became overloaded finds the gauge at 1,
/// whichever event finds it first; and one that appears at the change itself.
#[test]
fn a_late_recorder_is_caught_up_with_the_overload_state() {
    // Found by another event (a capacity change), after the state changed.
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let observer = MetricsObserver::new("late");
    observer.on_start(&StartEvent::new(4, SOURCES)); // no recorder in force
    observer.on_overload(&overload(true));
    metrics::with_local_recorder(&recorder, || {
        observer.on_admit(&AdmitEvent::new("npm_publish", 1, Duration::ZERO));
    });
    let m = read(&snapshotter);
    assert_eq!(gauge(&m, "late_overloaded"), 1.0);
    assert_eq!(gauge(&m, "late_capacity_units"), 4.0);
    assert_eq!(gauge(&m, "late_units_in_use"), 1.0);
    // Resolved: the next change goes to the handles, recorder in scope or not.
    observer.on_overload(&overload(false));
    assert_eq!(gauge(&read(&snapshotter), "late_overloaded"), 0.0);

    // Found by the change itself.
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let observer = MetricsObserver::new("late");
    observer.on_start(&StartEvent::new(4, SOURCES));
    observer.on_shed(&ShedEvent::new(
        "cargo_publish",
        1,
        Duration::ZERO,
        Hopeless,
        RETRY,
    ));
    metrics::with_local_recorder(&recorder, || observer.on_overload(&overload(true)));
    let m = read(&snapshotter);
    assert_eq!(gauge(&m, "late_overloaded"), 1.0);
    assert_eq!(
        counter(&m, "late_shed_total", "cargo_publish", "hopeless"),
        1
    );
    assert!(get(&m, "late_overloaded", "", "").described);
}

/// The lock-free late-recorder path under threads: events race the resolution
/// (one thread's event finds a recorder in the middle of the others' stream); in
/// the end the gauges (units in use, live leases) and the counters (sheds,
/// admissions) hold every event exactly once.
#[test]
fn events_racing_a_late_recorder_are_each_counted_once() {
    const THREADS: usize = 4;
    const EVENTS: usize = 2_000;
    const ROUNDS: usize = 50;
    const OVERLOAD_EVERY: usize = 7;
    let overloaded_at = |i: usize| i / OVERLOAD_EVERY % 2 == 0;
    for round in 0..ROUNDS {
        let recorder = DebuggingRecorder::new();
        let snapshotter = recorder.snapshotter();
        let observer = MetricsObserver::new("race");
        observer.on_start(&StartEvent::new(4, SOURCES)); // no recorder in force: nothing resolved
        let go = std::sync::Barrier::new(THREADS + 1);
        let progress = std::sync::atomic::AtomicUsize::new(0);
        std::thread::scope(|s| {
            for t in 0..THREADS {
                let (observer, go, progress) = (&observer, &go, &progress);
                s.spawn(move || {
                    go.wait();
                    for i in 0..EVENTS {
                        progress.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        // Each thread keeps 1 unit in use and 1 lease live (of its
                        // own source) at the end, and sheds once every 10 events,
                        // from its own source, for every reason in turn; thread 0
                        // also turns the overload state over.
                        let source = SOURCES[t % SOURCES.len()];
                        observer.on_lease_start(&LeaseStartEvent::new(source, 1));
                        observer.on_admit(&AdmitEvent::new("npm_publish", 2, Duration::ZERO));
                        observer.on_release(&ReleaseEvent::new(
                            "npm_publish",
                            if i + 1 == EVENTS { 1 } else { 2 },
                            Duration::ZERO,
                        ));
                        if i + 1 != EVENTS {
                            observer.on_lease_end(&LeaseEndEvent::new(
                                source,
                                1,
                                Duration::ZERO,
                                LeaseEnd::Finished,
                            ));
                        }
                        if t == 0 && i % OVERLOAD_EVERY == 0 {
                            observer.on_overload(&overload(overloaded_at(i)));
                        }
                        if i % 10 == 0 {
                            let reason = ShedReason::ALL[i / 10 % ShedReason::ALL.len()];
                            observer.on_shed(&ShedEvent::new(
                                source,
                                1,
                                Duration::ZERO,
                                reason,
                                RETRY,
                            ));
                        }
                    }
                });
            }
            go.wait();
            // One event finds the recorder, at a point of the others' streams that
            // moves from round to round, early on: while the others are all still
            // on the path without a recorder, where the races are.
            let at = round * 8;
            while progress.load(std::sync::atomic::Ordering::Relaxed) < at {
                std::hint::spin_loop();
            }
            metrics::with_local_recorder(&recorder, || {
                observer.on_capacity(&CapacityEvent::new(6))
            });
        });
        let m = read(&snapshotter);
        assert_eq!(
            gauge(&m, "race_units_in_use"),
            THREADS as f64,
            "round {round}"
        );
        assert_eq!(gauge(&m, "race_capacity_units"), 6.0);
        assert_eq!(
            counter(&m, "race_admitted_total", "npm_publish", ""),
            (THREADS * EVENTS) as u64,
            "round {round}: every admission once"
        );
        for (i, source) in SOURCES.iter().enumerate() {
            let threads = (0..THREADS).filter(|t| t % SOURCES.len() == i).count();
            assert_eq!(
                get(&m, "race_leases_live", source, "").value,
                metrics_util::debugging::DebugValue::Gauge((threads as f64).into()),
                "round {round}: {source}'s live leases"
            );
        }
        let last_change = (EVENTS - 1) / OVERLOAD_EVERY * OVERLOAD_EVERY;
        assert_eq!(
            gauge(&m, "race_overloaded"),
            if overloaded_at(last_change) { 1.0 } else { 0.0 },
            "round {round}: the last state reported"
        );
        let mut expected = std::collections::HashMap::new();
        for t in 0..THREADS {
            for i in (0..EVENTS).step_by(10) {
                let reason = ShedReason::ALL[i / 10 % ShedReason::ALL.len()].label();
                *expected
                    .entry((SOURCES[t % SOURCES.len()], reason))
                    .or_insert(0) += 1;
            }
        }
        for source in SOURCES {
            for reason in ShedReason::ALL.map(ShedReason::label) {
                let want = expected.get(&(*source, reason)).copied().unwrap_or(0);
                assert_eq!(
                    counter(&m, "race_shed_total", source, reason),
                    want,
                    "round {round}: {source} {reason}"
                );
            }
        }
        // Every observation made after the resolution reached the histograms; the
        // ones before it did not (they cannot be caught up).
        assert!(histogram(&m, "race_wait_seconds").len() <= THREADS * EVENTS);
    }
}
