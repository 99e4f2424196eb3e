//! Building a [`ReportInput`]: from the rule runner's state, or by reading a run through its
//! `Storage`. Each source that fails or is missing becomes a note.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use smdebug_core::Mode;
use smdebug_io::Storage;
use smdebug_io::format::layout::END_MARKER;
use smdebug_io::trial::{Trial, TrialOptions};
use smdebug_profiler::kineto::{summarize_trace, summarize_traces};
use smdebug_profiler::reader::{
    ProfileData, ProfilerReader, parse_system_lines_lenient, parse_trace,
};
use smdebug_rules::RunState;

use crate::input::{
    CODE_PROFILE_WINDOWS_SHOWN, CodeProfile, LoadOptions, NoteArea, ReportInput, ScalarSeries,
};

/// Collections whose tensors are scalars by convention.
const SCALAR_COLLECTIONS: [&str; 4] = ["losses", "metrics", "sm_metrics", "scalars"];

impl ReportInput {
    /// Reads what there is of the run at `location` (a local path or an object-store URL,
    /// through smdebug-io's `Storage`) and the trace files in `options`. Never fails: whatever
    /// cannot be read is described in [`ReportInput::notes`].
    pub fn load(location: &str, options: &LoadOptions) -> ReportInput {
        let mut input = ReportInput::empty(location);
        match smdebug_io::open_storage(location) {
            Ok(storage) => {
                let complete = match storage.get(END_MARKER) {
                    Ok(_) => Some(true),
                    Err(e) if e.is_not_found() => Some(false),
                    Err(_) => None,
                };
                input.run_complete(complete);
                let mut data = ProfileData::default();
                let reader = ProfilerReader::new(Arc::clone(&storage));
                load_system(&mut input, &mut data, &reader, storage.as_ref());
                load_spans(&mut input, &mut data, &reader, storage.as_ref());
                input.profile(&data);
                load_code_profiles(&mut input, &reader);
                if options.tensors {
                    let trial_options = TrialOptions {
                        auto_refresh: false,
                        ..TrialOptions::default()
                    };
                    match Trial::from_storage(location, Arc::clone(&storage), trial_options) {
                        Ok(trial) => load_scalars(&mut input, &trial, options),
                        Err(smdebug_io::Error::NoSuchRun { .. }) => input.no_tensors(),
                        Err(e) => input.note(
                            NoteArea::Tensors,
                            format!("Cannot open the run's tensors: {e}."),
                        ),
                    }
                }
            }
            Err(e) => {
                input.note(
                    NoteArea::Run,
                    format!("Cannot open the run location: {e}. No profiler data was read."),
                );
                if options.tensors {
                    input.note(
                        NoteArea::Tensors,
                        format!("Cannot open the run's tensors: {e}."),
                    );
                }
            }
        }
        load_traces(&mut input, &options.traces);
        input
    }

    /// The report of the run a rule runner holds: its profiler data, its trial's scalars and
    /// the trace files in `options`; nothing of the run is read again but the scalar values.
    /// The rule statuses are not added (see [`ReportInput::with_rules`]).
    pub fn from_run(run: &RunState<'_>, options: &LoadOptions) -> ReportInput {
        let mut input = ReportInput::empty(run.location);
        input.run_complete(Some(run.summary.run_complete));
        for warning in &run.data_warnings {
            // The feed names the system file a bad line is in; other problems are its traces'.
            let area = if warning.starts_with("system/") || warning.starts_with("...") {
                NoteArea::System
            } else {
                NoteArea::Spans
            };
            input.note(area, warning.clone());
        }
        input.profile(run.profile);
        load_code_profiles(&mut input, &ProfilerReader::new(Arc::clone(run.storage)));
        if options.tensors {
            match run.trial {
                Some(trial) => load_scalars(&mut input, trial, options),
                None => input.no_tensors(),
            }
        }
        load_traces(&mut input, &options.traces);
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
                    "The run has no end marker ({END_MARKER}): it is still being written or \
                     stopped without finishing. Figures cover what was written so far; \
                     regenerate the report to see more."
                ),
            );
        }
    }

    /// Takes the metrics and spans of `data`, with a note for each kind that is missing.
    fn profile(&mut self, data: &ProfileData) {
        self.metrics = data.metrics();
        self.spans = data.spans();
        if self.metrics.is_empty() && !self.notes.iter().any(|n| n.area == NoteArea::System) {
            self.note(
                NoteArea::System,
                "No system metrics were recorded (nothing under system/incremental/). Start the \
                 system sampler (SystemSampler, or `smdebug profile`) with the job to see CPU, \
                 GPU, memory, disk and network usage.",
            );
        }
        if self.spans.is_empty() && !self.notes.iter().any(|n| n.area == NoteArea::Spans) {
            self.note(
                NoteArea::Spans,
                "No framework spans were recorded (nothing under framework/pevents/). Record \
                 steps, data loading, forward and backward passes with SpanRecorder to see step \
                 durations and where the time goes.",
            );
        }
    }

    fn no_tensors(&mut self) {
        self.note(
            NoteArea::Tensors,
            "No tensors were saved in this run (no collections or index files), so there are \
             no loss or metric curves. Save losses with the hook's `losses` collection to see them.",
        );
    }
}

fn load_system(
    input: &mut ReportInput,
    data: &mut ProfileData,
    reader: &ProfilerReader,
    storage: &dyn Storage,
) {
    let files = match reader.system_files() {
        Ok(files) => files,
        Err(e) => {
            input.note(
                NoteArea::System,
                format!("Cannot list the system metrics: {e}."),
            );
            return;
        }
    };
    for file in files {
        let bytes = match storage.get(&file.key) {
            Ok(b) => b,
            Err(e) => {
                input.note(
                    NoteArea::System,
                    format!("{}: cannot be read ({e}); left out.", file.key),
                );
                continue;
            }
        };
        let read = parse_system_lines_lenient(&file.key, &bytes);
        if let Some((line, message)) = read.bad.first() {
            input.note(
                NoteArea::System,
                format!(
                    "{}: {} line(s) are not metric records and were left out (first at line \
                     {line}: {message}); {} good record(s) of that file are shown.",
                    file.key,
                    read.bad.len(),
                    read.samples.len()
                ),
            );
        }
        data.add_samples(&read.samples);
    }
}

fn load_spans(
    input: &mut ReportInput,
    data: &mut ProfileData,
    reader: &ProfilerReader,
    storage: &dyn Storage,
) {
    let files = match reader.trace_files() {
        Ok(files) => files,
        Err(e) => {
            input.note(
                NoteArea::Spans,
                format!("Cannot list the framework trace files: {e}."),
            );
            return;
        }
    };
    for file in files {
        let parsed = storage
            .get(&file.key)
            .map_err(|e| format!("{}: cannot be read ({e})", file.key))
            .and_then(|bytes| parse_trace(&file, &bytes).map_err(|e| e.to_string()));
        match parsed {
            Ok(spans) => data.add_spans(&spans),
            Err(e) => input.note(
                NoteArea::Spans,
                format!("{e}; the spans of this file are left out."),
            ),
        }
    }
}

/// Every code-profile window's summary, and the flame graphs of the latest
/// [`CODE_PROFILE_WINDOWS_SHOWN`]. A damaged file is a note; its window (or its flame graph)
/// is left out.
fn load_code_profiles(input: &mut ReportInput, reader: &ProfilerReader) {
    let profiles = match reader.code_profiles() {
        Ok(profiles) => profiles,
        Err(e) => {
            input.note(
                NoteArea::CodeProfiles,
                format!("Cannot list the code profiles: {e}."),
            );
            return;
        }
    };
    for warning in profiles.warnings {
        input.note(NoteArea::CodeProfiles, format!("{warning}."));
    }
    let first_shown = profiles
        .windows
        .len()
        .saturating_sub(CODE_PROFILE_WINDOWS_SHOWN);
    for (i, window) in profiles.windows.into_iter().enumerate() {
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
            file: window.file,
            summary: window.summary,
            flamegraph,
        });
    }
}

fn load_scalars(input: &mut ReportInput, trial: &Trial, options: &LoadOptions) {
    let mut problems = Vec::new();
    let names = match trial.tensor_names() {
        Ok(n) => n,
        Err(e) => {
            input.note(
                NoteArea::Tensors,
                format!("Cannot list the run's tensors: {e}."),
            );
            return;
        }
    };
    let mut scalar_names: BTreeSet<String> = BTreeSet::new();
    for collection in SCALAR_COLLECTIONS {
        if let Ok(found) = trial.tensor_names_filtered(Some(collection), None) {
            scalar_names.extend(found);
        }
    }
    // Other tensors: one value each tells whether it is a scalar.
    let others: Vec<&String> = names
        .iter()
        .filter(|n| !scalar_names.contains(*n))
        .collect();
    if others.len() > options.max_probed_tensors {
        input.note(
            NoteArea::Tensors,
            format!(
                "{} tensors outside the losses/metrics collections; only the first {} were checked \
                 for single values to draw.",
                others.len(),
                options.max_probed_tensors
            ),
        );
    }
    for name in others.into_iter().take(options.max_probed_tensors) {
        let Ok(tensor) = trial.tensor(name) else {
            continue;
        };
        let Some(&first) = tensor
            .steps(None)
            .ok()
            .and_then(|s| s.first().copied())
            .as_ref()
        else {
            continue;
        };
        if tensor.value(first, None, None).is_ok_and(|v| v.len() == 1) {
            scalar_names.insert(name.clone());
        }
    }
    let modes = trial.modes().unwrap_or_default();
    let mode_steps: Vec<(Mode, BTreeSet<u64>)> = modes
        .iter()
        .map(|&m| {
            (
                m,
                trial
                    .global_steps(Some(m))
                    .unwrap_or_default()
                    .into_iter()
                    .collect(),
            )
        })
        .collect();
    let total = scalar_names.len();
    for name in scalar_names.into_iter().take(options.max_scalars) {
        let values = match trial.tensor(&name).and_then(|t| t.values(None, None)) {
            Ok(v) => v,
            Err(e) => {
                problems.push(format!("{name}: {e}"));
                continue;
            }
        };
        let mut per_mode: BTreeMap<Mode, Vec<(u64, f64)>> = BTreeMap::new();
        for (step, value) in values {
            let Some(&v) = value.iter().next() else {
                continue;
            };
            let mode = mode_steps
                .iter()
                .find(|(_, steps)| steps.contains(&step))
                .map_or(Mode::Global, |(m, _)| *m);
            per_mode.entry(mode).or_default().push((step, v));
        }
        if !per_mode.is_empty() {
            input.scalars.push(ScalarSeries {
                name,
                modes: per_mode.into_iter().collect(),
            });
        }
    }
    if total > options.max_scalars {
        input.note(
            NoteArea::Tensors,
            format!(
                "{total} scalar tensors; the first {} by name are drawn.",
                options.max_scalars
            ),
        );
    }
    for p in problems {
        input.note(
            NoteArea::Tensors,
            format!("Cannot read scalar {p}; left out."),
        );
    }
}

fn load_traces(input: &mut ReportInput, traces: &[PathBuf]) {
    if traces.is_empty() {
        return;
    }
    match summarize_traces(traces) {
        Ok(report) => input.traces = report.ranks,
        Err(_) => {
            // One bad file fails the batch: summarize one by one to keep the good ones.
            for path in traces {
                match summarize_trace(path) {
                    Ok(summary) => input.traces.push(summary),
                    Err(e) => input.note(NoteArea::Traces, format!("{e}; this trace is left out.")),
                }
            }
            input.traces.sort_by_key(|r| r.rank);
        }
    }
}
