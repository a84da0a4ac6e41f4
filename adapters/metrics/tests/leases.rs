//! `<prefix>_leases_ended_total{source, how}` and `<prefix>_lease_hold_seconds{how}`
//! on a real gate (Tokio's paused clock), read back from a `DebuggingRecorder`:
//! every `(source, how)` registered at 0, each end counted once by how, each
//! hold observed under its way of ending.

use std::collections::BTreeMap;
use std::time::Duration;

use admit_metrics::MetricsObserver;
use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};

admit::sources! { enum Route { Upload => "upload", Mirror => "mirror" } }

const IDLE: Duration = Duration::from_secs(30);

/// Every series, by name and labels (`key=value` joined with `,`). A snapshot
/// drains the histograms: read once.
fn read(snapshotter: &Snapshotter) -> BTreeMap<(String, String), DebugValue> {
    snapshotter
        .snapshot()
        .into_vec()
        .into_iter()
        .map(|(ck, _, _, value)| {
            let labels: Vec<String> = ck
                .key()
                .labels()
                .map(|l| format!("{}={}", l.key(), l.value()))
                .collect();
            ((ck.key().name().to_owned(), labels.join(",")), value)
        })
        .collect()
}

#[test]
fn each_lease_end_is_counted_once_by_source_and_how_with_its_hold() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap();
    metrics::with_local_recorder(&recorder, || {
        rt.block_on(async {
            let gate = admit_tokio::gate::<Route>(4)
                .observer(MetricsObserver::new("uploads"))
                .build()
                .unwrap();
            let leases = admit_tokio::leases(&gate, IDLE);
            for id in 0..3 {
                let permit = gate.try_acquire(1, Route::Upload).unwrap();
                leases.insert(id, permit, ()).unwrap();
            }
            tokio::time::advance(Duration::from_secs(2)).await;
            leases.checkout(&0).unwrap().finish();
            leases.checkout(&1).unwrap().cancel();
            tokio::time::sleep(IDLE).await; // 2 expires, 30 s after it was opened
            tokio::task::yield_now().await;
            assert_eq!(gate.in_use(), 0);
        });
    });
    let m = read(&snapshotter);
    let get = |name: &str, labels: &str| m.get(&(name.to_owned(), labels.to_owned()));
    let count = |labels: &str| match get("uploads_leases_ended_total", labels) {
        Some(DebugValue::Counter(n)) => *n,
        other => panic!("{labels}: {other:?}"),
    };
    assert_eq!(count("source=upload,how=finished"), 1);
    assert_eq!(count("source=upload,how=cancelled"), 1);
    assert_eq!(count("source=upload,how=expired"), 1);
    assert_eq!(count("source=upload,how=drained"), 0, "registered at 0");
    assert_eq!(count("source=mirror,how=expired"), 0, "registered at 0");
    let hold = |how: &str| match get("uploads_lease_hold_seconds", &format!("how={how}")) {
        Some(DebugValue::Histogram(v)) => v.iter().map(|x| x.into_inner()).collect::<Vec<_>>(),
        other => panic!("{how}: {other:?}"),
    };
    assert_eq!(hold("finished"), [2.0]);
    assert_eq!(hold("cancelled"), [2.0]);
    assert_eq!(hold("expired"), [30.0]);
}

#[test]
fn a_lease_ending_outside_the_recorder_scope_reaches_the_gates_recorder() {
    // Built under a local recorder (as a server that scopes its recorder to the
    // gate's construction): the end, reported later with none in force, is
    // counted in the recorder the gate registered with.
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let gate = metrics::with_local_recorder(&recorder, || {
        admit::Gate::builder(2)
            .timer(admit::ThreadTimer::new())
            .observer(MetricsObserver::new("scoped"))
            .build()
            .unwrap()
    });
    let leases = admit::Leases::new(&gate, IDLE);
    let permit = gate.try_acquire(1, Route::Mirror).unwrap();
    leases.insert(7, permit, ()).unwrap();
    leases.checkout(&7).unwrap().finish();
    let m = read(&snapshotter);
    assert_eq!(
        m.get(&(
            "scoped_leases_ended_total".to_owned(),
            "source=mirror,how=finished".to_owned()
        )),
        Some(&DebugValue::Counter(1))
    );
}

/// Every way a lease ends, `aged` among them (a lease past `Leases`' maximum
/// age), is registered at 0 for every source, and an aged end is counted and
/// its hold observed under `how="aged"` only.
#[test]
fn every_way_is_registered_and_an_aged_end_is_counted_under_aged() {
    use admit::{LeaseEnd, LeaseEndEvent, Observer, StartEvent};

    const SOURCES: &[&str] = &["upload", "mirror"];
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let observer = MetricsObserver::new("s");
    metrics::with_local_recorder(&recorder, || {
        observer.on_start(&StartEvent::new(4, SOURCES));
    });
    // After the recorder's scope: on the handles resolved at start.
    observer.on_lease_end(&LeaseEndEvent::new(
        "upload",
        2,
        Duration::from_secs(600),
        LeaseEnd::Aged,
    ));
    let m = read(&snapshotter);
    let counters: BTreeMap<&str, u64> = m
        .iter()
        .filter(|((name, _), _)| name == "s_leases_ended_total")
        .map(|((_, labels), value)| match value {
            DebugValue::Counter(n) => (labels.as_str(), *n),
            other => panic!("{labels}: {other:?}"),
        })
        .collect();
    assert_eq!(counters.len(), SOURCES.len() * LeaseEnd::ALL.len());
    assert!(LeaseEnd::ALL.contains(&LeaseEnd::Aged));
    for source in SOURCES {
        for how in LeaseEnd::ALL {
            let labels = format!("source={source},how={}", how.label());
            let want = u64::from(*source == "upload" && how == LeaseEnd::Aged);
            assert_eq!(counters.get(labels.as_str()), Some(&want), "{labels}");
        }
    }
    for how in LeaseEnd::ALL {
        let key = (
            "s_lease_hold_seconds".to_owned(),
            format!("how={}", how.label()),
        );
        let Some(DebugValue::Histogram(v)) = m.get(&key) else {
            panic!("{key:?}: {:?}", m.get(&key));
        };
        let held: Vec<f64> = v.iter().map(|x| x.into_inner()).collect();
        if how == LeaseEnd::Aged {
            assert_eq!(held, [600.0]);
        } else {
            assert!(held.is_empty(), "{key:?}: {held:?}");
        }
    }
}
