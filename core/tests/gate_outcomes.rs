//! The gate's outcomes, each with its shed count, on a manual clock: no real
//! sleeps, every poll explicit.
// Needs the `alloc` feature (the feature powerset builds every test target).
#![cfg(feature = "alloc")]

mod support;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use admit::{Gate, GateError, GatePermit, ShedReason};
use futures_lite::future::{block_on, poll_once};
use support::{Event, ManualTimer, Recorder, Src, Trigger};

type TestGate = Gate<Src, ManualTimer, Arc<Recorder>>;

const BUDGET: Duration = Duration::from_secs(5);
const MS: Duration = Duration::from_millis(1);

fn gate(capacity: usize, max_units: usize) -> (TestGate, ManualTimer, Arc<Recorder>) {
    let timer = ManualTimer::new();
    let rec = Recorder::new();
    let gate = Gate::builder(capacity)
        .wait_budget(BUDGET)
        .max_units(max_units)
        .timer(timer.clone())
        .observer(Arc::clone(&rec))
        .build()
        .expect("valid config");
    (gate, timer, rec)
}

/// Polls once; `None` while pending.
fn poll<F: Future + Unpin>(f: &mut F) -> Option<F::Output> {
    block_on(poll_once(f))
}

fn take(gate: &TestGate, units: usize, src: Src) -> GatePermit<Src> {
    block_on(gate.acquire(units, src)).expect("units free")
}

fn busy_retry_after(r: Option<Result<GatePermit<Src>, GateError>>) -> Duration {
    match r {
        Some(Err(GateError::Busy { retry_after, .. })) => retry_after,
        other => panic!("expected Busy, got {other:?}"),
    }
}

#[test]
fn budget_expiry_is_busy_and_counted_once_for_its_source() {
    let (gate, timer, rec) = gate(1, 1);
    let held = take(&gate, 1, Src::Mirror);
    let mut waiter = Box::pin(gate.acquire(1, Src::Upload));
    assert!(poll(&mut waiter).is_none());
    assert_eq!(gate.waiters(), 1);

    timer.advance(BUDGET - MS);
    assert!(poll(&mut waiter).is_none(), "still inside the budget");
    assert_eq!(rec.total_sheds(), 0);

    timer.advance(MS);
    let retry_after = busy_retry_after(poll(&mut waiter));
    assert!(retry_after > Duration::ZERO);
    let (min, max) = gate.retry_after_bounds();
    assert!((min..=max).contains(&retry_after), "{retry_after:?}");
    assert_eq!(rec.sheds("upload"), 1);
    assert_eq!(rec.sheds("mirror"), 0);
    assert_eq!(rec.total_sheds(), 1);
    assert!(rec.events().contains(&Event::Shed("upload", 1, BUDGET)));
    assert_eq!(gate.waiters(), 0, "the shed caller left the queue");
    drop(waiter);
    drop(held);
    assert_eq!(rec.total_sheds(), 1, "nothing more counted");
    assert_eq!(gate.in_use(), 0);
}

#[test]
fn retry_after_follows_hold_times_and_queue_depth() {
    let (gate, timer, rec) = gate(1, 1);
    // No release seen yet: the lower bound.
    assert_eq!(gate.retry_after(1), Duration::from_secs(1));

    // One hold of 10 s sets the mean hold; with the unit free, no wait: the bound.
    let p = take(&gate, 1, Src::Upload);
    timer.advance(Duration::from_secs(10));
    drop(p);
    assert_eq!(gate.retry_after(1), Duration::from_secs(1));

    // Held: a newcomer waits one mean hold for the unit.
    let _held = take(&gate, 1, Src::Upload);
    assert_eq!(gate.retry_after(1), Duration::from_secs(10));

    // Two parked callers shed at the same instant: the first leaves one behind it.
    let mut a = Box::pin(gate.acquire(1, Src::Upload));
    let mut b = Box::pin(gate.acquire(1, Src::Publish));
    assert!(poll(&mut a).is_none());
    assert!(poll(&mut b).is_none());
    timer.advance(BUDGET);
    // (1 unit queued + its own) × 10 s / capacity 1 = 20 s
    assert_eq!(busy_retry_after(poll(&mut a)), Duration::from_secs(20));
    // (0 + 1) × 10 s / 1 = 10 s
    assert_eq!(busy_retry_after(poll(&mut b)), Duration::from_secs(10));
    assert_eq!(rec.sheds("upload"), 1);
    assert_eq!(rec.sheds("publish"), 1);
}

#[test]
fn retry_after_is_clamped_to_the_upper_bound() {
    let (gate, timer, rec) = gate(1, 1);
    let p = take(&gate, 1, Src::Upload);
    timer.advance(Duration::from_secs(600));
    drop(p);
    let _held = take(&gate, 1, Src::Upload);
    let mut w = Box::pin(gate.acquire(1, Src::Upload));
    assert!(poll(&mut w).is_none());
    timer.advance(BUDGET);
    assert_eq!(busy_retry_after(poll(&mut w)), Duration::from_secs(60));
    assert_eq!(rec.sheds("upload"), 1);
}

#[test]
fn ceiling_shorter_than_budget_ends_the_wait_busy_and_counted() {
    let (gate, timer, rec) = gate(1, 1);
    let _held = take(&gate, 1, Src::Mirror);
    let mut w = Box::pin(
        gate.acquire(1, Src::Publish)
            .ceiling(Duration::from_secs(2)),
    );
    assert_eq!(w.max_wait(), Duration::from_secs(2));
    assert!(poll(&mut w).is_none());
    timer.advance(Duration::from_secs(2) - MS);
    assert!(poll(&mut w).is_none());
    timer.advance(MS);
    busy_retry_after(poll(&mut w));
    assert_eq!(rec.sheds("publish"), 1);
    assert_eq!(rec.total_sheds(), 1);
    assert!(rec
        .events()
        .contains(&Event::Shed("publish", 1, Duration::from_secs(2))));
    assert_eq!(rec.shed_reasons(), [ShedReason::Ceiling]);
}

#[test]
fn ceiling_at_or_above_the_budget_does_not_extend_it() {
    let (gate, timer, rec) = gate(1, 1);
    let _held = take(&gate, 1, Src::Mirror);
    // Longer, or equal: the budget is the limit that binds, and is named.
    let mut longer = Box::pin(gate.acquire(1, Src::Upload).ceiling(BUDGET * 10));
    let mut equal = Box::pin(gate.acquire(1, Src::Upload).ceiling(BUDGET));
    assert_eq!(longer.max_wait(), BUDGET);
    assert!(poll(&mut longer).is_none());
    assert!(poll(&mut equal).is_none());
    timer.advance(BUDGET);
    busy_retry_after(poll(&mut longer));
    busy_retry_after(poll(&mut equal));
    assert_eq!(rec.sheds("upload"), 2);
    assert_eq!(rec.shed_reasons(), [ShedReason::WaitBudget; 2]);
}

#[test]
fn zero_ceiling_sheds_on_first_poll_when_no_units() {
    let (gate, _timer, rec) = gate(1, 1);
    let _held = take(&gate, 1, Src::Mirror);
    let mut w = Box::pin(gate.acquire(1, Src::Upload).ceiling(Duration::ZERO));
    busy_retry_after(poll(&mut w));
    assert_eq!(rec.sheds("upload"), 1);
    assert_eq!(rec.shed_reasons(), [ShedReason::Ceiling]);
    assert_eq!(gate.waiters(), 0);
}

#[test]
fn cancel_while_parked_is_cancelled_not_counted_queue_whole() {
    let (gate, timer, rec) = gate(2, 2);
    let held = take(&gate, 2, Src::Mirror);
    let cancel = Trigger::new();
    let mut a = Box::pin(gate.acquire(1, Src::Upload).until(cancel.fired()));
    let mut b = Box::pin(gate.acquire(1, Src::Publish));
    assert!(poll(&mut a).is_none());
    assert!(poll(&mut b).is_none());
    assert_eq!(gate.waiters(), 2);

    timer.advance(Duration::from_secs(1));
    cancel.fire();
    assert!(matches!(poll(&mut a), Some(Err(GateError::Cancelled))));
    assert_eq!(gate.waiters(), 1, "only the cancelled caller left");
    assert_eq!(rec.total_sheds(), 0);

    // The budget passing later counts nothing for the cancelled caller.
    drop(a);
    drop(held);
    let pb = poll(&mut b).expect("b admitted").expect("b granted");
    assert_eq!(pb.units(), 1);
    timer.advance(BUDGET * 2);
    assert_eq!(rec.total_sheds(), 0);
    assert_eq!(rec.admits().iter().filter(|a| a.0 == "upload").count(), 0);
    drop(pb);
    assert_eq!(gate.in_use(), 0);
}

#[test]
fn signal_fired_before_first_poll_wins_over_free_units() {
    let (gate, _timer, rec) = gate(2, 1);
    let cancel = Trigger::new();
    cancel.fire();
    let mut a = Box::pin(gate.acquire(1, Src::Upload).until(cancel.fired()));
    assert!(matches!(poll(&mut a), Some(Err(GateError::Cancelled))));
    assert_eq!(gate.in_use(), 0);
    assert_eq!(rec.total_sheds(), 0);
    assert!(rec.admits().is_empty());
}

#[test]
fn drop_while_parked_counts_nothing_and_the_waiter_behind_is_admitted() {
    let (gate, timer, rec) = gate(2, 2);
    let held = take(&gate, 1, Src::Mirror);
    // The head wants 2 (1 free), so the 1-unit request behind it waits too (FIFO).
    let mut head = Box::pin(gate.acquire(2, Src::Upload));
    let mut behind = Box::pin(gate.acquire(1, Src::Publish));
    assert!(poll(&mut head).is_none());
    assert!(poll(&mut behind).is_none());
    assert_eq!(gate.waiters(), 2);

    drop(head); // the head leaves: the waiter behind it fits now
    assert_eq!(gate.waiters(), 0);
    let p = poll(&mut behind).expect("woken").expect("granted");
    assert_eq!(p.units(), 1);
    assert_eq!(gate.in_use(), 2);
    timer.advance(BUDGET * 2);
    assert_eq!(rec.total_sheds(), 0);
    drop((p, held));
    assert_eq!(gate.in_use(), 0);
}

#[test]
fn parked_waiter_admitted_on_release_with_its_wait_reported() {
    let (gate, timer, rec) = gate(1, 1);
    let held = take(&gate, 1, Src::Mirror);
    let mut w = Box::pin(gate.acquire(1, Src::Upload));
    assert!(poll(&mut w).is_none());
    timer.advance(Duration::from_secs(3));
    assert_eq!(held.held_for(), Duration::from_secs(3));
    held.release();
    let p = poll(&mut w).expect("woken").expect("granted");
    assert_eq!(p.source(), Src::Upload);
    assert!(rec
        .admits()
        .contains(&("upload", 1, Duration::from_secs(3))));
    assert!(rec.releases().contains(&Event::Release {
        source: "mirror",
        units: 1,
        held: Duration::from_secs(3),
        probed: None
    }));
    assert_eq!(rec.total_sheds(), 0);
    assert_eq!(timer.pending_sleeps(), 0, "the deadline was disarmed");
}

#[test]
fn grant_wins_when_grant_and_deadline_are_both_ready() {
    let (gate, timer, rec) = gate(1, 1);
    let held = take(&gate, 1, Src::Mirror);
    let mut w = Box::pin(gate.acquire(1, Src::Upload));
    assert!(poll(&mut w).is_none());
    timer.advance(BUDGET);
    drop(held);
    let p = poll(&mut w)
        .expect("ready")
        .expect("the grant wins the tie");
    assert_eq!(rec.total_sheds(), 0);
    assert!(rec.admits().contains(&("upload", 1, BUDGET)));
    drop(p);
}

#[test]
fn capacity_round_trip() {
    let (gate, timer, rec) = gate(3, 3);
    let a = take(&gate, 1, Src::Upload);
    let b = take(&gate, 2, Src::Publish);
    assert_eq!(gate.in_use(), 3);
    assert!(matches!(
        gate.try_acquire(1, Src::Mirror),
        Err(GateError::Busy { .. })
    ));
    assert_eq!(
        rec.sheds("mirror"),
        1,
        "a try_acquire turned away is a shed"
    );
    assert_eq!(rec.shed_reasons(), [ShedReason::NoWait]);
    timer.advance(Duration::from_secs(1));
    drop(a);
    assert_eq!(gate.in_use(), 2);
    b.release();
    assert_eq!(gate.in_use(), 0);
    assert_eq!(rec.admits().len(), 2);
    assert_eq!(rec.releases().len(), 2);
    assert_eq!(rec.sheds("upload") + rec.sheds("publish"), 0);
    let c = gate.try_acquire(3, Src::Upload).expect("all free again");
    assert_eq!(gate.in_use(), 3);
    drop(c);
    assert_eq!(gate.in_use(), 0);
}

#[test]
fn floor_progress_two_acquires_of_two_at_capacity_two_both_complete() {
    let (gate, _timer, rec) = gate(2, 2);
    let mut a = Box::pin(gate.acquire(2, Src::Upload));
    let mut b = Box::pin(gate.acquire(2, Src::Publish));
    let pa = poll(&mut a).expect("free").expect("granted");
    assert!(poll(&mut b).is_none(), "b waits for both units");
    assert_eq!(gate.in_use(), 2);
    drop(pa);
    let pb = poll(&mut b).expect("woken").expect("granted");
    assert_eq!(pb.units(), 2);
    drop(pb);
    assert_eq!(gate.in_use(), 0);
    assert_eq!(rec.admits().len(), 2);
    assert_eq!(rec.total_sheds(), 0);
}

#[test]
fn above_max_units_is_refused_at_once_though_the_capacity_fits_it() {
    // max_units is the largest request the gate keeps servable across resizes:
    // one above it is a composition fault, even while the capacity would fit it.
    let (gate, timer, rec) = gate(4, 2);
    let refused = GateError::ExceedsMaxUnits {
        requested: 3,
        max_units: 2,
    };
    let mut w = Box::pin(gate.acquire(3, Src::Upload));
    assert_eq!(poll(&mut w).map(Result::unwrap_err), Some(refused));
    assert_eq!(gate.try_acquire(3, Src::Upload).unwrap_err(), refused);
    #[cfg(feature = "std")]
    assert_eq!(gate.acquire_blocking(3, Src::Upload).unwrap_err(), refused);
    assert_eq!((gate.in_use(), gate.waiters()), (0, 0));
    assert_eq!(timer.pending_sleeps(), 0, "no deadline was armed");
    assert_eq!(rec.total_sheds(), 0);
    assert!(rec.admits().is_empty());
    // At max_units, granted.
    assert_eq!(take(&gate, 2, Src::Upload).units(), 2);
}

#[test]
fn above_the_capacity_is_exceeds_capacity_at_once_not_counted_never_parked() {
    // A gate's capacity starts at max_units or more; forgotten units take it lower.
    let (gate, timer, rec) = gate(2, 2);
    take(&gate, 1, Src::Mirror).forget();
    let _held = take(&gate, 1, Src::Mirror);
    let mut w = Box::pin(gate.acquire(2, Src::Upload));
    match poll(&mut w) {
        Some(Err(GateError::ExceedsCapacity(e))) => {
            assert_eq!((e.requested, e.capacity), (2, 1));
        }
        other => panic!("expected ExceedsCapacity at once, got {other:?}"),
    }
    assert_eq!(gate.waiters(), 0);
    assert_eq!(timer.pending_sleeps(), 0, "no deadline was armed");
    assert!(matches!(
        gate.try_acquire(2, Src::Upload),
        Err(GateError::ExceedsCapacity(_))
    ));
    timer.advance(BUDGET * 2);
    assert_eq!(rec.total_sheds(), 0);
}

#[test]
fn close_ends_parked_and_later_acquires_with_closed() {
    let (gate, timer, rec) = gate(1, 1);
    let held = take(&gate, 1, Src::Mirror);
    let mut w = Box::pin(gate.acquire(1, Src::Upload));
    assert!(poll(&mut w).is_none());
    gate.close();
    assert!(gate.is_closed());
    assert!(matches!(poll(&mut w), Some(Err(GateError::Closed))));
    assert!(matches!(
        block_on(gate.acquire(1, Src::Upload)),
        Err(GateError::Closed)
    ));
    assert!(matches!(
        gate.try_acquire(1, Src::Upload),
        Err(GateError::Closed)
    ));
    timer.advance(BUDGET * 2);
    assert_eq!(rec.total_sheds(), 0);
    // A held permit stays valid and releases as usual.
    assert_eq!(gate.in_use(), 1);
    drop(held);
    assert_eq!(gate.in_use(), 0);
    assert_eq!(rec.releases().len(), 1);
}

#[test]
fn observer_hears_release_before_the_units_return_and_admit_after_the_grant() {
    let (gate, _timer, rec) = gate(3, 2);
    let probe_gate = gate.clone();
    rec.set_probe(move || probe_gate.in_use());

    let p = take(&gate, 2, Src::Upload);
    let q = take(&gate, 1, Src::Publish);
    // Inside on_admit the units were already granted.
    assert_eq!(rec.admit_probes(), vec![2, 3]);
    drop(p);
    drop(q);
    let probed: Vec<(usize, Option<usize>)> = rec
        .releases()
        .into_iter()
        .map(|e| match e {
            Event::Release { units, probed, .. } => (units, probed),
            _ => unreachable!(),
        })
        .collect();
    // Inside on_release the units were still in use.
    assert_eq!(probed, vec![(2, Some(3)), (1, Some(1))]);
    assert_eq!(gate.in_use(), 0);
    rec.clear_probe(); // breaks the gate → observer → probe → gate cycle
}

#[test]
fn on_start_reports_capacity_and_every_label() {
    let (gate, _timer, rec) = gate(4, 2);
    assert_eq!(
        rec.events()[0],
        Event::Start(4, vec!["upload", "publish", "mirror"])
    );
    assert_eq!(gate.capacity(), 4);
    assert_eq!(gate.max_units(), 2);
    assert_eq!(gate.wait_budget(), BUDGET);
}

#[test]
fn permit_is_owned_static_and_moves_across_threads() {
    fn assert_traits<T: Send + Sync + 'static>() {}
    assert_traits::<GatePermit<Src>>();
    assert_traits::<TestGate>();
    fn assert_send<T: Send>(_: &T) {}

    let (gate, timer, rec) = gate(1, 1);
    let fut = gate.acquire(1, Src::Upload);
    assert_send(&fut);
    let p = block_on(fut).unwrap();
    timer.advance(Duration::from_secs(2));
    std::thread::spawn(move || drop(p)).join().unwrap();
    assert_eq!(gate.in_use(), 0);
    assert!(rec.releases().contains(&Event::Release {
        source: "upload",
        units: 1,
        held: Duration::from_secs(2),
        probed: None
    }));
}

#[test]
fn dropping_a_granted_but_unpolled_acquire_returns_its_units() {
    let (gate, _timer, rec) = gate(1, 1);
    let held = take(&gate, 1, Src::Mirror);
    let mut w: Pin<Box<_>> = Box::pin(gate.acquire(1, Src::Upload));
    assert!(poll(&mut w).is_none());
    drop(held); // granted to `w`, which is never polled again
    assert_eq!(gate.in_use(), 0, "no permit holds the unit granted to `w`");
    assert_eq!(gate.waiters(), 0);
    drop(w);
    assert_eq!(gate.in_use(), 0);
    assert_eq!(rec.total_sheds(), 0);
    assert!(rec.admits().iter().all(|a| a.0 != "upload"));
}

#[test]
#[should_panic(expected = "zero units")]
fn zero_units_panics() {
    let (gate, _timer, _rec) = gate(1, 1);
    drop(gate.acquire(0, Src::Upload));
}

/// A waker that counts its wakes.
struct CountingWaker(std::sync::atomic::AtomicUsize);

impl std::task::Wake for CountingWaker {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }
}

#[test]
fn a_parked_caller_is_woken_by_its_deadline_and_by_a_release() {
    use std::sync::atomic::Ordering;
    use std::task::{Context, Poll, Waker};

    let (gate, timer, rec) = gate(1, 1);
    let counter = Arc::new(CountingWaker(0.into()));
    let waker = Waker::from(Arc::clone(&counter));
    let mut cx = Context::from_waker(&waker);

    // Woken by the deadline.
    let held = take(&gate, 1, Src::Mirror);
    let mut a = Box::pin(gate.acquire(1, Src::Upload));
    assert!(a.as_mut().poll(&mut cx).is_pending());
    timer.advance(BUDGET - MS);
    assert_eq!(counter.0.load(Ordering::SeqCst), 0, "no early wake");
    timer.advance(MS);
    assert!(
        counter.0.load(Ordering::SeqCst) >= 1,
        "the deadline woke it"
    );
    assert!(matches!(
        a.as_mut().poll(&mut cx),
        Poll::Ready(Err(GateError::Busy { .. }))
    ));

    // Woken by a release.
    counter.0.store(0, Ordering::SeqCst);
    let mut b = Box::pin(gate.acquire(1, Src::Publish));
    assert!(b.as_mut().poll(&mut cx).is_pending());
    drop(held);
    assert!(counter.0.load(Ordering::SeqCst) >= 1, "the release woke it");
    assert!(matches!(b.as_mut().poll(&mut cx), Poll::Ready(Ok(_))));
    assert_eq!(rec.sheds("upload"), 1);
    assert_eq!(rec.sheds("publish"), 0);
}

/// When several refusals hold, the gate reports its configuration's fault
/// before its close, from `acquire` and `try_acquire` alike (the bare
/// semaphore, as tokio's, reports `Closed` first).
#[test]
fn a_closed_gate_reports_a_request_it_could_never_serve_first() {
    let (gate, _timer, _rec) = gate(3, 3);
    take(&gate, 1, Src::Mirror).forget(); // capacity 2, below max_units
    gate.close();
    let exceeds = |r: Result<GatePermit<Src>, GateError>| matches!(r, Err(GateError::ExceedsCapacity(e)) if e.requested == 3 && e.capacity == 2);
    assert!(exceeds(gate.try_acquire(3, Src::Upload)));
    assert!(exceeds(block_on(gate.acquire(3, Src::Upload))));
    assert!(matches!(
        gate.try_acquire(4, Src::Upload),
        Err(GateError::ExceedsMaxUnits { .. })
    ));
    assert!(matches!(
        gate.try_acquire(2, Src::Upload),
        Err(GateError::Closed)
    ));
}
