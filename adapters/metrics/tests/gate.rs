//! `MetricsObserver` on a real gate (Tokio's paused clock), read back from a
//! `DebuggingRecorder`: the values follow what the gate did.

mod support;

use std::future::{poll_fn, Future};
use std::pin::Pin;
use std::task::Poll;
use std::time::Duration;

use admit::{Gate, GateError};
use admit_metrics::MetricsObserver;
use admit_tokio::TokioTimer;
use metrics_util::debugging::DebuggingRecorder;
use support::{counter, gauge, histogram, read, sheds};

admit::sources! {
    /// Call sites of the tests.
    enum Route {
        Upload => "upload",
        Mirror => "mirror",
        Scrub => "scrub",
    }
}

const BUDGET: Duration = Duration::from_secs(5);

/// Polls `f` once, without waiting.
async fn poll_once<F: Future>(f: Pin<&mut F>) -> Poll<F::Output> {
    let mut f = Some(f);
    poll_fn(|cx| Poll::Ready(f.take().unwrap().poll(cx))).await
}

/// Runs `test` on a paused-clock Tokio runtime, with `recorder` current while the
/// gate is built (the handles are resolved then). Whatever `test` returns (e.g.
/// permits still held) lives until the caller drops it.
fn run<T, F: std::future::Future<Output = T>>(recorder: &DebuggingRecorder, test: F) -> T {
    let rt = support::paused_runtime();
    metrics::with_local_recorder(recorder, || rt.block_on(test))
}

fn gate(capacity: usize) -> Gate<Route, TokioTimer, MetricsObserver> {
    admit_tokio::gate(capacity)
        .wait_budget(BUDGET)
        .max_units(2)
        .observer(MetricsObserver::new("uploads"))
        .build()
        .unwrap()
}

#[test]
fn a_new_gate_reads_capacity_and_zeros_for_every_source() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    run(&recorder, async {
        let _gate = gate(3);
    });
    let m = read(&snapshotter);
    assert_eq!(gauge(&m, "uploads_capacity_units"), 3.0);
    assert_eq!(gauge(&m, "uploads_capacity_over_budget_units"), 0.0);
    assert_eq!(gauge(&m, "uploads_units_in_use"), 0.0);
    assert_eq!(
        gauge(&m, "uploads_overloaded"),
        0.0,
        "no overload target: 0"
    );
    for source in ["upload", "mirror", "scrub"] {
        for reason in admit::ShedReason::ALL.map(admit::ShedReason::label) {
            assert_eq!(counter(&m, "uploads_shed_total", source, reason), 0);
        }
    }
}

#[test]
fn gauge_histograms_and_shed_counter_follow_the_gate() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let _b = run(&recorder, async {
        let gate = gate(3);
        let a = gate.acquire(2, Route::Upload).await.unwrap();
        let b = gate.acquire(1, Route::Mirror).await.unwrap();

        // Full: a budget expiry is a shed for its source...
        let busy = gate.acquire(1, Route::Upload).await.unwrap_err();
        assert!(busy.is_shed());
        // ...a cancellation and an oversize request are not.
        let cancelled = gate
            .acquire(1, Route::Mirror)
            .until(async {})
            .await
            .unwrap_err();
        assert_eq!(cancelled, GateError::Cancelled);
        let oversize = gate.acquire(4, Route::Scrub).await.unwrap_err();
        assert!(matches!(oversize, GateError::ExceedsMaxUnits { .. }));

        // `a` has been held for the 5 s budget; hold it 1 s more.
        tokio::time::advance(Duration::from_secs(1)).await;
        drop(a);
        assert_eq!(gate.in_use(), 1);
        b // still held at the snapshot
    });
    let m = read(&snapshotter);
    assert_eq!(gauge(&m, "uploads_units_in_use"), 1.0);
    assert_eq!(gauge(&m, "uploads_capacity_units"), 3.0);
    assert_eq!(histogram(&m, "uploads_hold_seconds"), vec![6.0]);
    assert_eq!(histogram(&m, "uploads_wait_seconds"), vec![0.0, 0.0]);
    assert_eq!(
        counter(&m, "uploads_shed_total", "upload", "wait_budget"),
        1
    );
    assert_eq!(sheds(&m, "uploads_shed_total", "upload"), 1);
    assert_eq!(sheds(&m, "uploads_shed_total", "mirror"), 0);
    assert_eq!(sheds(&m, "uploads_shed_total", "scrub"), 0);
}

#[test]
fn wait_seconds_records_how_long_an_admitted_caller_waited() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let _permit = run(&recorder, async {
        let gate = gate(2);
        let held = gate.acquire(2, Route::Upload).await.unwrap();
        let waiter = tokio::spawn({
            let gate = gate.clone();
            async move { gate.acquire(2, Route::Mirror).await }
        });
        while gate.waiters() == 0 {
            tokio::task::yield_now().await;
        }
        tokio::time::advance(Duration::from_millis(1500)).await;
        drop(held);
        let permit = waiter.await.unwrap().unwrap();
        assert_eq!(gate.in_use(), 2);
        permit // still held at the snapshot
    });
    let m = read(&snapshotter);
    assert_eq!(histogram(&m, "uploads_wait_seconds"), vec![0.0, 1.5]);
    assert_eq!(histogram(&m, "uploads_hold_seconds"), vec![1.5]);
    assert_eq!(gauge(&m, "uploads_units_in_use"), 2.0);
    assert_eq!(sheds(&m, "uploads_shed_total", "mirror"), 0);
}

#[test]
fn queue_full_sheds_are_told_apart_and_a_resize_moves_the_capacity_gauge() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let _held = run(&recorder, async {
        let gate = admit_tokio::gate(2)
            .wait_budget(BUDGET)
            .max_units(2)
            .max_waiters(1)
            .observer(MetricsObserver::new("uploads"))
            .build()
            .unwrap();
        let held = gate.acquire(2, Route::Upload).await.unwrap();
        let parked = tokio::spawn({
            let gate = gate.clone();
            async move { gate.acquire(1, Route::Mirror).await }
        });
        while gate.waiters() == 0 {
            tokio::task::yield_now().await;
        }
        // One parked already: the next is shed at once, for the queue, not the budget.
        let started = tokio::time::Instant::now();
        assert!(gate.acquire(1, Route::Scrub).await.unwrap_err().is_shed());
        assert_eq!(started.elapsed(), Duration::ZERO);
        // The parked one outlives its budget: a wait-budget shed.
        assert!(parked.await.unwrap().unwrap_err().is_shed());

        gate.resize(5).unwrap();
        held
    });
    let m = read(&snapshotter);
    assert_eq!(counter(&m, "uploads_shed_total", "scrub", "queue_full"), 1);
    assert_eq!(counter(&m, "uploads_shed_total", "scrub", "wait_budget"), 0);
    assert_eq!(
        counter(&m, "uploads_shed_total", "mirror", "wait_budget"),
        1
    );
    assert_eq!(counter(&m, "uploads_shed_total", "mirror", "queue_full"), 0);
    assert_eq!(gauge(&m, "uploads_capacity_units"), 5.0);
    assert_eq!(gauge(&m, "uploads_units_in_use"), 2.0);
}

/// A standing queue on a gate with an overload target (500 ms): every unit is held
/// 1 s and two requests queue behind the holder, so waits stay above the target;
/// the interval is two mean holds (2 s), and the first one that holds only long
/// waits ends at 5 s. The gate turns overloaded (the gauge reads 1), a newcomer is
/// shed at arrival as hopeless, and the request parked for twice the target is
/// shed for the overload.
#[test]
fn an_overloaded_gate_sets_the_gauge_and_counts_hopeless_and_overload_sheds() {
    const TARGET: Duration = Duration::from_millis(500);
    const HOLD: Duration = Duration::from_secs(1);
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let _held = run(&recorder, async {
        let gate = admit_tokio::gate(1)
            .wait_budget(BUDGET)
            .overload_target(TARGET)
            .observer(MetricsObserver::new("uploads"))
            .build()
            .unwrap();
        // The pace: a unit held 1 s (a full gate returns one unit a second).
        let p = gate.acquire(1, Route::Upload).await.unwrap();
        tokio::time::advance(HOLD).await;
        drop(p);

        // t = 1 s: the holder, and two requests queued behind it.
        let mut held = gate.acquire(1, Route::Upload).await.unwrap();
        let mut queue: std::collections::VecDeque<Pin<Box<_>>> = std::collections::VecDeque::new();
        for route in [Route::Mirror, Route::Mirror] {
            let mut w = Box::pin(gate.acquire(1, route));
            assert!(poll_once(w.as_mut()).await.is_pending());
            queue.push_back(w);
        }
        // Each second the holder releases, the head is admitted, a newcomer parks.
        for t in 2..=5 {
            tokio::time::advance(HOLD).await;
            drop(held);
            let mut head = queue.pop_front().unwrap();
            let Poll::Ready(Ok(permit)) = poll_once(head.as_mut()).await else {
                panic!("the head is next at {t} s")
            };
            held = permit;
            assert_eq!(gate.is_overloaded(), t == 5, "at {t} s");
            if t < 5 {
                let mut w = Box::pin(gate.acquire(1, Route::Scrub));
                assert!(poll_once(w.as_mut()).await.is_pending());
                queue.push_back(w);
            }
        }

        // Overloaded, nobody waits more than 1 s; a newcomer behind one would wait
        // 2 s: shed at arrival, no virtual time passing.
        let started = tokio::time::Instant::now();
        let hopeless = gate.acquire(1, Route::Upload).await.unwrap_err();
        assert_eq!(started.elapsed(), Duration::ZERO, "shed at arrival");
        assert!(matches!(hopeless, GateError::Busy { .. }));
        assert_eq!(gate.waiters(), 1, "it never stayed in the queue");

        // The one parked at 4 s has waited twice the target: shed for the overload.
        let last = queue.pop_front().unwrap();
        assert!(last.await.unwrap_err().is_shed());
        assert_eq!(started.elapsed(), Duration::ZERO);
        held // still held at the snapshot
    });
    let m = read(&snapshotter);
    assert_eq!(gauge(&m, "uploads_overloaded"), 1.0);
    assert_eq!(counter(&m, "uploads_shed_total", "upload", "hopeless"), 1);
    assert_eq!(counter(&m, "uploads_shed_total", "scrub", "overload"), 1);
    assert_eq!(sheds(&m, "uploads_shed_total", "upload"), 1);
    assert_eq!(sheds(&m, "uploads_shed_total", "scrub"), 1);
    assert_eq!(sheds(&m, "uploads_shed_total", "mirror"), 0);
    assert_eq!(
        histogram(&m, "uploads_wait_seconds"),
        vec![0.0, 0.0, 1.0, 2.0, 2.0, 2.0]
    );
    assert_eq!(histogram(&m, "uploads_hold_seconds"), vec![1.0; 5]);
    assert_eq!(gauge(&m, "uploads_units_in_use"), 1.0);
}

#[test]
fn sheds_and_waits_carry_the_priority_class() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let _held = run(&recorder, async {
        let gate = gate(2);
        let held = gate.acquire(2, Route::Upload).await.unwrap();
        let shed = gate
            .acquire(1, Route::Mirror)
            .priority(admit::Priority::Sheddable)
            .try_now()
            .unwrap_err();
        assert!(shed.is_shed());
        held
    });
    let m = support::read_by_priority(&snapshotter);
    let count = |source: &str, reason: &str, priority: &str| {
        let key = (
            "uploads_shed_total".to_owned(),
            source.to_owned(),
            reason.to_owned(),
            priority.to_owned(),
        );
        match &m
            .get(&key)
            .unwrap_or_else(|| panic!("no series {key:?}"))
            .value
        {
            metrics_util::debugging::DebugValue::Counter(v) => *v,
            other => panic!("{other:?}"),
        }
    };
    // Every class's series exists from the start, at 0 but the one shed.
    for priority in admit::Priority::ALL.map(admit::Priority::label) {
        let expected = u64::from(priority == "sheddable");
        assert_eq!(count("mirror", "no_wait", priority), expected, "{priority}");
        assert_eq!(count("upload", "no_wait", priority), 0);
    }
    let waits = (
        "uploads_wait_seconds".to_owned(),
        String::new(),
        String::new(),
        "critical".to_owned(),
    );
    assert!(
        matches!(&m[&waits].value, metrics_util::debugging::DebugValue::Histogram(v) if v.len() == 1),
        "the admission's wait, under its class"
    );
}

#[test]
fn a_capacity_raised_above_its_memory_budget_reads_how_far() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let gate = run(&recorder, async {
        // 1 unit's worth of memory, raised to max_units 2.
        admit_tokio::gate::<Route>(admit::Capacity::from_memory_budget(100, 100))
            .max_units(2)
            .observer(MetricsObserver::new("uploads"))
            .build()
            .unwrap()
    });
    let m = read(&snapshotter);
    assert_eq!(gauge(&m, "uploads_capacity_units"), 2.0);
    assert_eq!(gauge(&m, "uploads_capacity_over_budget_units"), 1.0);

    // A budget that covers the floor: back to 0.
    metrics::with_local_recorder(&recorder, || {
        gate.resize(admit::Capacity::from_memory_budget(300, 100))
            .unwrap();
    });
    let m = read(&snapshotter);
    assert_eq!(gauge(&m, "uploads_capacity_units"), 3.0);
    assert_eq!(gauge(&m, "uploads_capacity_over_budget_units"), 0.0);

    // None at all: both units are over it.
    metrics::with_local_recorder(&recorder, || {
        gate.resize(admit::Capacity::from_memory_budget(0, 100))
            .unwrap();
    });
    let m = read(&snapshotter);
    assert_eq!(gauge(&m, "uploads_capacity_units"), 2.0);
    assert_eq!(gauge(&m, "uploads_capacity_over_budget_units"), 2.0);
}

#[test]
fn the_memory_watch_shows_its_reading_and_its_sheds() {
    const MIB: u64 = 1 << 20;
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let (gate, held) = run(&recorder, async {
        // 160 MiB with 10 MiB in use: (144 − 10) / 8 = 16 units for
        // `critical_plus`, 15 for `critical`, the default class.
        let watch = admit::MemoryWatch::new(8 * MIB)
            .source(|| Some(admit::MemoryUse::new(160 * MIB, 10 * MIB)));
        let gate = admit_tokio::gate::<Route>(20)
            .memory_watch(watch)
            .observer(MetricsObserver::new("uploads"))
            .build()
            .unwrap();
        tokio::task::yield_now().await; // the watch's first reading
        let held: Vec<_> = (0..15)
            .map(|_| gate.try_acquire(1, Route::Upload).unwrap())
            .collect();
        let shed = gate.try_acquire(1, Route::Upload).unwrap_err();
        assert_eq!(shed.shed_reason(), Some(admit::ShedReason::Memory));
        (gate, held)
    });
    let m = read(&snapshotter);
    assert_eq!(gauge(&m, "uploads_memory_limit_bytes"), (160 * MIB) as f64);
    assert_eq!(
        gauge(&m, "uploads_memory_working_set_bytes"),
        (10 * MIB) as f64
    );
    assert_eq!(gauge(&m, "uploads_memory_allowed_units"), 16.0);
    assert_eq!(gauge(&m, "uploads_capacity_units"), 16.0);
    assert_eq!(
        counter(&m, "uploads_shed_total", "upload", "memory"),
        1,
        "the shed for memory, by its reason"
    );
    drop((held, gate));
}
