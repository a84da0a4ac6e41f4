//! The gate's invariants under a storm of threads with an overload target: blocking
//! acquires of 1 to 3 units and of every priority class, with short real holds,
//! more than the capacity can serve, so the gate turns overloaded, caps waits,
//! sheds at arrival and sheds parked requests for higher classes. Whatever
//! the schedule: the observer's gauge never exceeds the capacity, every acquire
//! ends in exactly one outcome and the observer hears each grant and each shed
//! once, and at the end every unit is back and nobody is parked. The clock is real
//! (it is the blocking acquire's), but nothing here waits on it to order events:
//! only invariants are asserted.
#![cfg(feature = "std")]

use std::future::Pending;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use admit::{
    AdmitEvent, Gate, GateError, Observer, OverloadEvent, Priority, ReleaseEvent, ShedEvent,
    ShedReason,
};

admit::sources! {
    enum Site { A => "a" }
}

/// The system clock; never asked to sleep (the blocking acquire parks its thread).
struct Clock(Instant);

impl admit::Timer for Clock {
    type Sleep = Pending<()>;
    fn now(&self) -> Duration {
        self.0.elapsed()
    }
    fn sleep_until(&self, _: Duration) -> Pending<()> {
        std::future::pending()
    }
}

#[derive(Default)]
struct Ledger {
    capacity: usize,
    in_use: AtomicUsize,
    peak: AtomicUsize,
    admits: AtomicUsize,
    releases: AtomicUsize,
    sheds: [AtomicUsize; ShedReason::ALL.len()],
    changes: AtomicUsize,
}

impl Observer for Ledger {
    fn on_admit(&self, e: &AdmitEvent) {
        let now = self.in_use.fetch_add(e.units, Ordering::SeqCst) + e.units;
        self.peak.fetch_max(now, Ordering::SeqCst);
        self.admits.fetch_add(1, Ordering::SeqCst);
    }
    fn on_release(&self, e: &ReleaseEvent) {
        self.in_use.fetch_sub(e.units, Ordering::SeqCst);
        self.releases.fetch_add(1, Ordering::SeqCst);
    }
    fn on_shed(&self, e: &ShedEvent) {
        let at = ShedReason::ALL.iter().position(|&r| r == e.reason).unwrap();
        self.sheds[at].fetch_add(1, Ordering::SeqCst);
        assert!(e.retry_after > Duration::ZERO);
    }
    fn on_overload(&self, _: &OverloadEvent) {
        self.changes.fetch_add(1, Ordering::SeqCst);
    }
}

#[test]
fn the_gates_invariants_hold_under_an_overloaded_storm() {
    const CAPACITY: usize = 4;
    const THREADS: usize = 8;
    const OPS: usize = if cfg!(miri) { 20 } else { 400 };
    let ledger = Arc::new(Ledger {
        capacity: CAPACITY,
        ..Ledger::default()
    });
    let gate = Gate::<Site, _, _>::builder(CAPACITY)
        .max_units(3)
        .wait_budget(Duration::from_millis(40))
        .overload_target(Duration::from_micros(500))
        .timer(Clock(Instant::now()))
        .observer(Arc::clone(&ledger))
        .build()
        .unwrap();
    let granted = AtomicUsize::new(0);
    let busy = AtomicUsize::new(0);
    let shed_for = |reason| {
        let at = ShedReason::ALL.iter().position(|&r| r == reason).unwrap();
        ledger.sheds[at].load(Ordering::SeqCst)
    };
    // Eight threads on four units reach the overload rule and shed for higher
    // classes, but how soon depends on the machine's schedule (on a loaded machine
    // a whole round can pass without either); so the storm runs again, invariants
    // checked after each round, until both were seen.
    for round in 1.. {
        storm(&gate, round, THREADS, OPS, &granted, &busy);
        check_books(&gate, &ledger, THREADS * OPS * round, &granted, &busy);
        let by_rule = shed_for(ShedReason::Overload) + shed_for(ShedReason::Hopeless);
        let outranked = shed_for(ShedReason::Outranked);
        // Not asserted under miri, whose clock runs at its own pace.
        if cfg!(miri) || (by_rule > 0 && outranked > 0) {
            break;
        }
        assert!(
            round < 20,
            "in {round} rounds: {by_rule} shed by the overload rule, {outranked} for a higher class"
        );
    }
    assert!(!gate.is_closed());
}

/// One storm: `threads` threads each make `ops` blocking acquires, their sizes and
/// classes drawn from seeds that differ per round.
fn storm(
    gate: &Gate<Site, Clock, Arc<Ledger>>,
    round: usize,
    threads: usize,
    ops: usize,
    granted: &AtomicUsize,
    busy: &AtomicUsize,
) {
    thread::scope(|s| {
        for t in 0..threads {
            s.spawn(move || {
                let mut seed = 0x9e37_79b9_7f4a_7c15_u64 ^ (t as u64 + 1) ^ ((round as u64) << 32);
                for _ in 0..ops {
                    seed ^= seed << 13;
                    seed ^= seed >> 7;
                    seed ^= seed << 17;
                    let units = 1 + (seed % 3) as usize;
                    let priority = Priority::ALL[(seed >> 8) as usize % Priority::ALL.len()];
                    match gate.acquire(units, Site::A).priority(priority).blocking() {
                        Ok(permit) => {
                            granted.fetch_add(1, Ordering::SeqCst);
                            let spin = Instant::now();
                            while spin.elapsed() < Duration::from_micros(50 + seed % 200) {
                                std::hint::spin_loop();
                            }
                            drop(permit);
                        }
                        Err(GateError::Busy { .. }) => {
                            busy.fetch_add(1, Ordering::SeqCst);
                        }
                        Err(other) => panic!("{other:?}"),
                    }
                }
            });
        }
    });
}

/// The books after a storm: every acquire ended once, each told to the observer once.
fn check_books(
    gate: &Gate<Site, Clock, Arc<Ledger>>,
    ledger: &Ledger,
    acquires: usize,
    granted: &AtomicUsize,
    busy: &AtomicUsize,
) {
    let sheds: usize = ledger.sheds.iter().map(|n| n.load(Ordering::SeqCst)).sum();
    assert!(ledger.peak.load(Ordering::SeqCst) <= ledger.capacity);
    assert_eq!(
        granted.load(Ordering::SeqCst) + busy.load(Ordering::SeqCst),
        acquires
    );
    assert_eq!(
        ledger.admits.load(Ordering::SeqCst),
        granted.load(Ordering::SeqCst)
    );
    assert_eq!(
        ledger.releases.load(Ordering::SeqCst),
        granted.load(Ordering::SeqCst)
    );
    assert_eq!(
        sheds,
        busy.load(Ordering::SeqCst),
        "each Busy told to the observer once"
    );
    assert_eq!(ledger.in_use.load(Ordering::SeqCst), 0);
    assert_eq!(
        (gate.in_use(), gate.waiters()),
        (0, 0),
        "every unit back, nobody parked"
    );
    assert_eq!(
        gate.estimated_wait(ledger.capacity),
        Some(Duration::ZERO),
        "all free"
    );
}
