//! What BatchSize and GPUMemoryIncrease judged: the thresholds in force, the numbers compared
//! with them, and when the rule fired.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use smdebug_analysis::stats::Summary;

/// A moment the rule fired.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Firing {
    /// When, µs since the epoch.
    pub time_us: u64,
    /// The training step running then.
    pub step: u64,
}

/// BatchSize's findings: the thresholds and, per node and GPU, the p95s of the latest window.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct BatchSizeDetails {
    /// The CPU p95 (percent) under which the CPU has room.
    pub cpu_threshold_p95: f64,
    /// The GPU p95 under which a GPU has room.
    pub gpu_threshold_p95: f64,
    /// The GPU-memory p95 under which a GPU's memory has room.
    pub gpu_memory_threshold_p95: f64,
    /// Samples per window the p95s are taken over.
    pub window: u64,
    /// Per node.
    pub nodes: BTreeMap<String, BatchSizeNode>,
}

/// One node as BatchSize judged it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct BatchSizeNode {
    /// The node's total CPU utilization over the run (quantiles within about 1 %).
    pub cpu: Option<Summary>,
    /// The p95 of the CPU over the latest judged window; `None`: never judged (patience, or
    /// the window not full yet).
    pub cpu_window_p95: Option<f64>,
    /// Per GPU (`gpu0`).
    pub gpus: BTreeMap<String, BatchSizeGpu>,
}

/// One GPU as BatchSize judged it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct BatchSizeGpu {
    /// Utilization over the run.
    pub utilization: Option<Summary>,
    /// Memory use over the run.
    pub memory: Option<Summary>,
    /// Utilization p95 over the latest judged window.
    pub window_p95: Option<f64>,
    /// Memory p95 over the latest judged window.
    pub memory_window_p95: Option<f64>,
    /// Whether, in the latest judged window, the CPU, this GPU and its memory were all under
    /// their thresholds.
    pub all_under: bool,
    /// Times the rule fired for this GPU.
    pub violations: u64,
    /// The first firings (at most 100).
    pub firings: Vec<Firing>,
}

/// GPUMemoryIncrease's findings: the limit and, per node and GPU, the moving averages compared.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct GpuMemoryDetails {
    /// Percentage points the moving average may rise above its baseline.
    pub increase: f64,
    /// Samples the moving average is taken over.
    pub window: u64,
    /// Node → GPU → what the rule saw.
    pub nodes: BTreeMap<String, BTreeMap<String, GpuMemoryUse>>,
}

/// One GPU's memory as GPUMemoryIncrease judged it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct GpuMemoryUse {
    /// Every reading of the run (quantiles within about 1 %).
    pub memory: Option<Summary>,
    /// The latest moving average; `None` before the window first filled after patience.
    pub average: Option<f64>,
    /// The baseline the latest average is compared with (the lowest average since patience,
    /// or the average at the latest firing).
    pub baseline: Option<f64>,
    /// The largest rise judged (latest average minus baseline at the time), percentage points.
    pub largest_rise: f64,
    /// The rises above the limit (at most 100), each from its baseline to the average.
    pub increases: Vec<MemoryIncrease>,
}

/// A rise of GPU memory use above the limit.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MemoryIncrease {
    /// When, µs since the epoch.
    pub time_us: u64,
    /// The training step running then.
    pub step: u64,
    /// The baseline average, percent.
    pub from: f64,
    /// The average that rose above it, percent.
    pub to: f64,
}
