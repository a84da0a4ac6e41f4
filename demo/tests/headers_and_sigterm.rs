//! Two ways a client or the platform ends a connection or the server, and what the
//! demo's server does about them: a request whose headers never finish is closed
//! after the header read timeout (on the paused clock, with real loopback sockets),
//! and `admit-demo serve` drains on SIGTERM as on Ctrl-C (the built binary, sent a
//! real SIGTERM). Both bounded in time; neither sleeps to order anything.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::Duration;

use admit_demo::server::{App, DemoObserver, Server, ServerStats, HEADER_READ_TIMEOUT, MAX_UNITS};
use admit_demo::sessions::IdMinter;
use admit_demo::Route;
use metrics_exporter_prometheus::PrometheusBuilder;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// Runs in the test's runtime on the paused clock: the 10 s pass as soon as
/// nothing else is left to do, and the connection is closed at the timeout, not
/// before.
#[tokio::test(start_paused = true)]
async fn a_request_whose_headers_never_finish_is_closed_at_the_header_timeout() {
    let recorder = PrometheusBuilder::new().build_recorder();
    let stats = Arc::new(ServerStats::default());
    let gate = metrics::with_local_recorder(&recorder, || {
        admit_tokio::gate::<Route>(2)
            .max_units(MAX_UNITS)
            .observer(DemoObserver::new(Arc::clone(&stats)))
            .build()
    })
    .unwrap();
    let app = Arc::new(App {
        gate: gate.clone(),
        stats: Arc::clone(&stats),
        prometheus: recorder.handle(),
        session_buffer: 1 << 20,
        hold: Duration::ZERO,
        sessions: admit_tokio::leases(&gate, Duration::from_secs(1)),
        ids: IdMinter::default(),
    });
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let server = Server::start(listener, app).unwrap();

    // One connection that stops in the middle of a header line, one that sends
    // nothing at all.
    let mut partial = TcpStream::connect(server.addr).await.unwrap();
    partial
        .write_all(b"POST /upload HTTP/1.1\r\nhost: test\r\ncontent-le")
        .await
        .unwrap();
    let mut silent = TcpStream::connect(server.addr).await.unwrap();
    let sent = tokio::time::Instant::now();

    // Both open until just before the timeout (read at once, so that waiting on
    // one lets no time pass unseen for the other)...
    let (mut partial_answer, mut silent_answer) = (Vec::new(), Vec::new());
    let early = tokio::join!(
        tokio::time::timeout_at(
            sent + HEADER_READ_TIMEOUT - Duration::from_millis(100),
            partial.read_to_end(&mut partial_answer),
        ),
        tokio::time::timeout_at(
            sent + HEADER_READ_TIMEOUT - Duration::from_millis(100),
            silent.read_to_end(&mut silent_answer),
        ),
    );
    assert!(
        early.0.is_err() && early.1.is_err(),
        "closed before the timeout: {early:?}"
    );
    // ...both closed just after it, without a byte of an answer (a reset counts).
    let late = tokio::join!(
        tokio::time::timeout_at(
            sent + HEADER_READ_TIMEOUT + Duration::from_millis(100),
            partial.read_to_end(&mut partial_answer),
        ),
        tokio::time::timeout_at(
            sent + HEADER_READ_TIMEOUT + Duration::from_millis(100),
            silent.read_to_end(&mut silent_answer),
        ),
    );
    for (name, closed, answer) in [
        ("partial", late.0, &partial_answer),
        ("silent", late.1, &silent_answer),
    ] {
        let closed = closed.unwrap_or_else(|_| panic!("{name}: open past the header timeout"));
        if let Ok(n) = closed {
            assert_eq!(n, 0, "{name}: {:?}", String::from_utf8_lossy(answer));
        }
        assert!(answer.is_empty(), "{name}: answered {answer:?}");
    }
    assert_eq!(gate.in_use(), 0);
    assert_eq!(stats.admitted.load(std::sync::atomic::Ordering::Relaxed), 0);
    server.stop().await;
}

/// The built binary, as a container runtime stops it: `serve` on a free port,
/// SIGTERM once it has printed its address, then its drain line and exit code 0.
#[cfg(unix)]
#[test]
fn serve_drains_on_sigterm_and_exits_0() {
    let child = Command::new(env!("CARGO_BIN_EXE_admit-demo"))
        .args(["serve", "--plot", "none", "--grace", "5s"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut child = Reaped(child);
    let stdout = child.0.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut lines = Lines {
        rx,
        deadline: std::time::Instant::now() + Duration::from_secs(60),
        seen: Vec::new(),
    };

    // Its address line: it listens, and its signal handlers are in place.
    loop {
        match lines.next() {
            Some(line) if line.starts_with("  server    http://127.0.0.1:") => break,
            Some(_) => {}
            None => panic!("exited before serving:\n{}", lines.seen.join("\n")),
        }
    }
    let killed = Command::new("kill")
        .args(["-TERM", &child.0.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    while lines.next().is_some() {}
    reader.join().unwrap();
    let status = child.0.wait().unwrap();

    let out = lines.seen.join("\n");
    assert!(
        lines
            .seen
            .iter()
            .any(|l| l.starts_with("  stopping  the gate is closed")),
        "{out}"
    );
    assert!(
        lines
            .seen
            .iter()
            .any(|l| l.starts_with("  drained   every unit back after")),
        "{out}"
    );
    assert!(status.success(), "{status:?}\n{out}");
}

/// The child's stdout, line by line, each within what is left of the deadline.
struct Lines {
    rx: mpsc::Receiver<String>,
    deadline: std::time::Instant,
    seen: Vec<String>,
}

impl Lines {
    /// The next line; `None` at the end of the output; a panic past the deadline.
    fn next(&mut self) -> Option<String> {
        let left = self
            .deadline
            .saturating_duration_since(std::time::Instant::now());
        match self.rx.recv_timeout(left) {
            Ok(line) => {
                self.seen.push(line.clone());
                Some(line)
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => None,
            Err(mpsc::RecvTimeoutError::Timeout) => {
                panic!("no end in time; stdout so far:\n{}", self.seen.join("\n"))
            }
        }
    }
}

/// The child, killed and reaped if the test ends before it exits.
struct Reaped(std::process::Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        if matches!(self.0.try_wait(), Ok(None)) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}
