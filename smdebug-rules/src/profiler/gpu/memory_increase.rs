//! GPUMemoryIncrease: a GPU's memory use growing faster than the limit.

use crate::error::Result;
use crate::params::{Check, lenient};
use crate::profiler::details::{Details, GpuMemoryDetails, GpuMemoryUse, MemoryIncrease};
use crate::profiler::snapshot::Snapshot;
use crate::rule::{Evidence, ProfilerNeeds, ProfilerRule, RuleResult};
use crate::window::ProfilerWindow;
use serde::{Deserialize, Serialize};
use smdebug_analysis::stats::round4;

use super::common::{GpuSeries, Judged, PerGpu, gpu_needs};

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
    /// The latest moving average judged.
    average: Option<f64>,
    /// The largest rise judged.
    largest_rise: f64,
    increases: Vec<MemoryIncrease>,
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
        gpu_needs("GPU memory metrics")
    }

    fn invoke_on_window(&mut self, window: &ProfilerWindow<'_>) -> Result<Vec<RuleResult>> {
        let p = &self.params;
        let new = || GpuMemory {
            memory: GpuSeries::new(p.window),
            baseline: None,
            average: None,
            largest_rise: 0.0,
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
            g.average = Some(average);
            let baseline = *g.baseline.get_or_insert(average);
            if average < baseline {
                g.baseline = Some(average);
                return Judged::Checked;
            }
            let rise = average - baseline;
            g.largest_rise = g.largest_rise.max(rise);
            if rise <= p.increase {
                return Judged::Checked;
            }
            g.baseline = Some(average);
            let step = window.step_ref_at(snapshot.time_us);
            let mut r = RuleResult::at_time(step.step, snapshot.time_us);
            let node = &snapshot.node;
            r.fire(format!(
                "node {node} {gpu}: the average GPU memory use over the last {} \
                 samples rose from {baseline:.1}% to {average:.1}% (+{rise:.1} points, \
                 more than {}) by {step}: look for tensors kept across steps \
                 (a leak) or growing batch/sequence sizes before it runs out",
                p.window, p.increase
            ));
            r.evidence.push(
                Evidence::at(
                    &format!("{node} {gpu} GPUMemoryUtilization"),
                    step,
                    "increase",
                    rise,
                )
                .limit(p.increase),
            );
            if g.increases.len() < 100 {
                g.increases.push(MemoryIncrease {
                    time_us: snapshot.time_us,
                    step: step.step,
                    from: round4(baseline),
                    to: round4(average),
                });
            }
            Judged::Fired(r)
        };
        let evaluated = |g: &GpuMemory| g.memory.window.is_full();
        Ok(self.gpus.feed(window, p.patience, new, judge, evaluated))
    }

    fn details(&self) -> Option<Details> {
        let nodes = self.gpus.details(|g| GpuMemoryUse {
            memory: g.memory.all.summary().map(|s| s.rounded()),
            average: g.average.map(round4),
            baseline: g.baseline.map(round4),
            largest_rise: round4(g.largest_rise),
            increases: g.increases.clone(),
        });
        Some(Details::GpuMemory(GpuMemoryDetails {
            increase: self.params.increase,
            window: self.params.window,
            nodes,
        }))
    }
}
