//! The profiler configuration's types: what a `profilerconfig.json` states, every field `None`
//! when the file does not state it.

use std::fmt;
use std::time::Duration;

use smdebug_core::PyRegex;
use smdebug_core::config_keys::UnappliedKey;
use smdebug_core::window::Window;

/// SageMaker's profiler configuration (the `ProfilerConfig` of a training job), as one file
/// states it. See the [module docs](super) for how it is read and applied.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ProfilerConfig {
    /// `DisableProfiler`: `true` turns off system sampling and every framework profiler.
    /// Read at the top level, where SageMaker's API and Python smdebug have it, and inside
    /// `ProfilingParameters` (true in either place disables).
    pub disable_profiler: Option<bool>,
    /// `ProfilingIntervalInMilliseconds`: the system sampler's interval (SageMaker's own
    /// monitoring reads it; Python smdebug does not).
    pub system_interval: Option<Duration>,
    /// `ProfilingParameters`. `None`: the file does not state it.
    pub profiling_parameters: Option<ProfilingParameters>,
    /// Top-level keys read by nothing here: unknown ones (SageMaker's `S3OutputPath`, where it
    /// uploads `LocalPath`, is not reported). Those of `ProfilingParameters` are in its
    /// [`unapplied`](ProfilingParameters::unapplied); [`unapplied_keys`](Self::unapplied_keys)
    /// gives them all.
    pub unapplied: Vec<UnappliedKey>,
}

impl ProfilerConfig {
    /// Every key of the file that was not applied, top level first.
    pub fn unapplied_keys(&self) -> impl Iterator<Item = &UnappliedKey> {
        self.unapplied.iter().chain(
            self.profiling_parameters
                .iter()
                .flat_map(|p| p.unapplied.iter()),
        )
    }
}

/// `ProfilingParameters`: where and how framework profiling writes, and each profiler's window.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ProfilingParameters {
    /// `LocalPath`: where profiler files go (smdebug's default on SageMaker:
    /// `/opt/ml/output/profiler`), as written (smdebug lowercases it with the rest of the file).
    pub local_path: Option<String>,
    /// `RotateMaxFileSizeInBytes`: a trace file is closed at this size (smdebug: 10 MiB).
    pub rotate_max_file_size: Option<u64>,
    /// `RotateFileCloseIntervalInSeconds`: a trace file is closed at this age (smdebug: 60 s).
    pub rotate_file_close_interval: Option<Duration>,
    /// `FileOpenFailThreshold`: smdebug's trace writer gives up after this many failed opens
    /// (default 50). Kept, not applied: the span writer never gives up (a failed publication
    /// keeps its spans for the next one, and is counted).
    pub file_open_fail_threshold: Option<u32>,
    /// `DetailedProfilingConfig`.
    pub detailed: Option<DetailedProfilingConfig>,
    /// `DataloaderProfilingConfig`.
    pub dataloader: Option<DataloaderProfilingConfig>,
    /// `PythonProfilingConfig`: drives the code profile (a sampling CPU profile of the
    /// process, whatever `ProfilerName` says).
    pub python: Option<PythonProfilingConfig>,
    /// Keys read by nothing here, in it and its sub-configs: SageMaker's that are not
    /// supported (`ProfilerEnabled` of older files,
    /// `SMDataParallelProfilingConfig`, `HorovodProfilingConfig`) and unknown ones (a
    /// misspelling, with the key it most resembles). Parameters holding only such keys still
    /// state something: they do not turn the framework profilers off as `{}` does.
    pub unapplied: Vec<UnappliedKey>,
}

impl ProfilingParameters {
    /// States nothing at all (`{}` or `null` in the file): smdebug's "User has disabled
    /// profiler".
    pub fn is_empty(&self) -> bool {
        self == &ProfilingParameters::default()
    }
}

/// `DetailedProfilingConfig`: when framework operations are profiled in detail.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DetailedProfilingConfig {
    /// The window (from `StartStep`/`NumSteps` or `StartTimeInSecSinceEpoch`/
    /// `DurationInSeconds`; [`Window::Never`] when the config states neither).
    pub window: Window,
}

/// `DataloaderProfilingConfig`: when data loading is profiled, and which of its events.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DataloaderProfilingConfig {
    /// The window, as for [`DetailedProfilingConfig::window`].
    pub window: Window,
    /// `MetricsRegex`: the events recorded (`None`: all, smdebug's `.*`).
    pub metrics_regex: Option<MetricsRegex>,
}

/// `PythonProfilingConfig`: when the code is profiled. Python smdebug runs cProfile or
/// pyinstrument; here the code profile is a sampling CPU profile either way, and
/// `ProfilerName` and `cProfileTimer` are kept as the file states them.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PythonProfilingConfig {
    /// The window, as for [`DetailedProfilingConfig::window`].
    pub window: Window,
    /// `ProfilerName` (smdebug's default: cProfile).
    pub profiler_name: Option<PythonProfilerName>,
    /// `cProfileTimer` (smdebug's default: total time); read only with cProfile, as smdebug.
    pub cprofile_timer: Option<CProfileTimer>,
}

/// `ProfilerName` of a `PythonProfilingConfig`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum PythonProfilerName {
    /// `cProfile`.
    CProfile,
    /// `Pyinstrument`.
    Pyinstrument,
}

/// `cProfileTimer` of a `PythonProfilingConfig`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum CProfileTimer {
    /// `total_time`: wall-clock time.
    TotalTime,
    /// `cpu_time`: CPU time of the process.
    CpuTime,
    /// `off_cpu_time`: wall-clock time minus CPU time.
    OffCpuTime,
    /// `default`: the SDK's default steps, one of the three timers per step.
    Default,
}

/// `MetricsRegex` of a `DataloaderProfilingConfig`: a Python `re` pattern that smdebug lowercases
/// and matches at the start of the lowercased event name (`re.match`). Here it matches
/// case-insensitively at the start of the name, which is the same except where lowercasing
/// changes a pattern's meaning (`\D`, `\W`, `\S` and `\B` become `\d`, `\w`, `\s` and `\b` in
/// smdebug; they keep their meaning here).
#[derive(Clone)]
pub struct MetricsRegex {
    pattern: String,
    regex: PyRegex,
}

impl MetricsRegex {
    /// Compiles `pattern` (Python `re` syntax); the error is the engine's reason.
    pub fn new(pattern: &str) -> Result<MetricsRegex, String> {
        // `(?:...)` keeps an alternation (`a|b`) under the anchor, as `re.match` anchors both.
        let anchored = format!("(?i)^(?:{pattern})");
        PyRegex::new(&anchored)
            .map(|regex| MetricsRegex {
                pattern: pattern.to_string(),
                regex,
            })
            .map_err(|e| e.to_string())
    }

    /// The pattern as written.
    pub fn as_str(&self) -> &str {
        &self.pattern
    }

    /// Whether an event called `name` is recorded.
    pub fn matches(&self, name: &str) -> bool {
        self.regex.is_match(name)
    }
}

impl PartialEq for MetricsRegex {
    fn eq(&self, other: &Self) -> bool {
        self.pattern == other.pattern
    }
}

impl fmt::Debug for MetricsRegex {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("MetricsRegex").field(&self.pattern).finish()
    }
}
