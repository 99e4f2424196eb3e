//! Module outputs: a wrapper module that keeps its forward output when the hook says it is due.
//!
//! tch's [`Module::forward`](tch::nn::Module::forward) takes `&self` and has no forward hooks, so
//! the wrapper cannot reach the hook. The hook arms each wrapper at the start of a step (one
//! atomic flag per wrapper); an armed wrapper keeps a shallow clone of its output (libtorch
//! tensors are reference-counted: nothing is copied), and the hook saves the kept outputs when
//! the step ends.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use tch::Tensor;
use tch::nn::{Module, ModuleT};

/// Suffix of a wrapped module's output tensor (`relu1` records `relu1.output`).
pub const OUTPUT_SUFFIX: &str = ".output";

#[derive(Default)]
struct TapInner {
    registered: Mutex<Vec<(String, Arc<AtomicBool>)>>,
    kept: Mutex<Vec<(String, Tensor)>>,
}

/// The link between [`Recorded`] modules and the hook that saves their outputs.
#[derive(Clone, Default)]
pub(crate) struct OutputTap(Arc<TapInner>);

impl OutputTap {
    pub(crate) fn register(&self, tensor_name: String) -> Arc<AtomicBool> {
        let flag = Arc::new(AtomicBool::new(false));
        if let Ok(mut r) = self.0.registered.lock() {
            r.push((tensor_name, flag.clone()));
        }
        flag
    }

    /// Sets each wrapper's flag to `due(name)`.
    pub(crate) fn arm(&self, mut due: impl FnMut(&str) -> bool) {
        if let Ok(r) = self.0.registered.lock() {
            for (name, flag) in r.iter() {
                flag.store(due(name), Ordering::Relaxed);
            }
        }
    }

    /// The outputs kept since the last call (the latest per name).
    pub(crate) fn take(&self) -> Vec<(String, Tensor)> {
        self.0
            .kept
            .lock()
            .map(|mut k| std::mem::take(&mut *k))
            .unwrap_or_default()
    }

    fn keep(&self, name: &str, output: &Tensor) {
        if let Ok(mut k) = self.0.kept.lock() {
            let kept = output.shallow_clone();
            match k.iter_mut().find(|(n, _)| n == name) {
                Some((_, t)) => *t = kept,
                None => k.push((name.to_string(), kept)),
            }
        }
    }
}

/// A module whose forward output is recorded (as `<name>.output`, collection `outputs`) at the
/// steps where it is due. Built by [`TchHook::wrap`](crate::TchHook::wrap); forwards exactly like
/// the module it wraps.
pub struct Recorded<M> {
    module: M,
    tensor_name: String,
    armed: Arc<AtomicBool>,
    tap: OutputTap,
}

// `Module` requires `Send`: the tap's tensors sit behind a mutex, and tch marks `Tensor` `Send`.
impl<M: std::fmt::Debug> std::fmt::Debug for Recorded<M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recorded")
            .field("name", &self.tensor_name)
            .field("module", &self.module)
            .finish()
    }
}

impl<M> Recorded<M> {
    pub(crate) fn new(module: M, tensor_name: String, tap: OutputTap) -> Self {
        let armed = tap.register(tensor_name.clone());
        Recorded {
            module,
            tensor_name,
            armed,
            tap,
        }
    }

    /// The wrapped module.
    pub fn inner(&self) -> &M {
        &self.module
    }

    /// The name its output is recorded under.
    pub fn tensor_name(&self) -> &str {
        &self.tensor_name
    }

    fn observe(&self, output: Tensor) -> Tensor {
        if self.armed.load(Ordering::Relaxed) {
            self.tap.keep(&self.tensor_name, &output);
        }
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
