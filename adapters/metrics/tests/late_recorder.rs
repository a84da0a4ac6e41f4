//! A recorder installed (globally, as an application does) after the gate was
//! built still receives the gate's metrics, caught up with what happened before.
//! Its own test binary: it installs the process-wide recorder.

mod support;

use std::time::Duration;

use admit::GateError;
use admit_metrics::MetricsObserver;
use metrics_util::debugging::DebuggingRecorder;
use support::{counter, gauge, get, histogram, read};

admit::sources! {
    enum Route { Upload => "upload", Mirror => "mirror" }
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_recorder_installed_after_the_gate_is_caught_up_and_then_receives_everything() {
    // No recorder yet: the application built its gate first. `max_waiters(0)`: an
    // acquire that would park is shed at once for the queue; a `try_acquire` that
    // finds no unit is a no-wait shed.
    let gate = admit_tokio::gate(3)
        .max_units(2)
        .wait_budget(Duration::from_secs(1))
        .max_waiters(0)
        .observer(MetricsObserver::new("late"))
        .build()
        .unwrap();
    let held = gate.acquire(2, Route::Mirror).await.unwrap();
    let first = gate.acquire(1, Route::Upload).await.unwrap();
    assert!(matches!(
        gate.acquire(1, Route::Upload).await,
        Err(GateError::Busy { .. })
    ));
    assert!(gate.try_acquire(1, Route::Mirror).unwrap_err().is_shed());
    assert_eq!(gate.resize(4).unwrap(), 3);

    // Now the recorder.
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    metrics::set_global_recorder(recorder).unwrap();

    // The next event catches it up: capacity, units held now, admissions and
    // sheds so far per source (and reason).
    drop(first);
    let m = read(&snapshotter);
    assert_eq!(gauge(&m, "late_capacity_units"), 4.0, "the resize");
    assert_eq!(gauge(&m, "late_units_in_use"), 2.0, "the mirror still held");
    assert_eq!(counter(&m, "late_shed_total", "upload", "queue_full"), 1);
    assert_eq!(counter(&m, "late_shed_total", "upload", "wait_budget"), 0);
    assert_eq!(counter(&m, "late_shed_total", "mirror", "no_wait"), 1);
    assert_eq!(counter(&m, "late_shed_total", "mirror", "wait_budget"), 0);
    assert_eq!(counter(&m, "late_shed_total", "mirror", "queue_full"), 0);
    assert_eq!(counter(&m, "late_admitted_total", "mirror", ""), 1);
    assert_eq!(counter(&m, "late_admitted_total", "upload", ""), 1);
    assert_eq!(histogram(&m, "late_hold_seconds").len(), 1, "this release");
    assert!(get(&m, "late_units_in_use", "", "").described);

    // From then on, every event. (Reading the debugging recorder resets its gauges
    // and counters: the values below are changes since the read above.)
    tokio::time::sleep(Duration::from_secs(2)).await;
    drop(held);
    let upload = gate.acquire(1, Route::Upload).await.unwrap();
    gate.resize(5).unwrap();
    let m = read(&snapshotter);
    assert_eq!(gauge(&m, "late_units_in_use"), -1.0, "2 held -> 1 held");
    assert_eq!(gauge(&m, "late_capacity_units"), 5.0);
    assert_eq!(histogram(&m, "late_hold_seconds"), vec![2.0]);
    assert_eq!(histogram(&m, "late_wait_seconds"), vec![0.0]);
    assert_eq!(counter(&m, "late_admitted_total", "upload", ""), 1);
    assert_eq!(counter(&m, "late_admitted_total", "mirror", ""), 0);
    drop(upload);
    assert_eq!(gauge(&read(&snapshotter), "late_units_in_use"), -1.0);
}
