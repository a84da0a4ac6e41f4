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

/// A series' identity: its name and its `source` and `reason` labels ("" when
/// absent).
pub type Key = (String, String, String);

/// Series by [`Key`], the `priority` label summed over (a counter's values
/// added, a histogram's samples joined). Reading resets the recorder's counters
/// and gauges, so each test reads once, at the point it checks.
pub fn read(snapshotter: &Snapshotter) -> HashMap<Key, Series> {
    let mut out: HashMap<Key, Series> = HashMap::new();
    for ((name, source, reason, _), series) in read_by_priority(snapshotter) {
        match out.entry((name, source, reason)) {
            std::collections::hash_map::Entry::Vacant(slot) => {
                slot.insert(series);
            }
            std::collections::hash_map::Entry::Occupied(mut slot) => {
                let merged = slot.get_mut();
                merged.described |= series.described;
                match (&mut merged.value, series.value) {
                    (DebugValue::Counter(a), DebugValue::Counter(b)) => *a += b,
                    (DebugValue::Histogram(a), DebugValue::Histogram(b)) => a.extend(b),
                    (a, b) => panic!("two series of one key: {a:?} and {b:?}"),
                }
            }
        }
    }
    out
}

/// Series by [`Key`] and their `priority` label ("" when absent).
pub fn read_by_priority(
    snapshotter: &Snapshotter,
) -> HashMap<(String, String, String, String), Series> {
    snapshotter
        .snapshot()
        .into_vec()
        .into_iter()
        .map(|(ck, unit, desc, value)| {
            let (kind, key) = ck.into_parts();
            let label = |name: &str| {
                key.labels()
                    .find(|l| l.key() == name)
                    .map_or(String::new(), |l| l.value().to_owned())
            };
            let series = Series {
                kind,
                unit,
                described: desc.is_some_and(|d| !d.is_empty()),
                value,
            };
            (
                (
                    key.name().to_owned(),
                    label("source"),
                    label("reason"),
                    label("priority"),
                ),
                series,
            )
        })
        .collect()
}

fn key(name: &str, source: &str, reason: &str) -> Key {
    (name.to_owned(), source.to_owned(), reason.to_owned())
}

/// The series `name{source, reason}` ("" for an absent label).
pub fn get<'a>(m: &'a HashMap<Key, Series>, name: &str, source: &str, reason: &str) -> &'a Series {
    m.get(&key(name, source, reason)).unwrap_or_else(|| {
        panic!("no series {name}{{source={source:?}, reason={reason:?}}} in {m:#?}")
    })
}

pub fn gauge(m: &HashMap<Key, Series>, name: &str) -> f64 {
    match get(m, name, "", "").value {
        DebugValue::Gauge(v) => v.into_inner(),
        ref other => panic!("{name} is not a gauge: {other:?}"),
    }
}

/// The counter `name{source, reason}`.
pub fn counter(m: &HashMap<Key, Series>, name: &str, source: &str, reason: &str) -> u64 {
    match get(m, name, source, reason).value {
        DebugValue::Counter(v) => v,
        ref other => panic!("{name} is not a counter: {other:?}"),
    }
}

/// The sheds of `source` for every reason: `sum by (source)`. Every reason's
/// series must exist.
pub fn sheds(m: &HashMap<Key, Series>, name: &str, source: &str) -> u64 {
    admit::ShedReason::ALL
        .iter()
        .map(|reason| counter(m, name, source, reason.label()))
        .sum()
}

pub fn histogram(m: &HashMap<Key, Series>, name: &str) -> Vec<f64> {
    match &get(m, name, "", "").value {
        DebugValue::Histogram(v) => v.iter().map(|x| x.into_inner()).collect(),
        other => panic!("{name} is not a histogram: {other:?}"),
    }
}

/// A current-thread Tokio runtime on a paused clock: virtual time, so a test
/// orders its events without waiting.
pub fn paused_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap()
}
