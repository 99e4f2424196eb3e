//! # smdebug-io
//!
//! The I/O side of smdebug for Rust: the on-disk format shared with Python smdebug 1.0.34 and
//! TensorBoard ([`format`](mod@format)), storage on local disk or any object store
//! ([`storage`]), the background [`writer`] that the capture hook hands its records to, the
//! [`trial`] reader, the job's [`progress`] files, [`stop`] requests (a rule runner asks, the training loop's watcher
//! hears), and SageMaker's configuration files ([`sagemaker`]: where they are, the hook
//! config read over the code's settings).
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

// One `unsafe` block in the crate: memory-mapping a local event file (`trial/source.rs`), allowed there
// alone with its safety argument.
#![cfg_attr(docsrs, feature(doc_cfg))]
#![deny(unsafe_code)]
#![warn(missing_docs)]

#[cfg(feature = "testing")]
pub mod crafted;
pub mod error;
pub mod format;
mod job_identity;
pub mod jobs;
pub mod progress;
pub mod run_folder;
pub mod sagemaker;
pub mod stop;
pub mod storage;
#[cfg(feature = "testing")]
pub mod testing;
pub mod trial;
pub mod writer;

pub use error::{Error, Result};
pub use storage::{Backend, Storage, StorageOptions, open_storage, open_storage_with};
pub use trial::{StepState, Trial, TrialOptions};
pub use writer::{OverflowPolicy, Writer, WriterBuilder, WriterStatus};
