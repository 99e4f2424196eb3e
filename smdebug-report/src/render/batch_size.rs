//! 8. Batch size, judged with BatchSize's parameters.

use crate::charts;
use crate::html::{Cell, table};
use crate::stats::Summary;

use super::Page;
use super::format::values;

impl Page<'_> {
    pub(super) fn batch_size(&mut self) {
        if self.view.nodes.is_empty() {
            self.missing("No system metrics: the batch-size check compares CPU, GPU and GPU-memory use, none of which was recorded.");
            self.verdict("BatchSize");
            return;
        }
        let limits = [
            self.param("BatchSize", "cpu_threshold_p95"),
            self.param("BatchSize", "gpu_threshold_p95"),
            self.param("BatchSize", "gpu_memory_threshold_p95"),
        ];
        self.lead(&format!(
            "When CPU p95 stays under {}%, GPU p95 under {}% and GPU memory p95 under \
             {}%, every resource has room and a larger batch would use the hardware better.",
            limits[0], limits[1], limits[2]
        ));
        let mut rows = Vec::new();
        let mut boxes = Vec::new();
        let mut low_nodes = Vec::new();
        let mut any_gpu = false;
        for n in &self.view.nodes {
            let cpu = Summary::of(values(&n.cpu));
            let gpu = Summary::of(
                n.gpus
                    .iter()
                    .filter_map(|g| g.util)
                    .flat_map(|s| values(&s.points)),
            );
            let mem = Summary::of(
                n.gpus
                    .iter()
                    .filter_map(|g| g.mem)
                    .flat_map(|s| values(&s.points)),
            );
            any_gpu |= gpu.is_some();
            let p95 = |s: &Option<Summary>| {
                s.as_ref()
                    .map_or("-".to_owned(), |s| format!("{:.1}", s.p95))
            };
            let all_low = [&cpu, &gpu, &mem]
                .iter()
                .zip(limits)
                .all(|(s, limit)| s.as_ref().is_some_and(|s| s.p95 < limit));
            if all_low {
                low_nodes.push(n.node.clone());
            }
            rows.push(vec![
                Cell::text(&n.node),
                Cell::num(p95(&cpu)),
                Cell::num(p95(&gpu)),
                Cell::num(p95(&mem)),
                Cell::text(if gpu.is_none() {
                    "needs GPU metrics"
                } else if all_low {
                    "all low: room for a larger batch"
                } else {
                    "no"
                }),
            ]);
            let prefix = if self.view.many_nodes {
                format!("{} ", n.node)
            } else {
                String::new()
            };
            for (label, s) in [("CPU", cpu), ("GPU", gpu), ("GPU memory", mem)] {
                if let Some(s) = s {
                    boxes.push((format!("{prefix}{label}"), s));
                }
            }
        }
        table(
            &mut self.out,
            "batch-size",
            &[
                "node",
                "CPU p95 %",
                "GPU p95 %",
                "GPU memory p95 %",
                "all under threshold",
            ],
            &rows,
        );
        boxes.truncate(18);
        let drawn = charts::box_chart(
            "CPU, GPU and GPU memory use",
            "%",
            &boxes,
            Some((0.0, 100.0)),
        );
        self.chart(
            drawn,
            "Distributions of utilization; all GPUs of a node pooled.",
        );
        if !any_gpu {
            self.missing("No GPU metrics were recorded, so the batch-size check cannot tell whether the GPU has room.");
        }
        if !low_nodes.is_empty() {
            self.advice(&format!(
                "On {}, CPU, GPU and GPU memory all stay low: increase the batch size (scaling the \
                 learning rate with it), or move to a smaller, cheaper instance.",
                low_nodes.join(", ")
            ));
        }
        self.verdict("BatchSize");
    }
}
