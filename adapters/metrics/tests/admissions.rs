//! `<prefix>_admitted_total{source, priority}`, read back from a
//! `DebuggingRecorder`: every source × class registered at 0 and described,
//! each admission counted once under its own call site and class (a shed is
//! not one), on the observer's hooks and on a real gate, and the admissions
//! made before a recorder handed over to it.

mod support;

use std::collections::BTreeMap;
use std::time::Duration;

use admit::{AdmitEvent, Observer, Priority, ShedEvent, ShedReason, StartEvent};
use admit_metrics::MetricsObserver;
use metrics::Unit;
use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};
use metrics_util::MetricKind;

const SOURCES: &[&str] = &["npm_publish", "cargo_publish", "pypi_upload"];

/// Every `<name>` counter by `(source, priority)`. A read resets the
/// recorder's counters: read once, at the point a test checks.
fn admitted(snapshotter: &Snapshotter, name: &str) -> BTreeMap<(String, String), u64> {
    support::read_by_priority(snapshotter)
        .into_iter()
        .filter(|((n, ..), _)| n == name)
        .map(|((_, source, _, priority), series)| {
            assert_eq!(series.kind, MetricKind::Counter, "{name}");
            assert_eq!(series.unit, Some(Unit::Count), "{name}");
            assert!(series.described, "{name} is not described");
            match series.value {
                DebugValue::Counter(n) => ((source, priority), n),
                other => panic!("{name}: {other:?}"),
            }
        })
        .collect()
}

/// Every `(source, class)` of `sources` at 0 but those in `counts`.
fn expected(sources: &[&str], counts: &[(&str, Priority, u64)]) -> BTreeMap<(String, String), u64> {
    let mut out = BTreeMap::new();
    for &source in sources {
        for priority in Priority::ALL {
            out.insert((source.to_owned(), priority.label().to_owned()), 0);
        }
    }
    for &(source, priority, n) in counts {
        out.insert((source.to_owned(), priority.label().to_owned()), n);
    }
    out
}

fn admit(source: &'static str, priority: Priority) -> AdmitEvent {
    AdmitEvent::new(source, 1, Duration::ZERO).with_priority(priority)
}

#[test]
fn start_registers_every_source_and_class_at_zero_described() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let observer = MetricsObserver::new("s");
    metrics::with_local_recorder(&recorder, || {
        observer.on_start(&StartEvent::new(4, SOURCES));
    });
    // Exactly the declared sources × every class, each at 0.
    assert_eq!(
        admitted(&snapshotter, "s_admitted_total"),
        expected(SOURCES, &[])
    );
}

#[test]
fn each_admission_counts_once_under_its_source_and_class() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let observer = MetricsObserver::new("s");
    metrics::with_local_recorder(&recorder, || {
        observer.on_start(&StartEvent::new(8, SOURCES));
    });
    // After the recorder's scope: on the handles resolved at start.
    observer.on_admit(&admit("npm_publish", Priority::Critical));
    observer.on_admit(&admit("npm_publish", Priority::Critical));
    observer.on_admit(&admit("npm_publish", Priority::Sheddable));
    // Units and waits do not change the count: one per admission.
    observer.on_admit(
        &AdmitEvent::new("pypi_upload", 3, Duration::from_secs(2))
            .with_priority(Priority::CriticalPlus),
    );
    // A shed is not an admission.
    observer.on_shed(&ShedEvent::new(
        "cargo_publish",
        1,
        Duration::ZERO,
        ShedReason::QueueFull,
        Duration::from_secs(1),
    ));
    assert_eq!(
        admitted(&snapshotter, "s_admitted_total"),
        expected(
            SOURCES,
            &[
                ("npm_publish", Priority::Critical, 2),
                ("npm_publish", Priority::Sheddable, 1),
                ("pypi_upload", Priority::CriticalPlus, 1),
            ]
        )
    );
}

#[test]
fn an_admission_from_an_undeclared_label_is_still_counted() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let observer = MetricsObserver::new("s");
    metrics::with_local_recorder(&recorder, || {
        observer.on_start(&StartEvent::new(4, SOURCES));
        observer.on_admit(&admit("not_declared", Priority::Critical));
    });
    let counts = admitted(&snapshotter, "s_admitted_total");
    assert_eq!(
        counts.get(&("not_declared".to_owned(), "critical".to_owned())),
        Some(&1)
    );
}

/// As sheds are: the observer counts the admissions made before any recorder,
/// and the first event that finds one brings each series to its count; later
/// admissions go to the handles.
#[test]
fn a_late_recorder_is_caught_up_with_the_admissions_before_it() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let observer = MetricsObserver::new("late");
    observer.on_start(&StartEvent::new(4, SOURCES)); // no recorder in force
    observer.on_admit(&admit("cargo_publish", Priority::SheddablePlus));
    observer.on_admit(&admit("cargo_publish", Priority::SheddablePlus));
    observer.on_admit(&admit("npm_publish", Priority::Critical));
    // The admission that finds the recorder is counted once, with the others.
    metrics::with_local_recorder(&recorder, || {
        observer.on_admit(&admit("npm_publish", Priority::Critical));
    });
    // Resolved: the next admission goes to the handles.
    observer.on_admit(&admit("pypi_upload", Priority::Sheddable));
    assert_eq!(
        admitted(&snapshotter, "late_admitted_total"),
        expected(
            SOURCES,
            &[
                ("cargo_publish", Priority::SheddablePlus, 2),
                ("npm_publish", Priority::Critical, 2),
                ("pypi_upload", Priority::Sheddable, 1),
            ]
        )
    );
}

admit::sources! {
    enum Route { Upload => "upload", Mirror => "mirror" }
}

/// On a real gate (Tokio's paused clock): an admission at once, one after a
/// wait, one of each class; a shed and a refused `try_acquire` count nothing.
#[test]
fn a_gate_counts_its_admissions_per_source_and_class() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let rt = support::paused_runtime();
    metrics::with_local_recorder(&recorder, || {
        rt.block_on(async {
            let gate = admit_tokio::gate::<Route>(2)
                .max_units(2)
                .wait_budget(Duration::from_secs(5))
                .observer(MetricsObserver::new("uploads"))
                .build()
                .unwrap();
            let held = gate.acquire(2, Route::Upload).await.unwrap();
            // Shed at once: nothing free, and it may not wait.
            assert!(gate.try_acquire(1, Route::Mirror).unwrap_err().is_shed());
            // Waits for `held`'s units, then gets in.
            let waiter = tokio::spawn({
                let gate = gate.clone();
                async move {
                    gate.acquire(1, Route::Mirror)
                        .priority(Priority::Sheddable)
                        .await
                        .unwrap()
                }
            });
            tokio::time::sleep(Duration::from_secs(1)).await;
            drop(held);
            drop(waiter.await.unwrap());
            for priority in Priority::ALL {
                drop(gate.acquire(1, Route::Upload).priority(priority).await);
            }
        });
    });
    assert_eq!(
        admitted(&snapshotter, "uploads_admitted_total"),
        expected(
            &["upload", "mirror"],
            &[
                ("upload", Priority::CriticalPlus, 1),
                ("upload", Priority::Critical, 2),
                ("upload", Priority::SheddablePlus, 1),
                ("upload", Priority::Sheddable, 1),
                ("mirror", Priority::Sheddable, 1),
            ]
        )
    );
}
