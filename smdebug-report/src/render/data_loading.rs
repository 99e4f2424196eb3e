//! 13. Data loading.
//!
//! The load times drawn, and Dataloader's own evidence (its thresholds, the workers it counted
//! against the cores, its verdict); the section counts nothing itself.

use smdebug_analysis::stats::Sketch;
use smdebug_core::phase::Phase;
use smdebug_rules::profiler::{DataloaderDetails, WorkerVerdict};

use crate::charts;
use crate::html::{Cell, table};

use super::Page;
use super::format::pct;

const RULE: &str = "Dataloader";

/// A load-time quantile (seconds) in milliseconds for a table cell.
fn ms(seconds: Option<f64>) -> Cell {
    Cell::num(seconds.map_or("-".to_owned(), |s| format!("{:.3}", s * 1e3)))
}

impl Page<'_> {
    pub(super) fn data_loading(&mut self) {
        let mut loads = Sketch::default();
        for p in self.input.profile.phases().values() {
            if p.kind == Phase::DataLoading {
                loads.merge(&p.durations);
            }
        }
        if loads.count() == 0 {
            self.missing("No data-loading spans were recorded. Wrap the fetch of each batch in SpanRecorder::data_loading to see how long the loop waits for data.");
            self.verdict(RULE);
            return;
        }
        self.lead("Time the loop spent waiting for batches, and the data-loading workers the Dataloader rule counted against each node's cores.");
        match self.details(RULE).and_then(|d| d.dataloader().cloned()) {
            Some(details) => self.dataloader_table(&details),
            None => self.no_result(
                RULE,
                "The Dataloader rule's findings were not given, so the workers were not counted.",
            ),
        }
        if let Some(all) = loads.summary() {
            let bins = 30;
            let (lo, hi, edges) = all.bin_edges(bins);
            let series = vec![("data loading".to_owned(), loads.histogram(bins, lo, hi))];
            let edges: Vec<f64> = edges.iter().map(|e| e / 1000.0).collect();
            let drawn = charts::histogram_chart(
                "Data-loading times",
                "load duration (ms)",
                &edges,
                &series,
            );
            self.chart(drawn, "How many batch loads took how long, all workers (counted from a quantile sketch: a load within 1% of a bin edge may be counted in the bin beside it).");
        }
        self.verdict(RULE);
    }

    fn dataloader_table(&mut self, details: &DataloaderDetails) {
        self.lead(&format!(
            "Fewer workers than {}% of the cores are too few when loading takes {}% of the loop or more, more than {}% too many.",
            details.min_threshold, details.min_loading_percent, details.max_threshold
        ));
        let mut rows = Vec::new();
        let mut heavy = Vec::new();
        for (node, n) in &details.nodes {
            if n.training_loop_share_loading.is_some_and(|s| s > 0.2) {
                heavy.push(node.clone());
            }
            let load = n.load_time_s.as_ref();
            rows.push(vec![
                Cell::text(node),
                Cell::num(n.data_loading_spans.to_string()),
                Cell::num(format!("{:.3}", n.data_loading_total_s)),
                Cell::num(n.training_loop_share_loading.map_or("-".into(), pct)),
                ms(load.map(|s| s.p50)),
                ms(load.map(|s| s.p95)),
                Cell::num(n.workers.to_string()),
                Cell::text(&n.workers_from),
                Cell::num(if n.cores > 0 {
                    n.cores.to_string()
                } else {
                    "-".into()
                }),
                Cell::text(format!("{} to {}", n.min_workers, n.max_workers)),
                Cell::text(match n.pin_memory {
                    Some(true) => "yes",
                    Some(false) => "no",
                    None => "not recorded",
                }),
                Cell::text(match n.verdict {
                    Some(WorkerVerdict::TooFew) => "too few",
                    Some(WorkerVerdict::TooMany) => "too many",
                    None if n.cores == 0 || n.data_loading_spans == 0 => "not judged",
                    None if (n.workers as f64) < n.min_workers => {
                        "few, but loading is not what holds the loop back"
                    }
                    None => "within the limits",
                }),
            ]);
        }
        table(
            &mut self.out,
            "data-loading",
            &[
                "node",
                "loads",
                "total s",
                "share of the loop",
                "p50 ms",
                "p95 ms",
                "workers",
                "counted from",
                "cores",
                "workers allowed",
                "pinned memory",
                "verdict",
            ],
            &rows,
        );
        self.pin_memory_finding(details);
        if !heavy.is_empty() {
            self.advice(&format!(
                "Waiting for data takes more than 20% of the training loop on {}. Load in parallel \
                 and ahead of time: more loader workers (up to about the number of cores), \
                 prefetching, pinned memory for host-to-GPU copies, and a faster storage format.",
                heavy.join(", ")
            ));
        }
    }

    /// The loaders that said they do not pin memory (`pin_memory` on their data-loading spans,
    /// as the Dataloader rule recorded it): a finding, worded for a job with or without GPUs.
    fn pin_memory_finding(&mut self, details: &DataloaderDetails) {
        let unpinned: Vec<&str> = details
            .nodes
            .iter()
            .filter(|(_, n)| n.pin_memory == Some(false))
            .map(|(node, _)| node.as_str())
            .collect();
        if unpinned.is_empty() {
            return;
        }
        let gpus = self.view.gpus().next().is_some();
        let text = format!(
            "Pinned memory: the data loader on {} does not pin its batches (pin_memory is off). {}",
            unpinned.join(", "),
            if gpus {
                "Batches copied to a GPU from pinned (page-locked) memory copy faster and can \
                 overlap with compute; turn pin_memory on in the data loader."
            } else {
                "No GPU was recorded in this job, so there is no host-to-GPU copy for pinned \
                 memory to speed up; it matters once the batches go to a GPU."
            }
        );
        let _ = std::fmt::Write::write_fmt(
            &mut self.out,
            format_args!(
                "<p class=\"finding pin-memory\">{}</p>",
                crate::html::escape(&text)
            ),
        );
    }
}
