//! Server-side aggregation and downsampling: no chart is sent more than [`MAX_POINTS`] points
//! per series, and what is aggregated (smoothed) is computed on every value before that.
//!
//! Min-max decimation (smdebug-profiler's one downsampler, [`smdebug_analysis::downsample`]):
//! the visible window is cut into `max_points / 2` equal buckets and each bucket sends its
//! lowest and its highest point, in order. Spikes survive (a single high sample in a bucket is
//! kept), and a zoomed window is cut again over its own range, so zooming in gets finer detail
//! down to the raw samples.
//!
//! A scalar is drawn from its summary ([`smdebug_analysis::scalars`]: at most 1,024 buckets a series, each
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

pub use smdebug_analysis::downsample::Coord;
use smdebug_analysis::downsample::{MinMax, PointSource, slice_width};

use smdebug_analysis::digest::Line;

use smdebug_analysis::scalars::{Bucket, Point, SeriesSummary};

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
    smdebug_analysis::downsample::min_max(points, &options)
}

/// A series `(µs, value)` drawn from its line over the window `from_us..=to_us` (either end
/// open): each slice's lowest and highest sample (at
/// their times) within the window, cut down by min-max to the window's point budget when they
/// are more; with the nearest sample drawn of the slice just before the window and of the one
/// just after, so that a line crosses the window's ends. Every point is a sample of the
/// series at its time.
pub(crate) fn line_points(
    line: &Line,
    from_us: Option<f64>,
    to_us: Option<f64>,
    budget: usize,
) -> Vec<(u64, f64)> {
    let from = from_us.map_or(0, |f| f.max(0.0).ceil() as u64);
    let to = to_us.map_or(u64::MAX, |t| t.max(0.0).min(u64::MAX as f64).floor() as u64);
    let mut kept: Vec<(u64, f64)> = Vec::new();
    if from <= to {
        for s in line.slices_within(from, to) {
            let mut two = [(s.min_us, s.min), (s.max_us, s.max)];
            two.sort_by_key(|p| p.0);
            for p in two {
                if (from..=to).contains(&p.0) && kept.last().is_none_or(|l| l.0 < p.0) {
                    kept.push(p);
                }
            }
        }
        if kept.len() > budget {
            kept = min_max(&kept, None, None, budget);
        }
        let (before, after) = line.neighbours(from, to);
        if let Some(b) = before.filter(|_| from_us.is_some()) {
            kept.insert(0, later(b.min_us, b.min, b.max_us, b.max));
        }
        if let Some(a) = after.filter(|_| to_us.is_some()) {
            let p = if a.min_us <= a.max_us {
                (a.min_us, a.min)
            } else {
                (a.max_us, a.max)
            };
            kept.push(p);
        }
    }
    kept
}

fn later(a_us: u64, a: f64, b_us: u64, b: f64) -> (u64, f64) {
    if a_us >= b_us { (a_us, a) } else { (b_us, b) }
}

/// One value as the charts get it: `(global step, value, wall time of its event record)`.
pub type Value = (u64, f64, f64);

/// The widest range of steps read again from the run's files for a chart finer than the
/// summary's buckets, or for a window's edge slices (one index file and one event file a step
/// and worker: 8,192 files on a one-worker run, about 0.1 s). A page open on a live run asks
/// for its charts again as values come: a run's first 4,096 steps may be read again each time,
/// a longer run's whole-run charts are drawn from the buckets.
pub const READ_STEPS: u64 = 4_096;

/// How a window of a scalar is drawn ([`plan`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    /// The slices' width in steps, aligned on its multiples; 0: every value of the window.
    pub width: u64,
    /// The ranges of steps whose values are read again from the run's files: the whole window
    /// when the buckets are too coarse for it, else the window's edge slices that it cuts.
    pub read: Vec<(u64, u64)>,
    /// The window's last step when it was planned: a chart drawn later, from a summary that
    /// took in more values meanwhile, ends there as the values read do.
    pub hi: u64,
}

/// How the window `from..=to` (steps; either end open) of `s` is drawn with at most
/// `max_points` points; `None` when it holds no value. Every value when they fit, else slices
/// of the width the downsampler would choose ([`slice_width`]). Slices are drawn from the
/// summary's buckets when that width is a multiple of theirs (or every bucket of a window that
/// fits holds at most two values), and a slice the window cuts is drawn from its values in the
/// window, read again; a window the buckets are too coarse for is read whole when it is at most
/// [`READ_STEPS`] wide, else drawn by the narrowest slices the buckets hold (fewer points than
/// asked for, each still a true lowest or highest value).
pub fn plan(
    s: &SeriesSummary,
    from: Option<f64>,
    to: Option<f64>,
    max_points: usize,
) -> Option<Plan> {
    let max_points = max_points.clamp(2, MAX_POINTS);
    let (lo, hi, n) = s.steps_within(from, to)?;
    let w = s.width();
    let inside = s.buckets_within(from, to);
    let readable = hi - lo < READ_STEPS;
    let whole = |read: Vec<(u64, u64)>| Plan { width: 0, read, hi };
    if n <= max_points {
        let cut = inside.first().is_some_and(|b| b.1.first.step < lo)
            || inside.last().is_some_and(|b| b.1.last.step > hi);
        let pairs = w <= 2 || inside.iter().all(|b| b.1.count <= 2);
        if pairs && !cut {
            return Some(whole(Vec::new()));
        }
        if readable {
            return Some(whole(vec![(lo, hi)]));
        }
    }
    let slices = ((max_points - 2) / 2).max(1);
    let wanted = slice_width(lo as f64, hi as f64, slices) as u64;
    // The buckets the window cuts are counted whole: when the values it holds may fit after
    // all, it is read (and `draw` counts them).
    let surely_inside: usize = inside
        .iter()
        .filter(|b| b.1.first.step >= lo && b.1.last.step <= hi)
        .map(|b| b.1.count as usize)
        .sum();
    let may_fit = surely_inside <= max_points;
    if (may_fit || !(wanted >= w && wanted.is_multiple_of(w))) && readable {
        return Some(Plan {
            width: wanted,
            read: vec![(lo, hi)],
            hi,
        });
    }
    let width = multiple_of(wanted, w);
    // The edge slices the window cuts (a bucket of theirs holds values outside it).
    let mut read = Vec::new();
    let (first, last) = (inside.first()?.1, inside.last()?.1);
    let (left, right) = (lo / width, hi / width);
    if first.first.step < lo {
        let end = ((left + 1) * width - 1).min(hi);
        if end - lo < READ_STEPS {
            read.push((lo, end));
        }
    }
    if last.last.step > hi && (left != right || read.is_empty()) {
        let start = (right * width).max(lo);
        if hi - start < READ_STEPS {
            read.push((start, hi));
        }
    }
    Some(Plan { width, read, hi })
}

/// The narrowest aligned width (1, 2, 3, 4, 6, 8, 12, …) at least `wanted` that is a multiple
/// of `w` (a power of two).
fn multiple_of(wanted: u64, w: u64) -> u64 {
    let mut x = 1u64;
    while x < wanted || !x.is_multiple_of(w) {
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
    /// The values kept: every value of the window, or the first slice's first value, each
    /// slice's lowest and highest, and the last slice's last value.
    pub raw: Vec<Value>,
    /// The smoothed line (when smoothing was asked for): see [`draw`].
    pub smoothed: Option<Vec<Value>>,
    /// The slices' width in steps; 0 when every value of the window was kept.
    pub width: u64,
}

/// One slice of a chart: its values summarized, and whether they were read from the files.
struct Slice {
    values: Bucket,
    read: bool,
}

/// A window of `s` drawn by `plan`, with `exact` the values of `plan.read`'s ranges read again
/// from the run's files (in step order; `None` when they could not be read: the buckets are
/// drawn whole instead). Each slice of `plan.width` is drawn from the summary's buckets when
/// the window holds it whole, else from its values in the window that were read; kept: the
/// first slice's first value, each slice's lowest and highest, the last slice's last value (a
/// slice of the window drawn whole from buckets may reach past the window's ends when it was
/// too wide to read). With `smoothing` above 0, the smoothed line is TensorBoard's moving
/// average from the series' first value: value by value over the values read, a bucket at a
/// time (its count of its mean) elsewhere; a slice of read values sends the line's lowest and
/// highest point in it, a slice of buckets the line at its last step.
pub fn draw(
    s: &SeriesSummary,
    from: Option<f64>,
    to: Option<f64>,
    plan: &Plan,
    max_points: usize,
    exact: Option<&[Value]>,
    smoothing: f64,
) -> ScalarLines {
    let to = match plan.read.is_empty() {
        true => to,
        false => Some(to.map_or(plan.hi as f64, |t| t.min(plan.hi as f64))),
    };
    let Some((lo, hi, _)) = s.steps_within(from, to) else {
        return ScalarLines::default();
    };
    let empty: &[Value] = &[];
    let (read, exact) = match exact {
        Some(e) => (plan.read.as_slice(), e),
        None => (&[][..], empty),
    };
    let inside = s.buckets_within(from, to);
    // A window read whole is cut as the downsampler cuts its values: every value when they fit
    // in `max_points`, else slices of its width for their first and last step.
    let read_whole = read.iter().any(|r| r.0 <= lo && hi <= r.1);
    let width = if read_whole {
        let window = values_within(exact, lo, hi);
        match (window.first(), window.last()) {
            (Some(f), Some(l)) if window.len() > max_points.clamp(2, MAX_POINTS) => {
                let slices = ((max_points.clamp(2, MAX_POINTS) - 2) / 2).max(1);
                slice_width(f.0 as f64, l.0 as f64, slices) as u64
            }
            _ => 0,
        }
    } else {
        plan.width
    };
    let slices = match (width, read_whole) {
        (0, true) => values_within(exact, lo, hi)
            .iter()
            .map(|v| Slice {
                values: Bucket::of(point(v)),
                read: true,
            })
            .collect(),
        (0, false) => every_bucket_value(inside),
        _ => slices_of_width(s, inside, read, exact, (lo, hi), width),
    };
    let raw = raw_line(&slices);
    let smoothed = (smoothing > 0.0).then(|| {
        if constant(s) {
            return raw.clone();
        }
        smooth_line(s, &slices, exact, read, smoothing)
    });
    ScalarLines {
        raw,
        smoothed,
        width,
    }
}

/// The values of `exact` (in step order) from step `lo` to step `hi`.
fn values_within(exact: &[Value], lo: u64, hi: u64) -> &[Value] {
    let at = exact.partition_point(|v| v.0 < lo);
    let end = exact.partition_point(|v| v.0 <= hi);
    &exact[at..end]
}

fn point(v: &Value) -> Point {
    Point {
        step: v.0,
        value: v.1,
        wall: v.2,
    }
}

/// Values summarized as one bucket; `None` for none.
fn bucket_of_values(values: &[Value]) -> Option<Bucket> {
    let mut it = values.iter();
    let mut b = Bucket::of(point(it.next()?));
    for v in it {
        b.merge(&Bucket::of(point(v)));
    }
    Some(b)
}

/// Buckets of at most two values, each value drawn: its bucket's first or last.
fn every_bucket_value(inside: &[(u64, Bucket)]) -> Vec<Slice> {
    let mut slices = Vec::new();
    for (_, b) in inside {
        slices.push(Slice {
            values: Bucket::of(b.first),
            read: false,
        });
        if b.last.step != b.first.step {
            slices.push(Slice {
                values: Bucket::of(b.last),
                read: false,
            });
        }
    }
    slices
}

/// The window's steps `lo..=hi` in slices of `width` steps aligned on its multiples: each from
/// the buckets it holds whole, else (a slice the window cuts, or one not a multiple of the
/// buckets' width) from its values read again when its steps were read.
fn slices_of_width(
    s: &SeriesSummary,
    inside: &[(u64, Bucket)],
    read: &[(u64, u64)],
    exact: &[Value],
    (lo, hi): (u64, u64),
    width: u64,
) -> Vec<Slice> {
    let is_read = |a: u64, b: u64| read.iter().any(|r| r.0 <= a && b <= r.1);
    let w = s.width();
    let mut slices = Vec::new();
    let mut b = 0;
    for k in lo / width..=hi / width {
        let (start, end) = (k * width, (k + 1) * width - 1);
        let (a, z) = (start.max(lo), end.min(hi));
        // The buckets of slice k (its width is a multiple of theirs when drawn from them).
        while b < inside.len() && inside[b].0 * w < start {
            b += 1;
        }
        let first_bucket = b;
        while b < inside.len() && inside[b].0 * w <= end {
            b += 1;
        }
        let buckets = &inside[first_bucket..b];
        let cut = buckets.first().is_some_and(|x| x.1.first.step < a)
            || buckets.last().is_some_and(|x| x.1.last.step > z);
        let from_files = is_read(a, z) && (cut || !width.is_multiple_of(w));
        let values = if from_files {
            bucket_of_values(values_within(exact, a, z))
        } else {
            buckets.iter().map(|x| x.1).reduce(|mut m, x| {
                m.merge(&x);
                m
            })
        };
        if let Some(values) = values {
            slices.push(Slice {
                values,
                read: from_files,
            });
        }
    }
    slices
}

/// The points sent of the slices: the first slice's first value, each slice's lowest and
/// highest in step order, the last slice's last value; a step once.
fn raw_line(slices: &[Slice]) -> Vec<Value> {
    let mut raw: Vec<Value> = Vec::new();
    let push = |raw: &mut Vec<Value>, p: Point| {
        if raw.last().is_none_or(|l| l.0 < p.step) {
            raw.push((p.step, p.value, p.wall));
        }
    };
    if let (Some(first), Some(last)) = (slices.first(), slices.last()) {
        let (first, last) = (first.values.first, last.values.last);
        push(&mut raw, first);
        for slice in slices {
            let b = &slice.values;
            let mut inner = [b.min, b.max];
            inner.sort_by_key(|p| p.step);
            for p in inner {
                if p.step < last.step {
                    push(&mut raw, p);
                }
            }
        }
        push(&mut raw, last);
    }
    raw
}

/// The smoothed line of [`draw`]: the moving average from the series' first value, a bucket
/// at a time (its count of its mean), but over the ranges `read` (whose values are `exact`)
/// value by value (a bucket reaching into a range read is taken as its values read).
fn smooth_line(
    s: &SeriesSummary,
    slices: &[Slice],
    exact: &[Value],
    read: &[(u64, u64)],
    w: f64,
) -> Vec<Value> {
    let Some(start) = slices.first().map(|x| x.values.first.step) else {
        return Vec::new();
    };
    let overlaps_read = |b: &Bucket| {
        read.iter()
            .any(|r| b.first.step <= r.1 && r.0 <= b.last.step)
    };
    let mut ema = Ema::new(w);
    // The line at every value read and at every bucket's last step, from the first slice on.
    let mut line: Vec<Value> = Vec::new();
    let mut emit = |p: Value| {
        if p.0 >= start {
            line.push(p);
        }
    };
    let mut e = 0;
    for (_, x) in s.buckets() {
        if overlaps_read(x) {
            continue;
        }
        while let Some(v) = exact.get(e).filter(|v| v.0 < x.first.step) {
            let a = if v.1.is_finite() {
                ema.take(v.1, 1)
            } else {
                v.1
            };
            emit((v.0, a, v.2));
            e += 1;
        }
        if let Some(mean) = x.mean() {
            let a = ema.take(mean, x.finite);
            emit((x.last.step, a, x.last.wall));
        }
    }
    for v in &exact[e..] {
        let a = if v.1.is_finite() {
            ema.take(v.1, 1)
        } else {
            v.1
        };
        emit((v.0, a, v.2));
    }
    let mut out: Vec<Value> = Vec::new();
    let mut at = 0;
    for slice in slices {
        let (first, last) = (slice.values.first.step, slice.values.last.step);
        while at < line.len() && line[at].0 < first {
            at += 1;
        }
        let begin = at;
        while at < line.len() && line[at].0 <= last {
            at += 1;
        }
        let inside = &line[begin..at];
        let mut kept: Vec<Value> = if slice.read {
            let finite = inside.iter().filter(|p| !p.1.is_nan());
            let lo = finite.clone().min_by(|a, b| a.1.total_cmp(&b.1));
            let hi = finite.max_by(|a, b| a.1.total_cmp(&b.1));
            match (lo, hi) {
                (Some(lo), Some(hi)) => vec![*lo, *hi],
                // A slice of NaN: the line is NaN there.
                _ => inside.last().copied().into_iter().collect(),
            }
        } else {
            inside.last().copied().into_iter().collect()
        };
        kept.sort_by_key(|p| p.0);
        for p in kept {
            if out.last().is_none_or(|l| l.0 < p.0) {
                out.push(p);
            }
        }
    }
    out
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
        let s = summary_of(&values);
        let plan = plan(&s, None, None, 100).unwrap();
        assert_eq!(plan.width, 0);
        let every = Plan {
            width: 0,
            read: vec![(0, 4)],
            hi: 4,
        };
        let lines = draw(&s, None, None, &every, 100, Some(&values), w);
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

    /// The summary of `values`, taken in in order.
    fn summary_of(values: &[Value]) -> SeriesSummary {
        let mut s = SeriesSummary::default();
        for &(step, value, wall) in values {
            s.add(Point { step, value, wall });
        }
        s
    }

    /// A series of `n` steps with spikes and dips, as values and as a summary.
    fn series(n: u64) -> (Vec<Value>, SeriesSummary) {
        let values: Vec<Value> = (0..n)
            .map(|i| {
                let v = ((i * 7_919) % 1_009) as f64 / 1_009.0
                    + match i % 4_999 {
                        17 => 100.0,
                        2_500 => -100.0,
                        _ => 0.0,
                    };
                (i, v, 1e9 + i as f64)
            })
            .collect();
        let s = summary_of(&values);
        (values, s)
    }

    /// Checks `lines` against `values` in `lo..=hi`: every point is a value at its step, and
    /// each slice of the window holds its true lowest and highest value of the window.
    fn check(lines: &ScalarLines, values: &[Value], lo: u64, hi: u64) {
        for p in &lines.raw {
            assert_eq!(values[p.0 as usize], *p, "at {}", p.0);
            assert!((lo..=hi).contains(&p.0), "{} outside {lo}..={hi}", p.0);
        }
        let width = lines.width.max(1);
        let mut k = lo / width;
        while k * width <= hi {
            let (a, z) = ((k * width).max(lo), ((k + 1) * width - 1).min(hi));
            let inside = &values[a as usize..=z as usize];
            let min = inside.iter().map(|v| v.1).fold(f64::INFINITY, f64::min);
            let max = inside.iter().map(|v| v.1).fold(f64::NEG_INFINITY, f64::max);
            let shown: Vec<f64> = lines
                .raw
                .iter()
                .filter(|p| (a..=z).contains(&p.0))
                .map(|p| p.1)
                .collect();
            assert!(
                shown.contains(&min) && shown.contains(&max),
                "slice {a}..={z}: {min} {max} not in {shown:?}"
            );
            k += 1;
        }
    }

    /// The lines of the window `from..=to` of `s` drawn by `plan` with the files readable:
    /// the plan's ranges read again give the `values` within them.
    fn drawn(
        s: &SeriesSummary,
        values: &[Value],
        (from, to): (Option<f64>, Option<f64>),
        plan: &Plan,
    ) -> ScalarLines {
        let read: Vec<Value> = values
            .iter()
            .filter(|v| plan.read.iter().any(|r| r.0 <= v.0 && v.0 <= r.1))
            .copied()
            .collect();
        draw(s, from, to, plan, MAX_POINTS, Some(&read), 0.0)
    }

    #[test]
    fn windows_are_drawn_from_buckets_and_reads_with_every_slices_true_extremes() {
        let (values, s) = series(100_000);
        assert_eq!(s.width(), 128);
        // The whole run: the buckets alone.
        let whole = plan(&s, None, None, MAX_POINTS).unwrap();
        assert_eq!((whole.width, whole.read.clone()), (128, vec![]));
        let lines = drawn(&s, &values, (None, None), &whole);
        check(&lines, &values, 0, 99_999);
        assert_eq!(lines.raw.first().map(|p| p.0), Some(0));
        assert_eq!(lines.raw.last().map(|p| p.0), Some(99_999));
        // A narrow window: read whole, every value.
        let narrow = plan(&s, Some(5_000.0), Some(6_000.0), MAX_POINTS).unwrap();
        assert_eq!(narrow.read, vec![(5_000, 6_000)]);
        let lines = drawn(&s, &values, (Some(5_000.0), Some(6_000.0)), &narrow);
        assert_eq!(lines.width, 0);
        assert_eq!(lines.raw, values[5_000..=6_000].to_vec());
        // A window finer than the buckets but readable: read whole, cut by the downsampler's
        // width.
        let finer = plan(&s, Some(1_000.0), Some(4_500.0), MAX_POINTS).unwrap();
        assert_eq!(finer.read, vec![(1_000, 4_500)]);
        let lines = drawn(&s, &values, (Some(1_000.0), Some(4_500.0)), &finer);
        assert!(lines.width < 128 && lines.width > 1, "{}", lines.width);
        check(&lines, &values, 1_000, 4_500);
        // Wider than what is read again: the narrowest slices the buckets hold.
        let wider = plan(&s, Some(1_024.0), Some(11_007.0), MAX_POINTS).unwrap();
        assert_eq!((wider.width, wider.read.clone()), (128, vec![]));
        let lines = drawn(&s, &values, (Some(1_024.0), Some(11_007.0)), &wider);
        check(&lines, &values, 1_024, 11_007);
        // A wide window that cuts buckets at both ends: buckets inside, its edge slices read.
        let (from, to) = (10_050.0, 70_010.0);
        let wide = plan(&s, Some(from), Some(to), MAX_POINTS).unwrap();
        assert_eq!(wide.width % 128, 0);
        assert_eq!(wide.read.len(), 2, "{wide:?}");
        assert!(wide.read.iter().all(|r| r.1 - r.0 < wide.width));
        let lines = drawn(&s, &values, (Some(from), Some(to)), &wide);
        check(&lines, &values, 10_050, 70_010);
        assert_eq!(lines.raw.first().map(|p| p.0), Some(10_050));
        assert_eq!(lines.raw.last().map(|p| p.0), Some(70_010));
        // The same window when the files cannot be read: whole buckets, still true extremes
        // of theirs, reaching past the window's ends.
        let lines = draw(&s, Some(from), Some(to), &wide, MAX_POINTS, None, 0.0);
        check(&lines, &values, 9_984, 70_015);
        // Not vacuous: the spikes and dips are in the window and shown.
        assert!(lines.raw.iter().any(|p| p.1 > 99.0) && lines.raw.iter().any(|p| p.1 < -99.0));
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
