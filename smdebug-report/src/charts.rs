//! Inline-SVG charts drawn with `plotters` (SVG backend only, into a `String`).
//!
//! plotters is built without its font features: no font file and no system font is read,
//! text is written as SVG `<text>` in the browser's `sans-serif` and plotters lays it out with
//! its built-in size estimate. Every chart is drawn in memory; a drawing error becomes an
//! `Err(message)` that the report shows in place of the chart, never a panic.
//!
//! Colours come from [`PALETTE`] only (neither black nor white), which the page's self-check
//! uses to tell data marks from axes, grid and background.

use plotters::coord::Shift;
use plotters::prelude::*;

use crate::stats::{Bucket, Summary, buckets, reslice};
use smdebug_analysis::time::clock;

/// Chart size in pixels.
pub(crate) const WIDTH: u32 = 820;
/// Chart height in pixels.
pub(crate) const HEIGHT: u32 = 320;
/// Time slices per long line series (each drawn as its mean, with a min–max band).
const LINE_BUCKETS: usize = 400;

/// Data colours: the Okabe–Ito palette, readable by colour-blind readers, then a few more.
pub(crate) const PALETTE: [RGBColor; 10] = [
    RGBColor(0, 114, 178),
    RGBColor(230, 159, 0),
    RGBColor(0, 158, 115),
    RGBColor(213, 94, 0),
    RGBColor(204, 121, 167),
    RGBColor(86, 180, 233),
    RGBColor(170, 150, 0),
    RGBColor(120, 94, 240),
    RGBColor(130, 130, 130),
    RGBColor(160, 30, 60),
];

fn color(index: usize) -> RGBColor {
    PALETTE[index % PALETTE.len()]
}

const FONT: &str = "sans-serif";

type DrawResult<T> = Result<T, String>;

fn err<E: std::fmt::Debug>(e: E) -> String {
    format!("{e:?}")
}

/// How to label the x axis.
#[derive(Clone, Copy, Debug)]
pub(crate) enum XAxis {
    /// Seconds since the job started, shown as `m:ss` or `h:mm:ss`.
    Elapsed,
    /// Plain numbers (steps).
    Plain,
}

/// One named series of `(x, y)` points, ordered by x.
pub(crate) struct Series {
    pub label: String,
    pub points: Vec<(f64, f64)>,
}

/// One named line of time slices (each its mean, lowest and highest value), ordered by x.
pub(crate) struct Curve {
    pub label: String,
    pub slices: Vec<Bucket>,
}

impl Curve {
    /// A curve through `points` (ordered by x), cut into [`LINE_BUCKETS`] slices when longer.
    pub(crate) fn of_points(label: impl Into<String>, points: &[(f64, f64)]) -> Curve {
        Curve {
            label: label.into(),
            slices: buckets(points, LINE_BUCKETS),
        }
    }
}

fn short_number(v: f64) -> String {
    let a = v.abs();
    if a >= 1e9 {
        format!("{:.1}G", v / 1e9)
    } else if a >= 1e6 {
        format!("{:.1}M", v / 1e6)
    } else if a >= 1e4 {
        format!("{:.0}k", v / 1e3)
    } else if a >= 100.0 || v == v.round() {
        format!("{v:.0}")
    } else if a >= 1.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.3}")
    }
}

/// Decimals for tick labels in seconds on an axis spanning `span` seconds: enough to tell apart
/// plotters' ticks (about a tenth of the span apart), at most milliseconds.
fn seconds_decimals(span: f64) -> usize {
    if !(span.is_finite() && span > 0.0) {
        return 1;
    }
    (-(span / 10.0).log10()).ceil().clamp(0.0, 3.0) as usize
}

/// A non-empty range around `[lo, hi]`.
fn padded(lo: f64, hi: f64) -> (f64, f64) {
    if !(lo.is_finite() && hi.is_finite()) {
        return (0.0, 1.0);
    }
    if hi > lo {
        (lo, hi)
    } else {
        let pad = if lo == 0.0 { 1.0 } else { lo.abs() * 0.05 };
        (lo - pad, hi + pad)
    }
}

fn with_svg(
    draw: impl FnOnce(&DrawingArea<SVGBackend<'_>, Shift>) -> DrawResult<()>,
) -> DrawResult<String> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, HEIGHT)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        draw(&root)?;
        root.present().map_err(err)?;
    }
    Ok(svg)
}

/// Width of the legend column beside line charts and multi-series histograms, pixels.
const LEGEND_WIDTH: u32 = 200;

/// A legend in its own column (never over the data): a swatch and the label per series.
fn side_legend(area: &DrawingArea<SVGBackend<'_>, Shift>, labels: &[&str]) -> DrawResult<()> {
    for (i, label) in labels.iter().enumerate() {
        let c = color(i);
        let y = 44 + i as i32 * 24;
        area.draw(&Rectangle::new([(6, y), (22, y + 12)], c.filled()))
            .map_err(err)?;
        let text: String = if label.chars().count() > 22 {
            label.chars().take(21).chain(['…']).collect()
        } else {
            (*label).to_owned()
        };
        area.draw(&Text::new(text, (28, y - 1), (FONT, 15).into_font()))
            .map_err(err)?;
    }
    Ok(())
}

/// A line chart with one line per series and a legend beside it. A series longer than 400
/// points is cut into 400 equal time slices: the line follows each slice's mean and a light
/// band of the series' colour spans its lowest to highest value. `y_range` fixes the y axis
/// (e.g. 0–100 for percentages; data above it widens it); otherwise it spans the data.
pub(crate) fn line_chart(
    title: &str,
    x_axis: XAxis,
    y_desc: &str,
    series: &[Curve],
    y_range: Option<(f64, f64)>,
) -> DrawResult<String> {
    marked_line_chart(title, x_axis, y_desc, series, y_range, None)
}

/// A [`line_chart`] with `marks` drawn as circles over the lines, one per point, never reduced
/// (the points a rule judged: bottleneck snapshots, outlier steps), named in the legend.
pub(crate) fn marked_line_chart(
    title: &str,
    x_axis: XAxis,
    y_desc: &str,
    series: &[Curve],
    y_range: Option<(f64, f64)>,
    marks: Option<&Series>,
) -> DrawResult<String> {
    let marks = marks.filter(|m| !m.points.is_empty());
    let mark_points: Vec<(f64, f64)> = marks.map_or_else(Vec::new, |m| {
        m.points
            .iter()
            .copied()
            .filter(|(x, y)| x.is_finite() && y.is_finite())
            .collect()
    });
    let reduced: Vec<(&str, Vec<Bucket>)> = series
        .iter()
        .map(|s| (s.label.as_str(), reslice(&s.slices, LINE_BUCKETS)))
        .filter(|(_, b)| !b.is_empty())
        .collect();
    if reduced.is_empty() {
        return Err("no finite values to draw".to_owned());
    }
    let ((x_lo, x_hi), (y_lo, y_hi)) = line_extent(&reduced, &mark_points, y_range);
    with_svg(|root| {
        let (plot, legend) = root.split_horizontally(WIDTH - LEGEND_WIDTH);
        let mut chart = ChartBuilder::on(&plot)
            .caption(title, (FONT, 20))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(64)
            .build_cartesian_2d(x_lo..x_hi, y_lo..y_hi)
            .map_err(err)?;
        let x_desc = match x_axis {
            XAxis::Elapsed => "time since job start",
            XAxis::Plain => "step",
        };
        // Runs shorter than two minutes get seconds, with as many decimals as the tick spacing
        // needs to keep labels apart; longer ones a clock.
        let span = x_hi - x_lo;
        let short_run = span < 120.0;
        let decimals = seconds_decimals(span);
        let x_format = |x: &f64| match x_axis {
            XAxis::Elapsed if short_run => format!("{x:.decimals$} s"),
            XAxis::Elapsed => clock(*x),
            XAxis::Plain => short_number(*x),
        };
        chart
            .configure_mesh()
            .x_desc(x_desc)
            .y_desc(y_desc)
            .x_label_formatter(&x_format)
            .y_label_formatter(&|y| short_number(*y))
            .label_style((FONT, 14))
            .light_line_style(RGBColor(238, 238, 238))
            .draw()
            .map_err(err)?;
        for (i, (_, b)) in reduced.iter().enumerate() {
            let c = color(i);
            if b.iter().any(|k| k.hi > k.lo) {
                let mut outline: Vec<(f64, f64)> = b.iter().map(|k| (k.x, k.hi)).collect();
                outline.extend(b.iter().rev().map(|k| (k.x, k.lo)));
                chart
                    .draw_series(std::iter::once(Polygon::new(outline, c.mix(0.2).filled())))
                    .map_err(err)?;
            }
        }
        for (i, (_, b)) in reduced.iter().enumerate() {
            let line = b.iter().map(|k| (k.x, k.mean));
            chart
                .draw_series(LineSeries::new(line, color(i).stroke_width(2)))
                .map_err(err)?;
        }
        let mut labels: Vec<&str> = reduced.iter().map(|r| r.0).collect();
        if let Some(m) = marks {
            let c = color(labels.len());
            chart
                .draw_series(
                    mark_points
                        .iter()
                        .map(|&p| Circle::new(p, 4, c.stroke_width(2))),
                )
                .map_err(err)?;
            labels.push(&m.label);
        }
        side_legend(&legend, &labels)
    })
}

/// The axes' ranges of a [`marked_line_chart`]: the buckets' and the marks' extent, padded; the
/// y axis `y_range` when given (widened by data beyond it), else the data with a 5 % margin.
fn line_extent(
    reduced: &[(&str, Vec<Bucket>)],
    mark_points: &[(f64, f64)],
    y_range: Option<(f64, f64)>,
) -> ((f64, f64), (f64, f64)) {
    let all = || reduced.iter().flat_map(|(_, b)| b.iter());
    let marked = || mark_points.iter();
    let (x_lo, x_hi) = padded(
        all()
            .map(|b| b.x)
            .chain(marked().map(|m| m.0))
            .fold(f64::INFINITY, f64::min),
        all()
            .map(|b| b.x)
            .chain(marked().map(|m| m.0))
            .fold(f64::NEG_INFINITY, f64::max),
    );
    let data_lo = all()
        .map(|b| b.lo)
        .chain(marked().map(|m| m.1))
        .fold(f64::INFINITY, f64::min);
    let data_hi = all()
        .map(|b| b.hi)
        .chain(marked().map(|m| m.1))
        .fold(f64::NEG_INFINITY, f64::max);
    let (y_lo, y_hi) = match y_range {
        Some((lo, hi)) => padded(lo.min(data_lo), hi.max(data_hi)),
        None => {
            let (lo, hi) = padded(data_lo, data_hi);
            let margin = (hi - lo) * 0.05;
            (lo - margin, hi + margin)
        }
    };
    ((x_lo, x_hi), (y_lo, y_hi))
}

/// A histogram: one set of bars per series over shared bins `[edges[i], edges[i+1])`, drawn
/// side by side within each bin, with a legend when there is more than one series.
pub(crate) fn histogram_chart(
    title: &str,
    x_desc: &str,
    edges: &[f64],
    series: &[(String, Vec<u64>)],
) -> DrawResult<String> {
    let bins = edges.len().saturating_sub(1);
    if bins == 0 || series.is_empty() || series.iter().all(|(_, c)| c.iter().all(|&n| n == 0)) {
        return Err("no values to count".to_owned());
    }
    let max = series
        .iter()
        .flat_map(|(_, c)| c.iter().copied())
        .max()
        .unwrap_or(1)
        .max(1) as f64;
    let (x_lo, x_hi) = padded(edges[0], edges[bins]);
    with_svg(|root| {
        let (plot, legend) = if series.len() > 1 {
            let (p, l) = root.split_horizontally(WIDTH - LEGEND_WIDTH);
            (p, Some(l))
        } else {
            (root.clone(), None)
        };
        let mut chart = ChartBuilder::on(&plot)
            .caption(title, (FONT, 20))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(64)
            .build_cartesian_2d(x_lo..x_hi, 0f64..max * 1.08)
            .map_err(err)?;
        chart
            .configure_mesh()
            .x_desc(x_desc)
            .y_desc("count")
            .x_label_formatter(&|x| short_number(*x))
            .y_label_formatter(&|y| short_number(*y))
            .label_style((FONT, 14))
            .light_line_style(RGBColor(235, 235, 235))
            .draw()
            .map_err(err)?;
        let groups = series.len() as f64;
        for (s, (_, counts)) in series.iter().enumerate() {
            let c = color(s);
            let bars = counts
                .iter()
                .enumerate()
                .take(bins)
                .filter(|(_, n)| **n > 0)
                .map(|(i, &n)| {
                    let width = (edges[i + 1] - edges[i]) / groups;
                    let x0 = edges[i] + width * s as f64;
                    let gap = width * 0.06;
                    Rectangle::new([(x0 + gap, 0.0), (x0 + width - gap, n as f64)], c.filled())
                });
            chart.draw_series(bars).map_err(err)?;
        }
        if let Some(legend) = legend {
            let labels: Vec<&str> = series.iter().map(|s| s.0.as_str()).collect();
            side_legend(&legend, &labels)?;
        }
        Ok(())
    })
}

/// Box plots side by side: box from p25 to p75 with the median as a bar, whiskers from p5 to
/// p95, and the minimum and maximum as dots.
pub(crate) fn box_chart(
    title: &str,
    y_desc: &str,
    boxes: &[(String, Summary)],
    y_range: Option<(f64, f64)>,
) -> DrawResult<String> {
    if boxes.is_empty() {
        return Err("no distributions to draw".to_owned());
    }
    let n = boxes.len();
    let (y_lo, y_hi) = match y_range {
        Some((lo, hi)) => padded(lo, boxes.iter().map(|b| b.1.max).fold(hi, f64::max)),
        None => {
            let lo = boxes.iter().map(|b| b.1.min).fold(f64::INFINITY, f64::min);
            let hi = boxes
                .iter()
                .map(|b| b.1.max)
                .fold(f64::NEG_INFINITY, f64::max);
            let (lo, hi) = padded(lo, hi);
            let margin = (hi - lo) * 0.05;
            (lo - margin, hi + margin)
        }
    };
    let labels: Vec<String> = boxes.iter().map(|b| b.0.clone()).collect();
    with_svg(|root| {
        let mut chart = ChartBuilder::on(root)
            .caption(title, (FONT, 20))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(64)
            .build_cartesian_2d(-0.5f64..(n as f64 - 0.5), y_lo..y_hi)
            .map_err(err)?;
        let x_format = |x: &f64| {
            let i = x.round();
            if (x - i).abs() < 1e-6 && i >= 0.0 && (i as usize) < labels.len() {
                labels[i as usize].clone()
            } else {
                String::new()
            }
        };
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(n + 2)
            .y_desc(y_desc)
            .x_label_formatter(&x_format)
            .y_label_formatter(&|y| short_number(*y))
            .label_style((FONT, 14))
            .light_line_style(RGBColor(235, 235, 235))
            .draw()
            .map_err(err)?;
        for (i, (_, s)) in boxes.iter().enumerate() {
            let c = color(i);
            let x = i as f64;
            let half = 0.28_f64.min(0.4);
            chart
                .draw_series([
                    Rectangle::new([(x - half, s.p25), (x + half, s.p75)], c.mix(0.35).filled()),
                    Rectangle::new([(x - half, s.p25), (x + half, s.p75)], c.stroke_width(2)),
                ])
                .map_err(err)?;
            chart
                .draw_series([
                    PathElement::new(
                        vec![(x - half, s.p50), (x + half, s.p50)],
                        c.stroke_width(3),
                    ),
                    PathElement::new(vec![(x, s.p75), (x, s.p95)], c.stroke_width(2)),
                    PathElement::new(vec![(x, s.p25), (x, s.p5)], c.stroke_width(2)),
                    PathElement::new(
                        vec![(x - half / 2.0, s.p95), (x + half / 2.0, s.p95)],
                        c.stroke_width(2),
                    ),
                    PathElement::new(
                        vec![(x - half / 2.0, s.p5), (x + half / 2.0, s.p5)],
                        c.stroke_width(2),
                    ),
                ])
                .map_err(err)?;
            chart
                .draw_series([
                    Circle::new((x, s.min), 3, c.filled()),
                    Circle::new((x, s.max), 3, c.filled()),
                ])
                .map_err(err)?;
        }
        Ok(())
    })
}

/// A donut chart of the positive slices, labelled with their names and shares.
pub(crate) fn pie_chart(title: &str, slices: &[(String, f64)]) -> DrawResult<String> {
    let kept: Vec<(String, f64, RGBColor)> = slices
        .iter()
        .enumerate()
        .filter(|(_, (_, v))| v.is_finite() && *v > 0.0)
        .map(|(i, (l, v))| (l.clone(), *v, color(i)))
        .collect();
    if kept.is_empty() {
        return Err("nothing to divide".to_owned());
    }
    let total: f64 = kept.iter().map(|k| k.1).sum();
    with_svg(|root| {
        let area = root.titled(title, (FONT, 20)).map_err(err)?;
        let (w, h) = area.dim_in_pixel();
        let center = ((w / 2) as i32 - 120, (h / 2) as i32);
        let radius = (f64::from(h) / 2.0 - 20.0).max(20.0);
        let sizes: Vec<f64> = kept.iter().map(|k| k.1).collect();
        let colors: Vec<RGBColor> = kept.iter().map(|k| k.2).collect();
        let no_labels: Vec<String> = kept.iter().map(|_| String::new()).collect();
        let mut pie = Pie::new(&center, &radius, &sizes, &colors, &no_labels);
        pie.start_angle(-90.0);
        pie.donut_hole(radius * 0.5);
        area.draw(&pie).map_err(err)?;
        // A legend beside the donut: swatch, name, share.
        let x = center.0 + radius as i32 + 40;
        let line = 22;
        let top = center.1 - (kept.len() as i32 * line) / 2;
        for (i, (label, value, c)) in kept.iter().enumerate() {
            let y = top + i as i32 * line;
            area.draw(&Rectangle::new([(x, y), (x + 14, y + 14)], c.filled()))
                .map_err(err)?;
            let text = format!("{label}: {:.1}%", 100.0 * value / total);
            area.draw(&Text::new(text, (x + 22, y), (FONT, 16).into_font()))
                .map_err(err)?;
        }
        Ok(())
    })
}

/// Horizontal bars, longest first as given, each labelled with its name.
pub(crate) fn bar_chart(title: &str, x_desc: &str, bars: &[(String, f64)]) -> DrawResult<String> {
    let kept: Vec<&(String, f64)> = bars
        .iter()
        .filter(|b| b.1.is_finite() && b.1 >= 0.0)
        .collect();
    if kept.is_empty() || kept.iter().all(|b| b.1 == 0.0) {
        return Err("no values to draw".to_owned());
    }
    let max = kept.iter().map(|b| b.1).fold(0.0, f64::max);
    let n = kept.len();
    with_svg(|root| {
        let mut chart = ChartBuilder::on(root)
            .caption(title, (FONT, 20))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(10)
            .build_cartesian_2d(0f64..max * 1.05, 0f64..n as f64)
            .map_err(err)?;
        chart
            .configure_mesh()
            .disable_y_mesh()
            .y_labels(0)
            .x_desc(x_desc)
            .x_label_formatter(&|x| short_number(*x))
            .label_style((FONT, 14))
            .light_line_style(RGBColor(235, 235, 235))
            .draw()
            .map_err(err)?;
        for (i, (label, value)) in kept.iter().enumerate() {
            let c = color(i);
            let y = (n - 1 - i) as f64;
            chart
                .draw_series([Rectangle::new(
                    [(0.0, y + 0.15), (*value, y + 0.85)],
                    c.mix(0.8).filled(),
                )])
                .map_err(err)?;
            let name: String = if label.chars().count() > 70 {
                label.chars().take(69).chain(['…']).collect()
            } else {
                label.clone()
            };
            chart
                .draw_series([Text::new(
                    name,
                    (max * 0.01, y + 0.62),
                    (FONT, 14).into_font(),
                )])
                .map_err(err)?;
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn marks(svg: &str) -> usize {
        PALETTE
            .iter()
            .map(|c| {
                let hex = format!("#{:02X}{:02X}{:02X}", c.0, c.1, c.2);
                svg.matches(&hex).count()
            })
            .sum()
    }

    #[test]
    fn every_chart_kind_draws_data_marks_without_fonts() {
        let series = vec![Curve::of_points(
            "cpu <total>",
            &(0..10_000)
                .map(|i| (i as f64 * 0.5, (i % 100) as f64))
                .collect::<Vec<_>>(),
        )];
        let line = line_chart("CPU", XAxis::Elapsed, "%", &series, Some((0.0, 100.0))).unwrap();
        assert!(line.starts_with("<svg") && marks(&line) > 0);
        assert!(line.contains("cpu &lt;total&gt;") && !line.contains("<total>"));
        // Reduced to 400 slices: one polygon for the band, one polyline for the means.
        assert!(line.len() < 60_000, "{}", line.len());
        assert!(line.contains("<polygon"));
        let summary = Summary::of((0..100).map(f64::from)).unwrap();
        let boxes = box_chart("b", "%", &[("gpu0".into(), summary)], None).unwrap();
        assert!(marks(&boxes) >= 5);
        let hist =
            histogram_chart("h", "ms", &[0.0, 1.0, 2.0], &[("a".into(), vec![3, 4])]).unwrap();
        assert!(marks(&hist) >= 2);
        let pie = pie_chart("p", &[("a".into(), 1.0), ("b".into(), 3.0)]).unwrap();
        assert!(marks(&pie) >= 2 && pie.contains("75.0%"));
        let bars = bar_chart("t", "ms", &[("op".into(), 2.0)]).unwrap();
        assert!(marks(&bars) >= 1);
    }

    #[test]
    fn empty_or_degenerate_input_is_an_error_or_a_flat_chart_not_a_panic() {
        assert!(line_chart("x", XAxis::Plain, "", &[], None).is_err());
        let flat = vec![Curve::of_points("s", &[(1.0, 5.0)])];
        assert!(line_chart("x", XAxis::Plain, "", &flat, None).is_ok());
        let nan = vec![Curve::of_points("s", &[(f64::NAN, 5.0)])];
        assert!(line_chart("x", XAxis::Plain, "", &nan, None).is_err());
        assert!(pie_chart("p", &[("a".into(), 0.0)]).is_err());
        assert!(histogram_chart("h", "", &[0.0, 1.0], &[("a".into(), vec![0])]).is_err());
        assert!(bar_chart("t", "", &[]).is_err());
    }

    #[test]
    fn time_axis_labels_of_short_runs_are_distinct() {
        assert_eq!(
            [0.3, 2.0, 30.0, 100.0, 0.001].map(seconds_decimals),
            [2, 1, 0, 0, 3]
        );
        for end in [0.3, 0.9, 4.0, 70.0] {
            let series = vec![Curve::of_points(
                "cpu",
                &(0..=100)
                    .map(|i| (end * f64::from(i) / 100.0, 1.0))
                    .collect::<Vec<_>>(),
            )];
            let svg = line_chart("CPU", XAxis::Elapsed, "%", &series, None).unwrap();
            let labels: Vec<&str> = svg
                .split("</text>")
                .filter_map(|t| t.rsplit('>').next().map(str::trim))
                .filter(|t| t.ends_with(" s"))
                .collect();
            assert!(labels.len() >= 3, "{end}: {labels:?}");
            let mut unique = labels.clone();
            unique.sort_unstable();
            unique.dedup();
            assert_eq!(unique.len(), labels.len(), "{end}: {labels:?}");
        }
    }
}
