//! The runner's side of the profiler rules: what smdebug-profiler's
//! [`ProfilerFollower`] reads of the run, cut into time-ordered windows.

use std::collections::BTreeMap;
use std::sync::Arc;

use smdebug_io::Storage;
use smdebug_profiler::follow::{DataArea, DataProblem, DataProblems, ProfilerFollower};
use smdebug_profiler::reader::{CodeProfileWindow, Span};
use smdebug_profiler::system::SystemSample;

use crate::status::ProfilerSeen;
use crate::window::StepTimeline;

/// Offline evaluations (and large backlogs when following) are fed in windows of this much
/// job time, so that a firing's time says when in the job the condition was seen.
pub(crate) const CHUNK_US: u64 = 60 * 1_000_000;

/// One window's worth of new data.
pub(crate) struct Chunk {
    pub samples: Vec<SystemSample>,
    pub spans: Vec<Span>,
    pub now_us: u64,
    pub final_window: bool,
}

pub(crate) struct ProfilerFeed {
    follower: ProfilerFollower,
    pending_samples: Vec<SystemSample>,
    pending_spans: Vec<Span>,
    /// Code-profile windows that appeared since the last [`take_code_windows`](Self::take_code_windows).
    pending_code: Vec<CodeProfileWindow>,
    pub start_us: Option<u64>,
    pub latest_us: u64,
    pub steps: StepTimeline,
    /// Which kinds of profiler data were ever seen.
    pub seen: ProfilerSeen,
}

impl ProfilerFeed {
    pub(crate) fn new(storage: Arc<dyn Storage>) -> Self {
        ProfilerFeed {
            follower: ProfilerFollower::new(storage),
            pending_samples: Vec::new(),
            pending_spans: Vec::new(),
            pending_code: Vec::new(),
            start_us: None,
            latest_us: 0,
            steps: StepTimeline::default(),
            seen: ProfilerSeen::default(),
        }
    }

    /// Problems with the data that did not stop the evaluation (a corrupt line or file).
    pub(crate) fn problems(&self) -> &DataProblems {
        self.follower.problems()
    }

    /// The code-profile windows that appeared since the last call.
    pub(crate) fn take_code_windows(&mut self) -> Vec<CodeProfileWindow> {
        std::mem::take(&mut self.pending_code)
    }

    /// Reads what is new into the pending buffers. Returns how many samples and spans
    /// arrived; an error when system metrics or trace files could not be listed or read.
    pub(crate) fn poll(&mut self) -> Result<usize, DataProblem> {
        let increment = self.follower.poll();
        if let Some(failure) = increment
            .problems
            .iter()
            .find(|p| p.is_read_failure() && matches!(p.area(), DataArea::System | DataArea::Spans))
        {
            return Err(failure.clone());
        }
        let arrived = increment.samples.len() + increment.spans.len();
        self.seen.samples |= !increment.samples.is_empty();
        self.seen.spans |= !increment.spans.is_empty();
        self.steps.extend(&increment.spans);
        // The rules read records one by one (a window is a time-ordered slice of them).
        self.pending_samples
            .extend(increment.samples.iter().map(|s| s.to_sample()));
        self.pending_spans.extend(increment.spans);
        self.pending_code.extend(increment.code_windows);
        let first = self
            .pending_samples
            .iter()
            .map(SystemSample::timestamp_us)
            .chain(self.pending_spans.iter().map(|s| s.start_us))
            .min();
        let last = self
            .pending_samples
            .iter()
            .map(SystemSample::timestamp_us)
            .chain(self.pending_spans.iter().map(|s| s.end_us))
            .max();
        if let Some(first) = first {
            self.start_us = Some(self.start_us.map_or(first, |s| s.min(first)));
        }
        if let Some(last) = last {
            self.latest_us = self.latest_us.max(last);
        }
        Ok(arrived)
    }

    /// Hands out everything pending, in windows of [`CHUNK_US`] of job time. The last window
    /// is final when `final_window`; `wall_us` (following a live run) moves `now_us` on even
    /// without data. With nothing pending and nothing final, no window.
    pub(crate) fn take_chunks(&mut self, final_window: bool, wall_us: Option<u64>) -> Vec<Chunk> {
        let mut samples = std::mem::take(&mut self.pending_samples);
        let mut spans = std::mem::take(&mut self.pending_spans);
        samples.sort_by(|a, b| a.timestamp.total_cmp(&b.timestamp));
        spans.sort_by_key(|s| (s.end_us, s.start_us));
        let now = self.latest_us.max(wall_us.unwrap_or(0));
        let start = self.start_us.unwrap_or(now);
        let chunk_of = |t: u64| t.saturating_sub(start) / CHUNK_US;
        let mut chunks: BTreeMap<u64, Chunk> = BTreeMap::new();
        let empty = |index: u64| Chunk {
            samples: Vec::new(),
            spans: Vec::new(),
            now_us: start.saturating_add((index + 1).saturating_mul(CHUNK_US)),
            final_window: false,
        };
        for s in samples {
            let i = chunk_of(s.timestamp_us());
            chunks.entry(i).or_insert_with(|| empty(i)).samples.push(s);
        }
        for s in spans {
            let i = chunk_of(s.end_us);
            chunks.entry(i).or_insert_with(|| empty(i)).spans.push(s);
        }
        let mut out: Vec<Chunk> = chunks.into_values().collect();
        if out.is_empty() && (final_window || wall_us.is_some()) {
            out.push(empty(0));
        }
        if let Some(last) = out.last_mut() {
            last.now_us = now;
            last.final_window = final_window;
        }
        for c in &mut out {
            c.now_us = c.now_us.min(now);
        }
        out
    }
}
