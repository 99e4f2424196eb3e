//! 8. Batch size.
//!
//! BatchSize's own evidence (its thresholds, the p95s of its latest judged window, when it
//! fired); the section judges nothing itself.

use smdebug_rules::profiler::BatchSizeDetails;
use smdebug_rules::profiler::BatchSizeParams;

use crate::charts;
use crate::html::{Cell, table};

use super::Page;

const RULE: &str = "BatchSize";

/// A p95 for a table cell; `-` when the rule never judged it.
fn p95(v: Option<f64>) -> Cell {
    Cell::num(v.map_or("-".to_owned(), |v| format!("{v:.1}")))
}

impl Page<'_> {
    pub(super) fn batch_size(&mut self) {
        if self.view.nodes.is_empty() {
            self.missing("No system metrics: the batch-size check compares CPU, GPU and GPU-memory use, none of which was recorded.");
            self.verdict(RULE);
            return;
        }
        let Some(details) = self.details(RULE).and_then(|d| d.batch_size().cloned()) else {
            let p: BatchSizeParams = self.params();
            self.lead(&format!(
                "When CPU p95 stays under {}%, GPU p95 under {}% and GPU memory p95 under \
                 {}%, every resource has room and a larger batch would use the hardware better.",
                p.cpu_threshold_p95, p.gpu_threshold_p95, p.gpu_memory_threshold_p95,
            ));
            self.no_result(
                RULE,
                "The BatchSize rule's findings were not given, so nothing was judged.",
            );
            self.verdict(RULE);
            return;
        };
        self.lead(&format!(
            "When CPU p95 stays under {}%, GPU p95 under {}% and GPU memory p95 under \
             {}% over the latest {} samples, every resource has room and a larger batch would \
             use the hardware better. The p95s are the rule's, over its latest judged window.",
            details.cpu_threshold_p95,
            details.gpu_threshold_p95,
            details.gpu_memory_threshold_p95,
            details.window
        ));
        self.batch_size_table(&details);
        self.batch_size_chart(&details);
        let low: Vec<String> = details
            .nodes
            .iter()
            .flat_map(|(node, n)| {
                n.gpus
                    .iter()
                    .filter(|(_, g)| g.violations > 0)
                    .map(move |(gpu, _)| format!("{node} {gpu}"))
            })
            .collect();
        if !low.is_empty() {
            self.advice(&format!(
                "On {}, CPU, GPU and GPU memory all stayed low: increase the batch size (scaling \
                 the learning rate with it), or move to a smaller, cheaper instance.",
                low.join(", ")
            ));
        }
        self.verdict(RULE);
    }

    fn batch_size_table(&mut self, details: &BatchSizeDetails) {
        let mut rows = Vec::new();
        for (node, n) in &details.nodes {
            for (gpu, g) in &n.gpus {
                rows.push(vec![
                    Cell::text(node),
                    Cell::text(gpu),
                    p95(n.cpu_window_p95),
                    p95(g.window_p95),
                    p95(g.memory_window_p95),
                    Cell::text(match (g.window_p95, g.all_under) {
                        (None, _) => "not judged",
                        (Some(_), true) => "all low: room for a larger batch",
                        (Some(_), false) => "no",
                    }),
                    Cell::num(g.violations.to_string()),
                ]);
            }
        }
        table(
            &mut self.out,
            "batch-size",
            &[
                "node",
                "GPU",
                "CPU p95 %",
                "GPU p95 %",
                "GPU memory p95 %",
                "all under threshold",
                "times fired",
            ],
            &rows,
        );
    }

    fn batch_size_chart(&mut self, details: &BatchSizeDetails) {
        let prefix = |node: &str| {
            if details.nodes.len() > 1 {
                format!("{node} ")
            } else {
                String::new()
            }
        };
        let mut boxes = Vec::new();
        for (node, n) in &details.nodes {
            if let Some(cpu) = &n.cpu {
                boxes.push((format!("{}CPU", prefix(node)), cpu.clone()));
            }
            for (gpu, g) in &n.gpus {
                if let Some(u) = &g.utilization {
                    boxes.push((format!("{}{gpu}", prefix(node)), u.clone()));
                }
                if let Some(m) = &g.memory {
                    boxes.push((format!("{}{gpu} memory", prefix(node)), m.clone()));
                }
            }
        }
        boxes.truncate(18);
        let drawn = charts::box_chart(
            "CPU, GPU and GPU memory use",
            "%",
            &boxes,
            Some((0.0, 100.0)),
        );
        self.chart(
            drawn,
            "Distributions of utilization over the run, as the rule collected them.",
        );
    }
}
