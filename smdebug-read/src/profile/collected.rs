//! A run's profiler data gathered in memory, in the shape the report and the dashboard draw:
//! one time series per metric and the spans. Filled from a
//! [`ProfilerFollower`](crate::follow::ProfilerFollower)'s increments, in any order and in any
//! batches: the result does not depend on how the data arrived.

use std::collections::BTreeMap;
use std::collections::btree_map::Entry;

use super::points::{Points, point_order};
use super::{Span, SpanBatch, SpanStore, SystemSamples};
use smdebug_format::system::{SeriesKey, SystemSample, timestamp_us};

/// One system metric of one node over time.
#[derive(Clone, Debug, PartialEq)]
pub struct MetricSeries {
    /// The node (`NodeId` of the samples).
    pub node: String,
    /// `cpu`, `gpu`, `memory`, `i/o`, `network`, `process`.
    pub metric_type: String,
    /// `cpu0`, `total`, `gpu1`, `MemoryUsedPercent`, …
    pub name: String,
    /// `CPUUtilization`, `GPUMemoryUtilization`, …
    pub dimension: String,
    /// `(timestamp µs since the epoch, value)`, ordered by time (then value), 8 bytes a point
    /// for decimal values ([`Points`]).
    pub points: Points,
}

impl MetricSeries {
    /// The unit of the values ([`vocab::unit`](smdebug_format::system::vocab::unit)).
    pub fn unit(&self) -> &'static str {
        smdebug_format::system::vocab::unit(&self.metric_type, &self.name, &self.dimension)
    }
}

/// Samples grouped by series and sorted, ready to merge into a [`ProfileData`]: built
/// without holding a lock on the data.
#[derive(Debug, Default)]
pub struct SampleBatch(BTreeMap<SeriesKey, Vec<(u64, f64)>>);

impl SampleBatch {
    /// Groups and sorts `samples`, a series' names copied once; a sample with a non-finite
    /// value or time is left out.
    pub fn new(samples: &SystemSamples) -> SampleBatch {
        let mut batches = BTreeMap::new();
        for (key, points) in samples.series() {
            let mut batch: Vec<(u64, f64)> = points
                .iter()
                .filter(|(t, v)| t.is_finite() && v.is_finite())
                .map(|&(t, v)| (timestamp_us(t), v))
                .collect();
            if batch.is_empty() {
                continue;
            }
            if !batch.is_sorted_by(|a, b| point_order(a, b).is_le()) {
                batch.sort_by(point_order);
            }
            batches.insert(key.clone(), batch);
        }
        SampleBatch(batches)
    }

    /// Groups and sorts owned `samples` as [`SampleBatch::new`] does.
    pub fn from_records<'s>(samples: impl IntoIterator<Item = &'s SystemSample>) -> SampleBatch {
        SampleBatch::new(&samples.into_iter().collect())
    }
}

/// System samples as series (8 bytes a point for decimal values, else 12) and compact spans, added in any order.
#[derive(Clone, Debug, Default)]
pub struct ProfileData {
    series: BTreeMap<SeriesKey, MetricSeries>,
    samples: u64,
    spans: SpanStore,
}

impl ProfileData {
    /// Adds samples; a sample with a non-finite value or time is left out.
    pub fn add_samples<'s>(&mut self, samples: impl IntoIterator<Item = &'s SystemSample>) {
        self.add_sample_batch(SampleBatch::from_records(samples));
    }

    /// Adds samples grouped by series (a follower's increment); a sample with a non-finite
    /// value or time is left out.
    pub fn add_system_samples(&mut self, samples: &SystemSamples) {
        self.add_sample_batch(SampleBatch::new(samples));
    }

    /// Adds samples grouped and sorted beforehand.
    pub fn add_sample_batch(&mut self, batch: SampleBatch) {
        for (key, batch) in batch.0 {
            self.samples += batch.len() as u64;
            let series = match self.series.entry(key) {
                Entry::Occupied(e) => e.into_mut(),
                Entry::Vacant(e) => {
                    let (node, metric_type, name, dimension) = e.key().clone();
                    e.insert(MetricSeries {
                        node,
                        metric_type,
                        name,
                        dimension,
                        points: Points::default(),
                    })
                }
            };
            series.points.merge(batch);
        }
    }

    /// Adds spans.
    pub fn add_spans<'s>(&mut self, spans: impl IntoIterator<Item = &'s Span>) {
        self.spans.extend(spans);
    }

    /// Adds spans sorted beforehand.
    pub fn add_span_batch(&mut self, batch: SpanBatch<'_>) {
        self.spans.extend(batch.0);
    }

    /// Whether nothing was added.
    pub fn is_empty(&self) -> bool {
        self.series.is_empty() && self.spans.is_empty()
    }

    /// One series per (node, type, name, dimension), in that order, points ordered by time.
    pub fn metrics(&self) -> impl Iterator<Item = &MetricSeries> + '_ {
        self.series.values()
    }

    /// How many series there are.
    pub fn series_count(&self) -> usize {
        self.series.len()
    }

    /// How many samples the series hold.
    pub fn sample_count(&self) -> u64 {
        self.samples
    }

    /// The spans, ordered by start, then end.
    pub fn spans(&self) -> &SpanStore {
        &self.spans
    }

    /// First and last time of any sample or span, µs since the epoch.
    pub fn time_range(&self) -> Option<(u64, u64)> {
        let firsts = self
            .series
            .values()
            .filter_map(|m| m.points.first().map(|p| p.0))
            .chain(self.spans.first().map(|s| s.start_us));
        // Spans are ordered by start: the last end is among the last few (a long span
        // started earlier is found by the scan's bound of 64).
        let lasts = self
            .series
            .values()
            .filter_map(|m| m.points.last().map(|p| p.0))
            .chain(self.spans.iter().rev().take(64).map(|s| s.end_us));
        firsts.min().zip(lasts.max())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(name: &str, at: f64, value: f64) -> SystemSample {
        serde_json::from_value(serde_json::json!({
            "Type": "cpu", "Name": name, "Dimension": "CPUUtilization",
            "Value": value, "NodeId": "n", "Timestamp": at,
        }))
        .unwrap()
    }

    #[test]
    fn samples_become_time_ordered_series_without_non_finite_values() {
        let mut data = ProfileData::default();
        data.add_samples(&[sample("cpu1", 2.0, 5.0), sample("cpu0", 3.0, 1.0)]);
        let mut not_a_number = sample("cpu1", 4.0, 0.0);
        not_a_number.value = f64::NAN;
        data.add_samples(&[sample("cpu1", 1.0, 4.0), not_a_number]);
        let metrics: Vec<&MetricSeries> = data.metrics().collect();
        assert_eq!(metrics.len(), 2);
        assert_eq!(metrics[0].name, "cpu0");
        assert_eq!(
            metrics[1].points.to_vec(),
            [(1_000_000, 4.0), (2_000_000, 5.0)]
        );
        assert_eq!(metrics[1].unit(), "%");
        assert_eq!(data.sample_count(), 3);
        assert_eq!(data.time_range(), Some((1_000_000, 3_000_000)));
    }

    #[test]
    fn out_of_order_batches_give_the_series_one_read_gives() {
        // Times descending within batches, batches overlapping, ties on time.
        let all: Vec<SystemSample> = (0..3000u64)
            .map(|i| sample("cpu0", ((i * 7919) % 1000) as f64, (i % 7) as f64))
            .collect();
        let mut whole = ProfileData::default();
        whole.add_samples(&all);
        let mut pieces = ProfileData::default();
        for chunk in all.rchunks(211) {
            pieces.add_samples(chunk);
        }
        let a: Vec<&MetricSeries> = whole.metrics().collect();
        let b: Vec<&MetricSeries> = pieces.metrics().collect();
        assert_eq!(a, b);
        assert!(
            a[0].points
                .iter()
                .is_sorted_by(|x, y| point_order(x, y).is_le())
        );
        assert_eq!(a[0].points.len(), 3000);
    }
}
