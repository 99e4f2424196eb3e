//! Scalar values held compactly: per tensor and mode, one column of values in step order.
//!
//! - **Steps** are held as arithmetic runs (`first`, `stride`, where the run starts): a column
//!   saved every step, or every tenth, is one run however long it is, and a mode's column cut
//!   by another mode's steps is one run per stretch.
//! - **Values** are `f32` while every value taken in is one exactly (a loss computed in `f32`
//!   and widened), else `f64`: 4 or 8 bytes a value.
//! - **Wall times** (each value's event record's) are `f32` offsets from the column's first:
//!   4 bytes a value. An `f32` offset keeps about seven significant digits: a wall time within a
//!   day of the column's first value is held to 4 ms, within ten days to 32 ms (half of `f32`'s
//!   spacing there), ample for a relative or wall-clock axis. [`Column::wall_time`] gives it back
//!   as seconds since the Unix epoch.
//!
//! So 8 to 12 bytes a value, where `(u64, f64)` pairs with their wall time took 20.

use std::collections::BTreeMap;

use smdebug_core::Mode;

/// A stretch of steps `first, first + stride, ...`, starting at value `at` of its column (it
/// runs to the next run's `at`, or to the column's end).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct StepRun {
    first: u64,
    stride: u64,
    at: usize,
}

/// A column's steps, increasing, as arithmetic runs.
#[derive(Clone, Debug, Default, PartialEq)]
struct Steps {
    runs: Vec<StepRun>,
    len: usize,
}

impl Steps {
    fn len(&self) -> usize {
        self.len
    }

    /// The step of value `i`.
    fn get(&self, i: usize) -> u64 {
        let run = &self.runs[self.runs.partition_point(|run| run.at <= i) - 1];
        run.first + run.stride * (i - run.at) as u64
    }

    fn last(&self) -> Option<u64> {
        (self.len > 0).then(|| self.get(self.len - 1))
    }

    /// `Ok(i)` when step `step` is value `i`, else `Err(i)` where it would go.
    fn search(&self, step: u64) -> Result<usize, usize> {
        // The last run starting at or before `step`.
        let r = self.runs.partition_point(|run| run.first <= step);
        if r == 0 {
            return Err(0);
        }
        let run = &self.runs[r - 1];
        let end = self.runs.get(r).map_or(self.len, |next| next.at);
        let offset = step - run.first;
        let n = (end - run.at) as u64;
        if run.stride == 0 {
            // A run of one value.
            return if offset == 0 {
                Ok(run.at)
            } else {
                Err(run.at + 1)
            };
        }
        let k = offset / run.stride;
        if k >= n {
            return Err(end);
        }
        if offset % run.stride == 0 {
            Ok(run.at + k as usize)
        } else {
            Err(run.at + k as usize + 1)
        }
    }

    /// Appends `step`, greater than the last.
    fn push(&mut self, step: u64) {
        match self.runs.last_mut() {
            None => self.runs.push(StepRun {
                first: step,
                stride: 0,
                at: 0,
            }),
            Some(run) => {
                let n = self.len - run.at;
                let last = run.first + run.stride * (n as u64 - 1);
                if n == 1 {
                    run.stride = step - last;
                } else if step - last != run.stride {
                    self.runs.push(StepRun {
                        first: step,
                        stride: 0,
                        at: self.len,
                    });
                }
            }
        }
        self.len += 1;
    }

    /// Inserts `step` (not held) at value `i`: the runs are built again (a late step, rare).
    fn insert(&mut self, i: usize, step: u64) {
        let mut all: Vec<u64> = (0..self.len).map(|j| self.get(j)).collect();
        all.insert(i, step);
        *self = Steps::default();
        for s in all {
            self.push(s);
        }
    }

    fn heap_bytes(&self) -> usize {
        self.runs.capacity() * std::mem::size_of::<StepRun>()
    }

    fn shrink(&mut self) {
        self.runs.shrink_to_fit();
    }
}

/// A column's values: `f32` while each is one exactly, else `f64`.
#[derive(Clone, Debug, PartialEq)]
enum Values {
    Narrow(Vec<f32>),
    Wide(Vec<f64>),
}

impl Default for Values {
    fn default() -> Values {
        Values::Narrow(Vec::new())
    }
}

/// Whether `v` is an `f32` exactly (NaN counts: a NaN is kept as one).
fn fits_f32(v: f64) -> bool {
    v.is_nan() || f64::from(v as f32) == v
}

impl Values {
    fn get(&self, i: usize) -> f64 {
        match self {
            Values::Narrow(v) => f64::from(v[i]),
            Values::Wide(v) => v[i],
        }
    }

    fn widen(&mut self) {
        if let Values::Narrow(narrow) = self {
            let mut wide = Vec::with_capacity(narrow.capacity());
            wide.extend(narrow.iter().map(|&v| f64::from(v)));
            *self = Values::Wide(wide);
        }
    }

    fn insert(&mut self, i: usize, value: f64) {
        if !fits_f32(value) {
            self.widen();
        }
        match self {
            Values::Narrow(v) => v.insert(i, value as f32),
            Values::Wide(v) => v.insert(i, value),
        }
    }

    fn reserve(&mut self, n: usize) {
        match self {
            Values::Narrow(v) => v.reserve_exact(n),
            Values::Wide(v) => v.reserve_exact(n),
        }
    }

    fn spare(&self) -> usize {
        match self {
            Values::Narrow(v) => v.capacity() - v.len(),
            Values::Wide(v) => v.capacity() - v.len(),
        }
    }

    fn heap_bytes(&self) -> usize {
        match self {
            Values::Narrow(v) => v.capacity() * std::mem::size_of::<f32>(),
            Values::Wide(v) => v.capacity() * std::mem::size_of::<f64>(),
        }
    }

    fn shrink(&mut self) {
        match self {
            Values::Narrow(v) => v.shrink_to_fit(),
            Values::Wide(v) => v.shrink_to_fit(),
        }
    }
}

/// One scalar's values in one mode, in step order, with each value's wall time.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Column {
    steps: Steps,
    values: Values,
    /// Wall time of each value minus `base`, seconds.
    walls: Vec<f32>,
    /// The first finite wall time taken in, seconds since the epoch.
    base: Option<f64>,
}

impl Column {
    /// How many values.
    pub fn len(&self) -> usize {
        self.steps.len()
    }

    /// Whether there is none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The `i`-th `(global step, value)`; panics past the end, as indexing does.
    pub fn point(&self, i: usize) -> (u64, f64) {
        assert!(i < self.len(), "value {i} of a column of {}", self.len());
        (self.steps.get(i), self.values.get(i))
    }

    /// The last `(global step, value)`.
    pub fn last(&self) -> Option<(u64, f64)> {
        (!self.is_empty()).then(|| self.point(self.len() - 1))
    }

    /// Every `(global step, value)` in step order.
    pub fn points(&self) -> impl ExactSizeIterator<Item = (u64, f64)> + DoubleEndedIterator + '_ {
        (0..self.len()).map(|i| self.point(i))
    }

    /// The values at steps `from <= step <= to` (either end open when `None`), in step order.
    pub fn window(&self, from: Option<f64>, to: Option<f64>) -> Vec<(u64, f64)> {
        // The first value whose step is not `before` (steps increase).
        let first_not = |before: &dyn Fn(f64) -> bool| -> usize {
            let (mut lo, mut hi) = (0, self.len());
            while lo < hi {
                let mid = (lo + hi) / 2;
                if before(self.steps.get(mid) as f64) {
                    lo = mid + 1;
                } else {
                    hi = mid;
                }
            }
            lo
        };
        let lo = from.map_or(0, |f| first_not(&|step| step < f));
        let hi = to.map_or(self.len(), |t| first_not(&|step| step <= t));
        (lo..hi.max(lo)).map(|i| self.point(i)).collect()
    }

    /// The wall time of the `i`-th value (its event record's), seconds since the Unix epoch
    /// (to the `f32` offset's precision: see the module docs).
    pub fn wall_time(&self, i: usize) -> Option<f64> {
        self.walls
            .get(i)
            .map(|&w| self.base.unwrap_or(0.0) + f64::from(w))
    }

    /// The wall time of the value at global step `step`.
    pub fn wall_time_at(&self, step: u64) -> Option<f64> {
        let i = self.steps.search(step).ok()?;
        self.wall_time(i)
    }

    /// Bytes this column holds on the heap.
    pub fn heap_bytes(&self) -> usize {
        self.steps.heap_bytes()
            + self.values.heap_bytes()
            + self.walls.capacity() * std::mem::size_of::<f32>()
    }

    fn reserve(&mut self, n: usize) {
        self.values.reserve(n);
        self.walls.reserve_exact(n);
    }

    fn shrink(&mut self) {
        self.steps.shrink();
        self.values.shrink();
        self.walls.shrink_to_fit();
    }

    /// Takes in one value; a step already held keeps its first value. True when it was new.
    fn insert(&mut self, step: u64, value: f64, wall_time: f64) -> bool {
        if self.base.is_none() && wall_time.is_finite() {
            self.base = Some(wall_time);
        }
        let offset = (wall_time - self.base.unwrap_or(0.0)) as f32;
        let at = match self.steps.last() {
            Some(last) if last == step => return false,
            Some(last) if last > step => match self.steps.search(step) {
                Ok(_) => return false,
                Err(at) => {
                    self.steps.insert(at, step);
                    at
                }
            },
            _ => {
                self.steps.push(step);
                self.steps.len() - 1
            }
        };
        self.values.insert(at, value);
        self.walls.insert(at, offset);
        true
    }
}

/// One scalar tensor's columns, by mode.
pub type ScalarTrack = BTreeMap<Mode, Column>;

/// New values of one scalar in one mode, as a follower hands them out: `(global step, value,
/// wall time of its event record in seconds since the Unix epoch)`, in step order.
pub type BatchColumn = Vec<(u64, f64, f64)>;

/// New values of one pass of a [`TensorFollower`](super::TensorFollower): per scalar and mode,
/// a column in step order.
pub type ScalarBatch = Vec<(String, Mode, BatchColumn)>;

/// Every scalar value a follower handed out, as columns per tensor and mode.
#[derive(Debug, Default)]
pub struct ScalarColumns {
    tracks: BTreeMap<String, ScalarTrack>,
    values: usize,
    first_wall_time: Option<f64>,
}

impl ScalarColumns {
    /// Takes in a batch of new values. `more`: about how many more values of each column are
    /// coming (index files not read yet), so that a column grows once to size instead of
    /// doubling; with none announced (a live run's few new values a pass) a column grows by an
    /// eighth, and a column left with more room than that once nothing more is announced gives
    /// it back. A step saved by several workers keeps the first value handed in.
    pub fn add(&mut self, batch: ScalarBatch, more: usize) {
        for (name, mode, points) in batch {
            self.add_column(name, mode, points, more);
        }
    }

    fn add_column(&mut self, name: String, mode: Mode, points: BatchColumn, more: usize) {
        let column = self
            .tracks
            .entry(name)
            .or_default()
            .entry(mode)
            .or_default();
        if column.values.spare() < points.len() {
            column.reserve((points.len() + more).max(column.len() / 8));
        }
        for (step, value, wall_time) in points {
            if column.insert(step, value, wall_time) {
                self.values += 1;
                if wall_time.is_finite() && self.first_wall_time.is_none_or(|w| wall_time < w) {
                    self.first_wall_time = Some(wall_time);
                }
            }
        }
        if more == 0 && column.values.spare() > column.len() / 8 + 16 {
            column.shrink();
        }
    }

    /// Scalar `name`'s columns.
    pub fn get(&self, name: &str) -> Option<&ScalarTrack> {
        self.tracks.get(name)
    }

    /// Every scalar with its columns, in name order.
    pub fn iter(&self) -> impl Iterator<Item = (&String, &ScalarTrack)> {
        self.tracks.iter()
    }

    /// How many values are held.
    pub fn values(&self) -> usize {
        self.values
    }

    /// The earliest wall time of any value held, seconds since the epoch: where a relative
    /// time axis starts.
    pub fn first_wall_time(&self) -> Option<f64> {
        self.first_wall_time
    }

    /// Bytes the columns hold on the heap (values and wall times; the maps' nodes and names
    /// not counted).
    pub fn heap_bytes(&self) -> usize {
        self.tracks
            .values()
            .flat_map(|t| t.values())
            .map(Column::heap_bytes)
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_stay_in_step_order_and_keep_the_first_value_of_a_step() {
        let mut c = ScalarColumns::default();
        c.add(
            vec![(
                "loss".into(),
                Mode::Train,
                vec![(0, 1.0, 100.0), (2, 3.0, 102.0)],
            )],
            10,
        );
        c.add(
            vec![
                (
                    "loss".into(),
                    Mode::Train,
                    vec![(2, 9.0, 109.0), (1, 2.0, 101.5), (4, 5.0, 104.25)],
                ),
                ("loss".into(), Mode::Eval, vec![(3, 7.0, 99.0)]),
            ],
            0,
        );
        let track = c.get("loss").unwrap();
        let train = &track[&Mode::Train];
        let points: Vec<_> = train.points().collect();
        assert_eq!(points, [(0, 1.0), (1, 2.0), (2, 3.0), (4, 5.0)]);
        let walls: Vec<f64> = (0..4).map(|i| train.wall_time(i).unwrap()).collect();
        assert_eq!(walls, [100.0, 101.5, 102.0, 104.25]);
        assert_eq!(train.wall_time_at(4), Some(104.25));
        assert_eq!(train.wall_time_at(3), None);
        assert_eq!(track[&Mode::Eval].points().collect::<Vec<_>>(), [(3, 7.0)]);
        assert_eq!(c.values(), 5);
        assert_eq!(c.first_wall_time(), Some(99.0));
        assert!(c.get("acc").is_none());
    }

    #[test]
    fn a_wall_time_a_day_after_the_first_is_held_to_4_ms_in_12_bytes_a_value() {
        let mut c = ScalarColumns::default();
        let start = 1.79e9;
        let points: BatchColumn = (0..1000u64)
            .map(|i| (i, i as f64, start + i as f64 * 86.4 + 0.123_456))
            .collect();
        c.add(vec![("loss".into(), Mode::Train, points.clone())], 0);
        let column = &c.get("loss").unwrap()[&Mode::Train];
        for (i, &(_, _, wall)) in points.iter().enumerate() {
            let got = column.wall_time(i).unwrap();
            assert!((got - wall).abs() <= 0.004, "{i}: {got} for {wall}");
        }
        // `i as f64` is an f32 exactly: 4 bytes a value, 4 a wall time, one run of steps.
        assert_eq!(column.steps.runs.len(), 1);
        assert_eq!(column.heap_bytes() - column.steps.heap_bytes(), 1000 * 8);
    }

    /// A small deterministic generator (xorshift), for orders and values.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
    }

    #[test]
    fn a_column_built_in_any_order_holds_what_a_sorted_map_holds() {
        for seed in 1..40u64 {
            let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15));
            let mut model: BTreeMap<u64, (f64, f64)> = BTreeMap::new();
            let mut column = Column::default();
            // Steps: stretches of strides 1, 3 and 10 with gaps, some late, some repeated.
            let mut steps: Vec<u64> = Vec::new();
            let mut at = rng.next() % 5;
            for _ in 0..(2 + rng.next() % 6) {
                let stride = [1, 3, 10][(rng.next() % 3) as usize];
                for _ in 0..(1 + rng.next() % 40) {
                    steps.push(at);
                    at += stride;
                }
                at += rng.next() % 50;
            }
            for _ in 0..steps.len() / 3 {
                let (a, b) = (
                    rng.next() as usize % steps.len(),
                    rng.next() as usize % steps.len(),
                );
                steps.swap(a, b);
            }
            let repeats: Vec<u64> = steps.iter().step_by(7).copied().collect();
            steps.extend(repeats);
            for step in steps {
                let value = if rng.next() % 5 == 0 {
                    step as f64 * 0.1 // not an f32
                } else {
                    step as f64 + 0.5
                };
                let wall = 1.7e9 + step as f64;
                let new = column.insert(step, value, wall);
                assert_eq!(new, !model.contains_key(&step), "seed {seed} step {step}");
                model.entry(step).or_insert((value, wall));
            }
            let want: Vec<(u64, f64)> = model.iter().map(|(&s, &(v, _))| (s, v)).collect();
            assert_eq!(column.points().collect::<Vec<_>>(), want, "seed {seed}");
            assert_eq!(column.points().next_back(), want.last().copied());
            assert_eq!(column.last(), want.last().copied());
            for probe in 0..at + 3 {
                let held = model.get(&probe).map(|&(_, w)| w);
                assert_eq!(column.wall_time_at(probe), held, "seed {seed} step {probe}");
            }
            for (from, to) in [(None, None), (Some(3.0), Some(40.5)), (Some(17.0), None)] {
                let window: Vec<_> = want
                    .iter()
                    .filter(|p| from.is_none_or(|f| p.0 as f64 >= f))
                    .filter(|p| to.is_none_or(|t| p.0 as f64 <= t))
                    .copied()
                    .collect();
                assert_eq!(column.window(from, to), window, "seed {seed}");
            }
        }
    }

    #[test]
    fn values_widen_to_f64_at_the_first_that_is_not_an_f32_and_steps_stay_runs() {
        let mut c = ScalarColumns::default();
        let narrow: BatchColumn = (0..100u64)
            .map(|i| (i * 10, 0.25 * i as f64, 5.0))
            .collect();
        c.add(vec![("loss".into(), Mode::Train, narrow)], 0);
        let column = &c.get("loss").unwrap()[&Mode::Train];
        assert_eq!(column.heap_bytes() - column.steps.heap_bytes(), 100 * 8);
        c.add(
            vec![(
                "loss".into(),
                Mode::Train,
                vec![(1000, 0.1, 6.0), (1010, f64::NAN, 7.0)],
            )],
            0,
        );
        let column = &c.get("loss").unwrap()[&Mode::Train];
        let points: Vec<_> = column.points().collect();
        assert_eq!(points.len(), 102);
        assert_eq!(points[100], (1000, 0.1), "0.1 kept as the f64 it is");
        assert!(points[101].1.is_nan());
        for (i, p) in points[..100].iter().enumerate() {
            assert_eq!(*p, (i as u64 * 10, 0.25 * i as f64));
        }
        // Steps 0, 10, ..., 1010: one run still.
        assert_eq!(column.steps.runs.len(), 1);
        assert!(column.heap_bytes() - column.steps.heap_bytes() <= (102 + 102 / 8 + 16) * 12);
    }
}
