//! An [`admit::Observer`] that reports a gate through the [`metrics`] facade, under a
//! metric-name prefix of the caller's.
//!
//! ```
//! use admit_metrics::MetricsObserver;
//!
//! admit::sources! {
//!     /// Where an upload session is opened.
//!     pub enum Route { NpmPublish => "npm_publish", CargoPublish => "cargo_publish" }
//! }
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), admit::ConfigError> {
//! // The application installs its recorder (e.g. a Prometheus exporter) first.
//! let gate = admit_tokio::gate(8)
//!     .max_units(2)
//!     .observer(MetricsObserver::new("upload_sessions"))
//!     .build()?; // describes the metrics; upload_sessions_capacity_units = 8,
//!                // upload_sessions_shed_total{source=...} = 0 for both routes
//! let permit = gate.acquire(2, Route::NpmPublish).await.unwrap(); // units_in_use = 2
//! drop(permit); // units_in_use = 0; the hold time goes to hold_seconds
//! # Ok(())
//! # }
//! ```
//!
//! # Metrics
//!
//! | metric | kind | labels | unit | meaning |
//! |---|---|---|---|---|
//! | `<prefix>_units_in_use` | gauge | — | count | units held now |
//! | `<prefix>_capacity_units` | gauge | — | count | the gate's capacity: the denominator |
//! | `<prefix>_hold_seconds` | histogram | — | seconds | how long units were held, observed at release |
//! | `<prefix>_wait_seconds` | histogram | — | seconds | how long admitted callers waited |
//! | `<prefix>_shed_total` | counter | `source` | count | callers shed (`GateError::Busy`), per call site |
//!
//! Every metric is described (`describe_*`, with its [`Unit`]) when the gate starts,
//! the capacity gauge is set then, and every source's shed counter is registered at
//! 0, so a dashboard reads 0 rather than "No data" before the first shed.
//!
//! # When the recorder is installed
//!
//! A library only emits; the application installs the recorder. This observer
//! resolves its metric handles against the recorder in force when the gate starts
//! it (in `Gate::builder(..).build()`) and keeps them: each later event is then a
//! single update on a stored handle, with no name formatting, key hashing or
//! registry lookup. In tests, build the gate inside [`metrics::with_local_recorder`];
//! the handles keep reporting to that recorder after the closure returns.
//!
//! **A recorder installed after the gate was built is caught up, not missed.** When
//! no recorder is in force at start (the `metrics` facade's no-op one), the observer
//! keeps its own count of units in use and of sheds per source, and looks for a
//! recorder at each event. At the first event that finds one, it describes the
//! metrics there, sets the capacity gauge, sets `units_in_use` to the units held at
//! that moment, sets each source's `shed_total` to the sheds counted so far (0 for
//! the others), records that event, and from then on reports to it through resolved
//! handles. What the late recorder cannot get back: the wait and hold observations
//! of the events before it (the histograms start at its installation). Until a
//! recorder appears, each event costs an uncontended lock and a recorder look-up.
//!
//! (The no-op recorder is recognised as the zero-sized recorder `metrics` falls back
//! to; a zero-sized recorder of your own is treated the same way and still receives
//! every event, through the facade's macros rather than stored handles.)
//!
//! Use one observer per gate: the handles and the capacity are those of the first
//! gate that starts it.

use core::time::Duration;
use std::sync::{Mutex, OnceLock};

use metrics::{Counter, Gauge, Histogram, SharedString, Unit};

/// Reports a gate's events as the metrics in the [crate docs](crate#metrics).
///
/// # Examples
///
/// ```
/// let observer = admit_metrics::MetricsObserver::new("upload_sessions");
/// assert_eq!(observer.prefix(), "upload_sessions");
/// ```
#[derive(Debug)]
pub struct MetricsObserver {
    prefix: String,
    names: Names,
    handles: OnceLock<Handles>,
    /// Until `handles` is set: what a late recorder must be caught up with.
    pending: Mutex<Pending>,
}

/// What the observer counts itself while no recorder is in force.
#[derive(Debug, Default)]
struct Pending {
    capacity: usize,
    sources: Vec<&'static str>,
    in_use: usize,
    sheds: Vec<(&'static str, u64)>,
}

/// One event, for the path that runs while no handles are resolved.
#[derive(Debug, Clone, Copy)]
enum Event {
    Admit { units: usize, waited: Duration },
    Release { units: usize, held: Duration },
    Shed { source: &'static str },
}

/// Whether a real recorder is in force on this thread: local, or global. The
/// facade falls back to its zero-sized no-op recorder.
fn recorder_in_force() -> bool {
    metrics::with_recorder(|recorder| core::mem::size_of_val(recorder) != 0)
}

/// The full metric names, built once from the prefix.
#[derive(Debug)]
struct Names {
    units_in_use: SharedString,
    capacity_units: SharedString,
    hold_seconds: SharedString,
    wait_seconds: SharedString,
    shed_total: SharedString,
}

/// Handles resolved at `on_start` against the then-current recorder.
#[derive(Debug)]
struct Handles {
    units_in_use: Gauge,
    hold_seconds: Histogram,
    wait_seconds: Histogram,
    /// One counter per source label, in the `Source::ALL` order.
    shed_total: Vec<(&'static str, Counter)>,
}

/// The label key of the shed counter.
const SOURCE_LABEL: &str = "source";

impl MetricsObserver {
    /// An observer whose metrics are named `<prefix>_units_in_use`,
    /// `<prefix>_capacity_units`, `<prefix>_hold_seconds`, `<prefix>_wait_seconds` and
    /// `<prefix>_shed_total`.
    ///
    /// The prefix should be `snake_case`, naming what the gate admits (e.g.
    /// `upload_sessions`). Nothing is registered until the gate starts the observer.
    #[must_use]
    pub fn new(prefix: impl Into<String>) -> Self {
        let prefix = prefix.into();
        let name = |suffix: &str| SharedString::from(format!("{prefix}_{suffix}"));
        let names = Names {
            units_in_use: name("units_in_use"),
            capacity_units: name("capacity_units"),
            hold_seconds: name("hold_seconds"),
            wait_seconds: name("wait_seconds"),
            shed_total: name("shed_total"),
        };
        Self {
            prefix,
            names,
            handles: OnceLock::new(),
            pending: Mutex::new(Pending::default()),
        }
    }

    /// The prefix the metric names start with.
    #[must_use]
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    fn describe(&self) {
        let n = &self.names;
        metrics::describe_gauge!(
            n.units_in_use.clone(),
            Unit::Count,
            "Units of the admission gate held now."
        );
        metrics::describe_gauge!(
            n.capacity_units.clone(),
            Unit::Count,
            "Capacity of the admission gate in units: the denominator of units_in_use."
        );
        metrics::describe_histogram!(
            n.hold_seconds.clone(),
            Unit::Seconds,
            "How long admitted units were held, observed at release."
        );
        metrics::describe_histogram!(
            n.wait_seconds.clone(),
            Unit::Seconds,
            "How long admitted callers waited for their units."
        );
        metrics::describe_counter!(
            n.shed_total.clone(),
            Unit::Count,
            "Callers shed (turned away busy) by the admission gate, per call site."
        );
    }

    fn shed_counter(&self, source: &'static str) -> Counter {
        metrics::counter!(self.names.shed_total.clone(), SOURCE_LABEL => source)
    }
}

impl MetricsObserver {
    fn lock_pending(&self) -> std::sync::MutexGuard<'_, Pending> {
        self.pending.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Resolves the handles against the recorder in force, catching it up with
    /// `pending`. Called with the lock held, so no event slips between the
    /// catch-up values and the handles' first use.
    fn resolve(&self, pending: &Pending) -> &Handles {
        self.describe();
        let n = &self.names;
        metrics::gauge!(n.capacity_units.clone()).set(pending.capacity as f64);
        let handles = self.handles.get_or_init(|| Handles {
            units_in_use: metrics::gauge!(n.units_in_use.clone()),
            hold_seconds: metrics::histogram!(n.hold_seconds.clone()),
            wait_seconds: metrics::histogram!(n.wait_seconds.clone()),
            shed_total: pending
                .sources
                .iter()
                .map(|&source| (source, self.shed_counter(source)))
                .collect(),
        });
        handles.units_in_use.set(pending.in_use as f64);
        // Every source's series at its count so far (0 for most), so it reads 0,
        // not "No data".
        for (source, counter) in &handles.shed_total {
            let shed = pending
                .sheds
                .iter()
                .find(|(label, _)| label == source)
                .map_or(0, |(_, n)| *n);
            counter.absolute(shed);
        }
        handles
    }

    /// An event while no handles are resolved: count it, then resolve if a
    /// recorder is now in force; otherwise emit it through the facade (which
    /// reaches a zero-sized recorder of the application's, if that is what is in
    /// force).
    fn unresolved(&self, event: Event) {
        let mut pending = self.lock_pending();
        if let Some(handles) = self.handles.get() {
            // Resolved while this thread waited for the lock.
            drop(pending);
            Self::apply(handles, event, self);
            return;
        }
        match event {
            Event::Admit { units, .. } => pending.in_use += units,
            Event::Release { units, .. } => pending.in_use = pending.in_use.saturating_sub(units),
            Event::Shed { source } => match pending.sheds.iter_mut().find(|(l, _)| *l == source) {
                Some((_, n)) => *n += 1,
                None => pending.sheds.push((source, 1)),
            },
        }
        if recorder_in_force() {
            let handles = self.resolve(&pending);
            // The gauge and counters now include this event; its observation is left.
            match event {
                Event::Admit { waited, .. } => handles.wait_seconds.record(waited.as_secs_f64()),
                Event::Release { held, .. } => handles.hold_seconds.record(held.as_secs_f64()),
                Event::Shed { .. } => {}
            }
            return;
        }
        drop(pending);
        let n = &self.names;
        match event {
            Event::Admit { units, waited } => {
                metrics::gauge!(n.units_in_use.clone()).increment(units as f64);
                metrics::histogram!(n.wait_seconds.clone()).record(waited.as_secs_f64());
            }
            Event::Release { units, held } => {
                metrics::gauge!(n.units_in_use.clone()).decrement(units as f64);
                metrics::histogram!(n.hold_seconds.clone()).record(held.as_secs_f64());
            }
            Event::Shed { source } => self.shed_counter(source).increment(1),
        }
    }

    /// An event on resolved handles.
    fn apply(h: &Handles, event: Event, this: &Self) {
        match event {
            Event::Admit { units, waited } => {
                h.units_in_use.increment(units as f64);
                h.wait_seconds.record(waited.as_secs_f64());
            }
            Event::Release { units, held } => {
                h.units_in_use.decrement(units as f64);
                h.hold_seconds.record(held.as_secs_f64());
            }
            Event::Shed { source } => {
                match h.shed_total.iter().find(|(label, _)| *label == source) {
                    Some((_, counter)) => counter.increment(1),
                    // A label the source type did not list at start: still counted.
                    None => this.shed_counter(source).increment(1),
                }
            }
        }
    }

    fn event(&self, event: Event) {
        match self.handles.get() {
            Some(handles) => Self::apply(handles, event, self),
            None => self.unresolved(event),
        }
    }
}

impl admit::Observer for MetricsObserver {
    fn on_start(&self, capacity: usize, sources: &[&'static str]) {
        let mut pending = self.lock_pending();
        pending.capacity = capacity;
        if pending.sources.is_empty() {
            pending.sources = sources.to_vec();
        }
        if self.handles.get().is_some() {
            // A second gate on this observer: the handles stay the first one's.
            self.describe();
            metrics::gauge!(self.names.capacity_units.clone()).set(capacity as f64);
        } else if recorder_in_force() {
            self.resolve(&pending);
        } else {
            // No recorder yet: describe and register through the facade anyway (a
            // zero-sized recorder of the application's gets them), and wait for one.
            self.describe();
            let n = &self.names;
            metrics::gauge!(n.capacity_units.clone()).set(capacity as f64);
            for &source in sources {
                self.shed_counter(source).absolute(0);
            }
        }
    }

    fn on_admit(&self, _source: &'static str, units: usize, waited: Duration) {
        self.event(Event::Admit { units, waited });
    }

    fn on_release(&self, _source: &'static str, units: usize, held: Duration) {
        self.event(Event::Release { units, held });
    }

    fn on_shed(
        &self,
        source: &'static str,
        _units: usize,
        _waited: Duration,
        _reason: admit::ShedReason,
    ) {
        self.event(Event::Shed { source });
    }
}

/// Every public type is `Send + Sync`, checked at compile time.
#[allow(dead_code)]
fn assert_send_sync() {
    fn check<T: Send + Sync>() {}
    check::<MetricsObserver>();
}
