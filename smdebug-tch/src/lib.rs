//! # smdebug-tch
//!
//! Capture for [tch-rs](https://github.com/LaurentMazare/tch-rs) (libtorch) training loops: the
//! parameters of a [`tch::nn::VarStore`] under their hierarchical names, their gradients after
//! `backward()`, losses, metrics, and the outputs of the modules you wrap, written through
//! smdebug-core's [`Hook`](smdebug_core::Hook) into a run directory that Python smdebug and
//! `smdebug_read::trial::Trial` read.
//!
//! Building needs libtorch 2.9.0 (tch 0.22): `LIBTORCH=/path/to/libtorch`, or
//! `LIBTORCH_USE_PYTORCH=1` with a Python whose `torch` is 2.9.0 first on `PATH`
//! (`bash .ci/test-tch` sets one up and runs this crate's tests).
//!
//! ```no_run
//! use smdebug_core::{Hook, MemorySink, Mode, SaveConfig};
//! use smdebug_tch::TchHook;
//! use tch::nn::{self, Module, OptimizerConfig};
//! use tch::{Device, Kind, Tensor};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let vs = nn::VarStore::new(Device::Cpu);
//! let fc1 = nn::linear(vs.root() / "fc1", 4, 3, Default::default());
//! let mut opt = nn::Sgd::default().build(&vs, 0.1)?;
//! let sink = MemorySink::default();
//! let mut hook = TchHook::new(Hook::builder().save_config(SaveConfig::every(2)), sink.clone())?;
//! let relu1 = hook.wrap("relu1", nn::func(|x| x.relu()));
//! hook.set_mode(Mode::Train)?;
//! let x = Tensor::ones([2, 4], (Kind::Float, Device::Cpu));
//! for _ in 0..4 {
//!     let loss = relu1.forward(&fc1.forward(&x)).square().mean(Kind::Float);
//!     opt.zero_grad();
//!     loss.backward();
//!     hook.save_parameters(&vs)?;
//!     hook.save_gradients(&vs)?;
//!     hook.save_loss("loss", &loss)?;
//!     opt.step();
//!     hook.step()?;
//! }
//! hook.close()?;
//! # Ok(())
//! # }
//! ```

#![cfg_attr(docsrs, feature(doc_cfg))]
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod error;
mod framework;
mod hook;
mod host;
mod layers;
mod output;
pub mod reduce;

/// The tch crate this adapter is built against: use it (`smdebug::tch::tch`) and a training
/// loop's tensors are the adapter's, with no version to match by hand.
pub use tch;

pub use error::{Error, Result};
pub use framework::Tch;
pub use hook::TchHook;
pub use host::recorded_dtype;
pub use layers::{Layers, LayersBuilder};
pub use output::{Probe, Recorded, RecordedT, TimedModel, TimedModelT};
pub use smdebug_core::adapter::OUTPUT_SUFFIX;
pub use smdebug_core::collection::{
    GRADIENT_PREFIX, INPUT_SUFFIX, LABELS_SUFFIX, PREDICTIONS_SUFFIX, parameter_collection,
};
