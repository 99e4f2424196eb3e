//! Samples grouped into snapshots (the CPU and GPU readings of one node at one time), the
//! pieces the CPU and GPU rules read, and the time format of the profiler rules' messages.

use std::collections::BTreeMap;

use smdebug_format::system::vocab;

use crate::window::ProfilerWindow;

/// Samples of one node taken within this long of each other belong to one snapshot (the
/// sampler's threads do not all wake at the same microsecond; SageMaker used the same 20 ms).
pub const SNAPSHOT_TOLERANCE_US: u64 = 20_000;

/// The CPU and GPU readings of one node at one time.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Snapshot {
    /// The node the samples came from.
    pub node: String,
    /// Time of the snapshot's first sample, microseconds since the epoch.
    pub time_us: u64,
    /// `CPUUtilization` by name (`cpu0`, ..., and `total` when the sampler wrote it).
    pub cpu: BTreeMap<String, f64>,
    /// `I/OWaitPercentage` by name.
    pub io_wait: BTreeMap<String, f64>,
    /// `GPUUtilization` by GPU (`gpu0`, ...).
    pub gpu: BTreeMap<String, f64>,
    /// `GPUMemoryUtilization` (memory used, percent) by GPU.
    pub gpu_memory: BTreeMap<String, f64>,
}

impl Snapshot {
    /// The whole machine's CPU utilization: the `total` record, else the mean over cores.
    pub fn cpu_total(&self) -> Option<f64> {
        if let Some(total) = self.cpu.get(vocab::CPU_TOTAL) {
            return Some(*total);
        }
        let cores: Vec<f64> = self
            .cpu
            .iter()
            .filter(|(name, _)| is_core(name))
            .map(|(_, v)| *v)
            .collect();
        (!cores.is_empty()).then(|| cores.iter().sum::<f64>() / cores.len() as f64)
    }

    fn is_empty(&self) -> bool {
        self.cpu.is_empty()
            && self.io_wait.is_empty()
            && self.gpu.is_empty()
            && self.gpu_memory.is_empty()
    }
}

/// Whether a CPU record's name is one core's (`cpu0`, `cpu17`).
pub fn is_core(name: &str) -> bool {
    name.strip_prefix("cpu")
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

/// Which of a snapshot's tables a sample goes into.
type Reading = fn(&mut Snapshot) -> &mut BTreeMap<String, f64>;

/// Groups a node's samples into [`Snapshot`]s across windows. A snapshot is complete when a
/// later sample of its node arrives, or at the final window.
#[derive(Clone, Debug, Default)]
pub struct SnapshotAssembler {
    open: BTreeMap<String, Snapshot>,
}

impl SnapshotAssembler {
    /// The snapshots that `window` completes, ordered by time.
    pub fn feed(&mut self, window: &ProfilerWindow<'_>) -> Vec<Snapshot> {
        let mut done = Vec::new();
        for sample in window.samples {
            let (map, value): (Reading, f64) =
                match (sample.metric_type.as_str(), sample.dimension.as_str()) {
                    (vocab::TYPE_CPU, vocab::CPU_UTILIZATION) => (|s| &mut s.cpu, sample.value),
                    (vocab::TYPE_CPU, vocab::IO_WAIT_PERCENTAGE) => {
                        (|s| &mut s.io_wait, sample.value)
                    }
                    (vocab::TYPE_GPU, vocab::GPU_UTILIZATION) => (|s| &mut s.gpu, sample.value),
                    (vocab::TYPE_GPU, vocab::GPU_MEMORY_UTILIZATION) => {
                        (|s| &mut s.gpu_memory, sample.value)
                    }
                    _ => continue,
                };
            if !value.is_finite() {
                continue;
            }
            let at = sample.timestamp_us();
            let open = self.open.entry(sample.node_id.clone()).or_default();
            if !open.is_empty() && at.abs_diff(open.time_us) > SNAPSHOT_TOLERANCE_US {
                done.push(std::mem::take(open));
            }
            if open.is_empty() {
                open.node = sample.node_id.clone();
                open.time_us = at;
            }
            map(open).insert(sample.name.clone(), value);
        }
        if window.final_window {
            done.extend(
                std::mem::take(&mut self.open)
                    .into_values()
                    .filter(|s| !s.is_empty()),
            );
        }
        done.sort_by(|a, b| (a.time_us, &a.node).cmp(&(b.time_us, &b.node)));
        done
    }
}

/// The message of a GPU rule that saw no GPU metrics.
pub(crate) const NO_GPU: &str = "no GPU metrics in this run (no `gpu` records with \
    GPUUtilization/GPUMemoryUtilization): nothing to check";

#[cfg(test)]
mod tests {
    use super::*;
    use smdebug_format::system::SystemSample;

    use crate::window::StepTimeline;

    fn sample(node: &str, t: f64, ty: &str, name: &str, dim: &str, v: f64) -> SystemSample {
        SystemSample {
            metric_type: ty.into(),
            name: name.into(),
            dimension: dim.into(),
            value: v,
            node_id: node.into(),
            timestamp: t,
        }
    }

    #[test]
    fn snapshots_are_the_same_whether_fed_at_once_or_sample_by_sample() {
        let mut samples = Vec::new();
        for i in 0..5 {
            let t = 100.0 + i as f64 * 0.1;
            samples.push(sample("a", t, "cpu", "cpu0", "CPUUtilization", i as f64));
            samples.push(sample(
                "a",
                t + 0.005,
                "gpu",
                "gpu0",
                "GPUUtilization",
                50.0,
            ));
            samples.push(sample("b", t, "cpu", "total", "CPUUtilization", 7.0));
        }
        let steps = StepTimeline::default();
        let mut whole = SnapshotAssembler::default();
        let all = whole.feed(&window(&samples, &steps, true));
        let mut piecewise = SnapshotAssembler::default();
        let mut pieces = Vec::new();
        for (i, s) in samples.iter().enumerate() {
            let last = i + 1 == samples.len();
            pieces.extend(piecewise.feed(&window(std::slice::from_ref(s), &steps, last)));
        }
        pieces.sort_by(|a, b| (a.time_us, &a.node).cmp(&(b.time_us, &b.node)));
        assert_eq!(all.len(), 10);
        assert_eq!(all, pieces);
        assert_eq!(all[0].cpu["cpu0"], 0.0);
        assert_eq!(all[0].gpu["gpu0"], 50.0);
        assert_eq!(all[1].cpu_total(), Some(7.0));
    }

    fn window<'a>(
        samples: &'a [SystemSample],
        steps: &'a StepTimeline,
        last: bool,
    ) -> ProfilerWindow<'a> {
        ProfilerWindow {
            samples,
            spans: &[],
            start_us: None,
            now_us: 0,
            final_window: last,
            steps,
        }
    }
}
