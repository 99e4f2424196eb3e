//! The session's span sink: spans go to the span recorder (which writes them on its own
//! thread); the code profile's window starts and stops the code profiler.

use std::sync::{Arc, Mutex, OnceLock, RwLock};

use smdebug_core::phase::Phase;
use smdebug_core::timeline::{Profiling, SpanRecord, SpanSink, WindowChange};
use smdebug_profiler::code::{CodeProfileReport, CodeProfiler};
use smdebug_profiler::config::MetricsRegex;
use smdebug_profiler::spans::SpanRecorder;

use super::progress::ProgressShared;

/// Where the session's timeline hands its spans and window changes.
pub(crate) struct SessionSink {
    recorder: SpanRecorder,
    /// Which data-loading events are recorded (SageMaker's `MetricsRegex`); `None`: all.
    dataloader_metrics: RwLock<Option<MetricsRegex>>,
    /// The code profiler, when this build and platform can sample; taken when it finishes.
    code: Mutex<Option<CodeProfiler>>,
    /// The progress file, told of every step span (a step the hook ended).
    progress: OnceLock<Arc<ProgressShared>>,
}

impl SessionSink {
    pub(crate) fn new(
        recorder: SpanRecorder,
        dataloader_metrics: Option<MetricsRegex>,
        code: Option<CodeProfiler>,
    ) -> Self {
        SessionSink {
            recorder,
            dataloader_metrics: RwLock::new(dataloader_metrics),
            code: Mutex::new(code),
            progress: OnceLock::new(),
        }
    }

    /// The span recorder (its counts of spans written and dropped).
    pub(crate) fn recorder(&self) -> SpanRecorder {
        self.recorder.clone()
    }

    /// Tells `progress` of every step span from now on.
    pub(crate) fn set_progress(&self, progress: Arc<ProgressShared>) {
        let _ = self.progress.set(progress);
    }

    /// Replaces the data-loading events' filter (the profiler file changed).
    pub(crate) fn set_dataloader_metrics(&self, regex: Option<MetricsRegex>) {
        if let Ok(mut r) = self.dataloader_metrics.write() {
            *r = regex;
        }
    }

    /// Writes the code profiles still pending and stops the code profiler (the timeline has
    /// closed its windows already). `None` when there was no code profiler.
    pub(crate) fn finish_code_profiles(
        &self,
    ) -> Option<Result<CodeProfileReport, smdebug_profiler::ProfilerError>> {
        let profiler = self.code.lock().ok()?.take()?;
        Some(profiler.finish())
    }

    /// Readies the code profiler's sampler for a window set after the start (a profiler file):
    /// a session without a code window never allocates pprof-rs's sample table.
    pub(crate) fn warm_up_code_profiler(&self) {
        let Ok(code) = self.code.lock() else { return };
        if let Some(Err(e)) = code.as_ref().map(CodeProfiler::warm_up) {
            log::warn!("code profile: the sampler could not be readied: {e}");
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
        if let (Phase::Step(_), Some(progress)) = (&span.phase, self.progress.get()) {
            progress.step_span_ended();
        }
        if self.wanted(&span) {
            SpanSink::record(&self.recorder, span);
        }
    }

    fn window_changed(&self, change: WindowChange) {
        log::debug!(
            "{} profiling {} at step {}",
            change.profiling.name(),
            if change.open { "starts" } else { "stops" },
            change.global_step
        );
        if change.profiling != Profiling::Code {
            return;
        }
        let Ok(code) = self.code.lock() else { return };
        let Some(profiler) = code.as_ref() else {
            log::warn!(
                "the code profile's window opened at step {}, but this build cannot sample \
                 (smdebug's `code-profile` feature, Linux)",
                change.global_step
            );
            return;
        };
        // Never a failure of the training loop: a window that cannot open is logged and the
        // run goes on without it.
        let outcome = if change.open {
            profiler.begin(change.step)
        } else {
            profiler.end(change.step)
        };
        if let Err(e) = outcome {
            log::warn!("code profile at step {}: {e}", change.global_step);
        }
    }
}
