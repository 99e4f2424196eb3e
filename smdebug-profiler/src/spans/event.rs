//! One finished span, as the recorder hands it to the writer thread. Both sides use it; it
//! lives here so that neither imports the other's internals for it.

use std::borrow::Cow;

use smdebug_core::Mode;

use smdebug_core::phase::Phase;

/// One finished span on its way to the writer.
pub(crate) struct SpanEvent {
    pub(crate) phase: Phase,
    pub(crate) name: Cow<'static, str>,
    pub(crate) start_us: u64,
    pub(crate) dur_us: u64,
    pub(crate) step: Option<(Mode, u64)>,
    pub(crate) args: SpanArgs,
}

/// Extra `args` of a span, written beside `step_num`, `mode` and `worker`.
pub(crate) type SpanArgs = smdebug_core::timeline::SpanArgs;
