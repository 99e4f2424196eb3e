//! # smdebug-io
//!
//! The training side's I/O, on any `smdebug-storage` location: the background [`writer`] that
//! the capture hook hands its records to (in the format of `smdebug-format`), the run folder a job claims ([`run_folder`], [`jobs`]), the job's
//! [`progress`] files, [`stop`] requests (a rule runner asks, the training loop's watcher
//! hears), and SageMaker's configuration files ([`sagemaker`]: where they are, the hook config
//! read over the code's settings). Reading a run back is `smdebug-read`'s.
//!
//! ```
//! use smdebug_core::{Hook, SaveConfig};
//! use smdebug_io::writer::Writer;
//!
//! let dir = tempfile::tempdir().unwrap();
//! let writer = Writer::open(dir.path().to_str().unwrap()).unwrap();
//! let mut hook = Hook::builder().save_config(SaveConfig::every(1)).build(writer).unwrap();
//! hook.save_scalar("loss", 0.5, &["losses"]);
//! hook.step();
//! hook.close();
//! ```

#![cfg_attr(docsrs, feature(doc_cfg))]
#![forbid(unsafe_code)]
#![warn(missing_docs)]

#[cfg(feature = "testing")]
pub mod crafted;
pub mod error;
mod job_identity;
pub mod jobs;
pub mod progress;
pub mod run_folder;
pub mod sagemaker;
pub mod stop;
pub mod writer;

pub use error::{Error, Result};
pub use writer::{OverflowPolicy, Writer, WriterBuilder, WriterStatus};
