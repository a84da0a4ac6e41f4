//! The gate scenario: what [`admit::Gate`] with the `admit-metrics` observer adds
//! to an uncontended acquire + release, against the bare semaphore.
//!
//! Arms, each `acquire(1)` polled once on a ready gate (or semaphore) with a no-op
//! waker, then the permit dropped:
//!
//! - `semaphore`: `Arc<Semaphore>::acquire_owned`, the call the gate makes inside;
//! - `gate, () observer`: the gate with `TokioTimer` and no observer;
//! - `gate + metrics, no recorder`: `MetricsObserver` with no recorder installed;
//! - `gate + metrics, prometheus`: `MetricsObserver` whose handles were registered
//!   with a `metrics-exporter-prometheus` recorder (the one the demo installs),
//!   so the gauge and both histograms are really recorded.

use std::future::Future;
use std::hint::black_box;
use std::pin::pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use admit::{Gate, Observer, Semaphore};
use admit_metrics::MetricsObserver;
use admit_tokio::TokioTimer;

admit::sources! {
    /// The one call site of the benchmark.
    pub enum Site {
        /// The benchmark loop.
        Bench => "bench",
    }
}

/// The arms, in column order.
pub const ARMS: [&str; 4] = [
    "semaphore",
    "gate, () observer",
    "gate + metrics, no recorder",
    "gate + metrics, prometheus",
];

/// Everything the arms run against, built once.
#[derive(Debug)]
pub struct Gates {
    semaphore: Arc<Semaphore>,
    plain: Gate<Site, TokioTimer, ()>,
    no_recorder: Gate<Site, TokioTimer, MetricsObserver>,
    prometheus: Gate<Site, TokioTimer, MetricsObserver>,
    /// Renders what the Prometheus recorder holds.
    scrape: metrics_exporter_prometheus::PrometheusHandle,
}

fn gate<O: Observer>(observer: O) -> Gate<Site, TokioTimer, O> {
    Gate::builder(16)
        .wait_budget(Duration::from_secs(5))
        .timer(TokioTimer::new())
        .observer(observer)
        .build()
        .expect("valid gate configuration")
}

impl Gates {
    /// Builds the semaphore and the three gates; the Prometheus recorder is
    /// installed only while its gate registers its metrics (`on_start`), so no
    /// global recorder is set.
    #[must_use]
    pub fn new() -> Self {
        let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
        let prometheus =
            metrics::with_local_recorder(&recorder, || gate(MetricsObserver::new("bench_gate")));
        // The handles hold the recorder's storage; the recorder itself may go.
        let scrape = recorder.handle();
        drop(recorder);
        Self {
            semaphore: Arc::new(Semaphore::new(16)),
            plain: gate(()),
            no_recorder: gate(MetricsObserver::new("bench_gate")),
            prometheus,
            scrape,
        }
    }

    /// The Prometheus exposition of the `prometheus` arm's metrics.
    #[must_use]
    pub fn scrape(&self) -> String {
        self.scrape.render()
    }

    /// One sample of arm `arm` (an index into [`ARMS`]): ns per acquire + release.
    ///
    /// # Panics
    ///
    /// If an acquire does not complete at its first poll.
    #[must_use]
    pub fn sample(&self, arm: usize, iters: u32) -> f64 {
        match arm {
            0 => {
                let sem = black_box(&self.semaphore);
                time(iters, || Arc::clone(sem).acquire_owned(1))
            }
            1 => time(iters, || black_box(&self.plain).acquire(1, Site::Bench)),
            2 => time(iters, || {
                black_box(&self.no_recorder).acquire(1, Site::Bench)
            }),
            _ => time(iters, || {
                black_box(&self.prometheus).acquire(1, Site::Bench)
            }),
        }
    }
}

impl Default for Gates {
    fn default() -> Self {
        Self::new()
    }
}

#[inline(never)]
fn time<F, T, E>(iters: u32, mut acquire: impl FnMut() -> F) -> f64
where
    F: Future<Output = Result<T, E>>,
    E: std::fmt::Debug,
{
    let mut cx = Context::from_waker(Waker::noop());
    let start = Instant::now();
    for _ in 0..iters {
        match pin!(acquire()).poll(&mut cx) {
            Poll::Ready(permit) => drop(black_box(permit.expect("uncontended"))),
            Poll::Pending => panic!("uncontended gate acquire parked"),
        }
    }
    start.elapsed().as_nanos() as f64 / f64::from(iters)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_arm_runs() {
        let gates = Gates::new();
        for arm in 0..ARMS.len() {
            assert!(gates.sample(arm, 10) > 0.0);
        }
        let scrape = gates.scrape();
        assert!(
            scrape.contains("bench_gate_hold_seconds_count 10"),
            "{scrape}"
        );
        assert!(scrape.contains("bench_gate_units_in_use 0"), "{scrape}");
    }
}
