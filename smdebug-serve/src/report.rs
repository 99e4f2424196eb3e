//! The dashboard's "Download report": the profiling report drawn from what the run's follower
//! holds, nothing of the run read again: the profiler data (the digest the follower keeps) and
//! the scalars (the follower's fixed-size summaries: each series' ends and every bucket's
//! lowest and highest value, at most 2,050 points a series and mode). Only the latest
//! code-profile flame graphs are read; everything is dropped once the page is drawn. The same
//! scalars go to a report written in the same process ([`ServedScalars`]: a `Session`'s).

use std::sync::Arc;
use std::time::{Duration, Instant};

use smdebug_read::RankSummary;
use smdebug_report::{
    FollowedRun, FollowedScalars, LoadOptions, NoteArea, ReportInput, ScalarsSource, render_html,
};

use crate::run::Run;
use crate::run_data::RunData;

/// The stages of a build, in order, as [`build`] reports them.
pub(crate) const STAGES: [&str; 4] = [
    "waiting for the followed data",
    "copying the followed data and the code profiles",
    "taking the scalars",
    "drawing the page",
];

/// The report's page; `progress` is told each of [`STAGES`] as it starts, then `None`.
pub(crate) fn build(
    run: &Run,
    kineto: &[RankSummary],
    progress: &dyn Fn(Option<&'static str>),
) -> String {
    let input = input(run, kineto, progress);
    progress(Some(STAGES[3]));
    let html = render_html(&input);
    drop(input);
    progress(None);
    html
}

/// The report's input, from the run's follower state.
pub(crate) fn input(
    run: &Run,
    kineto: &[RankSummary],
    progress: &dyn Fn(Option<&'static str>),
) -> ReportInput {
    progress(Some(STAGES[0]));
    // The report's input is taken under the read lock, straight from the follower's digest of
    // the profiler data (shared, not copied; its size does not grow with the run).
    let storage = run.storage();
    let d = run.data.read().expect("run data lock");
    let mut scalars = None;
    progress(Some(STAGES[1]));
    let location = run.location.to_string();
    let mut input = ReportInput::from_followed(&FollowedRun {
        location: &location,
        storage: storage.as_ref(),
        complete: Some(d.complete),
        profile: &d.digest.0,
        code_profiles: &d.code_windows,
        kineto,
        problems: &d.problems,
    });
    progress(Some(STAGES[2]));
    match &storage {
        Some(_) => scalars = Some(followed_scalars(&d)),
        None => {
            let why = d
                .open_error
                .clone()
                .unwrap_or_else(|| "not opened yet".to_owned());
            input.note(
                NoteArea::Run,
                format!("Cannot open the run location: {why}. No profiler data was read."),
            );
        }
    }
    let rules = d
        .rules
        .as_ref()
        .map(|s| s.rules.clone())
        .unwrap_or_default();
    drop(d);
    if let Some(scalars) = scalars {
        input.scalars_followed(scalars, &LoadOptions::default());
    }
    input.with_rules(rules)
}

/// The report's scalars, the download's and a [`ServedScalars`]' alike: the follower's
/// summaries (nothing is read again), each series' first and last value and every bucket's
/// lowest and highest, values of the run's files at their steps.
fn followed_scalars(d: &RunData) -> FollowedScalars {
    FollowedScalars::of_summaries(!d.tensors.is_empty(), &d.scalars)
}

/// How long a report written at a run's end waits for the dashboard's follower to read the
/// scalars to that end (it is a pass or two behind the rules, a pass every poll interval); past
/// it, the report reads them itself.
const WAIT_FOR_THE_END: Duration = Duration::from_secs(30);

/// A served run's scalars for a report written in the same process
/// ([`Server::report_scalars`](crate::Server::report_scalars); smdebug-report's
/// `ReportWriter::scalars_from`): the dashboard's summaries, taken as its "Download report"
/// takes them, so that a `Session` with rules and the dashboard reads no file of its run again
/// for its report.
#[derive(Clone)]
pub struct ServedScalars {
    run: Arc<Run>,
}

impl ServedScalars {
    pub(crate) fn new(run: Arc<Run>) -> ServedScalars {
        ServedScalars { run }
    }
}

impl std::fmt::Debug for ServedScalars {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServedScalars")
            .field("run", &self.run.location.to_string())
            .finish_non_exhaustive()
    }
}

impl ScalarsSource for ServedScalars {
    /// The dashboard's scalars now; with `to_the_end`, once its tensor follower read the run to
    /// its end marker, waiting up to 30 s. `None` when the run's storage is not open, the
    /// server stopped, or the follower did not get there in time.
    fn scalars(&self, to_the_end: bool) -> Option<FollowedScalars> {
        let opened = || self.run.storage().is_some();
        if to_the_end {
            let ended = || opened() && self.run.data.read().is_ok_and(|d| d.tensors_ended);
            let until = Instant::now() + WAIT_FOR_THE_END;
            if !self.run.passes.wait_for(until, ended) {
                return None;
            }
        } else if !opened() {
            return None;
        }
        Some(followed_scalars(
            &self.run.data.read().expect("run data lock"),
        ))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;

    #[test]
    fn served_scalars_are_the_downloads_and_wait_for_the_end_when_asked() {
        let dir = tempfile::tempdir().unwrap();
        let run = Arc::new(Run::new(
            0,
            "run".into(),
            smdebug_storage::Location::Local(dir.path().into()),
            false,
        ));
        let served = ServedScalars::new(Arc::clone(&run));
        // Not opened yet: nothing to give, now or at the end.
        assert_eq!(served.scalars(false), None);
        let storage: Arc<dyn smdebug_storage::Storage> =
            Arc::new(smdebug_storage::LocalStorage::new(dir.path()).unwrap());
        *run.storage.write().unwrap() = Some(storage);
        assert_eq!(served.scalars(false), Some(FollowedScalars::NoTensors));
        {
            let mut d = run.data.write().unwrap();
            d.tensors.push("loss".to_owned());
            let points = (0..10u64)
                .map(|s| (s, 1.0 / (1.0 + s as f64), 0.0))
                .collect();
            d.scalars
                .add(vec![("loss".to_owned(), smdebug_core::Mode::Train, points)]);
        }
        let now = served.scalars(false).unwrap();
        assert_eq!(now, followed_scalars(&run.data.read().unwrap()));
        let FollowedScalars::Series(series) = &now else {
            panic!("{now:?}")
        };
        assert_eq!(series[0].modes[0].1.len(), 10);
        // To the end: given once the follower read the run to its end...
        let waiting = std::thread::spawn({
            let served = served.clone();
            move || served.scalars(true)
        });
        run.data.write().unwrap().tensors_ended = true;
        run.passes.finished();
        assert_eq!(waiting.join().unwrap(), Some(now));
        // ... and not at all by a stopped server, whose follower will not get there: the
        // waiter is woken by the stop, long before its 30 s are up.
        run.data.write().unwrap().tensors_ended = false;
        let waiting = std::thread::spawn({
            let served = served.clone();
            move || served.scalars(true)
        });
        run.passes.stopped();
        assert_eq!(waiting.join().unwrap(), None);
        assert_eq!(served.scalars(true), None);
    }

    #[test]
    fn a_build_reports_its_stages_in_order_and_ends_with_none() {
        let dir = tempfile::tempdir().unwrap();
        let run = Run::new(
            0,
            "run".into(),
            smdebug_storage::Location::Local(dir.path().into()),
            false,
        );
        let seen = Mutex::new(Vec::new());
        let html = build(&run, &[], &|stage| seen.lock().unwrap().push(stage));
        assert!(html.contains("<section id=\"job-summary\""));
        let mut expected: Vec<Option<&str>> = STAGES.iter().copied().map(Some).collect();
        expected.push(None);
        assert_eq!(*seen.lock().unwrap(), expected);
    }
}
