//! Derived data: per node its CPU, I/O wait, memory, GPUs and traffic; the job's time span
//! and its step spans.

use std::collections::{BTreeMap, BTreeSet};

use smdebug_profiler::reader::SpanRef;
use smdebug_profiler::spans::Phase;
use smdebug_profiler::system::vocab;

use crate::input::ReportInput;
use smdebug_profiler::reader::MetricSeries;

pub(super) struct GpuView<'a> {
    pub(super) node: String,
    pub(super) name: String,
    pub(super) util: Option<&'a MetricSeries>,
    pub(super) mem: Option<&'a MetricSeries>,
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
    /// CPU busy % over all cores: the `total` record, else the mean of the cores per time.
    pub(super) cpu: Vec<(u64, f64)>,
    pub(super) io_wait: Vec<(u64, f64)>,
    pub(super) cores: Vec<&'a MetricSeries>,
    pub(super) memory: Option<&'a MetricSeries>,
    pub(super) gpus: Vec<GpuView<'a>>,
    /// Mean utilization of the node's GPUs per sample time.
    pub(super) gpu_mean: Vec<(u64, f64)>,
    pub(super) traffic: Vec<&'a MetricSeries>,
}

pub(super) struct View<'a> {
    pub(super) nodes: Vec<NodeView<'a>>,
    pub(super) t0_us: Option<u64>,
    pub(super) t1_us: Option<u64>,
    pub(super) steps: Vec<SpanRef<'a>>,
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

/// Mean per timestamp over several series.
pub(super) fn mean_per_time<'s>(
    series: impl IntoIterator<Item = &'s MetricSeries>,
) -> Vec<(u64, f64)> {
    let mut acc: BTreeMap<u64, (f64, u32)> = BTreeMap::new();
    for s in series {
        for (t, v) in s.points.iter() {
            let e = acc.entry(t).or_insert((0.0, 0));
            e.0 += v;
            e.1 += 1;
        }
    }
    acc.into_iter()
        .map(|(t, (sum, n))| (t, sum / f64::from(n)))
        .collect()
}

impl<'a> View<'a> {
    pub(super) fn new(input: &'a ReportInput) -> View<'a> {
        let mut by_node: BTreeMap<&str, Vec<&MetricSeries>> = BTreeMap::new();
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
                let mut cores: Vec<&MetricSeries> = series
                    .iter()
                    .copied()
                    .filter(|s| {
                        s.metric_type == vocab::TYPE_CPU
                            && s.name != vocab::CPU_TOTAL
                            && s.dimension == vocab::CPU_UTILIZATION
                    })
                    .collect();
                cores.sort_by_key(|s| trailing_number(&s.name));
                let cpu = find(vocab::TYPE_CPU, vocab::CPU_TOTAL, vocab::CPU_UTILIZATION)
                    .map(|s| s.points.to_vec())
                    .unwrap_or_else(|| mean_per_time(cores.iter().copied()));
                let io_wait = find(vocab::TYPE_CPU, vocab::CPU_TOTAL, vocab::IO_WAIT_PERCENTAGE)
                    .map(|s| s.points.to_vec())
                    .unwrap_or_else(|| {
                        mean_per_time(series.iter().copied().filter(|s| {
                            s.metric_type == vocab::TYPE_CPU
                                && s.dimension == vocab::IO_WAIT_PERCENTAGE
                        }))
                    });
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
                let gpu_mean = mean_per_time(gpus.iter().filter_map(|g| g.util));
                NodeView {
                    node: node.to_owned(),
                    cpu,
                    io_wait,
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
        let metric_times = input
            .metrics()
            .filter_map(|s| Some((s.points.first()?.0, s.points.last()?.0)));
        let span_times = input.spans().iter().map(|s| (s.start_us, s.end_us));
        let (mut t0, mut t1) = (None::<u64>, None::<u64>);
        for (a, b) in metric_times.chain(span_times) {
            t0 = Some(t0.map_or(a, |t| t.min(a)));
            t1 = Some(t1.map_or(b, |t| t.max(b)));
        }
        let steps = input
            .spans()
            .iter()
            .filter(|s| matches!(s.phase_kind(), Phase::Step(_)))
            .collect();
        let many_nodes = nodes.len() > 1;
        View {
            nodes,
            t0_us: t0,
            t1_us: t1,
            steps,
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

    pub(super) fn timeline(&self, points: impl IntoIterator<Item = (u64, f64)>) -> Vec<(f64, f64)> {
        points
            .into_iter()
            .map(|(t, v)| (self.elapsed(t), v))
            .collect()
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
