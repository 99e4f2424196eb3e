//! `NoData` means no data: every built-in rule, on a real run (written by the project's hook and
//! writer, or its span recorder and the system-metrics format, into a temporary folder) that
//! lacks what the rule needs, ends in `NoData` with the reason, never `NoIssuesFound`. A rule
//! that had what it reads at only some of the steps it judges says `judged N of M steps`
//! (N and M checked against the run's files); a rule that had it at every step says nothing
//! of the kind. The two cases of issue 35 item 4 are here too: DeadRelu under a hook config
//! file that lists collections (its ReLU outputs saved at step 0 only) and Dataloader on nodes
//! whose core count is unknown.

use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use smdebug_core::{Hook, HookBuilder, HookConfig, Mode, SaveConfig, TensorView};
use smdebug_format::system::SystemSample;
use smdebug_format::system::system_file_key;
use smdebug_profiler::spans::{Phase, SpanConfig, SpanRecorder};
use smdebug_profiler::system::NodeId;
use smdebug_read::trial::Trial;
use smdebug_rules::{RuleRunner, RuleSpec, RuleStatus, Status, Summary, capture_requests};
use smdebug_storage::LocalStorage;
use smdebug_storage::Storage;
use smdebug_testkit::runs::blocking_hook;
use tempfile::TempDir;

// ---------------------------------------------------------------------------------------------
// Writing runs

/// A run written by a hook saving every step, in TRAIN mode: `body` saves and steps, the run is
/// closed after.
fn tensor_run(body: impl FnOnce(&mut Hook)) -> TempDir {
    let dir = tempfile::tempdir().unwrap();
    let mut hook = blocking_hook(
        dir.path(),
        Hook::builder().save_config(SaveConfig::every(1)),
    );
    hook.set_mode(Mode::Train);
    body(&mut hook);
    hook.close();
    drop(hook);
    dir
}

fn save(hook: &mut Hook, name: &str, values: &[f32], shape: &[usize], collection: &str) {
    hook.save_tensor(
        name,
        &TensorView::from_slice(values, shape).unwrap(),
        &[collection],
    );
}

/// A batch of 4 samples of 3 units, every unit active in every sample (no ReLU is dead).
const ALIVE: [f32; 12] = [0.5, 1.0, 0.2, 0.7, 0.3, 0.9, 0.4, 0.8, 0.6, 1.1, 0.1, 0.2];

/// A loss that falls: `steps` TRAIN steps.
fn losses_only(steps: u64) -> TempDir {
    tensor_run(|hook| {
        for s in 0..steps {
            hook.save_scalar("loss", 2.0 / (s + 1) as f64, &["losses"]);
            hook.step();
        }
    })
}

/// Seconds since the epoch, ten minutes ago: the start of the profiler runs.
fn t0() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
        - 600
}

/// Writes `seconds` seconds of one node's system metrics, one sample of each series a second,
/// in the system-metrics format (`system/incremental/...`).
fn system_metrics(dir: &Path, node: &str, start_s: u64, seconds: u64, series: &[Series]) {
    let mut text = String::new();
    for i in 0..seconds {
        for (metric_type, name, dimension, value) in series {
            let sample = SystemSample {
                metric_type: (*metric_type).into(),
                name: (*name).into(),
                dimension: (*dimension).into(),
                value: *value,
                node_id: node.into(),
                timestamp: (start_s + i) as f64 + 0.5,
            };
            text.push_str(&serde_json::to_string(&sample).unwrap());
            text.push('\n');
        }
    }
    LocalStorage::new(dir)
        .unwrap()
        .put(&system_file_key(start_s, node), text.into_bytes().into())
        .unwrap();
}

/// One series of system metrics: type, name, dimension, the value of every sample.
type Series = (&'static str, &'static str, &'static str, f64);

const CPU_TOTAL: Series = ("cpu", "total", "CPUUtilization", 40.0);
const CPU0: Series = ("cpu", "cpu0", "CPUUtilization", 40.0);

/// Records spans of node `algo-<node>` into `dir` through the span recorder: `steps` TRAIN
/// steps of 100 ms from `start_s`, each after a 20 ms data load when `loads`, with a forward
/// pass inside each step when `forward`; `steps_spans` false leaves the step spans out.
fn spans(dir: &Path, node: u32, start_s: u64, steps: u64, what: Spans) {
    let (recorder, guard) = SpanRecorder::start_local(
        SpanConfig::default().node(NodeId::algo(node)).worker(0),
        dir,
    )
    .unwrap();
    let start = UNIX_EPOCH + Duration::from_secs(start_s);
    for s in 0..steps {
        let at = start + Duration::from_millis(150 * s);
        if what.loads {
            assert!(recorder.record(
                Phase::DataLoading,
                None,
                at,
                Duration::from_millis(20),
                Some((Mode::Train, s)),
            ));
        }
        let step_at = at + Duration::from_millis(25);
        if what.steps {
            assert!(recorder.record(
                Phase::Step(Mode::Train),
                None,
                step_at,
                Duration::from_millis(100),
                Some((Mode::Train, s)),
            ));
        }
        if what.forward {
            assert!(recorder.record(
                Phase::Forward,
                None,
                step_at + Duration::from_millis(5),
                Duration::from_millis(40),
                Some((Mode::Train, s)),
            ));
        }
    }
    let report = guard.finish().unwrap();
    assert_eq!(report.dropped, 0, "{report:?}");
}

#[derive(Clone, Copy)]
struct Spans {
    steps: bool,
    loads: bool,
    forward: bool,
}

const STEPS_AND_LOADS: Spans = Spans {
    steps: true,
    loads: true,
    forward: true,
};

// ---------------------------------------------------------------------------------------------
// Evaluating

fn evaluate(dir: &Path, spec: &str) -> Summary {
    evaluate_all(dir, &[spec])
}

fn evaluate_all(dir: &Path, specs: &[&str]) -> Summary {
    let mut builder = RuleRunner::builder(dir).write_into_run(false);
    for spec in specs {
        builder = builder.spec(RuleSpec::parse(spec).unwrap());
    }
    builder.build().unwrap().run_offline().unwrap()
}

/// The rule of `spec` ends in `NoData` on the run in `dir`, with a message holding `why`.
#[track_caller]
fn assert_no_data(dir: &Path, spec: &str, why: &str) -> RuleStatus {
    assert_no_data_among(dir, &[spec], why)
}

/// The rule of `specs[0]`, evaluated beside the others, ends in `NoData` with a message
/// holding `why`.
#[track_caller]
fn assert_no_data_among(dir: &Path, specs: &[&str], why: &str) -> RuleStatus {
    let spec = specs[0];
    let summary = evaluate_all(dir, specs);
    let name = spec.split(':').next().unwrap();
    let st = summary.rule(name).unwrap().clone();
    assert_eq!(st.status, Status::NoData, "{st:#?}");
    assert_eq!(st.datapoints, 0, "{st:#?}");
    assert!(
        st.message.contains(why),
        "{name}: {:?} lacks {why:?}",
        st.message
    );
    st
}

// ---------------------------------------------------------------------------------------------
// The twenty debugging rules, each on a run without what it needs

#[test]
fn vanishing_gradient_on_a_run_without_gradients() {
    let run = losses_only(5);
    assert_no_data(
        run.path(),
        "VanishingGradient",
        "no tensor of this run matched the rule's selection (collection `gradients`",
    );
}

#[test]
fn exploding_tensor_on_a_run_without_tensors() {
    // Profiler data only (read beside a profiler rule, as ProfilerReport would): the rule
    // reads every tensor and there is none.
    let run = tempfile::tempdir().unwrap();
    system_metrics(run.path(), "algo-1", t0(), 5, &[CPU_TOTAL]);
    assert_no_data_among(
        run.path(),
        &["ExplodingTensor", "OverallSystemUsage"],
        "no tensor data in this run",
    );
}

#[test]
fn poor_weight_initialization_on_a_run_saved_only_past_its_first_steps() {
    // It judges the first 10 steps; this run saved from step 10 on.
    let run = tensor_run(|hook| {
        for s in 0..20 {
            if s >= 10 {
                save(hook, "relu1.input", &ALIVE, &[4, 3], "relu_input");
                save(hook, "relu2.input", &ALIVE, &[4, 3], "relu_input");
                hook.save_scalar("loss", 1.0, &["losses"]);
            }
            hook.step();
        }
    });
    let st = assert_no_data(
        run.path(),
        "PoorWeightInitialization",
        "none was saved where the rule could check it: it needs tensors saved at the first 10 \
         global steps",
    );
    // The steps past its first 10 are not its to judge.
    assert_eq!(st.steps_in_scope, 0, "{st:#?}");
}

#[test]
fn saturated_activation_on_a_run_without_tanh_or_sigmoid() {
    let run = tensor_run(|hook| {
        for _ in 0..3 {
            save(hook, "relu1.output", &ALIVE, &[4, 3], "relu_output");
            hook.step();
        }
    });
    assert_no_data(
        run.path(),
        "SaturatedActivation",
        "no tensor of this run matched the rule's selection",
    );
}

#[test]
fn dead_relu_on_a_run_without_relu_outputs() {
    let run = losses_only(5);
    assert_no_data(
        run.path(),
        "DeadRelu",
        "no tensor of this run matched the rule's selection (names matching",
    );
}

#[test]
fn weight_update_ratio_on_a_run_that_saved_weights_at_eval_steps_only() {
    // Weights do not change in EVAL: those steps are not the rule's to judge.
    let run = tensor_run(|hook| {
        hook.save_scalar("loss", 1.0, &["losses"]);
        hook.step();
        hook.set_mode(Mode::Eval);
        for _ in 0..4 {
            save(hook, "fc1.weight", &ALIVE, &[4, 3], "weights");
            hook.step();
        }
    });
    let st = assert_no_data(
        run.path(),
        "WeightUpdateRatio",
        "`fc1.weight`, but none was saved where the rule could check it: it needs each weight \
         at two saved TRAIN (or GLOBAL) steps",
    );
    assert_eq!((st.steps_evaluated, st.steps_in_scope), (5, 1), "{st:#?}");
}

#[test]
fn all_zero_on_a_run_with_losses_only() {
    let run = losses_only(5);
    assert_no_data(
        run.path(),
        "AllZero",
        "no tensor of this run matched the rule's selection",
    );
}

#[test]
fn class_imbalance_on_fewer_labels_than_it_judges_from() {
    // 3 steps of 4 labels: 12 of the 500 it counts before judging.
    let run = tensor_run(|hook| {
        for _ in 0..3 {
            save(hook, "labels", &[0.0, 1.0, 2.0, 1.0], &[4], "labels");
            save(
                hook,
                "predictions",
                &[0.0, 1.0, 2.0, 2.0],
                &[4],
                "predictions",
            );
            hook.step();
        }
    });
    assert_no_data(
        run.path(),
        "ClassImbalance",
        "at 3 of 3 steps but never had enough to judge: it needs labels and predictions saved \
         at the same steps, 500 labels in all",
    );
}

#[test]
fn loss_not_decreasing_on_fewer_losses_than_two_windows() {
    // 15 values: the first window of 10 and half of the next.
    let run = losses_only(15);
    let st = assert_no_data(
        run.path(),
        "LossNotDecreasing",
        "read `loss` at 15 of 15 steps but never had enough to judge: it needs two windows of \
         10 losses (num_steps)",
    );
    assert_eq!(st.steps_judged, 15);
}

#[test]
fn overfit_on_a_run_without_evaluation_steps() {
    let run = losses_only(10);
    assert_no_data(
        run.path(),
        "Overfit",
        "never had enough to judge: it needs a loss saved at EVAL steps",
    );
}

#[test]
fn overtraining_on_fewer_training_losses_than_its_patience() {
    // Its moving average of the training loss takes `patience_train` (5) values.
    let run = losses_only(4);
    assert_no_data(
        run.path(),
        "Overtraining",
        "read `loss` at 4 of 4 steps but never had enough to judge: it needs a loss saved at \
         an EVAL step, or at 5 TRAIN steps",
    );
}

#[test]
fn similar_across_runs_against_a_run_with_other_tensors() {
    let other = tensor_run(|hook| {
        for _ in 0..3 {
            save(hook, "fc2.weight", &ALIVE, &[4, 3], "weights");
            hook.step();
        }
    });
    let run = tensor_run(|hook| {
        for _ in 0..3 {
            save(hook, "fc1.weight", &ALIVE, &[4, 3], "weights");
            hook.step();
        }
    });
    let spec = format!(
        "SimilarAcrossRuns:other_trials={}",
        other.path().to_str().unwrap()
    );
    assert_no_data(
        run.path(),
        &spec,
        "`fc1.weight`, but none was saved where the rule could check it: it needs tensors that",
    );
}

#[test]
fn stalled_training_on_a_run_without_steps() {
    let run = tempfile::tempdir().unwrap();
    system_metrics(run.path(), "algo-1", t0(), 5, &[CPU_TOTAL]);
    assert_no_data_among(
        run.path(),
        &["StalledTraining", "OverallSystemUsage"],
        "no tensor data in this run",
    );
}

#[test]
fn tensor_variance_on_a_run_of_scalars() {
    let run = losses_only(5);
    assert_no_data(
        run.path(),
        "TensorVariance:max_threshold=1e9",
        "`loss`, but none was saved where the rule could check it: it needs tensors of at \
         least two values",
    );
}

#[test]
fn unchanged_tensor_on_weights_saved_at_two_steps() {
    let run = tensor_run(|hook| {
        for s in 0..4 {
            if s < 2 {
                save(hook, "fc1.weight", &ALIVE, &[4, 3], "weights");
            } else {
                hook.save_scalar("loss", 1.0, &["losses"]);
            }
            hook.step();
        }
    });
    assert_no_data(
        run.path(),
        "UnchangedTensor",
        "read `fc1.weight` at 2 of 4 steps but never had enough to judge: it needs each tensor \
         at 3 saved steps",
    );
}

#[test]
fn check_input_images_on_fewer_images_than_it_judges_from() {
    let images = [0.9f32; 4 * 3 * 2 * 2];
    let run = tensor_run(|hook| {
        for _ in 0..3 {
            save(hook, "conv1.input", &images, &[4, 3, 2, 2], "input_image");
            hook.step();
        }
    });
    assert_no_data(
        run.path(),
        "CheckInputImages",
        "read `conv1.input` at 3 of 3 steps but never had enough to judge: it needs input \
         images of 500 samples in all",
    );
}

#[test]
fn nlp_sequence_ratio_on_a_run_without_sequences() {
    let run = losses_only(3);
    assert_no_data(
        run.path(),
        "NLPSequenceRatio",
        "no tensor of this run matched the rule's selection",
    );
}

#[test]
fn confusion_on_labels_without_predictions() {
    let run = tensor_run(|hook| {
        for _ in 0..3 {
            save(hook, "labels", &[0.0, 1.0, 2.0, 1.0], &[4], "labels");
            hook.step();
        }
    });
    assert_no_data(
        run.path(),
        "Confusion",
        "none was saved where the rule could check it: it needs labels and predictions saved at \
         the same steps",
    );
}

#[test]
fn feature_importance_overweight_on_no_more_features_than_it_weighs() {
    // Three importances: the three largest are all of them.
    let run = tensor_run(|hook| {
        for _ in 0..2 {
            for (f, v) in [("f0", 0.5), ("f1", 0.3), ("f2", 0.2)] {
                hook.save_scalar(
                    &format!("feature_importance/weight/{f}"),
                    v,
                    &["feature_importance"],
                );
            }
            hook.step();
        }
    });
    assert_no_data(
        run.path(),
        "FeatureImportanceOverweight",
        "at 2 of 2 steps but never had enough to judge: it needs importances of more than 3 \
         features",
    );
}

#[test]
fn tree_depth_on_a_run_without_trees() {
    let run = losses_only(3);
    assert_no_data(
        run.path(),
        "TreeDepth",
        "no tensor of this run matched the rule's selection",
    );
}

// ---------------------------------------------------------------------------------------------
// The eleven profiler rules, each on a run without what it needs

/// CPU metrics of one node (the total and one core), no GPU: a CPU-only machine.
fn cpu_only_run() -> TempDir {
    let run = tempfile::tempdir().unwrap();
    let start = t0();
    system_metrics(run.path(), "algo-1", start, 30, &[CPU_TOTAL, CPU0]);
    spans(run.path(), 1, start, 20, STEPS_AND_LOADS);
    run
}

const NO_GPU: &str = "no GPU metrics in this run";

#[test]
fn batch_size_on_a_cpu_only_run() {
    assert_no_data(cpu_only_run().path(), "BatchSize", NO_GPU);
}

#[test]
fn cpu_bottleneck_on_a_cpu_only_run() {
    assert_no_data(cpu_only_run().path(), "CPUBottleneck", NO_GPU);
}

#[test]
fn io_bottleneck_on_a_cpu_only_run() {
    assert_no_data(cpu_only_run().path(), "IOBottleneck", NO_GPU);
}

/// An idle GPU and no I/O wait readings at all: IOBottleneck cannot tell a bottleneck from
/// none, where it used to count the samples as checked.
#[test]
fn io_bottleneck_on_idle_gpus_without_io_wait_readings() {
    let run = tempfile::tempdir().unwrap();
    system_metrics(
        run.path(),
        "algo-1",
        t0(),
        30,
        &[CPU_TOTAL, ("gpu", "gpu0", "GPUUtilization", 2.0)],
    );
    assert_no_data(
        run.path(),
        "IOBottleneck:patience=5",
        "the GPUs were idle in every sample past patience and no I/O wait was read beside them",
    );
    // With I/O wait beside them, the same samples are judged.
    let judged = tempfile::tempdir().unwrap();
    system_metrics(
        judged.path(),
        "algo-1",
        t0(),
        30,
        &[
            CPU_TOTAL,
            ("gpu", "gpu0", "GPUUtilization", 2.0),
            ("cpu", "total", "I/OWaitPercentage", 1.0),
        ],
    );
    let st = evaluate(judged.path(), "IOBottleneck:patience=5");
    let st = st.rule("IOBottleneck").unwrap();
    assert_eq!(st.status, Status::NoIssuesFound, "{st:#?}");
}

#[test]
fn dataloader_on_a_run_without_data_loading_spans() {
    let run = tempfile::tempdir().unwrap();
    let start = t0();
    system_metrics(run.path(), "algo-1", start, 30, &[CPU_TOTAL, CPU0]);
    spans(
        run.path(),
        1,
        start,
        20,
        Spans {
            loads: false,
            ..STEPS_AND_LOADS
        },
    );
    assert_no_data(
        run.path(),
        "Dataloader",
        "no data-loading spans in this run",
    );
}

#[test]
fn gpu_memory_increase_on_a_cpu_only_run() {
    assert_no_data(cpu_only_run().path(), "GPUMemoryIncrease", NO_GPU);
}

#[test]
fn load_balancing_on_a_cpu_only_run_and_on_one_gpu() {
    assert_no_data(cpu_only_run().path(), "LoadBalancing", NO_GPU);
    // One GPU: readings, but nothing to compare them with.
    let run = tempfile::tempdir().unwrap();
    system_metrics(
        run.path(),
        "algo-1",
        t0(),
        120,
        &[CPU_TOTAL, ("gpu", "gpu0", "GPUUtilization", 60.0)],
    );
    assert_no_data(
        run.path(),
        "LoadBalancing",
        "one GPU per node: nothing to balance",
    );
}

#[test]
fn low_gpu_utilization_on_a_cpu_only_run() {
    assert_no_data(cpu_only_run().path(), "LowGPUUtilization", NO_GPU);
}

#[test]
fn max_initialization_time_on_a_run_without_step_spans() {
    let run = tempfile::tempdir().unwrap();
    let start = t0();
    system_metrics(run.path(), "algo-1", start, 30, &[CPU_TOTAL, CPU0]);
    spans(
        run.path(),
        1,
        start,
        20,
        Spans {
            steps: false,
            ..STEPS_AND_LOADS
        },
    );
    assert_no_data(
        run.path(),
        "MaxInitializationTime",
        "no step span in this run",
    );
}

#[test]
fn overall_system_usage_on_a_run_without_system_metrics() {
    let run = tempfile::tempdir().unwrap();
    spans(run.path(), 1, t0(), 20, STEPS_AND_LOADS);
    assert_no_data(
        run.path(),
        "OverallSystemUsage",
        "no system metrics in this run",
    );
}

#[test]
fn overall_framework_metrics_on_a_run_without_spans() {
    let run = tempfile::tempdir().unwrap();
    system_metrics(run.path(), "algo-1", t0(), 30, &[CPU_TOTAL, CPU0]);
    assert_no_data(
        run.path(),
        "OverallFrameworkMetrics",
        "no framework spans in this run",
    );
}

#[test]
fn step_outlier_on_a_run_without_step_spans() {
    let run = tempfile::tempdir().unwrap();
    let start = t0();
    system_metrics(run.path(), "algo-1", start, 30, &[CPU_TOTAL, CPU0]);
    spans(
        run.path(),
        1,
        start,
        20,
        Spans {
            steps: false,
            ..STEPS_AND_LOADS
        },
    );
    assert_no_data(run.path(), "StepOutlier", "no step spans in this run");
}

/// A run whose step spans were all in a trace file that could not be read (cut short): the
/// rule says that it found no step spans in what could be read, not that the run has none, and
/// the data warning names the file.
#[test]
fn step_outlier_on_a_run_whose_trace_file_was_cut_short_says_so() {
    let run = tempfile::tempdir().unwrap();
    let start = t0();
    system_metrics(run.path(), "algo-1", start, 30, &[CPU_TOTAL, CPU0]);
    spans(run.path(), 1, start, 20, STEPS_AND_LOADS);
    let mut cut = 0;
    for entry in smdebug_testkit::files::every_file(&run.path().join("framework")) {
        let bytes = std::fs::read(&entry).unwrap();
        std::fs::write(&entry, &bytes[..bytes.len() / 2]).unwrap();
        cut += 1;
    }
    assert_eq!(cut, 1, "one trace file");
    let st = assert_no_data(run.path(), "StepOutlier", "no step spans in this run");
    assert!(
        st.message
            .contains("that is of what could be read: 1 data warning names profiler data left out"),
        "{:?}",
        st.message
    );
    assert_eq!(st.warnings.len(), 1, "{st:#?}");
    assert!(st.warnings[0].contains("trace file skipped"), "{st:#?}");
}

// ---------------------------------------------------------------------------------------------
// The cases of the issue

/// Issue 35 item 4: with a hook config file that lists collections, DeadRelu's `relu_output`
/// is saved at the rule's own interval only, so at step 0 of a short run. DeadRelu judged that
/// one step, and says so: `judged 1 of 30 steps`, the 1 being the steps the files hold a ReLU
/// output at and the 30 the run's steps.
#[test]
fn dead_relu_under_a_hook_config_listing_collections_says_it_judged_one_step() {
    let dir = tempfile::tempdir().unwrap();
    let config_file = dir.path().join("hook_config.json");
    std::fs::write(
        &config_file,
        r#"{"HookParameters": {"save_interval": "1"},
            "CollectionConfigurations": [{"CollectionName": "losses"},
                                         {"CollectionName": "weights"}]}"#,
    )
    .unwrap();
    let config =
        HookConfig::from_smdebug_json(&std::fs::read_to_string(&config_file).unwrap()).unwrap();
    let mut builder = HookBuilder::from_config(config);
    for request in capture_requests(&[RuleSpec::new("DeadRelu")]).unwrap() {
        builder = builder.capture(request);
    }
    let run = dir.path().join("run");
    let mut hook = blocking_hook(&run, builder);
    for s in 0..30 {
        hook.save_scalar("loss", 1.0 / (s + 1) as f64, &["losses"]);
        save(&mut hook, "fc1.weight", &ALIVE, &[4, 3], "weights");
        save(&mut hook, "relu1.output", &ALIVE, &[4, 3], "relu_output");
        hook.step();
    }
    hook.close();
    drop(hook);

    // What the files hold: a ReLU output at step 0 only, 30 steps.
    let trial = Trial::open(run.to_str().unwrap()).unwrap();
    let relu_steps = trial.tensor("relu1.output").unwrap().steps(None).unwrap();
    assert_eq!(relu_steps, [0]);
    let steps = trial.steps(None).unwrap();
    assert_eq!(steps.len(), 30);

    let summary = evaluate(&run, "DeadRelu");
    let st = summary.rule("DeadRelu").unwrap();
    assert_eq!(st.status, Status::NoIssuesFound, "{st:#?}");
    assert_eq!((st.steps_judged, st.steps_in_scope), (1, 30), "{st:#?}");
    assert!(
        st.message.contains(&format!(
            "judged {} of {} steps",
            relu_steps.len(),
            steps.len()
        )),
        "{}",
        st.message
    );
}

/// Issue 35 item 4: on nodes with no per-core CPU metrics the core count is unknown, so the
/// workers cannot be weighed against it: `NoData`, where it used to say `NoIssuesFound` with
/// that very message. With two nodes, one with its cores known, it judged one of them and says
/// so.
#[test]
fn dataloader_without_the_core_count_has_no_data_and_with_it_on_one_of_two_nodes_says_so() {
    let run = tempfile::tempdir().unwrap();
    let start = t0();
    system_metrics(run.path(), "algo-1", start, 30, &[CPU_TOTAL]);
    spans(run.path(), 1, start, 20, STEPS_AND_LOADS);
    assert_no_data(
        run.path(),
        "Dataloader",
        "no per-core CPU metrics on the nodes that loaded data: the core count is unknown",
    );

    // Two nodes: algo-1 with one core (one worker for one core is within the thresholds),
    // algo-2 without its cores.
    let two = tempfile::tempdir().unwrap();
    system_metrics(two.path(), "algo-1", start, 30, &[CPU_TOTAL, CPU0]);
    system_metrics(two.path(), "algo-2", start, 30, &[CPU_TOTAL]);
    spans(two.path(), 1, start, 20, STEPS_AND_LOADS);
    spans(two.path(), 2, start, 20, STEPS_AND_LOADS);
    let summary = evaluate(two.path(), "Dataloader");
    let st = summary.rule("Dataloader").unwrap();
    assert_eq!(st.status, Status::NoIssuesFound, "{st:#?}");
    // The 20 loads of algo-1 were judged; algo-2's were not.
    assert_eq!(st.datapoints, 20, "{st:#?}");
    assert!(
        st.message.contains(
            "judged 1 of 2 nodes that loaded data: no per-core CPU metrics on algo-2, whose \
             core count is unknown"
        ),
        "{}",
        st.message
    );
}

// ---------------------------------------------------------------------------------------------
// Partial runs, and a whole one

/// 20 TRAIN steps with the loss at each, and everything else at the first 5 only (then 5 EVAL
/// steps with the weights): each per-step rule judged 5 of the steps it judges, and says so
/// with the numbers the files give.
#[test]
fn rules_that_had_their_tensors_at_some_steps_say_judged_n_of_m() {
    let gradient = [0.01f32, -0.02, 0.03, -0.01];
    let tanh = [
        0.1f32, -0.2, 0.3, 0.05, -0.4, 0.2, 0.1, 0.0, 0.3, -0.1, 0.2, 0.1,
    ];
    let run = tensor_run(|hook| {
        for s in 0..20 {
            hook.save_scalar("loss", 2.0 / (s + 1) as f64, &["losses"]);
            if s < 5 {
                let w: Vec<f32> = ALIVE.iter().map(|x| x + s as f32 * 0.1).collect();
                save(hook, "fc1.weight", &w, &[4, 3], "weights");
                save(hook, "gradient/fc1.weight", &gradient, &[2, 2], "gradients");
                save(hook, "relu1.output", &ALIVE, &[4, 3], "relu_output");
                save(
                    hook,
                    "tanh1.output",
                    &tanh,
                    &[4, 3],
                    "tanh_sigmoid_activations",
                );
            }
            hook.step();
        }
        hook.set_mode(Mode::Eval);
        for _ in 0..5 {
            save(hook, "fc1.weight", &ALIVE, &[4, 3], "weights");
            hook.save_scalar("loss", 1.0, &["losses"]);
            hook.step();
        }
    });
    let trial = Trial::open(run.path().to_str().unwrap()).unwrap();
    let all = trial.steps(None).unwrap().len();
    let train = trial.steps(Some(Mode::Train)).unwrap().len();
    let saved =
        |name: &str, mode: Option<Mode>| trial.tensor(name).unwrap().steps(mode).unwrap().len();
    assert_eq!((all, train), (25, 20));
    for (spec, n, m) in [
        ("VanishingGradient", saved("gradient/fc1.weight", None), all),
        ("DeadRelu", saved("relu1.output", None), all),
        ("SaturatedActivation", saved("tanh1.output", None), all),
        // WeightUpdateRatio judges TRAIN steps only: the EVAL steps are not in its M.
        (
            "WeightUpdateRatio",
            saved("fc1.weight", Some(Mode::Train)),
            train,
        ),
        (
            "AllZero:collection_names=gradients",
            saved("gradient/fc1.weight", None),
            all,
        ),
        (
            "ExplodingTensor:collection_names=gradients",
            saved("gradient/fc1.weight", None),
            all,
        ),
        (
            "TensorVariance:collection_names=gradients,max_threshold=1e9",
            saved("gradient/fc1.weight", None),
            all,
        ),
    ] {
        let summary = evaluate(run.path(), spec);
        let st = &summary.rules[0];
        assert_eq!(st.status, Status::NoIssuesFound, "{st:#?}");
        assert_eq!(
            (st.steps_judged as usize, st.steps_in_scope as usize),
            (n, m)
        );
        let wording = format!("judged {n} of {m} steps");
        assert!(
            n < m && st.message.contains(&wording),
            "{spec}: {}",
            st.message
        );
    }
}

/// A rule that had what it reads at every step it judges checked the run and found nothing:
/// `NoIssuesFound`, and no word of a part judged.
#[test]
fn a_rule_that_judged_every_step_says_no_issues_and_nothing_more() {
    let run = tensor_run(|hook| {
        for _ in 0..10 {
            save(hook, "relu1.output", &ALIVE, &[4, 3], "relu_output");
            hook.step();
        }
    });
    let summary = evaluate(run.path(), "DeadRelu");
    let st = summary.rule("DeadRelu").unwrap();
    assert_eq!(
        (st.status, st.steps_judged, st.steps_in_scope),
        (Status::NoIssuesFound, 10, 10),
        "{st:#?}"
    );
    assert!(!st.message.contains("judged"), "{}", st.message);
}
