//! The demo's knobs, their defaults, and the hand-parsed command line.

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use crate::remote_load::LoadConfig;
use crate::server::MAX_UNITS;

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
    /// Whether the gate watches the process's memory as the kernel counts it
    /// (`admit::MemoryWatch`: on by default for a capacity from a memory budget).
    pub memory_watch: bool,
    /// Of `clients`, how many run an OCI-style upload session (`POST /v2/uploads`,
    /// chunks by `PATCH`, then `PUT`, `DELETE`, or nothing more); `None`: a tenth
    /// of the clients ([`Config::sessions`]).
    pub sessions: Option<usize>,
    /// How long an upload session may stay idle (no request working on it) before
    /// it expires and its unit returns.
    pub idle_limit: Duration,
    /// Clients that stall beside the others, placed before the first wave: half
    /// (the odd one included) trickle a `POST /upload` body at a byte a second,
    /// half open an upload session and send a `PATCH` that stops after a few
    /// bytes. Not counted in `clients`. `None`: as many as fit, up to 4
    /// ([`Config::stallers`]).
    pub stallers: Option<usize>,
    /// Honest slow clients beside the others, placed before the first wave: a
    /// `POST /upload` of [`SLOW_BODY`] bytes sent at [`SLOW_RATE`]. Not counted
    /// in `clients`. `None`: as many as fit, up to 2
    /// ([`Config::slow_clients`]).
    pub slow_clients: Option<usize>,
    /// The progress rule's limits; `None`: the mode's own ([`Config::progress`]).
    pub progress: Option<Progress>,
}

const KIB: u64 = 1 << 10;
const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;

/// Where the SVG picture of the run goes by default (relative to the working
/// directory: the workspace root under `cargo run`).
pub const DEFAULT_PLOT: &str = "target/admit-demo.svg";

/// The most clients a run may start: the demo's traffic stays small and bounded.
pub const MAX_CLIENTS: usize = 2_000;

/// Stallers by default, where the gate has room ([`Config::stallers`]).
pub const DEFAULT_STALLERS: usize = 4;

/// Slow clients by default, where the gate has room
/// ([`Config::slow_clients`]).
pub const DEFAULT_SLOW_CLIENTS: usize = 2;

/// The body a slow client uploads: sent at [`SLOW_RATE`], it takes 2.5 s.
pub const SLOW_BODY: usize = 40 * KIB as usize;

/// The rate a slow client sends at, in bytes a second: a slow but real upload,
/// which the progress rule never cuts.
pub const SLOW_RATE: usize = 16 * KIB as usize;

/// The calm limit of the progress rule in a run, unless `--progress` says
/// otherwise: a run lasts seconds, not minutes.
pub const RUN_PROGRESS: Duration = Duration::from_secs(2);

/// The progress rule's limits ([`admit_tower::ProgressRule`]): how long a watched
/// request's body may idle, how long it may send less than the minimum rate, how
/// long its response may go unread; each generous while the gate is calm and
/// shrinking toward a floor as its pressure rises.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Progress {
    /// admit-tower's defaults ([`ProgressRule::new`]): 30 s calm; under full
    /// pressure a body idle 5 s, a grace of 10 s, a response unread 5 s.
    ///
    /// [`ProgressRule::new`]: admit_tower::ProgressRule::new
    Library,
    /// Every calm limit this long; under full pressure the idle limits a
    /// quarter of it and the grace a half (`--progress 2s`: 500 ms, 1 s).
    Scaled(Duration),
    /// No rule (`--progress off`): a client that stalls keeps its units until
    /// it hangs up.
    Off,
}

/// The limits of a [`Progress`] rule in force: each as (calm, under full
/// pressure), and the minimum rate in bytes a second.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProgressLimits {
    /// A request body that delivers nothing this long is cut.
    pub idle: (Duration, Duration),
    /// Past this, a body must keep up the minimum rate.
    pub grace: (Duration, Duration),
    /// Bytes a second a body must keep up after the grace.
    pub min_rate: u64,
    /// A response left unread this long is cut.
    pub response_idle: (Duration, Duration),
}

impl Progress {
    /// The limits, or `None` when the rule is off.
    #[must_use]
    pub fn limits(self) -> Option<ProgressLimits> {
        let s = Duration::from_secs;
        match self {
            Self::Library => Some(ProgressLimits {
                idle: (s(30), s(5)),
                grace: (s(30), s(10)),
                min_rate: KIB,
                response_idle: (s(30), s(5)),
            }),
            Self::Scaled(calm) => Some(ProgressLimits {
                idle: (calm, calm / 4),
                grace: (calm, calm / 2),
                min_rate: KIB,
                response_idle: (calm, calm / 4),
            }),
            Self::Off => None,
        }
    }

    /// The layer's rule, or `None` when off.
    #[must_use]
    pub fn rule(self) -> Option<admit_tower::ProgressRule> {
        if self == Self::Library {
            return Some(admit_tower::ProgressRule::new());
        }
        self.limits().map(|l| {
            admit_tower::ProgressRule::new()
                .idle(l.idle.0, l.idle.1)
                .grace(l.grace.0, l.grace.1)
                .min_rate(l.min_rate)
                .response_idle(l.response_idle.0, l.response_idle.1)
        })
    }

    /// The longest a stalled body can go uncut: the calm grace (a trickler's
    /// bytes buy it a little more) and one look of the rule (it reads the
    /// limits again every second); `None` when off.
    #[must_use]
    pub fn cut_within(self) -> Option<Duration> {
        self.limits()
            .map(|l| l.grace.0.max(l.idle.0) + admit_tower::progress::RECHECK)
    }
}

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
            memory_watch: true,
            sessions: None,
            idle_limit: Duration::from_secs(1),
            stallers: None,
            slow_clients: None,
            progress: None,
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
       admit-demo serve [FLAGS]    the server alone, until Ctrl-C or SIGTERM; then it drains and exits
       admit-demo load [FLAGS]     uploads against a server already running (serve), for a
                                   while, then a summary; its flags: admit-demo load -h

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
  --stallers N             clients that stall beside the others, placed before the first
                           wave: half trickle a POST /upload at 1 byte a second, half stall
                           a session's PATCH after 10 bytes; each must be cut
                           [default: 4, fewer if the gate has no room beside a mirror]
  --slow-clients N         honest slow clients beside the others, placed before the first
                           wave: a POST /upload of 40 KiB at 16 KiB/s; none may be cut
                           [default: 2, fewer if the gate has no room beside the stallers]
  --progress TIME          the progress rule: a watched request is cut (408) when its body
                           idles TIME, or sends under 1 KiB/s past a grace of TIME, or its
                           response goes unread TIME; under full pressure the idle limits
                           shrink to a quarter of TIME and the grace to a half; 'default':
                           admit-tower's (30s; 5s, 10s, 5s); 'off': no rule
                           [default: 2s for a run, admit-tower's for serve]
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
  --memory-watch on|off    the gate follows the working set of the process's cgroup
                           against its limit (admit's memory watch): it lowers its
                           capacity, and sheds at arrival, as memory nears the limit
                           [default: on; no effect without a cgroup limit]
  -h, --help               this text

serve takes the server's flags (capacity, budget, overload target, hold, port, plot,
max-waiters, grace, idle-limit, progress, follow-memory-limit, memory-watch) and runs one gate, with
the overload target unless it is 'off'; the load flags (--clients, --disconnects,
--disconnect-after, --sessions, --stallers, --slow-clients, --waves, --payload) are
the load generator's and are refused there, and
--follow-memory-limit is serve's alone.

SIZE: bytes, or with a suffix K/KiB, M/MiB, G/GiB (powers of 1024).
TIME: with a suffix ms or s (e.g. 1500ms, 2s, 0.5s).
";

/// The `load -h` text: the flags of `admit-demo load`.
pub const LOAD_USAGE: &str = "\
admit-demo load: a load generator pointed at a server already running (admit-demo serve).
CLIENTS loops run side by side for DURATION, each sending POST /upload with a body of
SIZE bytes (Expect: 100-continue, a fresh connection per try), one try after the other
(after an answer other than 200 a loop pauses 50ms, after a connection error 100ms).
No try starts after DURATION; the tries under way end as they end. Then a summary: the
tries, 200s (completed uploads), 503s with and without Retry-After, 408s, 413s, other
statuses, connection errors, tries timed out, completed uploads a second, and a line
`load: key=value ...` for scripts. Exits 0 whatever the server answered; 2 for bad flags.

USAGE: admit-demo load --target HOST:PORT [FLAGS]

  --target HOST:PORT       the server (e.g. 127.0.0.1:8080)          [required]
  --clients N              client loops side by side                 [default: 40]
  --duration TIME          how long the loops start tries            [default: 40s]
  --payload SIZE           each upload's body: 8MiB less 4KiB, nearly one default session
                           buffer                                    [default: 8188KiB]
  --timeout TIME           a try with no whole answer within TIME counts as timed out
                           [default: 30s]
  -h, --help               this text

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
    /// Run the load generator against a server already running.
    Load(LoadConfig),
    /// Print [`LOAD_USAGE`].
    LoadHelp,
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
        if args.peek().is_some_and(|first| first == "load") {
            args.next();
            return parse_load(args);
        }
        let serve = args.peek().is_some_and(|first| first == "serve");
        if serve {
            args.next();
        }
        while let Some(arg) = args.next() {
            let (flag, inline) = split_flag(arg);
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
                "--stallers" => config.stallers = Some(parse_count(&flag, &value()?)?),
                "--slow-clients" => config.slow_clients = Some(parse_count(&flag, &value()?)?),
                "--progress" => {
                    let v = value()?;
                    config.progress = Some(match v.as_str() {
                        "off" | "none" => Progress::Off,
                        "default" => Progress::Library,
                        _ => Progress::Scaled(parse_time(&flag, &v)?),
                    });
                }
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
                "--memory-watch" => {
                    config.memory_watch = match value()?.as_str() {
                        "on" => true,
                        "off" => false,
                        other => {
                            return Err(ArgError(format!("{flag}: 'on' or 'off', not {other:?}")))
                        }
                    };
                }
                _ => return Err(ArgError(format!("unknown argument {flag:?}; try --help"))),
            }
        }
        if serve {
            config.validate_serve()?;
        } else {
            config.validate()?;
        }
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
        self.check(false)
    }

    /// Checks that `serve` can run this: [`validate`](Self::validate) without the
    /// load generator's constraints (its stallers' room in the gate, its hang-ups
    /// against the progress rule).
    ///
    /// # Errors
    ///
    /// A message saying which value is out of range.
    pub fn validate_serve(&self) -> Result<(), ArgError> {
        self.check(true)
    }

    fn check(&self, serve: bool) -> Result<(), ArgError> {
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
        if let Some(Progress::Scaled(calm)) = self.progress {
            if calm < Duration::from_millis(100) || calm > Duration::from_secs(600) {
                return fail("--progress must be 100ms..=600s, 'default' or 'off'".into());
            }
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
        if !serve {
            self.check_load()?;
        }
        Ok(())
    }

    /// The load generator's own constraints.
    fn check_load(&self) -> Result<(), ArgError> {
        let fail = |m: String| Err(ArgError(m));
        if let Some(limits) = self.progress(false).limits() {
            if self.disconnects > 0 && limits.idle.1 <= self.disconnect_after {
                return fail(format!(
                    "--progress: under pressure its idle limit ({}) must be longer than \
                     --disconnect-after ({}): a client admitted before it hangs up would \
                     be cut first",
                    crate::secs(limits.idle.1),
                    crate::secs(self.disconnect_after)
                ));
            }
        }
        let placed = self.stallers() + self.slow_clients();
        if placed > 0 {
            let capacity = self.capacity_units();
            if placed + MAX_UNITS > capacity {
                return fail(format!(
                    "--stallers and --slow-clients ({placed} units in all) must leave the gate \
                     ({capacity} units) room for a mirror's {MAX_UNITS}: at most {} together",
                    capacity.saturating_sub(MAX_UNITS)
                ));
            }
        }
        if self.slow_clients() > 0 && (SLOW_BODY as u64) > self.session_buffer {
            return fail(format!(
                "--slow-clients upload {}, more than a session buffer ({})",
                bytes(SLOW_BODY as u64),
                bytes(self.session_buffer)
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

    /// The progress rule in force: `--progress`, or for a run (`serve` false)
    /// [`RUN_PROGRESS`] scaled to its seconds, for `serve` admit-tower's defaults.
    #[must_use]
    pub fn progress(&self, serve: bool) -> Progress {
        self.progress.unwrap_or(if serve {
            Progress::Library
        } else {
            Progress::Scaled(RUN_PROGRESS)
        })
    }

    /// The gate's capacity in units: `--capacity`, or the memory budget over the
    /// session buffer floored at [`MAX_UNITS`], as the gate's builder resolves it.
    #[must_use]
    pub fn capacity_units(&self) -> usize {
        match self.capacity {
            Some(units) => units,
            None => admit::Capacity::from_memory_budget(self.memory_budget, self.session_buffer)
                .floored(MAX_UNITS),
        }
    }

    /// The gate's units the stallers and slow clients may hold: all but room for
    /// a mirror's [`MAX_UNITS`], so the others can still be served.
    fn room(&self) -> usize {
        self.capacity_units().saturating_sub(MAX_UNITS)
    }

    /// Stallers: `--stallers`, or [`DEFAULT_STALLERS`] where the gate has room.
    #[must_use]
    pub fn stallers(&self) -> usize {
        self.stallers
            .unwrap_or_else(|| DEFAULT_STALLERS.min(self.room()))
    }

    /// Slow clients: `--slow-clients`, or [`DEFAULT_SLOW_CLIENTS`] where the gate
    /// has room beside the stallers.
    #[must_use]
    pub fn slow_clients(&self) -> usize {
        self.slow_clients.unwrap_or_else(|| {
            DEFAULT_SLOW_CLIENTS.min(self.room().saturating_sub(self.stallers()))
        })
    }

    /// Of the stallers, those that trickle an upload (the odd one included); the
    /// rest stall a session's `PATCH`.
    #[must_use]
    pub fn tricklers(&self) -> usize {
        self.stallers().div_ceil(2)
    }

    /// How long a slow client takes: its body at [`SLOW_RATE`], then the hold.
    #[must_use]
    pub fn slow_upload(&self) -> Duration {
        Duration::from_secs_f64(SLOW_BODY as f64 / SLOW_RATE as f64) + self.hold
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
    /// idle limit before its late request). The stallers and slow clients, placed
    /// before the first wave, end within the progress rule's calm limits (and a
    /// stalled `PATCH`, past the idle limit after its cut, with its late request)
    /// and within their upload; a staller not cut by then gives up.
    #[must_use]
    pub fn planned_duration(&self) -> Duration {
        let waves = u32::try_from(self.waves).unwrap_or(u32::MAX);
        let session = if self.sessions() > 0 {
            self.session_pause() * 2 + self.late_request_after()
        } else {
            Duration::ZERO
        };
        let load = self
            .wave_gap()
            .saturating_mul(waves.saturating_sub(1))
            .saturating_add(self.wait_budget + self.hold.max(session));
        let stalled = if self.stallers() > 0 {
            self.progress(false).cut_within().unwrap_or(Duration::ZERO) + self.late_request_after()
        } else {
            Duration::ZERO
        };
        let slow = if self.slow_clients() > 0 {
            self.slow_upload()
        } else {
            Duration::ZERO
        };
        load.max(stalled).max(slow)
    }
}

/// `--flag=value` as the flag and its value; any other argument as itself.
fn split_flag(arg: String) -> (String, Option<String>) {
    match arg.split_once('=') {
        Some((flag, value)) if flag.starts_with("--") => (flag.to_owned(), Some(value.to_owned())),
        _ => (arg, None),
    }
}

/// `admit-demo load`'s flags (after `load`), over [`LoadConfig::new`]'s defaults.
fn parse_load(args: impl Iterator<Item = String>) -> Result<Command, ArgError> {
    let mut args = args.peekable();
    let mut target = None;
    let mut config = LoadConfig::new(String::new());
    while let Some(arg) = args.next() {
        let (flag, inline) = split_flag(arg);
        if flag == "-h" || flag == "--help" {
            return Ok(Command::LoadHelp);
        }
        let mut value = || {
            inline
                .clone()
                .or_else(|| args.next())
                .ok_or_else(|| ArgError(format!("{flag} needs a value")))
        };
        match flag.as_str() {
            "--target" => target = Some(value()?),
            "--clients" => config.clients = parse_count(&flag, &value()?)?,
            "--duration" => config.duration = parse_time(&flag, &value()?)?,
            "--payload" => {
                let bytes = parse_size(&flag, &value()?)?;
                config.payload = usize::try_from(bytes)
                    .map_err(|_| ArgError(format!("{flag}: {bytes} bytes is too large")))?;
            }
            "--timeout" => config.timeout = parse_time(&flag, &value()?)?,
            _ => {
                return Err(ArgError(format!(
                    "unknown argument {flag:?} for load (--target, --clients, --duration, \
                     --payload, --timeout); try load --help"
                )))
            }
        }
    }
    config.target =
        target.ok_or_else(|| ArgError("load needs --target HOST:PORT; try load --help".into()))?;
    config.validate()?;
    Ok(Command::Load(config))
}

/// The load generator's flags, refused by `serve`.
const LOAD_FLAGS: &[&str] = &[
    "--clients",
    "--disconnects",
    "--disconnect-after",
    "--sessions",
    "--stallers",
    "--slow-clients",
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

    #[test]
    fn load_flags_parse_over_the_defaults() {
        use crate::remote_load::{DEFAULT_CLIENTS, DEFAULT_DURATION, DEFAULT_PAYLOAD};
        let Ok(Command::Load(c)) = Config::from_args(["load", "--target", "127.0.0.1:8080"]) else {
            panic!("load with a target")
        };
        assert_eq!(c, LoadConfig::new("127.0.0.1:8080"));
        assert_eq!(c.clients, DEFAULT_CLIENTS);
        assert_eq!(c.clients, 40);
        assert_eq!(c.duration, DEFAULT_DURATION);
        assert_eq!(c.duration, Duration::from_secs(40));
        assert_eq!(c.payload, DEFAULT_PAYLOAD);
        assert_eq!(c.payload as u64, 8 * MIB - 4 * KIB);
        assert_eq!(c.timeout, Duration::from_secs(30));

        let Ok(Command::Load(c)) = Config::from_args([
            "load",
            "--target=localhost:9000",
            "--clients",
            "7",
            "--duration=1500ms",
            "--payload",
            "256KiB",
            "--timeout",
            "5s",
        ]) else {
            panic!("every load flag")
        };
        assert_eq!(c.target, "localhost:9000");
        assert_eq!(c.clients, 7);
        assert_eq!(c.duration, Duration::from_millis(1500));
        assert_eq!(c.payload, 256 * KIB as usize);
        assert_eq!(c.timeout, Duration::from_secs(5));
        // A payload over a session buffer is the server's to refuse (413), and 0 is
        // an empty upload.
        let Ok(Command::Load(c)) =
            Config::from_args(["load", "--target", "[::1]:80", "--payload", "0"])
        else {
            panic!("an IPv6 target, an empty body")
        };
        assert_eq!(c.payload, 0);

        assert_eq!(Config::from_args(["load", "--help"]), Ok(Command::LoadHelp));
        assert_eq!(
            Config::from_args(["load", "--target", "h:1", "-h"]),
            Ok(Command::LoadHelp)
        );
        assert_eq!(Config::from_args(["--help"]), Ok(Command::Help));
    }

    #[test]
    fn bad_load_flags_are_refused() {
        let refused = |args: &[&str]| {
            let mut all = vec!["load"];
            all.extend_from_slice(args);
            match Config::from_args(all) {
                Err(ArgError(message)) => message,
                Ok(command) => panic!("{args:?} taken: {command:?}"),
            }
        };
        assert!(refused(&[]).contains("--target"), "a target is required");
        assert!(refused(&["--target"]).contains("needs a value"));
        for target in ["127.0.0.1", "127.0.0.1:0", ":80", "host:port", "::1:80"] {
            assert!(
                refused(&["--target", target]).starts_with("--target"),
                "{target}"
            );
        }
        let with = |flag: &'static str, value: &'static str| {
            refused(&["--target", "127.0.0.1:80", flag, value])
        };
        assert!(with("--clients", "0").contains("--clients"));
        assert!(with("--clients", "2001").contains("--clients"));
        assert!(with("--clients", "many").contains("not a whole number"));
        assert!(with("--duration", "0s").contains("--duration"));
        assert!(with("--duration", "40").contains("not a time"));
        assert!(with("--duration", "3601s").contains("--duration"));
        assert!(with("--payload", "2GiB").contains("--payload"));
        assert!(with("--payload", "8 parsecs").contains("not a size"));
        assert!(with("--timeout", "0ms").contains("--timeout"));
        assert!(with("--timeout", "601s").contains("--timeout"));
        // The run's and serve's flags are not load's, nor load's theirs.
        assert!(with("--memory-budget", "64MiB").contains("unknown argument"));
        assert!(with("--waves", "2").contains("unknown argument"));
        assert!(Config::from_args(["--target", "127.0.0.1:80"]).is_err());
        assert!(Config::from_args(["--duration", "10s"]).is_err());
        assert!(Config::from_args(["serve", "--timeout", "10s"]).is_err());
    }

    /// The limits the demo prints for `--progress default` are admit-tower's
    /// defaults, and a scaled rule is what it says.
    #[test]
    fn progress_limits_are_the_rules() {
        use admit_tower::ProgressRule;
        let build = |l: ProgressLimits| {
            ProgressRule::new()
                .idle(l.idle.0, l.idle.1)
                .grace(l.grace.0, l.grace.1)
                .min_rate(l.min_rate)
                .response_idle(l.response_idle.0, l.response_idle.1)
        };
        let library = Progress::Library.limits().unwrap();
        assert_eq!(build(library), ProgressRule::new());
        assert_eq!(Progress::Library.rule(), Some(ProgressRule::new()));
        let scaled = Progress::Scaled(Duration::from_secs(2)).limits().unwrap();
        let ms = Duration::from_millis;
        assert_eq!(scaled.idle, (ms(2000), ms(500)));
        assert_eq!(scaled.grace, (ms(2000), ms(1000)));
        assert_eq!(scaled.response_idle, (ms(2000), ms(500)));
        assert_eq!(Progress::Scaled(ms(2000)).rule(), Some(build(scaled)),);
        assert_eq!(Progress::Off.rule(), None);
        let config = Config::default();
        assert_eq!(config.progress(false), Progress::Scaled(RUN_PROGRESS));
        assert_eq!(config.progress(true), Progress::Library);
    }
}
