//! [`CandleHook`]: a [`Hook`] that takes candle tensors, walks a [`VarMap`] and a [`GradStore`],
//! and records the outputs of the modules it wraps.

use candle_core::backprop::GradStore;
use candle_core::{Module, Tensor, Var};
use candle_nn::VarMap;
use smdebug_core::{Hook, HookBuilder, Mode, Sink, StopSignal};

use crate::error::{Error, Result};
use crate::host::with_host_view;
use crate::output::{OUTPUT_SUFFIX, OutputTap, Probe, Recorded};
use crate::reduce;

pub use smdebug_core::collection::GRADIENT_PREFIX;

pub use smdebug_core::collection::parameter_collection;

/// The capture hook of a candle training loop.
///
/// It owns a [`Hook`] and asks it what is due for each tensor ([`Hook::due_tensor`]): tensors
/// that are due whole are copied off the device once and handed to the hook; when a tensor's
/// collections ask only for reductions that candle can compute, the reductions run on the device
/// and only the scalars are copied and handed over ([`Hook::save_reduction_values`]).
///
/// Every `save_*` method first asks the hook whether the tensor is due (a flag when nothing is due
/// this step, one hash lookup otherwise) and does nothing else when it is not. Errors are returned
/// to the caller and leave the hook usable; nothing here panics.
pub struct CandleHook {
    hook: Hook,
    tap: OutputTap,
    closed: bool,
}

impl std::fmt::Debug for CandleHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CandleHook")
            .field("hook", &self.hook)
            .finish_non_exhaustive()
    }
}

impl CandleHook {
    /// Builds the hook from a configured [`HookBuilder`] and the sink that stores the run
    /// (smdebug-io's `Writer`, or a `MemorySink`).
    pub fn new(builder: HookBuilder, sink: impl Sink + 'static) -> Result<CandleHook> {
        Ok(CandleHook {
            hook: builder.build(sink)?,
            tap: OutputTap::default(),
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

    /// The stop signal the hook watches; hand it to whatever may ask the job to stop.
    pub fn stop_signal(&self) -> StopSignal {
        self.hook.stop_signal()
    }

    /// The reason, when someone asked this job to stop. Check it once per step.
    pub fn stop_requested(&self) -> Option<String> {
        self.hook.stop_requested()
    }

    /// Whether `name` in `collections` is due now (cheap; adapters' own tensors are checked with
    /// it before anything is copied).
    pub fn is_due(&mut self, name: &str, collections: &[&str]) -> bool {
        self.hook.is_due(name, collections)
    }

    /// Wraps `module` so that its forward output is recorded as `<name>.output` (collection
    /// `outputs`) whenever that tensor is due.
    pub fn wrap<M: Module>(&mut self, name: &str, module: M) -> Recorded<M> {
        let tensor_name = format!("{name}{OUTPUT_SUFFIX}");
        let wrapped = Recorded::new(module, tensor_name, self.tap.clone());
        self.arm_outputs();
        wrapped
    }

    /// A capture point for a tensor computed inside a forward pass (attention scores, a query
    /// projection, …): the model keeps the [`Probe`] and calls [`Probe::record`] on the tensor.
    /// It is saved under `name` when due, in `collections` plus every collection whose
    /// `include_regex` matches `name`. With no collections named, only regex collections (and
    /// `save_all`) select it, so a model can probe every layer and the configuration decides
    /// which layers are recorded:
    ///
    /// ```
    /// # use candle_core::{Device, Tensor};
    /// # use smdebug_candle::CandleHook;
    /// # use smdebug_core::{Hook, MemorySink, SaveConfig};
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let sink = MemorySink::default();
    /// let builder = Hook::builder()
    ///     .save_config(SaveConfig::every(1))
    ///     .include_regex("attention", r"^layer0/attn/scores$");
    /// let mut hook = CandleHook::new(builder, sink.clone())?;
    /// let probes = [hook.probe("layer0/attn/scores", &[]), hook.probe("layer1/attn/scores", &[])];
    /// assert!(probes[0].is_armed() && !probes[1].is_armed());
    /// for p in &probes {
    ///     p.record(&Tensor::ones((2, 2), candle_core::DType::F32, &Device::Cpu)?);
    /// }
    /// hook.step()?;
    /// let names: Vec<String> = sink.tensors().into_iter().map(|t| t.name).collect();
    /// assert_eq!(names, ["layer0/attn/scores"]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn probe(&mut self, name: &str, collections: &[&str]) -> Probe {
        let collections = collections.iter().map(|c| c.to_string()).collect();
        let probe = Probe::new(name.to_string(), collections, self.tap.clone());
        self.arm_outputs();
        probe
    }

    /// Switches mode (TRAIN, EVAL, PREDICT); a step with records is closed first.
    pub fn set_mode(&mut self, mode: Mode) -> Result<()> {
        if mode == self.hook.mode() {
            return Ok(());
        }
        let saved = self.save_outputs();
        self.hook.set_mode(mode);
        self.arm_outputs();
        saved.map(|_| ())
    }

    /// Ends the step: saves the outputs the wrapped modules and the probes kept, publishes the step and advances
    /// the step counters. An error saving an output is returned after the step has advanced.
    pub fn step(&mut self) -> Result<()> {
        let saved = self.save_outputs();
        self.hook.step();
        self.arm_outputs();
        saved.map(|_| ())
    }

    /// Ends the run: the last step, the collections and the end marker.
    pub fn close(&mut self) -> Result<()> {
        if self.closed {
            return Ok(());
        }
        let saved = self.save_outputs();
        self.hook.close();
        self.closed = true;
        self.arm_outputs();
        saved.map(|_| ())
    }

    /// Saves a candle tensor under `name` in `collections` when due. Returns whether anything was
    /// recorded.
    pub fn save_tensor(
        &mut self,
        name: &str,
        tensor: &Tensor,
        collections: &[&str],
    ) -> Result<bool> {
        if self.closed {
            return Ok(false);
        }
        let Some(due) = self.hook.due_tensor(name, collections) else {
            return Ok(false);
        };
        if due.reductions_only() && reduce::on_device(&due.reductions) {
            let values = reduce::compute(name, tensor, &due.reductions)?;
            return Ok(self.hook.save_reduction_values(name, &due, &values));
        }
        let hook = &mut self.hook;
        with_host_view(name, tensor, |view| hook.save_due(name, &due, view))
    }

    /// Saves every variable of `varmap` that is due, under its hierarchical name (`fc1.weight`),
    /// in `weights` or `biases` (see [`parameter_collection`]). Returns how many were recorded.
    pub fn save_parameters(&mut self, varmap: &VarMap) -> Result<usize> {
        let due = self.due_vars(varmap, "", parameter_collection)?;
        let mut saved = 0;
        let mut first_error = None;
        for (name, collection, var) in &due {
            match self.save_tensor(name, var.as_tensor(), &[collection]) {
                Ok(s) => saved += usize::from(s),
                Err(e) => {
                    first_error.get_or_insert(e);
                }
            }
        }
        first_error.map_or(Ok(saved), Err)
    }

    /// Saves the gradient of every variable of `varmap` found in `grads` (call it after
    /// `backward()` and before the optimizer step), as `gradient/<name>` in `gradients`.
    /// Returns how many were recorded.
    pub fn save_gradients(&mut self, varmap: &VarMap, grads: &GradStore) -> Result<usize> {
        let due = self.due_vars(varmap, GRADIENT_PREFIX, |_| "gradients")?;
        let mut saved = 0;
        let mut first_error = None;
        for (name, collection, var) in &due {
            let Some(grad) = grads.get(var.as_tensor()) else {
                continue;
            };
            match self.save_tensor(name, grad, &[collection]) {
                Ok(s) => saved += usize::from(s),
                Err(e) => {
                    first_error.get_or_insert(e);
                }
            }
        }
        first_error.map_or(Ok(saved), Err)
    }

    /// Saves a loss tensor (one element) as the scalar `name` in `losses`.
    pub fn save_loss(&mut self, name: &str, loss: &Tensor) -> Result<bool> {
        if self.closed || !self.hook.is_due(name, &["losses"]) {
            return Ok(false);
        }
        let value = loss
            .to_dtype(candle_core::DType::F64)
            .and_then(|l| l.flatten_all())
            .and_then(|l| l.to_vec1::<f64>())
            .map_err(|source| Error::Candle {
                tensor: name.to_string(),
                source,
            })?;
        match value.as_slice() {
            [v] => Ok(self.hook.save_scalar(name, *v, &["losses"])),
            _ => self.save_tensor(name, loss, &["losses"]),
        }
    }

    /// Saves a metric (accuracy, …) in `metrics`.
    pub fn save_metric(&mut self, name: &str, value: f64) -> bool {
        self.hook.save_scalar(name, value, &["metrics"])
    }

    /// Saves a scalar in the given collections.
    pub fn save_scalar(&mut self, name: &str, value: f64, collections: &[&str]) -> bool {
        self.hook.save_scalar(name, value, collections)
    }

    /// The variables whose tensor (`<prefix><name>`, in the collection `collection_of(name)`)
    /// is due now, sorted by name. Nothing is cloned for variables that are not due.
    fn due_vars(
        &mut self,
        varmap: &VarMap,
        prefix: &str,
        collection_of: fn(&str) -> &'static str,
    ) -> Result<Vec<(String, &'static str, Var)>> {
        if self.closed || !self.hook.anything_due() {
            return Ok(Vec::new());
        }
        let data = varmap.data().lock().map_err(|_| Error::PoisonedVarMap)?;
        let mut due = Vec::new();
        let mut name = String::from(prefix);
        for (var_name, var) in data.iter() {
            name.truncate(prefix.len());
            name.push_str(var_name);
            let collection = collection_of(var_name);
            if self.hook.is_due(&name, &[collection]) {
                due.push((name.clone(), collection, var.clone()));
            }
        }
        due.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        Ok(due)
    }

    fn arm_outputs(&mut self) {
        let (hook, closed) = (&mut self.hook, self.closed);
        self.tap
            .arm(|name, collections| !closed && hook.is_due(name, collections));
    }

    fn save_outputs(&mut self) -> Result<usize> {
        let mut saved = 0;
        let mut first_error = None;
        for (point, tensor) in self.tap.take() {
            match self.save_tensor(&point.name, &tensor, &point.collection_refs()) {
                Ok(s) => saved += usize::from(s),
                Err(e) => {
                    first_error.get_or_insert(e);
                }
            }
        }
        first_error.map_or(Ok(saved), Err)
    }
}

impl Drop for CandleHook {
    /// A hook dropped without `close()` still publishes its last step and the end marker.
    fn drop(&mut self) {
        let _ = self.close();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::Device;
    use smdebug_core::{
        Collection, MemorySink, Record, Reduction, ReductionConfig, ReductionOp, SaveConfig,
        StepKey,
    };

    #[test]
    fn steps_holding_only_device_reductions_are_ended_once_and_never_mix_modes() {
        let sink = MemorySink::default();
        let builder = Hook::builder()
            .save_config(SaveConfig::every(1))
            .collection(Collection::new("weights").with_reductions(
                ReductionConfig::reductions_only([Reduction::new(ReductionOp::Mean)]),
            ));
        let mut hook = CandleHook::new(builder, sink.clone()).unwrap();
        let w = Tensor::new(&[1.0f32, 3.0], &Device::Cpu).unwrap();
        hook.set_mode(Mode::Train).unwrap();
        assert!(hook.save_tensor("fc.weight", &w, &["weights"]).unwrap());
        hook.step().unwrap();
        assert!(hook.save_tensor("fc.weight", &w, &["weights"]).unwrap());
        // Switching mode closes step 1, which only the adapter wrote to.
        hook.set_mode(Mode::Eval).unwrap();
        assert!(hook.save_tensor("fc.weight", &w, &["weights"]).unwrap());
        hook.close().unwrap();
        let records = sink.records.lock().unwrap().clone();
        let ends: Vec<u64> = records
            .iter()
            .filter_map(|r| match r {
                Record::EndStep { step } => Some(*step),
                _ => None,
            })
            .collect();
        assert_eq!(ends, vec![0, 1, 2]);
        let keys: Vec<(StepKey, f64)> = sink
            .tensors()
            .iter()
            .map(|t| (t.key, t.tensor.to_f64_vec()[0]))
            .collect();
        let key = |step, mode, mode_step| StepKey {
            step,
            mode,
            mode_step,
        };
        assert_eq!(
            keys,
            vec![
                (key(0, Mode::Train, 0), 2.0),
                (key(1, Mode::Train, 1), 2.0),
                (key(2, Mode::Eval, 0), 2.0)
            ]
        );
        assert!(matches!(records.last(), Some(Record::Close(_))));
        assert!(
            sink.tensors()
                .iter()
                .all(|t| t.name == "smdebug/reductions/mean/fc.weight")
        );
    }

    #[test]
    fn a_collection_on_its_own_schedule_is_walked_when_the_default_is_never_due() {
        use candle_nn::{Module as _, VarBuilder};
        use smdebug_core::SaveConfigMode;
        let sink = MemorySink::default();
        let builder = Hook::builder()
            .save_config(SaveConfig::new(SaveConfigMode::never()))
            .collection(Collection::new("gradients").with_save_config(SaveConfig::every(3)));
        let mut hook = CandleHook::new(builder, sink.clone()).unwrap();
        let varmap = VarMap::new();
        let vb = VarBuilder::from_varmap(&varmap, candle_core::DType::F32, &Device::Cpu);
        let fc = candle_nn::linear(2, 1, vb.pp("fc")).unwrap();
        let x = Tensor::ones((1, 2), candle_core::DType::F32, &Device::Cpu).unwrap();
        for _ in 0..5 {
            let grads = fc
                .forward(&x)
                .unwrap()
                .sum_all()
                .unwrap()
                .backward()
                .unwrap();
            assert_eq!(hook.save_parameters(&varmap).unwrap(), 0);
            hook.save_gradients(&varmap, &grads).unwrap();
            hook.step().unwrap();
        }
        let got: Vec<(u64, String)> = sink
            .tensors()
            .into_iter()
            .map(|t| (t.key.step, t.name))
            .collect();
        let want: Vec<(u64, String)> = [0, 3]
            .into_iter()
            .flat_map(|s| {
                [
                    (s, "gradient/fc.bias".into()),
                    (s, "gradient/fc.weight".into()),
                ]
            })
            .collect();
        assert_eq!(got, want);
    }

    #[test]
    fn probes_save_the_last_tensor_of_a_due_step_in_named_and_regex_collections() {
        let sink = MemorySink::default();
        let builder = Hook::builder()
            .save_config(SaveConfig::every(2))
            .include_regex("attention", "^l0/");
        let mut hook = CandleHook::new(builder, sink.clone()).unwrap();
        let regex = hook.probe("l0/scores", &[]);
        let named = hook.probe("l1/gate", &["extras"]);
        let unselected = hook.probe("l1/scores", &[]);
        hook.set_mode(Mode::Train).unwrap();
        let value = |v: f32| Tensor::new(&[v, v + 0.5], &Device::Cpu).unwrap();
        let mut armed = Vec::new();
        for step in 0..4u8 {
            armed.push([&regex, &named, &unselected].map(|p| p.is_armed()));
            for probe in [&regex, &named, &unselected] {
                // Two forward passes in one step: the second one's tensor is the one saved.
                probe.record(&value(f32::from(step)));
                probe.record(&value(f32::from(step) + 10.0));
            }
            hook.step().unwrap();
        }
        hook.close().unwrap();
        assert_eq!(
            armed,
            [
                [true, true, false],
                [false, false, false],
                [true, true, false],
                [false, false, false]
            ]
        );
        let got: Vec<(u64, String, Vec<f64>)> = sink
            .tensors()
            .into_iter()
            .map(|t| (t.key.step, t.name, t.tensor.to_f64_vec()))
            .collect();
        let want: Vec<(u64, String, Vec<f64>)> = [0u64, 2]
            .into_iter()
            .flat_map(|s| {
                let v = vec![s as f64 + 10.0, s as f64 + 10.5];
                [
                    (s, "l0/scores".to_string(), v.clone()),
                    (s, "l1/gate".to_string(), v),
                ]
            })
            .collect();
        assert_eq!(got, want);
        let members = |name: &str| -> Vec<String> {
            let c = hook.hook().config().collections.iter();
            let found = c.into_iter().find(|c| c.name() == name).unwrap();
            found.tensor_names().iter().cloned().collect()
        };
        assert_eq!(members("attention"), ["l0/scores"]);
        assert_eq!(members("extras"), ["l1/gate"]);
        // After the end nothing is armed, not even a probe made afterwards at a due step.
        let late = hook.probe("l0/late", &[]);
        assert!(!regex.is_armed() && !named.is_armed() && !late.is_armed());
    }

    #[test]
    fn parameters_are_sorted_into_weights_and_biases_by_name() {
        assert_eq!(parameter_collection("fc1.weight"), "weights");
        assert_eq!(parameter_collection("encoder.layer0.attn.bias"), "biases");
        assert_eq!(parameter_collection("lstm.hh_bias"), "biases");
        assert_eq!(parameter_collection("emb.embeddings"), "weights");
        assert_eq!(parameter_collection("bias_scale.weight"), "weights");
    }
}
