//! What each part of the progress rule is worth, simulated on Tokio's paused clock:
//! stalled clients hold a gate of 16 units while a normal client tries every 0.5 s,
//! under each variant of the rule. Deterministic (virtual time), so it runs in a
//! second and gives the same figures on any machine.
//!
//! ```sh
//! cargo run -p admit-tower --example stall_sim
//! ```
//!
//! The shape is issue 50's: a gate of 16 units with a 2 s wait budget and a 200 ms
//! overload target (the demo's `serve`); stallers that never reconnect; a normal
//! client sending a 256 KiB body at once, its handler holding the unit 1 s; 60 s.
//! The figure is the normal client's admitted tries from 20 s on.

use std::convert::Infallible;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use admit::{CutEvent, Observer};
use admit_tower::{AdmitLayer, Decision, ProgressRule, WatchedBody};
use bytes::Bytes;
use http::request::Parts;
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Channel, Full};
use tokio::time::Instant;
use tower::{Layer, Service, ServiceExt};

admit::sources! { enum Route { Upload => "upload", Session => "session" } }

const CAPACITY: usize = 16;
const RUN: Duration = Duration::from_secs(60);
const FROM: Duration = Duration::from_secs(20);

/// How the stallers misbehave.
#[derive(Debug, Clone, Copy)]
enum Staller {
    /// `POST /upload`, then one byte a second.
    Trickle,
    /// A `PATCH` on a leased session: 10 bytes, then nothing.
    Session,
}

#[derive(Default)]
struct Cuts {
    count: AtomicUsize,
    last_ms: AtomicUsize,
    start: std::sync::OnceLock<Instant>,
}

impl Observer for Cuts {
    fn on_cut(&self, _: &CutEvent) {
        self.count.fetch_add(1, Ordering::SeqCst);
        let at = self
            .start
            .get()
            .map_or(0, |s| s.elapsed().as_millis() as usize);
        self.last_ms.fetch_max(at, Ordering::SeqCst);
    }
}

fn decide(head: &Parts) -> Decision<Route> {
    match head.uri.path() {
        "/upload" => Decision::admit(1, Route::Upload),
        "/patch" => Decision::watch(Route::Session),
        _ => Decision::Bypass,
    }
}

/// Reads the body, then works 1 s holding the unit.
async fn handler(
    request: Request<WatchedBody<Channel<Bytes, Infallible>>>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let ok = request.into_body().collect().await.is_ok();
    if ok {
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let mut response = Response::new(Full::new(Bytes::new()));
    if !ok {
        *response.status_mut() = StatusCode::BAD_REQUEST;
    }
    Ok(response)
}

/// One run: `stallers` of `kind` against the gate with `rule` (`None`: no rule).
/// Returns (admitted from 20 s on, tries from 20 s on, cuts, last cut in s).
async fn run(
    kind: Staller,
    stallers: usize,
    rule: Option<ProgressRule>,
) -> (usize, usize, usize, f64) {
    let cuts = Arc::new(Cuts::default());
    let _ = cuts.start.set(Instant::now());
    let gate = admit_tokio::gate::<Route>(CAPACITY)
        .wait_budget(Duration::from_secs(2))
        .overload_target(Duration::from_millis(200))
        .observer(Arc::clone(&cuts))
        .build()
        .unwrap();
    let layer =
        AdmitLayer::new(gate.clone(), decide as fn(&Parts) -> Decision<Route>).allow_unwatched();
    let layer = match rule {
        Some(rule) => layer.progress(rule),
        None => layer.without_progress(),
    };
    let service = layer.layer(tower::service_fn(handler));
    let mut tasks = Vec::new();
    // The session stallers' units, leased (idle limit 1 s, the demo's).
    let leases = admit::Leases::<usize, (), Route, _, _>::new(&gate, Duration::from_secs(1));
    for i in 0..stallers {
        let (mut tx, body) = Channel::<Bytes, Infallible>::new(1);
        let path = match kind {
            Staller::Trickle => "/upload",
            Staller::Session => {
                if let Ok(permit) = gate.try_acquire(1, Route::Session) {
                    leases.insert(i, permit, ()).unwrap();
                }
                "/patch"
            }
        };
        let request = Request::post(path).body(body).unwrap();
        let mut service = service.clone();
        let leases = leases.clone();
        tasks.push(tokio::spawn(async move {
            // The session's PATCH holds its lease checked out while it runs.
            let guard = match kind {
                Staller::Session => leases.checkout(&i).ok(),
                Staller::Trickle => None,
            };
            let call = service.ready().await.unwrap().call(request);
            let feed = async {
                match kind {
                    Staller::Trickle => loop {
                        if tx.send_data(Bytes::from_static(b"x")).await.is_err() {
                            break;
                        }
                        tokio::time::sleep(Duration::from_secs(1)).await;
                    },
                    Staller::Session => {
                        let _ = tx.send_data(Bytes::from_static(&[0; 10])).await;
                    }
                }
                std::future::pending::<()>().await;
            };
            tokio::select! { _ = call => {}, () = feed => {} }
            drop(guard);
        }));
    }
    let start = Instant::now();
    let mut attempts = Vec::new();
    while start.elapsed() < RUN {
        let at = start.elapsed();
        let (mut tx, body) = Channel::<Bytes, Infallible>::new(1);
        let request = Request::post("/upload").body(body).unwrap();
        let service = service.clone();
        let attempt = tokio::spawn(async move {
            let feed =
                tokio::spawn(async move { tx.send_data(Bytes::from(vec![0; 256 << 10])).await });
            let outcome =
                tokio::time::timeout(Duration::from_secs(15), service.oneshot(request)).await;
            feed.abort();
            matches!(outcome, Ok(Ok(r)) if r.status() == StatusCode::OK)
        });
        attempts.push((at, attempt));
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let (mut admitted, mut tries) = (0, 0);
    for (at, attempt) in attempts {
        let ok = attempt.await.unwrap();
        if at >= FROM {
            tries += 1;
            admitted += usize::from(ok);
        }
    }
    for task in tasks {
        task.abort();
    }
    let last = cuts.last_ms.load(Ordering::SeqCst) as f64 / 1000.0;
    (admitted, tries, cuts.count.load(Ordering::SeqCst), last)
}

#[tokio::main(flavor = "current_thread", start_paused = true)]
async fn main() {
    let secs = Duration::from_secs;
    let variants: [(&str, Option<ProgressRule>); 4] = [
        ("no rule", None),
        (
            "idle only, 30 s, not scaled",
            Some(
                ProgressRule::new()
                    .idle(secs(30), secs(30))
                    .min_rate(1)
                    .grace(secs(3600), secs(3600)),
            ),
        ),
        (
            "idle + rate, 30 s, not scaled",
            Some(
                ProgressRule::new()
                    .idle(secs(30), secs(30))
                    .grace(secs(30), secs(30)),
            ),
        ),
        (
            "idle + rate, scaled by pressure (defaults)",
            Some(ProgressRule::new()),
        ),
    ];
    println!("normal client admitted from 20 s on, of its tries; stallers cut (the last at)");
    for (kind, stallers) in [
        (Staller::Trickle, 16),
        (Staller::Trickle, 64),
        (Staller::Session, 16),
    ] {
        println!("\n{stallers} {kind:?} stallers:");
        for (name, rule) in &variants {
            let (admitted, tries, cut, last) = run(kind, stallers, *rule).await;
            println!("  {name:<44} {admitted:>2} of {tries}   cut {cut:>2} (last at {last:.1} s)");
        }
    }
}
