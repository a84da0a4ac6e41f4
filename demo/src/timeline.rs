//! The run over time: units in use, requests parked, and admissions and sheds per
//! interval, sampled while the server runs, with the spans the gate was overloaded;
//! drawn as an SVG (plotters, SVG backend only: no fonts or system libraries
//! needed), one panel per run, side by side on the same scales.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use plotters::coord::Shift;
use plotters::prelude::*;

use crate::server::{ServerStats, UploadGate};

/// One sample: the state at `at`, and the counts since the previous sample.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sample {
    /// Seconds since the start of the run.
    pub at: f64,
    /// Units held.
    pub in_use: usize,
    /// The gate's capacity in force.
    pub capacity: usize,
    /// Requests parked.
    pub parked: usize,
    /// Requests admitted during the interval.
    pub admitted: usize,
    /// Requests shed during the interval.
    pub shed: usize,
}

/// Samples taken every `interval`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Timeline {
    /// The sampling interval.
    pub interval: Duration,
    /// The samples, in time order.
    pub samples: Vec<Sample>,
    /// The spans, in seconds since the start, during which the gate was
    /// overloaded (its `on_overload` events; none without an overload target).
    pub overloaded: Vec<(f64, f64)>,
}

/// Samples `gate` and `stats` every `interval` until `stop` is set; returns the
/// timeline.
pub async fn record(
    gate: UploadGate,
    stats: Arc<ServerStats>,
    interval: Duration,
    stop: Arc<AtomicBool>,
) -> Timeline {
    let started = Instant::now();
    let mut tick = tokio::time::interval(interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let (mut admitted, mut shed) = (0, 0);
    let mut samples = Vec::new();
    loop {
        tick.tick().await;
        let now_admitted = stats.admitted.load(Ordering::Relaxed);
        let now_shed = stats.busy_total();
        samples.push(Sample {
            at: started.elapsed().as_secs_f64(),
            in_use: gate.in_use(),
            capacity: gate.capacity(),
            parked: gate.waiters(),
            admitted: now_admitted - admitted,
            shed: now_shed - shed,
        });
        (admitted, shed) = (now_admitted, now_shed);
        if stop.load(Ordering::Relaxed) {
            break;
        }
    }
    let end = started.elapsed().as_secs_f64();
    let changes = stats.overload_changes();
    let overloaded = spans(
        changes
            .iter()
            .map(|&(at, on)| (at.saturating_duration_since(started).as_secs_f64(), on)),
        end,
    );
    Timeline {
        interval,
        samples,
        overloaded,
    }
}

/// The spans between each change to `true` and the next change to `false` (or
/// `end`).
fn spans(changes: impl IntoIterator<Item = (f64, bool)>, end: f64) -> Vec<(f64, f64)> {
    let mut spans = Vec::new();
    let mut since = None;
    for (at, on) in changes {
        match (on, since) {
            (true, None) => since = Some(at),
            (false, Some(from)) => {
                spans.push((from, at));
                since = None;
            }
            _ => {}
        }
    }
    if let Some(from) = since {
        spans.push((from, end.max(from)));
    }
    spans
}

/// The axes every panel shares, so two runs read on the same scales.
#[derive(Debug, Clone, Copy)]
struct Scales {
    end: f64,
    top: f64,
    bottom: f64,
}

const OVERLOADED: RGBColor = RGBColor(200, 60, 200);
const PARKED: RGBColor = RGBColor(230, 140, 0);
const ADMITTED: RGBColor = RGBColor(0, 150, 0);

impl Timeline {
    /// Draws this timeline alone as an SVG at `path`, under `title`. See
    /// [`write_svg`].
    ///
    /// # Errors
    ///
    /// The directory or the file cannot be written.
    pub fn write_svg(&self, path: &Path, title: &str) -> Result<(), Box<dyn std::error::Error>> {
        write_svg(path, &[(title, self)])
    }

    fn most(&self, f: fn(&Sample) -> usize) -> usize {
        self.samples.iter().map(f).max().unwrap_or(0)
    }

    fn least(&self, f: fn(&Sample) -> usize) -> usize {
        self.samples.iter().map(f).min().unwrap_or(0)
    }

    /// Draws the panel of one run on `area`.
    fn draw(
        &self,
        area: &DrawingArea<SVGBackend<'_>, Shift>,
        title: &str,
        scales: Scales,
    ) -> Result<(), Box<dyn std::error::Error>> {
        let capacity = self.most(|s| s.capacity);
        let capacity_label = match self.least(|s| s.capacity) {
            low if low == capacity => format!("capacity ({capacity} units)"),
            low => format!("capacity ({low}..{capacity} units)"),
        };
        let ms = self.interval.as_millis();
        let area = area.titled(title, ("sans-serif", 18).into_font())?;
        let (upper, lower) = area.split_vertically(300);

        let mut chart = ChartBuilder::on(&upper)
            .margin(10)
            .x_label_area_size(36)
            .y_label_area_size(44)
            .caption("units in use and requests parked", ("sans-serif", 14))
            .build_cartesian_2d(0.0..scales.end, 0.0..scales.top)?;
        chart
            .configure_mesh()
            .x_desc("seconds")
            .y_desc("count")
            .light_line_style(WHITE.mix(0.0))
            .y_label_formatter(&|v| format!("{v:.0}"))
            .x_label_formatter(&|v| format!("{v:.0}"))
            .draw()?;
        let band = |top: f64| {
            self.overloaded.iter().map(move |&(from, to)| {
                Rectangle::new([(from, 0.0), (to, top)], OVERLOADED.mix(0.15).filled())
            })
        };
        if !self.overloaded.is_empty() {
            chart
                .draw_series(band(scales.top))?
                .label("overloaded (the overload rule held)")
                .legend(|(x, y)| {
                    Rectangle::new([(x, y - 5), (x + 16, y + 5)], OVERLOADED.mix(0.3).filled())
                });
        }
        chart
            .draw_series(LineSeries::new(
                self.steps(|s| s.capacity),
                BLACK.mix(0.5).stroke_width(1),
            ))?
            .label(capacity_label)
            .legend(|(x, y)| PathElement::new([(x, y), (x + 16, y)], BLACK.mix(0.5)));
        chart
            .draw_series(LineSeries::new(
                self.steps(|s| s.in_use),
                BLUE.stroke_width(2),
            ))?
            .label("units in use")
            .legend(|(x, y)| PathElement::new([(x, y), (x + 16, y)], BLUE.stroke_width(2)));
        chart
            .draw_series(LineSeries::new(
                self.steps(|s| s.parked),
                PARKED.stroke_width(2),
            ))?
            .label("requests parked")
            .legend(|(x, y)| PathElement::new([(x, y), (x + 16, y)], PARKED.stroke_width(2)));
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.9))
            .border_style(BLACK.mix(0.3))
            .position(SeriesLabelPosition::UpperRight)
            .draw()?;

        let mut chart = ChartBuilder::on(&lower)
            .margin(10)
            .x_label_area_size(36)
            .y_label_area_size(44)
            .caption(
                format!("requests admitted and shed per {ms} ms"),
                ("sans-serif", 14),
            )
            .build_cartesian_2d(0.0..scales.end, 0.0..scales.bottom)?;
        chart
            .configure_mesh()
            .x_desc("seconds")
            .y_desc("requests")
            .light_line_style(WHITE.mix(0.0))
            .y_label_formatter(&|v| format!("{v:.0}"))
            .x_label_formatter(&|v| format!("{v:.0}"))
            .draw()?;
        chart.draw_series(band(scales.bottom))?;
        chart
            .draw_series(LineSeries::new(
                self.steps(|s| s.admitted),
                ADMITTED.stroke_width(2),
            ))?
            .label("admitted")
            .legend(|(x, y)| PathElement::new([(x, y), (x + 16, y)], ADMITTED.stroke_width(2)));
        chart
            .draw_series(LineSeries::new(self.steps(|s| s.shed), RED.stroke_width(2)))?
            .label("shed (503 + Retry-After)")
            .legend(|(x, y)| PathElement::new([(x, y), (x + 16, y)], RED.stroke_width(2)));
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.9))
            .border_style(BLACK.mix(0.3))
            .position(SeriesLabelPosition::UpperRight)
            .draw()?;
        Ok(())
    }

    /// A step line through the samples: each value holds until the next sample.
    fn steps(&self, value: fn(&Sample) -> usize) -> Vec<(f64, f64)> {
        let mut points = Vec::with_capacity(self.samples.len() * 2);
        let mut previous_at = 0.0;
        for s in &self.samples {
            let v = value(s) as f64;
            points.push((previous_at, v));
            points.push((s.at, v));
            previous_at = s.at;
        }
        points
    }
}

/// Draws `runs` as an SVG at `path` (its directory is created), one panel per run
/// side by side under its title, every panel on the same scales: units in use
/// against the capacity (as sampled: it moves when the gate is resized) and
/// requests parked on top, admissions and sheds per interval below, the spans the
/// gate was overloaded shaded in both.
///
/// # Errors
///
/// The directory or the file cannot be written.
pub fn write_svg(
    path: &Path,
    runs: &[(&str, &Timeline)],
) -> Result<(), Box<dyn std::error::Error>> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    let most = |f: fn(&Timeline) -> f64| runs.iter().map(|(_, t)| f(t)).fold(0.0, f64::max);
    let scales = Scales {
        end: most(|t| t.samples.last().map_or(1.0, |s| s.at)).max(1.0),
        top: most(|t| (t.most(|s| s.capacity).max(t.most(|s| s.parked)) + 1) as f64),
        bottom: most(|t| (t.most(|s| s.admitted).max(t.most(|s| s.shed)) + 1) as f64),
    };
    let panels = u32::try_from(runs.len().max(1)).unwrap_or(1);
    let root = SVGBackend::new(path, (720 * panels, 600)).into_drawing_area();
    root.fill(&WHITE)?;
    let root = root.titled(
        "admit demo: the gate over the run",
        ("sans-serif", 22).into_font(),
    )?;
    for (area, (title, timeline)) in root.split_evenly((1, runs.len().max(1))).iter().zip(runs) {
        timeline.draw(area, title, scales)?;
    }
    root.present()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overload_changes_become_spans() {
        let changes = [
            (1.0, true),
            (1.5, true),
            (2.0, false),
            (2.5, false),
            (3.0, true),
        ];
        assert_eq!(spans(changes, 4.0), [(1.0, 2.0), (3.0, 4.0)]);
        assert_eq!(spans([(0.5, false)], 4.0), []);
    }
}
