//! The profiler rules (SageMaker Debugger's profiler rules, with their names, parameters and
//! defaults) and what they read: [`ProfilerWindow`], the system samples and framework spans that
//! are new since the rule's previous call.
//!
//! Rules keep their own state per node and per GPU across windows, so a run fed in one window or
//! in many gives the same verdict. The runner ([`crate::RuleRunner`]) reads the run's profiler
//! files (`system/incremental/...` and `framework/pevents/...`) and feeds them in windows of
//! 60 s of job time offline, or as they appear when following a live run.
//!
//! A profiler rule can be run by hand over any samples and spans:
//!
//! ```
//! use smdebug_profiler::system::SystemSample;
//! use smdebug_rules::profiler::{ProfilerWindow, StepTimeline};
//! use smdebug_rules::{RuleSpec, build_rule};
//!
//! let mut rule = build_rule(&RuleSpec::parse("LowGPUUtilization:patience=0,window=5").unwrap()).unwrap();
//! let samples: Vec<SystemSample> = (0..10)
//!     .map(|i| SystemSample {
//!         metric_type: "gpu".into(),
//!         name: "gpu0".into(),
//!         dimension: "GPUUtilization".into(),
//!         value: 5.0,
//!         node_id: "algo-1".into(),
//!         timestamp: 1_700_000_000.0 + i as f64 * 0.5,
//!     })
//!     .collect();
//! let steps = StepTimeline::default();
//! let window = ProfilerWindow {
//!     samples: &samples,
//!     spans: &[],
//!     start_us: Some(1_700_000_000_000_000),
//!     now_us: 1_700_000_004_500_000,
//!     final_window: true,
//!     steps: &steps,
//! };
//! let results = rule.invoke_on_window(&window).unwrap();
//! assert!(results.iter().any(|r| r.fired && r.message.contains("gpu0")));
//! ```

/// The parts of `impl Rule` every built-in profiler rule shares: its name (`Self::NAME`), its
/// parameters (`self.params` as JSON) and its input (profiler data).
macro_rules! profiler_rule_identity {
    () => {
        fn name(&self) -> &str {
            Self::NAME
        }
        fn parameters(&self) -> serde_json::Value {
            crate::rules::to_json(&self.params)
        }
        fn input(&self) -> crate::rule::RuleInput {
            crate::rule::RuleInput::Profiler
        }
    };
}

mod cpu_io;
pub(crate) mod feed;
mod gpu;
mod overall;
mod stats;
mod steps;

pub use cpu_io::{
    CPUBottleneck, CPUBottleneckParams, Dataloader, DataloaderParams, IOBottleneck,
    IOBottleneckParams,
};
pub use gpu::{
    BatchSize, BatchSizeParams, GPUMemoryIncrease, GPUMemoryIncreaseParams, LoadBalancing,
    LoadBalancingParams, LowGPUUtilization, LowGPUUtilizationParams,
};
pub use overall::{
    OverallFrameworkMetrics, OverallFrameworkMetricsParams, OverallSystemUsage,
    OverallSystemUsageParams,
};
pub use stats::{RollingWindow, Sketch, quantile};
pub use steps::{
    MaxInitializationTime, MaxInitializationTimeParams, StepOutlier, StepOutlierParams,
};

use std::collections::BTreeMap;

use smdebug_profiler::reader::Span;
use smdebug_profiler::spans::Phase;
use smdebug_profiler::system::{SystemSample, vocab};

use crate::error::{Error, Result};

/// The profiler data that is new since a rule's previous call.
#[derive(Clone, Copy, Debug)]
pub struct ProfilerWindow<'a> {
    /// New system samples, ordered by time.
    pub samples: &'a [SystemSample],
    /// New closed framework spans, ordered by end time.
    pub spans: &'a [Span],
    /// The earliest timestamp of the whole job seen so far (sample or span start),
    /// microseconds since the epoch; `None` while no profiler data has been seen.
    pub start_us: Option<u64>,
    /// The latest time seen: the latest sample or span end, and when following a live run
    /// also the wall clock. Microseconds since the epoch.
    pub now_us: u64,
    /// No more data will come: the run ended, or this is the end of an offline evaluation.
    pub final_window: bool,
    /// Every step span seen so far (this window's included), to tell which step ran when.
    pub steps: &'a StepTimeline,
}

impl ProfilerWindow<'_> {
    /// The latest step that started at or before `time_us` (0 when none did).
    pub fn step_at(&self, time_us: u64) -> u64 {
        self.steps.step_at(time_us).unwrap_or(0)
    }
}

/// The `Step` spans seen so far, by start time: which step the loop was in at a given time.
#[derive(Clone, Debug, Default)]
pub struct StepTimeline {
    /// (start_us, end_us, step), sorted by start.
    steps: Vec<(u64, u64, u64)>,
}

impl StepTimeline {
    /// Adds the step spans among `spans` (spans of other phases are ignored).
    pub fn extend(&mut self, spans: &[Span]) {
        let before = self.steps.len();
        for span in spans {
            if let (Phase::Step(_), Some(step)) = (span.phase_kind(), span.step) {
                self.steps.push((span.start_us, span.end_us, step));
            }
        }
        if self.steps.len() > before {
            self.steps.sort_unstable();
        }
    }

    /// The latest step that started at or before `time_us`.
    pub fn step_at(&self, time_us: u64) -> Option<u64> {
        let after = self.steps.partition_point(|s| s.0 <= time_us);
        after.checked_sub(1).map(|i| self.steps[i].2)
    }

    /// The start of the first step span, microseconds since the epoch.
    pub fn first_start_us(&self) -> Option<u64> {
        self.steps.first().map(|s| s.0)
    }

    /// How many step spans were seen.
    pub fn len(&self) -> usize {
        self.steps.len()
    }

    /// Whether no step span was seen.
    pub fn is_empty(&self) -> bool {
        self.steps.is_empty()
    }
}

/// Samples of one node taken within this long of each other belong to one snapshot (the
/// sampler's threads do not all wake at the same microsecond; SageMaker used the same 20 ms).
pub const SNAPSHOT_TOLERANCE_US: u64 = 20_000;

/// The CPU and GPU readings of one node at one time.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Snapshot {
    pub node: String,
    /// Time of the snapshot's first sample, microseconds since the epoch.
    pub time_us: u64,
    /// `CPUUtilization` by name (`cpu0`, ..., and `total` when the sampler wrote it).
    pub cpu: BTreeMap<String, f64>,
    /// `I/OWaitPercentage` by name.
    pub io_wait: BTreeMap<String, f64>,
    /// `GPUUtilization` by GPU (`gpu0`, ...).
    pub gpu: BTreeMap<String, f64>,
    /// `GPUMemoryUtilization` (memory used, percent) by GPU.
    pub gpu_memory: BTreeMap<String, f64>,
}

impl Snapshot {
    /// The whole machine's CPU utilization: the `total` record, else the mean over cores.
    pub fn cpu_total(&self) -> Option<f64> {
        if let Some(total) = self.cpu.get(vocab::CPU_TOTAL) {
            return Some(*total);
        }
        let cores: Vec<f64> = self
            .cpu
            .iter()
            .filter(|(name, _)| is_core(name))
            .map(|(_, v)| *v)
            .collect();
        (!cores.is_empty()).then(|| cores.iter().sum::<f64>() / cores.len() as f64)
    }

    fn is_empty(&self) -> bool {
        self.cpu.is_empty()
            && self.io_wait.is_empty()
            && self.gpu.is_empty()
            && self.gpu_memory.is_empty()
    }
}

/// Whether a CPU record's name is one core's (`cpu0`, `cpu17`).
pub fn is_core(name: &str) -> bool {
    name.strip_prefix("cpu")
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

/// Which of a snapshot's tables a sample goes into.
type Reading = fn(&mut Snapshot) -> &mut BTreeMap<String, f64>;

/// Groups a node's samples into [`Snapshot`]s across windows. A snapshot is complete when a
/// later sample of its node arrives, or at the final window.
#[derive(Clone, Debug, Default)]
pub struct SnapshotAssembler {
    open: BTreeMap<String, Snapshot>,
}

impl SnapshotAssembler {
    /// The snapshots that `window` completes, ordered by time.
    pub fn feed(&mut self, window: &ProfilerWindow<'_>) -> Vec<Snapshot> {
        let mut done = Vec::new();
        for sample in window.samples {
            let (map, value): (Reading, f64) =
                match (sample.metric_type.as_str(), sample.dimension.as_str()) {
                    (vocab::TYPE_CPU, vocab::CPU_UTILIZATION) => (|s| &mut s.cpu, sample.value),
                    (vocab::TYPE_CPU, vocab::IO_WAIT_PERCENTAGE) => {
                        (|s| &mut s.io_wait, sample.value)
                    }
                    (vocab::TYPE_GPU, vocab::GPU_UTILIZATION) => (|s| &mut s.gpu, sample.value),
                    (vocab::TYPE_GPU, vocab::GPU_MEMORY_UTILIZATION) => {
                        (|s| &mut s.gpu_memory, sample.value)
                    }
                    _ => continue,
                };
            if !value.is_finite() {
                continue;
            }
            let at = sample.timestamp_us();
            let open = self.open.entry(sample.node_id.clone()).or_default();
            if !open.is_empty() && at.abs_diff(open.time_us) > SNAPSHOT_TOLERANCE_US {
                done.push(std::mem::take(open));
            }
            if open.is_empty() {
                open.node = sample.node_id.clone();
                open.time_us = at;
            }
            map(open).insert(sample.name.clone(), value);
        }
        if window.final_window {
            done.extend(
                std::mem::take(&mut self.open)
                    .into_values()
                    .filter(|s| !s.is_empty()),
            );
        }
        done.sort_by(|a, b| (a.time_us, &a.node).cmp(&(b.time_us, &b.node)));
        done
    }
}

/// Formats microseconds since the epoch as UTC (`2020-06-10 00:15:09.250 UTC`), for messages.
pub fn utc(time_us: u64) -> String {
    i64::try_from(time_us)
        .ok()
        .and_then(chrono::DateTime::from_timestamp_micros)
        .map(|t| t.format("%Y-%m-%d %H:%M:%S%.3f UTC").to_string())
        .unwrap_or_else(|| format!("{time_us} µs since the epoch"))
}

/// Checks that a percentage parameter lies in 0..=100 (or, with `open_top`, is at least 0).
pub(crate) fn check_percent(rule: &str, param: &str, value: f64, open_top: bool) -> Result<()> {
    let ok = value.is_finite() && value >= 0.0 && (open_top || value <= 100.0);
    if ok {
        Ok(())
    } else {
        Err(Error::BadParameter {
            rule: rule.into(),
            param: param.into(),
            reason: if open_top {
                format!("must be a percentage of at least 0, got {value}")
            } else {
                format!("must be a percentage in 0..=100, got {value}")
            },
        })
    }
}

/// Checks that a count parameter is at least 1.
pub(crate) fn check_positive(rule: &str, param: &str, value: u64) -> Result<()> {
    if value >= 1 {
        Ok(())
    } else {
        Err(Error::BadParameter {
            rule: rule.into(),
            param: param.into(),
            reason: "must be at least 1".into(),
        })
    }
}

/// The message of a GPU rule that saw no GPU metrics.
pub(crate) const NO_GPU: &str = "no GPU metrics in this run (no `gpu` records with \
    GPUUtilization/GPUMemoryUtilization): nothing to check";

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(node: &str, t: f64, ty: &str, name: &str, dim: &str, v: f64) -> SystemSample {
        SystemSample {
            metric_type: ty.into(),
            name: name.into(),
            dimension: dim.into(),
            value: v,
            node_id: node.into(),
            timestamp: t,
        }
    }

    #[test]
    fn snapshots_are_the_same_whether_fed_at_once_or_sample_by_sample() {
        let mut samples = Vec::new();
        for i in 0..5 {
            let t = 100.0 + i as f64 * 0.1;
            samples.push(sample("a", t, "cpu", "cpu0", "CPUUtilization", i as f64));
            samples.push(sample(
                "a",
                t + 0.005,
                "gpu",
                "gpu0",
                "GPUUtilization",
                50.0,
            ));
            samples.push(sample("b", t, "cpu", "total", "CPUUtilization", 7.0));
        }
        let steps = StepTimeline::default();
        let mut whole = SnapshotAssembler::default();
        let all = whole.feed(&window(&samples, &steps, true));
        let mut piecewise = SnapshotAssembler::default();
        let mut pieces = Vec::new();
        for (i, s) in samples.iter().enumerate() {
            let last = i + 1 == samples.len();
            pieces.extend(piecewise.feed(&window(std::slice::from_ref(s), &steps, last)));
        }
        pieces.sort_by(|a, b| (a.time_us, &a.node).cmp(&(b.time_us, &b.node)));
        assert_eq!(all.len(), 10);
        assert_eq!(all, pieces);
        assert_eq!(all[0].cpu["cpu0"], 0.0);
        assert_eq!(all[0].gpu["gpu0"], 50.0);
        assert_eq!(all[1].cpu_total(), Some(7.0));
    }

    fn window<'a>(
        samples: &'a [SystemSample],
        steps: &'a StepTimeline,
        last: bool,
    ) -> ProfilerWindow<'a> {
        ProfilerWindow {
            samples,
            spans: &[],
            start_us: None,
            now_us: 0,
            final_window: last,
            steps,
        }
    }

    #[test]
    fn step_timeline_answers_the_latest_step_started() {
        let mut t = StepTimeline::default();
        assert_eq!(t.step_at(5), None);
        let span = |start, end, step| Span {
            phase: "Step:ModeKeys.TRAIN".into(),
            name: "Step:ModeKeys.TRAIN".into(),
            start_us: start,
            end_us: end,
            node: "n".into(),
            worker: Some(0),
            step: Some(step),
            mode: None,
            args: Default::default(),
        };
        t.extend(&[span(20, 30, 2), span(10, 20, 1)]);
        assert_eq!(t.step_at(5), None);
        assert_eq!(t.step_at(15), Some(1));
        assert_eq!(t.step_at(25), Some(2));
        assert_eq!(t.step_at(99), Some(2));
        assert_eq!(t.first_start_us(), Some(10));
    }

    #[test]
    fn utc_formats_a_known_time() {
        assert_eq!(utc(1_591_748_109_250_000), "2020-06-10 00:15:09.250 UTC");
    }
}
