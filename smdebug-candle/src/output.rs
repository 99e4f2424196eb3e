//! Tensors recorded from inside a forward pass: a wrapper module that keeps its forward output, and
//! a probe that keeps whatever intermediate tensor it is handed (attention scores, projections).
//!
//! candle's [`Module::forward`] takes `&self`, so neither can reach the hook. Instead the hook arms
//! each capture point at the start of a step (one atomic flag per point, set to whether its tensor
//! is due); an armed point keeps a detached handle on its tensor (candle tensors are
//! reference-counted, nothing is copied and the autograd graph is not held), and the hook saves
//! the kept tensors when the step ends.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use candle_core::{Module, Tensor};

/// Suffix of a wrapped module's output tensor (`relu1` records `relu1.output`).
pub const OUTPUT_SUFFIX: &str = ".output";

/// One place in the forward pass whose tensor may be recorded.
#[derive(Debug)]
pub(crate) struct Point {
    /// The tensor name it is recorded under.
    pub(crate) name: String,
    /// The collections it is saved in, besides those whose `include_regex` matches the name.
    pub(crate) collections: Vec<String>,
    armed: AtomicBool,
}

impl Point {
    pub(crate) fn collection_refs(&self) -> Vec<&str> {
        self.collections.iter().map(String::as_str).collect()
    }

    fn is_armed(&self) -> bool {
        self.armed.load(Ordering::Relaxed)
    }
}

#[derive(Default)]
struct TapInner {
    /// Every capture point.
    registered: Mutex<Vec<Arc<Point>>>,
    /// Tensors kept during the current step, the latest per name.
    kept: Mutex<Vec<(Arc<Point>, Tensor)>>,
}

/// The link between the capture points ([`Recorded`], [`Probe`]) and the hook that saves what
/// they keep.
#[derive(Clone, Default)]
pub(crate) struct OutputTap(Arc<TapInner>);

impl OutputTap {
    pub(crate) fn register(&self, name: String, collections: Vec<String>) -> Arc<Point> {
        let point = Arc::new(Point {
            name,
            collections,
            armed: AtomicBool::new(false),
        });
        if let Ok(mut r) = self.0.registered.lock() {
            r.push(point.clone());
        }
        point
    }

    /// Arms each point whose tensor `due(name, collections)` says is due now, disarms the rest.
    pub(crate) fn arm(&self, mut due: impl FnMut(&str, &[&str]) -> bool) {
        if let Ok(r) = self.0.registered.lock() {
            for point in r.iter() {
                let on = due(&point.name, &point.collection_refs());
                point.armed.store(on, Ordering::Relaxed);
            }
        }
    }

    /// The tensors kept since the last call.
    pub(crate) fn take(&self) -> Vec<(Arc<Point>, Tensor)> {
        self.0
            .kept
            .lock()
            .map(|mut k| std::mem::take(&mut *k))
            .unwrap_or_default()
    }

    fn keep(&self, point: &Arc<Point>, tensor: &Tensor) {
        // Only the values are needed; a detached handle shares the storage but lets the autograd
        // graph behind the tensor go as soon as the training loop drops it.
        let tensor = tensor.detach();
        if let Ok(mut k) = self.0.kept.lock() {
            match k.iter_mut().find(|(p, _)| p.name == point.name) {
                Some(slot) => *slot = (point.clone(), tensor),
                None => k.push((point.clone(), tensor)),
            }
        }
    }
}

/// A module whose forward output is recorded (as `<name>.output`, collection `outputs`) at the
/// steps where it is due. Built by [`CandleHook::wrap`](crate::CandleHook::wrap); forwards exactly
/// like the module it wraps.
pub struct Recorded<M> {
    module: M,
    point: Arc<Point>,
    tap: OutputTap,
}

impl<M> Recorded<M> {
    pub(crate) fn new(module: M, tensor_name: String, tap: OutputTap) -> Self {
        let point = tap.register(tensor_name, vec!["outputs".to_string()]);
        Recorded { module, point, tap }
    }

    /// The wrapped module.
    pub fn inner(&self) -> &M {
        &self.module
    }

    /// The name its output is recorded under.
    pub fn tensor_name(&self) -> &str {
        &self.point.name
    }
}

impl<M: std::fmt::Debug> std::fmt::Debug for Recorded<M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recorded")
            .field("tensor_name", &self.point.name)
            .field("module", &self.module)
            .finish()
    }
}

impl<M: Module> Module for Recorded<M> {
    fn forward(&self, xs: &Tensor) -> candle_core::Result<Tensor> {
        let out = self.module.forward(xs)?;
        if self.point.is_armed() {
            self.tap.keep(&self.point, &out);
        }
        Ok(out)
    }
}

/// A named capture point inside a forward pass, for tensors that are not a module's output: the
/// softmax of an attention layer, its query and key projections, a gate, a residual. Built by
/// [`CandleHook::probe`](crate::CandleHook::probe) and held by the model; `forward` hands it the
/// tensor with [`record`](Probe::record).
///
/// The tensor is saved under the probe's name exactly, in the collections given when the probe was
/// made plus every collection whose `include_regex` matches the name, at the steps where one of
/// them is due; at other steps `record` is one relaxed atomic load. Clones share the capture point.
#[derive(Clone)]
pub struct Probe {
    point: Arc<Point>,
    tap: OutputTap,
}

impl Probe {
    pub(crate) fn new(name: String, collections: Vec<String>, tap: OutputTap) -> Self {
        let point = tap.register(name, collections);
        Probe { point, tap }
    }

    /// The name the tensor is recorded under.
    pub fn name(&self) -> &str {
        &self.point.name
    }

    /// Whether the tensor is due at the current step (what [`record`](Probe::record) will keep).
    /// Lets a model skip computing a tensor that exists only to be recorded.
    pub fn is_armed(&self) -> bool {
        self.point.is_armed()
    }

    /// Keeps `tensor` to be saved when the step ends, if it is due; otherwise does nothing. When
    /// called several times in one step (several forward passes), the last tensor is saved.
    pub fn record(&self, tensor: &Tensor) {
        if self.point.is_armed() {
            self.tap.keep(&self.point, tensor);
        }
    }
}

impl std::fmt::Debug for Probe {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Probe")
            .field("name", &self.point.name)
            .field("collections", &self.point.collections)
            .field("armed", &self.point.is_armed())
            .finish()
    }
}
