//! Hostile clients on real sockets: a hyper-util server on loopback (`PeerWatch`
//! per connection, `AdmitLayer` on a gate of 2 units with a long wait budget) with
//! the progress rule's limits cut short, so that the server really times out in
//! well under a second.
//!
//! Bounded in count (three or one clients) and time (every wait is under a
//! timeout of a few seconds, a safety net that fails the test). Events are ordered
//! by hand-offs: a handler's arrival on a channel, the observer's units in use, a
//! socket's read returning; never by sleeping.

mod support;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::time::Duration;

use admit::CutReason;
use admit_tower::{AdmitLayer, Decision, PeerWatch, ProgressRule, WatchedBody};
use bytes::Bytes;
use http::request::Parts;
use http::{Request, Response};
use http_body::Frame;
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full, Limited, StreamBody};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use std::sync::Arc;
use support::{gate, Counting, Route, TestGate};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch};

type BoxError = Box<dyn std::error::Error + Send + Sync>;
type ResBody = UnsyncBoxBody<Bytes, BoxError>;

/// Every wait is bounded by this: a safety net, not an ordering.
const BOUND: Duration = Duration::from_secs(5);

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// Limits short enough for a test on the real clock. At 16 KiB a second (just
/// under the highest rate allowed) a frame of the download buys its reader 0.5 s.
fn rule() -> ProgressRule {
    ProgressRule::new()
        .min_rate(16 * 1024 - 1)
        .idle(ms(600), ms(200))
        .grace(ms(800), ms(300))
        .response_idle(ms(600), ms(200))
        .cut_bound(ms(200))
}

fn decide(head: &Parts) -> Decision<Route> {
    match head.uri.path() {
        "/upload" | "/download" => Decision::admit(1, Route::Upload),
        _ => Decision::Bypass,
    }
}

/// The response of `/download`: 64 MiB in 8 KiB frames, as fast as hyper takes
/// them.
const DOWNLOAD: usize = 64 << 20;
const FRAME: usize = 8 << 10;

/// What the handlers share with the test.
#[derive(Clone)]
struct App {
    counting: Arc<Counting>,
    /// Each upload's arrival at its handler, with the cuts counted by then.
    arrivals: mpsc::UnboundedSender<usize>,
    /// Uploads read their body once this is true.
    go: watch::Receiver<bool>,
}

async fn handle(
    app: App,
    request: Request<WatchedBody<Incoming>>,
) -> Result<Response<ResBody>, Infallible> {
    let text = |s: String| {
        Full::new(Bytes::from(s))
            .map_err(|n| match n {})
            .boxed_unsync()
    };
    match request.uri().path() {
        "/upload" => {
            let _ = app.arrivals.send(app.counting.cuts().len());
            let mut go = app.go.clone();
            let _ = go.wait_for(|go| *go).await;
            // Read the body within a limit.
            let answer = match Limited::new(request.into_body(), 64 << 10).collect().await {
                Ok(body) => format!("stored {} bytes\n", body.to_bytes().len()),
                Err(error) => format!("failed: {error}\n"),
            };
            Ok(Response::new(text(answer)))
        }
        "/download" => {
            let chunk = Bytes::from(vec![b'd'; FRAME]);
            let frames = futures_lite::stream::iter(
                (0..DOWNLOAD / FRAME).map(move |_| Ok::<_, BoxError>(Frame::data(chunk.clone()))),
            );
            Ok(Response::new(StreamBody::new(frames).boxed_unsync()))
        }
        _ => Ok(Response::new(text("ok\n".into()))),
    }
}

struct Server {
    addr: SocketAddr,
    arrivals: mpsc::UnboundedReceiver<usize>,
    go: watch::Sender<bool>,
    /// Each connection's end, as hyper reports it: whether it ended in an error.
    closed: mpsc::UnboundedReceiver<bool>,
}

/// hyper-util's HTTP/1 connection: `PeerWatch::layer` outside `AdmitLayer` outside
/// the handler, per connection.
async fn server(gate: &TestGate, counting: &Arc<Counting>) -> Server {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let admit =
        AdmitLayer::new(gate.clone(), decide as fn(&Parts) -> Decision<Route>).progress(rule());
    let (arrivals_tx, arrivals) = mpsc::unbounded_channel();
    let (go, go_rx) = watch::channel(false);
    let (closed_tx, closed) = mpsc::unbounded_channel();
    let app = App {
        counting: Arc::clone(counting),
        arrivals: arrivals_tx,
        go: go_rx,
    };
    tokio::spawn(async move {
        loop {
            let (stream, _) = listener.accept().await.unwrap();
            let watch = PeerWatch::new(&stream);
            assert!(watch.is_watching());
            let app = app.clone();
            let service = tower::ServiceBuilder::new()
                .layer(watch.layer())
                .layer(admit.clone())
                .service_fn(move |request| handle(app.clone(), request));
            let connection = hyper::server::conn::http1::Builder::new().serve_connection(
                TokioIo::new(stream),
                hyper_util::service::TowerToHyperService::new(service),
            );
            let closed = closed_tx.clone();
            tokio::spawn(async move {
                let _ = closed.send(connection.await.is_err());
            });
        }
    });
    Server {
        addr,
        arrivals,
        go,
        closed,
    }
}

async fn connect(addr: SocketAddr) -> TcpStream {
    let stream = TcpStream::connect(addr).await.unwrap();
    stream.set_nodelay(true).unwrap();
    stream
}

/// Reads until the server closes (EOF) or resets: what was read, and whether it
/// ended in a reset rather than an EOF.
async fn read_to_close(stream: &mut TcpStream) -> (Vec<u8>, Option<std::io::Error>) {
    tokio::time::timeout(BOUND, async {
        let mut seen = Vec::new();
        let mut chunk = vec![0; 64 << 10];
        loop {
            match stream.read(&mut chunk).await {
                Ok(0) => return (seen, None),
                Ok(n) => seen.extend_from_slice(&chunk[..n]),
                Err(error) => return (seen, Some(error)),
            }
        }
    })
    .await
    .expect("the server closes the connection")
}

/// Reads until `needle` has arrived.
async fn read_until(stream: &mut TcpStream, needle: &str) -> Vec<u8> {
    tokio::time::timeout(BOUND, async {
        let mut seen = Vec::new();
        while !String::from_utf8_lossy(&seen).contains(needle) {
            let mut chunk = [0; 1024];
            let n = stream.read(&mut chunk).await.unwrap();
            assert!(n > 0, "closed before {needle:?}");
            seen.extend_from_slice(&chunk[..n]);
        }
        seen
    })
    .await
    .unwrap_or_else(|_| panic!("never received {needle:?}"))
}

async fn bounded<T>(what: &str, future: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(BOUND, future)
        .await
        .unwrap_or_else(|_| panic!("timed out: {what}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_stalled_uploads_are_cut_with_408_and_a_parked_client_gets_their_unit() {
    let (gate, counting) = gate(2, Duration::from_secs(60));
    let mut server = server(&gate, &counting).await;

    // Two clients promise 1000 bytes, send one, and stall: they hold both units.
    let mut stallers = Vec::new();
    for _ in 0..2 {
        let mut staller = connect(server.addr).await;
        let head = "POST /upload HTTP/1.1\r\nhost: test\r\ncontent-length: 1000\r\n\r\nx";
        staller.write_all(head.as_bytes()).await.unwrap();
        stallers.push(staller);
    }
    for _ in 0..2 {
        let cuts = bounded("a staller's handler", server.arrivals.recv()).await;
        assert_eq!(cuts, Some(0));
    }
    assert_eq!(gate.in_use(), 2);

    // A normal client parks behind them: the gate is pressed.
    let mut normal = connect(server.addr).await;
    let head =
        "POST /upload HTTP/1.1\r\nhost: test\r\ncontent-length: 5\r\nconnection: close\r\n\r\nhello";
    normal.write_all(head.as_bytes()).await.unwrap();
    support::until("the normal client parks", || gate.waiters() == 1).await;

    // The stallers' handlers read their body now: one byte, then nothing.
    server.go.send(true).unwrap();

    for staller in &mut stallers {
        let (answer, error) = read_to_close(staller).await;
        let answer = String::from_utf8_lossy(&answer);
        assert!(answer.starts_with("HTTP/1.1 408 "), "{answer:?}");
        assert!(answer.contains("\r\nconnection: close\r\n"), "{answer:?}");
        assert!(
            error.is_none(),
            "a reset, not an EOF: {error:?} after {answer:?}"
        );
    }
    // The parked client was admitted once a staller's unit came back.
    let cuts = bounded("the normal client's handler", server.arrivals.recv()).await;
    assert!(cuts >= Some(1), "admitted before any cut: {cuts:?}");
    let (answer, _) = read_to_close(&mut normal).await;
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 200 OK\r\n"), "{answer:?}");
    assert!(answer.ends_with("stored 5 bytes\n"), "{answer:?}");

    bounded("every unit back", counting.in_use_becomes(0)).await;
    let cuts = counting.cuts();
    assert_eq!(cuts.len(), 2, "{cuts:?}");
    for cut in &cuts {
        assert_eq!((cut.source, cut.units), ("upload", 1));
        assert!(
            matches!(cut.reason, CutReason::Idle | CutReason::Rate),
            "{cut:?}"
        );
    }
    assert_eq!(counting.admitted(), 3);
    assert_eq!(
        counting.released.load(std::sync::atomic::Ordering::SeqCst),
        3
    );
    assert_eq!(counting.shed(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_download_left_unread_is_cut_its_connection_aborted_and_its_unit_returned() {
    let (gate, counting) = gate(2, Duration::from_secs(60));
    let mut server = server(&gate, &counting).await;

    let mut client = connect(server.addr).await;
    let head = "GET /download HTTP/1.1\r\nhost: test\r\nconnection: close\r\n\r\n";
    client.write_all(head.as_bytes()).await.unwrap();
    let seen = read_until(&mut client, "\r\n\r\n").await;
    assert!(
        seen.starts_with(b"HTTP/1.1 200 OK\r\n"),
        "{:?}",
        String::from_utf8_lossy(&seen[..seen.len().min(200)])
    );
    assert_eq!(gate.in_use(), 1);

    // The client reads nothing more: the socket's buffers fill, hyper holds a
    // frame it cannot write, and the rule cuts the response.
    bounded("the unit back", counting.in_use_becomes(0)).await;
    let cuts = counting.cuts();
    assert_eq!(cuts.len(), 1, "{cuts:?}");
    assert_eq!(
        (cuts[0].source, cuts[0].units, cuts[0].reason),
        ("upload", 1, CutReason::Response)
    );

    // The server aborted the connection: hyper's connection ends, in an error,
    // while the client still reads nothing.
    let errored = bounded("the connection's end", server.closed.recv()).await;
    assert_eq!(errored, Some(true), "the connection ended without an error");

    // Reading now drains what was buffered, then
    // ends (EOF or reset), short of the whole download.
    let (rest, error) = read_to_close(&mut client).await;
    let total = seen.len() + rest.len();
    assert!(
        total < DOWNLOAD,
        "the whole download arrived: {total} bytes"
    );
    if let Some(error) = error {
        assert_eq!(error.kind(), std::io::ErrorKind::ConnectionReset, "{error}");
    }
    assert_eq!(
        counting.released.load(std::sync::atomic::Ordering::SeqCst),
        1
    );
    assert_eq!(gate.in_use(), 0);
}
