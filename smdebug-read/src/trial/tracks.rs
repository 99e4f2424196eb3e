//! Every scalar's series by name and mode, with what they took in counted: what the follower's
//! columns ([`ScalarColumns`](super::ScalarColumns)) and the dashboard's summaries hold their
//! series in, each with a series type of its own.

use std::collections::BTreeMap;

use smdebug_core::Mode;

/// Every scalar's series of type `S` (a [`Column`](super::Column), a dashboard summary) by name
/// and mode, with how many values they took in and the earliest wall time among those.
#[derive(Debug)]
pub struct ScalarTracks<S> {
    tracks: BTreeMap<String, BTreeMap<Mode, S>>,
    taken: Taken,
}

impl<S> Default for ScalarTracks<S> {
    fn default() -> Self {
        ScalarTracks {
            tracks: BTreeMap::new(),
            taken: Taken::default(),
        }
    }
}

/// How many values the series took in, and the earliest wall time among them.
#[derive(Debug, Default)]
pub struct Taken {
    values: usize,
    first_wall_time: Option<f64>,
}

impl Taken {
    /// Counts a value taken in, with its event record's wall time (seconds since the epoch; a
    /// time that is not finite is none).
    pub fn count(&mut self, wall_time: f64) {
        self.values += 1;
        if wall_time.is_finite() && self.first_wall_time.is_none_or(|w| wall_time < w) {
            self.first_wall_time = Some(wall_time);
        }
    }
}

impl<S> ScalarTracks<S> {
    /// Scalar `name`'s series, by mode.
    pub fn get(&self, name: &str) -> Option<&BTreeMap<Mode, S>> {
        self.tracks.get(name)
    }

    /// Every scalar with its series, in name order.
    pub fn iter(&self) -> impl Iterator<Item = (&String, &BTreeMap<Mode, S>)> {
        self.tracks.iter()
    }

    /// Every series, scalar by scalar and mode by mode.
    pub fn series(&self) -> impl Iterator<Item = &S> {
        self.tracks.values().flat_map(BTreeMap::values)
    }

    /// How many values were taken in.
    pub fn values(&self) -> usize {
        self.taken.values
    }

    /// The earliest wall time of any value taken in, seconds since the epoch: where a relative
    /// time axis starts.
    pub fn first_wall_time(&self) -> Option<f64> {
        self.taken.first_wall_time
    }

    /// The series of scalar `name` in `mode` (empty if it is new), with the count to tell of
    /// each value it takes in.
    pub fn series_mut(&mut self, name: String, mode: Mode) -> (&mut S, &mut Taken)
    where
        S: Default,
    {
        let series = self
            .tracks
            .entry(name)
            .or_default()
            .entry(mode)
            .or_default();
        (series, &mut self.taken)
    }
}
