//! Leases on a manual clock: a lease touched keeps its units, one left idle
//! expires on time with no request arriving, one checked out does not; its
//! value is dropped before its units return, however it ends; each end is
//! counted once, an expiry racing a finish included; a drain ends idle leases
//! by its grace; a maximum age ends a lease however recently it was touched,
//! as soon as nobody holds it; a value that panics in its drop loses no unit.
#![cfg(feature = "std")]

mod support;

use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use admit::{Expire, Gate, LeaseEnd, LeaseEndEvent, LeaseError, Leases, Observer, ReleaseEvent};
use support::{ManualTimer, Src};

const IDLE: Duration = Duration::from_secs(30);

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

/// Records each lease's end and each release, in order.
#[derive(Default)]
struct Ends {
    log: Mutex<Vec<String>>,
    ends: Mutex<Vec<(LeaseEnd, usize, Duration)>>,
}

impl Observer for Ends {
    fn on_lease_end(&self, e: &LeaseEndEvent) {
        self.ends.lock().unwrap().push((e.how, e.units, e.held));
        self.log
            .lock()
            .unwrap()
            .push(format!("end {}", e.how.label()));
    }
    fn on_release(&self, e: &ReleaseEvent) {
        self.log
            .lock()
            .unwrap()
            .push(format!("release {}", e.units));
    }
}

impl Ends {
    fn ends(&self) -> Vec<(LeaseEnd, usize, Duration)> {
        self.ends.lock().unwrap().clone()
    }
    fn log(&self) -> Vec<String> {
        self.log.lock().unwrap().clone()
    }
}

type TestGate = Gate<Src, ManualTimer, Arc<Ends>>;

/// A session's value: says when it is dropped, with the gate's units in use
/// then, in the observer's log.
struct Session {
    ends: Arc<Ends>,
    in_use: Arc<dyn Fn() -> usize + Send + Sync>,
    panics: bool,
}

impl Drop for Session {
    fn drop(&mut self) {
        let in_use = (self.in_use)();
        self.ends
            .log
            .lock()
            .unwrap()
            .push(format!("value dropped, {in_use} in use"));
        if self.panics {
            panic!("a session's drop panicked");
        }
    }
}

type TestLeases = Leases<String, Session, Src, ManualTimer, Arc<Ends>>;

struct Setup {
    gate: TestGate,
    timer: ManualTimer,
    ends: Arc<Ends>,
    leases: TestLeases,
    /// The table's driver, until a test takes it ([`Driver::new`]).
    driver: Mutex<Option<TestExpire>>,
}

fn setup() -> Setup {
    let timer = ManualTimer::new();
    let ends = Arc::new(Ends::default());
    let gate = Gate::builder(8)
        .max_units(2)
        .timer(timer.clone())
        .observer(Arc::clone(&ends))
        .build()
        .unwrap();
    let (leases, driver) = Leases::with_driver(&gate, IDLE);
    Setup {
        gate,
        timer,
        ends,
        leases,
        driver: Mutex::new(Some(driver)),
    }
}

/// As [`setup`], its leases with a maximum age of `age`.
fn setup_aged(age: Duration) -> Setup {
    let mut s = setup();
    s.leases = s.leases.max_age(age);
    s
}

impl Setup {
    fn session(&self, panics: bool) -> Session {
        let gate = self.gate.clone();
        Session {
            ends: Arc::clone(&self.ends),
            in_use: Arc::new(move || gate.in_use()),
            panics,
        }
    }

    /// Opens a lease of `units` under `id`.
    fn open(&self, id: &str, units: usize) {
        let permit = self.gate.try_acquire(units, Src::Upload).unwrap();
        let session = self.session(false);
        assert!(self.leases.insert(id.to_owned(), permit, session).is_ok());
    }

    fn open_panicking(&self, id: &str) {
        let permit = self.gate.try_acquire(1, Src::Upload).unwrap();
        let session = self.session(true);
        assert!(self.leases.insert(id.to_owned(), permit, session).is_ok());
    }
}

/// A waker that remembers it was woken.
#[derive(Default)]
struct Flag(AtomicBool);

impl Wake for Flag {
    fn wake(self: Arc<Self>) {
        self.0.store(true, Ordering::SeqCst);
    }
}

impl Flag {
    fn take(&self) -> bool {
        self.0.swap(false, Ordering::SeqCst)
    }
}

type TestExpire = Expire<String, Session, Src, ManualTimer, Arc<Ends>>;

/// A future polled by hand, with a waker that remembers it was woken.
struct ByHand<F: Future> {
    future: Pin<Box<F>>,
    flag: Arc<Flag>,
}

impl<F: Future> ByHand<F> {
    fn new(future: F) -> Self {
        Self {
            future: Box::pin(future),
            flag: Arc::new(Flag::default()),
        }
    }

    fn poll(&mut self) -> Poll<F::Output> {
        let waker = Waker::from(Arc::clone(&self.flag));
        self.future.as_mut().poll(&mut Context::from_waker(&waker))
    }

    /// Whether it was woken since this was last asked.
    fn woken(&self) -> bool {
        self.flag.take()
    }
}

/// A table's driver, polled by hand.
struct Driver(ByHand<TestExpire>);

impl Driver {
    fn new(s: &Setup) -> Self {
        let driver = s.driver.lock().unwrap().take().expect("one driver a table");
        let mut driver = Self(ByHand::new(driver));
        assert!(driver.poll().is_pending());
        driver
    }

    fn poll(&mut self) -> Poll<()> {
        self.0.poll()
    }

    /// Polls it if it was woken; returns whether it was.
    fn run_if_woken(&mut self) -> bool {
        let woken = self.0.woken();
        if woken {
            assert!(self.poll().is_pending());
        }
        woken
    }
}

#[test]
fn a_lease_left_idle_expires_at_its_limit_with_no_request_arriving() {
    let s = setup();
    let mut driver = Driver::new(&s);
    s.open("a", 2);
    assert!(driver.run_if_woken(), "a first deadline wakes the driver");
    assert_eq!(s.leases.idle_left("a"), Ok(Some(IDLE)));
    s.timer.advance(IDLE - secs(1));
    assert!(!driver.run_if_woken(), "not due yet");
    assert_eq!(s.gate.in_use(), 2);
    s.timer.advance(secs(1));
    assert!(
        driver.run_if_woken(),
        "the driver's sleep fired at the deadline"
    );
    assert_eq!(s.gate.in_use(), 0);
    assert_eq!(s.ends.ends(), [(LeaseEnd::Expired, 2, IDLE)]);
    assert_eq!(
        s.leases.checkout("a").unwrap_err(),
        LeaseError::Ended(LeaseEnd::Expired)
    );
    assert!(s.leases.is_empty());
}

#[test]
fn a_lease_used_or_touched_keeps_its_units() {
    let s = setup();
    let mut driver = Driver::new(&s);
    s.open("a", 1);
    for _ in 0..3 {
        s.timer.advance(IDLE - secs(1));
        drop(s.leases.checkout("a").unwrap()); // a PATCH: idle again from now
        driver.run_if_woken();
    }
    s.timer.advance(IDLE - secs(1));
    s.leases.touch("a").unwrap();
    driver.run_if_woken();
    s.timer.advance(IDLE - secs(1));
    driver.run_if_woken();
    assert_eq!(s.gate.in_use(), 1);
    assert_eq!(s.leases.idle_left("a"), Ok(Some(secs(1))));
    assert!(s.ends.ends().is_empty());
    s.timer.advance(secs(1));
    assert!(driver.run_if_woken());
    assert_eq!(s.ends.ends(), [(LeaseEnd::Expired, 1, IDLE * 5 - secs(4))]);
}

#[test]
fn a_lease_checked_out_by_a_long_request_never_expires_meanwhile() {
    let s = setup();
    let mut driver = Driver::new(&s);
    s.open("a", 1);
    let patch = s.leases.checkout("a").unwrap();
    assert_eq!(s.leases.idle_left("a"), Ok(None), "in flight: no clock");
    assert_eq!(s.leases.checkout("a").unwrap_err(), LeaseError::InUse);
    s.timer.advance(IDLE * 3);
    driver.run_if_woken();
    assert_eq!(s.gate.in_use(), 1);
    drop(patch);
    assert!(
        driver.run_if_woken(),
        "a lease back in the table wakes the driver"
    );
    s.timer.advance(IDLE);
    assert!(driver.run_if_woken());
    assert_eq!(s.ends.ends(), [(LeaseEnd::Expired, 1, IDLE * 4)]);
}

#[test]
fn the_value_is_dropped_before_the_units_return_however_it_ends() {
    let s = setup();
    let mut driver = Driver::new(&s);
    for id in ["finished", "cancelled", "expired", "drained", "dropped"] {
        s.open(id, 1);
    }
    s.leases.checkout("finished").unwrap().finish();
    s.leases.checkout("cancelled").unwrap().cancel();
    let held = s.leases.checkout("drained").unwrap();
    let kept = s.leases.checkout("dropped").unwrap();
    s.timer.advance(IDLE);
    assert!(driver.run_if_woken());
    drop(s.leases.drain(Duration::ZERO));
    drop(held); // back after the drain's end: ends at once
    drop(kept);
    assert_eq!(s.leases.len(), 0);
    // Each value is dropped with its own unit still in use: 5, 4, ... units.
    let expected: Vec<String> = ["finished", "cancelled", "expired", "drained", "drained"]
        .iter()
        .enumerate()
        .flat_map(|(i, how)| {
            [
                format!("value dropped, {} in use", 5 - i),
                format!("end {how}"),
                "release 1".to_owned(),
            ]
        })
        .collect();
    assert_eq!(s.ends.log(), expected);
}

#[test]
fn the_leases_left_when_the_table_goes_end_drained_value_first() {
    let s = setup();
    s.open("a", 2);
    let Setup {
        gate, ends, leases, ..
    } = s;
    drop(leases);
    assert_eq!(gate.in_use(), 0);
    assert_eq!(
        ends.log(),
        ["value dropped, 2 in use", "end drained", "release 2"]
    );
}

#[test]
fn an_expiry_and_a_finish_at_the_deadline_end_the_lease_once() {
    // The request comes first: the lease is past its deadline, so the request
    // ends it, as expired, and is told so; the driver finds nothing left.
    let s = setup();
    let mut driver = Driver::new(&s);
    s.open("a", 1);
    s.timer.advance(IDLE);
    assert_eq!(
        s.leases.checkout("a").unwrap_err(),
        LeaseError::Ended(LeaseEnd::Expired)
    );
    driver.run_if_woken();
    assert_eq!(s.ends.ends().len(), 1);

    // The driver comes first: the request is told.
    let s = setup();
    let mut driver = Driver::new(&s);
    s.open("a", 1);
    s.timer.advance(IDLE);
    assert!(driver.run_if_woken());
    assert_eq!(
        s.leases.checkout("a").unwrap_err(),
        LeaseError::Ended(LeaseEnd::Expired)
    );
    assert_eq!(s.ends.ends().len(), 1);
}

#[test]
fn an_expiry_racing_a_finish_on_threads_ends_the_lease_once_and_the_loser_is_told() {
    let runs = if cfg!(miri) { 4 } else { 200 };
    let (mut finished, mut expired) = (0, 0);
    for _ in 0..runs {
        let s = setup();
        let mut driver = Driver::new(&s);
        s.open("a", 1);
        s.timer.advance(IDLE - Duration::from_nanos(1));
        let lease = s.leases.checkout("a").unwrap();
        drop(lease);
        let leases = s.leases.clone();
        let put = std::thread::spawn(move || match leases.checkout("a") {
            Ok(lease) => {
                lease.finish();
                true
            }
            Err(e) => {
                assert_eq!(e, LeaseError::Ended(LeaseEnd::Expired));
                false
            }
        });
        s.timer.advance(IDLE);
        driver.run_if_woken();
        if put.join().unwrap() {
            finished += 1;
        } else {
            expired += 1;
        }
        assert_eq!(s.ends.ends().len(), 1, "ended exactly once");
        assert_eq!(s.gate.in_use(), 0);
    }
    assert_eq!(finished + expired, runs);
}

#[test]
fn a_drain_ends_idle_leases_by_its_grace_and_in_flight_ones_when_returned() {
    let s = setup();
    let mut driver = Driver::new(&s);
    s.open("idle", 1);
    s.open("busy", 1);
    let busy = s.leases.checkout("busy").unwrap();
    s.timer.advance(secs(5));
    drop(s.leases.drain(secs(10)));
    assert!(
        driver.run_if_woken(),
        "the sooner deadline wakes the driver"
    );
    assert_eq!(s.leases.idle_left("idle"), Ok(Some(secs(10))));
    s.timer.advance(secs(10));
    assert!(driver.run_if_woken());
    assert_eq!(s.ends.ends(), [(LeaseEnd::Drained, 1, secs(15))]);
    // Still in flight past the grace: it ends when its request returns it.
    s.timer.advance(secs(1));
    assert_eq!(s.gate.in_use(), 1);
    drop(busy);
    assert_eq!(s.gate.in_use(), 0);
    assert_eq!(s.ends.ends()[1], (LeaseEnd::Drained, 1, secs(16)));
}

#[test]
fn a_value_that_panics_in_its_drop_loses_no_unit_and_the_driver_goes_on() {
    let s = setup();
    let mut driver = Driver::new(&s);
    // Finished by its owner: the panic reaches the owner, after the units.
    s.open_panicking("a");
    let lease = s.leases.checkout("a").unwrap();
    let panicked = catch_unwind(AssertUnwindSafe(|| lease.finish()));
    assert!(panicked.is_err());
    assert_eq!(s.gate.in_use(), 0);
    // Expired by the driver: it ends it all the same, and ends the next one.
    s.open_panicking("b");
    s.timer.advance(secs(1));
    s.open("c", 1);
    s.timer.advance(IDLE - secs(1));
    assert!(driver.run_if_woken());
    s.timer.advance(secs(1));
    assert!(driver.run_if_woken());
    assert_eq!(s.gate.in_use(), 0);
    let ways: Vec<LeaseEnd> = s.ends.ends().iter().map(|e| e.0).collect();
    assert_eq!(
        ways,
        [LeaseEnd::Finished, LeaseEnd::Expired, LeaseEnd::Expired]
    );
}

#[test]
fn an_ended_lease_is_told_apart_from_an_unknown_one_for_a_while() {
    let s = setup();
    s.open("a", 1);
    s.leases.checkout("a").unwrap().cancel();
    assert_eq!(
        s.leases.touch("a").unwrap_err(),
        LeaseError::Ended(LeaseEnd::Cancelled)
    );
    assert_eq!(s.leases.checkout("b").unwrap_err(), LeaseError::Unknown);
    s.timer.advance(IDLE); // remembered for the idle limit by default
    assert_eq!(s.leases.checkout("a").unwrap_err(), LeaseError::Unknown);
    // An id in use is refused, its permit and value handed back.
    s.open("c", 1);
    let permit = s.gate.try_acquire(1, Src::Upload).unwrap();
    let (permit, _value) = s
        .leases
        .insert("c".to_owned(), permit, s.session(false))
        .unwrap_err();
    assert_eq!(permit.units(), 1);
}

#[test]
fn the_driver_completes_once_the_table_is_gone() {
    let s = setup();
    let mut driver = Driver::new(&s);
    let Setup { leases, .. } = s;
    drop(leases);
    assert!(driver.0.woken(), "the table's end wakes the driver");
    assert!(driver.poll().is_ready());
}

#[test]
fn lease_ends_are_counted_by_a_counter_observer_once_each() {
    // A plain count beside the log: four leases, four ends, four releases.
    #[derive(Default)]
    struct Count(AtomicUsize, AtomicUsize);
    impl Observer for Count {
        fn on_lease_end(&self, _: &LeaseEndEvent) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
        fn on_release(&self, _: &ReleaseEvent) {
            self.1.fetch_add(1, Ordering::SeqCst);
        }
    }
    let timer = ManualTimer::new();
    let count = Arc::new(Count::default());
    let gate = Gate::builder(4)
        .timer(timer.clone())
        .observer(Arc::clone(&count))
        .build()
        .unwrap();
    let (leases, _driver): (Leases<u32, (), Src, _, _>, _) = Leases::with_driver(&gate, IDLE);
    for id in 0..4 {
        let permit = gate.try_acquire(1, Src::Upload).unwrap();
        leases.insert(id, permit, ()).unwrap();
    }
    leases.checkout(&0).unwrap().finish();
    leases.checkout(&1).unwrap().cancel();
    timer.advance(IDLE);
    assert_eq!(leases.touch(&2), Err(LeaseError::Ended(LeaseEnd::Expired)));
    drop(leases);
    assert_eq!(count.0.load(Ordering::SeqCst), 4);
    assert_eq!(count.1.load(Ordering::SeqCst), 4);
    assert_eq!(gate.in_use(), 0);
}

/// A seeded random run against a reference: opens (of 1 or 2 units), checkouts
/// held across steps, returns, finishes, cancels, touches, time passing (the
/// driver polled when woken), drains and drops of the table, on three gates'
/// worth of ids; two seeds in three with a maximum age. After every step the units in use equal the units of the
/// model's live leases, each end is heard once with its way, and every
/// request is answered as the model says; at the end every unit is back.
#[test]
fn random_runs_keep_the_books_exact_and_end_every_lease_once() {
    use std::collections::HashMap;

    struct Rng(u64);
    impl Rng {
        fn below(&mut self, n: u64) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0 % n
        }
    }

    #[derive(Clone, Copy, PartialEq, Debug)]
    enum Model {
        Idle { deadline: Duration, how: LeaseEnd },
        Out,
        Ended(LeaseEnd),
    }

    /// The deadline of a lease idle from `now`, and how it ends there: the
    /// soonest of its idle limit, its age and the drain's end; on a tie the
    /// drain names it, then the age.
    fn deadline_of(
        now: Duration,
        aged_at: Option<Duration>,
        drain_by: Option<Duration>,
    ) -> (Duration, LeaseEnd) {
        let mut deadline = (now + IDLE, LeaseEnd::Expired);
        if let Some(at) = aged_at.filter(|at| *at <= deadline.0) {
            deadline = (at, LeaseEnd::Aged);
        }
        if let Some(by) = drain_by.filter(|by| *by <= deadline.0) {
            deadline = (by, LeaseEnd::Drained);
        }
        deadline
    }

    let runs = if cfg!(miri) { 3 } else { 200 };
    let mut aged_heard = 0;
    for seed in 1..=runs {
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ seed);
        let mut s = setup();
        let max_age = (seed % 3 != 0).then(|| Duration::from_secs(10 + rng.below(80)));
        if let Some(age) = max_age {
            s.leases = s.leases.max_age(age);
        }
        let mut driver = Driver::new(&s);
        let mut model: HashMap<String, (Model, usize)> = HashMap::new();
        // Each id's age deadline, from its last insert.
        let mut aged_at: HashMap<String, Option<Duration>> = HashMap::new();
        let mut out: HashMap<String, admit::Lease<String, Session, Src, ManualTimer, Arc<Ends>>> =
            HashMap::new();
        let mut drain_by: Option<Duration> = None;
        let (mut opened, mut opened_units) = (0, 0);
        for step in 0..120 {
            let id = format!("s{}", rng.below(6));
            let now = s.timer.now();
            // The model's view of a lease due by now: ended by whoever looks.
            let due = |m: &Model| matches!(m, Model::Idle { deadline, .. } if *deadline <= now);
            match rng.below(8) {
                0 | 1 => {
                    let units = 1 + rng.below(2) as usize;
                    let live = model
                        .get(&id)
                        .is_some_and(|(m, _)| matches!(m, Model::Idle { .. } | Model::Out));
                    let Ok(permit) = s.gate.try_acquire(units, Src::Upload) else {
                        continue; // full: the gate of 8 units holds at most 8
                    };
                    let inserted = s.leases.insert(id.clone(), permit, s.session(false));
                    if live {
                        assert!(inserted.is_err(), "step {step}: {id} is live");
                    } else {
                        assert!(inserted.is_ok(), "step {step}: {id} is free");
                        opened += 1;
                        opened_units += units;
                        let born_aged_at = max_age.map(|age| now + age);
                        aged_at.insert(id.clone(), born_aged_at);
                        let (deadline, how) = deadline_of(now, born_aged_at, drain_by);
                        if deadline <= now {
                            model.insert(id.clone(), (Model::Ended(how), units));
                        } else {
                            model.insert(id.clone(), (Model::Idle { deadline, how }, units));
                        }
                    }
                }
                2 => {
                    let got = s.leases.checkout(&id);
                    match model.get(&id).copied() {
                        Some((m @ Model::Idle { how, .. }, units)) if due(&m) => {
                            assert_eq!(got.unwrap_err(), LeaseError::Ended(how), "step {step}");
                            model.insert(id.clone(), (Model::Ended(how), units));
                        }
                        Some((Model::Idle { .. }, units)) => {
                            out.insert(id.clone(), got.expect("idle: checked out"));
                            model.insert(id.clone(), (Model::Out, units));
                        }
                        Some((Model::Out, _)) => {
                            assert_eq!(got.unwrap_err(), LeaseError::InUse, "step {step}");
                        }
                        Some((Model::Ended(how), _)) => {
                            // Remembered for the idle limit; forgotten after.
                            let err = got.unwrap_err();
                            assert!(
                                err == LeaseError::Ended(how) || err == LeaseError::Unknown,
                                "step {step}: {err:?}"
                            );
                        }
                        None => assert_eq!(got.unwrap_err(), LeaseError::Unknown),
                    }
                }
                3 => {
                    if let Some(lease) = out.remove(&id) {
                        let units = model[&id].1;
                        let (deadline, how) = deadline_of(now, aged_at[&id], drain_by);
                        match rng.below(3) {
                            0 => {
                                lease.finish();
                                model.insert(id.clone(), (Model::Ended(LeaseEnd::Finished), units));
                            }
                            1 => {
                                lease.cancel();
                                model
                                    .insert(id.clone(), (Model::Ended(LeaseEnd::Cancelled), units));
                            }
                            _ => {
                                drop(lease);
                                let m = if deadline <= now {
                                    Model::Ended(how)
                                } else {
                                    Model::Idle { deadline, how }
                                };
                                model.insert(id.clone(), (m, units));
                            }
                        }
                    }
                }
                4 => {
                    let got = s.leases.touch(&id);
                    if let Some((m @ Model::Idle { how, .. }, units)) = model.get(&id).copied() {
                        if due(&m) {
                            assert_eq!(got, Err(LeaseError::Ended(how)), "step {step}");
                            model.insert(id.clone(), (Model::Ended(how), units));
                        } else {
                            assert_eq!(got, Ok(()), "step {step}");
                            let (deadline, how) = deadline_of(now, aged_at[&id], drain_by);
                            model.insert(id.clone(), (Model::Idle { deadline, how }, units));
                        }
                    }
                }
                5 | 6 => {
                    s.timer.advance(Duration::from_secs(1 + rng.below(20)));
                    let now = s.timer.now();
                    driver.run_if_woken();
                    for (m, _) in model.values_mut() {
                        if let Model::Idle { deadline, how } = *m {
                            if deadline <= now {
                                *m = Model::Ended(how);
                            }
                        }
                    }
                }
                _ => {
                    if drain_by.is_none() && rng.below(4) == 0 {
                        let grace = Duration::from_secs(rng.below(40));
                        drop(s.leases.drain(grace));
                        let by = now + grace;
                        drain_by = Some(by);
                        for (m, _) in model.values_mut() {
                            if let Model::Idle { deadline, how } = m {
                                if *deadline > by {
                                    *deadline = by;
                                    *how = LeaseEnd::Drained;
                                }
                                if *deadline <= now {
                                    *m = Model::Ended(LeaseEnd::Drained);
                                }
                            }
                        }
                        driver.run_if_woken();
                    }
                }
            }
            // The books: every opened unit is in use or its lease's end was
            // heard (once), and the live leases' units are in use.
            let heard: usize = s.ends.ends().iter().map(|e| e.1).sum();
            assert_eq!(
                s.gate.in_use() + heard,
                opened_units,
                "seed {seed} step {step}: a unit lost or counted twice"
            );
            let live_units: usize = model
                .values()
                .filter(|(m, _)| !matches!(m, Model::Ended(_)))
                .map(|(_, units)| units)
                .sum();
            assert!(s.gate.in_use() >= live_units, "seed {seed} step {step}");
            assert!(s.ends.ends().len() <= opened, "seed {seed} step {step}");
        }
        // The end: every request returns its lease, the table goes; all back.
        for (_, lease) in out.drain() {
            drop(lease);
        }
        let Setup {
            gate, ends, leases, ..
        } = s;
        drop(leases);
        drop(driver);
        assert_eq!(gate.in_use(), 0, "seed {seed}");
        assert_eq!(
            ends.ends().len(),
            opened,
            "seed {seed}: every lease ended once"
        );
        let aged = ends.ends().iter().filter(|e| e.0 == LeaseEnd::Aged).count();
        assert!(
            max_age.is_some() || aged == 0,
            "seed {seed}: no maximum age"
        );
        aged_heard += aged;
    }
    assert!(aged_heard > 0, "the runs reached a maximum age");
}

#[test]
fn remember_ended_applies_to_every_clone_of_the_table() {
    let s = setup();
    let shared = s.leases.clone();
    let _same = shared.remember_ended(secs(5));
    s.open("a", 1);
    s.leases.checkout("a").unwrap().finish();
    s.timer.advance(secs(4));
    assert_eq!(
        s.leases.checkout("a").unwrap_err(),
        LeaseError::Ended(LeaseEnd::Finished)
    );
    s.timer.advance(secs(1));
    assert_eq!(s.leases.checkout("a").unwrap_err(), LeaseError::Unknown);
}

#[test]
fn a_lease_idle_past_its_maximum_age_ends_aged_with_no_request_arriving() {
    let s = setup_aged(secs(20));
    let mut driver = Driver::new(&s);
    s.open("a", 2);
    assert!(driver.run_if_woken());
    assert_eq!(
        s.leases.idle_left("a"),
        Ok(Some(secs(20))),
        "the age comes before the idle limit"
    );
    s.timer.advance(secs(19));
    assert!(!driver.run_if_woken(), "not due yet");
    assert_eq!(s.gate.in_use(), 2);
    s.timer.advance(secs(1));
    assert!(driver.run_if_woken(), "the driver's sleep fired at the age");
    assert_eq!(s.gate.in_use(), 0);
    assert_eq!(s.ends.ends(), [(LeaseEnd::Aged, 2, secs(20))]);
    assert_eq!(
        s.leases.checkout("a").unwrap_err(),
        LeaseError::Ended(LeaseEnd::Aged)
    );
    assert!(s.leases.is_empty());
}

#[test]
fn touching_or_using_a_lease_renews_its_idle_clock_but_never_its_age() {
    let s = setup_aged(secs(75));
    let mut driver = Driver::new(&s);
    s.open("used", 1);
    s.open("left", 1); // never touched: its idle limit still ends it first
    s.timer.advance(secs(25));
    s.leases.touch("used").unwrap();
    driver.run_if_woken();
    s.timer.advance(secs(5));
    assert!(driver.run_if_woken());
    assert_eq!(s.ends.ends(), [(LeaseEnd::Expired, 1, IDLE)]);
    s.timer.advance(secs(20));
    drop(s.leases.checkout("used").unwrap()); // t = 50: idle again, not younger
    driver.run_if_woken();
    assert_eq!(s.leases.idle_left("used"), Ok(Some(secs(25))));
    s.timer.advance(secs(20));
    s.leases.touch("used").unwrap(); // t = 70
    driver.run_if_woken();
    assert_eq!(s.leases.idle_left("used"), Ok(Some(secs(5))));
    s.timer.advance(secs(4));
    assert!(!driver.run_if_woken());
    assert_eq!(s.gate.in_use(), 1);
    s.timer.advance(secs(1));
    assert!(driver.run_if_woken());
    assert_eq!(s.gate.in_use(), 0);
    assert_eq!(s.ends.ends()[1], (LeaseEnd::Aged, 1, secs(75)));
}

#[test]
fn a_lease_checked_out_when_its_age_passes_ends_aged_as_it_is_checked_in() {
    let s = setup_aged(secs(20));
    let mut driver = Driver::new(&s);
    s.open("a", 1);
    let patch = s.leases.checkout("a").unwrap();
    s.timer.advance(secs(60));
    driver.run_if_woken();
    assert_eq!(s.gate.in_use(), 1, "in flight: not ended under its request");
    assert!(s.ends.ends().is_empty());
    assert_eq!(s.leases.checkout("a").unwrap_err(), LeaseError::InUse);
    assert_eq!(s.leases.idle_left("a"), Ok(None));
    drop(patch);
    assert_eq!(s.gate.in_use(), 0);
    assert_eq!(s.ends.ends(), [(LeaseEnd::Aged, 1, secs(60))]);
    assert_eq!(
        s.leases.checkout("a").unwrap_err(),
        LeaseError::Ended(LeaseEnd::Aged)
    );
    driver.run_if_woken();
    assert_eq!(s.ends.ends().len(), 1);
}

#[test]
fn finishing_or_cancelling_a_lease_past_its_age_ends_it_as_its_request_says() {
    let s = setup_aged(secs(20));
    let mut driver = Driver::new(&s);
    s.open("put", 1);
    s.open("delete", 1);
    let put = s.leases.checkout("put").unwrap();
    let delete = s.leases.checkout("delete").unwrap();
    s.timer.advance(secs(30));
    driver.run_if_woken();
    put.finish();
    delete.cancel();
    driver.run_if_woken();
    assert_eq!(s.gate.in_use(), 0);
    assert_eq!(
        s.ends.ends(),
        [
            (LeaseEnd::Finished, 1, secs(30)),
            (LeaseEnd::Cancelled, 1, secs(30))
        ]
    );
    assert_eq!(
        s.leases.checkout("put").unwrap_err(),
        LeaseError::Ended(LeaseEnd::Finished)
    );
}

#[test]
fn a_request_for_a_lease_past_its_age_ends_it_and_is_told_aged() {
    // The driver is late (never run here): the requests end the leases.
    let s = setup_aged(secs(20));
    let mut driver = Driver::new(&s);
    s.open("a", 1);
    s.open("b", 1);
    s.timer.advance(secs(10));
    s.leases.touch("a").unwrap();
    s.leases.touch("b").unwrap();
    s.timer.advance(secs(10));
    assert_eq!(
        s.leases.checkout("a").unwrap_err(),
        LeaseError::Ended(LeaseEnd::Aged)
    );
    assert_eq!(
        s.leases.touch("b").unwrap_err(),
        LeaseError::Ended(LeaseEnd::Aged)
    );
    assert_eq!(s.gate.in_use(), 0);
    driver.run_if_woken();
    assert_eq!(
        s.ends.ends(),
        [(LeaseEnd::Aged, 1, secs(20)), (LeaseEnd::Aged, 1, secs(20))]
    );
}

#[test]
#[should_panic(expected = "Leases::max_age: the maximum age must be greater than zero")]
fn a_zero_maximum_age_panics() {
    let _ = setup().leases.max_age(Duration::ZERO);
}

#[test]
fn a_maximum_age_applies_to_the_leases_inserted_from_then_on() {
    let s = setup();
    let mut driver = Driver::new(&s);
    assert_eq!(s.leases.age_limit(), None, "no maximum age by default");
    s.open("before", 1);
    let _same = s.leases.clone().max_age(secs(10));
    assert_eq!(s.leases.age_limit(), Some(secs(10)), "every clone's");
    s.open("after", 1);
    s.timer.advance(secs(10));
    assert!(driver.run_if_woken());
    assert_eq!(s.ends.ends(), [(LeaseEnd::Aged, 1, secs(10))]);
    s.timer.advance(IDLE - secs(10));
    assert!(driver.run_if_woken());
    assert_eq!(s.ends.ends()[1], (LeaseEnd::Expired, 1, IDLE));
}

#[test]
fn an_aged_lease_is_heard_once_and_its_units_return_after_its_value_drops() {
    let s = setup_aged(secs(20));
    let mut driver = Driver::new(&s);
    s.open("idle", 2);
    s.open("busy", 1);
    let busy = s.leases.checkout("busy").unwrap();
    s.timer.advance(secs(20));
    assert!(driver.run_if_woken());
    drop(busy);
    // Asked again, by a request and by the driver: not heard again.
    for id in ["idle", "busy"] {
        assert_eq!(
            s.leases.touch(id).unwrap_err(),
            LeaseError::Ended(LeaseEnd::Aged)
        );
    }
    s.timer.advance(IDLE);
    driver.run_if_woken();
    assert_eq!(s.gate.in_use(), 0);
    assert_eq!(
        s.ends.ends(),
        [(LeaseEnd::Aged, 2, secs(20)), (LeaseEnd::Aged, 1, secs(20))]
    );
    assert_eq!(
        s.ends.log(),
        [
            "value dropped, 3 in use",
            "end aged",
            "release 2",
            "value dropped, 1 in use",
            "end aged",
            "release 1"
        ]
    );
}

#[test]
fn a_drain_and_a_maximum_age_end_a_lease_by_whichever_comes_first() {
    // Age 20; a drain at 5 with a grace of 30 ends idle leases by 35.
    let s = setup_aged(secs(20));
    let mut driver = Driver::new(&s);
    s.open("early", 1); // aged at 20, before the drain's end
    s.open("early_out", 1);
    let early_out = s.leases.checkout("early_out").unwrap();
    s.timer.advance(secs(5));
    drop(s.leases.drain(secs(30)));
    driver.run_if_woken();
    assert_eq!(s.leases.idle_left("early"), Ok(Some(secs(15))));
    s.timer.advance(secs(10));
    s.open("tie", 1); // aged at 35, as the drain ends: the drain names it
    s.timer.advance(secs(5));
    assert!(driver.run_if_woken());
    assert_eq!(s.ends.ends(), [(LeaseEnd::Aged, 1, secs(20))]);
    s.open("late", 1); // aged at 40, after the drain's end
    s.open("late_out", 1);
    let late_out = s.leases.checkout("late_out").unwrap();
    assert_eq!(s.leases.idle_left("late"), Ok(Some(secs(15))));
    s.timer.advance(secs(15));
    assert!(driver.run_if_woken());
    s.timer.advance(secs(5));
    // Both checked in past both deadlines: the sooner one names the end.
    drop(early_out); // aged at 20, drained by 35
    drop(late_out); // drained by 35, aged at 40
    assert_eq!(s.gate.in_use(), 0);
    assert_eq!(
        s.ends.ends(),
        [
            (LeaseEnd::Aged, 1, secs(20)),
            (LeaseEnd::Drained, 1, secs(20)),
            (LeaseEnd::Drained, 1, secs(15)),
            (LeaseEnd::Aged, 1, secs(40)),
            (LeaseEnd::Drained, 1, secs(20)),
        ]
    );
}

#[test]
fn each_ended_id_is_forgotten_after_its_own_window() {
    // The window in force when a lease ends is its own, whatever order the
    // ids ended in.
    let s = setup();
    let long = s.leases.clone().remember_ended(secs(100));
    s.open("long", 1);
    long.checkout("long").unwrap().finish();
    let short = s.leases.clone().remember_ended(secs(1));
    s.open("short", 1);
    short.checkout("short").unwrap().finish();
    s.timer.advance(secs(5));
    assert_eq!(s.leases.touch("short"), Err(LeaseError::Unknown));
    assert_eq!(
        s.leases.touch("long"),
        Err(LeaseError::Ended(LeaseEnd::Finished))
    );
    s.timer.advance(secs(95));
    assert_eq!(s.leases.touch("long"), Err(LeaseError::Unknown));
}

#[test]
fn an_id_reused_after_it_ended_is_remembered_by_its_last_end() {
    let s = setup();
    let mut driver = Driver::new(&s);
    s.open("a", 1);
    s.leases.checkout("a").unwrap().cancel();
    s.timer.advance(secs(10));
    s.open("a", 1);
    s.leases.checkout("a").unwrap().finish();
    // The first end's window passes: the driver forgets nothing of the second.
    s.timer.advance(IDLE - secs(10));
    driver.run_if_woken();
    assert_eq!(
        s.leases.touch("a"),
        Err(LeaseError::Ended(LeaseEnd::Finished))
    );
    s.timer.advance(secs(10));
    driver.run_if_woken();
    assert_eq!(s.leases.touch("a"), Err(LeaseError::Unknown));
}

#[test]
fn a_mass_expiry_lets_go_of_the_table_between_batches() {
    // The observer hears each end outside the lock, and counts the leases
    // still live then: a pass that held the lock throughout would let it see
    // only what is left at the end.
    type Table = Leases<u32, (), Src, ManualTimer, Arc<LiveAtEnd>>;
    #[derive(Default)]
    struct LiveAtEnd {
        leases: Mutex<Option<Table>>,
        seen: Mutex<Vec<usize>>,
    }
    impl Observer for LiveAtEnd {
        fn on_lease_end(&self, _: &LeaseEndEvent) {
            if let Some(leases) = &*self.leases.lock().unwrap() {
                self.seen.lock().unwrap().push(leases.len());
            }
        }
    }
    const N: u32 = if cfg!(miri) { 200 } else { 1_000 };
    let timer = ManualTimer::new();
    let observer = Arc::new(LiveAtEnd::default());
    let gate = Gate::builder(N as usize)
        .timer(timer.clone())
        .observer(Arc::clone(&observer))
        .build()
        .unwrap();
    let (leases, driver) = Leases::with_driver(&gate, IDLE);
    for id in 0..N {
        leases
            .insert(id, gate.try_acquire(1, Src::Upload).unwrap(), ())
            .unwrap();
    }
    *observer.leases.lock().unwrap() = Some(leases.clone());
    let mut driver = ByHand::new(driver);
    assert!(driver.poll().is_pending());
    timer.advance(IDLE);
    assert!(driver.woken());
    assert!(driver.poll().is_pending());
    let seen = observer.seen.lock().unwrap().clone();
    *observer.leases.lock().unwrap() = None;
    assert_eq!(seen.len(), N as usize);
    assert_eq!(gate.in_use(), 0);
    let mut batches = seen.clone();
    batches.dedup();
    let batch = (N as usize - seen[0]) as u32;
    assert!(
        batch > 1 && batch < N,
        "one batch ends {batch} of {N} leases"
    );
    assert_eq!(
        batches,
        (0..N.div_ceil(batch))
            .map(|b| N.saturating_sub((b + 1) * batch) as usize)
            .collect::<Vec<_>>(),
        "the live count falls one batch at a time"
    );
}

#[test]
fn a_drain_completes_early_once_the_last_lease_has_ended() {
    let s = setup();
    s.open("a", 1);
    let mut drain = ByHand::new(s.leases.drain(secs(10)));
    assert!(drain.poll().is_pending());
    s.leases.checkout("a").unwrap().finish();
    assert!(
        drain.woken(),
        "the last end wakes the drain, its units back"
    );
    assert_eq!(s.gate.in_use(), 0);
    assert!(drain.poll().is_ready());
}

#[test]
fn a_drain_awaited_to_its_end_ends_the_idle_leases_itself() {
    // No driver runs: the drain's own future ends them at the grace's end,
    // before the caller goes on to the gate's drain.
    let s = setup();
    s.open("idle", 1);
    s.open("busy", 1);
    let busy = s.leases.checkout("busy").unwrap();
    let mut drain = ByHand::new(s.leases.drain(secs(10)));
    assert!(drain.poll().is_pending());
    s.timer.advance(secs(10));
    assert!(drain.woken());
    assert!(drain.poll().is_ready());
    assert_eq!(
        s.gate.in_use(),
        1,
        "the idle one ended; the busy one is in flight"
    );
    assert_eq!(
        s.leases.touch("idle"),
        Err(LeaseError::Ended(LeaseEnd::Drained))
    );
    drop(busy);
    assert_eq!(
        s.gate.in_use(),
        0,
        "returned past the drain's end: ended at once"
    );
}

#[test]
#[should_panic(expected = "cannot spawn the table's driver")]
fn a_table_whose_timer_cannot_spawn_its_driver_is_refused() {
    let gate = Gate::builder(1).timer(ManualTimer::new()).build().unwrap();
    let _: Leases<u32, (), Src, _, _> = Leases::new(&gate, IDLE);
}

#[test]
fn leases_on_a_thread_timer_expire_with_no_request_arriving() {
    // Real time: the ThreadTimer's clock is the machine's. The lease must end
    // within its limit plus a generous margin, not at an exact instant.
    let gate = Gate::builder(2)
        .timer(admit::ThreadTimer::new())
        .build()
        .unwrap();
    let leases: Leases<u32, (), Src, _, _> =
        Leases::new(&gate, Duration::from_millis(20)).remember_ended(Duration::from_secs(3600));
    leases
        .insert(1, gate.try_acquire(1, Src::Upload).unwrap(), ())
        .unwrap();
    let give_up = std::time::Instant::now() + Duration::from_secs(30);
    while gate.in_use() != 0 {
        assert!(
            std::time::Instant::now() < give_up,
            "the lease never expired"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(leases.touch(&1), Err(LeaseError::Ended(LeaseEnd::Expired)));
}

#[test]
fn a_lease_start_is_heard_once_before_its_end_and_a_panicking_hook_loses_no_unit() {
    #[derive(Default)]
    struct Starts {
        log: Mutex<Vec<String>>,
        panic_at_start: AtomicBool,
    }
    impl Observer for Starts {
        fn on_lease_start(&self, e: &admit::LeaseStartEvent) {
            self.log
                .lock()
                .unwrap()
                .push(format!("start {} {} {:?}", e.source, e.units, e.priority));
            assert!(
                !self.panic_at_start.load(Ordering::SeqCst),
                "on_lease_start panicked"
            );
        }
        fn on_lease_end(&self, e: &LeaseEndEvent) {
            self.log
                .lock()
                .unwrap()
                .push(format!("end {}", e.how.label()));
        }
    }
    let observer = Arc::new(Starts::default());
    let gate = Gate::builder(4)
        .max_units(2)
        .timer(ManualTimer::new())
        .observer(Arc::clone(&observer))
        .build()
        .unwrap();
    let (leases, _driver) = Leases::with_driver(&gate, IDLE);
    leases
        .insert(1, gate.try_acquire(2, Src::Upload).unwrap(), ())
        .unwrap();
    // A refused insert is no start.
    let _ = leases.insert(1, gate.try_acquire(1, Src::Upload).unwrap(), ());
    leases.checkout(&1).unwrap().finish();
    assert_eq!(
        *observer.log.lock().unwrap(),
        ["start upload 2 Critical", "end finished"]
    );

    // Past a drain's end a lease ends as it starts: start, then end, and a
    // panicking start hook still lets the end return the units.
    drop(leases.drain(Duration::ZERO));
    observer.panic_at_start.store(true, Ordering::SeqCst);
    let permit = gate.try_acquire(1, Src::Upload).unwrap();
    let inserted = catch_unwind(AssertUnwindSafe(|| leases.insert(2, permit, ())));
    assert!(inserted.is_err(), "the hook's panic reaches the caller");
    assert_eq!(gate.in_use(), 0);
    assert_eq!(
        observer.log.lock().unwrap()[2..],
        ["start upload 1 Critical", "end drained"]
    );
}

#[test]
fn an_end_says_how_late_past_its_deadline_it_came() {
    #[derive(Default)]
    struct Late(Mutex<Vec<(LeaseEnd, Duration)>>);
    impl Observer for Late {
        fn on_lease_end(&self, e: &LeaseEndEvent) {
            self.0.lock().unwrap().push((e.how, e.late));
        }
    }
    let timer = ManualTimer::new();
    let observer = Arc::new(Late::default());
    let gate = Gate::builder(4)
        .timer(timer.clone())
        .observer(Arc::clone(&observer))
        .build()
        .unwrap();
    let (leases, driver) = Leases::with_driver(&gate, IDLE);
    let open = |id: u32| {
        leases
            .insert(id, gate.try_acquire(1, Src::Upload).unwrap(), ())
            .unwrap();
    };
    // No driver runs: a request finds the lease 100 s past its deadline.
    open(1);
    timer.advance(IDLE + secs(100));
    assert_eq!(leases.touch(&1), Err(LeaseError::Ended(LeaseEnd::Expired)));
    // The driver, woken at the deadline, is on time; an owner's end is never late.
    let mut driver = ByHand::new(driver);
    assert!(driver.poll().is_pending());
    open(2);
    open(3);
    leases.checkout(&3).unwrap().finish();
    timer.advance(IDLE);
    assert!(driver.woken());
    assert!(driver.poll().is_pending());
    assert_eq!(
        *observer.0.lock().unwrap(),
        [
            (LeaseEnd::Expired, secs(100)),
            (LeaseEnd::Finished, Duration::ZERO),
            (LeaseEnd::Expired, Duration::ZERO)
        ]
    );
}
