//! The progress rule, in process on Tokio's paused clock: every limit is virtual
//! time, every client is a channel body fed by a task on the same clock, so each
//! cut's instant follows from the rule, not from the machine's speed.

mod support;

use std::convert::Infallible;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use admit::{CutReason, Leases};
use admit_tower::{AdmitBody, AdmitLayer, BodyCut, Decision, HangUp, ProgressRule, WatchedBody};
use bytes::Bytes;
use http::request::Parts;
use http::{Request, Response, StatusCode};
use http_body::Body;
use http_body_util::channel::Sender;
use http_body_util::{BodyExt, Channel, Full};
use support::{gate, Route, TestGate};
use tokio::time::Instant;
use tower::{Layer, Service, ServiceExt};

type ClientBody = Channel<Bytes, Infallible>;

/// `/upload` is admitted for 1 unit, `/patch` is watched on units held elsewhere,
/// anything else bypassed.
fn decide(head: &Parts) -> Decision<Route> {
    match head.uri.path() {
        "/upload" => Decision::admit(1, Route::Upload),
        "/patch" => Decision::watch(Route::Upload),
        _ => Decision::Bypass,
    }
}

fn layer(gate: &TestGate) -> AdmitLayer<Route, fn(&Parts) -> Decision<Route>> {
    AdmitLayer::new(gate.clone(), decide as fn(&Parts) -> Decision<Route>).allow_unwatched()
}

/// A client body the test feeds, and the request carrying it.
fn client(path: &str) -> (Sender<Bytes, Infallible>, Request<ClientBody>) {
    let (tx, body) = Channel::new(1);
    (tx, Request::post(path).body(body).unwrap())
}

/// Sends `chunk` bytes every `every`, `times` times, then ends the body (or
/// keeps it open, stalled, if `end` is false).
fn feed(mut tx: Sender<Bytes, Infallible>, chunk: usize, every: Duration, times: usize, end: bool) {
    tokio::spawn(async move {
        for _ in 0..times {
            if tx.send_data(Bytes::from(vec![b'x'; chunk])).await.is_err() {
                return;
            }
            tokio::time::sleep(every).await;
        }
        if !end {
            // Stalled: the body stays open, sending nothing.
            std::future::pending::<()>().await;
        }
    });
}

/// What the handler saw of its body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Read {
    Whole(usize),
    Cut(CutReason),
    Failed,
}

type Seen = Arc<Mutex<Option<Read>>>;

/// A handler that reads its whole body and answers `200`, or `500` when the read
/// fails (what a handler says to a cut does not matter: the client gets `408`).
fn reader(
    seen: Seen,
) -> impl Service<
    Request<WatchedBody<ClientBody>>,
    Response = Response<Full<Bytes>>,
    Error = Infallible,
    Future: Send,
> + Clone {
    tower::service_fn(move |request: Request<WatchedBody<ClientBody>>| {
        let seen = Arc::clone(&seen);
        async move {
            let read = match request.into_body().collect().await {
                Ok(bytes) => Read::Whole(bytes.to_bytes().len()),
                Err(error) => {
                    BodyCut::find(&*error).map_or(Read::Failed, |c| Read::Cut(c.reason()))
                }
            };
            *seen.lock().unwrap() = Some(read);
            let status = match read {
                Read::Whole(_) => StatusCode::OK,
                _ => StatusCode::INTERNAL_SERVER_ERROR,
            };
            let mut response = Response::new(Full::new(Bytes::from_static(b"answer")));
            *response.status_mut() = status;
            Ok::<_, Infallible>(response)
        }
    })
}

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

/// Runs one request to its response, returning the status and when it came.
async fn run<Svc>(service: Svc, request: Request<ClientBody>) -> (StatusCode, Duration)
where
    Svc: Service<
        Request<ClientBody>,
        Response = Response<AdmitBody<Full<Bytes>>>,
        Error = Infallible,
    >,
{
    let start = Instant::now();
    let response = service.oneshot(request).await.unwrap();
    let status = response.status();
    drop(response);
    (status, start.elapsed())
}

/// Keeps the gate pressed: a 2-unit request parked behind `held` for as long as
/// the test runs (the wait budget is an hour).
fn park_one(gate: &TestGate) -> tokio::task::JoinHandle<()> {
    let gate = gate.clone();
    tokio::spawn(async move {
        let _ = gate.acquire(2, Route::Mirror).await;
    })
}

#[tokio::test(start_paused = true)]
async fn a_body_that_stalls_is_cut_at_the_idle_limit_and_the_client_told_408() {
    let (gate, counting) = gate(2, secs(3600));
    let seen = Seen::default();
    let service = layer(&gate).layer(reader(Arc::clone(&seen)));
    let (tx, request) = client("/upload");
    feed(tx, 10, secs(1), 1, false);

    let (status, at) = run(service, request).await;

    assert_eq!(status, StatusCode::REQUEST_TIMEOUT);
    // Calm: the idle limit is 30 s; the rule looks again at least every second.
    assert!(at >= secs(30) && at <= secs(32), "cut at {at:?}");
    assert_eq!(*seen.lock().unwrap(), Some(Read::Cut(CutReason::Idle)));
    let cuts = counting.cuts();
    assert_eq!(cuts.len(), 1);
    assert_eq!(
        (cuts[0].source, cuts[0].units, cuts[0].reason),
        ("upload", 1, CutReason::Idle)
    );
    assert_eq!(gate.in_use(), 0);
    assert_eq!(counting.in_use(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_trickle_is_cut_by_the_rate_after_the_grace_even_on_a_calm_gate() {
    let (gate, counting) = gate(2, secs(3600));
    let seen = Seen::default();
    let service = layer(&gate).layer(reader(Arc::clone(&seen)));
    let (tx, request) = client("/upload");
    feed(tx, 1, secs(1), 1000, false);

    let (status, at) = run(service, request).await;

    assert_eq!(status, StatusCode::REQUEST_TIMEOUT);
    // A byte a second is never idle; the calm grace is 30 s and 30 bytes buy 30 ms.
    assert!(at >= secs(30) && at <= secs(32), "cut at {at:?}");
    assert_eq!(*seen.lock().unwrap(), Some(Read::Cut(CutReason::Rate)));
    assert_eq!(counting.cuts().len(), 1);
    assert_eq!(gate.in_use(), 0);
}

#[tokio::test(start_paused = true)]
async fn under_pressure_a_trickle_is_cut_within_fifteen_seconds() {
    let (gate, counting) = gate(2, secs(3600));
    let service = layer(&gate).layer(reader(Seen::default()));
    let (tx, request) = client("/upload");
    feed(tx, 1, secs(1), 1000, false);
    let waiter = {
        let service = service.clone();
        tokio::spawn(run(service, request))
    };
    support::until("the trickler is admitted", || gate.in_use() == 1).await;
    let parked = park_one(&gate);

    let (status, at) = waiter.await.unwrap();

    assert_eq!(status, StatusCode::REQUEST_TIMEOUT);
    assert!(at <= secs(15), "cut at {at:?}");
    assert_eq!(counting.cuts()[0].reason, CutReason::Rate);
    // Its unit went to the parked request.
    parked.await.unwrap();
    assert_eq!(gate.in_use(), 0);
}

#[tokio::test(start_paused = true)]
async fn an_upload_at_sixteen_kib_a_second_is_never_cut_even_under_pressure() {
    let (gate, counting) = gate(2, secs(3600));
    let seen = Seen::default();
    let service = layer(&gate).layer(reader(Arc::clone(&seen)));
    let (tx, request) = client("/upload");
    // Two minutes, in 4 KiB frames four times a second.
    feed(tx, 4096, Duration::from_millis(250), 480, true);
    let parked = park_one(&gate);

    let (status, at) = run(service, request).await;

    assert_eq!(status, StatusCode::OK);
    assert!(at >= secs(119), "done at {at:?}");
    assert_eq!(*seen.lock().unwrap(), Some(Read::Whole(480 * 4096)));
    assert!(counting.cuts().is_empty());
    parked.abort();
}

#[tokio::test(start_paused = true)]
async fn a_client_that_waited_at_the_gate_then_sends_steadily_is_not_cut() {
    let (gate, counting) = gate(1, secs(3600));
    let service = layer(&gate).layer(reader(Seen::default()));
    // The gate is full for 40 s: the request parks, its body unread meanwhile.
    let held = gate.try_acquire(1, Route::Upload).unwrap();
    let (tx, request) = client("/upload");
    let waiter = tokio::spawn(run(service, request));
    tokio::time::sleep(secs(40)).await;
    drop(held);
    // Then 2 KiB a second for a minute.
    feed(tx, 2048, secs(1), 60, true);

    let (status, _) = waiter.await.unwrap();

    assert_eq!(status, StatusCode::OK);
    assert!(counting.cuts().is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_request_admitted_on_a_calm_gate_is_cut_once_pressure_comes() {
    let (gate, counting) = gate(2, secs(3600));
    let service = layer(&gate).layer(reader(Seen::default()));
    let (tx, request) = client("/upload");
    feed(tx, 1, secs(1), 1000, false);
    let waiter = tokio::spawn(run(service, request));
    // Calm for 12 s: past the pressed grace (10 s), within the calm one (30 s).
    tokio::time::sleep(secs(12)).await;
    assert!(counting.cuts().is_empty());
    let parked = park_one(&gate);

    let (status, at) = waiter.await.unwrap();

    assert_eq!(status, StatusCode::REQUEST_TIMEOUT);
    // The next look (at most a second on) sees the pressed limits.
    assert!(at >= secs(12) && at <= secs(14), "cut at {at:?}");
    parked.await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_gate_that_sheds_at_arrival_presses_with_nobody_parked() {
    let (gate, counting) = gate(2, secs(3600));
    let service = layer(&gate).layer(reader(Seen::default()));
    let (tx, request) = client("/upload");
    feed(tx, 1, secs(1), 1000, false);
    let waiter = tokio::spawn(run(service, request));
    support::until("the trickler is admitted", || gate.in_use() == 1).await;
    // A caller that never waits is turned away every 2 s: nobody is ever parked.
    let _held = gate.try_acquire(1, Route::Upload).unwrap();
    let shedder = {
        let gate = gate.clone();
        tokio::spawn(async move {
            loop {
                assert!(gate.try_acquire(1, Route::Mirror).is_err());
                assert_eq!(gate.waiters(), 0);
                tokio::time::sleep(secs(2)).await;
            }
        })
    };

    let (status, at) = waiter.await.unwrap();

    assert_eq!(status, StatusCode::REQUEST_TIMEOUT);
    assert!(at <= secs(15), "cut at {at:?}");
    assert_eq!(counting.cuts()[0].reason, CutReason::Rate);
    shedder.abort();
}

/// Records, when dropped, the units in use then: a handler's buffer.
struct Buffer {
    gate: TestGate,
    in_use_at_drop: Arc<AtomicUsize>,
}

impl Drop for Buffer {
    fn drop(&mut self) {
        self.in_use_at_drop
            .store(self.gate.in_use(), Ordering::SeqCst);
    }
}

#[tokio::test(start_paused = true)]
async fn a_handler_that_does_not_answer_a_cut_is_dropped_within_the_bound_before_its_units_return()
{
    let (gate, counting) = gate(2, secs(3600));
    let in_use_at_drop = Arc::new(AtomicUsize::new(usize::MAX));
    let stubborn = {
        let gate = gate.clone();
        let in_use_at_drop = Arc::clone(&in_use_at_drop);
        tower::service_fn(move |request: Request<WatchedBody<ClientBody>>| {
            let buffer = Buffer {
                gate: gate.clone(),
                in_use_at_drop: Arc::clone(&in_use_at_drop),
            };
            async move {
                let _buffer = buffer;
                let _ = request.into_body().collect().await;
                // Ignores the cut and never answers.
                std::future::pending::<()>().await;
                Ok::<_, Infallible>(Response::new(Full::new(Bytes::new())))
            }
        })
    };
    let service = layer(&gate)
        .progress(ProgressRule::new().cut_bound(secs(2)))
        .layer(stubborn);
    let (tx, request) = client("/upload");
    feed(tx, 10, secs(1), 1, false);

    let (status, at) = run(service, request).await;

    assert_eq!(status, StatusCode::REQUEST_TIMEOUT);
    // Cut at 30-31 s, dropped 2 s later.
    assert!(at >= secs(32) && at <= secs(34), "answered at {at:?}");
    // The handler's buffer went while its unit was still held: value before units.
    assert_eq!(in_use_at_drop.load(Ordering::SeqCst), 1);
    assert_eq!(gate.in_use(), 0);
    assert_eq!(counting.cuts().len(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_cut_while_the_response_streams_ends_the_stream() {
    // The handler answers at once with a body that streams the request's body
    // back: the response started before the cut.
    let (gate, counting) = gate(2, secs(3600));
    let echo = tower::service_fn(|request: Request<WatchedBody<ClientBody>>| async move {
        Ok::<_, Infallible>(Response::new(request.into_body()))
    });
    let service = layer(&gate).layer(echo);
    let (tx, request) = client("/upload");
    feed(tx, 10, secs(1), 1, false);

    let response = service.oneshot(request).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert!(response.body().holds_permit());
    let error = response.into_body().collect().await.unwrap_err();

    assert_eq!(
        BodyCut::find(&*error).map(BodyCut::reason),
        Some(CutReason::Idle)
    );
    assert_eq!(counting.cuts().len(), 1);
    assert_eq!(gate.in_use(), 0);
    assert_eq!(counting.released.load(Ordering::SeqCst), 1);
}

#[tokio::test(start_paused = true)]
async fn a_hang_up_before_the_cut_counts_no_cut_and_returns_the_units_once() {
    let (gate, counting) = gate(2, secs(3600));
    let service = layer(&gate).layer(reader(Seen::default()));
    let (tx, request) = client("/upload");
    feed(tx, 10, secs(1), 1, false);
    let waiter = tokio::spawn(run(service, request));
    tokio::time::sleep(secs(10)).await;
    // The client hangs up: hyper drops the request's future.
    waiter.abort();
    assert!(waiter.await.unwrap_err().is_cancelled());
    tokio::time::sleep(secs(60)).await;

    assert!(counting.cuts().is_empty());
    assert_eq!(gate.in_use(), 0);
    assert_eq!(counting.released.load(Ordering::SeqCst), 1);
}

#[tokio::test(start_paused = true)]
async fn a_hang_up_after_the_cut_counts_one_cut_and_returns_the_units_once() {
    let (gate, counting) = gate(2, secs(3600));
    let stubborn = tower::service_fn(|request: Request<WatchedBody<ClientBody>>| async move {
        let _ = request.into_body().collect().await;
        std::future::pending::<()>().await;
        Ok::<_, Infallible>(Response::new(Full::new(Bytes::new())))
    });
    let service = layer(&gate)
        .progress(ProgressRule::new().cut_bound(secs(5)))
        .layer(stubborn);
    let (tx, request) = client("/upload");
    feed(tx, 10, secs(1), 1, false);
    let waiter = tokio::spawn(run(service, request));
    // Cut at 30-31 s; the client leaves within the handler's bound.
    tokio::time::sleep(Duration::from_millis(31_500)).await;
    assert_eq!(counting.cuts().len(), 1);
    waiter.abort();
    assert!(waiter.await.unwrap_err().is_cancelled());

    assert_eq!(gate.in_use(), 0);
    assert_eq!(counting.released.load(Ordering::SeqCst), 1);
    assert_eq!(counting.cuts().len(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_response_the_client_stops_reading_is_cut_and_its_connection_aborted() {
    let (gate, counting) = gate(2, secs(3600));
    // A download: frames as fast as the client takes them.
    let download = tower::service_fn(|_: Request<WatchedBody<ClientBody>>| async move {
        let (mut tx, body) = Channel::<Bytes, Infallible>::new(1);
        tokio::spawn(
            async move { while tx.send_data(Bytes::from_static(&[0; 1024])).await.is_ok() {} },
        );
        Ok::<_, Infallible>(Response::new(body))
    });
    let service = layer(&gate).layer(download);
    let aborted = Arc::new(AtomicUsize::new(0));
    let hang_up = {
        let aborted = Arc::clone(&aborted);
        HangUp::new(std::future::pending).with_abort(move || {
            aborted.fetch_add(1, Ordering::SeqCst);
        })
    };
    let (tx, mut request) = client("/upload");
    drop(tx);
    request.extensions_mut().insert(hang_up);

    let response = service.oneshot(request).await.unwrap();
    let mut body = response.into_body();
    // The client reads three frames, then stops reading.
    for _ in 0..3 {
        body.frame().await.unwrap().unwrap();
    }
    let stopped = Instant::now();
    tokio::time::sleep(Duration::from_millis(29_900)).await;
    assert!(counting.cuts().is_empty());
    tokio::time::sleep(Duration::from_millis(1_200)).await;
    assert_eq!(counting.cuts().len(), 1);
    assert_eq!(counting.cuts()[0].reason, CutReason::Response);
    assert_eq!(aborted.load(Ordering::SeqCst), 1);
    // The units return within the bound even though the body is still alive.
    counting.in_use_becomes(0).await;
    assert!(stopped.elapsed() <= secs(34));
    assert!(!body.holds_permit());
    // Hyper's next poll of the body, if any, ends the stream.
    let error = body.frame().await.unwrap().unwrap_err();
    assert_eq!(
        BodyCut::find(&*error).map(BodyCut::reason),
        Some(CutReason::Response)
    );
}

#[tokio::test(start_paused = true)]
async fn a_response_whose_own_producer_is_slow_is_never_cut() {
    let (gate, counting) = gate(2, secs(3600));
    // A frame every 45 s: the server is slow, not the client.
    let slow = tower::service_fn(|_: Request<WatchedBody<ClientBody>>| async move {
        let (mut tx, body) = Channel::<Bytes, Infallible>::new(1);
        tokio::spawn(async move {
            for _ in 0..4 {
                if tx.send_data(Bytes::from_static(b"tick")).await.is_err() {
                    return;
                }
                tokio::time::sleep(secs(45)).await;
            }
        });
        Ok::<_, Infallible>(Response::new(body))
    });
    let service = layer(&gate).layer(slow);
    let (tx, request) = client("/upload");
    drop(tx);

    let response = service.oneshot(request).await.unwrap();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();

    assert_eq!(&bytes[..], b"ticktickticktick");
    assert!(counting.cuts().is_empty());
    assert_eq!(gate.in_use(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_watched_request_on_a_lease_is_cut_and_its_lease_goes_back_to_idle() {
    let (gate, counting) = gate(2, secs(3600));
    let leases: Leases<u32, Vec<u8>, Route, _, _> = Leases::new(&gate, secs(5));
    // POST: the session's unit, leased.
    leases
        .insert(7, gate.try_acquire(1, Route::Upload).unwrap(), Vec::new())
        .unwrap();
    let patch = {
        let leases = leases.clone();
        tower::service_fn(move |request: Request<WatchedBody<ClientBody>>| {
            let leases = leases.clone();
            async move {
                assert!(request.body().is_watched());
                let mut session = leases.checkout(&7).unwrap();
                let status = match request.into_body().collect().await {
                    Ok(chunk) => {
                        session.extend_from_slice(&chunk.to_bytes());
                        StatusCode::ACCEPTED
                    }
                    // Nothing appended: the guard's drop returns the lease to idle.
                    Err(_) => StatusCode::BAD_REQUEST,
                };
                let mut response = Response::new(Full::new(Bytes::new()));
                *response.status_mut() = status;
                Ok::<_, Infallible>(response)
            }
        })
    };
    let service = layer(&gate).layer(patch);
    let (tx, request) = client("/patch");
    feed(tx, 10, secs(1), 1, false);

    let (status, at) = run(service, request).await;

    assert_eq!(status, StatusCode::REQUEST_TIMEOUT);
    assert!(at <= secs(32), "cut at {at:?}");
    let cut = counting.cuts()[0];
    assert_eq!(
        (cut.source, cut.units, cut.reason),
        ("upload", 0, CutReason::Idle)
    );
    // Back to idle, then expired after its idle limit: the unit is back.
    assert_eq!(leases.len(), 1);
    assert!(leases.idle_left(&7).unwrap().is_some());
    counting.in_use_becomes(0).await;
    assert!(leases.is_empty());
}

#[tokio::test(start_paused = true)]
async fn without_the_rule_a_stalled_body_is_not_cut() {
    let (gate, counting) = gate(2, secs(3600));
    let service = layer(&gate)
        .without_progress()
        .layer(reader(Seen::default()));
    let (tx, request) = client("/upload");
    assert!(!request.body().is_end_stream());
    feed(tx, 10, secs(1), 1, false);
    let waiter = tokio::spawn(run(service, request));
    tokio::time::sleep(secs(600)).await;

    assert!(!waiter.is_finished());
    assert!(counting.cuts().is_empty());
    assert_eq!(gate.in_use(), 1);
    waiter.abort();
}

#[tokio::test(start_paused = true)]
async fn a_bypassed_request_is_not_watched() {
    let (gate, counting) = gate(2, secs(3600));
    let seen_watched = Arc::new(Mutex::new(None));
    let probe = {
        let seen_watched = Arc::clone(&seen_watched);
        tower::service_fn(move |request: Request<WatchedBody<ClientBody>>| {
            *seen_watched.lock().unwrap() = Some(request.body().is_watched());
            async { Ok::<_, Infallible>(Response::new(Full::new(Bytes::new()))) }
        })
    };
    let service = layer(&gate).layer(probe);
    let (tx, request) = client("/healthz");
    drop(tx);

    let (status, _) = run(service, request).await;

    assert_eq!(status, StatusCode::OK);
    assert_eq!(*seen_watched.lock().unwrap(), Some(false));
    assert!(counting.cuts().is_empty());
}

/// An observer whose `on_cut` panics: a metrics recorder's bug.
struct PanicsOnCut;

impl admit::Observer for PanicsOnCut {
    fn on_cut(&self, _: &admit::CutEvent) {
        panic!("observer bug");
    }
}

fn panicking_gate() -> admit_tokio::Gate<Route, PanicsOnCut> {
    admit_tokio::gate(2)
        .max_units(2)
        .wait_budget(secs(3600))
        .observer(PanicsOnCut)
        .build()
        .unwrap()
}

#[tokio::test(start_paused = true)]
async fn a_panicking_observer_in_a_body_cut_still_returns_the_units() {
    let gate = panicking_gate();
    let layer =
        AdmitLayer::new(gate.clone(), decide as fn(&Parts) -> Decision<Route>).allow_unwatched();
    let service = layer.layer(reader(Seen::default()));
    let (tx, request) = client("/upload");
    feed(tx, 10, secs(1), 1, false);

    // The panic reaches the request's task, as any handler's panic would.
    let outcome = tokio::spawn(service.oneshot(request)).await;

    assert!(outcome.unwrap_err().is_panic());
    assert_eq!(gate.in_use(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_panicking_observer_in_a_response_cut_still_returns_the_units() {
    let gate = panicking_gate();
    let layer =
        AdmitLayer::new(gate.clone(), decide as fn(&Parts) -> Decision<Route>).allow_unwatched();
    let download = tower::service_fn(|_: Request<WatchedBody<ClientBody>>| async move {
        let (mut tx, body) = Channel::<Bytes, Infallible>::new(1);
        tokio::spawn(
            async move { while tx.send_data(Bytes::from_static(&[0; 64])).await.is_ok() {} },
        );
        Ok::<_, Infallible>(Response::new(body))
    });
    let (tx, request) = client("/upload");
    drop(tx);
    let response = layer.layer(download).oneshot(request).await.unwrap();
    let mut body = response.into_body();
    body.frame().await.unwrap().unwrap();

    // The watch's task panics in the observer; the units come back anyway.
    tokio::time::sleep(secs(40)).await;

    assert_eq!(gate.in_use(), 0);
    assert!(!body.holds_permit());
}

#[tokio::test(start_paused = true)]
async fn a_handler_that_fails_with_a_service_error_after_a_cut_still_gets_its_client_a_408() {
    let (gate, counting) = gate(2, secs(3600));
    let failing = tower::service_fn(|request: Request<WatchedBody<ClientBody>>| async move {
        request
            .into_body()
            .collect()
            .await
            .map_err(|e| std::io::Error::other(e.to_string()))?;
        Ok::<_, std::io::Error>(Response::new(Full::new(Bytes::new())))
    });
    let service = layer(&gate).layer(failing);
    let (tx, request) = client("/upload");
    feed(tx, 10, secs(1), 1, false);

    let response = service.oneshot(request).await.unwrap();

    assert_eq!(response.status(), StatusCode::REQUEST_TIMEOUT);
    assert_eq!(counting.cuts().len(), 1);
    assert_eq!(gate.in_use(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_watched_requests_response_left_unread_is_cut_too() {
    let (gate, counting) = gate(2, secs(3600));
    let download = tower::service_fn(|_: Request<WatchedBody<ClientBody>>| async move {
        let (mut tx, body) = Channel::<Bytes, Infallible>::new(1);
        tokio::spawn(
            async move { while tx.send_data(Bytes::from_static(&[0; 64])).await.is_ok() {} },
        );
        Ok::<_, Infallible>(Response::new(body))
    });
    let aborted = Arc::new(AtomicUsize::new(0));
    let hang_up = {
        let aborted = Arc::clone(&aborted);
        HangUp::new(std::future::pending).with_abort(move || {
            aborted.fetch_add(1, Ordering::SeqCst);
        })
    };
    let (tx, mut request) = client("/patch");
    drop(tx);
    request.extensions_mut().insert(hang_up);
    let response = layer(&gate).layer(download).oneshot(request).await.unwrap();
    let mut body = response.into_body();
    body.frame().await.unwrap().unwrap();

    tokio::time::sleep(secs(32)).await;

    let cuts = counting.cuts();
    assert_eq!(cuts.len(), 1);
    assert_eq!((cuts[0].units, cuts[0].reason), (0, CutReason::Response));
    assert_eq!(aborted.load(Ordering::SeqCst), 1);
}

/// A download of frames of `frame` bytes, as fast as the client takes them.
fn download(
    frame: usize,
) -> impl Service<
    Request<WatchedBody<ClientBody>>,
    Response = Response<ClientBody>,
    Error = Infallible,
    Future: Send,
> + Clone {
    tower::service_fn(move |_: Request<WatchedBody<ClientBody>>| async move {
        let (mut tx, body) = Channel::<Bytes, Infallible>::new(1);
        tokio::spawn(
            async move { while tx.send_data(Bytes::from(vec![0; frame])).await.is_ok() {} },
        );
        Ok::<_, Infallible>(Response::new(body))
    })
}

#[tokio::test(start_paused = true)]
async fn a_large_frame_buys_a_slow_reader_its_time_at_the_minimum_rate() {
    // hyper holds a 1 MiB frame while a reader at ~10 KiB/s drains it: 100 s with
    // no poll of the body. At 1 KiB a second the frame is worth 1024 s.
    let (gate, counting) = gate(2, secs(3600));
    let service = layer(&gate).layer(download(1 << 20));
    let (tx, request) = client("/upload");
    drop(tx);
    let mut body = service.oneshot(request).await.unwrap().into_body();
    body.frame().await.unwrap().unwrap();
    tokio::time::sleep(secs(100)).await;
    body.frame().await.unwrap().unwrap();
    assert!(counting.cuts().is_empty());

    // The same silence after a 1 KiB frame is a client that stopped reading.
    let service = layer(&gate).layer(download(1024));
    let (tx, request) = client("/upload");
    drop(tx);
    let mut small = service.oneshot(request).await.unwrap().into_body();
    small.frame().await.unwrap().unwrap();
    tokio::time::sleep(secs(40)).await;
    assert_eq!(counting.cuts().len(), 1);
    assert_eq!(counting.cuts()[0].reason, CutReason::Response);
    drop(body);
}
