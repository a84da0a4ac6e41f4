//! The progress rule as a seeded random (property) test on Tokio's paused clock.
//!
//! Each seed builds a small gate (3 units, at most 2 a request) behind
//! `AdmitLayer` with the default `ProgressRule`, and a few dozen requests, each a
//! random mix of:
//!
//! - a decision: admit 1 unit, admit 2, watch (0 units), bypass;
//! - a client sender: fast, steady at 2 KiB/s, a trickle of 1 B/s, stalling after
//!   some bytes;
//! - a handler: reads the whole body, answers early, ignores a cut and never
//!   answers (stubborn), streams a response after reading, echoes the body back;
//! - a client reader: reads the whole response, or stops reading after a few frames
//!   (and looks again 40 s later, as hyper's next write would);
//! - maybe a hang-up at a random time: the client's task drops everything, or the
//!   request body fails (the client's own error) and nothing the server sends
//!   after reaches the client;
//!
//! and moments of pressure (parked acquires, `try_acquire` sheds). Everything runs
//! on one current-thread runtime with a paused clock, so a seed replays exactly.
//!
//! After every run: every unit is back, every admission released, every cut
//! counted once (the observer's cuts are the multiset of the cuts the requests
//! saw: the handler's `BodyCut`, a `408`, a response body ending in `BodyCut`, the
//! connection's abort), no honest client was cut, every response a client got
//! before hanging up is the handler's answer, `408` (within the cut's bound) or
//! `503` as the facts say, a cut handler's future went within the bound and
//! before its units, every staller the handler waited on was cut, every admitted
//! stream left unread was cut, its connection aborted and its units back, and
//! every watched request ended within the horizon.
//!
//! `PROGRESS_SEED=n` runs one seed, `PROGRESS_SEEDS=n` sets how many.

mod support;

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::fmt;
use std::pin::pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use admit::CutReason;
use admit_tower::{AdmitBody, AdmitLayer, AdmitPermit, BodyCut, ClientGone, Decision, HangUp};
use admit_tower::{ProgressRule, WatchedBody};
use bytes::Bytes;
use http::request::Parts;
use http::{Request, Response, StatusCode};
use http_body_util::channel::Sender;
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Channel, Full};
use support::{gate, Route, TestGate};
use tokio::task::JoinHandle;
use tokio::time::{sleep, sleep_until, Instant};
use tower::{Layer, ServiceExt};

type BoxError = Box<dyn std::error::Error + Send + Sync>;
type ClientBody = Channel<Bytes, ClientHungUp>;
type ResBody = UnsyncBoxBody<Bytes, BoxError>;

const CAPACITY: usize = 3;
const WAIT_BUDGET: Duration = Duration::from_secs(20);
/// Clients start within this.
const STARTS: Duration = Duration::from_secs(60);
/// Every watched request has ended by then (the longest: a start at 60 s, a
/// 20 s wait, a 20 s upload, a 40 s stop in reading, a stream).
const HORIZON: Duration = Duration::from_secs(400);
/// A client that stops reading looks again this long after: past the calm
/// response idle limit (30 s) plus the cut's bound (1 s) and a look (1 s).
const REPOLL: Duration = Duration::from_secs(40);
const RULE: ProgressRule = ProgressRule::new();
/// `ProgressRule::new()`'s bound for a cut handler.
const CUT_BOUND: Duration = Duration::from_secs(1);

// ---------------------------------------------------------------------------
// A small deterministic generator (SplitMix64).

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// In `lo..=hi`.
    fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next() % (hi - lo + 1)
    }

    fn millis(&mut self, max: Duration) -> Duration {
        Duration::from_millis(self.range(0, max.as_millis() as u64))
    }

    /// An index picked by weight.
    fn weighted(&mut self, weights: &[u64]) -> usize {
        let mut roll = self.next() % weights.iter().sum::<u64>();
        for (i, w) in weights.iter().enumerate() {
            if roll < *w {
                return i;
            }
            roll -= w;
        }
        unreachable!()
    }
}

// ---------------------------------------------------------------------------
// The plan of one request.

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Decide {
    One,
    Two,
    Watch,
    Bypass,
}

impl Decide {
    fn path(self) -> &'static str {
        match self {
            Self::One => "/one",
            Self::Two => "/two",
            Self::Watch => "/watch",
            Self::Bypass => "/bypass",
        }
    }

    /// The cut event's source and units.
    fn cut_key(self) -> (&'static str, usize) {
        match self {
            Self::One => ("upload", 1),
            Self::Two => ("mirror", 2),
            Self::Watch => ("upload", 0),
            Self::Bypass => ("bypass", 0),
        }
    }

    fn admitted(self) -> bool {
        matches!(self, Self::One | Self::Two)
    }

    fn watched(self) -> bool {
        self != Self::Bypass
    }
}

fn decide(head: &Parts) -> Decision<Route> {
    match head.uri.path() {
        "/one" => Decision::admit(1, Route::Upload),
        "/two" => Decision::admit(2, Route::Mirror),
        "/watch" => Decision::watch(Route::Upload),
        _ => Decision::Bypass,
    }
}

#[derive(Debug, Clone, Copy)]
enum Sending {
    /// All of it as fast as the handler takes it, in 16 KiB frames.
    Fast { bytes: usize },
    /// 2 KiB a second.
    Steady { seconds: usize },
    /// A byte a second.
    Trickle { bytes: usize },
    /// `bytes` at once, then nothing, the body left open.
    Stall { bytes: usize },
}

impl Sending {
    fn total(self) -> usize {
        match self {
            Self::Fast { bytes } | Self::Trickle { bytes } | Self::Stall { bytes } => bytes,
            Self::Steady { seconds } => seconds * 2048,
        }
    }

    /// At 2 KiB a second or faster, to the end.
    fn honest(self) -> bool {
        matches!(self, Self::Fast { .. } | Self::Steady { .. })
    }
}

#[derive(Debug, Clone, Copy)]
enum Handling {
    /// Reads the whole body; `200`, or `500` if the read failed.
    Reader,
    /// Answers `202` at once (after one read if `read_first`), the body unread.
    Early { read_first: bool },
    /// Reads the whole body; `201`, `500` on a failure, and never answers a cut.
    Stubborn,
    /// Reads the whole body, then answers `203` with `frames` KiB frames, one
    /// every `pace`.
    Stream { frames: usize, pace: Duration },
    /// Answers `206` at once with the request body as the response body.
    Echo,
}

impl Handling {
    fn reads_body(self) -> bool {
        matches!(self, Self::Reader | Self::Stubborn | Self::Stream { .. })
    }
}

#[derive(Debug, Clone, Copy)]
enum Reading {
    Whole,
    /// Reads `frames` data frames, stops for `REPOLL`, then reads on.
    StopAfter {
        frames: usize,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum HangUpMode {
    /// The client's task drops the response future or body (hyper on a closed
    /// connection).
    Drop,
    /// The request body fails with the client's own error and the hang-up
    /// signal fires; the server runs on, and nothing it sends is read.
    Abort,
}

#[derive(Debug, Clone, Copy)]
struct Plan {
    start: Duration,
    decide: Decide,
    sending: Sending,
    handling: Handling,
    reading: Reading,
    /// After how long from its start the client hangs up.
    hang_up: Option<(Duration, HangUpMode)>,
}

impl Plan {
    fn random(rng: &mut Rng) -> Self {
        let decide = [Decide::One, Decide::Two, Decide::Watch, Decide::Bypass]
            [rng.weighted(&[35, 25, 20, 20])];
        let sending = match rng.weighted(&[30, 25, 15, 30]) {
            0 => Sending::Fast {
                bytes: rng.range(0, 64 * 1024) as usize,
            },
            1 => Sending::Steady {
                seconds: rng.range(1, 20) as usize,
            },
            2 => Sending::Trickle {
                bytes: rng.range(40, 120) as usize,
            },
            _ => Sending::Stall {
                bytes: rng.range(0, 8 * 1024) as usize,
            },
        };
        let handling = match rng.weighted(&[30, 15, 20, 20, 15]) {
            0 => Handling::Reader,
            1 => Handling::Early {
                read_first: rng.range(0, 1) == 1,
            },
            2 => Handling::Stubborn,
            3 => Handling::Stream {
                frames: rng.range(1, 12) as usize,
                pace: Duration::from_millis([0, 100, 500][rng.range(0, 2) as usize]),
            },
            _ => Handling::Echo,
        };
        let reading = if rng.range(0, 9) < 7 {
            Reading::Whole
        } else {
            Reading::StopAfter {
                frames: rng.range(1, 4) as usize,
            }
        };
        let hang_up = (rng.range(0, 3) == 0).then(|| {
            let mode = if rng.range(0, 1) == 0 {
                HangUpMode::Drop
            } else {
                HangUpMode::Abort
            };
            // Half of them near the calm limits (30 s), where a hang-up races
            // a cut and a stubborn handler's bound.
            let after = if rng.range(0, 1) == 0 {
                rng.millis(Duration::from_secs(90))
            } else {
                Duration::from_secs(28) + rng.millis(Duration::from_secs(6))
            };
            (after, mode)
        });
        Self {
            start: rng.millis(STARTS),
            decide,
            sending,
            handling,
            reading,
            hang_up,
        }
    }

    /// Sends at 2 KiB a second or faster and reads its response: never cut.
    fn honest(&self) -> bool {
        self.sending.honest() && matches!(self.reading, Reading::Whole)
    }
}

#[derive(Debug, Clone, Copy)]
enum Pressure {
    /// Parks for `units`, gives up after `patience` if set, holds for `hold`.
    Park {
        at: Duration,
        units: usize,
        patience: Option<Duration>,
        hold: Duration,
    },
    /// A `try_acquire` of one unit: shed if full, else held for `hold`.
    Try { at: Duration, hold: Duration },
}

impl Pressure {
    fn random(rng: &mut Rng) -> Self {
        let at = rng.millis(Duration::from_secs(80));
        let hold = rng.millis(Duration::from_secs(8));
        if rng.range(0, 1) == 0 {
            Self::Park {
                at,
                units: rng.range(1, 2) as usize,
                patience: (rng.range(0, 2) == 0).then(|| rng.millis(Duration::from_secs(10))),
                hold,
            }
        } else {
            Self::Try { at, hold }
        }
    }
}

// ---------------------------------------------------------------------------
// What each request saw.

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Read {
    Whole(usize),
    Cut(CutReason),
    Failed,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum BodyEnd {
    Complete(usize),
    Cut(CutReason),
    Failed,
}

#[derive(Debug, Default)]
struct Record {
    handler_called: bool,
    /// How the handler's read of the body ended.
    handler_read: Option<Read>,
    /// When the handler saw the cut.
    cut_seen_at: Option<Duration>,
    /// The status the handler answered with.
    handler_answered: Option<StatusCode>,
    /// When the handler's future (its buffers) went, and whether its permit was
    /// still held then.
    handler_dropped_at: Option<Duration>,
    permit_held_at_drop: Option<bool>,
    /// The response the client got before hanging up, and when.
    status: Option<StatusCode>,
    status_at: Option<Duration>,
    /// The `408`'s text.
    cut_text: Option<String>,
    /// A response that came after the client hung up (nobody reads it), and
    /// whether it was the layer's "client gone".
    late: Option<(StatusCode, bool)>,
    /// How the response body ended, as far as the client read it.
    body_end: Option<BodyEnd>,
    /// Data frames read before stopping, if the client stopped.
    stopped_after: Option<usize>,
    /// Whether the response body still held units when the client looked again.
    held_at_repoll: Option<bool>,
    /// Calls of the `HangUp`'s abort (a response cut).
    aborted: usize,
    hung_up: bool,
    finished: bool,
}

struct World {
    base: Instant,
    plans: Vec<Plan>,
    records: Vec<Mutex<Record>>,
    extra_sheds: AtomicUsize,
}

impl World {
    fn rec(&self, id: usize) -> MutexGuard<'_, Record> {
        self.records[id].lock().unwrap()
    }

    fn now(&self) -> Duration {
        Instant::now() - self.base
    }
}

/// The request's index, as an extension.
#[derive(Debug, Clone, Copy)]
struct Id(usize);

/// The client's own failure of its body (a hang-up as hyper reports it).
#[derive(Debug)]
struct ClientHungUp;

impl fmt::Display for ClientHungUp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("the client hung up")
    }
}

impl std::error::Error for ClientHungUp {}

struct AbortOnDrop(JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

// ---------------------------------------------------------------------------
// The handler.

/// Dropped with the handler's future: when its buffers go.
struct HandlerGuard {
    id: usize,
    world: Arc<World>,
    permit: Option<AdmitPermit<Route>>,
}

impl Drop for HandlerGuard {
    fn drop(&mut self) {
        let now = self.world.now();
        let mut rec = self.world.rec(self.id);
        rec.handler_dropped_at = Some(now);
        rec.permit_held_at_drop = self.permit.as_ref().map(AdmitPermit::is_held);
    }
}

fn classify(error: &BoxError) -> Option<CutReason> {
    BodyCut::find(&**error).map(BodyCut::reason)
}

/// Reads the whole body; records how it ended in the same poll as the end.
async fn read_all(mut body: WatchedBody<ClientBody>, world: &World, id: usize) -> Read {
    let mut n = 0;
    let read = loop {
        match body.frame().await {
            None => break Read::Whole(n),
            Some(Ok(frame)) => n += frame.data_ref().map_or(0, Bytes::len),
            Some(Err(error)) => break classify(&error).map_or(Read::Failed, Read::Cut),
        }
    };
    let now = world.now();
    let mut rec = world.rec(id);
    rec.handler_read = Some(read);
    if matches!(read, Read::Cut(_)) {
        rec.cut_seen_at = Some(now);
    }
    read
}

fn full(text: &'static str) -> ResBody {
    Full::new(Bytes::from_static(text.as_bytes()))
        .map_err(|never| match never {})
        .boxed_unsync()
}

async fn handle(
    request: Request<WatchedBody<ClientBody>>,
    world: Arc<World>,
) -> Result<Response<ResBody>, Infallible> {
    let id = request.extensions().get::<Id>().expect("the client's id").0;
    let plan = world.plans[id];
    let _guard = HandlerGuard {
        id,
        world: Arc::clone(&world),
        permit: request.extensions().get::<AdmitPermit<Route>>().cloned(),
    };
    world.rec(id).handler_called = true;
    let body = request.into_body();
    let (status, body) = match plan.handling {
        Handling::Reader => match read_all(body, &world, id).await {
            Read::Whole(_) => (StatusCode::OK, full("read")),
            _ => (StatusCode::INTERNAL_SERVER_ERROR, full("failed")),
        },
        Handling::Early { read_first } => {
            let mut body = body;
            if read_first {
                if let Some(Err(error)) = body.frame().await {
                    let read = classify(&error).map_or(Read::Failed, Read::Cut);
                    let now = world.now();
                    let mut rec = world.rec(id);
                    rec.handler_read = Some(read);
                    if matches!(read, Read::Cut(_)) {
                        rec.cut_seen_at = Some(now);
                    }
                }
            }
            drop(body);
            (StatusCode::ACCEPTED, full("early"))
        }
        Handling::Stubborn => match read_all(body, &world, id).await {
            Read::Whole(_) => (StatusCode::CREATED, full("stubborn")),
            Read::Cut(_) => {
                // Ignores the cut and never answers.
                std::future::pending::<()>().await;
                unreachable!()
            }
            Read::Failed => (StatusCode::INTERNAL_SERVER_ERROR, full("failed")),
        },
        Handling::Stream { frames, pace } => match read_all(body, &world, id).await {
            Read::Whole(_) => {
                let (mut tx, body) = Channel::<Bytes, BoxError>::new(1);
                tokio::spawn(async move {
                    for _ in 0..frames {
                        if tx.send_data(Bytes::from(vec![7; 1024])).await.is_err() {
                            return;
                        }
                        if !pace.is_zero() {
                            sleep(pace).await;
                        }
                    }
                });
                (
                    StatusCode::NON_AUTHORITATIVE_INFORMATION,
                    body.boxed_unsync(),
                )
            }
            _ => (StatusCode::INTERNAL_SERVER_ERROR, full("failed")),
        },
        Handling::Echo => (StatusCode::PARTIAL_CONTENT, body.boxed_unsync()),
    };
    world.rec(id).handler_answered = Some(status);
    let mut response = Response::new(body);
    *response.status_mut() = status;
    Ok(response)
}

// ---------------------------------------------------------------------------
// The client.

/// Feeds the request body per the plan; at the hang-up (if any) signals it and,
/// in `Abort` mode, fails the body. A stalled body stays open.
async fn feed(
    mut tx: Sender<Bytes, ClientHungUp>,
    sending: Sending,
    hang_up: Option<(Instant, HangUpMode)>,
    gone: tokio::sync::watch::Sender<bool>,
) {
    let send = async {
        match sending {
            Sending::Fast { bytes } => {
                let mut left = bytes;
                while left > 0 {
                    let n = left.min(16 * 1024);
                    if tx.send_data(Bytes::from(vec![1; n])).await.is_err() {
                        return false;
                    }
                    left -= n;
                }
            }
            Sending::Steady { seconds } => {
                for _ in 0..seconds {
                    if tx.send_data(Bytes::from(vec![2; 2048])).await.is_err() {
                        return false;
                    }
                    sleep(Duration::from_secs(1)).await;
                }
            }
            Sending::Trickle { bytes } => {
                for _ in 0..bytes {
                    if tx.send_data(Bytes::from_static(b"t")).await.is_err() {
                        return false;
                    }
                    sleep(Duration::from_secs(1)).await;
                }
            }
            Sending::Stall { bytes } => {
                if bytes > 0 && tx.send_data(Bytes::from(vec![3; bytes])).await.is_err() {
                    return false;
                }
                return std::future::pending().await;
            }
        }
        true
    };
    let hang_at = hang_up.map(|(at, _)| at);
    let hung = async {
        match hang_at {
            Some(at) => sleep_until(at).await,
            None => std::future::pending().await,
        }
    };
    let sent = tokio::select! {
        biased;
        sent = send => Some(sent),
        () = hung => None,
    };
    match (sent, hang_up) {
        (Some(ended), hang_up) => {
            if ended {
                drop(tx); // the body's end
            }
            if let Some((at, _)) = hang_up {
                sleep_until(at).await;
                let _ = gone.send(true);
            }
        }
        (None, Some((_, mode))) => {
            let _ = gone.send(true);
            match mode {
                HangUpMode::Abort => tx.abort(ClientHungUp),
                // The connection is gone with the client's task: the body is
                // neither ended nor failed before the handler is dropped.
                HangUpMode::Drop => std::future::pending::<()>().await,
            }
        }
        (None, None) => unreachable!(),
    }
}

type Service = admit_tower::Admit<
    tower::util::BoxCloneService<Request<WatchedBody<ClientBody>>, Response<ResBody>, Infallible>,
    Route,
    fn(&Parts) -> Decision<Route>,
>;

async fn client(id: usize, world: Arc<World>, service: Service) {
    let plan = world.plans[id];
    sleep_until(world.base + plan.start).await;
    let (tx, body) = Channel::new(1);
    let (gone, gone_rx) = tokio::sync::watch::channel(false);
    let hang_up = HangUp::new(move || {
        let mut gone = gone_rx.clone();
        async move {
            if gone.wait_for(|gone| *gone).await.is_err() {
                // The feeder ended without a hang-up: none will come.
                std::future::pending::<()>().await;
            }
        }
    })
    .with_abort({
        let world = Arc::clone(&world);
        move || world.rec(id).aborted += 1
    });
    let mut request = Request::post(plan.decide.path()).body(body).unwrap();
    request.extensions_mut().insert(hang_up);
    request.extensions_mut().insert(Id(id));
    let hang_up = plan
        .hang_up
        .map(|(after, mode)| (Instant::now() + after, mode));
    let feeder = AbortOnDrop(tokio::spawn(feed(tx, plan.sending, hang_up, gone)));

    exchange(id, &world, service, request, hang_up).await;
    drop(feeder);
    world.rec(id).finished = true;
}

/// Sleeps until the client hangs up (never without a hang-up).
async fn hung(hang_up: Option<(Instant, HangUpMode)>) {
    match hang_up {
        Some((at, _)) => sleep_until(at).await,
        None => std::future::pending().await,
    }
}

async fn exchange(
    id: usize,
    world: &World,
    service: Service,
    request: Request<ClientBody>,
    hang_up: Option<(Instant, HangUpMode)>,
) {
    let plan = world.plans[id];
    let mut future = pin!(service.oneshot(request));
    let response = match hang_up {
        Some((at, HangUpMode::Drop)) => tokio::select! {
            biased;
            response = &mut future => response,
            () = sleep_until(at) => {
                world.rec(id).hung_up = true;
                return;
            }
        },
        Some((at, HangUpMode::Abort)) => {
            // The server runs on after the client's failure; what it answers
            // after the hang-up is never read.
            let response = future.await.unwrap();
            if Instant::now() >= at {
                let gone = response.extensions().get::<ClientGone>().is_some();
                let mut rec = world.rec(id);
                rec.hung_up = true;
                rec.late = Some((response.status(), gone));
                return;
            }
            Ok(response)
        }
        None => future.await,
    };
    let mut response = response.unwrap();
    let status = response.status();
    {
        let now = world.now();
        let mut rec = world.rec(id);
        rec.status = Some(status);
        rec.status_at = Some(now);
    }
    let body = response.body_mut();
    let read = async {
        if status == StatusCode::REQUEST_TIMEOUT {
            let mut text = Vec::new();
            while let Some(Ok(frame)) = body.frame().await {
                text.extend_from_slice(frame.data_ref().map_or(&[][..], |d| &d[..]));
            }
            world.rec(id).cut_text = Some(String::from_utf8_lossy(&text).into_owned());
            return;
        }
        read_response(id, world, body, plan.reading).await;
    };
    tokio::select! {
        biased;
        () = read => {}
        () = hung(hang_up) => world.rec(id).hung_up = true,
    }
}

async fn read_response(id: usize, world: &World, body: &mut AdmitBody<ResBody>, reading: Reading) {
    let mut bytes = 0;
    let mut frames = 0;
    let stop = match reading {
        Reading::Whole => None,
        Reading::StopAfter { frames } => Some(frames),
    };
    let end = loop {
        if stop == Some(frames) && world.rec(id).stopped_after.is_none() {
            world.rec(id).stopped_after = Some(frames);
            // Hyper holds a frame it cannot write: nobody polls the body.
            sleep(REPOLL).await;
            world.rec(id).held_at_repoll = Some(body.holds_permit());
        }
        match body.frame().await {
            None => break BodyEnd::Complete(bytes),
            Some(Ok(frame)) => {
                if let Some(data) = frame.data_ref() {
                    bytes += data.len();
                    frames += 1;
                }
            }
            Some(Err(error)) => break classify(&error).map_or(BodyEnd::Failed, BodyEnd::Cut),
        }
    };
    world.rec(id).body_end = Some(end);
}

// ---------------------------------------------------------------------------
// One run.

#[derive(Debug, Default)]
struct Tally {
    requests: usize,
    cuts: BTreeMap<String, usize>,
    shed_503: usize,
    honest: usize,
    stragglers: usize,
    hung_up: usize,
    /// Answered 408.
    timeouts_408: usize,
    /// Stubborn handlers dropped after a cut.
    stubborn_dropped: usize,
    /// Cut, then the client hung up.
    cut_then_hung_up: usize,
    /// Hung up while parked, answered "client gone".
    client_gone: usize,
}

fn pressure_task(gate: TestGate, world: Arc<World>, pressure: Pressure) -> JoinHandle<()> {
    tokio::spawn(async move {
        match pressure {
            Pressure::Park {
                at,
                units,
                patience,
                hold,
            } => {
                sleep_until(world.base + at).await;
                let acquire = gate.acquire(units, Route::Mirror);
                let outcome = match patience {
                    Some(patience) => match tokio::time::timeout(patience, acquire).await {
                        Ok(outcome) => outcome,
                        Err(_) => return, // dropped while parked: counts nothing
                    },
                    None => acquire.await,
                };
                match outcome {
                    Ok(permit) => {
                        sleep(hold).await;
                        drop(permit);
                    }
                    Err(_) => {
                        world.extra_sheds.fetch_add(1, Ordering::SeqCst);
                    }
                }
            }
            Pressure::Try { at, hold } => {
                sleep_until(world.base + at).await;
                match gate.try_acquire(1, Route::Mirror) {
                    Ok(permit) => {
                        sleep(hold).await;
                        drop(permit);
                    }
                    Err(_) => {
                        world.extra_sheds.fetch_add(1, Ordering::SeqCst);
                    }
                }
            }
        }
    })
}

fn run_seed(seed: u64) -> Tally {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap();
    runtime.block_on(run(seed))
}

async fn run(seed: u64) -> Tally {
    let mut rng = Rng(seed);
    let n = rng.range(24, 40) as usize;
    let plans: Vec<Plan> = (0..n).map(|_| Plan::random(&mut rng)).collect();
    let pressures: Vec<Pressure> = (0..rng.range(0, 6))
        .map(|_| Pressure::random(&mut rng))
        .collect();

    let (gate, counting) = gate(CAPACITY, WAIT_BUDGET);
    let world = Arc::new(World {
        base: Instant::now(),
        records: plans.iter().map(|_| Mutex::default()).collect(),
        plans,
        extra_sheds: AtomicUsize::new(0),
    });
    let handler = {
        let world = Arc::clone(&world);
        tower::util::BoxCloneService::new(tower::service_fn(
            move |request: Request<WatchedBody<ClientBody>>| handle(request, Arc::clone(&world)),
        ))
    };
    let service: Service = AdmitLayer::new(gate.clone(), decide as fn(&Parts) -> Decision<Route>)
        .progress(RULE)
        .allow_unwatched()
        .layer(handler);

    let clients: Vec<JoinHandle<()>> = (0..n)
        .map(|id| tokio::spawn(client(id, Arc::clone(&world), service.clone())))
        .collect();
    let pressed: Vec<JoinHandle<()>> = pressures
        .iter()
        .map(|p| pressure_task(gate.clone(), Arc::clone(&world), *p))
        .collect();

    sleep_until(world.base + HORIZON).await;

    let describe =
        |id: usize| format!("request {id}: {:?}\n  {:?}", world.plans[id], world.rec(id));

    // By the horizon, every watched request has ended and its units are back;
    // only bypassed clients that stalled their body may still wait.
    for (id, handle) in clients.iter().enumerate() {
        let plan = world.plans[id];
        let may_straggle = plan.decide == Decide::Bypass
            && matches!(plan.sending, Sending::Stall { .. })
            && plan.hang_up.is_none();
        assert!(
            handle.is_finished() || may_straggle,
            "unfinished at the horizon: {}",
            describe(id)
        );
    }
    for handle in &pressed {
        assert!(handle.is_finished(), "a pressure task is unfinished");
    }
    assert_eq!(gate.in_use(), 0, "units in use at the horizon");
    assert_eq!(
        counting.in_use(),
        0,
        "the observer's units in use at the horizon"
    );

    // Abort the stragglers, then let everything settle.
    let mut tally = Tally {
        requests: n,
        ..Tally::default()
    };
    for handle in &clients {
        if !handle.is_finished() {
            tally.stragglers += 1;
            handle.abort();
        }
    }
    for handle in clients.into_iter().chain(pressed) {
        if let Err(error) = handle.await {
            if error.is_panic() {
                std::panic::resume_unwind(error.into_panic());
            }
        }
    }
    sleep(Duration::from_secs(10)).await;

    assert_eq!(gate.in_use(), 0);
    assert_eq!(counting.in_use(), 0);
    assert_eq!(
        counting.released.load(Ordering::SeqCst),
        counting.admitted(),
        "released != admitted"
    );

    // Each request, by the facts it saw.
    let mut expected_cuts: Vec<String> = Vec::new();
    let mut responses_503 = 0;
    for id in 0..n {
        let plan = world.plans[id];
        let rec = world.rec(id);
        let what = || describe_locked(id, &plan, &rec);

        // The cut, as each party saw it: one reason, from at most one rule.
        let mut reasons = Vec::new();
        if let Some(Read::Cut(reason)) = rec.handler_read {
            reasons.push(reason);
        }
        if let Some(BodyEnd::Cut(reason)) = rec.body_end {
            reasons.push(reason);
        }
        assert!(rec.aborted <= 1, "aborted twice: {}", what());
        if rec.aborted == 1 {
            reasons.push(CutReason::Response);
        }
        assert!(
            reasons.windows(2).all(|w| w[0] == w[1]),
            "a request cut for two reasons: {}",
            what()
        );
        if let Some(reason) = reasons.first() {
            assert!(
                plan.decide.watched(),
                "a bypassed request was cut: {}",
                what()
            );
            let (source, units) = plan.decide.cut_key();
            expected_cuts.push(format!("{source}/{units}/{reason:?}"));
        }
        let cut = !reasons.is_empty();

        // No honest client is cut.
        if plan.honest() {
            tally.honest += 1;
            assert!(!cut, "an honest client was cut: {}", what());
        }

        // What the client got, if it got anything before hanging up.
        if let Some(status) = rec.status {
            if status == StatusCode::REQUEST_TIMEOUT {
                assert!(
                    matches!(rec.handler_read, Some(Read::Cut(_))),
                    "408 without a cut the handler saw: {}",
                    what()
                );
                if let Some(text) = &rec.cut_text {
                    assert!(text.contains("cut"), "408's text: {text:?}: {}", what());
                }
                let seen = rec.cut_seen_at.expect("seen");
                let at = rec.status_at.expect("answered");
                assert!(
                    at - seen <= CUT_BOUND,
                    "408 {:?} after the cut: {}",
                    at - seen,
                    what()
                );
            } else if status == StatusCode::SERVICE_UNAVAILABLE {
                responses_503 += 1;
                assert!(
                    plan.decide.admitted() && !rec.handler_called,
                    "503 for a request that was not shed: {}",
                    what()
                );
            } else {
                assert_eq!(
                    rec.handler_answered,
                    Some(status),
                    "not the handler's answer: {}",
                    what()
                );
                assert!(
                    !matches!(rec.handler_read, Some(Read::Cut(_))),
                    "the handler's answer after a cut reached the client: {}",
                    what()
                );
            }
        }
        if let Some((status, gone)) = rec.late {
            if status == StatusCode::SERVICE_UNAVAILABLE {
                responses_503 += 1;
            }
            if gone {
                assert!(!rec.handler_called, "client gone after a call: {}", what());
            }
        }

        // The handler's buffers went before its units, within the bound of a cut.
        if rec.handler_called {
            let dropped = rec.handler_dropped_at;
            let is_straggler = !rec.finished && !rec.hung_up;
            assert!(
                dropped.is_some() || is_straggler,
                "the handler's future was never dropped: {}",
                what()
            );
            if plan.decide.admitted() && dropped.is_some() {
                assert_eq!(
                    rec.permit_held_at_drop,
                    Some(true),
                    "units returned before the handler's buffers: {}",
                    what()
                );
            }
            if let (Some(seen), Some(dropped)) = (rec.cut_seen_at, dropped) {
                assert!(
                    dropped - seen <= CUT_BOUND,
                    "a cut handler dropped {:?} after the cut: {}",
                    dropped - seen,
                    what()
                );
            }
        }

        // Stallers holding the gate are cut: a stalled or trickled body that
        // the handler reads, with nobody hanging up.
        if plan.decide.watched()
            && plan.hang_up.is_none()
            && rec.handler_called
            && plan.handling.reads_body()
            && !plan.sending.honest()
        {
            assert_eq!(
                rec.status,
                Some(StatusCode::REQUEST_TIMEOUT),
                "a staller was not cut: {}",
                what()
            );
        }
        // An admitted stream its client stopped reading is cut, its connection
        // aborted, and its units back by the next look.
        if let (Handling::Stream { frames, .. }, Some(k)) = (plan.handling, rec.stopped_after) {
            if plan.decide.admitted()
                && frames > k
                && plan.hang_up.is_none()
                && rec.status == Some(StatusCode::NON_AUTHORITATIVE_INFORMATION)
            {
                assert_eq!(rec.aborted, 1, "a stopped reader not aborted: {}", what());
                assert_eq!(
                    rec.held_at_repoll,
                    Some(false),
                    "units still held: {}",
                    what()
                );
                assert_eq!(
                    rec.body_end,
                    Some(BodyEnd::Cut(CutReason::Response)),
                    "{}",
                    what()
                );
            }
        }
        // An honest exchange delivered everything.
        if plan.honest() && plan.hang_up.is_none() && rec.handler_called {
            match plan.handling {
                Handling::Reader | Handling::Stubborn => assert_eq!(
                    rec.handler_read,
                    Some(Read::Whole(plan.sending.total())),
                    "{}",
                    what()
                ),
                Handling::Echo => assert_eq!(
                    rec.body_end,
                    Some(BodyEnd::Complete(plan.sending.total())),
                    "{}",
                    what()
                ),
                Handling::Stream { frames, .. } => assert_eq!(
                    rec.body_end,
                    Some(BodyEnd::Complete(frames * 1024)),
                    "{}",
                    what()
                ),
                Handling::Early { .. } => {}
            }
        }
        if rec.hung_up {
            tally.hung_up += 1;
            tally.cut_then_hung_up += usize::from(cut);
        }
        tally.timeouts_408 += usize::from(rec.status == Some(StatusCode::REQUEST_TIMEOUT));
        tally.client_gone += usize::from(matches!(rec.late, Some((_, true))));
        tally.stubborn_dropped += usize::from(
            matches!(plan.handling, Handling::Stubborn)
                && matches!(rec.handler_read, Some(Read::Cut(_))),
        );
        if rec.status == Some(StatusCode::SERVICE_UNAVAILABLE) {
            tally.shed_503 += 1;
        }
        if let Some(reason) = reasons.first() {
            *tally.cuts.entry(format!("{reason:?}")).or_default() += 1;
        }
    }

    // Every cut counted once: the observer's cuts are the requests' cuts.
    let mut observed: Vec<String> = counting
        .cuts()
        .iter()
        .map(|c| format!("{}/{}/{:?}", c.source, c.units, c.reason))
        .collect();
    observed.sort();
    expected_cuts.sort();
    assert_eq!(
        observed, expected_cuts,
        "the observer's cuts vs the requests'"
    );

    // Every shed is a 503 a client was sent, or one of the pressure's.
    assert_eq!(
        counting.shed(),
        responses_503 + world.extra_sheds.load(Ordering::SeqCst),
        "sheds vs 503s"
    );
    tally
}

fn describe_locked(id: usize, plan: &Plan, rec: &Record) -> String {
    format!("request {id}: {plan:?}\n  {rec:?}")
}

#[test]
fn random_clients_and_handlers_keep_the_books_exact() {
    let seeds: Vec<u64> = match std::env::var("PROGRESS_SEED") {
        Ok(seed) => vec![seed.parse().expect("PROGRESS_SEED: a number")],
        Err(_) => {
            let n = std::env::var("PROGRESS_SEEDS")
                .ok()
                .and_then(|n| n.parse().ok())
                .unwrap_or(200u64);
            (0..n).map(|i| 0x5eed_0000 + i).collect()
        }
    };
    let mut total = Tally::default();
    for seed in seeds {
        let tally = std::panic::catch_unwind(|| run_seed(seed)).unwrap_or_else(|panic| {
            let message = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                .unwrap_or_default();
            panic!("seed {seed} failed (rerun with PROGRESS_SEED={seed}): {message}")
        });
        total.requests += tally.requests;
        total.shed_503 += tally.shed_503;
        total.honest += tally.honest;
        total.stragglers += tally.stragglers;
        total.hung_up += tally.hung_up;
        total.timeouts_408 += tally.timeouts_408;
        total.stubborn_dropped += tally.stubborn_dropped;
        total.cut_then_hung_up += tally.cut_then_hung_up;
        total.client_gone += tally.client_gone;
        for (reason, count) in tally.cuts {
            *total.cuts.entry(reason).or_default() += count;
        }
    }
    println!("{total:?}");
    // The mix exercised every kind of cut.
    for reason in ["Idle", "Rate", "Response"] {
        assert!(
            total.cuts.get(reason).copied().unwrap_or(0) > 0,
            "no {reason} cut in the whole run: {total:?}"
        );
    }
}
