//! System samples grouped by series as they are read: each series' four names held once, its
//! points (time, value) in a vector of their own, and the series of each sample in file order
//! (4 bytes a sample) so that the records can be handed out in file order too. Two million
//! samples of 55 series take 40 MB this way, against about 400 MB as `SystemSample`s with four
//! strings each.

use std::hash::BuildHasher;

use hashbrown::HashTable;

use smdebug_format::system::{SeriesKey, SystemSample, timestamp_us};

/// One sample of a [`SystemSamples`], its names borrowed from its series.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SampleRef<'a> {
    /// The index of its series in [`SystemSamples::series`].
    pub series: usize,
    /// Its index among its series' points.
    pub point: usize,
    /// `NodeId`.
    pub node_id: &'a str,
    /// `Type`.
    pub metric_type: &'a str,
    /// `Name` (empty when absent).
    pub name: &'a str,
    /// `Dimension`.
    pub dimension: &'a str,
    /// `Value`.
    pub value: f64,
    /// `Timestamp`, seconds since the Unix epoch.
    pub timestamp: f64,
}

impl SampleRef<'_> {
    /// The timestamp in whole microseconds since the Unix epoch (as
    /// [`SystemSample::timestamp_us`]).
    pub fn timestamp_us(&self) -> u64 {
        timestamp_us(self.timestamp)
    }

    /// The sample as an owned record.
    pub fn to_sample(&self) -> SystemSample {
        SystemSample {
            metric_type: self.metric_type.to_owned(),
            name: self.name.to_owned(),
            dimension: self.dimension.to_owned(),
            value: self.value,
            node_id: self.node_id.to_owned(),
            timestamp: self.timestamp,
        }
    }
}

/// System samples grouped by series, in file order within each series and over all of them
/// (see the module docs).
#[derive(Clone, Default)]
pub struct SystemSamples {
    /// `(node, type, name, dimension)` of each series, in order of first sample.
    names: Vec<SeriesKey>,
    /// `(timestamp, value)` of each series' samples, in file order.
    points: Vec<Vec<(f64, f64)>>,
    /// The series of each sample, in file order.
    order: Vec<u32>,
    /// Indices into `names`, found by the names.
    table: HashTable<u32>,
    hasher: foldhash::fast::RandomState,
    /// The series last looked up, and the one looked up after each the last time: files
    /// repeat their series in one order, so the guess spares most lookups a hash.
    last: u32,
    next: Vec<u32>,
}

fn key_refs(key: &SeriesKey) -> [&str; 4] {
    [&key.0, &key.1, &key.2, &key.3]
}

impl SystemSamples {
    /// How many samples there are.
    pub fn len(&self) -> usize {
        self.order.len()
    }

    /// Whether there is no sample.
    pub fn is_empty(&self) -> bool {
        self.order.is_empty()
    }

    /// Room for `n` more samples' places in file order.
    pub fn reserve(&mut self, n: usize) {
        self.order.reserve(n);
    }

    /// The index of the series `[node, type, name, dimension]`, added when new.
    fn series_index(&mut self, names: [&str; 4]) -> usize {
        let guess = self
            .next
            .get(self.last as usize)
            .copied()
            .unwrap_or(u32::MAX);
        if let Some(key) = self.names.get(guess as usize)
            && key_refs(key) == names
        {
            self.last = guess;
            return guess as usize;
        }
        let i = self.lookup(names);
        if let Some(next) = self.next.get_mut(self.last as usize) {
            *next = i as u32;
        }
        self.last = i as u32;
        i
    }

    /// The index of the series `names` through the table, added when new.
    fn lookup(&mut self, names: [&str; 4]) -> usize {
        let hash = self.hasher.hash_one(names);
        let known = &self.names;
        if let Some(&i) = self
            .table
            .find(hash, |&i| key_refs(&known[i as usize]) == names)
        {
            return i as usize;
        }
        let i = self.names.len();
        self.next.push(u32::MAX);
        let [node, kind, name, dimension] = names;
        self.names
            .push((node.into(), kind.into(), name.into(), dimension.into()));
        self.points.push(Vec::new());
        let (known, hasher) = (&self.names, &self.hasher);
        self.table.insert_unique(hash, i as u32, |&j| {
            hasher.hash_one(key_refs(&known[j as usize]))
        });
        i
    }

    /// Adds a sample of the series `[node, type, name, dimension]`.
    pub fn push(&mut self, names: [&str; 4], value: f64, timestamp: f64) {
        let i = self.series_index(names);
        self.points[i].push((timestamp, value));
        self.order.push(i as u32);
    }

    /// Adds a sample.
    pub fn push_sample(&mut self, s: &SystemSample) {
        let names = [&*s.node_id, &*s.metric_type, &*s.name, &*s.dimension];
        self.push(names, s.value, s.timestamp);
    }

    /// Each series' names and `(timestamp, value)` points, in file order; a series' index is
    /// its place here.
    pub fn series(&self) -> impl ExactSizeIterator<Item = (&SeriesKey, &[(f64, f64)])> + '_ {
        self.names
            .iter()
            .zip(&self.points)
            .map(|(k, p)| (k, p.as_slice()))
    }

    /// The samples in file order.
    pub fn iter(&self) -> impl Iterator<Item = SampleRef<'_>> + '_ {
        let mut next = vec![0usize; self.names.len()];
        self.order.iter().map(move |&i| {
            let i = i as usize;
            next[i] += 1;
            self.at(i, next[i] - 1)
        })
    }

    /// Point `point` of series `series` (their places in [`SampleRef`]). Panics when there is
    /// no such point.
    pub fn at(&self, series: usize, point: usize) -> SampleRef<'_> {
        let (timestamp, value) = self.points[series][point];
        let (node_id, metric_type, name, dimension) = &self.names[series];
        SampleRef {
            series,
            point,
            node_id,
            metric_type,
            name,
            dimension,
            value,
            timestamp,
        }
    }

    /// The samples as owned records, in file order.
    pub fn to_samples(&self) -> Vec<SystemSample> {
        self.iter().map(|s| s.to_sample()).collect()
    }

    /// Leaves out the first `n` samples in file order (all of them when there are fewer).
    pub fn skip_first(&mut self, n: usize) {
        let n = n.min(self.len());
        if n == 0 {
            return;
        }
        let mut dropped = vec![0usize; self.names.len()];
        for &i in &self.order[..n] {
            dropped[i as usize] += 1;
        }
        for (points, d) in self.points.iter_mut().zip(dropped) {
            points.drain(..d);
        }
        self.order.drain(..n);
    }

    /// Adds `other`'s samples after these, in its file order.
    pub fn append(&mut self, other: SystemSamples) {
        if self.names.is_empty() {
            *self = other;
            return;
        }
        let map: Vec<u32> = other
            .names
            .iter()
            .map(|key| self.series_index(key_refs(key)) as u32)
            .collect();
        for (i, mut points) in other.points.into_iter().enumerate() {
            let to = &mut self.points[map[i] as usize];
            if to.is_empty() {
                *to = points;
            } else {
                to.append(&mut points);
            }
        }
        self.order
            .extend(other.order.iter().map(|&i| map[i as usize]));
    }
}

impl std::fmt::Debug for SystemSamples {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

/// The same samples in the same file order (however the series are numbered).
impl PartialEq for SystemSamples {
    fn eq(&self, other: &SystemSamples) -> bool {
        fn strip(s: SampleRef<'_>) -> SampleRef<'_> {
            SampleRef { series: 0, ..s }
        }
        self.len() == other.len() && self.iter().map(strip).eq(other.iter().map(strip))
    }
}

impl<'s> FromIterator<&'s SystemSample> for SystemSamples {
    fn from_iter<I: IntoIterator<Item = &'s SystemSample>>(iter: I) -> SystemSamples {
        let mut out = SystemSamples::default();
        for s in iter {
            out.push_sample(s);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(node: &str, name: &str, at: f64, value: f64) -> SystemSample {
        SystemSample {
            metric_type: "cpu".into(),
            name: name.into(),
            dimension: "CPUUtilization".into(),
            value,
            node_id: node.into(),
            timestamp: at,
        }
    }

    fn mixed(n: usize) -> Vec<SystemSample> {
        (0..n)
            .map(|i| {
                let node = if i % 3 == 0 { "algo-1" } else { "algo-2" };
                sample(
                    node,
                    &format!("cpu{}", i % 5),
                    i as f64,
                    (i * 7 % 11) as f64,
                )
            })
            .collect()
    }

    #[test]
    fn samples_come_back_in_file_order_grouped_by_series() {
        let all = mixed(100);
        let grouped: SystemSamples = all.iter().collect();
        assert_eq!(grouped.len(), 100);
        assert_eq!(grouped.series().len(), 10);
        assert_eq!(grouped.to_samples(), all);
        let (key, points) = grouped.series().next().unwrap();
        assert_eq!(key.0, "algo-1");
        assert_eq!(key.2, "cpu0");
        assert_eq!(points[..2], [(0.0, 0.0), (15.0, 6.0)]);
    }

    #[test]
    fn appended_and_skipped_pieces_keep_file_order() {
        let all = mixed(100);
        for cut in [0, 1, 17, 99, 100] {
            let mut first: SystemSamples = all[..cut].iter().collect();
            let second: SystemSamples = all[cut..].iter().collect();
            first.append(second);
            assert_eq!(first.to_samples(), all, "cut at {cut}");
            assert_eq!(first.series().len(), 10);
            for skip in [0, 1, 5, 60, 100, 200] {
                let mut rest: SystemSamples = all.iter().collect();
                rest.skip_first(skip);
                assert_eq!(rest.to_samples(), all[skip.min(100)..], "skip {skip}");
                assert_eq!(rest, all[skip.min(100)..].iter().collect());
            }
        }
    }
}
