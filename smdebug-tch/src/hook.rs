//! [`TchHook`]: smdebug-core's [`AdapterHook`] for tch tensors, which also walks a [`VarStore`]
//! and wraps tch modules so that their outputs are recorded.

use std::ops::{Deref, DerefMut};

use smdebug_core::adapter::{AdapterHook, Due, OUTPUT_SUFFIX};
use smdebug_core::collection::{GRADIENT_PREFIX, parameter_collection};
use smdebug_core::{HookBuilder, Sink};
use tch::Tensor;
use tch::nn::VarStore;

use crate::error::Result;
use crate::framework::Tch;
use crate::output::{Recorded, RecordedT};

/// The capture hook of a tch training loop.
///
/// The calls every adapter shares (`set_mode`, `step`, `close`, `save_tensor`, `save_loss`,
/// `save_metric`, `save_scalar`, `probe`, stop requests) come from smdebug-core's
/// [`AdapterHook`], which this hook dereferences to; it adds what is particular to tch:
/// [`save_parameters`](Self::save_parameters), [`save_gradients`](Self::save_gradients),
/// [`wrap`](Self::wrap) and [`wrap_t`](Self::wrap_t). Errors are returned to the caller and leave
/// the hook usable; nothing here panics.
#[derive(Debug)]
pub struct TchHook(AdapterHook<Tch>);

impl Deref for TchHook {
    type Target = AdapterHook<Tch>;

    fn deref(&self) -> &AdapterHook<Tch> {
        &self.0
    }
}

impl DerefMut for TchHook {
    fn deref_mut(&mut self) -> &mut AdapterHook<Tch> {
        &mut self.0
    }
}

impl TchHook {
    /// Builds the hook (configuration errors surface here) over `sink` (smdebug-io's `Writer`
    /// in a real run).
    pub fn new(builder: HookBuilder, sink: impl Sink + 'static) -> Result<TchHook> {
        Ok(TchHook(AdapterHook::new(builder, sink, Tch)?))
    }

    /// Wraps a module so its forward output is recorded as `<name>.output` (collection
    /// `outputs`) at the steps where that is due.
    pub fn wrap<M: tch::nn::Module>(&mut self, name: &str, module: M) -> Recorded<M> {
        let probe = self
            .0
            .probe(&format!("{name}{OUTPUT_SUFFIX}"), &["outputs"]);
        Recorded::new(module, probe)
    }

    /// Like [`wrap`](Self::wrap), for modules with a train flag (`ModuleT`: dropout, batch norm).
    pub fn wrap_t<M: tch::nn::ModuleT>(&mut self, name: &str, module: M) -> RecordedT<M> {
        let probe = self
            .0
            .probe(&format!("{name}{OUTPUT_SUFFIX}"), &["outputs"]);
        RecordedT::new(Recorded::new(module, probe))
    }

    /// Saves every variable of `vs` that is due, under its hierarchical name (`fc1.weight`), in
    /// `weights` or `biases` (see [`parameter_collection`]). Returns how many were recorded.
    pub fn save_parameters(&mut self, vs: &VarStore) -> Result<usize> {
        if !self.0.anything_due() {
            return Ok(0);
        }
        let mut due = Vec::new();
        for (name, var) in sorted(vs) {
            if let Some(d) = self.0.due(&name, &[parameter_collection(&name)]) {
                due.push(Due {
                    name,
                    due: d,
                    tensor: var,
                });
            }
        }
        self.0.record(due)
    }

    /// Saves the gradient of every variable of `vs` that has one (call it after `backward()` and
    /// before the optimizer step, which zeroes them in `zero_grad`), as `gradient/<name>` in
    /// `gradients`. Returns how many were recorded.
    pub fn save_gradients(&mut self, vs: &VarStore) -> Result<usize> {
        if !self.0.anything_due() {
            return Ok(0);
        }
        let mut due = Vec::new();
        for (name, var) in sorted(vs) {
            let grad = var.grad();
            if !grad.defined() {
                continue;
            }
            let name = format!("{GRADIENT_PREFIX}{name}");
            if let Some(d) = self.0.due(&name, &["gradients"]) {
                due.push(Due {
                    name,
                    due: d,
                    tensor: grad,
                });
            }
        }
        self.0.record(due)
    }
}

/// The store's variables sorted by name (a `HashMap` has no order; files and tests want one).
fn sorted(vs: &VarStore) -> Vec<(String, Tensor)> {
    let mut vars: Vec<(String, Tensor)> = vs.variables().into_iter().collect();
    vars.sort_unstable_by(|a, b| a.0.cmp(&b.0));
    vars
}
