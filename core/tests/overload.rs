//! Overload control on a manual clock: each rule of `GateBuilder::overload_target`
//! (a standing queue detected by CoDel's rule, the cap on an overloaded wait, the
//! shed at arrival by the estimate, judged by the request's size) and how it
//! composes with ceilings, `max_waiters`, close, drain and resize, and the gate's
//! pressure (parked, overloaded, recent sheds). Every test runs
//! the same steps on a gate without the rule where that shows what the rule does.
// Needs the `alloc` feature (the feature powerset builds every test target).
#![cfg(feature = "alloc")]

mod support;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use admit::{Gate, GateAcquire, GateError, GatePermit, Priority, ShedReason};
use support::{Event, ManualTimer, Recorder, Src, Trigger};

type TestGate = Gate<Src, ManualTimer, Arc<Recorder>>;
type Waiting<'g, F = std::future::Pending<()>> =
    Pin<Box<GateAcquire<'g, Src, ManualTimer, Arc<Recorder>, F>>>;

const BUDGET: Duration = Duration::from_secs(5);
const TARGET: Duration = Duration::from_millis(100);

fn ms(ms: u64) -> Duration {
    Duration::from_millis(ms)
}

fn gate_with(
    capacity: usize,
    target: Option<Duration>,
    max_waiters: Option<usize>,
) -> (TestGate, ManualTimer, Arc<Recorder>) {
    let timer = ManualTimer::new();
    let rec = Recorder::new();
    // Requests of up to the whole capacity are declared.
    let mut builder = Gate::builder(capacity)
        .wait_budget(BUDGET)
        .max_units(capacity);
    if let Some(target) = target {
        builder = builder.overload_target(target);
    }
    if let Some(max) = max_waiters {
        builder = builder.max_waiters(max);
    }
    let gate = builder
        .retry_after_bounds(ms(1), Duration::from_secs(60))
        .timer(timer.clone())
        .observer(Arc::clone(&rec))
        .build()
        .unwrap();
    (gate, timer, rec)
}

fn gate(capacity: usize) -> (TestGate, ManualTimer, Arc<Recorder>) {
    gate_with(capacity, Some(TARGET), None)
}

fn poll<F: Future + ?Sized>(f: Pin<&mut F>) -> Poll<F::Output> {
    f.poll(&mut Context::from_waker(Waker::noop()))
}

fn take(gate: &TestGate, units: usize) -> GatePermit<Src> {
    gate.try_acquire(units, Src::Upload).expect("units free")
}

/// A new acquire of `units`, polled once: it must park.
fn park(gate: &TestGate, units: usize) -> Waiting<'_> {
    let mut w = Box::pin(gate.acquire(units, Src::Mirror));
    assert!(poll(w.as_mut()).is_pending(), "expected to park");
    w
}

/// A new acquire of `units`, polled once: it must be shed at once as hopeless.
fn hopeless(gate: &TestGate, rec: &Recorder, units: usize) -> Duration {
    let before = rec.events().len();
    let mut w = Box::pin(gate.acquire(units, Src::Publish));
    let retry_after = match poll(w.as_mut()) {
        Poll::Ready(Err(GateError::Busy { retry_after, .. })) => retry_after,
        other => panic!("expected a shed at arrival, got {other:?}"),
    };
    assert_eq!(
        rec.events()[before..],
        [Event::Hopeless("publish", units, retry_after)],
        "one shed, for its reason"
    );
    retry_after
}

/// Sets the mean hold of a unit to `d`: every unit held for `d` once.
fn pace(gate: &TestGate, timer: &ManualTimer, d: Duration) {
    let all = take(gate, gate.capacity());
    timer.advance(d);
    drop(all);
}

fn close(a: Duration, b: Duration) -> bool {
    a.abs_diff(b) <= Duration::from_micros(1)
}

#[test]
fn a_hopeless_request_is_shed_at_arrival_and_a_hopeful_one_parks() {
    for with_target in [true, false] {
        let (gate, timer, rec) = gate_with(4, with_target.then_some(TARGET), None);
        pace(&gate, &timer, ms(1000)); // a full gate returns a unit per 250 ms
        let _all = take(&gate, 4);
        // The k-th parked request waits about k × 250 ms: up to 20 fit the budget.
        let parked: Vec<_> = (0..20).map(|_| park(&gate, 1)).collect();
        assert!(close(gate.estimated_wait(1).unwrap(), ms(5250)));
        if with_target {
            let retry_after = hopeless(&gate, &rec, 1);
            assert!(
                close(retry_after, ms(5250)),
                "the estimate: {retry_after:?}"
            );
            assert_eq!(gate.waiters(), 20, "it never stayed in the queue");
        } else {
            let _twenty_first = park(&gate, 1);
            assert_eq!(gate.waiters(), 21, "without the rule it parks");
        }
        drop(parked);
    }
}

#[test]
fn a_large_request_is_judged_by_its_size() {
    let (gate, timer, rec) = gate(4);
    pace(&gate, &timer, ms(1000));
    let _all = take(&gate, 4);
    let _parked: Vec<_> = (0..17).map(|_| park(&gate, 1)).collect();
    // A 4-unit request needs (17 + 4) × 250 ms = 5.25 s: more than the budget;
    // a 1-unit one (17 + 1) × 250 ms = 4.5 s parks.
    hopeless(&gate, &rec, 4);
    let _small = park(&gate, 1);
}

/// What a newcomer of `units` gets at its first poll: `true` if it parks
/// (then it is dropped, leaving the queue as it was), `false` if it is shed at
/// arrival as hopeless.
fn parks(gate: &TestGate, units: usize) -> bool {
    let mut w = Box::pin(gate.acquire(units, Src::Publish));
    match poll(w.as_mut()) {
        Poll::Pending => true,
        Poll::Ready(Err(e)) if e.shed_reason() == Some(ShedReason::Hopeless) => false,
        other => panic!("{other:?}"),
    }
}

#[test]
fn while_overloaded_a_request_is_judged_as_the_largest_would_be() {
    // Capacity 4, requests of 1 or 2 units (`max_units` 2), every permit held
    // 200 ms: a full gate returns a unit per 50 ms. A cap of 200 ms, less 50 ms
    // for a 1-unit request (the unit it asks for fewer than the largest).
    let timer = ManualTimer::new();
    let gate: TestGate = Gate::builder(4)
        .wait_budget(BUDGET)
        .max_units(2)
        .overload_target(TARGET)
        .retry_after_bounds(ms(1), Duration::from_secs(60))
        .timer(timer.clone())
        .observer(Recorder::new())
        .build()
        .unwrap();
    let all = [take(&gate, 2), take(&gate, 2)];
    timer.advance(ms(200));
    drop(all);
    // A standing queue: every 50 ms the oldest permit (held 200 ms) is released,
    // the head (parked 150 ms) granted, and a newcomer parks behind two others.
    let mut held: std::collections::VecDeque<_> = (0..4).map(|_| take(&gate, 1)).collect();
    let mut queue: std::collections::VecDeque<_> = (0..3).map(|_| park(&gate, 1)).collect();
    let step = |held: &mut std::collections::VecDeque<GatePermit<Src>>,
                queue: &mut std::collections::VecDeque<Waiting<'_>>| {
        timer.advance(ms(50));
        held.pop_front();
        let mut head = queue.pop_front().unwrap();
        let Poll::Ready(Ok(permit)) = poll(head.as_mut()) else {
            panic!("the head is granted at its turn")
        };
        held.push_back(permit);
    };
    for _ in 0..20 {
        step(&mut held, &mut queue);
        queue.push_back(park(&gate, 1));
    }
    assert!(gate.is_overloaded(), "waits of 150 ms stood for 1 s");
    step(&mut held, &mut queue);

    // Two units queued: a 1-unit newcomer would wait 150 ms, a 2-unit one
    // 200 ms; each is at its own cap, and both park. With one more unit queued
    // both would wait 50 ms past it: both are shed (one cap for all would shed
    // the 2-unit request and park the 1-unit one).
    assert_eq!((parks(&gate, 1), parks(&gate, 2)), (true, true));
    let filler = park(&gate, 1);
    assert_eq!(
        (parks(&gate, 1), parks(&gate, 2)),
        (false, false),
        "judged alike at the same queue"
    );
    drop(filler);

    // The 2-unit request that parks gets in: after the two ahead of it, the
    // next two units that come back are its own, at its cap.
    let mut large = Box::pin(gate.acquire(2, Src::Mirror));
    assert!(poll(large.as_mut()).is_pending());
    for _ in 0..2 {
        step(&mut held, &mut queue);
    }
    timer.advance(ms(50));
    held.pop_front();
    assert!(poll(large.as_mut()).is_pending(), "one unit is not enough");
    timer.advance(ms(50));
    held.pop_front();
    let Poll::Ready(Ok(permit)) = poll(large.as_mut()) else {
        panic!("the 2-unit request is granted at its cap")
    };
    assert_eq!(permit.units(), 2);
}

#[test]
fn a_ceiling_below_the_estimate_is_hopeless_too() {
    let (gate, timer, rec) = gate(1);
    pace(&gate, &timer, ms(1000));
    let _all = take(&gate, 1);
    let mut short = Box::pin(gate.acquire(1, Src::Publish).ceiling(ms(900)));
    assert!(matches!(
        poll(short.as_mut()),
        Poll::Ready(Err(GateError::Busy { .. }))
    ));
    assert!(matches!(
        rec.events().last(),
        Some(Event::Hopeless("publish", 1, _))
    ));
    let mut long = Box::pin(gate.acquire(1, Src::Publish).ceiling(ms(1000)));
    assert!(
        poll(long.as_mut()).is_pending(),
        "1 s fits a ceiling of 1 s"
    );
    // A zero ceiling is the caller's own limit: named for it, not for the
    // estimate that would also have shed it.
    let mut none = Box::pin(gate.acquire(1, Src::Publish).ceiling(Duration::ZERO));
    match poll(none.as_mut()) {
        Poll::Ready(Err(e)) => assert_eq!(e.shed_reason(), Some(ShedReason::Ceiling)),
        other => panic!("expected a shed at once, got {other:?}"),
    }
}

#[test]
fn before_the_first_release_nothing_is_hopeless() {
    let (gate, _timer, _rec) = gate(1);
    let _all = take(&gate, 1);
    let _parked: Vec<_> = (0..100).map(|_| park(&gate, 1)).collect();
    assert_eq!(gate.estimated_wait(1), None);
}

/// Capacity 1, holds of 300 ms, two requests queued behind the holder: every
/// admission waits 300 ms or more, three times the target, and the interval is
/// two mean holds (600 ms). One step: the holder releases, the head is admitted,
/// a newcomer parks. Returns the gate at the step that found it overloaded, with
/// the request parked one step (300 ms) earlier and the unit held.
fn standing_queue<'g>(
    gate: &'g TestGate,
    timer: &ManualTimer,
    rec: &Recorder,
) -> (Waiting<'g>, GatePermit<Src>) {
    let (head, held, _) = standing_queue_before(gate, timer, rec, &[]);
    (head, held)
}

/// [`standing_queue`], with a 1-unit request of each class in `classes` parked
/// behind the last critical one (at 1.2 s, before the gate is overloaded):
/// returned too, oldest first.
fn standing_queue_before<'g>(
    gate: &'g TestGate,
    timer: &ManualTimer,
    rec: &Recorder,
    classes: &[Priority],
) -> (Waiting<'g>, GatePermit<Src>, Vec<Waiting<'g>>) {
    let mut behind = Vec::new();
    pace(gate, timer, ms(300)); // t = 0.3 s; the mean hold is 300 ms
    let mut held = take(gate, 1);
    let mut queue = std::collections::VecDeque::from([park(gate, 1), park(gate, 1)]);
    for step in 1..=4 {
        timer.advance(ms(300));
        drop(held);
        let mut head = queue.pop_front().unwrap();
        let Poll::Ready(Ok(permit)) = poll(head.as_mut()) else {
            panic!("the head is next at step {step}")
        };
        held = permit;
        // The interval of the first waits still held the grants at once (0.3 s);
        // the next one, from 0.9 s, long waits only: it ends at 1.5 s, step 4.
        assert_eq!(gate.is_overloaded(), step == 4, "step {step}");
        if step < 4 {
            queue.push_back(park(gate, 1));
        }
        if step == 3 {
            behind.extend(classes.iter().map(|&class| {
                let mut w = Box::pin(gate.acquire(1, Src::Mirror).priority(class));
                assert!(poll(w.as_mut()).is_pending(), "expected to park");
                w
            }));
        }
    }
    assert_eq!(
        rec.events()
            .iter()
            .filter(|e| **e == Event::Overloaded(true))
            .count(),
        1
    );
    (queue.pop_front().unwrap(), held, behind)
}

#[test]
fn a_standing_queue_is_detected_and_the_cap_sheds_a_wait_past_twice_the_target() {
    let (gate, timer, rec) = gate(1);
    let (mut w3, _p2) = standing_queue(&gate, &timer, &rec);
    // w3 has waited 300 ms, past the cap of 200 ms: shed, for the overload.
    match poll(w3.as_mut()) {
        Poll::Ready(Err(GateError::Busy { .. })) => {}
        other => panic!("{other:?}"),
    }
    assert!(rec
        .events()
        .contains(&Event::OverloadShed("mirror", 1, ms(300))));
    // A newcomer would wait a mean hold, 300 ms, past the cap: shed at arrival.
    let retry_after = hopeless(&gate, &rec, 1);
    assert!(close(retry_after, ms(300)));
}

#[test]
fn at_the_cap_a_lower_class_is_shed_first_once_per_look() {
    let (gate, timer, rec) = gate(1);
    let (mut w3, _p2, mut sheddable) =
        standing_queue_before(&gate, &timer, &rec, &[Priority::Sheddable; 2]);
    let before = rec.total_sheds();
    // w3 (critical) has waited 300 ms, past the cap of 200 ms: the oldest
    // sheddable request is shed for it, and it waits on.
    assert!(poll(w3.as_mut()).is_pending());
    let estimate = gate.estimated_wait(1);
    // Polled again before its next look, it sheds nobody more: nothing more is
    // on its way out of the queue.
    assert!(poll(w3.as_mut()).is_pending());
    assert_eq!(gate.estimated_wait(1), estimate);
    match poll(sheddable[0].as_mut()) {
        Poll::Ready(Err(e)) => assert_eq!(e.shed_reason(), Some(ShedReason::Outranked)),
        other => panic!("{other:?}"),
    }
    // Its next look, a recheck later (5 s / 16 = 312.5 ms), finds the other
    // one still parked (had the second poll shed it too, this look would find
    // nobody below and shed w3): shed for it.
    let recheck = BUDGET / 16;
    timer.advance(recheck);
    assert!(poll(w3.as_mut()).is_pending());
    match poll(sheddable[1].as_mut()) {
        Poll::Ready(Err(e)) => assert_eq!(e.shed_reason(), Some(ShedReason::Outranked)),
        other => panic!("{other:?}"),
    }
    // The next, with no lower class parked: shed itself, for the overload.
    timer.advance(recheck);
    assert!(matches!(
        poll(w3.as_mut()),
        Poll::Ready(Err(GateError::Busy { .. }))
    ));
    assert_eq!(
        rec.shed_reasons()[before..],
        [
            ShedReason::Outranked,
            ShedReason::Outranked,
            ShedReason::Overload
        ]
    );
}

#[test]
fn at_the_cap_a_request_sheds_its_own_units_of_the_lowest_class_only() {
    let (gate, timer, rec) = gate(1);
    let classes = [Priority::SheddablePlus, Priority::Sheddable];
    let (mut w3, _p2, mut behind) = standing_queue_before(&gate, &timer, &rec, &classes);
    let before = rec.total_sheds();
    // w3 (critical, 1 unit) past the cap: one unit of the lowest class goes,
    // though it came last; the class above it is left alone.
    assert!(poll(w3.as_mut()).is_pending());
    match poll(behind[1].as_mut()) {
        Poll::Ready(Err(e)) => assert_eq!(e.shed_reason(), Some(ShedReason::Outranked)),
        other => panic!("{other:?}"),
    }
    // The other, past its own cap with nobody below it now, meets the cap.
    match poll(behind[0].as_mut()) {
        Poll::Ready(Err(e)) => assert_eq!(e.shed_reason(), Some(ShedReason::Overload)),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        rec.shed_reasons()[before..],
        [ShedReason::Outranked, ShedReason::Overload]
    );
}

#[test]
fn a_request_granted_before_its_look_at_the_cap_sheds_nobody() {
    let (gate, timer, rec) = gate(1);
    let (mut w3, p2, mut sheddable) =
        standing_queue_before(&gate, &timer, &rec, &[Priority::Sheddable]);
    // The unit comes back: w3, the head, is granted by the release, before its
    // owner polls it past the cap.
    drop(p2);
    let Poll::Ready(Ok(_p3)) = poll(w3.as_mut()) else {
        panic!("w3 was granted")
    };
    // The sheddable request was not shed for it: it meets its own cap.
    match poll(sheddable[0].as_mut()) {
        Poll::Ready(Err(e)) => assert_eq!(e.shed_reason(), Some(ShedReason::Overload)),
        other => panic!("{other:?}"),
    }
}

#[test]
fn an_idle_gate_leaves_the_overloaded_state_when_watched() {
    let (gate, timer, rec) = gate(1);
    let (mut w3, p2) = standing_queue(&gate, &timer, &rec);
    drop(p2);
    let Poll::Ready(Ok(p3)) = poll(w3.as_mut()) else {
        panic!("w3 is next")
    };
    drop(p3); // nobody parked, nothing held: idle from now on (t = 1.5 s)
    assert!(
        gate.is_overloaded(),
        "the release with nobody parked opened a calm interval"
    );
    // Unwatched, nothing the gate sees ends the state: nobody arrives.
    timer.advance(Duration::from_secs(10));
    assert!(gate.is_overloaded());
    // Watched: a look every half interval (300 ms) shows the rule an empty
    // queue, and two calm intervals (600 ms each) end the state.
    let mut watch = Box::pin(gate.watch_overload());
    assert!(poll(watch.as_mut()).is_pending());
    for _ in 0..6 {
        timer.advance(ms(300));
        assert!(poll(watch.as_mut()).is_pending());
    }
    assert!(!gate.is_overloaded());
    assert_eq!(rec.events().last(), Some(&Event::Overloaded(false)));
    // It ends at its next look after the gate is gone.
    drop(w3);
    drop(gate);
    timer.advance(ms(300));
    assert!(poll(watch.as_mut()).is_ready());
}

#[test]
fn a_watched_gate_with_a_request_parked_stays_overloaded() {
    let (gate, timer, rec) = gate(1);
    // w3 stays parked (its owner away) and the unit held.
    let (_w3, _p2) = standing_queue(&gate, &timer, &rec);
    let mut watch = Box::pin(gate.watch_overload());
    assert!(poll(watch.as_mut()).is_pending());
    // Two calm intervals of looks: none may show the rule an empty queue.
    for _ in 0..6 {
        timer.advance(ms(300));
        assert!(poll(watch.as_mut()).is_pending());
    }
    assert!(gate.is_overloaded());
}

#[test]
fn without_the_rule_the_same_queue_waits_out_the_budget() {
    let (gate, timer, rec) = gate_with(1, None, None);
    pace(&gate, &timer, ms(300));
    let p0 = take(&gate, 1);
    let mut w1 = park(&gate, 1);
    let mut w2 = park(&gate, 1);
    timer.advance(ms(300));
    drop(p0);
    let Poll::Ready(Ok(p1)) = poll(w1.as_mut()) else {
        panic!()
    };
    let mut w3 = park(&gate, 1);
    timer.advance(ms(300));
    drop(p1);
    let Poll::Ready(Ok(_p2)) = poll(w2.as_mut()) else {
        panic!()
    };
    assert!(!gate.is_overloaded());
    assert!(poll(w3.as_mut()).is_pending(), "no cap without a target");
    let _w4 = park(&gate, 1);
    assert_eq!(rec.total_sheds(), 0);
}

#[test]
fn a_request_parked_before_the_overload_is_capped_at_its_next_look() {
    let (gate, timer, rec) = gate(1);
    // The steps of `standing_queue`, with a waker of our own on the request that
    // parks at 1.2 s, the step before the gate is found overloaded (1.5 s).
    pace(&gate, &timer, ms(300));
    let mut held = take(&gate, 1);
    let mut queue = std::collections::VecDeque::from([park(&gate, 1), park(&gate, 1)]);
    for _ in 0..2 {
        timer.advance(ms(300));
        drop(held);
        let mut head = queue.pop_front().unwrap();
        let Poll::Ready(Ok(permit)) = poll(head.as_mut()) else {
            panic!("the head is next")
        };
        held = permit;
        queue.push_back(park(&gate, 1));
    }
    timer.advance(ms(300)); // t = 1.2 s
    drop(held);
    let mut head = queue.pop_front().unwrap();
    let Poll::Ready(Ok(p)) = poll(head.as_mut()) else {
        panic!("the head is next")
    };
    let woken = Arc::new(Flag::default());
    let waker = Waker::from(Arc::clone(&woken));
    let mut cx = Context::from_waker(&waker);
    let mut late = Box::pin(gate.acquire(1, Src::Mirror));
    assert!(late.as_mut().poll(&mut cx).is_pending());
    // At the cap (200 ms into its wait) the gate is not overloaded: it stays, and
    // looks again a recheck later: the target, or a sixteenth of its budget
    // (312.5 ms) if longer.
    timer.advance(ms(200)); // t = 1.4 s
    assert!(woken.take(), "woken at the cap");
    assert!(late.as_mut().poll(&mut cx).is_pending());
    timer.advance(ms(100)); // t = 1.5 s: the next admission finds the gate overloaded
    drop(p);
    let mut head = queue.pop_front().unwrap();
    let Poll::Ready(Ok(_p)) = poll(head.as_mut()) else {
        panic!("the head is next")
    };
    assert!(gate.is_overloaded());
    assert!(!woken.take(), "nothing wakes it before its next look");
    timer.advance(ms(212)); // t = 1.712 s
    assert!(!woken.take(), "not yet");
    timer.advance(Duration::from_micros(500)); // 512.5 ms into its wait
    assert!(woken.take(), "woken at its next look");
    assert!(matches!(
        late.as_mut().poll(&mut cx),
        Poll::Ready(Err(GateError::Busy { .. }))
    ));
    let waited = ms(200) + BUDGET / 16;
    assert!(rec
        .events()
        .contains(&Event::OverloadShed("mirror", 1, waited)));
}

/// A waker that remembers it was woken.
#[derive(Default)]
struct Flag(std::sync::atomic::AtomicBool);

impl Flag {
    fn take(&self) -> bool {
        self.0.swap(false, std::sync::atomic::Ordering::SeqCst)
    }
}

impl std::task::Wake for Flag {
    fn wake(self: Arc<Self>) {
        self.0.store(true, std::sync::atomic::Ordering::SeqCst);
    }
}

#[test]
fn a_burst_that_drains_within_the_interval_is_not_a_standing_queue() {
    let (gate, timer, rec) = gate(4);
    pace(&gate, &timer, ms(1000)); // a mean hold of 1 s: an interval of 2 s
    let mut held: Vec<_> = (0..4).map(|_| take(&gate, 1)).collect();
    let mut burst: Vec<_> = (0..4).map(|_| park(&gate, 1)).collect();
    // The burst drains in 4 × 100 ms; its last waits (300, 400 ms) are past the
    // cap of 200 ms, and the gate never calls it overload.
    let mut permits = Vec::new();
    for (i, w) in burst.iter_mut().enumerate() {
        timer.advance(ms(100));
        drop(held.remove(0));
        let Poll::Ready(Ok(p)) = poll(w.as_mut()) else {
            panic!("burst {i} is next")
        };
        permits.push(p);
    }
    // The queue is empty: the next request is granted at once, and a wait of 0
    // ends the interval below the target.
    drop(permits);
    timer.advance(ms(700));
    drop(take(&gate, 1));
    timer.advance(ms(1000));
    drop(take(&gate, 1));
    assert!(!gate.is_overloaded());
    assert!(!rec.events().contains(&Event::Overloaded(true)));
    assert_eq!(rec.total_sheds(), 0);
}

#[test]
fn the_state_ends_after_two_intervals_that_saw_the_queue_empty() {
    let (gate, timer, rec) = gate(1);
    let (w3, p2) = standing_queue(&gate, &timer, &rec);
    drop(w3); // the client leaves: counted nowhere
    drop(p2); // a release with nobody parked: the queue is empty
              // Grants at once, the intervals (600 ms) passing: the first interval that saw
              // the queue empty (and shed nobody) is not enough, the second is.
    drop(take(&gate, 1));
    timer.advance(ms(700));
    drop(take(&gate, 1));
    assert!(gate.is_overloaded(), "one calm interval");
    timer.advance(ms(700));
    drop(take(&gate, 1));
    assert!(!gate.is_overloaded(), "two in a row");
    assert_eq!(
        rec.events()
            .iter()
            .filter(|e| **e == Event::Overloaded(false))
            .count(),
        1
    );
    assert_eq!(rec.total_sheds(), 0, "nobody shed for the wait budget");
    assert!(!rec
        .events()
        .iter()
        .any(|e| matches!(e, Event::OverloadShed(..) | Event::Hopeless(..))));
}

#[test]
fn a_client_that_leaves_is_never_counted_while_overloaded() {
    let (gate, timer, rec) = gate(1);
    let (_w3, _p2) = standing_queue(&gate, &timer, &rec);
    let events = rec.events().len();
    // A caller with its own signal that fires before anything else.
    let trigger = Trigger::new();
    let mut w = Box::pin(gate.acquire(1, Src::Upload).until(trigger.fired()));
    trigger.fire();
    assert!(matches!(
        poll(w.as_mut()),
        Poll::Ready(Err(GateError::Cancelled))
    ));
    assert_eq!(rec.events().len(), events, "a cancellation is not a shed");
}

#[test]
fn max_waiters_sheds_first_and_a_hopeless_shed_gives_its_place_back() {
    let (gate, timer, rec) = gate_with(1, Some(TARGET), Some(2));
    pace(&gate, &timer, ms(1000));
    let _all = take(&gate, 1);
    let _a = park(&gate, 1); // 1 s
    let _b = park(&gate, 1); // 2 s
    let mut c = Box::pin(gate.acquire(1, Src::Upload));
    assert!(matches!(
        poll(c.as_mut()),
        Poll::Ready(Err(GateError::Busy { .. }))
    ));
    assert!(matches!(
        rec.events().last(),
        Some(Event::QueueFull("upload", 1))
    ));
    // With one place left, a request whose estimate exceeds its ceiling is shed
    // as hopeless and leaves the place free.
    drop(_b);
    let mut d = Box::pin(gate.acquire(1, Src::Upload).ceiling(ms(500)));
    assert!(matches!(
        poll(d.as_mut()),
        Poll::Ready(Err(GateError::Busy { .. }))
    ));
    assert!(matches!(
        rec.events().last(),
        Some(Event::Hopeless("upload", 1, _))
    ));
    let _e = park(&gate, 1);
}

#[test]
fn close_and_drain_end_parked_waits_with_closed_and_count_nothing() {
    let (gate, timer, rec) = gate(1);
    let (mut w3, p2) = standing_queue(&gate, &timer, &rec);
    let sheds = rec.total_sheds();
    let mut drain = Box::pin(gate.drain(Duration::from_secs(10)));
    assert!(poll(drain.as_mut()).is_pending(), "a unit is held");
    assert!(matches!(
        poll(w3.as_mut()),
        Poll::Ready(Err(GateError::Closed))
    ));
    let mut late = Box::pin(gate.acquire(1, Src::Upload));
    assert!(matches!(
        poll(late.as_mut()),
        Poll::Ready(Err(GateError::Closed))
    ));
    drop(p2);
    assert!(matches!(poll(drain.as_mut()), Poll::Ready(Ok(()))));
    assert_eq!(rec.total_sheds(), sheds);
    assert!(!rec
        .events()
        .iter()
        .any(|e| matches!(e, Event::OverloadShed(..) | Event::Hopeless(..))));
}

#[test]
fn a_grow_serves_the_queue_and_lowers_the_estimate_at_once() {
    let (gate, timer, rec) = gate(2);
    pace(&gate, &timer, ms(1000));
    let _all = take(&gate, 2);
    let parked: Vec<_> = (0..9).map(|_| park(&gate, 1)).collect();
    // (9 + 1) × 1 s / 2 = 5 s: fits; one more does not.
    hopeless(&gate, &rec, 2);
    assert_eq!(gate.resize(4), Ok(2));
    // Two of the nine are granted by the grow; the rest wait behind a faster gate.
    let estimate = gate.estimated_wait(2).unwrap();
    assert!(estimate < Duration::from_secs(3), "{estimate:?}");
    let _newcomer = park(&gate, 2);
    drop(parked);
}

#[cfg(feature = "std")]
#[test]
fn a_blocking_acquire_is_shed_at_arrival_by_the_same_rule() {
    let (gate, timer, rec) = gate(4);
    pace(&gate, &timer, ms(1000));
    let _all = take(&gate, 4);
    let _parked: Vec<_> = (0..20).map(|_| park(&gate, 1)).collect();
    // The thread is told at once, without waiting on its clock.
    let retry_after = match gate.acquire_blocking(1, Src::Upload) {
        Err(GateError::Busy { retry_after, .. }) => retry_after,
        other => panic!("{other:?}"),
    };
    assert_eq!(
        rec.events().last(),
        Some(&Event::Hopeless("upload", 1, retry_after))
    );
    assert_eq!(gate.waiters(), 20, "it left the queue");
}

// The gate's pressure (`Gate::pressure`): one level from its three signals.

#[test]
fn pressure_is_calm_on_a_gate_nobody_waits_for() {
    let (gate, _timer, _rec) = gate(2);
    let _held = take(&gate, 2);
    let pressure = gate.pressure();
    assert!(pressure.is_calm(), "full but nobody waits: {pressure:?}");
}

#[test]
fn pressure_is_full_while_a_request_is_parked_and_calm_once_it_leaves_unshed() {
    let (gate, _timer, _rec) = gate_with(1, None, None);
    let _held = take(&gate, 1);
    let parked = park(&gate, 1);
    let pressure = gate.pressure();
    assert!(pressure.parked());
    assert_eq!(pressure.level(), 1.0);
    // A caller that leaves (a hang-up) is no shed: nothing presses after it.
    drop(parked);
    assert!(gate.pressure().is_calm());
}

#[test]
fn pressure_after_a_shed_at_arrival_fades_over_thirty_seconds() {
    let (gate, timer, _rec) = gate_with(1, None, None);
    let _held = take(&gate, 1);
    // Shed at once, nobody ever parked.
    assert!(gate.try_acquire(1, Src::Publish).is_err());
    assert_eq!(gate.waiters(), 0);
    assert_eq!(gate.pressure().level(), 1.0);
    assert_eq!(gate.pressure().since_shed(), Some(Duration::ZERO));
    timer.advance(Duration::from_secs(15));
    assert_eq!(gate.pressure().level(), 0.5);
    timer.advance(Duration::from_secs(15));
    assert!(gate.pressure().is_calm());
    timer.advance(ms(1));
    assert_eq!(gate.pressure().since_shed(), None);
}

#[test]
fn pressure_is_full_while_overloaded_with_nobody_parked() {
    let (gate, timer, rec) = gate(1);
    let (head, _held) = standing_queue(&gate, &timer, &rec);
    assert!(gate.is_overloaded());
    // The head hangs up: nobody is parked, the gate is still overloaded.
    drop(head);
    assert_eq!(gate.waiters(), 0);
    let pressure = gate.pressure();
    assert!(pressure.overloaded() && !pressure.parked(), "{pressure:?}");
    assert_eq!(pressure.level(), 1.0);
}
