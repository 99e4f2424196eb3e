//! BatchSize: GPUs and CPUs underused at once, so a larger batch would fit.

use crate::error::Result;
use crate::params::{Check, lenient};
use crate::profiler::details::{BatchSizeDetails, BatchSizeGpu, BatchSizeNode, Details, Firing};
use crate::profiler::snapshot::{Snapshot, SnapshotAssembler};
use crate::profiler::stats::{RollingWindow, Sketch};
use crate::rule::{Evidence, ProfilerNeeds, ProfilerRule, RuleResult};
use crate::window::{ProfilerWindow, StepRef};
use serde::{Deserialize, Serialize};
use smdebug_analysis::stats::round4;
use std::collections::BTreeMap;

use super::common::{closing_results, gpu_needs};

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
    /// The p95s of utilization and memory in the latest judged window.
    judged: Option<(f64, f64)>,
    firings: Vec<Firing>,
}

/// At most this many firings per GPU are kept in the details.
const MAX_FIRINGS: usize = 100;

#[derive(Debug)]
struct BatchNode {
    seen: u64,
    cpu: RollingWindow,
    cpu_all: Sketch,
    /// The CPU p95 of the latest judged window.
    cpu_judged: Option<f64>,
    gpus: BTreeMap<String, BatchGpu>,
}

impl BatchNode {
    fn new(size: usize) -> BatchNode {
        BatchNode {
            seen: 0,
            cpu: RollingWindow::new(size),
            cpu_all: Sketch::default(),
            cpu_judged: None,
            gpus: BTreeMap::new(),
        }
    }

    /// A snapshot's readings: the node's total CPU utilization `cpu`, each GPU's utilization
    /// and memory use, into windows of `size`.
    fn add(&mut self, cpu: f64, snapshot: &Snapshot, size: usize) {
        self.seen += 1;
        self.cpu.push(cpu);
        self.cpu_all.add(cpu);
        for (gpu, util) in &snapshot.gpu {
            let g = self.gpus.entry(gpu.clone()).or_insert_with(|| BatchGpu {
                util: RollingWindow::new(size),
                memory: RollingWindow::new(size),
                util_all: Sketch::default(),
                memory_all: Sketch::default(),
                firing: false,
                violations: 0,
                judged: None,
                firings: Vec::new(),
            });
            g.util.push(*util);
            g.util_all.add(*util);
            if let Some(m) = snapshot.gpu_memory.get(gpu) {
                g.memory.push(*m);
                g.memory_all.add(*m);
            }
        }
    }
}

/// One GPU's window as judged: the p95s of its utilization and memory use and of its node's
/// CPU utilization.
struct Judged<'a> {
    node: &'a str,
    gpu: &'a str,
    gpu_p95: f64,
    mem_p95: f64,
    cpu_p95: f64,
}

impl Judged<'_> {
    /// The result of a window below every threshold, at `step` (`time_us`): what fired, with
    /// the three p95s as evidence against their limits.
    fn firing(&self, p: &BatchSizeParams, size: usize, step: StepRef, time_us: u64) -> RuleResult {
        let Judged {
            node,
            gpu,
            gpu_p95,
            mem_p95,
            cpu_p95,
        } = *self;
        let mut r = RuleResult::at_time(step.step, time_us);
        r.fire(format!(
            "node {node} {gpu}: over the last {size} samples the p95 GPU \
             utilization is {gpu_p95:.1}% (below {}%), the p95 GPU memory use \
             {mem_p95:.1}% (below {}%) and the p95 CPU utilization {cpu_p95:.1}% \
             (below {}%) (at {step}): the batch is likely too small for this \
             machine; raise the batch size, or use a smaller instance",
            p.gpu_threshold_p95, p.gpu_memory_threshold_p95, p.cpu_threshold_p95
        ));
        r.evidence.push(
            Evidence::at(
                &format!("{node} {gpu} GPUUtilization"),
                step,
                "p95",
                gpu_p95,
            )
            .limit(p.gpu_threshold_p95),
        );
        r.evidence.push(
            Evidence::at(
                &format!("{node} {gpu} GPUMemoryUtilization"),
                step,
                "p95",
                mem_p95,
            )
            .limit(p.gpu_memory_threshold_p95),
        );
        r.evidence.push(
            Evidence::at(&format!("{node} CPUUtilization"), step, "p95", cpu_p95)
                .limit(p.cpu_threshold_p95),
        );
        r
    }
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
        gpu_needs("GPU metrics")
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
                .or_insert_with(|| BatchNode::new(size));
            node.add(cpu, &snapshot, size);
            if node.seen <= p.patience || !node.cpu.is_full() {
                continue;
            }
            datapoints += 1;
            let Some(cpu_p95) = node.cpu.quantile(0.95) else {
                continue;
            };
            node.cpu_judged = Some(cpu_p95);
            for (gpu, g) in &mut node.gpus {
                let (Some(gpu_p95), Some(mem_p95)) =
                    (g.util.quantile(0.95), g.memory.quantile(0.95))
                else {
                    continue;
                };
                let condition = cpu_p95 < p.cpu_threshold_p95
                    && gpu_p95 < p.gpu_threshold_p95
                    && mem_p95 < p.gpu_memory_threshold_p95;
                g.judged = Some((gpu_p95, mem_p95));
                if condition && !g.firing {
                    g.violations += 1;
                    let step = window.step_ref_at(snapshot.time_us);
                    if g.firings.len() < MAX_FIRINGS {
                        g.firings.push(Firing {
                            time_us: snapshot.time_us,
                            step: step.step,
                        });
                    }
                    let judged = Judged {
                        node: &snapshot.node,
                        gpu,
                        gpu_p95,
                        mem_p95,
                        cpu_p95,
                    };
                    let r = judged.firing(p, size, step, snapshot.time_us);
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
        let p = &self.params;
        let gpu = |g: &BatchGpu| BatchSizeGpu {
            utilization: g.util_all.summary().map(|s| s.rounded()),
            memory: g.memory_all.summary().map(|s| s.rounded()),
            window_p95: g.judged.map(|j| round4(j.0)),
            memory_window_p95: g.judged.map(|j| round4(j.1)),
            all_under: g.firing,
            violations: g.violations,
            firings: g.firings.clone(),
        };
        let nodes = self
            .nodes
            .iter()
            .map(|(name, n)| {
                let node = BatchSizeNode {
                    cpu: n.cpu_all.summary().map(|s| s.rounded()),
                    cpu_window_p95: n.cpu_judged.map(round4),
                    gpus: n.gpus.iter().map(|(id, g)| (id.clone(), gpu(g))).collect(),
                };
                (name.clone(), node)
            })
            .collect();
        Some(Details::BatchSize(BatchSizeDetails {
            cpu_threshold_p95: p.cpu_threshold_p95,
            gpu_threshold_p95: p.gpu_threshold_p95,
            gpu_memory_threshold_p95: p.gpu_memory_threshold_p95,
            window: p.window,
            nodes,
        }))
    }
}
