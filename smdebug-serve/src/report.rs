//! The dashboard's "Download report": the profiling report drawn from what the run's follower
//! holds, not from a second read of the run. Only the scalar curves are read (through a
//! `Trial` opened for the report) and the latest code-profile flame graphs; everything is
//! dropped once the page is drawn.

use smdebug_profiler::RankSummary;
use smdebug_report::{FollowedRun, LoadOptions, NoteArea, ReportInput, render_html};

use crate::run::Run;

/// The report's page.
pub(crate) fn build(run: &Run, kineto: &[RankSummary]) -> String {
    render_html(&input(run, kineto))
}

/// The report's input, from the run's follower state.
pub(crate) fn input(run: &Run, kineto: &[RankSummary]) -> ReportInput {
    // A copy (16 bytes a point, 56 a span), taken under the read lock so that the follower is
    // held up only for the copy, not while the page is drawn.
    let (profile, code_windows, problems, complete, rules, open_error) = {
        let d = run.data.read().expect("run data lock");
        (
            d.profile.clone(),
            d.code_windows.clone(),
            d.problems.clone(),
            d.complete,
            d.rules
                .as_ref()
                .map(|s| s.rules.clone())
                .unwrap_or_default(),
            d.open_error.clone(),
        )
    };
    let storage = run.storage();
    let mut input = ReportInput::from_followed(&FollowedRun {
        location: &run.location,
        storage: storage.as_ref(),
        complete: Some(complete),
        profile: &profile,
        code_profiles: &code_windows,
        kineto,
        problems: &problems,
    });
    drop((profile, code_windows));
    match &storage {
        Some(storage) => input.scalars_of_run(&run.location, storage, &LoadOptions::default()),
        None => {
            let why = open_error.unwrap_or_else(|| "not opened yet".to_owned());
            input.note(
                NoteArea::Run,
                format!("Cannot open the run location: {why}. No profiler data was read."),
            );
        }
    }
    input.with_rules(rules)
}
