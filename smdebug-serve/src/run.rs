//! One served run: what has been read of it so far, and the follower thread that reads what is
//! new.
//!
//! The data are the report's model: system metrics as smdebug-profiler's [`MetricSeries`],
//! framework spans as its [`Span`] (read through [`ProfilerReader`] and its parsers), rule
//! statuses as smdebug-rules' [`Summary`] (the file a rule runner writes into the run). The
//! follower lists the run's profiler files through the reader (system files again only when
//! their size changed, trace files once). Steps, tensor names and scalar values are followed in
//! bulk from the index files through smdebug-io's format layer ([`crate::tensors`]: each new
//! index file and its event file read once, scalars kept as compact columns); whole tensors
//! are read through smdebug-io's [`Trial`], opened when a view first asks for one.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use smdebug_core::Mode;
use smdebug_io::format::layout::END_MARKER;
use smdebug_io::format::parse_end_marker;
use smdebug_io::stop::{StopRequest, read_stop_request};
use smdebug_io::trial::{Trial, TrialOptions};
use smdebug_io::{Storage, StorageOptions};
use smdebug_profiler::reader::{
    MetricSeries, ProfilerReader, Span, parse_system_lines_lenient, parse_trace,
};
use smdebug_profiler::system::{SeriesKey, SystemSample};
use smdebug_rules::Summary;
use smdebug_rules::runner::SUMMARY_FILE;

use crate::spans::SpanStore;
use crate::tensors::{Column, TensorCursor, follow_tensors};

/// Time spent reading a backlog of index files per follower pass (the rest on the next
/// passes), so that a large backlog does not hold back new samples and the page sees progress.
const TENSOR_BUDGET_PER_PASS: Duration = Duration::from_millis(1500);

/// The same for system files and for trace files.
const SECTION_BUDGET_PER_PASS: Duration = Duration::from_millis(1000);

/// At most this many data warnings are kept.
const MAX_WARNINGS: usize = 50;

/// One scalar tensor: per mode, `(global step, value)` in step order.
pub(crate) type ScalarTrack = BTreeMap<Mode, Column>;

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
    /// `completed` or `stopped: …`, from the end marker.
    pub end_reason: Option<String>,
    /// Whether the server can write into the run (for stop requests).
    pub writable: bool,
    /// A stop request already in the run.
    pub stop_request: Option<StopRequest>,
    /// System metrics, one series per (node, type, name, dimension), points time-ordered.
    pub metrics: Vec<MetricSeries>,
    index: HashMap<SeriesKey, usize>,
    /// System samples read.
    pub samples: u64,
    /// Framework spans, ordered by start, held compactly (their `args` dropped).
    pub spans: SpanStore,
    /// Global steps saved by the hook, in order.
    pub steps: Vec<u64>,
    /// Tensor names, sorted.
    pub tensors: Vec<String>,
    /// Scalar tensors by name.
    pub scalars: BTreeMap<String, ScalarTrack>,
    /// Scalar values held (in `scalars`).
    pub scalar_values: usize,
    /// Index files listed but not read yet.
    pub index_pending: usize,
    /// The rule runner's statuses, when it wrote them into the run.
    pub rules: Option<Summary>,
    /// Problems with the data that were worked around.
    pub warnings: Vec<String>,
}

impl RunData {
    fn warn(&mut self, message: String) {
        if self.warnings.len() < MAX_WARNINGS && !self.warnings.contains(&message) {
            self.warnings.push(message);
        }
    }

    /// First and last time of any sample or span, µs since the epoch.
    pub fn time_range(&self) -> Option<(u64, u64)> {
        let firsts = self
            .metrics
            .iter()
            .filter_map(|m| m.points.first().map(|p| p.0))
            .chain(self.spans.first().map(|s| s.start_us));
        let lasts = self
            .metrics
            .iter()
            .filter_map(|m| m.points.last().map(|p| p.0))
            .chain(self.spans.iter().rev().take(64).map(|s| s.end_us));
        firsts.min().zip(lasts.max())
    }

    fn add_samples(&mut self, samples: &[SystemSample]) {
        for (key, point) in samples.iter().filter_map(SystemSample::series_point) {
            let at = match self.index.get(&key) {
                Some(&at) => at,
                None => {
                    self.metrics.push(MetricSeries {
                        node: key.0.clone(),
                        metric_type: key.1.clone(),
                        name: key.2.clone(),
                        dimension: key.3.clone(),
                        points: Vec::new(),
                    });
                    self.index.insert(key, self.metrics.len() - 1);
                    self.metrics.len() - 1
                }
            };
            let points = &mut self.metrics[at].points;
            if points.last().is_some_and(|last| last.0 > point.0) {
                let pos = points.partition_point(|p| p.0 <= point.0);
                points.insert(pos, point);
            } else {
                points.push(point);
            }
            self.samples += 1;
        }
    }

    /// `more`: about how many more values of this column are coming (index files not read yet),
    /// so that its memory grows once to size instead of doubling.
    fn add_scalars(&mut self, name: String, mode: Mode, points: Column, more: usize) {
        let column = self
            .scalars
            .entry(name)
            .or_default()
            .entry(mode)
            .or_default();
        if column.capacity() - column.len() < points.len() {
            column.reserve_exact(points.len() + more);
        }
        for (step, value) in points {
            match column.last() {
                // A step saved by several workers: the first worker's value is kept.
                Some(last) if last.0 == step => {}
                Some(last) if last.0 > step => {
                    let at = column.partition_point(|p| p.0 < step);
                    if column.get(at).is_none_or(|p| p.0 != step) {
                        column.insert(at, (step, value));
                        self.scalar_values += 1;
                    }
                }
                _ => {
                    column.push((step, value));
                    self.scalar_values += 1;
                }
            }
        }
    }

    fn add_spans(&mut self, spans: Vec<Span>) {
        self.spans.extend(spans);
    }
}

/// A run as the server holds it.
pub(crate) struct Run {
    /// Its index in the server's list.
    pub id: usize,
    /// A short name (the folder name).
    pub name: String,
    /// The location as given.
    pub location: String,
    /// What is known so far.
    pub data: RwLock<RunData>,
    /// Its trial, opened when a view first reads a whole tensor.
    pub trial: RwLock<Option<Arc<Trial>>>,
    /// Its storage, once opened.
    pub storage: RwLock<Option<Arc<dyn Storage>>>,
    /// Whether stop requests may be written (`false` with `--read-only`).
    pub allow_write: bool,
}

impl Run {
    pub fn new(id: usize, name: String, location: String, allow_write: bool) -> Run {
        Run {
            id,
            name,
            location,
            data: RwLock::new(RunData::default()),
            trial: RwLock::new(None),
            storage: RwLock::new(None),
            allow_write,
        }
    }

    /// The run's trial, opened now if it is not yet (blocking I/O: call it off the async
    /// runtime). An error when the run has no tensors (yet).
    pub fn open_trial(&self) -> Result<Arc<Trial>, String> {
        if let Some(t) = self.trial.read().ok().and_then(|t| t.clone()) {
            return Ok(t);
        }
        let storage = self
            .storage()
            .ok_or_else(|| "the run cannot be opened (yet)".to_owned())?;
        let mut slot = self.trial.write().map_err(|e| e.to_string())?;
        if let Some(t) = slot.as_ref() {
            return Ok(Arc::clone(t));
        }
        let options = TrialOptions {
            auto_refresh: true,
            ..TrialOptions::default()
        };
        match Trial::from_storage(&self.location, storage, options) {
            Ok(t) => {
                let t = Arc::new(t);
                *slot = Some(Arc::clone(&t));
                Ok(t)
            }
            Err(smdebug_io::Error::NoSuchRun { .. }) => Err("the run has no tensors (yet)".into()),
            Err(e) => Err(format!("cannot open the run's tensors: {e}")),
        }
    }

    /// Whether the trial was opened.
    pub fn trial_open(&self) -> bool {
        self.trial.read().is_ok_and(|t| t.is_some())
    }

    pub fn storage(&self) -> Option<Arc<dyn Storage>> {
        self.storage.read().ok().and_then(|s| s.clone())
    }
}

/// The follower's memory of what it has read.
#[derive(Default)]
struct Cursor {
    /// System file key → (size at the last read, samples taken).
    system: BTreeMap<String, (u64, usize)>,
    /// Trace files read.
    traces: BTreeSet<String>,
    /// Size of the rule summary at the last read.
    summary_size: Option<u64>,
    /// The index files read.
    tensors: TensorCursor,
    /// The end marker was read.
    marker_read: bool,
    /// Writability checked.
    write_checked: bool,
}

/// Follows `run` until `stop` is set, calling `changed` after each pass that found something.
pub(crate) fn follow(
    run: Arc<Run>,
    options: StorageOptions,
    poll: Duration,
    stop: Arc<AtomicBool>,
    changed: impl Fn(),
) {
    let mut cursor = Cursor::default();
    while !stop.load(Ordering::Acquire) {
        let started = Instant::now();
        if pass(&run, &options, &mut cursor) {
            changed();
        }
        let rest = poll.saturating_sub(started.elapsed());
        // Sleep in short slices so that stopping the server is quick.
        let until = Instant::now() + rest;
        while !stop.load(Ordering::Acquire) && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(20).min(rest));
        }
    }
}

/// One pass over the run; true when anything changed.
fn pass(run: &Run, options: &StorageOptions, cursor: &mut Cursor) -> bool {
    let storage = match run.storage() {
        Some(s) => s,
        None => match smdebug_io::open_storage_with(&run.location, options) {
            Ok(s) => {
                if let Ok(mut slot) = run.storage.write() {
                    *slot = Some(Arc::clone(&s));
                }
                s
            }
            Err(e) => {
                let mut data = run.data.write().expect("run data lock");
                let message = e.to_string();
                if data.open_error.as_deref() != Some(&message) {
                    data.open_error = Some(message);
                    data.version += 1;
                    return true;
                }
                return false;
            }
        },
    };
    let mut changed = false;
    let reader = ProfilerReader::new(Arc::clone(&storage));

    // System metrics: files whose size changed, from the samples not yet taken. Each file's
    // samples go into the series as soon as it is parsed (a file's parsed records are ~50× its
    // points), and a backlog of files is read over several passes.
    let started = Instant::now();
    let mut new_samples = 0usize;
    let mut warnings = Vec::new();
    match reader.system_files() {
        Ok(files) => {
            for file in files {
                if started.elapsed() >= SECTION_BUDGET_PER_PASS {
                    changed = true;
                    break;
                }
                let size = match storage.size(&file.key) {
                    Ok(Some(size)) => size,
                    _ => continue,
                };
                let seen = cursor.system.get(&file.key).copied();
                if seen.is_some_and(|(s, _)| s == size) {
                    continue;
                }
                let Ok(bytes) = storage.get(&file.key) else {
                    continue;
                };
                let read = parse_system_lines_lenient(&file.key, &bytes);
                if let Some((line, message)) = read.bad.first() {
                    warnings.push(format!(
                        "{}: {} line(s) are not metric records (first at line {line}: \
                         {message}); left out",
                        file.key,
                        read.bad.len()
                    ));
                }
                let taken = seen.map_or(0, |s| s.1).min(read.samples.len());
                if taken < read.samples.len() {
                    new_samples += read.samples.len() - taken;
                    run.data
                        .write()
                        .expect("run data lock")
                        .add_samples(&read.samples[taken..]);
                }
                cursor
                    .system
                    .insert(file.key.clone(), (bytes.len() as u64, read.samples.len()));
            }
        }
        Err(e) => warnings.push(format!("cannot list the system metrics: {e}")),
    }

    // Framework spans: trace files are written once each.
    let started = Instant::now();
    let mut new_spans = 0usize;
    match reader.trace_files() {
        Ok(files) => {
            for file in files {
                if cursor.traces.contains(&file.key) {
                    continue;
                }
                if started.elapsed() >= SECTION_BUDGET_PER_PASS {
                    changed = true;
                    break;
                }
                match storage
                    .get(&file.key)
                    .map_err(|e| e.to_string())
                    .and_then(|b| parse_trace(&file, &b).map_err(|e| e.to_string()))
                {
                    Ok(spans) => {
                        new_spans += spans.len();
                        run.data.write().expect("run data lock").add_spans(spans);
                    }
                    Err(e) => warnings.push(format!("{}: {e}; left out", file.key)),
                }
                cursor.traces.insert(file.key);
            }
        }
        Err(e) => warnings.push(format!("cannot list the trace files: {e}")),
    }

    // Rule statuses, re-read when the summary file changes.
    let mut new_summary = None;
    if let Ok(Some(size)) = storage.size(SUMMARY_FILE)
        && cursor.summary_size != Some(size)
        && let Ok(bytes) = storage.get(SUMMARY_FILE)
    {
        match serde_json::from_slice::<Summary>(&bytes) {
            Ok(summary) => {
                cursor.summary_size = Some(size);
                new_summary = Some(summary);
            }
            // A summary being rewritten is atomic; a bad one is reported and read again later.
            Err(e) => warnings.push(format!("{SUMMARY_FILE}: {e}")),
        }
    }

    let stop_request = read_stop_request(storage.as_ref()).ok().flatten();
    let marker = matches!(storage.size(END_MARKER), Ok(Some(_)));

    // Steps, tensor names and scalars from the index files.
    let tensor_update = follow_tensors(
        &storage,
        &mut cursor.tensors,
        TENSOR_BUDGET_PER_PASS,
        &mut |values, more| {
            let mut data = run.data.write().expect("run data lock");
            for (name, mode, points) in values {
                data.add_scalars(name, mode, points, more);
            }
        },
    );
    let end_reason = if marker && !cursor.marker_read {
        match storage.get(END_MARKER) {
            Ok(bytes) => {
                cursor.marker_read = true;
                parse_end_marker(&bytes).map(|r| r.to_string())
            }
            Err(_) => None,
        }
    } else {
        None
    };
    let has_tensors = tensor_update.found;

    let writable = if !cursor.write_checked && (marker || new_samples > 0 || has_tensors) {
        cursor.write_checked = true;
        Some(run.allow_write && can_write(storage.as_ref()))
    } else {
        None
    };

    let mut data = run.data.write().expect("run data lock");
    if data.open_error.take().is_some() {
        changed = true;
    }
    if new_samples > 0 || new_spans > 0 {
        changed = true;
    }
    if let Some(summary) = new_summary {
        data.rules = Some(summary);
        changed = true;
    }
    if data.stop_request != stop_request {
        data.stop_request = stop_request;
        changed = true;
    }
    if let Some(w) = writable {
        data.writable = w;
        changed = true;
    }
    let update = tensor_update;
    if !update.steps.is_empty() {
        let sorted = data.steps.last().is_none_or(|&l| update.steps[0].0 > l);
        data.steps.extend(update.steps.iter().map(|s| s.0));
        if !sorted {
            data.steps.sort_unstable();
            data.steps.dedup();
        }
        changed = true;
    }
    if !update.names.is_empty() {
        data.tensors.extend(update.names);
        data.tensors.sort();
        data.tensors.dedup();
        changed = true;
    }
    if update.any_values {
        changed = true;
    }
    if data.index_pending != update.pending {
        data.index_pending = update.pending;
        changed = true;
    }
    if end_reason.is_some() && data.end_reason != end_reason {
        data.end_reason = end_reason;
        changed = true;
    }
    warnings.extend(update.warnings);
    if marker && !data.complete {
        data.complete = true;
        changed = true;
    }
    let exists = data.complete || data.samples > 0 || !data.spans.is_empty() || has_tensors;
    if exists != data.exists {
        data.exists = exists;
        changed = true;
    }
    for w in warnings {
        data.warn(w);
    }
    if changed {
        data.version += 1;
    }
    changed
}

/// Whether a probe object can be written into the run and removed again.
fn can_write(storage: &dyn Storage) -> bool {
    const PROBE: &str = ".smdebug-serve-write-check";
    let ok = storage
        .put(PROBE, bytes::Bytes::from_static(b"probe"))
        .is_ok();
    let _ = storage.delete(PROBE);
    ok
}
