//! A real MLP trained on the digits set with capture on; the run is read back with `Trial` and
//! compared with the model's own tensors.

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use candle_core::{DType as CDType, Device, Tensor};
use candle_nn::{Optimizer, SGD, VarMap};
use common::model::{DigitsTensors, Mlp, accuracy, loss, varmap};
use smdebug_candle::{CandleHook, recorded_dtype};
use smdebug_core::{
    Collection, DType, EndReason, Hook, HookBuilder, Mode, Reduction, ReductionConfig, ReductionOp,
    SaveConfig, SaveConfigMode, StopSignal, TensorView,
};
use smdebug_io::trial::Trial;
use smdebug_io::writer::{OverflowPolicy, Writer};

type Expected = BTreeMap<(String, u64), (Vec<usize>, Vec<f64>)>;

fn hook_at(dir: &Path, builder: HookBuilder) -> CandleHook {
    // Back-pressure rather than dropping under load: the tests read back every tensor.
    let storage = smdebug_io::open_storage(dir.to_str().unwrap()).unwrap();
    let writer = Writer::builder(storage)
        .overflow(OverflowPolicy::Block)
        .build()
        .unwrap();
    CandleHook::new(builder, writer).unwrap()
}

/// The tensor as the test's own reference: shape and every element as f64 (exact for the float
/// types the model uses).
fn own(t: &Tensor) -> (Vec<usize>, Vec<f64>) {
    let v = t
        .flatten_all()
        .unwrap()
        .to_dtype(CDType::F64)
        .unwrap()
        .to_vec1::<f64>()
        .unwrap();
    (t.dims().to_vec(), v)
}

/// Trains `steps` steps in TRAIN mode; at the steps where `expect_at(step)` holds, records what
/// the run should contain, taken from the model itself.
fn train(
    hook: &mut CandleHook,
    dtype: CDType,
    steps: usize,
    expect_at: impl Fn(u64) -> bool,
) -> (Expected, VarMap) {
    let dev = Device::Cpu;
    let data = DigitsTensors::load(dtype, &dev).unwrap();
    let (vm, vb) = varmap(dtype, &dev);
    let model = Mlp::new(vb, hook).unwrap();
    let mut sgd = SGD::new(vm.all_vars(), 0.1).unwrap();
    let mut expected = Expected::new();
    hook.set_mode(Mode::Train).unwrap();
    for (step, idx) in data.train_batches(32, steps, 1).unwrap().iter().enumerate() {
        let step = step as u64;
        let x = data.train_x.index_select(idx, 0).unwrap();
        let y = data.train_y.index_select(idx, 0).unwrap();
        let (hidden, logits) = model.forward(&x).unwrap();
        let l = loss(&logits, &y).unwrap();
        let grads = l.backward().unwrap();
        hook.save_parameters(&vm).unwrap();
        hook.save_gradients(&vm, &grads).unwrap();
        hook.save_loss("loss", &l).unwrap();
        hook.save_metric("accuracy", accuracy(&logits, &y).unwrap());
        if expect_at(step) {
            for (name, var) in vm.data().lock().unwrap().iter() {
                expected.insert((name.clone(), step), own(var.as_tensor()));
                let g = grads.get(var.as_tensor()).unwrap();
                expected.insert((format!("gradient/{name}"), step), own(g));
            }
            expected.insert(("relu1.output".into(), step), own(&hidden));
            expected.insert(("loss".into(), step), (vec![], own(&l).1));
            let acc = accuracy(&logits, &y).unwrap();
            expected.insert(("accuracy".into(), step), (vec![], vec![acc]));
        }
        sgd.step(&grads).unwrap();
        hook.step().unwrap();
    }
    (expected, vm)
}

fn assert_run_matches(dir: &Path, expected: &Expected, dtype: DType) {
    let trial = Trial::open(dir.to_str().unwrap()).unwrap();
    let mut names: Vec<String> = trial.tensor_names().unwrap();
    names.sort();
    let mut want: Vec<String> = expected.keys().map(|(n, _)| n.clone()).collect();
    want.dedup();
    want.sort();
    assert_eq!(names, want);
    for ((name, step), (shape, values)) in expected {
        let t = trial.tensor(name).unwrap().raw(*step, None, None).unwrap();
        let scalar = name == "loss" || name == "accuracy";
        if scalar {
            assert_eq!(t.dtype(), DType::F64, "{name}");
        } else {
            assert_eq!(t.dtype(), dtype, "{name}");
        }
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
    let (expected, _) = train(&mut hook, CDType::F32, 12, |s| s % 5 == 0);
    hook.close().unwrap();
    drop(hook);
    assert_run_matches(dir.path(), &expected, DType::F32);
    let trial = Trial::open(dir.path().to_str().unwrap()).unwrap();
    assert_eq!(
        trial.tensor("fc1.weight").unwrap().steps(None).unwrap(),
        vec![0, 5, 10]
    );
    assert_eq!(
        trial
            .tensor("fc1.weight")
            .unwrap()
            .raw(5, None, None)
            .unwrap()
            .shape(),
        &[32, 64],
        "candle's Linear stores (out, in)"
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
fn half_and_double_precision_models_are_recorded_in_their_dtype() {
    for dtype in [CDType::F64, CDType::F16, CDType::BF16] {
        let dir = tempfile::tempdir().unwrap();
        let mut hook = hook_at(
            dir.path(),
            Hook::builder().save_config(SaveConfig::every(3)),
        );
        let (expected, _) = train(&mut hook, dtype, 4, |s| s % 3 == 0);
        hook.close().unwrap();
        drop(hook);
        assert_run_matches(dir.path(), &expected, recorded_dtype(dtype));
    }
}

#[test]
fn per_mode_schedules_are_honoured_in_train_and_eval() {
    let dir = tempfile::tempdir().unwrap();
    let schedule = SaveConfig::new(SaveConfigMode::never())
        .with_mode(Mode::Train, SaveConfigMode::steps([1, 3]))
        .with_mode(Mode::Eval, SaveConfigMode::every(2));
    let mut hook = hook_at(dir.path(), Hook::builder().save_config(schedule));
    let dev = Device::Cpu;
    let data = DigitsTensors::load(CDType::F32, &dev).unwrap();
    let (vm, vb) = varmap(CDType::F32, &dev);
    let model = Mlp::new(vb, &mut hook).unwrap();
    let mut sgd = SGD::new(vm.all_vars(), 0.1).unwrap();
    let mut eval_losses = BTreeMap::new();
    for epoch in 0..2u64 {
        hook.set_mode(Mode::Train).unwrap();
        for idx in data.train_batches(64, 4, epoch).unwrap() {
            let x = data.train_x.index_select(&idx, 0).unwrap();
            let y = data.train_y.index_select(&idx, 0).unwrap();
            let (_, logits) = model.forward(&x).unwrap();
            let l = loss(&logits, &y).unwrap();
            let grads = l.backward().unwrap();
            hook.save_parameters(&vm).unwrap();
            hook.save_gradients(&vm, &grads).unwrap();
            hook.save_loss("loss", &l).unwrap();
            sgd.step(&grads).unwrap();
            hook.step().unwrap();
        }
        hook.set_mode(Mode::Eval).unwrap();
        let n = data.test_y.dim(0).unwrap();
        for start in (0..n).step_by(120) {
            let len = 120.min(n - start);
            let x = data.test_x.narrow(0, start, len).unwrap();
            let y = data.test_y.narrow(0, start, len).unwrap();
            let (_, logits) = model.forward(&x).unwrap();
            let l = loss(&logits, &y).unwrap();
            let eval_step = hook.hook().mode_step();
            if eval_step % 2 == 0 {
                eval_losses.insert(eval_step, l.to_scalar::<f32>().unwrap() as f64);
            }
            hook.save_loss("loss", &l).unwrap();
            hook.save_metric("accuracy", accuracy(&logits, &y).unwrap());
            hook.step().unwrap();
        }
    }
    hook.close().unwrap();
    drop(hook);
    let trial = Trial::open(dir.path().to_str().unwrap()).unwrap();
    let w = trial.tensor("fc1.weight").unwrap();
    // Train mode steps 1 and 3 only (the first epoch); the second epoch's train steps are 4..8.
    assert_eq!(w.steps(Some(Mode::Train)).unwrap(), vec![1, 3]);
    assert_eq!(w.steps(Some(Mode::Eval)).unwrap(), Vec::<u64>::new());
    let eval_steps: Vec<u64> = eval_losses.keys().copied().collect();
    assert_eq!(
        trial
            .tensor("loss")
            .unwrap()
            .steps(Some(Mode::Eval))
            .unwrap(),
        eval_steps
    );
    // Three test batches per epoch, two epochs: eval steps 0..6, every second one due.
    assert_eq!(eval_steps, vec![0, 2, 4]);
    for (step, want) in &eval_losses {
        let got = trial
            .tensor("loss")
            .unwrap()
            .value(*step, Some(Mode::Eval), None)
            .unwrap();
        assert_eq!(got.iter().copied().collect::<Vec<_>>(), vec![*want]);
    }
    // relu1's output is recorded in eval at the due steps too (the wrapper is re-armed per mode).
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
        // Prod has no candle reduction: these tensors take the host path.
        .collection(
            Collection::new("biases").with_reductions(ReductionConfig::reductions_only([
                Reduction::new(ReductionOp::Prod),
                Reduction::new(ReductionOp::Mean),
            ])),
        );
    let mut hook = hook_at(dir.path(), builder);
    let (expected, _) = train(&mut hook, CDType::F32, 3, |s| s % 2 == 0);
    hook.close().unwrap();
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
        let reductions: &[Reduction] = if name.starts_with("gradient/") {
            &device_side
        } else if name.ends_with(".bias") {
            &[
                Reduction::new(ReductionOp::Prod),
                Reduction::new(ReductionOp::Mean),
            ]
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
            let tol = 1e-12 * want.abs().max(1.0);
            assert!(
                (got - want).abs() <= tol,
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
    let dev = Device::Cpu;
    let data = DigitsTensors::load(CDType::F32, &dev).unwrap();
    let (vm, vb) = varmap(CDType::F32, &dev);
    let model = Mlp::new(vb, &mut hook).unwrap();
    let mut sgd = SGD::new(vm.all_vars(), 0.1).unwrap();
    hook.set_mode(Mode::Train).unwrap();
    let mut steps_run = 0;
    // The loop's step, as the watcher sees it when it asks to stop.
    let progress = Arc::new(AtomicU64::new(0));
    // A watcher thread plays the rule: it reads the live run and asks the job to stop once step
    // 6 is on disk.
    let watcher = {
        let stop = stop.clone();
        let progress = progress.clone();
        let dir = dir.path().to_str().unwrap().to_string();
        std::thread::spawn(move || {
            // The run directory appears with the first step.
            let trial = loop {
                match Trial::open(&dir) {
                    Ok(t) => break t,
                    Err(_) => std::thread::sleep(std::time::Duration::from_millis(5)),
                }
            };
            trial
                .wait_for_steps(&[6], None, std::time::Duration::from_secs(60))
                .unwrap();
            let at = progress.load(Ordering::SeqCst);
            stop.request("watcher saw step 6");
            at
        })
    };
    for idx in data.train_batches(32, 10_000, 3).unwrap() {
        if hook.stop_requested().is_some() {
            break;
        }
        let x = data.train_x.index_select(&idx, 0).unwrap();
        let y = data.train_y.index_select(&idx, 0).unwrap();
        let (_, logits) = model.forward(&x).unwrap();
        let l = loss(&logits, &y).unwrap();
        let grads = l.backward().unwrap();
        hook.save_gradients(&vm, &grads).unwrap();
        hook.save_loss("loss", &l).unwrap();
        sgd.step(&grads).unwrap();
        hook.step().unwrap();
        steps_run += 1;
        progress.store(hook.hook().global_step(), Ordering::SeqCst);
    }
    let step_at_request = watcher.join().unwrap();
    let stopped_at = hook.hook().global_step();
    hook.close().unwrap();
    drop(hook);
    assert!(steps_run < 10_000, "the loop stopped");
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
    // The step running when the request came in was the last one.
    assert!(
        stopped_at <= step_at_request + 1,
        "requested during step {step_at_request}, stopped before step {stopped_at}"
    );
}
