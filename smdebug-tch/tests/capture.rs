//! The adapter conformance suite (smdebug-adapter-conformance) run against tch: a real MLP
//! trained with libtorch on the digits set with capture on, read back with `Trial` and compared
//! with libtorch's own tensors; plus what only this adapter has here, libtorch's element types.

use std::collections::BTreeMap;
use std::path::Path;

use smdebug_adapter_conformance::{Fixture, Own, Pass, writer};
use smdebug_core::{DType, Hook, HookBuilder, SaveConfig, Sink};
use smdebug_io::trial::Trial;
use smdebug_tch::{Recorded, Tch, TchHook};
use tch::nn::{self, Module, OptimizerConfig};
use tch::{Kind, Tensor};

fn hook_at(dir: &Path, builder: HookBuilder) -> TchHook {
    TchHook::new(builder, writer(dir)).unwrap()
}

/// Shape and every element as f64: the test's own reference, straight from libtorch.
fn own(t: &Tensor) -> Own {
    let shape = t.size().iter().map(|d| *d as usize).collect();
    let flat = t.detach().to_kind(Kind::Double).reshape([-1]);
    let mut v = vec![0f64; flat.numel()];
    flat.copy_data(&mut v, flat.numel());
    (shape, v)
}

struct TchFixture;

struct Model {
    vs: nn::VarStore,
    fc1: nn::Linear,
    relu1: Recorded<nn::Func<'static>>,
    fc2: nn::Linear,
    opt: nn::Optimizer,
}

impl Fixture for TchFixture {
    type Framework = Tch;
    type Hook = TchHook;
    type Model = Model;

    fn hook(
        &self,
        builder: HookBuilder,
        sink: impl Sink + 'static,
    ) -> smdebug_tch::Result<TchHook> {
        TchHook::new(builder, sink)
    }

    fn model(&self, hook: &mut TchHook) -> Model {
        tch::manual_seed(7);
        let vs = nn::VarStore::new(tch::Device::Cpu);
        let fc1 = nn::linear(vs.root() / "fc1", 64, 32, Default::default());
        let fc2 = nn::linear(vs.root() / "fc2", 32, 10, Default::default());
        let relu1 = hook.wrap("relu1", nn::func(|x| x.relu()));
        let opt = nn::Sgd::default().build(&vs, 0.1).unwrap();
        Model {
            vs,
            fc1,
            relu1,
            fc2,
            opt,
        }
    }

    fn pass(
        &self,
        m: &mut Model,
        hook: &mut TchHook,
        x: &[f32],
        labels: &[i64],
        train: bool,
        want_own: bool,
    ) -> Pass<Tensor> {
        let x = Tensor::from_slice(x).reshape([labels.len() as i64, 64]);
        let y = Tensor::from_slice(labels);
        let hidden = m.relu1.forward(&m.fc1.forward(&x));
        let logits = m.fc2.forward(&hidden);
        let loss = logits.cross_entropy_for_logits(&y);
        let mut tensors = BTreeMap::new();
        if want_own {
            tensors.insert("relu1.output".to_string(), own(&hidden));
        }
        if train {
            m.opt.zero_grad();
            loss.backward();
            hook.save_parameters(&m.vs).unwrap();
            hook.save_gradients(&m.vs).unwrap();
            if want_own {
                for (name, var) in m.vs.variables() {
                    tensors.insert(format!("gradient/{name}"), own(&var.grad()));
                    tensors.insert(name, own(&var));
                }
            }
            m.opt.step();
        }
        Pass {
            loss_value: own(&loss).1[0],
            accuracy: logits.accuracy_for_logits(&y).double_value(&[]),
            loss,
            own: tensors,
        }
    }

    fn tensor(&self, values: &[f32], shape: &[usize]) -> Tensor {
        let shape: Vec<i64> = shape.iter().map(|&d| d as i64).collect();
        Tensor::from_slice(values).reshape(shape)
    }

    fn reduction_tolerance(&self) -> f64 {
        // Accumulated in f64 on the CPU.
        1e-9
    }
}

smdebug_adapter_conformance::adapter_conformance!(TchFixture);

#[test]
fn half_bfloat_and_integer_tensors_keep_their_dtype() {
    let dir = tempfile::tempdir().unwrap();
    let mut hook = hook_at(
        dir.path(),
        Hook::builder().save_config(SaveConfig::every(1)),
    );
    let base = Tensor::from_slice(&[0.5f32, -1.25, 3.0, 1024.0, -0.0, 7.5]).reshape([2, 3]);
    let cases = [
        ("half", base.to_kind(Kind::Half), DType::F16),
        ("bf16", base.to_kind(Kind::BFloat16), DType::BF16),
        ("i64", base.to_kind(Kind::Int64), DType::I64),
        ("u8", base.abs().to_kind(Kind::Uint8), DType::U8),
        ("bool", base.gt(0.0), DType::Bool),
        // A non-contiguous view (a transpose) is copied in its logical order.
        ("transposed", base.tr(), DType::F32),
    ];
    for (name, t, _) in &cases {
        assert!(hook.save_tensor(name, t, &["custom"]).unwrap());
    }
    hook.step().unwrap();
    hook.close().unwrap();
    drop(hook); // the writer publishes everything and stops its thread
    let trial = Trial::open(dir.path().to_str().unwrap()).unwrap();
    for (name, t, dtype) in &cases {
        let got = trial.tensor(name).unwrap().raw(0, None, None).unwrap();
        assert_eq!(got.dtype(), *dtype, "{name}");
        let (shape, values) = own(t);
        assert_eq!(got.shape(), shape.as_slice(), "{name}");
        assert_eq!(got.to_f64_vec(), values, "{name}");
    }
}
