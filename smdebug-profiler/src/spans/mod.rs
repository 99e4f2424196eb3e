//! Framework spans: step (per mode), data loading, forward, backward, optimizer and custom
//! phases, recorded from the training loop through RAII guards or an explicit start/end API,
//! and written by a background thread as Chrome trace files in smdebug's layout:
//!
//! ```text
//! <run>/framework/pevents/<YYYYMMDDHH>/<end_us>_<worker>-<node>_pythontimeline.json
//! ```
//!
//! Each file is a JSON array of trace events that Perfetto and chrome://tracing open and that
//! Python smdebug's `LocalAlgorithmMetricsReader` parses: the first metadata event carries
//! `start_time_since_epoch_in_micros` and every `ts` is relative to it (smdebug's convention
//! for absolute time), each phase is one `pid` row, the worker is the `tid`, and `args`
//! carries `step_num` (as a string, like smdebug's hooks), `mode` and `worker`.
//!
//! Files close when they reach the size limit or the age limit, and are published whole
//! (written, then renamed into place), so a reader never sees half a file.

pub(crate) mod event;
mod recorder;
pub(crate) mod writer;

pub use recorder::{
    DEFAULT_CLOSE_INTERVAL, DEFAULT_MAX_FILE_BYTES, DEFAULT_QUEUE_CAPACITY, OpenSpan, SpanConfig,
    SpanGuard, SpanRecorder, SpanWriterGuard, SpanWriterReport,
};
pub use smdebug_core::phase::Phase;
