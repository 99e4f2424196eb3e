//! Reading system metrics, framework spans and code profiles back: time-range and step-range queries with
//! node, worker, type and phase filters, over files written by this crate or by Python
//! smdebug / SageMaker Debugger.
//!
//! ```no_run
//! use smdebug_core::Mode;
//! use smdebug_read::profile::{ProfilerReader, SpanQuery, SystemQuery};
//!
//! let reader = ProfilerReader::open("/tmp/run")?;
//! let cpu = reader.system_samples(&SystemQuery::default().metric_type("cpu"))?;
//! let steps = reader.spans(&SpanQuery::default().steps(Mode::Train, 10..=20))?;
//! # Ok::<(), smdebug_read::ProfileError>(())
//! ```

mod code;
mod collected;
pub mod error;
mod export;
mod points;
mod span_store;
mod spans;
#[cfg(test)]
mod spans_compare_tests;
mod system;
mod system_fast;
mod system_samples;
mod trace_json;

use std::ops::RangeInclusive;
use std::sync::Arc;

use smdebug_core::Mode;
use smdebug_storage::Storage;

pub use code::{CodeProfileWindow, CodeProfiles, MAX_CODE_PROFILE_BYTES, MAX_CODE_SUMMARY_BYTES};
pub use collected::{MetricSeries, ProfileData, SampleBatch};
pub use error::{ProfileError, Result};
pub use export::chrome_trace;
pub use points::Points;
pub use span_store::{SpanBatch, SpanRef, SpanStore};
pub use spans::{Span, parse_trace, parse_trace_without_args};
pub(crate) use system::long_line;
pub use system::{
    MAX_SYSTEM_LINE_BYTES, SYSTEM_READ_CHUNK, SystemChunk, SystemLines, parse_system_chunk,
    parse_system_lines, parse_system_lines_lenient,
};
pub use system_samples::{SampleRef, SystemSamples};

use smdebug_format::code_profile::{CodeProfileFile, CodeProfileSummary};
use smdebug_format::system::{SystemFileName, SystemSample, parse_system_file_key};
use smdebug_format::trace::{
    PYTHONTIMELINE_SUFFIX, TRACE_PREFIX, TraceFileName, parse_trace_file_key,
};

/// How far before a query's start, and after its end, trace files are considered: a file is
/// named after its last event's end, so an event overlapping the query can sit in a file
/// named later (Python smdebug uses the same three minutes).
pub const TRACE_FILE_SLACK_US: u64 = 3 * 60 * 1_000_000;

/// Which system samples to return. Empty filters match everything.
#[derive(Clone, Debug, Default)]
pub struct SystemQuery {
    start_us: Option<u64>,
    end_us: Option<u64>,
    nodes: Vec<String>,
    types: Vec<String>,
    names: Vec<String>,
    dimensions: Vec<String>,
}

impl SystemQuery {
    /// Samples at or after `start_us` and at or before `end_us` (microseconds since the epoch).
    pub fn time_range(mut self, start_us: u64, end_us: u64) -> Self {
        self.start_us = Some(start_us);
        self.end_us = Some(end_us);
        self
    }

    /// Only this node (call again to add more).
    pub fn node(mut self, node: impl Into<String>) -> Self {
        self.nodes.push(node.into());
        self
    }

    /// Only this `Type` (call again to add more).
    pub fn metric_type(mut self, metric_type: impl Into<String>) -> Self {
        self.types.push(metric_type.into());
        self
    }

    /// Only this `Name` (call again to add more).
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.names.push(name.into());
        self
    }

    /// Only this `Dimension` (call again to add more).
    pub fn dimension(mut self, dimension: impl Into<String>) -> Self {
        self.dimensions.push(dimension.into());
        self
    }

    fn matches(&self, sample: &SystemSample) -> bool {
        let listed =
            |list: &[String], value: &str| list.is_empty() || list.iter().any(|v| v == value);
        let at = sample.timestamp_us();
        self.start_us.is_none_or(|start| at >= start)
            && self.end_us.is_none_or(|end| at <= end)
            && listed(&self.nodes, &sample.node_id)
            && listed(&self.types, &sample.metric_type)
            && listed(&self.names, &sample.name)
            && listed(&self.dimensions, &sample.dimension)
    }
}

/// Which spans to return. Empty filters match everything.
#[derive(Clone, Debug, Default)]
pub struct SpanQuery {
    start_us: Option<u64>,
    end_us: Option<u64>,
    steps: Option<(Option<Mode>, RangeInclusive<u64>)>,
    nodes: Vec<String>,
    workers: Vec<u32>,
    phases: Vec<String>,
}

impl SpanQuery {
    /// Spans overlapping `[start_us, end_us]` (microseconds since the epoch): those running
    /// at either end and those inside.
    pub fn time_range(mut self, start_us: u64, end_us: u64) -> Self {
        self.start_us = Some(start_us);
        self.end_us = Some(end_us);
        self
    }

    /// Spans of steps `steps` in `mode`.
    pub fn steps(mut self, mode: Mode, steps: RangeInclusive<u64>) -> Self {
        self.steps = Some((Some(mode), steps));
        self
    }

    /// Spans of steps `steps` in any mode (spans whose mode is unknown included).
    pub fn steps_any_mode(mut self, steps: RangeInclusive<u64>) -> Self {
        self.steps = Some((None, steps));
        self
    }

    /// Only this node (call again to add more).
    pub fn node(mut self, node: impl Into<String>) -> Self {
        self.nodes.push(node.into());
        self
    }

    /// Only this worker (call again to add more).
    pub fn worker(mut self, worker: u32) -> Self {
        self.workers.push(worker);
        self
    }

    /// Only this phase row (`Forward`, `Step:ModeKeys.TRAIN`; call again to add more).
    pub fn phase(mut self, phase: impl Into<String>) -> Self {
        self.phases.push(phase.into());
        self
    }

    fn matches(&self, span: &Span) -> bool {
        let in_time = self.start_us.is_none_or(|start| span.end_us >= start)
            && self.end_us.is_none_or(|end| span.start_us <= end);
        let in_steps = match &self.steps {
            None => true,
            Some((mode, range)) => {
                span.step.is_some_and(|step| range.contains(&step))
                    && mode.is_none_or(|m| span.mode.is_none_or(|sm| sm == m))
            }
        };
        in_time
            && in_steps
            && (self.nodes.is_empty() || self.nodes.contains(&span.node))
            && (self.workers.is_empty() || span.worker.is_some_and(|w| self.workers.contains(&w)))
            && (self.phases.is_empty() || self.phases.contains(&span.phase))
    }
}

/// Reads a run's profiler files through its smdebug-io [`Storage`].
#[derive(Clone)]
pub struct ProfilerReader {
    storage: Arc<dyn Storage>,
}

impl ProfilerReader {
    /// A reader over the run `storage`.
    pub fn new(storage: Arc<dyn Storage>) -> Self {
        Self { storage }
    }

    /// A reader over a run location: a local path or an object-store URL (text, a `Path` or a
    /// parsed `Location`).
    pub fn open(location: impl smdebug_storage::IntoLocation) -> Result<Self> {
        Ok(Self::new(smdebug_storage::open_storage(location)?))
    }

    /// Every code-profile window that has a summary, ordered by start, then node and worker
    /// (a window's summary is written after its other files).
    pub fn code_profile_files(&self) -> Result<Vec<CodeProfileFile>> {
        code::code_profile_files(self.storage.as_ref())
    }

    /// The summary of `file`'s window; [`ProfileError::MalformedCodeProfile`]
    /// when it is not a summary or is larger than [`MAX_CODE_SUMMARY_BYTES`].
    pub fn code_profile_summary(&self, file: &CodeProfileFile) -> Result<CodeProfileSummary> {
        code::code_profile_summary(self.storage.as_ref(), file)
    }

    /// Every window with its summary. A summary that cannot be read or parsed is a warning and
    /// its window is left out; only failing to list the folder is an error.
    pub fn code_profiles(&self) -> Result<CodeProfiles> {
        code::code_profiles(self.storage.as_ref())
    }

    /// The window's flame graph (SVG); `None` when it has none (a window without samples).
    /// It comes from the run: show it as an image (`<img>`), where its script does not run.
    pub fn code_profile_flamegraph(&self, file: &CodeProfileFile) -> Result<Option<bytes::Bytes>> {
        code::optional(self.storage.as_ref(), &file.flamegraph_key())
    }

    /// The window's profile in pprof's protobuf format, gzip-compressed; `None` when absent.
    pub fn code_profile_pprof(&self, file: &CodeProfileFile) -> Result<Option<bytes::Bytes>> {
        code::optional(self.storage.as_ref(), &file.pprof_key())
    }

    /// Every system-metrics file, ordered by window start, then node.
    pub fn system_files(&self) -> Result<Vec<SystemFileName>> {
        let mut files: Vec<SystemFileName> = self
            .storage
            .list("system")?
            .iter()
            .filter_map(|key| parse_system_file_key(key))
            .collect();
        files.sort_by(|a, b| (a.start_s, &a.node).cmp(&(b.start_s, &b.node)));
        Ok(files)
    }

    /// Every framework trace file, ordered by end time.
    pub fn trace_files(&self) -> Result<Vec<TraceFileName>> {
        let mut files: Vec<TraceFileName> = self
            .storage
            .list(TRACE_PREFIX)?
            .iter()
            .filter_map(|key| parse_trace_file_key(key))
            .filter(|f| f.suffix == PYTHONTIMELINE_SUFFIX || f.suffix == "model_timeline.json")
            .collect();
        files.sort_by(|a, b| (a.end_us, &a.key).cmp(&(b.end_us, &b.key)));
        Ok(files)
    }

    /// The samples matching `query`, ordered by time (file order within one time).
    ///
    /// Only files that can hold matching samples are read: per node, from the last file
    /// starting at or before the query start up to the last starting at or before its end.
    pub fn system_samples(&self, query: &SystemQuery) -> Result<Vec<SystemSample>> {
        let files = self.system_files()?;
        let mut samples = Vec::new();
        for (index, file) in files.iter().enumerate() {
            if !query.nodes.is_empty() && !query.nodes.contains(&file.node) {
                continue;
            }
            if let Some(end) = query.end_us
                && file.start_s.saturating_mul(1_000_000) > end
            {
                continue;
            }
            if let Some(start) = query.start_us {
                // The next file of the same node starts after this one ends.
                let next_start = files[index + 1..]
                    .iter()
                    .find(|f| f.node == file.node)
                    .map(|f| f.start_s.saturating_mul(1_000_000));
                if next_start.is_some_and(|next| next <= start) {
                    continue;
                }
            }
            samples.extend(
                system::read_system_file(self.storage.as_ref(), &file.key)?
                    .into_iter()
                    .filter(|s| query.matches(s)),
            );
        }
        samples.sort_by(|a, b| a.timestamp.total_cmp(&b.timestamp));
        Ok(samples)
    }

    /// The spans matching `query`, ordered by start time.
    ///
    /// With a time range, only trace files named within [`TRACE_FILE_SLACK_US`] of it are
    /// read; a step query reads every file.
    pub fn spans(&self, query: &SpanQuery) -> Result<Vec<Span>> {
        let mut spans = Vec::new();
        for file in self.trace_files()? {
            if query.steps.is_none() {
                if query.start_us.is_some_and(|start| file.end_us < start) {
                    continue;
                }
                if query
                    .end_us
                    .is_some_and(|end| file.end_us > end.saturating_add(TRACE_FILE_SLACK_US))
                {
                    continue;
                }
            }
            if !query.nodes.is_empty() && !query.nodes.contains(&file.node) {
                continue;
            }
            let bytes = self.storage.get(&file.key)?;
            spans.extend(
                parse_trace(&file, &bytes)?
                    .into_iter()
                    .filter(|s| query.matches(s)),
            );
        }
        spans.sort_by_key(|s| (s.start_us, s.end_us));
        Ok(spans)
    }

    /// From the start of the first to the end of the last `Step` span of steps `steps` in
    /// `mode`, in microseconds since the epoch; `None` when no such step was recorded.
    pub fn step_time_range(
        &self,
        mode: Mode,
        steps: RangeInclusive<u64>,
    ) -> Result<Option<(u64, u64)>> {
        let phase = smdebug_core::phase::Phase::Step(mode)
            .trace_name()
            .into_owned();
        let spans = self.spans(&SpanQuery::default().steps(mode, steps).phase(phase))?;
        let start = spans.iter().map(|s| s.start_us).min();
        let end = spans.iter().map(|s| s.end_us).max();
        Ok(start.zip(end))
    }

    /// The run (or the part of it `spans` and `samples` select) as one Chrome trace object
    /// for Perfetto: see [`chrome_trace`].
    pub fn chrome_trace(
        &self,
        spans: &SpanQuery,
        samples: &SystemQuery,
    ) -> Result<serde_json::Value> {
        Ok(chrome_trace(
            &self.spans(spans)?,
            &self.system_samples(samples)?,
        ))
    }

    /// The system samples recorded while steps `steps` of `mode` ran, further filtered by
    /// `query` (whose own time range is replaced).
    pub fn system_samples_for_steps(
        &self,
        mode: Mode,
        steps: RangeInclusive<u64>,
        query: SystemQuery,
    ) -> Result<Vec<SystemSample>> {
        match self.step_time_range(mode, steps)? {
            Some((start, end)) => self.system_samples(&query.time_range(start, end)),
            None => Ok(Vec::new()),
        }
    }
}
