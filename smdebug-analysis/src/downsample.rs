//! The one min-max downsampler: a series cut into slices of equal width along x, each slice
//! keeping its lowest and its highest point, in x order. Spikes and dips survive (a single
//! high sample in a slice is kept), and a window asked for again over a narrower range is cut
//! over that range, so zooming in reaches the raw points. The report's scalar charts and the
//! dashboard's series both go through it.
//!
//! With [`MinMax::aligned`], the slices are instead of a width from 1, 2, 3, 4, 6, 8, 12, 16, …
//! x units (2^k and 3·2^k), the narrowest that covers the window in the slices allowed, each
//! starting at a multiple of it: a series that grows keeps the slices it had until the width
//! steps up, so a client can take the last slices again rather than the whole series.
//!
//! Non-finite values stay visible: `+inf` ranks above and `-inf` below every finite value, so
//! an overflow is a slice's highest or lowest point; NaN ranks with nothing, and a slice of
//! NaN only keeps its first point.
//!
//! ```
//! use smdebug_analysis::downsample::{MinMax, min_max};
//!
//! let mut points: Vec<(u64, f64)> = (0..10_000).map(|s| (s, 1.0)).collect();
//! points[4_321].1 = 50.0;
//! points[7_000].1 = f64::INFINITY;
//! let kept = min_max(&points, &MinMax::new(100).keep_ends(true));
//! assert!(kept.len() <= 100);
//! assert_eq!((kept[0], kept[kept.len() - 1]), (points[0], points[9_999]));
//! assert!(kept.contains(&(4_321, 50.0)) && kept.contains(&(7_000, f64::INFINITY)));
//! ```

/// An x coordinate: a time in µs (`u64`), a step, or seconds.
pub trait Coord: Copy {
    /// As a float, for slicing.
    fn x(self) -> f64;
}

impl Coord for u64 {
    fn x(self) -> f64 {
        self as f64
    }
}

impl Coord for u32 {
    fn x(self) -> f64 {
        f64::from(self)
    }
}

impl Coord for f64 {
    fn x(self) -> f64 {
        self
    }
}

/// What [`min_max`] keeps.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MinMax {
    /// The most points returned (at least 2 are always allowed).
    pub max_points: usize,
    /// Only points with `x >= from`.
    pub from: Option<f64>,
    /// Only points with `x <= to`.
    pub to: Option<f64>,
    /// Whether the window's first and last points are always kept (within `max_points`).
    pub keep_ends: bool,
    /// Whether the slices are aligned on multiples of a width from a fixed sequence rather
    /// than the window's range cut in equal parts.
    pub aligned: bool,
}

impl MinMax {
    /// At most `max_points` points of the whole series, ends not forced.
    pub fn new(max_points: usize) -> MinMax {
        MinMax {
            max_points,
            from: None,
            to: None,
            keep_ends: false,
            aligned: false,
        }
    }

    /// Only the points with `from <= x <= to` (either end open).
    pub fn window(mut self, from: Option<f64>, to: Option<f64>) -> MinMax {
        self.from = from;
        self.to = to;
        self
    }

    /// Keeps the window's first and last points.
    pub fn keep_ends(mut self, on: bool) -> MinMax {
        self.keep_ends = on;
        self
    }

    /// Slices aligned on multiples of their width ([`slice_width`]).
    pub fn aligned(mut self, on: bool) -> MinMax {
        self.aligned = on;
        self
    }
}

/// The width of aligned slices: the narrowest of 1, 2, 3, 4, 6, 8, 12, … (2^k and 3·2^k) for
/// which the slices from the one holding `lo` to the one holding `hi` (slice `i` covering
/// `i·w <= x < (i + 1)·w`) are at most `slices` (at least 1).
pub fn slice_width(lo: f64, hi: f64, slices: usize) -> f64 {
    let slices = slices.max(1) as f64;
    let mut w = 1.0_f64;
    loop {
        if (hi / w).floor() - (lo / w).floor() < slices || !w.is_finite() {
            return w;
        }
        // 1 → 2 → 3 → 4 → 6 → 8 → 12 → 16 …
        let power = w.log2().fract() == 0.0;
        w = if w == 1.0 {
            2.0
        } else if power {
            w / 2.0 * 3.0
        } else {
            w / 3.0 * 4.0
        };
    }
}

/// Points ordered by x, read by index: a slice of pairs, or a series' compact
/// [`Points`](smdebug_read::profile::Points).
pub trait PointSource<X: Coord> {
    /// How many points.
    fn count(&self) -> usize;
    /// The `i`-th point.
    fn point(&self, i: usize) -> (X, f64);
}

impl<X: Coord> PointSource<X> for [(X, f64)] {
    fn count(&self) -> usize {
        self.len()
    }

    fn point(&self, i: usize) -> (X, f64) {
        self[i]
    }
}

impl<X: Coord> PointSource<X> for Vec<(X, f64)> {
    fn count(&self) -> usize {
        self.len()
    }

    fn point(&self, i: usize) -> (X, f64) {
        self[i]
    }
}

impl PointSource<u64> for smdebug_read::profile::Points {
    fn count(&self) -> usize {
        self.len()
    }

    fn point(&self, i: usize) -> (u64, f64) {
        self.get(i)
    }
}

/// The first index in `lo..hi` whose point is not `before` (`before` holds for a prefix).
fn first_not<X: Coord, S: PointSource<X> + ?Sized>(
    points: &S,
    (mut lo, mut hi): (usize, usize),
    before: impl Fn(f64) -> bool,
) -> usize {
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if before(points.point(mid).0.x()) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    lo
}

/// The points of `points` (ordered by x) within `options`' window: all of them when they fit
/// in `max_points`, else the lowest and the highest point of each of `max_points / 2` slices
/// of equal width (one slice fewer when the ends are kept), in x order. Every point returned
/// is one of `points`.
pub fn min_max<X: Coord, S: PointSource<X> + ?Sized>(
    points: &S,
    options: &MinMax,
) -> Vec<(X, f64)> {
    min_max_sliced(points, options).0
}

/// [`min_max`], and the width of the aligned slices it used: `None` when every point of the
/// window was kept or the slices are not aligned.
pub fn min_max_sliced<X: Coord, S: PointSource<X> + ?Sized>(
    points: &S,
    options: &MinMax,
) -> (Vec<(X, f64)>, Option<f64>) {
    let max_points = options.max_points.max(2);
    let n = points.count();
    let lo = options
        .from
        .map_or(0, |f| first_not(points, (0, n), |x| x < f));
    let hi = options
        .to
        .map_or(n, |t| first_not(points, (0, n), |x| x <= t))
        .max(lo);
    if hi - lo <= max_points {
        return ((lo..hi).map(|i| points.point(i)).collect(), None);
    }
    let mut out = Vec::with_capacity(max_points);
    let (start, end) = (points.point(lo).0.x(), points.point(hi - 1).0.x());
    // Room for no inner slice with the ends kept: the first and the last point are what fits.
    let slices = if options.keep_ends {
        (max_points - 2) / 2
    } else {
        max_points / 2
    };
    let width = options
        .aligned
        .then(|| slice_width(start, end, slices.max(1)));
    let span = end - start;
    let slice_of = |x: f64| -> u64 {
        match width {
            Some(w) => (x / w).floor() as u64,
            None if span > 0.0 => {
                (((x - start) / span * slices as f64) as u64).min(slices as u64 - 1)
            }
            None => 0,
        }
    };
    if options.keep_ends {
        out.push(points.point(lo));
        if slices > 0 {
            extremes(points, lo + 1..hi - 1, &slice_of, &mut out);
        }
        out.push(points.point(hi - 1));
    } else {
        extremes(points, lo..hi, &slice_of, &mut out);
    }
    (out, width)
}

/// How a value ranks for a slice's lowest and highest: `None` for NaN.
fn rank(v: f64) -> Option<f64> {
    (!v.is_nan()).then_some(v)
}

/// Appends the lowest and highest point of the points `within` in each slice (`slice_of` an
/// x, non-decreasing along the points).
fn extremes<X: Coord, S: PointSource<X> + ?Sized>(
    points: &S,
    within: std::ops::Range<usize>,
    slice_of: &dyn Fn(f64) -> u64,
    out: &mut Vec<(X, f64)>,
) {
    let mut at = within.start;
    let mut next = (at < within.end).then(|| points.point(at));
    while let Some(first) = next {
        let slice = slice_of(first.0.x());
        let (mut lo, mut hi) = (None::<(X, f64)>, None::<(X, f64)>);
        let (mut lo_at, mut hi_at) = (0, 0);
        let mut p = first;
        loop {
            if let Some(v) = rank(p.1) {
                if lo.is_none_or(|l| v < l.1) {
                    (lo, lo_at) = (Some(p), at);
                }
                if hi.is_none_or(|h| v > h.1) {
                    (hi, hi_at) = (Some(p), at);
                }
            }
            at += 1;
            next = (at < within.end).then(|| points.point(at));
            match next {
                Some(q) if slice_of(q.0.x()) == slice => p = q,
                _ => break,
            }
        }
        match (lo, hi) {
            (Some(l), Some(h)) if lo_at != hi_at => {
                let (a, b) = if lo_at < hi_at { (l, h) } else { (h, l) };
                out.push(a);
                out.push(b);
            }
            (Some(one), _) | (_, Some(one)) => out.push(one),
            // Nothing but NaN in the slice: its first point stands for it.
            (None, None) => out.push(first),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_series_pass_unchanged_and_long_ones_are_bounded() {
        let short: Vec<(f64, f64)> = (0..100).map(|i| (i as f64, i as f64)).collect();
        assert_eq!(min_max(&short, &MinMax::new(2_000)), short);
        let long: Vec<(f64, f64)> = (0..1_000_000)
            .map(|i| (i as f64, (i % 97) as f64))
            .collect();
        for ends in [false, true] {
            let out = min_max(&long, &MinMax::new(2_000).keep_ends(ends));
            assert!(out.len() <= 2_000, "{}", out.len());
            assert!(out.len() >= 2_000 - 4, "{}", out.len());
            assert!(out.windows(2).all(|w| w[0].0 < w[1].0));
        }
    }

    #[test]
    fn aligned_slices_stay_put_while_a_series_grows() {
        assert_eq!(slice_width(0.0, 99.0, 100), 1.0);
        assert_eq!(slice_width(0.0, 100.0, 100), 2.0);
        assert_eq!(slice_width(0.0, 250.0, 100), 3.0);
        assert_eq!(slice_width(50.0, 1_200.0, 100), 12.0);
        assert_eq!(slice_width(50.0, 1_249.0, 100), 16.0);
        let series: Vec<(u64, f64)> = (0..20_000u64)
            .map(|i| (i, ((i * 7_919) % 1_009) as f64))
            .collect();
        let options = MinMax::new(500).keep_ends(true).aligned(true);
        let (whole, width) = min_max_sliced(&series, &options);
        assert!(whole.len() <= 500, "{}", whole.len());
        let width = width.unwrap();
        // Every prefix cut with the same width: the whole series' points before the slice
        // holding the prefix's last point are the prefix's, and the prefix's last point is kept.
        let mut same = 0;
        for n in (1_000..20_000).step_by(777) {
            let (part, w) = min_max_sliced(&series[..n], &options);
            assert!(part.len() <= 500);
            assert_eq!(part.last(), series.get(n - 1));
            if w != Some(width) {
                continue;
            }
            same += 1;
            let since = ((n - 1) as f64 / width).floor() * width;
            let before = |v: &[(u64, f64)]| -> Vec<(u64, f64)> {
                v.iter().copied().filter(|p| (p.0 as f64) < since).collect()
            };
            assert_eq!(before(&part), before(&whole), "prefix of {n}");
        }
        assert!(same >= 5, "{same} prefixes had the whole series' width");
        // Not aligned: no width; every point kept: none.
        assert_eq!(min_max_sliced(&series, &MinMax::new(500)).1, None);
        assert_eq!(min_max_sliced(&series[..100], &options).1, None);
    }

    #[test]
    fn the_bound_holds_for_tiny_budgets() {
        let long: Vec<(u64, f64)> = (0..1_000).map(|i| (i, (i % 7) as f64)).collect();
        for max in 0..8 {
            for ends in [false, true] {
                let out = min_max(&long, &MinMax::new(max).keep_ends(ends));
                assert!(
                    out.len() <= max.max(2),
                    "max {max} ends {ends}: {}",
                    out.len()
                );
                assert!(!out.is_empty());
                if ends {
                    assert_eq!((out[0], out[out.len() - 1]), (long[0], long[999]));
                }
            }
        }
    }

    #[test]
    fn spikes_and_infinities_survive_nan_only_when_alone() {
        let mut long: Vec<(u32, f64)> = (0..100_000).map(|i| (i, 1.0)).collect();
        long[54_321].1 = 500.0;
        long[7].1 = -3.0;
        long[80_000].1 = f64::NEG_INFINITY;
        long[90_000].1 = f64::NAN;
        // A slice of NaN only: 500 slices of 200 points over 100,000.
        for p in &mut long[60_000..60_400] {
            p.1 = f64::NAN;
        }
        let out = min_max(&long, &MinMax::new(1_000));
        assert!(out.len() <= 1_000);
        assert!(out.contains(&(54_321, 500.0)));
        assert!(out.contains(&(7, -3.0)));
        assert!(out.contains(&(80_000, f64::NEG_INFINITY)));
        assert!(!out.iter().any(|p| p.0 == 90_000), "NaN among numbers");
        assert!(out.iter().any(|p| p.0 == 60_000 && p.1.is_nan()));
    }

    #[test]
    fn a_window_is_cut_over_its_own_range_and_zoom_gets_the_raw_points() {
        let long: Vec<(u32, f64)> = (0..100_000).map(|i| (i, 1.0)).collect();
        let zoom = min_max(
            &long,
            &MinMax::new(200).window(Some(54_300.0), Some(54_400.0)),
        );
        assert_eq!(zoom.len(), 101);
        assert_eq!((zoom[0].0, zoom[100].0), (54_300, 54_400));
        let pts: Vec<(f64, f64)> = (0..10).map(|i| (i as f64, 0.0)).collect();
        assert!(min_max(&pts, &MinMax::new(100).window(Some(20.0), Some(30.0))).is_empty());
        assert!(min_max(&pts, &MinMax::new(100).window(Some(5.0), Some(2.0))).is_empty());
        let empty: &[(f64, f64)] = &[];
        assert!(min_max(empty, &MinMax::new(100)).is_empty());
    }
}
