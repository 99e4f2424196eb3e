//! Scalar values held compactly: per tensor and mode, one column of `(global step, value)`
//! pairs in step order and, beside it, each value's wall time (its event record's) as an `f32`
//! offset from the column's first: 20 bytes a value and nothing else per step.
//!
//! An `f32` offset keeps about seven significant digits: a wall time within a day of the
//! column's first value is held to 4 ms, within ten days to 32 ms (half of `f32`'s spacing
//! there), ample for a relative or wall-clock axis. [`Column::wall_time`] gives it back as
//! seconds since the Unix epoch.

use std::collections::BTreeMap;

use smdebug_core::Mode;

/// One scalar's values in one mode, in step order, with each value's wall time.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Column {
    points: Vec<(u64, f64)>,
    /// Wall time of each point minus `base`, seconds.
    walls: Vec<f32>,
    /// The first finite wall time taken in, seconds since the epoch.
    base: Option<f64>,
}

impl Column {
    /// `(global step, value)` in step order.
    pub fn points(&self) -> &[(u64, f64)] {
        &self.points
    }

    /// How many values.
    pub fn len(&self) -> usize {
        self.points.len()
    }

    /// Whether there is none.
    pub fn is_empty(&self) -> bool {
        self.points.is_empty()
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
        let i = self.points.binary_search_by_key(&step, |p| p.0).ok()?;
        self.wall_time(i)
    }

    /// Bytes this column holds on the heap (its two vectors' capacity).
    pub fn heap_bytes(&self) -> usize {
        self.points.capacity() * std::mem::size_of::<(u64, f64)>()
            + self.walls.capacity() * std::mem::size_of::<f32>()
    }

    fn reserve(&mut self, n: usize) {
        self.points.reserve_exact(n);
        self.walls.reserve_exact(n);
    }

    /// Takes in one value; a step already held keeps its first value. True when it was new.
    fn insert(&mut self, step: u64, value: f64, wall_time: f64) -> bool {
        if self.base.is_none() && wall_time.is_finite() {
            self.base = Some(wall_time);
        }
        let offset = (wall_time - self.base.unwrap_or(0.0)) as f32;
        match self.points.last() {
            Some(last) if last.0 == step => false,
            Some(last) if last.0 > step => {
                let at = self.points.partition_point(|p| p.0 < step);
                if self.points.get(at).is_some_and(|p| p.0 == step) {
                    return false;
                }
                self.points.insert(at, (step, value));
                self.walls.insert(at, offset);
                true
            }
            _ => {
                self.points.push((step, value));
                self.walls.push(offset);
                true
            }
        }
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
    /// doubling. A step saved by several workers keeps the first value handed in.
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
        if column.points.capacity() - column.points.len() < points.len() {
            column.reserve(points.len() + more);
        }
        for (step, value, wall_time) in points {
            if column.insert(step, value, wall_time) {
                self.values += 1;
                if wall_time.is_finite() && self.first_wall_time.is_none_or(|w| wall_time < w) {
                    self.first_wall_time = Some(wall_time);
                }
            }
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
        assert_eq!(train.points(), [(0, 1.0), (1, 2.0), (2, 3.0), (4, 5.0)]);
        let walls: Vec<f64> = (0..4).map(|i| train.wall_time(i).unwrap()).collect();
        assert_eq!(walls, [100.0, 101.5, 102.0, 104.25]);
        assert_eq!(train.wall_time_at(4), Some(104.25));
        assert_eq!(train.wall_time_at(3), None);
        assert_eq!(track[&Mode::Eval].points(), [(3, 7.0)]);
        assert_eq!(c.values(), 5);
        assert_eq!(c.first_wall_time(), Some(99.0));
        assert!(c.get("acc").is_none());
    }

    #[test]
    fn a_wall_time_a_day_after_the_first_is_held_to_4_ms_in_20_bytes_a_value() {
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
        assert_eq!(c.heap_bytes(), 1000 * 20);
    }
}
