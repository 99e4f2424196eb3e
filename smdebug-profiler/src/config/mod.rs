//! SageMaker's profiler configuration (`profilerconfig.json`), read as Python smdebug 1.0.34's
//! `ProfilerConfigParser` reads it, and laid over the settings from code.
//!
//! SageMaker writes the file from a training job's `ProfilerConfig`; `SMPROFILER_CONFIG_PATH`
//! names it, else `/opt/ml/input/config/profilerconfig.json` (see
//! [`smdebug_io::sagemaker::ConfigSources`]). An example, from SageMaker's documentation:
//!
//! ```json
//! {
//!   "ProfilingIntervalInMilliseconds": 500,
//!   "ProfilingParameters": {
//!     "DataloaderProfilingConfig": "{\"StartStep\": 5, \"NumSteps\": 3, \"MetricsRegex\": \".*\", }",
//!     "DetailedProfilingConfig": "{\"StartStep\": 5, \"NumSteps\": 3, }",
//!     "PythonProfilingConfig": "{\"StartStep\": 5, \"NumSteps\": 3, \"ProfilerName\": \"cprofile\", \"cProfileTimer\": \"total_time\"}",
//!     "LocalPath": "/opt/ml/output/profiler/"
//!   }
//! }
//! ```
//!
//! # What is read
//!
//! | key | type | here |
//! | --- | --- | --- |
//! | `DisableProfiler` (top level, or in `ProfilingParameters`) | boolean | [`ProfilerConfig::disable_profiler`] |
//! | `ProfilingIntervalInMilliseconds` | whole number | [`ProfilerConfig::system_interval`] |
//! | `ProfilingParameters` | object | [`ProfilerConfig::profiling_parameters`] |
//! | `.LocalPath` | string | [`ProfilingParameters::local_path`] |
//! | `.RotateMaxFileSizeInBytes` | whole number | [`ProfilingParameters::rotate_max_file_size`] |
//! | `.RotateFileCloseIntervalInSeconds` | seconds | [`ProfilingParameters::rotate_file_close_interval`] |
//! | `.FileOpenFailThreshold` | whole number | [`ProfilingParameters::file_open_fail_threshold`] |
//! | `.DetailedProfilingConfig` | sub-config | [`DetailedProfilingConfig`] |
//! | `.DataloaderProfilingConfig` | sub-config, `MetricsRegex` | [`DataloaderProfilingConfig`] |
//! | `.PythonProfilingConfig` | sub-config, `ProfilerName`, `cProfileTimer` | [`PythonProfilingConfig`] |
//!
//! - Keys are case-insensitive at every level (smdebug lowercases the whole file before
//!   parsing it); two keys equal but for case are an error.
//! - A sub-config is a string holding a dict, which smdebug `eval`s: JSON, or Python as the
//!   SDK and the documentation write it. Read here without evaluating anything: one flat dict
//!   with a trailing comma allowed, strings in single or double quotes with Python's escapes (a
//!   backslash Python does not know, as in a regex's `\.`, stays), numbers, `True`/`False`/
//!   `None` and `true`/`false`/`null`, `#` comments. A sub-config may also be a JSON object
//!   here (smdebug's `eval` refuses one).
//! - Numbers may be strings (`"300"`, `"0.5"`), as SageMaker writes every value of
//!   `ProfilingParameters`.
//! - A sub-config's window: `StartStep`/`NumSteps` (a step range; without `StartStep` it starts
//!   at the step where it is first asked about, without `NumSteps` it covers one step), or
//!   `StartTimeInSecSinceEpoch`/`DurationInSeconds` (a time range; without a start it starts
//!   when first asked about, without a duration it covers one step), as a
//!   [`Window`](smdebug_core::window::Window). Neither: [`Window::Never`](smdebug_core::window::Window::Never).
//! - `S3OutputPath` is SageMaker's (it uploads `LocalPath` there): left to it, unreported.
//!   Other keys are not applied, and listed ([`ProfilerConfig::unapplied_keys`], which the
//!   session prints as warnings): the old `ProfilerEnabled`, `SMDataParallelProfilingConfig`
//!   and `HorovodProfilingConfig` as not supported, any other key, at any level, as unknown
//!   with the key it most resembles (`LocalPth`: did you mean `LocalPath`?).
//!
//! # Order of precedence
//!
//! Settings in code are defaults; the file overrides what it states, key by key:
//!
//! 1. No file: the code's settings ([`ProfilerConfig::read`] is `Ok(None)`).
//! 2. `DisableProfiler: true`: everything off, the system sampler too
//!    ([`ProfilerConfig::system_profiling_off`], [`ProfilerConfig::framework_profiling_off`]).
//! 3. `ProfilingParameters` stated empty (`{}` or `null`): every framework profiler off (as
//!    smdebug: "User has disabled profiler"); system sampling as the code and
//!    `ProfilingIntervalInMilliseconds` say.
//! 4. Otherwise each profiler's window is the file's when the file states its sub-config (an
//!    empty sub-config `"{}"` states "off"), the code's when it does not
//!    ([`ProfilerConfig::windows_over`]); the rotation settings and the interval replace the
//!    code's when stated ([`ProfilerConfig::span_config`], [`ProfilerConfig::sampler_config`]).
//!
//! # While the job runs
//!
//! [`ProfilerConfigWatcher`] re-reads the file when it changes (smdebug re-reads it at every
//! step). A session applies only the windows (and `DisableProfiler`) of a new configuration:
//! the writers' rotation, `LocalPath` and the sampling interval are set at start. Compare each
//! new window with the one in force and replace only the windows that changed, so an open
//! window is not restarted by an unrelated edit (smdebug restarts them all); a replaced window
//! with no `StartStep` opens at the next step.
//!
//! # Where this differs from smdebug 1.0.34, and why
//!
//! smdebug switches a broken config off and logs it; here a broken file is an error at start,
//! naming the file, the key and the value (and, once running, a broken edit is logged and the
//! last good configuration kept). So these are errors here where smdebug disables the config,
//! uses defaults, or crashes:
//!
//! - a step range and a time range in one sub-config (smdebug disables that profiler);
//! - a number that is not one (`"None"`, `"ten"`), a negative or fractional step count
//!   (smdebug truncates `5.5`), a `ProfilerName` other than cProfile/Pyinstrument, a
//!   `cProfileTimer` other than `total_time`, `cpu_time`, `off_cpu_time`, `default`, a
//!   `MetricsRegex` that does not compile, a sub-config that is not a dict (smdebug disables
//!   the profiler, or falls back to default rotation values);
//! - JSON `true`/`false`/`null` or Python `True`/`False`/`None` inside a sub-config string
//!   are read (smdebug's lowercasing makes `eval` fail on them with an exception it does not
//!   catch).
//!
//! And where a valid file reads differently:
//!
//! - `DisableProfiler: "false"` (a string) is false here; smdebug tests truthiness, so any
//!   non-empty string disables.
//! - A value that is zero is stated: `{"StartStep": 0}` profiles step 0 here; smdebug tests
//!   truthiness and profiles nothing. `{"StartTimeInSecSinceEpoch": X, "DurationInSeconds": 0}`
//!   profiles nothing here; smdebug profiles one step. `{"StartStep": 0,
//!   "DurationInSeconds": 10}` is an error here (both ranges); smdebug takes the time range.
//! - `Duration`, which the SageMaker Python SDK's `TimeRange` writes, is read as
//!   `DurationInSeconds`; smdebug ignores it and profiles one step.
//! - `LocalPath` and `MetricsRegex` keep their case; smdebug lowercases them (a path with
//!   capitals becomes another path, and `\D` in a regex becomes `\d`).
//! - A sub-config the file leaves out keeps the code's window; smdebug profiles nothing for it.
//! - A file that disappears, or an edit that breaks it, keeps the last configuration; smdebug
//!   turns profiling off.
//! - `ProfilingIntervalInMilliseconds` sets the system sampler's interval; smdebug does not
//!   read it (SageMaker's own monitoring does).
//! - `FileOpenFailThreshold` is kept but governs nothing: the span writer never gives up.
//! - `ProfilerName` and `cProfileTimer` are kept; the code profile is a sampling CPU profile
//!   of the process whichever profiler the file names.
//!
//! ```
//! use smdebug_core::timeline::TimelineConfig;
//! use smdebug_core::window::Window;
//! use smdebug_profiler::config::ProfilerConfig;
//!
//! let file = ProfilerConfig::from_json(r#"{"profilingparameters": {
//!     "DetailedProfilingConfig": "{\"StartStep\": 10, \"NumSteps\": 5, }",
//!     "dataloaderprofilingconfig": {"StartTimeInSecSinceEpoch": "1700000000", "DurationInSeconds": 60}}}"#)?;
//! let code = TimelineConfig { code: Window::steps(100, 3), ..TimelineConfig::default() };
//! let windows = file.windows_over(&code);
//! assert_eq!(windows.detailed, Window::steps(10, 5));
//! assert!(matches!(windows.data_loading, Window::Time { start: Some(_), duration: Some(_) }));
//! assert_eq!(windows.code, Window::steps(100, 3), "not in the file: the code's");
//! # Ok::<(), smdebug_profiler::ProfilerError>(())
//! ```

mod apply;
mod literal;
mod model;
mod parse;
mod watch;

pub use model::{
    CProfileTimer, DataloaderProfilingConfig, DetailedProfilingConfig, MetricsRegex,
    ProfilerConfig, ProfilingParameters, PythonProfilerName, PythonProfilingConfig,
};
pub use watch::ProfilerConfigWatcher;
