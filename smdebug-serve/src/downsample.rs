//! Server-side aggregation and downsampling: no chart is sent more than [`MAX_POINTS`] points
//! per series, and what is aggregated (smoothed) is computed on every value before that.
//!
//! Min-max decimation (smdebug-profiler's one downsampler, [`smdebug_profiler::downsample`]):
//! the visible window is cut into `max_points / 2` equal buckets and each bucket sends its
//! lowest and its highest point, in order. Spikes survive (a single high sample in a bucket is
//! kept), and a zoomed window is cut again over its own range, so zooming in gets finer detail
//! down to the raw samples.
//!
//! A scalar ([`scalar_lines`]) is cut by step into buckets aligned on multiples of their width
//! (1, 2, 3, 4, 6, 8, 12, … steps: smdebug-profiler's `MinMax::aligned`), so that a chart of a
//! growing scalar keeps its buckets until the width steps up and a page can take its last
//! buckets again instead of the whole series. Its smoothed line is TensorBoard's debiased
//! exponential moving average ([`smooth`]) over all of the scalar's values, from its first,
//! whatever the window; then it is cut by the same buckets as the raw values and each bucket
//! sends the smoothed line's own lowest and highest point. Every point sent is one the raw
//! series or the average of all its values has at that step. The Scalars tab and the
//! summary's headline charts get their points here.

pub use smdebug_profiler::downsample::Coord;
use smdebug_profiler::downsample::{MinMax, PointSource, min_max_sliced};

use smdebug_io::trial::Column;

/// The most points one series is ever sent.
pub const MAX_POINTS: usize = 2_000;

/// The largest smoothing weight (TensorBoard's slider's end).
pub const MAX_SMOOTHING: f64 = 0.999;

/// The points of `points` (ordered by `x`) with `from <= x <= to`, at most `max_points` of them
/// (clamped to `2..=MAX_POINTS`): all of them when they fit, else the minimum and maximum of
/// each of `max_points / 2` equal-width buckets of the window.
pub fn min_max<X: Coord, S: PointSource<X> + ?Sized>(
    points: &S,
    from: Option<f64>,
    to: Option<f64>,
    max_points: usize,
) -> Vec<(X, f64)> {
    let options = MinMax::new(max_points.clamp(2, MAX_POINTS)).window(from, to);
    smdebug_profiler::downsample::min_max(points, &options)
}

/// TensorBoard's smoothing of `values`, in place, with weight `w` (`0 <= w < 1`): the
/// exponential moving average `a_n = w·a_{n-1} + (1 − w)·x_n` from `a_0 = 0`, divided by
/// `1 − w^n` so that the first values are not pulled towards 0 (`n` counts the finite values
/// so far). A non-finite value is left as it is and does not enter the average; a series whose
/// finite values are all equal is left as it is (the division would only add rounding).
pub fn smooth(values: &mut [f64], w: f64) {
    let mut finite = values.iter().filter(|v| v.is_finite());
    let constant = finite.next().is_none_or(|first| finite.all(|v| v == first));
    if constant || w == 0.0 {
        return;
    }
    let (mut last, mut decay) = (0.0, 1.0);
    for v in values.iter_mut().filter(|v| v.is_finite()) {
        last = last * w + (1.0 - w) * *v;
        decay *= w;
        *v = last / (1.0 - decay);
    }
}

/// A scalar column as points `(step, value)`.
struct ColumnPoints<'a>(&'a Column);

impl PointSource<u64> for ColumnPoints<'_> {
    fn count(&self) -> usize {
        self.0.len()
    }

    fn point(&self, i: usize) -> (u64, f64) {
        self.0.point(i)
    }
}

/// A column's steps with other values (its smoothed ones).
struct Restated<'a> {
    column: &'a Column,
    values: Vec<f64>,
}

impl PointSource<u64> for Restated<'_> {
    fn count(&self) -> usize {
        self.values.len()
    }

    fn point(&self, i: usize) -> (u64, f64) {
        (self.column.point(i).0, self.values[i])
    }
}

/// One scalar's points for a chart.
#[derive(Debug, Default, PartialEq)]
pub struct ScalarLines {
    /// The raw values kept: each bucket's lowest and highest.
    pub raw: Vec<(u64, f64)>,
    /// The smoothed line (when smoothing was asked for), by the same buckets: each bucket's
    /// lowest and highest point of the average of all values up to that step.
    pub smoothed: Option<Vec<(u64, f64)>>,
    /// The buckets' width in steps; 0 when every value of the window was kept.
    pub width: u64,
}

/// `column`'s values at steps `from <= step <= to`, at most `max_points` of them: all of them
/// when they fit, else the window's first and last and each aligned bucket's lowest and
/// highest; and with a `smoothing` weight above 0 its smoothed line ([`smooth`] over every
/// value of the column, then bucketed as the raw ones).
pub fn scalar_lines(
    column: &Column,
    from: Option<f64>,
    to: Option<f64>,
    max_points: usize,
    smoothing: f64,
) -> ScalarLines {
    // The window's first and last values are kept: a line ends where the scalar does.
    let options = MinMax::new(max_points.clamp(2, MAX_POINTS))
        .window(from, to)
        .keep_ends(true)
        .aligned(true);
    let (raw, width) = min_max_sliced(&ColumnPoints(column), &options);
    let smoothed = (smoothing > 0.0).then(|| {
        let mut values: Vec<f64> = column.points().map(|p| p.1).collect();
        smooth(&mut values, smoothing);
        min_max_sliced(&Restated { column, values }, &options).0
    });
    ScalarLines {
        raw,
        smoothed,
        width: width.map_or(0, |w| w as u64),
    }
}

/// A smoothing weight from a request: `0 <= w <=` [`MAX_SMOOTHING`], else why not.
pub fn smoothing_weight(w: Option<f64>) -> Result<f64, String> {
    match w {
        None => Ok(0.0),
        Some(w) if (0.0..=MAX_SMOOTHING).contains(&w) => Ok(w),
        Some(w) => Err(format!(
            "smoothing must be a weight from 0 to {MAX_SMOOTHING}, not {w}"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_dashboard_never_sends_more_than_its_cap() {
        let long: Vec<(f64, f64)> = (0..1_000_000)
            .map(|i| (i as f64, (i % 97) as f64))
            .collect();
        let out = min_max(&long, None, None, 10_000_000);
        assert!(out.len() <= MAX_POINTS, "{}", out.len());
        assert!(out.len() >= MAX_POINTS - 2);
        assert_eq!(min_max(&long, None, None, 0).len(), 2);
    }

    #[test]
    fn smoothing_is_the_debiased_average_of_the_finite_values() {
        let w = 0.9;
        let mut out = [4.0, f64::NAN, 2.0, f64::INFINITY, 1.0];
        smooth(&mut out, w);
        // By hand: 0.4 / 0.1, then (0.36 + 0.2) / 0.19, then (0.504 + 0.1) / 0.271.
        let expected = [4.0, f64::NAN, 0.56 / 0.19, f64::INFINITY, 0.604 / 0.271];
        for (got, want) in out.iter().zip(expected) {
            assert!(
                (got.is_nan() && want.is_nan()) || *got == want || (got - want).abs() < 1e-12,
                "{out:?} against {expected:?}"
            );
        }
        let mut flat = [3.5; 4];
        smooth(&mut flat, 0.99);
        assert_eq!(flat, [3.5; 4]);
        let mut unsmoothed = [1.0, 2.0];
        smooth(&mut unsmoothed, 0.0);
        assert_eq!(unsmoothed, [1.0, 2.0]);
        smooth(&mut [], 0.5);
    }

    #[test]
    fn smoothing_weights_outside_the_slider_are_refused() {
        assert_eq!(smoothing_weight(None), Ok(0.0));
        assert_eq!(smoothing_weight(Some(0.999)), Ok(0.999));
        for bad in [-0.1, 1.0, f64::NAN, f64::INFINITY] {
            let e = smoothing_weight(Some(bad)).unwrap_err();
            assert!(e.contains("from 0 to 0.999"), "{e}");
        }
    }
}
