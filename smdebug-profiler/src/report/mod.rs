//! The profiling report: one self-contained HTML file per run, and one JSON result per rule.
//!
//! ```no_run
//! use smdebug_profiler::report::{LoadOptions, ReportInput, write_report};
//!
//! let input = ReportInput::load("/tmp/run", &LoadOptions::default());
//! let written = write_report(&input, "/tmp/run/report/profiler-report.html".as_ref())?;
//! println!("{}", written.html.display());
//! # Ok::<(), smdebug_profiler::report::ReportError>(())
//! ```
//!
//! **Input.** [`ReportInput::load`] reads a run: system metrics and framework spans (files of
//! this crate or of Python smdebug / SageMaker Debugger), scalar tensors per mode through
//! smdebug-io's `Trial` (the `losses` and `metrics` collections and any other tensor saved as a
//! single value), and Kineto traces named in [`LoadOptions::traces`]. Rule results come in as
//! plain data ([`RuleOutcome`], through [`ReportInput::with_rules`]): this crate does not depend
//! on the rules crate. Loading never fails as a whole: a missing folder, a corrupt metrics
//! line, an unreadable trace or a run still being written becomes a [`Note`] that the report
//! shows where the data would have been.
//!
//! **Output.** [`render_html`] returns the page; [`write_report`] writes it and the rule
//! results, each atomically (a hidden temporary file in the same folder, then a rename), so a
//! report regenerated while the job runs is never seen half-written:
//!
//! ```text
//! <dir>/<report>.html       the page (any name the caller picks)
//! <dir>/<RuleName>.json     one per rule outcome: the RuleOutcome as JSON
//! ```
//!
//! **The page.** The sections of [`SECTIONS`], in that order, each a
//! `<section id="…" class="report-section">`; a section without data says what is missing in a
//! `<p class="missing">`. Charts are inline SVG drawn with plotters (no font files needed), each
//! in a `<figure class="chart">`. A time series longer than 400 points is cut into 400 time
//! slices, drawn as the slice means with a band from each slice's lowest to highest value.
//! Every string from the data is HTML-escaped. The page loads nothing: its Content-Security-Policy forbids every source except inline style and
//! script and `data:` images, and it names no URL other than the SVG/XHTML namespaces. A small
//! inline script checks the page once loaded and stores the result in
//! `document.body.dataset.selfcheck` (JSON: `sections`, `section_ids`, `charts`,
//! `charts_drawn`, `empty_charts`, `errors`, `csp_violations`), so a headless browser's
//! `--dump-dom` shows whether it rendered.
//!
//! **Figures.** Percentiles interpolate linearly between ranks (NumPy's default). Step
//! durations are grouped per node and worker (one worker per GPU in data-parallel jobs).
//! Bottleneck checks pair each CPU sample with the mean utilization of the node's GPUs at the
//! nearest sample time. See each section's text for its definitions.

mod charts;
mod html;
mod load;
mod render;
mod stats;

use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use serde::{Deserialize, Serialize};
use smdebug_core::Mode;

pub use crate::kineto::RankSummary;
pub use crate::reader::Span;

/// The page's sections, in order: `(id, title)`. SPEC §6's thirteen first, then the debugging
/// rules, the scalar curves and the notes on missing or unreadable data.
pub const SECTIONS: &[(&str, &str)] = &[
    ("job-summary", "Training job summary"),
    ("system-usage", "System usage statistics"),
    ("framework-metrics", "Framework metrics summary"),
    ("top-operators", "Top CPU and GPU operators"),
    ("rules-summary", "Rules summary"),
    ("step-durations", "Step durations"),
    ("gpu-utilization", "GPU utilization"),
    ("batch-size", "Batch size"),
    ("cpu-bottlenecks", "CPU bottlenecks"),
    ("io-bottlenecks", "I/O bottlenecks"),
    ("load-balancing", "Load balancing across GPUs"),
    ("gpu-memory", "GPU memory"),
    ("data-loading", "Data loading"),
    ("debugging-rules", "Debugging rules"),
    ("scalars", "Scalars"),
    ("data-notes", "Notes on the data"),
];

/// One rule's result, as the report shows it and writes it to `<name>.json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RuleOutcome {
    /// The rule's name (`CPUBottleneck`, `LossNotDecreasing`, …); sections match on it.
    pub name: String,
    /// `debugging` or `profiler`.
    pub kind: String,
    /// What the rule checks.
    pub description: String,
    /// What to change when it fires.
    pub recommendation: String,
    /// `InProgress`, `NoIssuesFound`, `IssuesFound` or `Error`.
    pub status: String,
    /// How many times the rule fired.
    pub triggered: u64,
    /// How many datapoints (steps, samples) it looked at.
    pub datapoints: u64,
    /// The parameters it ran with.
    pub parameters: serde_json::Value,
    /// Its last message (the finding, or the error).
    pub message: String,
    /// The first step it fired at.
    pub first_fired_step: Option<u64>,
    /// When it first fired, microseconds since the epoch.
    pub first_fired_time_us: Option<u64>,
    /// Rule-specific evidence.
    pub details: serde_json::Value,
}

/// What [`ReportInput::load`] reads besides the run itself.
#[derive(Clone, Debug)]
pub struct LoadOptions {
    /// Kineto (PyTorch profiler) trace files, plain or gzip-compressed, one per rank.
    pub traces: Vec<PathBuf>,
    /// Read scalar tensors through the `Trial` (default true).
    pub tensors: bool,
    /// At most this many scalar tensors are drawn (default 32); the rest are named in a note.
    pub max_scalars: usize,
    /// Tensors outside the `losses`/`metrics` collections are probed (one value read each) to
    /// find scalars, up to this many names (default 256).
    pub max_probed_tensors: usize,
}

impl Default for LoadOptions {
    fn default() -> Self {
        LoadOptions {
            traces: Vec::new(),
            tensors: true,
            max_scalars: 32,
            max_probed_tensors: 256,
        }
    }
}

/// Which kind of data a [`Note`] is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum NoteArea {
    /// The run as a whole (location, end marker).
    Run,
    /// System metrics.
    System,
    /// Framework spans.
    Spans,
    /// Tensors and scalars.
    Tensors,
    /// Kineto traces.
    Traces,
    /// Rule results.
    Rules,
}

/// Something missing, unreadable or partial in the input, shown in the report.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Note {
    /// What the note is about.
    pub area: NoteArea,
    /// What happened and what was left out, in a sentence.
    pub message: String,
}

/// One system metric of one node over time.
#[derive(Clone, Debug, PartialEq)]
pub struct MetricSeries {
    /// The node (`NodeId` of the samples).
    pub node: String,
    /// `cpu`, `gpu`, `memory`, `i/o`, `network`, `process`.
    pub metric_type: String,
    /// `cpu0`, `total`, `gpu1`, `MemoryUsedPercent`, …
    pub name: String,
    /// `CPUUtilization`, `GPUMemoryUtilization`, …
    pub dimension: String,
    /// `(timestamp µs since the epoch, value)`, ordered by time.
    pub points: Vec<(u64, f64)>,
}

/// One scalar tensor (a loss, a metric) per mode.
#[derive(Clone, Debug, PartialEq)]
pub struct ScalarSeries {
    /// The tensor's name.
    pub name: String,
    /// Per mode, `(global step, value)` ordered by step.
    pub modes: Vec<(Mode, Vec<(u64, f64)>)>,
}

/// Everything the report shows.
#[derive(Clone, Debug, Default)]
pub struct ReportInput {
    /// The run location, as given.
    pub location: String,
    /// Whether the run's end marker is there; `None` when that could not be told.
    pub run_complete: Option<bool>,
    /// System metrics, one series per (node, type, name, dimension).
    pub metrics: Vec<MetricSeries>,
    /// Framework spans, ordered by start.
    pub spans: Vec<Span>,
    /// Scalar tensors.
    pub scalars: Vec<ScalarSeries>,
    /// Kineto trace summaries, one per trace file.
    pub traces: Vec<RankSummary>,
    /// Rule results.
    pub rules: Vec<RuleOutcome>,
    /// What was missing or unreadable.
    pub notes: Vec<Note>,
    /// When the input was loaded, µs since the epoch (shown as the report's time).
    pub generated_at_us: u64,
}

impl ReportInput {
    /// Adds rule results (kept in the given order).
    pub fn with_rules(mut self, rules: Vec<RuleOutcome>) -> Self {
        self.rules.extend(rules);
        self
    }

    /// Adds a note.
    pub fn note(&mut self, area: NoteArea, message: impl Into<String>) {
        self.notes.push(Note {
            area,
            message: message.into(),
        });
    }

    /// The trace files that could not be read (one note each). Unlike missing run data, these
    /// were asked for by name, so their failure is an error for the caller to report.
    pub fn trace_failures(&self) -> Vec<&str> {
        self.notes
            .iter()
            .filter(|n| n.area == NoteArea::Traces)
            .map(|n| n.message.as_str())
            .collect()
    }
}

/// The report page for `input`.
pub fn render_html(input: &ReportInput) -> String {
    render::render(input)
}

/// Why writing the report failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReportError {
    /// Creating, writing or renaming a file failed.
    #[error("cannot write {path}: {source}")]
    Write {
        /// The file that was being written.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// A rule outcome could not be encoded as JSON.
    #[error("cannot encode the result of rule `{rule}`: {source}")]
    Encode {
        /// The rule's name.
        rule: String,
        /// The encoder's error.
        #[source]
        source: serde_json::Error,
    },
}

/// The files [`write_report`] wrote.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WrittenReport {
    /// The HTML page.
    pub html: PathBuf,
    /// One JSON file per rule outcome, in the order of `ReportInput::rules`.
    pub rule_files: Vec<PathBuf>,
}

/// The file name of a rule's JSON result: the rule name with every character other than ASCII
/// letters, digits, `-` and `_` replaced by `_`, then `.json` (`rule` when the name is empty).
pub fn rule_file_name(rule: &str) -> String {
    let mut name: String = rule
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if name.is_empty() {
        name.push_str("rule");
    }
    name.push_str(".json");
    name
}

/// Writes the page to `html_path` and each rule outcome to `<RuleName>.json` beside it (see
/// [`rule_file_name`]; a second rule with the same file name gets `-2`, `-3`, … appended).
/// The folder is created when missing; every file is written atomically.
pub fn write_report(input: &ReportInput, html_path: &Path) -> Result<WrittenReport, ReportError> {
    // Checked before anything is written: the rule files would otherwise land beside it.
    if html_path.is_dir() {
        return Err(ReportError::Write {
            path: html_path.to_path_buf(),
            source: std::io::Error::new(
                std::io::ErrorKind::IsADirectory,
                "is a directory, not the report's HTML file",
            ),
        });
    }
    let dir = match html_path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    fs::create_dir_all(&dir).map_err(|source| ReportError::Write {
        path: dir.clone(),
        source,
    })?;
    let mut rule_files = Vec::with_capacity(input.rules.len());
    for rule in &input.rules {
        let base = rule_file_name(&rule.name);
        let mut path = dir.join(&base);
        let mut n = 2;
        while rule_files.contains(&path) {
            path = dir.join(format!("{}-{n}.json", base.trim_end_matches(".json")));
            n += 1;
        }
        let json = serde_json::to_vec_pretty(rule).map_err(|source| ReportError::Encode {
            rule: rule.name.clone(),
            source,
        })?;
        write_atomic(&path, &json)?;
        rule_files.push(path);
    }
    write_atomic(html_path, render_html(input).as_bytes())?;
    Ok(WrittenReport {
        html: html_path.to_path_buf(),
        rule_files,
    })
}

static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);

fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), ReportError> {
    let wrap = |source| ReportError::Write {
        path: path.to_path_buf(),
        source,
    };
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let file_name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let temp = dir.join(format!(
        ".{file_name}.{}-{}.tmp",
        std::process::id(),
        TEMP_COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    let result = (|| {
        let mut file = fs::File::create(&temp)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        fs::rename(&temp, path)
    })();
    if result.is_err() {
        // Best effort: the temporary may not exist; the original error is what matters.
        let _ = fs::remove_file(&temp);
    }
    result.map_err(wrap)
}
