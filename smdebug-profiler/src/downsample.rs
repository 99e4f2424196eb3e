//! The one min-max downsampler: a series cut into slices of equal width along x, each slice
//! keeping its lowest and its highest point, in x order. Spikes and dips survive (a single
//! high sample in a slice is kept), and a window asked for again over a narrower range is cut
//! over that range, so zooming in reaches the raw points. The report's scalar charts and the
//! dashboard's series both go through it.
//!
//! Non-finite values stay visible: `+inf` ranks above and `-inf` below every finite value, so
//! an overflow is a slice's highest or lowest point; NaN ranks with nothing, and a slice of
//! NaN only keeps its first point.
//!
//! ```
//! use smdebug_profiler::downsample::{MinMax, min_max};
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
}

impl MinMax {
    /// At most `max_points` points of the whole series, ends not forced.
    pub fn new(max_points: usize) -> MinMax {
        MinMax {
            max_points,
            from: None,
            to: None,
            keep_ends: false,
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
}

/// Points ordered by x, read by index: a slice of pairs, or a series' compact
/// [`Points`](crate::reader::Points).
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

impl PointSource<u64> for crate::reader::Points {
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
        return (lo..hi).map(|i| points.point(i)).collect();
    }
    let mut out = Vec::with_capacity(max_points);
    let range = (points.point(lo).0.x(), points.point(hi - 1).0.x());
    if options.keep_ends {
        out.push(points.point(lo));
        // Room for no inner slice: the first and the last point are what fits.
        let slices = (max_points - 2) / 2;
        if slices > 0 {
            extremes(points, lo + 1..hi - 1, range, slices, &mut out);
        }
        out.push(points.point(hi - 1));
    } else {
        extremes(points, lo..hi, range, max_points / 2, &mut out);
    }
    out
}

/// How a value ranks for a slice's lowest and highest: `None` for NaN.
fn rank(v: f64) -> Option<f64> {
    (!v.is_nan()).then_some(v)
}

/// Appends the lowest and highest point of the points `within` in each of `slices`
/// equal-width slices of the x range `(start, end)`.
fn extremes<X: Coord, S: PointSource<X> + ?Sized>(
    points: &S,
    within: std::ops::Range<usize>,
    (start, end): (f64, f64),
    slices: usize,
    out: &mut Vec<(X, f64)>,
) {
    let span = end - start;
    let slice_of = |x: f64| {
        if span > 0.0 {
            (((x - start) / span * slices as f64) as usize).min(slices - 1)
        } else {
            0
        }
    };
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
