//! 1. Training job summary.
//!
//! The initialization time is MaxInitializationTime's (its typed details): the section does
//! not measure or judge it again.

use std::collections::{BTreeMap, BTreeSet};

use smdebug_analysis::phases::JobPhases;
use smdebug_analysis::time::{duration, utc};
use smdebug_rules::profiler::InitializationDetails;

use crate::charts;
use crate::html::{Cell, table};
use crate::input::NoteArea;

use super::Page;
use super::format::{mode_name, pct};

const RULE: &str = "MaxInitializationTime";

impl Page<'_> {
    pub(super) fn job_summary(&mut self) {
        self.notes(NoteArea::Run);
        let (Some(t0), Some(t1)) = (self.view.t0_us, self.view.t1_us) else {
            self.missing(
                "No system metrics and no framework spans were found, so the job's start, end and \
                 phases cannot be dated. Record them with the system sampler and SpanRecorder.",
            );
            self.verdict(RULE);
            return;
        };
        self.lead(
            "The job runs from its first record to its last: the process's start when the \
             session recorded it (its Process span), else the first system sample or span. The \
             training loop runs from the start of the first step to the end of the last one. \
             Initialization is the time before the loop, finalization the time after it.",
        );
        let phases = JobPhases::new(
            (t0, t1),
            self.view
                .steps
                .values()
                .map(|s| (s.first_start_us, s.last_end_us)),
        );
        let job = phases.job_s();
        let mut rows = vec![
            vec![Cell::text("Job start"), Cell::text(utc(t0))],
            vec![Cell::text("Job end"), Cell::text(utc(t1))],
            vec![Cell::text("Job duration"), Cell::text(duration(job))],
        ];
        let initialization = self.details(RULE).and_then(|d| d.initialization().cloned());
        let init = initialization.as_ref().and_then(|d| d.initialization_s);
        let slices = phase_rows(&phases, initialization.as_ref(), &mut rows);
        let mut per_mode: BTreeMap<&str, u64> = BTreeMap::new();
        for ((_, _, mode), s) in self.view.steps {
            *per_mode.entry(mode_name(*mode)).or_default() += s.durations.count();
        }
        if !per_mode.is_empty() {
            let text: Vec<String> = per_mode.iter().map(|(m, n)| format!("{m}: {n}")).collect();
            rows.push(vec![Cell::text("Step spans"), Cell::text(text.join(", "))]);
        }
        let nodes: BTreeSet<&str> = self.input.profile.nodes();
        rows.push(vec![
            Cell::text("Nodes"),
            Cell::text(nodes.into_iter().collect::<Vec<_>>().join(", ")),
        ]);
        table(&mut self.out, "summary", &["", "value"], &rows);
        if !slices.is_empty() {
            let drawn = charts::pie_chart("Where the job's time went", &slices);
            self.chart(
                drawn,
                "Initialization, training loop and finalization, share of the job's duration.",
            );
            if let (Some(d), Some(init)) = (&initialization, init)
                && d.exceeded
            {
                self.advice(&format!(
                    "Initialization took {} ({} of the job), more than {} min. Look at what runs \
                     before the first step: data download or decompression, dataset indexing, \
                     model compilation or checkpoint loading; cache or overlap them with training.",
                    duration(init),
                    pct(init / job),
                    d.threshold_minutes
                ));
            }
        }
        self.verdict(RULE);
    }
}

/// The training loop's start, end and duration, initialization (as MaxInitializationTime
/// measured it) and finalization, as rows added to `rows`; the same as slices of the job's
/// time for the pie chart (none without step spans).
fn phase_rows(
    phases: &JobPhases,
    initialization: Option<&InitializationDetails>,
    rows: &mut Vec<Vec<Cell>>,
) -> Vec<(String, f64)> {
    let job = phases.job_s();
    let init = initialization.and_then(|d| d.initialization_s);
    let (Some((l0, l1)), Some(looped), Some(fin)) = (
        phases.loop_us,
        phases.training_loop_s(),
        phases.finalization_s(),
    ) else {
        rows.push(vec![
            Cell::text("Training loop"),
            Cell::text("unknown: no step spans were recorded"),
        ]);
        return Vec::new();
    };
    let share = |s: f64| if job > 0.0 { s / job } else { f64::NAN };
    rows.extend([
        vec![Cell::text("Training loop start"), Cell::text(utc(l0))],
        vec![Cell::text("Training loop end"), Cell::text(utc(l1))],
        vec![
            Cell::text("Training loop duration"),
            Cell::text(format!(
                "{} ({} of the job)",
                duration(looped),
                pct(share(looped))
            )),
        ],
        vec![
            Cell::text("Initialization"),
            Cell::text(match (initialization, init) {
                (Some(d), Some(init)) => format!(
                    "{} ({} of the job; limit {} min)",
                    duration(init),
                    pct(share(init)),
                    d.threshold_minutes
                ),
                (Some(_), None) => "no step started".to_owned(),
                (None, _) => "not judged: no result of the MaxInitializationTime rule".to_owned(),
            }),
        ],
        vec![
            Cell::text("Finalization"),
            Cell::text(format!(
                "{} ({} of the job)",
                duration(fin),
                pct(share(fin))
            )),
        ],
    ]);
    let mut slices: Vec<(String, f64)> = init
        .map(|init| ("Initialization".to_owned(), init))
        .into_iter()
        .collect();
    slices.extend([
        ("Training loop".to_owned(), looped),
        ("Finalization".to_owned(), fin),
    ]);
    slices
}
