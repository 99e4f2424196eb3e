//! Section 11, load balancing across GPUs: LoadBalancing's own evidence, its per-GPU
//! utilization histograms and the distances it measured between the GPUs of each node. The page
//! computes no distance itself.

use smdebug_rules::profiler::LoadBalancingDetails;
use smdebug_rules::profiler::LoadBalancingParams;

use crate::charts;
use crate::html::{Cell, table};

use super::{MAX_SERIES, Page};

/// Largest distances listed.
const TOP: usize = 28;

/// Comparisons named in the advice at most.
const EXAMPLES: usize = 8;

/// Bins of the histogram drawn without the rule's result (its 2 % bins).
const BINS: usize = 50;

impl Page<'_> {
    pub(super) fn load_balancing(&mut self) {
        const RULE: &str = "LoadBalancing";
        let with_util = self.view.gpus().filter(|g| g.util.is_some()).count();
        if with_util < 2 {
            self.missing(&format!(
                "Load balancing compares GPUs with each other; {with_util} GPU with utilization data was recorded."
            ));
            self.verdict(RULE);
            return;
        }
        let LoadBalancingParams {
            threshold,
            patience,
        } = self.params();
        self.lead(&format!(
            "The {RULE} rule's evidence: each GPU's utilization histogram (2% bins, after its \
             first {patience} samples), and the Jensen–Shannon distance between every two GPUs \
             of a node: 0 for identical workloads, up to 0.83 for disjoint ones. Two GPUs more \
             than {threshold} apart carry different loads."
        ));
        let Some(details) = self.details(RULE).and_then(|d| d.load_balancing().cloned()) else {
            self.no_result(
                RULE,
                &format!(
                    "The {RULE} rule has no result for this run, so no distance was measured; the \
                 chart shows the recorded utilization only."
                ),
            );
            let many = self.view.many_nodes;
            let gpus: Vec<(String, Vec<u64>)> = self
                .view
                .gpus()
                .filter_map(|g| {
                    let h = g.util?.percent_histogram(BINS)?;
                    Some((g.label(many), h))
                })
                .take(MAX_SERIES)
                .collect();
            self.workload_chart(&gpus, 100.0 / BINS as f64);
            self.verdict(RULE);
            return;
        };
        let many = details.nodes.len() > 1;
        let label = |node: &str, gpu: &str| {
            if many {
                format!("{node} {gpu}")
            } else {
                gpu.to_owned()
            }
        };
        let gpus: Vec<(String, Vec<u64>)> = details
            .nodes
            .iter()
            .flat_map(|(node, n)| {
                n.workloads
                    .iter()
                    .map(move |(g, w)| (label(node, g), w.histogram.clone()))
            })
            .take(MAX_SERIES)
            .collect();
        let width = details
            .nodes
            .values()
            .next()
            .map_or(100.0 / BINS as f64, |n| n.bin_width_percent);
        self.workload_chart(&gpus, width);
        self.distance_table(&details, threshold, &label);
        self.verdict(RULE);
    }

    fn workload_chart(&mut self, gpus: &[(String, Vec<u64>)], width: f64) {
        let Some(bins) = gpus.first().map(|g| g.1.len()) else {
            return;
        };
        let edges: Vec<f64> = (0..=bins).map(|i| i as f64 * width).collect();
        let drawn = charts::histogram_chart("Workload per GPU", "utilization (%)", &edges, gpus);
        self.chart(
            drawn,
            &format!("Samples per {width}% utilization band, per GPU."),
        );
    }

    /// The rule's largest distances, and advice when some pair is over the threshold.
    fn distance_table(
        &mut self,
        details: &LoadBalancingDetails,
        threshold: f64,
        label: &dyn Fn(&str, &str) -> String,
    ) {
        let mut pairs: Vec<(&str, &smdebug_rules::profiler::GpuDistance)> =
            details.distances().collect();
        if pairs.is_empty() {
            self.lead(
                "No two GPUs of a node had enough samples to be compared (50 each after patience).",
            );
            return;
        }
        pairs.sort_by(|a, b| b.1.distance.total_cmp(&a.1.distance));
        let over = pairs.iter().filter(|p| p.1.distance > threshold).count();
        let examples: Vec<String> = pairs
            .iter()
            .filter(|p| p.1.distance > threshold)
            .take(EXAMPLES)
            .map(|(node, d)| format!("{} vs {}", label(node, &d.gpus[0]), label(node, &d.gpus[1])))
            .collect();
        let rows: Vec<Vec<Cell>> = pairs
            .iter()
            .take(TOP)
            .map(|(node, d)| {
                vec![
                    Cell::text(label(node, &d.gpus[0])),
                    Cell::text(label(node, &d.gpus[1])),
                    Cell::num(format!("{:.3}", d.distance)),
                ]
            })
            .collect();
        self.lead(&format!(
            "{} pair(s) compared, {} over {threshold}; the largest distances:",
            pairs.len(),
            over
        ));
        table(
            &mut self.out,
            "load-balance",
            &["GPU", "GPU", "distance"],
            &rows,
        );
        if over > 0 {
            let more = over - examples.len();
            let more = if more > 0 {
                format!(" and {more} more")
            } else {
                String::new()
            };
            self.advice(&format!(
                "Workloads differ strongly ({}{more}). Give each GPU an equal share: equal batch sizes per \
                 rank, even data sharding, and no extra work (logging, evaluation) pinned to one rank.",
                examples.join(", ")
            ));
        }
    }
}
