//! MaxInitializationTime and StepOutlier: rules over the training loop's `Step` spans.

use std::cmp::Reverse;
use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use smdebug_core::Mode;
use smdebug_core::phase::Phase;
use smdebug_core::text::duration;
use smdebug_read::profile::TRACE_FILE_SLACK_US;

use crate::error::Result;
use crate::params::{Check, lenient};
use crate::rule::{Evidence, ProfilerInput, ProfilerNeeds, ProfilerRule, RuleResult};
use crate::window::{ProfilerWindow, StepRef};

use super::details::{
    Details, InitializationDetails, OutlierStep, StepHistogram, StepOutlierDetails,
    StepSeriesDetails,
};
use smdebug_analysis::stats::{Summary, histogram};
use smdebug_analysis::time::{seconds, utc};

/// At most this many outlier steps per node and mode are kept in the details.
const MAX_OUTLIER_STEPS: usize = 100;
use smdebug_analysis::stats::round_us;

/// Parameters of [`MaxInitializationTime`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct MaxInitializationTimeParams {
    /// Minutes from the job's start within which the first step must start. Default `20`.
    #[serde(deserialize_with = "lenient::f64")]
    pub threshold: f64,
}

impl Default for MaxInitializationTimeParams {
    fn default() -> Self {
        MaxInitializationTimeParams { threshold: 20.0 }
    }
}

/// **MaxInitializationTime** — fires when the first `Step` span starts more than `threshold`
/// minutes after the job started (its earliest system sample or span), or, while a run is
/// followed, when that long has passed with no step at all. Trace files are published about
/// once a minute, so "no step yet" is only concluded three minutes after the limit (or at the
/// end of the run); the firing's time is the limit itself.
pub struct MaxInitializationTime {
    params: MaxInitializationTimeParams,
    first_step_us: Option<u64>,
    last_step_us: Option<u64>,
    start_us: Option<u64>,
    steps: u64,
    fired: bool,
}

impl MaxInitializationTime {
    /// The rule's name.
    pub const NAME: &'static str = "MaxInitializationTime";

    /// The rule with `params`; fails naming the parameter that is out of range.
    pub fn new(params: MaxInitializationTimeParams) -> Result<Self> {
        Check::new(Self::NAME).positive("threshold", params.threshold, "number of minutes")?;
        Ok(MaxInitializationTime {
            params,
            first_step_us: None,
            last_step_us: None,
            start_us: None,
            steps: 0,
            fired: false,
        })
    }
}

impl ProfilerRule for MaxInitializationTime {
    crate::rule_identity!();

    fn needs(&self) -> ProfilerNeeds {
        ProfilerNeeds::reading([ProfilerInput::Spans, ProfilerInput::StepTimeline])
            .requiring("step spans")
    }

    fn invoke_on_window(&mut self, window: &ProfilerWindow<'_>) -> Result<Vec<RuleResult>> {
        let mut datapoints = 0;
        for span in window.spans {
            if let Phase::Step(_) = span.phase_kind() {
                datapoints += 1;
                self.steps += 1;
                self.first_step_us = Some(
                    self.first_step_us
                        .map_or(span.start_us, |f| f.min(span.start_us)),
                );
                self.last_step_us = Some(
                    self.last_step_us
                        .map_or(span.start_us, |l| l.max(span.start_us)),
                );
            }
        }
        self.start_us = window.start_us;
        let mut results = Vec::new();
        if datapoints > 0 {
            let mut r = RuleResult::at_time(window.step_at(window.now_us), window.now_us);
            r.datapoints = datapoints;
            results.push(r);
        }
        let Some(start) = window.start_us else {
            return Ok(results);
        };
        let limit_us = (self.params.threshold * 60e6) as u64;
        let deadline = start.saturating_add(limit_us);
        let minutes = |us: u64| us as f64 / 60e6;
        if !self.fired {
            let message = match self.first_step_us {
                Some(first) if first > deadline => Some(format!(
                    "the first step started {:.1} min after the job started ({}), more than \
                     {} min: initialization (data download, model build, compilation) takes \
                     too long; cache or pre-stage the data and the model",
                    minutes(first - start),
                    utc(start),
                    self.params.threshold
                )),
                None if window.now_us > deadline
                    && (window.final_window
                        || window.now_us > deadline.saturating_add(TRACE_FILE_SLACK_US)) =>
                {
                    Some(format!(
                        "no training step within {} min of the job's start ({}); {:.1} min \
                         of profiler data and still no step span: the job is stuck in \
                         initialization, or the loop records no step spans",
                        self.params.threshold,
                        utc(start),
                        minutes(window.now_us - start)
                    ))
                }
                _ => None,
            };
            if let Some(message) = message {
                self.fired = true;
                let mut r = RuleResult::at_time(0, deadline);
                r.fire(message);
                // The first step as its span numbers it (`TRAIN step 0`); with none yet, the
                // time measured is up to the latest profiler data, at no step.
                let (what, at, waited) = match self.first_step_us {
                    Some(first) => ("first step", window.step_ref_at(first), first - start),
                    None => (
                        "no step span yet, profiler data",
                        StepRef::global(0),
                        window.now_us - start,
                    ),
                };
                r.evidence.push(
                    Evidence::at(what, at, "minutes_after_start", minutes(waited))
                        .limit(self.params.threshold),
                );
                results.push(r);
            }
        }
        if window.final_window && self.first_step_us.is_none() && !self.fired {
            let mut r = RuleResult::at_time(0, window.now_us);
            r.message = "no step span in this run (shorter than the threshold): nothing to \
                         check"
                .into();
            results.push(r);
        }
        Ok(results)
    }

    fn details(&self) -> Option<Details> {
        Some(Details::Initialization(InitializationDetails {
            threshold_minutes: self.params.threshold,
            job_start_us: self.start_us,
            first_step_start_us: self.first_step_us,
            last_step_start_us: self.last_step_us,
            // JobPhases' initialization, as far as the rule has read: job start to first step.
            initialization_s: match (self.start_us, self.first_step_us) {
                (Some(s), Some(f)) => Some(round_us(seconds(f.saturating_sub(s)))),
                _ => None,
            },
            step_spans: self.steps,
            exceeded: self.fired,
        }))
    }
}

/// Parameters of [`StepOutlier`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct StepOutlierParams {
    /// A step is an outlier when longer than mean + `stddev` standard deviations. Default `3`.
    #[serde(deserialize_with = "lenient::f64")]
    pub stddev: f64,
    /// Only steps of this mode (TRAIN, EVAL, PREDICT, GLOBAL). Default: every mode, each on its
    /// own.
    #[serde(deserialize_with = "lenient::opt_string")]
    pub mode: Option<String>,
    /// Outliers tolerated before the rule fires. Default `10`.
    #[serde(deserialize_with = "lenient::u64")]
    pub n_outliers: u64,
}

impl Default for StepOutlierParams {
    fn default() -> Self {
        StepOutlierParams {
            stddev: 3.0,
            mode: None,
            n_outliers: 10,
        }
    }
}

/// A node and mode's step durations in a size that does not grow with the run: how many steps
/// took each duration (µs), so the count beyond any limit, the mean, the deviation and the
/// percentiles stay exact, and the [`KEPT_SLOWEST`] slowest steps themselves (the outliers the
/// rule names are the slowest ones). Its size grows with the spread of the durations at 1 µs,
/// not with the number of steps.
#[derive(Debug, Default)]
struct StepDurations {
    /// Duration (µs) → how many steps took it.
    counts: BTreeMap<u64, u64>,
    /// (duration µs, arrival reversed) → (step, start µs) of the slowest steps, at most
    /// [`KEPT_SLOWEST`]; among steps of one duration the earliest read are kept.
    slowest: BTreeMap<(u64, Reverse<u64>), (u64, u64)>,
    count: u64,
    sum: f64,
    sum_sq: f64,
    firing: bool,
    fired: u64,
}

/// The slowest steps a [`StepDurations`] keeps: the outliers listed in the details and the five
/// named in a finding.
const KEPT_SLOWEST: usize = MAX_OUTLIER_STEPS;

impl StepDurations {
    fn add(&mut self, duration_us: u64, step: u64, start_us: u64) {
        *self.counts.entry(duration_us).or_default() += 1;
        self.slowest
            .insert((duration_us, Reverse(self.count)), (step, start_us));
        if self.slowest.len() > KEPT_SLOWEST {
            self.slowest.pop_first();
        }
        let s = duration_us as f64 / 1e6;
        self.count += 1;
        self.sum += s;
        self.sum_sq += s * s;
    }

    /// Mean and (population) standard deviation, seconds.
    fn mean_std(&self) -> (f64, f64) {
        let n = self.count as f64;
        let mean = self.sum / n;
        (mean, (self.sum_sq / n - mean * mean).max(0.0).sqrt())
    }

    /// The kept steps longer than `limit_s`, slowest first (the earliest read first among
    /// equals): (duration_us, step, start_us). At most [`KEPT_SLOWEST`] of
    /// [`count_above`](Self::count_above).
    fn above(&self, limit_s: f64) -> Vec<(u64, u64, u64)> {
        let from = (limit_s * 1e6).floor() as u64 + 1;
        self.slowest
            .range((from, Reverse(u64::MAX))..)
            .rev()
            .map(|((d, _), (s, t))| (*d, *s, *t))
            .collect()
    }

    fn count_above(&self, limit_s: f64) -> u64 {
        let from = (limit_s * 1e6).floor() as u64 + 1;
        self.counts.range(from..).map(|(_, n)| n).sum()
    }

    /// The duration (µs) at `rank` (0-based) of the sorted durations.
    fn at_rank(&self, rank: u64) -> f64 {
        let mut seen = 0;
        for (d, n) in &self.counts {
            seen += n;
            if seen > rank {
                return *d as f64;
            }
        }
        self.counts
            .last_key_value()
            .map_or(f64::NAN, |(d, _)| *d as f64)
    }

    /// The exact summary of the durations, seconds: percentiles interpolated between ranks
    /// as smdebug-profiler's `percentile` does.
    fn summary(&self) -> Option<Summary> {
        let (first, last) = (
            self.counts.first_key_value()?,
            self.counts.last_key_value()?,
        );
        let (mean, std) = self.mean_std();
        let n = self.count;
        let p = |q: f64| {
            let rank = q / 100.0 * (n - 1) as f64;
            let (low, high) = (rank.floor() as u64, rank.ceil() as u64);
            let (a, b) = (self.at_rank(low), self.at_rank(high));
            (a + (b - a) * (rank - low as f64)) / 1e6
        };
        Some(Summary {
            count: n,
            min: *first.0 as f64 / 1e6,
            max: *last.0 as f64 / 1e6,
            mean,
            std,
            p5: p(5.0),
            p25: p(25.0),
            p50: p(50.0),
            p75: p(75.0),
            p95: p(95.0),
            p99: p(99.0),
        })
    }

    /// Counts in `bins` equal bins over `[lo, hi]` seconds, as `histogram` counts them.
    fn histogram(&self, bins: usize, lo: f64, hi: f64) -> Vec<u64> {
        let mut out = vec![0u64; bins.max(1)];
        for (d, n) in &self.counts {
            let one = histogram([*d as f64 / 1e6], bins, lo, hi);
            if let Some(i) = one.iter().position(|c| *c > 0) {
                out[i] += n;
            }
        }
        out
    }
}

/// **StepOutlier** — per node and mode (or only `mode`): fires when more than `n_outliers`
/// steps took longer than the mean step duration plus `stddev` standard deviations, the mean
/// and deviation being those of every step of that node and mode seen so far. Step durations
/// come from the `Step` spans. Fires once each time the count crosses `n_outliers`.
pub struct StepOutlier {
    params: StepOutlierParams,
    mode: Option<Mode>,
    series: BTreeMap<(String, String), StepDurations>,
}

impl StepOutlier {
    /// The rule's name.
    pub const NAME: &'static str = "StepOutlier";

    /// The rule with `params`; fails naming the parameter that is out of range.
    pub fn new(params: StepOutlierParams) -> Result<Self> {
        let check = Check::new(Self::NAME);
        check.non_negative("stddev", params.stddev, "a number")?;
        let mode = check.mode("mode", params.mode.as_deref())?;
        Ok(StepOutlier {
            params,
            mode,
            series: BTreeMap::new(),
        })
    }
}

impl ProfilerRule for StepOutlier {
    crate::rule_identity!();

    fn needs(&self) -> ProfilerNeeds {
        ProfilerNeeds::reading([ProfilerInput::Spans, ProfilerInput::StepTimeline])
            .requiring("step spans")
    }

    fn invoke_on_window(&mut self, window: &ProfilerWindow<'_>) -> Result<Vec<RuleResult>> {
        let k = self.params.stddev;
        let mut results = Vec::new();
        let mut datapoints = 0;
        for span in window.spans {
            let Phase::Step(phase_mode) = span.phase_kind() else {
                continue;
            };
            let mode = span.mode.unwrap_or(phase_mode);
            if self.mode.is_some_and(|m| m != mode) {
                continue;
            }
            let Some(step) = span.step else {
                continue;
            };
            datapoints += 1;
            let series = self
                .series
                .entry((span.node.clone(), mode.name().to_string()))
                .or_default();
            series.add(span.duration_us(), step, span.start_us);
            let (mean, std) = series.mean_std();
            let limit = mean + k * std;
            let outliers = series.count_above(limit);
            let condition = outliers > self.params.n_outliers;
            if condition && !series.firing {
                series.fired += 1;
                let slowest = series.above(limit);
                let (d, s, _) = slowest[0];
                let d = d as f64 / 1e6;
                let sigmas = if std > 0.0 { (d - mean) / std } else { 0.0 };
                let mut r = RuleResult::at_time(step, span.start_us);
                r.fire(format!(
                    "node {}, {}: {outliers} steps took longer than the mean {} + {k}σ \
                     (σ = {}) = {}, more than {} allowed; the slowest, {} step {s}, took {}, \
                     {sigmas:.1}σ above the mean: find what these steps do differently \
                     (checkpoints, evaluation, data-loading stalls, garbage collection)",
                    span.node,
                    mode.name(),
                    duration(mean),
                    duration(std),
                    duration(limit),
                    self.params.n_outliers,
                    mode.name(),
                    duration(d),
                ));
                for (d, s, _) in slowest.iter().take(5) {
                    r.evidence.push(
                        Evidence::at(
                            &format!("{} {} step duration", span.node, mode.name()),
                            StepRef::of_mode(*s, mode),
                            "seconds",
                            *d as f64 / 1e6,
                        )
                        .limit(limit),
                    );
                }
                results.push(r);
            }
            series.firing = condition;
        }
        if datapoints > 0 {
            let mut r = RuleResult::at_time(window.step_at(window.now_us), window.now_us);
            r.datapoints = datapoints;
            results.push(r);
        }
        if window.final_window && self.series.is_empty() {
            let mut r = RuleResult::at_time(0, window.now_us);
            r.message = match self.mode {
                Some(m) => format!("no {} step spans in this run: nothing to check", m.name()),
                None => "no step spans in this run: nothing to check".into(),
            };
            results.push(r);
        }
        Ok(results)
    }

    fn details(&self) -> Option<Details> {
        let k = self.params.stddev;
        let mut nodes: BTreeMap<String, BTreeMap<String, StepSeriesDetails>> = BTreeMap::new();
        for ((node, mode), s) in &self.series {
            let (mean, std) = s.mean_std();
            let limit = mean + k * std;
            let outliers = s.above(limit);
            let Some(summary) = s.summary() else {
                continue;
            };
            let bins = 20usize;
            let (lo, hi) = (summary.min, summary.max);
            let width = (hi - lo) / bins as f64;
            let histogram = s.histogram(bins, lo, hi);
            nodes.entry(node.clone()).or_default().insert(
                mode.clone(),
                StepSeriesDetails {
                    steps: s.count,
                    duration_s: summary.rounded_us(),
                    outlier_limit_s: round_us(limit),
                    outliers: s.count_above(limit),
                    outlier_steps: outliers
                        .iter()
                        .take(MAX_OUTLIER_STEPS)
                        .map(|&(d, step, start_us)| OutlierStep {
                            step,
                            start_us,
                            duration_s: d as f64 / 1e6,
                        })
                        .collect(),
                    histogram: StepHistogram {
                        min_s: round_us(lo),
                        bin_width_s: round_us(width),
                        counts: histogram,
                    },
                    times_fired: s.fired,
                },
            );
        }
        Some(Details::StepOutliers(StepOutlierDetails {
            nodes,
            allowed_outliers: Some(self.params.n_outliers),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Sub-millisecond steps keep figures that add up: the limit is the mean plus `stddev`
    /// standard deviations as written beside it, and the histogram's bins have a width.
    #[test]
    fn step_outlier_details_of_sub_millisecond_steps_add_up() {
        let mut rule = StepOutlier::new(StepOutlierParams::default()).unwrap();
        let spans: Vec<smdebug_read::profile::Span> = (0..450u64)
            .map(|step| {
                let us = 300 + (step * 37) % 350 + if step == 0 { 4_400 } else { 0 };
                smdebug_read::profile::Span {
                    phase: "Step:ModeKeys.TRAIN".into(),
                    name: "Step:ModeKeys.TRAIN".into(),
                    start_us: 1_000_000 + step * 5_000,
                    end_us: 1_000_000 + step * 5_000 + us,
                    node: "vm".into(),
                    worker: Some(0),
                    step: Some(step),
                    mode: None,
                    args: Default::default(),
                }
            })
            .collect();
        let mut steps = crate::window::StepTimeline::default();
        steps.extend(&spans);
        let window = ProfilerWindow {
            samples: &[],
            spans: &spans,
            start_us: Some(1_000_000),
            now_us: 4_000_000,
            final_window: true,
            steps: &steps,
        };
        rule.invoke_on_window(&window).unwrap();
        let Some(Details::StepOutliers(d)) = rule.details() else {
            panic!("no step outlier details");
        };
        let s = &d.nodes["vm"]["TRAIN"];
        let k = StepOutlierParams::default().stddev;
        let expected = s.duration_s.mean + k * s.duration_s.std;
        assert!(
            (s.outlier_limit_s - expected).abs() <= 2e-6 * (1.0 + k),
            "limit {} against mean {} + {k} x std {}",
            s.outlier_limit_s,
            s.duration_s.mean,
            s.duration_s.std
        );
        assert_eq!(s.duration_s.min, 0.0003);
        assert_eq!(s.duration_s.max, 0.0047);
        assert!(s.histogram.bin_width_s > 0.0, "{:?}", s.histogram);
        let top = s.histogram.min_s + s.histogram.counts.len() as f64 * s.histogram.bin_width_s;
        assert!((top - s.duration_s.max).abs() <= 1e-5, "{:?}", s.histogram);
    }

    /// The bounded form answers as every step kept would: counts beyond a limit, the slowest
    /// steps in order (the earliest read first among equal durations), the exact summary and
    /// histogram.
    #[test]
    fn step_durations_answer_as_every_step_kept_would() {
        let mut d = StepDurations::default();
        let mut all: Vec<(u64, u64, u64)> = Vec::new();
        for step in 0..20_000u64 {
            let us = 20_000 + (step * 7_919) % 3_000 + if step % 997 == 0 { 50_000 } else { 0 };
            d.add(us, step, step * 30_000);
            all.push((us, step, step * 30_000));
        }
        let (mean, std) = d.mean_std();
        for limit in [mean, mean + std, mean + 3.0 * std, 0.0, 1.0] {
            let from = (limit * 1e6).floor() as u64 + 1;
            let mut above: Vec<(u64, u64, u64)> =
                all.iter().copied().filter(|a| a.0 >= from).collect();
            // Slowest first; among equals, in the order read.
            above.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
            assert_eq!(d.count_above(limit), above.len() as u64);
            above.truncate(KEPT_SLOWEST);
            assert_eq!(d.above(limit), above);
        }
        let seconds: Vec<f64> = all.iter().map(|a| a.0 as f64 / 1e6).collect();
        let exact = Summary::of(seconds.iter().copied()).unwrap();
        let got = d.summary().unwrap();
        assert_eq!(
            (got.count, got.min, got.max),
            (exact.count, exact.min, exact.max)
        );
        for (a, b) in [
            (got.p5, exact.p5),
            (got.p50, exact.p50),
            (got.p95, exact.p95),
            (got.p99, exact.p99),
            (got.mean, exact.mean),
            (got.std, exact.std),
        ] {
            assert!((a - b).abs() < 1e-9, "{got:?} vs {exact:?}");
        }
        assert_eq!(
            d.histogram(20, exact.min, exact.max),
            histogram(seconds.iter().copied(), 20, exact.min, exact.max)
        );
    }
}
