//! The adapter conformance suite (smdebug-adapter-conformance) run against candle: a real MLP
//! trained on the digits set with capture on, read back with `Trial` and compared with the
//! model's own tensors; plus what only candle has here, models in half and double precision.

mod common;

use std::collections::BTreeMap;

use candle_core::{DType as CDType, Device, Module, Tensor};
use candle_nn::{Activation, Optimizer, SGD, VarMap};
use common::model::{Mlp, accuracy, loss, varmap};
use smdebug_adapter_conformance::{
    Fixture, Own, Pass, assert_run_matches, every_device_reduction, finish_profiled, profiled_hook,
    train, writer,
};
use smdebug_candle::{Candle, CandleHook, recorded_dtype};
use smdebug_core::timeline::{MODULE_ROW, TimelineConfig};
use smdebug_core::window::Window;
use smdebug_core::{
    Capture, DType, Hook, HookBuilder, Mode, SaveConfig, SaveConfigMode, Sink, TensorView,
};

/// candle on the CPU, the model in `dtype`.
struct CandleFixture {
    dtype: CDType,
}

struct Model {
    vm: VarMap,
    mlp: Mlp,
    sgd: SGD,
}

/// Shape and every element as f64 (exact for the float types the model uses).
fn own(t: &Tensor) -> Own {
    let v = t
        .flatten_all()
        .and_then(|t| t.to_dtype(CDType::F64))
        .and_then(|t| t.to_vec1::<f64>())
        .unwrap();
    (t.dims().to_vec(), v)
}

impl Fixture for CandleFixture {
    type Framework = Candle;
    type Hook = CandleHook;
    type Model = Model;

    fn hook(
        &self,
        builder: HookBuilder,
        sink: impl Sink + 'static,
    ) -> smdebug_candle::Result<CandleHook> {
        CandleHook::new(builder, sink)
    }

    fn model(&self, hook: &mut CandleHook) -> Model {
        let (vm, vb) = varmap(self.dtype, &Device::Cpu);
        let mlp = Mlp::new(vb, hook).unwrap();
        let sgd = SGD::new(vm.all_vars(), 0.1).unwrap();
        Model { vm, mlp, sgd }
    }

    fn pass(
        &self,
        m: &mut Model,
        hook: &mut CandleHook,
        x: &[f32],
        labels: &[i64],
        train: bool,
        want_own: bool,
    ) -> Pass<Tensor> {
        let x = self.tensor(x, &[labels.len(), 64]);
        let labels: Vec<u32> = labels.iter().map(|&l| l as u32).collect();
        let y = Tensor::new(labels, &Device::Cpu).unwrap();
        let (hidden, logits) = hook.forward(|| m.mlp.forward(&x)).unwrap();
        let l = loss(&logits, &y).unwrap();
        let mut tensors = BTreeMap::new();
        if want_own {
            tensors.insert("relu1.output".to_string(), own(&hidden));
        }
        if train {
            let grads = hook.backward(&l).unwrap();
            hook.save_parameters(&m.vm).unwrap();
            hook.save_gradients(&m.vm, &grads).unwrap();
            if want_own {
                for (name, var) in m.vm.data().lock().unwrap().iter() {
                    tensors.insert(name.clone(), own(var.as_tensor()));
                    let g = grads.get(var.as_tensor()).unwrap();
                    tensors.insert(format!("gradient/{name}"), own(g));
                }
            }
            hook.optimizer(|| m.sgd.step(&grads)).unwrap();
        }
        let loss_value = own(&l).1[0];
        Pass {
            loss: l,
            loss_value,
            accuracy: accuracy(&logits, &y).unwrap(),
            own: tensors,
        }
    }

    fn tensor(&self, values: &[f32], shape: &[usize]) -> Tensor {
        Tensor::from_slice(values, shape, &Device::Cpu)
            .and_then(|t| t.to_dtype(self.dtype))
            .unwrap()
    }

    fn dtype(&self) -> DType {
        recorded_dtype(self.dtype)
    }

    fn reduction_tolerance(&self) -> f64 {
        // Accumulated in f64 on the CPU.
        1e-12
    }

    fn timed_modules(&self) -> &'static [&'static str] {
        // The wrapped ReLU.
        &["relu1"]
    }
}

smdebug_adapter_conformance::adapter_conformance!(CandleFixture { dtype: CDType::F32 });

fn hook_at(dir: &std::path::Path, builder: HookBuilder) -> CandleHook {
    CandleHook::new(builder, writer(dir)).unwrap()
}

#[test]
fn candles_linear_weights_are_recorded_as_out_by_in() {
    let dir = tempfile::tempdir().unwrap();
    let fx = CandleFixture { dtype: CDType::F32 };
    let mut hook = hook_at(
        dir.path(),
        Hook::builder().save_config(SaveConfig::every(5)),
    );
    let expected = train(&fx, &mut hook, 6, |s| s % 5 == 0);
    hook.close().unwrap();
    drop(hook);
    assert_run_matches(dir.path(), &expected, DType::F32);
    let trial = smdebug_read::trial::Trial::open(dir.path().to_str().unwrap()).unwrap();
    let w = trial.tensor("fc1.weight").unwrap();
    assert_eq!(w.raw(5, None, None).unwrap().shape(), &[32, 64]);
}

#[test]
fn half_and_double_precision_models_are_recorded_in_their_dtype() {
    for dtype in [CDType::F64, CDType::F16, CDType::BF16] {
        let dir = tempfile::tempdir().unwrap();
        let fx = CandleFixture { dtype };
        let mut hook = hook_at(
            dir.path(),
            Hook::builder().save_config(SaveConfig::every(3)),
        );
        let expected = train(&fx, &mut hook, 4, |s| s % 3 == 0);
        hook.close().unwrap();
        drop(hook);
        assert_run_matches(dir.path(), &expected, recorded_dtype(dtype));
    }
}

#[test]
fn device_reductions_of_finite_half_and_integer_tensors() {
    let assert_same = |got: f64, want: f64, what: &str| {
        let tol = 1e-12 * want.abs().max(1.0);
        assert!((got - want).abs() <= tol, "{what}: {got} vs {want}");
    };
    let values: Vec<f32> = (0..50).map(|i| (i as f32 - 20.0) * 0.37).collect();
    let dev = Device::Cpu;
    let rs = every_device_reduction();
    let f16s: Vec<half::f16> = values.iter().map(|v| half::f16::from_f32(*v)).collect();
    let t = Tensor::new(f16s.as_slice(), &dev).unwrap();
    let host = TensorView::from_slice(&f16s, &[50]).unwrap();
    let got = smdebug_candle::reduce::compute("h", &t, &rs).unwrap();
    for (r, g) in rs.iter().zip(got) {
        assert_same(g, r.compute(&host), &format!("f16 {r}"));
    }
    let ints: Vec<i64> = (0..50).map(|i| i * i - 300).collect();
    let t = Tensor::new(ints.as_slice(), &dev)
        .and_then(|t| t.reshape((5, 10)))
        .unwrap();
    let host = TensorView::from_slice(&ints, &[5, 10]).unwrap();
    let got = smdebug_candle::reduce::compute("i", &t, &rs).unwrap();
    for (r, g) in rs.iter().zip(got) {
        assert_same(g, r.compute(&host), &format!("i64 {r}"));
    }
}

#[test]
fn a_wrapped_model_is_the_forward_span_with_its_wrapped_layers_timed_inside() {
    let dir = tempfile::tempdir().unwrap();
    let fx = CandleFixture { dtype: CDType::F32 };
    let windows = TimelineConfig {
        detailed: Window::steps(1, 1),
        ..TimelineConfig::default()
    };
    let builder = Hook::builder().save_config(SaveConfig::new(SaveConfigMode::never()));
    let (mut hook, writer) = profiled_hook(&fx, dir.path(), builder, windows);
    let (_varmap, vb) = varmap(CDType::F32, &Device::Cpu);
    let fc1 = hook.wrap("fc1", candle_nn::linear(64, 10, vb.pp("fc1")).unwrap());
    let model = hook.wrap_model(candle_nn::seq().add(fc1).add(Activation::Relu));
    let x = Tensor::ones((4, 64), CDType::F32, &Device::Cpu).unwrap();
    hook.switch_mode(Mode::Train).unwrap();
    for _ in 0..3 {
        assert_eq!(model.forward(&x).unwrap().dims(), [4, 10]);
        hook.end_step().unwrap();
    }
    let spans = finish_profiled::<CandleFixture>(hook, writer, dir.path());
    let mut rows: Vec<(&str, &str, u64)> = spans
        .iter()
        .map(|s| (s.phase.as_str(), s.name.as_str(), s.step.unwrap()))
        .collect();
    rows.sort_unstable();
    let step = "Step:ModeKeys.TRAIN";
    assert_eq!(
        rows,
        [
            ("Forward", "forward", 0),
            ("Forward", "forward", 1),
            ("Forward", "forward", 2),
            (MODULE_ROW, "fc1", 1),
            (step, step, 0),
            (step, step, 1),
            (step, step, 2),
        ]
    );
    let at_1 = |phase: &str| spans.iter().find(|s| s.phase == phase && s.step == Some(1));
    let (forward, fc1) = (at_1("Forward").unwrap(), at_1(MODULE_ROW).unwrap());
    assert!(forward.start_us <= fc1.start_us && fc1.end_us <= forward.end_us);
}

#[test]
fn a_backward_pass_candle_cannot_run_is_an_error_and_the_hook_carries_on() {
    let sink = smdebug_core::MemorySink::default();
    let builder = Hook::builder().save_config(SaveConfig::every(1));
    let mut hook = CandleHook::new(builder, sink.clone()).unwrap();
    let x = candle_core::Var::ones((1, 2, 4), CDType::F32, &Device::Cpu).unwrap();
    let kernel = Tensor::ones((2, 1, 3), CDType::F32, &Device::Cpu).unwrap();
    // candle has no backward for a transposed 1-d convolution.
    let loss = x
        .conv_transpose1d(&kernel, 0, 0, 1, 1, 1)
        .and_then(|c| c.sum_all())
        .unwrap();
    let err = hook.backward(&loss).unwrap_err();
    assert!(
        matches!(err, smdebug_candle::Error::Backward { .. }),
        "{err:?}"
    );
    assert!(err.to_string().contains("conv-transpose1d"), "{err}");
    assert!(hook.save_loss("loss", &loss).unwrap());
    hook.step().unwrap();
    hook.close().unwrap();
    assert_eq!(sink.ended_steps(), [0]);
}
