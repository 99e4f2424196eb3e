//! Scalar values held compactly: per tensor and mode, one column of values in step order.
//!
//! - **Steps** are held as arithmetic runs (`first`, `stride`, where the run starts): a column
//!   saved every step, or every tenth, is one run however long it is, and a mode's column cut
//!   by another mode's steps is one run per stretch.
//! - **Values** are `f32` while every value taken in is one exactly (a loss computed in `f32`
//!   and widened), else `f64`: 4 or 8 bytes a value.
//! - **Wall times** are held once per global step, for every column ([`StepWalls`]): a step's
//!   is the first wall time taken in for it. The tensors of one step are saved together, so
//!   their records' wall times are within milliseconds of each other; a value whose record's
//!   wall time is more than [`WALL_TOLERANCE_S`] from its step's keeps its own, in its column.
//!   [`ScalarColumns::wall_time_at`] gives a value's back, in seconds since the Unix epoch.
//!
//! So 4 to 8 bytes a value, and 16 bytes a step for the wall times, where `(u64, f64)` pairs
//! with their wall time took 20.

use std::collections::BTreeMap;

use smdebug_core::Mode;

use super::step_runs::StepRuns;
use super::tracks::ScalarTracks;

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

/// How far a value's record's wall time may be from its step's (the first taken in for the
/// step) and be given back as the step's: 4 ms, seconds.
pub const WALL_TOLERANCE_S: f64 = 0.004;

/// Whether wall time `a` is given back as `b`: within the tolerance (NaNs alike only by bits).
fn wall_close(a: f64, b: f64) -> bool {
    (a - b).abs() <= WALL_TOLERANCE_S || a.to_bits() == b.to_bits()
}

/// The wall time of each global step taken in: the first wall time handed in for it.
#[derive(Clone, Debug, Default, PartialEq)]
struct StepWalls {
    steps: StepRuns,
    walls: Vec<f64>,
}

impl StepWalls {
    fn get(&self, step: u64) -> Option<f64> {
        self.steps.search(step).ok().map(|i| self.walls[i])
    }

    /// Takes in the wall times of steps not held yet, each once, in any order. Steps past the
    /// last are appended; others are merged in one pass over the table.
    fn take_in(&mut self, mut new: Vec<(u64, f64)>) {
        if !new.is_sorted_by_key(|p| p.0) {
            new.sort_by_key(|p| p.0);
        }
        let Some(&(first, _)) = new.first() else {
            return;
        };
        if self.steps.last().is_none_or(|last| last < first) {
            self.walls.reserve(new.len());
            for (step, wall) in new {
                self.steps.push(step);
                self.walls.push(wall);
            }
            return;
        }
        let old = std::mem::take(self);
        self.walls.reserve(old.walls.len() + new.len());
        let mut held = (0..old.steps.len())
            .map(|i| (old.steps.get(i), old.walls[i]))
            .peekable();
        let mut new = new.into_iter().peekable();
        // No step is in both.
        while let Some((step, wall)) = match (held.peek(), new.peek()) {
            (Some(h), Some(n)) if n.0 < h.0 => new.next(),
            (Some(_), _) => held.next(),
            (None, _) => new.next(),
        } {
            self.steps.push(step);
            self.walls.push(wall);
        }
    }

    fn heap_bytes(&self) -> usize {
        self.steps.heap_bytes() + self.walls.capacity() * std::mem::size_of::<f64>()
    }
}

/// One scalar's values in one mode, in step order. Its values' wall times are their steps'
/// (held by the [`ScalarColumns`]), but for those listed here.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Column {
    steps: StepRuns,
    values: Values,
    /// `(step, wall time)` of the values whose record's wall time is more than
    /// [`WALL_TOLERANCE_S`] from their step's, in step order (usually none).
    walls_apart: Vec<(u64, f64)>,
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

    /// Whether a value at global step `step` is held.
    pub fn holds(&self, step: u64) -> bool {
        self.steps.search(step).is_ok()
    }

    /// Bytes this column holds on the heap.
    pub fn heap_bytes(&self) -> usize {
        self.steps.heap_bytes()
            + self.values.heap_bytes()
            + self.walls_apart.capacity() * std::mem::size_of::<(u64, f64)>()
    }

    fn reserve(&mut self, n: usize) {
        self.values.reserve(n);
    }

    fn shrink(&mut self) {
        self.steps.shrink();
        self.values.shrink();
        self.walls_apart.shrink_to_fit();
    }

    /// Keeps `wall_time` as the value at `step`'s own (it is not its step's).
    fn keep_wall_apart(&mut self, step: u64, wall_time: f64) {
        match self.walls_apart.binary_search_by_key(&step, |p| p.0) {
            Ok(i) => self.walls_apart[i].1 = wall_time,
            Err(i) => self.walls_apart.insert(i, (step, wall_time)),
        }
    }

    /// Takes in one value; a step already held keeps its first value. True when it was new.
    fn insert(&mut self, step: u64, value: f64) -> bool {
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

/// Every scalar value a follower handed out, as columns per tensor and mode (the
/// [`ScalarTracks`] it derefs to: `get`, `iter`, `values`, `first_wall_time`), with the wall
/// times of their steps.
#[derive(Debug, Default)]
pub struct ScalarColumns {
    tracks: ScalarTracks<Column>,
    walls: StepWalls,
}

impl std::ops::Deref for ScalarColumns {
    type Target = ScalarTracks<Column>;

    fn deref(&self) -> &ScalarTracks<Column> {
        &self.tracks
    }
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
        let (column, taken) = self.tracks.series_mut(name, mode);
        if column.values.spare() < points.len() {
            column.reserve((points.len() + more).max(column.len() / 8));
        }
        // Steps no column had yet: this value's wall time becomes the step's.
        let mut new_steps = Vec::new();
        for (step, value, wall_time) in points {
            if column.insert(step, value) {
                match self.walls.get(step) {
                    Some(w) if wall_close(w, wall_time) => {}
                    Some(_) => column.keep_wall_apart(step, wall_time),
                    None => new_steps.push((step, wall_time)),
                }
                taken.count(wall_time);
            }
        }
        self.walls.take_in(new_steps);
        if more == 0 && column.values.spare() > column.len() / 8 + 16 {
            column.shrink();
        }
    }

    /// The wall time of `column`'s value at global step `step` (its event record's, within
    /// [`WALL_TOLERANCE_S`]: see the module docs), seconds since the Unix epoch; `None` when the
    /// column holds no value there. `column` is one of these columns.
    pub fn wall_time_at(&self, column: &Column, step: u64) -> Option<f64> {
        if !column.holds(step) {
            return None;
        }
        match column.walls_apart.binary_search_by_key(&step, |p| p.0) {
            Ok(i) => Some(column.walls_apart[i].1),
            Err(_) => self.walls.get(step),
        }
    }

    /// Bytes the columns hold on the heap (steps, values and wall times; the maps' nodes and
    /// names not counted).
    pub fn heap_bytes(&self) -> usize {
        self.walls.heap_bytes() + self.series().map(Column::heap_bytes).sum::<usize>()
    }
}

#[cfg(test)]
#[path = "columns_tests.rs"]
mod tests;
