//! The profiler rules (SageMaker Debugger's profiler rules, with their names, parameters and
//! defaults) and what they read: [`ProfilerWindow`], the system samples and framework spans that
//! are new since the rule's previous call.
//!
//! Rules keep their own state per node and per GPU across windows, so a run fed in one window or
//! in many gives the same verdict. The runner ([`crate::RuleRunner`]) reads the run's profiler
//! files (`system/incremental/...` and `framework/pevents/...`) through smdebug-profiler's
//! `ProfilerFollower` and feeds them in windows of 60 s of job time offline, or as they
//! appear when following a live run; a backlog is read 100,000 samples and spans at a time.
//!
//! **Memory.** A rule's state does not grow with the run where a bounded form gives the same
//! verdicts: whole-run figures are smdebug-profiler's `Sketch` (exact count, min, max, mean;
//! quantiles within 1 %), windows are `RollingWindow`s of a declared length, the bottleneck
//! rules keep their first 1,000 bottleneck snapshots and the last 4,096 phase spans. Two keep
//! more, because their verdicts need it: StepOutlier counts the steps of each duration at 1 µs
//! (an exact count beyond mean + kσ, exact percentiles; its size follows the spread of the
//! durations, not their number) with its 100 slowest steps; and the [`StepTimeline`] the rules
//! date their results by keeps every step span's start, end and step (24 bytes a step).
//!
//! A profiler rule can be run by hand over any samples and spans:
//!
//! ```
//! use smdebug_format::system::SystemSample;
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
//! let results = rule.as_profiler().unwrap().invoke_on_window(&window).unwrap();
//! assert!(results.iter().any(|r| r.fired && r.message.contains("gpu0")));
//! ```

mod cpu_io;
mod details;
pub(crate) mod feed;
mod gpu;
mod overall;
mod snapshot;
mod stats;
mod steps;

pub use crate::window::{ProfilerWindow, StepTimeline};
pub use cpu_io::{
    BottleneckRule, CPUBottleneck, CPUBottleneckParams, Dataloader, DataloaderParams, IOBottleneck,
    IOBottleneckParams,
};
pub use details::{
    BatchSizeDetails, BatchSizeGpu, BatchSizeNode, BottleneckDetails, BottleneckSample,
    DataloaderDetails, Details, Firing, FrameworkMetricsDetails, GpuDistance, GpuMemoryDetails,
    GpuMemoryUse, GpuUsageState, GpuUtilization, GpuUtilizationDetails, GpuWorkload,
    InitializationDetails, LoadBalancingDetails, MemoryIncrease, MetricUsage, NodeBottlenecks,
    NodeDataLoading, NodeWorkloads, OperatorTime, OperatorTotals, OutlierStep, StepHistogram,
    StepOutlierDetails, StepSeriesDetails, SystemUsageDetails, TimeOutside, TimeShare, TimeTotal,
    WorkerVerdict,
};
pub use gpu::{
    BatchSize, BatchSizeParams, GPUMemoryIncrease, GPUMemoryIncreaseParams, LoadBalancing,
    LoadBalancingParams, LowGPUUtilization, LowGPUUtilizationParams,
};
pub use overall::{
    OverallFrameworkMetrics, OverallFrameworkMetricsParams, OverallSystemUsage,
    OverallSystemUsageParams,
};
pub use snapshot::{SNAPSHOT_TOLERANCE_US, Snapshot, SnapshotAssembler, is_core};
pub use stats::{RollingWindow, Sketch, quantile};
pub use steps::{
    MaxInitializationTime, MaxInitializationTimeParams, StepOutlier, StepOutlierParams,
};
