//! Module outputs recorded from inside a forward pass.
//!
//! candle's [`Module::forward`] takes `&self`, so a module cannot reach the hook. A [`Recorded`]
//! module holds a capture point of smdebug-core's adapter kit instead: the hook arms it at the
//! start of each step where its tensor is due (one atomic flag), an armed point keeps a detached
//! handle on the output (candle tensors are reference-counted: nothing is copied and the autograd
//! graph is not held), and the hook saves what was kept when the step ends.

use candle_core::{Module, Tensor};

use crate::framework::Candle;

/// A named capture point inside a forward pass, for tensors that are not a module's output: the
/// softmax of an attention layer, its query and key projections, a gate, a residual. Built by
/// [`CandleHook::probe`](smdebug_core::adapter::AdapterHook::probe) and held by the model;
/// `forward` hands it the tensor with [`record`](smdebug_core::adapter::Probe::record).
pub type Probe = smdebug_core::adapter::Probe<Candle>;

/// A module whose forward output is recorded (as `<name>.output`, collection `outputs`) at the
/// steps where it is due. Built by [`CandleHook::wrap`](crate::CandleHook::wrap); forwards exactly
/// like the module it wraps.
pub struct Recorded<M> {
    module: M,
    probe: Probe,
}

impl<M> Recorded<M> {
    pub(crate) fn new(module: M, probe: Probe) -> Self {
        Recorded { module, probe }
    }

    /// The wrapped module.
    pub fn inner(&self) -> &M {
        &self.module
    }

    /// The name its output is recorded under.
    pub fn tensor_name(&self) -> &str {
        self.probe.name()
    }
}

impl<M: std::fmt::Debug> std::fmt::Debug for Recorded<M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recorded")
            .field("tensor_name", &self.tensor_name())
            .field("module", &self.module)
            .finish()
    }
}

impl<M: Module> Module for Recorded<M> {
    fn forward(&self, xs: &Tensor) -> candle_core::Result<Tensor> {
        let out = self.module.forward(xs)?;
        self.probe.record(&out);
        Ok(out)
    }
}
