//! What OverallSystemUsage and OverallFrameworkMetrics collect: the whole run's statistics, per
//! node and metric, and where the job's time went.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use smdebug_analysis::stats::Summary;

/// OverallSystemUsage's statistics: node → metric row (`CPUUtilization (per core)`,
/// `gpu0 GPUUtilization`, ...) → its figures.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SystemUsageDetails {
    /// Node → metric row → its figures.
    pub nodes: BTreeMap<String, BTreeMap<String, MetricUsage>>,
}

/// One metric row of a node over the whole run (per-core CPU series pooled into one row).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MetricUsage {
    /// The metric's type (`cpu`, `gpu`, `memory`, ...).
    #[serde(rename = "type")]
    pub metric_type: String,
    /// Its unit (`%`, `bytes/s`, ...).
    pub unit: String,
    /// Every reading of the run (quantiles within about 1 %), rounded to 4 decimals.
    pub values: Summary,
}

/// OverallFrameworkMetrics' split of the job's time, from the framework spans.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct FrameworkMetricsDetails {
    /// The first record's time, µs since the epoch.
    pub job_start_us: Option<u64>,
    /// The latest time the rule was fed up to, µs since the epoch.
    pub job_end_us: Option<u64>,
    /// From start to end, seconds.
    pub job_duration_s: f64,
    /// Spans seen.
    pub spans: u64,
    /// Per phase name (`Step:ModeKeys.TRAIN`, `DataLoaderIter`, ...).
    pub phases: BTreeMap<String, TimeShare>,
    /// Time in step spans per mode name (`TRAIN`, ...).
    pub steps_by_mode: BTreeMap<String, TimeShare>,
    /// The job's time outside every step span (initialization, finalization, between steps).
    pub outside_steps: TimeOutside,
    /// Forward spans.
    pub forward: TimeTotal,
    /// Backward spans.
    pub backward: TimeTotal,
    /// Forward time as a share of forward + backward, percent.
    pub forward_percent_of_forward_backward: Option<f64>,
    /// Operators with a Kineto-style `cat` saying they ran on the CPU.
    pub cpu_operators: Option<OperatorTotals>,
    /// Operators that ran on the GPU (kernels, copies).
    pub gpu_operators: Option<OperatorTotals>,
}

/// Spans of one kind: how many, how long in all.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TimeTotal {
    /// Spans.
    pub count: u64,
    /// Their durations summed, seconds (4 decimals).
    pub total_s: f64,
}

/// Spans of one kind and their share of the job.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TimeShare {
    /// Spans.
    pub count: u64,
    /// Their durations summed, seconds (4 decimals).
    pub total_s: f64,
    /// `total_s` as a percentage of the job's duration; `None` for a job of no length.
    pub percent_of_job: Option<f64>,
}

/// The job's time outside the steps.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TimeOutside {
    /// Seconds.
    pub total_s: f64,
    /// Percentage of the job's duration; `None` for a job of no length.
    pub percent_of_job: Option<f64>,
}

/// The operators of one device.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct OperatorTotals {
    /// Their time summed, seconds.
    pub total_s: f64,
    /// Distinct operator names.
    pub operators: usize,
    /// The ten that took the longest, longest first.
    pub top: Vec<OperatorTime>,
}

/// One operator's time.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct OperatorTime {
    /// Its name.
    pub name: String,
    /// Times it ran.
    pub count: u64,
    /// Its time summed, seconds.
    pub total_s: f64,
}
