//! One finished span, as the recorder hands it to the writer thread. Both sides use it; it
//! lives here so that neither imports the other's internals for it.

use std::borrow::Cow;

use smdebug_core::Mode;

use smdebug_core::phase::Phase;

/// One finished span on its way to the writer.
pub struct SpanEvent {
    /// What the span covers.
    pub phase: Phase,
    /// Its name in the trace.
    pub name: Cow<'static, str>,
    /// When it began, microseconds since the Unix epoch.
    pub start_us: u64,
    /// How long it took, in microseconds.
    pub dur_us: u64,
    /// The step (and its mode) it belongs to, if any.
    pub step: Option<(Mode, u64)>,
    /// Extra `args`.
    pub args: SpanArgs,
}

/// Extra `args` of a span, written beside `step_num`, `mode` and `worker`.
pub type SpanArgs = smdebug_core::timeline::SpanArgs;
