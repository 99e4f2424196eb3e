//! A run's profiler data gathered in memory, in the shape the report draws: one time series
//! per metric and the spans. The rule runner fills one as its profiler feed hands out windows;
//! the report fills one when it reads a run by itself.

use std::collections::BTreeMap;

use super::Span;
use crate::system::{SeriesKey, SystemSample};

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
    /// `(timestamp µs since the epoch, value)`, ordered by time.
    pub points: Vec<(u64, f64)>,
}

impl MetricSeries {
    /// The unit of the values ([`vocab::unit`](crate::system::vocab::unit)).
    pub fn unit(&self) -> &'static str {
        crate::system::vocab::unit(&self.metric_type, &self.name, &self.dimension)
    }
}

/// System samples as series (16 bytes a point) and spans, added in any order.
#[derive(Clone, Debug, Default)]
pub struct ProfileData {
    series: BTreeMap<SeriesKey, Vec<(u64, f64)>>,
    spans: Vec<Span>,
}

impl ProfileData {
    /// Adds samples; a sample with a non-finite value or time is left out.
    pub fn add_samples<'s>(&mut self, samples: impl IntoIterator<Item = &'s SystemSample>) {
        for (key, point) in samples.into_iter().filter_map(SystemSample::series_point) {
            self.series.entry(key).or_default().push(point);
        }
    }

    /// Adds spans.
    pub fn add_spans<'s>(&mut self, spans: impl IntoIterator<Item = &'s Span>) {
        self.spans.extend(spans.into_iter().cloned());
    }

    /// Whether nothing was added.
    pub fn is_empty(&self) -> bool {
        self.series.is_empty() && self.spans.is_empty()
    }

    /// One series per (node, type, name, dimension), in that order, points ordered by time.
    pub fn metrics(&self) -> Vec<MetricSeries> {
        self.series
            .iter()
            .map(|((node, metric_type, name, dimension), points)| {
                let mut points = points.clone();
                points.sort_by_key(|p| p.0);
                MetricSeries {
                    node: node.clone(),
                    metric_type: metric_type.clone(),
                    name: name.clone(),
                    dimension: dimension.clone(),
                    points,
                }
            })
            .collect()
    }

    /// The spans, ordered by start, then end.
    pub fn spans(&self) -> Vec<Span> {
        let mut spans = self.spans.clone();
        spans.sort_by_key(|s| (s.start_us, s.end_us));
        spans
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
        let metrics = data.metrics();
        assert_eq!(metrics.len(), 2);
        assert_eq!(metrics[0].name, "cpu0");
        assert_eq!(metrics[1].points, vec![(1_000_000, 4.0), (2_000_000, 5.0)]);
        assert_eq!(metrics[1].unit(), "%");
    }
}
