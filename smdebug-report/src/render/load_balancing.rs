//! 11. Load balancing across GPUs.

use crate::charts;
use crate::html::{Cell, table};
use crate::stats;

use super::format::values;
use super::{MAX_SERIES, Page};

impl Page<'_> {
    pub(super) fn load_balancing(&mut self) {
        let many = self.view.many_nodes;
        let bins = 20;
        let gpus: Vec<(String, Vec<u64>)> = self
            .view
            .gpus()
            .filter_map(|g| {
                Some((
                    g.label(many),
                    stats::histogram(values(&g.util?.points), bins, 0.0, 100.0),
                ))
            })
            .filter(|(_, h)| h.iter().any(|&n| n > 0))
            .collect();
        if gpus.len() < 2 {
            self.missing(&format!(
                "Load balancing compares GPUs with each other; {} GPU with utilization data was recorded.",
                gpus.len()
            ));
            self.verdict("LoadBalancing");
            return;
        }
        self.lead("Each GPU's utilization histogram (5% bands), and the Jensen–Shannon distance between every pair: 0 for identical workloads, 1 for disjoint ones.");
        let edges: Vec<f64> = (0..=bins).map(|i| i as f64 * 100.0 / bins as f64).collect();
        let shown: Vec<(String, Vec<u64>)> = gpus.iter().take(MAX_SERIES).cloned().collect();
        let drawn = charts::histogram_chart("Workload per GPU", "utilization (%)", &edges, &shown);
        self.chart(drawn, "Samples per 5% utilization band, per GPU.");
        let mut rows = Vec::new();
        let mut unbalanced = Vec::new();
        for i in 0..gpus.len() {
            for j in i + 1..gpus.len() {
                let Some(d) = stats::js_distance(&gpus[i].1, &gpus[j].1) else {
                    continue;
                };
                if d > 0.5 {
                    unbalanced.push(format!("{} vs {}", gpus[i].0, gpus[j].0));
                }
                rows.push((
                    d,
                    vec![
                        Cell::text(&gpus[i].0),
                        Cell::text(&gpus[j].0),
                        Cell::num(format!("{d:.3}")),
                    ],
                ));
            }
        }
        rows.sort_by(|a, b| b.0.total_cmp(&a.0));
        let rows: Vec<Vec<Cell>> = rows.into_iter().take(28).map(|r| r.1).collect();
        table(
            &mut self.out,
            "load-balance",
            &["GPU", "GPU", "distance"],
            &rows,
        );
        if !unbalanced.is_empty() {
            self.advice(&format!(
                "Workloads differ strongly ({}). Give each GPU an equal share: equal batch sizes per \
                 rank, even data sharding, and no extra work (logging, evaluation) pinned to one rank.",
                unbalanced.join(", ")
            ));
        }
        self.verdict("LoadBalancing");
    }
}
