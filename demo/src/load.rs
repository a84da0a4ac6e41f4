//! The load generator: a burst of uploads, in waves, larger than the gate can hold,
//! some of whose clients hang up while parked, and some of which are upload
//! sessions that span requests (`POST /v2/uploads`, `PATCH`es, then `PUT`, `DELETE`
//! or nothing more). Each wave is a steady stream over one wave gap (a hold), so the
//! waves together are sustained overload.
//!
//! Beside them, placed before the first wave (each admitted into a gate with room
//! for them all, so each holds its unit when the waves come): clients that stall
//! (a `POST /upload` trickling a byte a second; an upload session whose `PATCH`
//! stops after a few bytes), which the progress rule must cut, and honest slow
//! clients (a `POST /upload` at 16 KiB a second), which it must not.

use std::io::{IsTerminal, Write};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::task::JoinSet;

use crate::client::{self, StallEnd};
use crate::config::{Config, SLOW_BODY, SLOW_RATE};
use crate::scrape::Scrape;
use crate::server::{Route, UploadGate, RESUMED};
use crate::sessions::{digest, UPLOADS};

/// How one client's request ended, as the client saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// `200 OK`: admitted, buffered, processed; or an upload session opened
    /// (`202`) that went as its client planned.
    Admitted,
    /// `503` with `Retry-After` (its raw value): shed.
    Shed(String),
    /// `503` without `Retry-After`: a closed or misconfigured gate.
    Unavailable,
    /// The client hung up on purpose while parked (or after admission, before
    /// sending its body).
    HungUp,
    /// Anything else: an unexpected status, an I/O error, a timeout.
    Failed(String),
}

/// One client's request and how it ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientResult {
    /// The route it asked for.
    pub route: Route,
    /// Whether it resumed an upload (`?resumed=1`: the highest class).
    pub resumed: bool,
    /// How it ended.
    pub outcome: Outcome,
    /// An upload session's client whose `POST` opened a session: what it did.
    pub session: Option<SessionRun>,
}

/// How an upload session's client ends its session, once opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Plan {
    /// Its chunks, then `PUT ?digest=`: finished.
    Finish,
    /// Its chunks, then `DELETE`: cancelled.
    Cancel,
    /// One chunk, then nothing: it went quiet, and its session expires. (It comes
    /// back once past the idle limit, to see what it is told.)
    GoQuiet,
}

impl Plan {
    /// The `i`th session client's plan: one in five goes quiet, one in five
    /// cancels, the rest finish.
    #[must_use]
    pub fn of(i: usize) -> Self {
        match i % 5 {
            1 => Self::GoQuiet,
            3 => Self::Cancel,
            _ => Self::Finish,
        }
    }
}

/// What an upload session's client did with the session it opened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionRun {
    /// How it meant to end it.
    pub plan: Plan,
    /// A client that went quiet: the answer (status, body) to its late request,
    /// sent once past the idle limit.
    pub late_answer: Option<(u16, String)>,
}

/// The `PATCH`es of a session: the body in this many chunks.
pub const SESSION_CHUNKS: usize = 3;

/// The body a trickling staller announces (it sends a byte a second of it).
pub const TRICKLE_LENGTH: usize = 256 << 10;

/// The pause between a trickling staller's bytes.
pub const TRICKLE_EVERY: Duration = Duration::from_secs(1);

/// The body a stalled `PATCH` announces, and the bytes of it sent before it stops.
pub const STALLED_PATCH_LENGTH: usize = 100_000;
/// See [`STALLED_PATCH_LENGTH`].
pub const STALLED_PATCH_SENT: usize = 10;

/// How a staller misbehaves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StallKind {
    /// `POST /upload` announcing [`TRICKLE_LENGTH`] bytes (no `Expect`), then a
    /// byte every [`TRICKLE_EVERY`].
    Trickle,
    /// `POST /v2/uploads`, then a `PATCH` of the session announcing
    /// [`STALLED_PATCH_LENGTH`] bytes that stops after [`STALLED_PATCH_SENT`];
    /// once cut, it comes back past the idle limit to see what it is told.
    Patch,
}

/// What one staller saw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StallerResult {
    /// How it stalled.
    pub kind: StallKind,
    /// How the server ended its stalled request, and how long after it was sent;
    /// `None`: not before the staller gave up, at the run's planned end.
    pub ended: Option<(Duration, StallEnd)>,
    /// A stalled `PATCH` that was cut: the answer (status, body) to its late
    /// request, sent past the idle limit after the cut.
    pub late_answer: Option<(u16, String)>,
    /// What went wrong before it could stall (its session's `POST` not answered
    /// `202`, a connection error); none expected.
    pub failed: Option<String>,
    /// A [`StallKind::Patch`] staller whose `POST` opened an upload session.
    pub opened_session: bool,
}

impl StallerResult {
    /// Whether the server cut it: `408`, or its connection closed.
    #[must_use]
    pub fn cut(&self) -> bool {
        self.ended.is_some_and(|(_, end)| end.is_cut())
    }
}

/// What one slow client saw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlowResult {
    /// The status of its answer, or what went wrong.
    pub answer: Result<u16, String>,
    /// From its request to its answer.
    pub took: Duration,
}

/// What the load generator measured besides the clients' results.
#[derive(Debug, Clone, Default)]
pub struct Observed {
    /// Every client's result.
    pub results: Vec<ClientResult>,
    /// Every staller's result.
    pub stallers: Vec<StallerResult>,
    /// Every slow client's result.
    pub slow: Vec<SlowResult>,
    /// The most units in use seen by sampling `Gate::in_use` every 2 ms.
    pub peak_in_use: usize,
    /// The most `units_in_use` seen in the scrapes of `/metrics` during the run.
    pub peak_in_use_scraped: f64,
    /// Scrapes of `/metrics` taken during the run.
    pub scrapes: usize,
}

/// Counts for the progress line.
#[derive(Debug, Default)]
struct Live {
    wave: AtomicUsize,
    done: AtomicUsize,
    admitted: AtomicUsize,
    shed: AtomicUsize,
    hung_up: AtomicUsize,
    other: AtomicUsize,
}

impl Live {
    fn record(&self, outcome: &Outcome) {
        let counter = match outcome {
            Outcome::Admitted => &self.admitted,
            Outcome::Shed(_) => &self.shed,
            Outcome::HungUp => &self.hung_up,
            Outcome::Unavailable | Outcome::Failed(_) => &self.other,
        };
        counter.fetch_add(1, Ordering::Relaxed);
        self.done.fetch_add(1, Ordering::Relaxed);
    }
}

/// Sends the burst of `config` at the server on `addr`, sampling `gate` and
/// scraping `/metrics` while it runs, and returns when every client has finished.
pub async fn run(config: &Config, addr: SocketAddr, gate: &UploadGate) -> Observed {
    let started = Instant::now();
    let live = Arc::new(Live::default());
    let finished = Arc::new(AtomicBool::new(false));
    let sampler = tokio::spawn(sample_in_use(gate.clone(), Arc::clone(&finished)));
    let watcher = tokio::spawn(watch(
        config.clone(),
        addr,
        gate.clone(),
        Arc::clone(&live),
        Arc::clone(&finished),
        started,
    ));

    let payload: Arc<[u8]> = vec![0x5a; config.payload].into();
    let client_timeout = config.planned_duration() + Duration::from_secs(10);
    let (mut stallers, mut slow) = place(config, addr, gate).await;
    // The waves' clock: from the first wave, once the stallers hold their units.
    let started = Instant::now();
    let mut clients = JoinSet::new();
    let mut next_client = 0;
    let mut next_hang_up = 0;
    let mut next_session = 0;
    for wave in 0..config.waves {
        let wave_start = started + config.wave_gap() * u32::try_from(wave).unwrap_or(u32::MAX);
        tokio::time::sleep_until(wave_start.into()).await;
        live.wave.store(wave + 1, Ordering::Relaxed);
        let size = share(config.clients, config.waves, wave);
        let hang_ups = share(config.disconnects, config.waves, wave).min(size);
        let sessions = share(config.sessions(), config.waves, wave).min(size - hang_ups);
        let mut others = 0;

        // The wave's clients, one every `gap / size`: a steady stream over the
        // wave. Its hang-ups take evenly spaced places among them, its upload
        // sessions evenly spaced places among the rest; every fourth of the others
        // is a mirror.
        for slot in 0..size {
            let at = wave_start + config.wave_gap().mul_f64(slot as f64 / size as f64);
            let live = Arc::clone(&live);
            if is_hang_up(slot, size, hang_ups) {
                let route = if next_hang_up % 2 == 1 {
                    Route::Mirror
                } else {
                    Route::Upload
                };
                next_hang_up += 1;
                let len = config.payload;
                let after = config.disconnect_after;
                let gate = gate.clone();
                clients.spawn(async move {
                    tokio::time::sleep_until(at.into()).await;
                    // Sent once someone is parked, so that FIFO puts it behind that
                    // waiter, parked too. (If nobody parks within a second, it goes
                    // anyway.)
                    let until = Instant::now() + Duration::from_secs(1);
                    while gate.waiters() == 0 && Instant::now() < until {
                        tokio::time::sleep(Duration::from_millis(2)).await;
                    }
                    let outcome =
                        match client::post_and_hang_up(addr, route.path(), len, after).await {
                            Ok(None) => Outcome::HungUp,
                            Ok(Some(answered)) => classify(&answered),
                            Err(e) => {
                                Outcome::Failed(format!("{} (hang-up client): {e}", route.path()))
                            }
                        };
                    live.record(&outcome);
                    ClientResult {
                        route,
                        resumed: false,
                        outcome,
                        session: None,
                    }
                });
                continue;
            }
            let other = others;
            others += 1;
            if is_hang_up(other, size - hang_ups, sessions) {
                let plan = Plan::of(next_session);
                next_session += 1;
                // It takes the place of an upload in the mirror and resume cadence.
                next_client += 1;
                let payload = Arc::clone(&payload);
                let (pause, late) = (config.session_pause(), config.late_request_after());
                clients.spawn(async move {
                    tokio::time::sleep_until(at.into()).await;
                    let (outcome, session) = match tokio::time::timeout(
                        client_timeout,
                        session_client(addr, plan, &payload, pause, late),
                    )
                    .await
                    {
                        Ok(ended) => ended,
                        Err(_) => (
                            Outcome::Failed(format!("{UPLOADS}: no answer in time")),
                            None,
                        ),
                    };
                    live.record(&outcome);
                    ClientResult {
                        route: Route::Session,
                        resumed: false,
                        outcome,
                        session,
                    }
                });
                continue;
            }
            // Every fourth is a mirror; one in eight resumes an upload.
            let route = if next_client % 4 == 3 {
                Route::Mirror
            } else {
                Route::Upload
            };
            let resumed = route == Route::Upload && next_client % 8 == 1;
            next_client += 1;
            let path = if resumed {
                format!("{}?{RESUMED}", route.path())
            } else {
                route.path().to_owned()
            };
            let payload = Arc::clone(&payload);
            clients.spawn(async move {
                tokio::time::sleep_until(at.into()).await;
                let outcome =
                    match tokio::time::timeout(client_timeout, client::post(addr, &path, &payload))
                        .await
                    {
                        Ok(Ok(response)) => classify(&response),
                        Ok(Err(e)) => Outcome::Failed(format!("{path}: {e}")),
                        Err(_) => Outcome::Failed(format!("{path}: no answer in time")),
                    };
                live.record(&outcome);
                ClientResult {
                    route,
                    resumed,
                    outcome,
                    session: None,
                }
            });
        }
    }

    let mut results = Vec::with_capacity(config.clients);
    while let Some(joined) = clients.join_next().await {
        results.push(joined.unwrap_or_else(|e| ClientResult {
            route: Route::Upload,
            resumed: false,
            outcome: Outcome::Failed(format!("client task: {e}")),
            session: None,
        }));
    }
    let mut stalled = Vec::with_capacity(config.stallers());
    while let Some(joined) = stallers.join_next().await {
        stalled.push(joined.unwrap_or_else(|e| StallerResult {
            kind: StallKind::Trickle,
            ended: None,
            late_answer: None,
            failed: Some(format!("staller task: {e}")),
            opened_session: false,
        }));
    }
    let mut slowly = Vec::with_capacity(config.slow_clients());
    while let Some(joined) = slow.join_next().await {
        slowly.push(joined.unwrap_or_else(|e| SlowResult {
            answer: Err(format!("slow client task: {e}")),
            took: Duration::ZERO,
        }));
    }
    finished.store(true, Ordering::Relaxed);
    let peak_in_use = sampler.await.unwrap_or(usize::MAX);
    let (peak_in_use_scraped, scrapes) = watcher.await.unwrap_or((f64::INFINITY, 0));
    Observed {
        results,
        stallers: stalled,
        slow: slowly,
        peak_in_use,
        peak_in_use_scraped,
        scrapes,
    }
}

/// Starts the stallers and the slow clients, and returns once each holds its
/// unit (each is admitted at once: the gate has room for them all, and nobody
/// else is there yet), or after 5 s. A staller gives up (hangs up) if it is not
/// cut by the run's planned end.
async fn place(
    config: &Config,
    addr: SocketAddr,
    gate: &UploadGate,
) -> (JoinSet<StallerResult>, JoinSet<SlowResult>) {
    let patience = config.planned_duration();
    let late = config.late_request_after();
    let mut stallers = JoinSet::new();
    for i in 0..config.stallers() {
        if i < config.tricklers() {
            stallers.spawn(async move {
                let outcome = client::stall(
                    addr,
                    "POST",
                    Route::Upload.path(),
                    TRICKLE_LENGTH,
                    b"",
                    Some(TRICKLE_EVERY),
                    patience,
                )
                .await;
                StallerResult {
                    kind: StallKind::Trickle,
                    ended: outcome.as_ref().ok().copied().flatten(),
                    late_answer: None,
                    failed: outcome
                        .err()
                        .map(|e| format!("POST /upload (staller): {e}")),
                    opened_session: false,
                }
            });
        } else {
            stallers.spawn(patch_staller(addr, patience, late));
        }
    }
    let body: Arc<[u8]> = vec![0x51; SLOW_BODY].into();
    let client_timeout = config.planned_duration() + Duration::from_secs(10);
    let mut slow = JoinSet::new();
    for _ in 0..config.slow_clients() {
        let body = Arc::clone(&body);
        slow.spawn(async move {
            let started = Instant::now();
            let sent = client::post_slowly(addr, Route::Upload.path(), &body, SLOW_RATE);
            let answer = match tokio::time::timeout(client_timeout, sent).await {
                Ok(Ok(response)) => Ok(response.status),
                Ok(Err(e)) => Err(format!("POST /upload (slow client): {e}")),
                Err(_) => Err("POST /upload (slow client): no answer in time".into()),
            };
            SlowResult {
                answer,
                took: started.elapsed(),
            }
        });
    }
    let placed = config.stallers() + config.slow_clients();
    let until = Instant::now() + Duration::from_secs(5);
    while placed > 0 && gate.in_use() < placed && Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    (stallers, slow)
}

/// A staller of [`StallKind::Patch`]: opens an upload session, sends a `PATCH`
/// that stops after a few bytes and waits (at most `patience`) for the server to
/// end it; once cut, waits `late` (past the idle limit) and sends one more
/// `PATCH`, to see what it is told.
async fn patch_staller(addr: SocketAddr, patience: Duration, late: Duration) -> StallerResult {
    let mut result = StallerResult {
        kind: StallKind::Patch,
        ended: None,
        late_answer: None,
        failed: None,
        opened_session: false,
    };
    let location = match client::request(addr, "POST", UPLOADS, b"").await {
        Ok(r) if r.status == 202 => r.header("location").map(str::to_owned),
        Ok(r) => {
            result.failed = Some(format!("POST {UPLOADS} (staller): status {}", r.status));
            return result;
        }
        Err(e) => {
            result.failed = Some(format!("POST {UPLOADS} (staller): {e}"));
            return result;
        }
    };
    let Some(location) = location else {
        result.failed = Some(format!("POST {UPLOADS} (staller): 202 without Location"));
        return result;
    };
    result.opened_session = true;
    let sent = [b'x'; STALLED_PATCH_SENT];
    let stalled = client::stall(
        addr,
        "PATCH",
        &location,
        STALLED_PATCH_LENGTH,
        &sent,
        None,
        patience,
    )
    .await;
    match stalled {
        Ok(ended) => result.ended = ended,
        Err(e) => {
            result.failed = Some(format!("PATCH {location} (staller): {e}"));
            return result;
        }
    }
    if result.cut() {
        tokio::time::sleep(late).await;
        let answer = client::request(addr, "PATCH", &location, b"late").await;
        result.late_answer = Some(match answer {
            Ok(r) => (r.status, String::from_utf8_lossy(&r.body).trim().to_owned()),
            Err(e) => (0, e.to_string()),
        });
    }
    result
}

/// Whether place `slot` of a wave of `size` is one of its `hang_ups` evenly spaced
/// hang-ups (never the first place: someone should be parked ahead of it); the
/// same spacing places the upload sessions among the other clients.
fn is_hang_up(slot: usize, size: usize, hang_ups: usize) -> bool {
    (0..hang_ups).any(|k| (k + 1) * size / (hang_ups + 1) == slot)
}

/// The `i`th of `parts` near-equal shares of `total`.
fn share(total: usize, parts: usize, i: usize) -> usize {
    total / parts + usize::from(i < total % parts)
}

/// One upload session's client: `POST /v2/uploads` (parked at the gate like any
/// upload), then the body in [`SESSION_CHUNKS`] `PATCH`es, each after `pause`,
/// then `PUT ?digest=` or `DELETE` as `plan` says; or, going quiet, nothing after
/// the first chunk until `late` has passed, then one more `PATCH`, to see what it
/// is told. Returns how it went and, if the `POST` opened a session, what was done
/// with it.
async fn session_client(
    addr: SocketAddr,
    plan: Plan,
    payload: &[u8],
    pause: Duration,
    late: Duration,
) -> (Outcome, Option<SessionRun>) {
    let failed = |step: &str, answer: std::io::Result<client::Response>| {
        Outcome::Failed(match answer {
            Ok(r) => format!(
                "{step}: status {}: {}",
                r.status,
                String::from_utf8_lossy(&r.body).trim()
            ),
            Err(e) => format!("{step}: {e}"),
        })
    };
    let opened = match client::request(addr, "POST", UPLOADS, b"").await {
        Ok(r) if r.status == 202 => r,
        Ok(r) if r.status == 503 => return (classify(&r), None),
        answer => return (failed(&format!("POST {UPLOADS}"), answer), None),
    };
    let Some(location) = opened.header("location").map(str::to_owned) else {
        return (
            Outcome::Failed(format!("POST {UPLOADS}: 202 without Location")),
            None,
        );
    };
    let mut run = SessionRun {
        plan,
        late_answer: None,
    };
    let chunks: Vec<&[u8]> = if payload.is_empty() {
        vec![&[]]
    } else {
        payload
            .chunks(payload.len().div_ceil(SESSION_CHUNKS))
            .collect()
    };
    for (k, chunk) in chunks.into_iter().enumerate() {
        tokio::time::sleep(pause).await;
        match client::request(addr, "PATCH", &location, chunk).await {
            Ok(r) if r.status == 202 => {}
            answer => return (failed(&format!("PATCH {location}"), answer), Some(run)),
        }
        if plan == Plan::GoQuiet && k == 0 {
            tokio::time::sleep(late).await;
            let answer = client::request(addr, "PATCH", &location, b"late").await;
            run.late_answer = Some(match answer {
                Ok(r) => (r.status, String::from_utf8_lossy(&r.body).trim().to_owned()),
                Err(e) => (0, e.to_string()),
            });
            return (Outcome::Admitted, Some(run));
        }
    }
    let (method, path, wanted) = match plan {
        Plan::Finish => ("PUT", format!("{location}?digest={}", digest(payload)), 201),
        Plan::Cancel | Plan::GoQuiet => ("DELETE", location, 204),
    };
    match client::request(addr, method, &path, b"").await {
        Ok(r) if r.status == wanted => (Outcome::Admitted, Some(run)),
        answer => (failed(&format!("{method} {path}"), answer), Some(run)),
    }
}

fn classify(response: &client::Response) -> Outcome {
    match (response.status, response.header("retry-after")) {
        (200, _) => Outcome::Admitted,
        (503, Some(retry_after)) => Outcome::Shed(retry_after.to_owned()),
        (503, None) => Outcome::Unavailable,
        (status, _) => Outcome::Failed(format!(
            "status {status}: {}",
            String::from_utf8_lossy(&response.body).trim()
        )),
    }
}

/// Samples the gate's units in use until `finished`; returns the most seen.
async fn sample_in_use(gate: UploadGate, finished: Arc<AtomicBool>) -> usize {
    let mut peak = 0;
    let mut tick = tokio::time::interval(Duration::from_millis(2));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    while !finished.load(Ordering::Relaxed) {
        tick.tick().await;
        peak = peak.max(gate.in_use());
    }
    peak
}

/// Scrapes `/metrics` every 250 ms for the peak of the `units_in_use` gauge, and
/// prints the progress line. Returns (peak gauge, scrapes).
async fn watch(
    config: Config,
    addr: SocketAddr,
    gate: UploadGate,
    live: Arc<Live>,
    finished: Arc<AtomicBool>,
    started: Instant,
) -> (f64, usize) {
    let peak = Mutex::new(0.0_f64);
    let mut scrapes = 0;
    let tty = std::io::stdout().is_terminal();
    let mut tick = tokio::time::interval(Duration::from_millis(250));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let mut ticks = 0_u32;
    while !finished.load(Ordering::Relaxed) {
        tick.tick().await;
        ticks += 1;
        if let Ok(page) = client::get(addr, "/metrics").await {
            let scrape = Scrape::parse(String::from_utf8_lossy(&page.body).into_owned());
            if let Some(in_use) = scrape.metric("units_in_use") {
                let mut peak = peak.lock().unwrap_or_else(|e| e.into_inner());
                *peak = peak.max(in_use);
            }
            scrapes += 1;
        }
        if config.verbose && (tty || ticks.is_multiple_of(4)) {
            let line = progress_line(&config, &gate, &live, started);
            let mut out = std::io::stdout().lock();
            if tty {
                let _ = write!(out, "\r{line}\x1b[K");
            } else {
                let _ = writeln!(out, "{line}");
            }
            let _ = out.flush();
        }
    }
    if config.verbose && tty {
        println!("\r{}\x1b[K", progress_line(&config, &gate, &live, started));
    }
    let peak = *peak.lock().unwrap_or_else(|e| e.into_inner());
    (peak, scrapes)
}

fn progress_line(config: &Config, gate: &UploadGate, live: &Live, started: Instant) -> String {
    let n = |c: &AtomicUsize| c.load(Ordering::Relaxed);
    format!(
        "  [{:>5.1}s] wave {}/{}  done {:>3}/{}: {} admitted, {} shed, {} hung up{}  |  gate {}/{} in use, {} parked{}",
        started.elapsed().as_secs_f64(),
        n(&live.wave),
        config.waves,
        n(&live.done),
        config.clients,
        n(&live.admitted),
        n(&live.shed),
        n(&live.hung_up),
        match n(&live.other) {
            0 => String::new(),
            other => format!(", {other} other"),
        },
        gate.in_use(),
        gate.capacity(),
        gate.waiters(),
        if gate.is_overloaded() {
            ", overloaded"
        } else {
            ""
        },
    )
}
