//! # smdebug-candle
//!
//! Capture for [candle](https://github.com/huggingface/candle) training loops: the parameters of a
//! [`candle_nn::VarMap`] under their hierarchical names, their gradients from a
//! [`candle_core::backprop::GradStore`], losses, metrics, the outputs of the modules you wrap and
//! the tensors handed to [`Probe`]s inside a forward pass (attention scores, projections),
//! written through smdebug-core's [`Hook`](smdebug_core::Hook) into a run directory that Python
//! smdebug and `smdebug_read::trial::Trial` read.
//!
//! ```
//! use candle_core::{DType, Device, Module, Tensor};
//! use candle_nn::{Activation, Optimizer, VarBuilder, VarMap};
//! use smdebug_candle::CandleHook;
//! use smdebug_core::{Hook, MemorySink, Mode, SaveConfig};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let dev = Device::Cpu;
//! let varmap = VarMap::new();
//! let vb = VarBuilder::from_varmap(&varmap, DType::F32, &dev);
//! let fc1 = candle_nn::linear(4, 3, vb.pp("fc1"))?;
//!
//! let sink = MemorySink::default();
//! let mut hook = CandleHook::new(Hook::builder().save_config(SaveConfig::every(2)), sink.clone())?;
//! let relu1 = hook.wrap("relu1", Activation::Relu);
//! let mut sgd = candle_nn::SGD::new(varmap.all_vars(), 0.1)?;
//! hook.set_mode(Mode::Train)?;
//! let x = Tensor::ones((2, 4), DType::F32, &dev)?;
//! for _ in 0..4 {
//!     let loss = relu1.forward(&fc1.forward(&x)?)?.sqr()?.mean_all()?;
//!     let grads = loss.backward()?;
//!     hook.save_parameters(&varmap)?;
//!     hook.save_gradients(&varmap, &grads)?;
//!     hook.save_loss("loss", &loss)?;
//!     sgd.step(&grads)?;
//!     hook.step()?;
//! }
//! hook.close()?;
//! let names: Vec<String> = sink.tensors().into_iter().map(|t| t.name).collect();
//! // Steps 0 and 2: weight, bias, their gradients, the loss and relu1's output.
//! assert_eq!(names.len(), 12);
//! assert!(names.contains(&"gradient/fc1.weight".to_string()));
//! assert!(names.contains(&"relu1.output".to_string()));
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

/// The candle crates this adapter is built against: use these (`smdebug::candle::candle_core`)
/// and a training loop's tensors are the adapter's, with no version to match by hand.
pub use {candle_core, candle_nn};

pub use error::{Error, Result};
pub use framework::Candle;
pub use hook::CandleHook;
pub use host::recorded_dtype;
pub use layers::{Layers, LayersBuilder};
pub use output::{Probe, Recorded, TimedModel};
pub use smdebug_core::adapter::OUTPUT_SUFFIX;
pub use smdebug_core::collection::{
    GRADIENT_PREFIX, INPUT_SUFFIX, LABELS_SUFFIX, PREDICTIONS_SUFFIX, parameter_collection,
};
