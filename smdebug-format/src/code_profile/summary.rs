//! A window's summary: what was sampled, and the functions with the most samples, computed
//! from the window's call stacks. The same JSON is what readers list and show.

use serde::{Deserialize, Serialize};
use smdebug_core::Mode;

/// The version of the summary format written by this crate.
pub const SUMMARY_VERSION: u32 = 2;

/// Below this share of its window sampled, a window's label says how much was.
const COVERED: f64 = 0.9;

/// A step at which a window began or ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct WindowStep {
    /// The step's mode.
    pub mode: Mode,
    /// The step (global step, or the step within `mode`, as the caller counts them).
    pub step: u64,
}

/// A function and its samples in a window.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
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
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
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
    /// When the window was asked to open, microseconds since the epoch: sampling starts once
    /// the timer is installed, shortly after. `None` in summaries of version 1.
    #[serde(default)]
    pub requested_start_us: Option<u64>,
    /// When the window was asked to close; `None` when nobody asked (the profiler stopped, or
    /// the next window opened), and in summaries of version 1.
    #[serde(default)]
    pub requested_end_us: Option<u64>,
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

    /// How long after the window was asked to open the sampler started, seconds.
    pub fn start_delay_seconds(&self) -> Option<f64> {
        let asked = self.requested_start_us?;
        Some(self.start_time_since_epoch_in_micros.saturating_sub(asked) as f64 / 1e6)
    }

    /// The share of the asked-for window (from `begin` to `end`) during which the sampler
    /// ran, 0 to 1; `None` when the summary does not say when both were asked for.
    pub fn coverage(&self) -> Option<f64> {
        let (asked_from, asked_to) = (self.requested_start_us?, self.requested_end_us?);
        if asked_to <= asked_from {
            return None;
        }
        let from = asked_from.max(self.start_time_since_epoch_in_micros);
        let to = asked_to.min(self.end_time_since_epoch_in_micros);
        Some(to.saturating_sub(from) as f64 / (asked_to - asked_from) as f64)
    }

    /// `TRAIN steps 10–14`, `from TRAIN step 10`, or empty for a window without steps. When
    /// the sampler ran for less than 90 % of the window it was asked for, the label says so
    /// (`TRAIN steps 20–39 · 12 % of it sampled: the sampler started 0.52 s late`): the
    /// profile is not one of the whole window.
    pub fn steps_label(&self) -> String {
        let steps = self.steps();
        match (self.coverage(), self.start_delay_seconds()) {
            (Some(share), Some(late)) if !steps.is_empty() && share < COVERED => {
                if share <= 0.0 {
                    format!(
                        "{steps} · not sampled: the sampler started {late:.2} s late, after the \
                         window had ended"
                    )
                } else {
                    format!(
                        "{steps} · {:.0} % of it sampled: the sampler started {late:.2} s late",
                        share * 100.0
                    )
                }
            }
            _ => steps,
        }
    }

    fn steps(&self) -> String {
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

#[cfg(any(test, feature = "testing"))]
impl CodeProfileSummary {
    /// For tests: the summary of a 1 s window of worker 0 on `node` from `start_us` that took
    /// no samples, as version 1 wrote it (no requested times, no steps), at 99 Hz.
    pub fn sampled_nothing(node: &str, start_us: u64) -> CodeProfileSummary {
        CodeProfileSummary {
            version: 1,
            node_id: node.to_owned(),
            worker: 0,
            start_time_since_epoch_in_micros: start_us,
            end_time_since_epoch_in_micros: start_us + 1_000_000,
            start_step: None,
            end_step: None,
            requested_start_us: None,
            requested_end_us: None,
            frequency_hz: 99,
            samples: 0,
            process_cpu_seconds: None,
            functions: 0,
            threads: Vec::new(),
            top_self: Vec::new(),
            top_total: Vec::new(),
            shared_root_functions: 0,
            files: CodeProfileFiles::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A window of TRAIN steps 20–39 asked for from 1 s to 2 s, sampled from `from` to `to` (µs).
    fn window(from: u64, to: u64) -> CodeProfileSummary {
        CodeProfileSummary {
            version: SUMMARY_VERSION,
            start_step: Some(WindowStep {
                mode: Mode::Train,
                step: 20,
            }),
            end_step: Some(WindowStep {
                mode: Mode::Train,
                step: 39,
            }),
            requested_start_us: Some(1_000_000),
            requested_end_us: Some(2_000_000),
            end_time_since_epoch_in_micros: to,
            ..CodeProfileSummary::sampled_nothing("algo-1", from)
        }
    }

    #[test]
    fn the_label_says_how_much_of_the_window_was_sampled() {
        // Started 2 ms late, stopped 1 ms after the end: the window's steps alone.
        let on_time = window(1_002_000, 2_001_000);
        assert!((on_time.coverage().unwrap() - 0.998).abs() < 1e-9);
        assert_eq!(on_time.steps_label(), "TRAIN steps 20–39");
        // Started 0.52 s late: under half of it.
        let late = window(1_520_000, 2_001_000);
        assert!((late.coverage().unwrap() - 0.48).abs() < 1e-9);
        assert_eq!(
            late.steps_label(),
            "TRAIN steps 20–39 · 48 % of it sampled: the sampler started 0.52 s late"
        );
        // A 1 ms profile taken after the window: not a profile of those steps at all.
        let after = window(2_500_000, 2_501_000);
        assert_eq!(after.coverage(), Some(0.0));
        assert_eq!(
            after.steps_label(),
            "TRAIN steps 20–39 · not sampled: the sampler started 1.50 s late, after the window \
             had ended"
        );
    }

    #[test]
    fn summaries_without_request_times_keep_their_label() {
        // Version 1 files, and windows whose end nobody asked for.
        let mut old = window(2_500_000, 2_501_000);
        old.requested_start_us = None;
        old.requested_end_us = None;
        assert_eq!(old.coverage(), None);
        assert_eq!(old.steps_label(), "TRAIN steps 20–39");
        let mut open_ended = window(2_500_000, 2_501_000);
        open_ended.requested_end_us = None;
        assert_eq!(open_ended.steps_label(), "TRAIN steps 20–39");
        assert!((open_ended.start_delay_seconds().unwrap() - 1.5).abs() < 1e-9);
        // A version 1 summary (no request times in its JSON) still reads.
        let mut json = serde_json::to_value(&old).unwrap();
        let object = json.as_object_mut().unwrap();
        object.remove("requested_start_us");
        object.remove("requested_end_us");
        let back: CodeProfileSummary = serde_json::from_value(json).unwrap();
        assert_eq!(back, old);
    }
}
