//! How long another session's `touch` waits while a lease table's driver ends
//! a mass of abandoned sessions at once (docs/benchmarks.md, "Leases").
//!
//!     cargo run --release -p admit --example mass_expiry [LEASES] [ROUNDS]
//!
//! Each round: a table of LEASES (100 000) abandoned sessions and one kept
//! one, idle limit 200 ms on a ThreadTimer gate (its driver on the timer's
//! thread). A thread touches the kept session every 50 µs or so (asleep in
//! between), timing each touch; once the abandoned ones are due, the driver
//! ends them all. Prints, per round, how long the units took to come back
//! (from the first to the last, as the main thread saw them) and the touches
//! that overlapped that: count, p50, p99, max, and how many waited over 1 ms;
//! then the same over every round's touches (`all`).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use admit::{Gate, Leases, ThreadTimer};

admit::sources! { enum Route { Upload => "upload" } }

const IDLE: Duration = Duration::from_millis(200);

fn main() {
    let mut args = std::env::args().skip(1);
    let n: u32 = args.next().map_or(100_000, |a| a.parse().expect("LEASES"));
    let rounds: u32 = args.next().map_or(5, |a| a.parse().expect("ROUNDS"));
    let mut all = Vec::new();
    println!("leases\tending_ms\ttouches\tp50_us\tp99_us\tmax_us\tover_1ms");
    for _ in 0..rounds {
        all.extend(round(n));
    }
    println!("{}", summary("all", 0.0, all));
}

/// A line of the table: the touches' count, p50, p99, max and how many took
/// over 1 ms.
fn summary(what: &str, pass_ms: f64, mut touches: Vec<Duration>) -> String {
    touches.sort();
    let at = |q: f64| {
        touches
            .get(((touches.len() as f64 * q) as usize).min(touches.len().saturating_sub(1)))
            .map_or(0, Duration::as_micros)
    };
    format!(
        "{what}\t{pass_ms:.1}\t{}\t{}\t{}\t{}\t{}",
        touches.len(),
        at(0.5),
        at(0.99),
        touches.last().map_or(0, Duration::as_micros),
        touches
            .iter()
            .filter(|took| **took > Duration::from_millis(1))
            .count()
    )
}

/// One round; returns the touches that overlapped the pass.
fn round(n: u32) -> Vec<Duration> {
    let gate = Gate::builder(n as usize + 1)
        .timer(ThreadTimer::new())
        .build()
        .unwrap();
    let leases = Leases::new(&gate, IDLE);
    for id in 0..=n {
        leases
            .insert(id, gate.try_acquire(1, Route::Upload).unwrap(), ())
            .unwrap();
    }
    let stop = Arc::new(AtomicBool::new(false));
    let toucher = {
        let (leases, stop) = (leases.clone(), Arc::clone(&stop));
        thread::spawn(move || {
            let mut touches = Vec::with_capacity(1 << 20);
            while !stop.load(Ordering::Relaxed) {
                // A touch every 50 µs or so, as requests spaced apart would
                // come: asleep in between, not spinning on a core.
                thread::sleep(Duration::from_micros(50));
                let start = Instant::now();
                leases.touch(&n).unwrap();
                touches.push((start, start.elapsed()));
            }
            touches
        })
    };
    // The abandoned sessions fall due 200 ms after their insert; the kept
    // one is touched all along.
    let total = n as usize + 1;
    while gate.in_use() == total {
        thread::sleep(Duration::from_micros(100));
    }
    let pass_start = Instant::now();
    while gate.in_use() != 1 {
        thread::sleep(Duration::from_micros(100));
    }
    let pass_end = Instant::now();
    stop.store(true, Ordering::Relaxed);
    let touches = toucher.join().unwrap();
    let during: Vec<Duration> = touches
        .iter()
        .filter(|(start, took)| *start + *took >= pass_start && *start <= pass_end)
        .map(|&(_, took)| took)
        .collect();
    let pass_ms = (pass_end - pass_start).as_secs_f64() * 1e3;
    println!("{}", summary(&n.to_string(), pass_ms, during.clone()));
    during
}
