//! The service in process, on Tokio's paused clock: every wait is virtual time, and
//! every event is ordered by an explicit hand-off (a channel, a hang-up signal), so
//! each assertion follows from the code, not from the machine's speed.

mod support;

use std::convert::Infallible;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use admit_tower::{
    AdmitBody, AdmitLayer, AdmitPermit, ClientGone, Decision, HangUp, WaitCeiling, WatchedBody,
    CLIENT_CLOSED_REQUEST,
};
use bytes::Bytes;
use http::request::Parts;
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Channel, Full};
use support::{gate, Route, TestGate};
use tower::{Layer, Service, ServiceExt};

/// Routes by path: `/upload` 1 unit, `/mirror` 2, `/huge` 9, anything else bypassed.
fn decide(head: &Parts) -> Decision<Route> {
    match head.uri.path() {
        "/upload" => Decision::admit(1, Route::Upload),
        "/mirror" => Decision::admit(2, Route::Mirror),
        "/huge" => Decision::admit(9, Route::Upload),
        _ => Decision::Bypass,
    }
}

fn request(path: &str) -> Request<Full<Bytes>> {
    Request::post(path)
        .body(Full::new(Bytes::from_static(b"payload")))
        .unwrap()
}

/// An inner service that answers `ok` and counts its calls.
fn ok_service<B: Send + 'static>(
    calls: Arc<AtomicUsize>,
) -> impl Service<Request<B>, Response = Response<Full<Bytes>>, Error = Infallible, Future: Send>
       + Clone
       + Send {
    tower::service_fn(move |_request: Request<B>| {
        calls.fetch_add(1, Ordering::SeqCst);
        async { Ok::<_, Infallible>(Response::new(Full::new(Bytes::from_static(b"ok")))) }
    })
}

async fn body_text<B>(response: Response<AdmitBody<B>>) -> String
where
    B: http_body::Body<Data = Bytes>,
    B::Error: Into<admit_tower::BoxError>,
{
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    String::from_utf8(bytes.to_vec()).unwrap()
}

fn layer(gate: &TestGate) -> AdmitLayer<Route, fn(&Parts) -> Decision<Route>> {
    AdmitLayer::new(gate.clone(), decide as fn(&Parts) -> Decision<Route>)
}

#[tokio::test(start_paused = true)]
async fn poll_ready_takes_no_unit_and_an_admitted_request_holds_until_its_body_ends() {
    let (gate, counting) = gate(2, Duration::from_secs(5));
    let calls = Arc::new(AtomicUsize::new(0));
    let service = layer(&gate).layer(ok_service(Arc::clone(&calls)));

    // Ten clones made ready, never called: a server or a Buffer driving readiness.
    let mut ready = Vec::new();
    for _ in 0..10 {
        let mut clone = service.clone();
        clone.ready().await.unwrap();
        ready.push(clone);
    }
    assert_eq!(gate.in_use(), 0, "readiness holds no unit");
    assert_eq!(counting.admitted(), 0);

    // One of them called: admitted, and the unit rides in the body.
    let response = ready[0].call(request("/upload")).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert!(response.body().holds_permit());
    assert_eq!(gate.in_use(), 1);
    assert_eq!(body_text(response).await, "ok");
    assert_eq!(gate.in_use(), 0, "the body's end returned the unit");
    assert_eq!(calls.load(Ordering::SeqCst), 1);
}

#[tokio::test(start_paused = true)]
async fn a_shed_is_a_503_with_retry_after_after_the_budget() {
    let (gate, counting) = gate(2, Duration::from_secs(5));
    let held = gate.acquire(2, Route::Mirror).await.unwrap();
    let calls = Arc::new(AtomicUsize::new(0));
    let service = layer(&gate).layer(ok_service(Arc::clone(&calls)));

    let started = tokio::time::Instant::now();
    let response = service.oneshot(request("/upload")).await.unwrap();
    assert_eq!(
        started.elapsed(),
        Duration::from_secs(5),
        "waited the budget"
    );
    assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(response.headers()["retry-after"], "1");
    assert_eq!(
        response.headers()["content-type"],
        "text/plain; charset=utf-8"
    );
    assert!(body_text(response).await.starts_with("admission gate busy"));
    assert_eq!(counting.shed(), 1);
    assert_eq!(
        calls.load(Ordering::SeqCst),
        0,
        "the inner service was not called"
    );
    drop(held);
}

/// With an overload target, a request that by the gate's estimate could not be
/// admitted within its budget is shed at arrival, not after the budget: the same
/// 503 + `Retry-After`, the hint being that estimate.
#[tokio::test(start_paused = true)]
async fn a_hopeless_request_is_shed_at_once_as_a_503_with_retry_after() {
    let counting = support::Counting::new();
    let gate: TestGate = admit_tokio::gate(1)
        .wait_budget(Duration::from_secs(5))
        .overload_target(Duration::from_millis(500))
        .observer(Arc::clone(&counting))
        .build()
        .unwrap();
    // The estimate needs a pace: one unit held 2 s, so a full gate returns a unit
    // every 2 s.
    let first = gate.acquire(1, Route::Upload).await.unwrap();
    tokio::time::sleep(Duration::from_secs(2)).await;
    drop(first);
    let held = gate.acquire(1, Route::Upload).await.unwrap();
    let calls = Arc::new(AtomicUsize::new(0));
    let service = layer(&gate).layer(ok_service(Arc::clone(&calls)));

    // Two parked: they would wait 2 s and 4 s; a third would wait 6 s, past the
    // 5 s budget.
    let parked: Vec<_> = (0..2)
        .map(|_| tokio::spawn(service.clone().oneshot(request("/upload"))))
        .collect();
    support::until("two requests are parked", || gate.waiters() == 2).await;
    assert_eq!(counting.shed(), 0, "both fit the budget");

    let started = tokio::time::Instant::now();
    let response = service.oneshot(request("/upload")).await.unwrap();
    assert_eq!(started.elapsed(), Duration::ZERO, "shed at arrival");
    assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(
        response.headers()["retry-after"],
        "6",
        "the estimated wait of a newcomer"
    );
    assert!(body_text(response).await.starts_with("admission gate busy"));
    assert_eq!(counting.shed_reasons(), [admit::ShedReason::Hopeless]);
    assert_eq!(gate.waiters(), 2, "it never stayed in the queue");
    assert_eq!(calls.load(Ordering::SeqCst), 0);

    drop(held);
    for waiting in parked {
        waiting.abort();
    }
}

#[tokio::test(start_paused = true)]
async fn a_wait_ceiling_from_the_request_ends_the_wait_early_as_a_shed() {
    let (gate, counting) = gate(1, Duration::from_secs(600));
    let held = gate.acquire(1, Route::Upload).await.unwrap();
    let service = layer(&gate).layer(ok_service(Arc::default()));

    let mut req = request("/upload");
    req.extensions_mut()
        .insert(WaitCeiling(Duration::from_millis(1500)));
    let started = tokio::time::Instant::now();
    let response = service.oneshot(req).await.unwrap();
    assert_eq!(started.elapsed(), Duration::from_millis(1500));
    assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert!(response.headers().contains_key("retry-after"));
    assert_eq!(
        counting.shed(),
        1,
        "a ceiling's expiry is a shed: the client is there"
    );
    drop(held);
}

#[tokio::test(start_paused = true)]
async fn oversized_and_closed_are_503_without_retry_after_and_count_nothing() {
    let (gate, counting) = gate(2, Duration::from_secs(5));
    let service = layer(&gate).layer(ok_service(Arc::default()));

    let response = service.clone().oneshot(request("/huge")).await.unwrap();
    assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert!(!response.headers().contains_key("retry-after"));
    assert!(body_text(response).await.contains("misconfigured"));

    gate.close();
    let response = service.oneshot(request("/upload")).await.unwrap();
    assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert!(!response.headers().contains_key("retry-after"));
    assert!(body_text(response).await.contains("closed"));
    assert_eq!(counting.shed(), 0);
}

#[tokio::test(start_paused = true)]
async fn the_caller_can_replace_the_refusal() {
    let (gate, _) = gate(1, Duration::from_secs(1));
    let held = gate.acquire(1, Route::Upload).await.unwrap();
    let service = layer(&gate)
        .on_reject(|error, head| {
            let mut response = Response::new(Bytes::from(format!(
                "{{\"path\":\"{}\",\"retry\":{}}}",
                head.uri.path(),
                error.retry_after().is_some()
            )));
            *response.status_mut() = StatusCode::TOO_MANY_REQUESTS;
            response
        })
        .layer(ok_service(Arc::default()));
    let response = service.oneshot(request("/upload")).await.unwrap();
    assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(
        body_text(response).await,
        r#"{"path":"/upload","retry":true}"#
    );
    drop(held);
}

#[tokio::test(start_paused = true)]
async fn a_hang_up_while_parked_writes_nothing_counts_nothing_and_frees_the_place() {
    let (gate, counting) = gate(1, Duration::from_secs(600));
    let held = gate.acquire(1, Route::Upload).await.unwrap();
    let calls = Arc::new(AtomicUsize::new(0));
    let service = layer(&gate).layer(ok_service(Arc::clone(&calls)));

    let (hang_up_tx, hang_up_rx) = tokio::sync::watch::channel(false);
    let mut req = request("/upload");
    req.extensions_mut().insert(HangUp::new(move || {
        let mut rx = hang_up_rx.clone();
        async move {
            let _ = rx.wait_for(|gone| *gone).await;
        }
    }));
    let parked = tokio::spawn(service.clone().oneshot(req));
    support::until("the request is parked", || gate.waiters() == 1).await;

    hang_up_tx.send(true).unwrap();
    let response = parked.await.unwrap().unwrap();
    assert_eq!(gate.waiters(), 0, "its place in the queue is free");
    assert_eq!(response.status().as_u16(), CLIENT_CLOSED_REQUEST);
    assert!(response.extensions().get::<ClientGone>().is_some());
    let error = response.into_body().collect().await.unwrap_err();
    assert!(error.is::<ClientGone>(), "{error}");
    assert_eq!(counting.shed(), 0);
    assert_eq!(calls.load(Ordering::SeqCst), 0);

    // The next request gets the unit as soon as it returns.
    let next = tokio::spawn(service.oneshot(request("/upload")));
    support::until("the next request is parked", || gate.waiters() == 1).await;
    drop(held);
    let response = next.await.unwrap().unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(counting.shed(), 0);
}

#[tokio::test(start_paused = true)]
async fn dropping_the_future_while_parked_counts_nothing_and_after_admission_returns_the_units() {
    let (gate, counting) = gate(2, Duration::from_secs(600));
    let held = gate.acquire(2, Route::Mirror).await.unwrap();
    // An inner service that never answers: the handler is "working".
    let service = layer(&gate).layer(tower::service_fn(
        |_request: Request<WatchedBody<Full<Bytes>>>| {
            std::future::pending::<Result<Response<Full<Bytes>>, Infallible>>()
        },
    ));

    let parked = tokio::spawn(service.clone().oneshot(request("/mirror")));
    support::until("parked", || gate.waiters() == 1).await;
    parked.abort();
    let _ = parked.await;
    assert_eq!(gate.waiters(), 0);
    assert_eq!(counting.shed(), 0);

    drop(held);
    let working = tokio::spawn(service.oneshot(request("/mirror")));
    counting.in_use_becomes(2).await;
    working.abort(); // the connection closed while the handler worked
    let _ = working.await;
    assert_eq!(gate.in_use(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_streaming_body_holds_the_units_until_it_ends_or_is_dropped() {
    let (gate, counting) = gate(2, Duration::from_secs(5));
    let senders = Arc::new(std::sync::Mutex::new(Vec::new()));
    let inner = {
        let senders = Arc::clone(&senders);
        tower::service_fn(move |_request: Request<WatchedBody<Full<Bytes>>>| {
            let (tx, body) = Channel::<Bytes, Infallible>::new(1);
            senders.lock().unwrap().push(tx);
            async move { Ok::<_, Infallible>(Response::new(body)) }
        })
    };
    let service = layer(&gate).layer(inner);

    // The handler has returned; the session is the body, still held.
    let response = service.clone().oneshot(request("/mirror")).await.unwrap();
    assert_eq!(gate.in_use(), 2);
    let mut tx = senders.lock().unwrap().pop().unwrap();
    let mut body = response.into_body();
    tx.send_data(Bytes::from_static(b"chunk 1")).await.unwrap();
    let frame = body.frame().await.unwrap().unwrap();
    assert_eq!(frame.into_data().unwrap(), "chunk 1");
    assert_eq!(gate.in_use(), 2, "mid-stream: held");
    drop(tx); // the last chunk was sent
    assert!(body.frame().await.is_none());
    assert_eq!(gate.in_use(), 0, "the body ended: released");
    assert!(!body.holds_permit());

    // Dropped mid-stream (the connection closed): released with it.
    let response = service.oneshot(request("/upload")).await.unwrap();
    assert_eq!(gate.in_use(), 1);
    drop(response);
    assert_eq!(gate.in_use(), 0);
    assert_eq!(counting.admitted(), 2);
}

#[tokio::test(start_paused = true)]
async fn the_handler_reaches_the_permit_and_can_release_it_early() {
    let (gate, _) = gate(2, Duration::from_secs(5));
    let inner = tower::service_fn(|request: Request<WatchedBody<Full<Bytes>>>| async move {
        let permit = request
            .extensions()
            .get::<AdmitPermit<Route>>()
            .expect("the layer put the permit in the request")
            .clone();
        assert_eq!((permit.units(), permit.source()), (2, Route::Mirror));
        assert!(permit.is_held());
        assert!(permit.release(), "the first release returns the units");
        assert!(!permit.release(), "and only once");
        Ok::<_, Infallible>(Response::new(Full::new(Bytes::from_static(b"ok"))))
    });
    let response = layer(&gate)
        .layer(inner)
        .oneshot(request("/mirror"))
        .await
        .unwrap();
    assert_eq!(
        gate.in_use(),
        0,
        "released by the handler, before the body is sent"
    );
    assert!(!response.body().holds_permit());
    assert_eq!(body_text(response).await, "ok");
}

#[tokio::test(start_paused = true)]
async fn a_bypassed_request_never_waits_and_holds_nothing() {
    let (gate, counting) = gate(1, Duration::from_secs(600));
    let held = gate.acquire(1, Route::Upload).await.unwrap();
    let service = layer(&gate).layer(ok_service(Arc::default()));
    let started = tokio::time::Instant::now();
    let response = service.oneshot(request("/healthz")).await.unwrap();
    assert_eq!(started.elapsed(), Duration::ZERO);
    assert_eq!(response.status(), StatusCode::OK);
    assert!(!response.body().holds_permit());
    assert_eq!(gate.waiters(), 0);
    assert_eq!(counting.admitted(), 1, "only the test's own permit");
    drop(held);
}

/// Through an axum `Router`: a handler on both kinds of route takes
/// `Option<Extension<AdmitPermit<_>>>`, `None` where the route is bypassed; one that
/// takes `Extension<AdmitPermit<_>>` fails a bypassed request with axum's 500.
#[tokio::test(start_paused = true)]
async fn an_axum_handler_gets_the_permit_as_an_option_none_when_bypassed() {
    use axum::routing::post;
    use axum::Extension;

    async fn optional(permit: Option<Extension<AdmitPermit<Route>>>) -> String {
        match permit {
            Some(Extension(permit)) => format!("admitted with {} units", permit.units()),
            None => "bypassed".to_owned(),
        }
    }
    async fn required(Extension(permit): Extension<AdmitPermit<Route>>) -> String {
        format!("admitted with {} units", permit.units())
    }

    let (gate, counting) = gate(2, Duration::from_secs(5));
    let app = axum::Router::new()
        .route("/mirror", post(optional))
        .route("/healthz", post(optional))
        .route("/strict", post(required))
        .layer(layer(&gate));
    let answer = |path: &'static str| {
        let app = app.clone();
        async move {
            let response = app.oneshot(request(path)).await.unwrap();
            let status = response.status();
            let bytes = response.into_body().collect().await.unwrap().to_bytes();
            (status, String::from_utf8(bytes.to_vec()).unwrap())
        }
    };

    assert_eq!(
        answer("/mirror").await,
        (StatusCode::OK, "admitted with 2 units".to_owned())
    );
    assert_eq!(
        answer("/healthz").await,
        (StatusCode::OK, "bypassed".to_owned())
    );
    let (status, body) = answer("/strict").await;
    assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR);
    assert!(body.starts_with("Missing request extension"), "{body}");
    assert_eq!(
        counting.admitted(),
        1,
        "only the mirror went through the gate"
    );
}

#[test]
fn rejection_and_debug_output() {
    let busy = admit::GateError::Busy {
        retry_after: Duration::from_millis(2100),
        reason: admit::ShedReason::WaitBudget,
    };
    let rejection = admit_tower::Rejection::from(busy);
    assert_eq!(rejection.error(), busy);
    let response = rejection.response().unwrap();
    assert_eq!(response.headers()["retry-after"], "3");
    assert!(admit_tower::Rejection::from(admit::GateError::Cancelled)
        .response()
        .is_none());
    assert!(format!("{rejection}").contains("retry after 3s"));
    // Transparent: the message is the gate error's, so the gate error is not also
    // its source (an error report would print the message twice).
    assert_eq!(format!("{rejection}"), format!("{busy}"));
    assert!(std::error::Error::source(&rejection).is_none());
    let decision = Decision::admit(2, Route::Mirror);
    assert_eq!(
        format!("{decision:?}"),
        "Admit { units: 2, source: Mirror, priority: None }"
    );
    assert_eq!(
        format!("{:?}", decision.priority(admit::Priority::Sheddable)),
        "Admit { units: 2, source: Mirror, priority: Some(Sheddable) }"
    );
}

#[test]
#[should_panic(expected = "zero units")]
fn a_zero_unit_decision_panics() {
    let _ = Decision::admit(0, Route::Upload);
}

#[tokio::test(start_paused = true)]
async fn a_decision_s_priority_reaches_the_gate() {
    let (gate, counting) = gate(2, Duration::from_secs(5));
    let decide = |head: &Parts| match head.uri.path() {
        "/prefetch" => Decision::admit(1, Route::Upload).priority(admit::Priority::Sheddable),
        _ => Decision::admit(1, Route::Upload),
    };
    let mut service = AdmitLayer::new(gate.clone(), decide).layer(ok_service(Arc::default()));
    for path in ["/prefetch", "/upload"] {
        let response = service
            .ready()
            .await
            .unwrap()
            .call(request(path))
            .await
            .unwrap();
        assert_eq!(body_text(response).await, "ok");
    }
    assert_eq!(
        counting.admitted_classes(),
        [admit::Priority::Sheddable, admit::Priority::Critical]
    );
}

#[tokio::test(start_paused = true)]
async fn a_decision_that_panics_takes_nothing() {
    let (gate, counting) = gate(2, Duration::from_secs(5));
    let decide = |head: &Parts| -> Decision<Route> {
        assert!(head.uri.path() != "/boom", "the decision panicked");
        Decision::admit(1, Route::Upload)
    };
    let mut service = AdmitLayer::new(gate.clone(), decide).layer(ok_service(Arc::default()));
    let ready = service.ready().await.unwrap();
    let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        drop(ready.call(request("/boom")));
    }));
    assert!(panicked.is_err(), "the panic reaches the caller");
    assert_eq!(
        (gate.in_use(), gate.waiters(), counting.admitted()),
        (0, 0, 0)
    );
    // The service still serves.
    let response = service
        .ready()
        .await
        .unwrap()
        .call(request("/upload"))
        .await
        .unwrap();
    assert_eq!(body_text(response).await, "ok");
    assert_eq!(gate.in_use(), 0);
}

#[tokio::test(start_paused = true)]
async fn the_hang_up_watch_is_armed_only_for_a_request_that_parks() {
    let (gate, counting) = gate(1, Duration::from_secs(5));
    let armed = Arc::new(AtomicUsize::new(0));
    let (gone, hung_up) = tokio::sync::watch::channel(false);
    let hang_up = {
        let armed = Arc::clone(&armed);
        HangUp::new(move || {
            armed.fetch_add(1, Ordering::SeqCst);
            let mut hung_up = hung_up.clone();
            async move {
                let _ = hung_up.wait_for(|gone| *gone).await;
            }
        })
    };
    let service = layer(&gate).layer(ok_service(Arc::new(AtomicUsize::new(0))));
    let with_watch = |path: &str| {
        let mut request = request(path);
        request.extensions_mut().insert(hang_up.clone());
        request
    };

    // Admitted at its first poll: the watch is never made.
    let response = service
        .clone()
        .oneshot(with_watch("/upload"))
        .await
        .unwrap();
    assert_eq!(armed.load(Ordering::SeqCst), 0);
    drop(response);

    // Parked behind a holder: armed once, and a hang-up ends the wait uncounted.
    let held = gate.try_acquire(1, Route::Upload).unwrap();
    let parked = tokio::spawn(service.oneshot(with_watch("/upload")));
    support::until("the request parks", || gate.waiters() == 1).await;
    assert_eq!(armed.load(Ordering::SeqCst), 1);
    gone.send(true).unwrap();
    let response = parked.await.unwrap().unwrap();
    assert!(response.extensions().get::<ClientGone>().is_some());
    assert_eq!(counting.shed(), 0);
    drop(held);
}
