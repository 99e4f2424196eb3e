//! Wrapped modules: outputs recorded and forward passes timed from inside a forward pass.
//!
//! tch's [`Module::forward`](tch::nn::Module::forward) takes `&self` and has no forward hooks, so
//! the wrapper cannot reach the hook. It holds a [`ModuleProbe`] of smdebug-core's adapter kit
//! instead: the hook arms its capture point at the start of each step where the output is due
//! (one atomic flag), an armed wrapper keeps a detached handle on its output (libtorch tensors are
//! reference-counted: nothing is copied), and the hook saves the kept outputs when the step ends.
//! The same wrapper times the module's forward pass as a span of its own while the timeline's
//! detailed window is open. [`TimedModel`] and [`TimedModelT`] are the whole model: its forward
//! pass is the step's forward span.

use std::convert::Infallible;

use smdebug_core::adapter::ModuleProbe;
use smdebug_core::phase::Phase;
use smdebug_core::timeline::Timeline;
use tch::Tensor;
use tch::nn::{Module, ModuleT};

use crate::framework::Tch;

/// A named capture point inside a forward pass, for tensors that are not a module's output
/// (attention scores, a gate): built by
/// [`TchHook::probe`](smdebug_core::adapter::AdapterHook::probe), kept by the model, handed the
/// tensor with [`record`](smdebug_core::adapter::Probe::record).
pub type Probe = smdebug_core::adapter::Probe<Tch>;

/// A module whose forward output is recorded (as `<name>.output`, collection `outputs`) at the
/// steps where it is due, and whose forward pass is a span named `<name>` while the detailed
/// window is open. Built by [`TchHook::wrap`](crate::TchHook::wrap); forwards exactly like the
/// module it wraps.
pub struct Recorded<M> {
    module: M,
    probe: ModuleProbe<Tch>,
}

// `Module` requires `Send`: the kit keeps tensors behind a mutex, and tch marks `Tensor` `Send`.
impl<M: std::fmt::Debug> std::fmt::Debug for Recorded<M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recorded")
            .field("name", &self.tensor_name())
            .field("module", &self.module)
            .finish()
    }
}

impl<M> Recorded<M> {
    pub(crate) fn new(module: M, probe: ModuleProbe<Tch>) -> Self {
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

    /// Runs the wrapped module's forward pass `f` through the probe.
    fn run(&self, f: impl FnOnce() -> Tensor) -> Tensor {
        let Ok(out) = self.probe.forward(|| Ok::<_, Infallible>(f()));
        out
    }
}

impl<M: Module> Module for Recorded<M> {
    fn forward(&self, xs: &Tensor) -> Tensor {
        self.run(|| self.module.forward(xs))
    }
}

/// For modules with a train flag (dropout, batch norm). A type that is both `Module` and
/// `ModuleT` gets `ModuleT` from tch's blanket impl; this one covers `ModuleT`-only modules.
pub struct RecordedT<M>(Recorded<M>);

impl<M: std::fmt::Debug> std::fmt::Debug for RecordedT<M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl<M> RecordedT<M> {
    pub(crate) fn new(inner: Recorded<M>) -> Self {
        RecordedT(inner)
    }

    /// The wrapped module.
    pub fn inner(&self) -> &M {
        self.0.inner()
    }
}

impl<M: ModuleT> ModuleT for RecordedT<M> {
    fn forward_t(&self, xs: &Tensor, train: bool) -> Tensor {
        self.0.run(|| self.0.module.forward_t(xs, train))
    }
}

/// The whole model: its forward pass is the step's forward span (`Forward`), so the loop needs
/// no scope around it. Built by [`TchHook::wrap_model`](crate::TchHook::wrap_model); forwards
/// exactly like the model it wraps. Use it or
/// [`AdapterHook::forward`](smdebug_core::adapter::AdapterHook::forward), not both: nested,
/// they would measure the pass twice.
pub struct TimedModel<M> {
    model: M,
    timeline: Timeline,
}

impl<M: std::fmt::Debug> std::fmt::Debug for TimedModel<M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TimedModel")
            .field("model", &self.model)
            .finish_non_exhaustive()
    }
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

impl<M: Module> Module for TimedModel<M> {
    fn forward(&self, xs: &Tensor) -> Tensor {
        self.timeline
            .scope(Phase::Forward, || self.model.forward(xs))
    }
}

/// [`TimedModel`] for models with a train flag (`ModuleT`-only: dropout, batch norm). Built by
/// [`TchHook::wrap_model_t`](crate::TchHook::wrap_model_t).
pub struct TimedModelT<M>(TimedModel<M>);

impl<M: std::fmt::Debug> std::fmt::Debug for TimedModelT<M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl<M> TimedModelT<M> {
    pub(crate) fn new(inner: TimedModel<M>) -> Self {
        TimedModelT(inner)
    }

    /// The wrapped model.
    pub fn inner(&self) -> &M {
        self.0.inner()
    }
}

impl<M: ModuleT> ModuleT for TimedModelT<M> {
    fn forward_t(&self, xs: &Tensor, train: bool) -> Tensor {
        self.0
            .timeline
            .scope(Phase::Forward, || self.0.model.forward_t(xs, train))
    }
}
