//! A model registered whole: every module of a burn model found once, each a capture point.
//!
//! PyTorch's smdebug registers every module of a model with one call because PyTorch modules
//! have forward hooks. burn's have none, but a `#[derive(Module)]` model knows its modules'
//! paths: [`BurnHook::layers`](crate::BurnHook::layers) walks them with burn's module visitor
//! (`fc1`, `relu1`, `blocks.0.conv`, parameter-free ones such as `Relu` included) and makes each
//! a capture point: its input as `<path>.input` (collection `inputs`) and its output as
//! `<path>.output` (`outputs`), plus every collection whose `include_regex` matches, armed only
//! at the steps where they are due. The model's `forward` passes each call through
//! [`Layers::forward`], which keeps what is due and times the call as a span of its own while
//! the detailed window is open; at other steps it costs two atomic loads.

use std::collections::BTreeMap;
use std::sync::Mutex;

use burn::module::{Flag, Module, ModuleVisitor, Param};
use burn::tensor::{Bool, Int, Tensor};
use smdebug_core::adapter::{AdapterHook, ModuleProbe};

use crate::hook::{Burn, BurnHook, Flat};

/// Every module of a registered model, by its path. Built by
/// [`BurnHook::layers`](crate::BurnHook::layers); the model (or its caller) keeps it and runs
/// each module's call through [`forward`](Self::forward).
pub struct Layers {
    probes: BTreeMap<String, ModuleProbe<Burn>>,
    /// Paths asked for that the model does not have, in the order first asked.
    unknown: Mutex<Vec<String>>,
}

impl Layers {
    pub(crate) fn register<M: Module>(hook: &mut AdapterHook<Burn>, model: &M) -> Layers {
        let mut paths = ModulePaths::default();
        model.visit(&mut paths);
        let probes = paths
            .modules
            .into_iter()
            .map(|path| {
                let probe = hook.layer_probe(&path);
                (path, probe)
            })
            .collect();
        Layers {
            probes,
            unknown: Mutex::new(Vec::new()),
        }
    }

    /// The registered modules' paths, sorted.
    pub fn names(&self) -> Vec<&str> {
        self.probes.keys().map(String::as_str).collect()
    }

    /// Runs the module at `path` on `input` (`f`, typically `|x| self.fc1.forward(x)`): its
    /// input and output are kept when due, and the call is a span named `path` while the
    /// detailed window is open. A path the model does not have runs `f` with nothing kept and
    /// is listed by [`unknown`](Self::unknown).
    pub fn forward<const D: usize, const E: usize>(
        &self,
        path: &str,
        input: Tensor<D>,
        f: impl FnOnce(Tensor<D>) -> Tensor<E>,
    ) -> Tensor<E> {
        let Some(probe) = self.probes.get(path) else {
            if let Ok(mut unknown) = self.unknown.lock()
                && !unknown.iter().any(|p| p == path)
            {
                unknown.push(path.to_string());
            }
            return f(input);
        };
        if let Some(point) = probe.input()
            && point.is_armed()
        {
            point.record(&Flat::new(&input));
        }
        let output = probe.scope(|| f(input));
        if probe.output().is_armed() {
            probe.output().record(&Flat::new(&output));
        }
        output
    }

    /// The paths [`forward`](Self::forward) was asked for that the model does not have (a
    /// misspelt name captures nothing: this says which).
    pub fn unknown(&self) -> Vec<String> {
        self.unknown.lock().map(|u| u.clone()).unwrap_or_default()
    }
}

impl std::fmt::Debug for Layers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Layers")
            .field("modules", &self.names())
            .finish_non_exhaustive()
    }
}

impl BurnHook {
    /// Registers every module of `model` for capture (see [`Layers`]): its input and output
    /// are kept when due, as `<path>.input` in `inputs` and `<path>.output` in `outputs` (plus
    /// every collection whose `include_regex` matches), at the calls its `forward` makes through
    /// [`Layers::forward`]. Nothing is copied at a step where a module's tensors are not due.
    ///
    /// ```
    /// use burn::module::Module;
    /// use burn::nn::{Linear, LinearConfig, Relu};
    /// use burn::tensor::{Device, Tensor};
    /// use smdebug_burn::{BurnHook, Layers};
    /// use smdebug_core::{Hook, MemorySink, SaveConfig};
    ///
    /// #[derive(Module, Debug)]
    /// struct Net {
    ///     fc1: Linear,
    ///     relu1: Relu,
    ///     fc2: Linear,
    /// }
    ///
    /// impl Net {
    ///     fn forward(&self, layers: &Layers, x: Tensor<2>) -> Tensor<2> {
    ///         let x = layers.forward("fc1", x, |x| self.fc1.forward(x));
    ///         let x = layers.forward("relu1", x, |x| self.relu1.forward(x));
    ///         layers.forward("fc2", x, |x| self.fc2.forward(x))
    ///     }
    /// }
    ///
    /// # #[allow(deprecated)]
    /// let device = Device::ndarray();
    /// let net = Net {
    ///     fc1: LinearConfig::new(4, 8).init(&device),
    ///     relu1: Relu::new(),
    ///     fc2: LinearConfig::new(8, 2).init(&device),
    /// };
    /// let sink = MemorySink::default();
    /// // DeadRelu's collection alone: of the six layer tensors only the ReLU's output is kept.
    /// let builder = Hook::builder()
    ///     .save_config(SaveConfig::every(1))
    ///     .include_collections(&["relu_output"])
    ///     .include_regex("relu_output", r"relu\d*\.output$");
    /// let mut hook = BurnHook::new(builder, sink.clone())?;
    /// let layers = hook.layers(&net);
    /// assert_eq!(layers.names(), ["fc1", "fc2", "relu1"]);
    /// net.forward(&layers, Tensor::ones([3, 4], &device));
    /// hook.step()?;
    /// let names: Vec<String> = sink.tensors().into_iter().map(|t| t.name).collect();
    /// assert_eq!(names, ["relu1.output"]);
    /// # Ok::<(), smdebug_burn::Error>(())
    /// ```
    pub fn layers<M: Module>(&mut self, model: &M) -> Layers {
        Layers::register(self.adapter_mut(), model)
    }
}

/// The paths of a model's modules: every path burn's visitor enters that is not a parameter.
#[derive(Default)]
struct ModulePaths {
    path: Vec<String>,
    /// Whether a parameter was visited directly at each level of `path`.
    is_param: Vec<bool>,
    modules: Vec<String>,
}

impl ModulePaths {
    fn parameter(&mut self) {
        if let Some(last) = self.is_param.last_mut() {
            *last = true;
        }
    }
}

impl ModuleVisitor for ModulePaths {
    fn enter_module(&mut self, name: &str, _container_type: &str) {
        self.path.push(name.to_string());
        self.is_param.push(false);
    }

    fn exit_module(&mut self, _name: &str, _container_type: &str) {
        let was_param = self.is_param.pop().unwrap_or(true);
        if !was_param {
            self.modules.push(self.path.join("."));
        }
        self.path.pop();
    }

    fn visit_float<const D: usize>(&mut self, _param: &Param<Tensor<D>>) {
        self.parameter();
    }

    fn visit_int<const D: usize>(&mut self, _param: &Param<Tensor<D, Int>>) {
        self.parameter();
    }

    fn visit_bool<const D: usize>(&mut self, _param: &Param<Tensor<D, Bool>>) {
        self.parameter();
    }

    fn visit_flag(&mut self, _flag: &Param<Flag>) {
        self.parameter();
    }
}
