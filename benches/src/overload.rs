//! The gate under overload: a deterministic simulation on Tokio's paused clock
//! (docs/overload.md has the figures and how to run them).
//!
//! Open-loop Poisson arrivals from a seeded generator, one task per request, on a
//! current-thread runtime whose clock moves only when every task is idle, so a
//! run is exact and the same seed gives the same run. Every column of a scenario
//! sees the same arrivals:
//!
//! - [`Policy::Budget`]: the gate with its wait budget alone;
//! - [`Policy::Target`]: the gate with an overload target;
//! - [`Policy::Tower`]: tower's `LoadShed` over `ConcurrencyLimit` (a request is
//!   admitted if the service is ready, shed at once otherwise). Tower's limit
//!   counts requests, not units: it gets `capacity` slots and a request of `n`
//!   units takes `n` of them at the same instant, one ready service each, or none
//!   (the slots it got are dropped at once when one is not ready), so at most
//!   `capacity` units are in use, as with the gate.
//!
//! A client gives up after [`Setup::give_up`]: it drops its acquire future, a
//! cancellation, never a shed.

use std::cell::RefCell;
use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::{Arc, Mutex};
use std::task::Poll;
use std::time::Duration;

use admit::{GateError, Observer, OverloadEvent, Priority, ShedEvent, ShedReason};
use tokio::time::Instant;
use tower::{Service, ServiceBuilder, ServiceExt};

admit::sources! {
    /// The simulation's one call site.
    pub enum Site {
        /// Every request.
        Upload => "upload",
    }
}

/// A seeded splitmix64 (Steele, Lea and Flood), with the draws the scenarios need.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator from `seed`.
    #[must_use]
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in (0, 1].
    pub fn unit(&mut self) -> f64 {
        ((self.next_u64() >> 11) as f64 + 1.0) / (1u64 << 53) as f64
    }

    /// Exponential with mean `mean`.
    pub fn exp(&mut self, mean: f64) -> f64 {
        -mean * self.unit().ln()
    }

    /// Standard normal (Box–Muller).
    pub fn normal(&mut self) -> f64 {
        let (u, v) = (self.unit(), self.unit());
        (-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()
    }
}

/// What the requests of a scenario look like, and what an admitted one does with
/// its units.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Mix {
    /// 1 unit (80 %) or 4 (20 %), held for a lognormal time: median 2 s, sigma 1
    /// (mean 2·e^0.5 ≈ 3.30 s).
    Uploads,
    /// 1 unit (90 %) or 2 (10 %), held for a lognormal time: median 1 s, sigma
    /// 0.5 (mean e^0.125 ≈ 1.13 s). A registry's sessions: an upload holds one
    /// unit, a mount or a packument rebuild two.
    Registry,
    /// 1 unit; once admitted, the request queues (FIFO) for one single-threaded
    /// server and holds its unit until served, in an exponential time of mean
    /// `service`: the `bohde/codel` simulation's model.
    SingleServer {
        /// The server's mean service time.
        service: Duration,
    },
}

impl Mix {
    /// The units and the work (hold or service time) of one request.
    fn draw(self, rng: &mut Rng) -> (usize, Duration) {
        match self {
            Mix::Uploads => {
                let units = if rng.unit() <= 0.8 { 1 } else { 4 };
                (units, Duration::from_secs_f64(2.0 * rng.normal().exp()))
            }
            Mix::Registry => {
                let units = if rng.unit() <= 0.9 { 1 } else { 2 };
                (units, Duration::from_secs_f64((0.5 * rng.normal()).exp()))
            }
            Mix::SingleServer { service } => {
                (1, Duration::from_secs_f64(rng.exp(service.as_secs_f64())))
            }
        }
    }

    /// The largest request of the mix: the gate's `max_units`.
    #[must_use]
    pub fn max_units(self) -> usize {
        match self {
            Mix::Uploads => 4,
            Mix::Registry => 2,
            Mix::SingleServer { .. } => 1,
        }
    }

    /// The arrivals per second that make the offered load `load` on `capacity`:
    /// `rate × mean units × mean hold / capacity` for uploads, `rate × mean
    /// service` for the single server.
    #[must_use]
    pub fn rate(self, load: f64, capacity: usize) -> f64 {
        match self {
            Mix::Uploads => load * capacity as f64 / (1.6 * 2.0 * 0.5f64.exp()),
            Mix::Registry => load * capacity as f64 / (1.1 * 0.125f64.exp()),
            Mix::SingleServer { service } => load / service.as_secs_f64(),
        }
    }
}

/// One simulated scenario.
#[derive(Debug, Clone)]
pub struct Setup {
    /// Units of the gate (slots of tower's limit).
    pub capacity: usize,
    /// The gate's wait budget.
    pub budget: Duration,
    /// The gate's bound on parked requests, if any.
    pub max_waiters: Option<usize>,
    /// A client that has waited this long drops its acquire (a cancellation).
    pub give_up: Duration,
    /// The requests.
    pub mix: Mix,
    /// Each phase's length and offered load, in order: the arrivals of
    /// [`Priority::Critical`].
    pub phases: Vec<(Duration, f64)>,
    /// The arrivals of other classes beside them, each with phases of its own
    /// (ending with the critical ones'), drawn after them from the same seed.
    pub others: Vec<(Priority, Vec<(Duration, f64)>)>,
    /// Requests arriving before this are left out of the figures.
    pub warmup: Duration,
    /// Every time above runs this many times slower on the runtime's clock, and
    /// is recorded scaled back: Tokio's timers round a deadline up to the next
    /// millisecond, which would slow a server of 2 ms requests by a third.
    pub time_scale: u32,
}

/// One request, drawn before the run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Request {
    /// When it arrives, from the start of the run.
    pub arrival: Duration,
    /// Its class.
    pub priority: Priority,
    /// The units it asks for.
    pub units: usize,
    /// How long it holds them once admitted ([`Mix::Uploads`]), or its service
    /// time ([`Mix::SingleServer`]).
    pub work: Duration,
}

impl Setup {
    /// The end of the arrivals.
    #[must_use]
    pub fn end(&self) -> Duration {
        self.phases.iter().map(|&(d, _)| d).sum()
    }

    /// Every request of the run on the arrivals of `seed`, in arrival order.
    #[must_use]
    pub fn requests(&self, seed: u64) -> Vec<Request> {
        let mut rng = Rng::new(seed);
        let mut out = Vec::new();
        let classes = std::iter::once((Priority::Critical, &self.phases))
            .chain(self.others.iter().map(|(p, v)| (*p, v)));
        for (priority, phases) in classes {
            let (mut t, mut phase_end) = (0.0, 0.0);
            for &(length, load) in phases {
                phase_end += length.as_secs_f64();
                if load == 0.0 {
                    t = phase_end;
                    continue;
                }
                let mean_gap = 1.0 / self.mix.rate(load, self.capacity);
                loop {
                    t += rng.exp(mean_gap);
                    if t >= phase_end {
                        // Memoryless: the next phase's first gap starts at its start.
                        t = phase_end;
                        break;
                    }
                    let (units, work) = self.mix.draw(&mut rng);
                    out.push(Request {
                        arrival: Duration::from_secs_f64(t),
                        priority,
                        units,
                        work,
                    });
                }
            }
        }
        out.sort_by_key(|r| r.arrival);
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
    /// tower's `LoadShed` over `ConcurrencyLimit`.
    Tower,
}

impl Policy {
    /// The column's name.
    #[must_use]
    pub fn name(self) -> String {
        match self {
            Policy::Budget => "fixed budget".into(),
            Policy::Target(t) => format!("target {} ms", t.as_millis()),
            Policy::Tower => "tower LoadShed + ConcurrencyLimit".into(),
        }
    }
}

/// How a request ended.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Outcome {
    /// Admitted after `wait`; released its units `held` later.
    Admitted {
        /// From arrival to the grant.
        wait: Duration,
        /// From the grant to the release.
        held: Duration,
    },
    /// Shed (`Busy`, or tower's `Overloaded`) `after` its arrival.
    Shed {
        /// From arrival to the answer.
        after: Duration,
        /// The gate's reason (`None`: tower, which gives none).
        reason: Option<ShedReason>,
        /// The gate's `Retry-After` (`None`: tower, which gives none).
        retry_after: Option<Duration>,
    },
    /// The client gave up while parked and dropped its acquire.
    GaveUp {
        /// From arrival to giving up: the client's timeout.
        after: Duration,
    },
}

/// One request and how it ended.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Record {
    /// The request.
    pub request: Request,
    /// How it ended.
    pub outcome: Outcome,
}

impl Record {
    /// When it was granted its units, if it was.
    #[must_use]
    pub fn admitted_at(&self) -> Option<Duration> {
        match self.outcome {
            Outcome::Admitted { wait, .. } => Some(self.request.arrival + wait),
            _ => None,
        }
    }
}

/// The observer of a simulated gate: the reason of the shed just made (the
/// runtime has one thread, and `on_shed` runs in the poll that returns the
/// `Busy`), and every change of the overload state.
#[derive(Debug)]
struct Tally {
    origin: Instant,
    last_reason: Mutex<Option<ShedReason>>,
    changes: Mutex<Vec<(Duration, bool)>>,
}

impl Observer for Tally {
    fn on_shed(&self, event: &ShedEvent) {
        *self.last_reason.lock().unwrap() = Some(event.reason);
    }

    fn on_overload(&self, event: &OverloadEvent) {
        let now = self.origin.elapsed();
        self.changes.lock().unwrap().push((now, event.overloaded));
    }
}

/// What a run of one column did.
#[derive(Debug)]
pub struct Run {
    /// The column.
    pub policy: Policy,
    /// Every request, in arrival order.
    pub records: Vec<Record>,
    /// Every change of the gate's overload state: when, and the state after it.
    pub overload_changes: Vec<(Duration, bool)>,
}

/// The single-threaded server of [`Mix::SingleServer`]: a FIFO lock.
type Server = Rc<tokio::sync::Mutex<()>>;

/// What an admitted request does before it releases its units.
async fn work(mix: Mix, server: &Server, work: Duration) {
    match mix {
        Mix::Uploads | Mix::Registry => tokio::time::sleep(work).await,
        Mix::SingleServer { .. } => {
            let _serving = server.lock().await;
            tokio::time::sleep(work).await;
        }
    }
}

/// Runs `setup` under `policy` on the arrivals of `seed`.
///
/// # Panics
///
/// If the gate's configuration is invalid, or it answers other than with a permit
/// or `Busy`.
#[must_use]
pub fn simulate(setup: &Setup, policy: Policy, seed: u64) -> Run {
    let requests = setup.requests(seed);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("a runtime");
    let local = tokio::task::LocalSet::new();
    let scale = setup.time_scale;
    let up = move |d: Duration| d * scale;
    local.block_on(&runtime, async {
        let start = Instant::now();
        let elapsed = move |since: Instant| since.elapsed() / scale;
        let records: Rc<RefCell<Vec<Option<Record>>>> =
            Rc::new(RefCell::new(vec![None; requests.len()]));
        let server: Server = Rc::default();
        let tally = Arc::new(Tally {
            origin: start,
            last_reason: Mutex::new(None),
            changes: Mutex::new(Vec::new()),
        });
        let mut tasks = Vec::with_capacity(requests.len());
        match policy {
            Policy::Budget | Policy::Target(_) => {
                let (min, max) = (Duration::from_secs(1), Duration::from_secs(60));
                let mut builder = admit_tokio::gate::<Site>(setup.capacity)
                    .max_units(setup.mix.max_units().min(setup.capacity))
                    .wait_budget(up(setup.budget))
                    .retry_after_bounds(up(min), up(max));
                if let Some(max) = setup.max_waiters {
                    builder = builder.max_waiters(max);
                }
                if let Policy::Target(target) = policy {
                    builder = builder.overload_target(up(target));
                }
                let gate = builder
                    .observer(Arc::clone(&tally))
                    .build()
                    .expect("a valid gate");
                for (i, &request) in requests.iter().enumerate() {
                    tokio::time::sleep_until(start + up(request.arrival)).await;
                    let (gate, records, server, tally) = (
                        gate.clone(),
                        Rc::clone(&records),
                        Rc::clone(&server),
                        Arc::clone(&tally),
                    );
                    let (mix, give_up) = (setup.mix, up(setup.give_up));
                    tasks.push(tokio::task::spawn_local(async move {
                        let arrived = Instant::now();
                        let acquire = gate
                            .acquire(request.units, Site::Upload)
                            .priority(request.priority);
                        let outcome = match tokio::time::timeout(give_up, acquire).await {
                            Err(_) => Outcome::GaveUp {
                                after: elapsed(arrived),
                            },
                            Ok(Ok(permit)) => {
                                let wait = elapsed(arrived);
                                work(mix, &server, up(request.work)).await;
                                drop(permit);
                                Outcome::Admitted {
                                    wait,
                                    held: elapsed(arrived) - wait,
                                }
                            }
                            Ok(Err(GateError::Busy { retry_after, .. })) => Outcome::Shed {
                                after: elapsed(arrived),
                                reason: tally.last_reason.lock().unwrap().take(),
                                retry_after: Some(retry_after / scale),
                            },
                            Ok(Err(other)) => panic!("the gate answered {other:?}"),
                        };
                        records.borrow_mut()[i] = Some(Record { request, outcome });
                    }));
                }
            }
            Policy::Tower => {
                let limited = ServiceBuilder::new()
                    .load_shed()
                    .concurrency_limit(setup.capacity)
                    .service(tower::service_fn({
                        let (mix, server) = (setup.mix, Rc::clone(&server));
                        move |hold: Duration| {
                            let server = Rc::clone(&server);
                            async move {
                                work(mix, &server, hold).await;
                                Ok::<_, Infallible>(())
                            }
                        }
                    }));
                for (i, &request) in requests.iter().enumerate() {
                    tokio::time::sleep_until(start + up(request.arrival)).await;
                    let (limited, records) = (limited.clone(), Rc::clone(&records));
                    tasks.push(tokio::task::spawn_local(async move {
                        let arrived = Instant::now();
                        // One slot per unit, all taken at this instant or none.
                        let mut calls = Vec::with_capacity(request.units);
                        for _ in 0..request.units {
                            let mut slot = limited.clone();
                            let ready = slot.ready().await.expect("LoadShed is always ready");
                            calls.push(Box::pin(ready.call(up(request.work))));
                        }
                        let outcome = match all_ok(calls).await {
                            Ok(()) => Outcome::Admitted {
                                wait: Duration::ZERO,
                                held: elapsed(arrived),
                            },
                            Err(_) => Outcome::Shed {
                                after: elapsed(arrived),
                                reason: None,
                                retry_after: None,
                            },
                        };
                        records.borrow_mut()[i] = Some(Record { request, outcome });
                    }));
                }
            }
        }
        for task in tasks {
            task.await.expect("a request's task");
        }
        let records = records
            .borrow()
            .iter()
            .map(|r| r.expect("every request ended"))
            .collect();
        let overload_changes = tally
            .changes
            .lock()
            .unwrap()
            .iter()
            .map(|&(at, overloaded)| (at / scale, overloaded))
            .collect();
        Run {
            policy,
            records,
            overload_changes,
        }
    })
}

/// One operation of a client that retries: its size, and how its tries went.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Operation {
    /// The units it asks for.
    pub units: usize,
    /// Its first try, from the start of the run.
    pub first_try: Duration,
    /// Tries made, the admitted one included.
    pub tries: usize,
    /// From the first try to the grant; `None` if the client gave up.
    pub admitted_after: Option<Duration>,
}

/// Runs `setup` closed-loop: `clients` clients, each doing one operation after
/// another (drawn from the mix, no pause between them) until the arrivals' end.
/// A shed client sleeps its `Retry-After` (tower gives none: 1 s) times a draw
/// of U(0.5, 1.5) and tries again, or gives up once that would take it past
/// `setup.give_up` from the operation's first try. The clients start spread
/// over the first second.
///
/// # Panics
///
/// If the gate answers other than with a permit or `Busy`.
#[must_use]
pub fn simulate_retrying(
    setup: &Setup,
    policy: Policy,
    seed: u64,
    clients: usize,
) -> Vec<Operation> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("a runtime");
    let local = tokio::task::LocalSet::new();
    local.block_on(&runtime, async {
        let start = Instant::now();
        let end = setup.end();
        let operations: Rc<RefCell<Vec<Operation>>> = Rc::default();
        let try_once = admission(setup, policy);
        let mut tasks = Vec::with_capacity(clients);
        for client in 0..clients {
            let (try_once, operations) = (Rc::clone(&try_once), Rc::clone(&operations));
            let (mix, give_up) = (setup.mix, setup.give_up);
            let mut rng = Rng::new(seed ^ (client as u64).wrapping_mul(0x2545_f491_4f6c_dd1d));
            tasks.push(tokio::task::spawn_local(async move {
                tokio::time::sleep(Duration::from_secs_f64(rng.unit())).await;
                while start.elapsed() < end {
                    let (units, hold) = mix.draw(&mut rng);
                    let first_try = start.elapsed();
                    let mut tries = 0;
                    let admitted_after = loop {
                        tries += 1;
                        match try_once(units, hold).await {
                            Ok(granted) => break Some(granted - start - first_try),
                            Err(retry_after) => {
                                let pause = retry_after.mul_f64(0.5 + rng.unit());
                                if start.elapsed() + pause - first_try > give_up {
                                    break None;
                                }
                                tokio::time::sleep(pause).await;
                            }
                        }
                    };
                    operations.borrow_mut().push(Operation {
                        units,
                        first_try,
                        tries,
                        admitted_after,
                    });
                }
            }));
        }
        for task in tasks {
            task.await.expect("a client's task");
        }
        let mut operations = operations.borrow().clone();
        operations.sort_by_key(|o| o.first_try);
        operations
    })
}

/// One try at admission for `units` that, if admitted, holds them for the
/// given time: when it was granted, or the `Retry-After` to wait before the
/// next try.
type TryOnce =
    Rc<dyn Fn(usize, Duration) -> Pin<Box<dyn Future<Output = Result<Instant, Duration>>>>>;

/// The admission control of `policy`, as one try of a retrying client.
fn admission(setup: &Setup, policy: Policy) -> TryOnce {
    match policy {
        Policy::Budget | Policy::Target(_) => {
            let mut builder = admit_tokio::gate::<Site>(setup.capacity)
                .max_units(setup.mix.max_units().min(setup.capacity))
                .wait_budget(setup.budget)
                .retry_after_bounds(Duration::from_secs(1), Duration::from_secs(60));
            if let Some(max) = setup.max_waiters {
                builder = builder.max_waiters(max);
            }
            if let Policy::Target(target) = policy {
                builder = builder.overload_target(target);
            }
            let gate = builder.build().expect("a valid gate");
            Rc::new(move |units, hold| {
                let gate = gate.clone();
                Box::pin(async move {
                    match gate.acquire(units, Site::Upload).await {
                        Ok(permit) => {
                            let granted = Instant::now();
                            tokio::time::sleep(hold).await;
                            drop(permit);
                            Ok(granted)
                        }
                        Err(GateError::Busy { retry_after, .. }) => Err(retry_after),
                        Err(other) => panic!("the gate answered {other:?}"),
                    }
                })
            })
        }
        Policy::Tower => {
            let limited = ServiceBuilder::new()
                .load_shed()
                .concurrency_limit(setup.capacity)
                .service(tower::service_fn(|hold: Duration| async move {
                    tokio::time::sleep(hold).await;
                    Ok::<_, Infallible>(())
                }));
            Rc::new(move |units, hold| {
                let limited = limited.clone();
                Box::pin(async move {
                    // One slot per unit, all at this instant or none.
                    let granted = Instant::now();
                    let mut calls = Vec::with_capacity(units);
                    for _ in 0..units {
                        let mut slot = limited.clone();
                        let ready = slot.ready().await.expect("LoadShed is always ready");
                        calls.push(Box::pin(ready.call(hold)));
                    }
                    match all_ok(calls).await {
                        Ok(()) => Ok(granted),
                        Err(_) => Err(Duration::from_secs(1)),
                    }
                })
            })
        }
    }
}

/// Per size (`[1 unit, larger]`), over the operations whose first try came in
/// `[from, to)` and that ended: the share of tries admitted, the share of
/// operations that got in, and the p50 and p99 from the first try to the grant.
#[must_use]
pub fn retry_figures(operations: &[Operation], from: Duration, to: Duration) -> [RetryFigures; 2] {
    [false, true].map(|large| {
        let ops: Vec<&Operation> = operations
            .iter()
            .filter(|o| o.first_try >= from && o.first_try < to && (o.units > 1) == large)
            .collect();
        let tries: usize = ops.iter().map(|o| o.tries).sum();
        let mut admitted: Vec<Duration> = ops.iter().filter_map(|o| o.admitted_after).collect();
        RetryFigures {
            operations: ops.len(),
            tries_admitted: admitted.len() as f64 / tries.max(1) as f64,
            got_in: admitted.len() as f64 / ops.len().max(1) as f64,
            to_admission: [0.5, 0.99].map(|q| quantile(&mut admitted, q)),
        }
    })
}

/// What [`retry_figures`] gives for one size.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RetryFigures {
    /// Operations counted.
    pub operations: usize,
    /// Tries admitted, over every try.
    pub tries_admitted: f64,
    /// Operations admitted, over every operation.
    pub got_in: f64,
    /// First try to the grant, p50 and p99, of the admitted.
    pub to_admission: [Option<Duration>; 2],
}

/// Polls every future until all succeed, or until the first error, which drops
/// the rest at once.
async fn all_ok<F, E>(calls: Vec<Pin<Box<F>>>) -> Result<(), E>
where
    F: Future<Output = Result<(), E>>,
{
    let mut calls: Vec<Option<Pin<Box<F>>>> = calls.into_iter().map(Some).collect();
    std::future::poll_fn(move |cx| {
        let mut pending = false;
        for slot in &mut calls {
            if let Some(call) = slot {
                match call.as_mut().poll(cx) {
                    Poll::Ready(Ok(())) => *slot = None,
                    Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                    Poll::Pending => pending = true,
                }
            }
        }
        if pending {
            Poll::Pending
        } else {
            Poll::Ready(Ok(()))
        }
    })
    .await
}

/// The `q`-quantile of `values` (sorted here; nearest rank), `None` when empty.
pub fn quantile(values: &mut [Duration], q: f64) -> Option<Duration> {
    if values.is_empty() {
        return None;
    }
    values.sort_unstable();
    let at = ((values.len() as f64 * q).ceil() as usize).clamp(1, values.len()) - 1;
    Some(values[at])
}

/// The index of [`ShedReason::ALL`] for `reason`, and the last index (one past
/// them) for tower's shed, which has none.
fn reason_index(reason: Option<ShedReason>) -> usize {
    reason.map_or(ShedReason::ALL.len(), |r| {
        ShedReason::ALL
            .iter()
            .position(|&x| x == r)
            .expect("a known reason")
    })
}

/// A run's figures over the requests that arrived in a span.
#[derive(Debug, Clone, PartialEq)]
pub struct Figures {
    /// Requests that arrived in the span.
    pub requests: usize,
    /// Units in use over time in the span, over the capacity; with
    /// [`Mix::SingleServer`], the server's busy share of the span instead.
    pub utilisation: f64,
    /// Requests whose work ended in the span, per second.
    pub completed_per_s: f64,
    /// Admitted waits (arrival to grant): p50, p99, p99.9.
    pub wait: [Option<Duration>; 3],
    /// Arrival to release of the admitted (what `bohde/codel` reports): p50,
    /// p95, p99.
    pub latency: [Option<Duration>; 3],
    /// Arrival to the answer of the shed: p50, p99.
    pub time_to_shed: [Option<Duration>; 2],
    /// Share of requests shed: all, 1-unit, larger.
    pub shed: [f64; 3],
    /// Sheds per size (`[1 unit, larger]`) and reason ([`ShedReason::ALL`], then
    /// tower's, which has none).
    pub sheds_by_reason: [[usize; ShedReason::ALL.len() + 1]; 2],
    /// Share of requests whose client gave up while parked.
    pub gave_up: f64,
    /// Share of requests shed or given up by the end of the span: what
    /// `bohde/codel` counts as dropped (it reads its counter when the arrivals
    /// stop).
    pub dropped_by_end: f64,
    /// Median `Retry-After` of the sheds.
    pub retry_after_p50: Option<Duration>,
    /// Median, over the sheds, of the time from the shed to the next grant of a
    /// request of its size that arrived after it: how long its client would have
    /// had to wait to get in.
    pub next_grant_p50: Option<Duration>,
    /// Share of the sheds for which the first request of the same size arriving
    /// at or after `Retry-After` from the shed was admitted.
    pub retry_admitted: Option<f64>,
    /// Share of the span the gate was overloaded.
    pub overloaded: f64,
    /// Times the gate became overloaded in the span.
    pub overload_entries: usize,
}

impl Run {
    /// The figures over the requests that arrived in `[from, to)`.
    #[must_use]
    pub fn figures(&self, setup: &Setup, from: Duration, to: Duration) -> Figures {
        let span = (to - from).as_secs_f64();
        let arrived: Vec<&Record> = self
            .records
            .iter()
            .filter(|r| r.request.arrival >= from && r.request.arrival < to)
            .collect();
        let n = arrived.len().max(1) as f64;

        // Utilisation and completions over every request: a unit held in the
        // span counts whenever its request arrived.
        let (mut busy, mut completed) = (0.0, 0usize);
        for r in &self.records {
            let (Some(granted), Outcome::Admitted { held, .. }) = (r.admitted_at(), r.outcome)
            else {
                continue;
            };
            let released = granted + held;
            let (a, weight) = match setup.mix {
                Mix::Uploads | Mix::Registry => {
                    (granted, r.request.units as f64 / setup.capacity as f64)
                }
                Mix::SingleServer { .. } => (released.saturating_sub(r.request.work), 1.0),
            };
            busy += released.min(to).saturating_sub(a.max(from)).as_secs_f64() * weight;
            completed += usize::from(released >= from && released < to);
        }

        let mut waits = Vec::new();
        let mut latencies = Vec::new();
        let mut shed_after = Vec::new();
        let mut retry = Vec::new();
        let mut sheds_by_reason = [[0; ShedReason::ALL.len() + 1]; 2];
        let (mut shed_of_size, mut of_size) = ([0usize; 2], [0usize; 2]);
        let mut gave_up = 0usize;
        for r in &arrived {
            let large = usize::from(r.request.units > 1);
            of_size[large] += 1;
            match r.outcome {
                Outcome::Admitted { wait, held } => {
                    waits.push(wait);
                    latencies.push(wait + held);
                }
                Outcome::Shed {
                    after,
                    reason,
                    retry_after,
                } => {
                    shed_after.push(after);
                    retry.extend(retry_after);
                    sheds_by_reason[large][reason_index(reason)] += 1;
                    shed_of_size[large] += 1;
                }
                Outcome::GaveUp { .. } => gave_up += 1,
            }
        }
        let share = |k: usize, of: usize| k as f64 / of.max(1) as f64;

        let (mut next_grant, retry_admitted) = self.after_sheds(&arrived);
        let retry_admitted = (!retry_admitted.is_empty()).then(|| {
            retry_admitted.iter().filter(|&&ok| ok).count() as f64 / retry_admitted.len() as f64
        });
        let (overloaded, overload_entries) = self.overloaded_within(from, to);
        Figures {
            requests: arrived.len(),
            utilisation: busy / span,
            completed_per_s: completed as f64 / span,
            wait: [0.5, 0.99, 0.999].map(|q| quantile(&mut waits, q)),
            latency: [0.5, 0.95, 0.99].map(|q| quantile(&mut latencies, q)),
            time_to_shed: [0.5, 0.99].map(|q| quantile(&mut shed_after, q)),
            shed: [
                shed_after.len() as f64 / n,
                share(shed_of_size[0], of_size[0]),
                share(shed_of_size[1], of_size[1]),
            ],
            sheds_by_reason,
            gave_up: gave_up as f64 / n,
            dropped_by_end: arrived
                .iter()
                .filter(|r| match r.outcome {
                    Outcome::Shed { after, .. } | Outcome::GaveUp { after } => {
                        r.request.arrival + after < to
                    }
                    Outcome::Admitted { .. } => false,
                })
                .count() as f64
                / n,
            retry_after_p50: quantile(&mut retry, 0.5),
            next_grant_p50: quantile(&mut next_grant, 0.5),
            retry_admitted,
            overloaded: overloaded.as_secs_f64() / span,
            overload_entries,
        }
    }

    /// For each shed among `arrived`: the time to the next grant of a request of
    /// its size that arrived after the shed, and (if it carried a `Retry-After`)
    /// whether the first request of its size arriving at or after that was
    /// admitted.
    fn after_sheds(&self, arrived: &[&Record]) -> (Vec<Duration>, Vec<bool>) {
        let from_index = |t: Duration| self.records.partition_point(|r| r.request.arrival < t);
        let (mut next_grant, mut retry_admitted) = (Vec::new(), Vec::new());
        for r in arrived {
            let Outcome::Shed {
                after, retry_after, ..
            } = r.outcome
            else {
                continue;
            };
            let shed_at = r.request.arrival + after;
            let same_size = |s: &&Record| s.request.units == r.request.units;
            let grant = self.records[from_index(shed_at)..]
                .iter()
                .filter(same_size)
                .find_map(Record::admitted_at);
            next_grant.extend(grant.map(|g| g - shed_at));
            if let Some(retry_after) = retry_after {
                let retry = self.records[from_index(shed_at + retry_after)..]
                    .iter()
                    .find(same_size);
                retry_admitted.extend(retry.map(|s| s.admitted_at().is_some()));
            }
        }
        (next_grant, retry_admitted)
    }

    /// How long the gate was overloaded within `[from, to)`, and how many times it
    /// became so there.
    fn overloaded_within(&self, from: Duration, to: Duration) -> (Duration, usize) {
        let (mut total, mut entries) = (Duration::ZERO, 0);
        let mut since: Option<Duration> = None;
        for &(at, overloaded) in &self.overload_changes {
            match (since, overloaded) {
                (None, true) => {
                    since = Some(at);
                    entries += usize::from(at >= from && at < to);
                }
                (Some(start), false) => {
                    total += at.min(to).saturating_sub(start.max(from));
                    since = None;
                }
                _ => {}
            }
        }
        if let Some(start) = since {
            total += to.saturating_sub(start.max(from));
        }
        (total, entries)
    }

    /// The same run with each request's class read from `classes` (in arrival
    /// order): for a run that saw every request as one class.
    #[must_use]
    pub fn with_classes(self, classes: &[Priority]) -> Run {
        let mut records = self.records;
        for (record, &class) in records.iter_mut().zip(classes) {
            record.request.priority = class;
        }
        Run { records, ..self }
    }

    /// The figures of one class over the requests of it that arrived in
    /// `[from, to)`.
    #[must_use]
    pub fn class_figures(&self, priority: Priority, from: Duration, to: Duration) -> ClassFigures {
        let mut waits = Vec::new();
        let (mut requests, mut shed, mut outranked) = (0, 0, 0);
        for r in self.records.iter().filter(|r| {
            r.request.priority == priority && r.request.arrival >= from && r.request.arrival < to
        }) {
            requests += 1;
            match r.outcome {
                Outcome::Admitted { wait, .. } => waits.push(wait),
                Outcome::Shed { reason, .. } => {
                    shed += 1;
                    outranked += usize::from(reason == Some(ShedReason::Outranked));
                }
                Outcome::GaveUp { .. } => {}
            }
        }
        ClassFigures {
            requests,
            shed: shed as f64 / requests.max(1) as f64,
            outranked,
            wait: [0.5, 0.99].map(|q| quantile(&mut waits, q)),
        }
    }

    /// Every grant, by time: (when, the wait before it).
    fn grants(&self) -> Vec<(Duration, Duration)> {
        let mut grants: Vec<_> = self
            .records
            .iter()
            .filter_map(|r| match r.outcome {
                Outcome::Admitted { wait, .. } => Some((r.request.arrival + wait, wait)),
                _ => None,
            })
            .collect();
        grants.sort_unstable();
        grants
    }

    /// The admitted-wait p99 of the requests granted in `[from, to)`.
    #[must_use]
    pub fn granted_wait_p99(&self, from: Duration, to: Duration) -> Option<Duration> {
        p99_granted(&self.grants(), from, to)
    }

    /// After a spike that ended at `spike_end`: the time until the p99 of the
    /// admitted waits over a sliding 1 s window (of the requests granted in it,
    /// slid in steps of 100 ms) is back within 1.5× its level over `before` (the
    /// requests granted then; a level below [`RECOVERY_FLOOR`] counts as that)
    /// and stays there for [`RECOVERY_HOLD`]; zero if it never left. `None` if it
    /// is not back by `end`.
    #[must_use]
    pub fn recovery(
        &self,
        before: (Duration, Duration),
        spike_end: Duration,
        end: Duration,
    ) -> Option<Duration> {
        let grants = self.grants();
        let bound = recovery_bound(&grants, before)?;
        let (step, window) = (Duration::from_millis(100), Duration::from_secs(1));
        let within = |t: Duration| {
            p99_granted(&grants, t.saturating_sub(window), t).is_none_or(|p99| p99 <= bound)
        };
        let steps = (RECOVERY_HOLD.as_millis() / step.as_millis()) as u32;
        let mut t = spike_end;
        while t + RECOVERY_HOLD <= end {
            // Past the last window out of bounds in the hold ahead, if any.
            match (0..=steps).rev().find(|&k| !within(t + step * k)) {
                None => return Some(t - spike_end),
                Some(k) => t += step * (k + 1),
            }
        }
        None
    }
}

/// What [`Run::class_figures`] gives.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ClassFigures {
    /// Requests of the class that arrived in the span.
    pub requests: usize,
    /// Their share shed, for any reason.
    pub shed: f64,
    /// Of the shed, those shed while parked for a higher class.
    pub outranked: usize,
    /// Admitted waits: p50, p99.
    pub wait: [Option<Duration>; 2],
}

impl Run {
    /// After a spike that ended at `spike_end`, the definition of
    /// recovery: the least `t` (in steps of 100 ms from the end) at which the p99
    /// of the waits of the requests admitted over the next 10 s is within 1.5×
    /// its level over `before` (at least [`RECOVERY_FLOOR`]); `None` if not by
    /// `end`.
    #[must_use]
    pub fn recovery_over_next_10s(
        &self,
        before: (Duration, Duration),
        spike_end: Duration,
        end: Duration,
    ) -> Option<Duration> {
        let grants = self.grants();
        let bound = recovery_bound(&grants, before)?;
        let (step, window) = (Duration::from_millis(100), Duration::from_secs(10));
        let mut t = spike_end;
        while t + window <= end {
            if p99_granted(&grants, t, t + window).is_none_or(|p99| p99 <= bound) {
                return Some(t - spike_end);
            }
            t += step;
        }
        None
    }
}

/// The wait p99 a run has recovered to after a spike: 1.5× its level over
/// `before` (a level below [`RECOVERY_FLOOR`] counts as that).
fn recovery_bound(
    grants: &[(Duration, Duration)],
    before: (Duration, Duration),
) -> Option<Duration> {
    let level = p99_granted(grants, before.0, before.1)?.max(RECOVERY_FLOOR);
    Some(level.mul_f64(1.5))
}

/// The p99 of the waits of `grants` (sorted by time) granted in `[from, to)`.
fn p99_granted(grants: &[(Duration, Duration)], from: Duration, to: Duration) -> Option<Duration> {
    let a = grants.partition_point(|&(at, _)| at < from);
    let b = grants.partition_point(|&(at, _)| at < to);
    let mut waits: Vec<Duration> = grants[a..b].iter().map(|&(_, wait)| wait).collect();
    quantile(&mut waits, 0.99)
}

/// How long the sliding p99 must stay within its bound to count as recovered.
pub const RECOVERY_HOLD: Duration = Duration::from_secs(10);

/// The least level the recovery is measured against: before a spike that found
/// the gate with no queue at all, 1.5× a p99 of zero would ask for no wait at all
/// afterwards.
pub const RECOVERY_FLOOR: Duration = Duration::from_millis(100);

/// The upload mix at a steady `load`, for `length` after a warm-up of 60 s.
#[must_use]
pub fn uploads(load: f64, length: Duration) -> Setup {
    Setup {
        capacity: 64,
        budget: Duration::from_secs(5),
        max_waiters: None,
        give_up: Duration::from_secs(20),
        mix: Mix::Uploads,
        phases: vec![(Duration::from_secs(60) + length, load)],
        others: Vec::new(),
        warmup: Duration::from_secs(60),
        time_scale: 1,
    }
}

/// The registry mix ([`Mix::Registry`]) at a steady `load` on 32 units with a
/// wait budget of 2 s, for `length` after a warm-up of 60 s.
#[must_use]
pub fn registry(load: f64, length: Duration) -> Setup {
    Setup {
        capacity: 32,
        budget: Duration::from_secs(2),
        mix: Mix::Registry,
        ..uploads(load, length)
    }
}

/// The registry mix with two classes: critical requests at `critical` times the
/// capacity beside sheddable ones at `sheddable` (both steady), for `length`
/// after a warm-up of 60 s.
#[must_use]
pub fn classes(critical: f64, sheddable: f64, length: Duration) -> Setup {
    let setup = registry(critical, length);
    Setup {
        others: vec![(
            Priority::Sheddable,
            setup.phases.iter().map(|&(d, _)| (d, sheddable)).collect(),
        )],
        ..setup
    }
}

/// The registry mix with critical requests at 0.5× throughout, and sheddable
/// ones at 0.3× but for a spike of `spike` times the capacity for 60 s: 0.8×
/// in total before and after it.
#[must_use]
pub fn class_spike(spike: f64) -> Setup {
    let quiet = Duration::from_secs(120);
    let length = Duration::from_secs(60);
    Setup {
        phases: vec![(quiet * 2 + length, 0.5)],
        others: vec![(
            Priority::Sheddable,
            vec![(quiet, 0.3), (length, spike), (quiet, 0.3)],
        )],
        warmup: Duration::from_secs(60),
        ..registry(0.5, Duration::ZERO)
    }
}

/// When the spike of [`class_spike`] starts and ends.
pub const CLASS_SPIKE: (Duration, Duration) = (Duration::from_secs(120), Duration::from_secs(180));

/// The upload mix at 0.8× for 120 s, 1.4× for 60 s, then 0.8× for 120 s.
#[must_use]
pub fn spike() -> Setup {
    Setup {
        phases: vec![
            (SPIKE.0, 0.8),
            (SPIKE.1 - SPIKE.0, 1.4),
            (Duration::from_secs(120), 0.8),
        ],
        ..uploads(0.8, Duration::ZERO)
    }
}

/// When the spike of [`spike`] starts and ends.
pub const SPIKE: (Duration, Duration) = (Duration::from_secs(120), Duration::from_secs(180));

/// The `bohde/codel` simulation (`cmd/sim/main.go`, the version behind its
/// README's table): 1000 requests a second for 10 s into a lock of 10
/// outstanding and 1000 pending, in front of one single-threaded server of 500 a
/// second (exponential service times, mean 2 ms); each client gives up after
/// `timeout` (1 s there), and the gate's budget is that timeout. Run 1000 times
/// slower (see [`Setup::time_scale`]).
#[must_use]
pub fn bohde(timeout: Duration) -> Setup {
    Setup {
        capacity: 10,
        budget: timeout,
        max_waiters: Some(1000),
        give_up: timeout,
        mix: Mix::SingleServer {
            service: Duration::from_millis(2),
        },
        phases: vec![(Duration::from_secs(10), 2.0)],
        others: Vec::new(),
        warmup: Duration::ZERO,
        time_scale: 1000,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TARGET: Duration = Duration::from_millis(500);

    fn run(setup: &Setup, policy: Policy) -> Figures {
        simulate(setup, policy, 7).figures(setup, setup.warmup, setup.end())
    }

    /// The smoke pass: at twice the load, the overload target answers most sheds
    /// at once and keeps admitted waits far below the fixed budget's, on the same
    /// arrivals, with the gate as busy.
    #[test]
    fn at_twice_the_load_the_target_sheds_at_once_and_keeps_admitted_waits_short() {
        let setup = uploads(2.0, Duration::from_secs(60));
        let fixed = run(&setup, Policy::Budget);
        let target = run(&setup, Policy::Target(TARGET));
        assert!(fixed.time_to_shed[0] >= Some(setup.budget), "{fixed:?}");
        assert!(
            target.time_to_shed[0] < Some(setup.budget / 50),
            "{target:?}"
        );
        assert!(
            target.wait[1] < fixed.wait[1].map(|p99| p99 / 2),
            "{target:?}\n{fixed:?}"
        );
        assert!(target.utilisation > 0.95, "{target:?}");
    }

    /// The size rule: at twice the load a 2-unit request gets in about as often
    /// as a 1-unit one, open-loop and with clients that retry; the fixed
    /// budget, whose limit is one edge for every size, does not.
    #[test]
    fn at_twice_the_load_a_two_unit_request_gets_in_as_often_as_a_one_unit_one() {
        let setup = registry(2.0, Duration::from_secs(60));
        let target = Policy::Target(Duration::from_millis(200));
        let admitted = |x: &Figures| (1.0 - x.shed[2]) / (1.0 - x.shed[1]);
        let (fixed, with_target) = (run(&setup, Policy::Budget), run(&setup, target));
        assert!(admitted(&fixed) < 0.7, "{fixed:?}");
        assert!(admitted(&with_target) > 0.9, "{with_target:?}");

        let operations = simulate_retrying(&setup, target, 7, 160);
        let [small, large] = retry_figures(&operations, setup.warmup, setup.end());
        assert!(large.got_in / small.got_in > 0.9, "{small:?} {large:?}");
        assert!(large.operations > 50, "{large:?}");
    }

    #[test]
    fn at_half_the_load_nothing_is_shed() {
        let setup = uploads(0.5, Duration::from_secs(60));
        for policy in [Policy::Budget, Policy::Target(TARGET)] {
            let figures = run(&setup, policy);
            assert_eq!(figures.shed[0], 0.0, "{policy:?}: {figures:?}");
        }
    }

    #[test]
    fn tower_never_waits_and_never_holds_more_than_its_slots() {
        let setup = uploads(2.0, Duration::from_secs(30));
        let figures = run(&setup, Policy::Tower);
        assert_eq!(figures.wait[1], Some(Duration::ZERO));
        assert_eq!(figures.time_to_shed[1], Some(Duration::ZERO));
        assert!(
            figures.utilisation <= 1.0 && figures.shed[0] > 0.3,
            "{figures:?}"
        );
    }

    #[test]
    fn the_same_seed_gives_the_same_run() {
        let setup = bohde(Duration::from_secs(1));
        let policy = Policy::Target(Duration::from_millis(1));
        assert_eq!(
            simulate(&setup, policy, 3).records,
            simulate(&setup, policy, 3).records
        );
    }

    #[test]
    fn the_offered_load_is_what_was_asked() {
        let setup = uploads(1.0, Duration::from_secs(3000));
        let requests = setup.requests(11);
        let work: f64 = requests
            .iter()
            .map(|r| r.units as f64 * r.work.as_secs_f64())
            .sum();
        let load = work / (setup.end().as_secs_f64() * setup.capacity as f64);
        assert!((load - 1.0).abs() < 0.05, "{load}");
    }
}
