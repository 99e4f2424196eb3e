//! LoadBalancing: GPUs of a node given unequal work (distances between their utilization histograms).

use crate::error::Result;
use crate::params::{Check, lenient};
use crate::profiler::details::{
    Details, GpuDistance, GpuWorkload, LoadBalancingDetails, NodeWorkloads,
};
use crate::profiler::snapshot::SnapshotAssembler;
use crate::rule::{Evidence, ProfilerNeeds, ProfilerRule, RuleResult};
use crate::window::{ProfilerWindow, StepRef};
use serde::{Deserialize, Serialize};
use smdebug_analysis::stats::round4;
use std::collections::BTreeMap;

use super::common::{closing_results, gpu_needs};

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

/// The result of two GPUs of `node` whose utilization histograms are `distance` apart, above
/// `threshold`, at `(step, time_us)`: which is busier and which idles more, with the distance as
/// evidence.
fn imbalance(
    node: &str,
    (g1, w1): (&String, &Workload),
    (g2, w2): (&String, &Workload),
    distance: f64,
    threshold: f64,
    (step, time_us): (StepRef, u64),
) -> RuleResult {
    let mut r = RuleResult::at_time(step.step, time_us);
    let (busy, less) = if w1.mean() >= w2.mean() {
        ((g1, w1), (g2, w2))
    } else {
        ((g2, w2), (g1, w1))
    };
    r.fire(format!(
        "node {}: {} and {} carry different loads (Jensen–Shannon distance \
         {distance:.2} between their utilization histograms, above {}) by \
         {step}: {} averages {:.0}% utilization, {} {:.0}%; {} is idle \
         (below {IDLE_BELOW}%) {:.0}% of the time, {:.0} points more than {}: \
         balance the work across GPUs (even shards and batches, no extra \
         work on one rank)",
        node,
        g1,
        g2,
        threshold,
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
        Evidence::at(
            &format!("{} {g1} vs {g2}", node),
            step,
            "jensen_shannon_distance",
            distance,
        )
        .limit(threshold),
    );
    r
}

impl ProfilerRule for LoadBalancing {
    crate::rule_identity!();

    fn needs(&self) -> ProfilerNeeds {
        gpu_needs("GPU metrics of two GPUs or more")
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
                        let step = window.step_ref_at(snapshot.time_us);
                        results.push(imbalance(
                            &snapshot.node,
                            (g1, w1),
                            (g2, w2),
                            distance,
                            p.threshold,
                            (step, snapshot.time_us),
                        ));
                    }
                    if condition {
                        self.firing.insert(key, distance);
                    } else {
                        self.firing.remove(&key);
                    }
                }
            }
        }
        // Readings are judged once two GPUs' histograms are compared: until then (and on a
        // node with one GPU) they are read, not judged.
        let evaluated = !self.distances.is_empty();
        closing_results(
            window,
            if evaluated { datapoints } else { 0 },
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
