//! Capture through the adapter: what is saved at which step and mode, the collections tensors
//! land in, reductions computed on the device against the host's, losses, metrics and scalars,
//! probes, stop requests seen at the next step, closing (explicitly, twice, or on drop), and
//! configuration errors returned rather than panicking.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use smdebug_core::{
    Collection, DType, EndReason, Hook, MemorySink, Mode, Record, Reduction, ReductionConfig,
    ReductionOp, SaveConfig, SaveConfigMode, StepKey, StopSignal,
};
use smdebug_read::trial::Trial;
use smdebug_storage::testing::wait_for;

use crate::fixture::{
    Data, Fixture, assert_reduces_like_the_host, assert_run_matches, collection_members,
    every_device_reduction, hook_at, hook_members, memory_hook, ok, run_step, train,
};

/// Parameters, gradients, the relu1 output, the loss and the accuracy are recorded at the due
/// steps, equal to the model's own, in their collections.
pub fn recorded_tensors_equal_the_models_own_at_due_steps<F: Fixture>(fx: &F) {
    let dir = tempfile::tempdir().unwrap();
    let mut hook = hook_at(
        fx,
        dir.path(),
        Hook::builder().save_config(SaveConfig::every(5)),
    );
    let expected = train(fx, &mut hook, 12, |s| s % 5 == 0);
    ok(hook.as_mut().close());
    drop(hook);
    assert_run_matches(dir.path(), &expected, fx.dtype());
    let trial = Trial::open(dir.path().to_str().unwrap()).unwrap();
    assert_eq!(
        trial.tensor("fc1.weight").unwrap().steps(None).unwrap(),
        vec![0, 5, 10]
    );
    assert_eq!(
        collection_members(&trial, "weights"),
        ["fc1.weight", "fc2.weight"]
    );
    assert_eq!(
        collection_members(&trial, "biases"),
        ["fc1.bias", "fc2.bias"]
    );
    assert_eq!(
        collection_members(&trial, "gradients"),
        [
            "gradient/fc1.bias",
            "gradient/fc1.weight",
            "gradient/fc2.bias",
            "gradient/fc2.weight"
        ]
    );
    assert_eq!(collection_members(&trial, "outputs"), ["relu1.output"]);
    assert_eq!(collection_members(&trial, "losses"), ["loss"]);
    assert_eq!(collection_members(&trial, "metrics"), ["accuracy"]);
    assert_eq!(trial.end_reason().unwrap(), Some(EndReason::Completed));
}

/// TRAIN and EVAL steps follow their own schedules; the relu1 output is recorded in EVAL too
/// (capture points are re-armed when the mode changes).
pub fn per_mode_schedules_are_honoured_in_train_and_eval<F: Fixture>(fx: &F) {
    let dir = tempfile::tempdir().unwrap();
    let schedule = SaveConfig::new(SaveConfigMode::never())
        .with_mode(Mode::Train, SaveConfigMode::steps([1, 3]))
        .with_mode(Mode::Eval, SaveConfigMode::every(2));
    let mut hook = hook_at(fx, dir.path(), Hook::builder().save_config(schedule));
    let data = Data::load();
    let mut model = fx.model(&mut hook);
    let mut eval_losses = BTreeMap::new();
    for epoch in 0..2u64 {
        ok(hook.as_mut().set_mode(Mode::Train));
        for (x, y) in data.train_batches(64, 4, epoch) {
            run_step(fx, &mut model, &mut hook, &x, &y, true, false);
        }
        ok(hook.as_mut().set_mode(Mode::Eval));
        for (x, y) in data.test_batches(120) {
            let eval_step = hook.as_ref().hook().mode_step();
            let pass = run_step(fx, &mut model, &mut hook, x, y, false, false);
            if eval_step % 2 == 0 {
                eval_losses.insert(eval_step, pass.loss_value);
            }
        }
    }
    ok(hook.as_mut().close());
    drop(hook);
    let trial = Trial::open(dir.path().to_str().unwrap()).unwrap();
    let w = trial.tensor("fc1.weight").unwrap();
    // Train mode steps 1 and 3 only (the first epoch); the second epoch's train steps are 4..8.
    assert_eq!(w.steps(Some(Mode::Train)).unwrap(), vec![1, 3]);
    assert_eq!(w.steps(Some(Mode::Eval)).unwrap(), Vec::<u64>::new());
    let eval_steps: Vec<u64> = eval_losses.keys().copied().collect();
    // Three test batches per epoch, two epochs: eval steps 0..6, every second one due.
    assert_eq!(eval_steps, vec![0, 2, 4]);
    let loss = trial.tensor("loss").unwrap();
    assert_eq!(loss.steps(Some(Mode::Eval)).unwrap(), eval_steps);
    for (step, want) in &eval_losses {
        let got = loss.value(*step, Some(Mode::Eval), None).unwrap();
        assert_eq!(got.iter().copied().collect::<Vec<_>>(), vec![*want]);
    }
    let output = trial.tensor("relu1.output").unwrap();
    assert_eq!(output.steps(Some(Mode::Eval)).unwrap(), eval_steps);
    assert_eq!(trial.modes().unwrap(), vec![Mode::Train, Mode::Eval]);
}

/// Collections that ask only for reductions get only reductions, computed on the device where the
/// framework can (and equal to the host's), on the host otherwise (a product, on candle and burn).
pub fn reductions_only_collections_are_reduced_on_the_device_and_match_the_host<F: Fixture>(
    fx: &F,
) {
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
    let with_prod = [
        Reduction::new(ReductionOp::Prod),
        Reduction::new(ReductionOp::Mean),
    ];
    let builder = Hook::builder()
        .save_config(SaveConfig::every(2))
        .collection(
            Collection::new("gradients")
                .with_reductions(ReductionConfig::reductions_only(device_side)),
        )
        .collection(
            Collection::new("biases").with_reductions(ReductionConfig::reductions_only(with_prod)),
        );
    let mut hook = hook_at(fx, dir.path(), builder);
    let expected = train(fx, &mut hook, 3, |s| s % 2 == 0);
    ok(hook.as_mut().close());
    drop(hook);
    let trial = Trial::open(dir.path().to_str().unwrap()).unwrap();
    for name in ["gradient/fc1.weight", "gradient/fc2.bias", "fc1.bias"] {
        let raw = trial.tensor(name).and_then(|t| t.raw(0, None, None));
        assert!(raw.is_err(), "{name} was saved whole");
    }
    let weight = trial.tensor("fc1.weight").unwrap();
    assert!(weight.raw(2, None, None).is_ok());
    let mut checked = 0;
    for ((name, step), (_, values)) in &expected {
        let reductions: &[Reduction] = if name.starts_with("gradient/") {
            &device_side
        } else if name.ends_with(".bias") {
            &with_prod
        } else {
            continue;
        };
        for r in reductions {
            let t = trial.tensor(name).unwrap();
            let got = t.reduction_value(*step, *r, None, None).unwrap();
            let what = format!("{name} at {step}");
            assert_reduces_like_the_host(got, *r, values, fx.reduction_tolerance(), &what);
            checked += 1;
        }
    }
    assert_eq!(checked, 2 * (4 * device_side.len() + 2 * 2));
}

/// Every reduction of tensors holding NaN, infinities and zeros, of finite tensors, and of empty
/// tensors, saved through the adapter, equals the host's.
pub fn device_reductions_equal_the_host_ones_with_nan_inf_zeros_and_empty_tensors<F: Fixture>(
    fx: &F,
) {
    let device = every_device_reduction();
    let builder = Hook::builder()
        .save_config(SaveConfig::every(1))
        .collection(
            Collection::new("device")
                .with_reductions(ReductionConfig::reductions_only(device.iter().copied())),
        )
        .collection(
            Collection::new("prod").with_reductions(ReductionConfig::reductions_only([
                Reduction::new(ReductionOp::Prod),
                Reduction::abs(ReductionOp::Prod),
            ])),
        );
    let (mut hook, sink) = memory_hook(fx, builder);
    let special = vec![1.5f32, -2.0, 0.0, f32::NAN, f32::INFINITY, -3.25, 0.0];
    let finite: Vec<f32> = (0..500)
        .map(|i| ((i * 37) % 101) as f32 * 0.25 - 12.0)
        .collect();
    let small: Vec<f32> = (0..12).map(|i| (i as f32 - 5.5) * 0.37).collect();
    let cases: [(&str, Vec<f32>, Vec<usize>); 4] = [
        ("special", special.clone(), vec![special.len()]),
        ("finite", finite.clone(), vec![5, 100]),
        ("small", small, vec![3, 4]),
        ("empty", Vec::new(), vec![0, 3]),
    ];
    // Apart: a tensor asked for a product as well would go to the host whole on candle and burn.
    for (name, values, shape) in &cases {
        let t = fx.tensor(values, shape);
        assert!(
            ok(hook.as_mut().save_tensor(name, &t, &["device"])),
            "{name}"
        );
        let prod_name = format!("{name}/prod");
        assert!(
            ok(hook.as_mut().save_tensor(&prod_name, &t, &["prod"])),
            "{name}"
        );
    }
    ok(hook.as_mut().close());
    let got: BTreeMap<String, f64> = sink
        .tensors()
        .into_iter()
        .map(|t| (t.name, t.tensor.to_f64_vec()[0]))
        .collect();
    for (name, values, _) in &cases {
        let values: Vec<f64> = values.iter().map(|v| f64::from(*v)).collect();
        let prods = [
            Reduction::new(ReductionOp::Prod),
            Reduction::abs(ReductionOp::Prod),
        ];
        for r in &device {
            let value = got[&r.tensor_name(name)];
            assert_reduces_like_the_host(value, *r, &values, fx.reduction_tolerance(), name);
        }
        for r in &prods {
            let value = got[&r.tensor_name(&format!("{name}/prod"))];
            assert_reduces_like_the_host(value, *r, &values, fx.reduction_tolerance(), name);
        }
    }
    assert_eq!(got.len(), cases.len() * (device.len() + 2));
}

/// A step that holds nothing but device reductions is ended once, and a mode change closes it:
/// a step never mixes modes.
pub fn steps_holding_only_device_reductions_are_ended_once_and_never_mix_modes<F: Fixture>(fx: &F) {
    let builder =
        Hook::builder()
            .save_config(SaveConfig::every(1))
            .collection(Collection::new("weights").with_reductions(
                ReductionConfig::reductions_only([Reduction::new(ReductionOp::Mean)]),
            ));
    let (mut hook, sink) = memory_hook(fx, builder);
    let w = fx.tensor(&[1.0, 3.0], &[2]);
    ok(hook.as_mut().set_mode(Mode::Train));
    assert!(ok(hook.as_mut().save_tensor("fc.weight", &w, &["weights"])));
    ok(hook.as_mut().step());
    assert!(ok(hook.as_mut().save_tensor("fc.weight", &w, &["weights"])));
    // Switching mode closes step 1, which only the adapter wrote to.
    ok(hook.as_mut().set_mode(Mode::Eval));
    assert!(ok(hook.as_mut().save_tensor("fc.weight", &w, &["weights"])));
    ok(hook.as_mut().close());
    assert_eq!(sink.ended_steps(), vec![0, 1, 2]);
    let key = |step, mode, mode_step| StepKey {
        step,
        mode,
        mode_step,
    };
    let keys: Vec<(String, StepKey, f64)> = sink
        .tensors()
        .into_iter()
        .map(|t| (t.name, t.key, t.tensor.to_f64_vec()[0]))
        .collect();
    let mean = "smdebug/reductions/mean/fc.weight".to_string();
    assert_eq!(
        keys,
        vec![
            (mean.clone(), key(0, Mode::Train, 0), 2.0),
            (mean.clone(), key(1, Mode::Train, 1), 2.0),
            (mean, key(2, Mode::Eval, 0), 2.0)
        ]
    );
    assert!(matches!(
        sink.records.lock().unwrap().last(),
        Some(Record::Close(_))
    ));
}

/// A collection with a schedule of its own is saved at its steps even when the default schedule
/// never saves anything (the adapter's "nothing due" shortcut must not skip it).
pub fn a_collection_on_its_own_schedule_is_walked_when_the_default_is_never_due<F: Fixture>(
    fx: &F,
) {
    let builder = Hook::builder()
        .save_config(SaveConfig::new(SaveConfigMode::never()))
        .collection(Collection::new("gradients").with_save_config(SaveConfig::every(3)))
        .collection(Collection::new("biases").with_save_config(SaveConfig::every(4)));
    let (mut hook, sink) = memory_hook(fx, builder);
    let data = Data::load();
    let mut model = fx.model(&mut hook);
    ok(hook.as_mut().set_mode(Mode::Train));
    for (x, y) in data.train_batches(32, 5, 2) {
        run_step(fx, &mut model, &mut hook, &x, &y, true, false);
    }
    ok(hook.as_mut().close());
    let got: Vec<(u64, String)> = sink
        .tensors()
        .into_iter()
        .map(|t| (t.key.step, t.name))
        .collect();
    let mut got_sorted = got.clone();
    got_sorted.sort();
    let mut want: Vec<(u64, String)> = Vec::new();
    for step in [0u64, 3] {
        for name in ["fc1.bias", "fc1.weight", "fc2.bias", "fc2.weight"] {
            want.push((step, format!("gradient/{name}")));
        }
    }
    for step in [0u64, 4] {
        want.push((step, "fc1.bias".into()));
        want.push((step, "fc2.bias".into()));
    }
    want.sort();
    assert_eq!(got_sorted, want);
}

/// Probes keep the last tensor of a due step and save it in the collections named and those
/// whose regex matches; nothing is armed after the end.
pub fn probes_save_the_last_tensor_of_a_due_step_in_named_and_regex_collections<F: Fixture>(
    fx: &F,
) {
    let builder = Hook::builder()
        .save_config(SaveConfig::every(2))
        .include_regex("attention", "^l0/");
    let (mut hook, sink) = memory_hook(fx, builder);
    let regex = hook.as_mut().probe("l0/scores", &[]);
    let named = hook.as_mut().probe("l1/gate", &["extras"]);
    let unselected = hook.as_mut().probe("l1/scores", &[]);
    ok(hook.as_mut().set_mode(Mode::Train));
    let value = |v: f32| fx.tensor(&[v, v + 0.5], &[2]);
    let mut armed = Vec::new();
    for step in 0..4u8 {
        armed.push([&regex, &named, &unselected].map(|p| p.is_armed()));
        for probe in [&regex, &named, &unselected] {
            // Two forward passes in one step: the second one's tensor is the one saved.
            probe.record(&value(f32::from(step)));
            probe.record(&value(f32::from(step) + 10.0));
        }
        ok(hook.as_mut().step());
    }
    ok(hook.as_mut().close());
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
    let members = |name: &str| hook_members(hook.as_ref().hook(), name);
    assert_eq!(members("attention"), ["l0/scores"]);
    assert_eq!(members("extras"), ["l1/gate"]);
    // After the end nothing is armed, not even a probe made afterwards at a due step.
    let late = hook.as_mut().probe("l0/late", &[]);
    assert!(!regex.is_armed() && !named.is_armed() && !late.is_armed());
}

/// A record as the scalar test compares it: step, name, shape, dtype, values.
type Saved = (u64, String, Vec<usize>, DType, Vec<f64>);

/// A one-element loss is a scalar `f64` in `losses`, a larger one a tensor; metrics go to
/// `metrics`, scalars to the collections named, and nothing is saved at steps that are not due.
pub fn losses_metrics_and_scalars_land_in_their_collections<F: Fixture>(fx: &F) {
    let (mut hook, sink) = memory_hook(fx, Hook::builder().save_config(SaveConfig::every(2)));
    for _ in 0..3 {
        assert_eq!(
            ok(hook.as_mut().save_loss("loss", &fx.tensor(&[0.25], &[1]))),
            hook.as_ref().hook().mode_step() % 2 == 0
        );
        ok(hook
            .as_mut()
            .save_loss("per_sample", &fx.tensor(&[0.5, 1.5], &[2])));
        hook.as_mut().save_metric("accuracy", 0.75);
        hook.as_mut().save_scalar("lr", 0.125, &["schedule"]);
        ok(hook.as_mut().step());
    }
    ok(hook.as_mut().close());
    let got: Vec<Saved> = sink
        .tensors()
        .into_iter()
        .map(|t| {
            let shape = t.tensor.shape().to_vec();
            (
                t.key.step,
                t.name,
                shape,
                t.tensor.dtype(),
                t.tensor.to_f64_vec(),
            )
        })
        .collect();
    let want: Vec<Saved> = [0u64, 2]
        .into_iter()
        .flat_map(|s| {
            [
                (s, "loss".to_string(), vec![], DType::F64, vec![0.25]),
                (
                    s,
                    "per_sample".to_string(),
                    vec![2],
                    fx.dtype(),
                    vec![0.5, 1.5],
                ),
                (s, "accuracy".to_string(), vec![], DType::F64, vec![0.75]),
                (s, "lr".to_string(), vec![], DType::F64, vec![0.125]),
            ]
        })
        .collect();
    assert_eq!(got, want);
    let members = |name: &str| hook_members(hook.as_ref().hook(), name);
    assert_eq!(members("losses"), ["loss", "per_sample"]);
    assert_eq!(members("metrics"), ["accuracy"]);
    assert_eq!(members("schedule"), ["lr"]);
}

/// A stop request made during a step is seen by the loop at the next one, and the end marker
/// carries its reason.
pub fn a_stop_request_is_seen_at_the_next_step<F: Fixture>(fx: &F) {
    let dir = tempfile::tempdir().unwrap();
    let mut hook = hook_at(
        fx,
        dir.path(),
        Hook::builder().save_config(SaveConfig::every(1)),
    );
    let stop = hook.as_ref().stop_signal();
    let mut ran = 0;
    for step in 0..100 {
        if hook.as_ref().stop_requested().is_some() {
            break;
        }
        ok(hook
            .as_mut()
            .save_loss("loss", &fx.tensor(&[step as f32], &[1])));
        if step == 4 {
            stop.request("ExplodingTensor fired at step 4");
        }
        ok(hook.as_mut().step());
        ran += 1;
    }
    ok(hook.as_mut().close());
    drop(hook);
    assert_eq!(ran, 5, "the loop saw the request at the next step");
    let trial = Trial::open(dir.path().to_str().unwrap()).unwrap();
    assert_eq!(trial.steps(None).unwrap(), vec![0, 1, 2, 3, 4]);
    assert_eq!(
        trial.end_reason().unwrap(),
        Some(EndReason::Stopped("ExplodingTensor fired at step 4".into()))
    );
}

/// A watcher thread plays the rule: it reads the live run and asks the job to stop once step 6 is
/// on disk; the training loop stops within one step and the run ends with the reason.
pub fn a_stop_request_from_a_watcher_stops_the_loop_within_one_step<F: Fixture>(fx: &F) {
    let dir = tempfile::tempdir().unwrap();
    let stop = StopSignal::default();
    let mut hook = hook_at(
        fx,
        dir.path(),
        Hook::builder()
            .save_config(SaveConfig::every(1))
            .stop_signal(stop.clone()),
    );
    let data = Data::load();
    let mut model = fx.model(&mut hook);
    ok(hook.as_mut().set_mode(Mode::Train));
    // The loop's step, as the watcher sees it when it asks to stop.
    let progress = Arc::new(AtomicU64::new(0));
    let watcher = {
        let stop = stop.clone();
        let progress = progress.clone();
        let dir = dir.path().to_str().unwrap().to_string();
        std::thread::spawn(move || {
            // The run directory appears with the first step.
            let trial = wait_for(Duration::from_secs(120), "the run to appear", || {
                Trial::open(&dir).ok()
            });
            trial
                .wait_for_steps(&[6], None, Duration::from_secs(120))
                .unwrap();
            let at = progress.load(Ordering::SeqCst);
            stop.request("watcher saw step 6");
            at
        })
    };
    let mut steps_run = 0;
    for (x, y) in data.train_batches(32, 2_000, 3) {
        if hook.as_ref().stop_requested().is_some() {
            break;
        }
        run_step(fx, &mut model, &mut hook, &x, &y, true, false);
        steps_run += 1;
        progress.store(hook.as_ref().hook().global_step(), Ordering::SeqCst);
    }
    let step_at_request = watcher.join().unwrap();
    let stopped_at = hook.as_ref().hook().global_step();
    ok(hook.as_mut().close());
    drop(hook);
    assert!(steps_run < 2_000, "the loop stopped");
    let trial = Trial::open(dir.path().to_str().unwrap()).unwrap();
    assert_eq!(
        trial.end_reason().unwrap(),
        Some(EndReason::Stopped("watcher saw step 6".into()))
    );
    let loss_steps = trial.tensor("loss").unwrap().steps(None).unwrap();
    assert_eq!(loss_steps.last().map(|s| s + 1), Some(stopped_at));
    assert!(stopped_at >= 7);
    // The step running when the request came in was the last one.
    assert!(
        stopped_at <= step_at_request + 1,
        "requested during step {step_at_request}, stopped before step {stopped_at}"
    );
}

/// Closing twice is harmless; after closing nothing is saved or armed; a hook dropped without
/// closing still completes its run.
pub fn closing_is_idempotent_stops_saving_and_happens_on_drop<F: Fixture>(fx: &F) {
    let (mut hook, sink) = memory_hook(fx, Hook::builder().save_config(SaveConfig::every(1)));
    let data = Data::load();
    let mut model = fx.model(&mut hook);
    let batches = data.train_batches(16, 2, 4);
    let (x, y) = &batches[0];
    run_step(fx, &mut model, &mut hook, x, y, true, false);
    let before = sink.records.lock().unwrap().len();
    ok(hook.as_mut().close());
    ok(hook.as_mut().close());
    assert_eq!(sink.closes(), 1);
    let after_close = sink.records.lock().unwrap().len();
    assert!(after_close > before);
    // A whole step after the end: nothing is recorded, nothing fails.
    let t = fx.tensor(&[1.0, 2.0], &[2]);
    assert!(!ok(hook.as_mut().save_tensor("late", &t, &["weights"])));
    assert!(!ok(hook
        .as_mut()
        .save_loss("loss", &fx.tensor(&[1.0], &[1]))));
    assert!(!hook.as_mut().save_metric("accuracy", 1.0));
    assert!(!hook.as_mut().save_scalar("lr", 0.1, &["schedule"]));
    assert!(!hook.as_mut().is_due("late", &["weights"]) && !hook.as_ref().anything_due());
    let (x, y) = &batches[1];
    run_step(fx, &mut model, &mut hook, x, y, true, false);
    ok(hook.as_mut().set_mode(Mode::Eval));
    assert_eq!(sink.records.lock().unwrap().len(), after_close);
    drop(hook);
    assert_eq!(sink.closes(), 1);

    // Dropped without `close()`: the last step and the end marker are still written.
    let dir = tempfile::tempdir().unwrap();
    let mut hook = hook_at(
        fx,
        dir.path(),
        Hook::builder().save_config(SaveConfig::every(1)),
    );
    let mut model = fx.model(&mut hook);
    ok(hook.as_mut().set_mode(Mode::Train));
    let (x, y) = &batches[0];
    let pass = fx.pass(&mut model, &mut hook, x, y, true, false);
    ok(hook.as_mut().save_loss("loss", &pass.loss));
    drop(hook);
    let trial = Trial::open(dir.path().to_str().unwrap()).unwrap();
    assert!(trial.is_complete().unwrap());
    assert_eq!(trial.end_reason().unwrap(), Some(EndReason::Completed));
    assert_eq!(trial.tensor("loss").unwrap().steps(None).unwrap(), vec![0]);
    assert_eq!(
        trial.tensor("relu1.output").unwrap().steps(None).unwrap(),
        vec![0]
    );
}

/// A configuration the hook cannot use is an error from the adapter's constructor, not a panic.
pub fn configuration_errors_are_returned_not_panics<F: Fixture>(fx: &F) {
    let bad_regex = Hook::builder().include_regex("broken", "(unclosed");
    assert!(fx.hook(bad_regex, MemorySink::default()).is_err());
    let bad_rank = Hook::builder().worker(3, 2);
    let err = fx.hook(bad_rank, MemorySink::default()).err();
    let message = err.map(|e| e.to_string()).unwrap_or_default();
    assert!(message.contains("worker rank 3"), "{message:?}");
}
