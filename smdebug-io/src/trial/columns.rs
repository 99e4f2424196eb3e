//! Scalar values held compactly: per tensor and mode, one column of `(global step, value)`
//! pairs in step order, 16 bytes a value and nothing else per step.

use std::collections::BTreeMap;

use smdebug_core::Mode;

/// One scalar's values in one mode: `(global step, value)`, in step order.
pub type Column = Vec<(u64, f64)>;

/// One scalar tensor's columns, by mode.
pub type ScalarTrack = BTreeMap<Mode, Column>;

/// New values of one pass of a [`TensorFollower`](super::TensorFollower): per scalar and mode,
/// a column in step order.
pub type ScalarBatch = Vec<(String, Mode, Column)>;

/// Every scalar value a follower handed out, as columns per tensor and mode.
#[derive(Debug, Default)]
pub struct ScalarColumns {
    tracks: BTreeMap<String, ScalarTrack>,
    values: usize,
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

    fn add_column(&mut self, name: String, mode: Mode, points: Column, more: usize) {
        let column = self
            .tracks
            .entry(name)
            .or_default()
            .entry(mode)
            .or_default();
        if column.capacity() - column.len() < points.len() {
            column.reserve_exact(points.len() + more);
        }
        for (step, value) in points {
            match column.last() {
                Some(last) if last.0 == step => {}
                Some(last) if last.0 > step => {
                    let at = column.partition_point(|p| p.0 < step);
                    if column.get(at).is_none_or(|p| p.0 != step) {
                        column.insert(at, (step, value));
                        self.values += 1;
                    }
                }
                _ => {
                    column.push((step, value));
                    self.values += 1;
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
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_stay_in_step_order_and_keep_the_first_value_of_a_step() {
        let mut c = ScalarColumns::default();
        c.add(
            vec![("loss".into(), Mode::Train, vec![(0, 1.0), (2, 3.0)])],
            10,
        );
        c.add(
            vec![
                (
                    "loss".into(),
                    Mode::Train,
                    vec![(2, 9.0), (1, 2.0), (4, 5.0)],
                ),
                ("loss".into(), Mode::Eval, vec![(3, 7.0)]),
            ],
            0,
        );
        let track = c.get("loss").unwrap();
        assert_eq!(
            track[&Mode::Train],
            [(0, 1.0), (1, 2.0), (2, 3.0), (4, 5.0)]
        );
        assert_eq!(track[&Mode::Eval], [(3, 7.0)]);
        assert_eq!(c.values(), 5);
        assert!(c.get("acc").is_none());
    }
}
