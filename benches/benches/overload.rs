//! The gate under overload, simulated on virtual time: prints the tables of
//! docs/overload.md.
//!
//! ```text
//! cargo bench -p admit-benches --bench overload                # the recorded run
//! cargo bench -p admit-benches --bench overload -- --seed 2    # the tables on other arrivals
//! cargo bench -p admit-benches --bench overload -- --seeds 20  # the goals over seeds 1..=20
//! ```
//!
//! Run without `--bench` (as `cargo test --benches` does) it makes a short pass
//! (60 s per load instead of 600 s, one seed) as a check that it runs.

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use admit::Priority;
use admit::ShedReason;
use admit_benches::overload::{
    bohde, class_spike, classes, registry, retry_figures, simulate, simulate_retrying, spike,
    uploads, ClassFigures, Figures, Policy, RetryFigures, Run, Setup, CLASS_SPIKE, RECOVERY_FLOOR,
    RECOVERY_HOLD, SPIKE,
};

/// The overload target of the upload mix.
const TARGET: Duration = Duration::from_millis(500);
const LOADS: [f64; 6] = [0.5, 0.8, 1.0, 1.5, 2.0, 3.0];
/// The overload target of the registry mix.
const REGISTRY_TARGET: Duration = Duration::from_millis(200);
/// The registry's clients that retry after `Retry-After`.
const REGISTRY_CLIENTS: usize = 160;
/// `bohde/codel`'s `TargetLatency` in its simulation, and in its README's example.
const CODEL_TARGETS: [Duration; 2] = [Duration::from_millis(1), Duration::from_millis(5)];

fn time(d: Option<Duration>) -> String {
    let Some(d) = d else { return "—".into() };
    let s = d.as_secs_f64();
    if s >= 9.95 {
        format!("{s:.1} s")
    } else if s >= 0.9995 {
        format!("{s:.2} s")
    } else if s >= 0.00995 {
        format!("{:.0} ms", s * 1e3)
    } else {
        format!("{:.2} ms", s * 1e3)
    }
}

fn pct(x: f64) -> String {
    if x == 0.0 {
        "0".into()
    } else if x < 0.01 {
        format!("{:.2} %", x * 100.0)
    } else {
        format!("{:.1} %", x * 100.0)
    }
}

/// A Markdown table: one row per metric, one column per policy.
struct Table {
    columns: Vec<String>,
    rows: Vec<(String, Vec<String>)>,
}

impl Table {
    fn new(runs: &[Run]) -> Self {
        Self {
            columns: runs.iter().map(|r| r.policy.name()).collect(),
            rows: Vec::new(),
        }
    }

    fn row(&mut self, label: &str, cells: impl IntoIterator<Item = String>) {
        self.rows.push((label.into(), cells.into_iter().collect()));
    }

    /// A row of one figure per column.
    fn each(&mut self, label: &str, figures: &[Figures], cell: impl Fn(&Figures) -> String) {
        self.row(label, figures.iter().map(cell));
    }

    fn write(&self, out: &mut String) {
        writeln!(out, "| | {} |", self.columns.join(" | ")).unwrap();
        writeln!(out, "|---|{}", "---|".repeat(self.columns.len())).unwrap();
        for (label, cells) in &self.rows {
            writeln!(out, "| {label} | {} |", cells.join(" | ")).unwrap();
        }
        out.push('\n');
    }
}

/// The rows every scenario shares.
fn common_rows(table: &mut Table, runs: &[Run], figures: &[Figures], utilisation: &str) {
    table.each(utilisation, figures, |x| format!("{:.3}", x.utilisation));
    table.each("requests completed per second", figures, |x| {
        format!("{:.1}", x.completed_per_s)
    });
    table.each("admitted wait p50 / p99 / p99.9", figures, |x| {
        let [a, b, c] = x.wait.map(time);
        format!("{a} / {b} / {c}")
    });
    table.each("time to shed p50 / p99", figures, |x| {
        let [a, b] = x.time_to_shed.map(time);
        format!("{a} / {b}")
    });
    table.each("shed: all (1 unit / 4 units)", figures, |x| {
        let [all, small, large] = x.shed.map(pct);
        format!("{all} ({small} / {large})")
    });
    let reasons = ShedReason::ALL
        .iter()
        .map(|r| r.label())
        .chain(["tower, not ready"]);
    for (i, label) in reasons.enumerate() {
        let count = |x: &Figures| [0, 1].map(|size| x.sheds_by_reason[size][i]);
        if figures.iter().all(|x| count(x) == [0, 0]) {
            continue;
        }
        table.each(
            &format!("sheds `{label}` (1 unit / 4 units)"),
            figures,
            |x| {
                let [small, large] = count(x);
                format!("{small} / {large}")
            },
        );
    }
    table.each("cancelled (gave up while parked)", figures, |x| {
        pct(x.gave_up)
    });
    table.each("Retry-After p50", figures, |x| time(x.retry_after_p50));
    table.each(
        "from a shed to the next grant of its size, p50",
        figures,
        |x| time(x.next_grant_p50),
    );
    table.each("a retry after Retry-After admitted", figures, |x| {
        x.retry_admitted.map_or("—".into(), pct)
    });
    table.row(
        "overloaded: share of the time (times entered)",
        runs.iter().zip(figures).map(|(run, x)| match run.policy {
            Policy::Target(_) => format!("{} ({})", pct(x.overloaded), x.overload_entries),
            _ => "—".into(),
        }),
    );
}

/// A goal of the overload target, and the figure one seed gave.
struct Goal {
    what: &'static str,
    value: f64,
    /// Met when `value <= bound` (or `>=` with `at_least`).
    bound: f64,
    at_least: bool,
    show: fn(f64) -> String,
}

impl Goal {
    fn met(&self) -> bool {
        if self.at_least {
            self.value >= self.bound
        } else {
            self.value <= self.bound
        }
    }
}

fn secs(x: f64) -> String {
    if x.is_finite() {
        time(Some(Duration::from_secs_f64(x)))
    } else {
        "not within the run".into()
    }
}

fn ratio(x: f64) -> String {
    format!("{x:.3}")
}

fn s(d: Option<Duration>) -> f64 {
    d.map_or(f64::INFINITY, |d| d.as_secs_f64())
}

/// `setup` under each of `policies` on the arrivals of `seed`, and each run's
/// figures over the span measured after the warm-up.
fn run_measured(setup: &Setup, policies: &[Policy], seed: u64) -> (Vec<Run>, Vec<Figures>) {
    let runs: Vec<Run> = policies.iter().map(|&p| simulate(setup, p, seed)).collect();
    let figures = runs
        .iter()
        .map(|r| r.figures(setup, setup.warmup, setup.end()))
        .collect();
    (runs, figures)
}

/// Every scenario on the arrivals of `seed`: the tables, and the goals' figures.
fn report(seed: u64, length: Duration) -> (String, Vec<Goal>) {
    let mut out = String::new();
    let mut goals = Vec::new();
    let policies = [Policy::Budget, Policy::Target(TARGET), Policy::Tower];

    writeln!(
        out,
        "## The upload mix\n\ncapacity 64 units; 1 unit (80 %) or 4 (20 %); holds lognormal, median 2 s, sigma 1; \
         wait budget 5 s, overload target 500 ms; clients give up after 20 s; Poisson arrivals; \
         {} s measured after a 60 s warm-up; seed {seed}.\n",
        length.as_secs(),
    )
    .unwrap();
    for load in LOADS {
        let setup = uploads(load, length);
        let (runs, figures) = run_measured(&setup, &policies, seed);
        writeln!(out, "### {load}× ({} requests)\n", figures[0].requests).unwrap();
        let mut table = Table::new(&runs);
        common_rows(
            &mut table,
            &runs,
            &figures,
            "utilisation (units in use / capacity)",
        );
        table.write(&mut out);
        let target = &figures[1];
        if load == 2.0 {
            goals.extend([
                Goal {
                    what: "2×: utilisation ≥ 0.97",
                    value: target.utilisation,
                    bound: 0.97,
                    at_least: true,
                    show: ratio,
                },
                Goal {
                    what: "2×: admitted wait p99 ≤ 1 s",
                    value: s(target.wait[1]),
                    bound: 1.0,
                    at_least: false,
                    show: secs,
                },
                Goal {
                    what: "2×: time to shed p50 ≤ 50 ms",
                    value: s(target.time_to_shed[0]),
                    bound: 0.05,
                    at_least: false,
                    show: secs,
                },
            ]);
        }
        if load <= 0.8 {
            goals.push(Goal {
                what: if load == 0.5 {
                    "0.5×: ≤ 0.1 % shed"
                } else {
                    "0.8×: ≤ 0.1 % shed"
                },
                value: target.shed[0],
                bound: 0.001,
                at_least: false,
                show: pct,
            });
        }
    }

    size(&mut out, &mut goals, seed, length);
    priority(&mut out, &mut goals, seed, length);

    let setup: Setup = spike();
    let (start, end) = SPIKE;
    let before = (start - Duration::from_secs(60), start);
    let after = (end, end + Duration::from_secs(60));
    let runs: Vec<Run> = policies
        .iter()
        .map(|&p| simulate(&setup, p, seed))
        .collect();
    writeln!(
        out,
        "## The spike: 0.8× for {} s, 1.4× for {} s, 0.8× for {} s\n\n\
         Time to recover: from the end of the spike, until the p99 of the admitted waits over a sliding 1 s window \
         (of the requests granted in it, slid in steps of 100 ms) is within 1.5× its level over the {} s before \
         the spike (at least {} ms), and stays so for {} s (0: it never left).\n",
        start.as_secs(),
        (end - start).as_secs(),
        (setup.end() - end).as_secs(),
        (before.1 - before.0).as_secs(),
        RECOVERY_FLOOR.as_millis(),
        RECOVERY_HOLD.as_secs(),
    )
    .unwrap();
    let mut table = Table::new(&runs);
    for (label, (from, to)) in [
        ("admitted wait p99, granted in the 60 s before", before),
        ("admitted wait p99, granted during the spike", (start, end)),
        ("admitted wait p99, granted in the 60 s after", after),
    ] {
        table.row(
            label,
            runs.iter().map(|r| time(r.granted_wait_p99(from, to))),
        );
    }
    for (label, (from, to)) in [
        ("shed, of the arrivals during the spike", (start, end)),
        ("shed, of the arrivals in the 60 s after", after),
    ] {
        table.row(
            label,
            runs.iter()
                .map(|r| pct(r.figures(&setup, from, to).shed[0])),
        );
    }
    let recoveries: Vec<f64> = runs
        .iter()
        .map(|r| s(r.recovery(before, end, setup.end())))
        .collect();
    table.row(
        "time to recover after the spike",
        recoveries.iter().map(|&r| secs(r)),
    );
    table.row(
        "time to recover: p99 of the next 10 s of admissions within 1.5× the level before",
        runs.iter()
            .map(|r| secs(s(r.recovery_over_next_10s(before, end, setup.end())))),
    );
    table.write(&mut out);
    goals.push(Goal {
        what: "spike: recovery ≤ 2 s",
        value: recoveries[1],
        bound: 2.0,
        at_least: false,
        show: secs,
    });
    goals.push(Goal {
        what: "spike: recovery, p99 of the next 10 s of admissions, ≤ 2 s",
        value: s(runs[1].recovery_over_next_10s(before, end, setup.end())),
        bound: 2.0,
        at_least: false,
        show: secs,
    });

    for timeout in [Duration::from_secs(1), Duration::from_millis(100)] {
        let setup = bohde(timeout);
        let runs: Vec<Run> = [
            Policy::Budget,
            Policy::Target(CODEL_TARGETS[0]),
            Policy::Target(CODEL_TARGETS[1]),
            Policy::Tower,
        ]
        .iter()
        .map(|&p| simulate(&setup, p, seed))
        .collect();
        let figures: Vec<Figures> = runs
            .iter()
            .map(|r| r.figures(&setup, setup.warmup, setup.end()))
            .collect();
        let requests = figures[0].requests;
        writeln!(
            out,
            "## The `bohde/codel` simulation, client timeout {}\n\n\
             {requests} requests (1000/s for 10 s) into 10 slots (its `MaxOutstanding`; `max_waiters` 1000, its \
             `MaxPending`) in front of one single-threaded server of 500/s (exponential service times, mean 2 ms, \
             FIFO); wait budget = the client timeout; targets 1 ms (its simulation's `TargetLatency`) and 5 ms (its \
             README's example). A server busy all 10 s serves about 5000: a policy that leaves no backlog at the end \
             drops at least {}.\n",
            time(Some(timeout)),
            pct(1.0 - 5000.0 / requests as f64),
        )
        .unwrap();
        let mut table = Table::new(&runs);
        table.each(
            "dropped by the end of the arrivals (as it counts)",
            &figures,
            |x| pct(x.dropped_by_end),
        );
        table.each("dropped in all (shed + cancelled)", &figures, |x| {
            pct(x.shed[0] + x.gave_up)
        });
        table.each(
            "latency of the admitted, arrival to release (as it measures), p50 / p95 / p99",
            &figures,
            |x| {
                let [a, b, c] = x.latency.map(time);
                format!("{a} / {b} / {c}")
            },
        );
        common_rows(
            &mut table,
            &runs,
            &figures,
            "utilisation (the server's busy share)",
        );
        table.write(&mut out);
        if timeout == Duration::from_secs(1) {
            writeln!(
                out,
                "Its README, for comparison: queue dropped 43.34 %, p50 998 ms, p95 1.000 s, p99 1.000 s; \
                 codel dropped 46.43 %, p50 5.3 ms, p95 16.9 ms, p99 34.3 ms.\n"
            )
            .unwrap();
            let codel = &figures[1];
            goals.extend([
                Goal {
                    what: "bohde/codel (target 1 ms): admitted wait p99 ≤ 34 ms",
                    value: s(codel.wait[1]),
                    bound: 0.034,
                    at_least: false,
                    show: secs,
                },
                Goal {
                    what: "bohde/codel (target 1 ms): arrival-to-release p99 ≤ 34 ms",
                    value: s(codel.latency[2]),
                    bound: 0.034,
                    at_least: false,
                    show: secs,
                },
                Goal {
                    what:
                        "bohde/codel (target 1 ms): ≤ 46.4 % dropped (by the end of the arrivals)",
                    value: codel.dropped_by_end,
                    bound: 0.464,
                    at_least: false,
                    show: pct,
                },
            ]);
        }
    }
    (out, goals)
}

/// Whether a request that needs two units gets in as often as one that needs
/// one: the registry mix open-loop at 2×, and closed-loop with retries.
fn size(out: &mut String, goals: &mut Vec<Goal>, seed: u64, length: Duration) {
    let policies = [
        Policy::Budget,
        Policy::Target(REGISTRY_TARGET),
        Policy::Tower,
    ];
    let setup = registry(2.0, length);
    writeln!(
        out,
        "## Size: the registry mix\n\n\
         capacity 32 units; 1 unit (90 %) or 2 (10 %); holds lognormal, median 1 s, sigma 0.5; wait budget 2 s, \
         overload target 200 ms; {} s measured after a 60 s warm-up; seed {seed}.\n\n\
         ### Open loop at 2× (Poisson arrivals, one try each)\n",
        length.as_secs()
    )
    .unwrap();
    let (runs, figures) = run_measured(&setup, &policies, seed);
    let admitted = |x: &Figures, large: usize| 1.0 - x.shed[1 + large];
    let mut table = Table::new(&runs);
    table.each("admitted (1 unit / 2 units)", &figures, |x| {
        format!("{} / {}", pct(admitted(x, 0)), pct(admitted(x, 1)))
    });
    table.each("admitted, 2 units ÷ 1 unit", &figures, |x| {
        ratio(admitted(x, 1) / admitted(x, 0))
    });
    table.each("admitted wait p50 / p99", &figures, |x| {
        format!("{} / {}", time(x.wait[0]), time(x.wait[1]))
    });
    table.write(out);
    let target = &figures[1];
    goals.push(Goal {
        what: "size, open loop at 2×: 2-unit ÷ 1-unit admitted ≥ 0.8",
        value: admitted(target, 1) / admitted(target, 0),
        bound: 0.8,
        at_least: true,
        show: ratio,
    });

    writeln!(
        out,
        "### Closed loop: {REGISTRY_CLIENTS} clients, each retrying after `Retry-After` × U(0.5, 1.5) \
         (tower: 1 s), giving up 20 s after an operation's first try\n"
    )
    .unwrap();
    let figures: Vec<[RetryFigures; 2]> = policies
        .iter()
        .map(|&p| {
            let operations = simulate_retrying(&setup, p, seed, REGISTRY_CLIENTS);
            retry_figures(&operations, setup.warmup, setup.end())
        })
        .collect();
    let mut table = Table::new(&runs);
    let each = |table: &mut Table, label: &str, cell: &dyn Fn(&RetryFigures) -> String| {
        table.row(
            label,
            figures
                .iter()
                .map(|[small, large]| format!("{} / {}", cell(small), cell(large))),
        );
    };
    each(&mut table, "operations (1 unit / 2 units)", &|x| {
        x.operations.to_string()
    });
    each(&mut table, "tries admitted", &|x| pct(x.tries_admitted));
    each(&mut table, "operations that got in within 20 s", &|x| {
        pct(x.got_in)
    });
    each(&mut table, "first try to admission, p50", &|x| {
        time(x.to_admission[0])
    });
    each(&mut table, "first try to admission, p99", &|x| {
        time(x.to_admission[1])
    });
    table.row(
        "operations that got in, 2 units ÷ 1 unit",
        figures
            .iter()
            .map(|[small, large]| ratio(large.got_in / small.got_in)),
    );
    table.write(out);
    let [small, large] = figures[1];
    goals.push(Goal {
        what: "size, closed loop: 2-unit ÷ 1-unit operations that got in ≥ 0.8",
        value: large.got_in / small.got_in,
        bound: 0.8,
        at_least: true,
        show: ratio,
    });
}

/// Who is shed: critical requests at 0.5× beside sheddable ones at 0.3×, 1.5×,
/// 3.5× and a spike of 12× for 60 s, on the registry mix; the target with
/// priorities against the same arrivals all of one class.
fn priority(out: &mut String, goals: &mut Vec<Goal>, seed: u64, length: Duration) {
    writeln!(
        out,
        "## Priority: critical beside sheddable\n\n\
         The registry mix (capacity 32, budget 2 s, target 200 ms); critical requests at 0.5× the capacity beside \
         sheddable ones; the columns see the same arrivals, the first two with every request of one class.\n"
    )
    .unwrap();
    let one_class = |setup: &Setup| Setup {
        others: setup
            .others
            .iter()
            .map(|(_, phases)| (Priority::Critical, phases.clone()))
            .collect(),
        ..setup.clone()
    };
    let columns = [
        "fixed budget",
        "target, one class",
        "target, with priorities",
    ];
    let mut scenarios: Vec<(String, Setup, (Duration, Duration))> = [0.3, 1.5, 3.5]
        .iter()
        .map(|&load| {
            let setup = classes(0.5, load, length);
            let span = (setup.warmup, setup.end());
            (format!("sheddable at {load}×"), setup, span)
        })
        .collect();
    scenarios.push((
        "sheddable 0.3×, 12× for 60 s, 0.3×".into(),
        class_spike(12.0),
        CLASS_SPIKE,
    ));
    for (name, setup, (from, to)) in scenarios {
        let runs = [
            simulate(&one_class(&setup), Policy::Budget, seed),
            simulate(&one_class(&setup), Policy::Target(REGISTRY_TARGET), seed),
            simulate(&setup, Policy::Target(REGISTRY_TARGET), seed),
        ];
        // The one-class runs saw every request as critical: read them by the
        // arrivals' own classes.
        let classes: Vec<Priority> = setup.requests(seed).iter().map(|r| r.priority).collect();
        let runs = runs.map(|run| run.with_classes(&classes));
        let figures = |run: &Run, sheddable: bool| -> ClassFigures {
            let class = if sheddable {
                Priority::Sheddable
            } else {
                Priority::Critical
            };
            run.class_figures(class, from, to)
        };
        writeln!(out, "### {name}\n").unwrap();
        writeln!(out, "| | {} |\n|---|---|---|---|", columns.join(" | ")).unwrap();
        let rows: [Row; 5] = [
            ("critical: shed", |x| pct(x.shed), false),
            (
                "critical: admitted wait p50 / p99",
                |x| format!("{} / {}", time(x.wait[0]), time(x.wait[1])),
                false,
            ),
            ("sheddable: shed", |x| pct(x.shed), true),
            (
                "sheddable: shed while parked, for a critical request",
                |x| x.outranked.to_string(),
                true,
            ),
            (
                "sheddable: admitted wait p50 / p99",
                |x| format!("{} / {}", time(x.wait[0]), time(x.wait[1])),
                true,
            ),
        ];
        for (label, cell, sheddable) in rows {
            let cells: Vec<String> = runs.iter().map(|r| cell(&figures(r, sheddable))).collect();
            writeln!(out, "| {label} | {} |", cells.join(" | ")).unwrap();
        }
        writeln!(out).unwrap();
        let critical = figures(&runs[2], false);
        let sheddable = figures(&runs[2], true);
        goals.push(Goal {
            what: leak(format!("priority, {name}: critical shed ≤ 0.1 %")),
            value: critical.shed,
            bound: 0.001,
            at_least: false,
            show: pct,
        });
        if name.contains("0.3×") && !name.contains("12×") {
            goals.push(Goal {
                what: "priority, 0.8× in total: sheddable shed ≤ 0.1 %",
                value: sheddable.shed,
                bound: 0.001,
                at_least: false,
                show: pct,
            });
        } else {
            goals.push(Goal {
                what: leak(format!("priority, {name}: critical wait p99 ≤ 400 ms")),
                value: s(critical.wait[1]),
                bound: 0.4,
                at_least: false,
                show: secs,
            });
        }
    }
}

/// A row of a class table: its label, its cell, and whether it reads the
/// sheddable class.
type Row = (&'static str, fn(&ClassFigures) -> String, bool);

/// A goal's name made at run time, kept for the rest of the run.
fn leak(s: String) -> &'static str {
    Box::leak(s.into_boxed_str())
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let value = |flag: &str| {
        args.iter()
            .position(|a| a == flag)
            .and_then(|i| args.get(i + 1))
            .map(|v| v.parse::<u64>().unwrap_or_else(|_| panic!("{flag} N")))
    };
    let full = args.iter().any(|a| a == "--bench");
    let seed = value("--seed").unwrap_or(1);
    let seeds = value("--seeds").unwrap_or(if full { 10 } else { 1 });
    let length = Duration::from_secs(if full { 600 } else { 60 });
    let started = Instant::now();

    println!(
        "# The gate under overload{}\n",
        if full {
            ""
        } else {
            " (short pass: `cargo bench` for the recorded figures)"
        }
    );
    let (tables, goals) = report(seed, length);
    print!("{tables}");

    println!(
        "## Goals of the overload target (500 ms, wait budget 5 s; 1 ms on the bohde/codel setup)\n\n\
         | goal | seed {seed} | met |\n|---|---|---|"
    );
    for g in &goals {
        let met = if g.met() { "yes" } else { "**no**" };
        println!("| {} | {} | {met} |", g.what, (g.show)(g.value));
    }
    println!();

    if seeds > 1 {
        let runs: Vec<Vec<Goal>> = (1..=seeds).map(|seed| report(seed, length).1).collect();
        println!(
            "## The goals over seeds 1 to {seeds}\n\n| goal | median | worst | met in |\n|---|---|---|---|"
        );
        for (i, g) in goals.iter().enumerate() {
            let mut values: Vec<(f64, u64)> = runs
                .iter()
                .zip(1..)
                .map(|(goals, seed)| (goals[i].value, seed))
                .collect();
            values.sort_by(|a, b| a.0.total_cmp(&b.0));
            let median = values[(values.len() - 1) / 2].0;
            let (worst, seed) = if g.at_least {
                values[0]
            } else {
                values[values.len() - 1]
            };
            let met = runs.iter().filter(|goals| goals[i].met()).count();
            println!(
                "| {} | {} | {} (seed {seed}) | {met} of {seeds} |",
                g.what,
                (g.show)(median),
                (g.show)(worst)
            );
        }
        println!();
    }
    println!(
        "(simulated in {:.1} s of wall time)",
        started.elapsed().as_secs_f64()
    );
}
