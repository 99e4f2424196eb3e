//! The dashboard's "Download report": the profiling report drawn from what the run's follower
//! holds: the profiler data; its scalars are read from the run (one-number records only: the
//! dashboard keeps summaries of them, not every value). Only the latest code-profile flame graphs are read; everything is dropped
//! once the page is drawn.

use smdebug_read::RankSummary;
use smdebug_report::{FollowedRun, LoadOptions, NoteArea, ReportInput, render_html};

use crate::run::Run;

/// The stages of a build, in order, as [`build`] reports them.
pub(crate) const STAGES: [&str; 4] = [
    "waiting for the followed data",
    "copying the followed data and the code profiles",
    "reading the scalars",
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
    let mut scalars = false;
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
        Some(_) if d.tensors.is_empty() => input.no_tensors(),
        // The dashboard keeps summaries, not every value: the report's scalars are read from
        // the run (one-number records only), outside the lock.
        Some(_) => scalars = true,
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
    if let (true, Some(storage)) = (scalars, &storage) {
        input.scalars_of_run(&location, storage, &LoadOptions::default());
    }
    input.with_rules(rules)
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;

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
