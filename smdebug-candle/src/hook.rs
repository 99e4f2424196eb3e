//! [`CandleHook`]: smdebug-core's [`AdapterHook`] for candle tensors, which also walks a
//! [`VarMap`] and a [`GradStore`], wraps candle modules so that their outputs are recorded and
//! their forward passes timed, and runs the backward pass as the step's backward span.

use candle_core::backprop::GradStore;
use candle_core::{Module, Tensor, Var};
use candle_nn::VarMap;
use smdebug_core::adapter::{AdapterHook, Due};
use smdebug_core::collection::{GRADIENT_PREFIX, parameter_collection};
use smdebug_core::phase::Phase;
use smdebug_core::{HookBuilder, Sink};

use crate::error::{Error, Result};
use crate::framework::Candle;
use crate::layers::LayersBuilder;
use crate::output::{Recorded, TimedModel};

/// The capture hook of a candle training loop.
///
/// The calls every adapter shares (`set_mode`, `step`, `close`, `save_tensor`, `save_loss`,
/// `save_metric`, `save_scalar`, `probe`, stop requests, and the timeline's `data`, `forward`
/// and `optimizer` scopes) come from smdebug-core's [`AdapterHook`] (as inherent methods,
/// stamped by `smdebug_core::adapter_hook_methods!`); it adds what is particular to candle:
/// [`save_parameters`](Self::save_parameters), [`save_gradients`](Self::save_gradients),
/// [`layers`](Self::layers), [`wrap`](Self::wrap), [`wrap_model`](Self::wrap_model) and
/// [`backward`](Self::backward).
/// A session drives it through [`Capture`](smdebug_core::Capture).
///
/// With a timeline (`HookBuilder::timeline`), the loop's spans need no timing code: the step
/// boundary is `step()`, [`backward`](Self::backward) is the backward span, a model wrapped with
/// [`wrap_model`](Self::wrap_model) (or `forward(|| ..)`) the forward span, and each module
/// wrapped with [`wrap`](Self::wrap) a span of its own while the detailed window is open. On a
/// CUDA or Metal device candle queues kernels asynchronously: a span is the host's time to
/// issue the work, not the device's time to run it (see
/// [`smdebug_core::adapter`](smdebug_core::adapter#framework-spans)).
///
/// Every `save_*` method first asks the hook whether the tensor is due (a flag when nothing is due
/// this step, one hash lookup otherwise) and does nothing else when it is not. Errors are returned
/// to the caller and leave the hook usable; nothing here panics.
///
/// A tensor computed inside a forward pass (attention scores, a query projection, …) is recorded
/// through a [`Probe`](crate::Probe) the model keeps. It is saved under its name when due, in the
/// collections named plus every collection whose `include_regex` matches the name; with none
/// named, the configuration alone decides which layers are recorded:
///
/// ```
/// # use candle_core::{Device, Tensor};
/// # use smdebug_candle::CandleHook;
/// # use smdebug_core::{Hook, MemorySink, SaveConfig};
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let sink = MemorySink::default();
/// let builder = Hook::builder()
///     .save_config(SaveConfig::every(1))
///     .include_regex("attention", r"^layer0/attn/scores$");
/// let mut hook = CandleHook::new(builder, sink.clone())?;
/// let probes = [hook.probe("layer0/attn/scores", &[]), hook.probe("layer1/attn/scores", &[])];
/// assert!(probes[0].is_armed() && !probes[1].is_armed());
/// for p in &probes {
///     p.record(&Tensor::ones((2, 2), candle_core::DType::F32, &Device::Cpu)?);
/// }
/// hook.step()?;
/// let names: Vec<String> = sink.tensors().into_iter().map(|t| t.name).collect();
/// assert_eq!(names, ["layer0/attn/scores"]);
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct CandleHook(AdapterHook<Candle>);

smdebug_core::adapter_hook_methods!(CandleHook, Candle, tensors);

impl CandleHook {
    /// Builds the hook from a configured [`HookBuilder`] and the sink that stores the run
    /// (smdebug-io's `Writer`, or a `MemorySink`).
    pub fn new(builder: HookBuilder, sink: impl Sink + 'static) -> Result<CandleHook> {
        Ok(CandleHook(AdapterHook::new(builder, sink, Candle)?))
    }

    /// Wraps `module` so that its forward output is recorded as `<name>.output` (collection
    /// `outputs`) whenever that tensor is due, and its forward pass is a span named `name`
    /// while the detailed window is open.
    pub fn wrap<M: Module>(&mut self, name: &str, module: M) -> Recorded<M> {
        Recorded::new(module, self.0.module_probe(name))
    }

    /// Registers a whole model: build it here, layer by layer as with `candle_nn::seq()`, and
    /// every layer's input and output is a capture point (`<layer>.input` in `inputs`,
    /// `<layer>.output` in `outputs`, plus every collection whose `include_regex` matches the
    /// name), kept only at the steps where it is due; the model's forward pass is the step's
    /// forward span and each layer's a span of its own while the detailed window is open.
    ///
    /// ```
    /// # use candle_core::{DType, Device, Module, Tensor};
    /// # use candle_nn::{Activation, VarBuilder, VarMap};
    /// # use smdebug_candle::CandleHook;
    /// # use smdebug_core::{Hook, MemorySink, SaveConfig};
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let (varmap, dev) = (VarMap::new(), Device::Cpu);
    /// let vb = VarBuilder::from_varmap(&varmap, DType::F32, &dev);
    /// let sink = MemorySink::default();
    /// // Only ReLU outputs are selected (DeadRelu's collection); the other layers cost a flag.
    /// let builder = Hook::builder()
    ///     .save_config(SaveConfig::every(1))
    ///     .include_collections(&["relu_output"])
    ///     .include_regex("relu_output", r"relu\d*\.output$");
    /// let mut hook = CandleHook::new(builder, sink.clone())?;
    /// let model = hook
    ///     .layers()
    ///     .layer("fc1", candle_nn::linear(4, 8, vb.pp("fc1"))?)
    ///     .layer("relu1", Activation::Relu)
    ///     .layer("fc2", candle_nn::linear(8, 2, vb.pp("fc2"))?)
    ///     .build()?;
    /// model.forward(&Tensor::ones((3, 4), DType::F32, &dev)?)?;
    /// hook.step()?;
    /// let names: Vec<String> = sink.tensors().into_iter().map(|t| t.name).collect();
    /// assert_eq!(names, ["relu1.output"]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn layers(&mut self) -> LayersBuilder<'_> {
        LayersBuilder::new(&mut self.0)
    }

    /// Wraps the whole model so that its forward pass is the step's forward span (use it or
    /// `forward(|| ..)`, not both).
    pub fn wrap_model<M: Module>(&self, model: M) -> TimedModel<M> {
        TimedModel::new(model, self.0.timeline().clone())
    }

    /// Runs candle's backward pass from `loss` as the step's backward span and returns its
    /// gradients (`loss.backward()`).
    pub fn backward(&self, loss: &Tensor) -> Result<GradStore> {
        self.0
            .scope(Phase::Backward, || loss.backward())
            .map_err(|source| Error::Backward { source })
    }

    /// Saves every variable of `varmap` that is due, under its hierarchical name (`fc1.weight`),
    /// in `weights` or `biases` (see [`parameter_collection`]). Returns how many were recorded.
    pub fn save_parameters(&mut self, varmap: &VarMap) -> Result<usize> {
        let due = self.due_vars(varmap, "", parameter_collection, |var| {
            Some(var.as_tensor().clone())
        })?;
        self.0.record(due)
    }

    /// Saves the gradient of every variable of `varmap` found in `grads` (call it after
    /// `backward()` and before the optimizer step), as `gradient/<name>` in `gradients`.
    /// Returns how many were recorded.
    pub fn save_gradients(&mut self, varmap: &VarMap, grads: &GradStore) -> Result<usize> {
        let due = self.due_vars(
            varmap,
            GRADIENT_PREFIX,
            |_| "gradients",
            |var| grads.get(var.as_tensor()).cloned(),
        )?;
        self.0.record(due)
    }

    /// The tensors (`tensor_of(var)`, named `<prefix><name>`, in the collection
    /// `collection_of(name)`) of the variables that are due now, sorted by name. Nothing is
    /// cloned for variables that are not due.
    fn due_vars(
        &mut self,
        varmap: &VarMap,
        prefix: &str,
        collection_of: fn(&str) -> &'static str,
        tensor_of: impl Fn(&Var) -> Option<Tensor>,
    ) -> Result<Vec<Due<Tensor>>> {
        if !self.0.anything_due() {
            return Ok(Vec::new());
        }
        let data = varmap.data().lock().map_err(|_| Error::PoisonedVarMap)?;
        let mut due = Vec::new();
        let mut name = String::from(prefix);
        for (var_name, var) in data.iter() {
            name.truncate(prefix.len());
            name.push_str(var_name);
            if let Some(d) = self.0.due(&name, &[collection_of(var_name)])
                && let Some(tensor) = tensor_of(var)
            {
                due.push(Due {
                    name: name.clone(),
                    due: d,
                    tensor,
                });
            }
        }
        due.sort_unstable_by(|a, b| a.name.cmp(&b.name));
        Ok(due)
    }
}
