//! The demo against its real server on loopback: a short run whose summary
//! invariants and scraped metrics are checked, a short comparison of the fixed wait
//! budget with an overload target (with stallers and slow clients beside the
//! others: the stallers cut, nobody else), the same stallers kept by a run without
//! the progress rule (its check fails), the server's answers to a hang-up and to a
//! shed with the gate held full by the test itself, and the binary's exit code.
//!
//! Every assertion is an invariant or follows from the configuration, never from
//! timing: a shed is asserted only where the wait budget is far shorter than the
//! time the units are held, with more demand than capacity; the comparison is
//! asserted as ratios to the wait budget and between the runs, not as counts.

use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::Duration;

use admit::{CutReason, LeaseEnd, ShedReason, Source};
use admit_demo::client::Response;
use admit_demo::load::StallKind;
use admit_demo::server::{App, DemoObserver, Server, ServerStats, UploadGate, MAX_UNITS};
use admit_demo::sessions::{digest, IdMinter, SessionLeases, UPLOADS};
use admit_demo::{Comparison, Config, OverloadTarget, Progress, Report, Route, Scrape};
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle, PrometheusRecorder};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// The tests start servers and clients; one at a time keeps a loaded 2-core
/// machine from stretching any of them.
fn serial() -> MutexGuard<'static, ()> {
    static SERIAL: Mutex<()> = Mutex::new(());
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// Capacity 2 from a memory budget; every wave's hold (3 s) far longer than the
/// wait budget (1 s): whoever parks behind the first two admitted is shed. The
/// fixed wait budget alone; no stallers or slow clients (no room for them beside
/// a mirror).
fn short_config() -> Config {
    Config {
        memory_budget: 2 << 20,
        session_buffer: 1 << 20,
        wait_budget: Duration::from_secs(1),
        overload_target: OverloadTarget::Off,
        hold: Duration::from_secs(3),
        clients: 10,
        disconnects: 2,
        disconnect_after: Duration::from_millis(100),
        waves: 1,
        payload: 16 << 10,
        global_recorder: false,
        verbose: false,
        plot: None,
        ..Config::default()
    }
}

#[test]
fn a_short_run_holds_every_invariant() {
    let _serial = serial();
    let config = short_config();
    let report = runtime().block_on(admit_demo::run(config.clone())).unwrap();
    let all = format!("{report}");

    assert!(report.passed(), "{all}");
    assert_eq!(report.capacity, 2, "2 MiB / 1 MiB: {all}");
    assert_eq!(report.clients, config.clients);
    assert_eq!(
        report.admitted + report.shed_total() + report.hung_up,
        config.clients,
        "{all}"
    );
    assert_eq!(report.hung_up, config.disconnects, "{all}");
    assert!(
        report.failures.is_empty() && report.unavailable == 0,
        "{all}"
    );
    // 8 requests (10 units) for 2 units held 3 s with a 1 s budget: the first to
    // arrive finds the gate empty and is admitted; whoever parks behind it within
    // 2 s is shed. (Not `admitted >= 2`: a mirror arriving first fills the gate.)
    assert!(report.admitted >= 1, "{all}");
    assert!(report.shed_total() > 0, "{all}");

    // Never over capacity, sampled and scraped; back to 0 at the end.
    assert!(
        report.peak_in_use <= 2 && report.peak_in_use_scraped <= 2.0,
        "{all}"
    );
    assert_eq!(report.in_use_at_end, 0);

    // Before the load: both sources' series exist at 0, the capacity gauge is set.
    for &route in Route::ALL {
        assert_eq!(report.before.shed_total(route), Some(0.0), "{route:?}");
    }
    assert_eq!(report.before.metric("capacity_units"), Some(2.0));
    assert_eq!(report.before.metric("units_in_use"), Some(0.0));

    // After: per source, the counter is exactly the 503s the clients saw and the
    // server answered; hang-ups are in none of them.
    for &route in Route::ALL {
        let i = Route::ALL.iter().position(|&r| r == route).unwrap();
        assert_eq!(
            report.after.shed_total(route),
            Some(report.shed[i] as f64),
            "{route:?}: {all}"
        );
        assert_eq!(report.server.busy[i], report.shed[i], "{route:?}: {all}");
    }
    assert_eq!(report.after.metric("units_in_use"), Some(0.0));
    assert_eq!(report.after.metric("capacity_units"), Some(2.0));
    let admitted = report.server.admitted as f64;
    assert_eq!(report.after.metric("hold_seconds_count"), Some(admitted));
    assert_eq!(report.after.sum("wait_seconds_count", &[]), Some(admitted));
    // A hang-up ends as Cancelled (the PeerWatch saw it while parked), or (had it
    // been admitted first) as an incomplete body: never as a shed.
    let s = report.server;
    assert!(s.cancelled + s.body_errors <= config.disconnects, "{all}");
    assert_eq!(s.exceeds_capacity, 0);
    assert_eq!(s.closed, 1, "the closed-gate probe");

    // Every Retry-After is whole seconds, at least 1.
    assert!(report
        .retry_after
        .iter()
        .all(|v| v.parse::<u64>().is_ok_and(|s| s >= 1)));
    // The closed gate's 503 carries none, and counts nothing.
    assert_eq!(report.closed_probe.status, 503);
    assert_eq!(report.closed_probe.retry_after, None);
    assert_eq!(
        report.closed_probe.shed_total_after,
        report.after.shed_total_sum()
    );
    // Shut down with a drain: every unit came back within the grace period; no
    // queue bound, so every shed was a wait-budget expiry.
    assert!(report.drained.is_complete(), "{all}");
    assert!(report.drained.held().is_empty());
    assert_eq!(report.shed_for(ShedReason::QueueFull), 0, "{all}");
    assert_eq!(
        report.after.shed_total_by_reason(ShedReason::WaitBudget),
        Some(report.shed_total() as f64)
    );
    assert!(report.verdict().starts_with("PASS"), "{all}");
}

/// `--max-waiters 1`: one request parks, the rest of the burst is shed at once
/// for the queue, told apart from wait-budget sheds in the metrics and the report.
#[test]
fn a_run_with_max_waiters_sheds_at_once_and_tells_the_reasons_apart() {
    let _serial = serial();
    let config = Config {
        max_waiters: Some(1),
        ..short_config()
    };
    let report = runtime().block_on(admit_demo::run(config.clone())).unwrap();
    let all = format!("{report}");
    assert!(report.passed(), "{all}");
    // 10 requests, 2 units held 3 s, a budget of 1 s, one place in the queue:
    // whoever arrives while one is parked is shed at once, but a resumed upload,
    // which takes the place of a parked request of a lower class.
    let queue_full = report.shed_for(ShedReason::QueueFull);
    let wait_budget = report.shed_for(ShedReason::WaitBudget);
    let outranked = report.shed_for(ShedReason::Outranked);
    assert!(queue_full > 0, "{all}");
    assert_eq!(
        queue_full + wait_budget + outranked,
        report.shed_total(),
        "{all}"
    );
    for reason in ShedReason::ALL {
        assert_eq!(
            report.after.shed_total_by_reason(reason),
            Some(report.shed_for(reason) as f64),
            "{reason:?}: {all}"
        );
    }
    assert!(all.contains(&format!("queue_full {queue_full}")), "{all}");
    assert!(report.drained.is_complete(), "{all}");
}

/// Capacity 8 from a memory budget, holds of 500 ms, a wait budget of 1 s and the
/// default overload target (a tenth: 100 ms): 80 clients (about 100 units) in a
/// steady stream over 2 s, three times what the gate turns over. Beside them, as
/// by default, 4 stallers (2 trickling uploads, 2 stalled `PATCH`es) and 2 slow
/// clients, placed first, and the run's progress rule (2 s calm).
fn overload_config() -> Config {
    Config {
        memory_budget: 8 << 20,
        session_buffer: 1 << 20,
        wait_budget: Duration::from_secs(1),
        overload_target: OverloadTarget::TenthOfBudget,
        hold: Duration::from_millis(500),
        clients: 80,
        disconnects: 2,
        disconnect_after: Duration::from_millis(100),
        waves: 4,
        payload: 16 << 10,
        global_recorder: false,
        verbose: false,
        plot: Some(
            std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("admit-demo-compare.svg"),
        ),
        stallers: Some(4),
        slow_clients: Some(2),
        ..Config::default()
    }
}

/// One comparison under [`overload_config`], shared by the tests that look at it.
fn short_comparison() -> &'static Comparison {
    static COMPARISON: OnceLock<Comparison> = OnceLock::new();
    COMPARISON.get_or_init(|| {
        let _serial = serial();
        let plot = overload_config().plot.unwrap();
        let _ = std::fs::remove_file(&plot);
        runtime()
            .block_on(admit_demo::compare(overload_config()))
            .unwrap()
    })
}

/// The invariants every run keeps, whatever its gate.
fn assert_run_invariants(report: &Report, config: &Config) {
    let all = format!("{report}");
    assert!(report.passed(), "{all}");
    assert_eq!(report.capacity, 8, "8 MiB / 1 MiB: {all}");
    assert_eq!(report.clients, config.clients);
    assert_eq!(
        report.admitted + report.shed_total() + report.hung_up,
        config.clients,
        "{all}"
    );
    assert!(
        report.failures.is_empty() && report.unavailable == 0,
        "{all}"
    );
    assert!(
        report.peak_in_use <= 8 && report.peak_in_use_scraped <= 8.0,
        "{all}"
    );
    assert_eq!(report.in_use_at_end, 0, "{all}");
    assert!(report.drained.is_complete(), "{all}");
    assert_eq!(
        report.shed_waits.len(),
        report.shed_total(),
        "one wait per shed: {all}"
    );
    assert_eq!(report.waits.len(), report.server.admitted, "{all}");
    // Per route and per reason, including the overload reasons: the counter is
    // the server's answers, and per route the 503s the clients saw.
    for (i, &route) in Route::ALL.iter().enumerate() {
        assert_eq!(
            report.after.shed_total(route),
            Some(report.shed[i] as f64),
            "{route:?}: {all}"
        );
        assert_eq!(report.server.busy[i], report.shed[i], "{route:?}: {all}");
    }
    for reason in ShedReason::ALL {
        assert_eq!(
            report.after.shed_total_by_reason(reason),
            Some(report.shed_for(reason) as f64),
            "{reason:?}: {all}"
        );
        assert!(
            all.contains(&format!("{} {}", reason.label(), report.shed_for(reason))),
            "{all}"
        );
    }
    assert_eq!(
        ShedReason::ALL
            .iter()
            .map(|&r| report.shed_for(r))
            .sum::<usize>(),
        report.shed_total(),
        "{all}"
    );
    assert!(report
        .retry_after
        .iter()
        .all(|v| v.parse::<u64>().is_ok_and(|s| s >= 1)));
    // The upload sessions: a tenth of the clients; each one opened ended once,
    // its buffer freed before its unit returned, and the metric counted it.
    let (c, s) = (&report.session_clients, &report.sessions);
    assert_eq!(c.clients, config.clients / 10, "{all}");
    assert_eq!(
        c.opened + report.shed[Route::Session.index()],
        c.clients,
        "{all}"
    );
    assert_eq!(s.opened, c.opened + c.stalled, "{all}");
    assert_eq!(
        c.stalled,
        config.stallers() / 2,
        "each stalled PATCH's session: {all}"
    );
    assert_eq!(s.ended_total(), s.opened, "{all}");
    assert_eq!(
        (s.ended_once, s.ended_more_than_once),
        (s.opened, 0),
        "{all}"
    );
    assert_eq!((s.freed_first, s.returned_unfreed), (s.opened, 0), "{all}");
    assert_eq!(
        s.ended(LeaseEnd::Expired),
        c.went_quiet + c.stalled,
        "{all}"
    );
    assert_eq!(
        report
            .after
            .sum("leases_ended_total", &[("source", Route::Session.label())]),
        Some(s.opened as f64),
        "{all}"
    );
    assert!(
        all.contains(&format!(
            "leases ended: finished {} (",
            s.ended(LeaseEnd::Finished)
        )),
        "{all}"
    );
    assert_stallers_cut_and_nobody_else(report, config);
}

/// The stallers were each cut (told `408`, or closed), within the rule's limits
/// (2 s calm, and one look a second), each cut heard once and counted once per
/// reason and source (a trickler's for idle or rate, a stalled `PATCH`'s for
/// idle), the stalled sessions expired once cut; nobody else was cut, the slow
/// clients were served.
fn assert_stallers_cut_and_nobody_else(report: &Report, config: &Config) {
    let all = format!("{report}");
    assert_eq!(report.stallers.len(), config.stallers(), "{all}");
    let within = config.progress(false).cut_within().unwrap();
    for staller in &report.stallers {
        assert!(staller.failed.is_none(), "{staller:?}: {all}");
        let (at, end) = staller.ended.expect("cut before the run's end");
        assert!(end.is_cut(), "{staller:?}: {all}");
        assert!(at <= within, "{staller:?}: {all}");
        assert_eq!(
            staller.opened_session,
            staller.kind == StallKind::Patch,
            "{all}"
        );
    }
    let tricklers = config.stallers().div_ceil(2);
    assert_eq!(
        report.stallers_cut(StallKind::Trickle),
        (tricklers, tricklers),
        "{all}"
    );
    let patches = config.stallers() - tricklers;
    assert_eq!(
        report.stallers_cut(StallKind::Patch),
        (patches, patches),
        "{all}"
    );
    // Heard once each, nobody else: the observer's count per reason is the
    // metric's, and a stalled PATCH is cut for its idle body.
    let heard: usize = report.server.cuts.iter().sum();
    assert_eq!(heard, config.stallers(), "{all}");
    assert_eq!(report.cuts_for(CutReason::Response), 0, "{all}");
    assert_eq!(
        report.cuts_for(CutReason::Idle) + report.cuts_for(CutReason::Rate),
        config.stallers(),
        "{all}"
    );
    assert!(report.cuts_for(CutReason::Idle) >= patches, "{all}");
    for reason in CutReason::ALL {
        assert_eq!(
            report
                .after
                .sum("cuts_total", &[("reason", reason.label())]),
            Some(report.cuts_for(reason) as f64),
            "{reason:?}: {all}"
        );
    }
    assert_eq!(
        report.after.sum(
            "cuts_total",
            &[("source", Route::Session.label()), ("reason", "idle")]
        ),
        Some(patches as f64),
        "{all}"
    );
    assert_eq!(
        report
            .after
            .sum("cuts_total", &[("source", Route::Upload.label())]),
        Some(tricklers as f64),
        "{all}"
    );
    // A cut is not a hang-up after admission.
    assert_eq!(report.server.body_errors, 0, "{all}");
    let c = &report.session_clients;
    assert_eq!(
        (c.stalled, c.stalled_told_expired),
        (patches, patches),
        "{all}"
    );
    // The slow clients: served, after their body's 2.5 s at least.
    assert_eq!(report.slow.len(), config.slow_clients(), "{all}");
    for slow in &report.slow {
        assert_eq!(slow.answer, Ok(200), "{all}");
        assert!(slow.took >= Duration::from_millis(2400), "{slow:?}: {all}");
    }
    assert!(
        all.contains(&format!(
            "  stalled   {} stallers ({tricklers} trickle, {patches} PATCH): {} cut after ",
            config.stallers(),
            config.stallers()
        )),
        "{all}"
    );
    assert!(
        all.contains(&format!(
            "            {} slow clients at 16 KiB/s: {} served (200) after ",
            config.slow_clients(),
            config.slow_clients()
        )),
        "{all}"
    );
}

/// The same stallers against a server without the progress rule
/// (`--progress off`) keep their units until they give up at the run's planned
/// end: the run fails its staller checks, and only those.
#[test]
fn without_the_progress_rule_the_stallers_are_not_cut_and_the_run_fails() {
    let _serial = serial();
    let config = Config {
        memory_budget: 8 << 20,
        session_buffer: 1 << 20,
        wait_budget: Duration::from_secs(1),
        overload_target: OverloadTarget::Off,
        hold: Duration::from_millis(200),
        clients: 8,
        disconnects: 0,
        waves: 1,
        payload: 16 << 10,
        global_recorder: false,
        verbose: false,
        plot: None,
        stallers: Some(2),
        slow_clients: Some(0),
        progress: Some(Progress::Off),
        ..Config::default()
    };
    let report = runtime().block_on(admit_demo::run(config.clone())).unwrap();
    let all = format!("{report}");
    assert!(!report.passed(), "{all}");
    let failed: Vec<&str> = report
        .checks
        .iter()
        .filter(|c| !c.ok)
        .map(|c| c.name)
        .collect();
    assert_eq!(
        failed,
        [
            "every staller cut (408 or its connection closed) before the run's end",
            "stalled PATCHes' sessions back to idle once cut, then expired, their units back",
        ],
        "{all}"
    );
    for staller in &report.stallers {
        assert_eq!(staller.ended, None, "never ended by the server: {all}");
        assert!(staller.failed.is_none(), "{all}");
    }
    assert_eq!(report.server.cuts, [0; 3], "{all}");
    // Once the staller hung up, its session went idle and expired: nothing held.
    assert_eq!(report.in_use_at_end, 0, "{all}");
}

#[test]
fn a_short_comparison_holds_every_check_in_both_runs() {
    let comparison = short_comparison();
    let config = overload_config();
    let all = format!("{comparison}");
    assert!(comparison.passed(), "{all}");
    assert!(comparison.verdict().starts_with("PASS"), "{all}");
    let fixed = &comparison.fixed;
    let target = comparison.target.as_ref().expect("a target run by default");
    assert_eq!(fixed.overload_target, None);
    assert_eq!(target.overload_target, Some(config.wait_budget / 10));
    for report in comparison.runs() {
        assert_run_invariants(report, &config);
    }
    // Without a target the overload rule never acts.
    assert_eq!(fixed.shed_for(ShedReason::Overload), 0, "{fixed}");
    assert_eq!(fixed.shed_for(ShedReason::Hopeless), 0, "{fixed}");
    assert!(fixed.overloaded().is_empty(), "{fixed}");
    // The comparison has a row per run, and the picture a panel per run.
    assert!(
        all.contains("fixed wait budget") && all.contains("overload target 100ms"),
        "{all}"
    );
    let svg = std::fs::read_to_string(config.plot.unwrap()).expect("the picture of both runs");
    assert!(
        svg.contains("fixed wait budget") && svg.contains("overload target 100ms"),
        "{svg}"
    );
}

#[test]
fn with_an_overload_target_sheds_come_in_milliseconds_and_without_one_after_the_budget() {
    let comparison = short_comparison();
    let budget = overload_config().wait_budget;
    let fixed = &comparison.fixed;
    let target = comparison.target.as_ref().unwrap();
    let all = format!("{fixed}\n\n{target}\n\n{comparison}");
    // Three times the demand the gate turns over: both runs shed.
    assert!(fixed.shed_total() > 0 && target.shed_total() > 0, "{all}");
    // The fixed budget: a standing queue, and every shed waited all of the budget.
    assert!(
        fixed.shed_waits.iter().all(|&w| w >= budget),
        "{:?}: {all}",
        fixed.shed_waits
    );
    assert_eq!(
        fixed.shed_for(ShedReason::WaitBudget),
        fixed.shed_total(),
        "{all}"
    );
    // The target: sheds at arrival, or when the next resumed upload outranks a
    // parked request (one arrives every 8 clients, 200 ms apart here, so those
    // wait about 100 ms at the median: a tenth of the budget, which a strict
    // `< budget / 10` met only by chance); the median far below the budget.
    let median = target.shed_wait_quantile(0.5).unwrap();
    assert!(median < budget / 5, "median time to shed {median:?}: {all}");
    assert!(target.shed_for(ShedReason::Hopeless) > 0, "{all}");
    // And those admitted waited less.
    assert!(
        target.wait_quantile(0.5) < fixed.wait_quantile(0.5),
        "admitted wait p50: {all}"
    );
}

/// A server on a gate the test builds and fills itself.
struct Fixture {
    gate: UploadGate,
    stats: Arc<ServerStats>,
    prometheus: PrometheusHandle,
    sessions: SessionLeases,
    server: Server,
    _recorder: PrometheusRecorder,
}

/// The fixture's upload sessions expire after this long idle.
const SESSION_IDLE_LIMIT: Duration = Duration::from_millis(300);

async fn fixture(capacity: usize, wait_budget: Duration) -> Fixture {
    let recorder = PrometheusBuilder::new().build_recorder();
    let prometheus = recorder.handle();
    let stats = Arc::new(ServerStats::default());
    let gate = metrics::with_local_recorder(&recorder, || {
        admit_tokio::gate::<Route>(capacity)
            .max_units(MAX_UNITS)
            .wait_budget(wait_budget)
            .observer(DemoObserver::new(Arc::clone(&stats)))
            .build()
    })
    .unwrap();
    let sessions = admit_tokio::leases(&gate, SESSION_IDLE_LIMIT);
    let app = Arc::new(App {
        gate: gate.clone(),
        stats: Arc::clone(&stats),
        prometheus: prometheus.clone(),
        session_buffer: 1 << 20,
        hold: Duration::ZERO,
        sessions: sessions.clone(),
        ids: IdMinter::default(),
    });
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let server = Server::start(listener, app).unwrap();
    Fixture {
        gate,
        stats,
        prometheus,
        sessions,
        server,
        _recorder: recorder,
    }
}

async fn send_upload_head(stream: &mut TcpStream, path: &str) {
    let head = format!(
        "POST {path} HTTP/1.1\r\nhost: test\r\ncontent-length: 1024\r\n\
         expect: 100-continue\r\nconnection: close\r\n\r\n"
    );
    stream.write_all(head.as_bytes()).await.unwrap();
}

async fn until(mut condition: impl FnMut() -> bool) {
    tokio::time::timeout(Duration::from_secs(20), async {
        while !condition() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .expect("condition within 20 s");
}

#[test]
fn a_client_that_hangs_up_while_parked_gets_nothing_and_counts_nothing() {
    let _serial = serial();
    runtime().block_on(async {
        // Full gate held by the test, and a wait budget that outlasts the test: the
        // only way out for the parked request is the hang-up.
        let f = fixture(2, Duration::from_secs(600)).await;
        let held = f.gate.acquire(2, Route::Mirror).await.unwrap();

        let mut client = TcpStream::connect(f.server.addr).await.unwrap();
        send_upload_head(&mut client, Route::Upload.path()).await;
        until(|| f.gate.waiters() == 1).await;

        // Half-close: the server sees the FIN, and the client can still read
        // whatever the server writes, which must be nothing.
        client.shutdown().await.unwrap();
        let mut answer = Vec::new();
        let read = tokio::time::timeout(Duration::from_secs(20), client.read_to_end(&mut answer))
            .await
            .expect("the server closes the connection");
        assert!(
            read.is_ok_and(|n| n == 0),
            "{:?}",
            String::from_utf8_lossy(&answer)
        );

        until(|| f.gate.waiters() == 0).await;
        let stats = &f.stats;
        let n = |c: &std::sync::atomic::AtomicUsize| c.load(std::sync::atomic::Ordering::Relaxed);
        assert_eq!(n(&stats.cancelled), 1, "seen by the PeerWatch while parked");
        assert_eq!(stats.busy_total(), 0);
        let page = Scrape::parse(f.prometheus.render());
        assert_eq!(page.shed_total_sum(), Some(0.0));
        assert_eq!(page.metric("units_in_use"), Some(2.0), "the test's permit");

        drop(held);
        assert_eq!(f.gate.in_use(), 0);
        f.server.stop().await;
    });
}

#[test]
fn a_shed_is_a_503_with_retry_after_and_its_body_is_never_sent() {
    let _serial = serial();
    runtime().block_on(async {
        let f = fixture(2, Duration::from_millis(200)).await;
        let held = f.gate.acquire(2, Route::Mirror).await.unwrap();

        // The client sends no body until `100 Continue`, which a shed never gets.
        let mut client = TcpStream::connect(f.server.addr).await.unwrap();
        send_upload_head(&mut client, Route::Mirror.path()).await;
        let mut answer = Vec::new();
        tokio::time::timeout(Duration::from_secs(20), client.read_to_end(&mut answer))
            .await
            .expect("an answer once the budget expires")
            .unwrap();
        let answer = String::from_utf8(answer).unwrap();
        assert!(answer.starts_with("HTTP/1.1 503 "), "{answer}");
        // No release yet, so no hold time to scale: the lower bound, 1 s.
        assert!(
            answer
                .to_ascii_lowercase()
                .contains("\r\nretry-after: 1\r\n"),
            "{answer}"
        );
        assert!(!answer.contains("100 Continue"), "{answer}");

        assert_eq!(f.stats.busy(Route::Mirror), 1);
        let page = Scrape::parse(f.prometheus.render());
        assert_eq!(page.shed_total(Route::Mirror), Some(1.0));
        assert_eq!(page.shed_total(Route::Upload), Some(0.0));

        drop(held);
        f.server.stop().await;
    });
}

async fn request(addr: std::net::SocketAddr, method: &str, path: &str, body: &[u8]) -> Response {
    admit_demo::client::request(addr, method, path, body)
        .await
        .unwrap()
}

fn body(response: &Response) -> String {
    String::from_utf8_lossy(&response.body).into_owned()
}

/// An upload session through the routes: opened at the gate, chunks appended
/// across requests, and ended by `PUT`, by `DELETE` or by going quiet, each once,
/// its buffer freed before its unit; a request for a session it cannot have is
/// told why.
#[test]
fn an_upload_session_spans_requests_and_ends_once_however_it_ends() {
    let _serial = serial();
    runtime().block_on(async {
        let f = fixture(2, Duration::from_millis(200)).await;
        let addr = f.server.addr;

        // POST: a unit, leased to the session under an unguessable id.
        let opened = request(addr, "POST", UPLOADS, b"").await;
        assert_eq!(opened.status, 202, "{opened:?}");
        let location = opened.header("location").unwrap().to_owned();
        let hex = location.strip_prefix("/v2/uploads/").unwrap();
        let id = u128::from_str_radix(hex, 16).unwrap();
        assert_eq!(hex.len(), 32);
        assert_eq!(f.gate.in_use(), 1);
        assert_eq!(f.sessions.len(), 1);

        // PATCH twice: the chunks appended, the unit held across requests.
        for (chunk, range) in [(&b"hello "[..], "0-5"), (b"world", "0-10")] {
            let patched = request(addr, "PATCH", &location, chunk).await;
            assert_eq!(patched.status, 202, "{patched:?}");
            assert_eq!(patched.header("range"), Some(range));
        }
        assert_eq!(f.gate.in_use(), 1);

        // While another request has it: 409.
        let held = f.sessions.checkout(&id).unwrap();
        assert_eq!(held.bytes(), b"hello world");
        let busy = request(addr, "PATCH", &location, b"!").await;
        assert_eq!(busy.status, 409, "{busy:?}");
        assert!(body(&busy).contains("BLOB_UPLOAD_INVALID"), "{busy:?}");
        drop(held);

        // PUT: a wrong digest leaves the session as it was; the right one ends it.
        let wrong = request(addr, "PUT", &format!("{location}?digest=fnv1a64:0"), b"").await;
        assert_eq!(wrong.status, 400, "{wrong:?}");
        assert!(body(&wrong).contains("DIGEST_INVALID"), "{wrong:?}");
        let right = format!("{location}?digest={}", digest(b"hello world"));
        let put = request(addr, "PUT", &right, b"").await;
        assert_eq!(put.status, 201, "{put:?}");
        assert_eq!(f.gate.in_use(), 0);

        // Late, and never known: both 404 BLOB_UPLOAD_UNKNOWN, told apart.
        let late = request(addr, "PATCH", &location, b"more").await;
        assert_eq!(late.status, 404, "{late:?}");
        assert!(
            body(&late).contains("BLOB_UPLOAD_UNKNOWN") && body(&late).contains("finished"),
            "{late:?}"
        );
        for never in [
            format!("/v2/uploads/{}", "0".repeat(32)),
            "/v2/uploads/x".into(),
        ] {
            let unknown = request(addr, "PATCH", &never, b"").await;
            assert_eq!(unknown.status, 404, "{unknown:?}");
            assert!(
                body(&unknown).contains("BLOB_UPLOAD_UNKNOWN")
                    && body(&unknown).contains("unknown"),
                "{unknown:?}"
            );
        }

        // DELETE: cancelled.
        let opened = request(addr, "POST", UPLOADS, b"").await;
        let cancelled = opened.header("location").unwrap().to_owned();
        assert_ne!(cancelled, location);
        let deleted = request(addr, "DELETE", &cancelled, b"").await;
        assert_eq!(deleted.status, 204, "{deleted:?}");
        assert_eq!(f.gate.in_use(), 0);

        // Quiet: it expires past the idle limit with no request arriving.
        let opened = request(addr, "POST", UPLOADS, b"").await;
        let quiet = opened.header("location").unwrap().to_owned();
        assert_eq!(request(addr, "PATCH", &quiet, b"chunk").await.status, 202);
        assert_eq!(f.gate.in_use(), 1);
        until(|| f.gate.in_use() == 0 && f.sessions.is_empty()).await;
        let late = request(addr, "PATCH", &quiet, b"more").await;
        assert_eq!(late.status, 404, "{late:?}");
        assert!(body(&late).contains("expired"), "{late:?}");

        // Each ended once, its buffer freed before its unit returned.
        let counts = f.stats.sessions.counts();
        assert_eq!(counts.opened, 3);
        assert_eq!((counts.ended_once, counts.ended_more_than_once), (3, 0));
        assert_eq!(
            counts.ended,
            [1, 1, 1, 0, 0],
            "finished, cancelled, expired"
        );
        assert_eq!((counts.freed_first, counts.returned_unfreed), (3, 0));
        assert_eq!(counts.unidentified, 0);
        let page = Scrape::parse(f.prometheus.render());
        for (how, n) in [
            ("finished", 1.0),
            ("cancelled", 1.0),
            ("expired", 1.0),
            ("drained", 0.0),
        ] {
            let labels = [("source", Route::Session.label()), ("how", how)];
            assert_eq!(page.sum("leases_ended_total", &labels), Some(n), "{how}");
        }

        // The POST waits at the gate like any upload: a full gate sheds it.
        let full = f.gate.acquire(2, Route::Mirror).await.unwrap();
        let shed = request(addr, "POST", UPLOADS, b"").await;
        assert_eq!(shed.status, 503, "{shed:?}");
        assert!(shed.header("retry-after").is_some(), "{shed:?}");
        assert_eq!(f.stats.busy(Route::Session), 1);
        drop(full);
        f.server.stop().await;
    });
}

#[test]
fn the_binary_runs_a_small_burst_and_exits_zero() {
    let _serial = serial();
    let plot = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("admit-demo-test.svg");
    let _ = std::fs::remove_file(&plot);
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_admit-demo"))
        .args([
            "--capacity",
            "2",
            "--wait-budget",
            "1s",
            "--hold",
            "2s",
            "--clients",
            "6",
            "--disconnects",
            "1",
            "--disconnect-after",
            "100ms",
            "--waves",
            "1",
            "--payload",
            "4KiB",
            "--plot",
            plot.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(stdout.contains("\nPASS: "), "{stdout}");
    assert!(
        stdout.contains("shed_total{source=\"upload\"} 0"),
        "{stdout}"
    );
    assert!(stdout.contains("\ncomparison: "), "{stdout}");
    let svg = std::fs::read_to_string(&plot).expect("the picture of the run");
    assert!(
        svg.starts_with("<svg") && svg.contains("units in use"),
        "{svg}"
    );
    assert!(
        svg.contains("fixed wait budget") && svg.contains("overload target 100ms"),
        "both runs side by side: {svg}"
    );

    // `--overload-target off`: the fixed budget alone.
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_admit-demo"))
        .args([
            "--capacity",
            "2",
            "--wait-budget",
            "1s",
            "--overload-target",
            "off",
            "--hold",
            "1s",
            "--clients",
            "4",
            "--disconnects",
            "0",
            "--waves",
            "1",
            "--payload",
            "4KiB",
            "--plot",
            "none",
        ])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stdout}");
    assert!(
        stdout.contains("run 1/1") && !stdout.contains("run 2/2"),
        "{stdout}"
    );
}

#[test]
fn flags_parse_and_bad_ones_are_refused() {
    use admit_demo::Command;
    let Ok(Command::Run(c)) = Config::from_args([
        "--memory-budget=64MiB",
        "--session-buffer",
        "16M",
        "--wait-budget",
        "1500ms",
        "--clients",
        "10",
    ]) else {
        panic!("valid flags")
    };
    assert_eq!(c.memory_budget, 64 << 20);
    assert_eq!(c.session_buffer, 16 << 20);
    assert_eq!(c.wait_budget, Duration::from_millis(1500));
    assert_eq!(c.clients, 10);
    assert_eq!(Config::from_args(["--help"]), Ok(Command::Help));
    assert!(Config::from_args(["--clients"]).is_err());
    assert!(Config::from_args(["--bogus"]).is_err());
    assert!(
        Config::from_args(["--payload", "16MiB"]).is_err(),
        "payload over a session buffer"
    );
    assert!(
        Config::from_args(["--disconnect-after", "5s"]).is_err(),
        "not while parked"
    );

    let Ok(Command::Serve(c)) = Config::from_args(["serve", "--capacity", "8", "--grace=2s"])
    else {
        panic!("serve with server flags")
    };
    assert_eq!(c.capacity, Some(8));
    assert_eq!(c.grace, Duration::from_secs(2));
    let Ok(Command::Run(c)) = Config::from_args(["--plot", "none"]) else {
        panic!("--plot none")
    };
    assert_eq!(c.plot, None);
    let refused = Config::from_args(["serve", "--clients", "5"]).unwrap_err();
    assert!(refused.0.contains("load generator"), "{refused}");

    let Ok(Command::Run(c)) = Config::from_args(["--max-waiters", "4"]) else {
        panic!("--max-waiters")
    };
    assert_eq!(c.max_waiters, Some(4));
    assert_eq!(Config::default().max_waiters, None);
    let Ok(Command::Serve(c)) =
        Config::from_args(["serve", "--follow-memory-limit", "30s", "--max-waiters=0"])
    else {
        panic!("serve --follow-memory-limit")
    };
    assert_eq!(c.follow_memory_limit, Some(Duration::from_secs(30)));
    assert_eq!(c.max_waiters, Some(0));
    assert_eq!(
        Config::default().overload_target(),
        Some(Duration::from_millis(200))
    );
    let Ok(Command::Run(c)) = Config::from_args(["--wait-budget", "3s"]) else {
        panic!("--wait-budget")
    };
    assert_eq!(
        c.overload_target(),
        Some(Duration::from_millis(300)),
        "a tenth of the budget"
    );
    let Ok(Command::Run(c)) = Config::from_args(["--overload-target", "250ms"]) else {
        panic!("--overload-target")
    };
    assert_eq!(
        c.overload_target,
        OverloadTarget::Given(Duration::from_millis(250))
    );
    let Ok(Command::Run(c)) = Config::from_args(["--overload-target=off"]) else {
        panic!("--overload-target off")
    };
    assert_eq!(c.overload_target(), None);
    let Ok(Command::Serve(c)) = Config::from_args(["serve", "--overload-target", "1s"]) else {
        panic!("serve --overload-target")
    };
    assert_eq!(c.overload_target(), Some(Duration::from_secs(1)));
    assert!(
        Config::from_args(["--overload-target", "2s"]).is_err(),
        "not below the budget"
    );
    assert!(Config::from_args(["--overload-target", "0ms"]).is_err());
    assert!(Config::from_args(["--overload-target", "soon"]).is_err());
    // Upload sessions: a tenth of the clients by default, and an idle limit.
    assert_eq!(Config::default().sessions(), 24);
    assert_eq!(Config::default().idle_limit, Duration::from_secs(1));
    let Ok(Command::Run(c)) = Config::from_args(["--sessions", "5", "--idle-limit=500ms"]) else {
        panic!("--sessions, --idle-limit")
    };
    assert_eq!(
        (c.sessions(), c.idle_limit),
        (5, Duration::from_millis(500))
    );
    assert!(
        Config::from_args(["--clients", "10", "--disconnects", "6", "--sessions", "5"]).is_err(),
        "more hang-ups and sessions than clients"
    );
    assert!(Config::from_args(["--idle-limit", "0ms"]).is_err());
    let refused = Config::from_args(["serve", "--sessions", "5"]).unwrap_err();
    assert!(refused.0.contains("load generator"), "{refused}");
    let Ok(Command::Serve(c)) = Config::from_args(["serve", "--idle-limit", "30s"]) else {
        panic!("serve --idle-limit")
    };
    assert_eq!(c.idle_limit, Duration::from_secs(30));
    let refused = Config::from_args(["--follow-memory-limit", "30s"]).unwrap_err();
    assert!(refused.0.contains("serve"), "{refused}");
    assert!(Config::from_args(["serve", "--follow-memory-limit", "1ms"]).is_err());
    // Stallers and slow clients: 4 and 2 by default, placed in the gate's room
    // beside a mirror's 2 units; the load generator's, refused by serve.
    let d = Config::default();
    assert_eq!((d.stallers(), d.slow_clients(), d.tricklers()), (4, 2, 2));
    let Ok(Command::Run(c)) = Config::from_args(["--stallers", "3", "--slow-clients=1"]) else {
        panic!("--stallers, --slow-clients")
    };
    assert_eq!((c.stallers(), c.slow_clients(), c.tricklers()), (3, 1, 2));
    let refused = Config::from_args(["--capacity", "4", "--stallers", "2", "--slow-clients", "1"])
        .unwrap_err();
    assert!(refused.0.contains("room for a mirror"), "{refused}");
    assert!(
        Config::from_args(["--capacity", "4", "--stallers", "2", "--slow-clients", "0"]).is_ok()
    );
    // By default, as many as fit beside a mirror's 2 units.
    let Ok(Command::Run(c)) = Config::from_args(["--capacity", "4"]) else {
        panic!("--capacity 4")
    };
    assert_eq!((c.stallers(), c.slow_clients()), (2, 0));
    let Ok(Command::Run(c)) = Config::from_args(["--capacity", "2"]) else {
        panic!("--capacity 2")
    };
    assert_eq!((c.stallers(), c.slow_clients()), (0, 0));
    let refused = Config::from_args(["serve", "--stallers", "2"]).unwrap_err();
    assert!(refused.0.contains("load generator"), "{refused}");
    let Ok(Command::Serve(c)) = Config::from_args(["serve", "--capacity", "2"]) else {
        panic!("serve has no stallers to make room for")
    };
    assert_eq!(c.capacity, Some(2));
    // The progress rule: 2 s calm in a run, admit-tower's defaults in serve.
    assert_eq!(d.progress(false), Progress::Scaled(Duration::from_secs(2)));
    assert_eq!(d.progress(true), Progress::Library);
    for (flag, progress) in [
        ("1500ms", Progress::Scaled(Duration::from_millis(1500))),
        ("default", Progress::Library),
        ("off", Progress::Off),
    ] {
        let Ok(Command::Run(c)) = Config::from_args(["--progress", flag]) else {
            panic!("--progress {flag}")
        };
        assert_eq!(c.progress(false), progress);
        let Ok(Command::Serve(c)) = Config::from_args(["serve", "--progress", flag]) else {
            panic!("serve --progress {flag}")
        };
        assert_eq!(c.progress(true), progress);
    }
    assert!(Config::from_args(["--progress", "50ms"]).is_err());
    assert!(Config::from_args(["--progress", "soon"]).is_err());
    // Under pressure its idle limit (a quarter) must outlast a hang-up's wait.
    let refused = Config::from_args(["--progress", "1s"]).unwrap_err();
    assert!(refused.0.contains("--disconnect-after"), "{refused}");
    assert!(Config::from_args(["--progress", "1s", "--disconnects", "0"]).is_ok());
}

#[test]
fn serve_runs_the_server_alone_until_shut_down_then_drains() {
    let _serial = serial();
    runtime().block_on(async {
        let config = Config {
            hold: Duration::ZERO,
            global_recorder: false,
            verbose: false,
            plot: None,
            ..Config::default()
        };
        let (ready_tx, ready) = tokio::sync::oneshot::channel();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let served = tokio::spawn(admit_demo::serve(config, Some(ready_tx), async {
            let _ = stopped.await;
        }));
        let addr = ready.await.unwrap();

        let response = admit_demo::client::post(addr, Route::Mirror.path(), b"payload")
            .await
            .unwrap();
        assert_eq!(response.status, 200, "{response:?}");
        let page = admit_demo::client::get(addr, "/metrics").await.unwrap();
        let page = Scrape::parse(String::from_utf8(page.body).unwrap());
        assert_eq!(page.sum("wait_seconds_count", &[]), Some(1.0));

        stop.send(()).unwrap();
        let served = served.await.unwrap().unwrap();
        assert_eq!(served.addr, addr);
        assert_eq!((served.admitted, served.shed), (1, 0));
        assert!(served.drained.is_complete(), "{}", served.drained);
        assert!(served.timeline.is_some_and(|t| !t.samples.is_empty()));
    });
}

#[tokio::test(start_paused = true)]
async fn drain_closes_waits_for_the_units_and_reports_what_the_grace_period_cut() {
    let stats = Arc::new(ServerStats::default());
    let gate: UploadGate = admit_tokio::gate::<Route>(4)
        .max_units(MAX_UNITS)
        .observer(DemoObserver::new(Arc::clone(&stats)))
        .build()
        .unwrap();
    let mirror = gate.acquire(2, Route::Mirror).await.unwrap();
    let upload = gate.acquire(1, Route::Upload).await.unwrap();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_secs(1)).await;
        drop(upload); // returns during the drain
    });

    let drained = admit_demo::drain(&gate, async {}, Duration::from_secs(3)).await;
    assert!(gate.is_closed());
    assert_eq!(
        drained.held(),
        &[(Route::Mirror, 2)],
        "the mirror never came back"
    );
    assert_eq!(
        drained.waited,
        Duration::from_secs(3),
        "gave up at the grace period"
    );
    assert!(!drained.is_complete());
    assert_eq!(
        drained.to_string(),
        "the grace period (3s) cut 2 units still held: mirror 2 (those sessions are cut off)"
    );
    assert_eq!(stats.busy_total(), 0, "a drain sheds nothing");

    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(1500)).await;
        drop(mirror);
    });
    let drained = admit_demo::drain(&gate, async {}, Duration::from_secs(3)).await;
    assert!(drained.is_complete());
    assert_eq!(drained.waited, Duration::from_millis(1500));
    assert_eq!(
        drained.to_string(),
        "every unit back after 1.5s (grace period 3s)"
    );
}
