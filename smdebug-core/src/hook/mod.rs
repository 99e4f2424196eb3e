//! The hook: the training loop's one object. At each step it decides, cheaply, which tensors are
//! due; it turns due tensors into owned records (raw and/or reductions) and hands them to a sink.
//!
//! ```
//! use smdebug_core::{Hook, MemorySink, Mode, SaveConfig, TensorView};
//!
//! let sink = MemorySink::default();
//! let mut hook = Hook::builder().save_config(SaveConfig::every(2)).build(sink.clone()).unwrap();
//! hook.set_mode(Mode::Train);
//! for step in 0..4 {
//!     let w = vec![step as f32; 6];
//!     hook.save_tensor("fc1.weight", &TensorView::from_slice(&w, &[2, 3]).unwrap(), &["weights"]);
//!     hook.save_scalar("loss", 1.0 / (step + 1) as f64, &["losses"]);
//!     hook.step();
//! }
//! hook.close();
//! // Steps 0 and 2 were due: two tensors each.
//! assert_eq!(sink.tensors().len(), 4);
//! ```
//!
//! `saving.rs` the [`Hook`] at work, `builder.rs` [`HookBuilder`], `stop.rs` [`StopSignal`].

mod builder;
mod saving;
mod stop;

pub use builder::HookBuilder;
pub use saving::{DueTensor, Hook};
pub use stop::StopSignal;

#[cfg(test)]
mod tests;
