//! The gate under overload, simulated on virtual time: prints the tables of
//! docs/overload.md. `cargo bench -p admit-benches --bench overload [-- --seed N]`.

use std::time::Duration;

use admit::ShedReason;
use admit_benches::overload::{bohde, simulate, spike, uploads, Figures, Policy, Run, Setup};

fn ms(d: Duration) -> String {
    if d >= Duration::from_secs(10) {
        format!("{:.1} s", d.as_secs_f64())
    } else if d >= Duration::from_secs(1) {
        format!("{:.2} s", d.as_secs_f64())
    } else {
        format!("{:.1} ms", d.as_secs_f64() * 1e3)
    }
}

fn pct(x: f64) -> String {
    if x > 0.0 && x < 0.01 {
        format!("{:.2} %", x * 100.0)
    } else {
        format!("{:.1} %", x * 100.0)
    }
}

fn reasons(run: &Run) -> String {
    let mut out = Vec::new();
    for (i, reason) in ShedReason::ALL.iter().enumerate() {
        let n = run.sheds[0][i] + run.sheds[1][i];
        if n > 0 {
            out.push(format!("{} {n}", reason.label()));
        }
    }
    if run.changes > 0 {
        out.push(format!("({} changes of state)", run.changes));
    }
    if out.is_empty() {
        "—".into()
    } else {
        out.join(", ")
    }
}

fn row(name: &str, f: &Figures, run: &Run) -> String {
    format!(
        "| {name} | {:.3} | {:.1} | {} / {} / {} | {} / {} | {} | {} / {} | {} | {} | {} / {} |",
        f.utilisation,
        f.completed_per_s,
        ms(f.wait_p50),
        ms(f.wait_p99),
        ms(f.wait_p999),
        ms(f.shed_p50),
        ms(f.shed_p99),
        pct(f.shed),
        pct(f.shed_small),
        pct(f.shed_large),
        reasons(run),
        pct(f.gave_up),
        ms(f.retry_after_p50),
        ms(f.followed_p50),
    )
}

const HEADER: &str = "| column | utilisation | completed/s | admitted wait p50 / p99 / p99.9 | time to shed p50 / p99 | shed | shed 1 unit / 4 units | sheds by reason | gave up | Retry-After p50 / wait that followed p50 |\n|---|---|---|---|---|---|---|---|---|---|";

fn policies(target: Duration) -> [Policy; 3] {
    [Policy::Budget, Policy::Target(target), Policy::Tower]
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let seed = args
        .iter()
        .position(|a| a == "--seed")
        .and_then(|i| args.get(i + 1))
        .and_then(|s| s.parse().ok())
        .unwrap_or(1);
    let target = Duration::from_millis(500);
    let mut goals = Vec::new();

    println!("# The upload mix (capacity 64; 1 or 4 units; lognormal holds, median 2 s, sigma 1; budget 5 s; clients give up at 20 s; 600 s after a 60 s warm-up; seed {seed})\n");
    for load in [0.5, 0.8, 1.0, 1.5, 2.0, 3.0] {
        let setup = uploads(load, Duration::from_secs(600));
        println!("## {load}×\n\n{HEADER}");
        for policy in policies(target) {
            let run = simulate(&setup, policy, seed);
            let f = run.figures(&setup);
            println!("{}", row(&policy.name(), &f, &run));
            if let Policy::Target(_) = policy {
                if load == 2.0 {
                    goals.push((
                        "2×: utilisation ≥ 0.97",
                        f.utilisation >= 0.97,
                        format!("{:.3}", f.utilisation),
                    ));
                    goals.push((
                        "2×: admitted wait p99 ≤ 1 s",
                        f.wait_p99 <= Duration::from_secs(1),
                        ms(f.wait_p99),
                    ));
                    goals.push((
                        "2×: time to shed p50 ≤ 50 ms",
                        f.shed_p50 <= Duration::from_millis(50),
                        ms(f.shed_p50),
                    ));
                }
                if load <= 0.8 {
                    goals.push((
                        if load == 0.5 {
                            "0.5×: ≤ 0.1 % shed"
                        } else {
                            "0.8×: ≤ 0.1 % shed"
                        },
                        f.shed <= 0.001,
                        pct(f.shed),
                    ));
                }
            }
        }
        println!();
    }

    let setup: Setup = spike();
    println!("## Spike: 0.8× for 120 s, 1.4× for 60 s, 0.8× for 120 s\n\n| column | admitted wait p99 before | during | time to recover after the spike |\n|---|---|---|---|");
    for policy in policies(target) {
        let run = simulate(&setup, policy, seed);
        let p99 = |a: u64, b: u64| {
            let mut w: Vec<Duration> = run
                .records
                .iter()
                .filter(|r| {
                    r.arrival >= Duration::from_secs(a) && r.arrival < Duration::from_secs(b)
                })
                .filter_map(|r| match r.outcome {
                    admit_benches::overload::Outcome::Admitted { wait } => Some(wait),
                    _ => None,
                })
                .collect();
            admit_benches::overload::quantile(&mut w, 0.99)
        };
        let recovery = run.recovery(
            (Duration::from_secs(60), Duration::from_secs(120)),
            Duration::from_secs(180),
            setup.end(),
        );
        let shown = recovery.map_or("not within the run".into(), ms);
        println!(
            "| {} | {} | {} | {shown} |",
            policy.name(),
            ms(p99(60, 120)),
            ms(p99(120, 180))
        );
        if let Policy::Target(_) = policy {
            goals.push((
                "spike: recovery ≤ 2 s",
                recovery.is_some_and(|r| r <= Duration::from_secs(2)),
                shown,
            ));
        }
    }
    println!();

    let setup = bohde();
    let codel_target = Duration::from_millis(5);
    println!("## The `bohde/codel` setup: 1000 requests/s into 10 slots of 20 ms (500/s) for 10 s; budget 1 s, target 5 ms\n\n{HEADER}");
    for policy in [Policy::Budget, Policy::Target(codel_target), Policy::Tower] {
        let run = simulate(&setup, policy, seed);
        let f = run.figures(&setup);
        println!("{}", row(&policy.name(), &f, &run));
        if let Policy::Target(_) = policy {
            let dropped = f.shed + f.gave_up;
            goals.push((
                "bohde/codel: admitted p99 ≤ 34 ms",
                f.wait_p99 <= Duration::from_millis(34),
                ms(f.wait_p99),
            ));
            goals.push((
                "bohde/codel: ≤ 46.4 % dropped",
                dropped <= 0.464,
                pct(dropped),
            ));
        }
    }
    println!("\n## Goals (overload target 500 ms, 5 ms on the bohde/codel setup)\n\n| goal | met | figure |\n|---|---|---|");
    for (goal, met, figure) in goals {
        println!(
            "| {goal} | {} | {figure} |",
            if met { "yes" } else { "**no**" }
        );
    }
}
