//! LowGPUUtilization, BatchSize, GPUMemoryIncrease and LoadBalancing: how the GPUs are used.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::error::Result;
use crate::params::{Check, lenient};
use crate::rule::{Evidence, ProfilerInput, ProfilerNeeds, ProfilerRule, RuleResult};
use crate::window::ProfilerWindow;

use super::details::{
    Details, GpuDistance, GpuUsageState as Usage, GpuUtilization, GpuUtilizationDetails,
    GpuWorkload, LoadBalancingDetails, NodeWorkloads,
};
use super::snapshot::{NO_GPU, Snapshot, SnapshotAssembler};
use super::stats::{RollingWindow, Sketch, round4};

/// The results every GPU rule ends a window with: the datapoints it evaluated, and at the end
/// of the run why it had nothing to check.
fn closing_results(
    window: &ProfilerWindow<'_>,
    datapoints: usize,
    gpus_seen: bool,
    evaluated_any: bool,
    patience: u64,
    results: &mut Vec<RuleResult>,
) {
    if datapoints > 0 {
        let mut r = RuleResult::at_time(window.step_at(window.now_us), window.now_us);
        r.datapoints = datapoints;
        results.push(r);
    }
    if window.final_window && !gpus_seen {
        let mut r = RuleResult::at_time(0, window.now_us);
        r.message = NO_GPU.into();
        results.push(r);
    } else if window.final_window && !evaluated_any {
        let mut r = RuleResult::at_time(0, window.now_us);
        r.message = format!(
            "too few GPU samples to evaluate: none past patience ({patience}) and the window"
        );
        results.push(r);
    }
}

/// What a GPU rule made of one reading.
enum Judged {
    /// Not evaluated (within patience, or the window is not full yet).
    Skipped,
    /// Evaluated; nothing found.
    Checked,
    /// Evaluated, and the rule fired.
    Fired(RuleResult),
}

/// One metric's readings per node and GPU, with each GPU's state `S` (created at its first
/// reading): the frame of LowGPUUtilization and GPUMemoryIncrease.
struct PerGpu<S> {
    snapshots: SnapshotAssembler,
    /// The snapshot's table of the metric (`gpu`, `gpu_memory`).
    table: fn(&Snapshot) -> &BTreeMap<String, f64>,
    gpus: BTreeMap<(String, String), S>,
}

impl<S> PerGpu<S> {
    fn new(table: fn(&Snapshot) -> &BTreeMap<String, f64>) -> Self {
        PerGpu {
            snapshots: SnapshotAssembler::default(),
            table,
            gpus: BTreeMap::new(),
        }
    }

    /// Hands `judge` every reading `window` completes, in time order, with its GPU's state
    /// (made by `new` at the first reading); then ends the window as every GPU rule does,
    /// `evaluated` telling whether a GPU's state was ever judged.
    fn feed(
        &mut self,
        window: &ProfilerWindow<'_>,
        patience: u64,
        new: impl Fn() -> S,
        mut judge: impl FnMut(&Snapshot, &str, f64, &mut S) -> Judged,
        evaluated: impl Fn(&S) -> bool,
    ) -> Vec<RuleResult> {
        let mut results = Vec::new();
        let mut datapoints = 0;
        for snapshot in self.snapshots.feed(window) {
            for (gpu, value) in (self.table)(&snapshot) {
                let state = self
                    .gpus
                    .entry((snapshot.node.clone(), gpu.clone()))
                    .or_insert_with(&new);
                match judge(&snapshot, gpu, *value, state) {
                    Judged::Skipped => {}
                    Judged::Checked => datapoints += 1,
                    Judged::Fired(r) => {
                        datapoints += 1;
                        results.push(r);
                    }
                }
            }
        }
        closing_results(
            window,
            datapoints,
            !self.gpus.is_empty(),
            self.gpus.values().any(evaluated),
            patience,
            &mut results,
        );
        results
    }

    /// `{"nodes": {node: {gpu: details(state)}}}`, for [`ProfilerRule::details`](crate::ProfilerRule::details).
    fn details(&self, details: impl Fn(&S) -> Value) -> Value {
        let mut nodes: BTreeMap<&str, serde_json::Map<String, Value>> = BTreeMap::new();
        for ((node, gpu), state) in &self.gpus {
            nodes
                .entry(node)
                .or_default()
                .insert(gpu.clone(), details(state));
        }
        json!({ "nodes": nodes })
    }
}

/// One GPU's readings of a metric: how many were seen, a sketch of all of them, and a rolling
/// window of the latest.
#[derive(Debug)]
struct GpuSeries {
    seen: u64,
    window: RollingWindow,
    all: Sketch,
}

impl GpuSeries {
    fn new(window: u64) -> Self {
        GpuSeries {
            seen: 0,
            window: RollingWindow::new(window as usize),
            all: Sketch::default(),
        }
    }

    /// Counts `value` in (the sketch, not the window); whether more than `patience` readings
    /// were seen, so that the rule may judge.
    fn count(&mut self, value: f64, patience: u64) -> bool {
        self.seen += 1;
        self.all.add(value);
        self.seen > patience
    }
}

/// Parameters of [`LowGPUUtilization`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct LowGPUUtilizationParams {
    /// p95 utilization (percent) below which a GPU is underused. Default `70`.
    #[serde(deserialize_with = "lenient::f64")]
    pub threshold_p95: f64,
    /// p5 utilization (percent) below which a busy GPU fluctuates. Default `10`.
    #[serde(deserialize_with = "lenient::f64")]
    pub threshold_p5: f64,
    /// Samples the percentiles are taken over. Default `500`.
    #[serde(deserialize_with = "lenient::u64")]
    pub window: u64,
    /// Samples skipped per GPU at the start (initialization). Default `1000`.
    #[serde(deserialize_with = "lenient::u64")]
    pub patience: u64,
}

impl Default for LowGPUUtilizationParams {
    fn default() -> Self {
        LowGPUUtilizationParams {
            threshold_p95: 70.0,
            threshold_p5: 10.0,
            window: 500,
            patience: 1000,
        }
    }
}

#[derive(Debug)]
struct GpuUsage {
    utilization: GpuSeries,
    state: Option<Usage>,
    violations: u64,
}

/// **LowGPUUtilization** — per node and GPU, after `patience` samples, takes the p95 and p5
/// of the utilization over the last `window` samples: fires when the p95 is below
/// `threshold_p95` (the GPU is underused) or when the p95 is above `threshold_p95` while the
/// p5 is below `threshold_p5` (it fluctuates: busy, then waiting). Fires once each time a GPU
/// enters either state.
pub struct LowGPUUtilization {
    params: LowGPUUtilizationParams,
    gpus: PerGpu<GpuUsage>,
}

impl LowGPUUtilization {
    /// The rule's name.
    pub const NAME: &'static str = "LowGPUUtilization";

    /// The rule with `params`; fails naming the parameter that is out of range.
    pub fn new(params: LowGPUUtilizationParams) -> Result<Self> {
        let check = Check::new(Self::NAME);
        check.percent("threshold_p95", params.threshold_p95)?;
        check.percent("threshold_p5", params.threshold_p5)?;
        check.at_least("window", params.window, 1)?;
        Ok(LowGPUUtilization {
            params,
            gpus: PerGpu::new(|s| &s.gpu),
        })
    }
}

impl ProfilerRule for LowGPUUtilization {
    crate::rule_identity!();

    fn needs(&self) -> ProfilerNeeds {
        ProfilerNeeds::reading([ProfilerInput::SystemMetrics, ProfilerInput::StepTimeline])
            .requiring("GPU metrics")
    }

    fn invoke_on_window(&mut self, window: &ProfilerWindow<'_>) -> Result<Vec<RuleResult>> {
        let p = &self.params;
        let new = || GpuUsage {
            utilization: GpuSeries::new(p.window),
            state: None,
            violations: 0,
        };
        let judge = |snapshot: &Snapshot, gpu: &str, value: f64, g: &mut GpuUsage| {
            let u = &mut g.utilization;
            u.window.push(value);
            if !u.count(value, p.patience) {
                return Judged::Skipped;
            }
            let (Some(p95), Some(p5)) = (u.window.quantile(0.95), u.window.quantile(0.05)) else {
                return Judged::Checked;
            };
            let state = if p95 < p.threshold_p95 {
                Some(Usage::Underused)
            } else if p95 > p.threshold_p95 && p5 < p.threshold_p5 {
                Some(Usage::Fluctuating)
            } else {
                None
            };
            let entered = state.is_some() && state != g.state;
            g.state = state;
            if !entered {
                return Judged::Checked;
            }
            g.violations += 1;
            let step = window.step_at(snapshot.time_us);
            let mut r = RuleResult::at_time(step, snapshot.time_us);
            let n = u.window.len();
            let node = &snapshot.node;
            r.fire(match state {
                Some(Usage::Underused) => format!(
                    "node {node} {gpu} is underused: p95 utilization {p95:.1}% over the \
                     last {n} samples, below {}% (step {step}): give it more work per \
                     step (a larger batch), overlap data loading, or use a smaller GPU",
                    p.threshold_p95
                ),
                _ => format!(
                    "node {node} {gpu} utilization fluctuates: p95 {p95:.1}% but p5 \
                     {p5:.1}% (below {}%) over the last {n} samples (step {step}): the \
                     GPU idles between bursts; look for data-loading or synchronization \
                     stalls (see CPUBottleneck, IOBottleneck, Dataloader)",
                    p.threshold_p5
                ),
            });
            let label = format!("{node} {gpu} GPUUtilization");
            r.evidence
                .push(Evidence::new(&label, step, "p95", p95).limit(p.threshold_p95));
            r.evidence
                .push(Evidence::new(&label, step, "p5", p5).limit(p.threshold_p5));
            Judged::Fired(r)
        };
        let evaluated = |g: &GpuUsage| g.utilization.seen > p.patience;
        Ok(self.gpus.feed(window, p.patience, new, judge, evaluated))
    }

    fn details(&self) -> Option<Details> {
        let mut nodes: BTreeMap<String, BTreeMap<String, GpuUtilization>> = BTreeMap::new();
        for ((node, gpu), g) in &self.gpus.gpus {
            let u = &g.utilization;
            let judged = u.seen > self.params.patience;
            let utilization = GpuUtilization {
                utilization: u.all.summary(),
                window_p95: u.window.quantile(0.95).map(round4),
                window_p5: u.window.quantile(0.05).map(round4),
                state: g.state,
                violations: g.violations,
                judged,
            };
            nodes
                .entry(node.clone())
                .or_default()
                .insert(gpu.clone(), utilization);
        }
        Some(Details::GpuUtilization(GpuUtilizationDetails { nodes }))
    }
}

/// Parameters of [`BatchSize`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct BatchSizeParams {
    /// p95 CPU utilization (percent) below which the CPU has room. Default `70`.
    #[serde(deserialize_with = "lenient::f64")]
    pub cpu_threshold_p95: f64,
    /// p95 GPU utilization (percent) below which the GPU has room. Default `70`.
    #[serde(deserialize_with = "lenient::f64")]
    pub gpu_threshold_p95: f64,
    /// p95 GPU memory use (percent) below which the GPU memory has room. Default `70`.
    #[serde(deserialize_with = "lenient::f64")]
    pub gpu_memory_threshold_p95: f64,
    /// Samples skipped per node at the start (initialization). Default `1000`.
    #[serde(deserialize_with = "lenient::u64")]
    pub patience: u64,
    /// Samples the percentiles are taken over. Default `500`.
    #[serde(deserialize_with = "lenient::u64")]
    pub window: u64,
}

impl Default for BatchSizeParams {
    fn default() -> Self {
        BatchSizeParams {
            cpu_threshold_p95: 70.0,
            gpu_threshold_p95: 70.0,
            gpu_memory_threshold_p95: 70.0,
            patience: 1000,
            window: 500,
        }
    }
}

#[derive(Debug)]
struct BatchGpu {
    util: RollingWindow,
    memory: RollingWindow,
    util_all: Sketch,
    memory_all: Sketch,
    firing: bool,
    violations: u64,
}

#[derive(Debug)]
struct BatchNode {
    seen: u64,
    cpu: RollingWindow,
    cpu_all: Sketch,
    gpus: BTreeMap<String, BatchGpu>,
}

/// **BatchSize** — per node, after `patience` samples and once `window` samples are there:
/// fires for a GPU when the p95 of the node's total CPU utilization, of that GPU's utilization
/// and of its memory use over the last `window` samples are all below their thresholds — the
/// whole machine idles, so the batch could be larger.
pub struct BatchSize {
    params: BatchSizeParams,
    snapshots: SnapshotAssembler,
    nodes: BTreeMap<String, BatchNode>,
}

impl BatchSize {
    /// The rule's name.
    pub const NAME: &'static str = "BatchSize";

    /// The rule with `params`; fails naming the parameter that is out of range.
    pub fn new(params: BatchSizeParams) -> Result<Self> {
        let check = Check::new(Self::NAME);
        check.percent("cpu_threshold_p95", params.cpu_threshold_p95)?;
        check.percent("gpu_threshold_p95", params.gpu_threshold_p95)?;
        check.percent("gpu_memory_threshold_p95", params.gpu_memory_threshold_p95)?;
        check.at_least("window", params.window, 1)?;
        Ok(BatchSize {
            params,
            snapshots: SnapshotAssembler::default(),
            nodes: BTreeMap::new(),
        })
    }
}

impl ProfilerRule for BatchSize {
    crate::rule_identity!();

    fn needs(&self) -> ProfilerNeeds {
        ProfilerNeeds::reading([ProfilerInput::SystemMetrics, ProfilerInput::StepTimeline])
            .requiring("GPU metrics")
    }

    fn invoke_on_window(&mut self, window: &ProfilerWindow<'_>) -> Result<Vec<RuleResult>> {
        let p = &self.params;
        let size = p.window as usize;
        let mut results = Vec::new();
        let mut datapoints = 0;
        let mut gpus_seen = false;
        for snapshot in self.snapshots.feed(window) {
            let Some(cpu) = snapshot.cpu_total() else {
                continue;
            };
            if snapshot.gpu.is_empty() {
                continue;
            }
            gpus_seen = true;
            let node = self
                .nodes
                .entry(snapshot.node.clone())
                .or_insert_with(|| BatchNode {
                    seen: 0,
                    cpu: RollingWindow::new(size),
                    cpu_all: Sketch::default(),
                    gpus: BTreeMap::new(),
                });
            node.seen += 1;
            node.cpu.push(cpu);
            node.cpu_all.add(cpu);
            for (gpu, util) in &snapshot.gpu {
                let g = node.gpus.entry(gpu.clone()).or_insert_with(|| BatchGpu {
                    util: RollingWindow::new(size),
                    memory: RollingWindow::new(size),
                    util_all: Sketch::default(),
                    memory_all: Sketch::default(),
                    firing: false,
                    violations: 0,
                });
                g.util.push(*util);
                g.util_all.add(*util);
                if let Some(m) = snapshot.gpu_memory.get(gpu) {
                    g.memory.push(*m);
                    g.memory_all.add(*m);
                }
            }
            if node.seen <= p.patience || !node.cpu.is_full() {
                continue;
            }
            datapoints += 1;
            let Some(cpu_p95) = node.cpu.quantile(0.95) else {
                continue;
            };
            for (gpu, g) in &mut node.gpus {
                let (Some(gpu_p95), Some(mem_p95)) =
                    (g.util.quantile(0.95), g.memory.quantile(0.95))
                else {
                    continue;
                };
                let condition = cpu_p95 < p.cpu_threshold_p95
                    && gpu_p95 < p.gpu_threshold_p95
                    && mem_p95 < p.gpu_memory_threshold_p95;
                if condition && !g.firing {
                    g.violations += 1;
                    let step = window.step_at(snapshot.time_us);
                    let mut r = RuleResult::at_time(step, snapshot.time_us);
                    let node_name = &snapshot.node;
                    r.fire(format!(
                        "node {node_name} {gpu}: over the last {size} samples the p95 GPU \
                         utilization is {gpu_p95:.1}% (below {}%), the p95 GPU memory use \
                         {mem_p95:.1}% (below {}%) and the p95 CPU utilization {cpu_p95:.1}% \
                         (below {}%) (step {step}): the batch is likely too small for this \
                         machine; raise the batch size, or use a smaller instance",
                        p.gpu_threshold_p95, p.gpu_memory_threshold_p95, p.cpu_threshold_p95
                    ));
                    r.evidence.push(
                        Evidence::new(
                            &format!("{node_name} {gpu} GPUUtilization"),
                            step,
                            "p95",
                            gpu_p95,
                        )
                        .limit(p.gpu_threshold_p95),
                    );
                    r.evidence.push(
                        Evidence::new(
                            &format!("{node_name} {gpu} GPUMemoryUtilization"),
                            step,
                            "p95",
                            mem_p95,
                        )
                        .limit(p.gpu_memory_threshold_p95),
                    );
                    r.evidence.push(
                        Evidence::new(&format!("{node_name} CPUUtilization"), step, "p95", cpu_p95)
                            .limit(p.cpu_threshold_p95),
                    );
                    results.push(r);
                }
                g.firing = condition;
            }
        }
        let gpus_seen = gpus_seen || !self.nodes.is_empty();
        let evaluated = self
            .nodes
            .values()
            .any(|n| n.seen > p.patience && n.cpu.is_full());
        closing_results(
            window,
            datapoints,
            gpus_seen,
            evaluated,
            p.patience,
            &mut results,
        );
        Ok(results)
    }

    fn details(&self) -> Option<Details> {
        Some(Details::Json({
            let nodes: serde_json::Map<String, Value> = self
                .nodes
                .iter()
                .map(|(name, n)| {
                    let gpus: serde_json::Map<String, Value> = n
                        .gpus
                        .iter()
                        .map(|(gpu, g)| {
                            (
                                gpu.clone(),
                                json!({
                                    "utilization": g.util_all.summary(),
                                    "memory": g.memory_all.summary(),
                                    "violations": g.violations,
                                }),
                            )
                        })
                        .collect();
                    (
                        name.clone(),
                        json!({"cpu": n.cpu_all.summary(), "gpus": gpus}),
                    )
                })
                .collect();
            json!({ "nodes": nodes })
        }))
    }
}

/// Parameters of [`GPUMemoryIncrease`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct GPUMemoryIncreaseParams {
    /// Percentage points the moving average may rise. Default `5`.
    #[serde(deserialize_with = "lenient::f64")]
    pub increase: f64,
    /// Samples skipped per GPU at the start (initialization). Default `1000`.
    #[serde(deserialize_with = "lenient::u64")]
    pub patience: u64,
    /// Samples the moving average is taken over. Default `10`.
    #[serde(deserialize_with = "lenient::u64")]
    pub window: u64,
}

impl Default for GPUMemoryIncreaseParams {
    fn default() -> Self {
        GPUMemoryIncreaseParams {
            increase: 5.0,
            patience: 1000,
            window: 10,
        }
    }
}

#[derive(Debug)]
struct GpuMemory {
    /// The window holds only readings after patience.
    memory: GpuSeries,
    /// The lowest moving average since patience (reset to the current one after a firing).
    baseline: Option<f64>,
    increases: Vec<Value>,
}

/// **GPUMemoryIncrease** — per node and GPU, after `patience` samples: fires when the moving
/// average of the GPU's memory use over `window` samples is more than `increase` percentage
/// points above the lowest moving average seen since. After a firing the current average
/// becomes the new baseline, so a steady leak fires again for every further `increase` points.
pub struct GPUMemoryIncrease {
    params: GPUMemoryIncreaseParams,
    gpus: PerGpu<GpuMemory>,
}

impl GPUMemoryIncrease {
    /// The rule's name.
    pub const NAME: &'static str = "GPUMemoryIncrease";

    /// The rule with `params`; fails naming the parameter that is out of range.
    pub fn new(params: GPUMemoryIncreaseParams) -> Result<Self> {
        let check = Check::new(Self::NAME);
        check.percent("increase", params.increase)?;
        check.at_least("window", params.window, 1)?;
        Ok(GPUMemoryIncrease {
            params,
            gpus: PerGpu::new(|s| &s.gpu_memory),
        })
    }
}

impl ProfilerRule for GPUMemoryIncrease {
    crate::rule_identity!();

    fn needs(&self) -> ProfilerNeeds {
        ProfilerNeeds::reading([ProfilerInput::SystemMetrics, ProfilerInput::StepTimeline])
            .requiring("GPU memory metrics")
    }

    fn invoke_on_window(&mut self, window: &ProfilerWindow<'_>) -> Result<Vec<RuleResult>> {
        let p = &self.params;
        let new = || GpuMemory {
            memory: GpuSeries::new(p.window),
            baseline: None,
            increases: Vec::new(),
        };
        let judge = |snapshot: &Snapshot, gpu: &str, value: f64, g: &mut GpuMemory| {
            if !g.memory.count(value, p.patience) {
                return Judged::Skipped;
            }
            g.memory.window.push(value);
            if !g.memory.window.is_full() {
                return Judged::Skipped;
            }
            let Some(average) = g.memory.window.mean() else {
                return Judged::Checked;
            };
            let baseline = *g.baseline.get_or_insert(average);
            if average < baseline {
                g.baseline = Some(average);
                return Judged::Checked;
            }
            let rise = average - baseline;
            if rise <= p.increase {
                return Judged::Checked;
            }
            g.baseline = Some(average);
            let step = window.step_at(snapshot.time_us);
            let mut r = RuleResult::at_time(step, snapshot.time_us);
            let node = &snapshot.node;
            r.fire(format!(
                "node {node} {gpu}: the average GPU memory use over the last {} \
                 samples rose from {baseline:.1}% to {average:.1}% (+{rise:.1} points, \
                 more than {}) by step {step}: look for tensors kept across steps \
                 (a leak) or growing batch/sequence sizes before it runs out",
                p.window, p.increase
            ));
            r.evidence.push(
                Evidence::new(
                    &format!("{node} {gpu} GPUMemoryUtilization"),
                    step,
                    "increase",
                    rise,
                )
                .limit(p.increase),
            );
            if g.increases.len() < 100 {
                g.increases.push(json!({
                    "time_us": snapshot.time_us,
                    "step": step,
                    "from": round4(baseline),
                    "to": round4(average),
                }));
            }
            Judged::Fired(r)
        };
        let evaluated = |g: &GpuMemory| g.memory.window.is_full();
        Ok(self.gpus.feed(window, p.patience, new, judge, evaluated))
    }

    fn details(&self) -> Option<Details> {
        Some(Details::Json({
            self.gpus
                .details(|g| json!({"memory": g.memory.all.summary(), "increases": g.increases}))
        }))
    }
}

/// Parameters of [`LoadBalancing`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct LoadBalancingParams {
    /// Jensen–Shannon distance (0 to √ln 2 ≈ 0.83) between two GPUs' utilization histograms
    /// above which their loads differ. Default `0.5`.
    #[serde(deserialize_with = "lenient::f64")]
    pub threshold: f64,
    /// Samples skipped per GPU at the start (initialization). Default `1000`.
    #[serde(deserialize_with = "lenient::u64")]
    pub patience: u64,
}

impl Default for LoadBalancingParams {
    fn default() -> Self {
        LoadBalancingParams {
            threshold: 0.5,
            patience: 1000,
        }
    }
}

/// Utilization histogram bins: 2 % wide, 0..100 (100 % goes into the last).
const BINS: usize = 50;
/// Utilization below this is "idle" in LoadBalancing's messages (CPUBottleneck's default).
const IDLE_BELOW: f64 = 10.0;

#[derive(Debug)]
struct Workload {
    seen: u64,
    histogram: [u64; BINS],
    counted: u64,
    sum: f64,
    idle: u64,
}

impl Workload {
    fn probabilities(&self) -> [f64; BINS] {
        let mut p = [0.0; BINS];
        for (i, n) in self.histogram.iter().enumerate() {
            p[i] = *n as f64 / self.counted as f64;
        }
        p
    }

    fn mean(&self) -> f64 {
        self.sum / self.counted as f64
    }

    fn idle_percent(&self) -> f64 {
        self.idle as f64 * 100.0 / self.counted as f64
    }
}

/// The Jensen–Shannon distance (natural log) between two probability vectors.
pub(crate) fn jensen_shannon(p: &[f64], q: &[f64]) -> f64 {
    let kl = |a: &[f64], m: &[f64]| -> f64 {
        a.iter()
            .zip(m)
            .filter(|(x, _)| **x > 0.0)
            .map(|(x, y)| x * (x / y).ln())
            .sum()
    };
    let m: Vec<f64> = p.iter().zip(q).map(|(a, b)| (a + b) / 2.0).collect();
    ((kl(p, &m) + kl(q, &m)) / 2.0).max(0.0).sqrt()
}

/// **LoadBalancing** — per node, after `patience` samples per GPU: builds each GPU's
/// utilization histogram (50 bins of 2 %) and fires for a pair of GPUs whose histograms are
/// more than `threshold` apart (Jensen–Shannon distance). Pairs are compared once both
/// histograms hold at least 50 samples (one per bin), so a handful of early samples cannot
/// trigger it. Fires once each time a pair crosses the threshold.
pub struct LoadBalancing {
    params: LoadBalancingParams,
    snapshots: SnapshotAssembler,
    gpus: BTreeMap<String, BTreeMap<String, Workload>>,
    firing: BTreeMap<(String, String, String), f64>,
    distances: BTreeMap<(String, String, String), f64>,
}

impl LoadBalancing {
    /// The rule's name.
    pub const NAME: &'static str = "LoadBalancing";

    /// The rule with `params`; fails naming the parameter that is out of range.
    pub fn new(params: LoadBalancingParams) -> Result<Self> {
        Check::new(Self::NAME).non_negative("threshold", params.threshold, "a distance")?;
        Ok(LoadBalancing {
            params,
            snapshots: SnapshotAssembler::default(),
            gpus: BTreeMap::new(),
            firing: BTreeMap::new(),
            distances: BTreeMap::new(),
        })
    }
}

impl ProfilerRule for LoadBalancing {
    crate::rule_identity!();

    fn needs(&self) -> ProfilerNeeds {
        ProfilerNeeds::reading([ProfilerInput::SystemMetrics, ProfilerInput::StepTimeline])
            .requiring("GPU metrics of two GPUs or more")
    }

    fn invoke_on_window(&mut self, window: &ProfilerWindow<'_>) -> Result<Vec<RuleResult>> {
        let p = &self.params;
        let mut results = Vec::new();
        let mut datapoints = 0;
        for snapshot in self.snapshots.feed(window) {
            if snapshot.gpu.is_empty() {
                continue;
            }
            let node = self.gpus.entry(snapshot.node.clone()).or_default();
            for (gpu, value) in &snapshot.gpu {
                let w = node.entry(gpu.clone()).or_insert_with(|| Workload {
                    seen: 0,
                    histogram: [0; BINS],
                    counted: 0,
                    sum: 0.0,
                    idle: 0,
                });
                w.seen += 1;
                if w.seen <= p.patience {
                    continue;
                }
                datapoints += 1;
                let bin = ((value.clamp(0.0, 100.0) / 2.0) as usize).min(BINS - 1);
                w.histogram[bin] += 1;
                w.counted += 1;
                w.sum += value;
                if *value < IDLE_BELOW {
                    w.idle += 1;
                }
            }
            let ready: Vec<(&String, &Workload)> = node
                .iter()
                .filter(|(_, w)| w.counted >= BINS as u64)
                .collect();
            for (i, (g1, w1)) in ready.iter().enumerate() {
                for (g2, w2) in &ready[i + 1..] {
                    let distance = jensen_shannon(&w1.probabilities(), &w2.probabilities());
                    let key = (snapshot.node.clone(), (*g1).clone(), (*g2).clone());
                    self.distances.insert(key.clone(), distance);
                    let condition = distance > p.threshold;
                    let was = self.firing.contains_key(&key);
                    if condition && !was {
                        let step = window.step_at(snapshot.time_us);
                        let mut r = RuleResult::at_time(step, snapshot.time_us);
                        let (busy, less) = if w1.mean() >= w2.mean() {
                            ((g1, w1), (g2, w2))
                        } else {
                            ((g2, w2), (g1, w1))
                        };
                        r.fire(format!(
                            "node {}: {} and {} carry different loads (Jensen–Shannon distance \
                             {distance:.2} between their utilization histograms, above {}) by \
                             step {step}: {} averages {:.0}% utilization, {} {:.0}%; {} is idle \
                             (below {IDLE_BELOW}%) {:.0}% of the time, {:.0} points more than {}: \
                             balance the work across GPUs (even shards and batches, no extra \
                             work on one rank)",
                            snapshot.node,
                            g1,
                            g2,
                            p.threshold,
                            busy.0,
                            busy.1.mean(),
                            less.0,
                            less.1.mean(),
                            less.0,
                            less.1.idle_percent(),
                            less.1.idle_percent() - busy.1.idle_percent(),
                            busy.0,
                        ));
                        r.evidence.push(
                            Evidence::new(
                                &format!("{} {g1} vs {g2}", snapshot.node),
                                step,
                                "jensen_shannon_distance",
                                distance,
                            )
                            .limit(p.threshold),
                        );
                        results.push(r);
                    }
                    if condition {
                        self.firing.insert(key, distance);
                    } else {
                        self.firing.remove(&key);
                    }
                }
            }
        }
        let evaluated = !self.distances.is_empty();
        closing_results(
            window,
            datapoints,
            !self.gpus.is_empty(),
            evaluated,
            p.patience,
            &mut results,
        );
        if window.final_window
            && !self.gpus.is_empty()
            && self.gpus.values().all(|n| n.len() < 2)
            && let Some(last) = results.last_mut()
            && !last.fired
            && last.datapoints == 0
        {
            last.message = "one GPU per node: nothing to balance".into();
        }
        Ok(results)
    }

    fn details(&self) -> Option<Details> {
        let nodes = self
            .gpus
            .iter()
            .map(|(node, gpus)| {
                let workloads = gpus
                    .iter()
                    .filter(|(_, w)| w.counted > 0)
                    .map(|(g, w)| {
                        let workload = GpuWorkload {
                            histogram: w.histogram.to_vec(),
                            mean: round4(w.mean()),
                            idle_percent: round4(w.idle_percent()),
                            samples: w.counted,
                        };
                        (g.clone(), workload)
                    })
                    .collect();
                let distances = self
                    .distances
                    .iter()
                    .filter(|((n, _, _), _)| n == node)
                    .map(|((_, a, b), d)| GpuDistance {
                        gpus: [a.clone(), b.clone()],
                        distance: round4(*d),
                    })
                    .collect();
                let node_workloads = NodeWorkloads {
                    bin_width_percent: 100.0 / BINS as f64,
                    workloads,
                    distances,
                };
                (node.clone(), node_workloads)
            })
            .collect();
        Some(Details::LoadBalancing(LoadBalancingDetails { nodes }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jensen_shannon_is_zero_for_equal_and_largest_for_disjoint_histograms() {
        let a = [0.5, 0.5, 0.0];
        assert!(jensen_shannon(&a, &a) < 1e-12);
        let d = jensen_shannon(&[1.0, 0.0], &[0.0, 1.0]);
        assert!((d - 2f64.ln().sqrt()).abs() < 1e-12, "{d}");
    }
}
