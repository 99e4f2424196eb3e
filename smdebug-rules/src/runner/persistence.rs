//! Persistence: the summary published to the handle and stored into the run
//! (`rules/rule_job_summary.json`), and the report drawn by a [`Reporter`] from the runner's
//! state ([`RunState`]).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use smdebug_analysis::digest::ProfileDigest;
use smdebug_read::follow::DataProblems;
use smdebug_read::profile::CodeProfileWindow;
use smdebug_read::trial::Trial;
use smdebug_storage::Storage;

use super::evaluation::Evaluation;
use super::feeding::ProfilerSide;
use super::run::RunSource;
use crate::error::ReportWriteError;
use crate::recorded::{ReportDetails, RuleDetails};
use crate::report::ReportOutcome;
use crate::status::{SUMMARY_FILE, Summary};

/// The runner's state as a reporter sees it: the statuses, the run's storage and trial, and
/// the profiler data read so far. Built by the runner for each report.
#[non_exhaustive]
pub struct RunState<'a> {
    /// Where the run lives.
    pub location: &'a smdebug_storage::Location,
    /// The run's storage (a report written into the run goes through it).
    pub storage: &'a Arc<dyn Storage>,
    /// Whether the runner may write into the run
    /// ([`RunnerBuilder::write_into_run`](crate::runner::RunnerBuilder::write_into_run)).
    pub write_into_run: bool,
    /// The trial the debugging rules read; `None` while the run holds no tensor data, and when
    /// no rule reads tensors on a run with profiler data.
    pub trial: Option<&'a Trial>,
    /// Every rule's status now, with the parameters in force.
    pub summary: &'a Summary,
    /// The system metrics and framework spans read so far (a report shares them).
    pub profile: &'a Arc<ProfileDigest>,
    /// The code-profile windows read so far, ordered by start, node and worker.
    pub code_profiles: &'a [CodeProfileWindow],
    /// Problems with the profiler data that the rules worked around (a corrupt line skipped).
    pub data_problems: &'a DataProblems,
}

/// Where a report will go, and what it has to leave out.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReportPlan {
    /// Where the report goes (a path or URL, shown in `ProfilerReport`'s status), or why it
    /// will not be written.
    pub destination: std::result::Result<String, NoDestination>,
    /// Inputs of the report's own that cannot be read (a named trace file): the report is
    /// written without them and `ProfilerReport` ends in `Error`.
    pub problems: Vec<String>,
}

/// Why a [`Reporter`] has nowhere to write its report.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum NoDestination {
    /// It writes into the run only, and the runner does not write into the run.
    #[error(
        "report not written: the runner does not write into the run (`smdebug rules \
         --write-into-run` does) and no other path was given (`smdebug report -o FILE`)"
    )]
    NotWritingIntoRun,
    /// A reporter's own reason (a reporter other than smdebug-report's `ReportWriter`).
    #[error("report not written: {0}")]
    Unavailable(String),
}

/// Draws a report from the runner's state
/// ([`RunnerBuilder::reporter`](crate::runner::RunnerBuilder::reporter)). The runner calls
/// [`prepare`](Self::prepare), records the plan in `ProfilerReport`'s status, then calls
/// [`write`](Self::write), so the report shows its own status.
pub trait Reporter: Send {
    /// Where the report of `run` will go and what it has to leave out.
    fn prepare(&mut self, run: &RunState<'_>) -> ReportPlan;
    /// Writes the report of `run` (after a [`prepare`](Self::prepare) that gave a destination).
    fn write(&mut self, run: &RunState<'_>) -> std::result::Result<(), ReportWriteError>;
    /// Called on the runner's thread after each of its looks at a live run (the rules
    /// evaluated, the profiler data fed), so that a reporter can read on beside the runner
    /// what it will draw (smdebug-report's `ReportWriter::follow_scalars`). Nothing by default.
    fn follow(&mut self) {}
}

/// Where the runner's results go: the handle's copy of the summary, the summary file in the
/// run, the reporter.
pub(super) struct Persistence {
    /// The latest summary, for [`RunnerHandle::summary`](crate::runner::RunnerHandle::summary).
    pub shared: Arc<Mutex<Option<Summary>>>,
    pub write_into_run: bool,
    /// The latest failure to store the summary.
    write_error: Option<String>,
    reporter: Option<Box<dyn Reporter>>,
    report_every: Option<Duration>,
    last_report: Option<Instant>,
    /// What became of the latest report (for `ProfilerReport`'s status).
    pub report_outcome: Option<ReportOutcome>,
}

impl Persistence {
    pub fn new(
        write_into_run: bool,
        reporter: Option<Box<dyn Reporter>>,
        report_every: Option<Duration>,
    ) -> Persistence {
        Persistence {
            shared: Arc::new(Mutex::new(None)),
            write_into_run,
            write_error: None,
            reporter,
            report_every,
            last_report: None,
            report_outcome: None,
        }
    }

    /// Keeps the failure to store another of the runner's files into the run (a rule's log),
    /// for [`Summary::write_error`].
    pub fn note_write_error(&mut self, error: String) {
        self.write_error = Some(error);
    }

    /// Lets the reporter read on after a look at a live run ([`Reporter::follow`]).
    pub fn follow_reporter(&mut self) {
        if let Some(reporter) = &mut self.reporter {
            reporter.follow();
        }
    }

    /// Whether a report is due while following ([`report_every`](crate::runner::RunnerBuilder::report_every)).
    pub fn report_due(&self) -> bool {
        self.report_every
            .is_some_and(|every| self.last_report.is_none_or(|t| t.elapsed() >= every))
    }

    /// The statuses now.
    pub fn summary(&self, run: &RunSource, rules: &Evaluation) -> Summary {
        Summary {
            run: run.location.to_string(),
            run_complete: run.complete,
            end_reason: run.end_reason.clone(),
            last_step: rules.last_step,
            finished: false,
            updated_at: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map(|d| d.as_secs_f64())
                .unwrap_or(0.0),
            rules: rules.statuses(),
            gave_up: rules.gave_up.clone(),
            write_error: self.write_error.clone(),
        }
    }

    /// Publishes the summary to the handle and, when writing into the run, stores it there;
    /// a failed write is kept in [`Summary::write_error`], not fatal.
    pub fn store(&mut self, run: &RunSource, summary: &Summary) {
        if let Ok(mut s) = self.shared.lock() {
            *s = Some(summary.clone());
        }
        if !self.write_into_run {
            return;
        }
        let written = serde_json::to_vec_pretty(summary)
            .map_err(|e| e.to_string())
            .and_then(|json| {
                run.storage
                    .put(SUMMARY_FILE, json.into())
                    .map_err(|e| e.to_string())
            });
        if let Err(e) = written {
            self.write_error = Some(format!(
                "{}: writing {SUMMARY_FILE} failed: {e}",
                run.location
            ));
        }
    }

    /// The final summary: stored, with the latest write error.
    pub fn finish(&mut self, run: &RunSource, rules: &Evaluation) -> Summary {
        let mut summary = self.summary(run, rules);
        summary.finished = true;
        self.store(run, &summary);
        summary.write_error = self.write_error.clone();
        summary
    }

    /// Hands the state to the reporter; `ProfilerReport`'s message says where the report went
    /// (or why it was not written). Never fails the runner: a report that cannot be written is
    /// `ProfilerReport`'s error.
    pub fn write_report(
        &mut self,
        run: &RunSource,
        rules: &mut Evaluation,
        profiler: &ProfilerSide,
    ) {
        let slot = rules.report_slot();
        let Some(mut reporter) = self.reporter.take() else {
            self.set_outcome(
                rules,
                ReportOutcome::NotDrawn(
                    "no report was drawn: no report writer is attached to the runner \
                     (smdebug-report's ReportWriter)"
                        .into(),
                ),
            );
            return;
        };
        self.last_report = Some(Instant::now());
        let summary = self.summary(run, rules);
        let plan = reporter.prepare(&self.state(run, profiler, &summary));
        let destination = match plan.destination {
            Ok(d) => d,
            Err(why) => {
                if let Some(i) = slot {
                    rules.slots[i].status.details = RuleDetails::None;
                }
                self.set_outcome(rules, ReportOutcome::NotDrawn(why.to_string()));
                self.reporter = Some(reporter);
                return;
            }
        };
        // The page shows this slot too: say where the report goes, and what it had to leave
        // out, before it is drawn.
        if let Some(i) = slot {
            rules.slots[i].status.details = RuleDetails::Report(ReportDetails {
                report: destination.clone(),
            });
        }
        let planned = if plan.problems.is_empty() {
            ReportOutcome::Written(destination.clone())
        } else {
            ReportOutcome::Failed(format!(
                "report: {destination}; {}",
                plan.problems.join(" ")
            ))
        };
        self.set_outcome(rules, planned);
        let summary = self.summary(run, rules);
        if let Err(e) = reporter.write(&self.state(run, profiler, &summary)) {
            if let Some(i) = slot {
                rules.slots[i].status.details = RuleDetails::None;
            }
            self.set_outcome(
                rules,
                ReportOutcome::Failed(format!(
                    "the report could not be written to {destination}: {e}"
                )),
            );
        }
        self.reporter = Some(reporter);
    }

    fn set_outcome(&mut self, rules: &mut Evaluation, outcome: ReportOutcome) {
        self.report_outcome = Some(outcome);
        rules.settle_profiler_report(self.report_outcome.as_ref());
    }

    /// What the reporter sees.
    fn state<'a>(
        &self,
        run: &'a RunSource,
        profiler: &'a ProfilerSide,
        summary: &'a Summary,
    ) -> RunState<'a> {
        RunState {
            location: &run.location,
            storage: &run.storage,
            write_into_run: self.write_into_run,
            trial: run.trial.as_ref(),
            summary,
            profile: &profiler.profile,
            code_profiles: &profiler.code_profiles,
            data_problems: profiler.problems(),
        }
    }
}
