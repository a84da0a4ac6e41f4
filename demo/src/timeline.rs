//! The run over time: units in use, requests parked, and admissions and sheds per
//! interval, sampled while the server runs and drawn as an SVG (plotters, SVG
//! backend only: no fonts or system libraries needed).

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

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
}

/// Samples `gate` and `stats` every `interval` until `stop` is set; returns the
/// timeline.
pub async fn record(
    gate: UploadGate,
    stats: Arc<ServerStats>,
    interval: Duration,
    stop: Arc<AtomicBool>,
) -> Timeline {
    let started = tokio::time::Instant::now();
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
    Timeline { interval, samples }
}

impl Timeline {
    /// Draws the timeline as an SVG at `path` (its directory is created): units in
    /// use against the capacity (as sampled: it moves when the gate is resized) and
    /// requests parked on top, admissions and sheds per interval below.
    ///
    /// # Errors
    ///
    /// The directory or the file cannot be written.
    pub fn write_svg(&self, path: &Path) -> Result<(), Box<dyn std::error::Error>> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)?;
        }
        let end = self.samples.last().map_or(1.0, |s| s.at).max(1.0);
        let per = |f: fn(&Sample) -> usize| self.samples.iter().map(f).max().unwrap_or(0);
        let least = |f: fn(&Sample) -> usize| self.samples.iter().map(f).min().unwrap_or(0);
        let capacity = per(|s| s.capacity);
        let capacity_label = match least(|s| s.capacity) {
            low if low == capacity => format!("capacity ({capacity} units)"),
            low => format!("capacity ({low}..{capacity} units)"),
        };
        let top = (capacity.max(per(|s| s.parked)) + 1) as f64;
        let bottom = (per(|s| s.admitted).max(per(|s| s.shed)) + 1) as f64;
        let ms = self.interval.as_millis();

        let root = SVGBackend::new(path, (960, 600)).into_drawing_area();
        root.fill(&WHITE)?;
        let root = root.titled(
            "admit demo: the gate over the run",
            ("sans-serif", 22).into_font(),
        )?;
        let (upper, lower) = root.split_vertically(330);

        let mut chart = ChartBuilder::on(&upper)
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(48)
            .caption("units in use and requests parked", ("sans-serif", 16))
            .build_cartesian_2d(0.0..end, 0.0..top)?;
        chart
            .configure_mesh()
            .x_desc("seconds")
            .y_desc("count")
            .light_line_style(WHITE.mix(0.0))
            .y_label_formatter(&|v| format!("{v:.0}"))
            .x_label_formatter(&|v| format!("{v:.0}"))
            .draw()?;
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
                RGBColor(230, 140, 0).stroke_width(2),
            ))?
            .label("requests parked")
            .legend(|(x, y)| {
                PathElement::new([(x, y), (x + 16, y)], RGBColor(230, 140, 0).stroke_width(2))
            });
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.9))
            .border_style(BLACK.mix(0.3))
            .position(SeriesLabelPosition::UpperRight)
            .draw()?;

        let mut chart = ChartBuilder::on(&lower)
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(48)
            .caption(
                format!("requests admitted and shed per {ms} ms"),
                ("sans-serif", 16),
            )
            .build_cartesian_2d(0.0..end, 0.0..bottom)?;
        chart
            .configure_mesh()
            .x_desc("seconds")
            .y_desc("requests")
            .light_line_style(WHITE.mix(0.0))
            .y_label_formatter(&|v| format!("{v:.0}"))
            .x_label_formatter(&|v| format!("{v:.0}"))
            .draw()?;
        chart
            .draw_series(LineSeries::new(
                self.steps(|s| s.admitted),
                RGBColor(0, 150, 0).stroke_width(2),
            ))?
            .label("admitted")
            .legend(|(x, y)| {
                PathElement::new([(x, y), (x + 16, y)], RGBColor(0, 150, 0).stroke_width(2))
            });
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
        root.present()?;
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
