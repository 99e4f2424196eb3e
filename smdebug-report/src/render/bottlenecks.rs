//! 9, 10. CPU and I/O bottlenecks, judged with CPUBottleneck's and IOBottleneck's parameters.

use std::collections::BTreeMap;

use crate::charts::{self, Series, XAxis};
use crate::html::{Cell, table};
use crate::stats::Summary;

use super::Page;
use super::format::{contains, merged, nearest, pct, values};
use super::view::NodeView;

/// Which bottleneck a section is about.
enum Bottleneck {
    Cpu,
    Io,
}

impl Page<'_> {
    pub(super) fn cpu_bottlenecks(&mut self) {
        self.bottleneck(Bottleneck::Cpu);
    }

    pub(super) fn io_bottlenecks(&mut self) {
        self.bottleneck(Bottleneck::Io);
    }

    fn bottleneck(&mut self, kind: Bottleneck) {
        let (rule, what, busy_param, busy_label) = match kind {
            Bottleneck::Cpu => (
                "CPUBottleneck",
                "CPU utilization",
                "cpu_threshold",
                "CPU busy",
            ),
            Bottleneck::Io => ("IOBottleneck", "I/O wait", "io_threshold", "I/O wait high"),
        };
        let busy = self.param(rule, busy_param);
        let gpu_idle = self.param(rule, "gpu_threshold");
        let series_of = |n: &NodeView| -> Vec<(u64, f64)> {
            match kind {
                Bottleneck::Cpu => n.cpu.clone(),
                Bottleneck::Io => n.io_wait.clone(),
            }
        };
        if self.view.nodes.iter().all(|n| series_of(n).is_empty()) {
            self.missing(&format!(
                "No {what} was recorded, so this check has nothing to look at."
            ));
            self.verdict(rule);
            return;
        }
        self.lead(&format!(
            "A sample is a bottleneck when the node's GPUs average under {gpu_idle}% utilization \
             while {what} is over {busy}%: the GPU waits on the {}. Each {what} sample is paired \
             with the GPU sample nearest in time.",
            match kind {
                Bottleneck::Cpu => "CPU",
                Bottleneck::Io => "disk or network",
            }
        ));
        let mut phase_intervals: BTreeMap<&str, Vec<(u64, u64)>> = BTreeMap::new();
        {
            let mut by_phase: BTreeMap<&str, Vec<(u64, u64)>> = BTreeMap::new();
            for s in &self.input.spans {
                by_phase
                    .entry(s.phase.as_str())
                    .or_default()
                    .push((s.start_us, s.end_us));
            }
            for (p, v) in by_phase {
                phase_intervals.insert(p, merged(v.into_iter()));
            }
        }
        let mut rows = Vec::new();
        let mut phase_hits: BTreeMap<&str, u64> = BTreeMap::new();
        let (mut total_bottleneck, mut total_paired) = (0u64, 0u64);
        let mut slices = [0f64; 3];
        let mut any_gpu = false;
        let mut worst: Vec<(String, f64)> = Vec::new();
        for i in 0..self.view.nodes.len() {
            let n = &self.view.nodes[i];
            let own = series_of(n);
            if own.is_empty() {
                continue;
            }
            let p95 = Summary::of(values(&own)).map_or(f64::NAN, |s| s.p95);
            if n.gpu_mean.is_empty() {
                rows.push(vec![
                    Cell::text(&n.node),
                    Cell::num(format!("{p95:.1}")),
                    Cell::num("-"),
                    Cell::num("-"),
                    Cell::text("no GPU metrics"),
                ]);
                continue;
            }
            any_gpu = true;
            let (mut paired, mut hits) = (0u64, 0u64);
            for &(t, v) in &own {
                let Some(g) = nearest(&n.gpu_mean, t) else {
                    continue;
                };
                paired += 1;
                if g < gpu_idle && v > busy {
                    hits += 1;
                    slices[0] += 1.0;
                    for (p, iv) in &phase_intervals {
                        if contains(iv, t) {
                            *phase_hits.entry(p).or_default() += 1;
                        }
                    }
                } else if g < gpu_idle {
                    slices[1] += 1.0;
                } else {
                    slices[2] += 1.0;
                }
            }
            total_paired += paired;
            total_bottleneck += hits;
            let share = if paired > 0 {
                hits as f64 / paired as f64
            } else {
                f64::NAN
            };
            worst.push((n.node.clone(), share));
            rows.push(vec![
                Cell::text(&n.node),
                Cell::num(format!("{p95:.1}")),
                Cell::num(paired.to_string()),
                Cell::num(hits.to_string()),
                Cell::text(pct(share)),
            ]);
        }
        table(
            &mut self.out,
            "bottleneck",
            &[
                "node",
                &format!("{what} p95 %"),
                "paired samples",
                "bottleneck samples",
                "share",
            ],
            &rows,
        );
        if !any_gpu {
            self.missing(&format!(
                "No GPU metrics were recorded: this check compares GPU idle time with {what}, so it cannot tell whether the GPU waited."
            ));
        } else {
            let drawn = charts::pie_chart(
                &format!("GPU idle and {busy_label}"),
                &[
                    (format!("GPU idle, {busy_label}"), slices[0]),
                    ("GPU idle, other reason".into(), slices[1]),
                    ("GPU busy".into(), slices[2]),
                ],
            );
            self.chart(drawn, "Share of paired samples in each state, all nodes.");
            let first = self
                .view
                .nodes
                .iter()
                .find(|n| !n.gpu_mean.is_empty() && !series_of(n).is_empty());
            if let Some(n) = first {
                let lines = vec![
                    Series {
                        label: what.into(),
                        points: self.view.timeline(&series_of(n)),
                    },
                    Series {
                        label: "GPU mean utilization".into(),
                        points: self.view.timeline(&n.gpu_mean),
                    },
                ];
                let drawn = charts::line_chart(
                    &format!("{what} and GPU utilization: {}", n.node),
                    XAxis::Elapsed,
                    "%",
                    &lines,
                    Some((0.0, 100.0)),
                );
                self.chart(drawn, "Both over time on the same node.");
            }
            if total_bottleneck > 0 {
                let mut hits: Vec<(&str, u64)> = phase_hits.into_iter().collect();
                hits.sort_by_key(|h| std::cmp::Reverse(h.1));
                if hits.is_empty() {
                    self.lead("No span was running during the bottleneck samples: they fall outside the recorded training loop.");
                } else {
                    self.lead("What the training loop was doing during bottleneck samples (a sample can fall in several nested phases):");
                    let rows: Vec<Vec<Cell>> = hits
                        .iter()
                        .map(|(p, n)| {
                            vec![
                                Cell::text(*p),
                                Cell::num(n.to_string()),
                                Cell::num(pct(*n as f64 / total_bottleneck as f64)),
                            ]
                        })
                        .collect();
                    table(
                        &mut self.out,
                        "bottleneck-phases",
                        &["phase", "bottleneck samples", "share"],
                        &rows,
                    );
                }
                let share = total_bottleneck as f64 / total_paired.max(1) as f64;
                self.advice(&match kind {
                    Bottleneck::Cpu => format!(
                        "In {} of the samples the GPU idled while the CPU was saturated. Take work off \
                         the CPU: more data-loader workers, lighter or precomputed augmentation, \
                         decoding on the GPU, fewer Python-side conversions per batch.",
                        pct(share)
                    ),
                    Bottleneck::Io => format!(
                        "In {} of the samples the GPU idled while the CPU waited on I/O. Read data \
                         faster: larger sequential files (sharded records instead of many small \
                         files), local copies or caching of remote data, prefetching.",
                        pct(share)
                    ),
                });
            }
        }
        self.verdict(rule);
    }
}
