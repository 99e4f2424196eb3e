//! [`TchHook`]: smdebug-core's [`AdapterHook`] for tch tensors, which also walks a [`VarStore`],
//! wraps tch modules so that their outputs are recorded and their forward passes timed, and runs
//! the backward pass as the step's backward span.

use smdebug_core::adapter::{AdapterHook, Due};
use smdebug_core::collection::{GRADIENT_PREFIX, parameter_collection};
use smdebug_core::phase::Phase;
use smdebug_core::{HookBuilder, Sink};
use tch::Tensor;
use tch::nn::VarStore;

use crate::error::{Error, Result};
use crate::framework::Tch;
use crate::layers::LayersBuilder;
use crate::output::{Recorded, RecordedT, TimedModel, TimedModelT};

/// The capture hook of a tch training loop.
///
/// The calls every adapter shares (`set_mode`, `step`, `close`, `save_tensor`, `save_loss`,
/// `save_metric`, `save_scalar`, `probe`, stop requests, and the timeline's `data`, `forward`
/// and `optimizer` scopes) come from smdebug-core's [`AdapterHook`] (as inherent methods,
/// stamped by `smdebug_core::adapter_hook_methods!`); it adds what is particular to tch:
/// [`save_parameters`](Self::save_parameters), [`save_gradients`](Self::save_gradients),
/// [`layers`](Self::layers), [`wrap`](Self::wrap), [`wrap_t`](Self::wrap_t),
/// [`wrap_model`](Self::wrap_model),
/// [`wrap_model_t`](Self::wrap_model_t) and [`backward`](Self::backward). A session drives it
/// through [`Capture`](smdebug_core::Capture). Errors are returned to the caller and leave the hook usable; nothing
/// here panics.
///
/// With a timeline (`HookBuilder::timeline`), the loop's spans need no timing code: the step
/// boundary is `step()`, [`backward`](Self::backward) is the backward span, a wrapped model (or
/// `forward(|| ..)`) the forward span, and each wrapped module a span of its own while the
/// detailed window is open. On a CUDA device libtorch queues kernels asynchronously: a span is
/// the host's time to issue the work (for backward, libtorch's autograd engine returns once it
/// has run the graph's operations, which on CUDA launch kernels), not the device's time to run
/// it (see [`smdebug_core::adapter`](smdebug_core::adapter#framework-spans)).
#[derive(Debug)]
pub struct TchHook(AdapterHook<Tch>);

smdebug_core::adapter_hook_methods!(TchHook, Tch, tensors);

impl TchHook {
    /// Builds the hook (configuration errors surface here) over `sink` (smdebug-io's `Writer`
    /// in a real run).
    pub fn new(builder: HookBuilder, sink: impl Sink + 'static) -> Result<TchHook> {
        Ok(TchHook(AdapterHook::new(builder, sink, Tch)?))
    }

    /// Registers a whole model: build it here, layer by layer as with `nn::seq_t()`, and every
    /// layer's input and output is a capture point (`<layer>.input` in `inputs`,
    /// `<layer>.output` in `outputs`, plus every collection whose `include_regex` matches the
    /// name), kept only at the steps where it is due; the model's forward pass is the step's
    /// forward span and each layer's a span of its own while the detailed window is open.
    ///
    /// ```
    /// # use smdebug_tch::TchHook;
    /// # use smdebug_core::{Hook, MemorySink, SaveConfig};
    /// # use tch::nn::{self, ModuleT};
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let vs = nn::VarStore::new(tch::Device::Cpu);
    /// let sink = MemorySink::default();
    /// let builder = Hook::builder()
    ///     .save_config(SaveConfig::every(1))
    ///     .include_collections(&["relu_output"])
    ///     .include_regex("relu_output", r"relu\d*\.output$");
    /// let mut hook = TchHook::new(builder, sink.clone())?;
    /// let model = hook
    ///     .layers()
    ///     .layer("fc1", nn::linear(vs.root() / "fc1", 4, 8, Default::default()))
    ///     .layer("relu1", nn::func(|x| x.relu()))
    ///     .layer("fc2", nn::linear(vs.root() / "fc2", 8, 2, Default::default()))
    ///     .build()?;
    /// model.forward_t(&tch::Tensor::ones([3, 4], (tch::Kind::Float, tch::Device::Cpu)), true);
    /// hook.step()?;
    /// let names: Vec<String> = sink.tensors().into_iter().map(|t| t.name).collect();
    /// assert_eq!(names, ["relu1.output"]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn layers(&mut self) -> LayersBuilder<'_> {
        LayersBuilder::new(&mut self.0)
    }

    /// Wraps a module so its forward output is recorded as `<name>.output` (collection
    /// `outputs`) at the steps where that is due, and its forward pass is a span named `name`
    /// while the detailed window is open.
    pub fn wrap<M: tch::nn::Module>(&mut self, name: &str, module: M) -> Recorded<M> {
        Recorded::new(module, self.0.module_probe(name))
    }

    /// Like [`wrap`](Self::wrap), for modules with a train flag (`ModuleT`: dropout, batch norm).
    pub fn wrap_t<M: tch::nn::ModuleT>(&mut self, name: &str, module: M) -> RecordedT<M> {
        RecordedT::new(Recorded::new(module, self.0.module_probe(name)))
    }

    /// Wraps the whole model so that its forward pass is the step's forward span (use it or
    /// `forward(|| ..)`, not both).
    pub fn wrap_model<M: tch::nn::Module>(&self, model: M) -> TimedModel<M> {
        TimedModel::new(model, self.0.timeline().clone())
    }

    /// Like [`wrap_model`](Self::wrap_model), for models with a train flag (`ModuleT`).
    pub fn wrap_model_t<M: tch::nn::ModuleT>(&self, model: M) -> TimedModelT<M> {
        TimedModelT::new(TimedModel::new(model, self.0.timeline().clone()))
    }

    /// Runs libtorch's backward pass from `loss` as the step's backward span
    /// (`loss.backward()`, which accumulates the gradients into the variables). Its failure
    /// (a loss that needs no gradient, a graph already freed) is returned, not a panic.
    pub fn backward(&self, loss: &Tensor) -> Result<()> {
        self.0
            .scope(Phase::Backward, || loss.f_backward())
            .map_err(|source| Error::Backward { source })
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
