//! 12. GPU memory.

use std::collections::BTreeSet;

use crate::charts::{self, Series, XAxis};
use crate::html::{Cell, table};
use smdebug_profiler::reader::MetricSeries;

use super::format::values;
use super::{MAX_SERIES, Page, many};

impl Page<'_> {
    pub(super) fn gpu_memory(&mut self) {
        let many = self.view.many_nodes;
        let gpus: Vec<(String, String, &MetricSeries)> = self
            .view
            .gpus()
            .filter_map(|g| Some((g.label(many), g.node.clone(), g.mem?)))
            .filter(|g| !g.2.points.is_empty())
            .collect();
        if gpus.is_empty() {
            self.missing("No GPU memory was recorded: the job ran without a GPU, or NVML was not available to the sampler.");
            self.verdict("GPUMemoryIncrease");
            return;
        }
        self.lead("GPU memory in use, percent of capacity. Growth is the rise of the 10-sample moving average above its lowest earlier value; steady growth points to a leak (tensors kept alive across steps).");
        let nodes: BTreeSet<&str> = gpus.iter().map(|g| g.1.as_str()).collect();
        for node in nodes {
            let lines: Vec<Series> = gpus
                .iter()
                .filter(|g| g.1 == node)
                .take(MAX_SERIES)
                .map(|g| Series {
                    label: g.0.clone(),
                    points: self.view.timeline(&g.2.points),
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
        }
        let mut growing = Vec::new();
        let rows: Vec<(f64, Vec<Cell>)> = gpus
            .iter()
            .map(|(l, _, s)| {
                let v: Vec<f64> = values(&s.points).collect();
                let window = 10.min(v.len()).max(1);
                let mut growth: f64 = 0.0;
                let mut lowest = f64::INFINITY;
                let mut sum: f64 = v[..window].iter().sum();
                for i in window..=v.len() {
                    if i > window {
                        sum += v[i - 1] - v[i - 1 - window];
                    }
                    let avg = sum / window as f64;
                    lowest = lowest.min(avg);
                    growth = growth.max(avg - lowest);
                }
                if growth > 5.0 {
                    growing.push(format!("{l} (+{growth:.1} points)"));
                }
                let head = v[..window].iter().sum::<f64>() / window as f64;
                let tail = v[v.len() - window..].iter().sum::<f64>() / window as f64;
                let max = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                let row = vec![
                    Cell::text(l),
                    Cell::num(format!("{head:.1}")),
                    Cell::num(format!("{tail:.1}")),
                    Cell::num(format!("{max:.1}")),
                    Cell::num(format!("{growth:.1}")),
                ];
                // The most growth first, then the fullest.
                (growth + max / 1000.0, row)
            })
            .collect();
        let (rows, left_out) = many::top_rows(rows, many::MAX_ROWS);
        table(
            &mut self.out,
            "gpu-memory",
            &[
                "GPU",
                "first 10 samples %",
                "last 10 samples %",
                "max %",
                "growth (points)",
            ],
            &rows,
        );
        if left_out > 0 {
            self.lead(&format!(
                "{} GPUs: the {} with the most growth are listed; {left_out} more are left out.",
                gpus.len(),
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
        self.verdict("GPUMemoryIncrease");
    }
}
