//! Section 7, GPU utilization: the recorded readings per GPU, each GPU's reading (underused,
//! fluctuating, busy) as LowGPUUtilization judged it. The page judges no GPU itself.

use smdebug_rules::profiler::LowGPUUtilizationParams;
use smdebug_rules::profiler::{GpuUsageState, GpuUtilizationDetails};

use std::collections::BTreeSet;

use crate::charts;
use crate::html::{Cell, table};
use crate::stats::Summary;

use super::format::percentile_bound;
use super::{MAX_SERIES, Page, many};

/// One GPU's row: its readings over the run, and the rule's window and reading.
struct GpuRow {
    label: String,
    node: String,
    /// Every reading the report read.
    readings: Summary,
    histogram: Vec<u64>,
    /// The p95 and p5 of the rule's latest window.
    window: (Option<f64>, Option<f64>),
    /// Times the rule found it underused or fluctuating.
    violations: Option<u64>,
    reading: &'static str,
}

impl Page<'_> {
    pub(super) fn gpu_utilization(&mut self) {
        let rule = self
            .details("LowGPUUtilization")
            .and_then(|d| d.gpu_utilization().cloned());
        let gpus = self.gpu_rows(rule.as_ref());
        if gpus.is_empty() {
            self.missing("No GPU utilization was recorded: the job ran without a GPU, or NVML was not available to the sampler.");
            self.verdict("LowGPUUtilization");
            return;
        }
        self.lead(&format!(
            "Per GPU: distribution of utilization samples (box plots) and how often each \
             utilization band occurred (workload histogram, exact counts). {}",
            percentile_bound()
        ));
        self.gpu_charts(&gpus);
        let LowGPUUtilizationParams {
            threshold_p95: low_p95,
            threshold_p5: low_p5,
            window,
            ..
        } = self.params();
        if rule.is_some() {
            self.lead(&format!(
                "Reading: as the LowGPUUtilization rule judged each GPU over its latest {window} \
                 samples: underused when their p95 is under {low_p95}%, fluctuating when the p95 \
                 is over it while the p5 is under {low_p5}%."
            ));
        } else {
            self.no_result(
                "LowGPUUtilization",
                "The LowGPUUtilization rule has no result for this run, so no GPU is judged \
                 underused or fluctuating; the table shows the recorded readings.",
            );
        }
        let (underused, fluctuating) = self.gpu_table(&gpus);
        let mut advice = Vec::new();
        if !underused.is_empty() {
            advice.push(format!("underused: {}", many::named(&underused)));
        }
        if !fluctuating.is_empty() {
            advice.push(format!("fluctuating: {}", many::named(&fluctuating)));
        }
        if !advice.is_empty() {
            self.advice(&format!(
                "{}. An underused GPU waits for work: increase the batch size, feed data faster (more \
                 loader workers, prefetching) or use a smaller GPU. A fluctuating one idles between \
                 bursts: look for synchronisation points and data stalls in the step.",
                advice.join("; ")
            ));
        }
        self.verdict("LowGPUUtilization");
    }

    /// Every GPU with readings, with the rule's window and reading of it (`-` without the
    /// rule's result).
    fn gpu_rows(&self, rule: Option<&GpuUtilizationDetails>) -> Vec<GpuRow> {
        let many = self.view.many_nodes;
        self.view
            .gpus()
            .filter_map(|g| {
                let u = g.util?;
                let sum = u.values.summary()?;
                let judged = rule.and_then(|r| r.nodes.get(&g.node).and_then(|n| n.get(&g.name)));
                let window = judged.map(|j| (j.window_p95, j.window_p5));
                let violations = judged.map(|j| j.violations);
                let reading = match rule {
                    None => "-",
                    Some(_) => match judged {
                        Some(j) if !j.judged => "not judged",
                        Some(j) => match j.state {
                            Some(GpuUsageState::Underused) => "underused",
                            Some(GpuUsageState::Fluctuating) => "fluctuating",
                            None => "busy",
                        },
                        None => "not judged",
                    },
                };
                Some(GpuRow {
                    label: g.label(many),
                    node: g.node.clone(),
                    readings: sum,
                    histogram: u.percent_histogram(10).unwrap_or_default(),
                    window: window.unwrap_or((None, None)),
                    violations,
                    reading,
                })
            })
            .collect()
    }

    /// The box plots of the first 16 GPUs, and each node's workload histogram.
    fn gpu_charts(&mut self, gpus: &[GpuRow]) {
        let boxes: Vec<(String, Summary)> = gpus
            .iter()
            .take(16)
            .map(|g| (g.label.clone(), g.readings.clone()))
            .collect();
        let drawn = charts::box_chart("GPU utilization", "%", &boxes, Some((0.0, 100.0)));
        self.chart(
            drawn,
            "Box from p25 to p75 with the median, whiskers p5 to p95, dots at min and max.",
        );
        let nodes: BTreeSet<&str> = gpus.iter().map(|g| g.node.as_str()).collect();
        let edges: Vec<f64> = (0..=10).map(|i| f64::from(i) * 10.0).collect();
        for node in nodes {
            let series: Vec<(String, Vec<u64>)> = gpus
                .iter()
                .filter(|g| g.node == node)
                .take(MAX_SERIES)
                .map(|g| (g.label.clone(), g.histogram.clone()))
                .collect();
            let drawn = charts::histogram_chart(
                &format!("GPU workload: {node}"),
                "utilization (%)",
                &edges,
                &series,
            );
            self.chart(
                drawn,
                "Number of samples in each 10% band of utilization, per GPU.",
            );
        }
    }

    /// The GPUs' table, underused and fluctuating ones first (the rest counted by their p95
    /// beyond [`many::MAX_ROWS`]); the underused and the fluctuating ones named for the advice,
    /// with the window the rule judged, as its verdict quotes it.
    fn gpu_table(&mut self, gpus: &[GpuRow]) -> (Vec<String>, Vec<String>) {
        let (mut underused, mut fluctuating) = (Vec::new(), Vec::new());
        let rows: Vec<(f64, Vec<Cell>)> = gpus
            .iter()
            .map(|g| {
                let (l, s) = (&g.label, &g.readings);
                let one = |v: Option<f64>| v.map_or("-".to_owned(), |v| format!("{v:.1}"));
                let (p95, p5) = (one(g.window.0), one(g.window.1));
                // Ranked for the table: underused, then fluctuating, then busy; lower p95 first.
                let rank = match g.reading {
                    "underused" => {
                        underused.push(format!("{l} (p95 {p95}% over the rule's window)"));
                        2.0
                    }
                    "fluctuating" => {
                        fluctuating
                            .push(format!("{l} (p95 {p95}%, p5 {p5}% over the rule's window)"));
                        1.0
                    }
                    _ => 0.0,
                };
                let row = vec![
                    Cell::text(l),
                    Cell::num(format!("{:.1}", s.p5)),
                    Cell::num(format!("{:.1}", s.p50)),
                    Cell::num(format!("{:.1}", s.p95)),
                    Cell::num(format!("{:.1}", s.max)),
                    Cell::num(p95),
                    Cell::num(p5),
                    Cell::num(g.violations.map_or("-".to_owned(), |v| v.to_string())),
                    Cell::text(g.reading),
                ];
                (rank + (100.0 - s.p95) / 1000.0, row)
            })
            .collect();
        let (rows, left_out) = many::top_rows(rows, many::MAX_ROWS);
        table(
            &mut self.out,
            "gpu-util",
            &[
                "GPU",
                "p5 %",
                "p50 %",
                "p95 %",
                "max %",
                "rule's window p95 %",
                "rule's window p5 %",
                "times found underused or fluctuating",
                "reading",
            ],
            &rows,
        );
        if left_out > 0 {
            self.lead(&format!(
                "{} GPUs: the {} listed are the underused and fluctuating ones first, lowest p95 \
                 first; {left_out} more are counted below by their p95.",
                gpus.len(),
                rows.len()
            ));
            let bands: Vec<Vec<Cell>> = many::percent_bands(gpus.iter().map(|g| g.readings.p95))
                .into_iter()
                .map(|(band, n)| vec![Cell::text(band), Cell::num(n.to_string())])
                .collect();
            table(&mut self.out, "gpu-util-bands", &["p95", "GPUs"], &bands);
        }
        (underused, fluctuating)
    }
}
