//! The demo's knobs, their defaults, and the hand-parsed command line.

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

/// Everything a run needs. [`Config::default`] is what `admit-demo` runs with no
/// arguments; [`Config::from_args`] applies the flags of [`USAGE`] on top of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// Memory the upload sessions may use, in bytes: the numerator of the capacity.
    pub memory_budget: u64,
    /// The staging buffer one upload session holds, in bytes: the cost of one unit.
    pub session_buffer: u64,
    /// Units given outright, instead of deriving them from the memory budget.
    pub capacity: Option<usize>,
    /// The longest a request parks before it is shed.
    pub wait_budget: Duration,
    /// The gate's overload target: for a run, the second gate of the comparison
    /// (the first has the fixed wait budget alone); for `serve`, the gate's.
    pub overload_target: OverloadTarget,
    /// Simulated processing time, with the permit held, after the body is buffered.
    pub hold: Duration,
    /// Requests in the whole burst, including the ones that disconnect.
    pub clients: usize,
    /// Of `clients`, how many drop their connection while parked.
    pub disconnects: usize,
    /// How long a disconnecting client waits (parked) before it drops the connection.
    pub disconnect_after: Duration,
    /// The burst is sent in this many waves, one `hold` apart: each wave arrives
    /// as the admissions of the one before finish, so the queue stands.
    pub waves: usize,
    /// Request body size in bytes. Must fit one session buffer.
    pub payload: usize,
    /// Port to listen on, on 127.0.0.1; 0 picks a free one.
    pub port: u16,
    /// Install the Prometheus recorder as the process-wide `metrics` recorder (the
    /// binary does). When false, the gate is built under a local recorder, so several
    /// runs can share one process (the integration test does).
    pub global_recorder: bool,
    /// Print the header, a progress line and the summary while running.
    pub verbose: bool,
    /// Where to write the SVG picture of the run; `None`: nowhere.
    pub plot: Option<PathBuf>,
    /// At shutdown (the end of a run, or `serve`'s interrupt): how long the drain
    /// waits for the units to come back.
    pub grace: Duration,
    /// The gate's bound on parked requests (`max_waiters`); `None`: no bound.
    pub max_waiters: Option<usize>,
    /// `serve`: re-read the cgroup memory limit at this interval and resize the gate
    /// to half of it over the session buffer; `None`: a fixed capacity.
    pub follow_memory_limit: Option<Duration>,
    /// Of `clients`, how many run an OCI-style upload session (`POST /v2/uploads`,
    /// chunks by `PATCH`, then `PUT`, `DELETE`, or nothing more); `None`: a tenth
    /// of the clients ([`Config::sessions`]).
    pub sessions: Option<usize>,
    /// How long an upload session may stay idle (no request working on it) before
    /// it expires and its unit returns.
    pub idle_limit: Duration,
}

const KIB: u64 = 1 << 10;
const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;

/// Where the SVG picture of the run goes by default (relative to the working
/// directory: the workspace root under `cargo run`).
pub const DEFAULT_PLOT: &str = "target/admit-demo.svg";

/// The most clients a run may start: the demo's traffic stays small and bounded.
pub const MAX_CLIENTS: usize = 2_000;

/// The overload target a gate gets ([`GateBuilder::overload_target`]).
///
/// [`GateBuilder::overload_target`]: admit::GateBuilder::overload_target
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OverloadTarget {
    /// A tenth of the wait budget.
    #[default]
    TenthOfBudget,
    /// This target.
    Given(Duration),
    /// None: the fixed wait budget alone (`--overload-target off`).
    Off,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            memory_budget: 128 * MIB,
            session_buffer: 8 * MIB,
            capacity: None,
            wait_budget: Duration::from_secs(2),
            overload_target: OverloadTarget::TenthOfBudget,
            hold: Duration::from_secs(1),
            clients: 240,
            disconnects: 6,
            disconnect_after: Duration::from_millis(250),
            waves: 6,
            payload: 256 * KIB as usize,
            port: 0,
            global_recorder: true,
            verbose: true,
            plot: Some(PathBuf::from(DEFAULT_PLOT)),
            grace: Duration::from_secs(10),
            max_waiters: None,
            follow_memory_limit: None,
            sessions: None,
            idle_limit: Duration::from_secs(1),
        }
    }
}

/// The `--help` text.
pub const USAGE: &str = "\
admit-demo: an upload server behind an admission gate, a burst of clients against it,
and a check of what the gate did. Runs the same burst twice, against a gate with a
fixed wait budget and against one with an overload target as well, compares them, and
exits 0 when every check held in both. About 20 s in all.

USAGE: admit-demo [FLAGS]          the server and a burst of clients; exits with the verdict
       admit-demo serve [FLAGS]    the server alone, until Ctrl-C; then it drains and exits

  --memory-budget SIZE     memory the upload sessions may use        [default: 128MiB]
  --session-buffer SIZE    staging buffer per session (one unit)     [default: 8MiB]
  --capacity N             units outright, instead of budget/buffer
  --wait-budget TIME       longest a request parks before a 503      [default: 2s]
  --overload-target TIME   the standing wait the second gate tolerates (CoDel's rule: over
                           it for an interval, waits are capped at twice it, and hopeless
                           requests are shed at arrival); 'off': run the fixed budget alone
                           [default: a tenth of the wait budget]
  --hold TIME              processing time with the session held     [default: 1s]
  --clients N              requests in the burst                     [default: 240]
  --disconnects N          of them, clients that hang up while parked [default: 6]
  --disconnect-after TIME  how long those wait before hanging up     [default: 250ms]
  --sessions N             of them, clients that run an upload session: POST /v2/uploads,
                           PATCH chunks, then PUT (most), DELETE or go quiet (1 in 5 each)
                           [default: a tenth of the clients]
  --idle-limit TIME        an upload session idle this long expires, its unit returned
                           [default: 1s]
  --waves N                the burst is sent in N waves, one hold apart, each a steady
                           stream over its hold                      [default: 6]
  --payload SIZE           request body size                         [default: 256KiB]
  --port N                 listen on 127.0.0.1:N (the runs one after the other) [default: 0, any free port]
  --plot PATH              write the runs as an SVG to PATH ('none': don't) [default: target/admit-demo.svg]
  --max-waiters N          shed at once (queue full) when N requests are parked [default: no bound]
  --grace TIME             at shutdown, wait this long for units to come back [default: 10s]
  --follow-memory-limit TIME
                           serve: re-read the cgroup memory limit every TIME and resize
                           the gate to half of it over the session buffer [default: off]
  -h, --help               this text

serve takes the server's flags (capacity, budget, overload target, hold, port, plot,
max-waiters, grace, idle-limit, follow-memory-limit) and runs one gate, with the
overload target unless it is 'off'; the load flags (--clients, --disconnects,
--disconnect-after, --sessions, --waves, --payload) are the load generator's and are
refused there, and
--follow-memory-limit is serve's alone.

SIZE: bytes, or with a suffix K/KiB, M/MiB, G/GiB (powers of 1024).
TIME: with a suffix ms or s (e.g. 1500ms, 2s, 0.5s).
";

/// A flag the demo could not use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArgError(pub String);

impl fmt::Display for ArgError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ArgError {}

/// What the command line asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// Run with this configuration.
    Run(Config),
    /// Serve with this configuration, without the load generator.
    Serve(Config),
    /// Print [`USAGE`].
    Help,
}

impl Config {
    /// Parses flags (without the program name) over the defaults.
    ///
    /// # Errors
    ///
    /// An unknown flag, a missing or malformed value, or a configuration
    /// [`validate`](Self::validate) rejects.
    pub fn from_args<I, A>(args: I) -> Result<Command, ArgError>
    where
        I: IntoIterator<Item = A>,
        A: Into<String>,
    {
        let mut config = Self::default();
        let mut args = args.into_iter().map(Into::into).peekable();
        let serve = args.peek().is_some_and(|first| first == "serve");
        if serve {
            args.next();
        }
        while let Some(arg) = args.next() {
            let (flag, inline) = match arg.split_once('=') {
                Some((flag, value)) if flag.starts_with("--") => {
                    (flag.to_owned(), Some(value.to_owned()))
                }
                _ => (arg, None),
            };
            if flag == "-h" || flag == "--help" {
                return Ok(Command::Help);
            }
            if serve && LOAD_FLAGS.contains(&flag.as_str()) {
                return Err(ArgError(format!(
                    "{flag} is a flag of the load generator; `serve` runs the server alone"
                )));
            }
            if !serve && flag == "--follow-memory-limit" {
                return Err(ArgError(format!(
                    "{flag} is a flag of `serve`: a run checks its capacity against a fixed one"
                )));
            }
            let mut value = || {
                inline
                    .clone()
                    .or_else(|| args.next())
                    .ok_or_else(|| ArgError(format!("{flag} needs a value")))
            };
            match flag.as_str() {
                "--memory-budget" => config.memory_budget = parse_size(&flag, &value()?)?,
                "--session-buffer" => config.session_buffer = parse_size(&flag, &value()?)?,
                "--capacity" => config.capacity = Some(parse_count(&flag, &value()?)?),
                "--wait-budget" => config.wait_budget = parse_time(&flag, &value()?)?,
                "--overload-target" => {
                    let v = value()?;
                    config.overload_target = match v.as_str() {
                        "off" | "none" => OverloadTarget::Off,
                        _ => OverloadTarget::Given(parse_time(&flag, &v)?),
                    };
                }
                "--hold" => config.hold = parse_time(&flag, &value()?)?,
                "--clients" => config.clients = parse_count(&flag, &value()?)?,
                "--disconnects" => config.disconnects = parse_count(&flag, &value()?)?,
                "--disconnect-after" => config.disconnect_after = parse_time(&flag, &value()?)?,
                "--sessions" => config.sessions = Some(parse_count(&flag, &value()?)?),
                "--idle-limit" => config.idle_limit = parse_time(&flag, &value()?)?,
                "--waves" => config.waves = parse_count(&flag, &value()?)?,
                "--payload" => {
                    let bytes = parse_size(&flag, &value()?)?;
                    config.payload = usize::try_from(bytes)
                        .map_err(|_| ArgError(format!("{flag}: {bytes} bytes is too large")))?;
                }
                "--port" => {
                    let v = value()?;
                    config.port = v
                        .parse()
                        .map_err(|_| ArgError(format!("{flag}: not a port number: {v}")))?;
                }
                "--plot" => {
                    let v = value()?;
                    config.plot = (v != "none").then(|| PathBuf::from(v));
                }
                "--grace" => config.grace = parse_time(&flag, &value()?)?,
                "--max-waiters" => config.max_waiters = Some(parse_count(&flag, &value()?)?),
                "--follow-memory-limit" => {
                    config.follow_memory_limit = Some(parse_time(&flag, &value()?)?);
                }
                _ => return Err(ArgError(format!("unknown argument {flag:?}; try --help"))),
            }
        }
        config.validate()?;
        Ok(if serve {
            Command::Serve(config)
        } else {
            Command::Run(config)
        })
    }

    /// Checks that the run is one the demo can do and finish on time.
    ///
    /// # Errors
    ///
    /// A message saying which value is out of range.
    pub fn validate(&self) -> Result<(), ArgError> {
        let fail = |m: String| Err(ArgError(m));
        if self.session_buffer == 0 {
            return fail("--session-buffer must be more than 0 bytes".into());
        }
        if self.capacity == Some(0) {
            return fail("--capacity must be at least 1".into());
        }
        if self.clients == 0 || self.clients > MAX_CLIENTS {
            return fail(format!("--clients must be 1..={MAX_CLIENTS}"));
        }
        if self.disconnects > self.clients {
            return fail("--disconnects cannot be more than --clients".into());
        }
        if self.disconnects + self.sessions() > self.clients {
            return fail(
                "--disconnects and --sessions together cannot be more than --clients".into(),
            );
        }
        if self.idle_limit < Duration::from_millis(10) || self.idle_limit > Duration::from_secs(60)
        {
            return fail("--idle-limit must be 10ms..=60s".into());
        }
        if self.waves == 0 || self.waves > self.clients {
            return fail("--waves must be 1..=clients".into());
        }
        if self.payload as u64 > self.session_buffer {
            return fail(format!(
                "--payload ({}) must fit one session buffer ({})",
                bytes(self.payload as u64),
                bytes(self.session_buffer)
            ));
        }
        if self.wait_budget.is_zero() || self.wait_budget > Duration::from_secs(10) {
            return fail("--wait-budget must be more than 0 and at most 10s".into());
        }
        if let Some(target) = self.overload_target() {
            if target.is_zero() || target >= self.wait_budget {
                return fail(format!(
                    "--overload-target must be more than 0 and shorter than --wait-budget ({})",
                    crate::secs(self.wait_budget)
                ));
            }
        }
        if self.hold > Duration::from_secs(10) {
            return fail("--hold must be at most 10s".into());
        }
        if self.disconnect_after >= self.wait_budget {
            return fail(
                "--disconnect-after must be shorter than --wait-budget: a client must hang \
                 up while it is still parked"
                    .into(),
            );
        }
        if self.grace > Duration::from_secs(600) {
            return fail("--grace must be at most 600s".into());
        }
        if self
            .follow_memory_limit
            .is_some_and(|every| every < Duration::from_millis(100))
        {
            return fail("--follow-memory-limit must be at least 100ms".into());
        }
        if self.planned_duration() > Duration::from_secs(60) {
            return fail(format!(
                "this run would take about {:.0}s; keep (waves - 1) x hold + wait budget + hold \
                 under a minute",
                self.planned_duration().as_secs_f64()
            ));
        }
        Ok(())
    }

    /// The overload target in force, if any: [`OverloadTarget`] resolved against
    /// the wait budget.
    #[must_use]
    pub fn overload_target(&self) -> Option<Duration> {
        match self.overload_target {
            OverloadTarget::TenthOfBudget => Some(self.wait_budget / 10),
            OverloadTarget::Given(target) => Some(target),
            OverloadTarget::Off => None,
        }
    }

    /// Clients that run an upload session: `--sessions`, or a tenth of the clients.
    #[must_use]
    pub fn sessions(&self) -> usize {
        self.sessions.unwrap_or(self.clients / 10)
    }

    /// The pause a session client takes before each of its requests after the
    /// `POST` (the time it takes to read the next chunk): a quarter hold.
    #[must_use]
    pub fn session_pause(&self) -> Duration {
        self.hold / 4
    }

    /// How long a session client that went quiet waits before its late request:
    /// past the idle limit, with a margin for the expiry to run.
    #[must_use]
    pub fn late_request_after(&self) -> Duration {
        self.idle_limit + Duration::from_millis(250)
    }

    /// Time between the starts of two waves: one hold, the time the gate takes to
    /// turn its capacity over once, so each wave lands on the queue the last one
    /// left (a floor of 100 ms keeps a zero hold from sending them all at once).
    #[must_use]
    pub fn wave_gap(&self) -> Duration {
        self.hold.max(Duration::from_millis(100))
    }

    /// About how long the load lasts: the last wave starts at `(waves − 1) × gap`,
    /// and its requests end within a wait budget and a hold after that (an upload
    /// session's, within a wait budget, its pauses and, if it went quiet, the
    /// idle limit before its late request).
    #[must_use]
    pub fn planned_duration(&self) -> Duration {
        let waves = u32::try_from(self.waves).unwrap_or(u32::MAX);
        let session = if self.sessions() > 0 {
            self.session_pause() * 2 + self.late_request_after()
        } else {
            Duration::ZERO
        };
        self.wave_gap()
            .saturating_mul(waves.saturating_sub(1))
            .saturating_add(self.wait_budget + self.hold.max(session))
    }
}

/// The load generator's flags, refused by `serve`.
const LOAD_FLAGS: &[&str] = &[
    "--clients",
    "--disconnects",
    "--disconnect-after",
    "--sessions",
    "--waves",
    "--payload",
];

fn parse_count(flag: &str, v: &str) -> Result<usize, ArgError> {
    v.parse()
        .map_err(|_| ArgError(format!("{flag}: not a whole number: {v}")))
}

/// `4096`, `256K`, `256KiB`, `8M`, `8MiB`, `1G`, `1GiB` (powers of 1024).
fn parse_size(flag: &str, v: &str) -> Result<u64, ArgError> {
    let err = || ArgError(format!("{flag}: not a size: {v} (e.g. 4096, 256KiB, 8MiB)"));
    let split = v.find(|c: char| !c.is_ascii_digit()).unwrap_or(v.len());
    let (digits, suffix) = v.split_at(split);
    let n: u64 = digits.parse().map_err(|_| err())?;
    let unit = match suffix.to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kib" | "kb" => KIB,
        "m" | "mib" | "mb" => MIB,
        "g" | "gib" | "gb" => GIB,
        _ => return Err(err()),
    };
    n.checked_mul(unit).ok_or_else(err)
}

/// `1500ms`, `2s`, `0.5s`.
fn parse_time(flag: &str, v: &str) -> Result<Duration, ArgError> {
    let err = || ArgError(format!("{flag}: not a time: {v} (e.g. 1500ms, 2s)"));
    let (number, scale) = if let Some(ms) = v.strip_suffix("ms") {
        (ms, 1e-3)
    } else if let Some(s) = v.strip_suffix('s') {
        (s, 1.0)
    } else {
        return Err(err());
    };
    let n: f64 = number.parse().map_err(|_| err())?;
    Duration::try_from_secs_f64(n * scale).map_err(|_| err())
}

/// A byte count for people: `8 MiB`, `256 KiB`, `1.5 GiB`, `100 B`.
#[must_use]
pub fn bytes(n: u64) -> String {
    let (unit, name) = if n >= GIB {
        (GIB, "GiB")
    } else if n >= MIB {
        (MIB, "MiB")
    } else if n >= KIB {
        (KIB, "KiB")
    } else {
        return format!("{n} B");
    };
    if n.is_multiple_of(unit) {
        format!("{} {name}", n / unit)
    } else {
        format!("{:.1} {name}", n as f64 / unit as f64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_times_parse() {
        assert_eq!(parse_size("f", "4096"), Ok(4096));
        assert_eq!(parse_size("f", "8MiB"), Ok(8 * MIB));
        assert_eq!(parse_size("f", "256k"), Ok(256 * KIB));
        assert!(parse_size("f", "8 parsecs").is_err());
        assert_eq!(parse_time("f", "1500ms"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_time("f", "0.5s"), Ok(Duration::from_millis(500)));
        assert!(parse_time("f", "2").is_err());
        assert_eq!(bytes(8 * MIB), "8 MiB");
        assert_eq!(bytes(1536 * KIB), "1.5 MiB");
    }
}
