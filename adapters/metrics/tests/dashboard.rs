//! The Grafana dashboard shipped next to the operator guide
//! (`docs/grafana/admit-dashboard.json`) queries only metrics the gate exports, and
//! shows every one of them.

mod support;

use std::collections::BTreeSet;
use std::time::Duration;

use admit_metrics::MetricsObserver;
use metrics_util::debugging::DebuggingRecorder;
use metrics_util::MetricKind;
use serde_json::Value;

const DASHBOARD: &str = include_str!("../../../docs/grafana/admit-dashboard.json");

admit::sources! {
    enum Route { Upload => "upload" }
}

/// The PromQL words the dashboard may use besides metric names: functions,
/// operators, label names, Grafana's interval variable.
const PROMQL: &[&str] = &[
    "sum",
    "rate",
    "by",
    "on",
    "and",
    "histogram_quantile",
    "le",
    "source",
    "reason",
    "how",
    "__rate_interval",
    "m",
];

fn exprs(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            for (key, v) in map {
                match (key.as_str(), v) {
                    ("expr", Value::String(expr)) => out.push(expr.clone()),
                    _ => exprs(v, out),
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|v| exprs(v, out)),
        _ => {}
    }
}

/// The identifiers of a PromQL expression (metric names, functions, labels), with
/// string literals and numbers left out.
fn identifiers(expr: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    let mut in_string = false;
    for c in expr.chars() {
        if c == '"' {
            in_string = !in_string;
            continue;
        }
        if !in_string && (c.is_ascii_alphanumeric() || c == '_' || c == ':') {
            current.push(c);
        } else if !current.is_empty() {
            out.push(std::mem::take(&mut current));
        }
    }
    if !current.is_empty() {
        out.push(current);
    }
    out.retain(|w| !w.starts_with(|c: char| c.is_ascii_digit()));
    out
}

/// What the gate exports under `prefix`, as Prometheus series names: a histogram
/// `x` is `x_bucket`, `x_sum` and `x_count`.
fn exported(prefix: &str) -> BTreeSet<String> {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let rt = support::paused_runtime();
    metrics::with_local_recorder(&recorder, || {
        rt.block_on(async {
            let gate = admit_tokio::gate(1)
                .wait_budget(Duration::from_secs(1))
                .observer(MetricsObserver::new(prefix))
                .build()
                .unwrap();
            let permit = gate.acquire(1, Route::Upload).await.unwrap();
            let _ = gate.acquire(1, Route::Upload).await.unwrap_err(); // a shed
            drop(permit);
        });
    });
    let mut names = BTreeSet::new();
    for (key, _, _, _) in snapshotter.snapshot().into_vec() {
        let (kind, key) = key.into_parts();
        let name = key.name().to_owned();
        if kind == MetricKind::Histogram {
            for suffix in ["_bucket", "_sum", "_count"] {
                names.insert(format!("{name}{suffix}"));
            }
        } else {
            names.insert(name);
        }
    }
    names
}

#[test]
fn every_metric_the_dashboard_queries_is_exported_and_every_export_is_shown() {
    let dashboard: Value = serde_json::from_str(DASHBOARD).expect("the dashboard is JSON");
    let prefix = dashboard["templating"]["list"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == "prefix")
        .expect("a `prefix` variable")["current"]["value"]
        .as_str()
        .unwrap()
        .to_owned();
    let exported = exported(&prefix);

    let mut queries = Vec::new();
    exprs(&dashboard, &mut queries);
    assert!(queries.len() >= 9, "{queries:?}");

    let mut used = BTreeSet::new();
    for query in &queries {
        let query = query.replace("${prefix}", &prefix);
        for word in identifiers(&query) {
            if PROMQL.contains(&word.as_str()) {
                continue;
            }
            assert!(
                exported.contains(&word),
                "the dashboard queries {word:?}, which the gate does not export \
                 (exported: {exported:?}); in: {query}"
            );
            used.insert(word);
        }
    }
    // Every export is on the dashboard (a histogram counts once, by any series).
    for name in &exported {
        let base = name
            .strip_suffix("_bucket")
            .or_else(|| name.strip_suffix("_sum"))
            .or_else(|| name.strip_suffix("_count"))
            .unwrap_or(name);
        assert!(
            used.iter()
                .any(|u| u == name || u.starts_with(&format!("{base}_"))),
            "{name} is exported but not on the dashboard"
        );
    }
}

#[test]
fn the_dashboard_uses_its_variables_for_the_datasource_and_the_prefix() {
    let mut queries = Vec::new();
    exprs(&serde_json::from_str(DASHBOARD).unwrap(), &mut queries);
    for query in &queries {
        assert!(
            query.contains("${prefix}_"),
            "a fixed metric name in: {query}"
        );
    }
    assert!(
        !DASHBOARD.contains("upload_sessions_"),
        "the prefix is a variable"
    );
    assert!(DASHBOARD.contains("\"uid\": \"${datasource}\""));
}

/// Sheds are shown per call site and per reason, so an operator sees which limit
/// bites.
#[test]
fn the_dashboard_shows_sheds_by_source_and_by_reason() {
    let mut queries = Vec::new();
    exprs(&serde_json::from_str(DASHBOARD).unwrap(), &mut queries);
    for label in ["source", "reason"] {
        assert!(
            queries
                .iter()
                .any(|q| q.contains(&format!("sum by ({label})"))
                    && q.contains("${prefix}_shed_total")),
            "no panel of the sheds by {label}: {queries:?}"
        );
    }
}

/// The by-reason panel says what each reason means (it queries by label, so every
/// reason `admit` has shows up there), and the overload state has a panel of its own.
#[test]
fn the_dashboard_explains_every_shed_reason_and_shows_the_overload_state() {
    let dashboard: Value = serde_json::from_str(DASHBOARD).unwrap();
    let panels = dashboard["panels"].as_array().unwrap();
    let queries = |panel: &Value| {
        let mut out = Vec::new();
        exprs(panel, &mut out);
        out
    };
    let by_reason = panels
        .iter()
        .find(|p| queries(p).iter().any(|q| q.contains("sum by (reason)")))
        .expect("a panel of the sheds by reason");
    let description = by_reason["description"].as_str().unwrap();
    for reason in admit::ShedReason::ALL {
        assert!(
            description.contains(&format!("{}:", reason.label())),
            "the by-reason panel does not explain {:?}: {description}",
            reason.label()
        );
    }
    let overloaded = panels
        .iter()
        .find(|p| queries(p).iter().any(|q| q == "${prefix}_overloaded"))
        .expect("a panel of the overloaded gauge");
    assert!(overloaded["description"]
        .as_str()
        .is_some_and(|d| d.contains("overload target")));
}
