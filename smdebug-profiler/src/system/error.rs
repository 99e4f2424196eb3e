//! The error type of the sampler, the span recorder, their files and the reader.

use std::io;
use std::time::Duration;

/// Why sampling, span recording, storing or reading profiler files failed.
///
/// Variants raised while reading name the storage key (the path relative to the run
/// directory) and, where there is one, the line of the file.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ProfilerError {
    /// The sampling interval is outside the supported range.
    #[error("invalid sampling interval {interval:?}: must be between 100 ms and 60 s")]
    InvalidInterval {
        /// The rejected interval.
        interval: Duration,
    },
    /// A configuration value is outside its allowed range.
    #[error("invalid {setting}: {reason}")]
    InvalidConfig {
        /// The setting, as named by its builder method.
        setting: &'static str,
        /// What is wrong with it.
        reason: String,
    },
    /// A node id cannot be used in smdebug's file names.
    #[error("invalid node id `{node}`: {reason}")]
    InvalidNodeId {
        /// The rejected id.
        node: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// Opening the run's storage, or storing, fetching or listing a file, failed; smdebug-io's
    /// error names the storage, the operation and the path.
    #[error(transparent)]
    Storage(#[from] smdebug_io::Error),
    /// A profiler configuration (SageMaker's `profilerconfig.json`) that does not parse, or
    /// states a value the profilers cannot take: the file, the key (its path, in SageMaker's
    /// spelling, e.g. `ProfilingParameters.DetailedProfilingConfig.StartStep`; empty for the
    /// whole file), the value as written and the reason.
    #[error("{}", describe_bad_config(.file.as_deref(), .key, .value.as_deref(), .reason))]
    BadProfilerConfig {
        /// The file, when the configuration came from one.
        file: Option<std::path::PathBuf>,
        /// Where in the configuration.
        key: String,
        /// The value as written, when one is at fault.
        value: Option<String>,
        /// What is wrong.
        reason: String,
    },
    /// A background thread could not be started.
    #[error("cannot start the {thread} thread: {source}")]
    Thread {
        /// Which thread.
        thread: &'static str,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// A background thread ended by panicking.
    #[error("the {thread} thread panicked")]
    ThreadPanicked {
        /// Which thread.
        thread: &'static str,
    },
    /// A background writer has already stopped (its guard was dropped or finished).
    #[error("the {writer} writer has stopped")]
    WriterStopped {
        /// Which writer.
        writer: &'static str,
    },
    /// The profiled command could not be started or waited for.
    #[error("cannot {action} `{program}`: {source}")]
    Command {
        /// `spawn` or `wait for`.
        action: &'static str,
        /// The program.
        program: String,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// Host metrics cannot be sampled on this operating system.
    #[error("system metrics sampling is supported on Linux only")]
    UnsupportedPlatform,
    /// Code profiles cannot be taken in this build.
    #[error("code profiling is not available: {reason}")]
    CodeProfileUnsupported {
        /// Why (the `code-profile` feature is off, or the platform is not Linux).
        reason: &'static str,
    },
    /// A code-profile window is already open in this process: the sampler (a `SIGPROF` timer)
    /// is process-wide, so one window samples at a time.
    #[error(
        "a code-profile window is already open in this process (the CPU sampler is \
         process-wide: one window at a time)"
    )]
    CodeProfileBusy,
    /// `end` was called with no code-profile window open.
    #[error("no code-profile window is open")]
    CodeProfileNoWindow,
    /// Earlier windows are still being symbolized and written; no new window was opened.
    #[error(
        "{pending} code-profile window(s) are still being written; the new window was not opened"
    )]
    CodeProfileBacklog {
        /// Windows waiting for the writer.
        pending: u64,
    },
    /// The code-profile writer did not finish within its timeout.
    #[error("the code-profile writer did not finish within {waited:?}")]
    CodeProfileTimeout {
        /// How long it was given.
        waited: Duration,
    },
    /// Some code-profile windows could not be sampled or written.
    #[error("{failed} of {windows} code-profile window(s) failed: {last_error}")]
    CodeProfileFailed {
        /// Windows that failed.
        failed: u64,
        /// Windows opened.
        windows: u64,
        /// Windows written.
        written: u64,
        /// The last failure.
        last_error: String,
    },
}

/// Result alias of the profiler's sampler, spans and reader.
pub type Result<T, E = ProfilerError> = std::result::Result<T, E>;

fn describe_bad_config(
    file: Option<&std::path::Path>,
    key: &str,
    value: Option<&str>,
    reason: &str,
) -> String {
    let file = file.map_or_else(
        || "profiler configuration".to_string(),
        |f| f.display().to_string(),
    );
    match (key.is_empty(), value) {
        (true, _) => format!("{file}: {reason}"),
        (false, Some(v)) => format!("{file}: {key} = `{v}`: {reason}"),
        (false, None) => format!("{file}: {key}: {reason}"),
    }
}

/// Storage's errors as smdebug-io carries them (`smdebug_io::Error::Storage`).
impl From<smdebug_storage::Error> for ProfilerError {
    fn from(e: smdebug_storage::Error) -> Self {
        ProfilerError::Storage(e.into())
    }
}
