//! 2. System usage statistics, with per-node charts.

use smdebug_format::system::vocab;

use crate::charts::{self, Curve, XAxis};
use crate::html::{Cell, table};
use crate::input::NoteArea;
use crate::stats::Summary;
use smdebug_analysis::digest::SeriesDigest;
use smdebug_analysis::stats::Sketch;

use super::format::{fmt_value, metric_label, percentile_bound, type_rank};
use super::view::{NodeView, trailing_number};
use super::{MAX_SERIES, Page};

/// Series of one kind of device on a node listed one by one at most; more are pooled.
const DEVICE_ROWS: usize = 16;

impl Page<'_> {
    pub(super) fn system_usage(&mut self) {
        self.notes(NoteArea::System);
        if !self.input.has_metrics() {
            self.missing("No system metrics to summarize: the system sampler did not run for this job, or its files could not be read.");
            self.verdict("OverallSystemUsage");
            return;
        }
        self.lead(&format!(
            "Per node and metric over the whole job. {}",
            percentile_bound()
        ));
        let mut sorted: Vec<&SeriesDigest> = self.input.metrics().collect();
        sorted.sort_by_key(|s| {
            (
                s.node.clone(),
                type_rank(&s.metric_type),
                s.name != vocab::CPU_TOTAL,
                trailing_number(&s.name),
                s.name.clone(),
                s.dimension.clone(),
            )
        });
        let rows = usage_rows(&sorted);
        table(
            &mut self.out,
            "system-usage",
            &[
                "node", "metric", "unit", "max", "p99", "p95", "p50", "min", "samples",
            ],
            &rows,
        );
        for i in 0..self.view.nodes.len() {
            self.node_charts(i);
        }
        self.verdict("OverallSystemUsage");
    }

    fn node_charts(&mut self, index: usize) {
        let name = self.view.nodes[index].node.clone();
        self.h3(&format!("Node {name}"));
        let node = &self.view.nodes[index];
        let (util, memory) = self.usage_curves(node);
        let traffic: Vec<Curve> = node
            .traffic
            .iter()
            .take(MAX_SERIES)
            .map(|s| Curve {
                label: s.name.clone(),
                slices: self.view.timeline(&s.line, 1e-6),
            })
            .collect();
        let cores: Vec<(String, Summary)> = node
            .cores
            .iter()
            .take(64)
            .filter_map(|s| Some((s.name.clone(), s.values.summary()?)))
            .collect();
        if !util.is_empty() {
            let drawn = charts::line_chart(
                &format!("CPU and GPU utilization: {name}"),
                XAxis::Elapsed,
                "%",
                &util,
                Some((0.0, 100.0)),
            );
            self.chart(drawn, "Utilization over time, percent. Over long runs each line is the mean of a time slice and the light band its lowest to highest sample.");
        }
        if !memory.is_empty() {
            let drawn = charts::line_chart(
                &format!("Memory used: {name}"),
                XAxis::Elapsed,
                "% used",
                &memory,
                Some((0.0, 100.0)),
            );
            self.chart(
                drawn,
                "Host and GPU memory in use, percent of their capacity.",
            );
        }
        if !traffic.is_empty() {
            let drawn = charts::line_chart(
                &format!("Disk and network: {name}"),
                XAxis::Elapsed,
                "MB/s",
                &traffic,
                None,
            );
            self.chart(
                drawn,
                "Disk reads and writes and network traffic, megabytes per second.",
            );
        }
        if !cores.is_empty() {
            let drawn = charts::box_chart(
                &format!("CPU utilization per core: {name}"),
                "%",
                &cores,
                Some((0.0, 100.0)),
            );
            self.chart(drawn, "Per core: box from p25 to p75 with the median, whiskers p5 to p95 (each within 1% of the value at its rank), dots at min and max (exact).");
        }
    }

    /// A node's utilization curves (CPU, I/O wait, each GPU) and memory curves (host, each
    /// GPU), at most [`MAX_SERIES`] GPUs each.
    fn usage_curves(&self, node: &NodeView<'_>) -> (Vec<Curve>, Vec<Curve>) {
        let many = self.view.many_nodes;
        let mut util = Vec::new();
        if !node.cpu.is_empty() {
            util.push(Curve {
                label: "CPU (all cores)".into(),
                slices: self.view.timeline(&node.cpu, 1.0),
            });
        }
        if !node.io_wait.is_empty() {
            util.push(Curve {
                label: "I/O wait".into(),
                slices: self.view.timeline(&node.io_wait, 1.0),
            });
        }
        for g in node
            .gpus
            .iter()
            .filter_map(|g| Some((g, g.util?)))
            .take(MAX_SERIES)
        {
            util.push(Curve {
                label: format!("{} utilization", g.0.label(many)),
                slices: self.view.timeline(&g.1.line, 1.0),
            });
        }
        let mut memory = Vec::new();
        if let Some(m) = node.memory {
            memory.push(Curve {
                label: "host memory".into(),
                slices: self.view.timeline(&m.line, 1.0),
            });
        }
        for g in node
            .gpus
            .iter()
            .filter_map(|g| Some((g, g.mem?)))
            .take(MAX_SERIES)
        {
            memory.push(Curve {
                label: format!("{} memory", g.0.label(many)),
                slices: self.view.timeline(&g.1.line, 1.0),
            });
        }
        (util, memory)
    }
}

/// The table's rows, one a series in `sorted` order; devices of one kind on a node (GPUs,
/// cores: a name ending in a number) beyond [`DEVICE_ROWS`] pooled into one row, so that
/// thousands of devices make a few rows.
fn usage_rows(sorted: &[&SeriesDigest]) -> Vec<Vec<Cell>> {
    let device = |m: &SeriesDigest| {
        m.name.ends_with(|c: char| c.is_ascii_digit()).then(|| {
            (
                m.node.clone(),
                m.metric_type.clone(),
                m.name
                    .trim_end_matches(|c: char| c.is_ascii_digit())
                    .to_owned(),
                m.dimension.clone(),
            )
        })
    };
    let mut group_sizes = std::collections::HashMap::new();
    for m in sorted {
        if let Some(key) = device(m) {
            *group_sizes.entry(key).or_insert(0usize) += 1;
        }
    }
    let row = |node: &str, label: String, unit: &str, sum: Summary| {
        vec![
            Cell::text(node),
            Cell::text(label),
            Cell::text(unit),
            Cell::num(fmt_value(sum.max, unit)),
            Cell::num(fmt_value(sum.p99, unit)),
            Cell::num(fmt_value(sum.p95, unit)),
            Cell::num(fmt_value(sum.p50, unit)),
            Cell::num(fmt_value(sum.min, unit)),
            Cell::num(sum.count.to_string()),
        ]
    };
    let mut rows: Vec<Vec<Cell>> = Vec::new();
    let mut pooled = std::collections::HashSet::new();
    for s in sorted {
        let unit = s.unit();
        match device(s) {
            Some(key) if group_sizes[&key] > DEVICE_ROWS => {
                if pooled.contains(&key) {
                    continue;
                }
                let members: Vec<&&SeriesDigest> = sorted
                    .iter()
                    .filter(|m| device(m).as_ref() == Some(&key))
                    .collect();
                let mut all = Sketch::default();
                for m in &members {
                    all.merge(&m.values);
                }
                if let Some(sum) = all.summary() {
                    let label = format!(
                        "{}: {} {}N {} (all {} pooled)",
                        key.1,
                        members.len(),
                        key.2,
                        key.3,
                        members.len()
                    );
                    rows.push(row(&s.node, label, unit, sum));
                }
                pooled.insert(key);
            }
            _ => {
                if let Some(sum) = s.values.summary() {
                    rows.push(row(&s.node, metric_label(s), unit, sum));
                }
            }
        }
    }
    rows
}
