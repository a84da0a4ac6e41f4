//! The benchmark harness: every scenario, every peer, repetitions interleaved
//! round-robin (repetition `r` starts at column `r mod n`), so machine noise lands
//! on every column alike. Prints Markdown tables: the summary with each peer's
//! ratio to admit, then median/min/max per peer.
//!
//! ```text
//! cargo bench -p admit-benches                          # the recorded run
//! cargo bench -p admit-benches -- --scenario S4 --peer admit --peer tokio --reps 5
//! ```
//!
//! Run without `--bench` (as `cargo test --benches` does) it makes one quick pass
//! over every scenario instead, as a check that they run.

use std::time::Instant;

use admit_benches::gate::{Gates, ARMS};
use admit_benches::peer::{
    Admit, AdmitCompat, AdmitOwned, AsyncLock, AsyncWeighted, Floor, FuturesIntrusive, Maitake,
    Tokio, TokioOwned,
};
use admit_benches::report::{detail, summary, Row, Stats};
use admit_benches::scenario::{work, Cell, Column, Config, Env, Of, Scenario};

struct Args {
    full: bool,
    scenarios: Vec<String>,
    peers: Vec<String>,
    reps: Option<usize>,
}

fn parse_args() -> Args {
    let mut args = Args {
        full: false,
        scenarios: Vec::new(),
        peers: Vec::new(),
        reps: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--bench" => args.full = true,
            "--smoke" => args.full = false,
            "--scenario" => args.scenarios.push(it.next().expect("--scenario S1..S13")),
            "--peer" => args.peers.push(it.next().expect("--peer NAME")),
            "--reps" => {
                args.reps = Some(it.next().and_then(|n| n.parse().ok()).expect("--reps N"));
            }
            // libtest-style flags cargo may pass; a bare word filters scenarios.
            other if other.starts_with('-') => {}
            other => args.scenarios.push(other.to_owned()),
        }
    }
    args
}

fn machine_line() -> String {
    let cpus = std::thread::available_parallelism().map_or(0, usize::from);
    let model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|m| m.trim().to_owned())
        })
        .unwrap_or_else(|| "unknown CPU".to_owned());
    let load = std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default();
    format!("{cpus} CPUs, {model}, load average {load}")
}

fn main() {
    let args = parse_args();
    let mut config = if args.full {
        Config::full()
    } else {
        Config::smoke()
    };
    if let Some(reps) = args.reps {
        config.reps = reps;
        config.micro_reps = reps;
    }
    let columns: Vec<Box<dyn Column>> = vec![
        Box::new(Of::<Admit>::new()),
        Box::new(Of::<AdmitOwned>::new()),
        Box::new(Of::<AdmitCompat>::new()),
        Box::new(Of::<Tokio>::new()),
        Box::new(Of::<TokioOwned>::new()),
        Box::new(Of::<AsyncLock>::new()),
        Box::new(Of::<FuturesIntrusive>::new()),
        Box::new(Of::<Maitake>::new()),
        Box::new(Of::<AsyncWeighted>::new()),
        Box::new(Of::<Floor>::new()),
    ];
    let columns: Vec<_> = columns
        .into_iter()
        .filter(|c| args.peers.is_empty() || args.peers.iter().any(|p| p == c.name()))
        .collect();
    let scenarios: Vec<_> = Scenario::ALL
        .into_iter()
        .filter(|s| {
            args.scenarios.is_empty()
                || args
                    .scenarios
                    .iter()
                    .any(|a| a.eq_ignore_ascii_case(s.id()))
        })
        .collect();

    let env = Env::new(config);
    let started = Instant::now();
    println!("machine: {}", machine_line());
    // The least of 50 short timings: what the spin costs on an idle core.
    let spin_ns = (0..50)
        .map(|_| {
            let t = Instant::now();
            for _ in 0..2_000 {
                work(env.config.spin_iters);
            }
            t.elapsed().as_nanos() as f64 / 2_000.0
        })
        .fold(f64::INFINITY, f64::min);
    println!(
        "mode: {}; repetitions (+1 warm-up) per scenario and peer, interleaved: {} for S1-S3, S7, S13 and the gate, {} for S4-S6; \
         work in S4-S6 = {} spin iterations = {spin_ns:.0} ns (least of 50 timings)",
        if args.full { "full" } else { "smoke" },
        env.config.micro_reps,
        env.config.reps,
        env.config.spin_iters,
    );

    let mut rows = Vec::new();
    for scenario in scenarios {
        let t = Instant::now();
        let n = columns.len();
        // samples[column][metric] = cells
        let mut samples = vec![vec![Vec::new(); scenario.metrics().len()]; n];
        let reps = scenario.reps(&env.config);
        let warmup = usize::from(scenario.is_time());
        for rep in 0..reps + warmup {
            for k in 0..n {
                let col = (k + rep) % n;
                let cells = columns[col].sample(scenario, &env);
                if rep >= warmup {
                    for (metric, cell) in cells.into_iter().enumerate() {
                        samples[col][metric].push(cell);
                    }
                }
            }
        }
        for (metric, (label, unit)) in scenario.metrics().iter().enumerate() {
            rows.push(Row {
                label,
                unit,
                columns: columns
                    .iter()
                    .zip(&samples)
                    .map(|(c, s)| (c.name(), c.baseline(), s[metric].clone()))
                    .collect::<Vec<(_, _, Vec<Cell>)>>(),
            });
        }
        eprintln!(
            "{} done in {:.1} s",
            scenario.id(),
            t.elapsed().as_secs_f64()
        );
    }

    if !rows.is_empty() {
        print_peer_tables(&rows);
    }

    let run_gate = args.scenarios.is_empty()
        || args
            .scenarios
            .iter()
            .any(|a| a.eq_ignore_ascii_case("gate"));
    if run_gate {
        let t = Instant::now();
        let gates = Gates::new();
        let mut samples = vec![Vec::new(); ARMS.len()];
        for rep in 0..=env.config.micro_reps {
            for k in 0..ARMS.len() {
                let arm = (k + rep) % ARMS.len();
                // `--peer` filters gate arms too (for profiling one of them).
                if !args.peers.is_empty() && !args.peers.iter().any(|p| p == ARMS[arm]) {
                    samples[arm].push(Cell::NotApplicable);
                    continue;
                }
                let ns = gates.sample(arm, env.config.acquire_iters);
                if rep > 0 {
                    samples[arm].push(Cell::Value(ns));
                }
            }
        }
        eprintln!("gate done in {:.1} s", t.elapsed().as_secs_f64());
        let row = Row {
            label: "G acquire(1)+release, ready, uncontended",
            unit: "ns/op",
            columns: ARMS
                .iter()
                .zip(samples)
                .map(|(arm, cells)| (*arm, ARMS[0], cells))
                .collect(),
        };
        let median = |i: usize| Stats::of(&row.columns[i].2).median().unwrap_or(f64::NAN);
        println!("Gate: ratios are to the bare semaphore (`Arc<Semaphore>::acquire_owned`, what the gate calls inside).");
        println!();
        print!("{}", summary(std::slice::from_ref(&row)));
        println!();
        print!("{}", detail(std::slice::from_ref(&row)));
        println!();
        println!(
            "gate + metrics (prometheus recorder) adds {:.1} ns to an uncontended acquire+release ({:.1} ns without a recorder, {:.1} ns with no observer)",
            median(3) - median(0),
            median(2) - median(0),
            median(1) - median(0),
        );
        println!();
    }

    println!(
        "total {:.1} s; load average at the end {}",
        started.elapsed().as_secs_f64(),
        machine_line().rsplit("load average ").next().unwrap_or("")
    );
}

fn print_peer_tables(rows: &[Row]) {
    println!();
    println!("Median per peer; in parentheses the peer's median divided by admit's (tokio-owned: by admit-owned's), so above 1.00× admit is faster or smaller.");
    println!();
    print!("{}", summary(rows));
    println!();
    print!("{}", detail(rows));
    println!();
}
