//! The adapter conformance suite (smdebug-adapter-conformance) run against burn: a real MLP
//! trained on the digits set with capture on (ndarray backend with autodiff), read back with
//! `Trial` and compared with the model's own tensors.

mod common;

use std::collections::BTreeMap;

use burn::optim::{GradientsParams, ModuleOptimizer, SgdConfig};
use burn::tensor::{Device, Int, Tensor, TensorData};
use common::model::{Mlp, accuracy, loss};
use smdebug_adapter_conformance::{Fixture, Own, Pass, assert_run_matches, train, writer};
use smdebug_burn::{Burn, BurnHook, Flat};
use smdebug_core::{DType, Hook, HookBuilder, SaveConfig, Sink};

/// burn 0.22 deprecates the ndarray backend in favour of `flex`; this crate builds ndarray, the
/// CPU backend the workspace already uses.
#[allow(deprecated)]
fn device() -> Device {
    Device::ndarray().autodiff()
}

/// The tensor as the test's own reference: shape and every element as f64.
fn own<const D: usize>(t: &Tensor<D>) -> Own {
    let values: Vec<f64> = t.to_data().iter::<f64>().collect();
    (t.dims().to_vec(), values)
}

struct BurnFixture;

struct Model {
    mlp: Mlp,
    optim: ModuleOptimizer,
}

impl Fixture for BurnFixture {
    type Framework = Burn;
    type Hook = BurnHook;
    type Model = Model;

    fn hook(
        &self,
        builder: HookBuilder,
        sink: impl Sink + 'static,
    ) -> smdebug_burn::Result<BurnHook> {
        BurnHook::new(builder, sink)
    }

    fn model(&self, _hook: &mut BurnHook) -> Model {
        Model {
            mlp: Mlp::new(&device()),
            optim: SgdConfig::new().init(),
        }
    }

    fn pass(
        &self,
        m: &mut Model,
        hook: &mut BurnHook,
        x: &[f32],
        labels: &[i64],
        train: bool,
        want_own: bool,
    ) -> Pass<Flat> {
        let device = device();
        let n = labels.len();
        let x: Tensor<2> = Tensor::from_data(TensorData::new(x.to_vec(), [n, 64]), &device);
        let y: Tensor<1, Int> = Tensor::from_data(TensorData::new(labels.to_vec(), [n]), &device);
        let (hidden, logits) = hook.forward(|| m.mlp.forward(x, hook.timeline()));
        hook.save_output("relu1", &hidden).unwrap();
        let l = loss(logits.clone(), y.clone());
        let mut tensors = BTreeMap::new();
        if want_own {
            tensors.insert("relu1.output".to_string(), own(&hidden));
        }
        if train {
            let grads = GradientsParams::from_grads(hook.backward(&l), &m.mlp);
            hook.save_parameters(&m.mlp).unwrap();
            hook.save_gradients(&m.mlp, &grads).unwrap();
            if want_own {
                for (name, linear) in [("fc1", &m.mlp.fc1), ("fc2", &m.mlp.fc2)] {
                    let w = &linear.weight;
                    let b = linear.bias.as_ref().unwrap();
                    tensors.insert(format!("{name}.weight"), own(&w.val()));
                    tensors.insert(format!("{name}.bias"), own(&b.val()));
                    let gw = grads.get::<2>(w.id).unwrap();
                    let gb = grads.get::<1>(b.id).unwrap();
                    tensors.insert(format!("gradient/{name}.weight"), own(&gw));
                    tensors.insert(format!("gradient/{name}.bias"), own(&gb));
                }
            }
            m.mlp = hook.optimizer(|| m.optim.step(0.1, m.mlp.clone(), grads));
        }
        let loss_value = own(&l).1[0];
        Pass {
            loss: Flat::new(&l),
            loss_value,
            accuracy: accuracy(logits, y),
            own: tensors,
        }
    }

    fn tensor(&self, values: &[f32], shape: &[usize]) -> Flat {
        let data = TensorData::new(values.to_vec(), [values.len()]);
        let flat: Tensor<1> = Tensor::from_data(data, &device());
        match *shape {
            [_] => Flat::new(&flat),
            [a, b] => Flat::new(&flat.reshape([a, b])),
            _ => panic!("the suite uses tensors of rank 1 and 2, not {shape:?}"),
        }
    }

    fn reduction_tolerance(&self) -> f64 {
        // burn accumulates in the tensor's own dtype: f32.
        1e-5
    }

    fn timed_modules(&self) -> &'static [&'static str] {
        // Derived modules cannot be wrapped: the model times its layers itself.
        &["fc1", "relu1", "fc2"]
    }
}

smdebug_adapter_conformance::adapter_conformance!(BurnFixture);

#[test]
fn burns_linear_weights_are_recorded_as_in_by_out() {
    let dir = tempfile::tempdir().unwrap();
    let builder = Hook::builder().save_config(SaveConfig::every(5));
    let mut hook = BurnHook::new(builder, writer(dir.path())).unwrap();
    let expected = train(&BurnFixture, &mut hook, 6, |s| s % 5 == 0);
    hook.close().unwrap();
    drop(hook);
    assert_run_matches(dir.path(), &expected, DType::F32);
    let trial = smdebug_read::trial::Trial::open(dir.path().to_str().unwrap()).unwrap();
    let w = trial.tensor("fc1.weight").unwrap();
    assert_eq!(w.raw(5, None, None).unwrap().shape(), &[64, 32]);
}
