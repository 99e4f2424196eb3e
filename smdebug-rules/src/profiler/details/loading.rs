//! What Dataloader and MaxInitializationTime judged: data-loading workers against cores, and
//! the time before the first step.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use smdebug_analysis::stats::Summary;

/// Dataloader's findings: the thresholds and, per node, the workers against the cores.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct DataloaderDetails {
    /// Fewer workers than this percentage of the cores is too few.
    pub min_threshold: f64,
    /// More workers than this percentage of the cores is too many.
    pub max_threshold: f64,
    /// Too few workers matter only when loading took at least this percentage of the loop.
    #[serde(default)]
    pub min_loading_percent: f64,
    /// Per node that loaded data or reported cores.
    pub nodes: BTreeMap<String, NodeDataLoading>,
}

/// One node's data loading.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct NodeDataLoading {
    /// CPU cores (`cpuN` series) seen.
    pub cores: usize,
    /// The worker count judged.
    pub workers: u64,
    /// Where it came from: `num_workers argument` or `distinct loaders seen`.
    pub workers_from: String,
    /// The `num_workers` argument of the data-loading spans, if they had one.
    pub num_workers_argument: Option<u64>,
    /// Whether the data loader pins its batches in page-locked memory (`pin_memory` on the
    /// data-loading spans, as PyTorch's `DataLoader(pin_memory=…)`): `false` when any span
    /// said it does not, `None` when no span said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pin_memory: Option<bool>,
    /// The fewest workers allowed (`cores × min_threshold / 100`).
    pub min_workers: f64,
    /// The most workers allowed (`cores × max_threshold / 100`).
    pub max_workers: f64,
    /// The verdict on the count: `None` when within the limits or not judged (no cores, no
    /// loads).
    pub verdict: Option<WorkerVerdict>,
    /// When the rule fired for this node.
    pub fired_at: Option<super::resources::Firing>,
    /// Data-loading spans seen.
    pub data_loading_spans: u64,
    /// Their durations, seconds (quantiles within about 1 %).
    pub load_time_s: Option<Summary>,
    /// Their durations summed, seconds.
    pub data_loading_total_s: f64,
    /// The step spans' durations summed, seconds.
    pub step_total_s: f64,
    /// Data-loading time as a share (0–1) of the training loop (first step start to last step
    /// end); `None` without steps.
    pub training_loop_share_loading: Option<f64>,
}

/// What is wrong with a node's data-loading workers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WorkerVerdict {
    /// Fewer than `min_threshold` % of the cores.
    TooFew,
    /// More than `max_threshold` % of the cores.
    TooMany,
}

/// MaxInitializationTime's findings: the time from the job's start to its first step.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct InitializationDetails {
    /// The limit, minutes.
    pub threshold_minutes: f64,
    /// The job's first record, µs since the epoch: the process's start when the session
    /// recorded it (its `Process` span, from the process's start to the session's), else the
    /// first system sample or span.
    pub job_start_us: Option<u64>,
    /// The first step span's start.
    pub first_step_start_us: Option<u64>,
    /// The latest step span's start.
    pub last_step_start_us: Option<u64>,
    /// From the job's start to the first step, seconds (4 decimals); `None` before a step.
    pub initialization_s: Option<f64>,
    /// Step spans seen.
    pub step_spans: u64,
    /// Whether the rule fired: initialization longer than the threshold.
    pub exceeded: bool,
}
