//! # smdebug
//!
//! smdebug for Rust in one dependency: what Amazon SageMaker Debugger and Debugger Profiling
//! did for Python training jobs, for a Rust training loop (a hand-written loop, candle, burn or
//! tch-rs). A [`Session`] captures tensors, samples the hardware, times the loop's phases with
//! no timing code in the loop, runs rules while the job trains (stopping it when one fires),
//! watches for stop requests from other processes, and writes the profiling report when the
//! run ends. Runs go to a local directory or an object store, in smdebug's layout, so Python
//! smdebug's `create_trial`, TensorBoard and the `smdebug` command read them.
//!
//! ```no_run
//! use smdebug::prelude::*;
//!
//! let mut session = Session::builder("runs/mlp")
//!     .save(SaveConfig::every(100))
//!     .rules(["VanishingGradient", "ExplodingTensor", "ProfilerReport"])
//!     .start()?;
//! # let batches = vec![(0.0f32, 1.0f32); 10];
//! for (x, y) in session.data(batches) {
//!     let loss = session.forward(|| (x - y).powi(2));
//!     session.backward(|| ());
//!     session.hook().save_scalar("loss", f64::from(loss), &["losses"]);
//!     if session.step()?.stop_requested() {
//!         break;
//!     }
//! }
//! let summary = session.finish()?; // verdicts, drops, why it stopped, where the report is
//! println!("{summary}");
//! # Ok::<(), smdebug::Error>(())
//! ```
//!
//! ## Features
//!
//! | feature | what it adds |
//! | --- | --- |
//! | (default: `gpu`) | capture, host and GPU sampling, framework spans and stop requests, to local disk; about 65 crates, with no reader, object-store client, async runtime, HTTP, TLS, mail, chart or code-profile crate in the build |
//! | `gpu` | GPU metrics through NVML, loaded at run time (on by default; without it a host with NVIDIA GPUs logs a warning naming it) |
//! | `code-profile` | the sampling CPU profile over a code-profile window (`code_profiling`, SageMaker's Python profiling); Linux |
//! | `read` | reading runs back: `read::Trial` (and the prelude's `Trial`), the profiler readers and followers, Kineto traces |
//! | `rules` | rules in the training process, with their stop and command actions (implies `read`) |
//! | `report` | the profiling report at the end (implies `rules`) |
//! | `serve` | the live dashboard, served from the training process (implies `report`) |
//! | `notify` | webhook and e-mail (SMTP) actions |
//! | `sns` | SageMaker's e-mail and SMS notifications through Amazon SNS (the AWS SDK for Rust) |
//! | `memory` | runs in the in-process `memory://` store (tests, notebooks) |
//! | `s3`, `gcs`, `azure`, `http` | runs in S3, Google Cloud Storage, Azure Blob Storage, a plain HTTP(S) store |
//! | `candle`, `burn`, `tch` | the framework adapters: `Session::builder(..).candle()` (or `.burn()`, `.tch()`) captures through the adapter's hook, reached with `session.hook()` |
//!
//! ## The crates underneath
//!
//! Re-exported whole, for what the session does not cover: [`capture`] (smdebug-core: tensor
//! views, collections, save configs, the hook, the timeline and its windows), [`format`](mod@format)
//! (smdebug-format: the run's files, without I/O), [`storage`] (smdebug-storage: local disk and
//! object stores, a parsed `Location`), [`io`] (smdebug-io: the writer, the run folder,
//! progress and stop requests), [`profiler`] (smdebug-profiler: the system sampler, spans, code
//! profiles), and with their features `read` (smdebug-read: the `Trial` and the profiler
//! readers), `rules`, `report`, `serve`, `candle`, `burn`, `tch`.

#![cfg_attr(docsrs, feature(doc_cfg))]
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod error;
mod session;

pub use error::{Error, Result};
#[cfg(feature = "report")]
pub use session::ReportTarget;
pub use session::{Session, SessionBuilder, SessionSummary, StepStatus};

pub use smdebug_core as capture;
pub use smdebug_format as format;
pub use smdebug_io as io;
pub use smdebug_profiler as profiler;
#[cfg(feature = "read")]
pub use smdebug_read as read;
pub use smdebug_storage as storage;

#[cfg(feature = "burn")]
pub use smdebug_burn as burn;
#[cfg(feature = "candle")]
pub use smdebug_candle as candle;
#[cfg(feature = "report")]
pub use smdebug_report as report;
#[cfg(feature = "rules")]
pub use smdebug_rules as rules;
#[cfg(feature = "serve")]
pub use smdebug_serve as serve;
#[cfg(feature = "tch")]
pub use smdebug_tch as tch;

/// What a training loop and a small analysis script use, in one `use`.
pub mod prelude {
    #[cfg(feature = "report")]
    pub use crate::ReportTarget;
    pub use crate::{Error, Session, SessionBuilder, SessionSummary, StepStatus};
    pub use smdebug_core::window::Window;
    pub use smdebug_core::{
        Capture, Collection, Mode, Reduction, ReductionConfig, ReductionOp, SaveConfig,
        SaveConfigMode, StopCause, TensorView, WorkerInfo,
    };
    #[cfg(feature = "read")]
    pub use smdebug_read::Trial;
    #[cfg(feature = "rules")]
    pub use smdebug_rules::{ActionConfig, RuleSpec, Status};
}
