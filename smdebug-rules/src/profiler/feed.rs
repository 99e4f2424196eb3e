//! The runner's side of the profiler rules: what smdebug-profiler's follower reads of the run
//! (through a [`ProfilerSubscription`], shared with the dashboard in a `Session`), cut into
//! time-ordered windows.

use std::collections::BTreeMap;

use smdebug_format::system::SystemSample;
use smdebug_read::follow::{
    DataArea, DataProblem, DataProblems, ITEMS_PER_READ, Increment, ProfilerSubscription,
};
use smdebug_read::profile::{CodeProfileWindow, Span, SystemSamples};

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
    /// A backlog (a whole run read offline) comes in pieces of at most
    /// [`ITEMS_PER_READ`] samples and spans, each cut into windows and handed to the rules
    /// before the next is taken, so the feed holds a bounded part of the run at a time.
    subscription: ProfilerSubscription,
    /// Every problem met so far, each once.
    problems: DataProblems,
    /// Grouped by series as the follower hands them out (16 bytes a sample); a window's are
    /// made records only when the window is handed out, so that a whole run read at once
    /// (offline) is not held as two million records of four strings each.
    pending_samples: SystemSamples,
    pending_spans: Vec<Span>,
    /// Code-profile windows that appeared since the last [`take_code_windows`](Self::take_code_windows).
    pending_code: Vec<CodeProfileWindow>,
    pub start_us: Option<u64>,
    pub latest_us: u64,
    pub steps: StepTimeline,
    /// Which kinds of profiler data were ever seen.
    pub seen: ProfilerSeen,
    /// The last poll left files to read.
    pub more: bool,
    /// The latest sample time read, when the last poll that read samples handed out a full
    /// piece of them (more may follow); likewise for spans (their latest end).
    backlog_samples_us: Option<u64>,
    backlog_spans_us: Option<u64>,
}

impl ProfilerFeed {
    pub(crate) fn new(subscription: ProfilerSubscription) -> Self {
        ProfilerFeed {
            subscription,
            problems: DataProblems::default(),
            pending_samples: SystemSamples::default(),
            pending_spans: Vec::new(),
            pending_code: Vec::new(),
            start_us: None,
            latest_us: 0,
            steps: StepTimeline::default(),
            seen: ProfilerSeen::default(),
            more: false,
            backlog_samples_us: None,
            backlog_spans_us: None,
        }
    }

    /// Problems with the data that did not stop the evaluation (a corrupt line or file).
    pub(crate) fn problems(&self) -> &DataProblems {
        &self.problems
    }

    /// The code-profile windows that appeared since the last call.
    pub(crate) fn take_code_windows(&mut self) -> Vec<CodeProfileWindow> {
        std::mem::take(&mut self.pending_code)
    }

    /// Takes what is new into the pending buffers. Returns how many samples and spans
    /// arrived; an error when system metrics or trace files could not be listed or read.
    pub(crate) fn poll(&mut self) -> Result<usize, DataProblem> {
        let increments = self.subscription.poll();
        if increments.is_empty() {
            self.more = false;
        }
        let mut arrived = 0;
        for increment in increments {
            arrived += self.take(Increment::into_owned(increment))?;
        }
        Ok(arrived)
    }

    fn take(&mut self, increment: Increment) -> Result<usize, DataProblem> {
        for p in &increment.problems {
            self.problems.push(p.clone());
        }
        if let Some(failure) = increment
            .problems
            .iter()
            .find(|p| p.is_read_failure() && matches!(p.area(), DataArea::System | DataArea::Spans))
        {
            return Err(failure.clone());
        }
        let arrived = increment.samples.len() + increment.spans.len();
        self.more = increment.more;
        // A full piece of a kind says more of its time may follow; a smaller one, or the end
        // of the backlog, that the kind is read through (an empty piece says nothing: the
        // source held that kind back while the other caught up).
        let backlog = |latest: Option<u64>, len: usize, was: Option<u64>| match latest {
            _ if !increment.more => None,
            Some(t) if len >= ITEMS_PER_READ => Some(t),
            Some(_) => None,
            None => was,
        };
        let latest_sample = increment.samples.iter().map(|s| s.timestamp_us()).max();
        let latest_span = increment.spans.iter().map(|s| s.end_us).max();
        self.backlog_samples_us = backlog(
            latest_sample,
            increment.samples.len(),
            self.backlog_samples_us,
        );
        self.backlog_spans_us = backlog(latest_span, increment.spans.len(), self.backlog_spans_us);
        self.seen.samples |= !increment.samples.is_empty();
        self.seen.spans |= !increment.spans.is_empty();
        self.steps.extend(&increment.spans);
        let times = increment
            .samples
            .iter()
            .map(|s| (s.timestamp_us(), s.timestamp_us()))
            .chain(increment.spans.iter().map(|s| (s.start_us, s.end_us)));
        for (first, last) in times {
            self.start_us = Some(self.start_us.map_or(first, |s| s.min(first)));
            self.latest_us = self.latest_us.max(last);
        }
        self.pending_samples.append(increment.samples);
        self.pending_spans.extend(increment.spans);
        self.pending_code.extend(increment.code_windows);
        Ok(arrived)
    }

    /// Hands out what is pending, in windows of [`CHUNK_US`] of job time, one at a time (a
    /// window's samples become records as it is handed out). The last window is final when
    /// `final_window` and no file is left to read; `wall_us` (following a live run) moves
    /// `now_us` on even without data. With nothing pending and nothing final, no window.
    ///
    /// While a backlog is read in pieces, a kind of data (samples, spans) whose last piece was
    /// full may have more of its time to come: windows from the one holding the earliest of
    /// those kinds' latest times on stay pending, so that each window is handed out with both
    /// kinds read through it, as a read of the whole run at once would.
    pub(crate) fn take_chunks(&mut self, final_window: bool, wall_us: Option<u64>) -> Chunks {
        let final_window = final_window && !self.more;
        let cut = if self.more {
            self.backlog_samples_us
                .into_iter()
                .chain(self.backlog_spans_us)
                .min()
        } else {
            None
        };
        let (samples, spans) = self.ready_before(cut);
        let mut spans = spans;
        spans.sort_by_key(|s| (s.end_us, s.start_us));
        let now = self.latest_us.max(wall_us.unwrap_or(0));
        let start = self.start_us.unwrap_or(now);
        let chunk_of = |t: u64| t.saturating_sub(start) / CHUNK_US;
        // Each sample's window, time and place, by window then time (file order among equal
        // times): a window's samples are a run of this list.
        let mut order: Vec<(u64, f64, u32, u32)> = samples
            .iter()
            .map(|s| {
                let window = chunk_of(s.timestamp_us());
                (window, s.timestamp, s.series as u32, s.point as u32)
            })
            .collect();
        order.sort_by(|a, b| a.0.cmp(&b.0).then(a.1.total_cmp(&b.1)));
        let mut by_window: BTreeMap<u64, Vec<Span>> = BTreeMap::new();
        for s in spans {
            by_window.entry(chunk_of(s.end_us)).or_default().push(s);
        }
        Chunks {
            samples,
            order: order.into_iter().peekable(),
            spans: by_window.into_iter().peekable(),
            start,
            now,
            final_window,
            empty_window: final_window || wall_us.is_some(),
        }
    }
}

impl ProfilerFeed {
    /// The pending samples and spans of the windows before the one holding `cut` (all of them
    /// without a cut); the others stay pending.
    fn ready_before(&mut self, cut: Option<u64>) -> (SystemSamples, Vec<Span>) {
        let samples = std::mem::take(&mut self.pending_samples);
        let spans = std::mem::take(&mut self.pending_spans);
        let Some(cut) = cut else {
            return (samples, spans);
        };
        let start = self.start_us.unwrap_or(cut);
        let chunk_of = |t: u64| t.saturating_sub(start) / CHUNK_US;
        let first_held = chunk_of(cut);
        let (ready_spans, held_spans) = spans
            .into_iter()
            .partition(|s| chunk_of(s.end_us) < first_held);
        self.pending_spans = held_spans;
        let mut ready = SystemSamples::default();
        for s in samples.iter() {
            let names = [s.node_id, s.metric_type, s.name, s.dimension];
            if chunk_of(s.timestamp_us()) < first_held {
                ready.push(names, s.value, s.timestamp);
            } else {
                self.pending_samples.push(names, s.value, s.timestamp);
            }
        }
        (ready, ready_spans)
    }
}

/// The windows [`ProfilerFeed::take_chunks`] hands out, in time order.
pub(crate) struct Chunks {
    samples: SystemSamples,
    order: std::iter::Peekable<std::vec::IntoIter<(u64, f64, u32, u32)>>,
    spans: std::iter::Peekable<std::collections::btree_map::IntoIter<u64, Vec<Span>>>,
    start: u64,
    now: u64,
    final_window: bool,
    /// One empty window when there is no data (nothing handed out yet).
    empty_window: bool,
}

impl Iterator for Chunks {
    type Item = Chunk;

    fn next(&mut self) -> Option<Chunk> {
        let next_samples = self.order.peek().map(|o| o.0);
        let next_spans = self.spans.peek().map(|(i, _)| *i);
        let index = match (next_samples, next_spans) {
            (None, None) if self.empty_window => 0,
            (None, None) => return None,
            (a, b) => a.into_iter().chain(b).min().unwrap_or(0),
        };
        self.empty_window = false;
        let mut chunk = Chunk {
            samples: Vec::new(),
            spans: Vec::new(),
            now_us: self
                .start
                .saturating_add((index + 1).saturating_mul(CHUNK_US)),
            final_window: false,
        };
        while let Some((_, _, series, point)) = self.order.next_if(|o| o.0 == index) {
            let sample = self.samples.at(series as usize, point as usize);
            chunk.samples.push(sample.to_sample());
        }
        if next_spans == Some(index) {
            chunk.spans = self
                .spans
                .next()
                .map(|(_, spans)| spans)
                .unwrap_or_default();
        }
        if self.order.peek().is_none() && self.spans.peek().is_none() {
            chunk.now_us = self.now;
            chunk.final_window = self.final_window;
        }
        chunk.now_us = chunk.now_us.min(self.now);
        Some(chunk)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: u64 = 1_700_000_000_000_000;

    fn feed() -> (tempfile::TempDir, ProfilerFeed) {
        let dir = tempfile::tempdir().unwrap();
        let storage = std::sync::Arc::new(smdebug_storage::LocalStorage::new(dir.path()).unwrap());
        let source = smdebug_read::follow::ProfilerSource::new(storage);
        (dir, ProfilerFeed::new(source.subscribe()))
    }

    fn span(name: &str, end_s: u64) -> Span {
        Span {
            phase: "Forward".into(),
            name: name.into(),
            start_us: T0 + end_s * 1_000_000 - 1_000,
            end_us: T0 + end_s * 1_000_000,
            node: "algo-1".into(),
            worker: Some(0),
            step: None,
            mode: None,
            args: Default::default(),
        }
    }

    /// (series name, value) of a window's samples, in the order handed out.
    fn names(chunk: &Chunk) -> Vec<(String, f64)> {
        chunk
            .samples
            .iter()
            .map(|s| (s.name.clone(), s.value))
            .collect()
    }

    #[test]
    fn windows_come_one_a_minute_in_time_order_with_file_order_among_equal_times() {
        let (_dir, mut f) = feed();
        let at = |s: f64| (T0 as f64) / 1e6 + s;
        // File order: a sample of minute 1, two of second 1 (cpu1 first), one of minute 2.
        for (name, value, t) in [
            ("cpu0", 1.0, at(61.0)),
            ("cpu1", 2.0, at(1.0)),
            ("cpu0", 3.0, at(1.0)),
            ("cpu0", 4.0, at(125.0)),
        ] {
            f.pending_samples
                .push(["algo-1", "cpu", name, "CPUUtilization"], value, t);
        }
        f.pending_spans = vec![span("late", 190), span("early", 30)];
        f.start_us = Some(T0);
        f.latest_us = T0 + 190_000_000;
        let chunks: Vec<Chunk> = f.take_chunks(true, None).collect();
        assert_eq!(chunks.len(), 4);
        assert_eq!(
            names(&chunks[0]),
            [("cpu1".to_owned(), 2.0), ("cpu0".to_owned(), 3.0)]
        );
        assert_eq!(chunks[0].spans, [span("early", 30)]);
        assert_eq!(names(&chunks[1]), [("cpu0".to_owned(), 1.0)]);
        assert_eq!(names(&chunks[2]), [("cpu0".to_owned(), 4.0)]);
        assert!(chunks[3].samples.is_empty());
        assert_eq!(chunks[3].spans, [span("late", 190)]);
        let ends: Vec<(u64, bool)> = chunks
            .iter()
            .map(|c| ((c.now_us - T0) / 1_000_000, c.final_window))
            .collect();
        assert_eq!(ends, [(60, false), (120, false), (180, false), (190, true)]);
        // Everything was handed out.
        assert_eq!(f.take_chunks(false, None).count(), 0);
    }

    #[test]
    fn with_nothing_pending_only_a_final_window_or_the_clock_gives_one() {
        let (_dir, mut f) = feed();
        assert_eq!(f.take_chunks(false, None).count(), 0);
        let last: Vec<Chunk> = f.take_chunks(true, None).collect();
        assert_eq!(last.len(), 1);
        assert!(last[0].final_window && last[0].samples.is_empty() && last[0].spans.is_empty());
        let ticking: Vec<Chunk> = f.take_chunks(false, Some(T0)).collect();
        assert_eq!(ticking.len(), 1);
        assert_eq!((ticking[0].now_us, ticking[0].final_window), (T0, false));
    }
}
