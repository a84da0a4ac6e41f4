//! S1–S3 of admit without `alloc` against the floor, repetitions interleaved
//! round-robin as in `admit-benches` (repetition `r` starts at column `r mod 2`;
//! the first is discarded as warm-up). Prints a Markdown table: median, min and
//! max per column, the ratio of the medians, and the spread of the ratio over the
//! repetitions (each repetition's admit sample over its floor sample).
//!
//! ```text
//! CARGO_TARGET_DIR=target-bench cargo bench -p admit-benches-no-alloc -- --bench
//! CARGO_TARGET_DIR=target-bench cargo bench -p admit-benches-no-alloc -- --bench S2 --reps 11
//! ```
//!
//! Run it alone (`-p`): built together with another member, admit gets `alloc`
//! (the crate doc), and a `--bench` run then stops with an error. Without
//! `--bench` (as `cargo test --benches` runs it) it makes one quick pass.

use std::time::Instant;

use admit_benches_no_alloc::{
    admit_has_alloc, median_min_max, quantile, AdmitNoAlloc, Config, Floor, Scenario,
};

/// The issue's target for the build without `alloc`: admit/floor at most this.
const TARGET: f64 = 1.3;

fn main() {
    let mut full = false;
    let mut reps = None;
    let mut only = Vec::new();
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--bench" => full = true,
            "--reps" => reps = args.next().and_then(|n| n.parse().ok()),
            other if other.starts_with('-') => {} // libtest-style flags cargo may pass
            other => only.push(other.to_owned()),
        }
    }
    if admit_has_alloc() {
        let why = "admit was built with `alloc`: cargo unified its features with another \
                   package's. Run this crate alone: `cargo bench -p admit-benches-no-alloc -- --bench`";
        if full {
            eprintln!("error: {why}");
            std::process::exit(2);
        }
        eprintln!("note (smoke pass, timings not meaningful): {why}");
    }
    let mut config = if full {
        Config::full()
    } else {
        Config::smoke()
    };
    if let Some(r) = reps {
        config.reps = r;
    }

    let started = Instant::now();
    println!("machine: {}", machine_line());
    println!(
        "mode: {}; admit built {}; \
         {} repetitions (+1 warm-up) per scenario and column, interleaved",
        if full { "full" } else { "smoke" },
        if admit_has_alloc() {
            "WITH alloc (its cell queue: not this crate's subject)"
        } else {
            "without alloc (the critical-section list; std's section)"
        },
        config.reps
    );
    println!();
    println!("| scenario | admit-no-alloc ns/op: median (min–max) | floor ns/op: median (min–max) | admit / floor, medians | per repetition: median [p25–p75] (min–max) | within {TARGET}× |");
    println!("|---|---:|---:|---:|---:|---|");
    let sample = [Scenario::sample::<AdmitNoAlloc>, Scenario::sample::<Floor>];
    for scenario in Scenario::ALL {
        if !only.is_empty() && !only.iter().any(|a| a.eq_ignore_ascii_case(scenario.id())) {
            continue;
        }
        let mut samples = [Vec::new(), Vec::new()];
        for rep in 0..=config.reps {
            for k in 0..2 {
                let col = (k + rep) % 2;
                let ns = sample[col](scenario, &config);
                if rep > 0 {
                    samples[col].push(ns);
                }
            }
        }
        let mut ratios: Vec<f64> = samples[0]
            .iter()
            .zip(&samples[1])
            .map(|(a, f)| a / f)
            .collect();
        let (Some(admit), Some(floor), Some(r)) = (
            median_min_max(&mut samples[0]),
            median_min_max(&mut samples[1]),
            median_min_max(&mut ratios),
        ) else {
            continue; // --reps 0
        };
        let ratio = admit.0 / floor.0;
        println!(
            "| {} | {:.2} ({:.2}–{:.2}) | {:.2} ({:.2}–{:.2}) | **{ratio:.2}×** | {:.2}× [{:.2}–{:.2}] ({:.2}–{:.2}) | {} |",
            scenario.label(),
            admit.0,
            admit.1,
            admit.2,
            floor.0,
            floor.1,
            floor.2,
            r.0,
            quantile(&ratios, 0.25),
            quantile(&ratios, 0.75),
            r.1,
            r.2,
            match (full, ratio <= TARGET) {
                (false, _) => "(smoke pass)",
                (true, true) => "yes",
                (true, false) => "no",
            },
        );
    }
    println!();
    println!(
        "total {:.1} s; load average at the end {}",
        started.elapsed().as_secs_f64(),
        machine_line().rsplit("load average ").next().unwrap_or("")
    );
}

/// As `admit-benches` prints it.
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
