//! A real burn MLP trained on the digits set with capture on; the run is read back with `Trial`
//! and compared with the model's own tensors.

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use burn::optim::{GradientsParams, SgdConfig};
use burn::tensor::{Device, Tensor};
use common::model::{DigitsTensors, Mlp, accuracy, loss};
use smdebug_burn::BurnHook;
use smdebug_core::{
    Collection, DType, EndReason, Hook, HookBuilder, Mode, Reduction, ReductionConfig, ReductionOp,
    SaveConfig, SaveConfigMode, StopSignal, TensorView,
};
use smdebug_io::trial::Trial;
use smdebug_io::writer::{OverflowPolicy, Writer};

type Expected = BTreeMap<(String, u64), (Vec<usize>, Vec<f64>)>;

fn hook_at(dir: &Path, builder: HookBuilder) -> BurnHook {
    // Back-pressure rather than dropping under load: the tests read back every tensor.
    let storage = smdebug_io::open_storage(dir.to_str().unwrap()).unwrap();
    let writer = Writer::builder(storage)
        .overflow(OverflowPolicy::Block)
        .build()
        .unwrap();
    BurnHook::new(builder, writer).unwrap()
}

/// burn 0.22 deprecates the ndarray backend in favour of `flex`; this crate builds ndarray, the
/// CPU backend the workspace already uses.
#[allow(deprecated)]
fn device() -> Device {
    Device::ndarray().autodiff()
}

/// The tensor as the test's own reference: shape and every element as f64.
fn own<const D: usize>(t: &Tensor<D>) -> (Vec<usize>, Vec<f64>) {
    let data = t.to_data();
    let values: Vec<f64> = data.iter::<f64>().collect();
    (t.dims().to_vec(), values)
}

/// Trains `steps` steps in TRAIN mode; at the steps where `expect_at(step)` holds, records what
/// the run should contain, taken from the model itself.
fn train(hook: &mut BurnHook, steps: usize, expect_at: impl Fn(u64) -> bool) -> Expected {
    let device = device();
    let data = DigitsTensors::load(&device).unwrap();
    let mut model = Mlp::new(&device);
    let mut optim = SgdConfig::new().init();
    let mut expected = Expected::new();
    hook.set_mode(Mode::Train);
    for (step, idx) in data.train_batches(32, steps, 1).into_iter().enumerate() {
        let step = step as u64;
        let x = data.train_x.clone().select(0, idx.clone());
        let y = data.train_y.clone().select(0, idx);
        let (hidden, logits) = model.forward(x);
        let l = loss(logits.clone(), y.clone());
        let grads = GradientsParams::from_grads(l.backward(), &model);
        hook.save_parameters(&model).unwrap();
        hook.save_gradients(&model, &grads).unwrap();
        hook.save_output("relu1", &hidden).unwrap();
        hook.save_loss("loss", &l).unwrap();
        let acc = accuracy(logits, y);
        hook.save_metric("accuracy", acc);
        if expect_at(step) {
            for (name, linear) in [("fc1", &model.fc1), ("fc2", &model.fc2)] {
                let w = &linear.weight;
                let b = linear.bias.as_ref().unwrap();
                expected.insert((format!("{name}.weight"), step), own(&w.val()));
                expected.insert((format!("{name}.bias"), step), own(&b.val()));
                let gw = grads.get::<2>(w.id).unwrap();
                let gb = grads.get::<1>(b.id).unwrap();
                expected.insert((format!("gradient/{name}.weight"), step), own(&gw));
                expected.insert((format!("gradient/{name}.bias"), step), own(&gb));
            }
            expected.insert(("relu1.output".into(), step), own(&hidden));
            expected.insert(("loss".into(), step), (vec![], own(&l).1));
            expected.insert(("accuracy".into(), step), (vec![], vec![acc]));
        }
        model = optim.step(0.1, model, grads);
        hook.step();
    }
    expected
}

fn assert_run_matches(dir: &Path, expected: &Expected) {
    let trial = Trial::open(dir.to_str().unwrap()).unwrap();
    let mut names: Vec<String> = trial.tensor_names().unwrap();
    names.sort();
    let mut want: Vec<String> = expected.keys().map(|(n, _)| n.clone()).collect();
    want.dedup();
    want.sort();
    assert_eq!(names, want);
    for ((name, step), (shape, values)) in expected {
        let t = trial.tensor(name).unwrap().raw(*step, None, None).unwrap();
        let scalar = name == "accuracy" || name == "loss";
        let want_dtype = if scalar { DType::F64 } else { DType::F32 };
        assert_eq!(t.dtype(), want_dtype, "{name}");
        assert_eq!(t.shape(), shape.as_slice(), "{name} at step {step}");
        assert_eq!(&t.to_f64_vec(), values, "{name} at step {step}");
    }
    assert!(trial.is_complete().unwrap());
}

#[test]
fn recorded_tensors_equal_the_models_own_at_due_steps() {
    let dir = tempfile::tempdir().unwrap();
    let mut hook = hook_at(
        dir.path(),
        Hook::builder().save_config(SaveConfig::every(5)),
    );
    let expected = train(&mut hook, 12, |s| s % 5 == 0);
    hook.close();
    drop(hook);
    assert_run_matches(dir.path(), &expected);
    let trial = Trial::open(dir.path().to_str().unwrap()).unwrap();
    let w = trial.tensor("fc1.weight").unwrap();
    assert_eq!(w.steps(None).unwrap(), vec![0, 5, 10]);
    assert_eq!(
        w.raw(5, None, None).unwrap().shape(),
        &[64, 32],
        "burn's Linear stores (in, out)"
    );
    let collections = trial.collections().unwrap();
    let members = |c: &str| -> Vec<String> {
        collections
            .iter()
            .find(|x| x.name() == c)
            .map(|x| x.tensor_names().iter().cloned().collect())
            .unwrap_or_default()
    };
    assert_eq!(members("weights"), vec!["fc1.weight", "fc2.weight"]);
    assert_eq!(members("biases"), vec!["fc1.bias", "fc2.bias"]);
    assert_eq!(
        members("gradients"),
        vec![
            "gradient/fc1.bias",
            "gradient/fc1.weight",
            "gradient/fc2.bias",
            "gradient/fc2.weight"
        ]
    );
    assert_eq!(members("outputs"), vec!["relu1.output"]);
}

#[test]
fn per_mode_schedules_are_honoured_in_train_and_eval() {
    let dir = tempfile::tempdir().unwrap();
    let schedule = SaveConfig::new(SaveConfigMode::never())
        .with_mode(Mode::Train, SaveConfigMode::steps([1, 3]))
        .with_mode(Mode::Eval, SaveConfigMode::every(2));
    let mut hook = hook_at(dir.path(), Hook::builder().save_config(schedule));
    let device = device();
    let data = DigitsTensors::load(&device).unwrap();
    let mut model = Mlp::new(&device);
    let mut optim = SgdConfig::new().init();
    let mut eval_losses = BTreeMap::new();
    for epoch in 0..2u64 {
        hook.set_mode(Mode::Train);
        for idx in data.train_batches(64, 4, epoch) {
            let x = data.train_x.clone().select(0, idx.clone());
            let y = data.train_y.clone().select(0, idx);
            let (_, logits) = model.forward(x);
            let l = loss(logits, y);
            let grads = GradientsParams::from_grads(l.backward(), &model);
            hook.save_parameters(&model).unwrap();
            hook.save_gradients(&model, &grads).unwrap();
            hook.save_loss("loss", &l).unwrap();
            model = optim.step(0.1, model, grads);
            hook.step();
        }
        hook.set_mode(Mode::Eval);
        let n = data.test_y.dims()[0];
        for start in (0..n).step_by(120) {
            let len = 120.min(n - start);
            let x = data.test_x.clone().narrow(0, start, len);
            let y = data.test_y.clone().narrow(0, start, len);
            let (hidden, logits) = model.forward(x);
            let l = loss(logits.clone(), y.clone());
            let eval_step = hook.hook().mode_step();
            if eval_step % 2 == 0 {
                eval_losses.insert(eval_step, own(&l).1);
            }
            hook.save_output("relu1", &hidden).unwrap();
            hook.save_loss("loss", &l).unwrap();
            hook.save_metric("accuracy", accuracy(logits, y));
            hook.step();
        }
    }
    hook.close();
    drop(hook);
    let trial = Trial::open(dir.path().to_str().unwrap()).unwrap();
    let w = trial.tensor("fc1.weight").unwrap();
    // Train mode steps 1 and 3 only (the first epoch); the second epoch's train steps are 4..8.
    assert_eq!(w.steps(Some(Mode::Train)).unwrap(), vec![1, 3]);
    assert_eq!(w.steps(Some(Mode::Eval)).unwrap(), Vec::<u64>::new());
    let eval_steps: Vec<u64> = eval_losses.keys().copied().collect();
    // Three test batches per epoch, two epochs: eval steps 0..6, every second one due.
    assert_eq!(eval_steps, vec![0, 2, 4]);
    assert_eq!(
        trial
            .tensor("loss")
            .unwrap()
            .steps(Some(Mode::Eval))
            .unwrap(),
        eval_steps
    );
    for (step, want) in &eval_losses {
        let got = trial
            .tensor("loss")
            .unwrap()
            .value(*step, Some(Mode::Eval), None)
            .unwrap();
        assert_eq!(&got.iter().copied().collect::<Vec<_>>(), want);
    }
    assert_eq!(
        trial
            .tensor("relu1.output")
            .unwrap()
            .steps(Some(Mode::Eval))
            .unwrap(),
        eval_steps
    );
    assert_eq!(trial.modes().unwrap(), vec![Mode::Train, Mode::Eval]);
}

#[test]
fn reductions_only_collections_are_reduced_on_the_device_and_match_the_host() {
    let dir = tempfile::tempdir().unwrap();
    let device_side = [
        Reduction::new(ReductionOp::Mean),
        Reduction::abs(ReductionOp::Max),
        Reduction::new(ReductionOp::Min),
        Reduction::new(ReductionOp::Std),
        Reduction::new(ReductionOp::Variance),
        Reduction::new(ReductionOp::L2),
        Reduction::abs(ReductionOp::L1),
        Reduction::new(ReductionOp::NanCount),
        Reduction::new(ReductionOp::InfCount),
        Reduction::new(ReductionOp::ZeroFraction),
    ];
    let builder = Hook::builder()
        .save_config(SaveConfig::every(2))
        .collection(
            Collection::new("gradients")
                .with_reductions(ReductionConfig::reductions_only(device_side)),
        )
        // Prod is left to the host: these tensors are read whole and reduced there.
        .collection(
            Collection::new("biases").with_reductions(ReductionConfig::reductions_only([
                Reduction::new(ReductionOp::Prod),
                Reduction::new(ReductionOp::Mean),
            ])),
        );
    let mut hook = hook_at(dir.path(), builder);
    let expected = train(&mut hook, 3, |s| s % 2 == 0);
    hook.close();
    drop(hook);
    let trial = Trial::open(dir.path().to_str().unwrap()).unwrap();
    for name in ["gradient/fc1.weight", "gradient/fc2.bias", "fc1.bias"] {
        let raw = trial.tensor(name).and_then(|t| t.raw(0, None, None));
        assert!(raw.is_err(), "{name} was saved whole");
    }
    assert!(
        trial
            .tensor("fc1.weight")
            .unwrap()
            .raw(2, None, None)
            .is_ok()
    );
    let mut checked = 0;
    for ((name, step), (shape, values)) in &expected {
        let (reductions, tol): (&[Reduction], f64) = if name.starts_with("gradient/") {
            // Reduced on the device in f32.
            (&device_side, 1e-5)
        } else if name.ends_with(".bias") {
            (
                &[
                    Reduction::new(ReductionOp::Prod),
                    Reduction::new(ReductionOp::Mean),
                ],
                1e-12,
            )
        } else {
            continue;
        };
        let host = TensorView::from_slice(values, shape).unwrap();
        for r in reductions {
            let got = trial
                .tensor(name)
                .unwrap()
                .reduction_value(*step, *r, None, None)
                .unwrap();
            let want = r.compute(&host);
            let scale = if r.op == ReductionOp::Min || r.op == ReductionOp::Max {
                want.abs()
            } else {
                // Sums of many f32 terms: scale the tolerance by the sum of magnitudes.
                values.iter().map(|v| v.abs()).sum::<f64>().max(want.abs())
            };
            assert!(
                (got - want).abs() <= tol * scale.max(1e-30),
                "{r} of {name} at {step}: {got} vs {want}"
            );
            checked += 1;
        }
    }
    assert_eq!(checked, 2 * (4 * device_side.len() + 2 * 2));
}

#[test]
fn a_stop_request_stops_the_loop_within_one_step() {
    let dir = tempfile::tempdir().unwrap();
    let stop = StopSignal::default();
    let mut hook = hook_at(
        dir.path(),
        Hook::builder()
            .save_config(SaveConfig::every(1))
            .stop_signal(stop.clone()),
    );
    let device = device();
    let data = DigitsTensors::load(&device).unwrap();
    let mut model = Mlp::new(&device);
    let mut optim = SgdConfig::new().init();
    hook.set_mode(Mode::Train);
    let progress = Arc::new(AtomicU64::new(0));
    // A watcher thread plays the rule: it reads the live run and asks the job to stop once step
    // 6 is on disk.
    let watcher = {
        let stop = stop.clone();
        let progress = progress.clone();
        let dir = dir.path().to_str().unwrap().to_string();
        std::thread::spawn(move || {
            let trial = loop {
                match Trial::open(&dir) {
                    Ok(t) => break t,
                    Err(_) => std::thread::sleep(std::time::Duration::from_millis(5)),
                }
            };
            trial
                .wait_for_steps(&[6], None, std::time::Duration::from_secs(120))
                .unwrap();
            let at = progress.load(Ordering::SeqCst);
            stop.request("watcher saw step 6");
            at
        })
    };
    let mut steps_run = 0;
    for idx in data.train_batches(32, 2_000, 3) {
        if hook.stop_requested().is_some() {
            break;
        }
        let x = data.train_x.clone().select(0, idx.clone());
        let y = data.train_y.clone().select(0, idx);
        let (_, logits) = model.forward(x);
        let l = loss(logits, y);
        let grads = GradientsParams::from_grads(l.backward(), &model);
        hook.save_gradients(&model, &grads).unwrap();
        hook.save_loss("loss", &l).unwrap();
        model = optim.step(0.1, model, grads);
        hook.step();
        steps_run += 1;
        progress.store(hook.hook().global_step(), Ordering::SeqCst);
    }
    let step_at_request = watcher.join().unwrap();
    let stopped_at = hook.hook().global_step();
    hook.close();
    drop(hook);
    assert!(steps_run < 2_000, "the loop stopped");
    let trial = Trial::open(dir.path().to_str().unwrap()).unwrap();
    assert_eq!(
        trial.end_reason().unwrap(),
        Some(EndReason::Stopped("watcher saw step 6".into()))
    );
    let last = *trial
        .tensor("loss")
        .unwrap()
        .steps(None)
        .unwrap()
        .last()
        .unwrap();
    assert_eq!(last + 1, stopped_at);
    assert!(stopped_at >= 7);
    assert!(
        stopped_at <= step_at_request + 1,
        "requested during step {step_at_request}, stopped before step {stopped_at}"
    );
}
