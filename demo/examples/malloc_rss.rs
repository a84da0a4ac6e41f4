//! What glibc's malloc keeps after an upload server's load (issue 51): threads that
//! each open one upload session after another, its body buffer a `Vec<u8>` grown by
//! appending chunks up to nearly the session buffer (8 MiB), held briefly, then freed;
//! then every session ends and the threads sit idle, as a server's workers do. It
//! prints the resident set (`VmRSS` of `/proc/self/status`) at the start, its peak
//! (`VmHWM`) and after the load with nothing held. Linux with glibc; std only (glibc's
//! own counters, `mallinfo2`, would need the `libc` crate, which the demo does not
//! use).
//!
//! ```text
//! cargo build --release -p admit-demo --example malloc_rss
//! B=target/release/examples/malloc_rss
//! $B                                                  # glibc's defaults
//! MALLOC_ARENA_MAX=2 $B
//! MALLOC_MMAP_THRESHOLD_=131072 $B
//! MALLOC_MMAP_THRESHOLD_=131072 MALLOC_ARENA_MAX=2 $B
//! MALLOC_TRIM_THRESHOLD_=131072 $B
//! $B --hop                                            # each of the above with --hop too
//! $B --probe                                          # the dynamic mmap threshold, seen
//! MALLOC_MMAP_THRESHOLD_=131072 $B --probe            # ... and with it fixed
//! ```
//!
//! Each setting three times; docs/benchmarks.md ("What glibc's malloc keeps after an
//! upload load") has the loop and the figures, docs/operator-guide.md the advice.
//!
//! The variables must be set before the process starts (glibc reads them at its first
//! allocation); `GLIBC_TUNABLES=glibc.malloc.mmap_threshold=131072` is the same setting
//! by its newer name.
//!
//! Why it matters: glibc serves a request of at least the *mmap threshold* (128 KiB at
//! start) with a mapping of its own, which `free` unmaps, so its memory leaves the
//! process at once. But when such a mapped block of up to 32 MiB is freed, glibc raises
//! the threshold to that block's size and the heap's trim threshold to twice it
//! (`man mallopt`, `M_MMAP_THRESHOLD`): after the first 8 MiB body buffer is freed,
//! every later buffer up to 8 MiB comes from the arenas, whose free memory is given
//! back only when 16 MiB lie free at an arena's top. Setting any of
//! `M_MMAP_THRESHOLD`, `M_TRIM_THRESHOLD`, `M_TOP_PAD` or `M_MMAP_MAX` turns the
//! adjustment off. `--probe` shows the rise on the main thread: where a 1 MiB and a
//! 4 MiB buffer come from (a mapping of their own, or the `[heap]`), before and after
//! one 8 MiB buffer is freed, and what stays resident after each is freed.
//!
//! Each session's final size is drawn uniformly from 1 to `max / chunk - 1` chunks
//! (`--sizes mixed`, the default: a registry's blobs differ), or is always the largest
//! (`--sizes full`); fixed seeds, so runs differ only by scheduling. With `--hop` a
//! session is not tied to a thread: each chunk is appended by whichever thread takes
//! it next, as a task moves between the workers of a work-stealing runtime (Tokio's
//! multi-threaded one), so one thread's arena may serve several sessions at once. The
//! last line gives the load's wall time, the process's CPU time and its minor page
//! faults per session: a buffer mapped for itself is faulted in afresh every time,
//! one from an arena mostly is not.

use std::collections::VecDeque;
use std::process::ExitCode;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Barrier, Condvar, Mutex};
use std::thread;
use std::time::{Duration, Instant};

const USAGE: &str = "\
malloc_rss: what glibc's malloc keeps after an upload server's load

USAGE: malloc_rss [--threads N] [--rounds N] [--max-mib N] [--chunk-kib N]
                  [--hold-ms N] [--sizes mixed|full] [--hop] [--probe]

  --threads N     threads, each opening one session after another  [default: 8]
  --rounds N      sessions per thread                              [default: 100]
  --max-mib N     the session buffer: the most one session holds   [default: 8]
  --chunk-kib N   the size of each append (a body frame)           [default: 64]
  --hold-ms N     how long a full session is held before it ends   [default: 2]
  --sizes S       mixed: each session 1 chunk to nearly the buffer, uniformly;
                  full: each nearly the buffer                     [default: mixed]
  --hop           sessions move between the threads: each body frame is appended by
                  whichever thread takes the session next (a work-stealing runtime);
                  at most one session a thread in flight           [default: pinned]
  --probe         only show the dynamic mmap threshold on one thread: where a
                  1 MiB and a 4 MiB buffer live before and after an 8 MiB one is freed
";

/// The environment variables that change glibc's malloc, echoed with the figures.
const MALLOC_VARS: [&str; 6] = [
    "MALLOC_ARENA_MAX",
    "MALLOC_MMAP_THRESHOLD_",
    "MALLOC_TRIM_THRESHOLD_",
    "MALLOC_TOP_PAD_",
    "MALLOC_MMAP_MAX_",
    "GLIBC_TUNABLES",
];

const MIB: usize = 1 << 20;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Sizes {
    Mixed,
    Full,
}

#[derive(Debug)]
struct Args {
    threads: usize,
    rounds: usize,
    max: usize,
    chunk: usize,
    hold: Duration,
    sizes: Sizes,
    hop: bool,
    probe: bool,
}

fn parse_args() -> Result<Option<Args>, String> {
    let mut parsed = Args {
        threads: 8,
        rounds: 100,
        max: 8 * MIB,
        chunk: 64 << 10,
        hold: Duration::from_millis(2),
        sizes: Sizes::Mixed,
        hop: false,
        probe: false,
    };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let (flag, inline) = match arg.split_once('=') {
            Some((flag, value)) if flag.starts_with("--") => (flag.to_owned(), Some(value.into())),
            _ => (arg, None),
        };
        match flag.as_str() {
            "-h" | "--help" => return Ok(None),
            "--probe" => {
                parsed.probe = true;
                continue;
            }
            "--hop" => {
                parsed.hop = true;
                continue;
            }
            _ => {}
        }
        let value: String = inline
            .or_else(|| args.next())
            .ok_or_else(|| format!("{flag} needs a value"))?;
        let number = |range: std::ops::RangeInclusive<usize>| {
            value
                .parse::<usize>()
                .ok()
                .filter(|n| range.contains(n))
                .ok_or_else(|| format!("{flag} must be {}..={}", range.start(), range.end()))
        };
        match flag.as_str() {
            "--threads" => parsed.threads = number(1..=256)?,
            "--rounds" => parsed.rounds = number(1..=100_000)?,
            "--max-mib" => parsed.max = number(1..=1024)? * MIB,
            "--chunk-kib" => parsed.chunk = number(1..=16 << 10)? << 10,
            "--hold-ms" => parsed.hold = Duration::from_millis(number(0..=10_000)? as u64),
            "--sizes" => {
                parsed.sizes = match value.as_str() {
                    "mixed" => Sizes::Mixed,
                    "full" => Sizes::Full,
                    _ => return Err(format!("--sizes must be mixed or full, not {value}")),
                }
            }
            _ => return Err(format!("unknown argument {flag}")),
        }
    }
    if parsed.chunk * 2 > parsed.max {
        return Err("--chunk-kib must be at most half of --max-mib".into());
    }
    Ok(Some(parsed))
}

/// A field of `/proc/self/status` in bytes (`VmRSS`, `VmHWM`; the file gives kB).
fn status_bytes(field: &str) -> usize {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|line| line.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|rest| {
            rest.trim()
                .trim_end_matches("kB")
                .trim()
                .parse::<usize>()
                .ok()
        })
        .map_or(0, |kib| kib << 10)
}

/// The process's CPU time (user + system, all threads) and its minor page faults, from
/// `/proc/self/stat` (fields 10, 14 and 15; ticks of Linux's `USER_HZ`, 100 a second).
fn cpu_and_faults() -> (Duration, u64) {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // The fields after the command name, which is in parentheses and may hold spaces.
    let fields: Vec<u64> = stat
        .rsplit_once(')')
        .map(|(_, rest)| {
            rest.split_whitespace()
                .skip(1)
                .map(|f| f.parse().unwrap_or(0))
                .collect()
        })
        .unwrap_or_default();
    let field = |n: usize| fields.get(n - 4).copied().unwrap_or(0);
    let ticks = field(14) + field(15);
    (Duration::from_millis(ticks * 10), field(10))
}

fn mib(bytes: usize) -> String {
    format!("{:.1} MiB", bytes as f64 / MIB as f64)
}

/// xorshift64*: the sessions' sizes, the same for every run.
#[derive(Debug)]
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 32) as usize % n
    }
}

/// The bytes all sessions hold now, and the most they held at once: the body bytes
/// written (a `Vec`'s capacity beyond them is reserved, not yet resident). The gate's
/// budget bounds them at threads × the session buffer.
#[derive(Debug, Default)]
struct Held {
    now: AtomicUsize,
    peak: AtomicUsize,
}

impl Held {
    fn add(&self, bytes: usize) {
        let now = self.now.fetch_add(bytes, Ordering::Relaxed) + bytes;
        self.peak.fetch_max(now, Ordering::Relaxed);
    }

    fn sub(&self, bytes: usize) {
        self.now.fetch_sub(bytes, Ordering::Relaxed);
    }
}

/// A session's body buffer as it grows: its target and what it holds so far.
#[derive(Debug)]
struct Session {
    body: Vec<u8>,
    target: usize,
}

impl Session {
    fn open(args: &Args, rng: &mut Rng) -> Self {
        let chunks = args.max / args.chunk - 1; // "nearly" the buffer: Vec's capacity stays at it
        let target = match args.sizes {
            Sizes::Full => chunks,
            Sizes::Mixed => 1 + rng.below(chunks),
        } * args.chunk;
        Self {
            body: Vec::new(),
            target,
        }
    }

    /// One body frame appended; true once the body is complete.
    fn append(&mut self, frame: &[u8], held: &Held) -> bool {
        self.body.extend_from_slice(frame);
        held.add(frame.len());
        self.body.len() >= self.target
    }

    /// Held for a moment (the handler's work), then ended: its buffer freed.
    fn end(self, hold: Duration, held: &Held) {
        std::hint::black_box(&self.body);
        thread::sleep(hold);
        held.sub(self.body.len());
    }
}

/// One thread's sessions, one after another, each on this thread from start to end.
fn pinned(args: &Args, index: usize, held: &Held) {
    let frame = vec![0x5a_u8; args.chunk];
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ (index as u64 + 1));
    for _ in 0..args.rounds {
        let mut session = Session::open(args, &mut rng);
        while !session.append(&frame, held) {}
        session.end(args.hold, held);
    }
}

/// The sessions of `--hop`: at most one per thread in flight, each body frame
/// appended by whichever thread takes the session next, as a task moves between the
/// workers of a work-stealing runtime.
#[derive(Debug)]
struct Hopping {
    queue: Mutex<Queue>,
    ready: Condvar,
}

#[derive(Debug)]
struct Queue {
    waiting: VecDeque<Session>,
    opened: usize,
    ended: usize,
    total: usize,
    rng: Rng,
}

fn hopping(args: &Args, shared: &Hopping, held: &Held) {
    let frame = vec![0x5a_u8; args.chunk];
    let lock = || shared.queue.lock().expect("a session thread panicked");
    loop {
        let mut queue = lock();
        let mut session = loop {
            if let Some(session) = queue.waiting.pop_front() {
                break session;
            }
            let in_flight = queue.opened - queue.ended;
            if queue.opened < queue.total && in_flight < args.threads {
                queue.opened += 1;
                break Session::open(args, &mut queue.rng);
            }
            if queue.ended == queue.total {
                return;
            }
            queue = shared.ready.wait(queue).expect("a session thread panicked");
        };
        drop(queue);
        if session.append(&frame, held) {
            session.end(args.hold, held);
            lock().ended += 1;
            shared.ready.notify_all();
        } else {
            lock().waiting.push_back(session);
            shared.ready.notify_one();
        }
    }
}

fn load(args: Args) {
    let env: Vec<String> = MALLOC_VARS
        .iter()
        .filter_map(|var| Some(format!("{var}={}", std::env::var(var).ok()?)))
        .collect();
    println!(
        "malloc_rss: {} threads x {} sessions{}, {} ({} chunks of {} KiB, {}), held {} ms; env: {}",
        args.threads,
        args.rounds,
        if args.hop { " hopping" } else { "" },
        match args.sizes {
            Sizes::Mixed => "1 chunk to nearly",
            Sizes::Full => "each nearly",
        },
        args.max / args.chunk - 1,
        args.chunk >> 10,
        mib(args.max),
        args.hold.as_millis(),
        if env.is_empty() {
            "glibc's defaults".into()
        } else {
            env.join(" ")
        },
    );
    let args = Arc::new(args);
    let held = Arc::new(Held::default());
    let hop = Arc::new(args.hop.then(|| Hopping {
        queue: Mutex::new(Queue {
            waiting: VecDeque::new(),
            opened: 0,
            ended: 0,
            total: args.threads * args.rounds,
            rng: Rng(0x9e37_79b9_7f4a_7c15),
        }),
        ready: Condvar::new(),
    }));
    // Start together after the baseline; after the load, stay alive (a server's
    // workers do) until the figures are read.
    let start = Arc::new(Barrier::new(args.threads + 1));
    let done = Arc::new(Barrier::new(args.threads + 1));
    let exit = Arc::new(Barrier::new(args.threads + 1));
    let workers: Vec<_> = (0..args.threads)
        .map(|index| {
            let (args, held, hop) = (Arc::clone(&args), Arc::clone(&held), Arc::clone(&hop));
            let (start, done, exit) = (Arc::clone(&start), Arc::clone(&done), Arc::clone(&exit));
            thread::spawn(move || {
                start.wait();
                match &*hop {
                    Some(shared) => hopping(&args, shared, &held),
                    None => pinned(&args, index, &held),
                }
                done.wait();
                exit.wait();
            })
        })
        .collect();
    let baseline = status_bytes("VmRSS");
    let (cpu_before, faults_before) = cpu_and_faults();
    let began = Instant::now();
    start.wait();
    done.wait();
    let took = began.elapsed();
    let (cpu_after, faults_after) = cpu_and_faults();
    let (after, peak) = (status_bytes("VmRSS"), status_bytes("VmHWM"));
    exit.wait();
    for worker in workers {
        worker.join().expect("a session thread panicked");
    }
    let total = args.threads * args.rounds;
    println!("baseline  VmRSS {:>10}", mib(baseline));
    println!(
        "peak      VmHWM {:>10}   (sessions held at most {} written at once; budget {} x {} = {})",
        mib(peak),
        mib(held.peak.load(Ordering::Relaxed)),
        args.threads,
        mib(args.max),
        mib(args.threads * args.max),
    );
    println!(
        "after     VmRSS {:>10}   (nothing held, {} threads idle; {} above the baseline)",
        mib(after),
        args.threads,
        mib(after.saturating_sub(baseline)),
    );
    println!(
        "took      {:.2} s for {total} sessions ({:.0} a second); CPU {:.2} s, {:.0} page faults a session",
        took.as_secs_f64(),
        total as f64 / took.as_secs_f64(),
        (cpu_after - cpu_before).as_secs_f64(),
        (faults_after - faults_before) as f64 / total as f64,
    );
}

/// Where an address lives, by `/proc/self/maps`: `[heap]` (the main arena's `brk`
/// heap) or an anonymous mapping (on the main thread: a block mapped for itself).
fn region(address: usize) -> String {
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap_or_default();
    for line in maps.lines() {
        let mut fields = line.split_whitespace();
        let Some((start, end)) = fields.next().and_then(|range| range.split_once('-')) else {
            continue;
        };
        let (Ok(start), Ok(end)) = (
            usize::from_str_radix(start, 16),
            usize::from_str_radix(end, 16),
        ) else {
            continue;
        };
        if (start..end).contains(&address) {
            return match fields.nth(4) {
                Some("[heap]") => "the [heap] (brk)".into(),
                Some(name) => name.into(),
                None => "a mapping of its own (mmap)".into(),
            };
        }
    }
    "unknown".into()
}

/// A buffer of `bytes`, written, where it lives, and the resident set after it is freed.
fn probe_one(label: &str, bytes: usize, start: usize) {
    let buffer = vec![0xa5_u8; bytes];
    let lives = region(buffer.as_ptr() as usize);
    std::hint::black_box(&buffer);
    drop(buffer);
    println!(
        "{label:<7} {:>5}: {lives:<28} freed, VmRSS {} above the start",
        mib(bytes),
        mib(status_bytes("VmRSS").saturating_sub(start)),
    );
}

fn probe() {
    let env: Vec<String> = MALLOC_VARS
        .iter()
        .filter_map(|var| Some(format!("{var}={}", std::env::var(var).ok()?)))
        .collect();
    println!(
        "malloc_rss --probe (main thread); env: {}",
        if env.is_empty() {
            "glibc's defaults".into()
        } else {
            env.join(" ")
        },
    );
    let start = status_bytes("VmRSS");
    probe_one("before", MIB, start);
    probe_one("before", 4 * MIB, start);
    probe_one("then", 8 * MIB, start);
    probe_one("after", MIB, start);
    probe_one("after", 4 * MIB, start);
}

fn main() -> ExitCode {
    match parse_args() {
        Ok(Some(args)) if args.probe => probe(),
        Ok(Some(args)) => load(args),
        Ok(None) => print!("{USAGE}"),
        Err(message) => {
            eprintln!("malloc_rss: {message}\n\n{USAGE}");
            return ExitCode::from(2);
        }
    }
    ExitCode::SUCCESS
}
