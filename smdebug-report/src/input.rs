//! What the report shows: the sections, the input (metrics, spans, scalars, traces, rule
//! statuses) and the notes on what was missing.

use std::path::PathBuf;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use smdebug_analysis::digest::{ProfileDigest, SeriesDigest};
use smdebug_core::Mode;
use smdebug_format::code_profile::CodeProfileFile;
use smdebug_format::code_profile::CodeProfileSummary;
use smdebug_read::RankSummary;
use smdebug_rules::RuleStatus;

/// The page's sections, in order: `(id, title)`. SPEC §6's thirteen first, then the code
/// profile, the debugging rules, the scalar curves and the notes on missing or unreadable data.
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
    ("code-profile", "Code profile"),
    ("debugging-rules", "Debugging rules"),
    ("scalars", "Scalars"),
    ("data-notes", "Notes on the data"),
];

/// What [`ReportInput::load`] reads besides the run itself.
#[derive(Clone, Debug)]
pub struct LoadOptions {
    /// Kineto (PyTorch profiler) trace files, plain or gzip-compressed, one per rank.
    pub traces: Vec<PathBuf>,
    /// Read the run's scalar tensors (default true): every tensor saved as one number, through
    /// smdebug-read's `TensorFollower`.
    pub tensors: bool,
    /// At most this many scalar tensors are drawn (default 32); the rest are named in a note.
    pub max_scalars: usize,
    /// The allocation budget for one value, in bytes (default
    /// [`DEFAULT_MAX_TENSOR_BYTES`](smdebug_read::trial::DEFAULT_MAX_TENSOR_BYTES)). The report
    /// reads only one-number records (16 bytes with their `f64`); a budget below that reads no
    /// scalar, with a note.
    pub max_tensor_bytes: u64,
}

impl Default for LoadOptions {
    fn default() -> Self {
        LoadOptions {
            traces: Vec::new(),
            tensors: true,
            max_scalars: 32,
            max_tensor_bytes: smdebug_read::trial::DEFAULT_MAX_TENSOR_BYTES,
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
    /// Code profiles (sampled CPU stacks).
    CodeProfiles,
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

/// The code-profile windows whose flame graphs the report embeds (the latest ones); the
/// others are counted.
pub const CODE_PROFILE_WINDOWS_SHOWN: usize = 8;

/// A code-profile window as the report shows it.
#[derive(Clone, Debug, PartialEq)]
pub struct CodeProfile {
    /// Where the window's files are.
    pub file: CodeProfileFile,
    /// The window's summary: its steps, samples and top functions.
    pub summary: CodeProfileSummary,
    /// The flame graph (SVG) of the window, for the windows shown, when it could be read.
    pub flamegraph: Option<Vec<u8>>,
}

/// Everything the report shows.
#[derive(Clone, Debug, Default)]
pub struct ReportInput {
    /// The run location, as given.
    pub location: String,
    /// Whether the run's end marker is there; `None` when that could not be told.
    pub run_complete: Option<bool>,
    /// System metrics (one series per node, type, name and dimension) and framework spans,
    /// aggregated as they were read: shared with the follower that read them, not copied.
    pub profile: Arc<ProfileDigest>,
    /// Scalar tensors.
    pub scalars: Vec<ScalarSeries>,
    /// Kineto trace summaries, one per trace file.
    pub traces: Vec<RankSummary>,
    /// Every rule's status, with the parameters it ran with.
    pub rules: Vec<RuleStatus>,
    /// Code-profile windows, ordered by start.
    pub code_profiles: Vec<CodeProfile>,
    /// What was missing or unreadable.
    pub notes: Vec<Note>,
    /// When the input was loaded, µs since the epoch (shown as the report's time).
    pub generated_at_us: u64,
}

impl ReportInput {
    /// The system metrics, one series per (node, type, name, dimension), ordered by them.
    pub fn metrics(&self) -> impl Iterator<Item = &SeriesDigest> + '_ {
        self.profile.series()
    }

    /// Whether any system metric was read.
    pub fn has_metrics(&self) -> bool {
        self.profile.series_count() > 0
    }

    /// How many framework spans were read.
    pub fn span_count(&self) -> u64 {
        self.profile.span_count()
    }

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
