//! Server-side aggregation and downsampling: no chart is sent more than [`MAX_POINTS`] points
//! per series, and what is aggregated (smoothed) is computed on every value before that.
//!
//! Min-max decimation (smdebug-profiler's one downsampler, [`smdebug_profiler::downsample`]):
//! the visible window is cut into `max_points / 2` equal buckets and each bucket sends its
//! lowest and its highest point, in order. Spikes survive (a single high sample in a bucket is
//! kept), and a zoomed window is cut again over its own range, so zooming in gets finer detail
//! down to the raw samples.
//!
//! A scalar is drawn from its summary ([`crate::summary`]: at most 1,024 buckets a series, each
//! its count, sum, first, last, lowest and highest value) or, for a window finer than the
//! buckets, from its values read again from the run's files ([`plan`]). Either way it is cut by
//! step into slices aligned on multiples of their width (1, 2, 3, 4, 6, 8, 12, … steps:
//! smdebug-profiler's `MinMax::aligned`; from buckets, a multiple of theirs), so that a chart
//! of a growing scalar keeps its slices until the width steps up and a page can take its last
//! slices again instead of the whole series, and each slice sends its true lowest and highest
//! value. Every raw point sent is a value of the files at its step. The smoothed line is
//! TensorBoard's debiased exponential moving average: over the values of a window read from
//! the files, after the average over the buckets before it; over the buckets' means (a bucket
//! taken as its count of its mean) where the chart is drawn from buckets. It is a guide, not a
//! value of the files: TensorBoard averages the 1,000 values it samples of a series. The
//! Scalars tab and the summary's headline charts get their points here.

pub use smdebug_profiler::downsample::Coord;
use smdebug_profiler::downsample::{MinMax, PointSource, min_max_sliced, slice_width};

use crate::summary::{Bucket, Point, SeriesSummary};

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

/// One value as the charts get it: `(global step, value, wall time of its event record)`.
pub type Value = (u64, f64, f64);

/// Where a window of a scalar is drawn from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Plan {
    /// The series has no value in the window.
    Empty,
    /// From the summary's buckets, by slices of this width (a multiple of theirs), or every
    /// value with 0 (each bucket of the window holds at most two values: its lowest and
    /// highest are all of them).
    Buckets(u64),
    /// From the values of the steps `from..=to` read again from the run's files.
    Read(u64, u64),
}

/// The widest window, in steps, read again from the run's files for a finer chart than the
/// summary's buckets give (one index file and one event file a step and worker).
pub const READ_STEPS: u64 = 16_384;

/// How a window `from..=to` (steps; either end open) of `s` is drawn with at most
/// `max_points` points: every value when they fit, else the slices of the width the
/// downsampler would choose ([`slice_width`]); from the buckets when they hold that (the width
/// is a multiple of theirs, or every bucket of a window that fits holds at most two values),
/// else from the files when the window is at most [`READ_STEPS`] wide, else from the buckets
/// by the narrowest width they hold (fewer points than asked for, each still a true lowest or
/// highest value).
pub fn plan(s: &SeriesSummary, from: Option<f64>, to: Option<f64>, max_points: usize) -> Plan {
    let max_points = max_points.clamp(2, MAX_POINTS);
    let Some((lo, hi, n)) = s.steps_within(from, to) else {
        return Plan::Empty;
    };
    let w = s.width();
    let readable = hi - lo < READ_STEPS;
    if n <= max_points {
        let pairs = w <= 2
            || s.buckets_within(from, to)
                .iter()
                .all(|b| b.1.count <= 2);
        return if pairs {
            Plan::Buckets(0)
        } else if readable {
            Plan::Read(lo, hi)
        } else {
            Plan::Buckets(w)
        };
    }
    let slices = ((max_points - 2) / 2).max(1);
    let wanted = slice_width(lo as f64, hi as f64, slices) as u64;
    if wanted >= w && wanted % w == 0 {
        Plan::Buckets(wanted)
    } else if readable {
        Plan::Read(lo, hi)
    } else {
        Plan::Buckets(multiple_of(wanted, w))
    }
}

/// The narrowest aligned width (1, 2, 3, 4, 6, 8, 12, …) at least `wanted` that is a multiple
/// of `w` (a power of two).
fn multiple_of(wanted: u64, w: u64) -> u64 {
    let mut x = 1u64;
    while x < wanted || x % w != 0 {
        x = if x == 1 {
            2
        } else if x.is_power_of_two() {
            x / 2 * 3
        } else {
            x / 3 * 4
        };
    }
    x
}

/// TensorBoard's debiased moving average, value by value or a bucket's count of its mean at a
/// time.
struct Ema {
    w: f64,
    last: f64,
    decay: f64,
}

impl Ema {
    fn new(w: f64) -> Ema {
        Ema {
            w,
            last: 0.0,
            decay: 1.0,
        }
    }

    /// Takes in `n` values of `v`; the average after them.
    fn take(&mut self, v: f64, n: u32) -> f64 {
        let wn = self.w.powi(n as i32);
        self.last = self.last * wn + (1.0 - wn) * v;
        self.decay *= wn;
        self.last / (1.0 - self.decay)
    }

    /// Takes in a bucket's finite values as its mean.
    fn take_bucket(&mut self, b: &Bucket) {
        if let Some(mean) = b.mean() {
            self.take(mean, b.finite);
        }
    }
}

/// Whether every finite value of `s` is the same (its smoothed line is its values).
fn constant(s: &SeriesSummary) -> bool {
    let mut finite = s
        .buckets()
        .iter()
        .filter(|b| b.1.finite > 0)
        .flat_map(|b| [b.1.min.value, b.1.max.value]);
    let first = finite.next();
    first.is_none_or(|f| finite.all(|v| v == f))
}

/// One scalar's points for a chart.
#[derive(Debug, Default, PartialEq)]
pub struct ScalarLines {
    /// The values kept: every value of the window, or each slice's first and last value of the
    /// window and each slice's lowest and highest.
    pub raw: Vec<Value>,
    /// The smoothed line (when smoothing was asked for): see [`bucket_lines`] and
    /// [`read_lines`].
    pub smoothed: Option<Vec<Value>>,
    /// The slices' width in steps; 0 when every value of the window was kept.
    pub width: u64,
}

/// A window of `s` drawn from its buckets by slices of `width` (a multiple of the buckets'
/// width; 0: every bucket's values, each holding at most two). The slices that hold any value
/// of the window are drawn whole: the window's ends may be a slice's values outside it. Kept:
/// the first slice's first value, each slice's lowest and highest, the last slice's last
/// value. With `smoothing` above 0, the smoothed line is the moving average over the buckets
/// from the series' first, each bucket taken as its count of its mean: one point a slice, at
/// its last step.
pub fn bucket_lines(
    s: &SeriesSummary,
    from: Option<f64>,
    to: Option<f64>,
    width: u64,
    smoothing: f64,
) -> ScalarLines {
    let w = s.width();
    let per = if width == 0 { 1 } else { (width / w).max(1) };
    let all = s.buckets();
    let shown = s.buckets_within(from, to);
    // The buckets before the window's (as `buckets_within` finds them).
    let start = from.map_or(0, |f| all.partition_point(|x| (x.1.last.step as f64) < f));
    // Slices: runs of buckets with the same `index / per`.
    let mut slices: Vec<Bucket> = Vec::new();
    let mut slice_of = None;
    for (index, b) in shown {
        let slice = index / per;
        match slices.last_mut() {
            Some(last) if slice_of == Some(slice) => last.merge(b),
            _ => slices.push(*b),
        }
        slice_of = Some(slice);
    }
    let point = |p: Point| (p.step, p.value, p.wall);
    let mut raw: Vec<Value> = Vec::new();
    let push = |raw: &mut Vec<Value>, p: Point| {
        if raw.last().is_none_or(|l| l.0 < p.step) {
            raw.push(point(p));
        }
    };
    if let (Some(first), Some(last)) = (slices.first(), slices.last()) {
        let (first, last) = (first.first, last.last);
        push(&mut raw, first);
        for b in &slices {
            let mut inner = [b.min, b.max, b.first, b.last];
            inner.sort_by_key(|p| p.step);
            for p in inner {
                // Every value of a slice of two; of a larger one its lowest and highest.
                let kept = (width == 0 && b.count <= 2)
                    || p.step == b.min.step
                    || p.step == b.max.step;
                if kept && p.step < last.step {
                    push(&mut raw, p);
                }
            }
        }
        push(&mut raw, last);
    }
    let smoothed = (smoothing > 0.0).then(|| {
        if constant(s) {
            return raw.clone();
        }
        let mut ema = Ema::new(smoothing);
        for (_, b) in &all[..start] {
            ema.take_bucket(b);
        }
        let mut out = Vec::with_capacity(slices.len());
        let mut at = 0;
        for slice in &slices {
            let mut value = None;
            while at < shown.len() && shown[at].1.last.step <= slice.last.step {
                if let Some(mean) = shown[at].1.mean() {
                    value = Some(ema.take(mean, shown[at].1.finite));
                }
                at += 1;
            }
            let v = value.unwrap_or(slice.last.value);
            out.push((slice.last.step, v, slice.last.wall));
        }
        out
    });
    ScalarLines {
        raw,
        smoothed,
        width: if width == 0 { 0 } else { w * per },
    }
}

/// A window of `s` drawn from `values`, its values read again from the run's files (every
/// value of the window, in step order), as [`min_max_sliced`] draws a series: every value
/// when they fit, else the window's first and last and each aligned slice's lowest and
/// highest. With `smoothing` above 0, the smoothed line is the moving average of the values,
/// continuing the one over the summary's buckets before the window ([`bucket_lines`]), cut by
/// the same slices: each slice's lowest and highest point of it.
pub fn read_lines(
    s: &SeriesSummary,
    values: &[Value],
    max_points: usize,
    smoothing: f64,
) -> ScalarLines {
    let options = MinMax::new(max_points.clamp(2, MAX_POINTS))
        .keep_ends(true)
        .aligned(true);
    let points: Vec<(u64, f64)> = values.iter().map(|v| (v.0, v.1)).collect();
    let wall = |step: u64| {
        values
            .binary_search_by_key(&step, |v| v.0)
            .map_or(f64::NAN, |i| values[i].2)
    };
    let with_walls = |kept: Vec<(u64, f64)>| -> Vec<Value> {
        kept.into_iter().map(|(s, v)| (s, v, wall(s))).collect()
    };
    let (raw, width) = min_max_sliced(&points, &options);
    let smoothed = (smoothing > 0.0).then(|| {
        if constant(s) {
            return with_walls(raw.clone());
        }
        let first = values.first().map_or(0, |v| v.0);
        let mut ema = Ema::new(smoothing);
        for (_, b) in s.buckets().iter().take_while(|b| b.1.last.step < first) {
            ema.take_bucket(b);
        }
        let averaged: Vec<(u64, f64)> = points
            .iter()
            .map(|&(step, v)| (step, if v.is_finite() { ema.take(v, 1) } else { v }))
            .collect();
        with_walls(min_max_sliced(&averaged, &options).0)
    });
    ScalarLines {
        raw: with_walls(raw),
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
        let values: Vec<Value> = [4.0, f64::NAN, 2.0, f64::INFINITY, 1.0]
            .iter()
            .enumerate()
            .map(|(i, v)| (i as u64, *v, i as f64))
            .collect();
        let mut s = SeriesSummary::default();
        for v in &values {
            s.add(Point {
                step: v.0,
                value: v.1,
                wall: v.2,
            });
        }
        let lines = read_lines(&s, &values, 100, w);
        let got: Vec<f64> = lines.smoothed.unwrap().iter().map(|p| p.1).collect();
        // By hand: 0.4 / 0.1, then (0.36 + 0.2) / 0.19, then (0.504 + 0.1) / 0.271.
        let expected = [4.0, f64::NAN, 0.56 / 0.19, f64::INFINITY, 0.604 / 0.271];
        for (got, want) in got.iter().zip(expected) {
            assert!(
                (got.is_nan() && want.is_nan()) || *got == want || (got - want).abs() < 1e-12,
                "{got:?} against {expected:?}"
            );
        }
        // A bucket of n equal values is n steps of the average.
        let mut ema = Ema::new(w);
        let once = ema.take(2.0, 3);
        let mut by_one = Ema::new(w);
        by_one.take(2.0, 1);
        by_one.take(2.0, 1);
        assert!((once - by_one.take(2.0, 1)).abs() < 1e-12);
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
