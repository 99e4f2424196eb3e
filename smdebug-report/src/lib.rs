//! # smdebug-report
//!
//! The profiling report: one self-contained HTML page per run, and one JSON result per rule.
//!
//! **From the rule runner.** A [`ReportWriter`] attached to a `RuleRunner`
//! ([`RunnerBuilder::reporter`](smdebug_rules::runner::RunnerBuilder::reporter)) draws the page
//! from what the runner already holds: every rule's status with the parameters in force, the
//! system metrics and spans its profiler feed read, and its trial for the scalar curves. The
//! run is not read a second time.
//!
//! ```no_run
//! use smdebug_report::ReportWriter;
//! use smdebug_rules::{RuleRunner, RuleSpec};
//!
//! let summary = RuleRunner::builder("/tmp/run")
//!     .spec(RuleSpec::parse("ProfilerReport:CPUBottleneck_cpu_threshold=80").unwrap())
//!     .reporter(ReportWriter::to_file("/tmp/run-report/profiler-report.html"))
//!     .build()?
//!     .run_offline()?;
//! println!("{}", summary.rule("ProfilerReport").unwrap().message);
//! # Ok::<(), smdebug_rules::Error>(())
//! ```
//!
//! **By itself.** [`ReportInput::load`] reads a run through smdebug-io's `Storage` (a local
//! path or an object-store URL): system metrics and framework spans (files of smdebug-profiler
//! or of Python smdebug / SageMaker Debugger), scalar tensors per mode through the `Trial` (the
//! `losses` and `metrics` collections and any other tensor saved as a single value), and Kineto
//! traces named in [`LoadOptions::traces`]. Rule statuses come in through
//! [`ReportInput::with_rules`]. Loading never fails as a whole: a missing folder, a corrupt
//! metrics line, an unreadable trace or a run still being written becomes a [`Note`] that the
//! report shows where the data would have been.
//!
//! **Output.** [`render_html`] returns the page; [`write_report`] writes it and the rule
//! results through a `Storage` (each `put` is atomic, so a report regenerated while the job runs
//! is never seen half-written), [`write_report_to`] to a local file:
//!
//! ```text
//! <dir>/<report>.html       the page (any name the caller picks)
//! <dir>/<RuleName>.json     one per rule: a RuleFile
//! ```
//!
//! **The page.** The sections of [`SECTIONS`], in that order, each a
//! `<section id="…" class="report-section">`; a section without data says what is missing in a
//! `<p class="missing">`. Charts are inline SVG drawn with plotters (no font files needed), each
//! in a `<figure class="chart">`. A time series longer than 400 points is cut into 400 time
//! slices, drawn as the slice means with a band from each slice's lowest to highest value.
//! Every string from the data is HTML-escaped. The page loads nothing: its
//! Content-Security-Policy forbids every source except inline style and script and `data:`
//! images, and it names no URL other than the SVG/XHTML namespaces. A small inline script
//! checks the page once loaded and stores the result in `document.body.dataset.selfcheck`
//! (JSON: `sections`, `section_ids`, `charts`, `charts_drawn`, `empty_charts`, `errors`,
//! `csp_violations`), so a headless browser's `--dump-dom` shows whether it rendered.
//!
//! **Figures.** Percentiles interpolate linearly between ranks (NumPy's default). Step
//! durations are grouped per node and worker (one worker per GPU in data-parallel jobs).
//! Bottleneck checks pair each CPU sample with the mean utilization of the node's GPUs at the
//! nearest sample time. Every threshold a figure uses is the parameter of the rule that judges
//! the same thing, as that rule ran (`ProfilerReport:CPUBottleneck_cpu_threshold=80` moves the
//! CPU-bottleneck chart to 80 %), or the rule's default when it did not run.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod charts;
mod html;
mod load;
mod output;
mod render;
mod stats;
mod writer;

use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use smdebug_core::Mode;
use smdebug_rules::RuleStatus;

pub use output::{
    ReportError, RuleFile, WrittenReport, rule_file_name, write_report, write_report_to,
};
pub use smdebug_profiler::RankSummary;
pub use smdebug_profiler::reader::{MetricSeries, Span};
pub use writer::ReportWriter;

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
    /// Every rule's status, with the parameters it ran with.
    pub rules: Vec<RuleStatus>,
    /// What was missing or unreadable.
    pub notes: Vec<Note>,
    /// When the input was loaded, µs since the epoch (shown as the report's time).
    pub generated_at_us: u64,
}

impl ReportInput {
    /// Adds rule statuses (kept in the given order).
    pub fn with_rules(mut self, rules: Vec<RuleStatus>) -> Self {
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
