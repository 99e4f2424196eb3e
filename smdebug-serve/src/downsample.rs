//! Server-side downsampling: no chart is sent more than [`MAX_POINTS`] points per series.
//!
//! Min-max decimation (smdebug-profiler's one downsampler, [`smdebug_profiler::downsample`]):
//! the visible window is cut into `max_points / 2` equal time buckets and each bucket sends
//! its lowest and its highest point, in time order. Spikes survive (a single high sample in a
//! bucket is kept), and a zoomed window is cut again over its own range, so zooming in gets
//! finer detail down to the raw samples.

pub use smdebug_profiler::downsample::Coord;
use smdebug_profiler::downsample::{MinMax, PointSource};

/// The most points one series is ever sent.
pub const MAX_POINTS: usize = 2_000;

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
}
