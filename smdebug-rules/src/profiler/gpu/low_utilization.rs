//! LowGPUUtilization: a GPU underused or fluctuating over a window.

use crate::error::Result;
use crate::params::{Check, lenient};
use crate::profiler::details::{
    Details, GpuUsageState as Usage, GpuUtilization, GpuUtilizationDetails,
};
use crate::profiler::snapshot::Snapshot;
use crate::rule::{Evidence, ProfilerNeeds, ProfilerRule, RuleResult};
use crate::window::ProfilerWindow;
use serde::{Deserialize, Serialize};
use smdebug_analysis::stats::round4;

use super::common::{GpuSeries, Judged, PerGpu, gpu_needs};

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
        gpu_needs("GPU metrics")
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
            let step = window.step_ref_at(snapshot.time_us);
            let mut r = RuleResult::at_time(step.step, snapshot.time_us);
            let n = u.window.len();
            let node = &snapshot.node;
            r.fire(match state {
                Some(Usage::Underused) => format!(
                    "node {node} {gpu} is underused: p95 utilization {p95:.1}% over the \
                     last {n} samples, below {}% (at {step}): give it more work per \
                     step (a larger batch), overlap data loading, or use a smaller GPU",
                    p.threshold_p95
                ),
                _ => format!(
                    "node {node} {gpu} utilization fluctuates: p95 {p95:.1}% but p5 \
                     {p5:.1}% (below {}%) over the last {n} samples (at {step}): the \
                     GPU idles between bursts; look for data-loading or synchronization \
                     stalls (see CPUBottleneck, IOBottleneck, Dataloader)",
                    p.threshold_p5
                ),
            });
            let label = format!("{node} {gpu} GPUUtilization");
            r.evidence
                .push(Evidence::at(&label, step, "p95", p95).limit(p.threshold_p95));
            r.evidence
                .push(Evidence::at(&label, step, "p5", p5).limit(p.threshold_p5));
            Judged::Fired(r)
        };
        let evaluated = |g: &GpuUsage| g.utilization.seen > p.patience;
        Ok(self.gpus.feed(window, p.patience, new, judge, evaluated))
    }

    fn details(&self) -> Option<Details> {
        let nodes = self.gpus.details(|g| {
            let u = &g.utilization;
            GpuUtilization {
                utilization: u.all.summary().map(|s| s.rounded()),
                window_p95: u.window.quantile(0.95).map(round4),
                window_p5: u.window.quantile(0.05).map(round4),
                state: g.state,
                violations: g.violations,
                judged: u.seen > self.params.patience,
            }
        });
        Some(Details::GpuUtilization(GpuUtilizationDetails { nodes }))
    }
}
