//! The kit every framework adapter is built from (smdebug-candle, smdebug-burn, smdebug-tch).
//!
//! [`AdapterHook`] is the part of an adapter's hook that does not depend on the framework: the
//! core [`Hook`], the step and mode calls, stop requests, losses, metrics and scalars, closing on
//! drop, and the capture points ([`Probe`]s) that keep tensors met inside a forward pass until the
//! step ends. What differs per framework sits behind the [`Framework`] trait: how a tensor is
//! kept, how a one-element tensor becomes a number, and how the tensors due at a step are read
//! (copied to the host as a [`TensorView`](crate::TensorView), or reduced on their device).
//!
//! An adapter wraps an `AdapterHook<ItsFramework>` in its own hook type, gets the shared calls
//! as inherent methods from [`adapter_hook_methods!`](crate::adapter_hook_methods) (no `Deref`),
//! and adds what only it knows: walking a model's parameters and gradients
//! (asking [`AdapterHook::due`] per tensor, then handing the due ones to
//! [`AdapterHook::record`]), wrapping the framework's module type (a [`ModuleProbe`] per wrapped
//! module), and its backward call.
//!
//! ## Framework spans
//!
//! The hook's [`Timeline`] measures the loop's phases with no timing code in the loop: the
//! step boundary ([`AdapterHook::step`]) gives the step span, [`AdapterHook::data`] times each
//! batch's loading, [`AdapterHook::forward`] and [`AdapterHook::optimizer`] are scopes the loop
//! wraps around its forward pass and optimizer step (for models an adapter cannot wrap), an
//! adapter's backward call is the backward span, and each wrapped module's forward pass is a
//! span of its own while the detailed-profiling window is open ([`ModuleProbe::forward`]; a
//! model whose modules cannot be wrapped calls [`Timeline::module_scope`] in its forward
//! pass). The timeline's windows decide which of them are measured at a step; a closed window
//! costs one atomic load per call.
//!
//! A span is host time: from when the call started to when it returned. On a CPU backend that
//! is the work itself. On a device backend (CUDA, Metal, wgpu) kernels are queued
//! asynchronously, so a span measures the time the host spent issuing the work plus whatever
//! the framework waited for inside the call (a copy to the host, a synchronisation, a full
//! queue), not the device's execution time; the device catches up in a later span, typically
//! the one that reads a result back. To attribute device time to a phase, synchronise the
//! device at the end of the scope (at the cost of the overlap the queue gave). The adapters
//! were tested on CPU backends only.
//!
//! Like the rest of smdebug-core this module does no I/O and starts no threads.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

mod methods;

use crate::collection::{INPUT_SUFFIX, LABELS_SUFFIX, PREDICTIONS_SUFFIX};
use crate::phase::Phase;
use crate::timeline::{TimedIter, Timeline};
use crate::{DueTensor, Hook, HookBuilder, Mode, Sink, StopSignal};

/// Suffix of a module's output tensor (`relu1` records `relu1.output`, in `outputs`).
pub const OUTPUT_SUFFIX: &str = ".output";

/// What an adapter knows about its framework. Implemented once per adapter (for a marker type);
/// [`AdapterHook`] does the rest.
pub trait Framework {
    /// A tensor of the framework, as the adapter hands it over.
    type Tensor;
    /// The adapter's error type. Never a panic: errors go back to the training loop.
    type Error: From<crate::Error> + std::fmt::Display;

    /// A handle on `tensor` to hold until the step ends: it shares the tensor's storage (nothing
    /// is copied) and keeps no autograd graph alive.
    fn keep(tensor: &Self::Tensor) -> Self::Tensor;

    /// The value of a one-element tensor (a loss) as `f64`; `None` when it has more elements.
    /// `name` is the tensor's name, for errors.
    fn scalar(&mut self, name: &str, tensor: &Self::Tensor) -> Result<Option<f64>, Self::Error>;

    /// Records what is due of each tensor in `hook`: reductions computed on the tensor's device
    /// ([`Hook::save_reduction_values`]) when that is all that is due and the framework can, the
    /// tensor copied to the host ([`Hook::save_due`]) otherwise. Returns how many tensors were
    /// recorded; on errors, tries every tensor and returns the first error ([`tally`]).
    fn record(
        &mut self,
        hook: &mut Hook,
        due: Vec<Due<Self::Tensor>>,
    ) -> Result<usize, Self::Error>;
}

/// A tensor that is due at the current step, with what is due of it.
#[derive(Debug)]
pub struct Due<T> {
    /// The name it is recorded under.
    pub name: String,
    /// What is due: the raw tensor, reductions, or both.
    pub due: DueTensor,
    /// The tensor.
    pub tensor: T,
}

/// Adds up outcomes of saving several tensors (whether each was recorded, or how many) after
/// every one of them was tried; the first error, if any, is returned instead of the count.
pub fn tally<N: Into<usize>, E>(
    outcomes: impl IntoIterator<Item = Result<N, E>>,
) -> Result<usize, E> {
    let mut saved = 0;
    let mut first_error = None;
    for outcome in outcomes {
        match outcome {
            Ok(n) => saved += n.into(),
            Err(e) => {
                first_error.get_or_insert(e);
            }
        }
    }
    first_error.map_or(Ok(saved), Err)
}

/// One place in the forward pass whose tensor may be recorded.
#[derive(Debug)]
struct Point {
    /// The name the tensor is recorded under.
    name: String,
    /// The collections it is saved in, besides those whose `include_regex` matches the name.
    collections: Vec<String>,
    armed: AtomicBool,
}

impl Point {
    fn collection_refs(&self) -> Vec<&str> {
        self.collections.iter().map(String::as_str).collect()
    }
}

/// The capture points and what they kept during the current step.
struct Tap<T> {
    /// Every capture point.
    registered: Mutex<Vec<Arc<Point>>>,
    /// Tensors kept during the current step, the latest per point.
    kept: Mutex<Vec<(Arc<Point>, T)>>,
}

impl<T> Tap<T> {
    fn new() -> Self {
        Tap {
            registered: Mutex::new(Vec::new()),
            kept: Mutex::new(Vec::new()),
        }
    }

    fn register(&self, name: String, collections: Vec<String>) -> Arc<Point> {
        let point = Arc::new(Point {
            name,
            collections,
            armed: AtomicBool::new(false),
        });
        if let Ok(mut r) = self.registered.lock() {
            r.push(point.clone());
        }
        point
    }

    /// Arms each point whose tensor `due(name, collections)` says is due now, disarms the rest.
    fn arm(&self, mut due: impl FnMut(&str, &[&str]) -> bool) {
        if let Ok(r) = self.registered.lock() {
            for point in r.iter() {
                let on = due(&point.name, &point.collection_refs());
                point.armed.store(on, Ordering::Relaxed);
            }
        }
    }

    /// The tensors kept since the last call.
    fn take(&self) -> Vec<(Arc<Point>, T)> {
        self.kept
            .lock()
            .map(|mut k| std::mem::take(&mut *k))
            .unwrap_or_default()
    }

    fn keep(&self, point: &Arc<Point>, tensor: T) {
        if let Ok(mut k) = self.kept.lock() {
            match k.iter_mut().find(|(p, _)| Arc::ptr_eq(p, point)) {
                Some(slot) => slot.1 = tensor,
                None => k.push((point.clone(), tensor)),
            }
        }
    }
}

/// A named capture point inside a forward pass, for a tensor the training loop does not hold
/// itself: a module's output, the softmax of an attention layer, a projection, a gate. Built by
/// [`AdapterHook::probe`] and kept by the model; `forward` hands it the tensor with
/// [`record`](Probe::record).
///
/// The tensor is saved under the probe's name exactly, in the collections given when the probe was
/// made plus every collection whose `include_regex` matches the name, at the steps where one of
/// them is due; at other steps `record` is one relaxed atomic load. Clones share the capture point.
pub struct Probe<F: Framework> {
    point: Arc<Point>,
    tap: Arc<Tap<F::Tensor>>,
}

impl<F: Framework> Probe<F> {
    /// The name the tensor is recorded under.
    pub fn name(&self) -> &str {
        &self.point.name
    }

    /// Whether the tensor is due at the current step (what [`record`](Probe::record) will keep).
    /// Lets a model skip computing a tensor that exists only to be recorded.
    pub fn is_armed(&self) -> bool {
        self.point.armed.load(Ordering::Relaxed)
    }

    /// Keeps `tensor` to be saved when the step ends, if it is due; otherwise does nothing. When
    /// called several times in one step (several forward passes), the last tensor is saved.
    pub fn record(&self, tensor: &F::Tensor) {
        if self.is_armed() {
            self.tap.keep(&self.point, F::keep(tensor));
        }
    }
}

impl<F: Framework> Clone for Probe<F> {
    fn clone(&self) -> Self {
        Probe {
            point: self.point.clone(),
            tap: self.tap.clone(),
        }
    }
}

impl<F: Framework> std::fmt::Debug for Probe<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Probe")
            .field("name", &self.point.name)
            .field("collections", &self.point.collections)
            .field("armed", &self.is_armed())
            .finish()
    }
}

/// What a wrapped module holds: the capture point of its output (`<module>.output`, collection
/// `outputs`) and the timeline its forward pass is measured on. Built by
/// [`AdapterHook::module_probe`]; an adapter's module wrapper runs the wrapped module's forward
/// pass through [`forward`](Self::forward). Clones share the capture point.
pub struct ModuleProbe<F: Framework> {
    module: String,
    output: Probe<F>,
    /// The capture point of the module's input (`<module>.input`, collection `inputs`), for the
    /// layers of a registered model ([`AdapterHook::layer_probe`]); wrapped modules have none.
    input: Option<Probe<F>>,
    timeline: Timeline,
}

impl<F: Framework> ModuleProbe<F> {
    /// The module's name (its span's name, and the prefix of its output's tensor name).
    pub fn module(&self) -> &str {
        &self.module
    }

    /// The capture point of the module's output.
    pub fn output(&self) -> &Probe<F> {
        &self.output
    }

    /// Runs the module's forward pass `f`: a span named after the module while the detailed
    /// window is open, and its output kept to be saved when the step ends if it is due. An error
    /// from `f` is returned as it is (nothing is kept).
    pub fn forward<E>(&self, f: impl FnOnce() -> Result<F::Tensor, E>) -> Result<F::Tensor, E> {
        let out = self.timeline.module_scope(&self.module, f)?;
        self.output.record(&out);
        Ok(out)
    }

    /// The module's span alone around `f` (while the detailed window is open), for an adapter
    /// that keeps the module's tensors itself through [`input`](Self::input) and
    /// [`output`](Self::output), converting them first (burn's are made `Flat` only when armed).
    pub fn scope<R>(&self, f: impl FnOnce() -> R) -> R {
        self.timeline.module_scope(&self.module, f)
    }

    /// The capture point of the module's input, for a layer of a registered model.
    pub fn input(&self) -> Option<&Probe<F>> {
        self.input.as_ref()
    }

    /// [`forward`](Self::forward) for a layer whose input is at hand: `input` is kept too when
    /// it is due (a registered layer's `<module>.input`), before `f` runs.
    pub fn forward_from<E>(
        &self,
        input: &F::Tensor,
        f: impl FnOnce() -> Result<F::Tensor, E>,
    ) -> Result<F::Tensor, E> {
        if let Some(probe) = &self.input {
            probe.record(input);
        }
        self.forward(f)
    }
}

impl<F: Framework> Clone for ModuleProbe<F> {
    fn clone(&self) -> Self {
        ModuleProbe {
            module: self.module.clone(),
            output: self.output.clone(),
            input: self.input.clone(),
            timeline: self.timeline.clone(),
        }
    }
}

impl<F: Framework> std::fmt::Debug for ModuleProbe<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModuleProbe")
            .field("module", &self.module)
            .field("output", &self.output)
            .finish_non_exhaustive()
    }
}

/// The framework-independent half of an adapter's hook. See the [module docs](self).
///
/// It owns a [`Hook`] and asks it what is due for each tensor before the framework touches it:
/// steps where nothing is due cost a flag check per call. Errors are returned to the caller and
/// leave the hook usable; nothing here panics. Dropping it without [`close`](Self::close) still
/// publishes the last step and the end marker.
pub struct AdapterHook<F: Framework> {
    hook: Hook,
    framework: F,
    tap: Arc<Tap<F::Tensor>>,
    closed: bool,
}

impl<F: Framework> std::fmt::Debug for AdapterHook<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AdapterHook")
            .field("hook", &self.hook)
            .field("closed", &self.closed)
            .finish_non_exhaustive()
    }
}

impl<F: Framework> AdapterHook<F> {
    /// Builds the hook from a configured [`HookBuilder`] (configuration errors surface here) and
    /// the sink that stores the run (smdebug-io's `Writer`, or a [`MemorySink`](crate::MemorySink)).
    pub fn new(
        builder: HookBuilder,
        sink: impl Sink + 'static,
        framework: F,
    ) -> Result<Self, F::Error> {
        Ok(AdapterHook {
            hook: builder.build(sink)?,
            framework,
            tap: Arc::new(Tap::new()),
            closed: false,
        })
    }

    /// The core hook: mode, step counters, configuration.
    pub fn hook(&self) -> &Hook {
        &self.hook
    }

    /// The core hook, to save host data (`save_tensor` with a `TensorView`) directly.
    pub fn hook_mut(&mut self) -> &mut Hook {
        &mut self.hook
    }

    /// The stop signal the hook watches; hand it to whatever may ask the job to stop (a rule
    /// runner, a `StopWatcher`).
    pub fn stop_signal(&self) -> StopSignal {
        self.hook.stop_signal()
    }

    /// Why, when someone asked this job to stop. Check it once per step.
    pub fn stop_requested(&self) -> Option<crate::StopCause> {
        self.hook.stop_requested()
    }

    /// Whether `name` in `collections` is due now (cheap: a flag when nothing is due this step,
    /// one hash lookup otherwise). Always false once closed.
    pub fn is_due(&mut self, name: &str, collections: &[&str]) -> bool {
        !self.closed && self.hook.is_due(name, collections)
    }

    /// Whether anything at all may be saved at this step; adapters check it before walking a
    /// model. Always false once closed.
    pub fn anything_due(&self) -> bool {
        !self.closed && self.hook.anything_due()
    }

    /// What is due of the tensor `name` in `collections` now, `None` when nothing is (or the hook
    /// is closed). Adapters ask before they touch the tensor, and hand the due ones to
    /// [`record`](Self::record).
    pub fn due(&mut self, name: &str, collections: &[&str]) -> Option<DueTensor> {
        if self.closed {
            return None;
        }
        self.hook.due_tensor(name, collections)
    }

    /// Records tensors found due at this step with [`due`](Self::due), all in one go (the
    /// framework may read them back together). Returns how many were recorded; on errors, the
    /// first one, after every tensor was tried.
    pub fn record(&mut self, due: Vec<Due<F::Tensor>>) -> Result<usize, F::Error> {
        if self.closed || due.is_empty() {
            return Ok(0);
        }
        self.framework.record(&mut self.hook, due)
    }

    /// Saves a framework tensor under `name` in `collections` (plus every collection whose
    /// `include_regex` matches the name) when due. Returns whether anything was recorded.
    pub fn save_tensor(
        &mut self,
        name: &str,
        tensor: &F::Tensor,
        collections: &[&str],
    ) -> Result<bool, F::Error> {
        let Some(due) = self.due(name, collections) else {
            return Ok(false);
        };
        let entry = Due {
            name: name.to_string(),
            due,
            tensor: F::keep(tensor),
        };
        Ok(self.record(vec![entry])? > 0)
    }

    /// Saves a loss in `losses`: a one-element tensor as the scalar `name` (an `f64` of shape
    /// `[]`, as Python smdebug stores it), a larger one as a tensor.
    pub fn save_loss(&mut self, name: &str, loss: &F::Tensor) -> Result<bool, F::Error> {
        if !self.is_due(name, &["losses"]) {
            return Ok(false);
        }
        match self.framework.scalar(name, loss)? {
            Some(value) => Ok(self.hook.save_scalar(name, value, &["losses"])),
            None => self.save_tensor(name, loss, &["losses"]),
        }
    }

    /// Saves a metric (accuracy, …) in `metrics`. Returns whether it was recorded.
    pub fn save_metric(&mut self, name: &str, value: f64) -> bool {
        self.hook.save_scalar(name, value, &["metrics"])
    }

    /// Saves a scalar in the given collections. Returns whether it was recorded.
    pub fn save_scalar(&mut self, name: &str, value: f64, collections: &[&str]) -> bool {
        self.hook.save_scalar(name, value, collections)
    }

    /// A capture point for a tensor computed inside a forward pass, saved under `name` when due,
    /// in `collections` plus every collection whose `include_regex` matches `name`. With no
    /// collections named, only regex collections (and `save_all`) select it, so a model can probe
    /// every layer and the configuration decides which layers are recorded.
    pub fn probe(&mut self, name: &str, collections: &[&str]) -> Probe<F> {
        let collections = collections.iter().map(|c| c.to_string()).collect();
        let point = self.tap.register(name.to_string(), collections);
        self.arm_probes();
        Probe {
            point,
            tap: self.tap.clone(),
        }
    }

    /// The capture point and span of a wrapped module called `module`: its output is saved as
    /// `<module>.output` in `outputs` when due, and its forward pass is a span of its own while
    /// the detailed window is open. Adapters build their module wrappers on it.
    pub fn module_probe(&mut self, module: &str) -> ModuleProbe<F> {
        ModuleProbe {
            module: module.to_string(),
            output: self.probe(&format!("{module}{OUTPUT_SUFFIX}"), &["outputs"]),
            input: None,
            timeline: self.hook.timeline().clone(),
        }
    }

    /// The capture points and span of one layer of a model registered whole (an adapter's
    /// `layers()` builder, burn's `register_model`): like [`module_probe`](Self::module_probe),
    /// and its input is saved as `<layer>.input` in `inputs` when due. Nothing is kept at a
    /// step where neither is due.
    pub fn layer_probe(&mut self, layer: &str) -> ModuleProbe<F> {
        let mut probe = self.module_probe(layer);
        probe.input = Some(self.probe(&format!("{layer}{INPUT_SUFFIX}"), &["inputs"]));
        probe
    }

    /// Saves what a loss was computed from, as Python smdebug's `register_loss` does: the
    /// predictions (scores, or classes) as `<name>.predictions` in `predictions` and the labels
    /// as `<name>.labels` in `labels`, each when due (nothing is copied otherwise). Call it
    /// beside [`save_loss`](Self::save_loss). Returns how many were recorded; on errors, the
    /// first one, after both were tried.
    pub fn save_loss_inputs(
        &mut self,
        name: &str,
        predictions: &F::Tensor,
        labels: &F::Tensor,
    ) -> Result<usize, F::Error> {
        self.save_loss_inputs_with(name, || F::keep(predictions), || F::keep(labels))
    }

    /// [`save_loss_inputs`](Self::save_loss_inputs) for an adapter whose tensors need
    /// converting first (burn's `Int` labels): `predictions` and `labels` make each tensor, and
    /// are called only for one that is due.
    pub fn save_loss_inputs_with(
        &mut self,
        name: &str,
        predictions: impl FnOnce() -> F::Tensor,
        labels: impl FnOnce() -> F::Tensor,
    ) -> Result<usize, F::Error> {
        if !self.anything_due() {
            return Ok(0);
        }
        let mut due = Vec::new();
        let predictions_name = format!("{name}{PREDICTIONS_SUFFIX}");
        if let Some(d) = self.due(&predictions_name, &["predictions"]) {
            due.push(Due {
                name: predictions_name,
                due: d,
                tensor: predictions(),
            });
        }
        let labels_name = format!("{name}{LABELS_SUFFIX}");
        if let Some(d) = self.due(&labels_name, &["labels"]) {
            due.push(Due {
                name: labels_name,
                due: d,
                tensor: labels(),
            });
        }
        self.record(due)
    }

    /// The loop's timeline (off unless the builder was given one): its spans and windows.
    pub fn timeline(&self) -> &Timeline {
        self.hook.timeline()
    }

    /// Wraps the loop's data iterator: each `next()` that yields a batch is a data-loading span
    /// while the data-loading window is open, and the start of the step's span. The iterator
    /// holds no borrow of the hook.
    pub fn data<I: IntoIterator>(&self, batches: I) -> TimedIter<I::IntoIter> {
        self.hook.timeline().data(batches)
    }

    /// Runs the forward pass `f` as the step's forward span (for models the adapter cannot
    /// wrap). Returns what `f` returns.
    pub fn forward<R>(&self, f: impl FnOnce() -> R) -> R {
        self.hook.timeline().scope(Phase::Forward, f)
    }

    /// Runs the optimizer step `f` as the step's optimizer span.
    pub fn optimizer<R>(&self, f: impl FnOnce() -> R) -> R {
        self.hook.timeline().scope(Phase::Optimizer, f)
    }

    /// Runs `f` inside a span of `phase` (an adapter's backward call, a phase of the loop's
    /// own with [`Phase::Custom`]).
    pub fn scope<R>(&self, phase: Phase, f: impl FnOnce() -> R) -> R {
        self.hook.timeline().scope(phase, f)
    }

    /// Switches mode (TRAIN, EVAL, PREDICT); a step with records is closed first. An error saving
    /// a kept tensor is returned after the mode has changed.
    pub fn set_mode(&mut self, mode: Mode) -> Result<(), F::Error> {
        if mode == self.hook.mode() {
            return Ok(());
        }
        let saved = self.save_kept();
        self.hook.set_mode(mode);
        self.arm_probes();
        saved.map(|_| ())
    }

    /// Ends the step: saves what the probes kept, publishes the step and advances the step
    /// counters. An error saving a kept tensor is returned after the step has advanced.
    pub fn step(&mut self) -> Result<(), F::Error> {
        let saved = self.save_kept();
        self.hook.step();
        self.arm_probes();
        saved.map(|_| ())
    }

    /// Ends the run: the last step, the collections and the end marker (with the stop reason, if
    /// one was requested). Closing again does nothing; afterwards nothing is saved.
    pub fn close(&mut self) -> Result<(), F::Error> {
        if self.closed {
            return Ok(());
        }
        let saved = self.save_kept();
        self.hook.close();
        self.closed = true;
        self.arm_probes();
        saved.map(|_| ())
    }

    /// Sets each probe's flag to whether its tensor is due at the current step.
    fn arm_probes(&mut self) {
        let (hook, closed) = (&mut self.hook, self.closed);
        self.tap
            .arm(|name, collections| !closed && hook.is_due(name, collections));
    }

    /// Records the tensors the probes kept during this step.
    fn save_kept(&mut self) -> Result<usize, F::Error> {
        let kept = self.tap.take();
        let mut due = Vec::with_capacity(kept.len());
        for (point, tensor) in kept {
            if let Some(d) = self.due(&point.name, &point.collection_refs()) {
                due.push(Due {
                    name: point.name.clone(),
                    due: d,
                    tensor,
                });
            }
        }
        self.record(due)
    }
}

impl<F: Framework> Drop for AdapterHook<F> {
    /// A hook dropped without `close()` still publishes its last step and the end marker.
    fn drop(&mut self) {
        if let Err(e) = self.close() {
            log::warn!("smdebug: closing the hook on drop: {e}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::timeline::{SpanRecord, SpanSink, TimelineConfig, WindowChange};
    use crate::window::Window;
    use crate::{MemorySink, SaveConfig, TensorView};

    /// A framework whose tensors are host vectors: enough to exercise the kit.
    struct Host;

    impl Framework for Host {
        type Tensor = Vec<f32>;
        type Error = crate::Error;

        fn keep(tensor: &Vec<f32>) -> Vec<f32> {
            tensor.clone()
        }

        fn scalar(&mut self, _name: &str, tensor: &Vec<f32>) -> crate::Result<Option<f64>> {
            Ok(match tensor.as_slice() {
                [v] => Some(f64::from(*v)),
                _ => None,
            })
        }

        fn record(&mut self, hook: &mut Hook, due: Vec<Due<Vec<f32>>>) -> crate::Result<usize> {
            tally(due.into_iter().map(|d| -> crate::Result<bool> {
                let view = TensorView::from_slice(&d.tensor, &[d.tensor.len()])?;
                Ok(hook.save_due(&d.name, &d.due, &view))
            }))
        }
    }

    #[derive(Default)]
    struct Spans(Mutex<Vec<SpanRecord>>);

    impl SpanSink for Spans {
        fn record(&self, span: SpanRecord) {
            self.0.lock().unwrap().push(span);
        }
        fn window_changed(&self, _: WindowChange) {}
    }

    #[test]
    fn the_kits_scopes_and_module_probes_measure_the_loop_and_keep_due_outputs() {
        let spans = Arc::new(Spans::default());
        let config = TimelineConfig {
            detailed: Window::steps(1, 1),
            ..TimelineConfig::default()
        };
        let builder = Hook::builder()
            .save_config(SaveConfig::every(2))
            .timeline(Timeline::new(config, spans.clone()));
        let sink = MemorySink::default();
        let mut hook = AdapterHook::new(builder, sink.clone(), Host).unwrap();
        let relu = hook.module_probe("relu1");
        assert_eq!(relu.output().name(), "relu1.output");
        hook.set_mode(Mode::Train).unwrap();
        for batch in hook.data([1.0f32, 2.0, 3.0]) {
            let out = hook.forward(|| relu.forward(|| Ok::<_, crate::Error>(vec![batch])));
            assert_eq!(out.unwrap(), [batch]);
            let failed = relu.forward(|| Err(crate::Error::Config("relu1 failed".into())));
            assert!(failed.is_err());
            hook.scope(Phase::Backward, || ());
            hook.optimizer(|| ());
            hook.timeline().module_scope("fc2", || ());
            hook.step().unwrap();
        }
        hook.close().unwrap();
        let rows: Vec<(String, String, u64)> = spans
            .0
            .lock()
            .unwrap()
            .iter()
            .map(|s| {
                (
                    s.phase.trace_name().into_owned(),
                    s.name.to_string(),
                    s.step.unwrap().1,
                )
            })
            .collect();
        let at = |step: u64| -> Vec<(String, String)> {
            rows.iter()
                .filter(|r| r.2 == step)
                .map(|r| (r.0.clone(), r.1.clone()))
                .collect()
        };
        let row = |phase: &str, name: &str| (phase.to_string(), name.to_string());
        let (data, forward) = (
            row("DataLoaderIter", "DataLoaderIter::GetNext"),
            row("Forward", "forward"),
        );
        let (backward, optimizer) = (
            row("Backward(post-forward)", "backward"),
            row("Optimizer", "optimizer_step"),
        );
        let step = row("Step:ModeKeys.TRAIN", "Step:ModeKeys.TRAIN");
        let plain = vec![
            data.clone(),
            forward.clone(),
            backward.clone(),
            optimizer.clone(),
            step.clone(),
        ];
        assert_eq!(at(0), plain);
        // Step 1 is the detailed window: relu1 inside the forward span (so it ends first), the
        // failed relu1 call (still measured), and fc2.
        let relu1 = row("Module", "relu1");
        assert_eq!(
            at(1),
            [
                data,
                relu1.clone(),
                forward,
                relu1,
                backward,
                optimizer,
                row("Module", "fc2"),
                step
            ]
        );
        assert_eq!(at(2), plain);
        // Outputs are kept at the due steps only, and a failed forward keeps nothing.
        let kept: Vec<(u64, Vec<f64>)> = sink
            .tensors()
            .into_iter()
            .map(|t| (t.key.step, t.tensor.to_f64_vec()))
            .collect();
        assert_eq!(kept, [(0, vec![1.0]), (2, vec![3.0])]);
    }

    #[test]
    fn tally_tries_everything_and_returns_the_first_error() {
        let all: Vec<Result<bool, &str>> = vec![Ok(true), Err("a"), Ok(true), Err("b")];
        assert_eq!(tally(all), Err("a"));
        assert_eq!(tally([Ok::<_, ()>(2usize), Ok(3)]), Ok(5));
        assert_eq!(tally([Ok::<_, ()>(true), Ok(false), Ok(true)]), Ok(2));
    }

    #[test]
    fn probes_keep_the_last_tensor_of_due_steps_and_are_disarmed_after_close() {
        let sink = MemorySink::default();
        let builder = Hook::builder().save_config(SaveConfig::every(2));
        let mut hook = AdapterHook::new(builder, sink.clone(), Host).unwrap();
        let probe = hook.probe("relu1.output", &["outputs"]);
        for step in 0..3u8 {
            assert_eq!(probe.is_armed(), step % 2 == 0);
            probe.record(&vec![f32::from(step)]);
            probe.record(&vec![f32::from(step), 1.0]);
            hook.step().unwrap();
        }
        hook.close().unwrap();
        assert!(!probe.is_armed() && !hook.is_due("relu1.output", &["outputs"]));
        let got: Vec<(u64, Vec<f64>)> = sink
            .tensors()
            .into_iter()
            .map(|t| (t.key.step, t.tensor.to_f64_vec()))
            .collect();
        assert_eq!(got, vec![(0, vec![0.0, 1.0]), (2, vec![2.0, 1.0])]);
        assert!(!hook.save_tensor("late", &vec![1.0], &["outputs"]).unwrap());
    }

    #[test]
    fn a_layer_keeps_its_input_and_output_and_a_loss_its_inputs_only_when_due() {
        let sink = MemorySink::default();
        // TRAIN steps 0 and 2 are saved, in every collection.
        let builder = Hook::builder().save_config(SaveConfig::every(2));
        let mut hook = AdapterHook::new(builder, sink.clone(), Host).unwrap();
        let fc1 = hook.layer_probe("fc1");
        assert_eq!(fc1.input().map(Probe::name), Some("fc1.input"));
        assert!(hook.module_probe("relu1").input().is_none());
        hook.set_mode(Mode::Train).unwrap();
        for step in 0..3u8 {
            let x = vec![f32::from(step), -1.0];
            let out = fc1.forward_from(&x, || Ok::<_, crate::Error>(vec![2.0 * x[0]]));
            assert_eq!(out.unwrap(), [2.0 * f32::from(step)]);
            let scores = vec![0.1, 0.9, 0.8, 0.2];
            let saved = hook
                .save_loss_inputs("loss", &scores, &vec![1.0, 0.0])
                .unwrap();
            assert_eq!(saved, if step == 1 { 0 } else { 2 }, "step {step}");
            hook.step().unwrap();
        }
        hook.close().unwrap();
        let got: Vec<(String, u64, Vec<usize>)> = sink
            .tensors()
            .into_iter()
            .map(|t| (t.name, t.key.step, t.tensor.shape().to_vec()))
            .collect();
        let mut want = Vec::new();
        for step in [0, 2] {
            want.push(("loss.predictions".to_string(), step, vec![4]));
            want.push(("loss.labels".to_string(), step, vec![2]));
            want.push(("fc1.input".to_string(), step, vec![2]));
            want.push(("fc1.output".to_string(), step, vec![1]));
        }
        let mut got = got;
        got.sort();
        want.sort();
        assert_eq!(got, want);
        let file = hook.hook().collections_file();
        let members = |c: &str| {
            file.collection(c)
                .map(|x| x.tensor_names().iter().cloned().collect::<Vec<_>>())
                .unwrap_or_default()
        };
        assert_eq!(members("labels"), ["loss.labels"]);
        assert_eq!(members("predictions"), ["loss.predictions"]);
        assert_eq!(members("inputs"), ["fc1.input"]);
    }
}
