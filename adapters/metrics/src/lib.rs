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
//! # The recorder must be installed before the gate is built
//!
//! A library only emits; the application installs the recorder. This observer
//! resolves its metric handles once, against the recorder current when the gate
//! calls [`Observer::on_start`](admit::Observer::on_start) (that is, in `Gate::builder(..).build()`), and keeps
//! them: each later event is then a single update on a stored handle, with no name
//! formatting, key hashing or registry lookup. A recorder installed after the gate was
//! built therefore sees nothing from it. In tests, build the gate inside
//! [`metrics::with_local_recorder`]; the handles keep reporting to that recorder
//! after the closure returns.
//!
//! Use one observer per gate: the handles and the capacity are those of the first
//! gate that starts it.

use core::time::Duration;
use std::sync::OnceLock;

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

impl admit::Observer for MetricsObserver {
    fn on_start(&self, capacity: usize, sources: &[&'static str]) {
        self.describe();
        let n = &self.names;
        metrics::gauge!(n.capacity_units.clone()).set(capacity as f64);
        let mut fresh = false;
        let handles = self.handles.get_or_init(|| {
            fresh = true;
            Handles {
                units_in_use: metrics::gauge!(n.units_in_use.clone()),
                hold_seconds: metrics::histogram!(n.hold_seconds.clone()),
                wait_seconds: metrics::histogram!(n.wait_seconds.clone()),
                shed_total: sources
                    .iter()
                    .map(|&source| (source, self.shed_counter(source)))
                    .collect(),
            }
        });
        if fresh {
            // Register every source's series at 0, so it reads 0, not "No data".
            for (_, counter) in &handles.shed_total {
                counter.absolute(0);
            }
        }
    }

    fn on_admit(&self, _source: &'static str, units: usize, waited: Duration) {
        match self.handles.get() {
            Some(h) => {
                h.units_in_use.increment(units as f64);
                h.wait_seconds.record(waited.as_secs_f64());
            }
            None => {
                metrics::gauge!(self.names.units_in_use.clone()).increment(units as f64);
                metrics::histogram!(self.names.wait_seconds.clone()).record(waited.as_secs_f64());
            }
        }
    }

    fn on_release(&self, _source: &'static str, units: usize, held: Duration) {
        match self.handles.get() {
            Some(h) => {
                h.units_in_use.decrement(units as f64);
                h.hold_seconds.record(held.as_secs_f64());
            }
            None => {
                metrics::gauge!(self.names.units_in_use.clone()).decrement(units as f64);
                metrics::histogram!(self.names.hold_seconds.clone()).record(held.as_secs_f64());
            }
        }
    }

    fn on_shed(&self, source: &'static str, _units: usize, _waited: Duration) {
        let stored = self.handles.get().and_then(|h| {
            h.shed_total
                .iter()
                .find(|(label, _)| *label == source)
                .map(|(_, counter)| counter)
        });
        match stored {
            Some(counter) => counter.increment(1),
            // A label the source type did not list at start: still counted.
            None => self.shed_counter(source).increment(1),
        }
    }
}

/// Every public type is `Send + Sync`, checked at compile time.
#[allow(dead_code)]
fn assert_send_sync() {
    fn check<T: Send + Sync>() {}
    check::<MetricsObserver>();
}
