//! A scraped `/metrics` page: the Prometheus text format, read back into values.

use std::collections::BTreeMap;

use admit::Source;

use crate::server::{Route, METRICS_PREFIX};

/// One scrape of `/metrics`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Scrape {
    /// The page as served.
    pub text: String,
    /// Every sample, keyed by its series as written (`name{labels}`).
    values: BTreeMap<String, f64>,
}

impl Scrape {
    /// Parses a page in the Prometheus text exposition format.
    #[must_use]
    pub fn parse(text: String) -> Self {
        let values = text
            .lines()
            .filter(|line| !line.starts_with('#'))
            .filter_map(|line| line.rsplit_once(' '))
            .filter_map(|(series, value)| Some((series.to_owned(), value.parse().ok()?)))
            .collect();
        Self { text, values }
    }

    /// The value of a series, written exactly as on the page
    /// (`upload_sessions_shed_total{source="upload"}`).
    #[must_use]
    pub fn get(&self, series: &str) -> Option<f64> {
        self.values.get(series).copied()
    }

    /// `<prefix>_<suffix>`, for a metric without labels.
    #[must_use]
    pub fn metric(&self, suffix: &str) -> Option<f64> {
        self.get(&format!("{METRICS_PREFIX}_{suffix}"))
    }

    /// The shed counter of one route.
    #[must_use]
    pub fn shed_total(&self, route: Route) -> Option<f64> {
        self.get(&shed_series(route))
    }

    /// The shed counters of every route, summed; `None` if any is missing.
    #[must_use]
    pub fn shed_total_sum(&self) -> Option<f64> {
        Route::ALL.iter().map(|&r| self.shed_total(r)).sum()
    }

    /// The gate's lines, histogram buckets left out: what a person looks at first.
    #[must_use]
    pub fn excerpt(&self) -> Vec<&str> {
        self.text
            .lines()
            .filter(|line| line.starts_with(METRICS_PREFIX) && !line.contains("_bucket{"))
            .collect()
    }
}

/// The series name of a route's shed counter.
#[must_use]
pub fn shed_series(route: Route) -> String {
    format!(
        "{METRICS_PREFIX}_shed_total{{source=\"{}\"}}",
        route.label()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_samples_and_skips_comments() {
        let page = "# TYPE upload_sessions_shed_total counter\n\
                    upload_sessions_shed_total{source=\"upload\"} 3\n\
                    upload_sessions_shed_total{source=\"mirror\"} 0\n\
                    upload_sessions_units_in_use 2\n\
                    upload_sessions_hold_seconds_bucket{le=\"+Inf\"} 5\n";
        let s = Scrape::parse(page.to_owned());
        assert_eq!(s.shed_total(Route::Upload), Some(3.0));
        assert_eq!(s.shed_total_sum(), Some(3.0));
        assert_eq!(s.metric("units_in_use"), Some(2.0));
        assert_eq!(s.excerpt().len(), 3);
    }
}
