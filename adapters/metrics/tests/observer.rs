//! `MetricsObserver` hooks against a `DebuggingRecorder`: names, units, descriptions
//! and values.

mod support;

use std::time::Duration;

use admit::Observer;
use admit::ShedReason::{QueueFull, WaitBudget};
use admit_metrics::MetricsObserver;
use metrics::Unit;
use metrics_util::debugging::{DebuggingRecorder, Snapshotter};
use metrics_util::MetricKind;
use support::{counter, gauge, get, histogram, read, sheds};

const SOURCES: &[&str] = &["npm_publish", "cargo_publish", "pypi_upload"];

/// A recorder, and an observer started (as a gate's build does) with it current.
fn started(prefix: &str, capacity: usize) -> (Snapshotter, MetricsObserver) {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let observer = MetricsObserver::new(prefix);
    metrics::with_local_recorder(&recorder, || observer.on_start(capacity, SOURCES));
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
    for source in SOURCES {
        for reason in ["wait_budget", "queue_full"] {
            assert_eq!(counter(&m, "upload_sessions_shed_total", source, reason), 0);
        }
    }
    // Exactly the declared sources × the two reasons, nothing else.
    let shed_series = m
        .keys()
        .filter(|(name, _, _)| name == "upload_sessions_shed_total")
        .count();
    assert_eq!(shed_series, SOURCES.len() * admit::ShedReason::ALL.len());
}

#[test]
fn units_in_use_follows_admits_and_releases() {
    let (snapshotter, observer) = started("s", 8);
    observer.on_admit("npm_publish", 2, Duration::ZERO);
    observer.on_admit("cargo_publish", 3, Duration::ZERO);
    observer.on_release("npm_publish", 2, Duration::from_secs(1));
    observer.on_admit("npm_publish", 1, Duration::ZERO);
    let m = read(&snapshotter);
    assert_eq!(gauge(&m, "s_units_in_use"), 4.0);
    assert_eq!(gauge(&m, "s_capacity_units"), 8.0);
}

#[test]
fn wait_and_hold_histograms_record_seconds() {
    let (snapshotter, observer) = started("s", 8);
    observer.on_admit("npm_publish", 1, Duration::from_millis(40));
    observer.on_admit("npm_publish", 1, Duration::from_millis(2500));
    observer.on_release("npm_publish", 1, Duration::from_secs(3));
    let m = read(&snapshotter);
    assert_eq!(histogram(&m, "s_wait_seconds"), vec![0.04, 2.5]);
    assert_eq!(histogram(&m, "s_hold_seconds"), vec![3.0]);
}

#[test]
fn shed_counts_per_source_and_reason() {
    let (snapshotter, observer) = started("s", 8);
    observer.on_shed("npm_publish", 1, Duration::from_secs(5), WaitBudget);
    observer.on_shed("npm_publish", 2, Duration::from_secs(5), WaitBudget);
    observer.on_shed("npm_publish", 1, Duration::ZERO, QueueFull);
    observer.on_shed("pypi_upload", 1, Duration::ZERO, QueueFull);
    let m = read(&snapshotter);
    assert_eq!(counter(&m, "s_shed_total", "npm_publish", "wait_budget"), 2);
    assert_eq!(counter(&m, "s_shed_total", "npm_publish", "queue_full"), 1);
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
        observer.on_start(1, SOURCES);
        observer.on_shed("not_declared", 1, Duration::from_secs(1), WaitBudget);
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
    observer.on_admit("cargo_publish", 3, Duration::from_millis(500));
    observer.on_shed("cargo_publish", 1, Duration::from_secs(1), WaitBudget);
    observer.on_release("cargo_publish", 1, Duration::from_secs(2));
    observer.on_capacity(5);
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
        observer.on_start(2, SOURCES);
        observer.on_shed("npm_publish", 1, Duration::from_secs(1), WaitBudget);
        observer.on_start(2, SOURCES);
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
        uploads.on_start(4, SOURCES);
        bodies.on_start(16, SOURCES);
    });
    uploads.on_admit("npm_publish", 3, Duration::ZERO);
    bodies.on_admit("npm_publish", 5, Duration::ZERO);
    let m = read(&snapshotter);
    assert_eq!(gauge(&m, "uploads_capacity_units"), 4.0);
    assert_eq!(gauge(&m, "bodies_capacity_units"), 16.0);
    assert_eq!(gauge(&m, "uploads_units_in_use"), 3.0);
    assert_eq!(gauge(&m, "bodies_units_in_use"), 5.0);
}

#[test]
fn on_capacity_sets_the_capacity_gauge() {
    let (snapshotter, observer) = started("s", 8);
    observer.on_admit("npm_publish", 3, Duration::ZERO);
    observer.on_capacity(12);
    observer.on_capacity(4);
    let m = read(&snapshotter);
    assert_eq!(gauge(&m, "s_capacity_units"), 4.0);
    assert_eq!(gauge(&m, "s_units_in_use"), 3.0, "a resize moves no unit");
}

/// The lock-free late-recorder path under threads: events race the resolution
/// (one thread's event finds a recorder in the middle of the others' stream); in
/// the end the gauge and the counters hold every event exactly once.
#[test]
fn events_racing_a_late_recorder_are_each_counted_once() {
    const THREADS: usize = 4;
    const EVENTS: usize = 2_000;
    const ROUNDS: usize = 50;
    for round in 0..ROUNDS {
        let recorder = DebuggingRecorder::new();
        let snapshotter = recorder.snapshotter();
        let observer = MetricsObserver::new("race");
        observer.on_start(4, SOURCES); // no recorder in force: nothing resolved
        let go = std::sync::Barrier::new(THREADS + 1);
        let progress = std::sync::atomic::AtomicUsize::new(0);
        std::thread::scope(|s| {
            for t in 0..THREADS {
                let (observer, go, progress) = (&observer, &go, &progress);
                s.spawn(move || {
                    go.wait();
                    for i in 0..EVENTS {
                        progress.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        // Each thread keeps 1 unit in use at the end, and sheds once
                        // every 10 events, from its own source, for both reasons.
                        observer.on_admit("npm_publish", 2, Duration::ZERO);
                        observer.on_release(
                            "npm_publish",
                            if i + 1 == EVENTS { 1 } else { 2 },
                            Duration::ZERO,
                        );
                        if i % 10 == 0 {
                            let reason = if i % 20 == 0 { WaitBudget } else { QueueFull };
                            observer.on_shed(SOURCES[t % SOURCES.len()], 1, Duration::ZERO, reason);
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
            metrics::with_local_recorder(&recorder, || observer.on_capacity(6));
        });
        let m = read(&snapshotter);
        assert_eq!(
            gauge(&m, "race_units_in_use"),
            THREADS as f64,
            "round {round}"
        );
        assert_eq!(gauge(&m, "race_capacity_units"), 6.0);
        let mut expected = std::collections::HashMap::new();
        for t in 0..THREADS {
            for i in (0..EVENTS).step_by(10) {
                let reason = if i % 20 == 0 {
                    "wait_budget"
                } else {
                    "queue_full"
                };
                *expected
                    .entry((SOURCES[t % SOURCES.len()], reason))
                    .or_insert(0) += 1;
            }
        }
        for source in SOURCES {
            for reason in ["wait_budget", "queue_full"] {
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
