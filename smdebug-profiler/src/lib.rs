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
//! - [`reader`]: all of them back, by time range, step range, node and worker.
//! - [`follow`]: the one incremental reader of a run's profiler data, for rules, the report
//!   and the dashboard: offline to the end once, live only what is new.
//! - [`kineto`]: PyTorch profiler (Kineto) traces, streamed in bounded memory, into operator and
//!   GPU-kernel breakdowns per rank.
//! - [`stats`]: the percentile every figure of the profiler rules and the report uses.
//! - [`downsample`]: the one min-max downsampler of long series, for the report's charts and
//!   the dashboard.
//! - [`config`]: SageMaker's profiler configuration (`profilerconfig.json`), read as Python
//!   smdebug reads it, laid over the settings from code, and watched while the job runs.

#![cfg_attr(docsrs, feature(doc_cfg))]
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod code;
pub mod config;
pub mod digest;
pub mod downsample;
pub mod follow;
pub mod kineto;
pub mod reader;
pub mod spans;
pub mod stats;
pub mod system;

pub use kineto::{
    KinetoError, RankSummary, TraceReport, render_text, summarize_reader, summarize_trace,
    summarize_traces,
};
pub use system::{ProfilerError, profile_command};
