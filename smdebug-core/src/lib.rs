//! # smdebug-core
//!
//! The capture side of smdebug for Rust, with no I/O and no threads: tensor views, collections,
//! reductions, save configs per mode, and the [`Hook`] that decides at each step what to save and
//! hands owned records to a [`Sink`] (smdebug-io's background writer, or [`MemorySink`] in tests).
//!
//! Data flows one way: the training loop lends a [`TensorView`]; the hook asks its collections'
//! [`SaveConfig`]s whether the tensor is due at the current (mode, mode step); if so it copies the
//! view into an owned [`Tensor`], computes the configured [`Reduction`]s, and sends
//! [`Record`]s to the sink without waiting on any I/O.
//!
//! Rules ask for what they read as [`CaptureRequest`]s (a collection, its patterns, the steps);
//! [`HookConfig::apply`] and [`HookBuilder::capture`] add them to a configuration, and the
//! collection is then saved at the union ([`SaveConfig::union`]) of its own schedule and the
//! requested steps.

#![cfg_attr(docsrs, feature(doc_cfg))]
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod adapter;
pub mod capture;
pub mod collection;
pub mod config;
pub mod config_keys;
pub mod dtype;
pub mod error;
pub mod hook;
pub mod layer_chain;
mod lenient;
pub mod mode;
pub mod phase;
pub mod pyregex;
pub mod reduction;
pub mod save_config;
pub mod sink;
mod step_set;
pub mod strings;
pub mod tensor;
pub mod text;
pub mod timeline;
pub mod window;
pub mod worker;

pub use capture::Capture;
pub use collection::{Collection, CollectionsFile, UnusablePattern};
pub use config::{CaptureRequest, HookConfig};
pub use dtype::DType;
pub use error::{Error, Result};
pub use hook::{DueTensor, Hook, HookBuilder, StopSignal};
pub use mode::Mode;
pub use pyregex::PyRegex;
pub use reduction::{Reduction, ReductionConfig, ReductionOp};
pub use save_config::{SaveConfig, SaveConfigMode};
pub use sink::{
    EndReason, MemorySink, Record, Sink, StepKey, StopCause, StringRecord, TensorRecord,
};
pub use strings::StringTensor;
pub use tensor::{Element, Tensor, TensorView};
pub use worker::WorkerInfo;
