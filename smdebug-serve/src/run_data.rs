//! What is known of one served run now: the model every view reads (the panels, the overview,
//! the verdicts, the pushes), filled by the follower pass in [`run`](crate::run).

use smdebug_core::EndReason;
use smdebug_format::progress::Progress;
use smdebug_format::stop::StopRequest;
use smdebug_read::follow::DataProblems;
use smdebug_read::profile::CodeProfileWindow;
use smdebug_rules::Summary;
use std::collections::VecDeque;

use crate::journal::Journal;
use crate::processes::{Arrivals, ProcessView};
use crate::profile_model::{Digest, StepSpans, TraceIndex};
use crate::views::{Changed, RunStanding};
use smdebug_analysis::scalars::ScalarSummaries;

/// At most this many data warnings are kept.
const MAX_WARNINGS: usize = 50;

/// What is known of a run now.
#[derive(Debug, Default)]
pub(crate) struct RunData {
    /// Bumped whenever anything below changes.
    pub version: u64,
    /// Whether anything of the run was found yet.
    pub exists: bool,
    /// Why the run's location cannot be opened (a bad URL, no credentials).
    pub open_error: Option<String>,
    /// The end marker is there.
    pub complete: bool,
    /// The tensor follower read the run to its end marker: the steps, names and scalars are
    /// all of the run's.
    pub tensors_ended: bool,
    /// Why the run ended, from the end marker (a rule's stop names the rule and step).
    pub end_reason: Option<EndReason>,
    /// Whether the server can write into the run (for stop requests).
    pub writable: bool,
    /// A stop request already in the run.
    pub stop_request: Option<StopRequest>,
    /// Why the run's stop request cannot be read (not JSON, a field of the wrong type, too
    /// large, a FIFO): the job does not honour it.
    pub stop_request_error: Option<String>,
    /// System metrics and spans aggregated as they are read, in a size that does not grow with
    /// the run ([`crate::profile_model`]): the panels' whole-run charts and figures, and the
    /// model "Download report" draws; shared with a report being drawn (new data then copy
    /// it once, `Arc::make_mut`).
    pub digest: Digest,
    /// The trace files read: a window's spans are read again from them.
    pub traces: TraceIndex,
    /// The slowest step spans and when the steps started.
    pub step_spans: StepSpans,
    /// Code-profile windows, ordered by start, node and worker.
    pub code_windows: Vec<CodeProfileWindow>,
    /// The profiler follower's problems with the data, typed.
    pub problems: DataProblems,
    /// Global steps saved by the hook, in order.
    pub steps: Vec<u64>,
    /// Tensor names, sorted.
    pub tensors: Vec<String>,
    /// Scalar tensors by name: per mode, their steps and a fixed number of buckets of their
    /// values ([`smdebug_analysis::scalars`]); a window finer than the buckets is read again from the
    /// run's files.
    pub scalars: ScalarSummaries,
    /// Index files listed but not read yet.
    pub index_pending: usize,
    /// The index files of the backlog being read (those read of it and `index_pending`): the
    /// M of "indexing N of M files"; 0 when there is no backlog.
    pub index_backlog: usize,
    /// The run's location is a local folder that does not exist: since when this server has
    /// seen it missing, seconds since the epoch.
    pub missing_since: Option<f64>,
    /// The rule runner's statuses, when it wrote them into the run.
    pub rules: Option<Summary>,
    /// The training job's progress files (`progress/<worker>.json`), in worker order: planned
    /// steps, last step, what its writers wrote and dropped.
    pub progress: Vec<Progress>,
    /// The progress files' course: (newest wall time, most steps done) each time the steps
    /// moved, the last [`processes::PROGRESS_HISTORY`]; the step rate when the run has no step
    /// spans.
    pub progress_history: VecDeque<(f64, u64)>,
    /// The processes writing the run (its identity files), as last looked up.
    pub processes: Vec<ProcessView>,
    /// Problems with the data that were worked around.
    pub warnings: Vec<String>,
    /// The run's folder (or every file of it) was deleted after it was read; its view was
    /// cleared.
    pub gone: bool,
    /// Why the run's view was last cleared: deleted, replaced or written again from step 0.
    pub identity: Option<String>,
    /// How many times the view was cleared.
    pub resets: u64,
    /// What changed, area by area: the page refetches a panel only when its area changed.
    pub changed: Changed,
    /// When the follower saw new data arrive, once it had caught up.
    pub arrivals: Arrivals,
    /// What the follower found new, numbered (the pushes' deltas).
    pub journal: Journal,
}

impl RunData {
    pub(crate) fn warn(&mut self, message: String) {
        if self.warnings.len() < MAX_WARNINGS && !self.warnings.contains(&message) {
            self.warnings.push(message);
        }
    }

    /// Where the run's files stand, as the run list and the overview show it.
    pub fn standing(&self) -> RunStanding {
        RunStanding {
            exists: self.exists,
            open_error: self.open_error.clone(),
            complete: self.complete,
            end_reason: self.end_reason.clone(),
            writable: self.writable,
            stop_requested: self.stop_request.as_ref().map(|r| r.reason.clone()),
            stop_request_error: self.stop_request_error.clone(),
        }
    }

    /// First and last time of any sample or span, µs since the epoch.
    pub fn time_range(&self) -> Option<(u64, u64)> {
        self.digest.time_range()
    }
}
