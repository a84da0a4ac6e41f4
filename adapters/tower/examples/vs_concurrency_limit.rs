//! The same load through `AdmitLayer` and through tower's `LoadShed` +
//! `ConcurrencyLimit`: admitted, shed, the units in use at the peak, and the
//! capacity held by services made ready but never called.
//!
//! ```sh
//! cargo run -p admit-tower --example vs_concurrency_limit
//! ```
//!
//! In process, on Tokio's paused clock, so the figures are exact and the same on
//! every machine. The load: a capacity of 4 units (4 session buffers); 3 waves of
//! 16 requests, 4 s apart, each request arriving on its own connection (a clone of
//! the service, made ready, then called); every fourth request a mirror that holds
//! 2 units, the others 1; each admitted request holds its units for 1 s; the wait
//! budget is 2.5 s (not a whole number of holds, so that no deadline falls on
//! the very instant of a release). "Idle connections" are clones made ready and never called, as a
//! server does for a keep-alive connection waiting for its next request (hyper
//! polls readiness before it reads one) and as a `Buffer` does ahead of demand.

use std::convert::Infallible;
use std::fmt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use admit_tower::{AdmitLayer, Decision};
use bytes::Bytes;
use http::{Request, Response};
use http_body_util::{BodyExt, Full};
use tower::limit::GlobalConcurrencyLimitLayer;
use tower::{Service, ServiceBuilder, ServiceExt};

admit::sources! {
    /// The two request kinds.
    pub enum Route {
        /// `POST /upload`: 1 unit.
        Upload => "upload",
        /// `POST /mirror`: 2 units.
        Mirror => "mirror",
    }
}

/// Capacity in units.
pub const CAPACITY: usize = 4;
const WAVES: usize = 3;
const PER_WAVE: usize = 16;
const WAVE_GAP: Duration = Duration::from_secs(4);
const HOLD: Duration = Duration::from_secs(1);
const WAIT_BUDGET: Duration = Duration::from_millis(2500);

/// Which middleware stands in front of the handler.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stack {
    /// `AdmitLayer` over an `admit` gate of [`CAPACITY`] units.
    Admit,
    /// `LoadShed` over `ConcurrencyLimit` of [`CAPACITY`] (its global form, whose
    /// semaphore the run can read; the same service).
    ConcurrencyLimit,
}

/// What one run saw.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Figures {
    /// The middleware.
    pub stack: Stack,
    /// Services made ready and never called, for the whole run.
    pub idle: usize,
    /// Requests answered by the handler.
    pub admitted: usize,
    /// Requests refused (503 / `Overloaded`).
    pub shed: usize,
    /// Of those, refused without any wait.
    pub shed_at_once: usize,
    /// The most units the handlers held at once (the memory the cap is for).
    pub peak_units: usize,
    /// Capacity held by the idle services while no request was in flight.
    pub held_by_idle: usize,
}

fn units(route: Route) -> usize {
    match route {
        Route::Upload => 1,
        Route::Mirror => 2,
    }
}

fn route_of(path: &str) -> Route {
    if path == "/mirror" {
        Route::Mirror
    } else {
        Route::Upload
    }
}

/// The handler: holds its session for [`HOLD`], counting the units in use.
#[derive(Clone, Default)]
struct Handler {
    in_use: Arc<AtomicUsize>,
    peak: Arc<AtomicUsize>,
}

impl Handler {
    fn service<B: Send + 'static>(
        &self,
    ) -> impl Service<Request<B>, Response = Response<Full<Bytes>>, Error = Infallible, Future: Send>
           + Clone
           + Send
           + 'static {
        let this = self.clone();
        tower::service_fn(move |request: Request<B>| {
            let this = this.clone();
            async move {
                let units = units(route_of(request.uri().path()));
                let now = this.in_use.fetch_add(units, Ordering::SeqCst) + units;
                this.peak.fetch_max(now, Ordering::SeqCst);
                tokio::time::sleep(HOLD).await;
                this.in_use.fetch_sub(units, Ordering::SeqCst);
                Ok(Response::new(Full::new(Bytes::from_static(b"ok"))))
            }
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    Admitted,
    Shed { waited: Duration },
}

/// One request on its own connection: a fresh clone, made ready, called.
async fn one<Svc, RB>(mut service: Svc, path: &'static str) -> Outcome
where
    Svc: Service<Request<Full<Bytes>>, Response = Response<RB>>,
    RB: http_body::Body,
{
    let started = tokio::time::Instant::now();
    let request = Request::post(path).body(Full::new(Bytes::new())).unwrap();
    let answer = match service.ready().await {
        Ok(ready) => ready.call(request).await,
        Err(e) => Err(e),
    };
    match answer {
        Ok(response) if response.status().is_success() => {
            let _ = response.into_body().collect().await; // the body is the session
            Outcome::Admitted
        }
        _ => Outcome::Shed {
            waited: started.elapsed(),
        },
    }
}

async fn load<Svc, RB>(
    service: Svc,
    idle: usize,
    held_now: impl Fn() -> usize,
) -> (Vec<Outcome>, usize)
where
    Svc: Service<Request<Full<Bytes>>, Response = Response<RB>> + Clone + Send + 'static,
    Svc::Future: Send,
    Svc::Error: Send,
    RB: http_body::Body + Send + 'static,
    RB::Data: Send,
    RB::Error: Send,
{
    // The idle connections: ready, never called, kept for the whole run.
    let mut idle_services = Vec::new();
    for _ in 0..idle {
        let mut clone = service.clone();
        let _ = clone.ready().await;
        idle_services.push(clone);
    }
    let held_by_idle = held_now();

    let start = tokio::time::Instant::now();
    let mut tasks = Vec::new();
    for wave in 0..WAVES {
        tokio::time::sleep_until(start + WAVE_GAP * u32::try_from(wave).unwrap()).await;
        for i in 0..PER_WAVE {
            let path = if i % 4 == 3 { "/mirror" } else { "/upload" };
            tasks.push(tokio::spawn(one(service.clone(), path)));
        }
    }
    let mut outcomes = Vec::new();
    for task in tasks {
        outcomes.push(task.await.unwrap());
    }
    drop(idle_services);
    (outcomes, held_by_idle)
}

/// Runs the load through `stack` with `idle` services made ready and never called.
/// Call inside a current-thread Tokio runtime with a paused clock.
pub async fn run(stack: Stack, idle: usize) -> Figures {
    let handler = Handler::default();
    let (outcomes, held_by_idle) = match stack {
        Stack::Admit => {
            let gate = admit_tokio::gate::<Route>(CAPACITY)
                .max_units(2)
                .wait_budget(WAIT_BUDGET)
                .build()
                .unwrap();
            let service = ServiceBuilder::new()
                .layer(AdmitLayer::new(
                    gate.clone(),
                    |head: &http::request::Parts| {
                        let route = route_of(head.uri.path());
                        Decision::admit(units(route), route)
                    },
                ))
                .service(handler.service());
            load(service, idle, || gate.in_use()).await
        }
        Stack::ConcurrencyLimit => {
            let semaphore = Arc::new(tokio::sync::Semaphore::new(CAPACITY));
            let service = ServiceBuilder::new()
                .load_shed()
                .layer(GlobalConcurrencyLimitLayer::with_semaphore(Arc::clone(
                    &semaphore,
                )))
                .service(handler.service());
            load(service, idle, || CAPACITY - semaphore.available_permits()).await
        }
    };
    let admitted = outcomes.iter().filter(|o| **o == Outcome::Admitted).count();
    let shed_at_once = outcomes
        .iter()
        .filter(|o| matches!(o, Outcome::Shed { waited } if waited.is_zero()))
        .count();
    Figures {
        stack,
        idle,
        admitted,
        shed: outcomes.len() - admitted,
        shed_at_once,
        peak_units: handler.peak.load(Ordering::SeqCst),
        held_by_idle,
    }
}

impl fmt::Display for Figures {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = match self.stack {
            Stack::Admit => "AdmitLayer (budget 2.5s)",
            Stack::ConcurrencyLimit => "LoadShed + ConcurrencyLimit",
        };
        write!(
            f,
            "| {name} | {} | {} | {} ({} at once) | {}/{CAPACITY} | {}/{CAPACITY} |",
            self.idle,
            self.admitted,
            self.shed,
            self.shed_at_once,
            self.peak_units,
            self.held_by_idle
        )
    }
}

#[allow(dead_code)] // `main` is not used when the tests include this file
fn main() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap();
    println!(
        "{WAVES} waves of {PER_WAVE} requests, {} s apart; every 4th a mirror (2 units), the rest 1; \
         hold {} s; capacity {CAPACITY} units; wait budget {} s\n",
        WAVE_GAP.as_secs(),
        HOLD.as_secs(),
        WAIT_BUDGET.as_secs_f64()
    );
    println!("| middleware | idle ready services | admitted | shed | peak units in use | capacity held by idle services |");
    println!("|---|---|---|---|---|---|");
    for idle in [0, 2] {
        for stack in [Stack::Admit, Stack::ConcurrencyLimit] {
            println!("{}", runtime.block_on(run(stack, idle)));
        }
    }
}
