//! Derived data: per node its CPU, I/O wait, memory, GPUs and traffic; the job's time span
//! and its step spans, all from the run's [`ProfileDigest`](smdebug_analysis::digest).

use std::collections::{BTreeMap, BTreeSet};

use smdebug_analysis::digest::{Line, SeriesDigest, StepDigest, StepKey};
use smdebug_format::system::vocab;

use smdebug_analysis::stats::Sketch;

use crate::input::ReportInput;
use crate::stats::Bucket;

pub(super) struct GpuView<'a> {
    pub(super) node: String,
    pub(super) name: String,
    pub(super) util: Option<&'a SeriesDigest>,
    pub(super) mem: Option<&'a SeriesDigest>,
}

impl GpuView<'_> {
    pub(super) fn label(&self, many_nodes: bool) -> String {
        if many_nodes {
            format!("{} {}", self.node, self.name)
        } else {
            self.name.clone()
        }
    }
}

pub(super) struct NodeView<'a> {
    pub(super) node: String,
    /// CPU busy % over all cores: the `total` record, else the mean of the cores per slice.
    pub(super) cpu: Line,
    pub(super) io_wait: Line,
    /// The readings of the CPU's `total` record, else of every core.
    pub(super) cpu_values: Sketch,
    /// The readings of the I/O wait's `total` record, else of every core.
    pub(super) io_wait_values: Sketch,
    pub(super) cores: Vec<&'a SeriesDigest>,
    pub(super) memory: Option<&'a SeriesDigest>,
    pub(super) gpus: Vec<GpuView<'a>>,
    /// Mean utilization of the node's GPUs per slice.
    pub(super) gpu_mean: Line,
    pub(super) traffic: Vec<&'a SeriesDigest>,
}

pub(super) struct View<'a> {
    pub(super) nodes: Vec<NodeView<'a>>,
    pub(super) t0_us: Option<u64>,
    pub(super) t1_us: Option<u64>,
    /// The step spans per node, worker and mode.
    pub(super) steps: &'a BTreeMap<StepKey, StepDigest>,
    pub(super) many_nodes: bool,
}

/// The trailing number of a name (`cpu12` → 12), for natural ordering.
pub(super) fn trailing_number(name: &str) -> u64 {
    let digits: String = name
        .chars()
        .rev()
        .take_while(char::is_ascii_digit)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    digits.parse().unwrap_or(u64::MAX)
}

impl<'a> View<'a> {
    pub(super) fn new(input: &'a ReportInput) -> View<'a> {
        let mut by_node: BTreeMap<&str, Vec<&SeriesDigest>> = BTreeMap::new();
        for s in input.metrics() {
            by_node.entry(s.node.as_str()).or_default().push(s);
        }
        let nodes = by_node
            .into_iter()
            .map(|(node, series)| {
                let find = |t: &str, n: &str, d: &str| {
                    series
                        .iter()
                        .copied()
                        .find(|s| s.metric_type == t && s.name == n && s.dimension == d)
                };
                let mut cores: Vec<&SeriesDigest> = series
                    .iter()
                    .copied()
                    .filter(|s| {
                        s.metric_type == vocab::TYPE_CPU
                            && s.name != vocab::CPU_TOTAL
                            && s.dimension == vocab::CPU_UTILIZATION
                    })
                    .collect();
                cores.sort_by_key(|s| trailing_number(&s.name));
                let pooled = |members: &[&SeriesDigest]| {
                    let mut all = Sketch::default();
                    for m in members {
                        all.merge(&m.values);
                    }
                    all
                };
                let (cpu, cpu_values) =
                    match find(vocab::TYPE_CPU, vocab::CPU_TOTAL, vocab::CPU_UTILIZATION) {
                        Some(total) => (total.line.clone(), total.values.clone()),
                        None => (Line::mean_of(cores.iter().map(|s| &s.line)), pooled(&cores)),
                    };
                let io_cores: Vec<&SeriesDigest> = series
                    .iter()
                    .copied()
                    .filter(|s| {
                        s.metric_type == vocab::TYPE_CPU && s.dimension == vocab::IO_WAIT_PERCENTAGE
                    })
                    .collect();
                let (io_wait, io_wait_values) =
                    match find(vocab::TYPE_CPU, vocab::CPU_TOTAL, vocab::IO_WAIT_PERCENTAGE) {
                        Some(total) => (total.line.clone(), total.values.clone()),
                        None => (
                            Line::mean_of(io_cores.iter().map(|s| &s.line)),
                            pooled(&io_cores),
                        ),
                    };
                let mut gpu_names: Vec<&str> = series
                    .iter()
                    .filter(|s| s.metric_type == vocab::TYPE_GPU)
                    .map(|s| s.name.as_str())
                    .collect::<BTreeSet<_>>()
                    .into_iter()
                    .collect();
                gpu_names.sort_by_key(|n| (trailing_number(n), n.to_string()));
                let gpus: Vec<GpuView> = gpu_names
                    .into_iter()
                    .map(|name| GpuView {
                        node: node.to_owned(),
                        name: name.to_owned(),
                        util: find(vocab::TYPE_GPU, name, vocab::GPU_UTILIZATION),
                        mem: find(vocab::TYPE_GPU, name, vocab::GPU_MEMORY_UTILIZATION),
                    })
                    .filter(|g| g.util.is_some() || g.mem.is_some())
                    .collect();
                let gpu_mean = Line::mean_of(gpus.iter().filter_map(|g| g.util).map(|s| &s.line));
                NodeView {
                    node: node.to_owned(),
                    cpu,
                    io_wait,
                    cpu_values,
                    io_wait_values,
                    cores,
                    memory: find(vocab::TYPE_MEMORY, vocab::MEMORY_USED_PERCENT, ""),
                    gpus,
                    gpu_mean,
                    traffic: series
                        .iter()
                        .copied()
                        .filter(|s| {
                            s.metric_type == vocab::TYPE_IO && s.name != vocab::IOPS
                                || s.metric_type == vocab::TYPE_NETWORK
                        })
                        .collect(),
                }
            })
            .collect::<Vec<_>>();
        let (t0, t1) = input.profile.time_range().unzip();
        let many_nodes = nodes.len() > 1;
        View {
            nodes,
            t0_us: t0,
            t1_us: t1,
            steps: input.profile.steps(),
            many_nodes,
        }
    }

    pub(super) fn gpus(&self) -> impl Iterator<Item = &GpuView<'a>> {
        self.nodes.iter().flat_map(|n| n.gpus.iter())
    }

    /// Seconds since the job start.
    pub(super) fn elapsed(&self, us: u64) -> f64 {
        let t0 = self.t0_us.unwrap_or(0);
        (us as f64 - t0 as f64) / 1e6
    }

    /// A line's slices against seconds since the job start, the values times `scale`.
    pub(super) fn timeline(&self, line: &Line, scale: f64) -> Vec<Bucket> {
        line.slices()
            .map(|s| Bucket {
                x: self.elapsed(s.middle_us()),
                lo: s.min * scale,
                mean: s.mean() * scale,
                hi: s.max * scale,
            })
            .collect()
    }

    /// How many step spans there are.
    pub(super) fn step_count(&self) -> u64 {
        self.steps.values().map(|s| s.durations.count()).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trailing_numbers_order_names_naturally() {
        assert_eq!(trailing_number("cpu12"), 12);
        assert_eq!(trailing_number("total"), u64::MAX);
    }
}
