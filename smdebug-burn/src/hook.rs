//! [`BurnHook`]: smdebug-core's [`AdapterHook`] for burn tensors, which also walks a module's
//! parameters with their paths, records gradients from [`GradientsParams`], and runs the
//! backward pass as the step's backward span. Everything due in one call is read back from the
//! device with one [`Transaction`].

use burn::module::{Module, ModuleVisitor, Param};
use burn::optim::GradientsParams;
use burn::tensor::{DType, Gradients, Int, Tensor, Transaction};
use smdebug_core::adapter::{AdapterHook, Due, Framework, OUTPUT_SUFFIX};
use smdebug_core::collection::{GRADIENT_PREFIX, parameter_collection};
use smdebug_core::phase::Phase;
use smdebug_core::{DueTensor, Hook, HookBuilder, Sink};

use crate::error::{Error, Result};
use crate::host::{Place, with_view};
use crate::reduce;

/// A burn float tensor as the hook keeps it: flattened on its device, detached from autodiff,
/// with its shape. Made from any `Tensor<D>` with [`Flat::new`].
#[derive(Clone, Debug)]
pub struct Flat {
    shape: Vec<usize>,
    tensor: Tensor<1>,
}

impl Flat {
    /// Flattens `tensor` (a lazy reshape on its device; nothing is read back).
    pub fn new<const D: usize>(tensor: &Tensor<D>) -> Flat {
        let shape = tensor.dims().to_vec();
        let n: usize = shape.iter().product();
        Flat {
            shape,
            tensor: tensor.clone().without_autodiff().reshape([n]),
        }
    }

    /// The shape of the tensor it was made from.
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }
}

/// burn, as smdebug-core's adapter kit sees it: the tensors due in one call are registered in one
/// burn [`Transaction`] (whole tensors of one float dtype packed into one read) and read back in
/// one go; tensors whose collections ask only for reductions are reduced on the device and only
/// the scalars come back.
#[derive(Debug)]
pub struct Burn {
    /// See [`MAX_PACK_BYTES`].
    max_pack_bytes: usize,
}

impl Default for Burn {
    fn default() -> Burn {
        Burn {
            max_pack_bytes: MAX_PACK_BYTES,
        }
    }
}

impl Framework for Burn {
    type Tensor = Flat;
    type Error = Error;

    fn keep(tensor: &Flat) -> Flat {
        tensor.clone()
    }

    fn scalar(&mut self, name: &str, tensor: &Flat) -> Result<Option<f64>> {
        if tensor.tensor.dims()[0] != 1 {
            return Ok(None);
        }
        let data = tensor.tensor.try_to_data().map_err(|e| Error::Read {
            first: name.to_string(),
            count: 1,
            message: format!("{e:?}"),
        })?;
        Ok(data.iter::<f64>().next())
    }

    fn record(&mut self, hook: &mut Hook, due: Vec<Due<Flat>>) -> Result<usize> {
        let mut batch = Batch {
            entries: Vec::with_capacity(due.len()),
            max_pack_bytes: self.max_pack_bytes,
        };
        for d in due {
            batch.add(d.due, d.name, d.tensor);
        }
        batch.read(hook)
    }
}

/// How a due tensor comes back from the device.
enum Plan {
    /// The whole tensor.
    Whole,
    /// A tensor of reductions (see [`reduce::on_device_tensor`]).
    Reduced,
    /// An empty tensor's reductions, known without the device.
    Empty,
}

struct Entry {
    name: String,
    due: DueTensor,
    plan: Plan,
    shape: Vec<usize>,
    /// The flattened tensor, or its reductions; `None` for [`Plan::Empty`] and once planned.
    tensor: Option<Tensor<1>>,
}

/// Largest flat tensor one packed read makes on the device, in bytes: bigger batches are split
/// so the temporary copy stays bounded.
const MAX_PACK_BYTES: usize = 256 << 20;

/// The tensors due in one call, read back together.
struct Batch {
    entries: Vec<Entry>,
    /// See [`MAX_PACK_BYTES`].
    max_pack_bytes: usize,
}

impl Batch {
    /// Adds a due tensor: whole, or only its reductions when that is all its collections ask
    /// for.
    fn add(&mut self, due: DueTensor, name: String, tensor: Flat) {
        let Flat { shape, tensor } = tensor;
        let n: usize = shape.iter().product();
        let (plan, tensor) = if due.reductions_only() && reduce::on_device(&due.reductions) {
            if n == 0 {
                (Plan::Empty, None)
            } else {
                let reduced = reduce::on_device_tensor(tensor, &due.reductions);
                (Plan::Reduced, Some(reduced))
            }
        } else {
            (Plan::Whole, Some(tensor))
        };
        self.entries.push(Entry {
            name,
            due,
            plan,
            shape,
            tensor,
        });
    }

    /// Builds one transaction for the batch and says where each entry's values come back.
    ///
    /// Whole tensors of one float dtype are concatenated on the device into one flat tensor and
    /// read as one: one transfer per dtype instead of one per tensor, and on burn's ndarray
    /// backend a block copy instead of its element-by-element copy of arrays the model still
    /// holds. Other dtypes and reductions are registered alone.
    fn plan(&mut self) -> (Transaction, Vec<Place>, usize) {
        // Each read: whether it is packed, and the (entry, tensor) pairs it carries. Packed
        // reads stay open per dtype until full.
        let mut reads: Vec<(bool, Vec<(usize, Tensor<1>)>)> = Vec::new();
        let mut open: Vec<(DType, usize, usize)> = Vec::new();
        for (i, entry) in self.entries.iter_mut().enumerate() {
            let Some(t) = entry.tensor.take() else {
                continue;
            };
            let dtype = t.dtype();
            let bytes = t.dims()[0] * dtype.size();
            if !matches!(entry.plan, Plan::Whole) || !packable(dtype) {
                reads.push((false, vec![(i, t)]));
                continue;
            }
            match open.iter_mut().find(|o| o.0 == dtype) {
                Some(o) if o.2 + bytes <= self.max_pack_bytes => {
                    reads[o.1].1.push((i, t));
                    o.2 += bytes;
                }
                Some(o) => {
                    reads.push((true, vec![(i, t)]));
                    (o.1, o.2) = (reads.len() - 1, bytes);
                }
                None => {
                    reads.push((true, vec![(i, t)]));
                    open.push((dtype, reads.len() - 1, bytes));
                }
            }
        }
        let mut places = vec![Place::default(); self.entries.len()];
        let mut tx = Transaction::default();
        let count = reads.len();
        for (slot, (packed, members)) in reads.into_iter().enumerate() {
            let mut offset = 0;
            let mut parts: Vec<Tensor<1>> = members
                .into_iter()
                .map(|(i, t)| {
                    let len = t.dims()[0];
                    places[i] = Place { slot, offset, len };
                    offset += len;
                    t
                })
                .collect();
            // Every read carries at least one tensor; an unpacked one carries exactly one.
            tx = tx.register(if packed {
                Tensor::cat(parts, 0)
            } else {
                parts.swap_remove(0)
            });
        }
        (tx, places, count)
    }

    /// Reads the batch back in one transaction and records it. Returns how many tensors (or sets
    /// of reductions) were recorded.
    fn read(mut self, hook: &mut Hook) -> Result<usize> {
        if self.entries.is_empty() {
            return Ok(0);
        }
        let (tx, places, count) = self.plan();
        let data = if count > 0 {
            tx.try_execute().map_err(|e| Error::Read {
                first: self.entries[0].name.clone(),
                count,
                message: format!("{e:?}"),
            })?
        } else {
            Vec::new()
        };
        smdebug_core::adapter::tally(self.entries.into_iter().zip(places).map(|(entry, place)| {
            let Entry {
                name, due, shape, ..
            } = entry;
            match (entry.plan, data.get(place.slot)) {
                (Plan::Whole, Some(d)) => {
                    with_view(&name, d, place, &shape, |v| hook.save_due(&name, &due, v))
                }
                (Plan::Reduced, Some(d)) => {
                    let values = reduce::finish(d.iter::<f64>().collect(), &due.reductions);
                    Ok(hook.save_reduction_values(&name, &due, &values))
                }
                (Plan::Empty, _) => {
                    let values: Vec<f64> =
                        due.reductions.iter().map(|r| r.op.empty_value()).collect();
                    Ok(hook.save_reduction_values(&name, &due, &values))
                }
                (_, None) => Ok(false),
            }
        }))
    }
}

/// Dtypes whose tensors are packed into one read: the plain float types, whose bytes are their
/// values.
fn packable(dtype: DType) -> bool {
    matches!(dtype, DType::F64 | DType::F32 | DType::F16 | DType::BF16)
}

/// The capture hook of a burn training loop.
///
/// The calls every adapter shares (`set_mode`, `step`, `close`, `save_metric`, `save_scalar`,
/// stop requests, and the timeline's `data`, `forward` and `optimizer` scopes) come
/// from smdebug-core's [`AdapterHook`] (inherent methods stamped by
/// `smdebug_core::adapter_hook_methods!`); it adds what is
/// particular to burn: [`save_parameters`](Self::save_parameters),
/// [`save_gradients`](Self::save_gradients), saving burn's `Tensor<D>` of any rank
/// ([`save_tensor`](Self::save_tensor), [`save_output`](Self::save_output),
/// [`save_loss`](Self::save_loss)), and [`backward`](Self::backward). A session drives it
/// through [`Capture`](smdebug_core::Capture).
///
/// With a timeline (`HookBuilder::timeline`), the loop's spans need no timing code: the step
/// boundary is `step()` and [`backward`](Self::backward) the backward span. burn's modules are
/// derived (`#[derive(Module)]`), so the adapter cannot wrap them: the loop runs its forward
/// pass inside `forward(|| ..)`, and a model times its submodules for detailed profiling with
/// `timeline.module_scope("fc1", || ..)` in its own `forward` (given the hook's `timeline()`).
/// On a GPU backend (wgpu, CUDA, with or without fusion) burn queues work asynchronously and may
/// defer it until a result is read: a span is the host's time to issue the work, not the
/// device's time to run it (see [`smdebug_core::adapter`](smdebug_core::adapter#framework-spans)).
///
/// Each `save_*` call asks the hook which tensors are due (a flag when nothing is due this step),
/// registers only those in one burn [`Transaction`], and reads them back in one go. Tensors whose
/// collections ask only for reductions are reduced on the device and only the scalars come back.
/// Errors are returned to the caller and leave the hook usable.
#[derive(Debug)]
pub struct BurnHook(AdapterHook<Burn>);

/// Walks a module's float parameters, keeping the path of module names.
struct ParamVisitor<'a> {
    hook: &'a mut AdapterHook<Burn>,
    due: Vec<Due<Flat>>,
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
        let Some(due) = self.hook.due(&name, &[collection]) else {
            return;
        };
        let tensor = match self.grads {
            Some(grads) => match grads.get::<D>(param.id) {
                Some(g) => g,
                None => return,
            },
            None => param.val(),
        };
        self.due.push(Due {
            name,
            due,
            tensor: Flat::new(&tensor),
        });
    }
}

smdebug_core::adapter_hook_methods!(BurnHook, Burn);

impl BurnHook {
    /// Builds the hook from a configured [`HookBuilder`] and the sink that stores the run
    /// (smdebug-io's `Writer`, or a `MemorySink`).
    pub fn new(builder: HookBuilder, sink: impl Sink + 'static) -> Result<BurnHook> {
        Ok(BurnHook(AdapterHook::new(builder, sink, Burn::default())?))
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

    /// Saves a float tensor under `name` in `collections` (plus every collection whose
    /// `include_regex` matches the name) when due. Returns whether anything was recorded.
    pub fn save_tensor<const D: usize>(
        &mut self,
        name: &str,
        tensor: &Tensor<D>,
        collections: &[&str],
    ) -> Result<bool> {
        let Some(due) = self.0.due(name, collections) else {
            return Ok(false);
        };
        let entry = Due {
            name: name.to_string(),
            due,
            tensor: Flat::new(tensor),
        };
        Ok(self.0.record(vec![entry])? > 0)
    }

    /// Saves a module's output (an activation) as `<module>.output` in `outputs`.
    pub fn save_output<const D: usize>(
        &mut self,
        module: &str,
        output: &Tensor<D>,
    ) -> Result<bool> {
        let name = format!("{module}{OUTPUT_SUFFIX}");
        self.save_tensor(&name, output, &["outputs"])
    }

    /// Saves what the loss `name` was computed from, as Python smdebug's `register_loss` does:
    /// `predictions` (scores) as `<name>.predictions` in `predictions` and the class indices
    /// `labels` as `<name>.labels` in `labels`, each when due (nothing is read or converted
    /// otherwise). ClassImbalance and Confusion read them with their default parameters.
    /// Returns how many were recorded.
    pub fn save_loss_inputs<const D: usize, const E: usize>(
        &mut self,
        name: &str,
        predictions: &Tensor<D>,
        labels: &Tensor<E, Int>,
    ) -> Result<usize> {
        self.0.save_loss_inputs_with(
            name,
            || Flat::new(predictions),
            || Flat::new(&labels.clone().float()),
        )
    }

    /// Saves a loss (a one-element tensor) as the scalar `name` in `losses`.
    /// Like Python smdebug, a one-element loss is stored as a scalar `f64` (shape `[]`).
    pub fn save_loss(&mut self, name: &str, loss: &Tensor<1>) -> Result<bool> {
        if !self.0.is_due(name, &["losses"]) {
            return Ok(false);
        }
        self.0.save_loss(name, &Flat::new(loss))
    }

    /// Runs burn's backward pass from `loss` as the step's backward span and returns its
    /// gradients (`loss.backward()`; hand them to `GradientsParams::from_grads`).
    ///
    /// # Panics
    ///
    /// Where burn's `Tensor::backward` panics: a loss that is not tracked by autodiff, or whose
    /// graph an earlier backward consumed. Nothing the hook adds panics.
    pub fn backward<const D: usize>(&self, loss: &Tensor<D>) -> Gradients {
        self.0.scope(Phase::Backward, || loss.backward())
    }

    fn visit<M: Module>(&mut self, module: &M, grads: Option<&GradientsParams>) -> Result<usize> {
        if !self.0.anything_due() {
            return Ok(0);
        }
        let mut visitor = ParamVisitor {
            hook: &mut self.0,
            due: Vec::new(),
            grads,
            path: Vec::new(),
        };
        module.visit(&mut visitor);
        let due = visitor.due;
        self.0.record(due)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::nn::{Linear, LinearConfig};
    use burn::tensor::Device;
    use smdebug_core::{MemorySink, SaveConfig};

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
        hook.close().unwrap();
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
        let members = |c: &str| file.collection(c).map_or(0, |x| x.tensor_names().len());
        assert_eq!((members("weights"), members("biases")), (3, 2));
        assert_eq!(parameter_collection("lstm.hh_bias"), "biases");
    }

    #[test]
    fn whole_tensors_are_packed_per_dtype_and_split_at_the_size_limit() {
        let device = ndarray_device();
        let f32s: Vec<Tensor<2>> = (0..3)
            .map(|i| Tensor::from_floats([[i as f32, 0.5], [1.5, -2.0]], &device))
            .collect();
        let f64s: Tensor<1> = Tensor::<1>::from_floats([7.0, 8.0, 9.0], &device).cast(DType::F64);
        let sink = MemorySink::default();
        let mut hook = Hook::builder()
            .save_config(SaveConfig::every(1))
            .build(sink.clone())
            .unwrap();
        let due = |hook: &mut Hook, n: &str| hook.due_tensor(n, &["weights"]).unwrap();
        // 16 bytes per f32 tensor and a 40-byte limit: two f32 tensors fit in one read.
        let mut batch = Batch {
            entries: Vec::new(),
            max_pack_bytes: 40,
        };
        batch.add(due(&mut hook, "a"), "a".into(), Flat::new(&f32s[0]));
        batch.add(due(&mut hook, "d"), "d".into(), Flat::new(&f64s));
        batch.add(due(&mut hook, "b"), "b".into(), Flat::new(&f32s[1]));
        batch.add(due(&mut hook, "c"), "c".into(), Flat::new(&f32s[2]));
        let (tx, places, count) = batch.plan();
        let at = |slot, offset, len| Place { slot, offset, len };
        assert_eq!(
            places,
            vec![at(0, 0, 4), at(1, 0, 3), at(0, 4, 4), at(2, 0, 4)]
        );
        assert_eq!(count, 3);
        let data = tx.try_execute().unwrap();
        assert_eq!(data.len(), 3);
        assert_eq!(data[1].dtype(), DType::F64);

        // Read back through the hook: each tensor keeps its own shape, dtype and values.
        let mut burn_hook = BurnHook::new(
            Hook::builder().save_config(SaveConfig::every(1)),
            sink.clone(),
        )
        .unwrap();
        for (name, t) in [("a", &f32s[0]), ("b", &f32s[1]), ("c", &f32s[2])] {
            assert!(burn_hook.save_tensor(name, t, &["weights"]).unwrap());
        }
        assert!(burn_hook.save_tensor("d", &f64s, &["weights"]).unwrap());
        burn_hook.close().unwrap();
        let got: Vec<(String, Vec<usize>, smdebug_core::DType, Vec<f64>)> = sink
            .tensors()
            .into_iter()
            .map(|t| {
                (
                    t.name,
                    t.tensor.shape().to_vec(),
                    t.tensor.dtype(),
                    t.tensor.to_f64_vec(),
                )
            })
            .collect();
        let f32_case = |name: &str, i: f64| {
            (
                name.to_string(),
                vec![2, 2],
                smdebug_core::DType::F32,
                vec![i, 0.5, 1.5, -2.0],
            )
        };
        assert_eq!(
            got,
            vec![
                f32_case("a", 0.0),
                f32_case("b", 1.0),
                f32_case("c", 2.0),
                (
                    "d".to_string(),
                    vec![3],
                    smdebug_core::DType::F64,
                    vec![7.0, 8.0, 9.0]
                ),
            ]
        );
    }
}
