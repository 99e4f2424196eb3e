//! A model registered whole: its layers named once, each a capture point.
//!
//! PyTorch's smdebug registers every module of a model with one call through PyTorch's forward
//! hooks and module names; tch exposes neither (an `nn::Sequential`'s layers are opaque). What
//! tch users build with `nn::seq_t().add(..)` is built here with
//! [`TchHook::layers`](crate::TchHook::layers) instead, each part with its name: every layer's
//! input and output become capture points (`<layer>.input` in `inputs`, `<layer>.output` in
//! `outputs`, and every collection whose `include_regex` matches, such as DeadRelu's
//! `relu_output`), armed only at the steps where they are due; the whole pass is the step's
//! forward span and each layer a span of its own while the detailed window is open. A model
//! that is not a chain of layers wraps its parts one by one
//! ([`TchHook::wrap`](crate::TchHook::wrap)).

use std::convert::Infallible;

use smdebug_core::adapter::AdapterHook;
use smdebug_core::layer_chain::{LayerChain, LayerChainBuilder};
use tch::Tensor;
use tch::nn::ModuleT;

use crate::error::Result;
use crate::framework::Tch;

/// Builds a [`Layers`] model: [`layer`](Self::layer) for each part in order, then
/// [`build`](Self::build). Made by [`TchHook::layers`](crate::TchHook::layers).
pub struct LayersBuilder<'h>(LayerChainBuilder<'h, Tch, Box<dyn ModuleT>>);

impl<'h> LayersBuilder<'h> {
    pub(crate) fn new(hook: &'h mut AdapterHook<Tch>) -> Self {
        LayersBuilder(LayerChainBuilder::new(hook))
    }

    /// Appends `module` under `name` (its tensors are `<name>.input` and `<name>.output`, its
    /// span `<name>`). Any tch module will do: `nn::Module`s (`nn::linear`, `nn::func(|x|
    /// x.relu())`) and modules with a train flag (`nn::func_t`, dropout, batch norm).
    pub fn layer(mut self, name: &str, module: impl ModuleT + 'static) -> Self {
        self.0.push(name, Box::new(module));
        self
    }

    /// The model. Fails when two layers share a name (their tensors would be one).
    pub fn build(self) -> Result<Layers> {
        Ok(Layers(self.0.build()?))
    }
}

/// A model of named layers applied in order, every layer registered for capture; a
/// [`ModuleT`] (call `forward_t(&x, train)`), like tch's `SequentialT`. Its forward pass is the
/// step's forward span (use it instead of
/// [`wrap_model_t`](crate::TchHook::wrap_model_t) or `forward(|| ..)`, not beside them).
#[derive(Debug)]
pub struct Layers(LayerChain<Tch, Box<dyn ModuleT>>);

impl Layers {
    /// The layers' names, in order.
    pub fn names(&self) -> Vec<&str> {
        self.0.names()
    }
}

impl ModuleT for Layers {
    fn forward_t(&self, xs: &Tensor, train: bool) -> Tensor {
        let Ok(out) = self.0.forward(xs.shallow_clone(), |module, x| {
            Ok::<_, Infallible>(module.forward_t(x, train))
        });
        out
    }
}
