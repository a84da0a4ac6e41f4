//! An observer that records every event, for assertions.

use std::sync::{Arc, Mutex};

use admit::{Priority, ShedReason};
use std::time::Duration;

/// One observer call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// `on_start(capacity, sources)`.
    Start(usize, Vec<&'static str>),
    /// `on_admit(source, units, waited)`.
    Admit(&'static str, usize, Duration),
    /// `on_release(source, units, held)`, with what the probe read at that moment.
    Release {
        source: &'static str,
        units: usize,
        held: Duration,
        probed: Option<usize>,
    },
    /// `on_shed(source, units, waited, _)` for a `WaitBudget`, `Ceiling` or
    /// `NoWait` shed (`Recorder::shed_reasons` tells them apart).
    Shed(&'static str, usize, Duration),
    /// `on_shed(source, units, _, ShedReason::QueueFull)`.
    QueueFull(&'static str, usize),
    /// `on_shed(source, units, waited, ShedReason::Overload)`.
    OverloadShed(&'static str, usize, Duration),
    /// `on_shed(source, units, _, ShedReason::Hopeless)`, with its `Retry-After`.
    Hopeless(&'static str, usize, Duration),
    /// `on_capacity(capacity)`.
    Capacity(usize),
    /// `on_overload`: the state from now on.
    Overloaded(bool),
}

type Probe = Box<dyn Fn() -> usize + Send + Sync>;

/// Records events in order; optionally runs a probe inside `on_release` (e.g. the
/// gate's `in_use()`), to see the state the observer sees.
#[derive(Default)]
pub struct Recorder {
    events: Mutex<Vec<Event>>,
    probe: Mutex<Option<Probe>>,
    admit_probes: Mutex<Vec<usize>>,
    shed_reasons: Mutex<Vec<ShedReason>>,
    shed_priorities: Mutex<Vec<Priority>>,
    admit_priorities: Mutex<Vec<Priority>>,
}

impl Recorder {
    pub fn new() -> Arc<Self> {
        Arc::default()
    }

    pub fn events(&self) -> Vec<Event> {
        self.events.lock().unwrap().clone()
    }

    /// Sheds counted for `source`.
    pub fn sheds(&self, source: &str) -> usize {
        self.events()
            .iter()
            .filter(|e| matches!(e, Event::Shed(s, ..) if *s == source))
            .count()
    }

    /// Sheds counted for any source.
    pub fn total_sheds(&self) -> usize {
        self.events()
            .iter()
            .filter(|e| matches!(e, Event::Shed(..)))
            .count()
    }

    /// The class of every shed, in order.
    pub fn shed_priorities(&self) -> Vec<Priority> {
        self.shed_priorities.lock().unwrap().clone()
    }

    /// The class of every admission, in order.
    pub fn admit_priorities(&self) -> Vec<Priority> {
        self.admit_priorities.lock().unwrap().clone()
    }

    /// The reason of every shed, in order.
    pub fn shed_reasons(&self) -> Vec<ShedReason> {
        self.shed_reasons.lock().unwrap().clone()
    }

    pub fn admits(&self) -> Vec<(&'static str, usize, Duration)> {
        self.events()
            .into_iter()
            .filter_map(|e| match e {
                Event::Admit(s, u, w) => Some((s, u, w)),
                _ => None,
            })
            .collect()
    }

    pub fn releases(&self) -> Vec<Event> {
        self.events()
            .into_iter()
            .filter(|e| matches!(e, Event::Release { .. }))
            .collect()
    }

    /// Sets the probe run inside `on_release`. Clear it with `clear_probe` to break
    /// a gate → observer → probe → gate cycle.
    pub fn set_probe(&self, probe: impl Fn() -> usize + Send + Sync + 'static) {
        *self.probe.lock().unwrap() = Some(Box::new(probe));
    }

    /// What the probe read inside each `on_admit`, in order.
    pub fn admit_probes(&self) -> Vec<usize> {
        self.admit_probes.lock().unwrap().clone()
    }

    pub fn clear_probe(&self) {
        self.probe.lock().unwrap().take();
    }

    fn push(&self, e: Event) {
        self.events.lock().unwrap().push(e);
    }
}

impl admit::Observer for Recorder {
    fn on_start(&self, e: &admit::StartEvent<'_>) {
        self.push(Event::Start(e.capacity, e.sources.to_vec()));
    }
    fn on_admit(&self, e: &admit::AdmitEvent) {
        if let Some(p) = self.probe.lock().unwrap().as_ref() {
            self.admit_probes.lock().unwrap().push(p());
        }
        self.admit_priorities.lock().unwrap().push(e.priority);
        self.push(Event::Admit(e.source, e.units, e.waited));
    }
    fn on_release(&self, e: &admit::ReleaseEvent) {
        let probed = self.probe.lock().unwrap().as_ref().map(|p| p());
        self.push(Event::Release {
            source: e.source,
            units: e.units,
            held: e.held,
            probed,
        });
    }
    fn on_shed(&self, e: &admit::ShedEvent) {
        self.shed_reasons.lock().unwrap().push(e.reason);
        self.shed_priorities.lock().unwrap().push(e.priority);
        self.push(match e.reason {
            ShedReason::QueueFull => Event::QueueFull(e.source, e.units),
            ShedReason::Overload => Event::OverloadShed(e.source, e.units, e.waited),
            ShedReason::Hopeless => Event::Hopeless(e.source, e.units, e.retry_after),
            _ => Event::Shed(e.source, e.units, e.waited),
        });
    }
    fn on_capacity(&self, e: &admit::CapacityEvent) {
        self.push(Event::Capacity(e.capacity));
    }
    fn on_overload(&self, e: &admit::OverloadEvent) {
        self.push(Event::Overloaded(e.overloaded));
    }
}
