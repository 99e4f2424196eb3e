//! Building a [`ReportInput`]: from what a profiler follower gathered (the rule runner's, the
//! dashboard's, or one full pass of its own over a run read through its `Storage`). Each
//! source that fails or is missing becomes a note.

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use smdebug_analysis::digest::ProfileDigest;
use smdebug_read::RankSummary;
use smdebug_read::follow::merge_code_windows;
use smdebug_read::follow::{DataArea, DataProblems, KinetoTraces, ProfilerFollower};
use smdebug_read::profile::{CodeProfileWindow, ProfilerReader};
use smdebug_read::run::EndMarker;
use smdebug_rules::RunState;
use smdebug_storage::{IntoLocation, Storage};

use crate::input::{CODE_PROFILE_WINDOWS_SHOWN, CodeProfile, LoadOptions, NoteArea, ReportInput};
use crate::scalars::{ScalarsBeside, ScalarsSource};

/// What a profiler follower gathered of a run, as the report reads it: the rule runner's, the
/// dashboard's, or [`ReportInput::load`]'s own.
pub struct FollowedRun<'a> {
    /// The run location, as given.
    pub location: &'a str,
    /// The run's storage (the flame graphs of the latest code-profile windows are read
    /// through it); `None` when the run could not be opened.
    pub storage: Option<&'a Arc<dyn Storage>>,
    /// Whether the run's end marker is there; `None` when that could not be told.
    pub complete: Option<bool>,
    /// System metrics and spans as aggregated while they were read, shared with the report
    /// (not copied).
    pub profile: &'a Arc<ProfileDigest>,
    /// Code-profile windows, ordered by start, node and worker.
    pub code_profiles: &'a [CodeProfileWindow],
    /// Kineto trace summaries, ordered by rank.
    pub kineto: &'a [RankSummary],
    /// The problems the follower met.
    pub problems: &'a DataProblems,
}

impl ReportInput {
    /// Reads what there is of the run at `location` (text: a local path or an object-store
    /// URL, parsed once; a `Path`, always local; or a parsed `Location`) in one full pass of a
    /// [`ProfilerFollower`], and the Kineto trace files in `options`. Never fails: whatever
    /// cannot be read, a location that names none included, is described in
    /// [`ReportInput::notes`].
    pub fn load(location: impl IntoLocation, options: &LoadOptions) -> ReportInput {
        let (text, opened) = match location.into_location() {
            Ok(location) => (
                location.to_string(),
                smdebug_storage::open_storage(&location),
            ),
            Err(e) => match &e {
                smdebug_storage::Error::InvalidLocation { location, .. } => {
                    (location.clone(), Err(e))
                }
                _ => (String::new(), Err(e)),
            },
        };
        let location = text.as_str();
        match opened {
            Ok(storage) => {
                let complete = EndMarker::present(storage.as_ref()).ok();
                // One pass, aggregated as it reads: a poll hands out a bounded number of
                // samples and spans (their `args` not kept), which the digest takes in and drops.
                let mut follower = ProfilerFollower::new(Arc::clone(&storage))
                    .kineto_traces(options.traces.clone())
                    .span_args(false)
                    .items_per_poll(POLL_ITEMS);
                let mut profile = ProfileDigest::default();
                let mut code_windows = Vec::new();
                let mut kineto = None;
                loop {
                    let read = follower.poll();
                    profile.add_system_samples(&read.samples);
                    profile.add_spans(&read.spans);
                    merge_code_windows(&mut code_windows, read.code_windows);
                    if read.kineto.is_some() {
                        kineto = read.kineto;
                    }
                    if !read.more {
                        break;
                    }
                }
                let profile = Arc::new(profile);
                let mut input = ReportInput::from_followed(&FollowedRun {
                    location,
                    storage: Some(&storage),
                    complete,
                    profile: &profile,
                    code_profiles: &code_windows,
                    kineto: kineto.as_deref().unwrap_or_default(),
                    problems: follower.problems(),
                });
                if options.tensors {
                    input.scalars_of_run(location, &storage, options);
                }
                input
            }
            Err(e) => {
                let mut problems = Vec::new();
                let kineto = KinetoTraces::new(options.traces.clone()).poll(&mut problems);
                let mut followed = DataProblems::default();
                for p in problems {
                    followed.push(p);
                }
                let mut input = ReportInput::from_followed(&FollowedRun {
                    location,
                    storage: None,
                    complete: None,
                    profile: &Arc::default(),
                    code_profiles: &[],
                    kineto: kineto.as_deref().unwrap_or_default(),
                    problems: &followed,
                });
                input.notes.insert(
                    0,
                    crate::input::Note {
                        area: NoteArea::Run,
                        message: format!(
                            "Cannot open the run location: {e}. No profiler data was read."
                        ),
                    },
                );
                if options.tensors {
                    input.note(
                        NoteArea::Tensors,
                        format!("Cannot open the run's tensors: {e}."),
                    );
                }
                input
            }
        }
    }

    /// The report of the run a rule runner holds: its profiler data, the run's scalars and
    /// the Kineto trace files in `options`; nothing of the run is read again but the latest
    /// flame graphs and, unless `scalars` gives them, the scalar values (read to the end by a
    /// follower of the report's own). The rule statuses are not added (see
    /// [`ReportInput::with_rules`]).
    pub(crate) fn from_run(
        run: &RunState<'_>,
        options: &LoadOptions,
        scalars: Option<&dyn ScalarsSource>,
        beside: Option<&dyn ScalarsBeside>,
    ) -> ReportInput {
        let mut problems = Vec::new();
        let kineto = KinetoTraces::new(options.traces.clone()).poll(&mut problems);
        let mut followed = run.data_problems.clone();
        for p in problems {
            followed.push(p);
        }
        let location = run.location.to_string();
        let mut input = ReportInput::from_followed(&FollowedRun {
            location: &location,
            storage: Some(run.storage),
            complete: Some(run.summary.run_complete),
            profile: run.profile,
            code_profiles: run.code_profiles,
            kineto: kineto.as_deref().unwrap_or_default(),
            problems: &followed,
        });
        if options.tensors {
            // The followed scalars, complete when the runner read the run to its end marker.
            match scalars.and_then(|s| s.scalars(run.summary.run_complete)) {
                Some(followed) => input.scalars_followed(followed, options),
                None => {
                    let ahead = beside.and_then(|b| b.take(run.summary.run_complete));
                    input.scalars_read(&location, run.storage, options, ahead)
                }
            }
        }
        input
    }

    /// The report of what a follower gathered: no scalars and no rule statuses (see
    /// [`ReportInput::scalars_of_run`] and [`ReportInput::with_rules`]).
    pub fn from_followed(run: &FollowedRun<'_>) -> ReportInput {
        let mut input = ReportInput::empty(run.location);
        if run.storage.is_some() {
            input.run_complete(run.complete);
        }
        for problem in run.problems.list() {
            let area = match problem.area() {
                DataArea::System => NoteArea::System,
                DataArea::Spans => NoteArea::Spans,
                DataArea::CodeProfiles => NoteArea::CodeProfiles,
                DataArea::Traces => NoteArea::Traces,
            };
            input.note(area, sentence(&problem.to_string()));
        }
        if run.problems.dropped() > 0 {
            input.note(
                NoteArea::Run,
                format!(
                    "... and {} more problems with the profiler data.",
                    run.problems.dropped()
                ),
            );
        }
        if run.storage.is_some() {
            input.profile(run.profile);
        }
        if let Some(storage) = run.storage {
            load_code_profiles(
                &mut input,
                &ProfilerReader::new(Arc::clone(storage)),
                run.code_profiles,
            );
        }
        input.traces = run.kineto.to_vec();
        input
    }

    fn empty(location: &str) -> ReportInput {
        ReportInput {
            location: location.to_owned(),
            generated_at_us: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX)),
            ..ReportInput::default()
        }
    }

    fn run_complete(&mut self, complete: Option<bool>) {
        self.run_complete = complete;
        if complete == Some(false) {
            self.note(
                NoteArea::Run,
                format!(
                    "The run has no end marker ({}): it is still being written or \
                     stopped without finishing. Figures cover what was written so far; \
                     regenerate the report to see more.",
                    EndMarker::PATH
                ),
            );
        }
    }

    /// Takes the metrics and spans of `data` (shared, not copied), with a note for each kind
    /// that is missing.
    fn profile(&mut self, data: &Arc<ProfileDigest>) {
        self.profile = Arc::clone(data);
        if !self.has_metrics() && !self.notes.iter().any(|n| n.area == NoteArea::System) {
            self.note(
                NoteArea::System,
                "No system metrics were recorded (nothing under system/incremental/). Start the \
                 system sampler (SystemSampler, or `smdebug profile`) with the job to see CPU, \
                 GPU, memory, disk and network usage.",
            );
        }
        if self.span_count() == 0 && !self.notes.iter().any(|n| n.area == NoteArea::Spans) {
            self.note(
                NoteArea::Spans,
                "No framework spans were recorded (nothing under framework/pevents/). Record \
                 steps, data loading, forward and backward passes with SpanRecorder to see step \
                 durations and where the time goes.",
            );
        }
    }
}

/// Samples (and as many spans) a poll of [`ReportInput::load`]'s follower hands out at most.
const POLL_ITEMS: usize = 100_000;

/// A problem's line as a note, ending with a full stop.
fn sentence(line: &str) -> String {
    let mut out = line.to_owned();
    if !out.ends_with('.') {
        out.push('.');
    }
    out
}

/// Every code-profile window's summary, and the flame graphs of the latest
/// [`CODE_PROFILE_WINDOWS_SHOWN`]. A flame graph that cannot be read is a note.
fn load_code_profiles(
    input: &mut ReportInput,
    reader: &ProfilerReader,
    windows: &[CodeProfileWindow],
) {
    let first_shown = windows.len().saturating_sub(CODE_PROFILE_WINDOWS_SHOWN);
    for (i, window) in windows.iter().enumerate() {
        let flamegraph = if i < first_shown {
            None
        } else {
            match reader.code_profile_flamegraph(&window.file) {
                Ok(svg) => svg.map(|b| b.to_vec()),
                Err(e) => {
                    input.note(
                        NoteArea::CodeProfiles,
                        format!("{e}; the window's flame graph is left out."),
                    );
                    None
                }
            }
        };
        input.code_profiles.push(CodeProfile {
            file: window.file.clone(),
            summary: window.summary.clone(),
            flamegraph,
        });
    }
}
