//! The session's span sink: spans go to the span recorder (which writes them on its own
//! thread); window changes start and stop the profilers that need starting.

use smdebug_core::timeline::{Profiling, SpanRecord, SpanSink};
use smdebug_profiler::spans::SpanRecorder;

/// Where the session's timeline hands its spans and window changes.
pub(crate) struct SessionSink {
    recorder: SpanRecorder,
}

impl SessionSink {
    pub(crate) fn new(recorder: SpanRecorder) -> SessionSink {
        SessionSink { recorder }
    }
}

impl SpanSink for SessionSink {
    fn record(&self, span: SpanRecord) {
        SpanSink::record(&self.recorder, span);
    }

    fn window_changed(&self, profiling: Profiling, open: bool, step: u64) {
        log::debug!(
            "{} profiling {} at step {step}",
            profiling.name(),
            if open { "starts" } else { "stops" }
        );
    }
}
