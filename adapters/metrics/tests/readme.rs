//! The README's metrics table (also the crate docs' table) is the one list of
//! the metrics' names: the series a started gate registers are exactly its rows,
//! each of its kind, labels and unit, and the label values it names cover every
//! value `admit` can report.

use std::collections::{BTreeMap, BTreeSet};

use admit::{CutReason, LeaseEnd, Observer, ShedReason, StartEvent};
use admit_metrics::MetricsObserver;
use metrics::Unit;
use metrics_util::debugging::DebuggingRecorder;
use metrics_util::MetricKind;

const README: &str = include_str!("../README.md");

/// One row of the table: kind, label keys, unit.
type Row = (MetricKind, BTreeSet<String>, Option<Unit>);

/// The table's rows, by metric name with `<prefix>` replaced by `prefix`.
fn table(prefix: &str) -> BTreeMap<String, Row> {
    let mut rows = BTreeMap::new();
    for line in README.lines().filter(|l| l.starts_with("| `<prefix>_")) {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        let [_, name, kind, labels, unit, ..] = cells[..] else {
            panic!("a short row: {line}");
        };
        let name = name.trim_matches('`').replace("<prefix>", prefix);
        let kind = match kind {
            "counter" => MetricKind::Counter,
            "gauge" => MetricKind::Gauge,
            "histogram" => MetricKind::Histogram,
            other => panic!("{name}: kind {other:?}"),
        };
        let labels = labels
            .split(',')
            .map(|l| l.trim().trim_matches('`').to_owned())
            .filter(|l| l != "—")
            .collect();
        let unit = Unit::from_string(unit);
        assert!(unit.is_some(), "{name}: unit {unit:?}");
        assert!(
            rows.insert(name.clone(), (kind, labels, unit)).is_none(),
            "{name} twice"
        );
    }
    rows
}

#[test]
fn the_table_lists_exactly_the_series_a_started_gate_registers() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let observer = MetricsObserver::new("p");
    metrics::with_local_recorder(&recorder, || {
        observer.on_start(&StartEvent::new(4, &["a", "b"]));
    });
    let mut registered: BTreeMap<String, Row> = BTreeMap::new();
    for (ck, unit, description, _) in snapshotter.snapshot().into_vec() {
        let (kind, key) = ck.into_parts();
        let name = key.name().to_owned();
        assert!(
            description.is_some_and(|d| !d.is_empty()),
            "{name} is not described"
        );
        let labels: BTreeSet<String> = key.labels().map(|l| l.key().to_owned()).collect();
        let row = (kind, labels, unit);
        if let Some(seen) = registered.insert(name.clone(), row.clone()) {
            assert_eq!(seen, row, "{name}: two shapes of series");
        }
    }
    let table = table("p");
    assert!(table.len() >= 10, "{table:?}");
    assert_eq!(
        registered.keys().collect::<Vec<_>>(),
        table.keys().collect::<Vec<_>>(),
        "registered series vs the README table"
    );
    for (name, row) in &table {
        assert_eq!(
            &registered[name], row,
            "{name}: registered vs the README table"
        );
    }
}

/// Every shed reason, cut reason and way a lease ends is named in the README
/// (priorities are named by the linked `Priority`).
#[test]
fn the_readme_names_every_label_value() {
    let labels = ShedReason::ALL
        .map(ShedReason::label)
        .into_iter()
        .chain(CutReason::ALL.map(CutReason::label))
        .chain(LeaseEnd::ALL.map(LeaseEnd::label));
    for label in labels {
        assert!(
            README.contains(&format!("`{label}`")),
            "the README does not name `{label}`"
        );
    }
}
