//! Property 7 at the gate: an observer that panics in any hook (a metrics
//! recorder's bug), a waker that panics, or a hand-written `Source` that
//! disagrees with its `ALL` leaves the gate's own books exact: `in_use()`, the
//! units held per source, a drain's report, the capacity, and every unit back in
//! the end with nobody stranded. The panic still reaches the caller.
// Needs the `alloc` feature (the feature powerset builds every test target).
#![cfg(feature = "alloc")]

mod support;

use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use admit::{
    AdmitEvent, CapacityEvent, Gate, GateAcquire, GateError, GatePermit, Observer, OverloadEvent,
    Priority, ReleaseEvent, ShedEvent, Source, StartEvent,
};
use support::{ManualTimer, Src};

/// An observer hook.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Hook {
    Start,
    Admit,
    Release,
    Shed,
    Capacity,
    Overload,
}

/// One panic, armed by hand: the next call of the armed hook (or of any hook, or
/// any [`FuseWaker`]'s wake, for [`Fuse::arm_any`]) panics, and the fuse is spent.
/// At most one panic per arming, so never a second one during an unwind.
#[derive(Debug, Default)]
struct Fuse {
    armed: Mutex<Option<Option<Hook>>>,
    blown: AtomicUsize,
    /// `on_release` calls heard, panicking or not.
    releases_heard: AtomicUsize,
}

impl Fuse {
    fn arm(&self, hook: Hook) {
        *self.armed.lock().unwrap() = Some(Some(hook));
    }

    fn arm_any(&self) {
        *self.armed.lock().unwrap() = Some(None);
    }

    fn disarm(&self) {
        *self.armed.lock().unwrap() = None;
    }

    /// Panics if armed for `hook` (`None`: a waker).
    fn check(&self, hook: Option<Hook>) {
        let mut armed = self.armed.lock().unwrap();
        let hit = match *armed {
            Some(None) => true,
            Some(Some(h)) => Some(h) == hook,
            None => false,
        };
        if hit {
            *armed = None;
            drop(armed);
            self.blown.fetch_add(1, Ordering::SeqCst);
            panic!("the fuse blew in {hook:?}");
        }
    }

    fn blown(&self) -> usize {
        self.blown.load(Ordering::SeqCst)
    }
}

/// An observer whose hooks blow the fuse when it is armed for them.
#[derive(Debug, Default)]
struct Panicky(Arc<Fuse>);

impl Observer for Panicky {
    fn on_start(&self, _: &StartEvent<'_>) {
        self.0.check(Some(Hook::Start));
    }
    fn on_admit(&self, _: &AdmitEvent) {
        self.0.check(Some(Hook::Admit));
    }
    fn on_release(&self, _: &ReleaseEvent) {
        self.0.releases_heard.fetch_add(1, Ordering::SeqCst);
        self.0.check(Some(Hook::Release));
    }
    fn on_shed(&self, _: &ShedEvent) {
        self.0.check(Some(Hook::Shed));
    }
    fn on_capacity(&self, _: &CapacityEvent) {
        self.0.check(Some(Hook::Capacity));
    }
    fn on_overload(&self, _: &OverloadEvent) {
        self.0.check(Some(Hook::Overload));
    }
}

/// A waker that counts its wakes, and blows the fuse when it is armed for any.
struct FuseWaker {
    fuse: Arc<Fuse>,
    wakes: AtomicUsize,
}

impl Wake for FuseWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.wakes.fetch_add(1, Ordering::SeqCst);
        self.fuse.check(None);
    }
}

type TestGate = Gate<Src, ManualTimer, Panicky>;

const BUDGET: Duration = Duration::from_secs(5);

fn gate_with(
    capacity: usize,
    build: impl FnOnce(
        admit::GateBuilder<Src, ManualTimer, Panicky>,
    ) -> admit::GateBuilder<Src, ManualTimer, Panicky>,
) -> (TestGate, ManualTimer, Arc<Fuse>) {
    let timer = ManualTimer::new();
    let fuse = Arc::new(Fuse::default());
    let builder = Gate::builder(capacity)
        .wait_budget(BUDGET)
        .max_units(capacity)
        .timer(timer.clone())
        .observer(Panicky(Arc::clone(&fuse)));
    (build(builder).build().unwrap(), timer, fuse)
}

fn gate(capacity: usize) -> (TestGate, ManualTimer, Arc<Fuse>) {
    gate_with(capacity, |b| b)
}

fn poll<F: Future + ?Sized>(f: Pin<&mut F>) -> Poll<F::Output> {
    f.poll(&mut Context::from_waker(Waker::noop()))
}

/// Runs `f`, which must panic with the fuse (the panic reaches the caller).
#[track_caller]
fn blows<R>(fuse: &Fuse, f: impl FnOnce() -> R) {
    let before = fuse.blown();
    assert!(
        catch_unwind(AssertUnwindSafe(f)).is_err(),
        "the panic reaches the caller"
    );
    assert_eq!(fuse.blown(), before + 1, "the fuse blew, once");
}

/// The books at rest: `in_use`, the units held per source, nobody parked, and
/// (unless `held` says otherwise) every free unit takeable at once.
#[track_caller]
fn assert_books(gate: &TestGate, held: &[(Src, usize)]) {
    let in_use: usize = held.iter().map(|&(_, units)| units).sum();
    assert_eq!(gate.in_use(), in_use, "in_use: {gate:?}");
    assert_eq!(gate.held_by_source(), held, "held per source");
    assert_eq!(gate.waiters(), 0, "nobody parked");
    let mut free = gate.capacity() - in_use;
    let mut taken = Vec::new();
    while free > 0 {
        let units = free.min(gate.max_units());
        taken.push(
            gate.try_acquire(units, Src::Mirror)
                .expect("every unit not held is free"),
        );
        free -= units;
    }
}

#[test]
fn an_observer_panicking_in_on_release_still_counts_the_units_out() {
    let (gate, _, fuse) = gate(4);
    let upload = gate.try_acquire(2, Src::Upload).unwrap();
    let publish = gate.try_acquire(1, Src::Publish).unwrap();
    fuse.arm(Hook::Release);
    blows(&fuse, || drop(upload));
    assert_books(&gate, &[(Src::Publish, 1)]);

    // A drain's report names what is really held, no more.
    let report = futures_lite::future::block_on(gate.drain(Duration::ZERO)).unwrap_err();
    assert_eq!(report.held(), [(Src::Publish, 1)]);
    fuse.arm(Hook::Release);
    blows(&fuse, || publish.release());
    assert_eq!((gate.in_use(), gate.held_by_source()), (0, vec![]));
    futures_lite::future::block_on(gate.drain(Duration::ZERO)).expect("every unit back");
}

#[test]
fn a_forget_whose_observer_panics_still_lowers_the_capacity() {
    for hook in [Hook::Release, Hook::Capacity] {
        let (gate, _, fuse) = gate(4);
        let permit = gate.try_acquire(2, Src::Upload).unwrap();
        fuse.arm(hook);
        blows(&fuse, || permit.forget());
        assert_eq!(
            gate.capacity(),
            2,
            "the forget was not turned into a release ({hook:?})"
        );
        assert_books(&gate, &[]);
    }
}

#[test]
fn an_observer_panicking_in_on_admit_returns_the_units() {
    let (gate, timer, fuse) = gate(2);
    // The observer is not called again on the unwind: it was told of no permit.
    let admit_blows = |f: &mut dyn FnMut()| {
        let heard = fuse.releases_heard.load(Ordering::SeqCst);
        fuse.arm(Hook::Admit);
        blows(&fuse, f);
        assert_eq!(
            fuse.releases_heard.load(Ordering::SeqCst),
            heard,
            "no release heard"
        );
    };

    // At once, by `try_acquire` and by `acquire`.
    admit_blows(&mut || drop(gate.try_acquire(2, Src::Upload)));
    assert_books(&gate, &[]);
    admit_blows(&mut || drop(poll(std::pin::pin!(gate.acquire(1, Src::Upload)))));
    assert_books(&gate, &[]);

    // After parking.
    let held = gate.try_acquire(2, Src::Mirror).unwrap();
    let mut parked = Box::pin(gate.acquire(2, Src::Publish));
    assert!(poll(parked.as_mut()).is_pending());
    timer.advance(Duration::from_millis(10));
    drop(held);
    admit_blows(&mut || drop(poll(parked.as_mut())));
    drop(parked);
    assert_books(&gate, &[]);
}

#[test]
fn an_observer_panicking_in_on_shed_leaves_the_queue_whole() {
    let (gate, timer, fuse) = gate_with(2, |b| b.max_waiters(1));
    let held = gate.try_acquire(2, Src::Mirror).unwrap();

    // `try_acquire` finding the units taken.
    fuse.arm(Hook::Shed);
    blows(&fuse, || gate.try_acquire(1, Src::Upload));

    // A parked acquire shed at its budget gives its place back.
    let mut parked = Box::pin(gate.acquire(1, Src::Upload));
    assert!(poll(parked.as_mut()).is_pending());
    timer.advance(BUDGET);
    fuse.arm(Hook::Shed);
    blows(&fuse, || poll(parked.as_mut()));
    drop(parked);
    assert_eq!(gate.waiters(), 0);

    // The place among `max_waiters` came back: one can park again, and the next
    // is shed for a full queue, with the observer panicking.
    let mut again = Box::pin(gate.acquire(1, Src::Upload));
    assert!(poll(again.as_mut()).is_pending(), "the one place is free");
    fuse.arm(Hook::Shed);
    blows(&fuse, || poll(std::pin::pin!(gate.acquire(1, Src::Upload))));
    drop(again);
    drop(held);
    assert_books(&gate, &[]);
}

#[test]
fn an_observer_panicking_in_on_overload_leaves_the_counts_exact() {
    // Capacity 1, holds of 300 ms and a queue of two: every admission waits 300
    // ms, three times the target; the interval is two mean holds, and the fourth
    // admission finds the gate overloaded (as in `tests/overload.rs`).
    let (gate, timer, fuse) = gate_with(1, |b| b.overload_target(Duration::from_millis(100)));
    let ms = Duration::from_millis;
    let all = gate.try_acquire(1, Src::Mirror).unwrap();
    timer.advance(ms(300));
    drop(all);
    let mut held = Some(gate.try_acquire(1, Src::Mirror).unwrap());
    let mut queue: std::collections::VecDeque<_> = (0..2)
        .map(|_| {
            let mut w = Box::pin(gate.acquire(1, Src::Upload));
            assert!(poll(w.as_mut()).is_pending());
            w
        })
        .collect();
    fuse.arm(Hook::Overload);
    for step in 1..=4 {
        timer.advance(ms(300));
        drop(held.take());
        let mut head = queue.pop_front().unwrap();
        if step < 4 {
            let Poll::Ready(Ok(permit)) = poll(head.as_mut()) else {
                panic!("the head is next at step {step}")
            };
            held = Some(permit);
            let mut w = Box::pin(gate.acquire(1, Src::Upload));
            assert!(poll(w.as_mut()).is_pending());
            queue.push_back(w);
        } else {
            // The admission that finds the gate overloaded tells the observer.
            blows(&fuse, || poll(head.as_mut()));
        }
    }
    assert!(gate.is_overloaded());
    assert_eq!((gate.in_use(), gate.held_by_source()), (0, vec![]));
    drop(queue);
    assert_books(&gate, &[]);
}

#[test]
fn an_observer_panicking_in_on_capacity_or_on_start_reaches_the_caller() {
    let (gate, _, fuse) = gate(4);
    fuse.arm(Hook::Capacity);
    blows(&fuse, || gate.resize(6));
    assert_eq!(gate.capacity(), 6, "the resize happened");
    assert_books(&gate, &[]);

    let fuse = Arc::new(Fuse::default());
    fuse.arm(Hook::Start);
    blows(&fuse, || {
        Gate::<Src, _, _>::builder(1)
            .timer(ManualTimer::new())
            .observer(Panicky(Arc::clone(&fuse)))
            .build()
    });
}

/// A hand-written `Source` that can be made to misbehave after the fact.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tier {
    Free,
    Paid,
}

/// While set, `Tier`'s `label` and `index` panic.
static TIER_PANICS: AtomicBool = AtomicBool::new(false);
/// While set, `Tier::index` says 0 for every value.
static TIER_MISINDEXES: AtomicBool = AtomicBool::new(false);

impl Source for Tier {
    const ALL: &'static [Self] = &[Tier::Free, Tier::Paid];

    fn label(self) -> &'static str {
        assert!(!TIER_PANICS.load(Ordering::SeqCst), "label() panicked");
        match self {
            Tier::Free => "free",
            Tier::Paid => "paid",
        }
    }

    fn index(self) -> usize {
        assert!(!TIER_PANICS.load(Ordering::SeqCst), "index() panicked");
        if TIER_MISINDEXES.load(Ordering::SeqCst) {
            0
        } else {
            self as usize
        }
    }
}

#[test]
fn a_source_impl_that_disagrees_with_its_all_fails_at_admission_and_never_in_a_drop() {
    let gate = Gate::<Tier, _, _>::builder(3)
        .max_units(2)
        .timer(ManualTimer::new())
        .build()
        .unwrap();
    let paid = gate.try_acquire(2, Tier::Paid).unwrap();

    // A wrong index is refused at admission, before anything is counted.
    TIER_MISINDEXES.store(true, Ordering::SeqCst);
    let refused = catch_unwind(AssertUnwindSafe(|| gate.try_acquire(1, Tier::Paid)));
    TIER_MISINDEXES.store(false, Ordering::SeqCst);
    let message = refused.unwrap_err();
    assert!(
        message
            .downcast_ref::<String>()
            .is_some_and(|m| m.contains("disagrees with its `ALL`")),
        "a message that says what is wrong"
    );
    assert_eq!(gate.held_by_source(), [(Tier::Paid, 2)], "no count skewed");
    assert_eq!(gate.in_use(), 2);

    // A permit's release calls no `Source` code: it cannot panic there.
    TIER_PANICS.store(true, Ordering::SeqCst);
    let released = catch_unwind(AssertUnwindSafe(|| drop(paid)));
    TIER_PANICS.store(false, Ordering::SeqCst);
    assert!(released.is_ok(), "the drop called `label` or `index`");
    assert_eq!((gate.in_use(), gate.held_by_source()), (0, vec![]));
    drop(gate.try_acquire(3 - 1, Tier::Free).unwrap());
}

/// A tiny deterministic generator (xorshift64*), so each seed replays.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 33) as usize % n
    }

    fn one_in(&mut self, n: usize) -> bool {
        self.below(n) == 0
    }
}

/// A live acquire, in the order of its first poll.
struct Waiter<'g> {
    future: Pin<Box<GateAcquire<'g, Src, ManualTimer, Panicky>>>,
    waker: Arc<FuseWaker>,
    units: usize,
    /// Polled and found parked at least once.
    parked: bool,
    /// `waker.wakes` at its last poll.
    seen_wakes: usize,
}

/// Random operations on a gate (acquires of every priority class, so parked
/// ones are shed for higher ones) with a panic armed before a quarter of them, in
/// a random hook or waker (one per operation, so never two in one unwind). After
/// every operation, with the woken acquires polled: the gate's books equal the
/// permits alive, and the oldest parked request does not fit the units free
/// (nobody stranded). In the end a drain reports exactly what is held, and once
/// everything is dropped every unit is back.
#[test]
fn random_panics_in_hooks_and_wakers_leave_the_books_exact() {
    // Under miri (which unwinds each panic slowly) a tenth of the seeds: the same
    // paths, checked for undefined behaviour.
    let (seeds, often) = if cfg!(miri) { (30, 100) } else { (300, 1_000) };
    let blown: usize = (1..=seeds).map(random_run).sum();
    assert!(blown > often, "the runs panicked often: {blown}");
}

fn random_run(seed: u64) -> usize {
    let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
    let capacity = 1 + rng.below(6);
    let overload = rng.one_in(2);
    let max_waiters = rng.one_in(3).then(|| 1 + rng.below(4));
    let (gate, timer, fuse) = gate_with(capacity, |b| {
        let b = b.wait_budget(Duration::from_millis(50));
        let b = if overload {
            b.overload_target(Duration::from_millis(5))
        } else {
            b
        };
        match max_waiters {
            Some(max) => b.max_waiters(max),
            None => b,
        }
    });
    let gate = &gate;
    let mut waiters: Vec<Waiter<'_>> = Vec::new();
    let mut permits: Vec<GatePermit<Src>> = Vec::new();
    let site = |rng: &mut Rng| Src::ALL[rng.below(Src::ALL.len())];

    for step in 0..120 {
        if rng.one_in(4) {
            fuse.arm_any();
        }
        let ops = 9;
        let op = rng.below(ops);
        let _ = catch_unwind(AssertUnwindSafe(|| match op {
            0 | 1 => {
                let units = 1 + rng.below(capacity);
                let waker = Arc::new(FuseWaker {
                    fuse: Arc::clone(&fuse),
                    wakes: AtomicUsize::new(0),
                });
                let priority = Priority::ALL[rng.below(Priority::ALL.len())];
                waiters.push(Waiter {
                    future: Box::pin(gate.acquire(units, site(&mut rng)).priority(priority)),
                    waker,
                    units,
                    parked: false,
                    seen_wakes: 0,
                });
                let i = waiters.len() - 1;
                poll_waiter(&mut waiters, &mut permits, i);
            }
            2 => {
                if let Ok(permit) = gate.try_acquire(1 + rng.below(capacity), site(&mut rng)) {
                    permits.push(permit);
                }
            }
            3 if !permits.is_empty() => {
                let permit = permits.swap_remove(rng.below(permits.len()));
                if rng.one_in(6) {
                    permit.forget();
                } else {
                    drop(permit);
                }
            }
            4 if !waiters.is_empty() => {
                drop(waiters.remove(rng.below(waiters.len())));
            }
            5 => timer.advance(Duration::from_millis(rng.below(30) as u64)),
            6 if permits.len() >= 2 => {
                let other = permits.swap_remove(rng.below(permits.len()));
                let i = rng.below(permits.len());
                permits[i].merge(other);
            }
            7 if !permits.is_empty() => {
                let i = rng.below(permits.len());
                if let Some(part) = permits[i].split(1) {
                    permits.push(part);
                }
            }
            8 => {
                let _ = gate.resize(capacity + rng.below(3));
            }
            _ => {}
        }));
        fuse.disarm();
        run_woken(&mut waiters, &mut permits);
        check_books(gate, &permits, &waiters, seed, step);
    }

    // A drain reports what is held, exactly.
    let held = held_per_source(&permits);
    let drained = futures_lite::future::block_on(gate.drain(Duration::ZERO));
    match drained {
        Ok(()) => assert!(held.is_empty(), "seed {seed}"),
        Err(report) => assert_eq!(report.held(), held, "seed {seed}: the drain's report"),
    }
    drop(permits);
    for waiter in &mut waiters {
        // Closed by the drain: every parked acquire ends.
        let poll = waiter
            .future
            .as_mut()
            .poll(&mut Context::from_waker(Waker::noop()));
        assert!(
            matches!(
                poll,
                Poll::Ready(Err(GateError::Closed)) | Poll::Ready(Ok(_))
            ),
            "seed {seed}: {poll:?}"
        );
    }
    drop(waiters);
    assert_eq!((gate.in_use(), gate.waiters()), (0, 0), "seed {seed}");
    futures_lite::future::block_on(gate.drain(Duration::ZERO))
        .unwrap_or_else(|e| panic!("seed {seed}: {e}"));
    fuse.blown()
}

/// Polls waiter `i` with its own waker; a panic out of the poll ends it, as an
/// executor drops a task that panicked.
fn poll_waiter<'g>(waiters: &mut Vec<Waiter<'g>>, permits: &mut Vec<GatePermit<Src>>, i: usize) {
    let waiter = &mut waiters[i];
    waiter.seen_wakes = waiter.waker.wakes.load(Ordering::SeqCst);
    let waker = Waker::from(Arc::clone(&waiter.waker));
    let polled = catch_unwind(AssertUnwindSafe(|| {
        waiter
            .future
            .as_mut()
            .poll(&mut Context::from_waker(&waker))
    }));
    match polled {
        Ok(Poll::Pending) => waiter.parked = true,
        Ok(Poll::Ready(result)) => {
            waiters.remove(i);
            permits.extend(result.ok());
        }
        Err(panic) => {
            waiters.remove(i);
            std::panic::resume_unwind(panic);
        }
    }
}

/// Polls every waiter woken since its last poll, until none is.
fn run_woken<'g>(waiters: &mut Vec<Waiter<'g>>, permits: &mut Vec<GatePermit<Src>>) {
    while let Some(i) = waiters
        .iter()
        .position(|w| w.waker.wakes.load(Ordering::SeqCst) != w.seen_wakes)
    {
        poll_waiter(waiters, permits, i);
    }
}

fn held_per_source(permits: &[GatePermit<Src>]) -> Vec<(Src, usize)> {
    Src::ALL
        .iter()
        .map(|&src| {
            let units = permits
                .iter()
                .filter(|p| p.source() == src)
                .map(GatePermit::units)
                .sum();
            (src, units)
        })
        .filter(|&(_, units)| units != 0)
        .collect()
}

#[track_caller]
fn check_books(
    gate: &TestGate,
    permits: &[GatePermit<Src>],
    waiters: &[Waiter<'_>],
    seed: u64,
    step: usize,
) {
    let in_use: usize = permits.iter().map(GatePermit::units).sum();
    assert_eq!(gate.in_use(), in_use, "seed {seed} step {step}: in_use");
    assert_eq!(
        gate.held_by_source(),
        held_per_source(permits),
        "seed {seed} step {step}: held per source"
    );
    let parked = waiters.iter().filter(|w| w.parked).count();
    assert_eq!(gate.waiters(), parked, "seed {seed} step {step}: waiters");
    // The oldest parked request (they joined in the order of their first poll,
    // which is this list's order) does not fit what is free, or it would have
    // been granted and woken.
    if let Some(head) = waiters.iter().find(|w| w.parked) {
        let free = gate.capacity().saturating_sub(in_use);
        assert!(
            head.units > free,
            "seed {seed} step {step}: a request of {} stranded with {free} free: {gate:?}",
            head.units
        );
    }
}
