//! Reading a `DebuggingRecorder` snapshot into plain values.
#![allow(dead_code)] // each test file uses a different subset

use std::collections::HashMap;

use metrics::Unit;
use metrics_util::debugging::{DebugValue, Snapshotter};
use metrics_util::MetricKind;

/// One metric series as read from the recorder.
#[derive(Debug, PartialEq)]
pub struct Series {
    pub kind: MetricKind,
    pub unit: Option<Unit>,
    pub described: bool,
    pub value: DebugValue,
}

/// Series by (name, `source` label or ""). Reading resets the recorder's counters and
/// gauges, so each test reads once, at the point it checks.
pub fn read(snapshotter: &Snapshotter) -> HashMap<(String, String), Series> {
    snapshotter
        .snapshot()
        .into_vec()
        .into_iter()
        .map(|(ck, unit, desc, value)| {
            let (kind, key) = ck.into_parts();
            let source = key
                .labels()
                .find(|l| l.key() == "source")
                .map_or(String::new(), |l| l.value().to_owned());
            let series = Series {
                kind,
                unit,
                described: desc.is_some_and(|d| !d.is_empty()),
                value,
            };
            ((key.name().to_owned(), source), series)
        })
        .collect()
}

pub fn get<'a>(m: &'a HashMap<(String, String), Series>, name: &str, source: &str) -> &'a Series {
    m.get(&(name.to_owned(), source.to_owned()))
        .unwrap_or_else(|| panic!("no series {name}{{source={source:?}}} in {m:#?}"))
}

pub fn gauge(m: &HashMap<(String, String), Series>, name: &str) -> f64 {
    match get(m, name, "").value {
        DebugValue::Gauge(v) => v.into_inner(),
        ref other => panic!("{name} is not a gauge: {other:?}"),
    }
}

pub fn counter(m: &HashMap<(String, String), Series>, name: &str, source: &str) -> u64 {
    match get(m, name, source).value {
        DebugValue::Counter(v) => v,
        ref other => panic!("{name} is not a counter: {other:?}"),
    }
}

pub fn histogram(m: &HashMap<(String, String), Series>, name: &str) -> Vec<f64> {
    match &get(m, name, "").value {
        DebugValue::Histogram(v) => v.iter().map(|x| x.into_inner()).collect(),
        other => panic!("{name} is not a histogram: {other:?}"),
    }
}
