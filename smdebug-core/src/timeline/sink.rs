//! What a timeline emits: spans ([`SpanRecord`]) and window changes, to a [`SpanSink`].

use std::borrow::Cow;
use std::time::Instant;

use crate::mode::Mode;
use crate::phase::Phase;

use super::config::Profiling;

/// Arguments of a span (`num_workers` of a data-loading span, for instance).
pub type SpanArgs = Vec<(Cow<'static, str>, serde_json::Value)>;

/// A finished span, as the timeline hands it to its [`SpanSink`].
#[derive(Clone, Debug, PartialEq)]
pub struct SpanRecord {
    /// What the span measured.
    pub phase: Phase,
    /// The event's name (the phase's default, a module's name, ...).
    pub name: Cow<'static, str>,
    /// When it started.
    pub start: Instant,
    /// When it ended.
    pub end: Instant,
    /// The step it belongs to: its mode and the step counted within that mode.
    pub step: Option<(Mode, u64)>,
    /// Extra arguments for the trace.
    pub args: SpanArgs,
}

/// A profiler's window opened or closed ([`SpanSink::window_changed`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WindowChange {
    /// Which profiler.
    pub profiling: Profiling,
    /// Whether its window opened (or closed).
    pub open: bool,
    /// The global step from which the window is open, or at which it is closed.
    pub global_step: u64,
    /// The step it concerns, with its mode: the window's first step when it opens, its last
    /// when it closes (`None` before the loop's first step boundary is known).
    pub step: Option<(Mode, u64)>,
}

/// Where a timeline's spans go. Both calls come from the training loop's threads and must not
/// block or panic.
pub trait SpanSink: Send + Sync {
    /// Takes a finished span.
    fn record(&self, span: SpanRecord);

    /// A profiler's window opened or closed. Called at a step boundary (and when the timeline
    /// closes); for [`Profiling::Code`] this is where the sink starts or stops the sampler.
    fn window_changed(&self, change: WindowChange);
}
