//! Wrapped modules: outputs recorded and forward passes timed from inside a forward pass.
//!
//! candle's [`Module::forward`] takes `&self`, so a module cannot reach the hook. A [`Recorded`]
//! module holds a [`ModuleProbe`] of smdebug-core's adapter kit instead: the hook arms its
//! capture point at the start of each step where the output is due (one atomic flag), an armed
//! point keeps a detached handle on the output (candle tensors are reference-counted: nothing is
//! copied and the autograd graph is not held), and the hook saves what was kept when the step
//! ends. The same wrapper times the module's forward pass as a span of its own while the
//! timeline's detailed window is open. A [`TimedModel`] is the whole model: its forward pass is
//! the step's forward span.

use candle_core::{Module, Tensor};
use smdebug_core::adapter::ModuleProbe;
use smdebug_core::phase::Phase;
use smdebug_core::timeline::Timeline;

use crate::framework::Candle;

/// A named capture point inside a forward pass, for tensors that are not a module's output: the
/// softmax of an attention layer, its query and key projections, a gate, a residual. Built by
/// [`CandleHook::probe`](smdebug_core::adapter::AdapterHook::probe) and held by the model;
/// `forward` hands it the tensor with [`record`](smdebug_core::adapter::Probe::record).
pub type Probe = smdebug_core::adapter::Probe<Candle>;

/// A module whose forward output is recorded (as `<name>.output`, collection `outputs`) at the
/// steps where it is due, and whose forward pass is a span named `<name>` while the detailed
/// window is open. Built by [`CandleHook::wrap`](crate::CandleHook::wrap); forwards exactly like
/// the module it wraps.
pub struct Recorded<M> {
    module: M,
    probe: ModuleProbe<Candle>,
}

impl<M> Recorded<M> {
    pub(crate) fn new(module: M, probe: ModuleProbe<Candle>) -> Self {
        Recorded { module, probe }
    }

    /// The wrapped module.
    pub fn inner(&self) -> &M {
        &self.module
    }

    /// The name its output is recorded under.
    pub fn tensor_name(&self) -> &str {
        self.probe.output().name()
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
        self.probe.forward(|| self.module.forward(xs))
    }
}

/// The whole model: its forward pass is the step's forward span (`Forward`), so the loop needs
/// no scope around it. Built by [`CandleHook::wrap_model`](crate::CandleHook::wrap_model);
/// forwards exactly like the model it wraps. Use it or
/// [`AdapterHook::forward`](smdebug_core::adapter::AdapterHook::forward), not both: nested,
/// they would measure the pass twice.
pub struct TimedModel<M> {
    model: M,
    timeline: Timeline,
}

impl<M> TimedModel<M> {
    pub(crate) fn new(model: M, timeline: Timeline) -> Self {
        TimedModel { model, timeline }
    }

    /// The wrapped model.
    pub fn inner(&self) -> &M {
        &self.model
    }
}

impl<M: std::fmt::Debug> std::fmt::Debug for TimedModel<M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TimedModel")
            .field("model", &self.model)
            .finish_non_exhaustive()
    }
}

impl<M: Module> Module for TimedModel<M> {
    fn forward(&self, xs: &Tensor) -> candle_core::Result<Tensor> {
        self.timeline
            .scope(Phase::Forward, || self.model.forward(xs))
    }
}
