//! The `admit` demo: a real upload server behind an admission gate, a Prometheus
//! `/metrics` endpoint, and a load generator that sends it more than it can hold.
//!
//! `cargo run -p admit-demo` runs [`run_blocking`] with
//! [`Config::default`]: it derives the gate's capacity from a memory budget, starts
//! the server on an ephemeral loopback port, sends a burst of uploads in waves (some
//! clients hanging up while parked; beside them clients that stall, which the
//! layer's progress rule must cut, and slow ones it must not), prints a [`Report`]
//! whose checks decide the exit code. It does so twice ([`compare`]), with the same load: against a gate
//! with a fixed wait budget, then against one with an overload target too, and
//! prints a [`Comparison`] and draws both runs side by side as an SVG
//! ([`timeline`]). The integration test calls [`run`] and [`compare`] with a short
//! [`Config`].
//!
//! Both end with a shutdown as a server should have one ([`drain`]): the gate stops
//! admitting, the sessions in flight get a grace period to finish, and what the
//! period cut is printed per route.
//!
//! `cargo run -p admit-demo -- serve` runs the server alone ([`serve`]) until
//! interrupted, for curl or another load tool; then it stops admitting and drains.
//! With `--follow-memory-limit 30s` it resizes its gate as the container's memory
//! limit changes. `admit-demo load --target HOST:PORT` ([`remote_load`]) sends
//! such a server uploads from another process for a while and sums up the answers.
//!
//! The parts, in the order a reader may want them:
//!
//! - [`server`]: the routes behind `admit_tower::AdmitLayer`, the staging buffers,
//!   the accept loop with its `PeerWatch`;
//! - [`sessions`]: the OCI-style upload sessions that span requests, each holding
//!   its unit in a lease (`admit::Leases`) until it is finished, cancelled, or
//!   expires;
//! - [`load`]: the clients, the in-use sampler and the progress line;
//! - [`remote_load`]: `admit-demo load`, client loops against a server already
//!   running, and their summary;
//! - [`report`]: the summary and the checks;
//! - [`timeline`]: the run over time, as an SVG.

/// The README's examples, compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
pub struct ReadmeDoctests;

pub mod client;
pub mod config;
pub mod load;
pub mod remote_load;
pub mod report;
pub mod scrape;
pub mod server;
pub mod sessions;
pub mod timeline;

use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use admit::{Capacity, DrainTimeout, ShedReason, Source};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusRecorder};
use tokio::net::TcpListener;

pub use config::{Command, Config, OverloadTarget, Progress, LOAD_USAGE, USAGE};
pub use remote_load::{LoadConfig, LoadSummary};
pub use report::{Check, ClosedProbe, Comparison, Report, ServerCounts};
pub use scrape::Scrape;
pub use server::Route;

use crate::config::bytes;
use crate::server::{App, DemoObserver, Server, ServerStats, UploadGate, MAX_UNITS};
use crate::sessions::{IdMinter, SessionLeases};
use crate::timeline::Timeline;

/// A failure that stopped the run before it could check anything.
pub type RunError = Box<dyn std::error::Error + Send + Sync>;

/// Histogram buckets of `hold_seconds` and `wait_seconds`, so PromQL's
/// `histogram_quantile` works on them.
pub const SECONDS_BUCKETS: &[f64] = &[
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0,
];

/// [`compare`] on a new multi-threaded Tokio runtime (two workers).
///
/// # Errors
///
/// As [`compare`], or if the runtime cannot start.
pub fn run_blocking(config: Config) -> Result<Comparison, RunError> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    runtime.block_on(compare(config))
}

/// The gate, the server and what they share, as [`run`] and [`serve`] start them.
struct Setup {
    gate: UploadGate,
    stats: Arc<ServerStats>,
    /// The upload sessions' lease table.
    sessions: SessionLeases,
    server: Server,
    /// Kept alive when the gate reports to a local recorder.
    local_recorder: Option<PrometheusRecorder>,
    /// The timeline's sampler and its stop flag.
    timeline: (tokio::task::JoinHandle<Timeline>, Arc<AtomicBool>),
}

/// Recorder, gate, server (with the progress rule of a run, or of `serve`),
/// timeline; prints the header when `config.verbose`.
async fn start(config: &Config, title: &str, serve: bool) -> Result<Setup, RunError> {
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
    let stats = Arc::new(ServerStats::default());
    let mut observer = DemoObserver::new(Arc::clone(&stats));
    if config.follow_memory_limit.is_some() && config.verbose {
        observer = observer.announcing_resizes();
    }
    let mut builder = admit_tokio::gate::<Route>(capacity)
        .max_units(MAX_UNITS)
        .wait_budget(config.wait_budget)
        .observer(observer);
    if let Some(max_waiters) = config.max_waiters {
        builder = builder.max_waiters(max_waiters);
    }
    if !config.memory_watch {
        builder = builder.without_memory_watch();
    }
    if let Some(target) = config.overload_target() {
        builder = builder.overload_target(target);
    }
    let resolved = builder.resolved_capacity();
    let (gate, local_recorder) = if config.global_recorder {
        metrics::set_global_recorder(recorder)
            .map_err(|e| format!("installing the Prometheus recorder: {e}"))?;
        (builder.build()?, None)
    } else {
        let gate = metrics::with_local_recorder(&recorder, || builder.build())?;
        (gate, Some(recorder))
    };

    say(title.to_owned());
    say(String::new());
    say(format!(
        "  capacity  {}",
        derivation(config, capacity, resolved)
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
        "  gate      wait budget {}, Retry-After {}..{}, {}; POST /upload = 1 unit, POST /mirror = 2 units, POST /v2/uploads = 1 unit",
        secs(config.wait_budget),
        secs(min),
        secs(max),
        match config.max_waiters {
            Some(n) => format!("at most {n} parked (then shed at once: queue full)"),
            None => "no bound on parked requests".into(),
        },
    ));
    say(match config.overload_target() {
        None => "            no overload target: every wait may last the whole budget".into(),
        Some(target) => format!(
            "            overload target {}: overloaded once the shortest wait of an interval \
             stays above it, until two intervals see the queue empty; then waits are capped \
             at {}, and \
             a request the estimate says cannot make it is shed at arrival",
            secs(target),
            secs(target * 2),
        ),
    });

    // 3. The server, and the timeline's sampler.
    say(format!(
        "  sessions  POST /v2/uploads leases its unit to the session until PUT, DELETE, or {} idle",
        secs(config.idle_limit)
    ));
    let progress = config.progress(serve);
    say(progress_header(progress));
    let listener = TcpListener::bind(("127.0.0.1", config.port)).await?;
    let sessions = admit_tokio::leases(&gate, config.idle_limit);
    let app = Arc::new(App {
        gate: gate.clone(),
        stats: Arc::clone(&stats),
        prometheus,
        session_buffer: usize::try_from(config.session_buffer)?,
        hold: config.hold,
        sessions: sessions.clone(),
        ids: IdMinter::default(),
    });
    let server = Server::start_with_progress(listener, app, progress.rule())?;
    let stop = Arc::new(AtomicBool::new(false));
    let sampler = tokio::spawn(timeline::record(
        gate.clone(),
        Arc::clone(&stats),
        TIMELINE_INTERVAL,
        Arc::clone(&stop),
    ));
    Ok(Setup {
        gate,
        stats,
        sessions,
        server,
        local_recorder,
        timeline: (sampler, stop),
    })
}

/// The timeline's sampling interval.
pub const TIMELINE_INTERVAL: Duration = Duration::from_millis(100);

impl Setup {
    /// Stops the sampler and returns what it recorded.
    async fn finish_timeline(&mut self) -> Option<Timeline> {
        self.timeline.1.store(true, Ordering::Relaxed);
        (&mut self.timeline.0).await.ok()
    }
}

/// Writes `runs` side by side as an SVG where `config.plot` says, if anywhere.
fn plot(config: &Config, runs: &[(&str, &Timeline)]) {
    let Some(path) = &config.plot else {
        return;
    };
    match timeline::write_svg(path, runs) {
        Ok(()) if config.verbose => println!("  picture   {}", path.display()),
        Ok(()) => {}
        Err(e) => eprintln!("admit-demo: writing {}: {e}", path.display()),
    }
}

/// The gate's title: `fixed wait budget`, or `overload target 200ms`.
fn gate_title(config: &Config) -> String {
    match config.overload_target() {
        None => "fixed wait budget".into(),
        Some(target) => format!("overload target {}", secs(target)),
    }
}

/// Runs the same load twice, one run after the other: against a gate with the
/// fixed wait budget alone, then (unless `config.overload_target` is
/// [`Off`](OverloadTarget::Off)) against one with the overload target as well.
/// Prints both summaries and a comparison when `config.verbose`, and draws both
/// runs side by side where `config.plot` says. Two runs report to local recorders
/// (one process has one global recorder), whatever `config.global_recorder` says.
///
/// # Errors
///
/// As [`run`].
pub async fn compare(config: Config) -> Result<Comparison, RunError> {
    config.validate()?;
    let two = config.overload_target().is_some();
    let global_recorder = config.global_recorder && !two;
    let fixed = Config {
        overload_target: OverloadTarget::Off,
        global_recorder,
        ..config.clone()
    };
    let runs = if two { "1/2" } else { "1/1" };
    let fixed = run_as(fixed, runs).await?;
    let target = if two {
        if config.verbose {
            println!();
        }
        let target = Config {
            global_recorder: false,
            ..config.clone()
        };
        Some(run_as(target, "2/2").await?)
    } else {
        None
    };
    let comparison = Comparison { fixed, target };
    let titles: Vec<String> = comparison.runs().map(Report::title).collect();
    let timelines: Vec<(&str, &Timeline)> = comparison
        .runs()
        .zip(&titles)
        .filter_map(|(r, title)| Some((title.as_str(), r.timeline.as_ref()?)))
        .collect();
    if config.verbose {
        println!();
    }
    plot(&config, &timelines);
    if config.verbose {
        println!("\n{comparison}");
    }
    Ok(comparison)
}

/// Runs the demo once: gate (with `config`'s overload target, if any), server,
/// load, checks. Prints as it goes when `config.verbose`; draws nothing (the
/// [`Report`] has the timeline; [`compare`] draws). Must be called inside a Tokio
/// runtime with time and I/O enabled.
///
/// # Errors
///
/// A configuration the gate rejects, a recorder that cannot be installed, a port
/// that cannot be bound, or a server that does not answer its first scrape. Failed
/// checks are not errors: they are in the [`Report`].
pub async fn run(config: Config) -> Result<Report, RunError> {
    run_as(config, "1/1").await
}

/// [`run`], titled as run `which` (`1/2`) of a comparison.
async fn run_as(config: Config, which: &str) -> Result<Report, RunError> {
    config.validate()?;
    let started = Instant::now();
    let say = |line: String| {
        if config.verbose {
            println!("{line}");
        }
    };
    let mut setup = start(
        &config,
        &format!(
            "admit demo, run {which}: an upload server behind an admission gate ({}), and a burst of clients",
            gate_title(&config)
        ),
        false,
    )
    .await?;
    let (gate, stats, addr) = (
        setup.gate.clone(),
        Arc::clone(&setup.stats),
        setup.server.addr,
    );
    say(format!(
        "  server    http://{addr}  (POST /upload, POST /mirror, POST /v2/uploads, PATCH/PUT/DELETE /v2/uploads/<id>, GET /metrics)"
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
    say(format!(
        "            {} of them run an upload session: POST, {} PATCHes {} apart, then PUT (3 in 5), DELETE (1 in 5), or go quiet (1 in 5)",
        config.sessions(),
        load::SESSION_CHUNKS,
        secs(config.session_pause()),
    ));
    if config.stallers() + config.slow_clients() > 0 {
        let tricklers = config.tricklers();
        say(format!(
            "            beside them, placed first: {} stallers ({tricklers} POST /upload trickling 1 B/s, {} session PATCHes stalled after {} B), {} slow clients (POST /upload, {} at {}/s)",
            config.stallers(),
            config.stallers() - tricklers,
            load::STALLED_PATCH_SENT,
            config.slow_clients(),
            bytes(config::SLOW_BODY as u64),
            bytes(config::SLOW_RATE as u64),
        ));
    }

    // 4. Before any load: every source's shed counter is already there, at 0, for
    //    each reason.
    let before = scrape(addr).await?;
    say(format!(
        "  /metrics  before the first shed: {} (each summed over the reasons {})",
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
            .join(", "),
        ShedReason::ALL
            .iter()
            .map(|r| r.label())
            .collect::<Vec<_>>()
            .join(", "),
    ));
    say(String::new());

    // 5. The load.
    let observed = load::run(&config, addr, &gate).await;

    // 6. Settle: every parked request (a hang-up the server has yet to notice) has
    //    ended, and so has every upload session, the quiet ones by expiring (each
    //    client that went quiet came back past the idle limit: none should be left)
    //    (bounded).
    let settle_until = Instant::now() + Duration::from_secs(5).max(config.idle_limit * 2);
    while (gate.waiters() > 0 || !setup.sessions.is_empty()) && Instant::now() < settle_until {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let live_after_idle = setup.sessions.len();
    let units_after_idle = stats.in_use(Route::Session);

    // 7. Shutdown: stop admitting, end the idle upload sessions within the grace
    //    period, give the sessions in flight (the last responses still being
    //    written) the grace period, and say what it cut.
    let sessions = setup.sessions.drain(config.grace);
    let drained = drain(&gate, sessions, config.grace).await;
    let in_use_at_end = gate.in_use();
    let after = scrape(addr).await?;
    let timeline = setup.finish_timeline().await;

    // 8. The closed gate answers 503 without Retry-After, and counts no shed.
    let closed_probe = match client::post(addr, Route::Upload.path(), b"x").await {
        Ok(response) => ClosedProbe {
            status: response.status,
            retry_after: response.header("retry-after").map(str::to_owned),
            shed_total_after: scrape(addr).await?.shed_total_sum(),
        },
        Err(e) => return Err(format!("probing the closed gate: {e}").into()),
    };

    setup.server.stop().await;
    drop(setup.local_recorder);
    let sessions = sessions::SessionEnds {
        live_after_idle,
        units_after_idle,
        ..stats.sessions.counts()
    };

    let report = Report::new(
        &config,
        gate.capacity(),
        &observed,
        ServerCounts::from(&*stats),
        stats.waits(),
        stats.shed_waits(),
        timeline,
        in_use_at_end,
        before,
        after,
        closed_probe,
        drained,
        sessions,
        started.elapsed(),
    );
    if config.verbose {
        println!("\n{report}");
    }
    Ok(report)
}

/// What [`serve`] saw when it stopped.
#[derive(Debug, Clone)]
pub struct Served {
    /// Where it listened.
    pub addr: SocketAddr,
    /// Requests admitted, and shed, over its life.
    pub admitted: usize,
    /// Requests shed over its life.
    pub shed: usize,
    /// The drain at the end.
    pub drained: Drained,
    /// The run over time.
    pub timeline: Option<Timeline>,
}

/// Runs the server alone until `shutdown` completes (the binary: Ctrl-C or
/// SIGTERM), printing its address and its `/metrics` URL; then stops admitting and
/// drains (see [`drain`]), and prints what the grace period cut. With
/// `config.follow_memory_limit`, a task re-reads the cgroup memory limit at that
/// interval and resizes the gate to half of it over the session buffer
/// ([`admit_tokio::spawn_memory_follower`]). Must be called inside a Tokio runtime
/// with time and I/O enabled.
///
/// `ready` receives the address once the server listens.
///
/// # Errors
///
/// As [`run`].
pub async fn serve(
    config: Config,
    ready: Option<tokio::sync::oneshot::Sender<SocketAddr>>,
    shutdown: impl Future<Output = ()>,
) -> Result<Served, RunError> {
    config.validate_serve()?;
    let mut setup = start(
        &config,
        "admit demo: an upload server behind an admission gate (serve: no load generator)",
        true,
    )
    .await?;
    let addr = setup.server.addr;
    if config.verbose {
        println!(
            "  server    http://{addr}  (POST /upload, POST /mirror, POST /v2/uploads, PATCH/PUT/DELETE /v2/uploads/<id>)"
        );
        println!("  /metrics  http://{addr}/metrics");
        println!(
            "  try       curl -i -H 'expect: 100-continue' --data-binary @some-file http://{addr}/upload"
        );
        println!(
            "            Ctrl-C or SIGTERM stops admitting, drains (at most {}) and exits",
            secs(config.grace)
        );
    }
    let follower = config.follow_memory_limit.map(|every| {
        if config.verbose {
            println!(
                "  resize    every {}: half of the cgroup memory limit ({}) / session buffer {}",
                secs(every),
                admit::process_memory_limit().map_or_else(|| "none found now".into(), bytes),
                bytes(config.session_buffer),
            );
        }
        let session_buffer = config.session_buffer;
        admit_tokio::spawn_memory_follower(&setup.gate, every, move |limit| {
            Capacity::from_memory_budget(limit / 2, session_buffer)
        })
    });
    if let Some(ready) = ready {
        let _ = ready.send(addr);
    }
    shutdown.await;
    if config.verbose {
        println!(
            "\n  stopping  the gate is closed: new uploads get 503 without Retry-After; \
             the sessions in flight have {} to finish",
            secs(config.grace)
        );
    }
    let sessions = setup.sessions.drain(config.grace);
    let drained = drain(&setup.gate, sessions, config.grace).await;
    if config.verbose {
        println!("  drained   {drained}");
    }
    if let Some(follower) = follower {
        follower.abort(); // it would end at its next reading: the gate is closed
    }
    let timeline = setup.finish_timeline().await;
    if let Some(timeline) = &timeline {
        plot(
            &config,
            &[(&format!("serve: {}", gate_title(&config)), timeline)],
        );
    }
    setup.server.stop().await;
    drop(setup.local_recorder);
    Ok(Served {
        addr,
        admitted: setup.stats.admitted.load(Ordering::Relaxed),
        shed: setup.stats.busy_total(),
        drained,
        timeline,
    })
}

/// What the shutdown [`drain`] saw: every unit back, or what the grace period cut.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Drained {
    /// The grace period given.
    pub grace: Duration,
    /// How long the drain waited.
    pub waited: Duration,
    /// `Err`: the grace period ended first, with these units still held per route.
    pub outcome: Result<(), DrainTimeout<Route>>,
}

impl Drained {
    /// Whether every unit came back within the grace period.
    #[must_use]
    pub fn is_complete(&self) -> bool {
        self.outcome.is_ok()
    }

    /// Units still held when the grace period ended, per route (empty when
    /// complete).
    #[must_use]
    pub fn held(&self) -> &[(Route, usize)] {
        self.outcome
            .as_ref()
            .map_or_else(|cut| cut.held(), |()| &[])
    }
}

impl std::fmt::Display for Drained {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.outcome {
            Ok(()) => write!(
                f,
                "every unit back after {} (grace period {})",
                secs(self.waited),
                secs(self.grace)
            ),
            Err(cut) => write!(
                f,
                "the grace period ({}) cut {} units still held: {} (those sessions are cut off)",
                secs(self.grace),
                cut.units(),
                cut.held()
                    .iter()
                    .map(|(route, units)| format!("{} {units}", route.label()))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }
    }
}

/// Shuts the gate down: [`Gate::drain`](admit::Gate::drain) closes it (parked and
/// new requests get `503` without `Retry-After`; no shed is counted), then waits
/// until every unit is back or `grace` has passed on the gate's clock, and reports
/// which it was and, if cut, what was still held per route. `sessions`, the upload
/// sessions' drain, is awaited first: the idle ones end by the grace's end, before
/// the gate's drain counts what is left.
pub async fn drain(
    gate: &UploadGate,
    sessions: impl core::future::Future<Output = ()>,
    grace: Duration,
) -> Drained {
    let started = tokio::time::Instant::now();
    let requests = gate.drain(grace);
    sessions.await;
    let outcome = requests.await;
    Drained {
        grace,
        waited: started.elapsed(),
        outcome,
    }
}

/// The sheds of the run by reason, as `wait_budget N, queue_full M, overload O,
/// hopeless H`: every reason of [`ShedReason::ALL`].
#[must_use]
pub fn by_reason(count: impl Fn(ShedReason) -> usize) -> String {
    ShedReason::ALL
        .iter()
        .map(|&reason| format!("{} {}", reason.label(), count(reason)))
        .collect::<Vec<_>>()
        .join(", ")
}

async fn scrape(addr: SocketAddr) -> Result<Scrape, RunError> {
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

/// The header's `progress` line: the rule's limits, or that it is off.
fn progress_header(progress: config::Progress) -> String {
    match progress.limits() {
        None => "  progress  off: a client that stalls keeps its units until it hangs up".into(),
        Some(l) => format!(
            "  progress  a watched request (an upload, a session's PATCH) is cut, 408 + Connection: close, when its body idles {}, or sends under {}/s past a grace of {}, or its response goes unread {}; under full pressure {}, {}, {}",
            secs(l.idle.0),
            bytes(l.min_rate),
            secs(l.grace.0),
            secs(l.response_idle.0),
            secs(l.idle.1),
            secs(l.grace.1),
            secs(l.response_idle.1),
        ),
    }
}

/// `2s`, `250ms`, `1.5s`.
pub(crate) fn secs(d: Duration) -> String {
    if d < Duration::from_secs(1) {
        format!("{}ms", d.as_millis())
    } else if d.subsec_millis() == 0 {
        format!("{}s", d.as_secs())
    } else {
        format!("{:.1}s", d.as_secs_f64())
    }
}
