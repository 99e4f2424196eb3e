//! Code profiles: a sampling CPU profile of the training process over a window, the Rust
//! counterpart of SageMaker Debugger's Python profiling (cProfile / pyinstrument over
//! `PythonProfilingConfig`'s window).
//!
//! A [`CodeProfiler`] samples the call stacks of every thread of the process while a window is
//! open ([`CodeProfiler::begin`] … [`CodeProfiler::end`], at step boundaries or by time), with
//! [pprof-rs](https://docs.rs/pprof) (a `SIGPROF` timer on the process's CPU time, 99 Hz by
//! default). Its background thread resolves symbols and writes three files per window through
//! the run's [`Storage`](smdebug_storage::Storage), each published whole:
//!
//! ```text
//! <run>/framework/code/<YYYYMMDDHH>/<start_us>-<end_us>_<worker>-<node>.pb.gz   pprof profile (gzip)
//! <run>/framework/code/<YYYYMMDDHH>/<start_us>-<end_us>_<worker>-<node>.svg     flame graph (inferno)
//! <run>/framework/code/<YYYYMMDDHH>/<start_us>-<end_us>_<worker>-<node>.json    summary, written last
//! ```
//!
//! The hour folder is the window's start; times are microseconds since the epoch. The summary
//! (`CodeProfileSummary`) holds the window (times, steps), the sample count and frequency,
//! the process's CPU seconds, samples per thread, and the top functions by self and by total
//! samples with their shares. `go tool pprof`, speedscope and Pyroscope open the `.pb.gz`; the
//! SVG is interactive when opened by itself (its script zooms and searches), and readers that
//! show it inside a page use it as an image, where no script runs.
//!
//! Sampling needs the `code-profile` feature and Linux ([`code_profile_support`]); reading
//! code profiles back (smdebug-read's `ProfilerReader::code_profiles`) works everywhere.
//!
//! ```no_run
//! # #[cfg(all(feature = "code-profile", target_os = "linux"))] {
//! use std::sync::Arc;
//! use smdebug_core::Mode;
//! use smdebug_storage::LocalStorage;
//! use smdebug_profiler::code::{CodeProfileConfig, CodeProfiler};
//!
//! let storage = Arc::new(LocalStorage::new("/tmp/run")?);
//! let profiler = CodeProfiler::start(CodeProfileConfig::default().worker(0), storage)?;
//! for step in 0..100u64 {
//!     if step == 10 { profiler.begin(Some((Mode::Train, step)))?; }
//!     // ... the training step ...
//!     if step == 14 { profiler.end(Some((Mode::Train, step)))?; }
//! }
//! let report = profiler.finish()?;
//! assert_eq!(report.written, 1);
//! # }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! **Costs.** Outside a window nothing is installed. Readying the sampler (when a profiler
//! starts, unless [`CodeProfileConfig::warm_up`] says not to, or at its first window) makes
//! pprof-rs allocate its sample table (45 MB counted by an allocator once readied, 113 MB once
//! a window has run, kept for the process's life: each window's end replaces it with a fresh
//! one, so windows do not add to it) and load the binary's debug information for symbols. A
//! closed window's samples are handed to the writer thread and let go once its files are
//! stored. While sampling, each sample unwinds one stack in a signal handler (BENCHMARKS.md,
//! "Code profile"). Samples whose interrupted instruction is inside libc, libgcc, libpthread or
//! the vDSO are dropped, so their unwinder's locks are never re-entered.

mod config;
mod counters;
#[cfg(all(feature = "code-profile", target_os = "linux"))]
mod encode;
mod profiler;
#[cfg(all(feature = "code-profile", target_os = "linux"))]
mod sampler;
#[cfg(any(test, all(feature = "code-profile", target_os = "linux")))]
mod stacks;

pub use config::{
    CodeProfileConfig, DEFAULT_FINISH_TIMEOUT, DEFAULT_FREQUENCY_HZ, DEFAULT_TOP_FUNCTIONS,
};
pub use counters::{CodeProfileReport, MAX_PENDING_WINDOWS};
pub use profiler::{CodeProfiler, code_profile_support};
