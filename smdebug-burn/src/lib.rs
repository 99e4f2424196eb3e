//! # smdebug-burn
//!
//! Capture for [burn](https://burn.dev) (0.22, backend-free tensors) training loops: every float
//! parameter of a module under its module path (found with burn's `ModuleVisitor`), gradients
//! from `GradientsParams`, losses, metrics and named outputs, written through smdebug-core's
//! [`Hook`](smdebug_core::Hook) into a run directory that Python smdebug and
//! `smdebug_read::trial::Trial` read. Everything due in one call is read back from the device with
//! one burn `Transaction`.
//!
//! ```
//! use burn::module::Module;
//! use burn::nn::{Linear, LinearConfig};
//! use burn::optim::{GradientsParams, SgdConfig};
//! use burn::tensor::{Device, Tensor};
//! use smdebug_burn::BurnHook;
//! use smdebug_core::{Hook, MemorySink, Mode, SaveConfig};
//!
//! #[derive(Module, Debug)]
//! struct Net {
//!     fc1: Linear,
//! }
//!
//! # #[allow(deprecated)] // burn 0.22 steers CPU users to `flex`; the workspace builds ndarray
//! let device = Device::ndarray().autodiff();
//! let mut net = Net { fc1: LinearConfig::new(4, 3).init(&device) };
//! let mut optim = SgdConfig::new().init();
//! let sink = MemorySink::default();
//! let mut hook = BurnHook::new(Hook::builder().save_config(SaveConfig::every(2)), sink.clone())?;
//! hook.set_mode(Mode::Train)?;
//! let x: Tensor<2> = Tensor::ones([2, 4], &device);
//! for _ in 0..4 {
//!     let out = burn::tensor::activation::relu(net.fc1.forward(x.clone()));
//!     let loss = out.clone().square().mean();
//!     let grads = GradientsParams::from_grads(loss.backward(), &net);
//!     hook.save_parameters(&net)?;
//!     hook.save_gradients(&net, &grads)?;
//!     hook.save_output("relu1", &out)?;
//!     hook.save_loss("loss", &loss)?;
//!     net = optim.step(0.1, net, grads);
//!     hook.step()?;
//! }
//! hook.close()?;
//! let names: Vec<String> = sink.tensors().into_iter().map(|t| t.name).collect();
//! // Steps 0 and 2: weight, bias, their gradients, relu1's output and the loss.
//! assert_eq!(names.len(), 12);
//! assert!(names.contains(&"gradient/fc1.weight".to_string()));
//! # Ok::<(), smdebug_burn::Error>(())
//! ```

#![cfg_attr(docsrs, feature(doc_cfg))]
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod error;
mod hook;
mod host;
mod layers;
pub mod reduce;

/// The burn crate this adapter is built against: use it (`smdebug::burn::burn`) and a training
/// loop's tensors are the adapter's, with no version to match by hand.
pub use burn;

pub use error::{Error, Result};
pub use hook::{Burn, BurnHook, Flat};
pub use host::recorded_dtype;
pub use layers::Layers;
pub use smdebug_core::adapter::OUTPUT_SUFFIX;
pub use smdebug_core::collection::{
    GRADIENT_PREFIX, INPUT_SUFFIX, LABELS_SUFFIX, PREDICTIONS_SUFFIX, parameter_collection,
};
