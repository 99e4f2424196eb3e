//! 9, 10. CPU and I/O bottlenecks: CPUBottleneck's and IOBottleneck's own evidence (their
//! snapshot counts, bottleneck snapshots and phases), drawn over the node's metrics. The page
//! judges nothing itself: without the rule's details there is no count.

use smdebug_rules::profiler::{BottleneckDetails, SNAPSHOT_TOLERANCE_US};
use smdebug_rules::profiler::{CPUBottleneckParams, IOBottleneckParams};

use crate::charts::{self, Curve, Series, XAxis};
use crate::html::{Cell, table};
use smdebug_analysis::digest::Line;
use smdebug_analysis::stats::Sketch;

use super::Page;
use super::format::pct;
use super::view::NodeView;

/// Which bottleneck a section is about.
#[derive(Clone, Copy)]
enum Bottleneck {
    Cpu,
    Io,
}

impl Bottleneck {
    /// The node's host series the rule compares with the GPUs.
    fn series<'n>(self, n: &'n NodeView<'_>) -> &'n Line {
        match self {
            Bottleneck::Cpu => &n.cpu,
            Bottleneck::Io => &n.io_wait,
        }
    }

    /// The node's host readings (its `total` record's, else every core's).
    fn values<'n>(self, n: &'n NodeView<'_>) -> &'n Sketch {
        match self {
            Bottleneck::Cpu => &n.cpu_values,
            Bottleneck::Io => &n.io_wait_values,
        }
    }
}

impl Page<'_> {
    pub(super) fn cpu_bottlenecks(&mut self) {
        self.bottleneck(Bottleneck::Cpu);
    }

    pub(super) fn io_bottlenecks(&mut self) {
        self.bottleneck(Bottleneck::Io);
    }

    fn bottleneck(&mut self, kind: Bottleneck) {
        let (rule, what, busy_label) = match kind {
            Bottleneck::Cpu => ("CPUBottleneck", "CPU utilization", "CPU busy"),
            Bottleneck::Io => ("IOBottleneck", "I/O wait", "I/O wait high"),
        };
        let (busy, gpu_idle, patience) = match kind {
            Bottleneck::Cpu => {
                let p: CPUBottleneckParams = self.params();
                (p.cpu_threshold, p.gpu_threshold, p.patience)
            }
            Bottleneck::Io => {
                let p: IOBottleneckParams = self.params();
                (p.io_threshold, p.gpu_threshold, p.patience)
            }
        };
        if self.view.nodes.iter().all(|n| kind.series(n).is_empty()) {
            self.missing(&format!(
                "No {what} was recorded, so this check has nothing to look at."
            ));
            self.verdict(rule);
            return;
        }
        self.lead(&format!(
            "The {rule} rule's evidence. A node's readings taken within {} ms of each other form \
             a snapshot; a snapshot is a bottleneck when a GPU is under {gpu_idle}% utilization \
             while {what} is over {busy}% (on a core or the total): the GPU waits on the {}. \
             The first {patience} snapshots of each node are not judged.",
            SNAPSHOT_TOLERANCE_US / 1000,
            match kind {
                Bottleneck::Cpu => "CPU",
                Bottleneck::Io => "disk or network",
            }
        ));
        let Some(details) = self.details(rule).and_then(|d| d.bottlenecks().cloned()) else {
            self.no_result(
                rule,
                &format!(
                    "The {rule} rule has no result for this run, so there is no bottleneck count; \
                 the chart shows the metrics only."
                ),
            );
            self.bottleneck_chart(kind, what, None);
            self.verdict(rule);
            return;
        };
        self.bottleneck_table(kind, what, &details);
        if details.nodes.is_empty() {
            self.missing(&format!(
                "No GPU metrics were recorded: this check compares GPU idle time with {what}, so it cannot tell whether the GPU waited."
            ));
            self.verdict(rule);
            return;
        }
        let low_gpu: u64 = details.nodes.values().map(|n| n.low_gpu_utilization).sum();
        let (total, hits) = (details.datapoints(), details.bottlenecks());
        let slices = [
            (format!("GPU idle, {busy_label}: {hits}"), hits as f64),
            (
                format!("GPU idle, other reason: {}", low_gpu.saturating_sub(hits)),
                low_gpu.saturating_sub(hits) as f64,
            ),
            (
                format!("GPU busy: {}", total.saturating_sub(low_gpu)),
                total.saturating_sub(low_gpu) as f64,
            ),
        ];
        let drawn = charts::pie_chart(&format!("GPU idle and {busy_label}"), &slices);
        self.marked_chart(
            drawn,
            &format!("The {rule} rule's {total} judged snapshots in each state, all nodes."),
            hits as usize,
        );
        self.bottleneck_chart(kind, what, Some(&details));
        self.bottleneck_phases(&details);
        if hits > 0 {
            let share = hits as f64 / total.max(1) as f64;
            self.advice(&match kind {
                Bottleneck::Cpu => format!(
                    "In {} of the snapshots the GPU idled while the CPU was saturated. Take work off \
                     the CPU: more data-loader workers, lighter or precomputed augmentation, \
                     decoding on the GPU, fewer Python-side conversions per batch.",
                    pct(share)
                ),
                Bottleneck::Io => format!(
                    "In {} of the snapshots the GPU idled while the CPU waited on I/O. Read data \
                     faster: larger sequential files (sharded records instead of many small \
                     files), local copies or caching of remote data, prefetching.",
                    pct(share)
                ),
            });
        }
        self.verdict(rule);
    }

    /// Per node: the host series' p95 and the rule's counts.
    fn bottleneck_table(&mut self, kind: Bottleneck, what: &str, details: &BottleneckDetails) {
        let mut rows = Vec::new();
        for n in &self.view.nodes {
            let own = kind.series(n);
            if own.is_empty() && !details.nodes.contains_key(&n.node) {
                continue;
            }
            let p95 = kind
                .values(n)
                .quantile(0.95)
                .map_or("-".into(), |p| format!("{p:.1}"));
            let Some(d) = details.nodes.get(&n.node) else {
                rows.push(vec![
                    Cell::text(&n.node),
                    Cell::num(p95),
                    Cell::num("-"),
                    Cell::num("-"),
                    Cell::text("no GPU metrics"),
                    Cell::num("-"),
                ]);
                continue;
            };
            let share = if d.datapoints > 0 {
                d.bottlenecks as f64 / d.datapoints as f64
            } else {
                f64::NAN
            };
            rows.push(vec![
                Cell::text(&n.node),
                Cell::num(p95),
                Cell::num(d.datapoints.to_string()),
                Cell::num(d.bottlenecks.to_string()),
                Cell::text(pct(share)),
                Cell::num(d.skipped_for_patience.to_string()),
            ]);
        }
        table(
            &mut self.out,
            "bottleneck",
            &[
                "node",
                &format!("{what} p95 %"),
                "judged snapshots",
                "bottleneck snapshots",
                "share",
                "skipped (patience)",
            ],
            &rows,
        );
        self.lead(&format!(
            "The {what} p95 is over the node's total record, or every core's readings without \
             one, within {:.2}% of the reading at its rank (a quantile sketch).",
            smdebug_analysis::stats::SKETCH_RELATIVE_ERROR * 100.0
        ));
    }

    /// The host series and the GPUs' mean on the first node with both, with the rule's
    /// bottleneck snapshots marked.
    fn bottleneck_chart(
        &mut self,
        kind: Bottleneck,
        what: &str,
        details: Option<&BottleneckDetails>,
    ) {
        let Some(n) = self
            .view
            .nodes
            .iter()
            .find(|n| !n.gpu_mean.is_empty() && !kind.series(n).is_empty())
        else {
            return;
        };
        let lines = vec![
            Curve {
                label: what.into(),
                slices: self.view.timeline(kind.series(n), 1.0),
            },
            Curve {
                label: "GPU mean utilization".into(),
                slices: self.view.timeline(&n.gpu_mean, 1.0),
            },
        ];
        let node = details.and_then(|d| d.nodes.get(&n.node));
        let marks = node.map(|d| Series {
            label: format!("bottleneck ({})", d.bottleneck_samples.len()),
            points: d
                .bottleneck_samples
                .iter()
                .map(|s| (self.view.elapsed(s.time_us), s.host_percent))
                .collect(),
        });
        let marked = marks.as_ref().map_or(0, |m| m.points.len());
        let drawn = charts::marked_line_chart(
            &format!("{what} and GPU utilization: {}", n.node),
            XAxis::Elapsed,
            "%",
            &lines,
            Some((0.0, 100.0)),
            marks.as_ref(),
        );
        let caption = match node {
            Some(d) if d.bottleneck_samples.len() as u64 == d.bottlenecks => format!(
                "Both over time on the same node; circles: the rule's {} bottleneck snapshots.",
                d.bottlenecks
            ),
            Some(d) => format!(
                "Both over time on the same node; circles: the first {} of the rule's {} \
                 bottleneck snapshots.",
                d.bottleneck_samples.len(),
                d.bottlenecks
            ),
            None => "Both over time on the same node.".to_owned(),
        };
        self.marked_chart(drawn, &caption, marked);
    }

    /// What the training loop was doing during the rule's bottleneck snapshots.
    fn bottleneck_phases(&mut self, details: &BottleneckDetails) {
        let kept: u64 = details
            .nodes
            .values()
            .map(|n| n.bottleneck_samples.len() as u64)
            .sum();
        if kept == 0 {
            return;
        }
        let mut hits: Vec<(&str, u64)> = Vec::new();
        for n in details.nodes.values() {
            for (phase, count) in &n.phases_during_bottlenecks {
                match hits.iter_mut().find(|h| h.0 == phase) {
                    Some(h) => h.1 += count,
                    None => hits.push((phase, *count)),
                }
            }
        }
        hits.sort_by_key(|h| std::cmp::Reverse(h.1));
        if hits.is_empty() {
            self.lead("No span was running during the bottleneck snapshots: they fall outside the recorded training loop.");
            return;
        }
        self.lead("What the training loop was doing during bottleneck snapshots (the time each snapshot averages over, since the one before; a snapshot can overlap several phases):");
        let rows: Vec<Vec<Cell>> = hits
            .iter()
            .map(|(p, n)| {
                vec![
                    Cell::text(*p),
                    Cell::num(n.to_string()),
                    Cell::num(pct(*n as f64 / kept as f64)),
                ]
            })
            .collect();
        table(
            &mut self.out,
            "bottleneck-phases",
            &["phase", "bottleneck snapshots", "share"],
            &rows,
        );
    }
}
