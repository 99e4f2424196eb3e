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
use smdebug_core::adapter::AdapterHook;
use smdebug_core::layer_chain::{LayerChain, LayerChainBuilder};

use crate::error::Result;
use crate::framework::Candle;

/// A layer's module.
type BoxedModule = Box<dyn Module + Send + Sync>;

/// Builds a [`Layers`] model: [`layer`](Self::layer) for each part in order, then
/// [`build`](Self::build). Made by [`CandleHook::layers`](crate::CandleHook::layers).
pub struct LayersBuilder<'h>(LayerChainBuilder<'h, Candle, BoxedModule>);

impl<'h> LayersBuilder<'h> {
    pub(crate) fn new(hook: &'h mut AdapterHook<Candle>) -> Self {
        LayersBuilder(LayerChainBuilder::new(hook))
    }

    /// Appends `module` under `name` (its tensors are `<name>.input` and `<name>.output`, its
    /// span `<name>`). Any candle [`Module`] will do, closures included
    /// (`|x: &Tensor| x.flatten_from(1)`).
    pub fn layer(mut self, name: &str, module: impl Module + Send + Sync + 'static) -> Self {
        self.0.push(name, Box::new(module));
        self
    }

    /// The model. Fails when two layers share a name (their tensors would be one).
    pub fn build(self) -> Result<Layers> {
        Ok(Layers(self.0.build()?))
    }
}

/// A model of named layers applied in order, every layer registered for capture. Forwards
/// exactly as the chain of its layers; its forward pass is the step's forward span (use it
/// instead of [`wrap_model`](crate::CandleHook::wrap_model) or `forward(|| ..)`, not beside
/// them).
#[derive(Debug)]
pub struct Layers(LayerChain<Candle, BoxedModule>);

impl Layers {
    /// The layers' names, in order.
    pub fn names(&self) -> Vec<&str> {
        self.0.names()
    }
}

impl Module for Layers {
    fn forward(&self, xs: &Tensor) -> candle_core::Result<Tensor> {
        self.0.forward(xs.clone(), |module, x| module.forward(x))
    }
}
