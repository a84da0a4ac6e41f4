//! Release ordering: an in-use gauge kept by a gate's observer (+units in
//! `on_admit`, −units in `on_release`) never reads above the capacity, in every
//! interleaving, because the gate calls `on_admit` after the grant and `on_release`
//! before the units return. A negative control does the release in the reverse
//! order (units back first, gauge decremented after) and loom catches the overshoot.

use std::sync::Arc;

use admit::{AdmitEvent, Gate, Observer, ReleaseEvent, Semaphore};
use loom::future::block_on;
use loom::sync::atomic::{AtomicUsize, Ordering};
use loom::thread;
use loom_tests::Frozen;

admit::sources! {
    /// The model's call sites.
    enum Src { A => "a", B => "b" }
}

/// The message every overshoot panics with; the negative control matches it, so it
/// cannot pass through some other panic.
const OVERSHOOT: &str = "in-use gauge exceeded capacity";

/// A units-in-use gauge, as a metrics observer keeps one.
struct Gauge {
    in_use: AtomicUsize,
    capacity: usize,
}

impl Gauge {
    fn new(capacity: usize) -> Self {
        Self {
            in_use: AtomicUsize::new(0),
            capacity,
        }
    }

    fn add(&self, units: usize) {
        let now = self.in_use.fetch_add(units, Ordering::SeqCst) + units;
        assert!(
            now <= self.capacity,
            "{OVERSHOOT}: {now} > {}",
            self.capacity
        );
    }

    fn sub(&self, units: usize) {
        self.in_use.fetch_sub(units, Ordering::SeqCst);
    }
}

impl Observer for Gauge {
    fn on_admit(&self, event: &AdmitEvent) {
        self.add(event.units);
    }
    fn on_release(&self, event: &ReleaseEvent) {
        self.sub(event.units);
    }
}

type ModelGate = Gate<Src, Frozen, Arc<Gauge>>;

fn gate(capacity: usize, max_units: usize) -> (ModelGate, Arc<Gauge>) {
    let gauge = Arc::new(Gauge::new(capacity));
    let gate = Gate::builder(capacity)
        .max_units(max_units)
        .timer(Frozen)
        .observer(Arc::clone(&gauge))
        .build()
        .expect("valid config");
    (gate, gauge)
}

fn acquire_release(gate: &ModelGate, units: usize, src: Src) {
    let permit = block_on(gate.acquire(units, src)).expect("granted");
    permit.release();
}

/// Two threads contend for one unit through the gate.
#[test]
fn gauge_never_exceeds_capacity_one_unit_two_threads() {
    loom::model(|| {
        let (gate, gauge) = gate(1, 1);
        let other = {
            let gate = gate.clone();
            thread::spawn(move || acquire_release(&gate, 1, Src::B))
        };
        acquire_release(&gate, 1, Src::A);
        other.join().unwrap();
        assert_eq!(gauge.in_use.load(Ordering::SeqCst), 0);
        assert_eq!(gate.in_use(), 0);
    });
}

/// Two threads with mixed weights at capacity 2: a one-unit and a two-unit caller.
#[test]
fn gauge_never_exceeds_capacity_weighted_two_threads() {
    loom::model(|| {
        let (gate, gauge) = gate(2, 2);
        let other = {
            let gate = gate.clone();
            thread::spawn(move || acquire_release(&gate, 2, Src::B))
        };
        acquire_release(&gate, 1, Src::A);
        other.join().unwrap();
        assert_eq!(gauge.in_use.load(Ordering::SeqCst), 0);
        assert_eq!(gate.in_use(), 0);
    });
}

/// Negative control: the reversed release — the units return to the semaphore
/// first, and the gauge is decremented after — lets another thread be granted and
/// count its units while the old ones are still on the gauge.
#[test]
#[should_panic(expected = "in-use gauge exceeded capacity")]
fn reversed_release_order_overshoots() {
    fn acquire_release_reversed(semaphore: &Semaphore, gauge: &Gauge) {
        let permit = block_on(semaphore.acquire(1)).expect("granted");
        gauge.add(1); // after the grant, as the gate does
        drop(permit); // units back first...
        gauge.sub(1); // ...gauge after: the wrong order
    }

    loom::model(|| {
        let semaphore = Arc::new(Semaphore::new(1));
        let gauge = Arc::new(Gauge::new(1));
        let other = {
            let (semaphore, gauge) = (semaphore.clone(), gauge.clone());
            thread::spawn(move || acquire_release_reversed(&semaphore, &gauge))
        };
        acquire_release_reversed(&semaphore, &gauge);
        other.join().unwrap();
    });
}
