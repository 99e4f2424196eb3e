//! [`RuleRunner`]: the run, the rules' evaluation, the profiler side and where the results go,
//! held together; one offline evaluation, and the passes a follower makes
//! ([`threads`](super::threads) runs them on a thread).

use std::time::{Duration, Instant};

use smdebug_read::trial::Trial;

use super::evaluation::Evaluation;
use super::feeding::{Fed, ProfilerSide};
use super::persistence::Persistence;
use super::run::RunSource;
use super::trail::StatusTrail;
use crate::error::Result;
use crate::status::Summary;

/// How a runner follows a live run.
pub(super) struct Following {
    /// How often it looks for new data.
    pub poll_interval: Duration,
    /// Stop when nothing new arrived for this long.
    pub idle_timeout: Option<Duration>,
}

/// Evaluates rules over one run. See the [module docs](crate::runner).
pub struct RuleRunner {
    pub(super) run: RunSource,
    pub(super) rules: Evaluation,
    pub(super) profiler: ProfilerSide,
    pub(super) out: Persistence,
    pub(super) trail: StatusTrail,
    pub(super) following: Following,
}

impl RuleRunner {
    /// The trial the debugging rules read; `None` while the run holds no tensor data, and when
    /// no rule reads tensors on a run with profiler data.
    pub fn trial(&self) -> Option<&Trial> {
        self.run.trial.as_ref()
    }

    /// Evaluates every step and all profiler data available now and finishes: rules that never
    /// fired are `NoIssuesFound`. For a finished run this is the whole evaluation.
    ///
    /// The profiler rules are fed on a thread of their own while the debugging rules step over
    /// the trial: the two read different files and share no state, so on a long run neither
    /// waits for the other (each is about half of an offline evaluation's time).
    pub fn run_offline(&mut self) -> Result<Summary> {
        self.refresh_run()?;
        let stepped = match self.rules.take_profiler_rules() {
            None => step_through(&mut self.rules, &mut self.run),
            Some(mut taken) => {
                let (profiler, rules, run) = (&mut self.profiler, &mut self.rules, &mut self.run);
                let (stepped, fed) = std::thread::scope(|s| {
                    let feeding = std::thread::Builder::new()
                        .name("smdebug-profiler-rules".into())
                        .spawn_scoped(s, || feed_offline(profiler, &mut taken.rules));
                    let stepped = step_through(rules, run);
                    let fed = feeding.ok().map(|thread| {
                        thread
                            .join()
                            .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
                    });
                    (stepped, fed)
                });
                // No thread to be had: fed here, after the steps.
                let fed = fed.unwrap_or_else(|| feed_offline(profiler, &mut taken.rules));
                self.rules.put_back(taken);
                self.took_profiler_data(fed);
                stepped
            }
        };
        stepped?;
        self.finish()
    }

    /// The statuses now.
    pub fn summary(&self) -> Summary {
        self.out.summary(&self.run, &self.rules)
    }

    /// Refreshes the trial and learns whether the run has ended.
    pub(super) fn refresh_run(&mut self) -> Result<()> {
        self.run.refresh(self.rules.wants_tensors())
    }

    /// Reads new profiler data and hands it to the profiler rules (see
    /// [`ProfilerSide::feed`]); returns whether a status changed.
    pub(super) fn feed_profiler(&mut self, final_window: bool, wall_us: Option<u64>) -> bool {
        let fed = self.profiler.feed(&mut self.rules, final_window, wall_us);
        self.took_profiler_data(fed)
    }

    /// Notes what a [`ProfilerSide::feed`] did; returns whether a status changed.
    fn took_profiler_data(&mut self, fed: Fed) -> bool {
        if fed.arrived {
            self.run.last_arrival = Instant::now();
        }
        if fed.changed {
            self.rules
                .settle_profiler_report(self.out.report_outcome.as_ref());
        }
        fed.changed
    }

    /// Tells the debugging rules that no step came for `idle`; publishes what changed.
    pub(super) fn idle(&mut self, idle: Duration) {
        if self.rules.idle(self.run.trial.as_ref(), idle) {
            self.publish();
        }
    }

    /// The verdicts, the report, the final summary.
    pub(super) fn finish(&mut self) -> Result<Summary> {
        self.rules
            .settle_verdicts(self.run.trial.as_ref(), self.profiler.seen());
        self.rules
            .settle_profiler_report(self.out.report_outcome.as_ref());
        self.write_report();
        self.record_changes(true);
        Ok(self.out.finish(&self.run, &self.rules))
    }

    /// Hands the state to the reporter.
    pub(super) fn write_report(&mut self) {
        self.out
            .write_report(&self.run, &mut self.rules, &self.profiler);
    }

    /// Publishes the statuses now (and stores them into the run).
    pub(super) fn publish(&mut self) {
        self.record_changes(false);
        let summary = self.summary();
        self.out.store(&self.run, &summary);
    }

    /// The status changes since the last look: their actions, the rules' logs, the status
    /// lines (every rule's status when the interval has passed, or at the `last` look).
    fn record_changes(&mut self, last: bool) {
        self.trail
            .record(&mut self.rules, &self.run, self.out.write_into_run, last);
        if let Some(e) = self.trail.write_error.take() {
            self.out.note_write_error(e);
        }
    }
}

/// Steps the debugging rules of `rules` over every step of the run, a stretch a refresh, until
/// a refresh brings nothing new (a trial reading ahead of the rules reads the rest of the run
/// as they let go of the steps behind them).
fn step_through(rules: &mut Evaluation, run: &mut RunSource) -> Result<()> {
    loop {
        let (processed, _) = rules.process_available(run, true)?;
        if processed == 0 || run.complete || rules.interrupted() {
            return Ok(());
        }
        run.refresh(rules.wants_tensors())?;
    }
}

/// Feeds the profiler rules of `rules` all the run's profiler data, unless interrupted first.
fn feed_offline(profiler: &mut ProfilerSide, rules: &mut Evaluation) -> Fed {
    if rules.interrupted() {
        return Fed::default();
    }
    profiler.feed(rules, true, None)
}
