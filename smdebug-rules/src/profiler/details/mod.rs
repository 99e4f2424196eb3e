//! What a profiler rule found, typed: the evidence the report's sections and the dashboard
//! show, read from the rule itself ([`ProfilerRule::details`](crate::ProfilerRule::details)) or
//! back from the rules summary (`rules/rule_job_summary.json`) with
//! [`RuleStatus::profiler_details`](crate::RuleStatus::profiler_details), which says why when
//! they do not read ([`crate::DecodeError`]).
//!
//! The JSON form is the struct's fields with a `kind` tag (`{"kind": "bottlenecks",
//! "nodes": {...}}`). Every profiler rule's details are typed; the evidence of the bottleneck,
//! step-outlier, load-balancing and GPU-utilization rules is here, the others' in `usage.rs`
//! (OverallSystemUsage, OverallFrameworkMetrics), `resources.rs` (BatchSize,
//! GPUMemoryIncrease) and `loading.rs` (Dataloader, MaxInitializationTime).

mod finding;
mod loading;
mod resources;
mod usage;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use smdebug_analysis::stats::Summary;

pub use loading::{DataloaderDetails, InitializationDetails, NodeDataLoading, WorkerVerdict};
pub use resources::{
    BatchSizeDetails, BatchSizeGpu, BatchSizeNode, Firing, GpuMemoryDetails, GpuMemoryUse,
    MemoryIncrease,
};
pub use usage::{
    FrameworkMetricsDetails, MetricUsage, OperatorTime, OperatorTotals, SystemUsageDetails,
    TimeOutside, TimeShare, TimeTotal,
};

/// A profiler rule's details.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Details {
    /// CPUBottleneck and IOBottleneck: per node, the snapshots counted and the bottleneck ones.
    Bottlenecks(BottleneckDetails),
    /// StepOutlier: per node and mode, the step-duration summary and the outlier steps.
    StepOutliers(StepOutlierDetails),
    /// LoadBalancing: per node, each GPU's utilization histogram and the distances between
    /// them.
    LoadBalancing(LoadBalancingDetails),
    /// LowGPUUtilization: per node and GPU, the utilization summary, the latest window's p95
    /// and p5, and the state the rule judged.
    GpuUtilization(GpuUtilizationDetails),
    /// OverallSystemUsage: per node and metric, the run's statistics.
    SystemUsage(SystemUsageDetails),
    /// OverallFrameworkMetrics: where the job's time went, from the framework spans.
    FrameworkMetrics(FrameworkMetricsDetails),
    /// BatchSize: the thresholds, and per node and GPU the window p95s compared with them.
    BatchSize(BatchSizeDetails),
    /// GPUMemoryIncrease: the limit, and per node and GPU the moving averages and rises.
    GpuMemory(GpuMemoryDetails),
    /// Dataloader: the thresholds, and per node the workers against the cores.
    Dataloader(DataloaderDetails),
    /// MaxInitializationTime: the threshold and the time before the first step.
    Initialization(InitializationDetails),
}

impl Details {
    /// The details of a profiler rule in `value`: `Ok(None)` when it wrote none (null), an
    /// error naming what does not fit when they are not what this version writes (a summary
    /// written by another version of the rule, or damaged).
    pub fn decode(value: &serde_json::Value) -> Result<Option<Details>, serde_json::Error> {
        if value.is_null() {
            return Ok(None);
        }
        Details::deserialize(value).map(Some)
    }

    /// The JSON form, as the summary records it.
    pub fn to_value(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or(serde_json::Value::Null)
    }

    /// The bottleneck details, if these are.
    pub fn bottlenecks(&self) -> Option<&BottleneckDetails> {
        match self {
            Details::Bottlenecks(b) => Some(b),
            _ => None,
        }
    }

    /// The load-balancing details, if these are.
    pub fn load_balancing(&self) -> Option<&LoadBalancingDetails> {
        match self {
            Details::LoadBalancing(l) => Some(l),
            _ => None,
        }
    }

    /// The GPU-utilization details, if these are.
    pub fn gpu_utilization(&self) -> Option<&GpuUtilizationDetails> {
        match self {
            Details::GpuUtilization(g) => Some(g),
            _ => None,
        }
    }

    /// The step-outlier details, if these are.
    pub fn step_outliers(&self) -> Option<&StepOutlierDetails> {
        match self {
            Details::StepOutliers(s) => Some(s),
            _ => None,
        }
    }

    /// OverallSystemUsage's details, if these are.
    pub fn system_usage(&self) -> Option<&SystemUsageDetails> {
        match self {
            Details::SystemUsage(d) => Some(d),
            _ => None,
        }
    }

    /// OverallFrameworkMetrics's details, if these are.
    pub fn framework_metrics(&self) -> Option<&FrameworkMetricsDetails> {
        match self {
            Details::FrameworkMetrics(d) => Some(d),
            _ => None,
        }
    }

    /// BatchSize's details, if these are.
    pub fn batch_size(&self) -> Option<&BatchSizeDetails> {
        match self {
            Details::BatchSize(d) => Some(d),
            _ => None,
        }
    }

    /// GPUMemoryIncrease's details, if these are.
    pub fn gpu_memory(&self) -> Option<&GpuMemoryDetails> {
        match self {
            Details::GpuMemory(d) => Some(d),
            _ => None,
        }
    }

    /// Dataloader's details, if these are.
    pub fn dataloader(&self) -> Option<&DataloaderDetails> {
        match self {
            Details::Dataloader(d) => Some(d),
            _ => None,
        }
    }

    /// MaxInitializationTime's details, if these are.
    pub fn initialization(&self) -> Option<&InitializationDetails> {
        match self {
            Details::Initialization(d) => Some(d),
            _ => None,
        }
    }
}

/// CPUBottleneck's or IOBottleneck's findings per node.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct BottleneckDetails {
    /// Per node.
    pub nodes: BTreeMap<String, NodeBottlenecks>,
}

impl BottleneckDetails {
    /// Snapshots evaluated over every node.
    pub fn datapoints(&self) -> u64 {
        self.nodes.values().map(|n| n.datapoints).sum()
    }

    /// Bottleneck snapshots over every node.
    pub fn bottlenecks(&self) -> u64 {
        self.nodes.values().map(|n| n.bottlenecks).sum()
    }
}

/// One node's bottleneck counts. A snapshot is the node's readings within
/// [`SNAPSHOT_TOLERANCE_US`](super::SNAPSHOT_TOLERANCE_US) of each other.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct NodeBottlenecks {
    /// Snapshots with GPU readings evaluated (after patience).
    pub datapoints: u64,
    /// Snapshots with GPU readings skipped at the start (patience).
    pub skipped_for_patience: u64,
    /// Evaluated snapshots where some GPU idled while the host was busy.
    pub bottlenecks: u64,
    /// `bottlenecks` as a percentage of `datapoints` (0 with none), rounded to 4 decimals.
    pub bottleneck_percent: f64,
    /// Evaluated snapshots where some GPU idled, bottleneck or not.
    pub low_gpu_utilization: u64,
    /// The first bottleneck snapshots (at most 1000), in time order.
    pub bottleneck_samples: Vec<BottleneckSample>,
    /// Per framework phase (Step spans left out), how many of the kept bottleneck snapshots
    /// overlapped one of its spans (a snapshot covers `since_us..=time_us`; it counts once per
    /// phase).
    pub phases_during_bottlenecks: BTreeMap<String, u64>,
}

/// A bottleneck snapshot.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BottleneckSample {
    /// Where the time the snapshot's readings average over starts: the node's previous
    /// snapshot, µs since the epoch (`time_us` for a node's first).
    #[serde(default)]
    pub since_us: u64,
    /// The snapshot's time, µs since the epoch.
    pub time_us: u64,
    /// The training step running then.
    pub step: u64,
    /// The highest busy host reading (CPU utilization or I/O wait, %) above the threshold.
    pub host_percent: f64,
    /// The lowest GPU utilization (%) below the GPU threshold.
    pub gpu_percent: f64,
}

/// StepOutlier's findings: per node, per mode name (`TRAIN`, ...).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct StepOutlierDetails {
    /// Node → mode → the steps' figures.
    pub nodes: BTreeMap<String, BTreeMap<String, StepSeriesDetails>>,
    /// Outlier steps a node and mode may have before the rule fires (its `n_outliers`);
    /// `None` in summaries written before it was recorded.
    #[serde(default)]
    pub allowed_outliers: Option<u64>,
}

impl StepOutlierDetails {
    /// Outlier steps over every node and mode.
    pub fn outliers(&self) -> u64 {
        self.nodes
            .values()
            .flat_map(|m| m.values())
            .map(|s| s.outliers)
            .sum()
    }
}

/// One node and mode's step durations as StepOutlier judged them.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StepSeriesDetails {
    /// Steps seen.
    pub steps: u64,
    /// Step durations in seconds (exact percentiles), rounded to the microsecond.
    pub duration_s: Summary,
    /// A step longer than this (mean + `stddev` standard deviations), seconds, is an outlier.
    pub outlier_limit_s: f64,
    /// Steps longer than the limit.
    pub outliers: u64,
    /// The slowest outlier steps (at most 100), slowest first.
    pub outlier_steps: Vec<OutlierStep>,
    /// Step durations in 20 equal bins from the shortest to the longest.
    pub histogram: StepHistogram,
    /// Times the rule fired for this node and mode.
    pub times_fired: u64,
}

/// An outlier step.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct OutlierStep {
    /// Its step number.
    pub step: u64,
    /// When it started, µs since the epoch.
    pub start_us: u64,
    /// How long it took, seconds.
    pub duration_s: f64,
}

/// Step durations binned.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StepHistogram {
    /// The first bin's low end, seconds.
    pub min_s: f64,
    /// Each bin's width, seconds.
    pub bin_width_s: f64,
    /// Steps per bin.
    pub counts: Vec<u64>,
}

/// LoadBalancing's findings per node.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LoadBalancingDetails {
    /// Per node.
    pub nodes: BTreeMap<String, NodeWorkloads>,
}

impl LoadBalancingDetails {
    /// Every compared pair, over every node: `(node, pair)`.
    pub fn distances(&self) -> impl Iterator<Item = (&str, &GpuDistance)> {
        self.nodes
            .iter()
            .flat_map(|(node, n)| n.distances.iter().map(move |d| (node.as_str(), d)))
    }
}

/// One node's GPU workloads.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NodeWorkloads {
    /// Width of a histogram bin, percent of utilization (bins start at 0).
    pub bin_width_percent: f64,
    /// Per GPU with samples judged (after patience).
    pub workloads: BTreeMap<String, GpuWorkload>,
    /// The distance of each pair of GPUs compared so far.
    pub distances: Vec<GpuDistance>,
}

/// One GPU's utilization as LoadBalancing counted it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GpuWorkload {
    /// Samples per utilization bin.
    pub histogram: Vec<u64>,
    /// Mean utilization, percent.
    pub mean: f64,
    /// Share of the samples below 10 % utilization, percent.
    pub idle_percent: f64,
    /// Samples judged.
    pub samples: u64,
}

/// The Jensen–Shannon distance (natural log, 0 to √ln 2 ≈ 0.83) between two GPUs' histograms.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GpuDistance {
    /// The two GPUs.
    pub gpus: [String; 2],
    /// Their distance, rounded to 4 decimals.
    pub distance: f64,
}

/// LowGPUUtilization's findings: node → GPU → its utilization.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct GpuUtilizationDetails {
    /// Node → GPU (`gpu0`) → what the rule saw.
    pub nodes: BTreeMap<String, BTreeMap<String, GpuUtilization>>,
}

/// One GPU as LowGPUUtilization judged it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GpuUtilization {
    /// Every reading of the run (quantiles within about 1 %); `None` before any.
    pub utilization: Option<Summary>,
    /// The p95 of the rule's window (the GPU's latest `window` readings).
    pub window_p95: Option<f64>,
    /// The p5 of the rule's window.
    pub window_p5: Option<f64>,
    /// The state the latest judged window put the GPU in; `None`: busy, or not judged yet.
    pub state: Option<GpuUsageState>,
    /// Times the GPU entered a state (the rule fired).
    pub violations: u64,
    /// Whether the rule judged the GPU at all (more readings than `patience`).
    pub judged: bool,
}

/// What LowGPUUtilization found wrong with a GPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum GpuUsageState {
    /// The p95 is below `threshold_p95`.
    Underused,
    /// The p95 is above `threshold_p95` while the p5 is below `threshold_p5`.
    Fluctuating,
}
