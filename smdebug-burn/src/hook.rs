//! [`BurnHook`]: a [`Hook`] that takes burn tensors, walks a module's parameters with their
//! paths, records gradients from [`GradientsParams`], and reads everything due in one step back
//! from the device with one [`Transaction`].

use burn::module::{Module, ModuleVisitor, Param};
use burn::optim::GradientsParams;
use burn::tensor::{Tensor, Transaction};
use smdebug_core::{DueTensor, Hook, HookBuilder, Mode, Sink, StopSignal};

use crate::error::{Error, Result};
use crate::host::with_view;
use crate::reduce;

pub use smdebug_core::collection::GRADIENT_PREFIX;

/// Suffix of a module's output tensor (`relu1` records `relu1.output`).
pub const OUTPUT_SUFFIX: &str = ".output";

pub use smdebug_core::collection::parameter_collection;

enum Entry {
    /// The whole tensor was registered in the transaction.
    Raw { name: String, due: DueTensor },
    /// A tensor of reductions (see [`reduce::on_device_tensor`]) was registered.
    Reduced { name: String, due: DueTensor },
    /// An empty tensor's reductions, known without the device.
    Empty { name: String, due: DueTensor },
}

/// The tensors due in one call, read back together.
#[derive(Default)]
struct Batch {
    tx: Option<Transaction>,
    entries: Vec<Entry>,
}

impl Batch {
    /// Registers a due tensor: whole, or only its reductions when that is all its collections
    /// ask for.
    fn add<const D: usize>(&mut self, due: DueTensor, name: String, tensor: Tensor<D>) {
        let tx = self.tx.take().unwrap_or_default();
        if due.reductions_only() && reduce::on_device(&due.reductions) {
            let n: usize = tensor.dims().iter().product();
            if n == 0 {
                self.tx = Some(tx);
                self.entries.push(Entry::Empty { name, due });
                return;
            }
            let flat: Tensor<1> = tensor.detach().reshape([n]);
            self.tx = Some(tx.register(reduce::on_device_tensor(flat, &due.reductions)));
            self.entries.push(Entry::Reduced { name, due });
        } else {
            self.tx = Some(tx.register(tensor));
            self.entries.push(Entry::Raw { name, due });
        }
    }
}

/// The capture hook of a burn training loop.
///
/// It owns a [`Hook`]. Each `save_*` call asks the hook which tensors are due
/// (a flag when nothing is due this step), registers only those in one burn [`Transaction`], and
/// reads them back in one go. Tensors whose collections ask only for reductions are reduced on
/// the device and only the scalars come back. Errors are returned to the caller and leave the
/// hook usable.
pub struct BurnHook {
    hook: Hook,
    closed: bool,
}

impl std::fmt::Debug for BurnHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BurnHook")
            .field("hook", &self.hook)
            .finish_non_exhaustive()
    }
}

/// Walks a module's float parameters, keeping the path of module names.
struct ParamVisitor<'a> {
    hook: &'a mut Hook,
    batch: &'a mut Batch,
    grads: Option<&'a GradientsParams>,
    path: Vec<String>,
}

impl ModuleVisitor for ParamVisitor<'_> {
    fn enter_module(&mut self, name: &str, _container_type: &str) {
        self.path.push(name.to_string());
    }

    fn exit_module(&mut self, _name: &str, _container_type: &str) {
        self.path.pop();
    }

    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
        let path = self.path.join(".");
        let (name, collection) = match self.grads {
            Some(_) => (format!("{GRADIENT_PREFIX}{path}"), "gradients"),
            None => {
                let c = parameter_collection(&path);
                (path, c)
            }
        };
        let Some(due) = self.hook.due_tensor(&name, &[collection]) else {
            return;
        };
        let tensor = match self.grads {
            Some(grads) => match grads.get::<D>(param.id) {
                Some(g) => g,
                None => return,
            },
            None => param.val(),
        };
        self.batch.add(due, name, tensor);
    }
}

impl BurnHook {
    /// Builds the hook from a configured [`HookBuilder`] and the sink that stores the run
    /// (smdebug-io's `Writer`, or a `MemorySink`).
    pub fn new(builder: HookBuilder, sink: impl Sink + 'static) -> Result<BurnHook> {
        Ok(BurnHook {
            hook: builder.build(sink)?,
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

    /// Whether `name` in `collections` is due now.
    pub fn is_due(&mut self, name: &str, collections: &[&str]) -> bool {
        self.hook.is_due(name, collections)
    }

    /// Switches mode (TRAIN, EVAL, PREDICT); a step with records is closed first.
    pub fn set_mode(&mut self, mode: Mode) {
        if mode == self.hook.mode() {
            return;
        }
        self.hook.set_mode(mode);
    }

    /// Ends the step: publishes it and advances the step counters.
    pub fn step(&mut self) {
        self.hook.step();
    }

    /// Ends the run: the last step, the collections and the end marker.
    pub fn close(&mut self) {
        if self.closed {
            return;
        }
        self.hook.close();
        self.closed = true;
    }

    /// Saves every float parameter of `module` that is due, under its module path
    /// (`fc1.weight`), in `weights` or `biases` (see [`parameter_collection`]), reading them back
    /// in one transaction. Returns how many tensors were recorded.
    pub fn save_parameters<M: Module>(&mut self, module: &M) -> Result<usize> {
        self.visit(module, None)
    }

    /// Saves the gradient of every float parameter of `module` found in `grads` (call it after
    /// `backward()` and before the optimizer step), as `gradient/<path>` in `gradients`.
    pub fn save_gradients<M: Module>(
        &mut self,
        module: &M,
        grads: &GradientsParams,
    ) -> Result<usize> {
        self.visit(module, Some(grads))
    }

    /// Saves a float tensor under `name` in `collection` when due.
    pub fn save_tensor<const D: usize>(
        &mut self,
        name: &str,
        tensor: &Tensor<D>,
        collection: &'static str,
    ) -> Result<bool> {
        if self.closed {
            return Ok(false);
        }
        let Some(due) = self.hook.due_tensor(name, &[collection]) else {
            return Ok(false);
        };
        let mut batch = Batch::default();
        batch.add(due, name.to_string(), tensor.clone());
        Ok(self.read(batch)? > 0)
    }

    /// Saves a module's output (an activation) as `<module>.output` in `outputs`.
    pub fn save_output<const D: usize>(
        &mut self,
        module: &str,
        output: &Tensor<D>,
    ) -> Result<bool> {
        let name = format!("{module}{OUTPUT_SUFFIX}");
        self.save_tensor(&name, output, "outputs")
    }

    /// Saves a loss (a one-element tensor) as the scalar `name` in `losses`.
    /// Like Python smdebug, a one-element loss is stored as a scalar `f64` (shape `[]`).
    pub fn save_loss(&mut self, name: &str, loss: &Tensor<1>) -> Result<bool> {
        if self.closed || !self.hook.is_due(name, &["losses"]) {
            return Ok(false);
        }
        if loss.dims()[0] != 1 {
            return self.save_tensor(name, loss, "losses");
        }
        let data = loss.try_to_data().map_err(|e| Error::Read {
            first: name.to_string(),
            count: 1,
            message: format!("{e:?}"),
        })?;
        match data.iter::<f64>().next() {
            Some(v) => Ok(self.hook.save_scalar(name, v, &["losses"])),
            None => Ok(false),
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

    fn visit<M: Module>(&mut self, module: &M, grads: Option<&GradientsParams>) -> Result<usize> {
        if self.closed || !self.hook.anything_due() {
            return Ok(0);
        }
        let mut batch = Batch::default();
        let mut visitor = ParamVisitor {
            hook: &mut self.hook,
            batch: &mut batch,
            grads,
            path: Vec::new(),
        };
        module.visit(&mut visitor);
        self.read(batch)
    }

    /// Reads a batch back in one transaction and records it. Returns how many tensors (or sets
    /// of reductions) were recorded.
    fn read(&mut self, batch: Batch) -> Result<usize> {
        let Batch { tx, entries } = batch;
        if entries.is_empty() {
            return Ok(0);
        }
        let registered = entries
            .iter()
            .filter(|e| !matches!(e, Entry::Empty { .. }))
            .count();
        let mut data = match tx {
            Some(tx) if registered > 0 => tx.try_execute().map_err(|e| Error::Read {
                first: entry_name(&entries[0]).to_string(),
                count: registered,
                message: format!("{e:?}"),
            })?,
            _ => Vec::new(),
        }
        .into_iter();
        let mut saved = 0;
        let mut first_error = None;
        for entry in entries {
            let outcome = match entry {
                Entry::Raw { name, due } => match data.next() {
                    Some(d) => with_view(&name, d, |view| self.hook.save_due(&name, &due, view)),
                    None => Ok(false),
                },
                Entry::Reduced { name, due } => match data.next() {
                    Some(d) => match d.convert::<f64>().try_to_vec::<f64>() {
                        Ok(values) => {
                            let values = reduce::finish(values, &due.reductions);
                            Ok(self.hook.save_reduction_values(&name, &due, &values))
                        }
                        Err(e) => Err(Error::Read {
                            first: name,
                            count: 1,
                            message: format!("{e:?}"),
                        }),
                    },
                    None => Ok(false),
                },
                Entry::Empty { name, due } => {
                    let values: Vec<f64> = due
                        .reductions
                        .iter()
                        .map(|r| reduce::empty_value(r.op))
                        .collect();
                    Ok(self.hook.save_reduction_values(&name, &due, &values))
                }
            };
            match outcome {
                Ok(s) => saved += usize::from(s),
                Err(e) => {
                    first_error.get_or_insert(e);
                }
            }
        }
        first_error.map_or(Ok(saved), Err)
    }
}

fn entry_name(entry: &Entry) -> &str {
    match entry {
        Entry::Raw { name, .. } | Entry::Reduced { name, .. } | Entry::Empty { name, .. } => name,
    }
}

impl Drop for BurnHook {
    /// A hook dropped without `close()` still publishes its last step and the end marker.
    fn drop(&mut self) {
        self.close();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::nn::{Linear, LinearConfig};
    use burn::tensor::Device;
    use smdebug_core::{
        Collection, MemorySink, Record, Reduction, ReductionConfig, ReductionOp, SaveConfig,
    };

    // burn 0.22 deprecates the ndarray backend in favour of `flex`; the tests use ndarray, the
    // CPU backend the workspace builds (the adapter itself is backend-free).
    #[allow(deprecated)]
    fn ndarray_device() -> Device {
        Device::ndarray()
    }

    #[derive(Module, Debug)]
    struct Net {
        encoder: Vec<Linear>,
        head: Linear,
    }

    #[test]
    fn parameters_are_named_by_module_path_and_sorted_into_weights_and_biases() {
        let device = ndarray_device();
        let net = Net {
            encoder: vec![
                LinearConfig::new(3, 4).init(&device),
                LinearConfig::new(4, 4).with_bias(false).init(&device),
            ],
            head: LinearConfig::new(4, 2).init(&device),
        };
        let sink = MemorySink::default();
        let mut hook = BurnHook::new(
            Hook::builder().save_config(SaveConfig::every(1)),
            sink.clone(),
        )
        .unwrap();
        assert_eq!(hook.save_parameters(&net).unwrap(), 5);
        hook.close();
        let got: Vec<(String, Vec<usize>)> = sink
            .tensors()
            .into_iter()
            .map(|t| (t.name, t.tensor.shape().to_vec()))
            .collect();
        let want = [
            ("encoder.0.weight", vec![3, 4]),
            ("encoder.0.bias", vec![4]),
            ("encoder.1.weight", vec![4, 4]),
            ("head.weight", vec![4, 2]),
            ("head.bias", vec![2]),
        ];
        let want: Vec<(String, Vec<usize>)> =
            want.into_iter().map(|(n, s)| (n.to_string(), s)).collect();
        assert_eq!(got, want);
        let file = hook.hook().collections_file();
        let members = |c: &str| {
            file.collections
                .iter()
                .find(|x| x.name() == c)
                .map(|x| x.tensor_names().len())
                .unwrap_or(0)
        };
        assert_eq!((members("weights"), members("biases")), (3, 2));
        assert_eq!(parameter_collection("lstm.hh_bias"), "biases");
    }

    #[test]
    fn a_collection_on_its_own_schedule_is_walked_when_the_default_is_never_due() {
        use smdebug_core::SaveConfigMode;
        let device = ndarray_device();
        let net = Net {
            encoder: vec![],
            head: LinearConfig::new(2, 1).init(&device),
        };
        let sink = MemorySink::default();
        let builder = Hook::builder()
            .save_config(SaveConfig::new(SaveConfigMode::never()))
            .collection(Collection::new("biases").with_save_config(SaveConfig::every(3)));
        let mut hook = BurnHook::new(builder, sink.clone()).unwrap();
        for _ in 0..5 {
            hook.save_parameters(&net).unwrap();
            hook.step();
        }
        let got: Vec<(u64, String)> = sink
            .tensors()
            .into_iter()
            .map(|t| (t.key.step, t.name))
            .collect();
        assert_eq!(got, vec![(0, "head.bias".into()), (3, "head.bias".into())]);
    }

    #[test]
    fn steps_holding_only_device_reductions_are_ended_once_and_never_mix_modes() {
        let sink = MemorySink::default();
        let builder = Hook::builder()
            .save_config(SaveConfig::every(1))
            .collection(Collection::new("weights").with_reductions(
                ReductionConfig::reductions_only([Reduction::new(ReductionOp::Mean)]),
            ));
        let mut hook = BurnHook::new(builder, sink.clone()).unwrap();
        let w: Tensor<1> = Tensor::from_floats([1.0, 3.0], &ndarray_device());
        hook.set_mode(Mode::Train);
        assert!(hook.save_tensor("fc.weight", &w, "weights").unwrap());
        hook.step();
        assert!(hook.save_tensor("fc.weight", &w, "weights").unwrap());
        hook.set_mode(Mode::Eval);
        assert!(hook.save_tensor("fc.weight", &w, "weights").unwrap());
        hook.close();
        let records = sink.records.lock().unwrap().clone();
        let ends: Vec<u64> = records
            .iter()
            .filter_map(|r| match r {
                Record::EndStep { step } => Some(*step),
                _ => None,
            })
            .collect();
        assert_eq!(ends, vec![0, 1, 2]);
        let keys: Vec<(u64, Mode, u64, f64)> = sink
            .tensors()
            .iter()
            .map(|t| {
                assert_eq!(t.name, "smdebug/reductions/mean/fc.weight");
                (
                    t.key.step,
                    t.key.mode,
                    t.key.mode_step,
                    t.tensor.to_f64_vec()[0],
                )
            })
            .collect();
        assert_eq!(
            keys,
            vec![
                (0, Mode::Train, 0, 2.0),
                (1, Mode::Train, 1, 2.0),
                (2, Mode::Eval, 0, 2.0)
            ]
        );
    }
}
