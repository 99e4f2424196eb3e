//! 3. Framework metrics summary: time per mode and per phase.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use smdebug_core::phase::Phase;

use crate::charts;
use crate::html::{Cell, table};
use crate::input::NoteArea;
use smdebug_analysis::digest::{MAX_PHASES, OTHER_PHASES};

use super::format::{DURATION_COLUMNS, duration_cells, mode_name, ms, pct, percentile_bound};
use super::{MAX_SERIES, Page};

impl Page<'_> {
    pub(super) fn framework_metrics(&mut self) {
        self.notes(NoteArea::Spans);
        if self.input.span_count() == 0 {
            self.missing("No framework spans: there is no split of the loop's time into modes and phases. Record steps and phases with SpanRecorder.");
        } else {
            self.mode_split();
            self.phase_split();
        }
        self.h3("CPU and GPU operators");
        if self.input.traces.is_empty() {
            self.missing("CPU versus GPU operator time comes from PyTorch profiler (Kineto) traces; none was given to the report.");
        } else {
            let rows: Vec<Vec<Cell>> = self
                .input
                .traces
                .iter()
                .map(|r| {
                    let gpu_span = r.gpu_busy_us + r.gpu_idle_us;
                    vec![
                        Cell::num(r.rank.to_string()),
                        Cell::num(ms(r.cpu_operator_total_us)),
                        Cell::num(ms(r.gpu_kernel_total_us)),
                        Cell::num(ms(r.gpu_memcpy_total_us + r.gpu_memset_total_us)),
                        Cell::num(ms(r.gpu_busy_us)),
                        Cell::num(ms(r.gpu_idle_us)),
                        Cell::num(if gpu_span > 0.0 {
                            pct(r.gpu_busy_us / gpu_span)
                        } else {
                            "-".into()
                        }),
                    ]
                })
                .collect();
            table(
                &mut self.out,
                "operators-split",
                &[
                    "rank",
                    "CPU operators ms (inclusive)",
                    "GPU kernels ms",
                    "GPU memcpy+memset ms",
                    "GPU busy ms",
                    "GPU idle ms",
                    "GPU busy share",
                ],
                &rows,
            );
            let cpu: f64 = self
                .input
                .traces
                .iter()
                .map(|r| r.cpu_operator_total_us)
                .sum();
            let gpu: f64 = self
                .input
                .traces
                .iter()
                .map(|r| r.gpu_kernel_total_us + r.gpu_memcpy_total_us + r.gpu_memset_total_us)
                .sum();
            let drawn = charts::pie_chart(
                "CPU operators vs GPU activity (all ranks)",
                &[
                    ("CPU operators".into(), cpu),
                    ("GPU kernels, copies, sets".into(), gpu),
                ],
            );
            self.chart(drawn, "Total CPU operator time (nested operators count in their parents too) against total GPU activity.");
        }
        self.verdict("OverallFrameworkMetrics");
    }

    pub(super) fn mode_split(&mut self) {
        let mut per_mode: BTreeMap<&str, f64> = BTreeMap::new();
        let mut per_worker: BTreeMap<(&str, Option<u32>), (u64, u64, u64)> = BTreeMap::new();
        for ((node, worker, mode), s) in self.view.steps {
            *per_mode.entry(mode_name(*mode)).or_default() += s.durations.sum();
            let e = per_worker.entry((node.as_str(), *worker)).or_insert((
                s.first_start_us,
                s.last_end_us,
                0,
            ));
            e.0 = e.0.min(s.first_start_us);
            e.1 = e.1.max(s.last_end_us);
            e.2 += s.durations.sum() as u64;
        }
        if per_mode.is_empty() {
            self.missing("No step spans, so time per mode (training, evaluation) is unknown.");
            return;
        }
        let between: f64 = per_worker
            .values()
            .map(|(a, b, inside)| (b - a).saturating_sub(*inside) as f64)
            .sum();
        let mut slices: Vec<(String, f64)> = per_mode
            .iter()
            .map(|(m, us)| (format!("{m} steps"), *us / 1e6))
            .collect();
        slices.push(("between steps".into(), between / 1e6));
        let total: f64 = slices.iter().map(|s| s.1).sum();
        self.h3("Training, evaluation and other time");
        let rows: Vec<Vec<Cell>> = slices
            .iter()
            .map(|(l, s)| {
                vec![
                    Cell::text(l),
                    Cell::num(format!("{s:.3}")),
                    Cell::num(pct(s / total)),
                ]
            })
            .collect();
        table(
            &mut self.out,
            "mode-split",
            &["part of the loop", "seconds (summed over workers)", "share"],
            &rows,
        );
        let drawn = charts::pie_chart("Time in the training loop by mode", &slices);
        self.chart(
            drawn,
            "Step time per mode, and loop time outside any step, summed over workers.",
        );
        if total > 0.0 && between / 1e6 / total > 0.2 {
            self.advice(&format!(
                "{} of the loop's time falls between steps. Something outside the step spans takes \
                 that time (logging, checkpoints, validation without spans, waiting on other \
                 workers); record it with a custom span to see what it is.",
                pct(between / 1e6 / total)
            ));
        }
    }

    pub(super) fn phase_split(&mut self) {
        let phases = self.input.profile.phases();
        let step_total: f64 = self.view.steps.values().map(|s| s.durations.sum()).sum();
        let mut rows = Vec::new();
        let mut slices = Vec::new();
        let mut totals: Vec<(&str, f64)> = phases
            .iter()
            .map(|(p, d)| (p.as_str(), d.durations.sum()))
            .collect();
        totals.sort_by(|a, b| b.1.total_cmp(&a.1));
        for (phase, total) in &totals {
            let Some(sum) = phases[*phase].durations.summary() else {
                continue;
            };
            let is_step = phase.starts_with("Step:");
            let share = (!is_step && step_total > 0.0).then(|| total / step_total);
            let mut row = vec![Cell::text(*phase), Cell::num(sum.count.to_string())];
            row.extend(duration_cells(&sum, *total, share));
            rows.push(row);
            if !is_step {
                slices.push(((*phase).to_owned(), *total / 1e6));
            }
        }
        self.h3("Phases");
        self.lead(&percentile_bound());
        if self.input.profile.pooled_phases() > 0 {
            self.lead(&format!(
                "Spans of more than {MAX_PHASES} phases were read: the phases beyond the first \
                 {MAX_PHASES} are pooled in the row {OTHER_PHASES}."
            ));
        }
        table(
            &mut self.out,
            "phases",
            &[&["phase", "spans"][..], &DURATION_COLUMNS].concat(),
            &rows,
        );
        if slices.len() > MAX_SERIES {
            let rest: f64 = slices[MAX_SERIES - 1..].iter().map(|s| s.1).sum();
            slices.truncate(MAX_SERIES - 1);
            slices.push(("other phases".into(), rest));
        }
        if !slices.is_empty() {
            let drawn = charts::pie_chart("Time per phase", &slices);
            self.chart(drawn, "Total time of each recorded phase other than whole steps (forward, backward, data loading, optimizer, custom).");
        }
        let total_of = |kind: Phase| -> f64 {
            phases
                .values()
                .filter(|p| p.kind == kind)
                .map(|p| p.durations.sum())
                .sum()
        };
        let (fwd, bwd) = (total_of(Phase::Forward), total_of(Phase::Backward));
        if fwd > 0.0 && bwd > 0.0 {
            let ratio = bwd / fwd;
            let _ = write!(
                self.out,
                "<p>Forward passes took {:.3} s and backward passes {:.3} s: backward/forward = {ratio:.2}.</p>",
                fwd / 1e6,
                bwd / 1e6
            );
            let drawn = charts::pie_chart(
                "Forward vs backward",
                &[
                    ("Forward".to_owned(), fwd / 1e6),
                    ("Backward".to_owned(), bwd / 1e6),
                ],
            );
            self.chart(
                drawn,
                "Total time of the Forward spans against the Backward spans (the adapters' \
                 forward and backward passes).",
            );
            if ratio > 3.0 {
                self.advice("The backward pass takes more than three times the forward pass; typical models need about twice. Look for operators without efficient gradients, gradient checkpointing recomputation, or synchronisation inside backward.");
            }
        } else {
            self.missing("Forward versus backward needs both Forward and Backward spans; at least one kind was not recorded.");
        }
    }
}
