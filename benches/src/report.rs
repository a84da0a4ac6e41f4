//! Medians, min/max and ratios, printed as Markdown tables.

use std::fmt::Write as _;

use crate::scenario::Cell;

/// One metric (a table row) measured for every column.
#[derive(Debug, Clone)]
pub struct Row {
    /// What was measured.
    pub label: &'static str,
    /// Its unit.
    pub unit: &'static str,
    /// Per column: its name, its baseline column's name, and its samples.
    pub columns: Vec<(&'static str, &'static str, Vec<Cell>)>,
}

/// Summary statistics of one row × column.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Stats {
    /// The peer lacks what the scenario needs.
    NotApplicable,
    /// Median (with starved samples counted as infinitely long), min and max of
    /// the completed samples, starved samples, all samples.
    Measured {
        /// Median over all samples; `f64::INFINITY` if most were starved.
        median: f64,
        /// Smallest completed sample (`f64::INFINITY` if none completed).
        min: f64,
        /// Largest completed sample (`f64::INFINITY` if none completed).
        max: f64,
        /// Samples that hit the starvation cap.
        starved: usize,
        /// Samples in all.
        samples: usize,
    },
}

impl Stats {
    /// Summarises `cells`.
    #[must_use]
    pub fn of(cells: &[Cell]) -> Self {
        if cells.is_empty() || cells.contains(&Cell::NotApplicable) {
            return Self::NotApplicable;
        }
        let mut all: Vec<f64> = cells
            .iter()
            .map(|c| match c {
                Cell::Value(v) => *v,
                _ => f64::INFINITY,
            })
            .collect();
        all.sort_by(f64::total_cmp);
        let n = all.len();
        let median = if n % 2 == 1 {
            all[n / 2]
        } else {
            (all[n / 2 - 1] + all[n / 2]) / 2.0
        };
        let done: Vec<f64> = all.iter().copied().filter(|v| v.is_finite()).collect();
        Self::Measured {
            median,
            min: done.first().copied().unwrap_or(f64::INFINITY),
            max: done.last().copied().unwrap_or(f64::INFINITY),
            starved: n - done.len(),
            samples: n,
        }
    }

    /// The median, if measured.
    #[must_use]
    pub fn median(self) -> Option<f64> {
        match self {
            Self::Measured { median, .. } => Some(median),
            Self::NotApplicable => None,
        }
    }
}

/// A number with as many decimals as its size deserves.
#[must_use]
pub fn num(v: f64) -> String {
    if v.is_infinite() {
        "starved".to_owned()
    } else if v >= 100.0 {
        format!("{v:.0}")
    } else if v >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

/// `peer / baseline`, the way the tables show it.
#[must_use]
pub fn ratio(peer: Option<f64>, baseline: Option<f64>) -> String {
    match (peer, baseline) {
        (Some(p), Some(b)) if p.is_finite() && b.is_finite() && b > 0.0 => {
            format!("{:.2}×", p / b)
        }
        (Some(p), Some(b)) if p.is_infinite() && b.is_finite() => "∞".to_owned(),
        _ => "–".to_owned(),
    }
}

fn stats_of(row: &Row, column: &str) -> Option<f64> {
    row.columns
        .iter()
        .find(|(name, _, _)| *name == column)
        .and_then(|(_, _, cells)| Stats::of(cells).median())
}

/// The summary: one line per metric, one column per peer, each cell
/// `median (peer/baseline)`.
#[must_use]
pub fn summary(rows: &[Row]) -> String {
    let Some(first) = rows.first() else {
        return String::new();
    };
    let mut out = String::from("| metric | unit |");
    for (name, _, _) in &first.columns {
        let _ = write!(out, " {name} |");
    }
    out.push_str("\n|---|---|");
    for _ in &first.columns {
        out.push_str("---:|");
    }
    out.push('\n');
    for row in rows {
        let _ = write!(out, "| {} | {} |", row.label, row.unit);
        for (name, baseline, cells) in &row.columns {
            let stats = Stats::of(cells);
            let cell = match stats {
                Stats::NotApplicable => "n/a".to_owned(),
                Stats::Measured { median, .. } if name == baseline => num(median),
                Stats::Measured { median, .. } => format!(
                    "{} ({})",
                    num(median),
                    ratio(Some(median), stats_of(row, baseline))
                ),
            };
            let _ = write!(out, " {cell} |");
        }
        out.push('\n');
    }
    out
}

/// The detail: one line per metric × peer, with min, max, the ratio to the
/// baseline and, where a cap applies, the starved count.
#[must_use]
pub fn detail(rows: &[Row]) -> String {
    let mut out = String::from(
        "| metric | peer | median | min | max | ratio to baseline | starved |\n\
         |---|---|---:|---:|---:|---:|---:|\n",
    );
    for row in rows {
        for (name, baseline, cells) in &row.columns {
            let line = match Stats::of(cells) {
                Stats::NotApplicable => format!("| {} | {name} | n/a | | | | |", row.label),
                Stats::Measured {
                    median,
                    min,
                    max,
                    starved,
                    samples,
                } => format!(
                    "| {} | {name} | {} {} | {} | {} | {} vs {baseline} | {} |",
                    row.label,
                    num(median),
                    row.unit,
                    num(min),
                    num(max),
                    ratio(Some(median), stats_of(row, baseline)),
                    if starved == 0 {
                        String::new()
                    } else {
                        format!("{starved}/{samples}")
                    },
                ),
            };
            out.push_str(&line);
            out.push('\n');
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_counts_starved_samples_as_longest() {
        let s = Stats::of(&[Cell::Value(3.0), Cell::Starved, Cell::Value(1.0)]);
        assert_eq!(
            s,
            Stats::Measured {
                median: 3.0,
                min: 1.0,
                max: 3.0,
                starved: 1,
                samples: 3
            }
        );
        assert_eq!(Stats::of(&[Cell::NotApplicable]), Stats::NotApplicable);
        assert_eq!(ratio(Some(3.0), Some(2.0)), "1.50×");
    }
}
