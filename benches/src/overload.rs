//! The gate under overload: a deterministic simulation on Tokio's paused clock,
//! open-loop Poisson arrivals, one task per request, the same arrivals for every
//! column (docs/overload.md has the figures and how to run it).
//!
//! Columns: the gate with its wait budget alone, the gate with an overload target,
//! and tower's `ConcurrencyLimit` + `LoadShed` (admitted if the service is ready,
//! shed at once otherwise). Tower's limit counts requests, not units: it gets
//! `capacity / mean units` slots, so the same mean units are in use when full.

use std::cell::RefCell;
use std::convert::Infallible;
use std::rc::Rc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use admit::{GateError, Observer, ShedEvent, ShedReason};
use tokio::time::Instant;
use tower::{Service, ServiceBuilder, ServiceExt};

admit::sources! {
    /// The simulation's one call site.
    pub enum Site {
        /// Every request.
        Upload => "upload",
    }
}

/// A seeded splitmix64.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator from `seed`.
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }

    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in (0, 1].
    fn unit(&mut self) -> f64 {
        ((self.next() >> 11) as f64 + 1.0) / (1u64 << 53) as f64
    }

    fn exp(&mut self, mean: f64) -> f64 {
        -mean * self.unit().ln()
    }

    fn normal(&mut self) -> f64 {
        let (u, v) = (self.unit(), self.unit());
        (-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()
    }
}

/// What requests look like: their units and how long they hold them.
#[derive(Debug, Clone, Copy)]
pub enum Mix {
    /// 1 unit (80 %) or 4 (20 %), held lognormally: median 2 s, sigma 1.
    Uploads,
    /// 1 unit, held a fixed time.
    Fixed(Duration),
}

impl Mix {
    fn draw(self, rng: &mut Rng) -> (usize, Duration) {
        match self {
            Mix::Uploads => {
                let units = if rng.unit() <= 0.8 { 1 } else { 4 };
                let hold = 2.0 * rng.normal().exp();
                (units, Duration::from_secs_f64(hold))
            }
            Mix::Fixed(hold) => (1, hold),
        }
    }

    /// Mean units × mean hold, in unit-seconds per request.
    fn work(self) -> f64 {
        match self {
            Mix::Uploads => 1.6 * 2.0 * 0.5f64.exp(),
            Mix::Fixed(hold) => hold.as_secs_f64(),
        }
    }

    fn mean_units(self) -> f64 {
        match self {
            Mix::Uploads => 1.6,
            Mix::Fixed(_) => 1.0,
        }
    }
}

/// One simulated setup.
#[derive(Debug, Clone)]
pub struct Setup {
    /// Units of the gate.
    pub capacity: usize,
    /// The gate's wait budget.
    pub budget: Duration,
    /// A client that has waited this long gives up (a cancellation).
    pub give_up: Duration,
    /// The requests.
    pub mix: Mix,
    /// Offered load (`arrival rate × work / capacity`) for each phase, in order.
    pub phases: Vec<(Duration, f64)>,
    /// Arrivals before this are left out of the figures.
    pub warmup: Duration,
}

impl Setup {
    /// The end of the arrivals.
    pub fn end(&self) -> Duration {
        self.phases.iter().map(|&(d, _)| d).sum()
    }

    /// Every arrival: (time, units, hold).
    pub fn arrivals(&self, seed: u64) -> Vec<(Duration, usize, Duration)> {
        let mut rng = Rng::new(seed);
        let mut out = Vec::new();
        let mut t = 0.0;
        let mut phase_start = 0.0;
        for &(length, load) in &self.phases {
            let end = phase_start + length.as_secs_f64();
            let rate = load * self.capacity as f64 / self.mix.work();
            loop {
                t += rng.exp(1.0 / rate);
                if t >= end {
                    t = end;
                    break;
                }
                let (units, hold) = self.mix.draw(&mut rng);
                out.push((Duration::from_secs_f64(t), units, hold));
            }
            phase_start = end;
        }
        out
    }
}

/// Which admission control a column runs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Policy {
    /// The gate with its wait budget alone.
    Budget,
    /// The gate with an overload target.
    Target(Duration),
    /// tower's `ConcurrencyLimit` + `LoadShed`.
    Tower,
}

impl Policy {
    /// The column's name.
    pub fn name(self) -> String {
        match self {
            Policy::Budget => "fixed budget".into(),
            Policy::Target(t) => format!("target {}ms", t.as_millis()),
            Policy::Tower => "tower limit+shed".into(),
        }
    }
}

/// How a request ended.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Outcome {
    /// Admitted after `wait`.
    Admitted {
        /// Its wait.
        wait: Duration,
    },
    /// Shed after `after`, told to come back after `retry_after` (tower tells
    /// nothing).
    Shed {
        /// How long it waited for its answer.
        after: Duration,
        /// Its `Retry-After`.
        retry_after: Option<Duration>,
    },
    /// The client gave up while waiting.
    GaveUp,
}

/// One request.
#[derive(Debug, Clone, Copy)]
pub struct Record {
    /// When it arrived.
    pub arrival: Duration,
    /// Its units.
    pub units: usize,
    /// How long it held them once admitted.
    pub hold: Duration,
    /// How it ended.
    pub outcome: Outcome,
}

/// Sheds per reason (in [`ShedReason::ALL`] order), for 1-unit and larger requests.
#[derive(Debug, Default)]
pub struct Tally {
    by_reason: [[AtomicUsize; 4]; 2],
    changes: AtomicUsize,
}

impl Observer for Tally {
    fn on_overload(&self, _: &admit::OverloadEvent) {
        self.changes.fetch_add(1, Ordering::Relaxed);
    }

    fn on_shed(&self, e: &ShedEvent) {
        let reason = ShedReason::ALL.iter().position(|&r| r == e.reason).unwrap();
        self.by_reason[usize::from(e.units > 1)][reason].fetch_add(1, Ordering::Relaxed);
    }
}

/// What a run of one column did.
#[derive(Debug)]
pub struct Run {
    /// The column.
    pub policy: Policy,
    /// Every request, in arrival order.
    pub records: Vec<Record>,
    /// Sheds per size (`[1 unit, more]`) and reason.
    pub sheds: [[usize; 4]; 2],
    /// Changes of the overload state.
    pub changes: usize,
}

/// Runs `setup` under `policy` on the arrivals of `seed`.
pub fn simulate(setup: &Setup, policy: Policy, seed: u64) -> Run {
    let arrivals = setup.arrivals(seed);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("a runtime");
    let tally = Arc::new(Tally::default());
    let records = runtime.block_on(async {
        let start = Instant::now();
        let records: Rc<RefCell<Vec<Option<Record>>>> =
            Rc::new(RefCell::new(vec![None; arrivals.len()]));
        let local = tokio::task::LocalSet::new();
        match policy {
            Policy::Budget | Policy::Target(_) => {
                let mut builder = admit_tokio::gate::<Site>(setup.capacity)
                    .max_units(4.min(setup.capacity))
                    .wait_budget(setup.budget);
                if let Policy::Target(target) = policy {
                    builder = builder.overload_target(target);
                }
                let gate = builder
                    .observer(Arc::clone(&tally))
                    .build()
                    .expect("a valid gate");
                for (i, &(at, units, hold)) in arrivals.iter().enumerate() {
                    let (gate, records, give_up) =
                        (gate.clone(), Rc::clone(&records), setup.give_up);
                    local.spawn_local(async move {
                        tokio::time::sleep_until(start + at).await;
                        let arrived = Instant::now();
                        let result = gate
                            .acquire(units, Site::Upload)
                            .until(tokio::time::sleep(give_up))
                            .await;
                        let waited = arrived.elapsed();
                        let outcome = match result {
                            Ok(permit) => {
                                tokio::time::sleep(hold).await;
                                drop(permit);
                                Outcome::Admitted { wait: waited }
                            }
                            Err(GateError::Busy { retry_after }) => Outcome::Shed {
                                after: waited,
                                retry_after: Some(retry_after),
                            },
                            Err(GateError::Cancelled) => Outcome::GaveUp,
                            Err(other) => panic!("{other:?}"),
                        };
                        records.borrow_mut()[i] = Some(Record {
                            arrival: at,
                            units,
                            hold,
                            outcome,
                        });
                    });
                }
            }
            Policy::Tower => {
                let slots = (setup.capacity as f64 / setup.mix.mean_units()).round() as usize;
                let service = ServiceBuilder::new()
                    .load_shed()
                    .concurrency_limit(slots.max(1))
                    .service(tower::service_fn(|hold: Duration| async move {
                        tokio::time::sleep(hold).await;
                        Ok::<_, Infallible>(())
                    }));
                for (i, &(at, units, hold)) in arrivals.iter().enumerate() {
                    let (mut service, records) = (service.clone(), Rc::clone(&records));
                    local.spawn_local(async move {
                        tokio::time::sleep_until(start + at).await;
                        let ready = service.ready().await.expect("LoadShed is always ready");
                        let outcome = match ready.call(hold).await {
                            Ok(()) => Outcome::Admitted {
                                wait: Duration::ZERO,
                            },
                            Err(_) => Outcome::Shed {
                                after: Duration::ZERO,
                                retry_after: None,
                            },
                        };
                        records.borrow_mut()[i] = Some(Record {
                            arrival: at,
                            units,
                            hold,
                            outcome,
                        });
                    });
                }
            }
        }
        local.await;
        let records = records.borrow();
        records
            .iter()
            .map(|r| r.expect("every request ended"))
            .collect::<Vec<_>>()
    });
    let sheds = tally
        .by_reason
        .each_ref()
        .map(|row| row.each_ref().map(|n| n.load(Ordering::Relaxed)));
    Run {
        policy,
        records,
        sheds,
        changes: tally.changes.load(Ordering::Relaxed),
    }
}

/// The `q`-quantile of `values` (sorted here), zero when empty.
pub fn quantile(values: &mut [Duration], q: f64) -> Duration {
    if values.is_empty() {
        return Duration::ZERO;
    }
    values.sort_unstable();
    let at = ((values.len() as f64 * q).ceil() as usize).clamp(1, values.len()) - 1;
    values[at]
}

/// A run's figures over the arrivals after the warm-up.
#[derive(Debug, Clone, Copy)]
pub struct Figures {
    /// Units held over time, over the capacity, while arrivals lasted.
    pub utilisation: f64,
    /// Requests admitted per second.
    pub completed_per_s: f64,
    /// Admitted waits.
    pub wait_p50: Duration,
    /// Admitted waits.
    pub wait_p99: Duration,
    /// Admitted waits.
    pub wait_p999: Duration,
    /// Time to a shed's answer.
    pub shed_p50: Duration,
    /// Time to a shed's answer.
    pub shed_p99: Duration,
    /// Fraction of requests shed.
    pub shed: f64,
    /// Fraction of 1-unit requests shed.
    pub shed_small: f64,
    /// Fraction of larger requests shed.
    pub shed_large: f64,
    /// Fraction of requests whose client gave up.
    pub gave_up: f64,
    /// Median `Retry-After` of the sheds.
    pub retry_after_p50: Duration,
    /// Median of the time from a shed to the admission of the next request of its
    /// size that arrived after it: what a client told to retry then would have
    /// needed.
    pub followed_p50: Duration,
}

impl Run {
    /// The figures over the arrivals of `setup` after its warm-up.
    pub fn figures(&self, setup: &Setup) -> Figures {
        let (from, to) = (setup.warmup, setup.end());
        let window: Vec<&Record> = self
            .records
            .iter()
            .filter(|r| r.arrival >= from && r.arrival < to)
            .collect();
        let n = window.len().max(1) as f64;
        let mut busy = 0.0;
        for r in &self.records {
            if let Outcome::Admitted { wait } = r.outcome {
                let (a, b) = (r.arrival + wait, r.arrival + wait + r.hold);
                let overlap = b.min(to).saturating_sub(a.max(from));
                busy += overlap.as_secs_f64() * r.units as f64;
            }
        }
        let span = (to - from).as_secs_f64();
        let mut waits: Vec<Duration> = window
            .iter()
            .filter_map(|r| match r.outcome {
                Outcome::Admitted { wait } => Some(wait),
                _ => None,
            })
            .collect();
        let mut sheds: Vec<Duration> = window
            .iter()
            .filter_map(|r| match r.outcome {
                Outcome::Shed { after, .. } => Some(after),
                _ => None,
            })
            .collect();
        let shed_of = |large: bool| {
            let sized: Vec<_> = window.iter().filter(|r| (r.units > 1) == large).collect();
            let shed = sized
                .iter()
                .filter(|r| matches!(r.outcome, Outcome::Shed { .. }))
                .count();
            shed as f64 / sized.len().max(1) as f64
        };
        let mut retry: Vec<Duration> = window
            .iter()
            .filter_map(|r| match r.outcome {
                Outcome::Shed { retry_after, .. } => retry_after,
                _ => None,
            })
            .collect();
        let mut followed = Vec::new();
        for (i, r) in self.records.iter().enumerate() {
            if r.arrival < from || r.arrival >= to {
                continue;
            }
            if let Outcome::Shed { after, .. } = r.outcome {
                let shed_at = r.arrival + after;
                let next = self.records[i + 1..].iter().find_map(|s| match s.outcome {
                    Outcome::Admitted { wait } if s.units == r.units && s.arrival >= shed_at => {
                        Some(s.arrival + wait - shed_at)
                    }
                    _ => None,
                });
                followed.extend(next);
            }
        }
        let completed = waits.len() as f64;
        let gave_up = window
            .iter()
            .filter(|r| r.outcome == Outcome::GaveUp)
            .count() as f64;
        Figures {
            utilisation: busy / (span * setup.capacity as f64),
            completed_per_s: completed / span,
            wait_p50: quantile(&mut waits, 0.5),
            wait_p99: quantile(&mut waits, 0.99),
            wait_p999: quantile(&mut waits, 0.999),
            shed_p50: quantile(&mut sheds, 0.5),
            shed_p99: quantile(&mut sheds, 0.99),
            shed: sheds.len() as f64 / n,
            shed_small: shed_of(false),
            shed_large: shed_of(true),
            gave_up: gave_up / n,
            retry_after_p50: quantile(&mut retry, 0.5),
            followed_p50: quantile(&mut followed, 0.5),
        }
    }

    /// After a spike that ends at `spike_end`, the time until the admitted-wait
    /// p99 over a sliding 1 s window (of arrivals) is back within 1.5× its level
    /// over `before` (the arrivals of that span) and stays there for 10 s; `None`
    /// if it never does.
    pub fn recovery(
        &self,
        before: (Duration, Duration),
        spike_end: Duration,
        end: Duration,
    ) -> Option<Duration> {
        let waits_in = |a: Duration, b: Duration| -> Vec<Duration> {
            self.records
                .iter()
                .filter(|r| r.arrival >= a && r.arrival < b)
                .filter_map(|r| match r.outcome {
                    Outcome::Admitted { wait } => Some(wait),
                    _ => None,
                })
                .collect()
        };
        let level = quantile(&mut waits_in(before.0, before.1), 0.99);
        let bound = level.mul_f64(1.5).max(Duration::from_millis(1));
        let step = Duration::from_millis(100);
        let ok =
            |t: Duration| quantile(&mut waits_in(t, t + Duration::from_secs(1)), 0.99) <= bound;
        let mut t = spike_end;
        while t + Duration::from_secs(11) <= end {
            let steady = (0..100).all(|k| ok(t + step * k));
            if steady {
                return Some(t - spike_end);
            }
            t += step;
        }
        None
    }
}

/// The upload mix at a steady `load` for `length` after a warm-up of 60 s.
pub fn uploads(load: f64, length: Duration) -> Setup {
    Setup {
        capacity: 64,
        budget: Duration::from_secs(5),
        give_up: Duration::from_secs(20),
        mix: Mix::Uploads,
        phases: vec![(Duration::from_secs(60) + length, load)],
        warmup: Duration::from_secs(60),
    }
}

/// The upload mix at 0.8×, then 1.4× for 60 s, then 0.8×.
pub fn spike() -> Setup {
    Setup {
        phases: vec![
            (Duration::from_secs(120), 0.8),
            (Duration::from_secs(60), 1.4),
            (Duration::from_secs(120), 0.8),
        ],
        ..uploads(0.8, Duration::ZERO)
    }
}

/// The `bohde/codel` simulation: 1000 requests a second into a server of 500 a
/// second (10 at once, 20 ms each) for 10 s; its queue's clients wait up to 1 s.
pub fn bohde() -> Setup {
    Setup {
        capacity: 10,
        budget: Duration::from_secs(1),
        give_up: Duration::from_secs(1),
        mix: Mix::Fixed(Duration::from_millis(20)),
        phases: vec![(Duration::from_secs(10), 2.0)],
        warmup: Duration::ZERO,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The smoke pass: a short run at 2× and at 0.5×, checking the overload
    /// target's main effects against the fixed budget's on the same arrivals.
    #[test]
    fn the_overload_target_sheds_early_and_keeps_admitted_waits_short_at_twice_the_load() {
        let setup = uploads(2.0, Duration::from_secs(60));
        let fixed = simulate(&setup, Policy::Budget, 7).figures(&setup);
        let target =
            simulate(&setup, Policy::Target(Duration::from_millis(500)), 7).figures(&setup);
        assert!(fixed.shed_p50 >= setup.budget.mul_f64(0.99), "{fixed:?}");
        assert!(target.shed_p50 < setup.budget / 10, "{target:?}");
        assert!(target.wait_p99 < fixed.wait_p99 / 2, "{target:?} {fixed:?}");
        assert!(target.utilisation > 0.9, "{target:?}");
    }

    #[test]
    fn at_half_the_load_nothing_is_shed() {
        let setup = uploads(0.5, Duration::from_secs(60));
        let target =
            simulate(&setup, Policy::Target(Duration::from_millis(500)), 7).figures(&setup);
        assert!(target.shed <= 0.001, "{target:?}");
    }

    #[test]
    fn the_same_seed_gives_the_same_run() {
        let setup = bohde();
        let a = simulate(&setup, Policy::Target(Duration::from_millis(5)), 3).figures(&setup);
        let b = simulate(&setup, Policy::Target(Duration::from_millis(5)), 3).figures(&setup);
        assert_eq!(format!("{a:?}"), format!("{b:?}"));
    }
}
