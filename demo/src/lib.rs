//! The `admit` demo: a real upload server behind an admission gate, a Prometheus
//! `/metrics` endpoint, and a load generator that sends it more than it can hold.
//!
//! `cargo run -p admit-demo` runs [`run_blocking`] with
//! [`Config::default`]: it derives the gate's capacity from a memory budget, starts
//! the server on an ephemeral loopback port, sends a burst of uploads in waves (some
//! clients hanging up while parked), and prints a [`Report`] whose checks decide the
//! exit code. The integration test calls [`run`] with a short [`Config`].
//!
//! The parts, in the order a reader may want them:
//!
//! - [`server`]: the handlers (`gate.acquire(units, route).until(client_gone)`, then
//!   the staging buffers) and the HTTP mapping of each [`GateError`](admit::GateError);
//! - [`load`]: the clients, the in-use sampler and the progress line;
//! - [`report`]: the summary and the checks.

/// The README's examples, compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
pub struct ReadmeDoctests;

pub mod client;
pub mod config;
pub mod load;
pub mod report;
pub mod scrape;
pub mod server;

use std::sync::Arc;
use std::time::{Duration, Instant};

use admit::{Capacity, Source};
use admit_metrics::MetricsObserver;
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder};
use tokio::net::TcpListener;

pub use config::{Command, Config, USAGE};
pub use report::{Check, ClosedProbe, Report, ServerCounts};
pub use scrape::Scrape;
pub use server::Route;

use crate::config::bytes;
use crate::server::{App, Server, ServerStats, MAX_UNITS, METRICS_PREFIX};

/// A failure that stopped the run before it could check anything.
pub type RunError = Box<dyn std::error::Error + Send + Sync>;

/// Histogram buckets of `hold_seconds` and `wait_seconds`, so PromQL's
/// `histogram_quantile` works on them.
pub const SECONDS_BUCKETS: &[f64] = &[
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0,
];

/// [`run`] on a new multi-threaded Tokio runtime (two workers).
///
/// # Errors
///
/// As [`run`], or if the runtime cannot start.
pub fn run_blocking(config: Config) -> Result<Report, RunError> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    runtime.block_on(run(config))
}

/// Runs the demo: gate, server, load, checks. Prints as it goes when
/// `config.verbose`. Must be called inside a Tokio runtime with time and I/O
/// enabled.
///
/// # Errors
///
/// A configuration the gate rejects, a recorder that cannot be installed, a port
/// that cannot be bound, or a server that does not answer its first scrape. Failed
/// checks are not errors: they are in the [`Report`].
pub async fn run(config: Config) -> Result<Report, RunError> {
    config.validate()?;
    let started = Instant::now();
    let say = |line: String| {
        if config.verbose {
            println!("{line}");
        }
    };

    // 1. The recorder first: the gate's observer resolves its metric handles when
    //    the gate is built, against the recorder current then.
    let recorder = PrometheusBuilder::new()
        .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), SECONDS_BUCKETS)?
        .build_recorder();
    let prometheus = recorder.handle();

    // 2. The capacity: a memory budget over the staging buffer one session holds,
    //    floored at the largest request (a mirror holds two sessions at once).
    let capacity = match config.capacity {
        Some(units) => Capacity::from(units),
        None => Capacity::from_memory_budget(config.memory_budget, config.session_buffer),
    };
    let builder = admit_tokio::gate::<Route>(capacity)
        .max_units(MAX_UNITS)
        .wait_budget(config.wait_budget)
        .observer(MetricsObserver::new(METRICS_PREFIX));
    let resolved = builder.resolved_capacity();
    let (gate, local_recorder) = if config.global_recorder {
        metrics::set_global_recorder(recorder)
            .map_err(|e| format!("installing the Prometheus recorder: {e}"))?;
        (builder.build()?, None)
    } else {
        let gate = metrics::with_local_recorder(&recorder, || builder.build())?;
        (gate, Some(recorder))
    };

    say("admit demo: an upload server behind an admission gate, and a burst of clients".into());
    say(String::new());
    say(format!(
        "  capacity  {}",
        derivation(&config, capacity, resolved)
    ));
    say(format!(
        "            cgroup memory limit: {}",
        match admit::process_memory_limit() {
            Some(limit) => format!(
                "{} (found; a server could budget from it, this demo uses its own budget)",
                bytes(limit)
            ),
            None => "none found".into(),
        }
    ));
    let (min, max) = gate.retry_after_bounds();
    say(format!(
        "  gate      wait budget {}, Retry-After {}..{}; POST /upload = 1 unit, POST /mirror = 2 units",
        secs(config.wait_budget),
        secs(min),
        secs(max),
    ));

    // 3. The server.
    let listener = TcpListener::bind(("127.0.0.1", config.port)).await?;
    let stats = Arc::new(ServerStats::default());
    let app = Arc::new(App {
        gate: gate.clone(),
        stats: Arc::clone(&stats),
        prometheus,
        session_buffer: usize::try_from(config.session_buffer)?,
        hold: config.hold,
    });
    let server = Server::start(listener, app)?;
    let addr = server.addr;
    say(format!(
        "  server    http://{addr}  (POST /upload, POST /mirror, GET /metrics)"
    ));
    say(format!(
        "  load      {} clients in {} wave(s) {} apart, {} of them hang up after {}; {} bodies, {} processing",
        config.clients,
        config.waves,
        secs(config.wave_gap()),
        config.disconnects,
        secs(config.disconnect_after),
        bytes(config.payload as u64),
        secs(config.hold),
    ));

    // 4. Before any load: every source's shed counter is already there, at 0.
    let before = scrape(addr).await?;
    say(format!(
        "  /metrics  before the first shed: {}",
        Route::ALL
            .iter()
            .map(|&r| format!(
                "shed_total{{source=\"{}\"}} {}",
                r.label(),
                before
                    .shed_total(r)
                    .map_or_else(|| "missing".into(), |v| v.to_string())
            ))
            .collect::<Vec<_>>()
            .join(", ")
    ));
    say(String::new());

    // 5. The load.
    let observed = load::run(&config, addr, &gate).await;

    // 6. Settle: every handler done, every unit back (bounded).
    let settle_until = Instant::now() + Duration::from_secs(5);
    while (gate.in_use() > 0 || gate.waiters() > 0) && Instant::now() < settle_until {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let in_use_at_end = gate.in_use();
    let after = scrape(addr).await?;

    // 7. A closed gate answers 503 without Retry-After, and counts no shed.
    gate.close();
    let closed_probe = match client::post(addr, Route::Upload.path(), b"x").await {
        Ok(response) => ClosedProbe {
            status: response.status,
            retry_after: response.header("retry-after").map(str::to_owned),
            shed_total_after: scrape(addr).await?.shed_total_sum(),
        },
        Err(e) => return Err(format!("probing the closed gate: {e}").into()),
    };

    server.stop().await;
    drop(local_recorder);

    let report = Report::new(
        &config,
        gate.capacity(),
        &observed,
        ServerCounts::from(&*stats),
        stats.waits(),
        in_use_at_end,
        before,
        after,
        closed_probe,
        started.elapsed(),
    );
    if config.verbose {
        println!("\n{report}");
    }
    Ok(report)
}

async fn scrape(addr: std::net::SocketAddr) -> Result<Scrape, RunError> {
    let response = client::get(addr, "/metrics")
        .await
        .map_err(|e| format!("scraping /metrics: {e}"))?;
    if response.status != 200 {
        return Err(format!("scraping /metrics: status {}", response.status).into());
    }
    Ok(Scrape::parse(String::from_utf8(response.body)?))
}

/// How the capacity came about, for the header.
fn derivation(config: &Config, capacity: Capacity, resolved: usize) -> String {
    if config.capacity.is_some() {
        return format!("{resolved} units (given with --capacity)");
    }
    let derived = capacity.units();
    let floor = if derived < MAX_UNITS {
        format!("raised to the max_units floor of {MAX_UNITS} (a mirror holds 2 sessions at once)")
    } else {
        format!("max_units floor {MAX_UNITS} not needed")
    };
    format!(
        "memory budget {} / session buffer {} = {derived} units; {floor} -> {resolved} units",
        bytes(config.memory_budget),
        bytes(config.session_buffer),
    )
}

/// `2s`, `250ms`, `1.5s`.
fn secs(d: Duration) -> String {
    if d < Duration::from_secs(1) {
        format!("{}ms", d.as_millis())
    } else if d.subsec_millis() == 0 {
        format!("{}s", d.as_secs())
    } else {
        format!("{:.1}s", d.as_secs_f64())
    }
}
