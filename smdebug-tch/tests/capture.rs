//! The adapter conformance suite (smdebug-adapter-conformance) run against tch: a real MLP
//! trained with libtorch on the digits set with capture on, read back with `Trial` and compared
//! with libtorch's own tensors; plus what only this adapter has here, libtorch's element types.

use std::collections::BTreeMap;
use std::path::Path;

use smdebug_adapter_conformance::{Fixture, Own, Pass, finish_profiled, profiled_hook, writer};
use smdebug_core::timeline::{MODULE_ROW, TimelineConfig};
use smdebug_core::window::Window;
use smdebug_core::{
    Capture, DType, Hook, HookBuilder, MemorySink, Mode, SaveConfig, SaveConfigMode, Sink,
};
use smdebug_read::trial::Trial;
use smdebug_tch::{Recorded, Tch, TchHook};
use tch::nn::{self, Module, ModuleT, OptimizerConfig};
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
        let (hidden, logits) = hook.forward(|| {
            let hidden = m.relu1.forward(&m.fc1.forward(&x));
            let logits = m.fc2.forward(&hidden);
            (hidden, logits)
        });
        let loss = logits.cross_entropy_for_logits(&y);
        let mut tensors = BTreeMap::new();
        if want_own {
            tensors.insert("relu1.output".to_string(), own(&hidden));
        }
        if train {
            m.opt.zero_grad();
            hook.backward(&loss).unwrap();
            hook.save_parameters(&m.vs).unwrap();
            hook.save_gradients(&m.vs).unwrap();
            if want_own {
                for (name, var) in m.vs.variables() {
                    tensors.insert(format!("gradient/{name}"), own(&var.grad()));
                    tensors.insert(name, own(&var));
                }
            }
            hook.optimizer(|| m.opt.step());
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

    fn timed_modules(&self) -> &'static [&'static str] {
        // The wrapped ReLU.
        &["relu1"]
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

#[test]
fn a_wrapped_model_is_the_forward_span_with_its_wrapped_layers_timed_inside() {
    let dir = tempfile::tempdir().unwrap();
    let windows = TimelineConfig {
        detailed: Window::steps(1, 1),
        ..TimelineConfig::default()
    };
    let builder = Hook::builder().save_config(SaveConfig::new(SaveConfigMode::never()));
    let (mut hook, writer) = profiled_hook(&TchFixture, dir.path(), builder, windows);
    let vs = nn::VarStore::new(tch::Device::Cpu);
    let fc1 = hook.wrap(
        "fc1",
        nn::linear(vs.root() / "fc1", 64, 10, Default::default()),
    );
    let dropout = hook.wrap_t("dropout", nn::func_t(|x, train| x.dropout(0.5, train)));
    // A model with a train flag for training, a plain one for evaluation.
    let train_model = hook.wrap_model_t(nn::seq_t().add(fc1).add(dropout));
    let eval_model = hook.wrap_model(nn::seq().add_fn(|x| x.relu()));
    let x = Tensor::ones([4, 64], (Kind::Float, tch::Device::Cpu));
    hook.switch_mode(Mode::Train).unwrap();
    for _ in 0..3 {
        assert_eq!(train_model.forward_t(&x, true).size(), [4, 10]);
        hook.end_step().unwrap();
    }
    hook.switch_mode(Mode::Eval).unwrap();
    assert_eq!(eval_model.forward(&x).size(), [4, 64]);
    hook.end_step().unwrap();
    let spans = finish_profiled::<TchFixture>(hook, writer, dir.path());
    let mut rows: Vec<(&str, &str, Option<Mode>, u64)> = spans
        .iter()
        .map(|s| (s.phase.as_str(), s.name.as_str(), s.mode, s.step.unwrap()))
        .collect();
    rows.sort_unstable();
    let (train, eval) = ("Step:ModeKeys.TRAIN", "Step:ModeKeys.EVAL");
    let t = Some(Mode::Train);
    assert_eq!(
        rows,
        [
            ("Forward", "forward", t, 0),
            ("Forward", "forward", t, 1),
            ("Forward", "forward", t, 2),
            ("Forward", "forward", Some(Mode::Eval), 0),
            (MODULE_ROW, "dropout", t, 1),
            (MODULE_ROW, "fc1", t, 1),
            (eval, eval, Some(Mode::Eval), 0),
            (train, train, t, 0),
            (train, train, t, 1),
            (train, train, t, 2),
        ]
    );
    let at_1 = |phase: &str| spans.iter().find(|s| s.phase == phase && s.step == Some(1));
    let forward = at_1("Forward").unwrap();
    for module in spans.iter().filter(|s| s.phase == MODULE_ROW) {
        assert!(forward.start_us <= module.start_us && module.end_us <= forward.end_us);
    }
}

#[test]
fn a_backward_pass_libtorch_cannot_run_is_an_error_and_the_hook_carries_on() {
    let sink = MemorySink::default();
    let builder = Hook::builder().save_config(SaveConfig::every(1));
    let mut hook = TchHook::new(builder, sink.clone()).unwrap();
    // Nothing in this loss requires a gradient.
    let loss = Tensor::from_slice(&[1.5f32, 2.0]).sum(Kind::Float);
    let err = hook.backward(&loss).unwrap_err();
    assert!(
        matches!(err, smdebug_tch::Error::Backward { .. }),
        "{err:?}"
    );
    assert!(hook.save_loss("loss", &loss).unwrap());
    hook.step().unwrap();
    hook.close().unwrap();
    assert_eq!(sink.ended_steps(), [0]);
}
