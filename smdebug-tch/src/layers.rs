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

use smdebug_core::adapter::{AdapterHook, ModuleProbe, check_layer_names};
use smdebug_core::phase::Phase;
use smdebug_core::timeline::Timeline;
use tch::Tensor;
use tch::nn::ModuleT;

use crate::error::Result;
use crate::framework::Tch;

/// Builds a [`Layers`] model: [`layer`](Self::layer) for each part in order, then
/// [`build`](Self::build). Made by [`TchHook::layers`](crate::TchHook::layers).
pub struct LayersBuilder<'h> {
    hook: &'h mut AdapterHook<Tch>,
    layers: Vec<Layer>,
}

#[derive(Debug)]
struct Layer {
    probe: ModuleProbe<Tch>,
    module: Box<dyn ModuleT>,
}

impl<'h> LayersBuilder<'h> {
    pub(crate) fn new(hook: &'h mut AdapterHook<Tch>) -> Self {
        LayersBuilder {
            hook,
            layers: Vec::new(),
        }
    }

    /// Appends `module` under `name` (its tensors are `<name>.input` and `<name>.output`, its
    /// span `<name>`). Any tch module will do: `nn::Module`s (`nn::linear`, `nn::func(|x|
    /// x.relu())`) and modules with a train flag (`nn::func_t`, dropout, batch norm).
    pub fn layer(mut self, name: &str, module: impl ModuleT + 'static) -> Self {
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

/// A model of named layers applied in order, every layer registered for capture; a
/// [`ModuleT`] (call `forward_t(&x, train)`), like tch's `SequentialT`. Its forward pass is the
/// step's forward span (use it instead of
/// [`wrap_model_t`](crate::TchHook::wrap_model_t) or `forward(|| ..)`, not beside them).
#[derive(Debug)]
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

impl ModuleT for Layers {
    fn forward_t(&self, xs: &Tensor, train: bool) -> Tensor {
        self.timeline.scope(Phase::Forward, || {
            let mut x = xs.shallow_clone();
            for layer in &self.layers {
                let Ok(out) = layer.probe.forward_from(&x, || {
                    Ok::<_, Infallible>(layer.module.forward_t(&x, train))
                });
                x = out;
            }
            x
        })
    }
}
