//! A run's scalars as fixed-size multi-resolution summaries, taken in as they are read: per
//! tensor and mode, the steps held (as arithmetic runs: a scalar saved every step is one run
//! however long the job) and at most [`BUCKETS`] buckets of its values, each over an aligned
//! range of steps of one width (a power of two), with the count, the sum of the finite values
//! (their mean), the first, last, lowest and highest value with their steps and wall times.
//! When a value would make one bucket too many, the width doubles and neighbouring buckets are
//! merged in pairs: a 400,000-step run's series is at most 1,024 buckets, as a 1,000-step run's
//! is. The dashboard keeps its scalars so, and the profiling report draws its curves from
//! them, so that neither holds memory in proportion to the run's length.
//!
//! Every number a bucket holds is one of the files' values or their true count, sum, lowest or
//! highest over the bucket's steps: a chart drawn from buckets (aligned on multiples of a width
//! that is a multiple of theirs) shows each slice's true lowest and highest value. A window
//! too narrow for the buckets is read again from the run's files (the dashboard's zooms).

use std::collections::BTreeMap;

use smdebug_core::Mode;
use smdebug_read::trial::{ScalarBatch, ScalarTracks};

/// The most buckets a series keeps.
pub const BUCKETS: usize = 1024;

/// One value: its global step, the value, and its event record's wall time.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Point {
    /// The global step.
    pub step: u64,
    /// The value.
    pub value: f64,
    /// Its event record's wall time, seconds since the epoch.
    pub wall: f64,
}

/// The values of one aligned range of steps.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Bucket {
    /// Values in it.
    pub count: u32,
    /// Finite values in it.
    pub finite: u32,
    /// Sum of the finite values.
    pub sum: f64,
    /// The value at its first step.
    pub first: Point,
    /// The value at its last step.
    pub last: Point,
    /// Its lowest and highest value (`-inf` and `+inf` rank below and above every finite
    /// value; NaN with nothing: a bucket of NaN only has its first value as both), the earlier
    /// step of equal ones.
    pub min: Point,
    /// Its highest value (as `min`).
    pub max: Point,
}

impl Bucket {
    /// A bucket of one value.
    pub fn of(p: Point) -> Bucket {
        let finite = p.value.is_finite();
        Bucket {
            count: 1,
            finite: u32::from(finite),
            sum: if finite { p.value } else { 0.0 },
            first: p,
            last: p,
            min: p,
            max: p,
        }
    }

    /// The mean of its finite values.
    pub fn mean(&self) -> Option<f64> {
        (self.finite > 0).then(|| self.sum / f64::from(self.finite))
    }

    /// Both buckets' values as one.
    pub fn merge(&mut self, o: &Bucket) {
        self.count += o.count;
        self.finite += o.finite;
        self.sum += o.sum;
        if o.first.step < self.first.step {
            self.first = o.first;
        }
        if o.last.step > self.last.step {
            self.last = o.last;
        }
        self.min = lower(self.min, o.min);
        self.max = higher(self.max, o.max);
    }
}

/// The lower of two candidates for a lowest value (NaN ranks with nothing).
fn lower(a: Point, b: Point) -> Point {
    match (a.value.is_nan(), b.value.is_nan()) {
        (true, false) => b,
        (false, true) | (true, true) => earlier(a, b, a.value.is_nan()),
        (false, false) if b.value < a.value => b,
        (false, false) if b.value == a.value && b.step < a.step => b,
        _ => a,
    }
}

fn higher(a: Point, b: Point) -> Point {
    match (a.value.is_nan(), b.value.is_nan()) {
        (true, false) => b,
        (false, true) | (true, true) => earlier(a, b, a.value.is_nan()),
        (false, false) if b.value > a.value => b,
        (false, false) if b.value == a.value && b.step < a.step => b,
        _ => a,
    }
}

/// `a` when it is a number; of two NaN, the earlier.
fn earlier(a: Point, b: Point, both_nan: bool) -> Point {
    if both_nan && b.step < a.step { b } else { a }
}

/// A run of steps where a series' values were not finite.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NonFinite {
    /// Its first step.
    pub from: u64,
    /// Its last step.
    pub to: u64,
    /// Values in it that were not finite.
    pub count: u32,
    /// A NaN was seen in it.
    pub nan: bool,
    /// A ±Inf was seen in it.
    pub inf: bool,
}

/// One scalar's values in one mode, summarized.
#[derive(Clone, Debug, Default)]
pub struct SeriesSummary {
    /// Values taken in.
    len: usize,
    /// The buckets' width in steps (a power of two; 1 until there are too many).
    width: u64,
    /// `(step / width, bucket)`, in step order, only buckets with values.
    buckets: Vec<(u64, Bucket)>,
}

impl SeriesSummary {
    /// Takes in one value; a step already held keeps its first value (as smdebug-io's scalar
    /// columns do for a step saved by several workers). True when it was new. The summary
    /// keeps no list of steps (a scalar cut by another mode's steps would cost bytes a step):
    /// a step is known to be held when it is the last one, or a bucket's first, last, lowest
    /// or highest value's. (Several workers' values of a step come one after the other; only
    /// a worker's step read after later steps, and saved by another worker too, could be
    /// counted twice.)
    pub fn add(&mut self, p: Point) -> bool {
        self.width = self.width.max(1);
        let index = p.step / self.width;
        if let Some(last) = self.buckets.last_mut()
            && last.0 == index
            && last.1.last.step < p.step
        {
            last.1.merge(&Bucket::of(p));
            self.len += 1;
            return true;
        }
        match self.buckets.binary_search_by_key(&index, |b| b.0) {
            Ok(i) => {
                let b = &mut self.buckets[i].1;
                if [b.first, b.last, b.min, b.max]
                    .iter()
                    .any(|q| q.step == p.step)
                {
                    return false;
                }
                b.merge(&Bucket::of(p));
            }
            Err(i) => {
                self.buckets.insert(i, (index, Bucket::of(p)));
                while self.buckets.len() > BUCKETS {
                    self.coarsen();
                }
            }
        }
        self.len += 1;
        true
    }

    /// Doubles the width, merging neighbours.
    fn coarsen(&mut self) {
        self.width *= 2;
        let mut merged: Vec<(u64, Bucket)> = Vec::with_capacity(BUCKETS);
        for (index, bucket) in self.buckets.drain(..) {
            let index = index / 2;
            match merged.last_mut() {
                Some(last) if last.0 == index => last.1.merge(&bucket),
                _ => merged.push((index, bucket)),
            }
        }
        self.buckets = merged;
    }

    /// How many values.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it holds no value.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The buckets' width in steps.
    pub fn width(&self) -> u64 {
        self.width.max(1)
    }

    /// `(step / width, bucket)` in step order.
    pub fn buckets(&self) -> &[(u64, Bucket)] {
        &self.buckets
    }

    /// The last value.
    pub fn last(&self) -> Option<Point> {
        self.buckets.last().map(|b| b.1.last)
    }

    /// The first value.
    pub fn first(&self) -> Option<Point> {
        self.buckets.first().map(|b| b.1.first)
    }

    /// The buckets holding values at steps `from <= step <= to` (either end open), or
    /// possibly so (a bucket partly inside the window).
    pub fn buckets_within(&self, from: Option<f64>, to: Option<f64>) -> &[(u64, Bucket)] {
        let b = &self.buckets;
        let start = from.map_or(0, |f| b.partition_point(|x| (x.1.last.step as f64) < f));
        let end = to.map_or(b.len(), |t| {
            b.partition_point(|x| (x.1.first.step as f64) <= t)
        });
        &b[start..end.max(start)]
    }

    /// The values in steps `from <= step <= to` (either end open), as the buckets know them:
    /// `(first, last, how many)` with the buckets partly inside the window counted whole and
    /// their steps clipped to it, so the count is at least the window's and the steps bound
    /// its values'. `None` when no bucket holds a value in the window.
    pub fn steps_within(&self, from: Option<f64>, to: Option<f64>) -> Option<(u64, u64, usize)> {
        let inside = self.buckets_within(from, to);
        let (first, last) = (inside.first()?.1, inside.last()?.1);
        let lo = from.map_or(first.first.step, |f| first.first.step.max(f.ceil() as u64));
        let hi = to.map_or(last.last.step, |t| last.last.step.min(t.floor() as u64));
        // A window between two values of one bucket (or two buckets) holds none of them, or
        // some: the files say.
        (lo <= hi).then(|| (lo, hi, inside.iter().map(|b| b.1.count as usize).sum()))
    }

    /// Where the values were not finite (NaN, ±Inf), within steps `from..=to` (either end
    /// open): runs of consecutive buckets holding such values, each with the steps it spans,
    /// how many values there were not finite and which kinds were seen; at most `limit` runs
    /// (the first ones). With buckets one step wide (a series of up to 1,024 values) each run
    /// is exactly its steps; wider buckets bound them.
    pub fn non_finite(&self, from: Option<f64>, to: Option<f64>, limit: usize) -> Vec<NonFinite> {
        let mut out: Vec<NonFinite> = Vec::new();
        // The previous bucket held non-finite values too: one run.
        let mut after_bad = false;
        for (_, b) in self.buckets_within(from, to) {
            if b.finite == b.count {
                after_bad = false;
                continue;
            }
            let known = [b.first, b.last, b.min, b.max];
            let nan = known.iter().any(|p| p.value.is_nan());
            let inf = known.iter().any(|p| p.value.is_infinite());
            // The bucket's extent, narrowed to its known non-finite points when all of its
            // values are such or it is one step wide.
            let bad: Vec<u64> = known
                .iter()
                .filter(|p| !p.value.is_finite())
                .map(|p| p.step)
                .collect();
            let (lo, hi) = if b.finite == 0 {
                (b.first.step, b.last.step)
            } else if b.finite + 1 == b.count && bad.len() == 1 {
                (bad[0], bad[0])
            } else {
                (b.first.step, b.last.step)
            };
            let count = b.count - b.finite;
            let full = out.len() >= limit;
            match out.last_mut() {
                Some(run) if after_bad => {
                    run.to = hi;
                    run.count += count;
                    run.nan |= nan;
                    run.inf |= inf;
                }
                _ if full => break,
                _ => out.push(NonFinite {
                    from: lo,
                    to: hi,
                    count,
                    nan,
                    inf,
                }),
            }
            after_bad = true;
        }
        out
    }

    /// Bytes held on the heap.
    pub fn heap_bytes(&self) -> usize {
        self.buckets.capacity() * std::mem::size_of::<(u64, Bucket)>()
    }
}

/// One scalar's summaries, by mode.
pub type SummaryTrack = BTreeMap<Mode, SeriesSummary>;

/// Every scalar of a run, summarized: what the dashboard keeps of its scalar values (the
/// [`ScalarTracks`] it derefs to: `get`, `iter`, `values`, `first_wall_time`).
#[derive(Debug, Default)]
pub struct ScalarSummaries(ScalarTracks<SeriesSummary>);

impl std::ops::Deref for ScalarSummaries {
    type Target = ScalarTracks<SeriesSummary>;

    fn deref(&self) -> &ScalarTracks<SeriesSummary> {
        &self.0
    }
}

impl ScalarSummaries {
    /// Takes in a follower's batch of new values.
    pub fn add(&mut self, batch: ScalarBatch) {
        for (name, mode, points) in batch {
            let (series, taken) = self.0.series_mut(name, mode);
            for (step, value, wall) in points {
                if series.add(Point { step, value, wall }) {
                    taken.count(wall);
                }
            }
        }
    }

    /// Bytes held on the heap (the maps' nodes and names not counted).
    pub fn heap_bytes(&self) -> usize {
        self.series().map(SeriesSummary::heap_bytes).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(step: u64, value: f64) -> Point {
        Point {
            step,
            value,
            wall: step as f64,
        }
    }

    #[test]
    fn buckets_stay_few_and_hold_true_extremes_counts_and_sums() {
        let mut s = SeriesSummary::default();
        let values: Vec<f64> = (0..100_000u64)
            .map(|i| ((i * 7919) % 1000) as f64 - 500.0)
            .collect();
        for (i, v) in values.iter().enumerate() {
            assert!(s.add(p(i as u64, *v)));
        }
        // A step again (another worker's value of it, just after) keeps its first value; so
        // does a bucket's first step read again late.
        assert!(!s.add(p(99_999, 1e9)));
        assert!(!s.add(p(0, 1e9)));
        assert!(s.buckets().len() <= BUCKETS);
        assert!(s.buckets().len() > BUCKETS / 2);
        let w = s.width();
        assert!(w.is_power_of_two());
        for (index, b) in s.buckets() {
            let range = (index * w) as usize..((index + 1) * w).min(100_000) as usize;
            let inside = &values[range.clone()];
            assert_eq!(b.count as usize, inside.len());
            let min = inside.iter().copied().fold(f64::INFINITY, f64::min);
            let max = inside.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            assert_eq!(b.min.value, min);
            assert_eq!(b.max.value, max);
            assert_eq!(values[b.min.step as usize], min);
            assert_eq!(b.sum, inside.iter().sum::<f64>());
            assert_eq!(b.first.step as usize, range.start);
            assert_eq!(b.last.step as usize, range.end - 1);
        }
        assert_eq!(s.len(), 100_000);
        // Buckets partly inside a window are counted whole.
        let (lo, hi, n) = s.steps_within(Some(1_000.5), Some(2_000.0)).unwrap();
        assert_eq!((lo, hi), (1_001, 2_000));
        assert!(n >= 1_000 && n <= 1_000 + 2 * w as usize, "{n}");
    }

    #[test]
    fn non_finite_values_rank_as_the_downsampler_ranks_them() {
        let mut s = SeriesSummary::default();
        for (i, v) in [f64::NAN, 3.0, f64::INFINITY, -2.0, f64::NEG_INFINITY]
            .into_iter()
            .enumerate()
        {
            s.add(p(i as u64 * 1000, v));
        }
        // Out of order, into a bucket held already.
        s.add(p(1, f64::NAN));
        while s.buckets().len() > 1 {
            s.coarsen();
        }
        let b = s.buckets()[0].1;
        assert_eq!((b.count, b.finite), (6, 2));
        assert_eq!(b.max.value, f64::INFINITY);
        assert_eq!(b.min.value, f64::NEG_INFINITY);
        assert_eq!(b.mean(), Some(0.5));
        assert!(b.first.value.is_nan() && b.first.step == 0);
        let mut nan = SeriesSummary::default();
        nan.add(p(3, f64::NAN));
        nan.add(p(2, f64::NAN));
        assert_eq!(nan.buckets()[0].1.min.step, 2);
        // Steps whose values were not finite, in runs.
        let mut s = SeriesSummary::default();
        for step in 0..20u64 {
            let v = match step {
                3 => f64::INFINITY,
                10..=14 => f64::NAN,
                _ => step as f64,
            };
            s.add(p(step, v));
        }
        let runs = s.non_finite(None, None, 10);
        assert_eq!(
            runs,
            vec![
                NonFinite {
                    from: 3,
                    to: 3,
                    count: 1,
                    nan: false,
                    inf: true
                },
                NonFinite {
                    from: 10,
                    to: 14,
                    count: 5,
                    nan: true,
                    inf: false
                },
            ]
        );
        assert_eq!(s.non_finite(Some(5.0), None, 10).len(), 1);
        assert_eq!(s.non_finite(None, None, 1).len(), 1);
    }
}
