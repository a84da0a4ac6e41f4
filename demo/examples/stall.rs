//! A hostile client against `admit-demo serve`: clients that take a unit and stop
//! sending ("stallers"), beside one normal client whose admissions say whether the
//! gate still serves anyone (issue 50, "Holders that stall").
//!
//! ```text
//! cargo run -p admit-demo --example stall -- --addr 127.0.0.1:PORT \
//!     [--stallers 16] [--kind trickle|session] [--seconds 60]
//! ```
//!
//! - `trickle`: a connection sends `POST /upload` with `Content-Length: 262144` (no
//!   `Expect: 100-continue`), then one body byte a second, and never reconnects,
//!   until the server answers or closes the connection.
//! - `session`: `POST /v2/uploads` (its `202` and `Location`), then a `PATCH` of that
//!   location with `Content-Length: 100000` that sends 10 bytes and stops.
//! - `reader` (a response the client never reads) is not offered: the demo has no
//!   route whose response is larger than the socket buffers take (`/metrics` is a few
//!   KiB and holds no unit), so such a client would hold nothing.
//!
//! The normal client starts a second after every staller is in place (its
//! request sent): one try after the other, each on a fresh connection,
//! `POST /upload` with a 256 KiB body sent at once (no `Expect`), 15 s at most,
//! 0.5 s between the end of one try and the next; the stallers keep their
//! connections until its last try (begun before the end) has ended, so that none
//! frees a unit for it by leaving. At the end one block: the normal client's tries
//! and admissions, overall and from 20 s on (a third of the run when it is
//! shorter), and how and when the server ended the stallers. Loopback addresses
//! only: this is a test tool.

use std::io;
use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinSet;
use tokio::time::Instant;

const USAGE: &str = "\
stall: stallers and one normal client against an admit-demo server

USAGE: stall --addr 127.0.0.1:PORT [--stallers N] [--kind trickle|session] [--seconds S]

  --addr ADDR      the server (a loopback address)
  --stallers N     how many stallers                          [default: 16]
  --kind KIND      trickle: POST /upload, Content-Length 262144, one byte a second
                   session: POST /v2/uploads, then a PATCH of 100000 bytes that stops after 10
                   (reader, a response never read: the demo has no large response; not offered)
                                                               [default: trickle]
  --seconds S      how long the run lasts                      [default: 60]
";

/// The trickler's announced body.
const TRICKLE_LENGTH: usize = 262_144;
/// The stalled `PATCH`'s announced body, and what it sends of it.
const PATCH_LENGTH: usize = 100_000;
const PATCH_SENT: usize = 10;
/// The normal client's body, its bound per try, and its pause between tries.
const NORMAL_BODY: usize = 256 << 10;
const NORMAL_TIMEOUT: Duration = Duration::from_secs(15);
const NORMAL_PAUSE: Duration = Duration::from_millis(500);
/// From when the normal client's tries count as "later" (the issue's 20 s).
const LATER: Duration = Duration::from_secs(20);
/// The most stallers a run may open: bounded traffic.
const MAX_STALLERS: usize = 1024;
/// How long the stallers get to be in place before the normal client starts anyway.
const SETUP_BOUND: Duration = Duration::from_secs(5);
/// Once they are, how long the server gets to take their requests before the
/// normal client starts (a staller's bytes are sent before the server has read
/// them: without it the normal client may race the last stallers to the gate).
const SETTLE: Duration = Duration::from_secs(1);
/// The largest response head read.
const MAX_HEAD: usize = 64 << 10;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Trickle,
    Session,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Self::Trickle => "trickle",
            Self::Session => "session",
        }
    }
}

#[derive(Debug)]
struct Args {
    addr: SocketAddr,
    stallers: usize,
    kind: Kind,
    run: Duration,
}

fn parse_args() -> Result<Option<Args>, String> {
    let mut addr = None;
    let mut stallers = 16;
    let mut kind = Kind::Trickle;
    let mut run = Duration::from_secs(60);
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let (flag, inline) = match arg.split_once('=') {
            Some((flag, value)) if flag.starts_with("--") => (flag.to_owned(), Some(value.into())),
            _ => (arg, None),
        };
        if flag == "-h" || flag == "--help" {
            return Ok(None);
        }
        let value = inline
            .or_else(|| args.next())
            .ok_or_else(|| format!("{flag} needs a value"))?;
        match flag.as_str() {
            "--addr" => {
                let a: SocketAddr = value
                    .parse()
                    .map_err(|_| format!("--addr: not an address: {value}"))?;
                if !a.ip().is_loopback() {
                    return Err(format!("--addr: {a} is not a loopback address"));
                }
                addr = Some(a);
            }
            "--stallers" => {
                stallers = value
                    .parse()
                    .ok()
                    .filter(|n| (1..=MAX_STALLERS).contains(n))
                    .ok_or_else(|| format!("--stallers must be 1..={MAX_STALLERS}"))?;
            }
            "--kind" => {
                kind = match value.as_str() {
                    "trickle" => Kind::Trickle,
                    "session" => Kind::Session,
                    "reader" => {
                        return Err(
                            "--kind reader: the demo has no route with a large response \
                             (a response the client never reads would hold nothing); skipped"
                                .into(),
                        )
                    }
                    _ => return Err(format!("--kind: trickle or session, not {value}")),
                };
            }
            "--seconds" => {
                run = value
                    .parse::<f64>()
                    .ok()
                    .filter(|s| (1.0..=600.0).contains(s))
                    .map(Duration::from_secs_f64)
                    .ok_or_else(|| "--seconds must be 1..=600".to_owned())?;
            }
            _ => return Err(format!("unknown argument {flag:?}; try --help")),
        }
    }
    let addr = addr.ok_or("--addr is required")?;
    Ok(Some(Args {
        addr,
        stallers,
        kind,
        run,
    }))
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(Some(args)) => args,
        Ok(None) => {
            print!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("stall: {e}");
            return ExitCode::from(2);
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("stall: {e}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(run(args));
    ExitCode::SUCCESS
}

/// How the server ended a staller's request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum How {
    /// It answered with this status (a `408` cut, a `503` shed...).
    Status(u16),
    /// It closed the connection without a response.
    Close,
    /// The connection was reset (or broken) without a response.
    Reset,
    /// `session`: the `POST` that opens it was not answered `202` (this status, or 0
    /// for no answer at all): it never held a session.
    Refused(u16),
    /// Something else went wrong on our side (connect failed...).
    Error,
}

impl How {
    fn label(self) -> String {
        match self {
            Self::Status(s) => s.to_string(),
            Self::Close => "close".into(),
            Self::Reset => "reset".into(),
            Self::Refused(0) => "POST failed".into(),
            Self::Refused(s) => format!("POST {s}"),
            Self::Error => "error".into(),
        }
    }
}

/// A staller's end: when (after the run's start) and how; `None`: still open at
/// the run's end.
type Ended = Option<(Duration, How)>;

/// One try of the normal client.
#[derive(Debug, Clone, Copy)]
struct Try {
    /// When it started, after the run's start.
    at: Duration,
    took: Duration,
    outcome: Outcome,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    Status(u16),
    Timeout,
    /// No response: the connection failed, closed or was reset first.
    Error,
}

/// The run's clock, as the stallers see it.
#[derive(Debug, Clone)]
struct Clock {
    start: Instant,
    /// Past it, what a staller saw is no longer recorded...
    deadline: Instant,
    /// ...but it keeps its connection as it was until this turns true: the normal
    /// client's last try has ended (a staller gone at the deadline would free a unit
    /// for that try).
    done: watch::Receiver<bool>,
}

impl Clock {
    fn since_start(&self) -> Duration {
        self.start.elapsed()
    }
}

async fn run(args: Args) {
    let start = Instant::now();
    let deadline = start + args.run;
    let (done, done_rx) = watch::channel(false);
    let clock = Clock {
        start,
        deadline,
        done: done_rx,
    };
    println!(
        "stall: {} {} stallers and one normal client against {} for {}",
        args.stallers,
        args.kind.name(),
        args.addr,
        secs(args.run)
    );

    let (placed_tx, mut placed) = mpsc::channel::<()>(args.stallers);
    let mut stallers = JoinSet::new();
    for _ in 0..args.stallers {
        let placed = placed_tx.clone();
        let addr = args.addr;
        match args.kind {
            Kind::Trickle => stallers.spawn(trickle(addr, clock.clone(), placed)),
            Kind::Session => stallers.spawn(session(addr, clock.clone(), placed)),
        };
    }
    drop(placed_tx);
    // Every staller in place (its headers and first bytes sent), or ended, or the
    // bound passed: then the normal client starts.
    let _ = tokio::time::timeout(SETUP_BOUND, async {
        for _ in 0..args.stallers {
            if placed.recv().await.is_none() {
                break;
            }
        }
    })
    .await;
    tokio::time::sleep(SETTLE).await;

    let tries = normal_client(args.addr, start, deadline).await;
    let _ = done.send(true);
    let ends: Vec<Ended> = stallers.join_all().await;
    print!("{}", summary(&args, &tries, &ends));
}

/// `POST /upload` with `Content-Length: 262144`, then a byte a second.
async fn trickle(addr: SocketAddr, clock: Clock, placed: mpsc::Sender<()>) -> Ended {
    let at = || clock.since_start();
    let Ok(stream) = connect(addr).await else {
        let _ = placed.send(()).await;
        return Some((at(), How::Error));
    };
    let (mut rd, mut wr) = stream.into_split();
    let head = request_head("POST", "/upload", addr, TRICKLE_LENGTH);
    let sent = wr.write_all(head.as_bytes()).await;
    let _ = placed.send(()).await;
    if let Err(e) = sent {
        return Some((at(), how_of(&e)));
    }
    let trickling = async {
        let mut tick = tokio::time::interval_at(
            Instant::now() + Duration::from_secs(1),
            Duration::from_secs(1),
        );
        for _ in 0..TRICKLE_LENGTH {
            tick.tick().await;
            wr.write_all(b"x").await?;
        }
        std::future::pending::<io::Result<()>>().await
    };
    await_end(&mut rd, trickling, &clock).await
}

/// `POST /v2/uploads`, then a `PATCH` of its location that stops after 10 bytes.
async fn session(addr: SocketAddr, clock: Clock, placed: mpsc::Sender<()>) -> Ended {
    let at = || clock.since_start();
    let opened = tokio::time::timeout_at(clock.deadline, open_session(addr)).await;
    let location = match opened {
        Err(_) => {
            let _ = placed.send(()).await;
            return None;
        }
        Ok(Err(status)) => {
            let _ = placed.send(()).await;
            return Some((at(), How::Refused(status)));
        }
        Ok(Ok(location)) => location,
    };
    let Ok(stream) = connect(addr).await else {
        let _ = placed.send(()).await;
        return Some((at(), How::Error));
    };
    let (mut rd, mut wr) = stream.into_split();
    let mut request = request_head("PATCH", &location, addr, PATCH_LENGTH).into_bytes();
    request.extend_from_slice(&[b'x'; PATCH_SENT]);
    let sent = wr.write_all(&request).await;
    let _ = placed.send(()).await;
    if let Err(e) = sent {
        return Some((at(), how_of(&e)));
    }
    // Then nothing more: the connection stays open, the body unfinished.
    await_end(&mut rd, std::future::pending::<io::Result<()>>(), &clock).await
}

/// The session's location, or the status that refused it (0: no answer).
async fn open_session(addr: SocketAddr) -> Result<String, u16> {
    let response = admit_demo::client::request(addr, "POST", "/v2/uploads", b"")
        .await
        .map_err(|_| 0_u16)?;
    match response.header("location") {
        Some(location) if response.status == 202 => Ok(location.to_owned()),
        _ => Err(response.status),
    }
}

/// Waits, until the deadline, for the server to end the request: a response head
/// (its status), or the connection closed or reset. `sending` runs beside it; if it
/// fails first, a response the server sent before it closed is still looked for.
/// Still open at the deadline: `None`, once the normal client is done (until then
/// the connection stays open, and `sending` goes on).
async fn await_end<R, F>(rd: &mut R, sending: F, clock: &Clock) -> Ended
where
    R: AsyncRead + Unpin,
    F: std::future::Future<Output = io::Result<()>>,
{
    let mut buf = Vec::new();
    let ending = async {
        tokio::select! {
            biased;
            read = read_status(rd, &mut buf) => (clock.since_start(), how_of_read(read)),
            sent = sending => {
                let failed_at = clock.since_start();
                let e = sent.err().unwrap_or_else(|| io::ErrorKind::Other.into());
                // A response sent before the close may still be there to read.
                match tokio::time::timeout(Duration::from_secs(1), read_status(rd, &mut buf)).await {
                    Ok(Ok(Some(status))) => (failed_at, How::Status(status)),
                    _ => (failed_at, how_of(&e)),
                }
            }
        }
    };
    tokio::pin!(ending);
    tokio::select! {
        ended = &mut ending => return Some(ended),
        () = tokio::time::sleep_until(clock.deadline) => {}
    }
    let mut done = clock.done.clone();
    tokio::select! {
        _ = &mut ending => {}
        _ = done.wait_for(|done| *done) => {}
    }
    None
}

fn how_of_read(read: io::Result<Option<u16>>) -> How {
    match read {
        Ok(Some(status)) => How::Status(status),
        Ok(None) => How::Close,
        Err(e) => how_of(&e),
    }
}

fn how_of(e: &io::Error) -> How {
    match e.kind() {
        io::ErrorKind::ConnectionReset
        | io::ErrorKind::ConnectionAborted
        | io::ErrorKind::BrokenPipe => How::Reset,
        io::ErrorKind::UnexpectedEof => How::Close,
        _ => How::Error,
    }
}

/// The normal client: tries until the deadline, one after the other.
async fn normal_client(addr: SocketAddr, start: Instant, deadline: Instant) -> Vec<Try> {
    let body = vec![b'n'; NORMAL_BODY];
    let mut tries = Vec::new();
    while Instant::now() < deadline {
        let began = Instant::now();
        let outcome = match tokio::time::timeout(NORMAL_TIMEOUT, upload(addr, &body)).await {
            Err(_) => Outcome::Timeout,
            Ok(Ok(status)) => Outcome::Status(status),
            Ok(Err(_)) => Outcome::Error,
        };
        tries.push(Try {
            at: began - start,
            took: began.elapsed(),
            outcome,
        });
        tokio::time::sleep(NORMAL_PAUSE).await;
    }
    tries
}

/// One upload on a fresh connection, the body sent at once with the headers; the
/// response read (beside the sending: a `503` may come before the body is taken)
/// to its end.
async fn upload(addr: SocketAddr, body: &[u8]) -> io::Result<u16> {
    let stream = connect(addr).await?;
    let (mut rd, mut wr) = stream.into_split();
    let mut request = request_head("POST", "/upload", addr, body.len()).into_bytes();
    request.extend_from_slice(body);
    let mut buf = Vec::new();
    let sending = async {
        wr.write_all(&request).await?;
        std::future::pending::<io::Result<()>>().await
    };
    let status = tokio::select! {
        biased;
        read = read_status(&mut rd, &mut buf) => read?,
        sent = sending => match sent {
            Err(e) => {
                // Refused before the body went: the answer may still be there.
                match tokio::time::timeout(Duration::from_secs(1), read_status(&mut rd, &mut buf)).await {
                    Ok(Ok(Some(status))) => Some(status),
                    _ => return Err(e),
                }
            }
            Ok(()) => None,
        },
    };
    let status = status.ok_or_else(|| io::Error::from(io::ErrorKind::UnexpectedEof))?;
    let mut rest = Vec::new();
    let _ = rd.read_to_end(&mut rest).await; // `connection: close`: to the end
    Ok(status)
}

fn request_head(method: &str, path: &str, addr: SocketAddr, len: usize) -> String {
    format!(
        "{method} {path} HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/octet-stream\r\n\
         content-length: {len}\r\nconnection: close\r\n\r\n"
    )
}

async fn connect(addr: SocketAddr) -> io::Result<TcpStream> {
    let stream = TcpStream::connect(addr).await?;
    stream.set_nodelay(true)?;
    Ok(stream)
}

/// Reads up to the end of a response head and returns its status (skipping any
/// `1xx`); `None`: the connection closed before one.
async fn read_status<R: AsyncRead + Unpin>(
    rd: &mut R,
    buf: &mut Vec<u8>,
) -> io::Result<Option<u16>> {
    loop {
        while let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let status = std::str::from_utf8(&buf[..end])
                .ok()
                .and_then(|head| head.split_whitespace().nth(1))
                .and_then(|code| code.parse::<u16>().ok())
                .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "no status line"))?;
            buf.drain(..end + 4);
            if !(100..200).contains(&status) {
                return Ok(Some(status));
            }
        }
        if buf.len() > MAX_HEAD {
            return Err(io::Error::new(io::ErrorKind::InvalidData, "head too long"));
        }
        let mut chunk = [0; 4096];
        let n = rd.read(&mut chunk).await?;
        if n == 0 {
            return Ok(None);
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// `20s`, `3.3s` (one decimal, none when it is 0).
fn secs(d: Duration) -> String {
    let s = format!("{:.1}", d.as_secs_f64());
    format!("{}s", s.strip_suffix(".0").unwrap_or(&s))
}

/// `min / median / max` of `xs` in seconds (one decimal).
fn spread(mut xs: Vec<Duration>) -> String {
    xs.sort();
    match (xs.first(), xs.get(xs.len() / 2), xs.last()) {
        (Some(min), Some(median), Some(max)) => format!(
            "{:.1} / {:.1} / {:.1} s",
            min.as_secs_f64(),
            median.as_secs_f64(),
            max.as_secs_f64()
        ),
        _ => "-".into(),
    }
}

fn summary(args: &Args, tries: &[Try], ends: &[Ended]) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    let later = LATER.min(args.run / 3);
    let admitted = |tries: &mut dyn Iterator<Item = &Try>| {
        let (mut of, mut ok) = (0, 0);
        for t in tries {
            of += 1;
            ok += usize::from(t.outcome == Outcome::Status(200));
        }
        (ok, of)
    };
    let (ok, of) = admitted(&mut tries.iter());
    let (later_ok, later_of) = admitted(&mut tries.iter().filter(|t| t.at >= later));
    let count = |o: fn(&Outcome) -> bool| tries.iter().filter(|t| o(&t.outcome)).count();
    let others = count(|o| matches!(o, Outcome::Status(s) if *s != 200 && *s != 503));
    let _ = writeln!(
        out,
        "normal client: admitted {ok} of {of} tries ({later_ok} of {later_of} from {} on); \
         503 {}, timeout {}, error {}{}",
        secs(later),
        count(|o| *o == Outcome::Status(503)),
        count(|o| *o == Outcome::Timeout),
        count(|o| *o == Outcome::Error),
        if others > 0 {
            format!(", other status {others}")
        } else {
            String::new()
        },
    );
    let took = |status: u16| {
        spread(
            tries
                .iter()
                .filter(|t| t.outcome == Outcome::Status(status))
                .map(|t| t.took)
                .collect(),
        )
    };
    let admitted_at: Vec<String> = tries
        .iter()
        .filter(|t| t.outcome == Outcome::Status(200))
        .map(|t| secs(t.at))
        .collect();
    let _ = writeln!(
        out,
        "  a try took {} when admitted, {} when shed (min / median / max){}",
        took(200),
        took(503),
        match admitted_at.len() {
            0 => String::new(),
            1..=8 => format!("; admitted tries began at {}", admitted_at.join(", ")),
            _ => String::new(),
        }
    );
    let ended: Vec<(Duration, How)> = ends.iter().flatten().copied().collect();
    let _ = writeln!(
        out,
        "stallers ({} {}): {} ended by the server, {} still open at {}",
        ends.len(),
        args.kind.name(),
        ended.len(),
        ends.len() - ended.len(),
        secs(args.run)
    );
    let mut hows: Vec<How> = ended.iter().map(|&(_, how)| how).collect();
    hows.sort();
    hows.dedup();
    for how in hows {
        let times: Vec<Duration> = ended
            .iter()
            .filter(|&&(_, h)| h == how)
            .map(|&(t, _)| t)
            .collect();
        let _ = writeln!(
            out,
            "  {:<11} {:>4}  at {} after the start (min / median / max)",
            how.label(),
            times.len(),
            spread(times)
        );
    }
    out
}
