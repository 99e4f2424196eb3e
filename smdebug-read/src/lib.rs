//! # smdebug-read
//!
//! Reading a run back, offline or while it is still being written, for notebooks, rules, the
//! report and the dashboard (the training process does not link this crate):
//!
//! - [`trial`]: the [`Trial`] over captured tensors, Python smdebug's `create_trial` in Rust,
//!   and the [`TensorFollower`](trial::TensorFollower) that hands a live run's new steps on.
//! - [`profile`]: system metrics, framework spans and code profiles back, by time range, step
//!   range, node and worker.
//! - [`follow`]: the one incremental reader of a run's profiler data, for rules, the report
//!   and the dashboard: offline to the end once, live only what is new.
//! - [`run`]: the end marker and whether there is profiler data, as every reader reads them.
//! - [`kineto`]: PyTorch profiler (Kineto) traces, streamed in bounded memory, into operator and
//!   GPU-kernel breakdowns per rank.
//!
//! The bytes are decoded by `smdebug-format`; storage (local disk or an object store) is
//! `smdebug-io`'s.

// `unsafe` is allowed in two places of the crate only, each use with its safety argument:
// memory-mapping a local event file (`trial/source.rs`), and the blocks event files are read
// into (`trial/arena.rs`).
#![cfg_attr(docsrs, feature(doc_cfg))]
#![deny(unsafe_code)]
#![warn(missing_docs)]

pub mod error;
pub mod follow;
pub mod kineto;
pub mod profile;
pub mod run;
pub mod trial;

pub use error::{Error, Result};
pub use kineto::{
    KinetoError, RankSummary, TraceReport, render_text, summarize_reader, summarize_trace,
    summarize_traces,
};
pub use profile::{ProfileError, ProfilerReader};
pub use trial::{StepState, Trial, TrialOptions};
