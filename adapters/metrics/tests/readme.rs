//! The README's metrics table (also the crate docs' table) is the one source of
//! the series an observer registers. An observer driven through every event kind
//! registers exactly its rows, each of the row's type, unit and label names, with
//! label values among those the row lists; and every value a row lists is one
//! `admit` can report, as `dashboard.rs` holds the dashboard to the same series.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use admit::{
    AdmitEvent, CapacityEvent, CutEvent, CutReason, LeaseEnd, LeaseEndEvent, LeaseStartEvent,
    Observer, OverloadEvent, Priority, ReleaseEvent, ShedEvent, ShedReason, StartEvent,
};
use admit_metrics::MetricsObserver;
use metrics::Unit;
use metrics_util::debugging::DebuggingRecorder;
use metrics_util::MetricKind;

const README: &str = include_str!("../README.md");

/// The gate's source labels in these tests.
const SOURCES: &[&str] = &["upload", "mirror"];

/// A metric as the table lists it, or as the recorder holds it.
#[derive(Debug)]
struct Metric {
    kind: MetricKind,
    unit: Option<Unit>,
    /// Each label's values. In the table an empty set is "the gate's sources"
    /// (the row lists no values); from the recorder, the values seen.
    labels: BTreeMap<String, BTreeSet<String>>,
}

/// The spans between backticks in `text`.
fn quoted(text: &str) -> Vec<String> {
    text.split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_owned)
        .collect()
}

/// The table's rows, by metric name with `<prefix>` replaced by `prefix`. A labels
/// cell is `—`, or `; `-separated labels, each its name in backticks, then its
/// values in backticks after a `:` (or words without backticks: the gate's
/// sources).
fn table(prefix: &str) -> BTreeMap<String, Metric> {
    let mut rows = BTreeMap::new();
    for line in README.lines().filter(|l| l.starts_with("| `<prefix>_")) {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        let [_, name, kind, labels, unit, _meaning, _] = cells[..] else {
            panic!("a row of other than five cells: {line}");
        };
        let name = name.trim_matches('`').replace("<prefix>", prefix);
        let kind = match kind {
            "counter" => MetricKind::Counter,
            "gauge" => MetricKind::Gauge,
            "histogram" => MetricKind::Histogram,
            other => panic!("{name}: type {other:?}"),
        };
        let labels = match labels {
            "—" => BTreeMap::new(),
            labels => labels
                .split(';')
                .map(|label| {
                    let mut words = quoted(label).into_iter();
                    let key = words
                        .next()
                        .unwrap_or_else(|| panic!("{name}: a label without a name: {label:?}"));
                    (key, words.collect())
                })
                .collect(),
        };
        let unit = Unit::from_string(unit);
        assert!(unit.is_some(), "{name}: unit {unit:?}");
        let metric = Metric { kind, unit, labels };
        assert!(rows.insert(name.clone(), metric).is_none(), "{name} twice");
    }
    rows
}

/// Every kind of event after the start, each with every value of its labels:
/// admissions and releases of every source and class, sheds of every source,
/// reason and class, cuts of every source and reason, lease starts of every
/// source and class and lease ends of every source and way, a resize and an
/// overload that comes and goes.
fn events(observer: &MetricsObserver) {
    let ms = Duration::from_millis;
    for &source in SOURCES {
        for priority in Priority::ALL {
            let admit = AdmitEvent::new(source, 1, ms(5)).with_priority(priority);
            observer.on_admit(&admit);
            let release = ReleaseEvent::new(source, 1, ms(20)).with_priority(priority);
            observer.on_release(&release);
            observer.on_lease_start(&LeaseStartEvent::new(source, 1).with_priority(priority));
        }
    }
    for &source in SOURCES {
        for reason in ShedReason::ALL {
            for priority in Priority::ALL {
                let shed = ShedEvent::new(source, 1, ms(5), reason, ms(100));
                observer.on_shed(&shed.with_priority(priority));
            }
        }
        for reason in CutReason::ALL {
            observer.on_cut(&CutEvent::new(source, 1, reason, ms(30)));
        }
        for how in LeaseEnd::ALL {
            observer.on_lease_end(&LeaseEndEvent::new(source, 1, ms(40), how));
        }
    }
    observer.on_capacity(&CapacityEvent::new(6).with_budget_units(4));
    for overloaded in [true, false] {
        observer.on_overload(&OverloadEvent::new(overloaded, ms(300), ms(40), ms(100)));
    }
}

/// What an observer of prefix `p` registers when driven through [`events`]: with
/// the recorder in force from its start, or (`late`) installed after it.
fn registered(late: bool) -> BTreeMap<String, Metric> {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let observer = MetricsObserver::new("p");
    let start = StartEvent::new(8, SOURCES)
        .with_overload_target(Duration::from_millis(100))
        .with_budget_units(4);
    if late {
        observer.on_start(&start);
    }
    metrics::with_local_recorder(&recorder, || {
        if !late {
            observer.on_start(&start);
        }
        events(&observer);
    });
    let mut out: BTreeMap<String, Metric> = BTreeMap::new();
    for (ck, unit, description, _) in snapshotter.snapshot().into_vec() {
        let (kind, key) = ck.into_parts();
        let name = key.name().to_owned();
        assert!(
            description.is_some_and(|d| !d.is_empty()),
            "{name} is not described"
        );
        let labels = key
            .labels()
            .map(|l| (l.key().to_owned(), BTreeSet::from([l.value().to_owned()])))
            .collect();
        let series = Metric { kind, unit, labels };
        match out.get_mut(&name) {
            None => {
                out.insert(name, series);
            }
            Some(seen) => {
                assert_eq!(
                    (seen.kind, seen.unit, seen.labels.keys().collect::<Vec<_>>()),
                    (kind, unit, series.labels.keys().collect::<Vec<_>>()),
                    "{name}: two shapes of series"
                );
                for (key, values) in series.labels {
                    seen.labels.entry(key).or_default().extend(values);
                }
            }
        }
    }
    out
}

/// The values `admit` can report for `label` of `metric` (`p_` and a row's
/// name): its enum's labels.
fn producible(metric: &str, label: &str) -> BTreeSet<String> {
    let labels: Vec<&str> = match (metric, label) {
        (_, "priority") => Priority::ALL.map(Priority::label).to_vec(),
        (_, "how") => LeaseEnd::ALL.map(LeaseEnd::label).to_vec(),
        ("p_shed_total", "reason") => ShedReason::ALL.map(ShedReason::label).to_vec(),
        ("p_cuts_total", "reason") => CutReason::ALL.map(CutReason::label).to_vec(),
        _ => panic!("{metric}: label {label:?} of no known enum: name its values here"),
    };
    labels.into_iter().map(str::to_owned).collect()
}

/// Both ways: each registered series is a row, of the row's type, unit and label
/// names, its values among the row's; each row is registered.
fn check_against_the_table(registered: &BTreeMap<String, Metric>) {
    let table = table("p");
    assert!(!table.is_empty(), "no row read from the README table");
    let sources: BTreeSet<String> = SOURCES.iter().map(|&s| s.to_owned()).collect();
    for (name, series) in registered {
        let row = table
            .get(name)
            .unwrap_or_else(|| panic!("{name} is registered but not in the README table"));
        assert_eq!(
            (series.kind, series.unit),
            (row.kind, row.unit),
            "{name}: registered vs the README table (type, unit)"
        );
        assert_eq!(
            series.labels.keys().collect::<Vec<_>>(),
            row.labels.keys().collect::<Vec<_>>(),
            "{name}: registered label names vs the README table"
        );
        for (label, values) in &series.labels {
            let listed = match &row.labels[label] {
                listed if listed.is_empty() => &sources,
                listed => listed,
            };
            assert!(
                values.is_subset(listed),
                "{name}: {label} values {:?} registered but not in the README table",
                values.difference(listed).collect::<Vec<_>>()
            );
        }
    }
    for name in table.keys() {
        assert!(
            registered.contains_key(name),
            "{name} is in the README table but not registered"
        );
    }
}

#[test]
fn the_table_holds_every_series_an_observer_registers() {
    check_against_the_table(&registered(false));
}

#[test]
fn the_table_holds_every_series_an_observer_registers_for_a_late_recorder() {
    check_against_the_table(&registered(true));
}

/// For each enumerable label, the row lists exactly the values `admit` can report,
/// and each is registered: a value missing from the table, or one the code no
/// longer has, fails here. `source` (the gate's sources) lists none.
#[test]
fn every_value_the_table_lists_is_one_admit_reports_and_each_is_listed() {
    let registered = registered(false);
    for (name, row) in table("p") {
        for (label, listed) in &row.labels {
            if label == "source" {
                assert!(listed.is_empty(), "{name}: sources listed: {listed:?}");
                continue;
            }
            assert_eq!(
                listed,
                &producible(&name, label),
                "{name}: {label} values in the README table vs admit's"
            );
            assert_eq!(
                registered.get(&name).and_then(|s| s.labels.get(label)),
                Some(listed),
                "{name}: {label} values registered vs the README table"
            );
        }
    }
}
