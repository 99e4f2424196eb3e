//! A model registered whole: its layers named once, each a capture point.
//!
//! PyTorch's smdebug registers every module of a model with one call because PyTorch modules
//! have forward hooks and names. candle modules have neither: a model is a value whose
//! `forward` calls its parts. What candle users build with `candle_nn::seq().add(..)` is built
//! here with [`CandleHook::layers`](crate::CandleHook::layers) instead, each part with its name:
//! every layer's input and output become capture points (`<layer>.input` in `inputs`,
//! `<layer>.output` in `outputs`, and every collection whose `include_regex` matches, such as
//! DeadRelu's `relu_output`), armed only at the steps where they are due; the whole pass is
//! the step's forward span and each layer a span of its own while the detailed window is open.
//! A model that is not a chain of layers wraps its parts one by one
//! ([`CandleHook::wrap`](crate::CandleHook::wrap)) or probes them ([`Probe`](crate::Probe)).

use candle_core::{Module, Tensor};
use smdebug_core::adapter::{AdapterHook, ModuleProbe, check_layer_names};
use smdebug_core::phase::Phase;
use smdebug_core::timeline::Timeline;

use crate::error::Result;
use crate::framework::Candle;

/// Builds a [`Layers`] model: [`layer`](Self::layer) for each part in order, then
/// [`build`](Self::build). Made by [`CandleHook::layers`](crate::CandleHook::layers).
pub struct LayersBuilder<'h> {
    hook: &'h mut AdapterHook<Candle>,
    layers: Vec<Layer>,
}

struct Layer {
    probe: ModuleProbe<Candle>,
    module: Box<dyn Module + Send + Sync>,
}

impl<'h> LayersBuilder<'h> {
    pub(crate) fn new(hook: &'h mut AdapterHook<Candle>) -> Self {
        LayersBuilder {
            hook,
            layers: Vec::new(),
        }
    }

    /// Appends `module` under `name` (its tensors are `<name>.input` and `<name>.output`, its
    /// span `<name>`). Any candle [`Module`] will do, closures included
    /// (`|x: &Tensor| x.flatten_from(1)`).
    pub fn layer(mut self, name: &str, module: impl Module + Send + Sync + 'static) -> Self {
        self.layers.push(Layer {
            probe: self.hook.layer_probe(name),
            module: Box::new(module),
        });
        self
    }

    /// The model. Fails when two layers share a name (their tensors would be one).
    pub fn build(self) -> Result<Layers> {
        check_layer_names(self.layers.iter().map(|l| l.probe.module()))?;
        Ok(Layers {
            timeline: self.hook.timeline().clone(),
            layers: self.layers,
        })
    }
}

/// A model of named layers applied in order, every layer registered for capture. Forwards
/// exactly as the chain of its layers; its forward pass is the step's forward span (use it
/// instead of [`wrap_model`](crate::CandleHook::wrap_model) or `forward(|| ..)`, not beside
/// them).
pub struct Layers {
    layers: Vec<Layer>,
    timeline: Timeline,
}

impl Layers {
    /// The layers' names, in order.
    pub fn names(&self) -> Vec<&str> {
        self.layers.iter().map(|l| l.probe.module()).collect()
    }
}

impl std::fmt::Debug for Layers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Layers")
            .field("layers", &self.names())
            .finish_non_exhaustive()
    }
}

impl Module for Layers {
    fn forward(&self, xs: &Tensor) -> candle_core::Result<Tensor> {
        self.timeline.scope(Phase::Forward, || {
            let mut x = xs.clone();
            for layer in &self.layers {
                x = layer.probe.forward_from(&x, || layer.module.forward(&x))?;
            }
            Ok(x)
        })
    }
}
