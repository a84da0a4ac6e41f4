//! Priority classes on a manual clock: priority never reorders the queue; when
//! the gate must shed someone it sheds the lowest class first, parked waiters
//! included, and a shed loses to a grant.
// Needs the `alloc` feature (the feature powerset builds every test target).
#![cfg(feature = "alloc")]

mod support;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use admit::{Gate, GateAcquire, GateError, GatePermit, Priority, ShedReason, Source};
use support::{Event, ManualTimer, Recorder};

admit::sources! {
    /// Call sites of a registry, each with its default class.
    enum Site {
        Resume => "resume" as CriticalPlus,
        Pull => "pull",
        Sync => "sync" as SheddablePlus,
        Prefetch => "prefetch" as Sheddable,
    }
}

type TestGate = Gate<Site, ManualTimer, Arc<Recorder>>;
type Waiting<'g> = Pin<Box<GateAcquire<'g, Site, ManualTimer, Arc<Recorder>>>>;

const BUDGET: Duration = Duration::from_secs(5);
const TARGET: Duration = Duration::from_millis(100);

fn ms(ms: u64) -> Duration {
    Duration::from_millis(ms)
}

/// A gate of `capacity` 1-unit requests, with the overload target if asked,
/// whose pace is a mean hold of 400 ms per unit: a full gate of 4 returns a
/// unit every 100 ms.
fn gate(
    capacity: usize,
    target: bool,
    max_waiters: Option<usize>,
) -> (TestGate, ManualTimer, Arc<Recorder>) {
    gate_with_budget(capacity, target, max_waiters, BUDGET)
}

/// As [`gate`], with a wait budget of `budget`.
fn gate_with_budget(
    capacity: usize,
    target: bool,
    max_waiters: Option<usize>,
    budget: Duration,
) -> (TestGate, ManualTimer, Arc<Recorder>) {
    let timer = ManualTimer::new();
    let rec = Recorder::new();
    let mut builder = Gate::builder(capacity)
        .wait_budget(budget)
        .retry_after_bounds(ms(1), Duration::from_secs(60))
        .timer(timer.clone())
        .observer(Arc::clone(&rec));
    if target {
        builder = builder.overload_target(TARGET);
    }
    if let Some(max) = max_waiters {
        builder = builder.max_waiters(max);
    }
    let gate = builder.build().unwrap();
    let all: Vec<_> = (0..capacity)
        .map(|_| gate.try_acquire(1, Site::Pull).unwrap())
        .collect();
    timer.advance(ms(400));
    drop(all);
    (gate, timer, rec)
}

/// Every unit of `gate`, held by critical requests.
fn hold_all(gate: &TestGate) -> Vec<GatePermit<Site>> {
    (0..gate.capacity())
        .map(|_| gate.try_acquire(1, Site::Pull).unwrap())
        .collect()
}

fn poll<F: Future + ?Sized>(f: Pin<&mut F>) -> Poll<F::Output> {
    f.poll(&mut Context::from_waker(Waker::noop()))
}

/// A new acquire from `site` (its default class), polled once: it must park.
fn park(gate: &TestGate, site: Site) -> Waiting<'_> {
    let mut w = Box::pin(gate.acquire(1, site));
    assert!(poll(w.as_mut()).is_pending(), "{site:?} expected to park");
    w
}

fn outcome(w: &mut Waiting<'_>) -> Poll<Result<GatePermit<Site>, GateError>> {
    poll(w.as_mut())
}

#[track_caller]
fn outranked(w: &mut Waiting<'_>) {
    match outcome(w) {
        Poll::Ready(Err(e)) => assert_eq!(e.shed_reason(), Some(ShedReason::Outranked)),
        other => panic!("expected to be shed for a higher class, got {other:?}"),
    }
}

/// A new acquire from `site`, polled once: it must be shed at arrival, for
/// `reason`.
#[track_caller]
fn shed_at_arrival(gate: &TestGate, site: Site, reason: ShedReason) {
    let mut w = Box::pin(gate.acquire(1, site));
    match outcome(&mut w) {
        Poll::Ready(Err(e)) => assert_eq!(e.shed_reason(), Some(reason)),
        other => panic!("expected a shed at arrival ({reason:?}), got {other:?}"),
    }
}

#[track_caller]
fn granted(w: &mut Waiting<'_>) -> GatePermit<Site> {
    match outcome(w) {
        Poll::Ready(Ok(permit)) => permit,
        other => panic!("expected a grant, got {other:?}"),
    }
}

#[test]
fn a_source_names_its_class_and_an_acquire_may_change_it() {
    assert_eq!(Site::Resume.priority(), Priority::CriticalPlus);
    assert_eq!(Site::Pull.priority(), Priority::Critical);
    assert_eq!(Site::Prefetch.priority(), Priority::Sheddable);
    let (gate, _, rec) = gate(2, false, None);
    let prefetch = gate.try_acquire(1, Site::Prefetch).unwrap();
    assert_eq!(prefetch.priority(), Priority::Sheddable);
    let raised = gate
        .acquire(1, Site::Prefetch)
        .priority(Priority::Critical)
        .try_now()
        .unwrap();
    assert_eq!(raised.priority(), Priority::Critical);
    let lowered = gate
        .acquire(1, Site::Pull)
        .priority(Priority::SheddablePlus);
    assert_eq!(lowered.priority_class(), Priority::SheddablePlus);
    let shed = gate.try_acquire(1, Site::Sync).unwrap_err();
    assert_eq!(shed.shed_reason(), Some(ShedReason::NoWait));
    assert_eq!(
        rec.shed_priorities(),
        [Priority::SheddablePlus],
        "the shed says its class"
    );
    assert_eq!(
        rec.admit_priorities()[2..],
        [Priority::Sheddable, Priority::Critical]
    );
}

#[test]
fn priority_never_reorders_the_queue() {
    // No target, no bound on the queue: nobody is shed, and one FIFO serves
    // every class.
    let (gate, _, _) = gate(1, false, None);
    let held = gate.try_acquire(1, Site::Pull).unwrap();
    let mut queue = [
        park(&gate, Site::Prefetch),
        park(&gate, Site::Resume),
        park(&gate, Site::Sync),
        park(&gate, Site::Pull),
    ];
    let mut permit = held;
    for i in 0..queue.len() {
        drop(permit);
        permit = granted(&mut queue[i]);
        for later in &mut queue[i + 1..] {
            assert!(outcome(later).is_pending(), "served out of turn");
        }
    }
}

#[test]
fn a_higher_class_behind_lower_ones_past_the_target_sheds_them_lowest_first() {
    let (gate, timer, rec) = gate(4, true, None);
    let held = hold_all(&gate);
    // Two classes below `Critical` parked, the lower one last: a unit comes back
    // every 100 ms, so a newcomer would wait 500 ms behind them, past the target.
    let mut sync = [park(&gate, Site::Sync), park(&gate, Site::Sync)];
    let mut prefetch = [park(&gate, Site::Prefetch), park(&gate, Site::Prefetch)];
    assert!(gate.estimated_wait(1) > Some(ms(400)));
    // A critical arrival may wait the target, one unit's return (100 ms): the
    // four ahead of it go, the lowest class (`Prefetch`) first although it
    // came last; the other class is shed only for what is still missing.
    let mut pull = park(&gate, Site::Pull);
    for w in &mut prefetch {
        outranked(w);
    }
    for w in &mut sync {
        outranked(w);
    }
    // ... and it is next: the first unit back is its.
    let mut held = held;
    timer.advance(ms(50));
    drop(held.pop());
    let permit = granted(&mut pull);
    assert_eq!(permit.priority(), Priority::Critical);
    // Each victim was counted once, for its own class and reason.
    assert_eq!(
        rec.shed_priorities(),
        [
            Priority::Sheddable,
            Priority::Sheddable,
            Priority::SheddablePlus,
            Priority::SheddablePlus
        ]
    );
    assert!(rec
        .shed_reasons()
        .iter()
        .all(|&r| r == ShedReason::Outranked));
}

#[test]
fn a_higher_class_sheds_only_what_keeps_it_within_the_target() {
    // Capacity 8: a unit comes back every 50 ms, so the target (100 ms) is two
    // units' returns and the mark (four targets) eight.
    let (gate, _, rec) = gate(8, true, None);
    let _held = hold_all(&gate);
    let mut prefetch: Vec<_> = (0..8).map(|_| park(&gate, Site::Prefetch)).collect();
    // A critical arrival behind nine units, past the mark: it keeps two within
    // the target (its own and one more), so seven go, the oldest first.
    let mut pull = park(&gate, Site::Pull);
    for w in &mut prefetch[..7] {
        outranked(w);
    }
    assert!(outcome(&mut prefetch[7]).is_pending());
    assert!(outcome(&mut pull).is_pending());
    assert_eq!(rec.shed_reasons(), [ShedReason::Outranked; 7]);
}

#[test]
fn below_the_mark_a_higher_class_waits_behind_lower_ones_as_one_fifo_would() {
    let (gate, _, rec) = gate(4, true, None);
    let _held = hold_all(&gate);
    // A critical arrival would wait 300 ms, past the target but short of the
    // mark (four targets): a burst, which one FIFO serves as it would without
    // classes.
    let mut queue = vec![park(&gate, Site::Prefetch), park(&gate, Site::Prefetch)];
    queue.push(park(&gate, Site::Pull));
    for w in &mut queue {
        assert!(outcome(w).is_pending());
    }
    assert!(rec.shed_reasons().is_empty(), "{:?}", rec.events());
}

#[test]
fn past_the_mark_the_gate_is_pressed_for_an_interval_after_its_last_shed() {
    let (gate, timer, rec) = gate(4, true, None);
    let _held = hold_all(&gate);
    // A fifth sheddable arrival finds the queue past the mark (400 ms): it
    // sheds nobody (nobody is below it), but the gate is pressed.
    let mut prefetch: Vec<_> = (0..5).map(|_| park(&gate, Site::Prefetch)).collect();
    let mut pulls = vec![park(&gate, Site::Pull)];
    for w in &mut prefetch {
        outranked(w);
    }
    // The interval is two mean holds, 800 ms. Within it, a queue short of the
    // mark still sheds the lower class for a higher one: the last shed keeps the
    // gate pressed.
    timer.advance(ms(700));
    let mut low = park(&gate, Site::Prefetch);
    pulls.push(park(&gate, Site::Pull));
    outranked(&mut low);
    // An interval after that shed, the same queue is a burst again.
    timer.advance(ms(800));
    let mut low = park(&gate, Site::Prefetch);
    pulls.push(park(&gate, Site::Pull));
    assert!(outcome(&mut low).is_pending());
    for w in &mut pulls {
        assert!(outcome(w).is_pending());
    }
    assert_eq!(rec.shed_reasons(), [ShedReason::Outranked; 6]);
}

#[test]
fn the_same_class_sheds_nobody_and_a_lower_one_nobody_above_it() {
    let (gate, _, rec) = gate(4, true, None);
    let _held = hold_all(&gate);
    let mut parked: Vec<_> = (0..4).map(|_| park(&gate, Site::Pull)).collect();
    parked.push(park(&gate, Site::Pull));
    parked.push(park(&gate, Site::Prefetch));
    for w in &mut parked {
        assert!(outcome(w).is_pending());
    }
    assert!(
        rec.shed_reasons().is_empty(),
        "nobody shed: {:?}",
        rec.events()
    );
}

#[test]
fn a_shed_loses_to_a_grant() {
    let (gate, timer, rec) = gate(2, true, None);
    let mut held = hold_all(&gate);
    let mut prefetch = park(&gate, Site::Prefetch);
    let mut behind = park(&gate, Site::Prefetch);
    // A unit comes back, held as long as the others (so the pace stays): the
    // head is granted (and woken, not yet polled).
    timer.advance(ms(400));
    drop(held.pop());
    // A critical arrival asks for the lower class to go: the granted head keeps
    // its units; the one behind it goes.
    let mut pull = park(&gate, Site::Pull);
    let permit = granted(&mut prefetch);
    assert_eq!(permit.priority(), Priority::Sheddable);
    outranked(&mut behind);
    assert_eq!(rec.shed_reasons(), [ShedReason::Outranked]);
    drop(permit);
    let _ = granted(&mut pull);
}

#[test]
fn a_full_queue_sheds_the_lowest_class_parked_rather_than_a_higher_arrival() {
    let (gate, _, rec) = gate(1, false, Some(2));
    let _held = gate.try_acquire(1, Site::Pull).unwrap();
    let mut sync = park(&gate, Site::Sync);
    let mut pull = park(&gate, Site::Pull);
    // Full: a critical arrival takes the place of the lowest class parked.
    let mut resume = park(&gate, Site::Resume);
    outranked(&mut sync);
    assert!(outcome(&mut pull).is_pending());
    // Nobody below a `Critical` arrival now: the queue is full for it.
    shed_at_arrival(&gate, Site::Pull, ShedReason::QueueFull);
    // And a lower class never sheds a higher one.
    shed_at_arrival(&gate, Site::Prefetch, ShedReason::QueueFull);
    assert_eq!(
        rec.shed_reasons(),
        [
            ShedReason::Outranked,
            ShedReason::QueueFull,
            ShedReason::QueueFull
        ]
    );
    assert!(outcome(&mut resume).is_pending());
}

#[test]
fn a_full_queue_sheds_a_request_once_though_its_owner_has_not_seen_it() {
    let (gate, _, rec) = gate(1, false, Some(1));
    let _held = gate.try_acquire(1, Site::Pull).unwrap();
    let mut prefetch = park(&gate, Site::Prefetch);
    // The first critical arrival takes its place; the victim has not yet
    // polled, so it still counts among the parked, on its way out.
    let mut first = park(&gate, Site::Pull);
    // A second finds nobody left below it to shed: the one place is taken.
    shed_at_arrival(&gate, Site::Pull, ShedReason::QueueFull);
    outranked(&mut prefetch);
    assert!(outcome(&mut first).is_pending());
    assert_eq!(
        rec.shed_reasons(),
        [ShedReason::QueueFull, ShedReason::Outranked]
    );
}

#[test]
fn a_victim_that_leaves_before_it_sees_the_shed_counts_nothing() {
    let (gate, _, rec) = gate(4, true, None);
    let _held = hold_all(&gate);
    // Past the mark (four units' returns): the gate is pressed.
    let prefetch: Vec<_> = (0..4).map(|_| park(&gate, Site::Prefetch)).collect();
    let _pull = park(&gate, Site::Pull);
    // The shed ones are dropped unpolled: a client that left, not a shed.
    drop(prefetch);
    assert!(rec.shed_reasons().is_empty());
    assert_eq!(gate.waiters(), 1);
    // Nothing is left on its way out: the estimate counts the critical waiter
    // alone (its unit, then a newcomer's: two units' returns).
    assert_eq!(gate.estimated_wait(1), Some(ms(200)));
}

#[test]
fn retry_after_says_when_the_class_would_get_in() {
    let (gate, _, rec) = gate(4, false, None);
    let _held = hold_all(&gate);
    let _parked = [park(&gate, Site::Prefetch), park(&gate, Site::Prefetch)];
    // A sheddable request waits behind both, a critical one behind neither.
    let low = gate.try_acquire(1, Site::Prefetch).unwrap_err();
    let high = gate.try_acquire(1, Site::Pull).unwrap_err();
    let retry = |e: GateError| match e {
        GateError::Busy { retry_after, .. } => retry_after,
        other => panic!("{other:?}"),
    };
    assert_eq!(retry(low), ms(300));
    assert_eq!(retry(high), ms(100));
    assert_eq!(
        rec.shed_priorities(),
        [Priority::Sheddable, Priority::Critical]
    );
    assert!(matches!(
        rec.events().last(),
        Some(Event::Shed("pull", 1, _))
    ));
}

#[test]
#[cfg(feature = "std")]
fn a_blocked_thread_is_shed_for_a_higher_class_too() {
    // A blocked thread's wait runs on the system clock: the longest budget, so
    // that only the shed can end it, however slowly the threads run (miri).
    let (gate, _, _) = gate_with_budget(4, true, None, admit::MAX_WAIT_BUDGET);
    let _held = hold_all(&gate);
    // Past the mark with the thread: the gate is pressed.
    let _prefetch: Vec<_> = (0..4).map(|_| park(&gate, Site::Prefetch)).collect();
    // The lowest class's estimate counts every parked unit, the gate's own
    // books: it grows once the thread is parked there, not only in the
    // semaphore's queue (which `waiters` counts a step earlier).
    let before = gate.retry_after(1);
    std::thread::scope(|s| {
        let low = s.spawn(|| gate.acquire(1, Site::Prefetch).blocking());
        // Hand-off: the thread has parked, in the semaphore and in the gate.
        while gate.waiters() < 5 || gate.retry_after(1) <= before {
            std::thread::yield_now();
        }
        let _pull = park(&gate, Site::Pull);
        let shed = low.join().unwrap().unwrap_err();
        assert_eq!(shed.shed_reason(), Some(ShedReason::Outranked));
    });
}
