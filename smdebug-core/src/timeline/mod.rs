//! The training loop's timeline: framework spans measured where the loop's work happens, with
//! no timing code in the loop.
//!
//! A [`Timeline`] is held by the [`Hook`](crate::Hook) (and so by every framework adapter's
//! hook). It knows the step the loop is in, because the hook's `step()` is the step boundary,
//! and it knows which profilers are on at this step, because it applies SageMaker's profiling
//! [`Window`](crate::window::Window)s at each boundary:
//!
//! | spans | profiler | default window |
//! | --- | --- | --- |
//! | `Step:ModeKeys.<MODE>` (one per step, from the step's first activity to `step()`), forward, backward, optimizer, custom | [`Profiling::Phases`] | every step |
//! | data loading (`next()` of an iterator wrapped by [`Timeline::data`]) | [`Profiling::DataLoading`] | every step |
//! | one span per wrapped module's forward pass (adapters) | [`Profiling::Detailed`] | never |
//! | none: the code profile, started and stopped by the [`SpanSink`] | [`Profiling::Code`] | never |
//!
//! Measured spans go to a [`SpanSink`] (smdebug-profiler's span recorder, which writes them on
//! its own thread). The timeline itself does no I/O and starts no thread: asking whether a
//! profiler is on is one atomic load, a span is two clock reads and a non-blocking hand-over,
//! and a profiler whose window is closed costs that one load.
//!
//! ```
//! use std::sync::{Arc, Mutex};
//! use smdebug_core::phase::Phase;
//! use smdebug_core::timeline::{SpanRecord, SpanSink, Timeline, TimelineConfig, WindowChange};
//! use smdebug_core::window::Window;
//! use smdebug_core::Mode;
//!
//! #[derive(Default)]
//! struct Kept(Mutex<Vec<String>>);
//! impl SpanSink for Kept {
//!     fn record(&self, span: SpanRecord) {
//!         self.0.lock().unwrap().push(format!("{}@{:?}", span.phase.trace_name(), span.step));
//!     }
//!     fn window_changed(&self, _: WindowChange) {}
//! }
//!
//! let kept = Arc::new(Kept::default());
//! let config = TimelineConfig { data_loading: Window::steps(1, 1), ..TimelineConfig::default() };
//! let timeline = Timeline::new(config, kept.clone());
//! timeline.start(Mode::Train, 0, 0);
//! for step in 0..3u64 {
//!     for _batch in timeline.data(std::iter::once(step)) {}
//!     timeline.scope(Phase::Forward, || ());
//!     timeline.boundary((Mode::Train, step), (Mode::Train, step + 1), step + 1);
//! }
//! let spans = kept.0.lock().unwrap().clone();
//! assert_eq!(spans.iter().filter(|s| s.starts_with("Step:")).count(), 3);
//! assert_eq!(spans.iter().filter(|s| s.starts_with("DataLoaderIter")).count(), 1);
//! ```
//!
//! `config.rs` the profilers and their windows, `sink.rs` what a timeline emits, `recorder.rs`
//! the [`Timeline`], its spans and guards.

mod config;
mod recorder;
mod sink;

pub use config::{Profiling, TimelineConfig};
pub use recorder::{MODULE_ROW, PhaseGuard, TimedIter, Timeline};
pub use sink::{SpanArgs, SpanRecord, SpanSink, WindowChange};

#[cfg(test)]
mod tests;
