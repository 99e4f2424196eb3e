//! 6. Step durations per node, worker and mode.

use std::collections::BTreeMap;

use smdebug_core::Mode;
use smdebug_profiler::reader::Span;

use crate::charts::{self, Series, XAxis, clock};
use crate::html::{Cell, table};
use crate::stats::{self, Summary};

use super::format::{mode_name, ms};
use super::{MAX_SERIES, Page};

/// Steps are grouped by node, worker and mode.
type StepGroup = (String, Option<u32>, Option<Mode>);

impl Page<'_> {
    pub(super) fn step_durations(&mut self) {
        if self.view.steps.is_empty() {
            self.missing("No step spans were recorded, so there are no step durations. Wrap each step in SpanRecorder::step.");
            self.verdict("StepOutlier");
            return;
        }
        self.lead("Per node and worker (one worker per GPU in data-parallel jobs) and mode. Outliers are steps longer than the group's mean plus three standard deviations.");
        let mut groups: BTreeMap<StepGroup, Vec<&Span>> = BTreeMap::new();
        for s in &self.view.steps {
            groups
                .entry((s.node.clone(), s.worker, s.mode))
                .or_default()
                .push(s);
        }
        let label = |node: &str, worker: Option<u32>| match worker {
            Some(w) => format!("{node} worker {w}"),
            None => node.to_owned(),
        };
        let mut rows = Vec::new();
        let mut outliers: Vec<(f64, String, &Span, f64)> = Vec::new();
        for ((node, worker, mode), spans) in &groups {
            let Some(sum) = Summary::of(spans.iter().map(|s| s.duration_us() as f64)) else {
                continue;
            };
            let threshold = sum.mean + 3.0 * sum.std;
            let slow: Vec<&&Span> = spans
                .iter()
                .filter(|s| s.duration_us() as f64 > threshold && sum.std > 0.0)
                .collect();
            for s in &slow {
                outliers.push((s.duration_us() as f64, label(node, *worker), s, threshold));
            }
            rows.push(vec![
                Cell::text(label(node, *worker)),
                Cell::text(mode_name(*mode)),
                Cell::num(sum.count.to_string()),
                Cell::num(ms(sum.mean)),
                Cell::num(ms(sum.std)),
                Cell::num(ms(sum.min)),
                Cell::num(ms(sum.p50)),
                Cell::num(ms(sum.p95)),
                Cell::num(ms(sum.p99)),
                Cell::num(ms(sum.max)),
                Cell::num(slow.len().to_string()),
            ]);
        }
        table(
            &mut self.out,
            "step-stats",
            &[
                "node / worker",
                "mode",
                "steps",
                "mean ms",
                "stddev ms",
                "min ms",
                "p50 ms",
                "p95 ms",
                "p99 ms",
                "max ms",
                "outliers",
            ],
            &rows,
        );
        // The histogram and timeline show the mode with the most steps.
        let mut count_per_mode: BTreeMap<Option<Mode>, usize> = BTreeMap::new();
        for ((_, _, m), v) in &groups {
            *count_per_mode.entry(*m).or_default() += v.len();
        }
        let main_mode = count_per_mode
            .iter()
            .max_by_key(|(_, n)| **n)
            .and_then(|(m, _)| *m);
        let shown: Vec<(String, Vec<&Span>)> = groups
            .iter()
            .filter(|((_, _, m), _)| *m == main_mode)
            .take(MAX_SERIES)
            .map(|((n, w, _), v)| (label(n, *w), v.clone()))
            .collect();
        let durations: Vec<f64> = shown
            .iter()
            .flat_map(|(_, v)| v.iter().map(|s| s.duration_us() as f64 / 1000.0))
            .collect();
        if let Some(all) = Summary::of(durations.iter().copied()) {
            let bins = 30;
            let (lo, hi, edges) = all.bin_edges(bins);
            let series: Vec<(String, Vec<u64>)> = shown
                .iter()
                .map(|(l, v)| {
                    (
                        l.clone(),
                        stats::histogram(
                            v.iter().map(|s| s.duration_us() as f64 / 1000.0),
                            bins,
                            lo,
                            hi,
                        ),
                    )
                })
                .collect();
            let mode = mode_name(main_mode);
            let drawn = charts::histogram_chart(
                &format!("Step durations, {mode}"),
                "step duration (ms)",
                &edges,
                &series,
            );
            self.chart(drawn, "How many steps took how long, per node and worker.");
            let lines: Vec<Series> = shown
                .iter()
                .map(|(l, v)| Series {
                    label: l.clone(),
                    points: v
                        .iter()
                        .map(|s| {
                            (
                                self.view.elapsed(s.start_us),
                                s.duration_us() as f64 / 1000.0,
                            )
                        })
                        .collect(),
                })
                .collect();
            let drawn = charts::line_chart(
                &format!("Step duration over time, {mode}"),
                XAxis::Elapsed,
                "ms",
                &lines,
                None,
            );
            self.chart(drawn, "Duration of each step at the time it started.");
        }
        self.h3("Outliers");
        if outliers.is_empty() {
            self.lead("No step took longer than its group's mean plus three standard deviations.");
        } else {
            outliers.sort_by(|a, b| b.0.total_cmp(&a.0));
            self.lead(&format!(
                "{} outlier step(s); the slowest ten:",
                outliers.len()
            ));
            let rows: Vec<Vec<Cell>> = outliers
                .iter()
                .take(10)
                .map(|(d, l, s, th)| {
                    vec![
                        Cell::text(l),
                        Cell::text(mode_name(s.mode)),
                        Cell::num(s.step.map_or("-".into(), |x| x.to_string())),
                        Cell::text(clock(self.view.elapsed(s.start_us))),
                        Cell::num(ms(*d)),
                        Cell::num(ms(*th)),
                    ]
                })
                .collect();
            table(
                &mut self.out,
                "step-outliers",
                &[
                    "node / worker",
                    "mode",
                    "step",
                    "started at",
                    "duration ms",
                    "threshold ms",
                ],
                &rows,
            );
            self.advice("Look at what ran at those times: checkpoints, evaluation, garbage collection, a slow batch or a stalled data loader. If the slow steps are periodic, move that work off the training loop or make it asynchronous.");
        }
        self.verdict("StepOutlier");
    }
}
