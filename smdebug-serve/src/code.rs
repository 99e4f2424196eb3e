//! Code profiles of a run for the dashboard: the windows with their top functions (as the
//! run's follower read them), and each window's flame graph and pprof profile, read through
//! smdebug-read's profiler reader when asked for.

use schemars::JsonSchema;
use serde::Serialize;
use smdebug_format::code_profile::FunctionSamples;
use smdebug_format::code_profile::ThreadSamples;
use smdebug_format::code_profile::WindowStep;
use smdebug_read::profile::{CodeProfileWindow, ProfilerReader};
use smdebug_storage::Storage;

/// Functions sent per top list.
const TOP: usize = 15;
/// Windows sent, the latest ones.
const MAX_WINDOWS: usize = 50;

/// The Content-Security-Policy of a flame graph opened by itself: its own inline style and
/// nothing else; sandboxed, so its script never runs on the dashboard's origin.
pub(crate) const FLAMEGRAPH_CSP: &str = "default-src 'none'; style-src 'unsafe-inline'; sandbox";

/// `GET /api/runs/{id}/code`.
#[derive(Debug, Default, Serialize, JsonSchema)]
pub(crate) struct CodeWindows {
    /// The latest windows, ordered by start.
    pub windows: Vec<CodeWindow>,
    /// Windows in the run (more than sent when there are over [`MAX_WINDOWS`]).
    pub total: usize,
    /// Summaries that could not be read.
    pub warnings: Vec<String>,
}

/// One window.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct CodeWindow {
    /// The window's name, for its flame graph and profile URLs.
    pub id: String,
    pub node: String,
    pub worker: u32,
    /// Seconds since the epoch.
    pub start: f64,
    pub end: f64,
    pub start_step: Option<WindowStep>,
    pub end_step: Option<WindowStep>,
    /// `TRAIN steps 10–14`, or empty.
    pub steps: String,
    pub samples: u64,
    pub frequency_hz: u32,
    pub process_cpu_seconds: Option<f64>,
    pub functions: u64,
    pub threads: Vec<ThreadSamples>,
    pub top_self: Vec<FunctionSamples>,
    pub top_total: Vec<FunctionSamples>,
    /// Functions of the shared start-up chain left out of `top_total`.
    pub shared_root_functions: u64,
    /// Whether the window has a flame graph and a pprof profile.
    pub flamegraph: bool,
    pub pprof: bool,
}

/// The run's windows, as its follower read them; `warnings` are the follower's problems with
/// code profiles.
pub(crate) fn windows(held: &[CodeProfileWindow], warnings: Vec<String>) -> CodeWindows {
    let total = held.len();
    let windows = held[total.saturating_sub(MAX_WINDOWS)..]
        .iter()
        .map(|w| {
            let s = &w.summary;
            CodeWindow {
                id: w.file.id().to_owned(),
                node: s.node_id.clone(),
                worker: s.worker,
                start: s.start_time_since_epoch_in_micros as f64 / 1e6,
                end: s.end_time_since_epoch_in_micros as f64 / 1e6,
                steps: s.steps_label(),
                start_step: s.start_step,
                end_step: s.end_step,
                samples: s.samples,
                frequency_hz: s.frequency_hz,
                process_cpu_seconds: s.process_cpu_seconds,
                functions: s.functions,
                threads: s.threads.clone(),
                top_self: s.top_self.iter().take(TOP).cloned().collect(),
                top_total: s.top_total.iter().take(TOP).cloned().collect(),
                shared_root_functions: s.shared_root_functions,
                flamegraph: s.files.flamegraph.is_some(),
                pprof: s.files.pprof.is_some(),
            }
        })
        .collect();
    CodeWindows {
        windows,
        total,
        warnings,
    }
}

/// Which file of a window.
#[derive(Clone, Copy, Debug)]
pub(crate) enum CodeFile {
    Flamegraph,
    Pprof,
}

/// The window named `id` (looked up among the run's windows, never turned into a path), and
/// the file asked for: `Ok(None)` when there is no such window or file.
pub(crate) fn file(
    storage: Option<std::sync::Arc<dyn Storage>>,
    held: &[CodeProfileWindow],
    id: &str,
    which: CodeFile,
) -> Result<Option<bytes::Bytes>, String> {
    let Some(storage) = storage else {
        return Ok(None);
    };
    let Some(window) = held.iter().find(|w| w.file.id() == id) else {
        return Ok(None);
    };
    let reader = ProfilerReader::new(storage);
    match which {
        CodeFile::Flamegraph => reader.code_profile_flamegraph(&window.file),
        CodeFile::Pprof => reader.code_profile_pprof(&window.file),
    }
    .map_err(|e| e.to_string())
}
