//! Module outputs: a wrapper module that keeps its forward output when the hook says it is due.
//!
//! tch's [`Module::forward`](tch::nn::Module::forward) takes `&self` and has no forward hooks, so
//! the wrapper cannot reach the hook. It holds a capture point of smdebug-core's adapter kit
//! instead: the hook arms it at the start of each step where its output is due (one atomic flag),
//! an armed wrapper keeps a detached handle on its output (libtorch tensors are
//! reference-counted: nothing is copied), and the hook saves the kept outputs when the step ends.

use tch::Tensor;
use tch::nn::{Module, ModuleT};

use crate::framework::Tch;

/// A named capture point inside a forward pass, for tensors that are not a module's output
/// (attention scores, a gate): built by
/// [`TchHook::probe`](smdebug_core::adapter::AdapterHook::probe), kept by the model, handed the
/// tensor with [`record`](smdebug_core::adapter::Probe::record).
pub type Probe = smdebug_core::adapter::Probe<Tch>;

/// A module whose forward output is recorded (as `<name>.output`, collection `outputs`) at the
/// steps where it is due. Built by [`TchHook::wrap`](crate::TchHook::wrap); forwards exactly like
/// the module it wraps.
pub struct Recorded<M> {
    module: M,
    probe: Probe,
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

    fn observe(&self, output: Tensor) -> Tensor {
        self.probe.record(&output);
        output
    }
}

impl<M: Module> Module for Recorded<M> {
    fn forward(&self, xs: &Tensor) -> Tensor {
        self.observe(self.module.forward(xs))
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
        self.0.observe(self.0.module.forward_t(xs, train))
    }
}
