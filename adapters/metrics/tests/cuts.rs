//! `<prefix>_cuts_total{source, reason}`: the requests a progress rule cut,
//! against a `DebuggingRecorder`. Every source × reason is registered at 0 when
//! the gate starts, a cut adds one to its own series and to no other, and cuts
//! before any recorder are caught up as sheds are.

mod support;

use std::time::Duration;

use admit::{AdmitEvent, CutEvent, CutReason, Observer, StartEvent};
use admit_metrics::MetricsObserver;
use metrics::Unit;
use metrics_util::debugging::{DebuggingRecorder, Snapshotter};
use metrics_util::MetricKind;
use support::{counter, gauge, get, read, Key, Series};

const SOURCES: &[&str] = &["npm_publish", "cargo_publish", "pypi_upload"];

/// A recorder, and an observer started (as a gate's build does) with it current.
fn started(prefix: &str) -> (Snapshotter, MetricsObserver) {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let observer = MetricsObserver::new(prefix);
    metrics::with_local_recorder(&recorder, || {
        observer.on_start(&StartEvent::new(4, SOURCES))
    });
    (snapshotter, observer)
}

/// A cut of `reason` at `source`, holding one unit.
fn cut(source: &'static str, reason: CutReason) -> CutEvent {
    CutEvent::new(source, 1, reason, Duration::from_secs(30))
}

/// Every `name` series, with its `(source, reason)` and count.
fn counts(m: &std::collections::HashMap<Key, Series>, name: &str) -> Vec<(String, String, u64)> {
    let mut out: Vec<_> = m
        .keys()
        .filter(|(n, _, _)| n == name)
        .map(|(_, source, reason)| {
            (
                source.clone(),
                reason.clone(),
                counter(m, name, source, reason),
            )
        })
        .collect();
    out.sort();
    out
}

#[test]
fn start_registers_every_source_and_reason_at_zero_described() {
    let (snapshotter, _observer) = started("s");
    let m = read(&snapshotter);
    for source in SOURCES {
        for reason in CutReason::ALL {
            let series = get(&m, "s_cuts_total", source, reason.label());
            assert_eq!(series.kind, MetricKind::Counter);
            assert_eq!(series.unit, Some(Unit::Count));
            assert!(series.described, "s_cuts_total has no description");
            assert_eq!(counter(&m, "s_cuts_total", source, reason.label()), 0);
        }
    }
    // Exactly the declared sources × every reason, nothing else.
    assert_eq!(
        counts(&m, "s_cuts_total").len(),
        SOURCES.len() * CutReason::ALL.len()
    );
}

/// The description says what each reason means (a reason added to `admit` must
/// be explained there too).
#[test]
fn the_description_explains_every_reason() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let observer = MetricsObserver::new("s");
    metrics::with_local_recorder(&recorder, || {
        observer.on_start(&StartEvent::new(1, SOURCES))
    });
    let description = snapshotter
        .snapshot()
        .into_vec()
        .into_iter()
        .find(|(ck, ..)| ck.key().name() == "s_cuts_total")
        .and_then(|(_, _, description, _)| description)
        .expect("s_cuts_total is described");
    for reason in CutReason::ALL {
        assert!(
            description.contains(&format!("{}:", reason.label())),
            "the description does not explain {:?}: {description}",
            reason.label()
        );
    }
}

#[test]
fn each_cut_adds_one_to_its_own_series_only() {
    for &source in SOURCES {
        for reason in CutReason::ALL {
            let (snapshotter, observer) = started("s");
            // After the recorder's scope: on the handles resolved at start.
            observer.on_cut(&cut(source, reason));
            let m = read(&snapshotter);
            for (s, r, n) in counts(&m, "s_cuts_total") {
                let want = u64::from(s == source && r == reason.label());
                assert_eq!(n, want, "a cut of {source} {reason:?}: {s} {r} reads {n}");
            }
            // A cut is neither a shed nor a release (its units' own release follows).
            assert!(counts(&m, "s_shed_total").iter().all(|&(.., n)| n == 0));
            assert_eq!(gauge(&m, "s_units_in_use"), 0.0);
        }
    }
}

#[test]
fn cuts_add_up_per_source_and_reason() {
    let (snapshotter, observer) = started("s");
    let [first, second, ..] = CutReason::ALL;
    observer.on_cut(&cut("npm_publish", first));
    observer.on_cut(&cut("npm_publish", first));
    observer.on_cut(&cut("npm_publish", second));
    observer.on_cut(&cut("pypi_upload", first));
    let m = read(&snapshotter);
    assert_eq!(counter(&m, "s_cuts_total", "npm_publish", first.label()), 2);
    assert_eq!(
        counter(&m, "s_cuts_total", "npm_publish", second.label()),
        1
    );
    assert_eq!(counter(&m, "s_cuts_total", "pypi_upload", first.label()), 1);
    assert_eq!(
        counter(&m, "s_cuts_total", "pypi_upload", second.label()),
        0
    );
    let total: u64 = counts(&m, "s_cuts_total").iter().map(|&(.., n)| n).sum();
    assert_eq!(total, 4);
}

/// As an undeclared shed: it has no handle of its own, so it goes through the
/// facade to the recorder in force.
#[test]
fn a_cut_from_an_undeclared_label_is_still_counted() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let observer = MetricsObserver::new("s");
    metrics::with_local_recorder(&recorder, || {
        observer.on_start(&StartEvent::new(1, SOURCES));
        observer.on_cut(&cut("not_declared", CutReason::ALL[0]));
    });
    let m = read(&snapshotter);
    assert_eq!(
        counter(
            &m,
            "s_cuts_total",
            "not_declared",
            CutReason::ALL[0].label()
        ),
        1
    );
}

/// As sheds are: the observer counts the cuts made before any recorder, and the
/// first event that finds one brings each series to its count.
#[test]
fn a_late_recorder_is_caught_up_with_the_cuts_before_it() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let observer = MetricsObserver::new("late");
    observer.on_start(&StartEvent::new(4, SOURCES)); // no recorder in force
    let reason = CutReason::ALL[CutReason::ALL.len() - 1];
    observer.on_cut(&cut("cargo_publish", reason));
    observer.on_cut(&cut("cargo_publish", reason));
    metrics::with_local_recorder(&recorder, || {
        observer.on_admit(&AdmitEvent::new("npm_publish", 1, Duration::ZERO));
    });
    // Resolved: the next cut goes to the handles.
    observer.on_cut(&cut("npm_publish", reason));
    let m = read(&snapshotter);
    assert_eq!(
        counter(&m, "late_cuts_total", "cargo_publish", reason.label()),
        2
    );
    assert_eq!(
        counter(&m, "late_cuts_total", "npm_publish", reason.label()),
        1
    );
    assert_eq!(
        counts(&m, "late_cuts_total").len(),
        SOURCES.len() * CutReason::ALL.len(),
        "every series registered at the catch-up"
    );
}
