//! `MetricsObserver` hooks against a `DebuggingRecorder`: names, units, descriptions
//! and values.

mod support;

use std::time::Duration;

use admit::Observer;
use admit_metrics::MetricsObserver;
use metrics::Unit;
use metrics_util::debugging::{DebuggingRecorder, Snapshotter};
use metrics_util::MetricKind;
use support::{counter, gauge, get, histogram, read};

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
        let s = get(&m, name, source);
        assert_eq!(s.kind, kind, "{name}");
        assert_eq!(s.unit, Some(unit), "{name}");
        assert!(s.described, "{name} has no description");
    }
}

#[test]
fn start_sets_capacity_and_registers_every_source_at_zero() {
    let (snapshotter, _observer) = started("upload_sessions", 8);
    let m = read(&snapshotter);
    assert_eq!(gauge(&m, "upload_sessions_capacity_units"), 8.0);
    assert_eq!(gauge(&m, "upload_sessions_units_in_use"), 0.0);
    for source in SOURCES {
        assert_eq!(counter(&m, "upload_sessions_shed_total", source), 0);
    }
    // Exactly the declared sources, nothing else.
    let shed_series = m
        .keys()
        .filter(|(name, _)| name == "upload_sessions_shed_total")
        .count();
    assert_eq!(shed_series, SOURCES.len());
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
fn shed_counts_per_source() {
    let (snapshotter, observer) = started("s", 8);
    observer.on_shed(
        "npm_publish",
        1,
        Duration::from_secs(5),
        admit::ShedReason::WaitBudget,
    );
    observer.on_shed(
        "npm_publish",
        2,
        Duration::from_secs(5),
        admit::ShedReason::WaitBudget,
    );
    observer.on_shed(
        "pypi_upload",
        1,
        Duration::from_secs(5),
        admit::ShedReason::WaitBudget,
    );
    let m = read(&snapshotter);
    assert_eq!(counter(&m, "s_shed_total", "npm_publish"), 2);
    assert_eq!(counter(&m, "s_shed_total", "pypi_upload"), 1);
    assert_eq!(counter(&m, "s_shed_total", "cargo_publish"), 0);
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
        observer.on_shed(
            "not_declared",
            1,
            Duration::from_secs(1),
            admit::ShedReason::WaitBudget,
        );
    });
    let m = read(&snapshotter);
    assert_eq!(counter(&m, "s_shed_total", "not_declared"), 1);
}

/// Handles are resolved once, at start, against the recorder current then: events
/// after the local recorder's scope ended still reach it.
#[test]
fn handles_resolved_at_start_keep_reporting_to_that_recorder() {
    let (snapshotter, observer) = started("s", 4);
    // No recorder is current here: a per-event lookup would reach the no-op recorder.
    observer.on_admit("cargo_publish", 3, Duration::from_millis(500));
    observer.on_shed(
        "cargo_publish",
        1,
        Duration::from_secs(1),
        admit::ShedReason::WaitBudget,
    );
    observer.on_release("cargo_publish", 1, Duration::from_secs(2));
    let m = read(&snapshotter);
    assert_eq!(gauge(&m, "s_units_in_use"), 2.0);
    assert_eq!(histogram(&m, "s_wait_seconds"), vec![0.5]);
    assert_eq!(histogram(&m, "s_hold_seconds"), vec![2.0]);
    assert_eq!(counter(&m, "s_shed_total", "cargo_publish"), 1);
}

#[test]
fn a_second_start_does_not_reset_shed_counts() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let observer = MetricsObserver::new("s");
    metrics::with_local_recorder(&recorder, || {
        observer.on_start(2, SOURCES);
        observer.on_shed(
            "npm_publish",
            1,
            Duration::from_secs(1),
            admit::ShedReason::WaitBudget,
        );
        observer.on_start(2, SOURCES);
    });
    let m = read(&snapshotter);
    assert_eq!(counter(&m, "s_shed_total", "npm_publish"), 1);
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
