//! Leases on a manual clock: a lease touched keeps its units, one left idle
//! expires on time with no request arriving, one checked out does not; its
//! value is dropped before its units return, however it ends; each end is
//! counted once, an expiry racing a finish included; a drain ends idle leases
//! by its grace; a value that panics in its drop loses no unit.
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
    let leases = Leases::new(&gate, IDLE);
    Setup {
        gate,
        timer,
        ends,
        leases,
    }
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

struct Driver {
    future: Pin<Box<TestExpire>>,
    flag: Arc<Flag>,
}

impl Driver {
    fn new(leases: &TestLeases) -> Self {
        let mut driver = Self {
            future: Box::pin(leases.expire()),
            flag: Arc::new(Flag::default()),
        };
        assert!(driver.poll().is_pending());
        driver
    }

    fn poll(&mut self) -> Poll<()> {
        let waker = Waker::from(Arc::clone(&self.flag));
        self.future.as_mut().poll(&mut Context::from_waker(&waker))
    }

    /// Polls it if it was woken; returns whether it was.
    fn run_if_woken(&mut self) -> bool {
        let woken = self.flag.take();
        if woken {
            assert!(self.poll().is_pending());
        }
        woken
    }
}

#[test]
fn a_lease_left_idle_expires_at_its_limit_with_no_request_arriving() {
    let s = setup();
    let mut driver = Driver::new(&s.leases);
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
    let mut driver = Driver::new(&s.leases);
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
    let mut driver = Driver::new(&s.leases);
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
    let mut driver = Driver::new(&s.leases);
    for id in ["finished", "cancelled", "expired", "drained", "dropped"] {
        s.open(id, 1);
    }
    s.leases.checkout("finished").unwrap().finish();
    s.leases.checkout("cancelled").unwrap().cancel();
    let held = s.leases.checkout("drained").unwrap();
    let kept = s.leases.checkout("dropped").unwrap();
    s.timer.advance(IDLE);
    assert!(driver.run_if_woken());
    s.leases.drain(Duration::ZERO);
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
    let mut driver = Driver::new(&s.leases);
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
    let mut driver = Driver::new(&s.leases);
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
        let mut driver = Driver::new(&s.leases);
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
    let mut driver = Driver::new(&s.leases);
    s.open("idle", 1);
    s.open("busy", 1);
    let busy = s.leases.checkout("busy").unwrap();
    s.timer.advance(secs(5));
    s.leases.drain(secs(10));
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
    let mut driver = Driver::new(&s.leases);
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
    let mut driver = Driver::new(&s.leases);
    let Setup { leases, .. } = s;
    drop(leases);
    assert!(driver.flag.take(), "the table's end wakes the driver");
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
    let leases: Leases<u32, (), Src, _, _> = Leases::new(&gate, IDLE);
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
