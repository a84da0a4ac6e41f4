//! `admit-demo load`: a load generator pointed at a server that is already
//! running (`admit-demo serve`, in another process, a container or a cgroup).
//!
//! `clients` loops run side by side for `duration`, each sending `POST /upload`
//! with a body of `payload` bytes, one try after the other, each on a fresh
//! connection with [`client::post`] (`Expect: 100-continue`: a shed upload gets
//! its `503` before its body is sent). A try that gets no whole answer within
//! `timeout` counts as timed out. After a refused or broken connection a loop
//! pauses [`ERROR_PAUSE`], after any answer but `200` [`REFUSED_PAUSE`], so a
//! dead or shedding server is not hammered in a busy loop; after a `200` it goes
//! on at once. No new try starts after `duration`; the tries under way then end
//! as they end (each within `timeout`), and count. At the end, [`LoadSummary`]:
//! the tries by outcome, the completed uploads a second, and a `load:` line of
//! `key=value` pairs for scripts.

use std::collections::BTreeMap;
use std::fmt;
use std::io;
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::task::JoinSet;
use tokio::time::Instant;

use crate::client;
use crate::config::{bytes, ArgError, MAX_CLIENTS};
use crate::secs;

/// Client loops by default.
pub const DEFAULT_CLIENTS: usize = 40;

/// How long the loops start tries, by default.
pub const DEFAULT_DURATION: Duration = Duration::from_secs(40);

/// The body of each upload by default: 8 MiB less 4 KiB, nearly one default
/// session buffer (8 MiB), so every admitted upload fills one.
pub const DEFAULT_PAYLOAD: usize = (8 << 20) - (4 << 10);

/// How long one try may take, connection to last byte of the answer, by default.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// The longest `--duration` taken: an hour.
pub const MAX_DURATION: Duration = Duration::from_secs(3600);

/// The longest `--timeout` taken.
pub const MAX_TIMEOUT: Duration = Duration::from_secs(600);

/// The largest `--payload` taken (the body is held once, shared by the loops).
pub const MAX_PAYLOAD: usize = 1 << 30;

/// A loop's pause after an answer other than `200`: a shedding server is asked
/// again soon, but not in a busy loop.
pub const REFUSED_PAUSE: Duration = Duration::from_millis(50);

/// A loop's pause after a connection error (refused, reset, closed early).
pub const ERROR_PAUSE: Duration = Duration::from_millis(100);

/// How often a progress line is printed while the load runs.
pub const PROGRESS_EVERY: Duration = Duration::from_secs(10);

/// The path every try uploads to.
pub const UPLOAD_PATH: &str = "/upload";

/// What `admit-demo load` runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadConfig {
    /// The server, `HOST:PORT` as given (resolved by [`resolve`](Self::resolve)).
    pub target: String,
    /// Client loops running side by side.
    pub clients: usize,
    /// How long the loops start new tries.
    pub duration: Duration,
    /// Bytes of each upload's body.
    pub payload: usize,
    /// How long one try may take before it counts as timed out.
    pub timeout: Duration,
}

impl LoadConfig {
    /// The defaults, against `target`.
    #[must_use]
    pub fn new(target: impl Into<String>) -> Self {
        Self {
            target: target.into(),
            clients: DEFAULT_CLIENTS,
            duration: DEFAULT_DURATION,
            payload: DEFAULT_PAYLOAD,
            timeout: DEFAULT_TIMEOUT,
        }
    }

    /// Checks the values are ones the load generator takes.
    ///
    /// # Errors
    ///
    /// A message naming the flag out of range.
    pub fn validate(&self) -> Result<(), ArgError> {
        let fail = |m: String| Err(ArgError(m));
        if split_target(&self.target).is_none() {
            return fail(format!(
                "--target: not HOST:PORT (e.g. 127.0.0.1:8080): {:?}",
                self.target
            ));
        }
        if self.clients == 0 || self.clients > MAX_CLIENTS {
            return fail(format!("--clients must be 1..={MAX_CLIENTS}"));
        }
        if self.duration.is_zero() || self.duration > MAX_DURATION {
            return fail(format!(
                "--duration must be more than 0 and at most {}",
                secs(MAX_DURATION)
            ));
        }
        if self.payload > MAX_PAYLOAD {
            return fail(format!(
                "--payload must be at most {}",
                bytes(MAX_PAYLOAD as u64)
            ));
        }
        if self.timeout.is_zero() || self.timeout > MAX_TIMEOUT {
            return fail(format!(
                "--timeout must be more than 0 and at most {}",
                secs(MAX_TIMEOUT)
            ));
        }
        Ok(())
    }

    /// The target's first address.
    ///
    /// # Errors
    ///
    /// A target that does not resolve.
    pub fn resolve(&self) -> io::Result<SocketAddr> {
        self.target.to_socket_addrs()?.next().ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::NotFound,
                format!("{} resolves to no address", self.target),
            )
        })
    }
}

/// `HOST:PORT` split, with a port from 1 up and a host not empty (`[::1]:80`
/// included); `None` otherwise.
#[must_use]
pub fn split_target(target: &str) -> Option<(&str, u16)> {
    let (host, port) = target.rsplit_once(':')?;
    let port: u16 = port.parse().ok().filter(|&p| p > 0)?;
    let bracketed = host.starts_with('[') && host.ends_with(']') && host.len() > 2;
    (!host.is_empty() && (bracketed || !host.contains(':'))).then_some((host, port))
}

/// The counts as the loops go, shared by them and the progress line.
#[derive(Debug, Default)]
struct Tally {
    tries: AtomicU64,
    completed: AtomicU64,
    shed: AtomicU64,
    unavailable: AtomicU64,
    cut: AtomicU64,
    too_large: AtomicU64,
    other: Mutex<BTreeMap<u16, u64>>,
    refused: AtomicU64,
    broken: AtomicU64,
    timed_out: AtomicU64,
    /// When the first connection error was seen, in milliseconds after the start
    /// plus one; 0: none yet.
    first_error: AtomicU64,
}

impl Tally {
    fn add(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }

    fn connection_error(&self, error: &io::Error, since_start: Duration) {
        Self::add(if error.kind() == io::ErrorKind::ConnectionRefused {
            &self.refused
        } else {
            &self.broken
        });
        let at = u64::try_from(since_start.as_millis()).unwrap_or(u64::MAX - 1) + 1;
        let _ = self
            .first_error
            .compare_exchange(0, at, Ordering::Relaxed, Ordering::Relaxed);
    }

    fn errors(&self) -> u64 {
        self.refused.load(Ordering::Relaxed) + self.broken.load(Ordering::Relaxed)
    }
}

/// What the load saw, at its end.
#[derive(Debug, Clone, PartialEq)]
pub struct LoadSummary {
    /// The load as configured.
    pub config: LoadConfig,
    /// The address the target resolved to.
    pub addr: SocketAddr,
    /// From the start to the end of the last try.
    pub elapsed: Duration,
    /// Tries started (each ends in exactly one of the outcomes below).
    pub tries: u64,
    /// `200`: uploads completed.
    pub completed: u64,
    /// `503` with `Retry-After`: shed by the gate.
    pub shed: u64,
    /// `503` without `Retry-After` (a closed gate).
    pub unavailable: u64,
    /// `408`: cut by the progress rule.
    pub cut: u64,
    /// `413`: larger than a session buffer.
    pub too_large: u64,
    /// Any other status, by status.
    pub other: BTreeMap<u16, u64>,
    /// Connections refused.
    pub refused: u64,
    /// Connections that failed after they were made: reset, closed before a whole
    /// answer, a write that failed.
    pub broken: u64,
    /// Tries with no whole answer within the timeout.
    pub timed_out: u64,
    /// When the first connection error was seen, after the start.
    pub first_error: Option<Duration>,
    /// How long the completed uploads took, sorted.
    pub latencies: Vec<Duration>,
}

impl LoadSummary {
    /// Answers with another status, all of them.
    #[must_use]
    pub fn other_total(&self) -> u64 {
        self.other.values().sum()
    }

    /// Connection errors: refused and broken.
    #[must_use]
    pub fn connection_errors(&self) -> u64 {
        self.refused + self.broken
    }

    /// Completed uploads a second, over [`elapsed`](Self::elapsed).
    #[must_use]
    pub fn completed_per_sec(&self) -> f64 {
        let secs = self.elapsed.as_secs_f64();
        if secs > 0.0 {
            self.completed as f64 / secs
        } else {
            0.0
        }
    }

    /// The `q` quantile (0..=1) of the completed uploads' latencies.
    #[must_use]
    pub fn latency(&self, q: f64) -> Option<Duration> {
        let last = self.latencies.len().checked_sub(1)?;
        let at = ((last as f64) * q).round() as usize;
        self.latencies.get(at.min(last)).copied()
    }

    /// One line of `key=value` pairs, starting `load:`, for scripts.
    #[must_use]
    pub fn machine_line(&self) -> String {
        format!(
            "load: tries={} completed={} shed_retry_after={} shed_no_retry_after={} \
             status_408={} status_413={} status_other={} connection_errors={} refused={} \
             broken={} timed_out={} elapsed_s={:.1} completed_per_s={:.2}",
            self.tries,
            self.completed,
            self.shed,
            self.unavailable,
            self.cut,
            self.too_large,
            self.other_total(),
            self.connection_errors(),
            self.refused,
            self.broken,
            self.timed_out,
            self.elapsed.as_secs_f64(),
            self.completed_per_sec(),
        )
    }
}

impl fmt::Display for LoadSummary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ms = |d: Option<Duration>| d.map_or_else(|| "-".into(), secs);
        writeln!(
            f,
            "summary   {} tries in {:.1}s from {} clients against {}",
            self.tries,
            self.elapsed.as_secs_f64(),
            self.config.clients,
            self.addr
        )?;
        writeln!(
            f,
            "  200        {:>7}  completed uploads, {:.2}/s, {} in all; took p50 {}, p99 {}, max {}",
            self.completed,
            self.completed_per_sec(),
            bytes(self.completed.saturating_mul(self.config.payload as u64)),
            ms(self.latency(0.5)),
            ms(self.latency(0.99)),
            ms(self.latencies.last().copied()),
        )?;
        writeln!(
            f,
            "  503        {:>7}  with Retry-After (shed), {} without (a closed gate)",
            self.shed, self.unavailable
        )?;
        writeln!(f, "  408        {:>7}  cut by the progress rule", self.cut)?;
        writeln!(
            f,
            "  413        {:>7}  larger than a session buffer",
            self.too_large
        )?;
        let others = if self.other.is_empty() {
            String::new()
        } else {
            let list: Vec<String> = self
                .other
                .iter()
                .map(|(s, n)| format!("{s}: {n}"))
                .collect();
            format!("  ({})", list.join(", "))
        };
        writeln!(
            f,
            "  other      {:>7}  other statuses{others}",
            self.other_total()
        )?;
        writeln!(
            f,
            "  conn error {:>7}  {} refused, {} broken (reset or closed before a whole answer){}",
            self.connection_errors(),
            self.refused,
            self.broken,
            match self.first_error {
                Some(at) => format!("; the first after {:.1}s", at.as_secs_f64()),
                None => String::new(),
            }
        )?;
        writeln!(
            f,
            "  timed out  {:>7}  no whole answer within {}",
            self.timed_out,
            secs(self.config.timeout)
        )?;
        write!(f, "{}", self.machine_line())
    }
}

/// Runs the load of `config` against `addr` (the target resolved), printing a
/// line when it starts and one every [`PROGRESS_EVERY`] when `progress`. Must be
/// called inside a Tokio runtime with time and I/O enabled.
pub async fn run(config: &LoadConfig, addr: SocketAddr, progress: bool) -> LoadSummary {
    if progress {
        println!(
            "admit-demo load: {} clients against {addr} for {}, each POST {UPLOAD_PATH} of {} B ({}), \
             a fresh connection per try, timeout {}",
            config.clients,
            secs(config.duration),
            config.payload,
            bytes(config.payload as u64),
            secs(config.timeout),
        );
    }
    let body: Arc<[u8]> = vec![b'x'; config.payload].into();
    let tally = Arc::new(Tally::default());
    let start = Instant::now();
    let deadline = start + config.duration;
    let mut loops = JoinSet::new();
    for _ in 0..config.clients {
        loops.spawn(client_loop(
            addr,
            Arc::clone(&body),
            start,
            deadline,
            config.timeout,
            Arc::clone(&tally),
        ));
    }
    let reporter = progress.then(|| tokio::spawn(report_progress(Arc::clone(&tally), start)));
    let mut latencies = Vec::new();
    while let Some(done) = loops.join_next().await {
        if let Ok(mut own) = done {
            latencies.append(&mut own);
        }
    }
    let elapsed = start.elapsed();
    if let Some(reporter) = reporter {
        reporter.abort();
    }
    latencies.sort_unstable();
    let load = |c: &AtomicU64| c.load(Ordering::Relaxed);
    let first_error = load(&tally.first_error)
        .checked_sub(1)
        .map(Duration::from_millis);
    let other = tally
        .other
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone();
    LoadSummary {
        config: config.clone(),
        addr,
        elapsed,
        tries: load(&tally.tries),
        completed: load(&tally.completed),
        shed: load(&tally.shed),
        unavailable: load(&tally.unavailable),
        cut: load(&tally.cut),
        too_large: load(&tally.too_large),
        other,
        refused: load(&tally.refused),
        broken: load(&tally.broken),
        timed_out: load(&tally.timed_out),
        first_error,
        latencies,
    }
}

/// One client: tries until `deadline`; returns how long its completed uploads took.
async fn client_loop(
    addr: SocketAddr,
    body: Arc<[u8]>,
    start: Instant,
    deadline: Instant,
    timeout: Duration,
    tally: Arc<Tally>,
) -> Vec<Duration> {
    let mut latencies = Vec::new();
    while Instant::now() < deadline {
        Tally::add(&tally.tries);
        let sent = Instant::now();
        let tried = tokio::time::timeout(timeout, client::post(addr, UPLOAD_PATH, &body)).await;
        let pause = match tried {
            Ok(Ok(response)) => {
                let counter = match response.status {
                    200 => {
                        latencies.push(sent.elapsed());
                        Tally::add(&tally.completed);
                        continue;
                    }
                    503 if response.header("retry-after").is_some() => Some(&tally.shed),
                    503 => Some(&tally.unavailable),
                    408 => Some(&tally.cut),
                    413 => Some(&tally.too_large),
                    status => {
                        *tally
                            .other
                            .lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .entry(status)
                            .or_default() += 1;
                        None
                    }
                };
                if let Some(counter) = counter {
                    Tally::add(counter);
                }
                REFUSED_PAUSE
            }
            Ok(Err(error)) => {
                tally.connection_error(&error, start.elapsed());
                ERROR_PAUSE
            }
            Err(_elapsed) => {
                Tally::add(&tally.timed_out);
                continue;
            }
        };
        tokio::time::sleep_until((Instant::now() + pause).min(deadline)).await;
    }
    latencies
}

/// Prints a line of the counts so far every [`PROGRESS_EVERY`], until aborted.
async fn report_progress(tally: Arc<Tally>, start: Instant) {
    let mut tick = tokio::time::interval_at(start + PROGRESS_EVERY, PROGRESS_EVERY);
    loop {
        tick.tick().await;
        let load = |c: &AtomicU64| c.load(Ordering::Relaxed);
        println!(
            "  at {:>4.0}s  {} tries: {} completed (200), {} shed (503), {} connection errors, {} timed out",
            start.elapsed().as_secs_f64(),
            load(&tally.tries),
            load(&tally.completed),
            load(&tally.shed) + load(&tally.unavailable),
            tally.errors(),
            load(&tally.timed_out),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Config, OverloadTarget};

    #[test]
    fn targets_split() {
        assert_eq!(split_target("127.0.0.1:8080"), Some(("127.0.0.1", 8080)));
        assert_eq!(split_target("localhost:1"), Some(("localhost", 1)));
        assert_eq!(split_target("[::1]:9000"), Some(("[::1]", 9000)));
        assert_eq!(split_target("127.0.0.1"), None);
        assert_eq!(split_target(":8080"), None);
        assert_eq!(split_target("host:0"), None);
        assert_eq!(split_target("host:65536"), None);
        assert_eq!(split_target("::1:80"), None, "an IPv6 host needs brackets");
    }

    /// Every try ends in exactly one outcome.
    fn outcomes(s: &LoadSummary) -> u64 {
        s.completed
            + s.shed
            + s.unavailable
            + s.cut
            + s.too_large
            + s.other_total()
            + s.connection_errors()
            + s.timed_out
    }

    /// A demo server on a free port, in this runtime; stopped by the sender.
    async fn server(config: Config) -> (SocketAddr, tokio::sync::oneshot::Sender<()>) {
        let (ready, addr) = tokio::sync::oneshot::channel();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let config = Config {
            global_recorder: false,
            verbose: false,
            plot: None,
            port: 0,
            ..config
        };
        let serving = tokio::spawn(crate::serve(config, Some(ready), async {
            let _ = stopped.await;
        }));
        match addr.await {
            Ok(addr) => (addr, stop),
            Err(_) => panic!("the server did not start: {:?}", serving.await),
        }
    }

    fn short(target: SocketAddr, clients: usize, millis: u64, payload: usize) -> LoadConfig {
        LoadConfig {
            clients,
            duration: Duration::from_millis(millis),
            payload,
            timeout: Duration::from_secs(5),
            ..LoadConfig::new(target.to_string())
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn uploads_complete_against_a_served_gate() {
        let (addr, stop) = server(Config {
            hold: Duration::from_millis(20),
            ..Config::default()
        })
        .await;
        let summary = run(&short(addr, 4, 400, 64 << 10), addr, false).await;
        let _ = stop.send(());
        assert!(summary.completed > 0, "{summary}");
        assert_eq!(summary.tries, outcomes(&summary), "{summary}");
        assert_eq!(
            summary.connection_errors() + summary.timed_out,
            0,
            "{summary}"
        );
        assert_eq!(summary.latencies.len() as u64, summary.completed);
        assert!(summary.completed_per_sec() > 0.0);
        let line = summary.machine_line();
        assert!(
            line.starts_with("load: tries=")
                && line.contains(&format!(" completed={} ", summary.completed)),
            "{line}"
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_full_gate_sheds_with_retry_after_and_a_large_body_is_413() {
        let (addr, stop) = server(Config {
            capacity: Some(2),
            hold: Duration::from_millis(300),
            wait_budget: Duration::from_millis(100),
            disconnect_after: Duration::from_millis(50),
            overload_target: OverloadTarget::Off,
            session_buffer: 128 << 10,
            payload: 16 << 10,
            ..Config::default()
        })
        .await;
        let shed = run(&short(addr, 8, 600, 16 << 10), addr, false).await;
        let large = run(&short(addr, 1, 100, 256 << 10), addr, false).await;
        let _ = stop.send(());
        assert!(shed.completed > 0 && shed.shed > 0, "{shed}");
        assert_eq!(shed.tries, outcomes(&shed), "{shed}");
        // The server answers 413 as the body overflows; the client may see the
        // answer or, still writing, a broken connection.
        assert_eq!(large.completed, 0, "{large}");
        assert!(large.too_large + large.broken > 0, "{large}");
        assert_eq!(large.tries, outcomes(&large), "{large}");
    }

    #[tokio::test]
    async fn a_closed_port_is_connection_errors() {
        let addr = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port");
        let summary = run(&short(addr, 2, 250, 1024), addr, false).await;
        assert!(summary.tries > 0, "{summary}");
        assert_eq!(summary.refused, summary.tries, "{summary}");
        assert!(summary.first_error.is_some());
        assert_eq!(summary.completed_per_sec(), 0.0);
    }
}
