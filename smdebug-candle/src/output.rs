//! Module outputs: a wrapper module that keeps its forward output when the hook says it is due.
//!
//! candle's [`Module::forward`] takes `&self`, so the wrapper cannot reach the hook. Instead the
//! hook arms each wrapper at the start of a step (one atomic flag per wrapper); an armed wrapper
//! keeps a handle on its output (candle tensors are reference-counted, nothing is copied), and the
//! hook saves the kept outputs when the step ends.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use candle_core::{Module, Tensor};

/// Suffix of a wrapped module's output tensor (`relu1` records `relu1.output`).
pub const OUTPUT_SUFFIX: &str = ".output";

#[derive(Default)]
struct TapInner {
    /// Every wrapper's output tensor name and its flag.
    registered: Mutex<Vec<(String, Arc<AtomicBool>)>>,
    /// Outputs kept during the current step, the latest per name.
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

    /// The outputs kept since the last call.
    pub(crate) fn take(&self) -> Vec<(String, Tensor)> {
        self.0
            .kept
            .lock()
            .map(|mut k| std::mem::take(&mut *k))
            .unwrap_or_default()
    }

    fn keep(&self, name: &str, output: &Tensor) {
        if let Ok(mut k) = self.0.kept.lock() {
            match k.iter_mut().find(|(n, _)| n == name) {
                Some((_, t)) => *t = output.clone(),
                None => k.push((name.to_string(), output.clone())),
            }
        }
    }
}

/// A module whose forward output is recorded (as `<name>.output`, collection `outputs`) at the
/// steps where it is due. Built by [`CandleHook::wrap`](crate::CandleHook::wrap); forwards exactly
/// like the module it wraps.
pub struct Recorded<M> {
    module: M,
    tensor_name: String,
    armed: Arc<AtomicBool>,
    tap: OutputTap,
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
}

impl<M: std::fmt::Debug> std::fmt::Debug for Recorded<M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recorded")
            .field("tensor_name", &self.tensor_name)
            .field("module", &self.module)
            .finish()
    }
}

impl<M: Module> Module for Recorded<M> {
    fn forward(&self, xs: &Tensor) -> candle_core::Result<Tensor> {
        let out = self.module.forward(xs)?;
        if self.armed.load(Ordering::Relaxed) {
            self.tap.keep(&self.tensor_name, &out);
        }
        Ok(out)
    }
}
