//! A real MLP trained with tch on the digits set with capture on; the run is read back with
//! `Trial` and compared with libtorch's own tensors at the saved steps.

use std::collections::BTreeMap;
use std::path::Path;

use smdebug_core::{
    Collection, DType, EndReason, Hook, HookBuilder, Mode, Reduction, ReductionConfig, ReductionOp,
    SaveConfig, SaveConfigMode, TensorView,
};
use smdebug_examples::digits::{self, Digits};
use smdebug_io::trial::Trial;
use smdebug_io::writer::{OverflowPolicy, Writer};
use smdebug_tch::TchHook;
use tch::nn::{self, Module, OptimizerConfig};
use tch::{Device, Kind, Tensor};

type Expected = BTreeMap<(String, u64), (Vec<usize>, Vec<f64>)>;

fn hook_at(dir: &Path, builder: HookBuilder) -> TchHook {
    let storage = smdebug_io::open_storage(dir.to_str().unwrap()).unwrap();
    let writer = Writer::builder(storage)
        .overflow(OverflowPolicy::Block)
        .build()
        .unwrap();
    TchHook::new(builder, writer).unwrap()
}

/// Shape and every element as f64: the test's own reference, straight from libtorch.
fn own(t: &Tensor) -> (Vec<usize>, Vec<f64>) {
    let shape = t.size().iter().map(|d| *d as usize).collect();
    let flat = t.detach().to_kind(Kind::Double).reshape([-1]);
    let mut v = vec![0f64; flat.numel()];
    flat.copy_data(&mut v, flat.numel());
    (shape, v)
}

struct Data {
    x: Tensor,
    y: Tensor,
}

fn digits() -> Data {
    let d = Digits::load(&digits::default_path()).unwrap();
    let (train, _) = d.split(0.2, 1);
    let x: Vec<f32> = train.images.iter().copied().collect();
    let y: Vec<i64> = train.labels.iter().map(|l| *l as i64).collect();
    Data {
        x: Tensor::from_slice(&x).reshape([train.len() as i64, 64]),
        y: Tensor::from_slice(&y),
    }
}

/// Trains `steps` TRAIN steps of a 64-32-10 MLP (then `eval_steps` EVAL steps); at the steps
/// where `expect_at(mode, step)` holds, records what the run should contain.
fn train(
    hook: &mut TchHook,
    steps: i64,
    eval_steps: i64,
    expect_at: impl Fn(Mode, u64) -> bool,
) -> Expected {
    tch::manual_seed(7);
    let data = digits();
    let vs = nn::VarStore::new(Device::Cpu);
    let fc1 = nn::linear(vs.root() / "fc1", 64, 32, Default::default());
    let fc2 = nn::linear(vs.root() / "fc2", 32, 10, Default::default());
    let relu1 = hook.wrap("relu1", nn::func(|x| x.relu()));
    let mut opt = nn::Sgd::default().build(&vs, 0.1).unwrap();
    let mut expected = Expected::new();
    hook.set_mode(Mode::Train).unwrap();
    for (global, step) in (0..steps + eval_steps).enumerate() {
        let global = global as u64;
        if step == steps {
            hook.set_mode(Mode::Eval).unwrap();
        }
        let mode = hook.hook().mode();
        let x = data.x.narrow(0, (step * 32) % 1400, 32);
        let y = data.y.narrow(0, (step * 32) % 1400, 32);
        let hidden = relu1.forward(&fc1.forward(&x));
        let logits = fc2.forward(&hidden);
        let loss = logits.cross_entropy_for_logits(&y);
        if mode == Mode::Train {
            opt.zero_grad();
            loss.backward();
            hook.save_parameters(&vs).unwrap();
            hook.save_gradients(&vs).unwrap();
        }
        hook.save_loss("loss", &loss).unwrap();
        if expect_at(mode, hook.hook().mode_step()) {
            if mode == Mode::Train {
                for (name, var) in vs.variables() {
                    expected.insert((name.clone(), global), own(&var));
                    expected.insert((format!("gradient/{name}"), global), own(&var.grad()));
                }
            }
            expected.insert(("relu1.output".into(), global), own(&hidden));
            let (_, l) = own(&loss);
            expected.insert(("loss".into(), global), (vec![], l));
        }
        if mode == Mode::Train {
            opt.step();
        }
        hook.step().unwrap();
    }
    expected
}

fn assert_run_matches(dir: &Path, expected: &Expected) {
    let trial = Trial::open(dir.to_str().unwrap()).unwrap();
    let mut names = trial.tensor_names().unwrap();
    names.sort();
    let mut want: Vec<String> = expected.keys().map(|(n, _)| n.clone()).collect();
    want.sort();
    want.dedup();
    assert_eq!(names, want);
    for ((name, step), (shape, values)) in expected {
        let t = trial.tensor(name).unwrap().raw(*step, None, None).unwrap();
        let want_dtype = if name == "loss" {
            DType::F64
        } else {
            DType::F32
        };
        assert_eq!(t.dtype(), want_dtype, "{name}");
        assert_eq!(t.shape(), shape.as_slice(), "{name} at step {step}");
        if name == "loss" {
            // The loss goes through f64 on the host; libtorch computed it in f32.
            assert!(
                (t.to_f64_vec()[0] - values[0]).abs() < 1e-6,
                "{name} at {step}"
            );
        } else {
            assert_eq!(&t.to_f64_vec(), values, "{name} at step {step}");
        }
    }
}

#[test]
fn parameters_gradients_outputs_and_loss_equal_libtorchs_own() {
    let dir = tempfile::tempdir().unwrap();
    let mut hook = hook_at(
        dir.path(),
        Hook::builder()
            .save_config(SaveConfig::every(3).with_mode(Mode::Eval, SaveConfigMode::steps([1]))),
    );
    let expected = train(&mut hook, 8, 3, |mode, s| match mode {
        Mode::Train => s % 3 == 0,
        _ => s == 1,
    });
    hook.close().unwrap();
    drop(hook); // the writer publishes everything and stops its thread
    // TRAIN steps 0, 3, 6 and EVAL mode step 1 (global 9).
    let steps: Vec<u64> = expected.keys().map(|k| k.1).collect();
    assert!(steps.contains(&6) && steps.contains(&9) && !steps.contains(&1));
    assert_run_matches(dir.path(), &expected);
    let trial = Trial::open(dir.path().to_str().unwrap()).unwrap();
    assert_eq!(trial.steps(Some(Mode::Train)).unwrap(), vec![0, 3, 6]);
    assert_eq!(trial.steps(Some(Mode::Eval)).unwrap(), vec![1]);
    let weights = trial.tensor_names_filtered(Some("weights"), None).unwrap();
    assert_eq!(weights, vec!["fc1.weight", "fc2.weight"]);
    let biases = trial.tensor_names_filtered(Some("biases"), None).unwrap();
    assert_eq!(biases, vec!["fc1.bias", "fc2.bias"]);
    assert_eq!(trial.end_reason().unwrap(), Some(EndReason::Completed));
}

#[test]
fn reductions_only_are_computed_by_libtorch_and_match_the_host() {
    let dir = tempfile::tempdir().unwrap();
    let reductions: Vec<Reduction> = ReductionOp::ALL
        .into_iter()
        .flat_map(|op| [Reduction::new(op), Reduction::abs(op)])
        .collect();
    let mut hook = hook_at(
        dir.path(),
        Hook::builder()
            .save_config(SaveConfig::every(4))
            .collection(
                Collection::new("gradients")
                    .with_reductions(ReductionConfig::reductions_only(reductions.clone())),
            ),
    );
    let expected = train(&mut hook, 5, 0, |_, s| s % 4 == 0);
    hook.close().unwrap();
    drop(hook); // the writer publishes everything and stops its thread
    let trial = Trial::open(dir.path().to_str().unwrap()).unwrap();
    for ((name, step), (shape, values)) in &expected {
        if !name.starts_with("gradient/") {
            continue;
        }
        let t = trial.tensor(name).unwrap();
        assert!(t.raw(*step, None, None).is_err(), "{name}: only reductions");
        let host = TensorView::from_slice(values, shape).unwrap();
        for r in &reductions {
            let got = t.reduction_value(*step, *r, None, None).unwrap();
            let want = r.compute(&host);
            let tol = 1e-9 * want.abs().max(1.0);
            assert!(
                (got - want).abs() <= tol || (got.is_nan() && want.is_nan()),
                "{name} {r} at {step}: {got} vs {want}"
            );
        }
    }
}

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
fn a_stop_request_ends_the_loop_within_one_step_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    let mut hook = hook_at(
        dir.path(),
        Hook::builder().save_config(SaveConfig::every(1)),
    );
    let stop = hook.stop_signal();
    let vs = nn::VarStore::new(Device::Cpu);
    let fc = nn::linear(vs.root() / "fc", 4, 2, Default::default());
    let x = Tensor::ones([3, 4], (Kind::Float, Device::Cpu));
    let mut ran = 0;
    for step in 0..100 {
        if hook.stop_requested().is_some() {
            break;
        }
        let loss = fc.forward(&x).square().mean(Kind::Float);
        hook.save_loss("loss", &loss).unwrap();
        if step == 4 {
            stop.request("ExplodingTensor fired at step 4");
        }
        hook.step().unwrap();
        ran += 1;
    }
    hook.close().unwrap();
    drop(hook); // the writer publishes everything and stops its thread
    assert_eq!(ran, 5, "the loop saw the request at the next step");
    let trial = Trial::open(dir.path().to_str().unwrap()).unwrap();
    assert_eq!(trial.steps(None).unwrap(), vec![0, 1, 2, 3, 4]);
    assert_eq!(
        trial.end_reason().unwrap(),
        Some(EndReason::Stopped("ExplodingTensor fired at step 4".into()))
    );
}
