//! Section 6, step durations: StepOutlier's own figures per node and mode (its summary, limit
//! and outlier steps), and the spans per node and worker drawn with those outliers marked. The
//! page judges no outlier itself.

use smdebug_rules::profiler::StepOutlierParams;
use std::collections::BTreeMap;

use smdebug_analysis::digest::{StepDigest, StepKey};
use smdebug_analysis::stats::{Sketch, Summary};
use smdebug_core::Mode;
use smdebug_rules::profiler::StepOutlierDetails;

use crate::charts::{self, Curve, Series, XAxis};
use crate::html::{Cell, table};
use smdebug_analysis::time::clock;

use super::format::{mode_name, ms, percentile_bound};
use super::{MAX_SERIES, Page};

/// How many outlier steps the table lists.
const OUTLIERS_LISTED: usize = 10;

/// The heads of the duration columns both step tables show, in [`duration_cells`]' order.
const DURATION_HEADS: [&str; 7] = [
    "mean ms",
    "stddev ms",
    "min ms",
    "p50 ms",
    "p95 ms",
    "p99 ms",
    "max ms",
];

/// A summary of step durations as the tables' duration columns, in milliseconds:
/// `us_per_unit` microseconds make one of the summary's units (1e6 for seconds).
fn duration_cells(d: &Summary, us_per_unit: f64) -> [Cell; 7] {
    [d.mean, d.std, d.min, d.p50, d.p95, d.p99, d.max].map(|v| Cell::num(ms(v * us_per_unit)))
}

impl Page<'_> {
    pub(super) fn step_durations(&mut self) {
        const RULE: &str = "StepOutlier";
        if self.view.step_count() == 0 {
            self.missing("No step spans were recorded, so there are no step durations. Wrap each step in SpanRecorder::step.");
            self.verdict(RULE);
            return;
        }
        let params = self.params::<StepOutlierParams>();
        let (k, allowed) = (params.stddev, params.n_outliers);
        let details = self.details(RULE).and_then(|d| d.step_outliers().cloned());
        self.lead(&format!(
            "Per node and mode, as the {RULE} rule judged them: a step is an outlier when it is \
             longer than its node and mode's mean plus {k} standard deviations, and the rule \
             fires when a node and mode has more than {allowed} outliers."
        ));
        let groups = self.view.steps;
        match &details {
            Some(d) => self.step_table(d),
            None => {
                self.no_result(
                    RULE,
                    &format!(
                        "The {RULE} rule has no result for this run, so no step is judged an \
                     outlier; the table shows the step spans per node and worker."
                    ),
                );
                self.span_table(groups);
            }
        }
        self.step_charts(groups, details.as_ref());
        if let Some(d) = &details {
            self.outlier_table(d);
        }
        self.verdict(RULE);
    }

    /// The rule's figures, one row per node and mode.
    fn step_table(&mut self, details: &StepOutlierDetails) {
        let mut rows = Vec::new();
        for (node, modes) in &details.nodes {
            for (mode, s) in modes {
                let mut row = vec![
                    Cell::text(node),
                    Cell::text(mode),
                    Cell::num(s.steps.to_string()),
                ];
                row.extend(duration_cells(&s.duration_s, 1e6));
                row.push(Cell::num(ms(s.outlier_limit_s * 1e6)));
                row.push(Cell::num(s.outliers.to_string()));
                rows.push(row);
            }
        }
        let heads = [
            &["node", "mode", "steps"][..],
            &DURATION_HEADS,
            &["outlier limit ms", "outliers"],
        ];
        table(&mut self.out, "step-stats", &heads.concat(), &rows);
    }

    /// The step spans' durations per node, worker and mode, when the rule did not run.
    fn span_table(&mut self, groups: &BTreeMap<StepKey, StepDigest>) {
        self.lead(&percentile_bound());
        let mut rows = Vec::new();
        for ((node, worker, mode), steps) in groups {
            let Some(sum) = steps.durations.summary() else {
                continue;
            };
            let mut row = vec![
                Cell::text(worker_label(node, *worker)),
                Cell::text(mode_name(*mode)),
                Cell::num(sum.count.to_string()),
            ];
            row.extend(duration_cells(&sum, 1.0));
            rows.push(row);
        }
        let heads = [&["node / worker", "mode", "steps"][..], &DURATION_HEADS];
        table(&mut self.out, "step-stats", &heads.concat(), &rows);
    }

    /// The histogram and timeline of the mode with the most steps, per node and worker, the
    /// rule's outlier steps of that mode marked on the timeline.
    fn step_charts(
        &mut self,
        groups: &BTreeMap<StepKey, StepDigest>,
        details: Option<&StepOutlierDetails>,
    ) {
        let mut count_per_mode: BTreeMap<Option<Mode>, u64> = BTreeMap::new();
        for ((_, _, m), v) in groups {
            *count_per_mode.entry(*m).or_default() += v.durations.count();
        }
        let main_mode = count_per_mode
            .iter()
            .max_by_key(|(_, n)| **n)
            .and_then(|(m, _)| *m);
        let shown: Vec<(String, &StepDigest)> = groups
            .iter()
            .filter(|((_, _, m), _)| *m == main_mode)
            .take(MAX_SERIES)
            .map(|((n, w, _), v)| (worker_label(n, *w), v))
            .collect();
        let mut all = Sketch::default();
        for (_, v) in &shown {
            all.merge(&v.durations);
        }
        let Some(all) = all.summary() else {
            return;
        };
        let bins = 30;
        // Durations are held in µs and drawn in ms.
        let (lo, hi, edges) = all.bin_edges(bins);
        let edges: Vec<f64> = edges.iter().map(|e| e / 1000.0).collect();
        let series: Vec<(String, Vec<u64>)> = shown
            .iter()
            .map(|(l, v)| (l.clone(), v.durations.histogram(bins, lo, hi)))
            .collect();
        let mode = mode_name(main_mode);
        let drawn = charts::histogram_chart(
            &format!("Step durations, {mode}"),
            "step duration (ms)",
            &edges,
            &series,
        );
        self.chart(drawn, "How many steps took how long, per node and worker (counted from a quantile sketch: a step within 1% of a bin edge may be counted in the bin beside it).");
        let lines: Vec<Curve> = shown
            .iter()
            .map(|(l, v)| Curve {
                label: l.clone(),
                slices: self.view.timeline(&v.line, 1e-3),
            })
            .collect();
        let marked: Vec<(f64, f64)> = details
            .into_iter()
            .flat_map(|d| d.nodes.values())
            .filter_map(|modes| modes.get(mode))
            .flat_map(|s| &s.outlier_steps)
            .map(|o| (self.view.elapsed(o.start_us), o.duration_s * 1000.0))
            .collect();
        let marks = Series {
            label: format!("outlier ({})", marked.len()),
            points: marked,
        };
        let count = marks.points.len();
        let drawn = charts::marked_line_chart(
            &format!("Step duration over time, {mode}"),
            XAxis::Elapsed,
            "ms",
            &lines,
            None,
            details.map(|_| &marks),
        );
        let caption = match details {
            Some(_) => format!(
                "Duration of the steps over the time they started (over long runs each line is \
                 the mean of a time slice and the light band its shortest to longest step); \
                 circles: the {count} outlier step(s) of {mode} the rule lists."
            ),
            None => "Duration of the steps over the time they started: over long runs each line \
                     is the mean of a time slice and the light band its shortest to longest step."
                .to_owned(),
        };
        self.marked_chart(drawn, &caption, count);
    }

    /// The rule's slowest outlier steps.
    fn outlier_table(&mut self, details: &StepOutlierDetails) {
        self.h3("Outliers");
        let total = details.outliers();
        if total == 0 {
            self.lead("No step took longer than the outlier limit of its node and mode.");
            return;
        }
        let mut listed: Vec<(&str, &str, &smdebug_rules::profiler::OutlierStep, f64)> = Vec::new();
        for (node, modes) in &details.nodes {
            for (mode, s) in modes {
                for o in &s.outlier_steps {
                    listed.push((node, mode, o, s.outlier_limit_s));
                }
            }
        }
        listed.sort_by(|a, b| b.2.duration_s.total_cmp(&a.2.duration_s));
        self.lead(&format!(
            "{total} outlier step(s); the slowest {}:",
            listed.len().min(OUTLIERS_LISTED)
        ));
        let rows: Vec<Vec<Cell>> = listed
            .iter()
            .take(OUTLIERS_LISTED)
            .map(|(node, mode, o, limit)| {
                vec![
                    Cell::text(*node),
                    Cell::text(*mode),
                    Cell::num(o.step.to_string()),
                    Cell::text(clock(self.view.elapsed(o.start_us))),
                    Cell::num(ms(o.duration_s * 1e6)),
                    Cell::num(ms(limit * 1e6)),
                ]
            })
            .collect();
        table(
            &mut self.out,
            "step-outliers",
            &[
                "node",
                "mode",
                "step",
                "started at",
                "duration ms",
                "limit ms",
            ],
            &rows,
        );
        self.advice("Look at what ran at those times: checkpoints, evaluation, garbage collection, a slow batch or a stalled data loader. If the slow steps are periodic, move that work off the training loop or make it asynchronous.");
    }
}

fn worker_label(node: &str, worker: Option<u32>) -> String {
    match worker {
        Some(w) => format!("{node} worker {w}"),
        None => node.to_owned(),
    }
}
