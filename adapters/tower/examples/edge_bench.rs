//! The server of `benches/edge.sh`: one axum route that reads a request body
//! (1 KiB in the script's load), behind one of the stacks the script compares,
//! on one Tokio worker, until killed.
//!
//! ```sh
//! cargo run --release -p admit-tower --example edge_bench -- STACK [ADDR]
//! ```
//!
//! `ADDR` defaults to `127.0.0.1:3917`. The route is `POST /upload`; `GET /metrics`
//! renders the Prometheus recorder where one is installed (bypassed by the gate),
//! saying on stderr how long the render took. Every gate and limit is far larger
//! than the load's connections, so nothing ever waits or is shed: the fast path.
//!
//! STACK is a base, then any modifiers, each after a `+`:
//!
//! - `shed`: tower's `LoadShed` + `GlobalConcurrencyLimit` (an overloaded limit
//!   answers `503` through axum's `HandleErrorLayer`), served with
//!   `into_make_service()`. No modifiers.
//! - `admit`: `AdmitLayer` as the docs wire it: `PeerWatch` connect info
//!   (`into_make_service_with_connect_info::<PeerWatch>()`), the progress rule on
//!   (the default).
//! - `admit-noprog`: the same with `.without_progress()`.
//! - `admit-unwatched`: the rule on, no `PeerWatch`: served with
//!   `into_make_service()`, `.allow_unwatched()`.
//!
//! Modifiers (on an `admit` base):
//!
//! - `+metrics`: `MetricsObserver` on the gate, and a Prometheus recorder installed
//!   first with `PrometheusBuilder::new().install_recorder()`, as the crate's
//!   README does; nothing else (no upkeep, nobody renders), unless:
//! - `+upkeep`: the exporter's upkeep (`PrometheusHandle::run_upkeep`: it drains
//!   the histograms' samples into their summaries) every 5 s on a task of the
//!   server's runtime, which is what `PrometheusBuilder::install` and `build`
//!   spawn (`install_recorder` leaves it to the caller); `+upkeep1`: every 1 s.
//! - `+thread`: the upkeep on a thread of its own instead of a task.
//! - `+buckets`: `set_buckets` (Prometheus histograms instead of summaries).
//!
//! Each upkeep says on stderr how long it took.

use std::time::{Duration, Instant};

use admit_tower::{AdmitLayer, Decision, PeerWatch};
use axum::body::Body;
use axum::error_handling::HandleErrorLayer;
use axum::http::{request::Parts, StatusCode};
use axum::routing::{get, post};
use axum::Router;
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};
use tower::limit::GlobalConcurrencyLimitLayer;
use tower::load_shed::LoadShedLayer;
use tower::ServiceBuilder;

admit::sources! {
    /// The one route.
    pub enum Route {
        /// `POST /upload`.
        Upload => "upload",
    }
}

/// Units of the gate and permits of the concurrency limit: far above the load's
/// 64 connections, so that nobody ever waits.
const CAPACITY: usize = 4096;
/// The most the handler reads of a body.
const BODY_LIMIT: usize = 64 << 10;
/// Buckets for `+buckets`: 100 µs to 10 s.
const BUCKETS: &[f64] = &[
    0.0001, 0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0,
];

/// The handler: reads the body within a limit, answers its length.
async fn upload(body: Body) -> String {
    let bytes = axum::body::to_bytes(body, BODY_LIMIT)
        .await
        .map_or(0, |b| b.len());
    format!("{bytes}\n")
}

fn decide(head: &Parts) -> Decision<Route> {
    match head.uri.path() {
        "/upload" => Decision::admit(1, Route::Upload),
        _ => Decision::Bypass,
    }
}

fn routes(metrics: Option<PrometheusHandle>) -> Router {
    let router = Router::new().route("/upload", post(upload));
    match metrics {
        Some(handle) => router.route(
            "/metrics",
            get(move || {
                let started = Instant::now();
                let text = handle.render();
                eprintln!("edge_bench: render took {:?}", started.elapsed());
                std::future::ready(text)
            }),
        ),
        None => router,
    }
}

/// Runs the exporter's upkeep, saying on stderr how long it took.
fn upkeep(handle: &PrometheusHandle) {
    let started = Instant::now();
    handle.run_upkeep();
    eprintln!("edge_bench: upkeep took {:?}", started.elapsed());
}

/// What a stack's name asks for.
#[derive(Debug, Default)]
struct Stack {
    base: String,
    metrics: bool,
    upkeep: Option<Duration>,
    thread: bool,
    buckets: bool,
}

impl Stack {
    fn parse(name: &str) -> Result<Self, String> {
        let mut parts = name.split('+');
        let mut stack = Self {
            base: parts.next().unwrap_or_default().to_owned(),
            ..Self::default()
        };
        if !["shed", "admit", "admit-noprog", "admit-unwatched"].contains(&stack.base.as_str()) {
            return Err(format!("unknown stack {name:?}"));
        }
        for modifier in parts {
            match modifier {
                "metrics" => stack.metrics = true,
                "upkeep" => stack.upkeep = Some(Duration::from_secs(5)),
                "upkeep1" => stack.upkeep = Some(Duration::from_secs(1)),
                "thread" => stack.thread = true,
                "buckets" => stack.buckets = true,
                _ => return Err(format!("unknown modifier {modifier:?} in {name:?}")),
            }
        }
        let tuned = stack.upkeep.is_some() || stack.thread || stack.buckets;
        if (stack.base == "shed" && stack.metrics) || (tuned && !stack.metrics) {
            return Err(format!(
                "{name:?}: metrics on an admit stack only, the rest with metrics"
            ));
        }
        Ok(stack)
    }

    /// Installs the recorder, and starts its upkeep, if asked.
    fn recorder(&self) -> Result<Option<PrometheusHandle>, Box<dyn std::error::Error>> {
        if !self.metrics {
            return Ok(None);
        }
        let mut builder = PrometheusBuilder::new();
        if self.buckets {
            builder = builder.set_buckets(BUCKETS)?;
        }
        let handle = builder.install_recorder()?;
        if let Some(every) = self.upkeep {
            let handle = handle.clone();
            if self.thread {
                std::thread::spawn(move || loop {
                    std::thread::sleep(every);
                    upkeep(&handle);
                });
            } else {
                tokio::spawn(async move {
                    loop {
                        tokio::time::sleep(every).await;
                        upkeep(&handle);
                    }
                });
            }
        }
        Ok(Some(handle))
    }
}

async fn serve(name: &str, addr: &str) -> Result<(), Box<dyn std::error::Error>> {
    let stack = Stack::parse(name)?;
    let listener = tokio::net::TcpListener::bind(addr).await?;
    if stack.base == "shed" {
        let app = routes(None).layer(
            ServiceBuilder::new()
                .layer(HandleErrorLayer::new(|_: tower::BoxError| async {
                    StatusCode::SERVICE_UNAVAILABLE
                }))
                .layer(LoadShedLayer::new())
                .layer(GlobalConcurrencyLimitLayer::new(CAPACITY)),
        );
        eprintln!("edge_bench: {name} on {addr}");
        axum::serve(listener, app.into_make_service()).await?;
        return Ok(());
    }
    // The recorder first, as an application does: the observer resolves its
    // handles against it when the gate is built.
    let handle = stack.recorder()?;
    let decide = decide as fn(&Parts) -> Decision<Route>;
    let builder = admit_tokio::gate(CAPACITY);
    let layer = if handle.is_some() {
        let gate = builder
            .observer(admit_metrics::MetricsObserver::new("edge"))
            .build()?;
        AdmitLayer::new(gate, decide)
    } else {
        AdmitLayer::new(builder.build()?, decide)
    };
    eprintln!("edge_bench: {name} on {addr}");
    match stack.base.as_str() {
        "admit-unwatched" => {
            let app = routes(handle).layer(layer.allow_unwatched());
            axum::serve(listener, app.into_make_service()).await?;
        }
        base => {
            let layer = if base == "admit-noprog" {
                layer.without_progress()
            } else {
                layer
            };
            let app = routes(handle).layer(layer);
            axum::serve(
                listener,
                app.into_make_service_with_connect_info::<PeerWatch>(),
            )
            .await?;
        }
    }
    Ok(())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let stack = args.next().ok_or(
        "usage: edge_bench STACK [ADDR]: STACK is shed, admit, admit-noprog or \
         admit-unwatched, an admit one followed by any of +metrics, +upkeep, +upkeep1, \
         +thread, +buckets",
    )?;
    let addr = args.next().unwrap_or_else(|| "127.0.0.1:3917".to_owned());
    // One worker; the server runs on it (not on the thread that blocks on it).
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        tokio::spawn(async move { serve(&stack, &addr).await.map_err(|e| e.to_string()) })
            .await
            .map_err(|e| e.to_string())?
    })?;
    Ok(())
}
