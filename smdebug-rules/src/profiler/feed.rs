//! The runner's side of the profiler rules: reads the run's system-metrics and trace files as
//! they appear and cuts what is new into time-ordered windows.
//!
//! System-metrics files grow: the sampler republishes the file of the current window (every
//! 5 s by default) with more lines. Each file's samples are remembered by count, so a re-read
//! yields only the lines added since; a file is not fetched again while its size is unchanged,
//! and not looked at again once a later file of the same node exists and it was read after
//! that. Trace files are written once each and read once.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use smdebug_io::Storage;
use smdebug_profiler::reader::{ProfilerReader, Span, parse_system_lines_lenient, parse_trace};
use smdebug_profiler::system::SystemSample;

use crate::window::StepTimeline;

/// Offline evaluations (and large backlogs when following) are fed in windows of this much
/// job time, so that a firing's time says when in the job the condition was seen.
pub(crate) const CHUNK_US: u64 = 60 * 1_000_000;

/// At most this many data warnings are kept (the rest are counted).
const MAX_WARNINGS: usize = 20;

#[derive(Debug, Default)]
struct SystemFile {
    /// Samples already handed out.
    consumed: usize,
    /// Size at the last read.
    size: Option<u64>,
    /// No more lines will come.
    sealed: bool,
}

/// One window's worth of new data.
pub(crate) struct Chunk {
    pub samples: Vec<SystemSample>,
    pub spans: Vec<Span>,
    pub now_us: u64,
    pub final_window: bool,
}

pub(crate) struct ProfilerFeed {
    storage: Arc<dyn Storage>,
    reader: ProfilerReader,
    system: BTreeMap<String, SystemFile>,
    traces: BTreeSet<String>,
    pending_samples: Vec<SystemSample>,
    pending_spans: Vec<Span>,
    pub start_us: Option<u64>,
    pub latest_us: u64,
    pub steps: StepTimeline,
    /// Problems with the data that did not stop the evaluation (a corrupt line or file).
    pub warnings: Vec<String>,
    warnings_dropped: usize,
    warned: BTreeSet<(String, usize)>,
    /// Whether any profiler data was ever seen.
    pub seen_any: bool,
    /// Files fetched (for tests and diagnostics).
    pub fetches: u64,
}

impl ProfilerFeed {
    pub(crate) fn new(storage: Arc<dyn Storage>) -> Self {
        let reader = ProfilerReader::new(storage.clone());
        ProfilerFeed {
            storage,
            reader,
            system: BTreeMap::new(),
            traces: BTreeSet::new(),
            pending_samples: Vec::new(),
            pending_spans: Vec::new(),
            start_us: None,
            latest_us: 0,
            steps: StepTimeline::default(),
            warnings: Vec::new(),
            warnings_dropped: 0,
            warned: BTreeSet::new(),
            seen_any: false,
            fetches: 0,
        }
    }

    fn warn(&mut self, key: &str, line: usize, message: String) {
        if !self.warned.insert((key.to_string(), line)) {
            return;
        }
        if self.warnings.len() < MAX_WARNINGS {
            self.warnings.push(message);
        } else {
            self.warnings_dropped += 1;
        }
    }

    /// The warnings, with a count of those left out.
    pub(crate) fn warning_lines(&self) -> Vec<String> {
        let mut w = self.warnings.clone();
        if self.warnings_dropped > 0 {
            w.push(format!(
                "... and {} more data problems",
                self.warnings_dropped
            ));
        }
        w
    }

    /// Decodes a system file; a bad line is reported and skipped, the others are kept.
    fn parse_system(&mut self, key: &str, bytes: &[u8]) -> Vec<SystemSample> {
        let read = parse_system_lines_lenient(key, bytes);
        for (line, message) in read.bad {
            let text =
                format!("{key} line {line}: not a system-metrics record ({message}); line skipped");
            self.warn(key, line, text);
        }
        read.samples
    }

    /// Reads what is new in storage into the pending buffers. Returns how many samples and
    /// spans arrived.
    /// The bytes of `key`, counted as a fetch; `None` when it is gone (a file replaced or
    /// removed between listing and reading).
    fn fetch(
        &mut self,
        key: &str,
    ) -> Result<Option<impl std::ops::Deref<Target = [u8]> + use<>>, String> {
        match self.storage.get(key) {
            Ok(bytes) => {
                self.fetches += 1;
                Ok(Some(bytes))
            }
            Err(e) if e.is_not_found() => Ok(None),
            Err(e) => Err(format!("{key}: {e}")),
        }
    }

    pub(crate) fn poll(&mut self) -> Result<usize, String> {
        let mut arrived = 0;
        let files = self.reader.system_files().map_err(|e| e.to_string())?;
        let mut newest: BTreeMap<&str, u64> = BTreeMap::new();
        for f in &files {
            let n = newest.entry(f.node.as_str()).or_insert(f.start_s);
            *n = (*n).max(f.start_s);
        }
        let newest: BTreeMap<String, u64> = newest
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect();
        for file in &files {
            let superseded = newest.get(&file.node).is_some_and(|n| *n > file.start_s);
            let state = self.system.entry(file.key.clone()).or_default();
            if state.sealed {
                continue;
            }
            let size = self
                .storage
                .size(&file.key)
                .map_err(|e| format!("{}: {e}", file.key))?;
            if size.is_some() && size == state.size {
                state.sealed = superseded;
                continue;
            }
            let Some(bytes) = self.fetch(&file.key)? else {
                continue;
            };
            let samples = self.parse_system(&file.key, &bytes);
            let state = self.system.entry(file.key.clone()).or_default();
            state.size = Some(bytes.len() as u64);
            state.sealed = superseded;
            let from = state.consumed.min(samples.len());
            state.consumed = samples.len();
            arrived += samples.len() - from;
            self.pending_samples.extend(samples.into_iter().skip(from));
        }
        let traces = self.reader.trace_files().map_err(|e| e.to_string())?;
        let mut new_spans = Vec::new();
        for file in traces {
            if self.traces.contains(&file.key) {
                continue;
            }
            let Some(bytes) = self.fetch(&file.key)? else {
                continue;
            };
            self.traces.insert(file.key.clone());
            match parse_trace(&file, &bytes) {
                Ok(spans) => new_spans.extend(spans),
                Err(e) => {
                    self.warn(&file.key, 0, format!("{e}; trace file skipped"));
                }
            }
        }
        arrived += new_spans.len();
        self.steps.extend(&new_spans);
        self.pending_spans.extend(new_spans);
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
            self.seen_any = true;
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
