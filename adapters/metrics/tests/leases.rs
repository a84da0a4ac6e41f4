//! `<prefix>_leases_ended_total{source, how}` and `<prefix>_lease_hold_seconds{how}`
//! on a real gate (Tokio's paused clock), read back from a `DebuggingRecorder`:
//! every `(source, how)` registered at 0, each end counted once by how, each
//! hold observed under its way of ending. And `<prefix>_leases_live{source}` on
//! a real table: registered at 0 per source, following its starts and ends, and
//! handed to a late recorder at the count in force.

mod support;

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
    let rt = support::paused_runtime();
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

/// The `<prefix>_leases_live` gauges, by source, as the recorder's reads add
/// up: a read resets its gauges to 0, so each read is the change since the
/// one before.
#[derive(Debug, Default)]
struct Live(BTreeMap<String, f64>);

impl Live {
    /// The gauges now (a read of the recorder: every series is reset).
    fn read(&mut self, snapshotter: &Snapshotter, prefix: &str) -> Vec<(String, f64)> {
        let name = format!("{prefix}_leases_live");
        for ((n, labels), value) in read(snapshotter) {
            if n != name {
                continue;
            }
            let source = labels
                .strip_prefix("source=")
                .unwrap_or_else(|| panic!("{n}: labels {labels:?}"));
            let DebugValue::Gauge(delta) = value else {
                panic!("{n}{{{labels}}} is not a gauge: {value:?}");
            };
            *self.0.entry(source.to_owned()).or_default() += delta.into_inner();
        }
        self.0.iter().map(|(s, &v)| (s.clone(), v)).collect()
    }
}

/// `[(source, live)]` in the order [`Live::read`] gives (by source label).
fn live(upload: f64, mirror: f64) -> Vec<(String, f64)> {
    vec![("mirror".to_owned(), mirror), ("upload".to_owned(), upload)]
}

fn thread_timer_gate(prefix: &str) -> admit::Gate<Route, admit::ThreadTimer, MetricsObserver> {
    admit::Gate::builder(5)
        .timer(admit::ThreadTimer::new())
        .observer(MetricsObserver::new(prefix))
        .build()
        .unwrap()
}

/// A lease is live from its insert to its end, whichever way it ends; a
/// refused insert or a checkout given back moves nothing.
#[test]
fn leases_live_follows_starts_and_ends_per_source() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let gate = metrics::with_local_recorder(&recorder, || thread_timer_gate("live"));
    let leases = admit::Leases::new(&gate, IDLE);
    let mut gauges = Live::default();
    assert_eq!(
        gauges.read(&snapshotter, "live"),
        live(0.0, 0.0),
        "registered"
    );

    for id in 0..3 {
        let permit = gate.try_acquire(1, Route::Upload).unwrap();
        leases.insert(id, permit, ()).unwrap();
    }
    let permit = gate.try_acquire(1, Route::Mirror).unwrap();
    leases.insert(3, permit, ()).unwrap();
    assert_eq!(gauges.read(&snapshotter, "live"), live(3.0, 1.0));

    // An id already live: the insert is refused, nothing starts.
    let permit = gate.try_acquire(1, Route::Mirror).unwrap();
    let (permit, ()) = leases.insert(0, permit, ()).unwrap_err();
    drop(permit);
    // A checkout given back leaves the lease live.
    drop(leases.checkout(&2).unwrap());
    assert_eq!(gauges.read(&snapshotter, "live"), live(3.0, 1.0));

    leases.checkout(&0).unwrap().finish();
    leases.checkout(&1).unwrap().cancel();
    leases.checkout(&3).unwrap().finish();
    assert_eq!(gauges.read(&snapshotter, "live"), live(1.0, 0.0));
    leases.checkout(&2).unwrap().finish();
    assert_eq!(gauges.read(&snapshotter, "live"), live(0.0, 0.0));
    assert_eq!(gate.in_use(), 0);
}

/// A table whose gate was built before any recorder: the first event that
/// finds one (here a lease's end) brings each source's gauge to the leases
/// live at that moment; later starts and ends go to its handles.
#[test]
fn a_late_recorder_gets_the_leases_live_in_force() {
    let gate = thread_timer_gate("late"); // no recorder in force
    let leases = admit::Leases::new(&gate, IDLE);
    for id in 0..3 {
        let permit = gate.try_acquire(1, Route::Upload).unwrap();
        leases.insert(id, permit, ()).unwrap();
    }
    let permit = gate.try_acquire(1, Route::Mirror).unwrap();
    leases.insert(3, permit, ()).unwrap();
    leases.checkout(&0).unwrap().finish();

    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    metrics::with_local_recorder(&recorder, || leases.checkout(&1).unwrap().finish());
    let mut gauges = Live::default();
    assert_eq!(gauges.read(&snapshotter, "late"), live(1.0, 1.0));

    // Resolved: the recorder gets each start and end, in its scope or not.
    let permit = gate.try_acquire(1, Route::Mirror).unwrap();
    leases.insert(4, permit, ()).unwrap();
    assert_eq!(gauges.read(&snapshotter, "late"), live(1.0, 2.0));
    leases.checkout(&3).unwrap().cancel();
    leases.checkout(&2).unwrap().finish();
    assert_eq!(gauges.read(&snapshotter, "late"), live(0.0, 1.0));
}
