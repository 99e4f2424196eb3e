//! [`TchHook`]: a [`Hook`] that takes tch tensors, walks a [`VarStore`], and records the outputs
//! of the modules it wraps.

use smdebug_core::{Hook, HookBuilder, Mode, Sink, StopSignal, TensorView};
use tch::Tensor;
use tch::nn::VarStore;

use crate::error::{Error, Result};
use crate::host::to_host;
use crate::output::{OUTPUT_SUFFIX, OutputTap, Recorded, RecordedT};
use crate::reduce;

pub use smdebug_core::collection::GRADIENT_PREFIX;

pub use smdebug_core::collection::parameter_collection;

/// The capture hook of a tch training loop.
///
/// It owns a [`Hook`] and asks it, per tensor, what is due at the current step
/// ([`Hook::due_tensor`]): nothing (no libtorch call at all), only reductions (computed on the
/// tensor's device; only the scalars cross to the host), or the tensor itself (copied to the
/// host with the others of the same call: one transfer per element type, not one per tensor).
/// Errors are returned to the caller and leave the hook usable; nothing here panics.
pub struct TchHook {
    hook: Hook,
    tap: OutputTap,
    closed: bool,
}

impl std::fmt::Debug for TchHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TchHook").field("hook", &self.hook).finish()
    }
}

impl TchHook {
    /// Builds the hook (configuration errors surface here) over `sink` (smdebug-io's `Writer`
    /// in a real run).
    pub fn new(builder: HookBuilder, sink: impl Sink + 'static) -> Result<TchHook> {
        let mut hook = TchHook {
            hook: builder.build(sink)?,
            tap: OutputTap::default(),
            closed: false,
        };
        hook.arm_outputs();
        Ok(hook)
    }

    /// The core hook (mode, steps, configuration).
    pub fn hook(&self) -> &Hook {
        &self.hook
    }

    /// The core hook, for tensors that are not tch tensors.
    pub fn hook_mut(&mut self) -> &mut Hook {
        &mut self.hook
    }

    /// The stop signal a rule runner (or a `StopWatcher`) sets.
    pub fn stop_signal(&self) -> StopSignal {
        self.hook.stop_signal()
    }

    /// The reason, when someone asked this job to stop. Check it once per step.
    pub fn stop_requested(&self) -> Option<String> {
        self.hook.stop_requested()
    }

    /// Wraps a module so its forward output is recorded as `<name>.output` (collection
    /// `outputs`) at the steps where that is due.
    pub fn wrap<M: tch::nn::Module>(&mut self, name: &str, module: M) -> Recorded<M> {
        let r = Recorded::new(module, format!("{name}{OUTPUT_SUFFIX}"), self.tap.clone());
        self.arm_outputs();
        r
    }

    /// Like [`wrap`](Self::wrap), for modules with a train flag (`ModuleT`: dropout, batch norm).
    pub fn wrap_t<M: tch::nn::ModuleT>(&mut self, name: &str, module: M) -> RecordedT<M> {
        let r = RecordedT::new(Recorded::new(
            module,
            format!("{name}{OUTPUT_SUFFIX}"),
            self.tap.clone(),
        ));
        self.arm_outputs();
        r
    }

    /// Switches mode (train, eval, predict); the step in progress is closed first if it recorded
    /// anything.
    pub fn set_mode(&mut self, mode: Mode) -> Result<()> {
        if mode == self.hook.mode() {
            return Ok(());
        }
        let saved = self.save_outputs();
        self.hook.set_mode(mode);
        self.arm_outputs();
        saved.map(|_| ())
    }

    /// Ends the step: saves the outputs kept by wrapped modules, publishes the step and moves to
    /// the next one.
    pub fn step(&mut self) -> Result<()> {
        let saved = self.save_outputs();
        self.hook.step();
        self.arm_outputs();
        saved.map(|_| ())
    }

    /// Ends the run: publishes the last step and writes the end marker (with the stop reason,
    /// if one was requested).
    pub fn close(&mut self) -> Result<()> {
        if self.closed {
            return Ok(());
        }
        let saved = self.save_outputs();
        self.hook.close();
        self.closed = true;
        saved.map(|_| ())
    }

    /// Saves a tch tensor under `name` in `collections` when due. Returns whether anything was
    /// recorded.
    pub fn save_tensor(
        &mut self,
        name: &str,
        tensor: &Tensor,
        collections: &[&str],
    ) -> Result<bool> {
        let saved = self.save_batch(
            vec![(name.to_string(), tensor.shallow_clone())],
            collections,
        )?;
        Ok(saved > 0)
    }

    /// Saves every variable of `vs` that is due, under its hierarchical name (`fc1.weight`), in
    /// `weights` or `biases` (see [`parameter_collection`]). Returns how many were recorded.
    pub fn save_parameters(&mut self, vs: &VarStore) -> Result<usize> {
        if self.closed || !self.hook.anything_due() {
            return Ok(0);
        }
        let mut saved = 0;
        let mut first_error = None;
        for collection in ["weights", "biases"] {
            let batch: Vec<(String, Tensor)> = sorted(vs)
                .into_iter()
                .filter(|(n, _)| parameter_collection(n) == collection)
                .collect();
            match self.save_batch(batch, &[collection]) {
                Ok(n) => saved += n,
                Err(e) => {
                    first_error.get_or_insert(e);
                }
            }
        }
        first_error.map_or(Ok(saved), Err)
    }

    /// Saves the gradient of every variable of `vs` that has one (call it after `backward()` and
    /// before the optimizer step, which zeroes them in `zero_grad`), as `gradient/<name>` in
    /// `gradients`. Returns how many were recorded.
    pub fn save_gradients(&mut self, vs: &VarStore) -> Result<usize> {
        if self.closed || !self.hook.anything_due() {
            return Ok(0);
        }
        let batch: Vec<(String, Tensor)> = sorted(vs)
            .into_iter()
            .filter_map(|(name, var)| {
                let grad = var.grad();
                grad.defined()
                    .then(|| (format!("{GRADIENT_PREFIX}{name}"), grad))
            })
            .collect();
        self.save_batch(batch, &["gradients"])
    }

    /// Saves a loss tensor (one element) as the scalar `name` in `losses`.
    pub fn save_loss(&mut self, name: &str, loss: &Tensor) -> Result<bool> {
        if self.closed || !self.hook.is_due(name, &["losses"]) {
            return Ok(false);
        }
        if loss.numel() == 1 {
            let value = loss
                .f_double_value(&[])
                .or_else(|_| loss.f_reshape([-1]).and_then(|l| l.f_double_value(&[0])))
                .map_err(|source| Error::Torch {
                    tensor: name.to_string(),
                    source,
                })?;
            return Ok(self.hook.save_scalar(name, value, &["losses"]));
        }
        self.save_tensor(name, loss, &["losses"])
    }

    /// Saves a metric (accuracy, …) in `metrics`.
    pub fn save_metric(&mut self, name: &str, value: f64) -> bool {
        self.hook.save_scalar(name, value, &["metrics"])
    }

    /// Saves a scalar in the given collections.
    pub fn save_scalar(&mut self, name: &str, value: f64, collections: &[&str]) -> bool {
        self.hook.save_scalar(name, value, collections)
    }

    /// Records what is due of each tensor: reductions on the device for tensors that need only
    /// reductions, one batched host copy for the others. Returns how many tensors were recorded;
    /// the first error is returned after the rest were tried.
    fn save_batch(&mut self, batch: Vec<(String, Tensor)>, collections: &[&str]) -> Result<usize> {
        if self.closed {
            return Ok(0);
        }
        let mut saved = 0;
        let mut first_error = None;
        let mut to_copy = Vec::new();
        let mut plans = Vec::new();
        for (name, tensor) in batch {
            let Some(due) = self.hook.due_tensor(&name, collections) else {
                continue;
            };
            if due.reductions_only() {
                match reduce::compute(&name, &tensor, &due.reductions) {
                    Ok(values) => {
                        saved += usize::from(self.hook.save_reduction_values(&name, &due, &values));
                    }
                    Err(e) => {
                        first_error.get_or_insert(e);
                    }
                }
            } else {
                plans.push(due);
                to_copy.push((name, tensor));
            }
        }
        for ((host, (name, _)), due) in to_host(&to_copy).into_iter().zip(&to_copy).zip(&plans) {
            let result = host.and_then(|h| {
                let view = TensorView::from_bytes(h.dtype, &h.shape, &h.bytes)?;
                Ok(self.hook.save_due(name, due, &view))
            });
            match result {
                Ok(s) => saved += usize::from(s),
                Err(e) => {
                    first_error.get_or_insert(e);
                }
            }
        }
        first_error.map_or(Ok(saved), Err)
    }

    fn arm_outputs(&mut self) {
        let hook = &mut self.hook;
        self.tap.arm(|name| hook.is_due(name, &["outputs"]));
    }

    fn save_outputs(&mut self) -> Result<usize> {
        let kept = self.tap.take();
        if kept.is_empty() {
            return Ok(0);
        }
        self.save_batch(kept, &["outputs"])
    }
}

/// The store's variables sorted by name (a `HashMap` has no order; files and tests want one).
fn sorted(vs: &VarStore) -> Vec<(String, Tensor)> {
    let mut vars: Vec<(String, Tensor)> = vs.variables().into_iter().collect();
    vars.sort_unstable_by(|a, b| a.0.cmp(&b.0));
    vars
}

impl Drop for TchHook {
    /// A hook dropped without `close()` still publishes its last step and the end marker.
    fn drop(&mut self) {
        let _ = self.close();
    }
}
