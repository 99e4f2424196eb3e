//! Tests of the hook.

use super::*;

use crate::collection::Collection;
use crate::config::{CaptureRequest, HookConfig};
use crate::mode::Mode;
use crate::reduction::{Reduction, ReductionConfig, ReductionOp};
use crate::save_config::SaveConfig;
use crate::save_config::SaveConfigMode;
use crate::sink::MemorySink;
use crate::sink::{EndReason, Record, StepKey, StringRecord};
use crate::strings::StringTensor;
use crate::tensor::TensorView;

fn hook(sink: &MemorySink, b: HookBuilder) -> Hook {
    b.build(sink.clone()).unwrap()
}

/// A collection saved only as its mean and its largest absolute value.
fn mean_and_abs_max(name: &str) -> Collection {
    Collection::new(name).with_reductions(ReductionConfig::reductions_only([
        Reduction::new(ReductionOp::Mean),
        Reduction::abs(ReductionOp::Max),
    ]))
}

/// Name, step and values of every tensor record.
fn saved(sink: &MemorySink) -> Vec<(String, u64, Vec<f64>)> {
    sink.tensors()
        .into_iter()
        .map(|t| (t.name, t.key.step, t.tensor.to_f64_vec()))
        .collect()
}

/// The two reductions of `gradient/fc.w` at `step`, as [`mean_and_abs_max`] saves them
/// for the gradient `[-3, 1]`.
fn fc_w_reductions(step: u64) -> Vec<(String, u64, Vec<f64>)> {
    vec![
        (
            "smdebug/reductions/mean/gradient/fc.w".into(),
            step,
            vec![-1.0],
        ),
        (
            "smdebug/reductions/abs_max/gradient/fc.w".into(),
            step,
            vec![3.0],
        ),
    ]
}

#[test]
fn per_mode_schedules_and_step_counters() {
    let sink = MemorySink::default();
    let mut h = hook(
        &sink,
        Hook::builder()
            .save_config(SaveConfig::every(2).with_mode(Mode::Eval, SaveConfigMode::steps([1]))),
    );
    let w = [1.0f32, 2.0];
    let v = TensorView::from_slice(&w, &[2]).unwrap();
    h.set_mode(Mode::Train);
    for _ in 0..4 {
        h.save_tensor("w", &v, &["weights"]);
        h.step();
    }
    h.set_mode(Mode::Eval);
    for _ in 0..3 {
        h.save_tensor("w", &v, &["weights"]);
        h.step();
    }
    h.close();
    let keys: Vec<(u64, Mode, u64)> = sink
        .tensors()
        .iter()
        .map(|t| (t.key.step, t.key.mode, t.key.mode_step))
        .collect();
    assert_eq!(
        keys,
        vec![(0, Mode::Train, 0), (2, Mode::Train, 2), (5, Mode::Eval, 1)]
    );
    assert!(matches!(
        sink.records.lock().unwrap().last(),
        Some(Record::Close(EndReason::Completed))
    ));
    assert_eq!(sink.ended_steps(), vec![0, 2, 5]);
}

/// String tensors follow their collections' schedule like numbers, end their step, join
/// their collections and become text summaries when TensorBoard output is on.
#[test]
fn string_tensors_are_saved_when_their_collection_is_due() {
    let sink = MemorySink::default();
    let mut h = hook(
        &sink,
        Hook::builder()
            .save_config(SaveConfig::every(2))
            .export_tensorboard(true),
    );
    let labels = StringTensor::from_strs(&["cat", "dog"]);
    let mut saved = Vec::new();
    for _ in 0..4 {
        saved.push(h.save_strings("labels", &labels, &["labels"]));
        h.step();
    }
    h.close();
    assert_eq!(saved, [true, false, true, false]);
    let records = sink.records.lock().unwrap();
    let strings: Vec<&StringRecord> = records
        .iter()
        .filter_map(|r| match r {
            Record::Strings(s) => Some(s),
            _ => None,
        })
        .collect();
    assert_eq!(strings.len(), 2);
    assert_eq!((strings[1].key.step, strings[1].value.clone()), (2, labels));
    assert!(strings.iter().all(|s| s.tb_text && s.name == "labels"));
    drop(records);
    assert_eq!(sink.ended_steps(), [0, 2]);
    // A closed hook saves nothing.
    assert!(!h.save_strings("labels", &StringTensor::from_strs(&["x"]), &["labels"]));
}

#[test]
fn collections_left_out_of_the_included_list_are_not_saved() {
    let sink = MemorySink::default();
    let config = HookConfig::from_smdebug_json(
        r#"{"HookParameters": {"save_interval": "1"},
            "CollectionConfigurations": [{"CollectionName": "gradients"}]}"#,
    )
    .unwrap();
    let mut h = hook(&sink, HookBuilder::from_config(config));
    let x = [1.0f32, 2.0];
    let v = TensorView::from_slice(&x, &[2]).unwrap();
    assert!(h.save_tensor("gradient/fc.w", &v, &[]));
    assert!(!h.save_tensor("fc.w", &v, &["weights"]));
    assert!(
        h.save_scalar("loss", 0.5, &["losses"]),
        "losses are always included"
    );
    h.step();
    let names: Vec<String> = sink.tensors().into_iter().map(|t| t.name).collect();
    assert_eq!(names, ["gradient/fc.w", "loss"]);
}

#[test]
fn with_include_workers_one_only_worker_0_saves_and_says_one_worker() {
    let config = HookConfig::from_smdebug_json(
        r#"{"HookParameters": {"save_interval": "1", "include_workers": "one"}}"#,
    )
    .unwrap();
    let x = [1.0f32];
    let v = TensorView::from_slice(&x, &[1]).unwrap();
    let mut collections_files = Vec::new();
    for rank in 0..2 {
        let sink = MemorySink::default();
        let mut h = hook(
            &sink,
            HookBuilder::from_config(config.clone()).worker(rank, 2),
        );
        assert_eq!(h.anything_due(), rank == 0);
        assert_eq!(h.save_tensor("fc.w", &v, &["weights"]), rank == 0);
        h.step();
        h.close();
        assert_eq!(
            sink.tensors().len(),
            usize::from(rank == 0),
            "worker {rank}"
        );
        collections_files.push(
            sink.records
                .lock()
                .unwrap()
                .iter()
                .filter_map(|r| match r {
                    Record::Collections(json) => Some(json["_meta"]["num_workers"].clone()),
                    _ => None,
                })
                .collect::<Vec<_>>(),
        );
    }
    assert!(
        collections_files[0].iter().all(|n| n == 1),
        "{collections_files:?}"
    );
    assert!(!collections_files[0].is_empty() && collections_files[1].is_empty());
}

#[test]
fn reductions_replace_or_join_raw_tensors() {
    let sink = MemorySink::default();
    let mut h = hook(
        &sink,
        Hook::builder()
            .save_config(SaveConfig::every(1))
            .collection(mean_and_abs_max("gradients")),
    );
    let g = [-3.0f32, 1.0];
    h.save_tensor(
        "gradient/fc.w",
        &TensorView::from_slice(&g, &[2]).unwrap(),
        &[],
    );
    h.step();
    assert_eq!(
        saved(&sink),
        fc_w_reductions(0),
        "the gradients collection matched by its built-in regex, reductions only"
    );
}

#[test]
fn reductions_computed_elsewhere_are_recorded_like_the_hooks_own() {
    let sink = MemorySink::default();
    let mut h = hook(
        &sink,
        Hook::builder()
            .save_config(SaveConfig::every(2))
            .collection(mean_and_abs_max("gradients"))
            .collection(Collection::new("weights")),
    );
    let due = h.due_tensor("gradient/fc.w", &["gradients"]).unwrap();
    assert!(due.reductions_only());
    assert_eq!(due.reductions.len(), 2);
    assert!(
        !h.due_tensor("fc.w", &["weights"])
            .unwrap()
            .reductions_only()
    );
    // A count that does not match the plan records nothing.
    assert!(!h.save_reduction_values("gradient/fc.w", &due, &[1.0]));
    assert!(h.save_reduction_values("gradient/fc.w", &due, &[-1.0, 3.0]));
    h.step();
    assert_eq!(
        h.due_tensor("gradient/fc.w", &["gradients"]),
        None,
        "step 1 is not due"
    );
    h.close();
    assert_eq!(saved(&sink), fc_w_reductions(0));
    assert_eq!(
        sink.ended_steps(),
        vec![0],
        "the step with device-computed reductions is published once"
    );
}

#[test]
fn anything_due_follows_the_schedules_and_ends_with_close() {
    let sink = MemorySink::default();
    let mut h = hook(
        &sink,
        Hook::builder()
            .save_config(SaveConfig::every(100))
            .collection(Collection::new("gradients").with_save_config(SaveConfig::every(3))),
    );
    let due: Vec<bool> = (0..7)
        .map(|_| {
            let d = h.anything_due();
            h.step();
            d
        })
        .collect();
    assert_eq!(due, [true, false, false, true, false, false, true]);
    h.close();
    assert!(!h.anything_due());
}

#[test]
fn nothing_due_means_nothing_copied_or_sent() {
    let sink = MemorySink::default();
    let mut h = hook(&sink, Hook::builder().save_config(SaveConfig::every(100)));
    h.step(); // step 1: not due
    let big = vec![0.5f32; 1024];
    let v = TensorView::from_slice(&big, &[1024]).unwrap();
    assert!(!h.is_due("w", &["weights"]));
    assert!(!h.save_tensor("w", &v, &["weights"]));
    assert!(sink.tensors().is_empty());
}

#[test]
fn custom_regex_collection_selects_by_name() {
    let sink = MemorySink::default();
    let mut h = hook(
        &sink,
        Hook::builder()
            .save_config(SaveConfig::new(SaveConfigMode::never()))
            .collection(
                Collection::new("attention")
                    .with_regex(r"^layer0\.attn\.(scores|q|k)$")
                    .unwrap()
                    .with_save_config(SaveConfig::every(1)),
            ),
    );
    let x = [1u8, 2, 3];
    let v = TensorView::from_slice(&x, &[3]).unwrap();
    assert!(h.save_tensor("layer0.attn.scores", &v, &[]));
    assert!(!h.save_tensor("layer1.attn.scores", &v, &[]));
    assert!(!h.save_tensor("layer0.fc.weight", &v, &["weights"]));
    h.step();
    let names: Vec<String> = sink.tensors().into_iter().map(|t| t.name).collect();
    assert_eq!(names, vec!["layer0.attn.scores"]);
}

#[test]
fn bad_configuration_fails_at_build() {
    let err = Hook::builder()
        .include_regex("relus", "relu[")
        .build(MemorySink::default())
        .unwrap_err();
    assert!(err.to_string().contains("relu["), "{err}");
    let err = Hook::builder()
        .worker(2, 2)
        .build(MemorySink::default())
        .unwrap_err();
    assert!(err.to_string().contains("rank 2"), "{err}");
}

#[test]
fn mode_change_closes_a_step_with_records() {
    let sink = MemorySink::default();
    let mut h = hook(&sink, Hook::builder().save_config(SaveConfig::every(1)));
    h.set_mode(Mode::Train);
    h.save_scalar("loss", 0.5, &["losses"]);
    h.set_mode(Mode::Eval);
    h.save_scalar("loss", 0.7, &["losses"]);
    drop(h);
    let keys: Vec<StepKey> = sink.tensors().iter().map(|t| t.key).collect();
    assert_eq!(
        keys[0],
        StepKey {
            step: 0,
            mode: Mode::Train,
            mode_step: 0
        }
    );
    assert_eq!(
        keys[1],
        StepKey {
            step: 1,
            mode: Mode::Eval,
            mode_step: 0
        }
    );
}

#[test]
fn stop_request_is_seen_and_recorded_in_the_end_reason() {
    let sink = MemorySink::default();
    let stop = StopSignal::default();
    let mut h = hook(&sink, Hook::builder().stop_signal(stop.clone()));
    assert_eq!(h.stop_requested(), None);
    stop.request("LossNotDecreasing fired at step 40");
    stop.request("a later reason is ignored");
    assert_eq!(
        h.stop_requested().map(|c| c.reason).as_deref(),
        Some("LossNotDecreasing fired at step 40")
    );
    h.close();
    let records = sink.records.lock().unwrap();
    assert_eq!(
        records.last(),
        Some(&Record::Close(EndReason::Stopped(
            "LossNotDecreasing fired at step 40".into()
        )))
    );
}

/// A rule's request saves what the user's configuration would not: the loop offers
/// `relu1.output` in `outputs` (never due here), the request's regex collection takes it at
/// the requested steps, and a request given before the default schedule still unions with it.
#[test]
fn capture_requests_save_what_rules_ask_for_at_their_steps() {
    let sink = MemorySink::default();
    let mut h = hook(
        &sink,
        Hook::builder()
            .capture(
                CaptureRequest::new("relu_output", SaveConfig::every(3), "DeadRelu")
                    .with_regex(r"relu\d*\.output"),
            )
            .capture(CaptureRequest::new(
                "gradients",
                SaveConfig::every(4),
                "VanishingGradient",
            ))
            .save_config(SaveConfig::new(SaveConfigMode::never())),
    );
    let x = [1.0f32, 0.0];
    let v = TensorView::from_slice(&x, &[2]).unwrap();
    h.set_mode(Mode::Train);
    for _ in 0..7 {
        h.save_tensor("relu1.output", &v, &["outputs"]);
        h.save_tensor("gradient/fc1.weight", &v, &["gradients"]);
        h.save_tensor("fc1.weight", &v, &["weights"]);
        h.step();
    }
    h.close();
    let got: Vec<(String, u64)> = saved(&sink).into_iter().map(|(n, s, _)| (n, s)).collect();
    let want: Vec<(String, u64)> = [
        ("relu1.output", 0),
        ("gradient/fc1.weight", 0),
        ("relu1.output", 3),
        ("gradient/fc1.weight", 4),
        ("relu1.output", 6),
    ]
    .iter()
    .map(|(n, s)| (n.to_string(), *s))
    .collect();
    assert_eq!(got, want);
    let bad = Hook::builder()
        .capture(CaptureRequest::new("x", SaveConfig::every(1), "Rule").with_regex("("))
        .build(MemorySink::default());
    assert!(bad.is_err_and(|e| e.to_string().contains("Rule")));
}
