//! # smdebug-profiler
//!
//! Watching the hardware and the training loop, in smdebug's profiler layout:
//!
//! - [`system`]: a sampler thread for CPU (per core and total, I/O wait), host memory, disk and
//!   network rates, and GPUs through NVML when one is there; files under
//!   `<run>/system/incremental/`. [`profile_command`] runs any command under it.
//! - [`spans`]: framework spans (step per mode, data loading, forward, backward, optimizer,
//!   custom) as RAII guards, written as Chrome traces under `<run>/framework/pevents/`.
//! - [`code`]: code profiles, a sampling CPU profile of the process over a window (pprof
//!   protobuf, flame graph, summary) under `<run>/framework/code/`; sampling needs the
//!   `code-profile` feature on Linux.
//! - [`config`]: SageMaker's profiler configuration (`profilerconfig.json`), read as Python
//!   smdebug reads it, laid over the settings from code, and watched while the job runs.
//!
//! The files' names and records are `smdebug-format`'s; reading them back is `smdebug-read`'s.

#![cfg_attr(docsrs, feature(doc_cfg))]
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod code;
pub mod config;
pub mod spans;
pub mod system;
/// The writers' own pieces, for other crates' tests (the `testing` feature): smdebug-read holds
/// its parsers to what this crate writes.
#[cfg(feature = "testing")]
pub mod testing {
    pub use crate::spans::event::SpanEvent;
    pub use crate::spans::writer::TraceFileBuilder;
    #[cfg(target_os = "linux")]
    pub use crate::system::probe::HostProbe;
}

pub use system::{ProfilerError, profile_command};
