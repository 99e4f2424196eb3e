//! A model registered whole as a chain of named layers: what the candle and tch adapters'
//! `Layers` models are, apart from the framework's module type and how a module is called.
//!
//! Each layer gets the probe of its name ([`AdapterHook::layer_probe`]: `<name>.input`,
//! `<name>.output`, its span), the names are checked once when the chain is built, and the
//! whole pass is the step's forward span.

use crate::adapter::{AdapterHook, Framework, ModuleProbe};
use crate::phase::Phase;
use crate::timeline::Timeline;

/// Builds a [`LayerChain`]: [`push`](Self::push) for each module in order, then
/// [`build`](Self::build). `M` is the adapter's boxed module type.
pub struct LayerChainBuilder<'h, F: Framework, M> {
    hook: &'h mut AdapterHook<F>,
    layers: Vec<(ModuleProbe<F>, M)>,
}

impl<'h, F: Framework, M> LayerChainBuilder<'h, F, M> {
    /// No layers yet; each will be probed by `hook`.
    pub fn new(hook: &'h mut AdapterHook<F>) -> Self {
        LayerChainBuilder {
            hook,
            layers: Vec::new(),
        }
    }

    /// Appends `module` under `name` (its tensors are `<name>.input` and `<name>.output`, its
    /// span `<name>`).
    pub fn push(&mut self, name: &str, module: M) {
        self.layers.push((self.hook.layer_probe(name), module));
    }

    /// The chain. Fails when two layers share a name (their tensors would be one): a
    /// configuration error naming it.
    pub fn build(self) -> crate::Result<LayerChain<F, M>> {
        let mut seen = std::collections::HashSet::new();
        for (probe, _) in &self.layers {
            let name = probe.module();
            if !seen.insert(name) {
                return Err(crate::Error::Config(format!(
                    "two layers of the model are named `{name}`: each layer needs a name of its own"
                )));
            }
        }
        Ok(LayerChain {
            timeline: self.hook.timeline().clone(),
            layers: self.layers,
        })
    }
}

/// Named layers applied in order, every layer registered for capture.
pub struct LayerChain<F: Framework, M> {
    layers: Vec<(ModuleProbe<F>, M)>,
    timeline: Timeline,
}

impl<F: Framework, M> LayerChain<F, M> {
    /// The layers' names, in order.
    pub fn names(&self) -> Vec<&str> {
        self.layers
            .iter()
            .map(|(probe, _)| probe.module())
            .collect()
    }

    /// `input` through every layer in order, each called by `apply` through its probe (which
    /// records its input and output when due, and times it while the detailed window is open);
    /// the whole pass is the step's forward span. Stops at the first layer that fails.
    pub fn forward<E>(
        &self,
        input: F::Tensor,
        apply: impl Fn(&M, &F::Tensor) -> Result<F::Tensor, E>,
    ) -> Result<F::Tensor, E> {
        self.timeline.scope(Phase::Forward, || {
            let mut x = input;
            for (probe, module) in &self.layers {
                x = probe.forward_from(&x, || apply(module, &x))?;
            }
            Ok(x)
        })
    }
}

impl<F: Framework, M> std::fmt::Debug for LayerChain<F, M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LayerChain")
            .field("layers", &self.names())
            .finish_non_exhaustive()
    }
}
