//! A window's summary: what was sampled, and the functions with the most samples, computed
//! from the window's call stacks. The same JSON is what readers list and show.

use serde::{Deserialize, Serialize};
use smdebug_core::Mode;

/// The version of the summary format written by this crate.
pub const SUMMARY_VERSION: u32 = 1;

/// A step at which a window began or ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WindowStep {
    /// The step's mode.
    pub mode: Mode,
    /// The step (global step, or the step within `mode`, as the caller counts them).
    pub step: u64,
}

/// A function and its samples in a window.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FunctionSamples {
    /// The demangled function name (Rust paths without their hash).
    pub function: String,
    /// Samples counted for it.
    pub samples: u64,
    /// `samples` over the window's samples, 0 to 1.
    pub share: f64,
}

/// A thread and its samples in a window.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ThreadSamples {
    /// The thread's name (its id when it has none).
    pub thread: String,
    /// Samples taken while it ran.
    pub samples: u64,
}

/// The keys of a window's other files, relative to the run.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CodeProfileFiles {
    /// The pprof profile (`.pb.gz`), when it was written.
    pub pprof: Option<String>,
    /// The flame graph (`.svg`), when there were samples to draw.
    pub flamegraph: Option<String>,
}

/// One window's summary, `<base>.json` beside its profile and flame graph.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CodeProfileSummary {
    /// [`SUMMARY_VERSION`] when written.
    pub version: u32,
    /// The node (`algo-1`, a host name).
    pub node_id: String,
    /// The worker (rank).
    pub worker: u32,
    /// When sampling started, microseconds since the epoch.
    pub start_time_since_epoch_in_micros: u64,
    /// When sampling stopped, microseconds since the epoch.
    pub end_time_since_epoch_in_micros: u64,
    /// The step the window began at, for a window opened at a step boundary.
    pub start_step: Option<WindowStep>,
    /// The last step the window covered, for a window closed at a step boundary.
    pub end_step: Option<WindowStep>,
    /// Samples per second of the process's CPU time.
    pub frequency_hz: u32,
    /// Samples taken in the window (every thread of the process).
    pub samples: u64,
    /// CPU time the process used during the window, seconds. The timer counts CPU time, not
    /// wall time, so `samples` is about `process_cpu_seconds × frequency_hz` for time spent in
    /// the program's own code; samples that land in libc, a system call or the vDSO are
    /// dropped (unwinding from there could deadlock), so a process busy in the kernel has
    /// fewer. `None` where it could not be read.
    pub process_cpu_seconds: Option<f64>,
    /// Distinct functions seen in the window's stacks.
    pub functions: u64,
    /// Samples per thread, most first.
    pub threads: Vec<ThreadSamples>,
    /// Functions by self samples (the sampled instruction was in them), most first.
    pub top_self: Vec<FunctionSamples>,
    /// Functions by total samples (they were anywhere on the sampled stack), most first;
    /// without the start-up chain that every sampled stack shares from its root (the deepest
    /// function of that chain is kept: everything ran under it).
    pub top_total: Vec<FunctionSamples>,
    /// Functions of that shared start-up chain left out of `top_total` (each was on every
    /// sampled stack).
    #[serde(default)]
    pub shared_root_functions: u64,
    /// The window's other files.
    pub files: CodeProfileFiles,
}

impl CodeProfileSummary {
    /// The window's length, seconds.
    pub fn duration_seconds(&self) -> f64 {
        self.end_time_since_epoch_in_micros
            .saturating_sub(self.start_time_since_epoch_in_micros) as f64
            / 1e6
    }

    /// `TRAIN steps 10–14`, `from TRAIN step 10`, or empty for a window without steps.
    pub fn steps_label(&self) -> String {
        match (self.start_step, self.end_step) {
            (Some(a), Some(b)) if a.mode == b.mode => {
                format!("{} steps {}–{}", a.mode.name(), a.step, b.step)
            }
            (Some(a), Some(b)) => format!(
                "{} step {} to {} step {}",
                a.mode.name(),
                a.step,
                b.mode.name(),
                b.step
            ),
            (Some(a), None) => format!("from {} step {}", a.mode.name(), a.step),
            (None, Some(b)) => format!("to {} step {}", b.mode.name(), b.step),
            (None, None) => String::new(),
        }
    }
}
