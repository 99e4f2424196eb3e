//! # smdebug-core
//!
//! The capture side of smdebug for Rust, with no I/O and no threads: tensor views, collections,
//! reductions, save configs per mode, and the [`Hook`](hook::Hook) that decides at each step what
//! to save and hands owned data to a sink (smdebug-io's background writer).

pub mod dtype;
pub mod error;
pub mod mode;
pub mod tensor;

pub use dtype::DType;
pub use error::{Error, Result};
pub use mode::Mode;
pub use tensor::{Element, Tensor, TensorView};
pub mod sink;
pub use sink::{EndReason, MemorySink, Record, Sink, StepKey, TensorRecord};
pub mod collection;
pub mod config;
pub mod reduction;
pub mod save_config;
pub use collection::{Collection, CollectionsFile};
pub use config::HookConfig;
pub use reduction::{Reduction, ReductionConfig, ReductionOp};
pub use save_config::{SaveConfig, SaveConfigMode};
