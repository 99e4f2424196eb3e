//! Laying a [`ProfilerConfig`] over the settings from code: the writers' rotation, the
//! sampler's interval, the profilers' windows.

use std::path::Path;

use smdebug_core::window::Window;

use smdebug_core::timeline::TimelineConfig;

use super::model::{MetricsRegex, ProfilerConfig};
use super::parse::parse;
use crate::spans::SpanConfig;
use crate::system::{ProfilerError, SamplerConfig};

impl ProfilerConfig {
    /// Parses the text of a profiler-config file. Errors
    /// ([`ProfilerError::BadProfilerConfig`]) name the key and the value; see
    /// [`ProfilerConfig::read`] for errors that name the file too.
    pub fn from_json(text: &str) -> Result<ProfilerConfig, ProfilerError> {
        parse(text)
    }

    /// As [`from_json`](Self::from_json), errors naming `file`.
    pub fn from_json_in(text: &str, file: &Path) -> Result<ProfilerConfig, ProfilerError> {
        parse(text).map_err(|e| e.in_config_file(file))
    }

    /// Whether the file turns system sampling off: `DisableProfiler` is true.
    pub fn system_profiling_off(&self) -> bool {
        self.disable_profiler == Some(true)
    }

    /// Whether the file turns every framework profiler off, as Python smdebug does:
    /// `DisableProfiler` is true, or `ProfilingParameters` is stated empty (`{}` or `null`).
    pub fn framework_profiling_off(&self) -> bool {
        self.system_profiling_off()
            || self
                .profiling_parameters
                .as_ref()
                .is_some_and(|p| p.is_empty())
    }

    /// The windows in force: `code`'s, with each profiler's window replaced by the file's when
    /// the file states that profiler's config (the detailed, data-loader and Python-profiling
    /// windows); every profiler off, the step and phase spans too, when the file turns
    /// framework profiling off ([`framework_profiling_off`](Self::framework_profiling_off)), as
    /// Python smdebug records no framework event then.
    pub fn windows_over(&self, code: &TimelineConfig) -> TimelineConfig {
        if self.framework_profiling_off() {
            return TimelineConfig::off();
        }
        let Some(p) = &self.profiling_parameters else {
            return code.clone();
        };
        let pick = |file: Option<&Window>, code: &Window| file.unwrap_or(code).clone();
        TimelineConfig {
            phases: code.phases.clone(),
            detailed: pick(p.detailed.as_ref().map(|d| &d.window), &code.detailed),
            data_loading: pick(p.dataloader.as_ref().map(|d| &d.window), &code.data_loading),
            code: pick(p.python.as_ref().map(|c| &c.window), &code.code),
        }
    }

    /// Which data-loading events are recorded: the `MetricsRegex` of a stated
    /// `DataloaderProfilingConfig` (smdebug's `.*` when it names none); `None`: every event.
    pub fn dataloader_metrics(&self) -> Option<&MetricsRegex> {
        self.profiling_parameters
            .as_ref()?
            .dataloader
            .as_ref()?
            .metrics_regex
            .as_ref()
    }

    /// `code` with the file's rotation settings: `RotateMaxFileSizeInBytes` as
    /// [`SpanConfig::max_file_bytes`], `RotateFileCloseIntervalInSeconds` as
    /// [`SpanConfig::close_interval`]. Checked with [`SpanConfig::validate`]: a value the span
    /// writer cannot take (below 4 KiB, a close interval outside 100 ms ..= 1 h) is an error
    /// naming the key and the value.
    pub fn span_config(&self, code: SpanConfig) -> Result<SpanConfig, ProfilerError> {
        let Some(p) = &self.profiling_parameters else {
            return Ok(code);
        };
        let mut config = code;
        if let Some(bytes) = p.rotate_max_file_size {
            let bytes = usize::try_from(bytes).map_err(|_| {
                stated_error(
                    "RotateMaxFileSizeInBytes",
                    bytes.to_string(),
                    "is too large".into(),
                )
            })?;
            config = config.max_file_bytes(bytes);
        }
        if let Some(interval) = p.rotate_file_close_interval {
            config = config.close_interval(interval);
        }
        match config.validate() {
            Err(ProfilerError::InvalidConfig { setting, reason })
                if setting == "max_file_bytes" && p.rotate_max_file_size.is_some() =>
            {
                Err(stated_error(
                    "RotateMaxFileSizeInBytes",
                    p.rotate_max_file_size.unwrap_or_default().to_string(),
                    format!("the span writer's trace files: {reason}"),
                ))
            }
            Err(ProfilerError::InvalidConfig { setting, reason })
                if setting == "close_interval" && p.rotate_file_close_interval.is_some() =>
            {
                Err(stated_error(
                    "RotateFileCloseIntervalInSeconds",
                    p.rotate_file_close_interval
                        .unwrap_or_default()
                        .as_secs_f64()
                        .to_string(),
                    format!("the span writer's trace files: {reason}"),
                ))
            }
            Err(other) => Err(other),
            Ok(()) => Ok(config),
        }
    }

    /// `code` with the file's `ProfilingIntervalInMilliseconds` as
    /// [`SamplerConfig::interval`], checked with [`SamplerConfig::validate`] (100 ms to 60 s;
    /// SageMaker offers 100, 200, 500, 1000, 5000 and 60000). The rotation settings are the
    /// framework trace files' (smdebug's `TraceFile`), not the system-metrics files', which
    /// keep the sampler's own rotation.
    pub fn sampler_config(&self, code: SamplerConfig) -> Result<SamplerConfig, ProfilerError> {
        let Some(interval) = self.system_interval else {
            return Ok(code);
        };
        let config = code.interval(interval);
        match config.validate() {
            Err(ProfilerError::InvalidInterval { .. }) => Err(ProfilerError::BadProfilerConfig {
                file: None,
                key: "ProfilingIntervalInMilliseconds".into(),
                value: Some(interval.as_millis().to_string()),
                reason: "the system sampler takes 100 ms to 60 s".into(),
            }),
            Err(other) => Err(other),
            Ok(()) => Ok(config),
        }
    }
}

fn stated_error(key: &str, value: String, reason: String) -> ProfilerError {
    ProfilerError::BadProfilerConfig {
        file: None,
        key: format!("ProfilingParameters.{key}"),
        value: Some(value),
        reason,
    }
}

impl ProfilerError {
    /// Names `file` in a [`BadProfilerConfig`](ProfilerError::BadProfilerConfig) error that
    /// names none yet (the errors of [`ProfilerConfig::span_config`] and
    /// [`ProfilerConfig::sampler_config`] do not know the file); other errors are returned as
    /// they are.
    pub fn in_config_file(self, file: &Path) -> ProfilerError {
        match self {
            ProfilerError::BadProfilerConfig {
                file: None,
                key,
                value,
                reason,
            } => ProfilerError::BadProfilerConfig {
                file: Some(file.to_path_buf()),
                key,
                value,
                reason,
            },
            other => other,
        }
    }
}
