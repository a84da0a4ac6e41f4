//! A scraped `/metrics` page: the Prometheus text format, read back into values.

use std::collections::BTreeMap;

use admit::{ShedReason, Source};

use crate::server::{Route, METRICS_PREFIX};

/// One scrape of `/metrics`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Scrape {
    /// The page as served.
    pub text: String,
    /// Every sample, keyed by its series as written (`name{labels}`).
    values: BTreeMap<String, f64>,
    /// Every sample, as its name, its labels and its value.
    samples: Vec<(String, Labels, f64)>,
}

/// A sample's labels, as `(key, value)` pairs in the order written.
type Labels = Vec<(String, String)>;

impl Scrape {
    /// Parses a page in the Prometheus text exposition format.
    #[must_use]
    pub fn parse(text: String) -> Self {
        let values: BTreeMap<String, f64> = text
            .lines()
            .filter(|line| !line.starts_with('#'))
            .filter_map(|line| line.rsplit_once(' '))
            .filter_map(|(series, value)| Some((series.to_owned(), value.parse().ok()?)))
            .collect();
        let samples = values
            .iter()
            .map(|(series, &value)| {
                let (name, labels) = split_series(series);
                (name, labels, value)
            })
            .collect();
        Self {
            text,
            values,
            samples,
        }
    }

    /// The sum of the samples of `<prefix>_<suffix>` whose labels include every
    /// one of `labels`; `None` if there is none.
    #[must_use]
    pub fn sum(&self, suffix: &str, labels: &[(&str, &str)]) -> Option<f64> {
        let name = format!("{METRICS_PREFIX}_{suffix}");
        self.samples
            .iter()
            .filter(|(n, have, _)| {
                *n == name
                    && labels
                        .iter()
                        .all(|&(k, v)| have.iter().any(|(hk, hv)| hk == k && hv == v))
            })
            .map(|&(_, _, value)| value)
            .reduce(|a, b| a + b)
    }

    /// The value of a series, written exactly as on the page
    /// (`upload_sessions_units_in_use`, `upload_sessions_shed_total{source="upload",reason="wait_budget"}`).
    #[must_use]
    pub fn get(&self, series: &str) -> Option<f64> {
        self.values.get(series).copied()
    }

    /// `<prefix>_<suffix>`, for a metric without labels.
    #[must_use]
    pub fn metric(&self, suffix: &str) -> Option<f64> {
        self.get(&format!("{METRICS_PREFIX}_{suffix}"))
    }

    /// The sheds of one route, for every reason (`sum by (source)`); `None` if a
    /// reason's series is missing.
    #[must_use]
    pub fn shed_total(&self, route: Route) -> Option<f64> {
        ShedReason::ALL
            .iter()
            .map(|&reason| self.shed_total_for(route, reason))
            .sum()
    }

    /// The shed counter of one route and one reason.
    #[must_use]
    pub fn shed_total_for(&self, route: Route, reason: ShedReason) -> Option<f64> {
        self.sum(
            "shed_total",
            &[("source", route.label()), ("reason", reason.label())],
        )
    }

    /// The sheds for one reason, over every route (`sum by (reason)`); `None` if a
    /// route's series is missing.
    #[must_use]
    pub fn shed_total_by_reason(&self, reason: ShedReason) -> Option<f64> {
        Route::ALL
            .iter()
            .map(|&route| self.shed_total_for(route, reason))
            .sum()
    }

    /// The shed counters of every route and reason, summed; `None` if any is
    /// missing.
    #[must_use]
    pub fn shed_total_sum(&self) -> Option<f64> {
        Route::ALL.iter().map(|&r| self.shed_total(r)).sum()
    }

    /// The gate's lines, histogram buckets left out, sorted (the exporter's order
    /// changes from run to run): what a person looks at first.
    #[must_use]
    pub fn excerpt(&self) -> Vec<&str> {
        let mut lines: Vec<&str> = self
            .text
            .lines()
            .filter(|line| line.starts_with(METRICS_PREFIX) && !line.contains("_bucket{"))
            .collect();
        lines.sort_unstable();
        lines
    }
}

/// `name{k="v",k2="v2"}` as the name and its labels (values unescaped).
fn split_series(series: &str) -> (String, Labels) {
    let Some((name, rest)) = series.split_once('{') else {
        return (series.to_owned(), Vec::new());
    };
    let mut labels = Vec::new();
    let mut chars = rest.chars();
    loop {
        let key: String = chars
            .by_ref()
            .take_while(|&c| c != '=')
            .collect::<String>()
            .trim_start_matches(',')
            .to_owned();
        if key.is_empty() || chars.next() != Some('"') {
            break;
        }
        let mut value = String::new();
        while let Some(c) = chars.next() {
            match c {
                '\\' => value.extend(chars.next()),
                '"' => break,
                c => value.push(c),
            }
        }
        labels.push((key, value));
    }
    (name.to_owned(), labels)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_samples_and_skips_comments() {
        let page = "# TYPE upload_sessions_shed_total counter\n\
                    upload_sessions_shed_total{source=\"upload\",reason=\"wait_budget\"} 3\n\
                    upload_sessions_shed_total{source=\"upload\",reason=\"ceiling\"} 0\n\
                    upload_sessions_shed_total{source=\"upload\",reason=\"no_wait\"} 0\n\
                    upload_sessions_shed_total{source=\"upload\",reason=\"queue_full\"} 1\n\
                    upload_sessions_shed_total{source=\"upload\",reason=\"overload\"} 0\n\
                    upload_sessions_shed_total{source=\"upload\",reason=\"hopeless\"} 5\n\
                    upload_sessions_shed_total{source=\"upload\",reason=\"outranked\"} 0\n\
                    upload_sessions_shed_total{source=\"upload\",reason=\"memory\"} 0\n\
                    upload_sessions_shed_total{reason=\"wait_budget\",source=\"mirror\"} 0\n\
                    upload_sessions_shed_total{source=\"mirror\",reason=\"ceiling\"} 0\n\
                    upload_sessions_shed_total{source=\"mirror\",reason=\"no_wait\"} 0\n\
                    upload_sessions_shed_total{source=\"mirror\",reason=\"queue_full\"} 2\n\
                    upload_sessions_shed_total{source=\"mirror\",reason=\"overload\"} 1\n\
                    upload_sessions_shed_total{source=\"mirror\",reason=\"hopeless\"} 0\n\
                    upload_sessions_shed_total{source=\"mirror\",reason=\"outranked\"} 0\n\
                    upload_sessions_shed_total{source=\"mirror\",reason=\"memory\"} 0\n\
                    upload_sessions_shed_total{source=\"session\",reason=\"wait_budget\"} 1\n\
                    upload_sessions_shed_total{source=\"session\",reason=\"ceiling\"} 0\n\
                    upload_sessions_shed_total{source=\"session\",reason=\"no_wait\"} 0\n\
                    upload_sessions_shed_total{source=\"session\",reason=\"queue_full\"} 0\n\
                    upload_sessions_shed_total{source=\"session\",reason=\"overload\"} 0\n\
                    upload_sessions_shed_total{source=\"session\",reason=\"hopeless\"} 0\n\
                    upload_sessions_shed_total{source=\"session\",reason=\"outranked\"} 0\n\
                    upload_sessions_shed_total{source=\"session\",reason=\"memory\"} 0\n\
                    upload_sessions_units_in_use 2\n\
                    upload_sessions_hold_seconds_bucket{le=\"+Inf\"} 5\n";
        let s = Scrape::parse(page.to_owned());
        assert_eq!(s.shed_total(Route::Upload), Some(9.0));
        assert_eq!(s.shed_total(Route::Mirror), Some(3.0));
        assert_eq!(
            s.shed_total_for(Route::Mirror, ShedReason::QueueFull),
            Some(2.0)
        );
        assert_eq!(s.shed_total_by_reason(ShedReason::QueueFull), Some(3.0));
        assert_eq!(s.shed_total_by_reason(ShedReason::WaitBudget), Some(4.0));
        assert_eq!(s.shed_total_by_reason(ShedReason::Overload), Some(1.0));
        assert_eq!(s.shed_total_by_reason(ShedReason::Hopeless), Some(5.0));
        assert_eq!(s.shed_total(Route::Session), Some(1.0));
        assert_eq!(s.shed_total_sum(), Some(13.0));
        assert_eq!(s.metric("units_in_use"), Some(2.0));
        assert_eq!(s.excerpt().len(), 25);
        let only_upload = Scrape::parse(
            "upload_sessions_shed_total{source=\"upload\",reason=\"wait_budget\"} 3\n".into(),
        );
        assert_eq!(
            only_upload.shed_total(Route::Upload),
            None,
            "a reason missing"
        );
    }
}
