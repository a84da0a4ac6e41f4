//! What the tests share: a gate with a counting observer, and a way to wait for a
//! condition without ordering anything by the clock.
#![allow(dead_code)] // each test file uses a different subset

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use admit::{AdmitEvent, CutEvent, Observer, Priority, ReleaseEvent, ShedEvent, ShedReason};
use tokio::sync::watch;

admit::sources! {
    /// The test routes.
    pub enum Route { Upload => "upload", Mirror => "mirror" }
}

/// Counts the gate's events, and publishes the units in use on a watch channel so
/// a test can wait for a release as an event.
#[derive(Debug)]
pub struct Counting {
    pub admitted: AtomicUsize,
    pub shed: AtomicUsize,
    pub released: AtomicUsize,
    reasons: Mutex<Vec<ShedReason>>,
    classes: Mutex<Vec<Priority>>,
    cuts: Mutex<Vec<CutEvent>>,
    in_use: watch::Sender<usize>,
}

impl Counting {
    pub fn new() -> Arc<Self> {
        Arc::new(Self {
            admitted: AtomicUsize::new(0),
            shed: AtomicUsize::new(0),
            released: AtomicUsize::new(0),
            reasons: Mutex::new(Vec::new()),
            classes: Mutex::new(Vec::new()),
            cuts: Mutex::new(Vec::new()),
            in_use: watch::channel(0).0,
        })
    }

    pub fn shed(&self) -> usize {
        self.shed.load(Ordering::SeqCst)
    }

    /// The class of each admission so far, in order.
    pub fn admitted_classes(&self) -> Vec<Priority> {
        self.classes.lock().unwrap().clone()
    }

    /// Each cut so far, in order.
    pub fn cuts(&self) -> Vec<CutEvent> {
        self.cuts.lock().unwrap().clone()
    }

    /// The units in use as the observer's events count them.
    pub fn in_use(&self) -> usize {
        *self.in_use.borrow()
    }

    /// The reason of each shed so far, in order.
    pub fn shed_reasons(&self) -> Vec<ShedReason> {
        self.reasons.lock().unwrap().clone()
    }

    pub fn admitted(&self) -> usize {
        self.admitted.load(Ordering::SeqCst)
    }

    /// Waits until the observed units in use equal `units` (fails after 20 s: a
    /// safety net, not an ordering).
    pub async fn in_use_becomes(&self, units: usize) {
        let mut rx = self.in_use.subscribe();
        let reached = tokio::time::timeout(Duration::from_secs(20), async {
            rx.wait_for(|&n| n == units).await.map(|_| ())
        })
        .await;
        assert!(
            matches!(reached, Ok(Ok(()))),
            "units in use never became {units} (now {})",
            *rx.borrow()
        );
    }
}

impl Observer for Counting {
    fn on_admit(&self, event: &AdmitEvent) {
        self.classes.lock().unwrap().push(event.priority);
        self.admitted.fetch_add(1, Ordering::SeqCst);
        self.in_use.send_modify(|n| *n += event.units);
    }
    fn on_release(&self, event: &ReleaseEvent) {
        self.released.fetch_add(1, Ordering::SeqCst);
        self.in_use.send_modify(|n| *n -= event.units);
    }
    fn on_shed(&self, event: &ShedEvent) {
        self.reasons.lock().unwrap().push(event.reason);
        self.shed.fetch_add(1, Ordering::SeqCst);
    }
    fn on_cut(&self, event: &CutEvent) {
        self.cuts.lock().unwrap().push(*event);
    }
}

pub type TestGate = admit_tokio::Gate<Route, Arc<Counting>>;

/// A gate of `capacity` units with a counting observer.
pub fn gate(capacity: usize, wait_budget: Duration) -> (TestGate, Arc<Counting>) {
    let counting = Counting::new();
    let gate = admit_tokio::gate(capacity)
        .max_units(2.min(capacity))
        .wait_budget(wait_budget)
        .observer(Arc::clone(&counting))
        .build()
        .unwrap();
    (gate, counting)
}

/// Waits until `condition` holds, re-checking after each yield or short real-time
/// pause (fails after 20 s: a safety net). For states no event announces, such as
/// the number of parked requests.
pub async fn until(what: &str, mut condition: impl FnMut() -> bool) {
    let waited = tokio::time::timeout(Duration::from_secs(20), async {
        while !condition() {
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    })
    .await;
    assert!(waited.is_ok(), "never: {what}");
}
