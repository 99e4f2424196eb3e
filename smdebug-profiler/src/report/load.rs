//! Building a [`ReportInput`] from a run location: each source that fails becomes a note.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use smdebug_core::Mode;
use smdebug_io::Storage;
use smdebug_io::format::layout::END_MARKER;
use smdebug_io::trial::{Trial, TrialOptions};

use super::{LoadOptions, MetricSeries, NoteArea, ReportInput, ScalarSeries};
use crate::kineto::{summarize_trace, summarize_traces};
use crate::reader::{ProfilerReader, parse_trace};
use crate::system::{SystemFileName, SystemSample};
/// Collections whose tensors are scalars by convention.
const SCALAR_COLLECTIONS: [&str; 4] = ["losses", "metrics", "sm_metrics", "scalars"];

type SeriesKey = (String, String, String, String);

impl ReportInput {
    /// Reads what there is of the run at `location` (a local path or an object-store URL) and
    /// the trace files in `options`. Never fails: whatever cannot be read is described in
    /// [`ReportInput::notes`].
    pub fn load(location: &str, options: &LoadOptions) -> ReportInput {
        let mut input = ReportInput {
            location: location.to_owned(),
            generated_at_us: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX)),
            ..ReportInput::default()
        };
        match smdebug_io::open_storage(location) {
            Ok(store) => {
                input.run_complete = Some(store.get(END_MARKER).is_ok());
                if input.run_complete == Some(false) {
                    input.note(
                        NoteArea::Run,
                        format!(
                            "The run has no end marker ({END_MARKER}): it is still being written \
                             or stopped without finishing. Figures cover what was written so far; \
                             regenerate the report to see more."
                        ),
                    );
                }
                load_system(&mut input, &store);
                load_spans(&mut input, &store);
            }
            Err(e) => input.note(
                NoteArea::Run,
                format!("Cannot open the run location: {e}. No profiler data was read."),
            ),
        }
        if options.tensors {
            load_scalars(&mut input, options);
        }
        load_traces(&mut input, &options.traces);
        input
    }
}

/// Decodes the JSON lines of a system-metrics file, keeping the good records: returns them,
/// the number of bad lines and the first bad line's number and error. A record stamped outside
/// the file's window is a bad line. A last line without a newline that does not parse is a
/// record still being appended: skipped, not counted.
fn tolerant_system_lines(
    file: &SystemFileName,
    bytes: &[u8],
) -> (Vec<SystemSample>, usize, Option<(usize, String)>) {
    let mut samples = Vec::new();
    let (mut bad, mut first_bad) = (0, None);
    let ends_complete = bytes.ends_with(b"\n");
    let lines: Vec<&[u8]> = bytes.split(|&b| b == b'\n').collect();
    let last = lines.len().saturating_sub(1);
    for (index, line) in lines.iter().enumerate() {
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        match serde_json::from_slice::<SystemSample>(line) {
            Ok(sample) => match file.misplaced(sample.timestamp) {
                None => samples.push(sample),
                Some(why) => {
                    bad += 1;
                    first_bad.get_or_insert((index + 1, why));
                }
            },
            Err(_) if index == last && !ends_complete => {}
            Err(e) => {
                bad += 1;
                first_bad.get_or_insert((index + 1, e.to_string()));
            }
        }
    }
    (samples, bad, first_bad)
}

fn load_system(input: &mut ReportInput, store: &Arc<dyn Storage>) {
    let reader = ProfilerReader::new(Arc::clone(store));
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
    if files.is_empty() {
        input.note(
            NoteArea::System,
            "No system metrics were recorded (nothing under system/incremental/). Start the \
             system sampler (SystemSampler, or `smdebug profile`) with the job to see CPU, GPU, \
             memory, disk and network usage.",
        );
        return;
    }
    let mut series: BTreeMap<SeriesKey, Vec<(u64, f64)>> = BTreeMap::new();
    for file in files {
        let bytes = match store.get(&file.key) {
            Ok(b) => b,
            Err(e) => {
                input.note(
                    NoteArea::System,
                    format!("{}: cannot be read ({e}); left out.", file.key),
                );
                continue;
            }
        };
        let (samples, bad, first_bad) = tolerant_system_lines(&file, &bytes);
        if let Some((line, message)) = first_bad {
            input.note(
                NoteArea::System,
                format!(
                    "{}: {bad} line(s) are not metric records and were left out (first at line \
                     {line}: {message}); {} good record(s) of that file are shown.",
                    file.key,
                    samples.len()
                ),
            );
        }
        for s in samples {
            if !s.value.is_finite() || !s.timestamp.is_finite() {
                continue;
            }
            let at = s.timestamp_us();
            series
                .entry((s.node_id, s.metric_type, s.name, s.dimension))
                .or_default()
                .push((at, s.value));
        }
    }
    input.metrics = series
        .into_iter()
        .map(|((node, metric_type, name, dimension), mut points)| {
            points.sort_by_key(|p| p.0);
            MetricSeries {
                node,
                metric_type,
                name,
                dimension,
                points,
            }
        })
        .collect();
}

fn load_spans(input: &mut ReportInput, store: &Arc<dyn Storage>) {
    let reader = ProfilerReader::new(Arc::clone(store));
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
    if files.is_empty() {
        input.note(
            NoteArea::Spans,
            "No framework spans were recorded (nothing under framework/pevents/). Record steps, \
             data loading, forward and backward passes with SpanRecorder to see step durations \
             and where the time goes.",
        );
        return;
    }
    for file in files {
        let parsed = store
            .get(&file.key)
            .map_err(crate::ProfilerError::from)
            .and_then(|bytes| parse_trace(&file, &bytes));
        match parsed {
            Ok(spans) => input.spans.extend(spans),
            Err(e) => input.note(
                NoteArea::Spans,
                format!("{e}; the spans of this file are left out."),
            ),
        }
    }
    input.spans.sort_by_key(|s| (s.start_us, s.end_us));
}

fn load_scalars(input: &mut ReportInput, options: &LoadOptions) {
    let trial_options = TrialOptions {
        auto_refresh: false,
        ..TrialOptions::default()
    };
    let trial = match Trial::open_with(&input.location, trial_options) {
        Ok(t) => t,
        Err(smdebug_io::Error::NoSuchRun { .. }) => {
            input.note(
                NoteArea::Tensors,
                "No tensors were saved in this run (no collections or index files), so there are \
                 no loss or metric curves. Save losses with the hook's `losses` collection to see them.",
            );
            return;
        }
        Err(e) => {
            input.note(
                NoteArea::Tensors,
                format!("Cannot open the run's tensors: {e}."),
            );
            return;
        }
    };
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tolerant_lines_keep_good_records_and_skip_a_torn_tail() {
        let line = r#"{"Type":"cpu","Name":"cpu0","Dimension":"CPUUtilization","Value":1.5,"NodeId":"n","Timestamp":1000.5}"#;
        let file = crate::system::parse_system_file_key("system/x/1000.n.json").unwrap();
        let text = format!("{line}\nnot json\n{line}\n{{\"Type\":\"cp");
        let (samples, bad, first) = tolerant_system_lines(&file, text.as_bytes());
        assert_eq!((samples.len(), bad), (2, 1));
        assert_eq!(first.unwrap().0, 2);
        let stamped_zero = format!("{line}\n{}\n", line.replace("1000.5", "0"));
        let (samples, bad, first) = tolerant_system_lines(&file, stamped_zero.as_bytes());
        assert_eq!((samples.len(), bad), (1, 1));
        assert!(first.unwrap().1.contains("window"));
    }
}
