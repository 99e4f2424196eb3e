//! Which profilers a timeline drives ([`Profiling`]) and the window each one is open in
//! ([`TimelineConfig`]).

use crate::window::Window;

/// A profiler a window governs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Profiling {
    /// Step, forward, backward, optimizer and custom spans.
    Phases,
    /// Data-loading spans (SageMaker's `DataloaderProfilingConfig`).
    DataLoading,
    /// Per-module spans (SageMaker's `DetailedProfilingConfig`).
    Detailed,
    /// The sampling code profile (SageMaker's `PythonProfilingConfig`).
    Code,
}

impl Profiling {
    /// Every profiler, in the order of their bits.
    pub const ALL: [Profiling; 4] = [
        Profiling::Phases,
        Profiling::DataLoading,
        Profiling::Detailed,
        Profiling::Code,
    ];

    pub(super) fn bit(self) -> u8 {
        1 << (self as u8)
    }

    /// The name users see (`detailed`, `data loading`, ...).
    pub fn name(self) -> &'static str {
        match self {
            Profiling::Phases => "phases",
            Profiling::DataLoading => "data loading",
            Profiling::Detailed => "detailed",
            Profiling::Code => "code",
        }
    }
}

/// When each profiler runs. Settings in code; SageMaker's profiler file may replace windows
/// while the job runs ([`Timeline::set_window`](super::Timeline::set_window)).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TimelineConfig {
    /// Step, forward, backward, optimizer and custom spans. Default: every step.
    pub phases: Window,
    /// Data-loading spans. Default: every step.
    pub data_loading: Window,
    /// Per-module spans. Default: never.
    pub detailed: Window,
    /// The code profile. Default: never.
    pub code: Window,
}

impl Default for TimelineConfig {
    fn default() -> Self {
        TimelineConfig {
            phases: Window::Always,
            data_loading: Window::Always,
            detailed: Window::Never,
            code: Window::Never,
        }
    }
}

impl TimelineConfig {
    /// Every profiler off (what SageMaker's `DisableProfiler` asks for).
    pub fn off() -> TimelineConfig {
        TimelineConfig {
            phases: Window::Never,
            data_loading: Window::Never,
            detailed: Window::Never,
            code: Window::Never,
        }
    }

    /// The window of `profiling`.
    pub fn window(&self, profiling: Profiling) -> &Window {
        match profiling {
            Profiling::Phases => &self.phases,
            Profiling::DataLoading => &self.data_loading,
            Profiling::Detailed => &self.detailed,
            Profiling::Code => &self.code,
        }
    }

    /// Sets the window of `profiling`.
    pub fn set(&mut self, profiling: Profiling, window: Window) {
        match profiling {
            Profiling::Phases => self.phases = window,
            Profiling::DataLoading => self.data_loading = window,
            Profiling::Detailed => self.detailed = window,
            Profiling::Code => self.code = window,
        }
    }
}
