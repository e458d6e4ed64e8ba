//! PNG line plots for the markdown report.

use std::path::Path;

use plotters::prelude::*;

/// One named line.
#[derive(Debug, Clone)]
pub struct Series {
    /// Legend label, usually the system name.
    pub name: String,
    /// Points (x, y).
    pub points: Vec<(f64, f64)>,
}

/// A line plot of several series over a shared x axis.
#[derive(Debug, Clone)]
pub struct Plot {
    /// Title, also the report section heading.
    pub title: String,
    /// X axis label with unit.
    pub x_label: String,
    /// Y axis label with unit.
    pub y_label: String,
    /// Logarithmic x axis.
    pub log_x: bool,
    /// Logarithmic y axis.
    pub log_y: bool,
    /// The lines.
    pub series: Vec<Series>,
}

impl Plot {
    /// A plot with linear axes and no series yet.
    pub fn new(title: &str, x_label: &str, y_label: &str) -> Self {
        Plot {
            title: title.into(),
            x_label: x_label.into(),
            y_label: y_label.into(),
            log_x: false,
            log_y: false,
            series: Vec::new(),
        }
    }

    /// Adds a series.
    pub fn series(mut self, name: &str, points: Vec<(f64, f64)>) -> Self {
        self.series.push(Series { name: name.into(), points });
        self
    }

    /// Renders to a PNG file.
    pub fn render(&self, path: &Path) -> crate::Result<()> {
        let pts = self.series.iter().flat_map(|s| s.points.iter().copied());
        let (mut x0, mut x1, mut y0, mut y1) = (f64::MAX, f64::MIN, f64::MAX, f64::MIN);
        for (x, y) in pts {
            x0 = x0.min(x);
            x1 = x1.max(x);
            y0 = y0.min(y);
            y1 = y1.max(y);
        }
        if x0 > x1 {
            (x0, x1, y0, y1) = (0.0, 1.0, 0.0, 1.0);
        }
        if x1 <= x0 {
            x1 = x0 + 1.0;
        }
        if y1 <= y0 {
            y1 = y0 + 1.0;
        }
        // A log axis gets ticks only at powers of ten: one spanning less than a decade would have no labels.
        if self.log_x {
            (x0, x1) = whole_decades(x0, x1);
        }
        if self.log_y {
            (y0, y1) = whole_decades(y0, y1);
        } else {
            y0 = y0.min(0.0);
        }
        let root = BitMapBackend::new(path, (900, 560)).into_drawing_area();
        root.fill(&WHITE)?;
        let mut builder = ChartBuilder::on(&root);
        builder
            .caption(&self.title, ("sans-serif", 22))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(70);
        macro_rules! draw {
            ($chart:expr) => {{
                let mut chart = $chart;
                chart
                    .configure_mesh()
                    .x_desc(&self.x_label)
                    .y_desc(&self.y_label)
                    .x_label_formatter(&|v| axis_label(*v))
                    .y_label_formatter(&|v| axis_label(*v))
                    .draw()?;
                for (i, s) in self.series.iter().enumerate() {
                    let color = Palette99::pick(i).to_rgba();
                    chart
                        .draw_series(LineSeries::new(s.points.iter().copied(), color.stroke_width(2)))?
                        .label(s.name.clone())
                        .legend(move |(x, y)| {
                            PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2))
                        });
                    chart.draw_series(s.points.iter().map(|&p| Circle::new(p, 3, color.filled())))?;
                }
                chart
                    .configure_series_labels()
                    .background_style(WHITE.mix(0.8))
                    .border_style(BLACK)
                    .draw()?;
            }};
        }
        match (self.log_x, self.log_y) {
            (false, false) => draw!(builder.build_cartesian_2d(x0..x1 * 1.02, y0..y1 * 1.05)?),
            (true, false) => draw!(builder.build_cartesian_2d((x0..x1).log_scale(), y0..y1 * 1.05)?),
            (false, true) => draw!(builder.build_cartesian_2d(x0..x1 * 1.02, (y0..y1).log_scale())?),
            (true, true) => draw!(builder.build_cartesian_2d((x0..x1).log_scale(), (y0..y1).log_scale())?),
        }
        root.present()?;
        Ok(())
    }
}

/// `[lo, hi]` widened to powers of ten (positive, at least one decade apart).
fn whole_decades(lo: f64, hi: f64) -> (f64, f64) {
    let lo = lo.max(f64::MIN_POSITIVE);
    let a = lo.log10().floor();
    let b = hi.max(lo).log10().ceil().max(a + 1.0);
    (10f64.powf(a), 10f64.powf(b))
}

/// Axis tick text: at most four significant digits, engineering suffixes for large values.
fn axis_label(v: f64) -> String {
    let a = v.abs();
    let (scaled, suffix) = if a >= 1e12 {
        (v / 1e12, "T")
    } else if a >= 1e9 {
        (v / 1e9, "G")
    } else if a >= 1e6 {
        (v / 1e6, "M")
    } else if a >= 1e4 {
        (v / 1e3, "k")
    } else {
        (v, "")
    };
    let text = format!("{scaled:.4}");
    let text =
        if text.contains('.') { text.trim_end_matches('0').trim_end_matches('.').to_string() } else { text };
    format!("{text}{suffix}")
}

#[cfg(test)]
mod tests {
    use super::{axis_label, whole_decades};

    #[test]
    fn axis_labels_are_short() {
        assert_eq!(axis_label(0.6000000000001), "0.6");
        assert_eq!(axis_label(1_048_576.0), "1.0486M");
        assert_eq!(axis_label(250.0), "250");
        assert_eq!(axis_label(0.0), "0");
    }

    /// Regression: a log axis from 400k to 1.2M had no tick labels at all.
    #[test]
    fn log_axes_span_whole_decades() {
        assert_eq!(whole_decades(400_000.0, 1_200_000.0), (100_000.0, 10_000_000.0));
        assert_eq!(whole_decades(2.0, 3.0), (1.0, 10.0));
        assert_eq!(whole_decades(10.0, 10.0), (10.0, 100.0));
        let (lo, hi) = whole_decades(0.0, 5.0);
        assert!(lo > 0.0 && hi == 10.0);
    }
}
