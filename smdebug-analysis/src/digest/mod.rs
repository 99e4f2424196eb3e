//! A run's profiler data aggregated as it is read, in a size that does not grow with the run:
//! [`ProfileDigest`], what the report draws from. Per system series its exact count, sum, min,
//! max, mean and deviation, its quantiles in a [`Sketch`] (within
//! [`SKETCH_RELATIVE_ERROR`](crate::stats::SKETCH_RELATIVE_ERROR) of the value at their rank),
//! its course over time as a [`Line`] of at most [`LINE_SLICES`] slices (min, max, mean each),
//! and for percentages exact counts in 1 % bins; per node, worker and mode the step spans'
//! durations (exact count, total, min, max, mean; sketched quantiles) and their course; per
//! phase the spans' durations. Filled from a follower's increments in any order and batches.

mod line;

use std::collections::{BTreeMap, BTreeSet};

pub use line::{LINE_SLICES, Line, Slice};

use smdebug_core::Mode;

use crate::stats::Sketch;
use smdebug_core::phase::Phase;
use smdebug_format::system::{SeriesKey, SystemSample, timestamp_us, vocab};
use smdebug_read::profile::{Span, SystemSamples};

/// Most phases (span rows) told apart; spans of further phases are pooled into one row,
/// [`OTHER_PHASES`].
pub const MAX_PHASES: usize = 256;

/// The row of the spans of phases beyond [`MAX_PHASES`].
pub const OTHER_PHASES: &str = "(other phases)";

/// One system metric of one node, aggregated.
#[derive(Clone, Debug, PartialEq)]
pub struct SeriesDigest {
    /// The node (`NodeId` of the samples).
    pub node: String,
    /// `cpu`, `gpu`, `memory`, `i/o`, `network`, `process`.
    pub metric_type: String,
    /// `cpu0`, `total`, `gpu1`, `MemoryUsedPercent`, …
    pub name: String,
    /// `CPUUtilization`, `GPUMemoryUtilization`, …
    pub dimension: String,
    /// The values' distribution: count, min, max, mean and deviation exact.
    pub values: Sketch,
    /// The values over time.
    pub line: Line,
    /// For a series in percent: how many values fell in each 1 %-wide bin over 0–100 (values
    /// outside in the end bins), exact.
    percent_bins: Option<Box<[u64; 100]>>,
}

impl SeriesDigest {
    fn new(key: &SeriesKey, slices: usize) -> SeriesDigest {
        let unit = vocab::unit(&key.1, &key.2, &key.3);
        SeriesDigest {
            node: key.0.clone(),
            metric_type: key.1.clone(),
            name: key.2.clone(),
            dimension: key.3.clone(),
            values: Sketch::default(),
            line: Line::with_slices(slices),
            percent_bins: (unit == "%").then(|| Box::new([0; 100])),
        }
    }

    fn add(&mut self, t_us: u64, v: f64) {
        self.values.add(v);
        self.line.add(t_us, v);
        if let Some(bins) = &mut self.percent_bins {
            let index = (v.floor().max(0.0) as usize).min(99);
            bins[index] += 1;
        }
    }

    /// The unit of the values ([`vocab::unit`]).
    pub fn unit(&self) -> &'static str {
        vocab::unit(&self.metric_type, &self.name, &self.dimension)
    }

    /// For a series in percent, exact counts in `bins` equal bins over 0–100 (`bins` divides
    /// 100), as [`histogram`](crate::stats::histogram) counts them; `None` for another unit or
    /// bin count.
    pub fn percent_histogram(&self, bins: usize) -> Option<Vec<u64>> {
        let all = self.percent_bins.as_ref()?;
        if bins == 0 || 100 % bins != 0 {
            return None;
        }
        Some(all.chunks(100 / bins).map(|c| c.iter().sum()).collect())
    }
}

/// Step spans of one node, worker and mode, aggregated.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct StepDigest {
    /// Durations, µs.
    pub durations: Sketch,
    /// Duration (µs) against start time.
    pub line: Line,
    /// The first step's start, µs since the epoch.
    pub first_start_us: u64,
    /// The latest end of a step, µs since the epoch.
    pub last_end_us: u64,
}

/// The step spans' group: node, worker, mode.
pub type StepKey = (String, Option<u32>, Option<Mode>);

/// Spans of one phase (row), aggregated.
#[derive(Clone, Debug, PartialEq)]
pub struct PhaseDigest {
    /// The phase.
    pub kind: Phase,
    /// Durations, µs.
    pub durations: Sketch,
}

/// A run's profiler data, aggregated (see the module docs). Its size depends on the number of
/// series, nodes, workers, modes and phases, not on the run's length.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ProfileDigest {
    /// The most slices of each [`Line`] (0: [`LINE_SLICES`]).
    line_slices: usize,
    series: BTreeMap<SeriesKey, SeriesDigest>,
    samples: u64,
    spans: u64,
    span_range: Option<(u64, u64)>,
    span_nodes: BTreeSet<String>,
    steps: BTreeMap<StepKey, StepDigest>,
    phases: BTreeMap<String, PhaseDigest>,
    pooled_phases: BTreeSet<u64>,
}

impl ProfileDigest {
    /// An empty digest whose lines hold at most `slices` slices each (the report's default:
    /// [`LINE_SLICES`]; the dashboard draws its charts from finer ones).
    pub fn with_line_slices(slices: usize) -> ProfileDigest {
        ProfileDigest {
            line_slices: slices,
            ..ProfileDigest::default()
        }
    }

    fn slices(&self) -> usize {
        if self.line_slices == 0 {
            LINE_SLICES
        } else {
            self.line_slices
        }
    }

    /// Adds samples grouped by series (a follower's increment); a sample with a non-finite
    /// value or time is left out.
    pub fn add_system_samples(&mut self, samples: &SystemSamples) {
        for (key, points) in samples.series() {
            let mut finite = points
                .iter()
                .filter(|(t, v)| t.is_finite() && v.is_finite())
                .peekable();
            if finite.peek().is_none() {
                continue;
            }
            let slices = self.slices();
            let series = self
                .series
                .entry(key.clone())
                .or_insert_with(|| SeriesDigest::new(key, slices));
            for &(t, v) in finite {
                series.add(timestamp_us(t), v);
                self.samples += 1;
            }
        }
    }

    /// Adds samples one by one (the rule runner's windows); a sample with a non-finite value
    /// or time is left out.
    pub fn add_samples<'s>(&mut self, samples: impl IntoIterator<Item = &'s SystemSample>) {
        for s in samples {
            if !(s.timestamp.is_finite() && s.value.is_finite()) {
                continue;
            }
            let key: SeriesKey = (
                s.node_id.clone(),
                s.metric_type.clone(),
                s.name.clone(),
                s.dimension.clone(),
            );
            let slices = self.slices();
            let series = match self.series.get_mut(&key) {
                Some(series) => series,
                None => self
                    .series
                    .entry(key.clone())
                    .or_insert_with(|| SeriesDigest::new(&key, slices)),
            };
            series.add(timestamp_us(s.timestamp), s.value);
            self.samples += 1;
        }
    }

    /// Adds spans.
    pub fn add_spans<'s>(&mut self, spans: impl IntoIterator<Item = &'s Span>) {
        for s in spans {
            self.spans += 1;
            self.span_range = Some(match self.span_range {
                None => (s.start_us, s.end_us),
                Some((a, b)) => (a.min(s.start_us), b.max(s.end_us)),
            });
            if !self.span_nodes.contains(&s.node) {
                self.span_nodes.insert(s.node.clone());
            }
            let kind = s.phase_kind();
            let duration = s.duration_us() as f64;
            if matches!(kind, Phase::Step(_)) {
                let key = (s.node.clone(), s.worker, s.mode);
                let slices = self.slices();
                let step = self.steps.entry(key).or_insert_with(|| StepDigest {
                    first_start_us: s.start_us,
                    last_end_us: s.end_us,
                    line: Line::with_slices(slices),
                    ..StepDigest::default()
                });
                step.durations.add(duration);
                step.line.add(s.start_us, duration);
                step.first_start_us = step.first_start_us.min(s.start_us);
                step.last_end_us = step.last_end_us.max(s.end_us);
            }
            if let Some(phase) = self.phases.get_mut(&s.phase) {
                phase.durations.add(duration);
                continue;
            }
            let phase = match self.phases.len() < MAX_PHASES {
                true => self.phases.entry(s.phase.clone()).or_insert(PhaseDigest {
                    kind,
                    durations: Sketch::default(),
                }),
                false => {
                    if self.pooled_phases.len() < MAX_PHASES {
                        self.pooled_phases.insert(name_hash(&s.phase));
                    }
                    self.phases
                        .entry(OTHER_PHASES.to_owned())
                        .or_insert(PhaseDigest {
                            kind: Phase::Custom(OTHER_PHASES.into()),
                            durations: Sketch::default(),
                        })
                }
            };
            phase.durations.add(duration);
        }
    }

    /// Whether nothing was added.
    pub fn is_empty(&self) -> bool {
        self.series.is_empty() && self.spans == 0
    }

    /// One series per (node, type, name, dimension), in that order.
    pub fn series(&self) -> impl ExactSizeIterator<Item = &SeriesDigest> + '_ {
        self.series.values()
    }

    /// How many series there are.
    pub fn series_count(&self) -> usize {
        self.series.len()
    }

    /// How many samples were added.
    pub fn sample_count(&self) -> u64 {
        self.samples
    }

    /// How many spans were added.
    pub fn span_count(&self) -> u64 {
        self.spans
    }

    /// The step spans per node, worker and mode.
    pub fn steps(&self) -> &BTreeMap<StepKey, StepDigest> {
        &self.steps
    }

    /// The spans per phase (row name); beyond [`MAX_PHASES`] rows, under [`OTHER_PHASES`].
    pub fn phases(&self) -> &BTreeMap<String, PhaseDigest> {
        &self.phases
    }

    /// How many phases were pooled under [`OTHER_PHASES`] (counted up to [`MAX_PHASES`]).
    pub fn pooled_phases(&self) -> usize {
        self.pooled_phases.len()
    }

    /// The nodes of the series and spans, in order.
    pub fn nodes(&self) -> BTreeSet<&str> {
        self.series
            .values()
            .map(|s| s.node.as_str())
            .chain(self.span_nodes.iter().map(String::as_str))
            .collect()
    }

    /// First and last time of any sample or span, µs since the epoch.
    pub fn time_range(&self) -> Option<(u64, u64)> {
        let lines = self.series.values().filter_map(|s| {
            let first = s.line.slices().next()?.first_us;
            let last = s.line.slices().last()?.last_us;
            Some((first, last))
        });
        lines
            .chain(self.span_range)
            .reduce(|a, b| (a.0.min(b.0), a.1.max(b.1)))
    }
}

fn name_hash(name: &str) -> u64 {
    use std::hash::{BuildHasher, BuildHasherDefault, DefaultHasher};
    BuildHasherDefault::<DefaultHasher>::default().hash_one(name)
}

#[cfg(test)]
mod tests;
