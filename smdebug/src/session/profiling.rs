//! The session's span sink: spans go to the span recorder (which writes them on its own
//! thread); window changes start and stop the profilers that need starting.

use std::sync::RwLock;

use smdebug_core::phase::Phase;
use smdebug_core::timeline::{Profiling, SpanRecord, SpanSink};
use smdebug_profiler::config::MetricsRegex;
use smdebug_profiler::spans::SpanRecorder;

/// Where the session's timeline hands its spans and window changes.
pub(crate) struct SessionSink {
    recorder: SpanRecorder,
    /// Which data-loading events are recorded (SageMaker's `MetricsRegex`); `None`: all.
    dataloader_metrics: RwLock<Option<MetricsRegex>>,
}

impl SessionSink {
    pub(crate) fn new(recorder: SpanRecorder, dataloader_metrics: Option<MetricsRegex>) -> Self {
        SessionSink {
            recorder,
            dataloader_metrics: RwLock::new(dataloader_metrics),
        }
    }

    /// Replaces the data-loading events' filter (the profiler file changed).
    pub(crate) fn set_dataloader_metrics(&self, regex: Option<MetricsRegex>) {
        if let Ok(mut r) = self.dataloader_metrics.write() {
            *r = regex;
        }
    }

    fn wanted(&self, span: &SpanRecord) -> bool {
        if span.phase != Phase::DataLoading {
            return true;
        }
        match self.dataloader_metrics.read() {
            Ok(r) => r.as_ref().is_none_or(|re| re.matches(&span.name)),
            Err(_) => true,
        }
    }
}

impl SpanSink for SessionSink {
    fn record(&self, span: SpanRecord) {
        if self.wanted(&span) {
            SpanSink::record(&self.recorder, span);
        }
    }

    fn window_changed(&self, profiling: Profiling, open: bool, step: u64) {
        log::debug!(
            "{} profiling {} at step {step}",
            profiling.name(),
            if open { "starts" } else { "stops" }
        );
    }
}
