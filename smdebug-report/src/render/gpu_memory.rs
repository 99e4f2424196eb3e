//! 12. GPU memory.
//!
//! The series drawn, and GPUMemoryIncrease's own evidence (its limit, the moving averages it
//! compared, the rises it flagged); the section judges nothing itself.

use std::collections::BTreeSet;

use crate::charts::{self, Curve, XAxis};
use crate::html::{Cell, table};
use smdebug_analysis::digest::SeriesDigest;

use super::{MAX_SERIES, Page, many};

const RULE: &str = "GPUMemoryIncrease";

impl Page<'_> {
    pub(super) fn gpu_memory(&mut self) {
        let many = self.view.many_nodes;
        let gpus: Vec<(String, String, &SeriesDigest)> = self
            .view
            .gpus()
            .filter_map(|g| Some((g.label(many), g.node.clone(), g.mem?)))
            .filter(|g| !g.2.line.is_empty())
            .collect();
        if gpus.is_empty() {
            self.missing("No GPU: no GPU memory was recorded, so there is nothing to draw. The job ran without a GPU, or NVML was not available to the sampler.");
            self.verdict(RULE);
            return;
        }
        self.lead("GPU memory in use, percent of capacity. GPUMemoryIncrease compares the moving average of each GPU's memory use with its lowest earlier value; steady growth points to a leak (tensors kept alive across steps).");
        let nodes: BTreeSet<&str> = gpus.iter().map(|g| g.1.as_str()).collect();
        for node in nodes {
            let lines: Vec<Curve> = gpus
                .iter()
                .filter(|g| g.1 == node)
                .take(MAX_SERIES)
                .map(|g| Curve {
                    label: g.0.clone(),
                    slices: self.view.timeline(&g.2.line, 1.0),
                })
                .collect();
            let drawn = charts::line_chart(
                &format!("GPU memory used: {node}"),
                XAxis::Elapsed,
                "% used",
                &lines,
                Some((0.0, 100.0)),
            );
            self.chart(drawn, "Per GPU over time.");
            let boxes: Vec<(String, crate::stats::Summary)> = gpus
                .iter()
                .filter(|g| g.1 == node)
                .take(64)
                .filter_map(|g| Some((g.0.clone(), g.2.values.summary()?)))
                .collect();
            if !boxes.is_empty() {
                let drawn = charts::box_chart(
                    &format!("GPU memory per GPU: {node}"),
                    "% used",
                    &boxes,
                    Some((0.0, 100.0)),
                );
                self.chart(drawn, "Per GPU over the whole job: box from p25 to p75 with the median, whiskers p5 to p95 (each within 1% of the value at its rank), dots at min and max (exact).");
                let rows: Vec<Vec<Cell>> = boxes
                    .iter()
                    .map(|(gpu, s)| {
                        let mut row = vec![Cell::text(node), Cell::text(gpu)];
                        row.extend(
                            [s.min, s.p5, s.p25, s.p50, s.p75, s.p95, s.max]
                                .map(|v| Cell::num(format!("{v:.1}"))),
                        );
                        row.push(Cell::num(s.count.to_string()));
                        row
                    })
                    .collect();
                table(
                    &mut self.out,
                    "gpu-memory-spread",
                    &[
                        "node", "GPU", "min %", "p5 %", "p25 %", "p50 %", "p75 %", "p95 %",
                        "max %", "samples",
                    ],
                    &rows,
                );
            }
        }
        self.gpu_memory_table();
        self.verdict(RULE);
    }

    fn gpu_memory_table(&mut self) {
        let Some(details) = self.details(RULE).and_then(|d| d.gpu_memory().cloned()) else {
            self.no_result(
                RULE,
                "The GPUMemoryIncrease rule's findings were not given, so no growth was judged.",
            );
            return;
        };
        let many_nodes = details.nodes.len() > 1;
        let one = |v: Option<f64>| Cell::num(v.map_or("-".to_owned(), |v| format!("{v:.1}")));
        let mut growing = Vec::new();
        let mut rows: Vec<(f64, Vec<Cell>)> = Vec::new();
        for (node, gpus) in &details.nodes {
            for (gpu, g) in gpus {
                let label = if many_nodes {
                    format!("{node} {gpu}")
                } else {
                    gpu.clone()
                };
                if !g.increases.is_empty() {
                    growing.push(format!("{label} (+{:.1} points)", g.largest_rise));
                }
                let max = g.memory.as_ref().map(|m| m.max);
                let row = vec![
                    Cell::text(&label),
                    one(g.baseline),
                    one(g.average),
                    one(max),
                    Cell::num(format!("{:.1}", g.largest_rise)),
                    Cell::num(g.increases.len().to_string()),
                ];
                // The most growth first, then the fullest.
                rows.push((g.largest_rise + max.unwrap_or(0.0) / 1000.0, row));
            }
        }
        let total = rows.len();
        let (rows, left_out) = many::top_rows(rows, many::MAX_ROWS);
        self.lead(&format!(
            "A rise of more than {} points of the {}-sample moving average above its baseline              is an increase.",
            details.increase, details.window
        ));
        table(
            &mut self.out,
            "gpu-memory",
            &[
                "GPU",
                "baseline average %",
                "latest average %",
                "max %",
                "largest rise (points)",
                "increases flagged",
            ],
            &rows,
        );
        if left_out > 0 {
            self.lead(&format!(
                "{total} GPUs: the {} with the most growth are listed; {left_out} more are left out.",
                rows.len()
            ));
        }
        if !growing.is_empty() {
            self.advice(&format!(
                "GPU memory grows on {}. Look for tensors kept across steps (losses accumulated \
                 with their graphs, growing caches or lists of outputs); detach or free them.",
                many::named(&growing)
            ));
        }
    }
}
