//! One served run: what has been read of it so far, and the follower thread that reads what is
//! new.
//!
//! The data are the report's model: system metrics as smdebug-profiler's [`MetricSeries`],
//! framework spans as its [`Span`] (read through [`ProfilerReader`] and its parsers), tensors
//! through smdebug-io's [`Trial`], rule statuses as smdebug-rules' [`Summary`] (the file a rule
//! runner writes into the run). Nothing is read a second way: the follower lists the run's
//! profiler files through the reader (system files again only when their size changed, trace
//! files once), refreshes the trial (which lists only index files it has not seen) and reads
//! each scalar tensor's new steps only.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use smdebug_core::Mode;
use smdebug_io::format::layout::END_MARKER;
use smdebug_io::stop::{StopRequest, read_stop_request};
use smdebug_io::trial::{Trial, TrialOptions};
use smdebug_io::{Storage, StorageOptions};
use smdebug_profiler::reader::{
    MetricSeries, ProfilerReader, Span, parse_system_lines_lenient, parse_trace,
};
use smdebug_rules::Summary;
use smdebug_rules::runner::SUMMARY_FILE;

/// Collections whose tensors are scalars by convention (as the report reads them).
const SCALAR_COLLECTIONS: [&str; 4] = ["losses", "metrics", "sm_metrics", "scalars"];

/// Tensors outside those collections probed (one value each) for being scalars.
const MAX_PROBED: usize = 256;

/// Scalar values read per follower pass (the rest on the next pass), so that a large backlog
/// does not hold back new samples and steps.
const SCALAR_READS_PER_PASS: usize = 20_000;

/// At most this many data warnings are kept.
const MAX_WARNINGS: usize = 50;

/// `(node, type, name, dimension)`.
type SeriesKey = (String, String, String, String);

/// `(global step, mode, value)`.
pub(crate) type ScalarPoint = (u64, Mode, f64);

/// One scalar tensor, in step order.
#[derive(Clone, Debug, Default)]
pub(crate) struct ScalarTrack {
    pub points: Vec<ScalarPoint>,
}

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
    /// Framework spans, ordered by start (their `args` are dropped to save memory).
    pub spans: Vec<Span>,
    /// Global steps saved by the hook, in order.
    pub steps: Vec<u64>,
    /// Tensor names.
    pub tensors: Vec<String>,
    /// Scalar tensors by name.
    pub scalars: BTreeMap<String, ScalarTrack>,
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

    fn add_samples(&mut self, samples: &[smdebug_profiler::system::SystemSample]) {
        for s in samples {
            if !s.value.is_finite() || !s.timestamp.is_finite() {
                continue;
            }
            let key = (
                s.node_id.clone(),
                s.metric_type.clone(),
                s.name.clone(),
                s.dimension.clone(),
            );
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
            let point = (s.timestamp_us(), s.value);
            if points.last().is_some_and(|last| last.0 > point.0) {
                let pos = points.partition_point(|p| p.0 <= point.0);
                points.insert(pos, point);
            } else {
                points.push(point);
            }
            self.samples += 1;
        }
    }

    fn add_spans(&mut self, spans: Vec<Span>) {
        for mut span in spans {
            span.args = serde_json::Map::new();
            self.spans.push(span);
        }
        // Stable sort of an almost sorted vector: cheap, and new files can interleave.
        self.spans.sort_by_key(|s| (s.start_us, s.end_us));
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
    /// Its trial, once the run has tensor data.
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

    pub fn trial(&self) -> Option<Arc<Trial>> {
        self.trial.read().ok().and_then(|t| t.clone())
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
    /// Tensors checked for being scalars (probed or listed).
    probed: BTreeSet<String>,
    /// Per scalar: the last global step read (`None` before the first).
    scalar_last: BTreeMap<String, Option<u64>>,
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

    // System metrics: files whose size changed, from the samples not yet taken.
    let mut new_samples = Vec::new();
    let mut warnings = Vec::new();
    match reader.system_files() {
        Ok(files) => {
            for file in files {
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
                new_samples.extend_from_slice(&read.samples[taken..]);
                cursor
                    .system
                    .insert(file.key.clone(), (bytes.len() as u64, read.samples.len()));
            }
        }
        Err(e) => warnings.push(format!("cannot list the system metrics: {e}")),
    }

    // Framework spans: trace files are written once each.
    let mut new_spans = Vec::new();
    match reader.trace_files() {
        Ok(files) => {
            for file in files {
                if cursor.traces.contains(&file.key) {
                    continue;
                }
                match storage
                    .get(&file.key)
                    .map_err(|e| e.to_string())
                    .and_then(|b| parse_trace(&file, &b).map_err(|e| e.to_string()))
                {
                    Ok(spans) => new_spans.extend(spans),
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

    // Tensors through the trial.
    let trial = match run.trial() {
        Some(t) => Some(t),
        None => {
            let options = TrialOptions {
                auto_refresh: false,
                ..TrialOptions::default()
            };
            match Trial::from_storage(&run.location, Arc::clone(&storage), options) {
                Ok(t) => {
                    let t = Arc::new(t);
                    if let Ok(mut slot) = run.trial.write() {
                        *slot = Some(Arc::clone(&t));
                    }
                    Some(t)
                }
                Err(smdebug_io::Error::NoSuchRun { .. }) => None,
                Err(e) => {
                    warnings.push(format!("cannot open the run's tensors: {e}"));
                    None
                }
            }
        }
    };
    let mut tensor_update = None;
    if let Some(trial) = &trial {
        if let Err(e) = trial.refresh() {
            warnings.push(format!("cannot refresh the run's tensors: {e}"));
        }
        tensor_update = Some(read_tensors(trial, cursor));
    }

    let writable =
        if !cursor.write_checked && (marker || !new_samples.is_empty() || trial.is_some()) {
            cursor.write_checked = true;
            Some(run.allow_write && can_write(storage.as_ref()))
        } else {
            None
        };

    let mut data = run.data.write().expect("run data lock");
    if data.open_error.take().is_some() {
        changed = true;
    }
    if !new_samples.is_empty() {
        data.add_samples(&new_samples);
        changed = true;
    }
    if !new_spans.is_empty() {
        data.add_spans(new_spans);
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
    if let Some(update) = tensor_update {
        if data.steps != update.steps {
            data.steps = update.steps;
            changed = true;
        }
        if data.tensors != update.tensors {
            data.tensors = update.tensors;
            changed = true;
        }
        for (name, points) in update.scalars {
            if !points.is_empty() {
                data.scalars.entry(name).or_default().points.extend(points);
                changed = true;
            }
        }
        if update.end_reason.is_some() && data.end_reason != update.end_reason {
            data.end_reason = update.end_reason;
            changed = true;
        }
        warnings.extend(update.warnings);
    }
    if marker && !data.complete {
        data.complete = true;
        changed = true;
    }
    let exists = data.complete || data.samples > 0 || !data.spans.is_empty() || trial.is_some();
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

struct TensorUpdate {
    steps: Vec<u64>,
    tensors: Vec<String>,
    scalars: Vec<(String, Vec<ScalarPoint>)>,
    end_reason: Option<String>,
    warnings: Vec<String>,
}

fn read_tensors(trial: &Trial, cursor: &mut Cursor) -> TensorUpdate {
    let mut update = TensorUpdate {
        steps: trial.steps(None).unwrap_or_default(),
        tensors: trial.tensor_names().unwrap_or_default(),
        scalars: Vec::new(),
        end_reason: trial.end_reason().ok().flatten().map(|r| r.to_string()),
        warnings: Vec::new(),
    };
    // Which tensors are scalars: the scalar collections, and others whose first value is one
    // number (probed once each, up to MAX_PROBED).
    for collection in SCALAR_COLLECTIONS {
        if let Ok(found) = trial.tensor_names_filtered(Some(collection), None) {
            for name in found {
                if cursor.probed.insert(name.clone()) {
                    cursor.scalar_last.entry(name).or_insert(None);
                }
            }
        }
    }
    for name in &update.tensors {
        if cursor.probed.len() >= MAX_PROBED + cursor.scalar_last.len() {
            break;
        }
        if cursor.probed.contains(name) {
            continue;
        }
        let Ok(tensor) = trial.tensor(name) else {
            continue;
        };
        let Some(first) = tensor.steps(None).ok().and_then(|s| s.first().copied()) else {
            continue;
        };
        cursor.probed.insert(name.clone());
        if tensor.value(first, None, None).is_ok_and(|v| v.len() == 1) {
            cursor.scalar_last.insert(name.clone(), None);
        }
    }
    // The mode of each global step.
    let mut mode_of: BTreeMap<u64, Mode> = BTreeMap::new();
    for mode in trial.modes().unwrap_or_default() {
        for step in trial.global_steps(Some(mode)).unwrap_or_default() {
            mode_of.insert(step, mode);
        }
    }
    let mut budget = SCALAR_READS_PER_PASS;
    let names: Vec<String> = cursor.scalar_last.keys().cloned().collect();
    for name in names {
        if budget == 0 {
            break;
        }
        let Ok(tensor) = trial.tensor(&name) else {
            continue;
        };
        let last = cursor.scalar_last.get(&name).copied().flatten();
        let steps = tensor.steps(None).unwrap_or_default();
        let mut points = Vec::new();
        for step in steps.into_iter().filter(|&s| last.is_none_or(|l| s > l)) {
            if budget == 0 {
                break;
            }
            budget -= 1;
            match tensor.value(step, None, None) {
                Ok(v) => {
                    if let Some(&x) = v.iter().next() {
                        let mode = mode_of.get(&step).copied().unwrap_or(Mode::Global);
                        points.push((step, mode, x));
                    }
                    cursor.scalar_last.insert(name.clone(), Some(step));
                }
                // Not fully written yet: read again on the next pass.
                Err(_) => break,
            }
        }
        update.scalars.push((name, points));
    }
    update
}
